"""Retention of the prediction log: rows served before a cutoff removed, their labels archived first.

A busy log grows by hundreds of bytes to kilobytes per served row (4·K bytes of logits, an id,
times, indexes), and nothing in it is read after its window and its refit: the monitor reads
the last ``monitor_window``, the refit the rows since a change point inside it. What is worth
keeping of older rows — the labelled ones, from which any window can be re-checked or a
temperature refitted — is what the Parquet export holds (:func:`monitoring.export_prediction_log`,
one file per UTC day). :func:`prune_prediction_log` makes the export the archive:

1. the cutoff is the start of a UTC day (:func:`retention_cutoff`), so a day is pruned whole —
   the export skips a day that has no rows left, and never rewrites an archived day with a part
   of it;
2. per version with rows served before the cutoff, the export is brought up to date until the
   cutoff (days already archived and unchanged are skipped);
3. the rows served before the cutoff are deleted, in batches — except the rows labelled after
   the export's read began (their labels are not archived yet: the next prune archives, then
   deletes them). Unlabelled rows are deleted without an archive (the export holds labelled rows
   only: a label that arrives for them later is reported as an unknown request id).

Without an archive (``archive=None``) every row served before the cutoff is deleted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from calibration import JsonResult

from ._validation import as_utc
from .export import export_prediction_log
from .prediction_log import PredictionLog

__all__ = ["LogPruned", "VersionPruned", "prune_prediction_log", "retention_cutoff"]

_BEGINNING = datetime(1, 1, 2, tzinfo=UTC)


def retention_cutoff(now: datetime, retention: timedelta) -> datetime:
    """The start of the UTC day that holds ``now - retention``: what is older is pruned.

    Examples
    --------
    >>> retention_cutoff(datetime(2026, 5, 31, 17, 30, tzinfo=UTC), timedelta(days=30)).isoformat()
    '2026-05-01T00:00:00+00:00'
    """
    if retention <= timedelta(0):
        raise ValueError(f"retention must be a positive duration; got {retention} (e.g. P90D)")
    moment = as_utc(now, name="now") - retention
    return datetime(moment.year, moment.month, moment.day, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class VersionPruned(JsonResult):
    """What was pruned of one version: ``rows_deleted`` (in a dry run: to delete), the days of its
    labelled rows written to the archive now (``days_archived``, ``rows_archived``) and those
    already there (``days_already_archived``)."""

    model_name: str
    model_version: str
    rows_deleted: int
    days_archived: tuple[str, ...]
    rows_archived: int
    days_already_archived: tuple[str, ...]


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
    if archive is not None and cutoff != retention_cutoff(cutoff + timedelta(days=1), timedelta(days=1)):
        raise ValueError(f"cutoff {cutoff.isoformat()} is not the start of a UTC day; an archived prune removes "
                         "whole days (take the cutoff from retention_cutoff)")
    pruned: list[VersionPruned] = []
    for model_name, model_version in sorted(log.logged_versions()):
        old = log.delete_served_before(model_name, model_version, cutoff, dry_run=True)
        if old == 0:
            continue
        if dry_run:
            pruned.append(VersionPruned(model_name, model_version, old, (), 0, ()))
            continue
        keep_after = None
        written: tuple[str, ...] = ()
        skipped: tuple[str, ...] = ()
        rows = 0
        if archive is not None:
            # Taken before the export reads: a label attached after it is not archived yet, so its row is kept.
            before = log.labelled_fingerprint(model_name, model_version, _BEGINNING, cutoff)
            keep_after = before.last_labelled_at or _BEGINNING
            exported = export_prediction_log(log, model_name, model_version, archive, until=cutoff)
            written, skipped, rows = exported.days_written, exported.days_skipped, exported.rows_written
        deleted = log.delete_served_before(model_name, model_version, cutoff, keep_labelled_after=keep_after,
                                           batch_size=batch_size)
        pruned.append(VersionPruned(model_name, model_version, deleted, written, rows, skipped))
    return LogPruned(cutoff=cutoff, archive=None if archive is None else os.fspath(archive), dry_run=dry_run,
                     versions=tuple(pruned))
