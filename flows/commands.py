"""The commands of the ``thermostat`` command line: call the core, render its results.

Each command takes the scored sets it reads (already read and checked by
:func:`calibration.read_scored_set`) and its parsed options, and returns an :class:`Outcome`:
the JSON object — built from the results' own ``to_dict()``, never copied field by field —
the readable report, the warnings and the exit status. The sets go to the core as they are:
a validated :class:`~calibration.ScoredSet` is not checked again, so every logit is checked
once, when it is read. Parsing, reading and printing are :mod:`flows.cli`'s.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from calibration import (
    ScoredSet,
    check_temperature,
    choose_threshold,
    evaluate,
    fit_temperature,
    paired_bootstrap_nll,
    qualify_calibration_set,
    sweep_thresholds,
    top_label_confidence,
)

__all__ = ["COMMANDS", "EXIT_BAD_INPUT", "EXIT_COMPUTATION_FAILED", "EXIT_DID_NOT_PASS", "EXIT_OK", "Command",
           "Outcome", "in_flags"]

EXIT_OK = 0
EXIT_DID_NOT_PASS = 1
EXIT_BAD_INPUT = 2
EXIT_COMPUTATION_FAILED = 3

# The core names its Python arguments in refusals; the command line names its flags.
_FLAG_WORDING = (
    (re.compile(r"\bpass ids and training_ids\b"), "pass --training-ids FILE"),
    (re.compile(r"\bpass reference_labels\b"), "pass --reference DATA"),
    (re.compile(r"\bmax_tv_distance\b"), "--max-tv"),
    (re.compile(r"\bmin_per_class\b"), "--min-per-class"),
    (re.compile(r"\bmin_total\b"), "--min-total"),
    (re.compile(r"\bmin_count\b"), "--min-count"),
    (re.compile(r"\bn_bins\b"), "--bins"),
    (re.compile(r"\bn_resamples\b"), "--resamples"),
    (re.compile(r"\btarget_accuracy\b"), "--target-accuracy"),
    (re.compile(r"\bconfidence_level\b"), "--confidence-level"),
    (re.compile(r"\bseed must\b"), "--seed must"),
    (re.compile(r"\bbounds must satisfy\b"), "--lower and --upper must satisfy"),
    (re.compile(r"\bpass max_classes= to read_scored_set\b"), "pass --max-classes"),
    (re.compile(r"\bmax_classes\b"), "--max-classes"),
)
_SWEEP_COVERAGES = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
_MISSING = "n/a"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command produced: the JSON object, the readable report, warnings, the status."""

    payload: dict[str, Any]
    text: str
    warnings: tuple[str, ...] = ()
    status: int = EXIT_OK


Sets = Mapping[str, ScoredSet]


@dataclass(frozen=True, slots=True)
class Command:
    """A command: which of its arguments name scored sets, and what it does with them."""

    data: tuple[str, ...]
    run: Callable[[Sets, argparse.Namespace], Outcome]


def in_flags(message: str) -> str:
    """A core message with its Python argument names replaced by the command's flags.

    >>> in_flags("class 2 has 4 examples; at least 30 are required (set min_per_class to change)")
    'class 2 has 4 examples; at least 30 are required (set --min-per-class to change)'
    """
    for pattern, flag in _FLAG_WORDING:
        message = pattern.sub(flag, message)
    return message


# --------------------------------------------------------------------------- rendering


def _number(value: float | None, digits: int = 4) -> str:
    if value is None or not math.isfinite(value):
        return _MISSING
    return f"{round(value, digits) + 0.0:.{digits}f}"  # + 0.0 turns -0.0 into 0.0


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """Columns padded to a common width; ``align`` holds "l" or "r" per column (default:
    the first column left-aligned, the others, numbers, right-aligned)."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    sides = align or "l" + "r" * (len(header) - 1)

    def line(cells: Sequence[str]) -> str:
        padded = [cell.ljust(width) if side == "l" else cell.rjust(width) for cell, width, side in zip(cells, widths, sides)]
        return "  ".join(padded).rstrip()

    return "\n".join([line(header), *(line(row) for row in rows)])


def _bounds_text(bounds: Sequence[float]) -> str:
    return f"[{bounds[0]:g}, {bounds[1]:g}]"


def _at_bound_warning(temperature: float, at_bound: str | None, bounds: Sequence[float]) -> tuple[str, ...]:
    """The warning (and so exit 1) for a fit on a search bound; none for an interior fit."""
    if at_bound is None:
        return ()
    why = (
        "a small calibration set with few or no errors drives T to the lower bound; use a larger set that contains mistakes"
        if at_bound == "lower"
        else "check the label mapping and the logits, or widen --upper if a larger T is plausible"
    )
    return (
        f"the fitted temperature {temperature:g} sits on the {at_bound} bound of {_bounds_text(bounds)}; "
        f"this fit must not be registered ({why})",
    )


def _status(failures: tuple[str, ...]) -> int:
    """Exit 1 when any check did not pass (each failure is one warning line), else 0."""
    return EXIT_DID_NOT_PASS if failures else EXIT_OK


# --------------------------------------------------------------------------- commands


def _fit(sets: Sets, args: argparse.Namespace) -> Outcome:
    scored = sets["data"]
    args.progress.stage(f"fitting T on {scored.n_samples:,} x {scored.n_classes:,} logits")
    fit = fit_temperature(scored, bounds=(args.lower, args.upper))
    args.progress.stage("measuring ECE before and after")
    # One calibration pass at each temperature gives the ECE, and at T = 1 the accuracy.
    before, after = (
        evaluate(scored, temperature=t, n_bins=args.bins, scheme=args.scheme) for t in (1.0, fit.temperature)
    )
    ece_before, ece_after, top_accuracy = before.ece, after.ece, before.accuracy
    payload = {"data": args.data, **fit.to_dict(), "ece_before": ece_before, "ece_after": ece_after,
               "n_bins": args.bins, "scheme": args.scheme, "accuracy": top_accuracy, "in_sample": True}
    flag = f"  ON THE {fit.at_bound.upper()} BOUND" if fit.at_bound else ""
    rows = [
        ["NLL (mean, nats)", _number(fit.nll_before), _number(fit.nll_after)],
        [f"ECE ({args.bins} {args.scheme} bins)", _number(ece_before), _number(ece_after)],
        ["accuracy (T never changes it)", _number(top_accuracy), _number(top_accuracy)],
    ]
    text = "\n".join([
        f"{args.data}: {fit.n} examples, {fit.n_classes} classes",
        f"fitted temperature {fit.temperature:.6g} (search bounds {_bounds_text(fit.bounds)}){flag}",
        "",
        _table(["", "T = 1", f"T = {fit.temperature:.4g} (in-sample)"], rows),
        "",
        "in-sample: the T column is measured on the rows T was fitted on, which flatters it; measure on "
        "held-out rows with `thermostat compare FIT_DATA EVAL_DATA`",
    ])
    warnings = _at_bound_warning(fit.temperature, fit.at_bound, fit.bounds)
    return Outcome(payload, text, warnings, _status(warnings))


def _evaluate(sets: Sets, args: argparse.Namespace) -> Outcome:
    scored = sets["data"]
    if args.by_group and scored.groups is None:
        raise ValueError(
            f"{args.data}: has no groups; --by-group needs a 'group' column (an npz key 'groups'), or drop --by-group"
        )
    report = evaluate(
        scored, temperature=args.temperature, n_bins=args.bins, scheme=args.scheme, min_count=args.min_count,
        groups=scored.groups if args.by_group else None,
    )
    payload = {"data": args.data, **report.to_dict()}
    table = report.table
    lines = [
        f"{args.data}: {report.n} examples, {report.n_classes} classes, at T = {report.temperature:g}",
        "",
        _table(
            ["accuracy", "NLL (mean, nats)", "ECE", "MCE", "Brier", "mean confidence"],
            [[_number(report.accuracy), _number(report.nll), _number(report.ece), _number(report.mce),
              _number(report.brier), _number(report.mean_confidence)]],
        ),
        "",
        f"reliability: {report.n_bins} {report.scheme} bins; bins with fewer than {table.min_count} examples "
        f"are marked sparse (noise, not signal)",
        _table(
            ["bin", "lower", "upper", "count", "confidence", "accuracy", "gap", ""],
            [[str(m), _number(row["lower"], 3), _number(row["upper"], 3), str(row["count"]),
              _number(row["mean_confidence"]), _number(row["accuracy"]), _number(row["gap"]),
              "sparse" if row["sparse"] else ""]
             for m, row in enumerate(payload["bins"])],
        ),
    ]
    if report.groups is not None:
        breakdown = report.groups
        lines += [
            "",
            f"by group ({breakdown.n_bins} {breakdown.scheme} bins per group)",
            _table(
                ["group", "n", "ECE", "accuracy", "mean confidence"],
                [[g.group, str(g.n), _number(g.ece), _number(g.accuracy), _number(g.mean_confidence)]
                 for g in breakdown.groups],
            ),
            f"count-weighted mean of group ECEs: {_number(breakdown.weighted_ece)} (overall ECE {_number(report.ece)})",
        ]
    return Outcome(payload, "\n".join(lines))


def _sweep(sets: Sets, args: argparse.Namespace) -> Outcome:
    scored = sets["data"]
    temperature = check_temperature(args.temperature)
    predictions, confidence = top_label_confidence(scored.logits, temperature=temperature, check_finite=False)
    correct = predictions == scored.labels
    choice = choose_threshold(
        confidence, correct, target_accuracy=args.target_accuracy, confidence_level=args.confidence_level
    )
    sweep = sweep_thresholds(confidence, correct, confidence_level=args.confidence_level)
    # A short table: the lowest threshold whose coverage is at most 100%, 90%, ... (coverage
    # falls as the threshold rises), plus the chosen threshold.
    picks = {
        min(int(np.searchsorted(-sweep.coverage, -level - 1e-12, side="left")), len(sweep.thresholds) - 1)
        for level in _SWEEP_COVERAGES
    }
    if choice.threshold is not None:
        picks.add(int(np.searchsorted(sweep.thresholds, choice.threshold, side="left")))
    rows = sweep.rows(sorted(picks))
    payload = {"data": args.data, "temperature": temperature, "n": scored.n_samples, **choice.to_dict(),
               "table": rows}
    level = f"{choice.confidence_level:.0%}"
    chosen = choice.threshold
    text = "\n".join([
        f"{args.data}: {scored.n_samples} examples, confidences at T = {temperature:g}",
        f"gate: auto-process when confidence >= threshold; target accepted accuracy {choice.target_accuracy:g} "
        f"(lower end of the {level} Wilson interval)",
        "",
        _table(
            ["threshold", "coverage", "accepted", "accuracy", f"lower bound ({level})", ""],
            [[_number(row["threshold"]), f"{row['coverage']:.1%}", str(row["accepted_count"]),
              _number(row["accepted_accuracy"]), _number(row["accuracy_lower_bound"]),
              "<- chosen" if chosen is not None and row["threshold"] == chosen else ""]
             for row in rows],
        ),
        "",
        choice.reason,
    ])
    warnings = () if choice.met else (f"no threshold meets the target: {choice.reason}",)
    return Outcome(payload, text, warnings, _status(warnings))


def _read_training_ids(path: str) -> list[str]:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ValueError(f"{path}: training-ids file not found; give a text file with one id per line") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the training-ids file ({exc}); give UTF-8 text, one id per line") from exc
    return [line.strip() for line in text.splitlines() if line.strip()]


def _same_classes(first: ScoredSet, first_name: str, second: ScoredSet, second_name: str) -> None:
    if first.n_classes != second.n_classes:
        raise ValueError(
            f"{second_name}: has {second.n_classes} classes but {first_name} has {first.n_classes}; "
            f"both must score the same K classes"
        )


def _qualify(sets: Sets, args: argparse.Namespace) -> Outcome:
    scored = sets["data"]
    training_ids = None if args.training_ids is None else _read_training_ids(args.training_ids)
    reference = sets.get("reference")
    if reference is not None:
        _same_classes(scored, args.data, reference, args.reference)
    report = qualify_calibration_set(
        scored, ids=scored.ids, training_ids=training_ids,
        reference_labels=None if reference is None else reference.labels,
        min_total=args.min_total, min_per_class=args.min_per_class, max_tv_distance=args.max_tv,
    )
    result = report.to_dict()
    payload = {"data": args.data, "training_ids": args.training_ids, "reference": args.reference, **result,
               "failures": [in_flags(failure) for failure in result["failures"]],
               "warnings": [in_flags(warning) for warning in result["warnings"]]}
    checks = [
        ["examples", str(report.n), f">= {report.min_total}"],
        ["smallest class", str(int(np.min(report.class_counts))), f">= {report.min_per_class} per class"],
        ["errors in the set", str(report.n_errors), "> 0 (else T goes to the lower bound)"],
        ["ids shared with training", _MISSING if training_ids is None else str(report.id_overlap), "0"],
        ["class-proportion TV distance", _number(report.tv_distance), f"<= {report.max_tv_distance:g}"],
    ]
    lines = [
        f"{args.data}: {report.n} examples, {report.n_classes} classes: "
        + ("QUALIFIES as a calibration set" if report.passed else "DOES NOT QUALIFY as a calibration set"),
        "",
        _table(["check", "value", "required"], checks, align="lrl"),
    ]
    lines += [f"failure: {failure}" for failure in payload["failures"]]
    lines += [f"warning: {warning}" for warning in payload["warnings"]]
    return Outcome(payload, "\n".join(lines), status=EXIT_OK if report.passed else EXIT_DID_NOT_PASS)


def _is_row_index(ids: np.ndarray[Any, Any]) -> bool:
    return bool(np.array_equal(ids, np.arange(ids.shape[0]).astype(str)))


def _compare(sets: Sets, args: argparse.Namespace) -> Outcome:
    fit_set, eval_set = sets["fit_data"], sets["eval_data"]
    _same_classes(fit_set, args.fit_data, eval_set, args.eval_data)
    if Path(args.fit_data).resolve() == Path(args.eval_data).resolve():
        raise ValueError(
            f"{args.eval_data}: is also FIT_DATA; test data never chooses T, so evaluate on a split not used to fit"
        )
    id_overlap: int | None = None
    warnings: tuple[str, ...] = ()
    if not (_is_row_index(fit_set.ids) or _is_row_index(eval_set.ids)):
        shared = np.intersect1d(fit_set.ids, eval_set.ids)
        id_overlap = int(shared.size)
        if id_overlap:
            warnings = (f"{id_overlap} ids of {args.eval_data} also appear in {args.fit_data} (e.g. "
                        f"{str(shared[0])!r}); evaluate on examples not used to fit T, or the improvement is flattered",)
    args.progress.stage(f"fitting T on {fit_set.n_samples:,} x {fit_set.n_classes:,} logits")
    fit = fit_temperature(fit_set, bounds=(args.lower, args.upper))
    args.progress.stage(f"evaluating on {args.eval_data} and bootstrapping the NLL change")
    before, after = (
        evaluate(eval_set, temperature=t, n_bins=args.bins, scheme=args.scheme).summary()
        for t in (1.0, fit.temperature)
    )
    comparison = paired_bootstrap_nll(
        eval_set, temperature_before=1.0, temperature_after=fit.temperature,
        n_resamples=args.resamples, confidence_level=args.confidence_level, seed=args.seed,
    )
    fitted = fit.to_dict()
    payload = {"fit_data": args.fit_data, "eval_data": args.eval_data,
               **{key: fitted[key] for key in ("temperature", "at_bound", "bounds")},
               "fit_n": fit.n, "eval_n": eval_set.n_samples, "n_classes": fit.n_classes, "n_bins": args.bins,
               "scheme": args.scheme, "before": before, "after": after, "nll_difference": comparison.to_dict(),
               "verdict": comparison.verdict, "id_overlap": id_overlap}
    names = [("NLL (mean, nats)", "nll"), (f"ECE ({args.bins} {args.scheme} bins)", "ece"), ("MCE", "mce"),
             ("Brier", "brier"), ("accuracy", "accuracy"), ("mean confidence", "mean_confidence")]
    text = "\n".join([
        f"fitted T = {fit.temperature:.6g} on {args.fit_data} ({fit.n} examples, bounds {_bounds_text(fit.bounds)})",
        f"evaluated on {args.eval_data} ({eval_set.n_samples} examples)",
        "",
        _table(["", "T = 1", f"T = {fit.temperature:.4g}"],
               [[label, _number(before[key]), _number(after[key])] for label, key in names]),
        "",
        f"NLL change (after - before): {comparison.estimate:+.4f} nats, {comparison.confidence_level:.0%} "
        f"paired-bootstrap interval [{comparison.low:+.4f}, {comparison.high:+.4f}] "
        f"({comparison.n_resamples} resamples, seed {comparison.seed})",
        f"verdict: {comparison.verdict}",
    ])
    failed = _at_bound_warning(fit.temperature, fit.at_bound, fit.bounds)
    if comparison.verdict != "improved":
        failed += (f"the improvement is not established on {args.eval_data}: verdict {comparison.verdict!r}",)
    return Outcome(payload, text, (*warnings, *failed), _status(failed))


COMMANDS: dict[str, Command] = {
    "fit": Command(("data",), _fit),
    "evaluate": Command(("data",), _evaluate),
    "sweep": Command(("data",), _sweep),
    "qualify": Command(("data", "reference"), _qualify),
    "compare": Command(("fit_data", "eval_data"), _compare),
}
