"""What a flow run ends with (flows.records.outcomes): the one line a deployment run's caller reads,
and its JSON; built from the outcomes without a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from flows.pipelines.monitor import VersionCheck, checks_summary
from flows.records.outcomes import MESSAGE_LIMIT, FlowSummary


def _check(model: str, version: str, verdict: str = "insufficient_data", warnings: tuple[str, ...] = ()) -> VersionCheck:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    return VersionCheck(model_name=model, version=version, aliases=("champion",), temperature=1.5,
                        window_start=moment, window_end=moment, verdict=verdict,  # type: ignore[arg-type]
                        reasons=(), report=None, run_id=None, run_url=None, event_id=None, warnings=warnings)


def test_a_fleet_summary_names_every_check_and_its_warnings() -> None:
    summary = checks_summary("monitor-fleet", [_check("tickets", "3"), _check("digits", "1", warnings=("w",))],
                             "2 model(s)")
    assert summary.message == ("checked 2 serving version(s) of 2 model(s): tickets v3 (@champion, T=1.5) "
                               "insufficient_data (no traffic logged); digits v1 (@champion, T=1.5) "
                               "insufficient_data (no traffic logged); warning: 1 stale serving")
    assert summary.status == "insufficient_data"
    assert [c["warnings"] for c in summary.details["checks"]] == [[], ["w"]]  # type: ignore[index, union-attr]
    json.dumps(summary.to_dict(), allow_nan=False)  # what the run's last own log line carries


def test_an_empty_fleet_says_so() -> None:
    summary = checks_summary("monitor-fleet", [], "the fleet")
    assert (summary.status, summary.message) == ("nothing_checked", "the fleet: no serving version to check")


def test_a_long_message_is_cut_and_the_details_are_json() -> None:
    summary = FlowSummary.of("refit", "failed", "x" * 2000, temperature=float("inf"), interval=(1.0, 2.0))
    assert len(summary.message) == MESSAGE_LIMIT and summary.message.endswith(" ...")
    assert summary.details == {"temperature": None, "interval": [1.0, 2.0]}
    with pytest.raises(ValidationError):
        FlowSummary(flow="refit", status="failed", message="x" * (MESSAGE_LIMIT + 1))
