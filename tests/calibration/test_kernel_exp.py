"""The compiled kernels' exp: its accuracy over every argument the kernels give it, its
underflow, and that the loops calling it are vector code.

The kernels call ``exp(beta * d)`` with ``d = z - max z <= 0`` and ``beta = 1/T`` (at most 20,
the default bounds' 1/0.05, or a ratio p/q of small integers, ``d / q``): arguments from 0
down to -20 × the largest accepted spread (1e100), and -inf or NaN for non-finite logits.
"""

from __future__ import annotations

import decimal
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numba import njit

from calibration import _kernels_numba as kernels
from calibration._kernels import MAX_LOGIT_SPREAD
from calibration._kernels_numba import exp_nonpositive

# The bound the module's docstring states: 0.5 ulp for the final rounding, < 0.02 ulp for the
# table entry, the reduction and the polynomial (largest measured: 0.5093 over 4e7 arguments).
MAX_ULP = 0.52
FLOOR = -708.0  # at and below: exactly 0
LONG_DOUBLE_IS_WIDER = np.finfo(np.longdouble).nmant >= 63


def _ulp_errors(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """|ours - exp(x)| in ulps of the correctly rounded result, against the 64-bit-mantissa exp."""
    exact = np.exp(x.astype(np.longdouble))
    ulp = np.spacing(exact.astype(np.float64)).astype(np.longdouble)
    return np.asarray(np.abs(exp_nonpositive(x).astype(np.longdouble) - exact) / ulp, dtype=np.float64)


def _decimal_ulp_error(x: float) -> float:
    with decimal.localcontext() as context:
        context.prec = 50
        exact = decimal.Decimal(x).exp()
        ulp = decimal.Decimal(float(np.spacing(float(exact))))
        got = decimal.Decimal(float(exp_nonpositive(np.array([x]))[0]))
        return float(abs(got - exact) / ulp)


@pytest.mark.skipif(not LONG_DOUBLE_IS_WIDER, reason="np.longdouble is float64 here: no wider reference")
def test_the_exp_is_within_its_bound_over_the_whole_range_the_kernels_see() -> None:
    rng = np.random.default_rng(23)
    # Every 2^(k/128) step of the reduction, with its neighbours and the rounding boundaries
    # half a step away (where k changes), across the range.
    steps = np.arange(-130_742, 1) * (np.log(2.0) / 128)
    x = np.concatenate([
        -np.linspace(0.0, 707.999, 400_001),
        -np.geomspace(1e-300, 707.999, 200_000),  # near 0, where exp is 1 - tiny
        -rng.uniform(0.0, 708.0, 400_000),
        steps, np.nextafter(steps, 0.0), np.nextafter(steps, -np.inf), steps + np.log(2.0) / 256,
    ])
    x = x[(x > FLOOR) & (x <= 0.0)]
    errors = _ulp_errors(x)
    assert errors.max() <= MAX_ULP, (errors.max(), x[errors.argmax()])


@given(st.floats(min_value=-707.9999, max_value=0.0, allow_nan=False))
def test_the_exp_is_within_its_bound_of_the_50_digit_value(x: float) -> None:
    assert _decimal_ulp_error(x) <= MAX_ULP


def test_the_exp_is_within_an_ulp_of_numpys() -> None:
    x = -np.concatenate([np.geomspace(1e-300, 707.9, 50_000), np.linspace(0.0, 707.9, 50_000)])
    got, want = exp_nonpositive(x), np.exp(x)
    assert np.all(np.abs(got - want) <= np.spacing(want))


def test_below_the_floor_the_exp_is_exactly_positive_zero_and_above_it_a_normal_number() -> None:
    spread = 20.0 * MAX_LOGIT_SPREAD  # beta * d at the default bounds and the largest spread
    below = np.array([FLOOR, np.nextafter(FLOOR, -np.inf), -708.4, -745.2, -1e4, -spread, -1.7e308, -np.inf])
    got = exp_nonpositive(below)
    assert np.all(got == 0.0) and not np.any(np.signbit(got))
    above = np.array([np.nextafter(FLOOR, 0.0), -707.9, -700.0])
    got = exp_nonpositive(above)
    assert np.all(got >= np.finfo(np.float64).smallest_normal)
    np.testing.assert_array_max_ulp(got, np.exp(above), maxulp=1)


def test_zero_gives_exactly_one_and_nan_stays_nan() -> None:
    got = exp_nonpositive(np.array([0.0, -0.0, np.nan]))
    assert got[0] == 1.0 and got[1] == 1.0
    # A NaN argument (a NaN logit) gives NaN (it gave 0 before: the kernels still saw the NaN
    # through e * d; now e carries it too).
    assert np.isnan(got[2])


# -- The loops that call it are vector code --------------------------------------------------

# Fresh (uncached) compilations of the kernels' inner loops: numba shows no assembly for
# code loaded from its cache.


@njit(fastmath=False)
def _row_loops(row, d, e):  # type: ignore[no-untyped-def]
    k = row.shape[0]
    kernels._row_shifted(row, k, k, d)
    s0, s1, _ = kernels._row_exp(0.4, 1, 1, 0, d, e, k)
    a, b, c, f, g = kernels._centred_sums(e, d, s1 / s0, k)
    return s0 + a + b + c + f + g


@njit(fastmath=False)
def _ratio_loop(row, d, e):  # type: ignore[no-untyped-def]
    kernels._row_shifted(row, row.shape[0], row.shape[0], d)
    s0, s1, s_one = kernels._row_exp(0.2, 2, 5, 3, d, e, row.shape[0])
    return s0 + s1 + s_one


@njit(fastmath=False)
def _column_loops(x, e, top, sums):  # type: ignore[no-untyped-def]
    kernels._column_exp(x, e, top, sums[0], sums[1], sums[7], 64, 3, 0.4, 1, 1, 0)
    kernels._column_centred_sums(x, e, sums[1], sums[2], sums[3], sums[4], sums[5], sums[6], 64, 3)


@njit(fastmath=False)
def _evaluation_loop(row, d):  # type: ignore[no-untyped-def]
    kernels._row_shifted(row, row.shape[0], row.shape[0], d)
    return kernels._row_exp_squares(d, 0.4, row.shape[0])


def _assembly(function: Any, *arguments: Any) -> str:
    function(*arguments)
    return "\n".join(function.inspect_asm().values())


def _host_has_fma_vectors() -> bool:
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    return bool(features.get("avx2")) and bool(features.get("fma"))


@pytest.mark.skipif(not _host_has_fma_vectors(), reason="no AVX2 and FMA on this CPU: no 4-wide vectors to look for")
def test_the_loops_that_call_the_exp_are_vector_code_without_calls() -> None:
    row = np.linspace(-3.0, 0.0, 100, dtype=np.float32)
    d, e = np.empty(100), np.empty(100)
    column = np.linspace(-3.0, 0.0, 64 * 3)
    listings = {
        "row exp and moments": _assembly(_row_loops, row, d, e),
        "ratio powers": _assembly(_ratio_loop, row, d, e),
        "columns": _assembly(_column_loops, column, np.empty_like(column), np.zeros(64), np.zeros((8, 64))),
        "evaluation": _assembly(_evaluation_loop, row, d),
    }
    for name, listing in listings.items():
        # Packed fused multiply-adds on 256- or 512-bit registers: the exp's polynomial, vectorised.
        assert re.search(r"vfmadd\d+pd\s+%[yz]mm", listing), name
        # No call to libm's scalar exp anywhere in the loop.
        assert not re.search(r"\b(exp|__exp_finite)\b", listing), name
