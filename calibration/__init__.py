"""Thermostat's pure numeric core: temperature scaling, calibration metrics, the gate.

numpy, scipy and pandas only (pandas to read and write tables): no MLflow, no Prefect.
Everything outside this package uses the names below; the ``_*`` modules are private.
The validators (:func:`check_logits`, :func:`check_temperature`, :func:`check_n_bins`) are
public so that the packages built on this one refuse bad input with the same words.

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
"""

from __future__ import annotations

from ._evidence import (
    BootstrapComparison,
    ConsistencyTest,
    consistency_resampling_from_stats,
    consistency_resampling_test,
    paired_bootstrap_nll,
)
from ._fit import DEFAULT_BOUNDS, TemperatureFit, fit_temperature
from ._gate import GateChoice, GateSweep, choose_threshold, sweep_thresholds
from ._metrics import (
    CalibrationReport,
    GroupBreakdown,
    GroupCalibration,
    accuracy,
    brier_score,
    classwise_calibration_error,
    evaluate,
    expected_calibration_error,
    group_calibration,
    maximum_calibration_error,
    mean_confidence,
    negative_log_likelihood,
    reliability_table,
)
from ._probabilities import calibrated_probabilities, top_label_confidence
from ._qualify import QualificationReport, qualify_calibration_set
from ._scored import MAX_CLASSES, ScoredSet, ScoredSetError, read_scored_set, write_scored_set
from ._scores import TopLabelScores
from ._serialise import JsonResult, json_safe
from ._stats import CalibrationStats, ReliabilityTable
from ._validation import check_logits, check_n_bins, check_temperature

__all__ = [
    "DEFAULT_BOUNDS",
    "MAX_CLASSES",
    "BootstrapComparison",
    "CalibrationReport",
    "CalibrationStats",
    "ConsistencyTest",
    "GateChoice",
    "GateSweep",
    "GroupBreakdown",
    "GroupCalibration",
    "JsonResult",
    "QualificationReport",
    "ReliabilityTable",
    "ScoredSet",
    "ScoredSetError",
    "TemperatureFit",
    "TopLabelScores",
    "accuracy",
    "brier_score",
    "calibrated_probabilities",
    "check_logits",
    "check_n_bins",
    "check_temperature",
    "choose_threshold",
    "classwise_calibration_error",
    "consistency_resampling_from_stats",
    "consistency_resampling_test",
    "evaluate",
    "expected_calibration_error",
    "fit_temperature",
    "group_calibration",
    "json_safe",
    "maximum_calibration_error",
    "mean_confidence",
    "negative_log_likelihood",
    "paired_bootstrap_nll",
    "qualify_calibration_set",
    "read_scored_set",
    "reliability_table",
    "sweep_thresholds",
    "top_label_confidence",
    "write_scored_set",
]
