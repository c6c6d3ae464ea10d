"""The compiled (numba) versions of the two passes in :mod:`calibration._kernels`.

Imported lazily by :mod:`calibration._kernels`, only when an input is large enough to be
worth it, so ``import calibration`` and small inputs never pay numba's import, compile or
thread start-up. Compiled once per input dtype (float32, float64) and cached on disk
(``cache=True``: in ``__pycache__`` beside this file, or under ``NUMBA_CACHE_DIR``). The
exp, its table and the helpers live in this one file on purpose: numba's cache checks only
the file that defines a cached function, so a helper moved to another module could change
without the kernels that inline it being recompiled.

Why it is fast and still exact (the numpy functions in :mod:`calibration._kernels` are
the reference the tests hold these to, at 1e-12 relative):

- ``exp`` is :func:`_exp`, a table-driven exp (Tang 1989): ``x = k ln 2 / 128 + r`` with k
  the nearest integer, so ``|r| <= ln 2 / 256``; 2^(k/128) is a 128-entry table's 2^(i/128)
  (i = k mod 128; with each entry's own rounding error, added back) times 2^(k >> 7) put
  into its exponent bits, and exp(r) a degree-5 Taylor polynomial (truncation < 1e-18
  relative). Error at most 0.52 ulp of the exact value for ``-708 < x <= 0`` (0.5 for the
  final rounding, < 0.02 for the entry, the reduction and the polynomial; the largest seen
  over 4e7 arguments is 0.509, tested against 64-bit-mantissa and 50-digit references),
  where numpy's reaches 0.72; exactly +0 for ``x <= -708`` (a term 1e-308 times the row's
  largest one, which is exactly 1) and for -inf; NaN for NaN. Straight-line code, its two
  table loads included: the loops calling it vectorise (four doubles a step, the loads as
  gathers). numba's ``math.exp`` is a scalar libm call here (no SVML); the degree-13
  polynomial this replaces took 0.73 ns an exp on one core, this 0.63.
- Two layouts. Rows of more than :data:`COLUMNS_MAX_CLASSES` logits are taken one at a
  time: a loop puts ``d = z - max z <= 0`` in float64 into a row buffer, padded to a
  multiple of 8 entries with a ``d`` whose exp is exactly 0 (:func:`_padded`: every sum
  gets exactly 0 from the padding), so that the vector loops over the buffer never end in
  their scalar remainder (one scalar iteration of the exp loop cost ~9 ns: at K = 100,
  four of them were 13% of the fit's pass); a loop forms ``e = exp(beta * d)``, stores it
  and adds up Σe and Σe·d as it goes; a second loop over the buffers adds the centred
  moments. The evaluation's row loop does the same without storing e, and takes the
  labels' exps 64 rows at a time in one vector loop (one scalar exp a row cost ~5 ns).
  Narrower rows are taken 64 at a time and transposed into a column buffer, so that every
  loop runs down 64 rows at once, the rows' sums in arrays, instead of along a row of 2 to
  32 logits, whose loop set-up and scalar remainder cost more than its body (the fit's
  pass, against the row layout: K = 2 2.5x faster, K = 8 1.6x, K = 16 1.2x, even at
  K = 32); there the evaluation finds the first arg-max in its exp loop (the lowest
  column whose d is 0), not in a loop of its own.
  ``d <= 0``, so ``exp(beta * d)`` never overflows, whatever the logits (±1e4 and beyond).
- Sums along a row are running sums whose additions carry LLVM's ``reassoc`` flag and
  nothing else (:func:`_sum_add`, :func:`_sum_fma`), so that the vectoriser may split them
  into partial sums and a loop carrying them still vectorises; no other arithmetic is
  reassociated, and nothing assumes finite values (``fastmath=False``: NaN and inf still
  propagate, which the checks below rely on). The partial sums' order is fixed by the
  compiled code: the same on every run and every thread on a machine, possibly different in
  the last bits on a CPU with another vector width. In the column layout each row is summed
  in column order.
- The expansion kernels use numba's ``error_model="numpy"``: a non-finite logit makes its
  row's sums NaN (IEEE arithmetic, no exception), which is how ``fit_temperature`` detects
  one without a separate scan. Finite logits too far apart for float64 do the same: a
  row whose max − min overflows has ``e * d = 0 * -inf``, NaN; and a block in which a
  label's logit lies more than ``max_spread`` below its row's maximum gets a NaN NLL (a
  running minimum of the labels' d, compared once per block). The label's d is the only
  one whose size reaches the sums (the other logits enter weighted by ``e``, 0 that far
  down), so this is what keeps them finite; a per-logit check or a row minimum measured
  3-7% of a pass, this nothing measurable.
- Rows are grouped into fixed blocks whose partial sums are added in block order, so
  results do not depend on the thread count.
- The NLL at T = 1 (``nll_before``) comes cheap when 1/T is a ratio p/q of small
  integers: one ``v = exp(d / q)`` gives ``exp(beta * d) = v**p`` and ``exp(d) = v**q`` by
  a few multiplications in the same vectorised loop, which also adds up Σ exp(d) (the fit
  expands at such a ratio: ``_fit._expansion_point``); beyond 5 bits a second exp is cheaper.
- Two drivers share one block body: ``expansion_sums`` runs the blocks in parallel,
  ``expansion_sums_serial`` on the calling thread (small inputs: no parallel region to
  wait for); same blocks, same order, the same sums bit for bit. ``expansion_blocks`` and
  ``add_blocks`` are the parallel driver's two halves (``calibration_bin_blocks`` and
  ``add_bin_blocks`` the evaluation's), for the kernels compiled ahead of time, which run
  shares of the blocks on Python threads (:mod:`calibration._native`).

References
----------
Tang, P. T. P. "Table-driven implementation of the exponential function in IEEE
floating-point arithmetic". ACM Transactions on Mathematical Software 15(2), 1989.
"""

from __future__ import annotations

import decimal
import math
from typing import Any

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import njit, prange, types
from numba.extending import intrinsic
from numpy.typing import NDArray

__all__ = [
    "expansion_sums",
    "expansion_sums_serial",
    "calibration_bin_sums",
    "first_nonfinite_row",
    "first_refused_row",
    "exp_nonpositive",
    "COLUMNS_MAX_CLASSES",
    "BIN_COLUMNS_MAX_CLASSES",
]

# How nll_at_one is obtained (see expansion_sums).
NLL_AT_ONE_SKIP, NLL_AT_ONE_SAME, NLL_AT_ONE_RATIO, NLL_AT_ONE_EXP = 0, 1, 2, 3

#: Rows of at most this many logits are processed in the column layout (see above). Measured
#: on the fit's pass: the two layouts cost the same near 32 classes, rows win from 48; on the
#: evaluation's (less work per logit, no row buffers), rows win from 16.
COLUMNS_MAX_CLASSES = 32
BIN_COLUMNS_MAX_CLASSES = 15
# Ratios p / q with max(p, q) up to this many bits get Σ exp(d) from powers (see _nll_at_one_plan).
_POWER_MAX_BITS = 5
# Rows transposed at a time in the column layout: 64 x 32 float64 is a 16 KiB buffer.
_COLUMN_ROWS = 64


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


def _double_bits_intrinsic(typingctx: Any, value: Any) -> Any:  # pragma: no cover - compiled
    """The IEEE bits of the float64 ``value`` as an int64 (a register bitcast)."""
    signature = types.int64(types.float64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(64))

    return signature, codegen


_double_bits: Any = intrinsic(_double_bits_intrinsic)


def _sum_add_intrinsic(typingctx: Any, total: Any, term: Any) -> Any:  # pragma: no cover - compiled
    """total + term for a running sum: ``reassoc`` on this one addition, so the vectoriser
    may split the sum into partial sums; no other fast-math assumption (NaN and inf stay)."""
    signature = types.float64(types.float64, types.float64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.fadd(args[0], args[1], flags=("reassoc",))

    return signature, codegen


_sum_add: Any = intrinsic(_sum_add_intrinsic)


def _sum_fma_intrinsic(typingctx: Any, a: Any, b: Any, total: Any) -> Any:  # pragma: no cover - compiled
    """total + a * b for a running sum (``llvm.fmuladd``, fused where the CPU has FMA), with
    ``reassoc`` so that the vectoriser may split the sum, as :func:`_sum_add`."""
    signature = types.float64(types.float64, types.float64, types.float64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        double = ir.DoubleType()
        fmuladd = builder.module.declare_intrinsic("llvm.fmuladd", [double], ir.FunctionType(double, [double] * 3))
        return builder.call(fmuladd, args, fastmath=("reassoc", "contract"))

    return signature, codegen


_sum_fma: Any = intrinsic(_sum_fma_intrinsic)


# -- exp(x) for x <= 0 ------------------------------------------------------------------------

_EXP_TABLE_BITS = 7
_EXP_TABLE_SIZE = 1 << _EXP_TABLE_BITS
# Adding then subtracting 1.5 * 2**52 rounds a double of magnitude < 2**51 to an integer,
# which the low bits of the sum then hold.
_ROUND = 6755399441055744.0
# Below this exp(x) is 0 here (exp(-708) = 3.3e-308, still a normal double, so every
# result above it is normal and the scale's exponent never underflows).
_EXP_FLOOR = -708.0
# ln 2 / 128 split so that k * hi is exact for |k| < 2**17 (Cody and Waite).
_LN2_N_HI = float.fromhex("0x1.62e42fefa0000p-8")


def _exp_table() -> tuple[NDArray[np.float64], NDArray[np.int64], float, float]:
    """The table of 2^(i/128): each entry's relative rounding error, and its bits less
    ``i << 45`` (adding ``k << 45`` then gives 2^(k/128) for any integer k: see :func:`_exp`);
    with 128 / ln 2 and the low part of ln 2 / 128. From 50-digit decimal arithmetic."""
    with decimal.localcontext() as context:
        context.prec = 50
        two = decimal.Decimal(2)
        tail = np.empty(_EXP_TABLE_SIZE, dtype=np.float64)
        bits = np.empty(_EXP_TABLE_SIZE, dtype=np.int64)
        for i in range(_EXP_TABLE_SIZE):
            exact = two ** (decimal.Decimal(i) / _EXP_TABLE_SIZE)
            rounded = float(exact)
            tail[i] = float((exact - decimal.Decimal(rounded)) / decimal.Decimal(rounded))
            bits[i] = int(np.float64(rounded).view(np.int64)) - (i << (52 - _EXP_TABLE_BITS))
        ln2_n = two.ln() / _EXP_TABLE_SIZE
        return tail, bits, float(1 / ln2_n), float(ln2_n - decimal.Decimal(_LN2_N_HI))


_EXP_TAIL, _EXP_BITS, _INV_LN2_N, _LN2_N_LO = _exp_table()


@njit(fastmath=False, cache=True, inline="always")
def _exp(x):  # type: ignore[no-untyped-def]  # pragma: no cover
    """exp(x) for x <= 0 (0 at and below -708, NaN for NaN): straight-line code, so a loop
    calling it vectorises. See the module's docstring for the method and its accuracy."""
    v = _EXP_FLOOR if x <= _EXP_FLOOR else x
    # k = round(v * 128 / ln 2), as a double and (in the low bits of the sum) an integer.
    shifted = _fma(v, _INV_LN2_N, _ROUND)
    k_bits = _double_bits(shifted)
    k = shifted - _ROUND
    # r = v - k ln 2 / 128, |r| <= ln 2 / 256 (the product k * hi is exact).
    r = _fma(k, -_LN2_N_LO, _fma(k, -_LN2_N_HI, v))
    i = k_bits & (_EXP_TABLE_SIZE - 1)
    # 2^(k/128) = 2^(i/128) * 2^(k >> 7): the table's bits plus k << 45 (the integer part
    # lands in the exponent field; the wrap of k_bits' high bits falls off the top).
    scale = _bits_as_double(_EXP_BITS[i] + (k_bits << (52 - _EXP_TABLE_BITS)))
    r2 = r * r
    # exp(r) - 1 + the entry's rounding error: r + r²/2 + r³/6 + r⁴/24 + r⁵/120 + tail.
    poly = _fma(r2, _fma(r, 1.0 / 6.0, 0.5), _EXP_TAIL[i] + r)
    poly = _fma(r2 * r2, _fma(r, 1.0 / 120.0, 1.0 / 24.0), poly)
    result = _fma(scale, poly, scale)
    return 0.0 if x <= _EXP_FLOOR else result


@njit(fastmath=False, cache=True)
def exp_nonpositive(x):  # type: ignore[no-untyped-def]  # pragma: no cover
    """exp(x) of a 1-D float64 array of values <= 0, as the kernels compute it (for tests)."""
    out = np.empty_like(x)
    for j in range(x.shape[0]):
        out[j] = _exp(x[j])
    return out


# -- The row layout (more than COLUMNS_MAX_CLASSES logits a row) ------------------------------

# Row buffers are padded to a multiple of this many entries (the step of the vectorised loops:
# four doubles, two at a time), so that no row ends in the loops' scalar remainder.
_PAD_TO = 8
# The padding's d: exp(scale * d) is exactly 0 for any scale >= 7.1e-148, so the padding adds
# exactly 0 to every sum (e * d, and e * u^j with u = d - mean: u² stays below 1e301, finite).
_PAD = -1e150


@njit(fastmath=False, cache=True, inline="always")
def _padded(k, scale):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The row buffers' length for rows of ``k`` logits at ``exp(scale * d)``: ``k`` rounded up to
    a multiple of _PAD_TO, or ``k`` itself when ``scale`` is too small for the padding's exp to be 0."""
    if scale * _PAD <= _EXP_FLOOR:
        return k + (-k) % _PAD_TO
    return k


@njit(fastmath=False, cache=True, inline="always")
def _row_shifted(row, k, kp, d):  # type: ignore[no-untyped-def]  # pragma: no cover
    """d[:k] = row - max(row) in float64 (each <= 0), d[k:kp] = _PAD; returns max(row)."""
    top = _row_max(row, k)
    for j in range(k):
        d[j] = np.float64(row[j]) - top
    for j in range(k, kp):
        d[j] = _PAD
    return top


@njit(fastmath=False, cache=True, inline="always")
def _row_max(row, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """max(row) in float64, in eight lanes (two vectors: a maximum has no rounding)."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = row[0]
    k8 = k - k % 8
    for j in range(0, k8, 8):
        m0 = max(m0, row[j])
        m1 = max(m1, row[j + 1])
        m2 = max(m2, row[j + 2])
        m3 = max(m3, row[j + 3])
        m4 = max(m4, row[j + 4])
        m5 = max(m5, row[j + 5])
        m6 = max(m6, row[j + 6])
        m7 = max(m7, row[j + 7])
    for j in range(k8, k):
        m0 = max(m0, row[j])
    return np.float64(max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7))))


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
def _row_exp(scale, p, q, bits, d, e, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """e = exp(beta * d) of the row buffer d (see :func:`_row_shifted`), stored, in one vectorised
    loop; returns (Σ e, Σ e·d, Σ exp(d)).

    ``bits`` (a literal at each call site) 0: ``scale`` is beta, and Σ exp(d) is not formed (0).
    1 to _POWER_MAX_BITS: beta = p / q, ``scale`` is 1 / q and max(p, q) has ``bits`` bits;
    v = exp(d / q) gives e = v**p and exp(d) = v**q (:func:`_powers`).
    """
    s0 = 0.0
    s1 = 0.0
    s_one = 0.0
    for j in range(k):
        d_j = d[j]
        e_j = _exp(scale * d_j)
        if bits > 0:
            e_j, e1_j = _powers(e_j, p, q, bits)
            s_one = _sum_add(s_one, e1_j)
        e[j] = e_j
        s0 = _sum_add(s0, e_j)
        s1 = _sum_fma(e_j, d_j, s1)
    return s0, s1, s_one


@njit(fastmath=False, cache=True, inline="always")
def _nll_at_one_plan(mode, p, q):  # type: ignore[no-untyped-def]  # pragma: no cover
    """(whether Σ exp(d) is wanted, the bit count of max(p, q), whether it comes from powers).

    Powers of one exp up to _POWER_MAX_BITS bits; beyond, a second exp costs less than the
    squarings and multiplies (measured, K = 100: 6 bits 2.35 ns a logit, a second exp 2.22), and
    the copies of the loop that are not compiled shorten the first compilation.
    """
    bits = 1
    while (max(p, q) >> bits) > 0:
        bits += 1
    with_one = mode == NLL_AT_ONE_RATIO or mode == NLL_AT_ONE_EXP
    return with_one, bits, mode == NLL_AT_ONE_RATIO and bits <= _POWER_MAX_BITS


@njit(fastmath=False, cache=True, inline="always")
def _ratio_exp(inverse_q, p, q, bits, d, e, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_row_exp` at beta = p / q, specialised on ``bits``, the bit count of max(p, q)
    (1 to _POWER_MAX_BITS).

    The branches are the point: each passes its bit count as a literal, so each inlined
    copy has a fixed number of square-and-multiply steps, unrolled, and vectorises.
    """
    if bits == 1:
        return _row_exp(inverse_q, p, q, 1, d, e, k)
    elif bits == 2:
        return _row_exp(inverse_q, p, q, 2, d, e, k)
    elif bits == 3:
        return _row_exp(inverse_q, p, q, 3, d, e, k)
    elif bits == 4:
        return _row_exp(inverse_q, p, q, 4, d, e, k)
    return _row_exp(inverse_q, p, q, 5, d, e, k)


@njit(fastmath=False, cache=True, inline="always")
def _centred_sums(e, d, mean, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """(Σ e u², Σ e u³, ..., Σ e u⁶) with u = d - mean: centred, so no cancellation. One
    vectorised loop (its five sums split by the vectoriser)."""
    a = b = c = f = g = 0.0
    for j in range(k):
        u = d[j] - mean
        u2 = u * u
        w = e[j] * u2
        a = _sum_add(a, w)
        b = _sum_fma(w, u, b)
        w4 = w * u2
        c = _sum_add(c, w4)
        f = _sum_fma(w4, u, f)
        g = _sum_fma(w4, u2, g)
    return a, b, c, f, g


# -- The block's sums, shared by both layouts -------------------------------------------------

# Per-row statistics, gathered for up to _COLUMN_ROWS rows, then folded into the block's sums
# in row order: rows of a (9, _COLUMN_ROWS) array.
_S0, _S_ONE, _MEAN, _D_LABEL, _M2, _M3, _M4, _M5, _M6 = range(9)
_N_ROW_STATS = 9
# A block's running sums, a tuple (see _fold_rows): NLL, gradient, gradient², k2 ... k6, NLL at
# T = 1, the lowest label's d, the running products of Σe and Σ exp(d), and their row count.
_NEW_TOTALS = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0)


@njit(fastmath=False, cache=True, inline="always")
def _fold_rows(stats, r, beta, with_one, totals):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The block's ``totals`` with rows 0..r-1 of ``stats`` (Σe, Σ exp(d), mean, the label's d
    and the central moment sums m2..m6 of each row) added, in row order.

    First a loop without dependences between rows turns the moments into cumulants (so it
    vectorises, divisions included); then the running sums. The log-sum-exp terms: every
    row's Σe (and Σ exp(d)) is in [1, k] (its largest term is exactly 1), so the product of
    16 of them stays far from overflow and one log of the product replaces 16 logs
    (relative error ~16 ulp of the product: ~1e-16 of the sum).
    """
    for i in range(r):
        # One division, four multiplications (four divisions cost ~2 ns a row).
        inverse = 1.0 / stats[_S0, i]
        mu2 = stats[_M2, i] * inverse
        mu3 = stats[_M3, i] * inverse
        mu4 = stats[_M4, i] * inverse
        stats[_M2, i] = mu2
        stats[_M3, i] = mu3
        stats[_M4, i] = mu4 - 3.0 * mu2 * mu2
        stats[_M5, i] = stats[_M5, i] * inverse - 10.0 * mu3 * mu2
        stats[_M6, i] = stats[_M6, i] * inverse - 15.0 * mu4 * mu2 - 10.0 * mu3 * mu3 + 30.0 * mu2 * mu2 * mu2
    (nll, gradient, gradient_square, k2_sum, k3_sum, k4_sum, k5_sum, k6_sum, nll_one,
     lowest_label, product, product_one, in_product) = totals
    for i in range(r):
        d_label = stats[_D_LABEL, i]
        lowest_label = min(lowest_label, d_label)
        nll -= beta * d_label
        g = stats[_MEAN, i] - d_label
        gradient += g
        gradient_square += g * g
        k2_sum += stats[_M2, i]
        k3_sum += stats[_M3, i]
        k4_sum += stats[_M4, i]
        k5_sum += stats[_M5, i]
        k6_sum += stats[_M6, i]
        product *= stats[_S0, i]
        if with_one:
            nll_one -= d_label
            product_one *= stats[_S_ONE, i]
        in_product += 1
        if in_product == 16:
            nll += math.log(product)
            nll_one += math.log(product_one)
            product = 1.0
            product_one = 1.0
            in_product = 0
    return (nll, gradient, gradient_square, k2_sum, k3_sum, k4_sum, k5_sum, k6_sum, nll_one,
            lowest_label, product, product_one, in_product)


@njit(fastmath=False, cache=True, inline="always")
def _write_expansion(totals, n, mode, max_spread, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """out[:10] = the block's sums (see ``expansion_sums``) from its ``totals``."""
    (nll, gradient, gradient_square, k2_sum, k3_sum, k4_sum, k5_sum, k6_sum, nll_one,
     lowest_label, product, product_one, _) = totals
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
    out[0] = n
    out[1] = nll
    out[2] = gradient
    out[3] = k2_sum
    out[4] = k3_sum
    out[5] = k4_sum
    out[6] = nll_one
    out[7] = k5_sum
    out[8] = k6_sum
    out[9] = gradient_square


@njit(fastmath=False, cache=True, error_model="numpy")
def _expansion_rows(logits, labels, start, stop, beta, mode, p, q):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The block's totals (see :func:`_fold_rows`) over rows [start, stop), one row at a time
    (the row layout)."""
    k = logits.shape[1]
    inverse_q = 1.0 / q
    with_one, bits, powers = _nll_at_one_plan(mode, p, q)
    kp = _padded(k, inverse_q if powers else beta)
    d = np.empty(kp)
    e = np.empty(kp)
    stats = np.empty((_N_ROW_STATS, _COLUMN_ROWS))
    totals = _NEW_TOTALS
    for first in range(start, stop, _COLUMN_ROWS):
        r = min(stop, first + _COLUMN_ROWS) - first
        for i in range(r):
            _row_shifted(logits[first + i], k, kp, d)
            if powers:
                s0, s1, s_one = _ratio_exp(inverse_q, p, q, bits, d, e, kp)
            else:
                s0, s1, s_one = _row_exp(beta, 1, 1, 0, d, e, kp)
                s_one = 1.0
                if with_one:
                    s_one = 0.0
                    for j in range(k):
                        s_one = _sum_add(s_one, _exp(d[j]))
            mean = s1 / s0
            m2, m3, m4, m5, m6 = _centred_sums(e, d, mean, kp)
            stats[_S0, i] = s0
            stats[_S_ONE, i] = s_one
            stats[_MEAN, i] = mean
            stats[_D_LABEL, i] = d[labels[first + i]]
            stats[_M2, i] = m2
            stats[_M3, i] = m3
            stats[_M4, i] = m4
            stats[_M5, i] = m5
            stats[_M6, i] = m6
        totals = _fold_rows(stats, r, beta, with_one, totals)
    return totals


# -- The column layout (at most COLUMNS_MAX_CLASSES logits a row) ------------------------------


@njit(fastmath=False, cache=True, inline="always")
def _load_columns(logits, first, r, k, x, top):  # type: ignore[no-untyped-def]  # pragma: no cover
    """x[j * 64 + i] = logits[first + i, j] in float64 (rows 0..r-1 transposed), and top[i]
    the maximum of row i."""
    for j in range(k):
        for i in range(r):
            x[j * _COLUMN_ROWS + i] = logits[first + i, j]
    for i in range(r):
        top[i] = x[i]
    for j in range(1, k):
        for i in range(r):
            top[i] = max(top[i], x[j * _COLUMN_ROWS + i])


@njit(fastmath=False, cache=True, inline="always")
def _column_exp(x, e, top, s0, s1, s_one, r, k, scale, p, q, bits):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_row_exp` for rows 0..r-1 in the column layout: in place x = d = x - top (per row),
    e = exp(beta * d); s0 = Σe, s1 = Σe·d and (``bits`` > 0) s_one = Σ exp(d) per row."""
    for i in range(r):
        s0[i] = 0.0
        s1[i] = 0.0
        s_one[i] = 0.0
    for j in range(k):
        for i in range(r):
            at = j * _COLUMN_ROWS + i
            d = x[at] - top[i]
            x[at] = d
            e_at = _exp(scale * d)
            if bits > 0:
                e_at, e1_at = _powers(e_at, p, q, bits)
                s_one[i] += e1_at
            e[at] = e_at
            s0[i] += e_at
            s1[i] = _fma(e_at, d, s1[i])


@njit(fastmath=False, cache=True, inline="always")
def _column_ratio(x, e, top, s0, s1, s_one, r, k, inverse_q, p, q, bits):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_column_exp` at beta = p / q, specialised on ``bits`` as :func:`_ratio_exp`."""
    if bits == 1:
        _column_exp(x, e, top, s0, s1, s_one, r, k, inverse_q, p, q, 1)
    elif bits == 2:
        _column_exp(x, e, top, s0, s1, s_one, r, k, inverse_q, p, q, 2)
    elif bits == 3:
        _column_exp(x, e, top, s0, s1, s_one, r, k, inverse_q, p, q, 3)
    elif bits == 4:
        _column_exp(x, e, top, s0, s1, s_one, r, k, inverse_q, p, q, 4)
    else:
        _column_exp(x, e, top, s0, s1, s_one, r, k, inverse_q, p, q, 5)


@njit(fastmath=False, cache=True, inline="always")
def _column_centred_sums(x, e, mean, m2, m3, m4, m5, m6, r, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_centred_sums` of rows 0..r-1 in the column layout (x holding d): m2[i] = Σ e u²,
    ..., m6[i] = Σ e u⁶ with u = d - mean[i]."""
    for i in range(r):
        m2[i] = 0.0
        m3[i] = 0.0
        m4[i] = 0.0
        m5[i] = 0.0
        m6[i] = 0.0
    for j in range(k):
        for i in range(r):
            at = j * _COLUMN_ROWS + i
            u = x[at] - mean[i]
            u2 = u * u
            w = e[at] * u2
            m2[i] += w
            m3[i] = _fma(w, u, m3[i])
            w4 = w * u2
            m4[i] += w4
            m5[i] = _fma(w4, u, m5[i])
            m6[i] = _fma(w4, u2, m6[i])


@njit(fastmath=False, cache=True, error_model="numpy")
def _expansion_columns(logits, labels, start, stop, beta, mode, p, q):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_expansion_rows` in the column layout: 64 rows at a time, every loop down the rows."""
    k = logits.shape[1]
    inverse_q = 1.0 / q
    with_one, bits, powers = _nll_at_one_plan(mode, p, q)
    x = np.empty(_COLUMN_ROWS * k)
    e = np.empty(_COLUMN_ROWS * k)
    top = np.empty(_COLUMN_ROWS)
    stats = np.empty((_N_ROW_STATS, _COLUMN_ROWS))
    s0, s_one, mean = stats[_S0], stats[_S_ONE], stats[_MEAN]
    m2, m3, m4, m5, m6 = stats[_M2], stats[_M3], stats[_M4], stats[_M5], stats[_M6]
    totals = _NEW_TOTALS
    for first in range(start, stop, _COLUMN_ROWS):
        r = min(stop, first + _COLUMN_ROWS) - first
        _load_columns(logits, first, r, k, x, top)
        # mean holds Σe·d until it is divided below.
        if powers:
            _column_ratio(x, e, top, s0, mean, s_one, r, k, inverse_q, p, q, bits)
        else:
            _column_exp(x, e, top, s0, mean, s_one, r, k, beta, 1, 1, 0)
            if with_one:
                for i in range(r):
                    s_one[i] = 0.0
                for j in range(k):
                    for i in range(r):
                        s_one[i] += _exp(x[j * _COLUMN_ROWS + i])
        for i in range(r):
            mean[i] = mean[i] / s0[i]
            stats[_D_LABEL, i] = x[labels[first + i] * _COLUMN_ROWS + i]
        _column_centred_sums(x, e, mean, m2, m3, m4, m5, m6, r, k)
        totals = _fold_rows(stats, r, beta, with_one, totals)
    return totals


# -- The expansion's drivers ------------------------------------------------------------------


@njit(fastmath=False, cache=True, error_model="numpy")
def _expansion_block(logits, labels, start, stop, beta, mode, p, q, max_spread, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """out[:10] = the expansion sums of rows [start, stop) (one block; see ``expansion_sums``).

    Not inlined: both drivers call it once per block, so it is compiled once (inlining its
    body into the parallel driver made the first compilation ~9 times slower). A label's
    logit more than ``max_spread`` below its row's maximum makes the block's NLL NaN.
    """
    if logits.shape[1] <= COLUMNS_MAX_CLASSES:
        totals = _expansion_columns(logits, labels, start, stop, beta, mode, p, q)
    else:
        totals = _expansion_rows(logits, labels, start, stop, beta, mode, p, q)
    _write_expansion(totals, stop - start, mode, max_spread, out)


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
    n_blocks = (logits.shape[0] + block_rows - 1) // block_rows
    partial = np.zeros((n_blocks, 10))
    expansion_blocks(logits, labels, beta, mode, p, q, max_spread, block_rows, 0, partial)
    return _add_blocks(partial)


@njit(fastmath=False, cache=True, error_model="numpy")
def expansion_blocks(logits, labels, beta, mode, p, q, max_spread, block_rows, first_block, partial):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Blocks ``first_block`` onwards into the rows of ``partial``, one a row: a share of
    :func:`expansion_sums`'s blocks, for a driver that runs the shares on threads of its own
    (the kernels compiled ahead of time, :mod:`calibration._native`, which have no parallel
    region) and then adds the blocks in order with :func:`add_blocks`: the same sums, bit for bit.
    """
    n = logits.shape[0]
    for i in range(partial.shape[0]):
        start = (first_block + i) * block_rows
        _expansion_block(logits, labels, start, min(n, start + block_rows), beta, mode, p, q, max_spread, partial[i])


@njit(fastmath=False, cache=True)
def add_blocks(partial):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The blocks' partial sums added in block order (see :func:`expansion_blocks`)."""
    return _add_blocks(partial)


# -- Calibration sums (the evaluation) --------------------------------------------------------


# Per-row statistics of the evaluation, as _S0 ... for the expansion: rows of a
# (5, _COLUMN_ROWS) array, folded into the block's bins and sums by _fold_bins.
_B_S0, _B_SQUARES, _B_D_LABEL, _B_E_LABEL, _B_CORRECT = range(5)
_N_BIN_STATS = 5


@njit(fastmath=False, cache=True, inline="always")
def _fold_bins(stats, r, beta, interior, count, correct_count, confidence_sum, variance_sum, totals):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Put rows 0..r-1 of ``stats`` (Σe, Σe², the label's d and e, whether the first arg-max
    is the label) in their bins, in row order; returns ``totals`` (NLL sum, Brier sum, the
    running product of Σe and its row count: one log per 16 rows, as :func:`_fold_rows`)
    with their NLL and Brier terms added."""
    n_bins = interior.shape[0] + 1
    for i in range(r):
        # The top class has d = 0, so its probability is exactly 1 / s0.
        confidence = 1.0 / stats[_B_S0, i]
        # Brier: sum_k (p_k - [y = k])^2 = sum_k p_k^2 - 2 p_y + 1.
        stats[_B_SQUARES, i] = stats[_B_SQUARES, i] * (confidence * confidence) - 2.0 * (stats[_B_E_LABEL, i] * confidence) + 1.0
        stats[_B_E_LABEL, i] = confidence
    nll, brier, product, in_product = totals
    for i in range(r):
        confidence = stats[_B_E_LABEL, i]
        # Same bin as searchsorted(interior, confidence, side="left"): the number of
        # interior edges strictly below the confidence, from the arithmetic guess.
        m = min(max(int(confidence * n_bins), 0), n_bins - 1)
        while m > 0 and interior[m - 1] >= confidence:
            m -= 1
        while m < n_bins - 1 and interior[m] < confidence:
            m += 1
        count[m] += 1
        confidence_sum[m] += confidence
        variance_sum[m] += confidence * (1.0 - confidence)
        # Without a branch: on a weak model, right or wrong is a coin toss the CPU mispredicts
        # (K = 2: 18 ns a logit with the branch, 6.4 without).
        correct_count[m] += np.int64(stats[_B_CORRECT, i])
        nll -= beta * stats[_B_D_LABEL, i]
        brier += stats[_B_SQUARES, i]
        product *= stats[_B_S0, i]
        in_product += 1
        if in_product == 16:
            nll += math.log(product)
            product = 1.0
            in_product = 0
    return nll, brier, product, in_product


@njit(fastmath=False, cache=True, inline="always")
def _row_exp_squares(d, beta, k):  # type: ignore[no-untyped-def]  # pragma: no cover
    """(Σ e, Σ e², first j with d[j] == 0) with e = exp(beta * d) of the row buffer d (see
    :func:`_row_shifted`): one vectorised loop, nothing stored (the first arg-max, as ``argmax``:
    z - max z == 0 iff z == max z; never a padding entry)."""
    s0 = 0.0
    squares = 0.0
    first = k
    for j in range(k):
        d_j = d[j]
        e_j = _exp(beta * d_j)
        s0 = _sum_add(s0, e_j)
        squares = _sum_fma(e_j, e_j, squares)
        first = min(first, j if d_j == 0.0 else k)
    return s0, squares, first


@njit(fastmath=False, cache=True, error_model="numpy")
def _bin_rows(logits, labels, start, stop, beta, interior, count, correct, confidence_sum, variance_sum):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Rows [start, stop) into the block's bins; returns their sums (see :func:`_fold_bins`).
    One row at a time (the row layout)."""
    k = logits.shape[1]
    kp = _padded(k, beta)
    d = np.empty(kp)
    stats = np.empty((_N_BIN_STATS, _COLUMN_ROWS))
    totals = (0.0, 0.0, 1.0, 0)
    for first in range(start, stop, _COLUMN_ROWS):
        r = min(stop, first + _COLUMN_ROWS) - first
        for i in range(r):
            _row_shifted(logits[first + i], k, kp, d)
            s0, squares, first_top = _row_exp_squares(d, beta, kp)
            label = labels[first + i]
            stats[_B_S0, i] = s0
            stats[_B_SQUARES, i] = squares
            stats[_B_D_LABEL, i] = d[label]
            stats[_B_CORRECT, i] = 1.0 if first_top == label else 0.0
        # The labels' exps for the r rows in one vectorised loop (a scalar exp a row cost ~5 ns).
        for i in range(r):
            stats[_B_E_LABEL, i] = _exp(beta * stats[_B_D_LABEL, i])
        totals = _fold_bins(stats, r, beta, interior, count, correct, confidence_sum, variance_sum, totals)
    return totals


@njit(fastmath=False, cache=True, error_model="numpy")
def _bin_columns(logits, labels, start, stop, beta, interior, count, correct, confidence_sum, variance_sum):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_bin_rows` in the column layout: 64 rows at a time, every loop down the rows."""
    k = logits.shape[1]
    x = np.empty(_COLUMN_ROWS * k)
    top = np.empty(_COLUMN_ROWS)
    first_top = np.empty(_COLUMN_ROWS, dtype=np.int64)
    stats = np.empty((_N_BIN_STATS, _COLUMN_ROWS))
    s0 = stats[_B_S0]
    squares = stats[_B_SQUARES]
    totals = (0.0, 0.0, 1.0, 0)
    for first in range(start, stop, _COLUMN_ROWS):
        r = min(stop, first + _COLUMN_ROWS) - first
        _load_columns(logits, first, r, k, x, top)
        for i in range(r):
            first_top[i] = k
            s0[i] = 0.0
            squares[i] = 0.0
        # The first arg-max, as argmax (the lowest column whose d is 0), in the exp's loop.
        for j in range(k):
            for i in range(r):
                d = x[j * _COLUMN_ROWS + i] - top[i]
                first_top[i] = min(first_top[i], j if d == 0.0 else k)
                e = _exp(beta * d)
                s0[i] += e
                squares[i] = _fma(e, e, squares[i])
        for i in range(r):
            label = labels[first + i]
            d_label = x[label * _COLUMN_ROWS + i] - top[i]
            stats[_B_D_LABEL, i] = d_label
            stats[_B_E_LABEL, i] = _exp(beta * d_label)
            stats[_B_CORRECT, i] = 1.0 if first_top[i] == label else 0.0
        totals = _fold_bins(stats, r, beta, interior, count, correct, confidence_sum, variance_sum, totals)
    return totals


@njit(fastmath=False, cache=True, inline="always")
def _bin_block(logits, labels, beta, interior, block_rows, b, count, correct, confidence, variance, scalars):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Block ``b`` into its bins (``count`` … ``variance``, its rows of the per-block arrays) and
    its NLL and Brier sums (``scalars``)."""
    n, k = logits.shape
    start = b * block_rows
    stop = min(n, start + block_rows)
    if k <= BIN_COLUMNS_MAX_CLASSES:
        nll, brier, product, _ = _bin_columns(logits, labels, start, stop, beta, interior, count, correct, confidence, variance)
    else:
        nll, brier, product, _ = _bin_rows(logits, labels, start, stop, beta, interior, count, correct, confidence, variance)
    scalars[0] = nll + math.log(product)
    scalars[1] = brier


@njit(fastmath=False, cache=True, inline="always")
def _add_bin_blocks(counts, corrects, confidences, variances, scalars):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The blocks' bins and sums added in block order (the same order whatever ran them)."""
    n_blocks, n_bins = counts.shape
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
def calibration_bin_sums(logits, labels, beta, interior, block_rows):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Per-bin count, confidence sum, correct count, Σ q(1-q); NLL and Brier sums."""
    n = logits.shape[0]
    n_bins = interior.shape[0] + 1
    n_blocks = (n + block_rows - 1) // block_rows
    counts = np.zeros((n_blocks, n_bins), dtype=np.int64)
    corrects = np.zeros((n_blocks, n_bins), dtype=np.int64)
    confidences = np.zeros((n_blocks, n_bins))
    variances = np.zeros((n_blocks, n_bins))
    scalars = np.zeros((n_blocks, 2))
    for b in prange(n_blocks):
        _bin_block(logits, labels, beta, interior, block_rows, b, counts[b], corrects[b], confidences[b], variances[b],
                   scalars[b])
    return _add_bin_blocks(counts, corrects, confidences, variances, scalars)


@njit(fastmath=False, cache=True)
def calibration_bin_blocks(logits, labels, beta, interior, block_rows, first_block, counts, corrects, confidences, variances, scalars):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Blocks ``first_block`` onwards into the rows of the per-block arrays: a share of
    :func:`calibration_bin_sums`'s blocks (see :func:`expansion_blocks`)."""
    for i in range(counts.shape[0]):
        _bin_block(logits, labels, beta, interior, block_rows, first_block + i, counts[i], corrects[i], confidences[i],
                   variances[i], scalars[i])


@njit(fastmath=False, cache=True)
def add_bin_blocks(counts, corrects, confidences, variances, scalars):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`calibration_bin_sums`'s per-block results added in block order."""
    return _add_bin_blocks(counts, corrects, confidences, variances, scalars)


# -- Scans for refused rows --------------------------------------------------------------------


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
