"""The post-finetune flow: acceptance → refit T → re-sweep gate → register, in that order.

Tasks are thin: each calls a pure step in :mod:`flows.steps` or the MLflow adapter in
:mod:`flows.registry`; only I/O tasks retry. The whole flow holds the model's lock
(:mod:`flows.locks`), and an idempotency key makes a repeat with the same inputs return the
existing version without registering anything.

Registration is a small state machine whose every state a crash can leave is recognised and
finished by the next run of the model (:func:`recover_interrupted`):

1. open the run (tagged with the idempotency key) and record the evidence;
2. create the version, tagged ``thermostat.registration=pending`` with all its other tags in
   the same call;
3. point the alias at it;
4. close the run FINISHED;
5. tag the version ``thermostat.registration=complete`` — the commit point: only complete
   versions answer an idempotency look-up.

Steps 1–5 run inside a Prefect ``transaction()``: when a step finally fails, the rollback hooks
put the alias back, delete the version and mark the run FAILED. A transient error is retried
in place by the MLflow adapter, inside the step (Prefect runs the rollback hooks *before* a
task's own retries, so task retries would roll back first and retry on a deleted version).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from mlflow.entities.model_registry import ModelVersion
from prefect import Task, flow, get_run_logger, task
from prefect.client.schemas.objects import State, TaskRun
from prefect.cache_policies import NO_CACHE
from prefect.logging import get_logger
from prefect.transactions import Transaction, get_transaction, transaction

from calibration import ScoredSet, read_scored_set
from monitoring import PredictionLog
from flows.checkpoint import CheckpointFiles, CheckpointOutput, checkpoint_logits, digest_directory, download_checkpoint
from flows.holdout import HoldoutFeatures, read_features, read_ids
from flows.embedded import guard_ephemeral_server
from flows.locks import ModelLease, model_lock
from flows.registry import (
    IDEMPOTENCY_TAG,
    REGISTRATION_PENDING,
    REGISTRATION_TAG,
    MlflowRegistry,
    is_transient,
    validate_model_name,
)
from flows.reports import (
    log_context,
    qualification_payload,
    reliability_figure,
    run_metrics,
    run_params,
    sweep_frame,
    version_tags,
)
from flows.settings import ThermostatSettings
from flows.traffic import recent_labelled_traffic
from flows.versions import registered_version
from flows.steps import (
    AcceptedCheckpoint,
    CalibratedCheckpoint,
    ChampionScore,
    GatedCheckpoint,
    StepRefused,
    accept_checkpoint,
    data_version,
    gate_threshold,
    idempotency_key,
    refit_temperature,
    verify_chain,
)

__all__ = ["Registration", "fetch_checkpoint", "post_finetune", "recover_interrupted", "register", "retry_if_transient"]

# Every flow of Thermostat imports this module: the embedded Prefect API server it may start is
# started one at a time per PREFECT_HOME and never outlives its process (flows.embedded).
guard_ephemeral_server()

# Every task: results stay in memory (they hold arrays), so no cache key and no persistence.
# Only I/O tasks outside the registration transaction retry, and only on errors that a retry can fix.


def retry_if_transient(task: Task[Any, Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Retry network/file-system errors, MLflow's transient codes and lost database connections
    (the prediction log); never a refusal or a bug."""
    error = state.data
    return isinstance(error, BaseException) and is_transient(error)


Outcome = Literal["registered", "completed", "already_registered"]


@dataclass(frozen=True, slots=True)
class Registration:
    """What the flow registered (or found already registered, ``created=False``).

    ``outcome``: ``registered`` (a new version, alias moved), ``completed`` (a version left
    pending by an interrupted run of the same checkpoint was finished: alias moved, run closed,
    marked complete) or ``already_registered`` (nothing written). ``repairs`` says what this
    run found left behind by interrupted registrations of the model and completed or removed.
    """

    model_name: str
    version: str
    alias: str
    created: bool
    alias_moved: bool
    temperature: float
    gate_threshold: float | None
    gate_coverage: float
    checkpoint_uri: str
    checkpoint_digest: str
    run_id: str | None
    tags: dict[str, str]
    outcome: Outcome = "registered"
    repairs: tuple[str, ...] = ()


# ---------------------------------------------------------------------------- I/O tasks


@task(name="fetch-checkpoint", cache_policy=NO_CACHE, persist_result=False,
      retries=2, retry_delay_seconds=[2, 5], retry_condition_fn=retry_if_transient)
def fetch_checkpoint(checkpoint_uri: str, workdir: Path, registry: MlflowRegistry) -> CheckpointFiles:
    files = download_checkpoint(checkpoint_uri, workdir / "checkpoint", tracking_uri=registry.tracking_uri)
    get_run_logger().info("%s downloaded, digest %s", log_context(checkpoint_uri, None), files.digest)
    return files


@task(name="score-holdout", cache_policy=NO_CACHE, persist_result=False)
def score_holdout(
    files: CheckpointFiles, features: HoldoutFeatures, output: CheckpointOutput | Literal["auto"]
) -> tuple[ScoredSet, CheckpointOutput]:
    logits, kind = checkpoint_logits(files, features.features, output=output)
    scored = ScoredSet.from_arrays(logits, features.labels, ids=features.ids, source=f"{features.source} via {files.uri}")
    return scored, kind


@task(name="score-alias-holder", cache_policy=NO_CACHE, persist_result=False,
      retries=2, retry_delay_seconds=[2, 5], retry_condition_fn=retry_if_transient)
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
        model = registry.load_version_model(model_name, str(holder.version), workdir / "alias-holder")
        predictions = pd.DataFrame(model.predict(features.features))
        predicted = predictions["class"].to_numpy()
        return ChampionScore(version=str(holder.version), accuracy=float(np.mean(predicted == features.labels)))
    if holder.tags.get("holdout_data_version") != holdout_data_version:
        raise StepRefused(
            "acceptance",
            f"{model_name}@{alias} (version {holder.version}) was measured on another holdout, and a scored set "
            "cannot be run through it; pass features_path so both checkpoints are scored on the same holdout",
        )
    return ChampionScore(version=str(holder.version), accuracy=float(holder.tags["holdout_accuracy"]))


# ------------------------------------------------------------------------- step tasks


@task(name="production-reference", cache_policy=NO_CACHE, persist_result=False,
      retries=2, retry_delay_seconds=[2, 5], retry_condition_fn=retry_if_transient)
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
    log = PredictionLog(settings.resolved_prediction_log_url())
    try:
        log.create()
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


@task(name="acceptance", cache_policy=NO_CACHE, persist_result=False)
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


@task(name="refit-temperature", cache_policy=NO_CACHE, persist_result=False)
def refit(
    accepted: AcceptedCheckpoint, settings: ThermostatSettings, reference_labels: NDArray[np.intp] | None
) -> CalibratedCheckpoint:
    calibrated = refit_temperature(accepted, settings=settings, reference_labels=reference_labels)
    fit = calibrated.fit
    get_run_logger().info(
        "%s fitted on calibration n=%d: mean NLL %.4f -> %.4f", log_context(accepted.checkpoint_uri, fit.temperature),
        fit.n, fit.nll_before, fit.nll_after,
    )
    return calibrated


@task(name="resweep-gate", cache_policy=NO_CACHE, persist_result=False)
def gate(calibrated: CalibratedCheckpoint, settings: ThermostatSettings) -> GatedCheckpoint:
    gated = gate_threshold(calibrated, settings=settings)
    choice, context = gated.choice, log_context(calibrated.accepted.checkpoint_uri, gated.temperature)
    if choice.threshold is None:
        get_run_logger().warning("%s no threshold meets the gate target: %s; all predictions go to review",
                                  context, choice.reason)
    else:
        get_run_logger().info("%s gate threshold %.4f: coverage %.3f, accepted accuracy %.4f (lower bound %.4f)",
                              context, choice.threshold, choice.coverage, choice.accepted_accuracy,
                              choice.accuracy_lower_bound)
    get_run_logger().info(
        "%s evaluation n=%d: NLL %.4f -> %.4f (bootstrap %s, [%.4f, %.4f]), ECE %.4f -> %.4f", context,
        gated.after.n, gated.before.nll, gated.after.nll, gated.bootstrap.verdict, gated.bootstrap.low,
        gated.bootstrap.high, gated.before.ece, gated.after.ece,
    )
    return gated


# --------------------------------------------------------------------- register tasks


@task(name="verify-checkpoint", cache_policy=NO_CACHE, persist_result=False)
def verify_checkpoint(gated: GatedCheckpoint, files: CheckpointFiles) -> None:
    """Re-hash the files about to be packaged and check the whole chain against them."""
    verify_chain(gated, checkpoint_digest=digest_directory(files.local_dir))
    if files.uri != gated.accepted.checkpoint_uri:
        raise StepRefused(
            "register", f"the gate result is for {gated.accepted.checkpoint_uri!r}, not for {files.uri!r}"
        )


@task(name="find-registered", cache_policy=NO_CACHE, persist_result=False,
      retries=2, retry_delay_seconds=[2, 5], retry_condition_fn=retry_if_transient)
def find_registered(registry: MlflowRegistry, model_name: str, key: str) -> str | None:
    """The complete version registered with ``key`` (pending ones never answer)."""
    found = registry.find_by_idempotency_key(model_name, key)
    return None if found is None else str(found.version)


def _pending_verdict(registry: MlflowRegistry, version: ModelVersion, aliases: list[str]) -> str | None:
    """Why a pending version must be removed rather than completed (None: complete it).

    It is completed only when its transaction had reached the alias step (an alias points at
    it: the version, its tags and the evidence were all written before), it is READY, its tags
    are a full registration, and its run was not marked FAILED by a rollback.
    """
    if not aliases:
        return "no alias points at it: its run stopped before the alias step"
    if version.status != "READY":
        return f"its status is {version.status}"
    try:
        registered_version(version.name, str(version.version), dict(version.tags), aliases)
    except ValueError as error:
        return str(error)
    if version.run_id and registry.run_state(str(version.run_id)) in ("FAILED", "KILLED", "MISSING"):
        return f"its run {version.run_id} was marked failed or deleted by a rollback"
    return None


@task(name="recover-interrupted-registrations", cache_policy=NO_CACHE, persist_result=False)
def recover_interrupted(registry: MlflowRegistry, model_name: str) -> tuple[str, ...]:
    """Finish or remove what interrupted registrations of ``model_name`` left; say what was done.

    Called under the model's lock, so no registration of the model is live: every ``pending``
    version and every registration run still RUNNING was left by a run that died (a crash, a
    killed worker, an MLflow server that went away after committing). For each pending version:

    * an alias points at it → **completed**: its run is closed FINISHED and it is marked
      complete (the alias move was the last step before those two; the version's tags and
      evidence were written before it);
    * otherwise → **removed**: the version is deleted and its run marked FAILED (a re-run of
      the same checkpoint registers it afresh).

    Then every registration run of the model still RUNNING (a run that died before creating its
    version, or a run duplicated by an HTTP retry of its creation) is marked FAILED.
    """
    repairs: list[str] = []
    logger = get_run_logger()
    aliases = registry.aliases(model_name)
    kept_runs: set[str] = set()
    for version in registry.versions(model_name):
        if version.tags.get(REGISTRATION_TAG) != REGISTRATION_PENDING:
            continue
        number, run_id = str(version.version), None if version.run_id is None else str(version.run_id)
        pointing = sorted(alias for alias, held in aliases.items() if held == number)
        reason = _pending_verdict(registry, version, pointing)
        if reason is None:
            if run_id is not None and registry.run_state(run_id) == "RUNNING":
                registry.end_run(run_id)
            registry.mark_complete(model_name, number)
            if run_id is not None:
                kept_runs.add(run_id)
            repairs.append(f"completed version {number} (@{', @'.join(pointing)} already on it) left pending by an "
                           f"interrupted registration: run {run_id} closed FINISHED, version marked complete")
        else:
            registry.delete_version(model_name, number)
            if run_id is not None and registry.run_state(run_id) == "RUNNING":
                registry.end_run(run_id, failed=True)
            unset = f"; @{', @'.join(pointing)} pointed at it and is now unset" if pointing else ""
            repairs.append(f"removed version {number} left pending by an interrupted registration ({reason}); "
                           f"run {run_id} marked FAILED{unset}")
    for run in registry.open_runs(model_name):
        if run.info.run_id not in kept_runs:
            registry.end_run(run.info.run_id, failed=True)
            repairs.append(f"marked run {run.info.run_id} FAILED: left RUNNING by an interrupted registration "
                           "that created no version")
    for repair in repairs:
        logger.warning("%s: %s", model_name, repair)
    return tuple(repairs)


def _hook_registry(txn: Transaction) -> MlflowRegistry:
    tracking_uri, registry_uri = txn.get("tracking_uri"), txn.get("registry_uri")
    return MlflowRegistry(tracking_uri, registry_uri=registry_uri)


def _remember(registry: MlflowRegistry, context: str, **values: Any) -> None:
    txn = get_transaction()
    if txn is None:  # called outside a transaction (unit tests): nothing to undo later
        return
    txn.set("tracking_uri", registry.tracking_uri)
    txn.set("registry_uri", registry.registry_uri)
    txn.set("context", context)
    for key, value in values.items():
        txn.set(key, value)


# No task retries inside the transaction: Prefect would run the rollback hooks before the retry.
# Idempotent MLflow calls are retried in place by the adapter instead; creating a run or a
# version is never repeated by Thermostat (see create_version for the HTTP layer's repeats).


@task(name="open-run", cache_policy=NO_CACHE, persist_result=False)
def open_run(registry: MlflowRegistry, gated: GatedCheckpoint, model_name: str, key: str) -> str:
    context = log_context(gated.accepted.checkpoint_uri, gated.temperature)
    run_id = registry.start_run(
        f"post-finetune {model_name}",
        {"thermostat.model_name": model_name, "checkpoint_uri": gated.accepted.checkpoint_uri,
         "checkpoint_digest": gated.checkpoint_digest, "temperature": repr(gated.temperature),
         IDEMPOTENCY_TAG: key},
    )
    _remember(registry, context, run_id=run_id)
    # MLflow's HTTP client repeats a POST that got a 5xx, possibly after the server committed it:
    # under the model's lock, any other registration run of the model still RUNNING is such a copy.
    for duplicate in registry.open_runs(model_name):
        if duplicate.info.run_id != run_id:
            registry.end_run(duplicate.info.run_id, failed=True)
            get_run_logger().warning("%s run %s is a copy of run %s made by an HTTP retry: marked FAILED", context,
                                     duplicate.info.run_id, run_id)
    get_run_logger().info("%s MLflow run %s", context, run_id)
    return run_id


@open_run.on_rollback
def _fail_run(txn: Transaction) -> None:
    _hook_registry(txn).end_run(txn.get("run_id"), failed=True)
    get_logger("thermostat").warning("%s rolled back: MLflow run %s marked FAILED", txn.get("context"), txn.get("run_id"))


@task(name="record-evidence", cache_policy=NO_CACHE, persist_result=False)
def record_evidence(registry: MlflowRegistry, run_id: str, gated: GatedCheckpoint) -> None:
    """Params, metrics, and the reliability diagram, gate sweep and qualification report."""
    calibrated = gated.calibrated
    registry.log_params(run_id, run_params(gated))
    registry.log_metrics(run_id, run_metrics(gated))
    registry.log_figure(run_id, reliability_figure(gated), "evidence/reliability_diagram.png")
    registry.log_table(run_id, sweep_frame(gated.sweep), "evidence/gate_sweep.csv")
    registry.log_json(run_id, qualification_payload(calibrated.qualification), "evidence/qualification_report.json")
    registry.log_json(
        run_id,
        {"calibration_ids": calibrated.calibration_ids.tolist(), "evaluation_ids": calibrated.evaluation_ids.tolist(),
         "calibration_data_version": calibrated.calibration_data_version},
        "evidence/split_ids.json",
    )


@task(name="create-version", cache_policy=NO_CACHE, persist_result=False)
def create_version(
    registry: MlflowRegistry, run_id: str, gated: GatedCheckpoint, files: CheckpointFiles, model_name: str, key: str,
    extra_tags: dict[str, str] | None = None,
) -> str:
    context = log_context(gated.accepted.checkpoint_uri, gated.temperature)
    source = registry.log_calibrated_model(
        run_id, checkpoint_dir=files.local_dir, n_classes=gated.accepted.holdout.n_classes,
        model_config={"temperature": gated.temperature, "gate_threshold": gated.choice.threshold,
                      "checkpoint_output": gated.accepted.checkpoint_output},
    )
    try:
        version = registry.create_version(
            model_name, source=source, run_id=run_id,
            tags=version_tags(gated, idempotency_key=key, run_id=run_id) | (extra_tags or {}),
        )
    except Exception:
        # The server may have committed a version before the error reached us (a lost reply):
        # remember the key so that the rollback removes whatever carries it.
        _remember(registry, context, model_name=model_name, key=key, version=None)
        raise
    number = str(version.version)
    _remember(registry, context, model_name=model_name, key=key, version=number)
    # Find-or-create, reconciled after the fact: MLflow's HTTP client repeats this POST on a 5xx
    # (e.g. a proxy timing out after forwarding it), so the server may hold one copy per attempt,
    # all with our key and all pending. Under the model's lock no other run creates versions of
    # the model, and recover_interrupted left no pending version before the transaction: every
    # pending version with our key but another number is such a copy. Keep the one the server
    # answered with and delete the others before the alias moves, so nothing points at them.
    for copy in registry.versions_with_key(model_name, key):
        if str(copy.version) != number and copy.tags.get(REGISTRATION_TAG) == REGISTRATION_PENDING:
            registry.delete_version(model_name, str(copy.version))
            get_run_logger().warning("%s version %s was a copy of version %s made by an HTTP retry of the create "
                                     "call: deleted", context, copy.version, number)
    get_run_logger().info("%s registered %s version %s (pending until the alias moves and the run closes)",
                          context, model_name, number)
    return number


@create_version.on_rollback
def _delete_version(txn: Transaction) -> None:
    registry, name, key = _hook_registry(txn), txn.get("model_name"), txn.get("key")
    numbers = {str(v.version) for v in registry.versions_with_key(name, key)
               if v.tags.get(REGISTRATION_TAG) == REGISTRATION_PENDING}
    if txn.get("version") is not None:
        numbers.add(txn.get("version"))
    for number in sorted(numbers, key=int):
        registry.delete_version(name, number)
        get_logger("thermostat").warning("%s rolled back: deleted %s version %s", txn.get("context"), name, number)


@task(name="move-alias", cache_policy=NO_CACHE, persist_result=False)
def move_alias(registry: MlflowRegistry, model_name: str, alias: str, version: str, context: str) -> str | None:
    """Point ``alias`` at ``version``; returns the version it held before (None: unset)."""
    previous = registry.alias_holder(model_name, alias)
    previous_version = None if previous is None else str(previous.version)
    _remember(registry, context, model_name=model_name, alias=alias, previous_version=previous_version)
    registry.set_alias(model_name, alias, version)
    get_run_logger().info("%s %s@%s -> version %s (was %s)", context, model_name, alias, version, previous_version)
    return previous_version


@move_alias.on_rollback
def _restore_alias(txn: Transaction) -> None:
    registry, name, alias, previous = _hook_registry(txn), txn.get("model_name"), txn.get("alias"), txn.get("previous_version")
    if previous is None:
        registry.delete_alias(name, alias)
    else:
        registry.set_alias(name, alias, previous)
    get_logger("thermostat").warning("%s rolled back: %s@%s restored to %s", txn.get("context"), name, alias, previous)


@task(name="close-run", cache_policy=NO_CACHE, persist_result=False)
def close_run(registry: MlflowRegistry, run_id: str) -> None:
    registry.end_run(run_id)


@task(name="mark-complete", cache_policy=NO_CACHE, persist_result=False)
def mark_complete(registry: MlflowRegistry, model_name: str, version: str, context: str) -> None:
    """The commit point: from now on the version answers idempotency look-ups."""
    registry.mark_complete(model_name, version)
    get_run_logger().info("%s %s version %s complete", context, model_name, version)


def register(
    gated: GatedCheckpoint, files: CheckpointFiles, *, registry: MlflowRegistry, model_name: str, alias: str,
    settings: ThermostatSettings, extra_tags: dict[str, str] | None = None, lease: ModelLease | None = None,
    repairs: tuple[str, ...] = (),
) -> Registration:
    """Step 4: register ``gated`` as a new version and move ``alias`` — all or nothing.

    Only a :class:`GatedCheckpoint` is accepted, and its digest chain is re-verified against
    the checkpoint files being packaged. A repeat (same idempotency key) registers nothing.
    ``extra_tags`` (a refit's provenance and verification) are added to the version's tags.
    Call it under the model's lock (``lease``, checked before anything is written) after
    :func:`recover_interrupted`, whose ``repairs`` the result reports.
    """
    if not isinstance(gated, GatedCheckpoint):
        raise TypeError(
            f"register takes the GatedCheckpoint of the gate step, got {type(gated).__name__}; "
            "run acceptance, refit and gate first"
        )
    context = log_context(gated.accepted.checkpoint_uri, gated.temperature)
    verify_checkpoint(gated, files)
    key = idempotency_key(gated, settings)
    existing = find_registered(registry, model_name, key)
    if existing is not None:
        version = registry.get_version(model_name, existing)
        completed_now = any(repair.startswith(f"completed version {existing} ") for repair in repairs)
        get_run_logger().info(
            "%s already registered as %s version %s (same checkpoint, calibration data and settings)%s: "
            "nothing registered, alias %r not moved", context, model_name, existing,
            ", its interrupted registration completed now" if completed_now else "", alias,
        )
        return _registration(gated, model_name, existing, alias, created=False, alias_moved=False,
                             run_id=version.run_id, tags=dict(version.tags),
                             outcome="completed" if completed_now else "already_registered", repairs=repairs)
    if lease is not None:
        lease.check()
    with transaction():
        run_id = open_run(registry, gated, model_name, key)
        record_evidence(registry, run_id, gated)
        version_id = create_version(registry, run_id, gated, files, model_name, key, extra_tags)
        move_alias(registry, model_name, alias, version_id, context)
        close_run(registry, run_id)
        mark_complete(registry, model_name, version_id, context)
    tags = dict(registry.get_version(model_name, version_id).tags)
    return _registration(gated, model_name, version_id, alias, created=True, alias_moved=True, run_id=run_id, tags=tags,
                         outcome="registered", repairs=repairs)


def _registration(
    gated: GatedCheckpoint, model_name: str, version: str, alias: str, *, created: bool, alias_moved: bool,
    run_id: str | None, tags: dict[str, str], outcome: Outcome, repairs: tuple[str, ...],
) -> Registration:
    return Registration(
        model_name=model_name, version=version, alias=alias, created=created, alias_moved=alias_moved,
        temperature=gated.temperature, gate_threshold=gated.choice.threshold, gate_coverage=gated.choice.coverage,
        checkpoint_uri=gated.accepted.checkpoint_uri, checkpoint_digest=gated.checkpoint_digest, run_id=run_id,
        tags=tags, outcome=outcome, repairs=repairs,
    )


# ------------------------------------------------------------------------------- flow


def _training_ids(training_ids: list[str] | None, training_ids_path: str | None) -> NDArray[np.str_]:
    if (training_ids is None) == (training_ids_path is None):
        raise ValueError("pass exactly one of training_ids (a list) and training_ids_path (one id per line)")
    return read_ids(training_ids_path) if training_ids_path is not None else np.asarray(training_ids, dtype=str)


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
    """Acceptance → refit T → re-sweep gate → register, for one fine-tuned checkpoint.

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
    alias : the serving alias to move (``champion``, ``multilingual``, ...).
    reference_labels : recent production labels for the class-mix qualification check; by
        default the labelled traffic of the alias holder in the last ``monitor_window`` from
        the prediction log (none: the qualification report says the check was not run).
    settings : defaults to ``ThermostatSettings()`` read from the environment, here, once.
    """
    settings = settings if settings is not None else ThermostatSettings()
    validate_model_name(model_name)
    if (features_path is None) == (holdout_path is None):
        raise ValueError("pass exactly one of features_path and holdout_path")
    if holdout_path is not None and checkpoint_output == "auto":
        raise ValueError("with holdout_path, set checkpoint_output to 'logits' or 'probabilities' (what the "
                         "checkpoint's predict returns), so the registered model converts its output the same way")
    train_ids = _training_ids(training_ids, training_ids_path)
    references = None if reference_labels is None else np.asarray(reference_labels, dtype=np.intp)
    registry = MlflowRegistry.from_settings(settings)
    with model_lock(model_name, url=settings.resolved_prediction_log_url(), timeout_seconds=settings.lock_timeout_seconds,
                    description=f"post-finetune of {checkpoint_uri}") as lease, \
            tempfile.TemporaryDirectory(prefix="thermostat-") as tmp:
        repairs = recover_interrupted(registry, model_name)
        workdir = Path(tmp)
        files = fetch_checkpoint(checkpoint_uri, workdir, registry)
        features = read_features(features_path) if features_path is not None else None
        if features is not None:
            holdout, output = score_holdout(files, features, checkpoint_output)
        else:
            assert holdout_path is not None and checkpoint_output != "auto"  # narrowed by the checks above
            holdout, output = read_scored_set(holdout_path), checkpoint_output
        champion = score_alias_holder(registry, model_name, alias, workdir, features, holdout, data_version(holdout.ids))
        accepted = acceptance(files, holdout, output, train_ids, champion, train_steps, train_data_version, settings)
        if references is None:
            references = production_reference(registry, model_name, alias, settings)
        calibrated = refit(accepted, settings, references)
        gated = gate(calibrated, settings)
        return register(gated, files, registry=registry, model_name=model_name, alias=alias, settings=settings,
                        lease=lease, repairs=repairs)
