"""What every test run shares, the docstring examples of the packages included.

The process's environment, set before anything imports Prefect, and the names every docstring
example may take as imported (as NumPy's docstring standard takes ``import numpy as np``; the
packages' docstrings say so once, in their first paragraph). ``pytest`` collects the examples of
``calibration``, ``monitoring``, ``flows`` and ``thermostat`` (``--doctest-modules`` over the
``testpaths`` of ``pyproject.toml``); the modules of ``tests/`` are collected for their tests only.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from flows.orchestration.local_only import LOCAL_ONLY_ENVIRONMENT

# Prefect reads its home at import: keep every test run's Prefect state out of ~/.prefect, and
# each pytest-xdist worker's apart (a worker inherits the home its controller made: their
# embedded API servers would share one database).
if os.environ.get("PYTEST_XDIST_WORKER") or "PREFECT_HOME" not in os.environ:
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="thermostat-prefect-home-")
# No telemetry or analytics leaves the machine from a test run either.
os.environ.update(LOCAL_ONLY_ENVIRONMENT)
# No test leaves a compiler running behind it (minutes of a core; one test checks that a fresh
# installation's first large input starts one, and stops it).
os.environ["THERMOSTAT_BACKGROUND_COMPILE"] = "0"

import numpy as np
import pytest
from _pytest.doctest import DoctestModule

TESTS = Path(__file__).resolve().parent / "tests"


@pytest.fixture(autouse=True, scope="session")
def _example_names(doctest_namespace: dict[str, Any]) -> None:
    doctest_namespace.update(np=np, UTC=UTC, datetime=datetime, timedelta=timedelta)


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Generator[None, Any, Any]:
    """The doctests of the packages only: a module of ``tests/`` is collected for its tests."""
    collected = yield
    if TESTS in file_path.parents:
        return [collector for collector in collected if not isinstance(collector, DoctestModule)]
    return collected
