"""Paired bootstrap of the NLL change and consistency resampling of ECE."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy.special import log_softmax

from calibration import _evidence
from calibration._evidence import (
    BootstrapComparison,
    ConsistencyTest,
    consistency_resampling_from_stats,
    consistency_resampling_test,
    paired_bootstrap_nll,
)
from tests.strategies import positive_temperature, sample_labels, scored_arrays

# --------------------------------------------------------------------------- helpers


def synthetic(seed: int, n: int, true_temperature: float, n_classes: int = 4, scale: float = 3.0) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    logits = scale * rng.normal(size=(n, n_classes))
    return logits, sample_labels(rng, logits / true_temperature)


def bin_sums(
    logits: NDArray[np.float64], labels: NDArray[np.intp], temperature: float = 1.0, n_bins: int = 15
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-bin Σ(correct − q) and Σ q(1 − q), computed here independently of the library."""
    probabilities = np.exp(log_softmax(logits / temperature, axis=1))
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == labels
    bins = np.clip(np.ceil(confidence * n_bins).astype(int) - 1, 0, n_bins - 1)
    gap = np.bincount(bins, weights=correct - confidence, minlength=n_bins).astype(np.float64)
    variance = np.bincount(bins, weights=confidence * (1 - confidence), minlength=n_bins).astype(np.float64)
    return gap, variance


# --------------------------------------------------------------------------- paired bootstrap


def test_same_temperature_is_zero_and_not_established() -> None:
    logits, labels = synthetic(0, 200, 1.0)
    result = paired_bootstrap_nll(logits, labels, temperature_before=1.5, temperature_after=1.5, n_resamples=200)
    assert isinstance(result, BootstrapComparison)
    assert (result.estimate, result.low, result.high) == (0.0, 0.0, 0.0)
    assert result.verdict == "not established"


def test_fitting_the_true_temperature_is_an_improvement() -> None:
    # Logits read at T = 1 are twice too sharp; T = 2 is the truth.
    logits, labels = synthetic(1, 1000, 2.0)
    result = paired_bootstrap_nll(logits, labels, temperature_before=1.0, temperature_after=2.0, n_resamples=500)
    assert result.verdict == "improved"
    assert result.low <= result.estimate <= result.high < 0.0
    reverse = paired_bootstrap_nll(logits, labels, temperature_before=2.0, temperature_after=1.0, n_resamples=500)
    assert reverse.verdict == "worse"
    assert reverse.estimate == pytest.approx(-result.estimate, rel=1e-12)
    assert 0.0 < reverse.low


def test_a_small_change_on_a_small_set_is_not_established() -> None:
    logits, labels = synthetic(0, 30, 1.0, n_classes=3, scale=2.0)
    result = paired_bootstrap_nll(logits, labels, temperature_before=1.0, temperature_after=1.1)
    assert result.low < 0.0 < result.high
    assert result.verdict == "not established"


def test_estimate_is_the_mean_nll_difference() -> None:
    logits, labels = synthetic(2, 300, 1.5)
    rows = np.arange(300)
    nll_before = -log_softmax(logits / 1.0, axis=1)[rows, labels]
    nll_after = -log_softmax(logits / 1.7, axis=1)[rows, labels]
    result = paired_bootstrap_nll(logits, labels, temperature_before=1.0, temperature_after=1.7, n_resamples=50)
    assert result.estimate == pytest.approx(float(np.mean(nll_after - nll_before)), rel=1e-12)
    assert (result.n, result.n_resamples, result.seed, result.confidence_level) == (300, 50, 0, 0.95)
    assert (result.temperature_before, result.temperature_after) == (1.0, 1.7)


def test_bootstrap_is_reproducible_and_seeded() -> None:
    logits, labels = synthetic(3, 200, 1.3)
    kwargs: dict[str, Any] = {"temperature_before": 1.0, "temperature_after": 1.3, "n_resamples": 300}
    first = paired_bootstrap_nll(logits, labels, seed=7, **kwargs)
    assert paired_bootstrap_nll(logits, labels, seed=7, **kwargs) == first
    other = paired_bootstrap_nll(logits, labels, seed=8, **kwargs)
    assert other.estimate == first.estimate
    assert (other.low, other.high) != (first.low, first.high)


def test_wider_level_gives_wider_interval() -> None:
    logits, labels = synthetic(4, 200, 1.3)
    kwargs: dict[str, Any] = {"temperature_before": 1.0, "temperature_after": 1.3, "n_resamples": 400}
    narrow = paired_bootstrap_nll(logits, labels, confidence_level=0.8, **kwargs)
    wide = paired_bootstrap_nll(logits, labels, confidence_level=0.99, **kwargs)
    assert wide.low <= narrow.low <= narrow.high <= wide.high


def test_block_size_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    logits, labels = synthetic(5, 300, 1.5)
    gap, variance = bin_sums(logits, labels)

    def run() -> tuple[object, ...]:
        return (
            paired_bootstrap_nll(logits, labels, temperature_before=1.0, temperature_after=1.5, n_resamples=100),
            consistency_resampling_test(logits, labels, n_resamples=100),
            consistency_resampling_from_stats(gap, variance, 300, n_resamples=100),
        )

    whole = run()
    monkeypatch.setattr(_evidence, "_MAX_BLOCK_ELEMENTS", 7 * 300 + 5)  # 7 resamples per block, ragged end
    assert run() == whole
    monkeypatch.setattr(_evidence, "_MAX_BLOCK_ELEMENTS", 1)  # one resample per block
    assert run() == whole


def test_float32_logits_are_read_as_they_are() -> None:
    logits, labels = synthetic(6, 200, 1.0)
    result = paired_bootstrap_nll(
        logits.astype(np.float32), labels, temperature_before=1.0, temperature_after=1.2, n_resamples=50
    )
    reference = paired_bootstrap_nll(logits, labels, temperature_before=1.0, temperature_after=1.2, n_resamples=50)
    assert result.estimate == pytest.approx(reference.estimate, abs=1e-5)


@given(scored_arrays(max_rows=40), positive_temperature, positive_temperature, st.randoms(use_true_random=False))
def test_bootstrap_invariants(
    data: tuple[NDArray[np.float64], NDArray[np.intp]], before: float, after: float, random: Any
) -> None:
    logits, labels = data
    result = paired_bootstrap_nll(logits, labels, temperature_before=before, temperature_after=after, n_resamples=50)
    assert result.low <= result.high
    expected = "improved" if result.high < 0 else "worse" if result.low > 0 else "not established"
    assert result.verdict == expected
    # Order of rows and a constant added to a row change nothing in the estimate.
    order = np.array(random.sample(range(len(labels)), len(labels)))
    shift = np.array([random.uniform(-50, 50) for _ in labels])[:, None]
    moved = paired_bootstrap_nll(
        logits[order] + shift[order], labels[order], temperature_before=before, temperature_after=after, n_resamples=50
    )
    assert moved.estimate == pytest.approx(result.estimate, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"n_resamples": 0}, ValueError, "n_resamples must be >= 1; got 0"),
        ({"n_resamples": 2.5}, TypeError, "n_resamples must be an integer >= 1; got 2.5"),
        ({"n_resamples": True}, TypeError, "n_resamples must be an integer"),
        ({"confidence_level": 1.0}, ValueError, "confidence_level must be strictly between 0 and 1 (e.g. 0.95); got 1.0"),
        ({"confidence_level": 0}, ValueError, "confidence_level must be strictly between 0 and 1"),
        ({"confidence_level": float("nan")}, ValueError, "confidence_level must be strictly between 0 and 1"),
        ({"confidence_level": "0.9"}, TypeError, "confidence_level must be a number in (0, 1)"),
        ({"seed": -1}, ValueError, "seed must be >= 0; got -1"),
        ({"temperature_before": 0.0}, ValueError, "temperature_before must be finite and > 0; got 0.0"),
        ({"temperature_after": float("inf")}, ValueError, "temperature_after must be finite and > 0"),
    ],
)
def test_bootstrap_validation(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    logits, labels = synthetic(0, 20, 1.0)
    arguments: dict[str, Any] = {"temperature_before": 1.0, "temperature_after": 2.0, **kwargs}
    with pytest.raises(error) as info:
        paired_bootstrap_nll(logits, labels, **arguments)
    assert message in str(info.value)


def test_bootstrap_refuses_bad_data() -> None:
    logits, labels = synthetic(0, 20, 1.0)
    with pytest.raises(ValueError, match="labels row 3 is 4; labels must be integers in \\[0, 4\\)"):
        paired_bootstrap_nll(logits, np.where(np.arange(20) == 3, 4, labels), temperature_before=1, temperature_after=2)
    bad = logits.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match="logits row 5 contains nan; every logit must be finite"):
        paired_bootstrap_nll(bad, labels, temperature_before=1, temperature_after=2)


# --------------------------------------------------------------------------- consistency resampling


def test_observed_ece_known_value() -> None:
    # Confidence 0.75 (bin 11 of 15) on four rows, three right: calibrated, ECE 0.
    # Confidence 0.9 (bin 13) on two rows, both wrong: |0 - 1.8| / 6 = 0.3.
    logits = np.array([[np.log(3.0), 0.0]] * 4 + [[np.log(9.0), 0.0]] * 2)
    labels = np.array([0, 0, 0, 1, 1, 1])
    test = consistency_resampling_test(logits, labels, n_resamples=200)
    assert isinstance(test, ConsistencyTest)
    assert test.observed_ece == pytest.approx(0.3, abs=1e-12)
    assert (test.n, test.n_bins, test.scheme, test.n_resamples, test.seed) == (6, 15, "equal-width", 200, 0)


def test_observed_ece_matches_an_independent_computation() -> None:
    logits, labels = synthetic(7, 500, 1.4)
    for temperature in (0.7, 1.0, 1.4):
        gap, _ = bin_sums(logits, labels, temperature, n_bins=10)
        test = consistency_resampling_test(logits, labels, temperature=temperature, n_bins=10, n_resamples=20)
        assert test.observed_ece == pytest.approx(np.abs(gap).sum() / 500, rel=1e-12)


def test_a_calibrated_model_gives_roughly_uniform_p_values() -> None:
    p_values = np.array(
        [consistency_resampling_test(*synthetic(seed, 500, 1.0), n_resamples=300, seed=seed).p_value for seed in range(50)]
    )
    assert np.count_nonzero(p_values < 0.01) <= 3
    assert 0.25 <= np.mean(p_values < 0.5) <= 0.75
    assert np.all((1 / 301 <= p_values) & (p_values <= 1.0))


def test_a_model_twice_too_sharp_is_detected() -> None:
    logits, labels = synthetic(11, 2000, 2.0)
    sharp = consistency_resampling_test(logits, labels, temperature=1.0)
    assert sharp.p_value < 0.01
    assert sharp.observed_ece > sharp.null_quantile_95 > sharp.null_mean > 0.0
    # At its true temperature the same model is calibrated.
    assert consistency_resampling_test(logits, labels, temperature=2.0).p_value > 0.01


def test_p_value_has_the_plus_one_correction() -> None:
    # Confidence 1 on a wrong row: no resample can reach the observed ECE.
    logits = np.array([[100.0, 0.0], [0.0, 100.0]])
    test = consistency_resampling_test(logits, np.array([1, 1]), n_resamples=99)
    assert test.p_value == pytest.approx(1 / 100)
    # Every row right at confidence 1: observed 0, every resample 0, p = 1.
    assert consistency_resampling_test(logits, np.array([0, 1]), n_resamples=99).p_value == 1.0


def test_consistency_is_permutation_invariant_in_its_observation() -> None:
    logits, labels = synthetic(8, 300, 1.2)
    order = np.random.default_rng(0).permutation(300)
    a = consistency_resampling_test(logits, labels, n_resamples=100)
    b = consistency_resampling_test(logits[order], labels[order], n_resamples=100)
    assert b.observed_ece == pytest.approx(a.observed_ece, rel=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"n_bins": 0}, ValueError, "n_bins must be >= 1; got 0"),
        ({"n_resamples": 0}, ValueError, "n_resamples must be >= 1; got 0"),
        ({"temperature": -1.0}, ValueError, "temperature must be finite and > 0; got -1.0"),
        ({"seed": 1.5}, TypeError, "seed must be an integer >= 0; got 1.5"),
    ],
)
def test_consistency_validation(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    logits, labels = synthetic(0, 20, 1.0)
    with pytest.raises(error) as info:
        consistency_resampling_test(logits, labels, **kwargs)
    assert message in str(info.value)


# --------------------------------------------------------------------------- from mergeable sums


@pytest.mark.parametrize("true_temperature", [1.0, 1.3])
def test_stats_version_agrees_with_resampling_rows(true_temperature: float) -> None:
    for seed in range(3):
        logits, labels = synthetic(seed, 2000, true_temperature)
        rows = consistency_resampling_test(logits, labels, n_resamples=500)
        gap, variance = bin_sums(logits, labels)
        sums = consistency_resampling_from_stats(gap, variance, 2000, n_resamples=500)
        assert sums.observed_ece == pytest.approx(rows.observed_ece, rel=1e-9)
        assert sums.null_mean == pytest.approx(rows.null_mean, rel=0.1)
        assert abs(sums.p_value - rows.p_value) < 0.1
        assert (sums.p_value < 0.01) == (rows.p_value < 0.01)
        assert (sums.n, sums.n_bins, sums.scheme) == (2000, 15, "equal-width")


def test_stats_known_values() -> None:
    # Observed ECE = (1.5 + 2 + 30) / 300.
    test = consistency_resampling_from_stats([1.5, -2.0, -30.0], [4.0, 9.0, 16.0], 300, n_resamples=200)
    assert test.observed_ece == pytest.approx(33.5 / 300)
    assert test.p_value == pytest.approx(1 / 201)
    # Null ECE is Σ σ_b |Z_b| / n, whose mean is Σ σ_b sqrt(2/π) / n.
    assert test.null_mean == pytest.approx((2 + 3 + 4) * np.sqrt(2 / np.pi) / 300, rel=0.1)
    # No variance and no gap (all confidence 1, all right): p = 1.
    assert consistency_resampling_from_stats([0.0, 0.0], [0.0, 0.0], 10).p_value == 1.0


def test_stats_sums_merge_like_the_window() -> None:
    logits, labels = synthetic(9, 600, 1.0)
    gap_a, var_a = bin_sums(logits[:250], labels[:250])
    gap_b, var_b = bin_sums(logits[250:], labels[250:])
    gap, variance = bin_sums(logits, labels)
    merged = consistency_resampling_from_stats(gap_a + gap_b, var_a + var_b, 600, n_resamples=100)
    whole = consistency_resampling_from_stats(gap, variance, 600, n_resamples=100)
    assert merged.observed_ece == pytest.approx(whole.observed_ece, rel=1e-12)
    assert merged.p_value == whole.p_value


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (([0.0, 1.0], [1.0], 10), {}, ValueError, "bin_gap_sum has 2 bins but bin_variance_sum has 1"),
        (([0.0, 1.0], [1.0, -0.5], 10), {}, ValueError, "bin_variance_sum bin 1 is -0.5; a sum of q(1 - q) must be >= 0"),
        (([0.0, np.nan], [1.0, 1.0], 10), {}, ValueError, "bin_gap_sum bin 1 is nan; every per-bin sum must be finite"),
        (([[0.0]], [[1.0]], 10), {}, ValueError, "bin_gap_sum must be 1-D of shape (n_bins,)"),
        (([], [], 10), {}, ValueError, "bin_gap_sum must be 1-D of shape (n_bins,) with n_bins >= 1; got shape (0,)"),
        ((["a"], [1.0], 10), {}, TypeError, "bin_gap_sum must be numeric"),
        (([0.0], [1.0], 0), {}, ValueError, "n must be >= 1; got 0"),
        (([0.0], [1.0], 10.0), {}, TypeError, "n must be an integer >= 1; got 10.0"),
        (([0.0], [1.0], 10), {"n_resamples": -3}, ValueError, "n_resamples must be >= 1; got -3"),
        (([0.0], [1.0], 10), {"seed": -2}, ValueError, "seed must be >= 0; got -2"),
    ],
)
def test_stats_validation(args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        consistency_resampling_from_stats(*args, **kwargs)
    assert message in str(info.value)


def test_stats_function_is_exported() -> None:
    assert "consistency_resampling_from_stats" in _evidence.__all__
