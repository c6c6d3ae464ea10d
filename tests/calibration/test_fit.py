"""fit_temperature: analytic values, refusals, bounds, invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from calibration import fit_temperature, negative_log_likelihood
from tests.strategies import fittable_arrays, sample_labels


def _reference_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """A float64 brute-force optimum in log T (slow, tight tolerance)."""
    z = logits.astype(np.float64)
    result = minimize_scalar(
        lambda log_t: negative_log_likelihood(z, labels, temperature=float(np.exp(log_t))),
        bounds=(np.log(0.05), np.log(20.0)),
        method="bounded",
        options={"xatol": 1e-13},
    )
    return float(np.exp(result.x))


def test_known_value_ln9_over_ln4() -> None:
    logits = np.tile([np.log(9.0), 0.0], (10, 1))
    labels = np.array([0] * 8 + [1] * 2)
    fit = fit_temperature(logits, labels)
    assert fit.temperature == pytest.approx(np.log(9.0) / np.log(4.0), rel=1e-6)
    assert fit.at_bound is None
    assert (fit.n, fit.n_classes, fit.bounds, fit.nll_reduction) == (10, 2, (0.05, 20.0), "mean")
    # At T = 1 the model says 0.9 and is right 80% of the time.
    assert fit.nll_before == pytest.approx(-(0.8 * np.log(0.9) + 0.2 * np.log(0.1)), rel=1e-12)
    # At the optimum the confidence is exactly 0.8.
    assert fit.nll_after == pytest.approx(-(0.8 * np.log(0.8) + 0.2 * np.log(0.2)), rel=1e-9)


@pytest.mark.parametrize(("margin", "n_right", "n_total"), [(3.0, 70, 100), (0.5, 9, 10), (4.0, 60, 100), (1.0, 99, 100)])
def test_binary_constant_margin(margin: float, n_right: int, n_total: int) -> None:
    """T = m / ln(a / (1 - a)) for a constant logit gap m and accuracy a > 0.5."""
    logits = np.tile([margin, 0.0], (n_total, 1))
    labels = np.array([0] * n_right + [1] * (n_total - n_right))
    expected = margin / np.log(n_right / (n_total - n_right))
    fit = fit_temperature(logits, labels)
    assert fit.at_bound is None
    assert fit.temperature == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_classes", [2, 7, 100])
def test_matches_float64_optimum(dtype: type, n_classes: int) -> None:
    rng = np.random.default_rng(n_classes)
    z = rng.normal(scale=2.0, size=(3000, n_classes))
    labels = sample_labels(rng, z / 1.7)
    logits = z.astype(dtype)
    fit = fit_temperature(logits, labels)
    assert fit.temperature == pytest.approx(_reference_temperature(logits, labels), rel=1e-6)
    assert fit.nll_after == pytest.approx(negative_log_likelihood(logits, labels, temperature=fit.temperature), rel=1e-9)
    assert fit.nll_before == pytest.approx(negative_log_likelihood(logits, labels), rel=1e-12)


def test_large_set_uses_warm_start_and_stays_exact() -> None:
    rng = np.random.default_rng(7)
    z = rng.normal(size=(60_000, 10)).astype(np.float32)
    labels = sample_labels(rng, z.astype(np.float64) * 2.5)
    fit = fit_temperature(2.5 * 2.0 * z, labels)  # served twice too sharp: T ~ 2
    assert fit.temperature == pytest.approx(_reference_temperature(2.5 * 2.0 * z, labels), rel=1e-6)
    assert 1.8 < fit.temperature < 2.2


def test_extreme_logits_do_not_overflow() -> None:
    rng = np.random.default_rng(3)
    z = rng.uniform(-1e4, 1e4, size=(500, 5))
    labels = np.where(rng.random(500) < 0.7, z.argmax(axis=1), rng.integers(0, 5, 500))
    fit = fit_temperature(z, labels)
    assert np.isfinite(fit.temperature) and np.isfinite(fit.nll_after) and np.isfinite(fit.nll_before)
    assert fit.nll_after <= fit.nll_before


def test_zero_error_set_is_flagged_at_lower_bound() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(50, 4))
    fit = fit_temperature(logits, logits.argmax(axis=1))
    assert fit.at_bound == "lower"
    assert fit.temperature == pytest.approx(0.05)


def test_labels_on_the_least_likely_class_hit_the_upper_bound() -> None:
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(60, 3))
    fit = fit_temperature(logits, logits.argmin(axis=1))
    assert fit.at_bound == "upper"
    assert fit.temperature == pytest.approx(20.0)


def test_custom_bounds_are_respected_and_reported() -> None:
    logits = np.tile([np.log(9.0), 0.0], (10, 1))
    labels = np.array([0] * 8 + [1] * 2)
    fit = fit_temperature(logits, labels, bounds=(0.5, 1.2))
    assert (fit.temperature, fit.at_bound, fit.bounds) == (pytest.approx(1.2), "upper", (0.5, 1.2))


def test_constant_logits_keep_t_one() -> None:
    fit = fit_temperature(np.zeros((5, 3)), [0, 1, 2, 0, 1])
    assert fit.temperature == 1.0 and fit.at_bound is None
    assert fit.nll_after == pytest.approx(np.log(3.0))


def test_binary_right_less_than_half_is_refused() -> None:
    logits = np.tile([2.0, 0.0], (10, 1))
    labels = np.array([0] * 4 + [1] * 6)
    with pytest.raises(ValueError, match=r"4 of 10.*no positive temperature.*inverted label mapping"):
        fit_temperature(logits, labels)


@pytest.mark.parametrize(
    ("logits", "labels", "bounds", "error", "match"),
    [
        ([[np.nan, 1.0], [0.0, 1.0]], [0, 1], (0.05, 20), ValueError, r"logits row 0 contains nan"),
        ([[1.0], [0.0]], [0, 0], (0.05, 20), ValueError, r"at least 2 classes"),
        (np.zeros((0, 3)), [], (0.05, 20), ValueError, r"empty"),
        ([[1.0, 0.0]], [2], (0.05, 20), ValueError, r"labels row 0 is 2"),
        ([[1.0, 0.0]], [0.5], (0.05, 20), ValueError, r"labels row 0 is 0.5"),
        ([[1.0, 0.0]], [0, 1], (0.05, 20), ValueError, r"labels has 2 entries but logits have 1 rows"),
        ([[1.0, 0.0]], [0], (2.0, 1.0), ValueError, r"0 < lower < upper"),
        ([[1.0, 0.0]], [0], (0.0, 1.0), ValueError, r"0 < lower < upper"),
        ([["a", "b"]], [0], (0.05, 20), TypeError, r"logits must hold floats"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(
    logits: object, labels: object, bounds: tuple[float, float], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        fit_temperature(logits, labels, bounds=bounds)  # type: ignore[arg-type]


@given(fittable_arrays())
def test_nll_after_never_exceeds_nll_before(data: tuple[np.ndarray, np.ndarray]) -> None:
    logits, labels = data
    fit = fit_temperature(logits, labels)
    assert fit.nll_after <= fit.nll_before + 1e-12
    assert fit.bounds[0] <= fit.temperature <= fit.bounds[1]


@given(fittable_arrays(), st.integers(0, 2**32 - 1), st.floats(-50.0, 50.0))
def test_fit_ignores_row_order_and_row_shifts(data: tuple[np.ndarray, np.ndarray], seed: int, shift: float) -> None:
    logits, labels = data
    fit = fit_temperature(logits, labels)
    rng = np.random.default_rng(seed)
    order = rng.permutation(logits.shape[0])
    shifts = rng.uniform(-abs(shift), abs(shift) + 1e-9, size=(logits.shape[0], 1))
    moved = fit_temperature(logits[order] + shifts[order], labels[order])
    assert moved.temperature == pytest.approx(fit.temperature, rel=1e-7)
    assert moved.at_bound == fit.at_bound


@pytest.mark.parametrize("n_rows", [20, 200])
def test_zero_error_constant_margin_is_flagged_at_lower_bound(n_rows: int) -> None:
    """Regression: the NLL keeps falling as 1/T grows; a small step in 1/T is not convergence."""
    fit = fit_temperature(np.tile([3.0, 0.0], (n_rows, 1)), np.zeros(n_rows, dtype=int))
    assert (fit.temperature, fit.at_bound) == (pytest.approx(0.05), "lower")


@pytest.mark.parametrize("name", ["cifar10_wrn16-4_netcal", "cifar100_densenet-bc-100_netcal"])
def test_real_logits_fit_the_float64_optimum(real_logits_dir: object, name: str) -> None:
    """Regression: a stopping rule on the step size alone left cifar10_wrn16-4 1.8e-6 off."""
    data = np.load(f"{real_logits_dir}/{name}.npz")
    fit = fit_temperature(data["logits"], data["labels"])
    assert fit.temperature == pytest.approx(_reference_temperature(data["logits"], data["labels"]), rel=1e-7)


def _check_logits_message(logits: np.ndarray) -> str:
    from calibration._validation import check_logits

    with pytest.raises(ValueError) as info:
        check_logits(logits)
    return str(info.value)


def test_non_finite_logits_in_a_large_set_are_refused_as_check_logits_refuses_them() -> None:
    # Large sets fold the finiteness scan into the fit's passes: the error must be the same,
    # wherever the bad value sits (in the warm-start subsample or not, first or last row).
    rng = np.random.default_rng(21)
    n, k = 20_000, 50
    z = rng.standard_normal((n, k))
    labels = sample_labels(rng, z)
    base = (2.5 * z).astype(np.float32)
    cases = [(0, 0, np.nan), (1, 3, np.inf), (n // 2 + 1, 49, -np.inf), (n - 1, 10, np.nan), (400, 0, np.inf)]
    for row, column, value in cases:
        logits = base.copy()
        logits[row, column] = value
        logits[-1, 0] = np.nan  # a later bad row: the first one is named
        with pytest.raises(ValueError) as info:
            fit_temperature(logits, labels)
        assert str(info.value) == _check_logits_message(logits) == f"logits row {row} contains {value}; every logit must be finite"
    all_minus_inf = base.copy()
    all_minus_inf[123] = -np.inf
    with pytest.raises(ValueError, match=r"^logits row 123 contains -inf; every logit must be finite$"):
        fit_temperature(all_minus_inf, labels)
    # The logits' error comes before the labels' and the bounds', as before.
    bad = base.copy()
    bad[7, 7] = np.nan
    with pytest.raises(ValueError, match=r"logits row 7 contains nan"):
        fit_temperature(bad, np.full(n, k))
    with pytest.raises(ValueError, match=r"logits row 7 contains nan"):
        fit_temperature(bad, labels, bounds=(2.0, 1.0))
    # Finite data still fits (the folded check costs nothing then).
    assert fit_temperature(base, labels).at_bound is None


def _full_passes(monkeypatch: pytest.MonkeyPatch, logits: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
    """Fit, counting the passes over the whole input (warm-start passes read a subsample)."""
    import calibration._fit as fit_module

    passes = []
    original = fit_module.nll_expansion_sums

    def counting(part: np.ndarray, *args: object, **kwargs: object) -> np.ndarray:
        passes.append(part.shape[0] == logits.shape[0])
        return original(part, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fit_module, "nll_expansion_sums", counting)
    fit = fit_temperature(logits, labels)
    monkeypatch.undo()
    return fit.temperature, sum(passes)


# The two large shapes (tens of seconds each, mostly the float64 brute-force reference) run in the
# whole suite only; 10,000 x 100 and the three CIFAR-100 files below keep the policy in the fast tier.
@pytest.mark.parametrize(("n", "k"), [pytest.param(200_000, 100, marks=pytest.mark.slow),
                                      pytest.param(20_000, 1_000, marks=pytest.mark.slow), (10_000, 100)])
def test_one_full_pass_on_synthetic_shapes(monkeypatch: pytest.MonkeyPatch, n: int, k: int) -> None:
    """The warm-start policy: from 1,000 sample rows up, the full data is read once (no timing)."""
    rng = np.random.default_rng(n + k)
    z = rng.standard_normal((n, k))
    labels = sample_labels(rng, z)
    logits = (2.5 * z).astype(np.float32)
    temperature, passes = _full_passes(monkeypatch, logits, labels)
    assert passes == 1
    assert temperature == pytest.approx(_reference_temperature(logits, labels), rel=1e-7)


@pytest.mark.parametrize("name", ["cifar100_densenet-bc-100_netcal", "cifar100_lenet5_netcal", "cifar100_wrn16-4_netcal"])
def test_one_full_pass_on_the_real_cifar100_files(monkeypatch: pytest.MonkeyPatch, real_logits_dir: object, name: str) -> None:
    """10,000 rows take a 1,000-row warm start (3 full passes from T = 1 before), and stay exact."""
    data = np.load(f"{real_logits_dir}/{name}.npz")
    temperature, passes = _full_passes(monkeypatch, data["logits"], data["labels"])
    assert passes == 1
    assert temperature == pytest.approx(_reference_temperature(data["logits"], data["labels"]), rel=1e-7)


def _subsample_reads(monkeypatch: pytest.MonkeyPatch, logits: np.ndarray, labels: np.ndarray) -> list[int]:
    """Fit, recording the rows of every pass (full passes read all of them)."""
    import calibration._fit as fit_module

    rows: list[int] = []
    original = fit_module.nll_expansion_sums

    def recording(part: np.ndarray, *args: object, **kwargs: object) -> np.ndarray:
        rows.append(part.shape[0])
        return original(part, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fit_module, "nll_expansion_sums", recording)
    fit_temperature(logits, labels)
    monkeypatch.undo()
    return rows


def test_the_fine_warm_start_stage_runs_only_when_the_coarse_one_is_not_provably_close(
    monkeypatch: pytest.MonkeyPatch, real_logits_dir: object
) -> None:
    """Synthetic T = 2.5 data (a wide convergence radius): a quarter of the 2% sample (1,000
    rows) read twice, then the full pass. The CIFAR-100 DenseNet file (a narrow radius): the
    whole 1,000-row sample is read too, once; the full data once in both."""
    rng = np.random.default_rng(21)
    z = rng.standard_normal((200_000, 100))
    logits = (2.5 * z).astype(np.float32)
    rows = _subsample_reads(monkeypatch, logits, sample_labels(rng, z))
    assert rows == [1_000, 1_000, 200_000]

    data = np.load(f"{real_logits_dir}/cifar100_densenet-bc-100_netcal.npz")
    rows = _subsample_reads(monkeypatch, data["logits"], data["labels"])
    # The coarse quarter twice, the sample once (in bounded pieces: it is 10% of the input's
    # bytes), the full data once.
    assert rows[:2] == [250, 250] and sum(rows[2:-1]) == 1_000 and rows[-1] == 10_000


def test_the_standard_error_is_the_spread_of_optima_over_disjoint_samples() -> None:
    """minimise_nll's standard error of 1/T (row gradients' SD / sqrt(n) / curvature) against
    the SD of the optima of 40 disjoint strided samples of 5,000 rows: the same to sampling
    error (the SD of an SD from 40 draws is ~11%)."""
    from calibration._fit import _expansion, minimise_nll

    rng = np.random.default_rng(22)
    z = rng.standard_normal((200_000, 30))
    logits, labels = 2.5 * z, sample_labels(rng, z)
    optima, errors = [], []
    for offset in range(40):
        part = minimise_nll(_expansion(logits[offset::40], labels[offset::40], at_one=False), (0.05, 20.0))
        optima.append(part.inverse_temperature)
        errors.append(part.standard_error)
    assert 0.7 < np.std(optima, ddof=1) / np.mean(errors) < 1.4

    # And it is the formula, from the sums at the last expansion point.
    part = minimise_nll(_expansion(logits[:5_000], labels[:5_000], at_one=False), (0.05, 20.0))
    d = logits[:5_000] - logits[:5_000].max(axis=1, keepdims=True)
    p = np.exp(part.expanded_at * d)
    p /= p.sum(axis=1, keepdims=True)
    gradients = (p * d).sum(axis=1) - d[np.arange(5_000), labels[:5_000]]
    curvature = ((p * d * d).sum(axis=1) - (p * d).sum(axis=1) ** 2).mean()
    assert part.standard_error == pytest.approx(np.std(gradients) / np.sqrt(5_000) / curvature, rel=1e-9)
