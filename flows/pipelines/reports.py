"""What a registration records: version tags, and its run's evidence as one value.

The same numbers go to the model version's tags (:func:`version_record`: they live with the
checkpoint version) and to the pipeline run's evidence (:func:`registration_evidence`): its
params and metrics, the reliability diagram (PNG, counts per bin shown), the gate sweep table
(CSV), the qualification report and the split's ids (JSON). The MLflow adapter writes the
evidence in one call (:meth:`flows.registry.adapter.MlflowRegistry.log_evidence`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never open a window from a pipeline

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

import monitoring
from calibration import GateSweep, QualificationReport, json_safe
from flows.pipelines.steps import GatedCheckpoint, RefitVerification
from flows.records.evidence import RunEvidence
from flows.records.versions import RefitProvenance, VersionRecord, binning_convention, encode_reference_priors

__all__ = ["log_context", "registration_evidence", "version_record"]


def log_context(checkpoint_uri: str, temperature: float | None) -> str:
    """The prefix of every pipeline log line: which checkpoint, and which T."""
    shown = "pending" if temperature is None else f"{temperature:.6g}"
    return f"[checkpoint={checkpoint_uri} T={shown}]"


def version_record(
    gated: GatedCheckpoint, *, idempotency_key: str, run_id: str, verification: RefitVerification | None = None
) -> VersionRecord:
    """The record a registration stores with its version (a refit's with its provenance).

    ``verification`` is required for a refit (``gated.accepted.refit_of`` set) and refused
    otherwise: a refit's version says which version it refits, on which traffic, and how it
    was verified; it is the same checkpoint with a new T.
    """
    calibrated, accepted, choice, bootstrap = gated.calibrated, gated.accepted, gated.choice, gated.bootstrap
    origin = accepted.refit_of
    if (origin is None) != (verification is None):
        raise ValueError("a refit's record needs its verification, and only a refit has one")
    record = VersionRecord(
        temperature=calibrated.fit.temperature, temperature_bounds=calibrated.fit.bounds,
        gate_threshold=choice.threshold, gate_target_accuracy=choice.target_accuracy,
        gate_confidence_level=choice.confidence_level, gate_coverage=json_safe(choice.coverage),
        gate_accepted_accuracy=json_safe(choice.accepted_accuracy), checkpoint_uri=accepted.checkpoint_uri,
        checkpoint_digest=accepted.checkpoint_digest, checkpoint_output=accepted.checkpoint_output,
        calibration_data_version=calibrated.calibration_data_version, calibration_n=calibrated.fit.n,
        holdout_data_version=accepted.holdout_data_version, train_steps=accepted.train_steps,
        train_data_version=accepted.train_data_version, holdout_accuracy=accepted.accuracy,
        holdout_metrics_n=gated.after.n, holdout_metrics_split="evaluation part of the holdout (not used to fit T)",
        holdout_nll_before=json_safe(gated.before.nll), holdout_nll_after=json_safe(gated.after.nll),
        holdout_ece_before=gated.before.ece, holdout_ece_after=gated.after.ece, nll_reduction="mean",
        bootstrap_nll_change=json_safe(bootstrap.estimate), bootstrap_nll_change_low=json_safe(bootstrap.low),
        bootstrap_nll_change_high=json_safe(bootstrap.high), bootstrap_confidence_level=bootstrap.confidence_level,
        bootstrap_verdict=bootstrap.verdict, ece_scheme=gated.after.scheme, ece_n_bins=gated.after.n_bins,
        fitted_at=gated.fitted_at, idempotency_key=idempotency_key, pipeline_run_id=run_id,
        temperature_low=json_safe(calibrated.fit.temperature_low),
        temperature_high=json_safe(calibrated.fit.temperature_high),
        temperature_confidence_level=calibrated.fit.confidence_level, reference_n=calibrated.reference.n,
        reference_gradient_sum=calibrated.reference.gradient_sum,
        reference_gradient_square_sum=calibrated.reference.gradient_square_sum,
        reference_curvature_sum=calibrated.reference.curvature_sum,
        reference_expected_errors=json_safe(calibrated.reference.expected_errors),
        reference_ece_estimator=gated.reference_ece.estimator, reference_ece=json_safe(gated.reference_ece.estimate),
        reference_ece_low=json_safe(gated.reference_ece.low), reference_ece_high=json_safe(gated.reference_ece.high),
        reference_confidence_profile=calibrated.confidence_profile.to_json(),
        reference_prior_sums=encode_reference_priors(calibrated.reference_priors),
    )
    if origin is None or verification is None:
        return record
    refit = RefitProvenance(
        parent_version=origin.parent.version, parent_temperature=origin.parent.temperature,
        parent_gate_threshold=origin.parent.gate_threshold, parent_baseline_ece=origin.parent.baseline_ece,
        alias=origin.alias, traffic_window=f"[{origin.window_start.isoformat()}, {origin.window_end.isoformat()})",
        traffic_first_served_at=origin.first_served_at.isoformat(),
        traffic_last_served_at=origin.last_served_at.isoformat(), traffic_n=accepted.holdout.n_samples,
        fit_n=calibrated.fit.n, verify_n=verification.n,
        split=f"by serving time: the older {origin.fit_fraction:.0%} fits T, the newer rest verifies",
        verification=verification.summary, verification_p_value=json_safe(verification.p_value),
        verification_shape=verification.shape.shape,
    )
    return dataclasses.replace(
        record, refit=refit, temperature_before=accepted.temperature_before,
        holdout_metrics_split="newer part of the refit's traffic window (not used to fit T); before = parent's T",
        holdout_accuracy_source="recent labelled traffic of the parent version",
    )


def registration_evidence(gated: GatedCheckpoint, record: VersionRecord) -> RunEvidence:
    """A registration run's evidence, built without I/O: its params (``record``'s inputs and
    settings), metrics, reliability diagram, gate sweep, qualification report and split ids."""
    calibrated = gated.calibrated
    return RunEvidence(
        params=_run_params(record, gated),
        metrics=_run_metrics(gated),
        figures={"evidence/reliability_diagram.png": _reliability_figure(gated)},
        tables={"evidence/gate_sweep.csv": _sweep_frame(gated.sweep)},
        documents={
            "evidence/qualification_report.json": _qualification_payload(calibrated.qualification),
            "evidence/split_ids.json": {"calibration_ids": calibrated.calibration_ids.tolist(),
                                        "evaluation_ids": calibrated.evaluation_ids.tolist(),
                                        "calibration_data_version": calibrated.calibration_data_version},
        },
    )


def _run_params(record: VersionRecord, gated: GatedCheckpoint) -> dict[str, Any]:
    """The pipeline run's parameters: the record's inputs and settings, plus the bootstrap's size."""
    tags = record.to_tags()
    return {
        **{key: tags[key] for key in ("checkpoint_uri", "checkpoint_digest", "train_steps", "train_data_version",
                                       "calibration_data_version", "holdout_data_version", "gate_target_accuracy",
                                       "gate_confidence_level")},
        "bounds": tags["temperature_bounds"], "n_bins": record.ece_n_bins, "binning": record.ece_scheme,
        "bootstrap_resamples": gated.bootstrap.n_resamples,
    }


def _run_metrics(gated: GatedCheckpoint) -> dict[str, float]:
    """Numeric results; undefined values (no threshold met) are left out, not logged as 0."""
    fit, choice = gated.calibrated.fit, gated.choice
    values: dict[str, float | None] = {
        "temperature": fit.temperature,
        "temperature_low": fit.temperature_low,
        "temperature_high": fit.temperature_high,
        "reference_ece": gated.reference_ece.estimate,
        "reference_ece_low": gated.reference_ece.low,
        "reference_ece_high": gated.reference_ece.high,
        "calibration_n": float(fit.n),
        "calibration_nll_before": fit.nll_before,
        "calibration_nll_after": fit.nll_after,
        "holdout_accuracy": gated.accepted.accuracy,
        "holdout_nll_before": gated.before.nll,
        "holdout_nll_after": gated.after.nll,
        "holdout_ece_before": gated.before.ece,
        "holdout_ece_after": gated.after.ece,
        "holdout_brier_before": gated.before.brier,
        "holdout_brier_after": gated.after.brier,
        "bootstrap_nll_change": gated.bootstrap.estimate,
        "bootstrap_nll_change_low": gated.bootstrap.low,
        "bootstrap_nll_change_high": gated.bootstrap.high,
        "gate_threshold": choice.threshold,
        "gate_coverage": choice.coverage,
        "gate_accepted_accuracy": choice.accepted_accuracy,
        "gate_accuracy_lower_bound": choice.accuracy_lower_bound,
    }
    return {key: float(value) for key, value in values.items() if value is not None and math.isfinite(value)}


def _sweep_frame(sweep: GateSweep) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "threshold": sweep.thresholds,
            "coverage": sweep.coverage,
            "accepted_count": sweep.accepted_count,
            "accepted_accuracy": sweep.accepted_accuracy,
            "accuracy_lower_bound": sweep.accuracy_lower_bound,
        }
    )


def _qualification_payload(report: QualificationReport) -> dict[str, Any]:
    payload = asdict(report)
    return {key: value.tolist() if isinstance(value, np.ndarray) else value for key, value in payload.items()}


def _reliability_figure(gated: GatedCheckpoint) -> Figure:
    """Before/after reliability diagrams of the evaluation part (:func:`monitoring.reliability_figure`):
    counts on each bar, sparse bins grey and hatched."""
    fit = gated.calibrated.fit
    interval = ("" if not math.isfinite(fit.temperature_low) else
                f" [{fit.temperature_low:.4g}, {fit.temperature_high:.4g}]")
    return monitoring.reliability_figure(
        gated.after.table,
        before=gated.before.table,
        captions=(f"before: T = {gated.accepted.temperature_before:.4g}, NLL {gated.before.nll:.4f}",
                  f"after: T = {gated.temperature:.4g}{interval}, NLL {gated.after.nll:.4f}"),
        title=f"{gated.accepted.checkpoint_uri}\nevaluation part n={gated.after.n}; "
        f"{binning_convention(gated.after.n_bins, gated.after.scheme)}",
    )
