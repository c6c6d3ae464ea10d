"""Where the per-partition work runs: in this process, or on a Dask cluster.

The core runs a partitioned scored set as a map over its partitions on an
:class:`calibration.Engine` followed by a reduce here. This module provides the engines the
CLI and the flows choose between (``--engine local|dask``):

- ``local``: :data:`calibration.LOCAL_ENGINE`, one partition after another in this process;
- ``dask``: :class:`DaskEngine`, the partitions spread over the workers of a Dask cluster,
  either a temporary one on this machine or an existing scheduler given by its address.

:func:`engine_from_options` turns the command-line options into an engine (refusing bad
values in the options' own words, before anything starts; an option that would be ignored is
refused rather than dropped silently) and :func:`dask_task_runner` gives Prefect flows the same
choice of cluster for their tasks.

Dask is the optional ``distributed`` extra. Importing this module imports neither Dask nor
Prefect; asking for the Dask engine without the extra raises a :class:`RuntimeError` that
says how to install it.

A cluster whose workers are all gone does not hang a computation: when it has had no worker for
the engine's timeout (``--dask-timeout``, default :data:`DEFAULT_DASK_TIMEOUT`) while tasks
wait, the tasks are cancelled and the map raises a :class:`RuntimeError` that says so.

A temporary cluster stays on this machine: its scheduler, nannies and workers listen on
127.0.0.1 only and no dashboard is served. Dask logs at ``WARNING``: a lost or restarted
worker is worth a line, routine start-up chatter is not. Its workers are separate
processes started with ``spawn``: the functions they run must be importable by name
(module-level functions of an installed package, ``functools.partial`` of them), which the
repository's packages are, being installed in the environment. The workers of an existing
cluster need the same packages installed.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from flows.defaults import DEFAULT_DASK_TIMEOUT, DEFAULT_DASK_WORKERS, ENGINES, MAX_DASK_TIMEOUT
from calibration import LOCAL_ENGINE, Engine

if TYPE_CHECKING:
    from distributed import Client
    from prefect_dask.task_runners import DaskTaskRunner

__all__ = [
    "MISSING_EXTRA",
    "DaskEngine",
    "WorkerWatch",
    "dask_task_runner",
    "engine_from_options",
]


MISSING_EXTRA = "the Dask engine needs the 'distributed' extra: pip install 'thermostat[distributed]'"
"""The message when Dask or prefect-dask is not installed."""

# tcp:// or tls://, then a host name, an IPv4 address or a bracketed IPv6 address, then a port.
_ADDRESS = re.compile(r"(?:tcp|tls)://(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")

Item = TypeVar("Item")
Result = TypeVar("Result")


def _local_cluster_options(n_workers: int) -> dict[str, Any]:
    """``distributed.LocalCluster`` keywords for a temporary cluster that stays on this machine.

    One single-threaded worker process per partition in flight (the core's kernels are not
    thread-parallel, and processes keep one partition's memory out of the others'), and every
    server on the loopback interface. No dashboard (``dashboard_address=None``); the scheduler's
    small HTTP server (health, metrics), which runs regardless, takes a free loopback port
    rather than the dashboard's 8787, which another cluster on the machine may hold.
    ``silence_logs`` keeps the workers' Dask logs at WARNING.
    """
    return {
        "n_workers": n_workers,
        "threads_per_worker": 1,
        "processes": True,
        "host": "127.0.0.1",
        "dashboard_address": None,
        "scheduler_kwargs": {"dashboard_address": "127.0.0.1:0"},
        "silence_logs": logging.WARNING,
    }


def _load_extra(module: str) -> None:
    """Import ``module`` (of the ``distributed`` extra), or say how to install it; quiet Dask.

    Dask logs a line at INFO for every worker started, connection made and client closed.
    ``silence_logs`` quiets Dask's own log handler, but once Prefect has configured logging
    Dask has none and those lines reach Prefect's console; so the ``distributed`` logger
    itself goes to WARNING, unless it has been given a level other than Dask's default INFO.
    """
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise RuntimeError(MISSING_EXTRA) from exc
    dask_logger = logging.getLogger("distributed")
    if dask_logger.level == logging.INFO:
        dask_logger.setLevel(logging.WARNING)


def _check_scheduler(address: str, timeout: float) -> None:
    """Refuse ``address`` unless a Dask scheduler answers there within ``timeout`` seconds.

    ``distributed.Client`` bounds the TCP connection but not the handshake after it: pointed at
    a server that accepts and never answers (the dashboard's HTTP port, say), it waits forever.
    This exchange (connect, handshake, ``identity``) is bounded as a whole.

    Raises
    ------
    ConnectionError
        Nothing answered in time, or what answered is not a scheduler (a worker, a nanny).
    """
    from distributed.comm.core import connect
    from distributed.security import Security

    # TLS as configured in Dask's settings, as the Client would use it.
    connection_args = Security().get_connection_args("client")  # type: ignore[no-untyped-call]

    async def identify() -> dict[str, Any]:
        comm = await connect(address, timeout=timeout, **connection_args)  # type: ignore[no-untyped-call]
        try:
            await comm.write({"op": "identity"})
            identity: dict[str, Any] = await comm.read()
            return identity
        finally:
            comm.abort()

    async def bounded() -> dict[str, Any]:
        return await asyncio.wait_for(identify(), timeout)

    # An event loop of its own, in a thread of its own: the caller may be running one already.
    with ThreadPoolExecutor(max_workers=1) as thread:
        try:
            identity = thread.submit(asyncio.run, bounded()).result()
        except OSError as exc:  # TimeoutError and distributed's CommClosedError among them
            raise ConnectionError(f"no Dask scheduler answered at {address} within {timeout:g} s") from exc
    if "n_workers" not in identity:
        raise ConnectionError(f"{address} is a Dask {identity.get('type', 'server')}, not a scheduler")


@dataclass(frozen=True, slots=True)
class _Connection:
    """A running engine's client, its scheduler's address and its number of workers."""

    client: Client
    address: str
    n_workers: int


class DaskEngine:
    """Runs the map of a partitioned computation on a Dask cluster; a context manager.

    Without ``address`` it starts a temporary ``distributed.LocalCluster`` of ``n_workers``
    single-threaded worker processes on 127.0.0.1 and shuts it down on exit. With
    ``address`` it connects to that running scheduler and leaves the cluster running on
    exit. The cluster is started (or connected to) on entering the ``with`` block.

    Parameters
    ----------
    address
        A running scheduler, ``tcp://HOST:PORT`` or ``tls://HOST:PORT`` (TLS as configured
        in Dask's ``distributed.comm.tls`` settings), or ``None`` for a temporary local
        cluster.
    n_workers
        Worker processes of the temporary local cluster; unused with ``address`` (the
        scheduler's own workers run the map).
    timeout
        Seconds, in (0, :data:`MAX_DASK_TIMEOUT`]. With ``address``: how long to wait for the
        scheduler to answer, then again for it to have at least one worker. On any cluster: how
        long :meth:`map`'s tasks may wait while the cluster has no worker at all before they are
        cancelled and :meth:`map` raises.

    Raises
    ------
    ValueError
        ``n_workers`` below 1, or ``timeout`` not a number of seconds in (0, :data:`MAX_DASK_TIMEOUT`].
    RuntimeError
        Dask is not installed (:data:`MISSING_EXTRA`).

    Notes
    -----
    A worker that dies during :meth:`map` loses its tasks; the scheduler runs them again on
    the other workers, and a local cluster's nanny starts a replacement worker. A task that
    has been on three workers that died is given up with ``distributed.KilledWorker`` (Dask's
    ``distributed.scheduler.allowed-failures``). When the cluster has no worker left at all (the
    workers of an existing cluster killed, and nothing to restart them), the tasks would wait
    for one forever: after ``timeout`` seconds without a worker they are cancelled and
    :meth:`map` raises a :class:`RuntimeError` naming the cluster and the wait.

    Examples
    --------
    >>> with DaskEngine(n_workers=2) as engine:  # doctest: +SKIP
    ...     engine.map(abs, [-1, 2, -3])
    [1, 2, 3]
    """

    def __init__(
        self,
        address: str | None = None,
        n_workers: int = DEFAULT_DASK_WORKERS,
        *,
        timeout: float = DEFAULT_DASK_TIMEOUT,
    ) -> None:
        if n_workers < 1:
            raise ValueError(f"n_workers must be at least 1, not {n_workers}")
        _check_timeout(timeout, "timeout")
        _load_extra("distributed")
        self._requested_address = address
        self._requested_workers = n_workers
        self._timeout = float(timeout)
        self._connection: _Connection | None = None
        self._resources = ExitStack()

    def __repr__(self) -> str:
        where = self._requested_address or f"a local cluster of {self._requested_workers} workers"
        state = "running" if self._connection else "not running"
        return f"DaskEngine({where}, {state})"

    def __enter__(self) -> DaskEngine:
        if self._connection is not None:
            raise RuntimeError(f"{self!r} is already running")
        with ExitStack() as resources:
            if self._requested_address is None:
                self._connection = self._start_local_cluster(resources)
            else:
                self._connection = self._connect(resources, self._requested_address)
            # Started: from here on the resources are closed by __exit__, not by this block.
            self._resources = resources.pop_all()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._connection = None
        self._resources.close()

    def _start_local_cluster(self, resources: ExitStack) -> _Connection:
        from distributed import Client, LocalCluster

        options = _local_cluster_options(self._requested_workers)
        cluster = resources.enter_context(LocalCluster(**options))  # type: ignore[no-untyped-call]
        client = resources.enter_context(Client(cluster, set_as_default=False))  # type: ignore[no-untyped-call]
        return _Connection(client, str(cluster.scheduler_address), self._requested_workers)

    def _connect(self, resources: ExitStack, address: str) -> _Connection:
        from distributed import Client

        timeout = self._timeout
        _check_scheduler(address, timeout)
        client = Client(address, timeout=timeout, set_as_default=False)  # type: ignore[no-untyped-call]
        resources.enter_context(client)
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError as exc:
            raise ConnectionError(
                f"the Dask scheduler at {address} has no workers (waited {timeout:g} s); "
                f"start some with `dask worker {address}`"
            ) from exc
        return _Connection(client, address, len(client.scheduler_info()["workers"]))

    def _running(self) -> _Connection:
        if self._connection is None:
            raise RuntimeError(f"{self!r}: use it in a `with` block, which starts it")
        return self._connection

    @property
    def name(self) -> str:
        """``"dask"``."""
        return "dask"

    @property
    def n_workers(self) -> int:
        """The local cluster's workers, or the workers the scheduler reported when connected."""
        return self._running().n_workers

    @property
    def address(self) -> str:
        """The scheduler's address, ``tcp://HOST:PORT``."""
        return self._running().address

    @property
    def client(self) -> Client:
        """The ``distributed.Client`` connected to the scheduler (not the process's default)."""
        return self._running().client

    def map(self, fn: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
        """``[fn(item) for item in items]``, computed on the cluster's workers.

        Every call is a separate task (``pure=False``: nothing is reused between calls).
        The results come back in the items' order. Each result is fetched as soon as its task
        finishes and its future released at once, so a worker holds the results of the tasks
        still being fetched, not of every task it ran (which would grow with the data). If
        ``fn`` raises, the same exception (type and message) is raised here and the items
        still running or waiting are cancelled. If the cluster has no worker for the engine's
        ``timeout`` while items wait, they are cancelled and a :class:`RuntimeError` says so.

        Parameters
        ----------
        fn
            A picklable function, importable by name on the workers.
        items
            Its arguments, picklable.

        Returns
        -------
        list
            ``fn(item)`` for each item, in order.

        Raises
        ------
        RuntimeError
            The cluster had no worker for ``timeout`` seconds while items waited.
        """
        from distributed import as_completed

        client = self._running().client
        futures = client.map(fn, items, pure=False)
        position = {future.key: index for index, future in enumerate(futures)}
        results: list[Any] = [None] * len(futures)
        try:
            with WorkerWatch(futures, self._timeout) as watch:
                for future, result in as_completed(futures, loop=client.loop, with_results=True):  # type: ignore[no-untyped-call]
                    watch.raise_if_stopped(future)
                    results[position[future.key]] = result
                    future.release()
        except BaseException:
            client.cancel(futures)  # type: ignore[no-untyped-call]
            raise
        finally:
            del futures
        return results


class WorkerWatch:
    """A context manager that stops ``futures`` (``distributed.Future``) when their cluster has had
    no worker for ``timeout`` seconds, instead of letting them wait for one forever.

    While the block runs, a thread asks the scheduler for its workers about once a second (more
    often for a short ``timeout``); once the cluster has had none for ``timeout`` seconds, it
    records why (:attr:`reason`) and cancels the futures. The block, waiting on them, sees them
    cancelled: :meth:`raise_if_stopped` turns that into a :class:`RuntimeError` naming the
    cluster (its scheduler's address), the wait and what to do.

    Parameters
    ----------
    futures
        The tasks to watch, all of one client.
    timeout
        Seconds without any worker before the tasks are cancelled.
    """

    def __init__(self, futures: Sequence[Any], timeout: float) -> None:
        self._futures = list(futures)
        self._timeout = timeout
        self._where = str(self._futures[0].client.scheduler.address) if self._futures else "(no task)"
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="thermostat-dask-worker-watch", daemon=True)
        self.reason: str | None = None

    def __enter__(self) -> WorkerWatch:
        if self._futures:
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def raise_if_stopped(self, future: Any) -> None:
        """Raise the watch's :class:`RuntimeError` if ``future`` was cancelled by it."""
        if future.cancelled():
            raise RuntimeError(self.reason or f"a task on the Dask cluster at {self._where} was cancelled")

    def _workers(self, client: Any) -> int:
        try:
            return len(client.nthreads())
        except Exception:  # noqa: BLE001 - a scheduler that cannot say has no worker to offer either
            return 0

    def _watch(self) -> None:
        client = self._futures[0].client
        interval = min(1.0, self._timeout / 4)
        without_since: float | None = None
        while not self._done.wait(interval):
            if self._workers(client):
                without_since = None
                continue
            now = time.monotonic()
            without_since = now if without_since is None else without_since
            if now - without_since >= self._timeout:
                waiting = sum(not future.done() for future in self._futures)
                self.reason = (
                    f"the Dask cluster at {self._where} has had no worker for {self._timeout:g} s with {waiting} of "
                    f"{len(self._futures)} tasks not done; the computation was stopped. Start workers "
                    f"(`dask worker {self._where}`), or wait longer for them (--dask-timeout; THERMOSTAT_DASK_TIMEOUT "
                    "for the flows)"
                )
                client.cancel(self._futures)
                return


def _check_address(address: str) -> str:
    match = _ADDRESS.fullmatch(address)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise ValueError(
            f"--dask-address: {address!r} is not a Dask scheduler address; "
            "give tcp://HOST:PORT or tls://HOST:PORT (for example tcp://127.0.0.1:8786)"
        )
    return address


def _check_timeout(timeout: float, name: str) -> float:
    number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
    if not (number and math.isfinite(timeout) and 0 < timeout <= MAX_DASK_TIMEOUT):
        raise ValueError(
            f"{name}: {f'{timeout:g}' if number else repr(timeout)} is not a number of seconds in "
            f"(0, {MAX_DASK_TIMEOUT:g}]; give a finite wait (default {DEFAULT_DASK_TIMEOUT:g})"
        )
    return float(timeout)


def _check_workers(n_workers: int) -> int:
    if n_workers < 1:
        raise ValueError(f"--dask-workers: {n_workers} workers; give at least 1")
    return n_workers


def engine_from_options(
    engine: str, address: str | None, n_workers: int | None, *, timeout: float = DEFAULT_DASK_TIMEOUT
) -> AbstractContextManager[Engine]:
    """The engine chosen on the command line, as a context manager that starts and stops it.

    Parameters
    ----------
    engine
        ``--engine``: ``"local"`` or ``"dask"``.
    address
        ``--dask-address``: a running scheduler, ``tcp://HOST:PORT`` or ``tls://HOST:PORT``;
        ``None`` (not given) starts a temporary cluster on this machine. Dask only.
    n_workers
        ``--dask-workers``: workers of that temporary cluster (default
        :data:`DEFAULT_DASK_WORKERS`); ``None`` when not given. Dask without an address only.
    timeout
        ``--dask-timeout``: seconds to wait for the scheduler at ``address`` and its first worker,
        and for a worker whenever the cluster has none while tasks wait (Dask only; checked
        whatever the engine).

    Returns
    -------
    AbstractContextManager[Engine]
        ``with engine_from_options(...) as engine:`` gives :data:`calibration.LOCAL_ENGINE`
        (Dask is not imported) or a running :class:`DaskEngine`.

    Raises
    ------
    ValueError
        An unknown engine, a malformed address, fewer than one worker, a timeout that is not a
        number of seconds in (0, :data:`MAX_DASK_TIMEOUT`], or an option that does not apply to
        the chosen engine; the message names the option.
    RuntimeError
        ``"dask"`` without the ``distributed`` extra installed.

    Examples
    --------
    >>> with engine_from_options("local", None, None) as engine:
    ...     engine.map(abs, [-1, 2])
    [1, 2]
    >>> engine_from_options("spark", None, None)
    Traceback (most recent call last):
    ...
    ValueError: --engine: unknown engine 'spark'; choose local or dask
    """
    if engine not in ENGINES:
        raise ValueError(f"--engine: unknown engine {engine!r}; choose {' or '.join(ENGINES)}")
    _check_timeout(timeout, "--dask-timeout")
    if engine == "local":
        if address is not None or n_workers is not None:
            raise ValueError("--dask-address and --dask-workers apply to --engine dask only")
        return nullcontext(LOCAL_ENGINE)
    return _dask_engine(address, n_workers, timeout)


def _dask_engine(address: str | None, n_workers: int | None, timeout: float) -> DaskEngine:
    """The Dask engine on the scheduler at ``address``, or on a temporary cluster of ``n_workers``."""
    if address is not None:
        if n_workers is not None:
            raise ValueError(
                "--dask-workers sizes the temporary cluster; with --dask-address the scheduler's own workers "
                "run the map: give one or the other"
            )
        return DaskEngine(_check_address(address), timeout=timeout)
    return DaskEngine(n_workers=DEFAULT_DASK_WORKERS if n_workers is None else _check_workers(n_workers),
                      timeout=timeout)


def dask_task_runner(address: str | None, n_workers: int) -> DaskTaskRunner:
    """A Prefect task runner on a Dask cluster, for ``flow.with_options(task_runner=...)``.

    Parameters
    ----------
    address
        A running scheduler (``tcp://HOST:PORT`` or ``tls://HOST:PORT``), or ``None`` for a
        temporary local cluster that each flow run starts and stops (the same cluster as
        :class:`DaskEngine`'s: single-threaded worker processes on 127.0.0.1, no dashboard).
    n_workers
        Worker processes of the temporary cluster; unused with ``address``.

    Returns
    -------
    prefect_dask.DaskTaskRunner
        Not started: the flow run starts it.

    Raises
    ------
    ValueError
        A malformed address or fewer than one worker (named as ``--dask-address`` and
        ``--dask-workers``).
    RuntimeError
        The ``distributed`` extra is not installed.
    """
    if address is not None:
        _check_address(address)
    _check_workers(n_workers)
    _load_extra("prefect_dask")
    from prefect_dask.task_runners import DaskTaskRunner

    if address is not None:
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(cluster_class="distributed.LocalCluster", cluster_kwargs=_local_cluster_options(n_workers))
