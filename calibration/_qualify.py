"""Calibration data qualifies before it is used.

Three requirements, each failure a full sentence naming the class or ids and the counts:

(a) it looks like production traffic: class proportions within a total-variation distance of
    recent traffic's (a set that is half complaints when production is one tenth complaints
    moves T the wrong way);
(b) it is disjoint from the training set, checked on example ids;
(c) it is large enough in total and covers every class.

A set the model gets entirely right is not refused but warned about: a zero-error set drives
T to the lower bound and makes future mistakes extremely confident.

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._scored import ScoredSet, checked_data, validated_set
from ._serialise import JsonResult
from ._validation import check_labels

__all__ = ["QualificationReport", "qualify_calibration_set"]

# How many overlapping ids, and how many classes with the largest proportion gaps, a message names.
_EXAMPLE_IDS = 5
_EXAMPLE_CLASSES = 3


@dataclass(frozen=True, slots=True)
class QualificationReport(JsonResult):
    """Outcome of the qualification checks. ``passed`` is False iff ``failures`` is non-empty.

    Each failure/warning is a full sentence naming the class and the counts, e.g.
    "class 3 has 4 calibration examples; at least 30 are required (set min_per_class to change)".
    """

    passed: bool
    failures: tuple[str, ...]
    warnings: tuple[str, ...]
    n: int
    n_classes: int
    class_counts: NDArray[np.int64]
    n_errors: int
    id_overlap: int
    tv_distance: float | None
    min_total: int
    min_per_class: int
    max_tv_distance: float


# --------------------------------------------------------------------------- validation


def _check_minimum(value: int, *, name: str) -> int:
    """Return ``value`` as an int >= 0 (0 switches the check off), or raise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer >= 0; got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0 (0 switches the check off); got {value}")
    return int(value)


def _check_max_tv_distance(value: float) -> float:
    """Return ``value`` as a float in [0, 1] (1 switches the check off), or raise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"max_tv_distance must be a number in [0, 1]; got {value!r}")
    distance = float(value)
    if not 0.0 <= distance <= 1.0:
        raise ValueError(
            f"max_tv_distance must be in [0, 1] (a total-variation distance; 1 switches the check off); got {distance}"
        )
    return distance


def _check_ids(ids: ArrayLike, *, name: str, n_samples: int | None) -> NDArray[np.str_]:
    """Return ``ids`` as a 1-D array of strings (of length ``n_samples`` if given), or raise.

    Ids are compared as strings, so ``7`` and ``"7"`` name the same example.
    """
    array = np.asarray(ids)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one id per example); got shape {array.shape}")
    if n_samples is not None and array.shape[0] != n_samples:
        raise ValueError(f"{name} has {array.shape[0]} entries but logits have {n_samples} rows; they must match")
    return array.astype(str)


def _check_reference_labels(reference_labels: ArrayLike | ScoredSet, n_classes: int) -> NDArray[np.intp]:
    """Return ``reference_labels`` as a non-empty 1-D int array in [0, n_classes), or raise; a
    validated :class:`ScoredSet`'s labels (recent traffic already read) are taken as they are."""
    scored = validated_set(reference_labels)
    if scored is not None:
        if scored.n_classes != n_classes:
            raise ValueError(f"reference_labels: the reference set has {scored.n_classes} classes; expected {n_classes}")
        return scored.labels
    array = np.asarray(reference_labels)
    if array.ndim != 1:
        raise ValueError(f"reference_labels must be 1-D (one label per reference example); got shape {array.shape}")
    if array.shape[0] == 0:
        raise ValueError("reference_labels is empty; pass the labels of recent production traffic, or None")
    return check_labels(array, array.shape[0], n_classes, name="reference_labels")


# --------------------------------------------------------------------------- checks


def _size_failures(class_counts: NDArray[np.int64], n: int, min_total: int, min_per_class: int) -> list[str]:
    """Rule 4(c): enough examples in total and in every class."""
    failures = []
    if n < min_total:
        failures.append(
            f"the calibration set has {n} examples; at least {min_total} are required (set min_total to change)"
        )
    short = np.flatnonzero(class_counts < min_per_class)
    failures.extend(
        f"class {k} has {class_counts[k]} calibration example{'' if class_counts[k] == 1 else 's'}; "
        f"at least {min_per_class} are required (set min_per_class to change)"
        for k in short.tolist()
    )
    return failures


def _overlap_failure(ids: NDArray[np.str_], training_ids: NDArray[np.str_]) -> tuple[int, str | None]:
    """Rule 4(b): the number of calibration rows whose id is also a training id, and the failure."""
    shared = np.isin(ids, training_ids)
    overlap = int(np.count_nonzero(shared))
    if overlap == 0:
        return 0, None
    examples = ", ".join(repr(str(x)) for x in ids[shared][:_EXAMPLE_IDS].tolist())
    more = ", ..." if overlap > _EXAMPLE_IDS else ""
    return overlap, (
        f"{overlap} calibration example{'' if overlap == 1 else 's'} also appear{'s' if overlap == 1 else ''} "
        f"in the training set (ids {examples}{more}); the calibration set must be disjoint from the training "
        "set (the model has seen them, so they push T the wrong way): remove them or draw the calibration set "
        "from held-out data"
    )


def _proportion_failure(
    class_counts: NDArray[np.int64], reference_counts: NDArray[np.int64], max_tv_distance: float
) -> tuple[float, str | None]:
    """Rule 4(a): total-variation distance of the class proportions from the reference traffic."""
    proportions = class_counts / class_counts.sum()
    reference = reference_counts / reference_counts.sum()
    difference = np.abs(proportions - reference)
    distance = float(0.5 * difference.sum())
    if distance <= max_tv_distance:
        return distance, None
    largest = np.argsort(-difference, kind="stable")[:_EXAMPLE_CLASSES]
    detail = "; ".join(
        f"class {k}: {proportions[k]:.1%} here vs {reference[k]:.1%} in the reference" for k in largest.tolist()
    )
    return distance, (
        f"class proportions are {distance:.3f} in total-variation distance from the reference traffic; at most "
        f"{max_tv_distance:g} is allowed (set max_tv_distance to change). Largest differences: {detail}. "
        "Sample the calibration set so that it looks like production traffic (a different mix of labels "
        "moves T the wrong way)"
    )


# --------------------------------------------------------------------------- public API


def qualify_calibration_set(
    logits: ArrayLike | ScoredSet,
    labels: ArrayLike | None = None,
    *,
    ids: ArrayLike | None = None,
    training_ids: ArrayLike | None = None,
    reference_labels: ArrayLike | ScoredSet | None = None,
    min_total: int = 300,
    min_per_class: int = 30,
    max_tv_distance: float = 0.15,
) -> QualificationReport:
    """Check that a labelled set may be used to fit a temperature.

    Failures (the set must not be used): fewer than ``min_total`` examples; a class in
    [0, n_classes) with fewer than ``min_per_class`` examples (one failure per class, naming
    its count); calibration ids that also appear in ``training_ids`` (the count and up to five
    of them); class proportions more than ``max_tv_distance`` in total-variation distance
    (½ Σ_k |p_k - r_k|) from those of ``reference_labels`` (recent production traffic; the
    classes with the largest differences are named with both proportions).

    Warnings (the set may be used, but read them): the model makes no error on the set (a
    zero-error set drives T to the lower bound); ``training_ids`` or ``reference_labels``
    not given, so disjointness or representativeness was not checked.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        Frozen logits (or log-probabilities) of the candidate calibration set. A validated
        :class:`ScoredSet` stands for logits and labels (pass no ``labels``; its ids are
        still passed as ``ids``).
    labels : array of shape (n_samples,)
        True classes, integers in [0, n_classes).
    ids : array of shape (n_samples,), optional
        Example ids of the calibration set; compared with ``training_ids`` as strings.
    training_ids : array of shape (n_training,), optional
        Ids of the examples the model was trained on. Requires ``ids``.
    reference_labels : array of shape (n_reference,), or ScoredSet, optional
        Labels of recent production traffic, integers in [0, n_classes), at least one (a
        validated :class:`ScoredSet` of that traffic stands for its labels).
    min_total : int, default=300
        Minimum number of examples (>= 0; 0 switches the check off).
    min_per_class : int, default=30
        Minimum number of examples of every class (>= 0; 0 switches the check off).
    max_tv_distance : float, default=0.15
        Largest allowed total-variation distance of the class proportions from the
        reference, in [0, 1].

    Returns
    -------
    QualificationReport
        ``passed`` (no failures), the ``failures`` and ``warnings`` as sentences, the class
        counts, the number of errors at T = 1 (arg-max, which no positive T changes), the id
        overlap (0 when not checked) and the distance (None when no reference was given).

    Raises
    ------
    TypeError
        If a setting has the wrong type.
    ValueError
        If logits, labels, ids or reference labels are malformed (shape, range, length),
        ``training_ids`` is given without ``ids``, or a setting is out of range.

    References
    ----------
    Guo et al., "On Calibration of Modern Neural Networks", ICML 2017.

    Examples
    --------
    >>> logits = np.array([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0], [1.0, 0.0]] * 10)
    >>> labels = np.array([0, 1, 0, 1] * 10)
    >>> report = qualify_calibration_set(logits, labels, min_total=30, min_per_class=25)
    >>> report.passed, report.class_counts.tolist(), report.n_errors
    (False, [20, 20], 10)
    >>> print(report.failures[0])
    class 0 has 20 calibration examples; at least 25 are required (set min_per_class to change)
    >>> report = qualify_calibration_set(
    ...     logits, labels, ids=np.arange(40), training_ids=np.arange(100, 200),
    ...     reference_labels=[0, 1], min_total=30, min_per_class=10)
    >>> report.passed, report.id_overlap, report.tv_distance, report.warnings
    (True, 0, 0.0, ())
    """
    logits_, labels_ = checked_data(logits, labels)
    n, n_classes = logits_.shape
    min_total = _check_minimum(min_total, name="min_total")
    min_per_class = _check_minimum(min_per_class, name="min_per_class")
    max_tv_distance = _check_max_tv_distance(max_tv_distance)
    ids_ = None if ids is None else _check_ids(ids, name="ids", n_samples=n)
    if training_ids is not None and ids_ is None:
        raise ValueError(
            "training_ids was given but ids was not; pass the calibration set's ids too, "
            "so that disjointness from the training set can be checked"
        )
    training_ids_ = None if training_ids is None else _check_ids(training_ids, name="training_ids", n_samples=None)
    reference_ = None if reference_labels is None else _check_reference_labels(reference_labels, n_classes)

    failures: list[str] = []
    warnings: list[str] = []
    class_counts = np.bincount(labels_, minlength=n_classes).astype(np.int64)
    failures.extend(_size_failures(class_counts, n, min_total, min_per_class))

    id_overlap = 0
    if ids_ is not None and training_ids_ is not None:
        id_overlap, failure = _overlap_failure(ids_, training_ids_)
        if failure is not None:
            failures.append(failure)
    else:
        warnings.append(
            "training ids were not given, so disjointness from the training set was not checked; "
            "pass ids and training_ids"
        )

    tv_distance = None
    if reference_ is not None:
        reference_counts = np.bincount(reference_, minlength=n_classes).astype(np.int64)
        tv_distance, failure = _proportion_failure(class_counts, reference_counts, max_tv_distance)
        if failure is not None:
            failures.append(failure)
    else:
        warnings.append(
            "reference labels were not given, so closeness to production traffic (its class mix) was not checked; "
            "pass reference_labels from recent labelled traffic"
        )

    # A positive temperature never changes the arg-max, so the errors at T = 1 are the errors.
    n_errors = int(np.count_nonzero(logits_.argmax(axis=1) != labels_))
    if n_errors == 0:
        warnings.append(
            f"the model makes no error on the {n} calibration examples: a zero-error set drives T to the lower "
            "bound and makes future mistakes extremely confident; add examples from traffic the model "
            "gets wrong (a larger or more representative sample) before fitting"
        )

    return QualificationReport(
        passed=not failures,
        failures=tuple(failures),
        warnings=tuple(warnings),
        n=n,
        n_classes=n_classes,
        class_counts=class_counts,
        n_errors=n_errors,
        id_overlap=id_overlap,
        tv_distance=tv_distance,
        min_total=min_total,
        min_per_class=min_per_class,
        max_tv_distance=max_tv_distance,
    )
