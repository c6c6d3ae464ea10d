"""Partitioned scored sets: a folder or glob of Parquet files, read one partition at a time.

A day of traffic is hundreds of millions of rows kept as many Parquet files; it is never
concatenated. A **partition** is one row group of one file (Parquet's unit of reading); the
set's rows are its files' rows, files in path order. Every computation is a map over the
partitions (run by an :class:`~calibration.Engine`: here, or on a Dask cluster) and a reduce
in the calling process, adding the partitions' results in partition order, so the numbers do
not depend on the engine or on the number of workers:

* **validation**: each partition is read and checked with every rule of
  :func:`read_scored_set` (messages name the file and the row counted in the file); all
  files must agree on K and on logits vs probabilities. Ids and groups are checked in Arrow
  (no Python strings), the value columns read a few at a time into one array: a worker
  holds one partition's array and a few columns' buffers. Ids must be unique across the
  whole set: the validating map hashes each partition's ids once (64-bit SipHash of the id
  text) and returns them sorted; the calling process holds those hashes — 8 bytes per row,
  the check's one cost that grows with the set (160 MB for 20 million rows, 4 GB for 500
  million: the ids themselves never leave their partition) — finds the shared ones one
  64th of the hash space at a time, and confirms them on the ids themselves (a collision
  of different ids is not a duplicate).
* **fit**: the warm start's strided sample (the rows whose index in the whole set the stride
  divides: the same rows as :func:`fit_temperature` in memory, whatever the partitioning)
  is gathered with the validation; then each pass of the search maps the NLL's expansion
  sums (:func:`calibration._kernels.nll_expansion_sums`: n, the NLL, its six derivatives in
  1/T, the NLL at T = 1 and the squared gradients, summed over rows) and adds them.
* **evaluate**: :class:`CalibrationStats` per partition (per group too) add up.
* **NLL change** between two temperatures: n, Σ d and Σ d² of the per-row difference add up;
  the interval is the normal one (on a partitioned set n is large: the paired bootstrap of
  :func:`paired_bootstrap_nll` needs every row in one process).

Later passes read only the labels and the value columns and trust them, as they were
validated by the first map; a file that changed in between (other row counts, a label out of
range, non-finite sums) is refused as changed. Equal-mass bins need every confidence sorted
together and are not offered here.
"""

from __future__ import annotations

import glob
import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import partial, reduce
from operator import add
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ._engine import LOCAL_ENGINE, Engine
from ._evidence import BootstrapComparison, Verdict
from ._fit import (
    DEFAULT_BOUNDS,
    TemperatureFit,
    _expansion,
    fit_result,
    minimise_nll,
    refuse_inverted_binary,
    warm_start_sample_rows,
    warm_start_search,
)
from ._kernels import N_EXPANSION_SUMS, compiled_path, nll_expansion_sums
from ._metrics import CalibrationReport, GroupBreakdown, GroupCalibration
from ._file_limits import not_a_regular_file
from ._scored import (
    MAX_CLASSES,
    MAX_TEXT_LENGTH,
    ScoredSet,
    ScoredSetError,
    _checked_values,
    _Layout,
    _validate,
    checked_text,
    parquet_columns,
    value_block,
)
from ._scores import _score_rows
from ._stats import CalibrationStats, summarise_checked
from ._validation import check_bounds, check_count, check_n_bins, check_temperature, text_array

__all__ = [
    "Partition",
    "PartitionedScoredSet",
    "check_unique_ids",
    "evaluate_partitioned",
    "fit_partitioned",
    "is_partitioned_path",
    "nll_difference_partitioned",
    "open_partitioned",
    "read_partition",
]

# Value columns read per Parquet call: the Arrow buffers held beside the (n, K) array.
_COLUMNS_PER_READ = 8
# Ids hashed per call: the Python strings hashing needs, at any one time.
_HASH_ROWS = 16_384
# The calling process looks for shared id hashes one range of the 64-bit space at a time:
# beside the hashes it holds (8 bytes a row) it needs 1/_HASH_RANGES of them again.
_HASH_RANGES = 64
_GLOB_CHARACTERS = frozenset("*?[")
_SHOWN_DUPLICATES = 16


@dataclass(frozen=True, slots=True)
class Partition:
    """One row group of one Parquet file of a partitioned scored set.

    ``first_row`` counts the partition's first row in its file (messages name the file's
    rows), ``offset`` in the whole set (files in path order).
    """

    file: str
    row_group: int
    first_row: int
    n_rows: int
    offset: int
    n_classes: int
    probs: bool
    has_groups: bool

    @property
    def value_columns(self) -> list[str]:
        """``logit_0`` ... (or ``prob_0`` ...) in class order."""
        prefix = "prob" if self.probs else "logit"
        return [f"{prefix}_{k}" for k in range(self.n_classes)]

    @property
    def layout(self) -> _Layout:
        return _Layout(source=self.file, kind="table", probs=self.probs, first_row=self.first_row)


@dataclass(frozen=True, slots=True)
class PartitionedScoredSet:
    """The partitions of a folder or glob of Parquet scored tables (opened, not yet read).

    Build with :func:`open_partitioned`. ``source`` is the path or pattern given.
    """

    source: str
    files: tuple[str, ...]
    partitions: tuple[Partition, ...]
    n_classes: int

    @property
    def n_samples(self) -> int:
        """Rows over all partitions."""
        return sum(part.n_rows for part in self.partitions)

    @property
    def n_partitions(self) -> int:
        return len(self.partitions)

    @property
    def has_groups(self) -> bool:
        """Whether every file has a ``group`` column."""
        return all(part.has_groups for part in self.partitions)


def is_partitioned_path(path: str | Path) -> bool:
    """Whether ``path`` names a partitioned set: a folder, or a glob pattern (``*``, ``?``, ``[``).

    >>> is_partitioned_path("scores/*.parquet"), is_partitioned_path("scores.npz")
    (True, False)
    """
    text = str(path)
    return bool(_GLOB_CHARACTERS & set(text)) or Path(text).is_dir()


def open_partitioned(path: str | Path, *, max_classes: int = MAX_CLASSES) -> PartitionedScoredSet:
    """Open a folder (every ``*.parquet`` below it), a glob pattern or one Parquet file as a
    partitioned scored set: schemas and row counts are read, no row is.

    Files and folders whose name starts with ``.`` or ``_`` (``_manifest.json``,
    ``_SUCCESS``, temporary files) are skipped, as Spark, Dask and Hive do; any other folder
    that cannot be listed is an error, never skipped. The files must be regular files (a FIFO
    is refused before it is opened), have the scored-table columns of :func:`read_scored_set`
    (``id``, ``label``, optional ``group``, ``logit_0`` ... or ``prob_0`` ..., each once;
    other columns are ignored) and agree on K and on logits vs probabilities. Each file's
    footer is parsed once in a process (per thread), however many row groups it has.

    Raises
    ------
    ScoredSetError
        Nothing matches, a folder cannot be listed, a name is not a regular file, a file is
        not Parquet, a schema is refused, a file's footer declares a row group larger than
        this process's memory or more rows than its size can hold (a compression bomb),
        files disagree, or the set has no row; the message names the file or folder.
    """
    source = str(path)
    limit = check_count(max_classes, name="max_classes", minimum=2)
    files = _parquet_files(source)
    partitions: list[Partition] = []
    first: tuple[str, int, bool] | None = None
    offset = 0
    for file in files:
        n_classes, probs, has_groups, row_counts = _file_layout(file, limit)
        if first is None:
            first = (file, n_classes, probs)
        elif (n_classes, probs) != first[1:]:
            raise ScoredSetError(
                f"{file}: has {n_classes} {'prob' if probs else 'logit'}_ columns; {first[0]} has {first[1]} "
                f"{'prob' if first[2] else 'logit'}_ columns; every partition of {source} must have the same classes"
            )
        first_row = 0
        for row_group, n_rows in enumerate(row_counts):
            if n_rows:
                partitions.append(
                    Partition(file, row_group, first_row, n_rows, offset, n_classes, probs, has_groups)
                )
            first_row += n_rows
            offset += n_rows
    if not partitions or first is None:
        raise ScoredSetError(f"{source}: the scored set is empty (0 rows in {len(files)} file(s)); at least one "
                             "labelled example is required")
    return PartitionedScoredSet(source=source, files=tuple(files), partitions=tuple(partitions), n_classes=first[1])


def _parquet_files(source: str) -> list[str]:
    if _GLOB_CHARACTERS & set(source):
        _refuse_unlistable(_folders_globbed(source))
        files = sorted(name for name in glob.glob(source, recursive=True)
                       if name.lower().endswith(".parquet") and not Path(name).is_dir())
        if not files:
            raise ScoredSetError(f"{source}: no Parquet file (.parquet) matches this pattern")
        return _regular(files)
    root = Path(source)
    if root.is_dir():
        found = []
        # Every folder below is listed, or the set is refused naming it: a folder skipped
        # silently (rglob's way with one it may not read) drops its rows from the result.
        for folder, folders, names in os.walk(root, onerror=_refuse_unlistable_folder):
            folders[:] = [name for name in folders if not name.startswith((".", "_"))]
            found += [os.path.join(folder, name) for name in names
                      if name.lower().endswith(".parquet") and not name.startswith((".", "_"))]
        if not found:
            raise ScoredSetError(f"{source}: no .parquet file in this folder or below it; a partitioned scored set "
                                 "is a folder (or glob) of Parquet scored tables")
        return _regular(sorted(found))
    if not root.exists():
        raise ScoredSetError(f"{source}: no such file or folder; give a folder or glob of Parquet scored tables")
    if root.suffix.lower() != ".parquet":
        raise ScoredSetError(f"{source}: a partitioned scored set is a folder, a glob or a .parquet file; "
                             f"got {root.suffix!r}")
    return _regular([str(root)])


def _regular(files: list[str]) -> list[str]:
    """``files``, each a regular file (symbolic links followed): checked before any is opened,
    since a FIFO blocks ``open()`` until a writer appears."""
    for file in files:
        refusal = not_a_regular_file(Path(file))
        if refusal is not None:
            raise ScoredSetError(f"{file}: {refusal}; the partitions of a scored set are regular .parquet files")
    return files


def _refuse_unlistable_folder(error: OSError) -> None:
    raise ScoredSetError(f"{error.filename}: cannot list this folder ({error.strerror}); every folder of a "
                         "partitioned set must be readable (fix its permissions, or move it out of the set)") from error


def _folders_globbed(pattern: str) -> list[str]:
    """The folders :func:`glob.glob` lists to match ``pattern``: those matching each prefix of
    the pattern that a wildcard follows (and, below a ``**``, every folder)."""
    parts = Path(pattern).parts
    folders: list[str] = []
    for index, part in enumerate(parts):
        if not _GLOB_CHARACTERS & set(part):
            continue
        for prefix in (parts[:index], parts[: index + 1]) if part == "**" else (parts[:index],):
            if not prefix:
                folders.append(os.curdir)
            elif _GLOB_CHARACTERS & set("".join(prefix)):
                folders += glob.glob(os.path.join(*prefix, ""), recursive=True)
            else:
                folders.append(os.path.join(*prefix))
    return folders


def _refuse_unlistable(folders: list[str]) -> None:
    for folder in dict.fromkeys(os.path.normpath(folder) for folder in folders):
        try:
            with os.scandir(folder):
                pass
        except FileNotFoundError:
            continue  # nothing there: the pattern matches nothing in it
        except OSError as error:
            _refuse_unlistable_folder(error)


def _file_layout(file: str, max_classes: int) -> tuple[int, bool, bool, list[int]]:
    """K, probabilities or not, group column or not, and the rows of each row group of a file,
    from its footer; refuses a file whose rows are more than memory holds, one row group at a
    time, or than its size can hold (see :mod:`calibration._file_limits`)."""
    parquet = _parquet_file(file)
    columns = parquet_columns(parquet, file, max_classes)
    if len(columns.value_columns) < 2:
        raise ScoredSetError(f"{file}: {len(columns.value_columns)} class column(s) found; at least 2 classes are "
                             "required (K >= 2)")
    metadata = parquet.metadata
    counts = [metadata.row_group(index).num_rows for index in range(metadata.num_row_groups)]
    refusal = columns.size_refusal(sum(counts), os.stat(file).st_size, at_once=max(counts, default=0))
    if refusal is not None:
        raise ScoredSetError(f"{file}: {refusal}")
    return len(columns.value_columns), columns.probs, "group" in columns.read, counts


# One pyarrow ParquetFile per file and thread, its footer parsed once: pyarrow parses the
# whole footer on every ParquetFile(...), so a file of 3,000 row groups opened once per
# partition cost 3,000 parses per pass (70 s for evaluate; the fit never ended). Kept per
# thread (a Dask worker runs tasks in threads), keyed by the file's identity and size so a
# changed file is parsed again, and only the few last files.
_OPENED = threading.local()
_OPENED_PER_THREAD = 8


def _parquet_file(file: str) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    try:
        status = os.stat(file)
    except OSError as exc:
        raise ScoredSetError(f"{file}: cannot be read as Parquet ({exc})") from exc
    key = (file, status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
    opened: OrderedDict[tuple[Any, ...], Any] | None = getattr(_OPENED, "files", None)
    if opened is None:
        opened = _OPENED.files = OrderedDict()
    if key in opened:
        opened.move_to_end(key)
        return opened[key]
    try:
        parquet = pq.ParquetFile(file)
    except (OSError, ValueError, TypeError, pa.ArrowException) as exc:
        raise ScoredSetError(f"{file}: cannot be read as Parquet ({exc})") from exc
    opened[key] = parquet
    while len(opened) > _OPENED_PER_THREAD:
        opened.popitem(last=False)
    return parquet


def _open(partition: Partition) -> Any:
    return _parquet_file(partition.file)


def _read(parquet: Any, partition: Partition, columns: list[str]) -> Any:
    """Some columns of the partition's row group, as an Arrow table (text checked as UTF-8)."""
    import pyarrow as pa

    try:
        table = parquet.read_row_group(partition.row_group, columns=columns)
    except MemoryError as exc:
        raise ScoredSetError(f"{partition.file}: row group {partition.row_group} needs more memory than this process "
                             f"may use ({exc}); write the file with smaller row groups") from exc
    except (OSError, ValueError, TypeError, pa.ArrowException) as exc:
        raise ScoredSetError(
            f"{partition.file}: row group {partition.row_group} cannot be read as Parquet ({exc})"
        ) from exc
    if table.num_rows != partition.n_rows:
        raise _changed(partition, f"row group {partition.row_group} now holds {table.num_rows} rows, "
                                  f"{partition.n_rows} when the set was opened")
    checked_text(table, partition.file)
    return table


def _read_row_group(partition: Partition, columns: list[str]) -> Any:
    return _read(_open(partition), partition, columns)


def _changed(partition: Partition, what: str) -> ScoredSetError:
    return ScoredSetError(f"{partition.file}: {what}; the file changed while it was being read (re-run on files "
                          "that are not being written)")


def _streamed_block(parquet: Any, partition: Partition) -> NDArray[Any]:
    """The value columns read :data:`_COLUMNS_PER_READ` at a time into one (n, K) array, so
    that only the array and a few columns' Arrow buffers are ever held (not the whole table
    beside its copy); columns that are not all of one float type are read as one table."""
    import pyarrow as pa

    columns = partition.value_columns
    schema = parquet.schema_arrow
    types = {schema.field(name).type for name in columns}
    if len(types) != 1 or not pa.types.is_floating(next(iter(types))) or pa.types.is_float16(next(iter(types))):
        return value_block(_read(parquet, partition, columns), columns)
    block = np.empty((partition.n_rows, len(columns)), dtype=next(iter(types)).to_pandas_dtype())
    for start in range(0, len(columns), _COLUMNS_PER_READ):
        names = columns[start : start + _COLUMNS_PER_READ]
        table = _read(parquet, partition, names)
        for offset, name in enumerate(names):
            block[:, start + offset] = table.column(name).to_numpy()
        del table
    return block


def read_partition(partition: Partition) -> ScoredSet:
    """Read and validate one partition: a :class:`ScoredSet` whose messages name the file's rows.

    Raises
    ------
    ScoredSetError
        Any refusal of :func:`read_scored_set`, naming the file and the row in the file.
    """
    columns = ["id", "label", *(["group"] if partition.has_groups else []), *partition.value_columns]
    table = _read_row_group(partition, columns)
    block = value_block(table, partition.value_columns)
    return _validate(
        block,
        table.column("label").to_numpy(),
        table.column("id").to_numpy(),
        table.column("group").to_numpy() if partition.has_groups else None,
        partition.layout,
        copy=False,
    )


def _plain_text(column: Any, *, unique: bool) -> bool:
    """Whether an Arrow column is text with no null, no empty string, none longer than
    :data:`MAX_TEXT_LENGTH` characters (and, ``unique``, no repeat): the reader's rules on ids
    and groups, checked without building Python strings. False leaves the verdict (and its
    message) to the reader."""
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)) or column.null_count:
        return False
    if len(column) and (pc.min(pc.binary_length(column)).as_py() == 0
                        or pc.max(pc.utf8_length(column)).as_py() > MAX_TEXT_LENGTH):
        return False
    if unique and len(column) > 1:
        ordered = pc.take(column, pc.sort_indices(column))
        if pc.any(pc.equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))).as_py():
            return False
    return True


def _hash_ids(ids: Any) -> NDArray[np.uint64]:
    """64-bit hashes of ids (an Arrow column or a numpy array), of their text: the same id
    gives the same hash whatever its column type or file. Hashed :data:`_HASH_ROWS` at a
    time, so the Python strings this needs never number more than that."""
    import pyarrow as pa

    if isinstance(ids, (pa.ChunkedArray, pa.Array)):
        column = ids if pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type) else ids.cast(pa.string())
    else:
        column = pa.array(text_array(np.asarray(ids)), pa.string())
    hashes = np.empty(len(column), dtype=np.uint64)
    for start in range(0, len(column), _HASH_ROWS):
        piece = column.slice(start, _HASH_ROWS).to_numpy(zero_copy_only=False)
        hashes[start : start + len(piece)] = pd.util.hash_array(piece, categorize=False)
    return hashes


@dataclass(frozen=True, slots=True)
class _Valid:
    """A partition read and validated: its values, groups and the sorted hashes of its ids."""

    logits: NDArray[np.floating[Any]]
    labels: NDArray[np.intp]
    groups: NDArray[np.object_] | None
    id_hashes: NDArray[np.uint64]


def _validated(partition: Partition, *, with_groups: bool = False) -> _Valid:
    """Every rule of :func:`read_partition`, the ids and groups checked in Arrow and the ids
    hashed once (the groups returned only ``with_groups``); on any refusal the reader itself
    runs, so the message is its own."""
    parquet = _open(partition)
    keys = _read(parquet, partition, ["id", *(["group"] if partition.has_groups else [])])
    if not (_plain_text(keys.column("id"), unique=True)
            and (not partition.has_groups or _plain_text(keys.column("group"), unique=False))):
        del keys
        scored = read_partition(partition)  # refuses with the reader's message, or reads ids of other types
        hashes = _hash_ids(scored.ids)
        hashes.sort()
        return _Valid(scored.logits, scored.labels, scored.groups if with_groups else None, hashes)
    hashes = _hash_ids(keys.column("id"))
    hashes.sort()
    groups = None
    if with_groups and partition.has_groups:
        groups = text_array(np.asarray(keys.column("group").to_numpy(zero_copy_only=False)))
    del keys
    block = _streamed_block(parquet, partition)
    labels = _read(parquet, partition, ["label"]).column("label").to_numpy()
    try:
        logits, label_ints = _checked_values(block, labels, partition.layout, None)
    except ScoredSetError:
        read_partition(partition)  # the same refusal, with the row's id in the message
        raise
    return _Valid(logits, label_ints, groups, hashes)


def _read_values(
    partition: Partition, *, with_groups: bool = False
) -> tuple[NDArray[np.floating[Any]], NDArray[np.intp], NDArray[np.object_] | None]:
    """Logits, labels (and groups) of a partition validated before, by an earlier map: no ids
    read, and only what a pass could not survive checked again."""
    parquet = _open(partition)
    block = _streamed_block(parquet, partition)
    table = _read(parquet, partition, ["label", *(["group"] if with_groups else [])])
    try:
        logits, labels = _checked_values(block, table.column("label").to_numpy(), partition.layout, None)
    except ScoredSetError as exc:
        raise _changed(partition, str(exc).removeprefix(f"{partition.file}: ")) from exc
    groups = text_array(np.asarray(table.column("group").to_numpy(zero_copy_only=False))) if with_groups else None
    return logits, labels, groups


# ------------------------------------------------------------------------------ the maps


@dataclass(frozen=True, slots=True)
class _Checked:
    """What the validating map of the fit returns for one partition: its warm-start rows, for
    a binary set how often the classifier is right, and the sorted hashes of its ids."""

    sample_logits: NDArray[np.floating[Any]]
    sample_labels: NDArray[np.intp]
    n_correct: int
    id_hashes: NDArray[np.uint64]


def _check_and_sample(partition: Partition, stride: int) -> _Checked:
    valid = _validated(partition)
    picks = np.arange((-partition.offset) % stride, partition.n_rows, stride) if stride else np.arange(0)
    correct = (
        int(np.count_nonzero(valid.logits.argmax(axis=1) == valid.labels)) if partition.n_classes == 2 else 0
    )
    return _Checked(np.ascontiguousarray(valid.logits[picks]), valid.labels[picks], correct, valid.id_hashes)


def _expansion_sums(partition: Partition, beta: float, with_nll_at_one: bool) -> NDArray[np.float64]:
    logits, labels, _ = _read_values(partition)
    return nll_expansion_sums(logits, labels, beta, with_nll_at_one=with_nll_at_one)


@dataclass(frozen=True, slots=True)
class _PartitionStats:
    overall: CalibrationStats
    groups: dict[str, CalibrationStats]
    id_hashes: NDArray[np.uint64] | None  # None when read trusted (no ids read)


def _partition_stats(
    partition: Partition, temperature: float, n_bins: int, by_group: bool, trusted: bool
) -> _PartitionStats:
    hashes = None
    if trusted:
        logits, labels, groups = _read_values(partition, with_groups=by_group)
        if not by_group:  # one fused pass, as in-memory evaluate
            return _PartitionStats(summarise_checked(logits, labels, temperature, n_bins), {}, None)
    else:
        valid = _validated(partition, with_groups=by_group)
        logits, labels, groups, hashes = valid.logits, valid.labels, valid.groups, valid.id_hashes
    scores = _score_rows(logits, labels, temperature)
    if not by_group or groups is None:
        return _PartitionStats(scores.calibration_stats(n_bins=n_bins), {}, hashes)
    names, codes = np.unique(groups, return_inverse=True)
    per_group = scores.grouped_calibration_stats(codes.reshape(-1), names.shape[0], n_bins=n_bins)
    return _PartitionStats(reduce(add, per_group), dict(zip(names.tolist(), per_group, strict=True)), hashes)


def _nll_difference_sums(
    partition: Partition, before: float, after: float, trusted: bool
) -> tuple[NDArray[np.float64], NDArray[np.uint64] | None]:
    hashes = None
    if trusted:
        logits, labels, _ = _read_values(partition)
    else:
        valid = _validated(partition)
        logits, labels, hashes = valid.logits, valid.labels, valid.id_hashes
    difference = _score_rows(logits, labels, after).nll - _score_rows(logits, labels, before).nll
    sums = np.array([difference.shape[0], difference.sum(), np.square(difference).sum()], dtype=np.float64)
    return sums, hashes


def _id_hashes(partition: Partition) -> NDArray[np.uint64]:
    hashes = _hash_ids(_read_row_group(partition, ["id"]).column("id"))
    hashes.sort()
    return hashes


def _rows_with_hashes(partition: Partition, wanted: NDArray[np.uint64]) -> list[tuple[str, int, str]]:
    column = _read_row_group(partition, ["id"]).column("id")
    rows = np.flatnonzero(np.isin(_hash_ids(column), wanted))
    ids = column.take(rows).to_pylist()
    return [(partition.file, partition.first_row + int(row), str(name)) for row, name in zip(rows, ids, strict=True)]


def check_unique_ids(data: PartitionedScoredSet, engine: Engine = LOCAL_ENGINE) -> None:
    """Refuse an id that appears in two partitions (within a partition, reading refuses it).

    Each partition's ids are hashed (64 bits) by the engine; the calling process holds the
    hashes, 8 bytes per row (160 MB for 20 million rows), sorts them and confirms a shared
    hash on the ids themselves. The fit, the evaluation and the NLL change do the same from
    their own validating map, without reading the ids a second time.

    Raises
    ------
    ScoredSetError
        Naming the id and both places (file and row).
    """
    _refuse_duplicates(data, engine.map(_id_hashes, data.partitions), engine)


def _refuse_duplicates(data: PartitionedScoredSet, hashes: list[NDArray[np.uint64]], engine: Engine) -> None:
    """Find hashes shared by two partitions (each partition's hashes sorted, none repeated
    within one: the reader refused that), then name the first duplicate from its rows."""
    if len(hashes) < 2:
        return
    found: list[NDArray[np.uint64]] = []
    bounds = [np.uint64(0), *(np.uint64((2**64 // _HASH_RANGES) * k) for k in range(1, _HASH_RANGES))]
    for low, high in zip(bounds, [*bounds[1:], None], strict=True):
        # Each partition's hashes are sorted: its share of the range is a slice (a view).
        pieces = [part[np.searchsorted(part, low):(None if high is None else np.searchsorted(part, high))]
                  for part in hashes]
        merged = np.concatenate(pieces)
        merged.sort()
        found.append(merged[1:][merged[1:] == merged[:-1]])
        if sum(piece.size for piece in found) >= _SHOWN_DUPLICATES:
            break
    shared = np.unique(np.concatenate(found))[:_SHOWN_DUPLICATES]
    if not shared.size:
        return
    places: dict[str, list[tuple[str, int]]] = {}
    for hits in engine.map(partial(_rows_with_hashes, wanted=shared), data.partitions):
        for file, row, identifier in hits:
            places.setdefault(identifier, []).append((file, row))
    # The duplicate whose second occurrence comes first (files in path order, then rows).
    duplicated = sorted((spots[1], spots[0], name) for name, spots in places.items() if len(spots) > 1)
    if not duplicated:
        return  # different ids with equal 64-bit hashes
    (second_file, second_row), (first_file, first_row), identifier = duplicated[0]
    more = f" ({len(duplicated) - 1} more ids are duplicated)" if len(duplicated) > 1 else ""
    raise ScoredSetError(
        f"{second_file}: row {second_row}, column id: id {identifier!r} also appears in {first_file} row {first_row}"
        f"{more}; ids must be unique across the partitions of {data.source} (drop or rename the duplicates)"
    )


# ------------------------------------------------------------------------------ the reduces


def fit_partitioned(
    data: PartitionedScoredSet, *, bounds: tuple[float, float] = DEFAULT_BOUNDS, engine: Engine = LOCAL_ENGINE
) -> TemperatureFit:
    """:func:`fit_temperature` over a partitioned set: the same T (to float rounding), never
    holding more than one partition per worker.

    One validating map (it also gathers the warm start's sample), the duplicate-id check,
    then one map per pass of the search (usually one; two at most from 5,000 rows up).

    Raises
    ------
    ScoredSetError
        Any refusal of the rows (file and row named) or a duplicate id across partitions.
    ValueError
        Bad bounds; a binary classifier right less than half the time.
    """
    bounds = check_bounds(bounds)
    n_samples, n_classes = data.n_samples, data.n_classes
    rows, stride = warm_start_sample_rows(n_samples)
    checked = engine.map(partial(_check_and_sample, stride=stride), data.partitions)
    _refuse_duplicates(data, [part.id_hashes for part in checked], engine)
    if n_classes == 2:
        refuse_inverted_binary(sum(part.n_correct for part in checked), n_samples)
    start = 1.0
    if rows:
        sample = np.concatenate([part.sample_logits for part in checked])
        sample_labels = np.concatenate([part.sample_labels for part in checked])
        compiled = compiled_path("expansion_sums_serial", n_samples * n_classes, sample.dtype)
        quarter, quarter_labels = np.ascontiguousarray(sample[::4]), np.ascontiguousarray(sample_labels[::4])
        start = warm_start_search(
            _expansion(quarter, quarter_labels, at_one=False, compiled=compiled),
            lambda: _expansion(sample, sample_labels, at_one=False, compiled=compiled),
            bounds,
        )
    del checked

    def expand(beta: float, first: bool) -> NDArray[np.float64]:
        parts = engine.map(partial(_expansion_sums, beta=beta, with_nll_at_one=first), data.partitions)
        sums = reduce(add, parts, np.zeros(N_EXPANSION_SUMS, dtype=np.float64))
        if not np.isfinite(sums).all():
            raise ValueError(
                f"the NLL and its derivatives overflow float64 at T = {1.0 / beta:.6g} on {data.source}; the logits "
                f"were validated, so the bounds on T reach too far: keep them within a few decades of 1 (the default "
                f"is {DEFAULT_BOUNDS})"
            )
        return sums

    return fit_result(minimise_nll(expand, bounds, start=start), n_samples, n_classes, bounds)


def evaluate_partitioned(
    data: PartitionedScoredSet,
    *,
    temperature: float = 1.0,
    n_bins: int = 15,
    min_count: int = 10,
    by_group: bool = False,
    engine: Engine = LOCAL_ENGINE,
    trusted: bool = False,
) -> CalibrationReport:
    """:func:`evaluate` over a partitioned set (equal-width bins): the same report, from
    :class:`CalibrationStats` that add up, with the per-group breakdown when ``by_group``.

    ``trusted=True`` when a map in this process validated the set already (a fit on it):
    the rows are then read without their ids and not checked again, and ids are not
    compared across partitions.

    Raises
    ------
    ScoredSetError
        Any refusal of the rows; a duplicate id across partitions; ``by_group`` on files
        without a ``group`` column.
    """
    temperature = check_temperature(temperature)
    n_bins = check_n_bins(n_bins)
    min_count = check_count(min_count, name="min_count", minimum=0)
    if by_group and not data.has_groups:
        missing = next(part.file for part in data.partitions if not part.has_groups)
        raise ScoredSetError(f"{missing}: has no 'group' column; the per-group breakdown needs one in every file")
    parts = engine.map(
        partial(_partition_stats, temperature=temperature, n_bins=n_bins, by_group=by_group, trusted=trusted),
        data.partitions,
    )
    if not trusted:
        _refuse_duplicates(data, [part.id_hashes for part in parts if part.id_hashes is not None], engine)
    overall = reduce(add, (part.overall for part in parts))
    groups: dict[str, CalibrationStats] = {}
    for part in parts:
        for name, stats in part.groups.items():
            groups[name] = groups[name] + stats if name in groups else stats
    table = overall.reliability_table(min_count=min_count)
    breakdown = None
    if by_group:
        rows = tuple(
            GroupCalibration(group=name, n=stats.n, ece=stats.ece, accuracy=stats.accuracy,
                             mean_confidence=stats.mean_confidence)
            for name, stats in sorted(groups.items())
        )
        weighted = sum(row.n * row.ece for row in rows) / sum(row.n for row in rows)
        breakdown = GroupBreakdown(groups=rows, weighted_ece=weighted, n_bins=n_bins, scheme="equal-width")
    return CalibrationReport(
        n=overall.n, n_classes=data.n_classes, temperature=temperature, accuracy=overall.accuracy,
        nll=overall.nll, ece=table.ece, mce=table.mce, brier=overall.brier, mean_confidence=overall.mean_confidence,
        n_bins=n_bins, scheme="equal-width", table=table, groups=breakdown,
    )


def nll_difference_partitioned(
    data: PartitionedScoredSet,
    *,
    temperature_before: float,
    temperature_after: float,
    confidence_level: float = 0.95,
    engine: Engine = LOCAL_ENGINE,
    trusted: bool = False,
) -> BootstrapComparison:
    """The mean per-row NLL change (after − before) with its normal interval, from Σ d, Σ d².

    ``trusted`` as in :func:`evaluate_partitioned`. The counterpart of :func:`paired_bootstrap_nll` for sets too large for one process:
    ``n_resamples`` is 0 and ``seed`` is 0 in the result (no resampling: the interval is
    mean ± z · SD / sqrt(n)); the verdict follows the same rule.
    """
    from scipy.special import ndtri  # the normal quantile, as scipy.stats.norm.ppf computes it

    before, after = check_temperature(temperature_before), check_temperature(temperature_after)
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1); got {confidence_level!r}")
    parts = engine.map(partial(_nll_difference_sums, before=before, after=after, trusted=trusted), data.partitions)
    if not trusted:
        _refuse_duplicates(data, [hashes for _, hashes in parts if hashes is not None], engine)
    n, total, squares = (float(value) for value in reduce(add, (sums for sums, _ in parts)))
    mean = total / n
    spread = math.sqrt(max(squares / n - mean * mean, 0.0) * n / max(n - 1.0, 1.0))
    half = float(ndtri(0.5 + confidence_level / 2.0)) * spread / math.sqrt(n)
    low, high = mean - half, mean + half
    verdict: Verdict = "improved" if high < 0.0 else "worse" if low > 0.0 else "not established"
    return BootstrapComparison(
        estimate=mean, low=low, high=high, verdict=verdict, temperature_before=before, temperature_after=after,
        n=int(n), n_resamples=0, confidence_level=confidence_level, seed=0,
    )
