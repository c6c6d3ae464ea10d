"""The Parquet export of the prediction log: layout, idempotent and resumable writing, reading back
the log's own chunks, refusals naming file and row, and partitioned summaries equal to the window's."""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import threading
from collections.abc import Callable, Sequence
from dataclasses import fields
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibration import LOCAL_ENGINE, ScoredSetError, read_scored_set
from monitoring import (
    ExportPartition,
    LabelledChunk,
    PredictionLog,
    PredictionLogExport,
    WindowQuery,
    WindowSummary,
    export_partitions,
    export_prediction_log,
    log_predictions,
    merge_summaries,
    summarise_arrays,
    summarise_export,
    summarise_partition,
    summarise_window,
)
from monitoring import export as export_module

T0 = datetime(2026, 3, 1, tzinfo=UTC)
DAY = timedelta(days=1)
UNTIL = T0 + 4 * DAY
K = 3
DAYS = ("2026-03-01", "2026-03-02", "2026-03-03")

Item = TypeVar("Item")
Result = TypeVar("Result")


def _fill(log: PredictionLog, n: int = 600, seed: int = 3) -> None:
    """``n`` rows of model m version 1 over three days (times on whole minutes, so some tie), served
    at two temperatures; groups mixed with None on the first two days and all set on the third; 85%
    labelled. Version 2 is logged in the same hours and must never leak in."""
    rng = np.random.default_rng(seed)
    minutes = np.sort(rng.integers(0, 3 * 24 * 60, size=n))
    minutes[:3] = 0  # rows exactly at the first midnight
    times = [T0 + timedelta(minutes=int(m)) for m in minutes]
    logits = (2.0 * rng.normal(size=(n, K))).astype(np.float32)
    groups = rng.choice(np.array(["a", "b", None], dtype=object), size=n)
    third_day = minutes >= 2 * 24 * 60
    groups[third_day] = rng.choice(np.array(["a", "b"], dtype=object), size=int(third_day.sum()))
    ids = [f"r{i:04d}" for i in range(n)]
    half = n // 2
    log_predictions(log, "m", "1", 1.3, logits[:half], ids[:half], list(groups[:half]), times[:half])
    log_predictions(log, "m", "1", 0.9, logits[half:], ids[half:], list(groups[half:]), times[half:])
    labelled = rng.random(n) < 0.85
    log.attach_labels([ids[i] for i in np.flatnonzero(labelled)], rng.integers(0, K, size=n)[labelled])
    log_predictions(log, "m", "2", 1.0, np.zeros((20, K)), [f"x{i}" for i in range(20)], time=T0 + DAY,
                    labels=np.zeros(20, dtype=int))  # fmt: skip


@pytest.fixture
def log(tmp_path: Path) -> PredictionLog:
    prediction_log = PredictionLog(f"sqlite:///{tmp_path / 'predictions.db'}")
    prediction_log.create()
    _fill(prediction_log)
    return prediction_log


def _rows(chunks: Sequence[LabelledChunk]) -> dict[str, np.ndarray]:
    return {field.name: np.concatenate([getattr(c, field.name) for c in chunks]) for field in fields(LabelledChunk)}


def assert_same_chunks(got: Sequence[LabelledChunk], want: Sequence[LabelledChunk]) -> None:
    assert [len(c) for c in got] == [len(c) for c in want]
    got_rows, want_rows = _rows(got), _rows(want)
    for name, values in want_rows.items():
        assert got_rows[name].dtype == values.dtype, name
        np.testing.assert_array_equal(got_rows[name], values, err_msg=name)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _folder(root: Path) -> Path:
    return root / "model=m" / "version=1"


# --------------------------------------------------------------------------- writing


def test_layout_columns_and_row_groups(log: PredictionLog, tmp_path: Path) -> None:
    out = tmp_path / "export"
    result = export_prediction_log(log, "m", "1", out, until=UNTIL, chunk_size=17, row_group_size=40)
    folder = _folder(out)
    assert result.directory == str(folder) and result.days_written == DAYS and result.days_skipped == ()
    assert sorted(p.name for p in folder.iterdir()) == [".export.lock", "_manifest.json", *(f"date={d}" for d in DAYS)]
    assert sorted(p.name for p in out.iterdir()) == ["model=m"]  # version 2 was not asked for
    assert result.rows_written == log.count_labelled("m", "1", T0, UNTIL)
    assert set(result.to_dict()) == {"directory", "model_name", "model_version", "until", "n_classes", "days_written",
                                     "days_skipped", "rows_written"}  # fmt: skip
    for day in DAYS:
        file = folder / f"date={day}" / "part-0.parquet"
        assert sorted(p.name for p in file.parent.iterdir()) == ["part-0.parquet"]  # no temporary file left
        parquet = pq.ParquetFile(file)
        schema = parquet.schema_arrow
        assert schema.names == ["id", "label", "group", "logit_0", "logit_1", "logit_2", "served_at", "temperature",
                                "predicted_class", "confidence", "log_row_id"]  # fmt: skip
        assert [str(schema.field(name).type) for name in schema.names] == [
            "string", "int64", "string", "float", "float", "float", "timestamp[us, tz=UTC]", "double", "int64", "double",
            "int64",
        ]  # fmt: skip
        sizes = [parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)]
        assert all(size == 40 for size in sizes[:-1]) and 0 < sizes[-1] <= 40
        start = datetime.fromisoformat(day).replace(tzinfo=UTC)
        log_rows = _rows(list(log.iter_labelled("m", "1", start, start + DAY)))
        table = parquet.read()
        assert table.num_rows == sum(sizes) == log_rows["labels"].shape[0]
        assert table.column("id").to_pylist() == log_rows["request_ids"].tolist()  # (time, log id) order
        assert table.column("log_row_id").to_pylist() == [row_id for row_ids, _ in log.iter_labelled_ids(
            "m", "1", start, start + DAY) for row_id in row_ids.tolist()]  # fmt: skip
        assert table.column("group").to_pylist() == log_rows["groups"].tolist()
        np.testing.assert_array_equal(table.column("served_at").to_numpy(), log_rows["time"])
    manifest = json.loads((folder / "_manifest.json").read_text())
    assert (manifest["format"], manifest["model_name"], manifest["model_version"], manifest["n_classes"]) == (2, "m", "1", K)
    assert list(manifest["days"]) == list(DAYS)
    first_day = log.labelled_fingerprint("m", "1", T0, T0 + DAY)
    assert manifest["days"][DAYS[0]] == {"n_rows": first_day.n_rows, "last_row_id": first_day.last_row_id,
                                          "last_labelled_at": first_day.last_labelled_at.isoformat()}  # fmt: skip


def test_a_day_whose_rows_all_have_a_group_is_a_scored_set(log: PredictionLog, tmp_path: Path) -> None:
    export_prediction_log(log, "m", "1", tmp_path, until=UNTIL)
    scored = read_scored_set(_folder(tmp_path) / f"date={DAYS[2]}" / "part-0.parquet")
    rows = _rows(list(log.iter_labelled("m", "1", T0 + 2 * DAY, T0 + 3 * DAY)))
    assert scored.ids.tolist() == rows["request_ids"].tolist()
    assert scored.groups is not None and scored.groups.tolist() == rows["groups"].tolist()
    np.testing.assert_array_equal(scored.labels, rows["labels"])
    np.testing.assert_array_equal(scored.logits, rows["logits"])  # float32 kept, bit for bit


def test_names_are_percent_quoted(tmp_path: Path) -> None:
    log = PredictionLog("sqlite://")
    log.create()
    log_predictions(log, "team/digits v2", "1.0+rc/1", 1.0, [[1.0, 0.0]], ["a"], time=T0, labels=[0])
    result = export_prediction_log(log, "team/digits v2", "1.0+rc/1", tmp_path, until=UNTIL)
    assert Path(result.directory) == tmp_path / "model=team%2Fdigits%20v2" / "version=1.0%2Brc%2F1"
    assert PredictionLogExport(tmp_path).n_classes("team/digits v2", "1.0+rc/1") == 2


def test_an_unknown_version_is_refused_and_nothing_is_written(log: PredictionLog, tmp_path: Path) -> None:
    with pytest.raises(LookupError, match=r"no prediction of model 'm' version '7' was ever logged in PredictionLog\("):
        export_prediction_log(log, "m", "7", tmp_path / "export", until=UNTIL)
    assert not (tmp_path / "export").exists()
    export = PredictionLogExport(tmp_path / "export")
    assert export.n_classes("m", "7") is None and list(export.iter_labelled("m", "7", T0, UNTIL)) == []
    with pytest.raises(LookupError, match="'m' version '7'"):
        summarise_window(export, WindowQuery("m", "7", temperature=1.0, start=T0, end=UNTIL))
    with pytest.raises(LookupError, match=r"no day of model 'm' version '7' was exported to PredictionLogExport\("):
        summarise_export(export, WindowQuery("m", "7", temperature=1.0, start=T0, end=UNTIL))


def test_a_finished_export_run_again_writes_nothing(log: PredictionLog, tmp_path: Path) -> None:
    export_prediction_log(log, "m", "1", tmp_path, until=UNTIL)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    again = export_prediction_log(log, "m", "1", tmp_path, until=UNTIL)
    assert again.days_written == () and again.days_skipped == DAYS and again.rows_written == 0
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == before


def test_an_interrupted_export_finishes_when_run_again(
    log: PredictionLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean = export_prediction_log(log, "m", "1", tmp_path / "clean", until=UNTIL, row_group_size=50)
    real_replace = os.replace
    replaced: list[str] = []

    def crash_on_the_second_day(source: Any, target: Any) -> None:
        if len(replaced) == 2:  # the first day file and the manifest are in place; the process dies now
            raise KeyboardInterrupt("killed")
        replaced.append(str(target))
        real_replace(source, target)

    monkeypatch.setattr(export_module.os, "replace", crash_on_the_second_day)
    with pytest.raises(KeyboardInterrupt):
        export_prediction_log(log, "m", "1", tmp_path / "crashed", until=UNTIL, row_group_size=50)
    monkeypatch.undo()
    folder = _folder(tmp_path / "crashed")
    assert [Path(p).name for p in replaced] == ["part-0.parquet", "_manifest.json"]
    assert list(json.loads((folder / "_manifest.json").read_text())["days"]) == [DAYS[0]]
    assert not list(folder.rglob(".*.tmp"))  # the interrupted write removed its temporary file
    assert not (folder / f"date={DAYS[1]}" / "part-0.parquet").exists()

    resumed = export_prediction_log(log, "m", "1", tmp_path / "crashed", until=UNTIL, row_group_size=50)
    assert resumed.days_skipped == DAYS[:1] and resumed.days_written == DAYS[1:]
    assert _files(tmp_path / "crashed") == _files(tmp_path / "clean")  # byte for byte, manifest included
    assert clean.rows_written == sum(
        pq.ParquetFile(folder / f"date={d}" / "part-0.parquet").metadata.num_rows for d in DAYS
    )


def test_late_labels_and_late_rows_rewrite_only_their_day(log: PredictionLog, tmp_path: Path) -> None:
    export_prediction_log(log, "m", "1", tmp_path, until=UNTIL)
    folder = _folder(tmp_path)
    stamps = {d: (folder / f"date={d}" / "part-0.parquet").stat().st_mtime_ns for d in DAYS}
    with log.engine.connect() as conn:
        table = log.table
        unlabelled = conn.execute(
            table.select().with_only_columns(table.c.request_id).where(
                table.c.model_version == "1", table.c.label.is_(None), table.c.served_at >= T0 + DAY,
                table.c.served_at < T0 + 2 * DAY,
            )
        ).scalars().all()  # fmt: skip
    assert unlabelled
    assert log.attach_labels(unlabelled, np.ones(len(unlabelled), dtype=int)).attached == len(unlabelled)
    result = export_prediction_log(log, "m", "1", tmp_path, until=UNTIL)
    assert result.days_written == (DAYS[1],) and result.days_skipped == (DAYS[0], DAYS[2])
    assert result.rows_written == log.count_labelled("m", "1", T0 + DAY, T0 + 2 * DAY)
    # A row logged late into the first day (labelled on arrival) rewrites that day.
    log_predictions(log, "m", "1", 1.0, [[0.0, 1.0, 2.0]], ["late"], time=T0 + timedelta(hours=5), labels=[2])
    assert export_prediction_log(log, "m", "1", tmp_path, until=UNTIL).days_written == (DAYS[0],)
    assert (folder / f"date={DAYS[2]}" / "part-0.parquet").stat().st_mtime_ns == stamps[DAYS[2]]
    export = PredictionLogExport(tmp_path)
    assert_same_chunks(list(export.iter_labelled("m", "1", T0, UNTIL)), list(log.iter_labelled("m", "1", T0, UNTIL)))


def test_the_day_of_until_is_exported_up_to_until_and_completed_later(log: PredictionLog, tmp_path: Path) -> None:
    until = T0 + DAY + timedelta(hours=9, minutes=30)
    first = export_prediction_log(log, "m", "1", tmp_path, until=until)
    assert first.days_written == DAYS[:2] and first.until == until
    export = PredictionLogExport(tmp_path)
    assert_same_chunks(list(export.iter_labelled("m", "1", T0, UNTIL)), list(log.iter_labelled("m", "1", T0, until)))
    later = export_prediction_log(log, "m", "1", tmp_path, until=UNTIL)
    assert later.days_written == DAYS[1:] and later.days_skipped == DAYS[:1]


def _delete_rows(log: PredictionLog, request_ids: Sequence[str]) -> None:
    """Delete rows from the log as a prune (or a prune killed half way) does."""
    with log.engine.begin() as conn:
        conn.execute(log.table.delete().where(log.table.c.request_id.in_(list(request_ids))))


def _labelled_ids(log: PredictionLog, start: datetime, end: datetime) -> list[str]:
    return [rid for chunk in log.iter_labelled("m", "1", start, end) for rid in chunk.request_ids]


def _unlabelled_ids(log: PredictionLog, start: datetime, end: datetime) -> list[str]:
    table = log.table
    with log.engine.connect() as conn:
        return list(conn.execute(table.select().with_only_columns(table.c.request_id).where(
            table.c.model_version == "1", table.c.label.is_(None), table.c.served_at >= start, table.c.served_at < end,
        ).order_by(table.c.served_at, table.c.id)).scalars())  # fmt: skip


def test_an_archived_day_is_never_replaced_by_fewer_rows(log: PredictionLog, tmp_path: Path) -> None:
    # A twin log, filled the same way and never pruned: what the archive must read as.
    twin = PredictionLog(f"sqlite:///{tmp_path / 'twin.db'}")
    twin.create()
    _fill(twin)
    export_prediction_log(log, "m", "1", tmp_path / "export", until=UNTIL, row_group_size=40)
    folder = _folder(tmp_path / "export")
    day_two = folder / f"date={DAYS[1]}" / "part-0.parquet"
    archived = day_two.read_bytes()
    pruned = _labelled_ids(log, T0 + DAY, T0 + 2 * DAY)[:70]  # a prune killed after its first batch
    _delete_rows(log, pruned)
    again = export_prediction_log(log, "m", "1", tmp_path / "export", until=UNTIL, row_group_size=40)
    assert again.days_written == () and again.days_skipped == DAYS and day_two.read_bytes() == archived

    # Late labels on the pruned day (one of its oldest rows, one of its newest) and a late row: merged in.
    late = _unlabelled_ids(log, T0 + DAY, T0 + 2 * DAY)
    late = [late[0], late[-1]]
    for labelled in (log, twin):
        assert labelled.attach_labels(late, [2, 0]).attached == 2
        log_predictions(labelled, "m", "1", 1.0, [[0.0, 1.0, 2.0]], ["late"], time=T0 + DAY + timedelta(hours=5),
                        labels=[2])  # fmt: skip
    merged = export_prediction_log(log, "m", "1", tmp_path / "export", until=UNTIL, row_group_size=40)
    assert merged.days_written == (DAYS[1],) and merged.rows_written == twin.count_labelled("m", "1", T0 + DAY, T0 + 2 * DAY)
    export = PredictionLogExport(tmp_path / "export")
    # Every archived row kept, the late ones in their place: the day reads as the log that was never pruned.
    assert_same_chunks(list(export.iter_labelled("m", "1", T0, UNTIL, chunk_size=64)),
                       list(twin.iter_labelled("m", "1", T0, UNTIL, chunk_size=64)))  # fmt: skip
    assert pq.ParquetFile(day_two).metadata.num_rows == merged.rows_written
    assert not [p for p in day_two.parent.iterdir() if p.name != "part-0.parquet"]  # no temporary file left


def _as_format_1(folder: Path) -> None:
    """Turn a version's export into what an export of manifest format 1 wrote: day files without
    ``log_row_id`` (the same rows, row groups and writer), manifest format 1."""
    for file in folder.glob("date=*/part-0.parquet"):
        parquet = pq.ParquetFile(file)
        size = parquet.metadata.row_group(0).num_rows
        pq.write_table(parquet.read().drop_columns(["log_row_id"]), file, row_group_size=size)
    manifest = folder / "_manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "format": 1}, indent=2) + "\n")


def test_a_format_1_export_is_read_and_merged_without_losing_or_reordering_rows(log: PredictionLog, tmp_path: Path) -> None:
    twin = PredictionLog(f"sqlite:///{tmp_path / 'twin.db'}")
    twin.create()
    _fill(twin)
    export_prediction_log(log, "m", "1", tmp_path, until=UNTIL, row_group_size=40)
    folder = _folder(tmp_path)
    _as_format_1(folder)
    export = PredictionLogExport(tmp_path)
    assert_same_chunks(list(export.iter_labelled("m", "1", T0, UNTIL)), list(log.iter_labelled("m", "1", T0, UNTIL)))
    files = _files(folder)
    unchanged = export_prediction_log(log, "m", "1", tmp_path, until=UNTIL, row_group_size=40)
    assert unchanged.days_written == () and _files(folder) == files  # the format is not upgraded by rewriting

    # An older Thermostat pruned the first day's oldest rows; late labels arrive on the first two days.
    first_day = _labelled_ids(log, T0, T0 + DAY)
    _delete_rows(log, first_day[:50])
    late = [_unlabelled_ids(log, T0 + n * DAY, T0 + (n + 1) * DAY)[-1] for n in (0, 1)]
    for labelled in (log, twin):
        assert labelled.attach_labels(late, [1, 1]).attached == 2
    merged = export_prediction_log(log, "m", "1", tmp_path, until=UNTIL, row_group_size=40)
    assert merged.days_written == DAYS[:2] and json.loads((folder / "_manifest.json").read_text())["format"] == 2
    # The day never pruned reads exactly as the log; the pruned one holds every row, once, in serving order.
    assert_same_chunks(list(export.iter_labelled("m", "1", T0 + DAY, UNTIL)),
                       list(log.iter_labelled("m", "1", T0 + DAY, UNTIL)))  # fmt: skip
    got = _rows(list(export.iter_labelled("m", "1", T0, T0 + DAY)))
    want = _rows(list(twin.iter_labelled("m", "1", T0, T0 + DAY)))
    assert sorted(got["request_ids"]) == sorted(want["request_ids"])
    row_ids = pq.read_table(folder / f"date={DAYS[0]}" / "part-0.parquet").column("log_row_id")
    assert row_ids.null_count == 50  # the pruned rows: the log has no id for them any more


def test_a_merge_refuses_a_corrupted_day_file_and_leaves_it_as_it_is(tmp_path: Path) -> None:
    file = _small_export(tmp_path)
    _rewrite(file, "logit_1", 9, float("nan"))
    corrupted = file.read_bytes()
    log = PredictionLog(f"sqlite:///{tmp_path / 'log.db'}")  # the same rows, and one more labelled
    log.create()
    rng = np.random.default_rng(0)
    log_predictions(log, "m", "1", 1.0, rng.normal(size=(13, K)), [f"r{i}" for i in range(13)],
                    time=[T0 + timedelta(minutes=i) for i in range(13)], labels=rng.integers(0, K, 13))  # fmt: skip
    with pytest.raises(ScoredSetError, match=rf"^{file}: row 9 \(id 'r9'\), logits column 1: nan is not finite"):
        export_prediction_log(log, "m", "1", tmp_path, until=UNTIL, row_group_size=4)
    assert file.read_bytes() == corrupted and sorted(p.name for p in file.parent.iterdir()) == ["part-0.parquet"]


def test_exports_of_one_version_take_turns_and_clean_up_after_a_killed_one(log: PredictionLog, tmp_path: Path) -> None:
    export_prediction_log(log, "m", "1", tmp_path, until=T0 + DAY)
    folder = _folder(tmp_path)
    leftovers = [folder / f".part-0.parquet.{'a' * 32}.tmp", folder / f"date={DAYS[0]}" / f".part-0.parquet.{'b' * 32}.tmp",
                 folder / f"._manifest.json.{'c' * 32}.tmp"]  # what a writer killed mid-file leaves
    for leftover in leftovers:
        leftover.write_bytes(b"half a file")
    done = threading.Event()
    with open(folder / ".export.lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # another export of the version is running
        other = threading.Thread(target=lambda: (export_prediction_log(log, "m", "1", tmp_path, until=UNTIL), done.set()))
        other.start()
        assert not done.wait(0.3)  # it waits for its turn
        assert all(leftover.exists() for leftover in leftovers)
    other.join(30)
    assert done.is_set() and not any(leftover.exists() for leftover in leftovers)
    assert [day for day, _ in PredictionLogExport(tmp_path).day_files("m", "1")] == [date.fromisoformat(d) for d in DAYS]


def test_an_unreadable_manifest_is_refused_by_name_and_setting_it_aside_loses_nothing(
    log: PredictionLog, tmp_path: Path
) -> None:
    export_prediction_log(log, "m", "1", tmp_path, until=UNTIL)
    folder = _folder(tmp_path)
    manifest = folder / "_manifest.json"
    valid = manifest.read_text()
    manifest.write_text("{not json")
    with pytest.raises(ValueError, match=rf"{manifest}: the export's manifest cannot be read .*move it aside") as refusal:
        export_prediction_log(log, "m", "1", tmp_path, until=UNTIL)
    assert "delete" not in str(refusal.value)
    # Set aside, as the message says, after a prune removed the first day's rows from the log:
    # the next export compares every day with the log again and keeps every archived row.
    archived = _rows(list(PredictionLogExport(tmp_path).iter_labelled("m", "1", T0, UNTIL)))["request_ids"]
    _delete_rows(log, _labelled_ids(log, T0, T0 + DAY))
    manifest.rename(folder / "_manifest.json.unreadable")
    again = export_prediction_log(log, "m", "1", tmp_path, until=UNTIL)
    assert again.days_written == () and again.days_skipped == DAYS[1:]
    kept = _rows(list(PredictionLogExport(tmp_path).iter_labelled("m", "1", T0, UNTIL)))["request_ids"]
    assert kept.tolist() == archived.tolist()
    for content, message in ((json.dumps({**json.loads(valid), "format": 3}), r"manifest format 3; this Thermostat reads "
                              r"formats \(1, 2\)"), (json.dumps({**json.loads(valid), "n_classes": 5}),
                              r"the export holds K=5 classes but the log's version has K=3.*export to another folder")):
        manifest.write_text(content)
        with pytest.raises(ValueError, match=message) as refusal:
            export_prediction_log(log, "m", "1", tmp_path, until=UNTIL)
        assert "delete" not in str(refusal.value)


@pytest.mark.parametrize("size", [0, -1, True])
def test_a_bad_row_group_size_is_refused(log: PredictionLog, tmp_path: Path, size: int) -> None:
    with pytest.raises(ValueError, match="row_group_size must be an integer >= 1"):
        export_prediction_log(log, "m", "1", tmp_path, until=UNTIL, row_group_size=size)


def test_export_and_read_back_on_each_backend(prediction_log: PredictionLog, tmp_path: Path) -> None:
    _fill(prediction_log, n=200)
    result = export_prediction_log(prediction_log, "m", "1", tmp_path, until=UNTIL, chunk_size=30, row_group_size=25)
    assert result.days_written == DAYS
    assert export_prediction_log(prediction_log, "m", "1", tmp_path, until=UNTIL).days_written == ()
    export = PredictionLogExport(tmp_path)
    for chunk_size in (1_000, 13):
        assert_same_chunks(list(export.iter_labelled("m", "1", T0, UNTIL, chunk_size=chunk_size)),
                           list(prediction_log.iter_labelled("m", "1", T0, UNTIL, chunk_size=chunk_size)))  # fmt: skip


# --------------------------------------------------------------------------- reading


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (T0, UNTIL),  # everything
        (T0 + timedelta(hours=7, minutes=13), T0 + 2 * DAY + timedelta(hours=1)),  # across days, mid-row-group
        (T0 + DAY, T0 + 2 * DAY),  # exactly one day
        (T0 + timedelta(hours=3), T0 + timedelta(hours=3)),  # empty
    ],
)
@pytest.mark.parametrize("chunk_size", [1, 7, 50_000])
def test_reading_back_gives_the_logs_chunks(
    log: PredictionLog, tmp_path: Path, start: datetime, end: datetime, chunk_size: int
) -> None:
    export_prediction_log(log, "m", "1", tmp_path, until=UNTIL, chunk_size=23, row_group_size=30)
    export = PredictionLogExport(tmp_path)
    assert repr(export) == f"PredictionLogExport({str(tmp_path)!r})"
    assert export.n_classes("m", "1") == K
    got = list(export.iter_labelled("m", "1", start, end, chunk_size=chunk_size))
    want = list(log.iter_labelled("m", "1", start, end, chunk_size=chunk_size))
    if want:
        assert_same_chunks(got, want)
    else:
        assert got == []


def _small_export(tmp_path: Path, n: int = 12) -> Path:
    """One day of ``n`` labelled rows in row groups of 4; returns the day file."""
    log = PredictionLog("sqlite://")
    log.create()
    rng = np.random.default_rng(0)
    log_predictions(log, "m", "1", 1.0, rng.normal(size=(n, K)), [f"r{i}" for i in range(n)],
                    time=[T0 + timedelta(minutes=i) for i in range(n)], labels=rng.integers(0, K, n))  # fmt: skip
    export_prediction_log(log, "m", "1", tmp_path, until=UNTIL, row_group_size=4)
    return _folder(tmp_path) / f"date={DAYS[0]}" / "part-0.parquet"


def _rewrite(file: Path, column: str, row: int, value: object) -> None:
    """Write the day file again by hand, in row groups of 4, with one value changed."""
    table = pq.read_table(file)
    index = table.schema.get_field_index(column)
    values = table.column(column).to_pylist()
    values[row] = value
    field = table.schema.field(index)
    table = table.set_column(index, pa.field(column, field.type), pa.array(values, field.type))
    pq.write_table(table, file, row_group_size=4)


def _read_everything(tmp_path: Path) -> None:
    list(PredictionLogExport(tmp_path).iter_labelled("m", "1", T0, UNTIL))


def _summarise_everything(tmp_path: Path) -> None:
    summarise_export(PredictionLogExport(tmp_path), WindowQuery("m", "1", temperature=1.0, start=T0, end=UNTIL))


@pytest.mark.parametrize("read", [_read_everything, _summarise_everything], ids=["iter_labelled", "summarise_export"])
@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("logit_1", float("nan"), r"row 9 \(id 'r9'\), logits column 1: nan is not finite"),
        ("label", 3, r"row 9 \(id 'r9'\), labels: 3 is outside \[0, 3\)"),
        ("id", None, r"row 9, ids: the id is missing"),
        ("id", "r1", r"column id: id 'r1' appears in row 1 and row 9; ids must be unique within a file"),
        ("served_at", T0 + DAY, r"row 9 \(id 'r9'\), column served_at: .*served outside the file's day 2026-03-01"),
        ("served_at", T0, r"row 9 \(id 'r9'\), column served_at: .*served before the row above it"),
        ("temperature", 0.0, r"row 9 \(id 'r9'\), column temperature: 0.0: the temperature must be finite and > 0"),
    ],
)
def test_a_corrupted_partition_is_refused_naming_the_file_and_its_row(
    tmp_path: Path, read: Callable[[Path], None], column: str, value: object, message: str
) -> None:
    file = _small_export(tmp_path)
    _rewrite(file, column, 9, value)  # row 1 of row group 2
    assert pq.ParquetFile(file).metadata.num_row_groups == 3
    with pytest.raises(ScoredSetError, match=rf"^{file}: .*{message}"):
        read(tmp_path)


def test_a_day_with_another_k_is_refused(tmp_path: Path) -> None:
    _small_export(tmp_path)
    other = _folder(tmp_path) / f"date={DAYS[1]}" / "part-0.parquet"
    other.parent.mkdir()
    table = pq.read_table(_folder(tmp_path) / f"date={DAYS[0]}" / "part-0.parquet").drop_columns(["logit_2"])
    pq.write_table(table, other)
    with pytest.raises(ScoredSetError, match=rf"^{other}: has 2 classes \(logit_ columns\) but .*date=2026-03-01.* has 3"):
        list(PredictionLogExport(tmp_path).iter_labelled("m", "1", T0, UNTIL))
    with pytest.raises(ScoredSetError, match=rf"^{other}: has 2 classes"):
        export_partitions(PredictionLogExport(tmp_path), "m", "1", T0, UNTIL)


def test_a_file_that_is_not_an_export_is_refused(tmp_path: Path) -> None:
    file = _small_export(tmp_path)
    pq.write_table(pq.read_table(file).drop_columns(["temperature"]), file)
    with pytest.raises(ScoredSetError, match=rf"^{file}: column 'temperature' is missing; a day file of an export has"):
        list(PredictionLogExport(tmp_path).iter_labelled("m", "1", T0, UNTIL))
    (_folder(tmp_path) / "date=someday").mkdir()
    with pytest.raises(ScoredSetError, match=r"date=someday: not a day partition of an export"):
        PredictionLogExport(tmp_path).n_classes("m", "1")


# --------------------------------------------------------------------------- partitioned summaries


class PicklingEngine:
    """Ships the function and every item through pickle, as a Dask engine does."""

    name = "pickling"
    n_workers = 2

    def map(self, fn: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
        shipped = pickle.loads(pickle.dumps(fn))
        return [pickle.loads(pickle.dumps(shipped(pickle.loads(pickle.dumps(item))))) for item in items]


def assert_same_summary(got: WindowSummary, want: WindowSummary) -> None:
    """Counts identical, sums to 1e-12 relative."""
    assert (got.model_name, got.model_version, got.start, got.end, got.temperature, got.n_bins, got.n_classes) == (
        want.model_name, want.model_version, want.start, want.end, want.temperature, want.n_bins, want.n_classes
    )  # fmt: skip
    assert got.n_ungrouped == want.n_ungrouped and got.gate == want.gate
    assert got.served_temperatures == want.served_temperatures
    assert list(got.groups) == list(want.groups)
    for mine, theirs in [(got.overall, want.overall), *zip(got.groups.values(), want.groups.values(), strict=True)]:
        np.testing.assert_array_equal(mine.bin_count, theirs.bin_count)
        np.testing.assert_array_equal(mine.bin_correct, theirs.bin_correct)
        for name in ("ece", "nll", "brier"):
            assert getattr(mine, name) == pytest.approx(getattr(theirs, name), rel=1e-12, abs=0), name
        np.testing.assert_allclose(mine.bin_confidence_sum, theirs.bin_confidence_sum, rtol=1e-12, atol=0)


@pytest.mark.parametrize("engine", [LOCAL_ENGINE, PicklingEngine()], ids=["local", "pickling"])
@pytest.mark.parametrize(
    ("start", "end"), [(T0, UNTIL), (T0 + timedelta(hours=7, minutes=13), T0 + 2 * DAY + timedelta(hours=1))]
)
def test_summarise_export_equals_summarise_window_of_the_export_and_of_the_log(
    log: PredictionLog, tmp_path: Path, engine: Any, start: datetime, end: datetime
) -> None:
    export_prediction_log(log, "m", "1", tmp_path, until=UNTIL, row_group_size=40)
    export = PredictionLogExport(tmp_path)
    query = WindowQuery("m", "1", temperature=1.1, start=start, end=end, n_bins=10, threshold=0.6)
    partitioned = summarise_export(export, query, engine=engine)
    from_export = summarise_window(export, query, chunk_size=33)
    from_log = summarise_window(log, query, chunk_size=33)
    assert partitioned.n == log.count_labelled("m", "1", start, end) > 100
    assert partitioned.served_temperatures == (0.9, 1.3) and partitioned.n_ungrouped > 0
    assert from_export.n_chunks == from_log.n_chunks  # the export's chunks are the log's
    assert partitioned.n_chunks == len(export_partitions(export, "m", "1", start, end))
    assert_same_summary(partitioned, from_export)
    assert_same_summary(from_export, from_log)


def test_partitions_are_the_row_groups_of_the_days_in_the_window(log: PredictionLog, tmp_path: Path) -> None:
    export_prediction_log(log, "m", "1", tmp_path, until=UNTIL, row_group_size=40)
    export = PredictionLogExport(tmp_path)
    day_two = export_partitions(export, "m", "1", T0 + DAY, T0 + 2 * DAY)
    assert {Path(p.path).parent.name for p in day_two} == {f"date={DAYS[1]}"}
    assert [p.row_group for p in day_two] == list(range(len(day_two)))
    assert [p.first_row for p in day_two] == [40 * i for i in range(len(day_two))]
    assert sum(p.n_rows for p in day_two) == log.count_labelled("m", "1", T0 + DAY, T0 + 2 * DAY)
    # Row groups wholly outside the window are not listed (their serving times are in the statistics).
    evening = export_partitions(export, "m", "1", T0 + DAY + timedelta(hours=22), T0 + 2 * DAY)
    assert 0 < len(evening) < len(day_two) and evening[-1] == day_two[-1]
    assert export_partitions(export, "m", "1", T0 - DAY, T0) == []
    assert pickle.loads(pickle.dumps(day_two[0])) == day_two[0]


def test_a_partition_of_a_file_rewritten_since_it_was_listed_is_refused(log: PredictionLog, tmp_path: Path) -> None:
    export_prediction_log(log, "m", "1", tmp_path, until=UNTIL, row_group_size=40)
    partition: ExportPartition = export_partitions(PredictionLogExport(tmp_path), "m", "1", T0, UNTIL)[0]
    query = WindowQuery("m", "1", temperature=1.0, start=T0, end=UNTIL)
    assert summarise_partition(partition, query).n == partition.n_rows
    file = Path(partition.path)
    pq.write_table(pq.read_table(file), file, row_group_size=40)  # same rows, another file
    with pytest.raises(ScoredSetError, match=rf"^{file}: changed after its partitions were listed"):
        summarise_partition(partition, query)


def test_merge_summaries_adds_up_parts_of_one_window_only() -> None:
    rng = np.random.default_rng(1)
    logits, labels = rng.normal(size=(30, 3)), rng.integers(0, 3, 30)
    groups = np.array(["a", "b", None] * 10, dtype=object)
    window = {"temperature": 1.0, "start": T0, "end": T0 + DAY, "threshold": 0.5}
    whole = summarise_arrays(logits, labels, groups=groups, **window)
    parts = [summarise_arrays(logits[i : i + 10], labels[i : i + 10], groups=groups[i : i + 10], **window)
             for i in range(0, 30, 10)]  # fmt: skip
    merged = merge_summaries(parts)
    assert merged.n_chunks == 3 and merged.overall == whole.overall and merged.gate == whole.gate
    assert merged.n_ungrouped == whole.n_ungrouped and list(merged.groups) == ["a", "b"]
    assert all(merged.groups[g] == whole.groups[g] for g in "ab")
    later = summarise_arrays(logits, labels, **{**window, "start": T0 + DAY, "end": T0 + 2 * DAY})
    with pytest.raises(ValueError, match="cannot merge summaries of different windows: start"):
        merge_summaries([whole, later])
    with pytest.raises(ValueError, match="cannot merge summaries of different windows: temperature"):
        merge_summaries([whole, summarise_arrays(logits, labels, **{**window, "temperature": 2.0})])
    with pytest.raises(ValueError, match="different thresholds"):
        merge_summaries([whole, summarise_arrays(logits, labels, **{**window, "threshold": 0.7})])
    with pytest.raises(ValueError, match="at least one summary"):
        merge_summaries([])
