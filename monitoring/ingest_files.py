"""Predictions and labels read from files (CSV, Parquet, JSON Lines), a bad row refused alone.

What ``thermostat labels attach FILE`` and ``thermostat log FILE`` read, and the ingestion
service's CSV labels. A file is read in chunks of rows (memory bounded by the chunk, not the
file), each chunk with the positions of its rows in the file (0-based data rows: a CSV's
header line is not a row) and the rows refused while reading (a wrong number of fields, a logit
that is not a number, a JSON line that is not an object), each with its reason.

The file itself is refused, before a row is read and with nothing written
(:class:`IngestFileError`, naming the file): an unknown extension, anything but a regular file
(a FIFO, a device; checked before it is opened, :func:`calibration.not_a_regular_file`), a
header without the columns the file needs, more than ``max_classes`` logit columns, a CSV
header or a JSON line longer than :data:`MAX_LINE_CHARACTERS`, a Parquet file whose footer
declares more than this process may hold or a compression bomb
(:func:`calibration.memory_refusal`, :func:`calibration.expansion_refusal`).

Columns
-------
Labels
    ``request_id`` (or ``id``) and ``label``; other columns are ignored. JSON Lines: one object
    ``{"request_id": ..., "label": ...}`` a line.
Predictions
    ``request_id`` (or ``id``), ``logit_0`` ... ``logit_{K-1}``, and ``model_name``,
    ``model_version``, ``temperature`` (each may instead be given for the whole file),
    optionally ``group``, ``served_at`` (ISO 8601 with a timezone) and ``label``. The
    prediction log's export (``thermostat export``) is such a file, its model and version
    given for the file. JSON Lines: one object a line, the ingestion service's row
    (``logits`` a list).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, cast

from calibration import MAX_CLASSES, expansion_refusal, memory_refusal, not_a_regular_file

from .store import RowRefusal

__all__ = ["IngestFileError", "LabelRows", "PredictionRows", "label_csv_rows", "read_label_file",
           "read_prediction_file"]

#: The extensions of the files read (case-insensitive).
FILE_FORMATS: Final = (".csv", ".parquet", ".jsonl", ".ndjson")
#: The longest CSV header line or JSON line read, in characters (16 Mi).
MAX_LINE_CHARACTERS: Final = 16 * 2**20
#: Rows per chunk by default.
CHUNK_ROWS: Final = 50_000
_ID_COLUMNS: Final = ("request_id", "id")
_LOGIT: Final = re.compile(r"logit_(0|[1-9][0-9]*)")
_INTEGER: Final = re.compile(r"[+-]?[0-9]{1,18}")
_OPTIONAL: Final = ("model_name", "model_version", "temperature", "group", "served_at", "label")


class IngestFileError(ValueError):
    """A file that cannot be read as predictions or labels at all; nothing of it was written."""


@dataclass(slots=True)
class LabelRows:
    """Label rows read from a file: the request ids and labels of the rows read (a label that is not an
    integer kept as its text, refused when attached), each row's position in the file, and the rows
    refused while reading."""

    request_ids: list[object] = field(default_factory=list)
    labels: list[object] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    refused: list[RowRefusal] = field(default_factory=list)


@dataclass(slots=True)
class PredictionRows:
    """Prediction rows read from a file, as :meth:`PredictionBatch.from_rows` reads them, each row's
    position in the file, and the rows refused while reading."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    refused: list[RowRefusal] = field(default_factory=list)


def _label_value(text: str) -> object:
    text = text.strip()
    return int(text) if _INTEGER.fullmatch(text) else text


def _checked_file(path: str | Path) -> tuple[Path, str]:
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in FILE_FORMATS:
        raise IngestFileError(f"{file}: unknown extension {file.suffix!r}; read are {', '.join(FILE_FORMATS)}")
    if not file.exists():
        raise IngestFileError(f"{file}: file not found")
    refusal = not_a_regular_file(file)
    if refusal is not None:  # before anything opens it: a FIFO blocks open(), a device never ends
        raise IngestFileError(f"{file}: {refusal}; give a regular {suffix} file")
    return file, suffix


def _header(handle: IO[str], source: str) -> list[str]:
    line = handle.readline(MAX_LINE_CHARACTERS + 1)
    if len(line) > MAX_LINE_CHARACTERS:
        raise IngestFileError(f"{source}: the header line is longer than {MAX_LINE_CHARACTERS:,} characters")
    fields = next(csv.reader([line]), [])
    if not fields:
        raise IngestFileError(f"{source}: the file is empty; it needs a header line of column names")
    return [name.strip() for name in fields]


def _id_column(names: list[str], source: str, what: str) -> int:
    counts = Counter(names)  # one pass: a header of 100,000 names is counted in milliseconds, not minutes
    repeated = sorted(name for name, count in counts.items() if count > 1 and (
        name in (*_ID_COLUMNS, *_OPTIONAL) or _LOGIT.fullmatch(name)))
    if repeated:  # which one would be read?
        raise IngestFileError(f"{source}: column {repeated[0]!r} appears {counts[repeated[0]]} times; each column "
                              "read must appear once")
    found = next((names.index(name) for name in _ID_COLUMNS if name in names), None)
    if found is None:
        raise IngestFileError(f"{source}: no request_id (or id) column among {', '.join(names)[:200]}; {what}")
    return found


def label_csv_rows(lines: Iterable[str], source: str, *, chunk_rows: int = CHUNK_ROWS,
                   max_rows: int | None = None) -> Iterator[LabelRows]:
    """The label rows of a CSV's text (its header line first), ``chunk_rows`` at a time.

    Examples
    --------
    >>> [chunk.labels for chunk in label_csv_rows(["id,label\\n", "a,1\\n", "b,x\\n"], "labels.csv")]
    [[1, 'x']]
    """
    handle: IO[str] = cast(IO[str], lines) if isinstance(lines, io.TextIOBase) else io.StringIO("".join(lines))
    names = _header(handle, source)
    id_column = _id_column(names, source, "labels need request_id (or id) and label")
    if "label" not in names:
        raise IngestFileError(f"{source}: no label column among {', '.join(names)[:200]}; labels need request_id "
                              "(or id) and label")
    label_column = names.index("label")
    chunk = LabelRows()
    reader = csv.reader(handle)
    try:
        for i, fields in enumerate(reader):
            if max_rows is not None and i >= max_rows:
                raise IngestFileError(f"{source}: more than {max_rows:,} label rows; split it")
            if len(fields) != len(names):
                rid = fields[id_column] if len(fields) > id_column else None
                chunk.refused.append(RowRefusal(i, rid or None, f"the row has {len(fields)} field(s); the header has "
                                                                f"{len(names)}"))
            else:
                chunk.request_ids.append(fields[id_column])
                chunk.labels.append(_label_value(fields[label_column]))
                chunk.positions.append(i)
            if len(chunk.positions) + len(chunk.refused) >= chunk_rows:
                yield chunk
                chunk = LabelRows()
    except csv.Error as error:
        raise IngestFileError(f"{source}: cannot be read as CSV at line {reader.line_num + 1}: {error}") from error
    yield chunk


def _json_lines(handle: IO[str], source: str) -> Iterator[tuple[int, object]]:
    """(position, parsed object or the reason it was refused as a str in a 1-tuple) of each non-blank line."""
    position = 0
    while line := handle.readline(MAX_LINE_CHARACTERS + 1):
        if len(line) > MAX_LINE_CHARACTERS:
            raise IngestFileError(f"{source}: line {position + 1} is longer than {MAX_LINE_CHARACTERS:,} characters")
        if not line.strip():
            continue
        try:
            yield position, json.loads(line)
        except (json.JSONDecodeError, RecursionError) as error:
            yield position, (f"the line is not JSON: {error}",)
        position += 1


def _open_text(file: Path) -> IO[str]:
    try:
        return file.open(newline="", encoding="utf-8-sig")
    except OSError as error:
        raise IngestFileError(f"{file}: cannot be read ({error.strerror})") from error


def read_label_file(path: str | Path, *, chunk_rows: int = CHUNK_ROWS) -> Iterator[LabelRows]:
    """The label rows of a CSV, Parquet or JSON Lines file, ``chunk_rows`` at a time (at least one chunk).

    Raises
    ------
    IngestFileError
        The file is refused (see the module docstring), before the first chunk is returned; or,
        while iterating, a later part of it cannot be read (a CSV quote never closed).

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "labels.jsonl"
    >>> _ = path.write_text('{"request_id": "a", "label": 2}\\n["not a row"]\\n')
    >>> [(chunk.request_ids, chunk.labels, [r.index for r in chunk.refused]) for chunk in read_label_file(path)]
    [(['a'], [2], [1])]
    """
    file, suffix = _checked_file(path)
    return _primed(_label_chunks(file, suffix, chunk_rows), LabelRows())


def _primed(chunks: Iterator[Any], empty: Any) -> Iterator[Any]:
    """``chunks`` with its first chunk read now: the file's header is checked before a row is written."""
    first = next(chunks, empty)
    return itertools.chain([first], chunks)


def _label_chunks(file: Path, suffix: str, chunk_rows: int) -> Iterator[LabelRows]:
    source = str(file)
    if suffix == ".parquet":
        for start, columns in _parquet_chunks(file, ("label",), chunk_rows, "labels need request_id (or id) and "
                                                                             "label"):
            ids, labels = columns["id"], columns["label"]
            yield LabelRows(ids, labels, list(range(start, start + len(ids))), [])
        return
    with _open_text(file) as handle:
        try:
            if suffix == ".csv":
                yield from label_csv_rows(handle, source, chunk_rows=chunk_rows)
                return
            chunk = LabelRows()
            for position, value in _json_lines(handle, source):
                if isinstance(value, dict) and "request_id" in value and "label" in value:
                    chunk.request_ids.append(value["request_id"])
                    chunk.labels.append(value["label"])
                    chunk.positions.append(position)
                else:
                    reason = value[0] if isinstance(value, tuple) else "a label line must be an object with request_id " \
                                                                       "and label"
                    rid = value.get("request_id") if isinstance(value, dict) else None
                    chunk.refused.append(RowRefusal(position, rid if isinstance(rid, str) and rid else None, reason))
                if len(chunk.positions) + len(chunk.refused) >= chunk_rows:
                    yield chunk
                    chunk = LabelRows()
            yield chunk
        except UnicodeDecodeError as error:
            raise IngestFileError(f"{source}: is not UTF-8 text ({error})") from error


def read_prediction_file(path: str | Path, *, chunk_rows: int = CHUNK_ROWS,
                         max_classes: int = MAX_CLASSES) -> Iterator[PredictionRows]:
    """The prediction rows of a CSV, Parquet or JSON Lines file, ``chunk_rows`` at a time (at least one chunk).

    Raises
    ------
    IngestFileError
        As :func:`read_label_file`.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "served.csv"
    >>> _ = path.write_text("id,logit_0,logit_1,group\\na,2.0,0.5,web\\nb,x,0.5,web\\n")
    >>> [chunk.rows for chunk in read_prediction_file(path)]
    [[{'request_id': 'a', 'logits': [2.0, 0.5], 'group': 'web'}]]
    """
    file, suffix = _checked_file(path)
    return _primed(_prediction_chunks(file, suffix, chunk_rows, max_classes), PredictionRows())


def _prediction_chunks(file: Path, suffix: str, chunk_rows: int, max_classes: int) -> Iterator[PredictionRows]:
    source = str(file)
    what = "predictions need request_id (or id) and logit_0 ... logit_{K-1}"
    if suffix == ".parquet":
        for start, columns in _parquet_chunks(file, _OPTIONAL, chunk_rows, what, logits=max_classes):
            logits = columns.pop("logits")
            names = [name for name in _OPTIONAL if name in columns]
            rows = [{"request_id": rid, "logits": row, **{name: columns[name][i] for name in names}}
                    for i, (rid, row) in enumerate(zip(columns["id"], logits, strict=True))]
            yield PredictionRows(rows, list(range(start, start + len(rows))), [])
        return
    with _open_text(file) as handle:
        try:
            if suffix == ".csv":
                yield from _prediction_csv(handle, source, chunk_rows, max_classes, what)
                return
            chunk = PredictionRows()
            for position, value in _json_lines(handle, source):
                if isinstance(value, dict):
                    chunk.rows.append(value)
                    chunk.positions.append(position)
                else:
                    reason = value[0] if isinstance(value, tuple) else "a prediction line must be a JSON object"
                    chunk.refused.append(RowRefusal(position, None, reason))
                if len(chunk.positions) + len(chunk.refused) >= chunk_rows:
                    yield chunk
                    chunk = PredictionRows()
            yield chunk
        except UnicodeDecodeError as error:
            raise IngestFileError(f"{source}: is not UTF-8 text ({error})") from error


def _logit_columns(names: list[str], source: str, max_classes: int, what: str) -> list[int]:
    numbered = {int(match.group(1)): position for position, name in enumerate(names)
                if (match := _LOGIT.fullmatch(name))}
    if len(numbered) > max_classes:
        raise IngestFileError(f"{source}: {len(numbered):,} logit columns; at most {max_classes:,} classes are read")
    if not numbered or sorted(numbered) != list(range(len(numbered))):
        raise IngestFileError(f"{source}: the logit columns must be logit_0 ... logit_{{K-1}} without gaps; found "
                              f"{sorted(numbered)[:10]}; {what}")
    return [numbered[k] for k in range(len(numbered))]


def _prediction_csv(handle: IO[str], source: str, chunk_rows: int, max_classes: int,
                    what: str) -> Iterator[PredictionRows]:
    names = _header(handle, source)
    id_column = _id_column(names, source, what)
    logit_columns = _logit_columns(names, source, max_classes, what)
    optional = [(name, names.index(name)) for name in _OPTIONAL if name in names]
    chunk = PredictionRows()
    reader = csv.reader(handle)
    try:
        for i, fields in enumerate(reader):
            row, reason = _csv_prediction(fields, names, id_column, logit_columns, optional)
            if reason is None:
                chunk.rows.append(row)
                chunk.positions.append(i)
            else:
                rid = fields[id_column] if len(fields) > id_column else None
                chunk.refused.append(RowRefusal(i, rid or None, reason))
            if len(chunk.positions) + len(chunk.refused) >= chunk_rows:
                yield chunk
                chunk = PredictionRows()
    except csv.Error as error:
        raise IngestFileError(f"{source}: cannot be read as CSV at line {reader.line_num + 1}: {error}") from error
    yield chunk


def _csv_prediction(fields: list[str], names: list[str], id_column: int, logit_columns: list[int],
                    optional: Sequence[tuple[str, int]]) -> tuple[dict[str, Any], str | None]:
    """One CSV row as a prediction row, or why it is refused."""
    if len(fields) != len(names):
        return {}, f"the row has {len(fields)} field(s); the header has {len(names)}"
    logits: list[float] = []
    for k, position in enumerate(logit_columns):
        try:
            logits.append(float(fields[position]))
        except ValueError:
            return {}, f"logit_{k} is {fields[position][:40]!r}, not a number"
    row: dict[str, Any] = {"request_id": fields[id_column], "logits": logits}
    for name, position in optional:
        text = fields[position].strip()
        if not text:
            continue  # an empty cell: the file's default, or none
        if name == "temperature":
            try:
                row[name] = float(text)
            except ValueError:
                return {}, f"temperature is {text[:40]!r}, not a number"
        elif name == "label":
            row[name] = _label_value(text)
        else:
            row[name] = fields[position]
    return row, None


def _parquet_chunks(file: Path, optional: tuple[str, ...], chunk_rows: int, what: str, *,
                    logits: int | None = None) -> Iterator[tuple[int, dict[str, list[Any]]]]:
    """(first row, columns as Python lists) of a Parquet file, ``chunk_rows`` at a time: ``id`` (from
    ``request_id`` or ``id``), the ``optional`` columns present and, with ``logits`` (the most
    classes read), ``logits`` (one list of floats a row from ``logit_0`` ...). The footer's sizes
    are checked first."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    try:
        parquet = pq.ParquetFile(file)
        schema, metadata = parquet.schema_arrow, parquet.metadata
    except (OSError, ValueError, TypeError, pa.ArrowException) as error:
        raise IngestFileError(f"{file}: cannot be read as Parquet ({error})") from error
    with parquet:
        names = [str(name) for name in schema.names]
        id_name = names[_id_column(names, str(file), what)]
        if logits is None and "label" not in names:
            raise IngestFileError(f"{file}: no label column among {', '.join(names)[:200]}; {what}")
        logit_names = [names[p] for p in _logit_columns(names, str(file), logits, what)] if logits is not None else []
        read = [id_name, *logit_names, *(name for name in optional if name in names)]
        rows = metadata.num_rows
        declared = rows * (16 * (len(read) - len(logit_names)) + 8 * len(logit_names))
        stored = file.stat().st_size
        refusal = memory_refusal(declared, f"{rows:,} rows of {len(read)} columns") or \
            expansion_refusal(declared, stored, f"{rows:,} rows of {len(read)} columns")
        if refusal is not None:
            raise IngestFileError(f"{file}: {refusal}")
        start = 0
        try:
            for batch in parquet.iter_batches(batch_size=chunk_rows, columns=read, use_pandas_metadata=False):
                columns: dict[str, list[Any]] = {"id": batch.column(id_name).to_pylist()}
                if logit_names:
                    block = [batch.column(name).to_pylist() for name in logit_names]
                    columns["logits"] = [list(values) for values in zip(*block, strict=True)]
                for name in optional:
                    if name in names:
                        columns[name] = [_plain(value) for value in batch.column(name).to_pylist()]
                yield start, columns
                start += batch.num_rows
        except (OSError, ValueError, TypeError, NotImplementedError, pa.ArrowException) as error:
            raise IngestFileError(f"{file}: cannot be read as Parquet at row {start:,} ({error})") from error


def _plain(value: object) -> object:
    """A Parquet cell as the rows take it: times as ISO 8601 text (their zone kept)."""
    isoformat = getattr(value, "isoformat", None)
    return isoformat() if callable(isoformat) else value
