"""Ingest: served predictions from any stack into the prediction log, a bad row refused alone.

What the ingestion service (``thermostat ingest``), the command line (``thermostat log FILE``)
and the light client (:mod:`thermostat.log`) share:

* :class:`PredictionBatch` — rows to log, checked row by row with the rules of
  :meth:`PredictionLog.append`: the rows that pass, and the refused ones with their reasons
  (:class:`RowRefusal`). Built from JSON-like rows (:meth:`PredictionBatch.from_rows`: the
  service's and the files' form) or from arrays (:meth:`PredictionBatch.from_arrays`:
  :func:`log_predictions`' arguments). The predicted class and the confidence are computed
  here, softmax(z / T) of the logits as the log stores them (float32), never taken from the
  caller.
* :func:`write_predictions` — writes a batch and says what became of each row
  (:class:`IngestReport`): ``written``; ``unchanged``, a row whose request id the log already
  holds with the same prediction (a re-sent request: ingest is idempotent by request id); or
  refused, with the reason (a request id the log holds for another prediction, a K other than
  the version's in the log, or a rule of the batch's own). The good rows are written whatever
  the bad ones hold, unless the caller asks for all or nothing (``atomic``). On PostgreSQL
  with psycopg 3 the rows go in with one binary ``COPY`` (the fast path); a batch that meets
  a request id already in the log is written again with ``INSERT ... ON CONFLICT DO NOTHING
  RETURNING`` to tell which rows were new. Other databases take that second form directly.
* :class:`IngestQueue` — one writer thread for many callers: what they submit is written in
  shared batches (a group commit: while one batch is written the next one gathers), and a
  submission is refused, not queued, while more rows wait than the queue may hold (the
  ingestion service answers 429 with a ``Retry-After`` from the measured write rate).
"""

from __future__ import annotations

import math
import threading
import time as _time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from datetime import UTC, datetime
from random import uniform
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from calibration import JsonResult, top_label_confidence

from .prediction_log import (
    _IN_CHUNK,
    _LOCK_CONFLICT_BACKOFF,
    _LOCK_CONFLICT_RETRIES,
    _LOCK_CONFLICT_STATES,
    _ROW_KEYS,
    PredictionLog,
    RowRefusal,
    _Columns,
    _screen_columns,
)

__all__ = ["IngestQueue", "IngestQueueStats", "IngestReport", "PredictionBatch", "write_predictions"]

#: The fields of a prediction row (:meth:`PredictionBatch.from_rows`); ``group``, ``served_at``
#: and ``label`` are optional, the first three may come from the batch's defaults.
ROW_FIELDS: Final = ("model_name", "model_version", "temperature", "request_id", "logits", "group", "served_at",
                     "label")
_DEFAULTABLE: Final = ("model_name", "model_version", "temperature", "group")
_REQUIRED: Final = ("model_name", "model_version", "temperature", "request_id", "logits")
_WRITTEN, _UNCHANGED, _REFUSED = 0, 1, 2
_COPY_TYPES: Final = ("timestamptz", "text", "text", "text", "int4", "bytea", "int4", "float8", "float8", "text",
                      "int4", "timestamptz")


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class IngestReport(JsonResult):
    """What became of each row of a batch of predictions.

    ``received`` rows came in; ``written`` are in the log now; ``unchanged`` were already in
    it, the same prediction under the same request id (a re-sent request); ``refused`` were
    not written, each with its position in the input and why. ``received == written +
    unchanged + len(refused)``.
    """

    received: int
    written: int
    unchanged: int
    refused: tuple[RowRefusal, ...]

    @property
    def complete(self) -> bool:
        """True when every row received is in the log."""
        return not self.refused


# --------------------------------------------------------------------------- a batch


class PredictionBatch:
    """Rows of served predictions, checked row by row: the rows to write and the refused ones.

    Built by :meth:`from_rows` or :meth:`from_arrays`, never directly. ``refused`` holds the
    rows refused by the checks (position in the input, request id, reason); the others are
    written by :func:`write_predictions` (or an :class:`IngestQueue`).
    """

    __slots__ = ("columns", "n_received", "refused")

    def __init__(self, columns: _Columns, n_received: int, refused: tuple[RowRefusal, ...]) -> None:
        self.columns = columns
        self.n_received = n_received
        self.refused = refused

    def __len__(self) -> int:
        """Rows that passed the checks (to be written)."""
        return len(self.columns.request_id)

    def __repr__(self) -> str:
        return f"PredictionBatch({self.n_received} rows received, {len(self)} to write, {len(self.refused)} refused)"

    @classmethod
    def from_rows(
        cls, rows: Sequence[object], *, defaults: Mapping[str, object] | None = None, now: datetime | None = None
    ) -> PredictionBatch:
        """A batch from JSON-like rows, each a mapping with the keys of :data:`ROW_FIELDS`.

        ``model_name``, ``model_version``, ``temperature`` (the T in force), ``request_id``
        (unique, the id labels are attached with), ``logits`` (a list of K >= 2 numbers, the
        raw logits z), optionally ``group``, ``served_at`` (an ISO 8601 time with a timezone,
        or an aware datetime; default: ``now``) and ``label``. ``defaults`` gives
        ``model_name``, ``model_version``, ``temperature`` or ``group`` to the rows that do not
        have their own. Other keys are ignored. A row that is not a mapping, misses a field,
        or breaks a rule of the log is refused alone.

        Examples
        --------
        >>> batch = PredictionBatch.from_rows(
        ...     [{"request_id": "a", "logits": [2.0, 0.0]}, {"request_id": "b", "logits": [1.0]}],
        ...     defaults={"model_name": "m", "model_version": "1", "temperature": 1.5})
        >>> len(batch), [(r.index, r.reason) for r in batch.refused]
        (1, [(1, 'logits have 1 value(s); K >= 2 is required')])
        """
        now = datetime.now(UTC) if now is None else now
        base = dict(defaults or {})
        refused: dict[int, tuple[str | None, str]] = {}
        mappings: list[Mapping[str, object]] = []
        for i, row in enumerate(rows):
            if isinstance(row, Mapping):
                mappings.append(row)
            else:
                mappings.append({})
                refused[i] = (None, f"a row must be an object with the fields {', '.join(_REQUIRED)}; got "
                                    f"{type(row).__name__}")
        fields: dict[str, list[object]] = {
            name: [row.get(name, default) for row in mappings]
            for name in ROW_FIELDS for default in [base.get(name) if name in _DEFAULTABLE else None]
        }
        for name in _REQUIRED:
            for i, value in enumerate(fields[name]):
                if value is None and i not in refused:
                    request_id = fields["request_id"][i]
                    missing = [field for field in _REQUIRED if fields[field][i] is None]
                    refused[i] = (request_id if isinstance(request_id, str) else None,
                                  f"missing {', '.join(missing)} (neither in the row nor in the batch's defaults)")
        times = [now if value is None else _served_at(value, now, refused, i, fields["request_id"][i])
                 for i, value in enumerate(fields["served_at"])]
        flat, n_classes = _ragged_logits(fields["logits"], refused, fields["request_id"])
        return cls._screened(fields, times, flat, n_classes, refused, now)

    @classmethod
    def from_arrays(
        cls, model_name: str, model_version: str, temperature: float, logits: ArrayLike, request_ids: Sequence[str],
        *, groups: Sequence[str | None] | str | None = None, time: datetime | Sequence[datetime] | None = None,
        labels: Sequence[int | None] | None = None,
    ) -> PredictionBatch:
        """A batch of one version's rows in :func:`log_predictions`' form (one row of ``logits``,
        shape (n, K), per request id); a bad row is refused alone, as in :meth:`from_rows`.

        Raises
        ------
        ValueError
            If ``logits`` is not a 2-D array of numbers or a per-row argument's length differs
            from its number of rows (the batch itself is malformed, not a row).

        Examples
        --------
        >>> batch = PredictionBatch.from_arrays("m", "1", 1.0, [[1.0, 0.0], [np.nan, 0.0]], ["a", "b"])
        >>> len(batch), batch.refused[0].reason
        (1, 'logits contain nan (as float32); every logit must be finite')
        """
        now = datetime.now(UTC)
        with np.errstate(over="ignore"):
            block = np.asarray(logits, dtype=np.float64).astype(np.float32)
        if block.ndim != 2:
            raise ValueError(f"logits must have shape (n_samples, n_classes); got shape {block.shape}")
        n_rows = block.shape[0]
        ids: list[object] = [request_ids] if isinstance(request_ids, str) else list(request_ids)
        per_row: dict[str, list[object]] = {"request_ids": ids, "groups": _spread(groups, n_rows),
                                            "time": _spread(now if time is None else time, n_rows),
                                            "labels": _spread(labels, n_rows)}
        for name, values in per_row.items():
            if len(values) != n_rows:
                raise ValueError(f"{name} has {len(values)} entries but logits have {n_rows} rows; they must match")
        fields: dict[str, list[object]] = {
            "model_name": [model_name] * n_rows, "model_version": [model_version] * n_rows,
            "temperature": [temperature] * n_rows, "request_id": ids, "group": per_row["groups"],
            "label": per_row["labels"],
        }
        n_classes = np.full(n_rows, block.shape[1], dtype=np.int64)
        return cls._screened(fields, per_row["time"], block.ravel(), n_classes, {}, now)

    @classmethod
    def _screened(
        cls, fields: dict[str, list[object]], times: list[object], flat: NDArray[np.float32],
        n_classes: NDArray[np.int64], refused: dict[int, tuple[str | None, str]], now: datetime,
    ) -> PredictionBatch:
        """Check every row (the log's rules) and compute the kept rows' predicted class and confidence."""
        n_rows = len(fields["request_id"])
        columns, found = _screen_columns(
            time=times, model_name=fields["model_name"], model_version=fields["model_version"],
            request_id=fields["request_id"], flat_logits=flat, n_classes=n_classes,
            predicted_class=np.zeros(n_rows, dtype=np.int64), confidence=np.zeros(n_rows),
            temperature=fields["temperature"], group=fields["group"], label=fields["label"],
            labelled_at=[None] * n_rows, now=now, refused=refused,
        )
        _top_labels(columns, flat, n_classes)
        refusals = tuple(RowRefusal(i, request_id, reason) for i, (request_id, reason) in sorted(found.items()))
        return cls(columns, n_rows, refusals)


def _spread(value: object, n_rows: int) -> list[object]:
    """One value for every row, or the values of a sequence as they are."""
    if value is None or isinstance(value, (str, datetime)) or not isinstance(value, Iterable):
        return [value] * n_rows
    return list(value)


def _served_at(value: object, now: datetime, refused: dict[int, tuple[str | None, str]], index: int,
               request_id: object) -> object:
    """A row's serving time: ``now`` when absent, an ISO 8601 string parsed (the screen then
    refuses a time without a timezone), an unreadable one refused."""
    if value is None:
        return now
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            refused.setdefault(index, (request_id if isinstance(request_id, str) else None,
                                       f"served_at {value[:60]!r} is not an ISO 8601 time (e.g. "
                                       "2026-03-01T12:00:00Z)"))
            return now
    return value


def _ragged_logits(
    values: list[object], refused: dict[int, tuple[str | None, str]], request_ids: list[object]
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """Every row's logits as float32, in one flat array, and each row's K (0 for a refused row)."""
    n_rows = len(values)
    if not refused:
        try:
            block = np.array(values)
        except (ValueError, TypeError):  # rows of different lengths, nested lists
            block = np.empty(0)
        if block.ndim == 2 and block.dtype.kind in "iuf" and block.shape[0] == n_rows:
            with np.errstate(over="ignore"):
                return block.astype(np.float32).ravel(), np.full(n_rows, block.shape[1], dtype=np.int64)
    parts: list[NDArray[np.float32]] = []
    n_classes = np.zeros(n_rows, dtype=np.int64)
    for i, value in enumerate(values):
        if i in refused:
            continue
        try:
            row = np.array(value)
        except (ValueError, TypeError):
            row = np.empty((0, 0))
        if row.ndim != 1 or row.dtype.kind not in "iuf":
            rid = request_ids[i]
            refused[i] = (rid if isinstance(rid, str) else None,
                          "logits must be a list of numbers (the raw logits z, one per class)")
            continue
        with np.errstate(over="ignore"):
            parts.append(row.astype(np.float32))
        n_classes[i] = row.shape[0]
    return (np.concatenate(parts) if parts else np.empty(0, dtype=np.float32)), n_classes


def _top_labels(columns: _Columns, flat: NDArray[np.float32], n_classes: NDArray[np.int64]) -> None:
    """The kept rows' predicted class and confidence at their T, softmax(z / T) of the stored float32
    logits, computed per group of rows that share K and T (as :func:`log_predictions` computes them)."""
    keep = columns.positions
    if keep is None or keep.size == 0:
        return
    ks = n_classes[keep]
    predicted = np.empty(keep.size, dtype=np.int64)
    confidence = np.empty(keep.size, dtype=np.float64)
    uniform = bool((n_classes == ks[0]).all())  # every row of the input has one K: one matrix
    offsets = None if uniform else np.concatenate(([0], np.cumsum(n_classes)[:-1]))
    for k in np.unique(ks).tolist():
        in_k = np.flatnonzero(ks == k)
        if offsets is None:
            rows = flat.reshape(-1, k)[keep]
        else:
            rows = np.stack([flat[start:start + k] for start in offsets[keep[in_k]].tolist()])
        temperatures = columns.temperature[in_k]
        for temperature in np.unique(temperatures).tolist():
            at = np.flatnonzero(temperatures == temperature)
            top, conf = top_label_confidence(rows[at], temperature=temperature, check_finite=False)
            predicted[in_k[at]] = top
            confidence[in_k[at]] = np.clip(conf, 0.0, 1.0)
    columns.predicted_class = predicted
    columns.confidence = confidence


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What became of each row of a written :class:`_Columns`: ``status`` (written, unchanged,
    refused) and, for the refused ones, why."""

    status: NDArray[np.int8]
    reasons: dict[int, str]


def write_predictions(log: PredictionLog, batch: PredictionBatch, *, atomic: bool = False) -> IngestReport:
    """Write the rows of ``batch`` that passed its checks; report every row of the input.

    Parameters
    ----------
    log : PredictionLog
        Where to write (its tables must exist: :meth:`PredictionLog.create`).
    batch : PredictionBatch
        The rows.
    atomic : bool, default=False
        All or nothing: when any row is refused (by the batch's checks or at the write),
        nothing is written and the report says why.

    Returns
    -------
    IngestReport

    Examples
    --------
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> rows = [{"request_id": "a", "logits": [2.0, 0.0]}, {"request_id": "b", "logits": [0.0, "x"]}]
    >>> defaults = {"model_name": "m", "model_version": "1", "temperature": 1.0}
    >>> report = write_predictions(log, PredictionBatch.from_rows(rows, defaults=defaults))
    >>> report.written, report.refused[0].reason
    (1, 'logits must be a list of numbers (the raw logits z, one per class)')
    >>> write_predictions(log, PredictionBatch.from_rows(rows[:1], defaults=defaults)).unchanged  # sent again
    1
    """
    if atomic and batch.refused:
        return _nothing_written(batch)
    outcome = _write(log, batch.columns, atomic=atomic)
    return _report(batch, outcome, 0)


_NOT_WRITTEN: Final = "not written: another row was refused and the write was asked to be all or nothing"


def _nothing_written(batch: PredictionBatch) -> IngestReport:
    """The report of an all-or-nothing batch with a refused row: every other row unwritten too."""
    positions = batch.columns.positions
    ids = batch.columns.request_id
    unwritten = [RowRefusal(int(positions[j]) if positions is not None else j, rid, _NOT_WRITTEN)
                 for j, rid in enumerate(ids)]
    return IngestReport(batch.n_received, 0, 0,
                        tuple(sorted((*batch.refused, *unwritten), key=lambda refusal: refusal.index)))


def _report(batch: PredictionBatch, outcome: _Outcome, start: int) -> IngestReport:
    """The report of ``batch``, whose rows are ``outcome``'s from ``start`` on."""
    status = outcome.status[start:start + len(batch)]
    positions = batch.columns.positions
    ids = batch.columns.request_id
    late = [RowRefusal(int(positions[j]) if positions is not None else j, ids[j], outcome.reasons[start + j])
            for j in np.flatnonzero(status == _REFUSED).tolist()]
    refused = tuple(sorted((*batch.refused, *late), key=lambda refusal: refusal.index))
    return IngestReport(batch.n_received, int(np.count_nonzero(status == _WRITTEN)),
                        int(np.count_nonzero(status == _UNCHANGED)), refused)


def _sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of a database error, raised by SQLAlchemy (its ``orig``) or by psycopg itself."""
    state = getattr(getattr(error, "orig", error), "sqlstate", None)
    return state if isinstance(state, str) else None


def _write(log: PredictionLog, columns: _Columns, *, atomic: bool) -> _Outcome:
    """Write ``columns`` in one transaction, run again (up to 3 times) when the database aborted it
    to break a lock cycle; every row's outcome."""
    n_rows = len(columns.request_id)
    if n_rows == 0:
        return _Outcome(np.empty(0, dtype=np.int8), {})
    attempt = 0
    while True:
        try:
            return _write_once(log, columns, atomic=atomic)
        except Exception as error:
            if _sqlstate(error) in _LOCK_CONFLICT_STATES and attempt < _LOCK_CONFLICT_RETRIES:
                attempt += 1
                _time.sleep(uniform(0.5, 1.0) * _LOCK_CONFLICT_BACKOFF * 2**attempt)
                continue
            raise


class _Rollback(Exception):
    """Raised inside the transaction of an ``atomic`` write that refused a row: nothing is kept."""

    def __init__(self, outcome: _Outcome) -> None:
        super().__init__("an atomic write refused a row")
        self.outcome = outcome


def _write_once(log: PredictionLog, columns: _Columns, *, atomic: bool) -> _Outcome:
    n_rows = len(columns.request_id)
    status = np.zeros(n_rows, dtype=np.int8)
    reasons: dict[int, str] = {}
    registered: dict[tuple[str, str], int] = {}
    try:
        with log.engine.begin() as conn:
            for (name, version), (k, first) in sorted(columns.versions.items()):
                known = log._classes.get((name, version))  # noqa: SLF001 - a version's K never changes
                if known is None:
                    known = registered[(name, version)] = log._register_version(  # noqa: SLF001
                        conn, name, version, k, columns.time[first])
                if known != k:
                    for j in _rows_of(columns, name, version):
                        status[j] = _REFUSED
                        reasons[j] = (f"logits have {k} classes but {name!r} version {version!r} has {known} in the "
                                      "log; every row of a version must have the same K")
            rows = np.flatnonzero(status != _REFUSED)
            if atomic and reasons:
                raise _Rollback(_Outcome(status, reasons))
            already = _insert(conn, log, columns, rows)
            if already.size:
                _compare_with_log(conn, log, columns, already, status, reasons)
            if atomic and reasons:
                raise _Rollback(_Outcome(status, reasons))
    except _Rollback as rollback:
        unwritten = rollback.outcome.status.copy()
        unwritten[unwritten != _REFUSED] = _REFUSED
        return _Outcome(unwritten, {j: rollback.outcome.reasons.get(j, _NOT_WRITTEN) for j in range(n_rows)})
    log._classes.update(registered)  # noqa: SLF001 - committed now
    return _Outcome(status, reasons)


def _rows_of(columns: _Columns, name: str, version: str) -> list[int]:
    return [j for j, (n, v) in enumerate(zip(columns.model_name, columns.model_version, strict=True))
            if n == name and v == version]


def _insert(conn: Connection, log: PredictionLog, columns: _Columns, rows: NDArray[np.intp]) -> NDArray[np.intp]:
    """Insert ``rows`` of ``columns``; the rows not inserted because their request id is in the log
    (or earlier in the batch). One ``COPY`` on PostgreSQL with psycopg 3; when that meets a request
    id already there, ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` tells the new rows apart."""
    if rows.size == 0:
        return rows
    if conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg":
        import psycopg

        savepoint = conn.begin_nested()
        try:
            _copy(conn, columns, rows)
        except psycopg.errors.UniqueViolation:
            savepoint.rollback()
        else:
            savepoint.commit()
            return np.empty(0, dtype=np.intp)
    table = log.table
    dialect = conn.dialect.name
    records = columns.rows(rows.tolist())
    inserted: set[str] = set()
    if dialect in ("postgresql", "sqlite"):
        insert = (postgresql_insert if dialect == "postgresql" else sqlite_insert)(table)
        statement = insert.on_conflict_do_nothing(index_elements=[table.c.request_id]).returning(table.c.request_id)
        for offset in range(0, len(records), _IN_CHUNK * 10):
            inserted.update(conn.execute(statement, records[offset:offset + _IN_CHUNK * 10]).scalars())
    else:  # no ON CONFLICT: the ids already there are read first (one writer at a time is assumed)
        present = _present(conn, log, [columns.request_id[j] for j in rows.tolist()])
        fresh = [record for record in records if record["request_id"] not in present]
        if fresh:
            conn.execute(table.insert(), fresh)
        inserted = {record["request_id"] for record in fresh}
    claimed: set[str] = set()
    left: list[int] = []
    for j in rows.tolist():  # the first row of an id inserted is written; a repeat of it is compared
        rid = columns.request_id[j]
        if rid in inserted and rid not in claimed:
            claimed.add(rid)
        else:
            left.append(j)
    return np.asarray(left, dtype=np.intp)


def _present(conn: Connection, log: PredictionLog, ids: list[str]) -> set[str]:
    table = log.table
    found: set[str] = set()
    for offset in range(0, len(ids), _IN_CHUNK):
        part = ids[offset:offset + _IN_CHUNK]
        found.update(conn.execute(select(table.c.request_id).where(table.c.request_id.in_(part))).scalars())
    return found


def _copy(conn: Connection, columns: _Columns, rows: NDArray[np.intp]) -> None:
    """``COPY prediction_log (...) FROM STDIN (FORMAT BINARY)`` of ``rows``, on the transaction's own
    psycopg connection."""
    driver = conn.connection.driver_connection
    assert driver is not None  # a connection in a transaction has its DBAPI connection
    pick = rows.tolist() if rows.size != len(columns.request_id) else None
    values = columns.values(pick)
    with driver.cursor() as cursor, cursor.copy(
        f"COPY prediction_log ({', '.join(_ROW_KEYS)}) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.set_types(list(_COPY_TYPES))
        for row in zip(*values, strict=True):
            copy.write_row(row)


def _compare_with_log(conn: Connection, log: PredictionLog, columns: _Columns, rows: NDArray[np.intp],
                      status: NDArray[np.int8], reasons: dict[int, str]) -> None:
    """Rows whose request id the log already holds: ``unchanged`` when it holds the same prediction
    (version, logits, T), else refused."""
    table = log.table
    ids = sorted({columns.request_id[j] for j in rows.tolist()})
    stored: dict[str, tuple[str, str, bytes, float]] = {}
    for offset in range(0, len(ids), _IN_CHUNK):
        part = ids[offset:offset + _IN_CHUNK]
        statement = select(table.c.request_id, table.c.model_name, table.c.model_version, table.c.logits,
                           table.c.temperature).where(table.c.request_id.in_(part))
        stored.update((rid, (name, version, bytes(blob), float(t))) for rid, name, version, blob, t in
                      conn.execute(statement))
    for j in rows.tolist():
        rid = columns.request_id[j]
        mine = (columns.model_name[j], columns.model_version[j], columns.logits_bytes[j],
                float(columns.temperature[j]))
        theirs = stored.get(rid)
        if theirs == mine:
            status[j] = _UNCHANGED
        else:
            status[j] = _REFUSED
            reasons[j] = ("request id is already in the log for another prediction" + (
                f" (model {theirs[0]!r} version {theirs[1]!r})" if theirs else "") +
                "; request ids must be unique, and the log keeps the first")


# --------------------------------------------------------------------------- the queue


@dataclass(frozen=True, slots=True)
class IngestQueueStats:
    """What an :class:`IngestQueue` has done since it started (the service's ``/metrics``)."""

    pending_rows: int
    rows_written: int
    rows_unchanged: int
    rows_refused: int
    batches_written: int
    batches_failed: int
    submissions_refused: int
    write_seconds: float
    rows_per_second: float
    last_error: str | None


@dataclass(slots=True)
class _Submission:
    batch: PredictionBatch
    atomic: bool
    future: Future[IngestReport]


class IngestQueue:
    """One writer thread for many callers' batches, bounded: a group commit with back-pressure.

    Parameters
    ----------
    log : PredictionLog
        Where to write (created if missing when the thread starts).
    max_pending_rows : int, default=200_000
        Rows that may wait; :meth:`submit` refuses a batch that would exceed it.
    batch_rows : int, default=20_000
        The most rows one write takes from the queue (a larger submission is written alone).

    Examples
    --------
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> queue = IngestQueue(log)
    >>> future = queue.submit(PredictionBatch.from_arrays("m", "1", 1.0, [[2.0, 0.0]], ["a"]))
    >>> future.result(timeout=30).written
    1
    >>> queue.close()
    """

    def __init__(self, log: PredictionLog, *, max_pending_rows: int = 200_000, batch_rows: int = 20_000) -> None:
        for name, value in (("max_pending_rows", max_pending_rows), ("batch_rows", batch_rows)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
        self._log = log
        self._max_pending_rows = max_pending_rows
        self._batch_rows = batch_rows
        self._cond = threading.Condition()
        self._pending: deque[_Submission] = deque()
        self._pending_rows = 0
        self._closing = False
        self._counts = {"written": 0, "unchanged": 0, "refused": 0, "batches": 0, "failed": 0, "throttled": 0}
        self._write_seconds = 0.0
        self._rate = 0.0  # rows per second of recent writes (exponentially weighted)
        self._last_error: str | None = None
        self._thread = threading.Thread(target=self._run, name="thermostat-ingest-writer", daemon=True)
        self._thread.start()

    @property
    def max_pending_rows(self) -> int:
        return self._max_pending_rows

    @property
    def stats(self) -> IngestQueueStats:
        with self._cond:
            counts = dict(self._counts)
            return IngestQueueStats(
                pending_rows=self._pending_rows, rows_written=counts["written"], rows_unchanged=counts["unchanged"],
                rows_refused=counts["refused"], batches_written=counts["batches"], batches_failed=counts["failed"],
                submissions_refused=counts["throttled"], write_seconds=self._write_seconds,
                rows_per_second=self._rate, last_error=self._last_error,
            )

    def retry_after(self) -> int:
        """Seconds after which a refused submission may find room: the rows waiting over the recent
        write rate, at least 1 and at most 60."""
        with self._cond:
            rate, waiting = self._rate, self._pending_rows
        if rate <= 0:
            return 1
        return int(min(60, max(1, math.ceil(waiting / rate))))

    def submit(self, batch: PredictionBatch, *, atomic: bool = False) -> Future[IngestReport] | None:
        """Queue ``batch``'s rows for the writer; the future of its report, or None when the queue has
        no room for them now (nothing queued: submit again after :meth:`retry_after` seconds).

        Raises
        ------
        RuntimeError
            The queue is closed.
        """
        future: Future[IngestReport] = Future()
        if len(batch) == 0 or (atomic and batch.refused):
            future.set_result(_nothing_written(batch))
            return future
        with self._cond:
            if self._closing:
                raise RuntimeError("the ingest queue is closed")
            if self._pending_rows + len(batch) > self._max_pending_rows:
                self._counts["throttled"] += 1
                return None
            self._pending.append(_Submission(batch, atomic, future))
            self._pending_rows += len(batch)
            self._cond.notify_all()
        return future

    def close(self, timeout: float | None = 30.0) -> None:
        """Write what is queued (waiting at most ``timeout`` seconds), then stop the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def _take(self) -> list[_Submission] | None:
        """The next submissions to write together (an atomic one alone); None when closed and empty."""
        with self._cond:
            while not self._pending:
                if self._closing:
                    return None
                self._cond.wait()
            taken = [self._pending.popleft()]
            rows = len(taken[0].batch)
            while (not taken[0].atomic and self._pending and not self._pending[0].atomic
                   and rows + len(self._pending[0].batch) <= self._batch_rows):
                taken.append(self._pending.popleft())
                rows += len(taken[-1].batch)
            return taken

    def _run(self) -> None:
        try:
            self._log.create()
        except Exception as error:  # noqa: BLE001 - every write then fails and says why
            self._last_error = f"{type(error).__name__}: {error}"
        while (taken := self._take()) is not None:
            rows = sum(len(item.batch) for item in taken)
            started = _time.monotonic()
            try:
                columns = taken[0].batch.columns if len(taken) == 1 else _concatenate([t.batch.columns for t in taken])
                outcome = _write(self._log, columns, atomic=taken[0].atomic)
            except Exception as error:  # noqa: BLE001 - handed to every caller of the batch
                with self._cond:
                    self._pending_rows -= rows
                    self._counts["failed"] += 1
                    self._last_error = " ".join(f"{type(error).__name__}: {error}".split())[:2000]
                for item in taken:
                    _settle(item.future, error=error)
                continue
            elapsed = max(_time.monotonic() - started, 1e-6)
            start = 0
            reports = []
            for item in taken:
                reports.append(_report(item.batch, outcome, start))
                start += len(item.batch)
            with self._cond:
                self._pending_rows -= rows
                self._counts["written"] += int(np.count_nonzero(outcome.status == _WRITTEN))
                self._counts["unchanged"] += int(np.count_nonzero(outcome.status == _UNCHANGED))
                self._counts["refused"] += int(np.count_nonzero(outcome.status == _REFUSED))
                self._counts["batches"] += 1
                self._write_seconds += elapsed
                rate = rows / elapsed
                self._rate = rate if self._rate == 0 else 0.8 * self._rate + 0.2 * rate
            for item, report in zip(taken, reports, strict=True):
                _settle(item.future, report)


def _settle(future: Future[IngestReport], report: IngestReport | None = None, *,
            error: BaseException | None = None) -> None:
    """Hand a submission its report (or the error), unless its caller gave up on it (cancelled):
    the writer's thread never dies of a caller that stopped waiting."""
    if future.cancelled():
        return
    try:
        if error is not None:
            future.set_exception(error)
        elif report is not None:
            future.set_result(report)
    except InvalidStateError:  # cancelled between the check and the call
        pass


def _concatenate(parts: list[_Columns]) -> _Columns:
    """Several batches' rows as one (for one write)."""
    versions: dict[tuple[str, str], tuple[int, int]] = {}
    start = 0
    for part in parts:
        for key, (k, first) in part.versions.items():
            versions.setdefault(key, (k, start + first))
        start += len(part.request_id)

    def joined(name: str) -> list[Any]:
        return [value for part in parts for value in getattr(part, name)]

    return _Columns(
        time=joined("time"), model_name=joined("model_name"), model_version=joined("model_version"),
        request_id=joined("request_id"), logits_bytes=joined("logits_bytes"),
        n_classes=np.concatenate([part.n_classes for part in parts]),
        predicted_class=np.concatenate([part.predicted_class for part in parts]),
        confidence=np.concatenate([part.confidence for part in parts]),
        temperature=np.concatenate([part.temperature for part in parts]),
        group=joined("group"), label=joined("label"), labelled_at=joined("labelled_at"), versions=versions,
    )
