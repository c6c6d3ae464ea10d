"""The gate: auto-process when calibrated confidence >= threshold, else review.

Coverage is the share auto-processed; accepted accuracy is the accuracy among the
auto-processed. An empty accepted set has *undefined* accuracy (NaN), never 100%. A threshold
is chosen on calibrated confidences by an explicit policy -- here: the lowest threshold
(largest coverage) whose accepted accuracy's Wilson lower bound meets a target -- and must be
re-swept after every refit of the temperature, since a threshold read on the old scale
measures something else on the new one.

References
----------
Wilson. "Probable inference, the law of succession, and statistical inference".
Journal of the American Statistical Association 22(158):209-212, 1927.
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtri

from ._serialise import JsonResult, json_safe
from ._validation import check_confidence_level


__all__ = ["GateSweep", "GateChoice", "sweep_thresholds", "choose_threshold"]


_SWEEP_COLUMNS = ("coverage", "accepted_count", "accepted_accuracy", "accuracy_lower_bound")


@dataclass(frozen=True, slots=True)
class GateSweep(JsonResult):
    """One row per distinct threshold t (ascending): auto-process iff confidence >= t.

    ``accepted_accuracy`` and ``accuracy_lower_bound`` are NaN where nothing is accepted
    (undefined, never 1.0). ``accuracy_lower_bound`` is the Wilson score lower bound at
    ``confidence_level``.
    """

    thresholds: NDArray[np.float64]
    coverage: NDArray[np.float64]
    accepted_count: NDArray[np.int64]
    accepted_accuracy: NDArray[np.float64]
    accuracy_lower_bound: NDArray[np.float64]
    n: int
    confidence_level: float

    def rows(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """The rows at ``indices`` as JSON-safe dicts: threshold, coverage, accepted_count,
        accepted_accuracy, accuracy_lower_bound (NaN as None)."""
        columns = {"threshold": self.thresholds, **{name: getattr(self, name) for name in _SWEEP_COLUMNS}}
        return [{name: json_safe(column[i]) for name, column in columns.items()} for i in indices]


@dataclass(frozen=True, slots=True)
class GateChoice(JsonResult):
    """The chosen threshold, or ``threshold is None`` with ``met == False`` and a reason."""

    threshold: float | None
    met: bool
    target_accuracy: float
    coverage: float
    accepted_count: int
    accepted_accuracy: float
    accuracy_lower_bound: float
    confidence_level: float
    reason: str


# --------------------------------------------------------------------------- validation


def _check_confidence(confidence: ArrayLike) -> NDArray[np.float64]:
    """Return ``confidence`` as a non-empty 1-D float64 array in [0, 1], or raise."""
    array = np.asarray(confidence)
    if array.dtype.kind not in "iuf":
        raise TypeError(f"confidence must hold numbers in [0, 1]; got dtype {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"confidence must be 1-D of shape (n_samples,); got shape {array.shape}")
    if array.shape[0] == 0:
        raise ValueError("confidence is empty (0 rows); at least one example is required")
    values = array.astype(np.float64)
    inside = np.isfinite(values) & (values >= 0.0) & (values <= 1.0)
    if not inside.all():
        row = int(np.argmin(inside))
        raise ValueError(
            f"confidence row {row} is {values[row]}; every confidence must be a finite probability in [0, 1] "
            "(pass the calibrated top-label probability, not a logit)"
        )
    return values


def _check_correct(correct: ArrayLike, n_samples: int) -> NDArray[np.bool_]:
    """Return ``correct`` as a boolean array of length ``n_samples``, or raise."""
    array = np.asarray(correct)
    if array.ndim != 1:
        raise ValueError(f"correct must be 1-D of shape (n_samples,); got shape {array.shape}")
    if array.shape[0] != n_samples:
        raise ValueError(
            f"correct has {array.shape[0]} entries but confidence has {n_samples}; they must match (one per row)"
        )
    if array.dtype.kind == "b":
        return array
    if array.dtype.kind not in "iuf":
        raise TypeError(f"correct must be boolean (or 0/1); got dtype {array.dtype}")
    binary = (array == 0) | (array == 1)
    if not binary.all():
        row = int(np.argmin(binary))
        raise ValueError(
            f"correct row {row} is {array[row].item()!r}; correct must be boolean or 0/1 "
            "(pass predictions == labels)"
        )
    return array.astype(np.bool_)


def _check_target_accuracy(target_accuracy: float) -> float:
    """Return ``target_accuracy`` as a float strictly inside (0, 1), or raise."""
    if isinstance(target_accuracy, (bool, np.bool_)) or not isinstance(
        target_accuracy, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"target_accuracy must be a number in (0, 1), e.g. 0.95; got {target_accuracy!r}")
    value = float(target_accuracy)
    if not 0.0 < value < 1.0:
        raise ValueError(f"target_accuracy must be strictly between 0 and 1 (e.g. 0.95); got {value}")
    return value


# --------------------------------------------------------------------------- numerics


def _wilson_lower_bound(
    successes: NDArray[np.int64], trials: NDArray[np.int64], confidence_level: float
) -> NDArray[np.float64]:
    """Lower end of the two-sided Wilson score interval; NaN where ``trials == 0``.

    The two-sided interval at level c has a lower end that is a one-sided bound at level
    1 - (1 - c) / 2 (e.g. 97.5% for c = 0.95).
    """
    # The normal quantile: what scipy.stats.norm.ppf computes, without loading scipy.stats (~0.4 s).
    z = float(ndtri(1.0 - (1.0 - confidence_level) / 2.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        n = trials.astype(np.float64)
        p = successes / n
        z2n = z * z / n
        centre = p + z2n / 2.0
        spread = z * np.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n))
        lower = (centre - spread) / (1.0 + z2n)
    # At p = 0 the exact bound is 0; rounding may leave -1e-17.
    return np.where(trials > 0, np.clip(lower, 0.0, 1.0), np.nan)


def _sweep(confidence: NDArray[np.float64], correct: NDArray[np.bool_], confidence_level: float) -> GateSweep:
    """The sweep on validated inputs: sort once, then cumulative sums."""
    n = confidence.shape[0]
    order = np.argsort(confidence, kind="stable")
    sorted_confidence = confidence[order]
    # Correct answers strictly before position i of the sorted array (int64: exact).
    correct_before = np.concatenate(([0], np.cumsum(correct[order], dtype=np.int64)))
    # First position of each distinct value: rows from there on have confidence >= that value.
    starts = np.flatnonzero(np.concatenate(([True], sorted_confidence[1:] != sorted_confidence[:-1])))
    accepted_count = (n - starts).astype(np.int64)
    accepted_correct = correct_before[-1] - correct_before[starts]
    # Every distinct threshold accepts at least its own rows, so no division by zero here.
    accepted_accuracy = accepted_correct / accepted_count
    return GateSweep(
        thresholds=sorted_confidence[starts],
        coverage=accepted_count / n,
        accepted_count=accepted_count,
        accepted_accuracy=accepted_accuracy.astype(np.float64),
        accuracy_lower_bound=_wilson_lower_bound(accepted_correct, accepted_count, confidence_level),
        n=n,
        confidence_level=confidence_level,
    )


def _validate(confidence: ArrayLike, correct: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    confidence_ = _check_confidence(confidence)
    return confidence_, _check_correct(correct, confidence_.shape[0])


# --------------------------------------------------------------------------- public API


def sweep_thresholds(confidence: ArrayLike, correct: ArrayLike, *, confidence_level: float = 0.95) -> GateSweep:
    """Coverage and accepted accuracy at every distinct confidence value used as threshold.

    At threshold t a row is auto-processed iff ``confidence >= t``; the thresholds are the
    distinct confidence values, ascending, so coverage is non-increasing along the sweep and
    every threshold accepts at least one row. The lower bound is the lower end of the
    two-sided Wilson score interval at ``confidence_level`` (so a one-sided bound at level
    1 - (1 - confidence_level) / 2, e.g. 97.5% for 0.95). Sweep *calibrated* confidences,
    and sweep again after every refit of the temperature: a threshold from the old scale
    measures something else on the new one.

    Parameters
    ----------
    confidence : array of shape (n_samples,)
        Calibrated top-label confidence of each row, finite, in [0, 1].
    correct : array of shape (n_samples,)
        Whether the prediction of each row is correct (boolean or 0/1).
    confidence_level : float, default=0.95
        Level of the two-sided Wilson interval whose lower end is reported, in (0, 1).

    Returns
    -------
    GateSweep
        Arrays of shape (n_thresholds,): ``thresholds`` (ascending), ``coverage``,
        ``accepted_count``, ``accepted_accuracy``, ``accuracy_lower_bound``.

    Raises
    ------
    TypeError
        If ``confidence`` or ``correct`` is not numeric/boolean, or ``confidence_level`` is
        not a number.
    ValueError
        If ``confidence`` is empty, not 1-D or outside [0, 1] (the row is named), ``correct``
        has another length or a value other than 0/1, or ``confidence_level`` is outside (0, 1).

    References
    ----------
    Wilson, JASA 22(158):209-212, 1927.

    Examples
    --------
    >>> sweep = sweep_thresholds([0.6, 0.9, 0.9, 0.7], [False, True, True, True])
    >>> sweep.thresholds.tolist()
    [0.6, 0.7, 0.9]
    >>> sweep.coverage.tolist(), sweep.accepted_count.tolist()
    ([1.0, 0.75, 0.5], [4, 3, 2])
    >>> sweep.accepted_accuracy.tolist()
    [0.75, 1.0, 1.0]
    >>> sweep.accuracy_lower_bound.round(4).tolist()
    [0.3006, 0.4385, 0.3424]
    """
    confidence_, correct_ = _validate(confidence, correct)
    level = check_confidence_level(confidence_level)
    return _sweep(confidence_, correct_, level)


def choose_threshold(
    confidence: ArrayLike, correct: ArrayLike, *, target_accuracy: float, confidence_level: float = 0.95
) -> GateChoice:
    """The lowest threshold (largest coverage) whose accepted accuracy is confidently >= a target.

    Policy: among the thresholds of :func:`sweep_thresholds`, take the lowest one whose
    Wilson lower bound (two-sided interval at ``confidence_level``) is >= ``target_accuracy``.
    When none qualifies, ``threshold`` is None, ``met`` is False, nothing is auto-processed
    (coverage 0, accepted accuracy and bound NaN: undefined, never 100%), and ``reason``
    names the best lower bound reached and where.

    Parameters
    ----------
    confidence : array of shape (n_samples,)
        Calibrated top-label confidence of each row, finite, in [0, 1].
    correct : array of shape (n_samples,)
        Whether the prediction of each row is correct (boolean or 0/1).
    target_accuracy : float
        Required accuracy among auto-processed rows, in (0, 1).
    confidence_level : float, default=0.95
        Level of the two-sided Wilson interval whose lower end must meet the target.

    Returns
    -------
    GateChoice
        The threshold and its coverage, accepted count, accepted accuracy and lower bound,
        or ``threshold=None`` with ``met=False``; ``reason`` says which in a sentence.

    Raises
    ------
    TypeError
        As :func:`sweep_thresholds`, or if ``target_accuracy`` is not a number.
    ValueError
        As :func:`sweep_thresholds`, or if ``target_accuracy`` is outside (0, 1).

    References
    ----------
    Wilson, JASA 22(158):209-212, 1927.

    Examples
    --------
    >>> confidence = np.linspace(0.5, 1.0, 1000)
    >>> correct = np.random.default_rng(0).random(1000) < confidence  # perfectly calibrated
    >>> choice = choose_threshold(confidence, correct, target_accuracy=0.9)
    >>> choice.met, round(choice.threshold, 3), round(choice.coverage, 3)
    (True, 0.831, 0.339)
    >>> bool(choice.accuracy_lower_bound >= 0.9)
    True
    >>> nothing = choose_threshold(confidence, correct, target_accuracy=0.999)
    >>> nothing.threshold is None, nothing.met, nothing.accepted_count, nothing.accepted_accuracy
    (True, False, 0, nan)
    """
    confidence_, correct_ = _validate(confidence, correct)
    target = _check_target_accuracy(target_accuracy)
    level = check_confidence_level(confidence_level)
    sweep = _sweep(confidence_, correct_, level)
    percent = f"{level:.0%}"

    meets = sweep.accuracy_lower_bound >= target
    if meets.any():
        i = int(np.argmax(meets))  # first True: the lowest threshold, the largest coverage
        return GateChoice(
            threshold=float(sweep.thresholds[i]),
            met=True,
            target_accuracy=target,
            coverage=float(sweep.coverage[i]),
            accepted_count=int(sweep.accepted_count[i]),
            accepted_accuracy=float(sweep.accepted_accuracy[i]),
            accuracy_lower_bound=float(sweep.accuracy_lower_bound[i]),
            confidence_level=level,
            reason=(
                f"threshold {sweep.thresholds[i]:.6g} is the lowest whose accepted accuracy "
                f"{sweep.accepted_accuracy[i]:.4f} has a Wilson lower bound {sweep.accuracy_lower_bound[i]:.4f} "
                f"({percent} two-sided) >= target {target:g}; it auto-processes {sweep.accepted_count[i]} "
                f"of {sweep.n} rows (coverage {sweep.coverage[i]:.1%})"
            ),
        )

    best = int(np.argmax(sweep.accuracy_lower_bound))  # first maximum: the larger coverage
    return GateChoice(
        threshold=None,
        met=False,
        target_accuracy=target,
        coverage=0.0,
        accepted_count=0,
        accepted_accuracy=float("nan"),
        accuracy_lower_bound=float("nan"),
        confidence_level=level,
        reason=(
            f"no threshold reaches the target accepted accuracy {target:g} at {percent} confidence: "
            f"the best Wilson lower bound was {sweep.accuracy_lower_bound[best]:.4f} at t={sweep.thresholds[best]:.6g} "
            f"(accepted accuracy {sweep.accepted_accuracy[best]:.4f} on {sweep.accepted_count[best]} of {sweep.n} rows); "
            "send every row to review, lower target_accuracy, or sweep on more labelled data"
        ),
    )
