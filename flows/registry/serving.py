"""Serving that feeds its own monitor: predict with a registered version, log what was served.

:class:`ServedModel` loads one registered version of a calibrated model (resolving an alias
once, so every row it logs names the version that really answered), and
:meth:`ServedModel.predict_and_log` returns exactly what the pyfunc's ``predict`` returns —
softmax(z / T) (re-weighted by a prior correction when the version has one), the class, the
gate decision — while appending to the prediction log the raw logits z, the predicted class,
the confidence and the T in force (:func:`monitoring.log_predictions`). The log's class and
confidence are the checkpoint's at T, without the prior correction: the monitor evaluates the
uncorrected posteriors (docs/deployment.md, "Prior correction"). Labels usually arrive later
(:meth:`monitoring.PredictionLog.attach_labels`); replayed traffic can pass them at once.

The helper asks the wrapped :class:`flows.registry.model.CalibratedCheckpointModel` for the logits it
computes the probabilities from, and builds the response with the same
:func:`flows.registry.model.served_frame` (the calibrated columns, then ``request_id``,
``model_version`` and ``temperature``). It logs synchronously, through a
:class:`monitoring.SynchronousLogWriter`: a batch is in the log when the call returns, unless
it could not be written. Like the pyfunc served by ``mlflow models serve`` (which logs by
itself, in batches from a background thread: :mod:`flows.registry.model`, docs/deployment.md section 5),
it never fails a prediction because of the log: a batch that cannot be written (the database
down, a request id already logged) is counted lost in :attr:`ServedModel.prediction_log_stats`
and reported on the ``thermostat.serving`` logger, and the log is written to again once the
database is back.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from mlflow.pyfunc import PyFuncModel

from flows.registry.model import served_frame
from flows.registry.adapter import MlflowRegistry
from monitoring import LogWriterStats, PredictionLog, SynchronousLogWriter, mask_url

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


@dataclass(frozen=True, slots=True, eq=False)
class ServedModel:
    """One registered version, loaded for serving; logs every prediction it makes.

    ``log_writer`` counts what was logged and what was lost (:attr:`prediction_log_stats`).
    """

    model_name: str
    version: str
    alias: str | None
    model: PyFuncModel
    calibrated: CalibratedModel
    log_writer: SynchronousLogWriter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        writer = SynchronousLogWriter(self.model_name, self.version, self.calibrated.temperature)
        object.__setattr__(self, "log_writer", writer)  # frozen: set once, here

    @classmethod
    def load(cls, model_uri: str, *, registry: MlflowRegistry, cache_dir: Path | None = None) -> ServedModel:
        """Resolve ``model_uri`` to a version (once) and load its calibrated pyfunc."""
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
        return cls(model_name=name, version=version, alias=alias, model=model, calibrated=calibrated)

    @property
    def temperature(self) -> float:
        return self.calibrated.temperature

    @property
    def prediction_log_stats(self) -> LogWriterStats:
        """What :meth:`predict_and_log` logged and lost so far (``rows_dropped`` is the loss)."""
        return self.log_writer.stats

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

        The batch is logged all or nothing, and the response is returned either way: a batch that
        cannot be written (the database unreachable, a request id already in the log, ...) is
        counted lost in :attr:`prediction_log_stats` and reported on the ``thermostat.serving``
        logger (the first loss and every tenth), as the served pyfunc does.

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
        self.log_writer.write(log, logits, ids, groups=groups, time_served=time, labels=labels)
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
    return served.predict_and_log(model_input, request_ids, log, groups=groups, labels=labels, time=time)
