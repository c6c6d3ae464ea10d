"""Calibration metrics on arrays (rules 6, 7).

STUB: signatures fixed; implementation pending.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._stats import ReliabilityTable

__all__ = [
    "CalibrationReport", "GroupBreakdown", "GroupCalibration", "accuracy", "brier_score",
    "classwise_calibration_error", "evaluate", "expected_calibration_error", "group_calibration",
    "maximum_calibration_error", "mean_confidence", "negative_log_likelihood", "reliability_table",
]


@dataclass(frozen=True, slots=True)
class GroupCalibration:
    group: str
    n: int
    ece: float
    accuracy: float
    mean_confidence: float


@dataclass(frozen=True, slots=True)
class GroupBreakdown:
    groups: tuple[GroupCalibration, ...]
    weighted_ece: float
    n_bins: int
    scheme: str


@dataclass(frozen=True, slots=True)
class CalibrationReport:
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


def _stub(*args: object, **kwargs: object) -> float:
    raise NotImplementedError


accuracy = brier_score = classwise_calibration_error = expected_calibration_error = _stub
maximum_calibration_error = mean_confidence = negative_log_likelihood = _stub
evaluate = group_calibration = reliability_table = _stub
