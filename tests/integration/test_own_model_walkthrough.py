"""docs/own-model.md, run as written: a PyTorch model and a text model from ``log_model`` to an auto-refitted version.

The page's blocks are read when the test runs and run in document order, as one person in one
terminal and one Python session: ``bash`` blocks by :class:`tests.support.doc_blocks.Shell`
(the state of the blocks before carried on), ``python`` blocks in this process in one namespace
(a fresh Python would read ``MLFLOW_TRACKING_URI`` and ``THERMOSTAT_*`` from the terminal's
environment: they are set from the shell's for each block). What the test adds is what the
page's section 0 says is running — an MLflow server (a new SQLite store, artifacts proxied), a
Prefect server with ``prefect deploy --all`` and a process worker
(:func:`tests.integration.conftest.deploy_all_and_start_worker`) — and the placeholders: loopback
ports, a temporary folder for ``/data/walkthrough``, a SQLite prediction log for the PostgreSQL
URL, and each checkpoint's run id once its block has logged it.

Then it checks what the page promises: every probability served before the refit is
softmax(z / T) of the checkpoint's own logits z on the same input (1e-6: float32 logits), the
monitor found drift in both models, each refit registered version 2 with another T and moved
``@champion``, and ``thermostat serve`` answers with version 2, again softmax(z / T) at its T.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.special import softmax

from tests.integration.conftest import deploy_all_and_start_worker, isolated_env, mlflow_server, stop_worker
from tests.integration.test_deployment import _outcome
from tests.support.doc_blocks import Block, Placeholders, Shell, fenced_blocks, log_name
from tests.support.ports import free_port
from tests.support.servers import stop_process

REPO = Path(__file__).resolve().parents[2]
DOCUMENT = REPO / "docs" / "own-model.md"
LOG_URL = '"postgresql+psycopg://thermostat:${THERMOSTAT_DB_PASSWORD}@db.internal:5432/thermostat"'
MODELS = {"sensors": 8080, "tickets": 8081}  # the page's models and the ports it serves them on
TRAFFIC = {"sensors": "sensor_traffic", "tickets": "ticket_traffic"}  # the page's names of what each was sent


def walkthrough_placeholders(mlflow_port: int, prefect_port: int, serve_ports: dict[str, int], root: Path,
                             log_url: str) -> Placeholders:
    """The page's placeholders and their values here (the run ids are added once logged)."""
    values = {
        "/path/to/thermostat": str(REPO),
        "/data/walkthrough": str(root / "walkthrough"),
        LOG_URL: f'"{log_url}"',
        "127.0.0.1:5000": f"127.0.0.1:{mlflow_port}",
        "127.0.0.1:4200": f"127.0.0.1:{prefect_port}",
    }
    for name, port in MODELS.items():
        values |= {f"127.0.0.1:{port}": f"127.0.0.1:{serve_ports[name]}", f"--port {port}": f"--port {serve_ports[name]}"}
    return Placeholders(values, Path(__file__).name)


def test_every_block_is_python_or_bash_with_known_placeholders(tmp_path: Path) -> None:
    """Without servers: every block runs (no marker), and has only known placeholders."""
    placeholders = walkthrough_placeholders(5000, 4200, {"sensors": 9000, "tickets": 9001}, tmp_path, "sqlite://")
    placeholders.values |= {"<sensors run_id>": "0123", "<tickets run_id>": "4567"}
    blocks = fenced_blocks(DOCUMENT.read_text(), DOCUMENT.name)
    assert {block.language for block in blocks} == {"bash", "python"}
    assert {block.marker for block in blocks} == {None}
    for block in blocks:
        placeholders.apply(block)


def _run_python(block: Block, text: str, namespace: dict[str, Any], env: dict[str, str],
                monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a python block in the page's one session, with the terminal's MLflow and Thermostat variables."""
    started = time.monotonic()
    with monkeypatch.context() as patch:
        for key in os.environ:
            if key.startswith(("MLFLOW_", "THERMOSTAT_")):
                patch.delenv(key)
        for key, value in env.items():
            if key.startswith(("MLFLOW_", "THERMOSTAT_")):
                patch.setenv(key, value)
        exec(compile(text, f"{DOCUMENT.name}:{block.line}", "exec"), namespace)  # noqa: S102
    print(f"block {block.line}: {time.monotonic() - started:.1f} s")


def _probabilities(answer: list[dict[str, Any]], classes: int) -> Any:
    return np.array([[row[f"prob_{k}"] for k in range(classes)] for row in answer])


def _checkpoint_logits(tracking_uri: str, name: str, inputs: Any, destination: Path) -> Any:
    """The logits of ``name`` version 1's checkpoint (as logged, not as registered) on ``inputs``."""
    from flows.registry.checkpoint import checkpoint_logits, download_checkpoint
    from mlflow.tracking import MlflowClient

    uri = MlflowClient(tracking_uri=tracking_uri).get_model_version(name, "1").tags["checkpoint_uri"]
    logits, _ = checkpoint_logits(download_checkpoint(uri, destination, tracking_uri=tracking_uri), inputs)
    return logits


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1800)  # about 4 min idle; 15 min measured at load 12 on 2 cores
def test_the_walkthrough_runs_as_written(prefect_server: tuple[str, dict[str, str]], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch", reason="the PyTorch walkthrough needs the torch extra (make test installs it)")
    import requests

    started = time.monotonic()
    api_url, env = prefect_server
    serve_ports = {name: free_port() for name in MODELS}
    log_url = f"sqlite:///{tmp_path / 'predictions.db'}"
    blocks = fenced_blocks(DOCUMENT.read_text(), DOCUMENT.name)
    with mlflow_server(None, tmp_path / "mlflow", "--artifacts-destination", str(tmp_path / "mlflow" / "artifacts")) \
            as tracking_uri:
        placeholders = walkthrough_placeholders(int(tracking_uri.rsplit(":", 1)[1]), int(api_url.split(":")[2].split("/")[0]),
                                                serve_ports, tmp_path, log_url)
        worker = deploy_all_and_start_worker(
            env | {"THERMOSTAT_TRACKING_URI": tracking_uri, "THERMOSTAT_PREDICTION_LOG_URL": log_url}, tmp_path)
        logs = tmp_path / "logs"
        logs.mkdir()
        # A wide terminal: `--watch` prints each run's outcome line unwrapped.
        shell = Shell(env=isolated_env(tmp_path, COLUMNS="10000"), cwd=tmp_path, logs=logs)
        namespace: dict[str, Any] = {"__name__": "walkthrough"}
        print(f"servers and worker: {time.monotonic() - started:.1f} s")
        try:
            for block in blocks:
                text = placeholders.apply(block)
                if block.language == "python":
                    _run_python(block, text, namespace, shell.env, monkeypatch)
                    for name in MODELS:
                        if f"{name}_run" in namespace:
                            placeholders.values[f"<{name} run_id>"] = namespace[f"{name}_run"].info.run_id
                else:
                    shell.run(text, block.where, timeout=600)
            print(f"the page's blocks: {time.monotonic() - started:.1f} s")
            _check_the_walkthrough(tracking_uri, namespace, shell, blocks, serve_ports, tmp_path, requests)
        except BaseException:
            print(shell.tails(), (tmp_path / "worker.log").read_text()[-6000:])
            raise
        finally:
            shell.stop_all()
            stop_worker(worker, api_url)
    print(f"the walkthrough: {time.monotonic() - started:.1f} s")


def _check_the_walkthrough(tracking_uri: str, namespace: dict[str, Any], shell: Shell, blocks: list[Block],
                           serve_ports: dict[str, int], tmp_path: Path, requests: Any) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    # The check found drift in both models (what --watch printed: the run's outcome line).
    fleet = next(block for block in blocks if "monitor-fleet/monitor-fleet" in block.text)
    outcome = _outcome((shell.logs / log_name(fleet.where)).read_text())
    assert sorted((check["model_name"], check["version"], check["verdict"]) for check in outcome["details"]["checks"]) \
        == [("sensors", "1", "drift"), ("tickets", "1", "drift")], outcome
    for name, port in serve_ports.items():
        first, refitted = client.get_model_version(name, "1"), client.get_model_version_by_alias(name, "champion")
        inputs = namespace[TRAFFIC[name]]
        sent = namespace["answers"][name]
        # Before the refit: version 1 answered every request, softmax(z / T) of the checkpoint's own logits.
        logits = _checkpoint_logits(tracking_uri, name, inputs, tmp_path / f"{name}-checkpoint")
        assert {row["model_version"] for row in sent} == {"1"}
        assert [row["request_id"] for row in sent] == [f"{name}-{i}" for i in range(len(inputs))]
        temperature = float(first.tags["temperature"])
        difference = float(np.abs(_probabilities(sent, logits.shape[1]) - softmax(logits / temperature, axis=1)).max())
        print(f"{name} v1 (T={temperature:.4f}): max |served - softmax(z/T)| over {len(sent)} rows: {difference:.2g}")
        assert difference <= 1e-6, (name, difference)
        # The refit: version 2 of the same checkpoint holds @champion, with another T, and is served at it.
        assert refitted.version == "2" and refitted.tags["refit_parent_version"] == "1", refitted.tags
        assert refitted.tags["checkpoint_digest"] == first.tags["checkpoint_digest"]
        new_temperature = float(refitted.tags["temperature"])
        assert abs(new_temperature - temperature) > 0.05 * temperature, (temperature, new_temperature)
        answer = requests.post(f"http://127.0.0.1:{port}/invocations", json={"inputs": inputs[:50].tolist()},
                               timeout=60).json()["predictions"]
        assert {(row["model_version"], row["temperature"]) for row in answer} == {("2", new_temperature)}
        difference = float(np.abs(_probabilities(answer, logits.shape[1])
                                  - softmax(logits[:50] / new_temperature, axis=1)).max())
        print(f"{name} v2 (T={new_temperature:.4f}): max |served - softmax(z/T)| over 50 rows: {difference:.2g}")
        assert difference <= 1e-6, (name, difference)
