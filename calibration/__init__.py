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

from ._engine import LOCAL_ENGINE, Engine, LocalEngine
from ._estimators import (
    ESTIMATORS,
    SMOOTH_GRID_BINS,
    CalibrationErrorEstimate,
    ConfidenceHistogram,
    calibration_error,
    calibration_error_from_stats,
    calibration_errors,
    equal_mass_edges,
)
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
from ._partitioned import (
    Partition,
    PartitionedScoredSet,
    check_unique_ids,
    evaluate_partitioned,
    fit_partitioned,
    is_partitioned_path,
    nll_difference_partitioned,
    open_partitioned,
    read_partition,
)
from ._probabilities import calibrated_probabilities, top_label_confidence
from ._qualify import QualificationReport, qualify_calibration_set
from ._scored import MAX_CLASSES, ScoredSet, ScoredSetError, read_scored_set, write_scored_set
from ._scores import TopLabelScores
from ._serialise import JsonResult, json_safe
from ._stats import CalibrationStats, ReliabilityTable
from ._temperature import DetectableShift, TemperatureStats, TemperatureTest, minimal_detectable_shift, temperature_test
from ._validation import check_logits, check_n_bins, check_temperature

__all__ = [
    "DEFAULT_BOUNDS",
    "ESTIMATORS",
    "LOCAL_ENGINE",
    "MAX_CLASSES",
    "SMOOTH_GRID_BINS",
    "BootstrapComparison",
    "CalibrationErrorEstimate",
    "CalibrationReport",
    "CalibrationStats",
    "ConfidenceHistogram",
    "ConsistencyTest",
    "DetectableShift",
    "Engine",
    "GateChoice",
    "GateSweep",
    "GroupBreakdown",
    "GroupCalibration",
    "JsonResult",
    "LocalEngine",
    "Partition",
    "PartitionedScoredSet",
    "QualificationReport",
    "ReliabilityTable",
    "ScoredSet",
    "ScoredSetError",
    "TemperatureFit",
    "TemperatureStats",
    "TemperatureTest",
    "TopLabelScores",
    "accuracy",
    "brier_score",
    "calibrated_probabilities",
    "calibration_error",
    "calibration_error_from_stats",
    "calibration_errors",
    "check_logits",
    "check_n_bins",
    "check_temperature",
    "check_unique_ids",
    "choose_threshold",
    "classwise_calibration_error",
    "consistency_resampling_from_stats",
    "consistency_resampling_test",
    "equal_mass_edges",
    "evaluate",
    "evaluate_partitioned",
    "expected_calibration_error",
    "fit_partitioned",
    "fit_temperature",
    "group_calibration",
    "is_partitioned_path",
    "json_safe",
    "maximum_calibration_error",
    "mean_confidence",
    "minimal_detectable_shift",
    "negative_log_likelihood",
    "nll_difference_partitioned",
    "open_partitioned",
    "paired_bootstrap_nll",
    "qualify_calibration_set",
    "read_partition",
    "read_scored_set",
    "reliability_table",
    "sweep_thresholds",
    "temperature_test",
    "top_label_confidence",
    "write_scored_set",
]
