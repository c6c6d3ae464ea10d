"""One-pass kernels over logits: the only code that touches every logit.

Two passes exist, each reading every logit once and accumulating in float64:

- :func:`nll_expansion_sums` — at an inverse temperature ``beta``, the NLL and its first
  four derivatives in ``beta``. With ``d = z - max(z)`` per row and ``p = softmax(beta * d)``,
  the per-row NLL is ``log sum exp(beta * d) - beta * d_y``; its derivatives in ``beta`` are
  the cumulants of ``d`` under ``p`` (minus ``d_y`` for the first), so one pass gives a
  quartic model of the NLL around ``beta``.
- :func:`calibration_sums` — at ``beta``, the per-bin counts and sums of the top-label
  confidence plus NLL and Brier sums (the fields of :class:`CalibrationStats`).

Both return sums, never means: sums over parts of a dataset add up to the sums over the
whole, so a fit or an evaluation over partitions is one map and one reduce.

Each dispatches by size and by what runs in this process (:func:`compiled_path`). Below
:data:`COMPILED_MIN_ELEMENTS` logits the numpy functions (``_reference_*``: chunked, in
place, the reference the tests hold the compiled kernels to) run. Above it the fused kernels
of :mod:`calibration._kernels_numba` run, compiled one of two ways. An installation compiles
them ahead of time (:mod:`calibration._native`: built by ``setup.py``, loaded in well under a
millisecond, no numba in the process), and every large input takes those unless numba's
kernels are loaded in the process (then those). An installation that could not
build them (not Linux, no C compiler) falls back on numba's compilation on demand: its
kernels run when they are compiled on this installation
(numba caches them on disk, and a marker beside that cache says so) and numba already runs
in this process, or starting it pays: numba's import and first kernels cost about half a
second of CPU once per process, about what the compiled passes save over
:data:`LOAD_MIN_ELEMENTS` logits, so a process starts it once its numpy work on large inputs
reaches that many logits (a command that fits one set of 20M logits never does; a
long-lived process does by its fourth such fit). The compiled expansion runs in parallel
from :data:`PARALLEL_MIN_ELEMENTS` logits and serially below. No call waits for a compiler:
a large input that meets kernels not compiled yet runs on numpy and starts compiling them
in a separate low-priority process (:func:`start_background_compile`: once per
installation, 1-4 minutes of one core), which later calls and processes use;
:func:`compile_kernels` compiles them in the foreground (``make``, an image's build step).
Either path gives the same sums to float rounding (the tests hold them to 1e-12). Float32
logits are read as they are; the numpy path promotes them chunk by chunk, so the peak
memory beyond the input is a few chunks whatever N.
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._native import native_kernels

if sys.platform != "win32":
    import fcntl

__all__ = [
    "nll_expansion_sums",
    "calibration_sums",
    "chunk_rows",
    "nearby_ratio",
    "closest_ratios",
    "first_nonfinite_row",
    "first_refused_row",
    "exact_ratio",
    "N_EXPANSION_SUMS",
    "COMPILED_MIN_ELEMENTS",
    "LOAD_MIN_ELEMENTS",
    "PARALLEL_MIN_ELEMENTS",
    "compile_kernels",
    "compiled_path",
    "start_background_compile",
    "MAX_LOGIT_SPREAD",
]

# [n, nll_sum, gradient_sum, k2_sum, k3_sum, k4_sum, nll_at_one_sum, k5_sum, k6_sum, gradient_square_sum]
N_EXPANSION_SUMS = 10
_CHUNK_ELEMENTS = 1 << 20  # ~8 MB of float64 per temporary
# Below this many logits the numpy path is used: a call would save ~2 ms on the compiled one,
# about what waking the parallel region's threads costs on a loaded machine.
COMPILED_MIN_ELEMENTS = 1 << 17
# Numpy work (logits, in calls of at least COMPILED_MIN_ELEMENTS) after which a process starts
# numba. Its import and first kernels from the cache (with scipy.linalg, which numba's first
# kernel imports) cost 0.5-0.65 s of CPU once per process, what the compiled fit saves over
# 3-5e7 logits (NumPy 13-17 ns a logit more; benchmarks/README.md). A little above that, so
# that a command reading and fitting one set of 20M logits (its check's scan, then the fit)
# stays on NumPy. Ski rental: a process pays at most about twice what knowing its future
# would have cost.
LOAD_MIN_ELEMENTS = 1 << 26
# Below this many logits the compiled expansion runs on the calling thread (the serial
# kernel: same blocks, same sums bit for bit). A parallel region must wait for the other
# threads to be scheduled: on a loaded machine that wait (~10-20 ms) dwarfs a pass over a
# warm-start subsample (~1 ms).
PARALLEL_MIN_ELEMENTS = 1 << 20
# Rows per block of the compiled kernels: ~16k logits, whose float64 row buffer is in L1.
_BLOCK_ELEMENTS = 1 << 14
# Blocks handed to a thread at a time: small, so that a core slowed by other work takes
# fewer blocks instead of holding the others up (the sums do not depend on it).
_PARALLEL_CHUNK_BLOCKS = 4
# Largest numerator and denominator of the ratio p/q that stands for beta (see below).
_MAX_RATIO_TERM = 256
#: The largest spread max − min of the logits within a row that is accepted. Only
#: differences within a row matter (softmax is shift-invariant); a row spanning 1e100 is
#: already one-hot at any temperature below 1e97, and the bound keeps every sum the
#: passes accumulate finite in float64: a row's NLL is at most its spread over T, its
#: squared gradient at most the spread squared (1e200), leaving 1e108 for the sum over
#: rows. Rows beyond it (and rows whose max − min overflows float64, as at logits of
#: ±1.7e308) are refused by :func:`first_refused_row`'s scan; the fit's pass folds the
#: part of the rule its sums depend on (see :func:`nll_expansion_sums`).
MAX_LOGIT_SPREAD = 1e100

CalibrationSums = tuple[
    NDArray[np.int64], NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], float, float
]


def chunk_rows(n_classes: int) -> int:
    """Rows per chunk so that one float64 temporary stays near 8 MB."""
    return max(1, _CHUNK_ELEMENTS // n_classes)


def nll_expansion_sums(
    logits: NDArray[np.floating[Any]],
    labels: NDArray[np.intp],
    beta: float,
    *,
    with_nll_at_one: bool = True,
    compiled: bool | None = None,
) -> NDArray[np.float64]:
    """Sums over rows of the NLL at ``beta`` and its first six ``beta``-derivatives.

    Returns ``[n, nll_sum, gradient_sum, k2_sum, k3_sum, k4_sum, nll_at_one_sum, k5_sum,
    k6_sum, gradient_square_sum]`` (``kj`` the j-th cumulant of d, the j-th derivative) where
    ``nll_at_one_sum`` is the NLL sum at ``beta = 1`` (T = 1), or 0 when not asked for, and
    ``gradient_square_sum`` sums each row's squared gradient (its spread gives the standard
    error of a sample's optimum).
    It costs nothing extra when ``beta`` is 1, little when ``beta`` is a ratio ``p / q`` of
    integers up to 31 (one multiply-and-select stage per bit of max(p, q): ~12% of a pass
    at 2 bits, ~18% at 3, ~24% at 5, K = 100; see :func:`closest_ratios`), otherwise a second
    ``exp`` per logit (~34%; also for ratios of 6 bits or more, where it is the cheaper way).
    Inputs are trusted, but a non-finite logit, a row whose max − min overflows, or a label
    whose logit lies more than :data:`MAX_LOGIT_SPREAD` below its row's maximum makes the
    sums non-finite, so a caller can fold those checks into the pass (the spread of the
    other logits does not reach the sums). ``compiled`` forces the path (None:
    :func:`compiled_path` decides).
    """
    name = "expansion_sums" if logits.size >= PARALLEL_MIN_ELEMENTS else "expansion_sums_serial"
    if not _takes_compiled(compiled, name, logits):
        # Overflow (only at temperatures far outside any sensible bounds) shows as non-finite
        # sums, as in the kernels, not as numpy warnings.
        with np.errstate(over="ignore", invalid="ignore"):
            return _reference_nll_expansion_sums(logits, labels, beta, with_nll_at_one=with_nll_at_one)
    kernels = _compiled_kernels()
    mode, p, q = kernels.NLL_AT_ONE_SKIP, 1, 1
    if with_nll_at_one:
        ratio = exact_ratio(beta)
        if beta == 1.0:
            mode = kernels.NLL_AT_ONE_SAME
        elif ratio is not None:
            mode, (p, q) = kernels.NLL_AT_ONE_RATIO, ratio
        else:
            mode = kernels.NLL_AT_ONE_EXP
    kernel = getattr(kernels, name)
    sums = np.zeros(N_EXPANSION_SUMS, dtype=np.float64)
    for part, part_labels in _compiled_parts(logits, labels):
        sums += kernel(part, part_labels, float(beta), mode, p, q, MAX_LOGIT_SPREAD, _block_rows(part))
        del part, part_labels  # a copied chunk is freed before the next one is made
    _mark_compiled(kernels, name, logits.dtype)
    return sums


def calibration_sums(
    logits: NDArray[np.floating[Any]],
    labels: NDArray[np.intp],
    beta: float,
    n_bins: int,
    *,
    compiled: bool | None = None,
) -> CalibrationSums:
    """Per-bin count, confidence sum, correct count, Σ q(1-q); NLL sum; Brier sum.

    Bins are equal-width on the top-label confidence, bin m = (m/M, (m+1)/M] (bin 0 also
    holds 0); "correct" means the first arg-max of the logits is the label. ``compiled``
    forces the path (None: :func:`compiled_path` decides). Inputs are trusted.
    """
    if not _takes_compiled(compiled, "calibration_bin_sums", logits):
        return _reference_calibration_sums(logits, labels, beta, n_bins)
    kernels = _compiled_kernels()
    interior = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    count = np.zeros(n_bins, dtype=np.int64)
    confidence_sum = np.zeros(n_bins, dtype=np.float64)
    correct_count = np.zeros(n_bins, dtype=np.int64)
    variance_sum = np.zeros(n_bins, dtype=np.float64)
    nll_sum = 0.0
    brier_sum = 0.0
    for part, part_labels in _compiled_parts(logits, labels):
        sums = kernels.calibration_bin_sums(part, part_labels, float(beta), interior, _block_rows(part))
        count += sums[0]
        confidence_sum += sums[1]
        correct_count += sums[2]
        variance_sum += sums[3]
        nll_sum += float(sums[4])
        brier_sum += float(sums[5])
    _mark_compiled(kernels, "calibration_bin_sums", logits.dtype)
    return count, confidence_sum, correct_count, variance_sum, nll_sum, brier_sum


def first_nonfinite_row(logits: NDArray[np.floating[Any]]) -> int:
    """The first row holding a NaN or an infinity, or -1: one read, no temporary.

    >>> first_nonfinite_row(np.array([[0.0, 1.0], [np.inf, 0.0], [np.nan, 0.0]]))
    1
    """
    return first_refused_row(logits, math.inf)


_FLOAT32_SPREAD = 2.0 * float(np.finfo(np.float32).max)


def first_refused_row(logits: NDArray[np.floating[Any]], max_spread: float = MAX_LOGIT_SPREAD) -> int:
    """The first row holding a NaN or an infinity or whose max − min (in float64) is above
    ``max_spread``, or -1: one read, no temporary beyond a chunk.

    >>> first_refused_row(np.array([[0.0, 1.0], [-1e200, 1e200], [np.nan, 0.0]]))
    1
    """
    # float32 values span at most 2 * 3.4e38 in float64: a limit above that needs no max and min.
    finite_only = max_spread >= _FLOAT32_SPREAD if logits.dtype == np.float32 else max_spread == math.inf
    name = "first_nonfinite_row" if finite_only else "first_refused_row"
    if logits.dtype not in (np.float32, np.float64) or not _takes_compiled(None, name, logits):
        return _reference_first_refused_row(logits, max_spread)
    kernels = _compiled_kernels()
    offset = 0
    for part, _ in _compiled_parts(logits, np.zeros(logits.shape[0], dtype=np.intp)):
        row: int = int(kernels.first_nonfinite_row(part, _block_rows(part)) if finite_only
                       else kernels.first_refused_row(part, float(max_spread), _block_rows(part)))
        if row >= 0:
            return offset + row
        offset += part.shape[0]
    _mark_compiled(kernels, name, logits.dtype)
    return -1


def exact_ratio(beta: float) -> tuple[int, int] | None:
    """``(p, q)`` with ``p / q == beta`` as floats and p, q <= 256 (smallest q), else None.

    >>> exact_ratio(0.4), exact_ratio(1 / 3), exact_ratio(0.123456789)
    ((2, 5), (1, 3), None)
    """
    for q in range(1, _MAX_RATIO_TERM + 1):
        p = round(beta * q)
        if 1 <= p <= _MAX_RATIO_TERM and p / q == beta:
            return p, q
    return None


def closest_ratios(beta: float) -> list[tuple[int, float]]:
    """For each bit length of max(p, q) (p, q <= 256), the ratio p / q closest to ``beta``:
    ``(bits, ratio)`` pairs, fewest bits (cheapest for the compiled pass) first.

    At ``beta = p / q`` one ``v = exp(d / q)`` per logit gives both ``exp(beta * d) = v**p``
    and ``exp(d) = v**q`` (the NLL at T = 1) by one multiply-and-select stage per bit of
    max(p, q).

    >>> closest_ratios(0.41)[:3]
    [(2, 0.3333333333333333), (3, 0.4), (4, 0.4166666666666667)]
    """
    q = np.arange(1, _MAX_RATIO_TERM + 1)
    p = np.rint(beta * q)
    keep = (p >= 1) & (p <= _MAX_RATIO_TERM)
    p, q = p[keep].astype(np.int64), q[keep]
    ratio = p / q
    bits = np.maximum(p, q).astype(np.uint64)
    bits = np.floor(np.log2(bits)).astype(np.int64) + 1
    # Closest within each bit count (ties: the smaller q, as a loop over q would keep).
    order = np.lexsort((q, np.abs(ratio - beta), bits))
    first = np.unique(bits[order], return_index=True)[1]
    return [(int(bits[order][i]), float(ratio[order][i])) for i in first]


def nearby_ratio(beta: float, rtol: float = 5e-3) -> float:
    """The ratio p / q within ``rtol`` of ``beta`` with the fewest bits (then the closest): the
    cheapest for the compiled pass (see :func:`closest_ratios`). ``beta`` itself when none is.

    >>> nearby_ratio(0.39987)
    0.4
    """
    return next((ratio for _, ratio in closest_ratios(beta) if abs(ratio - beta) <= rtol * beta), beta)


def _block_rows(logits: NDArray[np.floating[Any]]) -> int:
    return max(1, _BLOCK_ELEMENTS // int(logits.shape[1]))


def _compiled_parts(
    logits: NDArray[np.floating[Any]], labels: NDArray[np.intp]
) -> Iterator[tuple[NDArray[np.floating[Any]], NDArray[np.intp]]]:
    """The input as C-contiguous float32/float64 pieces the kernels take as they are.

    A C-contiguous float32 or float64 array is one piece, not copied. Anything else (a
    strided view, Fortran order, float16) is copied chunk by chunk, so memory stays bounded.
    """
    labels = np.ascontiguousarray(labels, dtype=np.intp)
    if logits.dtype in (np.float32, np.float64) and logits.flags.c_contiguous:
        yield logits, labels
        return
    dtype = logits.dtype if logits.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    step = chunk_rows(logits.shape[1])
    for start in range(0, logits.shape[0], step):
        yield np.ascontiguousarray(logits[start : start + step], dtype=dtype), labels[start : start + step]


def compiled_path(kernel: str, n_elements: int, dtype: np.dtype[Any]) -> bool:
    """Does an input of ``n_elements`` logits of ``dtype`` take the compiled ``kernel``?

    Below :data:`COMPILED_MIN_ELEMENTS`: never. From it: when the installation holds the
    kernels compiled ahead of time and numba's kernels are not loaded in this process
    (:mod:`calibration._native`); or else when the kernel is compiled for that dtype on this
    installation (in this process, or marked ready in numba's cache folder by an earlier
    run: :func:`compile_kernels`, a background compile, a compiled call) and either
    numba runs in this process already or this process's numpy work on such inputs, this one
    included, reaches :data:`LOAD_MIN_ELEMENTS` logits (then starting numba has paid). A
    marker that outlives numba's cache only costs one compile more; it never changes a number.

    >>> compiled_path("expansion_sums_serial", 1_000, np.dtype(np.float32))
    False
    """
    if n_elements < COMPILED_MIN_ELEMENTS:
        return False
    if _COMPILED is None and native_kernels() is not None:
        return True
    if not _compiled_on_installation(kernel, dtype):
        return False
    return _COMPILED is not None or _numpy_elements + n_elements >= LOAD_MIN_ELEMENTS


def _takes_compiled(compiled: bool | None, kernel: str, logits: NDArray[np.floating[Any]]) -> bool:
    """The path of a call (``compiled``: forced; None: :func:`compiled_path`). A large input
    left to numpy is booked against numba's start-up, and starts compiling the kernels in the
    background when they are not compiled on this installation."""
    global _numpy_elements
    if compiled is not None:
        return compiled
    if compiled_path(kernel, logits.size, logits.dtype):
        return True
    if logits.size >= COMPILED_MIN_ELEMENTS:
        _numpy_elements += logits.size
        if not _compiled_on_installation(kernel, logits.dtype):
            start_background_compile(logits.dtype)
    return False


# Logits this process has run on the numpy path in calls the compiled path could have taken.
_numpy_elements = 0


def _compiled_on_installation(kernel: str, dtype: np.dtype[Any]) -> bool:
    key = (kernel, _kernel_dtype(dtype))
    if key in _READY:
        return True
    if any((folder / _marker_name(*key)).exists() for folder in _marker_folders()):
        _READY.add(key)
        return True
    return False


# The kernels compile_kernels compiles, in this order.
_KERNELS = ("first_nonfinite_row", "first_refused_row", "expansion_sums_serial", "expansion_sums",
            "calibration_bin_sums")


def compile_kernels() -> list[str]:
    """Compile every numeric kernel for float32 and float64 logits, or load them from numba's
    on-disk cache, and mark them ready, so that large inputs can take them.

    Once per installation (1-4 minutes of one core; seconds when already cached). An
    installation that built the kernels ahead of time (:mod:`calibration._native`) needs it only
    for processes in which numba runs anyway (``make test`` runs it, so that no test waits); one
    that could not should run it in its image's build step (docs/install.md). Without it, the
    first large input starts it in the background (:func:`start_background_compile`). Returns
    the kernels compiled, as ``name[dtype]``.

    >>> compile_kernels()  # doctest: +SKIP
    ['first_nonfinite_row[float32]', ...]
    """
    return _compile((np.dtype(np.float32), np.dtype(np.float64)))


def _compile(dtypes: tuple[np.dtype[Any], ...]) -> list[str]:
    kernels = _compiled()
    done = []
    for dtype in dtypes:
        logits = np.zeros((8, 3), dtype=dtype)
        labels = np.zeros(8, dtype=np.intp)
        interior = np.linspace(0.0, 1.0, 16)[1:-1]
        # The argument types of the calls above (Python int and float), so the same signatures.
        expansion = (kernels.NLL_AT_ONE_EXP, 1, 1, MAX_LOGIT_SPREAD, 4)
        calls: dict[str, tuple[Any, ...]] = {
            "first_nonfinite_row": (logits, 4),
            "first_refused_row": (logits, float(MAX_LOGIT_SPREAD), 4),
            "expansion_sums_serial": (logits, labels, 0.5, *expansion),
            "expansion_sums": (logits, labels, 0.5, *expansion),
            "calibration_bin_sums": (logits, labels, 0.5, interior, 4),
        }
        for name in _KERNELS:
            getattr(kernels, name)(*calls[name])
            _mark_compiled(kernels, name, dtype)
            done.append(f"{name}[{dtype.name}]")
    return done


#: Set to ``0`` in the environment, no call starts a background compile.
BACKGROUND_COMPILE_VARIABLE = "THERMOSTAT_BACKGROUND_COMPILE"
_background_started = False


def start_background_compile(first_dtype: np.dtype[Any] | type[np.floating[Any]] = np.float32) -> bool:
    """Start compiling every kernel in a separate low-priority process; returns whether one started.

    Not when this process started one already, when another process is compiling them (a
    lock beside the markers), when ``THERMOSTAT_BACKGROUND_COMPILE`` is ``0``, or on
    Windows. The process (``nice`` 19, in its own session, so it outlives a short command)
    compiles every kernel, ``first_dtype``'s first, into numba's cache and marks each ready
    as it is done; calls in this process (once numba runs in it) and in later ones take them.
    A process, not a thread: numba's compiler is Python, and would hold this process's GIL
    for minutes.

    >>> start_background_compile() in (True, False)  # doctest: +SKIP
    True
    """
    global _background_started
    if sys.platform == "win32" or _background_started or os.environ.get(BACKGROUND_COMPILE_VARIABLE) == "0":
        return False
    _background_started = True
    lock = _compile_lock()
    # -I: no current folder, user site or PYTHON* variables in the child's path; the folder
    # holding this package is appended, so it imports the same calibration as this process.
    root = str(Path(__file__).resolve().parents[1])
    code = (f"import sys; sys.path.append({root!r}); from calibration._kernels import _compile_under_lock; "
            f"_compile_under_lock({_kernel_dtype(np.dtype(first_dtype))!r})")
    try:
        if lock is None or _lock_held(lock):
            return False
        subprocess.Popen([sys.executable, "-I", "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:  # no process to spare, a lock that cannot be opened: the numpy path does the work
        return False
    return True


def _compile_under_lock(first_dtype: str) -> None:
    """The background compile's process: take the lock, or leave the work to its holder."""
    if sys.platform == "win32":
        return
    os.nice(19)
    lock = _compile_lock()
    if lock is None:
        return
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")  # who compiles, for whoever wonders
        handle.flush()
        first = np.dtype(first_dtype)
        _compile((first, np.dtype(np.float64 if first == np.float32 else np.float32)))


def _compile_lock() -> Path | None:
    """The lock file of the background compile, in the first marker folder that can hold it."""
    for folder in _marker_folders():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            lock = folder / f"thermostat-compile-{_cache_stamp()}.lock"
            lock.touch()
            return lock
        except OSError:
            continue
    return None


def _lock_held(lock: Path) -> bool:
    if sys.platform == "win32":
        return True
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


# (kernel, dtype name) of the kernels known to be compiled on this installation.
_READY: set[tuple[str, str]] = set()


def _kernel_dtype(dtype: np.dtype[Any]) -> str:
    # What _compiled_parts hands the kernels: float32 and float64 as they are, the rest as float64.
    return np.dtype(dtype).name if dtype in (np.float32, np.float64) else "float64"


@cache
def _marker_name(kernel: str, dtype: str) -> str:
    """The marker's file name: the kernel, the dtype, and :func:`_cache_stamp`."""
    return f"thermostat-{kernel}-{dtype}-{_cache_stamp()}.ready"


@cache
def _cache_stamp() -> str:
    """What numba's cache depends on: its version, Python's, and the kernels' source file
    (path, size and modification time), hashed."""
    source = Path(__file__).with_name("_kernels_numba.py")
    stat = source.stat()
    stamp = f"{metadata.version('numba')}|{sys.version_info[:2]}|{source}|{stat.st_size}|{stat.st_mtime_ns}"
    return hashlib.sha256(stamp.encode()).hexdigest()[:16]


def _marker_folders() -> list[Path]:
    """Where the markers live: with NUMBA_CACHE_DIR, under it (deleting that cache deletes them);
    otherwise beside the package (numba's own cache, in __pycache__), or the user's cache folder
    when the package's folder cannot be written."""
    cache_dir = os.environ.get("NUMBA_CACHE_DIR")
    if cache_dir:
        return [Path(cache_dir) / "thermostat"]
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "thermostat" / "kernels"
    return [Path(__file__).with_name("__pycache__"), user]


def _mark_compiled(kernels: Any, kernel: str, dtype: np.dtype[Any]) -> None:
    """Mark a numba kernel compiled on this installation (the native ones need no marker)."""
    key = (kernel, _kernel_dtype(dtype))
    if kernels is not _COMPILED or key in _READY:
        return
    _READY.add(key)
    for folder in _marker_folders():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / _marker_name(*key)).touch()
            return
        except OSError:  # not writable: try the next folder; without one, the next process compiles again
            continue


_COMPILED: ModuleType | None = None


def _compiled_kernels() -> Any:
    """The compiled kernels a call takes: numba's when they are loaded in this process, else the
    ones compiled ahead of time at installation (:mod:`calibration._native`) when there are,
    else numba's (imported now)."""
    if _COMPILED is None:
        native = native_kernels()
        if native is not None:
            return native
    return _compiled()


def _compiled() -> ModuleType:
    """The numba kernels, imported on first use (and their scheduling set)."""
    global _COMPILED
    if _COMPILED is None:
        import numba

        from . import _kernels_numba

        numba.set_parallel_chunksize(_PARALLEL_CHUNK_BLOCKS)
        _COMPILED = _kernels_numba
    return _COMPILED


# -- The numpy passes: small inputs, and large ones until the compiled path pays (see
# compiled_path); the tests hold the compiled kernels to them. --

# Rows per chunk of the numpy passes: ~32k logits, every operation in place (``out=``) in
# float64 buffers of 256 KiB that stay near the core's L2 cache. Measured (the fit's pass,
# 200,000 x 100): 32k to 128k logits a chunk cost the same, 8k 1.4x as much (numpy's cost per
# call).
_NUMPY_CHUNK_ELEMENTS = 1 << 15
# Rows of at most this many logits take their maximum column by column (a strided maximum
# per column): numpy's row-wise max costs 4-23 ns a logit on rows of 2-10, against ~1.
_COLUMN_MAX_CLASSES = 16
# Ratios p / q with max(p, q) up to this many bits give exp(d) as a power of exp(d / q), as in
# the compiled kernels; beyond, a second exp is cheaper.
_POWER_MAX_BITS = 5


def _numpy_chunk_rows(n_classes: int) -> int:
    return max(1, _NUMPY_CHUNK_ELEMENTS // n_classes)


def _shift_rows(chunk: NDArray[np.floating[Any]], d: NDArray[np.float64], top: NDArray[np.float64]) -> None:
    """d = chunk - its row maximum, in float64 (d <= 0: exp(beta * d) never overflows); top the
    maxima. A non-finite logit makes its row NaN (inf - inf), as in the kernels."""
    if chunk.shape[1] <= _COLUMN_MAX_CLASSES:
        np.copyto(top, chunk[:, 0])
        for j in range(1, chunk.shape[1]):
            np.maximum(top, chunk[:, j], out=top)
    else:
        np.max(chunk, axis=1, out=top)
    np.subtract(chunk, top[:, None], out=d)


def _powers(v: NDArray[np.float64], p: int, q: int, to_p: NDArray[np.float64], to_q: NDArray[np.float64]) -> None:
    """to_p = v**p, to_q = v**q by square-and-multiply from the lowest bit (v is overwritten)."""
    started = [False, False]
    for bit in range(max(p, q).bit_length()):
        if bit:
            np.multiply(v, v, out=v)
        for which, (out, exponent) in enumerate(((to_p, p), (to_q, q))):
            if (exponent >> bit) & 1:
                if started[which]:
                    np.multiply(out, v, out=out)
                else:
                    np.copyto(out, v)
                    started[which] = True


def _reference_nll_expansion_sums(
    logits: NDArray[np.floating[Any]], labels: NDArray[np.intp], beta: float, *, with_nll_at_one: bool = True
) -> NDArray[np.float64]:
    """:func:`nll_expansion_sums` in chunked numpy, in place in four float64 buffers of a chunk.

    The same arithmetic as the kernels: d = z - max z; e = exp(beta * d) (at beta = p / q with
    the NLL at T = 1 wanted, v = exp(d / q), e = v**p and exp(d) = v**q); the row sums
    Σe and Σe·d give the mean of d under p = e / Σe, then the centred moment sums Σe·u^j
    (u = d - mean, j = 2..6) give the cumulants. Row sums are products with a vector of ones
    (BLAS), several times faster than numpy's row-wise sum on short rows.
    """
    sums = np.zeros(N_EXPANSION_SUMS, dtype=np.float64)
    n, k = logits.shape
    step = _numpy_chunk_rows(k)
    at_one = with_nll_at_one and beta != 1.0
    ratio = exact_ratio(beta) if at_one else None
    if ratio is not None and max(ratio).bit_length() > _POWER_MAX_BITS:
        ratio = None
    rows = min(step, n)
    d, e, w = np.empty((rows, k)), np.empty((rows, k)), np.empty((rows, k))
    e_one = np.empty((rows, k)) if at_one else e
    top = np.empty(rows)
    ones = np.ones(k)
    for start in range(0, n, step):
        chunk = logits[start : start + step]
        r = chunk.shape[0]
        d_r, e_r, w_r, one_r = d[:r], e[:r], w[:r], e_one[:r]
        _shift_rows(chunk, d_r, top[:r])
        d_label = d_r[np.arange(r), labels[start : start + step]]
        if ratio is not None:
            np.multiply(d_r, 1.0 / ratio[1], out=w_r)
            np.exp(w_r, out=w_r)
            _powers(w_r, ratio[0], ratio[1], e_r, one_r)
        else:
            np.multiply(d_r, beta, out=e_r)
            np.exp(e_r, out=e_r)
            if at_one:
                np.exp(d_r, out=one_r)
        s0 = e_r @ ones
        mean = np.multiply(e_r, d_r, out=w_r) @ ones
        mean /= s0
        d_r -= mean[:, None]  # u = d - mean: centred moments, no cancellation
        np.multiply(e_r, d_r, out=w_r)
        moments = []
        for _ in range(5):  # Σe·u^j / Σe, j = 2..6
            np.multiply(w_r, d_r, out=w_r)
            moments.append((w_r @ ones) / s0)
        mu2, mu3, mu4, mu5, mu6 = moments
        gradient = mean - d_label
        sums[0] += r
        sums[1] += float(np.sum(np.log(s0) - beta * d_label))
        sums[2] += float(gradient.sum())
        sums[3] += float(mu2.sum())
        sums[4] += float(mu3.sum())
        sums[5] += float(np.sum(mu4 - 3.0 * mu2 * mu2))
        sums[7] += float(np.sum(mu5 - 10.0 * mu3 * mu2))
        sums[8] += float(np.sum(mu6 - 15.0 * mu4 * mu2 - 10.0 * mu3 * mu3 + 30.0 * mu2 * mu2 * mu2))
        sums[9] += float(gradient @ gradient)
        if not d_label.min() >= -MAX_LOGIT_SPREAD:  # as the kernels: a label too far below its row's max
            sums[1] = np.nan
        if at_one:
            sums[6] += float(np.sum(np.log(one_r @ ones) - d_label))
    if with_nll_at_one and beta == 1.0:
        sums[6] = sums[1]
    return sums


def _reference_first_refused_row(logits: NDArray[np.floating[Any]], max_spread: float) -> int:
    """:func:`first_refused_row` in chunked numpy (temporaries of one chunk)."""
    step = chunk_rows(logits.shape[1])
    for start in range(0, logits.shape[0], step):
        chunk = logits[start : start + step]
        accepted = np.isfinite(chunk).all(axis=1)
        with np.errstate(over="ignore", invalid="ignore"):  # max - min may overflow: refused below
            accepted &= chunk.max(axis=1).astype(np.float64) - chunk.min(axis=1) <= max_spread
        if not accepted.all():
            return start + int(np.argmin(accepted))
    return -1


def _reference_calibration_sums(
    logits: NDArray[np.floating[Any]], labels: NDArray[np.intp], beta: float, n_bins: int
) -> CalibrationSums:
    """:func:`calibration_sums` in chunked numpy, in place in two float64 buffers of a chunk."""
    interior = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    count = np.zeros(n_bins, dtype=np.int64)
    confidence_sum = np.zeros(n_bins, dtype=np.float64)
    correct_count = np.zeros(n_bins, dtype=np.int64)
    variance_sum = np.zeros(n_bins, dtype=np.float64)
    nll_sum = 0.0
    brier_sum = 0.0
    n, k = logits.shape
    step = _numpy_chunk_rows(k)
    rows = min(step, n)
    d, e = np.empty((rows, k)), np.empty((rows, k))
    top = np.empty(rows)
    ones = np.ones(k)
    for start in range(0, n, step):
        chunk = logits[start : start + step]
        chunk_labels = labels[start : start + step]
        r = chunk.shape[0]
        d_r, e_r = d[:r], e[:r]
        _shift_rows(chunk, d_r, top[:r])
        index = np.arange(r)
        d_label = d_r[index, chunk_labels]
        # The first arg-max: the first column whose d is 0 (z == max z).
        correct = (d_r == 0.0).argmax(axis=1) == chunk_labels
        np.multiply(d_r, beta, out=e_r)
        np.exp(e_r, out=e_r)
        s0 = e_r @ ones
        # The top class has d = 0, so its probability is exactly 1 / s0.
        confidence = 1.0 / s0
        p_label = e_r[index, chunk_labels] * confidence
        bins = np.searchsorted(interior, confidence, side="left")
        count += np.bincount(bins, minlength=n_bins)
        confidence_sum += np.bincount(bins, weights=confidence, minlength=n_bins)
        correct_count += np.bincount(bins, weights=correct, minlength=n_bins).astype(np.int64)
        variance_sum += np.bincount(bins, weights=confidence * (1.0 - confidence), minlength=n_bins)
        nll_sum += float(np.sum(np.log(s0) - beta * d_label))
        # Brier: sum_k (p_k - [y = k])^2 = sum_k p_k^2 - 2 p_y + 1.
        squares = np.multiply(e_r, e_r, out=e_r) @ ones
        brier_sum += float(np.sum(squares * (confidence * confidence) - 2.0 * p_label + 1.0))
    return count, confidence_sum, correct_count, variance_sum, nll_sum, brier_sum
