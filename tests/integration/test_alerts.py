"""Alerts that reach someone (issue 14): the automations of ``flows.orchestration.alerts`` on a real Prefect
server, and the whole path drift → refused refit → two notifications on a webhook receiver.

The acceptance test runs the real stack on loopback: ``prefect server start``, ``prefect deploy
--all``, a process worker, ``thermostat alerts install --webhook-url`` pointing at a small
``http.server`` receiver in this process, then the ``monitor`` deployment on a version whose
traffic has an arched reliability curve (no single temperature fixes it): the drift event
starts the ``refit`` deployment, the refit is refused and emits ``refit_failed``, and each event
sends one notification through the webhook block. The first tests need no server: the
definitions, their templates rendered by Prefect's own (sandboxed) renderer, and the exit
statuses of bad options.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
import pytest

from flows.cli import main as cli
from flows.orchestration.alerts import ALERTS, DEFAULT_BLOCK_NAME, FLOW_RUN_CRASHED_EVENT, FLOW_RUN_FAILED_EVENT
from flows.records.events import (
    CONFIDENCE_SHIFT_EVENT,
    DRIFT_EVENT,
    INSUFFICIENT_DATA_EVENT,
    REFIT_FAILED_EVENT,
    UNREADABLE_VERSION_EVENT,
)
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from monitoring import PredictionLog, log_predictions
from tests.flows.synthetic import arched_traffic
from tests.integration.conftest import Registered, deploy_all_and_start_worker, mlflow_client, stop_worker
from tests.support.cli import thermostat
from tests.support.ports import free_port
from tests.support.servers import stop_process

RESOURCE = {"prefect.resource.id": "mlmodel.digits.v3", "prefect.resource.name": "digits v3", "model.name": "digits",
            "model.version": "3", "model.alias": "champion"}


# --------------------------------------------------------------------------- a webhook receiver


_ALERT = {alert.key: alert for alert in ALERTS}  # the alert definitions by situation


class Receiver:
    """A webhook receiver on loopback: every POSTed JSON body, in arrival order."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    receiver.received.append({"path": self.path, "json": json.loads(body)})
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook-receiver", daemon=True)
        self._thread.start()

    def messages(self) -> list[dict[str, Any]]:
        with self._lock:
            return [item["json"] for item in self.received]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    try:
        yield found
    finally:
        found.close()


# --------------------------------------------------------------------------- fast: the definitions


def _render(template: str, event: str, payload: dict[str, Any], *, resource: dict[str, str] = RESOURCE,
            flow_run: Any = None, related: list[dict[str, str]] | None = None) -> str:
    """``template`` rendered as the Prefect server renders a send-notification action."""
    from uuid import uuid4

    from prefect.server.events.jinja_filters import all_filters
    from prefect.server.events.schemas.events import ReceivedEvent
    from prefect.server.utilities.user_templates import (
        register_user_template_filters,
        render_user_template_sync,
        validate_user_template,
    )

    register_user_template_filters(all_filters)
    validate_user_template(template)
    received = ReceivedEvent.model_validate({"occurred": datetime.now(UTC), "event": event, "resource": resource,
                                             "payload": payload, "id": uuid4(), "related": related or []})
    return render_user_template_sync(template, {"event": received, "flow_run": flow_run})


def test_alert_definitions_are_stable_and_per_version() -> None:
    from uuid import uuid4

    from prefect.events.actions import SendNotification
    from prefect.events.schemas.automations import EventTrigger
    from prefect.events.schemas.events import ResourceSpecification

    assert [(a.key, a.event, a.name) for a in ALERTS] == [
        ("drift", DRIFT_EVENT, "thermostat: calibration drift"),
        ("label_shift", "thermostat.calibration.label-shift", "thermostat: label shift"),
        ("refit_refused", REFIT_FAILED_EVENT, "thermostat: refit refused"),  # keyed refit_failed before
        ("insufficient_data", INSUFFICIENT_DATA_EVENT, "thermostat: insufficient data"),
        ("undetermined", "thermostat.calibration.undetermined", "thermostat: undetermined"),
        ("confidence_shift", CONFIDENCE_SHIFT_EVENT, "thermostat: confidence shift"),
        ("refit_crashed", "prefect.flow-run.Crashed", "thermostat: refit crashed"),
        ("refit_errored", "prefect.flow-run.Failed", "thermostat: refit errored"),
        ("monitor_failed", "prefect.flow-run.Failed", "thermostat: monitor failed"),
        ("monitor_crashed", "prefect.flow-run.Crashed", "thermostat: monitor crashed"),
        ("unreadable_version", UNREADABLE_VERSION_EVENT, "thermostat: version not checked"),
    ]
    assert INSUFFICIENT_DATA_EVENT == "thermostat.calibration.insufficient_data"
    assert CONFIDENCE_SHIFT_EVENT == "thermostat.calibration.confidence_shift"
    block = uuid4()
    triggers = {}
    for alert in ALERTS:
        automation = alert.automation(block)
        trigger = automation.trigger
        assert isinstance(trigger, EventTrigger)
        assert automation.name == alert.name and automation.enabled
        assert trigger.expect == {alert.event} and trigger.for_each == {"prefect.resource.id"}
        assert trigger.posture == "Reactive" and trigger.threshold == 1
        match, related = trigger.match, trigger.match_related
        assert isinstance(match, ResourceSpecification) and isinstance(related, ResourceSpecification)
        triggers[alert.key] = (match.model_dump(), related.model_dump())
        [action] = automation.actions
        assert isinstance(action, SendNotification) and action.block_document_id == block
    for key in ("drift", "refit_refused", "insufficient_data", "confidence_shift", "unreadable_version"):  # per version
        assert triggers[key] == ({"prefect.resource.id": "mlmodel.*"}, {})
    # Per run of the flow named refit (Prefect relates a flow run's state events to its flow, role "flow").
    refit_flow = {"prefect.resource.role": "flow", "prefect.resource.name": "refit"}
    assert triggers["refit_crashed"] == ({"prefect.resource.id": "prefect.flow-run.*"}, refit_flow)
    assert triggers["refit_errored"] == ({"prefect.resource.id": "prefect.flow-run.*",
                                          "prefect.state-message": "Flow run encountered an exception:*"}, refit_flow)
    # Any failed or crashed run of the flows named monitor and monitor-fleet: whatever the message, no verdict came out.
    monitor_flow = {"prefect.resource.role": "flow", "prefect.resource.name": ["monitor", "monitor-fleet"]}
    assert triggers["monitor_failed"] == triggers["monitor_crashed"] == (
        {"prefect.resource.id": "prefect.flow-run.*"}, monitor_flow)
    # One notification per event: the monitor's cool-down and streak multiples set the cadence.
    assert [a.repeat_after for a in ALERTS] == [timedelta(0)] * len(ALERTS) and len(ALERTS) == 11


def _flow_run_event(state: str, message: str, flow: str = "refit") -> Any:
    """A flow run's state-change event as the Prefect server builds it (resource and related)."""
    from uuid import uuid4

    from prefect.server.events.schemas.events import ReceivedEvent

    run = uuid4()
    return ReceivedEvent.model_validate({
        "occurred": datetime.now(UTC), "event": f"prefect.flow-run.{state}", "id": uuid4(), "payload": {},
        "resource": {"prefect.resource.id": f"prefect.flow-run.{run}", "prefect.resource.name": "brave-fox",
                     "prefect.state-message": message, "prefect.state-name": state,
                     "prefect.state-type": state.upper(), "prefect.state-timestamp": datetime.now(UTC).isoformat(),
                     "prefect.run-count": "1"},
        "related": [{"prefect.resource.id": f"prefect.flow.{uuid4()}", "prefect.resource.role": "flow",
                     "prefect.resource.name": flow},
                    {"prefect.resource.id": f"prefect.deployment.{uuid4()}", "prefect.resource.role": "deployment",
                     "prefect.resource.name": flow}],
    })


def test_refit_runs_that_end_without_refit_failed_and_only_those_trigger_an_alert() -> None:
    """Crashed, or Failed on an exception, alert; a refused refit (Failed, its reason as the
    message) is the refit-refused alert's alone; other flows' runs are not refits."""
    from uuid import uuid4

    from prefect.server.events.schemas.automations import Automation, EventTrigger

    def firing(event: Any) -> list[str]:
        fired = []
        for alert in ALERTS:
            automation = Automation.model_validate(alert.automation(uuid4()).model_dump() | {"id": uuid4()})
            trigger = automation.trigger
            assert isinstance(trigger, EventTrigger)
            if event.event in trigger.expect and trigger.covers_resources(event.resource, event.related):
                fired.append(alert.key)
        return fired

    assert firing(_flow_run_event("Crashed", "Flow run infrastructure exited with non-zero status code -9.")) == [
        "refit_crashed"]
    assert firing(_flow_run_event("Failed", "Flow run encountered an exception: FileNotFoundError: checkpoint")) == [
        "refit_errored"]
    assert firing(_flow_run_event("Failed", "needs retraining or a data fix")) == []
    assert firing(_flow_run_event("Completed", "All states completed.")) == []
    # The monitor: any Failed or Crashed run alerts (it has no event of its own for a failure).
    assert firing(_flow_run_event("Crashed", "killed", flow="monitor")) == ["monitor_crashed"]
    assert firing(_flow_run_event("Failed", "Flow run encountered an exception: FileNotFoundError: log",
                                  flow="monitor")) == ["monitor_failed"]
    assert firing(_flow_run_event("Failed", "anything else", flow="monitor")) == ["monitor_failed"]
    assert firing(_flow_run_event("Completed", "All states completed.", flow="monitor")) == []
    assert firing(_flow_run_event("Cancelled", "Deployment concurrency limit reached.", flow="monitor")) == []
    # The fleet's runs too (a run that meets a version it cannot read fails naming it).
    assert firing(_flow_run_event("Failed", "Flow run encountered an exception: RuntimeError: 1 serving version(s) "
                                  "could not be read", flow="monitor-fleet")) == ["monitor_failed"]
    assert firing(_flow_run_event("Crashed", "killed", flow="monitor-fleet")) == ["monitor_crashed"]
    assert firing(_flow_run_event("Failed", "anything", flow="monitor-fleet-copy")) == []


@pytest.mark.integration
def test_prefect_names_a_flow_run_that_raised_as_the_errored_alert_matches(prefect_api: None) -> None:
    """The errored alert matches Prefect's own message for a flow that raised: pinned here so
    that a Prefect upgrade that rewords it fails this test, not the alert."""
    from prefect import flow
    from prefect.server.events.schemas.events import matches

    @flow(name="raises")
    def raises() -> None:
        raise FileNotFoundError("the checkpoint is gone")

    state = raises(return_state=True)
    assert state.is_failed() and state.message is not None
    assert matches("Flow run encountered an exception:*", state.message), state.message


def test_templates_render_the_model_the_numbers_and_the_run() -> None:
    drift, refit_failed, insufficient = _ALERT["drift"], _ALERT["refit_refused"], _ALERT["insufficient_data"]
    payload = {
        "verdict": "drift", "ece": 0.0812345, "ece_estimate": 0.0791, "ece_low": 0.061, "ece_high": 0.097,
        "baseline_ece": 0.021, "ece_tolerance": 0.02, "p_value": 1.234e-6, "p_threshold": 0.01, "n": 1200,
        "tests_fired": ["temperature", "ece"], "temperature": 1.7, "window_start": "2026-03-01T00:00:00+00:00",
        "window_end": "2026-03-02T00:00:00+00:00", "mlflow_run_id": "0123abcd",
        "fired": [{"label": "temperature", "test": "temperature", "statistic": "z = +6.01 (beyond the margin +5.20)",
                   "p_value": 2e-9, "level": 0.005, "sentence": "window optimal T 2.31 ..."},
                  {"label": "ece", "test": "ece", "statistic": "excess +0.0581", "p_value": 1.234e-6, "level": 0.005,
                   "sentence": "window ECE 0.0791 ..."}],
        "temperature_test": {"window_temperature": 2.31, "window_temperature_low": 2.1, "window_temperature_high": 2.5,
                             "reference_temperature": 1.7, "ratio": 1.359, "ratio_low": 1.2, "ratio_high": 1.5,
                             "p_value": 2e-9},
    }
    subject, body = _render(drift.subject, DRIFT_EVENT, payload), _render(drift.body, DRIFT_EVENT, payload)
    assert subject == ("[thermostat] calibration drift: digits v3 @champion (temperature: z = +6.01 (beyond the "
                       "margin +5.20), p=2e-09)")
    for text in ("digits version 3 (@champion)", "- temperature: z = +6.01 (beyond the margin +5.20), p-value 2e-09 "
                 "(level 0.005)", "- ece: excess +0.0581, p-value 1.23e-06", "Window T 2.31 [2.1, 2.5] next to the "
                 "registered T 1.7", "ratio 1.359 [1.2, 1.5]", "Labelled rows: 1200",
                 "2026-03-01T00:00:00+00:00 .. 2026-03-02T00:00:00+00:00", "MLflow run: 0123abcd"):
        assert text in body, (text, body)
    # A payload without the fired list (an older monitor's) names its tests; the notification still goes out.
    sparse = _render(drift.body, DRIFT_EVENT, {"ece": None, "tests_fired": []})
    assert "Fired:\n- none" in sparse and "MLflow run" not in sparse

    failed = {"reason": "the refit does not verify: arched reliability curve", "step": "verify",
              "escalation": "needs retraining or a data fix", "model_name": "digits", "model_version": "3",
              "alias": "champion", "temperature": 1.7, "baseline_ece": 0.021, "verify_n": 600, "ece_before": 0.21,
              "ece_after": 0.19, "temperature_after": 1.2, "nll_change": -0.004, "nll_verdict": "inconclusive",
              "p_value": None, "shape": "arched", "window_start": "s", "window_end": "e"}
    subject = _render(refit_failed.subject, REFIT_FAILED_EVENT, failed)
    body = _render(refit_failed.body, REFIT_FAILED_EVENT, failed)
    assert subject == "[thermostat] refit refused: digits v3 @champion — needs retraining or a data fix"
    for text in ("digits version 3 (@champion) registered nothing: refused at step verify",
                 "Reason: the refit does not verify: arched reliability curve",
                 "Escalation: needs retraining or a data fix", "ECE 0.21 -> 0.19 at T 1.2", "p-value n/a",
                 "reliability shape arched"):
        assert text in body, (text, body)
    without = _render(refit_failed.subject, REFIT_FAILED_EVENT, failed | {"escalation": None, "step": "traffic"})
    assert without.endswith("(step traffic)")
    # Without an escalation, the body says what may succeed, in words that match the refusal.
    for case, text in (({"step": "verify", "within_parent_interval": True}, "fitted on too little drifted data"),
                       ({"step": "verify", "within_parent_interval": True, "retry_at": "2026-01-01T07:00:00+00:00",
                         "retry_flow_run_id": "5d1"}, "its retry is scheduled at 2026-01-01T07:00:00+00:00 (flow run 5d1)"),
                       ({"step": "guard"}, "a refit that would weaken them is never registered"),
                       ({"step": "traffic"}, "a later refit may succeed (the reason says what this one lacked)")):
        body = _render(refit_failed.body, REFIT_FAILED_EVENT, failed | {"escalation": None} | case)
        assert text in body and "once enough labels arrive" not in body, (case, body)

    streak = {"streak": 6, "n": 120, "min_window": 500, "window_start": "s", "window_end": "e",
              "mlflow_run_id": "feed01", "predicted_accuracy": 0.8123}
    subject = _render(insufficient.subject, INSUFFICIENT_DATA_EVENT, streak)
    assert subject == "[thermostat] no labels: digits v3 @champion: 6 checks in a row with too few labelled rows"
    body = _render(insufficient.body, INSUFFICIENT_DATA_EVENT, streak)
    for text in ("6 consecutive checks of digits version 3 (@champion)", "120 < 500", "predicts an accuracy of 0.812",
                 "MLflow run: feed01"):
        assert text in body, (text, body)
    assert "early warning" not in _render(insufficient.body, INSUFFICIENT_DATA_EVENT, streak | {"predicted_accuracy": None})


def test_the_drift_alert_names_only_what_fired_with_the_window_t() -> None:
    """The webhook said "calibration drift: ECE 0.0571 vs baseline 0.0172 … p = 0.0238" when only the
    temperature test had fired, and T appeared nowhere: the alert names what fired, with T."""
    drift = _ALERT["drift"]
    payload = {"verdict": "drift", "ece": 0.0571, "baseline_ece": 0.0172, "p_value": 0.0238, "ece_drift": False,
               "tests_fired": ["temperature"], "temperature": 1.21, "n": 2000,
               "fired": [{"label": "temperature", "test": "temperature", "statistic": "z = +4.10",
                          "p_value": 0.0004, "level": 0.005, "sentence": "window optimal T 1.391 [1.3, 1.49] ..."}],
               "temperature_test": {"window_temperature": 1.391, "window_temperature_low": 1.3,
                                    "window_temperature_high": 1.49, "reference_temperature": 1.2, "ratio": 1.159}}
    subject, body = _render(drift.subject, DRIFT_EVENT, payload), _render(drift.body, DRIFT_EVENT, payload)
    assert "temperature: z = +4.10, p=0.0004" in subject and "ECE" not in subject and "0.0238" not in subject
    assert "Window T 1.391 [1.3, 1.49] next to the registered T 1.21" in body
    # As words: the event's random id and time may hold "ece" or "0.0238" by chance.
    assert not re.search(r"(?<![\d.])0\.0238(?!\d)", body) and not re.search(r"\bece\b", body, re.IGNORECASE), body


def test_the_undetermined_alert_says_what_would_decide() -> None:
    alert = _ALERT["undetermined"]
    payload = {"streak": 24, "n": 2000, "rows_to_decide": 9100, "temperature": 1.7, "window_temperature": 1.74,
               "window_temperature_low": 1.62, "window_temperature_high": 1.87, "margin": 0.05,
               "window_start": "S", "window_end": "E", "mlflow_run_id": "feed01"}
    event = "thermostat.calibration.undetermined"
    subject, body = _render(alert.subject, event, payload), _render(alert.body, event, payload)
    assert subject == "[thermostat] undetermined: digits v3 @champion: 24 checks in a row could not establish calibration"
    for text in ("24 consecutive checks of digits version 3 (@champion) saw no drift", "2000 labelled rows",
                 "window T 1.74 [1.62, 1.87] next to the registered T 1.7", "About 9100 labelled rows",
                 "MLflow run: feed01"):
        assert text in body, (text, body)
    assert "too small for the margin" in _render(alert.body, event, payload | {"rows_to_decide": None})


def test_the_experiment_and_the_refit_window_come_from_the_payload() -> None:
    drift, refit_failed = _ALERT["drift"], _ALERT["refit_refused"]
    payload = {"mlflow_run_id": "0123abcd", "mlflow_experiment": "calibration-checks", "window_start": "S",
               "window_end": "E", "refit_window_start": "C"}
    body = _render(drift.body, DRIFT_EVENT, payload)
    assert "MLflow run: 0123abcd (experiment calibration-checks)" in body
    assert "traffic from C to E (the sequential rule's change point: the rows before it predate the drift)" in body
    assert "Window: S .. E." in body
    # Without an alarm the payload's refit_window_start is the window's start: no change point to name.
    assert "traffic from S to E;" in _render(drift.body, DRIFT_EVENT, payload | {"refit_window_start": "S"})
    without = {key: value for key, value in payload.items() if key not in ("mlflow_experiment", "refit_window_start")}
    body = _render(drift.body, DRIFT_EVENT, without)
    assert "(experiment thermostat-monitoring)" in body  # the default setting's experiment
    assert "traffic from S to E;" in body and "change point" not in body
    assert "(experiment calibration-checks)" in _render(refit_failed.body, REFIT_FAILED_EVENT, payload)


def test_the_label_shift_alert_renders_the_priors_and_what_happens_now() -> None:
    from flows.records.events import LABEL_SHIFT_EVENT

    alert = _ALERT["label_shift"]
    payload = {"prior_shift": 0.2012, "p_value": 3.1e-9, "confirmed": True, "served_n": 2000, "em_iterations": 12,
               "em_converged": True, "reference_n": 449, "prior_shift_low": 0.17, "prior_shift_high": 0.23,
               "statistic": 88.4, "df": 9, "level": 0.01, "priors": [0.4, 0.6], "reference_priors": [0.5, 0.5],
               "labelled_n": 1200, "tests_fired": ["temperature"], "shift_fix": "prior_correction",
               "window_start": "s", "window_end": "e"}
    subject = _render(alert.subject, LABEL_SHIFT_EVENT, payload)
    assert subject == "[thermostat] label shift: digits v3 @champion (class priors moved by 0.201 TV, p=3.1e-09)"
    body = _render(alert.body, LABEL_SHIFT_EVENT, payload)
    for text in ("Priors now: 0.400, 0.600 (reference: 0.500, 0.500)", "Labelled rows (1200) confirm it",
                 "at the deployed ones: temperature", "no temperature refit", "correct-priors deployment"):
        assert text in body, (text, body)
    unconfirmed = _render(alert.subject, LABEL_SHIFT_EVENT, payload | {"confirmed": False})
    assert unconfirmed.endswith(", from unlabelled rows")


def test_the_confidence_shift_notice_renders_the_early_warning() -> None:
    shift = _ALERT["confidence_shift"]
    payload = {"predicted_accuracy": 0.8123, "predicted_accuracy_low": 0.79, "predicted_accuracy_high": 0.83,
               "n": 4000, "labelled": 120, "direction": "up", "p_value": 3.2e-7, "mean_confidence": 0.951,
               "reference_mean_confidence": 0.902, "window_start": "S", "window_end": "E",
               "mlflow_run_id": "feed02", "mlflow_experiment": "thermostat-monitoring"}
    subject = _render(shift.subject, CONFIDENCE_SHIFT_EVENT, payload)
    assert subject == ("[thermostat] notice: confidence shift on digits v3 @champion (confidences up, predicted "
                       "accuracy 0.812); labelled check scheduled")
    body = _render(shift.body, CONFIDENCE_SHIFT_EVENT, payload)
    for text in ("not a drift verdict", "digits version 3 (@champion)", "moved up (more confident)",
                 "mean confidence 0.951 against the reference's 0.902", "p-value 3.2e-07",
                 "on 4000 served rows (120 labelled so far)", "accuracy of 0.812 [0.790, 0.830] once labelled",
                 "S .. E", "checks the model again on labelled traffic", "MLflow run: feed02"):
        assert text in body, (text, body)
    assert "moved down (less confident)" in _render(shift.body, CONFIDENCE_SHIFT_EVENT, payload | {"direction": "down"})
    assert "accuracy n/a" in _render(shift.subject, CONFIDENCE_SHIFT_EVENT, payload | {"predicted_accuracy": None})


def test_the_refit_crash_alert_names_the_flow_run_the_model_and_the_message() -> None:
    from uuid import uuid4

    from prefect.server.schemas.core import FlowRun

    crashed, errored = _ALERT["refit_crashed"], _ALERT["refit_errored"]
    event = _flow_run_event("Crashed", "Flow run infrastructure exited with non-zero status code -9.")
    resource = dict(event.resource)
    run = FlowRun(id=UUID(resource["prefect.resource.id"].rsplit(".", 1)[1]), flow_id=uuid4(), name="brave-fox",
                  parameters={"model_name": "digits", "model_version": "3", "alias": "champion",
                              "window_start": "S", "window_end": "E", "drift_run_id": "0123abcd"})
    subject = _render(crashed.subject, FLOW_RUN_CRASHED_EVENT, {}, resource=resource, flow_run=run)
    assert subject == "[thermostat] refit crashed: digits v3 @champion (flow run brave-fox)"
    body = _render(crashed.body, FLOW_RUN_CRASHED_EVENT, {}, resource=resource, flow_run=run)
    for text in ("The refit flow run brave-fox of digits v3 @champion ended Crashed",
                 "no 'refit refused' alert was sent", "State message: Flow run infrastructure exited with non-zero "
                 "status code -9.", "Window: S .. E; caused by the drift check in MLflow run 0123abcd",
                 f"Prefect flow run: brave-fox ({run.id})", "Event: prefect.flow-run.Crashed"):
        assert text in body, (text, body)
    # Without the flow run (the server could not read it) the event's own labels still say enough.
    failed = dict(_flow_run_event("Failed", "Flow run encountered an exception: OSError: gone").resource)
    subject = _render(errored.subject, FLOW_RUN_FAILED_EVENT, {}, resource=failed)
    assert subject == "[thermostat] refit errored: a model version (flow run brave-fox)"
    body = _render(errored.body, FLOW_RUN_FAILED_EVENT, {}, resource=failed)
    assert "ended Failed" in body and "State message: Flow run encountered an exception: OSError: gone" in body


def test_the_monitor_failure_alert_names_the_model_the_error_and_the_dashboard() -> None:
    from uuid import uuid4

    from prefect.server.schemas.core import FlowRun

    failed, crashed = _ALERT["monitor_failed"], _ALERT["monitor_crashed"]
    message = "Flow run encountered an exception: FileNotFoundError: the prediction log sqlite:///p.db does not exist"
    event = _flow_run_event("Failed", message, flow="monitor")
    resource = dict(event.resource)
    run = FlowRun(id=UUID(resource["prefect.resource.id"].rsplit(".", 1)[1]), flow_id=uuid4(), name="brave-fox",
                  parameters={"model_name": "digits", "aliases": ["champion", "challenger"]})
    subject = _render(failed.subject, FLOW_RUN_FAILED_EVENT, {}, resource=resource, flow_run=run)
    assert subject == "[thermostat] monitor failed: digits: no verdict (flow run brave-fox)"
    body = _render(failed.body, FLOW_RUN_FAILED_EVENT, {}, resource=resource, flow_run=run)
    for text in ("The monitor flow run brave-fox checking digits (aliases champion, challenger) ended Failed",
                 f"State message: {message}", "'check failed' for the version", f"Prefect flow run: brave-fox ({run.id})",
                 "Event: prefect.flow-run.Failed"):
        assert text in body, (text, body)
    gone = dict(_flow_run_event("Crashed", "Flow run infrastructure exited with non-zero status code -9.",
                                flow="monitor").resource)
    assert _render(crashed.subject, FLOW_RUN_CRASHED_EVENT, {}, resource=gone) == (
        "[thermostat] monitor crashed: a model: no verdict (flow run brave-fox)")


def test_the_fleet_failure_and_the_version_not_checked_alerts_name_the_version_and_the_problem() -> None:
    from uuid import uuid4

    from prefect.server.schemas.core import FlowRun

    problem = "tickets version 2: tag 'temperature' is missing; expected float"
    message = ("Flow run encountered an exception: RuntimeError: 1 serving version(s) could not be read, so were not "
               f"checked: tickets v2 (@challenger): {problem}")
    event = _flow_run_event("Failed", message, flow="monitor-fleet")
    run = FlowRun(id=UUID(event.resource["prefect.resource.id"].rsplit(".", 1)[1]), flow_id=uuid4(), name="brave-fox",
                  parameters={"models": ["digits", "tickets"]})
    related = [dict(resource) for resource in event.related]
    failed = _ALERT["monitor_failed"]
    subject = _render(failed.subject, FLOW_RUN_FAILED_EVENT, {}, resource=dict(event.resource), flow_run=run,
                      related=related)
    assert subject == "[thermostat] monitor failed: the fleet (digits, tickets): no verdict (flow run brave-fox)"
    body = _render(failed.body, FLOW_RUN_FAILED_EVENT, {}, resource=dict(event.resource), flow_run=run, related=related)
    for text in ("The monitor-fleet flow run brave-fox checking the fleet (digits, tickets) ended Failed",
                 f"State message: {message}"):
        assert text in body, (text, body)

    unreadable = _ALERT["unreadable_version"]
    resource = RESOURCE | {"prefect.resource.id": "mlmodel.tickets.v2", "model.name": "tickets", "model.version": "2",
                           "model.alias": "challenger"}
    payload = {"problem": problem, "aliases": ["challenger"], "window_start": "S", "window_end": "E",
               "flow": "monitor-fleet"}
    subject = _render(unreadable.subject, UNREADABLE_VERSION_EVENT, payload, resource=resource)
    assert subject == "[thermostat] version not checked: tickets v2 @challenger: its registration record cannot be read"
    body = _render(unreadable.body, UNREADABLE_VERSION_EVENT, payload, resource=resource)
    for text in ("The monitor-fleet flow could not check tickets version 2 (@challenger): its registration record",
                 f"Problem: {problem}", "Window not checked: S .. E", "Event: thermostat.calibration.unreadable"):
        assert text in body, (text, body)


def test_bad_options_exit_2_and_an_unreachable_server_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    assert cli(["alerts", "install", "--webhook-url", "ftp://example.com/hook"]) == 2
    assert "--webhook-url 'ftp://example.com/hook' is not an http(s) URL" in capsys.readouterr().err
    assert cli(["alerts", "install", "--webhook-url", "http:///no-host"]) == 2
    assert "--webhook-url" in capsys.readouterr().err
    assert cli(["alerts", "install", "--block", "ops", "--block-name", "other"]) == 2
    assert "--block-name" in capsys.readouterr().err
    assert cli(["alerts", "install"]) == 2  # one of --webhook-url and --block is required
    capsys.readouterr()
    with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{free_port()}/api"}):
        assert cli(["alerts", "install", "--webhook-url", "http://127.0.0.1:9/hook"]) == 3
    err = capsys.readouterr().err
    assert "the Prefect API at http://127.0.0.1:" in err and "cannot be reached" in err
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        assert cli(["alerts", "install", "--webhook-url", "http://127.0.0.1:9/hook"]) == 2
    assert "PREFECT_API_URL is not set" in capsys.readouterr().err


@pytest.mark.parametrize("block_name", ["Bad Name!", "UPPER", "under_score", "dots.too", " "])
def test_a_block_name_prefect_refuses_is_exit_2_naming_the_flag(block_name: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Prefect's block names are lower-case letters, digits and dashes: refused before the server is asked."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{free_port()}/api"}):
        assert cli(["alerts", "install", "--webhook-url", "http://127.0.0.1:9/hook", "--block-name", block_name]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"--block-name {block_name!r}" in err
    assert "lower-case letters, digits and dashes" in err and "Traceback" not in err


SECRET = "Q7x-s3cret"


@pytest.mark.parametrize(("api_url", "status"), [
    ("http://alice:{secret}@127.0.0.1:{port}/api", 3),        # unreachable
    ("http://{secret}@127.0.0.1:{port}/api", 3),              # a token as the user
    ("http://alice:pa/ss#{secret}@127.0.0.1:{port}/api", 2),  # a raw "/" the HTTP client cannot read
    ("http://alice:Pr3f/{secret}@127.0.0.1:{port}/api", 2),   # its first piece read as the port ("Invalid port")
    ("http://alice:Zq/{secret}@127.0.0.1:{port}/api", 2),     # however short the piece
])  # fmt: skip
def test_prefect_api_url_credentials_are_never_printed(api_url: str, status: int,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api_url.format(secret=SECRET, port=free_port())}):
        assert cli(["alerts", "install", "--webhook-url", "http://127.0.0.1:9/hook"]) == status
    out, err = capsys.readouterr()
    assert SECRET not in out + err and "Traceback" not in err
    assert not [piece for piece in ("pa/ss", "Pr3f", "'Zq'") if piece in out + err], err
    assert "PREFECT_API_URL" in err or "the Prefect API at http://" in err


# --------------------------------------------------------------------------- a real server


def _install(env: dict[str, str], *options: str) -> dict[str, Any]:
    done = thermostat("alerts", "install", *options, "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


@pytest.mark.integration
@pytest.mark.slow
def test_install_is_idempotent_and_takes_any_notification_block(
    prefect_server: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    from prefect.blocks.notifications import SlackWebhook
    from prefect.blocks.system import Secret
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from pydantic import SecretStr

    api_url, env = prefect_server
    first = _install(env, "--webhook-url", "http://127.0.0.1:9/first")
    # Credentials in PREFECT_API_URL (the server ignores them) are not printed (issue 19, item 13).
    credentialed = api_url.replace("http://", f"http://alice:{SECRET}@", 1)
    again = _install(env | {"PREFECT_API_URL": credentialed}, "--webhook-url", "http://127.0.0.1:9/second")
    assert again["api_url"] == api_url.replace("http://", "http://alice:***@", 1) and SECRET not in json.dumps(again)
    assert first["block"] == again["block"] == f"custom-webhook/{DEFAULT_BLOCK_NAME}"
    assert first["block_id"] == again["block_id"] and again["destination"] == "http://127.0.0.1:9"
    assert [a["status"] for a in first["automations"]] == ["created"] * len(ALERTS)
    assert [a["status"] for a in again["automations"]] == ["updated"] * len(ALERTS)
    assert [a["id"] for a in first["automations"]] == [a["id"] for a in again["automations"]]

    with temporary_settings({PREFECT_API_URL: api_url}):
        with get_client(sync_client=True) as client:
            for alert in ALERTS:
                [automation] = client.read_automations_by_name(alert.name)
                [action] = automation.actions
                assert str(action.block_document_id) == first["block_id"]  # type: ignore[union-attr]
            block = client.read_block_document_by_name(DEFAULT_BLOCK_NAME, "custom-webhook")
            assert block.data["url"] == "http://127.0.0.1:9/second"  # the re-run updated the block too
            # A duplicate made by hand (e.g. `prefect automation create --from-file` run twice) is removed.
            client.create_automation(_ALERT["drift"].automation(block.id))
        # Any saved notification block: a Slack webhook, by name or TYPE/NAME.
        slack_id = SlackWebhook(url=SecretStr("https://hooks.slack.com/services/T000/B000/XXXX")).save(
            "ops", overwrite=True)
        Secret(value=SecretStr("x")).save("not-a-notifier", overwrite=True)
        assert cli(["alerts", "install", "--block", "ops", "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["block"] == "slack-webhook/ops" and result["block_id"] == str(slack_id)
        assert result["block_status"] == "existing" and result["destination"] is None
        assert [a["removed_duplicates"] for a in result["automations"]] == [1] + [0] * (len(ALERTS) - 1)
        assert cli(["alerts", "install", "--block", "slack-webhook/ops"]) == 0
        assert "notification block slack-webhook/ops (existing" in capsys.readouterr().out
        with get_client(sync_client=True) as client:
            for alert in ALERTS:
                [automation] = client.read_automations_by_name(alert.name)
                assert str(automation.actions[0].block_document_id) == str(slack_id)  # type: ignore[union-attr]
        assert cli(["alerts", "install", "--block", "no-such-block"]) == 2
        assert "--block 'no-such-block': no block of that name" in capsys.readouterr().err
        assert cli(["alerts", "install", "--block", "slack-webhook/nope"]) == 2
        assert "there is no slack-webhook block named 'nope'" in capsys.readouterr().err
        assert cli(["alerts", "install", "--block", "not-a-notifier"]) == 2
        assert "secret/not-a-notifier cannot send notifications" in capsys.readouterr().err


# --------------------------------------------------------------------------- acceptance


def _wait_for(receiver: Receiver, prefixes: tuple[str, ...], timeout: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        messages = receiver.messages()
        if all(any(m["subject"].startswith(p) for m in messages) for p in prefixes):
            return messages
        time.sleep(1)
    return receiver.messages()


@pytest.mark.integration
@pytest.mark.slow
def test_drift_and_the_refused_refit_reach_the_webhook(
    prefect_server: tuple[str, dict[str, str]], registered: Registered, receiver: Receiver, tmp_path: Path
) -> None:
    """monitor (deployment) → drift event → the drift alert, and the refit deployment → refused
    (an arched curve: no single T fixes it) → refit_failed event → the refit alert; each
    notification POSTed once to the webhook, naming the model, version, alias and numbers."""
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    api_url, env = prefect_server
    env = env | {"THERMOSTAT_MIN_ACCURACY": "0.3"}  # refused at verification, not at the accuracy floor
    state = Path(env["THERMOSTAT_STATE_DIR"])
    state.mkdir()
    shutil.copyfile(registered.db, state / "mlflow.db")
    logits, labels = arched_traffic(2000, np.random.default_rng(5))
    start = datetime.now(UTC) - timedelta(minutes=10)
    with PredictionLog(f"sqlite:///{state / 'predictions.db'}") as log:
        log.create()
        log_predictions(log, "digits", "1", registered.temperature, logits, [f"arched-{i}" for i in range(2000)],
                        time=[start + timedelta(seconds=60 * i / 2000) for i in range(2000)], labels=labels)

    worker = deploy_all_and_start_worker(env, tmp_path)
    try:
        installed = _install(env, "--webhook-url", receiver.url)
        assert [a["event"] for a in installed["automations"]] == [
            DRIFT_EVENT, "thermostat.calibration.label-shift", REFIT_FAILED_EVENT, INSUFFICIENT_DATA_EVENT,
            "thermostat.calibration.undetermined", CONFIDENCE_SHIFT_EVENT, FLOW_RUN_CRASHED_EVENT, FLOW_RUN_FAILED_EVENT, FLOW_RUN_FAILED_EVENT,
            FLOW_RUN_CRASHED_EVENT, UNREADABLE_VERSION_EVENT]
        with temporary_settings({PREFECT_API_URL: api_url}):
            flow_run = run_deployment("monitor/monitor", parameters={"model_name": "digits"}, timeout=180)
        assert isinstance(flow_run, FlowRun)
        assert flow_run.state is not None and flow_run.state.is_completed(), (
            f"{flow_run.state}\n{(tmp_path / 'worker.log').read_text()[-4000:]}")
        drift_prefix, refit_prefix = "[thermostat] calibration drift: digits v1 @champion", \
            "[thermostat] refit refused: digits v1 @champion"
        messages = _wait_for(receiver, (drift_prefix, refit_prefix), timeout=150)
        time.sleep(3)  # a duplicate would arrive within seconds
        messages = receiver.messages()
    finally:
        stop_worker(worker, api_url)
    (tmp_path / "notifications.json").write_text(json.dumps(messages, indent=2))  # to read after a failure
    logs = f"{(tmp_path / 'worker.log').read_text()[-4000:]}\n{(tmp_path / 'server.log').read_text()[-3000:]}"
    drift = [m for m in messages if m["subject"].startswith(drift_prefix)]
    refused = [m for m in messages if m["subject"].startswith(refit_prefix)]
    assert len(drift) == 1 and len(refused) == 1 and len(messages) == 2, (messages, logs)

    registry = MlflowRegistry.from_settings(ThermostatSettings(state_dir=state))
    client = mlflow_client(registry)
    [experiment] = [e for e in client.search_experiments() if e.name == "thermostat-monitoring"]
    [check] = client.search_runs([experiment.experiment_id], "tags.`thermostat.verdict` = 'drift'")
    fired = check.data.tags["thermostat.tests_fired"].split(",")
    [message] = drift
    assert set(message) == {"text", "subject", "body", "source"} and message["source"] == "thermostat"
    assert message["text"] == f"{message['subject']}\n\n{message['body']}"
    assert message["subject"].startswith(f"{drift_prefix} ({fired[0]}: "), message["subject"]
    # What fired, each with its statistic; the window's T next to the registered T.
    for text in ("Calibration drift on digits version 1 (@champion).", *(f"- {name}: " for name in fired),
                 "next to the registered T", f"MLflow run: {check.info.run_id}", "Prefect flow run: "):
        assert text in message["body"], (text, message["body"])

    [message] = refused
    assert message["subject"] == f"{refit_prefix} — needs retraining or a data fix"
    for text in ("The refit of digits version 1 (@champion) registered nothing: refused at step verify.",
                 "Reason: the refit does not verify", "Escalation: needs retraining or a data fix",
                 "reliability shape ", "Prefect flow run: "):
        assert text in message["body"], (text, message["body"])
    assert [str(v.version) for v in registry.versions("digits")] == ["1"]


@pytest.mark.integration
@pytest.mark.slow
def test_a_failed_monitor_run_reaches_the_webhook_and_the_dashboard(
    prefect_server: tuple[str, dict[str, str]], registered: Registered, receiver: Receiver, tmp_path: Path
) -> None:
    """The ``monitor`` deployment on a store whose prediction log does not exist: the run fails
    naming the log (it was created empty and every version read insufficient_data), the
    "monitor failed" automation POSTs one notification, and the dashboard shows "check failed"."""
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.dashboard.data import gather

    api_url, env = prefect_server
    state = Path(env["THERMOSTAT_STATE_DIR"])
    state.mkdir()
    shutil.copyfile(registered.db, state / "mlflow.db")
    log = state / "predictions.db"
    worker = deploy_all_and_start_worker(env, tmp_path)
    try:
        _install(env, "--webhook-url", receiver.url)
        with temporary_settings({PREFECT_API_URL: api_url}):
            flow_run = run_deployment("monitor/monitor", parameters={"model_name": "digits"}, timeout=180)
        assert isinstance(flow_run, FlowRun) and flow_run.state is not None and flow_run.state.is_failed(), (
            f"{flow_run.state}\n{(tmp_path / 'worker.log').read_text()[-4000:]}")
        prefix = "[thermostat] monitor failed: digits: no verdict"
        messages = _wait_for(receiver, (prefix,), timeout=120)
        time.sleep(3)  # a duplicate would arrive within seconds
        messages = receiver.messages()
    finally:
        stop_worker(worker, api_url)
    logs = f"{(tmp_path / 'worker.log').read_text()[-4000:]}\n{(tmp_path / 'server.log').read_text()[-3000:]}"
    assert [m["subject"] for m in messages] == [f"{prefix} (flow run {flow_run.name})"], (messages, logs)
    body = messages[0]["body"]
    for text in (f"The monitor flow run {flow_run.name} checking digits ended Failed",
                 f"FileNotFoundError: the prediction log sqlite:///{log} does not exist", "'check failed'"):
        assert text in body, (text, body)
    assert not log.exists(), "reading the log created it"
    dashboard = gather(ThermostatSettings(state_dir=state))
    [alert] = [a for a in dashboard.alerts if a.model_name == "digits"]
    assert alert.kind == "check_failed" and alert.version == "1" and "does not exist" in alert.title
    assert alert.prefect_flow_run_id == str(flow_run.id)
