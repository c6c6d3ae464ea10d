"""Reading recent labelled traffic, windowing, the drift decision and its reports. No Prefect.

The docstrings' examples take ``import numpy as np`` and ``from datetime import UTC, datetime,
timedelta`` as done (as NumPy's docstring standard takes ``np``).

The pieces, in the order a monitor uses them:

* :class:`PredictionLog` — the prediction log table in any SQLAlchemy database (SQLite by
  default); :func:`log_predictions` lets a serving wrapper feed it;
  :class:`PredictionLogWriter` does it in batches from a background thread (bounded queue,
  losses counted, never raised; a request may wait for its rows, at most a timeout).
* :func:`summarise_window` — a version's labelled traffic in a time window (a :class:`WindowQuery`:
  the version, the window, the T, bins and gate threshold, checked once), read in chunks
  from any :class:`LabelledSource`, merged into mergeable statistics overall and per group,
  plus the gate's counts; :func:`merge_summaries` adds up parts of one window.
* :func:`export_prediction_log` — a version's log written to Parquet partitioned by UTC day,
  idempotent and resumable, a written day merged, never replaced by fewer rows;
  :class:`PredictionLogExport` reads it back as a labelled source;
  :func:`summarise_export` summarises it one partition (:func:`export_partitions`,
  :func:`summarise_partition`) per task on an engine.
* :func:`prune_prediction_log` — retention: rows served before a cutoff (:func:`retention_cutoff`,
  whole UTC days, a retention of at most :data:`MAX_RETENTION`) deleted, a labelled row only once
  the export (the archive) holds it.
* :class:`PredictionStore` — what a store of served predictions answers (labelled read, served
  scan, labels, retention) and what it holds (:class:`StoreScope`): the log, its export and
  :class:`WindowInMemory` (a window of arrays) are stores; their chunks are
  :class:`LabelledChunk` and :class:`ServedChunk`.
* :func:`scan_window` — a check's three reads of the SQL log (the window summary, the early
  warning's profile of every served row, the sequential increment's :class:`LabelArrivals`) in
  one pass over the window (:class:`WindowScan`).
* :func:`check_version` — one check of one version, as a value (:class:`CheckOutcome`): the
  window read, the sequential rule, the early warning, the decision and the shift diagnosis,
  against a :class:`CheckReference` from a :class:`CheckState`; what the monitor, the command
  line and the studies run.
* :func:`update_sequential` — the CUSUM over checks (:class:`SequentialState` kept between
  runs): each check's new labelled rows; an alarm with the change point.
* :func:`confidence_profile`, :func:`warn_before_labels` — before labels: the accuracy the
  calibrated confidences predict and a test of their distribution against the reference.
* :func:`decide_drift` — the verdict (``insufficient_data`` / ``drift`` / ``calibrated`` /
  ``undetermined``) with its
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
  :func:`redact_exception`, :func:`credentials_redacted` — the same, in place, for an error
  and the errors it came from;
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
    from .change_point import WindowChangePoint, window_change_point
    from .check import CheckOutcome, CheckReference, CheckState, check_version
    from .diagnosis import ReweightedWindow, diagnose_check, labelled_mix, read_as_family, reweight_window
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
    from .ingest import IngestQueue, IngestQueueStats, IngestReport, PredictionBatch, write_predictions
    from .in_memory import WindowInMemory
    from .ingest_files import (
        IngestFileError,
        LabelRows,
        PredictionRows,
        label_csv_rows,
        read_label_file,
        read_prediction_file,
    )
    from .export import (
        ExportPartition,
        ExportResult,
        PredictionLogExport,
        export_partitions,
        export_prediction_log,
        summarise_export,
        summarise_partition,
    )
    from .log_writer import LogWriterStats, PredictionLogWriter
    from .policy import DEFAULT_POLICY, DriftPolicy, Knob, policy_knobs
    from .prediction_log import (
        DEFAULT_STATE_DIR,
        MAX_NAME_LENGTH,
        LabelledFingerprint,
        NewlyLabelled,
        PredictionLog,
        PredictionRecord,
        PredictionRowError,
        ServedTally,
        default_log_url,
        log_predictions,
        open_prediction_log,
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
    from .retention_limit import MAX_RETENTION
    from .scan import LabelArrivals, WindowScan, scan_window
    from .sequential import SequentialCheck, SequentialState, update_sequential
    from .store import (
        LabelAttachReport,
        LabelConflict,
        LabelledChunk,
        PredictionStore,
        RowRefusal,
        ServedChunk,
        StoreScope,
    )
    from .timeouts import DEFAULT_SERVING_LOG_TIMEOUT_MS
    from .urls import (
        URL_MASK,
        credentials_redacted,
        encode_credentials,
        holds_masked_credentials,
        mask_url,
        redact_credentials,
        redact_exception,
    )
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
    "DEFAULT_STATE_DIR",
    "DEFAULT_SERVING_LOG_TIMEOUT_MS",
    "DRIFT_PAYLOAD_KEYS",
    "LABEL_SHIFT_PAYLOAD_KEYS",
    "LEGACY_CONFIDENCE_EDGES",
    "MAX_NAME_LENGTH",
    "MAX_RETENTION",
    "URL_MASK",
    "CheckOutcome",
    "CheckReference",
    "CheckState",
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
    "IngestFileError",
    "IngestQueue",
    "IngestQueueStats",
    "IngestReport",
    "Knob",
    "LabelArrivals",
    "LabelAttachReport",
    "LabelConflict",
    "LabelRows",
    "LabelledChunk",
    "LabelledFingerprint",
    "LabelledSource",
    "LogPruned",
    "LogWriterStats",
    "NewlyLabelled",
    "PredictionBatch",
    "PredictionLog",
    "PredictionLogExport",
    "PredictionLogWriter",
    "PredictionRecord",
    "PredictionRows",
    "PredictionRowError",
    "PredictionStore",
    "ReliabilityShape",
    "ReweightedWindow",
    "RowRefusal",
    "ScopeEvidence",
    "ScopeReference",
    "SequentialCheck",
    "SequentialState",
    "ServedChunk",
    "ServedTally",
    "ServedSource",
    "StoreScope",
    "TemperatureShiftTest",
    "TestOutcome",
    "Verdict",
    "VersionPruned",
    "WindowChangePoint",
    "WindowInMemory",
    "WindowScan",
    "WindowQuery",
    "WindowSummary",
    "check_version",
    "confidence_profile",
    "configured_tests",
    "credentials_redacted",
    "decide_drift",
    "default_log_url",
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
    "label_csv_rows",
    "label_shift_payload",
    "labelled_mix",
    "holds_masked_credentials",
    "log_predictions",
    "mask_url",
    "merge_summaries",
    "open_prediction_log",
    "policy_knobs",
    "prior_test_numbers",
    "prune_prediction_log",
    "read_as_family",
    "read_label_file",
    "read_prediction_file",
    "redact_credentials",
    "redact_exception",
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
    "window_change_point",
    "window_level",
    "with_stream_checks",
    "write_predictions",
]

# Which module defines each name of __all__ (the imports above, for the run time;
# tests/test_exported_members.py checks that the two and __all__ agree).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "check": ("CheckOutcome", "CheckReference", "CheckState", "check_version"),
    "diagnosis": ("ReweightedWindow", "diagnose_check", "labelled_mix", "read_as_family", "reweight_window"),
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
    "ingest": ("IngestQueue", "IngestQueueStats", "IngestReport", "PredictionBatch", "write_predictions"),
    "in_memory": ("WindowInMemory",),
    "ingest_files": (
        "IngestFileError", "LabelRows", "PredictionRows", "label_csv_rows", "read_label_file", "read_prediction_file"
    ),
    "export": (
        "ExportPartition", "ExportResult", "PredictionLogExport", "export_partitions", "export_prediction_log",
        "summarise_export", "summarise_partition"
    ),
    "log_writer": ("LogWriterStats", "PredictionLogWriter"),
    "policy": ("DEFAULT_POLICY", "DriftPolicy", "Knob", "policy_knobs"),
    "prediction_log": (
        "DEFAULT_STATE_DIR", "MAX_NAME_LENGTH", "LabelledFingerprint", "NewlyLabelled", "PredictionLog",
        "PredictionRecord", "PredictionRowError", "ServedTally",
        "default_log_url",
        "log_predictions", "open_prediction_log"
    ),
    "report": (
        "DRIFT_PAYLOAD_KEYS", "LABEL_SHIFT_PAYLOAD_KEYS", "drift_markdown", "drift_metric_names", "drift_metrics",
        "drift_payload", "drift_table_rows", "group_metric_key", "label_shift_payload", "prior_test_numbers",
        "reliability_figure"
    ),
    "retention": ("LogPruned", "VersionPruned", "prune_prediction_log", "retention_cutoff"),
    "retention_limit": ("MAX_RETENTION",),
    "scan": ("LabelArrivals", "WindowScan", "scan_window"),
    "store": ("LabelAttachReport", "LabelConflict", "LabelledChunk", "PredictionStore", "RowRefusal", "ServedChunk",
              "StoreScope"),
    "sequential": ("SequentialCheck", "SequentialState", "update_sequential"),
    "change_point": ("WindowChangePoint", "window_change_point"),
    "timeouts": ("DEFAULT_SERVING_LOG_TIMEOUT_MS",),
    "urls": ("URL_MASK", "credentials_redacted", "encode_credentials", "holds_masked_credentials", "mask_url",
             "redact_credentials", "redact_exception"),
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
