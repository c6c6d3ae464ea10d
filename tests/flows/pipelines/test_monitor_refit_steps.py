"""Pure pieces of the monitor and the refit: version tags, alias grouping, windows, the
bounded traffic read, and the refit's typed chain with its verification — no MLflow, no Prefect."""

from __future__ import annotations

import dataclasses
import pickle

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from calibration import ReliabilityTable, ScoredSet
from flows.pipelines.monitor import artifact_key
from flows.pipelines.refit import RefitFailed, RefitOutcome, refit_artifact_key
from flows.records.runs import DriftCause
from flows.pipelines.tasks import check_window
from flows.settings import ThermostatSettings
from flows.records.outcomes import MESSAGE_LIMIT
from flows.pipelines.steps import (
    ESCALATION,
    RefitOrigin,
    StepRefused,
    _shape_reason,
    accept_registered_version,
    gate_threshold,
    refit_temperature_by_time,
    verify_refit,
    weakened_guard,
)
from flows.pipelines.traffic import recent_labelled_traffic
from flows.records.versions import LAST_DRIFT_EVENT_TAG, VersionRecord, registered_version, serving_versions, version_context
from monitoring import PredictionLog, diagnose_reliability_shape, log_predictions
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
    # One refit report per parent version, the model named by the same rule as the monitor's keys.
    assert refit_artifact_key("Tickets EN/v2", "12") == "refit-tickets-en-v2-v12"
    assert refit_artifact_key("digits", "1") != refit_artifact_key("digits", "2")
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
    assert ESCALATION in " ".join(verification.reasons) and verification.escalate


def test_a_refit_while_calibration_still_moves_fails_without_escalation(settings: ThermostatSettings) -> None:
    """The older rows want T = 1.5, the newer ones T = 3: at the fitted T the newer rows are
    consistently over-confident ('volume'), which a refit on more recent traffic may fix."""
    rng = np.random.default_rng(6)
    older, older_labels = tempered_traffic(1000, rng, true_temperature=1.5)
    newer, newer_labels = tempered_traffic(1000, rng, true_temperature=3.0)
    calibrated, gated = _refit_chain(np.vstack([older, newer]), np.concatenate([older_labels, newer_labels]),
                                     settings)
    assert abs(calibrated.temperature - 1.5) < 0.25
    verification = verify_refit(gated, settings=settings)
    assert not verification.passed and verification.drift_after.verdict == "drift"
    assert verification.shape.shape == "volume" and not verification.escalate
    text = " ".join(verification.reasons)
    assert ESCALATION not in text and "needs retraining" not in text
    assert "calibration is still moving" in text and "a refit on more recent traffic may fix it" in text
    assert "they want T" in text  # the newer rows' own T, from the temperature test


def _shape(correct_fraction: list[float], *, min_count: int = 10):
    """The diagnosed shape of five bins of 400 rows at confidences 0.1 .. 0.9 with these accuracies."""
    edges = np.linspace(0, 1, 6)
    count = np.full(5, 400)
    confidence = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    table = ReliabilityTable.from_bin_sums(edges[:-1], edges[1:], count, confidence * count,
                                           np.round(np.array(correct_fraction) * count), scheme="equal-width",
                                           min_count=min_count)
    return diagnose_reliability_shape(table)


SHAPES = {
    "calibrated": ([0.1, 0.3, 0.5, 0.7, 0.9], {}),
    "volume": ([0.05, 0.2, 0.4, 0.6, 0.8], {}),
    "arched": ([0.2, 0.7, 0.8, 0.8, 0.75], {}),
    "saw-tooth": ([0.3, 0.1, 0.8, 0.5, 0.99], {}),
    "empty": ([0.1, 0.3, 0.5, 0.7, 0.9], {"min_count": 1000}),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_no_refusal_says_a_temperature_can_correct_it_and_escalates(name: str, settings: ThermostatSettings) -> None:
    """The reason a refit does not verify never says both "a single temperature can correct this"
    and "needs retraining": only a shape one T cannot fix escalates."""
    accuracies, options = SHAPES[name]
    shape = _shape(accuracies, **options)
    assert shape.shape == name
    logits, labels = arched_traffic(2000, np.random.default_rng(2))
    _, gated = _refit_chain(logits, labels, settings)
    verification = dataclasses.replace(verify_refit(gated, settings=settings), shape=shape)
    reason = _shape_reason(shape, verification.drift_after, temperature=verification.temperature_after)
    refusal = "the refit does not verify: " + "; ".join((*verification.reasons[:-1], reason))
    assert not ("can correct" in refusal and "needs retraining" in refusal), refusal
    escalates = name in ("arched", "saw-tooth")
    assert (ESCALATION in reason) == escalates and verification.escalate == escalates


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
    assert not verification.passed and verification.within_parent_interval and not verification.escalate
    assert verification.parent_interval == (1.8, 2.2)
    assert verification.reasons[0].startswith("not a fix: the new T") and "[1.8, 2.2]" in verification.reasons[0]
    assert "inside the parent's interval [1.8, 2.2]" in verification.summary
    # The words match the case: the rows it was fitted on, and what may succeed (not "once labels arrive").
    assert "the 1000 rows it was fitted on, served from 2026-01-01T00:00:00+00:00 on" in verification.reasons[0]
    assert "too little drifted data" in verification.reasons[0] and "where the drift began" in verification.reasons[0]


def test_the_refit_records_the_reference_for_the_two_sample_test(settings: ThermostatSettings) -> None:
    logits, labels = tempered_traffic(2000, np.random.default_rng(1), true_temperature=2.0)
    calibrated, gated = _refit_chain(logits, labels, settings)
    assert calibrated.reference.n == calibrated.fit.n and calibrated.reference.temperature == calibrated.temperature
    assert abs(calibrated.reference.gradient_sum) < 1e-3 * calibrated.reference.n  # T is optimal on its own rows
    assert gated.reference_ece.estimator == "debiased_l1" and gated.reference_ece.low <= gated.reference_ece.high
    verification = verify_refit(gated, settings=settings)
    assert verification.passed and not verification.within_parent_interval
    assert verification.drift_after.reference.overall.temperature_stats is calibrated.reference


def test_a_refused_refit_is_an_exception_that_keeps_its_outcome(settings: ThermostatSettings) -> None:
    """RefitFailed is the data of the refit's Failed state: raised by a direct call, and pickled
    with its outcome when Prefect persists the result."""
    logits, labels = arched_traffic(2000, np.random.default_rng(2))
    _, gated = _refit_chain(logits, labels, settings)
    verification = verify_refit(gated, settings=settings)
    reason = "the refit does not verify: " + "; ".join(verification.reasons)
    outcome = RefitOutcome(
        status="failed", model_name="m", parent_version="1", alias="champion", parent_temperature=1.0, reason=reason,
        step="verify", escalation=ESCALATION if verification.escalate else None, registration=None,
        verification=verification, event_id=None, cause=DriftCause("e-1", "r-1"),
    )
    # The final state's message: what was refused and why, the escalation first (a long reason is cut).
    assert outcome.state_message.startswith(f"refit of m v1 @champion registered nothing (verify step): {ESCALATION}: "
                                            "the refit does not verify: ")
    summary = outcome.summary()
    assert summary.status == "failed" and summary.details["escalation"] == ESCALATION
    assert summary.details["step"] == "verify" and summary.details["reason"] == reason
    error = RefitFailed(outcome)
    assert str(error).startswith("refit of m v1 @champion registered nothing (verify step): the refit does not")
    assert str(error).count(ESCALATION) == 1  # already in the reason: not repeated
    again = pickle.loads(pickle.dumps(error))
    assert isinstance(again, RefitFailed) and str(again) == str(error)
    assert again.outcome.reason == reason and again.outcome.cause == outcome.cause
    assert again.outcome.verification is not None and again.outcome.verification.shape == verification.shape
    quiet = dataclasses.replace(outcome, escalation=None, reason="x" * 500)
    assert quiet.state_message.endswith(" ...") and len(quiet.state_message) == MESSAGE_LIMIT


def test_a_monitor_run_names_every_failed_check_and_every_version_it_could_not_read() -> None:
    """The run's one error names each failed check with its error and each unreadable version with
    why, also when checks failed too (the unreadable ones were left out of such an error)."""
    from flows.pipelines.monitor import UnreadableVersion, _failure
    from flows.records.versions import VersionRecord, registered_version

    checked = [registered_version("digits", str(n), VersionRecord.example().to_tags(), ["champion"]) for n in (1, 2)]
    unreadable = [UnreadableVersion("tickets", "2", ("challenger", "shadow"), "tag 'temperature' is missing")]
    lost = ConnectionError("the log went away")
    assert _failure("the fleet", 2, [], []) is None
    assert _failure("the fleet", 2, [(checked[0], lost)], []) is lost  # one failure: its own error
    both = _failure("the fleet", 2, [(checked[0], lost), (checked[1], KeyError("k"))], unreadable)
    assert isinstance(both, RuntimeError) and both.__cause__ is lost
    assert str(both) == ("2 of 2 checks of the fleet failed: digits v1: ConnectionError: the log went away; digits v2: "
                         "KeyError: 'k'. 1 serving version(s) could not be read, so were not checked: tickets v2 "
                         "(@challenger, @shadow): tag 'temperature' is missing")
    only = _failure("the fleet", 2, [(checked[0], lost)], unreadable)
    assert isinstance(only, RuntimeError) and "digits v1: ConnectionError" in str(only) and "tickets v2" in str(only)


def test_a_refit_that_would_weaken_the_monitor_or_the_gate_is_refused(settings: ThermostatSettings) -> None:
    """A refit registered version 3 with baseline ECE 0.102 and drift threshold 0.122 where version 1
    had 0.022 / 0.042 (the next drift had to be five times larger to be seen), and versions without
    a gate threshold where their parent had one: the guard refuses both, saying so."""
    logits, labels = tempered_traffic(2000, np.random.default_rng(1), true_temperature=2.0)
    _, gated = _refit_chain(logits, labels, settings)
    assert weakened_guard(gated, settings=settings) is None, "a refit as good as its parent passes"
    worse = dataclasses.replace(gated, after=dataclasses.replace(gated.after, ece=0.102),
                                reference_ece=dataclasses.replace(gated.reference_ece, estimate=0.102))
    parent_022 = dataclasses.replace(gated.accepted.refit_of.parent.record, holdout_ece_after=0.022,
                                     reference_ece=0.022, reference_ece_estimator=gated.reference_ece.estimator)
    reason = weakened_guard(_with_parent(worse, parent_022), settings=settings)
    assert reason is not None and reason.startswith("registering it would weaken the monitor or the gate")
    assert f"drift reference ECE ({gated.reference_ece.estimator}) 0.1020 is worse than version 1's 0.0220" in reason
    assert "drift threshold would rise from 0.0420 to 0.1220" in reason
    lenient = settings.model_copy(update={"refit_max_ece_increase": 0.1})
    assert weakened_guard(_with_parent(worse, parent_022), settings=lenient) is None, "the tolerance is a setting"
    legacy = dataclasses.replace(parent_022, reference_ece=None, reference_ece_low=None, reference_ece_high=None,
                                 reference_ece_estimator=None)
    reason = weakened_guard(_with_parent(worse, legacy), settings=settings)
    assert reason is not None and "baseline ECE (binned) 0.1020 is worse than version 1's 0.0220" in reason
    ungated = dataclasses.replace(gated, choice=dataclasses.replace(gated.choice, threshold=None))
    reason = weakened_guard(ungated, settings=settings)
    assert reason is not None and "no gate threshold where version 1 had 0.9000" in reason


def _with_parent(gated, record):  # type: ignore[no-untyped-def]
    parent = registered_version("m", "1", record.to_tags(), ["champion"])
    origin = dataclasses.replace(gated.accepted.refit_of, parent=parent)
    accepted = dataclasses.replace(gated.accepted, refit_of=origin)
    return dataclasses.replace(gated, calibrated=dataclasses.replace(gated.calibrated, accepted=accepted))
