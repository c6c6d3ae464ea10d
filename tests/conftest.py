"""The suite's fixtures and tiers (the process's environment is set by the root conftest.py, before
anything imports Prefect)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.servers import note_current_test

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


# The fixtures that start a server process (or need one running): a test that uses any of them,
# directly or through another fixture, must be marked `integration`, so that the fast tier
# (`make test-fast`: -m "not integration and not slow") starts none. Checked at collection here;
# a server started in a test's body goes through tests/support/servers.running, which checks the
# same at run time.
SERVER_FIXTURES = frozenset({
    "prefect_api",            # Prefect's test harness: a temporary API server process
    "worker_prefect_server",  # `prefect server start`, one per pytest-xdist worker
    "prefect_server",         # the same, per test
    "postgres_server",        # a throwaway PostgreSQL cluster
    "server_url",             # `mlflow server` (tests/integration/test_registration_faults.py)
    "credentialed_server",    # `mlflow server` behind basic auth (tests/integration/test_credentials.py)
    "demo_state",             # `thermostat demo` (its temporary Prefect server)
    "dashboard",              # `thermostat dashboard`
    "cluster",                # a local Dask cluster (tests/flows/orchestration/test_engines.py)
    "remote_cluster",         # `dask scheduler` and `dask worker`
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _refuse_unmarked_servers(items)
    _heaviest_files_first(items)


def _refuse_unmarked_servers(items: list[pytest.Item]) -> None:
    unmarked = sorted(
        f"{item.nodeid} (uses {', '.join(sorted(SERVER_FIXTURES.intersection(getattr(item, 'fixturenames', ()))))})"
        for item in items
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())) and item.get_closest_marker("integration") is None
    )
    if unmarked:
        raise pytest.UsageError(
            "these tests start servers but are not marked integration (mark them @pytest.mark.integration, "
            "the fast tier starts no server):\n  " + "\n  ".join(unmarked)
        )


def _test_file(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _heaviest_files_first(items: list[pytest.Item]) -> None:
    """Order the test files so that those holding a slow test come first, then those holding an
    integration test, then the rest; within each, the files with more such tests first (each
    file's tests in their own order, ties in collection order). `make test` hands whole files to
    its workers in this order (``--dist loadfile --no-loadscope-reorder``): the files of minutes
    start while the other worker is still busy, and the many files of seconds fill both workers'
    last minutes. (xdist's default order, files with the most tests first, starts the long files
    of few tests last.)"""
    rank: dict[str, int] = {}
    heavy: dict[str, int] = {}
    for item in items:
        weight = 0 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("integration") else 2
        rank[_test_file(item)] = min(rank.get(_test_file(item), 2), weight)
        heavy[_test_file(item)] = heavy.get(_test_file(item), 0) + (weight < 2)
    items.sort(key=lambda item: (rank[_test_file(item)], -heavy[_test_file(item)]))


def pytest_runtest_setup(item: pytest.Item) -> None:
    note_current_test(item.nodeid, item.get_closest_marker("integration") is not None)
