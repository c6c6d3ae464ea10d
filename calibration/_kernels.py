"""Chunked one-pass kernels over logits: the only code that touches every logit.

Two passes exist, each reading the logits once, chunk by chunk, accumulating in float64:

- :func:`nll_expansion_sums` — at an inverse temperature ``beta``, the mean NLL and its
  first four derivatives in ``beta``. With ``d = z - max(z)`` per row and
  ``p = softmax(beta * d)``, the per-row NLL is ``log sum exp(beta * d) - beta * d_y``; its
  derivatives in ``beta`` are the cumulants of ``d`` under ``p`` (minus ``d_y`` for the
  first), so one pass gives a quartic model of the NLL around ``beta``.
- :func:`calibration_sums` — at ``beta``, the per-bin counts and sums of the top-label
  confidence plus NLL and Brier sums (the fields of :class:`CalibrationStats`).

Float32 logits are read as they are and promoted chunk by chunk, so the peak memory beyond
the input is a few chunks, whatever N.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["nll_expansion_sums", "calibration_sums", "chunk_rows", "N_EXPANSION_SUMS"]

# [n, nll_sum, gradient_sum, k2_sum, k3_sum, k4_sum, nll_at_one_sum]
N_EXPANSION_SUMS = 7
_CHUNK_ELEMENTS = 1 << 20  # ~8 MB of float64 per temporary


def chunk_rows(n_classes: int) -> int:
    """Rows per chunk so that one float64 temporary stays near 8 MB."""
    return max(1, _CHUNK_ELEMENTS // n_classes)


def _shifted(chunk: NDArray[np.floating[Any]]) -> NDArray[np.float64]:
    # Subtract the row max in float64: d <= 0, exp(beta * d) never overflows.
    block = chunk.astype(np.float64)
    block -= block.max(axis=1, keepdims=True)
    return block


def nll_expansion_sums(
    logits: NDArray[np.floating[Any]], labels: NDArray[np.intp], beta: float, *, with_nll_at_one: bool = True
) -> NDArray[np.float64]:
    """Sums over rows of the NLL at ``beta`` and its first four ``beta``-derivatives.

    Returns ``[n, nll_sum, gradient_sum, k2_sum, k3_sum, k4_sum, nll_at_one_sum]`` where
    ``nll_at_one_sum`` is the NLL sum at ``beta = 1`` (T = 1), or 0 when not asked for.
    Inputs are trusted.
    """
    sums = np.zeros(N_EXPANSION_SUMS, dtype=np.float64)
    step = chunk_rows(logits.shape[1])
    for start in range(0, logits.shape[0], step):
        d = _shifted(logits[start : start + step])
        rows = np.arange(d.shape[0])
        d_label = d[rows, labels[start : start + step]]
        e = np.exp(beta * d)
        s0 = e.sum(axis=1)
        p = e / s0[:, None]
        mean = (p * d).sum(axis=1)
        centred = d - mean[:, None]
        c2 = centred * centred
        k2 = (p * c2).sum(axis=1)
        k3 = (p * c2 * centred).sum(axis=1)
        k4 = (p * c2 * c2).sum(axis=1) - 3.0 * k2 * k2
        sums[0] += d.shape[0]
        sums[1] += float(np.sum(np.log(s0) - beta * d_label))
        sums[2] += float(np.sum(mean - d_label))
        sums[3] += float(k2.sum())
        sums[4] += float(k3.sum())
        sums[5] += float(k4.sum())
        if not with_nll_at_one:
            continue
        if beta == 1.0:
            sums[6] = sums[1]
        else:
            sums[6] += float(np.sum(np.log(np.exp(d).sum(axis=1)) - d_label))
    return sums


def calibration_sums(
    logits: NDArray[np.floating[Any]], labels: NDArray[np.intp], beta: float, n_bins: int
) -> tuple[
    NDArray[np.int64], NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], float, float
]:
    """Per-bin count, confidence sum, correct count, Σ q(1-q); NLL sum; Brier sum.

    Bins are equal-width on the top-label confidence, bin m = (m/M, (m+1)/M].
    """
    interior = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    count = np.zeros(n_bins, dtype=np.int64)
    confidence_sum = np.zeros(n_bins, dtype=np.float64)
    correct_count = np.zeros(n_bins, dtype=np.int64)
    variance_sum = np.zeros(n_bins, dtype=np.float64)
    nll_sum = 0.0
    brier_sum = 0.0
    step = chunk_rows(logits.shape[1])
    for start in range(0, logits.shape[0], step):
        chunk = logits[start : start + step]
        chunk_labels = labels[start : start + step]
        d = _shifted(chunk)
        rows = np.arange(d.shape[0])
        e = np.exp(beta * d)
        s0 = e.sum(axis=1)
        # The top class has d = 0, so its probability is exactly 1 / s0.
        confidence = 1.0 / s0
        p_label = e[rows, chunk_labels] / s0
        correct = chunk.argmax(axis=1) == chunk_labels
        bins = np.searchsorted(interior, confidence, side="left")
        count += np.bincount(bins, minlength=n_bins)
        confidence_sum += np.bincount(bins, weights=confidence, minlength=n_bins)
        correct_count += np.bincount(bins, weights=correct, minlength=n_bins).astype(np.int64)
        variance_sum += np.bincount(bins, weights=confidence * (1.0 - confidence), minlength=n_bins)
        nll_sum += float(np.sum(np.log(s0) - beta * d[rows, chunk_labels]))
        # Brier: sum_k (p_k - [y = k])^2 = sum_k p_k^2 - 2 p_y + 1.
        brier_sum += float(np.sum((e * e).sum(axis=1) / (s0 * s0) - 2.0 * p_label + 1.0))
    return count, confidence_sum, correct_count, variance_sum, nll_sum, brier_sum
