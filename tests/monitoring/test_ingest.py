"""Ingest row by row (monitoring.ingest): a bad row is refused alone, resending is idempotent,
PostgreSQL takes the rows by COPY, the queue writes many callers' batches together and refuses
what it cannot hold. Real SQLite files and a real PostgreSQL (the ``prediction_log`` fixture)."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitoring import (
    IngestQueue,
    PredictionBatch,
    PredictionLog,
    log_predictions,
    write_predictions,
)

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
DEFAULTS = {"model_name": "tickets", "model_version": "7", "temperature": 1.5}


def _rows(n: int, k: int = 4, *, prefix: str = "r", seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [{"request_id": f"{prefix}{i}", "logits": rng.normal(size=k).tolist(), "group": "web",
             "served_at": (T0 + timedelta(seconds=i)).isoformat()} for i in range(n)]


def _stored(log: PredictionLog) -> dict[str, tuple[Any, ...]]:
    table = log.table
    with log.engine.connect() as conn:
        rows = conn.execute(table.select()).all()
    return {row.request_id: row for row in rows}


def test_a_bad_row_is_refused_alone_with_its_position_and_reason(prediction_log: PredictionLog) -> None:
    rows: list[Any] = _rows(8)
    rows[1]["logits"] = [1.0]                       # K < 2
    rows[2]["logits"] = [0.0, float("nan"), 1, 2]   # not finite
    rows[3]["temperature"] = 0                      # its own T, not > 0
    rows[4]["served_at"] = "yesterday"              # not ISO 8601
    rows[5] = ["not", "a", "row"]
    del rows[6]["request_id"]
    rows[7]["logits"] = [1.0, "x", 0.0, 0.0]
    report = write_predictions(prediction_log, PredictionBatch.from_rows(rows, defaults=DEFAULTS))
    assert (report.received, report.written, report.unchanged) == (8, 1, 0)
    reasons = {refusal.index: refusal.reason for refusal in report.refused}
    assert reasons == {
        1: "logits have 1 value(s); K >= 2 is required",
        2: "logits contain nan (as float32); every logit must be finite",
        3: "temperature is 0.0; it must be finite and > 0",
        4: "served_at 'yesterday' is not an ISO 8601 time (e.g. 2026-03-01T12:00:00Z)",
        5: "a row must be an object with the fields model_name, model_version, temperature, request_id, logits; got "
           "list",
        6: "missing request_id (neither in the row nor in the batch's defaults)",
        7: "logits must be a list of numbers (the raw logits z, one per class)",
    }
    assert [refusal.request_id for refusal in report.refused] == ["r1", "r2", "r3", "r4", None, None, "r7"]
    assert list(_stored(prediction_log)) == ["r0"]


@pytest.mark.parametrize("temperature", [4.750461532398465e16, 1e-300])
def test_a_temperature_beyond_the_cores_limits_is_refused_alone_not_a_server_error(
        prediction_log: PredictionLog, temperature: float) -> None:
    """Found by fuzzing the ingest service: a finite, positive T outside [1e-10, 1e10] passed the
    row checks, then failed the softmax for the whole batch (a 500)."""
    rows: list[Any] = _rows(3)
    rows[1]["temperature"] = temperature
    report = write_predictions(prediction_log, PredictionBatch.from_rows(rows, defaults=DEFAULTS))
    assert (report.received, report.written) == (3, 2)
    [refusal] = report.refused
    assert (refusal.index, refusal.request_id) == (1, "r1")
    assert refusal.reason == (f"temperature must be between 1e-10 and 1e+10 (a normal float whose inverse is one "
                              f"too); got {temperature!r}")
    assert list(_stored(prediction_log)) == ["r0", "r2"]


def test_the_served_confidence_is_computed_as_log_predictions_computes_it(prediction_log: PredictionLog,
                                                                         tmp_path: Any) -> None:
    """Rows of two versions (K = 3 and K = 5) and two temperatures in one batch: each row's predicted
    class and confidence are bit for bit what log_predictions stores for it."""
    rng = np.random.default_rng(1)
    rows = [{"model_name": "a", "model_version": "1", "temperature": 0.7, "request_id": f"a{i}",
             "logits": rng.normal(size=3).tolist(), "served_at": T0.isoformat()} for i in range(20)]
    rows += [{"model_name": "b", "model_version": "2", "temperature": 2.5, "request_id": f"b{i}",
              "logits": (5 * rng.normal(size=5)).tolist(), "served_at": T0.isoformat()} for i in range(20)]
    rows.insert(7, {"request_id": "bad"})  # a refused row in between: the others keep their places
    assert write_predictions(prediction_log, PredictionBatch.from_rows(rows)).written == 40
    reference = PredictionLog(f"sqlite:///{tmp_path / 'reference.db'}")
    reference.create()
    for name, version, t, prefix in (("a", "1", 0.7, "a"), ("b", "2", 2.5, "b")):
        mine = [row for row in rows if row.get("model_name") == name]
        log_predictions(reference, name, version, t, np.array([row["logits"] for row in mine]),
                        [row["request_id"] for row in mine], time=T0)
    ours, theirs = _stored(prediction_log), _stored(reference)
    assert set(ours) == set(theirs)
    for rid, row in ours.items():
        assert (row.predicted_class, row.confidence, row.logits, row.temperature, row.n_classes) == (
            theirs[rid].predicted_class, theirs[rid].confidence, theirs[rid].logits, theirs[rid].temperature,
            theirs[rid].n_classes), rid
    reference.dispose()


def test_resending_is_idempotent_and_a_reused_request_id_is_refused(prediction_log: PredictionLog) -> None:
    rows = _rows(5)
    first = write_predictions(prediction_log, PredictionBatch.from_rows(rows, defaults=DEFAULTS))
    again = write_predictions(prediction_log, PredictionBatch.from_rows(rows, defaults=DEFAULTS))
    assert (first.written, first.unchanged, again.written, again.unchanged, again.refused) == (5, 0, 0, 5, ())
    other = dict(rows[2], logits=[9.0, 9.0, 9.0, 0.0])  # the same id for another prediction
    new = {"request_id": "new", "logits": [1.0, 0.0, 0.0, 0.0]}
    mixed = write_predictions(prediction_log, PredictionBatch.from_rows([rows[0], other, new], defaults=DEFAULTS))
    assert (mixed.written, mixed.unchanged) == (1, 1)
    [refusal] = mixed.refused
    assert (refusal.index, refusal.request_id) == (1, "r2")
    assert refusal.reason.startswith("request id is already in the log for another prediction (model 'tickets' "
                                     "version '7')")
    stored = _stored(prediction_log)
    assert len(stored) == 6 and np.frombuffer(stored["r2"].logits, "<f4").tolist() == pytest.approx(rows[2]["logits"],
                                                                                                     rel=1e-6)


def test_rows_of_a_version_with_another_k_in_the_log_are_refused(prediction_log: PredictionLog) -> None:
    assert write_predictions(prediction_log, PredictionBatch.from_rows(_rows(2), defaults=DEFAULTS)).written == 2
    rows = _rows(2, k=3, prefix="k3-") + [dict(_rows(1, prefix="other-")[0], model_version="8")]
    report = write_predictions(prediction_log, PredictionBatch.from_rows(rows, defaults=DEFAULTS))
    assert report.written == 1
    assert [r.reason for r in report.refused] == [
        "logits have 3 classes but 'tickets' version '7' has 4 in the log; every row of a version must have the "
        "same K"] * 2


def test_atomic_writes_nothing_when_a_row_is_refused(prediction_log: PredictionLog) -> None:
    rows = _rows(3)
    rows[1]["logits"] = [1.0]
    report = write_predictions(prediction_log, PredictionBatch.from_rows(rows, defaults=DEFAULTS), atomic=True)
    assert (report.written, len(report.refused)) == (0, 3)
    assert report.refused[1].reason == "logits have 1 value(s); K >= 2 is required"
    assert report.refused[0].reason.startswith("not written: another row was refused")
    # A refusal found at the write (a request id logged for another prediction) rolls the batch back too.
    write_predictions(prediction_log, PredictionBatch.from_rows(_rows(1, prefix="x"), defaults=DEFAULTS))
    clash = [_rows(1, prefix="y")[0], dict(_rows(1, prefix="x")[0], logits=[5.0, 0, 0, 0])]
    report = write_predictions(prediction_log, PredictionBatch.from_rows(clash, defaults=DEFAULTS), atomic=True)
    assert report.written == 0 and "y0" not in _stored(prediction_log)
    assert report.refused[1].reason.startswith("request id is already in the log for another prediction")


def test_from_arrays_refuses_rows_not_the_batch() -> None:
    batch = PredictionBatch.from_arrays("m", "1", 1.0, [[1.0, 0.0], [2.0, 1.0], [0.0, 0.0]], ["a", "", "a"],
                                        groups=["web", "x" * 300, None])
    assert len(batch) == 1
    assert [(r.index, r.reason) for r in batch.refused] == [
        (1, "request_id must have 1 to 255 characters; got 0: ''"), (2, "request id repeats row 0 of the same batch")]
    with pytest.raises(ValueError, match="request_ids has 1 entries but logits have 3 rows"):
        PredictionBatch.from_arrays("m", "1", 1.0, np.zeros((3, 2)), ["a"])


# A row is good or bad in one of several ways; what a batch of them reports, and writes.
_BAD = {
    "k1": lambda row: dict(row, logits=[1.0]),
    "nan": lambda row: dict(row, logits=[float("nan")] * 3),
    "no_id": lambda row: {key: value for key, value in row.items() if key != "request_id"},
    "bad_t": lambda row: dict(row, temperature=-2.0),
    "naive": lambda row: dict(row, served_at="2026-03-01T12:00:00"),
    "text": lambda row: dict(row, logits=["a", "b", "c"]),
    "t_list": lambda row: dict(row, temperature=[1.0]),  # found by the fuzzer: a 500 once
    "t_text": lambda row: dict(row, temperature="1.0"),
}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["good", *_BAD]), min_size=1, max_size=30))
def test_every_row_is_reported_once_and_only_the_good_ones_are_written(kinds: list[str]) -> None:
    log = PredictionLog("sqlite://")
    log.create()
    rows = []
    for i, kind in enumerate(kinds):
        row = {"request_id": f"r{i}", "logits": [float(i), 0.0, 1.0], "served_at": T0.isoformat()}
        rows.append(row if kind == "good" else _BAD[kind](row))
    report = write_predictions(log, PredictionBatch.from_rows(rows, defaults=DEFAULTS))
    assert report.received == len(kinds) == report.written + report.unchanged + len(report.refused)
    assert sorted(r.index for r in report.refused) == [i for i, kind in enumerate(kinds) if kind != "good"]
    assert log.count_rows() == kinds.count("good")
    log.dispose()


def test_the_queue_writes_callers_batches_together_and_answers_each(prediction_log: PredictionLog) -> None:
    queue = IngestQueue(prediction_log, batch_rows=1000)
    futures = []
    for j in range(40):
        rows = _rows(25, prefix=f"c{j}-", seed=j)
        if j % 10 == 3:
            rows[0]["logits"] = [1.0]
        futures.append(queue.submit(PredictionBatch.from_rows(rows, defaults=DEFAULTS)))
    reports = [future.result(timeout=60) for future in futures if future is not None]
    queue.close()
    assert len(reports) == 40
    assert [len(report.refused) for report in reports] == [1 if j % 10 == 3 else 0 for j in range(40)]
    assert sum(report.written for report in reports) == prediction_log.count_rows() == 40 * 25 - 4
    stats = queue.stats
    assert stats.rows_written == 996 and stats.pending_rows == 0 and stats.batches_written < 40


def test_a_full_queue_refuses_a_batch_and_says_when_to_come_back(tmp_path: Any) -> None:
    """The writer is stuck behind a database lock another connection holds: the rows that wait fill
    the queue, and the next batch is refused (None) instead of queued; it is written once the
    lock goes."""
    path = tmp_path / "log.db"
    log = PredictionLog(f"sqlite:///{path}")
    log.create()
    blocker = sqlite3.connect(path, timeout=30)
    blocker.execute("BEGIN EXCLUSIVE")
    queue = IngestQueue(log, max_pending_rows=150)  # rows being written count until committed
    try:
        first = queue.submit(PredictionBatch.from_rows(_rows(60), defaults=DEFAULTS))
        assert first is not None
        deadline = threading.Event()
        deadline.wait(0.5)  # the writer took the first batch and waits for the lock
        second = queue.submit(PredictionBatch.from_rows(_rows(60, prefix="s"), defaults=DEFAULTS))
        third = queue.submit(PredictionBatch.from_rows(_rows(60, prefix="t"), defaults=DEFAULTS))
        assert second is not None and third is None
        assert queue.stats.submissions_refused == 1 and 1 <= queue.retry_after() <= 60
    finally:
        blocker.rollback()
        blocker.close()
    assert first.result(timeout=60).written == 60 and second.result(timeout=60).written == 60
    queue.close()
    log.dispose()


def test_postgresql_takes_a_batch_by_one_copy_and_a_resent_one_by_insert(prediction_log: PredictionLog,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if prediction_log.engine.dialect.name != "postgresql":
        pytest.skip("COPY is PostgreSQL's")
    from monitoring import ingest

    copied: list[int] = []
    real_copy = ingest._copy

    def spy(conn: Any, columns: Any, rows: Any) -> None:
        copied.append(len(rows))
        real_copy(conn, columns, rows)

    monkeypatch.setattr(ingest, "_copy", spy)
    rows = _rows(300)
    assert write_predictions(prediction_log, PredictionBatch.from_rows(rows, defaults=DEFAULTS)).written == 300
    assert copied == [300]
    # Half of them again with 100 new ones: the COPY meets a logged id, is rolled back to its
    # savepoint, and the rows go in by INSERT ... ON CONFLICT DO NOTHING, the new ones written.
    report = write_predictions(prediction_log, PredictionBatch.from_rows(
        rows[:150] + _rows(100, prefix="n"), defaults=DEFAULTS))
    assert (report.written, report.unchanged, report.refused) == (100, 150, ())
    assert copied == [300, 250] and prediction_log.count_rows() == 400


def test_a_caller_that_stops_waiting_does_not_stop_the_writer(prediction_log: PredictionLog) -> None:
    """A submission whose future was cancelled (its HTTP client gone) is still written; the writer goes on."""
    queue = IngestQueue(prediction_log)
    first = queue.submit(PredictionBatch.from_rows(_rows(50), defaults=DEFAULTS))
    assert first is not None
    first.cancel()  # may or may not win against the writer: either way nothing breaks
    second = queue.submit(PredictionBatch.from_rows(_rows(50, prefix="z"), defaults=DEFAULTS))
    assert second is not None and second.result(timeout=60).written == 50
    queue.close()
    assert prediction_log.count_rows() == 100
