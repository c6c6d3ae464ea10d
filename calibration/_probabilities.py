"""Calibrated probabilities and top-label confidence at a temperature, validated.

q = softmax(z / T) with one shared T > 0: T > 1 flattens, T < 1 sharpens, and the arg-max
class never changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._softmax import softmax, top_label, top_label_and_softmax
from ._validation import check_logits, check_temperature

if TYPE_CHECKING:
    from ._scored import ScoredSet

__all__ = ["calibrated_probabilities", "top_label_confidence", "top_label_and_probabilities"]


def calibrated_probabilities(logits: ArrayLike, *, temperature: float = 1.0) -> NDArray[np.float64]:
    """softmax(logits / temperature) per row, in float64, from a stable (max-shifted) softmax.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes)
        Logits or log-probabilities (softmax is shift-invariant per row).
    temperature : float, default=1.0
        T > 1 flattens, T < 1 sharpens; the arg-max never changes.

    Returns
    -------
    probabilities : array of shape (n_samples, n_classes)

    Examples
    --------
    >>> calibrated_probabilities(np.log([[0.8, 0.2]]), temperature=np.log(4) / np.log(2)).round(6).tolist()
    [[0.666667, 0.333333]]
    """
    return softmax(check_logits(logits), check_temperature(temperature))


def top_label_confidence(
    logits: ArrayLike | ScoredSet, *, temperature: float = 1.0, check_finite: bool = True
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Predicted class (first arg-max) and its calibrated confidence, per row.

    This is the number a gate compares with its threshold: auto-process when the confidence
    is at least the threshold, else review.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        Logits or log-probabilities (softmax is shift-invariant per row); a validated
        :class:`ScoredSet`'s are read as they are, without any check.
    temperature : float, default=1.0
        T > 0; the arg-max never changes, the confidence does.
    check_finite : bool, default=True
        Scan the logits for non-finite values first (one read of the input). ``False`` skips
        that scan for logits already checked (a :class:`ScoredSet`'s, or those a caller
        refuses row by row itself); the shape and dtype are checked either way.

    Returns
    -------
    predictions : array of shape (n_samples,)
    confidence : array of shape (n_samples,)

    Examples
    --------
    >>> predictions, confidence = top_label_confidence(np.log([[0.1, 0.9], [0.6, 0.4]]), temperature=1.0)
    >>> predictions.tolist(), confidence.round(6).tolist()
    ([1, 0], [0.9, 0.6])
    """
    if not isinstance(logits, np.ndarray):  # perhaps a scored set; an array is not (and needs no pandas loaded)
        from ._scored import ScoredSet, validated_set

        scored = validated_set(logits)
        if scored is not None:
            return top_label(scored.logits, check_temperature(temperature))
        if isinstance(logits, ScoredSet):  # built field by field: checked like any arrays
            logits = logits.logits
    return top_label(check_logits(logits, check_finite=check_finite), check_temperature(temperature))


def top_label_and_probabilities(
    logits: ArrayLike, *, temperature: float = 1.0, check_finite: bool = True
) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    """:func:`top_label_confidence` and :func:`calibrated_probabilities` of the same rows from
    one ``exp`` pass (one check, one arg-max), for a reader that needs both: the same numbers,
    bit for bit, as the two calls.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes)
        Logits or log-probabilities.
    temperature : float, default=1.0
        T > 0.
    check_finite : bool, default=True
        As :func:`top_label_confidence`'s.

    Returns
    -------
    predictions : array of shape (n_samples,)
        The first arg-max of each row.
    confidence : array of shape (n_samples,)
        Its probability at ``temperature``.
    probabilities : array of shape (n_samples, n_classes)
        softmax(logits / temperature), float64.

    Examples
    --------
    >>> predictions, confidence, p = top_label_and_probabilities(np.log([[0.1, 0.9], [0.6, 0.4]]))
    >>> predictions.tolist(), confidence.round(6).tolist(), p.round(6).tolist()
    ([1, 0], [0.9, 0.6], [[0.1, 0.9], [0.6, 0.4]])
    """
    return top_label_and_softmax(check_logits(logits, check_finite=check_finite), check_temperature(temperature))
