"""Bad input to the numeric core: finite logits too far apart for float64 get correct numbers
or a refusal naming the rule, never a NaN, an internal error or a bare numpy warning."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from calibration import evaluate, expected_calibration_error, fit_temperature
from calibration._kernels import (
    COMPILED_MIN_ELEMENTS,
    MAX_LOGIT_SPREAD,
    first_nonfinite_row,
    first_refused_row,
    nll_expansion_sums,
)

SPREAD_RULE = "the logits within a row must span at most 1e+100 (max - min)"
# Below COMPILED_MIN_ELEMENTS (numpy, checked up front) and above it (numba, the check folded
# into the fit's pass) with K > 2.
SIZES = (200, COMPILED_MIN_ELEMENTS // 10 + 1_000)
PUBLIC: dict[str, Callable[..., Any]] = {
    "fit_temperature": fit_temperature,
    "evaluate": evaluate,
    "expected_calibration_error": expected_calibration_error,
}


@pytest.fixture(autouse=True)
def _warnings_are_errors() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def _data(n: int, scale: float, seed: int = 0) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 10)) * scale, rng.integers(0, 10, n).astype(np.intp)


@pytest.mark.parametrize("name", PUBLIC)
@pytest.mark.parametrize("n", SIZES)
def test_logits_whose_spread_overflows_float64_are_refused(name: str, n: int) -> None:
    logits, labels = _data(n, 1.0)
    logits[n // 2, :2] = [1.7e308, -1.7e308]  # max - min overflows
    with pytest.raises(ValueError, match=rf"^logits row {n // 2}: its logits span more than float64 holds") as caught:
        PUBLIC[name](logits, labels)
    assert SPREAD_RULE in str(caught.value)


@pytest.mark.parametrize("name", PUBLIC)
@pytest.mark.parametrize("n", SIZES)
def test_standard_normal_logits_times_1e300_are_refused(name: str, n: int) -> None:
    logits, labels = _data(n, 1e300)
    with pytest.raises(ValueError, match=r"^logits row 0: its logits span \d\.\d+e\+300; ") as caught:
        PUBLIC[name](logits, labels)
    assert SPREAD_RULE in str(caught.value)


@pytest.mark.parametrize("n", SIZES)
def test_one_row_beyond_the_limit_is_named_wherever_it_is(n: int) -> None:
    logits, labels = _data(n, 1.0, seed=1)
    row = n - 3  # not in the fit's warm-start sample: the full pass finds it
    logits[row, labels[row]] = -2 * MAX_LOGIT_SPREAD
    for function in PUBLIC.values():
        with pytest.raises(ValueError, match=rf"^logits row {row}: its logits span 2e\+100; "):
            function(logits, labels)


@pytest.mark.parametrize("n", SIZES)
def test_large_spreads_within_the_limit_get_correct_numbers(n: int) -> None:
    # Spreads near 1e99: softmax is one-hot at every T in the bounds, so the mean NLL is
    # exactly mean(max z - z_y) / T, smallest at the upper bound T = 20.
    logits, labels = _data(n, 1e98)
    exact = float(np.mean(logits.max(axis=1) - logits[np.arange(n), labels]))
    fit = fit_temperature(logits, labels)
    assert (fit.temperature, fit.at_bound) == (20.0, "upper")
    assert fit.nll_before == pytest.approx(exact, rel=1e-12)
    assert fit.nll_after == pytest.approx(exact / 20.0, rel=1e-12)
    report = evaluate(logits, labels)
    assert report.nll == pytest.approx(exact, rel=1e-12)
    assert np.isfinite([report.ece, report.brier, report.mce]).all()
    assert expected_calibration_error(logits, labels) == pytest.approx(report.ece)


@pytest.mark.parametrize("compiled", [False, True])
def test_a_label_too_far_below_its_rows_maximum_makes_the_expansion_non_finite(compiled: bool) -> None:
    # fit_temperature folds the spread rule into its passes on this guarantee.
    logits, labels = _data(300, 1.0, seed=2)
    assert np.isfinite(nll_expansion_sums(logits, labels, 0.5, compiled=compiled)).all()
    logits[7, labels[7]] = -1.5 * MAX_LOGIT_SPREAD
    assert not np.isfinite(nll_expansion_sums(logits, labels, 0.5, compiled=compiled)).all()
    logits[7, labels[7]] = 1.7e308
    logits[7, (labels[7] + 1) % 10] = -1.7e308  # max - min overflows, the label on top
    assert not np.isfinite(nll_expansion_sums(logits, labels, 0.5, compiled=compiled)).all()


@pytest.mark.parametrize("n", [10, COMPILED_MIN_ELEMENTS // 50 + 7])
def test_first_refused_row_on_both_paths(n: int) -> None:
    for dtype in (np.float32, np.float64):
        logits = _data(n, 1.0, seed=3)[0].astype(dtype)
        assert first_refused_row(logits) == -1
        if dtype == np.float64:
            logits[n - 1, 4] = 2 * MAX_LOGIT_SPREAD
            assert first_refused_row(logits) == n - 1
            assert first_nonfinite_row(logits) == -1  # finite: only the spread rule refuses it
        # A limit below float32's own range is still checked on float32 (no finite-only shortcut).
        assert first_refused_row(logits, 1e-3) == 0
        logits[n // 2, 1] = np.nan
        assert first_refused_row(logits) == first_nonfinite_row(logits) == n // 2


def test_bounds_that_make_the_sums_overflow_are_refused_not_searched() -> None:
    logits, labels = _data(200, 1e99)
    # Bounds this far from 1 are refused before the search (no T that small is in use).
    with pytest.raises(ValueError, match=r"bounds must satisfy 1e-10 <= lower < upper <= 1e\+10"):
        fit_temperature(logits, labels, bounds=(1e-260, 1e-250))
    # Within the limits, the extremes of the spread rule still fit: the sums stay finite.
    for bounds in ((1e-10, 1e-9), (1e9, 1e10)):
        assert bounds[0] <= fit_temperature(logits, labels, bounds=bounds).temperature <= bounds[1]
