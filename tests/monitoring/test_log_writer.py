"""PredictionLogWriter: batches by size and by age, in order, bounded, losses counted and never raised."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from monitoring import PredictionLog, PredictionLogWriter
from tests.support.ports import free_port

T = 1.5


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'log.db'}"


@pytest.fixture
def writers() -> Iterator[list[PredictionLogWriter]]:
    made: list[PredictionLogWriter] = []
    yield made
    for writer in made:
        writer.close(timeout=5)


def _writer(made: list[PredictionLogWriter], url: str, **options: float) -> PredictionLogWriter:
    writer = PredictionLogWriter(PredictionLog(url), "m", "7", T, **options)  # type: ignore[arg-type]
    made.append(writer)
    return writer


def _logits(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 3))


def _stored(url: str) -> list[tuple[str, str, float, str | None]]:
    with PredictionLog(url) as log:
        table = log.table
        with log.engine.connect() as conn:
            rows = conn.execute(table.select().order_by(table.c.id)).all()
    return [(row.request_id, row.model_version, row.temperature, row.group_key) for row in rows]


def _wait(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_full_batch_is_written_without_waiting_for_the_interval(url: str, writers: list[PredictionLogWriter]) -> None:
    writer = _writer(writers, url, batch_rows=4, flush_interval=600.0)
    for i in range(4):
        assert writer.submit(_logits(1, i), [f"r{i}"])
    assert _wait(lambda: writer.stats.rows_written == 4)
    writer.submit(_logits(1), ["r4"])
    time.sleep(0.3)
    stats = writer.stats
    assert (stats.rows_written, stats.pending_rows, stats.batches_written) == (4, 1, 1)  # 1 row: not due yet


def test_the_interval_flushes_a_partial_batch(url: str, writers: list[PredictionLogWriter]) -> None:
    writer = _writer(writers, url, batch_rows=1000, flush_interval=0.1)
    started = time.monotonic()
    writer.submit(_logits(2), ["a", "b"], ["web", None])
    assert _wait(lambda: writer.stats.rows_written == 2)
    assert time.monotonic() - started >= 0.09
    assert _stored(url) == [("a", "7", T, "web"), ("b", "7", T, None)]


def test_rows_are_written_in_submission_order_in_batches_of_at_most_batch_rows(
    url: str, writers: list[PredictionLogWriter]
) -> None:
    writer = _writer(writers, url, batch_rows=5, flush_interval=600.0)
    expected: list[str] = []
    for i in range(20):
        ids = [f"q{i}-{j}" for j in range(1 + i % 3)]
        expected += ids
        writer.submit(_logits(len(ids), i), ids, time_served=datetime.now(UTC))
    assert writer.flush()
    stats = writer.stats
    assert stats.rows_written == len(expected) == stats.rows_submitted and stats.rows_dropped == 0
    assert stats.batches_written >= -(-len(expected) // 5)
    assert [row[0] for row in _stored(url)] == expected


def test_a_refused_submission_loses_only_its_own_rows(
    url: str, writers: list[PredictionLogWriter], caplog: pytest.LogCaptureFixture
) -> None:
    writer = _writer(writers, url, batch_rows=100, flush_interval=600.0)
    writer.submit(_logits(2), ["a", "b"])
    writer.submit(_logits(2), ["c", "c"])  # a request id repeated: refused by the log
    writer.submit(_logits(1), ["d"])
    with caplog.at_level(logging.WARNING, logger="thermostat.serving"):
        assert writer.flush()
    stats = writer.stats
    assert (stats.rows_written, stats.rows_dropped, stats.loss_events) == (3, 2, 1)
    assert stats.last_error is not None and "repeats row 0" in stats.last_error
    assert [row[0] for row in _stored(url)] == ["a", "b", "d"]
    assert "2 row(s) not logged" in caplog.text


def test_an_unreachable_database_is_counted_never_raised(
    writers: list[PredictionLogWriter], caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # a port nothing listens on
    writer = _writer(writers, f"postgresql+psycopg://thermostat@127.0.0.1:{port}/log", batch_rows=2,
                     flush_interval=600.0, report_every=3)
    with caplog.at_level(logging.WARNING, logger="thermostat.serving"):
        for i in range(7):
            assert writer.submit(_logits(2, i), [f"r{i}-0", f"r{i}-1"])  # queued: the loss comes later
        assert writer.flush()
        stats = writer.stats
        assert (stats.rows_submitted, stats.rows_written, stats.rows_dropped, stats.loss_events) == (14, 0, 14, 7)
        assert stats.last_error is not None and "OperationalError" in stats.last_error
        reports = [r for r in caplog.records if "not logged" in r.getMessage()]
        assert len(reports) == 3  # the 1st, 3rd and 6th losses
        assert "14 row(s) lost in 7 event(s)" not in caplog.text and "12 row(s) lost in 6 event(s)" in caplog.text
        writer.close()
    assert "14 row(s) LOST in 7 event(s)" in caplog.text


def test_a_full_queue_drops_and_counts(url: str, writers: list[PredictionLogWriter]) -> None:
    writer = _writer(writers, url, batch_rows=1000, flush_interval=600.0, max_pending_rows=5)
    assert writer.submit(_logits(3), ["a", "b", "c"])
    assert not writer.submit(_logits(3), ["d", "e", "f"])
    assert writer.submit(_logits(2), ["g", "h"])
    stats = writer.stats
    assert (stats.rows_dropped, stats.pending_rows) == (3, 5) and "queue full" in (stats.last_error or "")
    writer.flush()
    assert [row[0] for row in _stored(url)] == ["a", "b", "c", "g", "h"]


def test_a_malformed_submission_is_a_loss(url: str, writers: list[PredictionLogWriter]) -> None:
    writer = _writer(writers, url)
    assert not writer.submit(_logits(2), ["only-one"])
    assert writer.stats.rows_dropped == 1 and "1 request ids" in (writer.stats.last_error or "")


def test_close_writes_what_is_pending_and_later_submissions_are_dropped(url: str) -> None:
    writer = PredictionLogWriter(PredictionLog(url), "m", "7", T, batch_rows=1000, flush_interval=600.0)
    writer.submit(_logits(3), ["a", "b", "c"])
    stats = writer.close()
    assert (stats.rows_written, stats.rows_dropped, stats.closed) == (3, 0, True)
    assert not writer.submit(_logits(1), ["d"])
    assert writer.stats.rows_dropped == 1
    assert writer.close().rows_written == 3  # idempotent


def test_drain_writes_the_queue_and_then_every_submission_synchronously(
    url: str, writers: list[PredictionLogWriter]
) -> None:
    writer = _writer(writers, url, batch_rows=1000, flush_interval=600.0)
    writer.submit(_logits(2), ["a", "b"])
    assert writer.drain().rows_written == 2
    writer.submit(_logits(1), ["c"])
    assert writer.stats.rows_written == 3  # written before submit returned
    assert [row[0] for row in _stored(url)] == ["a", "b", "c"]


def test_bad_configuration_is_refused_at_construction(url: str) -> None:
    with pytest.raises(ValueError, match="temperature"):
        PredictionLogWriter(PredictionLog(url), "m", "7", 0.0)
    with pytest.raises(ValueError, match="batch_rows"):
        PredictionLogWriter(PredictionLog(url), "m", "7", 1.0, batch_rows=0)
    with pytest.raises(ValueError, match="model_version"):
        PredictionLogWriter(PredictionLog(url), "m", "", 1.0)
