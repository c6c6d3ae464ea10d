"""A background writer that feeds the prediction log from a serving process, in batches.

A server cannot wait for a database on every request, and must never fail a prediction
because its log is down. :class:`PredictionLogWriter` takes what one model version served
(raw logits, request ids, groups, the serving time) with :meth:`~PredictionLogWriter.submit`
— a lock, an append to an in-memory queue, no I/O — and writes it to a :class:`PredictionLog`
from one background thread:

* **Batches.** A write happens when ``batch_rows`` rows are waiting, when the oldest waiting
  row is ``flush_interval`` seconds old, on :meth:`~PredictionLogWriter.flush` and on
  :meth:`~PredictionLogWriter.close` (registered with :mod:`atexit`, so a server that exits
  normally — ``SIGTERM`` to uvicorn, end of a script — writes what it still holds). A batch
  is one :func:`log_predictions` call, one transaction; rows are written in the order they
  were submitted.
* **Draining.** :meth:`~PredictionLogWriter.drain` (the served pyfunc calls it when the
  process receives ``SIGTERM``) writes what is queued and turns every later submission into a
  synchronous write: a server that finishes its last requests and then dies of the signal —
  uvicorn re-raises ``SIGTERM`` after its graceful shutdown, so :mod:`atexit` never runs —
  has logged every one of them.
* **Bounded.** At most ``max_pending_rows`` rows wait; a submission that would exceed it is
  dropped whole (counted), so a dead database costs memory up to that bound and no more.
* **Losses are counted, never raised.** :meth:`~PredictionLogWriter.submit` never raises. A
  batch the database refuses row by row (:class:`PredictionRowError`: a request id already in
  the log, an over-long group, ...) is retried submission by submission, so one bad request
  loses only its own rows; a batch that cannot be written at all (database unreachable) is
  lost whole — the writer does not retry, it counts. :attr:`~PredictionLogWriter.stats`
  holds the counts (``rows_dropped`` is the loss) and the last error; a warning with the
  counts is logged at the first loss, then at every ``report_every``-th, and at close.
* **Back after a restart.** A database that comes back is written to again: the log replaces
  a pooled connection that died with the server (:meth:`PredictionLog.append`), so the first
  batch after a restart is not lost to it.
* **Waiting, bounded.** :meth:`~PredictionLogWriter.write` is :meth:`~PredictionLogWriter.submit`
  followed by a wait of at most ``timeout`` seconds for those rows (default
  :data:`DEFAULT_SERVING_LOG_TIMEOUT_MS`): what a process that serves in-process and wants its
  rows in the log when it answers uses (``flows.registry.serving``). A database that hangs
  (a network that swallows packets, a paused server) holds the writer's thread, never the
  request: rows still queued when the time is up are withdrawn and counted lost; rows the
  thread is writing then stay pending until that write ends, written or lost. Give the log a
  ``timeout`` (:meth:`PredictionLog.with_timeout`) so that the database's driver ends such a
  write too.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .prediction_log import PredictionLog, _check_name, log_predictions
from .timeouts import DEFAULT_SERVING_LOG_TIMEOUT_MS
from .urls import mask_url, redact_credentials

__all__ = ["LogWriterStats", "PredictionLogWriter"]

_logger: Final = logging.getLogger("thermostat.serving")



@dataclass(frozen=True, slots=True)
class LogWriterStats:
    """What a :class:`PredictionLogWriter` did since it started.

    ``rows_dropped`` is the loss: rows submitted that are not in the log and never will be
    (refused by the database, database unreachable, queue full, or still pending at close).
    ``rows_submitted == rows_written + rows_dropped + pending_rows`` at any time (rows being
    written count as pending). ``loss_events`` counts the drops (one per lost batch or
    submission); ``last_error`` is the latest drop's reason.
    """

    rows_submitted: int
    rows_written: int
    rows_dropped: int
    pending_rows: int
    batches_written: int
    loss_events: int
    last_error: str | None
    closed: bool


class _Ticket:
    """What a waiting :meth:`PredictionLogWriter.write` learns of its rows: ``written`` is None
    until their write ended, then whether it wrote them."""

    __slots__ = ("written",)

    def __init__(self) -> None:
        self.written: bool | None = None


@dataclass(frozen=True, slots=True, eq=False)
class _Submission:
    logits: NDArray[np.floating[Any]]
    request_ids: Sequence[str]
    groups: Sequence[str | None] | None
    time: datetime | Sequence[datetime]
    queued_at: float
    labels: NDArray[Any] | None = None
    ticket: _Ticket | None = None

    @property
    def n_rows(self) -> int:
        return int(self.logits.shape[0])

    def times(self) -> Sequence[datetime]:
        return [self.time] * self.n_rows if isinstance(self.time, datetime) else self.time

    def settle(self, written: bool) -> None:
        if self.ticket is not None:
            self.ticket.written = written


def _submission(
    logits: Any, request_ids: Sequence[str], groups: Sequence[str | None] | str | None,
    time_served: datetime | Sequence[datetime] | None, labels: ArrayLike | None, ticket: _Ticket | None,
) -> _Submission:
    """One request's rows as queued; a ValueError when their lengths disagree (checked here so that
    a malformed request cannot make a whole batch fail: its rows are checked when written)."""
    n_rows = int(logits.shape[0])
    if isinstance(groups, str):
        groups = [groups] * n_rows
    served: datetime | Sequence[datetime] = time_served if time_served is not None else datetime.now(UTC)
    given = {"request ids": len(request_ids), "groups": None if groups is None else len(groups),
             "serving times": None if isinstance(served, datetime) else len(served)}
    label_array = None if labels is None else np.asarray(labels)
    if label_array is not None:
        given["labels"] = len(label_array) if label_array.ndim == 1 else -1
    wrong = {name: count for name, count in given.items() if count is not None and count != n_rows}
    if wrong:
        raise ValueError(f"{n_rows} rows of logits but " + ", ".join(f"{count} {name}" for name, count in wrong.items()))
    return _Submission(logits, request_ids, groups, served, time.monotonic(), label_array, ticket)


class PredictionLogWriter:
    """Writes the predictions one model version serves to ``log``, in batches, off the request path.

    Parameters
    ----------
    log : PredictionLog
        Where to write; its tables are created (idempotently) by the writer's thread before
        the first batch. The writer disposes of its engine at close.
    model_name, model_version : str
        The served version every row is logged under.
    temperature : float
        The T in force, logged with every row.
    batch_rows : int, default=256
        Write as soon as this many rows wait (also the largest batch).
    flush_interval : float, default=0.25
        ... or when the oldest waiting row is this many seconds old.
    max_pending_rows : int, default=10_000
        Rows that may wait; a submission beyond it is dropped (and counted).
    report_every : int, default=10
        Log a warning at the first loss and then at every ``report_every``-th.
    close_timeout : float, default=10.0
        How long :meth:`close` (and so interpreter exit) waits for the last batches.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from monitoring import PredictionLog
    >>> folder = tempfile.mkdtemp()
    >>> writer = PredictionLogWriter(PredictionLog(f"sqlite:///{folder}/log.db"), "digits", "3", 1.5)
    >>> writer.submit(np.array([[2.0, 0.0], [0.0, 1.0]]), ["a", "b"], ["web", None], datetime.now(UTC))
    True
    >>> writer.write(np.array([[0.0, 3.0]]), ["c"], "web", timeout=10.0)  # in the log when it returns True
    True
    >>> stats = writer.close()
    >>> stats.rows_written, stats.rows_dropped
    (3, 0)
    >>> with PredictionLog(f"sqlite:///{folder}/log.db") as log:
    ...     log.count_rows()
    3
    """

    def __init__(
        self,
        log: PredictionLog,
        model_name: str,
        model_version: str,
        temperature: float,
        *,
        batch_rows: int = 256,
        flush_interval: float = 0.25,
        max_pending_rows: int = 10_000,
        report_every: int = 10,
        close_timeout: float = 10.0,
    ) -> None:
        self._model_name, self._model_version, self._temperature = _check_served_version(
            model_name, model_version, temperature
        )
        for name, value in (("batch_rows", batch_rows), ("max_pending_rows", max_pending_rows)):
            _check_count(value, name)
        if not flush_interval > 0 or not close_timeout >= 0:
            raise ValueError(f"flush_interval must be > 0 and close_timeout >= 0; got {flush_interval}, {close_timeout}")
        self._log = log
        self._batch_rows = batch_rows
        self._flush_interval = float(flush_interval)
        self._max_pending_rows = max_pending_rows
        self._close_timeout = float(close_timeout)

        self._cond = threading.Condition()
        # The counts change under self._cond, with the queue they add up with.
        self._ledger = _Ledger(self._model_name, self._model_version, report_every, self._cond)
        self._pending: deque[_Submission] = deque()
        self._pending_rows = 0
        self._in_flight_rows = 0
        self._flush_waiters = 0
        self._closing = False
        self._closed = False
        self._draining = False
        self._created = False

        self._thread = threading.Thread(target=self._run, name="thermostat-prediction-log", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def __repr__(self) -> str:
        return (f"PredictionLogWriter({self._model_name!r} v{self._model_version}, T={self._temperature}, "
                f"{mask_url(self._log.engine.url.render_as_string(hide_password=False))})")

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def model_version(self) -> str:
        return self._model_version

    @property
    def temperature(self) -> float:
        return self._temperature

    @property
    def stats(self) -> LogWriterStats:
        """The counts so far (a snapshot)."""
        with self._cond:
            return self._ledger.stats(pending_rows=self._pending_rows + self._in_flight_rows, closed=self._closed)

    # -- the request path ------------------------------------------------------------------

    def submit(
        self,
        logits: NDArray[np.floating[Any]],
        request_ids: Sequence[str],
        groups: Sequence[str | None] | str | None = None,
        time_served: datetime | Sequence[datetime] | None = None,
        *,
        labels: ArrayLike | None = None,
    ) -> bool:
        """Queue one served request's rows; True if queued, False if dropped (counted). Never raises.

        ``logits`` (n, K) are the raw logits the response was computed from (not copied: do not
        change them afterwards); ``request_ids`` one str per row; ``groups`` one str for all rows
        or one str or None per row (or None); ``time_served`` timezone-aware, one for all rows or
        one per row (default: now); ``labels`` one int per row when already known (replayed
        traffic). Rows are checked when their batch is written; a submission refused there is
        dropped whole.
        """
        return self._enqueue(logits, request_ids, groups, time_served, labels, None) is not None

    def write(
        self,
        logits: NDArray[np.floating[Any]],
        request_ids: Sequence[str],
        groups: Sequence[str | None] | str | None = None,
        time_served: datetime | Sequence[datetime] | None = None,
        *,
        labels: ArrayLike | None = None,
        timeout: float = DEFAULT_SERVING_LOG_TIMEOUT_MS / 1000,
    ) -> bool:
        """:meth:`submit` these rows, then wait at most ``timeout`` seconds until they are written
        (the batch is written at once, not after ``flush_interval``); True if they were. Never raises.

        When the time is up, rows still queued (behind a write that hangs) are withdrawn and
        counted lost; rows being written stay pending until that write ends (written, or lost).
        """
        ticket = _Ticket()
        item = self._enqueue(logits, request_ids, groups, time_served, labels, ticket)
        if item is None:
            return False
        with self._cond:
            self._flush_waiters += 1
            self._cond.notify_all()
            try:
                self._cond.wait_for(lambda: ticket.written is not None or not self._thread.is_alive(), timeout)
            finally:
                self._flush_waiters -= 1
            if ticket.written is not None:
                return ticket.written
            withdrawn = self._withdraw(item)
        if withdrawn:
            self._ledger.lose(item.n_rows, f"not written within {timeout:g} s: the database is slow to answer or "
                                           "unreachable (an earlier write still waits for it)")
        return False

    def _enqueue(
        self, logits: Any, request_ids: Sequence[str], groups: Sequence[str | None] | str | None,
        time_served: datetime | Sequence[datetime] | None, labels: ArrayLike | None, ticket: _Ticket | None,
    ) -> _Submission | None:
        """Queue a submission; None when it was dropped (counted)."""
        try:
            item = _submission(logits, request_ids, groups, time_served, labels, ticket)
            n_rows = item.n_rows
        except Exception as error:  # a malformed submission is a loss, never an error of the request
            n_rows = len(request_ids) if hasattr(request_ids, "__len__") else 0
            self._ledger.submitted(n_rows)
            self._ledger.lose(n_rows, f"submission refused: {type(error).__name__}: {error}")
            return None
        reason: str | None = None
        with self._cond:
            self._ledger.submitted(n_rows)
            if self._closing:
                reason = "the writer is closed"
            elif self._pending_rows + n_rows > self._max_pending_rows:
                reason = (f"queue full: {self._pending_rows} rows waiting, at most {self._max_pending_rows} "
                          "(the database is slower than the traffic, or unreachable)")
            else:
                was_empty = not self._pending
                self._pending.append(item)
                self._pending_rows += n_rows
                if was_empty or self._pending_rows >= self._batch_rows:
                    self._cond.notify_all()
            draining = self._draining
        if reason is not None:
            self._ledger.lose(n_rows, reason)
            return None
        if draining and ticket is None:  # shutting down: the request returns once its rows are written
            self.flush(self._close_timeout)
        return item

    def _withdraw(self, item: _Submission) -> bool:
        """Take ``item`` off the queue (under ``self._cond``); False when it is no longer queued."""
        for index, queued in enumerate(self._pending):
            if queued is item:
                del self._pending[index]
                self._pending_rows -= item.n_rows
                return True
        return False

    # -- flushing and closing --------------------------------------------------------------

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Write everything queued now; True when nothing is pending any more (within ``timeout``)."""
        with self._cond:
            self._flush_waiters += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(
                    lambda: (not self._pending and not self._in_flight_rows) or not self._thread.is_alive(), timeout
                ) and not self._pending and not self._in_flight_rows
            finally:
                self._flush_waiters -= 1

    def drain(self, timeout: float | None = None) -> LogWriterStats:
        """Write what is queued now (waiting at most ``timeout``, default ``close_timeout``) and
        write every later submission before :meth:`submit` returns; log the counts.

        For a server about to stop: the requests it still finishes are logged even if the
        process then ends without running :mod:`atexit` (killed by the signal it was sent).
        """
        with self._cond:
            self._draining = True
        self.flush(self._close_timeout if timeout is None else timeout)
        stats = self.stats
        _logger.log(logging.WARNING if stats.rows_dropped else logging.INFO,
                    "prediction log writer of %s v%s draining (the server is stopping): %d row(s) written, %d lost, "
                    "%d pending; later predictions are written as they are served", self._model_name,
                    self._model_version, stats.rows_written, stats.rows_dropped, stats.pending_rows)
        return stats

    def close(self, timeout: float | None = None) -> LogWriterStats:
        """Write what is queued (waiting at most ``timeout``, default ``close_timeout``), stop the
        thread, release the database; log the totals. Idempotent; registered with :mod:`atexit`."""
        with self._cond:
            already = self._closed
            self._closing = True
            self._cond.notify_all()
        if already:
            return self.stats
        self._thread.join(self._close_timeout if timeout is None else timeout)
        with self._cond:
            left = self._pending_rows
            for item in self._pending:
                item.settle(False)
            self._pending.clear()
            self._pending_rows = 0
            self._closed = True
            self._cond.notify_all()
        if left:
            self._ledger.lose(left, f"still pending at close after {self._close_timeout if timeout is None else timeout} s")
        atexit.unregister(self.close)
        if not self._thread.is_alive():
            try:
                self._log.dispose()
            except Exception:  # pragma: no cover - releasing a pool must not fail shutdown
                pass
        stats = self.stats
        if stats.rows_dropped:
            _logger.warning("prediction log writer of %s v%s closed: %d row(s) written, %d row(s) LOST in %d "
                            "event(s); last error: %s", self._model_name, self._model_version, stats.rows_written,
                            stats.rows_dropped, stats.loss_events, stats.last_error)
        else:
            _logger.info("prediction log writer of %s v%s closed: %d row(s) written, none lost",
                         self._model_name, self._model_version, stats.rows_written)
        return stats

    # -- the writer thread -----------------------------------------------------------------

    def _due(self) -> bool:
        if not self._pending:
            return False
        return (self._closing or self._flush_waiters > 0 or self._pending_rows >= self._batch_rows
                or time.monotonic() - self._pending[0].queued_at >= self._flush_interval)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due():
                    if self._closing and not self._pending:
                        return
                    timeout = None
                    if self._pending:
                        timeout = max(0.0, self._flush_interval - (time.monotonic() - self._pending[0].queued_at))
                    self._cond.wait(timeout)
                batch: list[_Submission] = []
                rows = 0
                # A batch is one log_predictions call: labelled rows (replayed traffic) go apart.
                while self._pending and (not batch or (rows + self._pending[0].n_rows <= self._batch_rows and
                                                       (self._pending[0].labels is None) == (batch[0].labels is None))):
                    item = self._pending.popleft()
                    batch.append(item)
                    rows += item.n_rows
                self._pending_rows -= rows
                self._in_flight_rows = rows
            try:
                self._write(batch)
            finally:
                with self._cond:
                    self._in_flight_rows = 0
                    self._cond.notify_all()

    def _append(self, batch: Sequence[_Submission]) -> None:
        if not self._created:
            self._log.create()
            self._created = True
        logits = batch[0].logits if len(batch) == 1 else np.concatenate([item.logits for item in batch])
        labels = None if batch[0].labels is None else np.concatenate([item.labels for item in batch
                                                                      if item.labels is not None])
        ids: list[str] = []
        groups: list[str | None] = []
        times: list[datetime] = []
        for item in batch:
            ids.extend(item.request_ids)
            groups.extend(item.groups if item.groups is not None else [None] * item.n_rows)
            times.extend(item.times())
        log_predictions(self._log, self._model_name, self._model_version, self._temperature, logits, ids,
                        groups=groups, time=times, labels=labels)
        self._ledger.wrote(len(ids))
        for item in batch:
            item.settle(True)

    def _write(self, batch: Sequence[_Submission]) -> None:
        try:
            self._append(batch)
        except ValueError as error:
            # A row was refused (duplicate request id, bad group, ...): nothing of the batch was
            # written. Retry request by request, so only the offending submission is lost.
            if len(batch) == 1:
                self._lose([batch[0]], error)
                return
            for item in batch:
                try:
                    self._append([item])
                except Exception as item_error:
                    self._lose([item], item_error)
        except Exception as error:  # the database is unreachable, a disk is full, ...: the batch is lost
            self._lose(batch, error)

    def _lose(self, items: Sequence[_Submission], error: BaseException) -> None:
        self._ledger.lose(sum(item.n_rows for item in items), self._reason(error))
        for item in items:
            item.settle(False)

    def _reason(self, error: BaseException) -> str:
        """Why a write failed, without the log's credentials (a driver may quote its URL or a piece of it)."""
        return redact_credentials(_reason(error), self._log.engine.url.render_as_string(hide_password=False))


def _check_served_version(model_name: str, model_version: str, temperature: float) -> tuple[str, str, float]:
    name = _check_name(model_name, name="model_name")
    version = _check_name(model_version, name="model_version")
    if not (isinstance(temperature, (int, float)) and np.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite T > 0; got {temperature!r}")
    return name, version, float(temperature)


def _check_count(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    return value


def _reason(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


class _Ledger:
    """A writer's counts and its loss warnings (at the first loss, then every ``report_every``-th).

    Every count changes under ``lock`` (re-entrant), which the owner may share with state of its
    own that must add up with the counts (the background writer's queue).
    """

    def __init__(self, model_name: str, model_version: str, report_every: int,
                 lock: AbstractContextManager[Any]) -> None:  # fmt: skip
        self.model_name = model_name
        self.model_version = model_version
        self.report_every = _check_count(report_every, "report_every")
        self.lock = lock
        self.rows_submitted = self.rows_written = self.rows_dropped = 0
        self.batches_written = self.loss_events = 0
        self.last_error: str | None = None

    def stats(self, *, pending_rows: int, closed: bool) -> LogWriterStats:
        """A snapshot; call it holding ``lock``."""
        return LogWriterStats(
            rows_submitted=self.rows_submitted, rows_written=self.rows_written, rows_dropped=self.rows_dropped,
            pending_rows=pending_rows, batches_written=self.batches_written, loss_events=self.loss_events,
            last_error=self.last_error, closed=closed,
        )  # fmt: skip

    def submitted(self, n_rows: int) -> None:
        with self.lock:
            self.rows_submitted += n_rows

    def wrote(self, n_rows: int) -> None:
        with self.lock:
            self.rows_written += n_rows
            self.batches_written += 1

    def lose(self, n_rows: int, reason: str) -> None:
        reason = " ".join(reason.split())  # one line in the server's log (database errors span several)
        with self.lock:
            self.rows_dropped += n_rows
            self.loss_events += 1
            self.last_error = reason[:2000]
            events, dropped = self.loss_events, self.rows_dropped
        if events == 1 or events % self.report_every == 0:
            _logger.warning("prediction log of %s v%s: %d row(s) not logged (%s); %d row(s) lost in %d event(s) "
                            "since start", self.model_name, self.model_version, n_rows, reason[:500], dropped,
                            events)
