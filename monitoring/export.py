"""The prediction log exported to Parquet partitioned by day, and read back like the log.

A deployment that outgrows one machine keeps its history: :func:`export_prediction_log`
writes a version's labelled rows to Parquet files any cluster can read, and
:class:`PredictionLogExport` reads them back as a :class:`~monitoring.LabelledSource`, so the
monitor and the refit read the same window from the export as from the SQL log (same chunks,
same (time, id) order, same numbers).

Layout
------
One folder per version, one file per UTC day of serving time (hive style)::

    DIR/model=<name>/version=<version>/date=YYYY-MM-DD/part-0.parquet
    DIR/model=<name>/version=<version>/_manifest.json

The name and version are percent-quoted (``urllib.parse.quote(name, safe="")``), so any name
is one folder. Names starting with ``.`` or ``_`` (temporary files, the manifest) are not data.

Columns of a day file: ``id`` (the request id), ``label`` (int64), ``group`` (string, null
for rows without a group), ``logit_0`` ... ``logit_{K-1}`` (float32, as stored in the log),
``served_at`` (timestamp[us, tz=UTC]), ``temperature`` (float64, the T the row was served
at), ``predicted_class`` (int64) and ``confidence`` (float64) as served, and ``log_row_id``
(int64: the row's id in the log; null for a row archived without it, see below). Only
labelled rows, in (serving time, log row id) order — the log's own order —, in row groups
of at most ``row_group_size`` rows. A day whose rows all have a group is also a scored set
for :func:`calibration.read_scored_set` (it ignores the extra columns).

An archived day only grows
--------------------------
The export is also the archive of the rows the retention removes from the log
(:func:`monitoring.prune_prediction_log`), so a day file may hold rows the log no longer
has. The invariant: **a day file is only ever replaced by a superset of itself.** A day seen
for the first time is written from the log. A day already written whose rows in the log
changed (late labels, late rows, rows pruned meanwhile) is *merged*: the rows of the file,
all kept, and the log's labelled rows of that day whose request id the file does not hold
yet (request ids are unique in the log), in (serving time, log row id) order; a day the log
has nothing new for is left as it is. So a day that was never pruned reads exactly as the
log, and a merge never loses an archived row. A day file of an older export has no
``log_row_id`` column: when it is merged, each row gets the id the log still has for its
request id, and a row the log no longer has keeps a null id, sorted before the log's rows
of the same serving time (in its file's order); such a file is read as it is.

Writing is idempotent, resumable and serialised
-----------------------------------------------
One export of a version runs at a time: it holds an exclusive lock on the version folder's
``.export.lock`` (``flock``; the kernel releases it when the process dies, even by
``kill -9``), so a merge always starts from the file the previous one left. Each day file
is written to a temporary file in its folder and moved into place with ``os.replace``;
then the manifest, replaced the same way, records the day's fingerprint in the database
(:meth:`PredictionLog.labelled_fingerprint`: labelled rows, last labelling time, largest
log row id). A re-run skips the days whose fingerprint is unchanged and merges the others,
so an export killed at any point finishes when run again (the temporary files a killed run
left are removed), and a finished export run again writes nothing. The fingerprint is
read before the day's rows, so a label attached meanwhile makes the next run merge the
day, never skip it. The manifest only saves work: without it every day is compared with
the log again, and nothing archived is lost.

Reading checks what it reads
----------------------------
A file whose schema is not an export's, whose K differs from the version's other days, or
with a non-finite logit, a label outside [0, K), a missing or repeated id, a serving time
outside its day or out of order is refused with a :class:`~calibration.ScoredSetError`
naming the file and the row in the file (rows count from 0 over the whole file).

Partitions for engines
----------------------
:func:`export_partitions` lists the row groups that hold a window's rows;
:func:`summarise_partition` summarises one of them (a module-level function of picklable
arguments, so a Dask engine can ship it); :func:`summarise_export` maps it over the
partitions on an engine and adds the parts up in partition order
(:func:`~monitoring.merge_summaries`), giving the counts of :func:`~monitoring.summarise_window`
exactly and its sums to rounding.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Literal, TypeVar
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from numpy.typing import NDArray

from calibration import LOCAL_ENGINE, Engine, JsonResult, ScoredSet, ScoredSetError

from ._validation import as_utc, check_chunk_size, check_window
from .prediction_log import LabelledFingerprint, PredictionLog
from .store import LabelledChunk, ServedChunk, StoreScope, _ReadOnlyStore, _refuse_label_times
from .window import WindowQuery, WindowSummary, _Accumulator, _checked_query, merge_summaries

__all__ = [
    "ExportPartition",
    "ExportResult",
    "PredictionLogExport",
    "export_partitions",
    "export_prediction_log",
    "summarise_export",
    "summarise_partition",
]

_PART: Final = "part-0.parquet"
_MANIFEST: Final = "_manifest.json"
# Format 2: day files are merged, never replaced by fewer rows, and carry log_row_id. An
# exporter that knows only format 1 rewrote a day from the log: the format number keeps it out.
_MANIFEST_FORMAT: Final = 2
_READABLE_FORMATS: Final = (1, 2)
_LOCK: Final = ".export.lock"
_ROW_ID: Final = "log_row_id"
_LEFTOVER: Final = re.compile(r"\.(?:part-0\.parquet|_manifest\.json)\.[0-9a-f]{32}\.tmp")
_DAY: Final = timedelta(days=1)
_BEGINNING: Final = datetime.min.replace(tzinfo=UTC)
_DATE_FOLDER: Final = re.compile(r"date=(\d{4}-\d{2}-\d{2})")
_LOGIT_COLUMN: Final = re.compile(r"logit_(0|[1-9][0-9]*)")
_COLUMNS: Final = (
    "id, label, group, logit_0 ... logit_{K-1}, served_at, temperature, predicted_class, confidence (and log_row_id)"
)

# The archive: labelled rows only, without the time each label arrived; never written by a reader.
_EXPORT_SCOPE: Final = StoreScope(served_rows=False, label_times=False, writable=False)

_Written = TypeVar("_Written")


def _schema(n_classes: int) -> pa.Schema:
    """The columns of a day file of a version with ``n_classes`` classes."""
    return pa.schema([
        pa.field("id", pa.string(), nullable=False),
        pa.field("label", pa.int64(), nullable=False),
        pa.field("group", pa.string()),
        *(pa.field(f"logit_{k}", pa.float32(), nullable=False) for k in range(n_classes)),
        pa.field("served_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("temperature", pa.float64(), nullable=False),
        pa.field("predicted_class", pa.int64(), nullable=False),
        pa.field("confidence", pa.float64(), nullable=False),
        pa.field(_ROW_ID, pa.int64()),  # absent from the day files of format-1 exports
    ])  # fmt: skip


def _version_folder(directory: str | os.PathLike[str], model_name: str, model_version: str) -> Path:
    return Path(directory) / f"model={quote(model_name, safe='')}" / f"version={quote(model_version, safe='')}"


def _day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _as_datetime64(moment: datetime) -> np.datetime64:
    """An aware datetime as the naive UTC ``datetime64[us]`` of :class:`LabelledChunk` times."""
    return np.datetime64(moment.astimezone(UTC).replace(tzinfo=None), "us")


# --------------------------------------------------------------------------- chunks


def _map_chunk(chunk: LabelledChunk, fn: Callable[[NDArray[Any]], NDArray[Any]]) -> LabelledChunk:
    return LabelledChunk(**{field.name: fn(getattr(chunk, field.name)) for field in fields(LabelledChunk)})


def _concatenate(chunks: list[LabelledChunk]) -> LabelledChunk:
    if len(chunks) == 1:
        return chunks[0]
    return LabelledChunk(
        **{field.name: np.concatenate([getattr(c, field.name) for c in chunks]) for field in fields(LabelledChunk)}
    )


def _rechunk(pieces: Iterable[LabelledChunk], chunk_size: int) -> Iterator[LabelledChunk]:
    """The rows of ``pieces`` in order, in chunks of exactly ``chunk_size`` rows but the last."""
    pending: list[LabelledChunk] = []
    held = 0
    for piece in pieces:
        if not len(piece):
            continue
        pending.append(piece)
        held += len(piece)
        while held >= chunk_size:
            merged = _concatenate(pending)
            yield _map_chunk(merged, lambda column: column[:chunk_size])
            rest = _map_chunk(merged, lambda column: column[chunk_size:])
            pending, held = ([rest] if len(rest) else []), len(rest)
    if held:
        yield _concatenate(pending)


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True, slots=True)
class ExportResult(JsonResult):
    """What :func:`export_prediction_log` did.

    ``directory`` is the version's folder (``DIR/model=.../version=...``); ``until`` the
    end of the exported serving times; ``days_written`` the days (``YYYY-MM-DD``) written or
    merged now, ``days_skipped`` those whose file already held every labelled row the log has
    of them (unchanged, or only pruned since); ``rows_written`` the rows the days written hold.
    """

    directory: str
    model_name: str
    model_version: str
    until: datetime
    n_classes: int
    days_written: tuple[str, ...]
    days_skipped: tuple[str, ...]
    rows_written: int


def _write_atomically(file: Path, write: Callable[[IO[bytes]], _Written]) -> _Written:
    """``write(handle)`` into a temporary file in the same folder, then ``os.replace`` it onto
    ``file``: readers see the old file or the new one, never half of one, and a killed writer
    leaves only a dot-file that readers ignore. Returns what ``write`` returned."""
    temporary = file.with_name(f".{file.name}.{uuid.uuid4().hex}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            written = write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, file)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return written


def _fingerprint_record(fingerprint: LabelledFingerprint) -> dict[str, Any]:
    """A day's fingerprint as the manifest stores it (JSON types, compared with ``==``)."""
    labelled = fingerprint.last_labelled_at
    return {
        "n_rows": fingerprint.n_rows,
        "last_labelled_at": None if labelled is None else labelled.isoformat(),
        "last_row_id": fingerprint.last_row_id,
    }


def _read_manifest(file: Path, n_classes: int) -> dict[str, Any]:
    """The days recorded in a version's manifest ({} when there is none yet)."""
    if not file.is_file():
        return {}
    try:
        content = json.loads(file.read_text(encoding="utf-8"))
        format_, k, days = content["format"], content["n_classes"], dict(content["days"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{file}: the export's manifest cannot be read ({type(exc).__name__}: {exc}). It only records which days "
            f"are up to date: move it aside (e.g. to {file.name}.unreadable) and export again; every day is then "
            "compared with the log and merged, and no archived row is lost"
        ) from exc
    if format_ not in _READABLE_FORMATS:
        raise ValueError(
            f"{file}: manifest format {format_!r}; this Thermostat reads formats {_READABLE_FORMATS} — export this "
            "folder with the Thermostat that wrote it (or a newer one)"
        )
    if k != n_classes:
        raise ValueError(
            f"{file}: the export holds K={k!r} classes but the log's version has K={n_classes}: another model's rows "
            "were exported here under this name and version; export to another folder"
        )
    return days


def _write_manifest(file: Path, model_name: str, model_version: str, n_classes: int, days: dict[str, Any]) -> None:
    content = {
        "format": _MANIFEST_FORMAT, "model_name": model_name, "model_version": model_version,
        "n_classes": n_classes, "days": dict(sorted(days.items())),
    }  # fmt: skip
    text = json.dumps(content, indent=2) + "\n"
    _write_atomically(file, lambda handle: handle.write(text.encode("utf-8")))


@contextmanager
def _version_lock(folder: Path) -> Iterator[None]:
    """Hold the version folder's exclusive lock (one export of a version at a time); the kernel
    releases it when the process ends, however it ends. Temporary files of a killed writer are
    removed once it is held (no other writer of this version is running then)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / _LOCK, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        for leftover in (*folder.iterdir(), *folder.glob("date=*/.*")):
            if _LEFTOVER.fullmatch(leftover.name):
                leftover.unlink(missing_ok=True)
        yield


def _logged_table(row_ids: NDArray[np.int64], chunk: LabelledChunk, schema: pa.Schema) -> pa.Table:
    """Rows read from the log as a day file's table."""
    logit_columns = np.ascontiguousarray(chunk.logits.T)
    return pa.Table.from_arrays(
        [
            pa.array(chunk.request_ids, pa.string()),
            pa.array(chunk.labels, pa.int64()),
            pa.array(chunk.groups, pa.string()),
            *(pa.array(column, pa.float32()) for column in logit_columns),
            pa.array(chunk.time, pa.timestamp("us", tz="UTC")),
            pa.array(chunk.temperature, pa.float64()),
            pa.array(chunk.predicted_class, pa.int64()),
            pa.array(chunk.confidence, pa.float64()),
            pa.array(row_ids, pa.int64()),
        ],
        schema=schema,
    )


def _write_day(handle: IO[bytes], tables: Iterable[pa.Table], schema: pa.Schema, row_group_size: int) -> int:
    """Write ``tables`` as full row groups of ``row_group_size`` rows (the last may be short)."""
    pending: list[pa.Table] = []
    held = written = 0
    with pq.ParquetWriter(handle, schema) as writer:
        for piece in tables:
            pending.append(piece)
            held += piece.num_rows
            while held >= row_group_size:
                table = pa.concat_tables(pending)
                writer.write_table(table.slice(0, row_group_size), row_group_size=row_group_size)
                rest = table.slice(row_group_size)
                pending, held = [rest], rest.num_rows
                written += row_group_size
        if held:
            writer.write_table(pa.concat_tables(pending), row_group_size=row_group_size)
            written += held
    return written


class _Run:
    """One stream of day-file tables in the day's order, buffered one table at a time for a merge.

    A row's sort key is (serving time in us, log row id with null as -1, ``source``, its
    position in the stream): unique, so the merge's order does not depend on how the streams
    were cut into tables.
    """

    def __init__(self, tables: Iterator[pa.Table], source: int) -> None:
        self._tables, self._source = tables, source
        self._table: pa.Table | None = None
        self._keys: tuple[NDArray[np.int64], ...] = ()
        self._position = 0

    def fill(self) -> bool:
        """Buffer the next non-empty table when nothing is buffered; False once the stream is done."""
        while self._table is None or self._table.num_rows == 0:
            table = next(self._tables, None)
            if table is None:
                return False
            n = table.num_rows
            self._table = table
            self._keys = (
                table.column("served_at").cast(pa.int64()).to_numpy(),
                pc.fill_null(table.column(_ROW_ID), -1).to_numpy(),
                np.full(n, self._source, dtype=np.int64),
                np.arange(self._position, self._position + n, dtype=np.int64),
            )
            self._position += n
        return True

    def key(self, row: int) -> tuple[int, ...]:
        return tuple(int(column[row]) for column in self._keys)

    def last_key(self) -> tuple[int, ...]:
        assert self._table is not None
        return self.key(self._table.num_rows - 1)

    def take_through(self, bound: tuple[int, ...]) -> tuple[pa.Table, tuple[NDArray[np.int64], ...]]:
        """The buffered rows whose key is at most ``bound`` (a prefix: the buffer is in key order)."""
        assert self._table is not None
        n = bisect_right(range(self._table.num_rows), bound, key=self.key)
        taken = (self._table.slice(0, n), tuple(column[:n] for column in self._keys))
        self._table, self._keys = self._table.slice(n), tuple(column[n:] for column in self._keys)
        return taken


def _merged(first: Iterator[pa.Table], second: Iterator[pa.Table]) -> Iterator[pa.Table]:
    """The rows of two streams, each in day-file order, as one stream in that order (at a tie
    of time and row id, ``first``'s rows first). Holds one table of each stream at a time."""
    runs = (_Run(first, 0), _Run(second, 1))
    while True:
        live = [run for run in runs if run.fill()]
        if not live:
            return
        # Every row not buffered yet sorts after its stream's last buffered row: what is at most
        # the smaller of the two last keys can go now.
        bound = min(run.last_key() for run in live)
        tables, keys = zip(*(run.take_through(bound) for run in live), strict=True)
        time, row_id, source, position = (np.concatenate(column) for column in zip(*keys, strict=True))
        yield pa.concat_tables(tables).take(np.lexsort((position, source, row_id, time)))


def _archived_tables(
    day_file: _DayFile, schema: pa.Schema, log_ids: pa.Array, log_row_ids: pa.Array, batch_size: int
) -> Iterator[pa.Table]:
    """Every row of an archived day file, checked, with its log row id: the stored one, or (a
    format-1 file) the one the log has for its request id (``log_ids``, ``log_row_ids``), else null."""
    for group in range(day_file.n_row_groups):
        for first_row, batch in day_file.batches(group, batch_size):
            day_file.chunk(batch, first_row)  # refuses a corrupted archive before anything replaces it
            ids = batch.column("id")
            from_log = pc.take(log_row_ids, pc.index_in(ids, value_set=log_ids))
            stored = batch.column(_ROW_ID) if _ROW_ID in batch.schema.names else pa.nulls(len(ids), pa.int64())
            row_ids = pc.if_else(pc.is_null(stored), from_log, stored)
            yield pa.Table.from_arrays([*(batch.column(name) for name in schema.names[:-1]), row_ids], schema=schema)


def _export_day(
    log: PredictionLog, model_name: str, model_version: str, day: date, end: datetime, file: Path, *, n_classes: int,
    chunk_size: int, row_group_size: int,
) -> int | None:
    """Write (first time) or merge (file already there) a day's file; the rows it holds now, or
    None when the file already holds every labelled row the log has of the day (left as it is)."""
    start, schema = _day_start(day), _schema(n_classes)
    logged = (_logged_table(row_ids, chunk, schema) for row_ids, chunk in
              log.iter_labelled_rows(model_name, model_version, start, end, chunk_size=chunk_size))  # fmt: skip
    if not file.is_file():
        return _write_atomically(file, partial(_write_day, tables=logged, schema=schema, row_group_size=row_group_size))
    pairs = list(log.iter_labelled_ids(model_name, model_version, start, end, chunk_size=chunk_size))
    log_row_ids = pa.array(np.concatenate([rows for rows, _ in pairs]) if pairs else [], pa.int64())
    log_ids = pa.array(np.concatenate([ids for _, ids in pairs]) if pairs else [], pa.string())
    with _DayFile(file, day, n_classes, "the log's version") as day_file:
        archived_ids = day_file.check_unique_ids()
        if pc.all(pc.is_in(log_ids, value_set=archived_ids)).as_py() in (True, None):
            return None
        # Rows the file does not hold yet, read again: a row logged or labelled since is taken too.
        new = (table.filter(pc.invert(pc.is_in(table.column("id"), value_set=archived_ids))) for table in logged)
        kept = _archived_tables(day_file, schema, log_ids, log_row_ids, chunk_size)

        def write(handle: IO[bytes]) -> int:
            written = _write_day(handle, _merged(kept, new), schema, row_group_size)
            if written < day_file.n_rows:  # a merge only adds rows: never replace the archive by fewer
                raise RuntimeError(f"{file}: the merged day has {written} rows, fewer than the {day_file.n_rows} "
                                   "archived; the archived file was left as it was")
            return written

        return _write_atomically(file, write)


def _days(first: datetime, last: datetime) -> Iterator[date]:
    day, stop = first.astimezone(UTC).date(), last.astimezone(UTC).date()
    while day <= stop:
        yield day
        day += _DAY


def export_prediction_log(
    log: PredictionLog,
    model_name: str,
    model_version: str,
    directory: str | os.PathLike[str],
    *,
    until: datetime | None = None,
    chunk_size: int = 50_000,
    row_group_size: int = 100_000,
) -> ExportResult:
    """Export a version's labelled rows served before ``until`` to Parquet, one file per UTC day.

    Writes ``DIR/model=<name>/version=<version>/date=YYYY-MM-DD/part-0.parquet`` for every
    day that has labelled rows and was not exported unchanged before — merged into the day's
    file when there is one: an archived day only grows —, and the version's
    ``_manifest.json`` after each day (see the module docstring for the layout, the columns,
    the lock and why an interrupted export finishes when run again). The day holding
    ``until`` is exported up to ``until`` and completed by a later run that finds more rows
    in it.

    Parameters
    ----------
    log : PredictionLog
        The SQL prediction log.
    model_name, model_version : str
        The serving version.
    directory : str or path
        The export's root ``DIR`` (created if missing).
    until : datetime, optional
        Timezone-aware end of the exported serving times (exclusive); default: now.
    chunk_size : int, default=50_000
        Rows per chunk read from the log (and from a day file being merged).
    row_group_size : int, default=100_000
        Most rows per Parquet row group (a partition of :func:`export_partitions`).
        Memory holds at most ``2 * chunk_size + row_group_size`` rows, and the request ids of
        one day while it is merged.

    Returns
    -------
    ExportResult

    Raises
    ------
    LookupError
        If no prediction of this version was ever logged (nothing is written).
    ValueError
        If ``until`` is naive, a size is < 1, or the version's manifest is unreadable.
    calibration.ScoredSetError
        If a day file to merge into cannot be read as an export's (it is left as it is).

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> from monitoring import log_predictions
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, 23, tzinfo=UTC)
    >>> _ = log_predictions(log, "m", "1", 1.0, [[2.0, 0.0], [0.0, 1.0], [1.0, 0.0]], ["a", "b", "c"],
    ...                     time=[t, t, t + timedelta(hours=2)], labels=[0, 1, 1])
    >>> result = export_prediction_log(log, "m", "1", folder, until=t + timedelta(days=1))
    >>> result.days_written, result.rows_written
    (('2026-01-01', '2026-01-02'), 3)
    >>> export_prediction_log(log, "m", "1", folder, until=t + timedelta(days=1)).days_skipped
    ('2026-01-01', '2026-01-02')
    """
    until = datetime.now(UTC) if until is None else as_utc(until, name="until")
    chunk_size = check_chunk_size(chunk_size)
    if isinstance(row_group_size, bool) or not isinstance(row_group_size, int) or row_group_size < 1:
        raise ValueError(f"row_group_size must be an integer >= 1; got {row_group_size!r}")
    n_classes = log.n_classes(model_name, model_version)
    if n_classes is None:
        raise LookupError(
            f"no prediction of model {model_name!r} version {model_version!r} was ever logged in {log!r}; "
            "nothing was exported"
        )
    folder = _version_folder(directory, model_name, model_version)
    written: list[str] = []
    skipped: list[str] = []
    rows = 0
    whole = log.labelled_fingerprint(model_name, model_version, _BEGINNING, until)
    if whole.first_served_at is not None and whole.last_served_at is not None:
        with _version_lock(folder):
            manifest_file = folder / _MANIFEST
            manifest = _read_manifest(manifest_file, n_classes)
            for day in _days(whole.first_served_at, whole.last_served_at):
                end = min(_day_start(day) + _DAY, until)
                # The fingerprint before the rows: a label attached in between changes the next one.
                fingerprint = _fingerprint_record(log.labelled_fingerprint(model_name, model_version, _day_start(day), end))
                if fingerprint["n_rows"] == 0:
                    continue
                key = day.isoformat()
                file = folder / f"date={key}" / _PART
                if manifest.get(key) == fingerprint and file.is_file():
                    skipped.append(key)
                    continue
                file.parent.mkdir(parents=True, exist_ok=True)
                held = _export_day(log, model_name, model_version, day, end, file, n_classes=n_classes,
                                   chunk_size=chunk_size, row_group_size=row_group_size)  # fmt: skip
                manifest[key] = fingerprint
                _write_manifest(manifest_file, model_name, model_version, n_classes, manifest)
                if held is None:
                    skipped.append(key)
                else:
                    written.append(key)
                    rows += held
    return ExportResult(
        directory=str(folder), model_name=model_name, model_version=model_version, until=until, n_classes=n_classes,
        days_written=tuple(written), days_skipped=tuple(skipped), rows_written=rows,
    )


# --------------------------------------------------------------------------- reading


def _day_files(folder: Path) -> list[tuple[date, Path]]:
    """The (day, file) of every exported day of a version, oldest first."""
    if not folder.is_dir():
        return []
    found = []
    for entry in folder.iterdir():
        if not entry.name.startswith("date="):
            continue  # the manifest, temporary files
        match = _DATE_FOLDER.fullmatch(entry.name)
        try:
            day = date.fromisoformat(match.group(1)) if match else None
        except ValueError:
            day = None
        if day is None or not entry.is_dir():
            raise ScoredSetError(f"{entry}: not a day partition of an export; day folders are named date=YYYY-MM-DD")
        file = entry / _PART
        if file.is_file():  # a folder without its file: the first write of that day never finished
            found.append((day, file))
    return sorted(found)


def _overlapping(files: list[tuple[date, Path]], start: datetime, end: datetime) -> list[tuple[date, Path]]:
    return [(day, file) for day, file in files if _day_start(day) < end and _day_start(day) + _DAY > start]


def _n_classes_of(file: Path, schema: pa.Schema) -> int:
    """K of a day file, after checking that its schema is an export's."""
    k = sum(1 for name in schema.names if _LOGIT_COLUMN.fullmatch(name))
    if k < 2:
        raise ScoredSetError(f"{file}: has {k} logit_ column(s); a day file of an export has columns {_COLUMNS}, K >= 2")
    for expected in _schema(k):
        if expected.name == _ROW_ID and _ROW_ID not in schema.names:
            continue  # a day file of a format-1 export
        if expected.name not in schema.names:
            raise ScoredSetError(f"{file}: column {expected.name!r} is missing; a day file of an export has columns {_COLUMNS}")
        found = schema.field(expected.name).type
        if found != expected.type:
            raise ScoredSetError(f"{file}: column {expected.name!r} has type {found}; an export stores it as {expected.type}")
    return k


def _version_classes(files: list[tuple[date, Path]]) -> int:
    """K of a version: that of its first day file (every other day file is checked against it)."""
    file = files[0][1]
    try:
        schema = pq.read_schema(file)
    except (OSError, pa.ArrowException) as exc:
        raise ScoredSetError(f"{file}: cannot be read as Parquet ({exc})") from exc
    return _n_classes_of(file, schema)


class _DayFile:
    """One open day file of an export: its schema checked, its K compared with the version's."""

    def __init__(self, file: Path, day: date, n_classes: int, reference: str) -> None:
        self.path, self.day, self.n_classes = file, day, n_classes
        # Our own handle, so that stamp describes the very file read even if it is replaced meanwhile.
        self._handle = open(file, "rb")  # noqa: SIM115 - closed by __exit__ (or below, on a refusal)
        try:
            try:
                self._file = pq.ParquetFile(self._handle)
            except (OSError, pa.ArrowException) as exc:
                raise ScoredSetError(f"{file}: cannot be read as Parquet ({exc})") from exc
            k = _n_classes_of(file, self._file.schema_arrow)
            if k != n_classes:
                raise ScoredSetError(
                    f"{file}: has {k} classes (logit_ columns) but {reference} has {n_classes}; every day of a "
                    "version has the same K (export the version again into an empty folder)"
                )
        except BaseException:
            self._handle.close()
            raise
        metadata = self._file.metadata
        self._rows = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
        self._first_rows = np.concatenate(([0], np.cumsum(self._rows, dtype=np.int64)[:-1])).tolist()
        self.n_row_groups, self.n_rows = len(self._rows), int(sum(self._rows))
        self._time_index = self._file.schema_arrow.get_field_index("served_at")

    def __enter__(self) -> _DayFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self._handle.close()

    @property
    def stamp(self) -> tuple[int, int]:
        """(size, modification time in ns) of the open file."""
        stat = os.fstat(self._handle.fileno())
        return stat.st_size, stat.st_mtime_ns

    def row_group_rows(self, group: int) -> tuple[int, int]:
        """(first row in the file, rows) of a row group."""
        return int(self._first_rows[group]), int(self._rows[group])

    def row_groups(self, start: datetime, end: datetime) -> list[int]:
        """The non-empty row groups that may hold rows served in [start, end) (by their min/max
        statistics; a group without them is read)."""
        groups = []
        for group, n_rows in enumerate(self._rows):
            stats = self._file.metadata.row_group(group).column(self._time_index).statistics
            if n_rows == 0 or (stats is not None and stats.has_min_max and (stats.max < start or stats.min >= end)):
                continue
            groups.append(group)
        return groups

    def check_unique_ids(self) -> pa.Array:
        """The file's ids, after refusing a file whose ids repeat across its row groups (each
        group is checked when read)."""
        ids = self._file.read(columns=["id"]).column("id").combine_chunks()
        if pc.count_distinct(ids, mode="all").as_py() == len(ids):
            return ids
        seen: dict[str, int] = {}
        for row, value in enumerate(ids.to_pylist()):
            if value is None:
                raise ScoredSetError(f"{self.path}: row {row}, column id: the id is missing; every row needs a unique id")
            if value in seen:
                raise ScoredSetError(
                    f"{self.path}: column id: id {value!r} appears in row {seen[value]} and row {row}; ids must be "
                    "unique within a file"
                )
            seen[value] = row
        raise AssertionError("unreachable: count_distinct found a repeated or missing id")

    def batches(self, group: int, batch_size: int) -> Iterator[tuple[int, pa.RecordBatch]]:
        """(first row in the file, batch) of the rows of a row group, ``batch_size`` at a time."""
        first = self.row_group_rows(group)[0]
        for batch in self._file.iter_batches(batch_size=batch_size, row_groups=[group]):
            if batch.num_rows:
                yield first, batch
                first += batch.num_rows

    def read_row_group(self, group: int) -> pa.Table:
        return self._file.read_row_group(group)

    def chunk(self, rows: pa.Table | pa.RecordBatch, first_row: int) -> LabelledChunk:
        """The rows as a :class:`LabelledChunk`, every value checked; rows named by their place in the file."""
        k = self.n_classes
        ids = rows.column("id").to_numpy(zero_copy_only=False)
        labels = rows.column("label").to_numpy(zero_copy_only=False)
        logits = np.column_stack(
            [rows.column(f"logit_{j}").to_numpy(zero_copy_only=False) for j in range(k)]
        ).astype(np.float32, copy=False)  # C-contiguous, writable
        # Logits, labels and ids as any scored set is checked (finite, in [0, K), unique, present).
        ScoredSet.from_arrays(logits, labels, ids=ids, source=str(self.path), first_row=first_row)
        time = rows.column("served_at").to_numpy(zero_copy_only=False).astype("datetime64[us]")
        temperature = rows.column("temperature").to_numpy(zero_copy_only=False).astype(np.float64)
        predicted = rows.column("predicted_class").to_numpy(zero_copy_only=False)
        confidence = rows.column("confidence").to_numpy(zero_copy_only=False).astype(np.float64)
        day_start = _as_datetime64(_day_start(self.day))
        checks: tuple[tuple[str, NDArray[np.bool_], str], ...] = (
            ("served_at", ~np.isnat(time), "the serving time is missing"),
            ("served_at", (time >= day_start) & (time < day_start + np.timedelta64(1, "D")),
             f"served outside the file's day {self.day.isoformat()}"),
            ("served_at", np.concatenate(([True], time[1:] >= time[:-1])),
             "served before the row above it; rows are in serving-time order"),
            ("temperature", np.isfinite(temperature) & (temperature > 0), "the temperature must be finite and > 0"),
            ("predicted_class", (predicted >= 0) & (predicted < k), f"the predicted class must be in [0, {k})"),
            ("confidence", (confidence >= 0) & (confidence <= 1), "the confidence must be in [0, 1]"),
        )  # fmt: skip
        for column, valid, rule in checks:
            if not valid.all():
                row = int(np.argmin(valid))
                value = rows.column(column)[row].as_py()
                raise ScoredSetError(
                    f"{self.path}: row {first_row + row} (id {ids[row]!r}), column {column}: {value!r}: {rule}"
                )
        return LabelledChunk(
            request_ids=ids.astype(object),
            time=time,
            logits=logits,
            labels=labels.astype(np.int64),
            groups=rows.column("group").to_numpy(zero_copy_only=False).astype(object),
            predicted_class=predicted.astype(np.int64),
            confidence=confidence,
            temperature=temperature,
        )


def _in_window(chunk: LabelledChunk, start: datetime, end: datetime) -> LabelledChunk:
    inside = (chunk.time >= _as_datetime64(start)) & (chunk.time < _as_datetime64(end))
    return chunk if inside.all() else _map_chunk(chunk, lambda column: column[inside])


class PredictionLogExport(_ReadOnlyStore):
    """A Parquet export of the prediction log (see :func:`export_prediction_log`), read like the log.

    A :class:`~monitoring.PredictionStore` whose :attr:`scope` is the archive's: labelled rows
    only, without the time each label arrived, read-only. :func:`~monitoring.summarise_window`
    and the refit's traffic read a window from it as from the SQL log. Only the days that overlap
    the window are opened, and in them only the row groups whose serving times overlap it.

    Parameters
    ----------
    directory : str or path
        The export's root ``DIR`` (the folder that holds ``model=...`` folders).

    Examples
    --------
    >>> import tempfile
    >>> from monitoring import WindowQuery, log_predictions, summarise_window
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> _ = log_predictions(log, "m", "1", 1.0, [[2.0, 0.0], [0.0, 1.0]], ["a", "b"], time=t, labels=[0, 0])
    >>> folder = tempfile.mkdtemp()
    >>> _ = export_prediction_log(log, "m", "1", folder, until=t + timedelta(days=1))
    >>> export = PredictionLogExport(folder)
    >>> export.n_classes("m", "1"), export.n_classes("m", "2")
    (2, None)
    >>> [chunk.request_ids.tolist() for chunk in export.iter_labelled("m", "1", t, t + timedelta(days=1), chunk_size=1)]
    [['a'], ['b']]
    >>> summarise_window(export, WindowQuery("m", "1", temperature=1.0, start=t, end=t + timedelta(days=1))).n
    2
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._directory = Path(directory)

    @property
    def directory(self) -> Path:
        """The export's root folder."""
        return self._directory

    def __repr__(self) -> str:
        return f"PredictionLogExport({str(self._directory)!r})"

    @property
    def scope(self) -> StoreScope:
        """Labelled rows only, no label times, read-only (:class:`~monitoring.StoreScope`)."""
        return _EXPORT_SCOPE

    def logged_versions(self, model_name: str | None = None) -> dict[tuple[str, str], int]:
        """Every version with an exported day (of ``model_name``, when given), and its K."""
        found = {}
        for folder in sorted(self._directory.glob("model=*/version=*")):
            files = _day_files(folder)
            if files:
                name, version = (unquote(part.name.split("=", 1)[1]) for part in (folder.parent, folder))
                if model_name is None or name == model_name:
                    found[(name, version)] = _version_classes(files)
        return found

    def day_files(self, model_name: str, model_version: str) -> list[tuple[date, Path]]:
        """The (UTC day, file) of every exported day of a version, oldest first."""
        return _day_files(_version_folder(self._directory, model_name, model_version))

    def n_classes(self, model_name: str, model_version: str) -> int | None:
        """K of a version (from the schema of its first day file), or None if it has no exported day."""
        files = self.day_files(model_name, model_version)
        return _version_classes(files) if files else None

    def archived_request_ids(self, model_name: str, model_version: str, day: date) -> NDArray[np.object_]:
        """The request ids of a version's rows archived for one UTC day (empty when the day has no
        file), after checking the file's schema, its K and that its ids are unique: what the
        retention deletes from the log once they are archived.

        Raises
        ------
        calibration.ScoredSetError
            If the day file is not an export's.
        """
        file = _version_folder(self._directory, model_name, model_version) / f"date={day.isoformat()}" / _PART
        if not file.is_file():
            return np.array([], dtype=object)
        with _DayFile(file, day, _version_classes([(day, file)]), str(file)) as day_file:
            ids: NDArray[np.object_] = day_file.check_unique_ids().to_numpy(zero_copy_only=False).astype(object)
        return ids

    def iter_labelled(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = 50_000,
        labelled_from: datetime | None = None, labelled_to: datetime | None = None,
        order: Literal["served", "labelled"] = "served",
    ) -> Iterator[LabelledChunk]:
        """The labelled read: the same chunks as :meth:`PredictionLog.iter_labelled` on the log
        that was exported (same arguments), exactly ``chunk_size`` rows each but the last. Each
        day file read is checked as a whole for repeated ids, and every row read is checked
        (module docstring); a refused file raises :class:`~calibration.ScoredSetError` naming the
        file and the row. The export keeps no label times: a read bounded or ordered by them is
        refused (ValueError).
        """
        _refuse_label_times(self, labelled_from, labelled_to, order)
        start, end = check_window(start, end)
        chunk_size = check_chunk_size(chunk_size)
        files = self.day_files(model_name, model_version)
        if files:
            yield from _rechunk(_read_days(files, start, end, chunk_size), chunk_size)

    def iter_served(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = 50_000,
        labelled_from: datetime | None = None, labelled_to: datetime | None = None,
    ) -> Iterator[ServedChunk]:
        """The served scan of what the export holds: its rows served in [start, end), every one
        labelled (and ``arrived``). Not the window's traffic (:attr:`scope`: the unlabelled rows
        stayed in the log); a read bounded by label times is refused (ValueError)."""
        _refuse_label_times(self, labelled_from, labelled_to)
        for chunk in self.iter_labelled(model_name, model_version, start, end, chunk_size=chunk_size):
            yield ServedChunk(time=chunk.time, logits=chunk.logits, labels=chunk.labels, groups=chunk.groups,
                              temperature=chunk.temperature, arrived=np.ones(len(chunk), dtype=bool))


def _read_days(files: list[tuple[date, Path]], start: datetime, end: datetime, batch_size: int) -> Iterator[LabelledChunk]:
    """The checked rows served in [start, end) of the day files that overlap it, in file order."""
    n_classes = _version_classes(files)
    for day, file in _overlapping(files, start, end):
        with _DayFile(file, day, n_classes, str(files[0][1])) as day_file:
            day_file.check_unique_ids()
            previous: np.datetime64 | None = None
            for group in day_file.row_groups(start, end):
                for first_row, batch in day_file.batches(group, batch_size):
                    chunk = day_file.chunk(batch, first_row)
                    if previous is not None and chunk.time[0] < previous:
                        raise ScoredSetError(
                            f"{file}: row {first_row} (id {chunk.request_ids[0]!r}), column served_at: served "
                            "before the row above it; rows are in serving-time order"
                        )
                    previous = chunk.time[-1]
                    yield _in_window(chunk, start, end)


# --------------------------------------------------------------------------- partitions


@dataclass(frozen=True, slots=True)
class ExportPartition:
    """One row group of a day file: the unit of work an engine maps over.

    Picklable (plain fields), so a Dask worker can read it from a shared file system.
    ``first_row`` is the row group's first row in the file (errors name rows of the file);
    ``n_classes`` is the version's K; ``file_size`` and ``file_mtime_ns`` are the file's when
    the partitions were listed, so a file rewritten since (a concurrent export) is refused
    instead of read at the wrong rows.
    """

    path: str
    day: date
    row_group: int
    first_row: int
    n_rows: int
    n_classes: int
    file_size: int
    file_mtime_ns: int


def export_partitions(
    export: PredictionLogExport, model_name: str, model_version: str, start: datetime, end: datetime
) -> list[ExportPartition]:
    """The row groups that may hold the version's rows served in [start, end), oldest first.

    Each day file listed is checked as a whole (schema, K, ids unique across its row
    groups); the rows themselves are checked by :func:`summarise_partition`.

    Returns
    -------
    list of ExportPartition
        Empty when the version has no exported day in the window.

    Examples
    --------
    >>> import tempfile
    >>> from monitoring import log_predictions
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> _ = log_predictions(log, "m", "1", 1.0, [[2.0, 0.0]] * 5, list("abcde"), time=t, labels=[0] * 5)
    >>> folder = tempfile.mkdtemp()
    >>> _ = export_prediction_log(log, "m", "1", folder, until=t + timedelta(days=1), row_group_size=2)
    >>> [(p.row_group, p.first_row, p.n_rows) for p in
    ...  export_partitions(PredictionLogExport(folder), "m", "1", t, t + timedelta(days=1))]
    [(0, 0, 2), (1, 2, 2), (2, 4, 1)]
    """
    start, end = check_window(start, end)
    files = export.day_files(model_name, model_version)
    if not files:
        return []
    n_classes = _version_classes(files)
    partitions = []
    for day, file in _overlapping(files, start, end):
        with _DayFile(file, day, n_classes, str(files[0][1])) as day_file:
            day_file.check_unique_ids()
            size, mtime_ns = day_file.stamp
            for group in day_file.row_groups(start, end):
                first_row, n_rows = day_file.row_group_rows(group)
                partitions.append(ExportPartition(
                    path=str(file), day=day, row_group=group, first_row=first_row, n_rows=n_rows,
                    n_classes=n_classes, file_size=size, file_mtime_ns=mtime_ns,
                ))  # fmt: skip
    return partitions


def summarise_partition(partition: ExportPartition, query: WindowQuery) -> WindowSummary:
    """The :class:`~monitoring.WindowSummary` of a partition's rows in the query's window.

    A pure function of its arguments (it reads only the partition's row group), defined at
    module level so that engines can ship it to other processes.

    Raises
    ------
    calibration.ScoredSetError
        Naming the file and the row in the file, for a refused row, or when the file
        changed since the partition was listed.

    Examples
    --------
    >>> import tempfile
    >>> from monitoring import WindowQuery, log_predictions
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> _ = log_predictions(log, "m", "1", 1.0, [[2.0, 0.0]] * 3, list("abc"), time=t, labels=[0, 0, 1])
    >>> folder = tempfile.mkdtemp()
    >>> _ = export_prediction_log(log, "m", "1", folder, until=t + timedelta(days=1), row_group_size=2)
    >>> query = WindowQuery("m", "1", temperature=1.0, start=t, end=t + timedelta(days=1))
    >>> [partition, last] = export_partitions(PredictionLogExport(folder), "m", "1", query.start, query.end)
    >>> summary = summarise_partition(last, query)
    >>> summary.n, summary.overall.accuracy
    (1, 0.0)
    """
    file = Path(partition.path)
    accumulator = _Accumulator(query, partition.n_classes)
    with _DayFile(file, partition.day, partition.n_classes, "its partition") as day_file:
        if day_file.stamp != (partition.file_size, partition.file_mtime_ns) or day_file.row_group_rows(
            partition.row_group
        ) != (partition.first_row, partition.n_rows):
            raise ScoredSetError(
                f"{file}: changed after its partitions were listed (a concurrent export rewrote it?); list the "
                "partitions again"
            )
        rows = day_file.chunk(day_file.read_row_group(partition.row_group), partition.first_row)
    chunk = _in_window(rows, query.start, query.end)
    if len(chunk):  # rows of the group outside the window are dropped
        accumulator.add(chunk.logits, chunk.labels, chunk.groups, chunk.temperature)
    return accumulator.summary()


def summarise_export(
    export: PredictionLogExport, query: WindowQuery, *, engine: Engine = LOCAL_ENGINE
) -> WindowSummary:
    """:func:`~monitoring.summarise_window` of an export, one partition per task on ``engine``.

    The partitions (:func:`export_partitions`) are summarised by :func:`summarise_partition`
    on the engine and added up here in partition order, so the result does not depend on
    the engine: its counts equal :func:`~monitoring.summarise_window`'s exactly and its sums
    to rounding. ``n_chunks`` counts the partitions that held rows of the window.

    Parameters
    ----------
    export : PredictionLogExport
        The export.
    query : WindowQuery
        The version, the window and what it is read at.
    engine : calibration.Engine, default LOCAL_ENGINE
        Where the partitions are summarised.

    Returns
    -------
    WindowSummary

    Raises
    ------
    LookupError
        If the export holds no day of this version.
    calibration.ScoredSetError
        For a refused file.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> from monitoring import WindowQuery, log_predictions, summarise_window
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> _ = log_predictions(log, "m", "1", 1.0, [[2.0, 0.0], [0.0, 1.0]] * 3, list("abcdef"), time=t,
    ...                     labels=[0, 1, 1, 1, 0, 0], groups=["x", None] * 3)
    >>> _ = export_prediction_log(log, "m", "1", folder, until=t + timedelta(days=1), row_group_size=4)
    >>> query = WindowQuery("m", "1", temperature=1.0, start=t, end=t + timedelta(days=1), threshold=0.8)
    >>> summary = summarise_export(PredictionLogExport(folder), query)
    >>> summary.n, summary.n_ungrouped, summary.gate.accepted, summary.n_chunks
    (6, 3, 3, 2)
    >>> summary.overall == summarise_window(log, query).overall
    True
    """
    query = _checked_query(query)
    n_classes = export.n_classes(query.model_name, query.model_version)
    if n_classes is None:
        raise LookupError(
            f"no day of model {query.model_name!r} version {query.model_version!r} was exported to {export!r}; "
            "check the name and version, and that `thermostat export` ran"
        )
    partitions = export_partitions(export, query.model_name, query.model_version, query.start, query.end)
    empty = _Accumulator(query, n_classes).summary()
    return merge_summaries([empty, *engine.map(partial(summarise_partition, query=query), partitions)])
