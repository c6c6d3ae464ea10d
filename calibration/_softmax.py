"""Numerically stable softmax pieces at a temperature.

Everything subtracts the row maximum before exponentiating, so logits of any size
(±1e4 and beyond) neither overflow nor lose the log-probabilities of unlikely classes.
Results are float64 whatever the input dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["log_softmax", "softmax", "top_label", "label_log_probability"]


def log_softmax(logits: NDArray[np.floating[Any]], temperature: float = 1.0) -> NDArray[np.float64]:
    """log softmax(logits / temperature), row-wise, in float64 (inputs trusted)."""
    shifted = (logits - logits.max(axis=1, keepdims=True)).astype(np.float64, copy=False) / temperature
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def softmax(logits: NDArray[np.floating[Any]], temperature: float = 1.0) -> NDArray[np.float64]:
    """softmax(logits / temperature), row-wise, in float64 (inputs trusted)."""
    shifted = (logits - logits.max(axis=1, keepdims=True)).astype(np.float64, copy=False) / temperature
    exp = np.exp(shifted)
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
    shifted = (logits - logits.max(axis=1, keepdims=True)).astype(np.float64, copy=False) / temperature
    confidence = 1.0 / np.exp(shifted).sum(axis=1)
    return predictions, confidence


def label_log_probability(
    logits: NDArray[np.floating[Any]], labels: NDArray[np.intp], temperature: float = 1.0
) -> NDArray[np.float64]:
    """log softmax(z / T)[y] per row: the negative per-example NLL, without clipping."""
    row_max = logits.max(axis=1)
    rows = np.arange(logits.shape[0])
    shifted = (logits - row_max[:, None]).astype(np.float64, copy=False) / temperature
    log_norm = np.log(np.exp(shifted).sum(axis=1))
    return shifted[rows, labels] - log_norm
