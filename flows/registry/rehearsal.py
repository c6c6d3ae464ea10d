"""The serving rehearsal: a candidate's holdout scored the way ``mlflow models serve`` scores it.

Before anything is registered, the calibrated model of the checkpoint (saved exactly as the
registration saves it, at T = 1) is loaded and sent the holdout as the JSON requests a client
sends: every input form its signature accepts (:func:`request_forms`), with ``request_id`` and
``group``, through MLflow's own scoring function (``mlflow.pyfunc.scoring_server.invocations``:
the JSON parsed against the model's signature, the schema enforced, ``predict`` called, the
response encoded). The model's observer (:meth:`flows.registry.model.CalibratedCheckpointModel.observe`)
hands back the logits, request ids and groups it would log.

:func:`rehearse_serving` returns the served logits of the whole holdout (requests of at most
``batch_rows`` examples in the first form): the logits the registration fits T on, so that the
registered version serves softmax(z / T) of exactly them. Every other form is sent a sample, in
one request and one example per request. A checkpoint that cannot be served, or whose served
logits differ from its own (:func:`flows.registry.checkpoint.checkpoint_logits`) by more than
``SERVED_LOGITS_RTOL`` of their largest magnitude, is refused with :class:`ServingRefused`,
naming the form, the example and the fix.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np
from mlflow.exceptions import MlflowException
from mlflow.models import Model
from mlflow.pyfunc.scoring_server import invocations
from mlflow.types import Schema
from numpy.typing import NDArray

from flows.records.versions import CheckpointOutput
from flows.registry.adapter import save_calibrated_model
from flows.registry.checkpoint import SIGNATURE_FIX
from flows.registry.model import GROUP_COLUMN, REQUEST_FIELDS, REQUEST_ID_COLUMN

__all__ = ["SERVED_LOGITS_RTOL", "ServedHoldout", "ServingRefused", "rehearse_serving", "request_forms",
           "request_payload"]

SERVED_LOGITS_RTOL = 1e-6
"""Served and direct logits may differ by this much of their largest magnitude (at least 1):
float32 arithmetic in batches of other sizes differs by about 1e-7 of it; a wrong input by far more."""
REHEARSAL_GROUP = "thermostat-rehearsal"

_OWN_FIX = ("the checkpoint's own predict answers the same example differently in another batch or form: make its "
            "predict depend only on each example's input")


class ServingRefused(ValueError):
    """The checkpoint would be served other logits than its own, or cannot be served: nothing is registered."""


@dataclass(frozen=True, slots=True)
class ServedHoldout:
    """The holdout as served: ``logits`` (n_samples, n_classes) from the first of ``forms``, and the
    largest difference from the checkpoint's own logits seen over every form (``max_difference``,
    allowed up to ``tolerance``)."""

    logits: NDArray[np.float64]
    forms: tuple[str, ...]
    max_difference: float
    tolerance: float


def request_forms(schema: Schema | None, feature_ndim: int) -> tuple[str, ...]:
    """The JSON input forms a calibrated model with input ``schema`` accepts for features of
    ``feature_ndim`` dimensions (1: one value per example; 2: a row; more: a tensor).

    Request fields go in columns (``+columns``) where the input is a table, else in ``params``.

    Examples
    --------
    >>> request_forms(None, 1)
    ('dataframe_split+columns', 'dataframe_records+columns', 'inputs+columns', 'inputs+params', 'instances+params')
    """
    if schema is not None and schema.is_tensor_spec():
        table = ("dataframe_split+params", "dataframe_records+params") if feature_ndim <= 2 else ()
        return ("inputs+params", "instances+params", *table)
    if schema is not None:  # named columns
        return ("dataframe_split+columns", "dataframe_records+columns", "instances+columns", "inputs+columns",
                "dataframe_split+params")
    if feature_ndim > 2:
        return ("inputs+params", "instances+params")
    return ("dataframe_split+columns", "dataframe_records+columns", "inputs+columns", "inputs+params",
            "instances+params")


def _column_names(schema: Schema | None, width: int) -> list[str]:
    if schema is not None and not schema.is_tensor_spec():
        return [str(name) for name in schema.input_names() if name not in REQUEST_FIELDS]
    return ["input"] if width == 0 else [str(j) for j in range(width)]


def request_payload(form: str, features: NDArray[Any], schema: Schema | None, request_ids: list[str],
                    groups: list[str]) -> dict[str, Any]:
    """The JSON body (as a dict) a client sends for ``features`` in ``form`` (:func:`request_forms`).

    Examples
    --------
    >>> request_payload("inputs+params", np.array([[1.0, 2.0]]), None, ["r1"], ["web"])
    {'inputs': [[1.0, 2.0]], 'params': {'request_id': ['r1'], 'group': ['web']}}
    >>> request_payload("dataframe_records+columns", np.array(["good"]), None, ["r1"], ["web"])
    {'dataframe_records': [{'input': 'good', 'request_id': 'r1', 'group': 'web'}]}
    """
    key, carrier = form.split("+")
    fields = {REQUEST_ID_COLUMN: request_ids, GROUP_COLUMN: groups}
    if key in ("inputs", "instances") and carrier == "params":
        return {key: features.tolist(), "params": fields}
    table = features.reshape(len(features), -1) if features.ndim > 1 else features.reshape(len(features), 1)
    names = _column_names(schema, 0 if features.ndim == 1 else table.shape[1])
    columns: dict[str, list[Any]] = {name: table[:, j].tolist() for j, name in enumerate(names)}
    if carrier == "columns":
        columns |= fields
    body: dict[str, Any]
    if key == "dataframe_split":
        body = {key: {"columns": list(columns), "data": [list(row) for row in zip(*columns.values(), strict=True)]}}
    elif key == "inputs":
        body = {key: columns}
    else:  # dataframe_records, or instances as records
        body = {key: [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]}
    return body | ({"params": fields} if carrier == "params" else {})


@contextmanager
def _rehearsal_model(checkpoint_dir: Path, n_classes: int, output: CheckpointOutput,
                     workdir: Path) -> Iterator[tuple[Any, list[tuple[NDArray[np.float64], list[str], Any]]]]:
    """The calibrated model as the registration saves it (T = 1, no gate), loaded without logging,
    and the list its observer appends (logits, request ids, groups) to at every predict."""
    path = workdir / "serving-rehearsal"
    save_calibrated_model(path, checkpoint_dir=checkpoint_dir, n_classes=n_classes,
                          model_config={"temperature": 1.0, "gate_threshold": None, "checkpoint_output": output})
    model = mlflow.pyfunc.load_model(str(path), model_config={"log_predictions": False})
    seen: list[tuple[NDArray[np.float64], list[str], Any]] = []
    calibrated = model.unwrap_python_model()
    calibrated.observe(lambda logits, ids, groups: seen.append((logits, ids, groups)))
    try:
        yield model, seen
    finally:
        calibrated.observe(None)


def _served(model: Any, schema: Schema | None, form: str, features: NDArray[Any],
            ids: list[str], seen: list[Any], refuse: Callable[[str], ServingRefused]) -> NDArray[np.float64]:
    """One request in ``form``, through MLflow's scoring function; the logits served for it."""
    body = json.dumps(request_payload(form, features, schema, ids, [REHEARSAL_GROUP] * len(ids)))
    seen.clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            answer = invocations(body, "application/json", model, schema)  # type: ignore[no-untyped-call]
    except MlflowException as error:
        raise refuse(f"the {form} request of {len(ids)} example(s) fails ({_reason(error)})") from error
    if answer.status != 200:
        raise refuse(f"the {form} request of {len(ids)} example(s) is answered HTTP {answer.status}: {answer.response}")
    predictions = json.loads(answer.response)["predictions"]
    if len(seen) != 1 or [row[REQUEST_ID_COLUMN] for row in predictions] != ids or seen[0][1] != ids:
        raise refuse(f"the {form} request of {len(ids)} example(s) did not answer each example once under its own "
                     "request_id")
    if seen[0][2] != [REHEARSAL_GROUP] * len(ids):
        raise refuse(f"the {form} request of {len(ids)} example(s) lost its group field")
    logits: NDArray[np.float64] = seen[0][0]
    return logits


def rehearse_serving(
    checkpoint_dir: Path, features: NDArray[Any], ids: NDArray[np.str_], direct_logits: NDArray[np.float64],
    output: CheckpointOutput, workdir: Path, *, sample_rows: int = 32, single_rows: int = 3, batch_rows: int = 1024,
) -> ServedHoldout:
    """Score the holdout through the serving path and compare with the checkpoint's own logits.

    Parameters
    ----------
    checkpoint_dir : the checkpoint's MLflow model folder (as downloaded).
    features : array of shape (n_samples, ...), the holdout's features as the checkpoint took them.
    ids : array of shape (n_samples,), sent as the request ids.
    direct_logits : array of shape (n_samples, n_classes), the checkpoint's own logits on them.
    output : what the checkpoint returns (``logits`` or ``probabilities``).
    workdir : where the rehearsal model is saved.
    sample_rows, single_rows, batch_rows : the other forms' sample in one request, the examples
        sent one per request in every form, and the largest request of the whole holdout.

    Raises
    ------
    ServingRefused
        Naming the form, the example and what to change in how the checkpoint is logged.
    """
    n_samples, n_classes = direct_logits.shape
    with _rehearsal_model(checkpoint_dir, n_classes, output, workdir) as (model, seen):
        schema = model.metadata.get_input_schema()
        kind = _schema_kind(checkpoint_dir)
        fix = SIGNATURE_FIX if kind in ("no signature", "unnamed columns") else _OWN_FIX

        def refuse(what: str) -> ServingRefused:
            return ServingRefused(f"served as `mlflow models serve` serves it (the checkpoint's input: {kind}), {what}; "
                                  f"{fix}")

        forms = request_forms(schema, features.ndim)
        tolerance = SERVED_LOGITS_RTOL * max(1.0, float(np.abs(direct_logits).max()))
        served = np.empty_like(direct_logits)
        largest = 0.0
        # (form, first, end, registered): the whole holdout in the first form is what gets registered.
        requests = [(forms[0], start, min(start + batch_rows, n_samples), True)
                    for start in range(0, n_samples, batch_rows)]
        requests += [(form, 0, min(sample_rows, n_samples), False) for form in forms[1:]]
        requests += [(form, row, row + 1, False) for form in forms for row in range(min(single_rows, n_samples))]
        for form, start, stop, registered in requests:
            logits = _served(model, schema, form, features[start:stop], ids[start:stop].tolist(), seen, refuse)
            difference = np.abs(logits - direct_logits[start:stop]).max(axis=1)
            worst = int(difference.argmax())
            if not difference[worst] <= tolerance:
                raise refuse(f"the {form} request of {stop - start} example(s) is served logits up to "
                             f"{difference[worst]:.3g} away from the checkpoint's own (example {str(ids[start + worst])!r}: "
                             f"served {np.round(logits[worst], 4).tolist()[:6]}, own "
                             f"{np.round(direct_logits[start + worst], 4).tolist()[:6]}; tolerance {tolerance:.1g})")
            largest = max(largest, float(difference[worst]))
            if registered:
                served[start:stop] = logits
    logging.getLogger("thermostat").debug("serving rehearsal: %d forms, max |served - own| %.3g", len(forms), largest)
    return ServedHoldout(logits=served, forms=forms, max_difference=largest, tolerance=tolerance)


def _reason(error: MlflowException) -> str:
    """What failed in a request: MLflow's message without the request's data it quotes, or, for an
    error of the model's own code (which the scoring server reports generically), its last line."""
    stack = str(error.json_kwargs.get("stack_trace") or "").strip()
    if stack and error.message.startswith("Encountered an unexpected error"):
        return stack.splitlines()[-1]
    return error.message.rsplit("\nError: ", 1)[-1].strip()


def _schema_kind(checkpoint_dir: Path) -> str:
    """How the checkpoint's signature describes its input, for messages."""
    signature = Model.load(str(checkpoint_dir / "MLmodel")).signature
    inputs = None if signature is None else signature.inputs
    if inputs is None:
        return "no signature"
    if inputs.is_tensor_spec():
        return "a tensor"
    return "named columns" if inputs.has_input_names() else "unnamed columns"
