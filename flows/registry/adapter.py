"""The one MLflow adapter: tracking runs and the model registry, addressed explicitly.

Holds an ``MlflowClient(tracking_uri=..., registry_uri=...)`` and passes ``run_id`` to every
call: nothing here starts or relies on MLflow's process-wide active run (hidden global state).

Every call that is safe to repeat (writing a param, a tag, an alias, a run's status, reading)
is retried in place on a transient error (:func:`retry_transient`), so a blip never reaches a
Prefect transaction, whose rollback hooks run *before* a task's own retries. Creating a run or
a version is not repeated here; MLflow's HTTP layer may still repeat those POSTs, which the
registration reconciles (see :mod:`flows.pipelines.registration`).

Under a model's lock the adapter is **fenced** (:meth:`MlflowRegistry.fenced`): the lease is
checked immediately before every attempt of every write (a retry too), so a run that lost the
lease writes nothing more (:mod:`flows.orchestration.locks`). Reads are not fenced.

What it reads comes back as Thermostat's records (:class:`flows.records.stored.StoredRun`,
:class:`flows.records.stored.StoredVersion`), never as MLflow's entities: MLflow stays in this room.

Model names are checked up front against MLflow's rules (:func:`validate_model_name`), and every
value put into a search filter is quoted by :func:`filter_literal`.

MLflow's REST client quotes the request's URL in its errors, ``user:password@`` included. Every
error out of MLflow here has the credentials of the tracking and registry URIs taken out before
anything logs, raises or stores it (:func:`monitoring.credentials_redacted`): the adapter's retry warnings,
a task's failure, a flow run's state message, the alert that quotes it.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import posixpath
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, cast

import mlflow
import mlflow.artifacts
import mlflow.pyfunc
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, Run, RunStatus, RunTag
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.models import Model, ModelSignature
from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, ErrorCode
from mlflow.pyfunc import PyFuncModel
from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema, TensorSpec
from sqlalchemy.exc import InterfaceError, OperationalError

from flows.records.evidence import RunEvidence
from flows.records.stored import RunStatus as StoredRunStatus
from flows.records.stored import StoredRun, StoredVersion
from flows.records.versions import REGISTRATION_TAG
from flows.registry import model as calibrated_model_code
from flows.settings import ThermostatSettings
from monitoring import credentials_redacted, mask_url

__all__ = [
    "IDEMPOTENCY_TAG",
    "MODEL_ARTIFACT_PATH",
    "REGISTRATION_COMPLETE",
    "REGISTRATION_PENDING",
    "REGISTRATION_TAG",
    "REQUEST_PARAMS",
    "MlflowRegistry",
    "WriteFence",
    "calibrated_signature",
    "filter_literal",
    "is_transient",
    "retry_transient",
    "save_calibrated_model",
    "validate_model_name",
]

IDEMPOTENCY_TAG = "idempotency_key"
MODEL_ARTIFACT_PATH = "calibrated_model"
# REGISTRATION_TAG (flows.records.versions): a version's registration state. Only complete versions
# answer an idempotency look-up.
REGISTRATION_PENDING = "pending"
REGISTRATION_COMPLETE = "complete"

RunState = Literal["RUNNING", "FINISHED", "FAILED", "KILLED", "SCHEDULED", "MISSING"]

_T = TypeVar("_T")
_logger = logging.getLogger("thermostat")

TRANSIENT_MLFLOW_CODES = frozenset(
    {"TEMPORARILY_UNAVAILABLE", "INTERNAL_ERROR", "REQUEST_LIMIT_EXCEEDED", "DEADLINE_EXCEEDED"}
)


class WriteFence(Protocol):
    """What must hold for a write to be made: :meth:`check` raises, and nothing is written, when
    it does not (:class:`flows.orchestration.locks.ModelLease`: this run still holds the model's lock)."""

    def check(self) -> None: ...


class _RedactingClient:
    """An ``MlflowClient`` whose errors never quote the credentials of the URIs it talks to."""

    def __init__(self, client: MlflowClient, uris: Sequence[str]) -> None:
        self._client = client
        self._uris = tuple(uris)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with credentials_redacted(*self._uris):
                return attribute(*args, **kwargs)

        return call


def is_transient(error: BaseException) -> bool:
    """Can repeating the call help? Network/file-system errors, MLflow's transient codes (its
    REST client reports a refused connection or exhausted HTTP retries as ``INTERNAL_ERROR``)
    and lost database connections; never a refusal or a bug."""
    if isinstance(error, MlflowException):
        return error.error_code in TRANSIENT_MLFLOW_CODES
    return isinstance(error, (OSError, OperationalError, InterfaceError))


def retry_transient(
    call: Callable[[], _T], *, what: str, attempts: int = 4, delays: Sequence[float] = (0.5, 2.0, 5.0)
) -> _T:
    """Run ``call``; on a transient error (:func:`is_transient`) wait and repeat it, at most
    ``attempts`` times in all. Only for calls that are safe to repeat.

    Examples
    --------
    >>> calls = []
    >>> def flaky() -> str:
    ...     calls.append(1)
    ...     if len(calls) == 1:
    ...         raise ConnectionResetError("blip")
    ...     return "done"
    >>> retry_transient(flaky, what="a doctest", delays=(0.0,))
    'done'
    >>> len(calls)
    2
    """
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as error:
            if attempt == attempts or not is_transient(error):
                raise
            delay = delays[min(attempt - 1, len(delays) - 1)]
            _logger.warning("%s failed (attempt %d of %d: %s: %s); retrying in %.1f s", what, attempt, attempts,
                            type(error).__name__, error, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")  # the loop returns or raises


def validate_model_name(name: str) -> str:
    """``name`` if MLflow accepts it as a registered model name; else a ValueError naming the rule.

    MLflow's rules (``mlflow.utils.validation._validate_model_name``): not empty, no ``/`` or
    ``:``, and a path that normalises to itself. Thermostat adds one: not both quote kinds, since
    MLflow's filter strings have no escape and a value is quoted with the kind it lacks.

    Examples
    --------
    >>> validate_model_name("o'brien")
    "o'brien"
    >>> validate_model_name("a/b")
    Traceback (most recent call last):
    ...
    ValueError: model name 'a/b' contains '/'; MLflow model names cannot contain '/' or ':'
    """
    if not isinstance(name, str):
        raise TypeError(f"model name must be a str, got {type(name).__name__}")
    if name.strip() == "":
        raise ValueError(f"model name {name!r} is empty; pass the registered model's name")
    for character in ("/", ":"):
        if character in name:
            raise ValueError(f"model name {name!r} contains {character!r}; MLflow model names cannot contain '/' or ':'")
    normalised = posixpath.normpath(name)
    if normalised != name or normalised == "." or normalised.startswith(".."):
        raise ValueError(f"model name {name!r} would resolve to the path {normalised!r}; MLflow requires a name "
                         "that is its own normalised path (no '.', '..', doubled or trailing separators)")
    if "'" in name and '"' in name:
        raise ValueError(f"model name {name!r} contains both ' and \"; an MLflow search filter cannot quote such a "
                         "value (it has no escape), so use at most one kind of quote")
    return name


def filter_literal(value: str) -> str:
    """``value`` as a string literal of an MLflow search filter.

    MLflow strips the outer quotes and has no escape sequence (``'o''brien'`` would search for
    ``o''brien``), so a value is quoted with a kind of quote it does not contain.

    Examples
    --------
    >>> print(filter_literal("digits"), filter_literal("o'brien"))
    'digits' "o'brien"
    """
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    raise ValueError(f"{value!r} contains both ' and \"; an MLflow search filter cannot express it")


def _millis(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError(f"{moment.isoformat()} has no timezone; pass an aware datetime")
    return int(moment.astimezone(UTC).timestamp() * 1000)


def _is_missing(error: MlflowException) -> bool:
    return bool(error.error_code == ErrorCode.Name(RESOURCE_DOES_NOT_EXIST))


def _artifact_file(folder: Path, path: str) -> Path:
    """Where the artifact ``path`` (relative, checked by :class:`RunEvidence`) is written in ``folder``."""
    target = folder.joinpath(*posixpath.normpath(path).split("/"))
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _stored_run(run: Run) -> StoredRun:
    """MLflow's run as Thermostat's record (what every reader of a run gets)."""
    status: StoredRunStatus = run.info.status
    return StoredRun(
        run_id=str(run.info.run_id), experiment_id=str(run.info.experiment_id), status=status,
        start_time_ms=run.info.start_time, end_time_ms=run.info.end_time, tags=dict(run.data.tags),
        metrics={str(key): float(value) for key, value in run.data.metrics.items()}, params=dict(run.data.params),
    )


def _stored_version(version: ModelVersion) -> StoredVersion:
    """MLflow's model version as Thermostat's record."""
    return StoredVersion(
        name=str(version.name), version=str(version.version), tags=dict(version.tags),
        run_id=str(version.run_id) if version.run_id else None, source=str(version.source or ""),
        status=str(version.status), creation_time_ms=int(version.creation_timestamp or 0),
    )


REQUEST_PARAMS = ParamSchema([ParamSpec(field, "string", [], shape=(-1,))
                              for field in calibrated_model_code.REQUEST_FIELDS])
"""``params`` of every calibrated model: ``request_id`` and ``group``, lists of strings (empty: not given)."""


def calibrated_signature(checkpoint: ModelSignature | None, n_classes: int) -> ModelSignature:
    """The calibrated pyfunc's signature: what MLflow parses a request by, and what it answers.

    Inputs, by the checkpoint's input schema (MLflow parses a JSON request into these types):

    - named columns: the same columns, plus the optional ``request_id`` and ``group`` columns;
    - one unnamed tensor: the same tensor (dtype and shape), so a float32 model gets float32;
    - unnamed columns or no signature: no input schema; the model converts what MLflow parsed
      (:func:`flows.registry.model.checkpoint_input`), and the registration's serving rehearsal
      refuses a checkpoint that would then be served other logits than its own.

    ``params`` (:data:`REQUEST_PARAMS`) carry ``request_id`` and ``group`` for every input form.
    Outputs: the response columns of :func:`flows.registry.model.served_frame`.

    Raises
    ------
    ValueError
        If the checkpoint's inputs are named tensors (a dict of arrays: a holdout's features
        cannot be given as one), or include a column called ``request_id`` or ``group``.
    """
    extra = calibrated_model_code.REQUEST_FIELDS
    inputs = checkpoint.inputs if checkpoint is not None else None
    if inputs is not None and inputs.is_tensor_spec() and (inputs.has_input_names() or len(inputs.inputs) > 1):
        raise ValueError(
            f"the checkpoint's signature takes named tensors {inputs.input_names()} (a dict of arrays); Thermostat "
            "scores a holdout of one array per example: log it with one unnamed tensor (infer_signature on a numpy "
            "array) or with named columns (infer_signature on a DataFrame)"
        )
    if inputs is not None and not inputs.is_tensor_spec() and inputs.has_input_names():
        clashing = sorted(set(inputs.input_names()) & set(extra))
        if clashing:
            raise ValueError(
                f"the checkpoint's inputs include the column(s) {clashing}, which the calibrated model reads as the "
                "request id and group of each row; rename them in the checkpoint's signature"
            )
        inputs = Schema([*inputs.inputs, *(ColSpec("string", column, required=False) for column in extra)])
    elif inputs is not None and not inputs.is_tensor_spec():
        inputs = None
    columns: list[ColSpec | TensorSpec] = [
        ColSpec("long", "class"), ColSpec("double", "confidence"), ColSpec("string", "decision"),
        *(ColSpec("double", f"prob_{k}") for k in range(n_classes)),
        ColSpec("string", calibrated_model_code.REQUEST_ID_COLUMN), ColSpec("string", "model_version", required=False),
        ColSpec("double", "temperature"),
    ]
    return ModelSignature(inputs=inputs, outputs=Schema(columns), params=REQUEST_PARAMS)


def save_calibrated_model(path: Path, *, checkpoint_dir: Path, model_config: dict[str, Any], n_classes: int) -> None:
    """Save the calibrated pyfunc (model from code, :mod:`flows.registry.model`) of the checkpoint in
    ``checkpoint_dir`` to ``path``: ``model_config`` plus the load-time switches
    :data:`flows.registry.model.SERVING_CONFIG`, the signature of :func:`calibrated_signature`, and the
    checkpoint's requirements with this MLflow."""
    checkpoint = Model.load(str(checkpoint_dir / "MLmodel"))
    requirements_file = checkpoint_dir / "requirements.txt"
    requirements = [f"mlflow=={mlflow.__version__}"]
    if requirements_file.is_file():
        requirements += [
            line.strip() for line in requirements_file.read_text().splitlines()
            if line.strip() and not line.startswith(("#", "mlflow=", "mlflow-", "mlflow<", "mlflow>"))
            and line.strip() != "mlflow"
        ]
    with warnings.catch_warnings():
        # The signature is given explicitly; an input example would only re-run the checkpoint.
        warnings.filterwarnings("ignore", message=".*input example was not provided.*", category=UserWarning)
        mlflow.pyfunc.save_model(
            str(path),
            python_model=calibrated_model_code.__file__,
            artifacts={calibrated_model_code.CHECKPOINT_ARTIFACT: str(checkpoint_dir)},
            model_config=model_config | calibrated_model_code.SERVING_CONFIG,
            signature=calibrated_signature(checkpoint.signature, n_classes),
            pip_requirements=requirements,
        )


class MlflowRegistry:
    """Runs, artifacts, registered models, versions and aliases of one MLflow deployment."""

    def __init__(
        self, tracking_uri: str, *, registry_uri: str | None = None, artifact_location: str | None = None,
        experiment_name: str = "thermostat", fence: WriteFence | None = None,
    ) -> None:
        self.tracking_uri = tracking_uri
        self.registry_uri = registry_uri or tracking_uri
        self.artifact_location = artifact_location
        self.experiment_name = experiment_name
        self.fence = fence
        self._client = MlflowClient(tracking_uri=self.tracking_uri, registry_uri=self.registry_uri)
        if mask_url(self.tracking_uri) != self.tracking_uri or mask_url(self.registry_uri) != self.registry_uri:
            # MLflow prints "View run ... at: <tracking URI>/#/..." to stdout when a run ends, password
            # included, and a worker's stdout is stored in its logs: never with credentials in the URI.
            os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
            # Its errors quote the request's URL, credentials included: taken out at the source.
            self._client = cast(MlflowClient, _RedactingClient(self._client, (self.tracking_uri, self.registry_uri)))
        # An experiment's id never changes: looked up once per adapter (a fleet's checks open a
        # run each in one experiment), and the experiment of each run this adapter started.
        self._experiment_ids: dict[str, str] = {}
        self._run_experiments: dict[str, str] = {}

    @classmethod
    def from_settings(cls, settings: ThermostatSettings) -> MlflowRegistry:
        """The adapter of ``settings``; also sets MLflow's own HTTP retries and timeout from them
        (:meth:`ThermostatSettings.mlflow_http_environment`: MLflow reads them from the process
        environment at every request, and has no other way to be told)."""
        os.environ.update(settings.mlflow_http_environment())
        if settings.tracking_uri is None:
            settings.state_dir.mkdir(parents=True, exist_ok=True)
        return cls(
            settings.resolved_tracking_uri(), registry_uri=settings.resolved_registry_uri(),
            artifact_location=settings.resolved_artifact_location(), experiment_name=settings.experiment_name,
        )

    def fenced(self, fence: WriteFence) -> MlflowRegistry:
        """This adapter with ``fence`` checked immediately before every attempt of every write
        (e.g. the model's lease: :class:`flows.orchestration.locks.ModelLease`)."""
        return MlflowRegistry(self.tracking_uri, registry_uri=self.registry_uri,
                              artifact_location=self.artifact_location, experiment_name=self.experiment_name, fence=fence)

    def _write(self, call: Callable[[], _T], *, what: str, repeatable: bool = True) -> _T:
        """Make a write: the fence, if any, is checked right before each attempt; a write that is
        safe to repeat is retried in place on a transient error (:func:`retry_transient`)."""

        def attempt() -> _T:
            if self.fence is not None:
                self.fence.check()
            return call()

        return retry_transient(attempt, what=what) if repeatable else attempt()

    # Runs -------------------------------------------------------------------------------

    def experiment_id(self, name: str | None = None) -> str:
        """Id of the experiment ``name`` (default: this adapter's), created if missing."""
        name = self.experiment_name if name is None else name
        known = self._experiment_ids.get(name) or self.find_experiment_id(name)
        if known is not None:
            return known
        try:
            location = self._artifact_location(name)
            created = str(self._write(lambda: self._client.create_experiment(name, artifact_location=location),
                                      what=f"creating experiment {name}", repeatable=False))
        except MlflowException:  # created concurrently by another run
            found = self.find_experiment_id(name)
            if found is None:
                raise
            return found
        self._experiment_ids[name] = created
        return created

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
        experiment = self.experiment_id(experiment_name)
        run = self._write(lambda: self._client.create_run(
            experiment, run_name=run_name, tags=tags, start_time=None if start_time is None else _millis(start_time),
        ), what=f"creating a run {run_name!r}", repeatable=False)
        self._run_experiments[str(run.info.run_id)] = experiment
        return str(run.info.run_id)

    def run_url(self, run_id: str, ui_url: str | None) -> str | None:
        """Link to a run in the MLflow UI at ``ui_url``; None without a UI. (The experiment of a
        run this adapter started is known; another run is read.)"""
        if ui_url is None:
            return None
        experiment = self._run_experiments.get(run_id) or str(self._client.get_run(run_id).info.experiment_id)
        return f"{ui_url.rstrip('/')}/#/experiments/{experiment}/runs/{run_id}"

    def end_run(self, run_id: str, *, failed: bool = False, tags: Mapping[str, str] | None = None) -> None:
        """Close the run FINISHED (or FAILED), its last ``tags`` (a verdict, a failure) written
        first; repeating either is harmless, so each is retried in place."""
        if tags:
            self.set_run_tags(run_id, tags)
        status = RunStatus.to_string(RunStatus.FAILED if failed else RunStatus.FINISHED)
        self._write(lambda: self._client.set_terminated(run_id, status=status), what=f"closing run {run_id} {status}")

    def run_state(self, run_id: str) -> RunState:
        """The run's status, or ``MISSING`` when it does not exist (or was deleted)."""
        try:
            run = retry_transient(lambda: self._client.get_run(run_id), what=f"reading run {run_id}")
        except MlflowException as error:
            if _is_missing(error):
                return "MISSING"
            raise
        if run.info.lifecycle_stage == "deleted":
            return "MISSING"
        status: RunState = run.info.status
        return status

    def open_runs(self, model_name: str) -> list[StoredRun]:
        """Registration runs of ``model_name`` (in this adapter's experiment, with an idempotency
        key) still RUNNING."""
        experiment = self.experiment_id()
        found = retry_transient(
            lambda: self._client.search_runs([experiment], "attributes.status = 'RUNNING'", max_results=1000),
            what=f"searching open runs of {model_name}",
        )
        # Tags are compared here, not in the filter: no value of the user's to quote.
        return [_stored_run(run) for run in found
                if run.data.tags.get("thermostat.model_name") == model_name and IDEMPOTENCY_TAG in run.data.tags]

    def running_runs(self, experiment_name: str) -> list[StoredRun]:
        """The runs of ``experiment_name`` still RUNNING, at most 1,000 ([] when the experiment
        does not exist: it is not created here)."""
        experiment = self.find_experiment_id(experiment_name)
        if experiment is None:
            return []
        return [_stored_run(run) for run in retry_transient(
            lambda: self._client.search_runs([experiment], "attributes.status = 'RUNNING'", max_results=1000),
            what=f"searching running runs of {experiment_name}",
        )]

    def runs_started_before(self, experiment_name: str, cutoff: datetime) -> list[Run]:
        """Every run of ``experiment_name`` (not deleted) that started before ``cutoff``, oldest
        first, read 1,000 at a time ([] when the experiment does not exist)."""
        experiment = self.find_experiment_id(experiment_name)
        if experiment is None:
            return []
        found: list[Run] = []
        token: str | None = None
        while True:
            page = retry_transient(
                lambda: self._client.search_runs([experiment], f"attributes.start_time < {_millis(cutoff)}",
                                                 max_results=1000, order_by=["attributes.start_time ASC"],
                                                 page_token=token),
                what=f"searching the runs of {experiment_name} started before {cutoff.isoformat()}",
            )
            found.extend(page)
            token = page.token
            if not token:
                return found

    def delete_run(self, run_id: str) -> bool:
        """Mark a run deleted (MLflow's UI and searches no longer show it; ``mlflow gc`` removes it
        for good); False when no such run exists. Repeating it is harmless."""
        try:
            self._write(lambda: self._client.delete_run(run_id), what=f"deleting run {run_id}")
        except MlflowException as error:
            if _is_missing(error):
                return False
            raise
        return True

    def set_run_tags(self, run_id: str, tags: Mapping[str, str]) -> bool:
        """Tag an existing run, finished or not (e.g. the check a refit answers, with that refit).

        Returns False, writing nothing, when no run has this id.
        """
        entries = [RunTag(key, value) for key, value in tags.items()]
        try:
            self._write(lambda: self._client.log_batch(run_id, tags=entries), what=f"tagging run {run_id}")
        except MlflowException as error:
            if _is_missing(error):
                return False
            raise
        return True

    def finished_run_tagged(self, experiment_name: str, tag: str, value: str) -> StoredRun | None:
        """The oldest FINISHED run of ``experiment_name`` whose tag ``tag`` is ``value`` (None: none).

        The tag is compared here, not in MLflow's filter string: no value of the user's is quoted."""
        experiment = self.experiment_id(experiment_name)
        found = retry_transient(
            lambda: self._client.search_runs([experiment], "attributes.status = 'FINISHED'", max_results=1000,
                                             order_by=["attributes.start_time ASC"]),
            what=f"searching runs of {experiment_name}",
        )
        return next((_stored_run(run) for run in found if run.data.tags.get(tag) == value), None)

    def log_run_files(self, run_id: str, folder: Path, artifact_path: str | None) -> None:
        """Upload ``folder``'s files under ``artifact_path`` (None: at the run's artifact root)."""
        self._write(lambda: self._client.log_artifacts(run_id, str(folder), artifact_path),
                    what=f"uploading {artifact_path or ', '.join(sorted(p.name for p in folder.iterdir()))}")

    def log_evidence(self, run_id: str, evidence: RunEvidence) -> None:
        """Write a run's evidence in one call: its params and metrics in one batch, then every
        artifact in one upload (the figures as PNG, the tables as CSV, the documents as JSON).

        Both writes are safe to repeat (the same values, the same paths) and retried in place."""
        stamp = int(time.time() * 1000) if evidence.metrics_at is None else _millis(evidence.metrics_at)
        params = [Param(key, str(value)) for key, value in evidence.params.items()]
        metrics = [Metric(key, float(value), stamp, 0) for key, value in evidence.metrics.items()]
        if params or metrics:
            self._write(lambda: self._client.log_batch(run_id, params=params, metrics=metrics),
                        what=f"logging params and metrics to run {run_id}")
        if not evidence.artifact_paths:
            return
        with tempfile.TemporaryDirectory() as workdir:
            folder = Path(workdir)
            for path, figure in evidence.figures.items():
                figure.savefig(_artifact_file(folder, path))
            for path, frame in evidence.tables.items():
                frame.to_csv(_artifact_file(folder, path), index=False)
            for path, document in evidence.documents.items():
                _artifact_file(folder, path).write_text(json.dumps(document, indent=2, sort_keys=True))
            for path, text in evidence.texts.items():
                _artifact_file(folder, path).write_text(text, encoding="utf-8")
            self.log_run_files(run_id, folder, None)

    # The calibrated model ---------------------------------------------------------------

    def log_calibrated_model(
        self, run_id: str, *, checkpoint_dir: Path, model_config: dict[str, Any], n_classes: int
    ) -> str:
        """Save the calibrated pyfunc (model from code) beside the run; return its ``runs:/`` URI."""
        with tempfile.TemporaryDirectory() as workdir:
            path = Path(workdir) / MODEL_ARTIFACT_PATH
            save_calibrated_model(path, checkpoint_dir=checkpoint_dir, model_config=model_config, n_classes=n_classes)
            self.log_run_files(run_id, path, MODEL_ARTIFACT_PATH)
        return f"runs:/{run_id}/{MODEL_ARTIFACT_PATH}"

    def load_version_model(self, name: str, version: str, destination: Path) -> PyFuncModel:
        """Download a registered version's model files and load them as a pyfunc.

        The pyfunc is told its name and version (the ``model_version`` column of its output)
        and not to log its predictions: Thermostat's own loads score holdouts, not traffic
        (:class:`flows.registry.serving.ServedModel` logs for itself). Versions registered before these
        switches existed are loaded as they are.
        """
        uri = self._client.get_model_version_download_uri(name, version)
        destination.mkdir(parents=True, exist_ok=True)
        with credentials_redacted(self.tracking_uri, self.registry_uri):
            local = mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(destination),
                                                        tracking_uri=self.tracking_uri)
            flavor = Model.load(str(Path(local) / "MLmodel")).flavors.get("python_function", {})
            saved = flavor.get(mlflow.pyfunc.MODEL_CONFIG) or {}
            wanted = {"registered_model_name": name, "registered_model_version": str(version), "log_predictions": False}
            overrides = {key: value for key, value in wanted.items() if key in saved}
            model: PyFuncModel = mlflow.pyfunc.load_model(local, model_config=overrides or None)
        return model

    # Registry ---------------------------------------------------------------------------

    def ensure_registered_model(self, name: str) -> None:
        try:
            self._client.get_registered_model(name)
        except MlflowException as error:
            if not _is_missing(error):
                raise
            try:
                self._write(lambda: self._client.create_registered_model(
                    name, description="Calibrated checkpoints registered by Thermostat."),
                    what=f"creating registered model {name}", repeatable=False)
            except MlflowException:  # created concurrently
                self._client.get_registered_model(name)

    def create_version(self, name: str, *, source: str, run_id: str, tags: dict[str, str]) -> StoredVersion:
        """A new, immutable version, ``pending`` until :meth:`mark_complete`; its tags are written
        in the same call as the version.

        Not retried here: the call is not idempotent. MLflow's HTTP client may still repeat the
        POST (on 408/429/5xx) after the server committed it, so a caller must look for versions
        with the same idempotency key afterwards (:meth:`versions_with_key`).
        """
        self.ensure_registered_model(name)
        return _stored_version(self._write(lambda: self._client.create_model_version(
            name, source, run_id=run_id, tags=tags | {REGISTRATION_TAG: REGISTRATION_PENDING}),
            what=f"creating a version of {name}", repeatable=False))

    def describe_version(self, name: str, version: str, description: str) -> None:
        """Set the version's description (Markdown, shown first on MLflow's version page); repeatable."""
        self._write(lambda: self._client.update_model_version(name, version, description=description),
                    what=f"describing {name} version {version}")

    def mark_complete(self, name: str, version: str) -> None:
        """The last write of a registration: from now on the version answers idempotency look-ups."""
        self.set_version_tags(name, version, {REGISTRATION_TAG: REGISTRATION_COMPLETE})

    def delete_version(self, name: str, version: str) -> bool:
        """Delete a version; False when it was already gone (a repeated delete is harmless)."""
        try:
            self._write(lambda: self._client.delete_model_version(name, version),
                        what=f"deleting {name} version {version}")
        except MlflowException as error:
            if _is_missing(error):
                return False
            raise
        return True

    def versions(self, name: str) -> list[StoredVersion]:
        """Every version of the registered model ``name`` ([] when there is no such model)."""
        return [_stored_version(version) for version in retry_transient(
            lambda: self._client.search_model_versions(f"name = {filter_literal(name)}"),
            what=f"listing the versions of {name}")]

    def versions_with_key(self, name: str, key: str) -> list[StoredVersion]:
        """Every version of ``name`` carrying the idempotency ``key``, in any registration state, by number."""
        found = retry_transient(
            lambda: self._client.search_model_versions(f"tags.{IDEMPOTENCY_TAG} = {filter_literal(key)}"),
            what=f"searching versions of idempotency key {key[:12]}",
        )
        # The name is compared here, not in the filter: one fewer value to quote, same answer.
        return sorted((_stored_version(v) for v in found if v.name == name), key=lambda v: int(v.version))

    def is_complete(self, version: StoredVersion) -> bool:
        """Did the version's registration finish? Its ``thermostat.registration`` tag says so; a
        version registered before that tag existed counts as complete iff its run is FINISHED
        (the old registration closed its run last)."""
        state = version.tags.get(REGISTRATION_TAG)
        if state is not None:
            return bool(state == REGISTRATION_COMPLETE)
        return version.run_id is not None and self.run_state(version.run_id) == "FINISHED"

    def find_by_idempotency_key(self, name: str, key: str) -> StoredVersion | None:
        """The lowest *complete* version of ``name`` with this key; None if there is none."""
        complete = [v for v in self.versions_with_key(name, key) if self.is_complete(v)]
        return complete[0] if complete else None

    def alias_holder(self, name: str, alias: str) -> StoredVersion | None:
        """The version ``alias`` points at; None when the model or the alias does not exist."""
        version = self.aliases(name).get(alias)
        return None if version is None else self.get_version(name, version)

    def aliases(self, name: str) -> dict[str, str]:
        """Every alias of the registered model and the version it points at ({} if no such model)."""
        try:
            model = retry_transient(lambda: self._client.get_registered_model(name), what=f"reading model {name}")
        except MlflowException as error:
            if _is_missing(error):
                return {}
            raise
        return {str(alias): str(version) for alias, version in dict(model.aliases).items()}

    def get_version(self, name: str, version: str) -> StoredVersion:
        return _stored_version(retry_transient(lambda: self._client.get_model_version(name, version),
                                               what=f"reading {name} version {version}"))

    def set_version_tags(self, name: str, version: str, tags: Mapping[str, str]) -> None:
        """Registration state and monitoring metadata on a version, in the order given (never its
        T, threshold or evidence: those are immutable)."""
        for key, value in tags.items():
            self._write(functools.partial(self._client.set_model_version_tag, name, version, key, value),
                        what=f"tagging {name} version {version} {key}={value}")

    def set_alias(self, name: str, alias: str, version: str) -> None:
        self._write(lambda: self._client.set_registered_model_alias(name, alias, version),
                    what=f"pointing {name}@{alias} at version {version}")

    def delete_alias(self, name: str, alias: str) -> None:
        self._write(lambda: self._client.delete_registered_model_alias(name, alias), what=f"deleting {name}@{alias}")

    # Read-only views (the dashboard) -----------------------------------------------------
    # Nothing below creates or changes anything: the dashboard reads a live store.

    def find_experiment_id(self, name: str) -> str | None:
        """Id of the experiment ``name``; None when it does not exist (never created here)."""
        known = self._experiment_ids.get(name)
        if known is not None:
            return known
        experiment = retry_transient(lambda: self._client.get_experiment_by_name(name), what=f"reading experiment {name}")
        if experiment is None:
            return None
        self._experiment_ids[name] = str(experiment.experiment_id)
        return self._experiment_ids[name]

    def runs(self, experiment_name: str, *, limit: int = 5000) -> list[StoredRun]:
        """The runs of ``experiment_name``, newest first (at most ``limit``; [] when the
        experiment does not exist)."""
        experiment = self.find_experiment_id(experiment_name)
        if experiment is None:
            return []
        found: list[StoredRun] = []
        token: str | None = None
        while len(found) < limit:
            page = retry_transient(
                lambda: self._client.search_runs([experiment], max_results=min(1000, limit - len(found)),
                                                 order_by=["attributes.start_time DESC"], page_token=token),
                what=f"searching runs of {experiment_name}",
            )
            found.extend(_stored_run(run) for run in page)
            token = page.token
            if not token:
                break
        return found

    def serving_aliases(self) -> dict[str, dict[str, str]]:
        """Every registered model that has an alias, with its aliases and the versions they point
        at ({model: {alias: version}}), in one paginated search: what a check of a whole fleet
        reads instead of one look-up per model."""
        found: dict[str, dict[str, str]] = {}
        token: str | None = None
        while True:
            page = retry_transient(lambda: self._client.search_registered_models(max_results=1000, page_token=token),
                                   what="listing registered models and their aliases")
            for model in page:
                aliases = {str(alias): str(version) for alias, version in dict(model.aliases).items()}
                if aliases:
                    found[str(model.name)] = aliases
            token = page.token
            if not token:
                return found

    def registered_model_names(self) -> list[str]:
        """Names of every registered model, sorted."""
        names: list[str] = []
        token: str | None = None
        while True:
            page = retry_transient(lambda: self._client.search_registered_models(max_results=1000, page_token=token),
                                   what="listing registered models")
            names.extend(str(model.name) for model in page)
            token = page.token
            if not token:
                return sorted(names)

    def read_artifact(self, run_id: str, path: str) -> bytes | None:
        """The bytes of one artifact file of a run; None when the run has no such file."""
        with tempfile.TemporaryDirectory(prefix="thermostat-artifact-") as workdir:
            try:
                local = retry_transient(lambda: self._client.download_artifacts(run_id, path, workdir),
                                        what=f"downloading {path} of run {run_id}")
            except (MlflowException, OSError):
                return None
            file = Path(local)
            return file.read_bytes() if file.is_file() else None
