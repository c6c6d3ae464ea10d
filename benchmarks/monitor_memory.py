"""Peak memory of the monitor's window read: 200 thousand vs 2 million rows × 10 classes.

For each size, a SQLite prediction log is filled (``log_predictions`` in batches, labels
included), then a *fresh subprocess* runs :func:`monitoring.summarise_window` over the whole
window and reports:

* ``tracemalloc`` peak — Python and numpy allocations made during the call;
* peak RSS growth — Linux ``VmHWM`` after the call minus ``VmRSS`` before it, with the
  high-water mark reset (``/proc/self/clear_refs``) after imports and warm-up, so the
  imports and numba's compilation do not hide the window's own memory;
* ``ru_maxrss`` of the whole subprocess (imports, warm-up and the read), for reference.

The RSS figures and the time come from one fresh subprocess, the tracemalloc peak from
another (tracing slows the read and adds its own memory).

The target is peak(2M) / peak(200k) <= 1.2: memory bounded by ``chunk_size``, not the window.

Usage::

    .venv/bin/python benchmarks/monitor_memory.py            # 200k and 2M rows, in a temp folder
    .venv/bin/python benchmarks/monitor_memory.py --sizes 20000 200000 --keep /tmp/bench
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from monitoring import PredictionLog, WindowQuery, log_predictions, summarise_window  # noqa: E402

MODEL, VERSION = "bench", "1"
START = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class Measurement:
    """One fresh-process measurement of summarise_window over a window."""

    rows: int
    seconds: float
    tracemalloc_peak_bytes: int
    rss_growth_bytes: int
    ru_maxrss_bytes: int
    n_chunks: int


def fill(path: Path, n_rows: int, n_classes: int, *, batch: int = 50_000, seed: int = 0) -> float:
    """Write ``n_rows`` labelled predictions spread over the window; returns seconds taken."""
    rng = np.random.default_rng(seed)
    began = time.perf_counter()
    with PredictionLog(f"sqlite:///{path}") as log:
        log.create()
        step = WINDOW / n_rows
        for offset in range(0, n_rows, batch):
            size = min(batch, n_rows - offset)
            logits = (3.0 * rng.normal(size=(size, n_classes))).astype(np.float32)
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            labels = np.minimum((rng.random((size, 1)) > p.cumsum(axis=1)).sum(axis=1), n_classes - 1)
            times = [START + step * (offset + i) for i in range(size)]
            ids = [f"r{offset + i}" for i in range(size)]
            groups = np.array(["a", "b", "c", "d"], dtype=object)[rng.integers(0, 4, size)].tolist()
            log_predictions(log, MODEL, VERSION, 1.0, logits, ids, groups, times, labels=labels)
    return time.perf_counter() - began


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure(path: Path, chunk_size: int, mode: str) -> dict[str, float]:
    """In this fresh process: summarise the window once, report time and memory.

    ``mode`` "rss" reads the peak RSS (nothing else runs in the process after the read);
    "tracemalloc" traces Python/numpy allocations (slower, so measured in its own process).
    """
    from calibration import TopLabelScores

    # Warm up: the chunk's scoring pass, as a long-running monitor would have it.
    rng = np.random.default_rng(1)
    warm = rng.normal(size=(chunk_size, 10)).astype(np.float32)
    TopLabelScores.from_logits(warm, rng.integers(0, 10, chunk_size), temperature=1.0)
    del warm
    log = PredictionLog(f"sqlite:///{path}")
    log.count_labelled(MODEL, VERSION, START, START + WINDOW)  # open the pool

    def read() -> int:
        query = WindowQuery(MODEL, VERSION, temperature=1.0, start=START, end=START + WINDOW, threshold=0.9)
        summary = summarise_window(log, query, chunk_size=chunk_size)
        return summary.n_chunks

    if mode == "tracemalloc":
        tracemalloc.start()
        began = time.perf_counter()
        n_chunks = read()
        seconds = time.perf_counter() - began
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return {"seconds": seconds, "tracemalloc_peak_bytes": peak, "n_chunks": n_chunks}
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    rss_before = _status_kib("VmRSS")
    began = time.perf_counter()
    n_chunks = read()
    seconds = time.perf_counter() - began
    return {
        "seconds": seconds,
        "rss_growth_bytes": (_status_kib("VmHWM") - rss_before) * 1024,
        "ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "n_chunks": n_chunks,
    }


def _fresh(path: Path, chunk_size: int, mode: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--measure", str(path), "--chunk-size", str(chunk_size), "--mode", mode],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    values: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return values


def run_fresh(path: Path, rows: int, chunk_size: int) -> Measurement:
    """Two fresh subprocesses: one for RSS (and the time), one for tracemalloc."""
    rss = _fresh(path, chunk_size, "rss")
    traced = _fresh(path, chunk_size, "tracemalloc")
    return Measurement(
        rows=rows,
        seconds=rss["seconds"],
        tracemalloc_peak_bytes=int(traced["tracemalloc_peak_bytes"]),
        rss_growth_bytes=int(rss["rss_growth_bytes"]),
        ru_maxrss_bytes=int(rss["ru_maxrss_bytes"]),
        n_chunks=int(rss["n_chunks"]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 2_000_000])
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--chunk-size", type=int, default=50_000)
    parser.add_argument("--keep", type=Path, help="folder for the SQLite files (kept; reused if present)")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("rss", "tracemalloc"), default="rss", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.chunk_size, args.mode)))
        return

    folder = args.keep or Path(tempfile.mkdtemp(prefix="thermostat-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    results: list[Measurement] = []
    mib = 1024 * 1024
    print(f"summarise_window over a SQLite log, {args.classes} classes, chunk_size={args.chunk_size}")
    print(f"{'rows':>10} {'fill s':>8} {'read s':>8} {'rows/s':>10} {'tracemalloc MiB':>16} "
          f"{'RSS growth MiB':>15} {'ru_maxrss MiB':>14} {'chunks':>7}")  # fmt: skip
    for size in args.sizes:
        path = folder / f"log_{size}x{args.classes}.db"
        filled = 0.0
        if not path.exists():
            filled = fill(path, size, args.classes)
        m = run_fresh(path, size, args.chunk_size)
        results.append(m)
        print(
            f"{m.rows:>10} {filled:>8.1f} {m.seconds:>8.1f} {m.rows / m.seconds:>10.0f} "
            f"{m.tracemalloc_peak_bytes / mib:>16.1f} {m.rss_growth_bytes / mib:>15.1f} "
            f"{m.ru_maxrss_bytes / mib:>14.1f} {m.n_chunks:>7}",
            flush=True,
        )
    if len(results) >= 2:
        small, large = results[0], results[-1]
        print(f"ratio {large.rows}/{small.rows} rows: tracemalloc peak "
              f"{large.tracemalloc_peak_bytes / small.tracemalloc_peak_bytes:.3f}, RSS growth "
              f"{large.rss_growth_bytes / max(1, small.rss_growth_bytes):.3f}, ru_maxrss "
              f"{large.ru_maxrss_bytes / small.ru_maxrss_bytes:.3f} (target <= 1.2)")  # fmt: skip
    if args.keep is None:
        for path in folder.glob("log_*"):
            path.unlink()
        for extra in folder.iterdir():
            extra.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
