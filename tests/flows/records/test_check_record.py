"""A check's MLflow run as one typed record, and the alert situations as one table (no server).

:class:`flows.records.runs.CheckRecord` is written by the monitor (tags at opening, tags at the
verdict, the declared metrics) and read back by the monitor and the dashboard; the situations of
:mod:`flows.records.situations` are what the automations and the dashboard's alert list are built
from.
"""

from __future__ import annotations

import json
import typing
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from calibration import TemperatureStats
from flows.dashboard.data import ALERT_KINDS
from flows.orchestration.alerts import ALERTS
from flows.records.runs import POLICY_TAG, CheckMetric, CheckRecord, check_metric_names
from flows.records.situations import DASHBOARD_SITUATIONS, SITUATIONS, SituationKey, situation
from flows.records.stored import StoredRun
from flows.records.versions import VersionRecord, registered_version
from monitoring import (
    ConfidenceProfile,
    DriftPolicy,
    DriftReference,
    SequentialState,
    decide_drift,
    drift_metrics,
    summarise_arrays,
    update_sequential,
    warn_before_labels,
    with_stream_checks,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
VERSION = registered_version("digits", "3", VersionRecord.example().to_tags(), ["champion"])


def _run(tags: dict[str, str], metrics: dict[str, float] | None = None, status: str = "FINISHED") -> StoredRun:
    return StoredRun(run_id="r1", experiment_id="7", status=status, start_time_ms=0, end_time_ms=0,  # type: ignore[arg-type]
                     tags=tags, metrics=metrics or {})


def _rich_report() -> typing.Any:
    """A drifting report with every part a check can have: groups, the sequential rule, the early warning."""
    rng = np.random.default_rng(0)
    logits = 4.0 * rng.normal(size=(3_000, 4))
    labels = rng.integers(0, 4, size=3_000)
    groups = np.where(rng.random(3_000) < 0.5, "eu:west", "web")
    summary = summarise_arrays(logits, labels, temperature=1.0, start=T0, end=T0 + timedelta(days=1), groups=groups)
    report = decide_drift(summary, DriftReference.of(0.01), DriftPolicy(n_resamples=200))
    hot = TemperatureStats(temperature=1.0, n=500, gradient_sum=150.0, gradient_square_sum=600.0, curvature_sum=500.0)
    sequential = update_sequential(SequentialState.initial(1.0), hot, start=T0, end=T0 + timedelta(hours=1))
    profile = ConfidenceProfile.from_logits(logits, labels)
    warning = warn_before_labels(ConfidenceProfile.from_logits(0.2 * logits), profile)
    return with_stream_checks(report, sequential=sequential, early_warning=warning)


def test_a_check_round_trips_through_its_tags_and_keeps_its_policy_and_streak() -> None:
    policy = DriftPolicy(ece_tolerance=0.05, insufficient_data_streak=4, cooldown=timedelta(hours=2))
    opened = CheckRecord.opening(VERSION, T0, T0 + timedelta(days=1), policy=policy, prefect_flow_run_id="flow-9")
    decided = opened.decided("drift", refit_recommended=True, tests_fired=("temperature", "ece"),
                             insufficient_streak=0, groups=["web", "eu:west"], shift_kind="calibration_drift")
    read = CheckRecord.from_run(_run(opened.opening_tags() | decided.verdict_tags()))
    assert read is not None and read.run is not None
    assert replace(read, run=None) == decided
    assert decided.verdict_tags()["thermostat.shift_kind"] == read.shift_kind == "calibration_drift"
    assert read.policy == policy and read.insufficient_streak == 0 and read.prefect_flow_run_id == "flow-9"
    assert opened.opening_tags()[POLICY_TAG] == json.dumps(policy.to_dict(), sort_keys=True)
    assert "thermostat.verdict" not in opened.opening_tags(), "a run without a verdict never reached its end"
    with pytest.raises(ValueError, match="has no verdict yet"):
        opened.verdict_tags()


def test_every_metric_a_check_writes_and_every_one_a_reader_asks_for_is_declared() -> None:
    report = _rich_report()
    assert report.sequential is not None and report.early_warning is not None and report.groups
    names, prefixes = check_metric_names()
    written = CheckRecord.metrics_of(report, VERSION.temperature)
    undeclared = {key for key in written if key not in names and not key.startswith(prefixes)}
    assert undeclared == set()
    assert set(drift_metrics(report)) <= set(written) and {"temperature", "baseline_ece"} <= set(written)
    assert {key for key in written if key.startswith(prefixes)}, "the groups' metrics are written"
    assert set(typing.get_args(CheckMetric)) <= names
    opened = CheckRecord.opening(VERSION, T0, T0, policy=DriftPolicy(), prefect_flow_run_id=None)
    decided = opened.decided(report.verdict, refit_recommended=report.refit_recommended, tests_fired=report.tests_fired,
                             insufficient_streak=0, groups=[g.group for g in report.groups])
    record = CheckRecord.from_run(_run(opened.opening_tags() | decided.verdict_tags(), written))
    assert record is not None and set(record.group_ece()) == {"web", "eu:west"}
    with pytest.raises(KeyError, match="not a metric a check declares"):
        record.metric("eec")  # type: ignore[arg-type]


def test_a_check_written_before_the_policy_and_the_streak_were_recorded_reads_them_as_none() -> None:
    """The tags of a check of the previous main (463a28a): verdict among the opening tags, no
    ``thermostat.policy``, no streak on the run; and a run from before ``thermostat.kind``."""
    tags = {
        "thermostat.model_name": "digits", "thermostat.model_version": "1", "thermostat.aliases": "champion,shadow",
        "thermostat.verdict": "ok", "thermostat.window_start": "2026-03-01T00:00:00+00:00",
        "thermostat.window_end": "2026-03-02T00:00:00+00:00", "thermostat.refit_recommended": "false",
        "thermostat.tests_fired": "none", "temperature": "2.5", "checkpoint_uri": "runs:/r/checkpoint",
        "checkpoint_digest": "d" * 64, "thermostat.kind": "check",
    }
    for legacy in (tags, {key: value for key, value in tags.items() if key != "thermostat.kind"}):
        record = CheckRecord.from_run(_run(legacy, {"ece": 0.03, "n": 900.0}))
        assert record is not None
        assert (record.verdict, record.policy, record.insufficient_streak, record.tests_fired) == ("ok", None, None, ())
        assert record.aliases == ("champion", "shadow") and record.window_end == T0 + timedelta(days=1)
        assert (record.temperature, record.metric("ece"), record.metric("p_value")) == (2.5, 0.03, None)
    assert CheckRecord.from_run(_run({"thermostat.kind": "refit", "thermostat.model_name": "digits"})) is None
    failed = CheckRecord.from_run(_run(tags, status="FAILED"))
    assert failed is not None and failed.verdict == "failed" and failed.failure is not None


@pytest.mark.parametrize(("tag", "value", "message"), [
    (POLICY_TAG, "{not json", "tag 'thermostat.policy' is not JSON"),
    (POLICY_TAG, "[1, 2]", "expected a JSON object of the drift policy"),
    (POLICY_TAG, '{"ece_tolerance": -1}', "tag 'thermostat.policy': ece_tolerance must be"),
    ("thermostat.window_end", "yesterday", "tag 'thermostat.window_end' is 'yesterday'; expected an ISO 8601 time"),
    ("thermostat.insufficient_data_streak", "-1", "expected a count >= 0"),
])
def test_an_unreadable_tag_is_refused_naming_the_run_and_the_tag(tag: str, value: str, message: str) -> None:
    tags = CheckRecord.opening(VERSION, T0, T0, policy=DriftPolicy(), prefect_flow_run_id=None).opening_tags()
    with pytest.raises(ValueError, match="check run r1") as caught:
        CheckRecord.from_run(_run(tags | {tag: value}))
    assert message in str(caught.value)


def test_a_policy_written_by_a_later_version_is_read_for_what_this_one_knows() -> None:
    written = DriftPolicy(min_window=80).to_dict() | {"a_knob_of_later": 3}
    tags = CheckRecord.opening(VERSION, T0, T0, policy=DriftPolicy(), prefect_flow_run_id=None).opening_tags()
    record = CheckRecord.from_run(_run(tags | {POLICY_TAG: json.dumps(written)}))
    assert record is not None and record.policy == DriftPolicy(min_window=80)


# ------------------------------------------------------------------------- one table of situations


def test_the_automations_and_the_dashboard_read_one_table_of_situations() -> None:
    assert [s.key for s in SITUATIONS] == list(typing.get_args(SituationKey))
    # Every automation is one way a situation is raised: its key, event and name are the table's.
    assert [(a.situation, a.key, a.event, a.name) for a in ALERTS] == [
        (s.key, r.automation, r.event, r.name) for s in SITUATIONS for r in s.raised_by]
    assert len({a.name for a in ALERTS}) == len(ALERTS)
    # The dashboard lists the situations it can recognise from the records, by their keys.
    assert ALERT_KINDS == tuple(s.key for s in DASHBOARD_SITUATIONS) == (
        "drift", "label_shift", "refit_refused", "insufficient_data", "undetermined", "check_failed",
        "unreadable_version")
    assert all(s.on_dashboard for s in DASHBOARD_SITUATIONS)
    # One name for the refused refit: the automation's key is the dashboard's kind; the old key still reads.
    assert next(a for a in ALERTS if a.name == "thermostat: refit refused").key == "refit_refused"
    assert situation("refit_failed") is situation("refit_refused")
    with pytest.raises(KeyError, match="the situations are"):
        situation("refit_exploded")


def test_a_drift_test_that_does_not_declare_its_metrics_is_refused() -> None:
    from monitoring import DriftTest

    with pytest.raises(TypeError, match="must declare metric_names"):
        class VolumeTest(DriftTest):  # noqa: F841 - defining it is the test
            name = "volume"

            def run(self, evidence: typing.Any, *, level: float, policy: DriftPolicy, seed: int) -> typing.Any:
                raise NotImplementedError

            @staticmethod
            def effect_beyond(policy: DriftPolicy) -> str:
                return ""
    assert "volume" not in DriftTest.registry


def test_the_dashboard_reads_what_fired_and_what_would_decide_from_a_check_run() -> None:
    """The dashboard's Check read metrics the record did not declare: every check run was unreadable."""
    from flows.dashboard.data import Thresholds, _check
    from flows.records.stored import StoredRun

    tags = {"thermostat.kind": "check", "thermostat.model_name": "m", "thermostat.model_version": "1",
            "thermostat.aliases": "champion", "thermostat.verdict": "undetermined", "thermostat.tests_fired": "none",
            "thermostat.window_end": "2026-03-01T00:00:00+00:00"}
    metrics = {"rows_to_decide": 9100.0, "window_temperature": 1.7, "window_temperature_low": 1.6,
               "window_temperature_high": 1.8, "temperature_z": 0.4, "temperature_p_value": 0.9}
    run = StoredRun(run_id="r1", experiment_id="0", status="FINISHED", start_time_ms=0, end_time_ms=1, tags=tags,
                    metrics=metrics)
    check = _check(run, None, None, Thresholds(0.02, 0.01, 500, 3))
    assert check is not None and check.verdict == "undetermined" and check.rows_to_decide == 9100
    assert (check.window_temperature, check.temperature_z, check.tests_fired) == (1.7, 0.4, ())
