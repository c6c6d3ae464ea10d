"""Retention of the prediction log, on SQLite and PostgreSQL: the rows served before the cutoff are
deleted, their labelled rows are in the archive (the export) first, and nothing served at or
after the cutoff is touched; pruning again changes nothing; a dry run writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from monitoring import (
    PredictionLog,
    PredictionLogExport,
    export_prediction_log,
    log_predictions,
    prune_prediction_log,
    retention_cutoff,
)

NOW = datetime(2026, 6, 10, 15, 0, tzinfo=UTC)
RETENTION = timedelta(days=30)
CUTOFF = datetime(2026, 5, 11, tzinfo=UTC)  # the start of the UTC day that holds NOW - 30 days


def _fill(log: PredictionLog) -> None:
    """Two versions, rows on the days around the cutoff, two thirds labelled; one row a microsecond
    before the cutoff and one exactly at it."""
    rng = np.random.default_rng(2)
    for version in ("1", "2"):
        times = [CUTOFF + timedelta(hours=7 * i) for i in range(-12, 12)]
        times += [CUTOFF - timedelta(microseconds=1), CUTOFF]
        n = len(times)
        ids = [f"v{version}-{i}" for i in range(n)]
        labels = np.where(np.arange(n) % 3 == 0, -1, rng.integers(0, 3, n))
        log_predictions(log, "m", version, 1.2, (2.0 * rng.normal(size=(n, 3))).astype(np.float32), ids,
                        ["web" if i % 2 else None for i in range(n)], times)
        labelled = labels >= 0
        log.attach_labels([rid for rid, keep in zip(ids, labelled, strict=True) if keep], labels[labelled],
                          labelled_at=CUTOFF - timedelta(days=3))


def _rows(log: PredictionLog) -> dict[str, tuple[object, ...]]:
    table = log.table
    with log.engine.connect() as conn:
        rows = conn.execute(select(table.c.request_id, table.c.served_at, table.c.label, table.c.labelled_at,
                                   table.c.logits)).all()
    return {row[0]: tuple(row[1:]) for row in rows}


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_old_rows_are_archived_then_deleted_and_recent_ones_untouched(prediction_log: PredictionLog,
                                                                       tmp_path: Path) -> None:
    _fill(prediction_log)
    before = _rows(prediction_log)
    old = {rid: row for rid, row in before.items() if row[0] < CUTOFF}  # type: ignore[operator]
    recent = {rid: row for rid, row in before.items() if rid not in old}
    assert retention_cutoff(NOW, RETENTION) == CUTOFF and len(old) == 2 * 13 and len(recent) == 2 * 13

    archive = tmp_path / "archive"
    dry = prune_prediction_log(prediction_log, CUTOFF, archive=archive, dry_run=True)
    assert dry.rows_deleted == len(old) and not archive.exists() and _rows(prediction_log) == before

    pruned = prune_prediction_log(prediction_log, CUTOFF, archive=archive, batch_size=5)
    assert pruned.rows_deleted == len(old) and [v.model_version for v in pruned.versions] == ["1", "2"]
    assert _rows(prediction_log) == recent  # nothing served at or after the cutoff is touched
    # The archive holds every old labelled row, as logged; the recent rows are not in it.
    export = PredictionLogExport(archive)
    for version in ("1", "2"):
        archived = {rid: (label, logits.tobytes()) for chunk in export.iter_labelled(
                        "m", version, datetime(2026, 1, 1, tzinfo=UTC), CUTOFF + timedelta(days=5))
                    for rid, label, logits in zip(chunk.request_ids, chunk.labels, chunk.logits, strict=True)}
        want = {rid: (row[1], row[3]) for rid, row in old.items() if row[1] is not None and rid.startswith(f"v{version}-")}
        assert archived == want and len(want) > 0

    # Pruned again, and exported as usual afterwards: the archived days stay as they were.
    files = _files(archive)
    assert prune_prediction_log(prediction_log, CUTOFF, archive=archive).rows_deleted == 0
    export_prediction_log(prediction_log, "m", "1", archive, until=NOW)
    assert all(_files(archive)[name] == content for name, content in files.items() if "date=2026-05-0" in name)
    assert _rows(prediction_log) == recent


def test_without_an_archive_every_old_row_goes(prediction_log: PredictionLog) -> None:
    _fill(prediction_log)
    recent = {rid: row for rid, row in _rows(prediction_log).items() if row[0] >= CUTOFF}  # type: ignore[operator]
    pruned = prune_prediction_log(prediction_log, CUTOFF - timedelta(hours=5), archive=None)
    assert pruned.archive is None and pruned.rows_deleted == 2 * 12  # the day's first hours are older still
    assert set(_rows(prediction_log)) >= set(recent)


def test_rows_labelled_after_the_archive_was_read_wait_for_the_next_prune(prediction_log: PredictionLog) -> None:
    _fill(prediction_log)
    late = [rid for rid, row in _rows(prediction_log).items() if row[0] < CUTOFF and row[1] is None][:2]  # type: ignore[operator]
    prediction_log.attach_labels(late, [0, 1], labelled_at=NOW)
    deleted = prediction_log.delete_served_before("m", "1", CUTOFF, keep_labelled_after=NOW - timedelta(days=1))
    left = {rid for rid, row in _rows(prediction_log).items() if row[0] < CUTOFF}  # type: ignore[operator]
    assert left == {rid for rid in late if rid.startswith("v1-")} | {
        rid for rid, row in _rows(prediction_log).items() if rid.startswith("v2-") and row[0] < CUTOFF}  # type: ignore[operator]
    assert deleted == 13 - len([rid for rid in late if rid.startswith("v1-")])


def test_an_archived_prune_removes_whole_days_only(prediction_log: PredictionLog, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not the start of a UTC day"):
        prune_prediction_log(prediction_log, CUTOFF + timedelta(hours=1), archive=tmp_path)
    with pytest.raises(ValueError, match="retention must be a positive duration"):
        retention_cutoff(NOW, timedelta(0))
