"""Mergeable sufficient statistics of calibration over a window (STYLE.md §6).

STUB: signatures fixed; implementation pending.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["CalibrationStats", "ReliabilityTable", "equal_width_bin_index"]


def equal_width_bin_index(confidence: NDArray[np.float64], n_bins: int) -> NDArray[np.intp]:
    """Bin of each confidence: bin m (0-based) is (m/M, (m+1)/M]; confidence 0 goes to bin 0.

    ``searchsorted(..., side="left")`` on the interior edges puts a value equal to an edge
    into the bin that edge closes, which is the half-open convention above.
    """
    interior = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    return np.searchsorted(interior, confidence, side="left")


@dataclass(frozen=True, slots=True)
class ReliabilityTable:
    """Per-bin reliability. Empty bins have count 0 and NaN confidence/accuracy/gap.

    ``gap`` is accuracy - mean confidence (negative: over-confident). ``sparse`` marks bins
    with fewer than ``min_count`` examples: read them as noise, not signal.
    """

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    count: NDArray[np.int64]
    mean_confidence: NDArray[np.float64]
    accuracy: NDArray[np.float64]
    gap: NDArray[np.float64]
    sparse: NDArray[np.bool_]
    n_bins: int
    scheme: str
    min_count: int


@dataclass(frozen=True, slots=True, eq=False)
class CalibrationStats:
    """Per-bin counts and sums (equal-width bins) plus NLL and Brier sums at one temperature."""

    n_bins: int
    temperature: float
    n_classes: int
    bin_count: NDArray[np.int64]
    bin_confidence_sum: NDArray[np.float64]
    bin_correct: NDArray[np.int64]
    bin_variance_sum: NDArray[np.float64]
    nll_sum: float
    brier_sum: float
