"""Retention of the prediction log: rows served before a cutoff removed, their labels archived first.

A busy log grows by hundreds of bytes to kilobytes per served row (4·K bytes of logits, an id,
times, indexes), and nothing in it is read after its window and its refit: the monitor reads
the last ``monitor_window``, the refit the rows since a change point inside it. What is worth
keeping of older rows — the labelled ones, from which any window can be re-checked or a
temperature refitted — is what the Parquet export holds (:func:`monitoring.export_prediction_log`,
one file per UTC day). :func:`prune_prediction_log` makes the export the archive.

The invariant
-------------
**A labelled row leaves the log only once the archive holds it, and an archived day only
grows.** So at every moment — whatever process was killed where, whoever labels or logs
meanwhile, however many prunes and exports run at once — every labelled row ever logged is
in the log or in the archive, and a prune that finishes while no label arrives leaves every
labelled row served before the cutoff in the archive exactly once (by request id) and none
in the log. Nothing served at or after the cutoff is deleted or archived by a prune.

Per version with rows served before the cutoff:

1. the export is brought up to date until the cutoff: a day seen for the first time is
   written, a day already archived whose rows in the log changed is merged into its file
   (which is never replaced by fewer rows), under the version's lock (see
   :mod:`monitoring.export`). The cutoff is the start of a UTC day (:func:`retention_cutoff`),
   so the archived days are whole;
2. for each day before the cutoff that still has labelled rows in the log, the rows whose
   request id the day's file holds *now* are deleted — the ids are read from the file, not
   from what step 1 meant to write;
3. the unlabelled rows served before the cutoff are deleted, the delete checking on each row
   that it is still unlabelled.

Each step is idempotent, and a crash anywhere leaves a state the next prune finishes from:

* killed while a day file is written: the archived file is the previous one (atomic
  replace); the next export removes the temporary file and merges again;
* killed after a day file, before the manifest: the next export finds nothing new in the
  log for the day and leaves the file as it is;
* killed between delete batches: the rows left are deleted by the next prune, whose export
  finds them already archived;
* a label attached after step 1 read its day: its row is not in the file, so step 2 keeps it
  (and step 3 does not take it: it is labelled); the next prune merges it into the day, then
  deletes it. A label that arrives for a row step 3 deleted first is reported as an unknown
  request id (:class:`~monitoring.LabelAttachReport`), as for any unlabelled row pruned;
* a row logged late with an old serving time: archived by the next prune if it is labelled;
* two prunes (or a prune and ``thermostat export``) at once: their exports take turns on the
  version's lock, each merging into the file the other left, and each deletes only what
  the file holds.

Without an archive (``archive=None``) every row served before the cutoff is deleted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from calibration import JsonResult

from ._validation import as_utc
from .export import PredictionLogExport, export_prediction_log
from .prediction_log import PredictionLog
from .retention_limit import MAX_RETENTION

__all__ = ["LogPruned", "VersionPruned", "prune_prediction_log", "retention_cutoff"]

_BEGINNING = datetime(1, 1, 2, tzinfo=UTC)
_DAY = timedelta(days=1)


def retention_cutoff(now: datetime, retention: timedelta) -> datetime:
    """The start of the UTC day that holds ``now - retention``: what is older is pruned.

    Raises
    ------
    ValueError
        If ``retention`` is not positive or longer than :data:`MAX_RETENTION`.

    Examples
    --------
    >>> retention_cutoff(datetime(2026, 5, 31, 17, 30, tzinfo=UTC), timedelta(days=30)).isoformat()
    '2026-05-01T00:00:00+00:00'
    """
    if retention <= timedelta(0):
        raise ValueError(f"retention must be a positive duration; got {retention} (e.g. P90D)")
    if retention > MAX_RETENTION:
        raise ValueError(f"retention {retention} is longer than the longest, {MAX_RETENTION.days} days "
                         f"(P{MAX_RETENTION.days}D); to keep everything, set no retention")
    moment = as_utc(now, name="now") - retention
    return datetime(moment.year, moment.month, moment.day, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class VersionPruned(JsonResult):
    """What was pruned of one version: ``rows_deleted`` (in a dry run: to delete), the days of its
    labelled rows written to the archive now (``days_archived``, ``rows_archived``: the rows
    those day files hold) and those already there (``days_already_archived``), and
    ``rows_kept``: the rows served before the cutoff left in the log, labelled after the archive
    read their day (the next prune archives, then deletes them)."""

    model_name: str
    model_version: str
    rows_deleted: int
    days_archived: tuple[str, ...]
    rows_archived: int
    days_already_archived: tuple[str, ...]
    rows_kept: int


@dataclass(frozen=True, slots=True)
class LogPruned(JsonResult):
    """What :func:`prune_prediction_log` did: the rows served before ``cutoff``, per version that
    had some; ``archive`` the export's folder (None: deleted without an archive)."""

    cutoff: datetime
    archive: str | None
    dry_run: bool
    versions: tuple[VersionPruned, ...]

    @property
    def rows_deleted(self) -> int:
        return sum(version.rows_deleted for version in self.versions)


def prune_prediction_log(
    log: PredictionLog,
    cutoff: datetime,
    *,
    archive: str | os.PathLike[str] | None,
    dry_run: bool = False,
    batch_size: int = 10_000,
) -> LogPruned:
    """Delete every row served before ``cutoff``, its version's labelled rows archived first.

    A labelled row is deleted only once the archive holds it (module docstring): one labelled
    while the prune runs stays in the log for the next prune.

    Parameters
    ----------
    log : PredictionLog
        The SQL prediction log.
    cutoff : datetime
        Timezone-aware; rows served before it are pruned. Take it from :func:`retention_cutoff`
        (the start of a UTC day) when archiving: a day is then pruned whole.
    archive : str or path, or None
        The export's root folder (what ``thermostat export --out`` writes); None deletes
        without archiving.
    dry_run : bool, default=False
        Count what would be deleted; write and delete nothing.
    batch_size : int, default=10_000
        Rows deleted per transaction.

    Returns
    -------
    LogPruned

    Raises
    ------
    ValueError
        If ``cutoff`` is naive, or when archiving, it is not the start of a UTC day.

    Examples
    --------
    >>> import tempfile
    >>> from monitoring import log_predictions
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, 12, tzinfo=UTC)
    >>> _ = log_predictions(log, "m", "1", 1.0, [[2.0, 0.0], [0.0, 1.0]], ["old", "new"],
    ...                     time=[t, t + timedelta(days=40)], labels=[0, 1])
    >>> pruned = prune_prediction_log(log, retention_cutoff(t + timedelta(days=41), timedelta(days=30)),
    ...                               archive=tempfile.mkdtemp())
    >>> pruned.rows_deleted, pruned.versions[0].days_archived, log.count_rows()
    (1, ('2026-01-01',), 1)
    """
    cutoff = as_utc(cutoff, name="cutoff")
    if archive is not None and cutoff != _day_start(cutoff.date()):
        raise ValueError(f"cutoff {cutoff.isoformat()} is not the start of a UTC day; an archived prune removes "
                         "whole days (take the cutoff from retention_cutoff)")
    pruned: list[VersionPruned] = []
    for model_name, model_version in sorted(log.logged_versions()):
        old = log.delete_served_before(model_name, model_version, cutoff, dry_run=True)
        if old == 0:
            continue
        if dry_run or archive is None:
            deleted = old if dry_run else log.delete_served_before(model_name, model_version, cutoff,
                                                                   batch_size=batch_size)
            pruned.append(VersionPruned(model_name, model_version, deleted, (), 0, (), 0))
            continue
        exported = export_prediction_log(log, model_name, model_version, archive, until=cutoff)
        deleted = _delete_archived(log, PredictionLogExport(archive), model_name, model_version, cutoff, batch_size)
        deleted += log.delete_served_before(model_name, model_version, cutoff, unlabelled_only=True,
                                            batch_size=batch_size)
        kept = log.delete_served_before(model_name, model_version, cutoff, dry_run=True)
        pruned.append(VersionPruned(model_name, model_version, deleted, exported.days_written, exported.rows_written,
                                    exported.days_skipped, kept))
    return LogPruned(cutoff=cutoff, archive=None if archive is None else os.fspath(archive), dry_run=dry_run,
                     versions=tuple(pruned))


def _day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _delete_archived(
    log: PredictionLog, archive: PredictionLogExport, model_name: str, model_version: str, cutoff: datetime,
    batch_size: int,
) -> int:
    """Delete the version's labelled rows served before ``cutoff`` whose request id their day's
    archived file holds, day by day, oldest first; how many."""
    labelled = log.labelled_fingerprint(model_name, model_version, _BEGINNING, cutoff)
    if labelled.first_served_at is None or labelled.last_served_at is None:
        return 0
    deleted = 0
    day, last = labelled.first_served_at.date(), labelled.last_served_at.date()
    while day <= last:
        start = _day_start(day)
        end = min(start + _DAY, cutoff)
        pages = list(log.iter_labelled_ids(model_name, model_version, start, end))
        if pages:
            row_ids, request_ids = (np.concatenate(column) for column in zip(*pages, strict=True))
            held = pa.array(archive.archived_request_ids(model_name, model_version, day), pa.string())
            # Arrow hashes the ids (numpy's isin on strings sorts object arrays: seconds a day).
            archived = pc.is_in(pa.array(request_ids, pa.string()), value_set=held).to_numpy(zero_copy_only=False)
            deleted += log.delete_labelled(row_ids[archived], request_ids[archived].tolist(), batch_size=batch_size)
        day += _DAY
    return deleted
