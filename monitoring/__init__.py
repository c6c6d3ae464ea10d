"""Reading recent labelled traffic, windowing, the drift decision and its reports. No Prefect.

The docstrings' examples take ``import numpy as np`` and ``from datetime import UTC, datetime,
timedelta`` as done (as NumPy's docstring standard takes ``np``).

The pieces, in the order a monitor uses them:

* :class:`PredictionLog` — the prediction log table in any SQLAlchemy database (SQLite by
  default); :func:`log_predictions` lets a serving wrapper feed it;
  :class:`PredictionLogWriter` does it in batches from a background thread (the served
  pyfunc's logging: bounded queue, losses counted, never raised), :class:`SynchronousLogWriter`
  request by request in the caller's thread (in-process serving), with the same counts.
* :func:`summarise_window` — a version's labelled traffic in a time window (a :class:`WindowQuery`:
  the version, the window, the T, bins and gate threshold, checked once), read in chunks
  from any :class:`LabelledSource`, merged into mergeable statistics overall and per group,
  plus the gate's counts; :func:`merge_summaries` adds up parts of one window.
* :func:`export_prediction_log` — a version's log written to Parquet partitioned by UTC day,
  idempotent and resumable; :class:`PredictionLogExport` reads it back as a labelled source;
  :func:`summarise_export` summarises it one partition (:func:`export_partitions`,
  :func:`summarise_partition`) per task on an engine.
* :func:`prune_prediction_log` — retention: rows served before a cutoff (:func:`retention_cutoff`,
  whole UTC days) deleted, their version's labelled rows archived to the export first.
* :func:`scan_window` — a check's three reads of the SQL log (the window summary, the early
  warning's profile of every served row, the sequential increment's :class:`LabelArrivals`) in
  one pass over the window (:class:`WindowScan`).
* :func:`update_sequential` — the CUSUM over checks (:class:`SequentialState` kept between
  runs): each check's new labelled rows; an alarm with the change point.
* :func:`confidence_profile`, :func:`warn_before_labels` — before labels: the accuracy the
  calibrated confidences predict and a test of their distribution against the reference.
* :func:`diagnose_arrays` — which shift a window in memory shows (label shift, calibration
  drift, accuracy collapse, covariate shift) and the fix that fits it (:class:`ShiftCheck`).
* :func:`decide_drift` — the verdict (``insufficient_data`` / ``drift`` / ``ok``) with its
  reasons; :func:`with_stream_checks` adds the sequential rule's alarm and the early warning;
  :func:`diagnose_reliability_shape` — can one temperature fix what is left?
* :func:`diagnose_check` — which shift the check saw (label shift, calibration drift, accuracy
  collapse, covariate shift, no change), from the served rows' class priors and the labelled
  rows read again at the re-weighted posteriors (:func:`reweight_window`).
* :func:`reliability_figure`, :func:`drift_markdown`, :func:`drift_table_rows`,
  :func:`drift_metrics` (its names: :func:`drift_metric_names`), :func:`drift_payload` — outputs for
  dashboards and events.
* :func:`mask_url` — a URL as it may be shown or stored (its password masked);
  :func:`redact_credentials` — text that may quote a URL, its secrets taken out;
  :func:`holds_masked_credentials` — a masked URL, which cannot be the one to connect with;
  :func:`encode_credentials` — a URL whose password other parsers read whole.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

# The names are loaded on first use (PEP 562 ``__getattr__`` below), so ``import monitoring``
# costs nothing and a name loads only its own module (and what that imports): a command that
# needs :func:`mask_url` does not load SQL, scipy or matplotlib. The type checker reads these.
if _typing.TYPE_CHECKING:
    from .diagnosis import ReweightedWindow, diagnose_check, read_as_family, reweight_window
    from .drift import DriftReference, DriftReport, GroupDrift, Verdict, decide_drift, with_stream_checks
    from .drift_tests import (
        CollapsedOutputTest,
        DriftTest,
        EceExcessTest,
        ScopeEvidence,
        ScopeReference,
        TemperatureShiftTest,
        TestOutcome,
        configured_tests,
        window_level,
    )
    from .early_warning import (
        CONFIDENCE_EDGES,
        LEGACY_CONFIDENCE_EDGES,
        ConfidenceProfile,
        EarlyWarning,
        ServedSource,
        confidence_profile,
        warn_before_labels,
    )
    from .escalation import ReliabilityShape, diagnose_reliability_shape
    from .export import (
        ExportPartition,
        ExportResult,
        PredictionLogExport,
        export_partitions,
        export_prediction_log,
        summarise_export,
        summarise_partition,
    )
    from .log_writer import LogWriterStats, PredictionLogWriter, SynchronousLogWriter
    from .policy import DEFAULT_POLICY, DriftPolicy, Knob, policy_knobs
    from .prediction_log import (
        MAX_NAME_LENGTH,
        LabelAttachReport,
        LabelConflict,
        LabelledChunk,
        LabelledFingerprint,
        NewlyLabelled,
        PredictionLog,
        PredictionRecord,
        PredictionRowError,
        ServedChunk,
        log_predictions,
    )
    from .report import (
        DRIFT_PAYLOAD_KEYS,
        LABEL_SHIFT_PAYLOAD_KEYS,
        drift_markdown,
        drift_metric_names,
        drift_metrics,
        drift_payload,
        drift_table_rows,
        group_metric_key,
        label_shift_payload,
        prior_test_numbers,
        reliability_figure,
    )
    from .retention import LogPruned, VersionPruned, prune_prediction_log, retention_cutoff
    from .scan import LabelArrivals, WindowScan, scan_window
    from .sequential import SequentialCheck, SequentialState, update_sequential
    from .shift import ShiftCheck, diagnose_arrays
    from .urls import URL_MASK, encode_credentials, holds_masked_credentials, mask_url, redact_credentials
    from .window import (
        GateCounts,
        LabelledSource,
        WindowQuery,
        WindowSummary,
        merge_summaries,
        summarise_arrays,
        summarise_window,
    )


__all__ = [
    "CONFIDENCE_EDGES",
    "DEFAULT_POLICY",
    "DRIFT_PAYLOAD_KEYS",
    "LABEL_SHIFT_PAYLOAD_KEYS",
    "LEGACY_CONFIDENCE_EDGES",
    "MAX_NAME_LENGTH",
    "URL_MASK",
    "CollapsedOutputTest",
    "ConfidenceProfile",
    "DriftPolicy",
    "DriftReference",
    "DriftReport",
    "DriftTest",
    "EarlyWarning",
    "EceExcessTest",
    "ExportPartition",
    "ExportResult",
    "GateCounts",
    "GroupDrift",
    "Knob",
    "LabelArrivals",
    "LabelAttachReport",
    "LabelConflict",
    "LabelledChunk",
    "LabelledFingerprint",
    "LabelledSource",
    "LogPruned",
    "LogWriterStats",
    "NewlyLabelled",
    "PredictionLog",
    "PredictionLogExport",
    "PredictionLogWriter",
    "PredictionRecord",
    "PredictionRowError",
    "ReliabilityShape",
    "ReweightedWindow",
    "ScopeEvidence",
    "ScopeReference",
    "SequentialCheck",
    "SequentialState",
    "ShiftCheck",
    "ServedChunk",
    "ServedSource",
    "SynchronousLogWriter",
    "TemperatureShiftTest",
    "TestOutcome",
    "Verdict",
    "VersionPruned",
    "WindowScan",
    "WindowQuery",
    "WindowSummary",
    "confidence_profile",
    "configured_tests",
    "decide_drift",
    "diagnose_arrays",
    "diagnose_check",
    "diagnose_reliability_shape",
    "drift_markdown",
    "drift_metric_names",
    "drift_metrics",
    "drift_payload",
    "drift_table_rows",
    "encode_credentials",
    "export_partitions",
    "export_prediction_log",
    "group_metric_key",
    "label_shift_payload",
    "holds_masked_credentials",
    "log_predictions",
    "mask_url",
    "merge_summaries",
    "policy_knobs",
    "prior_test_numbers",
    "prune_prediction_log",
    "read_as_family",
    "redact_credentials",
    "reliability_figure",
    "retention_cutoff",
    "reweight_window",
    "scan_window",
    "summarise_arrays",
    "summarise_export",
    "summarise_partition",
    "summarise_window",
    "update_sequential",
    "warn_before_labels",
    "window_level",
    "with_stream_checks",
]

# Which module defines each name of __all__ (the imports above, for the run time;
# tests/test_exported_members.py checks that the two and __all__ agree).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "diagnosis": ("ReweightedWindow", "diagnose_check", "read_as_family", "reweight_window"),
    "drift": ("DriftReference", "DriftReport", "GroupDrift", "Verdict", "decide_drift", "with_stream_checks"),
    "drift_tests": (
        "CollapsedOutputTest", "DriftTest", "EceExcessTest", "ScopeEvidence", "ScopeReference",
        "TemperatureShiftTest", "TestOutcome", "configured_tests", "window_level"
    ),
    "early_warning": (
        "CONFIDENCE_EDGES", "LEGACY_CONFIDENCE_EDGES", "ConfidenceProfile", "EarlyWarning", "ServedSource",
        "confidence_profile", "warn_before_labels"
    ),
    "escalation": ("ReliabilityShape", "diagnose_reliability_shape"),
    "export": (
        "ExportPartition", "ExportResult", "PredictionLogExport", "export_partitions", "export_prediction_log",
        "summarise_export", "summarise_partition"
    ),
    "log_writer": ("LogWriterStats", "PredictionLogWriter", "SynchronousLogWriter"),
    "policy": ("DEFAULT_POLICY", "DriftPolicy", "Knob", "policy_knobs"),
    "prediction_log": (
        "MAX_NAME_LENGTH", "LabelAttachReport", "LabelConflict", "LabelledChunk", "LabelledFingerprint",
        "NewlyLabelled", "PredictionLog", "PredictionRecord", "PredictionRowError", "ServedChunk",
        "log_predictions"
    ),
    "report": (
        "DRIFT_PAYLOAD_KEYS", "LABEL_SHIFT_PAYLOAD_KEYS", "drift_markdown", "drift_metric_names", "drift_metrics",
        "drift_payload", "drift_table_rows", "group_metric_key", "label_shift_payload", "prior_test_numbers",
        "reliability_figure"
    ),
    "retention": ("LogPruned", "VersionPruned", "prune_prediction_log", "retention_cutoff"),
    "scan": ("LabelArrivals", "WindowScan", "scan_window"),
    "shift": ("ShiftCheck", "diagnose_arrays"),
    "sequential": ("SequentialCheck", "SequentialState", "update_sequential"),
    "urls": ("URL_MASK", "encode_credentials", "holds_masked_credentials", "mask_url", "redact_credentials"),
    "window": (
        "GateCounts", "LabelledSource", "WindowQuery", "WindowSummary", "merge_summaries", "summarise_arrays",
        "summarise_window"
    ),
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
