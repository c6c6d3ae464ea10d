"""The gate: auto-process when calibrated confidence >= threshold, else review (rule 8).

STUB: signatures fixed; implementation pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["GateSweep", "GateChoice", "sweep_thresholds", "choose_threshold"]


@dataclass(frozen=True, slots=True)
class GateSweep:
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


@dataclass(frozen=True, slots=True)
class GateChoice:
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


def sweep_thresholds(confidence: ArrayLike, correct: ArrayLike, *, confidence_level: float = 0.95) -> GateSweep:
    raise NotImplementedError


def choose_threshold(
    confidence: ArrayLike, correct: ArrayLike, *, target_accuracy: float, confidence_level: float = 0.95
) -> GateChoice:
    raise NotImplementedError
