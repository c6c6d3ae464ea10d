"""The gate: sweep thresholds on calibrated confidence and choose one by policy."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.typing import NDArray

from calibration._gate import GateChoice, GateSweep, choose_threshold, sweep_thresholds

Z95 = 1.959963984540054  # two-sided 95%: norm.ppf(0.975)


def wilson_lower(successes: int, trials: int, z: float = Z95) -> float:
    """Lower end of the Wilson score interval, written out from Wilson (1927)."""
    p = successes / trials
    return (p + z * z / (2 * trials) - z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))) / (
        1 + z * z / trials
    )


# Confidence on a coarse grid so that ties (shared thresholds) are common.
gate_data = st.integers(1, 60).flatmap(
    lambda n: st.tuples(
        hnp.arrays(np.float64, n, elements=st.integers(0, 20).map(lambda k: k / 20)),
        hnp.arrays(np.bool_, n),
    )
)


# --------------------------------------------------------------------------- known values


def test_wilson_bound_known_values() -> None:
    # 8 of 10: the textbook 95% Wilson interval is (0.4902, 0.9433).
    sweep = sweep_thresholds(np.full(10, 0.9), np.arange(10) < 8)
    assert sweep.accuracy_lower_bound[0] == pytest.approx(0.4902, abs=1e-4)
    assert sweep.accuracy_lower_bound[0] == pytest.approx(wilson_lower(8, 10), rel=1e-12)
    # All right: n / (n + z²). None right: 0.
    assert sweep_thresholds(np.full(20, 0.9), np.ones(20, bool)).accuracy_lower_bound[0] == pytest.approx(
        20 / (20 + Z95**2), rel=1e-12
    )
    assert sweep_thresholds(np.full(20, 0.9), np.zeros(20, bool)).accuracy_lower_bound[0] == 0.0


def test_wilson_level_is_the_two_sided_interval() -> None:
    # At 0.90 two-sided, z = norm.ppf(0.95) = 1.6448536...
    sweep = sweep_thresholds(np.full(10, 0.9), np.arange(10) < 8, confidence_level=0.90)
    assert sweep.accuracy_lower_bound[0] == pytest.approx(wilson_lower(8, 10, z=1.6448536269514722), rel=1e-12)


def test_tiny_sweep_by_hand() -> None:
    confidence = [0.8, 0.55, 0.95, 0.6, 0.8]
    correct = [1, 0, 1, 1, 0]
    sweep = sweep_thresholds(confidence, correct)
    assert isinstance(sweep, GateSweep)
    assert sweep.thresholds.tolist() == [0.55, 0.6, 0.8, 0.95]
    assert sweep.accepted_count.tolist() == [5, 4, 3, 1]
    assert sweep.coverage.tolist() == [1.0, 0.8, 0.6, 0.2]
    assert sweep.accepted_accuracy.tolist() == pytest.approx([3 / 5, 3 / 4, 2 / 3, 1.0])
    assert sweep.accuracy_lower_bound.tolist() == pytest.approx(
        [wilson_lower(3, 5), wilson_lower(3, 4), wilson_lower(2, 3), wilson_lower(1, 1)]
    )
    assert (sweep.n, sweep.confidence_level) == (5, 0.95)
    assert sweep.thresholds.dtype == np.float64 and sweep.accepted_count.dtype == np.int64


def test_choose_takes_the_lowest_threshold_meeting_the_target() -> None:
    # 100 rows at 0.6 (60 right), 100 at 0.9 (90 right), 100 at 0.99 (99 right).
    confidence = np.repeat([0.6, 0.9, 0.99], 100)
    correct = np.concatenate([np.arange(100) < 60, np.arange(100) < 90, np.arange(100) < 99])
    choice = choose_threshold(confidence, correct, target_accuracy=0.85)
    assert isinstance(choice, GateChoice)
    # At t = 0.9: 189 of 200 right, Wilson lower bound ~0.904 >= 0.85; at t = 0.6 the bound is < 0.85.
    assert choice.met and choice.threshold == 0.9
    assert choice.accepted_count == 200 and choice.coverage == pytest.approx(2 / 3)
    assert choice.accepted_accuracy == pytest.approx(189 / 200)
    assert choice.accuracy_lower_bound == pytest.approx(wilson_lower(189, 200))
    assert "threshold 0.9 is the lowest" in choice.reason and "coverage 66.7%" in choice.reason
    assert choice.target_accuracy == 0.85 and choice.confidence_level == 0.95


def test_choose_reports_nothing_meets_the_target() -> None:
    confidence = np.repeat([0.6, 0.9, 0.99], 100)
    correct = np.concatenate([np.arange(100) < 60, np.arange(100) < 90, np.arange(100) < 99])
    choice = choose_threshold(confidence, correct, target_accuracy=0.99)
    assert choice.threshold is None and not choice.met
    assert (choice.coverage, choice.accepted_count) == (0.0, 0)
    # Nothing accepted: accuracy undefined, never 100%.
    assert math.isnan(choice.accepted_accuracy) and math.isnan(choice.accuracy_lower_bound)
    best = wilson_lower(99, 100)
    assert choice.reason.startswith("no threshold reaches the target accepted accuracy 0.99 at 95% confidence")
    assert f"best Wilson lower bound was {best:.4f} at t=0.99" in choice.reason
    assert "0.9900 on 100 of 300 rows" in choice.reason and "lower target_accuracy" in choice.reason


def test_perfect_confidence_cannot_meet_a_target_with_one_example() -> None:
    # One right answer at confidence 1 proves little: the bound is 1 / (1 + z²) ~ 0.21.
    choice = choose_threshold([1.0], [True], target_accuracy=0.5)
    assert not choice.met and choice.threshold is None and math.isnan(choice.accepted_accuracy)


def test_correct_may_be_integers_or_floats() -> None:
    confidence = [0.2, 0.4, 0.4, 0.9]
    expected = sweep_thresholds(confidence, [False, True, False, True])
    for correct in ([0, 1, 0, 1], np.array([0.0, 1.0, 0.0, 1.0]), np.array([0, 1, 0, 1], dtype=np.uint8)):
        got = sweep_thresholds(confidence, correct)
        np.testing.assert_array_equal(got.accepted_accuracy, expected.accepted_accuracy)


# --------------------------------------------------------------------------- invariants


@given(gate_data)
def test_sweep_matches_brute_force_and_is_monotone(data: tuple[NDArray[np.float64], NDArray[np.bool_]]) -> None:
    confidence, correct = data
    sweep = sweep_thresholds(confidence, correct)
    np.testing.assert_array_equal(sweep.thresholds, np.unique(confidence))
    accepted = confidence[None, :] >= sweep.thresholds[:, None]
    np.testing.assert_array_equal(sweep.accepted_count, accepted.sum(axis=1))
    np.testing.assert_allclose(sweep.accepted_accuracy, (accepted & correct).sum(axis=1) / accepted.sum(axis=1))
    assert sweep.coverage[0] == 1.0
    assert np.all(np.diff(sweep.coverage) < 0)  # strictly: every distinct value drops its own rows
    assert np.all(sweep.accuracy_lower_bound <= sweep.accepted_accuracy + 1e-12)
    assert np.all((sweep.accuracy_lower_bound >= 0) & (sweep.accuracy_lower_bound <= 1))
    assert not np.isnan(sweep.accepted_accuracy).any()


@given(gate_data, st.randoms(use_true_random=False))
def test_sweep_is_permutation_invariant(data: tuple[NDArray[np.float64], NDArray[np.bool_]], random: Any) -> None:
    confidence, correct = data
    order = np.array(random.sample(range(len(confidence)), len(confidence)))
    a, b = sweep_thresholds(confidence, correct), sweep_thresholds(confidence[order], correct[order])
    for field in ("thresholds", "coverage", "accepted_count", "accepted_accuracy", "accuracy_lower_bound"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


@given(gate_data, st.floats(0.05, 0.95))
def test_choice_is_the_lowest_qualifying_threshold(
    data: tuple[NDArray[np.float64], NDArray[np.bool_]], target: float
) -> None:
    confidence, correct = data
    sweep = sweep_thresholds(confidence, correct)
    choice = choose_threshold(confidence, correct, target_accuracy=target)
    meets = sweep.accuracy_lower_bound >= target
    if choice.met:
        assert choice.threshold is not None
        i = int(np.searchsorted(sweep.thresholds, choice.threshold))
        assert meets[i] and not meets[:i].any()
        assert choice.coverage == sweep.coverage[i]
        # Applying the chosen threshold reproduces the reported numbers.
        accepted = confidence >= choice.threshold
        assert choice.accepted_count == accepted.sum()
        assert choice.accepted_accuracy == pytest.approx(correct[accepted].mean())
    else:
        assert not meets.any()
        assert choice.threshold is None and math.isnan(choice.accepted_accuracy) and choice.accepted_count == 0


def test_higher_level_gives_lower_bounds() -> None:
    rng = np.random.default_rng(0)
    confidence = rng.uniform(0.5, 1.0, 500)
    correct = rng.random(500) < confidence
    loose = sweep_thresholds(confidence, correct, confidence_level=0.8).accuracy_lower_bound
    strict = sweep_thresholds(confidence, correct, confidence_level=0.99).accuracy_lower_bound
    assert np.all(strict <= loose)


def test_float32_confidence_is_accepted() -> None:
    sweep = sweep_thresholds(np.array([0.3, 0.7, 0.7], dtype=np.float32), [True, False, True])
    assert sweep.thresholds.dtype == np.float64
    assert sweep.accepted_count.tolist() == [3, 2]


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("confidence", "correct", "error", "message"),
    [
        ([], [], ValueError, "confidence is empty (0 rows); at least one example is required"),
        ([[0.5]], [True], ValueError, "confidence must be 1-D of shape (n_samples,); got shape (1, 1)"),
        ([0.5, np.nan], [True, True], ValueError, "confidence row 1 is nan; every confidence must be a finite probability"),
        ([0.5, 1.2], [True, True], ValueError, "confidence row 1 is 1.2; every confidence must be a finite probability in [0, 1]"),
        ([-0.1], [True], ValueError, "confidence row 0 is -0.1"),
        (["a"], [True], TypeError, "confidence must hold numbers in [0, 1]; got dtype <U1"),
        ([0.5, 0.6], [True], ValueError, "correct has 1 entries but confidence has 2; they must match"),
        ([0.5, 0.6], [1, 2], ValueError, "correct row 1 is 2; correct must be boolean or 0/1"),
        ([0.5], ["yes"], TypeError, "correct must be boolean (or 0/1); got dtype <U3"),
        ([0.5], [[True]], ValueError, "correct must be 1-D of shape (n_samples,)"),
    ],
)
def test_sweep_validation(confidence: Any, correct: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        sweep_thresholds(confidence, correct)
    assert message in str(info.value)
    with pytest.raises(error):
        choose_threshold(confidence, correct, target_accuracy=0.9)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"target_accuracy": 1.0}, ValueError, "target_accuracy must be strictly between 0 and 1 (e.g. 0.95); got 1.0"),
        ({"target_accuracy": 0.0}, ValueError, "target_accuracy must be strictly between 0 and 1"),
        ({"target_accuracy": "0.9"}, TypeError, "target_accuracy must be a number in (0, 1)"),
        ({"target_accuracy": True}, TypeError, "target_accuracy must be a number in (0, 1)"),
        ({"target_accuracy": 0.9, "confidence_level": 1.5}, ValueError, "confidence_level must be strictly between 0 and 1"),
    ],
)
def test_choose_validation(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        choose_threshold([0.5, 0.9], [True, False], **kwargs)
    assert message in str(info.value)


def test_sweep_level_validation() -> None:
    with pytest.raises(ValueError, match="confidence_level must be strictly between 0 and 1"):
        sweep_thresholds([0.5], [True], confidence_level=0.0)
