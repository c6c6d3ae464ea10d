"""Credentials never reach stored outputs (issue 9, defect 6).

The monitor runs against a real ``mlflow server`` on loopback reached through a tracking URI
with ``user:password@`` (the server ignores the basic-auth header; an authenticating proxy
would check it), with an MLflow UI URL that carries another password, and the settings passed
in as the flow's parameter. Neither password may appear in what is shown or stored: the
logs, the markdown report, the artifact link, the drift event, the flow run's parameters.
Nor when MLflow is unreachable and its client quotes the request's URL in every error: the
adapter's retry warnings, the task runs' and the flow run's failure (the message the "monitor
failed" alert sends), in any form of the password.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest

import flows.pipelines.monitor as monitor_flow
import flows.registry.adapter as adapter
from flows.pipelines.monitor import VersionCheck, artifact_key, monitor
from flows.pipelines.tasks import open_prediction_log
from flows.settings import ThermostatSettings
from monitoring import log_predictions
from tests.integration.conftest import Registered, mlflow_server
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

TRACKING_PASSWORD = "tracking-s3cret-Q7"
UI_PASSWORD = "ui-hunter2/Z9?k#w"  # generated: it holds characters that end a URL's parts (issue 19, item 12)
VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def credentialed_server(registered: Registered, tmp_path: Path) -> Iterator[str]:
    """A real ``mlflow server`` on loopback over a copy of the registered store; yields its base URL."""
    with mlflow_server(registered.db, tmp_path / "server", "--artifacts-destination",
                       str(tmp_path / "server" / "artifacts")) as url:
        yield url


def _stored_logs(flow_run_id: Any) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()
    with get_client(sync_client=True) as client:
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    return [log.message for log in logs]


def _events_of(resource_id: str, since: datetime) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventOccurredFilter, EventResourceFilter

    deadline = time.monotonic() + 30
    while True:
        with get_client(sync_client=True) as client:
            page = client.read_events(limit=50, filter=EventFilter(
                occurred=EventOccurredFilter(since=since, until=datetime.now(UTC) + timedelta(minutes=5)),
                resource=EventResourceFilter(id=[resource_id]),
            ))
        if page.events or time.monotonic() > deadline:
            return [event.model_dump_json() for event in page.events]
        time.sleep(0.5)


def _artifacts(key: str, flow_run_id: Any) -> list[str]:
    """The artifacts ``key`` of one flow run (the session's Prefect API holds other tests' too)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=[key]), flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
    return [json.dumps(artifact.data) if not isinstance(artifact.data, str) else artifact.data for artifact in found]


def test_the_monitor_stores_and_shows_no_password(
    registered: Registered, credentialed_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.INFO)
    host = credentialed_server.removeprefix("http://")
    settings = ThermostatSettings(
        state_dir=tmp_path, bootstrap_resamples=300,
        tracking_uri=f"http://alice:{TRACKING_PASSWORD}@{host}",
        mlflow_ui_url=f"https://bob:{UI_PASSWORD}@mlflow.example.internal/",
    )
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
    n = 1200
    with open_prediction_log(settings) as log:
        log_predictions(log, "digits", "1", registered.temperature, registered.noisy_logits[:n],
                        [f"cred-{i}" for i in range(n)], groups="camera",
                        time=[start + timedelta(seconds=60 * i / n) for i in range(n)],
                        labels=np.asarray(registered.noisy_labels[:n]))
    since = datetime.now(UTC) - timedelta(seconds=5)

    state = monitor("digits", window_start=start, window_end=start + timedelta(minutes=1), settings=settings,
                    return_state=True)
    [check] = state.result()
    assert isinstance(check, VersionCheck)
    assert check.verdict == "drift" and check.event_id is not None, "the check drifts and emits its event"
    assert check.run_url is not None and check.run_url.startswith("https://bob:***@mlflow.example.internal/#/")

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        parameters = json.dumps(client.read_flow_run(state.state_details.flow_run_id).parameters)
    assert "alice:***@" in parameters and "bob:***@" in parameters, "the parameters still say where things are"

    report = _artifacts(artifact_key("digits", "1", "report"), state.state_details.flow_run_id)
    assert report and check.run_url in report[-1], "the report links the run (masked)"
    stored = {
        "logs (captured)": caplog.text,
        "console": "".join(capfd.readouterr()),
        "logs (Prefect API)": "\n".join(_stored_logs(state.state_details.flow_run_id)),
        "flow run parameters": parameters,
        "markdown report and table": "\n".join(report + _artifacts(artifact_key("digits", "1", "table"),
                                                                                  state.state_details.flow_run_id)),
        "drift event": "\n".join(_events_of("mlmodel.digits.v1", since)),
        "returned check": repr(check),
    }
    assert stored["drift event"], "the drift event was read back"
    leaks = {
        where: text[max(0, text.index(secret) - 200) : text.index(secret) + 40]
        for where, text in stored.items() for secret in (TRACKING_PASSWORD, UI_PASSWORD) if secret in text
    }
    assert not leaks, f"a password appears in: {leaks}"


RESERVED_PASSWORD = "Pr3f/Wx9#y?z@kQ:v7"  # every character that ends a URL's parts or its credentials


def _forms(password: str) -> list[str]:
    """Every form a password may be printed in: as set, percent-encoded, and its pieces between the
    characters that end a URL's parts (what a parser that cuts the URL inside it would quote)."""
    return [password, quote(password, safe=""), "Pr3f", "Wx9", "kQ:v7", "kQ%3Av7"]


def test_an_unreachable_mlflow_leaks_no_password_into_logs_states_or_the_settings_repr(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO)
    # Fail fast: no wait between the adapter's attempts, nor between the task's retries.
    monkeypatch.setattr(adapter.retry_transient, "__kwdefaults__", {"attempts": 4, "delays": (0.0,)})
    monkeypatch.setattr(monitor_flow.find_serving_versions, "retry_delay_seconds", [0, 0])
    settings = ThermostatSettings(
        state_dir=tmp_path, tracking_uri=f"http://alice:{quote(RESERVED_PASSWORD, safe='')}@127.0.0.1:{free_port()}",
        prediction_log_url=f"postgresql+psycopg://thermostat:{RESERVED_PASSWORD}@127.0.0.1:{free_port()}/log",
        mlflow_http_max_retries=0, mlflow_http_timeout_seconds=2,
    )
    state = monitor("digits", settings=settings, return_state=True)
    assert state.is_failed()

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    flow_run_id = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(flow_run_id)
        task_runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    message = flow_run.state.message if flow_run.state is not None else ""
    assert message and "MlflowException" in message and "http://alice:***@127.0.0.1:" in message, message
    stored = {
        "logs (captured)": caplog.text,
        "console": "".join(capfd.readouterr()),
        "logs (Prefect API)": "\n".join(_stored_logs(flow_run_id)),
        "flow run state message (the monitor failed alert)": message,
        "task run state messages": "\n".join(str(t.state.message) for t in task_runs if t.state is not None),
        "settings repr and str": repr(settings) + str(settings),
    }
    assert "attempt 1 of 4" in stored["logs (captured)"], "the adapter's retry warnings were logged"
    assert stored["logs (Prefect API)"].count("MlflowException") >= 2, "the task's failures were stored"
    leaks = {
        where: text[max(0, text.index(form) - 120) : text.index(form) + 40]
        for where, text in stored.items() for form in _forms(RESERVED_PASSWORD) if form in text
    }
    assert not leaks, f"the password appears in: {leaks}"
