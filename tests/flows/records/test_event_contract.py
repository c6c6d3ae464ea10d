"""Every payload key an automation reads exists in the payload type that writes it.

``prefect.yaml``'s triggers and the alert templates (``thermostat alerts install``) read event
payloads by key, in Jinja; a key renamed or dropped on the writing side would render as empty
text in an alert, or start a refit on the wrong window, with no error anywhere. The writers
declare their keys (:meth:`flows.records.events.EventPayload.payload_keys`); this test reads every
``event.payload.<key>`` / ``event.payload['<key>']`` in the two places and holds it to them.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from flows.orchestration.alerts import ALERTS
from flows.records.events import (
    DRIFT_EVENT,
    EVENT_PAYLOADS,
    CheckContext,
    DriftEvent,
    RefitFailedEvent,
    RefittedEvent,
)
from monitoring import DRIFT_PAYLOAD_KEYS

ROOT = Path(__file__).resolve().parents[3]
_READ = re.compile(r"event\.payload(?:\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*['\"]([^'\"]+)['\"]\s*\])")


def payload_keys_read(template: str) -> set[str]:
    """The top-level payload keys a Jinja template reads."""
    return {dotted or quoted for dotted, quoted in _READ.findall(template)}


def test_the_reader_finds_both_spellings() -> None:
    assert payload_keys_read("{{ event.payload.window_end }} {{ event.payload['refit_window_start'] | default(x) }}"
                             " {{ event.resource['model.name'] }}") == {"window_end", "refit_window_start"}


def test_every_key_prefect_yaml_reads_is_in_its_events_payload() -> None:
    document = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    checked = 0
    for deployment in document["deployments"]:
        for trigger in deployment.get("triggers", []):
            read = payload_keys_read(yaml.safe_dump(trigger.get("parameters", {})))
            for event in trigger.get("expect", []):
                payload = EVENT_PAYLOADS.get(event)
                if payload is None:  # not one of Thermostat's events (e.g. Prefect's own): no payload keys read
                    assert not read, (deployment["name"], event, read)
                    continue
                missing = read - payload.payload_keys()
                assert not missing, f"prefect.yaml's {deployment['name']} trigger reads {sorted(missing)} of {event}"
                checked += len(read)
    assert checked >= 3, "the refit trigger reads the drift event's window and run"


def test_every_key_an_alert_template_reads_is_in_its_events_payload() -> None:
    checked = 0
    for alert in ALERTS:
        read = payload_keys_read(alert.subject + alert.body)
        payload = EVENT_PAYLOADS.get(alert.event)
        if payload is None:
            continue  # Prefect's flow-run state events: their templates read the flow run, not a payload
        missing = read - payload.payload_keys()
        assert not missing, f"the alert {alert.key!r} reads {sorted(missing)}, which {payload.__name__} never writes"
        checked += len(read)
    assert checked > 30


def test_a_payload_writes_exactly_the_keys_it_declares() -> None:
    context = CheckContext(aliases=("champion",), window_start="2026-01-01T00:00:00+00:00",
                           window_end="2026-01-02T00:00:00+00:00", mlflow_experiment="m", mlflow_run_id="run")
    drift = DriftEvent(report=dict.fromkeys(DRIFT_PAYLOAD_KEYS), context=context)
    assert set(drift.to_payload()) == DriftEvent.payload_keys() and DRIFT_EVENT == drift.EVENT
    # Read back, it writes the same payload (the report's window is the context's: one key in the payload).
    assert DriftEvent.from_payload(drift.to_payload()).to_payload() == drift.to_payload()
    refused = RefitFailedEvent(reason="r", step="verify", escalation=None, model_name="m", model_version="1",
                               alias="champion", temperature=1.0, baseline_ece=0.01, window_start="a", window_end="b",
                               mlflow_run_id=None, mlflow_experiment="e", verification={}, cause={})
    written = set(refused.to_payload())
    assert RefitFailedEvent.from_payload(refused.to_payload()).to_payload() == refused.to_payload()
    assert written <= RefitFailedEvent.payload_keys() and set(RefitFailedEvent.model_fields) - {
        "verification", "cause"} <= written
    refitted = RefittedEvent(model_name="m", new_version="2", alias="champion", temperature=1.5,
                             temperature_interval=(1.4, 1.6), gate_threshold=0.9, parent_version="1",
                             parent_temperature=1.2, verification={"verify_n": 10}, cause={"drift_event_id": "e"})
    payload = refitted.to_payload()
    # What a serving deployment rolls on: the version's own URI, the alias, T with its interval, the gate.
    assert {"model_name", "new_version", "model_uri", "alias", "temperature", "temperature_interval",
            "gate_threshold"} <= set(payload) <= RefittedEvent.payload_keys()
    assert payload["model_uri"] == "models:/m/2" and RefittedEvent.from_payload(payload) == refitted


def test_the_check_would_see_a_renamed_key() -> None:
    """Not vacuous: a template reading a key no payload writes is caught."""
    assert payload_keys_read("{{ event.payload.ece_estimat }}") - DriftEvent.payload_keys() == {"ece_estimat"}
