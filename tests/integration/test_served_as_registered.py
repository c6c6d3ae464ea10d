"""Served as registered (design rule 11), over HTTP, for every flavor as users log it.

Each checkpoint (:mod:`tests.integration.checkpoint_flavors`) is logged to a real MLflow store,
registered by the post-finetune flow and served by ``mlflow models serve --env-manager local``
(one server per flavor, all started at once). Every input form the registered version accepts
is sent 1 row and 5 rows, with ``request_id`` and ``group``; the served probabilities must be
softmax(z / T) of the checkpoint's own logits z on the same rows to 1e-9, the request ids and
groups must come back and reach the prediction log with the logits. A checkpoint that would be
served other logits than its own is refused before anything is registered, naming the fix.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.special import softmax

from flows.holdout import write_features, write_ids
from flows.pipelines.post_finetune import post_finetune
from flows.pipelines.steps import StepRefused
from flows.registry.adapter import MlflowRegistry
from flows.registry.checkpoint import CheckpointFiles, checkpoint_logits
from flows.registry.rehearsal import request_forms, request_payload
from flows.settings import ThermostatSettings
from monitoring import PredictionLog
from tests.support import checkpoint_flavors as flavors
from tests.integration.conftest import require_tool
from tests.support.ports import free_port
from tests.support.servers import running, stop_process, wait_for_http, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VENV_BIN = Path(sys.executable).parent
SERVED = {
    "sklearn-numeric": lambda path: flavors.sklearn_numeric(path, signature=True),
    "sklearn-numeric-unsigned": lambda path: flavors.sklearn_numeric(path, signature=False),
    "sklearn-text": lambda path: flavors.sklearn_text(path, signature="array"),
    "sklearn-text-unsigned": lambda path: flavors.sklearn_text(path, signature=None),
    "pytorch-float32": flavors.pytorch_mlp,
    "pyfunc-list-of-strings": flavors.pyfunc_hinted_text,
    "hf-style-logits": flavors.hf_style_text,
}
REQUEST_SIZES = (1, 5)
MEASURED: dict[tuple[str, str], float] = {}  # (flavor, form) -> max |served - own| of the probabilities
SENT: dict[str, list[tuple[str, int, str]]] = {}  # flavor -> (request id, holdout row, group) in the order sent


@dataclass(frozen=True)
class Flavor:
    name: str
    checkpoint_dir: Path
    holdout: Any
    labels: Any
    version: str
    temperature: float
    log_url: str


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, prefect_api: None) -> tuple[ThermostatSettings, MlflowRegistry]:
    root = tmp_path_factory.mktemp("served-as-registered")
    settings = ThermostatSettings(state_dir=root, bootstrap_resamples=300)
    return settings, MlflowRegistry.from_settings(settings)


def _log_checkpoint(registry: MlflowRegistry, name: str, folder: Path) -> str:
    run_id = registry.start_run(f"fine-tune {name}", {"flavor": name}, experiment_name="fine-tunes")
    registry.log_run_files(run_id, folder, "checkpoint")
    registry.end_run(run_id)
    return f"runs:/{run_id}/checkpoint"


def _register(store: tuple[ThermostatSettings, MlflowRegistry], name: str, builder: flavors.Builder,
              root: Path) -> tuple[Path, Any, Any, Any]:
    """Build, log and register ``name``; (checkpoint folder, holdout features, labels, registration)."""
    settings, registry = store
    folder = root / name
    data = builder(folder)
    features, labels = data.holdout()
    ids = np.array([f"{name}-{i}" for i in range(len(labels))])
    features_path = write_features(root / f"{name}-holdout.npz", ids=ids, features=features, labels=labels)
    training_ids = write_ids(root / f"{name}-train.txt", [f"{name}-train-{i}" for i in range(flavors.N_TRAIN)])
    registration = post_finetune(
        model_name=name, checkpoint_uri=_log_checkpoint(registry, name, folder), train_steps=1,
        train_data_version=f"{name}-v1", features_path=str(features_path), training_ids_path=str(training_ids),
        settings=settings)
    return folder, features, labels, registration


@pytest.fixture(scope="module")
def served(store: tuple[ThermostatSettings, MlflowRegistry],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Flavor, str]]]:
    """Every flavor registered, then served by its own ``mlflow models serve`` (started together)."""
    try:
        import torch  # noqa: F401 - the pytorch flavor needs it
    except ImportError:
        require_tool(False, "torch is not installed: `make test` installs the `torch` extra (pip install -c "
                            "constraints.txt -e '.[torch]')")
    settings, _ = store
    root = tmp_path_factory.mktemp("flavors")
    flavors_by_name: dict[str, Flavor] = {}
    for name, builder in SERVED.items():
        folder, features, labels, registration = _register(store, name, builder, root)
        flavors_by_name[name] = Flavor(name, folder, features, labels, registration.version, registration.temperature,
                                       f"sqlite:///{root / f'{name}-predictions.db'}")
    env = os.environ | {"PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                        "MLFLOW_TRACKING_URI": settings.resolved_tracking_uri(), "THERMOSTAT_SERVING_LOG_FLUSH_MS": "50"}
    with ExitStack() as stack:
        servers: dict[str, tuple[Flavor, str, subprocess.Popen[bytes], Path]] = {}
        for name, flavor in flavors_by_name.items():
            port, log = free_port(), root / f"{name}-serve.log"
            process = stack.enter_context(running(
                [VENV_BIN / "mlflow", "models", "serve", "-m", f"models:/{name}@champion", "--env-manager", "local",
                 "--host", "127.0.0.1", "--port", str(port)], log=log, what=f"mlflow models serve {name}",
                env=env | {"THERMOSTAT_PREDICTION_LOG_URL": flavor.log_url}, group=True, grace=60))
            servers[name] = (flavor, f"http://127.0.0.1:{port}", process, log)
        for name, (_, url, process, log) in servers.items():
            wait_for_http(f"{url}/ping", process, log, f"mlflow models serve {name}", timeout=240)
        yield {name: (flavor, url) for name, (flavor, url, _, _) in servers.items()}
        for name, (_, _, process, _) in servers.items():
            assert stop_process(process, signal.SIGTERM, 60, group=True), f"{name} did not stop"


def _post(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    request = urllib.request.Request(f"{url}/invocations", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            predictions: list[dict[str, Any]] = json.loads(answer.read())["predictions"]
            return predictions
    except urllib.error.HTTPError as error:
        pytest.fail(f"{body!r:.300} answered {error.code}: {error.read().decode()[:2000]}")


@pytest.mark.parametrize("name", list(SERVED))
def test_every_input_form_is_served_softmax_of_the_checkpoints_own_logits(
    name: str, served: dict[str, tuple[Flavor, str]], store: tuple[ThermostatSettings, MlflowRegistry], tmp_path: Path
) -> None:
    flavor, url = served[name]
    files = CheckpointFiles(uri=name, local_dir=flavor.checkpoint_dir, digest="")
    schema = store[1].load_version_model(name, flavor.version, tmp_path / "registered").metadata.get_input_schema()
    holdout_logits, _ = checkpoint_logits(files, flavor.holdout)
    sent = SENT.setdefault(name, [])
    start = 0
    for form in request_forms(schema, flavor.holdout.ndim):
        for size in REQUEST_SIZES:
            rows = flavor.holdout[start:start + size]
            ids = [f"{form}-{start + i}" for i in range(size)]
            groups = ["web" if (start + i) % 2 else "app" for i in range(size)]
            answer = _post(url, request_payload(form, rows, schema, ids, groups))
            own, _ = checkpoint_logits(files, rows)  # the checkpoint's own logits on the same rows, same batch
            probabilities = np.array([[row[f"prob_{k}"] for k in range(flavors.N_CLASSES)] for row in answer])
            difference = float(np.abs(probabilities - softmax(own / flavor.temperature, axis=1)).max())
            MEASURED[(name, form)] = max(MEASURED.get((name, form), 0.0), difference)
            assert difference <= 1e-9, (form, size, difference)
            assert [row["request_id"] for row in answer] == ids, form
            assert {row["model_version"] for row in answer} == {flavor.version}
            # The holdout's logits as one batch (what the registration scored) agree to float32 rounding.
            np.testing.assert_allclose(own, holdout_logits[start:start + size], rtol=0, atol=1e-5)
            sent += [(rid, start + i, group) for i, (rid, group) in enumerate(zip(ids, groups, strict=True))]
            start += size
    print(f"{name}: max |served - softmax(own / T)| per form:",
          {form: f"{value:.2g}" for (flavor_name, form), value in MEASURED.items() if flavor_name == name})


def test_the_prediction_logs_hold_the_served_logits_request_ids_and_groups(
    served: dict[str, tuple[Flavor, str]]
) -> None:
    """Each server's log holds one row per example the matrix sent, under its request id and
    group, with the checkpoint's own logits (float32)."""
    if set(SENT) != set(SERVED):
        pytest.skip("reads what the matrix test sent: run the module")
    for name, (flavor, _) in served.items():
        files = CheckpointFiles(uri=name, local_dir=flavor.checkpoint_dir, digest="")
        with PredictionLog(flavor.log_url) as log:
            wait_until(lambda: log.count_rows() == len(SENT[name]) or None, f"{name}'s rows in its log", timeout=30)
            with log.engine.connect() as connection:
                rows = connection.execute(log.table.select().order_by(log.table.c.id)).all()
        assert [(row.request_id, row.group_key) for row in rows] == [(rid, group) for rid, _, group in SENT[name]]
        positions = [position for _, position, _ in SENT[name]]
        stored = np.frombuffer(b"".join(row.logits for row in rows), dtype="<f4").reshape(len(rows), -1)
        own = np.vstack([checkpoint_logits(files, flavor.holdout[i:i + 1])[0] for i in positions])
        np.testing.assert_allclose(stored, own.astype(np.float32), rtol=1e-6, atol=1e-6, err_msg=name)
        assert {(row.model_name, row.model_version) for row in rows} == {(name, flavor.version)}


REFUSED = {
    "predict-returns-labels": (lambda path: flavors.sklearn_text(path, signature=None, predict_fn="predict"),
                               "pyfunc_predict_fn='predict_proba'"),
    "text-pipeline-with-a-column-signature": (lambda path: flavors.sklearn_text(path, signature="series"),
                                              "vectorises its column names"),
    "float32-torch-without-a-signature": (lambda path: flavors.pytorch_mlp(path, signature=False),
                                          "log the checkpoint with a signature"),
    "answers-depend-on-the-batch": (flavors.pyfunc_batch_normalised, "depend only on each example's input"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_checkpoint_that_would_be_served_other_logits_is_refused_naming_the_fix(
    name: str, store: tuple[ThermostatSettings, MlflowRegistry], tmp_path: Path
) -> None:
    if name.startswith("float32-torch"):
        pytest.importorskip("torch")
    builder, fix = REFUSED[name]
    with pytest.raises(StepRefused, match="serving refused") as refused:
        _register(store, name, builder, tmp_path)
    assert fix in str(refused.value) and "nothing is registered" in str(refused.value)
    _, registry = store
    assert registry.versions(name) == []
