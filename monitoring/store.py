"""What a store of served predictions is: the protocol every reader of the prediction log uses.

A store holds a version's served rows and answers four kinds of request
(:class:`PredictionStore`):

* the **labelled read** — the labelled rows served in a window, in chunks
  (:meth:`~PredictionStore.iter_labelled`; with :meth:`~PredictionStore.n_classes`, the narrower
  :class:`~monitoring.LabelledSource` the window summaries read);
* the **served scan** — every row served in a window, labelled or not
  (:meth:`~PredictionStore.iter_served`: the early warning and a check's one pass,
  :func:`monitoring.scan_window`; :meth:`~PredictionStore.served_rows` counts them);
* the **labels** — when each label arrived (reads bounded by labelling time: the sequential
  rule's increments) and attaching late labels (:meth:`~PredictionStore.attach_labels`);
* **retention** — rows served before a cutoff removed (:meth:`~PredictionStore.delete_served_before`).

Each store says what it holds in its :class:`StoreScope`, so a caller asks the store instead of
its type: the SQL log (:class:`~monitoring.PredictionLog`) holds everything; its Parquet export
(:class:`~monitoring.PredictionLogExport`, the archive) holds labelled rows only, without label
times, and is read-only; a window held in memory (:class:`~monitoring.WindowInMemory`: the
command line's files, the studies) holds its served rows and labels, without label times.

The chunk types every store yields, and what attaching labels reports, are defined here, in plain
numpy: a reader of a store needs neither the SQL layer nor pyarrow.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calibration import JsonResult

__all__ = ["LabelAttachReport", "LabelConflict", "LabelledChunk", "PredictionStore", "RowRefusal", "ServedChunk",
           "StoreScope"]


@dataclass(frozen=True, slots=True)
class LabelConflict:
    """A label that disagrees with the one already attached (not applied)."""

    request_id: str
    existing_label: int
    new_label: int


@dataclass(frozen=True, slots=True)
class RowRefusal(JsonResult):
    """A row of an input that was refused, and why; the input's other rows were not affected.

    ``index`` is the row's position in the input (0-based: in a file, the data rows after the
    header), ``request_id`` its request id (None when the id itself is unreadable).
    """

    index: int
    request_id: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class LabelAttachReport:
    """What :meth:`PredictionLog.attach_labels` did with each requested id.

    ``attached`` rows got their label now (as the database reports the rows it updated);
    ``unchanged`` already had that same label (idempotent re-delivery); ``conflicts`` already
    had a different label, or were given two different labels in one call, and were left as
    they were; ``unknown_request_ids`` are not in the log (a label that arrived before its
    prediction, a wrong id, or a row the retention deleted, even while this call ran); ``refused``
    rows were not applied because the row itself is bad (a label that is not an integer in
    [0, K) of its version, an unreadable id). A row labelled by a concurrent call first is
    unchanged or a conflict, never attached twice. Each id asked is accounted for in one of them.
    """

    n_requested: int
    attached: int
    unchanged: int
    conflicts: tuple[LabelConflict, ...]
    unknown_request_ids: tuple[str, ...]
    refused: tuple[RowRefusal, ...] = ()

    @property
    def complete(self) -> bool:
        """True when every requested label is now in the log as requested."""
        return not self.conflicts and not self.unknown_request_ids and not self.refused


@dataclass(frozen=True, slots=True, eq=False)
class _ChunkRows:
    """What every chunk read from a store holds per row, in (time, id) order: ``time`` UTC as
    ``datetime64[us]``, ``logits`` as stored (float32 in the log and its export), ``labels``, ``groups`` (str or None) and
    ``temperature``, the T in force when the row was served."""

    time: NDArray[np.datetime64]
    logits: NDArray[np.floating[Any]]
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
    when it asked for none); ``settling`` True where it was attached at or after that range's end
    (None: the read gave no end, or the store has no label times)."""

    arrived: NDArray[np.bool_]
    settling: NDArray[np.bool_] | None = None

    @property
    def labelled(self) -> NDArray[np.bool_]:
        """True for the rows whose label has arrived."""
        return self.labels >= 0


@dataclass(frozen=True, slots=True)
class StoreScope:
    """What a store holds, so that a reader asks it rather than its type.

    ``served_rows``: every served row, labelled or not (its served scan is the traffic; False:
    labelled rows only, which the early warning cannot read as traffic). ``label_times``: when
    each label arrived (reads may be bounded by labelling time). ``writable``: labels can be
    attached and rows removed.

    Examples
    --------
    >>> StoreScope(served_rows=True, label_times=False, writable=False).label_times
    False
    """

    served_rows: bool
    label_times: bool
    writable: bool


@runtime_checkable
class PredictionStore(Protocol):
    """A store of a model's served predictions (module docstring): labelled read, served scan,
    labels, retention. Reads stream in non-empty chunks of at most ``chunk_size`` rows in (time,
    id) order, windows are [start, end) on the serving time; a store that cannot do a request
    (:attr:`scope`) refuses it naming itself and what to use instead."""

    @property
    def scope(self) -> StoreScope:
        """What the store holds."""
        ...

    def n_classes(self, model_name: str, model_version: str) -> int | None:
        """K of the version, or None when the store holds nothing of it."""
        ...

    def logged_versions(self, model_name: str | None = None) -> dict[tuple[str, str], int]:
        """Every version the store holds (of ``model_name``, when given) and its K."""
        ...

    def iter_labelled(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = ...,
        labelled_from: datetime | None = None, labelled_to: datetime | None = None,
        order: Literal["served", "labelled"] = "served",
    ) -> Iterator[LabelledChunk]:
        """The version's labelled rows served in [start, end) (whose label arrived in
        [labelled_from, labelled_to) when either is given), by serving or labelling time."""
        ...

    def iter_served(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = ...,
        labelled_from: datetime | None = None, labelled_to: datetime | None = None,
    ) -> Iterator[ServedChunk]:
        """Every row of the version served in [start, end), ``arrived`` marking the rows whose
        label arrived in [labelled_from, labelled_to)."""
        ...

    def served_rows(self, model_name: str, model_version: str, start: datetime,
                    end: datetime) -> tuple[int, datetime | None]:
        """How many rows of the version it holds served in [start, end), and when the last was
        (``(0, None)``: none)."""
        ...

    def attach_labels(
        self, request_ids: Sequence[str] | Sequence[object], labels: ArrayLike | Sequence[object], *,
        labelled_at: datetime | None = None, strict: bool = False,
    ) -> LabelAttachReport:
        """Attach late labels by request id (write-once)."""
        ...

    def delete_served_before(
        self, model_name: str, model_version: str, cutoff: datetime, *, unlabelled_only: bool = False,
        batch_size: int = 10_000, dry_run: bool = False,
    ) -> int:
        """Remove the version's rows served before ``cutoff``; how many."""
        ...


class _ReadOnlyStore:
    """What a read-only store (the export, a window in memory) answers alike: its rows counted
    from its served scan; labels and pruning refused (NotImplementedError), naming the SQL log."""

    def served_rows(self: PredictionStore, model_name: str, model_version: str, start: datetime,
                    end: datetime) -> tuple[int, datetime | None]:
        """How many of the rows it holds were served in [start, end), and the last one's time."""
        n, last = 0, None
        for chunk in self.iter_served(model_name, model_version, start, end):
            n, last = n + len(chunk), chunk.time[-1]
        return n, None if last is None else last.astype(datetime).replace(tzinfo=UTC)

    def attach_labels(
        self, request_ids: Sequence[str] | Sequence[object], labels: ArrayLike | Sequence[object], *,
        labelled_at: datetime | None = None, strict: bool = False,
    ) -> LabelAttachReport:
        """Refused: labels are attached in the SQL prediction log."""
        raise _read_only(self, "attach labels")

    def delete_served_before(
        self, model_name: str, model_version: str, cutoff: datetime, *, unlabelled_only: bool = False,
        batch_size: int = 10_000, dry_run: bool = False,
    ) -> int:
        """Refused: rows are pruned from the SQL prediction log (:func:`monitoring.prune_prediction_log`)."""
        raise _read_only(self, "prune rows")


def _refuse_label_times(store: object, labelled_from: datetime | None, labelled_to: datetime | None,
                       order: str = "served") -> None:
    """Refuse a read bounded or ordered by labelling time from a store that keeps no label times."""
    if labelled_from is not None or labelled_to is not None or order != "served":
        raise ValueError(f"{store!r} keeps no labelling times: read the rows by labelling time (label arrivals) "
                         "from the SQL prediction log")


def _read_only(store: object, request: str) -> NotImplementedError:
    """The error of a write asked of a read-only store."""
    return NotImplementedError(f"{store!r} is read-only: {request} in the SQL prediction log (its scope says "
                               "writable=False)")
