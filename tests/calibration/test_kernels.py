"""The compiled kernels against the numpy reference, the dispatch, mergeability, exactness.

Kept small: every (kernel, dtype) pair compiles once per fresh numba cache (a few seconds
each), so the shapes vary inside a test, not across many tests. No test measures time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.optimize import minimize_scalar

from calibration import _kernels, fit_temperature
from calibration._kernels import (
    COMPILED_MIN_ELEMENTS,
    calibration_sums,
    exact_ratio,
    first_nonfinite_row,
    nearby_ratio,
    nll_expansion_sums,
)
from calibration._kernels_numba import BIN_COLUMNS_MAX_CLASSES, COLUMNS_MAX_CLASSES
from calibration._native import NATIVE_KERNELS_VARIABLE, native_kernels

BOUND_BETAS = (1 / 20.0, 1 / 0.05)  # T at the default bounds


def _logits(rng: np.random.Generator, n: int, k: int, dtype: Any, scale: float = 3.0) -> NDArray[Any]:
    return (scale * rng.standard_normal((n, k))).astype(dtype)


def _labels(rng: np.random.Generator, n: int, k: int) -> NDArray[np.intp]:
    return rng.integers(0, k, n).astype(np.intp)


def _assert_sums_close(compiled: NDArray[np.float64], reference: NDArray[np.float64]) -> None:
    # 1e-12 relative to the sum's own size, or to the row count for sums that cancel to ~0.
    scale = np.maximum(np.abs(reference), 1e-12 * reference[0])
    np.testing.assert_array_less(np.abs(compiled - reference), 1e-12 * scale + 1e-300)


@pytest.fixture(params=["numba", "native"])
def compiled_kernels(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test of a compiled path twice: on numba's kernels (numba running in the process), and
    on the same kernels compiled ahead of time (numba not running: what ``compiled=True`` takes
    then). The installation must have built the latter (setup.py; ``make`` installs with it)."""
    monkeypatch.setattr(_kernels, "_COMPILED", _kernels._COMPILED)  # the dispatch as it was, after the test
    if request.param == "numba":
        _kernels._compiled()
    else:
        assert native_kernels() is not None, "the native kernels were not built: pip install -e . (setup.py)"
        monkeypatch.setattr(_kernels, "_COMPILED", None)
    return str(request.param)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_expansion_sums_match_the_reference(dtype: Any, compiled_kernels: str) -> None:
    rng = np.random.default_rng(5)
    for k in (2, 3, 10, 100, 1000):
        n = max(3, 60_000 // k) + 1  # not a multiple of the block size
        logits, labels = _logits(rng, n, k, dtype), _labels(rng, n, k)
        for beta in (*BOUND_BETAS, 0.4, 0.39987, 1.0, 1.7):
            for at_one in (True, False):
                compiled = nll_expansion_sums(logits, labels, beta, with_nll_at_one=at_one, compiled=True)
                reference = nll_expansion_sums(logits, labels, beta, with_nll_at_one=at_one, compiled=False)
                assert compiled[0] == n
                _assert_sums_close(compiled, reference)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_extreme_logits_do_not_overflow(dtype: Any, compiled_kernels: str) -> None:
    rng = np.random.default_rng(6)
    n, k = 500, 50
    logits = rng.choice([-1e4, -1.0, 0.0, 3.0, 1e4], size=(n, k)).astype(dtype)
    logits[0] = 1e4  # a flat row
    labels = _labels(rng, n, k)
    for beta in (*BOUND_BETAS, 0.4, 1.0):
        compiled = nll_expansion_sums(logits, labels, beta, compiled=True)
        reference = nll_expansion_sums(logits, labels, beta, compiled=False)
        assert np.isfinite(compiled).all()
        _assert_sums_close(compiled, reference)
        got = calibration_sums(logits, labels, beta, 15, compiled=True)
        want = calibration_sums(logits, labels, beta, 15, compiled=False)
        assert np.isfinite(got[1]).all() and np.isfinite(got[4]) and np.isfinite(got[5])
        _assert_calibration_equal(got, want)


def _assert_calibration_equal(got: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    np.testing.assert_array_equal(got[0], want[0])  # counts: exact
    np.testing.assert_array_equal(got[2], want[2])
    for index in (1, 3):
        np.testing.assert_allclose(got[index], want[index], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose([got[4], got[5]], [want[4], want[5]], rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_calibration_sums_match_the_reference(dtype: Any, compiled_kernels: str) -> None:
    rng = np.random.default_rng(7)
    for k in (2, 10, 100, 1000):
        n = max(3, 60_000 // k) + 1
        logits, labels = _logits(rng, n, k, dtype), _labels(rng, n, k)
        logits[: n // 10, :] = logits[: n // 10, :1]  # ties: the first arg-max counts
        for beta, n_bins in ((BOUND_BETAS[0], 15), (BOUND_BETAS[1], 10), (0.4, 1), (1.0, 15)):
            got = calibration_sums(logits, labels, beta, n_bins, compiled=True)
            want = calibration_sums(logits, labels, beta, n_bins, compiled=False)
            _assert_calibration_equal(got, want)


@pytest.fixture
def fresh_installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """As in a new process after an installation that could not build the native kernels: no
    kernel known to be compiled (an empty marker folder), numba not started, no numpy work
    booked, no background compile started."""
    monkeypatch.setattr(_kernels, "native_kernels", lambda: None)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba-cache"))
    monkeypatch.setattr(_kernels, "_READY", set())
    monkeypatch.setattr(_kernels, "_COMPILED", None)
    monkeypatch.setattr(_kernels, "_numpy_elements", 0)
    monkeypatch.setattr(_kernels, "_background_started", False)
    return tmp_path / "numba-cache"


def _spy_on_compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each use of the compiled kernels; numba counts as started from the first one."""
    loaded = _kernels._compiled()
    monkeypatch.setattr(_kernels, "_COMPILED", None)
    used: list[str] = []

    def spy() -> Any:
        used.append("compiled")
        _kernels._COMPILED = loaded
        return loaded

    monkeypatch.setattr(_kernels, "_compiled", spy)
    return used


def _spy_on_background_compile(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    started: list[str] = []
    monkeypatch.setattr(_kernels, "start_background_compile", lambda dtype: started.append(np.dtype(dtype).name))
    return started


def test_the_dispatch_takes_numpy_below_the_threshold_and_numba_above_once_compiled_and_running(
    fresh_installation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(8)
    k = 100
    small_rows = (COMPILED_MIN_ELEMENTS - 1) // k
    small, small_labels = _logits(rng, small_rows, k, np.float32), _labels(rng, small_rows, k)
    large, large_labels = _logits(rng, small_rows + 1, k, np.float32), _labels(rng, small_rows + 1, k)
    assert small.size < COMPILED_MIN_ELEMENTS <= large.size
    used = _spy_on_compiled(monkeypatch)
    _kernels._compiled()  # numba runs in this process
    used.clear()
    for name in ("expansion_sums_serial", "calibration_bin_sums"):
        _kernels._mark_compiled(_kernels._COMPILED, name, np.dtype(np.float32))
    nll_expansion_sums(small, small_labels, 0.5)
    calibration_sums(small, small_labels, 0.5, 15)
    assert used == []
    nll_expansion_sums(large, large_labels, 0.5)
    calibration_sums(large, large_labels, 0.5, 15)
    assert used == ["compiled", "compiled"]


def test_a_large_input_on_a_fresh_installation_runs_on_numpy_and_compiles_in_the_background(
    fresh_installation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No call waits for a compiler (5-25 s a kernel): numpy runs, and the kernels are compiled
    in another process for the calls and processes that follow."""
    rng = np.random.default_rng(10)
    logits, labels = _logits(rng, 20_000, 10, np.float32), _labels(rng, 20_000, 10)
    assert logits.size >= COMPILED_MIN_ELEMENTS
    used = _spy_on_compiled(monkeypatch)
    started = _spy_on_background_compile(monkeypatch)
    reference = nll_expansion_sums(logits, labels, 0.5, compiled=False)
    assert started == []  # a forced path starts nothing
    np.testing.assert_array_equal(nll_expansion_sums(logits, labels, 0.5), reference)
    calibration_sums(logits, labels, 0.5, 15)
    assert first_nonfinite_row(logits) == -1
    fit_temperature(logits, labels)
    assert used == []
    assert started and set(started) == {"float32"}
    before = len(started)
    nll_expansion_sums(logits[:1000], labels[:1000], 0.5)  # a small input never starts one
    assert len(started) == before


def test_a_process_starts_numba_once_its_numpy_work_would_have_paid_for_it(
    fresh_installation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kernels compiled on the installation, numba not started in this process: large inputs run
    on numpy until their logits reach LOAD_MIN_ELEMENTS (numba's start-up, ~1 s of CPU, costs
    about as much numpy work), then on the compiled kernels."""
    rng = np.random.default_rng(12)
    logits, labels = _logits(rng, 20_000, 10, np.float32), _labels(rng, 20_000, 10)
    for name in ("expansion_sums_serial", "calibration_bin_sums", "first_nonfinite_row"):
        _kernels._mark_compiled(_kernels._COMPILED, name, np.dtype(np.float32))
    used = _spy_on_compiled(monkeypatch)
    started = _spy_on_background_compile(monkeypatch)
    monkeypatch.setattr(_kernels, "LOAD_MIN_ELEMENTS", 5 * logits.size // 2)
    reference = nll_expansion_sums(logits, labels, 0.5, compiled=False)
    np.testing.assert_array_equal(nll_expansion_sums(logits, labels, 0.5), reference)
    calibration_sums(logits, labels, 0.5, 15)
    assert used == [] and _kernels._numpy_elements == 2 * logits.size
    _assert_sums_close(nll_expansion_sums(logits, labels, 0.5), reference)  # 3 x 200,000 >= 500,000
    assert used == ["compiled"]
    assert first_nonfinite_row(logits) == -1  # numba runs now: every large input takes it
    assert used == ["compiled", "compiled"] and started == []


def test_a_compiled_kernel_is_remembered_across_processes(fresh_installation: Path) -> None:
    """The marker a compiled call leaves in the cache folder is what a later process reads."""
    dtype = np.dtype(np.float64)
    assert not _kernels.compiled_path("calibration_bin_sums", COMPILED_MIN_ELEMENTS, dtype)
    rng = np.random.default_rng(11)
    logits, labels = _logits(rng, 10, 4, np.float64), _labels(rng, 10, 4)
    calibration_sums(logits, labels, 0.5, 15, compiled=True)
    assert list(fresh_installation.rglob("*.ready"))
    _kernels._READY.clear()  # as in a new process
    assert _kernels.compiled_path("calibration_bin_sums", COMPILED_MIN_ELEMENTS, dtype)
    assert not _kernels.compiled_path("calibration_bin_sums", COMPILED_MIN_ELEMENTS, np.dtype(np.float32))
    assert not _kernels.compiled_path("calibration_bin_sums", COMPILED_MIN_ELEMENTS - 1, dtype)


_FIRST_LARGE_FIT = """
import sys
import numpy as np
from calibration import _kernels, fit_temperature
rng = np.random.default_rng(0)
labels = rng.integers(0, 10, 1_000_000)
logits = (2.0 * (rng.normal(size=(1_000_000, 10)) + 3.0 * np.eye(10)[labels])).astype(np.float32)
fit = fit_temperature(logits, labels)
print(fit.temperature, "numba" in sys.modules, _kernels._background_started)
"""


def _fresh_environment(cache: Path, background_compile: bool, native: bool = False) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["NUMBA_CACHE_DIR"] = str(cache)
    env[_kernels.BACKGROUND_COMPILE_VARIABLE] = "1" if background_compile else "0"
    env[NATIVE_KERNELS_VARIABLE] = "1" if native else "0"
    return env


@pytest.mark.parametrize("native", [True, False], ids=["native kernels", "without them"])
def test_the_first_large_fit_on_a_fresh_installation_compiles_nothing(tmp_path: Path, native: bool) -> None:
    """1M x 10 with an empty numba cache, in a new process: the kernels compiled at installation
    from the first call, or without them NumPy, at once (background compiles switched off);
    numba never imported, nothing compiled, the same T as this process's fit to 1e-9."""
    if native:
        assert native_kernels() is not None, "the native kernels were not built"
    done = subprocess.run([sys.executable, "-c", _FIRST_LARGE_FIT], capture_output=True, text=True, timeout=600,
                          env=_fresh_environment(tmp_path / "cache", False, native), check=True)
    temperature, numba_loaded, background = done.stdout.split()
    assert numba_loaded == "False" and background == "False"
    assert not list((tmp_path / "cache").rglob("*.nbi"))
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 1_000_000)
    logits = (2.0 * (rng.normal(size=(1_000_000, 10)) + 3.0 * np.eye(10)[labels])).astype(np.float32)
    assert abs(float(temperature) - fit_temperature(logits, labels).temperature) < 1e-9 * float(temperature)


_FIRST_FIT_STARTS_A_COMPILE = """
import sys
import numpy as np
from calibration import _kernels, fit_temperature
rng = np.random.default_rng(0)
labels = rng.integers(0, 10, 20_000)
logits = (2.0 * rng.normal(size=(20_000, 10)) + 6.0 * np.eye(10)[labels]).astype(np.float32)
fit_temperature(logits, labels)
print("numba" in sys.modules, _kernels._background_started)
"""


def test_a_background_compile_runs_in_its_own_low_priority_process_one_at_a_time(tmp_path: Path) -> None:
    """The first large input on a fresh installation leaves a compiling process behind it: in
    its own session (it outlives the command), at nice 19, holding the installation's lock, so
    that another process starts none. (Stopped here before it finishes: minutes of a core.)"""
    env = _fresh_environment(tmp_path / "cache", True)
    done = subprocess.run([sys.executable, "-c", _FIRST_FIT_STARTS_A_COMPILE], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    assert done.stdout.split() == ["False", "True"]
    lock = next((tmp_path / "cache" / "thermostat").glob("thermostat-compile-*.lock"))
    deadline = time.monotonic() + 60
    while not lock.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = int(lock.read_text())
    try:
        assert os.getsid(pid) == pid and os.getpriority(os.PRIO_PROCESS, pid) == 19
        again = subprocess.run([sys.executable, "-c", _FIRST_FIT_STARTS_A_COMPILE], env=env, capture_output=True,
                               text=True, timeout=600, check=True)
        assert again.stdout.split() == ["False", "True"]  # it tried, once ...
        assert int(lock.read_text()) == pid  # ... and the lock's holder is still the only compiler
    finally:
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid)


def _running(pid: int) -> bool:
    """Alive and not a zombie (its parent exited: whoever adopted it may reap it late)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_sums_over_partitions_add_up_to_the_sums_over_the_whole(compiled_kernels: str) -> None:
    rng = np.random.default_rng(9)
    n, k = 3_001, 64
    logits, labels = _logits(rng, n, k, np.float32), _labels(rng, n, k)
    parts = np.array_split(np.arange(n), 4)
    for compiled in (True, False):
        whole = nll_expansion_sums(logits, labels, 0.4, compiled=compiled)
        merged = sum(nll_expansion_sums(logits[p], labels[p], 0.4, compiled=compiled) for p in parts)
        _assert_sums_close(merged, whole)
        whole_bins = calibration_sums(logits, labels, 0.4, 15, compiled=compiled)
        pieces = [calibration_sums(logits[p], labels[p], 0.4, 15, compiled=compiled) for p in parts]
        merged_bins = tuple(sum(piece[i] for piece in pieces) for i in range(6))
        _assert_calibration_equal(merged_bins, whole_bins)


def test_strided_and_float16_inputs_are_read_correctly(compiled_kernels: str) -> None:
    rng = np.random.default_rng(10)
    logits = _logits(rng, 4_000, 80, np.float64)
    labels = _labels(rng, 2_000, 80)
    strided = logits[::2]
    assert not strided.flags.c_contiguous
    want = nll_expansion_sums(np.ascontiguousarray(strided), labels, 0.7, compiled=False)
    _assert_sums_close(nll_expansion_sums(strided, labels, 0.7, compiled=True), want)
    half = strided.astype(np.float16)
    _assert_sums_close(
        nll_expansion_sums(half, labels, 0.7, compiled=True), nll_expansion_sums(half, labels, 0.7, compiled=False)
    )


@pytest.mark.parametrize(
    "k", [2, COLUMNS_MAX_CLASSES, COLUMNS_MAX_CLASSES + 1, BIN_COLUMNS_MAX_CLASSES, BIN_COLUMNS_MAX_CLASSES + 1]
)
def test_both_layouts_match_the_reference_on_either_side_of_the_switch(k: int, compiled_kernels: str) -> None:
    # Rows of up to COLUMNS_MAX_CLASSES (BIN_COLUMNS_MAX_CLASSES for the evaluation) logits are
    # taken 64 at a time, transposed; wider ones one at a time. n is no multiple of 64 or of a block.
    rng = np.random.default_rng(16)
    n = 64 * 5 + 37
    for dtype in (np.float32, np.float64):
        logits, labels = _logits(rng, n, k, dtype), _labels(rng, n, k)
        logits[:40, :] = logits[:40, :1]  # ties: the first arg-max counts
        logits[40:50, k - 1] = logits[40:50].max(axis=1) + 1.0  # the maximum in the last column
        for beta in (*BOUND_BETAS, 0.40213, 0.4, 9 / 22, 1.0):
            for at_one in (True, False):
                compiled = nll_expansion_sums(logits, labels, beta, with_nll_at_one=at_one, compiled=True)
                reference = nll_expansion_sums(logits, labels, beta, with_nll_at_one=at_one, compiled=False)
                _assert_sums_close(compiled, reference)
            for n_bins in (1, 15):
                got = calibration_sums(logits, labels, beta, n_bins, compiled=True)
                _assert_calibration_equal(got, calibration_sums(logits, labels, beta, n_bins, compiled=False))


def test_padded_row_buffers_match_the_reference_for_every_padding_length(compiled_kernels: str) -> None:
    # The row layout pads its buffers to a multiple of 8 with a d whose exp is exactly 0:
    # K = 33..40 gives every padding length (7 down to 0), in the fit's pass and the
    # evaluation's; at an inverse temperature too small for that exp to be 0 (1e-149: the
    # padding's exp would be exp(-10)) the buffers are not padded. Extreme rows (a spread of
    # 1e100, whose centred terms reach 1e200) stay finite beside the padding.
    rng = np.random.default_rng(17)
    n = 64 * 3 + 5
    for k in range(COLUMNS_MAX_CLASSES + 1, COLUMNS_MAX_CLASSES + 9):
        for dtype in (np.float32, np.float64):
            logits, labels = _logits(rng, n, k, dtype), _labels(rng, n, k)
            logits[:20, :] = logits[:20, :1]  # ties: the first arg-max counts
            for beta in (1e-149, *BOUND_BETAS, 0.40213, 0.4, 1.0):
                if dtype == np.float64 and beta >= BOUND_BETAS[0]:
                    logits[20:30, 3] = -1e100  # a spread of 1e100, not on the label
                    labels[20:30] = 0
                for at_one in (True, False):
                    compiled = nll_expansion_sums(logits, labels, beta, with_nll_at_one=at_one, compiled=True)
                    assert np.isfinite(compiled).all(), (k, dtype, beta)
                    _assert_sums_close(compiled, nll_expansion_sums(logits, labels, beta, with_nll_at_one=at_one, compiled=False))
                got = calibration_sums(logits, labels, beta, 15, compiled=True)
                _assert_calibration_equal(got, calibration_sums(logits, labels, beta, 15, compiled=False))


def test_ratios() -> None:
    for beta in (0.05, 0.3984375, 0.4, 1 / 3, 0.9, 1.0, 1.37, 19.9):
        near = nearby_ratio(beta)
        assert abs(near / beta - 1) <= 5e-3
        ratio = exact_ratio(near)
        assert ratio is not None and ratio[0] / ratio[1] == near
    assert exact_ratio(0.123456789) is None


def test_first_nonfinite_row_on_both_paths(compiled_kernels: str) -> None:
    rng = np.random.default_rng(11)
    for rows in (10, COMPILED_MIN_ELEMENTS // 50 + 7):
        logits = _logits(rng, rows, 50, np.float32)
        assert first_nonfinite_row(logits) == -1
        for row, value in ((0, np.nan), (rows // 2, np.inf), (rows - 1, -np.inf)):
            bad = logits.copy()
            bad[row, 3] = value
            bad[-1, 0] = np.nan
            assert first_nonfinite_row(bad) == row


def _optimum(logits: NDArray[Any], labels: NDArray[np.intp]) -> float:
    """The float64 optimum by bounded search in log T with a tight tolerance."""
    d = logits.astype(np.float64)
    d -= d.max(axis=1, keepdims=True)
    d_label = d[np.arange(d.shape[0]), labels]

    def nll(log_t: float) -> float:
        beta = np.exp(-log_t)
        return float(np.mean(np.log(np.exp(beta * d).sum(axis=1)) - beta * d_label))

    result = minimize_scalar(nll, bounds=(np.log(0.05), np.log(20.0)), method="bounded", options={"xatol": 1e-11})
    return float(np.exp(result.x))


def _softmax_labels(rng: np.random.Generator, z: NDArray[np.float64]) -> NDArray[np.intp]:
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return (p.cumsum(axis=1) > rng.random((z.shape[0], 1))).argmax(axis=1).astype(np.intp)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_fit_is_within_1e6_of_the_float64_optimum(dtype: Any) -> None:
    rng = np.random.default_rng(12)
    # (rows, classes): the compiled path for all but the first; a warm start for the last.
    for n, k in ((400, 2), (3_000, 10), (2_000, 100), (1_000, 1_000), (13_000, 20)):
        z = rng.standard_normal((n, k))
        labels = _softmax_labels(rng, z)
        logits = (2.5 * z).astype(dtype)
        fit = fit_temperature(logits, labels)
        assert abs(fit.temperature / _optimum(logits, labels) - 1) <= 1e-6, (n, k)
        exact_before = nll_expansion_sums(logits, labels, 1.0, compiled=False)
        assert fit.nll_before == pytest.approx(exact_before[1] / n, rel=1e-12)


def test_ratio_path_matches_the_reference_for_every_bit_count(compiled_kernels: str) -> None:
    # beta = p / q with max(p, q) from 1 to 9 bits (256): each specialised powers loop (up to 5
    # bits) and the second exp beyond, in both layouts (7 classes: columns, 67: rows).
    rng = np.random.default_rng(13)
    n = 2_001
    for dtype, k in ((np.float32, 67), (np.float64, 67), (np.float32, 7), (np.float64, 7)):
        logits, labels = _logits(rng, n, k, dtype), _labels(rng, n, k)
        for beta in (1.0, 0.5, 3.0, 5 / 7, 2 / 15, 9 / 22, 17 / 31, 100 / 63, 255 / 128, 1 / 256, 255 / 256):
            ratio = exact_ratio(beta)
            assert ratio is not None and max(ratio) <= 256
            compiled = nll_expansion_sums(logits, labels, beta, compiled=True)
            reference = nll_expansion_sums(logits, labels, beta, compiled=False)
            _assert_sums_close(compiled, reference)


def test_serial_and_parallel_kernels_give_the_same_sums_bit_for_bit_compiled_either_way() -> None:
    # Above PARALLEL_MIN_ELEMENTS the parallel kernel runs, below it the serial one: the
    # blocks and their order are the same, so are the sums (and so the fit).
    rng = np.random.default_rng(14)
    k = 100
    n = _kernels.PARALLEL_MIN_ELEMENTS // k + 501
    logits, labels = _logits(rng, n, k, np.float32), _labels(rng, n, k)
    kernels, native = _kernels._compiled(), native_kernels()
    assert native is not None
    block = _kernels._block_rows(logits)
    for beta, mode, p, q in ((0.40213, 0, 1, 1), (1.0, 1, 1, 1), (9 / 22, 2, 9, 22), (0.7, 3, 1, 1)):
        arguments = (labels, beta, mode, p, q, _kernels.MAX_LOGIT_SPREAD, block)
        parallel = kernels.expansion_sums(logits, *arguments)
        np.testing.assert_array_equal(parallel, kernels.expansion_sums_serial(logits, *arguments))
        # The same kernels compiled ahead of time: their blocks on Python threads, then in order.
        np.testing.assert_array_equal(native.expansion_sums(logits, *arguments), parallel)
        np.testing.assert_array_equal(native.expansion_sums_serial(logits, *arguments), parallel)
    interior = np.linspace(0.0, 1.0, 16)[1:-1]
    for part, part_labels in ((logits, labels), (logits[:, :10].copy(), labels % 10)):  # both layouts
        want = kernels.calibration_bin_sums(part, part_labels, 0.7, interior, _kernels._block_rows(part))
        got = native.calibration_bin_sums(part, part_labels, 0.7, interior, _kernels._block_rows(part))
        for got_part, want_part in zip(got, want, strict=True):
            np.testing.assert_array_equal(got_part, want_part)
    large = nll_expansion_sums(logits, labels, 9 / 22)
    _assert_sums_close(large, nll_expansion_sums(logits, labels, 9 / 22, compiled=False))


def test_any_non_finite_logit_makes_the_expansion_sums_non_finite(compiled_kernels: str) -> None:
    # fit_temperature folds the finiteness check into its passes on this guarantee.
    rng = np.random.default_rng(15)
    n = 300
    for dtype, k in ((np.float32, 30), (np.float64, 30), (np.float32, 40), (np.float64, 40)):  # both layouts
        base, labels = _logits(rng, n, k, dtype), _labels(rng, n, k)
        for value in (np.nan, np.inf, -np.inf):
            for column in (0, 7, k - 1):
                logits = base.copy()
                logits[5, column] = value
                for beta in (0.40213, 1.0, 0.4, 20.0):
                    for compiled in (True, False):
                        with np.errstate(invalid="ignore", over="ignore"):
                            sums = nll_expansion_sums(logits, labels, beta, with_nll_at_one=False, compiled=compiled)
                        assert not np.isfinite(sums[2]), (dtype, value, column, beta, compiled)
        flat = base.copy()
        flat[9] = -np.inf  # a row of -inf only
        for compiled in (True, False):
            with np.errstate(invalid="ignore"):
                assert not np.isfinite(nll_expansion_sums(flat, labels, 0.5, compiled=compiled)[2])


def test_closest_ratios_are_the_closest_per_bit_count() -> None:
    from calibration._kernels import closest_ratios

    for beta in [*np.geomspace(1 / 20.0, 20.0, 300), 0.4, 1.0, 1 / 3, 0.05, 20.0, 255 / 256]:
        ratios = closest_ratios(float(beta))
        assert [bits for bits, _ in ratios] == sorted({bits for bits, _ in ratios})
        for bits, ratio in ratios:
            pair = exact_ratio(ratio)
            assert pair is not None and max(pair).bit_length() <= bits
            # Brute force over every p/q with that many bits: none is closer.
            closest = min(
                abs(p / q - beta)
                for q in range(1, 257)
                for p in (int(np.floor(beta * q)), int(np.ceil(beta * q)))
                if 1 <= p <= 256 and max(p, q).bit_length() == bits
            )
            assert abs(ratio - beta) <= closest + 1e-15
