"""The embedded Prefect API's start (no ``PREFECT_API_URL``): waited for patiently, announced,
and a start that does not come names the setting to raise.

Real Prefect, on a fresh ``PREFECT_HOME`` (its first start creates and migrates the database:
seconds, more on a busy machine). The limit is set far below that to produce the failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.embedded import STARTUP_TIMEOUT_SETTING
from flows.settings import ThermostatSettings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

# A flow run without PREFECT_API_URL; the notice comes after 0.2 s instead of a few seconds.
_PING_FLOW = """
import sys
import flows.embedded
import flows.pipeline  # installs the guard of the embedded API server
from prefect import flow

flows.embedded._NOTICE_AFTER = 0.2

@flow(name="ping")
def ping() -> int:
    return 1

try:
    ping()
except RuntimeError as error:
    print(f"FAILED: {error}")
    sys.exit(1)
print("PASSED")
"""


def _ping(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL" and not k.startswith("THERMOSTAT_")}
    env |= {"PREFECT_HOME": str(tmp_path / "home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", **variables}
    return subprocess.run([sys.executable, "-c", _PING_FLOW], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_the_default_start_up_limit_is_generous() -> None:
    assert ThermostatSettings().prefect_startup_timeout_seconds >= 120


def test_a_start_that_does_not_come_in_time_names_the_setting_and_is_announced(tmp_path: Path) -> None:
    done = _ping(tmp_path, **{STARTUP_TIMEOUT_SETTING: "1"})
    output = done.stdout + done.stderr
    assert done.returncode == 1 and "FAILED:" in done.stdout, output
    failure = done.stdout.split("FAILED:", 1)[1]
    assert "did not answer within 1 s" in failure and f"set {STARTUP_TIMEOUT_SETTING} higher" in failure, output
    assert "PREFECT_API_URL" in failure, output
    assert "thermostat: waiting for Prefect's temporary API server to start" in done.stderr, output
    assert f"waiting up to 1 s, {STARTUP_TIMEOUT_SETTING}" in done.stderr, output
