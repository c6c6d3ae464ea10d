"""The embedded Prefect API (no ``PREFECT_API_URL``): started one at a time, never left behind.

Without an API URL, Prefect starts a temporary API server as a child process
(``prefect.server.api.server.SubprocessASGIServer``) on the database in ``PREFECT_HOME`` and
stops it at exit. Two problems on the embedded default, both seen here:

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
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["START_LOCK_FILE", "guard_ephemeral_server"]

START_LOCK_FILE = "thermostat-ephemeral-start.lock"

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


def _start_watchdog(server_pid: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(server_pid)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
    )


def guard_ephemeral_server() -> None:
    """Serialise the embedded API server's start per ``PREFECT_HOME`` and give it a watchdog.

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
        with _start_lock():
            start(self, timeout)

    def watched_run_uvicorn(self: Any) -> subprocess.Popen[Any]:
        process = run_uvicorn(self)
        self._thermostat_watchdog = _start_watchdog(process.pid)
        return process

    SubprocessASGIServer.start = guarded_start  # type: ignore[method-assign]
    SubprocessASGIServer._run_uvicorn_command = watched_run_uvicorn  # type: ignore[method-assign]
    SubprocessASGIServer._thermostat_guarded = True  # type: ignore[attr-defined]
