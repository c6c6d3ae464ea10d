"""The monitor's cost: ingest, one check per labelled row, a fleet of versions, stored bytes.

Sections (``--only``, default all):

* ``ingest`` — rows per second into the prediction log (SQLite file and a throwaway
  PostgreSQL; K = 10 and 1,000) through the batched serving writer
  (:class:`monitoring.PredictionLogWriter`, one-row requests as a server submits them) and
  through :func:`monitoring.log_predictions` (batches of 256 rows, the writer's batch, and of
  5,000).
* ``check`` — one check's reads of the log for windows of 10^4, 10^5 and 10^6 served rows
  (K = 10; K = 1,000 up to 10^5; every row labelled, a third of the labels arrived since the
  sequential rule's cursor, plus late labels of rows served before the window): the three reads the monitor made
  before (the window summary, the sequential increment through :class:`monitoring.NewlyLabelled`,
  the early warning's :func:`monitoring.confidence_profile`) and the one pass that replaces them
  (:func:`monitoring.scan_window`), each in a fresh subprocess: wall and CPU time, tracemalloc
  peak and RSS growth. The two must give the same counts and the same sums (checked).
* ``fleet`` — ``--models`` × ``--aliases`` registered versions (200 by default: 50 models,
  4 serving aliases each) with ``--rows`` labelled rows each in the last 24 h, a real
  ``mlflow server`` (artifacts proxied), Prefect's test server, the log on PostgreSQL (or
  SQLite); one scheduled run over all of them, twice (the first check of every version, then
  the next hour's): ``--fleet-mode fleet`` is one ``monitor_fleet`` run, ``per-model`` one
  ``monitor`` run per model (the only way before the fleet flow); ``--fleet-mode fleet per-model``
  runs the second mode the hour after, on the same fleet; ``--profile PATH`` adds one cProfiled
  run. Reports wall and CPU time
  (this process, and the MLflow and Prefect servers), SQL statements per version (SQLAlchemy's
  ``before_cursor_execute`` on every engine of the process), MLflow REST calls per version (by
  endpoint: ``requests.Session.request``, which MLflow's client uses for every call and every
  proxied artifact), Prefect API requests, and what one hourly run wrote to MLflow (runs,
  metrics, tags, artifacts and bytes, read from the server's SQLite store and artifact folder).
* ``storage`` — bytes per served row in the log at K = 10, 100 and 1,000 (SQLite: the file,
  tables and indexes; PostgreSQL: ``pg_total_relation_size``, TOAST and indexes included).

Usage::

    make bench-monitor                                  # everything (about 30–60 min on 2 busy cores)
    .venv/bin/python -m benchmarks.monitor_cost --only fleet --fleet-mode per-model --out before.json
    .venv/bin/python -m benchmarks.monitor_cost --only check --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The test suite's own throwaway servers (PostgreSQL, mlflow server): reused, not rewritten.
# Importing the integration conftest also points PREFECT_HOME at a temporary folder.
from tests.integration.conftest import free_port, mlflow_server  # noqa: E402
from tests.monitoring.conftest import PostgresCluster, _as_postgres_user, _postgres_bin_dir, _run  # noqa: E402

MIB = 1024 * 1024
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --------------------------------------------------------------------------- shared pieces


def machine_line() -> str:
    load = os.getloadavg()
    return (f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}); Python {platform.python_version()}; "
            f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")


def traffic(rng: np.random.Generator, n_rows: int, n_classes: int, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """Float32 logits and labels drawn from softmax(z / T): traffic calibrated at T."""
    logits = (3.0 * rng.normal(size=(n_rows, n_classes))).astype(np.float32)
    scaled = logits / temperature
    p = np.exp(scaled - scaled.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = np.minimum((rng.random((n_rows, 1)) > p.cumsum(axis=1)).sum(axis=1), n_classes - 1)
    return logits, labels.astype(np.int64)


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """A PostgreSQL cluster in a temporary folder, started as the test suite starts it
    (tests/monitoring/conftest.py); yields the URL of a fresh database ``bench``."""
    import sqlalchemy as sa

    bin_dir = _postgres_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL binaries (initdb, pg_ctl) not found; `make test` installs them (.ci/postgres.sh)")
    root = Path(tempfile.mkdtemp(prefix="thermostat-bench-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, user="postgres")
    port = free_port()
    cluster = PostgresCluster(
        url=f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", bin_dir=bin_dir, data=root / "data",
        options=f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off",
        log_file=root / "server.log",
    )
    _run(_as_postgres_user([str(bin_dir / "initdb"), "-D", str(root / "data"), "-U", "postgres", "-A", "trust", "-E",
                            "UTF8", "--no-sync"]), "initdb")
    cluster.start()
    try:
        engine = sa.create_engine(cluster.url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(sa.text("CREATE DATABASE bench"))
        engine.dispose()
        yield cluster.url.rsplit("/", 1)[0] + "/bench"
    finally:
        with contextlib.suppress(Exception):
            cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def log_url(backend: str, folder: Path, name: str) -> Iterator[str]:
    """A URL for an empty prediction log on ``backend`` (its tables dropped afterwards)."""
    from monitoring import PredictionLog

    if backend == "sqlite":
        path = folder / f"{name}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        yield f"sqlite:///{path}"
        return
    url = POSTGRES_URL[0]
    log = PredictionLog(url)
    log.metadata.drop_all(log.engine)
    log.dispose()
    try:
        yield url
    finally:
        log = PredictionLog(url)
        log.metadata.drop_all(log.engine)
        log.dispose()


POSTGRES_URL: list[str] = []


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --------------------------------------------------------------------------- ingest


def ingest(backend: str, n_classes: int, n_rows: int, folder: Path) -> list[dict[str, Any]]:
    """Rows per second into an empty log: the writer with one-row requests, and log_predictions."""
    from monitoring import PredictionLog, PredictionLogWriter, log_predictions

    rng = np.random.default_rng(n_classes)
    logits, _ = traffic(rng, n_rows, n_classes, 1.5)
    groups = np.array(["web", "app", "api", "mail"], dtype=object)[rng.integers(0, 4, n_rows)].tolist()
    results = []
    with log_url(backend, folder, f"ingest-{n_classes}") as url:
        PredictionLog(url).create()
        writer = PredictionLogWriter(PredictionLog(url), "ingest", "1", 1.5, max_pending_rows=n_rows + 1,
                                     close_timeout=3600)
        began, cpu = time.perf_counter(), cpu_seconds()
        now = datetime.now(UTC)
        for i in range(n_rows):
            writer.submit(logits[i:i + 1], [f"w{i}"], [groups[i]], now)
        submitted = time.perf_counter() - began
        stats = writer.close()
        seconds, cpu = time.perf_counter() - began, cpu_seconds() - cpu
        if stats.rows_dropped or stats.rows_written != n_rows:
            raise RuntimeError(f"the writer lost rows: {stats}")
        results.append({"backend": backend, "k": n_classes, "path": "PredictionLogWriter, 1-row requests, batches of 256",
                        "rows": n_rows, "seconds": seconds, "cpu_seconds": cpu, "rows_per_second": n_rows / seconds,
                        "submit_us_per_row": 1e6 * submitted / n_rows})
        for batch in (256, 5_000):
            with PredictionLog(url) as log:
                began, cpu = time.perf_counter(), cpu_seconds()
                for offset in range(0, n_rows, batch):
                    part = slice(offset, min(offset + batch, n_rows))
                    log_predictions(log, "ingest", "2" if batch == 256 else "3", 1.5, logits[part],
                                    [f"b{batch}-{i}" for i in range(part.start, part.stop)], groups[part], now)
                seconds, cpu = time.perf_counter() - began, cpu_seconds() - cpu
            results.append({"backend": backend, "k": n_classes, "path": f"log_predictions, batches of {batch:,}",
                            "rows": n_rows, "seconds": seconds, "cpu_seconds": cpu,
                            "rows_per_second": n_rows / seconds})
    return results


# --------------------------------------------------------------------------- one check's reads

CHECK_MODEL, CHECK_VERSION, CHECK_T = "bench", "1", 1.5
CHECK_END = datetime(2026, 1, 2, tzinfo=UTC)
CHECK_START = CHECK_END - timedelta(hours=24)
CURSOR = CHECK_END - timedelta(hours=1)  # the sequential rule's cursor: the previous check
UNTIL = CHECK_END - timedelta(minutes=5)  # this check's label settle time


def fill_window(url: str, n_rows: int, n_classes: int, *, batch: int = 50_000) -> float:
    """``n_rows`` labelled rows served in the window: two thirds labelled before the cursor, a
    third after it; and 1% more served the day before, labelled after the cursor (late labels)."""
    from monitoring import PredictionLog, log_predictions

    rng = np.random.default_rng(7)
    began = time.perf_counter()
    with PredictionLog(url) as log:
        log.create()
        late = max(1, n_rows // 100)
        for label_time, first, count, served_from in (
                (CURSOR - timedelta(hours=2), 0, n_rows - n_rows // 3, CHECK_START),
                (CURSOR + timedelta(minutes=10), n_rows - n_rows // 3, n_rows // 3, CHECK_START),
                (CURSOR + timedelta(minutes=20), n_rows, late, CHECK_START - timedelta(hours=24))):
            step = timedelta(hours=24) / max(count, 1)
            for offset in range(0, count, batch):
                size = min(batch, count - offset)
                logits, labels = traffic(rng, size, n_classes, CHECK_T)
                index = np.arange(first + offset, first + offset + size)
                times = [served_from + step * (i - first) for i in index.tolist()]
                groups = np.array(["web", "app", "api", "mail"], dtype=object)[rng.integers(0, 4, size)].tolist()
                log_predictions(log, CHECK_MODEL, CHECK_VERSION, CHECK_T, logits, [f"r{i}" for i in index.tolist()],
                                groups, times)
                # Labels arrive later: attached at their own time (what the sequential rule reads).
                log.attach_labels([f"r{i}" for i in index.tolist()], labels, labelled_at=label_time)
    return time.perf_counter() - began


def _three_reads(url: str, chunk_size: int) -> dict[str, Any]:
    """What a check read before: the summary, the sequential increment, the early warning's profile."""
    from monitoring import NewlyLabelled, PredictionLog, WindowQuery, confidence_profile, summarise_window

    with PredictionLog(url) as log:
        query = WindowQuery(CHECK_MODEL, CHECK_VERSION, temperature=CHECK_T, start=CHECK_START, end=CHECK_END,
                            threshold=0.9)
        summary = summarise_window(log, query, chunk_size=chunk_size)
        query = WindowQuery(CHECK_MODEL, CHECK_VERSION, temperature=CHECK_T, start=EPOCH, end=CHECK_END)
        increment = summarise_window(NewlyLabelled(log, since=CURSOR, until=UNTIL), query,
                                     chunk_size=chunk_size).temperature_stats
        profile = confidence_profile(log, CHECK_MODEL, CHECK_VERSION, temperature=CHECK_T, start=CHECK_START,
                                     end=CHECK_END, chunk_size=chunk_size)
    return {"n": summary.n, "ece": summary.overall.ece, "nll": summary.overall.nll, "increment_n": increment.n,
            "increment_gradient_sum": increment.gradient_sum, "profile_n": profile.n,
            "profile_count": list(profile.count)}


def _one_pass(url: str, chunk_size: int) -> dict[str, Any]:
    """The same three results from one pass over the window (and the late labels outside it)."""
    from monitoring import LabelArrivals, PredictionLog, WindowQuery, scan_window

    arrivals = LabelArrivals(since=CURSOR, until=UNTIL, served_from=EPOCH, served_to=CHECK_END)
    with PredictionLog(url) as log:
        query = WindowQuery(CHECK_MODEL, CHECK_VERSION, temperature=CHECK_T, start=CHECK_START, end=CHECK_END,
                            threshold=0.9)
        scan = scan_window(log, query, chunk_size=chunk_size, arrivals=arrivals)
    assert scan.summary is not None and scan.arrived is not None
    return {"n": scan.summary.n, "ece": scan.summary.overall.ece, "nll": scan.summary.overall.nll,
            "increment_n": scan.arrived.n, "increment_gradient_sum": scan.arrived.gradient_sum,
            "profile_n": scan.profile.n, "profile_count": list(scan.profile.count)}


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure_reads(url: str, how: str, chunk_size: int, mode: str) -> dict[str, Any]:
    """In this fresh process: one check's reads, ``how`` = three | one; time, CPU and memory."""
    from calibration import TopLabelScores
    from monitoring import ConfidenceProfile, PredictionLog

    rng = np.random.default_rng(1)
    warm = rng.normal(size=(1000, 10)).astype(np.float32)  # the chunk's scoring passes, warmed up
    TopLabelScores.from_logits(warm, rng.integers(0, 10, 1000), temperature=1.0)
    ConfidenceProfile.from_logits(warm)
    with PredictionLog(url) as log:
        log.n_classes(CHECK_MODEL, CHECK_VERSION)
    read = _three_reads if how == "three" else _one_pass
    if mode == "tracemalloc":
        tracemalloc.start()
        result = read(url, chunk_size)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return result | {"tracemalloc_peak_bytes": peak}
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM back to the current RSS
    rss_before = _status_kib("VmRSS")
    began, cpu = time.perf_counter(), cpu_seconds()
    result = read(url, chunk_size)
    return result | {"seconds": time.perf_counter() - began, "cpu_seconds": cpu_seconds() - cpu,
                     "rss_growth_bytes": (_status_kib("VmHWM") - rss_before) * 1024}


def _fresh(url: str, how: str, chunk_size: int, mode: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "benchmarks.monitor_cost", "--measure-reads", url, "--how", how,
                           "--chunk-size", str(chunk_size), "--mode", mode],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    values: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return values


def check_cost(backend: str, n_classes: int, sizes: list[int], chunk_size: int, folder: Path,
               repeats: int) -> list[dict[str, Any]]:
    results = []
    for size in sizes:
        with log_url(backend, folder, f"check-{n_classes}-{size}") as url:
            filled = fill_window(url, size, n_classes)
            print(f"  {backend}: {size:,} rows of K = {n_classes} filled in {filled:.0f} s", flush=True)
            measured: dict[str, dict[str, Any]] = {}
            for how in ("three", "one"):
                timings = [_fresh(url, how, chunk_size, "rss") for _ in range(repeats)]
                best = min(timings, key=lambda m: m["seconds"])
                traced = _fresh(url, how, chunk_size, "tracemalloc")
                measured[how] = best | {"tracemalloc_peak_bytes": traced["tracemalloc_peak_bytes"],
                                        "all_seconds": [m["seconds"] for m in timings]}
            three, one = measured["three"], measured["one"]
            same = (three["n"] == one["n"] and three["increment_n"] == one["increment_n"]
                    and three["profile_count"] == one["profile_count"]
                    and np.isclose(three["ece"], one["ece"], rtol=1e-9, atol=1e-12)
                    and np.isclose(three["nll"], one["nll"], rtol=1e-9)
                    and np.isclose(three["increment_gradient_sum"], one["increment_gradient_sum"], rtol=1e-9))
            if not same:
                raise RuntimeError(f"the one pass disagrees with the three reads: {three} vs {one}")
            for how, m in measured.items():
                results.append({"backend": backend, "k": n_classes, "window_rows": size, "labelled": m["n"],
                                "increment_rows": m["increment_n"], "reads": how, "seconds": m["seconds"],
                                "all_seconds": m["all_seconds"], "cpu_seconds": m["cpu_seconds"],
                                "us_per_row": 1e6 * m["seconds"] / size,
                                "cpu_us_per_row": 1e6 * m["cpu_seconds"] / size,
                                "tracemalloc_peak_bytes": m["tracemalloc_peak_bytes"],
                                "rss_growth_bytes": m["rss_growth_bytes"], "fill_seconds": filled})
    return results


# --------------------------------------------------------------------------- the fleet


class Counts:
    """What this process asks of the databases and servers while it is on."""

    def __init__(self) -> None:
        self.sql: Counter[str] = Counter()
        self.http: Counter[str] = Counter()
        self.prefect: Counter[str] = Counter()
        self.on = False

    def install(self) -> None:
        import httpx
        import requests
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        counts = self

        def statement(conn: Any, cursor: Any, text: str, *args: Any) -> None:
            if counts.on:
                counts.sql[" ".join(text.split()[:1]).upper()] += 1

        event.listen(Engine, "before_cursor_execute", statement)
        request = requests.Session.request

        def counted_request(session: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if counts.on:
                path = url.split("//", 1)[-1].split("/", 1)[-1].split("?")[0]
                # Artifact paths name the run: keep the endpoint, not the file.
                key = "/".join(path.split("/")[:5]) if "mlflow-artifacts" in path else path
                counts.http[f"{method} /{key}"] += 1
            return request(session, method, url, *args, **kwargs)

        requests.Session.request = counted_request  # type: ignore[method-assign]
        send = httpx.AsyncClient.send

        async def counted_send(client: Any, request_: Any, *args: Any, **kwargs: Any) -> Any:
            if counts.on:
                counts.prefect[f"{request_.method} {request_.url.path.split('/api/', 1)[-1].split('/')[0]}"] += 1
            return await send(client, request_, *args, **kwargs)

        httpx.AsyncClient.send = counted_send  # type: ignore[method-assign]
        sync_send = httpx.Client.send

        def counted_sync_send(client: Any, request_: Any, *args: Any, **kwargs: Any) -> Any:
            if counts.on:
                counts.prefect[f"{request_.method} {request_.url.path.split('/api/', 1)[-1].split('/')[0]}"] += 1
            return sync_send(client, request_, *args, **kwargs)

        httpx.Client.send = counted_sync_send  # type: ignore[method-assign]


def _migrated_mlflow_store(path: Path) -> None:
    from mlflow import MlflowClient

    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()


def _reference(rng: np.random.Generator, temperature: float) -> dict[str, str]:
    """The reference tags of a version registered at ``temperature`` (its calibration part)."""
    from calibration import CalibrationStats, ReferencePriors, calibration_error_from_stats
    from flows.records.versions import encode_reference_priors
    from monitoring import ConfidenceProfile, summarise_arrays

    logits, labels = traffic(rng, 4000, 10, temperature)
    summary = summarise_arrays(logits, labels, temperature=temperature, start=EPOCH, end=EPOCH)
    stats = summary.temperature_stats
    ece = calibration_error_from_stats(CalibrationStats.from_logits(logits[2000:], labels[2000:],
                                                                    temperature=temperature),
                                       estimator="debiased_l1", confidence_level=0.95, seed=0)
    return {
        "reference_n": str(stats.n), "reference_gradient_sum": repr(stats.gradient_sum),
        "reference_gradient_square_sum": repr(stats.gradient_square_sum),
        "reference_curvature_sum": repr(stats.curvature_sum), "reference_ece_estimator": "debiased_l1",
        "reference_ece": repr(ece.estimate), "reference_ece_low": repr(ece.low), "reference_ece_high": repr(ece.high),
        "reference_confidence_profile": ConfidenceProfile.from_logits(logits, labels, temperature=temperature).to_json(),
        # The shift diagnosis's reference: every check estimates the served rows' priors against it.
        "reference_prior_sums": encode_reference_priors(ReferencePriors.from_logits(logits, labels,
                                                                                    temperature=temperature)) or "",
    }


@dataclass(frozen=True)
class Fleet:
    models: list[str]
    aliases: list[str]
    temperature: float


def register_fleet(tracking_uri: str, n_models: int, aliases: list[str], temperature: float) -> Fleet:
    """``n_models`` models with one version per alias, each with complete registration tags."""
    from flows.records.versions import VersionRecord
    from flows.registry.adapter import MlflowRegistry

    registry = MlflowRegistry(tracking_uri)
    reference = _reference(np.random.default_rng(3), temperature)
    tags = {key: value for key, value in VersionRecord.example().to_tags().items()
            if not key.startswith("reference_")} | reference | {
        "temperature": repr(temperature), "temperature_low": repr(temperature * 0.97),
        "temperature_high": repr(temperature * 1.03), "gate_threshold": "0.9", "holdout_ece_after": "0.01",
        "holdout_nll_after": "1.0"}
    run_id = registry.start_run("registration", {})
    registry.end_run(run_id)
    models = [f"fleet-{i:03d}" for i in range(n_models)]
    for name in models:
        for number, alias in enumerate(aliases, start=1):
            registry.create_version(name, source=f"runs:/{run_id}/checkpoint", run_id=run_id, tags=tags)
            registry.mark_complete(name, str(number))
            registry.set_alias(name, alias, str(number))
    return Fleet(models=models, aliases=aliases, temperature=temperature)


def fill_fleet(url: str, fleet: Fleet, rows: int, now: datetime) -> float:
    """``rows`` labelled rows per version served over the last 23 hours, labelled as logged."""
    from monitoring import PredictionLog, log_predictions

    rng = np.random.default_rng(11)
    began = time.perf_counter()
    with PredictionLog(url) as log:
        log.create()
        step = timedelta(hours=23) / rows
        first = now - timedelta(hours=23, minutes=30)
        times = [first + step * i for i in range(rows)]
        for name in fleet.models:
            for number in range(1, len(fleet.aliases) + 1):
                logits, labels = traffic(rng, rows, 10, fleet.temperature)
                groups = np.array(["web", "app", "api", "mail"], dtype=object)[rng.integers(0, 4, rows)].tolist()
                log_predictions(log, name, str(number), fleet.temperature, logits,
                                [f"{name}-{number}-{i}" for i in range(rows)], groups, times, labels=labels)
    return time.perf_counter() - began


def _mlflow_rows(db: Path) -> dict[str, int]:
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as conn:
        return {table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608 - fixed names
                for table in ("runs", "metrics", "latest_metrics", "tags", "params", "model_version_tags")}


def _folder_bytes(folder: Path) -> tuple[int, int]:
    files = [path for path in folder.rglob("*") if path.is_file()]
    return len(files), sum(path.stat().st_size for path in files)


def _process_cpu(pid: int) -> float:
    import psutil

    total = 0.0
    with contextlib.suppress(psutil.Error):
        process = psutil.Process(pid)
        for member in [process, *process.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                times = member.cpu_times()
                total += times.user + times.system
    return total


def _prefect_server_pid() -> int | None:
    import psutil

    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "uvicorn" in " ".join(process.cmdline()) or "prefect" in " ".join(process.cmdline()):
                return process.pid
    return None


def fleet_run(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    from prefect.testing.utilities import prefect_test_harness

    counts = Counts()
    counts.install()
    store = folder / "mlflow-template.db"
    _migrated_mlflow_store(store)
    backend = args.fleet_backend
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(log_url(backend, folder, "fleet"))
        server = stack.enter_context(mlflow_server(store, folder / "mlflow", "--artifacts-destination",
                                                   str(folder / "mlflow" / "artifacts")))
        stack.enter_context(prefect_test_harness(server_startup_timeout=180))
        aliases = ["champion", "challenger", "canary", "shadow"][:args.aliases]
        began = time.perf_counter()
        fleet = register_fleet(str(server), args.models, aliases, 1.7)
        registered = time.perf_counter() - began
        now = datetime.now(UTC)
        filled = fill_fleet(url, fleet, args.rows, now)
        print(f"  registered {args.models * args.aliases} versions in {registered:.0f} s, filled "
              f"{args.models * args.aliases * args.rows:,} rows in {filled:.0f} s", flush=True)

        from flows.settings import ThermostatSettings

        settings = ThermostatSettings(state_dir=folder / "state", tracking_uri=str(server), prediction_log_url=url,
                                      label_settle_time=timedelta(0))
        runs = []
        # The first mode checks every version for the first time, then the next hour; a further
        # mode on the same fleet runs the hour after (each version's check state already there).
        plan = [(mode, attempt) for number, mode in enumerate(args.fleet_mode)
                for attempt in (("first", "next hour") if number == 0 else ("next hour",))]
        for mode, attempt in plan:
            counts.sql.clear(), counts.http.clear(), counts.prefect.clear()
            rows_before = _mlflow_rows(folder / "mlflow" / "mlflow.db")
            files_before = _folder_bytes(folder / "mlflow" / "artifacts")
            db_before = (folder / "mlflow" / "mlflow.db").stat().st_size
            mlflow_cpu, prefect_pid = _process_cpu(server.process.pid), _prefect_server_pid()
            prefect_cpu = _process_cpu(prefect_pid) if prefect_pid else 0.0
            counts.on = True
            began, cpu = time.perf_counter(), cpu_seconds()
            checks = _run_fleet(mode, fleet, settings)
            seconds, cpu = time.perf_counter() - began, cpu_seconds() - cpu
            counts.on = False
            n_versions = len(checks)
            verdicts = Counter(check.verdict for check in checks)
            rows_after = _mlflow_rows(folder / "mlflow" / "mlflow.db")
            files_after = _folder_bytes(folder / "mlflow" / "artifacts")
            run = {
                "run": attempt, "mode": mode, "backend": backend, "versions": n_versions,
                "rows_per_version": args.rows, "verdicts": dict(verdicts), "seconds": seconds, "cpu_seconds": cpu,
                "mlflow_server_cpu_seconds": _process_cpu(server.process.pid) - mlflow_cpu,
                "prefect_server_cpu_seconds": (_process_cpu(prefect_pid) - prefect_cpu) if prefect_pid else None,
                "seconds_per_version": seconds / n_versions, "load_average": os.getloadavg(),
                "sql_per_version": sum(counts.sql.values()) / n_versions, "sql": dict(counts.sql),
                "mlflow_http_per_version": sum(counts.http.values()) / n_versions,
                "mlflow_http": dict(counts.http.most_common()),
                "prefect_http_per_version": sum(counts.prefect.values()) / n_versions,
                "prefect_http": dict(counts.prefect.most_common()),
                "mlflow_rows_written": {key: rows_after[key] - rows_before[key] for key in rows_after},
                "artifact_files_written": files_after[0] - files_before[0],
                "artifact_bytes_written": files_after[1] - files_before[1],
                "mlflow_db_bytes_growth": (folder / "mlflow" / "mlflow.db").stat().st_size - db_before,
            }
            runs.append(run)
            print(f"  {mode}, {attempt}: {seconds:.1f} s wall, {cpu:.1f} s CPU, {run['sql_per_version']:.1f} SQL and "
                  f"{run['mlflow_http_per_version']:.1f} MLflow calls per version; verdicts {dict(verdicts)}",
                  flush=True)
        if args.profile:
            profiled(args.fleet_mode[0], fleet, settings, args.profile)
    return {"registered_seconds": registered, "filled_seconds": filled, "runs": runs}


def profiled(mode: str, fleet: Fleet, settings: Any, path: Path) -> None:
    """One more hourly run of the fleet under cProfile (not timed: the profiler slows it), its
    statistics written to ``path`` and the top of them by cumulative time printed."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    began = time.perf_counter()
    profile.enable()
    try:
        _run_fleet(mode, fleet, settings)
    finally:
        profile.disable()
    print(f"  {mode}, profiled run: {time.perf_counter() - began:.1f} s wall under cProfile; statistics in {path}",
          flush=True)
    profile.dump_stats(path)
    pstats.Stats(str(path)).sort_stats("cumulative").print_stats(40)


def _run_fleet(mode: str, fleet: Fleet, settings: Any) -> list[Any]:
    import flows.pipelines.monitor as monitor_module

    if mode == "fleet":
        return list(monitor_module.monitor_fleet(settings=settings))
    checks = []
    for name in fleet.models:
        checks.extend(monitor_module.monitor(name, settings=settings))
    return checks


# --------------------------------------------------------------------------- stored bytes


def storage(backend: str, folder: Path, n_rows: int) -> list[dict[str, Any]]:
    """Bytes per served row (request id 36 characters, a group, a label) at K = 10, 100, 1,000."""
    import sqlalchemy as sa

    from monitoring import PredictionLog, log_predictions

    results = []
    for n_classes in (10, 100, 1000):
        rng = np.random.default_rng(n_classes)
        with log_url(backend, folder, f"storage-{n_classes}") as url:
            with PredictionLog(url) as log:
                log.create()
                now = datetime.now(UTC)
                for offset in range(0, n_rows, 2000):
                    size = min(2000, n_rows - offset)
                    logits, labels = traffic(rng, size, n_classes, 1.5)
                    ids = [f"{i:08d}-0000-4000-8000-{i:012d}" for i in range(offset, offset + size)]
                    log_predictions(log, "storage", "1", 1.5, logits, ids, "web", now, labels=labels)
                if backend == "sqlite":
                    with log.engine.connect() as conn:
                        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                        conn.exec_driver_sql("VACUUM")
                    path = Path(url.removeprefix("sqlite:///"))
                    total = path.stat().st_size
                else:
                    with log.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                        conn.exec_driver_sql("VACUUM ANALYZE prediction_log")
                        total = int(conn.execute(sa.text("SELECT pg_total_relation_size('prediction_log')")).scalar_one())
            results.append({"backend": backend, "k": n_classes, "rows": n_rows, "bytes": total,
                            "bytes_per_row": total / n_rows, "logit_bytes_per_row": 4 * n_classes})
    return results


# --------------------------------------------------------------------------- the tables


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" if i == 0 else "---:" for i in range(len(head))) + " |"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def report(results: dict[str, Any]) -> str:
    parts = [f"machine: {results['machine']}"]
    if "ingest" in results:
        parts.append(_table(["backend", "K", "path", "rows/s", "CPU s per 10k rows"], [
            [r["backend"], str(r["k"]), r["path"], f"{r['rows_per_second']:,.0f}",
             f"{1e4 * r['cpu_seconds'] / r['rows']:.2f}"] for r in results["ingest"]]))
    if "check" in results:
        parts.append(_table(["backend", "K", "window rows", "reads", "wall s", "CPU s", "µs/row", "CPU µs/row",
                             "tracemalloc peak MiB", "RSS growth MiB"], [
            [r["backend"], str(r.get("k", 10)), f"{r['window_rows']:,}", r["reads"], f"{r['seconds']:.2f}", f"{r['cpu_seconds']:.2f}",
             f"{r['us_per_row']:.1f}", f"{r['cpu_us_per_row']:.1f}", f"{r['tracemalloc_peak_bytes'] / MIB:.1f}",
             f"{r['rss_growth_bytes'] / MIB:.1f}"] for r in results["check"]]))
    if "fleet" in results:
        parts.append(_table(["run", "mode", "versions", "wall s", "CPU s (flow)", "CPU s (MLflow, Prefect)",
                             "SQL/version", "MLflow calls/version", "Prefect calls/version"], [
            [r["run"], r["mode"], str(r["versions"]), f"{r['seconds']:.1f}", f"{r['cpu_seconds']:.1f}",
             f"{r['mlflow_server_cpu_seconds']:.1f}, {r['prefect_server_cpu_seconds'] or 0:.1f}",
             f"{r['sql_per_version']:.1f}", f"{r['mlflow_http_per_version']:.1f}",
             f"{r['prefect_http_per_version']:.1f}"] for r in results["fleet"]["runs"]]))
    if "storage" in results:
        parts.append(_table(["backend", "K", "bytes/row", "of which logits"], [
            [r["backend"], str(r["k"]), f"{r['bytes_per_row']:,.0f}", f"{r['logit_bytes_per_row']:,}"]
            for r in results["storage"]]))
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="ingest,check,fleet,storage", help="comma-separated sections")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--ingest-rows", type=int, default=20_000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                        help="window rows of the check section at K = 10")
    parser.add_argument("--large-k-sizes", type=int, nargs="*", default=[10_000, 100_000],
                        help="window rows of the check section at K = 1,000")
    parser.add_argument("--chunk-size", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=2, help="timed reads per window (the fastest kept)")
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--aliases", type=int, default=4, choices=range(1, 5))
    parser.add_argument("--rows", type=int, default=10_000, help="labelled rows per fleet version")
    parser.add_argument("--fleet-mode", choices=("fleet", "per-model"), nargs="+", default=["fleet"],
                        help="one scheduled run over the fleet: one monitor_fleet run, or one monitor run per "
                             "model; the first mode runs twice (first check, next hour), each further mode on the "
                             "same fleet the hour after")
    parser.add_argument("--profile", type=Path, help="after the timed fleet runs, one more under cProfile, its "
                                                     "statistics written here")
    parser.add_argument("--fleet-backend", choices=("sqlite", "postgresql"), default="postgresql")
    parser.add_argument("--storage-rows", type=int, default=20_000)
    parser.add_argument("--out", type=Path, help="write the results as JSON")
    parser.add_argument("--measure-reads", help=argparse.SUPPRESS)
    parser.add_argument("--how", choices=("three", "one"), help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("rss", "tracemalloc"), default="rss", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_reads:
        print(json.dumps(measure_reads(args.measure_reads, args.how, args.chunk_size, args.mode)))
        return

    sections = set(args.only.split(","))
    backends = args.backends.split(",")
    results: dict[str, Any] = {"machine": machine_line(), "started": datetime.now(UTC).isoformat()}
    print(results["machine"], flush=True)
    folder = Path(tempfile.mkdtemp(prefix="thermostat-bench-monitor-"))
    with contextlib.ExitStack() as stack:
        needs_postgres = "postgresql" in backends or ("fleet" in sections and args.fleet_backend == "postgresql")
        if needs_postgres:
            POSTGRES_URL.append(stack.enter_context(throwaway_postgres()))
        try:
            if "ingest" in sections:
                results["ingest"] = [row for backend in backends for k, n in ((10, args.ingest_rows),
                                                                               (1000, args.ingest_rows // 4))
                                     for row in ingest(backend, k, n, folder)]
                print(report({"machine": results["machine"], "ingest": results["ingest"]}), flush=True)
            if "check" in sections:
                results["check"] = [row for backend in backends for k, sizes in ((10, args.sizes),
                                                                                 (1000, args.large_k_sizes))
                                    for row in check_cost(backend, k, sizes, args.chunk_size, folder, args.repeats)]
                print(report({"machine": results["machine"], "check": results["check"]}), flush=True)
            if "storage" in sections:
                results["storage"] = [row for backend in backends for row in storage(backend, folder, args.storage_rows)]
                print(report({"machine": results["machine"], "storage": results["storage"]}), flush=True)
            if "fleet" in sections:
                results["fleet"] = fleet_run(args, folder)
                print(report({"machine": results["machine"], "fleet": results["fleet"]}), flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    results["machine_after"] = machine_line()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, default=str))
    print(report(results))


if __name__ == "__main__":
    main()
