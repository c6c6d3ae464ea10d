"""Defaults and limits that the settings, the command line and the Dask engine share.

A module of plain constants that imports nothing, at the bottom of flows/: the settings read it
(every room reads the settings), the command line builds its options from it without loading
anything else, and the engine (flows.orchestration.engines) applies it. Each value has this one
home.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_ALERT_BLOCK", "DEFAULT_DASK_TIMEOUT", "DEFAULT_DASK_WORKERS", "DEFAULT_MIN_ACCURACY", "ENGINES",
    "MAX_DASK_TIMEOUT",
]

ENGINES = ("local", "dask")
"""The values of ``--engine``."""

DEFAULT_DASK_WORKERS = 2
"""Workers of the temporary local cluster when ``--dask-workers`` is not given."""

DEFAULT_DASK_TIMEOUT = 30.0
"""Seconds to wait for an existing scheduler to answer, then again for its first worker; and, on
any cluster, how long tasks may wait while the cluster has no worker at all (a nanny restarting
a killed worker takes a few seconds) before the computation is stopped."""

MAX_DASK_TIMEOUT = 86_400.0
"""The longest wait ``--dask-timeout`` accepts: a day."""

DEFAULT_MIN_ACCURACY = 0.5
"""The acceptance floor: a holdout (or recent traffic's) accuracy below it is refused, and
``thermostat diagnose`` calls a window below it an accuracy collapse (``--accuracy-floor``)."""

DEFAULT_ALERT_BLOCK = "thermostat-alerts"
"""The custom-webhook block ``thermostat alerts install --webhook-url`` saves, unless
``--block-name`` names another."""
