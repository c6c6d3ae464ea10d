"""monitoring.diagnose_arrays: a check's shift diagnosis on arrays in memory."""

from __future__ import annotations

import numpy as np
import pytest

from calibration import ReferencePriors, TemperatureStats
from monitoring import ConfidenceProfile, DriftReference, ShiftCheck, diagnose_arrays


def _rows(priors: list[float], n: int, rng: np.random.Generator, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A calibrated model (x | y ~ N(2 e_y, I), logits 2x + log π exact for π uniform), times ``scale``."""
    k = len(priors)
    labels = rng.choice(k, size=n, p=priors)
    x = rng.normal(size=(n, k))
    x[np.arange(n), labels] += 2.0
    return scale * 2.0 * x, labels


def _check(window: tuple[np.ndarray, np.ndarray], **extra: object) -> ShiftCheck:
    rng = np.random.default_rng(0)
    logits, labels = _rows([0.25] * 4, 5_000, rng)
    reference = DriftReference.of(0.01, ece_interval=(0.0, 0.02),
                                  temperature_stats=TemperatureStats.from_logits(logits, labels))
    return diagnose_arrays(*window, temperature=1.0, reference=reference,
                           reference_priors=ReferencePriors.from_logits(logits, labels),
                           reference_profile=ConfidenceProfile.from_logits(logits, labels), accuracy_floor=0.5,
                           **extra)  # type: ignore[arg-type]


def test_a_labelled_calibration_drift_is_confirmed_though_the_priors_did_not_move() -> None:
    check = _check(_rows([0.25] * 4, 2_000, np.random.default_rng(1), scale=1.5))
    diagnosis = check.diagnosis
    assert (diagnosis.kind, diagnosis.fix, diagnosis.priors_moved) == ("calibration_drift", "temperature_refit", False)
    # The window is labelled: the verdict rests on its labels (the re-weighting's gain is
    # measured on them whether or not the priors moved).
    assert diagnosis.confirmed and check.gain is not None and check.gain.n == 2_000


def test_served_rows_alone_carry_the_prior_shift() -> None:
    rng = np.random.default_rng(2)
    labelled = _rows([0.25] * 4, 600, rng)
    served, _ = _rows([0.55, 0.15, 0.15, 0.15], 3_000, rng)
    check = _check(labelled, served_logits=served)
    assert check.served.n == 3_000 and check.prior_test.fired
    assert check.diagnosis.priors == pytest.approx([0.55, 0.15, 0.15, 0.15], abs=0.05)


def test_a_window_of_another_k_is_refused() -> None:
    with pytest.raises(ValueError, match="the window has 3 classes and the reference priors 4"):
        _check(_rows([1 / 3] * 3, 600, np.random.default_rng(3)))
