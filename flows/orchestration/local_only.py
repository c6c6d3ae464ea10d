"""Keep a run on this machine: no telemetry, analytics or usage reports leave it.

MLflow 3 sends usage telemetry to a remote host unless told not to, and Prefect's server
sends analytics heartbeats (on a fresh state they can also fail with a long "database is
locked" traceback). The demo and the tests set these variables before MLflow or Prefect
start; a production deployment sets them in its environment (docs/production.md).
"""

from __future__ import annotations

import os

__all__ = ["LOCAL_ONLY_ENVIRONMENT", "stay_local"]

LOCAL_ONLY_ENVIRONMENT: dict[str, str] = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
}


def stay_local() -> None:
    """Set :data:`LOCAL_ONLY_ENVIRONMENT` in this process (and so in the servers it starts).

    Examples
    --------
    >>> stay_local()
    >>> os.environ["MLFLOW_DISABLE_TELEMETRY"]
    'true'
    """
    os.environ.update(LOCAL_ONLY_ENVIRONMENT)
