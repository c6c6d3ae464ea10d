"""The compiled (numba) versions of the two passes in :mod:`calibration._kernels`.

Imported lazily by :mod:`calibration._kernels`, only when an input is large enough to be
worth it, so ``import calibration`` and small inputs never pay numba's import, compile or
thread start-up. Compiled once per input dtype (float32, float64) and cached on disk
(``cache=True``: in ``__pycache__`` beside this file, or under ``NUMBA_CACHE_DIR``).

Why it is fast and still exact (the numpy functions in :mod:`calibration._kernels` are
the reference the tests hold these to, at 1e-12 relative):

- Each row is read twice (the second time from L1): once for its maximum, once
  by a loop that forms ``d = z - max z <= 0`` in float64 and ``e = exp(beta * d)`` and
  stores both in small row buffers; the sums then run over those buffers. ``d <= 0``, so
  ``exp(beta * d)`` never overflows, whatever the logits (±1e4 and beyond).
- ``exp`` is :func:`_exp`: a reduction by ln 2 and a degree-13 Taylor polynomial
  evaluated with explicit fused multiply-adds, and the power of two built in a register
  from its bits (an LLVM bitcast): straight-line code, so the loop calling it vectorises
  (numba's ``math.exp`` is a scalar libm call here: no SVML). It is within about one ulp
  of ``np.exp`` (tested) and returns 0 below ``exp(-708)``, a term 1e-308 times the
  row's largest one (which is exactly 1). Loops that store are kept apart from loops
  that add up: with ``fastmath=False`` a loop carrying a sum does not vectorise its
  ``exp`` (one fused loop measured ~1.7x slower).
- The expansion kernels use numba's ``error_model="numpy"``: a non-finite logit makes its
  row's sums NaN (IEEE arithmetic, no exception), which is how ``fit_temperature`` detects
  one without a separate scan. Finite logits too far apart for float64 do the same: a
  row whose max − min overflows has ``e * d = 0 * -inf``, NaN; and a block in which a
  label's logit lies more than ``max_spread`` below its row's maximum gets a NaN NLL (a
  running minimum of the labels' d, compared once per block). The label's d is the only
  one whose size reaches the sums (the other logits enter weighted by ``e``, 0 that far
  down), so this is what keeps them finite; a per-logit check or a row minimum measured
  3-7% of a pass, this nothing measurable.
- ``fastmath=False``: nothing is reassociated. Sums over a row use four interleaved
  partial sums in an order fixed by the code; rows are grouped into fixed blocks whose
  partial sums are added in block order, so results do not depend on the thread count.
- The NLL at T = 1 (``nll_before``) comes cheap when 1/T is a ratio p/q of small
  integers: one ``v = exp(d / q)`` gives ``exp(beta * d) = v**p`` and ``exp(d) = v**q`` by
  a few multiplications in the same vectorised loop, and Σ exp(d) is added inside the
  centred-moment loop, whose arithmetic hides it (~8% of a pass at 2 bits, ~12% at 3;
  the fit expands at such a ratio: ``_fit._expansion_point``).
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

__all__ = ["expansion_sums", "expansion_sums_serial", "calibration_bin_sums", "first_nonfinite_row", "first_refused_row", "exp_nonpositive"]

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


def _bits_as_double_intrinsic(typingctx: Any, bits: Any) -> Any:  # pragma: no cover - compiled
    """The float64 whose IEEE bits are the int64 ``bits`` (a register bitcast, no memory)."""
    signature = types.float64(types.int64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.DoubleType())

    return signature, codegen


_bits_as_double: Any = intrinsic(_bits_as_double_intrinsic)


@njit(fastmath=False, cache=True, inline="always")
def _exp(x):  # type: ignore[no-untyped-def]  # pragma: no cover
    """exp(x) for x <= 0, 0 below -708: straight-line code, so a loop calling it vectorises."""
    v = x if x > _EXP_FLOOR else _EXP_FLOOR
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
    # 2**n from its bits (n is an integer in [-1022, 0]: a normal double); 0 below the floor.
    scale = _bits_as_double((np.int64(n) + 1023) << 52) if x > _EXP_FLOOR else 0.0
    return _fma(p, r, 1.0) * scale


@njit(fastmath=False, cache=True)
def exp_nonpositive(x):  # type: ignore[no-untyped-def]  # pragma: no cover
    """exp(x) of a 1-D float64 array of values <= 0, as the kernels compute it (for tests)."""
    out = np.empty_like(x)
    for j in range(x.shape[0]):
        out[j] = _exp(x[j])
    return out


@njit(fastmath=False, cache=True, inline="always")
def _row_max(row, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """max(row) in float64, in four lanes (vectorised)."""
    m0 = m1 = m2 = m3 = row[0]
    k4 = k - k % 4
    for j in range(0, k4, 4):
        m0 = max(m0, row[j])
        m1 = max(m1, row[j + 1])
        m2 = max(m2, row[j + 2])
        m3 = max(m3, row[j + 3])
    for j in range(k4, k):
        m0 = max(m0, row[j])
    return np.float64(max(max(m0, m1), max(m2, m3)))


@njit(fastmath=False, cache=True, inline="always")
def _row_range(row, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """(max(row), min(row)) in float64, in four lanes each (vectorised, one read of the row)."""
    m0 = m1 = m2 = m3 = row[0]
    n0 = n1 = n2 = n3 = row[0]
    k4 = k - k % 4
    for j in range(0, k4, 4):
        m0 = max(m0, row[j])
        m1 = max(m1, row[j + 1])
        m2 = max(m2, row[j + 2])
        m3 = max(m3, row[j + 3])
        n0 = min(n0, row[j])
        n1 = min(n1, row[j + 1])
        n2 = min(n2, row[j + 2])
        n3 = min(n3, row[j + 3])
    for j in range(k4, k):
        m0 = max(m0, row[j])
        n0 = min(n0, row[j])
    return np.float64(max(max(m0, m1), max(m2, m3))), np.float64(min(min(n0, n1), min(n2, n3)))


@njit(fastmath=False, cache=True, inline="always")
def _first_top(d, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The first j with d[j] == 0: the first arg-max, as ``argmax`` (z - max z == 0 iff z == max z)."""
    for j in range(k):
        if d[j] == 0.0:
            return j
    return 0


@njit(fastmath=False, cache=True, inline="always")
def _row_exp(row, top, beta, d, e, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """d = row - top in float64 and e = exp(beta * d), stored: one loop, vectorised."""
    for j in range(k):
        d_j = np.float64(row[j]) - top
        d[j] = d_j
        e[j] = _exp(beta * d_j)


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
def _powers(w, p, q, bits):  # type: ignore[no-untyped-def]  # pragma: no cover
    """(w**p, w**q) by square-and-multiply from the lowest bit (p, q < 2**bits).

    Inlined where ``bits`` is a literal: the bit loop unrolls and each multiply is a
    select on a loop-invariant flag, so the loop around it vectorises; no squaring goes
    beyond the top bit (it could only make subnormals).
    """
    a = w if p & 1 else 1.0
    b = w if q & 1 else 1.0
    for s in range(1, bits):
        w = w * w
        a = a * w if (p >> s) & 1 else a
        b = b * w if (q >> s) & 1 else b
    return a, b


@njit(fastmath=False, cache=True, inline="always")
def _row_ratio_exp(row, top, inverse_q, p, q, bits, d, e, e1, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """At beta = p / q, one vectorised loop: d = row - top, v = exp(d / q), e = v**p = exp(beta * d)
    and e1 = v**q = exp(d), all stored."""
    for j in range(k):
        d_j = np.float64(row[j]) - top
        d[j] = d_j
        e[j], e1[j] = _powers(_exp(inverse_q * d_j), p, q, bits)


@njit(fastmath=False, cache=True, inline="always")
def _ratio_exp(row, top, inverse_q, p, q, d, e, e1, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_row_ratio_exp` specialised on the bit count of max(p, q) (1 to 9: p, q <= 256).

    The branches are the point: each passes its bit count as a literal, so each inlined
    copy has a fixed number of square-and-multiply steps, unrolled, and vectorises.
    """
    bits = 1
    while (max(p, q) >> bits) > 0:
        bits += 1
    if bits == 1:
        _row_ratio_exp(row, top, inverse_q, p, q, 1, d, e, e1, k)
    elif bits == 2:
        _row_ratio_exp(row, top, inverse_q, p, q, 2, d, e, e1, k)
    elif bits == 3:
        _row_ratio_exp(row, top, inverse_q, p, q, 3, d, e, e1, k)
    elif bits == 4:
        _row_ratio_exp(row, top, inverse_q, p, q, 4, d, e, e1, k)
    elif bits == 5:
        _row_ratio_exp(row, top, inverse_q, p, q, 5, d, e, e1, k)
    elif bits == 6:
        _row_ratio_exp(row, top, inverse_q, p, q, 6, d, e, e1, k)
    elif bits == 7:
        _row_ratio_exp(row, top, inverse_q, p, q, 7, d, e, e1, k)
    elif bits == 8:
        _row_ratio_exp(row, top, inverse_q, p, q, 8, d, e, e1, k)
    else:
        _row_ratio_exp(row, top, inverse_q, p, q, 9, d, e, e1, k)


@njit(fastmath=False, cache=True, inline="always")
def _centred_sums(e, d, mean, e1, with_one, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """(Σ e u², Σ e u³, ..., Σ e u⁶, Σ e1) with u = d - mean: centred, so no cancellation.

    Σ e1 only when ``with_one`` (a literal at each call site: the other copy has no load
    of e1), else 0: here it is nearly free, the loop being bound by the moments'
    arithmetic (a separate loop or a third sum beside Σ e, Σ e·d measured ~3% of a pass
    slower). Two interleaved partial sums each (five sums in flight fill the pipeline).
    """
    a0 = a1 = b0 = b1 = c0 = c1 = f0 = f1 = g0 = g1 = h0 = h1 = 0.0
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
        if with_one:
            h0 += e1[j]
            h1 += e1[j + 1]
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
        if with_one:
            h0 += e1[j]
    return a0 + a1, b0 + b1, c0 + c1, f0 + f1, g0 + g1, h0 + h1


@njit(fastmath=False, cache=True, error_model="numpy")
def _expansion_block(logits, labels, start, stop, beta, mode, p, q, max_spread, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """out[:10] = the expansion sums of rows [start, stop) (one block; see ``expansion_sums``).

    Not inlined: both drivers call it once per block, so it is compiled once (inlining its
    body into the parallel driver made the first compilation ~9 times slower). A label's
    logit more than ``max_spread`` below its row's maximum makes the block's NLL NaN.
    """
    k = logits.shape[1]
    inverse_q = 1.0 / q
    d = np.empty(k)
    e = np.empty(k)
    e1 = np.empty(k)
    nll = 0.0
    gradient = 0.0
    gradient_square = 0.0
    k2_sum = 0.0
    k3_sum = 0.0
    k4_sum = 0.0
    k5_sum = 0.0
    k6_sum = 0.0
    nll_one = 0.0
    lowest_label = 0.0
    # The log-sum-exp terms: every row's s0 (and s_one) is in [1, k] (its largest term is
    # exactly 1), so the product of 16 of them stays far from overflow and one log of the
    # product replaces 16 logs (relative error ~16 ulp of the product: ~1e-16 of the sum).
    product = 1.0
    product_one = 1.0
    in_product = 0
    for i in range(start, stop):
        row = logits[i]
        top = _row_max(row, k)
        if mode == NLL_AT_ONE_RATIO:
            _ratio_exp(row, top, inverse_q, p, q, d, e, e1, k)
        else:
            _row_exp(row, top, beta, d, e, k)
            if mode == NLL_AT_ONE_EXP:
                for j in range(k):
                    e1[j] = _exp(d[j])
        s0, s1 = _sums_e_ed(e, d, k)
        mean = s1 / s0
        if mode == NLL_AT_ONE_RATIO or mode == NLL_AT_ONE_EXP:
            m2, m3, m4, m5, m6, s_one = _centred_sums(e, d, mean, e1, True, k)
        else:
            m2, m3, m4, m5, m6, s_one = _centred_sums(e, d, mean, e1, False, k)
        mu2 = m2 / s0
        mu3 = m3 / s0
        mu4 = m4 / s0
        d_label = d[labels[i]]
        lowest_label = min(lowest_label, d_label)
        nll -= beta * d_label
        gradient += mean - d_label
        gradient_square += (mean - d_label) * (mean - d_label)
        # Cumulants from central moments.
        k2_sum += mu2
        k3_sum += mu3
        k4_sum += mu4 - 3.0 * mu2 * mu2
        k5_sum += m5 / s0 - 10.0 * mu3 * mu2
        k6_sum += m6 / s0 - 15.0 * mu4 * mu2 - 10.0 * mu3 * mu3 + 30.0 * mu2 * mu2 * mu2
        if mode == NLL_AT_ONE_RATIO or mode == NLL_AT_ONE_EXP:
            nll_one -= d_label
        else:
            s_one = 1.0
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
    if lowest_label < -max_spread:
        # A label's logit lies more than the spread limit below its row's maximum: its NLL
        # and gradient would leave float64's comfortable range, so the block's sums are NaN.
        nll = np.nan
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
    out[9] = gradient_square


@njit(fastmath=False, cache=True, inline="always")
def _add_blocks(partial):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Block partial sums added in block order (the same order whatever ran them)."""
    sums = np.zeros(partial.shape[1])
    for b in range(partial.shape[0]):
        for s in range(partial.shape[1]):
            sums[s] += partial[b, s]
    return sums


@njit(parallel=True, fastmath=False, cache=True, error_model="numpy")
def expansion_sums(logits, labels, beta, mode, p, q, max_spread, block_rows):  # type: ignore[no-untyped-def]  # pragma: no cover
    """[n, nll, gradient, k2, k3, k4, nll_at_one, k5, k6, gradient²] sums; see ``_kernels.nll_expansion_sums``.

    ``mode`` says how nll_at_one is obtained: 0 not at all, 1 it is the NLL (beta == 1),
    2 from ``v = exp(d / q)`` with ``beta == p / q``, 3 by a second exp. Rows spanning
    more than ``max_spread`` (its label's logit that far below its maximum) make the NLL NaN.
    Blocks of ``block_rows`` rows run in parallel.
    """
    n = logits.shape[0]
    n_blocks = (n + block_rows - 1) // block_rows
    partial = np.zeros((n_blocks, 10))
    for b in prange(n_blocks):
        start = b * block_rows
        _expansion_block(
            logits, labels, start, min(n, start + block_rows), beta, mode, p, q, max_spread, partial[b]
        )
    return _add_blocks(partial)


@njit(fastmath=False, cache=True, error_model="numpy")
def expansion_sums_serial(logits, labels, beta, mode, p, q, max_spread, block_rows):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`expansion_sums` on the calling thread: same blocks, same order, same sums (bit for bit).

    For small inputs (a warm-start subsample): no parallel region, so no wait for a second
    thread to be scheduled on a loaded machine.
    """
    n = logits.shape[0]
    n_blocks = (n + block_rows - 1) // block_rows
    partial = np.zeros((n_blocks, 10))
    for b in range(n_blocks):
        start = b * block_rows
        _expansion_block(
            logits, labels, start, min(n, start + block_rows), beta, mode, p, q, max_spread, partial[b]
        )
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
        nll = 0.0
        brier = 0.0
        for i in range(start, stop):
            row = logits[i]
            _row_exp(row, _row_max(row, k), beta, d, e, k)
            s0, squares = _sums_e_ed(e, e, k)
            top = _first_top(d, k)
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


@njit(fastmath=False, cache=True, inline="always")
def _row_finite(row, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Every value of the row finite: x - x is 0 exactly when x is finite (four lanes)."""
    a0 = a1 = a2 = a3 = 0.0
    k4 = k - k % 4
    for j in range(0, k4, 4):
        a0 += row[j] - row[j]
        a1 += row[j + 1] - row[j + 1]
        a2 += row[j + 2] - row[j + 2]
        a3 += row[j + 3] - row[j + 3]
    for j in range(k4, k):
        a0 += row[j] - row[j]
    return (a0 + a1) + (a2 + a3) == 0.0


@njit(parallel=True, fastmath=False, cache=True)
def first_refused_row(logits, max_spread, block_rows):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The first row with a NaN or an infinity, or whose max − min (in float64) is above
    ``max_spread``, or -1."""
    n, k = logits.shape
    n_blocks = (n + block_rows - 1) // block_rows
    first = np.full(n_blocks, -1, dtype=np.int64)
    for b in prange(n_blocks):
        for i in range(b * block_rows, min(n, (b + 1) * block_rows)):
            top, bottom = _row_range(logits[i], k)
            if not (_row_finite(logits[i], k) and top - bottom <= max_spread):
                first[b] = i
                break
    for b in range(n_blocks):
        if first[b] >= 0:
            return first[b]
    return -1


@njit(parallel=True, fastmath=False, cache=True)
def first_nonfinite_row(logits, block_rows):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The first row with a NaN or an infinity, or -1: :func:`first_refused_row` without the
    spread, for inputs whose spread cannot exceed the limit (float32) or has none."""
    n, k = logits.shape
    n_blocks = (n + block_rows - 1) // block_rows
    first = np.full(n_blocks, -1, dtype=np.int64)
    for b in prange(n_blocks):
        for i in range(b * block_rows, min(n, (b + 1) * block_rows)):
            if not _row_finite(logits[i], k):
                first[b] = i
                break
    for b in range(n_blocks):
        if first[b] >= 0:
            return first[b]
    return -1
