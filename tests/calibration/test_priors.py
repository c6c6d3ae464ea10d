"""Label shift: the priors of served traffic (EM, BBSE), their test, the correction, the diagnosis."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit

from calibration import (
    MAX_PRIOR_CLASSES,
    ReferencePriors,
    ReweightingGain,
    ServedPriorStats,
    class_accuracy_test,
    diagnose_shift,
    estimate_priors_bbse,
    estimate_priors_em,
    negative_log_likelihood,
    prior_corrected_log_probabilities,
    prior_corrected_logits,
    prior_shift_test,
    reweighting_gain,
)

# A perfectly calibrated model of a discrete input: four kinds of input x, p(x | y) below, so
# the posterior of x at priors π is p(y | x) = π_y p(x | y) / Σ π p(x | ·), exactly.
LIKELIHOOD = np.array([[0.6, 0.2, 0.1, 0.1],   # p(x | y = 0)
                       [0.1, 0.6, 0.2, 0.1],   # p(x | y = 1)
                       [0.1, 0.1, 0.2, 0.6]])  # p(x | y = 2)
REFERENCE = np.array([0.5, 0.3, 0.2])
SHIFTED = np.array([0.2, 0.3, 0.5])


def exact_rows(priors: np.ndarray, n: int, posterior_priors: np.ndarray = REFERENCE) -> tuple[np.ndarray, np.ndarray]:
    """Rows in exactly the proportions π_y p(x | y) (n π_y p(x | y) are integers here), with the
    logits log p(y | x) of the model calibrated at ``posterior_priors``."""
    joint = posterior_priors[:, None] * LIKELIHOOD
    log_posterior = np.log(joint / joint.sum(axis=0)).T  # row x: log p(y | x)
    counts = np.rint(n * priors[:, None] * LIKELIHOOD).astype(int)
    y, x = np.nonzero(counts >= 0)
    repeats = counts[y, x]
    return np.repeat(log_posterior[x], repeats, axis=0), np.repeat(y, repeats)


@pytest.fixture(scope="module")
def reference() -> ReferencePriors:
    return ReferencePriors.from_logits(*exact_rows(REFERENCE, 1000))


# --------------------------------------------------------------------------- known values


def test_a_calibrated_models_mean_posterior_is_its_priors(reference: ReferencePriors) -> None:
    assert reference.n == 1000
    np.testing.assert_allclose(reference.model_priors, REFERENCE, atol=1e-12)
    np.testing.assert_array_equal(reference.priors, REFERENCE)


def test_em_and_bbse_recover_an_exact_mix_exactly(reference: ReferencePriors) -> None:
    logits, _ = exact_rows(SHIFTED, 1000)
    served = ServedPriorStats.from_logits(logits, capacity=None)
    em = estimate_priors_em(served, reference, pseudo_rows=0, tolerance=1e-13)
    assert em.converged and em.iterations < 10_000
    np.testing.assert_allclose(em.priors, SHIFTED, atol=1e-9)
    np.testing.assert_allclose(em.weights, SHIFTED / REFERENCE, rtol=1e-8)
    assert em.log_likelihood_ratio > 0
    bbse = estimate_priors_bbse(served, reference)
    np.testing.assert_allclose(bbse.priors, SHIFTED, atol=1e-12)
    # Each estimate's interval holds the truth.
    for estimate in (em, bbse):
        assert np.all((estimate.priors_low <= SHIFTED) & (SHIFTED <= estimate.priors_high))


def test_em_started_at_the_true_priors_stays(reference: ReferencePriors) -> None:
    # The window is the reference's own mix: EM starts at its priors and does not move.
    logits, _ = exact_rows(REFERENCE, 1000)
    em = estimate_priors_em(ServedPriorStats.from_logits(logits, capacity=None), reference, pseudo_rows=0)
    assert em.iterations == 1 and em.converged
    np.testing.assert_allclose(em.weights, 1.0, atol=1e-12)
    assert em.log_likelihood_ratio == pytest.approx(0.0, abs=1e-9)
    assert em.total_variation == pytest.approx(0.0, abs=1e-12)


def test_the_textbook_start_from_the_class_counts_is_offered(reference: ReferencePriors) -> None:
    logits, _ = exact_rows(SHIFTED, 1000)
    em = estimate_priors_em(ServedPriorStats.from_logits(logits), reference, basis="class_counts", pseudo_rows=0)
    np.testing.assert_allclose(em.priors, SHIFTED, atol=1e-6)  # the same here: the model is calibrated per class
    with pytest.raises(ValueError, match="basis must be"):
        estimate_priors_em(ServedPriorStats.from_logits(logits), reference, basis="labels")  # type: ignore[arg-type]


def test_the_pseudo_row_keeps_every_prior_above_zero(reference: ReferencePriors) -> None:
    # Only inputs that point at class 0: the maximum likelihood gives the other classes ~0.
    logits, _ = exact_rows(REFERENCE, 1000)
    only_first = logits[np.argmax(logits, axis=1) == 0]
    plain = estimate_priors_em(ServedPriorStats.from_logits(only_first), reference, pseudo_rows=0)
    smoothed = estimate_priors_em(ServedPriorStats.from_logits(only_first), reference)
    assert plain.priors.min() < 1e-3
    assert smoothed.priors.min() > 1e-5
    prior_corrected_logits(only_first, temperature=1.0, priors=smoothed.priors, reference_priors=smoothed.reference_priors)


# --------------------------------------------------------------------------- mergeable sums


def test_served_sums_and_samples_merge_exactly() -> None:
    rng = np.random.default_rng(3)
    logits = 2.0 * rng.normal(size=(3000, 5))
    keys = rng.random(3000)
    whole = ServedPriorStats.from_logits(logits, temperature=1.5, capacity=400, keys=keys)
    parts = (ServedPriorStats.from_logits(logits[:1000], temperature=1.5, capacity=400, keys=keys[:1000])
             + ServedPriorStats.from_logits(logits[1000:], temperature=1.5, capacity=400, keys=keys[1000:]))
    assert parts.n == whole.n == 3000
    np.testing.assert_allclose(parts.posterior_sum, whole.posterior_sum, rtol=1e-12)
    np.testing.assert_array_equal(parts.predicted_counts, whole.predicted_counts)
    np.testing.assert_array_equal(parts.keys, whole.keys)  # the same 400 rows, whichever way it was chunked
    np.testing.assert_allclose(parts.sample, whole.sample, rtol=1e-12)
    assert whole.sample.shape == (400, 5)


def test_reference_sums_merge_and_serialise(reference: ReferencePriors) -> None:
    logits, labels = exact_rows(REFERENCE, 1000)
    parts = ReferencePriors.from_logits(logits[:300], labels[:300]) + ReferencePriors.from_logits(logits[300:], labels[300:])
    np.testing.assert_allclose(parts.posterior_outer_sum, reference.posterior_outer_sum, rtol=1e-12)
    np.testing.assert_array_equal(parts.confusion, reference.confusion)
    back = ReferencePriors.from_dict(reference.to_dict())
    np.testing.assert_array_equal(back.confusion, reference.confusion)
    np.testing.assert_allclose(back.posterior_sum, reference.posterior_sum, rtol=0)
    with pytest.raises(ValueError, match="reference priors"):
        ReferencePriors.from_dict(reference.to_dict() | {"confusion": [[1, 2]]})


def test_gain_sums_merge() -> None:
    logits = np.log([[0.7, 0.3], [0.4, 0.6], [0.9, 0.1]])
    args = {"temperature": 1.0, "priors": [0.6, 0.4], "reference_priors": [0.5, 0.5]}
    whole = reweighting_gain(logits, [0, 1, 0], **args)
    parts = reweighting_gain(logits[:1], [0], **args) + reweighting_gain(logits[1:], [1, 0], **args)
    assert parts.n == 3 and parts.gain_sum == pytest.approx(whole.gain_sum, rel=1e-12)
    assert parts.gain_square_sum == pytest.approx(whole.gain_square_sum, rel=1e-12)


# --------------------------------------------------------------------------- the test


def test_the_prior_test_fires_on_a_shift_and_not_on_the_reference_mix(reference: ReferencePriors) -> None:
    moved = prior_shift_test(ServedPriorStats.from_logits(exact_rows(SHIFTED, 1000)[0]), reference)
    assert moved.fired and moved.p_value < 1e-10 and moved.df == 2
    assert moved.effect == pytest.approx(0.3, abs=0.01)  # ½ Σ |π' − π| = 0.3
    assert moved.effect_low <= 0.3 <= moved.effect_high
    same = prior_shift_test(ServedPriorStats.from_logits(exact_rows(REFERENCE, 1000)[0]), reference)
    assert not same.fired and same.statistic == pytest.approx(0.0, abs=1e-9) and same.p_value == pytest.approx(1.0)
    assert "MOVED" in moved.sentence() and "unchanged" in same.sentence()


def test_the_prior_test_holds_its_level_on_a_calibrated_model() -> None:
    # 200 windows of 500 rows from a calibrated three-class model, each against its own reference of
    # 3,000 rows (the level is over both samples: one fixed reference's own error shifts every window).
    rng = np.random.default_rng(11)

    def rows(n: int) -> np.ndarray:
        y = rng.choice(3, size=n, p=REFERENCE)
        x = rng.normal(size=(n, 3))
        x[np.arange(n), y] += 1.5
        return 1.5 * x + np.log(REFERENCE), y

    # The test reads the sums of all rows; EM (the effect only) runs on a small sample to keep this fast.
    fired = sum(prior_shift_test(ServedPriorStats.from_logits(rows(500)[0], seed=i, capacity=50),
                                 ReferencePriors.from_logits(*rows(3000)), level=0.05).fired for i in range(200))
    assert fired / 200 < 0.1  # nominal 0.05; 0.1 is 3.2 SE above it (5.3 % measured over 300)


def test_the_prior_test_holds_its_level_with_many_classes_against_a_small_reference() -> None:
    # The reference's covariance S is estimated from its own n_ref rows, so E[dᵀ S⁺ d] is
    # r (n_ref − 1) / (n_ref − r − 2), not the χ²'s r: here 20 classes against 100 reference rows
    # (× 1.28). Soft posteriors (logits 0.3 N(0, I)) are nearly Gaussian, where Hotelling's F tail
    # is exact: the χ²(r) tail fired in 64 of 300 null windows at level 0.05 (measured before the
    # fix), the F tail in 16. (Confident models' posteriors are far from Gaussian: there the F
    # tail removes part of the excess only — 13 % instead of 20 % with logits 2 N(0, I).)
    rng = np.random.default_rng(12)
    k = 20

    def rows(n: int) -> np.ndarray:
        return 0.3 * rng.normal(size=(n, k))

    fired = sum(prior_shift_test(ServedPriorStats.from_logits(rows(2000), seed=i, capacity=50),
                                 ReferencePriors.from_logits(rows(100), rng.integers(k, size=100)), level=0.05).fired
                for i in range(300))
    assert fired / 300 < 0.05 + 3 * math.sqrt(0.05 * 0.95 / 300), fired  # level + 3 SE: 0.088


# --------------------------------------------------------------------------- BBSE cross-check on real logits


@pytest.mark.parametrize("name", ["cifar10_vgg16_verified_calibration", "cifar10_wrn16-4_netcal"])
def test_em_and_bbse_agree_on_label_shifted_real_logits(real_logits_dir: Path, name: str) -> None:
    from calibration import fit_temperature

    data = np.load(real_logits_dir / f"{name}.npz")
    logits, labels = data["logits"], data["labels"]
    rng = np.random.default_rng(22)
    order = rng.permutation(labels.shape[0])
    calibration_rows, traffic = order[:5000], order[5000:]
    temperature = fit_temperature(logits[calibration_rows], labels[calibration_rows]).temperature
    reference = ReferencePriors.from_logits(logits[calibration_rows], labels[calibration_rows], temperature=temperature)
    # Class 3 (cat, the hardest) raised to 40 % of 2,000 rows, p(x | y) unchanged.
    weights = np.where(labels[traffic] == 3, 0.4 / np.sum(labels[traffic] == 3), 0.6 / np.sum(labels[traffic] != 3))
    window = rng.choice(traffic, size=2000, p=weights)
    truth = np.bincount(labels[window], minlength=10) / 2000
    served = ServedPriorStats.from_logits(logits[window], temperature=temperature)
    em, bbse = estimate_priors_em(served, reference), estimate_priors_bbse(served, reference)
    for estimate in (em, bbse):
        assert 0.5 * np.abs(estimate.priors - truth).sum() < 0.05
        assert abs(estimate.priors[3] - truth[3]) < 0.04
    assert 0.5 * np.abs(em.priors - bbse.priors).sum() < 0.05
    assert prior_shift_test(served, reference, estimate=em).fired


# --------------------------------------------------------------------------- the correction


def test_the_correction_of_two_classes_by_hand() -> None:
    # softmax(z / T) re-weighted by w and renormalised: q_1 = σ(a / T + log(w_1 / w_0)).
    a, temperature = 2.0, 1.6
    priors, old = np.array([0.3, 0.7]), np.array([0.6, 0.4])
    expected = expit(a / temperature + math.log((0.7 / 0.4) / (0.3 / 0.6)))
    log_q = prior_corrected_log_probabilities([[0.0, a]], temperature=temperature, priors=priors, reference_priors=old)
    assert math.exp(log_q[0, 1]) == pytest.approx(expected, rel=1e-14)
    assert np.exp(log_q).sum() == pytest.approx(1.0, rel=1e-15)
    # The corrected logits read at T give the same probabilities.
    corrected = prior_corrected_logits([[0.0, a]], temperature=temperature, priors=priors, reference_priors=old)
    shifted = corrected[0] / temperature
    assert math.exp(shifted[1]) / np.exp(shifted).sum() == pytest.approx(expected, rel=1e-14)


def test_the_correction_is_stable_in_log_space() -> None:
    log_q = prior_corrected_log_probabilities([[0.0, -5e4, 3e4]], temperature=0.5, priors=[0.2, 0.5, 0.3],
                                              reference_priors=[1 / 3] * 3)
    assert np.all(np.isfinite(log_q)) and log_q[0, 1] < -1e5
    assert prior_corrected_log_probabilities([[1.0, 2.0]], temperature=1.0, priors=[0.5, 0.5],
                                             reference_priors=[0.5, 0.5])[0] == pytest.approx(
        np.log(np.exp([1.0, 2.0]) / np.exp([1.0, 2.0]).sum()))


def test_the_correction_refuses_a_zero_prior() -> None:
    with pytest.raises(ValueError, match=r"priors\[1\] is 0.0; every prior must be finite and > 0"):
        prior_corrected_logits([[0.0, 1.0]], temperature=1.0, priors=[1.0, 0.0], reference_priors=[0.5, 0.5])
    with pytest.raises(ValueError, match="one value per class"):
        prior_corrected_logits([[0.0, 1.0]], temperature=1.0, priors=[1.0], reference_priors=[0.5, 0.5])


def test_priors_whose_sum_overflows_are_refused_as_such() -> None:
    # Each is finite and > 0, but their sum is inf: normalised, every prior became 0.0, and the
    # refusal said "priors[0] is 0.0" of a value given as 1e308.
    with pytest.raises(ValueError, match=r"priors sums to inf; priors are normalised to sum to 1, so their sum must "
                                         r"be finite"):
        prior_corrected_logits([[0.0, 1.0]], temperature=1.0, priors=[1e308, 1e308], reference_priors=[0.5, 0.5])


def test_the_correction_lowers_the_nll_of_label_shifted_traffic(reference: ReferencePriors) -> None:
    logits, labels = exact_rows(SHIFTED, 1000)
    em = estimate_priors_em(ServedPriorStats.from_logits(logits), reference, pseudo_rows=0)
    corrected = prior_corrected_logits(logits, temperature=1.0, priors=em.priors, reference_priors=em.reference_priors)
    before, after = negative_log_likelihood(logits, labels), negative_log_likelihood(corrected, labels)
    # The corrected model is the truth at the new priors: the gain is the KL divergence it removes.
    truth = exact_rows(SHIFTED, 1000, posterior_priors=SHIFTED)[0]
    assert after == pytest.approx(negative_log_likelihood(truth, labels), rel=1e-8)
    gain = reweighting_gain(logits, labels, temperature=1.0, priors=em.priors, reference_priors=em.reference_priors)
    assert gain.mean == pytest.approx(before - after, rel=1e-8) and gain.z > 5


def test_mismatched_temperatures_are_refused(reference: ReferencePriors) -> None:
    with pytest.raises(ValueError, match="both must be read at the deployed T"):
        prior_shift_test(ServedPriorStats.from_logits(exact_rows(SHIFTED, 1000)[0], temperature=2.0), reference)


# --------------------------------------------------------------------------- the diagnosis


def _evidence(reference: ReferencePriors, priors: np.ndarray, *, easy_only: bool = False) -> dict[str, object]:
    """What a check computes on an exact window of ``priors`` (labelled), for diagnose_shift."""
    logits, labels = exact_rows(priors, 1000)
    if easy_only:  # only the inputs the model gets right: a covariate shift inside the support
        keep = logits.argmax(axis=1) == labels
        logits, labels = logits[keep], labels[keep]
    test = prior_shift_test(ServedPriorStats.from_logits(logits), reference)
    em = test.estimate
    correct = logits.argmax(axis=1) == labels
    return {
        "priors": test,
        "gain": reweighting_gain(logits, labels, temperature=1.0, priors=em.priors, reference_priors=em.reference_priors),
        "class_accuracy": class_accuracy_test(np.bincount(labels, minlength=3), np.bincount(labels[correct], minlength=3),
                                              reference),
        "accuracy": float(correct.mean()), "accuracy_floor": 0.3, "confidence_shifted": False,
        "tests_fired": (), "reweighted_tests_fired": (),
    }


def test_diagnosis_no_change(reference: ReferencePriors) -> None:
    diagnosis = diagnose_shift(**_evidence(reference, REFERENCE))  # type: ignore[arg-type]
    assert (diagnosis.kind, diagnosis.fix, diagnosis.priors_moved, diagnosis.confirmed) == (
        "no_change", "none", False, True)


def test_diagnosis_label_shift(reference: ReferencePriors) -> None:
    evidence = _evidence(reference, SHIFTED)
    # The temperature test may fire at the deployed posteriors; at the re-weighted ones it is quiet.
    diagnosis = diagnose_shift(**evidence | {"tests_fired": ("temperature",)})  # type: ignore[arg-type]
    assert (diagnosis.kind, diagnosis.fix, diagnosis.confirmed) == ("label_shift", "prior_correction", True)
    assert diagnosis.priors == pytest.approx(tuple(SHIFTED), abs=0.01)
    assert "label shift; fix: prior correction" in diagnosis.sentence()
    unlabelled = diagnose_shift(**evidence | {"gain": None, "class_accuracy": None, "accuracy": math.nan,  # type: ignore[arg-type]
                                              "reweighted_tests_fired": None})
    assert (unlabelled.kind, unlabelled.confirmed) == ("label_shift", False)
    assert "to be confirmed" in unlabelled.sentence()


def test_diagnosis_calibration_drift(reference: ReferencePriors) -> None:
    unmoved = diagnose_shift(**_evidence(reference, REFERENCE) | {"tests_fired": ("temperature",)})  # type: ignore[arg-type]
    assert (unmoved.kind, unmoved.fix) == ("calibration_drift", "temperature_refit")
    both = diagnose_shift(**_evidence(reference, SHIFTED) | {"tests_fired": ("temperature", "ece"),  # type: ignore[arg-type]
                                                             "reweighted_tests_fired": ("temperature",)})
    assert (both.kind, both.fix) == ("calibration_drift", "prior_correction_and_refit")
    group = diagnose_shift(**_evidence(reference, REFERENCE) | {"tests_fired": ("group 'eu' ece",)})  # type: ignore[arg-type]
    assert group.kind == "calibration_drift"


def test_a_drift_found_on_labelled_rows_is_confirmed_without_a_reweighting(reference: ReferencePriors) -> None:
    # A check re-weights only when the priors moved: with them unmoved it has no gain, and its
    # calibration drift (or collapse) still rests on labelled rows, not on served rows alone.
    plain = _evidence(reference, REFERENCE) | {"gain": None, "class_accuracy": None, "reweighted_tests_fired": None}
    drift = diagnose_shift(**plain | {"tests_fired": ("temperature",)})  # type: ignore[arg-type]
    collapse = diagnose_shift(**plain | {"accuracy": 0.2})  # type: ignore[arg-type]
    assert (drift.kind, drift.confirmed, collapse.kind, collapse.confirmed) == (
        "calibration_drift", True, "accuracy_collapse", True)
    assert "to be confirmed" not in drift.sentence()


def test_diagnosis_accuracy_collapse(reference: ReferencePriors) -> None:
    evidence = _evidence(reference, SHIFTED)
    low = diagnose_shift(**evidence | {"accuracy_floor": 0.9})  # type: ignore[arg-type]
    assert (low.kind, low.fix) == ("accuracy_collapse", "escalate")
    collapsed = diagnose_shift(**_evidence(reference, REFERENCE) | {"tests_fired": ("collapsed",)})  # type: ignore[arg-type]
    assert collapsed.kind == "accuracy_collapse"


def test_diagnosis_covariate_shift(reference: ReferencePriors) -> None:
    # Only the inputs the model gets right: the class mix moves, the per-class accuracies jump to 1.
    selected = _evidence(reference, REFERENCE, easy_only=True)
    assert selected["priors"].fired and selected["class_accuracy"].fired  # type: ignore[attr-defined]
    diagnosis = diagnose_shift(**selected)  # type: ignore[arg-type]
    assert (diagnosis.kind, diagnosis.fix) == ("covariate_shift", "none")
    confidences = diagnose_shift(**_evidence(reference, REFERENCE) | {"confidence_shifted": True})  # type: ignore[arg-type]
    assert confidences.kind == "covariate_shift"


def test_a_reweighting_that_fits_the_labels_worse_is_not_a_label_shift(reference: ReferencePriors) -> None:
    worse = ReweightingGain(n=1000, gain_sum=-30.0, gain_square_sum=10.0)  # mean −0.03, z ≈ −9.5
    diagnosis = diagnose_shift(**_evidence(reference, SHIFTED) | {"gain": worse})  # type: ignore[arg-type]
    assert diagnosis.kind == "covariate_shift"
    assert diagnose_shift(**_evidence(reference, SHIFTED) | {"gain": worse,  # type: ignore[arg-type]
                                                            "tests_fired": ("ece",)}).kind == "calibration_drift"
    assert diagnosis.to_dict()["kind"] == "covariate_shift"


def test_em_reaches_the_maximum_in_few_steps_on_a_weak_hundred_class_model(real_logits_dir: Path) -> None:
    # CIFAR-100 LeNet-5 (45 % accurate): flat posteriors, many classes hard to tell apart. EM
    # alone crawled (~3,500 steps on this window, stopping ~1e-5 short of the maximum); with the
    # Newton steps it reaches the maximum a plain EM iterated to 1e-13 finds, in a few hundred.
    data = np.load(real_logits_dir / "cifar100_lenet5_netcal.npz")
    logits, labels = data["logits"].astype(np.float64), data["labels"].astype(np.int64)
    rng = np.random.default_rng(22)
    rows, window = rng.choice(10_000, 5_000), rng.choice(10_000, 2_000)
    reference = ReferencePriors.from_logits(logits[rows], labels[rows], temperature=1.2)
    served = ServedPriorStats.from_logits(logits[window], temperature=1.2, capacity=None)
    em = estimate_priors_em(served, reference)
    assert em.converged and em.iterations < 300
    base = reference.model_priors / reference.model_priors.sum()
    ratio, priors = served.sample / base, base.copy()
    for _ in range(100_000):  # the textbook iteration, to a far tighter tolerance
        updated = (priors * (ratio.T @ (1.0 / (ratio @ priors))) + base) / (2_000 + 1.0)
        done, priors = np.abs(updated - priors).max() < 1e-13, updated
        if done:
            break
    assert 0.5 * np.abs(em.priors - priors).sum() < 1e-6


def test_class_accuracy_test_holds_its_level_with_few_rows_a_class() -> None:
    """Under a pure label shift (every class keeps its accuracy) the test fires at most ~its level.

    K = 100 classes, accuracies 0.9-1.0, ~50 reference rows and ~12 window rows a class: the
    χ² approximation of the statistic fired in ~20 % of such windows at level 0.01.
    """
    rng = np.random.default_rng(2022)
    k, draws, fired = 100, 200, 0
    for draw in range(draws):
        accuracy = rng.uniform(0.9, 1.0, size=k)
        reference_rows = rng.multinomial(5000, np.full(k, 1 / k))
        reference_right = rng.binomial(reference_rows, accuracy)
        confusion = np.diag(reference_right) + np.roll(np.diag(reference_rows - reference_right), 1, axis=0)
        reference = ReferencePriors(temperature=1.0, n=5000, class_counts=reference_rows.astype(np.int64),
                                    posterior_sum=np.zeros(k), posterior_outer_sum=np.zeros((k, k)),
                                    confusion=confusion.astype(np.int64))
        rows = rng.multinomial(1200, rng.dirichlet(np.full(k, 5.0)))  # another class mix, same accuracies
        fired += class_accuracy_test(rows, rng.binomial(rows, accuracy), reference, seed=draw).fired
    assert fired / draws <= 0.025


# --------------------------------------------------------------------------- the cost in K


def test_a_reference_of_more_classes_than_the_limit_is_refused_before_anything_is_summed() -> None:
    # 4,000 classes: the sums were 2 K² numbers (256 MB) and the confusion's bincount another K²,
    # and the prior test, EM's covariance and BBSE O(K³) on them; now refused before any of it.
    k = 2 * MAX_PRIOR_CLASSES
    logits, labels = np.zeros((3, k), dtype=np.float32), np.array([0, 1, 2])
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=rf"4,000 classes: .* K × K matrices \(memory grows as K², time as K³\); "
                                             rf"at most max_classes = {MAX_PRIOR_CLASSES:,} classes"):
            ReferencePriors.from_logits(logits, labels)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, f"{peak:,} bytes traced before the refusal"
    # Asked for, more classes are summed (at the stated cost).
    assert ReferencePriors.from_logits(logits[:, :5], labels, max_classes=5).n_classes == 5
    with pytest.raises(ValueError, match="at most max_classes = 4 classes"):
        ReferencePriors.from_logits(logits[:, :5], labels, max_classes=4)


def test_bbse_is_refused_above_its_limit(reference: ReferencePriors) -> None:
    served = ServedPriorStats.from_logits(exact_rows(SHIFTED, 1000)[0])
    with pytest.raises(ValueError, match=r"3 classes: BBSE solves, inverts and conditions K × K matrices .* at most "
                                         r"max_classes = 2 classes"):
        estimate_priors_bbse(served, reference, max_classes=2)
    assert estimate_priors_bbse(served, reference, max_classes=3).method == "bbse"
