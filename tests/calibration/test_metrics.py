"""Metrics: known values, binning convention, groups, invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibration import (
    accuracy,
    brier_score,
    classwise_calibration_error,
    evaluate,
    expected_calibration_error,
    group_calibration,
    maximum_calibration_error,
    mean_confidence,
    negative_log_likelihood,
    reliability_table,
)
from calibration._softmax import softmax
from tests.strategies import positive_temperature, row_shift, sample_labels, scored_arrays

PROBS = np.array([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]])
LABELS = np.array([1, 0, 0])


def test_known_ece_one_third() -> None:
    assert expected_calibration_error(np.log(PROBS), LABELS, n_bins=3) == pytest.approx(1 / 3)
    table = reliability_table(np.log(PROBS), LABELS, n_bins=3)
    assert table.count.tolist() == [0, 1, 2]
    assert np.isnan(table.accuracy[0]) and np.isnan(table.mean_confidence[0])
    assert table.accuracy[1:].tolist() == [0.0, 1.0]
    assert table.mean_confidence[1:] == pytest.approx([0.6, 0.8])
    assert table.gap[1:] == pytest.approx([-0.6, 0.2])
    assert table.sparse.tolist() == [True, True, True]
    assert maximum_calibration_error(np.log(PROBS), LABELS, n_bins=3) == pytest.approx(0.6)


def test_bin_edges_are_right_closed_and_zero_goes_first() -> None:
    # Two-class confidences are >= 0.5; with 4 bins, exactly 0.5 closes bin 1 = (0.25, 0.5].
    logits = np.log([[0.5, 0.5], [0.75, 0.25], [0.76, 0.24]])
    table = reliability_table(logits, [0, 0, 0], n_bins=4)
    assert table.count.tolist() == [0, 1, 1, 1]
    assert table.lower.tolist() == [0.0, 0.25, 0.5, 0.75] and table.upper.tolist() == [0.25, 0.5, 0.75, 1.0]


def test_scalar_metrics_known_values() -> None:
    logits = np.log(PROBS)
    assert accuracy(logits, LABELS) == pytest.approx(2 / 3)
    assert mean_confidence(logits) == pytest.approx((0.7 + 0.9 + 0.6) / 3)
    expected_nll = -(np.log(0.7) + np.log(0.9) + np.log(0.4)) / 3
    assert negative_log_likelihood(logits, LABELS) == pytest.approx(expected_nll, rel=1e-12)
    expected_brier = ((0.3**2 + 0.3**2) + (0.1**2 + 0.1**2) + (0.6**2 + 0.6**2)) / 3
    assert brier_score(logits, LABELS) == pytest.approx(expected_brier, rel=1e-12)


def test_nll_is_not_clipped() -> None:
    # A confident mistake at p = 1e-30 costs 69 nats, not the 34.5 of a 1e-15 clip.
    logits = np.array([[0.0, np.log(1e-30)]])
    assert negative_log_likelihood(logits, [1]) == pytest.approx(-np.log(1e-30), rel=1e-9)


def test_temperature_changes_confidence_not_accuracy() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=3, size=(500, 5))
    labels = sample_labels(rng, logits / 2)
    sharp, flat = evaluate(logits, labels), evaluate(logits, labels, temperature=2.0)
    assert sharp.accuracy == flat.accuracy
    assert flat.mean_confidence < sharp.mean_confidence
    assert flat.nll < sharp.nll and flat.ece < sharp.ece


def test_equal_mass_bins_hold_equal_counts() -> None:
    rng = np.random.default_rng(1)
    logits = rng.normal(scale=2, size=(103, 4))
    labels = rng.integers(0, 4, 103)
    table = reliability_table(logits, labels, n_bins=10, scheme="equal-mass")
    assert table.scheme == "equal-mass" and table.count.sum() == 103
    assert set(table.count.tolist()) <= {10, 11}
    assert np.all(table.lower <= table.upper) and np.all(np.diff(table.lower) >= 0)
    # One bin: ECE is |accuracy - mean confidence| whatever the scheme.
    one = expected_calibration_error(logits, labels, n_bins=1, scheme="equal-mass")
    assert one == pytest.approx(abs(accuracy(logits, labels) - mean_confidence(logits)))
    assert one == pytest.approx(expected_calibration_error(logits, labels, n_bins=1))


def test_equal_mass_with_fewer_rows_than_bins_leaves_bins_empty() -> None:
    table = reliability_table(np.log(PROBS), LABELS, n_bins=5, scheme="equal-mass")
    assert table.count.tolist().count(0) == 2 and table.ece == pytest.approx(
        expected_calibration_error(np.log(PROBS), LABELS, n_bins=5, scheme="equal-mass")
    )


def test_classwise_ece_known_value_and_binary_symmetry() -> None:
    # Binary: class 0 and class 1 errors mirror each other, so classwise ECE equals the
    # ECE of p_1 alone, here with 3 bins: p_1 = .7 (y=1), .1 (y=0), .6 (y=0).
    # Class 1: p = .1 (bin 0, y=0), .6 (bin 1, y=0), .7 (bin 2, y=1): |0-.1| + |0-.6| + |1-.7| = 1.0.
    # Class 0 mirrors it bin for bin, so the mean over classes is 1.0 / 3.
    value = classwise_calibration_error(np.log(PROBS), LABELS, n_bins=3)
    assert value == pytest.approx(1.0 / 3.0, rel=1e-12)


def test_group_only_miscalibration_hides_in_the_average() -> None:
    """Overall ECE 0 while each group is off by 30 points in opposite directions."""
    # Group a: says 0.6, right 90%; group b: says 0.6, right 30%. Pooled: 0.6 and 60%.
    logits = np.tile(np.log([0.6, 0.4]), (20, 1))
    labels = np.array([0] * 9 + [1] * 1 + [0] * 3 + [1] * 7)
    groups = np.array(["a"] * 10 + ["b"] * 10)
    report = evaluate(logits, labels, groups=groups, n_bins=10)
    assert report.ece == pytest.approx(0.0, abs=1e-12)
    assert report.groups is not None
    by_name = {g.group: g for g in report.groups.groups}
    assert by_name["a"].ece == pytest.approx(0.3) and by_name["b"].ece == pytest.approx(0.3)
    assert by_name["a"].accuracy == pytest.approx(0.9) and by_name["b"].accuracy == pytest.approx(0.3)
    assert report.groups.weighted_ece == pytest.approx(0.3)
    # Equal-mass bins split tied confidences; one bin per group keeps this exact.
    equal_mass = group_calibration(logits, labels, groups, n_bins=1, scheme="equal-mass")
    assert equal_mass.weighted_ece == pytest.approx(0.3)


def test_evaluate_carries_its_binning_and_agrees_with_single_metrics() -> None:
    rng = np.random.default_rng(2)
    logits = rng.normal(scale=3, size=(400, 6))
    labels = sample_labels(rng, logits / 1.5)
    for scheme in ("equal-width", "equal-mass"):
        report = evaluate(logits, labels, temperature=1.3, n_bins=12, scheme=scheme)
        assert (report.n_bins, report.scheme, report.table.n_bins, report.table.scheme) == (12, scheme, 12, scheme)
        assert report.ece == pytest.approx(
            expected_calibration_error(logits, labels, temperature=1.3, n_bins=12, scheme=scheme)
        )
        assert report.nll == pytest.approx(negative_log_likelihood(logits, labels, temperature=1.3), rel=1e-12)
        assert report.brier == pytest.approx(brier_score(logits, labels, temperature=1.3), rel=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_bins": 0}, ValueError, "n_bins must be >= 1"),
        ({"n_bins": 2.5}, TypeError, "n_bins must be an integer"),
        ({"scheme": "quantile"}, ValueError, "scheme must be one of"),
        ({"temperature": 0.0}, ValueError, "temperature must be finite and > 0"),
        ({"temperature": float("nan")}, ValueError, "temperature must be finite and > 0"),
    ],
)
def test_bad_parameters_are_refused(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        expected_calibration_error(np.log(PROBS), LABELS, **kwargs)  # type: ignore[arg-type]


def test_groups_length_must_match() -> None:
    with pytest.raises(ValueError, match="groups must be 1-D with 3 entries"):
        group_calibration(np.log(PROBS), LABELS, ["a", "b"])


@given(scored_arrays(), positive_temperature)
def test_argmax_never_changes_with_temperature(data: tuple[np.ndarray, np.ndarray], temperature: float) -> None:
    logits, _ = data
    np.testing.assert_array_equal(softmax(logits, temperature).argmax(axis=1), logits.argmax(axis=1))


@given(scored_arrays(), st.data(), positive_temperature)
def test_metrics_ignore_a_constant_added_to_a_row(
    data: tuple[np.ndarray, np.ndarray], draw: st.DataObject, temperature: float
) -> None:
    logits, labels = data
    shifts = np.array([draw.draw(row_shift) for _ in range(logits.shape[0])])
    moved = logits + shifts[:, None]
    a, b = evaluate(logits, labels, temperature=temperature), evaluate(moved, labels, temperature=temperature)
    assert a.accuracy == b.accuracy
    assert b.nll == pytest.approx(a.nll, rel=1e-9, abs=1e-9)
    assert b.ece == pytest.approx(a.ece, abs=1e-9)
    assert b.brier == pytest.approx(a.brier, abs=1e-9)


@given(scored_arrays(min_rows=2), st.integers(0, 2**32 - 1))
def test_metrics_ignore_row_order(data: tuple[np.ndarray, np.ndarray], seed: int) -> None:
    logits, labels = data
    order = np.random.default_rng(seed).permutation(logits.shape[0])
    a, b = evaluate(logits, labels), evaluate(logits[order], labels[order])
    assert (a.accuracy, a.table.count.tolist()) == (b.accuracy, b.table.count.tolist())
    assert b.ece == pytest.approx(a.ece, abs=1e-12) and b.nll == pytest.approx(a.nll, rel=1e-12)
