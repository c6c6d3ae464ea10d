"""Calibration data qualifies before it is used (rule 4).

STUB: signatures fixed; implementation pending.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["QualificationReport", "qualify_calibration_set"]


@dataclass(frozen=True, slots=True)
class QualificationReport:
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


def qualify_calibration_set(
    logits: ArrayLike,
    labels: ArrayLike,
    *,
    ids: ArrayLike | None = None,
    training_ids: ArrayLike | None = None,
    reference_labels: ArrayLike | None = None,
    min_total: int = 300,
    min_per_class: int = 30,
    max_tv_distance: float = 0.15,
) -> QualificationReport:
    raise NotImplementedError
