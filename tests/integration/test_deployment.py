"""The post-finetune deployment for real: a Prefect server on loopback, a process worker,
``prefect deploy`` from the repository root, a run through the API, the version in MLflow."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from tests.integration.conftest import Registered, Template, deploy_all_and_start_worker, stop_process, stop_worker

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
        stop_worker(worker, api_url)

    registry = MlflowRegistry.from_settings(ThermostatSettings(state_dir=state))
    holder = registry.alias_holder("digits", "champion")
    assert holder is not None and str(holder.version) == "1"
    assert holder.tags["checkpoint_uri"] == template.checkpoints["logistic"].uri
    assert float(holder.tags["temperature"]) > 1.5


@pytest.mark.parametrize("source", ["log", "export-on-dask", "drift-mid-window"])
def test_monitor_deployment_drift_event_triggers_the_refit_deployment(
    prefect_server: tuple[str, dict[str, str]], registered: Registered, tmp_path: Path, source: str
) -> None:
    """monitor (deployment) -> drift event -> automation from prefect.yaml's trigger -> refit
    (deployment) -> a new version with a new T, the alias moved: all on a process worker.

    ``export-on-dask``: the worker reads windows from the partitioned export of the log (which
    is then emptied), and the monitor summarises it on a temporary Dask cluster through
    prefect-dask's DaskTaskRunner.

    ``drift-mid-window``: the window's first half is in-distribution traffic, the drift begins
    half-way through it; the check dates the change, and the refit the automation starts reads
    from there (its version's first served row is after the drift began), with no manual step."""
    from datetime import UTC, datetime, timedelta

    import numpy as np

    from monitoring import PredictionLog, export_prediction_log, log_predictions

    api_url, env = prefect_server
    state = Path(env["THERMOSTAT_STATE_DIR"])
    state.mkdir()
    shutil.copyfile(registered.db, state / "mlflow.db")
    start = datetime.now(UTC) - timedelta(minutes=10)
    drift_start = start + timedelta(seconds=300)  # drift-mid-window: 1,200 clean rows first, then 1,200 noisy
    with PredictionLog(f"sqlite:///{state / 'predictions.db'}") as log:
        log.create()
        if source == "drift-mid-window":
            log_predictions(log, "digits", "1", registered.temperature, registered.clean_logits[:1200],
                            [f"clean-{i}" for i in range(1200)],
                            time=[start + timedelta(seconds=i / 4) for i in range(1200)],
                            labels=np.asarray(registered.clean_labels[:1200]))
        noisy_start = drift_start if source == "drift-mid-window" else start
        log_predictions(log, "digits", "1", registered.temperature, registered.noisy_logits[:1200],
                        [f"noisy-{i}" for i in range(1200)],
                        time=[noisy_start + timedelta(seconds=i / 4) for i in range(1200)],
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
        stop_worker(worker, api_url)

    parent = registry.get_version("digits", "1")
    assert holder.tags["refit_parent_version"] == "1"
    assert holder.tags["checkpoint_digest"] == parent.tags["checkpoint_digest"]
    assert float(holder.tags["temperature"]) > float(parent.tags["temperature"]) + 0.5
    assert "thermostat.last_drift_event_at" in parent.tags
    # The trigger passed the drift's ids: the new version names the check, whose run names the refit.
    assert link is not None and link.status == "registered" and link.new_version == "2"
    if source == "drift-mid-window":  # the refit read the drifted rows, not the window's clean first half
        first_read = datetime.fromisoformat(holder.tags["refit_traffic_first_served_at"])
        assert first_read >= drift_start - timedelta(seconds=30), (first_read, drift_start, holder.tags)


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
        stop_worker(worker, api_url)


def _store_of(registered: Registered, state: Path, model_name: str) -> MlflowRegistry:
    """The registered store (version 1 @champion) under ``state``, its model renamed ``model_name``:
    a user's own model, not the demo's."""
    from tests.integration.conftest import mlflow_client

    state.mkdir()
    shutil.copyfile(registered.db, state / "mlflow.db")
    registry = MlflowRegistry.from_settings(ThermostatSettings(state_dir=state))
    mlflow_client(registry).rename_registered_model("digits", model_name)
    return registry


def _log_traffic(state: Path, model_name: str, temperature: float, logits: Any, labels: Any, tag: str) -> None:
    """Labelled traffic of ``model_name`` v1 (served at ``temperature``) over the last ten minutes."""
    from datetime import UTC, datetime, timedelta

    from monitoring import PredictionLog, log_predictions

    start, n = datetime.now(UTC) - timedelta(minutes=10), len(labels)
    with PredictionLog(f"sqlite:///{state / 'predictions.db'}") as log:
        log.create()
        log_predictions(log, model_name, "1", temperature, logits, [f"{tag}-{i}" for i in range(n)],
                        time=[start + timedelta(seconds=i / 4) for i in range(n)], labels=np.asarray(labels))


def _watch(env: dict[str, str], tmp_path: Path, *arguments: str) -> Callable[[], tuple[int, str]]:
    """Start ``prefect deployment run ARGUMENTS --watch`` as a user types it (a wide terminal: no
    wrapped lines); the function returned waits for it and gives its exit status and output."""
    from tests.integration.conftest import VENV_BIN

    output = tmp_path / f"watch-{arguments[0].split('/')[0]}.log"
    with output.open("wb") as file:
        process = subprocess.Popen([str(VENV_BIN / "prefect"), "deployment", "run", *arguments, "--watch",
                                    "--watch-timeout", "300"], cwd=tmp_path, env=env | {"COLUMNS": "10000"},
                                   stdout=file, stderr=subprocess.STDOUT)

    def finished() -> tuple[int, str]:
        return process.wait(timeout=360), output.read_text()

    return finished


def _outcome(output: str) -> dict[str, Any]:
    """The run's outcome as its last own log line carries it (``outcome {JSON}``), from what ``--watch`` printed."""
    import json

    found = [line.split(" outcome ", 1)[1] for line in output.splitlines() if " outcome {" in line]
    assert found, f"no outcome line in the watched run's output:\n{output[-4000:]}"
    outcome: dict[str, Any] = json.loads(found[-1])
    return outcome


def test_the_shipped_schedule_checks_a_users_model_and_watch_shows_each_runs_outcome(
    prefect_server: tuple[str, dict[str, str]], registered: Registered, tmp_path: Path
) -> None:
    """prefect.yaml's only schedule is monitor-fleet's, active, with no model named: deployed, it
    checks a model called ``tickets``. ``prefect deployment run ... --watch`` prints each run's
    outcome: the checks' verdicts, and a refit's refusal with its reason (exit 1)."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    api_url, env = prefect_server
    state = Path(env["THERMOSTAT_STATE_DIR"])
    registry = _store_of(registered, state, "tickets")
    _log_traffic(state, "tickets", registered.temperature, registered.clean_logits[:1200],
                 registered.clean_labels[:1200], "clean")
    worker = deploy_all_and_start_worker(env, tmp_path)
    try:
        with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
            fleet = client.read_deployment_by_name("monitor-fleet/monitor-fleet")
            single = client.read_deployment_by_name("monitor/monitor")
        [hourly] = fleet.schedules
        assert hourly.active and hourly.schedule.cron == "0 * * * *" and not hourly.parameters  # every model
        assert single.schedules == []  # no model of the demo's checked by default

        # What the hourly schedule starts: monitor-fleet with the schedule's parameters (none); and a
        # refit the traffic does not call for, at the same time (one worker runs both).
        fleet_run = _watch(env, tmp_path, "monitor-fleet/monitor-fleet")
        refit_run = _watch(env, tmp_path, "refit/refit", "--param", "model_name=tickets")
        (fleet_status, checked), (refit_status, refused) = fleet_run(), refit_run()
        assert fleet_status == 0, checked[-4000:]
        outcome = _outcome(checked)
        assert outcome["flow"] == "monitor-fleet" and outcome["status"] in ("calibrated", "undetermined"), outcome
        assert outcome["message"].startswith("checked 1 serving version(s) of 1 model(s): tickets v1 (@champion, T=")
        assert [(c["model_name"], c["version"], c["verdict"]) for c in outcome["details"]["checks"]] == [
            ("tickets", "1", outcome["status"])]
        runs = registry.runs(ThermostatSettings(state_dir=state).monitoring_experiment_name)
        assert [(run.tags["thermostat.model_name"], run.tags["thermostat.verdict"]) for run in runs
                if run.tags.get("thermostat.kind") == "check"] == [("tickets", outcome["status"])]

        # The refit is refused: the caller's terminal says why, and the command exits 1.
        assert refit_status == 1, refused[-4000:]
        outcome = _outcome(refused)
        assert (outcome["flow"], outcome["status"], outcome["details"]["step"]) == ("refit", "failed", "verify")
        assert outcome["message"].startswith("refit of tickets v1 @champion registered nothing (verify step): the refit "
                                             "does not verify: "), outcome
        assert "Flow run finished in state 'Failed'" in refused
    finally:
        stop_worker(worker, api_url)
    assert [str(v.version) for v in registry.versions("tickets")] == ["1"]


def _invoke(url: str, features: Any) -> list[dict[str, Any]]:
    """``/invocations`` of a served digits model, or [] while it does not answer (restarting)."""
    import httpx

    body = {"dataframe_split": {"columns": [str(j) for j in range(features.shape[1])], "data": features.tolist()}}
    try:
        answer = httpx.post(f"{url}/invocations", json=body, timeout=30)
    except httpx.TransportError:
        return []
    if answer.status_code != 200:
        return []
    predictions: list[dict[str, Any]] = answer.json()["predictions"]
    return predictions


def test_thermostat_serve_restarts_mlflow_models_serve_on_the_new_version_after_a_refit(
    prefect_server: tuple[str, dict[str, str]], registered: Registered, tmp_path: Path
) -> None:
    """The hook of docs/serving.md: ``thermostat serve tickets`` runs ``mlflow models serve`` of the
    version @champion points at; a refit (against the real Prefect server) registers version 2 and
    emits its refitted event; the server is restarted on version 2, which answers, with its T.
    (That ``mlflow models serve`` answers as registered: tests/integration/test_serving_feeds_monitor.py.)"""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.pipelines.refit import refit
    from tests.integration.conftest import VENV_BIN
    from tests.support.ports import free_port

    api_url, env = prefect_server
    state = Path(env["THERMOSTAT_STATE_DIR"])
    _store_of(registered, state, "tickets")
    _log_traffic(state, "tickets", registered.temperature, registered.noisy_logits[:1200],
                 registered.noisy_labels[:1200], "noisy")
    split = registered.template.split
    features = split.features[split.holdout_index][:5]
    url = f"http://127.0.0.1:{free_port()}"
    # The alias is read only every hour here: only the refitted event can restart the server in time.
    with (tmp_path / "serve.log").open("wb") as log:
        hook = subprocess.Popen([str(VENV_BIN / "thermostat"), "serve", "tickets", "--alias", "champion", "--port",
                                 url.rsplit(":", 1)[1], "--check-every", "3600"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # The hook resolved @champion (version 1) and watches the events; its server starts during the refit.
        deadline = time.monotonic() + 120
        while "serving models:/tickets/1 (@champion)" not in (tmp_path / "serve.log").read_text():
            assert hook.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-4000:]
            time.sleep(0.2)
        with temporary_settings({PREFECT_API_URL: api_url}):
            outcome = refit("tickets", settings=ThermostatSettings(state_dir=state, bootstrap_resamples=300))
        assert outcome.new_version == "2" and outcome.temperature is not None
        refitted = time.monotonic()
        answered = _invoke(url, features)
        while {row["model_version"] for row in answered} != {"2"}:
            assert time.monotonic() < refitted + 60, (tmp_path / "serve.log").read_text()[-4000:]
            time.sleep(0.5)
            answered = _invoke(url, features)
        print(f"version 2 answered {time.monotonic() - refitted:.1f} s after the refit returned")
        assert {row["temperature"] for row in answered} == {outcome.temperature}
        text = (tmp_path / "serve.log").read_text()
        assert (f"@champion points at version 2 (refitted event: version 2, T={outcome.temperature:.4g}, "
                "models:/tickets/2): restarting mlflow models serve on models:/tickets/2") in text, text[-4000:]
    finally:
        stopped = stop_process(hook, signal.SIGTERM, 60, group=True)
    assert stopped and hook.returncode == 0, (tmp_path / "serve.log").read_text()[-4000:]
    assert "stopped (was serving version 2)" in (tmp_path / "serve.log").read_text()
    # A model the registry does not have is bad input, before any server starts.
    missing = subprocess.run([str(VENV_BIN / "thermostat"), "serve", "digits"], env=env, capture_output=True,
                             text=True, timeout=120)
    assert missing.returncode == 2 and (
        "thermostat serve: error: digits@champion does not exist (no such model, or no such alias): register a "
        "version first") in missing.stderr, missing.stderr
