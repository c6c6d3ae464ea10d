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

Each dispatches by size and by whether the kernel is compiled yet. Below
:data:`COMPILED_MIN_ELEMENTS` logits the plain numpy functions (``_reference_*``, the
reference the tests hold the compiled kernels to) run. Above it the fused numba kernels of
:mod:`calibration._kernels_numba` (imported on first use, so small inputs never pay numba's
import, compilation or thread start-up) run once they are compiled on this installation —
numba caches them on disk, and a marker beside that cache says so (:func:`compiled_path`) —
parallel from :data:`PARALLEL_MIN_ELEMENTS` logits and serial below (the expansion). A
kernel not compiled yet costs 5–25 s to compile, many numpy passes' worth: the numpy path
runs instead, unless the input reaches :data:`COMPILE_MIN_ELEMENTS` logits, where
compiling pays off within the call; :func:`compile_kernels` compiles them all ahead, once.
Either path gives the same sums to float rounding (the tests hold them to 1e-12).
Float32 logits are read as they are; the numpy path promotes them chunk by chunk, so
the peak memory beyond the input is a few chunks whatever N.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
from collections.abc import Iterator
from functools import cache
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

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
    "COMPILE_MIN_ELEMENTS",
    "PARALLEL_MIN_ELEMENTS",
    "compile_kernels",
    "compiled_path",
    "MAX_LOGIT_SPREAD",
]

# [n, nll_sum, gradient_sum, k2_sum, k3_sum, k4_sum, nll_at_one_sum, k5_sum, k6_sum, gradient_square_sum]
N_EXPANSION_SUMS = 10
_CHUNK_ELEMENTS = 1 << 20  # ~8 MB of float64 per temporary
# Below this many logits the numpy path is used: the compiled one would cost more in
# import and thread start-up (~0.5 s once per process) than it saves.
COMPILED_MIN_ELEMENTS = 1 << 17
# From this many logits (1 GiB of float32) a kernel not compiled yet is compiled for the call:
# a numpy fit of that size takes ~15 s, about what compiling the fit's kernels costs, so the
# compile pays off by the second such fit. Below it, a kernel not compiled yet leaves the work
# to numpy (~50 ns per logit for a whole fit: 0.5 s at 1M x 10) instead of a 5-25 s compile.
COMPILE_MIN_ELEMENTS = 1 << 28
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
    :func:`compiled_path` decides, by size and whether the kernel is compiled yet).
    """
    name = "expansion_sums" if logits.size >= PARALLEL_MIN_ELEMENTS else "expansion_sums_serial"
    if not (compiled if compiled is not None else compiled_path(name, logits.size, logits.dtype)):
        # Overflow (only at temperatures far outside any sensible bounds) shows as non-finite
        # sums, as in the kernels, not as numpy warnings.
        with np.errstate(over="ignore", invalid="ignore"):
            return _reference_nll_expansion_sums(logits, labels, beta, with_nll_at_one=with_nll_at_one)
    kernels = _compiled()
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
    _mark_compiled(name, logits.dtype)
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
    if not (compiled if compiled is not None else compiled_path("calibration_bin_sums", logits.size, logits.dtype)):
        return _reference_calibration_sums(logits, labels, beta, n_bins)
    kernels = _compiled()
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
    _mark_compiled("calibration_bin_sums", logits.dtype)
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
    if logits.dtype not in (np.float32, np.float64) or not compiled_path(name, logits.size, logits.dtype):
        return _reference_first_refused_row(logits, max_spread)
    kernels = _compiled()
    offset = 0
    for part, _ in _compiled_parts(logits, np.zeros(logits.shape[0], dtype=np.intp)):
        row: int = int(kernels.first_nonfinite_row(part, _block_rows(part)) if finite_only
                       else kernels.first_refused_row(part, float(max_spread), _block_rows(part)))
        if row >= 0:
            return offset + row
        offset += part.shape[0]
    _mark_compiled(name, logits.dtype)
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

    Below :data:`COMPILED_MIN_ELEMENTS`: never. From :data:`COMPILE_MIN_ELEMENTS`: always
    (compiling it first if need be). Between: when the kernel is compiled for that dtype on
    this installation — run in this process, or marked ready in numba's cache folder by an
    earlier run (:func:`compile_kernels`, or a compiled call). A marker that outlives numba's
    cache only costs one compile more; it never changes a number.

    >>> compiled_path("expansion_sums_serial", 1_000, np.dtype(np.float32))
    False
    """
    if n_elements < COMPILED_MIN_ELEMENTS:
        return False
    if n_elements >= COMPILE_MIN_ELEMENTS:
        return True
    key = (kernel, _kernel_dtype(dtype))
    if key in _READY:
        return True
    if any((folder / _marker_name(*key)).exists() for folder in _marker_folders()):
        _READY.add(key)
        return True
    return False


def compile_kernels() -> list[str]:
    """Compile every numeric kernel for float32 and float64 logits, or load them from numba's
    on-disk cache, and mark them ready, so that large inputs take them from the first call.

    Once per installation (about a minute on two cores; seconds when already cached).
    Returns the kernels compiled, as ``name[dtype]``.

    >>> compile_kernels()  # doctest: +SKIP
    ['first_nonfinite_row[float32]', ...]
    """
    kernels = _compiled()
    done = []
    for dtype in (np.float32, np.float64):
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
        for name, arguments in calls.items():
            getattr(kernels, name)(*arguments)
            _mark_compiled(name, np.dtype(dtype))
            done.append(f"{name}[{np.dtype(dtype).name}]")
    return done


# (kernel, dtype name) of the kernels known to be compiled on this installation.
_READY: set[tuple[str, str]] = set()


def _kernel_dtype(dtype: np.dtype[Any]) -> str:
    # What _compiled_parts hands the kernels: float32 and float64 as they are, the rest as float64.
    return np.dtype(dtype).name if dtype in (np.float32, np.float64) else "float64"


@cache
def _marker_name(kernel: str, dtype: str) -> str:
    """The marker's file name: the kernel, the dtype, and what numba's cache depends on (its
    version, Python's, and the kernels' source file: path, size and modification time)."""
    source = Path(__file__).with_name("_kernels_numba.py")
    stat = source.stat()
    stamp = f"{metadata.version('numba')}|{sys.version_info[:2]}|{source}|{stat.st_size}|{stat.st_mtime_ns}"
    return f"thermostat-{kernel}-{dtype}-{hashlib.sha256(stamp.encode()).hexdigest()[:16]}.ready"


def _marker_folders() -> list[Path]:
    """Where the markers live: with NUMBA_CACHE_DIR, under it (deleting that cache deletes them);
    otherwise beside the package (numba's own cache, in __pycache__), or the user's cache folder
    when the package's folder cannot be written."""
    cache_dir = os.environ.get("NUMBA_CACHE_DIR")
    if cache_dir:
        return [Path(cache_dir) / "thermostat"]
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "thermostat" / "kernels"
    return [Path(__file__).with_name("__pycache__"), user]


def _mark_compiled(kernel: str, dtype: np.dtype[Any]) -> None:
    key = (kernel, _kernel_dtype(dtype))
    if key in _READY:
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


def _compiled() -> ModuleType:
    """The numba kernels, imported on first use (and their scheduling set)."""
    global _COMPILED
    if _COMPILED is None:
        import numba

        from . import _kernels_numba

        numba.set_parallel_chunksize(_PARALLEL_CHUNK_BLOCKS)
        _COMPILED = _kernels_numba
    return _COMPILED


# -- The numpy reference: small inputs run it; the tests hold the compiled kernels to it. --


def _shifted(chunk: NDArray[np.floating[Any]]) -> NDArray[np.float64]:
    # Subtract the row max in float64: d <= 0, exp(beta * d) never overflows.
    block = chunk.astype(np.float64)
    block -= block.max(axis=1, keepdims=True)
    return block



def _reference_nll_expansion_sums(
    logits: NDArray[np.floating[Any]], labels: NDArray[np.intp], beta: float, *, with_nll_at_one: bool = True
) -> NDArray[np.float64]:
    """:func:`nll_expansion_sums` in plain chunked numpy."""
    sums = np.zeros(N_EXPANSION_SUMS, dtype=np.float64)
    step = chunk_rows(logits.shape[1])
    for start in range(0, logits.shape[0], step):
        d = _shifted(logits[start : start + step])
        rows = np.arange(d.shape[0])
        d_label = d[rows, labels[start : start + step]]
        e = np.exp(beta * d)
        s0 = e.sum(axis=1)
        p = e / s0[:, None]
        mean = (p * d).sum(axis=1)
        centred = d - mean[:, None]
        c2 = centred * centred
        mu2 = (p * c2).sum(axis=1)
        mu3 = (p * c2 * centred).sum(axis=1)
        mu4 = (p * c2 * c2).sum(axis=1)
        mu5 = (p * c2 * c2 * centred).sum(axis=1)
        mu6 = (p * c2 * c2 * c2).sum(axis=1)
        # Cumulants from central moments.
        k2 = mu2
        k3 = mu3
        k4 = mu4 - 3.0 * mu2 * mu2
        k5 = mu5 - 10.0 * mu3 * mu2
        k6 = mu6 - 15.0 * mu4 * mu2 - 10.0 * mu3 * mu3 + 30.0 * mu2 * mu2 * mu2
        sums[0] += d.shape[0]
        sums[1] += float(np.sum(np.log(s0) - beta * d_label))
        sums[2] += float(np.sum(mean - d_label))
        sums[3] += float(k2.sum())
        sums[4] += float(k3.sum())
        sums[5] += float(k4.sum())
        sums[7] += float(k5.sum())
        sums[8] += float(k6.sum())
        sums[9] += float(np.sum((mean - d_label) ** 2))
        if not d_label.min() >= -MAX_LOGIT_SPREAD:  # as the kernels: a label too far below its row's max
            sums[1] = np.nan
        if not with_nll_at_one:
            continue
        if beta == 1.0:
            sums[6] = sums[1]
        else:
            sums[6] += float(np.sum(np.log(np.exp(d).sum(axis=1)) - d_label))
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
    """:func:`calibration_sums` in plain chunked numpy."""
    interior = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    count = np.zeros(n_bins, dtype=np.int64)
    confidence_sum = np.zeros(n_bins, dtype=np.float64)
    correct_count = np.zeros(n_bins, dtype=np.int64)
    variance_sum = np.zeros(n_bins, dtype=np.float64)
    nll_sum = 0.0
    brier_sum = 0.0
    step = chunk_rows(logits.shape[1])
    for start in range(0, logits.shape[0], step):
        chunk = logits[start : start + step]
        chunk_labels = labels[start : start + step]
        d = _shifted(chunk)
        rows = np.arange(d.shape[0])
        e = np.exp(beta * d)
        s0 = e.sum(axis=1)
        # The top class has d = 0, so its probability is exactly 1 / s0.
        confidence = 1.0 / s0
        p_label = e[rows, chunk_labels] / s0
        correct = chunk.argmax(axis=1) == chunk_labels
        bins = np.searchsorted(interior, confidence, side="left")
        count += np.bincount(bins, minlength=n_bins)
        confidence_sum += np.bincount(bins, weights=confidence, minlength=n_bins)
        correct_count += np.bincount(bins, weights=correct, minlength=n_bins).astype(np.int64)
        variance_sum += np.bincount(bins, weights=confidence * (1.0 - confidence), minlength=n_bins)
        nll_sum += float(np.sum(np.log(s0) - beta * d[rows, chunk_labels]))
        # Brier: sum_k (p_k - [y = k])^2 = sum_k p_k^2 - 2 p_y + 1.
        brier_sum += float(np.sum((e * e).sum(axis=1) / (s0 * s0) - 2.0 * p_label + 1.0))
    return count, confidence_sum, correct_count, variance_sum, nll_sum, brier_sum
