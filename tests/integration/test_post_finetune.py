"""The post-finetune flow against a real MLflow store and a real Prefect API (issue 3)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mlflow
import mlflow.pyfunc
import numpy as np
import pytest

from calibration import ScoredSet, calibrated_probabilities
from flows.registry.checkpoint import checkpoint_logits, download_checkpoint
from flows.holdout import write_features
from flows.pipelines.post_finetune import post_finetune
from flows.pipelines.registration import register
from flows.records.versions import VersionRecord
from flows.registry.adapter import MlflowRegistry
from flows.pipelines.steps import DigestMismatchError, StepRefused, accept_checkpoint, gate_threshold, refit_temperature
from tests.integration.conftest import Store, mlflow_client

pytestmark = pytest.mark.integration

REQUIRED_TAGS = {
    "temperature", "gate_threshold", "gate_target_accuracy", "checkpoint_uri", "checkpoint_digest",
    "calibration_data_version", "calibration_n", "train_steps", "train_data_version", "holdout_accuracy",
    "holdout_nll_before", "holdout_nll_after", "holdout_ece_before", "holdout_ece_after",
    "bootstrap_nll_change_low", "bootstrap_nll_change_high", "bootstrap_verdict", "ece_binning", "fitted_at",
    "idempotency_key",
}


def _versions(registry: MlflowRegistry) -> list[str]:
    return sorted(str(v.version) for v in registry.versions("digits"))


def _alias(registry: MlflowRegistry, alias: str = "champion") -> str | None:
    holder = registry.alias_holder("digits", alias)
    return None if holder is None else str(holder.version)


def test_full_flow_registers_one_version_with_every_tag(store: Store) -> None:
    state = post_finetune(**store.run_args("logistic"), return_state=True)
    registration = state.result()
    assert registration.created and registration.version == "1"
    # The run's final state says what was registered (a deployment run's caller sees the state, not the result).
    assert state.is_completed() and state.message == registration.summary().message
    assert state.message.startswith(f"registered digits version 1 (models:/digits/1): T={registration.temperature:.4g} [")
    assert registration.summary().details["model_uri"] == "models:/digits/1"
    assert _versions(store.registry) == ["1"] and _alias(store.registry) == "1"
    tags = mlflow_client(store.registry).get_model_version("digits", "1").tags
    assert REQUIRED_TAGS <= set(tags)
    assert float(tags["temperature"]) == registration.temperature > 1.5  # the over-confident checkpoint
    assert tags["checkpoint_uri"] == store.template.checkpoints["logistic"].uri
    assert tags["train_steps"] == "7" and tags["calibration_n"] == str(len(store.template.split.holdout_index) // 2)
    # The stored tags are the record's, field for field: reading them back and writing again gives them.
    record = VersionRecord.from_tags(tags)
    assert record.to_tags().items() <= tags.items() and record.temperature == registration.temperature
    assert (record.ece_scheme, record.ece_n_bins, record.pipeline_run_id) == ("equal-width", 15, registration.run_id)
    run = mlflow_client(store.registry).get_run(registration.run_id or "")
    assert run.info.status == "FINISHED" and float(run.data.metrics["temperature"]) == registration.temperature
    artifacts = {a.path for a in mlflow_client(store.registry).list_artifacts(run.info.run_id, "evidence")}
    assert {"evidence/reliability_diagram.png", "evidence/gate_sweep.csv", "evidence/qualification_report.json",
            "evidence/split_ids.json"} <= artifacts
    # MLflow's version page shows the description first: T with its interval, the gate, the verdict, the evidence.
    description = mlflow_client(store.registry).get_model_version("digits", "1").description
    assert description.startswith(f"**T = {registration.temperature:.4g}** (95% interval "
                                  f"{record.temperature_low:.4g} – {record.temperature_high:.4g}; search bounds")
    assert f"**gate threshold {registration.gate_threshold:.4f}**" in description
    assert f"**Verdict: {tags['bootstrap_verdict']}**" in description
    assert f"MLflow run [`{run.info.run_id}`](#/experiments/{run.info.experiment_id}/runs/{run.info.run_id})" in description
    assert mlflow.active_run() is None


def test_registered_pyfunc_applies_temperature_exactly(store: Store, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    registration = post_finetune(**store.run_args("logistic"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.settings.resolved_tracking_uri())
    served = mlflow.pyfunc.load_model("models:/digits@champion")
    split = store.template.split
    features = split.features[split.holdout_index]
    frame = served.predict(features)
    files = download_checkpoint(store.template.checkpoints["logistic"].uri, tmp_path / "ckpt",
                                tracking_uri=store.settings.resolved_tracking_uri())
    logits, kind = checkpoint_logits(files, features)
    assert kind == "logits"
    expected = calibrated_probabilities(logits, temperature=registration.temperature)
    probabilities = frame[[f"prob_{k}" for k in range(10)]].to_numpy()
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=1e-14)
    assert registration.gate_threshold is not None
    assert ((frame["decision"] == "auto") == (frame["confidence"] >= registration.gate_threshold)).all()
    assert mlflow.active_run() is None


def test_acceptance_refuses_id_overlap_and_registers_nothing(store: Store, tmp_path: Path) -> None:
    split = store.template.split
    leaked = list(split.training_ids) + list(split.ids[split.holdout_index][:3])
    with pytest.raises(StepRefused, match=r"3 holdout id\(s\) are also training ids"):
        post_finetune(**store.run_args("logistic", training_ids_path=None, training_ids=leaked))
    assert _versions(store.registry) == [] and _alias(store.registry) is None


def test_acceptance_refuses_accuracy_regression_and_registers_nothing(store: Store) -> None:
    post_finetune(**store.run_args("logistic"))
    with pytest.raises(StepRefused, match="below the current holder"):
        post_finetune(**store.run_args("weak"))
    assert _versions(store.registry) == ["1"] and _alias(store.registry) == "1"


def test_fit_at_a_bound_registers_nothing(store: Store, tmp_path: Path) -> None:
    # Only examples the checkpoint gets right, 6 per class: a small zero-error calibration part.
    split = store.template.split
    files = download_checkpoint(store.template.checkpoints["logistic"].uri, tmp_path / "ckpt",
                                tracking_uri=store.settings.resolved_tracking_uri())
    features, labels = split.features[split.holdout_index], split.labels[split.holdout_index]
    logits, _ = checkpoint_logits(files, features)
    right = np.flatnonzero(logits.argmax(axis=1) == labels)
    rows = np.concatenate([right[labels[right] == k][:6] for k in range(10)])
    path = write_features(tmp_path / "easy.npz", ids=split.ids[split.holdout_index][rows], features=features[rows],
                          labels=labels[rows])
    small = store.settings.model_copy(update={"min_total": 10, "min_per_class": 2, "max_tv_distance": 1.0})
    with pytest.raises(StepRefused, match="lower bound"):
        post_finetune(**store.run_args("logistic", features_path=str(path), settings=small))
    assert _versions(store.registry) == []


def test_repeat_registers_nothing_new(store: Store) -> None:
    first = post_finetune(**store.run_args("logistic"))
    again = post_finetune(**store.run_args("logistic"))
    assert (first.created, again.created, again.alias_moved) == (True, False, False)
    assert again.version == first.version and _versions(store.registry) == ["1"]


def test_second_alias_gets_its_own_version_and_temperature(store: Store) -> None:
    champion = post_finetune(**store.run_args("logistic"))
    challenger = post_finetune(**store.run_args("mlp", alias="challenger"))
    assert (_alias(store.registry), _alias(store.registry, "challenger")) == ("1", "2")
    assert abs(champion.temperature - challenger.temperature) > 0.5


def test_failure_at_the_alias_step_leaves_no_version_and_no_moved_alias(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    post_finetune(**store.run_args("logistic"))

    def refuse_alias(self: MlflowRegistry, name: str, alias: str, version: str) -> None:
        raise RuntimeError("injected: alias store unavailable")

    # The registry cannot be made to fail on cue, so this one fault is injected.
    monkeypatch.setattr(MlflowRegistry, "set_alias", refuse_alias)
    with pytest.raises(RuntimeError, match="injected"):
        post_finetune(**store.run_args("mlp"))
    assert _versions(store.registry) == ["1"] and _alias(store.registry) == "1"
    failed = mlflow_client(store.registry).search_runs([store.registry.experiment_id()], "attributes.status = 'FAILED'")
    assert len(failed) == 1


def test_failure_after_the_alias_moved_restores_it(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    post_finetune(**store.run_args("logistic"))
    end_run = MlflowRegistry.end_run

    def fail_on_finish(self: MlflowRegistry, run_id: str, *, failed: bool = False) -> None:
        if not failed:
            raise RuntimeError("injected: cannot close the run")
        end_run(self, run_id, failed=True)

    monkeypatch.setattr(MlflowRegistry, "end_run", fail_on_finish)
    with pytest.raises(RuntimeError, match="injected"):
        post_finetune(**store.run_args("mlp"))
    assert _versions(store.registry) == ["1"] and _alias(store.registry) == "1"


def test_register_refuses_a_mismatched_checkpoint_digest(store: Store, tmp_path: Path) -> None:
    settings, split = store.settings, store.template.split
    holdout = split.holdout_index
    results, files = {}, {}
    for name in ("logistic", "mlp"):
        files[name] = download_checkpoint(store.template.checkpoints[name].uri, tmp_path / name,
                                          tracking_uri=settings.resolved_tracking_uri())
        logits, kind = checkpoint_logits(files[name], split.features[holdout])
        accepted = accept_checkpoint(
            checkpoint_uri=files[name].uri, checkpoint_digest=files[name].digest, checkpoint_output=kind,
            holdout=ScoredSet.from_arrays(logits, split.labels[holdout], ids=split.ids[holdout]),
            training_ids=split.training_ids, champion=None, train_steps=1, train_data_version="v", settings=settings,
        )
        results[name] = gate_threshold(refit_temperature(accepted, settings=settings), settings=settings)
    forged = dataclasses.replace(results["logistic"], calibrated=results["mlp"].calibrated)
    with pytest.raises(DigestMismatchError, match="temperature fit was computed on"):
        register(forged, files["logistic"], registry=store.registry, model_name="digits", alias="champion",
                 settings=settings)
    # The same files under the URI the gate result names, but their content changed.
    swapped = dataclasses.replace(files["mlp"], uri=files["logistic"].uri)
    with pytest.raises(DigestMismatchError, match="has digest"):
        register(results["logistic"], swapped, registry=store.registry, model_name="digits", alias="champion",
                 settings=settings)
    assert _versions(store.registry) == []


def test_model_lock_is_a_lease_row_that_is_released(store: Store) -> None:
    from flows.orchestration.locks import model_lock, show_lock

    url = store.settings.resolved_prediction_log_url()
    with model_lock("lock-probe", url=url, timeout_seconds=10, description="probe"):
        holder = show_lock("lock-probe", store.settings)
        assert holder is not None and holder.description == "probe" and holder.alive and not holder.expired
    assert show_lock("lock-probe", store.settings) is None


def _qualification(store: Store, run_id: str) -> dict[str, object]:
    import json

    path = mlflow_client(store.registry).download_artifacts(run_id, "evidence/qualification_report.json")
    return dict(json.loads(Path(path).read_text()))


def test_class_mix_is_checked_against_the_alias_holders_recent_traffic(store: Store) -> None:
    """Rule 4(a): the calibration part must look like production, read from the prediction log."""
    from datetime import UTC, datetime, timedelta

    from monitoring import PredictionLog, log_predictions

    first = post_finetune(**store.run_args("logistic"))
    report = _qualification(store, first.run_id or "")
    # No production traffic yet: the check is said not to have run, not silently passed.
    assert report["tv_distance"] is None
    assert any("reference" in str(w) for w in report["warnings"])  # type: ignore[union-attr]

    # Production turns out to be nine tenths class 0: the balanced digits holdout no longer
    # looks like it, so the next checkpoint's calibration part is refused, nothing registered.
    rng = np.random.default_rng(0)
    labels = np.where(rng.random(600) < 0.9, 0, rng.integers(1, 10, 600))
    log = PredictionLog(store.settings.resolved_prediction_log_url())
    log.create()
    now = datetime.now(UTC)
    log_predictions(log, "digits", "1", first.temperature, rng.normal(size=(600, 10)),
                    [f"req-{i}" for i in range(600)], time=[now - timedelta(minutes=i) for i in range(600)],
                    labels=labels)
    log.dispose()
    with pytest.raises(StepRefused, match=r"does not qualify.*total-variation|does not qualify.*class"):
        post_finetune(**store.run_args("mlp"))
    assert _versions(store.registry) == ["1"] and _alias(store.registry) == "1"


def test_a_second_run_for_the_same_model_waits_for_the_first(store: Store) -> None:
    """Two runs never interleave: while another holder has the model's lock, a run waits for
    it and, past its timeout, fails having registered nothing. Then it goes through."""
    from flows.orchestration.locks import model_lock

    settings = store.settings.model_copy(update={"lock_timeout_seconds": 3.0})
    with model_lock("digits", url=settings.resolved_prediction_log_url(), timeout_seconds=30):  # "the other run"
        with pytest.raises(TimeoutError, match="thermostat-register-digits is still held"):
            post_finetune(**store.run_args("logistic", settings=settings))
    assert _versions(store.registry) == []
    assert post_finetune(**store.run_args("logistic", settings=settings)).version == "1"
