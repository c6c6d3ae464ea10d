"""Server processes a test starts: started, waited for until they answer, stopped.

``running`` is the one way a test starts a server (``mlflow server``, ``prefect server start``,
``thermostat dashboard``, ``mlflow models serve``, Prometheus, a Dask scheduler): it starts the
command with its output in a log file, waits until it answers (an HTTP URL, or any check),
fails with the end of the log when the process exits or the wait times out, and stops the
process (or its whole process group) at the end. A test that starts a server must be marked
``integration``: ``running`` refuses otherwise (the fast tier, ``make test-fast``, starts none).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

# Set by tests/conftest.py before each test runs: whether that test is marked `integration`.
_CURRENT: dict[str, object] = {"nodeid": None, "integration": True}


def note_current_test(nodeid: str, integration: bool) -> None:
    """Record the test about to run (tests/conftest.py's ``pytest_runtest_setup``)."""
    _CURRENT.update(nodeid=nodeid, integration=integration)


def wait_until(check: Callable[[], T], what: str, *, timeout: float = 90.0, interval: float = 0.3,
               process: subprocess.Popen[bytes] | None = None, log: Path | None = None) -> T:
    """Return ``check()``'s first truthy result, asked every ``interval`` seconds; fail naming
    ``what``, the last error (``OSError``, ``ValueError``, ``KeyError``) and the end of ``log``
    once ``process`` has exited or ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            found = check()
            if found:
                return found
        except (OSError, ValueError, KeyError) as error:
            last = error
        if process is not None and process.poll() is not None:
            reason = f"the process exited with {process.returncode}"
            break
        if time.monotonic() > deadline:
            reason = f"not within {timeout:.0f} s"
            break
        time.sleep(interval)
    output = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
    pytest.fail(f"{what}: {reason} (last error: {last!r})\n{output}")


def answers(url: str, *, any_status: bool = False) -> bool:
    """Whether ``url`` answers 200 now (with ``any_status``: any HTTP status, e.g. a 503 that says why)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return bool(answer.status == 200)
    except urllib.error.HTTPError:
        return any_status
    except OSError:
        return False


def wait_for_http(url: str, server: subprocess.Popen[bytes], log: Path, what: str, *, any_status: bool = False,
                  timeout: float = 90.0) -> None:
    """Return once ``url`` answers 200 (with ``any_status``: any HTTP status); fail with the end
    of ``log`` when ``server`` exits or ``timeout`` seconds pass first."""
    wait_until(lambda: answers(url, any_status=any_status), f"{what} did not start", timeout=timeout,
               process=server, log=log)


def _group_alive(leader: subprocess.Popen[bytes]) -> bool:
    """Whether any process of the group ``leader`` leads still runs (the leader reaped first: an
    exited but unreaped leader would keep the group alive as a zombie)."""
    leader.poll()
    try:
        os.killpg(leader.pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_process(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, grace: float = 20.0, *,
                 group: bool = False) -> bool:
    """Send ``sig`` (to the whole process group ``process`` leads, with ``group``), wait up to
    ``grace`` seconds for it (every process of the group) to end, then kill. Whether it ended
    within ``grace`` (or had already)."""
    if not group:
        if process.poll() is not None:
            return True
        process.send_signal(sig)
        try:
            process.wait(timeout=grace)
            return True
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
            return False
    if not _group_alive(process):
        return True
    os.killpg(process.pid, sig)
    deadline = time.monotonic() + grace
    while _group_alive(process):
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
            return False
        time.sleep(0.1)
    process.wait(timeout=10)
    return True


@contextmanager
def running(command: Sequence[object], *, log: Path, what: str,
            ready: str | Callable[[], object] | None = None, any_status: bool = False, timeout: float = 90.0,
            env: Mapping[str, str] | None = None, cwd: Path | None = None, group: bool = False,
            stop_signal: int = signal.SIGTERM, grace: float = 20.0) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``command`` (its parts as ``str``; stdout and stderr to ``log``), wait until it is ``ready``, yield the
    process, stop it at the end (``stop_signal``, then SIGKILL after ``grace`` seconds).

    ``ready`` is a URL that must answer 200 (any status with ``any_status``) or a check that
    must return something true; ``None`` waits for nothing. ``group`` starts the command in its
    own session and stops its whole process group (a server that starts workers of its own).
    """
    if not _CURRENT["integration"]:
        pytest.fail(f"{_CURRENT['nodeid']} starts a server ({what}) but is not marked integration; "
                    "mark it @pytest.mark.integration (the fast tier, make test-fast, starts no server)")
    with log.open("wb") as output:
        process = subprocess.Popen([str(part) for part in command], env=None if env is None else dict(env), cwd=cwd,
                                   stdout=output, stderr=subprocess.STDOUT, start_new_session=group)
    try:
        if isinstance(ready, str):
            url = ready
            wait_until(lambda: answers(url, any_status=any_status), f"{what} did not start", timeout=timeout,
                       process=process, log=log)
        elif ready is not None:
            wait_until(ready, f"{what} did not start", timeout=timeout, process=process, log=log)
        yield process
    finally:
        stop_process(process, stop_signal, grace, group=group)
