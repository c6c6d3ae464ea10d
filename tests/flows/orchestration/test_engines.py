"""The engines: option checks and the lazy Dask import without a cluster, then a real local
Dask cluster of two worker processes (started once for the module): order, errors, connecting
by address, a worker killed in the middle of a map, and Prefect's DaskTaskRunner. Last, a real
``dask scheduler`` whose only worker is killed: the map, ``thermostat fit`` and the flows' tasks
stop after the timeout, naming the cause, instead of waiting for a worker forever.

The functions the workers run are in tests/flows/orchestration/dask_work.py, which they import by name.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from calibration import LOCAL_ENGINE, ScoredSet, write_scored_set
from flows.orchestration.cluster import TaskEngine
from flows.orchestration.engines import MISSING_EXTRA, DaskEngine, dask_task_runner, engine_from_options
from tests.flows.orchestration.dask_work import listening_hosts, refuse_negative, slow_square, square_late_first, with_pid
from tests.support.ports import free_port
from tests.support.servers import running

ROOT = Path(__file__).resolve().parents[3]


# --------------------------------------------------------------------------- no cluster


def test_the_module_and_the_local_engine_load_neither_dask_nor_prefect() -> None:
    code = (
        "import sys\n"
        "from flows.orchestration.engines import engine_from_options\n"
        "with engine_from_options('local', None, None) as engine:\n"
        "    assert engine.map(abs, [-1, 2]) == [1, 2], engine\n"
        "print(' '.join(m for m in ('dask', 'distributed', 'prefect', 'prefect_dask') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split() == []


def test_the_local_engine_is_the_cores() -> None:
    with engine_from_options("local", None, None) as engine:
        assert engine is LOCAL_ENGINE


@pytest.mark.parametrize(
    ("engine", "address", "n_workers", "message"),
    [
        ("spark", None, None, r"^--engine: unknown engine 'spark'; choose local or dask$"),
        ("Dask", None, None, r"^--engine: unknown engine 'Dask'"),
        ("dask", None, 0, r"^--dask-workers: 0 workers; give at least 1$"),
        ("dask", None, -3, r"^--dask-workers: -3 workers"),
        ("dask", "127.0.0.1:8786", None, r"^--dask-address: '127.0.0.1:8786' is not a Dask scheduler address; give tcp://HOST:PORT"),
        ("dask", "http://127.0.0.1:8787", None, r"^--dask-address: 'http://127.0.0.1:8787' is not"),
        ("dask", "tcp://127.0.0.1", None, r"^--dask-address: 'tcp://127.0.0.1' is not"),
        ("dask", "tcp://127.0.0.1:0", None, r"^--dask-address: 'tcp://127.0.0.1:0' is not"),
        ("dask", "tcp://127.0.0.1:65536", None, r"^--dask-address: 'tcp://127.0.0.1:65536' is not"),
        ("dask", "tcp://127.0.0.1:8786/x", None, r"^--dask-address: 'tcp://127.0.0.1:8786/x' is not"),
        ("dask", "tcp://user@host:8786", None, r"^--dask-address: 'tcp://user@host:8786' is not"),
        ("dask", " tcp://host:8786", None, r"^--dask-address: ' tcp://host:8786' is not"),
        ("dask", "tcp://127.0.0.1:8786", 4, r"^--dask-workers sizes the temporary cluster; with --dask-address"),
        ("local", "tcp://127.0.0.1:8786", None, r"^--dask-address and --dask-workers apply to --engine dask only$"),
        ("local", None, 2, r"^--dask-address and --dask-workers apply to --engine dask only$"),
    ],
)
def test_bad_options_are_refused_in_their_own_words(
    engine: str, address: str | None, n_workers: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        engine_from_options(engine, address, n_workers)


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), -1.0, 0.0, 86_400.5, 1e300])
@pytest.mark.parametrize(("engine", "address"), [("dask", "tcp://127.0.0.1:8786"), ("dask", None), ("local", None)])
def test_a_timeout_that_is_not_a_finite_positive_number_of_seconds_is_refused_naming_the_flag(
    engine: str, address: str | None, timeout: float
) -> None:
    with pytest.raises(ValueError, match=rf"^--dask-timeout: {re.escape(f'{timeout:g}')} is not a number of seconds in \(0, 86400\]"):
        engine_from_options(engine, address, None, timeout=timeout)


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tls://scheduler.example.org:8786", "tcp://[::1]:1"])
def test_good_addresses_give_a_dask_engine_that_has_not_connected_yet(address: str) -> None:
    engine = engine_from_options("dask", address, None)
    assert isinstance(engine, DaskEngine)
    assert repr(engine) == f"DaskEngine({address}, not running)"
    with pytest.raises(RuntimeError, match=r"use it in a `with` block"):
        engine.client  # the property refuses until the engine runs


def test_dask_engine_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"^n_workers must be at least 1, not 0$"):
        DaskEngine(n_workers=0)
    for timeout in (0, -1.0, float("inf"), float("nan"), 86_401, True):
        with pytest.raises(ValueError, match=r"^timeout: .* is not a number of seconds in \(0, 86400\]; give a finite "
                                             r"wait \(default 30\)$"):
            DaskEngine("tcp://127.0.0.1:8786", timeout=timeout)


def test_without_the_extra_the_dask_engine_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MISSING_EXTRA == "the Dask engine needs the 'distributed' extra: pip install 'thermostat[distributed]'"
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed raises ImportError
    monkeypatch.setitem(sys.modules, "prefect_dask", None)
    with pytest.raises(RuntimeError, match=r"^the Dask engine needs the 'distributed' extra: pip install 'thermostat\[distributed\]'$"):
        engine_from_options("dask", None, None)
    with pytest.raises(RuntimeError, match=r"needs the 'distributed' extra"):
        dask_task_runner(None, 2)
    with engine_from_options("local", None, None) as engine:  # the local engine does not need it
        assert engine.map(abs, [-1]) == [1]


def test_the_task_runner_keeps_a_temporary_cluster_on_the_loopback_interface() -> None:
    local = dask_task_runner(None, 3)
    assert local.address is None
    assert local.cluster_class == "distributed.LocalCluster"
    assert local.cluster_kwargs == {
        "n_workers": 3, "threads_per_worker": 1, "processes": True, "host": "127.0.0.1", "dashboard_address": None,
        "scheduler_kwargs": {"dashboard_address": "127.0.0.1:0"}, "silence_logs": logging.WARNING,
    }
    remote = dask_task_runner("tcp://127.0.0.1:8786", 2)
    assert (remote.address, remote.cluster_class, remote.cluster_kwargs) == ("tcp://127.0.0.1:8786", None, {})
    with pytest.raises(ValueError, match=r"^--dask-workers: 0 workers"):
        dask_task_runner(None, 0)
    with pytest.raises(ValueError, match=r"^--dask-address: 'localhost' is not"):
        dask_task_runner("localhost", 2)


def test_nothing_listening_is_a_clear_error_within_the_timeout() -> None:
    address = f"tcp://127.0.0.1:{free_port()}"
    began = time.monotonic()
    with pytest.raises(ConnectionError, match=rf"^no Dask scheduler answered at {re.escape(address)} within 1 s$"):
        with DaskEngine(address, timeout=1):
            pass
    assert time.monotonic() - began < 5


def test_a_server_that_never_answers_is_a_clear_error_within_the_timeout() -> None:
    """An open port that is not a scheduler (the dashboard's, say) must not hang the connection."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel accepts connections; nobody ever answers them
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        began = time.monotonic()
        with pytest.raises(ConnectionError, match=rf"^no Dask scheduler answered at {re.escape(address)} within 1 s$"):
            with DaskEngine(address, timeout=1):
                pass
        assert time.monotonic() - began < 5


# --------------------------------------------------------------------------- a real cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskEngine]:
    """A temporary local cluster of two single-threaded worker processes, for the module."""
    with DaskEngine(n_workers=2) as engine:
        yield engine


@pytest.mark.integration
@pytest.mark.slow
def test_the_cluster_has_two_workers_and_listens_on_the_loopback_interface_only(cluster: DaskEngine) -> None:
    assert (cluster.name, cluster.n_workers) == ("dask", 2)
    assert cluster.address.startswith("tcp://127.0.0.1:")
    workers = cluster.client.scheduler_info()["workers"]
    assert len(workers) == 2
    assert all(address.startswith("tcp://127.0.0.1:") for address in workers)
    # The scheduler, its HTTP server and the nannies run in this process; the workers in theirs.
    assert listening_hosts() == {"127.0.0.1"}
    assert list(cluster.client.run(listening_hosts).values()) == [{"127.0.0.1"}, {"127.0.0.1"}]
    assert repr(cluster) == "DaskEngine(a local cluster of 2 workers, running)"


@pytest.mark.integration
@pytest.mark.slow
def test_map_returns_the_results_in_the_items_order(cluster: DaskEngine) -> None:
    items = list(range(20))
    assert cluster.map(square_late_first, items) == [item * item for item in items]
    assert cluster.map(square_late_first, []) == []


@pytest.mark.integration
@pytest.mark.slow
def test_an_exception_in_fn_surfaces_with_its_type_and_message(cluster: DaskEngine) -> None:
    with pytest.raises(ValueError, match=r"^item -2 is negative$"):
        cluster.map(refuse_negative, [1, -2, 3])
    assert cluster.map(refuse_negative, [1, 2]) == [1, 2]  # the engine goes on working


@pytest.mark.integration
@pytest.mark.slow
def test_connecting_by_address_uses_that_clusters_workers_and_leaves_it_running(cluster: DaskEngine) -> None:
    with engine_from_options("dask", cluster.address, None) as remote:
        assert isinstance(remote, DaskEngine)
        assert (remote.address, remote.n_workers) == (cluster.address, 2)
        assert remote.client is not cluster.client
        assert remote.map(refuse_negative, [5, 6]) == [5, 6]
    assert cluster.map(refuse_negative, [7]) == [7]


@pytest.mark.integration
@pytest.mark.slow
def test_a_worker_killed_in_the_middle_of_a_map_is_survived(cluster: DaskEngine) -> None:
    client = cluster.client
    before = client.run(os.getpid)
    victim = next(iter(before.values()))
    killed_at: list[float] = []

    def kill() -> None:
        os.kill(victim, signal.SIGKILL)
        killed_at.append(time.monotonic())

    items = list(range(12))
    killer = threading.Timer(1.0, kill)
    killer.start()
    try:
        results = cluster.map(slow_square, items)  # 12 x 0.5 s on 2 workers: 3 s at best
    finally:
        killer.join()
    finished_at = time.monotonic()
    assert results == [item * item for item in items]
    assert killed_at and killed_at[0] < finished_at - 0.5, "the worker was not killed while the map ran"
    # The nanny replaces the dead worker: the cluster is whole again for whatever comes next.
    client.wait_for_workers(2, timeout=30)
    after = set(client.run(os.getpid).values())
    assert victim not in after and len(after) == 2


@pytest.fixture(scope="module")
def prefect_api() -> Iterator[None]:
    """A temporary Prefect API for the module's flows."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.mark.integration
@pytest.mark.slow
def test_a_prefect_flow_maps_a_task_over_a_temporary_dask_cluster(prefect_api: None) -> None:
    from prefect import flow, task

    pid_task = task(with_pid)

    @flow
    def run_on_dask(items: list[int]) -> list[tuple[int, int]]:
        return [future.result() for future in pid_task.map(items)]

    results = run_on_dask.with_options(task_runner=dask_task_runner(None, 2))(items=[3, 1, 4, 1])
    assert [item for item, _ in results] == [3, 1, 4, 1]
    assert os.getpid() not in {pid for _, pid in results}, "the tasks ran in this process, not on Dask workers"


# --------------------------------------------------------------------------- a cluster whose workers die (issue 19)


@dataclass(frozen=True)
class RemoteCluster:
    """A real ``dask scheduler`` and one ``dask worker``, each its own process on loopback."""

    address: str
    worker: subprocess.Popen[bytes]

    def kill_the_worker(self) -> None:
        """SIGKILL the worker, then wait until the scheduler no longer lists it."""
        from distributed import Client

        self.worker.kill()
        self.worker.wait(timeout=30)
        with Client(self.address, set_as_default=False) as client:  # type: ignore[no-untyped-call]
            deadline = time.monotonic() + 30
            while client.nthreads():
                assert time.monotonic() < deadline, "the scheduler still lists the killed worker"
                time.sleep(0.1)


@pytest.fixture
def remote_cluster(tmp_path: Path) -> Iterator[RemoteCluster]:
    """A scheduler with one worker and no nanny (a killed worker stays dead: all the workers are gone).

    Both get the repository on their path: the scheduler and the worker unpickle the functions of
    tests/flows/orchestration/dask_work.py by name."""
    from distributed import Client

    address = f"tcp://127.0.0.1:{free_port()}"
    dask = Path(sys.executable).parent / "dask"
    env = os.environ | {"PYTHONPATH": str(ROOT)}

    def one_worker() -> bool:
        with Client(address, timeout=60, set_as_default=False) as client:  # type: ignore[no-untyped-call]
            client.wait_for_workers(1, timeout=60)
        return True

    with running([dask, "scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1], "--no-dashboard"],
                 log=tmp_path / "scheduler.log", what="dask scheduler", env=env, stop_signal=signal.SIGKILL), \
            running([dask, "worker", address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1", "--no-dashboard"],
                    log=tmp_path / "worker.log", what="dask worker", ready=one_worker, env=env,
                    stop_signal=signal.SIGKILL) as worker:
        yield RemoteCluster(address, worker)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_map_on_a_cluster_whose_workers_are_all_gone_stops_after_the_timeout_naming_the_cause(
    remote_cluster: RemoteCluster,
) -> None:
    """Before, the map waited for a worker forever, without a word."""
    with DaskEngine(remote_cluster.address, timeout=2) as engine:
        assert engine.map(slow_square, [3]) == [9]
        remote_cluster.kill_the_worker()
        began = time.monotonic()
        message = (rf"^the Dask cluster at {re.escape(remote_cluster.address)} has had no worker for 2 s with 2 of 2 "
                   r"tasks not done; the computation was stopped\. Start workers \(`dask worker ")  # fmt: skip
        with pytest.raises(RuntimeError, match=message):
            engine.map(slow_square, [1, 2])
        assert time.monotonic() - began < 2 + 10


def _partitions(folder: Path, n_partitions: int, rows: int) -> Path:
    rng = np.random.default_rng(0)
    for part in range(n_partitions):
        logits = rng.normal(size=(rows, 3))
        scored = ScoredSet.from_arrays(logits, logits.argmax(axis=1), ids=[f"p{part}-{i}" for i in range(rows)])
        (folder / f"day={part:02d}").mkdir(parents=True)
        write_scored_set(scored, folder / f"day={part:02d}" / "part-0.parquet")
    return folder


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_dask_fit_whose_workers_all_die_exits_3_naming_the_cause(remote_cluster: RemoteCluster, tmp_path: Path) -> None:
    """``thermostat fit --engine dask``, the cluster's only worker killed while it computes: before,
    the fit hung (9 minutes and counting) without a word; now it exits 3 after --dask-timeout."""
    from distributed import Client

    data = _partitions(tmp_path / "parts", 24, 200)
    thermostat = str(Path(sys.executable).parent / "thermostat")
    command = [thermostat, "fit", str(data), "--engine", "dask", "--dask-address", remote_cluster.address,
               "--dask-timeout", "3"]  # fmt: skip
    with Client(remote_cluster.address, set_as_default=False) as watcher:  # type: ignore[no-untyped-call]
        fit = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while not any(watcher.processing().values()):  # the fit's first tasks are on the worker
                assert fit.poll() is None, f"the fit ended before its tasks reached the worker: {fit.communicate()}"
                assert time.monotonic() < deadline, "the fit's tasks never reached the worker"
                time.sleep(0.05)
            killed = time.monotonic()
            remote_cluster.kill_the_worker()
            _, err = fit.communicate(timeout=120)
        finally:
            if fit.poll() is None:
                fit.kill()
                fit.communicate()
    assert fit.returncode == 3, err
    assert f"the computation failed: the Dask cluster at {remote_cluster.address} has had no worker for 3 s" in err
    assert "Traceback" not in err
    assert time.monotonic() - killed < 3 + 30


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_monitors_tasks_on_a_cluster_whose_workers_are_all_gone_fail_after_the_timeout(
    remote_cluster: RemoteCluster, prefect_api: None
) -> None:
    """The flows' engine (one Prefect task per partition on prefect-dask's runner) stops too."""
    from prefect import flow

    remote_cluster.kill_the_worker()

    @flow
    def summarise(items: list[int]) -> list[int]:
        return TaskEngine(n_workers=1, timeout=2).map(slow_square, items)

    began = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"^the Dask cluster at {re.escape(remote_cluster.address)} has had no "
                                           r"worker for 2 s with 3 of 3 tasks not done"):  # fmt: skip
        summarise.with_options(task_runner=dask_task_runner(remote_cluster.address, 1))(items=[1, 2, 3])
    assert time.monotonic() - began < 2 + 30
