"""The ``thermostat`` command line: fit, evaluate, sweep, qualify, compare, demo.

Every command reads scored sets (``.npz``, ``.parquet`` or ``.csv``; see
:func:`calibration.read_scored_set`), calls the core in :mod:`calibration`, and prints a readable,
aligned report, or with ``--json`` exactly one JSON object on stdout. Nothing is ever
written to disk. NaN and infinities print as JSON ``null`` (undefined, e.g. the accuracy of
an empty bin), so the output is always valid JSON.

Exit status (one contract for every command)
---------------------------------------------
0
    The command ran and its result passed its check.
1
    The command ran and printed its report, but the result did not pass: ``qualify`` found
    the set does not qualify; ``sweep`` found no threshold that meets the target; ``fit`` or
    ``compare`` fitted a temperature on a search bound (such a fit must never be
    registered); ``compare`` could not establish an improvement. The reason is on stderr as
    ``thermostat: warning: <message>`` (``qualify``: in the report).
2
    Bad input: an unreadable or refused scored set, an option value out of range, a usage
    error. The message is on stderr as ``thermostat: error: <message>`` and names the file,
    the column or row, or the flag; nothing is printed on stdout and nothing is written.
3
    The computation itself failed (a numerical routine gave up); the message is on stderr.

Refusals name the command-line flags (``--max-tv``), not the Python API's arguments. Work
that takes more than a few seconds says on stderr what it is doing (the first large fit
also compiles the numeric kernels, about half a minute, once per installation).

JSON keys
---------
``fit``
    data, temperature, at_bound (false, "lower" or "upper"), bounds ([lower, upper]),
    nll_before, nll_after (mean NLL in nats at T = 1 and at T), nll_reduction ("mean"),
    ece_before, ece_after, n_bins, scheme, accuracy, n, n_classes, in_sample (true: the
    "after" figures are measured on the rows T was fitted on, so they flatter T; measure
    on held-out rows with ``compare``).
``evaluate``
    data, n, n_classes, temperature, accuracy, nll, ece, mce, brier, mean_confidence,
    n_bins, scheme, min_count, bins (a list of {lower, upper, count, mean_confidence,
    accuracy, gap, sparse}); with ``--by-group`` also groups (a list of {group, n, ece,
    accuracy, mean_confidence}) and group_weighted_ece.
``sweep``
    data, temperature, n, target_accuracy, confidence_level, threshold (null when no
    threshold meets the target), met, reason, coverage, accepted_count, accepted_accuracy,
    accuracy_lower_bound, table (a short list of {threshold, coverage, accepted_count,
    accepted_accuracy, accuracy_lower_bound} at coverages near 100%, 90%, ..., 10% and at
    the chosen threshold).
``qualify``
    data, training_ids, reference (the paths given, or null), passed, failures (list of
    sentences), warnings (list of sentences), n, n_classes, class_counts (list), n_errors,
    id_overlap, tv_distance (null without ``--reference``), min_total, min_per_class,
    max_tv_distance.
``compare``
    fit_data, eval_data, temperature, at_bound (false, "lower" or "upper"), bounds, fit_n, eval_n, n_classes, n_bins,
    scheme, before and after (each {temperature, nll, ece, mce, brier, accuracy,
    mean_confidence} on EVAL_DATA), nll_difference ({estimate, low, high,
    confidence_level, n_resamples, seed}: mean NLL after - before, paired bootstrap
    percentile interval), verdict ("improved", "worse" or "not established"), id_overlap
    (ids present in both files; null when either file's ids are just row numbers).

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import numpy as np

from calibration import (
    DEFAULT_BOUNDS,
    MAX_CLASSES,
    ScoredSet,
    ScoredSetError,
    accuracy,
    choose_threshold,
    evaluate,
    expected_calibration_error,
    fit_temperature,
    paired_bootstrap_nll,
    qualify_calibration_set,
    read_scored_set,
    sweep_thresholds,
)
from calibration import CalibrationReport, check_temperature, top_label_confidence
from flows.local_only import stay_local

__all__ = ["main"]

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

_SCHEMES = ("equal-width", "equal-mass")
_SWEEP_COVERAGES = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
_MISSING = "n/a"


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What a command produced: the JSON object, the readable report, warnings, the status."""

    payload: dict[str, Any]
    text: str
    warnings: tuple[str, ...] = ()
    status: int = EXIT_OK


def _in_flags(message: str) -> str:
    """A core message with its Python argument names replaced by the command's flags.

    >>> _in_flags("class 2 has 4 examples; at least 30 are required (set min_per_class to change)")
    'class 2 has 4 examples; at least 30 are required (set --min-per-class to change)'
    """
    for pattern, flag in _FLAG_WORDING:
        message = pattern.sub(flag, message)
    return message


class _Progress:
    """Says on stderr what a command is doing once it has run for more than a few seconds.

    Quiet for fast commands; a large fit (and the first one, which compiles the numeric
    kernels) gets a line after ``first`` seconds and another every ``every`` seconds.
    """

    def __init__(self, first: float = 3.0, every: float = 15.0) -> None:
        self._first, self._every = first, every
        self._stage = "starting"
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._report, name="thermostat-progress", daemon=True)
        self._started = time.monotonic()

    def stage(self, text: str) -> None:
        self._stage = text

    def __enter__(self) -> _Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()

    def _report(self) -> None:
        wait, compiling = self._first, " (the first large fit also compiles the numeric kernels, once: ~30 s)"
        while not self._done.wait(wait):
            print(f"thermostat: still working after {time.monotonic() - self._started:.0f} s: {self._stage}"
                  f"{compiling}", file=sys.stderr, flush=True)
            wait, compiling = self._every, ""


# --------------------------------------------------------------------------- formatting


def _jsonable(value: Any) -> Any:
    """Plain JSON types; NaN and infinities become None (JSON null), arrays become lists."""
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, np.ndarray):
        return [_jsonable(item) for item in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


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


# --------------------------------------------------------------------------- commands


def _read(path: str, args: argparse.Namespace) -> ScoredSet:
    args.progress.stage(f"reading {path}")
    return read_scored_set(path, max_classes=args.max_classes)


def _status(*warnings: tuple[str, ...]) -> int:
    """Exit 1 when any check did not pass (each failure is one warning line), else 0."""
    return EXIT_DID_NOT_PASS if any(warnings) else EXIT_OK


def _fit(args: argparse.Namespace) -> _Outcome:
    scored = _read(args.data, args)
    args.progress.stage(f"fitting T on {scored.n_samples:,} x {scored.n_classes:,} logits")
    fit = fit_temperature(scored.logits, scored.labels, bounds=(args.lower, args.upper))
    args.progress.stage("measuring ECE before and after")
    ece_before = expected_calibration_error(
        scored.logits, scored.labels, temperature=1.0, n_bins=args.bins, scheme=args.scheme
    )
    ece_after = expected_calibration_error(
        scored.logits, scored.labels, temperature=fit.temperature, n_bins=args.bins, scheme=args.scheme
    )
    top_accuracy = accuracy(scored.logits, scored.labels)
    payload = {
        "data": args.data,
        "temperature": fit.temperature,
        "at_bound": fit.at_bound or False,
        "bounds": list(fit.bounds),
        "nll_before": fit.nll_before,
        "nll_after": fit.nll_after,
        "nll_reduction": fit.nll_reduction,
        "ece_before": ece_before,
        "ece_after": ece_after,
        "n_bins": args.bins,
        "scheme": args.scheme,
        "accuracy": top_accuracy,
        "n": fit.n,
        "n_classes": fit.n_classes,
        "in_sample": True,
    }
    flag = f"  ON THE {fit.at_bound.upper()} BOUND" if fit.at_bound else ""
    rows = [
        ["NLL (mean, nats)", _number(fit.nll_before), _number(fit.nll_after)],
        [f"ECE ({args.bins} {args.scheme} bins)", _number(ece_before), _number(ece_after)],
        ["accuracy (T never changes it)", _number(top_accuracy), _number(top_accuracy)],
    ]
    text = "\n".join(
        [
            f"{args.data}: {fit.n} examples, {fit.n_classes} classes",
            f"fitted temperature {fit.temperature:.6g} (search bounds {_bounds_text(fit.bounds)}){flag}",
            "",
            _table(["", "T = 1", f"T = {fit.temperature:.4g} (in-sample)"], rows),
            "",
            "in-sample: the T column is measured on the rows T was fitted on, which flatters it; measure on "
            "held-out rows with `thermostat compare FIT_DATA EVAL_DATA`",
        ]
    )
    warnings = _at_bound_warning(fit.temperature, fit.at_bound, fit.bounds)
    return _Outcome(payload, text, warnings, _status(warnings))


def _report_payload(report: CalibrationReport) -> dict[str, Any]:
    table = report.table
    bins = [
        {
            "lower": table.lower[m],
            "upper": table.upper[m],
            "count": table.count[m],
            "mean_confidence": table.mean_confidence[m],
            "accuracy": table.accuracy[m],
            "gap": table.gap[m],
            "sparse": table.sparse[m],
        }
        for m in range(len(table.count))
    ]
    return {
        "n": report.n,
        "n_classes": report.n_classes,
        "temperature": report.temperature,
        "accuracy": report.accuracy,
        "nll": report.nll,
        "ece": report.ece,
        "mce": report.mce,
        "brier": report.brier,
        "mean_confidence": report.mean_confidence,
        "n_bins": report.n_bins,
        "scheme": report.scheme,
        "min_count": table.min_count,
        "bins": bins,
    }


def _evaluate(args: argparse.Namespace) -> _Outcome:
    scored = _read(args.data, args)
    if args.by_group and scored.groups is None:
        raise ValueError(
            f"{args.data}: has no groups; --by-group needs a 'group' column (an npz key 'groups'), "
            f"or drop --by-group"
        )
    report = evaluate(
        scored.logits,
        scored.labels,
        temperature=args.temperature,
        n_bins=args.bins,
        scheme=args.scheme,
        min_count=args.min_count,
        groups=scored.groups if args.by_group else None,
    )
    payload: dict[str, Any] = {"data": args.data, **_report_payload(report)}
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
            [
                [str(m), _number(table.lower[m], 3), _number(table.upper[m], 3), str(int(table.count[m])),
                 _number(table.mean_confidence[m]), _number(table.accuracy[m]), _number(table.gap[m]),
                 "sparse" if table.sparse[m] else ""]
                for m in range(len(table.count))
            ],
        ),
    ]
    if report.groups is not None:
        breakdown = report.groups
        payload["groups"] = [
            {"group": g.group, "n": g.n, "ece": g.ece, "accuracy": g.accuracy, "mean_confidence": g.mean_confidence}
            for g in breakdown.groups
        ]
        payload["group_weighted_ece"] = breakdown.weighted_ece
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
    return _Outcome(payload, "\n".join(lines))


def _sweep(args: argparse.Namespace) -> _Outcome:
    scored = _read(args.data, args)
    temperature = check_temperature(args.temperature)
    predictions, confidence = top_label_confidence(scored.logits, temperature=temperature, check_finite=False)
    correct = predictions == scored.labels
    choice = choose_threshold(
        confidence, correct, target_accuracy=args.target_accuracy, confidence_level=args.confidence_level
    )
    sweep = sweep_thresholds(confidence, correct, confidence_level=args.confidence_level)
    # A short table: the lowest threshold whose coverage is at most 100%, 90%, ... (coverage
    # falls as the threshold rises), plus the chosen threshold.
    coverage_descending = -sweep.coverage
    picks = {
        min(int(np.searchsorted(coverage_descending, -level - 1e-12, side="left")), len(sweep.thresholds) - 1)
        for level in _SWEEP_COVERAGES
    }
    if choice.threshold is not None:
        picks.add(int(np.searchsorted(sweep.thresholds, choice.threshold, side="left")))
    rows = [
        {
            "threshold": sweep.thresholds[i],
            "coverage": sweep.coverage[i],
            "accepted_count": sweep.accepted_count[i],
            "accepted_accuracy": sweep.accepted_accuracy[i],
            "accuracy_lower_bound": sweep.accuracy_lower_bound[i],
        }
        for i in sorted(picks)
    ]
    payload = {
        "data": args.data,
        "temperature": temperature,
        "n": scored.n_samples,
        "target_accuracy": choice.target_accuracy,
        "confidence_level": choice.confidence_level,
        "threshold": choice.threshold,
        "met": choice.met,
        "reason": choice.reason,
        "coverage": choice.coverage,
        "accepted_count": choice.accepted_count,
        "accepted_accuracy": choice.accepted_accuracy,
        "accuracy_lower_bound": choice.accuracy_lower_bound,
        "table": rows,
    }
    level = f"{choice.confidence_level:.0%}"
    chosen = choice.threshold
    text = "\n".join(
        [
            f"{args.data}: {scored.n_samples} examples, confidences at T = {temperature:g}",
            f"gate: auto-process when confidence >= threshold; target accepted accuracy {choice.target_accuracy:g} "
            f"(lower end of the {level} Wilson interval)",
            "",
            _table(
                ["threshold", "coverage", "accepted", "accuracy", f"lower bound ({level})", ""],
                [
                    [_number(row["threshold"]), f"{row['coverage']:.1%}", str(int(row["accepted_count"])),
                     _number(row["accepted_accuracy"]), _number(row["accuracy_lower_bound"]),
                     "<- chosen" if chosen is not None and row["threshold"] == chosen else ""]
                    for row in rows
                ],
            ),
            "",
            choice.reason,
        ]
    )
    warnings = () if choice.met else (f"no threshold meets the target: {choice.reason}",)
    return _Outcome(payload, text, warnings, _status(warnings))


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


def _qualify(args: argparse.Namespace) -> _Outcome:
    scored = _read(args.data, args)
    training_ids = None if args.training_ids is None else _read_training_ids(args.training_ids)
    reference_labels = None
    if args.reference is not None:
        reference = _read(args.reference, args)
        _same_classes(scored, args.data, reference, args.reference)
        reference_labels = reference.labels
    report = qualify_calibration_set(
        scored.logits,
        scored.labels,
        ids=scored.ids,
        training_ids=training_ids,
        reference_labels=reference_labels,
        min_total=args.min_total,
        min_per_class=args.min_per_class,
        max_tv_distance=args.max_tv,
    )
    payload = {
        "data": args.data,
        "training_ids": args.training_ids,
        "reference": args.reference,
        "passed": report.passed,
        "failures": [_in_flags(failure) for failure in report.failures],
        "warnings": [_in_flags(warning) for warning in report.warnings],
        "n": report.n,
        "n_classes": report.n_classes,
        "class_counts": report.class_counts,
        "n_errors": report.n_errors,
        "id_overlap": report.id_overlap,
        "tv_distance": report.tv_distance,
        "min_total": report.min_total,
        "min_per_class": report.min_per_class,
        "max_tv_distance": report.max_tv_distance,
    }
    checks = [
        ["examples", str(report.n), f">= {report.min_total}"],
        ["smallest class", str(int(np.min(report.class_counts))), f">= {report.min_per_class} per class"],
        ["errors in the set", str(report.n_errors), "> 0 (else T goes to the lower bound)"],
        ["ids shared with training",
         _MISSING if training_ids is None else str(report.id_overlap), "0"],
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
    return _Outcome(payload, "\n".join(lines), status=EXIT_OK if report.passed else EXIT_DID_NOT_PASS)


def _is_row_index(ids: np.ndarray[Any, Any]) -> bool:
    return bool(np.array_equal(ids, np.arange(ids.shape[0]).astype(str)))


def _compare(args: argparse.Namespace) -> _Outcome:
    fit_set = _read(args.fit_data, args)
    eval_set = _read(args.eval_data, args)
    _same_classes(fit_set, args.fit_data, eval_set, args.eval_data)
    fit_path, eval_path = Path(args.fit_data), Path(args.eval_data)
    if fit_path.resolve() == eval_path.resolve():
        raise ValueError(
            f"{args.eval_data}: is also FIT_DATA; test data never chooses T, so evaluate on a split not used to fit"
        )
    id_overlap: int | None = None
    warnings: list[str] = []
    if not (_is_row_index(fit_set.ids) or _is_row_index(eval_set.ids)):
        shared = np.intersect1d(fit_set.ids, eval_set.ids)
        id_overlap = int(shared.size)
        if id_overlap:
            warnings.append(
                f"{id_overlap} ids of {args.eval_data} also appear in {args.fit_data} (e.g. {str(shared[0])!r}); "
                f"evaluate on examples not used to fit T, or the improvement is flattered"
            )
    args.progress.stage(f"fitting T on {fit_set.n_samples:,} x {fit_set.n_classes:,} logits")
    fit = fit_temperature(fit_set.logits, fit_set.labels, bounds=(args.lower, args.upper))
    args.progress.stage(f"evaluating on {args.eval_data} and bootstrapping the NLL change")
    reports = [
        evaluate(eval_set.logits, eval_set.labels, temperature=temperature, n_bins=args.bins, scheme=args.scheme)
        for temperature in (1.0, fit.temperature)
    ]
    comparison = paired_bootstrap_nll(
        eval_set.logits,
        eval_set.labels,
        temperature_before=1.0,
        temperature_after=fit.temperature,
        n_resamples=args.resamples,
        confidence_level=args.confidence_level,
        seed=args.seed,
    )
    before, after = (
        {
            "temperature": report.temperature,
            "nll": report.nll,
            "ece": report.ece,
            "mce": report.mce,
            "brier": report.brier,
            "accuracy": report.accuracy,
            "mean_confidence": report.mean_confidence,
        }
        for report in reports
    )
    payload = {
        "fit_data": args.fit_data,
        "eval_data": args.eval_data,
        "temperature": fit.temperature,
        "at_bound": fit.at_bound or False,
        "bounds": list(fit.bounds),
        "fit_n": fit.n,
        "eval_n": eval_set.n_samples,
        "n_classes": fit.n_classes,
        "n_bins": args.bins,
        "scheme": args.scheme,
        "before": before,
        "after": after,
        "nll_difference": {
            "estimate": comparison.estimate,
            "low": comparison.low,
            "high": comparison.high,
            "confidence_level": comparison.confidence_level,
            "n_resamples": comparison.n_resamples,
            "seed": comparison.seed,
        },
        "verdict": comparison.verdict,
        "id_overlap": id_overlap,
    }
    names = [
        ("NLL (mean, nats)", "nll"),
        (f"ECE ({args.bins} {args.scheme} bins)", "ece"),
        ("MCE", "mce"),
        ("Brier", "brier"),
        ("accuracy", "accuracy"),
        ("mean confidence", "mean_confidence"),
    ]
    text = "\n".join(
        [
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
        ]
    )
    failed = _at_bound_warning(fit.temperature, fit.at_bound, fit.bounds)
    if comparison.verdict != "improved":
        failed += (f"the improvement is not established on {args.eval_data}: verdict {comparison.verdict!r}",)
    return _Outcome(payload, text, (*warnings, *failed), _status(failed))


def _demo(argv: list[str]) -> int:
    """Hand over to ``flows.demo.main``, imported only when asked for (it pulls MLflow and Prefect)."""
    stay_local()  # before MLflow and Prefect are imported: nothing may leave the machine
    try:
        demo = importlib.import_module("flows.demo")
    except ModuleNotFoundError as exc:
        if exc.name != "flows.demo":
            raise
        print("thermostat: error: the demo is not available: flows/demo.py is missing from this installation",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return int(cast(Callable[[list[str]], int], demo.main)(argv))
    except SystemExit as exc:  # the demo's own argparse: --help, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT


# --------------------------------------------------------------------------- parser

_EXIT_TEXT = """\
exit status (every command): 0 ran and passed; 1 ran and printed its report, but the
result did not pass (qualify: not qualified; sweep: no threshold meets the target;
fit/compare: T on a search bound; compare: improvement not established), the reason
on stderr; 2 bad input (unreadable or refused data, an option out of range): the
message on stderr names the file, column, row or flag, nothing is printed on stdout
and nothing is written; 3 the computation failed."""

_KEYS = {
    "fit": "data, temperature, at_bound (false|lower|upper), bounds, nll_before, nll_after, nll_reduction, "
    "ece_before, ece_after (in-sample), n_bins, scheme, accuracy, n, n_classes, in_sample",
    "evaluate": "data, n, n_classes, temperature, accuracy, nll, ece, mce, brier, mean_confidence, "
    "n_bins, scheme, min_count, bins [{lower, upper, count, mean_confidence, accuracy, gap, sparse}]; "
    "with --by-group also groups [{group, n, ece, accuracy, mean_confidence}] and group_weighted_ece",
    "sweep": "data, temperature, n, target_accuracy, confidence_level, threshold, met, reason, coverage, "
    "accepted_count, accepted_accuracy, accuracy_lower_bound, table [{threshold, coverage, "
    "accepted_count, accepted_accuracy, accuracy_lower_bound}]",
    "qualify": "data, training_ids, reference, passed, failures, warnings, n, n_classes, class_counts, "
    "n_errors, id_overlap, tv_distance, min_total, min_per_class, max_tv_distance",
    "compare": "fit_data, eval_data, temperature, at_bound (false|lower|upper), bounds, fit_n, eval_n, n_classes, n_bins, "
    "scheme, before {temperature, nll, ece, mce, brier, accuracy, mean_confidence}, after {same}, "
    "nll_difference {estimate, low, high, confidence_level, n_resamples, seed}, verdict, id_overlap",
}

_DATA_HELP = "scored set: .npz (logits|probs, labels, ids, groups), .parquet or .csv (id, label, group, logit_0..)"


def _epilog(command: str) -> str:
    return f"--json keys: {_KEYS[command]}. NaN prints as null.\n\n{_EXIT_TEXT}"


def _version() -> str:
    try:
        return metadata.version("thermostat")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="thermostat",
        description="Temperature scaling for classifier calibration: fit T, measure calibration, "
        "sweep the gate threshold, qualify calibration data, compare before and after.",
        epilog="JSON keys per command: see `thermostat COMMAND --help`.\n\n" + _EXIT_TEXT,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"thermostat {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, run: Callable[[argparse.Namespace], _Outcome]) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text, epilog=_epilog(name),
                                  formatter_class=formatter)
        sub.set_defaults(run=run)
        return sub

    def binning(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--bins", type=int, default=15, metavar="M", help="number of ECE bins (default 15)")
        sub.add_argument("--scheme", choices=_SCHEMES, default="equal-width", help="ECE binning (default equal-width)")

    def bounds(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--lower", type=float, default=DEFAULT_BOUNDS[0], help="lowest T searched (default 0.05)")
        sub.add_argument("--upper", type=float, default=DEFAULT_BOUNDS[1], help="highest T searched (default 20)")

    def json_flag(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
        sub.add_argument("--max-classes", type=int, default=MAX_CLASSES, metavar="K",
                         help=f"refuse data with more classes than this before reading rows (default {MAX_CLASSES:,})")

    fit = command("fit", "fit T by minimising mean NLL over log T inside bounds", _fit)
    fit.add_argument("data", metavar="DATA", help=_DATA_HELP)
    bounds(fit)
    binning(fit)
    json_flag(fit)

    ev = command("evaluate", "accuracy, NLL, ECE, MCE, Brier and the reliability table at a temperature", _evaluate)
    ev.add_argument("data", metavar="DATA", help=_DATA_HELP)
    ev.add_argument("--temperature", type=float, default=1.0, metavar="T", help="divide logits by T (default 1)")
    binning(ev)
    ev.add_argument("--by-group", action="store_true", help="per-group ECE and their count-weighted mean")
    ev.add_argument("--min-count", type=int, default=10, help="bins with fewer examples are sparse (default 10)")
    json_flag(ev)

    sw = command("sweep", "choose the gate threshold on confidences calibrated at T", _sweep)
    sw.add_argument("data", metavar="DATA", help=_DATA_HELP)
    sw.add_argument("--temperature", type=float, required=True, metavar="T",
                    help="the T in force; a threshold from another T measures something else")
    sw.add_argument("--target-accuracy", type=float, required=True, metavar="A",
                    help="required accepted accuracy (its Wilson lower bound must reach A)")
    sw.add_argument("--confidence-level", type=float, default=0.95, help="Wilson interval level (default 0.95)")
    json_flag(sw)

    qu = command("qualify", "check size, class coverage, disjointness from training and representativeness", _qualify)
    qu.add_argument("data", metavar="DATA", help=_DATA_HELP)
    qu.add_argument("--training-ids", metavar="FILE", help="text file of training example ids, one per line")
    qu.add_argument("--reference", metavar="DATA", help="scored set of recent traffic: its class proportions")
    qu.add_argument("--min-total", type=int, default=300, help="minimum examples (default 300)")
    qu.add_argument("--min-per-class", type=int, default=30, help="minimum examples per class (default 30)")
    qu.add_argument("--max-tv", type=float, default=0.15,
                    help="maximum total-variation distance of class proportions to --reference (default 0.15)")
    json_flag(qu)

    co = command("compare", "fit T on FIT_DATA, evaluate before/after on EVAL_DATA with a paired bootstrap", _compare)
    co.add_argument("fit_data", metavar="FIT_DATA", help="scored set that chooses T")
    co.add_argument("eval_data", metavar="EVAL_DATA", help="held-out scored set that measures the effect")
    bounds(co)
    binning(co)
    co.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    co.add_argument("--confidence-level", type=float, default=0.95, help="interval level (default 0.95)")
    co.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    json_flag(co)

    # Listed for --help only: main() hands `demo ...` to flows.demo before parsing.
    commands.add_parser("demo", help="run the end-to-end demo (flows.demo); arguments pass through", add_help=False)
    commands.add_parser("lock", help="show or clear a model's registration lock: lock show|clear MODEL [--json]",
                        add_help=False)
    return parser


# --------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    """Run the ``thermostat`` command line and return its exit status.

    Parameters
    ----------
    argv : list of str, optional
        Arguments after the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 ran and passed; 1 ran, but the result did not pass its check; 2 bad input (message
        on stderr, nothing on stdout, nothing written); 3 the computation failed.

    Examples
    --------
    >>> main(["fit", "no-such-file.npz"])  # the message goes to stderr
    2
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["demo"]:
        return _demo(arguments[1:])
    if arguments[:1] == ["lock"]:  # imported only when asked for: it reads the settings and a database
        from flows.locks import main as lock_main

        return lock_main(arguments[1:], prog="thermostat lock")
    parser = _parser()
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    try:
        with _Progress() as args.progress:
            outcome: _Outcome = args.run(args)
        rendered = (
            json.dumps(_jsonable(outcome.payload), allow_nan=False, indent=2) if args.json else outcome.text
        )
    except (ScoredSetError, ValueError, TypeError) as exc:
        print(f"thermostat: error: {_in_flags(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError as exc:  # the readers and the core refuse sizes they can tell in advance
        print(f"thermostat: error: the input needs more memory than this machine has ({exc})", file=sys.stderr)
        return EXIT_BAD_INPUT
    except NotImplementedError:
        raise
    except (RuntimeError, ArithmeticError) as exc:
        print(f"thermostat: error: the computation failed: {exc}", file=sys.stderr)
        return EXIT_COMPUTATION_FAILED
    for warning in outcome.warnings:
        print(f"thermostat: warning: {_in_flags(warning)}", file=sys.stderr)
    try:
        print(rendered, flush=True)
    except BrokenPipeError:
        # The reader stopped early (`| head`): not an error of ours. Point stdout at devnull so
        # that Python's own flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return outcome.status
