"""Serving the documented way feeds the monitor (issue 14): the registered champion served by the
real ``mlflow models serve -m models:/digits@champion --env-manager local``, its predictions
logged by the pyfunc itself, labels attached to the request ids the responses returned, and
the ``monitor`` flow counting exactly those labelled rows."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.special import softmax

from flows.registry.checkpoint import checkpoint_logits, download_checkpoint
from flows.pipelines.monitor import monitor
from flows.settings import ThermostatSettings
from monitoring import PredictionLog
from tests.integration.conftest import Registered
from tests.support.ports import free_port
from tests.support.servers import running, stop_process

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VENV_BIN = Path(sys.executable).parent


@contextmanager
def mlflow_models_serve(model_uri: str, env: dict[str, str], log_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``mlflow models serve -m MODEL_URI --env-manager local`` on a free loopback port, in its
    own process group; yields (base URL, process) once ``/ping`` answers; stops it (SIGTERM to
    the group, as an orchestrator stops a container) at the end if the test did not."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [VENV_BIN / "mlflow", "models", "serve", "-m", model_uri, "--env-manager", "local", "--host", "127.0.0.1",
               "--port", str(port)]
    with running(command, log=log_path, what="mlflow models serve", ready=f"{url}/ping", timeout=180, env=env,
                 group=True, grace=60) as server:
        yield url, server


def stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group (the ``mlflow`` CLI and its uvicorn child), then
    wait until every process of the group has ended (SIGKILL after 60 s, and the test fails)."""
    if not stop_process(server, signal.SIGTERM, 60, group=True):
        pytest.fail("mlflow models serve did not stop within 60 s of SIGTERM")


def invoke(url: str, columns: list[str], rows: list[list[Any]], params: dict[str, list[str]] | None = None
           ) -> list[dict[str, Any]]:
    """A ``dataframe_split`` request; the digits checkpoint takes a tensor, so request ids and
    groups travel as ``params``."""
    body = json.dumps({"dataframe_split": {"columns": columns, "data": rows}} | ({"params": params} if params else {})
                      ).encode()
    request = urllib.request.Request(f"{url}/invocations", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            payload = json.loads(answer.read())
    except urllib.error.HTTPError as error:
        pytest.fail(f"/invocations answered {error.code}: {error.read().decode()[:2000]}")
    predictions: list[dict[str, Any]] = payload["predictions"]
    return predictions


def test_mlflow_models_serve_logs_what_it_serves_and_the_monitor_counts_it(
    registered: Registered, tmp_path: Path, prefect_api: None
) -> None:
    shutil.copyfile(registered.db, tmp_path / "mlflow.db")
    log_url = f"sqlite:///{tmp_path / 'predictions.db'}"
    settings = ThermostatSettings(state_dir=tmp_path, prediction_log_url=log_url, bootstrap_resamples=300,
                                  min_window=100, drift_min_group_size=50, drift_resamples=200)
    env = os.environ | {
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "MLFLOW_TRACKING_URI": settings.resolved_tracking_uri(),
        "THERMOSTAT_PREDICTION_LOG_URL": log_url,
        # Nothing is written while serving (no batch fills, no interval passes): SIGTERM must write it all.
        "THERMOSTAT_SERVING_LOG_FLUSH_MS": "600000",
        "THERMOSTAT_SERVING_LOG_BATCH_ROWS": "1000",
    }
    split = registered.template.split
    holdout = split.holdout_index
    features, labels = split.features[holdout][:180], split.labels[holdout][:180]
    files = download_checkpoint(registered.template.checkpoints["logistic"].uri, tmp_path / "ckpt",
                                tracking_uri=settings.resolved_tracking_uri())
    expected = softmax(checkpoint_logits(files, features)[0] / registered.temperature, axis=1)
    feature_columns = [str(j) for j in range(features.shape[1])]

    served_from = datetime.now(UTC)
    server_log = tmp_path / "serve.log"
    returned: list[dict[str, Any]] = []
    given_ids: list[str] = []
    with mlflow_models_serve("models:/digits@champion", env, server_log) as (url, server):
        # 30 requests of 3 rows with request ids and groups, then 30 of 3 rows with features only.
        for start in range(0, 90, 3):
            ids = [f"web-{uuid.uuid4()}" for _ in range(3)]
            given_ids += ids
            rows = [features[i].tolist() for i in range(start, start + 3)]
            groups = ["web" if i % 2 else "app" for i in range(start, start + 3)]
            answer = invoke(url, feature_columns, rows, {"request_id": ids, "group": groups})
            assert [row["request_id"] for row in answer] == ids  # given ids come back
            returned += answer
        for start in range(90, 180, 3):
            answer = invoke(url, feature_columns, [features[i].tolist() for i in range(start, start + 3)])
            returned += answer
        with PredictionLog(log_url) as log:
            log.create()
            assert log.count_rows() == 0  # all 180 rows still queued in the server
        stop(server)  # SIGTERM, as an orchestrator stops it: the writer drains before uvicorn exits

    # The responses: calibrated probabilities softmax(z / T), the version and T that answered, request ids.
    probabilities = np.array([[row[f"prob_{k}"] for k in range(10)] for row in returned])
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=1e-12)
    assert {row["model_version"] for row in returned} == {"1"}
    assert {row["temperature"] for row in returned} == {registered.temperature}
    generated = [row["request_id"] for row in returned[90:]]
    assert len(set(generated)) == 90 and all(str(uuid.UUID(rid)) == rid for rid in generated)

    # uvicorn finishes its requests on SIGTERM, then re-raises it (no atexit): the writer drained first.
    text = server_log.read_text()
    assert "logging every prediction of digits version 1" in text, text[-3000:]
    assert "draining (the server is stopping): 180 row(s) written, 0 lost, 0 pending" in text, text[-3000:]

    # Labels arrive for 150 of the 180 requests (all with given ids, 60 of the generated ones).
    request_ids = [row["request_id"] for row in returned]
    labelled = list(range(90)) + list(range(90, 150))
    with PredictionLog(log_url) as log:
        assert log.count_rows() == 180
        with log.engine.connect() as connection:
            table = log.table
            stored = connection.execute(
                table.select().order_by(table.c.id)
            ).all()
        assert [row.request_id for row in stored] == request_ids  # in the order served
        assert {(row.model_name, row.model_version, row.temperature) for row in stored} == {
            ("digits", "1", registered.temperature)}
        assert [row.group_key for row in stored[:90]] == ["web" if i % 2 else "app" for i in range(90)]
        assert {row.group_key for row in stored[90:]} == {None}
        report = log.attach_labels([request_ids[i] for i in labelled], labels[labelled])
        assert report.attached == 150 and report.complete

    # The monitor, over the window the server ran in, counts exactly the labelled rows.
    [check] = monitor("digits", window_start=served_from - timedelta(seconds=1), window_end=datetime.now(UTC),
                      settings=settings)
    assert check.version == "1" and check.report is not None
    assert check.report.n == 150
    assert check.verdict in ("calibrated", "undetermined", "drift")
