"""The shift diagnosis of a check: what the one pass over the window collects for it, the second
read at the re-weighted posteriors, and :func:`monitoring.diagnose_check` on label-shifted and
temperature-shifted traffic of a calibrated model."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from numpy.typing import NDArray

from calibration import (
    CalibrationStats,
    PriorEstimate,
    ReferencePriors,
    ServedPriorStats,
    TemperatureStats,
    calibration_error_from_stats,
    estimate_priors_em,
    prior_corrected_logits,
    reweighting_gain,
)
from monitoring import (
    DRIFT_PAYLOAD_KEYS,
    LABEL_SHIFT_PAYLOAD_KEYS,
    DriftReference,
    DriftReport,
    PredictionLog,
    ReweightedWindow,
    WindowQuery,
    decide_drift,
    diagnose_check,
    drift_markdown,
    drift_metric_names,
    drift_metrics,
    drift_payload,
    label_shift_payload,
    labelled_mix,
    log_predictions,
    reweight_window,
    scan_window,
    summarise_arrays,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
K = 4
TEMPERATURE = 1.0


def calibrated_rows(priors: NDArray[np.float64], n: int, seed: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """A calibrated model at uniform priors: x | y ~ N(1.5 e_y, I) and logits 1.5 x, so
    softmax(logits) = p(y | x) when the classes are equally likely; ``priors`` draws the labels."""
    rng = np.random.default_rng(seed)
    y = rng.choice(K, size=n, p=priors)
    x = rng.normal(size=(n, K))
    x[np.arange(n), y] += 1.5
    return 1.5 * x, y


UNIFORM = np.full(K, 1.0 / K)
RAISED = np.array([0.55, 0.15, 0.15, 0.15])  # one class raised from 25 % to 55 %


@pytest.fixture(scope="module")
def registered() -> tuple[DriftReference, ReferencePriors]:
    """What a version registers from its calibration part: the drift reference and the reference priors."""
    logits, labels = calibrated_rows(UNIFORM, 6000, seed=1)
    stats = CalibrationStats.from_logits(logits, labels, temperature=TEMPERATURE)
    ece = calibration_error_from_stats(stats, estimator="debiased_l1")
    drift = DriftReference.of(ece.estimate, ece_interval=(ece.low, ece.high),
                              temperature_stats=TemperatureStats.from_logits(logits, labels, temperature=TEMPERATURE))
    return drift, ReferencePriors.from_logits(logits, labels, temperature=TEMPERATURE)


def _arrays_reweigh(logits: NDArray[np.float64], labels: NDArray[np.int64]):  # type: ignore[no-untyped-def]
    def reweigh(estimate: PriorEstimate, tested: NDArray[np.float64]) -> ReweightedWindow:
        corrected = prior_corrected_logits(logits, temperature=TEMPERATURE, priors=tested,
                                           reference_priors=estimate.reference_priors)
        return ReweightedWindow(
            summarise_arrays(corrected, labels, temperature=TEMPERATURE, start=T0, end=T0),
            reweighting_gain(logits, labels, temperature=TEMPERATURE, priors=estimate.priors,
                             reference_priors=estimate.reference_priors))
    return reweigh


def _check(registered: tuple[DriftReference, ReferencePriors], logits: NDArray[np.float64],
           labels: NDArray[np.int64], *, priors: bool = True) -> DriftReport:
    drift, reference = registered
    report = decide_drift(summarise_arrays(logits, labels, temperature=TEMPERATURE, start=T0, end=T0,
                                           model_name="m", model_version="1"), drift)
    correct = logits.argmax(axis=1) == labels
    return diagnose_check(
        report, served=ServedPriorStats.from_logits(logits, temperature=TEMPERATURE, capacity=2000),
        reference=reference if priors else None, class_rows=np.bincount(labels, minlength=K),
        class_correct=np.bincount(labels[correct], minlength=K), reweigh=_arrays_reweigh(logits, labels),
        accuracy_floor=0.3)


def test_label_shifted_traffic_is_a_label_shift_and_recommends_no_refit(
        registered: tuple[DriftReference, ReferencePriors]) -> None:
    report = _check(registered, *calibrated_rows(RAISED, 3000, seed=2))
    assert report.diagnosis is not None and report.prior_test is not None
    assert (report.diagnosis.kind, report.diagnosis.fix, report.diagnosis.confirmed) == (
        "label_shift", "prior_correction", True)
    assert report.prior_test.fired and report.diagnosis.reweighted_tests_fired == ()
    assert report.diagnosis.priors[0] == pytest.approx(0.55, abs=0.05)
    assert not report.refit_recommended
    assert report.reasons[0].startswith("shift diagnosis: label shift; fix: prior correction")
    payload = label_shift_payload(report)
    assert tuple(payload) == LABEL_SHIFT_PAYLOAD_KEYS and payload["confirmed"] is True
    assert payload["fired"] is True and payload["served_n"] == 3000 and len(payload["priors"]) == K
    json.dumps(payload, allow_nan=False)
    flat = drift_payload(report)
    assert tuple(flat) == DRIFT_PAYLOAD_KEYS and (flat["shift_kind"], flat["shift_fix"]) == ("label_shift",
                                                                                          "prior_correction")
    assert flat["diagnosis"]["kind"] == "label_shift" and flat["prior_test"]["priors_low"] is not None
    assert {"prior_shift_p_value", "prior_shift", "priors_moved"} <= set(drift_metrics(report)) <= (
        drift_metric_names()[0] | {k for k in drift_metrics(report) if ".group." in k})
    markdown = drift_markdown(report)
    assert "### Shift diagnosis" in markdown and "**label shift** — fix: prior correction" in markdown


def test_temperature_shifted_traffic_is_a_calibration_drift_and_recommends_the_refit(
        registered: tuple[DriftReference, ReferencePriors]) -> None:
    logits, labels = calibrated_rows(UNIFORM, 3000, seed=3)
    report = _check(registered, 1.5 * logits, labels)  # over-confident: the optimal T moved by x1.5
    assert report.diagnosis is not None
    assert (report.diagnosis.kind, report.diagnosis.fix, report.diagnosis.confirmed) == (
        "calibration_drift", "temperature_refit", True)
    assert report.verdict == "drift" and report.refit_recommended
    assert drift_payload(report)["shift_kind"] == "calibration_drift"
    with pytest.raises(ValueError, match="was not diagnosed as a label shift"):
        label_shift_payload(report)


def test_a_version_without_reference_priors_is_diagnosed_without_them(
        registered: tuple[DriftReference, ReferencePriors]) -> None:
    quiet = _check(registered, *calibrated_rows(RAISED, 3000, seed=4), priors=False)
    assert quiet.diagnosis is not None and quiet.prior_test is None and quiet.diagnosis.kind != "label_shift"
    assert any(reason.startswith("no diagnosis of the class priors: this version was registered without reference "
                                 "priors") for reason in quiet.reasons)
    logits, labels = calibrated_rows(UNIFORM, 3000, seed=5)
    drift = _check(registered, 1.5 * logits, labels, priors=False)
    assert drift.diagnosis is not None and drift.diagnosis.kind == "calibration_drift" and drift.refit_recommended


def test_the_one_pass_collects_the_served_priors_of_every_row(prediction_log: PredictionLog) -> None:
    logits, labels = calibrated_rows(RAISED, 300, seed=6)
    logits32 = logits.astype(np.float32)
    ids = [f"r{i:04d}" for i in range(300)]
    log_predictions(prediction_log, "m", "1", TEMPERATURE, logits32, ids,
                    time=[T0 + timedelta(seconds=i) for i in range(300)])
    labelled = np.arange(300) % 3 != 0  # a third of the rows still without a label
    prediction_log.attach_labels([ids[i] for i in np.flatnonzero(labelled)], labels[labelled],
                                 labelled_at=T0 + timedelta(hours=1))
    end = T0 + timedelta(hours=2)

    query = WindowQuery("m", "1", temperature=TEMPERATURE, start=T0, end=end)
    chunked = scan_window(prediction_log, query, chunk_size=7, prior_capacity=50, seed=3)
    direct = ServedPriorStats.from_logits(logits32, temperature=TEMPERATURE, capacity=None)
    served = chunked.served_priors
    assert served is not None and served.n == direct.n == 300 and served.capacity == 50
    assert served.predicted_counts.tolist() == direct.predicted_counts.tolist()
    assert np.allclose(served.posterior_sum, direct.posterior_sum, rtol=1e-12, atol=0)
    assert served.sample.shape == (50, K) and np.all(np.diff(served.keys) >= 0)  # bounded, bottom-k by key
    rows = {row.tobytes() for row in direct.sample}
    assert all(row.tobytes() in rows for row in served.sample)  # each sampled posterior is one of the window's
    # In one chunk, the same keys as the direct summary drawn from the first chunk's generator: the same sample.
    query = WindowQuery("m", "1", temperature=TEMPERATURE, start=T0, end=end)
    whole = scan_window(prediction_log, query, prior_capacity=50, seed=3).served_priors
    one = ServedPriorStats.from_logits(logits32, temperature=TEMPERATURE, capacity=50,
                                       seed=np.random.default_rng([3, 0]))
    assert whole is not None and np.array_equal(whole.sample, one.sample) and np.array_equal(whole.keys, one.keys)
    correct = logits32.argmax(axis=1) == labels
    assert chunked.class_rows is not None and chunked.class_correct is not None
    assert chunked.class_rows.tolist() == np.bincount(labels[labelled], minlength=K).tolist()
    assert chunked.class_correct.tolist() == np.bincount(labels[labelled & correct], minlength=K).tolist()
    query = WindowQuery("m", "1", temperature=TEMPERATURE, start=T0, end=end)
    assert scan_window(prediction_log, query).served_priors is None

    # The second read, at the re-weighted posteriors, is the arrays' summary of the corrected logits.
    query = WindowQuery("m", "1", temperature=TEMPERATURE, start=T0, end=end)
    again = reweight_window(prediction_log, query, priors=RAISED, reference_priors=UNIFORM, chunk_size=7)
    corrected = prior_corrected_logits(logits32[labelled], temperature=TEMPERATURE, priors=RAISED,
                                       reference_priors=UNIFORM)
    expected = summarise_arrays(corrected, labels[labelled], temperature=TEMPERATURE, start=T0, end=end)
    assert again.summary.n == expected.n == int(labelled.sum())
    assert again.summary.overall.nll == pytest.approx(expected.overall.nll, rel=1e-9)
    assert again.gain.n == expected.n and again.gain.mean > 0  # the re-weighting fits the raised class better


def test_the_labelled_mix_is_the_labelled_rows_frequencies_over_the_references() -> None:
    # w_y = f_y / f_ref,y (half a row added to every count) on the estimate's reference priors (the
    # reference's mean posterior, not its label frequencies).
    logits, labels = calibrated_rows(np.array([0.4, 0.3, 0.2, 0.1]), 4000, seed=11)
    reference = ReferencePriors.from_logits(logits, labels, temperature=TEMPERATURE)
    estimate = estimate_priors_em(ServedPriorStats.from_logits(logits, temperature=TEMPERATURE), reference)
    rows = np.array([100, 300, 300, 300])
    weights = ((rows + 0.5) / (rows + 0.5).sum()) / ((reference.class_counts + 0.5) / (reference.class_counts + 0.5).sum())
    expected = estimate.reference_priors * weights
    assert labelled_mix(rows, reference, estimate) == pytest.approx(expected / expected.sum())
    assert labelled_mix(reference.class_counts, reference, estimate) == pytest.approx(estimate.reference_priors)
    assert np.all(labelled_mix([0, 0, 0, 10], reference, estimate) > 0)  # no weight is 0


def test_the_drift_tests_read_a_label_shift_at_the_labelled_mix_and_the_gain_at_ems_priors(
        registered: tuple[DriftReference, ReferencePriors]) -> None:
    # The labelled rows' class mix is known from their labels; EM's priors carry the estimate's
    # noise, which with many classes and few rows a class made the re-weighted rows look
    # over-confident (a label shift taken for calibration drift).
    drift, reference = registered
    logits, labels = calibrated_rows(RAISED, 3000, seed=2)
    report = decide_drift(summarise_arrays(logits, labels, temperature=TEMPERATURE, start=T0, end=T0,
                                           model_name="m", model_version="1"), drift)
    correct = logits.argmax(axis=1) == labels
    calls: list[tuple[PriorEstimate, NDArray[np.float64]]] = []
    inner = _arrays_reweigh(logits, labels)

    def spy(estimate: PriorEstimate, tested: NDArray[np.float64]) -> ReweightedWindow:
        calls.append((estimate, tested))
        return inner(estimate, tested)  # type: ignore[no-any-return]

    served = ServedPriorStats.from_logits(logits, temperature=TEMPERATURE, capacity=2000)
    rows = np.bincount(labels, minlength=K)
    diagnosed = diagnose_check(report, served=served, reference=reference, class_rows=rows,
                               class_correct=np.bincount(labels[correct], minlength=K), reweigh=spy,
                               accuracy_floor=0.3)
    assert diagnosed.diagnosis is not None and diagnosed.diagnosis.kind == "label_shift"
    (estimate, tested), = calls
    assert tested == pytest.approx(labelled_mix(rows, reference, estimate))
    assert diagnosed.diagnosis.priors == pytest.approx(estimate.priors)  # the fix keeps EM's priors
    calls.clear()
    diagnose_check(report, served=served, reference=reference, class_rows=None, class_correct=None, reweigh=spy,
                   accuracy_floor=0.3)
    (estimate, tested), = calls
    assert np.array_equal(tested, estimate.priors)  # no per-class counts: EM's priors


def test_reweight_window_reads_the_tests_at_their_priors_and_the_gain_at_the_estimates() -> None:
    log = PredictionLog("sqlite://")
    log.create()
    logits, labels = calibrated_rows(RAISED, 400, seed=5)
    _ = log_predictions(log, "m", "1", TEMPERATURE, logits, [f"r{i}" for i in range(400)], time=T0,
                        labels=labels.tolist())
    query = WindowQuery("m", "1", temperature=TEMPERATURE, start=T0, end=T0 + timedelta(hours=1))
    both = reweight_window(log, query, priors=RAISED, reference_priors=UNIFORM, tested_priors=UNIFORM)
    plain = reweight_window(log, query, priors=RAISED, reference_priors=UNIFORM)
    assert both.gain == plain.gain  # the gain at ``priors`` either way
    assert both.summary.overall.nll == pytest.approx(
        summarise_arrays(logits, labels, temperature=TEMPERATURE, start=T0, end=T0).overall.nll)  # w = 1
    assert plain.summary.overall.nll < both.summary.overall.nll
