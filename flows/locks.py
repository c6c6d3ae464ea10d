"""The per-model lock: two registrations (post-finetune or refit) of one model never interleave.

A lease row per model in the table ``thermostat_locks`` of a SQL database every worker shares:
the prediction log's database (``THERMOSTAT_PREDICTION_LOG_URL``; SQLite under the state folder
by default, PostgreSQL in production). Not Prefect's global concurrency limits: on the embedded
default their lease lives in the memory of the run's ephemeral API server, so a holder that dies
keeps ``active_slots = 1`` in the Prefect database for good. Not MLflow's tables either (they
belong to MLflow's migrations).

A lease cannot outlive its holder:

* a heartbeat thread renews it every ``lease_seconds / 3``; when the holder dies, renewal
  stops and the lease **expires** after ``lease_seconds`` (default 30 s), after which the next
  run takes it over;
* the row names the holder's machine (host name, boot id and PID namespace) and process (PID
  and its start time): a run on the **same machine** takes over at once when that process no
  longer exists (``kill -9``, ``os._exit``, a power cut of the container).

Every take-over is a compare-and-set on the holder token (``UPDATE ... WHERE holder = :seen``,
judged by its row count), so two waiting runs never both win: on SQLite the UPDATE holds the
write lock, on PostgreSQL (READ COMMITTED) the second UPDATE re-reads the row and no longer
matches. Lease times use the workers' clocks: keep them within a few seconds of each other.

Inspect or clear a model's lock::

    thermostat lock show digits
    thermostat lock clear digits     # only when its holder is known to be dead

(or ``python -m flows.locks ...``; with the same ``THERMOSTAT_*`` settings as the worker).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from flows.settings import ThermostatSettings

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "LockHolder",
    "LockLostError",
    "ModelLease",
    "clear_lock",
    "main",
    "model_lock",
    "model_lock_name",
    "show_lock",
]

DEFAULT_LEASE_SECONDS = 30.0
_POLL_SECONDS = 0.5
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
    """The lease was taken over while its holder still ran (it could not be renewed in time)."""


@dataclass(frozen=True, slots=True)
class LockHolder:
    """Who holds a lock, and whether that holder can still be alive.

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

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name, "holder": self.holder, "machine": self.machine, "pid": self.pid,
            "description": self.description, "acquired_at": self.acquired_at.isoformat(),
            "expires_at": self.expires_at.isoformat(), "expired": self.expired, "alive": self.alive,
        }

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
    """The process's start time in clock ticks since boot (Linux); '' when unknown or gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


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


def _engine(url: str) -> Engine:
    with _engines_lock:
        engine = _engines.get(url)
        if engine is None:
            kwargs: dict[str, object] = {"poolclass": sa.pool.NullPool}
            parsed = sa.engine.make_url(url)
            if parsed.get_backend_name() == "sqlite":
                kwargs["connect_args"] = {"timeout": 30}  # wait for SQLite's write lock, never fail at once
                if parsed.database not in (None, "", ":memory:"):
                    Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            engine = sa.create_engine(url, **kwargs)
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


class ModelLease:
    """A held lock; renewed by a daemon thread until :meth:`release`."""

    def __init__(self, engine: Engine, name: str, token: str, lease_seconds: float) -> None:
        self._engine, self.name, self.token, self.lease_seconds = engine, name, token, lease_seconds
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._thread = threading.Thread(target=self._renew_until_released, name=f"lease-{name}", daemon=True)
        self._thread.start()

    def _renew_until_released(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            try:
                with self._engine.begin() as connection:
                    renewed = connection.execute(
                        sa.update(_locks).where(_locks.c.name == self.name, _locks.c.holder == self.token)
                        .values(expires_at=_now() + self.lease_seconds)
                    ).rowcount
            except Exception as error:  # a blip: the next beat tries again, well before the lease ends
                _logger.warning("could not renew the lease of %s (%s: %s); retrying", self.name,
                                type(error).__name__, error)
                continue
            if renewed != 1:
                self._lost.set()
                _logger.error("the lease of %s was taken over by another run", self.name)
                return

    def check(self) -> None:
        """Raise :class:`LockLostError` if another run took the lock over."""
        if self._lost.is_set():
            raise LockLostError(f"{self.name}: the lease was taken over by another run (it could not be renewed "
                                f"within {self.lease_seconds:.0f} s); nothing more is written under it")

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
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
    lease = ModelLease(engine, name, token, lease_seconds)
    try:
        yield lease
    finally:
        lease.release()


def show_lock(model_name: str, settings: ThermostatSettings) -> LockHolder | None:
    """Who holds ``model_name``'s lock now (None: free)."""
    return _read(_engine(settings.resolved_prediction_log_url()), model_lock_name(model_name))


def clear_lock(model_name: str, settings: ThermostatSettings) -> LockHolder | None:
    """Remove ``model_name``'s lock whoever holds it; returns the holder removed (None: it was free).

    Only for a holder known to be dead: a live holder notices at its next renewal and stops
    (:class:`LockLostError`), but a write it was making may already be under way.
    """
    engine = _engine(settings.resolved_prediction_log_url())
    name = model_lock_name(model_name)
    seen = _read(engine, name)
    if seen is not None:
        with engine.begin() as connection:
            connection.execute(sa.delete(_locks).where(_locks.c.name == name, _locks.c.holder == seen.holder))
    return seen


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m flows.locks") -> int:
    """``python -m flows.locks show|clear MODEL [--json]`` (or ``thermostat lock ...``).

    Reads the ``THERMOSTAT_*`` settings from the environment, like the worker. Returns 0; 2 on
    bad arguments or settings; 3 when the database cannot be read (the message on stderr).
    """
    import json

    parser = argparse.ArgumentParser(
        prog=prog, description="Inspect or clear a model's registration lock (clear it only when its holder is dead)."
    )
    parser.add_argument("action", choices=["show", "clear"])
    parser.add_argument("model_name", metavar="MODEL")
    parser.add_argument("--json", action="store_true", help="print one JSON object: action, model_name, holder")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        settings = ThermostatSettings()
        holder = (show_lock if args.action == "show" else clear_lock)(args.model_name, settings)
    except ValueError as error:  # the settings (pydantic's ValidationError is one) or the name
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    except (sa.exc.SQLAlchemyError, OSError) as error:
        print(f"{prog}: error: the lock table could not be read: {error}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps({"action": args.action, "model_name": args.model_name,
                          "holder": None if holder is None else holder.to_dict()}))
    elif holder is None:
        print(f"{model_lock_name(args.model_name)} is free")
    else:
        print(("cleared: " if args.action == "clear" else "") + holder.summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
