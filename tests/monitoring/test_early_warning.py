"""The early warning: mergeable confidence profiles, the predicted accuracy, the Anderson–Darling test's level and power."""

from __future__ import annotations

import json
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from calibration import fit_temperature, top_label_confidence
from monitoring import (
    CONFIDENCE_EDGES,
    LEGACY_CONFIDENCE_EDGES,
    ConfidenceProfile,
    DriftPolicy,
    NewlyLabelled,
    PredictionLog,
    WindowQuery,
    confidence_profile,
    log_predictions,
    summarise_window,
    warn_before_labels,
)
from monitoring.early_warning import _anderson_darling, _variance
from tests.strategies import sample_labels

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
REAL = Path(__file__).resolve().parents[1] / "data" / "real-logits"


def profile_of(confidence: np.ndarray, correct: np.ndarray | None = None, temperature: float = 1.0) -> ConfidenceProfile:
    labelled = np.ones_like(confidence, dtype=bool) if correct is not None else np.zeros_like(confidence, dtype=bool)
    return ConfidenceProfile.from_confidence(confidence, labelled,
                                             correct if correct is not None else labelled, temperature=temperature)


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
    assert len(whole.to_json()) < 16_000  # a version tag holds it (MLflow's registry: 100,000 characters)
    assert whole.rebinned(LEGACY_CONFIDENCE_EDGES) == ConfidenceProfile.from_logits(
        logits, labels, temperature=temperature, edges=LEGACY_CONFIDENCE_EDGES)


def test_profiles_refuse_to_mix_temperatures_and_bad_json() -> None:
    logits = np.log([[0.3, 0.7]])
    with pytest.raises(ValueError, match="different temperatures"):
        ConfidenceProfile.from_logits(logits, temperature=1.0) + ConfidenceProfile.from_logits(logits, temperature=2.0)
    for text in ("nope", "{}", '{"format": 1, "edges": [0, 1]}'):
        with pytest.raises(ValueError, match="confidence profile"):
            ConfidenceProfile.from_json(text)


def test_the_bins_are_fixed_and_a_confidence_on_an_edge_goes_below_it() -> None:
    profile = profile_of(np.array([0.0, 0.01, 0.95, 1.0]))
    assert len(profile.count) == len(CONFIDENCE_EDGES) - 1 == 191
    assert profile.count[0] == 2 and profile.count[-1] == 1
    assert CONFIDENCE_EDGES[96] < 0.95 <= CONFIDENCE_EDGES[97] and profile.count[96] == 1  # (1 − 10^-1.3, 1 − 10^-1.35]
    assert set(LEGACY_CONFIDENCE_EDGES) <= set(CONFIDENCE_EDGES)  # the coarse grid re-bins exactly


def test_the_histogram_test_is_scholz_and_stephens_anderson_darling() -> None:
    """Cross-check with scipy's k-sample Anderson–Darling (its midrank version for ties) on the
    rows the two histograms stand for: the same standardised statistic, and the same p-value
    where scipy's (interpolated in a table between 0.001 and 0.25) is not capped."""
    rng = np.random.default_rng(3)
    compared = 0
    for scale in (1.0, 1.1, 1.2, 1.3):
        r, w = profile_of(rng.beta(8, 1, 3_000)), profile_of(rng.beta(8 * scale, 1, 400))
        statistic, p = _anderson_darling(np.asarray(r.count, float), np.asarray(w.count, float))
        bins = np.arange(len(r.count))
        with warnings.catch_warnings():  # scipy warns when it caps its p-value at its table's ends
            warnings.simplefilter("ignore")
            peer = stats.anderson_ksamp([np.repeat(bins, r.count), np.repeat(bins, w.count)], variant="midrank")
        standardised = (statistic - 1) / np.sqrt(_variance(3_400.0, 1 / 3_000 + 1 / 400))
        assert standardised == pytest.approx(peer.statistic, rel=1e-9, abs=1e-9)
        if 0.001 < peer.pvalue < 0.25:
            compared += 1
            assert p == pytest.approx(peer.pvalue, rel=0.05)
    assert compared >= 1


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


def _real(name: str) -> tuple[np.ndarray, np.ndarray]:
    data = np.load(REAL / f"{name}.npz")
    return data["logits"], data["labels"]


def test_the_predicted_accuracy_stays_in_0_1_and_inside_its_interval() -> None:
    """A reference right more often than its confidence says (accuracy 1 at confidence 0.95)
    and a window more confident still: the previous estimate, mean confidence + the gap, said
    1.04, above its own interval clipped at 1. Also from a profile registered before the per-bin
    sums (the gap estimator, clipped)."""
    reference = profile_of(np.full(2_000, 0.95), np.ones(2_000, dtype=bool))
    window = profile_of(np.full(500, 0.99))
    legacy = ConfidenceProfile.from_json(_format_1(reference.rebinned(LEGACY_CONFIDENCE_EDGES)))
    for warning in (warn_before_labels(window, reference), warn_before_labels(window, legacy)):
        assert 0.0 <= warning.predicted_accuracy <= 1.0
        assert warning.predicted_accuracy_low <= warning.predicted_accuracy <= warning.predicted_accuracy_high <= 1.0
    assert warn_before_labels(window, legacy).accuracy_method == "gap"


def test_confidences_that_move_along_the_calibration_curve_are_predicted_per_bin() -> None:
    """Only the easiest half of the traffic (the most confident rows of a calibrated CIFAR-10
    VGG-16): calibration holds, the confidences moved. One gap for every confidence (the
    previous estimate) was off by 1.8 points on average; the reference's calibration curve per
    bin (CBPE-style, as NannyML's isotonic calibrator) is off by a tenth of that."""
    logits, labels = _real("cifar10_vgg16_verified_calibration")
    temperature = fit_temperature(logits[:5_000], labels[:5_000]).temperature
    reference = ConfidenceProfile.from_logits(logits[:5_000], labels[:5_000], temperature=temperature)
    predictions, confidence = top_label_confidence(logits[5_000:], temperature=temperature)
    easiest = np.flatnonzero(confidence > np.median(confidence))
    rng = np.random.default_rng(6)
    errors = []
    for _ in range(20):
        rows = rng.choice(easiest, 500)
        warning = warn_before_labels(profile_of(confidence[rows], temperature=temperature), reference)
        errors.append(abs(warning.predicted_accuracy - (predictions[rows] == labels[5_000:][rows]).mean()))
        assert warning.accuracy_method == "binned" and warning.predicted_accuracy <= 1.0
    assert np.mean(errors) < 0.006, f"mean absolute error {np.mean(errors):.4f}"


def test_the_test_is_at_least_as_powerful_as_ks_on_the_raw_rows() -> None:
    """Logits ×1.1 (T off by 10 %) in 500-row windows of a confident CIFAR-10 model: the test
    on the mergeable histogram flags at least as many windows as a two-sample Kolmogorov–Smirnov
    test on the raw rows (scipy), at the same level. The χ² test on coarse bins it replaces
    flagged fewer than KS (and than 80 %)."""
    logits, labels = _real("cifar10_wrn16-4_netcal")
    temperature = fit_temperature(logits[:5_000], labels[:5_000]).temperature
    _, reference_confidence = top_label_confidence(logits[:5_000], temperature=temperature)
    reference = ConfidenceProfile.from_logits(logits[:5_000], labels[:5_000], temperature=temperature)
    _, hotter = top_label_confidence(1.1 * logits[5_000:].astype(np.float64), temperature=temperature)
    rng = np.random.default_rng(12)
    ours = ks = 0
    for _ in range(40):
        window = hotter[rng.choice(5_000, 500)]
        warning = warn_before_labels(profile_of(window, temperature=temperature), reference)
        ours += warning.shifted
        ks += stats.ks_2samp(reference_confidence, window).pvalue < DriftPolicy().confidence_shift_level
        assert warning.direction == "up"
    assert ours >= ks and ours >= 32, (ours, ks)


def test_a_profile_registered_before_the_fine_bins_still_loads_and_is_used() -> None:
    """A version tag written by the previous release (format 1: the coarse bins, no per-bin
    sums): it loads, the window is re-binned onto its bins exactly, the same test runs there,
    and the sentence says so."""
    rng = np.random.default_rng(2)
    reference_confidence = rng.beta(6, 1, 3_000)
    reference = profile_of(reference_confidence, rng.random(3_000) < reference_confidence)
    old = ConfidenceProfile.from_json(_format_1(reference.rebinned(LEGACY_CONFIDENCE_EDGES)))
    assert old.edges == LEGACY_CONFIDENCE_EDGES and not old.per_bin
    window = profile_of(rng.beta(9, 1, 600))
    warning = warn_before_labels(window, old)
    direct = warn_before_labels(window.rebinned(LEGACY_CONFIDENCE_EDGES), old)
    assert warning.rebinned and warning.tested and warning.shifted and warning.bins == 22
    assert warning.p_value == direct.p_value and warning.predicted_accuracy == direct.predicted_accuracy
    assert "re-binned" in warning.sentence() and "before per-bin sums" in warning.sentence()
    assert ConfidenceProfile.from_json(old.to_json()) == old
    with pytest.raises(ValueError, match="neither of which refines"):
        warn_before_labels(window, ConfidenceProfile.empty(edges=(0.0, 0.555, 1.0)))


def _format_1(profile: ConfidenceProfile) -> str:
    """``profile`` as the previous release wrote its tag: format 1, no per-bin sums."""
    data = {"format": 1} | {key: value for key, value in profile.to_dict().items() if not key.startswith("bin_")}
    return json.dumps(data, separators=(",", ":"))


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
    counts = [summarise_window(source, WindowQuery("m", "1", temperature=1.0, start=T0, end=T0 + 2 * HOUR)).n
              for source in (early, late)]
    assert counts == [100, 50]
