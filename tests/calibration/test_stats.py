"""CalibrationStats: merging is exact, and every metric follows from the sums."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibration import CalibrationStats, evaluate
from tests.strategies import positive_temperature, scored_arrays


@given(scored_arrays(min_rows=2), st.integers(1, 20), positive_temperature, st.data())
def test_stats_of_parts_add_up_to_stats_of_union(
    data: tuple[np.ndarray, np.ndarray], n_bins: int, temperature: float, draw: st.DataObject
) -> None:
    logits, labels = data
    cut = draw.draw(st.integers(1, logits.shape[0] - 1))
    whole = CalibrationStats.from_logits(logits, labels, temperature=temperature, n_bins=n_bins)
    left = CalibrationStats.from_logits(logits[:cut], labels[:cut], temperature=temperature, n_bins=n_bins)
    right = CalibrationStats.from_logits(logits[cut:], labels[cut:], temperature=temperature, n_bins=n_bins)
    merged = left + right
    np.testing.assert_array_equal(merged.bin_count, whole.bin_count)
    np.testing.assert_array_equal(merged.bin_correct, whole.bin_correct)
    np.testing.assert_allclose(merged.bin_confidence_sum, whole.bin_confidence_sum, rtol=1e-12, atol=1e-12)
    assert merged.nll_sum == pytest.approx(whole.nll_sum, rel=1e-12, abs=1e-12)
    assert merged == whole
    empty = CalibrationStats.empty(n_bins=n_bins, temperature=temperature, n_classes=logits.shape[1])
    assert empty + whole == whole and empty.n == 0 and np.isnan(empty.ece)


@given(scored_arrays(), positive_temperature)
def test_stats_metrics_equal_array_metrics(data: tuple[np.ndarray, np.ndarray], temperature: float) -> None:
    logits, labels = data
    stats = CalibrationStats.from_logits(logits, labels, temperature=temperature)
    report = evaluate(logits, labels, temperature=temperature)
    assert stats.n == report.n == logits.shape[0]
    assert stats.accuracy == report.accuracy
    assert stats.ece == pytest.approx(report.ece, abs=1e-12)
    assert stats.mce == pytest.approx(report.mce, abs=1e-12)
    assert stats.mean_confidence == pytest.approx(report.mean_confidence, rel=1e-12)


def test_merge_refuses_different_binning_or_temperature() -> None:
    logits, labels = np.zeros((2, 2)), np.array([0, 1])
    base = CalibrationStats.from_logits(logits, labels)
    with pytest.raises(ValueError, match="different n_bins: 15 and 10"):
        base + CalibrationStats.from_logits(logits, labels, n_bins=10)
    with pytest.raises(ValueError, match="different temperature"):
        base + CalibrationStats.from_logits(logits, labels, temperature=2.0)


def test_reliability_rows_are_json_ready() -> None:
    stats = CalibrationStats.from_logits(np.log([[0.3, 0.7], [0.9, 0.1]]), [1, 0], n_bins=3)
    rows = stats.reliability_table(min_count=2).rows()
    assert rows[0] == {"lower": 0.0, "upper": 1 / 3, "count": 0, "mean_confidence": None, "accuracy": None,
                       "gap": None, "sparse": True}
    assert rows[2]["count"] == 2 and rows[2]["sparse"] is False
