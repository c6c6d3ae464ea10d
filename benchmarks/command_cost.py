"""CPU time and peak memory of `thermostat diagnose` and `thermostat drift` as K grows.

For each K, a REFERENCE and a WINDOW of ``--rows`` rows each (float32 logits, x | y ~ N(5 e_y, I),
labels uniform) are written as ``.npz`` to a temporary folder; each command then runs in a fresh
process, capped at ``--memory-cap`` GiB of address space and ``--timeout`` seconds, and this
prints, per command and K: the exit status, the CPU time of the process (user + system, from
``wait4``: it does not depend on the machine's load, unlike the wall time), its peak resident
memory (``ru_maxrss``) and the first line of its stderr (a refusal's message).

Usage::

    .venv/bin/python -m benchmarks.command_cost                      # K = 1,000, 5,000, 15,000, 100,000
    .venv/bin/python -m benchmarks.command_cost --classes 1000 2000 --rows 60
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

THERMOSTAT = Path(sys.executable).with_name("thermostat")
COMMANDS = ("drift", "diagnose")


@dataclass(frozen=True, slots=True)
class Run:
    """One command on one K: its exit status, CPU seconds, peak RSS and its stderr's first line."""

    command: str
    n_classes: int
    status: int | None
    cpu_seconds: float
    peak_bytes: int
    wall_seconds: float
    message: str


def write_sets(folder: Path, n_classes: int, rows: int, seed: int = 0) -> tuple[Path, Path]:
    """REFERENCE and WINDOW: ``rows`` rows each of a confident ``n_classes``-class model."""
    rng = np.random.default_rng(seed)
    paths = []
    for name in ("reference", "window"):
        labels = rng.integers(0, n_classes, rows)
        logits = rng.normal(size=(rows, n_classes)).astype(np.float32)
        logits[np.arange(rows), labels] += 5.0
        path = folder / f"{name}-{n_classes}.npz"
        np.savez(path, logits=logits, labels=labels)
        paths.append(path)
    return paths[0], paths[1]


def run(command: str, reference: Path, window: Path, n_classes: int, *, memory_cap: int, timeout: float) -> Run:
    """``thermostat COMMAND REFERENCE WINDOW`` in a fresh capped process, its resources from ``wait4``
    (a run past ``timeout`` is killed: its status None, its resources up to then)."""
    argv = [str(THERMOSTAT), command, str(reference), str(window), "--temperature", "1", "--min-window", "10",
            "--resamples", "100", "--json"]

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_cap, memory_cap))

    started = time.monotonic()
    with tempfile.TemporaryFile() as err:
        # One BLAS thread: the CPU seconds then measure the work, not a second core's spinning.
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=cap,
                                   env={**os.environ, "OMP_NUM_THREADS": "1"})
        status: int | None = None
        while True:
            pid, raw, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(raw)
                break
            if time.monotonic() > started + timeout:
                process.kill()
                _, raw, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.05)
        process.returncode = -1 if status is None else status  # reaped by wait4: Popen must not wait again
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    first = next((line for line in lines if not line.startswith("thermostat: still working")), "")
    return Run(command, n_classes, status, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024,
               time.monotonic() - started, first)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[1_000, 5_000, 15_000, 100_000])
    parser.add_argument("--rows", type=int, default=60, help="rows of REFERENCE and of WINDOW (default 60)")
    parser.add_argument("--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS))
    parser.add_argument("--memory-cap", type=float, default=8.0, help="GiB of address space per run (default 8)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run (default 300)")
    args = parser.parse_args(argv)
    print(f"{args.rows} rows a set, float32; cap {args.memory_cap:g} GiB, {args.timeout:g} s; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("| command | K | exit | CPU s | peak RSS MB | wall s | stderr |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as folder:
        for n_classes in args.classes:
            reference, window = write_sets(Path(folder), n_classes, args.rows)
            for command in args.commands:
                done = run(command, reference, window, n_classes, memory_cap=int(args.memory_cap * 2**30),
                           timeout=args.timeout)
                status = "killed" if done.status is None else str(done.status)
                print(f"| {command} | {n_classes:,} | {status} | {done.cpu_seconds:.1f} | {done.peak_bytes / 1e6:,.0f} "
                      f"| {done.wall_seconds:.1f} | {done.message[:160]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
