"""The drift decision: issue 4's statistical acceptance, groups, insufficient data, cool-down, escalation."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from calibration import CalibrationStats, ReliabilityTable
from monitoring import (
    DriftPolicy,
    DriftReference,
    PredictionLog,
    WindowQuery,
    WindowSummary,
    decide_drift,
    diagnose_reliability_shape,
    log_predictions,
    summarise_arrays,
    summarise_window,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def traffic(
    rng: np.random.Generator, n: int, *, n_classes: int = 10, scale: float = 3.0, true_temperature: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Logits and labels drawn from softmax(logits / true_temperature): calibrated at that T."""
    logits = scale * rng.normal(size=(n, n_classes))
    p = np.exp((logits - logits.max(axis=1, keepdims=True)) / true_temperature)
    p /= p.sum(axis=1, keepdims=True)
    labels = np.minimum((rng.random((n, 1)) > p.cumsum(axis=1)).sum(axis=1), n_classes - 1)
    return logits, labels


def summary_of(logits: np.ndarray, labels: np.ndarray, groups: np.ndarray | None = None, **kwargs: object) -> WindowSummary:
    return summarise_arrays(logits, labels, temperature=1.0, start=T0 - timedelta(hours=24), end=T0, groups=groups,
                            model_name="digits", model_version="1", **kwargs)  # type: ignore[arg-type]  # fmt: skip


# --------------------------------------------------------------------------- acceptance (issue 4)


def test_a_calibrated_model_raises_at_most_two_drifts_in_fifty_windows_of_500() -> None:
    rng = np.random.default_rng(2026)
    reports = [
        decide_drift(summary_of(*traffic(rng, 500)), DriftReference.of(0.0), DriftPolicy(seed=w))  # baseline 0: only the test guards
        for w in range(50)
    ]
    drifts = sum(r.verdict == "drift" for r in reports)
    assert drifts <= 2, [r.reasons[0] for r in reports if r.drift_detected]
    # The raw ECE of a calibrated model on 500 rows is far from 0: that is what the test separates.
    assert np.mean([r.window.ece for r in reports]) > 0.03
    assert all(r.verdict in ("calibrated", "undetermined", "drift") and r.n == 500 for r in reports)
    # Without reference sums T counts as known: 500 rows often establish T within the 10 % equivalence
    # margin; the others say what would decide.
    assert sum(r.verdict == "calibrated" for r in reports) >= 10
    assert all(r.rows_to_decide is None or r.rows_to_decide > 500 for r in reports if r.verdict == "undetermined")


def test_true_temperature_two_raises_drift_in_at_least_95_percent_of_fifty_windows_of_2000() -> None:
    rng = np.random.default_rng(7)
    reports = [
        decide_drift(summary_of(*traffic(rng, 2_000, true_temperature=2.0)), DriftReference.of(0.02), DriftPolicy(seed=w))
        for w in range(50)
    ]
    detected = sum(r.verdict == "drift" for r in reports)
    assert detected >= 48, detected
    report = reports[0]
    assert report.drift_detected and report.refit_recommended and any(o.fired for o in report.outcomes)
    assert report.outcome("ece").p_value < 0.01 and report.window.ece > 0.1
    assert report.window.accuracy < report.window.mean_confidence, "served at T = 1 while the truth is T = 2: over-confident"
    assert report.tests_fired[0] == "temperature" and report.temperature_test is not None
    assert report.temperature_test.direction == "over-confident" and "T should grow" in report.reasons[0]


def test_a_group_only_shift_is_detected_and_the_groups_named() -> None:
    rng = np.random.default_rng(1)
    over = traffic(rng, 1_500, n_classes=4, scale=1.5, true_temperature=2.0)  # over-confident at T = 1
    under = traffic(rng, 1_500, n_classes=4, scale=1.5, true_temperature=0.5)  # under-confident at T = 1
    logits, labels = np.vstack([over[0], under[0]]), np.concatenate([over[1], under[1]])
    groups = np.array(["scans"] * 1_500 + ["photos"] * 1_500, dtype=object)
    # The average's optimal T is 10 % off (the two groups do not cancel exactly): a 15 % margin
    # lets it pass, so that only the groups can tell.
    report = decide_drift(summary_of(logits, labels, groups), DriftReference.of(0.02),
                          DriftPolicy(temperature_margin=0.15))

    assert report.window.ece < 0.03, "the average looks calibrated"
    assert not any(o.fired for o in report.outcomes)
    assert report.verdict == "drift" and report.refit_recommended
    assert report.drifted_groups == ("photos", "scans")
    assert "group 'photos' temperature" in report.tests_fired and "group 'scans' temperature" in report.tests_fired
    by_group = {g.group: g for g in report.groups}
    assert by_group["scans"].temperature_test.direction == "over-confident"  # type: ignore[union-attr]
    assert by_group["photos"].temperature_test.direction == "under-confident"  # type: ignore[union-attr]
    assert by_group["scans"].ece > 0.1 and by_group["photos"].ece > 0.1
    assert by_group["scans"].calibration.accuracy < by_group["scans"].calibration.mean_confidence
    assert by_group["photos"].calibration.accuracy > by_group["photos"].calibration.mean_confidence
    assert all(g.level == 0.0025 for g in report.groups), "Bonferroni over two tests of two groups"
    assert any(r.startswith("group 'scans'") and "beyond the 15% margin" in r for r in report.reasons)
    assert any("the average hides the group drift" in r for r in report.reasons)
    assert report.summary.group_weighted_ece > 0.1


def test_end_to_end_from_a_sqlite_log(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    with PredictionLog(f"sqlite:///{tmp_path / 'log.db'}") as log:
        log.create()
        for hour, true_temperature in enumerate([1.0, 2.0]):
            logits, labels = traffic(rng, 1_000, true_temperature=true_temperature)
            times = [T0 + timedelta(hours=hour, seconds=3 * i) for i in range(1_000)]
            ids = [f"h{hour}-{i}" for i in range(1_000)]
            log_predictions(log, "digits", "1", 1.0, logits, ids, time=times)
            log.attach_labels(ids, labels)
        verdicts = []
        for hour in range(2):
            start = T0 + timedelta(hours=hour)
            query = WindowQuery("digits", "1", temperature=1.0, start=start, end=start + timedelta(hours=1), threshold=0.9)
            summary = summarise_window(log, query, chunk_size=300)
            verdicts.append(decide_drift(summary, DriftReference.of(0.02)).verdict)
    assert verdicts == ["calibrated", "drift"]


# --------------------------------------------------------------------------- the rules around the test


def test_insufficient_data_below_min_window() -> None:
    rng = np.random.default_rng(0)
    logits, labels = traffic(rng, 499, true_temperature=3.0)  # badly off, but too few rows to say
    report = decide_drift(summary_of(logits, labels), DriftReference.of(0.02), DriftPolicy(min_window=500))
    assert report.verdict == "insufficient_data"
    assert not report.drift_detected and not report.refit_recommended
    assert report.outcomes == ()
    assert report.reasons[0].startswith("only 499 labelled rows in the window")
    assert "at least 500 are needed" in report.reasons[0]
    assert report.window.ece > 0.1, "the numbers are still reported"


def test_cooldown_reports_drift_without_recommending_a_refit() -> None:
    rng = np.random.default_rng(5)
    summary = summary_of(*traffic(rng, 2_000, true_temperature=2.0))
    fresh = decide_drift(summary, DriftReference.of(0.02))
    assert fresh.refit_recommended and not fresh.in_cooldown and fresh.cooldown_until is None

    recent = decide_drift(summary, DriftReference.of(0.02), last_drift_at=T0 - timedelta(hours=2))
    assert recent.verdict == "drift" and recent.drift_detected
    assert not recent.refit_recommended and recent.in_cooldown
    assert recent.cooldown_until == T0 + timedelta(hours=4)
    decided = len(recent.tests_fired)
    assert "drift within the cool-down" in recent.reasons[decided], "right after the sentences that decided it"

    later = decide_drift(summary, DriftReference.of(0.02), last_drift_at=T0 - timedelta(hours=2), now=T0 + timedelta(hours=4))
    assert later.refit_recommended and not later.in_cooldown
    short = decide_drift(summary, DriftReference.of(0.02), DriftPolicy(cooldown=timedelta(hours=1)), last_drift_at=T0 - timedelta(hours=2))
    assert short.refit_recommended

    calm = decide_drift(summary_of(*traffic(rng, 2_000)), DriftReference.of(0.02), last_drift_at=T0 - timedelta(hours=1))
    assert calm.verdict == "calibrated" and not calm.refit_recommended


def test_small_groups_are_skipped_and_said_so() -> None:
    rng = np.random.default_rng(11)
    logits, labels = traffic(rng, 1_000)
    groups = np.array(["big"] * 900 + ["tiny"] * 60 + [None] * 40, dtype=object)
    report = decide_drift(summary_of(logits, labels, groups), DriftReference.of(0.02), DriftPolicy(min_group_size=100))
    assert [g.group for g in report.groups if not g.tested] == ["tiny"]
    tiny = next(g for g in report.groups if g.group == "tiny")
    assert not tiny.tested and tiny.outcomes == ()
    assert any("1 group skipped with fewer than 100 labelled rows" in r and "'tiny' (n=60)" in r for r in report.reasons)


def test_a_per_group_baseline_is_used_when_given() -> None:
    rng = np.random.default_rng(4)
    over = traffic(rng, 2_000, true_temperature=1.6)
    groups = np.array(["legacy"] * 2_000, dtype=object)
    summary = summary_of(*over, groups)
    flagged = decide_drift(summary, DriftReference.of(0.0), DriftPolicy(ece_tolerance=0.02, min_window=10_000))
    assert flagged.verdict == "insufficient_data"
    drifted = decide_drift(summary, DriftReference.of(0.0))
    tolerated = decide_drift(summary, DriftReference.of(0.0, group_ece={"legacy": 0.5}))
    assert "group 'legacy' ece" in drifted.tests_fired
    assert "group 'legacy' ece" not in tolerated.tests_fired and tolerated.groups[0].baseline_ece == 0.5
    # The temperature test does not read ECE baselines: T = 1.6 served at T = 1 is a drift either way.
    assert "group 'legacy' temperature" in tolerated.tests_fired


def test_a_served_temperature_other_than_the_registered_one_is_noted() -> None:
    summary = summary_of(*traffic(np.random.default_rng(0), 600))
    from dataclasses import replace

    report = decide_drift(replace(summary, served_temperatures=(1.0, 1.4)), DriftReference.of(0.02, nll=0.5))
    assert any("served at T = 1, 1.4" in r for r in report.reasons)
    assert any(r.startswith("NLL ") and "vs the baseline 0.5000" in r for r in report.reasons)


def test_arguments_are_checked() -> None:
    summary = summary_of(*traffic(np.random.default_rng(0), 10))
    with pytest.raises(ValueError, match=r"p_threshold must be in \(0, 1\)"):
        decide_drift(summary, DriftReference.of(0.0), DriftPolicy(p_threshold=1.5))
    with pytest.raises(ValueError, match="baseline_ece must be finite"):
        decide_drift(summary, DriftReference.of(float("nan")))
    with pytest.raises(ValueError, match="has no timezone"):
        decide_drift(summary, DriftReference.of(0.0), last_drift_at=datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="summary must be a WindowSummary"):
        decide_drift(object(), DriftReference.of(0.0))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- escalation


def table_from(confidence: list[float], accuracy: list[float], count: int = 500) -> ReliabilityTable:
    m = len(confidence)
    counts = np.full(m, count)
    edges = np.linspace(0, 1, m + 1)
    return ReliabilityTable.from_bin_sums(
        edges[:-1], edges[1:], counts, np.array(confidence) * counts, np.round(np.array(accuracy) * counts),
        scheme="equal-width", min_count=10,
    )  # fmt: skip


def test_diagnose_tells_volume_from_arched_and_saw_tooth() -> None:
    rng = np.random.default_rng(9)
    logits, labels = traffic(rng, 20_000, n_classes=5, true_temperature=2.0)  # < 2**17 logits: numpy kernels
    over = CalibrationStats.from_logits(logits, labels, temperature=1.0).reliability_table()
    assert diagnose_reliability_shape(over).shape == "volume"
    assert diagnose_reliability_shape(over).single_temperature_can_fix
    refit = CalibrationStats.from_logits(logits, labels, temperature=2.0).reliability_table()
    assert diagnose_reliability_shape(refit).shape == "calibrated"

    arched = diagnose_reliability_shape(table_from([0.2, 0.4, 0.6, 0.8, 0.95], [0.1, 0.5, 0.72, 0.9, 0.8]))
    assert (arched.shape, arched.sign_changes) == ("arched", 2)
    assert not arched.single_temperature_can_fix
    assert "needs retraining or a data fix" in arched.message
    assert arched.over_confident_bins == (0, 4) and arched.under_confident_bins == (1, 2, 3)

    saw = diagnose_reliability_shape(table_from([0.2, 0.4, 0.6, 0.8, 0.95], [0.3, 0.3, 0.7, 0.7, 0.99]))
    assert (saw.shape, saw.sign_changes) == ("saw-tooth", 4)

    noisy = diagnose_reliability_shape(table_from([0.2, 0.4, 0.6], [0.21, 0.38, 0.61]))
    assert noisy.shape == "calibrated", "gaps within their standard errors are noise"
    sparse = diagnose_reliability_shape(table_from([0.2, 0.4], [0.9, 0.1], count=5))
    assert sparse.shape == "empty"
    with pytest.raises(ValueError, match="z must be finite and > 0"):
        diagnose_reliability_shape(table_from([0.5], [0.5]), z=0)


def test_the_consistency_test_is_calibrated_on_calibrated_traffic() -> None:
    """p < 0.05 in about 5% of 1000 calibrated windows (the normal approximation holds at 500 rows)."""
    rng = np.random.default_rng(123)
    p_values = np.array([
        decide_drift(summary_of(*traffic(rng, 500)), DriftReference.of(0.0), DriftPolicy(seed=w, n_resamples=400)).consistency.p_value
        for w in range(1_000)
    ])  # fmt: skip
    share = float(np.mean(p_values < 0.05))
    assert 0.03 <= share <= 0.075, share  # binomial(1000, 0.05): 3.6% .. 6.4% at 99%, plus slack
