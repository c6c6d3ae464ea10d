"""Registration as a recoverable state machine, shared by ``post_finetune`` and ``refit``.

Registration of a gated checkpoint runs in a Prefect ``transaction()`` under the model's lock
(:mod:`flows.orchestration.locks`), and every state a crash can leave is recognised and finished by the next
run of the model (:func:`recover_interrupted`):

1. open the run (tagged with the idempotency key) and record the evidence;
2. create the version, tagged ``thermostat.registration=pending`` with all its other tags in
   the same call, and write its description (T with its interval, the gate threshold, the
   verdict, the evidence run: what MLflow's version page shows first);
3. point the alias at it;
4. close the run FINISHED;
5. tag the version ``thermostat.registration=complete`` — the commit point: only complete
   versions answer an idempotency look-up.

When a step finally fails, the rollback hooks put the alias back, delete the version and mark
the run FAILED. A transient error is retried in place by the MLflow adapter, inside the step
(Prefect runs the rollback hooks *before* a task's own retries, so task retries would roll back
first and then retry on a deleted version).

Every write — the steps', the undo of a failed step's own part and the rollback hooks' — goes
through the adapter fenced by the model's lease (:meth:`flows.registry.adapter.MlflowRegistry.fenced`):
a run that lost the lease (paused or cut off past its write budget, or taken over) writes
nothing more, not even its rollback, which would undo the work of the run that holds the model
now. It is left as a crash leaves it, and that run's :func:`recover_interrupted` finishes or
removes it.
"""

from __future__ import annotations

import math

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Literal

from prefect import get_run_logger
from prefect.logging import get_logger
from prefect.transactions import Transaction, get_transaction, transaction

from flows.registry.checkpoint import CheckpointFiles, digest_directory
from flows.orchestration.locks import LockLostError
from flows.registry.adapter import IDEMPOTENCY_TAG, REGISTRATION_PENDING, REGISTRATION_TAG, MlflowRegistry
from flows.records.evidence import RunEvidence
from flows.records.descriptions import version_description
from flows.records.outcomes import FlowSummary, interval_text
from flows.records.runs import VERSION_DRIFT_TAG_PREFIX, DriftCause
from flows.records.stored import StoredVersion
from flows.pipelines.reports import log_context, registration_evidence, version_record
from flows.settings import ThermostatSettings
from flows.pipelines.steps import GatedCheckpoint, RefitVerification, StepRefused, idempotency_key, verify_chain
from flows.pipelines.tasks import io_task, step_task
from flows.records.versions import (
    ALIAS_TAG,
    PREVIOUS_ALIAS_VERSION_TAG,
    RegisteredFor,
    VersionRecord,
    registered_version,
)

__all__ = ["ALIAS_TAG", "PREVIOUS_ALIAS_VERSION_TAG", "Outcome", "Registration", "recover_interrupted", "register",
           "register_derived"]


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

    @property
    def record(self) -> VersionRecord:
        """The version's record, read back from its tags."""
        return VersionRecord.from_tags(self.tags, where=f"{self.model_name} version {self.version}")

    @property
    def model_uri(self) -> str:
        """What serves exactly this version: ``models:/NAME/VERSION`` (an alias moves, this does not)."""
        return f"models:/{self.model_name}/{self.version}"

    def summary(self, flow: str = "post-finetune") -> FlowSummary:
        """The run's outcome in one line and a few JSON figures (:class:`flows.records.outcomes.FlowSummary`)."""
        record = self.record
        threshold = "none" if self.gate_threshold is None else f"{self.gate_threshold:.4f}"
        figures = (f"T={self.temperature:.4g}{interval_text(record.temperature_interval)}, gate threshold {threshold}")
        moved = RegisteredFor.from_tags(self.tags)
        if self.outcome == "already_registered":
            message = (f"already registered as {self.model_name} version {self.version} ({self.model_uri}; same "
                       f"checkpoint, calibration data and settings): {figures}; nothing registered, @{self.alias} not moved")
        else:
            what = "registered" if self.outcome == "registered" else "completed (left pending by an interrupted run)"
            was = ("" if moved is None else f" from version {moved.previous_version}" if moved.previous_version
                   else " (it pointed at no version)")
            message = f"{what} {self.model_name} version {self.version} ({self.model_uri}): {figures}; @{self.alias} moved{was}"
        return FlowSummary.of(
            flow, self.outcome, message, model_name=self.model_name, version=self.version, model_uri=self.model_uri,
            alias=self.alias, alias_moved=self.alias_moved, temperature=self.temperature,
            temperature_interval=record.temperature_interval, gate_threshold=self.gate_threshold,
            checkpoint_uri=self.checkpoint_uri, run_id=self.run_id)


@step_task(name="verify-checkpoint")
def verify_checkpoint(gated: GatedCheckpoint, files: CheckpointFiles) -> None:
    """Re-hash the files about to be packaged and check the whole chain against them."""
    verify_chain(gated, checkpoint_digest=digest_directory(files.local_dir))
    if files.uri != gated.accepted.checkpoint_uri:
        raise StepRefused(
            "register", f"the gate result is for {gated.accepted.checkpoint_uri!r}, not for {files.uri!r}"
        )


@io_task(name="find-registered")
def find_registered(registry: MlflowRegistry, model_name: str, key: str) -> str | None:
    """The complete version registered with ``key`` (pending ones never answer)."""
    found = registry.find_by_idempotency_key(model_name, key)
    return None if found is None else found.version


def _pending_verdict(registry: MlflowRegistry, version: StoredVersion, aliases: list[str]) -> str | None:
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
        registered_version(version.name, version.version, version.tags, aliases)
    except ValueError as error:
        return str(error)
    if version.run_id and registry.run_state(version.run_id) in ("FAILED", "KILLED", "MISSING"):
        return f"its run {version.run_id} was marked failed or deleted by a rollback"
    return None


@step_task(name="recover-interrupted-registrations")
def recover_interrupted(registry: MlflowRegistry, model_name: str) -> tuple[str, ...]:
    """Finish or remove what interrupted registrations of ``model_name`` left; say what was done.

    Called under the model's lock, with ``registry`` fenced by its lease, so no other registration
    of the model can write: every ``pending`` version and every registration run still RUNNING
    was left by a run that died (a crash, a killed worker, an MLflow server that went away after
    committing) or lost its lease (paused or cut off past its write budget: it writes nothing
    more, not even its rollback). For each pending version:

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
        number, run_id = version.version, version.run_id
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
            given_back = _give_alias_back(registry, model_name, version.tags, pointing)
            repairs.append(f"removed version {number} left pending by an interrupted registration ({reason}); "
                           f"run {run_id} marked FAILED{given_back}")
    for run in registry.open_runs(model_name):
        if run.run_id not in kept_runs:
            registry.end_run(run.run_id, failed=True)
            repairs.append(f"marked run {run.run_id} FAILED: left RUNNING by an interrupted registration "
                           "that created no version")
    for repair in repairs:
        logger.warning("%s: %s", model_name, repair)
    return tuple(repairs)


def _undo_unless_lost(undo: Callable[[], object], what: str) -> None:
    """Run a rollback's ``undo``; with the lease lost it writes nothing (the fenced adapter refuses)
    and this says so, since the run that holds the model now owns what this run left."""
    try:
        undo()
    except LockLostError as error:
        get_logger("thermostat").warning("%s not rolled back: %s", what, error)


@contextmanager
def _undone_on_failure(undo: Callable[[], object], what: str) -> Iterator[None]:
    """Undo a step's own partial work when the step fails, then re-raise.

    Prefect stages a task's rollback hooks only when the task *succeeds*: a step that fails
    half-way (a reply lost after the server applied the call, then every retry failing) must
    undo what it did itself; the hooks of the steps before it still run. Best effort: what
    cannot be undone now is left pending, and the next run of the model removes it
    (:func:`recover_interrupted`).
    """
    try:
        yield
    except BaseException:
        try:
            _undo_unless_lost(undo, what)
        except Exception:  # noqa: BLE001 - the original error is the one to raise
            get_logger("thermostat").warning("could not undo %s; the next run of the model finishes it", what,
                                             exc_info=True)
        raise


def _give_alias_back(registry: MlflowRegistry, name: str, tags: Mapping[str, str], pointing: list[str]) -> str:
    """After a removed pending version: its alias back on the version it held before (recorded
    with the version), when that version still exists; says what was done."""
    if not pointing:
        return ""
    moved = RegisteredFor.from_tags(tags)
    if moved is not None and moved.alias in pointing and moved.previous_version is not None and any(
            v.version == moved.previous_version for v in registry.versions(name)):
        registry.set_alias(name, moved.alias, moved.previous_version)
        return f"; @{moved.alias} is back on version {moved.previous_version}"
    return f"; @{', @'.join(pointing)} pointed at it and is now unset"


def _hook_registry(txn: Transaction) -> MlflowRegistry:
    """The adapter of a rollback hook, fenced like the step's (the same lease)."""
    tracking_uri, registry_uri = txn.get("tracking_uri"), txn.get("registry_uri")
    return MlflowRegistry(tracking_uri, registry_uri=registry_uri, fence=txn.get("fence"))


def _roll_back(txn: Transaction, undo: Callable[..., object], keys: Sequence[str], what: str) -> None:
    """A rollback hook's work: ``undo`` on the hook's adapter with the values the step remembered
    under ``keys`` (:func:`_remember`), unless the lease is lost; ``what`` names what it undoes."""
    _undo_unless_lost(lambda: undo(_hook_registry(txn), *(txn.get(key) for key in keys)),
                      f"{txn.get('context')} {what}")


def _remember(registry: MlflowRegistry, context: str, **values: Any) -> None:
    txn = get_transaction()
    if txn is None:  # called outside a transaction (unit tests): nothing to undo later
        return
    txn.set("tracking_uri", registry.tracking_uri)
    txn.set("registry_uri", registry.registry_uri)
    txn.set("fence", registry.fence)  # the lease itself: it is never copied (ModelLease.__deepcopy__)
    txn.set("context", context)
    for key, value in values.items():
        txn.set(key, value)


# No task retries inside the transaction: Prefect would run the rollback hooks before the retry.
# Idempotent MLflow calls are retried in place by the adapter instead; creating a run or a
# version is never repeated by Thermostat (see create_version for the HTTP layer's repeats).


@step_task(name="open-run")
def open_run(registry: MlflowRegistry, record: VersionRecord, model_name: str, key: str,
             run_name: str = "post-finetune") -> str:
    """The registration's run, tagged with the model, the checkpoint and the idempotency key (what
    :func:`recover_interrupted` finds an interrupted registration's run by)."""
    context = log_context(record.checkpoint_uri, record.temperature)
    run_id = registry.start_run(
        f"{run_name} {model_name}",
        {"thermostat.model_name": model_name, "checkpoint_uri": record.checkpoint_uri,
         "checkpoint_digest": record.checkpoint_digest, IDEMPOTENCY_TAG: key},
    )
    _remember(registry, context, run_id=run_id)
    # MLflow's HTTP client repeats a POST that got a 5xx, possibly after the server committed it:
    # under the model's lock, any other registration run of the model still RUNNING is such a copy.
    with _undone_on_failure(lambda: registry.end_run(run_id, failed=True), f"run {run_id}"):
        for duplicate in registry.open_runs(model_name):
            if duplicate.run_id != run_id:
                registry.end_run(duplicate.run_id, failed=True)
                get_run_logger().warning("%s run %s is a copy of run %s made by an HTTP retry: marked FAILED", context,
                                         duplicate.run_id, run_id)
    get_run_logger().info("%s MLflow run %s", context, run_id)
    return run_id


def _mark_failed(registry: MlflowRegistry, run_id: str, context: str) -> None:
    registry.end_run(run_id, failed=True)
    get_logger("thermostat").warning("%s rolled back: MLflow run %s marked FAILED", context, run_id)


@open_run.on_rollback
def _fail_run(txn: Transaction) -> None:
    _roll_back(txn, _mark_failed, ("run_id", "context"), f"MLflow run {txn.get('run_id')}")


@step_task(name="record-evidence")
def record_evidence(registry: MlflowRegistry, run_id: str, evidence: RunEvidence) -> None:
    """The run's evidence (built before the transaction, without I/O), written in one call."""
    registry.log_evidence(run_id, evidence)


@step_task(name="create-version")
def create_version(
    registry: MlflowRegistry, run_id: str, record: VersionRecord, files: CheckpointFiles, n_classes: int,
    model_name: str, alias: str, cause: DriftCause = DriftCause(), extra_tags: Mapping[str, str] | None = None,
) -> str:
    """The version, with its record as tags (and the alias it is for, with that alias's holder
    now, for a refit the drift check that started it, and ``extra_tags``: a prior correction's
    provenance) and the record's T, threshold and prior correction in the pyfunc's config."""
    context, key = log_context(record.checkpoint_uri, record.temperature), record.idempotency_key
    source = registry.log_calibrated_model(run_id, checkpoint_dir=files.local_dir, n_classes=n_classes,
                                           model_config=record.model_config())
    holder = registry.alias_holder(model_name, alias)
    # The alias this registration moves and who held it, with the version (in the create call), so
    # that recovery can give the alias back when it removes the version.
    moved = RegisteredFor(alias=alias, previous_version=None if holder is None else holder.version)
    tags = record.to_tags() | moved.to_tags() | cause.to_tags(VERSION_DRIFT_TAG_PREFIX) | dict(extra_tags or {})
    # The server may commit a version whose reply never arrives: whatever carries our key and is
    # still pending is removed when this step fails (its own rollback hook would not run).
    with _undone_on_failure(lambda: _delete_pending(registry, model_name, key, context), f"versions with key {key}"):
        version = registry.create_version(model_name, source=source, run_id=run_id, tags=tags)
        number = version.version
        _remember(registry, context, model_name=model_name, key=key, version=number)
    # Find-or-create, reconciled after the fact: MLflow's HTTP client repeats this POST on a 5xx
    # (e.g. a proxy timing out after forwarding it), so the server may hold one copy per attempt,
    # all with our key and all pending. Under the model's lock no other run creates versions of
    # the model, and recover_interrupted left no pending version before the transaction: every
    # pending version with our key but another number is such a copy. Keep the one the server
    # answered with and delete the others before the alias moves, so nothing points at them.
        for copy in registry.versions_with_key(model_name, key):
            if copy.version != number and copy.tags.get(REGISTRATION_TAG) == REGISTRATION_PENDING:
                registry.delete_version(model_name, copy.version)
                get_run_logger().warning("%s version %s was a copy of version %s made by an HTTP retry of the "
                                         "create call: deleted", context, copy.version, number)
    get_run_logger().info("%s registered %s version %s (pending until the alias moves and the run closes)",
                          context, model_name, number)
    return number


def _delete_pending(registry: MlflowRegistry, name: str, key: str, context: str, version: str | None = None) -> None:
    """Delete every pending version carrying ``key`` (and ``version``): a registration's undo."""
    numbers = {v.version for v in registry.versions_with_key(name, key)
               if v.tags.get(REGISTRATION_TAG) == REGISTRATION_PENDING}
    if version is not None:
        numbers.add(version)
    for number in sorted(numbers, key=int):
        registry.delete_version(name, number)
        get_logger("thermostat").warning("%s rolled back: deleted %s version %s", context, name, number)


@create_version.on_rollback
def _delete_version(txn: Transaction) -> None:
    _roll_back(txn, _delete_pending, ("model_name", "key", "context", "version"),
               f"{txn.get('model_name')} version {txn.get('version')}")


@step_task(name="describe-version")
def describe_version(registry: MlflowRegistry, model_name: str, version: str, record: VersionRecord, run_id: str,
                     ui_url: str | None) -> None:
    """The version's MLflow description (:func:`flows.records.descriptions.version_description`: T with
    its interval, the gate threshold, the verdict, the evidence run), written while it is pending:
    a version whose alias moved always has one. Its undo is the version's."""
    # Without a configured UI address the link stays within the MLflow UI showing it (it routes on the fragment).
    link = registry.run_url(run_id, ui_url) if ui_url else str(registry.run_url(run_id, "")).lstrip("/")
    registry.describe_version(model_name, version, version_description(record, run_id=run_id, run_link=link))


@step_task(name="move-alias")
def move_alias(registry: MlflowRegistry, model_name: str, alias: str, version: str, context: str) -> str | None:
    """Point ``alias`` at ``version``; returns the version it held before (None: unset)."""
    previous = registry.alias_holder(model_name, alias)
    previous_version = None if previous is None else previous.version
    _remember(registry, context, model_name=model_name, alias=alias, previous_version=previous_version)
    with _undone_on_failure(lambda: _put_alias_back(registry, model_name, alias, previous_version, context),
                            f"{model_name}@{alias}"):
        registry.set_alias(model_name, alias, version)
    get_run_logger().info("%s %s@%s -> version %s (was %s)", context, model_name, alias, version, previous_version)
    return previous_version


def _put_alias_back(registry: MlflowRegistry, name: str, alias: str, previous: str | None, context: str) -> None:
    if previous is None:
        registry.delete_alias(name, alias)
    else:
        registry.set_alias(name, alias, previous)
    get_logger("thermostat").warning("%s rolled back: %s@%s restored to %s", context, name, alias, previous)


@move_alias.on_rollback
def _restore_alias(txn: Transaction) -> None:
    _roll_back(txn, _put_alias_back, ("model_name", "alias", "previous_version", "context"),
               f"{txn.get('model_name')}@{txn.get('alias')}")


@step_task(name="close-run")
def close_run(registry: MlflowRegistry, run_id: str) -> None:
    registry.end_run(run_id)


@step_task(name="mark-complete")
def mark_complete(registry: MlflowRegistry, model_name: str, version: str, context: str) -> None:
    """The commit point: from now on the version answers idempotency look-ups."""
    registry.mark_complete(model_name, version)
    get_run_logger().info("%s %s version %s complete", context, model_name, version)


def register(
    gated: GatedCheckpoint, files: CheckpointFiles, *, registry: MlflowRegistry, model_name: str, alias: str,
    settings: ThermostatSettings, verification: RefitVerification | None = None, repairs: tuple[str, ...] = (),
) -> Registration:
    """Step 4: register ``gated`` as a new version and move ``alias`` — all or nothing.

    Only a :class:`GatedCheckpoint` is accepted, and its digest chain is re-verified against
    the checkpoint files being packaged. A repeat (same idempotency key) registers nothing.
    A refit passes its ``verification``: its version's record then carries the refit's provenance.
    Call it under the model's lock, with ``registry`` fenced by its lease (``registry.fenced(lease)``:
    checked right before every write, rollbacks included), after :func:`recover_interrupted`,
    whose ``repairs`` the result reports.
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
    # The record's run id is filled in once the run exists; what open_run and the evidence read is known before.
    draft = version_record(gated, idempotency_key=key, run_id="", verification=verification)
    evidence = registration_evidence(gated, draft)
    with transaction():
        run_id = open_run(registry, draft, model_name, key)
        record = replace(draft, pipeline_run_id=run_id)
        record_evidence(registry, run_id, evidence)
        origin = gated.accepted.refit_of
        version_id = create_version(registry, run_id, record, files, gated.accepted.holdout.n_classes, model_name,
                                    alias, DriftCause() if origin is None else origin.cause)
        describe_version(registry, model_name, version_id, record, run_id, settings.resolved_mlflow_ui_url())
        move_alias(registry, model_name, alias, version_id, context)
        close_run(registry, run_id)
        mark_complete(registry, model_name, version_id, context)
    tags = dict(registry.get_version(model_name, version_id).tags)
    return _registration(gated, model_name, version_id, alias, created=True, alias_moved=True, run_id=run_id, tags=tags,
                         outcome="registered", repairs=repairs)


def register_derived(
    record: VersionRecord, files: CheckpointFiles, *, registry: MlflowRegistry, model_name: str, alias: str,
    n_classes: int, run_name: str, evidence: Mapping[str, Any], extra_tags: Mapping[str, str],
    repairs: tuple[str, ...] = (), ui_url: str | None = None,
) -> Registration:
    """Register ``record`` — a version derived from a registered one without a new fit (same
    checkpoint and T, e.g. a prior correction) — and move ``alias``, all or nothing: the same
    transaction, steps, rollbacks and idempotency look-up as :func:`register`.

    ``record.idempotency_key`` identifies it (a repeat registers nothing); ``files`` are the
    checkpoint's, whose digest must be the record's; ``ui_url`` the MLflow UI its description links to. Call it under the model's lock, with
    ``registry`` fenced by its lease, after :func:`recover_interrupted`.
    """
    context = log_context(record.checkpoint_uri, record.temperature)
    if digest_directory(files.local_dir) != record.checkpoint_digest or files.uri != record.checkpoint_uri:
        raise StepRefused("register", f"the files of {files.uri!r} are not the checkpoint {record.checkpoint_uri!r} "
                                      f"with digest {record.checkpoint_digest[:12]}; nothing registered")
    key = record.idempotency_key
    existing = find_registered(registry, model_name, key)
    if existing is not None:
        version = registry.get_version(model_name, existing)
        get_run_logger().info("%s already registered as %s version %s: nothing registered, alias %r not moved",
                              context, model_name, existing, alias)
        return _derived(record, model_name, existing, alias, created=False, run_id=version.run_id,
                        tags=dict(version.tags), repairs=repairs)
    with transaction():
        run_id = open_run(registry, record, model_name, key, run_name)
        record = replace(record, pipeline_run_id=run_id)
        # What the version changes of its parent, and how it was verified.
        documents = {f"evidence/{run_name.replace(' ', '_')}.json": dict(evidence)}
        record_evidence(registry, run_id, RunEvidence(documents=documents))
        version_id = create_version(registry, run_id, record, files, n_classes, model_name, alias,
                                    extra_tags=extra_tags)
        describe_version(registry, model_name, version_id, record, run_id, ui_url)
        move_alias(registry, model_name, alias, version_id, context)
        close_run(registry, run_id)
        mark_complete(registry, model_name, version_id, context)
    tags = dict(registry.get_version(model_name, version_id).tags)
    return _derived(record, model_name, version_id, alias, created=True, run_id=run_id, tags=tags, repairs=repairs)


def _derived(record: VersionRecord, model_name: str, version: str, alias: str, *, created: bool, run_id: str | None,
             tags: dict[str, str], repairs: tuple[str, ...]) -> Registration:
    return Registration(
        model_name=model_name, version=version, alias=alias, created=created, alias_moved=created,
        temperature=record.temperature, gate_threshold=record.gate_threshold,
        gate_coverage=math.nan if record.gate_coverage is None else record.gate_coverage,
        checkpoint_uri=record.checkpoint_uri, checkpoint_digest=record.checkpoint_digest, run_id=run_id, tags=tags,
        outcome="registered" if created else "already_registered", repairs=repairs,
    )


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
