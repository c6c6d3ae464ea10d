"""``thermostat demo``: the main job on scikit-learn's bundled digits, with nothing running.

Two "fine-tuned" checkpoints are trained, logged to MLflow as models whose ``predict``
returns logits (log-probabilities), and each goes through ``post_finetune`` in-process:
an over-confident logistic regression becomes ``digits@champion`` and a small MLP becomes
``digits@challenger``, each with its own temperature. Everything lands in the state folder
(``THERMOSTAT_STATE_DIR``, default ``./.thermostat``).

A second run reuses the checkpoints logged by the first (same files, same digest), so the
pipeline's idempotency key matches and nothing new is registered; delete the state folder
to start over.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow.sklearn
import numpy as np
from mlflow.models import infer_signature
from numpy.typing import NDArray
from sklearn.datasets import load_digits  # type: ignore[import-untyped]
from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]
from sklearn.model_selection import train_test_split  # type: ignore[import-untyped]
from sklearn.neural_network import MLPClassifier  # type: ignore[import-untyped]
from sklearn.pipeline import make_pipeline  # type: ignore[import-untyped]
from sklearn.preprocessing import StandardScaler  # type: ignore[import-untyped]

from flows.holdout import write_features, write_ids
from flows.pipeline import Registration, post_finetune
from flows.registry import MlflowRegistry
from flows.settings import ThermostatSettings

__all__ = ["DigitsSplit", "DemoCheckpoint", "digits_split", "main", "make_estimator", "train_checkpoint"]

MODEL_NAME = "digits"
FINETUNE_EXPERIMENT = "thermostat-demo-finetunes"


@dataclass(frozen=True, slots=True, eq=False)
class DigitsSplit:
    """Digits split into a training part and a holdout, with ids ``digit-0000`` ..."""

    ids: NDArray[np.str_]
    features: NDArray[np.float64]
    labels: NDArray[np.intp]
    train_index: NDArray[np.intp]
    holdout_index: NDArray[np.intp]

    @property
    def training_ids(self) -> NDArray[np.str_]:
        return self.ids[self.train_index]


@dataclass(frozen=True, slots=True)
class DemoCheckpoint:
    name: str
    uri: str
    train_steps: int
    reused: bool


def digits_split(*, holdout_fraction: float = 0.5, seed: int = 0) -> DigitsSplit:
    """scikit-learn's 1,797 8×8 digits, split stratified by label (seeded)."""
    features, labels = load_digits(return_X_y=True)
    ids = np.array([f"digit-{i:04d}" for i in range(len(labels))])
    train_index, holdout_index = train_test_split(
        np.arange(len(labels)), test_size=holdout_fraction, stratify=labels, random_state=seed
    )
    return DigitsSplit(ids=ids, features=features.astype(np.float64), labels=labels.astype(np.intp),
                       train_index=np.sort(train_index), holdout_index=np.sort(holdout_index))


def make_estimator(kind: str, seed: int) -> Any:
    """``"logistic"``: weakly regularised, so over-confident (T > 1); ``"mlp"``: one hidden layer."""
    if kind == "logistic":
        return make_pipeline(StandardScaler(), LogisticRegression(C=1e4, max_iter=5000))
    if kind == "mlp":
        return make_pipeline(StandardScaler(), MLPClassifier((64,), alpha=1e-6, max_iter=500, random_state=seed))
    raise ValueError(f"unknown estimator kind {kind!r}; use 'logistic' or 'mlp'")


def _finetune_experiment(registry: MlflowRegistry) -> str:
    demo = MlflowRegistry(registry.tracking_uri, registry_uri=registry.registry_uri,
                          artifact_location=registry.artifact_location, experiment_name=FINETUNE_EXPERIMENT)
    return demo.experiment_id()


def train_checkpoint(
    registry: MlflowRegistry, split: DigitsSplit, *, name: str, estimator: Any, reuse: bool = True,
    n_train: int | None = None,
) -> DemoCheckpoint:
    """Train ("fine-tune") a scikit-learn classifier on the training part (its first
    ``n_train`` rows if given) and log it as an MLflow model whose pyfunc ``predict`` returns
    log-probabilities (valid logits).

    With ``reuse``, a checkpoint already logged under ``name`` is returned instead.
    """
    experiment_id = _finetune_experiment(registry)
    if reuse:
        found = registry.client.search_runs(
            [experiment_id], f"tags.`thermostat.demo_checkpoint` = '{name}' and attributes.status = 'FINISHED'",
            max_results=1, order_by=["attributes.start_time ASC"],
        )
        if found:
            run = found[0]
            return DemoCheckpoint(name, f"runs:/{run.info.run_id}/checkpoint", int(run.data.params["train_steps"]), True)
    rows = split.train_index[:n_train]
    x_train, y_train = split.features[rows], split.labels[rows]
    estimator.fit(x_train, y_train)
    final = estimator.steps[-1][1]
    train_steps = int(np.max(getattr(final, "n_iter_", 0)))
    run_id = registry.client.create_run(experiment_id, run_name=f"fine-tune {name}",
                                        tags={"thermostat.demo_checkpoint": name}).info.run_id
    registry.log_params(run_id, {"estimator": repr(estimator), "train_steps": train_steps, "n_train": len(y_train)})
    signature = infer_signature(x_train[:5], estimator.predict_log_proba(x_train[:5]))
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "checkpoint"
        # The demo's "user" checkpoint is a pickled scikit-learn model; MLflow warns about pickles.
        logging.getLogger("mlflow.sklearn").setLevel(logging.ERROR)
        mlflow.sklearn.save_model(
            estimator, str(path), serialization_format=mlflow.sklearn.SERIALIZATION_FORMAT_CLOUDPICKLE,
            pyfunc_predict_fn="predict_log_proba", signature=signature, pip_requirements=["scikit-learn", "numpy"],
        )
        registry.log_run_files(run_id, path, "checkpoint")
    registry.end_run(run_id)
    return DemoCheckpoint(name, f"runs:/{run_id}/checkpoint", train_steps, False)


def _report(registration: Registration, seconds: float) -> str:
    tags = registration.tags
    threshold = "none (everything goes to review)" if registration.gate_threshold is None else f"{registration.gate_threshold:.4f}"
    status = ("NEW version, alias moved" if registration.created
              else "already registered (same checkpoint, data and settings): nothing new, alias not moved")
    return "\n".join([
        f"{registration.model_name}@{registration.alias}: version {registration.version} — {status}  ({seconds:.1f} s)",
        f"  checkpoint      {registration.checkpoint_uri}  digest {registration.checkpoint_digest[:12]}",
        f"  temperature     T = {registration.temperature:.4f}  (calibration n = {tags['calibration_n']})",
        f"  gate            threshold {threshold} for target accuracy {float(tags['gate_target_accuracy']):.2f}: "
        f"coverage {registration.gate_coverage:.1%}",
        f"  evaluation n={tags['holdout_metrics_n']}  NLL {float(tags['holdout_nll_before']):.4f} -> "
        f"{float(tags['holdout_nll_after']):.4f}  change {float(tags['bootstrap_nll_change']):+.4f} "
        f"[{float(tags['bootstrap_nll_change_low']):+.4f}, {float(tags['bootstrap_nll_change_high']):+.4f}] "
        f"-> {tags['bootstrap_verdict']}",
        f"                  ECE {float(tags['holdout_ece_before']):.4f} -> {float(tags['holdout_ece_after']):.4f}"
        f"  ({tags['ece_binning']})",
    ])


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="thermostat demo", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--state-dir", type=Path, help="state folder (default: THERMOSTAT_STATE_DIR or ./.thermostat)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    settings = ThermostatSettings() if args.state_dir is None else ThermostatSettings(state_dir=args.state_dir)
    fresh = not (settings.state_dir / "mlflow.db").exists() if settings.tracking_uri is None else False
    registry = MlflowRegistry.from_settings(settings)
    print(f"Thermostat demo — state in {settings.state_dir.absolute()} ({'fresh' if fresh else 'existing'})")

    split = digits_split(seed=settings.seed)
    data_dir = settings.state_dir / "demo"
    features_path = write_features(data_dir / "holdout.npz", ids=split.ids[split.holdout_index],
                                   features=split.features[split.holdout_index], labels=split.labels[split.holdout_index])
    training_ids_path = write_ids(data_dir / "training_ids.txt", split.training_ids)

    reports, registrations = [], []
    for name, kind, alias in (("logistic-c1e4", "logistic", "champion"), ("mlp-64", "mlp", "challenger")):
        checkpoint = train_checkpoint(registry, split, name=name, estimator=make_estimator(kind, settings.seed))
        print(f"{'reusing' if checkpoint.reused else 'trained'} checkpoint {name}: {checkpoint.uri}")
        step_started = time.perf_counter()
        registration = post_finetune(
            model_name=MODEL_NAME, checkpoint_uri=checkpoint.uri, train_steps=checkpoint.train_steps,
            train_data_version=f"sklearn-digits/train-{len(split.train_index)}-seed-{settings.seed}",
            features_path=str(features_path), training_ids_path=str(training_ids_path), alias=alias, settings=settings,
        )
        registrations.append(registration.created)
        reports.append(_report(registration, time.perf_counter() - step_started))

    print("\n" + "=" * 100)
    print("\n\n".join(reports))
    print("=" * 100)
    print("Load a calibrated model:  mlflow.pyfunc.load_model('models:/digits@champion')  "
          f"with MLFLOW_TRACKING_URI={settings.resolved_tracking_uri()}")
    print(f"Look at runs, versions, tags and the reliability diagrams:\n"
          f"  mlflow ui --backend-store-uri {settings.resolved_tracking_uri()}")
    if not any(created for created in registrations):
        print("This state folder already held the demo's checkpoints and their calibrated versions, so nothing "
              f"new was registered (idempotent repeat); delete {settings.state_dir} to start over.")
    print(f"Demo finished in {time.perf_counter() - started:.1f} s.")
    return 0
