"""KServe's inference logger: its CloudEvents as prediction rows.

An InferenceService with ``logger: {mode: all, url: http://thermostat-ingest/v1/cloudevents}``
posts two CloudEvents per request, in HTTP **binary mode** (the event's attributes are
``ce-*`` headers, the body is the payload as the model server sent it), as KServe's
``pkg/logger`` writes them:

================================ ===============================================================
``ce-type``                      ``org.kubeflow.serving.inference.request`` (the request body) or
                                 ``org.kubeflow.serving.inference.response`` (the response body,
                                 sent only for a 200 answer)
``ce-id``                        the same for both events of a request: the request's ``Ce-Id``
                                 header, or a new UUID
``ce-source``                    the logger's source URI
``ce-specversion``               ``1.0``
``ce-time``                      when the logger sent the event (RFC 3339)
``ce-inferenceservicename``      the InferenceService's name
``ce-namespace``                 its namespace
``ce-component``, ``ce-endpoint`` predictor / transformer / explainer; default or canary
``ce-metadata``                  JSON of the request headers the InferenceService lists in
                                 ``logger.metadataHeaders`` (``{"Header-Name": ["value"]}``)
================================ ===============================================================

Header values are percent-encoded, as the CloudEvents HTTP binding says (and SDKs write them).

Structured mode (``Content-Type: application/cloudevents+json``, the attributes and ``data``
in one JSON object) is read too.

**Which event is logged.** The response event alone: for the Open Inference Protocol (v2) its
body names the model and version and carries the outputs, among them the logits; the request
event's inputs are the features, which the prediction log does not keep. Request events are
answered 200 and not logged (``{"ignored": ...}``), so no pairing by id is needed.

**From a v2 response to rows.** The output tensor of the logits is the only output, or the one
named by the ``output`` query parameter; its ``shape`` is ``[n, K]`` (or ``[K]`` for one row)
and ``data`` its ``n·K`` numbers, row-major (a nested list is read too). Each row becomes a
prediction row:

* ``request_id``: the response's ``id`` (the v2 request id, echoed), else ``ce-id``; a batch of
  ``n > 1`` rows gets ``ID/0`` ... ``ID/{n-1}`` (attach the labels with those);
* ``model_name``: the response's ``model_name`` (else ``ce-inferenceservicename``);
  ``model_version``: the response's, else the ``model_version`` query parameter;
* ``temperature`` (the T in force): ``parameters.temperature`` of the response, else the
  ``temperature`` query parameter (``logger.url: ...?temperature=1.37``);
* ``group``: ``parameters.group``, else the ``Thermostat-Group`` request header carried in
  ``ce-metadata`` (list it in ``logger.metadataHeaders``);
* ``served_at``: ``ce-time``.

A missing model version or temperature refuses the rows with that reason. KServe's logger does
not resend an event that was refused (its answer is only logged): a 429 or 503 loses it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import unquote
from dataclasses import dataclass
from typing import Any, Final

from flows.ingest.payloads import lone_surrogate

__all__ = ["CLOUDEVENT_REQUEST", "CLOUDEVENT_RESPONSE", "EventRows", "rows_from_cloudevent"]

CLOUDEVENT_REQUEST: Final = "org.kubeflow.serving.inference.request"
CLOUDEVENT_RESPONSE: Final = "org.kubeflow.serving.inference.response"
GROUP_HEADER: Final = "Thermostat-Group"
_STRUCTURED: Final = "application/cloudevents+json"
_REQUIRED: Final = ("specversion", "type", "id", "source")


class EventError(ValueError):
    """A request that is not a CloudEvent of KServe's logger this service reads (answered 400)."""


@dataclass(frozen=True, slots=True)
class EventRows:
    """The rows of a response event and its batch's defaults (``rows`` empty and ``ignored`` set for
    an event that is not logged)."""

    rows: list[dict[str, Any]]
    defaults: dict[str, object]
    ignored: str | None = None


def _attributes(headers: Mapping[str, str], body: bytes) -> tuple[dict[str, str], Any]:
    """The event's attributes (lower-case names without ``ce-``) and its data, in either mode."""
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == _STRUCTURED:
        event = _parsed(body, "the structured CloudEvent")
        if not isinstance(event, dict):
            raise EventError("a structured CloudEvent must be a JSON object")
        attributes = {str(key).lower(): value for key, value in event.items() if key not in ("data", "data_base64")}
        if "data_base64" in event:
            raise EventError("data_base64 is not read: KServe's logger sends JSON payloads")
        return {key: str(value) for key, value in attributes.items() if isinstance(value, (str, int, float))}, \
            event.get("data")
    # Binary mode's header values are percent-encoded (the CloudEvents HTTP binding, 3.1.3.2).
    attributes = {name[3:].lower(): unquote(value) for name, value in headers.items() if name.lower().startswith("ce-")}
    return attributes, None


def _parsed(body: bytes, what: str) -> Any:
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise EventError(f"{what} is not JSON: {error}") from error
    problem = lone_surrogate(document)
    if problem is not None:
        raise EventError(f"{what} is not UTF-8 text: {problem}")
    return document


def rows_from_cloudevent(headers: Mapping[str, str], body: bytes, query: Mapping[str, str]) -> EventRows:
    """The prediction rows of one CloudEvent of KServe's inference logger (see the module docstring).

    Raises
    ------
    EventError
        Not a CloudEvent (its required attributes missing), an event type of another source, or
        a response that is not an Open Inference Protocol (v2) response with one logits tensor.

    Examples
    --------
    >>> headers = {"ce-specversion": "1.0", "ce-id": "r-1", "ce-source": "http://isvc/",
    ...            "ce-type": CLOUDEVENT_RESPONSE, "ce-time": "2026-03-01T12:00:00Z"}
    >>> body = b'{"model_name": "m", "model_version": "2", "outputs": [{"name": "logits", "shape": [1, 2], '
    >>> body += b'"datatype": "FP32", "data": [2.0, 0.5]}], "parameters": {"temperature": 1.5}}'
    >>> event = rows_from_cloudevent(headers, body, {})
    >>> event.rows[0]["request_id"], event.rows[0]["logits"], event.defaults["temperature"]
    ('r-1', [2.0, 0.5], 1.5)
    """
    attributes, data = _attributes(headers, body)
    missing = [name for name in _REQUIRED if not attributes.get(name)]
    if missing:
        raise EventError(f"not a CloudEvent: no {', '.join('ce-' + name for name in missing)} (KServe's inference "
                         "logger sends them in binary mode)")
    kind = attributes["type"]
    if kind == CLOUDEVENT_REQUEST:
        return EventRows([], {}, ignored="a request event: the logits are in the response event of the same ce-id")
    if kind != CLOUDEVENT_RESPONSE:
        raise EventError(f"ce-type {kind[:100]!r} is not KServe's {CLOUDEVENT_RESPONSE!r} (or its request event)")
    response = _parsed(body, "the response event's data") if data is None else data
    if not isinstance(response, dict) or not isinstance(response.get("outputs"), list):
        raise EventError("the response event's data is not an Open Inference Protocol (v2) response: no outputs list "
                         "(a v1 {\"predictions\": ...} response holds no logits to log)")
    logits = _logits_tensor(response["outputs"], query.get("output"))
    given = response.get("parameters")
    parameters: dict[str, Any] = given if isinstance(given, dict) else {}
    request_id = response.get("id") if isinstance(response.get("id"), str) and response.get("id") else attributes["id"]
    defaults: dict[str, object] = {
        "model_name": response.get("model_name") or attributes.get("inferenceservicename"),
        "model_version": response.get("model_version") or query.get("model_version"),
        "temperature": parameters.get("temperature", _number(query.get("temperature"))),
        "group": parameters.get("group") or _metadata_group(attributes.get("metadata")) or query.get("group"),
    }
    served_at = attributes.get("time")
    rows = [{"request_id": request_id if len(logits) == 1 else f"{request_id}/{i}", "logits": row,
             "served_at": served_at} for i, row in enumerate(logits)]
    return EventRows(rows, {key: value for key, value in defaults.items() if value is not None})


def _number(text: str | None) -> object:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return text  # refused by the row's check, with its value


def _metadata_group(metadata: str | None) -> str | None:
    """The ``Thermostat-Group`` request header in ``ce-metadata`` (``{"Name": ["value"]}``), if any."""
    if not metadata:
        return None
    try:
        headers = json.loads(metadata)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(headers, dict):
        return None
    values = next((value for name, value in headers.items() if str(name).lower() == GROUP_HEADER.lower()), None)
    return values[0] if isinstance(values, list) and values and isinstance(values[0], str) else None


def _logits_tensor(outputs: list[Any], name: str | None) -> list[object]:
    """The rows of the output tensor that holds the logits."""
    tensors = [tensor for tensor in outputs if isinstance(tensor, dict)]
    if name is not None:
        chosen = [tensor for tensor in tensors if tensor.get("name") == name]
        if not chosen:
            names = [str(tensor.get("name"))[:60] for tensor in tensors]
            raise EventError(f"the response has no output named {name[:60]!r} (outputs: {names})")
    else:
        chosen = tensors
        if len(chosen) != 1:
            names = [str(tensor.get("name"))[:60] for tensor in tensors]
            raise EventError(f"the response has {len(chosen)} outputs {names}; name the one that holds the logits "
                             "with ?output=NAME in the logger's URL")
    tensor = chosen[0]
    shape, data = tensor.get("shape"), tensor.get("data")
    if not isinstance(data, list):
        raise EventError("the logits output has no data list")
    if data and all(isinstance(row, list) for row in data):  # nested rows
        return list(data)
    if not (isinstance(shape, list) and shape and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                      for d in shape)) or len(shape) > 2:
        raise EventError(f"the logits output's shape {str(shape)[:60]} is not [n, K] or [K]")
    n, k = (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1])
    if n * k != len(data) or k == 0:
        raise EventError(f"the logits output's shape {shape} holds {n * k} values; its data has {len(data)}")
    return [data[i * k:(i + 1) * k] for i in range(n)]
