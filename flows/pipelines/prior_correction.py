"""The prior correction: the fix for a label shift, as a new version of the same checkpoint.

When the class mix of the traffic moves (a season, a new customer) and p(x | y) does not, the
right fix is not a new T but re-weighting the served posteriors to the new class priors
(Saerens, Latinne & Decaestecker 2002). Started by the monitor's
``thermostat.calibration.label-shift`` event (the ``correct-priors`` deployment's trigger passes
its estimated priors and the reference priors) or by hand, this flow registers a new version of
the serving version's checkpoint with **T unchanged** and ``prior_correction`` set
(:class:`calibration.PriorCorrection`: the traffic's priors π' and the priors π the posteriors
at T are calibrated for), through the same transactional registration under the model's lock
as a refit (:func:`flows.pipelines.registration.register_derived`). The served pyfunc then
answers softmax(z / T) re-weighted by π' / π and renormalised.

Steps, under the model's lock (like :func:`flows.pipelines.refit.refit`):

1. finish what interrupted registrations left; resolve the version ``alias`` points at (a
   version the alias no longer points at is ``skipped``);
2. the correction to register: π' = ``priors``, π = ``reference_priors`` (default: the
   parent's own correction's reference priors; a version registered with the reference priors
   of its calibration part gives them too). ``undo=True``, or priors equal to the reference
   priors, means **no correction**. The parent's own correction already that: ``unchanged``;
3. the checkpoint's files must still have the parent's digest;
4. **verify on labelled traffic** where there is enough: the newer part of the window's
   labelled rows (the older ``refit_fit_fraction`` is left out, as a refit leaves out its fitting
   rows) must have at least ``min_total`` rows. On them, the paired bootstrap of the per-row NLL
   change (new version minus the parent, as each is served) must say ``improved`` — for an undo,
   must not say ``worse`` (the prior test already found the mix back) — else nothing is
   registered (``failed``); the gate threshold is re-swept on the new version's confidences there.
   With fewer labelled rows the version is registered **from unlabelled traffic**: the gate
   threshold is the parent's, and the tag ``thermostat.prior_correction.confirmed=false`` says the
   next labelled check must confirm it (or undo it);
5. register and move the alias, all or nothing; the provenance
   (:class:`flows.records.corrections.CorrectionProvenance`) is written with the version.

Undo
----
A correction the traffic no longer supports (the mix went back) is undone by **registering a
version without it** — ``correct_priors(..., undo=True)``, or priors equal to the reference
priors — rather than by moving the alias back to the version the correction was made from.
The registry only ever moves forward, exactly as for a refit: a refit or another correction may
have come in between (whose T or gate the old version does not have), the verification and the
gate re-sweep run the same way, the undo has its own provenance (``source=undo``), and history
and rollback stay readable from the versions alone.

What the monitor evaluates
--------------------------
Every check reads the **uncorrected** posteriors softmax(z / T) of the raw logits in the
prediction log, corrected version or not, against the checkpoint's registered reference: the
calibration tests judge T (what a refit fixes), and the prior estimate — made in the same frame,
relative to the reference priors — judges the mix (what this flow fixes). A check then compares
the estimated priors with the correction in force (``record.prior_correction.priors``): the same
→ nothing to do; back at the reference priors → undo. The gate figures of a corrected version
are not counted by the check (its threshold is on the corrected confidences).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from prefect import flow, get_run_logger

from calibration import (
    BootstrapComparison,
    GateChoice,
    PriorCorrection,
    ScoredSet,
    choose_threshold,
    json_safe,
    paired_bootstrap_nll_between,
    prior_corrected_logits,
    top_label_confidence,
)
from flows.orchestration.locks import model_lock
from flows.orchestration.outcomes import finish
from flows.pipelines.registration import Registration, recover_interrupted, register_derived
from flows.pipelines.tasks import (check_window, fetch_checkpoint, open_window_source, read_traffic, resolve_parent,
                                   step_task)
from flows.pipelines.traffic import Traffic
from flows.records.corrections import CorrectionProvenance
from flows.records.outcomes import FlowSummary
from flows.records.versions import RegisteredVersion, VersionRecord
from flows.registry.adapter import MlflowRegistry, validate_model_name
from flows.settings import ThermostatSettings
from monitoring import LabelledSource

__all__ = ["CorrectionFailed", "CorrectionOutcome", "CorrectionVerification", "correct_priors", "served_logits",
           "verify_correction"]

Status = Literal["registered", "already_registered", "unchanged", "skipped", "failed"]


@dataclass(frozen=True, slots=True, eq=False)
class CorrectionVerification:
    """How a correction was judged on the newer part of the window's labelled rows.

    ``confirmed``: there were at least ``min_total`` of them (``n``), the paired bootstrap
    (``bootstrap``) ran and the gate was re-swept (``gate``); ``passed``: not confirmed (nothing
    to judge it by: registered from unlabelled traffic), or the bootstrap says ``improved`` (an
    undo: not ``worse``).
    """

    n: int
    confirmed: bool
    passed: bool
    bootstrap: BootstrapComparison | None
    gate: GateChoice | None
    summary: str

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "confirmed": self.confirmed, "passed": self.passed, "summary": self.summary,
                "bootstrap": None if self.bootstrap is None else self.bootstrap.to_dict(),
                "gate": None if self.gate is None else json_safe(self.gate)}


@dataclass(frozen=True, slots=True, eq=False)
class CorrectionOutcome:
    """What the flow did; ``correction`` is the one the new version serves (None: none, an undo)."""

    status: Status
    model_name: str
    parent_version: str
    alias: str
    correction: PriorCorrection | None
    reason: str
    registration: Registration | None = None
    verification: CorrectionVerification | None = None
    repairs: tuple[str, ...] = ()

    @property
    def new_version(self) -> str | None:
        return None if self.registration is None else self.registration.version

    def summary(self) -> FlowSummary:
        """The outcome in one line and a few JSON figures: the new version (its ``models:/`` URI, T,
        gate threshold, the priors it serves) or why nothing was registered."""
        base = {"model_name": self.model_name, "parent_version": self.parent_version, "alias": self.alias,
                "priors": None if self.correction is None else self.correction.priors}
        if self.registration is not None:
            registered = self.registration.summary("correct-priors")
            return FlowSummary.of("correct-priors", self.status, f"{self.reason}; {registered.message}",
                                  **(base | registered.details))
        message = self.reason if self.status != "failed" else (
            f"prior correction of {self.model_name} v{self.parent_version} @{self.alias} registered nothing: "
            f"{self.reason}")
        return FlowSummary.of("correct-priors", self.status, message, reason=self.reason, **base)


class CorrectionFailed(RuntimeError):
    """A correction that did not verify (nothing registered); ``outcome`` is the full outcome."""

    def __init__(self, outcome: CorrectionOutcome) -> None:
        super().__init__(f"prior correction of {outcome.model_name} v{outcome.parent_version} @{outcome.alias} "
                         f"registered nothing: {outcome.reason}")
        self.outcome = outcome

    def __reduce__(self) -> tuple[type[CorrectionFailed], tuple[CorrectionOutcome]]:
        return type(self), (self.outcome,)


# ---------------------------------------------------------------------------------- pure steps


def served_logits(logits: NDArray[np.floating[Any]], temperature: float,
                  correction: PriorCorrection | None) -> NDArray[np.float64]:
    """Logits whose softmax at ``temperature`` is what a version with ``correction`` serves."""
    if correction is None:
        return np.asarray(logits, dtype=np.float64)
    return prior_corrected_logits(logits, temperature=temperature, priors=correction.priors,
                                  reference_priors=correction.reference_priors)


def target_correction(
    parent: RegisteredVersion, priors: ArrayLike | None, reference_priors: ArrayLike | None, *, undo: bool
) -> PriorCorrection | None:
    """The correction the new version serves (None: none); each argument checked once, here.

    Raises
    ------
    ValueError
        If neither ``priors`` nor ``undo`` is given, or the reference priors are unknown (not
        given, and the parent has no correction of its own), or a prior breaks its rules.
    """
    if undo:
        return None
    if priors is None:
        raise ValueError("priors is required (the traffic's class priors, e.g. the label-shift event's estimate); "
                         "pass undo=True to remove a correction")
    if reference_priors is None:
        if parent.record.prior_correction is None:
            raise ValueError(f"reference_priors is required: {parent.model_name} version {parent.version} has no "
                             "prior correction whose reference priors could be reused (the label-shift event passes "
                             "them)")
        reference_priors = parent.record.prior_correction.reference_priors
    correction = PriorCorrection(priors, reference_priors)
    return None if correction.is_identity(tolerance=1e-9) else correction


def _same(a: PriorCorrection | None, b: PriorCorrection | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.n_classes == b.n_classes and bool(np.allclose(a.priors, b.priors, rtol=0, atol=1e-9)
                                               and np.allclose(a.reference_priors, b.reference_priors, rtol=0,
                                                               atol=1e-9))


def verify_correction(
    traffic: ScoredSet | None, parent: RegisteredVersion, correction: PriorCorrection | None,
    settings: ThermostatSettings,
) -> CorrectionVerification:
    """Judge ``correction`` against the parent as served on the newer part of the labelled
    ``traffic`` (serving order; None: no labelled row) — see the module docstring."""
    n_all = 0 if traffic is None else traffic.n_samples
    newer = None if traffic is None else traffic.subset(
        np.arange(int(round(n_all * settings.refit_fit_fraction)), n_all))
    n = 0 if newer is None else newer.n_samples
    if newer is None or n < settings.min_total:
        return CorrectionVerification(
            n=n, confirmed=False, passed=True, bootstrap=None, gate=None,
            summary=(f"made from unlabelled traffic: {n} labelled row(s) in the newer part of the window, fewer than "
                     f"the {settings.min_total} a verification needs (THERMOSTAT_MIN_TOTAL); the gate threshold is "
                     "the parent's, and the next labelled check must confirm the correction or undo it"),
        )
    temperature = parent.temperature
    before = served_logits(newer.logits, temperature, parent.record.prior_correction)
    after = served_logits(newer.logits, temperature, correction)
    bootstrap = paired_bootstrap_nll_between(
        before, after, newer.labels, temperature=temperature, n_resamples=settings.bootstrap_resamples,
        confidence_level=settings.bootstrap_confidence_level, seed=settings.drift.seed)
    predicted, confidence = top_label_confidence(after, temperature=temperature)
    gate = choose_threshold(confidence, predicted == newer.labels, target_accuracy=settings.gate_target_accuracy,
                            confidence_level=settings.gate_confidence_level)
    # A correction must lower the NLL; taking one off (the prior test found the mix back at the
    # reference's) only must not raise it: the labelled rows may not contradict the undo.
    passed = bootstrap.verdict == "improved" if correction is not None else bootstrap.verdict != "worse"
    return CorrectionVerification(
        n=n, confirmed=True, passed=passed, bootstrap=bootstrap, gate=gate,
        summary=(f"verification {'passed' if passed else 'FAILED'} on the newer {n} labelled rows: NLL change "
                 f"{bootstrap.estimate:+.4f} [{bootstrap.low:+.4f}, {bootstrap.high:+.4f}] ({bootstrap.verdict}) "
                 f"against version {parent.version} as served"),
    )


def corrected_record(
    parent: RegisteredVersion, correction: PriorCorrection | None, verification: CorrectionVerification,
    settings: ThermostatSettings,
) -> VersionRecord:
    """The new version's record: the parent's (same checkpoint, T, reference), with ``correction``,
    the re-swept gate (when verified on labels), its own idempotency key and time."""
    record = parent.record
    gate = verification.gate
    if gate is not None:
        record = replace(record, gate_threshold=gate.threshold, gate_target_accuracy=gate.target_accuracy,
                         gate_confidence_level=gate.confidence_level, gate_coverage=json_safe(gate.coverage),
                         gate_accepted_accuracy=json_safe(gate.accepted_accuracy))
    payload = {"derived_from": parent.record.idempotency_key, "parent_version": parent.version,
               "prior_correction": None if correction is None else correction.to_dict(),
               "gate_threshold": record.gate_threshold, "confirmed": verification.confirmed,
               "bootstrap_resamples": settings.bootstrap_resamples, "seed": settings.drift.seed}
    key = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return replace(record, prior_correction=correction, idempotency_key=key, pipeline_run_id="",
                   fitted_at=datetime.now(UTC).isoformat(timespec="seconds"), refit=None, temperature_before=None,
                   holdout_accuracy_source=None)


# ---------------------------------------------------------------------------------- tasks


@step_task(name="verify-prior-correction")
def verify(traffic: Traffic | None, parent: RegisteredVersion, correction: PriorCorrection | None,
           settings: ThermostatSettings) -> CorrectionVerification:
    verification = verify_correction(None if traffic is None else traffic.scored, parent, correction, settings)
    logger = get_run_logger()
    (logger.info if verification.passed else logger.warning)("%s %s", parent.context, verification.summary)
    return verification


# ---------------------------------------------------------------------------------- the flow


@flow(name="correct-priors")
def correct_priors(
    model_name: str,
    model_version: str | None = None,
    alias: str = "champion",
    priors: list[float] | None = None,
    reference_priors: list[float] | None = None,
    undo: bool = False,
    window_start: datetime | None = None,
    window_end: datetime | None = None,
    settings: ThermostatSettings | None = None,
    shift_event_id: str | None = None,
) -> CorrectionOutcome:
    """Register a prior-corrected version (or, ``undo``, one without the correction) of a serving version.

    Parameters
    ----------
    model_name : registered model name in MLflow.
    model_version : the version to correct (the event's ``model.version``); default: the version
        ``alias`` points at. If ``alias`` points elsewhere by the time the flow holds the model's
        lock, nothing is done (``skipped``).
    alias : the serving alias the new version takes over.
    priors : the traffic's class priors π' (K numbers > 0; normalised): the label-shift event's
        estimate. Not needed with ``undo``.
    reference_priors : the priors π the version's posteriors at T are calibrated for (K numbers
        > 0); default: the parent's own correction's.
    undo : register a version without any correction (the mix went back); the same as priors
        equal to the reference priors.
    window_start, window_end : the labelled traffic that verifies it (aware); default: the last
        ``monitor_window`` ending now.
    settings : defaults to ``ThermostatSettings()`` read from the environment, here, once.
    shift_event_id : the label-shift event that started it (written with the version; blank: none).

    Returns
    -------
    CorrectionOutcome
        ``registered``, ``already_registered`` (the same correction of the same parent),
        ``unchanged`` (the parent already serves it) or ``skipped``.

    Raises
    ------
    CorrectionFailed
        When labelled traffic does not confirm it (nothing registered); the flow run ends Failed.
    ValueError
        When the priors break their rules (named), before anything is read or written.
    """
    settings = settings if settings is not None else ThermostatSettings()
    validate_model_name(model_name)
    start, end = check_window(window_start, window_end, settings, datetime.now(UTC))
    registry = MlflowRegistry.from_settings(settings)
    with model_lock(model_name, url=settings.resolved_prediction_log_url(), timeout_seconds=settings.lock_timeout_seconds,
                    lease_seconds=settings.lock_lease_seconds, description=f"prior correction of {model_name} @{alias}"
                    ) as lease, tempfile.TemporaryDirectory(prefix="thermostat-priors-") as tmp, \
            open_window_source(settings) as source:
        outcome = _correction_steps(
            registry.fenced(lease), settings, Path(tmp), source, model_name=model_name, model_version=model_version,
            alias=alias, priors=priors, reference_priors=reference_priors, undo=undo, start=start, end=end,
            shift_event_id=shift_event_id or None)
    if outcome.status != "failed":  # the run's final state carries the outcome (message, last log lines)
        return finish(outcome.summary(), outcome)
    return cast(CorrectionOutcome, finish(outcome.summary(), CorrectionFailed(outcome), failed=True))


def _correction_steps(
    registry: MlflowRegistry, settings: ThermostatSettings, tmp: Path, source: LabelledSource, *, model_name: str,
    model_version: str | None, alias: str, priors: list[float] | None, reference_priors: list[float] | None,
    undo: bool, start: datetime, end: datetime, shift_event_id: str | None,
) -> CorrectionOutcome:
    repairs = recover_interrupted(registry, model_name)
    parent, holder = resolve_parent(registry, model_name, model_version, alias)
    base: dict[str, Any] = {"model_name": model_name, "parent_version": parent.version, "alias": alias,
                            "repairs": repairs}
    correction = target_correction(parent, priors, reference_priors, undo=undo)
    logger = get_run_logger()
    if holder != parent.version:
        reason = f"{model_name}@{alias} points at version {holder}, not {parent.version}: a newer registration took over"
        logger.warning("%s %s; nothing registered", parent.context, reason)
        return CorrectionOutcome(status="skipped", correction=correction, reason=reason, **base)
    if _same(correction, parent.record.prior_correction):
        reason = (f"version {parent.version} already serves "
                  f"{'no prior correction' if correction is None else repr(correction)}; nothing registered")
        logger.info("%s %s", parent.context, reason)
        return CorrectionOutcome(status="unchanged", correction=correction, reason=reason, **base)
    traffic = read_traffic(source, parent, start, end, settings)
    verification = verify(traffic, parent, correction, settings)
    if not verification.passed:
        return CorrectionOutcome(status="failed", correction=correction, verification=verification,
                                 reason=f"the correction does not verify: {verification.summary}", **base)
    files = fetch_checkpoint(parent.checkpoint_uri, tmp, registry)
    record = corrected_record(parent, correction, verification, settings)
    provenance = CorrectionProvenance(
        parent_version=parent.version,
        source="undo" if correction is None else "labelled traffic" if verification.confirmed else "unlabelled traffic",
        confirmed=verification.confirmed, verify_n=verification.n, shift_event_id=shift_event_id)
    evidence = {"parent_version": parent.version, "window": [start.isoformat(), end.isoformat()],
                "prior_correction": None if correction is None else correction.to_dict(),
                "parent_prior_correction": None if parent.record.prior_correction is None
                else parent.record.prior_correction.to_dict(), "verification": verification.to_dict()}
    registration = register_derived(
        record, files, registry=registry, model_name=model_name, alias=alias,
        n_classes=_n_classes(correction, parent),
        run_name="prior-correction", evidence=json_safe(evidence), extra_tags=provenance.to_tags(), repairs=repairs,
        ui_url=settings.resolved_mlflow_ui_url())
    what = "no prior correction" if correction is None else f"priors {np.round(correction.priors, 4).tolist()}"
    reason = (f"version {registration.version} registered: same checkpoint and T {parent.temperature:.6g}, {what} "
              f"({provenance.source}), @{alias} moved from version {parent.version}" if registration.created
              else f"this correction of version {parent.version} is already version {registration.version}")
    logger.info("%s %s", parent.context, reason)
    return CorrectionOutcome(status="registered" if registration.created else "already_registered",
                             correction=correction, reason=reason, registration=registration,
                             verification=verification, **base)


def _n_classes(correction: PriorCorrection | None, parent: RegisteredVersion) -> int:
    """K of the checkpoint: the correction's, else the parent's correction's."""
    known = correction if correction is not None else parent.record.prior_correction
    assert known is not None  # target_correction/_same rule out an undo of an uncorrected version
    return known.n_classes
