"""`python -m benchmarks.startup` (`make bench-startup`): how long a new user waits.

Prints one table, each figure measured on the machine as it is ("idle": nothing of ours
running beside it) and again with a busy loop on every core:

- importing the command line (``import flows.cli.main`` in a fresh interpreter);
- ``thermostat --help``, as a whole process;
- the first and the second ``thermostat fit`` of a small set (10,000 x 10) and of a large one
  (1M x 10), each pair starting from an empty numba cache (``NUMBA_CACHE_DIR`` a new folder;
  the background compile off: ``make bench-kernels`` measures a fresh installation with it);
- ``thermostat demo`` in a fresh folder (its own ``PREFECT_HOME``, empty numba cache).

Each cell is the wall time, then in brackets the CPU time (user + system) of the process and
its children: the CPU time hardly depends on what else runs on the machine, the wall time
does. Start-up and help are the median of ``--repeats`` runs; a first and second fit, and a
demo, happen once by their nature. ``--source DIR`` measures another checkout's code with this
environment's libraries (e.g. ``git archive main | tar -x -C /tmp/main`` for a before/after
table): DIR goes first on ``PYTHONPATH`` of every child process. The command line is started as
``python -c "from flows.cli.main import main; ..."`` for both, which is what the ``thermostat``
script does.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration import ScoredSet, write_scored_set

LAUNCH = "import sys; from flows.cli.main import main; sys.exit(main())"
IMPORT = ("import time; started, cpu = time.perf_counter(), time.process_time(); import flows.cli.main; "
          "print(time.perf_counter() - started, time.process_time() - cpu)")


def _environment(source: Path | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key != "PYTHONPATH" and not key.startswith(("THERMOSTAT_", "MLFLOW_", "PREFECT_", "NUMBA_"))}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    return env


@dataclass(frozen=True)
class Timing:
    """Seconds of wall time and of CPU (user + system, the process and its children)."""

    wall: float
    cpu: float
    failed: bool = False

    def __str__(self) -> str:
        return f"{'failed after ' if self.failed else ''}{self.wall:.2f} ({self.cpu:.2f})"


def _median(timings: list[Timing]) -> Timing:
    return Timing(statistics.median(t.wall for t in timings), statistics.median(t.cpu for t in timings))


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], env: dict[str, str], cwd: Path, *, passing: tuple[int, ...] = (0, 1),
           timeout: float = 3600) -> Timing:
    """The command's times; failed when its exit status is not in ``passing`` (for ``fit``, 1
    means it ran but the result did not pass its check: a run like any other)."""
    started, cpu = time.perf_counter(), _cpu_of_children()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    timing = Timing(time.perf_counter() - started, _cpu_of_children() - cpu, done.returncode not in passing)
    if timing.failed:
        last = (done.stdout + done.stderr).strip().splitlines()[-3:]
        print(f"  failed (exit {done.returncode}) after {timing.wall:.1f} s: {' | '.join(last)}", flush=True)
    return timing


def _thermostat(*args: str) -> list[str]:
    return [sys.executable, "-c", LAUNCH, *args]


def _write_set(path: Path, n: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = (2.0 * (rng.normal(size=(n, k)) + 3.0 * np.eye(k)[labels])).astype(np.float32)
    write_scored_set(ScoredSet.from_arrays(logits, labels), path)


@contextmanager
def every_core_busy() -> Iterator[int]:
    """A busy-loop process per core this process may run on, for the block."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in os.sched_getaffinity(0)]
    try:
        yield len(loops)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait(timeout=30)


def measure(work: Path, source: Path | None, repeats: int, demo: bool) -> dict[str, Timing]:
    """The figures on the machine as it is now."""
    env = _environment(source)
    figures: dict[str, Timing] = {}
    imports = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", IMPORT], cwd=work, env=env, capture_output=True, text=True,
                              check=True)
        wall, cpu = (float(value) for value in done.stdout.split())
        imports.append(Timing(wall, cpu))
    figures["import flows.cli.main (in the process)"] = _median(imports)
    figures["thermostat --help"] = _median([_timed(_thermostat("--help"), env, work) for _ in range(repeats)])
    for label, name in (("small fit (10,000 x 10)", "small.npz"), ("large fit (1M x 10)", "large.npz")):
        with tempfile.TemporaryDirectory(prefix="numba-empty-", dir=work) as cache:
            # The background compile a large first fit starts is off here: it would run beside the
            # figures that follow, and in a folder deleted under it (`make bench-kernels` measures it).
            fit_env = env | {"NUMBA_CACHE_DIR": cache, "THERMOSTAT_BACKGROUND_COMPILE": "0"}
            figures[f"first {label}, empty numba cache"] = _timed(_thermostat("fit", name), fit_env, work)
            figures[f"second {label}"] = _timed(_thermostat("fit", name), fit_env, work)
    if demo:
        with tempfile.TemporaryDirectory(prefix="demo-", dir=work) as folder:
            demo_env = env | {"PREFECT_HOME": str(Path(folder) / "prefect-home"),
                              "NUMBA_CACHE_DIR": str(Path(folder) / "numba-cache")}
            figures["thermostat demo, fresh folder"] = _timed(_thermostat("demo"), demo_env, Path(folder), passing=(0,))
    return figures


def _load() -> str:
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="measure this checkout's code (default: the installed one)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of the start-up and --help figures (default 5)")
    parser.add_argument("--no-demo", action="store_true", help="leave out the demo (minutes)")
    parser.add_argument("--no-busy", action="store_true", help="measure on the machine as it is only")
    args = parser.parse_args(argv)
    source = args.source.resolve() if args.source else None
    print(f"machine: {len(os.sched_getaffinity(0))} CPUs; Python {sys.version.split()[0]}; code from "
          f"{source or 'the installed packages'}; load average (1/5/15 min) before: {_load()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="thermostat-startup-") as tmp:
        work = Path(tmp)
        _write_set(work / "small.npz", 10_000, 10, 0)
        _write_set(work / "large.npz", 1_000_000, 10, 1)
        runs: list[tuple[str, Callable[[], dict[str, Timing]]]] = [
            ("idle", lambda: measure(work, source, args.repeats, not args.no_demo))]
        if not args.no_busy:
            def busy() -> dict[str, Timing]:
                with every_core_busy():
                    return measure(work, source, args.repeats, not args.no_demo)
            runs.append(("every core busy", busy))
        columns = {}
        for title, run in runs:
            columns[title] = run()
            print(f"  measured: {title} (load average after: {_load()})", flush=True)
    print(f"\n| wall seconds (CPU seconds) | {' | '.join(columns)} |")
    print(f"| --- | {' | '.join('---:' for _ in columns)} |")
    for figure in next(iter(columns.values())):
        print(f"| {figure} | {' | '.join(str(values[figure]) for values in columns.values())} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
