"""The one MLflow adapter: tracking runs and the model registry, addressed explicitly.

Holds an ``MlflowClient(tracking_uri=..., registry_uri=...)`` and passes ``run_id`` to every
call: nothing here starts or relies on MLflow's process-wide active run (STYLE.md §8).
"""

from __future__ import annotations

import io
import json
import tempfile
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mlflow
import mlflow.artifacts
import mlflow.pyfunc
import pandas as pd
from matplotlib.figure import Figure
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunStatus
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.models import Model, ModelSignature
from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, ErrorCode
from mlflow.pyfunc import PyFuncModel
from mlflow.types import ColSpec, Schema, TensorSpec

from flows import model as calibrated_model_code
from flows.settings import ThermostatSettings

__all__ = ["IDEMPOTENCY_TAG", "MODEL_ARTIFACT_PATH", "MlflowRegistry"]

IDEMPOTENCY_TAG = "idempotency_key"
MODEL_ARTIFACT_PATH = "calibrated_model"


def _millis(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError(f"{moment.isoformat()} has no timezone; pass an aware datetime")
    return int(moment.astimezone(UTC).timestamp() * 1000)


def _is_missing(error: MlflowException) -> bool:
    return bool(error.error_code == ErrorCode.Name(RESOURCE_DOES_NOT_EXIST))


class MlflowRegistry:
    """Runs, artifacts, registered models, versions and aliases of one MLflow deployment."""

    def __init__(
        self, tracking_uri: str, *, registry_uri: str | None = None, artifact_location: str | None = None,
        experiment_name: str = "thermostat",
    ) -> None:
        self.tracking_uri = tracking_uri
        self.registry_uri = registry_uri or tracking_uri
        self.artifact_location = artifact_location
        self.experiment_name = experiment_name
        self.client = MlflowClient(tracking_uri=self.tracking_uri, registry_uri=self.registry_uri)

    @classmethod
    def from_settings(cls, settings: ThermostatSettings) -> MlflowRegistry:
        if settings.tracking_uri is None:
            settings.state_dir.mkdir(parents=True, exist_ok=True)
        return cls(
            settings.resolved_tracking_uri(), registry_uri=settings.resolved_registry_uri(),
            artifact_location=settings.resolved_artifact_location(), experiment_name=settings.experiment_name,
        )

    # Runs -------------------------------------------------------------------------------

    def experiment_id(self, name: str | None = None) -> str:
        """Id of the experiment ``name`` (default: this adapter's), created if missing."""
        name = self.experiment_name if name is None else name
        experiment = self.client.get_experiment_by_name(name)
        if experiment is not None:
            return str(experiment.experiment_id)
        try:
            return str(self.client.create_experiment(name, artifact_location=self._artifact_location(name)))
        except MlflowException:  # created concurrently by another run
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return str(found.experiment_id)

    def _artifact_location(self, name: str) -> str | None:
        # Every experiment under the configured root, each in its own folder (None: the server decides).
        if self.artifact_location is None or name == self.experiment_name:
            return self.artifact_location
        return f"{self.artifact_location.rstrip('/')}/{name}"

    def start_run(
        self, run_name: str, tags: dict[str, str], *, experiment_name: str | None = None,
        start_time: datetime | None = None,
    ) -> str:
        """A new run (never the fluent active run); ``start_time`` e.g. the checked window's end."""
        run = self.client.create_run(
            self.experiment_id(experiment_name), run_name=run_name, tags=tags,
            start_time=None if start_time is None else _millis(start_time),
        )
        return str(run.info.run_id)

    def run_url(self, run_id: str, ui_url: str | None) -> str | None:
        """Link to a run in the MLflow UI at ``ui_url``; None without a UI."""
        if ui_url is None:
            return None
        run = self.client.get_run(run_id)
        return f"{ui_url.rstrip('/')}/#/experiments/{run.info.experiment_id}/runs/{run_id}"

    def end_run(self, run_id: str, *, failed: bool = False) -> None:
        status = RunStatus.to_string(RunStatus.FAILED if failed else RunStatus.FINISHED)
        self.client.set_terminated(run_id, status=status)

    def log_params(self, run_id: str, params: dict[str, Any]) -> None:
        self.client.log_batch(run_id, params=[Param(key, str(value)) for key, value in params.items()])

    def log_metrics(self, run_id: str, metrics: dict[str, float], *, timestamp: datetime | None = None) -> None:
        """Log metrics at step 0, stamped ``timestamp`` (default now): a check's window end, so
        charts over time place each value at the time it describes."""
        stamp = int(time.time() * 1000) if timestamp is None else _millis(timestamp)
        entries = [Metric(key, float(value), stamp, 0) for key, value in metrics.items()]
        self.client.log_batch(run_id, metrics=entries)

    def log_json(self, run_id: str, payload: dict[str, Any], artifact_file: str) -> None:
        self.client.log_text(run_id, json.dumps(payload, indent=2, sort_keys=True), artifact_file)

    def log_table(self, run_id: str, frame: pd.DataFrame, artifact_file: str) -> None:
        buffer = io.StringIO()
        frame.to_csv(buffer, index=False)
        self.client.log_text(run_id, buffer.getvalue(), artifact_file)

    def log_figure(self, run_id: str, figure: Figure, artifact_file: str) -> None:
        self.client.log_figure(run_id, figure, artifact_file)

    def log_run_files(self, run_id: str, folder: Path, artifact_path: str) -> None:
        self.client.log_artifacts(run_id, str(folder), artifact_path)

    # The calibrated model ---------------------------------------------------------------

    def log_calibrated_model(
        self, run_id: str, *, checkpoint_dir: Path, model_config: dict[str, Any], n_classes: int
    ) -> str:
        """Save the calibrated pyfunc (model from code) beside the run; return its ``runs:/`` URI."""
        checkpoint = Model.load(str(checkpoint_dir / "MLmodel"))
        columns: list[ColSpec | TensorSpec] = [
            ColSpec("long", "class"), ColSpec("double", "confidence"), ColSpec("string", "decision")
        ]
        outputs = Schema(columns + [ColSpec("double", f"prob_{k}") for k in range(n_classes)])
        inputs = checkpoint.signature.inputs if checkpoint.signature is not None else None
        requirements_file = checkpoint_dir / "requirements.txt"
        requirements = [f"mlflow=={mlflow.__version__}"]
        if requirements_file.is_file():
            requirements += [
                line.strip() for line in requirements_file.read_text().splitlines()
                if line.strip() and not line.startswith(("#", "mlflow=", "mlflow-", "mlflow<", "mlflow>"))
                and line.strip() != "mlflow"
            ]
        with tempfile.TemporaryDirectory() as workdir, warnings.catch_warnings():
            # The signature is given explicitly; an input example would only re-run the checkpoint.
            warnings.filterwarnings("ignore", message=".*input example was not provided.*", category=UserWarning)
            path = Path(workdir) / MODEL_ARTIFACT_PATH
            mlflow.pyfunc.save_model(
                str(path),
                python_model=calibrated_model_code.__file__,
                artifacts={calibrated_model_code.CHECKPOINT_ARTIFACT: str(checkpoint_dir)},
                model_config=model_config,
                signature=ModelSignature(inputs=inputs, outputs=outputs),
                pip_requirements=requirements,
            )
            self.client.log_artifacts(run_id, str(path), MODEL_ARTIFACT_PATH)
        return f"runs:/{run_id}/{MODEL_ARTIFACT_PATH}"

    def load_version_model(self, name: str, version: str, destination: Path) -> PyFuncModel:
        """Download a registered version's model files and load them as a pyfunc."""
        uri = self.client.get_model_version_download_uri(name, version)
        destination.mkdir(parents=True, exist_ok=True)
        local = mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(destination), tracking_uri=self.tracking_uri)
        model: PyFuncModel = mlflow.pyfunc.load_model(local)
        return model

    # Registry ---------------------------------------------------------------------------

    def ensure_registered_model(self, name: str) -> None:
        try:
            self.client.get_registered_model(name)
        except MlflowException as error:
            if not _is_missing(error):
                raise
            try:
                self.client.create_registered_model(name, description="Calibrated checkpoints registered by Thermostat.")
            except MlflowException:  # created concurrently
                self.client.get_registered_model(name)

    def create_version(self, name: str, *, source: str, run_id: str, tags: dict[str, str]) -> ModelVersion:
        """A new, immutable version; its tags are written in the same call as the version."""
        self.ensure_registered_model(name)
        return self.client.create_model_version(name, source, run_id=run_id, tags=tags)

    def delete_version(self, name: str, version: str) -> None:
        self.client.delete_model_version(name, version)

    def versions(self, name: str) -> list[ModelVersion]:
        return list(self.client.search_model_versions(f"name = '{name}'"))

    def find_by_idempotency_key(self, name: str, key: str) -> ModelVersion | None:
        found = self.client.search_model_versions(f"name = '{name}' and tags.{IDEMPOTENCY_TAG} = '{key}'")
        return min(found, key=lambda v: int(v.version)) if found else None

    def alias_holder(self, name: str, alias: str) -> ModelVersion | None:
        """The version ``alias`` points at; None when the model or the alias does not exist."""
        try:
            model = self.client.get_registered_model(name)
        except MlflowException as error:
            if _is_missing(error):
                return None
            raise
        version = dict(model.aliases).get(alias)
        return None if version is None else self.client.get_model_version(name, str(version))

    def aliases(self, name: str) -> dict[str, str]:
        """Every alias of the registered model and the version it points at ({} if no such model)."""
        try:
            model = self.client.get_registered_model(name)
        except MlflowException as error:
            if _is_missing(error):
                return {}
            raise
        return {str(alias): str(version) for alias, version in dict(model.aliases).items()}

    def get_version(self, name: str, version: str) -> ModelVersion:
        return self.client.get_model_version(name, version)

    def set_version_tag(self, name: str, version: str, key: str, value: str) -> None:
        """Monitoring metadata on a version (never its T, threshold or evidence: those are immutable)."""
        self.client.set_model_version_tag(name, version, key, value)

    def set_alias(self, name: str, alias: str, version: str) -> None:
        self.client.set_registered_model_alias(name, alias, version)

    def delete_alias(self, name: str, alias: str) -> None:
        self.client.delete_registered_model_alias(name, alias)
