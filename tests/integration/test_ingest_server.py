"""``thermostat ingest`` as a real server on loopback: its OpenAPI schema fuzzed by schemathesis (no
500, no hang, every answer as the schema says), and its tokens and the log's password in no answer
and no log line, also when the database is down."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.ports import free_port
from tests.support.servers import running

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOKEN = "tok-" + "c0ffee42" * 4
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PASSWORD = "pg-S3cret-pw"


def _serve(tmp_path: Path, log_url: str, name: str) -> Any:
    port = free_port()
    env = {**os.environ, "THERMOSTAT_INGEST_TOKENS": f"{TOKEN},{'other-token-' * 2}",
           "THERMOSTAT_PREDICTION_LOG_URL": log_url, "THERMOSTAT_STATE_DIR": str(tmp_path / "state"),
           "THERMOSTAT_INGEST_MAX_ROWS": "200", "THERMOSTAT_INGEST_WRITE_TIMEOUT_SECONDS": "10"}
    command = [Path(sys.executable).parent / "thermostat", "ingest", "--port", str(port)]
    return port, running(command, log=tmp_path / f"{name}.log", what=f"thermostat ingest ({name})",
                         ready=f"http://127.0.0.1:{port}/healthz", any_status=True, env=env, grace=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("ingest")
    port, serving = _serve(root, f"sqlite:///{root / 'log.db'}", "server")
    with serving:
        yield f"http://127.0.0.1:{port}", root / "server.log"


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
def test_the_schema_fuzzed_never_gets_a_500_or_a_hang(server: tuple[str, Path], mode: GenerationMode) -> None:
    """Requests generated from the service's own OpenAPI schema (bodies, query parameters, the
    CloudEvent headers), as it declares them and as it does not. Per-row refusals answer 200 by
    design (a bad row does not refuse the request), so schemathesis' check that schema-violating
    data gets a 4xx does not apply; every answer must be one the schema declares, in its declared
    shape, within 10 s."""
    schema = schemathesis.openapi.from_url(f"{server[0]}/openapi.json", timeout=30)
    seen: set[str] = set()

    @given(case=schema.as_strategy(generation_mode=mode))
    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)
    def call(case: Any) -> None:
        seen.add(f"{case.method} {case.path}")
        case.call_and_validate(headers=AUTH, timeout=10, checks=CHECKS)

    call()
    assert {"POST /v1/predictions", "POST /v1/labels", "POST /v1/cloudevents"} <= seen


def test_fuzzing_wrote_rows_and_no_log_line_holds_a_token(server: tuple[str, Path]) -> None:
    url, log = server
    for token in ("", "Bearer wrong-token-wrong-token", f"Bearer {TOKEN}x", TOKEN):
        answer = requests.post(f"{url}/v1/labels", data=b"id,label\n", timeout=10,
                               headers={"Authorization": token, "content-type": "text/csv"})
        assert answer.status_code == 401 and TOKEN not in answer.text
    metrics = requests.get(f"{url}/metrics", timeout=10).text
    assert 'thermostat_ingest_requests_total{code="200",route="predictions"}' in metrics
    assert TOKEN not in metrics and TOKEN not in log.read_text()


def test_a_database_that_is_down_is_said_without_its_password_or_a_token(tmp_path: Path) -> None:
    dead = f"postgresql+psycopg://thermostat:{PASSWORD}@127.0.0.1:{free_port()}/log"  # nothing listens there
    port, serving = _serve(tmp_path, dead, "down")
    with serving:
        url = f"http://127.0.0.1:{port}"
        health = requests.get(f"{url}/healthz", timeout=30)
        answer = requests.post(f"{url}/v1/predictions", timeout=30, headers=AUTH, json={
            "model_name": "m", "model_version": "1", "temperature": 1.0,
            "rows": [{"request_id": "a", "logits": [1.0, 0.0]}]})
        labels = requests.post(f"{url}/v1/labels", timeout=30, headers=AUTH,
                               json={"labels": [{"request_id": "a", "label": 0}]})
    assert (health.status_code, answer.status_code, labels.status_code) == (503, 503, 503)
    assert "could not be written" in answer.json()["error"] and answer.headers["retry-after"] == "5"
    output = (tmp_path / "down.log").read_text()
    assert "writing predictions failed" in output and "thermostat:***@127.0.0.1" in output
    for text in (health.text, answer.text, labels.text, output):
        assert PASSWORD not in text and TOKEN not in text
