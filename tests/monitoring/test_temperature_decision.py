"""The drift decision with the temperature test: two-sample against the reference, with a margin."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration import CalibrationStats, TemperatureStats, calibration_error_from_stats, temperature_test
from monitoring import (
    DriftPolicy,
    DriftReference,
    DriftReport,
    WindowSummary,
    decide_drift,
    drift_markdown,
    drift_metrics,
    drift_payload,
    drift_table_rows,
    merge_summaries,
    summarise_arrays,
)
from tests.strategies import sample_labels, scored_arrays

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def rows(rng: np.random.Generator, n: int, *, true_temperature: float = 1.0, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    logits = 3.0 * rng.normal(size=(n, k))
    return logits, sample_labels(rng, logits / true_temperature)


class Reference:
    """What registration keeps of 5,000 calibrated rows at T = 1."""

    def __init__(self, rng: np.random.Generator) -> None:
        logits, labels = rows(rng, 5_000)
        self.stats = TemperatureStats.from_logits(logits, labels)
        estimate = calibration_error_from_stats(CalibrationStats.from_logits(logits, labels), estimator="debiased_l1")
        self.ece, self.interval = estimate.estimate, (estimate.low, estimate.high)

    def decide(self, summary: WindowSummary, *, group_temperature_stats: dict[str, TemperatureStats] | None = None,
               **policy: object) -> DriftReport:
        reference = DriftReference.of(self.ece, ece_interval=self.interval, temperature_stats=self.stats,
                                      group_temperature_stats=group_temperature_stats)
        return decide_drift(summary, reference, DriftPolicy(**policy))  # type: ignore[arg-type]


def window(logits: np.ndarray, labels: np.ndarray, groups: np.ndarray | None = None) -> WindowSummary:
    return summarise_arrays(logits, labels, temperature=1.0, start=T0 - timedelta(hours=24), end=T0, groups=groups,
                            model_name="m", model_version="1")


def test_calibrated_windows_raise_no_drift_with_and_without_random_groups() -> None:
    rng = np.random.default_rng(0)
    reference = Reference(rng)
    for w in range(20):
        logits, labels = rows(rng, 2_000)
        groups = np.array([f"g{g}" for g in rng.integers(0, 5, 2_000)], dtype=object)
        report = reference.decide(window(logits, labels, groups), seed=w)
        # 2,000 rows against a reference of 5,000: calibrated within the 10 % equivalence margin when
        # the interval fits inside it, else undetermined with the rows that would decide; never "ok".
        assert report.verdict in ("calibrated", "undetermined"), report.reasons[:2]
        assert report.reasons[0].startswith(f"{report.verdict}: ")
        assert report.rows_to_decide is None or report.rows_to_decide > 2_000
        assert report.tests_fired == () and len([g for g in report.groups if g.tested]) == 5
        assert all(g.level == 0.001 for g in report.groups), "Bonferroni over two tests of five groups"


def test_over_and_under_confidence_are_drifts_with_their_direction() -> None:
    rng = np.random.default_rng(1)
    reference = Reference(rng)
    hot = reference.decide(window(*rows(rng, 2_000, true_temperature=1.25)))
    assert hot.verdict == "drift" and hot.refit_recommended and hot.tests_fired[0] == "temperature"
    assert hot.temperature_test is not None and hot.temperature_test.direction == "over-confident"
    assert hot.temperature_test.window_temperature > 1.15 and "T should grow" in hot.reasons[0]
    cold = reference.decide(window(*rows(rng, 2_000, true_temperature=0.8)))
    assert cold.verdict == "drift" and cold.temperature_test is not None
    assert cold.temperature_test.direction == "under-confident" and "T should shrink" in cold.reasons[0]
    # The window's sums and z are in the report for a sequential rule to accumulate.
    assert hot.summary.temperature_stats.n == 2_000 and hot.temperature_test.z > 3 and cold.temperature_test.z < -3


def test_a_shift_inside_the_margin_is_not_a_drift() -> None:
    rng = np.random.default_rng(2)
    reference = Reference(rng)
    report = reference.decide(window(*rows(rng, 20_000, true_temperature=1.02)))
    assert report.verdict in ("calibrated", "undetermined") and not report.outcome("temperature").fired
    assert "margin" in report.reasons[0] and report.reasons[0].startswith(report.verdict)
    tight = reference.decide(window(*rows(rng, 20_000, true_temperature=1.12)), temperature_margin=0.0)
    assert tight.outcome("temperature").fired


def test_a_group_shift_is_found_by_its_group_test() -> None:
    rng = np.random.default_rng(3)
    reference = Reference(rng)
    logits, labels = rows(rng, 3_000)
    groups = np.array([f"g{g}" for g in rng.integers(0, 5, 3_000)], dtype=object)
    shifted = groups == "g0"
    logits[shifted] *= 1.5  # the model became over-confident on one group
    report = reference.decide(window(logits, labels, groups))
    assert report.verdict == "drift" and "group 'g0' temperature" in report.tests_fired
    g0 = next(g for g in report.groups if g.group == "g0")
    assert g0.outcome("temperature").fired and g0.temperature_test is not None and g0.temperature_test.direction == "over-confident"
    assert report.drifted_groups == ("g0",)


def test_a_group_reference_replaces_the_overall_one() -> None:
    rng = np.random.default_rng(4)
    reference = Reference(rng)
    logits, labels = rows(rng, 2_000)
    logits[:1_000] *= 1.5  # group "a" always was sharper: its own reference says so
    groups = np.array(["a"] * 1_000 + ["b"] * 1_000, dtype=object)
    against_overall = reference.decide(window(logits, labels, groups))
    assert "group 'a' temperature" in against_overall.tests_fired
    ref_logits, ref_labels = rows(rng, 4_000)
    ref_logits *= 1.5
    own = {"a": TemperatureStats.from_logits(ref_logits, ref_labels)}
    with_own = reference.decide(window(logits, labels, groups), group_temperature_stats=own)
    assert "group 'a' temperature" not in with_own.tests_fired


def test_without_reference_sums_the_test_is_one_sample_and_says_so() -> None:
    rng = np.random.default_rng(5)
    report = decide_drift(window(*rows(rng, 2_000)), DriftReference.of(0.01))
    assert report.reference.overall.temperature_stats is None and report.temperature_test is not None
    assert report.temperature_test.reference_n == 0
    assert any("treats T as exact" in reason for reason in report.reasons)


def test_reports_show_the_tests_and_serialise() -> None:
    rng = np.random.default_rng(6)
    reference = Reference(rng)
    logits, labels = rows(rng, 2_000, true_temperature=1.3)
    report = reference.decide(window(logits, labels, np.array(["x", "y"] * 1_000, dtype=object)))
    markdown = drift_markdown(report)
    assert "### Tests" in markdown and "| temperature (margin 3%)" in markdown and "over-confident" in markdown
    payload = drift_payload(report)
    json.dumps(payload, allow_nan=False)
    assert payload["tests_fired"][0] == "temperature" and payload["temperature_test"]["direction"] == "over-confident"
    assert payload["temperature_stats"]["n"] == 2_000 and payload["reference_stats"]["n"] == 5_000
    metrics = drift_metrics(report)
    assert metrics["temperature_drift"] == 1.0 and metrics["temperature_z"] > 3 and "window_temperature_low" in metrics
    assert "temperature_z.group.x" in metrics
    overall, *groups = drift_table_rows(report)
    assert overall["temperature_drift"] and overall["window_temperature"] > 1.2 and groups[0]["temperature_z"] > 0


def test_collapsed_outputs_are_a_drift_with_their_reason() -> None:
    """Logits 1e-4 x normal or constant (a collapsed, near-uniform classifier): a drift, never an
    OverflowError, whichever way the window's score sum falls; constant outputs have no information
    about T at all and are named as collapsed."""
    rng = np.random.default_rng(11)
    reference = Reference(rng)
    windows = [1e-4 * rng.normal(size=(2_000, 10)) for _ in range(8)] + [np.zeros((2_000, 10))]
    for logits in windows:
        report = reference.decide(window(logits, rng.integers(0, 10, 2_000)))
        assert report.verdict == "drift" and report.refit_recommended, report.reasons[:2]
        assert json.dumps(drift_payload(report), allow_nan=False)
        assert all(math.isfinite(value) for value in drift_metrics(report).values())
    assert report.tests_fired == ("collapsed",) and report.outcome("collapsed").fired
    assert report.reasons[0].startswith("model output collapsed: ") and "needs retraining" in report.reasons[0]
    assert "collapsed" in drift_markdown(report)
    # One group's outputs collapse (a client sending blank inputs): the group test names it.
    logits, labels = rows(rng, 3_000)
    logits[2_000:] = 0.0
    labels[2_000:] = rng.integers(0, 10, 1_000)
    groups = np.array(["web"] * 2_000 + ["blank"] * 1_000, dtype=object)
    report = reference.decide(window(logits, labels, groups))
    assert "group 'blank' collapsed" in report.tests_fired and report.drifted_groups == ("blank",)
    assert next(g for g in report.groups if g.group == "blank").outcome("collapsed").fired


@settings(max_examples=40, deadline=None)
@given(data=scored_arrays(min_rows=4), cut=st.floats(0.1, 0.9))
def test_window_summaries_of_parts_merge_to_the_whole(data: tuple[np.ndarray, np.ndarray], cut: float) -> None:
    logits, labels = data
    groups = np.array(["a", "b", None] * len(labels), dtype=object)[: len(labels)]
    k = max(1, min(len(labels) - 1, int(cut * len(labels))))
    whole = window(logits, labels, groups)
    parts = [window(logits[:k], labels[:k], groups[:k]), window(logits[k:], labels[k:], groups[k:])]
    merged = merge_summaries(parts)
    assert merged.temperature_stats == whole.temperature_stats
    assert sorted(merged.group_temperature_stats) == sorted(whole.group_temperature_stats)
    for key, sums in whole.group_temperature_stats.items():
        assert merged.group_temperature_stats[key] == sums
    # Adjacent windows add up too.
    first = summarise_arrays(logits[:k], labels[:k], temperature=1.0, start=T0, end=T0 + timedelta(hours=1),
                             groups=groups[:k])
    second = summarise_arrays(logits[k:], labels[k:], temperature=1.0, start=T0 + timedelta(hours=1),
                              end=T0 + timedelta(hours=2), groups=groups[k:])
    assert (first + second).temperature_stats == whole.temperature_stats
    assert math.isfinite(whole.temperature_stats.gradient_sum)


# --------------------------------------------------------------------------- three-way verdicts


def _scaled(stats: TemperatureStats, factor: int) -> TemperatureStats:
    """The same rows ``factor`` times: the same estimate of T, its standard error / sqrt(factor)."""
    return replace(stats, n=stats.n * factor, gradient_sum=stats.gradient_sum * factor,
                   gradient_square_sum=stats.gradient_square_sum * factor, curvature_sum=stats.curvature_sum * factor,
                   expected_errors=stats.expected_errors * factor)


def test_calibrated_needs_the_interval_inside_the_margin_and_undetermined_says_what_would_decide() -> None:
    rng = np.random.default_rng(7)
    logits, labels = rows(rng, 200_000)
    reference = DriftReference.of(0.0, temperature_stats=TemperatureStats.from_logits(logits[:100_000], labels[:100_000]))
    big = decide_drift(window(logits[100_000:], labels[100_000:]), reference)
    assert big.verdict == "calibrated" and big.rows_to_decide is None
    assert big.reasons[0].startswith("calibrated: window T") and "inside the 10% equivalence margin" in big.reasons[0]
    small = decide_drift(window(logits[100_000:100_500], labels[100_000:100_500]), reference)
    assert small.verdict == "undetermined" and not small.drift_detected and not small.refit_recommended
    rows_needed = small.rows_to_decide
    assert rows_needed is not None and rows_needed > 500 and f"about {rows_needed:,} labelled rows" in small.reasons[0]
    # A window of that many rows with the same estimate decides: its interval reaches the margin.
    test = small.temperature_test
    assert test is not None
    factor = math.ceil(rows_needed / 500)
    again = temperature_test(_scaled(small.summary.temperature_stats, factor), reference.overall.temperature_stats,
                             margin=test.margin, level=test.level, equivalence_margin=test.equivalence_margin,
                             equivalence_level=test.equivalence_level)
    assert again.within_margin or again.drifted
    fewer = temperature_test(_scaled(small.summary.temperature_stats, max(1, factor // 2)),
                             reference.overall.temperature_stats, margin=test.margin, level=test.level,
                             equivalence_margin=test.equivalence_margin, equivalence_level=test.equivalence_level)
    assert not (fewer.within_margin or fewer.drifted)


def test_a_policy_without_the_temperature_test_never_claims_calibration() -> None:
    rng = np.random.default_rng(8)
    report = decide_drift(window(*rows(rng, 20_000)), DriftReference.of(0.02), DriftPolicy(tests=("ece",)))
    assert report.verdict == "undetermined" and "no temperature test" in report.reasons[0]
