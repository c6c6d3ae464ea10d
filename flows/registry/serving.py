"""Serving that feeds its own monitor: predict with a registered version, log what was served.

:class:`ServedModel` loads one registered version of a calibrated model (resolving an alias
once, so every row it logs names the version that really answered), and
:meth:`ServedModel.predict_and_log` returns exactly what the pyfunc's ``predict`` returns —
softmax(z / T) (re-weighted by a prior correction when the version has one), the class, the
gate decision — while appending to the prediction log the raw logits z, the predicted class,
the confidence and the T in force (:func:`monitoring.log_predictions`). The log's class and
confidence are the checkpoint's at T, without the prior correction: the monitor evaluates the
uncorrected posteriors (docs/refit.md, "correct-priors"). Labels usually arrive later
(:meth:`monitoring.PredictionLog.attach_labels`); replayed traffic can pass them at once.

The helper asks the wrapped :class:`flows.registry.model.CalibratedCheckpointModel` for the logits it
computes the probabilities from, and builds the response with the same
:func:`flows.registry.model.served_frame` (the calibrated columns, then ``request_id``,
``model_version`` and ``temperature``). It logs through the writer the pyfunc served by
``mlflow models serve`` uses (:class:`monitoring.PredictionLogWriter`: :mod:`flows.registry.model`,
docs/serving.md), one per prediction log, and waits for its batch: a batch is in
the log when the call returns, unless it could not be written **within** ``log_timeout``
seconds (the setting ``serving_log_timeout_ms``, default
:data:`monitoring.DEFAULT_SERVING_LOG_TIMEOUT_MS`). The writer writes through a copy of the log
whose connections and statements are bounded by the same timeout
(:meth:`monitoring.PredictionLog.with_timeout`). So a database that hangs — a network that
swallows packets, a paused server — delays a prediction by about ``log_timeout`` at most, and
a prediction never fails because of the log: a batch that cannot be written (the database
down or hanging, a request id already logged) is counted lost in
:attr:`ServedModel.prediction_log_stats` (a batch whose write was under way when the time ran
out is counted when that write ends) and reported on the ``thermostat.serving`` logger, and the
log is written to again once the database is back.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from threading import Lock
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from mlflow.pyfunc import PyFuncModel

from flows.registry.model import served_frame
from flows.registry.adapter import MlflowRegistry
from monitoring import DEFAULT_SERVING_LOG_TIMEOUT_MS, LogWriterStats, PredictionLog, PredictionLogWriter, mask_url

__all__ = ["CalibratedModel", "ServedModel", "parse_model_uri", "predict_and_log"]

_MODEL_URI = re.compile(r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/]+)|/(?P<version>\d+))$")


def parse_model_uri(model_uri: str) -> tuple[str, str | None, str | None]:
    """``models:/NAME@ALIAS`` or ``models:/NAME/VERSION`` -> (name, alias, version).

    Examples
    --------
    >>> parse_model_uri("models:/digits@champion")
    ('digits', 'champion', None)
    >>> parse_model_uri("models:/digits/3")
    ('digits', None, '3')
    """
    match = _MODEL_URI.match(model_uri)
    if match is None:
        raise ValueError(
            f"model_uri {model_uri!r} must name a registered version: models:/NAME@ALIAS or models:/NAME/VERSION "
            "(the prediction log records the model name and version of every row)"
        )
    return match["name"], match["alias"], match["version"]


@runtime_checkable
class CalibratedModel(Protocol):
    """What the helper needs from the wrapped :class:`flows.registry.model.CalibratedCheckpointModel`.

    A structural type: a model from code is loaded from the copy of ``flows/registry/model.py`` logged
    with the version, so its class is not the one imported here.
    """

    @property
    def temperature(self) -> float: ...

    @property
    def gate_threshold(self) -> float | None: ...

    def raw_logits(self, model_input: Any) -> Any: ...


class _LogWriters:
    """The writers of one served version, one per prediction log it was given (usually one), each
    writing through a copy of its log bounded by ``timeout`` seconds."""

    def __init__(self, model_name: str, version: str, temperature: float, timeout: float) -> None:
        self._served = (model_name, version, temperature)
        self._timeout = timeout
        self._lock = Lock()
        self._writers: dict[int, tuple[PredictionLog, PredictionLogWriter]] = {}

    def of(self, log: PredictionLog) -> PredictionLogWriter:
        with self._lock:
            known = self._writers.get(id(log))
            if known is None:
                bounded = log if log.timeout == self._timeout else log.with_timeout(self._timeout)
                known = self._writers[id(log)] = (log, PredictionLogWriter(bounded, *self._served))
            return known[1]

    @property
    def stats(self) -> LogWriterStats:
        with self._lock:
            every = [writer.stats for _, writer in self._writers.values()]
        return LogWriterStats(
            rows_submitted=sum(s.rows_submitted for s in every), rows_written=sum(s.rows_written for s in every),
            rows_dropped=sum(s.rows_dropped for s in every), pending_rows=sum(s.pending_rows for s in every),
            batches_written=sum(s.batches_written for s in every), loss_events=sum(s.loss_events for s in every),
            last_error=next((s.last_error for s in reversed(every) if s.last_error), None),
            closed=bool(every) and all(s.closed for s in every),
        )  # fmt: skip

    def close(self, timeout: float | None) -> None:
        with self._lock:
            writers = [writer for _, writer in self._writers.values()]
        for writer in writers:
            writer.close(timeout)


@dataclass(frozen=True, slots=True, eq=False)
class ServedModel:
    """One registered version, loaded for serving; logs every prediction it makes.

    ``log_timeout`` (seconds, default :data:`monitoring.DEFAULT_SERVING_LOG_TIMEOUT_MS`) bounds
    how long a prediction waits for its log (:meth:`predict_and_log`). What was logged and lost
    is counted in :attr:`prediction_log_stats`.
    """

    model_name: str
    version: str
    alias: str | None
    model: PyFuncModel
    calibrated: CalibratedModel
    log_timeout: float = DEFAULT_SERVING_LOG_TIMEOUT_MS / 1000
    log_writers: _LogWriters = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.log_timeout, bool) or not isinstance(self.log_timeout, (int, float)) or not (
            0 < self.log_timeout < float("inf")
        ):
            raise ValueError(f"log_timeout must be a finite number of seconds > 0; got {self.log_timeout!r} "
                             "(THERMOSTAT_SERVING_LOG_TIMEOUT_MS is in milliseconds)")
        writers = _LogWriters(self.model_name, self.version, self.calibrated.temperature, float(self.log_timeout))
        object.__setattr__(self, "log_writers", writers)  # frozen: set once, here

    @classmethod
    def load(
        cls, model_uri: str, *, registry: MlflowRegistry, cache_dir: Path | None = None,
        log_timeout: float = DEFAULT_SERVING_LOG_TIMEOUT_MS / 1000,
    ) -> ServedModel:
        """Resolve ``model_uri`` to a version (once) and load its calibrated pyfunc; its predictions
        wait at most ``log_timeout`` seconds for the log (``settings.serving_log_timeout_ms / 1000``)."""
        name, alias, version = parse_model_uri(model_uri)
        if alias is not None:
            holder = registry.alias_holder(name, alias)
            if holder is None:
                raise LookupError(f"{name}@{alias} does not exist in {mask_url(registry.registry_uri)}")
            version = str(holder.version)
        assert version is not None  # one of alias and version is set by the pattern
        if cache_dir is None:
            # Everything is in memory once loaded (load_context loads the checkpoint), so the files can go.
            with tempfile.TemporaryDirectory(prefix="thermostat-serve-") as tmp:
                model = registry.load_version_model(name, version, Path(tmp) / f"{name}-v{version}")
        else:
            model = registry.load_version_model(name, version, cache_dir / f"{name}-v{version}")
        calibrated = model.unwrap_python_model()  # type: ignore[no-untyped-call]
        if not isinstance(calibrated, CalibratedModel):
            raise TypeError(
                f"{name} version {version} is not a calibrated Thermostat model with raw_logits (got "
                f"{type(calibrated).__name__}); register it with the post-finetune flow"
            )
        return cls(model_name=name, version=version, alias=alias, model=model, calibrated=calibrated,
                   log_timeout=log_timeout)

    @property
    def temperature(self) -> float:
        return self.calibrated.temperature

    @property
    def prediction_log_stats(self) -> LogWriterStats:
        """What :meth:`predict_and_log` logged and lost so far (``rows_dropped`` is the loss;
        ``pending_rows``: a write still under way)."""
        return self.log_writers.stats

    def close_prediction_log(self, timeout: float | None = None) -> None:
        """Write what is still pending (waiting at most ``timeout`` seconds, default 10) and stop
        the log writers (also done at interpreter exit)."""
        self.log_writers.close(timeout)

    def predict_and_log(
        self,
        model_input: Any,
        request_ids: Sequence[str],
        log: PredictionLog,
        *,
        groups: Sequence[str | None] | str | None = None,
        labels: ArrayLike | None = None,
        time: datetime | Sequence[datetime] | None = None,
    ) -> pd.DataFrame:
        """Predict (same frame as the pyfunc's ``predict`` given these request ids) and append the
        batch to ``log``.

        The batch is logged all or nothing, and the response is returned either way, after at most
        about ``log_timeout`` seconds of waiting for the log: a batch that cannot be written (the
        database unreachable or hanging, a request id already in the log, ...) is counted lost in
        :attr:`prediction_log_stats` and reported on the ``thermostat.serving`` logger (the first
        loss and every tenth), as the served pyfunc does; one whose write is still under way when
        the time is up is counted when that write ends.

        Raises
        ------
        ValueError
            If ``request_ids`` does not hold one id per row of the model's output (no response
            can name its rows).
        """
        logits = np.asarray(self.calibrated.raw_logits(model_input), dtype=np.float64)
        ids = [request_ids] if isinstance(request_ids, str) else list(request_ids)
        if len(ids) != logits.shape[0]:
            raise ValueError(
                f"request_ids has {len(ids)} entries but the model answered {logits.shape[0]} rows; give one id per row"
            )
        # A version registered before prior corrections existed has no such attribute (its own model.py).
        weights = getattr(self.calibrated, "prior_log_weights", None)
        frame = served_frame(logits, self.calibrated.temperature, self.calibrated.gate_threshold,
                             request_ids=ids, model_version=self.version, prior_log_weights=weights)
        self.log_writers.of(log).write(logits, ids, groups, time, labels=labels, timeout=self.log_timeout)
        return frame


def predict_and_log(
    model_uri: str,
    model_input: Any,
    request_ids: Sequence[str],
    log: PredictionLog,
    groups: Sequence[str | None] | str | None = None,
    *,
    registry: MlflowRegistry,
    labels: ArrayLike | None = None,
    time: datetime | Sequence[datetime] | None = None,
) -> pd.DataFrame:
    """Load ``model_uri``, predict ``model_input`` and log the batch (one-shot; a server keeps a
    :class:`ServedModel` instead of loading per request)."""
    served = ServedModel.load(model_uri, registry=registry)
    try:
        return served.predict_and_log(model_input, request_ids, log, groups=groups, labels=labels, time=time)
    finally:
        served.close_prediction_log(served.log_timeout)
