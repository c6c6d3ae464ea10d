"""The README's main job as a newcomer runs it: ``thermostat demo`` in an empty folder.

The demo must tell its story in a screenful (at most ~120 lines, no traceback), keep the flow
logs in a file it names, and never try to reach a host outside the machine. The last point is
checked with an audit hook (``sys.addaudithook``) installed by a ``sitecustomize`` module in
every Python process the demo starts (the in-process Prefect server is a subprocess): it
records each name look-up and connection to anything but this machine. The variables that
silence MLflow's telemetry and Prefect's analytics, and those MLflow reads as "running in CI",
are removed from the demo's environment: the demo has to set them itself
(:mod:`tests.support.newcomer`).

The first run is the session's ``demo_state`` (run once per test run in that environment, in an
empty folder; the dashboard's and the tutorial's tests read its state); the repeat runs on a copy
of its folder and of its ``PREFECT_HOME``, as the same newcomer running it a second time.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import DemoState
from tests.support.cli import thermostat
from tests.support.newcomer import network_record, newcomer_environment

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _run_demo(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return thermostat("demo", cwd=folder, env=env, timeout=600)


def test_the_audit_hook_sees_an_attempt_to_leave_the_machine(tmp_path: Path) -> None:
    env = newcomer_environment(tmp_path)
    code = "import socket\ntry:\n    socket.getaddrinfo('example.com', 443)\nexcept OSError:\n    pass\n"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    assert "example.com" in network_record(tmp_path).read_text()


def test_demo_in_an_empty_folder_tells_its_story_locally(demo_state: DemoState, tmp_path: Path) -> None:
    # The repeat: the same newcomer's folder and ~/.prefect, copied (the first run's are shared).
    env = newcomer_environment(tmp_path)
    folder = tmp_path / "empty"
    shutil.copytree(demo_state.state_dir.parent, folder, symlinks=True)
    shutil.copytree(demo_state.prefect_home, env["PREFECT_HOME"], symlinks=True)
    record = network_record(tmp_path)

    for run in ("fresh", "repeat"):
        if run == "fresh":
            output, log_file, left = (demo_state.output + demo_state.stderr, demo_state.state_dir / "demo.log",
                                      demo_state.network_record)
        else:
            done = _run_demo(folder, env)
            output, log_file, left = done.stdout + done.stderr, folder / ".thermostat" / "demo.log", record
            assert done.returncode == 0, output
        lines = output.splitlines()
        assert len(lines) <= 120, f"{run}: {len(lines)} lines\n{output}"
        assert "Traceback" not in output and "ERROR" not in output, output
        assert not left.exists(), f"{run}: the demo tried to leave the machine:\n{left.read_text()}"
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
