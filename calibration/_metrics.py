"""Calibration metrics on arrays: ECE with its binning, reliability tables, per-group breakdowns.

Every ECE carries its binning: ``n_bins`` and ``scheme``. Equal-width bin m (0-based) is
(m/M, (m+1)/M] with confidence 0 in the first bin; equal-mass bins hold N/M examples each
(sorted by confidence; ties may straddle two bins). Empty bins contribute nothing.
NLL is the mean over examples in nats, from an exact log-softmax, with no clipping.

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
Kull et al. "Beyond temperature scaling: obtaining well-calibrated multiclass probabilities
with Dirichlet calibration". NeurIPS 2019 (classwise ECE).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._scored import ScoredSet, checked_data
from ._serialise import JsonResult, json_safe
from ._softmax import label_log_probability, softmax, top_label
from ._stats import ReliabilityTable, equal_width_bin_index, summarise_checked
from ._validation import check_count, check_groups, check_logits, check_n_bins, check_scheme, check_temperature

__all__ = [
    "CalibrationReport",
    "GroupBreakdown",
    "GroupCalibration",
    "accuracy",
    "brier_score",
    "classwise_calibration_error",
    "evaluate",
    "expected_calibration_error",
    "group_calibration",
    "maximum_calibration_error",
    "mean_confidence",
    "negative_log_likelihood",
    "reliability_table",
]


@dataclass(frozen=True, slots=True)
class GroupCalibration(JsonResult):
    """Calibration of one group (an overall average can hide groups off in opposite directions)."""

    group: str
    n: int
    ece: float
    accuracy: float
    mean_confidence: float


@dataclass(frozen=True, slots=True)
class GroupBreakdown(JsonResult):
    """Per-group calibration and the count-weighted mean of group ECEs.

    The overall ECE can be 0 while every group is off; ``weighted_ece`` cannot.
    """

    groups: tuple[GroupCalibration, ...]
    weighted_ece: float
    n_bins: int
    scheme: str


@dataclass(frozen=True, slots=True)
class CalibrationReport(JsonResult):
    """Everything :func:`evaluate` measures at one temperature, with its binning."""

    n: int
    n_classes: int
    temperature: float
    accuracy: float
    nll: float
    ece: float
    mce: float
    brier: float
    mean_confidence: float
    n_bins: int
    scheme: str
    table: ReliabilityTable
    groups: GroupBreakdown | None

    def summary(self) -> dict[str, Any]:
        """The numbers at this temperature, without the table (JSON types, NaN as None)."""
        return {name: json_safe(getattr(self, name)) for name in _SUMMARY}

    def to_dict(self) -> dict[str, Any]:
        """The summary, the binning with ``bins`` (one row per bin) and, with groups, ``groups``
        (one row per group) and ``group_weighted_ece``."""
        result = {"n": self.n, "n_classes": self.n_classes} | self.summary() | self.table.to_dict()
        if self.groups is not None:
            result |= {"groups": [group.to_dict() for group in self.groups.groups],
                       "group_weighted_ece": json_safe(self.groups.weighted_ece)}
        return result


_SUMMARY = ("temperature", "nll", "ece", "mce", "brier", "accuracy", "mean_confidence")


# Every function below takes ``logits`` and ``labels``, or a validated ScoredSet in their place
# (then ``labels`` is None and nothing is checked again): see calibration._scored.checked_data.
# Each checks its input once here and calls the trusted ``_*_checked`` helpers, never
# another public function.


def _checked(
    logits: ArrayLike | ScoredSet, labels: ArrayLike | None, temperature: float
) -> tuple[NDArray[np.floating[Any]], NDArray[np.intp], float]:
    checked, checked_labels = checked_data(logits, labels)
    return checked, checked_labels, check_temperature(temperature)


def negative_log_likelihood(
    logits: ArrayLike | ScoredSet, labels: ArrayLike | None = None, *, temperature: float = 1.0
) -> float:
    """Mean NLL of the true labels under softmax(logits / temperature), in nats.

    Computed from a numerically stable log-softmax, without clipping probabilities (unlike
    ``sklearn.metrics.log_loss``), so a confident mistake costs what it really costs.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        A validated :class:`ScoredSet` stands for logits and labels (pass no ``labels``).
    labels : array of shape (n_samples,)
    temperature : float, default=1.0

    Examples
    --------
    >>> bool(abs(negative_log_likelihood(np.log([[0.25, 0.75]]), [1]) + np.log(0.75)) < 1e-12)
    True
    """
    checked, checked_labels, temperature = _checked(logits, labels, temperature)
    return float(-label_log_probability(checked, checked_labels, temperature).mean())


def accuracy(logits: ArrayLike | ScoredSet, labels: ArrayLike | None = None) -> float:
    """Share of rows whose arg-max (first on ties) is the label; no temperature changes it.

    >>> accuracy([[2.0, 1.0], [0.0, 3.0]], [0, 0])
    0.5
    """
    checked, checked_labels, _ = _checked(logits, labels, 1.0)
    return float(np.mean(checked.argmax(axis=1) == checked_labels))


def mean_confidence(logits: ArrayLike, *, temperature: float = 1.0) -> float:
    """Mean top-label confidence of softmax(logits / temperature).

    >>> round(mean_confidence(np.log([[0.2, 0.8], [0.6, 0.4]])), 6)
    0.7
    """
    checked = check_logits(logits)
    return float(top_label(checked, check_temperature(temperature))[1].mean())


def brier_score(logits: ArrayLike | ScoredSet, labels: ArrayLike | None = None, *, temperature: float = 1.0) -> float:
    """Mean multi-class Brier score Σ_k (p_k − [y = k])², in [0, 2].

    >>> round(brier_score(np.log([[0.2, 0.8]]), [1]), 6)
    0.08
    """
    checked, checked_labels, temperature = _checked(logits, labels, temperature)
    return summarise_checked(checked, checked_labels, temperature, 15).brier


def reliability_table(
    logits: ArrayLike | ScoredSet,
    labels: ArrayLike | None = None,
    *,
    temperature: float = 1.0,
    n_bins: int = 15,
    scheme: str = "equal-width",
    min_count: int = 10,
) -> ReliabilityTable:
    """Per-bin count, mean confidence, accuracy and gap of the top-label confidence.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        A validated :class:`ScoredSet` stands for logits and labels (pass no ``labels``)
        and is not checked again.
    labels : array of shape (n_samples,)
    temperature : float, default=1.0
    n_bins : int, default=15
    scheme : {"equal-width", "equal-mass"}, default="equal-width"
        Equal-width bin m is (m/M, (m+1)/M]; equal-mass bins hold N/M examples each and
        their ``lower``/``upper`` are the smallest and largest confidence inside.
    min_count : int, default=10
        Bins with fewer examples are flagged ``sparse``: noise, not signal.

    Examples
    --------
    >>> table = reliability_table(np.log([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]]), [1, 0, 0], n_bins=3)
    >>> table.count.tolist(), round(table.ece, 6)
    ([0, 1, 2], 0.333333)
    """
    checked, checked_labels, temperature = _checked(logits, labels, temperature)
    n_bins, scheme = check_n_bins(n_bins), check_scheme(scheme)
    min_count = check_count(min_count, name="min_count", minimum=0)
    return _reliability_table_checked(checked, checked_labels, temperature, n_bins, scheme, min_count)


def _reliability_table_checked(
    logits: NDArray[np.floating[Any]],
    labels: NDArray[np.intp],
    temperature: float,
    n_bins: int,
    scheme: str,
    min_count: int,
) -> ReliabilityTable:
    if scheme == "equal-width":
        return summarise_checked(logits, labels, temperature, n_bins).reliability_table(min_count=min_count)
    predictions, confidence = top_label(logits, temperature)
    return _equal_mass_table(confidence, predictions == labels, n_bins, min_count)


def _equal_mass_table(
    confidence: NDArray[np.float64], correct: NDArray[np.bool_], n_bins: int, min_count: int
) -> ReliabilityTable:
    order = np.argsort(confidence, kind="stable")
    sorted_confidence = confidence[order]
    # Bin of the i-th smallest confidence: floor(i * M / N), so sizes differ by at most one.
    bins = (np.arange(confidence.shape[0]) * n_bins) // confidence.shape[0]
    count = np.bincount(bins, minlength=n_bins)
    confidence_sum = np.bincount(bins, weights=sorted_confidence, minlength=n_bins).astype(np.float64)
    correct_sum = np.bincount(bins, weights=correct[order], minlength=n_bins).astype(np.float64)
    filled = count > 0
    lower = np.full(n_bins, np.nan)
    upper = np.full(n_bins, np.nan)
    firsts = np.cumsum(count) - count
    lower[filled] = sorted_confidence[firsts[filled]]
    upper[filled] = sorted_confidence[firsts[filled] + count[filled] - 1]
    return ReliabilityTable.from_bin_sums(
        lower, upper, count, confidence_sum, correct_sum, scheme="equal-mass", min_count=min_count
    )


def expected_calibration_error(
    logits: ArrayLike | ScoredSet,
    labels: ArrayLike | None = None,
    *, temperature: float = 1.0, n_bins: int = 15, scheme: str = "equal-width"
) -> float:
    """ECE = Σ_m |B_m|/N · |acc(B_m) − conf(B_m)| on the top-label confidence.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        A validated :class:`ScoredSet` stands for logits and labels (pass no ``labels``).
    labels : array of shape (n_samples,)
    temperature : float, default=1.0
    n_bins : int, default=15
    scheme : {"equal-width", "equal-mass"}, default="equal-width"

    Examples
    --------
    >>> probs = np.array([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]])
    >>> round(expected_calibration_error(np.log(probs), [1, 0, 0], n_bins=3), 6)
    0.333333
    """
    return reliability_table(logits, labels, temperature=temperature, n_bins=n_bins, scheme=scheme).ece


def maximum_calibration_error(
    logits: ArrayLike | ScoredSet,
    labels: ArrayLike | None = None,
    *, temperature: float = 1.0, n_bins: int = 15, scheme: str = "equal-width"
) -> float:
    """MCE: the largest |acc(B_m) − conf(B_m)| over non-empty bins.

    >>> probs = np.array([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]])
    >>> round(maximum_calibration_error(np.log(probs), [1, 0, 0], n_bins=3), 6)
    0.6
    """
    return reliability_table(logits, labels, temperature=temperature, n_bins=n_bins, scheme=scheme).mce


def classwise_calibration_error(
    logits: ArrayLike | ScoredSet, labels: ArrayLike | None = None, *, temperature: float = 1.0, n_bins: int = 15
) -> float:
    """Classwise ECE: the mean over classes k of the equal-width ECE of p_k against [y = k].

    Every class's probability is binned (not only the top label), so it also sees
    miscalibration of the runner-up classes.

    Examples
    --------
    >>> probs = np.array([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]])
    >>> round(classwise_calibration_error(np.log(probs), [1, 0, 0], n_bins=3), 6)
    0.333333
    """
    checked, checked_labels, temperature = _checked(logits, labels, temperature)
    n_bins = check_n_bins(n_bins)
    n_samples, n_classes = checked.shape
    probabilities = softmax(checked, temperature)
    hits = np.zeros_like(probabilities)
    hits[np.arange(n_samples), checked_labels] = 1.0
    # One bincount over (class, bin) cells.
    cells = (np.arange(n_classes) * n_bins)[None, :] + equal_width_bin_index(probabilities, n_bins)
    size = n_classes * n_bins
    gap = np.bincount(cells.ravel(), weights=(hits - probabilities).ravel(), minlength=size)
    return float(np.abs(gap).sum() / (n_samples * n_classes))


def group_calibration(
    logits: ArrayLike | ScoredSet,
    labels: ArrayLike | None,
    groups: ArrayLike,
    *,
    temperature: float = 1.0,
    n_bins: int = 15,
    scheme: str = "equal-width",
) -> GroupBreakdown:
    """Per-group ECE, accuracy, mean confidence and count, and the count-weighted mean ECE.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        A validated :class:`ScoredSet` stands for logits and labels (then ``labels`` is
        None) and is not checked again.
    labels : array of shape (n_samples,) or None
    groups : array of shape (n_samples,)
        Group key per row (source, language, ...); compared as strings.

    Examples
    --------
    >>> logits = np.log([[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.6, 0.4]])
    >>> breakdown = group_calibration(logits, [0, 1, 0, 0], ["a", "a", "b", "b"], n_bins=10)
    >>> [(g.group, g.n, round(g.ece, 6)) for g in breakdown.groups]
    [('a', 2, 0.4), ('b', 2, 0.4)]
    >>> round(breakdown.weighted_ece, 6)
    0.4
    """
    checked, checked_labels, temperature = _checked(logits, labels, temperature)
    n_bins, scheme = check_n_bins(n_bins), check_scheme(scheme)
    keys = check_groups(groups, checked.shape[0])
    return _group_calibration_checked(checked, checked_labels, keys, temperature, n_bins, scheme)


def _group_calibration_checked(
    logits: NDArray[np.floating[Any]],
    labels: NDArray[np.intp],
    keys: NDArray[np.object_],
    temperature: float,
    n_bins: int,
    scheme: str,
) -> GroupBreakdown:
    predictions, confidence = top_label(logits, temperature)
    correct = predictions == labels
    names, inverse = np.unique(keys, return_inverse=True)
    n_groups = names.shape[0]
    counts = np.bincount(inverse, minlength=n_groups)
    if scheme == "equal-width":
        cells = inverse * n_bins + equal_width_bin_index(confidence, n_bins)
        gap = np.bincount(cells, weights=correct - confidence, minlength=n_groups * n_bins)
        eces = np.abs(gap.reshape(n_groups, n_bins)).sum(axis=1) / counts
    else:
        # Equal-mass bins are defined within each group; groups are few.
        eces = np.array(
            [_equal_mass_table(confidence[inverse == g], correct[inverse == g], n_bins, 1).ece for g in range(n_groups)]
        )
    accuracies = np.bincount(inverse, weights=correct, minlength=n_groups) / counts
    confidences = np.bincount(inverse, weights=confidence, minlength=n_groups) / counts
    rows = tuple(
        GroupCalibration(
            group=str(names[g]),
            n=int(counts[g]),
            ece=float(eces[g]),
            accuracy=float(accuracies[g]),
            mean_confidence=float(confidences[g]),
        )
        for g in range(n_groups)
    )
    weighted = float(np.sum(counts * eces) / counts.sum())
    return GroupBreakdown(groups=rows, weighted_ece=weighted, n_bins=n_bins, scheme=scheme)


def evaluate(
    logits: ArrayLike | ScoredSet,
    labels: ArrayLike | None = None,
    *,
    temperature: float = 1.0,
    n_bins: int = 15,
    scheme: str = "equal-width",
    min_count: int = 10,
    groups: ArrayLike | None = None,
) -> CalibrationReport:
    """Every calibration number at one temperature: accuracy, NLL, ECE, MCE, Brier, table.

    ``groups`` adds the per-group breakdown (an overall ECE can hide groups off in opposite
    directions). A validated :class:`ScoredSet` may stand for ``logits`` and ``labels``
    (pass no ``labels``): it is not checked again, and one calibration pass gives every
    number (plus one top-label pass for equal-mass bins, one for groups).

    Examples
    --------
    >>> report = evaluate(np.log([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]]), [1, 0, 0], n_bins=3)
    >>> round(report.ece, 6), round(report.accuracy, 6), report.scheme
    (0.333333, 0.666667, 'equal-width')
    """
    checked, checked_labels, temperature = _checked(logits, labels, temperature)
    n_bins, scheme = check_n_bins(n_bins), check_scheme(scheme)
    min_count = check_count(min_count, name="min_count", minimum=0)
    keys = None if groups is None else check_groups(groups, checked.shape[0])
    stats = summarise_checked(checked, checked_labels, temperature, n_bins)
    table = (
        stats.reliability_table(min_count=min_count)
        if scheme == "equal-width"
        else _reliability_table_checked(checked, checked_labels, temperature, n_bins, scheme, min_count)
    )
    breakdown = (
        None
        if keys is None
        else _group_calibration_checked(checked, checked_labels, keys, temperature, n_bins, scheme)
    )
    return CalibrationReport(
        n=stats.n,
        n_classes=stats.n_classes,
        temperature=temperature,
        accuracy=stats.accuracy,
        nll=stats.nll,
        ece=table.ece,
        mce=table.mce,
        brier=stats.brier,
        mean_confidence=stats.mean_confidence,
        n_bins=n_bins,
        scheme=scheme,
        table=table,
        groups=breakdown,
    )
