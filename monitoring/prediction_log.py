"""The prediction log: one row per served prediction, in any SQLAlchemy database.

A real SQL table written and read through SQLAlchemy Core: a SQLite file by default, any
SQLAlchemy URL in production (PostgreSQL is tested). Each row holds the serving time, the
model name and version, a unique request id, the logits (float32 bytes), the predicted class,
its confidence, the temperature in force, an optional group and a label that may arrive later.

Design decisions
----------------
* **Times are UTC.** Every datetime passed in must be timezone-aware; it is converted to UTC.
  PostgreSQL stores ``timestamptz``; other databases store the naive UTC wall time. Every
  datetime read back is timezone-aware UTC.
* **Column names avoid SQL keywords**: the serving time is the column ``served_at`` and the
  group is ``group_key`` (``time`` and ``group`` would need quoting in every hand-written
  dashboard query). The Python API calls them ``time`` and ``group``.
* **Logits** are stored as little-endian float32 bytes (4·K bytes per row, checked by the
  database), so they round-trip bit-exactly as float32. Float64 input is rounded to float32
  once, when it is logged.
* **A batch is all or nothing.** :meth:`PredictionLog.append` validates the whole batch first
  and writes it in one transaction; a bad row raises :class:`PredictionRowError` naming its
  index in the batch and its request id, and nothing from the batch is written.
* **The number of classes of a version is fixed** by its first logged batch (table
  ``prediction_log_versions``); a later row with another K is refused. Recording a version's
  K is an upsert (``INSERT ... ON CONFLICT DO NOTHING``, then read back): replicas logging
  the first batches of a new version at once are all logged, each checked against the K
  that won.
* **Labels are write-once.** :meth:`PredictionLog.attach_labels` is idempotent for the same
  label; a *different* label for an already-labelled request is not applied and is reported
  as a conflict (a window that was evaluated must stay reproducible); unknown request ids
  are reported. Both are in the returned :class:`LabelAttachReport`, never silently dropped.
  The report counts what the database applied (``UPDATE ... WHERE label IS NULL ...
  RETURNING``), so of two callers racing on the same ids only one is told a row was attached.
* **Reading streams.** :meth:`PredictionLog.iter_labelled` pages with a keyset on
  ``(served_at, id)`` (``WHERE (served_at, id) > (last) ORDER BY served_at, id LIMIT n``) on
  the index ``(model_name, model_version, served_at, id)``, one short read transaction per
  chunk: memory is bounded by ``chunk_size`` whatever the window, and a long window read does
  not hold a lock that would block the serving writer (SQLite files use WAL mode).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from random import uniform
from time import sleep
from typing import Any, Final, Literal, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Dialect,
    Double,
    Engine,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    and_,
    bindparam,
    case,
    create_engine,
    literal,
    event,
    func,
    inspect,
    select,
    tuple_,
    type_coerce,
    update,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.types import TypeDecorator

from calibration import check_logits, check_temperature, top_label_confidence

from ._validation import as_utc, check_chunk_size, check_window
from .store import LabelAttachReport, LabelConflict, LabelledChunk, RowRefusal, ServedChunk, StoreScope
from .urls import mask_url

__all__ = [
    "DEFAULT_STATE_DIR",
    "MAX_NAME_LENGTH",
    "LabelAttachReport",
    "LabelConflict",
    "LabelledChunk",
    "LabelledFingerprint",
    "NewlyLabelled",
    "PredictionLog",
    "PredictionRecord",
    "PredictionRowError",
    "RowRefusal",
    "ServedChunk",
    "ServedTally",
    "default_log_url",
    "log_predictions",
    "open_prediction_log",
]

MAX_NAME_LENGTH: Final = 255
"""Longest model name, model version, request id or group the log stores."""

DEFAULT_STATE_DIR: Final = ".thermostat"
"""The local state folder when none is set (``THERMOSTAT_STATE_DIR``): the default log lives in it."""

# The earliest serving time a window can start at (every row of a version is served after it).
_BEGINNING: Final = datetime(1, 1, 2, tzinfo=UTC)
# ... and the latest it can end at.
_END_OF_TIME: Final = datetime(9999, 12, 30, tzinfo=UTC)

# Creating the tables is tried this many times when another process creates them meanwhile.
_CREATE_TRIES: Final = 10
# SQLite's result codes of a file another connection holds (SQLITE_BUSY, SQLITE_LOCKED).
_SQLITE_BUSY_CODES: Final = frozenset({5, 6})


def _busy(error: DBAPIError) -> bool:
    """Whether ``error`` is SQLite saying another connection holds the file."""
    return getattr(error.orig, "sqlite_errorcode", None) in _SQLITE_BUSY_CODES

# SQLite allows 32766 bound parameters per statement (999 before 3.32); stay far below both.
_IN_CHUNK: Final = 500

# A batch aborted by the database to break a lock cycle is written again up to this many times,
# after about 0.1, 0.2, 0.4 s (doubling, with jitter).
_LOCK_CONFLICT_RETRIES: Final = 3
_LOCK_CONFLICT_BACKOFF: Final = 0.05
# SQLSTATEs of a transaction the database rolled back whole and that may simply run again:
# serialization_failure and deadlock_detected.
_LOCK_CONFLICT_STATES: Final = frozenset({"40001", "40P01"})
# The SQL log holds every served row and when each label arrived, and is written.
_SQL_SCOPE: Final = StoreScope(served_rows=True, label_times=True, writable=True)


# --------------------------------------------------------------------------- schema


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime in any database.

    PostgreSQL keeps ``timestamptz``; other dialects get the naive UTC wall time, so string
    comparison in SQLite orders instants correctly. Results are always aware UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        utc = as_utc(value, name="time")
        return utc if dialect.name == "postgresql" else utc.replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _build_metadata() -> tuple[MetaData, Table, Table]:
    metadata = MetaData()
    predictions = Table(
        "prediction_log",
        metadata,
        # BIGINT in real databases; INTEGER in SQLite, where only INTEGER PRIMARY KEY is the rowid.
        Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
        Column("served_at", UTCDateTime(), nullable=False),
        Column("model_name", String(MAX_NAME_LENGTH), nullable=False),
        Column("model_version", String(MAX_NAME_LENGTH), nullable=False),
        Column("request_id", String(MAX_NAME_LENGTH), nullable=False),
        Column("n_classes", Integer(), nullable=False),
        Column("logits", LargeBinary(), nullable=False),
        Column("predicted_class", Integer(), nullable=False),
        Column("confidence", Double(), nullable=False),
        Column("temperature", Double(), nullable=False),
        Column("group_key", String(MAX_NAME_LENGTH), nullable=True),
        Column("label", Integer(), nullable=True),
        Column("labelled_at", UTCDateTime(), nullable=True),
        CheckConstraint("n_classes >= 2", name="ck_prediction_log_n_classes"),
        CheckConstraint("length(logits) = 4 * n_classes", name="ck_prediction_log_logits_bytes"),
        CheckConstraint("predicted_class >= 0 AND predicted_class < n_classes", name="ck_prediction_log_predicted"),
        CheckConstraint("confidence >= 0 AND confidence <= 1", name="ck_prediction_log_confidence"),
        CheckConstraint("temperature > 0", name="ck_prediction_log_temperature"),
        CheckConstraint(
            "label IS NULL OR (label >= 0 AND label < n_classes)", name="ck_prediction_log_label"
        ),
        CheckConstraint("(label IS NULL) = (labelled_at IS NULL)", name="ck_prediction_log_labelled_at"),
    )
    Index("ux_prediction_log_request_id", predictions.c.request_id, unique=True)
    # The window read: equality on the version, range on the time, keyset order (time, id).
    Index(
        "ix_prediction_log_version_time",
        predictions.c.model_name,
        predictions.c.model_version,
        predictions.c.served_at,
        predictions.c.id,
    )
    # The sequential rule's increment: the version's rows whose label arrived in a range,
    # whenever they were served (NewlyLabelled).
    Index(
        "ix_prediction_log_version_labelled",
        predictions.c.model_name,
        predictions.c.model_version,
        predictions.c.labelled_at,
    )
    versions = Table(
        "prediction_log_versions",
        metadata,
        Column("model_name", String(MAX_NAME_LENGTH), primary_key=True),
        Column("model_version", String(MAX_NAME_LENGTH), primary_key=True),
        Column("n_classes", Integer(), nullable=False),
        Column("first_logged_at", UTCDateTime(), nullable=False),
    )
    return metadata, predictions, versions


# --------------------------------------------------------------------------- results


class PredictionRowError(ValueError):
    """A row of a batch was refused; nothing from the batch was written.

    Attributes
    ----------
    index : int
        Position of the offending row in the batch (0-based).
    request_id : str or None
        Its request id (None when the id itself is unreadable).
    """

    def __init__(self, message: str, *, index: int, request_id: str | None) -> None:
        super().__init__(message)
        self.index = index
        self.request_id = request_id


@dataclass(frozen=True, slots=True)
class PredictionRecord:
    """One served prediction, as the serving wrapper logs it.

    ``time`` must be timezone-aware. ``logits`` has one value per class (K >= 2).
    ``label`` may be given now or attached later; ``labelled_at`` defaults to the time of the
    append when a label is given.
    """

    time: datetime
    model_name: str
    model_version: str
    request_id: str
    logits: ArrayLike
    predicted_class: int
    confidence: float
    temperature: float
    group: str | None = None
    label: int | None = None
    labelled_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ServedTally:
    """A version's rows served since a time: how many, how many of them labelled, when the last
    was served and at what T (None, None: none)."""

    rows: int
    labelled_rows: int
    last_served_at: datetime | None
    last_temperature: float | None


@dataclass(frozen=True, slots=True)
class LabelledFingerprint:
    """What identifies the labelled rows of a version in a window, without reading them.

    Rows are only ever added and labels only attached (write-once), so a window whose
    fingerprint is unchanged holds the same labelled rows: a row logged late into the window
    raises ``last_row_id`` and the count, a label attached late raises ``last_labelled_at``
    and the count. The times are None when the window holds no labelled row.
    """

    n_rows: int
    first_served_at: datetime | None
    last_served_at: datetime | None
    last_labelled_at: datetime | None
    last_row_id: int | None


# --------------------------------------------------------------------------- validation


def _check_name(value: object, *, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str; got {type(value).__name__} {value!r}")
    if not value or len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{name} must have 1 to {MAX_NAME_LENGTH} characters; got {len(value)}: {value[:40]!r}")
    return value


# The columns a row is written with, in order (``id`` is the database's).
_ROW_KEYS: Final = ("served_at", "model_name", "model_version", "request_id", "n_classes", "logits", "predicted_class",
                    "confidence", "temperature", "group_key", "label", "labelled_at")


@dataclass(slots=True)
class _Columns:
    """A validated batch in column form (private: built by the two public entry points)."""

    time: list[datetime]
    model_name: list[str]
    model_version: list[str]
    request_id: list[str]
    logits_bytes: list[bytes]
    n_classes: NDArray[np.int64]
    predicted_class: NDArray[np.int64]
    confidence: NDArray[np.float64]
    temperature: NDArray[np.float64]
    group: list[str | None]
    label: list[int | None]
    labelled_at: list[datetime | None]
    versions: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # -> (K, first row)
    positions: NDArray[np.intp] | None = None  # each row's position in the batch it was screened from

    def values(self, pick: list[int] | None = None) -> tuple[list[Any], ...]:
        """The columns in the table's order (:data:`_ROW_KEYS`), of the rows ``pick`` (default: all)."""
        columns = (
            self.time, self.model_name, self.model_version, self.request_id, self.n_classes.tolist(),
            self.logits_bytes, self.predicted_class.tolist(), self.confidence.tolist(),
            self.temperature.tolist(), self.group, self.label, self.labelled_at,
        )  # fmt: skip
        return columns if pick is None else tuple([column[j] for j in pick] for column in columns)

    def rows(self, pick: list[int] | None = None) -> list[dict[str, Any]]:
        """One mapping of column name to value per row (of the rows ``pick``; default: all)."""
        return [dict(zip(_ROW_KEYS, values, strict=True)) for values in zip(*self.values(pick), strict=True)]


def _row_error(index: int, request_id: str | None, message: str, n_rows: int) -> PredictionRowError:
    where = f"row {index}" + (f" (request id {request_id!r})" if request_id is not None else "")
    return PredictionRowError(
        f"{where}: {message}; nothing from the batch of {n_rows} rows was written", index=index, request_id=request_id
    )


class _Refusals:
    """The rows of a batch refused so far (position -> (request id or None, why)), in the order the
    rules found them, and the rows still kept (``ok``): a later rule looks only at kept rows."""

    def __init__(self, n_rows: int, earlier: dict[int, tuple[str | None, str]] | None = None) -> None:
        self.ok = np.ones(n_rows, dtype=bool)
        self.found: dict[int, tuple[str | None, str]] = {}
        for index, (request_id, message) in (earlier or {}).items():
            self.refuse(index, request_id, message)

    def refuse(self, index: int, request_id: str | None, message: str) -> None:
        if self.ok[index]:
            self.ok[index] = False
            self.found[index] = (request_id or None, message)

    def refuse_where(self, mask: NDArray[np.bool_], ids: list[str], message: Any) -> None:
        """Refuse every kept row where ``mask`` holds, ``message(i)`` saying why."""
        for i in np.flatnonzero(mask & self.ok).tolist():
            self.refuse(i, ids[i], message(i))


def _temperature_refusal(value: float) -> str | None:
    """Why :func:`calibration.check_temperature` refuses ``value`` (None: it does not)."""
    try:
        check_temperature(value)
    except (TypeError, ValueError) as error:
        return str(error)
    return None


def _usable_temperatures(temperatures: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Where a row's T is one the softmax takes (within the calibration core's limits); the
    non-finite and non-positive ones are the rule before's."""
    usable = np.ones(temperatures.shape, dtype=bool)
    candidates = temperatures[np.isfinite(temperatures) & (temperatures > 0.0)]
    for value in np.unique(candidates).tolist():
        if _temperature_refusal(value) is not None:
            usable[temperatures == value] = False
    return usable


def _validate_columns(*, now: datetime, **values: Any) -> _Columns:
    """Check a whole batch (vectorised where the data are numeric) and return it in column form;
    the first refused row (:func:`_screen_columns`' first rule that refuses one) raises."""
    columns, refused = _screen_columns(now=now, **values)
    if refused:
        index, (request_id, message) = next(iter(refused.items()))
        raise _row_error(index, request_id, message, len(values["request_id"]))
    return columns


def _screen_columns(
    *,
    time: list[object],
    model_name: list[object],
    model_version: list[object],
    request_id: list[object],
    flat_logits: NDArray[np.float32],
    n_classes: NDArray[np.int64],
    predicted_class: list[object] | NDArray[Any],
    confidence: list[object] | NDArray[Any],
    temperature: list[object] | NDArray[Any],
    group: list[object],
    label: list[object],
    labelled_at: list[object],
    now: datetime,
    refused: dict[int, tuple[str | None, str]] | None = None,
) -> tuple[_Columns, dict[int, tuple[str | None, str]]]:
    """Check every row of a batch and return the rows that pass, in column form (their positions
    in ``positions``), with the refused ones: position -> (request id or None, why), in the
    order the rules found them. ``refused`` holds rows already refused by the caller (their
    values are placeholders: K = 0 and no logits)."""
    n_rows = len(request_id)
    rows = _Refusals(n_rows, refused)
    ids = [""] * n_rows
    for i, value in enumerate(request_id):
        if type(value) is str and 0 < len(value) <= MAX_NAME_LENGTH:  # the common case, without a call
            ids[i] = value
            continue
        try:
            ids[i] = _check_name(value, name="request_id")
        except (TypeError, ValueError) as exc:
            rows.refuse(i, None, str(exc))
    names, versions, times, groups = _checked_texts(rows, ids, model_name, model_version, time, group)

    # Duplicate request ids inside the batch: the second occurrence is refused.
    kept = np.flatnonzero(rows.ok)
    _, first_index, inverse = np.unique(np.asarray([ids[i] for i in kept], dtype=object), return_index=True,
                                        return_inverse=True)
    for j in np.flatnonzero(first_index[inverse] != np.arange(kept.size)).tolist():
        rows.refuse(int(kept[j]), ids[kept[j]], f"request id repeats row {kept[first_index[inverse[j]]]} of the same batch")

    # Number of classes: >= 2, and one K per (model, version) inside the batch.
    rows.refuse_where(n_classes < 2, ids, lambda i: f"logits have {n_classes[i]} value(s); K >= 2 is required")
    version_k: dict[tuple[str, str], tuple[int, int]] = {}
    for i in np.flatnonzero(rows.ok).tolist():
        key = (names[i], versions[i])
        known = version_k.setdefault(key, (int(n_classes[i]), i))
        if known[0] != n_classes[i]:
            rows.refuse(i, ids[i], f"logits have {n_classes[i]} classes but row {known[1]} of {key[0]!r} version "
                                   f"{key[1]!r} in the same batch has {known[0]}; every row of a version must have the "
                                   "same K")

    # Finite logits (in float32: a float64 beyond float32's range would be stored as inf).
    offsets = np.concatenate(([0], np.cumsum(n_classes)[:-1])).astype(np.int64)
    bad_so_far = np.concatenate(([0], np.cumsum(~np.isfinite(flat_logits))))
    rows.refuse_where(bad_so_far[offsets + n_classes] > bad_so_far[offsets], ids, lambda i: (
        f"logits contain {_first_nonfinite(flat_logits[offsets[i]:offsets[i] + n_classes[i]])} (as float32); every "
        "logit must be finite"))

    predicted = _numbers(predicted_class, "predicted_class", rows, ids, integer=True)
    rows.refuse_where((predicted < 0) | (predicted >= n_classes), ids,
                      lambda i: f"predicted_class is {predicted[i]}; it must be in [0, {n_classes[i]})")
    confidences = _numbers(confidence, "confidence", rows, ids)
    rows.refuse_where(~((confidences >= 0.0) & (confidences <= 1.0)), ids,
                      lambda i: f"confidence is {confidences[i]}; it must be in [0, 1]")
    temperatures = _numbers(temperature, "temperature", rows, ids)
    rows.refuse_where(~(np.isfinite(temperatures) & (temperatures > 0.0)), ids,
                      lambda i: f"temperature is {temperatures[i]}; it must be finite and > 0")
    rows.refuse_where(~_usable_temperatures(temperatures), ids, lambda i: _temperature_refusal(float(temperatures[i])))
    labels, label_times = _checked_labels(rows, ids, label, labelled_at, n_classes, now)

    keep = np.flatnonzero(rows.ok)
    raw = flat_logits.astype("<f4", copy=False).tobytes()
    starts, ends = (offsets[keep] * 4).tolist(), ((offsets + n_classes)[keep] * 4).tolist()
    pick = keep.tolist()
    final_versions: dict[tuple[str, str], tuple[int, int]] = {}
    for j, i in enumerate(pick):
        final_versions.setdefault((names[i], versions[i]), (int(n_classes[i]), j))
    return _Columns(
        time=[times[i] for i in pick],
        model_name=[names[i] for i in pick],
        model_version=[versions[i] for i in pick],
        request_id=[ids[i] for i in pick],
        logits_bytes=[raw[a:b] for a, b in zip(starts, ends, strict=True)],
        n_classes=n_classes[keep],
        predicted_class=predicted[keep],
        confidence=confidences[keep],
        temperature=temperatures[keep],
        group=[groups[i] for i in pick],
        label=[labels[i] for i in pick],
        labelled_at=[label_times[i] for i in pick],
        versions=final_versions,
        positions=keep,
    ), rows.found


def _checked_texts(
    rows: _Refusals, ids: list[str], model_name: list[object], model_version: list[object], time: list[object],
    group: list[object],
) -> tuple[list[str], list[str], list[datetime], list[str | None]]:
    """The names, versions, times and groups of the kept rows (placeholders where refused)."""
    n_rows = len(ids)
    names, versions = [""] * n_rows, [""] * n_rows
    times: list[datetime] = [_BEGINNING] * n_rows
    groups: list[str | None] = [None] * n_rows
    good_names: set[object] = set()  # names seen valid (most rows repeat a few names)
    utc: dict[object, datetime] = {}  # the same serving time is converted once
    ok = rows.ok.tolist()
    for i in range(n_rows):
        if not ok[i]:
            continue
        name, version, when, key = model_name[i], model_version[i], time[i], group[i]
        try:
            names[i] = name if type(name) is str and name in good_names else _check_name(name, name="model_name")
            versions[i] = version if type(version) is str and version in good_names else \
                _check_name(version, name="model_version")
            times[i] = utc[when] if type(when) is datetime and when in utc else as_utc(when, name="time")
            groups[i] = None if key is None else key if type(key) is str and key in good_names else \
                _check_name(key, name="group")
        except (TypeError, ValueError) as exc:
            rows.refuse(i, ids[i], str(exc))
            continue
        good_names.update((names[i], versions[i], groups[i]))
        if type(when) is datetime:
            utc[when] = times[i]
    return names, versions, times, groups


def _checked_labels(
    rows: _Refusals, ids: list[str], label: list[object], labelled_at: list[object], n_classes: NDArray[np.int64],
    now: datetime,
) -> tuple[list[int | None], list[datetime | None]]:
    """The labels given with the kept rows and their labelling times (None where none)."""
    labels: list[int | None] = [None] * len(ids)
    label_times: list[datetime | None] = [None] * len(ids)
    for i, (value, when) in enumerate(zip(label, labelled_at, strict=True)):
        if not rows.ok[i]:
            continue
        if value is None:
            if when is not None:
                rows.refuse(i, ids[i], "labelled_at is given without a label")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            rows.refuse(i, ids[i], f"label must be an integer or None; got {value!r}")
        elif not 0 <= value < n_classes[i]:
            rows.refuse(i, ids[i], f"label is {value}; it must be in [0, {n_classes[i]})")
        else:
            try:
                label_times[i] = now if when is None else as_utc(when, name="labelled_at")
                labels[i] = int(value)
            except (TypeError, ValueError) as exc:
                rows.refuse(i, ids[i], str(exc))
    return labels, label_times


def _first_nonfinite(row: NDArray[np.float32]) -> float:
    return float(row[~np.isfinite(row)][0])


def _numbers(
    values: list[object] | NDArray[Any], name: str, rows: _Refusals, ids: list[str], *, integer: bool = False
) -> NDArray[Any]:
    """A numeric column (int64 with ``integer``, else float64); a kept row whose value is not a
    number of that kind (a bool, a str, None, an int beyond int64) is refused and holds 0."""
    try:
        array = values if isinstance(values, np.ndarray) else np.asarray(values)
    except (ValueError, TypeError):  # lists of different lengths among the values
        array = np.empty(0, dtype=object)
    if array.ndim == 1 and len(array) == len(values) and array.dtype.kind in ("iu" if integer else "iuf"):
        return array.astype(np.int64 if integer else np.float64)
    if not isinstance(values, np.ndarray) or array.ndim != 1:  # each value as given: a str, None, a list
        array = np.empty(len(values), dtype=object)
        for i, value in enumerate(values):
            array[i] = value
    out = np.zeros(len(array), dtype=np.int64 if integer else np.float64)
    kinds: tuple[type, ...] = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    for i, value in enumerate(array.tolist()):
        if not rows.ok[i]:
            continue
        if isinstance(value, bool) or not isinstance(value, kinds):
            rows.refuse(i, ids[i], f"{name} must be {'an integer' if integer else 'a number'}; got {value!r}")
            continue
        try:
            out[i] = cast(float, value)  # an int or a float: checked above
        except OverflowError:
            rows.refuse(i, ids[i], f"{name} is {value}, beyond a 64-bit integer")
    return out


def _records_to_columns(records: Sequence[PredictionRecord], now: datetime) -> _Columns:
    n_rows = len(records)
    flat: list[NDArray[np.float32]] = []
    n_classes = np.empty(n_rows, dtype=np.int64)
    for i, record in enumerate(records):
        if not isinstance(record, PredictionRecord):
            raise _row_error(i, None, f"expected a PredictionRecord; got {type(record).__name__}", n_rows)
        try:
            row = np.asarray(record.logits, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise _row_error(i, str(record.request_id), f"logits are not numeric: {exc}", n_rows) from exc
        if row.ndim != 1:
            raise _row_error(i, str(record.request_id), f"logits must be 1-D (K,); got shape {row.shape}", n_rows)
        with np.errstate(over="ignore"):
            flat.append(row.astype(np.float32))
        n_classes[i] = row.shape[0]
    return _validate_columns(
        time=[r.time for r in records],
        model_name=[r.model_name for r in records],
        model_version=[r.model_version for r in records],
        request_id=[r.request_id for r in records],
        flat_logits=np.concatenate(flat),
        n_classes=n_classes,
        predicted_class=[r.predicted_class for r in records],
        confidence=[r.confidence for r in records],
        temperature=[r.temperature for r in records],
        group=[r.group for r in records],
        label=[r.label for r in records],
        labelled_at=[r.labelled_at for r in records],
        now=now,
    )


def _label_values(labels: ArrayLike | Sequence[object], n_ids: int) -> list[object]:
    """The labels of :meth:`PredictionLog.attach_labels` as Python values, one per id."""
    array = np.asarray(labels, dtype=object) if isinstance(labels, (list, tuple)) else np.asarray(labels)
    if array.ndim != 1 or array.shape[0] != n_ids:
        raise ValueError(f"labels must be 1-D with one label per request id ({n_ids}); got shape {array.shape}")
    values: list[object] = array.tolist()
    return values


def _checked_label(request_id: object, label: object) -> int | str:
    """A (request id, label) row of :meth:`PredictionLog.attach_labels` checked before the log is
    read: the label as an int, or why the row is refused. A float with an integral value (a
    label column that pandas read as floats because of a missing value) is that integer."""
    if not isinstance(request_id, str) or not request_id or len(request_id) > MAX_NAME_LENGTH:
        shown = f"{len(request_id)} characters" if isinstance(request_id, str) else \
            f"{type(request_id).__name__} {request_id!r}"
        return f"the request id must be a str of 1 to {MAX_NAME_LENGTH} characters; got {shown}"
    if isinstance(label, (float, np.floating)) and float(label).is_integer():
        label = int(label)
    if isinstance(label, bool) or not isinstance(label, (int, np.integer)):
        return f"the label must be an integer class index; got {type(label).__name__} {label!r}"
    if label < 0:
        return f"the label is {label}; labels must be >= 0"
    return int(label)


def _refuse_strictly(refused: dict[int, RowRefusal], n_rows: int) -> None:
    """Raise the first refusal of a call that asked for all or nothing (``strict``), if any."""
    if refused:
        first = min(refused.values(), key=lambda refusal: refusal.index)
        where = f"row {first.index}" + (f" (request id {first.request_id!r})" if first.request_id else "")
        raise ValueError(f"{where}: {first.reason}; nothing of the {n_rows} rows was written")


# --------------------------------------------------------------------------- the log


def _is_lock_conflict(error: DBAPIError) -> bool:
    """True when the database rolled the transaction back to break a deadlock or a serialization
    conflict (the driver's SQLSTATE: ``sqlstate`` in psycopg 3, ``pgcode`` in psycopg2)."""
    state = getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)
    return state in _LOCK_CONFLICT_STATES


# How long a SQLite connection waits for another writer's lock when the log has no timeout.
_SQLITE_BUSY_MS: Final = 30_000
# PostgreSQL drivers built on libpq, which read connect_timeout, tcp_user_timeout and options.
_LIBPQ_DRIVERS: Final = frozenset({"psycopg", "psycopg2", "psycopg2cffi"})


class _SqliteSetup:
    """The ``connect`` listener of a SQLite file's engine: WAL lets the monitor read while the
    serving wrapper writes; the busy timeout waits that long for the writer lock instead of
    failing at once."""

    def __init__(self, busy_ms: int) -> None:
        self.busy_ms = busy_ms

    def __call__(self, dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(self.busy_ms)}")
        cursor.close()


def _check_timeout(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be a finite number of seconds > 0 (or None: no bound); got {timeout!r}")
    return float(timeout)


def _bounded_connect_args(url: str | URL, timeout: float) -> dict[str, Any]:
    """The driver arguments that bound, by ``timeout`` seconds, how long a PostgreSQL connection
    may take to open and each statement may run; empty for other databases and drivers.

    With a libpq driver (psycopg, psycopg2): ``connect_timeout`` (whole seconds, at least 2:
    libpq's own floor), the server's ``statement_timeout`` (through ``options``) and
    ``tcp_user_timeout`` (how long sent data may stay unacknowledged before the client's kernel
    drops the connection: a network that swallows packets). A value the URL sets itself is kept.

    Examples
    --------
    >>> _bounded_connect_args("postgresql+psycopg://u@db/log", 1.5)
    {'connect_timeout': 2, 'tcp_user_timeout': 1500, 'options': '-c statement_timeout=1500'}
    >>> _bounded_connect_args("postgresql+psycopg://u@db/log?connect_timeout=10&options=-c%20search_path%3Dlog", 3)
    {'tcp_user_timeout': 3000, 'options': '-c statement_timeout=3000 -c search_path=log'}
    >>> _bounded_connect_args("sqlite:///log.db", 2.0)
    {}
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql" or parsed.get_driver_name() not in _LIBPQ_DRIVERS:
        return {}
    millis = max(1, round(timeout * 1000))
    args: dict[str, Any] = {}
    if "connect_timeout" not in parsed.query:
        args["connect_timeout"] = max(2, math.ceil(timeout))
    if "tcp_user_timeout" not in parsed.query:
        args["tcp_user_timeout"] = millis
    given = parsed.query.get("options", ())
    # The URL's own options come last: a statement_timeout it sets wins.
    args["options"] = " ".join([f"-c statement_timeout={millis}", *((given,) if isinstance(given, str) else given)])
    return args


class PredictionLog:
    """The prediction log in the database at ``url`` (any SQLAlchemy URL; SQLite file by default).

    A :class:`~monitoring.PredictionStore` that holds everything (:attr:`scope`).

    Parameters
    ----------
    url : str or sqlalchemy.engine.URL, default="sqlite:///prediction_log.db"
        Where the log lives, e.g. ``"sqlite:///.thermostat/predictions.db"`` or
        ``"postgresql+psycopg://user@host/db"``.
    engine : sqlalchemy.Engine, optional
        An engine to use instead of creating one from ``url`` (shared pools, tests).
    timeout : float, optional
        Seconds that opening a connection and running one statement may take (a serving
        process's log: a database that hangs must not hang its writer for long). PostgreSQL
        through psycopg or psycopg2: ``connect_timeout``, ``statement_timeout`` and
        ``tcp_user_timeout`` (a value the URL sets itself is kept); a SQLite file: the busy
        timeout (how long a write waits for another writer's lock). None (the default): the
        drivers' own, unbounded on PostgreSQL; 30 s of busy timeout on SQLite. Not applied to
        a given ``engine``.

    Notes
    -----
    Call :meth:`create` once (it is idempotent) before the first append. The engine's
    connection pool is released by :meth:`dispose`; the log is also a context manager.

    Examples
    --------
    >>> log = PredictionLog("sqlite://")  # in memory
    >>> log.create()
    >>> t = datetime(2026, 1, 1, 12, tzinfo=UTC)
    >>> log.append([PredictionRecord(t, "digits", "3", "req-1", [2.0, 0.5], 0, 0.82, 1.0)])
    1
    >>> log.attach_labels(["req-1", "req-9"], [0, 1]).unknown_request_ids
    ('req-9',)
    >>> log.count_labelled("digits", "3", t, datetime(2026, 1, 2, tzinfo=UTC))
    1
    >>> log.dispose()
    """

    def __init__(
        self, url: str | URL = "sqlite:///prediction_log.db", *, engine: Engine | None = None,
        timeout: float | None = None,
    ) -> None:
        self._timeout = _check_timeout(timeout)
        if engine is None:
            parsed = make_url(url)
            bounded = {} if self._timeout is None else _bounded_connect_args(parsed, self._timeout)
            engine = create_engine(parsed, **({"connect_args": bounded} if bounded else {}))
        if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
            busy_ms = _SQLITE_BUSY_MS if self._timeout is None else max(1, round(self._timeout * 1000))
            event.listen(engine, "connect", _SqliteSetup(busy_ms))
        self._engine = engine
        self._metadata, self._table, self._versions = _build_metadata()
        # A version's K never changes once logged (its first batch fixes it): read once per log.
        self._classes: dict[tuple[str, str], int] = {}

    @classmethod
    def existing(cls, url: str | URL) -> PredictionLog:
        """The log at ``url``, whose database must exist: a SQLite file that is not there is not
        created (connecting would create it, empty, and every version would read as never logged).

        Raises
        ------
        FileNotFoundError
            The SQLite file does not exist; the message names the URL (its password masked).
        """
        parsed = make_url(url)
        database = parsed.database
        if parsed.get_backend_name() == "sqlite" and database not in (None, "", ":memory:") and not (
            parsed.query.get("uri") or Path(database).is_file()
        ):
            raise FileNotFoundError(
                f"the prediction log {mask_url(parsed.render_as_string(hide_password=False))} does not exist (no file "
                f"{database}); point THERMOSTAT_PREDICTION_LOG_URL at the log the serving processes write"
            )
        return cls(parsed)

    # -- plumbing ----------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for dashboards and tests; the log owns its pool)."""
        return self._engine

    @property
    def timeout(self) -> float | None:
        """Seconds a connection may take to open and a statement to run (None: the drivers' own)."""
        return self._timeout

    def with_timeout(self, timeout: float) -> PredictionLog:
        """The same log through a new engine whose connections and statements are bounded by
        ``timeout`` seconds (see the class's ``timeout``): what a serving process writes with.
        (An in-memory SQLite database is not shared by a new engine: write to a file.)

        Examples
        --------
        >>> import tempfile
        >>> log = PredictionLog(f"sqlite:///{tempfile.mkdtemp()}/log.db")
        >>> bounded = log.with_timeout(1.5)
        >>> bounded.timeout, bounded.engine.url == log.engine.url
        (1.5, True)
        """
        return PredictionLog(self._engine.url, timeout=timeout)

    @property
    def table(self) -> Table:
        """The ``prediction_log`` table (read-only use: dashboards, ad-hoc SQL)."""
        return self._table

    @property
    def metadata(self) -> MetaData:
        """Both tables of the log (``prediction_log`` and ``prediction_log_versions``)."""
        return self._metadata

    @property
    def scope(self) -> StoreScope:
        """The :class:`~monitoring.StoreScope` of the log: every served row, label times, writable."""
        return _SQL_SCOPE

    def missing_tables(self) -> list[str]:
        """The log's tables the database does not hold (empty: it holds a prediction log).

        Examples
        --------
        >>> log = PredictionLog("sqlite://")
        >>> log.missing_tables()
        ['prediction_log', 'prediction_log_versions']
        >>> log.create(); log.missing_tables()
        []
        """
        inspector = inspect(self._engine)
        return [name for name in self._metadata.tables if not inspector.has_table(name)]

    def create(self) -> None:
        """Create the tables and indexes if they do not exist (idempotent; an index added in a
        later release is created on an existing table too)."""
        # Servers starting together on one new log race: another process may create a table
        # between our check and our CREATE, or hold SQLite's lock while it does. Then (a table of
        # ours is there now, or the file was busy) look again after a short, jittered pause; any
        # other refusal (a database that cannot be reached) is raised at once.
        for attempt in range(_CREATE_TRIES):
            try:
                self._metadata.create_all(self._engine, checkfirst=True)
                break
            except DBAPIError as error:
                if attempt == _CREATE_TRIES - 1 or not (_busy(error) or self._created_elsewhere()):
                    raise
                sleep(uniform(0.01, 0.05) * (attempt + 1))
        for table in self._metadata.sorted_tables:
            for index in table.indexes:
                try:
                    index.create(self._engine, checkfirst=True)
                except DBAPIError:  # another process created it between the check and ours
                    if index.name not in {i["name"] for i in inspect(self._engine).get_indexes(table.name)}:
                        raise

    def _created_elsewhere(self) -> bool:
        """Whether a table of the log exists now (another process created it); False when the
        database cannot even be asked."""
        try:
            return bool(set(inspect(self._engine).get_table_names()) & set(self._metadata.tables))
        except DBAPIError:
            return False

    def dispose(self) -> None:
        """Close the pooled connections."""
        self._engine.dispose()

    def __enter__(self) -> PredictionLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.dispose()

    def __repr__(self) -> str:
        return f"PredictionLog({mask_url(self._engine.url.render_as_string(hide_password=False))!r})"

    # -- writing -----------------------------------------------------------------------------

    def append(self, records: Sequence[PredictionRecord]) -> int:
        """Write a batch of predictions in one transaction; all rows or none.

        Parameters
        ----------
        records : sequence of PredictionRecord
            The batch. Rows may belong to several model versions.

        Returns
        -------
        int
            Number of rows written (``len(records)``).

        Raises
        ------
        PredictionRowError
            (a ``ValueError``) naming the row index and request id, when a row has
            non-finite logits, K < 2, a K different from another row of its version in the
            batch or from the version's K already in the log, a request id repeated in the
            batch or already in the log, a predicted class or label outside [0, K), a
            confidence outside [0, 1], a temperature that is not finite and > 0, a naive
            datetime, or an empty or over-long name. Nothing from the batch is written.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> ok = PredictionRecord(t, "m", "1", "a", [1.0, 0.0], 0, 0.73, 1.0)
        >>> bad = PredictionRecord(t, "m", "1", "b", [float("nan"), 0.0], 0, 0.5, 1.0)
        >>> try:
        ...     log.append([ok, bad])
        ... except PredictionRowError as error:
        ...     print(error.index, error.request_id)
        ...     print(error)
        1 b
        row 1 (request id 'b'): logits contain nan (as float32); every logit must be finite; nothing from the batch of 2 rows was written
        >>> log.count_rows()
        0
        """
        if isinstance(records, (str, bytes)) or not isinstance(records, Sequence):
            raise TypeError(f"records must be a sequence of PredictionRecord; got {type(records).__name__}")
        if len(records) == 0:
            return 0
        return self._insert(_records_to_columns(records, datetime.now(UTC)))

    def _insert(self, columns: _Columns) -> int:
        """Write a validated batch in one transaction, run again when the database says that is safe.

        PostgreSQL aborts one of two transactions that wait for each other (``deadlock_detected``)
        or that a serializable snapshot cannot order (``serialization_failure``): nothing of it
        was written, and the same transaction run again succeeds. A statement that finds its
        pooled connection dead (the database restarted since it was opened) invalidates the pool,
        and the batch is written again on a fresh connection, once; a connection lost during the
        commit is not retried (the batch may have been written).
        """
        n_rows = len(columns.request_id)
        conflicts = reconnects = 0
        while True:
            committing = False
            try:
                with self._engine.begin() as conn:
                    self._write_batch(conn, columns)
                    committing = True  # the block's end commits
                return n_rows
            except IntegrityError as exc:
                # A concurrent writer logged one of the same request ids between the check and the
                # insert (a version's K cannot clash: it is an upsert): the transaction was rolled back.
                raise ValueError(
                    f"the batch of {n_rows} rows was refused by the database and nothing was written "
                    f"(a concurrent writer logged the same request id): {exc.orig}"
                ) from exc
            except DBAPIError as exc:
                if _is_lock_conflict(exc) and conflicts < _LOCK_CONFLICT_RETRIES:
                    conflicts += 1
                    # Apart, so that the writers that met do not meet again at the same instant.
                    sleep(uniform(0.5, 1.0) * _LOCK_CONFLICT_BACKOFF * 2**conflicts)
                elif exc.connection_invalidated and not committing and reconnects < 1:
                    reconnects += 1
                else:
                    raise

    def _write_batch(self, conn: Connection, columns: _Columns) -> None:
        """The statements of :meth:`_insert`'s transaction."""
        table = self._table
        n_rows = len(columns.request_id)
        # The K of each version: fixed by its first batch, recorded in the same transaction. In
        # sorted order: two batches that bring the same new versions take their rows in the same
        # order, so neither holds one the other waits for while waiting for one the other holds.
        for (name, version), (k, first_row) in sorted(columns.versions.items()):
            known = self._register_version(conn, name, version, k, columns.time[first_row])
            if known != k:
                raise _row_error(
                    first_row, columns.request_id[first_row],
                    f"logits have {k} classes but {name!r} version {version!r} has {known} in the log; "
                    "every row of a version must have the same K",
                    n_rows,
                )  # fmt: skip
        # Request ids already in the log: name the first row that repeats one.
        existing: set[str] = set()
        for offset in range(0, n_rows, _IN_CHUNK):
            part = columns.request_id[offset : offset + _IN_CHUNK]
            existing.update(conn.execute(select(table.c.request_id).where(table.c.request_id.in_(part))).scalars())
        if existing:
            index = next(i for i, rid in enumerate(columns.request_id) if rid in existing)
            raise _row_error(
                index, columns.request_id[index],
                f"request id is already in the log ({len(existing)} of the batch are)", n_rows,
            )  # fmt: skip
        conn.execute(table.insert(), columns.rows())

    def _register_version(self, conn: Connection, name: str, version: str, k: int, first_logged_at: datetime) -> int:
        """The K of a version in the log, recording ``k`` as its K when it has none yet.

        Several replicas start serving a new version at once, so its first batches race: the
        row is inserted with ``ON CONFLICT DO NOTHING`` (SQLite, PostgreSQL; elsewhere an
        insert in a savepoint whose duplicate-key error is swallowed) and then read back, so
        the loser of the race gets the winner's K to check its rows against, never an error.
        """
        versions = self._versions
        key = and_(versions.c.model_name == name, versions.c.model_version == version)
        known = conn.execute(select(versions.c.n_classes).where(key)).scalar_one_or_none()
        if known is not None:
            return int(known)
        row = {"model_name": name, "model_version": version, "n_classes": k, "first_logged_at": first_logged_at}
        dialect = conn.dialect.name
        if dialect in ("sqlite", "postgresql"):
            upsert = (sqlite_insert if dialect == "sqlite" else postgresql_insert)(versions).values(**row)
            conn.execute(upsert.on_conflict_do_nothing(index_elements=[versions.c.model_name, versions.c.model_version]))
        else:
            try:
                with conn.begin_nested():
                    conn.execute(versions.insert().values(**row))
            except IntegrityError:
                pass  # another writer registered the version first: its K is read back below
        # In PostgreSQL (READ COMMITTED) a new statement sees the winner's committed row; in
        # SQLite this transaction now holds the write lock, taken after the winner committed.
        return int(conn.execute(select(versions.c.n_classes).where(key)).scalar_one())

    def attach_labels(
        self, request_ids: Sequence[str] | Sequence[object], labels: ArrayLike | Sequence[object], *,
        labelled_at: datetime | None = None, strict: bool = False,
    ) -> LabelAttachReport:
        """Attach late labels by request id, in one transaction; a bad row is refused alone.

        Parameters
        ----------
        request_ids : sequence of str
            The requests whose labels arrived.
        labels : array of shape (n_requests,)
            Their true classes, integers in [0, K) of each request's version.
        labelled_at : datetime, optional
            When the labels arrived (timezone-aware); default: now.
        strict : bool, default=False
            Refuse the whole call, writing nothing, when any row is refused (instead of
            attaching the good rows and reporting the bad ones).

        Returns
        -------
        LabelAttachReport
            Counts of newly attached and unchanged (same label again: idempotent) rows, the
            conflicts (a different label for an already labelled id, or two labels for one id
            in this call: left as they were), the unknown request ids and the refused rows (a
            label that is not an integer in [0, K) of its request's version, an id that is not
            a non-empty string of at most :data:`MAX_NAME_LENGTH` characters), each with its
            position and reason. The other rows are attached whatever the refused ones hold.

        Raises
        ------
        ValueError
            If the lengths differ; with ``strict``, if a row is refused (nothing is written then).

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> _ = log.append([PredictionRecord(t, "m", "1", f"r{i}", [1.0, 0.0], 0, 0.73, 1.0) for i in range(3)])
        >>> log.attach_labels(["r0"], [1]).attached
        1
        >>> report = log.attach_labels(["r0", "r0"], [1, 1])  # the same label again: unchanged, twice
        >>> report.unchanged, report.complete
        (2, True)
        >>> log.attach_labels(["r0"], [0]).conflicts
        (LabelConflict(request_id='r0', existing_label=1, new_label=0),)
        >>> report = log.attach_labels(["r1", "r2"], [5, 1])  # K = 2: the first row is refused, the second attached
        >>> report.attached, report.refused[0].reason
        (1, "label 5 is outside [0, 2) of model 'm' version '1'")
        """
        when = datetime.now(UTC) if labelled_at is None else as_utc(labelled_at, name="labelled_at")
        ids: list[object] = list(request_ids) if not isinstance(request_ids, str) else [request_ids]
        values = _label_values(labels, len(ids))
        refused: dict[int, RowRefusal] = {}
        # One label per id in this call: the same label twice is one request; two labels conflict.
        wanted: dict[str, int] = {}
        position: dict[str, int] = {}  # the first row of each id
        clashing: dict[str, tuple[int, int]] = {}
        repeated: dict[str, int] = {}  # rows repeating an earlier row of this call (same id, same label)
        for i, (rid, raw) in enumerate(zip(ids, values, strict=True)):
            value = _checked_label(rid, raw)
            if isinstance(value, str):
                refused[i] = RowRefusal(i, rid if isinstance(rid, str) and rid else None, value)
                continue
            key = str(rid)
            previous = wanted.setdefault(key, value)
            if key in position and previous == value:
                repeated[key] = repeated.get(key, 0) + 1
            position.setdefault(key, i)
            if previous != value:
                clashing[key] = (previous, value)
        for rid in clashing:
            del wanted[rid]
        if strict:
            _refuse_strictly(refused, len(ids))

        table = self._table
        conflicts = [LabelConflict(rid, first, second) for rid, (first, second) in clashing.items()]
        with self._engine.begin() as conn:
            found: dict[str, tuple[int, int, int | None, str, str]] = {}
            keys = list(wanted)
            for offset in range(0, len(keys), _IN_CHUNK):
                part = keys[offset : offset + _IN_CHUNK]
                rows = conn.execute(
                    select(table.c.request_id, table.c.id, table.c.n_classes, table.c.label, table.c.model_name,
                           table.c.model_version).where(table.c.request_id.in_(part))
                )
                found.update((rid, (row_id, k, label, name, version)) for rid, row_id, k, label, name, version in rows)
            unknown = tuple(rid for rid in keys if rid not in found)
            pending: dict[int, tuple[str, int]] = {}  # row id -> (request id, label), unlabelled when read
            unchanged = 0
            settled: list[str] = []  # ids whose label in the log is now the one asked for
            for rid, (row_id, k, existing, name, version) in found.items():
                value = wanted[rid]
                if value >= k:
                    index = position[rid]
                    refused[index] = RowRefusal(index, rid, f"label {value} is outside [0, {k}) of model {name!r} "
                                                            f"version {version!r}")
                elif existing is None:
                    pending[row_id] = (rid, value)
                elif existing == value:
                    unchanged += 1
                    settled.append(rid)
                else:
                    conflicts.append(LabelConflict(rid, int(existing), value))
            if strict:
                _refuse_strictly(refused, len(ids))
            # The report says what the database did: a row another caller labelled since the
            # read above is not updated (``label IS NULL``) and is re-read, then counted as
            # unchanged (same label) or a conflict (another label) like any labelled row.
            applied = self._write_labels(conn, pending, when) if pending else set()
            lost = sorted(set(pending) - applied)
            gone = set(lost)
            for offset in range(0, len(lost), _IN_CHUNK):
                lost_part = lost[offset : offset + _IN_CHUNK]
                reread = select(table.c.id, table.c.label).where(table.c.id.in_(lost_part))
                for row_id, existing in conn.execute(reread):
                    gone.discard(row_id)
                    rid, value = pending[row_id]
                    if existing == value:
                        unchanged += 1
                        settled.append(rid)
                    else:
                        conflicts.append(LabelConflict(rid, int(existing), value))
            # A row the read found and the write did not is gone: the retention deleted it in
            # between (an unlabelled row served before its cutoff). It is not in the log any more.
            unknown += tuple(sorted(pending[row_id][0] for row_id in gone))
        # A row that repeats one of this call is unchanged once that row's label is in the log.
        settled.extend(pending[row_id][0] for row_id in applied)
        unchanged += sum(repeated.get(rid, 0) for rid in settled)
        return LabelAttachReport(
            n_requested=len(ids),
            attached=len(applied),
            unchanged=unchanged,
            conflicts=tuple(conflicts),
            unknown_request_ids=unknown,
            refused=tuple(sorted(refused.values(), key=lambda refusal: refusal.index)),
        )

    def _write_labels(self, conn: Connection, pending: dict[int, tuple[str, int]], when: datetime) -> set[int]:
        """Label the rows of ``pending`` that are still unlabelled; the ids of the rows updated.

        ``UPDATE ... WHERE label IS NULL`` keeps a label written meanwhile by another caller,
        and the rows it updated are taken from the database (``RETURNING``, or the rowcount
        of a one-row update where the dialect has no ``UPDATE ... RETURNING``), never from
        what was asked. Rows are updated in ascending id chunks, one statement per chunk, so
        two callers labelling overlapping ids reach them in the same order (as deadlock
        avoidance in PostgreSQL asks).
        """
        table = self._table
        row_ids = sorted(pending)
        applied: set[int] = set()
        if not conn.dialect.update_returning:
            for row_id in row_ids:
                result = conn.execute(
                    update(table)
                    .where(table.c.id == row_id, table.c.label.is_(None))
                    .values(label=pending[row_id][1], labelled_at=when)
                )
                if result.rowcount == 1:
                    applied.add(row_id)
            return applied
        for offset in range(0, len(row_ids), _IN_CHUNK):
            part = row_ids[offset : offset + _IN_CHUNK]
            statement = (
                update(table)
                .where(table.c.id.in_(part), table.c.label.is_(None))
                .values(label=case({row_id: pending[row_id][1] for row_id in part}, value=table.c.id),
                        labelled_at=when)
                .returning(table.c.id)
            )  # fmt: skip
            applied.update(conn.execute(statement).scalars())
        return applied

    # -- reading -----------------------------------------------------------------------------

    def n_classes(self, model_name: str, model_version: str) -> int | None:
        """K of a version, or None if no prediction of that version was ever logged.

        A version's K is fixed by its first logged batch, so a K once read is remembered by this
        object (a check asks for it several times; a fleet's checks ask for every version's):
        only "never logged" is asked of the database again.
        """
        known = self._classes.get((model_name, model_version))
        if known is not None:
            return known
        versions = self._versions
        with self._engine.connect() as conn:
            value = conn.execute(
                select(versions.c.n_classes).where(
                    versions.c.model_name == model_name, versions.c.model_version == model_version
                )
            ).scalar_one_or_none()
        if value is None:
            return None
        self._classes[(model_name, model_version)] = int(value)
        return int(value)

    def logged_versions(self, model_name: str | None = None) -> dict[tuple[str, str], int]:
        """Every version ever logged (of ``model_name``, when given) and its K, in one read
        (remembered as :meth:`n_classes` does): what a check of many versions reads first.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> _ = log_predictions(log, "m", "1", 1.0, np.zeros((1, 3)), ["a"])
        >>> log.logged_versions()
        {('m', '1'): 3}
        """
        versions = self._versions
        statement = select(versions.c.model_name, versions.c.model_version, versions.c.n_classes)
        if model_name is not None:
            statement = statement.where(versions.c.model_name == model_name)
        with self._engine.connect() as conn:
            rows = conn.execute(statement).all()
        found = {(str(name), str(version)): int(k) for name, version, k in rows}
        self._classes.update(found)
        return found

    def count_rows(self) -> int:
        """Rows in the log (all versions, labelled or not)."""
        with self._engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(self._table)).scalar_one())

    def _window_filter(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, labelled_only: bool = True,
        labelled_from: datetime | None = None, labelled_to: datetime | None = None,
    ) -> Any:
        table = self._table
        clauses = [
            table.c.model_name == _check_name(model_name, name="model_name"),
            table.c.model_version == _check_name(model_version, name="model_version"),
            table.c.served_at >= start,
            table.c.served_at < end,
        ]
        if labelled_only:
            clauses.append(table.c.label.is_not(None))
        if labelled_from is not None:
            clauses.append(table.c.labelled_at >= labelled_from)
        if labelled_to is not None:
            clauses.append(table.c.labelled_at < labelled_to)
        return and_(*clauses)

    def delete_served_before(
        self, model_name: str, model_version: str, cutoff: datetime, *, unlabelled_only: bool = False,
        batch_size: int = 10_000, dry_run: bool = False,
    ) -> int:
        """Delete a version's rows served before ``cutoff``; how many (with ``dry_run``: would be).

        The retention's delete (:func:`monitoring.prune_prediction_log`). With ``unlabelled_only``
        only the rows without a label go, and the delete itself checks it on each row it removes:
        a row labelled meanwhile is kept (its label archived by the next prune), and a label that
        arrives after its row was deleted is reported as an unknown request id. The labelled rows
        leave by :meth:`delete_labelled`, once archived. Deleted in batches of ``batch_size``
        rows, oldest first, one short transaction each (on the version's serving-time index), so
        serving writers and label writers wait for one batch at most; a batch the database
        aborted to break a lock cycle runs again. The version's K (``prediction_log_versions``)
        is kept.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> _ = log_predictions(log, "m", "1", 1.0, [[1.0, 0.0]] * 3, ["a", "b", "c"],
        ...                     time=[t, t + timedelta(days=1), t + timedelta(days=2)])
        >>> _ = log.attach_labels(["a"], [0])
        >>> log.delete_served_before("m", "1", t + timedelta(days=2), dry_run=True), log.count_rows()
        (2, 3)
        >>> log.delete_served_before("m", "1", t + timedelta(days=2), unlabelled_only=True, batch_size=1)
        1
        >>> log.delete_served_before("m", "1", t + timedelta(days=2)), log.count_rows()
        (1, 1)
        """
        cutoff = as_utc(cutoff, name="cutoff")
        batch_size = check_chunk_size(batch_size)
        table = self._table
        where = self._window_filter(model_name, model_version, _BEGINNING, cutoff, labelled_only=False)
        if unlabelled_only:
            where = and_(where, table.c.label.is_(None))
        if dry_run:
            with self._engine.connect() as conn:
                return int(conn.execute(select(func.count()).select_from(table).where(where)).scalar_one())
        batch = select(table.c.id).where(where).order_by(table.c.served_at, table.c.id).limit(batch_size)
        statement = table.delete().where(table.c.id.in_(batch.scalar_subquery()))
        if unlabelled_only:
            # Checked again on the row being deleted (PostgreSQL re-evaluates the outer condition
            # on a row updated since the subquery's snapshot): a label written meanwhile keeps it.
            statement = statement.where(table.c.label.is_(None))
        # A short batch is the last one, except when rows were labelled meanwhile (unlabelled_only):
        # then only an empty one is.
        last = 1 if unlabelled_only else batch_size
        deleted = 0
        while True:
            done = self._commit_retrying(lambda conn: int(conn.execute(statement).rowcount))
            deleted += done
            if done < last:
                return deleted

    def delete_labelled(self, row_ids: ArrayLike, request_ids: Sequence[str], *, batch_size: int = 10_000) -> int:
        """Delete the labelled rows with these log row ids, each still holding its request id; how many.

        The retention's delete of archived rows (:func:`monitoring.prune_prediction_log`): it
        passes the rows of a day the log has (:meth:`iter_labelled_ids`) whose request id the
        day's archived file holds, so a row leaves the log only if the archive has it. By row id
        (primary-key lookups: a day's range of the serving-time index is not walked again for
        every batch); ``batch_size`` rows per transaction, in the order given; a batch the
        database aborted to break a lock cycle runs again.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> _ = log_predictions(log, "m", "1", 1.0, [[1.0, 0.0]] * 3, ["a", "b", "c"], time=t)
        >>> _ = log.attach_labels(["a", "b"], [0, 1])
        >>> log.delete_labelled([1, 3, 2], ["a", "c", "x"]), log.count_rows()  # "c" is unlabelled; 2 is not "x"
        (1, 2)
        """
        batch_size = check_chunk_size(batch_size)
        pairs = [{"row_id": row_id, "request_id": request_id} for row_id, request_id in
                 zip(np.asarray(row_ids, dtype=np.int64).tolist(), request_ids, strict=True)]  # fmt: skip
        table = self._table
        # One statement run for every row of a batch (the driver's executemany): no IN list to
        # expand, and the database sums the rows each run deleted.
        statement = table.delete().where(table.c.id == bindparam("row_id"), table.c.request_id == bindparam("request_id"),
                                         table.c.label.is_not(None))  # fmt: skip

        def delete_batch(conn: Connection, batch: list[dict[str, Any]]) -> int:
            return int(conn.execute(statement, batch).rowcount)

        return sum(self._commit_retrying(partial(delete_batch, batch=pairs[offset : offset + batch_size]))
                   for offset in range(0, len(pairs), batch_size))  # fmt: skip

    def _commit_retrying(self, work: Callable[[Connection], int]) -> int:
        """``work(conn)`` in one transaction, run again (up to ``_LOCK_CONFLICT_RETRIES`` times)
        when the database rolled it back whole to break a lock cycle; what ``work`` returned."""
        conflicts = 0
        while True:
            try:
                with self._engine.begin() as conn:
                    return work(conn)
            except DBAPIError as exc:
                if not _is_lock_conflict(exc) or conflicts >= _LOCK_CONFLICT_RETRIES:
                    raise
                conflicts += 1
                sleep(uniform(0.5, 1.0) * _LOCK_CONFLICT_BACKOFF * 2**conflicts)

    def count_labelled(self, model_name: str, model_version: str, start: datetime, end: datetime) -> int:
        """Number of labelled rows of a version served in [start, end).

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> log.count_labelled("m", "1", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))
        0
        """
        start, end = check_window(start, end)
        where = self._window_filter(model_name, model_version, start, end)
        with self._engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(self._table).where(where)).scalar_one())

    def served_rows(self, model_name: str, model_version: str, start: datetime, end: datetime) -> tuple[int, datetime | None]:
        """How many rows of a version were served in [start, end), labelled or not, and when the
        last of them was (``(0, None)``: none); :meth:`served_tally`'s first figures.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> _ = log_predictions(log, "m", "1", 1.0, [[1.0, 0.0]] * 2, ["a", "b"], time=[t, t + timedelta(hours=1)])
        >>> n, last = log.served_rows("m", "1", t, t + timedelta(days=1))
        >>> n, last == t + timedelta(hours=1), log.served_rows("m", "2", t, t + timedelta(days=1))
        (2, True, (0, None))
        """
        tally = self.served_tally(model_name, model_version, start, end)
        return tally.rows, tally.last_served_at

    def served_tally(
        self, model_name: str, model_version: str, start: datetime, end: datetime | None = None
    ) -> ServedTally:
        """The version's rows served in [start, end) (``end`` None: every row since ``start``), as a
        :class:`ServedTally`.

        The last row is found first, at the end of the version's serving-time index; the rows and
        their labels are counted only when there is one, so asking about a version that no longer
        serves costs one index look-up.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> _ = log_predictions(log, "m", "1", 1.5, [[1.0, 0.0]] * 2, ["a", "b"], time=[t, t + timedelta(hours=1)])
        >>> _ = log.attach_labels(["a"], [0])
        >>> tally = log.served_tally("m", "1", t)
        >>> tally.rows, tally.labelled_rows, tally.last_served_at == t + timedelta(hours=1), tally.last_temperature
        (2, 1, True, 1.5)
        """
        start, end = check_window(start, _END_OF_TIME if end is None else end)
        table = self._table
        where = self._window_filter(model_name, model_version, start, end, labelled_only=False)
        with self._engine.connect() as conn:
            last = conn.execute(select(table.c.served_at, table.c.temperature).where(where)
                                .order_by(table.c.served_at.desc(), table.c.id.desc()).limit(1)).one_or_none()
            if last is None:
                return ServedTally(0, 0, None, None)
            rows, labelled = conn.execute(select(func.count(), func.count(table.c.label)).where(where)).one()
        return ServedTally(int(rows), int(labelled), last[0], float(last[1]))

    def ping(self) -> None:
        """Ask the database for one row of nothing: raises what the database raises when it cannot answer."""
        with self._engine.connect() as conn:
            conn.execute(select(literal(1)))

    def labelled_fingerprint(
        self, model_name: str, model_version: str, start: datetime, end: datetime
    ) -> LabelledFingerprint:
        """The :class:`LabelledFingerprint` of a version's labelled rows served in [start, end).

        One aggregate query (count, first and last serving time, last labelling time, largest
        row id) on the window's index range: an export compares it with what it wrote to tell
        whether a day has to be written again.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> _ = log.append([PredictionRecord(t, "m", "1", "a", [1.0, 0.0], 0, 0.73, 1.0, label=0, labelled_at=t)])
        >>> fingerprint = log.labelled_fingerprint("m", "1", t, t + timedelta(days=1))
        >>> fingerprint.n_rows, fingerprint.last_labelled_at == t, fingerprint.last_row_id
        (1, True, 1)
        >>> log.labelled_fingerprint("m", "1", t + timedelta(days=1), t + timedelta(days=2)).n_rows
        0
        """
        start, end = check_window(start, end)
        table = self._table
        where = self._window_filter(model_name, model_version, start, end)
        statement = select(
            func.count(), func.min(table.c.served_at), func.max(table.c.served_at),
            func.max(table.c.labelled_at), func.max(table.c.id),
        ).where(where)  # fmt: skip
        with self._engine.connect() as conn:
            n_rows, first, last, labelled, row_id = conn.execute(statement).one()
        return LabelledFingerprint(
            n_rows=int(n_rows), first_served_at=first, last_served_at=last, last_labelled_at=labelled,
            last_row_id=None if row_id is None else int(row_id),
        )

    def iter_labelled(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = 50_000,
        labelled_from: datetime | None = None, labelled_to: datetime | None = None,
        order: Literal["served", "labelled"] = "served",
    ) -> Iterator[LabelledChunk]:
        """Stream the labelled rows of a version served in [start, end), in (time, id) order.

        The window is on the serving time: a label attached later makes its row appear in
        the window it was served in. Pages with a keyset on (time, id), one short read per
        chunk, so memory is bounded by ``chunk_size`` whatever the window's size. Rows
        written or labelled while the iteration runs appear if they sort after the current
        position. ``labelled_from`` / ``labelled_to`` keep only the rows whose label was
        attached in [labelled_from, labelled_to) (the new labels since a previous read:
        :class:`NewlyLabelled`). ``order="labelled"`` pages by (labelling time, id) instead, on
        the index of labelling times: the read for the few rows labelled in a short range among
        many served over a long one (late labels of old rows), which the serving-time index would
        find only by reading every row served in that range.

        Parameters
        ----------
        model_name, model_version : str
            The serving version.
        start, end : datetime
            Timezone-aware bounds of the half-open window [start, end).
        chunk_size : int, default=50_000
            Largest number of rows per chunk (>= 1).
        labelled_from, labelled_to : datetime, optional
            Timezone-aware bounds on the labelling time (either may be omitted).
        order : {"served", "labelled"}, default="served"
            The order of the rows (and chunks): by (serving time, id) or (labelling time, id).

        Yields
        ------
        LabelledChunk
            Non-empty chunks of at most ``chunk_size`` rows.

        Raises
        ------
        ValueError
            If a bound is naive, ``end < start``, ``chunk_size < 1``, or a stored row is
            inconsistent with its version's K.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> rows = [PredictionRecord(t + timedelta(seconds=i), "m", "1", f"r{i}", [i, 0.0], 0, 0.5, 1.0, label=1)
        ...         for i in range(5)]
        >>> _ = log.append(rows)
        >>> [len(c) for c in log.iter_labelled("m", "1", t, t + timedelta(hours=1), chunk_size=2)]
        [2, 2, 1]
        """
        start, end = check_window(start, end)
        chunk_size = check_chunk_size(chunk_size)
        labelled_from = None if labelled_from is None else as_utc(labelled_from, name="labelled_from")
        labelled_to = None if labelled_to is None else as_utc(labelled_to, name="labelled_to")
        if order not in ("served", "labelled"):
            raise ValueError(f"order must be 'served' or 'labelled'; got {order!r}")
        table = self._table
        columns = _labelled_columns(table)
        where = self._window_filter(model_name, model_version, start, end, labelled_from=labelled_from,
                                    labelled_to=labelled_to)
        if order == "served":
            for rows in self._pages(columns, where, chunk_size):
                yield _chunk_from_rows(zip(*rows, strict=True), model_name, model_version)
            return
        # Paged on the labelling time; the serving time comes as a column of its own.
        served = type_coerce(table.c.served_at, DateTime(timezone=True))
        for rows in self._pages((served, *columns), where, chunk_size, key=table.c.labelled_at):
            _, _, *rest = zip(*rows, strict=True)
            yield _chunk_from_rows([(), *rest], model_name, model_version)

    def iter_labelled_ids(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = 50_000
    ) -> Iterator[tuple[NDArray[np.int64], NDArray[np.object_]]]:
        """The (log row ids, request ids) of a version's labelled rows served in [start, end), in
        (time, id) order, at most ``chunk_size`` rows at a time: what the export and the retention
        compare with an archived day, without reading the logits.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> _ = log_predictions(log, "m", "1", 1.0, [[1.0, 0.0]] * 3, ["a", "b", "c"], time=t)
        >>> _ = log.attach_labels(["a", "c"], [0, 1])
        >>> [(rows.tolist(), ids.tolist()) for rows, ids in log.iter_labelled_ids("m", "1", t, t + timedelta(days=1))]
        [([1, 3], ['a', 'c'])]
        """
        start, end = check_window(start, end)
        chunk_size = check_chunk_size(chunk_size)
        where = self._window_filter(model_name, model_version, start, end)
        for rows in self._pages((self._table.c.request_id,), where, chunk_size):
            row_ids, _, request_ids = zip(*rows, strict=True)
            yield np.array(row_ids, dtype=np.int64), np.array(request_ids, dtype=object)

    def iter_labelled_rows(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = 50_000
    ) -> Iterator[tuple[NDArray[np.int64], LabelledChunk]]:
        """:meth:`iter_labelled` (in (time, id) order) with each chunk's log row ids: (row ids, chunk).

        What the export stores with each row, so that a day it merges keeps the log's order.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> _ = log_predictions(log, "m", "1", 1.0, [[1.0, 0.0]] * 2, ["a", "b"], time=t)
        >>> _ = log.attach_labels(["b"], [1])
        >>> [(rows.tolist(), chunk.request_ids.tolist()) for rows, chunk in
        ...  log.iter_labelled_rows("m", "1", t, t + timedelta(days=1))]
        [([2], ['b'])]
        """
        start, end = check_window(start, end)
        chunk_size = check_chunk_size(chunk_size)
        where = self._window_filter(model_name, model_version, start, end)
        for rows in self._pages(_labelled_columns(self._table), where, chunk_size):
            columns = list(zip(*rows, strict=True))
            yield np.array(columns[0], dtype=np.int64), _chunk_from_rows(columns, model_name, model_version)

    def iter_served(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = 50_000,
        labelled_from: datetime | None = None, labelled_to: datetime | None = None,
    ) -> Iterator[ServedChunk]:
        """Stream **every** row of a version served in [start, end), labelled or not, in (time, id) order.

        What the early warning reads (:func:`monitoring.confidence_profile`): the traffic before
        its labels arrive, and what a check's one pass reads (:func:`monitoring.scan_window`).
        Same paging as :meth:`iter_labelled`; unlabelled rows have label -1. A chunk's
        ``arrived`` marks the rows whose label was attached in [labelled_from, labelled_to)
        (either bound may be omitted; both omitted: every labelled row), ``settling`` those
        attached at or after ``labelled_to`` (given), computed by the database. A Parquet export holds labelled rows only, so this reads the SQL log.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> rows = [PredictionRecord(t + timedelta(seconds=i), "m", "1", f"r{i}", [i, 0.0], 0, 0.5, 1.0,
        ...                          label=1 if i < 2 else None) for i in range(5)]
        >>> _ = log.append(rows)
        >>> [chunk.labels.tolist() for chunk in log.iter_served("m", "1", t, t + timedelta(hours=1), chunk_size=3)]
        [[1, 1, -1], [-1, -1]]
        """
        start, end = check_window(start, end)
        chunk_size = check_chunk_size(chunk_size)
        table = self._table
        since = None if labelled_from is None else as_utc(labelled_from, name="labelled_from")
        until = None if labelled_to is None else as_utc(labelled_to, name="labelled_to")
        bounds: list[ColumnElement[bool]] = [table.c.label.is_not(None)]
        if since is not None:
            bounds.append(table.c.labelled_at >= since)
        if until is not None:
            bounds.append(table.c.labelled_at < until)
        # 1: arrived in the range; 2: after its end (the next increment's); 0: unlabelled, or before.
        after = None if until is None else table.c.labelled_at >= until
        arrived = case((and_(*bounds), literal(1)), *(() if after is None else ((after, literal(2)),)),
                       else_=literal(0))
        columns = (table.c.n_classes, table.c.logits, func.coalesce(table.c.label, -1), table.c.temperature,
                   table.c.group_key, arrived)
        where = self._window_filter(model_name, model_version, start, end, labelled_only=False)
        for rows in self._pages(columns, where, chunk_size):
            _, times, n_classes, blobs, labels, temperature, groups, flags = zip(*rows, strict=True)
            yield ServedChunk(
                time=_times(times),
                logits=_logits(n_classes, blobs, model_name, model_version),
                labels=np.array(labels, dtype=np.int64),
                temperature=np.array(temperature, dtype=np.float64),
                groups=np.array(groups, dtype=object),
                arrived=(codes := np.array(flags, dtype=np.int8)) == 1,
                settling=None if after is None else codes == 2,
            )

    def _pages(
        self, columns: tuple[Any, ...], where: Any, chunk_size: int, *, key: Column[datetime] | None = None
    ) -> Iterator[Sequence[Any]]:
        """Rows (id, key, *columns) matching ``where`` in (key, id) order, ``chunk_size`` at a time,
        by keyset: one short read transaction per page. ``key`` is a time column (default:
        ``served_at``), never NULL in the rows ``where`` keeps."""
        table = self._table
        key = table.c.served_at if key is None else key
        # The time column without UTCDateTime's per-row result processing: naive UTC in SQLite,
        # aware in PostgreSQL; _times converts the whole column at once.
        head = (table.c.id, type_coerce(key, DateTime(timezone=True)))
        base = select(*head, *columns).where(where).order_by(key, table.c.id).limit(chunk_size)
        last: tuple[datetime, int] | None = None
        while True:
            statement = base if last is None else base.where(tuple_(key, table.c.id) > last)
            with self._engine.connect() as conn:
                rows = conn.execute(statement).all()
            if not rows:
                return
            last_time: datetime = rows[-1][1]
            last = (last_time if last_time.tzinfo else last_time.replace(tzinfo=UTC), rows[-1][0])
            yield rows
            if len(rows) < chunk_size:
                return


def _logits(n_classes: Sequence[int], blobs: Sequence[bytes], model_name: str, model_version: str) -> NDArray[np.float32]:
    k = int(n_classes[0])
    # A bytearray, not bytes: the array must be writable (numba compiles read-only arrays separately).
    logits = np.frombuffer(bytearray().join(blobs), dtype="<f4")
    if len(set(n_classes)) != 1 or logits.shape[0] != k * len(blobs):
        raise ValueError(
            f"the log holds rows of {model_name!r} version {model_version!r} with different numbers of "
            f"classes ({sorted(set(n_classes))}); the table was written around PredictionLog's checks"
        )
    return logits.reshape(len(blobs), k).astype(np.float32, copy=False)


def _times(times: Sequence[datetime]) -> NDArray[np.datetime64]:
    return np.array(
        times if times[0].tzinfo is None else [t.astimezone(UTC).replace(tzinfo=None) for t in times],
        dtype="datetime64[us]",
    )


def _labelled_columns(table: Table) -> tuple[Column[Any], ...]:
    """The columns a :class:`LabelledChunk` is made of, after the page's (id, time) head."""
    return (
        table.c.request_id, table.c.n_classes, table.c.logits,
        table.c.label, table.c.group_key, table.c.predicted_class, table.c.confidence, table.c.temperature,
    )  # fmt: skip


def _chunk_from_rows(columns: Iterable[Sequence[Any]], model_name: str, model_version: str) -> LabelledChunk:
    """A chunk from the columns (id, served_at, request_id, n_classes, logits, label, group_key,
    predicted_class, confidence, temperature) of a page."""
    _, times, request_ids, n_classes, blobs, labels, groups, predicted, confidence, temperature = columns
    return LabelledChunk(
        request_ids=np.array(request_ids, dtype=object),
        time=_times(times),
        logits=_logits(n_classes, blobs, model_name, model_version),
        labels=np.array(labels, dtype=np.int64),
        groups=np.array(groups, dtype=object),
        predicted_class=np.array(predicted, dtype=np.int64),
        confidence=np.array(confidence, dtype=np.float64),
        temperature=np.array(temperature, dtype=np.float64),
    )


class NewlyLabelled:
    """The log seen as a labelled source of only the rows whose label arrived in [since, until).

    What the sequential rule's increment reads (:func:`monitoring.update_sequential`): the
    monitor summarises its window through this view, so each labelled row counts in exactly one
    increment — the check after its label arrived — whatever the delay between serving and
    labelling (as long as the row is still in the window). ``since`` None: every label
    attached before ``until``.

    Examples
    --------
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> _ = log.append([PredictionRecord(t, "m", "1", f"r{i}", [1.0, 0.0], 0, 0.73, 1.0) for i in range(3)])
    >>> _ = log.attach_labels(["r0"], [0], labelled_at=t + timedelta(hours=1))
    >>> _ = log.attach_labels(["r1", "r2"], [0, 1], labelled_at=t + timedelta(hours=2))
    >>> view = NewlyLabelled(log, since=t + timedelta(hours=2), until=t + timedelta(hours=3))
    >>> [len(chunk) for chunk in view.iter_labelled("m", "1", t, t + timedelta(days=1))]
    [2]
    """

    def __init__(self, log: PredictionLog, *, since: datetime | None, until: datetime) -> None:
        self.log = log
        self.since = None if since is None else as_utc(since, name="since")
        self.until = as_utc(until, name="until")

    def __repr__(self) -> str:
        since = "start" if self.since is None else self.since.isoformat()
        return f"NewlyLabelled({self.log!r}, labelled in [{since}, {self.until.isoformat()}))"

    def n_classes(self, model_name: str, model_version: str) -> int | None:
        """K of the version, or None when the log holds nothing of it."""
        return self.log.n_classes(model_name, model_version)

    def iter_labelled(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = 50_000
    ) -> Iterator[LabelledChunk]:
        """The rows served in [start, end) whose label was attached in [since, until)."""
        return self.log.iter_labelled(model_name, model_version, start, end, chunk_size=chunk_size,
                                      labelled_from=self.since, labelled_to=self.until)


# --------------------------------------------------------------------------- serving helper


def _broadcast(value: object, n_rows: int, name: str) -> list[object]:
    if value is None or isinstance(value, (str, datetime)):
        return [value] * n_rows
    values: list[object] = list(value)  # type: ignore[call-overload]
    if len(values) != n_rows:
        raise ValueError(f"{name} has {len(values)} entries but logits have {n_rows} rows; they must match")
    return values


def log_predictions(
    log: PredictionLog,
    model_name: str,
    model_version: str,
    temperature: float,
    logits: ArrayLike,
    request_ids: Sequence[str],
    groups: Sequence[str | None] | str | None = None,
    time: datetime | Sequence[datetime] | None = None,
    *,
    labels: ArrayLike | None = None,
) -> int:
    """Log a served batch: predicted class and confidence at ``temperature``, then append.

    The serving wrapper calls this with the logits it scored, so a served model feeds its
    own monitor. The confidence is softmax(z / T) of the top class (first arg-max).

    Parameters
    ----------
    log : PredictionLog
        Where to write.
    model_name, model_version : str
        The serving version.
    temperature : float
        The T in force (finite, > 0).
    logits : array of shape (n_samples, n_classes)
        The raw (uncalibrated) logits; stored as float32.
    request_ids : sequence of str
        One unique id per row.
    groups : str or sequence of (str or None), optional
        Group of each row (one str for all rows).
    time : datetime or sequence of datetime, optional
        Serving time (timezone-aware); default: now, for all rows.
    labels : array of shape (n_samples,), optional
        True classes when already known (e.g. replayed traffic); usually attached later.

    Returns
    -------
    int
        Rows written.

    Raises
    ------
    ValueError
        As :meth:`PredictionLog.append` (:class:`PredictionRowError` for a bad row), or if
        a per-row argument's length differs from the number of rows.

    Examples
    --------
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> log_predictions(log, "m", "1", 2.0, np.array([[2.0, 0.0], [0.0, 1.0]]), ["a", "b"], groups="web")
    2
    """
    checked = check_logits(logits)
    temperature = check_temperature(temperature)
    n_rows = checked.shape[0]
    ids = list(request_ids) if not isinstance(request_ids, str) else [request_ids]
    if len(ids) != n_rows:
        raise ValueError(f"request_ids has {len(ids)} entries but logits have {n_rows} rows; they must match")
    # The log stores float32: compute what was served from the values that will be read back.
    stored = checked.astype(np.float32)
    # Non-finite float32 values are refused row by row below, as a PredictionRowError.
    predicted, confidence = top_label_confidence(stored, temperature=temperature, check_finite=False)
    now = datetime.now(UTC)
    label_values: list[object]
    if labels is None:
        label_values = [None] * n_rows
    else:
        label_array = np.asarray(labels)
        if label_array.shape != (n_rows,) or label_array.dtype.kind not in "iu":
            raise ValueError(
                f"labels must be integers of shape ({n_rows},); got dtype {label_array.dtype}, shape {label_array.shape}"
            )
        label_values = list(label_array.tolist())
    columns = _validate_columns(
        time=_broadcast(now if time is None else time, n_rows, "time"),
        model_name=[model_name] * n_rows,
        model_version=[model_version] * n_rows,
        request_id=list(ids),
        flat_logits=stored.ravel(),
        n_classes=np.full(n_rows, checked.shape[1], dtype=np.int64),
        predicted_class=predicted.astype(np.int64),
        confidence=np.clip(confidence, 0.0, 1.0),
        temperature=np.full(n_rows, temperature),
        group=_broadcast(groups, n_rows, "groups"),
        label=label_values,
        labelled_at=[None] * n_rows,
        now=now,
    )
    return log._insert(columns)  # noqa: SLF001 - the module's own fast path


# --------------------------------------------------------------------------- opening


def default_log_url(state_dir: str | Path = DEFAULT_STATE_DIR) -> str:
    """The prediction log's URL when none is set: the SQLite file ``predictions.db`` in the state folder
    (as an absolute path: the URL means the same file from any working directory).

    Examples
    --------
    >>> default_log_url("/srv/thermostat")
    'sqlite:////srv/thermostat/predictions.db'
    """
    return f"sqlite:///{Path(state_dir).absolute() / 'predictions.db'}"


def open_prediction_log(url: str | URL, *, must_exist: bool = False) -> PredictionLog:
    """The prediction log at ``url``, its tables created if missing (idempotent) and, for a SQLite
    file, its folder; with ``must_exist`` (for reading) a SQLite file that is not there is a
    :class:`FileNotFoundError` naming the URL instead (:meth:`PredictionLog.existing`).

    Examples
    --------
    >>> import tempfile
    >>> log = open_prediction_log(default_log_url(Path(tempfile.mkdtemp()) / "state"))
    >>> log.count_rows()
    0
    >>> log.dispose()
    """
    parsed = make_url(url)
    if must_exist:
        log = PredictionLog.existing(parsed)
    else:
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:") \
                and not parsed.query.get("uri"):
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        log = PredictionLog(parsed)
    try:
        log.create()
    except BaseException:
        log.dispose()
        raise
    return log
