"""The version record: one typed value, written as tags and read back; the previous tag format."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from calibration import PriorCorrection
from flows.records.versions import RefitProvenance, VersionRecord, registered_version

REFIT = RefitProvenance(
    parent_version="1", parent_temperature=2.69879, parent_gate_threshold=None, parent_baseline_ece=0.025,
    alias="champion", traffic_window="[2026-01-01T00:00:00+00:00, 2026-01-01T01:00:00+00:00)",
    traffic_first_served_at="2026-01-01T00:00:01+00:00", traffic_last_served_at="2026-01-01T00:59:59+00:00",
    traffic_n=1200, fit_n=600, verify_n=600, split="by serving time: the older 50% fits T, the newer rest verifies",
    verification="verification passed", verification_p_value=None, verification_shape="calibrated",
)
REFITTED = dataclasses.replace(
    VersionRecord.example(), temperature=4.70203, gate_threshold=None, gate_accepted_accuracy=None, refit=REFIT,
    temperature_before=2.69879, holdout_accuracy_source="recent labelled traffic of the parent version",
)

# Tags exactly as the previous release wrote them (flows/pipelines/reports.py's version_tags and
# refit_tags before the record existed): the binning only as a sentence, no ece_scheme/ece_n_bins.
PREVIOUS_FORMAT = {
    "temperature": "2.698790178874412", "temperature_bounds": "0.05,20.0", "gate_threshold": "0.8588",
    "gate_target_accuracy": "0.97", "gate_confidence_level": "0.95", "gate_coverage": "0.896",
    "gate_accepted_accuracy": "0.9876", "checkpoint_uri": "runs:/63677cc74e01447d810d912120565efa/checkpoint",
    "checkpoint_digest": "5ffe7e3544e262fe1cc691738e9e6a4cbcc97a8cd74b77940645666a8bf3946e",
    "checkpoint_output": "logits", "calibration_data_version": "0123456789abcdef", "calibration_n": "449",
    "holdout_data_version": "fedcba9876543210", "train_steps": "57", "train_data_version": "sklearn-digits/train-898",
    "holdout_accuracy": "0.9533", "holdout_metrics_n": "450",
    "holdout_metrics_split": "evaluation part of the holdout (not used to fit T)", "holdout_nll_before": "0.3376",
    "holdout_nll_after": "0.1779", "holdout_ece_before": "0.0358", "holdout_ece_after": "0.025",
    "nll_reduction": "mean", "bootstrap_nll_change": "-0.1597", "bootstrap_nll_change_low": "-0.2822",
    "bootstrap_nll_change_high": "-0.054", "bootstrap_confidence_level": "0.95", "bootstrap_verdict": "improved",
    "ece_binning": "equal-width, 15 bins, top-label confidence, bin m = (m/M, (m+1)/M], 0 in the first bin",
    "fitted_at": "2026-11-30T20:48:12.296000+00:00", "idempotency_key": "9" * 64, "pipeline_run_id": "e6fb7072",
    "thermostat.registration": "complete",
}
PREVIOUS_REFIT = PREVIOUS_FORMAT | {
    "refit_parent_version": "1", "refit_parent_temperature": "2.698790178874412", "refit_parent_gate_threshold": "none",
    "refit_parent_baseline_ece": "0.025", "refit_alias": "champion",
    "refit_traffic_window": "[2026-11-30T20:48:15.999000+00:00, 2026-11-30T20:48:16.091000+00:00)",
    "refit_traffic_first_served_at": "2026-11-30T20:48:16.010534+00:00",
    "refit_traffic_last_served_at": "2026-11-30T20:48:16.090000+00:00", "refit_traffic_n": "1200", "refit_fit_n": "600",
    "refit_verify_n": "600", "refit_split": "by serving time: the older 50% fits T, the newer rest verifies",
    "refit_verification": "verification passed on the newer 600 rows", "refit_verification_p_value": "0.351",
    "refit_verification_shape": "calibrated", "temperature_before": "2.698790178874412",
    "holdout_accuracy_source": "recent labelled traffic of the parent version",
}


@pytest.mark.parametrize("record", [VersionRecord.example(), REFITTED], ids=["fine-tune", "refit"])
def test_every_field_round_trips_through_tags(record: VersionRecord) -> None:
    tags = record.to_tags()
    assert all(isinstance(value, str) for value in tags.values())
    assert VersionRecord.from_tags(tags) == record
    assert tags["ece_n_bins"] == "15" and tags["ece_scheme"] == "equal-width"  # fields, not a sentence


def test_floats_keep_every_digit_and_undefined_is_none() -> None:
    record = dataclasses.replace(VersionRecord.example(), temperature=0.1 + 0.2, gate_threshold=None)
    tags = record.to_tags()
    assert tags["temperature"] == "0.30000000000000004" and tags["gate_threshold"] == "none"
    assert "temperature_before" not in tags and not any(key.startswith("refit_") for key in tags)
    assert VersionRecord.from_tags(tags).temperature == 0.1 + 0.2


def test_the_pyfunc_config_comes_from_the_record() -> None:
    assert REFITTED.model_config() == {"temperature": 4.70203, "gate_threshold": None, "checkpoint_output": "logits",
                                       "prior_correction": None}
    corrected = dataclasses.replace(REFITTED, prior_correction=CORRECTION)
    assert corrected.model_config()["prior_correction"] == {"priors": [0.4, 0.2, 0.4],
                                                          "reference_priors": [0.25, 0.25, 0.5]}


CORRECTION = PriorCorrection([0.4, 0.2, 0.4], [0.25, 0.25, 0.5])


def test_a_prior_correction_round_trips_through_its_tag_and_a_record_without_one_reads_none() -> None:
    record = dataclasses.replace(REFITTED, prior_correction=PriorCorrection([0.1 + 0.2, 0.5, 0.2], [1, 1, 1]))
    tags = record.to_tags()
    back = VersionRecord.from_tags(tags)
    assert back == record and back.prior_correction is not None
    assert back.prior_correction.priors[0] == (0.1 + 0.2) / 1.0 and back.prior_correction.reference_priors[0] == 1 / 3
    # Versions without a correction keep the tags they had before the field existed.
    assert "prior_correction" not in REFITTED.to_tags()
    assert VersionRecord.from_tags(REFITTED.to_tags()).prior_correction is None
    assert VersionRecord.from_tags(PREVIOUS_FORMAT).prior_correction is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"priors": [0.5, 0.5]}', r"exactly 'priors' and 'reference_priors'"),
        ('{"priors": [0.5, 0], "reference_priors": [0.5, 0.5]}', r"priors\[1\] is 0.0; every prior must be finite and > 0"),
        ('{"priors": [0.3, 0.3, 0.4], "reference_priors": [0.5, 0.5]}', r"priors must have one value per class \(2\)"),
        ('{"priors": ["a", 1], "reference_priors": [0.5, 0.5]}', r"'priors' must be a list of numbers"),
        ("[0.5", r"must be JSON"),
    ],
)
def test_an_unreadable_prior_correction_tag_is_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"digits version 2: tag 'prior_correction' is .*" + message):
        VersionRecord.from_tags(PREVIOUS_FORMAT | {"prior_correction": text}, where="digits version 2")


def test_a_prior_correction_is_checked_once_when_made() -> None:
    with pytest.raises(ValueError, match=r"reference_priors must hold one prior per class \(at least 2\)"):
        PriorCorrection([1.0], [1.0])
    with pytest.raises(ValueError, match=r"reference_priors\[0\] is nan"):
        PriorCorrection([0.5, 0.5], [float("nan"), 1.0])
    assert PriorCorrection([2, 2], [1, 3]).priors.tolist() == [0.5, 0.5]


@pytest.mark.parametrize("tags", [PREVIOUS_FORMAT, PREVIOUS_REFIT], ids=["fine-tune", "refit"])
def test_the_previous_tag_format_is_read(tags: dict[str, str]) -> None:
    record = VersionRecord.from_tags(tags)
    assert (record.ece_scheme, record.ece_n_bins) == ("equal-width", 15)
    assert record.temperature == 2.698790178874412 and record.gate_threshold == 0.8588
    assert (record.refit is not None) == ("refit_fit_n" in tags)
    if record.refit is not None:
        assert record.refit.fit_n == 600 and record.refit.parent_gate_threshold is None
    version = registered_version("digits", "3", tags, ["champion"])
    assert (version.n_bins, version.baseline_ece, version.drift_reference.nll) == (15, 0.025, 0.1779)


def test_the_interval_and_reference_sums_round_trip_and_legacy_versions_have_none() -> None:
    record = VersionRecord.example()
    tags = record.to_tags()
    assert tags["temperature_low"] == "2.3" and tags["reference_n"] == "450"
    assert tags["reference_ece_estimator"] == "debiased_l1"
    back = VersionRecord.from_tags(tags)
    assert back.temperature_interval == (2.3, 2.7) and back.reference_ece_interval == (0.0, 0.03)
    stats = back.reference_stats
    assert stats is not None and (stats.temperature, stats.n, stats.curvature_sum) == (2.5, 450, 310.25)
    version = registered_version("digits", "1", tags)
    reference = version.drift_reference.overall
    assert (reference.ece, reference.ece_low, reference.ece_high, reference.ece_estimator) == (0.012, 0.0, 0.03,
                                                                                          "debiased_l1")
    assert version.baseline_ece == 0.02  # binned baseline kept
    # A version registered before these tags existed: read, with nothing to test two-sample against.
    legacy = registered_version("digits", "3", PREVIOUS_FORMAT)
    assert legacy.record.temperature_low is None and legacy.temperature_interval is None
    old = legacy.drift_reference.overall
    assert old.temperature_stats is None and not old.has_ece_interval
    # Its only ECE is the binned holdout ECE, and it says so: the ECE test will not compare it with another estimator.
    assert old.ece == legacy.baseline_ece == 0.025 and old.ece_estimator == "binned"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"calibration_n": "many"}, r"digits version 2: tag 'calibration_n' is 'many'; expected int"),
        ({"checkpoint_output": "scores"}, r"tag 'checkpoint_output' is 'scores'; expected"),
        ({"ece_binning": "fifteen bins"}, r"tag 'ece_binning' is 'fifteen bins'; expected '<scheme>, <M> bins, \.\.\.'"),
        ({"temperature": "none"}, r"tag 'temperature' is 'none'; expected float"),
    ],
)
def test_unreadable_tags_are_named(change: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        VersionRecord.from_tags(PREVIOUS_FORMAT | change, where="digits version 2")


def test_the_monitor_state_tags_are_read_and_bad_ones_named() -> None:
    from datetime import UTC, datetime

    from flows.records.versions import INSUFFICIENT_STREAK_TAG, LAST_CONFIDENCE_SHIFT_TAG, SEQUENTIAL_STATE_TAG, MonitorState
    from monitoring import ConfidenceProfile, SequentialState

    profile = ConfidenceProfile.from_logits([[2.0, 0.0], [0.0, 1.0]], [0, 0], temperature=2.5)
    tags = dataclasses.replace(VersionRecord.example(), reference_confidence_profile=profile.to_json()).to_tags()
    fresh = registered_version("digits", "1", tags)
    assert fresh.monitor == MonitorState() and fresh.last_drift_event_at is None
    assert fresh.reference_profile == profile
    state = SequentialState.initial(2.5)
    kept = registered_version("digits", "1", tags | {SEQUENTIAL_STATE_TAG: state.to_json(), INSUFFICIENT_STREAK_TAG: "4",
                                                     LAST_CONFIDENCE_SHIFT_TAG: "2026-01-01T00:00:00+00:00"})
    assert kept.monitor == MonitorState(sequential=state, insufficient_streak=4,
                                        last_confidence_shift_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert MonitorState.from_tags(kept.monitor.to_tags()) == kept.monitor
    assert kept.monitor.changed_tags(kept.monitor) == {}
    assert registered_version("digits", "3", PREVIOUS_FORMAT).reference_profile is None
    for bad, message in (({SEQUENTIAL_STATE_TAG: "{}"}, "tag 'thermostat.sequential_state': sequential state is not"),
                         ({INSUFFICIENT_STREAK_TAG: "-1"}, "tag 'thermostat.insufficient_data_streak' is '-1'"),
                         ({LAST_CONFIDENCE_SHIFT_TAG: "soon"}, "tag 'thermostat.last_confidence_shift_at' is 'soon'")):
        with pytest.raises(ValueError, match=f"digits version 1: {message}"):
            registered_version("digits", "1", tags | bad)


def test_a_missing_tag_is_named() -> None:
    tags = {key: value for key, value in PREVIOUS_FORMAT.items() if key != "holdout_ece_after"}
    with pytest.raises(ValueError, match=r"lacks the registration tag\(s\) \['holdout_ece_after'\]"):
        VersionRecord.from_tags(tags)


@pytest.mark.integration
def test_round_trip_and_previous_format_on_a_real_mlflow_store(tmp_path: Path) -> None:
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.create_run(client.create_experiment("e", artifact_location=(tmp_path / "a").as_uri()))
    client.create_registered_model("digits")
    written = {}
    for record_tags in (dataclasses.replace(REFITTED, prior_correction=CORRECTION).to_tags(), PREVIOUS_REFIT):
        version = client.create_model_version("digits", source=f"runs:/{run.info.run_id}/model",
                                              run_id=run.info.run_id, tags=record_tags)
        written[str(version.version)] = record_tags
    stored = {number: dict(client.get_model_version("digits", number).tags) for number in written}
    assert VersionRecord.from_tags(stored["1"]) == dataclasses.replace(REFITTED, prior_correction=CORRECTION)
    previous = VersionRecord.from_tags(stored["2"], where="digits version 2")
    assert previous.ece_n_bins == 15 and previous.refit is not None and previous.refit.verify_n == 600


def test_a_reference_ece_of_another_estimator_is_never_compared() -> None:
    """A version registered before the reference ECE was stored has only its binned holdout ECE;
    the monitor's ECE test uses the debiased estimator. Compared, the two made an over-confident
    window look like an ECE drift by the binned estimator's upward bias alone (the previous main
    did: 'ece' fired below). Now the test refuses to compare them and says so; the temperature
    test still runs."""
    from datetime import UTC, datetime

    import numpy as np

    from monitoring import decide_drift, drift_payload, summarise_arrays

    legacy = registered_version("digits", "3", PREVIOUS_FORMAT, ["champion"])
    rng = np.random.default_rng(0)
    logits = 2.0 * rng.normal(size=(3_000, 10))
    p = np.exp(logits / 1.6)
    p /= p.sum(axis=1, keepdims=True)
    labels = (rng.random((3_000, 1)) > p.cumsum(axis=1)).sum(axis=1).clip(0, 9)  # served too sharp: ECE far above 0.025
    t = datetime(2026, 1, 1, tzinfo=UTC)
    summary = summarise_arrays(logits, labels, temperature=legacy.temperature, start=t, end=t, n_bins=legacy.n_bins)
    report = decide_drift(summary, legacy.drift_reference)
    ece = report.outcome("ece")
    assert ece is not None and not ece.fired and ece.refused is not None
    assert "'binned'" in ece.refused and "'debiased_l1'" in ece.refused and "never compared" in ece.refused
    assert "ece" not in report.tests_fired and any("ECE test not run" in reason for reason in report.reasons)
    assert drift_payload(report)["ece_drift"] is False
    # A version with a debiased reference is compared as before.
    current = registered_version("digits", "1", VersionRecord.example().to_tags(), ["champion"])
    assert current.drift_reference.overall.ece_estimator == "debiased_l1"


def test_the_reference_priors_round_trip_through_the_version_tags() -> None:
    import numpy as np

    from calibration import ReferencePriors
    from flows.records.versions import encode_reference_priors

    rng = np.random.default_rng(3)
    logits, labels = rng.normal(size=(400, 10)) * 3.0, rng.integers(0, 10, size=400)
    priors = ReferencePriors.from_logits(logits, labels, temperature=1.7)
    record = dataclasses.replace(VersionRecord.example(), reference_prior_sums=encode_reference_priors(priors))
    read = registered_version("digits", "1", record.to_tags()).reference_priors
    assert VersionRecord.from_tags(record.to_tags()) == record
    assert read is not None and read.to_dict() == priors.to_dict()  # every float to its last digit
    assert np.array_equal(read.posterior_outer_sum, priors.posterior_outer_sum) and read.temperature == 1.7
    # A version registered before they were stored has none (no diagnosis of priors), never an error.
    assert registered_version("digits", "3", PREVIOUS_FORMAT).reference_priors is None
    # A K too large for an MLflow tag (2 K + 2 K² numbers) is not registered, rather than refused by MLflow.
    wide = ReferencePriors.from_logits(rng.normal(size=(200, 120)), rng.integers(0, 120, size=200))
    assert encode_reference_priors(wide) is None
    with pytest.raises(ValueError, match="reference priors"):
        dataclasses.replace(VersionRecord.example(), reference_prior_sums='{"n": 3}').reference_priors
