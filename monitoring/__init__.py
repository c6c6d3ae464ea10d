"""Reading recent labelled traffic, windowing, the drift decision and its reports. No Prefect.

The pieces, in the order a monitor uses them:

* :class:`PredictionLog` — the prediction log table in any SQLAlchemy database (SQLite by
  default); :func:`log_predictions` lets a serving wrapper feed it.
* :func:`summarise_window` — a version's labelled traffic in a time window, read in chunks,
  merged into mergeable statistics overall and per group, plus the gate's counts.
* :func:`decide_drift` — the verdict (``insufficient_data`` / ``drift`` / ``ok``) with its
  reasons; :func:`diagnose_reliability_shape` — can one temperature fix what is left?
* :func:`reliability_figure`, :func:`drift_markdown`, :func:`drift_table_rows`,
  :func:`drift_metrics`, :func:`drift_payload` — outputs for dashboards and events.
* :func:`mask_url` — a URL as it may be shown or stored (its password masked).
"""

from __future__ import annotations

from .drift import DriftReport, GroupDrift, ReliabilityShape, Verdict, decide_drift, diagnose_reliability_shape
from .prediction_log import (
    MAX_NAME_LENGTH,
    LabelAttachReport,
    LabelConflict,
    LabelledChunk,
    PredictionLog,
    PredictionRecord,
    PredictionRowError,
    log_predictions,
)
from .report import drift_markdown, drift_metrics, drift_payload, drift_table_rows, reliability_figure
from .urls import URL_MASK, mask_url
from .window import GateCounts, WindowSummary, summarise_arrays, summarise_window

__all__ = [
    "MAX_NAME_LENGTH",
    "URL_MASK",
    "DriftReport",
    "GateCounts",
    "GroupDrift",
    "LabelAttachReport",
    "LabelConflict",
    "LabelledChunk",
    "PredictionLog",
    "PredictionRecord",
    "PredictionRowError",
    "ReliabilityShape",
    "Verdict",
    "WindowSummary",
    "decide_drift",
    "diagnose_reliability_shape",
    "drift_markdown",
    "drift_metrics",
    "drift_payload",
    "drift_table_rows",
    "log_predictions",
    "mask_url",
    "reliability_figure",
    "summarise_arrays",
    "summarise_window",
]
