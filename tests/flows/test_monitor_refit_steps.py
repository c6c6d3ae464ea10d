"""Pure pieces of the monitor and the refit: version tags, alias grouping, windows, the
bounded traffic read, and the refit's typed chain with its verification — no MLflow, no Prefect."""

from __future__ import annotations

import dataclasses

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from calibration import ScoredSet
from flows.monitor import artifact_key
from flows.tasks import check_window
from flows.settings import ThermostatSettings
from flows.steps import (
    ESCALATION,
    RefitOrigin,
    StepRefused,
    accept_registered_version,
    gate_threshold,
    refit_temperature_by_time,
    verify_refit,
)
from flows.traffic import recent_labelled_traffic
from flows.versions import LAST_DRIFT_EVENT_TAG, VersionRecord, registered_version, serving_versions, version_context
from monitoring import PredictionLog, log_predictions
from tests.flows.synthetic import arched_traffic, tempered_traffic

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TAGS = dataclasses.replace(
    VersionRecord.example(), temperature=1.0, gate_threshold=0.9, holdout_ece_after=0.02, holdout_nll_after=0.5
).to_tags()


def test_registered_version_reads_tags_and_cooldown_state() -> None:
    version = registered_version("m", "4", TAGS | {LAST_DRIFT_EVENT_TAG: "2026-01-01T10:00:00+00:00"}, ["b", "champion"])
    assert version.aliases == ("champion", "b") and version.alias == "champion"
    assert (version.temperature, version.gate_threshold, version.baseline_ece, version.n_bins) == (1.0, 0.9, 0.02, 15)
    assert version.last_drift_event_at == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert "m v4 @champion @b" in version.context and "T=1" in version.context


def test_registered_version_refuses_a_version_without_registration_tags() -> None:
    with pytest.raises(ValueError, match=r"lacks the registration tag\(s\) \['holdout_ece_after'\]"):
        registered_version("m", "1", {k: v for k, v in TAGS.items() if k != "holdout_ece_after"})
    with pytest.raises(ValueError, match="finite T > 0"):
        registered_version("m", "1", TAGS | {"temperature": "-1"})


def test_serving_versions_groups_aliases_and_refuses_unknown_ones() -> None:
    assert serving_versions({"champion": "10", "b": "2", "c": "10"}) == {"2": ("b",), "10": ("champion", "c")}
    assert serving_versions({"champion": "1", "b": "2"}, ["b"]) == {"2": ("b",)}
    with pytest.raises(ValueError, match="do not exist"):
        serving_versions({"champion": "1"}, ["canary"])


def test_window_defaults_to_the_monitor_window_ending_now() -> None:
    settings = ThermostatSettings(monitor_window=timedelta(hours=24))
    assert check_window(None, None, settings, T0) == (T0 - timedelta(hours=24), T0)
    assert check_window(T0, T0 + timedelta(minutes=5), settings, T0 + timedelta(days=9)) == (T0, T0 + timedelta(minutes=5))
    with pytest.raises(ValueError, match="no timezone"):
        check_window(None, datetime(2026, 1, 1), settings, T0)
    with pytest.raises(ValueError, match="is empty"):
        check_window(T0, T0, settings, T0)


def test_artifact_keys_are_valid_prefect_keys() -> None:
    assert artifact_key("Tickets EN/v2", "12", "table") == "calibration-tickets-en-v2-v12-table"
    assert version_context("m", "1", [], "u", None) == "[m v1 checkpoint=u T=pending]"


def test_settings_read_iso_durations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THERMOSTAT_MONITOR_WINDOW", "PT2H")
    monkeypatch.setenv("THERMOSTAT_DRIFT_COOLDOWN", "PT30M")
    settings = ThermostatSettings()
    assert (settings.monitor_window, settings.drift_cooldown) == (timedelta(hours=2), timedelta(minutes=30))
    assert settings.resolved_prediction_log_url().endswith("/predictions.db")


def test_recent_traffic_keeps_only_the_newest_rows_in_serving_order() -> None:
    log = PredictionLog("sqlite://")
    log.create()
    rng = np.random.default_rng(0)
    logits, labels = tempered_traffic(25, rng)
    times = [T0 + timedelta(seconds=i) for i in range(25)]
    log_predictions(log, "m", "1", 1.0, logits, [f"r{i:02d}" for i in range(25)], time=times, labels=labels,
                    groups=["g"] * 25)
    traffic = recent_labelled_traffic(log, "m", "1", start=T0, end=T0 + timedelta(hours=1), max_rows=10, chunk_size=3)
    assert traffic is not None and traffic.n_in_window == 25
    assert traffic.scored.ids.tolist() == [f"r{i:02d}" for i in range(15, 25)]
    np.testing.assert_array_equal(traffic.scored.labels, labels[15:])
    np.testing.assert_array_equal(traffic.scored.logits, logits[15:].astype(np.float32))
    assert traffic.first_served_at == times[15] and traffic.last_served_at == times[24]
    assert traffic.scored.groups is not None
    assert recent_labelled_traffic(log, "m", "1", start=T0 - timedelta(hours=2), end=T0, max_rows=10,
                                   chunk_size=3) is None


def _refit_chain(logits: np.ndarray, labels: np.ndarray, settings: ThermostatSettings, *, digest: str = "d" * 64,
                 tags: dict[str, str] = TAGS):
    parent = registered_version("m", "1", tags, ["champion"])
    n = labels.shape[0]
    origin = RefitOrigin(parent=parent, alias="champion", window_start=T0, window_end=T0 + timedelta(hours=1),
                         first_served_at=T0, last_served_at=T0 + timedelta(seconds=n), fit_fraction=0.5)
    traffic = ScoredSet.from_arrays(logits, labels, ids=[f"req-{i}" for i in range(n)])
    accepted = accept_registered_version(origin=origin, checkpoint_digest=digest, traffic=traffic,
                                         training_ids=np.array([], dtype=str), settings=settings)
    calibrated = refit_temperature_by_time(accepted, settings=settings)
    return calibrated, gate_threshold(calibrated, settings=settings)


def test_refit_on_a_volume_shift_splits_by_time_and_verifies(settings: ThermostatSettings) -> None:
    logits, labels = tempered_traffic(2000, np.random.default_rng(1), true_temperature=2.0)
    calibrated, gated = _refit_chain(logits, labels, settings)
    # The older half fits, the newer half verifies: by position (serving order), not at random.
    assert calibrated.calibration_ids.tolist() == [f"req-{i}" for i in range(1000)]
    assert calibrated.evaluation_ids[0] == "req-1000"
    assert abs(calibrated.temperature - 2.0) < 0.25
    # Before = the parent's T (1.0), not an uncalibrated default.
    assert gated.bootstrap.temperature_before == 1.0 and gated.accepted.temperature_before == 1.0
    verification = verify_refit(gated, settings=settings)
    assert verification.passed, verification.reasons
    assert verification.nll_verdict == "improved" and verification.drift_after.verdict != "drift"
    assert verification.ece_before > verification.ece_after


def test_refit_on_an_arched_curve_does_not_verify_and_says_why(settings: ThermostatSettings) -> None:
    logits, labels = arched_traffic(2000, np.random.default_rng(2))
    _, gated = _refit_chain(logits, labels, settings)
    verification = verify_refit(gated, settings=settings)
    assert not verification.passed
    assert verification.drift_after.verdict == "drift"
    assert verification.shape.shape in ("arched", "saw-tooth") and not verification.shape.single_temperature_can_fix
    assert ESCALATION in " ".join(verification.reasons)


def test_refit_refuses_changed_checkpoint_files(settings: ThermostatSettings) -> None:
    logits, labels = tempered_traffic(400, np.random.default_rng(3))
    with pytest.raises(StepRefused, match="a refit makes a new version of the SAME checkpoint"):
        _refit_chain(logits, labels, settings, digest="e" * 64)


def test_refit_refuses_a_collapsed_model_and_escalates(settings: ThermostatSettings) -> None:
    rng = np.random.default_rng(4)
    logits, _ = tempered_traffic(800, rng)
    labels = rng.integers(0, 10, 800)  # the model is right 10% of the time: no T helps
    with pytest.raises(StepRefused, match=ESCALATION) as refused:
        _refit_chain(logits, labels, settings)
    assert refused.value.escalate


def test_a_refit_inside_the_parents_interval_is_refused_as_not_a_fix(settings: ThermostatSettings) -> None:
    """The parent's T is 2.0 with interval [1.8, 2.2]; the traffic still wants T = 2: not a fix."""
    tags = TAGS | {"temperature": "2.0", "temperature_low": "1.8", "temperature_high": "2.2"}
    logits, labels = tempered_traffic(2000, np.random.default_rng(5), true_temperature=2.0)
    calibrated, gated = _refit_chain(logits, labels, settings, tags=tags)
    assert 1.8 < calibrated.temperature < 2.2
    verification = verify_refit(gated, settings=settings)
    assert not verification.passed and verification.within_parent_interval
    assert verification.parent_interval == (1.8, 2.2)
    assert verification.reasons[0].startswith("not a fix: the new T") and "[1.8, 2.2]" in verification.reasons[0]
    assert "inside the parent's interval [1.8, 2.2]" in verification.summary


def test_the_refit_records_the_reference_for_the_two_sample_test(settings: ThermostatSettings) -> None:
    logits, labels = tempered_traffic(2000, np.random.default_rng(1), true_temperature=2.0)
    calibrated, gated = _refit_chain(logits, labels, settings)
    assert calibrated.reference.n == calibrated.fit.n and calibrated.reference.temperature == calibrated.temperature
    assert abs(calibrated.reference.gradient_sum) < 1e-3 * calibrated.reference.n  # T is optimal on its own rows
    assert gated.reference_ece.estimator == "debiased_l1" and gated.reference_ece.low <= gated.reference_ece.high
    verification = verify_refit(gated, settings=settings)
    assert verification.passed and not verification.within_parent_interval
    assert verification.drift_after.reference_stats is calibrated.reference
