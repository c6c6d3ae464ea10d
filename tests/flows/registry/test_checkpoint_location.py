"""A checkpoint logged with MLflow 3's ``log_model(name=...)`` is downloaded from the store it was
logged to, whatever MLflow's own global tracking URI is: ``runs:/<run id>/<name>``, the logged
model's ``models:/<model id>``, and a registered version's ``models:/<name>/<version>`` and
``models:/<name>@<alias>`` all give the same files (a real SQLite store; the worker of
docs/deployment.md sets ``THERMOSTAT_TRACKING_URI``, not ``MLFLOW_TRACKING_URI``)."""

from __future__ import annotations

from pathlib import Path

import mlflow
import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from sklearn.linear_model import LogisticRegression

from flows.registry.checkpoint import checkpoint_location, download_checkpoint


def test_a_logged_model_is_downloaded_from_the_store_given_not_mlflows_global_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    rng = np.random.default_rng(0)
    model = LogisticRegression().fit(rng.normal(size=(60, 3)), rng.integers(0, 3, 60))
    with mlflow.start_run() as run:
        info = mlflow.sklearn.log_model(model, name="checkpoint", pyfunc_predict_fn="predict_proba",
                                        pip_requirements=["scikit-learn"])
    client = MlflowClient(tracking_uri=store)
    client.create_registered_model("tickets")
    version = client.create_model_version("tickets", info.model_uri, run_id=run.info.run_id)
    client.set_registered_model_alias("tickets", "champion", version.version)
    # The flow's process: MLflow's global tracking URI is another store (here: a folder).
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "elsewhere").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")

    uris = [f"runs:/{run.info.run_id}/checkpoint", info.model_uri, f"models:/tickets/{version.version}",
            "models:/tickets@champion"]
    digests = {download_checkpoint(uri, tmp_path / f"download-{i}", tracking_uri=store).digest
               for i, uri in enumerate(uris)}
    assert len(digests) == 1
    assert (tmp_path / "download-0" / "checkpoint" / "MLmodel").is_file() or any(
        path.name == "MLmodel" for path in (tmp_path / "download-0").rglob("MLmodel"))
    # A run's own artifacts, and any URI that is not runs:/ or models:/, are left as they are.
    assert checkpoint_location("file:///models/ckpt", store) == "file:///models/ckpt"
    assert checkpoint_location(f"runs:/{run.info.run_id}", store) == f"runs:/{run.info.run_id}"
