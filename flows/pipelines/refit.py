"""The refit: a new temperature for a serving version from its recent labelled traffic.

Started by the monitor's ``thermostat.calibration.drift`` event (the ``refit`` deployment's
trigger fills the parameters from the event) or by hand. The same typed, transactional,
per-model serialised path as ``post_finetune`` (acceptance → refit T → re-sweep gate →
register, in that order), with the registered version as the starting point:

1. **acceptance** — the parent version's checkpoint files (downloaded from its
   ``checkpoint_uri``) must still have its registered digest, and clear the accuracy floor on
   the traffic (:func:`flows.pipelines.steps.accept_registered_version`);
2. **refit T** — the version's recent labelled traffic (at most ``refit_max_rows``, the most
   recent) is split by serving time: the older ``refit_fit_fraction`` fits T, after qualifying
   against the newer part's class proportions (:func:`flows.pipelines.steps.refit_temperature_by_time`);
   a fit on a bound is refused;
3. **re-sweep the gate** on the newer part's calibrated confidences, and measure before (at the
   parent's T) and after (:func:`flows.pipelines.steps.gate_threshold`);
4. **verify** on the newer part (:func:`flows.pipelines.steps.verify_refit`): the paired bootstrap of
   the NLL change must say ``improved`` AND the monitor's drift test at the new T against the
   parent's baseline must find no drift;
5. **guard** (:func:`flows.pipelines.steps.weakened_guard`): a refit whose baseline ECE (so its
   drift threshold) is worse than the parent's by more than ``refit_max_ece_increase``, or that
   has no gate threshold where the parent had one, is refused: it would weaken the monitor or
   the gate silently;
6. **register** a new version of the same checkpoint (same ``checkpoint_uri`` and digest, new
   T and threshold, refit provenance tags) and move the alias, in one transaction
   (:func:`flows.pipelines.registration.register`), under the model's lock.

A refit that is refused or does not verify registers nothing, emits
``thermostat.calibration.refit_failed`` with the reason, and its flow run ends **Failed**
(red in the Prefect UI), the state's message the step and the reason, led by the escalation —
"needs retraining or a data fix" when one temperature cannot bring calibration back (accuracy
below the floor, a fit on a bound, an arched or saw-tooth curve at the new T). A refit that
registers ends **Completed**, its message the new version, its ``models:/`` URI, T and gate
threshold (:meth:`RefitOutcome.summary`); Prefect logs the message as the run's last line.

How a caller gets the :class:`RefitOutcome` back: the flow returns a ``Completed`` state whose
data is the outcome, or a ``Failed`` state whose data is the :class:`RefitFailed`; Prefect makes
it the run's final state. So, called from Python:

* ``refit(...)`` returns the outcome or raises :class:`RefitFailed` (catch it for the outcome
  of a refused refit);
* ``refit(..., return_state=True)`` returns the state; ``state.result()`` raises the
  :class:`RefitFailed`, ``state.result(raise_on_failure=False)`` returns it;
* a deployment run (``run_deployment``, the trigger) ends Failed with the same message;
  reading its state back from the API gives the outcome only when results are persisted
  (``PREFECT_RESULTS_PERSIST_BY_DEFAULT``), else a ``FailedRun`` with the message. The outcome
  is always in the refit's report artifact, its MLflow record and its event.

A refit started by a drift event (``drift_event_id``, ``drift_run_id``) links back to it: its
events carry both ids and name the drift event as a ``caused-by`` related resource, its record
and its version's tags name them, and the check's MLflow run is tagged with the refit
(:class:`flows.records.runs.RefitLink`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
from numpy.typing import NDArray
from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from calibration import json_safe
from flows.registry.checkpoint import CheckpointFiles
from flows.records.events import RefitFailedEvent, RefittedEvent
from flows.records.evidence import RunEvidence
from flows.records.outcomes import FlowSummary, interval_text
from flows.orchestration.outcomes import finish
from flows.orchestration.events import emit, version_resource
from flows.holdout import read_ids
from flows.orchestration.locks import model_lock
from flows.pipelines.registration import Registration, recover_interrupted, register
from flows.registry.adapter import MlflowRegistry, validate_model_name
from flows.orchestration.runtime import current_flow_run_id, schedule_rerun
from flows.records.runs import DriftCause, RefitLink, RefitRecord, model_slug
from flows.settings import ThermostatSettings
from flows.pipelines.tasks import (check_window, fetch_checkpoint, gate, io_task, open_window_source, read_traffic,
                                   resolve_parent, step_task)
from flows.pipelines.steps import (
    ESCALATION,
    AcceptedCheckpoint,
    CalibratedCheckpoint,
    GatedCheckpoint,
    RefitOrigin,
    RefitVerification,
    StepRefused,
    accept_registered_version,
    refit_temperature_by_time,
    verify_refit,
    weakened_guard,
)
from flows.pipelines.traffic import Traffic
from flows.records.versions import RegisteredVersion
from monitoring import LabelledSource

__all__ = ["RefitFailed", "RefitOutcome", "RetryPlan", "ScheduledRetry", "refit", "refit_artifact_key"]

Status = Literal["registered", "already_registered", "failed", "skipped"]


@dataclass(frozen=True, slots=True, eq=False)
class RefitOutcome:
    """What a refit did. ``failed``: refused or not verified, nothing registered, event
    emitted, the flow run Failed (see :class:`RefitFailed`); ``skipped``: the alias no longer
    points at the version (nothing to do). ``cause``: the drift check that started it."""

    status: Status
    model_name: str
    parent_version: str
    alias: str
    parent_temperature: float
    reason: str
    step: str | None
    escalation: str | None
    registration: Registration | None
    verification: RefitVerification | None
    event_id: str | None
    repairs: tuple[str, ...] = ()
    """What this refit found left by interrupted registrations of the model, and completed or removed."""
    cause: DriftCause = DriftCause()
    retry: ScheduledRetry | None = None
    """The retry this refused refit scheduled (fitted on too little drifted data, run by a deployment)."""

    @property
    def state_message(self) -> str:
        """The message of the refit's final Prefect state: :meth:`summary`'s."""
        return self.summary().message

    def summary(self) -> FlowSummary:
        """The refit's outcome in one line and a few JSON figures: the new version (its ``models:/``
        URI, T, gate threshold), or why nothing was registered (step, reason, escalation)."""
        base = {"model_name": self.model_name, "parent_version": self.parent_version, "alias": self.alias,
                "parent_temperature": self.parent_temperature, "event_id": self.event_id}
        if self.registration is not None:
            registered = self.registration.summary("refit")
            message = f"{registered.message}; T was {self.parent_temperature:.4g} on version {self.parent_version}"
            return FlowSummary.of("refit", self.status, message, **(base | registered.details))
        if self.status == "skipped":
            return FlowSummary.of("refit", self.status, self.reason, **base)
        escalation = self.escalation
        # The escalation first: a long reason is cut at the message's limit, the headline must stay.
        message = (f"refit of {self.model_name} v{self.parent_version} @{self.alias} registered nothing "
                   f"({self.step} step): " + (f"{escalation}: " if escalation else "") + self.reason)
        retry = self.retry
        return FlowSummary.of("refit", self.status, message, step=self.step, reason=self.reason,
                              escalation=escalation, retry_at=None if retry is None else retry.at.isoformat(),
                              retry_flow_run_id=None if retry is None else retry.flow_run_id, **base)

    @property
    def new_version(self) -> str | None:
        return None if self.registration is None else self.registration.version

    @property
    def parent_interval(self) -> tuple[float, float] | None:
        """The parent's registered interval of T (None: registered before intervals were stored)."""
        return None if self.verification is None else self.verification.parent_interval

    @property
    def interval(self) -> tuple[float, float] | None:
        """The new T's interval, as registered (None when nothing was registered)."""
        return None if self.registration is None else self.registration.record.temperature_interval

    @property
    def temperature(self) -> float | None:
        return None if self.registration is None else self.registration.temperature


@dataclass(frozen=True, slots=True)
class ScheduledRetry:
    """A retry of a refit, scheduled: when it starts, its Prefect flow run, which retry it is."""

    at: datetime
    flow_run_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """What a refit started by a drift event and refused as fitted on too little drifted data does next.

    Its new T could not be told from the parent's: the rows it read predate the drift, or hold too
    few of its rows. Waiting out the version's cool-down would leave the drift unfixed for hours,
    so a refit run by the deployment the drift event started schedules a run of that deployment
    ``after`` later, reading from the same start up to its own start time — with the drifted rows
    labelled meanwhile — at most ``retries`` times for one drift (``attempt``: the retries before
    this refit). A refit no drift event started (run by hand) schedules nothing. ``parameters``:
    the retry's, but its window, version and attempt (``drift_event_id`` among them).

    Examples
    --------
    >>> plan = RetryPlan(attempt=3, retries=3, after=timedelta(hours=1), parameters={"drift_event_id": "4f9c"})
    >>> retry, sentence = plan.schedule(model_version="2", start=datetime(2026, 1, 1, tzinfo=UTC),
    ...                                 now=datetime(2026, 1, 1, 6, tzinfo=UTC))
    >>> retry is None, sentence.startswith("no retry scheduled: the 3 retries")
    (True, True)
    >>> RetryPlan(attempt=-1, retries=3, after=timedelta(hours=1), parameters={})
    Traceback (most recent call last):
    ...
    ValueError: attempt must be >= 0 (the refused refits of this drift before this one); got -1
    """

    attempt: int
    retries: int
    after: timedelta
    parameters: Mapping[str, Any]

    def __post_init__(self) -> None:
        if self.attempt < 0:
            raise ValueError(f"attempt must be >= 0 (the refused refits of this drift before this one); got {self.attempt}")

    @classmethod
    def of(cls, settings: ThermostatSettings, attempt: int, **parameters: Any) -> RetryPlan:
        """The plan of a refit run with ``parameters`` (its flow's, but the window and version)."""
        return cls(attempt=attempt, retries=settings.refit_retries, after=settings.refit_retry_after,
                   parameters=parameters)

    def schedule(self, *, model_version: str, start: datetime,
                 now: datetime) -> tuple[ScheduledRetry | None, str | None]:
        """Schedule the retry (when a drift event started this refit, one is left and a deployment
        runs it); the retry and the sentence a refusal ends with (None: nothing to add)."""
        if not self.parameters.get("drift_event_id"):
            return None, None
        if self.attempt >= self.retries:
            return None, (f"no retry scheduled: the {self.retries} retries of this drift's refit "
                          f"(THERMOSTAT_REFIT_RETRIES) are used up; the next drift event after the version's cool-down "
                          "starts a new refit")
        parameters = {**self.parameters, "model_version": model_version, "window_start": start.isoformat(),
                      "window_end": None, "attempt": self.attempt + 1}
        by_hand = f"run it again with window_start {start.isoformat()} once more of the drifted traffic is labelled"
        try:
            run = schedule_rerun(parameters, now + self.after, purpose="thermostat-refit-retry")
        except Exception as error:  # noqa: BLE001 - the refusal is still recorded and sent; it says why
            get_run_logger().warning("could not schedule the refit's retry: %s: %s", type(error).__name__, error)
            return None, f"no retry scheduled: scheduling it failed ({type(error).__name__}: {error}); {by_hand}"
        if run is None:
            return None, f"no retry scheduled: this refit was not run by a deployment; {by_hand}"
        at = run.expected_start_time or now + self.after
        retry = ScheduledRetry(at=at, flow_run_id=str(run.id), attempt=self.attempt + 1)
        return retry, (f"retry {retry.attempt} of {self.retries} scheduled at {at.isoformat(timespec='seconds')} "
                       f"(flow run {retry.flow_run_id}): it reads from {start.isoformat(timespec='seconds')} up to its "
                       "own start, with the drifted traffic labelled by then")


class RefitFailed(RuntimeError):
    """A refit that registered nothing (status ``failed``), as a direct call of :func:`refit`
    raises it; ``outcome`` is the full :class:`RefitOutcome`.

    It is also the data of the Failed state the flow run ends in, so
    ``state.result(raise_on_failure=False)`` returns it (see :func:`refit`).
    """

    def __init__(self, outcome: RefitOutcome) -> None:
        escalation = outcome.escalation
        super().__init__(
            f"refit of {outcome.model_name} v{outcome.parent_version} @{outcome.alias} registered nothing "
            f"({outcome.step} step): {outcome.reason}"
            + (f" — {escalation}" if escalation and escalation not in outcome.reason else "")
        )
        self.outcome = outcome

    def __reduce__(self) -> tuple[type[RefitFailed], tuple[RefitOutcome]]:
        # Pickled with its outcome (a persisted result of the flow run), not with the message.
        return type(self), (self.outcome,)


def refit_artifact_key(model_name: str, parent_version: str) -> str:
    """The key of the refit report of one parent version (a Prefect artifact key: lowercase
    letters, digits and dashes), so each version's refits keep their own history.

    Examples
    --------
    >>> refit_artifact_key("Tickets_EN", "3")
    'refit-tickets-en-v3'
    """
    return f"refit-{model_slug(model_name)}-v{parent_version}"


# ---------------------------------------------------------------------------------- tasks


# A refusal is an outcome of a refit (reported, with an event), not a crash: the step tasks
# return it instead of raising, so the flow decides what to publish and no traceback is logged.


@step_task(name="accept-registered-version")
def accept_version(
    origin: RefitOrigin, files: CheckpointFiles, traffic: Traffic, training_ids: NDArray[np.str_],
    settings: ThermostatSettings,
) -> AcceptedCheckpoint | StepRefused:
    try:
        accepted = accept_registered_version(
            origin=origin, checkpoint_digest=files.digest, traffic=traffic.scored, training_ids=training_ids,
            settings=settings,
        )
    except StepRefused as refusal:
        get_run_logger().warning("%s %s", origin.parent.context, refusal)
        return refusal
    get_run_logger().info("%s accepted again: same files (digest %s), traffic accuracy %.4f on n=%d",
                          origin.parent.context, files.digest[:12], accepted.accuracy, traffic.scored.n_samples)
    return accepted


@step_task(name="refit-temperature-by-time")
def refit_by_time(accepted: AcceptedCheckpoint, settings: ThermostatSettings) -> CalibratedCheckpoint | StepRefused:
    assert accepted.refit_of is not None  # built by accept_version
    context = accepted.refit_of.parent.context
    try:
        calibrated = refit_temperature_by_time(accepted, settings=settings)
    except StepRefused as refusal:
        get_run_logger().warning("%s %s", context, refusal)
        return refusal
    fit = calibrated.fit
    get_run_logger().info(
        "%s new T=%.6g [%.4g, %.4g] fitted on the older n=%d rows (mean NLL %.4f at T=1 -> %.4f); %d newer rows "
        "verify", context, fit.temperature, fit.temperature_low, fit.temperature_high, fit.n, fit.nll_before,
        fit.nll_after, calibrated.evaluation_ids.shape[0],
    )
    return calibrated


@step_task(name="verify-refit")
def verify(gated: GatedCheckpoint, settings: ThermostatSettings) -> RefitVerification:
    verification = verify_refit(gated, settings=settings)
    assert gated.accepted.refit_of is not None
    context = gated.accepted.refit_of.parent.context
    logger = get_run_logger()
    (logger.info if verification.passed else logger.warning)("%s %s", context, verification.summary)
    for reason in verification.reasons:
        logger.info("%s %s", context, reason)
    return verification


@step_task(name="emit-refit-event")
def emit_refit_event(payload: RefitFailedEvent | RefittedEvent, parent: RegisteredVersion, alias: str,
                     cause: DriftCause) -> str | None:
    """Emit the refit's event on the parent version, with the drift that caused the refit (the
    payload's ``drift_event_id``/``drift_run_id``, and the drift event as a ``caused-by`` related resource)."""
    return emit(payload, version_resource(parent.model_name, parent.version, alias), related=cause.related(),
                context=parent.context)


@io_task(name="publish-refit-report")
def publish_report(outcome: RefitOutcome) -> None:
    lines = [
        f"## Refit of {outcome.model_name} version {outcome.parent_version} (@{outcome.alias}, "
        f"T={outcome.parent_temperature:.6g}{interval_text(outcome.parent_interval)}): {outcome.status}",
        "",
        outcome.reason,
    ]
    if outcome.escalation:
        lines += ["", f"**Escalation: {outcome.escalation}.**"]
    if outcome.cause.event_id is not None or outcome.cause.run_id is not None:
        lines += ["", f"Started by the drift event `{outcome.cause.event_id or 'unknown'}` of the check "
                      f"(MLflow run `{outcome.cause.run_id or 'unknown'}`)."]
    if outcome.repairs:
        lines += ["", "### Left by interrupted registrations, repaired first", "",
                  *(f"- {repair}" for repair in outcome.repairs)]
    if outcome.registration is not None:
        r = outcome.registration
        threshold = "none" if r.gate_threshold is None else f"{r.gate_threshold:.4f}"
        lines += ["", f"New version **{r.version}**: T = {r.temperature:.6g}{interval_text(outcome.interval)}, "
                      f"gate threshold {threshold}, "
                      f"same checkpoint `{r.checkpoint_uri}` (digest `{r.checkpoint_digest[:12]}`); "
                      f"@{r.alias} moved: {r.alias_moved}; MLflow run `{r.run_id}`."]
    if outcome.verification is not None:
        lines += ["", "### Verification (newer part of the traffic)", "", outcome.verification.summary, "",
                  *(f"- {reason}" for reason in outcome.verification.reasons)]
    create_markdown_artifact(markdown="\n".join(lines) + "\n", key=refit_artifact_key(outcome.model_name,
                                                                                    outcome.parent_version),
                             description=outcome.reason[:200])


# ---------------------------------------------------------------------------------- flow


def _verification_payload(verification: RefitVerification | None) -> dict[str, Any]:
    if verification is None:
        return {}
    return {
        "verify_n": verification.n, "temperature_after": verification.temperature_after,
        "nll_verdict": verification.nll_verdict, "nll_change": json_safe(verification.nll_change),
        "nll_change_low": json_safe(verification.nll_change_low),
        "nll_change_high": json_safe(verification.nll_change_high),
        "ece_before": json_safe(verification.ece_before), "ece_after": json_safe(verification.ece_after),
        "baseline_ece": verification.baseline_ece, "ece_tolerance": verification.ece_tolerance,
        "p_value": json_safe(verification.p_value), "shape": verification.shape.shape,
        "parent_interval": None if verification.parent_interval is None else list(verification.parent_interval),
        "within_parent_interval": verification.within_parent_interval,
        "tests_fired_after": list(verification.drift_after.tests_fired),
        "sign_changes": verification.shape.sign_changes, "shape_message": verification.shape.message,
        "reasons": list(verification.reasons),
    }


@io_task(name="record-refused-refit")
def record_refusal(registry: MlflowRegistry, outcome: RefitOutcome, payload: dict[str, Any],
                   settings: ThermostatSettings) -> str:
    """A refused refit as an MLflow run in the monitoring experiment (:class:`flows.records.runs.RefitRecord`):
    the durable record the dashboard's alert list reads (a Prefect artifact or event may not outlive its server)."""
    record = RefitRecord(
        model_name=outcome.model_name, parent_version=outcome.parent_version, alias=outcome.alias,
        status=outcome.status, step=outcome.step, reason=outcome.reason, escalation=outcome.escalation,
        new_version=outcome.new_version, window_start=str(payload["window_start"]),
        window_end=str(payload["window_end"]), prefect_flow_run_id=current_flow_run_id(),
        metrics=RefitRecord.finite_metrics(payload), cause=outcome.cause,
    )
    run_id = registry.start_run(f"refit {outcome.model_name} v{outcome.parent_version} @{outcome.alias}: "
                                f"{outcome.status}", record.to_tags(), experiment_name=settings.monitoring_experiment_name)
    try:
        registry.log_evidence(run_id, RunEvidence(metrics=record.metrics,
                                                  documents={"refit/outcome.json": json_safe(payload)}))
        registry.end_run(run_id)
    except BaseException:
        registry.end_run(run_id, failed=True)
        raise
    return run_id


@io_task(name="link-check-run")
def link_check_run(registry: MlflowRegistry, run_id: str, outcome: RefitOutcome) -> bool:
    """Tag the MLflow run of the check that found the drift with this refit
    (:class:`flows.records.runs.RefitLink`); False when no such run exists."""
    link = RefitLink(flow_run_id=current_flow_run_id(), status=outcome.status, new_version=outcome.new_version)
    linked = registry.set_run_tags(run_id, link.to_tags())
    logger = get_run_logger()
    if linked:
        logger.info("tagged the check's MLflow run %s with this refit (%s)", run_id, outcome.status)
    else:
        logger.warning("the check's MLflow run %s does not exist: the drift check is not linked to this refit",
                       run_id)
    return linked


def _failed(
    registry: MlflowRegistry, settings: ThermostatSettings, parent: RegisteredVersion, alias: str, *, step: str,
    reason: str, escalate: bool, start: datetime, end: datetime, cause: DriftCause,
    verification: RefitVerification | None = None, repairs: tuple[str, ...] = (), retry: RetryPlan | None = None,
) -> RefitOutcome:
    escalation = ESCALATION if escalate else None
    scheduled = None
    if retry is not None and verification is not None and verification.within_parent_interval:
        scheduled, sentence = retry.schedule(model_version=parent.version, start=start, now=datetime.now(UTC))
        reason = reason if sentence is None else f"{reason}; {sentence}"
    event = RefitFailedEvent(
        reason=reason, step=step, escalation=escalation, model_name=parent.model_name, model_version=parent.version,
        alias=alias, temperature=parent.temperature, baseline_ece=parent.baseline_ece, window_start=start.isoformat(),
        window_end=end.isoformat(), mlflow_run_id=None, mlflow_experiment=settings.monitoring_experiment_name,
        verification=_verification_payload(verification), cause=cause.payload(),
        retry_at=None if scheduled is None else scheduled.at.isoformat(),
        retry_flow_run_id=None if scheduled is None else scheduled.flow_run_id,
    )
    get_run_logger().warning("%s refit registers nothing: %s%s", parent.context, reason,
                             f" — {escalation}" if escalation and escalation not in reason else "")
    outcome = RefitOutcome(
        status="failed", model_name=parent.model_name, parent_version=parent.version, alias=alias,
        parent_temperature=parent.temperature, reason=reason, step=step, escalation=escalation, registration=None,
        verification=verification, event_id=None, repairs=repairs, cause=cause, retry=scheduled,
    )
    # The durable record first, so the event (and the alert it sends) can name its MLflow run;
    # a record that cannot be written must not silence the alert: the event goes out without it.
    try:
        run_id = record_refusal(registry, outcome, event.to_payload(), settings)
    except Exception:
        emit_refit_event(event, parent, alias, cause)
        raise
    event_id = emit_refit_event(event.model_copy(update={"mlflow_run_id": run_id}), parent, alias, cause)
    outcome = replace(outcome, event_id=event_id)
    publish_report(outcome)
    return outcome


def _refused(
    registry: MlflowRegistry, settings: ThermostatSettings, parent: RegisteredVersion, alias: str, refusal: StepRefused,
    *, start: datetime, end: datetime, cause: DriftCause, repairs: tuple[str, ...],
) -> RefitOutcome:
    return _failed(registry, settings, parent, alias, step=refusal.step, reason=str(refusal),
                   escalate=refusal.escalate, start=start, end=end, cause=cause, repairs=repairs)


@flow(name="refit")
def refit(
    model_name: str,
    model_version: str | None = None,
    alias: str = "champion",
    window_start: datetime | None = None,
    window_end: datetime | None = None,
    training_ids_path: str | None = None,
    settings: ThermostatSettings | None = None,
    drift_event_id: str | None = None,
    drift_run_id: str | None = None,
    attempt: int = 0,
) -> RefitOutcome:
    """Refit the temperature of a serving version on its recent labelled traffic.

    Parameters
    ----------
    model_name : registered model name in MLflow.
    model_version : the version to refit (the drift event's ``model.version``; default: ``alias``'s);
        if ``alias`` points elsewhere once the refit holds the model's lock, ``skipped``.
    alias : the serving alias the new version takes over.
    window_start, window_end : the traffic window (aware; the drift event passes the checked
        window); default: the last ``monitor_window`` ending now.
    training_ids_path : the checkpoint's training ids (one per line) for the disjointness check;
        without it the check is skipped, and qualification's warnings say so.
    settings : defaults to ``ThermostatSettings()`` read from the environment, here, once.
    drift_event_id : the id of the ``thermostat.calibration.drift`` event that started this
        refit (the trigger passes it); its events name it as a ``caused-by`` related resource.
    drift_run_id : the MLflow run of the check that found the drift (the event's ``mlflow_run_id``),
        tagged with this refit (``thermostat.caused_refit.*``). Blank (either): "not given".
    attempt : the refits of this drift refused before it as fitted on too little drifted data
        (their retry passes it: :class:`RetryPlan`).

    Returns
    -------
    RefitOutcome
        Registered (``registered``, ``already_registered``) or ``skipped``: the flow run ends
        Completed with it, its message :meth:`RefitOutcome.summary`'s.

    Raises
    ------
    RefitFailed
        When the refit registered nothing (status ``failed``; ``error.outcome``). The flow run ends
        Failed (red in the UI), its message the step and the reason, led by the escalation when
        there is one (how a caller gets the outcome back: the module docstring).
    """
    settings = settings if settings is not None else ThermostatSettings()
    validate_model_name(model_name)
    cause = DriftCause.of(drift_event_id, drift_run_id)
    start, end = check_window(window_start, window_end, settings, datetime.now(UTC))
    training_ids = read_ids(training_ids_path) if training_ids_path is not None else None
    registry = MlflowRegistry.from_settings(settings)
    retry = RetryPlan.of(settings, attempt, model_name=model_name, alias=alias, training_ids_path=training_ids_path,
                         drift_event_id=drift_event_id, drift_run_id=drift_run_id)
    outcome = _refit_under_lock(registry, settings, model_name=model_name, model_version=model_version, alias=alias,
                                start=start, end=end, training_ids=training_ids, cause=cause, retry=retry)
    if cause.run_id is not None:
        _link_drift_check(registry, cause.run_id, outcome)
    # The run's final state, its message the outcome: Completed with it, or Failed with the RefitFailed.
    failed = outcome.status == "failed"
    return cast(RefitOutcome, finish(outcome.summary(), RefitFailed(outcome) if failed else outcome, failed=failed))


def _link_drift_check(registry: MlflowRegistry, run_id: str, outcome: RefitOutcome) -> None:
    """Tag the check that found the drift with the refit, at best: the refit is done, and a check
    run that cannot be tagged is a warning, not a failed refit."""
    linked = link_check_run(registry, run_id, outcome, return_state=True)
    if not linked.is_completed():
        get_run_logger().warning("could not tag the check's MLflow run %s with this refit: %s", run_id,
                                 linked.message)


def _refit_under_lock(
    registry: MlflowRegistry, settings: ThermostatSettings, *, model_name: str, model_version: str | None, alias: str,
    start: datetime, end: datetime, training_ids: NDArray[np.str_] | None, cause: DriftCause, retry: RetryPlan,
) -> RefitOutcome:
    """The refit's steps under the model's lock, with a working folder and the window's source open."""
    with model_lock(model_name, url=settings.resolved_prediction_log_url(), timeout_seconds=settings.lock_timeout_seconds,
                    lease_seconds=settings.lock_lease_seconds,
                    description=f"refit of {model_name} @{alias}") as lease, \
            tempfile.TemporaryDirectory(prefix="thermostat-refit-") as tmp, open_window_source(settings) as source:
        return _refit_steps(
            registry.fenced(lease), settings, Path(tmp), source, model_name=model_name, model_version=model_version,
            alias=alias, start=start, end=end, training_ids=training_ids, cause=cause, retry=retry,
        )


def _refit_steps(
    registry: MlflowRegistry, settings: ThermostatSettings, tmp: Path, source: LabelledSource, *,
    model_name: str, model_version: str | None, alias: str, start: datetime, end: datetime,
    training_ids: NDArray[np.str_] | None, cause: DriftCause, retry: RetryPlan,
) -> RefitOutcome:
    """The refit's steps (see the module docstring); ``registry`` is fenced by the lock's lease, so
    a refit that lost the lease writes nothing more (its failure record neither)."""
    repairs = recover_interrupted(registry, model_name)
    parent, holder = resolve_parent(registry, model_name, model_version, alias)
    if holder != parent.version:
        return _skipped(parent, holder, alias, repairs=repairs, cause=cause)
    traffic = read_traffic(source, parent, start, end, settings)
    if traffic is None:
        return _failed(registry, settings, parent, alias, step="traffic", escalate=False, start=start, end=end,
                       reason=f"no labelled traffic of version {parent.version} in [{start.isoformat()}, "
                              f"{end.isoformat()}); wait for labels", cause=cause, repairs=repairs)
    origin = RefitOrigin(
        parent=parent, alias=alias, window_start=start, window_end=end, first_served_at=traffic.first_served_at,
        last_served_at=traffic.last_served_at, fit_fraction=settings.refit_fit_fraction, cause=cause,
    )
    files = fetch_checkpoint(parent.checkpoint_uri, tmp, registry)
    accepted = accept_version(origin, files, traffic,
                              np.array([], dtype=str) if training_ids is None else training_ids, settings)
    if isinstance(accepted, StepRefused):
        return _refused(registry, settings, parent, alias, accepted, start=start, end=end, cause=cause,
                        repairs=repairs)
    calibrated = refit_by_time(accepted, settings)
    if isinstance(calibrated, StepRefused):
        return _refused(registry, settings, parent, alias, calibrated, start=start, end=end, cause=cause,
                        repairs=repairs)
    gated = gate(calibrated, settings)
    verification = verify(gated, settings)
    if not verification.passed:
        return _failed(registry, settings, parent, alias, step="verify",
                       reason="the refit does not verify: " + "; ".join(verification.reasons),
                       escalate=verification.escalate, start=start, end=end, cause=cause, verification=verification,
                       repairs=repairs, retry=retry)
    weaker = weakened_guard(gated, settings=settings)
    if weaker is not None:
        return _failed(registry, settings, parent, alias, step="guard", reason=weaker, escalate=False, start=start,
                       end=end, cause=cause, verification=verification, repairs=repairs)
    registration = register(gated, files, registry=registry, model_name=model_name, alias=alias, settings=settings,
                            verification=verification, repairs=repairs)
    return _registered(registration, parent, alias, verification, repairs=repairs, cause=cause)


def _skipped(
    parent: RegisteredVersion, holder: str | None, alias: str, *, repairs: tuple[str, ...], cause: DriftCause,
) -> RefitOutcome:
    """The outcome of a refit whose alias moved on to another version before it held the lock."""
    reason = (f"{parent.model_name}@{alias} points at version {holder}, not at version {parent.version}: a newer "
              "registration (or a refit) took over, so this refit would undo it; nothing registered")
    get_run_logger().warning("%s %s", parent.context, reason)
    outcome = RefitOutcome(
        status="skipped", model_name=parent.model_name, parent_version=parent.version, alias=alias,
        parent_temperature=parent.temperature, reason=reason, step=None, escalation=None, registration=None,
        verification=None, event_id=None, repairs=repairs, cause=cause,
    )
    publish_report(outcome)
    return outcome


def _registered(
    registration: Registration, parent: RegisteredVersion, alias: str, verification: RefitVerification, *,
    repairs: tuple[str, ...], cause: DriftCause,
) -> RefitOutcome:
    """The outcome of a refit that registered (or found its version already registered); a new
    version is announced by the ``refitted`` event."""
    status: Status = "registered" if registration.created else "already_registered"
    reason = (
        f"version {registration.version} registered: T {parent.temperature:.6g} -> {registration.temperature:.6g}, "
        f"@{alias} moved from version {parent.version}" if registration.created
        else f"this refit (same checkpoint, traffic and settings) is already version {registration.version}; "
             "nothing registered"
    )
    event_id = None
    if registration.created:
        event_id = emit_refit_event(RefittedEvent(
            model_name=parent.model_name, new_version=registration.version, alias=alias,
            temperature=registration.temperature, temperature_interval=registration.record.temperature_interval,
            gate_threshold=registration.gate_threshold, parent_version=parent.version,
            parent_temperature=parent.temperature, verification=_verification_payload(verification),
            cause=cause.payload()), parent, alias, cause)
    outcome = RefitOutcome(
        status=status, model_name=parent.model_name, parent_version=parent.version, alias=alias,
        parent_temperature=parent.temperature, reason=reason, step=None, escalation=None,
        registration=registration, verification=verification, event_id=event_id, repairs=repairs, cause=cause,
    )
    publish_report(outcome)
    return outcome
