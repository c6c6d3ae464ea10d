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
- The expansion kernels use numba's ``error_model="numpy"``: a non-finite logit makes its
  row's sums NaN (IEEE arithmetic, no exception), which is how ``fit_temperature`` detects
  one without a separate scan.
- ``fastmath=False``: nothing is reassociated. Sums over a row use four interleaved
  partial sums in an order fixed by the code; rows are grouped into fixed blocks whose
  partial sums are added in block order, so results do not depend on the thread count.
- The NLL at T = 1 (``nll_before``) comes cheap when 1/T is a ratio p/q of small
  integers: one ``v = exp(d / q)`` gives ``exp(beta * d) = v**p`` and ``exp(d) = v**q`` by
  a few multiplications in one vectorised pass (the fit expands at such a ratio, a few
  percent at most from its warm start, with few bits: ``_kernels.cheap_ratio``).
- Two drivers share one block body: ``expansion_sums`` runs the blocks in parallel,
  ``expansion_sums_serial`` on the calling thread (small inputs: no parallel region to
  wait for); same blocks, same order, the same sums bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import njit, prange, types
from numba.extending import intrinsic

__all__ = ["expansion_sums", "expansion_sums_serial", "calibration_bin_sums", "first_nonfinite_row", "exp_nonpositive"]

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
def _exp_nonpositive(x, c, out, scale, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """out[:k] = exp(c * x[:k]) for c * x <= 0, 0 below -708 (``out`` may be ``x``; ``scale``: scratch).

    The product ``c * x[j]`` is rounded once, as a separate ``t = c * x`` pass would round it.
    """
    scale_bits = scale.view(np.int64)
    for j in range(k):
        x_j = c * x[j]
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
    _exp_nonpositive(x, 1.0, out, np.empty_like(x), x.shape[0])
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
def _sums_e_ed_e1(e, d, e1, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """(Σ e, Σ e·d, Σ e1) in four interleaved partial sums each: one loop for the three."""
    a0 = a1 = a2 = a3 = 0.0
    b0 = b1 = b2 = b3 = 0.0
    c0 = c1 = c2 = c3 = 0.0
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
        c0 += e1[j]
        c1 += e1[j + 1]
        c2 += e1[j + 2]
        c3 += e1[j + 3]
    for j in range(k4, k):
        a0 += e[j]
        b0 += e[j] * d[j]
        c0 += e1[j]
    return (a0 + a1) + (a2 + a3), (b0 + b1) + (b2 + b3), (c0 + c1) + (c2 + c3)


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
def _square_step(w, a, b, p_bit, q_bit):  # type: ignore[no-untyped-def]  # pragma: no cover
    """One step of square-and-multiply for two exponents at once (w -> w**2)."""
    w = w * w
    return w, (a * w if p_bit else a), (b * w if q_bit else b)


@njit(fastmath=False, cache=True, inline="always")
def _powers(v, e, e1, p, q, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """e = v**p and e1 = v**q (1 <= p, q <= 256: up to 9 bits) by square-and-multiply from the lowest bit.

    One pass over the row with everything in registers: the loop is specialised on the
    number of bits (no squaring beyond the top bit, which could only make subnormals), and
    a bit's multiply is a select on a loop-invariant flag, so the loop vectorises.
    """
    bits = 1
    while (max(p, q) >> bits) > 0:
        bits += 1
    if bits == 1:
        for j in range(k):
            w = v[j]
            a = w if p & 1 else 1.0
            b = w if q & 1 else 1.0
            e[j] = a
            e1[j] = b
    elif bits == 2:
        for j in range(k):
            w = v[j]
            a = w if p & 1 else 1.0
            b = w if q & 1 else 1.0
            w, a, b = _square_step(w, a, b, (p >> 1) & 1, (q >> 1) & 1)
            e[j] = a
            e1[j] = b
    elif bits == 3:
        for j in range(k):
            w = v[j]
            a = w if p & 1 else 1.0
            b = w if q & 1 else 1.0
            w, a, b = _square_step(w, a, b, (p >> 1) & 1, (q >> 1) & 1)
            w, a, b = _square_step(w, a, b, (p >> 2) & 1, (q >> 2) & 1)
            e[j] = a
            e1[j] = b
    elif bits == 4:
        for j in range(k):
            w = v[j]
            a = w if p & 1 else 1.0
            b = w if q & 1 else 1.0
            w, a, b = _square_step(w, a, b, (p >> 1) & 1, (q >> 1) & 1)
            w, a, b = _square_step(w, a, b, (p >> 2) & 1, (q >> 2) & 1)
            w, a, b = _square_step(w, a, b, (p >> 3) & 1, (q >> 3) & 1)
            e[j] = a
            e1[j] = b
    elif bits == 5:
        for j in range(k):
            w = v[j]
            a = w if p & 1 else 1.0
            b = w if q & 1 else 1.0
            w, a, b = _square_step(w, a, b, (p >> 1) & 1, (q >> 1) & 1)
            w, a, b = _square_step(w, a, b, (p >> 2) & 1, (q >> 2) & 1)
            w, a, b = _square_step(w, a, b, (p >> 3) & 1, (q >> 3) & 1)
            w, a, b = _square_step(w, a, b, (p >> 4) & 1, (q >> 4) & 1)
            e[j] = a
            e1[j] = b
    elif bits == 6:
        for j in range(k):
            w = v[j]
            a = w if p & 1 else 1.0
            b = w if q & 1 else 1.0
            w, a, b = _square_step(w, a, b, (p >> 1) & 1, (q >> 1) & 1)
            w, a, b = _square_step(w, a, b, (p >> 2) & 1, (q >> 2) & 1)
            w, a, b = _square_step(w, a, b, (p >> 3) & 1, (q >> 3) & 1)
            w, a, b = _square_step(w, a, b, (p >> 4) & 1, (q >> 4) & 1)
            w, a, b = _square_step(w, a, b, (p >> 5) & 1, (q >> 5) & 1)
            e[j] = a
            e1[j] = b
    elif bits == 7:
        for j in range(k):
            w = v[j]
            a = w if p & 1 else 1.0
            b = w if q & 1 else 1.0
            w, a, b = _square_step(w, a, b, (p >> 1) & 1, (q >> 1) & 1)
            w, a, b = _square_step(w, a, b, (p >> 2) & 1, (q >> 2) & 1)
            w, a, b = _square_step(w, a, b, (p >> 3) & 1, (q >> 3) & 1)
            w, a, b = _square_step(w, a, b, (p >> 4) & 1, (q >> 4) & 1)
            w, a, b = _square_step(w, a, b, (p >> 5) & 1, (q >> 5) & 1)
            w, a, b = _square_step(w, a, b, (p >> 6) & 1, (q >> 6) & 1)
            e[j] = a
            e1[j] = b
    elif bits == 8:
        for j in range(k):
            w = v[j]
            a = w if p & 1 else 1.0
            b = w if q & 1 else 1.0
            w, a, b = _square_step(w, a, b, (p >> 1) & 1, (q >> 1) & 1)
            w, a, b = _square_step(w, a, b, (p >> 2) & 1, (q >> 2) & 1)
            w, a, b = _square_step(w, a, b, (p >> 3) & 1, (q >> 3) & 1)
            w, a, b = _square_step(w, a, b, (p >> 4) & 1, (q >> 4) & 1)
            w, a, b = _square_step(w, a, b, (p >> 5) & 1, (q >> 5) & 1)
            w, a, b = _square_step(w, a, b, (p >> 6) & 1, (q >> 6) & 1)
            w, a, b = _square_step(w, a, b, (p >> 7) & 1, (q >> 7) & 1)
            e[j] = a
            e1[j] = b
    else:  # 9 bits: p or q is 256
        for j in range(k):
            w = v[j]
            a = w if p & 1 else 1.0
            b = w if q & 1 else 1.0
            w, a, b = _square_step(w, a, b, (p >> 1) & 1, (q >> 1) & 1)
            w, a, b = _square_step(w, a, b, (p >> 2) & 1, (q >> 2) & 1)
            w, a, b = _square_step(w, a, b, (p >> 3) & 1, (q >> 3) & 1)
            w, a, b = _square_step(w, a, b, (p >> 4) & 1, (q >> 4) & 1)
            w, a, b = _square_step(w, a, b, (p >> 5) & 1, (q >> 5) & 1)
            w, a, b = _square_step(w, a, b, (p >> 6) & 1, (q >> 6) & 1)
            w, a, b = _square_step(w, a, b, (p >> 7) & 1, (q >> 7) & 1)
            w, a, b = _square_step(w, a, b, (p >> 8) & 1, (q >> 8) & 1)
            e[j] = a
            e1[j] = b


@njit(fastmath=False, cache=True, error_model="numpy")
def _expansion_block(logits, labels, start, stop, beta, mode, p, q, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """out[:9] = the expansion sums of rows [start, stop) (one block; see ``expansion_sums``).

    Not inlined: both drivers call it once per block, so it is compiled once (inlining its
    body into the parallel driver made the first compilation ~9 times slower).
    """
    k = logits.shape[1]
    inverse_q = 1.0 / q
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
    # The log-sum-exp terms: every row's s0 (and s_one) is in [1, k] (its largest term is
    # exactly 1), so the product of 16 of them stays far from overflow and one log of the
    # product replaces 16 logs (relative error ~16 ulp of the product: ~1e-16 of the sum).
    product = 1.0
    product_one = 1.0
    in_product = 0
    for i in range(start, stop):
        _shift_row(logits[i], d, k)
        s_one = 1.0
        if mode == NLL_AT_ONE_RATIO:
            _exp_nonpositive(d, inverse_q, t, scale, k)
            _powers(t, e, e1, p, q, k)
            s0, s1, s_one = _sums_e_ed_e1(e, d, e1, k)
        else:
            _exp_nonpositive(d, beta, e, scale, k)
            s0, s1 = _sums_e_ed(e, d, k)
        mean = s1 / s0
        m2, m3, m4, m5, m6 = _centred_sums(e, d, mean, k)
        mu2 = m2 / s0
        mu3 = m3 / s0
        mu4 = m4 / s0
        d_label = d[labels[i]]
        nll -= beta * d_label
        gradient += mean - d_label
        # Cumulants from central moments.
        k2_sum += mu2
        k3_sum += mu3
        k4_sum += mu4 - 3.0 * mu2 * mu2
        k5_sum += m5 / s0 - 10.0 * mu3 * mu2
        k6_sum += m6 / s0 - 15.0 * mu4 * mu2 - 10.0 * mu3 * mu3 + 30.0 * mu2 * mu2 * mu2
        if mode == NLL_AT_ONE_EXP:
            _exp_nonpositive(d, 1.0, e1, scale, k)
            s_one = _sum(e1, k)
        if mode == NLL_AT_ONE_RATIO or mode == NLL_AT_ONE_EXP:
            nll_one -= d_label
        product *= s0
        product_one *= s_one
        in_product += 1
        if in_product == 16:
            nll += math.log(product)
            nll_one += math.log(product_one)
            product = 1.0
            product_one = 1.0
            in_product = 0
    nll += math.log(product)
    nll_one += math.log(product_one)
    if mode == NLL_AT_ONE_SAME:
        nll_one = nll
    elif mode == NLL_AT_ONE_SKIP:
        nll_one = 0.0
    out[0] = stop - start
    out[1] = nll
    out[2] = gradient
    out[3] = k2_sum
    out[4] = k3_sum
    out[5] = k4_sum
    out[6] = nll_one
    out[7] = k5_sum
    out[8] = k6_sum


@njit(fastmath=False, cache=True, inline="always")
def _add_blocks(partial):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Block partial sums added in block order (the same order whatever ran them)."""
    sums = np.zeros(partial.shape[1])
    for b in range(partial.shape[0]):
        for s in range(partial.shape[1]):
            sums[s] += partial[b, s]
    return sums


@njit(parallel=True, fastmath=False, cache=True, error_model="numpy")
def expansion_sums(logits, labels, beta, mode, p, q, block_rows):  # type: ignore[no-untyped-def]  # pragma: no cover
    """[n, nll, gradient, k2, k3, k4, nll_at_one, k5, k6] sums; see ``_kernels.nll_expansion_sums``.

    ``mode`` says how nll_at_one is obtained: 0 not at all, 1 it is the NLL (beta == 1),
    2 from ``v = exp(d / q)`` with ``beta == p / q``, 3 by a second exp. Blocks of
    ``block_rows`` rows run in parallel.
    """
    n = logits.shape[0]
    n_blocks = (n + block_rows - 1) // block_rows
    partial = np.zeros((n_blocks, 9))
    for b in prange(n_blocks):
        start = b * block_rows
        _expansion_block(logits, labels, start, min(n, start + block_rows), beta, mode, p, q, partial[b])
    return _add_blocks(partial)


@njit(fastmath=False, cache=True, error_model="numpy")
def expansion_sums_serial(logits, labels, beta, mode, p, q, block_rows):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`expansion_sums` on the calling thread: same blocks, same order, same sums (bit for bit).

    For small inputs (a warm-start subsample): no parallel region, so no wait for a second
    thread to be scheduled on a loaded machine.
    """
    n = logits.shape[0]
    n_blocks = (n + block_rows - 1) // block_rows
    partial = np.zeros((n_blocks, 9))
    for b in range(n_blocks):
        start = b * block_rows
        _expansion_block(logits, labels, start, min(n, start + block_rows), beta, mode, p, q, partial[b])
    return _add_blocks(partial)


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
            _exp_nonpositive(d, beta, e, scale, k)
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
