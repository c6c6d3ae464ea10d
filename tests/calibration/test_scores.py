"""TopLabelScores: one pass per chunk, and every grouping of its rows equals binning that group anew."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray
from hypothesis import given
from hypothesis import strategies as st

from calibration import (
    CalibrationStats,
    ServedPriorStats,
    TopLabelScores,
    calibrated_probabilities,
    top_label_and_probabilities,
    top_label_confidence,
)
from tests.strategies import positive_temperature, scored_arrays


def assert_same_stats(got: CalibrationStats, want: CalibrationStats) -> None:
    assert (got.n_bins, got.temperature, got.n_classes) == (want.n_bins, want.temperature, want.n_classes)
    np.testing.assert_array_equal(got.bin_count, want.bin_count)  # counts exactly
    np.testing.assert_array_equal(got.bin_correct, want.bin_correct)
    assert got == want  # sums to float rounding


@given(scored_arrays(min_rows=1), st.integers(1, 20), positive_temperature, st.integers(1, 4), st.data())
def test_grouped_statistics_equal_the_statistics_of_each_group(
    data: tuple[np.ndarray, np.ndarray], n_bins: int, temperature: float, n_groups: int, draw: st.DataObject
) -> None:
    logits, labels = data
    codes = np.array(draw.draw(st.lists(st.integers(0, n_groups - 1), min_size=len(labels), max_size=len(labels))))
    scores = TopLabelScores.from_logits(logits, labels, temperature=temperature)
    grouped = scores.grouped_calibration_stats(codes, n_groups, n_bins=n_bins)
    assert len(grouped) == n_groups
    for g, stats in enumerate(grouped):
        rows = codes == g
        if rows.any():
            want = CalibrationStats.from_logits(logits[rows], labels[rows], temperature=temperature, n_bins=n_bins)
        else:
            want = CalibrationStats.empty(n_bins=n_bins, temperature=temperature, n_classes=logits.shape[1])
        assert_same_stats(stats, want)
    whole = CalibrationStats.from_logits(logits, labels, temperature=temperature, n_bins=n_bins)
    assert_same_stats(scores.calibration_stats(n_bins=n_bins), whole)
    assert sum(grouped[1:], grouped[0]) == whole
    predictions, confidence = top_label_confidence(logits, temperature=temperature)
    np.testing.assert_array_equal(scores.predictions, predictions)
    np.testing.assert_allclose(scores.confidence, confidence, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_large_chunk_equals_the_compiled_kernel(dtype: type) -> None:
    """Above the size where CalibrationStats uses the numba kernel, the counts still agree exactly."""
    rng = np.random.default_rng(3)
    logits = (3.0 * rng.normal(size=(30_000, 10))).astype(dtype)
    labels = rng.integers(0, 10, size=30_000)
    codes = rng.integers(0, 3, size=30_000)
    scores = TopLabelScores.from_logits(logits, labels, temperature=1.7)
    for g, stats in enumerate(scores.grouped_calibration_stats(codes, 3)):
        rows = codes == g
        assert_same_stats(stats, CalibrationStats.from_logits(logits[rows], labels[rows], temperature=1.7))
    assert_same_stats(scores.calibration_stats(), CalibrationStats.from_logits(logits, labels, temperature=1.7))


def test_bad_input_is_refused_naming_the_argument() -> None:
    with pytest.raises(ValueError, match="row 1 contains nan; every logit must be finite"):
        TopLabelScores.from_logits(np.array([[0.0, 1.0], [np.nan, 0.0]]), [0, 1])
    with pytest.raises(ValueError, match="temperature must be finite and > 0"):
        TopLabelScores.from_logits(np.zeros((2, 2)), [0, 1], temperature=0.0)
    scores = TopLabelScores.from_logits(np.zeros((3, 2)), [0, 1, 1])
    with pytest.raises(ValueError, match=r"group_codes row 2 is 5; group codes must be in \[0, 2\)"):
        scores.grouped_calibration_stats([0, 1, 5], 2)
    with pytest.raises(ValueError, match="one code per row"):
        scores.grouped_calibration_stats([0, 1], 2)
    with pytest.raises(TypeError, match="group_codes must be integers"):
        scores.grouped_calibration_stats([0.0, 1.0, 1.0], 2)
    with pytest.raises(ValueError, match="n_groups must be an integer >= 1"):
        scores.grouped_calibration_stats([0, 0, 0], 0)


@given(scored_arrays(min_rows=1), positive_temperature)
def test_the_shared_softmax_gives_the_two_calls_numbers_bit_for_bit(
    data: tuple[NDArray[np.float64], NDArray[np.intp]], temperature: float
) -> None:
    """top_label_and_probabilities is one exp pass for a reader that needs the top label and the
    posteriors (the monitor's profile and priors): the numbers of the two separate calls, exactly."""
    logits = data[0]
    predictions, confidence, probabilities = top_label_and_probabilities(logits, temperature=temperature)
    alone_predictions, alone_confidence = top_label_confidence(logits, temperature=temperature)
    assert np.array_equal(predictions, alone_predictions)
    assert np.array_equal(confidence, alone_confidence)
    assert np.array_equal(probabilities, calibrated_probabilities(logits, temperature=temperature))
    stats = ServedPriorStats.from_probabilities(probabilities, predictions, temperature=temperature, capacity=5)
    same = ServedPriorStats.from_logits(logits, temperature=temperature, capacity=5)
    assert np.array_equal(stats.posterior_sum, same.posterior_sum) and np.array_equal(stats.sample, same.sample)
    assert np.array_equal(stats.predicted_counts, same.predicted_counts)


def test_posteriors_and_predictions_of_different_rows_are_refused() -> None:
    with pytest.raises(ValueError, match=r"probabilities must be \(n, K\) and predictions \(n,\)"):
        ServedPriorStats.from_probabilities(np.full((3, 2), 0.5), np.zeros(2, dtype=np.intp), temperature=1.0)
