"""From a KServe-served model to a monitor check, through ``thermostat ingest`` on loopback: the
inference logger's CloudEvents (built with the ``cloudevents`` SDK, binary mode, request and
response events, batches of rows) and a labelling tool's CSV a day later; then the scheduled
monitor reads those rows (real MLflow store, real Prefect API, real SQLite log)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import requests
from cloudevents.core.bindings.http import to_binary_event
from cloudevents.core.v1.event import CloudEvent

from flows.ingest.kserve import CLOUDEVENT_REQUEST, CLOUDEVENT_RESPONSE
from flows.pipelines.monitor import monitor
from flows.settings import ThermostatSettings
from tests.integration.conftest import Registered
from tests.support.ports import free_port
from tests.support.servers import running

pytestmark = pytest.mark.integration

TOKEN = "kserve-logger-" + "5e" * 10
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _events(request_id: str, logits: np.ndarray, when: datetime) -> list[tuple[dict[str, str], bytes]]:
    """The two events KServe's logger posts for one v2 request of ``len(logits)`` rows."""
    attributes = {"source": "http://digits-predictor.models/", "id": request_id, "specversion": "1.0",
                  "datacontenttype": "application/json", "inferenceservicename": "digits", "namespace": "models",
                  "component": "predictor", "endpoint": "default", "time": when}
    request = CloudEvent({**attributes, "type": CLOUDEVENT_REQUEST}, {"id": request_id, "inputs": [
        {"name": "pixels", "shape": [len(logits), 64], "datatype": "FP32", "data": [0.0] * (64 * len(logits))}]})
    response = CloudEvent({**attributes, "type": CLOUDEVENT_RESPONSE}, {
        "model_name": "digits", "model_version": "1", "id": request_id,
        "outputs": [{"name": "logits", "shape": list(logits.shape), "datatype": "FP32",
                     "data": logits.astype(np.float32).ravel().tolist()}]})
    return [(message.headers, message.body) for message in map(to_binary_event, (request, response))]


def test_kserve_events_and_a_csv_of_labels_reach_the_monitor(registered: Registered, tmp_path: Path) -> None:
    shutil.copyfile(registered.db, tmp_path / "mlflow.db")
    settings = ThermostatSettings(state_dir=tmp_path, bootstrap_resamples=300, label_settle_time=timedelta(0))
    port = free_port()
    env = {**os.environ, "THERMOSTAT_STATE_DIR": str(tmp_path), "THERMOSTAT_INGEST_TOKENS": TOKEN}
    logits, labels = registered.clean_logits[:600], registered.clean_labels[:600]
    served = datetime.now(UTC) - timedelta(minutes=5)
    with running([Path(sys.executable).parent / "thermostat", "ingest", "--port", str(port)], log=tmp_path / "ingest.log",
                 what="thermostat ingest", ready=f"http://127.0.0.1:{port}/healthz", env=env, grace=10):
        url = f"http://127.0.0.1:{port}"
        # The T in force rides on the logger's URL (logger.url: .../v1/cloudevents?temperature=T).
        target = f"{url}/v1/cloudevents?temperature={registered.temperature!r}"
        ids: list[str] = []
        with requests.Session() as session:
            for j, start in enumerate(range(0, 600, 20)):  # 30 requests of 20 rows, then single rows
                for headers, body in _events(f"kserve-{j}", logits[start:start + 20], served):
                    answer = session.post(target, data=body, headers={**AUTH, **headers}, timeout=30)
                    assert answer.status_code == 200, answer.text
                ids += [f"kserve-{j}/{i}" for i in range(20)]
            assert answer.json() == {"received": 20, "written": 20, "unchanged": 0, "refused": []}
            # The labelling tool's export, a day later in real life: one bad row among them.
            csv = "request_id,label,annotator\n" + "".join(f"{rid},{label},tool\n" for rid, label in zip(
                ids[:-1], labels.tolist(), strict=False)) + f"{ids[-1]},99,tool\n"
            answer = session.post(f"{url}/v1/labels", data=csv.encode(), timeout=60,
                                  headers={**AUTH, "content-type": "text/csv"})
        report = answer.json()
        assert (report["received"], report["attached"], report["unknown"], report["conflicts"]) == (600, 599, [], [])
        assert report["refused"] == [{"index": 599, "request_id": "kserve-29/19",
                                      "reason": "label 99 is outside [0, 10) of model 'digits' version '1'"}]
    time.sleep(0.05)  # the check's clock after the labels
    [check] = monitor("digits", settings=settings)
    assert check.report is not None and check.verdict in ("calibrated", "undetermined", "drift")
    summary = check.report.summary
    assert (summary.model_version, summary.overall.n, summary.temperature) == ("1", 599, registered.temperature)
    assert TOKEN not in (tmp_path / "ingest.log").read_text()
