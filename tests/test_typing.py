"""`mypy --strict` is clean on the three packages, checked in CI, not by review."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a minute or more from a cold cache; `make typecheck` is the developers' loop
def test_mypy_strict_is_clean() -> None:
    # The checkout's own cache (.mypy_cache, `make typecheck`'s): mypy re-checks every module
    # that changed and every module that depends on one, so a warm cache decides the same in
    # seconds. A clean clone (CI) starts cold and checks everything.
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "calibration", "monitoring", "flows", "thermostat", "docsite"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout
