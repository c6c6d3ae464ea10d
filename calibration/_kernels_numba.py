"""The compiled (numba) versions of the two passes in :mod:`calibration._kernels`.

Imported lazily by :mod:`calibration._kernels`, only when an input is large enough to be
worth it, so ``import calibration`` and small inputs never pay numba's import, compile or
thread start-up. Compiled once per input dtype (float32, float64) and cached on disk
(``cache=True``: in ``__pycache__`` beside this file, or under ``NUMBA_CACHE_DIR``).

Why it is fast and still exact (the numpy functions in :mod:`calibration._kernels` are
the reference the tests hold these to, at 1e-12 relative):

- Each row is read once. It is shifted by its maximum in float64 into a small buffer
  that stays in L1, and every later loop runs over that buffer: ``d = z - max z <= 0``,
  so ``exp(beta * d)`` never overflows, whatever the logits (±1e4 and beyond).
- ``exp`` is :func:`_exp_nonpositive`: a reduction by ln 2 and a degree-13 Taylor
  polynomial evaluated with explicit fused multiply-adds, written without branches so
  that LLVM vectorises it (numba's ``math.exp`` is a scalar libm call here: no SVML).
  It is within about one ulp of ``np.exp`` (tested) and returns 0 below ``exp(-708)``, a
  term 1e-308 times the row's largest one (which is exactly 1).
- ``fastmath=False``: nothing is reassociated. Sums over a row use four interleaved
  partial sums in an order fixed by the code; rows are grouped into fixed blocks whose
  partial sums are added in block order, so results do not depend on the thread count.
- The NLL at T = 1 (``nll_before``) comes nearly free when 1/T is a ratio p/q of small
  integers: one ``v = exp(d / q)`` gives ``exp(beta * d) = v**p`` and ``exp(d) = v**q`` by
  a few multiplications (the fit expands at such a ratio, within 0.2% of its warm start).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import njit, prange, types
from numba.extending import intrinsic

__all__ = ["expansion_sums", "calibration_bin_sums", "first_nonfinite_row", "exp_nonpositive"]

_LOG2E = 1.4426950408889634
# ln 2 split in two so that n * _LN2_HI is exact for |n| < 2**11 (Cody and Waite).
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# Adding then subtracting 1.5 * 2**52 rounds a double of magnitude < 2**51 to an integer.
_ROUND = 6755399441055744.0
_EXP_FLOOR = -708.0

# How nll_at_one is obtained (see expansion_sums).
NLL_AT_ONE_SKIP, NLL_AT_ONE_SAME, NLL_AT_ONE_RATIO, NLL_AT_ONE_EXP = 0, 1, 2, 3


def _fma_intrinsic(typingctx: Any, a: Any, b: Any, c: Any) -> Any:  # pragma: no cover - compiled
    """a * b + c with one rounding (LLVM's fma intrinsic): exact, not a fast-math licence."""
    signature = types.float64(types.float64, types.float64, types.float64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        double = ir.DoubleType()
        fma = builder.module.declare_intrinsic("llvm.fma", [double], ir.FunctionType(double, [double] * 3))
        return builder.call(fma, args)

    return signature, codegen


_fma: Any = intrinsic(_fma_intrinsic)


@njit(fastmath=False, cache=True, inline="always")
def _exp_nonpositive(x, out, scale, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """out[:k] = exp(x[:k]) for x <= 0, 0 below -708 (``out`` may be ``x``; ``scale``: scratch)."""
    scale_bits = scale.view(np.int64)
    for j in range(k):
        x_j = x[j]
        v = x_j if x_j > _EXP_FLOOR else _EXP_FLOOR
        n = (v * _LOG2E + _ROUND) - _ROUND
        r = _fma(n, -_LN2_LO, _fma(n, -_LN2_HI, v))
        p = 1.0 / 6227020800.0
        p = _fma(p, r, 1.0 / 479001600.0)
        p = _fma(p, r, 1.0 / 39916800.0)
        p = _fma(p, r, 1.0 / 3628800.0)
        p = _fma(p, r, 1.0 / 362880.0)
        p = _fma(p, r, 1.0 / 40320.0)
        p = _fma(p, r, 1.0 / 5040.0)
        p = _fma(p, r, 1.0 / 720.0)
        p = _fma(p, r, 1.0 / 120.0)
        p = _fma(p, r, 1.0 / 24.0)
        p = _fma(p, r, 1.0 / 6.0)
        p = _fma(p, r, 0.5)
        p = _fma(p, r, 1.0)
        out[j] = _fma(p, r, 1.0)
        # 2**n from its bits (n is an integer in [-1022, 0]: a normal double); a zero
        # scale below the floor. Decided here, so that ``out`` may be ``x`` itself.
        scale_bits[j] = (np.int64(n) + 1023) << 52 if x_j > _EXP_FLOOR else 0
    for j in range(k):
        out[j] = out[j] * scale[j]


@njit(fastmath=False, cache=True)
def exp_nonpositive(x):  # type: ignore[no-untyped-def]  # pragma: no cover
    """exp(x) of a 1-D float64 array of values <= 0, as the kernels compute it (for tests)."""
    out = np.empty_like(x)
    _exp_nonpositive(x, out, np.empty_like(x), x.shape[0])
    return out


@njit(fastmath=False, cache=True, inline="always")
def _shift_row(row, d, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """d[:k] = row - max(row) in float64 (a row maximum in four lanes: vectorised)."""
    m0 = m1 = m2 = m3 = row[0]
    k4 = k - k % 4
    for j in range(0, k4, 4):
        m0 = max(m0, row[j])
        m1 = max(m1, row[j + 1])
        m2 = max(m2, row[j + 2])
        m3 = max(m3, row[j + 3])
    for j in range(k4, k):
        m0 = max(m0, row[j])
    top = np.float64(max(max(m0, m1), max(m2, m3)))
    for j in range(k):
        d[j] = np.float64(row[j]) - top


@njit(fastmath=False, cache=True, inline="always")
def _first_top(d, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The first j with d[j] == 0: the first arg-max, as ``argmax`` (z - max z == 0 iff z == max z)."""
    for j in range(k):
        if d[j] == 0.0:
            return j
    return 0


@njit(fastmath=False, cache=True, inline="always")
def _sums_e_ed(e, d, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """(Σ e, Σ e·d) in four interleaved partial sums each."""
    a0 = a1 = a2 = a3 = 0.0
    b0 = b1 = b2 = b3 = 0.0
    k4 = k - k % 4
    for j in range(0, k4, 4):
        a0 += e[j]
        a1 += e[j + 1]
        a2 += e[j + 2]
        a3 += e[j + 3]
        b0 += e[j] * d[j]
        b1 += e[j + 1] * d[j + 1]
        b2 += e[j + 2] * d[j + 2]
        b3 += e[j + 3] * d[j + 3]
    for j in range(k4, k):
        a0 += e[j]
        b0 += e[j] * d[j]
    return (a0 + a1) + (a2 + a3), (b0 + b1) + (b2 + b3)


@njit(fastmath=False, cache=True, inline="always")
def _sum(x, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Σ x[:k] in four interleaved partial sums."""
    a0 = a1 = a2 = a3 = 0.0
    k4 = k - k % 4
    for j in range(0, k4, 4):
        a0 += x[j]
        a1 += x[j + 1]
        a2 += x[j + 2]
        a3 += x[j + 3]
    for j in range(k4, k):
        a0 += x[j]
    return (a0 + a1) + (a2 + a3)


@njit(fastmath=False, cache=True, inline="always")
def _centred_sums(e, d, mean, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """(Σ e u², Σ e u³, ..., Σ e u⁶) with u = d - mean: centred, so no cancellation.

    Two interleaved partial sums each (five sums in flight already fill the pipeline).
    """
    a0 = a1 = b0 = b1 = c0 = c1 = f0 = f1 = g0 = g1 = 0.0
    k2 = k - k % 2
    for j in range(0, k2, 2):
        u0 = d[j] - mean
        u1 = d[j + 1] - mean
        w0 = e[j] * u0 * u0
        w1 = e[j + 1] * u1 * u1
        a0 += w0
        a1 += w1
        w0 *= u0
        w1 *= u1
        b0 += w0
        b1 += w1
        w0 *= u0
        w1 *= u1
        c0 += w0
        c1 += w1
        w0 *= u0
        w1 *= u1
        f0 += w0
        f1 += w1
        g0 += w0 * u0
        g1 += w1 * u1
    for j in range(k2, k):
        u = d[j] - mean
        w = e[j] * u * u
        a0 += w
        w *= u
        b0 += w
        w *= u
        c0 += w
        w *= u
        f0 += w
        g0 += w * u
    return a0 + a1, b0 + b1, c0 + c1, f0 + f1, g0 + g1


@njit(fastmath=False, cache=True, inline="always")
def _powers(v, e, e1, p, q, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """e = v**p and e1 = v**q by binary exponentiation, one pass over the buffers per bit.

    ``v`` is consumed (it holds v**(2**bit) as the bits go by).
    """
    p_odd = p & 1
    q_odd = q & 1
    for j in range(k):
        e[j] = v[j] if p_odd else 1.0
        e1[j] = v[j] if q_odd else 1.0
    bit = 1
    while (p >> bit) > 0 or (q >> bit) > 0:
        p_bit = (p >> bit) & 1
        q_bit = (q >> bit) & 1
        for j in range(k):
            square = v[j] * v[j]
            v[j] = square
            if p_bit:
                e[j] = e[j] * square
            if q_bit:
                e1[j] = e1[j] * square
        bit += 1


@njit(parallel=True, fastmath=False, cache=True)
def expansion_sums(logits, labels, beta, mode, p, q, block_rows):  # type: ignore[no-untyped-def]  # pragma: no cover
    """[n, nll, gradient, k2, k3, k4, nll_at_one, k5, k6] sums; see ``_kernels.nll_expansion_sums``.

    ``mode`` says how nll_at_one is obtained: 0 not at all, 1 it is the NLL (beta == 1),
    2 from ``v = exp(d / q)`` with ``beta == p / q``, 3 by a second exp.
    """
    n, k = logits.shape
    n_blocks = (n + block_rows - 1) // block_rows
    partial = np.zeros((n_blocks, 9))
    inverse_q = 1.0 / q
    for b in prange(n_blocks):
        start = b * block_rows
        stop = min(n, start + block_rows)
        d = np.empty(k)
        t = np.empty(k)
        e = np.empty(k)
        e1 = np.empty(k)
        scale = np.empty(k)
        nll = 0.0
        gradient = 0.0
        k2_sum = 0.0
        k3_sum = 0.0
        k4_sum = 0.0
        k5_sum = 0.0
        k6_sum = 0.0
        nll_one = 0.0
        for i in range(start, stop):
            _shift_row(logits[i], d, k)
            if mode == NLL_AT_ONE_RATIO:
                for j in range(k):
                    t[j] = d[j] * inverse_q
                _exp_nonpositive(t, t, scale, k)
                _powers(t, e, e1, p, q, k)
            else:
                for j in range(k):
                    t[j] = beta * d[j]
                _exp_nonpositive(t, e, scale, k)
            s0, s1 = _sums_e_ed(e, d, k)
            mean = s1 / s0
            m2, m3, m4, m5, m6 = _centred_sums(e, d, mean, k)
            mu2 = m2 / s0
            mu3 = m3 / s0
            mu4 = m4 / s0
            d_label = d[labels[i]]
            row_nll = math.log(s0) - beta * d_label
            nll += row_nll
            gradient += mean - d_label
            # Cumulants from central moments.
            k2_sum += mu2
            k3_sum += mu3
            k4_sum += mu4 - 3.0 * mu2 * mu2
            k5_sum += m5 / s0 - 10.0 * mu3 * mu2
            k6_sum += m6 / s0 - 15.0 * mu4 * mu2 - 10.0 * mu3 * mu3 + 30.0 * mu2 * mu2 * mu2
            if mode == NLL_AT_ONE_SAME:
                nll_one += row_nll
            elif mode == NLL_AT_ONE_RATIO:
                nll_one += math.log(_sum(e1, k)) - d_label
            elif mode == NLL_AT_ONE_EXP:
                _exp_nonpositive(d, e1, scale, k)
                nll_one += math.log(_sum(e1, k)) - d_label
        partial[b, 0] = stop - start
        partial[b, 1] = nll
        partial[b, 2] = gradient
        partial[b, 3] = k2_sum
        partial[b, 4] = k3_sum
        partial[b, 5] = k4_sum
        partial[b, 6] = nll_one
        partial[b, 7] = k5_sum
        partial[b, 8] = k6_sum
    sums = np.zeros(9)
    for b in range(n_blocks):
        for s in range(9):
            sums[s] += partial[b, s]
    return sums


@njit(parallel=True, fastmath=False, cache=True)
def calibration_bin_sums(logits, labels, beta, interior, block_rows):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Per-bin count, confidence sum, correct count, Σ q(1-q); NLL and Brier sums."""
    n, k = logits.shape
    n_bins = interior.shape[0] + 1
    n_blocks = (n + block_rows - 1) // block_rows
    counts = np.zeros((n_blocks, n_bins), dtype=np.int64)
    corrects = np.zeros((n_blocks, n_bins), dtype=np.int64)
    confidences = np.zeros((n_blocks, n_bins))
    variances = np.zeros((n_blocks, n_bins))
    scalars = np.zeros((n_blocks, 2))
    for b in prange(n_blocks):
        start = b * block_rows
        stop = min(n, start + block_rows)
        d = np.empty(k)
        e = np.empty(k)
        scale = np.empty(k)
        nll = 0.0
        brier = 0.0
        for i in range(start, stop):
            _shift_row(logits[i], d, k)
            top = _first_top(d, k)
            for j in range(k):
                e[j] = beta * d[j]
            _exp_nonpositive(e, e, scale, k)
            s0, squares = _sums_e_ed(e, e, k)
            label = labels[i]
            # The top class has d = 0, so its probability is exactly 1 / s0.
            confidence = 1.0 / s0
            # Same bin as searchsorted(interior, confidence, side="left"): the number of
            # interior edges strictly below the confidence, from the arithmetic guess.
            m = min(max(int(confidence * n_bins), 0), n_bins - 1)
            while m > 0 and interior[m - 1] >= confidence:
                m -= 1
            while m < n_bins - 1 and interior[m] < confidence:
                m += 1
            counts[b, m] += 1
            confidences[b, m] += confidence
            variances[b, m] += confidence * (1.0 - confidence)
            if top == label:
                corrects[b, m] += 1
            nll += math.log(s0) - beta * d[label]
            # Brier: sum_k (p_k - [y = k])^2 = sum_k p_k^2 - 2 p_y + 1.
            brier += squares / (s0 * s0) - 2.0 * (e[label] / s0) + 1.0
        scalars[b, 0] = nll
        scalars[b, 1] = brier
    count = np.zeros(n_bins, dtype=np.int64)
    correct = np.zeros(n_bins, dtype=np.int64)
    confidence_sum = np.zeros(n_bins)
    variance_sum = np.zeros(n_bins)
    nll_sum = 0.0
    brier_sum = 0.0
    for b in range(n_blocks):
        for m in range(n_bins):
            count[m] += counts[b, m]
            correct[m] += corrects[b, m]
            confidence_sum[m] += confidences[b, m]
            variance_sum[m] += variances[b, m]
        nll_sum += scalars[b, 0]
        brier_sum += scalars[b, 1]
    return count, confidence_sum, correct, variance_sum, nll_sum, brier_sum


@njit(parallel=True, fastmath=False, cache=True)
def first_nonfinite_row(logits, block_rows):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The first row with a NaN or an infinity, or -1 (x - x is 0 exactly when x is finite)."""
    n, k = logits.shape
    n_blocks = (n + block_rows - 1) // block_rows
    first = np.full(n_blocks, -1, dtype=np.int64)
    for b in prange(n_blocks):
        start = b * block_rows
        stop = min(n, start + block_rows)
        for i in range(start, stop):
            row = logits[i]
            a0 = a1 = a2 = a3 = 0.0
            k4 = k - k % 4
            for j in range(0, k4, 4):
                a0 += row[j] - row[j]
                a1 += row[j + 1] - row[j + 1]
                a2 += row[j + 2] - row[j + 2]
                a3 += row[j + 3] - row[j + 3]
            for j in range(k4, k):
                a0 += row[j] - row[j]
            if (a0 + a1) + (a2 + a3) != 0.0:
                first[b] = i
                break
    for b in range(n_blocks):
        if first[b] >= 0:
            return first[b]
    return -1
