"""The temperature test's sums, its two-sample test, and the interval of a fitted T."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from calibration import TemperatureStats, TopLabelScores, fit_temperature, minimal_detectable_shift, temperature_test
from tests.strategies import sample_labels, scored_arrays


def _nll(logits: np.ndarray, labels: np.ndarray, beta: float) -> np.ndarray:
    scaled = beta * logits
    top = scaled.max(axis=1, keepdims=True)
    return (np.log(np.exp(scaled - top).sum(axis=1)) + top[:, 0]) - scaled[np.arange(len(labels)), labels]


def test_gradient_and_curvature_of_two_classes_by_hand() -> None:
    # Logits (0, a), label 0, at T = 2 (beta = 1/2): p1 = e^(a/2) / (1 + e^(a/2)), p0 = 1 - p1.
    a = 3.0
    p1 = math.exp(a / 2) / (1 + math.exp(a / 2))
    scores = TopLabelScores.from_logits(np.array([[0.0, a], [a, 0.0]]), [0, 0], temperature=2.0)
    # Row 0 (wrong, confident): E_p[z] - z_y = a p1 - 0 > 0; Var_p[z] = a² p1 (1 - p1).
    # Row 1 (logits (a, 0), right): E_p[z] - z_y = a p1 - a < 0, the same variance.
    assert scores.gradient[0] == pytest.approx(a * p1, rel=1e-12)
    assert scores.curvature[0] == pytest.approx(a * a * p1 * (1 - p1), rel=1e-12)
    assert scores.gradient[1] == pytest.approx(a * p1 - a, rel=1e-12)
    assert scores.curvature[1] == pytest.approx(a * a * p1 * (1 - p1), rel=1e-12)
    stats = TemperatureStats.from_scores(scores)
    assert (stats.n, stats.temperature) == (2, 2.0)
    assert stats.gradient_sum == pytest.approx(2 * a * p1 - a, rel=1e-12)
    assert stats.gradient_square_sum == pytest.approx((a * p1) ** 2 + (a * p1 - a) ** 2, rel=1e-12)
    assert stats.curvature_sum == pytest.approx(2 * a * a * p1 * (1 - p1), rel=1e-12)
    # One right and one wrong at 82% confidence: over-confident, T should grow.
    assert stats.direction == "over-confident" and stats.window_temperature > 2.0


def test_they_are_the_nll_derivatives_in_inverse_temperature() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=3.0, size=(7, 5))
    labels = rng.integers(0, 5, 7)
    beta, step = 0.6, 1e-5
    scores = TopLabelScores.from_logits(logits, labels, temperature=1 / beta)
    gradient = (_nll(logits, labels, beta + step) - _nll(logits, labels, beta - step)) / (2 * step)
    curvature = (_nll(logits, labels, beta + step) - 2 * _nll(logits, labels, beta) + _nll(logits, labels, beta - step))
    np.testing.assert_allclose(scores.gradient, gradient, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(scores.curvature, curvature / step**2, rtol=1e-4, atol=1e-5)
    # Adding a constant to a row changes neither (softmax is shift-invariant).
    shifted = TopLabelScores.from_logits(logits + rng.normal(size=(7, 1)) * 10, labels, temperature=1 / beta)
    np.testing.assert_allclose(shifted.gradient, scores.gradient, rtol=1e-9, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(data=scored_arrays(min_rows=2), cut=st.floats(0.0, 1.0), temperature=st.floats(0.2, 5.0))
def test_sums_of_parts_add_up_to_the_sums_of_the_whole(
    data: tuple[np.ndarray, np.ndarray], cut: float, temperature: float
) -> None:
    logits, labels = data
    k = int(cut * len(labels))
    whole = TemperatureStats.from_logits(logits, labels, temperature=temperature)
    parts = TemperatureStats.empty(temperature)
    for rows in (slice(0, k), slice(k, None)):
        if logits[rows].shape[0]:
            parts = parts + TemperatureStats.from_logits(logits[rows], labels[rows], temperature=temperature)
    assert parts == whole
    # Per group, from one pass: the groups add up to the whole as well.
    codes = np.arange(len(labels)) % 3
    grouped = TemperatureStats.grouped(TopLabelScores.from_logits(logits, labels, temperature=temperature), codes, 3)
    total = grouped[0] + grouped[1] + grouped[2]
    assert total == whole and [g.n for g in grouped] == [int(np.sum(codes == g)) for g in range(3)]


def test_merging_refuses_another_temperature() -> None:
    with pytest.raises(ValueError, match="different temperatures"):
        TemperatureStats.empty(1.0) + TemperatureStats.empty(2.0)


def _labelled(rng: np.random.Generator, n: int, true_temperature: float, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    logits = 3.0 * rng.normal(size=(n, k))
    return logits, sample_labels(rng, logits / true_temperature)


def test_the_direction_and_the_newton_step_follow_the_true_temperature() -> None:
    rng = np.random.default_rng(1)
    for true_temperature, direction in ((1.25, "over-confident"), (0.8, "under-confident")):
        logits, labels = _labelled(rng, 20_000, true_temperature)
        stats = TemperatureStats.from_logits(logits, labels, temperature=1.0)
        assert stats.direction == direction
        exact = fit_temperature(logits, labels).temperature
        # One Newton step in log(1/T) from T = 1 lands within 2% of the fitted T at a 25% shift.
        assert stats.window_temperature == pytest.approx(exact, rel=0.02)
        low, high = stats.interval()
        assert low < exact < high


def test_a_window_like_the_reference_is_not_flagged_and_a_shift_is() -> None:
    rng = np.random.default_rng(2)
    reference = TemperatureStats.from_logits(*_labelled(rng, 5_000, 1.0))
    same = temperature_test(TemperatureStats.from_logits(*_labelled(rng, 2_000, 1.0)), reference)
    assert not same.drifted and same.reference_n == 5_000 and same.p_value > 0.05
    assert same.ratio_low < 1.0 < same.ratio_high
    hot = temperature_test(TemperatureStats.from_logits(*_labelled(rng, 2_000, 1.25)), reference)
    cold = temperature_test(TemperatureStats.from_logits(*_labelled(rng, 2_000, 0.8)), reference)
    assert hot.drifted and hot.direction == "over-confident" and hot.z > 0 and hot.ratio > 1.15
    assert cold.drifted and cold.direction == "under-confident" and cold.z < 0 and cold.ratio < 0.87
    # Within the margin: a 2% shift on many rows may be significant, but it is not a drift.
    slight = temperature_test(TemperatureStats.from_logits(*_labelled(rng, 50_000, 1.02)),
                              TemperatureStats.from_logits(*_labelled(rng, 50_000, 1.0)), margin=0.05)
    assert not slight.drifted and slight.p_value > 0.5 and slight.p_value_no_margin < 0.05


def test_the_reference_error_counts_two_sample() -> None:
    """A small reference's own error widens the test: the same window is judged less sure."""
    rng = np.random.default_rng(3)
    window = TemperatureStats.from_logits(*_labelled(rng, 2_000, 1.1))
    small = temperature_test(window, TemperatureStats.from_logits(*_labelled(rng, 300, 1.0)))
    large = temperature_test(window, TemperatureStats.from_logits(*_labelled(rng, 30_000, 1.0)))
    one_sample = temperature_test(window)
    assert small.standard_error > large.standard_error
    assert one_sample.reference_n == 0 and one_sample.reference_standard_error == 0.0
    # One-sample, the window's own sandwich variance: inflated at T = 1 by the drift itself.
    assert one_sample.window_standard_error > large.window_standard_error
    assert small.reference_standard_error > large.reference_standard_error


def test_arguments_are_checked() -> None:
    window = TemperatureStats.empty(1.0)
    with pytest.raises(ValueError, match="summed at T = 2.0"):
        temperature_test(window, TemperatureStats.empty(2.0))
    with pytest.raises(ValueError, match=r"margin must be a number in \[0, 1\)"):
        temperature_test(window, margin=1.5)
    with pytest.raises(TypeError, match="window must be TemperatureStats"):
        temperature_test(object())  # type: ignore[arg-type]
    empty = temperature_test(window)
    assert not empty.drifted and math.isnan(empty.z) and empty.direction == "none"


def test_collapsed_outputs_give_an_interval_up_to_infinity_not_an_overflow() -> None:
    """Logits 1e-4 x normal (a collapsed, near-uniform classifier) carry almost no information
    about T: the intervals widen towards 0 and infinity instead of raising OverflowError."""
    rng = np.random.default_rng(7)
    reference = TemperatureStats.from_logits(*_labelled(rng, 4_000, 1.0), temperature=2.0)
    errors = []
    for _ in range(12):  # the sign of a collapsed window's score sum is a coin flip: both sides
        window = TemperatureStats.from_logits(1e-4 * rng.normal(size=(2_000, 10)), rng.integers(0, 10, 2_000),
                                              temperature=2.0)
        low, high = window.interval()
        assert 0.0 <= low <= window.window_temperature <= high
        test = temperature_test(window, reference)
        assert 0.0 <= test.ratio_low <= test.ratio <= test.ratio_high and math.isfinite(test.z)
        assert json.dumps(test.to_dict(), allow_nan=False) and json.dumps(window.to_dict(), allow_nan=False)
        errors.append(test.standard_error)
    assert max(errors) > 100  # the case that overflowed: a held Newton step with a huge error
    # No information at all: the interval is (0, inf), serialised with null ends.
    blind = TemperatureStats(temperature=2.0, n=1_000, gradient_sum=0.0, gradient_square_sum=1.0, curvature_sum=1e-12)
    assert blind.interval() == (0.0, math.inf)
    unresolved = temperature_test(blind, reference)
    assert (unresolved.window_temperature_low, unresolved.window_temperature_high) == (0.0, math.inf)
    assert (unresolved.ratio_low, unresolved.ratio_high) == (0.0, math.inf)
    payload = json.loads(json.dumps(unresolved.to_dict(), allow_nan=False))
    assert payload["window_temperature_high"] is None and payload["ratio_high"] is None
    assert "inf]" in unresolved.sentence()


# --------------------------------------------------------------------------- the interval of a fit


def test_every_fit_reports_an_interval_of_t() -> None:
    rng = np.random.default_rng(4)
    logits, labels = _labelled(rng, 3_000, 1.7)
    fit = fit_temperature(logits, labels)
    assert fit.temperature_low < fit.temperature < fit.temperature_high and fit.confidence_level == 0.95
    # Symmetric in log T.
    assert math.log(fit.temperature / fit.temperature_low) == pytest.approx(math.log(fit.temperature_high / fit.temperature))
    # It agrees with the window's own sandwich interval at the fitted T.
    low, high = TemperatureStats.from_logits(logits, labels, temperature=fit.temperature).interval()
    assert (low, high) == pytest.approx((fit.temperature_low, fit.temperature_high), rel=2e-3)
    assert {"temperature_low", "temperature_high", "confidence_level"} <= fit.to_dict().keys()


def test_a_fit_on_a_bound_has_no_interval() -> None:
    logits = np.array([[5.0, 0.0], [0.0, 5.0], [4.0, 0.0]])
    fit = fit_temperature(logits, [0, 1, 0])  # no error: T goes to the lower bound
    assert fit.at_bound == "lower"
    assert math.isnan(fit.temperature_low) and fit.to_dict()["temperature_high"] is None


def _coverage(runs: int, n: int, k: int, true_temperature: float, scale: float) -> float:
    hits = 0
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        logits = scale * rng.normal(size=(n, k))
        fit = fit_temperature(logits, sample_labels(rng, logits / true_temperature))
        hits += fit.temperature_low <= true_temperature <= fit.temperature_high
    return hits / runs


def test_the_95_percent_interval_covers_the_true_t_in_93_to_97_percent_of_400_runs() -> None:
    """Labels drawn from softmax(z / T_true), 1,000 rows of 10 classes, 400 seeds (docs/statistics.md)."""
    assert 0.93 <= _coverage(400, 1_000, 10, 1.5, 3.0) <= 0.97


# --------------------------------------------------------------------------- rare errors (issue 22, item 1)

_REAL_LOGITS = Path(__file__).resolve().parents[1] / "data" / "real-logits"


def _very_confident_model() -> np.ndarray:
    """The 4,500 most confident rows of CIFAR-10 WRN-16-4 at its own T, as logits of a model that
    is calibrated by construction (labels are drawn from their softmax): about 3.7 errors
    expected in 5,000 rows, 0.37 in a window of 500."""
    data = np.load(_REAL_LOGITS / "cifar10_wrn16-4_netcal.npz")
    logits = data["logits"].astype(np.float64)
    logits /= fit_temperature(logits, data["labels"]).temperature
    confidence = TopLabelScores.from_logits(logits, data["labels"]).confidence
    return logits[np.argsort(-confidence, kind="stable")[:4_500]]


def test_one_confident_error_in_a_window_of_confident_rows_is_not_a_drift() -> None:
    """Before: the normal approximation of the score sum made one error in 500 rows a drift."""
    pool = _very_confident_model()
    rng = np.random.default_rng(22)
    reference_rows = pool[rng.integers(0, len(pool), 5_000)]
    reference_labels = sample_labels(rng, reference_rows)
    temperature = fit_temperature(reference_rows, reference_labels).temperature
    reference = TemperatureStats.from_logits(reference_rows, reference_labels, temperature=temperature)
    window = pool[rng.integers(0, len(pool), 500)]
    labels = window.argmax(axis=1)
    # One error, on the row the model is the most confident about: its second class is the label.
    ordered = np.sort(window, axis=1)
    row = int(np.argmax(ordered[:, -1] - ordered[:, -2]))
    labels[row] = int(np.argsort(window[row])[-2])
    stats = TemperatureStats.from_logits(window, labels, temperature=temperature)
    test = temperature_test(stats, reference, level=0.005)
    assert stats.expected_errors == pytest.approx(float(np.sum(1.0 - TopLabelScores.from_logits(
        window, labels, temperature=temperature).confidence)))
    assert stats.expected_errors < 5
    assert not test.drifted and not test.enough_errors and math.isnan(test.p_value)
    assert "not enough errors to test T" in test.sentence()
    # The same window with enough errors expected (a less confident model's) is tested.
    loose = temperature_test(TemperatureStats.from_logits(window / 4.0, labels, temperature=temperature),
                             TemperatureStats.from_logits(reference_rows / 4.0, reference_labels,
                                                          temperature=temperature))
    assert loose.enough_errors and math.isfinite(loose.p_value)


def test_the_level_holds_on_calibrated_windows_of_very_confident_rows() -> None:
    """At most twice the nominal 0.5 % over 400 windows of 500 and of 2,000 rows (before: 2.2 %
    and 1.4 % in the study, benchmarks/drift_study.py --confident)."""
    pool = _very_confident_model()
    flagged = {500: 0, 2_000: 0}
    for r in range(20):
        rng = np.random.default_rng([22, r])
        rows = pool[rng.integers(0, len(pool), 5_000)]
        labels = sample_labels(rng, rows)
        fit = fit_temperature(rows, labels)
        reference = TemperatureStats.from_logits(rows, labels, temperature=fit.temperature)
        for n in flagged:
            for _ in range(20):
                window = pool[rng.integers(0, len(pool), n)]
                stats = TemperatureStats.from_logits(window, sample_labels(rng, window), temperature=fit.temperature)
                flagged[n] += temperature_test(stats, reference, level=0.005).drifted
    assert flagged[500] / 400 <= 0.01 and flagged[2_000] / 400 <= 0.01, flagged


def test_a_reference_that_expects_too_few_errors_does_not_test_the_window() -> None:
    rng = np.random.default_rng(5)
    window = TemperatureStats.from_logits(*_labelled(rng, 2_000, 1.5))
    reference = TemperatureStats.from_logits(*_labelled(rng, 5_000, 1.0))
    assert temperature_test(window, reference).drifted
    few = TemperatureStats(temperature=1.0, n=reference.n, gradient_sum=reference.gradient_sum,
                           gradient_square_sum=reference.gradient_square_sum, curvature_sum=reference.curvature_sum,
                           expected_errors=2.0)
    test = temperature_test(window, few)
    assert not test.drifted and not test.enough_errors and test.reference_expected_errors == 2.0
    assert "the reference expects 2 errors at T" in test.sentence()
    # Sums kept without the count (NaN) are not gated: the window is tested as before.
    unknown = TemperatureStats(temperature=1.0, n=reference.n, gradient_sum=reference.gradient_sum,
                               gradient_square_sum=reference.gradient_square_sum,
                               curvature_sum=reference.curvature_sum)
    assert temperature_test(window, unknown).drifted and math.isnan(unknown.expected_errors)


def test_minimal_detectable_shift_follows_the_formula_and_the_test() -> None:
    rng = np.random.default_rng(6)
    reference = TemperatureStats.from_logits(*_labelled(rng, 5_000, 1.0))
    shift = minimal_detectable_shift(reference, 2_000, level=0.005, power=0.95)
    se_ref = reference.log_temperature_standard_error()
    # A window like the reference: SE(d) = SE_ref sqrt(1 + n_ref / n) up to the reference's own Σg.
    assert shift.standard_error == pytest.approx(se_ref * math.sqrt(1 + 5_000 / 2_000), rel=0.05)
    assert shift.log_shift == pytest.approx(math.log(1.03) + (2.5758 + 1.6449) * shift.standard_error, rel=1e-4)
    assert shift.increase == pytest.approx(math.expm1(shift.log_shift)) and 0 < shift.decrease < shift.increase
    # More rows, a smaller shift; a larger margin or a higher power, a larger one.
    assert minimal_detectable_shift(reference, 10_000, level=0.005).increase < shift.increase
    assert minimal_detectable_shift(reference, 2_000, level=0.005, margin=0.1).increase > shift.increase
    assert minimal_detectable_shift(reference, 2_000, level=0.005, power=0.99).increase > shift.increase
    # A check's own: from the test's SE, at its level and margin.
    test = temperature_test(TemperatureStats.from_logits(*_labelled(rng, 2_000, 1.0)), reference, level=0.005)
    own = test.minimal_detectable_shift()
    assert own.detectable and own.increase == pytest.approx(shift.increase, rel=0.1)
    assert own.sentence().startswith("this check could see a shift of T of +")
    # A window too small to expect errors: nothing is detectable.
    sure = minimal_detectable_shift(reference, 1, level=0.005)
    assert not sure.detectable and math.isnan(sure.increase) and "cannot see" in sure.sentence()
    with pytest.raises(ValueError, match="power must be strictly between 0 and 1"):
        minimal_detectable_shift(reference, 2_000, power=1.0)
    with pytest.raises(ValueError, match="window_n must be >= 1"):
        minimal_detectable_shift(reference, 0)
    with pytest.raises(ValueError, match="at least two rows with information about T"):
        minimal_detectable_shift(TemperatureStats.empty(1.0), 2_000)


def test_the_detectable_shift_of_rows_without_information_is_unbounded_not_an_overflow() -> None:
    from calibration import TemperatureStats, temperature_test

    flat = TemperatureStats(temperature=1.0, n=2_000, gradient_sum=1.0, gradient_square_sum=2_000.0,
                            curvature_sum=1e-30, expected_errors=1_800.0)  # a collapsed model's rows
    shift = temperature_test(flat).minimal_detectable_shift()
    assert shift.increase > 1e6 and 0.99 < shift.decrease <= 1.0 and "+" in shift.sentence()
    from calibration._temperature import _detectable_shift

    unbounded = _detectable_shift(2_000, 0, 1e4, 1_800.0, margin=0.05, level=0.01, power=0.95)  # was OverflowError
    assert unbounded.increase == float("inf") and unbounded.decrease == 1.0


def test_the_equivalence_margin_is_its_own_and_calibrated_needs_the_interval_inside_it() -> None:
    """Drift beyond 3 %, calibrated within 10 % at 5 %: a window between the two is undetermined,
    and its rows to decide aim at the nearer side."""
    rng = np.random.default_rng(11)
    reference = TemperatureStats.from_logits(*_labelled(rng, 50_000, 1.0))
    same = temperature_test(TemperatureStats.from_logits(*_labelled(rng, 20_000, 1.0)), reference, level=0.005)
    assert (same.margin, same.equivalence_margin, same.equivalence_level) == (0.03, 0.10, 0.05)
    assert same.within_margin and not same.drifted and same.rows_to_decide() is None
    # The same window against a 3 % equivalence margin at the drift side's level: not established.
    narrow = temperature_test(TemperatureStats.from_logits(*_labelled(rng, 2_000, 1.0)), reference, level=0.005,
                              equivalence_margin=0.03, equivalence_level=0.005)
    assert not narrow.within_margin and "equivalence margin" in narrow.sentence()
    # The equivalence p-value is Φ((|d| − log(1 + e)) / SE), whatever the drift margin.
    for margin in (0.0, 0.03, 0.05):
        test = temperature_test(TemperatureStats.from_logits(*_labelled(rng, 5_000, 1.0)), reference, margin=margin)
        expected = float(norm.cdf((abs(test.log_ratio) - math.log(1.10)) / test.standard_error))
        assert test.equivalence_p_value == pytest.approx(expected)
    with pytest.raises(ValueError, match="margin must be a number in"):
        temperature_test(same_stats := TemperatureStats.from_logits(*_labelled(rng, 500, 1.0)), reference,
                         equivalence_margin=1.5)
    with pytest.raises(ValueError, match="equivalence_level"):
        temperature_test(same_stats, reference, equivalence_level=0.0)
