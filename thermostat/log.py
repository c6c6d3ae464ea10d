"""Log served predictions and attach late labels from any Python service: the light client.

Built on :mod:`monitoring` alone (NumPy, SQLAlchemy; no Prefect, no MLflow, no flows), so a
serving process imports it in well under a second:

>>> import numpy as np
>>> from thermostat import log as thermostat_log
>>> plog = thermostat_log.open_log("sqlite://")                              # default: THERMOSTAT_* settings
>>> report = thermostat_log.log_batch(plog, "tickets", "7", 1.37, np.array([[2.0, 0.1, -1.0]]), ["t-1"])
>>> report.written, report.refused
(1, ())
>>> labels = thermostat_log.attach_labels(plog, ["t-1", "t-2"], [0, 2])
>>> labels.attached, labels.unknown_request_ids
(1, ('t-2',))

* :func:`open_log` — the prediction log of ``THERMOSTAT_PREDICTION_LOG_URL`` (default: the
  SQLite file under ``THERMOSTAT_STATE_DIR``), the same log the monitor reads; tables created.
* :func:`log_batch` — one version's served rows (raw logits z and the T in force), written now;
  every row reported (:class:`monitoring.IngestReport`): a bad row is refused alone, a request id
  already logged with the same prediction is ``unchanged`` (resending is safe).
* :func:`attach_labels` — late labels by request id (:class:`monitoring.LabelAttachReport`:
  attached, unchanged, conflicts, unknown ids, refused rows).
* :func:`open_writer` — the same logging off the request path: a background thread writes in
  batches, never raises and never blocks a request (:class:`monitoring.PredictionLogWriter`).

``atomic=True`` makes :func:`log_batch` and :func:`attach_labels` all or nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from numpy.typing import ArrayLike

from monitoring import (
    DEFAULT_STATE_DIR,
    IngestReport,
    LabelAttachReport,
    PredictionBatch,
    PredictionLog,
    PredictionLogWriter,
    default_log_url,
    open_prediction_log,
    write_predictions,
)

__all__ = ["IngestReport", "LabelAttachReport", "PredictionLog", "PredictionLogWriter", "attach_labels",
           "log_batch", "log_rows", "log_url", "open_log", "open_writer"]


def log_url() -> str:
    """The prediction log's URL of the environment: ``THERMOSTAT_PREDICTION_LOG_URL``, else the
    SQLite file in ``THERMOSTAT_STATE_DIR`` (default ``.thermostat``), as the flows resolve it."""
    return os.environ.get("THERMOSTAT_PREDICTION_LOG_URL") or \
        default_log_url(os.environ.get("THERMOSTAT_STATE_DIR") or DEFAULT_STATE_DIR)


def open_log(url: str | None = None) -> PredictionLog:
    """The prediction log at ``url`` (default: :func:`log_url`) for writing, its tables created.

    Call ``dispose()`` on it (or use it as a context manager) when the service stops.
    """
    return open_prediction_log(log_url() if url is None else url)


def log_batch(
    log: PredictionLog, model_name: str, model_version: str, temperature: float, logits: ArrayLike,
    request_ids: Sequence[str], *, groups: Sequence[str | None] | str | None = None,
    time: datetime | Sequence[datetime] | None = None, labels: Sequence[int | None] | None = None,
    atomic: bool = False,
) -> IngestReport:
    """Write one version's served rows now: ``logits`` of shape (n, K), the raw logits z the
    response was computed from, one request id per row, the T in force. The predicted class and
    confidence are computed as served (softmax(z / T)). Every row is reported; a bad one is
    refused alone (``atomic``: nothing is written then)."""
    batch = PredictionBatch.from_arrays(model_name, model_version, temperature, logits, request_ids, groups=groups,
                                        time=time, labels=labels)
    return write_predictions(log, batch, atomic=atomic)


def log_rows(log: PredictionLog, rows: Sequence[object], *, defaults: dict[str, object] | None = None,
             atomic: bool = False) -> IngestReport:
    """Write rows of any versions, each a mapping as the ingestion service reads them
    (``model_name``, ``model_version``, ``temperature``, ``request_id``, ``logits``, optionally
    ``group``, ``served_at``, ``label``; ``defaults`` for the rows without them)."""
    return write_predictions(log, PredictionBatch.from_rows(rows, defaults=defaults), atomic=atomic)


def attach_labels(log: PredictionLog, request_ids: Sequence[str], labels: ArrayLike, *,
                  labelled_at: datetime | None = None, atomic: bool = False) -> LabelAttachReport:
    """Attach late labels by request id; every row reported, a bad one refused alone (``atomic``:
    all or nothing, a refused row raises ``ValueError``)."""
    return log.attach_labels(request_ids, labels, labelled_at=labelled_at, strict=atomic)


def open_writer(model_name: str, model_version: str, temperature: float, *, url: str | None = None,
                **options: Any) -> PredictionLogWriter:
    """A background writer of one served version (:class:`monitoring.PredictionLogWriter`: batches
    from a thread, a bounded queue, losses counted and never raised) to the log at ``url``
    (default: :func:`log_url`); ``submit(logits, request_ids, groups)`` on each request."""
    return PredictionLogWriter(open_log(url), model_name, model_version, temperature, **options)
