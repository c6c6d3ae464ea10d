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
from numpy.typing import NDArray

# Defined beside the version record, which must not load MLflow; re-exported for the flows.
from flows.records.versions import CheckpointOutput

__all__ = ["CheckpointFiles", "CheckpointOutput", "checkpoint_logits", "digest_directory", "download_checkpoint"]


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


def download_checkpoint(uri: str, destination: Path, *, tracking_uri: str) -> CheckpointFiles:
    """Download the checkpoint's model files and compute their digest."""
    destination.mkdir(parents=True, exist_ok=True)
    local = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(destination), tracking_uri=tracking_uri))
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


def checkpoint_logits(
    files: CheckpointFiles, features: NDArray[Any], *, output: CheckpointOutput | Literal["auto"] = "auto"
) -> tuple[NDArray[np.float64], CheckpointOutput]:
    """The checkpoint's logits on ``features`` (log of its output when it gives probabilities).

    Returns the logits, shape (n_samples, n_classes), and what the checkpoint returned.
    Zero probabilities give ``-inf`` logits, which acceptance refuses.
    """
    model = mlflow.pyfunc.load_model(str(files.local_dir))
    raw = np.asarray(model.predict(features), dtype=np.float64)
    if raw.ndim != 2 or raw.shape[1] < 2:
        raise ValueError(
            f"checkpoint {files.uri!r} returned an array of shape {raw.shape}; its predict must return "
            "logits or probabilities of shape (n_samples, n_classes >= 2)"
        )
    kind: CheckpointOutput = detect_output(raw) if output == "auto" else output
    if kind == "probabilities":
        with np.errstate(divide="ignore"):
            return np.log(raw), kind
    return raw, kind
