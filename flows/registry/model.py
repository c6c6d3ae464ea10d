"""The calibrated pyfunc: a checkpoint's MLflow model with its temperature and gate applied.

This file is logged as an MLflow "model from code" (it ends in ``set_model``), so the
registered artifact carries this source instead of a cloud-pickled object — a version keeps
the code it was registered with. It imports only numpy, pandas and mlflow, so the served model
does not need Thermostat installed; only logging predictions (below) needs its ``monitoring``
package (and SQLAlchemy) in the serving environment, e.g. ``mlflow models serve
--env-manager local`` from Thermostat's virtualenv.

``context.model_config`` holds, and so the registered version carries:

- ``temperature`` — T > 0; the served probabilities are softmax(z / T) (the arg-max never changes);
- ``prior_correction`` — ``None``, or ``{"priors": [...], "reference_priors": [...]}`` (K each,
  every one > 0; each normalised here): a label-shift fix. The served probabilities are then
  softmax(z / T) re-weighted by priors / reference_priors and renormalised, computed in log space
  as log_softmax(z / T) + log(priors / reference_priors), renormalised by its logsumexp (the
  arithmetic of ``calibration.prior_corrected_log_probabilities``). The class is the arg-max of
  the corrected probabilities (a re-weighting can change it) and the confidence its probability.
  The prediction log keeps the raw logits, and its class and confidence columns stay the
  checkpoint's at T: the monitor evaluates the uncorrected posteriors (docs/refit.md);
- ``gate_threshold`` — auto-process when the calibrated confidence >= it; ``None`` sends
  everything to review (no threshold met the target accuracy);
- ``checkpoint_output`` — ``"logits"`` or ``"probabilities"``: what the checkpoint's
  ``predict`` returns. Probabilities become logits through their log (softmax is
  shift-invariant per row);
- ``registered_model_name``, ``registered_model_version`` (saved as ``None``) and
  ``log_predictions`` (saved ``True``): load-time switches (:data:`SERVING_CONFIG`), set
  through ``mlflow.pyfunc.load_model(..., model_config=...)`` or MLflow's
  ``SERVING_MODEL_CONFIG`` variable. MLflow overrides only keys a version was saved with.

Input and output
----------------
``predict`` takes the checkpoint's input, parsed by MLflow against this model's signature
(:func:`flows.registry.adapter.calibrated_signature`: the checkpoint's own input schema when it
names its columns or is a tensor; none when it has no signature or unnamed columns) and two
optional request fields, which never reach the checkpoint:

- ``request_id`` (str; a uuid4 is generated for a row without one) and ``group`` (str or null);
- as columns of a column input (``dataframe_split``, ``dataframe_records``, ``instances`` as
  records, ``inputs`` as a dict of columns), or as ``params`` (``{"request_id": [...],
  "group": [...]}``: one per row; a ``group`` of one value applies to every row). A tensor input
  (``inputs``/``instances`` as arrays) carries them only as ``params``; giving one both ways is
  refused.

What is left is handed to the checkpoint in the form its signature takes (:func:`checkpoint_input`),
the same conversion the registration scored the holdout with. It returns a DataFrame with one row
per input row: ``class``, ``confidence``, ``decision`` (``"auto"``/``"review"``),
``prob_0`` ... ``prob_{K-1}``, then ``request_id`` (given or generated: the id to attach the
label to), ``model_version`` (the registered version that answered; null when unknown) and
``temperature`` (the T in force). A checkpoint that answers another number of rows than it was
given is refused with an error (HTTP 400), never answered.

Which version am I?
-------------------
The name and version come from ``model_config`` when set, else from the
``registered_model_meta`` file MLflow writes into a model it downloads through a
``models:/NAME@ALIAS`` or ``models:/NAME/VERSION`` URI (``mlflow models serve -m
models:/digits@champion`` resolves the alias once, downloads that version and records it
there). Loaded from a path or a ``runs:/`` URI, the version is unknown: the response's
``model_version`` is null and nothing is logged.

Logging what is served
----------------------
When the environment variable ``THERMOSTAT_PREDICTION_LOG_URL`` (the settings' prediction log
URL) is set at load time, ``log_predictions`` is true and the version is known, every
prediction is logged (raw logits, class, confidence, T, request id, group, serving time) by a
:class:`monitoring.PredictionLogWriter`: in batches from a background thread, flushed every
``THERMOSTAT_SERVING_LOG_BATCH_ROWS`` rows (default 256) or ``THERMOSTAT_SERVING_LOG_FLUSH_MS``
milliseconds (default 250) and at interpreter exit, with at most
``THERMOSTAT_SERVING_LOG_MAX_PENDING_ROWS`` rows waiting (default 10000); its database
connections and statements are bounded by ``THERMOSTAT_SERVING_LOG_TIMEOUT_MS`` (default 2000:
``monitoring.DEFAULT_SERVING_LOG_TIMEOUT_MS``). A logging failure
never fails a prediction: the rows are counted lost (:attr:`CalibratedCheckpointModel.prediction_log_stats`)
and reported in the server's log (first loss, every tenth, at exit). uvicorn ends a graceful
shutdown by re-raising ``SIGTERM`` with the default handler, so ``atexit`` never runs there: the
pyfunc's ``SIGTERM`` handler drains the writer (writes what is queued; later rows are written
before their response returns), then hands the signal on. If logging is asked for but
impossible (unknown version, ``monitoring`` not importable, a malformed URL), the model serves
anyway, says why at load, and counts every row it serves as lost.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models import set_model
from mlflow.pyfunc.model import PythonModel, PythonModelContext
from mlflow.types import DataType, Schema

if TYPE_CHECKING:
    from monitoring import LogWriterStats

__all__ = [
    "CHECKPOINT_ARTIFACT",
    "GROUP_COLUMN",
    "LOG_URL_VARIABLE",
    "REGISTERED_MODEL_META",
    "REQUEST_FIELDS",
    "REQUEST_ID_COLUMN",
    "SERVING_CONFIG",
    "CalibratedCheckpointModel",
    "calibrated_frame",
    "checkpoint_input",
    "parse_prior_correction",
    "request_fields",
    "served_frame",
]

CHECKPOINT_ARTIFACT = "checkpoint"
REQUEST_ID_COLUMN = "request_id"
GROUP_COLUMN = "group"
REQUEST_FIELDS = (REQUEST_ID_COLUMN, GROUP_COLUMN)
"""Thermostat's own request fields: taken off every input (columns, dict keys or ``params``)."""
LOG_URL_VARIABLE = "THERMOSTAT_PREDICTION_LOG_URL"
REGISTERED_MODEL_META = "registered_model_meta"
"""The file MLflow writes beside ``MLmodel`` when it downloads a ``models:/`` URI (name, version)."""
SERVING_CONFIG: dict[str, Any] = {"registered_model_name": None, "registered_model_version": None,
                                  "log_predictions": True}
"""``model_config`` keys a version is saved with so that they can be set at load time."""

_BATCH_ROWS_VARIABLE = "THERMOSTAT_SERVING_LOG_BATCH_ROWS"
_FLUSH_MS_VARIABLE = "THERMOSTAT_SERVING_LOG_FLUSH_MS"
_MAX_PENDING_VARIABLE = "THERMOSTAT_SERVING_LOG_MAX_PENDING_ROWS"
_TIMEOUT_MS_VARIABLE = "THERMOSTAT_SERVING_LOG_TIMEOUT_MS"
_REPORT_EVERY = 10
_logger = logging.getLogger("thermostat.serving")


def calibrated_frame(
    logits: np.ndarray[Any, Any], temperature: float, gate_threshold: float | None,
    prior_log_weights: np.ndarray[Any, Any] | None = None,
) -> pd.DataFrame:
    """Class, calibrated confidence, gate decision and probabilities from frozen logits.

    Same arithmetic as ``calibration._softmax.softmax``: subtract the row maximum, divide
    by T, exponentiate, normalise, in float64. With ``prior_log_weights`` (log π' − log π, one
    per class: a prior correction) the same as ``calibration.prior_corrected_log_probabilities``:
    the log-softmax at T plus the log-weights, less their row logsumexp, then exponentiated.
    """
    shifted = (logits - logits.max(axis=1, keepdims=True)).astype(np.float64, copy=False) / temperature
    if prior_log_weights is None:
        probabilities = np.exp(shifted)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        predicted = logits.argmax(axis=1)
    else:
        log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True)) + prior_log_weights
        top = log_probabilities.max(axis=1, keepdims=True)
        log_probabilities -= top + np.log(np.exp(log_probabilities - top).sum(axis=1, keepdims=True))
        probabilities = np.exp(log_probabilities)
        predicted = probabilities.argmax(axis=1)
    confidence = probabilities[np.arange(logits.shape[0]), predicted]
    if gate_threshold is None:
        decision = np.full(logits.shape[0], "review", dtype=object)
    else:
        decision = np.where(confidence >= gate_threshold, "auto", "review").astype(object)
    frame = pd.DataFrame({"class": predicted.astype(np.int64), "confidence": confidence, "decision": decision})
    for k in range(probabilities.shape[1]):
        frame[f"prob_{k}"] = probabilities[:, k]
    return frame


def served_frame(
    logits: np.ndarray[Any, Any], temperature: float, gate_threshold: float | None, *,
    request_ids: Sequence[str], model_version: str | None, prior_log_weights: np.ndarray[Any, Any] | None = None,
) -> pd.DataFrame:
    """The pyfunc's response: :func:`calibrated_frame`, then ``request_id``, ``model_version``, ``temperature``."""
    frame = calibrated_frame(logits, temperature, gate_threshold, prior_log_weights)
    frame[REQUEST_ID_COLUMN] = np.asarray(request_ids, dtype=object)
    frame["model_version"] = np.full(logits.shape[0], model_version, dtype=object)
    frame["temperature"] = np.full(logits.shape[0], float(temperature))
    return frame


def parse_prior_correction(config: Any) -> np.ndarray[Any, Any] | None:
    """log π' − log π of a ``model_config`` ``prior_correction`` (None: no correction), each list
    normalised; a ValueError names what is wrong (this file cannot import ``calibration``).

    >>> parse_prior_correction({"priors": [0.8, 0.2], "reference_priors": [1, 1]}).round(4).tolist()
    [0.47, -0.9163]
    """
    if config is None:
        return None
    if not isinstance(config, dict) or set(config) != {"priors", "reference_priors"}:
        raise ValueError(f"model_config prior_correction must be None or {{'priors': [...], 'reference_priors': "
                         f"[...]}}; got {config!r}")
    priors, reference = (np.asarray(config[key], dtype=np.float64) for key in ("priors", "reference_priors"))
    if priors.ndim != 1 or priors.shape != reference.shape or priors.shape[0] < 2:
        raise ValueError(f"model_config prior_correction: priors and reference_priors must be two lists of one prior "
                         f"per class (at least 2); got shapes {priors.shape} and {reference.shape}")
    if not (np.isfinite(priors).all() and np.isfinite(reference).all() and (priors > 0).all() and (reference > 0).all()):
        raise ValueError(f"model_config prior_correction: every prior must be finite and > 0; got {config!r}")
    log_weights: np.ndarray[Any, Any] = np.log(priors / priors.sum()) - np.log(reference / reference.sum())
    return log_weights


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _bad_request(message: str) -> MlflowException:
    """An error MLflow's scoring server answers with HTTP 400 and this message."""
    error: MlflowException = MlflowException.invalid_parameter_value(message)
    return error


def _taken_off(model_input: Any) -> tuple[Any, dict[str, list[object]]]:
    """``model_input`` without the request fields, and the fields' values, from the columns of a
    DataFrame or the keys of a dict (what MLflow makes of ``inputs``/``instances`` with columns)."""
    if isinstance(model_input, pd.DataFrame):
        present = [name for name in REQUEST_FIELDS if name in model_input.columns]
        return model_input.drop(columns=present), {name: model_input[name].tolist() for name in present}
    if isinstance(model_input, dict):
        fields = {name: list(np.ravel(np.asarray(model_input[name], dtype=object))) for name in REQUEST_FIELDS
                  if name in model_input}
        return {key: value for key, value in model_input.items() if key not in fields}, fields
    return model_input, {}


def request_fields(
    model_input: Any, params: dict[str, Any] | None = None
) -> tuple[Any, list[object] | None, list[str | None] | None]:
    """``model_input`` without the ``request_id``/``group`` fields, and those fields' values.

    The fields are taken from the columns of a DataFrame, the keys of a dict, or ``params``
    (``{"request_id": [...], "group": [...]}``; an empty list is "not given"). Missing values
    stay ``None`` (a request id is generated for them later). A field given both as a column
    and in ``params`` is refused (HTTP 400 when served).

    Examples
    --------
    >>> frame = pd.DataFrame({"x": [1.0, 2.0], "request_id": ["a", None], "group": ["web", None]})
    >>> features, ids, groups = request_fields(frame)
    >>> list(features.columns), ids, groups
    (['x'], ['a', None], ['web', None])
    >>> request_fields(np.zeros((2, 3)), {"request_id": ["a", "b"], "group": ["app"]})[1:]
    (['a', 'b'], ['app'])
    """
    features, fields = _taken_off(model_input)
    for name in REQUEST_FIELDS:
        given = (params or {}).get(name)
        if given is None or len(given) == 0:
            continue
        if name in fields:
            raise _bad_request(f"{name!r} is given both as an input column and in params; give it once")
        fields[name] = list(given)
    ids = fields.get(REQUEST_ID_COLUMN)
    groups = fields.get(GROUP_COLUMN)
    return (features, None if ids is None else [None if _is_missing(value) else value for value in ids],
            None if groups is None else [None if _is_missing(value) else str(value) for value in groups])


def _rows(model_input: Any) -> int | None:
    """How many examples ``model_input`` holds (None: not known from its type)."""
    if isinstance(model_input, dict):
        values = [np.asarray(value) for value in model_input.values()]
        return None if not values or values[0].ndim == 0 else len(values[0])
    if isinstance(model_input, (pd.DataFrame, list)):
        return len(model_input)
    array = np.asarray(model_input)
    return None if array.ndim == 0 else int(array.shape[0])


def _as_array(model_input: Any) -> np.ndarray[Any, Any]:
    """A DataFrame or dict of columns as an array: one column -> its values (1-D), several -> 2-D."""
    if isinstance(model_input, dict):
        model_input = pd.DataFrame({key: list(np.asarray(value)) for key, value in model_input.items()})
    if isinstance(model_input, pd.DataFrame):
        return model_input.iloc[:, 0].to_numpy() if model_input.shape[1] == 1 else model_input.to_numpy()
    return np.asarray(model_input)


def checkpoint_input(model_input: Any, schema: Schema | None) -> Any:
    """``model_input`` in the form a checkpoint with input ``schema`` was logged to take.

    - named columns: a DataFrame with those columns (an array's columns by position, each cast
      to its column's type);
    - one unnamed tensor: an array of the tensor's dtype (numbers are cast: JSON numbers are
      parsed as float64 and int64);
    - unnamed columns (a signature inferred from a list): a list, one value (or row) per example;
    - no signature: an array (a single column as a 1-D array: a text pipeline iterates a
      DataFrame's column names, not its rows).

    The registration scores the holdout's features through it and the served model the parsed
    request, so both reach the checkpoint in the same form.

    Examples
    --------
    >>> from mlflow.types import ColSpec, Schema, TensorSpec
    >>> checkpoint_input(np.array([[1, 2], [3, 4]]), Schema([ColSpec("double", "a"), ColSpec("double", "b")]))
         a    b
    0  1.0  2.0
    1  3.0  4.0
    >>> checkpoint_input([[0.5, 1.0]], Schema([TensorSpec(np.dtype("float32"), (-1, 2))])).dtype
    dtype('float32')
    >>> checkpoint_input(pd.DataFrame({"text": ["good", "bad"]}), None)
    array(['good', 'bad'], dtype=object)
    """
    # C order, as the holdout's array: a DataFrame's values come out column-major, and float32
    # kernels (a matrix product) round differently on another memory layout.
    if schema is None:
        return np.ascontiguousarray(_as_array(model_input))
    if schema.is_tensor_spec():
        if isinstance(model_input, dict):
            return model_input
        array = np.ascontiguousarray(_as_array(model_input))
        spec_type = schema.inputs[0].type
        if isinstance(spec_type, np.dtype) and spec_type.kind in "biuf" and array.dtype != spec_type:
            return array.astype(spec_type)
        return array
    if not schema.has_input_names():
        return _as_array(model_input).tolist()
    if isinstance(model_input, pd.DataFrame):
        return model_input
    if isinstance(model_input, dict):
        return pd.DataFrame(model_input)
    array = np.asarray(model_input)
    names = schema.input_names()
    table = array.reshape(len(array), -1)
    if table.shape[1] != len(names):
        raise ValueError(f"the input has {table.shape[1]} value(s) per example but the checkpoint's signature names "
                         f"{len(names)} column(s) {names}; give one value per column, in that order")
    types = [spec.type for spec in schema.inputs]
    return pd.DataFrame({name: table[:, j].astype(kind.to_pandas()) if isinstance(kind, DataType) else table[:, j]
                         for j, (name, kind) in enumerate(zip(names, types, strict=True))})


def _request_ids(given: list[object] | None, n_rows: int) -> list[str]:
    """The given ids as str, with a uuid4 for every row that has none."""
    if given is None:
        return [str(uuid.uuid4()) for _ in range(n_rows)]
    return [str(uuid.uuid4()) if value is None else str(value) for value in given]


def _model_root(context: PythonModelContext) -> Path | None:
    """The folder of this model's ``MLmodel``: the first one above the checkpoint artifact."""
    checkpoint = context.artifacts.get(CHECKPOINT_ARTIFACT)
    if checkpoint is None:
        return None
    for folder in list(Path(checkpoint).parents)[:3]:
        if (folder / "MLmodel").is_file():
            return folder
    return None


def _registered_identity(config: dict[str, Any], context: PythonModelContext) -> tuple[str | None, str | None]:
    """(name, version) of the registered version this model is: ``model_config`` first, then the
    ``registered_model_meta`` file of a ``models:/`` download; ``(None, None)`` when unknown."""
    name, version = config.get("registered_model_name"), config.get("registered_model_version")
    if name is not None and version is not None:
        return str(name), str(version)
    root = _model_root(context)
    meta = None if root is None else root / REGISTERED_MODEL_META
    if meta is None or not meta.is_file():
        return None, None
    import yaml

    try:
        content = yaml.safe_load(meta.read_text())
    except (OSError, yaml.YAMLError) as error:
        _logger.warning("cannot read %s (%s): the registered version of this model is unknown", meta, error)
        return None, None
    if not isinstance(content, dict) or content.get("model_name") is None or content.get("model_version") is None:
        return None, None
    return str(content["model_name"]), str(content["model_version"])


class _Writer(Protocol):
    def submit(self, logits: Any, request_ids: Sequence[str], groups: Sequence[str | None] | None = None,
               time_served: datetime | None = None) -> bool: ...

    def flush(self, timeout: float | None = 10.0) -> bool: ...

    def close(self, timeout: float | None = None) -> Any: ...

    @property
    def stats(self) -> Any: ...


class _NotLogged:
    """Stands in for the writer when logging was asked for but cannot work: counts every row lost."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.rows = 0
        self.events = 0
        self.closed = False
        _logger.warning("predictions will NOT be logged: %s", reason)
        import atexit

        atexit.register(self.close)

    def submit(self, logits: Any, request_ids: Sequence[str], groups: Sequence[str | None] | None = None,
               time_served: datetime | None = None) -> bool:
        self.rows += len(request_ids)
        self.events += 1
        if self.events == 1 or self.events % _REPORT_EVERY == 0:
            _logger.warning("predictions are NOT logged (%s): %d row(s) lost since start", self.reason, self.rows)
        return False

    def flush(self, timeout: float | None = 10.0) -> bool:
        return True

    def close(self, timeout: float | None = None) -> dict[str, Any]:
        import atexit

        atexit.unregister(self.close)
        if self.rows and not self.closed:
            _logger.warning("predictions were NOT logged (%s): %d row(s) lost", self.reason, self.rows)
        self.closed = True
        return self.stats

    @property
    def stats(self) -> dict[str, Any]:
        return {"rows_submitted": self.rows, "rows_written": 0, "rows_dropped": self.rows, "pending_rows": 0,
                "batches_written": 0, "loss_events": self.events, "last_error": self.reason, "closed": self.closed}


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        _logger.warning("%s=%r is not an integer >= 1; using %d", name, value, default)
        return default
    return number


def _show_serving_logs() -> None:
    """Let the serving log's lines reach stderr in a server that configured no logging (uvicorn
    configures only its own loggers): INFO and above, with time and level."""
    if _logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    _logger.addHandler(handler)
    _logger.setLevel(logging.INFO)


def _drain_on_termination(writer: Any) -> None:
    """On ``SIGTERM``, write what is queued and log later predictions synchronously, then let the
    previous handler act (uvicorn's graceful shutdown; by default, termination).

    uvicorn (behind ``mlflow models serve``) answers ``SIGTERM`` by finishing its requests and
    then re-raising the signal with the default handler, so the process ends without running
    :mod:`atexit`: the writer must have written everything by then.
    """
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may install signal handlers; atexit still flushes
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        try:
            writer.drain()
        except Exception as error:  # pragma: no cover - stopping must never fail on the log
            _logger.warning("draining the prediction log failed: %s: %s", type(error).__name__, error)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL or previous is None:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    try:
        signal.signal(signal.SIGTERM, on_sigterm)
    except (ValueError, OSError) as error:  # pragma: no cover - e.g. an embedded interpreter
        _logger.warning("cannot watch SIGTERM (%s): predictions queued when the process is killed may be lost", error)


def _start_writer(url: str, name: str | None, version: str | None, temperature: float) -> _Writer:
    _show_serving_logs()
    if name is None or version is None:
        return _NotLogged(
            f"{LOG_URL_VARIABLE} is set but the registered name and version of this model are unknown: serve it "
            "as models:/NAME@ALIAS (or models:/NAME/VERSION), or set registered_model_name and "
            "registered_model_version in SERVING_MODEL_CONFIG"
        )
    try:
        from monitoring import (DEFAULT_SERVING_LOG_TIMEOUT_MS, PredictionLog, PredictionLogWriter, mask_url,
                                redact_credentials)
    except ImportError as error:
        return _NotLogged(f"{LOG_URL_VARIABLE} is set but Thermostat's monitoring package cannot be imported "
                          f"({error}); serve from an environment with Thermostat installed (--env-manager local)")
    try:
        writer = PredictionLogWriter(
            PredictionLog(url, timeout=_env_int(_TIMEOUT_MS_VARIABLE, DEFAULT_SERVING_LOG_TIMEOUT_MS) / 1000),
            name, version, temperature,
            batch_rows=_env_int(_BATCH_ROWS_VARIABLE, 256),
            flush_interval=_env_int(_FLUSH_MS_VARIABLE, 250) / 1000.0,
            max_pending_rows=_env_int(_MAX_PENDING_VARIABLE, 10_000),
            report_every=_REPORT_EVERY,
        )
    except Exception as error:
        return _NotLogged(redact_credentials(f"the prediction log {LOG_URL_VARIABLE} cannot be opened: "
                                             f"{type(error).__name__}: {error}", url))
    _drain_on_termination(writer)
    _logger.info("logging every prediction of %s version %s (T=%s) to %s in batches of %d rows or every %d ms",
                 name, version, temperature, mask_url(url), _env_int(_BATCH_ROWS_VARIABLE, 256),
                 _env_int(_FLUSH_MS_VARIABLE, 250))
    return writer


class CalibratedCheckpointModel(PythonModel):
    """Wraps the checkpoint's pyfunc; applies T and the gate from ``model_config``; logs what it serves."""

    def load_context(self, context: PythonModelContext) -> None:
        import mlflow.pyfunc

        config = context.model_config or {}
        temperature = float(config["temperature"])
        if not np.isfinite(temperature) or temperature <= 0:
            raise ValueError(f"model_config temperature must be a finite T > 0, got {temperature!r}")
        threshold = config.get("gate_threshold")
        output = config.get("checkpoint_output", "logits")
        if output not in ("logits", "probabilities"):
            raise ValueError(f"model_config checkpoint_output must be 'logits' or 'probabilities', got {output!r}")
        self._temperature = temperature
        self._threshold = None if threshold is None else float(threshold)
        self._prior_log_weights = parse_prior_correction(config.get("prior_correction"))
        self._from_probabilities = output == "probabilities"
        self._checkpoint = mlflow.pyfunc.load_model(context.artifacts[CHECKPOINT_ARTIFACT])
        self._checkpoint_schema = self._checkpoint.metadata.get_input_schema()
        self._observer: Callable[[np.ndarray[Any, Any], list[str], list[str | None] | None], None] | None = None
        self._model_name, self._model_version = _registered_identity(config, context)
        url = os.environ.get(LOG_URL_VARIABLE, "").strip()
        enabled = config.get("log_predictions", True) not in (False, "false", "False", 0)
        self._writer: _Writer | None = (
            _start_writer(url, self._model_name, self._model_version, temperature) if url and enabled else None
        )

    @property
    def temperature(self) -> float:
        """The T this model applies (from ``model_config``)."""
        return self._temperature

    @property
    def gate_threshold(self) -> float | None:
        return self._threshold

    @property
    def prior_log_weights(self) -> np.ndarray[Any, Any] | None:
        """log π' − log π of the prior correction this model applies (None: none)."""
        return self._prior_log_weights

    @property
    def model_name(self) -> str | None:
        """The registered model's name (None when unknown)."""
        return self._model_name

    @property
    def model_version(self) -> str | None:
        """The registered version this model is (None when unknown)."""
        return self._model_version

    @property
    def prediction_log_stats(self) -> LogWriterStats | dict[str, Any] | None:
        """The prediction log writer's counts (``rows_dropped`` is the loss); None when not logging."""
        return None if self._writer is None else self._writer.stats

    def flush_prediction_log(self, timeout: float | None = 10.0) -> bool:
        """Write every prediction queued so far (True when none is pending; True when not logging)."""
        return True if self._writer is None else self._writer.flush(timeout)

    def close_prediction_log(self, timeout: float | None = None) -> None:
        """Flush and stop the prediction log writer (also done at interpreter exit)."""
        if self._writer is not None:
            self._writer.close(timeout)

    def observe(self, observer: Callable[[np.ndarray[Any, Any], list[str], list[str | None] | None], None] | None) -> None:
        """Call ``observer(logits, request_ids, groups)`` with what every later ``predict`` serves (what it
        hands the prediction log); None stops. The registration's serving rehearsal reads the served
        logits this way (:mod:`flows.registry.rehearsal`)."""
        self._observer = observer

    def raw_logits(self, model_input: Any) -> np.ndarray[Any, Any]:
        """The frozen logits z the calibrated probabilities are computed from (before dividing by T).

        ``model_input`` is the checkpoint's input without the request fields; it is handed to the
        checkpoint in the form its signature takes (:func:`checkpoint_input`). For a checkpoint
        that returns probabilities, their log. The serving helper logs these to the prediction
        log, so the monitor can re-read the traffic at any temperature.
        """
        raw = np.asarray(self._checkpoint.predict(checkpoint_input(model_input, self._checkpoint_schema)),
                         dtype=np.float64)
        if raw.ndim != 2 or raw.shape[1] < 2:
            raise _bad_request(f"the checkpoint returned an array of shape {raw.shape}; expected (n_samples, "
                               "n_classes >= 2): logits or probabilities, one row per example")
        rows = _rows(model_input)
        if rows is not None and raw.shape[0] != rows:
            raise _bad_request(f"the checkpoint answered {raw.shape[0]} row(s) for {rows} example(s); every example "
                               "needs its own row of logits")
        # Log-probabilities are valid logits: softmax(log p / T) = p^(1/T) renormalised.
        with np.errstate(divide="ignore"):
            logits = np.log(raw) if self._from_probabilities else raw
        if not np.isfinite(logits).all():
            row = int(np.flatnonzero(~np.isfinite(logits).all(axis=1))[0])
            raise _bad_request(f"the checkpoint's output row {row} is not finite after conversion to logits")
        return logits

    def predict(
        self, context: PythonModelContext, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        features, given_ids, groups = request_fields(model_input, params)
        logits = self.raw_logits(features)
        served_at = datetime.now(UTC)
        n_rows = logits.shape[0]
        if given_ids is not None and len(given_ids) != n_rows:
            raise _bad_request(f"{len(given_ids)} request_id value(s) for {n_rows} example(s); give one per example")
        if groups is not None and len(groups) not in (1, n_rows):
            raise _bad_request(f"{len(groups)} group value(s) for {n_rows} example(s); give one per example, or one "
                               "for the whole request")
        if groups is not None and len(groups) == 1:
            groups = groups * n_rows
        request_ids = _request_ids(given_ids, n_rows)
        weights = self._prior_log_weights
        if weights is not None and weights.shape[0] != logits.shape[1]:
            raise ValueError(f"the checkpoint returned {logits.shape[1]} classes but the prior correction has "
                             f"{weights.shape[0]}; they must match")
        frame = served_frame(logits, self._temperature, self._threshold, request_ids=request_ids,
                             model_version=self._model_version, prior_log_weights=weights)
        if self._observer is not None:
            self._observer(logits, request_ids, groups)
        if self._writer is not None:
            try:
                self._writer.submit(logits, request_ids, groups, served_at)
            except Exception as error:  # pragma: no cover - submit never raises; a prediction never fails on logging
                _logger.warning("prediction not logged: %s: %s", type(error).__name__, error)
        return frame


set_model(CalibratedCheckpointModel())
