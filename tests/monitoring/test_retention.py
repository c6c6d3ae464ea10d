"""Retention of the prediction log, on SQLite and PostgreSQL: the rows served before the cutoff are
deleted, their labelled rows are in the archive (the export) first, and nothing served at or
after the cutoff is touched; pruning again changes nothing; a dry run writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import event, select

from monitoring import (
    PredictionLog,
    PredictionLogExport,
    export_prediction_log,
    log_predictions,
    prune_prediction_log,
    retention_cutoff,
)
from monitoring import retention as retention_module

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


def _archived(archive: Path, version: str) -> dict[str, tuple[int, bytes]]:
    """request id -> (label, logits) of a version's archived rows (each day file's ids unique: checked)."""
    export = PredictionLogExport(archive)
    rows = [(rid, (int(label), logits.tobytes())) for chunk in export.iter_labelled(
                "m", version, datetime(2026, 1, 1, tzinfo=UTC), CUTOFF + timedelta(days=5))
            for rid, label, logits in zip(chunk.request_ids, chunk.labels, chunk.logits, strict=True)]  # fmt: skip
    assert len(rows) == len(dict(rows))  # each row archived once
    return dict(rows)


def _old_labelled(log: PredictionLog, version: str) -> dict[str, tuple[int, bytes]]:
    return {rid: (row[1], row[3]) for rid, row in _rows(log).items()
            if row[0] < CUTOFF and row[1] is not None and rid.startswith(f"v{version}-")}  # type: ignore[operator,misc]


@pytest.mark.parametrize("clock", ["now", "an older clock"])
def test_rows_labelled_while_a_prune_runs_stay_for_the_next_prune_and_nothing_archived_is_lost(
    prediction_log: PredictionLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: str
) -> None:
    _fill(prediction_log)
    archive = tmp_path / "archive"
    late = [rid for rid, row in _rows(prediction_log).items() if row[0] < CUTOFF and row[1] is None]  # type: ignore[operator]
    real_export = retention_module.export_prediction_log

    def export_then_label(*args: object, **kwargs: object) -> object:
        # A labeller attaches labels after the export read the days and before the delete; its
        # labelling time may be older than the labels the export saw (another machine's clock).
        result = real_export(*args, **kwargs)  # type: ignore[arg-type]
        ours = [rid for rid in late if rid.startswith(f"v{result.model_version}-")]
        labelled_at = None if clock == "now" else CUTOFF - timedelta(days=10)
        assert prediction_log.attach_labels(ours, [1] * len(ours), labelled_at=labelled_at).attached == len(ours)
        return result

    want = {version: _old_labelled(prediction_log, version) for version in ("1", "2")}
    monkeypatch.setattr(retention_module, "export_prediction_log", export_then_label)
    first = prune_prediction_log(prediction_log, CUTOFF, archive=archive, batch_size=4)
    monkeypatch.undo()
    # The rows labelled meanwhile are not archived yet: they are still in the log, nothing else is.
    assert {rid for rid, row in _rows(prediction_log).items() if row[0] < CUTOFF} == set(late)  # type: ignore[operator]
    for version in ("1", "2"):
        assert _archived(archive, version) == want[version]
        want[version].update(_old_labelled(prediction_log, version))

    second = prune_prediction_log(prediction_log, CUTOFF, archive=archive, batch_size=4)
    for version in ("1", "2"):  # merged into their days: the rows archived before are all still there
        assert _archived(archive, version) == want[version] and len(want[version]) == 13
    assert all(row[0] >= CUTOFF for row in _rows(prediction_log).values())  # type: ignore[operator]
    assert [version.rows_kept for version in first.versions] == [len(late) // 2, len(late) - len(late) // 2]
    assert second.rows_deleted == len(late) and all(version.rows_kept == 0 for version in second.versions)


def test_a_prune_killed_between_its_delete_batches_is_finished_by_the_next_without_loss(
    prediction_log: PredictionLog, tmp_path: Path
) -> None:
    _fill(prediction_log)
    archive = tmp_path / "archive"
    want = _old_labelled(prediction_log, "1")
    # What a prune killed after its first delete batch leaves: its days archived, their oldest rows gone.
    export_prediction_log(prediction_log, "m", "1", archive, until=CUTOFF)
    table = prediction_log.table
    with prediction_log.engine.begin() as conn:
        oldest = select(table.c.id).where(table.c.model_version == "1").order_by(table.c.served_at, table.c.id).limit(5)
        assert conn.execute(table.delete().where(table.c.id.in_(oldest.scalar_subquery()))).rowcount == 5
    pruned = prune_prediction_log(prediction_log, CUTOFF, archive=archive, batch_size=4)
    assert pruned.versions[0].rows_deleted == 13 - 5
    assert _archived(archive, "1") == want  # the day is not replaced by what the log has left of it
    assert all(row[0] >= CUTOFF for rid, row in _rows(prediction_log).items() if rid.startswith("v1-"))  # type: ignore[operator]


def test_labels_for_rows_a_prune_deletes_while_they_are_attached_are_reported_unknown(
    prediction_log: PredictionLog, log_url: str
) -> None:
    _fill(prediction_log)
    unlabelled = [rid for rid, row in _rows(prediction_log).items() if row[1] is None and rid.startswith("v1-")]
    old = {rid for rid in unlabelled if _rows(prediction_log)[rid][0] < CUTOFF}  # type: ignore[operator]
    assert 0 < len(old) < len(unlabelled)
    pruner = PredictionLog(log_url)
    pruned: list[int] = []

    def prune_before_the_update(conn: object, cursor: object, statement: str, *args: object) -> None:
        # Between attach_labels' read and its update, a prune deletes the old rows (a real delete,
        # committed by another connection).
        if statement.lstrip().upper().startswith("UPDATE PREDICTION_LOG") and not pruned:
            pruned.append(pruner.delete_served_before("m", "1", CUTOFF))

    event.listen(prediction_log.engine, "before_cursor_execute", prune_before_the_update)
    try:
        report = prediction_log.attach_labels(unlabelled, [0] * len(unlabelled))
    finally:
        event.remove(prediction_log.engine, "before_cursor_execute", prune_before_the_update)
        pruner.dispose()
    assert pruned == [13]
    assert report.attached == len(unlabelled) - len(old) and set(report.unknown_request_ids) == old
    assert report.attached + report.unchanged + len(report.conflicts) + len(report.unknown_request_ids) == len(unlabelled)
    assert not report.complete


def test_an_archived_prune_removes_whole_days_only(prediction_log: PredictionLog, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not the start of a UTC day"):
        prune_prediction_log(prediction_log, CUTOFF + timedelta(hours=1), archive=tmp_path)
    with pytest.raises(ValueError, match="retention must be a positive duration"):
        retention_cutoff(NOW, timedelta(0))
    with pytest.raises(ValueError, match=r"retention 999999 days, 0:00:00 is longer than the longest, 36500 days"):
        retention_cutoff(NOW, timedelta(days=999_999))  # a cutoff before the year 1: not an OverflowError
    assert retention_cutoff(NOW, timedelta(days=36_500)) == datetime(1926, 7, 5, tzinfo=UTC)
