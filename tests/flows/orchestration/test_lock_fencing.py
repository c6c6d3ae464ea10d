"""The per-model lock is a fence (issue 19, items 1-3), with real processes and a real network fault.

* A holder paused (SIGSTOP) past its lease while a successor takes over must not pass its
  check again once resumed: no write of it lands after the take-over — on SQLite and PostgreSQL.
* A holder cut off from PostgreSQL (a loopback proxy that is closed) must see its check fail
  within the lease, before the waiter takes over.
* A killed holder its parent has not reaped yet (a zombie) is dead: the take-over is immediate.

The holder is ``tests/flows/orchestration/lock_holder.py``, a child process; the leases are a few seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from flows.orchestration.locks import LockLostError, model_lock, show_lock
from flows.settings import ThermostatSettings
# The lock lives in the prediction log's database: log_url is a SQLite file, then the throwaway PostgreSQL.
from tests.monitoring.conftest import log_url, postgres_server, postgres_url  # noqa: F401
from tests.tcp_proxy import TcpProxy

ROOT = Path(__file__).resolve().parents[3]
LEASE = 3.0  # the smallest THERMOSTAT_LOCK_LEASE_SECONDS allowed


def _process_state(pid: int) -> str:
    """The one-letter state of /proc/PID/stat (R, S, T stopped, Z zombie...); '' when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def _start_holder(url: str, model: str, lease: float, writes: Path, *pause_after: int) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-m", "tests.flows.orchestration.lock_holder", url, model, str(lease), str(writes),
                               *map(str, pause_after)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    line = holder.stdout.readline()
    if line.strip() != "held":
        holder.kill()
        pytest.fail(f"the holder did not take the lock: {line}{holder.communicate(timeout=30)}")
    return holder


@pytest.fixture
def model(request: pytest.FixtureRequest) -> str:
    """A model name of its own per test (the PostgreSQL database is shared by the session)."""
    return f"fence-{request.node.name}-{os.getpid()}"


@pytest.fixture
def reaped() -> Iterator[list[subprocess.Popen[str]]]:
    """Child processes to kill and reap whatever the test's outcome."""
    children: list[subprocess.Popen[str]] = []
    yield children
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGCONT)
            child.kill()
        child.communicate(timeout=30)


def test_a_paused_holder_writes_nothing_once_resumed_after_a_take_over(
    log_url: str, model: str, tmp_path: Path, reaped: list[subprocess.Popen[str]]  # noqa: F811
) -> None:
    writes = tmp_path / "writes.txt"
    holder = _start_holder(log_url, model, LEASE, writes, 3)  # stops itself (SIGSTOP) after 3 writes
    reaped.append(holder)
    _wait_for(lambda: _process_state(holder.pid) == "T", "the holder to stop")
    assert writes.read_text().count("\n") == 3
    began = time.monotonic()
    with model_lock(model, url=log_url, timeout_seconds=30, lease_seconds=LEASE, description="successor"):
        waited = time.monotonic() - began
        resumed_at = time.time()
        holder.send_signal(signal.SIGCONT)
        out, err = holder.communicate(timeout=30)
        late = [line for line in writes.read_text().splitlines() if float(line.split()[0]) >= resumed_at]
    assert waited >= LEASE / 3, f"the successor got the lock after {waited:.2f} s: the pause did not hold it"
    assert late == [], f"the paused holder passed its check {len(late)} times after the take-over"
    assert holder.returncode == 3 and out.startswith("lost: "), (holder.returncode, out, err[-2000:])


@pytest.mark.integration
def test_a_holder_cut_off_from_postgresql_loses_the_lease_before_the_waiter_takes_over(
    postgres_url: str, model: str,  # noqa: F811
) -> None:
    direct = sa.engine.make_url(postgres_url)
    assert direct.host is not None and direct.port is not None
    with TcpProxy(direct.host, direct.port) as proxy:
        through_proxy = direct.set(port=proxy.port).render_as_string(hide_password=False)
        with model_lock(model, url=through_proxy, timeout_seconds=10, lease_seconds=LEASE, description="cut") as lease:
            time.sleep(LEASE / 2)  # renewed at least once through the proxy
            lease.check()
            taken: list[float] = []

            def waiter() -> None:
                with model_lock(model, url=postgres_url, timeout_seconds=30, lease_seconds=LEASE, description="waiter"):
                    taken.append(time.monotonic())

            proxy.cut()
            cut_at = time.monotonic()
            thread = threading.Thread(target=waiter)
            thread.start()
            lost_at = None
            while lost_at is None and time.monotonic() - cut_at < 4 * LEASE:
                try:
                    lease.check()
                except LockLostError:
                    lost_at = time.monotonic()
                time.sleep(0.05)
            thread.join(timeout=60)
    assert taken, "the waiter never took the lock over"
    assert lost_at is not None, (f"the holder's check kept passing {4 * LEASE:.0f} s after its connection was cut; the "
                                 f"waiter took over after {taken[0] - cut_at:.1f} s")
    assert lost_at - cut_at <= LEASE, f"the holder noticed only {lost_at - cut_at:.1f} s after the cut"
    assert lost_at < taken[0], (f"the holder noticed {lost_at - cut_at:.1f} s after the cut, the waiter took over "
                                f"{taken[0] - cut_at:.1f} s after it")


def test_a_killed_holder_not_yet_reaped_is_taken_over_at_once(
    settings: ThermostatSettings, model: str, tmp_path: Path, reaped: list[subprocess.Popen[str]]
) -> None:
    url = settings.resolved_prediction_log_url()
    holder = _start_holder(url, model, 30.0, tmp_path / "writes.txt")
    reaped.append(holder)
    os.kill(holder.pid, signal.SIGKILL)  # and no wait(): a zombie until the test reaps it
    _wait_for(lambda: _process_state(holder.pid) == "Z", "the holder to become a zombie")
    left = show_lock(model, settings)
    assert left is not None and left.alive is False, left
    began = time.monotonic()
    with model_lock(model, url=url, timeout_seconds=5, lease_seconds=30.0):
        assert time.monotonic() - began < 1.5
    assert _process_state(holder.pid) == "Z"  # still unreaped while it was taken over
