"""Partitioned scored sets (issue 13): the local engine against Dask, on a set it generates.

The benchmark writes its own data (seeded, vectorised, one row group at a time): by default
20 million rows × 10 classes in 40 Parquet files of 2 row groups each (80 partitions of
250,000 rows; a partition is one row group). Columns: ``id`` (text, ``r000000012345``),
``label`` (int64, uniform), ``group`` (5 groups) and float32 ``logit_0`` ... drawn so the
"model" is overconfident: the top logit is the label's 80% of the time, logits
= 2 × (normal + 3 × one-hot(top)), so T ≈ 1.76. A warm-up set (4 partitions of ~105,000
rows: enough logits for the parallel kernels) is written to ``_warmup/`` in the same
folder, which :func:`calibration.open_partitioned` skips.

Each measurement is a **fresh process** (the local and the Dask runs interleaved, repeated
``--repeats`` times): it warms up on the warm-up set (imports, numba kernels from the
cache; for Dask, a task pinned to every worker and one run through the cluster), then
times ``fit_partitioned`` and ``evaluate_partitioned(trusted=True)`` at the fitted T and,
separately sampled, ``check_unique_ids`` (the id check alone). The engine is wrapped by
:class:`TimedEngine`, which times each ``map`` and names it by the function mapped
(``fn.func.__name__`` of the partial): the validating map (``_check_and_sample``: read,
validate, hash the ids, take the warm-start sample), the NLL expansion passes
(``_expansion_sums``), the evaluation (``_partition_stats``), the id check's map
(``_id_hashes``) and its confirmation (``_rows_with_hashes``, only when two hashes are
equal). What the calling process does **between** the maps is timed too: right after the
validating map it checks the ids (concatenates the partitions' sorted 64-bit hashes, sorts
them, compares neighbours: the driver's share of the check) and runs the warm start on a
4,000-row sample; between passes it only adds sums. Memory and CPU:

* every process involved (the local process; the Dask driver and each worker, through
  ``client.run``) runs a sampler thread (psutil RSS and CPU time every 5 ms) started just
  before the timed section, after handing freed memory back (``gc``, Arrow's pool, glibc's
  ``malloc_trim``) so that what the warm-up left cached does not hide the run's own
  memory; the peak growth above the RSS at that moment (the baseline) is reported per
  process and per phase, and for the driver's own phases also the rise above the RSS at
  the phase's start;
* the kernel's high-water mark (``VmHWM``, reset through ``/proc/self/clear_refs`` at the
  same moment) gives the exact peak, which 5 ms sampling can miss; the id check alone has
  its own samplers and high-water mark, so its driver peak is exactly its own.

A worker's peak is compared with the in-memory bytes of one partition (the Arrow table of
one row group, all columns: ``pq.ParquetFile(f).read_row_group(0).nbytes``); the target is
a peak of at most 3× that, whatever the size of the set. The Dask wall time excludes the
cluster's start (reported on its own). The per-row cost of the maps is wall × workers /
rows (and, unaffected by other load on a shared machine, the workers' CPU seconds / rows);
the estimate for a day (``DAY_ROWS`` on ``DAY_WORKERS`` workers, see ``_estimate``) scales
the maps linearly in rows per worker and the driver's id check as n log n (one process
sorts every hash, whatever the number of workers), and states the driver's hash memory
(8 bytes a row held; the measured peak per row, scaled).

Usage::

    .venv/bin/python -m benchmarks.partitioned                 # 20M × 10, 40 files, 3 repeats
    .venv/bin/python -m benchmarks.partitioned --rows 2000000 --files 4 --keep --dir /tmp/p2m
    .venv/bin/python -m benchmarks.partitioned --out results.json
    .venv/bin/python -m benchmarks.partitioned --probe-sort 5e8    # the driver's id check alone, 500M hashes

Without ``--keep`` the generated folder is removed at the end; a folder whose
``_manifest.json`` matches the options is reused rather than written again.
"""

from __future__ import annotations

import argparse
import array
import gc
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

GENERATOR_VERSION = 1
GROUPS = ("web", "ios", "android", "partner", "email")
ID_DIGITS = 12
SAMPLE_SECONDS = 0.005
MEMORY_TARGET = 3.0  # worker peak / one partition's in-memory bytes
TOLERANCE_T = 1e-9
DAY_ROWS = 500_000_000
DAY_WORKERS = 16
HASH_BYTES = 8  # a 64-bit id hash, held by the driver for every row
MANIFEST = "_manifest.json"
WARMUP = "_warmup"
MiB = 1024 * 1024
# Logits (rows × K) from which calibration's kernels run in parallel: the value of its private
# PARALLEL_MIN_ELEMENTS (calibration/_kernels.py), copied because code outside calibration/
# imports only its public names. Only the warm-up set's size depends on it: were it to grow, the
# first timed map would pay for loading the parallel kernels.
PARALLEL_MIN_ELEMENTS = 1 << 20

# The maps of the partitioned core, by the name of the function they run.
PHASES = {
    "_check_and_sample": "validate + hash ids + warm-start sample",
    "_expansion_sums": "NLL expansion pass",
    "_partition_stats": "evaluation (trusted)",
    "_id_hashes": "read + hash ids",
    "_rows_with_hashes": "duplicate-id confirmation",
}
# What the calling process does between the maps, by the map it follows.
DRIVER_AFTER = {
    "_check_and_sample": "driver: id check (concatenate, sort, compare hashes) + warm start",
    "_id_hashes": "driver: id check (concatenate, sort, compare hashes)",
}
DRIVER_OTHER = "driver: the rest (reduces, search)"
FIT_ID_CHECK = f"fit: {DRIVER_AFTER['_check_and_sample']}"
CHECK_DRIVER = f"check: {DRIVER_AFTER['_id_hashes']}"


# ------------------------------------------------------------------------------ data


def _chunk(rng: np.random.Generator, first_id: int, n: int, n_classes: int) -> Any:
    """One row group's rows as an Arrow table: vectorised, ~75 bytes a row at K = 10."""
    import pyarrow as pa  # type: ignore[import-untyped]

    labels = rng.integers(0, n_classes, n)
    top = np.where(rng.random(n) < 0.8, labels, rng.integers(0, n_classes, n))
    logits = rng.standard_normal((n, n_classes), dtype=np.float32)
    logits[np.arange(n), top] += np.float32(3.0)
    logits *= np.float32(2.0)
    # Ids "r" + 12 digits, built as one byte buffer (no Python strings).
    width = 1 + ID_DIGITS
    text = np.empty((n, width), dtype=np.uint8)
    text[:, 0] = ord("r")
    powers = 10 ** np.arange(ID_DIGITS - 1, -1, -1, dtype=np.int64)
    text[:, 1:] = (np.arange(first_id, first_id + n, dtype=np.int64)[:, None] // powers) % 10 + ord("0")
    offsets = np.arange(0, width * (n + 1), width, dtype=np.int32)
    ids = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text))
    groups = pa.array(list(GROUPS), type=pa.string()).take(pa.array(rng.integers(0, len(GROUPS), n)))
    columns: dict[str, Any] = {"id": ids, "label": pa.array(labels, type=pa.int64()), "group": groups}
    for k in range(n_classes):
        columns[f"logit_{k}"] = pa.array(logits[:, k])
    return pa.table(columns)


def _split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` near-equal counts."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _write_files(folder: Path, rows: int, files: int, row_groups: int, n_classes: int, seed: int,
                 first_id: int = 0) -> None:  # fmt: skip
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    folder.mkdir(parents=True, exist_ok=True)
    next_id = first_id
    for index, file_rows in enumerate(_split(rows, files)):
        rng = np.random.default_rng([seed, index])
        writer = None
        try:
            for group_rows in _split(file_rows, row_groups):
                table = _chunk(rng, next_id, group_rows, n_classes)
                next_id += group_rows
                if writer is None:
                    writer = pq.ParquetWriter(folder / f"part-{index:05d}.parquet", table.schema)
                writer.write_table(table, row_group_size=group_rows)
                del table
        finally:
            if writer is not None:
                writer.close()


def _warmup_rows(n_classes: int) -> int:
    """Rows of a warm-up partition: enough logits for the parallel kernels."""
    return max(math.ceil(PARALLEL_MIN_ELEMENTS / n_classes) + 1_000, 10_000)


def prepare(folder: Path, rows: int, files: int, row_groups: int, n_classes: int, seed: int) -> tuple[float, bool]:
    """Write the set (and the warm-up set) unless a matching manifest says it is there.

    Returns the seconds taken and whether the folder was reused.
    """
    manifest = {"version": GENERATOR_VERSION, "rows": rows, "files": files, "row_groups": row_groups,
                "classes": n_classes, "seed": seed}  # fmt: skip
    path = folder / MANIFEST
    if path.is_file():
        try:
            found = json.loads(path.read_text())
        except ValueError:
            found = None
        if found == manifest and all((folder / f"part-{i:05d}.parquet").is_file() for i in range(files)):
            return 0.0, True
    if folder.exists() and any(folder.iterdir()) and not path.is_file():
        raise SystemExit(f"{folder}: exists, is not empty and has no {MANIFEST}; give an empty or new --dir")
    _remove(folder)
    began = time.perf_counter()
    warm = _warmup_rows(n_classes)
    _write_files(folder / WARMUP, 4 * warm, 2, 2, n_classes, seed + 1, first_id=10**ID_DIGITS - 4 * warm)
    _write_files(folder, rows, files, row_groups, n_classes, seed)
    path.write_text(json.dumps(manifest))  # last: a half-written folder is never reused
    return time.perf_counter() - began, False


def _remove(folder: Path) -> None:
    """Remove what :func:`prepare` writes (and the folder if it is then empty)."""
    if not folder.exists():
        return
    for file in folder.glob("part-*.parquet"):
        file.unlink()
    shutil.rmtree(folder / WARMUP, ignore_errors=True)
    (folder / MANIFEST).unlink(missing_ok=True)
    if not any(folder.iterdir()):
        folder.rmdir()


# ------------------------------------------------------------------------------ memory


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _release_memory() -> None:
    """Hand freed memory back to the system (Python's collector, Arrow's pool, glibc's
    arenas), so a baseline taken after the warm-up does not hide the run's own memory in
    what the warm-up left cached."""
    import ctypes

    gc.collect()
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except (ImportError, AttributeError):
        pass
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_high_water_mark() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class RssSampler:
    """A daemon thread reading this process's RSS and CPU time every ``interval`` seconds
    (kept in three compact arrays: ~24 bytes a sample)."""

    def __init__(self, interval: float = SAMPLE_SECONDS) -> None:
        import psutil  # type: ignore[import-untyped]

        self.interval = interval
        self.times = array.array("d")
        self.values = array.array("q")
        self.cpu = array.array("d")
        self._process = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self.baseline = 0
        self.hwm_reset = False

    def start(self) -> RssSampler:
        _release_memory()
        self.hwm_reset = _reset_high_water_mark()
        self.baseline = int(self._process.memory_info().rss)
        self._sample()
        self._thread.start()
        return self

    def _sample(self) -> None:
        cpu = self._process.cpu_times()
        self.times.append(time.time())
        self.values.append(int(self._process.memory_info().rss))
        self.cpu.append(cpu.user + cpu.system)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def stop(self) -> dict[str, Any]:
        """Stop; the samples and the exact high-water mark since :meth:`start`."""
        import pyarrow as pa

        self._stop.set()
        self._thread.join()
        self._sample()
        hwm = _status_bytes("VmHWM") if self.hwm_reset else None
        return {
            "pid": os.getpid(),
            "arrow_pool": pa.default_memory_pool().backend_name,
            "baseline": self.baseline,
            "hwm_growth": None if hwm is None else hwm - self.baseline,
            "times": np.frombuffer(self.times, dtype=np.float64).tolist(),
            "values": np.frombuffer(self.values, dtype=np.int64).tolist(),
            "cpu": np.frombuffer(self.cpu, dtype=np.float64).tolist(),
        }


def _start_worker_sampler(dask_worker: Any = None) -> int:
    """``client.run``: start a sampler in this worker (kept on the worker object)."""
    sampler = RssSampler().start()
    dask_worker._thermostat_rss_sampler = sampler
    return sampler.baseline


def _stop_worker_sampler(dask_worker: Any = None) -> dict[str, Any]:
    """``client.run``: stop this worker's sampler; its samples."""
    sampler: RssSampler = dask_worker._thermostat_rss_sampler
    del dask_worker._thermostat_rss_sampler
    return sampler.stop()


def _warm_worker(folder: str) -> int:
    """A task pinned to one worker: the whole computation on the warm-up set, in the
    worker's task thread (imports, kernels loaded from the numba cache)."""
    from calibration import LOCAL_ENGINE, check_unique_ids, evaluate_partitioned, fit_partitioned, open_partitioned

    warm = open_partitioned(folder)
    fit = fit_partitioned(warm, engine=LOCAL_ENGINE)
    evaluate_partitioned(warm, temperature=fit.temperature, engine=LOCAL_ENGINE, trusted=True)
    evaluate_partitioned(warm, temperature=fit.temperature, engine=LOCAL_ENGINE)
    check_unique_ids(warm, engine=LOCAL_ENGINE)
    return os.getpid()


def _memory_summary(samples: dict[str, Any], segments: list[dict[str, Any]]) -> dict[str, Any]:
    """Peak growth above the baseline and CPU seconds: overall, and within each segment
    (peak over the samples inside it; rise = that peak minus the RSS of the last sample
    before it; CPU from the last sample before it to the first after it)."""
    times = np.asarray(samples["times"])
    rss = np.asarray(samples["values"], dtype=np.int64)
    growth = rss - samples["baseline"]
    cpu = np.asarray(samples["cpu"])
    peaks: list[int | None] = []
    rises: list[int | None] = []
    cpus: list[float] = []
    for segment in segments:
        first = max(int(np.searchsorted(times, segment["start"], side="right")) - 1, 0)
        last = min(int(np.searchsorted(times, segment["end"], side="left")), times.size - 1)
        inside = (times >= segment["start"]) & (times <= segment["end"])
        peak = int(growth[inside].max()) if inside.any() else None
        peaks.append(peak)
        rises.append(None if peak is None else int(rss[inside].max() - rss[first]))
        cpus.append(float(cpu[last] - cpu[first]))
    return {
        "pid": samples["pid"],
        "arrow_pool": samples["arrow_pool"],
        "baseline": samples["baseline"],
        "peak_growth": int(growth.max()),
        "hwm_growth": samples["hwm_growth"],
        "cpu_seconds": float(cpu[-1] - cpu[0]),
        "per_segment": peaks,
        "rise_per_segment": rises,
        "cpu_per_segment": cpus,
        "n_samples": int(times.size),
    }


# ------------------------------------------------------------------------------ one run


class TimedEngine:
    """An engine that times each map of the engine it wraps (wall clock, both ends) and
    names it by the function mapped (``fn.func.__name__`` of a partial)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.calls: list[dict[str, Any]] = []
        self.label = ""

    @property
    def name(self) -> str:
        return str(self.engine.name)

    @property
    def n_workers(self) -> int:
        return int(self.engine.n_workers)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        function = getattr(fn, "func", fn)
        start = time.time()
        results: list[Any] = self.engine.map(fn, items)
        self.calls.append({"function": function.__name__, "items": len(items), "start": start, "end": time.time(),
                           "part": self.label})  # fmt: skip
        return results


def _driver_segment(part: str, after: str | None, start: float, end: float) -> dict[str, Any]:
    return {"part": part, "kind": "driver", "function": DRIVER_AFTER.get(after or "", DRIVER_OTHER), "items": 0,
            "start": start, "end": end}  # fmt: skip


def _segments(calls: list[dict[str, Any]], marks: dict[str, list[float]]) -> list[dict[str, Any]]:
    """The timed section as consecutive segments, per part (fit, evaluate, check): each map,
    and the calling process's own work before, between and after the maps (``"driver"``)."""
    segments: list[dict[str, Any]] = []
    for part, (start, end) in marks.items():
        previous, at = None, start
        for call in calls:
            if call["part"] != part:
                continue
            segments.append(_driver_segment(part, previous, at, call["start"]))
            segments.append({"part": part, "kind": "map", "function": call["function"], "items": call["items"],
                             "start": call["start"], "end": call["end"]})  # fmt: skip
            previous, at = call["function"], call["end"]
        segments.append(_driver_segment(part, previous, at, end))
    return segments


def _phase_key(segment: dict[str, Any]) -> str:
    function = segment["function"]
    return f"{segment['part']}: {PHASES.get(function, function) if segment['kind'] == 'map' else function}"


def _timed_run(engine: Any, data: Any) -> dict[str, Any]:
    """fit_partitioned, then evaluate_partitioned(trusted) at the fitted T, timed."""
    from calibration import evaluate_partitioned, fit_partitioned

    timed = TimedEngine(engine)
    timed.label = "fit"
    load_before = os.getloadavg()[0]
    began, began_at = time.perf_counter(), time.time()
    fit = fit_partitioned(data, engine=timed)
    fitted, fitted_at = time.perf_counter(), time.time()
    timed.label = "evaluate"
    report = evaluate_partitioned(data, temperature=fit.temperature, engine=timed, trusted=True)
    done, done_at = time.perf_counter(), time.time()
    return {
        "fit_seconds": fitted - began,
        "evaluate_seconds": done - fitted,
        "load_average": [load_before, os.getloadavg()[0]],
        "temperature": fit.temperature,
        "nll_before": fit.nll_before,
        "nll_after": fit.nll_after,
        "fit_n": fit.n,
        "report": {"n": report.n, "accuracy": report.accuracy, "nll": report.nll, "ece": report.ece,
                   "mce": report.mce, "brier": report.brier, "mean_confidence": report.mean_confidence,
                   "bin_counts": [int(count) for count in report.table.count]},  # fmt: skip
        "segments": _segments(timed.calls, {"fit": [began_at, fitted_at], "evaluate": [fitted_at, done_at]}),
    }


def _timed_check(engine: Any, data: Any) -> dict[str, Any]:
    """check_unique_ids alone, timed: its map, then the driver's concatenate, sort, compare."""
    from calibration import check_unique_ids

    timed = TimedEngine(engine)
    timed.label = "check"
    began, began_at = time.perf_counter(), time.time()
    check_unique_ids(data, engine=timed)
    done, done_at = time.perf_counter(), time.time()
    return {"seconds": done - began, "segments": _segments(timed.calls, {"check": [began_at, done_at]})}


def measure_local(folder: Path) -> dict[str, Any]:
    """In this fresh process: warm up, then the timed runs on the local engine."""
    from calibration import LOCAL_ENGINE, open_partitioned

    _warm_worker(str(folder / WARMUP))
    data = open_partitioned(folder)
    sampler = RssSampler().start()
    result = _timed_run(LOCAL_ENGINE, data)
    samples = sampler.stop()
    driver = _memory_summary(samples, result["segments"])
    # The process is its own worker.
    result.update(engine="local", workers=1, cluster_start_seconds=None, driver=driver, worker_memory=[driver])
    sampler = RssSampler().start()
    check = _timed_check(LOCAL_ENGINE, data)
    samples = sampler.stop()
    check["driver"] = _memory_summary(samples, check["segments"])
    check["worker_memory"] = [check["driver"]]
    result["check"] = check
    return result


def measure_dask(folder: Path, n_workers: int) -> dict[str, Any]:
    """In this fresh process: start a local cluster (timed), warm up every worker and the
    cluster, then the timed runs; the workers' samplers bracket each."""
    from calibration import check_unique_ids, evaluate_partitioned, fit_partitioned, open_partitioned
    from flows.orchestration.engines import DaskEngine

    # By name: the workers import this module (PYTHONPATH holds the repository).
    import benchmarks.partitioned as bench

    warm_folder = str(folder / WARMUP)
    began = time.perf_counter()
    engine = DaskEngine(n_workers=n_workers)
    with engine:
        client = engine.client
        client.wait_for_workers(n_workers)
        cluster_start = time.perf_counter() - began
        warmed = time.perf_counter()
        workers = sorted(client.scheduler_info()["workers"])
        pinned = [client.submit(bench._warm_worker, warm_folder, workers=[address], allow_other_workers=False,
                                pure=False) for address in workers]  # fmt: skip
        client.gather(pinned)  # type: ignore[no-untyped-call]
        del pinned
        warm = open_partitioned(warm_folder)
        fit = fit_partitioned(warm, engine=engine)
        evaluate_partitioned(warm, temperature=fit.temperature, engine=engine, trusted=True)
        check_unique_ids(warm, engine=engine)
        warm_seconds = time.perf_counter() - warmed
        data = open_partitioned(folder)

        def sampled(run: Callable[[Any, Any], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
            baselines = client.run(bench._start_worker_sampler)
            sampler = RssSampler().start()
            result = run(engine, data)
            samples = sampler.stop()
            worker_samples = client.run(bench._stop_worker_sampler)
            return result, samples, [worker_samples[address] for address in sorted(baselines)]

        result, samples, worker_samples = sampled(_timed_run)
        check, check_samples, check_worker_samples = sampled(_timed_check)
    segments = result["segments"]
    result.update(
        engine="dask", workers=n_workers, cluster_start_seconds=cluster_start, warm_up_seconds=warm_seconds,
        driver=_memory_summary(samples, segments),
        worker_memory=[_memory_summary(worker, segments) for worker in worker_samples],
    )
    check.update(driver=_memory_summary(check_samples, check["segments"]),
                 worker_memory=[_memory_summary(worker, check["segments"]) for worker in check_worker_samples])
    result["check"] = check
    return result


def _fresh(engine: str, folder: Path, n_workers: int) -> dict[str, Any]:
    """One measurement in a fresh interpreter (the last line of its output is the JSON)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".thermostat" / "numba-cache"))
    command = [sys.executable, "-m", "benchmarks.partitioned", "--measure", engine, "--dir", str(folder),
               "--workers", str(n_workers)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {engine} measurement failed ({done.returncode}):\n{done.stderr[-4000:]}")
    values: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return values


# ------------------------------------------------------------------------------ report


def _median_min(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values)}


def _sections(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The separately sampled sections of a run: fit + evaluation, then the id check alone."""
    return [run, run["check"]]


def _phase_table(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per phase (the maps of one function, or the driver's own work, in the fit, the
    evaluation or the id check): maps, partitions, seconds per run, CPU seconds per run (the
    workers' for a map, the driver's for the driver's work), and the largest worker and
    driver RSS growth seen while it ran (and the driver's rise within it)."""
    phases: dict[str, dict[str, Any]] = {}
    for run in runs:
        seen: dict[str, dict[str, Any]] = {}
        for section in _sections(run):
            driver, workers = section["driver"], section["worker_memory"]
            for index, segment in enumerate(section["segments"]):
                key = _phase_key(segment)
                is_map = segment["kind"] == "map"
                entry = seen.setdefault(key, {"kind": segment["kind"], "maps": 0, "items": 0, "seconds": 0.0,
                                              "cpu": 0.0, "worker_peak": 0, "driver_peak": 0, "driver_rise": 0})
                entry["maps"] += int(is_map)
                entry["items"] += segment["items"]
                entry["seconds"] += segment["end"] - segment["start"]
                entry["cpu"] += (sum(worker["cpu_per_segment"][index] for worker in workers) if is_map
                                 else driver["cpu_per_segment"][index])  # fmt: skip
                for worker in workers:
                    entry["worker_peak"] = max(entry["worker_peak"], worker["per_segment"][index] or 0)
                entry["driver_peak"] = max(entry["driver_peak"], driver["per_segment"][index] or 0)
                entry["driver_rise"] = max(entry["driver_rise"], driver["rise_per_segment"][index] or 0)
        parts = list(dict.fromkeys(key.split(":")[0] for key in seen))
        ordered = sorted(seen, key=lambda key: (parts.index(key.split(":")[0]), key.endswith(DRIVER_OTHER)))
        for key in ordered:
            entry = seen[key]
            merged = phases.setdefault(key, {"kind": entry["kind"], "maps": [], "items": [], "seconds": [],
                                             "cpu": [], "worker_peak": 0, "driver_peak": 0, "driver_rise": 0})
            for field in ("maps", "items", "seconds", "cpu"):
                merged[field].append(entry[field])
            for field in ("worker_peak", "driver_peak", "driver_rise"):
                merged[field] = max(merged[field], entry[field])
    return phases


def _worker_peak(section: dict[str, Any]) -> tuple[int, int | None]:
    """The largest worker's sampled peak growth and its exact (VmHWM) growth."""
    sampled = max(worker["peak_growth"] for worker in section["worker_memory"])
    exact = [worker["hwm_growth"] for worker in section["worker_memory"] if worker["hwm_growth"] is not None]
    return sampled, max(exact) if exact else None


def _driver_peak(section: dict[str, Any]) -> int:
    """The driver's peak growth: the larger of sampled and VmHWM."""
    return int(max(section["driver"]["peak_growth"], section["driver"]["hwm_growth"] or 0))


def _worker_cpu(run: dict[str, Any]) -> float:
    return float(sum(worker["cpu_seconds"] for worker in run["worker_memory"]))


def _estimate(summary: dict[str, Any]) -> dict[str, Any]:
    """A day of DAY_ROWS rows on DAY_WORKERS workers, from the Dask runs.

    The maps (validation with the id hashing, expansion passes, evaluation) are linear in the
    rows a worker reads: per-row cost = wall × workers / rows, and, as a cross-check that other
    load on the machine does not inflate, the workers' CPU seconds / rows (a worker = one core);
    scaled by DAY_ROWS / DAY_WORKERS. The driver's id check is not spread over the workers: one
    process sorts every 8-byte hash, O(n log n), so its time is scaled by n log n (its CPU the
    same way); the driver's other work (reduces over the partitions) by the rows. Its memory:
    HASH_BYTES a row held, and the measured peak per row scaled by the rows.
    """
    rows = summary["rows"]
    dask = summary["engines"]["dask"]
    workers = dask["workers"]
    phases = dask["phases"]
    linear = DAY_ROWS / rows
    nlogn = DAY_ROWS * math.log2(DAY_ROWS) / (rows * math.log2(rows))

    def median(key: str, field: str = "seconds") -> float:
        return statistics.median(phases[key][field]) if key in phases else 0.0

    def maps(part: str, field: str) -> float:
        return sum(median(key, field) for key, phase in phases.items()
                   if key.startswith(part + ":") and phase["kind"] == "map")  # fmt: skip

    fit_maps, fit_maps_cpu = maps("fit", "seconds"), maps("fit", "cpu")
    evaluate_maps, evaluate_maps_cpu = maps("evaluate", "seconds"), maps("evaluate", "cpu")
    id_check, id_check_cpu = median(FIT_ID_CHECK), median(FIT_ID_CHECK, "cpu")
    fit_rest, fit_rest_cpu = median(f"fit: {DRIVER_OTHER}"), median(f"fit: {DRIVER_OTHER}", "cpu")
    evaluate_rest = median(f"evaluate: {DRIVER_OTHER}")
    evaluate_rest_cpu = median(f"evaluate: {DRIVER_OTHER}", "cpu")
    per_worker = DAY_ROWS / DAY_WORKERS
    day_fit_maps = fit_maps * workers / rows * per_worker
    day_fit_maps_cpu = fit_maps_cpu / rows * per_worker
    fit_peak = phases[FIT_ID_CHECK]["driver_peak"] if FIT_ID_CHECK in phases else 0
    check_peak = dask["check_driver_peak_growth"]
    return {
        "rows": DAY_ROWS,
        "workers": DAY_WORKERS,
        "linear_factor": linear,
        "nlogn_factor": nlogn,
        "fit_maps_seconds_per_row_per_worker": fit_maps * workers / rows,
        "fit_maps_cpu_seconds_per_row": fit_maps_cpu / rows,
        "evaluate_seconds_per_row_per_worker": evaluate_maps * workers / rows,
        "evaluate_cpu_seconds_per_row": evaluate_maps_cpu / rows,
        "id_check_driver_seconds": id_check,
        "id_check_driver_cpu_seconds": id_check_cpu,
        "id_check_share_of_fit": id_check / dask["fit_seconds"]["median"],
        "day_fit_maps_seconds": day_fit_maps,
        "day_fit_maps_cpu_seconds": day_fit_maps_cpu,
        "day_id_check_seconds": id_check * nlogn,
        "day_id_check_cpu_seconds": id_check_cpu * nlogn,
        "day_driver_rest_seconds": fit_rest * linear,
        "day_fit_seconds": day_fit_maps + id_check * nlogn + fit_rest * linear,
        "day_fit_cpu_seconds": day_fit_maps_cpu + id_check_cpu * nlogn + fit_rest_cpu * linear,
        "day_evaluate_seconds": evaluate_maps * workers / rows * per_worker + evaluate_rest * linear,
        "day_evaluate_cpu_seconds": evaluate_maps_cpu / rows * per_worker + evaluate_rest_cpu * linear,
        "driver_hash_bytes_held": HASH_BYTES * rows,
        "day_driver_hash_bytes_held": HASH_BYTES * DAY_ROWS,
        "fit_driver_peak_bytes_per_row": fit_peak / rows,
        "day_fit_driver_peak_bytes": fit_peak / rows * DAY_ROWS,
        "check_driver_peak_bytes_per_row": check_peak / rows,
        "day_check_driver_peak_bytes": check_peak / rows * DAY_ROWS,
    }


def _machine() -> str:
    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from importlib.metadata import version

    import pyarrow

    return (f"{os.cpu_count()} CPUs ({model}); Python {platform.python_version()}, numpy {np.__version__}, "
            f"pyarrow {pyarrow.__version__} ({pyarrow.default_memory_pool().backend_name} pool), "
            f"dask {version('dask')}")  # fmt: skip



def summarise(runs: dict[str, list[dict[str, Any]]], partition_bytes: int, rows: int) -> dict[str, Any]:
    """Medians and minimums of the times, the largest peaks, agreement of the engines."""
    engines: dict[str, Any] = {}
    for name, measured in runs.items():
        peaks = [_worker_peak(run) for run in measured]
        exact_values = [peak[1] for peak in peaks if peak[1] is not None]
        check_peaks = [_worker_peak(run["check"]) for run in measured]
        starts = [run["cluster_start_seconds"] for run in measured if run["cluster_start_seconds"] is not None]
        engines[name] = {
            "workers": measured[0]["workers"],
            "fit_seconds": _median_min([run["fit_seconds"] for run in measured]),
            "evaluate_seconds": _median_min([run["evaluate_seconds"] for run in measured]),
            "cluster_start_seconds": _median_min(starts) if starts else None,
            "cpu_seconds": _median_min([_worker_cpu(run) for run in measured]),
            "driver_cpu_seconds": _median_min([run["driver"]["cpu_seconds"] for run in measured]),
            "temperature": [run["temperature"] for run in measured],
            "passes": [sum(s["function"] == "_expansion_sums" for s in run["segments"]) for run in measured],
            "worker_peak_growth": max(peak[0] for peak in peaks),
            "worker_peak_growth_hwm": max(exact_values) if exact_values else None,
            "driver_peak_growth": max(_driver_peak(run) for run in measured),
            "check_seconds": _median_min([run["check"]["seconds"] for run in measured]),
            "check_driver_peak_growth": max(_driver_peak(run["check"]) for run in measured),
            "check_worker_peak_growth": max(max(peak[0], peak[1] or 0) for peak in check_peaks),
            "phases": _phase_table(measured),
            "report": measured[0]["report"],
        }
    local = runs["local"][0]
    every = [run for measured in runs.values() for run in measured]
    worst = max(abs(run["temperature"] - local["temperature"]) / local["temperature"] for run in every)
    same_counts = all(run["fit_n"] == local["fit_n"] and run["report"]["n"] == local["report"]["n"]
                      and run["report"]["bin_counts"] == local["report"]["bin_counts"] for run in every)  # fmt: skip
    report_diff = max(abs(run["report"][key] - local["report"][key])
                      for run in every for key in ("accuracy", "nll", "ece", "brier"))  # fmt: skip
    dask = engines["dask"]
    worker_peak = max(dask["worker_peak_growth"], dask["worker_peak_growth_hwm"] or 0)
    summary: dict[str, Any] = {
        "rows": rows,
        "partition_bytes": partition_bytes,
        "engines": engines,
        "temperature_local": local["temperature"],
        "temperature_dask": runs["dask"][0]["temperature"],
        "relative_temperature_difference": worst,
        "temperature_agrees": worst <= TOLERANCE_T,
        "counts_identical": same_counts,
        "report_max_abs_difference": report_diff,
        "worker_peak_growth": worker_peak,
        "worker_peak_over_partition": worker_peak / partition_bytes,
        "memory_bounded": worker_peak <= MEMORY_TARGET * partition_bytes,
    }
    summary["estimate"] = _estimate(summary)
    return summary


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value / MiB:.1f}"


def _times(entry: dict[str, float] | None, digits: int = 2) -> str:
    return "-" if entry is None else f"{entry['median']:.{digits}f} ({entry['min']:.{digits}f})"


def print_report(summary: dict[str, Any]) -> None:
    part = summary["partition_bytes"]
    rows = summary["rows"]
    print("| engine | fit s | evaluate s | cluster start s | CPU s of the workers (of the driver) | fit s/row/worker "
          "| evaluate s/row/worker | passes | worker peak growth MiB, sampled / VmHWM (× partition) "
          "| driver peak MiB |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, e in summary["engines"].items():
        label = "local (one process)" if name == "local" else f"dask, {e['workers']} workers"
        hwm = e["worker_peak_growth_hwm"]
        worst = max(e["worker_peak_growth"], hwm or 0)
        driver_cpu = "" if name == "local" else f" ({e['driver_cpu_seconds']['median']:.1f})"
        print(f"| {label} | {_times(e['fit_seconds'])} | {_times(e['evaluate_seconds'])} "
              f"| {_times(e['cluster_start_seconds'], 1)} | {_times(e['cpu_seconds'], 1)}{driver_cpu} "
              f"| {e['fit_seconds']['median'] * e['workers'] / rows:.2e} "
              f"| {e['evaluate_seconds']['median'] * e['workers'] / rows:.2e} "
              f"| {'/'.join(str(p) for p in sorted(set(e['passes'])))} "
              f"| {_mib(e['worker_peak_growth'])} / {_mib(hwm)} ({worst / part:.2f}×) "
              f"| {_mib(e['driver_peak_growth'])} |")  # fmt: skip
    print("(times: median (min) over the runs; CPU: user + system of the worker processes, or of the local "
          "process, during fit + evaluation; peaks: the largest over the runs; the local process is its own "
          "driver, so its peak holds the id hashes too)")
    print()
    print("Phases: seconds (median over the runs), CPU seconds (the workers' for a map, the driver's for the "
          "driver's work) and the largest RSS growth above the section's baseline while the phase ran (it "
          "includes what earlier phases left in the allocators), MiB (× one partition); driver rise: above the "
          "driver's RSS at the phase's start. 'check' is check_unique_ids alone, sampled on its own:")
    print("| phase | maps × partitions | local s | dask s | local CPU s | dask CPU s | local peak "
          "| dask worker peak | dask driver peak | dask driver rise |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    local_phases, dask_phases = summary["engines"]["local"]["phases"], summary["engines"]["dask"]["phases"]

    def peak(phase: dict[str, Any] | None, field: str, ratio: bool = True) -> str:
        if not phase:
            return "-"
        value = phase[field]
        return f"{_mib(value)} ({value / part:.2f}×)" if ratio else _mib(value)

    def seconds(phase: dict[str, Any] | None, field: str = "seconds") -> str:
        return "-" if not phase else f"{statistics.median(phase[field]):.2f}"

    for key in dict.fromkeys([*local_phases, *dask_phases]):
        lp, dp = local_phases.get(key), dask_phases.get(key)
        ref = lp or dp
        assert ref is not None
        maps = ref["maps"][0]
        shape = "-" if not maps else f"{maps} × {ref['items'][0] // maps}"
        print(f"| {key} | {shape} | {seconds(lp)} | {seconds(dp)} | {seconds(lp, 'cpu')} | {seconds(dp, 'cpu')} "
              f"| {peak(lp, 'worker_peak')} | {peak(dp, 'worker_peak')} | {peak(dp, 'driver_peak', ratio=False)} "
              f"| {peak(dp, 'driver_rise', ratio=False)} |")
    print()
    verdict = "PASS" if summary["temperature_agrees"] else "FAIL"
    print(f"T: local {summary['temperature_local']:.12f}, dask {summary['temperature_dask']:.12f}; largest "
          f"|ΔT|/T over all runs {summary['relative_temperature_difference']:.1e} (≤ {TOLERANCE_T:g}: {verdict})")
    print(f"counts (n, per-bin counts) identical across engines and runs: "
          f"{'yes' if summary['counts_identical'] else 'NO'}; largest |difference| of accuracy, NLL, ECE, Brier: "
          f"{summary['report_max_abs_difference']:.1e}")  # fmt: skip
    print(f"memory: one partition = {part / MiB:.1f} MiB in memory (Arrow table of one row group, all columns); "
          f"largest Dask worker peak growth in fit + evaluation (the larger of sampled and VmHWM) = "
          f"{_mib(summary['worker_peak_growth'])} MiB = {summary['worker_peak_over_partition']:.2f}× one partition "
          f"(≤ {MEMORY_TARGET:g}×: {'PASS' if summary['memory_bounded'] else 'FAIL'})")  # fmt: skip
    for name, e in summary["engines"].items():
        print(f"check_unique_ids alone, {name}: {_times(e['check_seconds'])} s; driver peak "
              f"{_mib(e['check_driver_peak_growth'])} MiB ({e['check_driver_peak_growth'] / rows:.1f} bytes a row; "
              f"{HASH_BYTES * rows / MiB:.1f} MiB of hashes held); worker peak {_mib(e['check_worker_peak_growth'])} "
              f"MiB ({e['check_worker_peak_growth'] / part:.2f}×)")  # fmt: skip
    est = summary["estimate"]
    print()
    print(f"per-row cost on Dask, wall × workers / rows: the fit's maps "
          f"{est['fit_maps_seconds_per_row_per_worker']:.2e} s (CPU {est['fit_maps_cpu_seconds_per_row']:.2e} s), "
          f"the evaluation "
          f"{est['evaluate_seconds_per_row_per_worker']:.2e} s (CPU {est['evaluate_cpu_seconds_per_row']:.2e} s); the "
          f"driver's id check {est['id_check_driver_seconds']:.2f} s (CPU {est['id_check_driver_cpu_seconds']:.2f} s) "
          f"= {est['id_check_share_of_fit']:.0%} of the fit")  # fmt: skip
    print(f"a day of {DAY_ROWS / 1e6:.0f} million rows on {DAY_WORKERS} workers (maps linear in rows per worker, I/O "
          "from local disk, page-cached, as here: object storage is slower; the driver's sort × "
          f"{est['nlogn_factor']:.1f} for n log n, its other work × {est['linear_factor']:.0f}):")
    print(f"  fit ≈ {est['day_fit_seconds']:.0f} s = maps {est['day_fit_maps_seconds']:.0f} s + driver's id check "
          f"{est['day_id_check_seconds']:.0f} s + other driver work {est['day_driver_rest_seconds']:.0f} s "
          f"(CPU basis {est['day_fit_cpu_seconds']:.0f} s: maps {est['day_fit_maps_cpu_seconds']:.0f} s, id check "
          f"{est['day_id_check_cpu_seconds']:.0f} s); evaluation ≈ {est['day_evaluate_seconds']:.0f} s (CPU basis "
          f"{est['day_evaluate_cpu_seconds']:.0f} s)")  # fmt: skip
    print(f"  driver memory: {est['day_driver_hash_bytes_held'] / 1e9:.1f} GB of hashes held "
          f"({HASH_BYTES} bytes a row); measured peak {est['fit_driver_peak_bytes_per_row']:.1f} bytes a row in the "
          f"fit's id check (≈ {est['day_fit_driver_peak_bytes'] / 1e9:.1f} GB), "
          f"{est['check_driver_peak_bytes_per_row']:.1f} in check_unique_ids (≈ "
          f"{est['day_check_driver_peak_bytes'] / 1e9:.1f} GB)")  # fmt: skip


# ------------------------------------------------------------------------------ the driver's sort alone


def probe_driver_sort(rows: int, partition_rows: int = 250_000) -> dict[str, Any]:
    """The driver's share of the id check at ``rows`` rows, without a set of that size: random
    64-bit hashes in sorted pieces of ``partition_rows`` (what the validating map returns, still
    referenced, as by fit_partitioned's results), then what the calling process does with them:
    concatenate, sort in place, compare neighbours, keep the repeated values. Wall and CPU
    seconds, and the peak growth above the pieces (VmHWM). Run in a fresh process (the
    ``--probe-sort`` option) so the high-water mark is its own."""
    rng = np.random.default_rng(0)
    pieces = []
    for start in range(0, rows, partition_rows):
        piece = rng.bit_generator.random_raw(min(partition_rows, rows - start)).astype(np.uint64, copy=False)
        piece.sort()
        pieces.append(piece)
    _release_memory()
    exact = _reset_high_water_mark()
    base = _status_bytes("VmRSS")
    began, cpu = time.perf_counter(), time.process_time()
    hashes = list(pieces)
    merged = np.concatenate(hashes)
    hashes.clear()
    merged.sort()
    shared = np.unique(merged[1:][merged[1:] == merged[:-1]])
    del merged
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    growth = _status_bytes("VmHWM") - base if exact else None
    return {"rows": rows, "seconds": seconds, "cpu_seconds": cpu, "peak_growth": growth,
            "held_bytes": sum(piece.nbytes for piece in pieces), "shared": int(shared.size)}  # fmt: skip


# ------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--row-groups", type=int, default=2, help="row groups (partitions) per file")
    parser.add_argument("--workers", type=int, default=2, help="Dask workers (local cluster)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--dir", type=Path, help="folder of the generated set (default: under the temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the generated set (reused by a later run)")
    parser.add_argument("--out", type=Path, help="write the results as JSON to this file")
    parser.add_argument("--probe-sort", type=float, metavar="ROWS",
                        help="only time the driver's sort of ROWS synthetic hashes (e.g. 5e8: ~8.5 GB) and exit")
    parser.add_argument("--measure", choices=("local", "dask"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe_sort is not None:
        probe = probe_driver_sort(int(args.probe_sort))
        growth, n = probe["peak_growth"], probe["rows"]
        above = "-" if growth is None else f"{growth / 1e9:.2f} GB ({growth / n:.1f} bytes a row)"
        print(f"the driver's id check on {n:,} hashes in sorted pieces of 250,000 ({probe['held_bytes'] / 1e9:.2f} GB "
              f"held): {probe['seconds']:.2f} s wall, {probe['cpu_seconds']:.2f} s CPU; peak {above} above the held "
              f"hashes; load average {os.getloadavg()[0]:.2f}")  # fmt: skip
        return
    if args.measure is not None:
        result = measure_local(args.dir) if args.measure == "local" else measure_dask(args.dir, args.workers)
        print(json.dumps(result))
        return
    if args.rows < args.files * args.row_groups * 5_000 or args.classes < 2:
        raise SystemExit("give at least 5,000 rows per partition and at least 2 classes")

    import pyarrow.parquet as pq

    folder = args.dir or Path(tempfile.gettempdir()) / (
        f"thermostat-bench-partitioned-{args.rows}x{args.classes}-{args.files}f{args.row_groups}g-s{args.seed}")
    generated, reused = prepare(folder, args.rows, args.files, args.row_groups, args.classes, args.seed)
    first = folder / "part-00000.parquet"
    partition_bytes = int(pq.ParquetFile(first).read_row_group(0).nbytes)
    disk = sum(file.stat().st_size for file in folder.glob("part-*.parquet"))
    n_partitions = args.files * args.row_groups
    header = [
        f"Partitioned set: {args.rows:,} rows × {args.classes} classes, {args.files} Parquet files × "
        f"{args.row_groups} row groups = {n_partitions} partitions of ~{args.rows // n_partitions:,} rows; "
        f"{disk / 1e9:.2f} GB on disk; " + ("reused" if reused else f"generated in {generated:.0f} s"),
        f"one partition in memory: {partition_bytes / MiB:.1f} MiB ({partition_bytes:,} bytes, "
        f"read_row_group(0).nbytes)",
        f"machine: {_machine()}; load average {os.getloadavg()[0]:.2f} at the start",
        f"runs: {args.repeats} × (local, dask {args.workers} workers), each in a fresh process, interleaved",
    ]
    for line in header:
        print(line, flush=True)
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "dask": []}
    try:
        for repeat in range(args.repeats):
            for engine in ("local", "dask"):
                run = _fresh(engine, folder, args.workers)
                runs[engine].append(run)
                peak = _worker_peak(run)
                start = run["cluster_start_seconds"]
                print(f"  run {repeat + 1} {engine}: fit {run['fit_seconds']:.2f} s, evaluate "
                      f"{run['evaluate_seconds']:.2f} s{'' if start is None else f', cluster start {start:.1f} s'}, "
                      f"CPU {_worker_cpu(run):.1f} s, T {run['temperature']:.9f}, worker peak {_mib(peak[0])} MiB "
                      f"sampled / {_mib(peak[1])} MiB VmHWM, driver peak {_mib(_driver_peak(run))} MiB; "
                      f"check_unique_ids {run['check']['seconds']:.2f} s, driver peak "
                      f"{_mib(_driver_peak(run['check']))} MiB; load average {run['load_average'][0]:.2f} before, "
                      f"{run['load_average'][1]:.2f} after", flush=True)  # fmt: skip
        summary = summarise(runs, partition_bytes, args.rows)
        summary.update(machine=_machine(), files=args.files, row_groups=args.row_groups, classes=args.classes,
                       partitions=n_partitions, disk_bytes=disk, generation_seconds=generated, reused=reused,
                       runs=runs)  # fmt: skip
        print()
        print_report(summary)
        if args.out is not None:
            args.out.write_text(json.dumps(summary, indent=1))
            print(f"\nresults written to {args.out}")
    finally:
        if not args.keep:
            _remove(folder)


if __name__ == "__main__":
    main()
