"""The early warning: mergeable confidence profiles, the predicted accuracy, the χ² test's level and power."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration import fit_temperature, top_label_confidence
from monitoring import (
    CONFIDENCE_EDGES,
    ConfidenceProfile,
    DriftPolicy,
    NewlyLabelled,
    PredictionLog,
    confidence_profile,
    warn_before_labels,
    log_predictions,
    summarise_window,
)
from monitoring.early_warning import _merged_counts
from tests.strategies import sample_labels

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
REAL = Path(__file__).resolve().parents[1] / "data" / "real-logits"


def profile_of(confidence: np.ndarray, correct: np.ndarray | None = None) -> ConfidenceProfile:
    labelled = np.ones_like(confidence, dtype=bool) if correct is not None else np.zeros_like(confidence, dtype=bool)
    return ConfidenceProfile.from_confidence(confidence, labelled,
                                             correct if correct is not None else labelled, temperature=1.0)


# ---------------------------------------------------------------------------- mergeable sums


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), cut=st.floats(0.0, 1.0),
       temperature=st.floats(0.3, 5.0))
def test_profiles_of_parts_add_up_to_the_whole_and_round_trip(seed: int, n: int, cut: float, temperature: float) -> None:
    rng = np.random.default_rng(seed)
    logits = 3.0 * rng.normal(size=(n, 5))
    labels = np.where(rng.random(n) < 0.6, rng.integers(0, 5, n), -1)
    split = int(cut * n)
    whole = ConfidenceProfile.from_logits(logits, labels, temperature=temperature)
    parts = (ConfidenceProfile.from_logits(logits[:split], labels[:split], temperature=temperature)
             + ConfidenceProfile.from_logits(logits[split:], labels[split:], temperature=temperature))
    assert parts == whole
    assert whole.n == n and whole.labelled == int((labels >= 0).sum())
    assert ConfidenceProfile.from_json(whole.to_json()) == whole
    assert len(whole.to_json()) < 1_500  # a version tag holds it


def test_profiles_refuse_to_mix_temperatures_and_bad_json() -> None:
    logits = np.log([[0.3, 0.7]])
    with pytest.raises(ValueError, match="different temperatures"):
        ConfidenceProfile.from_logits(logits, temperature=1.0) + ConfidenceProfile.from_logits(logits, temperature=2.0)
    for text in ("nope", "{}", '{"format": 1, "edges": [0, 1]}'):
        with pytest.raises(ValueError, match="confidence profile"):
            ConfidenceProfile.from_json(text)


def test_the_bins_are_fixed_and_a_confidence_on_an_edge_goes_below_it() -> None:
    profile = profile_of(np.array([0.0, 0.1, 0.95, 1.0]))
    assert len(profile.count) == len(CONFIDENCE_EDGES) - 1
    assert profile.count[0] == 2 and profile.count[-1] == 1 and profile.count[10] == 1  # (0.944, 0.968]


def test_merging_keeps_every_expected_count_above_the_minimum() -> None:
    reference = np.array([0, 1, 2, 3, 50, 300, 4, 0, 1], dtype=np.int64)
    window = np.array([0, 0, 1, 1, 10, 60, 2, 1, 0], dtype=np.int64)
    r, w = _merged_counts(reference, window, 5.0)
    total, n_r, n_w = r + w, r.sum(), w.sum()
    assert r.sum() == reference.sum() and w.sum() == window.sum()
    assert (total * min(n_r, n_w) / (n_r + n_w) >= 5.0).all()


# ---------------------------------------------------------------------------- the level of the test


@pytest.mark.parametrize("name", ["cifar10_wrn16-4_netcal", "cifar100_densenet-bc-100_netcal"])
def test_false_alarm_rate_on_same_distribution_windows_is_near_the_level(name: str) -> None:
    """Real CIFAR confidences: per replicate a new random split, a 5,000-row reference and a
    500-row window from the other half. 600 replicates at level 0.05 (binomial SD 0.009) and
    the same at 0.01."""
    data = np.load(REAL / f"{name}.npz")
    logits, labels = data["logits"], data["labels"]
    temperature = fit_temperature(logits, labels).temperature
    predictions, confidence = top_label_confidence(logits, temperature=temperature)
    correct = predictions == labels
    rng = np.random.default_rng(1)
    p_values = []
    for _ in range(600):
        order = rng.permutation(labels.shape[0])
        reference = profile_of(confidence[order[:5_000]], correct[order[:5_000]])
        window = profile_of(confidence[rng.choice(order[5_000:], 500, replace=False)])
        p_values.append(warn_before_labels(window, reference, policy=DriftPolicy(confidence_shift_level=0.05)).p_value)
    p = np.array(p_values)
    assert 0.025 <= (p < 0.05).mean() <= 0.08
    assert (p < 0.01).mean() <= 0.025


@pytest.mark.parametrize(("factor", "direction"), [(1.25, "up"), (0.8, "down")])
def test_a_rescaled_model_shifts_the_confidences_and_says_which_way(factor: float, direction: str) -> None:
    data = np.load(REAL / "cifar100_wrn16-4_netcal.npz")
    logits, labels = data["logits"], data["labels"]
    temperature = fit_temperature(logits[:5_000], labels[:5_000]).temperature
    reference = ConfidenceProfile.from_logits(logits[:5_000], labels[:5_000], temperature=temperature)
    rng = np.random.default_rng(4)
    flagged = 0
    for _ in range(50):
        rows = rng.choice(np.arange(5_000, 10_000), 500, replace=False)
        warning = warn_before_labels(ConfidenceProfile.from_logits(factor * logits[rows], temperature=temperature),
                                reference)
        flagged += warning.shifted
        assert warning.direction == direction
    assert flagged >= 45  # power >= 90 % at 500 unlabelled rows


def test_predicted_accuracy_interval_covers_the_accuracy_the_labels_later_show() -> None:
    """Labels drawn from the model's own softmax (calibrated): the 95 % prediction interval of a
    500-row window's accuracy, with the reference gap's error, covers it in 92–98 % of 400 windows."""
    rng = np.random.default_rng(9)
    covered = 0
    for _ in range(400):
        logits = 2.0 * rng.normal(size=(2_500, 8))
        labels = sample_labels(rng, logits)
        reference = ConfidenceProfile.from_logits(logits[:2_000], labels[:2_000])
        warning = warn_before_labels(ConfidenceProfile.from_logits(logits[2_000:]), reference)
        accuracy = (logits[2_000:].argmax(axis=1) == labels[2_000:]).mean()
        covered += warning.predicted_accuracy_low <= accuracy <= warning.predicted_accuracy_high
    assert 0.92 <= covered / 400 <= 0.98


def test_few_rows_or_no_reference_give_the_estimate_untested() -> None:
    rng = np.random.default_rng(0)
    window = ConfidenceProfile.from_logits(rng.normal(size=(50, 4)))
    warning = warn_before_labels(window)
    assert not warning.tested and np.isfinite(warning.predicted_accuracy)
    assert "no reference" in warning.sentence() and "predicted accuracy" in warning.sentence()
    reference = ConfidenceProfile.from_logits(rng.normal(size=(500, 4)), rng.integers(0, 4, 500))
    assert "fewer than 100 rows" in warn_before_labels(window, reference).sentence()
    assert warn_before_labels(ConfidenceProfile.empty()).sentence() == "early warning: no row served in the window"


# ---------------------------------------------------------------------------- from the prediction log


def test_the_log_serves_unlabelled_rows_and_the_labels_that_arrived_since(prediction_log: PredictionLog) -> None:
    rng = np.random.default_rng(3)
    n = 300
    logits = (2.0 * rng.normal(size=(n, 4))).astype(np.float32)
    ids = [f"r{i}" for i in range(n)]
    times = [T0 + timedelta(seconds=10 * i) for i in range(n)]
    log_predictions(prediction_log, "m", "1", 1.0, logits, ids, None, times)
    labels = rng.integers(0, 4, n)
    prediction_log.attach_labels(ids[:100], labels[:100], labelled_at=T0 + 2 * HOUR)
    prediction_log.attach_labels(ids[100:150], labels[100:150], labelled_at=T0 + 3 * HOUR)

    profile = confidence_profile(prediction_log, "m", "1", temperature=1.0, start=T0, end=T0 + 2 * HOUR,
                                 chunk_size=64)
    want = ConfidenceProfile.from_logits(logits, np.where(np.arange(n) < 150, labels, -1))
    assert profile == want and profile.labelled == 150

    early = NewlyLabelled(prediction_log, since=None, until=T0 + 2 * HOUR + timedelta(minutes=1))
    late = NewlyLabelled(prediction_log, since=T0 + 2 * HOUR + timedelta(minutes=1), until=T0 + 4 * HOUR)
    counts = [summarise_window(source, "m", "1", temperature=1.0, start=T0, end=T0 + 2 * HOUR).n
              for source in (early, late)]
    assert counts == [100, 50]
