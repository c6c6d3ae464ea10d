"""The post-finetune steps as pure functions over typed results (DESIGN.md rule 9).

acceptance → refit T → re-sweep gate → register, enforced by types: each step takes the
result of the one before it. Every result carries the digest of the checkpoint it was
computed on, and :func:`verify_chain` refuses a gate result whose chain does not lead back
to the checkpoint being registered.

No MLflow and no Prefect here: the flow (``flows.pipeline``) does the I/O and wraps these in
thin tasks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.model_selection import train_test_split  # type: ignore[import-untyped]

from calibration import (
    BootstrapComparison,
    CalibrationReport,
    GateChoice,
    GateSweep,
    QualificationReport,
    ScoredSet,
    TemperatureFit,
    choose_threshold,
    evaluate,
    fit_temperature,
    paired_bootstrap_nll,
    qualify_calibration_set,
    sweep_thresholds,
)
from calibration._softmax import top_label
from flows.checkpoint import CheckpointOutput
from flows.settings import ThermostatSettings

__all__ = [
    "AcceptedCheckpoint",
    "CalibratedCheckpoint",
    "ChampionScore",
    "DigestMismatchError",
    "GatedCheckpoint",
    "StepRefused",
    "accept_checkpoint",
    "data_version",
    "gate_threshold",
    "idempotency_key",
    "refit_temperature",
    "verify_chain",
]


class StepRefused(ValueError):
    """A pipeline step refused its input; nothing is registered after it. Names the step."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step} refused: {message}")
        self.step = step


class DigestMismatchError(StepRefused):
    """A result's checkpoint digest does not match the checkpoint it is applied to."""

    def __init__(self, message: str) -> None:
        super().__init__("register", message)


def data_version(ids: NDArray[np.str_]) -> str:
    """A version of a data set: SHA-256 (first 16 hex digits) of its ids, sorted, one per line."""
    return hashlib.sha256("\n".join(sorted(ids.tolist())).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ChampionScore:
    """The current alias holder's accuracy on the same holdout (acceptance compares to it)."""

    version: str
    accuracy: float


@dataclass(frozen=True, slots=True, eq=False)
class AcceptedCheckpoint:
    """Step 1's result: the checkpoint passed acceptance on ``holdout``."""

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


@dataclass(frozen=True, slots=True, eq=False)
class CalibratedCheckpoint:
    """Step 2's result: T fitted on the calibration part of the accepted checkpoint's holdout."""

    accepted: AcceptedCheckpoint
    checkpoint_digest: str
    fit: TemperatureFit
    calibration_ids: NDArray[np.str_]
    evaluation_ids: NDArray[np.str_]
    calibration_data_version: str
    qualification: QualificationReport

    @property
    def temperature(self) -> float:
        return self.fit.temperature


@dataclass(frozen=True, slots=True, eq=False)
class GatedCheckpoint:
    """Step 3's result: the threshold re-swept on the calibrated evaluation part."""

    calibrated: CalibratedCheckpoint
    checkpoint_digest: str
    choice: GateChoice
    sweep: GateSweep
    before: CalibrationReport
    after: CalibrationReport
    bootstrap: BootstrapComparison
    fitted_at: str

    @property
    def accepted(self) -> AcceptedCheckpoint:
        return self.calibrated.accepted

    @property
    def temperature(self) -> float:
        return self.calibrated.fit.temperature


def _examples(ids: NDArray[np.str_], limit: int = 5) -> str:
    return ", ".join(repr(i) for i in ids[:limit].tolist())


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

    ``reference_labels`` are recent production labels for the class-mix check; without them
    the whole holdout is the reference (it is assumed to look like production).
    """
    try:
        calibration_idx, evaluation_idx = split_holdout(
            accepted.holdout, calibration_fraction=settings.calibration_fraction, seed=settings.seed
        )
    except ValueError as error:  # e.g. a class with a single example cannot be stratified
        raise StepRefused("refit", f"the holdout cannot be split by label: {error}") from error
    part = accepted.holdout.subset(calibration_idx)
    qualification = qualify_calibration_set(
        part.logits,
        part.labels,
        ids=part.ids,
        training_ids=accepted.training_ids,
        reference_labels=accepted.holdout.labels if reference_labels is None else reference_labels,
        min_total=settings.min_total,
        min_per_class=settings.min_per_class,
        max_tv_distance=settings.max_tv_distance,
    )
    if not qualification.passed:
        raise StepRefused("refit", "the calibration set does not qualify: " + "; ".join(qualification.failures))
    fit = fit_temperature(part.logits, part.labels, bounds=settings.bounds)
    if fit.at_bound is not None:
        n_errors = qualification.n_errors
        raise StepRefused(
            "refit",
            f"the fitted temperature {fit.temperature:.6g} sits on the {fit.at_bound} bound of {fit.bounds} "
            f"(calibration n={fit.n}, {n_errors} error(s)); such a fit is not trusted"
            + (" — a calibration set with no errors pushes T to the lower bound; use more data" if n_errors == 0 else ""),
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
    )


def gate_threshold(calibrated: CalibratedCheckpoint, *, settings: ThermostatSettings) -> GatedCheckpoint:
    """Step 3: re-sweep the gate on the evaluation part's calibrated confidences.

    Also records NLL/ECE before (T = 1) and after (fitted T) on that part, and the paired
    bootstrap verdict of the NLL change. A target no threshold meets is not a refusal: the
    version is registered with no threshold, so every prediction goes to review.
    """
    holdout = calibrated.accepted.holdout
    evaluation_idx = np.flatnonzero(np.isin(holdout.ids, calibrated.evaluation_ids))
    part = holdout.subset(evaluation_idx)
    temperature = calibrated.fit.temperature
    predicted, confidence = top_label(part.logits, temperature)
    correct = predicted == part.labels
    report_args: dict[str, Any] = {"n_bins": settings.n_bins, "min_count": settings.min_bin_count}
    return GatedCheckpoint(
        calibrated=calibrated,
        checkpoint_digest=calibrated.checkpoint_digest,
        choice=choose_threshold(
            confidence, correct, target_accuracy=settings.gate_target_accuracy,
            confidence_level=settings.gate_confidence_level,
        ),
        sweep=sweep_thresholds(confidence, correct, confidence_level=settings.gate_confidence_level),
        before=evaluate(part.logits, part.labels, temperature=1.0, **report_args),
        after=evaluate(part.logits, part.labels, temperature=temperature, **report_args),
        bootstrap=paired_bootstrap_nll(
            part.logits, part.labels, temperature_before=1.0, temperature_after=temperature,
            n_resamples=settings.bootstrap_resamples, confidence_level=settings.bootstrap_confidence_level,
            seed=settings.seed,
        ),
        fitted_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
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
        "seed": settings.seed,
        "n_bins": settings.n_bins,
        "gate_target_accuracy": settings.gate_target_accuracy,
        "gate_confidence_level": settings.gate_confidence_level,
        "bootstrap_resamples": settings.bootstrap_resamples,
        "bootstrap_confidence_level": settings.bootstrap_confidence_level,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
