"""The ingestion service's routes, in process (the ASGI app on a real SQLite log): every row reported,
the bearer tokens, the limits, 429 when the writer is behind, KServe's CloudEvents built with the
``cloudevents`` SDK, labels in JSON and CSV, /metrics. The real server on loopback, fuzzed:
tests/integration/test_ingest_server.py."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cloudevents.core.bindings.http import to_binary_event, to_structured_event
from cloudevents.core.v1.event import CloudEvent
from starlette.testclient import TestClient

from flows.ingest import create_app
from flows.ingest.kserve import CLOUDEVENT_REQUEST, CLOUDEVENT_RESPONSE
from flows.settings import ThermostatSettings
from monitoring import PredictionLog

TOKEN = "tok-" + "7f3a9c1e" * 4
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BATCH = {"model_name": "tickets", "model_version": "7", "temperature": 1.25}


def _settings(tmp_path: Path, **overrides: Any) -> ThermostatSettings:
    return ThermostatSettings(state_dir=tmp_path / "state", prediction_log_url=f"sqlite:///{tmp_path / 'log.db'}",
                              ingest_tokens=(TOKEN,), **overrides)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(_settings(tmp_path)), base_url="http://127.0.0.1") as client:
        yield client


def _log(tmp_path: Path) -> PredictionLog:
    return PredictionLog(f"sqlite:///{tmp_path / 'log.db'}")


def test_predictions_every_row_reported_the_good_ones_written(client: TestClient, tmp_path: Path) -> None:
    rows = [{"request_id": "t-1", "logits": [2.0, 0.5, -1.0], "group": "web", "served_at": "2026-03-01T12:00:00Z"},
            {"request_id": "t-2", "logits": [1.0]},
            {"request_id": "t-3", "logits": [0.1, 0.2, 0.3], "model_version": "8", "temperature": 0.8},
            "junk"]
    answer = client.post("/v1/predictions", json={**BATCH, "rows": rows}, headers=AUTH)
    assert answer.status_code == 200
    assert answer.json() == {"received": 4, "written": 2, "unchanged": 0, "refused": [
        {"index": 1, "request_id": "t-2", "reason": "logits have 1 value(s); K >= 2 is required"},
        {"index": 3, "request_id": None, "reason": "a row must be an object with the fields model_name, model_version, "
                                                   "temperature, request_id, logits; got str"}]}
    again = client.post("/v1/predictions", json={**BATCH, "rows": rows[:1]}, headers=AUTH)
    assert again.json()["unchanged"] == 1  # a client retrying is safe
    atomic = client.post("/v1/predictions?atomic=true", json={**BATCH, "rows": rows[:2]}, headers=AUTH)
    assert atomic.status_code == 422 and atomic.json()["written"] == 0
    log = _log(tmp_path)
    assert log.logged_versions() == {("tickets", "7"): 3, ("tickets", "8"): 3} and log.count_rows() == 2


@pytest.mark.parametrize(("headers", "status"), [
    ({}, 401), ({"Authorization": "Bearer wrong-token-but-long-enough"}, 401), ({"Authorization": TOKEN}, 401),
    ({"Authorization": f"Basic {TOKEN}"}, 401), (AUTH, 200)])
def test_a_bearer_token_is_required_and_never_shown(client: TestClient, headers: dict[str, str], status: int) -> None:
    answer = client.post("/v1/predictions", json={**BATCH, "rows": []}, headers=headers)
    assert answer.status_code == status
    assert TOKEN not in answer.text and TOKEN not in str(answer.headers)
    if status == 401:
        assert answer.headers["www-authenticate"].startswith("Bearer")
    metrics = client.get("/metrics")  # no token needed, and none shown
    assert metrics.status_code == 200 and TOKEN not in metrics.text and TOKEN not in client.get("/openapi.json").text


def test_bodies_the_routes_do_not_read(tmp_path: Path) -> None:
    settings = _settings(tmp_path, ingest_max_rows=3, ingest_max_body_bytes=2048)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        def post(path: str, **kwargs: Any) -> tuple[int, str]:
            answer = client.post(path, headers={**AUTH, **kwargs.pop("headers", {})}, **kwargs)
            return answer.status_code, answer.json()["error"] if answer.status_code != 200 else ""

        assert post("/v1/predictions", content=b"{not json", headers={"content-type": "application/json"})[0] == 400
        assert post("/v1/predictions", json=[1, 2])[1].startswith("the body must be a JSON object with a 'rows' list")
        assert post("/v1/predictions", content=b"a,b", headers={"content-type": "text/csv"})[0] == 415
        assert post("/v1/predictions", json={"rows": [{}] * 4})[1].startswith("4 prediction rows in one request; at "
                                                                             "most 3")
        assert post("/v1/predictions", json={"rows": [], "pad": "x" * 3000})[1].startswith("the body has 3,")
        assert post("/v1/labels", content=b"id,label\na,1\nb,1\nc,1\nd,1\n",
                    headers={"content-type": "text/csv"})[0] == 413
        assert post("/v1/labels", content=b"id;label\n", headers={"content-type": "text/csv"})[1].startswith(
            "the CSV body: no request_id (or id) column")
        assert post("/v1/predictions?atomic=maybe", json={"rows": []})[0] == 400
        assert client.post("/v1/predictions", json={"rows": []}, headers={**AUTH, "host": "evil.example"}
                           ).status_code == 421


def test_labels_in_json_and_csv(client: TestClient, tmp_path: Path) -> None:
    rows = [{"request_id": f"t-{i}", "logits": [float(i), 0.0, 1.0]} for i in range(5)]
    assert client.post("/v1/predictions", json={**BATCH, "rows": rows}, headers=AUTH).json()["written"] == 5
    answer = client.post("/v1/labels", json={"labels": [{"request_id": "t-0", "label": 1}, {"request_id": "t-1"},
                                                        {"request_id": "t-9", "label": 0}]}, headers=AUTH).json()
    assert (answer["attached"], answer["unknown"]) == (1, ["t-9"])
    assert answer["refused"] == [{"index": 1, "request_id": "t-1",
                                  "reason": "a label row must be an object with request_id and label"}]
    csv = "request_id,label,annotator\nt-0,2,a\nt-1,1,a\nt-2,7,a\nt-3,two,a\nt-4,0\n".encode()
    answer = client.post("/v1/labels", content=csv, headers={**AUTH, "content-type": "text/csv; charset=utf-8"}).json()
    assert answer["received"] == 5 and answer["attached"] == 1
    assert answer["conflicts"] == [{"request_id": "t-0", "existing_label": 1, "new_label": 2}]
    assert [(r["index"], r["reason"]) for r in answer["refused"]] == [
        (2, "label 7 is outside [0, 3) of model 'tickets' version '7'"),
        (3, "the label must be an integer class index; got str 'two'"),
        (4, "the row has 2 field(s); the header has 3")]
    atomic = client.post("/v1/labels?atomic=true", content=b"id,label\nt-3,0\nt-4,9\n",
                         headers={**AUTH, "content-type": "text/csv"})
    assert atomic.status_code == 422 and "nothing of the 2 rows was written" in atomic.json()["error"]
    metrics = client.get("/metrics").text
    assert 'thermostat_ingest_rows_total{kind="labels",outcome="refused"} 4.0' in metrics
    assert 'thermostat_ingest_rows_total{kind="predictions",outcome="written"} 5.0' in metrics


def _v2_response(data: list[float], shape: list[int], **extra: Any) -> dict[str, Any]:
    return {"model_name": "digits", "model_version": "3", "id": "req-1",
            "outputs": [{"name": "logits", "shape": shape, "datatype": "FP32", "data": data}], **extra}


def _event(kind: str, data: Any, **attributes: Any) -> CloudEvent:
    return CloudEvent({"type": kind, "source": "http://digits-predictor.models/", "id": "ce-77",
                       "specversion": "1.0", "datacontenttype": "application/json",
                       "inferenceservicename": "digits", "namespace": "models", "component": "predictor",
                       "endpoint": "default", **attributes}, data)


def test_kserve_cloudevents_built_with_the_sdk(client: TestClient, tmp_path: Path) -> None:
    """KServe's logger: a request event (ignored) and its response event (the logits), in binary mode;
    the same in structured mode; a batch of rows; the T from the logger URL or the response."""
    request = to_binary_event(_event(CLOUDEVENT_REQUEST, {"inputs": [{"name": "x", "shape": [1, 4],
                                                                         "datatype": "FP32", "data": [0, 1, 2, 3]}]}))
    answer = client.post("/v1/cloudevents", content=request.body, headers={**AUTH, **request.headers})
    assert answer.status_code == 200 and answer.json()["ignored"].startswith("a request event")

    metadata = json.dumps({"Thermostat-Group": ["mobile"], "X-Other": ["1"]})
    response = to_binary_event(_event(CLOUDEVENT_RESPONSE, _v2_response([2.0, 0.5, -1.0], [1, 3]),
                                      metadata=metadata, time=datetime(2026, 3, 1, 12, tzinfo=UTC)))
    answer = client.post("/v1/cloudevents?temperature=1.5", content=response.body,
                         headers={**AUTH, **response.headers})
    assert answer.json() == {"received": 1, "written": 1, "unchanged": 0, "refused": []}

    batch = to_structured_event(_event(CLOUDEVENT_RESPONSE, _v2_response(
        [1, 2, 3, 4, 5, 6], [2, 3], id="req-2", parameters={"temperature": 0.9, "group": "web"})))
    answer = client.post("/v1/cloudevents", content=batch.body, headers={**AUTH, **batch.headers})
    assert answer.json()["written"] == 2

    no_t = to_binary_event(_event(CLOUDEVENT_RESPONSE, _v2_response([1, 2, 3], [3], id="req-3")))
    refused = client.post("/v1/cloudevents", content=no_t.body, headers={**AUTH, **no_t.headers}).json()["refused"]
    assert refused == [{"index": 0, "request_id": "req-3",
                        "reason": "missing temperature (neither in the row nor in the batch's defaults)"}]

    log = _log(tmp_path)
    with log.engine.connect() as conn:
        stored = {row.request_id: row for row in conn.execute(log.table.select())}
    assert set(stored) == {"req-1", "req-2/0", "req-2/1"}
    assert (stored["req-1"].group_key, stored["req-1"].temperature, stored["req-1"].model_version) == (
        "mobile", 1.5, "3")
    assert stored["req-1"].served_at == datetime(2026, 3, 1, 12, tzinfo=UTC)  # ce-time
    assert (stored["req-2/1"].group_key, stored["req-2/1"].temperature, stored["req-2/1"].predicted_class) == (
        "web", 0.9, 2)


@pytest.mark.parametrize(("headers", "body", "message"), [
    ({"ce-type": CLOUDEVENT_RESPONSE}, b"{}", "not a CloudEvent: no ce-specversion, ce-id, ce-source"),
    ({"ce-specversion": "1.0", "ce-id": "a", "ce-source": "s", "ce-type": "com.example.other"}, b"{}",
     "ce-type 'com.example.other' is not KServe's"),
    ({"ce-specversion": "1.0", "ce-id": "a", "ce-source": "s", "ce-type": CLOUDEVENT_RESPONSE},
     b'{"predictions": [1, 0]}', "not an Open Inference Protocol (v2) response"),
    ({"ce-specversion": "1.0", "ce-id": "a", "ce-source": "s", "ce-type": CLOUDEVENT_RESPONSE},
     json.dumps(_v2_response([1, 2, 3], [2, 3])).encode(), "shape [2, 3] holds 6 values; its data has 3"),
])
def test_events_that_are_not_kserve_responses(client: TestClient, headers: dict[str, str], body: bytes,
                                               message: str) -> None:
    answer = client.post("/v1/cloudevents", content=body, headers={**AUTH, **headers,
                                                                   "content-type": "application/json"})
    assert answer.status_code == 400 and message in answer.json()["error"]


def test_the_writer_behind_gets_429_with_retry_after(tmp_path: Path) -> None:
    """The writer waits on a database lock another connection holds; the rows waiting reach the
    limit; the next request is answered 429 with Retry-After and nothing of it queued; the
    waiting rows are written once the lock goes."""
    settings = _settings(tmp_path, ingest_max_pending_rows=150)
    log = _log(tmp_path)
    log.create()
    blocker = sqlite3.connect(tmp_path / "log.db", timeout=30)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        blocker.execute("BEGIN EXCLUSIVE")
        answers: dict[str, Any] = {}

        def send(prefix: str) -> None:
            rows = [{"request_id": f"{prefix}{i}", "logits": [1.0, 0.0]} for i in range(100)]
            answers[prefix] = client.post("/v1/predictions", json={**BATCH, "rows": rows}, headers=AUTH)

        first = threading.Thread(target=send, args=("a",))
        first.start()
        threading.Event().wait(1.0)  # its rows wait for the lock
        send("b")
        throttled = answers["b"]
        assert throttled.status_code == 429 and 1 <= int(throttled.headers["retry-after"]) <= 60
        assert "the writer is behind (100 rows waiting, at most 150)" in throttled.json()["error"]
        blocker.rollback()
        first.join(60)
        assert answers["a"].status_code == 200 and answers["a"].json()["written"] == 100
        assert "thermostat_ingest_throttled_total{route=\"predictions\"} 1.0" in client.get("/metrics").text
    blocker.close()
    assert log.count_rows() == 100


def test_the_openapi_schema_names_every_route(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert set(schema["paths"]) == {"/v1/predictions", "/v1/labels", "/v1/cloudevents", "/healthz", "/metrics"}
    assert schema["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    rows = schema["components"]["schemas"]["PredictionsBody"]["properties"]["rows"]
    assert rows["maxItems"] == 100_000 and "nullable" in schema["components"]["schemas"]["PredictionRow"][
        "properties"]["group"]


def test_settings_never_show_a_token() -> None:
    settings = ThermostatSettings(ingest_tokens=(TOKEN,))
    assert TOKEN not in repr(settings) and TOKEN not in str(settings)
    assert json.loads(settings.model_dump_json())["ingest_tokens"] == ["***"]
    with pytest.raises(ValueError, match=r"ingest_tokens\[0\] is masked") as refused:
        ThermostatSettings.model_validate_json(settings.model_dump_json())
    with pytest.raises(ValueError, match=r"ingest_tokens\[0\] has 5 characters; a token needs at least 16") as short:
        ThermostatSettings(ingest_tokens=("abcde",))
    assert "abcde" not in str(short.value) and TOKEN not in str(refused.value)


def test_a_flow_run_record_never_holds_a_token() -> None:
    """What Prefect stores when settings holding tokens are a flow's parameter: the masked form."""
    from flows.pipelines.monitor import monitor

    parameters = monitor.serialize_parameters({"model_name": "m", "settings": ThermostatSettings(ingest_tokens=(TOKEN,))})
    text = json.dumps(parameters)
    assert TOKEN not in text and '"ingest_tokens": ["***"]' in text


@pytest.mark.parametrize("reader", ["predictions_from_json", "labels_from_json"])
def test_a_json_string_with_a_lone_surrogate_escape_is_bad_input_not_a_server_error(reader: str) -> None:
    """JSON's ``\\ud88c`` escape reads as a Python string no UTF-8 writer takes (the fuzzer's 500):
    the body is refused as not UTF-8 text, naming why."""
    from flows.ingest import payloads

    body = b'{"rows": [{"request_id": "\\ud88c", "logits": [1.0, 2.0]}], "labels": [{"request_id": "\\ud88c", "label": 1}]}'
    with pytest.raises(payloads.BodyError, match="not UTF-8 text: a string holds a lone surrogate escape"):
        getattr(payloads, reader)(body, 10)
