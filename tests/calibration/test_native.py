"""The kernels compiled ahead of time (calibration._native): loaded only where they can run.

Their sums are held to the NumPy reference by tests/calibration/test_kernels.py (every test
of a compiled path runs on them and on numba's kernels)."""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np
import pytest

from calibration import _kernels, _native, fit_temperature
from calibration._native import NATIVE_KERNELS_VARIABLE, cpu_flags, native_kernels


def test_the_installation_built_them_for_this_cpu() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("compiled ahead of time on Linux only")
    kernels = native_kernels()
    assert kernels is not None, "calibration._kernels_native is missing: reinstall (pip install -e .) to build it"
    assert (kernels.NLL_AT_ONE_SKIP, kernels.NLL_AT_ONE_SAME, kernels.NLL_AT_ONE_RATIO, kernels.NLL_AT_ONE_EXP) == (0, 1, 2, 3)


def test_a_cpu_without_the_instructions_they_were_built_for_does_not_load_them(monkeypatch: pytest.MonkeyPatch) -> None:
    flags = cpu_flags()
    monkeypatch.setattr(_native, "cpu_flags", lambda: flags - {"sse2"})
    assert native_kernels.__wrapped__() is None
    monkeypatch.setattr(_native, "cpu_flags", lambda: frozenset())  # not Linux: flags unknown
    assert native_kernels.__wrapped__() is None
    monkeypatch.setattr(_native, "cpu_flags", lambda: flags)
    assert native_kernels.__wrapped__() is not None
    monkeypatch.setenv(NATIVE_KERNELS_VARIABLE, "0")
    assert native_kernels.__wrapped__() is None


def test_they_take_only_what_they_were_compiled_for() -> None:
    """The compiled functions check an item's size only: a strided view or integers would be read
    as if they were C-contiguous floats."""
    kernels = native_kernels()
    assert kernels is not None
    logits = np.zeros((10, 8))
    for wrong in (logits[:, ::2], logits.astype(np.int64), logits.reshape(-1)):
        with pytest.raises(TypeError, match="C-contiguous 2-D float32/float64"):
            kernels.first_nonfinite_row(wrong, 4)


def test_kernels_changed_since_the_build_are_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """An editable installation whose kernels' source was edited runs numba's kernels of the new
    source until it is reinstalled, never the native ones of the old."""
    assert native_kernels.__wrapped__() is not None
    monkeypatch.setattr(_native, "_source_hash", lambda *sources: "0" * 64)
    assert native_kernels.__wrapped__() is None


def test_cpu_flags_are_read_from_the_first_flags_line() -> None:
    text = "processor\t: 0\nflags\t\t: fpu sse2 avx2 hypervisor\nprocessor\t: 1\nflags\t\t: fpu\n"
    assert cpu_flags(text) == {"fpu", "sse2", "avx2"}  # "hypervisor" names no instructions
    assert cpu_flags("processor\t: 0\nFeatures\t: fp asimd evtstrm\n") == {"fp", "asimd", "evtstrm"}  # ARM
    assert cpu_flags("processor : 0\n") == frozenset()


def test_a_forked_child_runs_the_parallel_passes_on_threads_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent's pool is started; a child forked from it (a process pool, a Dask worker)
    would wait forever on the parent's threads, which are not in it. (The native kernels in
    both, whatever ran before in this process: numba's parallel kernels, which other tests may
    have loaded here, are not safe in a forked child.)"""
    kernels = native_kernels()
    assert kernels is not None
    monkeypatch.setattr(_kernels, "_COMPILED", None)
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 10, 300_000)
    logits = rng.normal(size=(300_000, 10)) + 3.0 * np.eye(10)[labels]
    in_parent = fit_temperature(logits, labels).temperature  # starts the parent's pool
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            os.write(write, repr(fit_temperature(logits, labels).temperature).encode())
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 120
    while (done := os.waitpid(child, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        pytest.fail("the forked child's fit did not finish in 120 s")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert float(os.read(read, 100)) == in_parent
