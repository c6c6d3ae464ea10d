"""The steps of a registration as pure functions over typed results, for a fine-tune and a refit.

acceptance → refit T → re-sweep gate → register, enforced by types: each step takes the
result of the one before it. Every result carries the digest of the checkpoint it was
computed on, and :func:`verify_chain` refuses a gate result whose chain does not lead back
to the checkpoint being registered. A refit enters through :func:`accept_registered_version`
and :func:`refit_temperature_by_time`, and is verified by :func:`verify_refit`.

No MLflow and no Prefect here: the flows (``flows.pipelines.post_finetune``, ``flows.pipelines.refit``) and
``flows.pipelines.registration`` do the I/O and wrap these in thin tasks.
"""

from __future__ import annotations

import math

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.model_selection import train_test_split  # type: ignore[import-untyped]

from calibration import (
    BootstrapComparison,
    CalibrationErrorEstimate,
    CalibrationReport,
    CalibrationStats,
    GateChoice,
    GateSweep,
    QualificationReport,
    ReferencePriors,
    ScoredSet,
    TemperatureFit,
    TemperatureStats,
    calibration_error_from_stats,
    choose_threshold,
    evaluate,
    fit_temperature,
    paired_bootstrap_nll,
    qualify_calibration_set,
    sweep_thresholds,
    top_label_confidence,
)
from flows.records.runs import DriftCause
from flows.settings import ThermostatSettings
from flows.records.versions import CheckpointOutput, RegisteredVersion, reference_priors_may_fit
from monitoring import (
    ConfidenceProfile,
    DriftReport,
    ReliabilityShape,
    decide_drift,
    diagnose_reliability_shape,
    summarise_arrays,
)

__all__ = [
    "AcceptedCheckpoint",
    "CalibratedCheckpoint",
    "ChampionScore",
    "DigestMismatchError",
    "GatedCheckpoint",
    "RefitOrigin",
    "RefitVerification",
    "StepRefused",
    "accept_checkpoint",
    "accept_registered_version",
    "data_version",
    "gate_threshold",
    "idempotency_key",
    "refit_temperature",
    "refit_temperature_by_time",
    "verify_chain",
    "verify_refit",
    "weakened_guard",
]

ESCALATION = "needs retraining or a data fix"
"""What the refit says when one temperature cannot bring calibration back."""


class StepRefused(ValueError):
    """A pipeline step refused its input; nothing is registered after it. Names the step.

    ``escalate`` marks a refusal that a temperature cannot answer (accuracy below the floor,
    a fit on a bound): the model needs retraining or a data fix.
    """

    def __init__(self, step: str, message: str, *, escalate: bool = False) -> None:
        super().__init__(f"{step} refused: {message}")
        self.step = step
        self.escalate = escalate


class DigestMismatchError(StepRefused):
    """A result's checkpoint digest does not match the checkpoint it is applied to."""

    def __init__(self, message: str) -> None:
        super().__init__("register", message)


def data_version(ids: NDArray[np.object_]) -> str:
    """A version of a data set: SHA-256 (first 16 hex digits) of its ids, sorted, one per line."""
    return hashlib.sha256("\n".join(sorted(ids.tolist())).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ChampionScore:
    """The current alias holder's accuracy on the same holdout (acceptance compares to it)."""

    version: str
    accuracy: float


@dataclass(frozen=True, slots=True)
class RefitOrigin:
    """Where a refit's data come from: the registered version it refits, and its traffic.

    ``window_start``/``window_end`` bound the traffic read from the prediction log; the rows
    actually used were served from ``first_served_at`` to ``last_served_at``. The older
    ``fit_fraction`` of them (by serving time) fits T, the newer rest verifies it. ``cause``
    is the drift check that started the refit (empty for a refit by hand): the new version's
    tags name it.
    """

    parent: RegisteredVersion
    alias: str
    window_start: datetime
    window_end: datetime
    first_served_at: datetime
    last_served_at: datetime
    fit_fraction: float
    cause: DriftCause = DriftCause()


@dataclass(frozen=True, slots=True, eq=False)
class AcceptedCheckpoint:
    """Step 1's result: the checkpoint passed acceptance on ``holdout``.

    For a refit (``refit_of`` set) the holdout is the version's recent labelled traffic in
    serving order, and ``temperature_before`` is the T in force (the parent version's); for
    a new fine-tune it is 1 (the uncalibrated checkpoint).
    """

    checkpoint_uri: str
    checkpoint_digest: str
    checkpoint_output: CheckpointOutput
    holdout: ScoredSet
    holdout_data_version: str
    accuracy: float
    champion: ChampionScore | None
    training_ids: NDArray[np.str_]
    train_steps: int
    train_data_version: str
    temperature_before: float = 1.0
    refit_of: RefitOrigin | None = None


@dataclass(frozen=True, slots=True, eq=False)
class CalibratedCheckpoint:
    """Step 2's result: T fitted on the calibration part of the accepted checkpoint's holdout.

    ``reference`` holds the temperature test's sums over that calibration part at the fitted
    T: what the two-sample drift test needs of the reference (registered as tags);
    ``confidence_profile`` its binned confidences at that T, the early warning's reference;
    ``reference_priors`` its class counts and posterior sums at that T, the shift diagnosis's
    reference (:class:`calibration.ReferencePriors`); None when K is too large for them to be
    registered (:func:`flows.records.versions.reference_priors_may_fit`): not summed at all.
    """

    accepted: AcceptedCheckpoint
    checkpoint_digest: str
    fit: TemperatureFit
    calibration_ids: NDArray[np.object_]
    evaluation_ids: NDArray[np.object_]
    calibration_data_version: str
    qualification: QualificationReport
    reference: TemperatureStats
    confidence_profile: ConfidenceProfile
    reference_priors: ReferencePriors | None

    @property
    def temperature(self) -> float:
        return self.fit.temperature


@dataclass(frozen=True, slots=True, eq=False)
class GatedCheckpoint:
    """Step 3's result: the threshold re-swept on the calibrated evaluation part.

    ``reference_ece`` is the evaluation part's ECE at the fitted T by the drift ECE test's
    estimator, with its interval: the ECE test's reference (registered as tags).
    """

    calibrated: CalibratedCheckpoint
    checkpoint_digest: str
    choice: GateChoice
    sweep: GateSweep
    before: CalibrationReport
    after: CalibrationReport
    bootstrap: BootstrapComparison
    fitted_at: str
    reference_ece: CalibrationErrorEstimate

    @property
    def accepted(self) -> AcceptedCheckpoint:
        return self.calibrated.accepted

    @property
    def temperature(self) -> float:
        return self.calibrated.fit.temperature


def _examples(ids: NDArray[np.str_], limit: int = 5) -> str:
    return ", ".join(repr(i) for i in ids[:limit].tolist())


def _refuse_unfit_holdout(holdout: ScoredSet, training_ids: NDArray[np.str_]) -> None:
    """Refuse a holdout that cannot judge the checkpoint: one sharing ids with its training set, or
    missing a class."""
    overlap = np.intersect1d(holdout.ids, training_ids)
    if overlap.size:
        raise StepRefused(
            "acceptance",
            f"{overlap.size} holdout id(s) are also training ids (e.g. {_examples(overlap)}); the holdout "
            "must be disjoint from the training set — remove them and re-run",
        )
    missing = np.setdiff1d(np.arange(holdout.n_classes), holdout.labels)
    if missing.size:
        raise StepRefused(
            "acceptance",
            f"the checkpoint has {holdout.n_classes} classes but the holdout has no example of class(es) "
            f"{missing.tolist()}; every model class must appear in the holdout",
        )


def accept_checkpoint(
    *,
    checkpoint_uri: str,
    checkpoint_digest: str,
    checkpoint_output: CheckpointOutput,
    holdout: ScoredSet,
    training_ids: NDArray[np.str_],
    champion: ChampionScore | None,
    train_steps: int,
    train_data_version: str,
    settings: ThermostatSettings,
) -> AcceptedCheckpoint:
    """Step 1: disjoint ids, valid logits, the label set, accuracy floor and champion regression.

    ``holdout`` is a validated :class:`ScoredSet` (finite logits, labels in [0, K)).

    Raises
    ------
    StepRefused
        Naming the rule, the count and what to do.
    """
    _refuse_unfit_holdout(holdout, training_ids)
    predicted = holdout.logits.argmax(axis=1)
    accuracy = float(np.mean(predicted == holdout.labels))
    if accuracy < settings.min_accuracy:
        raise StepRefused(
            "acceptance",
            f"holdout accuracy {accuracy:.4f} is below the floor {settings.min_accuracy:.4f} "
            "(set THERMOSTAT_MIN_ACCURACY to change)",
        )
    if champion is not None and accuracy < champion.accuracy - settings.max_regression:
        raise StepRefused(
            "acceptance",
            f"holdout accuracy {accuracy:.4f} is {champion.accuracy - accuracy:.4f} below the current holder "
            f"(version {champion.version}, {champion.accuracy:.4f}) on the same holdout; at most "
            f"{settings.max_regression:.4f} is allowed (set THERMOSTAT_MAX_REGRESSION to change)",
        )
    return AcceptedCheckpoint(
        checkpoint_uri=checkpoint_uri,
        checkpoint_digest=checkpoint_digest,
        checkpoint_output=checkpoint_output,
        holdout=holdout,
        holdout_data_version=data_version(holdout.ids),
        accuracy=accuracy,
        champion=champion,
        training_ids=training_ids,
        train_steps=train_steps,
        train_data_version=train_data_version,
    )


def accept_registered_version(
    *,
    origin: RefitOrigin,
    checkpoint_digest: str,
    traffic: ScoredSet,
    training_ids: NDArray[np.str_],
    settings: ThermostatSettings,
) -> AcceptedCheckpoint:
    """Step 1 of a refit: the registered version's checkpoint, accepted on its recent traffic.

    The checkpoint passed acceptance when the parent version was registered; what is checked
    again is that its files are still the ones registered (``checkpoint_digest`` is recomputed
    from the files just downloaded) and that it still clears the accuracy floor on the traffic
    (a temperature cannot fix accuracy). ``traffic`` holds the labelled rows in serving order,
    ids = request ids.

    Raises
    ------
    StepRefused
        If the files changed since registration, or the traffic accuracy is below the floor.
    """
    parent = origin.parent
    if checkpoint_digest != parent.checkpoint_digest:
        raise StepRefused(
            "acceptance",
            f"the files at {parent.checkpoint_uri} have digest {checkpoint_digest[:12]} but version {parent.version} "
            f"was registered with {parent.checkpoint_digest[:12]}; a refit makes a new version of the SAME checkpoint, "
            "so nothing is registered",
        )
    accuracy = float(np.mean(traffic.logits.argmax(axis=1) == traffic.labels))
    if accuracy < settings.min_accuracy:
        raise StepRefused(
            "acceptance",
            f"accuracy on the recent traffic is {accuracy:.4f}, below the floor {settings.min_accuracy:.4f}; a "
            f"temperature never changes which class wins, so a refit cannot help: {ESCALATION}",
            escalate=True,
        )
    return AcceptedCheckpoint(
        checkpoint_uri=parent.checkpoint_uri,
        checkpoint_digest=parent.checkpoint_digest,
        checkpoint_output=parent.checkpoint_output,
        holdout=traffic,
        holdout_data_version=data_version(traffic.ids),
        accuracy=accuracy,
        champion=None,
        training_ids=training_ids,
        train_steps=parent.train_steps,
        train_data_version=parent.train_data_version,
        temperature_before=parent.temperature,
        refit_of=origin,
    )


def split_holdout(holdout: ScoredSet, *, calibration_fraction: float, seed: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Seeded split stratified by label: (calibration indices, evaluation indices), each sorted."""
    indices = np.arange(holdout.n_samples)
    calibration, evaluation = train_test_split(
        indices, train_size=calibration_fraction, stratify=holdout.labels, random_state=seed
    )
    return np.sort(calibration), np.sort(evaluation)


def refit_temperature(
    accepted: AcceptedCheckpoint, *, settings: ThermostatSettings, reference_labels: NDArray[np.intp] | None = None
) -> CalibratedCheckpoint:
    """Step 2: split, qualify the calibration part, fit T; a fit on a bound is refused.

    ``reference_labels`` are recent production labels for the class-mix check.
    Without them the check is not run and the qualification report says so: comparing the
    calibration part with the holdout it was drawn from would always pass.
    """
    try:
        calibration_idx, evaluation_idx = split_holdout(
            accepted.holdout, calibration_fraction=settings.calibration_fraction, seed=settings.drift.seed
        )
    except ValueError as error:  # e.g. a class with a single example cannot be stratified
        raise StepRefused("refit", f"the holdout cannot be split by label: {error}") from error
    return _qualify_and_fit(accepted, calibration_idx, evaluation_idx, reference_labels, settings=settings)


def refit_temperature_by_time(accepted: AcceptedCheckpoint, *, settings: ThermostatSettings) -> CalibratedCheckpoint:
    """Step 2 of a refit on traffic: the older rows fit T, the newer rows verify it.

    The holdout of a refit is the version's recent labelled traffic in serving order
    (:func:`accept_registered_version`). Its older ``settings.refit_fit_fraction`` is the
    calibration part, qualified against the newer part's class proportions (does the fitting
    data look like the traffic the new T will serve?); the newer rest is never used to fit.

    Raises
    ------
    StepRefused
        If the accepted checkpoint is not a refit, the split leaves a part empty, the older
        part does not qualify, or the fit sits on a bound.
    """
    if accepted.refit_of is None:
        raise StepRefused("refit", "a split by serving time needs traffic in serving order (a refit of a registered "
                                   "version); a fine-tune's holdout is split by label with refit_temperature")
    n = accepted.holdout.n_samples
    n_fit = int(round(n * settings.refit_fit_fraction))
    if not 0 < n_fit < n:
        raise StepRefused(
            "refit", f"{n} labelled rows cannot be split {settings.refit_fit_fraction:.0%} / "
                     f"{1 - settings.refit_fit_fraction:.0%} by time into a fitting and a verification part",
        )
    calibration_idx, evaluation_idx = np.arange(n_fit), np.arange(n_fit, n)
    # The newer rows' class mix is the reference (a validated set: its labels are not checked again).
    return _qualify_and_fit(accepted, calibration_idx, evaluation_idx, accepted.holdout.subset(evaluation_idx),
                            settings=settings)


def _qualify_and_fit(
    accepted: AcceptedCheckpoint, calibration_idx: NDArray[np.intp], evaluation_idx: NDArray[np.intp],
    reference_labels: NDArray[np.intp] | ScoredSet | None, *, settings: ThermostatSettings,
) -> CalibratedCheckpoint:
    part = accepted.holdout.subset(calibration_idx)
    # ``part`` is a validated ScoredSet: the core reads it without checking it again.
    qualification = qualify_calibration_set(
        part,
        ids=part.ids,
        training_ids=accepted.training_ids,
        reference_labels=reference_labels,
        min_total=settings.min_total,
        min_per_class=settings.min_per_class,
        max_tv_distance=settings.max_tv_distance,
    )
    if not qualification.passed:
        raise StepRefused("refit", "the calibration set does not qualify: " + "; ".join(qualification.failures))
    fit = fit_temperature(part, bounds=settings.bounds)
    if fit.at_bound is not None:
        n_errors = qualification.n_errors
        raise StepRefused(
            "refit",
            f"the fitted temperature {fit.temperature:.6g} sits on the {fit.at_bound} bound of {fit.bounds} "
            f"(calibration n={fit.n}, {n_errors} error(s)); such a fit is not trusted"
            + (" — a calibration set with no errors pushes T to the lower bound; use more data" if n_errors == 0 else "")
            + (f"; on traffic, no temperature inside the bounds calibrates this checkpoint: {ESCALATION}"
               if accepted.refit_of is not None and n_errors else ""),
            escalate=accepted.refit_of is not None and n_errors > 0,
        )
    evaluation_ids = accepted.holdout.ids[evaluation_idx]
    return CalibratedCheckpoint(
        accepted=accepted,
        checkpoint_digest=accepted.checkpoint_digest,
        fit=fit,
        calibration_ids=part.ids,
        evaluation_ids=evaluation_ids,
        calibration_data_version=data_version(part.ids),
        qualification=qualification,
        reference=TemperatureStats.from_logits(part, temperature=fit.temperature),
        confidence_profile=_profile(part, fit.temperature),
        reference_priors=(ReferencePriors.from_logits(part, temperature=fit.temperature)
                          if reference_priors_may_fit(part.n_classes) else None),
    )


def _profile(part: ScoredSet, temperature: float) -> ConfidenceProfile:
    """The early warning's reference profile of a validated set's rows at ``temperature`` (no second scan)."""
    predicted, confidence = top_label_confidence(part, temperature=temperature)
    return ConfidenceProfile.from_confidence(confidence, np.ones(part.n_samples, dtype=bool), predicted == part.labels,
                                             temperature=temperature)


def gate_threshold(calibrated: CalibratedCheckpoint, *, settings: ThermostatSettings) -> GatedCheckpoint:
    """Step 3: re-sweep the gate on the evaluation part's calibrated confidences.

    Also records NLL/ECE before (at ``accepted.temperature_before``: 1 for a fine-tune, the
    parent version's T for a refit) and after (fitted T) on that part, and the paired
    bootstrap verdict of the NLL change. A target no threshold meets is not a refusal: the
    version is registered with no threshold, so every prediction goes to review.
    """
    holdout = calibrated.accepted.holdout
    evaluation_idx = np.flatnonzero(np.isin(holdout.ids, calibrated.evaluation_ids))
    part = holdout.subset(evaluation_idx)
    temperature = calibrated.fit.temperature
    # The holdout is a checked ScoredSet: no second scan of its logits.
    predicted, confidence = top_label_confidence(part, temperature=temperature)
    correct = predicted == part.labels
    report_args: dict[str, Any] = {"n_bins": settings.n_bins, "min_count": settings.drift.min_bin_count}
    return GatedCheckpoint(
        calibrated=calibrated,
        checkpoint_digest=calibrated.checkpoint_digest,
        choice=choose_threshold(
            confidence, correct, target_accuracy=settings.gate_target_accuracy,
            confidence_level=settings.gate_confidence_level,
        ),
        sweep=sweep_thresholds(confidence, correct, confidence_level=settings.gate_confidence_level),
        before=evaluate(part, temperature=calibrated.accepted.temperature_before, **report_args),
        after=evaluate(part, temperature=temperature, **report_args),
        bootstrap=paired_bootstrap_nll(
            part, temperature_before=calibrated.accepted.temperature_before,
            temperature_after=temperature,
            n_resamples=settings.bootstrap_resamples, confidence_level=settings.bootstrap_confidence_level,
            seed=settings.drift.seed,
        ),
        fitted_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        reference_ece=calibration_error_from_stats(
            CalibrationStats.from_logits(part, temperature=temperature, n_bins=settings.n_bins),
            estimator=settings.drift.ece_estimator, confidence_level=settings.drift.confidence_level,
            seed=settings.drift.seed,
        ),
    )


def verify_chain(gated: GatedCheckpoint, *, checkpoint_digest: str) -> None:
    """Refuse to register ``gated`` unless every link names the checkpoint being registered.

    ``checkpoint_digest`` is recomputed from the checkpoint's files at registration time.
    """
    links = {
        "gate result": gated.checkpoint_digest,
        "temperature fit": gated.calibrated.checkpoint_digest,
        "acceptance": gated.calibrated.accepted.checkpoint_digest,
    }
    wrong = {step: digest for step, digest in links.items() if digest != checkpoint_digest}
    if wrong:
        detail = ", ".join(f"{step} was computed on {digest[:12]}" for step, digest in wrong.items())
        raise DigestMismatchError(
            f"the checkpoint being registered has digest {checkpoint_digest[:12]} but the {detail}; "
            "a temperature or threshold fitted on another checkpoint is never registered — re-run the pipeline"
        )


def idempotency_key(gated: GatedCheckpoint, settings: ThermostatSettings) -> str:
    """SHA-256 of the checkpoint digest, the calibration data version and the settings that
    change T or the threshold: a repeat with the same key registers nothing new."""
    payload = {
        "checkpoint_digest": gated.checkpoint_digest,
        "calibration_data_version": gated.calibrated.calibration_data_version,
        "holdout_data_version": gated.accepted.holdout_data_version,
        "bounds": list(settings.bounds),
        "calibration_fraction": settings.calibration_fraction,
        "seed": settings.drift.seed,
        "n_bins": settings.n_bins,
        "gate_target_accuracy": settings.gate_target_accuracy,
        "gate_confidence_level": settings.gate_confidence_level,
        "bootstrap_resamples": settings.bootstrap_resamples,
        "bootstrap_confidence_level": settings.bootstrap_confidence_level,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True, slots=True, eq=False)
class RefitVerification:
    """Does the refitted T bring calibration back on the newer traffic it never saw?

    ``passed`` iff all three hold:

    1. the new T is a fix: it lies outside the parent's registered interval of T
       (``parent_interval``; a version registered before intervals were stored skips this). A
       new T inside it is not a change the parent's own fit could tell from noise;
    2. on the verification part (the newer rows), the paired bootstrap of the per-row NLL
       change (new T minus the parent's T) is ``improved`` (its whole interval below 0);
    3. the monitor's own drift decision, run on those rows at the new T, finds no drift: the
       temperature test against the refit's fitting part (the new version's reference) and
       the ECE test against the parent's registration ECE, overall and per tested group. So
       a refit that passes is not flagged by the next check on the same traffic.

    ``shape`` diagnoses the verification part's reliability curve at the new T: an arched or
    saw-tooth curve is what one temperature cannot fix (:attr:`escalate`). A 'volume' curve
    there is not: the newer rows want another T than the older ones (calibration is still
    moving), and a refit on more recent traffic may fix it.
    """

    passed: bool
    reasons: tuple[str, ...]
    n: int
    temperature_before: float
    temperature_after: float
    nll_verdict: str
    nll_change: float
    nll_change_low: float
    nll_change_high: float
    ece_before: float
    ece_after: float
    baseline_ece: float
    ece_tolerance: float
    p_value: float
    drift_after: DriftReport
    shape: ReliabilityShape
    parent_interval: tuple[float, float] | None = None
    within_parent_interval: bool = False

    @property
    def escalate(self) -> bool:
        """The refit failed because one temperature cannot bring calibration back (an arched or
        saw-tooth curve at the new T): the version "needs retraining or a data fix".

        False when it passed, when the new T is inside the parent's interval (not a fix, but
        nothing a temperature cannot do), and for a 'volume', 'calibrated' or 'empty' curve.
        """
        return not self.passed and not self.within_parent_interval and not self.shape.single_temperature_can_fix

    @property
    def summary(self) -> str:
        status = "passed" if self.passed else "FAILED"
        interval = "" if self.parent_interval is None else (
            f"new T {self.temperature_after:.4g} {'inside' if self.within_parent_interval else 'outside'} the parent's "
            f"interval [{self.parent_interval[0]:.4g}, {self.parent_interval[1]:.4g}]; "
        )
        return (
            f"verification {status} on the newer {self.n} rows: {interval}NLL change {self.nll_change:+.4f} "
            f"[{self.nll_change_low:+.4f}, {self.nll_change_high:+.4f}] ({self.nll_verdict}); ECE "
            f"{self.ece_before:.4f} at T={self.temperature_before:.4g} -> {self.ece_after:.4f} at "
            f"T={self.temperature_after:.4g} (baseline {self.baseline_ece:.4f}, tolerance {self.ece_tolerance:.4f}, "
            f"p = {self.p_value:.3g}); reliability curve: {self.shape.shape}"
        )


def _shape_reason(shape: ReliabilityShape, drift: DriftReport, *, temperature: float) -> str:
    """Why a refit that does not verify failed, read from the reliability curve at its new T.

    Only an arched or saw-tooth curve is what one temperature cannot fix: then, and only then,
    the sentence ends with the escalation. A 'volume' curve at the new T means the newer rows
    want another temperature than the older rows it was fitted on: calibration is still moving,
    and a refit on more recent traffic may fix it.
    """
    if not shape.single_temperature_can_fix:
        return f"the reliability curve at the new T {temperature:.4g}: {shape.message}"
    if shape.shape == "volume":
        test = drift.temperature_test
        wanted = "" if test is None else (
            f" (they want T {test.window_temperature:.4g} [{test.window_temperature_low:.4g}, "
            f"{test.window_temperature_high:.4g}])"
        )
        return (
            f"calibration is still moving: at the new T {temperature:.4g} the newer rows are {shape.message}; the "
            f"temperature they want differs from the one fitted on the older rows{wanted}, so a refit on more recent "
            "traffic may fix it — no escalation"
        )
    if shape.shape == "empty":
        return (f"the reliability curve at the new T {temperature:.4g} cannot be read ({shape.message}); wait for "
                "more labelled traffic and refit again")
    return (f"the reliability curve at the new T {temperature:.4g} shows no gap beyond noise ({shape.message}): "
            "nothing says one temperature cannot fix it; the refit is refused for the reason(s) above — no escalation")


def verify_refit(gated: GatedCheckpoint, *, settings: ThermostatSettings) -> RefitVerification:
    """Verify a refit on the newer part of its traffic (see :class:`RefitVerification`).

    Raises
    ------
    StepRefused
        If ``gated`` is not a refit (a fine-tune has no parent version to verify against).
    """
    accepted = gated.accepted
    origin = accepted.refit_of
    if origin is None:
        raise StepRefused("verify", "only a refit of a registered version is verified against its parent's baseline")
    part, drift = _check_newer_part(gated, origin, settings)
    shape = diagnose_reliability_shape(drift.reliability)
    bootstrap = gated.bootstrap
    parent = origin.parent
    interval = parent.temperature_interval
    within = interval is not None and interval[0] <= gated.temperature <= interval[1]
    reasons = _verification_reasons(gated, parent, drift, interval if within else None)
    passed = bootstrap.verdict == "improved" and drift.verdict != "drift" and not within
    if not passed and not within:
        reasons.append(_shape_reason(shape, drift, temperature=gated.temperature))
    return RefitVerification(
        passed=passed,
        reasons=tuple(reasons) if reasons else (drift.reasons[0],),
        n=part.n_samples,
        temperature_before=accepted.temperature_before,
        temperature_after=gated.temperature,
        nll_verdict=bootstrap.verdict,
        nll_change=bootstrap.estimate,
        nll_change_low=bootstrap.low,
        nll_change_high=bootstrap.high,
        ece_before=gated.before.ece,
        ece_after=drift.window.ece,
        baseline_ece=drift.baseline_ece,
        ece_tolerance=settings.drift.ece_tolerance,
        p_value=math.nan if (ece := drift.outcome("ece")) is None else ece.p_value,
        drift_after=drift,
        shape=shape,
        parent_interval=interval,
        within_parent_interval=within,
    )


def _check_newer_part(
    gated: GatedCheckpoint, origin: RefitOrigin, settings: ThermostatSettings
) -> tuple[ScoredSet, DriftReport]:
    """The newer part of the refit's traffic (its evaluation part), and the drift decision on it at
    the new T: like a check of that traffic against the new version's own reference (any size decides)."""
    holdout = gated.accepted.holdout
    part = holdout.subset(np.flatnonzero(np.isin(holdout.ids, gated.calibrated.evaluation_ids)))
    parent = origin.parent
    summary = summarise_arrays(
        part, None, temperature=gated.temperature, start=origin.window_start, end=origin.window_end,
        groups=part.groups, n_bins=parent.n_bins, model_name=parent.model_name, model_version=parent.version,
    )
    reference = replace(parent.drift_reference, overall=replace(
        parent.drift_reference.overall, temperature_stats=gated.calibrated.reference))
    return part, decide_drift(summary, reference, settings.drift.replace(min_window=1))


def _verification_reasons(
    gated: GatedCheckpoint, parent: RegisteredVersion, drift: DriftReport, within: tuple[float, float] | None
) -> list[str]:
    """Why a refit does not verify: a new T inside the parent's interval (``within``: that interval),
    an NLL that did not improve, drift at the new T."""
    bootstrap = gated.bootstrap
    reasons: list[str] = []
    if within is not None:
        origin = gated.accepted.refit_of
        since = "" if origin is None else f", served from {origin.first_served_at.isoformat(timespec='seconds')} on"
        reasons.append(
            f"not a fix: the new T {gated.temperature:.4g} lies inside version {parent.version}'s "
            f"{parent.record.temperature_confidence_level or 0.95:.0%} interval of T [{within[0]:.4g}, "
            f"{within[1]:.4g}] (T {parent.temperature:.4g}); the {gated.calibrated.calibration_ids.shape[0]} rows "
            f"it was fitted on{since} cannot tell its T from the parent's — too little drifted data: they may "
            "predate the drift, or hold too few of its rows. A refit reading from where the drift began (its "
            "change point), once more of the drifted traffic is labelled, may succeed — nothing registered"
        )
    if bootstrap.verdict != "improved":
        reasons.append(
            f"the NLL change on the newer {bootstrap.n} rows (T {bootstrap.temperature_before:.4g} -> "
            f"{bootstrap.temperature_after:.4g}) is {bootstrap.estimate:+.4f} with {bootstrap.confidence_level:.0%} "
            f"paired-bootstrap interval [{bootstrap.low:+.4f}, {bootstrap.high:+.4f}]: {bootstrap.verdict}, not improved"
        )
    if drift.verdict == "drift":
        decided = sum(o.fired for o in drift.outcomes) + len(drift.drifted_groups)
        reasons.extend(f"at the new T: {reason}" for reason in drift.reasons[:decided])
    return reasons


def weakened_guard(gated: GatedCheckpoint, *, settings: ThermostatSettings) -> str | None:
    """Why registering a refit would silently weaken its parent's monitor or gate, or None.

    A refit is refused (nothing registered) when its ECE reference is worse than the parent's by
    more than ``settings.refit_max_ece_increase`` — the ECE test's reference (the debiased
    estimate, less biased on a small evaluation part) when both were estimated alike, else the
    binned registration baseline — since the drift threshold, reference + ``ece_tolerance``,
    would rise with it and the next drift would have to be that much larger to be seen; or when
    it has no gate threshold where the parent had one: every prediction would go to review.

    Raises
    ------
    StepRefused
        If ``gated`` is not a refit.
    """
    origin = gated.accepted.refit_of
    if origin is None:
        raise StepRefused("guard", "only a refit of a registered version is compared with its parent")
    parent, allowed = origin.parent, settings.refit_max_ece_increase
    reference, estimate = parent.drift_reference.overall, gated.reference_ece
    alike = reference.ece_estimator == estimate.estimator
    what = f"drift reference ECE ({estimate.estimator})" if alike else "baseline ECE (binned)"
    old, new = (reference.ece, estimate.estimate) if alike else (parent.baseline_ece, gated.after.ece)
    reasons = []
    if math.isfinite(old) and math.isfinite(new) and new > old + allowed:
        tolerance = settings.drift.ece_tolerance
        reasons.append(f"its {what} {new:.4f} is worse than version {parent.version}'s {old:.4f} by {new - old:+.4f}, "
                       f"more than THERMOSTAT_REFIT_MAX_ECE_INCREASE {allowed:g}: its drift threshold would rise from "
                       f"{old + tolerance:.4f} to {new + tolerance:.4f}, so the next drift would have to be that much "
                       "larger to be seen")
    if parent.gate_threshold is not None and gated.choice.threshold is None:
        reasons.append(f"it has no gate threshold where version {parent.version} had {parent.gate_threshold:.4f}: "
                       "every prediction would go to review")
    if not reasons:
        return None
    return ("registering it would weaken the monitor or the gate: " + "; ".join(reasons)
            + f"; version {parent.version} keeps serving")
