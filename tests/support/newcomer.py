"""A newcomer's environment: what ``thermostat demo`` is run in by the tests that check its story
(tests/integration/test_demo.py, and the session's ``demo_state``, which the other tests read).

An audit hook (``sys.addaudithook``) installed by a ``sitecustomize`` module in every Python
process the demo starts (the in-process Prefect server is a subprocess) records each name
look-up and connection to anything but this machine in the file ``THERMOSTAT_TEST_NETWORK_RECORD``
names. The variables that silence MLflow's telemetry and Prefect's analytics, and those MLflow
reads as "running in CI", are removed: the demo has to set them itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from flows.orchestration.local_only import LOCAL_ONLY_ENVIRONMENT

SITECUSTOMIZE = '''
import ipaddress, os, socket, sys

_RECORD = os.environ["THERMOSTAT_TEST_NETWORK_RECORD"]
_HERE = {"", "localhost", socket.gethostname(), socket.getfqdn()}


def _is_local(host):
    if isinstance(host, bytes):
        host = host.decode()
    if host is None or host in _HERE:
        return True
    try:
        address = ipaddress.ip_address(str(host).split("%")[0])
    except ValueError:
        return False  # a name to resolve that is not this machine's
    return address.is_loopback or address.is_unspecified


def _hook(event, args):
    if event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
        host = args[0]
    elif event == "socket.connect" and isinstance(args[1], tuple):
        host = args[1][0]
    else:
        return
    if not _is_local(host):
        with open(_RECORD, "a") as record:
            record.write(f"{os.getpid()} {event} {host!r}\\n")


sys.addaudithook(_hook)
'''

# Variables with which MLflow decides on its own that telemetry is off (it skips CI and tests).
CI_MARKERS = ("CI", "PYTEST_CURRENT_TEST", "GITHUB_ACTIONS", "CIRCLECI", "GITLAB_CI", "JENKINS_URL")


def newcomer_environment(root: Path) -> dict[str, str]:
    """The environment of a newcomer's terminal, with the audit hook under ``root/hook``, its record
    at ``root/network.txt`` (:func:`network_record`) and an empty ``PREFECT_HOME`` under ``root``."""
    hook_dir = root / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    removed = {*LOCAL_ONLY_ENVIRONMENT, *CI_MARKERS}
    env = {key: value for key, value in os.environ.items()
           if key not in removed and not key.startswith(("THERMOSTAT_", "MLFLOW_", "PREFECT_"))}
    return env | {
        "PYTHONPATH": str(hook_dir),
        "THERMOSTAT_TEST_NETWORK_RECORD": str(network_record(root)),
        "PREFECT_HOME": str(root / "prefect-home"),  # a newcomer's empty ~/.prefect
    }


def network_record(root: Path) -> Path:
    """Where the audit hook of :func:`newcomer_environment` ``(root)`` records a look-up or
    connection that leaves the machine (absent: none)."""
    return root / "network.txt"
