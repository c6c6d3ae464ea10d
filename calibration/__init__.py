"""Thermostat's pure numeric core: temperature scaling, calibration metrics, the gate.

numpy, scipy and pandas only (pandas to read and write tables): no MLflow, no Prefect.
Everything outside this package uses the names below; the ``_*`` modules are private.
The validators (:func:`check_logits`, :func:`check_temperature`, :func:`check_n_bins`) are
public so that the packages built on this one refuse bad input with the same words.
The docstrings' examples take ``import numpy as np`` and ``from datetime import UTC, datetime,
timedelta`` as done (as NumPy's docstring standard takes ``np``).

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

# The names are loaded on first use (PEP 562 ``__getattr__`` below), so ``import calibration``
# costs nothing and ``from calibration import DEFAULT_BOUNDS`` loads no scipy, pandas or numba:
# the command line parses its arguments at once. The type checker reads these imports instead.
if _typing.TYPE_CHECKING:
    from ._defaults import (
        DEFAULT_BOOTSTRAP_RESAMPLES,
        DEFAULT_BOUNDS,
        DEFAULT_CONFIDENCE_LEVEL,
        DEFAULT_MAX_TV_DISTANCE,
        DEFAULT_MIN_PER_CLASS,
        DEFAULT_MIN_TOTAL,
        DEFAULT_N_BINS,
        ESTIMATORS,
        MAX_CLASSES,
        MAX_PRIOR_CLASSES,
    )
    from ._correction import PriorCorrection
    from ._engine import LOCAL_ENGINE, Engine, LocalEngine
    from ._estimators import (
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
        paired_bootstrap_nll_between,
    )
    from ._file_limits import expansion_refusal, memory_refusal, not_a_regular_file
    from ._fit import TemperatureFit, fit_temperature
    from ._gate import GateChoice, GateSweep, choose_threshold, sweep_thresholds
    from ._interval import Interval
    from ._kernels import compile_kernels
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
    from ._native import native_kernels_loaded
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
    from ._priors import (
        PriorEstimate,
        PriorShiftTest,
        ReferencePriors,
        ServedPriorStats,
        estimate_priors_bbse,
        estimate_priors_em,
        prior_corrected_log_probabilities,
        prior_corrected_logits,
        prior_shift_test,
    )
    from ._probabilities import calibrated_probabilities, top_label_and_probabilities, top_label_confidence
    from ._qualify import QualificationReport, qualify_calibration_set
    from ._read_through import ReadThrough
    from ._scored import ScoredSet, ScoredSetError, read_logits, read_scored_set, write_scored_set
    from ._scores import TopLabelScores
    from ._serialise import JsonResult, json_safe
    from ._shift import (
        ClassAccuracyTest,
        ReweightingGain,
        ShiftDiagnosis,
        class_accuracy_test,
        diagnose_shift,
        holm_levels,
        reweighting_gain,
    )
    from ._stats import CalibrationStats, ReliabilityTable
    from ._temperature import (
        DetectableShift,
        TemperatureStats,
        TemperatureTest,
        log_normal_interval,
        minimal_detectable_shift,
        temperature_test,
    )
    from ._validation import check_logits, check_n_bins, check_temperature

__all__ = [
    "DEFAULT_BOOTSTRAP_RESAMPLES",
    "DEFAULT_BOUNDS",
    "DEFAULT_CONFIDENCE_LEVEL",
    "DEFAULT_MAX_TV_DISTANCE",
    "DEFAULT_MIN_PER_CLASS",
    "DEFAULT_MIN_TOTAL",
    "DEFAULT_N_BINS",
    "ESTIMATORS",
    "LOCAL_ENGINE",
    "MAX_CLASSES",
    "MAX_PRIOR_CLASSES",
    "SMOOTH_GRID_BINS",
    "BootstrapComparison",
    "CalibrationErrorEstimate",
    "CalibrationReport",
    "CalibrationStats",
    "ClassAccuracyTest",
    "ConfidenceHistogram",
    "ConsistencyTest",
    "DetectableShift",
    "Engine",
    "GateChoice",
    "GateSweep",
    "GroupBreakdown",
    "GroupCalibration",
    "Interval",
    "JsonResult",
    "LocalEngine",
    "Partition",
    "PartitionedScoredSet",
    "PriorCorrection",
    "ReadThrough",
    "PriorEstimate",
    "PriorShiftTest",
    "QualificationReport",
    "ReferencePriors",
    "ReliabilityTable",
    "ReweightingGain",
    "ScoredSet",
    "ScoredSetError",
    "ServedPriorStats",
    "ShiftDiagnosis",
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
    "class_accuracy_test",
    "classwise_calibration_error",
    "compile_kernels",
    "consistency_resampling_from_stats",
    "consistency_resampling_test",
    "diagnose_shift",
    "equal_mass_edges",
    "estimate_priors_bbse",
    "estimate_priors_em",
    "evaluate",
    "evaluate_partitioned",
    "expansion_refusal",
    "expected_calibration_error",
    "fit_partitioned",
    "fit_temperature",
    "group_calibration",
    "holm_levels",
    "is_partitioned_path",
    "json_safe",
    "log_normal_interval",
    "maximum_calibration_error",
    "mean_confidence",
    "memory_refusal",
    "minimal_detectable_shift",
    "native_kernels_loaded",
    "negative_log_likelihood",
    "nll_difference_partitioned",
    "not_a_regular_file",
    "open_partitioned",
    "paired_bootstrap_nll",
    "paired_bootstrap_nll_between",
    "prior_corrected_log_probabilities",
    "prior_corrected_logits",
    "prior_shift_test",
    "qualify_calibration_set",
    "read_logits",
    "read_partition",
    "read_scored_set",
    "reliability_table",
    "reweighting_gain",
    "sweep_thresholds",
    "temperature_test",
    "top_label_and_probabilities",
    "top_label_confidence",
    "write_scored_set",
]

# Which private module defines each name of __all__ (the imports above, for the run time;
# tests/test_exported_members.py checks that the two and __all__ agree).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "_defaults": (
        "DEFAULT_BOOTSTRAP_RESAMPLES", "DEFAULT_BOUNDS", "DEFAULT_CONFIDENCE_LEVEL", "DEFAULT_MAX_TV_DISTANCE",
        "DEFAULT_MIN_PER_CLASS", "DEFAULT_MIN_TOTAL", "DEFAULT_N_BINS", "ESTIMATORS", "MAX_CLASSES",
        "MAX_PRIOR_CLASSES"
    ),
    "_correction": ("PriorCorrection",),
    "_engine": ("LOCAL_ENGINE", "Engine", "LocalEngine"),
    "_file_limits": ("expansion_refusal", "memory_refusal", "not_a_regular_file"),
    "_estimators": (
        "SMOOTH_GRID_BINS", "CalibrationErrorEstimate", "ConfidenceHistogram", "calibration_error",
        "calibration_error_from_stats", "calibration_errors", "equal_mass_edges"
    ),
    "_evidence": (
        "BootstrapComparison", "ConsistencyTest", "consistency_resampling_from_stats", "consistency_resampling_test",
        "paired_bootstrap_nll", "paired_bootstrap_nll_between"
    ),
    "_fit": ("TemperatureFit", "fit_temperature"),
    "_gate": ("GateChoice", "GateSweep", "choose_threshold", "sweep_thresholds"),
    "_interval": ("Interval",),
    "_read_through": ("ReadThrough",),
    "_kernels": ("compile_kernels",),
    "_native": ("native_kernels_loaded",),
    "_metrics": (
        "CalibrationReport", "GroupBreakdown", "GroupCalibration", "accuracy", "brier_score",
        "classwise_calibration_error", "evaluate", "expected_calibration_error", "group_calibration",
        "maximum_calibration_error", "mean_confidence", "negative_log_likelihood", "reliability_table"
    ),
    "_partitioned": (
        "Partition", "PartitionedScoredSet", "check_unique_ids", "evaluate_partitioned", "fit_partitioned",
        "is_partitioned_path", "nll_difference_partitioned", "open_partitioned", "read_partition"
    ),
    "_priors": (
        "PriorEstimate", "PriorShiftTest", "ReferencePriors", "ServedPriorStats", "estimate_priors_bbse",
        "estimate_priors_em", "prior_corrected_log_probabilities", "prior_corrected_logits", "prior_shift_test"
    ),
    "_probabilities": ("calibrated_probabilities", "top_label_and_probabilities", "top_label_confidence"),
    "_qualify": ("QualificationReport", "qualify_calibration_set"),
    "_scored": ("ScoredSet", "ScoredSetError", "read_logits", "read_scored_set", "write_scored_set"),
    "_scores": ("TopLabelScores",),
    "_serialise": ("JsonResult", "json_safe"),
    "_shift": (
        "ClassAccuracyTest", "ReweightingGain", "ShiftDiagnosis", "class_accuracy_test", "diagnose_shift",
        "holm_levels", "reweighting_gain"
    ),
    "_stats": ("CalibrationStats", "ReliabilityTable"),
    "_temperature": (
        "DetectableShift", "TemperatureStats", "TemperatureTest", "log_normal_interval", "minimal_detectable_shift",
        "temperature_test"
    ),
    "_validation": ("check_logits", "check_n_bins", "check_temperature"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}


if not _typing.TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any name

    def __getattr__(name: str) -> _typing.Any:
        module = _MODULE_OF.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(_importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value  # later look-ups find it directly
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
