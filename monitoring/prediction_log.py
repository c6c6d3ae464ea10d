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

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from random import uniform
from time import sleep
from typing import Any, Final, Literal

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
from .urls import mask_url

__all__ = [
    "MAX_NAME_LENGTH",
    "LabelAttachReport",
    "LabelConflict",
    "LabelledChunk",
    "LabelledFingerprint",
    "NewlyLabelled",
    "PredictionLog",
    "PredictionRecord",
    "PredictionRowError",
    "ServedChunk",
    "log_predictions",
]

MAX_NAME_LENGTH: Final = 255
"""Longest model name, model version, request id or group the log stores."""

# The earliest serving time a window can start at (every row of a version is served after it).
_BEGINNING: Final = datetime(1, 1, 2, tzinfo=UTC)

# SQLite allows 32766 bound parameters per statement (999 before 3.32); stay far below both.
_IN_CHUNK: Final = 500

# A batch aborted by the database to break a lock cycle is written again up to this many times,
# after about 0.1, 0.2, 0.4 s (doubling, with jitter).
_LOCK_CONFLICT_RETRIES: Final = 3
_LOCK_CONFLICT_BACKOFF: Final = 0.05
# SQLSTATEs of a transaction the database rolled back whole and that may simply run again:
# serialization_failure and deadlock_detected.
_LOCK_CONFLICT_STATES: Final = frozenset({"40001", "40P01"})


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
class LabelConflict:
    """A label that disagrees with the one already attached (not applied)."""

    request_id: str
    existing_label: int
    new_label: int


@dataclass(frozen=True, slots=True)
class LabelAttachReport:
    """What :meth:`PredictionLog.attach_labels` did with each requested id.

    ``attached`` rows got their label now (as the database reports the rows it updated);
    ``unchanged`` already had that same label (idempotent re-delivery); ``conflicts`` already
    had a different label, or were given two different labels in one call, and were left as
    they were; ``unknown_request_ids`` are not in the log (a label that arrived before its
    prediction, or a wrong id). A row labelled by a concurrent call first is unchanged or a
    conflict, never attached twice.
    """

    n_requested: int
    attached: int
    unchanged: int
    conflicts: tuple[LabelConflict, ...]
    unknown_request_ids: tuple[str, ...]

    @property
    def complete(self) -> bool:
        """True when every requested label is now in the log as requested."""
        return not self.conflicts and not self.unknown_request_ids


@dataclass(frozen=True, slots=True, eq=False)
class _ChunkRows:
    """What every chunk read from the log holds per row, in (time, id) order: ``time`` UTC as
    ``datetime64[us]``, ``logits`` the stored float32 values, ``labels``, ``groups`` (str or None)
    and ``temperature``, the T in force when the row was served."""

    time: NDArray[np.datetime64]
    logits: NDArray[np.float32]
    labels: NDArray[np.int64]
    groups: NDArray[np.object_]
    temperature: NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True, slots=True, eq=False)
class LabelledChunk(_ChunkRows):
    """One chunk of labelled rows of a version, in (time, id) order: the rows' ``time``,
    ``logits``, ``labels``, ``groups`` and served ``temperature`` (as :class:`ServedChunk`), with
    their ``request_ids`` and the ``predicted_class`` and ``confidence`` logged when served."""

    request_ids: NDArray[np.object_]
    predicted_class: NDArray[np.int64]
    confidence: NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class ServedChunk(_ChunkRows):
    """One chunk of a version's served rows, labelled or not, in (time, id) order: the per-row
    fields every chunk holds, ``labels`` -1 where no label was attached yet, and ``arrived`` True
    where the label was attached in the labelling range the read asked for (every labelled row
    when it asked for none)."""

    arrived: NDArray[np.bool_]

    @property
    def labelled(self) -> NDArray[np.bool_]:
        """True for the rows whose label has arrived."""
        return self.labels >= 0


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

    def rows(self) -> list[dict[str, Any]]:
        keys = (
            "served_at", "model_name", "model_version", "request_id", "n_classes", "logits",
            "predicted_class", "confidence", "temperature", "group_key", "label", "labelled_at",
        )  # fmt: skip
        columns = (
            self.time, self.model_name, self.model_version, self.request_id, self.n_classes.tolist(),
            self.logits_bytes, self.predicted_class.tolist(), self.confidence.tolist(),
            self.temperature.tolist(), self.group, self.label, self.labelled_at,
        )  # fmt: skip
        return [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]


def _row_error(index: int, request_id: str | None, message: str, n_rows: int) -> PredictionRowError:
    where = f"row {index}" + (f" (request id {request_id!r})" if request_id is not None else "")
    return PredictionRowError(
        f"{where}: {message}; nothing from the batch of {n_rows} rows was written", index=index, request_id=request_id
    )


def _first(mask: NDArray[np.bool_]) -> int | None:
    """Index of the first True, or None."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None


def _validate_columns(
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
) -> _Columns:
    """Check a whole batch (vectorised where the data are numeric) and return it in column form."""
    n_rows = len(request_id)
    ids: list[str] = []
    for i, value in enumerate(request_id):
        try:
            ids.append(_check_name(value, name="request_id"))
        except (TypeError, ValueError) as exc:
            raise _row_error(i, None, str(exc), n_rows) from exc
    names: list[str] = []
    versions: list[str] = []
    for i, (name, version) in enumerate(zip(model_name, model_version, strict=True)):
        try:
            names.append(_check_name(name, name="model_name"))
            versions.append(_check_name(version, name="model_version"))
        except (TypeError, ValueError) as exc:
            raise _row_error(i, ids[i], str(exc), n_rows) from exc
    times: list[datetime] = []
    for i, value in enumerate(time):
        try:
            times.append(as_utc(value, name="time"))
        except (TypeError, ValueError) as exc:
            raise _row_error(i, ids[i], str(exc), n_rows) from exc
    groups: list[str | None] = []
    for i, value in enumerate(group):
        try:
            groups.append(None if value is None else _check_name(value, name="group"))
        except (TypeError, ValueError) as exc:
            raise _row_error(i, ids[i], str(exc), n_rows) from exc

    # Duplicate request ids inside the batch: name the second occurrence.
    _, first_index, inverse = np.unique(np.asarray(ids, dtype=object), return_index=True, return_inverse=True)
    repeated = _first(first_index[inverse] != np.arange(n_rows))
    if repeated is not None:
        earlier = int(first_index[inverse[repeated]])
        raise _row_error(repeated, ids[repeated], f"request id repeats row {earlier} of the same batch", n_rows)

    # Number of classes: >= 2, and one K per (model, version) inside the batch.
    too_few = _first(n_classes < 2)
    if too_few is not None:
        raise _row_error(too_few, ids[too_few], f"logits have {n_classes[too_few]} value(s); K >= 2 is required", n_rows)
    version_k: dict[tuple[str, str], tuple[int, int]] = {}
    for i, key in enumerate(zip(names, versions, strict=True)):
        known = version_k.setdefault(key, (int(n_classes[i]), i))
        if known[0] != n_classes[i]:
            raise _row_error(
                i, ids[i],
                f"logits have {n_classes[i]} classes but row {known[1]} of {key[0]!r} version {key[1]!r} "
                f"in the same batch has {known[0]}; every row of a version must have the same K",
                n_rows,
            )  # fmt: skip

    # Finite logits (in float32: a float64 beyond float32's range would be stored as inf).
    offsets = np.concatenate(([0], np.cumsum(n_classes)[:-1]))
    bad_values = np.add.reduceat((~np.isfinite(flat_logits)).astype(np.int64), offsets)
    bad = _first(bad_values > 0)
    if bad is not None:
        row = flat_logits[offsets[bad] : offsets[bad] + n_classes[bad]]
        raise _row_error(
            bad, ids[bad],
            f"logits contain {row[~np.isfinite(row)][0]} (as float32); every logit must be finite",
            n_rows,
        )  # fmt: skip

    predicted = _integers(predicted_class, "predicted_class", ids, n_rows)
    outside = _first((predicted < 0) | (predicted >= n_classes))
    if outside is not None:
        raise _row_error(
            outside, ids[outside],
            f"predicted_class is {predicted[outside]}; it must be in [0, {n_classes[outside]})", n_rows,
        )  # fmt: skip
    confidences = _floats(confidence, "confidence", ids, n_rows)
    outside = _first(~((confidences >= 0.0) & (confidences <= 1.0)))
    if outside is not None:
        raise _row_error(outside, ids[outside], f"confidence is {confidences[outside]}; it must be in [0, 1]", n_rows)
    temperatures = _floats(temperature, "temperature", ids, n_rows)
    outside = _first(~(np.isfinite(temperatures) & (temperatures > 0.0)))
    if outside is not None:
        raise _row_error(
            outside, ids[outside], f"temperature is {temperatures[outside]}; it must be finite and > 0", n_rows
        )

    labels: list[int | None] = []
    label_times: list[datetime | None] = []
    for i, (value, when) in enumerate(zip(label, labelled_at, strict=True)):
        if value is None:
            if when is not None:
                raise _row_error(i, ids[i], "labelled_at is given without a label", n_rows)
            labels.append(None)
            label_times.append(None)
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise _row_error(i, ids[i], f"label must be an integer or None; got {value!r}", n_rows)
        if not 0 <= value < n_classes[i]:
            raise _row_error(i, ids[i], f"label is {value}; it must be in [0, {n_classes[i]})", n_rows)
        labels.append(int(value))
        try:
            label_times.append(now if when is None else as_utc(when, name="labelled_at"))
        except (TypeError, ValueError) as exc:
            raise _row_error(i, ids[i], str(exc), n_rows) from exc

    raw = flat_logits.astype("<f4", copy=False).tobytes()
    starts = (offsets * 4).tolist()
    ends = ((offsets + n_classes) * 4).tolist()
    return _Columns(
        time=times,
        model_name=names,
        model_version=versions,
        request_id=ids,
        logits_bytes=[raw[a:b] for a, b in zip(starts, ends, strict=True)],
        n_classes=n_classes,
        predicted_class=predicted,
        confidence=confidences,
        temperature=temperatures,
        group=groups,
        label=labels,
        labelled_at=label_times,
        versions=version_k,
    )


def _integers(values: list[object] | NDArray[Any], name: str, ids: list[str], n_rows: int) -> NDArray[np.int64]:
    array = np.asarray(values)
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    for i, value in enumerate(array.tolist()):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _row_error(i, ids[i], f"{name} must be an integer; got {value!r}", n_rows)
    raise AssertionError("unreachable: a non-integer array without a non-integer element")  # pragma: no cover


def _floats(values: list[object] | NDArray[Any], name: str, ids: list[str], n_rows: int) -> NDArray[np.float64]:
    array = np.asarray(values)
    if array.dtype.kind in "iuf":
        return array.astype(np.float64)
    for i, value in enumerate(array.tolist()):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _row_error(i, ids[i], f"{name} must be a number; got {value!r}", n_rows)
    raise AssertionError("unreachable: a non-numeric array without a non-numeric element")  # pragma: no cover


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


# --------------------------------------------------------------------------- the log


def _is_lock_conflict(error: DBAPIError) -> bool:
    """True when the database rolled the transaction back to break a deadlock or a serialization
    conflict (the driver's SQLSTATE: ``sqlstate`` in psycopg 3, ``pgcode`` in psycopg2)."""
    state = getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)
    return state in _LOCK_CONFLICT_STATES


def _enable_sqlite_wal(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets the monitor read while the serving wrapper writes; busy_timeout waits for the
    # writer lock instead of failing at once.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


class PredictionLog:
    """The prediction log in the database at ``url`` (any SQLAlchemy URL; SQLite file by default).

    Parameters
    ----------
    url : str or sqlalchemy.engine.URL, default="sqlite:///prediction_log.db"
        Where the log lives, e.g. ``"sqlite:///.thermostat/predictions.db"`` or
        ``"postgresql+psycopg://user@host/db"``.
    engine : sqlalchemy.Engine, optional
        An engine to use instead of creating one from ``url`` (shared pools, tests).

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

    def __init__(self, url: str | URL = "sqlite:///prediction_log.db", *, engine: Engine | None = None) -> None:
        if engine is None:
            parsed = make_url(url)
            engine = create_engine(parsed)
        if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
            event.listen(engine, "connect", _enable_sqlite_wal)
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
        from pathlib import Path

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
    def table(self) -> Table:
        """The ``prediction_log`` table (read-only use: dashboards, ad-hoc SQL)."""
        return self._table

    @property
    def metadata(self) -> MetaData:
        """Both tables of the log (``prediction_log`` and ``prediction_log_versions``)."""
        return self._metadata

    def create(self) -> None:
        """Create the tables and indexes if they do not exist (idempotent; an index added in a
        later release is created on an existing table too)."""
        self._metadata.create_all(self._engine, checkfirst=True)
        for table in self._metadata.sorted_tables:
            for index in table.indexes:
                try:
                    index.create(self._engine, checkfirst=True)
                except DBAPIError:  # another process created it between the check and ours
                    if index.name not in {i["name"] for i in inspect(self._engine).get_indexes(table.name)}:
                        raise

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
        self, request_ids: Sequence[str], labels: ArrayLike, *, labelled_at: datetime | None = None
    ) -> LabelAttachReport:
        """Attach late labels by request id, in one transaction.

        Parameters
        ----------
        request_ids : sequence of str
            The requests whose labels arrived.
        labels : array of shape (n_requests,)
            Their true classes, integers in [0, K) of each request's version.
        labelled_at : datetime, optional
            When the labels arrived (timezone-aware); default: now.

        Returns
        -------
        LabelAttachReport
            Counts of newly attached and unchanged (same label again: idempotent) rows, the
            conflicts (a different label for an already labelled id, or two labels for one id
            in this call: left as they were) and the unknown request ids.

        Raises
        ------
        TypeError
            If the ids are not strings or the labels not integers.
        ValueError
            If the lengths differ, or a label is outside [0, K) of its request's version
            (nothing is written then).

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> _ = log.append([PredictionRecord(t, "m", "1", "a", [1.0, 0.0], 0, 0.73, 1.0)])
        >>> log.attach_labels(["a"], [1]).attached
        1
        >>> report = log.attach_labels(["a", "a"], [1, 1])
        >>> report.unchanged, report.complete
        (1, True)
        >>> log.attach_labels(["a"], [0]).conflicts
        (LabelConflict(request_id='a', existing_label=1, new_label=0),)
        """
        when = datetime.now(UTC) if labelled_at is None else as_utc(labelled_at, name="labelled_at")
        ids = list(request_ids) if not isinstance(request_ids, str) else [request_ids]
        for i, rid in enumerate(ids):
            if not isinstance(rid, str):
                raise TypeError(f"request_ids[{i}] must be a str; got {type(rid).__name__} {rid!r}")
        label_array = np.asarray(labels)
        if label_array.ndim != 1 or label_array.shape[0] != len(ids):
            raise ValueError(
                f"labels must be 1-D with one label per request id ({len(ids)}); got shape {label_array.shape}"
            )
        if len(ids) == 0:
            return LabelAttachReport(0, 0, 0, (), ())
        if label_array.dtype.kind not in "iu":
            raise TypeError(f"labels must be integers; got dtype {label_array.dtype}")
        negative = _first(label_array < 0)
        if negative is not None:
            raise ValueError(
                f"labels[{negative}] (request id {ids[negative]!r}) is {label_array[negative]}; labels must be >= 0"
            )
        # One label per id in this call: the same label twice is one request; two labels conflict.
        wanted: dict[str, int] = {}
        clashing: dict[str, tuple[int, int]] = {}
        for rid, value in zip(ids, label_array.tolist(), strict=True):
            previous = wanted.setdefault(rid, value)
            if previous != value:
                clashing[rid] = (previous, value)
        for rid in clashing:
            del wanted[rid]

        table = self._table
        conflicts = [LabelConflict(rid, first, second) for rid, (first, second) in clashing.items()]
        with self._engine.begin() as conn:
            found: dict[str, tuple[int, int, int | None]] = {}
            keys = list(wanted)
            for offset in range(0, len(keys), _IN_CHUNK):
                part = keys[offset : offset + _IN_CHUNK]
                rows = conn.execute(
                    select(table.c.request_id, table.c.id, table.c.n_classes, table.c.label).where(
                        table.c.request_id.in_(part)
                    )
                )
                found.update((rid, (row_id, k, label)) for rid, row_id, k, label in rows)
            unknown = tuple(rid for rid in keys if rid not in found)
            pending: dict[int, tuple[str, int]] = {}  # row id -> (request id, label), unlabelled when read
            unchanged = 0
            for rid, (row_id, k, existing) in found.items():
                value = wanted[rid]
                if value >= k:
                    raise ValueError(
                        f"label {value} for request id {rid!r} is outside [0, {k}) of its version; "
                        "nothing was written"
                    )
                if existing is None:
                    pending[row_id] = (rid, value)
                elif existing == value:
                    unchanged += 1
                else:
                    conflicts.append(LabelConflict(rid, int(existing), value))
            # The report says what the database did: a row another caller labelled since the
            # read above is not updated (``label IS NULL``) and is re-read, then counted as
            # unchanged (same label) or a conflict (another label) like any labelled row.
            applied = self._write_labels(conn, pending, when) if pending else set()
            lost = sorted(set(pending) - applied)
            for offset in range(0, len(lost), _IN_CHUNK):
                lost_part = lost[offset : offset + _IN_CHUNK]
                reread = select(table.c.id, table.c.label).where(table.c.id.in_(lost_part))
                for row_id, existing in conn.execute(reread):
                    rid, value = pending[row_id]
                    if existing == value:
                        unchanged += 1
                    else:
                        conflicts.append(LabelConflict(rid, int(existing), value))
        return LabelAttachReport(
            n_requested=len(ids),
            attached=len(applied),
            unchanged=unchanged,
            conflicts=tuple(conflicts),
            unknown_request_ids=unknown,
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

    def logged_versions(self) -> dict[tuple[str, str], int]:
        """Every version ever logged and its K, in one read (remembered as :meth:`n_classes` does):
        what a check of many versions reads first.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> _ = log_predictions(log, "m", "1", 1.0, np.zeros((1, 3)), ["a"])
        >>> log.logged_versions()
        {('m', '1'): 3}
        """
        versions = self._versions
        with self._engine.connect() as conn:
            rows = conn.execute(select(versions.c.model_name, versions.c.model_version, versions.c.n_classes)).all()
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
        self, model_name: str, model_version: str, cutoff: datetime, *, keep_labelled_after: datetime | None = None,
        batch_size: int = 10_000, dry_run: bool = False,
    ) -> int:
        """Delete a version's rows served before ``cutoff``; how many (with ``dry_run``: would be).

        The retention's delete (:func:`monitoring.prune_prediction_log`). Rows labelled after
        ``keep_labelled_after`` are kept (their labels are not in the archive yet: the next
        prune archives, then deletes them); None deletes every row served before ``cutoff``.
        Deleted in batches of ``batch_size`` rows, oldest first, one short transaction each (on
        the version's serving-time index), so serving writers and label writers wait for one
        batch at most. The version's K (``prediction_log_versions``) is kept.

        Examples
        --------
        >>> log = PredictionLog("sqlite://"); log.create()
        >>> t = datetime(2026, 1, 1, tzinfo=UTC)
        >>> _ = log_predictions(log, "m", "1", 1.0, [[1.0, 0.0]] * 3, ["a", "b", "c"],
        ...                     time=[t, t + timedelta(days=1), t + timedelta(days=2)])
        >>> log.delete_served_before("m", "1", t + timedelta(days=2), dry_run=True), log.count_rows()
        (2, 3)
        >>> log.delete_served_before("m", "1", t + timedelta(days=2), batch_size=1), log.count_rows()
        (2, 1)
        """
        cutoff = as_utc(cutoff, name="cutoff")
        batch_size = check_chunk_size(batch_size)
        table = self._table
        where = self._window_filter(model_name, model_version, _BEGINNING, cutoff, labelled_only=False)
        if keep_labelled_after is not None:
            kept = as_utc(keep_labelled_after, name="keep_labelled_after")
            where = and_(where, (table.c.label.is_(None)) | (table.c.labelled_at <= kept))
        if dry_run:
            with self._engine.connect() as conn:
                return int(conn.execute(select(func.count()).select_from(table).where(where)).scalar_one())
        batch = select(table.c.id).where(where).order_by(table.c.served_at, table.c.id).limit(batch_size)
        deleted = 0
        while True:
            with self._engine.begin() as conn:
                done = conn.execute(table.delete().where(table.c.id.in_(batch.scalar_subquery()))).rowcount
            deleted += done
            if done < batch_size:
                return deleted

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
        columns = (
            table.c.request_id, table.c.n_classes, table.c.logits,
            table.c.label, table.c.group_key, table.c.predicted_class, table.c.confidence, table.c.temperature,
        )  # fmt: skip
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

    def iter_served(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = 50_000,
        labelled_from: datetime | None = None, labelled_to: datetime | None = None,
    ) -> Iterator[ServedChunk]:
        """Stream **every** row of a version served in [start, end), labelled or not, in (time, id) order.

        What the early warning reads (:func:`monitoring.confidence_profile`): the traffic before
        its labels arrive, and what a check's one pass reads (:func:`monitoring.scan_window`).
        Same paging as :meth:`iter_labelled`; unlabelled rows have label -1. A chunk's
        ``arrived`` marks the rows whose label was attached in [labelled_from, labelled_to)
        (either bound may be omitted; both omitted: every labelled row), computed by the
        database. A Parquet export holds labelled rows only, so this reads the SQL log.

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
        bounds: list[ColumnElement[bool]] = [table.c.label.is_not(None)]
        for bound, name, keep in ((labelled_from, "labelled_from", table.c.labelled_at.__ge__),
                                  (labelled_to, "labelled_to", table.c.labelled_at.__lt__)):
            if bound is not None:
                bounds.append(keep(as_utc(bound, name=name)))
        arrived = case((and_(*bounds), literal(1)), else_=literal(0))
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
                arrived=np.array(flags, dtype=bool),
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
