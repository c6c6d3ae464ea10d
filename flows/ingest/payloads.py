"""What the ingestion service reads and answers: the bodies, their OpenAPI schema, the reports.

The request bodies are read by hand, row by row, not validated whole by pydantic: a row that
breaks a rule is refused alone (its position and reason in the answer) and the others are
written. The pydantic models below say what a well-formed body and every answer look like;
they are the OpenAPI schema (:func:`openapi_schema`) and the answers are built from them.

Predictions (``POST /v1/predictions``, JSON)::

    {"model_name": "tickets", "model_version": "7", "temperature": 1.37,     # defaults for the rows
     "rows": [{"request_id": "t-1", "logits": [2.1, -0.3, 0.4], "group": "web",
               "served_at": "2026-03-01T12:00:00Z"}, ...]}

Labels (``POST /v1/labels``): JSON ``{"labels": [{"request_id": "t-1", "label": 2}, ...]}`` or a
CSV (``text/csv``) with a header line holding ``request_id`` (or ``id``) and ``label``; other
columns are ignored.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import orjson
from pydantic import BaseModel, ConfigDict, Field

from monitoring import MAX_NAME_LENGTH, IngestFileError, IngestReport, LabelAttachReport, RowRefusal, label_csv_rows

__all__ = ["BodyError", "IngestAnswer", "LabelAnswer", "labels_from_csv", "labels_from_json", "openapi_schema",
           "predictions_from_json", "relabelled"]



class BodyError(ValueError):
    """A request body that is not of the form its route reads (answered 400, nothing written);
    ``status`` 413 when it holds more rows than the service takes."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


# --------------------------------------------------------------------------- the schema

_Name = Field(min_length=1, max_length=MAX_NAME_LENGTH)


class PredictionRow(BaseModel):
    """One served prediction: the raw logits z of one request and the T it was served at."""

    model_config = ConfigDict(extra="allow")
    request_id: str = Field(min_length=1, max_length=MAX_NAME_LENGTH,
                            description="unique; the id its label is attached with later")
    logits: list[float] = Field(min_length=2, description="the raw logits z (or log-probabilities), one per class")
    model_name: str | None = Field(default=None, max_length=MAX_NAME_LENGTH, description="default: the batch's")
    model_version: str | None = Field(default=None, max_length=MAX_NAME_LENGTH, description="default: the batch's")
    temperature: float | None = Field(default=None, gt=0, description="the T in force; default: the batch's")
    group: str | None = Field(default=None, max_length=MAX_NAME_LENGTH, description="default: the batch's, or none")
    served_at: datetime | None = Field(default=None, description="ISO 8601 with a timezone; default: now")
    label: int | None = Field(default=None, ge=0, description="the true class, when already known")


class PredictionsBody(BaseModel):
    """A batch of served predictions; the batch's fields are the defaults of its rows."""

    model_name: str | None = Field(default=None, max_length=MAX_NAME_LENGTH)
    model_version: str | None = Field(default=None, max_length=MAX_NAME_LENGTH)
    temperature: float | None = Field(default=None, gt=0)
    group: str | None = Field(default=None, max_length=MAX_NAME_LENGTH)
    rows: list[PredictionRow]


class LabelRow(BaseModel):
    """A late label: the true class of a served request."""

    request_id: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)
    label: int = Field(ge=0, description="the class index, in [0, K) of the request's version")


class LabelsBody(BaseModel):
    labels: list[LabelRow]


class Refusal(BaseModel):
    """A refused row: its position in the request (0-based; a CSV's data rows after the header)."""

    index: int
    request_id: str | None
    reason: str

    @classmethod
    def of(cls, refusal: RowRefusal) -> Refusal:
        return cls(index=refusal.index, request_id=refusal.request_id, reason=refusal.reason)


class IngestAnswer(BaseModel):
    """What became of each prediction row: ``received == written + unchanged + len(refused)``."""

    received: int
    written: int = Field(description="in the log now")
    unchanged: int = Field(description="already in the log, the same prediction (a re-sent request)")
    refused: list[Refusal]

    @classmethod
    def of(cls, report: IngestReport) -> IngestAnswer:
        return cls(received=report.received, written=report.written, unchanged=report.unchanged,
                   refused=[Refusal.of(refusal) for refusal in report.refused])


class Conflict(BaseModel):
    request_id: str
    existing_label: int
    new_label: int


class LabelAnswer(BaseModel):
    """What became of each label row: attached, unchanged (the same label again), conflicting (another
    label already there, kept: labels are write-once), unknown (no such request id) or refused."""

    received: int
    attached: int
    unchanged: int
    conflicts: list[Conflict]
    unknown: list[str]
    refused: list[Refusal]

    @classmethod
    def of(cls, report: LabelAttachReport, refused: Sequence[RowRefusal] = (),
           positions: Sequence[int] | None = None) -> LabelAnswer:
        """The answer of ``report`` on the rows at ``positions`` of the request (default: all of them),
        with the rows the service refused before attaching them (``refused``)."""
        rows = sorted((*refused, *relabelled(report.refused, positions)), key=lambda refusal: refusal.index)
        return cls(received=report.n_requested + len(refused), attached=report.attached, unchanged=report.unchanged,
                   conflicts=[Conflict(request_id=c.request_id, existing_label=c.existing_label, new_label=c.new_label)
                              for c in report.conflicts],
                   unknown=list(report.unknown_request_ids), refused=[Refusal.of(r) for r in rows])


def relabelled(refused: Sequence[RowRefusal], positions: Sequence[int] | None) -> list[RowRefusal]:
    """Refusals of rows numbered in a subset, numbered by ``positions`` in the whole (unchanged without)."""
    if positions is None:
        return list(refused)
    return [RowRefusal(positions[r.index], r.request_id, r.reason) for r in refused]


class Ignored(BaseModel):
    """A CloudEvent read and not logged (a request event: the logits are in the response event)."""

    ignored: str


class ErrorAnswer(BaseModel):
    error: str


class V2Tensor(BaseModel):
    """An output tensor of the Open Inference Protocol (v2): row-major ``data`` of ``shape``."""

    name: str
    shape: list[int]
    datatype: str
    data: list[Any]


class V2Response(BaseModel):
    """An inference response of the Open Inference Protocol (v2), as KServe's logger sends it."""

    model_config = ConfigDict(extra="allow")
    model_name: str
    model_version: str | None = None
    id: str | None = None
    parameters: dict[str, Any] | None = None
    outputs: list[V2Tensor]


def openapi_schema(max_rows: int) -> dict[str, Any]:
    """The service's OpenAPI 3.0 schema (served at ``/openapi.json``; fuzzed by the tests)."""
    models = (PredictionsBody, LabelsBody, IngestAnswer, LabelAnswer, Ignored, ErrorAnswer, V2Response)
    components: dict[str, Any] = {}
    for model in models:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
    components["PredictionsBody"]["properties"]["rows"]["maxItems"] = max_rows
    components["LabelsBody"]["properties"]["labels"]["maxItems"] = max_rows
    return {
        "openapi": "3.0.3",
        "info": {"title": "Thermostat ingestion service", "version": "1",
                 "description": "Served predictions and late labels into Thermostat's prediction log. A bad row "
                                "is refused alone (its index and reason in the answer); ?atomic=true asks for "
                                "all or nothing. Idempotent by request id."},
        "components": {"schemas": _openapi_3_0(components),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": {
            "/v1/predictions": {"post": _operation(
                "log served predictions", {"application/json": "PredictionsBody"}, "IngestAnswer")},
            "/v1/labels": {"post": _operation(
                "attach late labels by request id", {"application/json": "LabelsBody",
                                                     "text/csv": None}, "LabelAnswer")},
            "/v1/cloudevents": {"post": _operation(
                "log KServe's inference logger CloudEvents (binary mode; Open Inference Protocol v2 response "
                "events carry the logits)", {"application/json": "V2Response"}, "IngestAnswer",
                parameters=_CLOUDEVENT_PARAMETERS)},
            "/healthz": {"get": {"summary": "the service is up and its log reachable", "security": [],
                                 "responses": {"200": {"description": "ok", "content": {"text/plain": {
                                     "schema": {"type": "string"}}}},
                                               "503": _error("the prediction log cannot be reached")}}},
            "/metrics": {"get": {"summary": "Prometheus text format", "security": [],
                                 "responses": {"200": {"description": "metrics", "content": {"text/plain": {
                                     "schema": {"type": "string"}}}}}}},
        },
    }


_ATOMIC: Final = {"name": "atomic", "in": "query", "required": False, "schema": {"type": "boolean"},
                  "description": "all or nothing: when a row is refused, nothing of the request is written (422)"}
_CLOUDEVENT_PARAMETERS: Final = [
    {"name": name, "in": "header", "required": required, "schema": {"type": "string", "maxLength": 255}}
    for name, required in (("ce-specversion", True), ("ce-type", True), ("ce-id", True), ("ce-source", True),
                           ("ce-time", False), ("ce-inferenceservicename", False), ("ce-metadata", False))
] + [
    {"name": "model_version", "in": "query", "required": False, "schema": {"type": "string", "maxLength": 255},
     "description": "the version, when the response does not name it"},
    {"name": "temperature", "in": "query", "required": False,
     "schema": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
     "description": "the T in force, when the response's parameters do not carry it"},
    {"name": "output", "in": "query", "required": False, "schema": {"type": "string", "maxLength": 255},
     "description": "the output tensor that holds the logits, when the response has several"},
]


def _error(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorAnswer"}}}}


def _operation(summary: str, bodies: Mapping[str, str | None], answer: str,
               parameters: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    content = {media: {"schema": {"$ref": f"#/components/schemas/{model}"} if model else {"type": "string"}}
               for media, model in bodies.items()}
    ok: dict[str, Any] = {"description": "the report of every row",
                          "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{answer}"}}}}
    if answer == "IngestAnswer" and parameters:
        ok["content"]["application/json"]["schema"] = {"oneOf": [{"$ref": f"#/components/schemas/{answer}"},
                                                                 {"$ref": "#/components/schemas/Ignored"}]}
    return {
        "summary": summary,
        "parameters": [*parameters, _ATOMIC],
        "requestBody": {"required": True, "content": content},
        "responses": {
            "200": ok,
            "400": _error("the body is not of the form this route reads; nothing was written"),
            "401": _error("no bearer token, or not one the service accepts"),
            "413": _error("the body or its rows are beyond the service's limits"),
            "415": _error("a content type this route does not read"),
            "421": {"description": "the request is not addressed to this service (Host)",
                    "content": {"text/plain": {"schema": {"type": "string"}}}},
            "422": {"description": "atomic: a row was refused, nothing was written (the report of every row, or "
                                   "the first refusal)",
                    "content": {"application/json": {"schema": {"oneOf": [
                        {"$ref": f"#/components/schemas/{answer}"}, {"$ref": "#/components/schemas/ErrorAnswer"}]}}}},
            "429": _error("the writer is behind: send again after Retry-After seconds"),
            "503": _error("the prediction log could not be written; resend (idempotent by request id)"),
        },
    }


def _openapi_3_0(schemas: dict[str, Any]) -> dict[str, Any]:
    """pydantic's JSON Schema (2020-12) in OpenAPI 3.0's dialect: ``anyOf [X, null]`` becomes
    ``X`` with ``nullable``, and the numeric bounds' exclusive forms become booleans."""

    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(item) for item in node]
        if not isinstance(node, dict):
            return node
        node = {key: convert(value) for key, value in node.items()}
        options = node.get("anyOf")
        if isinstance(options, list) and {"type": "null"} in options:
            rest = [option for option in options if option != {"type": "null"}]
            node.pop("anyOf")
            node.pop("default", None)
            if len(rest) == 1 and "$ref" not in rest[0]:
                node.update(rest[0])
            else:
                node["anyOf"] = rest
            node["nullable"] = True
        for bound, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if isinstance(node.get(bound), (int, float)) and not isinstance(node.get(bound), bool):
                node[plain] = node.pop(bound)
                node[bound] = True
        return node

    converted: dict[str, Any] = convert(schemas)
    return converted


# --------------------------------------------------------------------------- reading bodies


def _json(body: bytes) -> Any:
    try:  # orjson reads a batch several times faster; what it refuses, json says why (or reads: 2**70)
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        document = json.loads(body)
    except UnicodeDecodeError as error:
        raise BodyError(f"the body is not UTF-8 text: {error}") from error
    except json.JSONDecodeError as error:
        raise BodyError(f"the body is not JSON: {error}") from error
    except RecursionError as error:
        raise BodyError("the body nests too deep to be read") from error
    problem = lone_surrogate(document)
    if problem is not None:
        raise BodyError(f"the body is not UTF-8 text: {problem}")
    return document


def lone_surrogate(document: Any) -> str | None:
    """Why ``document`` (read by :func:`json.loads`) is not Unicode text, or None: JSON's ``\\ud800``
    escapes give strings no database or UTF-8 writer takes."""
    try:
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as error:
        return f"a string holds a lone surrogate escape ({error.reason})"
    return None


def _rows_of(document: Any, key: str, max_rows: int, what: str) -> list[Any]:
    if not isinstance(document, dict):
        raise BodyError(f"the body must be a JSON object with a {key!r} list of {what}; got {type(document).__name__}")
    rows = document.get(key)
    if not isinstance(rows, list):
        raise BodyError(f"the body must have a {key!r} list of {what}; got {type(rows).__name__}")
    if len(rows) > max_rows:
        raise BodyError(f"{len(rows):,} {what} in one request; at most {max_rows:,} (THERMOSTAT_INGEST_MAX_ROWS): "
                        "split the batch", status=413)
    return rows


def predictions_from_json(body: bytes, max_rows: int) -> tuple[list[Any], dict[str, object]]:
    """The rows of a predictions body and the batch's defaults (``model_name``, ``model_version``,
    ``temperature``, ``group``), as :meth:`monitoring.PredictionBatch.from_rows` reads them."""
    document = _json(body)
    rows = _rows_of(document, "rows", max_rows, "prediction rows")
    defaults = {name: document[name] for name in ("model_name", "model_version", "temperature", "group")
                if document.get(name) is not None}
    return rows, defaults


def labels_from_json(body: bytes, max_rows: int) -> tuple[list[object], list[object], list[RowRefusal], list[int]]:
    """The request ids and labels of a JSON labels body, the rows refused while reading (not an
    object with ``request_id`` and ``label``) and the position of each row kept."""
    rows = _rows_of(_json(body), "labels", max_rows, "label rows")
    ids: list[object] = []
    labels: list[object] = []
    refused: list[RowRefusal] = []
    positions: list[int] = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or "request_id" not in row or "label" not in row:
            rid = row.get("request_id") if isinstance(row, dict) else None
            refused.append(RowRefusal(i, rid if isinstance(rid, str) and rid else None,
                                      "a label row must be an object with request_id and label"))
            continue
        ids.append(row["request_id"])
        labels.append(row["label"])
        positions.append(i)
    return ids, labels, refused, positions


def labels_from_csv(body: bytes, max_rows: int) -> tuple[list[object], list[object], list[RowRefusal], list[int]]:
    """The request ids and labels of a CSV labels body (a header line with ``request_id`` or ``id``
    and ``label``: :func:`monitoring.label_csv_rows`), the rows refused while reading (a wrong
    number of fields) and the position of each row kept. Labels are read as integers where they
    are; any other text is passed on as it is, and refused as such when attached."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise BodyError(f"the CSV is not UTF-8 text: {error}") from error
    try:
        rows = next(label_csv_rows(io.StringIO(text, newline=""), "the CSV body", chunk_rows=max_rows + 1))
    except IngestFileError as error:
        raise BodyError(str(error)) from error
    if len(rows.positions) + len(rows.refused) > max_rows:
        raise BodyError(f"more than {max_rows:,} label rows in one request (THERMOSTAT_INGEST_MAX_ROWS): split the "
                        "file", status=413)
    return rows.request_ids, rows.labels, rows.refused, rows.positions
