"""The prediction log against SQLite and a real PostgreSQL (issue 4: atomicity, duplicates, late labels)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
import sqlalchemy as sa

from calibration import top_label_confidence
from monitoring import (
    LabelConflict,
    PredictionLog,
    PredictionRecord,
    PredictionRowError,
    log_predictions,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def record(i: int, *, version: str = "1", k: int = 3, label: int | None = None, **changes: object) -> PredictionRecord:
    fields: dict[str, object] = {
        "time": T0 + timedelta(seconds=i),
        "model_name": "digits",
        "model_version": version,
        "request_id": f"req-{version}-{i}",
        "logits": np.linspace(-1.0, 1.0, k) + 0.01 * i,
        "predicted_class": k - 1,
        "confidence": 0.5,
        "temperature": 1.5,
        "group": "web" if i % 2 else None,
        "label": label,
    }
    fields.update(changes)
    return PredictionRecord(**fields)  # type: ignore[arg-type]


def all_rows(log: PredictionLog) -> list[str]:
    with log.engine.connect() as conn:
        return list(conn.execute(sa.select(log.table.c.request_id).order_by(log.table.c.id)).scalars())


def window(log: PredictionLog, version: str = "1", **kwargs: object) -> list[str]:
    chunks = log.iter_labelled("digits", version, T0 - HOUR, T0 + 24 * HOUR, **kwargs)  # type: ignore[arg-type]
    return [rid for chunk in chunks for rid in chunk.request_ids.tolist()]


# --------------------------------------------------------------------------- append


def test_append_round_trips_every_field(prediction_log: PredictionLog) -> None:
    rng = np.random.default_rng(0)
    logits = (rng.normal(size=(40, 5)) * 10).astype(np.float32)
    logits[0, 0] = np.float32(1e-38)  # subnormal-adjacent and extreme values survive the bytes
    logits[1, 1] = np.float32(3.0e38)
    groups = [None if i % 3 == 0 else f"g{i % 3}" for i in range(40)]
    labels = rng.integers(0, 5, size=40)
    times = [T0 + timedelta(milliseconds=137 * i) for i in range(40)]
    assert log_predictions(
        prediction_log, "digits", "1", 1.7, logits, [f"r{i}" for i in range(40)], groups, times, labels=labels
    ) == 40

    chunks = list(prediction_log.iter_labelled("digits", "1", T0, T0 + HOUR, chunk_size=16))
    assert [len(c) for c in chunks] == [16, 16, 8]
    got_logits = np.concatenate([c.logits for c in chunks])
    assert got_logits.dtype == np.float32
    assert np.array_equal(got_logits.view(np.uint32), logits.view(np.uint32)), "float32 round-trip must be bit-exact"
    assert np.concatenate([c.labels for c in chunks]).tolist() == labels.tolist()
    assert np.concatenate([c.groups for c in chunks]).tolist() == groups
    assert np.concatenate([c.request_ids for c in chunks]).tolist() == [f"r{i}" for i in range(40)]
    expected_times = np.array([t.replace(tzinfo=None) for t in times], dtype="datetime64[us]")
    assert np.array_equal(np.concatenate([c.time for c in chunks]), expected_times)
    predicted, confidence = top_label_confidence(logits, temperature=1.7)
    assert np.array_equal(np.concatenate([c.predicted_class for c in chunks]), predicted)
    np.testing.assert_allclose(np.concatenate([c.confidence for c in chunks]), confidence, rtol=0, atol=1e-15)
    assert set(np.concatenate([c.temperature for c in chunks]).tolist()) == {1.7}
    assert prediction_log.n_classes("digits", "1") == 5
    assert prediction_log.n_classes("digits", "2") is None


def test_times_are_stored_as_utc_instants(prediction_log: PredictionLog) -> None:
    plus_two = timezone(timedelta(hours=2))
    local = datetime(2026, 3, 1, 14, 0, 5, 123456, tzinfo=plus_two)  # = 12:00:05.123456 UTC
    prediction_log.append([record(0, time=local, label=1)])
    # Bounds in another zone select the same instant.
    minus_five = timezone(timedelta(hours=-5))
    start = datetime(2026, 3, 1, 7, 0, 5, 123456, tzinfo=minus_five)
    (chunk,) = prediction_log.iter_labelled("digits", "1", start, start + timedelta(microseconds=1))
    assert chunk.time[0] == np.datetime64("2026-03-01T12:00:05.123456")
    assert prediction_log.count_labelled("digits", "1", start + timedelta(microseconds=1), start + HOUR) == 0
    with prediction_log.engine.connect() as conn:
        stored = conn.execute(sa.select(prediction_log.table.c.served_at)).scalar_one()
    assert stored == local and stored.tzinfo is not None and stored.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"logits": [0.0, float("nan"), 1.0]}, "logits contain nan"),
        ({"logits": [0.0, float("inf"), 1.0]}, "logits contain inf"),
        ({"logits": [0.0, 1e39, 1.0]}, "logits contain inf (as float32)"),
        ({"logits": [0.0, 1.0]}, "has 3"),  # wrong K vs the rest of the batch
        ({"label": 3}, "label is 3; it must be in [0, 3)"),
        ({"label": -1}, "label is -1"),
        ({"predicted_class": 7}, "predicted_class is 7"),
        ({"confidence": 1.5}, "confidence is 1.5"),
        ({"temperature": 0.0}, "temperature is 0.0"),
        ({"time": datetime(2026, 3, 1, 12)}, "has no timezone"),
        ({"request_id": "req-1-0"}, "request id repeats row 0 of the same batch"),
        ({"request_id": ""}, "request_id must have 1 to 255 characters"),
        ({"model_version": "v" * 300}, "model_version must have 1 to 255 characters"),
    ],
)
def test_a_bad_row_in_the_middle_writes_nothing(
    prediction_log: PredictionLog, bad: dict[str, object], message: str
) -> None:
    batch = [record(i, label=i % 3) for i in range(10)]
    batch[5] = record(5, **bad)  # type: ignore[arg-type]
    with pytest.raises(PredictionRowError, match=r"^row 5\b.*" + re.escape(message)) as caught:
        prediction_log.append(batch)
    assert caught.value.index == 5
    assert "nothing from the batch of 10 rows was written" in str(caught.value)
    assert all_rows(prediction_log) == []
    assert prediction_log.n_classes("digits", "1") is None, "the version's K must not be recorded either"


def test_duplicate_against_the_table_names_the_row_and_writes_nothing(prediction_log: PredictionLog) -> None:
    prediction_log.append([record(i) for i in range(3)])
    batch = [record(i) for i in range(10, 14)] + [record(1)] + [record(i) for i in range(20, 23)]
    with pytest.raises(PredictionRowError, match=r"row 4 \(request id 'req-1-1'\): request id is already in the log"):
        prediction_log.append(batch)
    assert all_rows(prediction_log) == ["req-1-0", "req-1-1", "req-1-2"]


def test_wrong_k_against_the_versions_k_in_the_log(prediction_log: PredictionLog) -> None:
    prediction_log.append([record(0, k=3)])
    with pytest.raises(PredictionRowError, match=r"'digits' version '1' has 3 in the log"):
        prediction_log.append([record(1, k=3, version="2"), record(2, k=4)])
    assert all_rows(prediction_log) == ["req-1-0"]
    assert prediction_log.n_classes("digits", "2") is None, "version 2's K (written first) was rolled back"
    # Another version may have another K.
    prediction_log.append([record(1, k=4, version="2")])
    assert prediction_log.n_classes("digits", "2") == 4


def test_the_database_itself_refuses_inconsistent_rows(prediction_log: PredictionLog) -> None:
    """Check constraints guard the table against writers that bypass PredictionLog."""
    row = {
        "served_at": T0, "model_name": "m", "model_version": "1", "request_id": "x", "n_classes": 3,
        "logits": np.zeros(2, dtype="<f4").tobytes(), "predicted_class": 0, "confidence": 0.5, "temperature": 1.0,
    }  # fmt: skip
    with pytest.raises(sa.exc.IntegrityError), prediction_log.engine.begin() as conn:
        conn.execute(prediction_log.table.insert(), [row])


def test_empty_batch_and_bad_types(prediction_log: PredictionLog) -> None:
    assert prediction_log.append([]) == 0
    with pytest.raises(TypeError, match="sequence of PredictionRecord"):
        prediction_log.append(record(0))  # type: ignore[arg-type]
    with pytest.raises(PredictionRowError, match="request_id must be a str"):
        prediction_log.append([record(0, request_id=17)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="request_ids has 1 entries but logits have 2 rows"):
        log_predictions(prediction_log, "m", "1", 1.0, np.zeros((2, 2)), ["a"])


# --------------------------------------------------------------------------- labels


def test_late_labels_appear_in_the_window(prediction_log: PredictionLog) -> None:
    prediction_log.append([record(i) for i in range(6)])
    assert prediction_log.count_labelled("digits", "1", T0, T0 + HOUR) == 0
    assert window(prediction_log) == []

    report = prediction_log.attach_labels(["req-1-4", "req-1-1"], [2, 0], labelled_at=T0 + 3 * HOUR)
    assert (report.attached, report.unchanged, report.conflicts, report.unknown_request_ids) == (2, 0, (), ())
    assert report.complete
    assert prediction_log.count_labelled("digits", "1", T0, T0 + HOUR) == 2
    # The window is on serving time: late labels land in the window the row was served in.
    assert window(prediction_log) == ["req-1-1", "req-1-4"]
    (chunk,) = prediction_log.iter_labelled("digits", "1", T0, T0 + HOUR)
    assert chunk.labels.tolist() == [0, 2]
    with prediction_log.engine.connect() as conn:
        labelled_at = conn.execute(
            sa.select(prediction_log.table.c.labelled_at).where(prediction_log.table.c.request_id == "req-1-4")
        ).scalar_one()
    assert labelled_at == T0 + 3 * HOUR


def test_attaching_twice_is_idempotent_and_conflicts_are_reported(prediction_log: PredictionLog) -> None:
    prediction_log.append([record(i) for i in range(3)])
    first = prediction_log.attach_labels(["req-1-0", "req-1-1"], [1, 2])
    again = prediction_log.attach_labels(["req-1-0", "req-1-1"], [1, 2])
    assert (first.attached, again.attached, again.unchanged) == (2, 0, 2)
    assert again.complete

    clash = prediction_log.attach_labels(["req-1-0", "req-1-2", "req-1-2"], [0, 1, 2])
    assert clash.attached == 0
    assert set(clash.conflicts) == {LabelConflict("req-1-0", 1, 0), LabelConflict("req-1-2", 1, 2)}
    assert not clash.complete
    (chunk,) = prediction_log.iter_labelled("digits", "1", T0, T0 + HOUR)
    assert chunk.request_ids.tolist() == ["req-1-0", "req-1-1"]
    assert chunk.labels.tolist() == [1, 2], "a conflicting label must not overwrite the first one"


def test_unknown_request_ids_are_reported_not_dropped(prediction_log: PredictionLog) -> None:
    prediction_log.append([record(i) for i in range(2)])
    report = prediction_log.attach_labels(["req-1-0", "nope", "req-1-1", "also-nope"], [0, 1, 1, 2])
    assert report.attached == 2
    assert report.unknown_request_ids == ("nope", "also-nope")
    assert report.n_requested == 4 and not report.complete


def test_a_bad_label_is_refused_alone_and_the_good_ones_are_attached(prediction_log: PredictionLog) -> None:
    """One out-of-range label in a file of thousands used to refuse the whole file."""
    prediction_log.append([record(i, k=3) for i in range(4)])
    report = prediction_log.attach_labels(["req-1-0", "req-1-1", "req-1-2", 7, "req-1-3", "nope"], [1, 3, -1, 0, 0.5, 2])
    assert (report.attached, report.unchanged, report.unknown_request_ids) == (1, 0, ("nope",))
    assert [(r.index, r.request_id) for r in report.refused] == [(1, "req-1-1"), (2, "req-1-2"), (3, None),
                                                                  (4, "req-1-3")]
    reasons = [r.reason for r in report.refused]
    assert reasons[0] == "label 3 is outside [0, 3) of model 'digits' version '1'"
    assert reasons[1] == "the label is -1; labels must be >= 0"
    assert reasons[2].startswith("the request id must be a str of 1 to 255 characters; got int 7")
    assert reasons[3] == "the label must be an integer class index; got float 0.5"
    assert not report.complete
    assert prediction_log.count_labelled("digits", "1", T0, T0 + HOUR) == 1
    # A label column pandas read as floats (a missing value elsewhere) is read as its integers.
    assert prediction_log.attach_labels(["req-1-1"], np.array([2.0])).attached == 1


def test_strict_labels_are_all_or_nothing(prediction_log: PredictionLog) -> None:
    prediction_log.append([record(i, k=3) for i in range(2)])
    with pytest.raises(ValueError, match=r"row 1 \(request id 'req-1-1'\): label 3 is outside \[0, 3\)"):
        prediction_log.attach_labels(["req-1-0", "req-1-1"], [1, 3], strict=True)
    with pytest.raises(ValueError, match="labels must be >= 0; nothing of the 1 rows was written"):
        prediction_log.attach_labels(["req-1-0"], [-1], strict=True)
    assert prediction_log.count_labelled("digits", "1", T0, T0 + HOUR) == 0
    with pytest.raises(ValueError, match="one label per request id"):
        prediction_log.attach_labels(["req-1-0", "req-1-1"], [0])


def test_many_labels_in_one_call(prediction_log: PredictionLog) -> None:
    """More ids than one IN list holds (chunked look-ups)."""
    n = 1_234
    log_predictions(prediction_log, "digits", "1", 1.0, np.zeros((n, 2)), [f"r{i}" for i in range(n)], time=T0)
    report = prediction_log.attach_labels([f"r{i}" for i in range(n)] + ["zz"], np.ones(n + 1, dtype=int))
    assert (report.attached, report.unknown_request_ids) == (n, ("zz",))
    assert prediction_log.count_labelled("digits", "1", T0, T0 + HOUR) == n


# --------------------------------------------------------------------------- windows


def test_chunked_iteration_returns_exactly_the_window_in_order(prediction_log: PredictionLog) -> None:
    rng = np.random.default_rng(1)
    n = 300
    # Many equal timestamps (ties straddle chunk boundaries), shuffled insertion order,
    # rows outside the window, another version, and unlabelled rows.
    offsets = rng.integers(-20, 80, size=n)  # minutes from T0
    times = [T0 + timedelta(minutes=int(m)) for m in offsets]
    labels = np.where(rng.random(n) < 0.7, rng.integers(0, 3, n), -1)
    versions = np.where(rng.random(n) < 0.8, "1", "2")
    batch = [
        record(i, version=str(versions[i]), time=times[i], label=None if labels[i] < 0 else int(labels[i]))
        for i in range(n)
    ]
    for start in range(0, n, 100):  # several appends
        prediction_log.append(batch[start : start + 100])
    start, end = T0, T0 + HOUR
    expected = sorted(
        (times[i], i)
        for i in range(n)
        if versions[i] == "1" and labels[i] >= 0 and start <= times[i] < end
    )
    expected_ids = [f"req-1-{i}" for _, i in expected]
    for chunk_size in (1, 7, len(expected), len(expected) + 1, 50_000):
        chunks = list(prediction_log.iter_labelled("digits", "1", start, end, chunk_size=chunk_size))
        assert all(0 < len(c) <= chunk_size for c in chunks)
        assert [rid for c in chunks for rid in c.request_ids.tolist()] == expected_ids, chunk_size
    assert prediction_log.count_labelled("digits", "1", start, end) == len(expected)
    assert list(prediction_log.iter_labelled("digits", "3", start, end)) == []
    assert list(prediction_log.iter_labelled("digits", "1", end, end)) == []


def test_window_arguments_are_checked(prediction_log: PredictionLog) -> None:
    with pytest.raises(ValueError, match="has no timezone"):
        list(prediction_log.iter_labelled("digits", "1", datetime(2026, 1, 1), T0))
    with pytest.raises(ValueError, match="before it starts"):
        prediction_log.count_labelled("digits", "1", T0, T0 - HOUR)
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        list(prediction_log.iter_labelled("digits", "1", T0, T0 + HOUR, chunk_size=0))


def test_log_predictions_computes_what_was_served(prediction_log: PredictionLog) -> None:
    logits = np.array([[3.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    log_predictions(prediction_log, "digits", "1", 2.0, logits, ["a", "b"], groups="api", time=T0, labels=[0, 1])
    (chunk,) = prediction_log.iter_labelled("digits", "1", T0, T0 + HOUR)
    assert chunk.predicted_class.tolist() == [0, 2]
    expected = np.exp(logits / 2.0).max(axis=1) / np.exp(logits / 2.0).sum(axis=1)
    np.testing.assert_allclose(chunk.confidence, expected, rtol=1e-6)
    assert chunk.groups.tolist() == ["api", "api"]
    assert chunk.temperature.tolist() == [2.0, 2.0]


def test_a_file_log_is_reopened_by_url(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/log.db"
    with PredictionLog(url) as log:
        log.create()
        log.append([record(0, label=1)])
    with PredictionLog(url) as again:
        again.create()  # idempotent
        assert again.count_labelled("digits", "1", T0, T0 + HOUR) == 1
        with again.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"


def test_a_database_refusal_mid_transaction_rolls_everything_back(prediction_log: PredictionLog) -> None:
    """A concurrent writer logs one of our request ids between the checks and the INSERT."""
    sneaked = False

    def concurrent_writer(conn: sa.Connection, cursor: object, statement: str, *args: object) -> None:
        nonlocal sneaked
        if sneaked or not statement.lstrip().upper().startswith("INSERT INTO PREDICTION_LOG ("):
            return
        sneaked = True
        row = {
            "served_at": T0, "model_name": "other", "model_version": "9", "request_id": "req-7-2", "n_classes": 2,
            "logits": np.zeros(2, dtype="<f4").tobytes(), "predicted_class": 0, "confidence": 0.5, "temperature": 1.0,
        }  # fmt: skip
        conn.execute(prediction_log.table.insert(), [row])

    sa.event.listen(prediction_log.engine, "before_cursor_execute", concurrent_writer)
    try:
        with pytest.raises(ValueError, match="refused by the database and nothing was written"):
            prediction_log.append([record(i, version="7") for i in range(5)])
    finally:
        sa.event.remove(prediction_log.engine, "before_cursor_execute", concurrent_writer)
    assert sneaked
    assert all_rows(prediction_log) == [], "the whole transaction, the sneaked row included, was rolled back"
    assert prediction_log.n_classes("digits", "7") is None, "the version's K was rolled back too"
    assert prediction_log.append([record(i, version="7") for i in range(5)]) == 5
