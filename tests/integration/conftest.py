"""Integration fixtures: a real MLflow SQLite store and a real Prefect API, set up once.

A fresh MLflow store migrates in seconds, so one template store is built per session (with
the digits checkpoints logged into it) and each test gets a copy of the file. The Prefect
API is ``prefect_test_harness`` (a temporary server), session-scoped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

# Nothing under ~ or the repo: Prefect reads its home when first imported.
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="thermostat-prefect-home-"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# Some tests call tasks outside a flow (register's refusals): their logs stay local.
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from flows.demo import DemoCheckpoint, DigitsSplit, digits_split, make_estimator, train_checkpoint
from flows.holdout import write_features, write_ids
from flows.registry import MlflowRegistry
from flows.settings import ThermostatSettings


@dataclass(frozen=True)
class Template:
    db: Path
    split: DigitsSplit
    checkpoints: dict[str, DemoCheckpoint]
    features_path: Path
    training_ids_path: Path


@dataclass(frozen=True)
class Store:
    settings: ThermostatSettings
    registry: MlflowRegistry
    template: Template

    def run_args(self, checkpoint: str, **overrides: Any) -> dict[str, Any]:
        args: dict[str, Any] = {
            "model_name": "digits", "checkpoint_uri": self.template.checkpoints[checkpoint].uri, "train_steps": 7,
            "train_data_version": "digits-train-v1", "features_path": str(self.template.features_path),
            "training_ids_path": str(self.template.training_ids_path), "settings": self.settings,
        }
        return args | overrides


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerUrl(str):
    """A server's base URL that also holds its process (``.process``): a test can stop the
    server mid-flow (SIGTERM stops its workers too)."""

    process: subprocess.Popen[bytes]


def wait_for_http(url: str, server: subprocess.Popen[bytes], log: Path, what: str, *, any_status: bool = False,
                  timeout: float = 90.0) -> None:
    """Return once ``url`` answers 200 (with ``any_status``: any HTTP status, e.g. a 503 that says
    why); fail with the end of ``log`` when ``server`` exits or ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                if answer.status == 200:
                    return
        except urllib.error.HTTPError:
            if any_status:
                return
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{what} did not start: {log.read_text()[-3000:]}")
        time.sleep(0.3)


@contextmanager
def mlflow_server(db: Path, root: Path, *artifact_options: str) -> Iterator[ServerUrl]:
    """A real ``mlflow server`` on loopback over a copy of the SQLite store ``db`` (one worker,
    no job runner: healthy in seconds); yields its base URL and stops it afterwards.

    ``artifact_options`` say where artifacts go, e.g. ``--default-artifact-root DIR`` or
    ``--artifacts-destination DIR`` (artifacts proxied by the server).
    """
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(db, root / "mlflow.db")
    url, log = f"http://127.0.0.1:{free_port()}", root / "server.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri",
             f"sqlite:///{root / 'mlflow.db'}", *artifact_options, "--host", "127.0.0.1", "--port",
             url.rsplit(":", 1)[1], "--workers", "1"],
            cwd=root, env=os.environ | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}, stdout=output,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for_http(f"{url}/health", server, log, "mlflow server")
        running = ServerUrl(url)
        running.process = server
        yield running
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def mlflow_client(registry: MlflowRegistry) -> MlflowClient:
    """MLflow's own client on the adapter's store: the tests read what was written directly."""
    return MlflowClient(tracking_uri=registry.tracking_uri, registry_uri=registry.registry_uri)


REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def stop_process(process: subprocess.Popen[bytes], sig: int, grace: float) -> None:
    """Send ``sig``, wait ``grace`` seconds, then kill."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def deploy_all_and_start_worker(env: dict[str, str], tmp_path: Path) -> subprocess.Popen[bytes]:
    """Create the process pool, `prefect deploy --all` from the repo root, start a worker (log: ``worker.log``)."""
    prefect = str(VENV_BIN / "prefect")
    for command in ([prefect, "work-pool", "create", "thermostat", "--type", "process"],
                    [prefect, "--no-prompt", "deploy", "--all"]):
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    # The worker writes to worker.log through its own descriptor; ours closes at once.
    with (tmp_path / "worker.log").open("wb") as worker_log:
        return subprocess.Popen([prefect, "worker", "start", "--pool", "thermostat"], cwd=tmp_path, env=env,
                                stdout=worker_log, stderr=subprocess.STDOUT)


@pytest.fixture
def prefect_server(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A real ``prefect server start`` on a free loopback port (its own ``PREFECT_HOME`` under
    ``tmp_path``); yields its API URL and the environment that points at it (worker settings
    and ``THERMOSTAT_STATE_DIR=tmp_path/state`` included). The scheduler is off; the triggers
    and actions services (automations) are on."""
    import httpx

    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = os.environ | {
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_API_URL": api_url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        # `deploy --all` activates the monitor's hourly cron; a scheduled run crossing the hour
        # would compete with the test's own run. The tests start every run themselves.
        "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
        # Automations (the refit trigger, the alerts): evaluated and acted on by this service.
        "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "true",
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "1",
        "THERMOSTAT_STATE_DIR": str(tmp_path / "state"),
        "THERMOSTAT_BOOTSTRAP_RESAMPLES": "300",
    }
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen([str(VENV_BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port),
                               "--no-ui"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{api_url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"prefect server did not start: {(tmp_path / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield api_url, env
    finally:
        stop_process(server, signal.SIGTERM, 20)
        log.close()


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[None]:
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=60):
        yield


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    root = tmp_path_factory.mktemp("mlflow-template")
    registry = MlflowRegistry(f"sqlite:///{root / 'mlflow.db'}", artifact_location=(root / "artifacts").as_uri())
    split = digits_split(seed=0)
    checkpoints = {
        "logistic": train_checkpoint(registry, split, name="logistic", estimator=make_estimator("logistic", 0)),
        "mlp": train_checkpoint(registry, split, name="mlp", estimator=make_estimator("mlp", 0)),
        # Trained on 40 examples: clearly less accurate than the others on the same holdout.
        "weak": train_checkpoint(registry, split, name="weak", estimator=make_estimator("logistic", 0), n_train=40),
    }
    holdout = split.holdout_index
    return Template(
        db=root / "mlflow.db", split=split, checkpoints=checkpoints,
        features_path=write_features(root / "holdout.npz", ids=split.ids[holdout], features=split.features[holdout],
                                     labels=split.labels[holdout]),
        training_ids_path=write_ids(root / "training_ids.txt", split.training_ids),
    )


@pytest.fixture
def store(template: Template, tmp_path: Path, prefect_api: None) -> Store:
    shutil.copyfile(template.db, tmp_path / "mlflow.db")
    settings = ThermostatSettings(state_dir=tmp_path, bootstrap_resamples=300)
    return Store(settings=settings, registry=MlflowRegistry.from_settings(settings), template=template)


@dataclass(frozen=True)
class Registered:
    """A store where ``digits@champion`` is version 1 (the logistic checkpoint), and that
    checkpoint's logits on clean and on noisy holdout digits (traffic to log)."""

    db: Path
    template: Template
    temperature: float
    clean_logits: Any
    clean_labels: Any
    noisy_logits: Any
    noisy_labels: Any


@pytest.fixture(scope="session")
def registered(template: Template, tmp_path_factory: pytest.TempPathFactory, prefect_api: None) -> Registered:
    import numpy as np

    from flows.checkpoint import checkpoint_logits, download_checkpoint
    from flows.demo import digits_traffic
    from flows.pipeline import post_finetune

    root = tmp_path_factory.mktemp("registered")
    shutil.copyfile(template.db, root / "mlflow.db")
    settings = ThermostatSettings(state_dir=root, bootstrap_resamples=300)
    registration = post_finetune(
        model_name="digits", checkpoint_uri=template.checkpoints["logistic"].uri, train_steps=7,
        train_data_version="digits-train-v1", features_path=str(template.features_path),
        training_ids_path=str(template.training_ids_path), settings=settings,
    )
    files = download_checkpoint(template.checkpoints["logistic"].uri, root / "ckpt",
                                tracking_uri=settings.resolved_tracking_uri())
    rng = np.random.default_rng(0)
    clean, clean_labels = digits_traffic(template.split, 1500, rng)
    noisy, noisy_labels = digits_traffic(template.split, 4000, rng, noise_sigma=1.75)
    return Registered(
        db=root / "mlflow.db", template=template, temperature=registration.temperature,
        clean_logits=checkpoint_logits(files, clean)[0], clean_labels=clean_labels,
        noisy_logits=checkpoint_logits(files, noisy)[0], noisy_labels=noisy_labels,
    )


def require_tool(found: bool, message: str) -> None:
    """Skip the test when a tool it drives is missing (a browser, a server binary), with
    ``message`` saying how to install it; under ``CI=true`` (where ``make test`` installs it)
    fail instead."""
    if found:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def isolated_env(root: Path, **variables: str) -> dict[str, str]:
    """This process's environment without its ``THERMOSTAT_*``, ``MLFLOW_*`` and ``PREFECT_*``
    variables, with nothing reaching outside the machine, a ``PREFECT_HOME`` under ``root`` and
    ``variables`` set: what a command started by a test reads."""
    from flows.local_only import LOCAL_ONLY_ENVIRONMENT

    env = {key: value for key, value in os.environ.items() if not key.startswith(("THERMOSTAT_", "MLFLOW_", "PREFECT_"))}
    return env | LOCAL_ONLY_ENVIRONMENT | {"PREFECT_HOME": str(root / "prefect-home")} | variables


@contextmanager
def dashboard_server(env: dict[str, str], log: Path, *options: str) -> Iterator[str]:
    """``thermostat dashboard`` on a free loopback port, reading the store ``env`` names (its
    output in ``log``); yields its base URL once it answers ``/healthz`` (``ok``, or 503 when the
    store cannot be read) and stops it afterwards."""
    port = free_port()
    with log.open("wb") as output:
        server = subprocess.Popen([str(VENV_BIN / "thermostat"), "dashboard", "--port", str(port), *options],
                                  env=env, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/healthz", server, log, "thermostat dashboard", any_status=True)
        yield url
    finally:
        stop_process(server, signal.SIGTERM, 20)


@dataclass(frozen=True)
class DemoState:
    """A state folder made by ``thermostat demo`` (run once per session), and the
    environment (``THERMOSTAT_STATE_DIR`` set, nothing reaching outside) that reads it."""

    state_dir: Path
    output: str
    env: dict[str, str]

    @property
    def settings(self) -> ThermostatSettings:
        return ThermostatSettings(state_dir=self.state_dir)


@pytest.fixture(scope="session")
def demo_state(tmp_path_factory: pytest.TempPathFactory) -> DemoState:
    """``thermostat demo`` run once into a temporary folder (about 1–2 min): models, versions,
    aliases, checks (ok, drift), a refit and a refused refit, the prediction log. Treat as read-only."""
    root = tmp_path_factory.mktemp("demo-state")
    state_dir = root / ".thermostat"
    # No start-up limit of Prefect's temporary server here: the product's default must be enough.
    env = isolated_env(root, THERMOSTAT_STATE_DIR=str(state_dir))
    done = subprocess.run([str(Path(sys.executable).parent / "thermostat"), "demo"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        log = state_dir / "demo.log"
        pytest.fail(f"thermostat demo failed:\n{done.stdout}\n{done.stderr}\n{log.read_text()[-4000:] if log.exists() else ''}")
    return DemoState(state_dir=state_dir, output=done.stdout, env=env)
