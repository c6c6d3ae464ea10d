"""The embedded Prefect API (no ``PREFECT_API_URL``): started one at a time, waited for
patiently, never left behind.

Without an API URL, Prefect starts a temporary API server as a child process
(``prefect.server.api.server.SubprocessASGIServer``) on the database in ``PREFECT_HOME`` and
stops it at exit. Three problems on the embedded default, all seen here:

* Prefect gives up on the start after 20 s (``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``);
  a first start, which creates and migrates the database, takes longer than that when both
  cores are busy ("Timed out while attempting to connect to ephemeral Prefect API server").
  So the start waits up to ``THERMOSTAT_PREFECT_STARTUP_TIMEOUT_SECONDS`` (default 180 s,
  :class:`~flows.settings.ThermostatSettings`), says on stderr that it is waiting after a
  few seconds, and a start that still fails names that setting;

* two runs starting together on a fresh ``PREFECT_HOME`` both run the schema migration, and one
  dies (``index ... already exists``, then a timed-out start). So the start — which returns only
  once the server answers, i.e. after its migration — is serialised by an OS file lock
  (``fcntl.flock``) on ``PREFECT_HOME/thermostat-ephemeral-start.lock``; the kernel drops the
  lock when its holder dies, so it cannot outlive it;
* a run killed with ``kill -9`` (or ending in ``os._exit``) never runs its exit handlers, and
  the server stays up as an orphan. So each server gets a watchdog: a tiny process (standard
  library only) that polls its parent and stops the server (SIGTERM, then SIGKILL) when the
  parent is gone, then exits.

:func:`guard_ephemeral_server` wraps the two methods of ``SubprocessASGIServer`` that do this
(Prefect 3.9.1, pinned); it is installed when :mod:`flows.tasks` is imported, so every flow
of Thermostat — and the demo and the CLI — runs with it. A test checks that both methods still
exist, so a Prefect upgrade that renames them fails loudly.

The start-up limit is read from the environment when the server starts, not passed in by an
entry point: Prefect starts the server before any flow body (and so before any
``settings`` parameter) runs.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["START_LOCK_FILE", "STARTUP_TIMEOUT_SETTING", "guard_ephemeral_server"]

START_LOCK_FILE = "thermostat-ephemeral-start.lock"
STARTUP_TIMEOUT_SETTING = "THERMOSTAT_PREFECT_STARTUP_TIMEOUT_SECONDS"
"""The variable of :attr:`ThermostatSettings.prefect_startup_timeout_seconds`, named in messages."""
# After this long the start says that it is waiting, then again every _NOTICE_EVERY seconds.
_NOTICE_AFTER, _NOTICE_EVERY = 5.0, 30.0

# Standard library only, so it starts in milliseconds; SIGINT is ignored so that a Ctrl-C to
# the whole process group still leaves it able to clean up.
_WATCHDOG = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
parent, server = int(sys.argv[1]), int(sys.argv[2])
def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
while os.getppid() == parent:
    if gone(server):
        sys.exit(0)
    time.sleep(0.5)
for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
    try:
        os.kill(server, sig)
    except ProcessLookupError:
        sys.exit(0)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not gone(server):
        time.sleep(0.1)
"""


def _prefect_home() -> Path:
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).expanduser()


@contextmanager
def _start_lock() -> Iterator[None]:
    home = _prefect_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / START_LOCK_FILE, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released by the kernel if this process dies
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _startup_timeout() -> int:
    from flows.settings import ThermostatSettings

    return ThermostatSettings().prefect_startup_timeout_seconds


@contextmanager
def _waiting_notice(limit: int) -> Iterator[None]:
    """Say on stderr, after a few seconds and then now and again, that the start is being waited for."""
    done, started = threading.Event(), time.monotonic()

    def notice() -> None:
        wait = _NOTICE_AFTER
        while not done.wait(wait):
            print(f"thermostat: waiting for Prefect's temporary API server to start ({time.monotonic() - started:.0f} s "
                  f"so far; a first start creates its database in PREFECT_HOME; waiting up to {limit} s, "
                  f"{STARTUP_TIMEOUT_SETTING})", file=sys.stderr, flush=True)
            wait = _NOTICE_EVERY

    thread = threading.Thread(target=notice, name="thermostat-prefect-start", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _start_failed(error: RuntimeError, limit: int) -> RuntimeError:
    return RuntimeError(
        f"Prefect's temporary API server (started because PREFECT_API_URL is not set) did not answer within "
        f"{limit} s. A first start creates and migrates its database in PREFECT_HOME, which takes longer on a "
        f"busy machine: set {STARTUP_TIMEOUT_SETTING} higher (now {limit}), or run `prefect server start` and "
        f"set PREFECT_API_URL. Prefect said: {error}"
    )


def _start_watchdog(server_pid: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(server_pid)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
    )


def guard_ephemeral_server() -> None:
    """Serialise the embedded API server's start per ``PREFECT_HOME``, wait for it up to
    ``THERMOSTAT_PREFECT_STARTUP_TIMEOUT_SECONDS`` (unless the caller gives a timeout) and give
    it a watchdog.

    Idempotent. Without an embedded server (``PREFECT_API_URL`` set) nothing changes.
    """
    from prefect.server.api.server import SubprocessASGIServer

    if getattr(SubprocessASGIServer, "_thermostat_guarded", False):
        return
    start = SubprocessASGIServer.start
    run_uvicorn = SubprocessASGIServer._run_uvicorn_command

    def guarded_start(self: Any, timeout: int | None = None) -> None:
        if self.running:
            return
        limit = _startup_timeout() if timeout is None else timeout
        with _waiting_notice(limit), _start_lock():
            try:
                start(self, limit)
            except RuntimeError as error:
                if "Timed out while attempting to connect" not in str(error):
                    raise
                raise _start_failed(error, limit) from error

    def watched_run_uvicorn(self: Any) -> subprocess.Popen[Any]:
        process = run_uvicorn(self)
        self._thermostat_watchdog = _start_watchdog(process.pid)
        return process

    SubprocessASGIServer.start = guarded_start  # type: ignore[method-assign]
    SubprocessASGIServer._run_uvicorn_command = watched_run_uvicorn  # type: ignore[method-assign]
    SubprocessASGIServer._thermostat_guarded = True  # type: ignore[attr-defined]
