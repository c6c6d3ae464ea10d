"""A check's shift diagnosis on arrays in memory: monitoring.check_version on a WindowInMemory."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from calibration import ReferencePriors, TemperatureStats, holm_levels
from monitoring import (
    DEFAULT_POLICY,
    CheckOutcome,
    CheckReference,
    CheckState,
    ConfidenceProfile,
    DriftPolicy,
    DriftReference,
    DriftReport,
    WindowInMemory,
    check_version,
    read_as_family,
)


def _rows(priors: list[float], n: int, rng: np.random.Generator, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A calibrated model (x | y ~ N(2 e_y, I), logits 2x + log π exact for π uniform), times ``scale``."""
    k = len(priors)
    labels = rng.choice(k, size=n, p=priors)
    x = rng.normal(size=(n, k))
    x[np.arange(n), labels] += 2.0
    return scale * 2.0 * x, labels


def _reference(logits: np.ndarray, labels: np.ndarray) -> CheckReference:
    drift = DriftReference.of(0.01, ece_interval=(0.0, 0.02), temperature_stats=TemperatureStats.from_logits(logits, labels))
    return CheckReference(drift, priors=ReferencePriors.from_logits(logits, labels),
                          profile=ConfidenceProfile.from_logits(logits, labels), accuracy_floor=0.5)


def _checked(window: tuple[np.ndarray, np.ndarray], reference: CheckReference, *, policy: DriftPolicy = DEFAULT_POLICY,
             served_logits: np.ndarray | None = None) -> CheckOutcome:
    store = WindowInMemory(*window, temperature=1.0, served_logits=served_logits)
    return check_version(store, store.query(), reference, CheckState(), policy, store.query().end, stream=store)


def _check(window: tuple[np.ndarray, np.ndarray], **extra: object) -> DriftReport:
    report = _checked(window, _reference(*_rows([0.25] * 4, 5_000, np.random.default_rng(0))), **extra).report  # type: ignore[arg-type]
    assert report is not None and report.diagnosis is not None and report.prior_test is not None
    return report


def test_a_labelled_calibration_drift_is_confirmed_though_the_priors_did_not_move() -> None:
    check = _check(_rows([0.25] * 4, 2_000, np.random.default_rng(1), scale=1.5))
    diagnosis = check.diagnosis
    assert diagnosis is not None
    assert (diagnosis.kind, diagnosis.fix, diagnosis.priors_moved) == ("calibration_drift", "temperature_refit", False)
    # The window is labelled: the verdict rests on its labels (the re-weighting's gain is measured
    # on them only when the priors moved, as on every check).
    assert diagnosis.confirmed and check.n == 2_000 and diagnosis.reweighted_tests_fired is None


def test_served_rows_alone_carry_the_prior_shift() -> None:
    rng = np.random.default_rng(2)
    labelled = _rows([0.25] * 4, 600, rng)
    served, _ = _rows([0.55, 0.15, 0.15, 0.15], 3_000, rng)
    outcome = _checked(labelled, _reference(*_rows([0.25] * 4, 5_000, np.random.default_rng(0))), served_logits=served)
    check = outcome.report
    assert check is not None and check.prior_test is not None and check.diagnosis is not None
    assert outcome.scan is not None and outcome.scan.served_priors is not None
    assert outcome.scan.served_priors.n == 3_000 and check.prior_test.fired
    assert check.diagnosis.priors == pytest.approx([0.55, 0.15, 0.15, 0.15], abs=0.05)


def test_a_window_of_another_k_is_refused() -> None:
    with pytest.raises(ValueError, match="the window has 3 classes and the reference priors 4"):
        _check(_rows([1 / 3] * 3, 600, np.random.default_rng(3)))


def test_unchanged_windows_are_no_change_at_the_family_level() -> None:
    # "No change" needs the prior test and the confidence test quiet at once. 300 windows of 500
    # rows from a calibrated model, each against its own reference of 2,000 rows (the level is over
    # both samples), at diagnosis_level 0.1 (large, for the Monte Carlo error): the two tests read
    # each at 0.1 called ~19 % of them a shift (one test's false alarms added to the other's); read
    # as one Holm family, at most the level.
    level, windows = 0.1, 300
    policy = DriftPolicy(diagnosis_level=level, confidence_shift_level=level)
    rng = np.random.default_rng(40)
    shifts = apart = 0
    for _ in range(windows):
        reference = _reference(*_rows([0.25] * 4, 2_000, rng))
        check = _checked(_rows([0.25] * 4, 500, rng), reference, policy=policy).report
        assert check is not None and check.diagnosis is not None and check.prior_test is not None
        assert check.early_warning is not None
        shifts += check.diagnosis.kind not in ("no_change", "undetermined")
        apart += check.prior_test.p_value < level or check.early_warning.shifted
    assert shifts / windows <= level + 3 * math.sqrt(level * (1 - level) / windows), (shifts, apart)  # 0.152
    assert apart > shifts, (shifts, apart)  # the separate reading: what the family level removes


def test_holm_reads_the_smaller_p_value_at_half_the_level() -> None:
    assert holm_levels([0.004, 0.3], 0.01) == (0.005, 0.01)
    assert holm_levels([0.3, 0.004], 0.01) == (0.01, 0.005)
    assert holm_levels([0.004, 0.009], 0.01) == (0.005, 0.01)  # both fire
    assert holm_levels([0.006, 0.009], 0.01) == (0.005, 0.005)  # neither: 0.006 >= 0.005
    assert holm_levels([0.02, 0.001, 0.004], 0.01) == pytest.approx((0.01, 0.01 / 3, 0.005))  # the third read at 0.01
    assert holm_levels([0.008, math.nan], 0.01) == (0.01, pytest.approx(math.nan, nan_ok=True))


def test_weighted_holm_orders_by_p_over_weight_and_keeps_the_family_level() -> None:
    weights = [0.9, 0.1]
    assert holm_levels([0.008, 0.3], 0.01, weights=weights) == pytest.approx((0.009, 0.01))  # first, fires
    assert holm_levels([0.3, 0.0005], 0.01, weights=weights) == pytest.approx((0.01, 0.001))  # 0.0005 / 0.1 first
    # p / w orders the steps: 0.0008 / 0.1 = 0.008 < 0.0095 / 0.9; the second is then read at 0.01.
    assert holm_levels([0.0095, 0.0008], 0.01, weights=weights) == pytest.approx((0.01, 0.001))
    assert holm_levels([0.0095, 0.002], 0.01, weights=weights) == pytest.approx((0.009, 0.001))  # neither fires
    assert holm_levels([math.nan, 0.3], 0.01, weights=weights)[1] == pytest.approx(0.01)  # alone: the whole level
    assert holm_levels([0.004, 0.3], 0.01, weights=[1, 1]) == holm_levels([0.004, 0.3], 0.01)
    with pytest.raises(ValueError, match="weights must be one finite number > 0 per p-value"):
        holm_levels([0.004, 0.3], 0.01, weights=[1.0, 0.0])
    # The family's level by simulation: uniform independent p-values, any test fired.
    rng = np.random.default_rng(0)
    p = rng.random((20_000, 2))
    fired = np.array([any(v < level for v, level in zip(row, holm_levels(row, 0.05, weights=weights), strict=True))
                      for row in p])
    assert fired.mean() == pytest.approx(0.05, abs=3 * math.sqrt(0.05 * 0.95 / 20_000))


def test_the_family_reads_the_prior_test_first_at_most_of_the_level() -> None:
    # The prior test names the verdict that acts (a label shift): it is first read at 0.9 of the
    # family's level, the confidence test at 0.1 of it (weighted Holm); an equal split read the
    # prior test at 0.005 whenever the confidences were quiet.
    check = _check(_rows([0.25] * 4, 2_000, np.random.default_rng(5)))
    assert check.prior_test is not None and check.early_warning is not None
    prior, warning = replace(check.prior_test, p_value=0.008), replace(check.early_warning, p_value=0.3, tested=True)
    test, shifted = read_as_family(prior, warning, 0.01)
    assert (test.fired, shifted) == (True, False) and test.level == pytest.approx(0.009)
    test, shifted = read_as_family(replace(prior, p_value=0.0095), warning, 0.01)
    assert (test.fired, shifted) == (False, False) and test.level == pytest.approx(0.009)  # alone at 0.01 it would fire
    test, shifted = read_as_family(replace(prior, p_value=0.0095), replace(warning, p_value=0.0008), 0.01)
    assert (test.fired, shifted) == (True, True) and test.level == pytest.approx(0.01)  # the confidences fired first
    test, shifted = read_as_family(prior, replace(warning, p_value=0.004), 0.01)
    assert (test.fired, shifted) == (True, True)  # the prior test fired first: the confidences read at 0.01
    test, shifted = read_as_family(replace(prior, p_value=0.3), replace(warning, p_value=0.004), 0.01)
    assert (test.fired, shifted) == (False, False)  # 0.004 >= 0.001: the confidences alone do not fire
    test, shifted = read_as_family(prior, replace(warning, tested=False, p_value=math.nan), 0.01)
    assert (test.fired, test.level, shifted) == (True, 0.01, False)  # the only test run has the whole level
    assert read_as_family(None, None, 0.01) == (None, False)


def test_the_prior_effect_interval_is_at_the_policys_confidence_level() -> None:
    """As the monitor's check reads it (diagnose_check): the policy's drift_confidence_level, not
    the test's own default."""
    window = _rows([0.6, 0.2, 0.1, 0.1], 2_000, np.random.default_rng(8))
    wide = _check(window, policy=DriftPolicy(confidence_level=0.99)).prior_test
    narrow = _check(window, policy=DriftPolicy(confidence_level=0.5)).prior_test
    assert wide is not None and narrow is not None
    assert (wide.confidence_level, narrow.confidence_level) == (0.99, 0.5)
    assert wide.effect_low < narrow.effect_low <= narrow.effect_high < wide.effect_high
