"""Flow unit tests: synthetic scored sets, no MLflow store and no Prefect API."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# Nothing under ~ or the repo: Prefect reads its home when first imported.
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="thermostat-prefect-home-"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

import pytest

from flows.settings import ThermostatSettings


@pytest.fixture
def settings(tmp_path: Path) -> ThermostatSettings:
    return ThermostatSettings(state_dir=tmp_path, bootstrap_resamples=200, min_accuracy=0.3,
                              gate_target_accuracy=0.6)
