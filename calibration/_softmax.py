"""Numerically stable softmax pieces at a temperature.

Everything subtracts the row maximum before exponentiating, so logits of any size
(±1e4 and beyond) neither overflow nor lose the log-probabilities of unlikely classes.
Results are float64 whatever the input dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["log_softmax", "softmax", "top_label", "top_label_and_softmax", "label_log_probability"]


def _shifted(logits: NDArray[np.floating[Any]]) -> NDArray[np.float64]:
    # Promote before subtracting: float32 input gives the same numbers as the kernels.
    promoted = logits.astype(np.float64)
    promoted -= promoted.max(axis=1, keepdims=True)
    return promoted


def _scaled_exp(logits: NDArray[np.floating[Any]], temperature: float) -> NDArray[np.float64]:
    """exp((logits - max) / temperature) per row, float64, computed in place in one n x K array:
    the arithmetic :func:`softmax`, :func:`top_label` and :func:`top_label_and_softmax` share."""
    exp = _shifted(logits)
    exp /= temperature
    np.exp(exp, out=exp)
    return exp


def log_softmax(logits: NDArray[np.floating[Any]], temperature: float = 1.0) -> NDArray[np.float64]:
    """log softmax(logits / temperature), row-wise, in float64 (inputs trusted)."""
    shifted = _shifted(logits) / temperature
    result: NDArray[np.float64] = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return result


def softmax(logits: NDArray[np.floating[Any]], temperature: float = 1.0) -> NDArray[np.float64]:
    """softmax(logits / temperature), row-wise, in float64 (inputs trusted)."""
    exp = _scaled_exp(logits, temperature)
    exp /= exp.sum(axis=1, keepdims=True)
    return exp


def top_label(
    logits: NDArray[np.floating[Any]], temperature: float = 1.0
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Predicted class (first arg-max) and its softmax confidence at ``temperature``.

    The confidence of the top class is 1 / sum_k exp((z_k - max z) / T): one pass, no
    full probability matrix kept.
    """
    predictions = logits.argmax(axis=1)
    confidence = 1.0 / _scaled_exp(logits, temperature).sum(axis=1)
    return predictions, confidence


def top_label_and_softmax(
    logits: NDArray[np.floating[Any]], temperature: float = 1.0
) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    """:func:`top_label`'s predictions and confidences and :func:`softmax`'s probabilities from
    one ``exp`` pass (:func:`_scaled_exp`, as theirs), so the same numbers bit for bit."""
    predictions = logits.argmax(axis=1)
    exp = _scaled_exp(logits, temperature)
    sums = exp.sum(axis=1, keepdims=True)
    confidence = 1.0 / sums[:, 0]
    exp /= sums
    return predictions, confidence, exp


def label_log_probability(
    logits: NDArray[np.floating[Any]], labels: NDArray[np.intp], temperature: float = 1.0
) -> NDArray[np.float64]:
    """log softmax(z / T)[y] per row: the negative per-example NLL, without clipping."""
    rows = np.arange(logits.shape[0])
    shifted = _shifted(logits) / temperature
    log_norm = np.log(np.exp(shifted).sum(axis=1))
    result: NDArray[np.float64] = shifted[rows, labels] - log_norm
    return result
