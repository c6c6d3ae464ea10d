"""Integration fixtures: a real MLflow SQLite store and a real Prefect API, set up once.

A fresh MLflow store migrates in seconds, so one template store is built per run (with
the digits checkpoints logged into it; shared by the pytest-xdist workers) and each test gets a
copy of the file. The Prefect
API is ``prefect_test_harness`` (a temporary server), session-scoped.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# Nothing under ~ or the repo: Prefect reads its home when first imported.
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="thermostat-prefect-home-"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# Some tests call tasks outside a flow (register's refusals): their logs stay local.
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from flows.cli.demo import DemoCheckpoint, DigitsSplit, digits_split, make_estimator, train_checkpoint
from flows.holdout import write_features, write_ids
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from tests.support.cli import thermostat

# Re-exported where the tests found them before tests/support.
from tests.support.ports import free_port as free_port
from tests.support.servers import running
from tests.support.servers import stop_process as stop_process
from tests.support.servers import wait_for_http as wait_for_http

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


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


class ServerUrl(str):
    """A server's base URL that also holds its process (``.process``): a test can stop the
    server mid-flow (SIGTERM stops its workers too)."""

    process: subprocess.Popen[bytes]


@contextmanager
def mlflow_server(db: Path | None, root: Path, *artifact_options: str) -> Iterator[ServerUrl]:
    """A real ``mlflow server`` on loopback over a copy of the SQLite store ``db`` (None: a new,
    empty store; one worker, no job runner: healthy in seconds); yields its base URL and stops it
    afterwards.

    ``artifact_options`` say where artifacts go, e.g. ``--default-artifact-root DIR`` or
    ``--artifacts-destination DIR`` (artifacts proxied by the server).
    """
    root.mkdir(parents=True, exist_ok=True)
    if db is not None:
        shutil.copyfile(db, root / "mlflow.db")
    url = f"http://127.0.0.1:{free_port()}"
    command = [VENV_BIN / "mlflow", "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
               *artifact_options, "--host", "127.0.0.1", "--port", url.rsplit(":", 1)[1], "--workers", "1"]
    with running(command, log=root / "server.log", what="mlflow server", ready=f"{url}/health", cwd=root,
                 env=os.environ | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}) as server:
        found = ServerUrl(url)
        found.process = server
        yield found


def mlflow_client(registry: MlflowRegistry) -> MlflowClient:
    """MLflow's own client on the adapter's store: the tests read what was written directly."""
    return MlflowClient(tracking_uri=registry.tracking_uri, registry_uri=registry.registry_uri)


_DEPLOYED: set[str] = set()  # the API URLs of the servers where `prefect deploy --all` has run


def deploy_all_and_start_worker(env: dict[str, str], tmp_path: Path) -> subprocess.Popen[bytes]:
    """Create the process pool and `prefect deploy --all` from the repo root (once per server:
    the deployments stay), then start a worker with ``env`` (log: ``tmp_path/worker.log``)."""
    prefect = str(VENV_BIN / "prefect")
    if env["PREFECT_API_URL"] not in _DEPLOYED:
        for command in ([prefect, "work-pool", "create", "thermostat", "--type", "process"],
                        [prefect, "--no-prompt", "deploy", "--all"]):
            done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
        _DEPLOYED.add(env["PREFECT_API_URL"])
    # The worker writes to worker.log through its own descriptor; ours closes at once.
    with (tmp_path / "worker.log").open("wb") as worker_log:
        return subprocess.Popen([prefect, "worker", "start", "--pool", "thermostat"], cwd=tmp_path, env=env,
                                stdout=worker_log, stderr=subprocess.STDOUT)


def stop_worker(worker: subprocess.Popen[bytes], api_url: str, *, timeout: float = 120.0) -> None:
    """Stop ``worker`` once no flow run of its server is pending or running (waiting at most
    ``timeout`` seconds). The server is shared by the next tests: a run cut off by its worker's end
    would stay Running there and keep its deployment's concurrency slot (the refit's is one run,
    ENQUEUE), so the next test's run of that deployment would wait behind it. What is still
    unfinished after the worker stopped is cancelled, runs scheduled for later included (a
    refit's retry): no later test's worker may pick them up."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Cancelled

    unfinished = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(
        any_=[StateType.PENDING, StateType.RUNNING, StateType.CANCELLING])))
    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        try:
            deadline = time.monotonic() + timeout
            while client.read_flow_runs(flow_run_filter=unfinished) and time.monotonic() < deadline:
                time.sleep(1)
        finally:
            stop_process(worker, signal.SIGINT, 15)
        left = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(
            any_=[StateType.SCHEDULED, StateType.PENDING, StateType.RUNNING, StateType.CANCELLING])))
        for run in client.read_flow_runs(flow_run_filter=left):
            client.set_flow_run_state(run.id, Cancelled(message="left unfinished when its test's worker stopped"))


@pytest.fixture(scope="session")
def worker_prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str], Path]]:
    """A real ``prefect server start`` on a free loopback port, one per pytest-xdist worker (a
    session), shared by the modules that worker runs (its own ``PREFECT_HOME``); yields its API
    URL, the environment that points at it and its log. A start and ``prefect deploy --all``
    cost 25-35 s of a loaded worker: once per worker, not once per module."""
    root = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = os.environ | {
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PREFECT_HOME": str(root / "prefect-home"),
        "PREFECT_API_URL": api_url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        # `deploy --all` activates monitor-fleet's hourly cron; a scheduled run crossing the hour
        # would compete with the test's own run. The tests start every run themselves.
        "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
        # The server streams a run's logs to `prefect deployment run --watch` (docs/production.md).
        "PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED": "true",
        "PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED": "true",
        # Automations (the refit trigger, the alerts): evaluated and acted on by this service.
        "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "true",
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "1",
        "THERMOSTAT_BOOTSTRAP_RESAMPLES": "300",
    }
    command = [VENV_BIN / "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port), "--no-ui"]
    with running(command, log=root / "server.log", what="prefect server", ready=f"{api_url}/health", env=env,
                 timeout=120):
        yield api_url, env, root / "server.log"


@pytest.fixture
def prefect_server(worker_prefect_server: tuple[str, dict[str, str], Path],
                   tmp_path: Path) -> tuple[str, dict[str, str]]:
    """The worker's Prefect server (:func:`worker_prefect_server`: started, and its deployments
    made, once per pytest-xdist worker; the scheduler off, the triggers and actions services, automations,
    on); yields its API URL and the environment that points at it, worker settings and this
    test's own ``THERMOSTAT_STATE_DIR=tmp_path/state`` included. The server's log is at
    ``tmp_path/server.log``. A test leaves no flow run unfinished (it waits for the runs it
    starts, and for those its events start): the next test's runs share the server."""
    api_url, env, log = worker_prefect_server
    (tmp_path / "server.log").symlink_to(log)
    return api_url, env | {"THERMOSTAT_STATE_DIR": str(tmp_path / "state")}


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[None]:
    from prefect.testing.utilities import prefect_test_harness

    # A start-up takes seconds on an idle machine and more than a minute on a loaded one.
    with prefect_test_harness(server_startup_timeout=180):
        yield


def built_once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str,
                       build: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """``build(folder)``'s parts, built once per test run and shared by the pytest-xdist workers
    (each would otherwise build its own: minutes of CPU on two busy cores). The first worker to
    ask builds them in a folder of the run's temporary root, under a file lock, and pickles them
    there; the others wait for the lock and read them. The parts and their folder are read-only to
    the tests (they copy the stores they change). Plain parts (paths, arrays, the package's own
    classes), not this file's dataclasses: pytest imports a conftest under a name that pickle
    cannot look up. Without xdist: built in a folder of this session."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return build(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent  # the run's root: each worker's basetemp is inside it
    folder, built = shared / name, shared / f"{name}.pickle"
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if built.exists():
            parts: dict[str, Any] = pickle.loads(built.read_bytes())
            return parts
        shutil.rmtree(folder, ignore_errors=True)  # what a worker that failed building left
        folder.mkdir()
        parts = build(folder)
        built.write_bytes(pickle.dumps(parts))
        return parts


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    """The digits checkpoints logged to an MLflow SQLite store (built once per run: :func:`built_once_per_run`)."""
    return Template(**built_once_per_run(tmp_path_factory, "mlflow-template", _build_template))


def _build_template(root: Path) -> dict[str, Any]:
    registry = MlflowRegistry(f"sqlite:///{root / 'mlflow.db'}", artifact_location=(root / "artifacts").as_uri())
    split = digits_split(seed=0)
    checkpoints = {
        "logistic": train_checkpoint(registry, split, name="logistic", estimator=make_estimator("logistic", 0)),
        "mlp": train_checkpoint(registry, split, name="mlp", estimator=make_estimator("mlp", 0)),
        # Trained on 40 examples: clearly less accurate than the others on the same holdout.
        "weak": train_checkpoint(registry, split, name="weak", estimator=make_estimator("logistic", 0), n_train=40),
    }
    holdout = split.holdout_index
    return {
        "db": root / "mlflow.db", "split": split, "checkpoints": checkpoints,
        "features_path": write_features(root / "holdout.npz", ids=split.ids[holdout],
                                        features=split.features[holdout], labels=split.labels[holdout]),
        "training_ids_path": write_ids(root / "training_ids.txt", split.training_ids),
    }


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
    """``digits@champion`` registered by post_finetune (built once per run: :func:`built_once_per_run`)."""
    parts = built_once_per_run(tmp_path_factory, "registered", lambda root: _build_registered(template, root))
    return Registered(template=template, **parts)


def _build_registered(template: Template, root: Path) -> dict[str, Any]:
    import numpy as np

    from flows.registry.checkpoint import checkpoint_logits, download_checkpoint
    from flows.cli.demo import digits_traffic
    from flows.pipelines.post_finetune import post_finetune

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
    return {
        "db": root / "mlflow.db", "temperature": registration.temperature,
        "clean_logits": checkpoint_logits(files, clean)[0], "clean_labels": clean_labels,
        "noisy_logits": checkpoint_logits(files, noisy)[0], "noisy_labels": noisy_labels,
    }


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
    from flows.orchestration.local_only import LOCAL_ONLY_ENVIRONMENT

    env = {key: value for key, value in os.environ.items() if not key.startswith(("THERMOSTAT_", "MLFLOW_", "PREFECT_"))}
    return env | LOCAL_ONLY_ENVIRONMENT | {"PREFECT_HOME": str(root / "prefect-home")} | variables


@contextmanager
def dashboard_server(env: dict[str, str], log: Path, *options: str) -> Iterator[str]:
    """``thermostat dashboard`` on a free loopback port, reading the store ``env`` names (its
    output in ``log``); yields its base URL once it answers ``/healthz`` (``ok``, or 503 when the
    store cannot be read) and stops it afterwards."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running([VENV_BIN / "thermostat", "dashboard", "--port", str(port), *options], log=log,
                 what="thermostat dashboard", ready=f"{url}/healthz", any_status=True, env=env):
        yield url


@dataclass(frozen=True)
class DemoState:
    """A state folder made by ``thermostat demo`` (run once per test run, in an empty folder, in a
    newcomer's environment: :mod:`tests.support.newcomer`), what the run printed, and the
    environment (``THERMOSTAT_STATE_DIR`` set, nothing reaching outside) that reads it.

    ``network_record`` is where the newcomer environment's audit hook wrote any look-up or
    connection the demo made to another machine (absent: none); ``prefect_home`` the run's
    ``PREFECT_HOME``."""

    state_dir: Path
    output: str
    env: dict[str, str]
    stderr: str
    network_record: Path
    prefect_home: Path

    @property
    def settings(self) -> ThermostatSettings:
        return ThermostatSettings(state_dir=self.state_dir)


@pytest.fixture(scope="session")
def demo_state(tmp_path_factory: pytest.TempPathFactory) -> DemoState:
    """``thermostat demo`` run once per test run in an empty folder (about 1–2 min; shared by the
    pytest-xdist workers: :func:`built_once_per_run`): models, versions, aliases, checks (ok,
    drift), a refit and a refused refit, the prediction log. Treat as read-only: a test that
    changes it works on a copy (tests/integration/test_demo.py's repeat)."""
    return DemoState(**built_once_per_run(tmp_path_factory, "demo-state", _run_demo))


def _run_demo(root: Path) -> dict[str, Any]:
    from tests.support.newcomer import network_record, newcomer_environment

    folder = root / "demo"
    folder.mkdir()
    newcomer = newcomer_environment(root)
    # No start-up limit of Prefect's temporary server here: the product's default must be enough.
    done = thermostat("demo", cwd=folder, env=newcomer, timeout=900)
    state_dir = folder / ".thermostat"
    if done.returncode != 0:
        log = state_dir / "demo.log"
        pytest.fail(f"thermostat demo failed:\n{done.stdout}\n{done.stderr}\n{log.read_text()[-4000:] if log.exists() else ''}")
    return {"state_dir": state_dir, "output": done.stdout, "stderr": done.stderr,
            "env": isolated_env(root, THERMOSTAT_STATE_DIR=str(state_dir)), "network_record": network_record(root),
            "prefect_home": Path(newcomer["PREFECT_HOME"])}
