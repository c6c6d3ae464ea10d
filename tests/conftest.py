from __future__ import annotations

import os
import tempfile
from pathlib import Path

from flows.orchestration.local_only import LOCAL_ONLY_ENVIRONMENT

# Prefect reads its home at import: keep every test run's Prefect state out of ~/.prefect.
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="thermostat-prefect-home-"))
# No telemetry or analytics leaves the machine from a test run either.
os.environ.update(LOCAL_ONLY_ENVIRONMENT)

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=50, deadline=None)
# CI draws the same examples every run (derandomize): a red build is reproducible, never a
# fresh draw that happened to hit an edge case this once.
settings.register_profile(
    "ci", max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# Real classifier outputs (CIFAR test sets of published models), shipped with the tests;
# origins, licences and reference figures in tests/data/real-logits/README.md.
REAL_LOGITS = Path(__file__).resolve().parent / "data" / "real-logits"


@pytest.fixture(scope="session")
def real_logits_dir() -> Path:
    if not REAL_LOGITS.is_dir():
        pytest.fail(f"real logits folder not found at {REAL_LOGITS}; it is part of the repository (git checkout it)")
    return REAL_LOGITS
