"""Calibration data qualifies before it is used: like production, disjoint from training, large enough."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.typing import NDArray

from calibration._qualify import QualificationReport, qualify_calibration_set


def scored(counts: list[int], *, error_rate: float = 0.2, seed: int = 0) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Labels with the given per-class counts and logits that get about ``error_rate`` of them wrong."""
    rng = np.random.default_rng(seed)
    n_classes = len(counts)
    labels = np.repeat(np.arange(n_classes), counts)
    predicted = np.where(rng.random(labels.size) < error_rate, (labels + 1) % n_classes, labels)
    logits = rng.normal(size=(labels.size, n_classes))
    logits[np.arange(labels.size), predicted] += 5.0
    return logits, labels


def reference(proportions: list[float], n: int = 10_000) -> NDArray[np.intp]:
    return np.repeat(np.arange(len(proportions)), np.round(np.array(proportions) * n).astype(int))


def test_a_good_set_passes_without_warnings() -> None:
    logits, labels = scored([200, 150, 150])
    report = qualify_calibration_set(
        logits,
        labels,
        ids=[f"cal-{i}" for i in range(500)],
        training_ids=[f"train-{i}" for i in range(2000)],
        reference_labels=reference([0.4, 0.3, 0.3]),
    )
    assert isinstance(report, QualificationReport)
    assert report.passed and report.failures == () and report.warnings == ()
    assert (report.n, report.n_classes, report.id_overlap) == (500, 3, 0)
    assert report.class_counts.tolist() == [200, 150, 150] and report.class_counts.dtype == np.int64
    assert report.tv_distance == pytest.approx(0.0, abs=1e-12)
    assert 0 < report.n_errors < 500
    assert (report.min_total, report.min_per_class, report.max_tv_distance) == (300, 30, 0.15)


def test_too_small_in_total() -> None:
    logits, labels = scored([60, 60])
    report = qualify_calibration_set(logits, labels)
    assert not report.passed
    assert report.failures == (
        "the calibration set has 120 examples; at least 300 are required (set min_total to change)",
    )


def test_each_short_class_is_named_with_its_count() -> None:
    logits, labels = scored([300, 4, 100, 1, 0])
    report = qualify_calibration_set(logits, labels)
    assert not report.passed
    assert report.failures == (
        "class 1 has 4 calibration examples; at least 30 are required (set min_per_class to change)",
        "class 3 has 1 calibration example; at least 30 are required (set min_per_class to change)",
        # A class that never appears is still a class of the model (a column of the logits).
        "class 4 has 0 calibration examples; at least 30 are required (set min_per_class to change)",
    )
    assert report.class_counts.tolist() == [300, 4, 100, 1, 0]


def test_limits_are_settings() -> None:
    logits, labels = scored([20, 20])
    assert qualify_calibration_set(logits, labels, min_total=40, min_per_class=20).passed
    assert qualify_calibration_set(logits, labels, min_total=0, min_per_class=0).passed
    report = qualify_calibration_set(logits, labels, min_total=41, min_per_class=21)
    assert len(report.failures) == 3
    assert "at least 41 are required" in report.failures[0] and report.min_total == 41


def test_overlap_with_training_ids_is_refused() -> None:
    logits, labels = scored([200, 200])
    ids = np.array([f"doc-{i}" for i in range(400)])
    training = np.array([f"doc-{i}" for i in range(390, 1000)])  # 10 shared: doc-390 .. doc-399
    report = qualify_calibration_set(logits, labels, ids=ids, training_ids=training, reference_labels=labels)
    assert not report.passed and report.id_overlap == 10
    (failure,) = report.failures
    assert failure.startswith(
        "10 calibration examples also appear in the training set "
        "(ids 'doc-390', 'doc-391', 'doc-392', 'doc-393', 'doc-394', ...)"
    )
    assert "must be disjoint from the training set" in failure


def test_single_overlap_and_mixed_id_types() -> None:
    logits, labels = scored([200, 200])
    report = qualify_calibration_set(
        logits, labels, ids=np.arange(400), training_ids=["7", "abc"], reference_labels=labels
    )
    assert report.id_overlap == 1
    assert report.failures[0].startswith("1 calibration example also appears in the training set (ids '7');")


def test_proportions_far_from_production_are_refused() -> None:
    # Half complaints here, one tenth in production: TV = 0.4.
    logits, labels = scored([200, 200])
    report = qualify_calibration_set(logits, labels, reference_labels=reference([0.9, 0.1]))
    assert not report.passed
    assert report.tv_distance == pytest.approx(0.4)
    (failure,) = report.failures
    assert failure.startswith(
        "class proportions are 0.400 in total-variation distance from the reference traffic; "
        "at most 0.15 is allowed (set max_tv_distance to change)"
    )
    assert "class 0: 50.0% here vs 90.0% in the reference; class 1: 50.0% here vs 10.0% in the reference" in failure
    assert qualify_calibration_set(logits, labels, reference_labels=reference([0.9, 0.1]), max_tv_distance=0.4).passed


def test_proportion_failure_names_the_largest_differences_first() -> None:
    logits, labels = scored([100, 100, 100, 100, 100])
    report = qualify_calibration_set(logits, labels, reference_labels=reference([0.02, 0.18, 0.2, 0.2, 0.4]))
    assert report.tv_distance == pytest.approx(0.2)
    (failure,) = report.failures
    detail = failure.split("Largest differences: ")[1]
    assert detail.startswith("class 4: 20.0% here vs 40.0% in the reference; class 0: 20.0% here vs 2.0%")
    assert detail.count("class ") == 3


def test_zero_errors_is_a_warning_not_a_failure() -> None:
    logits, labels = scored([200, 200], error_rate=0.0)
    report = qualify_calibration_set(logits, labels, ids=np.arange(400), training_ids=[], reference_labels=labels)
    assert report.passed and report.n_errors == 0
    (warning,) = report.warnings
    assert warning.startswith("the model makes no error on the 400 calibration examples: a zero-error set drives T")
    assert "lower bound" in warning


def test_unchecked_requirements_are_warned_about() -> None:
    logits, labels = scored([200, 200])
    report = qualify_calibration_set(logits, labels, ids=np.arange(400))
    assert report.passed and report.tv_distance is None and report.id_overlap == 0
    assert len(report.warnings) == 2
    assert "disjointness from the training set was not checked" in report.warnings[0]
    assert "closeness to production traffic (its class mix) was not checked" in report.warnings[1]


def test_all_failures_are_reported_together() -> None:
    logits, labels = scored([100, 5])
    report = qualify_calibration_set(
        logits, labels, ids=np.arange(105), training_ids=[0, 1], reference_labels=reference([0.5, 0.5])
    )
    assert len(report.failures) == 4  # total, class 1, overlap, proportions
    assert not report.passed


@given(
    hnp.arrays(np.int64, st.integers(1, 80), elements=st.integers(0, 3)),
    st.integers(0, 40),
    st.integers(0, 20),
    st.randoms(use_true_random=False),
)
def test_report_is_permutation_invariant(labels: NDArray[np.int64], min_total: int, min_per_class: int, random: Any) -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(labels.size, 4))
    ids = np.array([f"id-{i}" for i in range(labels.size)])
    training = ids[: labels.size // 3]
    kwargs: dict[str, Any] = {
        "training_ids": training,
        "reference_labels": np.arange(4),
        "min_total": min_total,
        "min_per_class": min_per_class,
    }
    report = qualify_calibration_set(logits, labels, ids=ids, **kwargs)
    order = np.array(random.sample(range(labels.size), labels.size))
    moved = qualify_calibration_set(logits[order], labels[order], ids=ids[order], **kwargs)
    assert moved.class_counts.tolist() == report.class_counts.tolist()
    assert (moved.n_errors, moved.id_overlap, moved.passed) == (report.n_errors, report.id_overlap, report.passed)
    assert moved.tv_distance == pytest.approx(report.tv_distance)
    assert report.class_counts.sum() == labels.size
    assert report.passed == (report.failures == ())
    assert report.tv_distance is not None and 0.0 <= report.tv_distance <= 1.0


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"min_total": -1}, ValueError, "min_total must be >= 0 (0 switches the check off); got -1"),
        ({"min_per_class": 2.5}, TypeError, "min_per_class must be an integer >= 0; got 2.5"),
        ({"min_per_class": True}, TypeError, "min_per_class must be an integer >= 0; got True"),
        ({"max_tv_distance": 1.5}, ValueError, "max_tv_distance must be in [0, 1]"),
        ({"max_tv_distance": float("nan")}, ValueError, "max_tv_distance must be in [0, 1]"),
        ({"max_tv_distance": "0.1"}, TypeError, "max_tv_distance must be a number in [0, 1]; got '0.1'"),
        ({"training_ids": ["a"]}, ValueError, "training_ids was given but ids was not; pass the calibration set's ids"),
        ({"ids": ["a", "b"]}, ValueError, "ids has 2 entries but logits have 40 rows; they must match"),
        ({"ids": [["a"]] * 40}, ValueError, "ids must be 1-D (one id per example); got shape (40, 1)"),
        ({"ids": np.arange(40), "training_ids": [[1]]}, ValueError, "training_ids must be 1-D"),
        ({"reference_labels": [0, 1, 2]}, ValueError, "reference_labels row 2 is 2; labels must be integers in [0, 2)"),
        ({"reference_labels": []}, ValueError, "reference_labels is empty; pass the labels of recent production traffic"),
        ({"reference_labels": [[0, 1]]}, ValueError, "reference_labels must be 1-D"),
    ],
)
def test_validation(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    logits, labels = scored([20, 20])
    with pytest.raises(error) as info:
        qualify_calibration_set(logits, labels, **kwargs)
    assert message in str(info.value)


def test_bad_logits_and_labels_are_refused() -> None:
    logits, labels = scored([20, 20])
    with pytest.raises(ValueError, match="logits has 1 column"):
        qualify_calibration_set(logits[:, :1], labels)
    with pytest.raises(ValueError, match="labels has 39 entries but logits have 40 rows"):
        qualify_calibration_set(logits, labels[:-1])
