"""The monitor's event and state rules as a pure function: every rule without a server."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from calibration import (
    PriorCorrection,
    PriorShiftTest,
    ReferencePriors,
    ReweightingGain,
    ServedPriorStats,
    TemperatureStats,
    diagnose_shift,
    prior_shift_test,
)
from flows.records.events import (
    CONFIDENCE_SHIFT_EVENT,
    DRIFT_EVENT,
    INSUFFICIENT_DATA_EVENT,
    LABEL_SHIFT_EVENT,
    CheckContext,
    LabelShiftEvent,
)
from flows.pipelines.monitor_rules import monitor_step
from flows.records.versions import MonitorState
from monitoring import (
    DEFAULT_POLICY,
    ConfidenceProfile,
    DriftPolicy,
    DriftReference,
    DriftReport,
    SequentialCheck,
    SequentialState,
    decide_drift,
    summarise_arrays,
    update_sequential,
    warn_before_labels,
    with_stream_checks,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
NOW = T0 + 3 * HOUR
CONTEXT = CheckContext(aliases=("champion",), window_start=(T0 + 2 * HOUR).isoformat(), window_end=NOW.isoformat(),
                       mlflow_experiment="thermostat-monitoring", mlflow_run_id="run1")


def _rows(n: int, temperature: float = 1.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = 2.0 * rng.normal(size=(n, 5))
    p = np.exp(logits / temperature)
    p /= p.sum(axis=1, keepdims=True)
    return logits, (rng.random((n, 1)) > p.cumsum(axis=1)).sum(axis=1).clip(0, 4)


def _report(n: int = 2_000, *, temperature: float = 1.0, last_drift_at: datetime | None = None,
            equivalence_margin: float = DEFAULT_POLICY.equivalence_margin) -> DriftReport:
    summary = summarise_arrays(*_rows(n, temperature), temperature=1.0, start=T0 + 2 * HOUR, end=NOW)
    return decide_drift(summary, DriftReference.of(0.0), DriftPolicy(n_resamples=200, equivalence_margin=equivalence_margin),
                        last_drift_at=last_drift_at)


def _alarm() -> SequentialCheck:
    hot = TemperatureStats(temperature=1.0, n=500, gradient_sum=150.0, gradient_square_sum=600.0, curvature_sum=500.0)
    first = update_sequential(SequentialState.initial(1.0), hot, start=T0, end=T0 + HOUR)
    return update_sequential(first.state, hot, start=T0 + HOUR, end=T0 + 3 * HOUR)


def _quiet() -> SequentialCheck:
    calm = TemperatureStats(temperature=1.0, n=500, gradient_sum=1.0, gradient_square_sum=500.0, curvature_sum=500.0)
    return update_sequential(SequentialState.initial(1.0), calm, start=T0, end=T0 + HOUR)


def _shifted() -> object:
    logits, labels = _rows(3_000)
    reference = ConfidenceProfile.from_logits(logits, labels)
    return warn_before_labels(ConfidenceProfile.from_logits(1.6 * _rows(3_000, seed=1)[0]), reference)


def _events(step: object) -> list[str]:
    return [planned.event for planned in step.events]  # type: ignore[attr-defined]


def test_a_drift_emits_its_event_and_the_cool_down_starts_only_once_it_was_sent() -> None:
    report = _report(temperature=2.0)
    assert report.refit_recommended
    step = monitor_step(report, MonitorState(), DEFAULT_POLICY, NOW, live=True, context=CONTEXT)
    assert _events(step) == [DRIFT_EVENT]
    payload = step.events[0].payload.to_payload()
    assert payload["verdict"] == "drift" and payload["mlflow_run_id"] == "run1" and payload["aliases"] == ["champion"]
    assert step.after(step.events).last_drift_event_at == NOW
    assert step.after(()).last_drift_event_at is None, "an event not sent starts no cool-down"


def test_a_drift_inside_the_cool_down_emits_nothing() -> None:
    report = _report(temperature=2.0, last_drift_at=NOW - HOUR)
    assert report.drift_detected and not report.refit_recommended
    step = monitor_step(report, MonitorState(last_drift_event_at=NOW - HOUR), DEFAULT_POLICY, NOW, live=True,
                        context=CONTEXT)
    assert step.events == () and step.state.last_drift_event_at == NOW - HOUR


def test_a_sequential_alarm_is_consumed_only_when_its_drift_event_was_sent() -> None:
    check = _alarm()
    report = with_stream_checks(_report(), sequential=check)
    before = MonitorState(sequential=SequentialState.initial(1.0))
    step = monitor_step(report, before, DEFAULT_POLICY, NOW, live=True, context=CONTEXT)
    assert _events(step) == [DRIFT_EVENT]
    assert step.after(step.events).sequential == check.state
    assert step.after(()).sequential == before.sequential, "the next check folds these rows in again"


def test_without_an_alarm_the_sequential_state_advances_whatever_is_sent() -> None:
    check = _quiet()
    step = monitor_step(with_stream_checks(_report(), sequential=check), MonitorState(), DEFAULT_POLICY, NOW,
                        live=True, context=CONTEXT)
    assert step.events == () and step.state.sequential == check.state


def test_a_confidence_shift_emits_once_per_cool_down_and_only_on_live_checks() -> None:
    # An equivalence margin 2,000 rows cannot establish: the warning speaks for an undetermined check.
    report = with_stream_checks(_report(equivalence_margin=0.03), early_warning=_shifted())  # type: ignore[arg-type]
    assert report.verdict == "undetermined" and report.early_warning is not None and report.early_warning.shifted
    step = monitor_step(report, MonitorState(), DEFAULT_POLICY, NOW, live=True, context=CONTEXT)
    assert _events(step) == [CONFIDENCE_SHIFT_EVENT]
    payload = step.events[0].payload.to_payload()
    assert payload["direction"] == "up" and payload["window_end"] == NOW.isoformat()
    assert step.after(step.events).last_confidence_shift_at == NOW
    recent = MonitorState(last_confidence_shift_at=NOW - HOUR)
    assert monitor_step(report, recent, DEFAULT_POLICY, NOW, live=True, context=CONTEXT).events == ()
    long_ago = MonitorState(last_confidence_shift_at=NOW - 7 * HOUR)
    assert _events(monitor_step(report, long_ago, DEFAULT_POLICY, NOW, live=True, context=CONTEXT)) == [
        CONFIDENCE_SHIFT_EVENT]
    assert monitor_step(report, MonitorState(), DEFAULT_POLICY, NOW, live=False, context=CONTEXT).events == ()


def test_a_drift_and_a_shift_send_only_the_drift() -> None:
    report = with_stream_checks(_report(temperature=2.0), early_warning=_shifted())  # type: ignore[arg-type]
    assert _events(monitor_step(report, MonitorState(), DEFAULT_POLICY, NOW, live=True, context=CONTEXT)) == [
        DRIFT_EVENT]


@pytest.mark.parametrize("before, verdict_rows, expected_streak, fires", [
    (0, 100, 1, False), (2, 100, 3, True), (3, 100, 4, False), (5, 100, 6, True), (4, 2_000, 0, False),
])
def test_the_insufficient_data_streak(before: int, verdict_rows: int, expected_streak: int, fires: bool) -> None:
    report = _report(verdict_rows)
    step = monitor_step(report, MonitorState(insufficient_streak=before), DEFAULT_POLICY, NOW, live=True,
                        context=CONTEXT)
    assert step.state.insufficient_streak == expected_streak
    assert (_events(step) == [INSUFFICIENT_DATA_EVENT]) == fires
    if fires:
        payload = step.events[0].payload.to_payload()
        assert (payload["streak"], payload["n"], payload["min_window"]) == (expected_streak, verdict_rows, 500)


def test_a_version_that_never_logged_counts_toward_the_streak_and_a_backfill_changes_nothing() -> None:
    step = monitor_step(None, MonitorState(insufficient_streak=2), DEFAULT_POLICY, NOW, live=True, context=CONTEXT)
    assert step.state.insufficient_streak == 3 and _events(step) == [INSUFFICIENT_DATA_EVENT]
    assert step.events[0].payload.to_payload()["n"] == 0
    backfill = monitor_step(None, MonitorState(insufficient_streak=2), DEFAULT_POLICY, NOW, live=False,
                            context=CONTEXT)
    assert backfill.state == MonitorState(insufficient_streak=2) and backfill.events == ()


def test_the_policy_sets_the_streak_and_the_cool_down() -> None:
    policy = DEFAULT_POLICY.replace(insufficient_data_streak=2, cooldown=timedelta(minutes=30))
    assert _events(monitor_step(None, MonitorState(insufficient_streak=1), policy, NOW, live=True,
                                context=CONTEXT)) == [INSUFFICIENT_DATA_EVENT]
    report = with_stream_checks(_report(), early_warning=_shifted())  # type: ignore[arg-type]
    recent = MonitorState(last_confidence_shift_at=NOW - HOUR)
    assert _events(monitor_step(report, recent, policy, NOW, live=True, context=CONTEXT)) == [CONFIDENCE_SHIFT_EVENT]


def _moved_priors() -> PriorShiftTest:
    """The prior test of a window where class 0 went from a fifth of the rows to half (p(x | y) kept)."""
    logits, labels = _rows(20_000, seed=3)
    reference = ReferencePriors.from_logits(logits[:6_000], labels[:6_000])
    rest, y = logits[6_000:], labels[6_000:]
    weights = np.where(y == 0, 0.5 / np.mean(y == 0), 0.5 / np.mean(y != 0))
    chosen = np.random.default_rng(4).choice(y.shape[0], size=3_000, p=weights / weights.sum())
    test = prior_shift_test(ServedPriorStats.from_logits(rest[chosen]), reference)
    assert test.fired
    return test


def _unmoved_priors() -> PriorShiftTest:
    """The prior test of a window drawn at the reference's own class mix."""
    logits, labels = _rows(20_000, seed=3)
    reference = ReferencePriors.from_logits(logits[:6_000], labels[:6_000])
    test = prior_shift_test(ServedPriorStats.from_logits(logits[6_000:9_000]), reference)
    assert not test.fired
    return test


def _diagnosed(report: DriftReport, reweighted_fired: tuple[str, ...], test: PriorShiftTest | None = None) -> DriftReport:
    """``report`` with the diagnosis of ``test`` (default: moved priors) and these tests at the re-weighted posteriors."""
    test = _moved_priors() if test is None else test
    diagnosis = diagnose_shift(priors=test, tests_fired=report.tests_fired, reweighted_tests_fired=reweighted_fired,
                               gain=ReweightingGain(2_000, 60.0, 400.0), class_accuracy=None,
                               accuracy=report.window.accuracy, accuracy_floor=0.1, confidence_shifted=False)
    return replace(report, diagnosis=diagnosis, prior_test=test)


def test_a_label_shift_emits_the_label_shift_event_and_no_drift_event() -> None:
    # The temperature test fires at the deployed posteriors; at the re-weighted ones it is quiet.
    report = _diagnosed(_report(temperature=2.0), reweighted_fired=())
    assert report.verdict == "drift" and report.diagnosis is not None and report.diagnosis.kind == "label_shift"
    assert not report.refit_recommended, "a temperature refit fitted to a class mix is the wrong fix"
    step = monitor_step(report, MonitorState(), DEFAULT_POLICY, NOW, live=True, context=CONTEXT)
    assert _events(step) == [LABEL_SHIFT_EVENT]
    payload = step.events[0].payload.to_payload()
    assert set(payload) == LabelShiftEvent.payload_keys()
    assert (payload["shift_kind"], payload["shift_fix"], payload["confirmed"], payload["fired"]) == (
        "label_shift", "prior_correction", True, True)
    assert payload["priors"][0] == pytest.approx(0.5, abs=0.05) and payload["reference_priors"][0] < 0.3
    assert payload["p_value"] < 0.01 and payload["mlflow_run_id"] == "run1"
    assert step.after(step.events).last_label_shift_at == NOW and step.after(()).last_label_shift_at is None
    recent = MonitorState(last_label_shift_at=NOW - HOUR)
    assert monitor_step(report, recent, DEFAULT_POLICY, NOW, live=True, context=CONTEXT).events == ()
    assert monitor_step(report, MonitorState(), DEFAULT_POLICY, NOW, live=False, context=CONTEXT).events == ()


def test_a_calibration_drift_emits_the_drift_event_with_its_kind() -> None:
    # The priors moved too, but the temperature test still fires at the re-weighted posteriors.
    report = _diagnosed(_report(temperature=2.0), reweighted_fired=("temperature",))
    assert report.diagnosis is not None and report.diagnosis.kind == "calibration_drift" and report.refit_recommended
    step = monitor_step(report, MonitorState(), DEFAULT_POLICY, NOW, live=True, context=CONTEXT)
    assert _events(step) == [DRIFT_EVENT]
    payload = step.events[0].payload.to_payload()
    assert payload["shift_kind"] == "calibration_drift" and payload["shift_fix"] in (
        "temperature_refit", "prior_correction_and_refit")
    assert payload["diagnosis"]["kind"] == "calibration_drift"
    # A check without a diagnosis (none ran) keeps the drift event, the kind left empty.
    plain = monitor_step(_report(temperature=2.0), MonitorState(), DEFAULT_POLICY, NOW, live=True, context=CONTEXT)
    assert plain.events[0].payload.to_payload()["shift_kind"] is None


def test_a_prior_corrected_version_is_left_alone_while_its_correction_fits_and_undone_when_the_mix_returns() -> None:
    shifted = _diagnosed(_report(temperature=2.0), reweighted_fired=())
    assert shifted.prior_test is not None
    estimate = shifted.prior_test.estimate
    fits = PriorCorrection(estimate.priors, estimate.reference_priors)
    # The correction in force lies inside the window's estimate: nothing to do, no event.
    assert monitor_step(shifted, MonitorState(), DEFAULT_POLICY, NOW, live=True, context=CONTEXT,
                        correction=fits).events == ()
    # A correction the estimate does not hold (another mix): the event with the new estimate.
    other = PriorCorrection(estimate.reference_priors, estimate.priors)
    step = monitor_step(shifted, MonitorState(), DEFAULT_POLICY, NOW, live=True, context=CONTEXT, correction=other)
    assert _events(step) == [LABEL_SHIFT_EVENT] and step.events[0].payload.to_payload()["undo"] is False
    # The mix went back (the prior test is quiet): the correction is undone, once per cool-down.
    back = _diagnosed(_report(), reweighted_fired=(), test=_unmoved_priors())
    assert back.diagnosis is not None and back.diagnosis.kind != "label_shift"
    step = monitor_step(back, MonitorState(), DEFAULT_POLICY, NOW, live=True, context=CONTEXT, correction=fits)
    assert _events(step) == [LABEL_SHIFT_EVENT]
    payload = step.events[0].payload.to_payload()
    assert payload["undo"] is True and payload["shift_fix"] == "undo_prior_correction" and payload["fired"] is False
    assert step.after(step.events).last_label_shift_at == NOW
    recent = MonitorState(last_label_shift_at=NOW - HOUR)
    assert monitor_step(back, recent, DEFAULT_POLICY, NOW, live=True, context=CONTEXT, correction=fits).events == ()
    # Without a correction in force the same quiet check emits nothing; a backfill never undoes.
    assert monitor_step(back, MonitorState(), DEFAULT_POLICY, NOW, live=True, context=CONTEXT).events == ()
    assert monitor_step(back, MonitorState(), DEFAULT_POLICY, NOW, live=False, context=CONTEXT,
                        correction=fits).events == ()


def test_a_long_run_of_undetermined_checks_is_a_situation_with_its_event() -> None:
    report = _report(2_000, equivalence_margin=0.03)  # 2,000 rows cannot establish 3 %: calibration not established
    assert report.verdict == "undetermined"
    policy = DEFAULT_POLICY.replace(undetermined_streak=3)
    quiet = monitor_step(report, MonitorState(undetermined_streak=1), policy, NOW, live=True, context=CONTEXT)
    assert quiet.state.undetermined_streak == 2 and quiet.events == ()
    step = monitor_step(report, MonitorState(undetermined_streak=2), policy, NOW, live=True, context=CONTEXT)
    assert step.state.undetermined_streak == 3 and _events(step) == ["thermostat.calibration.undetermined"]
    payload = step.events[0].payload.to_payload()
    assert (payload["streak"], payload["n"], payload["temperature"], payload["margin"]) == (3, 2_000, 1.0, 0.03)
    assert payload["window_temperature_low"] < payload["window_temperature"] < payload["window_temperature_high"]
    assert payload["rows_to_decide"] == report.rows_to_decide
    # Any other verdict resets it; a backfill leaves it alone.
    hot = monitor_step(_report(2_000, temperature=2.0), MonitorState(undetermined_streak=2), policy, NOW, live=True,
                       context=CONTEXT)
    assert hot.state.undetermined_streak == 0
    backfill = monitor_step(report, MonitorState(undetermined_streak=2), policy, NOW, live=False, context=CONTEXT)
    assert backfill.state.undetermined_streak == 2 and backfill.events == ()
    assert MonitorState.from_tags(step.state.to_tags()).undetermined_streak == 3
