"""The per-model lock: two registrations (post-finetune or refit) of one model never interleave.

A lease row per model in the table ``thermostat_locks`` of a SQL database every worker shares:
the prediction log's database (``THERMOSTAT_PREDICTION_LOG_URL``; SQLite under the state folder
by default, PostgreSQL in production). Not Prefect's global concurrency limits: on the embedded
default their lease lives in the memory of the run's ephemeral API server, so a holder that dies
keeps ``active_slots = 1`` in the Prefect database for good. Not MLflow's tables either (they
belong to MLflow's migrations).

A lease cannot outlive its holder:

* a heartbeat thread renews it every quarter of ``lease_seconds`` (default 30 s); when the
  holder dies or stops, renewal stops and the lease **expires** after ``lease_seconds``, after
  which the next run takes it over;
* the row names the holder's machine (host name, boot id and PID namespace) and process (PID
  and its start time): a run on the **same machine** takes over at once when that process no
  longer exists or is a zombie (``kill -9``, ``os._exit``, a power cut of the container).

Every take-over is a compare-and-set on the holder token (``UPDATE ... WHERE holder = :seen``,
judged by its row count), so two waiting runs never both win: on SQLite the UPDATE holds the
write lock, on PostgreSQL (READ COMMITTED) the second UPDATE re-reads the row and no longer
matches. Lease times use the workers' clocks: keep them within a few seconds of each other.

**A lock is a fence, not a flag.** MLflow cannot check a token, so the fence is a check made
immediately before each write (:meth:`ModelLease.check`, which :class:`flows.registry.adapter.MlflowRegistry`
calls before every attempt of every write once it is ``fenced`` by the lease). It passes only
while both hold:

* the holder's own clocks (monotonic and wall) say that less than two thirds of the lease have
  passed since its last successful renewal — a successor can take over only once the whole
  lease has passed, so a third of it is left as a margin for clock skew and for the write to
  land; a holder that was paused (a GC pause, a frozen VM, SIGSTOP) or cut off from the lock
  database fails the check from then on, whether or not it can reach the database;
* the lock row still names this holder (read just before; when the database cannot be read,
  the clock alone decides).

A holder that failed a check, or whose renewal found another holder, has **lost** the lease for
good: it renews it no more and every later check fails (:class:`LockLostError`), so it writes
nothing more — rollbacks included. What it left is then what a crash would have left, and the
next holder's recovery finishes or removes it. The window that remains: a write checked just
before a pause (or a slow network) that lands more than a third of the lease later.

Inspect or clear a model's lock (:mod:`flows.cli.lock_command`, with the same ``THERMOSTAT_*``
settings as the worker)::

    thermostat lock show digits
    thermostat lock clear digits     # only when its holder is known to be dead
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from calibration import JsonResult
from flows.settings import ThermostatSettings
from monitoring import mask_url

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "WRITE_BUDGET",
    "LockHolder",
    "LockLostError",
    "MissingLockStoreError",
    "ModelLease",
    "clear_lock",
    "model_lock",
    "model_lock_name",
    "show_lock",
]

DEFAULT_LEASE_SECONDS = 30.0
WRITE_BUDGET = 2.0 / 3.0
"""The share of the lease a holder may write in after its last successful renewal: the rest is
the margin a write has to land (and clocks have to disagree) before a successor may take over."""
_RENEWALS_PER_LEASE = 4  # renewed every quarter of the lease: two chances within the write budget
_RETRY_FRACTION = 1.0 / 20.0  # a failed renewal is retried after a twentieth of the lease
_POLL_SECONDS = 0.5
_CONNECT_TIMEOUT_SECONDS = 10  # a lock database that does not answer must not hang a renewal for minutes
_logger = logging.getLogger("thermostat")

_metadata = sa.MetaData()
_locks = sa.Table(
    "thermostat_locks",
    _metadata,
    sa.Column("name", sa.String(300), primary_key=True),
    sa.Column("holder", sa.String(64), nullable=False),  # a random token per acquisition
    sa.Column("machine", sa.String(300), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("process_started", sa.String(40), nullable=False),
    sa.Column("description", sa.String(500), nullable=False),
    sa.Column("acquired_at", sa.Float, nullable=False),  # seconds since the epoch, UTC
    sa.Column("expires_at", sa.Float, nullable=False),
)


def model_lock_name(model_name: str) -> str:
    return f"thermostat-register-{model_name}"


class LockLostError(RuntimeError):
    """The lease is no longer certainly this run's (taken over, cleared, or not renewed within its
    write budget): nothing more is written under it."""


class MissingLockStoreError(LookupError):
    """The lock database, or its table, does not exist (showing or clearing a lock creates nothing)."""


@dataclass(frozen=True, slots=True)
class LockHolder(JsonResult):
    """Who holds a lock, and whether that holder can still be alive (``to_dict``: its fields, times
    in ISO 8601).

    ``alive`` is False when the holder's process is known to be gone (same machine, no such
    process), None when that cannot be known from here (another machine): then only the
    lease's expiry frees it.
    """

    name: str
    holder: str
    machine: str
    pid: int
    description: str
    acquired_at: datetime
    expires_at: datetime
    expired: bool
    alive: bool | None

    @property
    def summary(self) -> str:
        state = ("expired" if self.expired else "alive" if self.alive else "holder process gone" if self.alive is False
                 else "held by another machine")
        return (f"{self.name} held by {self.description} (pid {self.pid} on {self.machine}) since "
                f"{self.acquired_at.isoformat(timespec='seconds')}, lease until "
                f"{self.expires_at.isoformat(timespec='seconds')}: {state}")


# ------------------------------------------------------------------------ this process


@lru_cache(maxsize=1)
def _machine() -> str:
    """Host name, boot id and PID namespace: two processes with equal values share PIDs."""
    parts = [socket.gethostname()]
    try:
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip())
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:  # not Linux: PIDs cannot be compared safely, only the lease's expiry counts
        parts.append("no-boot-id")
    return "/".join(parts)


def _process_started(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux); '' when unknown, gone, or dead
    but not yet reaped by its parent (a zombie runs nothing and writes nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[1].split()  # the command name, in parentheses, may hold spaces
    return "" if fields[0] in ("Z", "X") else fields[19]


def _alive(machine: str, pid: int, process_started: str) -> bool | None:
    if machine != _machine() or "no-boot-id" in machine:
        return None
    if not process_started:
        return None
    return _process_started(pid) == process_started  # '' (gone) or another start time (PID reused)


def _now() -> float:
    return time.time()


def _moment(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


# ------------------------------------------------------------------------------ storage


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def _create_engine(url: str) -> Engine:
    """A connection per use (NullPool): a renewal never reuses a connection that went bad."""
    parsed = sa.engine.make_url(url)
    connect_args: dict[str, object] = {}
    if parsed.get_backend_name() == "sqlite":
        connect_args["timeout"] = 30  # wait for SQLite's write lock, never fail at once
    elif parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        connect_args["connect_timeout"] = _CONNECT_TIMEOUT_SECONDS
    return sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args=connect_args)


def _sqlite_file(url: str) -> Path | None:
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def _engine(url: str) -> Engine:
    """The engine of a lock database, created with its table when missing (taking a lock)."""
    with _engines_lock:
        engine = _engines.get(url)
        if engine is None:
            file = _sqlite_file(url)
            if file is not None:
                file.parent.mkdir(parents=True, exist_ok=True)
            engine = _create_engine(url)
            try:
                _metadata.create_all(engine, checkfirst=True)
            except sa.exc.DatabaseError:  # another process created the table between the check and CREATE
                _metadata.create_all(engine, checkfirst=True)
            _engines[url] = engine
        return engine


def _row_holder(row: sa.Row[tuple[object, ...]] | None, now: float) -> LockHolder | None:
    if row is None:
        return None
    mapping = row._mapping
    return LockHolder(
        name=str(mapping["name"]), holder=str(mapping["holder"]), machine=str(mapping["machine"]),
        pid=int(mapping["pid"]), description=str(mapping["description"]),
        acquired_at=_moment(float(mapping["acquired_at"])), expires_at=_moment(float(mapping["expires_at"])),
        expired=float(mapping["expires_at"]) < now,
        alive=_alive(str(mapping["machine"]), int(mapping["pid"]), str(mapping["process_started"])),
    )


def _existing_store(url: str) -> Engine:
    """An engine on the lock table at ``url`` that creates nothing (showing or clearing a lock).

    Raises
    ------
    MissingLockStoreError
        Naming the URL, when the SQLite file or the lock table does not exist.
    """
    file = _sqlite_file(url)
    if file is not None and not file.is_file():
        raise MissingLockStoreError(
            f"no lock database at {mask_url(url)}: the file does not exist, so no registration has run with these "
            "settings; check THERMOSTAT_PREDICTION_LOG_URL (or THERMOSTAT_STATE_DIR), which must be the workers'"
        )
    engine = _create_engine(url)
    if not sa.inspect(engine).has_table(_locks.name):
        engine.dispose()
        raise MissingLockStoreError(
            f"no lock table {_locks.name} in {mask_url(url)}: no registration has taken a lock in this database; "
            "check THERMOSTAT_PREDICTION_LOG_URL, which must be the workers'"
        )
    return engine


def _read(engine: Engine, name: str) -> LockHolder | None:
    with engine.connect() as connection:
        row = connection.execute(sa.select(_locks).where(_locks.c.name == name)).first()
    return _row_holder(row, _now())


def _try_acquire(engine: Engine, name: str, token: str, description: str, lease_seconds: float) -> tuple[bool, LockHolder | None]:
    """One attempt: (acquired, the holder seen when not acquired, or the stale holder taken over)."""
    now = _now()
    pid = os.getpid()
    values = {
        "holder": token, "machine": _machine(), "pid": pid, "process_started": _process_started(pid),
        "description": description[:500], "acquired_at": now, "expires_at": now + lease_seconds,
    }
    try:
        with engine.begin() as connection:
            connection.execute(sa.insert(_locks).values(name=name, **values))
        return True, None
    except IntegrityError:
        pass  # held (or left behind): look at the holder
    seen = _read(engine, name)
    if seen is None:  # released in between: try again at once
        return _try_acquire(engine, name, token, description, lease_seconds)
    if not (seen.expired or seen.alive is False):
        return False, seen
    # Compare-and-set on the holder token: of several waiters, exactly one takes it over. A lease
    # taken over for having expired must still be expired when the row is written: a holder that
    # renewed it in between keeps it (its heartbeat moves expires_at past now).
    condition = [_locks.c.name == name, _locks.c.holder == seen.holder]
    if seen.alive is not False:
        condition.append(_locks.c.expires_at < now)
    with engine.begin() as connection:
        taken = connection.execute(sa.update(_locks).where(*condition).values(**values)).rowcount
    return (taken == 1), seen


@dataclass(frozen=True, slots=True)
class _Renewal:
    """When the lease was last written, by this holder's clocks: taken just *before* the write,
    so that the lease end the database holds (``wall + lease_seconds``) is never earlier."""

    monotonic: float
    wall: float

    @classmethod
    def now(cls) -> _Renewal:
        return cls(monotonic=time.monotonic(), wall=_now())

    def elapsed(self) -> float:
        """Seconds since, by the monotonic clock or the wall clock, whichever says more (the
        monotonic clock may stand still while a machine is suspended; the wall clock may jump)."""
        return max(time.monotonic() - self.monotonic, _now() - self.wall)


class ModelLease:
    """A held lock and the fence of every write made under it.

    A daemon thread renews the lease every quarter of ``lease_seconds`` until :meth:`release`.
    :meth:`check`, called immediately before each write, passes only while this run is certainly
    the holder (see the module docstring); once it has failed, it fails for good.
    """

    def __init__(self, engine: Engine, name: str, token: str, lease_seconds: float, renewed: _Renewal) -> None:
        self._engine, self.name, self.token, self.lease_seconds = engine, name, token, lease_seconds
        self._state = threading.Lock()  # guards _renewed and _lost, shared with the heartbeat thread
        self.renewing = threading.Lock()  # held while a renewal writes (a caller may wait for none to be under way)
        self._renewed = renewed
        self._lost: str | None = None  # why the lease was lost; never reset
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_until_released, name=f"lease-{name}", daemon=True)
        self._thread.start()

    # A lease is a handle on a held lock, never copied: Prefect's transaction deep-copies the
    # values it stores, and the rollback hooks must check this very lease.
    def __copy__(self) -> ModelLease:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> ModelLease:
        return self

    @property
    def write_budget(self) -> float:
        """Seconds after its last renewal during which this holder may still write."""
        return self.lease_seconds * WRITE_BUDGET

    def _lose(self, reason: str) -> None:
        with self._state:
            first = self._lost is None
            if first:
                self._lost = reason
        self._stop.set()  # renew no more
        if first and reason != "released":
            _logger.error("%s: lease lost (%s): nothing more is written under it", self.name, reason)

    def _raise_if_lost(self) -> None:
        with self._state:
            lost, elapsed = self._lost, self._renewed.elapsed()
        if lost is None and elapsed >= self.write_budget:
            self._lose(f"not renewed for {elapsed:.1f} s, past its write budget of {self.write_budget:.1f} s (paused, "
                       f"or cut off from the lock database; another run may take the lock over "
                       f"{self.lease_seconds:.0f} s after the last renewal)")
        with self._state:
            lost = self._lost
        if lost is not None:
            raise LockLostError(f"{self.name}: the lease is lost: {lost}; nothing more is written under it (the "
                                "next run of the model finishes or removes what this run left)")

    def _renew_until_released(self) -> None:
        wait = self.lease_seconds / _RENEWALS_PER_LEASE
        while not self._stop.wait(wait):
            try:
                self._raise_if_lost()  # lost, or past the write budget: renew no more
            except LockLostError:
                return
            attempt = _Renewal.now()
            try:
                with self.renewing, self._engine.begin() as connection:
                    renewed = connection.execute(
                        sa.update(_locks).where(_locks.c.name == self.name, _locks.c.holder == self.token)
                        .values(expires_at=attempt.wall + self.lease_seconds)
                    ).rowcount
            except Exception as error:  # a blip: retried soon; the write budget runs on meanwhile
                wait = self.lease_seconds * _RETRY_FRACTION
                _logger.warning("could not renew the lease of %s (%s: %s); retrying in %.1f s (writes under it stop "
                                "%.1f s after its last renewal)", self.name, type(error).__name__, error, wait,
                                self.write_budget)
                continue
            if renewed != 1:
                self._lose("its renewal found the row no longer its own (taken over by another run, or cleared "
                           "by hand)")
                return
            with self._state:
                if self._lost is None:
                    self._renewed = attempt
            wait = self.lease_seconds / _RENEWALS_PER_LEASE

    def check(self) -> None:
        """Raise :class:`LockLostError` unless this run certainly still holds the lock; call it
        immediately before each write made under the lock (the fence of
        :meth:`flows.registry.adapter.MlflowRegistry.fenced`)."""
        self._raise_if_lost()
        try:
            with self._engine.connect() as connection:
                row = connection.execute(
                    sa.select(_locks.c.holder, _locks.c.description).where(_locks.c.name == self.name)
                ).first()
        except Exception as error:  # the database unreachable: the write budget alone decides (below)
            _logger.debug("could not read the lock row of %s (%s: %s)", self.name, type(error).__name__, error)
        else:
            if row is None:
                self._lose("its row is gone (cleared by hand, or taken over and released)")
            elif row.holder != self.token:
                self._lose(f"taken over by {row.description}")
        self._raise_if_lost()  # the clock again, right before the write

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
        self._lose("released")
        try:
            with self._engine.begin() as connection:
                connection.execute(sa.delete(_locks).where(_locks.c.name == self.name, _locks.c.holder == self.token))
        except Exception as error:  # the lease then expires by itself
            _logger.warning("could not release %s (%s: %s); it expires within %.0f s", self.name,
                            type(error).__name__, error, self.lease_seconds)


@contextmanager
def model_lock(
    model_name: str, *, url: str, timeout_seconds: float, lease_seconds: float = DEFAULT_LEASE_SECONDS,
    description: str = "",
) -> Iterator[ModelLease]:
    """Hold ``model_name``'s lock for the block; wait at most ``timeout_seconds`` for it.

    ``url`` is the SQLAlchemy URL of the shared database (the prediction log's). A lock left by
    a dead holder is taken over as soon as that is certain (same machine, process gone) or its
    lease has expired.

    Raises
    ------
    TimeoutError
        Naming the holder, when the lock is still held after ``timeout_seconds``.
    """
    if lease_seconds <= 0:
        raise ValueError(f"lease_seconds must be > 0; got {lease_seconds}")
    engine = _engine(url)
    name, token = model_lock_name(model_name), uuid.uuid4().hex
    who = description or f"{Path(sys.argv[0]).name or 'python'} pid {os.getpid()}"
    deadline = time.monotonic() + timeout_seconds
    while True:
        attempt = _Renewal.now()
        acquired, seen = _try_acquire(engine, name, token, who, lease_seconds)
        if acquired:
            if seen is not None:
                reason = "its process is gone" if seen.alive is False else "its lease expired"
                _logger.warning("took over %s from %s: %s", name, seen.summary, reason)
            break
        if time.monotonic() >= deadline:
            held = "" if seen is None else f": {seen.summary}"
            raise TimeoutError(
                f"{name} is still held after waiting {timeout_seconds:.1f} s (THERMOSTAT_LOCK_TIMEOUT_SECONDS){held}; "
                f"if that holder is dead, its lease expires by itself, or run `thermostat lock clear {model_name}`"
            )
        time.sleep(_POLL_SECONDS)
    lease = ModelLease(engine, name, token, lease_seconds, attempt)
    try:
        yield lease
    finally:
        lease.release()


def show_lock(model_name: str, settings: ThermostatSettings) -> LockHolder | None:
    """Who holds ``model_name``'s lock now (None: free). Creates nothing.

    Raises
    ------
    MissingLockStoreError
        When the lock database or its table does not exist (naming the URL).
    """
    engine = _existing_store(settings.resolved_prediction_log_url())
    try:
        return _read(engine, model_lock_name(model_name))
    finally:
        engine.dispose()


def clear_lock(model_name: str, settings: ThermostatSettings) -> LockHolder | None:
    """Remove ``model_name``'s lock whoever holds it; returns the holder removed (None: it was free).

    Only for a holder known to be dead: a live holder's next check fails (:class:`LockLostError`)
    and it writes nothing more, but a write it had already checked may still land.

    Raises
    ------
    MissingLockStoreError
        When the lock database or its table does not exist (naming the URL); nothing is created.
    """
    engine = _existing_store(settings.resolved_prediction_log_url())
    name = model_lock_name(model_name)
    try:
        seen = _read(engine, name)
        if seen is not None:
            with engine.begin() as connection:
                connection.execute(sa.delete(_locks).where(_locks.c.name == name, _locks.c.holder == seen.holder))
        return seen
    finally:
        engine.dispose()
