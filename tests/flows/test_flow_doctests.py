"""The docstring examples of the monitor/refit helpers in flows/ run (the pure packages' are run
by tests/test_doctests.py)."""

from __future__ import annotations


import pytest
from tests.support.examples import run_examples

MODULES = ("flows.orchestration.events", "flows.pipelines.monitor", "flows.registry.serving", "flows.settings", "flows.pipelines.tasks", "flows.pipelines.traffic", "flows.records.versions",
           "flows.records.stored", "flows.records.situations")


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    result = run_examples(module_name)
    assert result.attempted > 0 or module_name == "flows.orchestration.events"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {module_name}"
