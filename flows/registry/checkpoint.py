"""A candidate checkpoint: its files, their digest, and the logits it gives on features.

The **checkpoint digest** is the SHA-256 over the checkpoint's MLflow model files as
downloaded from its URI: for every file, in sorted order of its path relative to the model
folder, the path, a NUL byte, the file's length and its bytes. It names the exact artifact
(weights, ``MLmodel``, environment files), not where it happens to be stored, so the same
files reached through ``runs:/…`` or ``models:/…`` have the same digest, and a re-trained
checkpoint logged under the same URI does not.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import mlflow.artifacts
import mlflow.pyfunc
import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from numpy.typing import NDArray

# Defined beside the version record, which must not load MLflow; re-exported for the flows.
from flows.records.versions import CheckpointOutput
from flows.registry.model import checkpoint_input
from monitoring import credentials_redacted

__all__ = ["LABELS_FIX", "ROWS_FIX", "SIGNATURE_FIX", "CheckpointFiles", "CheckpointOutput", "checkpoint_location", "checkpoint_logits", "describe_input",
           "digest_directory", "download_checkpoint"]


@dataclass(frozen=True, slots=True)
class CheckpointFiles:
    """A checkpoint downloaded to ``local_dir``; ``digest`` as defined in the module docstring."""

    uri: str
    local_dir: Path
    digest: str


def digest_directory(folder: Path) -> str:
    """SHA-256 of a folder's files (relative paths and contents, sorted by path)."""
    sha = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix().encode()
        data = path.read_bytes()
        sha.update(relative + b"\0" + str(len(data)).encode() + b"\0")
        sha.update(data)
    return sha.hexdigest()


def checkpoint_location(uri: str, tracking_uri: str) -> str:
    """Where the files of the checkpoint ``uri`` are, asked of the store at ``tracking_uri``.

    MLflow 3 keeps a model logged with ``log_model(name=...)`` as a logged model, apart from its
    run's artifacts, and finds it for ``runs:/<run id>/<name>`` and ``models:/...`` URIs through
    its *global* tracking and registry URIs, whatever ``download_artifacts`` is given
    (``ModelsArtifactRepository``): a worker whose ``THERMOSTAT_TRACKING_URI`` is not MLflow's own
    could not download such a checkpoint. So those URIs are resolved here, through a client of
    ``tracking_uri``, to the artifact location they stand for; any other URI (a run's own
    artifacts, a path, ``s3://`` ...) is returned as it is.

    Examples
    --------
    >>> checkpoint_location("s3://models/tickets/7", tracking_uri="sqlite:///mlflow.db")
    's3://models/tickets/7'
    """
    from mlflow.tracking import MlflowClient

    scheme, _, rest = uri.partition(":/")
    parts = rest.strip("/").split("/")
    if scheme not in ("runs", "models") or not parts[0]:
        return uri
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    if scheme == "models":
        if len(parts) == 1 and "@" in parts[0]:
            name, _, alias = parts[0].partition("@")
            return client.get_model_version_download_uri(name, client.get_model_version_by_alias(name, alias).version)
        if len(parts) == 2 and parts[1].isdigit():
            return client.get_model_version_download_uri(parts[0], parts[1])
        if len(parts) == 1:  # a logged model's id, models:/m-...
            return client.get_logged_model(parts[0]).artifact_location
        return uri
    run_id, name, inner = parts[0], parts[1] if len(parts) > 1 else "", "/".join(parts[2:])
    if not name:
        return uri
    # A model the run logged under that name (whose files MLflow prefers to the run's own, as here).
    experiment_id = client.get_run(run_id).info.experiment_id
    logged = [model for model in client.search_logged_models(experiment_ids=[experiment_id],
                                                             filter_string=f"name = '{name}'")
              if model.source_run_id == run_id]
    if not logged:
        return uri  # the run's own artifacts
    return logged[0].artifact_location + (f"/{inner}" if inner else "")


def download_checkpoint(uri: str, destination: Path, *, tracking_uri: str) -> CheckpointFiles:
    """Download the checkpoint's model files (:func:`checkpoint_location`) and compute their digest."""
    destination.mkdir(parents=True, exist_ok=True)
    with credentials_redacted(tracking_uri, uri):  # MLflow's errors quote the request's URL, credentials too
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=checkpoint_location(uri, tracking_uri),
                                                         dst_path=str(destination), tracking_uri=tracking_uri))
    if not (local / "MLmodel").is_file():
        raise ValueError(f"checkpoint {uri!r} is not an MLflow model: no MLmodel file in {local}")
    return CheckpointFiles(uri=uri, local_dir=local, digest=digest_directory(local))


def detect_output(raw: NDArray[np.float64]) -> CheckpointOutput:
    """``"probabilities"`` when every row is non-negative and sums to 1, else ``"logits"``.

    Decided once on a whole holdout, never per request: a single row of logits can sum to 1.
    """
    if raw.size and (raw >= 0).all() and np.allclose(raw.sum(axis=1), 1.0, atol=1e-6):
        return "probabilities"
    return "logits"


LABELS_FIX = (
    "Thermostat needs logits or probabilities of shape (n_samples, n_classes): log a scikit-learn model with "
    "mlflow.sklearn.log_model(model, name=..., pyfunc_predict_fn='predict_proba') (or 'predict_log_proba'), "
    "or make your pyfunc's predict return one row of logits per example"
)
"""The fix named when a checkpoint's predict returns one value per example (class labels)."""
ROWS_FIX = (
    "MLflow hands a checkpoint whose signature has columns (named, or inferred from a list) a DataFrame, and a "
    "scikit-learn text pipeline given a DataFrame vectorises its column names, not its rows: log it with a "
    "signature inferred from a 1-D numpy array of the texts (mlflow.models.infer_signature(np.asarray(texts), "
    "model.predict_proba(texts))), or start it with a ColumnTransformer that selects the text column"
)
"""The fix named when a checkpoint answers another number of rows than it was given examples."""
SIGNATURE_FIX = (
    "log the checkpoint with a signature inferred from the inputs it takes, e.g. mlflow.sklearn.log_model(model, "
    "name='model', signature=mlflow.models.infer_signature(X, model.predict_proba(X)), "
    "pyfunc_predict_fn='predict_proba') with X a numpy array or a DataFrame with named columns, so that MLflow parses "
    "a request into the types and shape the checkpoint was scored with"
)
"""The fix named when a checkpoint without a usable signature is served other logits than its own."""


def describe_input(model_input: Any) -> str:
    """A short description of a checkpoint's input for messages: its type, shape or columns."""
    if isinstance(model_input, pd.DataFrame):
        return f"a DataFrame with columns {[str(column) for column in model_input.columns][:8]}"
    if isinstance(model_input, list):
        return f"a list of {len(model_input)}"
    if isinstance(model_input, np.ndarray):
        return f"an array of shape {model_input.shape} and dtype {model_input.dtype}"
    return f"a {type(model_input).__name__}"


def checkpoint_logits(
    files: CheckpointFiles, features: NDArray[Any], *, output: CheckpointOutput | Literal["auto"] = "auto"
) -> tuple[NDArray[np.float64], CheckpointOutput]:
    """The checkpoint's own logits on ``features`` (log of its output when it gives probabilities).

    The features are handed to the checkpoint's pyfunc in the form its signature takes
    (:func:`flows.registry.model.checkpoint_input`: a DataFrame for named columns, an array of
    the tensor's dtype, a list for unnamed columns), as the served model hands it a request.
    Returns the logits, shape (n_samples, n_classes), and what the checkpoint returned.
    Zero probabilities give ``-inf`` logits, which acceptance refuses.

    Raises
    ------
    ValueError
        When the checkpoint refuses its input, returns one value per example (class labels:
        the message names ``pyfunc_predict_fn``) or another number of rows than examples.
    """
    model = mlflow.pyfunc.load_model(str(files.local_dir))
    model_input: Any = features
    try:
        model_input = checkpoint_input(features, model.metadata.get_input_schema())
        raw = np.asarray(model.predict(model_input), dtype=np.float64)
    except Exception as error:  # whatever the checkpoint's own code raises is a refusal, with its message
        message = error.message if isinstance(error, MlflowException) else f"{type(error).__name__}: {error}"
        raise ValueError(f"checkpoint {files.uri!r} given the holdout's features as {describe_input(model_input)} "
                         f"fails ({message}); {ROWS_FIX if isinstance(model_input, (pd.DataFrame, list)) else SIGNATURE_FIX}"
                         ) from error
    where = f"checkpoint {files.uri!r} given {describe_input(model_input)}"
    if raw.ndim == 1 and len(raw) == len(features):
        raise ValueError(f"{where} returned an array of shape {raw.shape}, one value per example (class labels?); "
                         f"{LABELS_FIX}")
    if raw.ndim != 2 or raw.shape[1] < 2:
        raise ValueError(f"{where} returned an array of shape {raw.shape}; its predict must return logits or "
                         f"probabilities of shape (n_samples, n_classes >= 2)")
    if raw.shape[0] != len(features):
        raise ValueError(f"{where} answered {raw.shape[0]} row(s) for {len(features)} example(s); {ROWS_FIX}")
    kind: CheckpointOutput = detect_output(raw) if output == "auto" else output
    if kind == "probabilities":
        with np.errstate(divide="ignore"):
            return np.log(raw), kind
    return raw, kind
