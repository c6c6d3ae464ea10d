"""The README's main job as a newcomer runs it: ``thermostat demo`` in an empty folder.

The demo must tell its story in a screenful (at most ~120 lines, no traceback), keep the flow
logs in a file it names, and never try to reach a host outside the machine. The last point is
checked with an audit hook (``sys.addaudithook``) installed by a ``sitecustomize`` module in
every Python process the demo starts (the in-process Prefect server is a subprocess): it
records each name look-up and connection to anything but this machine. The variables that
silence MLflow's telemetry and Prefect's analytics, and those MLflow reads as "running in CI",
are removed from the demo's environment: the demo has to set them itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.orchestration.local_only import LOCAL_ONLY_ENVIRONMENT
from tests.support.cli import thermostat

pytestmark = [pytest.mark.integration, pytest.mark.slow]

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
_CI_MARKERS = ("CI", "PYTEST_CURRENT_TEST", "GITHUB_ACTIONS", "CIRCLECI", "GITLAB_CI", "JENKINS_URL")


def _newcomer_environment(tmp_path: Path) -> dict[str, str]:
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    removed = {*LOCAL_ONLY_ENVIRONMENT, *_CI_MARKERS}
    env = {key: value for key, value in os.environ.items()
           if key not in removed and not key.startswith(("THERMOSTAT_", "MLFLOW_", "PREFECT_"))}
    return env | {
        "PYTHONPATH": str(hook_dir),
        "THERMOSTAT_TEST_NETWORK_RECORD": str(tmp_path / "network.txt"),
        "PREFECT_HOME": str(tmp_path / "prefect-home"),  # a newcomer's empty ~/.prefect
    }


def _run_demo(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return thermostat("demo", cwd=folder, env=env, timeout=600)


def test_the_audit_hook_sees_an_attempt_to_leave_the_machine(tmp_path: Path) -> None:
    env = _newcomer_environment(tmp_path)
    code = "import socket\ntry:\n    socket.getaddrinfo('example.com', 443)\nexcept OSError:\n    pass\n"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    assert "example.com" in (tmp_path / "network.txt").read_text()


def test_demo_in_an_empty_folder_tells_its_story_locally(tmp_path: Path) -> None:
    env = _newcomer_environment(tmp_path)
    folder = tmp_path / "empty"
    folder.mkdir()
    record = tmp_path / "network.txt"

    for run in ("fresh", "repeat"):
        done = _run_demo(folder, env)
        output = done.stdout + done.stderr
        lines = output.splitlines()
        assert done.returncode == 0, output
        assert len(lines) <= 120, f"{run}: {len(lines)} lines\n{output}"
        assert "Traceback" not in output and "ERROR" not in output, output
        assert not record.exists(), f"{run}: the demo tried to leave the machine:\n{record.read_text()}"
        log_file = folder / ".thermostat" / "demo.log"
        assert f"Flow logs: {log_file}" in lines, output
        flow_log = log_file.read_text()
        assert "Beginning flow run" in flow_log and "flow 'post-finetune'" in flow_log
        # The story: registration with T and gate, drift, the refit and the escalation.
        for phrase in ("digits@champion", "temperature     T =", "gate            threshold", "DRIFT",
                       "REGISTERED -> version"):
            assert phrase in output, f"{run}: {phrase!r} missing\n{output}"
        # A repeat registers nothing new, and the challenger's drift is inside the cool-down of
        # the first run's event: no second refit, so no second escalation.
        assert ("NEW version, alias moved" in output) == (run == "fresh"), output
        assert ("ESCALATION: needs retraining or a data fix" in output) == (run == "fresh"), output
