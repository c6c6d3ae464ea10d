"""The post-finetune deployment for real: a Prefect server on loopback, a process worker,
``prefect deploy`` from the repository root, a run through the API, the version in MLflow."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from tests.integration.conftest import Registered, Template, deploy_all_and_start_worker, stop_process

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_post_finetune_deployment_runs_on_a_process_worker(
    prefect_server: tuple[str, dict[str, str]], template: Template, tmp_path: Path
) -> None:
    api_url, env = prefect_server
    state = Path(env["THERMOSTAT_STATE_DIR"])
    state.mkdir()
    shutil.copyfile(template.db, state / "mlflow.db")
    worker = deploy_all_and_start_worker(env, tmp_path)
    try:
        from prefect.client.schemas.objects import FlowRun
        from prefect.deployments import run_deployment
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: api_url}):
            flow_run = run_deployment(
                "post-finetune/post-finetune",
                parameters={
                    "model_name": "digits", "checkpoint_uri": template.checkpoints["logistic"].uri,
                    "train_steps": 7, "train_data_version": "digits-train-v1",
                    "features_path": str(template.features_path),
                    "training_ids_path": str(template.training_ids_path),
                },
                timeout=240,
            )
        assert isinstance(flow_run, FlowRun)
        assert flow_run.state is not None and flow_run.state.is_completed(), (
            f"{flow_run.state}\n{(tmp_path / 'worker.log').read_text()[-4000:]}"
        )
    finally:
        stop_process(worker, signal.SIGINT, 15)

    registry = MlflowRegistry.from_settings(ThermostatSettings(state_dir=state))
    holder = registry.alias_holder("digits", "champion")
    assert holder is not None and str(holder.version) == "1"
    assert holder.tags["checkpoint_uri"] == template.checkpoints["logistic"].uri
    assert float(holder.tags["temperature"]) > 1.5


@pytest.mark.parametrize("source", ["log", "export-on-dask"])
def test_monitor_deployment_drift_event_triggers_the_refit_deployment(
    prefect_server: tuple[str, dict[str, str]], registered: Registered, tmp_path: Path, source: str
) -> None:
    """monitor (deployment) -> drift event -> automation from prefect.yaml's trigger -> refit
    (deployment) -> a new version with a new T, the alias moved: all on a process worker.

    ``export-on-dask``: the worker reads windows from the partitioned export of the log (which
    is then emptied), and the monitor summarises it on a temporary Dask cluster through
    prefect-dask's DaskTaskRunner."""
    from datetime import UTC, datetime, timedelta

    import numpy as np

    from monitoring import PredictionLog, export_prediction_log, log_predictions

    api_url, env = prefect_server
    state = Path(env["THERMOSTAT_STATE_DIR"])
    state.mkdir()
    shutil.copyfile(registered.db, state / "mlflow.db")
    start = datetime.now(UTC) - timedelta(minutes=10)
    with PredictionLog(f"sqlite:///{state / 'predictions.db'}") as log:
        log.create()
        log_predictions(log, "digits", "1", registered.temperature, registered.noisy_logits[:1200],
                        [f"noisy-{i}" for i in range(1200)], time=[start + timedelta(seconds=i / 4) for i in range(1200)],
                        labels=np.asarray(registered.noisy_labels[:1200]))
        if source == "export-on-dask":
            export_prediction_log(log, "digits", "1", state / "export", row_group_size=300)
    if source == "export-on-dask":
        # Emptied, not deleted: the monitor's stream checks read the log, and a missing log is an
        # error (issue 19). With no row left in it, the windows can only come from the export.
        (state / "predictions.db").unlink()
        with PredictionLog(f"sqlite:///{state / 'predictions.db'}") as empty:
            empty.create()
        env = env | {"THERMOSTAT_WINDOW_SOURCE": "export", "THERMOSTAT_EXPORT_PATH": str(state / "export"),
                     "THERMOSTAT_ENGINE": "dask", "THERMOSTAT_DASK_WORKERS": "2"}
    worker = deploy_all_and_start_worker(env, tmp_path)
    registry = MlflowRegistry.from_settings(ThermostatSettings(state_dir=state))
    try:
        from prefect.client.schemas.objects import FlowRun
        from prefect.deployments import run_deployment
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: api_url}):
            flow_run = run_deployment("monitor/monitor", parameters={"model_name": "digits"}, timeout=180)
            assert isinstance(flow_run, FlowRun)
            assert flow_run.state is not None and flow_run.state.is_completed(), (
                f"{flow_run.state}\n{(tmp_path / 'worker.log').read_text()[-4000:]}"
            )
            if source == "export-on-dask":  # the check's window was summarised by one task per partition
                from prefect.client.orchestration import get_client
                from prefect.client.schemas.filters import (
                    FlowFilter,
                    FlowFilterName,
                    FlowRunFilter,
                    FlowRunFilterId,
                )

                with get_client(sync_client=True) as client:
                    [subflow] = client.read_flow_runs(
                        flow_filter=FlowFilter(name=FlowFilterName(any_=["summarise-export"])))
                    tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[subflow.id])))
                assert subflow.state is not None and subflow.state.is_completed()
                assert sorted(task.name.rsplit("-", 1)[0] for task in tasks) == ["summarise-partition"] * 4
        # The refit is started by the automation, not by this test: wait for its registration.
        deadline = time.monotonic() + 180
        holder = registry.alias_holder("digits", "champion")
        while (holder is None or str(holder.version) != "2") and time.monotonic() < deadline:
            time.sleep(2)
            holder = registry.alias_holder("digits", "champion")
        assert holder is not None and str(holder.version) == "2", (tmp_path / "worker.log").read_text()[-6000:]
        # The refit tags the check's run after the alias moved: the worker must live until that last write.
        from flows.records.runs import VERSION_DRIFT_TAG_PREFIX, DriftCause, RefitLink

        cause = DriftCause.from_tags(holder.tags, VERSION_DRIFT_TAG_PREFIX)
        assert cause.event_id is not None and cause.run_id is not None, holder.tags
        link = None
        while link is None and time.monotonic() < deadline + 60:
            check = registry.runs(ThermostatSettings(state_dir=state).monitoring_experiment_name)
            link = RefitLink.from_tags(next(run for run in check if run.run_id == cause.run_id).tags)
            time.sleep(0 if link is not None else 1)
    finally:
        stop_process(worker, signal.SIGINT, 15)

    parent = registry.get_version("digits", "1")
    assert holder.tags["refit_parent_version"] == "1"
    assert holder.tags["checkpoint_digest"] == parent.tags["checkpoint_digest"]
    assert float(holder.tags["temperature"]) > float(parent.tags["temperature"]) + 0.5
    assert "thermostat.last_drift_event_at" in parent.tags
    # The trigger passed the drift's ids: the new version names the check, whose run names the refit.
    assert link is not None and link.status == "registered" and link.new_version == "2"


def test_label_shift_gets_a_prior_corrected_version_and_the_returned_mix_takes_it_off(
    prefect_server: tuple[str, dict[str, str]], registered: Registered, tmp_path: Path
) -> None:
    """Issue 22's story on the deployments: label-shifted traffic -> the monitor's diagnosis "label
    shift" -> its event -> the correct-priors deployment (prefect.yaml's trigger) registers a
    prior-corrected version, served as the re-weighted softmax -> the mix returns -> the next
    check of that version undoes it: a version without the correction is served again. (The
    temperature-shifted path to the refit is the test above.)"""
    from scipy.special import softmax

    from calibration import prior_corrected_log_probabilities
    from flows.records.versions import registered_version
    from monitoring import PredictionLog
    from tests.integration.test_prior_correction import _load, _log, _probabilities, _traffic

    api_url, env = prefect_server
    state = Path(env["THERMOSTAT_STATE_DIR"])
    state.mkdir()
    shutil.copyfile(registered.db, state / "mlflow.db")
    settings = ThermostatSettings(state_dir=state)
    with PredictionLog(f"sqlite:///{state / 'predictions.db'}") as log:
        log.create()
    registry = MlflowRegistry.from_settings(settings)
    parent = _load(registry, "1", tmp_path)
    temperature = parent.unwrap_python_model().temperature
    features, labels = _traffic(registered, 0.4, 2000, seed=21)
    _log(settings, parent, features, labels, tag="mix", version="1")
    worker = deploy_all_and_start_worker(env, tmp_path)

    def served_after_check(expected: str) -> Any:
        from prefect.client.schemas.objects import FlowRun
        from prefect.deployments import run_deployment
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: api_url}):
            flow_run = run_deployment("monitor/monitor", parameters={"model_name": "digits"}, timeout=240)
        assert isinstance(flow_run, FlowRun) and flow_run.state is not None and flow_run.state.is_completed(), (
            f"{flow_run.state}\n{(tmp_path / 'worker.log').read_text()[-4000:]}")
        # The correction is registered by the automation, not by this test: wait for the alias.
        deadline = time.monotonic() + 240
        holder = registry.alias_holder("digits", "champion")
        while (holder is None or str(holder.version) != expected) and time.monotonic() < deadline:
            time.sleep(2)
            holder = registry.alias_holder("digits", "champion")
        assert holder is not None and str(holder.version) == expected, (tmp_path / "worker.log").read_text()[-6000:]
        return registered_version("digits", expected, dict(holder.tags), ["champion"])

    try:
        corrected = served_after_check("2")
        correction = corrected.record.prior_correction
        assert correction is not None and corrected.temperature == temperature
        assert corrected.checkpoint_digest == registered_version("digits", "1", dict(
            registry.get_version("digits", "1").tags), []).checkpoint_digest
        assert correction.priors[3] == pytest.approx(0.4, abs=0.07), correction
        model = _load(registry, "2", tmp_path)
        raw = model.unwrap_python_model().raw_logits(features[:200])
        expected = np.exp(prior_corrected_log_probabilities(raw, temperature=temperature, priors=correction.priors,
                                                            reference_priors=correction.reference_priors))
        np.testing.assert_allclose(_probabilities(model, features[:200]), expected, rtol=0, atol=1e-12)

        # The mix returns to the reference's: the next check of version 2 undoes the correction.
        back, back_labels = _traffic(registered, None, 2000, seed=22)
        _log(settings, model, back, back_labels, tag="back", version="2")
        undone = served_after_check("3")
        assert undone.record.prior_correction is None and undone.temperature == temperature
        plain = _load(registry, "3", tmp_path)
        raw = plain.unwrap_python_model().raw_logits(back[:200])
        np.testing.assert_allclose(_probabilities(plain, back[:200]), softmax(raw / temperature, axis=1), rtol=0, atol=1e-12)
    finally:
        stop_process(worker, signal.SIGINT, 15)
