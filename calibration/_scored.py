"""Scored sets: ids, logits, labels, optional groups; read from and written to .npz/.parquet/.csv.

A scored set is what a classifier produced on labelled examples: one row per example with a
unique, non-empty string id, a row of ``K >= 2`` finite logits, an integer label in
``[0, K)`` and, optionally, a group key (source, language, document family, ...) for the
per-group metrics.

File formats
------------
``.npz``
    Keys ``logits`` (float, shape (N, K)) and ``labels`` (integers, shape (N,)); optional
    ``ids`` (N strings; default: the row index ``"0"``, ``"1"``, ...) and ``groups``
    (N strings). ``probs`` (probabilities, shape (N, K)) may stand in for ``logits``: then
    logits = log(probs), which is exact because softmax is shift-invariant per row. Other
    keys (e.g. ``source``) are ignored. Arrays are read with ``allow_pickle=False``.
``.parquet`` and ``.csv``
    Columns ``id``, ``label``, optional ``group``, and ``logit_0`` ... ``logit_{K-1}`` (or
    ``prob_0`` ... ``prob_{K-1}``), in any order, each once. Other columns are ignored (their
    names may repeat). CSV is UTF-8 with a header line; every field is read as text first so
    that ids such as ``"007"`` or ``"NA"`` stay what they are. Parquet is read with Arrow
    (pandas metadata in the file is not used).

Ids and groups are read as Python strings (an object array: each as long as it is, never
numpy's fixed-width text, where one 100,000-character id among 10,000 rows took 4 GB), at
most :data:`MAX_TEXT_LENGTH` (1,000) characters each.

:func:`read_logits` reads the logits of such a file whose rows need not be labelled (served
rows): the ``labels`` key or ``label`` column may be missing, and is not read when present;
every other rule holds.

Writing always stores logits (the ``logits`` key or ``logit_`` columns). Reading what was
written gives back the same ids, labels, groups and logits exactly: ``.npz`` and
``.parquet`` keep float32 or float64 as they are; ``.csv`` is read as float64 and is written
with 17 significant digits, which round-trips every float64 (and every float32) bit for bit.

Refusals
--------
Bad input raises :class:`ScoredSetError` (a ``ValueError``) whose message starts with the
file (or the ``source`` given to :meth:`ScoredSet.from_arrays`) and names the row and the
column or key, the rule, and what to do. Rows are counted from 0 over the data rows (the
CSV header is not a row). Refused: an unknown extension, a missing or unreadable file,
anything but a regular file (a FIFO, a device, a link to one: checked before it is opened),
missing keys or columns, a read column that appears twice, both logits and probabilities,
``logit_`` columns numbered with gaps, an empty set, K < 2, more than ``max_classes``
classes (default :data:`MAX_CLASSES`, 100,000; checked on the CSV header line, the Parquet
schema or the ``.npy`` header, before any row is read), a table of more columns than
``max_classes`` + 100,003 (:data:`MAX_OTHER_COLUMNS` ignored ones beside id, label, group and
the logits; a CSV header's are counted by its commas before it is parsed), a CSV header line
longer than 16 Mi characters, mismatched lengths, missing, empty, duplicate or over-long ids (and groups),
labels that are not integers or lie outside [0, K), non-finite logits, a row whose
logits span more than 1e100 (max − min; see :data:`calibration._kernels.MAX_LOGIT_SPREAD`),
probabilities that are not finite, ≤ 0, or whose row does not sum to 1 within 1e-4.
A Parquet column of a type that cannot hold its values (decimal, binary, list, ... logits;
binary or nested ids), or text that is not UTF-8, is refused by name. What a file declares
is checked before anything is inflated or allocated (:mod:`calibration._file_limits`): the
rows × columns of a Parquet footer and the ``.npy`` headers of an ``.npz`` must fit in the
memory this process may use and, beyond 64 MiB, in 100 times the bytes the file stores them
in (real scored data does not compress that much: a file that does is a compression bomb);
an ``.npy`` header must not declare more bytes than its member holds, and a member must be
stored, deflated, bzip2 or lzma, unencrypted. A file that is not a zip of ``.npy`` arrays is
refused as such (nothing is ever unpickled). Writing validates first and then
writes atomically (a temporary file in the same folder, then ``os.replace``): a refused
set leaves nothing behind.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import os
import re
import uuid
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._defaults import MAX_CLASSES
from ._file_limits import expansion_refusal, memory_limit, memory_refusal, not_a_regular_file
from ._kernels import first_nonfinite_row, first_refused_row
from ._validation import MAX_LOGIT_SPREAD, check_labels, check_logits, logit_spread_refusal, text_array

__all__ = [
    "ScoredSet",
    "ScoredSetError",
    "read_scored_set",
    "write_scored_set",
    "checked_data",
    "split_data",
    "validated_set",
    "SCORED_SET_FORMATS",
    "MAX_CLASSES",
    "MAX_OTHER_COLUMNS",
    "MAX_TEXT_LENGTH",
]

#: File extensions a scored set reads from and writes to.
SCORED_SET_FORMATS: tuple[str, ...] = (".npz", ".parquet", ".csv")
#: The longest id or group key read, in characters: far above any request id, hash or path
#: in use; an id of 100,000 characters is not a name but a payload (or an attack).
MAX_TEXT_LENGTH = 1_000

# Probabilities from float32 softmax outputs sum to 1 only to about 1e-6 per row; 1e-4 leaves
# room for rounding while still catching logits stored under prob_ names.
_PROB_SUM_TOLERANCE = 1e-4
# 17 significant digits round-trip every float64 (and hence every float32) exactly.
_CSV_FLOAT_FORMAT = "%.17g"
_LOGIT_COLUMN = re.compile(r"logit_(0|[1-9][0-9]*)")
_PROB_COLUMN = re.compile(r"prob_(0|[1-9][0-9]*)")
_NAN_SPELLINGS = ("nan", "+nan", "-nan")
_TABLE_EXPECTED = (
    "a scored table needs columns id, label, optional group, and logit_0 ... logit_{K-1} "
    "(or prob_0 ... prob_{K-1})"
)
_NPZ_EXPECTED = "a scored .npz needs keys 'logits' (or 'probs') and 'labels', optionally 'ids' and 'groups'"
_NPZ_KEYS = ("logits", "probs", "labels", "ids", "groups")
_ZIP_MAGIC = b"PK"
_NPY_MAGIC = b"\x93NUMPY"
# The zip methods Python reads (numpy.savez writes the first two); others (6 implode, 99 AES
# ...) are refused by name before a member is opened.
_ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated", zipfile.ZIP_BZIP2: "bzip2",
                zipfile.ZIP_LZMA: "lzma"}
# The CSV header line is read before anything else, at most this many characters: a file
# without a line end (or a device) must not be read whole to find its first line.
_MAX_HEADER_CHARACTERS = 16 * 2**20
#: Columns a table may have beside its ``max_classes`` logit_ (or prob_) columns and id, label and
#: group: ignored ones (a source, a timestamp, features). A CSV header of more is refused by
#: counting its separators, before it is parsed: 16 Mi characters make 8 million names, 1.8 GB
#: of Python strings, for a table that is refused anyway.
MAX_OTHER_COLUMNS = 100_000


class ScoredSetError(ValueError):
    """A scored-set file or array was refused; the message names the file, column or row."""


@dataclass(frozen=True, slots=True, eq=False)
class ScoredSet:
    """A validated scored set. Construct through :meth:`from_arrays` or :func:`read_scored_set`.

    The arrays of a set built by those two (or by :meth:`subset`) are read-only, so the
    validation holds for the life of the object, and a validated set passes through the
    core without being checked again: every function of :mod:`calibration` that takes
    ``logits`` and ``labels`` also takes a scored set in their place. A set built field by
    field (``ScoredSet(ids=..., logits=..., ...)``) is not validated, and is checked like
    any arrays wherever it goes.

    Attributes
    ----------
    ids : object array of str of shape (n_samples,)
        Unique, non-empty example ids of at most :data:`MAX_TEXT_LENGTH` characters, as
        Python strings (each as long as it is: never numpy's fixed-width text, in which one
        long id would make every row as long).
    logits : array of float of shape (n_samples, n_classes)
        Finite logits, float32 or float64 as given.
    labels : array of int of shape (n_samples,)
        True classes in ``[0, n_classes)``.
    groups : object array of str of shape (n_samples,) or None
        Optional group key per row (Python strings, as ``ids``).

    Examples
    --------
    >>> scored = ScoredSet.from_arrays([[2.0, 0.0], [0.5, 1.5]], [0, 1], groups=["a", "b"])
    >>> scored.n_samples, scored.n_classes, scored.ids.tolist()
    (2, 2, ['0', '1'])
    """

    ids: NDArray[np.object_]
    logits: NDArray[np.floating[Any]]
    labels: NDArray[np.intp]
    groups: NDArray[np.object_] | None = None
    # Set by the one validation (_validate) and by nothing else: a set built field by field
    # or by dataclasses.replace starts unvalidated.
    _validated: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def n_samples(self) -> int:
        """Number of rows (examples)."""
        return int(self.logits.shape[0])

    @property
    def n_classes(self) -> int:
        """Number of classes K (columns of ``logits``)."""
        return int(self.logits.shape[1])

    @classmethod
    def from_arrays(
        cls,
        logits: ArrayLike,
        labels: ArrayLike,
        *,
        ids: ArrayLike | None = None,
        groups: ArrayLike | None = None,
        source: str = "arrays",
        first_row: int = 0,
    ) -> ScoredSet:
        """Validate arrays and return them as a scored set (the arrays are copied).

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)
            Finite logits, ``n_classes >= 2``. float32 and float64 are kept as they are;
            integers and other float widths become float64.
        labels : array-like of shape (n_samples,)
            Integers (or integral floats) in ``[0, n_classes)``.
        ids : array-like of shape (n_samples,), optional
            Unique, non-empty ids (converted to str). Default: the row index as strings.
        groups : array-like of shape (n_samples,), optional
            Group key per row (converted to str).
        source : str, default "arrays"
            Names the origin at the start of every error message.
        first_row : int, default 0
            The number of the first row in messages: a part of a larger file (a Parquet row
            group, a chunk) names the file's rows.

        Returns
        -------
        ScoredSet

        Raises
        ------
        ScoredSetError
            For any refusal listed in the module docstring; the message names ``source``,
            the row and the column.

        Examples
        --------
        >>> scored = ScoredSet.from_arrays(np.zeros((3, 2), dtype=np.float32), [0, 1, 1])
        >>> scored.logits.dtype, scored.labels.tolist(), scored.ids.tolist()
        (dtype('float32'), [0, 1, 1], ['0', '1', '2'])
        >>> ScoredSet.from_arrays([[1.0, np.inf], [0.0, 1.0]], [0, 1], ids=["a", "b"])
        Traceback (most recent call last):
        ...
        calibration._scored.ScoredSetError: arrays: row 0 (id 'a'), logits column 1: inf is not finite; every logit must be finite (fix or drop the row)
        """
        if isinstance(first_row, bool) or not isinstance(first_row, (int, np.integer)) or first_row < 0:
            raise TypeError(f"first_row must be an integer >= 0; got {first_row!r}")
        layout = _Layout(source=str(source), kind="arrays", first_row=int(first_row))
        return _validate(logits, labels, ids, groups, layout, copy=True)

    def subset(self, indices: ArrayLike) -> ScoredSet:
        """Return the rows selected by ``indices`` (integer positions or a boolean mask).

        Parameters
        ----------
        indices : array-like of int, or of bool with shape (n_samples,)
            Row positions (each at most once, since ids stay unique) or a mask.

        Returns
        -------
        ScoredSet
            A validated set holding copies of the selected rows, in the order given.

        Raises
        ------
        ScoredSetError
            When the mask has the wrong length, a position is out of range or repeated, or
            nothing is selected.

        Examples
        --------
        >>> scored = ScoredSet.from_arrays([[2.0, 0.0], [0.5, 1.5], [1.0, 1.0]], [0, 1, 1])
        >>> scored.subset([2, 0]).ids.tolist()
        ['2', '0']
        >>> scored.subset(scored.labels == 1).n_samples
        2
        """
        selector = np.asarray(indices)
        n = self.n_samples
        if selector.dtype.kind == "b":
            if selector.shape != (n,):
                raise ScoredSetError(
                    f"subset: boolean mask has shape {selector.shape}; it must have one entry per row ({n},)"
                )
            positions = np.flatnonzero(selector)
        elif selector.dtype.kind in "iu" or selector.size == 0:
            positions = selector.astype(np.intp).reshape(-1)
            outside = (positions < -n) | (positions >= n)
            if outside.any():
                bad = int(positions[int(np.argmax(outside))])
                raise ScoredSetError(f"subset: position {bad} is out of range for {n} rows; use 0 ... {n - 1}")
            ordered = np.sort(positions % n)
            repeated = ordered[1:] == ordered[:-1]
            if repeated.any():
                row = int(ordered[1:][repeated][0])
                raise ScoredSetError(
                    f"subset: row {row} is selected more than once; select each row at most once (ids stay unique)"
                )
        else:
            raise ScoredSetError(f"subset: indices must be integer positions or a boolean mask; got dtype {selector.dtype}")
        groups = None if self.groups is None else self.groups[positions]
        if self._validated and positions.size:
            # Rows of a validated set were checked when it was built, and distinct positions keep
            # its ids unique: the subset is validated as it is, without reading a logit again.
            part = ScoredSet(ids=_freeze(self.ids[positions], copy=False),
                             logits=_freeze(self.logits[positions], copy=False),
                             labels=_freeze(self.labels[positions], copy=False),
                             groups=None if groups is None else _freeze(groups, copy=False))
            object.__setattr__(part, "_validated", True)
            return part
        return _validate(self.logits[positions], self.labels[positions], self.ids[positions], groups,
                         _Layout(source="subset", kind="arrays"), copy=False)


def validated_set(data: object) -> ScoredSet | None:
    """``data`` when it is a scored set validated when it was built, else None.

    >>> scored = ScoredSet.from_arrays([[2.0, 0.0]], [0])
    >>> validated_set(scored) is scored, validated_set(scored.logits)
    (True, None)
    """
    return data if isinstance(data, ScoredSet) and data._validated else None


def checked_data(
    logits: ArrayLike | ScoredSet, labels: ArrayLike | None, *, check_finite: bool = True
) -> tuple[NDArray[np.floating[Any]], NDArray[np.intp]]:
    """The logits and labels a public function computes on, each checked once.

    A validated :class:`ScoredSet` stands for both (``labels`` is then None) and its arrays
    are returned as they are; anything else is checked here (:func:`check_logits`,
    :func:`check_labels`), a set built field by field included. ``check_finite=False`` skips
    the scan of every logit, for logits their caller has already checked (as
    :func:`check_logits`'s).

    Raises
    ------
    TypeError
        For a scored set together with ``labels``, or logits without them.

    Examples
    --------
    >>> scored = ScoredSet.from_arrays([[2.0, 0.0], [0.5, 1.5]], [0, 1])
    >>> checked_data(scored, None)[0] is scored.logits
    True
    >>> checked_data([[1, 0]], [0])[0].dtype
    dtype('float64')
    """
    scored = validated_set(logits)
    if scored is not None and labels is None:
        return scored.logits, scored.labels
    raw_logits, raw_labels = split_data(logits, labels)
    checked = check_logits(raw_logits, check_finite=check_finite)
    return checked, check_labels(raw_labels, *checked.shape)


def split_data(logits: ArrayLike | ScoredSet, labels: ArrayLike | None) -> tuple[ArrayLike, ArrayLike]:
    """``(logits, labels)`` from a scored set (with no ``labels``) or from the pair, unchecked."""
    if isinstance(logits, ScoredSet):
        if labels is not None:
            raise TypeError(
                "labels were given with a ScoredSet, which carries its own; pass the ScoredSet alone, "
                "or logits and labels"
            )
        return logits.logits, logits.labels
    if labels is None:
        raise TypeError("labels are required with logits (or pass a ScoredSet, which carries its labels)")
    return logits, labels


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where the arrays came from, so that messages use the names the user sees."""

    source: str
    kind: Literal["arrays", "npz", "table"]
    probs: bool = False
    # Rows are named from here: a partition of a file names the file's rows, not its own.
    first_row: int = 0
    # False: read for the logits alone (read_logits); labels are neither required nor read.
    labelled: bool = True

    def row(self, row: int, ids: NDArray[np.object_] | None = None) -> str:
        """``row N`` (with the id when known), N counted in the file or arrays the user sees."""
        shown = self.first_row + row
        return f"row {shown}" if ids is None else f"row {shown} (id {str(ids[row])!r})"

    @property
    def matrix(self) -> str:
        key = "probs" if self.probs else "logits"
        if self.kind == "table":
            return f"the {'prob' if self.probs else 'logit'}_ columns"
        return f"key '{key}'" if self.kind == "npz" else key

    def column(self, k: int) -> str:
        if self.kind == "table":
            return f"column {'prob' if self.probs else 'logit'}_{k}"
        key = "probs" if self.probs else "logits"
        return f"key '{key}' column {k}" if self.kind == "npz" else f"{key} column {k}"

    def field(self, name: Literal["labels", "ids", "groups"]) -> str:
        if self.kind == "table":
            return f"column {name[:-1]}"
        return f"key '{name}'" if self.kind == "npz" else name

    def error(self, message: str) -> ScoredSetError:
        return ScoredSetError(f"{self.source}: {message}")


def _show(value: object) -> str:
    """repr of a value without numpy's ``np.str_(...)`` wrappers."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _validate(
    logits: ArrayLike,
    labels: ArrayLike | None,
    ids: ArrayLike | None,
    groups: ArrayLike | None,
    layout: _Layout,
    *,
    copy: bool,
) -> ScoredSet:
    """Check everything a scored set promises and build it; the single place rules live.

    ``labels`` None (a read for the logits alone, ``layout.labelled`` False): every rule but
    the labels', which are class 0 placeholders the caller never hands on."""
    try:
        block = np.asarray(logits)
    except (TypeError, ValueError) as exc:  # ragged nested lists
        raise layout.error(f"{layout.matrix} must be a numeric array of shape (n_samples, n_classes): {exc}") from exc
    if block.ndim != 2:
        raise layout.error(f"{layout.matrix} must be 2-D of shape (n_samples, n_classes); got shape {block.shape}")
    n_samples, n_classes = block.shape
    if n_samples == 0:
        raise layout.error("the scored set is empty (0 rows); at least one "
                           + ("labelled example" if layout.labelled else "row") + " is required")
    if n_classes < 2:
        raise layout.error(
            f"{layout.matrix}: {n_classes} class column(s) found; at least 2 classes are required (K >= 2)"
        )
    label_array = np.zeros(n_samples, dtype=np.intp) if labels is None else np.asarray(labels)
    if label_array.ndim != 1 or label_array.shape[0] != n_samples:
        raise layout.error(
            f"{layout.field('labels')} has shape {label_array.shape}; expected ({n_samples},), one label per row "
            f"of {layout.matrix}"
        )
    id_array = _as_ids(ids, n_samples, layout)
    values, label_ints = _checked_values(block, label_array, layout, id_array)
    group_array = None if groups is None else _as_strings(groups, n_samples, layout, "groups")
    scored = ScoredSet(
        ids=_freeze(id_array, copy=False),
        logits=_freeze(values, copy=copy),
        labels=_freeze(label_ints, copy=False),
        groups=None if group_array is None else _freeze(group_array, copy=False),
    )
    object.__setattr__(scored, "_validated", True)
    return scored


def _checked_values(
    block: NDArray[Any], labels: NDArray[Any], layout: _Layout, ids: NDArray[np.object_] | None
) -> tuple[NDArray[np.floating[Any]], NDArray[np.intp]]:
    """The logits (from probabilities when ``layout.probs``) and integer labels of a block whose
    shapes were checked: every rule on values and labels, ids only named in messages."""
    label_ints = _as_labels(labels, block.shape[1], layout, ids)
    values = _as_float_block(block, layout, ids)
    # The one read of every value: finite, and (logits) each row's spread within the limit.
    # Probabilities are only checked for finiteness here; their log is checked below.
    refused = first_refused_row(values, math.inf if layout.probs else MAX_LOGIT_SPREAD)
    if refused >= 0:
        _refuse_row(values, refused, layout, ids)
    if layout.probs:
        values = _logits_from_probs(values, layout, ids)
    return values, label_ints


def _refuse_row(
    values: NDArray[np.floating[Any]], refused: int, layout: _Layout, ids: NDArray[np.object_] | None
) -> None:
    """Raise for the first refused row of ``values``: a non-finite value anywhere is named
    before a row that spans too much (only runs on the error path)."""
    if np.isfinite(values[refused]).all():  # the spread rule; unless a later row is not finite
        later = first_nonfinite_row(values[refused + 1 :])
        if later < 0:
            raise layout.error(f"{layout.row(refused, ids)}, {layout.matrix}: {logit_spread_refusal(values[refused])}")
        refused += 1 + later
    col = int(np.argmin(np.isfinite(values[refused])))
    raise layout.error(
        f"{layout.row(refused, ids)}, {layout.column(col)}: {_show(values[refused, col])} is not finite; "
        f"every {'probability' if layout.probs else 'logit'} must be finite (fix or drop the row)"
    )


def _freeze(array: NDArray[Any], *, copy: bool) -> NDArray[Any]:
    # A copy detaches the set from the caller's buffers; read-only keeps it validated.
    out = np.array(array, copy=True) if copy else array
    out.setflags(write=False)
    return out


def _as_strings(raw: ArrayLike | None, n_samples: int, layout: _Layout, name: Literal["ids", "groups"]) -> NDArray[np.object_]:
    array = np.asarray(raw)
    if array.ndim != 1 or array.shape[0] != n_samples:
        raise layout.error(
            f"{layout.field(name)} has shape {array.shape}; expected ({n_samples},), one entry per row "
            f"of {layout.matrix}"
        )
    missing = np.asarray(pd.isna(array), dtype=bool) if array.dtype.kind in "Of" else np.zeros(n_samples, bool)
    try:
        strings = text_array(array)
    except UnicodeDecodeError as exc:
        raise layout.error(f"{layout.field(name)} is not valid UTF-8 text: {exc}") from exc
    entry = "id" if name == "ids" else "group"
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=n_samples)
    absent = missing | (lengths == 0)
    if absent.any():
        row = int(np.argmax(absent))
        rule = "a unique, non-empty id" if name == "ids" else "a non-empty group"
        raise layout.error(
            f"{layout.row(row)}, {layout.field(name)}: the {entry} is {'missing' if missing[row] else 'empty'}; "
            f"every row needs {rule} (fill it in or drop the row)"
        )
    if n_samples and int(lengths.max()) > MAX_TEXT_LENGTH:
        row = int(np.argmax(lengths > MAX_TEXT_LENGTH))
        raise layout.error(
            f"{layout.row(row)}, {layout.field(name)}: the {entry} is {int(lengths[row]):,} characters long "
            f"({strings[row][:20]!r}...); {entry}s must be at most {MAX_TEXT_LENGTH:,} characters (shorten it, "
            "e.g. to a hash of it)"
        )
    return strings


def _as_ids(raw: ArrayLike | None, n_samples: int, layout: _Layout) -> NDArray[np.object_]:
    if raw is None:
        return text_array(np.arange(n_samples))
    ids = _as_strings(raw, n_samples, layout, "ids")
    # 64-bit hashes of the ids, sorted: a quarter of the time of sorting the strings; the ids
    # themselves are compared only when two hashes agree.
    hashes = np.sort(pd.util.hash_array(ids, categorize=False))
    if not (hashes[1:] == hashes[:-1]).any():
        return ids
    repeated = pd.Series(ids, dtype=object, copy=False).duplicated().to_numpy()
    if repeated.any():
        # Report the duplicate whose second occurrence comes first in the file.
        second = int(np.argmax(repeated))
        duplicate = str(ids[second])
        first = int(np.flatnonzero(ids == duplicate)[0])
        n_duplicated = int(pd.unique(ids[repeated]).size)
        more = f" ({n_duplicated - 1} more ids are duplicated)" if n_duplicated > 1 else ""
        raise layout.error(
            f"{layout.field('ids')}: id {duplicate!r} appears in {layout.row(first)} and {layout.row(second)}{more}; "
            f"ids must be unique (drop or rename the duplicates)"
        )
    return ids


def _as_labels(
    labels: NDArray[Any], n_classes: int, layout: _Layout, ids: NDArray[np.object_] | None
) -> NDArray[np.intp]:
    rule = f"labels must be integers in [0, {n_classes})"
    kind = labels.dtype.kind
    values: NDArray[Any]
    if kind in "iu":
        values = labels
    elif kind in "fUSO":
        if kind == "f":
            numbers = labels.astype(np.float64)
        else:
            # Text and objects (CSV fields, parquet strings): parse, then insist on integers.
            numbers = pd.to_numeric(pd.Series(labels.astype(str) if kind == "S" else labels), errors="coerce").to_numpy(
                dtype=np.float64, na_value=np.nan
            )
        integral = np.isfinite(numbers) & (numbers == np.round(numbers))
        if not integral.all():
            row = int(np.argmin(integral))
            raise layout.error(
                f"{layout.row(row, ids)}, {layout.field('labels')}: {_show(labels[row])} is not an integer; {rule}"
            )
        values = numbers
    else:
        raise layout.error(f"{layout.field('labels')} has dtype {labels.dtype}; {rule}")
    inside = (values >= 0) & (values < n_classes)
    if not inside.all():
        row = int(np.argmin(inside))
        raise layout.error(
            f"{layout.row(row, ids)}, {layout.field('labels')}: {_show(labels[row])} is outside [0, {n_classes}); "
            f"{rule}, one per logit column (check the label mapping)"
        )
    return values.astype(np.intp)


def _as_float_block(block: NDArray[Any], layout: _Layout, ids: NDArray[np.object_] | None) -> NDArray[np.floating[Any]]:
    kind = block.dtype.kind
    if kind == "f":
        return block if block.dtype in (np.float32, np.float64) else block.astype(np.float64)
    if kind in "iu":
        return block.astype(np.float64)
    if kind in "USO":
        try:
            return (np.char.decode(block, "utf-8") if kind == "S" else block).astype(np.float64)
        except (TypeError, ValueError, UnicodeDecodeError):
            _raise_first_non_number(block, layout, ids)
    raise layout.error(f"{layout.matrix}: dtype {block.dtype} found; logits must be numbers")


def _raise_first_non_number(block: NDArray[Any], layout: _Layout, ids: NDArray[np.object_] | None) -> None:
    """Name the first cell that does not parse as a number (only runs on the error path)."""
    frame = pd.DataFrame(block)
    parsed = frame.apply(lambda column: pd.to_numeric(column, errors="coerce")).to_numpy(dtype=np.float64, na_value=np.nan)
    spelled_nan = np.isin(np.char.lower(np.char.strip(frame.to_numpy().astype(str))), _NAN_SPELLINGS)
    bad = np.isnan(parsed) & ~spelled_nan
    if not bad.any():  # pragma: no cover - numpy refused something pandas parses
        raise layout.error(f"{layout.matrix} must hold numbers; some values do not parse as numbers")
    row = int(np.argmax(bad.any(axis=1)))
    col = int(np.argmax(bad[row]))
    raise layout.error(
        f"{layout.row(row, ids)}, {layout.column(col)}: {_show(block[row, col])} is not a number; "
        f"every {'probability' if layout.probs else 'logit'} must be a finite number"
    )


def _logits_from_probs(
    probs: NDArray[np.floating[Any]], layout: _Layout, ids: NDArray[np.object_] | None
) -> NDArray[np.floating[Any]]:
    positive = probs > 0
    if not positive.all():
        row = int(np.argmin(positive.all(axis=1)))
        col = int(np.argmin(positive[row]))
        raise layout.error(
            f"{layout.row(row, ids)}, {layout.column(col)}: probability {_show(probs[row, col])} is <= 0; "
            f"probabilities must be > 0 because their log is the logit (store logits instead)"
        )
    sums = probs.sum(axis=1, dtype=np.float64)
    off = np.abs(sums - 1.0) > _PROB_SUM_TOLERANCE
    if off.any():
        row = int(np.argmax(off))
        raise layout.error(
            f"{layout.row(row, ids)}: probabilities in {layout.matrix} sum to {float(sums[row]):.6g}; each row must "
            f"sum to 1 within {_PROB_SUM_TOLERANCE:g} (if these are logits, store them as logits)"
        )
    # log keeps the dtype: float32 probabilities give float32 logits.
    logits: NDArray[np.floating[Any]] = np.log(probs)
    return logits


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in SCORED_SET_FORMATS:
        raise ScoredSetError(
            f"{path}: unknown extension {path.suffix!r}; a scored set is one of {', '.join(SCORED_SET_FORMATS)}"
        )
    return suffix


def read_scored_set(path: str | Path, *, max_classes: int = MAX_CLASSES) -> ScoredSet:
    """Read and validate a scored set from ``.npz``, ``.parquet`` or ``.csv``.

    Parameters
    ----------
    path : str or Path
        The file; its extension (case-insensitive) chooses the format.
    max_classes : int, default :data:`MAX_CLASSES` (100,000)
        The most classes K read; a file with more is refused before any row is read (from
        the CSV header line, the Parquet schema or the ``.npy`` header), so that a file of a
        million columns is refused at once instead of parsed for minutes. Raise it for a
        larger head.

    Returns
    -------
    ScoredSet

    Raises
    ------
    ScoredSetError
        Unknown extension, file not found, unreadable file, or any refusal listed in the
        module docstring. The message starts with ``path``.
    TypeError, ValueError
        ``max_classes`` is not an integer >= 2.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "scores.csv").write_text("id,label,prob_0,prob_1\\na,0,0.9,0.1\\nb,1,0.3,0.7\\n")
    >>> scored = read_scored_set(folder / "scores.csv")
    >>> scored.ids.tolist(), scored.labels.tolist(), np.exp(scored.logits).round(3).tolist()
    (['a', 'b'], [0, 1], [[0.9, 0.1], [0.3, 0.7]])
    >>> read_scored_set(folder / "scores.csv", max_classes=1)
    Traceback (most recent call last):
    ...
    ValueError: max_classes must be an integer >= 2 (K >= 2); got 1
    """
    return _read_file(path, max_classes, labelled=True)


def read_logits(path: str | Path, *, max_classes: int = MAX_CLASSES) -> NDArray[np.floating[Any]]:
    """Read and validate the logits of a scored-set file whose rows need not be labelled (served rows).

    The formats and every rule of :func:`read_scored_set` (ids included), except that the
    ``labels`` key or ``label`` column may be missing, and is not read when present (rows
    without a label yet are what served traffic is).

    Parameters
    ----------
    path : str or Path
        The file; its extension (case-insensitive) chooses the format.
    max_classes : int, default :data:`MAX_CLASSES` (100,000)
        As :func:`read_scored_set`'s.

    Returns
    -------
    array of float of shape (n_samples, n_classes)
        Finite logits, float32 or float64 as stored (log-probabilities from ``probs``).

    Raises
    ------
    ScoredSetError
        As :func:`read_scored_set`, the message starting with ``path``.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "served.csv").write_text("id,logit_0,logit_1\\na,2.0,0.5\\nb,0.1,1.5\\n")
    >>> read_logits(folder / "served.csv").tolist()
    [[2.0, 0.5], [0.1, 1.5]]
    """
    return _read_file(path, max_classes, labelled=False).logits


def _read_file(path: str | Path, max_classes: int, *, labelled: bool) -> ScoredSet:
    if isinstance(max_classes, bool) or not isinstance(max_classes, (int, np.integer)):
        raise TypeError(f"max_classes must be an integer >= 2; got {max_classes!r}")
    if max_classes < 2:
        raise ValueError(f"max_classes must be an integer >= 2 (K >= 2); got {max_classes}")
    file = Path(path)
    suffix = _format(file)
    if not file.exists():
        raise ScoredSetError(f"{file}: file not found; give the path of a scored set ({', '.join(SCORED_SET_FORMATS)})")
    if file.is_dir():
        raise ScoredSetError(f"{file}: is a folder; give the path of a scored-set file")
    refusal = not_a_regular_file(file)
    if refusal is not None:  # before anything opens it: a FIFO blocks open(), a device never ends
        raise ScoredSetError(f"{file}: {refusal}; a scored set is read from a regular {suffix} file")
    limit = int(max_classes)
    try:
        if suffix == ".npz":
            return _read_npz(file, limit, labelled)
        if suffix == ".parquet":
            return _read_parquet(file, limit, labelled)
        frame, found = _read_csv(file, limit, labelled)
        return _from_frame(frame, str(file), found, labelled)
    except MemoryError as exc:  # what the declared sizes could not tell: more rows than memory
        raise ScoredSetError(
            f"{file}: needs more memory than this process may use ({exc or 'out of memory'}); split the set into "
            "smaller files, or read it as a partitioned set (a folder of Parquet files)"
        ) from exc


def _too_many_classes(source: str, n_classes: int, where: str, max_classes: int) -> ScoredSetError:
    """The K-limit refusal, one wording for every format."""
    return ScoredSetError(
        f"{source}: {n_classes:,} classes found ({where}); at most {max_classes:,} classes are read "
        f"(pass max_classes= to read_scored_set to raise the limit if the classifier really has that many)"
    )


def _max_columns(max_classes: int) -> int:
    """The most columns a table may have: ``max_classes`` logit_ (or prob_) columns, id, label,
    group and :data:`MAX_OTHER_COLUMNS` ignored ones."""
    return max_classes + 3 + MAX_OTHER_COLUMNS


def _too_many_columns(source: str, n_columns: int, where: str, max_classes: int) -> ScoredSetError:
    """The column-limit refusal, one wording for every format."""
    return ScoredSetError(
        f"{source}: {where} has {n_columns:,} columns; at most {_max_columns(max_classes):,} are read "
        f"({max_classes:,} logit_ or prob_ columns, id, label, group and {MAX_OTHER_COLUMNS:,} others) "
        f"(pass max_classes= to read_scored_set to raise the limit if the classifier really has that many classes)"
    )


def read_columns(columns: list[str], source: str, max_classes: int, labelled: bool = True) -> list[int]:
    """The positions of the columns a table reader reads, from its header or schema (every
    column named): refuses more columns than :func:`_max_columns` allows, more than
    ``max_classes`` logit_ (or prob_) columns, and a read column that appears more than once
    (which one would be read?). Repeated names of ignored columns are no concern (``labelled``
    False: ``label`` is one of them)."""
    if len(columns) > _max_columns(max_classes):
        raise _too_many_columns(source, len(columns), "the schema", max_classes)
    for prefix in ("logit", "prob"):
        count = sum(1 for name in columns if name.startswith(prefix + "_"))
        if count > max_classes:
            raise _too_many_classes(source, count, f"{count:,} {prefix}_ columns", max_classes)
    positions: dict[str, list[int]] = {}
    for position, name in enumerate(columns):
        if _is_read(name) and (labelled or name != "label"):
            positions.setdefault(name, []).append(position)
    for name, where in positions.items():
        if len(where) > 1:
            shown = ", ".join(str(p) for p in where[:-1]) + f" and {where[-1]}"
            raise ScoredSetError(
                f"{source}: column {name!r} appears {len(where)} times (positions {shown}, counted from 0); each of "
                "id, label, group and the logit_/prob_ columns must appear once (rename or drop the copies)"
            )
    return sorted(where[0] for where in positions.values())


def _is_read(name: str) -> bool:
    """Whether a table column is read at all (other columns are ignored unparsed)."""
    return name in ("id", "label", "group") or name.startswith(("logit_", "prob_"))


def _read_npz(file: Path, max_classes: int, labelled: bool) -> ScoredSet:
    try:
        with file.open("rb") as handle:
            start = handle.read(len(_NPY_MAGIC))
        if start.startswith(_NPY_MAGIC):
            raise ScoredSetError(f"{file}: not an .npz archive (a single .npy array?); {_NPZ_EXPECTED}")
        if not start.startswith(_ZIP_MAGIC) or not zipfile.is_zipfile(file):
            raise ScoredSetError(
                f"{file}: cannot be read as .npz: it is not a valid .npz of arrays (not a zip archive); "
                f"{_NPZ_EXPECTED}, as numpy.savez writes them"
            )
        with zipfile.ZipFile(file) as archive:
            members = {info.filename[: -len(".npy")]: info for info in archive.infolist() if info.filename.endswith(".npy")}
            keys = set(members)
            if "logits" in keys and "probs" in keys:
                raise ScoredSetError(f"{file}: has both keys 'logits' and 'probs'; keep one of them (logits preferred)")
            missing = [name for name, present in (("logits (or probs)", "logits" in keys or "probs" in keys),
                                                   ("labels", "labels" in keys or not labelled)) if not present]
            if missing:
                raise ScoredSetError(
                    f"{file}: missing key(s) {', '.join(missing)}; {_NPZ_EXPECTED}; found keys: {sorted(keys) or 'none'}"
                )
            wanted = [key for key in _NPZ_KEYS if key in keys and (labelled or key != "labels")]
            # Every member and header first: nothing is inflated or allocated until all the
            # declared sizes are sane, alone and together.
            for key in wanted:
                _check_npz_member(members[key], file)
            declared = sum(_check_npy_header(archive, members[key], file, key, max_classes) for key in wanted)
            refusal = expansion_refusal(declared, sum(members[key].compress_size for key in wanted),
                                        f"keys {', '.join(repr(key) for key in wanted)}")
            if refusal is not None:
                raise ScoredSetError(f"{file}: {refusal}")
            arrays = {key: _read_npy_member(archive, members[key]) for key in wanted}
    except ScoredSetError:
        raise
    # NotImplementedError: zip features zipfile lacks (a newer zip version than it reads).
    except (OSError, ValueError, EOFError, NotImplementedError, zipfile.BadZipFile, zlib.error) as exc:
        raise ScoredSetError(f"{file}: cannot be read as .npz ({exc}); {_NPZ_EXPECTED}") from exc
    probs = "probs" in arrays
    layout = _Layout(source=str(file), kind="npz", probs=probs, labelled=labelled)
    return _validate(
        arrays["probs" if probs else "logits"],
        arrays.get("labels"),
        arrays.get("ids"),
        arrays.get("groups"),
        layout,
        copy=False,
    )


def _check_npz_member(member: zipfile.ZipInfo, file: Path) -> None:
    """Refuse a member that zipfile would not inflate (a traceback, or an exit of 3, before)."""
    if member.flag_bits & 0x1:
        raise ScoredSetError(
            f"{file}: member {member.filename!r} is encrypted; numpy cannot read encrypted archives (write the arrays "
            "again with numpy.savez, without a password)"
        )
    if member.compress_type not in _ZIP_METHODS:
        raise ScoredSetError(
            f"{file}: member {member.filename!r} uses compression method {member.compress_type}, which cannot be read "
            f"(methods {', '.join(f'{number} {name}' for number, name in _ZIP_METHODS.items())} can); "
            f"{_NPZ_EXPECTED}, as numpy.savez writes them"
        )


def _check_npy_header(archive: zipfile.ZipFile, member: zipfile.ZipInfo, file: Path, key: str, max_classes: int) -> int:
    """The bytes a member's array declares; refuses a member whose ``.npy`` header is not an
    array of numbers or text of a size that its member holds and this process can hold (read
    from the header only: nothing allocated)."""
    try:
        with archive.open(member) as handle:
            version = np.lib.format.read_magic(handle)
            # Versions 2 and 3 share the layout (3 only allows UTF-8 field names).
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            if version not in ((1, 0), (2, 0), (3, 0)):
                raise ValueError(f"unsupported .npy format version {version}")
            shape, _, dtype = read_header(handle)
            header_bytes = handle.tell()
    except NotImplementedError as exc:  # zip features zipfile lacks: compressed patched data
        raise ScoredSetError(
            f"{file}: member {member.filename!r} cannot be read ({exc}); {_NPZ_EXPECTED}, as numpy.savez writes them"
        ) from exc
    except ValueError as exc:
        raise ScoredSetError(
            f"{file}: key {key!r} is not a numpy array ({exc}); {_NPZ_EXPECTED}, as numpy.savez writes them"
        ) from exc
    if dtype.hasobject:
        raise ScoredSetError(
            f"{file}: key {key!r} cannot be read: it holds Python objects (dtype {dtype}), which are never "
            f"unpickled; store numbers as numeric arrays and ids/groups as a string array "
            f"(np.asarray(values, dtype=str))"
        )
    if key in ("logits", "probs") and len(shape) == 2 and shape[1] > max_classes:
        raise _too_many_classes(str(file), int(shape[1]), f"key {key!r} has shape {tuple(shape)}", max_classes)
    elements = math.prod(shape)
    declared = elements * dtype.itemsize
    held = member.file_size - header_bytes
    if declared > held:
        raise ScoredSetError(
            f"{file}: key {key!r} declares shape {tuple(shape)} of {dtype} ({elements:,} elements, {declared:,} "
            f"bytes) but its member holds {max(held, 0):,} bytes; the file is corrupt or was not written by "
            f"numpy (write it again with numpy.savez)"
        )
    memory = memory_limit()
    if memory is not None and declared > memory:
        raise ScoredSetError(
            f"{file}: key {key!r} has shape {tuple(shape)} of {dtype} ({declared:,} bytes), more than this "
            f"process may use ({memory:,} bytes); split the set into smaller files"
        )
    return int(declared)


def _read_npy_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> NDArray[Any]:
    with archive.open(member) as handle:
        array: NDArray[Any] = np.lib.format.read_array(handle, allow_pickle=False)
    return array


def _header_lines(handle: IO[str], file: Path, max_classes: int) -> Iterator[str]:
    """The lines of ``handle`` for the CSV header record, at most :data:`_MAX_HEADER_CHARACTERS`
    characters in all: a line is never read whole before its length is known, and none goes to
    the parser before its commas are counted — a header of more fields than a table may have
    columns (:func:`_max_columns`) is refused unparsed (quoted commas count too: an upper bound)."""
    left, fields, limit = _MAX_HEADER_CHARACTERS, 1, _max_columns(max_classes)
    while line := handle.readline(left + 1):
        left -= len(line)
        if left < 0:
            raise ScoredSetError(
                f"{file}: the header line is longer than {_MAX_HEADER_CHARACTERS:,} characters (no line end found); "
                f"{_TABLE_EXPECTED}, on a first line of column names"
            )
        fields += line.count(",")
        if fields > limit:
            raise _too_many_columns(str(file), fields, "the header line, counted by its commas before it is parsed,",
                                    max_classes)
        yield line


class _NumberedHeader(io.TextIOBase):
    """A CSV's text after its header line, behind a header of the column positions
    (``0,1,...``): pandas reads the rows as under the real header, without parsing a header
    whose repeated names it would de-duplicate in quadratic time."""

    def __init__(self, n_columns: int, rest: IO[str]) -> None:
        self._head, self._rest = ",".join(map(str, range(n_columns))) + "\n", rest

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> str:
        if not self._head:
            return self._rest.read(-1 if size is None else size)
        if size is None or size < 0:
            head, self._head = self._head, ""
            return head + self._rest.read()
        head, self._head = self._head[:size], self._head[size:]
        return head


def _read_csv(file: Path, max_classes: int, labelled: bool) -> tuple[pd.DataFrame, list[str]]:
    try:
        with file.open(newline="", encoding="utf-8-sig") as handle:
            # The header line alone first: K is known before a single row is parsed.
            header = next(csv.reader(_header_lines(handle, file, max_classes)), [])
            if not header:
                raise ScoredSetError(f"{file}: the file is empty; {_TABLE_EXPECTED}, on a header line")
            wanted = {str(position) for position in read_columns(header, str(file), max_classes, labelled)}
            # Everything as text: ids like "007" or "NA" must not become numbers or missing
            # values. index_col=False: a row with an extra field never shifts the columns.
            frame = pd.read_csv(
                _NumberedHeader(len(header), handle), dtype=str, keep_default_na=False, na_filter=False,
                index_col=False, usecols=lambda position: position in wanted,
            )
    except ScoredSetError:
        raise
    except pd.errors.EmptyDataError as exc:
        raise ScoredSetError(f"{file}: the file is empty; {_TABLE_EXPECTED}, on a header line") from exc
    except (OSError, ValueError, csv.Error) as exc:  # UnicodeDecodeError is a ValueError
        raise ScoredSetError(f"{file}: cannot be read as CSV ({exc}); {_TABLE_EXPECTED}") from exc
    frame.columns = pd.Index([header[int(position)] for position in frame.columns])
    return frame, header


@dataclass(frozen=True, slots=True)
class ParquetColumns:
    """What a Parquet file's footer says of its scored table, before a row is read.

    ``read``: the columns read, in file order; ``value_columns``: ``logit_0`` ... (or
    ``prob_0`` ...) by class; ``row_bytes``: the least a row of them takes in memory.
    """

    read: list[str]
    value_columns: list[str]
    probs: bool
    row_bytes: int

    def size_refusal(self, rows: int, stored: int, *, at_once: int | None = None) -> str | None:
        """Why ``rows`` rows of these columns, stored in ``stored`` bytes and read ``at_once``
        rows at a time (default: all of them), cannot be read; None when they can."""
        what = f"{rows:,} rows of {len(self.read)} read columns"
        if at_once is None:
            return memory_refusal(rows * self.row_bytes, what) or \
                expansion_refusal(rows * self.row_bytes, stored, what)
        return memory_refusal(at_once * self.row_bytes, f"its largest row group, {at_once:,} rows of "
                                                        f"{len(self.read)} read columns,") or \
            expansion_refusal(rows * self.row_bytes, stored, what)


def parquet_columns(parquet: Any, source: str, max_classes: int, labelled: bool = True) -> ParquetColumns:
    """The scored table's columns of a Parquet file (a :class:`pyarrow.parquet.ParquetFile`),
    from its footer; refuses a schema that is not a scored table's (too many classes, a read
    column repeated, missing or of a wrong type)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    try:
        schema = parquet.schema_arrow
    except (OSError, ValueError, TypeError, pa.ArrowException) as exc:
        raise ScoredSetError(f"{source}: cannot be read as Parquet ({exc}); {_TABLE_EXPECTED}") from exc
    names = [str(name) for name in schema.names]
    positions = read_columns(names, source, max_classes, labelled)
    row_bytes = 0
    for position in positions:
        arrow_type = schema.field(position).type
        _check_parquet_type(Path(source), names[position], arrow_type)
        value_type = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
        # What a row takes once read, at the least: text a pointer and a short string;
        # integers and floats other than float32 8 bytes (float64 logits, intp labels).
        numeric = pa.types.is_integer(value_type) or pa.types.is_floating(value_type)
        row_bytes += 4 if pa.types.is_float32(value_type) else 8 if numeric else 16
    read = [names[position] for position in positions]
    value_columns, probs = table_columns(read, source, names, labelled)
    return ParquetColumns(read, value_columns, probs, row_bytes)


def checked_text(table: Any, source: str) -> None:
    """Refuse a text column of an Arrow table that is not valid UTF-8 (Parquet does not check)."""
    import pyarrow as pa

    for name, column in zip(table.column_names, table.columns, strict=True):
        value_type = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
        if pa.types.is_string(value_type) or pa.types.is_large_string(value_type):
            try:
                column.validate(full=True)
            except pa.ArrowInvalid as exc:
                raise ScoredSetError(f"{source}: column {name!r} holds text that is not valid UTF-8 ({exc}); "
                                     "write text columns as UTF-8 strings") from exc


def value_block(table: Any, columns: list[str]) -> NDArray[Any]:
    """The value columns of an Arrow table as one (n, K) array: one copy, in the columns'
    float type when they share one (float32 stays float32); else as numpy stacks them (the
    validation parses)."""
    arrays = [table.column(name).to_numpy() for name in columns]
    dtypes = {array.dtype for array in arrays}
    if len(dtypes) == 1 and next(iter(dtypes)) in (np.float32, np.float64):
        block = np.empty((table.num_rows, len(columns)), dtype=next(iter(dtypes)))
        for k, array in enumerate(arrays):
            block[:, k] = array
        return block
    return np.column_stack(arrays)


def _read_parquet(file: Path, max_classes: int, labelled: bool) -> ScoredSet:
    import pyarrow as pa
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    try:
        parquet = pq.ParquetFile(file)
        metadata = parquet.metadata
    except (OSError, ValueError, TypeError, pa.ArrowException) as exc:
        raise ScoredSetError(f"{file}: cannot be read as Parquet ({exc}); {_TABLE_EXPECTED}") from exc
    with parquet:
        columns = parquet_columns(parquet, str(file), max_classes, labelled)
        # The footer's rows, before any is read: a 49 kB file may declare 3 million.
        rows = max(metadata.num_rows, sum(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)))
        refusal = columns.size_refusal(rows, file.stat().st_size)
        if refusal is not None:
            raise ScoredSetError(f"{file}: {refusal}")
        try:
            # Arrow, not pandas: no pandas metadata is trusted (a corrupt one raised KeyError).
            table = parquet.read(columns=columns.read, use_pandas_metadata=False)
        except MemoryError:
            raise
        except (OSError, ValueError, TypeError, NotImplementedError, pa.ArrowException) as exc:
            raise ScoredSetError(f"{file}: cannot be read as Parquet ({exc}); {_TABLE_EXPECTED}") from exc
    checked_text(table, str(file))
    ids, groups = (table.column(name).to_numpy(zero_copy_only=False) if name in columns.read else None
                   for name in ("id", "group"))
    labels = table.column("label").to_numpy() if labelled else None
    return _validate(value_block(table, columns.value_columns), labels, ids, groups,
                     _Layout(source=str(file), kind="table", probs=columns.probs, labelled=labelled), copy=False)


def _check_parquet_type(file: Path, name: str, arrow_type: Any) -> None:
    """Refuse a read column whose Parquet type cannot hold what it must (named, with the type expected)."""
    import pyarrow as pa

    value_type = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    text = pa.types.is_string(value_type) or pa.types.is_large_string(value_type)
    integer, floating = pa.types.is_integer(value_type), pa.types.is_floating(value_type)
    if name.startswith(("logit_", "prob_")):
        accepted, rule = integer or floating or text, (
            f"{'probability' if name.startswith('prob_') else 'logit'} columns must be float or integer "
            "(cast the column to float64 when writing the file)"
        )
    elif name == "label":
        accepted, rule = integer or floating or text, "labels must be integers (write the column as int64)"
    else:
        accepted, rule = integer or text, (
            f"{name}s must be text (string) or integers (write the column as strings)"
        )
    if not accepted:
        raise ScoredSetError(f"{file}: column {name!r} has type {arrow_type}; {rule}")


def _listing(names: list[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _numbered_columns(columns: list[str], prefix: str, pattern: re.Pattern[str], source: str) -> list[str]:
    """The ``prefix_k`` columns ordered by k; refuse malformed names and numbering gaps."""
    numbered: dict[int, str] = {}
    for name in columns:
        if not name.startswith(prefix + "_"):
            continue
        match = pattern.fullmatch(name)
        if match is None:
            raise ScoredSetError(
                f"{source}: column {name!r} is not a valid {prefix} column; name them {prefix}_0, {prefix}_1, ... "
                f"{prefix}_{{K-1}} (rename or drop it)"
            )
        numbered[int(match.group(1))] = name
    if not numbered:
        return []
    if len(numbered) != max(numbered) + 1:
        # The first 12 gaps: a column logit_9999999999999 must not make a list of them all.
        gaps = (f"{prefix}_{k}" for k in range(max(numbered) + 1) if k not in numbered)
        absent = list(itertools.islice(gaps, 12))
        found = [numbered[k] for k in sorted(numbered)]
        more = max(numbered) + 1 - len(numbered) - 12
        shown = ", ".join(absent) + (f", ... ({more} more)" if more > 0 else "")
        raise ScoredSetError(
            f"{source}: the {prefix}_ columns must be numbered 0 ... K-1 without gaps; missing {shown} "
            f"(found {_listing(found)})"
        )
    return [numbered[k] for k in range(len(numbered))]


def table_columns(columns: list[str], source: str, found: list[str], labelled: bool = True) -> tuple[list[str], bool]:
    """The value columns of a table (``logit_0`` ... or ``prob_0`` ..., ordered by k) and
    whether they hold probabilities; refuses what a scored table must not be. ``found``
    lists every column of the file (for messages)."""
    logit_columns = _numbered_columns(columns, "logit", _LOGIT_COLUMN, source)
    prob_columns = _numbered_columns(columns, "prob", _PROB_COLUMN, source)
    if logit_columns and prob_columns:
        raise ScoredSetError(
            f"{source}: has both logit_ and prob_ columns; keep one set of them (logits preferred)"
        )
    missing = [name for name in ("id", "label")[: 2 if labelled else 1] if name not in columns]
    if not (logit_columns or prob_columns):
        missing.append("logit_0 ... logit_{K-1} (or prob_0 ... prob_{K-1})")
    if missing:
        raise ScoredSetError(
            f"{source}: missing column(s) {', '.join(missing)}; {_TABLE_EXPECTED}; found columns: "
            f"{_listing(found) or 'none'}"
        )
    return (prob_columns, True) if prob_columns else (logit_columns, False)


def _from_frame(frame: pd.DataFrame, source: str, found: list[str], labelled: bool = True) -> ScoredSet:
    """Validate the read columns of a table; ``found`` lists every column of the file (for messages)."""
    columns = [str(name) for name in frame.columns]
    frame.columns = pd.Index(columns)
    value_columns, probs = table_columns(columns, source, found, labelled)
    layout = _Layout(source=source, kind="table", probs=probs, labelled=labelled)
    return _validate(
        frame[value_columns].to_numpy(),
        frame["label"].to_numpy() if labelled else None,
        frame["id"].to_numpy(),
        frame["group"].to_numpy() if "group" in columns else None,
        layout,
        copy=False,
    )


def write_scored_set(scored: ScoredSet, path: str | Path) -> Path:
    """Validate ``scored`` and write it atomically to ``.npz``, ``.parquet`` or ``.csv``.

    Logits are always written (the ``logits`` key or ``logit_`` columns), so that
    ``read_scored_set(write_scored_set(scored, path))`` gives back the same ids, labels,
    groups and logits (float32/float64 kept in ``.npz`` and ``.parquet``; float64 in
    ``.csv``).

    Parameters
    ----------
    scored : ScoredSet
        The set to write. A set built field by field (not by :meth:`ScoredSet.from_arrays`,
        :meth:`ScoredSet.subset` or :func:`read_scored_set`) is validated first.
    path : str or Path
        Target file; its extension chooses the format. An existing file is replaced.

    Returns
    -------
    Path
        ``path`` as a :class:`~pathlib.Path`.

    Raises
    ------
    ScoredSetError
        Unknown extension, missing folder, or a refused set; nothing is written then.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> scored = ScoredSet.from_arrays([[0.1, 2.0], [1.5, -0.5]], [1, 0], ids=["x", "y"])
    >>> written = write_scored_set(scored, folder / "scores.parquet")
    >>> again = read_scored_set(written)
    >>> np.array_equal(again.logits, scored.logits), again.ids.tolist()
    (True, ['x', 'y'])
    """
    file = Path(path)
    suffix = _format(file)
    kind: Literal["npz", "table"] = "npz" if suffix == ".npz" else "table"
    checked = scored if scored._validated else _validate(
        scored.logits, scored.labels, scored.ids, scored.groups, _Layout(source=str(file), kind=kind), copy=False
    )
    folder = file.parent
    if not folder.is_dir():
        raise ScoredSetError(f"{file}: folder {folder} does not exist; create it first")
    if file.is_dir():
        raise ScoredSetError(f"{file}: is a folder; give a file name ending in {suffix}")
    writer = {".npz": _write_npz, ".parquet": _write_parquet, ".csv": _write_csv}[suffix]
    _write_atomically(file, lambda handle: writer(checked, handle))
    return file


def _write_atomically(file: Path, write: Callable[[IO[bytes]], None]) -> None:
    # A temporary file in the same folder, then os.replace: readers see the old file or the
    # new one, never half of one. os.open with 0o666 lets the umask set the usual permissions.
    temporary = file.with_name(f".{file.name}.{uuid.uuid4().hex}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, file)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _write_npz(scored: ScoredSet, handle: IO[bytes]) -> None:
    # .npy has no variable-width text but numpy's fixed width: every id as long as the
    # longest (at most MAX_TEXT_LENGTH characters, 4 bytes each).
    arrays: dict[str, NDArray[Any]] = {
        "ids": scored.ids.astype(str),
        "logits": scored.logits,
        "labels": scored.labels.astype(np.int64),
    }
    if scored.groups is not None:
        arrays["groups"] = scored.groups.astype(str)
    np.savez(handle, allow_pickle=False, **arrays)


def _frame(scored: ScoredSet) -> pd.DataFrame:
    frame = pd.DataFrame(scored.logits, columns=[f"logit_{k}" for k in range(scored.n_classes)])
    frame.insert(0, "id", scored.ids)
    frame.insert(1, "label", scored.labels.astype(np.int64))
    if scored.groups is not None:
        frame.insert(2, "group", scored.groups)
    return frame


def _write_parquet(scored: ScoredSet, handle: IO[bytes]) -> None:
    _frame(scored).to_parquet(handle, index=False, engine="pyarrow")


def _write_csv(scored: ScoredSet, handle: IO[bytes]) -> None:
    text = io.TextIOWrapper(handle, encoding="utf-8", newline="")
    _frame(scored).to_csv(text, index=False, float_format=_CSV_FLOAT_FORMAT, lineterminator="\n")
    text.flush()
    text.detach()
