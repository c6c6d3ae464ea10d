"""`python -m benchmarks.kernels` (`make bench-kernels`): the fit and the evaluation against the
memory floor, the compiled kernels against the numpy path, and the fit from a fresh installation,
on 200,000 x 100 and 1,000,000 x 10 logits, float32 and float64.

The floor is a plain parallel numba read of the logits: the sum of every element, in the
kernels' blocks, each read as one flat run of memory, vectorised (``fastmath``: its own result
does not matter), so it runs at the speed memory delivers the logits. Against it, per case:

- a bound: as many float64 exps (the kernels' own exp) as there are logits, and their sum,
  nothing else, in the floor's blocks and threads but each block on the first block's logits
  (in cache, so that it measures the arithmetic, not the memory the floor measures). Any exact
  fit or evaluation does at least that (one exp a logit; float64, which the 1e-12 results
  need), so its ratio to the floor is the least theirs can be on this machine;
- the fit, ``fit_temperature`` (a warm start on samples, then one full pass at a ratio p/q
  with the NLL at T = 1);
- one pass of the fit's kernel at a generic 1/T without the NLL at T = 1 (the unit the fit
  is made of);
- the evaluation, ``CalibrationStats.from_logits`` at T = 2.5 with 15 bins: of a validated
  ``ScoredSet`` (checked once when it was read, as the monitor's windows are: one pass), and
  of plain arrays, whose check scans every logit first (finite, each row's spread);
- the same fit and evaluation of a scored set on the numpy path (what a process runs until
  starting numba pays, and an installation until its kernels are compiled).

Everything runs in this one process, in interleaved rounds (each round times every item once,
starting from a different item each round), after an untimed warm-up call of each (compiling
or loading the kernels). Printed per item: the wall time's median and minimum over the
rounds, the median CPU time of the process (user + system), the medians as multiples of
the floor's, and the minimums as multiples of the floor's minimum (the round least disturbed:
on a loaded machine the floor's median is mostly the wait described below, seen at 5-15x its
minimum, which makes the median ratios depend on the load more than on the kernels). On a
shared machine the ratios of one run are what compare; the load average is printed with
each case. Two effects of a loaded machine: a parallel region waits for its
second thread to be scheduled (often longer than the floor's whole read: ``--threads 1``
takes that wait out), and a long item is preempted more often than a short one, which a
wall-time ratio counts against it and a CPU-time ratio does not (with ``--threads 1``; with
two threads, CPU time also counts a waiting thread's spinning).

The rounds also time the fit and the evaluation on **the native kernels** (the same kernels
compiled ahead of time when the package was installed, ``calibration._native``; their parallel
passes on a thread pool), as a process takes them unless numba's kernels are loaded in it.

Then, per dtype, **a fresh installation** (unless ``--no-fresh-install``): an empty numba cache
(``NUMBA_CACHE_DIR``), and in it, per shape, ``--fresh-fits`` fits in each of five new
processes: two as installed (the native kernels from the first call: "process 1" and "process
2"); then, as an installation that could not build them (``THERMOSTAT_NATIVE_KERNELS=0``), one
whose first large input starts the background compile, once that compile has finished (its wall
time is printed) another, and one that starts numba at the first large input
(``LOAD_MIN_ELEMENTS = 0``: numba's start-up included). Each fit's wall and CPU time, its path,
and its CPU time as a multiple of the compiled fit's (the CPU median of the interleaved rounds
above); the verdict is on the two processes as installed, by CPU and by wall time.

``--baseline REF`` also times the same fit and evaluation with the numeric kernels
(``calibration/_kernels_numba.py``) of the git revision REF (e.g. ``main``), loaded beside
this checkout's and swapped in for their items: a before/after table from one process. The
baseline's source goes to ``.thermostat/baseline/COMMIT/`` so that numba's cache keeps its
compiled kernels between runs.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numpy.typing import NDArray

from benchmarks.__main__ import describe_machine, evaluate_ours, synthetic
from calibration import CalibrationStats, ScoredSet, _kernels, _kernels_numba, compile_kernels, fit_temperature
from calibration._kernels import BACKGROUND_COMPILE_VARIABLE, nll_expansion_sums
from calibration._native import NATIVE_KERNELS_VARIABLE, native_kernels

ROOT = Path(__file__).resolve().parents[1]
CASES = ((200_000, 100), (1_000_000, 10))
# The goals of issue 23: the fit within 3x the floor, the evaluation within 2x.
FIT_GOAL, EVALUATION_GOAL = 3.0, 2.0
FLOOR = "memory floor: sum of every logit"
FIT = "fit_temperature"
EVALUATION = "evaluation of a scored set: CalibrationStats.from_logits"
NUMPY_FIT = "fit_temperature, numpy path"
NATIVE_FIT = "fit_temperature, native kernels (compiled at installation)"
NATIVE_EVALUATION = "evaluation of a scored set, native kernels"
NUMPY_EVALUATION = "evaluation of a scored set, numpy path"
EXP_FLOOR = "a float64 exp a logit, nothing else, in cache (a bound, not a result)"
# A generic inverse temperature (no ratio of small integers), as the other floors use.
_GENERIC_BETA = 0.40213


@njit(fastmath=True, cache=True)
def _sum_of(run):  # type: ignore[no-untyped-def]  # pragma: no cover
    # Indices from 0 (a slice, not an offset), so that the loads are plain vector loads: with an
    # index numba cannot prove non-negative, LLVM emits gathers and the "floor" runs 5x slower.
    total = 0.0
    for j in range(run.shape[0]):
        total += run[j]
    return total


@njit(parallel=True, fastmath=True, cache=True)
def _sum_every_logit(flat, block_elements):  # type: ignore[no-untyped-def]  # pragma: no cover
    n = flat.shape[0]
    n_blocks = (n + block_elements - 1) // block_elements
    partial = np.zeros(n_blocks)
    for b in prange(n_blocks):
        partial[b] = _sum_of(flat[b * block_elements : min(n, (b + 1) * block_elements)])
    return partial.sum()


@njit(fastmath=False, cache=True)
def _sum_of_exps(run, beta):  # type: ignore[no-untyped-def]  # pragma: no cover
    # The kernels' own exp (inlined, vectorised), of -|x| / T: one float64 exp a logit and its sum.
    total = 0.0
    for j in range(run.shape[0]):
        total = _kernels_numba._sum_add(total, _kernels_numba._exp(-abs(np.float64(run[j])) * beta))
    return total


@njit(parallel=True, fastmath=False, cache=True)
def _exp_every_logit(flat, block_elements, beta):  # type: ignore[no-untyped-def]  # pragma: no cover
    n = flat.shape[0]
    n_blocks = (n + block_elements - 1) // block_elements
    partial = np.zeros(n_blocks)
    for b in prange(n_blocks):
        # Always the first block's logits (in cache), as many of them as block b holds: the exps'
        # arithmetic without the memory traffic, which the floor measures.
        partial[b] = _sum_of_exps(flat[: min(n, (b + 1) * block_elements) - b * block_elements], beta)
    return partial.sum()


@dataclass(frozen=True)
class Inputs:
    """One case's logits and labels, and the same as a validated scored set."""

    logits: NDArray[Any]
    labels: NDArray[np.intp]
    scored: ScoredSet


def memory_floor(inputs: Inputs) -> None:
    """Read every logit once, nothing else: the kernels' blocks and threads, each block as the
    flat run of memory it is (no per-row loop, whose set-up would slow the floor at K = 10)."""
    logits = inputs.logits
    _sum_every_logit(logits.reshape(-1), _kernels._block_rows(logits) * logits.shape[1])


def memory_floor_one_thread(inputs: Inputs) -> None:
    """The same read on the calling thread: no parallel region to wait for (shown for scale:
    on a loaded machine, waking the other thread can cost more than the read)."""
    _sum_of(inputs.logits.reshape(-1))


def exp_floor(inputs: Inputs) -> None:
    """As many float64 exps as there are logits, and their sum, nothing else, in the floor's blocks
    and threads, each block's on the first block's logits (in cache): the arithmetic any exact fit
    or evaluation does at least (one exp a logit; float64, which the 1e-12 results need), without
    the memory traffic. Not a result: what the goals must fit around."""
    logits = inputs.logits
    _exp_every_logit(logits.reshape(-1), _kernels._block_rows(logits) * logits.shape[1], _GENERIC_BETA)


def fit(inputs: Inputs) -> None:
    fit_temperature(inputs.logits, inputs.labels)


def one_pass(inputs: Inputs) -> None:
    nll_expansion_sums(inputs.logits, inputs.labels, _GENERIC_BETA, with_nll_at_one=False, compiled=True)


def evaluation_of_a_scored_set(inputs: Inputs) -> None:
    """The evaluation of a validated scored set (checked once when it was read): one pass."""
    stats = CalibrationStats.from_logits(inputs.scored, temperature=2.5, n_bins=15)
    _ = (stats.nll, stats.ece, stats.mce, stats.accuracy, stats.brier, stats.mean_confidence)


def evaluation_of_arrays(inputs: Inputs) -> None:
    """The evaluation of plain arrays: their check's scan, then the pass."""
    evaluate_ours(inputs.logits, inputs.labels)


def baseline_kernels(revision: str) -> ModuleType:
    """The numeric kernels of git revision ``revision``, imported from a copy of their source."""
    commit = subprocess.run(["git", "rev-parse", "--verify", f"{revision}^{{commit}}"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.strip()
    source = subprocess.run(["git", "show", f"{commit}:calibration/_kernels_numba.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    path = ROOT / ".thermostat" / "baseline" / commit / "_kernels_numba.py"
    if not path.exists() or path.read_text() != source:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    name = f"_baseline_kernels_{commit[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def kernels_of(module: ModuleType) -> Iterator[None]:
    """Run the dispatch with ``module``'s kernels."""
    ours = _kernels._compiled()
    _kernels._COMPILED = module
    try:
        yield
    finally:
        _kernels._COMPILED = ours


@contextmanager
def numpy_path() -> Iterator[None]:
    """Run the dispatch as a process that takes the numpy path (every input is "small")."""
    smallest = _kernels.COMPILED_MIN_ELEMENTS
    _kernels.COMPILED_MIN_ELEMENTS = sys.maxsize
    try:
        yield
    finally:
        _kernels.COMPILED_MIN_ELEMENTS = smallest


@contextmanager
def native_path() -> Iterator[None]:
    """Run the dispatch as a process in which numba does not run: the native kernels."""
    ours = _kernels._COMPILED
    _kernels._COMPILED = None
    try:
        yield
    finally:
        _kernels._COMPILED = ours


# (name, what it runs, the context it runs in: this checkout's compiled kernels, main's, numpy)
Item = tuple[str, Callable[[Inputs], None], Callable[[], AbstractContextManager[None]]]


def run_case(n: int, k: int, dtype: Any, items: list[Item], rounds: int) -> dict[str, list[tuple[float, float]]]:
    """Time every item ``rounds`` times, interleaved; print the table; returns (wall, CPU) seconds."""
    logits, labels = synthetic(n, k)
    logits = logits.astype(dtype, copy=False)
    inputs = Inputs(logits, labels, ScoredSet.from_arrays(logits, labels))
    for _, function, context in items:  # warm-up: compile or load, first touch
        with context():
            function(inputs)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in items}
    load_before = os.getloadavg()[0]
    for round_ in range(rounds):
        for position in range(len(items)):
            name, function, context = items[(round_ + position) % len(items)]
            with context():
                wall, cpu = time.perf_counter(), time.process_time()
                function(inputs)
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    print(f"\n### {n:,} x {k} {np.dtype(dtype).name}, {logits.nbytes / 2**20:.1f} MiB "
          f"({rounds} interleaved rounds, {numba.get_num_threads()} numba threads; "
          f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after)")
    print("| item | wall ms: median | min | CPU ms: median | x floor: wall medians | wall minimums | CPU medians "
          "| x compiled: wall medians | CPU medians |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    floor_wall, floor_cpu = _medians(times[FLOOR])
    floor_least = _least(times[FLOOR])
    for name, values in times.items():
        wall, cpu = _medians(values)
        compiled = {NUMPY_FIT: FIT, NUMPY_EVALUATION: EVALUATION}.get(name, name)
        versus = (f"{wall / _medians(times[compiled])[0]:.2f} | {cpu / _medians(times[compiled])[1]:.2f}"
                  if compiled != name else " | ")
        print(f"| {name} | {1e3 * wall:.1f} | {1e3 * _least(values):.1f} | {1e3 * cpu:.1f} "
              f"| {wall / floor_wall:.2f} | {_least(values) / floor_least:.2f} | {cpu / floor_cpu:.2f} | {versus} |")
    return times


# One process of a fresh installation: FITS fits of one case, each timed, its path noted.
_FRESH_PROCESS = """
import json, sys, time
import numpy as np
from benchmarks.__main__ import synthetic
from calibration import _kernels, fit_temperature
from calibration._native import native_kernels
n, k, dtype, fits, at_once = json.loads(sys.argv[1])
if at_once:
    _kernels.LOAD_MIN_ELEMENTS = 0
logits, labels = synthetic(n, k)
logits = logits.astype(dtype, copy=False)
times = []
for _ in range(fits):
    wall, cpu = time.perf_counter(), time.process_time()
    fit_temperature(logits, labels)
    path = "numba" if _kernels._COMPILED is not None else "native" if native_kernels() is not None else "numpy"
    times.append((time.perf_counter() - wall, time.process_time() - cpu, path))
print(json.dumps(times))
"""
# (wall s, CPU s, path) per fit of one process
FreshFits = list[tuple[float, float, str]]
AS_INSTALLED = ("process 1: as installed (native kernels), empty numba cache", "process 2: as installed")
PROCESSES = (*AS_INSTALLED, "without native kernels, process 1: empty numba cache",
             "without native kernels, process 2: after the background compile",
             "without native kernels, numba from the first call (LOAD_MIN_ELEMENTS = 0)")


def fresh_installation(dtype: Any, cases: list[tuple[int, int]], fits: int) -> dict[tuple[int, int], dict[str, FreshFits]]:
    """Per case, ``fits`` fits in each of the processes of PROCESSES, on one fresh installation
    (an empty numba cache, the background compile on) per dtype; prints the background compile's time."""
    cache = Path(tempfile.mkdtemp(prefix="thermostat-fresh-numba-"))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), BACKGROUND_COMPILE_VARIABLE: "1", "PYTHONPATH": str(ROOT)}

    def run(n: int, k: int, at_once: bool, native: bool) -> FreshFits:
        argument = json.dumps([n, k, np.dtype(dtype).name, fits, at_once])
        done = subprocess.run([sys.executable, "-c", _FRESH_PROCESS, argument], cwd=ROOT, capture_output=True,
                              env={**env, NATIVE_KERNELS_VARIABLE: "1" if native else "0"}, text=True, check=True)
        return [(float(wall), float(cpu), str(path)) for wall, cpu, path in json.loads(done.stdout)]

    try:
        results: dict[tuple[int, int], dict[str, FreshFits]] = {case: {} for case in cases}
        for case in cases:
            results[case][PROCESSES[0]] = run(*case, at_once=False, native=True)
            results[case][PROCESSES[1]] = run(*case, at_once=False, native=True)
        for case in cases:
            results[case][PROCESSES[2]] = run(*case, at_once=False, native=False)
        wall, cpu = _wait_for_background_compile(cache)
        print(f"\nfresh installation, {np.dtype(dtype).name}: without native kernels, the background compile (started "
              f"by the first such process's first fit) finished {wall:.0f} s after that process ended; it used "
              f"{cpu:.0f} s of CPU")
        for case in cases:
            results[case][PROCESSES[3]] = run(*case, at_once=False, native=False)
            results[case][PROCESSES[4]] = run(*case, at_once=True, native=False)
        return results
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _wait_for_background_compile(cache: Path) -> tuple[float, float]:
    """Wait until the compiling process has taken its lock and let it go: (wall s, its CPU s)."""
    started = time.perf_counter()
    pid, cpu = 0, 0.0
    while time.perf_counter() - started < 3600:
        locks = list(cache.glob("thermostat/thermostat-compile-*.lock"))
        if locks and locks[0].read_text().strip():
            pid = int(locks[0].read_text())
            with locks[0].open("a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return time.perf_counter() - started, cpu
                except OSError:
                    pass
            cpu = _cpu_seconds(pid) or cpu
        elif time.perf_counter() - started > 120:
            raise RuntimeError(f"no background compile took its lock in {cache} within 120 s")
        time.sleep(0.5)
    raise RuntimeError("the background compile did not finish within an hour")


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a running process (Linux /proc), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def print_fresh(label: str, fresh: dict[str, FreshFits], compiled: tuple[float, float]) -> tuple[float, float]:
    """The table of one case's fresh-installation fits; returns the largest first-fit time of the
    two processes as installed as multiples of the compiled fit's: (by CPU, by wall)."""
    compiled_wall, compiled_cpu = compiled
    fits = len(fresh[PROCESSES[0]])
    print(f"\n### {label}: the fit from a fresh installation (compiled fit above: {1e3 * compiled_wall:.1f} ms wall, "
          f"{1e3 * compiled_cpu:.1f} ms CPU)")
    print("| fit in the process | " + " | ".join(f"fit {i + 1}: wall ms (CPU ms), path, CPU x compiled"
                                              for i in range(fits)) + " |")
    print("| --- |" + " ---: |" * fits)
    for process, values in fresh.items():
        cells = [f"{1e3 * wall:.0f} ({1e3 * cpu:.0f}), {path}, **{cpu / compiled_cpu:.2f}**"
                 for wall, cpu, path in values]
        print(f"| {process} | " + " | ".join(cells) + " |")
    return (max(fresh[process][0][1] for process in AS_INSTALLED) / compiled_cpu,
            max(fresh[process][0][0] for process in AS_INSTALLED) / compiled_wall)


def _medians(values: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(w for w, _ in values), statistics.median(c for _, c in values)


def _least(values: list[tuple[float, float]]) -> float:
    """The least wall time: the round least disturbed by other work (and by the wait for the
    second thread, which on a loaded machine can make up most of the floor's median)."""
    return min(w for w, _ in values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernels", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timed rounds (default 15)")
    parser.add_argument("--threads", type=int, default=0,
                        help="numba threads for every item (default: all; 1 takes the wait for a second thread out "
                             "of every figure, which on a loaded machine can exceed the floor's read itself)")
    parser.add_argument("--baseline", metavar="REF", help="also time the kernels of this git revision (e.g. main)")
    parser.add_argument("--only", default="", help="run the cases whose label (e.g. '1,000,000 x 10 float32') starts with this")
    parser.add_argument("--no-fresh-install", action="store_true",
                        help="skip the fits from a fresh installation (each dtype compiles the kernels: minutes of a core)")
    parser.add_argument("--fresh-fits", type=int, default=4, help="fits per process of a fresh installation (default 4)")
    args = parser.parse_args(argv)
    if args.threads:
        numba.set_num_threads(args.threads)
        os.environ["NUMBA_NUM_THREADS"] = str(args.threads)  # the fresh installation's processes
    describe_machine()
    started = time.perf_counter()
    compile_kernels()
    print(f"kernels compiled or loaded from the cache in {time.perf_counter() - started:.1f} s")
    ours = nullcontext
    items: list[Item] = [
        (FLOOR, memory_floor, ours),
        ("(the same read on the calling thread)", memory_floor_one_thread, ours),
        (EXP_FLOOR, exp_floor, ours),
        (FIT, fit, ours),
        ("one pass of the fit's kernel, generic 1/T", one_pass, ours),
        (EVALUATION, evaluation_of_a_scored_set, ours),
        ("evaluation of arrays (their check's scan included)", evaluation_of_arrays, ours),
        (NUMPY_FIT, fit, numpy_path),
        *([(NATIVE_FIT, fit, native_path), (NATIVE_EVALUATION, evaluation_of_a_scored_set, native_path)]
          if native_kernels() is not None else []),
        (NUMPY_EVALUATION, evaluation_of_a_scored_set, numpy_path),
    ]
    if args.baseline:
        baseline = baseline_kernels(args.baseline)

        def theirs() -> AbstractContextManager[None]:
            return kernels_of(baseline)

        items += [(f"fit_temperature, kernels of {args.baseline}", fit, theirs),
                  (f"one pass of the fit's kernel, kernels of {args.baseline}", one_pass, theirs),
                  (f"evaluation of a scored set, kernels of {args.baseline}", evaluation_of_a_scored_set, theirs),
                  (f"evaluation of arrays, kernels of {args.baseline}", evaluation_of_arrays, theirs)]
    verdicts = []
    compiled_fit: dict[str, tuple[float, float]] = {}
    for n, k in CASES:
        for dtype in (np.float32, np.float64):
            label = f"{n:,} x {k} {np.dtype(dtype).name}"
            if not label.startswith(args.only):
                continue
            times = run_case(n, k, dtype, items, args.rounds)
            compiled_fit[label] = _medians(times[FIT])
            floor = _medians(times[FLOOR])[0]
            fit_ratio = _medians(times[FIT])[0] / floor
            evaluation_ratio = _medians(times[EVALUATION])[0] / floor
            least_fit = _least(times[FIT]) / _least(times[FLOOR])
            least_evaluation = _least(times[EVALUATION]) / _least(times[FLOOR])
            floor_cpu = _medians(times[FLOOR])[1]
            exp_cpu = _medians(times[EXP_FLOOR])[1] / floor_cpu
            verdicts.append(f"{label}: fit {fit_ratio:.2f}x the floor (wall medians) (goal {FIT_GOAL:g}x: "
                            f"{'met' if fit_ratio <= FIT_GOAL else 'not met'}), evaluation {evaluation_ratio:.2f}x "
                            f"(goal {EVALUATION_GOAL:g}x: {'met' if evaluation_ratio <= EVALUATION_GOAL else 'not met'}); "
                            f"on wall minimums fit {least_fit:.2f}x, evaluation {least_evaluation:.2f}x; "
                            f"CPU medians fit {_medians(times[FIT])[1] / floor_cpu:.2f}x, evaluation "
                            f"{_medians(times[EVALUATION])[1] / floor_cpu:.2f}x, the exp alone {exp_cpu:.2f}x; "
                            f"the numpy path (CPU medians) fit {_medians(times[NUMPY_FIT])[1] / _medians(times[FIT])[1]:.2f}x "
                            f"the compiled fit, evaluation "
                            f"{_medians(times[NUMPY_EVALUATION])[1] / _medians(times[EVALUATION])[1]:.2f}x"
                            + (f"; the native kernels' fit {_medians(times[NATIVE_FIT])[1] / _medians(times[FIT])[1]:.2f}x "
                               f"(CPU), {_medians(times[NATIVE_FIT])[0] / _medians(times[FIT])[0]:.2f}x (wall), evaluation "
                               f"{_medians(times[NATIVE_EVALUATION])[1] / _medians(times[EVALUATION])[1]:.2f}x (CPU), "
                               f"{_medians(times[NATIVE_EVALUATION])[0] / _medians(times[EVALUATION])[0]:.2f}x (wall)"
                               if NATIVE_FIT in times else ""))
    print("\n" + "\n".join(verdicts))
    if not args.no_fresh_install and compiled_fit:
        fresh_verdicts = []
        for dtype in (np.float32, np.float64):
            cases = [case for case in CASES if f"{case[0]:,} x {case[1]} {np.dtype(dtype).name}" in compiled_fit]
            if not cases:
                continue
            for case, fresh in fresh_installation(dtype, cases, args.fresh_fits).items():
                label = f"{case[0]:,} x {case[1]} {np.dtype(dtype).name}"
                by_cpu, by_wall = print_fresh(label, fresh, compiled_fit[label])
                fresh_verdicts.append(f"{label}: the first fit of processes 1 and 2 as installed, at most {by_cpu:.2f}x "
                                      f"the compiled fit's CPU (goal 1.5x: {'met' if by_cpu <= 1.5 else 'not met'}), "
                                      f"{by_wall:.2f}x its wall time ({'met' if by_wall <= 1.5 else 'not met'})")
        print("\n" + "\n".join(fresh_verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
