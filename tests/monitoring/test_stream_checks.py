"""The drift report with the checks across the stream: a sequential alarm is a drift with its
change point and the refit window, the early warning is shown but never decides, the cool-down
holds, and every output (markdown, metrics, payload) carries them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from calibration import TemperatureStats
from monitoring import (
    ConfidenceProfile,
    DriftPolicy,
    DriftReference,
    DriftReport,
    SequentialState,
    decide_drift,
    drift_markdown,
    drift_metrics,
    drift_payload,
    summarise_arrays,
    update_sequential,
    warn_before_labels,
    with_stream_checks,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _calibrated_report(n: int = 2000, *, last_drift_at: datetime | None = None) -> DriftReport:
    rng = np.random.default_rng(0)
    logits = 2.0 * rng.normal(size=(n, 5))
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = np.array([rng.choice(5, p=row) for row in p])
    summary = summarise_arrays(logits, labels, temperature=1.0, start=T0 + 2 * HOUR, end=T0 + 3 * HOUR)
    return decide_drift(summary, DriftReference.of(0.0), DriftPolicy(n_resamples=200), last_drift_at=last_drift_at)


def _alarm() -> object:
    """Two hot increments: the second alarms, with the change point at the first's start."""
    hot = TemperatureStats(temperature=1.0, n=500, gradient_sum=150.0, gradient_square_sum=600.0,
                           curvature_sum=500.0)
    margin = DriftPolicy(temperature_margin=0.05)  # without reference sums m = log 1.05: two increments to alarm
    first = update_sequential(SequentialState.initial(1.0), hot, start=T0, end=T0 + HOUR, policy=margin)
    assert not first.alarm
    return update_sequential(first.state, hot, start=T0 + HOUR, end=T0 + 3 * HOUR, policy=margin)


def test_a_sequential_alarm_turns_a_quiet_window_into_a_drift_with_its_refit_window() -> None:
    report = _calibrated_report()
    assert report.verdict == "calibrated"
    check = _alarm()
    combined = with_stream_checks(report, sequential=check)  # type: ignore[arg-type]
    assert combined.verdict == "drift" and combined.drift_detected and combined.refit_recommended
    assert combined.tests_fired == ("sequential",)
    assert combined.reasons[0].startswith("sequential rule ALARM")
    assert combined.change_point == T0 and combined.refit_window_start == T0
    assert report.refit_window_start == report.window_start and report.change_point is None
    assert len(combined.reasons) == len(report.reasons) + 1


def test_no_alarm_and_the_early_warning_are_context_only() -> None:
    report = _calibrated_report()
    calm = TemperatureStats(temperature=1.0, n=500, gradient_sum=0.0, gradient_square_sum=500.0, curvature_sum=500.0)
    check = update_sequential(SequentialState.initial(1.0), calm, start=T0, end=T0 + HOUR)
    rng = np.random.default_rng(1)
    logits = 2.0 * rng.normal(size=(3000, 10))
    reference = ConfidenceProfile.from_logits(logits[:1500], rng.integers(0, 10, 1500))
    shifted = warn_before_labels(ConfidenceProfile.from_logits(1.5 * logits[1500:]), reference)
    assert shifted.shifted
    combined = with_stream_checks(report, sequential=check, early_warning=shifted)
    assert combined.verdict == "calibrated" and combined.tests_fired == () and not combined.refit_recommended
    assert combined.reasons[:len(report.reasons)] == report.reasons
    assert combined.reasons[-2].startswith("sequential rule: no alarm")
    assert combined.reasons[-1].startswith("early warning (before labels)")
    assert with_stream_checks(report) is report


def test_a_sequential_drift_inside_the_cooldown_recommends_no_refit() -> None:
    report = _calibrated_report(last_drift_at=T0 + 2 * HOUR)
    assert report.in_cooldown and report.verdict == "calibrated"
    combined = with_stream_checks(report, sequential=_alarm())  # type: ignore[arg-type]
    assert combined.verdict == "drift" and not combined.refit_recommended
    assert combined.reasons[1].startswith("drift within the cool-down")


def test_an_alarm_on_a_window_too_small_to_test_is_still_a_drift() -> None:
    summary = summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=T0 + 2 * HOUR, end=T0 + 3 * HOUR)
    report = decide_drift(summary, DriftReference.of(0.0))
    assert report.verdict == "insufficient_data"
    combined = with_stream_checks(report, sequential=_alarm())  # type: ignore[arg-type]
    assert combined.verdict == "drift" and combined.tests_fired == ("sequential",)


def test_the_outputs_carry_the_stream_checks() -> None:
    rng = np.random.default_rng(2)
    logits = 2.0 * rng.normal(size=(2000, 10))
    reference = ConfidenceProfile.from_logits(logits[:1000], rng.integers(0, 10, 1000))
    warning = warn_before_labels(ConfidenceProfile.from_logits(logits[1000:]), reference)
    combined = with_stream_checks(_calibrated_report(), sequential=_alarm(),  # type: ignore[arg-type]
                                  early_warning=warning)
    markdown = drift_markdown(combined)
    assert "sequential CUSUM" in markdown and "ALARM" in markdown
    assert f"| change point: rows served since (the refit reads from there) | {T0.isoformat()} |" in markdown
    assert "predicted accuracy, 1000 served rows" in markdown and "Anderson–Darling p" in markdown
    metrics = drift_metrics(combined)
    assert metrics["sequential_alarm"] == 1.0 and metrics["cusum_upper"] >= 6.0
    assert metrics["predicted_accuracy"] == pytest.approx(warning.predicted_accuracy)
    assert metrics["served_n"] == 1000.0 and metrics["confidence_shifted"] == 0.0
    payload = json.loads(json.dumps(drift_payload(combined), allow_nan=False))
    assert payload["refit_window_start"] == T0.isoformat() == payload["change_point"]
    assert payload["sequential"]["alarm"] is True and payload["sequential"]["state"]["alarms"] == 1
    assert payload["early_warning"]["n"] == 1000 and "sequential" in payload["tests_fired"]
    plain = drift_payload(_calibrated_report())
    assert plain["sequential"] is None and plain["change_point"] is None
    assert plain["refit_window_start"] == (T0 + 2 * HOUR).isoformat()
