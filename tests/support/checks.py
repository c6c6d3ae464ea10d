"""A spy on the one check (:func:`monitoring.check_version`) where the monitor's flows call it."""

from __future__ import annotations

from typing import Any

import pytest

import flows.pipelines.monitor as monitor_flow
from monitoring import CheckOutcome, check_version


def spy_check_version(monkeypatch: pytest.MonkeyPatch) -> list[CheckOutcome]:
    """The outcome of every :func:`monitoring.check_version` the monitor and the fleet check run
    from now on (the function itself runs: the spy only keeps what it returns)."""
    assert monitor_flow.check_version is check_version
    outcomes: list[CheckOutcome] = []

    def spy(*args: Any, **kwargs: Any) -> CheckOutcome:
        outcomes.append(check_version(*args, **kwargs))
        return outcomes[-1]

    monkeypatch.setattr(monitor_flow, "check_version", spy)
    return outcomes
