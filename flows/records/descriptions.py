"""A registered version's MLflow description: what matters of its record, on the UI's first screen.

MLflow's version page shows the description (Markdown) above the version's tags, which it lists
alphabetically, a few per page; T, its interval and the gate threshold would otherwise be lost
among them. :func:`version_description` writes it from the :class:`flows.records.versions.VersionRecord`
the tags hold (nothing is read back from it: the tags stay the record). No MLflow here.
"""

from __future__ import annotations

from flows.records.versions import VersionRecord

__all__ = ["version_description"]


def _number(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def version_description(record: VersionRecord, *, run_id: str, run_link: str | None) -> str:
    """The Markdown description of a version registered with ``record``, its evidence in MLflow run
    ``run_id`` (linked when ``run_link`` is given).

    Three paragraphs: T with its interval and the gate threshold with what it achieved; the
    verdict of the paired bootstrap with the holdout figures it rests on (and, for a refit, its
    parent and verification; for a prior correction, the priors); the evidence run and the checkpoint.

    Examples
    --------
    >>> text = version_description(VersionRecord.example(), run_id="ab12", run_link=None)
    >>> print(text.splitlines()[0])
    **T = 2.5** (95% interval 2.3 – 2.7; search bounds 0.05 – 20) · **gate threshold 0.9000** (coverage 80.0%, accepted accuracy 98.5%; target 97.0% at 95% confidence)
    >>> "**Verdict: improved**" in text, "MLflow run `ab12`" in text
    (True, True)
    """
    level = "" if record.temperature_confidence_level is None else f"{100 * record.temperature_confidence_level:.0f}% "
    interval = ("no interval stored" if record.temperature_interval is None else
                f"{level}interval {_number(record.temperature_low)} – {_number(record.temperature_high)}")
    bounds = f"search bounds {_number(record.temperature_bounds[0])} – {_number(record.temperature_bounds[1])}"
    gate = ("**no gate threshold** (no threshold met the target: everything goes to review)"
            if record.gate_threshold is None else
            f"**gate threshold {record.gate_threshold:.4f}** (coverage {_percent(record.gate_coverage)}, accepted "
            f"accuracy {_percent(record.gate_accepted_accuracy)}; target {_percent(record.gate_target_accuracy)} at "
            f"{100 * record.gate_confidence_level:.0f}% confidence)")
    paragraphs = [f"**T = {_number(record.temperature)}** ({interval}; {bounds}) · {gate}", _verdict(record)]
    if record.refit is not None:
        refit = record.refit
        paragraphs.append(f"Refit of version {refit.parent_version} (T {_number(refit.parent_temperature)}) on "
                          f"{refit.fit_n} rows of its traffic ({refit.traffic_window}), verified on {refit.verify_n} "
                          f"newer rows: {refit.verification}.")
    if record.prior_correction is not None:
        correction = record.prior_correction
        paragraphs.append(f"Prior correction: the posteriors at T are re-weighted to the class priors "
                          f"{[round(p, 4) for p in correction.priors]} (calibrated for "
                          f"{[round(p, 4) for p in correction.reference_priors]}).")
    run = f"[`{run_id}`]({run_link})" if run_link else f"`{run_id}`"
    paragraphs.append(
        f"Evidence: MLflow run {run} (its `evidence/` artifacts). Checkpoint `{record.checkpoint_uri}` (digest "
        f"`{record.checkpoint_digest[:12]}`), {record.train_steps} training steps on `{record.train_data_version}`; "
        "every figure is also a tag of this version.")
    return "\n\n".join(paragraphs)


def _verdict(record: VersionRecord) -> str:
    """The bootstrap's verdict on the NLL change and the holdout figures it rests on."""
    change = ("" if record.bootstrap_nll_change is None else
              f"; paired bootstrap of the change {_number(record.bootstrap_nll_change)} "
              f"[{_number(record.bootstrap_nll_change_low)}, {_number(record.bootstrap_nll_change_high)}] at "
              f"{100 * record.bootstrap_confidence_level:.0f}%")
    return (f"**Verdict: {record.bootstrap_verdict}** — {record.nll_reduction} NLL {_number(record.holdout_nll_before)}"
            f" → {_number(record.holdout_nll_after)}{change}; ECE {_number(record.holdout_ece_before, 3)} → "
            f"{_number(record.holdout_ece_after, 3)} ({record.ece_scheme}, {record.ece_n_bins} bins); accuracy "
            f"{_number(record.holdout_accuracy)}; n = {record.holdout_metrics_n}, {record.holdout_metrics_split}.")
