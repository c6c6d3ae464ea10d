"""prefect.yaml's refit trigger, rendered by Prefect's own automation action (no server): the
drift event becomes the refit's parameters, including the ids that link the refit back to it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import yaml

from flows.pipelines.refit import refit
from flows.records.runs import DriftCause

PREFECT_YAML = Path(__file__).resolve().parents[3] / "prefect.yaml"
WINDOW = {"window_start": "2026-01-01T00:00:00+00:00", "window_end": "2026-01-01T01:00:00+00:00"}


def _rendered(payload: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The refit trigger's parameters rendered for a drift event with ``payload``, and the event's id."""
    from prefect.server.events.actions import RunDeployment
    from prefect.server.events.schemas.automations import Automation, EventTrigger, TriggeredAction
    from prefect.server.events.schemas.events import ReceivedEvent

    [deployment] = [d for d in yaml.safe_load(PREFECT_YAML.read_text())["deployments"] if d["name"] == "refit"]
    [trigger] = deployment["triggers"]
    action = RunDeployment(source="selected", deployment_id=uuid4(), parameters=trigger["parameters"])
    automation = Automation(name="refit", trigger=EventTrigger(expect=set(trigger["expect"]), posture="Reactive",
                                                               threshold=1), actions=[action])
    event = ReceivedEvent(
        occurred=datetime.now(UTC), event="thermostat.calibration.drift", payload=payload, id=uuid4(),
        resource={"prefect.resource.id": "mlmodel.digits.v3", "model.name": "digits", "model.version": "3",
                  "model.alias": "champion"},
    )
    triggered = TriggeredAction(automation=automation, triggered=datetime.now(UTC), triggering_labels={},
                                triggering_event=event, action=action)
    return asyncio.run(action.render_parameters(triggered)), str(event.id)


def test_the_trigger_passes_the_drift_event_and_its_check_run() -> None:
    parameters, event_id = _rendered(WINDOW | {"mlflow_run_id": "8ce9750663634104a1db252b2255d4cc"})
    assert parameters == {"model_name": "digits", "model_version": "3", "alias": "champion", **WINDOW,
                          "drift_event_id": event_id, "drift_run_id": "8ce9750663634104a1db252b2255d4cc"}
    validated = refit.validate_parameters(parameters)  # what the deployment's flow run accepts
    assert DriftCause.of(validated["drift_event_id"], validated["drift_run_id"]) == DriftCause(
        event_id, "8ce9750663634104a1db252b2255d4cc")


@pytest.mark.parametrize("run_id", ["missing", None])
def test_a_drift_event_without_a_check_run_still_starts_the_refit(run_id: str | None) -> None:
    """An event without ``mlflow_run_id`` (or with null) renders it as None; the action does not fail."""
    parameters, event_id = _rendered(WINDOW if run_id == "missing" else WINDOW | {"mlflow_run_id": run_id})
    assert parameters["drift_run_id"] is None and parameters["drift_event_id"] == event_id
    assert refit.validate_parameters(parameters)["drift_run_id"] is None


def test_the_refit_reads_from_the_change_point_when_the_sequential_rule_found_one() -> None:
    """The drift payload's ``refit_window_start`` (the change point after a sequential alarm) is
    the refit's window start; an event without it (an older monitor) falls back to the window's."""
    changed = WINDOW | {"refit_window_start": "2026-01-01T00:40:00+00:00", "mlflow_run_id": "r"}
    parameters, _ = _rendered(changed)
    assert parameters["window_start"] == "2026-01-01T00:40:00+00:00"
    assert parameters["window_end"] == WINDOW["window_end"]
    assert refit.validate_parameters(parameters)["window_start"] == datetime(2026, 1, 1, 0, 40, tzinfo=UTC)
    parameters, _ = _rendered(WINDOW | {"mlflow_run_id": "r"})
    assert parameters["window_start"] == WINDOW["window_start"]


def test_a_confidence_shift_schedules_a_labelled_check_of_the_model() -> None:
    """The monitor deployment's own trigger: the early warning's event starts a check of the
    model (its name from the event's resource) after the labels' delay, one per version."""
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger
    from prefect.server.events.actions import RunDeployment
    from prefect.server.events.schemas.automations import Automation, EventTrigger, TriggeredAction
    from prefect.server.events.schemas.events import ReceivedEvent

    from flows.records.events import CONFIDENCE_SHIFT_EVENT
    from flows.pipelines.monitor import monitor

    [deployment] = [d for d in yaml.safe_load(PREFECT_YAML.read_text())["deployments"] if d["name"] == "monitor"]
    [spec] = deployment["triggers"]
    trigger = DeploymentEventTrigger(**spec)
    assert trigger.expect == {CONFIDENCE_SHIFT_EVENT} and trigger.for_each == {"prefect.resource.id"}
    assert trigger.schedule_after.total_seconds() == 2.5 * 3600
    action = RunDeployment(source="selected", deployment_id=uuid4(), parameters=spec["parameters"])
    automation = Automation(name="monitor", trigger=EventTrigger(expect=set(spec["expect"]), posture="Reactive",
                                                                 threshold=1), actions=[action])
    event = ReceivedEvent(occurred=datetime.now(UTC), event=CONFIDENCE_SHIFT_EVENT, payload={"shifted": True},
                          id=uuid4(), resource={"prefect.resource.id": "mlmodel.digits.v3", "model.name": "digits",
                                                "model.version": "3", "model.alias": "champion"})
    triggered = TriggeredAction(automation=automation, triggered=datetime.now(UTC), triggering_labels={},
                                triggering_event=event, action=action)
    parameters = asyncio.run(action.render_parameters(triggered))
    assert parameters == {"model_name": "digits"} and monitor.validate_parameters(parameters)["model_name"] == "digits"
