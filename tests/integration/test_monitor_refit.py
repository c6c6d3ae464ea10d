"""The monitor and the refit against a real MLflow store, a real prediction log (SQLite) and a
real Prefect API (issue 4): MLflow runs with timestamped metrics and the diagram, Prefect
artifacts, the drift event read back from the events API, the cool-down, and the refit's
registration (or its refusal, a Failed flow run), linked both ways to the check that caused it."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd
import pytest

from flows.pipelines.monitor import STALE_AFTER, artifact_key, monitor
from flows.pipelines.tasks import open_prediction_log
from flows.pipelines.refit import RefitFailed, refit, refit_artifact_key
from flows.records.events import RefittedEvent
from flows.records.outcomes import MESSAGE_LIMIT
from flows.registry.adapter import MlflowRegistry
from flows.records.runs import VERSION_DRIFT_TAG_PREFIX, DriftCause, RefitLink, RefitRecord
from flows.registry.serving import ServedModel
from flows.settings import ThermostatSettings
from flows.pipelines.steps import ESCALATION
from flows.records.versions import LAST_DRIFT_EVENT_TAG
from monitoring import log_predictions
from tests.flows.synthetic import arched_traffic
from tests.integration.conftest import Registered, mlflow_client

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(registered: Registered, tmp_path: Path) -> ThermostatSettings:
    shutil.copyfile(registered.db, tmp_path / "mlflow.db")
    return ThermostatSettings(state_dir=tmp_path, bootstrap_resamples=300)


def _log(settings: ThermostatSettings, logits: Any, labels: Any, *, start: datetime, tag: str,
         temperature: float, version: str = "1") -> tuple[datetime, datetime]:
    """Log labelled traffic of digits v<version> spread over one minute from ``start``; return its window."""
    n = len(labels)
    times = [start + timedelta(seconds=60 * i / n) for i in range(n)]
    with open_prediction_log(settings) as log:
        log_predictions(log, "digits", version, temperature, logits, [f"{tag}-{i}" for i in range(n)],
                        groups="camera", time=times, labels=np.asarray(labels))
    return start, start + timedelta(minutes=1)


def _events(name: str, resource_id: str, since: datetime, *, at_least: int, timeout: float = 30.0,
            where: Callable[[Any], bool] | None = None) -> list[Any]:
    """Events from the Prefect API that ``where`` keeps (they are persisted asynchronously:
    poll until ``at_least`` of them are there; other tests' events share the resource id)."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventOccurredFilter, EventResourceFilter

    deadline = time.monotonic() + timeout
    while True:
        with get_client(sync_client=True) as client:
            # limit: the client defaults to 100, which this server refuses (at most 50).
            page = client.read_events(limit=50, filter=EventFilter(
                occurred=EventOccurredFilter(since=since, until=datetime.now(UTC) + timedelta(minutes=5)),
                event=EventNameFilter(name=[name]), resource=EventResourceFilter(id=[resource_id]),
            ))
        kept = [event for event in page.events if where is None or where(event)]
        if len(kept) >= at_least or time.monotonic() > deadline:
            return kept
        time.sleep(0.5)


def _markdown_artifacts(key: str) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
    return [str(artifact.data) for artifact in found]


def test_serving_helper_returns_the_pyfunc_output_and_logs_raw_logits(
    registered: Registered, settings: ThermostatSettings, tmp_path: Path
) -> None:
    registry = MlflowRegistry.from_settings(settings)
    served = ServedModel.load("models:/digits@champion", registry=registry, cache_dir=tmp_path / "serve")
    split = registered.template.split
    features = split.features[split.holdout_index][:40]
    with open_prediction_log(settings) as log:
        frame = served.predict_and_log(features, [f"s-{i}" for i in range(40)], log, groups="web")
        chunks = list(log.iter_labelled("digits", "1", datetime(2000, 1, 1, tzinfo=UTC), datetime.now(UTC)))
        assert chunks == []  # no label yet
        log.attach_labels([f"s-{i}" for i in range(40)], split.labels[split.holdout_index][:40])
        chunk = next(log.iter_labelled("digits", "1", datetime(2000, 1, 1, tzinfo=UTC),
                                       datetime.now(UTC) + timedelta(seconds=1)))
    pyfunc = registry.load_version_model("digits", "1", tmp_path / "pyfunc")
    # Exactly what predict serves, given the same request ids (a request without them gets uuid4s);
    # a tensor-signature checkpoint takes its request ids as params, never as an extra column.
    ids = [f"s-{i}" for i in range(40)]
    pd.testing.assert_frame_equal(frame, pyfunc.predict(features, params={"request_id": ids}))
    assert list(frame.columns[-3:]) == ["request_id", "model_version", "temperature"]
    assert (frame["model_version"] == "1").all() and (frame["temperature"] == registered.temperature).all()
    assert served.version == "1" and (chunk.temperature == registered.temperature).all()
    np.testing.assert_array_equal(chunk.logits, registered_logits(registered, features))
    np.testing.assert_array_equal(chunk.predicted_class, frame["class"].to_numpy())
    np.testing.assert_allclose(chunk.confidence, frame["confidence"].to_numpy(), rtol=1e-6)


def registered_logits(registered: Registered, features: Any) -> Any:
    from flows.registry.checkpoint import checkpoint_logits, download_checkpoint

    files = download_checkpoint(registered.template.checkpoints["logistic"].uri, Path(registered.db).parent / "ckpt2",
                                tracking_uri=f"sqlite:///{registered.db}")
    return checkpoint_logits(files, features)[0].astype(np.float32)


def test_monitor_publishes_ok_then_drift_with_an_event(registered: Registered, settings: ThermostatSettings) -> None:
    since = datetime.now(UTC) - timedelta(seconds=5)
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    clean = _log(settings, registered.clean_logits[:1200], registered.clean_labels[:1200], start=base, tag="a",
                 temperature=registered.temperature)
    [ok] = monitor("digits", window_start=clean[0], window_end=clean[1], settings=settings)
    assert ok.verdict == "undetermined" and ok.event_id is None and ok.aliases == ("champion",)

    noisy = _log(settings, registered.noisy_logits[:1200], registered.noisy_labels[:1200],
                 start=base + timedelta(hours=1), tag="b", temperature=registered.temperature)
    [drift] = monitor("digits", window_start=noisy[0], window_end=noisy[1], settings=settings)
    assert drift.verdict == "drift" and drift.refit_recommended and drift.event_id is not None
    assert drift.report is not None and drift.report.window.ece > drift.report.baseline_ece + 0.02

    registry = MlflowRegistry.from_settings(settings)
    client = mlflow_client(registry)
    for check, window_end in ((ok, clean[1]), (drift, noisy[1])):
        assert check.run_id is not None
        run = client.get_run(check.run_id)
        assert run.info.status == "FINISHED"
        assert run.info.experiment_id == registry.experiment_id(settings.monitoring_experiment_name)
        assert run.data.tags["thermostat.model_version"] == "1" and run.data.tags["thermostat.aliases"] == "champion"
        assert run.data.tags["thermostat.verdict"] == check.verdict
        stamp = int(window_end.timestamp() * 1000)
        for key in ("ece", "nll", "accuracy", "mean_confidence", "coverage", "accepted_accuracy", "p_value", "drift",
                    "ece.group.camera"):
            [metric] = client.get_metric_history(check.run_id, key)
            assert metric.timestamp == stamp, key
        assert client.get_metric_history(check.run_id, "drift")[0].value == float(check.verdict == "drift")
        assert "plots/reliability.png" in {a.path for a in client.list_artifacts(check.run_id, "plots")}
    assert mlflow.active_run() is None

    markdown = _markdown_artifacts(artifact_key("digits", "1", "report"))
    assert any(drift.run_id in text and "thermostat.calibration.drift" in text for text in markdown)
    assert _markdown_artifacts(artifact_key("digits", "1", "table"))

    # Other tests' events share the resource id (and may land in the last seconds): ours names our run.
    [event] = _events("thermostat.calibration.drift", "mlmodel.digits.v1", since, at_least=1,
                      where=lambda e: e.payload.get("mlflow_run_id") == drift.run_id)
    assert event.resource["model.name"] == "digits" and event.resource["model.version"] == "1"
    assert event.resource["model.alias"] == "champion"
    assert event.payload["verdict"] == "drift" and event.payload["window_end"] == noisy[1].isoformat()
    assert event.payload["mlflow_run_id"] == drift.run_id
    # The cool-down starts when the event was emitted, not at the window's end (two hours earlier here).
    tag = client.get_model_version("digits", "1").tags[LAST_DRIFT_EVENT_TAG]
    assert since < datetime.fromisoformat(tag) <= datetime.now(UTC) and datetime.fromisoformat(tag) > noisy[1]


def test_cooldown_reports_drift_but_emits_no_second_event(registered: Registered, settings: ThermostatSettings) -> None:
    since = datetime.now(UTC) - timedelta(seconds=5)
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=5)
    first = _log(settings, registered.noisy_logits[:1200], registered.noisy_labels[:1200], start=base, tag="c",
                 temperature=registered.temperature)
    second = _log(settings, registered.noisy_logits[1200:2400], registered.noisy_labels[1200:2400],
                  start=base + timedelta(hours=2), tag="d", temperature=registered.temperature)
    [emitted] = monitor("digits", window_start=first[0], window_end=first[1], settings=settings)
    [quiet] = monitor("digits", window_start=second[0], window_end=second[1], settings=settings)
    assert emitted.event_id is not None
    assert quiet.verdict == "drift" and quiet.report is not None and quiet.report.in_cooldown
    assert quiet.event_id is None and not quiet.refit_recommended
    registry = MlflowRegistry.from_settings(settings)
    # The cool-down runs from the last EMITTED event (when it was emitted: after both windows
    # here, which are hours old), not from the last drift verdict nor from a window's end.
    emitted_at = datetime.fromisoformat(registry.get_version("digits", "1").tags[LAST_DRIFT_EVENT_TAG])
    assert since < emitted_at <= datetime.now(UTC) and emitted_at > second[1]
    assert quiet.report.cooldown_until == emitted_at + settings.drift_cooldown
    time.sleep(3)  # give a wrongly emitted second event time to be persisted
    events = _events("thermostat.calibration.drift", "mlmodel.digits.v1", since, at_least=2, timeout=5)
    ours = {first[1].isoformat(), second[1].isoformat()}  # other tests' events share the resource id
    assert [e.payload["window_end"] for e in events if e.payload["window_end"] in ours] == [first[1].isoformat()]


def test_refit_registers_a_new_version_of_the_same_checkpoint(
    registered: Registered, settings: ThermostatSettings
) -> None:
    registry = MlflowRegistry.from_settings(settings)
    old_tags = dict(registry.get_version("digits", "1").tags)
    window = _log(settings, registered.noisy_logits[:1200], registered.noisy_labels[:1200],
                  start=datetime.now(UTC) - timedelta(hours=1), tag="e", temperature=registered.temperature)
    outcome = refit("digits", model_version="1", alias="champion", window_start=window[0], window_end=window[1],
                    settings=settings)
    assert outcome.status == "registered", outcome.reason
    assert outcome.new_version == "2" and outcome.verification is not None and outcome.verification.passed
    new = registry.get_version("digits", "2")
    assert str(registry.alias_holder("digits", "champion").version) == "2"  # type: ignore[union-attr]
    assert float(new.tags["temperature"]) == outcome.temperature and outcome.temperature > registered.temperature + 0.5
    assert new.tags["checkpoint_digest"] == old_tags["checkpoint_digest"]
    assert new.tags["checkpoint_uri"] == old_tags["checkpoint_uri"]
    assert new.tags["refit_parent_version"] == "1" and new.tags["refit_fit_n"] == "600"
    assert new.tags["refit_verify_n"] == "600" and new.tags["temperature_before"] == old_tags["temperature"]
    assert new.tags["refit_traffic_window"] == f"[{window[0].isoformat()}, {window[1].isoformat()})"
    assert new.tags["gate_threshold"] != "none"
    assert dict(registry.get_version("digits", "1").tags) == old_tags  # the parent's T and evidence never change
    # The new version serves the new T.
    served = ServedModel.load("models:/digits@champion", registry=registry)
    assert served.version == "2" and served.temperature == outcome.temperature
    # A repeat on the same traffic registers nothing (same idempotency key); the alias holder is now v2,
    # so a refit of v1 is skipped rather than undoing it.
    again = refit("digits", model_version="1", alias="champion", window_start=window[0], window_end=window[1],
                  settings=settings)
    assert again.status == "skipped" and sorted(str(v.version) for v in registry.versions("digits")) == ["1", "2"]


def _flow_run(flow_run_id: Any) -> Any:
    """A flow run as the Prefect API has it (what the UI shows)."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(uuid.UUID(str(flow_run_id)))


def test_refit_that_cannot_fix_an_arched_curve_registers_nothing(
    registered: Registered, settings: ThermostatSettings
) -> None:
    since = datetime.now(UTC) - timedelta(seconds=5)
    logits, labels = arched_traffic(2000, np.random.default_rng(5))
    window = _log(settings, logits, labels, start=datetime.now(UTC) - timedelta(hours=2), tag="f",
                  temperature=registered.temperature)
    registry = MlflowRegistry.from_settings(settings)
    state = refit("digits", window_start=window[0], window_end=window[1],
                  settings=settings.model_copy(update={"min_accuracy": 0.3}), return_state=True)
    # The flow run is Failed (red in the UI), its message what was refused, the escalation first; the
    # outcome rides in its data.
    headline = f"refit of digits v1 @champion registered nothing (verify step): {ESCALATION}: the refit does not verify"
    assert state.is_failed() and state.message is not None and state.message.startswith(headline)
    refused = state.result(raise_on_failure=False)
    assert isinstance(refused, RefitFailed)
    outcome = refused.outcome
    with pytest.raises(RefitFailed, match="needs retraining or a data fix"):
        state.result()
    run = _flow_run(state.state_details.flow_run_id)
    assert run.state is not None and run.state.type.value == "FAILED" and run.state.message == state.message
    assert outcome.status == "failed" and outcome.step == "verify" and outcome.registration is None
    assert outcome.escalation == "needs retraining or a data fix"
    assert outcome.verification is not None and outcome.verification.shape.shape in ("arched", "saw-tooth")
    assert outcome.verification.escalate
    assert [str(v.version) for v in registry.versions("digits")] == ["1"]
    assert str(registry.alias_holder("digits", "champion").version) == "1"  # type: ignore[union-attr]
    [event] = _events("thermostat.calibration.refit_failed", "mlmodel.digits.v1", since, at_least=1,
                      where=lambda e: e.payload.get("window_start") == window[0].isoformat())
    assert event.payload["escalation"] == "needs retraining or a data fix" and event.payload["step"] == "verify"
    assert event.payload["shape"] in ("arched", "saw-tooth") and event.payload["ece_after"] > 0.1
    assert any(outcome.reason in text for text in _markdown_artifacts(refit_artifact_key("digits", "1")))


def test_a_refit_without_traffic_fails_with_its_reason_and_no_escalation(
    registered: Registered, settings: ThermostatSettings
) -> None:
    """No escalation: the Failed state's message is the step and the reason (cut to MESSAGE_LIMIT characters)."""
    empty = datetime(2001, 1, 1, tzinfo=UTC)
    with pytest.raises(RefitFailed) as failed:
        refit("digits", window_start=empty, window_end=empty + timedelta(hours=1), settings=settings)
    outcome = failed.value.outcome
    assert outcome.status == "failed" and outcome.step == "traffic" and outcome.escalation is None
    assert outcome.state_message.startswith("refit of digits v1 @champion registered nothing (traffic step): no "
                                            "labelled traffic of version 1 in [2001-01-01T00:00:00+00:00")
    assert len(outcome.state_message) <= MESSAGE_LIMIT and "wait for labels" in str(failed.value)


def test_refit_links_to_the_drift_check_that_caused_it(registered: Registered, settings: ThermostatSettings) -> None:
    """monitor -> drift (event, check run) -> refit with the trigger's parameters -> the refit's
    events, version and flow run name the check, and the check's run names the refit."""
    since = datetime.now(UTC) - timedelta(seconds=5)
    window = _log(settings, registered.noisy_logits[:1200], registered.noisy_labels[:1200],
                  start=datetime.now(UTC) - timedelta(hours=1), tag="g", temperature=registered.temperature)
    [check] = monitor("digits", window_start=window[0], window_end=window[1], settings=settings)
    assert check.event_id is not None and check.run_id is not None
    outcome = refit("digits", model_version="1", alias="champion", window_start=window[0], window_end=window[1],
                    settings=settings, drift_event_id=check.event_id, drift_run_id=check.run_id)
    assert outcome.status == "registered" and outcome.cause == DriftCause(check.event_id, check.run_id)

    registry = MlflowRegistry.from_settings(settings)
    client = mlflow_client(registry)
    check_tags = client.get_run(check.run_id).data.tags
    link = RefitLink.from_tags(check_tags)
    assert link is not None and link.status == "registered" and link.new_version == "2"
    # Named apart from a refit record's thermostat.refit.* (one character apart before).
    assert {key for key in check_tags if "refit" in key and key != "thermostat.refit_recommended"} == {
        "thermostat.caused_refit.status", "thermostat.caused_refit.flow_run_id", "thermostat.caused_refit.new_version"}
    refit_run = _flow_run(link.flow_run_id)
    assert refit_run.parameters["drift_event_id"] == check.event_id
    assert refit_run.parameters["drift_run_id"] == check.run_id
    assert refit_run.state is not None and refit_run.state.is_completed()
    # The run's final state says what was registered (what `prefect deployment run --watch` users see).
    assert refit_run.state.message == outcome.summary().message
    assert refit_run.state.message.startswith("registered digits version 2 (models:/digits/2): T=")
    assert refit_run.state.message.endswith(f"@champion moved from version 1; T was {outcome.parent_temperature:.4g} "
                                            "on version 1")
    version_tags = registry.get_version("digits", "2").tags
    assert DriftCause.from_tags(version_tags, VERSION_DRIFT_TAG_PREFIX) == outcome.cause
    assert version_tags["refit_drift_event_id"] == check.event_id

    # Other tests' events share the resource id: ours is the one caused by this check.
    [event] = _events("thermostat.calibration.refitted", "mlmodel.digits.v1", since, at_least=1,
                      where=lambda e: e.payload.get("drift_event_id") == check.event_id)
    assert event.payload["drift_run_id"] == check.run_id
    # What a serving deployment needs to roll: the version's own URI, its alias, T with its interval, the gate.
    assert (event.payload["model_name"], event.payload["new_version"], event.payload["alias"]) == (
        "digits", "2", "champion")
    assert event.payload["model_uri"] == "models:/digits/2" and event.payload["temperature"] == outcome.temperature
    assert event.payload["temperature_interval"] == list(outcome.interval or ())
    assert event.payload["gate_threshold"] == outcome.registration.gate_threshold  # type: ignore[union-attr]
    read_back = RefittedEvent.from_payload(event.payload)
    assert read_back.model_uri == "models:/digits/2" and read_back.cause == {"drift_event_id": check.event_id,
                                                                             "drift_run_id": check.run_id}
    caused_by = [dict(r) for r in event.related if r.get("prefect.resource.role") == "caused-by"]
    assert caused_by == [{"prefect.resource.id": f"prefect.event.{check.event_id}",
                          "prefect.resource.role": "caused-by"}]
    # One report per parent version: this one's key names version 1.
    assert any("version **2**" in text for text in _markdown_artifacts(refit_artifact_key("digits", "1")))


def test_a_refused_refit_links_to_its_check_and_records_the_cause(
    registered: Registered, settings: ThermostatSettings
) -> None:
    since = datetime.now(UTC) - timedelta(seconds=5)
    logits, labels = arched_traffic(2000, np.random.default_rng(7))
    window = _log(settings, logits, labels, start=datetime.now(UTC) - timedelta(hours=2), tag="h",
                  temperature=registered.temperature)
    registry = MlflowRegistry.from_settings(settings)
    # The check that found the drift: a run in the monitoring experiment (as the monitor writes it).
    check_run = registry.start_run("check", {"thermostat.kind": "check"},
                                   experiment_name=settings.monitoring_experiment_name)
    registry.end_run(check_run)
    drift_event_id = str(uuid.uuid4())
    state = refit("digits", window_start=window[0], window_end=window[1], return_state=True,
                  settings=settings.model_copy(update={"min_accuracy": 0.3}), drift_event_id=drift_event_id,
                  drift_run_id=check_run)
    assert state.is_failed()
    outcome = state.result(raise_on_failure=False).outcome
    assert outcome.cause == DriftCause(drift_event_id, check_run)

    client = mlflow_client(registry)
    assert RefitLink.from_tags(client.get_run(check_run).data.tags) == RefitLink(
        flow_run_id=str(state.state_details.flow_run_id), status="failed", new_version=None)
    [record] = [found for run in registry.runs(settings.monitoring_experiment_name)
                if (found := RefitRecord.from_run(run)) is not None]
    assert record.refused and record.cause == outcome.cause
    assert record.prefect_flow_run_id == str(state.state_details.flow_run_id)

    [event] = _events("thermostat.calibration.refit_failed", "mlmodel.digits.v1", since, at_least=1,
                      where=lambda e: e.payload.get("drift_event_id") == drift_event_id)
    assert event.payload["drift_run_id"] == check_run
    assert {"prefect.resource.id": f"prefect.event.{drift_event_id}", "prefect.resource.role": "caused-by"} in [
        dict(r) for r in event.related]


def test_a_check_run_that_does_not_exist_does_not_fail_the_refit(
    registered: Registered, settings: ThermostatSettings
) -> None:
    window = _log(settings, registered.noisy_logits[:1200], registered.noisy_labels[:1200],
                  start=datetime.now(UTC) - timedelta(hours=1), tag="i", temperature=registered.temperature)
    outcome = refit("digits", window_start=window[0], window_end=window[1], settings=settings,
                    drift_event_id="", drift_run_id="0123456789abcdef0123456789abcdef")
    assert outcome.status == "registered" and outcome.cause == DriftCause(None, "0123456789abcdef0123456789abcdef")
    tags = MlflowRegistry.from_settings(settings).get_version("digits", "2").tags
    assert "refit_drift_event_id" not in tags and tags["refit_drift_run_id"] == "0123456789abcdef0123456789abcdef"


def test_a_check_says_when_the_version_its_alias_left_is_still_served(
    registered: Registered, settings: ThermostatSettings
) -> None:
    """A refit moves @champion to version 2, but a server started before (``mlflow models serve``
    resolves the alias once) keeps answering with version 1: the check of version 2 says so, with
    the rows and how to fix it; rows of version 1 served before the move are not counted."""
    now = datetime.now(UTC)
    window = _log(settings, registered.noisy_logits[:1200], registered.noisy_labels[:1200],
                  start=now - timedelta(hours=1), tag="s", temperature=registered.temperature)
    outcome = refit("digits", window_start=window[0], window_end=window[1], settings=settings)
    assert outcome.new_version == "2"
    registry = MlflowRegistry.from_settings(settings)
    # Registered half an hour ago, as far as the check can tell (the record's time of the move).
    moved_at = now - timedelta(minutes=30)
    mlflow_client(registry).set_model_version_tag("digits", "2", "fitted_at", moved_at.isoformat())
    [quiet] = monitor("digits", settings=settings)
    assert quiet.version == "2" and quiet.warnings == ()  # version 1's rows were all served before the move
    _log(settings, registered.clean_logits[:300], registered.clean_labels[:300], start=now - timedelta(minutes=20),
         tag="stale", temperature=registered.temperature)
    state = monitor("digits", settings=settings, return_state=True)
    [check] = state.result()
    assert check.version == "2" and check.verdict == "insufficient_data"
    [warning] = check.warnings
    assert warning.startswith(f"version 1 is still served: 300 row(s) logged since "
                              f"{(moved_at + STALE_AFTER).isoformat(timespec='seconds')}")
    assert "@champion points at version 2" in warning and "thermostat serve digits --alias champion" in warning
    assert any(f"**warning**: {warning}" in text for text in _markdown_artifacts(artifact_key("digits", "2", "report")))
    assert state.message is not None and "digits v2 (@champion, " in state.message
    assert "insufficient_data (no traffic logged); warning: 1 stale serving" in state.message


def _unreachable(*_: Any, **__: Any) -> Any:
    raise ConnectionError("the Prefect API is down")


def test_a_refit_fitted_on_too_little_drifted_data_schedules_its_retry(
    registered: Registered, settings: ThermostatSettings
) -> None:
    """Refused as "not a fix" (its T inside the parent's interval: the rows it read predate the
    drift), a refit run by the ``refit`` deployment schedules a run of the same deployment
    ``refit_retry_after`` later, reading from the same start up to its own start time, instead of
    leaving the drift to the version's cool-down; called from Python it says how to retry by hand;
    a refit that is the last allowed retry schedules none."""
    from prefect.client.orchestration import get_client
    from prefect.flow_engine import run_flow

    since = datetime.now(UTC) - timedelta(seconds=5)
    # In-distribution traffic: the refit's T stays inside version 1's interval.
    window = _log(settings, registered.clean_logits[:1200], registered.clean_labels[:1200],
                  start=datetime.now(UTC) - timedelta(hours=1), tag="r", temperature=registered.temperature)
    by_hand = refit("digits", window_start=window[0], window_end=window[1], settings=settings, return_state=True,
                    drift_event_id=str(uuid.uuid4()))
    outcome = by_hand.result(raise_on_failure=False).outcome
    assert outcome.step == "verify" and outcome.verification.within_parent_interval and outcome.escalation is None
    assert outcome.retry is None and outcome.reason.endswith(
        f"no retry scheduled: this refit was not run by a deployment; run it again with window_start "
        f"{window[0].isoformat()} once more of the drifted traffic is labelled"), outcome.reason
    # A refit no drift event started (run by hand) plans no retry at all.
    manual = refit("digits", window_start=window[0], window_end=window[1], settings=settings, return_state=True)
    assert "retry" not in manual.result(raise_on_failure=False).outcome.reason

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow(refit)
        deployment_id = client.create_deployment(flow_id=flow_id, name=f"refit-{uuid.uuid4().hex[:8]}",
                                                 entrypoint="flows/pipelines/refit.py:refit")
        parameters = {"model_name": "digits", "window_start": window[0].isoformat(),
                      "window_end": window[1].isoformat(), "drift_event_id": str(uuid.uuid4())}
        runs = [client.create_flow_run_from_deployment(deployment_id, parameters=parameters | extra)
                for extra in ({}, {"attempt": settings.refit_retries})]
    # A retry that cannot be scheduled does not silence the refusal: recorded, sent, and said why.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("flows.pipelines.refit.schedule_rerun", _unreachable)
        unscheduled = refit("digits", window_start=window[0], window_end=window[1], settings=settings,
                            return_state=True, drift_event_id=parameters["drift_event_id"])
    failed = unscheduled.result(raise_on_failure=False).outcome
    assert failed.retry is None and failed.event_id is not None
    assert "no retry scheduled: scheduling it failed (ConnectionError: the Prefect API is down)" in failed.reason
    states = [run_flow(refit, flow_run=run, parameters=run.parameters | {"settings": settings}, return_type="state")
              for run in runs]
    first, last = (state.result(raise_on_failure=False).outcome for state in states)
    assert first.step == "verify" and first.retry is not None and first.retry.attempt == 1
    assert last.retry is None and last.reason.endswith(
        f"no retry scheduled: the {settings.refit_retries} retries of this drift's refit (THERMOSTAT_REFIT_RETRIES) are "
        "used up; the next drift event after the version's cool-down starts a new refit")
    expected = datetime.now(UTC) + settings.refit_retry_after
    assert abs((first.retry.at - expected).total_seconds()) < 120
    assert f"retry 1 of {settings.refit_retries} scheduled at {first.retry.at.isoformat(timespec='seconds')}" in first.reason
    with get_client(sync_client=True) as client:
        retry = client.read_flow_run(uuid.UUID(first.retry.flow_run_id))
    assert retry.deployment_id == deployment_id and retry.state is not None and retry.state.is_scheduled()
    assert abs((retry.expected_start_time - first.retry.at).total_seconds()) < 1
    # The same drift, from the same start, up to the retry's own start time; the version the refit was of.
    assert retry.parameters == {"model_name": "digits", "model_version": "1", "alias": "champion",
                                "training_ids_path": None, "window_start": window[0].isoformat(), "window_end": None,
                                "drift_event_id": parameters["drift_event_id"], "drift_run_id": None, "attempt": 1}
    [event] = _events("thermostat.calibration.refit_failed", "mlmodel.digits.v1", since, at_least=1,
                      where=lambda e: e.payload.get("retry_flow_run_id") is not None)
    assert event.payload["retry_flow_run_id"] == first.retry.flow_run_id
    assert event.payload["retry_at"] == first.retry.at.isoformat()
