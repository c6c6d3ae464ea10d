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

:class:`SynchronousLogWriter` is the same contract in the caller's thread, request by request
(no queue, no thread): what a process that serves in-process uses (``flows.registry.serving``).
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
from .urls import mask_url

__all__ = ["LogWriterStats", "PredictionLogWriter", "SynchronousLogWriter"]

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


@dataclass(frozen=True, slots=True)
class _Submission:
    logits: NDArray[np.floating[Any]]
    request_ids: Sequence[str]
    groups: Sequence[str | None] | None
    time: datetime
    queued_at: float

    @property
    def n_rows(self) -> int:
        return int(self.logits.shape[0])


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
    >>> stats = writer.close()
    >>> stats.rows_written, stats.rows_dropped
    (2, 0)
    >>> with PredictionLog(f"sqlite:///{folder}/log.db") as log:
    ...     log.count_rows()
    2
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
        groups: Sequence[str | None] | None = None,
        time_served: datetime | None = None,
    ) -> bool:
        """Queue one served request's rows; True if queued, False if dropped (counted). Never raises.

        ``logits`` (n, K) are the raw logits the response was computed from (not copied: do not
        change them afterwards); ``request_ids`` one str per row; ``groups`` one str or None
        per row (or None); ``time_served`` timezone-aware (default: now). Rows are checked when
        their batch is written; a submission refused there is dropped whole.
        """
        try:
            n_rows = int(logits.shape[0])
            if len(request_ids) != n_rows or (groups is not None and len(groups) != n_rows):
                raise ValueError(f"{len(request_ids)} request ids and {'no' if groups is None else len(groups)} "
                                 f"groups for {n_rows} rows of logits")
            item = _Submission(logits, request_ids, groups, time_served or datetime.now(UTC), time.monotonic())
        except Exception as error:  # a malformed submission is a loss, never an error of the request
            n_rows = len(request_ids) if hasattr(request_ids, "__len__") else 0
            self._ledger.submitted(n_rows)
            self._ledger.lose(n_rows, f"submission refused: {type(error).__name__}: {error}")
            return False
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
            return False
        if draining:  # shutting down: the request returns once its rows are written
            self.flush(self._close_timeout)
        return True

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
            self._pending.clear()
            self._pending_rows = 0
            self._closed = True
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
                while self._pending and (not batch or rows + self._pending[0].n_rows <= self._batch_rows):
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
        ids: list[str] = []
        groups: list[str | None] = []
        times: list[datetime] = []
        for item in batch:
            ids.extend(item.request_ids)
            groups.extend(item.groups if item.groups is not None else [None] * item.n_rows)
            times.extend([item.time] * item.n_rows)
        log_predictions(self._log, self._model_name, self._model_version, self._temperature, logits, ids,
                        groups=groups, time=times)
        self._ledger.wrote(len(ids))

    def _write(self, batch: Sequence[_Submission]) -> None:
        try:
            self._append(batch)
        except ValueError as error:
            # A row was refused (duplicate request id, bad group, ...): nothing of the batch was
            # written. Retry request by request, so only the offending submission is lost.
            if len(batch) == 1:
                self._ledger.lose(batch[0].n_rows, _reason(error))
                return
            for item in batch:
                try:
                    self._append([item])
                except Exception as item_error:
                    self._ledger.lose(item.n_rows, _reason(item_error))
        except Exception as error:  # the database is unreachable, a disk is full, ...: the batch is lost
            self._ledger.lose(sum(item.n_rows for item in batch), _reason(error))


class SynchronousLogWriter:
    """Writes what one model version serves to a prediction log in the caller's thread, request by
    request; a failed write is counted and reported, never raised.

    The in-process counterpart of :class:`PredictionLogWriter` (what
    ``flows.registry.serving.ServedModel`` logs through): a request's rows are in the log when
    :meth:`write` returns True. When they cannot be written — the database is down, a request id
    is already in the log, a group is too long — :meth:`write` returns False, the rows are
    counted lost in :attr:`stats` (``rows_dropped``, ``last_error``) and a warning is logged at
    the first loss and every ``report_every``-th, exactly as the background writer does; the
    prediction is answered either way. A database that comes back is written to again: a
    connection that died with it is replaced (:meth:`PredictionLog.append`).

    Parameters
    ----------
    model_name, model_version : str
        The served version every row is logged under.
    temperature : float
        The T in force, logged with every row.
    report_every : int, default=10
        Log a warning at the first loss and then at every ``report_every``-th.

    Examples
    --------
    >>> from monitoring import PredictionLog
    >>> writer = SynchronousLogWriter("digits", "3", 1.5)
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> writer.write(log, np.array([[2.0, 0.0]]), ["a"]), writer.write(log, np.array([[0.0, 1.0]]), ["a"])
    (True, False)
    >>> writer.stats.rows_written, writer.stats.rows_dropped, log.count_rows()
    (1, 1, 1)
    """

    def __init__(self, model_name: str, model_version: str, temperature: float, *, report_every: int = 10) -> None:
        self._model_name, self._model_version, self._temperature = _check_served_version(
            model_name, model_version, temperature
        )
        self._ledger = _Ledger(self._model_name, self._model_version, report_every, threading.RLock())

    def __repr__(self) -> str:
        return f"SynchronousLogWriter({self._model_name!r} v{self._model_version}, T={self._temperature})"

    @property
    def stats(self) -> LogWriterStats:
        """The counts so far (a snapshot; nothing is ever pending)."""
        with self._ledger.lock:
            return self._ledger.stats(pending_rows=0, closed=False)

    def write(
        self,
        log: PredictionLog,
        logits: ArrayLike,
        request_ids: Sequence[str],
        *,
        groups: Sequence[str | None] | str | None = None,
        time_served: datetime | Sequence[datetime] | None = None,
        labels: ArrayLike | None = None,
    ) -> bool:
        """Write one request's rows (:func:`log_predictions`); True if written, False if lost
        (counted and reported). Never raises."""
        n_rows = len(request_ids) if isinstance(request_ids, Sequence) and not isinstance(request_ids, str) else 1
        try:
            log_predictions(log, self._model_name, self._model_version, self._temperature, logits, request_ids,
                            groups=groups, time=time_served, labels=labels)
        except Exception as error:  # a prediction never fails because of its log
            with self._ledger.lock:  # submitted and lost at once: the counts always add up
                self._ledger.submitted(n_rows)
                self._ledger.lose(n_rows, _reason(error))
            return False
        with self._ledger.lock:
            self._ledger.submitted(n_rows)
            self._ledger.wrote(n_rows)
        return True


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
