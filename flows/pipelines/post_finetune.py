"""The post-finetune flow: acceptance → refit T → re-sweep gate → register, in that order.

Tasks are thin: each calls a pure step in :mod:`flows.pipelines.steps`, a task shared with the other
flows (:mod:`flows.pipelines.tasks`) or the MLflow adapter (:mod:`flows.registry.adapter`); only I/O tasks
retry. The whole flow holds the model's lock (:mod:`flows.orchestration.locks`); it first finishes or removes
what interrupted registrations of the model left, then registers through the recoverable,
transactional path of :mod:`flows.pipelines.registration`. An idempotency key makes a repeat with the
same inputs return the existing version without registering anything.

The input files (``features_path``, ``holdout_path``, ``training_ids_path``) are read by the
process running the flow: an absolute path as given, a relative one against the flow run's
working directory (on a Prefect worker, the checkout the deployment runs from); a missing file
is refused before anything else, naming the path given and the path searched. Write them with
:func:`flows.holdout.write_features` and :func:`flows.holdout.write_ids`.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from prefect import flow, get_run_logger

from calibration import ScoredSet, read_scored_set
from flows.registry.checkpoint import CheckpointFiles, CheckpointOutput, checkpoint_logits
from flows.registry.rehearsal import rehearse_serving
from flows.holdout import HoldoutFeatures, read_features, read_ids, resolve_input_path
from flows.orchestration.locks import model_lock
from flows.orchestration.outcomes import finish
from flows.pipelines.registration import Registration, recover_interrupted, register
from flows.registry.adapter import MlflowRegistry, validate_model_name
from flows.pipelines.reports import log_context
from flows.settings import ThermostatSettings
from flows.pipelines.steps import (
    AcceptedCheckpoint,
    CalibratedCheckpoint,
    ChampionScore,
    StepRefused,
    accept_checkpoint,
    data_version,
    refit_temperature,
)
from flows.pipelines.tasks import fetch_checkpoint, gate, io_task, open_prediction_log, step_task
from flows.records.versions import VersionRecord
from flows.pipelines.traffic import recent_labelled_traffic

__all__ = ["post_finetune"]

# ---------------------------------------------------------------------------- I/O tasks


@step_task(name="score-holdout")
def score_holdout(
    files: CheckpointFiles, features: HoldoutFeatures, output: CheckpointOutput | Literal["auto"], workdir: Path
) -> tuple[ScoredSet, CheckpointOutput]:
    """The holdout's logits as the registered version will serve them: the checkpoint's own logits,
    then the holdout sent through MLflow's scoring path in every input form (:mod:`flows.registry.rehearsal`);
    a checkpoint that cannot be served, or would be served other logits, is refused here."""
    source = f"{features.source} via {files.uri}"
    try:
        logits, kind = checkpoint_logits(files, features.features, output=output)
        if not np.isfinite(logits).all():  # the scored set refuses them, naming the row
            return ScoredSet.from_arrays(logits, features.labels, ids=features.ids, source=source), kind
        served = rehearse_serving(files.local_dir, features.features, features.ids, logits, kind, workdir)
    except ValueError as error:
        raise StepRefused("serving", f"{error}; nothing is registered") from error
    get_run_logger().info(
        "%s served as registered: %d examples through MLflow's scoring path in %d input forms (%s), max |served - "
        "own logits| %.3g (allowed %.1g)", log_context(files.uri, None), features.ids.shape[0], len(served.forms),
        ", ".join(served.forms), served.max_difference, served.tolerance,
    )
    return ScoredSet.from_arrays(served.logits, features.labels, ids=features.ids, source=source), kind


@io_task(name="score-alias-holder")
def score_alias_holder(
    registry: MlflowRegistry, model_name: str, alias: str, workdir: Path,
    features: HoldoutFeatures | None, holdout: ScoredSet, holdout_data_version: str,
) -> ChampionScore | None:
    """The current alias holder's accuracy on the same holdout, or None when nothing holds it.

    With features the holder's registered model is run on them; with a scored set only, its
    recorded ``holdout_accuracy`` is used when it was measured on the same holdout ids.
    """
    holder = registry.alias_holder(model_name, alias)
    if holder is None:
        return None
    if features is not None:
        model = registry.load_version_model(model_name, holder.version, workdir / "alias-holder")
        predictions = pd.DataFrame(model.predict(features.features))
        predicted = predictions["class"].to_numpy()
        return ChampionScore(version=holder.version, accuracy=float(np.mean(predicted == features.labels)))
    where = f"{model_name}@{alias} (version {holder.version})"
    try:
        record = VersionRecord.from_tags(holder.tags, where=where)
    except ValueError as error:
        raise StepRefused("acceptance", f"{error}; its holdout accuracy is unknown, so pass features_path to score "
                                        "both checkpoints on the same holdout") from None
    if record.holdout_data_version != holdout_data_version:
        raise StepRefused(
            "acceptance",
            f"{where} was measured on another holdout, and a scored set cannot be run through it; pass "
            "features_path so both checkpoints are scored on the same holdout",
        )
    return ChampionScore(version=holder.version, accuracy=record.holdout_accuracy)


# ------------------------------------------------------------------------- step tasks


@io_task(name="production-reference")
def production_reference(
    registry: MlflowRegistry, model_name: str, alias: str, settings: ThermostatSettings
) -> NDArray[np.intp] | None:
    """Labels of the alias holder's recent labelled traffic: what production looks like (its class mix).

    None when the alias serves nothing yet or its window holds no labelled row; the
    qualification report then says that the class-mix check was not run.
    """
    logger = get_run_logger()
    holder = registry.alias_holder(model_name, alias)
    if holder is None:
        logger.warning("no production reference for the class-mix check: @%s serves nothing yet", alias)
        return None
    end = datetime.now(UTC)
    log = open_prediction_log(settings)
    try:
        traffic = recent_labelled_traffic(
            log, model_name, str(holder.version), start=end - settings.monitor_window, end=end,
            max_rows=settings.refit_max_rows, chunk_size=settings.monitor_chunk_size,
        )
    finally:
        log.dispose()
    if traffic is None:
        logger.warning("no production reference for the class-mix check: no labelled traffic of %s v%s in the "
                       "last %s", model_name, holder.version, settings.monitor_window)
        return None
    logger.info("class-mix reference: %d labelled rows of %s v%s (@%s) served in the last %s",
                traffic.scored.n_samples, model_name, holder.version, alias, settings.monitor_window)
    return traffic.scored.labels


@step_task(name="acceptance")
def acceptance(
    files: CheckpointFiles, holdout: ScoredSet, output: CheckpointOutput, training_ids: NDArray[np.str_],
    champion: ChampionScore | None, train_steps: int, train_data_version: str, settings: ThermostatSettings,
) -> AcceptedCheckpoint:
    accepted = accept_checkpoint(
        checkpoint_uri=files.uri, checkpoint_digest=files.digest, checkpoint_output=output, holdout=holdout,
        training_ids=training_ids, champion=champion, train_steps=train_steps,
        train_data_version=train_data_version, settings=settings,
    )
    get_run_logger().info(
        "%s accepted: holdout n=%d, accuracy %.4f%s", log_context(files.uri, None), holdout.n_samples,
        accepted.accuracy, "" if champion is None else f" (alias holder v{champion.version}: {champion.accuracy:.4f})",
    )
    return accepted


@step_task(name="refit-temperature")
def calibrate(
    accepted: AcceptedCheckpoint, settings: ThermostatSettings, reference_labels: NDArray[np.intp] | None
) -> CalibratedCheckpoint:
    calibrated = refit_temperature(accepted, settings=settings, reference_labels=reference_labels)
    fit = calibrated.fit
    get_run_logger().info(
        "%s fitted on calibration n=%d: mean NLL %.4f -> %.4f; %.0f%% interval of T [%.4g, %.4g]",
        log_context(accepted.checkpoint_uri, fit.temperature), fit.n, fit.nll_before, fit.nll_after,
        100 * fit.confidence_level, fit.temperature_low, fit.temperature_high,
    )
    return calibrated


# --------------------------------------------------------------------- register tasks


# ------------------------------------------------------------------------------- flow


def _training_ids(training_ids: list[str] | None, training_ids_path: str | None) -> NDArray[np.str_]:
    if (training_ids is None) == (training_ids_path is None):
        raise ValueError("pass exactly one of training_ids (a list) and training_ids_path (one id per line)")
    if training_ids_path is not None:
        return read_ids(training_ids_path, parameter="training_ids_path")
    return np.asarray(training_ids, dtype=str)


def _input_file(path: str | None, parameter: str) -> Path | None:
    """``path`` resolved (absolute as given, relative against this run's working directory),
    checked to exist before anything is locked or fetched; None stays None."""
    return None if path is None else resolve_input_path(path, parameter=parameter)


def _holdout_files(
    features_path: str | None, holdout_path: str | None, checkpoint_output: str
) -> tuple[Path | None, Path | None]:
    """The features file or the scored holdout (exactly one), each checked to exist."""
    if (features_path is None) == (holdout_path is None):
        raise ValueError("pass exactly one of features_path and holdout_path")
    if holdout_path is not None and checkpoint_output == "auto":
        raise ValueError("with holdout_path, set checkpoint_output to 'logits' or 'probabilities' (what the "
                         "checkpoint's predict returns), so the registered model converts its output the same way")
    return _input_file(features_path, "features_path"), _input_file(holdout_path, "holdout_path")


def _scored_holdout(
    files: CheckpointFiles, features: HoldoutFeatures | None, holdout_file: Path | None,
    checkpoint_output: CheckpointOutput | Literal["auto"], workdir: Path,
) -> tuple[ScoredSet, CheckpointOutput]:
    """The holdout as the checkpoint scores it: its ``features`` run through it, or the scored set
    in ``holdout_file`` (with what the checkpoint returns, as given)."""
    if features is not None:
        return score_holdout(files, features, checkpoint_output, workdir)
    assert holdout_file is not None and checkpoint_output != "auto"  # narrowed by _holdout_files
    return read_scored_set(holdout_file), checkpoint_output


@flow(name="post-finetune")
def post_finetune(
    model_name: str,
    checkpoint_uri: str,
    train_steps: int,
    train_data_version: str,
    features_path: str | None = None,
    holdout_path: str | None = None,
    training_ids: list[str] | None = None,
    training_ids_path: str | None = None,
    alias: str = "champion",
    checkpoint_output: Literal["auto", "logits", "probabilities"] = "auto",
    reference_labels: list[int] | None = None,
    settings: ThermostatSettings | None = None,
) -> Registration:
    """Acceptance → refit T → re-sweep gate → register, for one fine-tuned checkpoint; returns the
    :class:`Registration`, and the run's final state says it ("registered tickets version 4 ...").

    Parameters
    ----------
    model_name : registered model name in MLflow.
    checkpoint_uri : MLflow model URI of the candidate; its pyfunc ``predict`` returns logits
        or probabilities of shape (n_samples, n_classes).
    train_steps, train_data_version : stored with the version.
    features_path : ``.npz`` with ``ids``, ``features``, ``labels``; the flow computes the
        logits by running the checkpoint (and the current alias holder, for acceptance).
    holdout_path : instead of features, a scored set (``.npz``/``.parquet``/``.csv``) of the
        checkpoint's logits; then ``checkpoint_output`` must say what the checkpoint returns.
    training_ids, training_ids_path : the training example ids (list, or a file one per line).
        How the paths are read: the module docstring.
    alias : the serving alias to move (``champion``, ``multilingual``, ...).
    reference_labels : recent production labels for the class-mix qualification check; by
        default the labelled traffic of the alias holder in the last ``monitor_window`` from
        the prediction log (none: the qualification report says the check was not run).
    settings : defaults to ``ThermostatSettings()`` read from the environment, here, once.
    """
    settings = settings if settings is not None else ThermostatSettings()
    validate_model_name(model_name)
    features_file, holdout_file = _holdout_files(features_path, holdout_path, checkpoint_output)
    train_ids = _training_ids(training_ids, training_ids_path)
    references = None if reference_labels is None else np.asarray(reference_labels, dtype=np.intp)
    registry = MlflowRegistry.from_settings(settings)
    with model_lock(model_name, url=settings.resolved_prediction_log_url(), timeout_seconds=settings.lock_timeout_seconds,
                    lease_seconds=settings.lock_lease_seconds,
                    description=f"post-finetune of {checkpoint_uri}") as lease, \
            tempfile.TemporaryDirectory(prefix="thermostat-") as tmp:
        registry = registry.fenced(lease)  # every write under the lock checks the lease right before it
        repairs = recover_interrupted(registry, model_name)
        workdir = Path(tmp)
        files = fetch_checkpoint(checkpoint_uri, workdir, registry)
        features = read_features(features_file) if features_file is not None else None
        holdout, output = _scored_holdout(files, features, holdout_file, checkpoint_output, workdir)
        champion = score_alias_holder(registry, model_name, alias, workdir, features, holdout, data_version(holdout.ids))
        accepted = acceptance(files, holdout, output, train_ids, champion, train_steps, train_data_version, settings)
        if references is None:
            references = production_reference(registry, model_name, alias, settings)
        calibrated = calibrate(accepted, settings, references)
        gated = gate(calibrated, settings)
        registration = register(gated, files, registry=registry, model_name=model_name, alias=alias,
                                settings=settings, repairs=repairs)
    return finish(registration.summary(), registration)
