"""The analysis commands of ``thermostat``, each declared once: its arguments, its options and what it does.

Each command is a function decorated with :func:`analysis` (the click command it becomes: the
arguments that name scored sets, its options, ``--json`` and ``--max-classes``; its help is the
function's docstring). It takes the scored sets it reads (already read and checked by
:func:`calibration.read_scored_set`) and its options, and returns an :class:`Outcome`: the JSON
object — built from the results' own ``to_dict()``, never copied field by field — the readable
report, the warnings and the exit status. The sets go to the core as they are: a validated
:class:`~calibration.ScoredSet` is not checked again, so every logit is checked once, when it is
read. :meth:`Analysis.invoke` reads the sets, runs the command and prints its report or refusal.
Importing this module loads neither NumPy nor the numeric core (``calibration`` and
``monitoring`` load each name on first use), so ``thermostat fit --help`` answers at once.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeAlias

import click

import calibration
import monitoring
from flows.cli.main import EXIT_TEXT
from flows.cli.options import COMMAND_OPTIONS, resolve
from flows.defaults import DEFAULT_DASK_TIMEOUT, DEFAULT_DASK_WORKERS, ENGINES
from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_DID_NOT_PASS, EXIT_OK, refuse
from flows.json_keys import JSON_KEYS

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from calibration import (
        BootstrapComparison,
        CalibrationErrorEstimate,
        CalibrationReport,
        Engine,
        PartitionedScoredSet,
        PriorShiftTest,
        ScoredSet,
        ShiftDiagnosis,
        TemperatureFit,
        TemperatureStats,
    )
    from monitoring import CheckOutcome, CheckReference, DriftPolicy, DriftReference, DriftReport, EarlyWarning

    AnySet: TypeAlias = ScoredSet | PartitionedScoredSet
    Sets: TypeAlias = Mapping[str, AnySet]

__all__ = ["Analysis", "Outcome", "analysis", "compare", "diagnose", "drift", "evaluate", "fit", "in_flags", "qualify",
           "sweep"]

Args: TypeAlias = SimpleNamespace  # a command's options by name, and what the run adds (settings, progress, engine)

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
    # The drift decision's arguments (monitoring.decide_drift) and the temperature's check.
    (re.compile(r"\bmin_window\b"), "--min-window"),
    (re.compile(r"\bmin_group_size\b"), "--min-group-size"),
    (re.compile(r"\bp_threshold\b"), "--level"),
    (re.compile(r"\bece_tolerance\b"), "--tolerance"),
    (re.compile(r"\btemperature_margin\b"), "--margin"),
    (re.compile(r"^temperature must be\b"), "--temperature must be"),
)
_SWEEP_COVERAGES = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
_MISSING = "n/a"
# What diagnose costs at the default --max-prior-classes (benchmarks/command_cost.py, 60 rows).
_PRIOR_COST_AT_LIMIT = "17 s of CPU and 0.5 GB on 60 rows, more with more"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command produced: the JSON object, the readable report, warnings, the status."""

    payload: dict[str, Any]
    text: str
    warnings: tuple[str, ...] = ()
    status: int = EXIT_OK


class Progress:
    """Says on stderr what a command is doing once it has run for more than a few seconds.

    Quiet for fast commands; a large fit gets a line after ``first`` seconds and another every
    ``every`` seconds.
    """

    def __init__(self, first: float = 3.0, every: float = 15.0) -> None:
        self._first, self._every = first, every
        self._stage = "starting"
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._report, name="thermostat-progress", daemon=True)
        self._started = time.monotonic()

    def stage(self, text: str) -> None:
        self._stage = text

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()

    def _report(self) -> None:
        wait = self._first
        while not self._done.wait(wait):
            print(f"thermostat: still working after {time.monotonic() - self._started:.0f} s: {self._stage}",
                  file=sys.stderr, flush=True)
            wait = self._every


class Analysis(click.Command):
    """An analysis command (made by :func:`analysis`): its callback, ``(sets, args) -> Outcome``, is
    the command; ``reads`` names its parameters that are scored sets; ``partitioned``: it also takes
    a folder or glob of Parquet files, computed on by the engine in ``args.engine_runner``."""

    def __init__(self, *args: Any, reads: tuple[str, ...], partitioned: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads, self.partitioned = reads, partitioned

    def arguments(self, params: Mapping[str, Any]) -> Args:
        """The parsed options, each setting option not given taken from the settings (``THERMOSTAT_*``)."""
        args = SimpleNamespace(command=self.name, **params)
        resolve(args, str(self.name))
        return args

    def outcome(self, args: Args) -> Outcome:
        """Read the sets, start the engine and run the command."""
        from flows.orchestration.engines import engine_from_options  # asyncio: not for --help

        options = (getattr(args, "engine", "local"), getattr(args, "dask_address", None),
                   getattr(args, "dask_workers", None))
        # The options are checked here, before any data is read; the engine starts below.
        engine = engine_from_options(*options, timeout=getattr(args, "dask_timeout", DEFAULT_DASK_TIMEOUT))
        with Progress() as args.progress:
            sets = {name: _read(getattr(args, name), args, partitioned=self.partitioned)
                    for name in self.reads if getattr(args, name) is not None}
            if options[0] == "dask":
                args.progress.stage("starting the Dask engine" if options[1] is None else f"connecting to {options[1]}")
            with engine as args.engine_runner:
                outcome: Outcome = self.callback(sets, args)  # type: ignore[misc]
        return outcome

    def invoke(self, ctx: click.Context) -> int:
        """Run the command and print its report, or the refusal; its exit status."""
        try:
            args = self.arguments(ctx.params)
            outcome = self.outcome(args)
            rendered = json.dumps(calibration.json_safe(outcome.payload), allow_nan=False, indent=2) if args.json \
                else outcome.text
        except (calibration.ScoredSetError, ValueError, TypeError) as exc:
            return refuse("thermostat", EXIT_BAD_INPUT, in_flags(str(exc)))
        except ConnectionError as exc:  # --dask-address: no scheduler there, or one without workers
            return refuse("thermostat", EXIT_BAD_INPUT, f"--dask-address: {exc}")
        except MemoryError as exc:  # the readers and the core refuse sizes they can tell in advance
            return refuse("thermostat", EXIT_BAD_INPUT, f"the input needs more memory than this machine has ({exc})")
        except NotImplementedError:
            raise
        except (RuntimeError, ArithmeticError) as exc:
            return refuse("thermostat", EXIT_COMPUTATION_FAILED, f"the computation failed: {exc}")
        for warning in outcome.warnings:
            print(f"thermostat: warning: {in_flags(warning)}", file=sys.stderr)
        try:
            print(rendered, flush=True)
        except BrokenPipeError:
            # The reader stopped early (`| head`): not an error of ours. Point stdout at devnull so
            # that Python's own flush at exit does not raise again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return outcome.status


def _read(path: str, args: Args, *, partitioned: bool) -> ScoredSet | PartitionedScoredSet:
    """A scored-set file read into memory; or, for a command that takes them, a folder or glob
    of Parquet files (or, with ``--engine dask``, one Parquet file) opened as a partitioned set."""
    args.progress.stage(f"reading {path}")
    dask = getattr(args, "engine", "local") == "dask"
    if not partitioned and calibration.is_partitioned_path(path):
        raise ValueError(f"{path}: is a folder or a pattern; `thermostat {args.command}` reads one scored-set file "
                         "into memory (fit, evaluate and compare also take a folder or glob of Parquet files)")
    if partitioned and (calibration.is_partitioned_path(path) or (dask and path.lower().endswith(".parquet"))):
        return calibration.open_partitioned(path, max_classes=args.max_classes)
    if dask:
        raise ValueError(f"{path}: --engine dask computes on Parquet partitions: give a folder or glob of .parquet "
                         "files (or one .parquet file), or drop --engine dask")
    return calibration.read_scored_set(path, max_classes=args.max_classes)


_DATA_HELP = "scored set: .npz (logits|probs, labels, ids, groups), .parquet or .csv (id, label, group, logit_0..)"
_PARTITIONED_HELP = (_DATA_HELP + "; or a folder or glob ('day=*/*.parquet') of Parquet files, read partition by "
                     "partition (row group by row group), never all at once")
_Decorator: TypeAlias = Callable[[Callable[..., Any]], Callable[..., Any]]


def analysis(name: str, *, partitioned: bool = False, reads: tuple[str, ...] = (),
             **arguments: str) -> Callable[[Callable[[Sets, Args], Outcome]], Analysis]:
    """Declare the analysis command ``name``: ``arguments`` (``DATA="what it is"``) are its
    scored-set arguments in order, ``reads`` its options that name one too; its options are the
    ``click.option`` decorators below this one, then its setting options
    (:data:`flows.cli.options.COMMAND_OPTIONS`), ``--json`` and ``--max-classes``; its help is the
    function's docstring, the arguments' and the ``--json`` keys (:data:`flows.json_keys.JSON_KEYS`)."""

    def declare(run: Callable[[Sets, Args], Outcome]) -> Analysis:
        described = "\n\n".join(f"{metavar}: {text}" for metavar, text in arguments.items())
        help_text = f"{inspect.cleandoc(run.__doc__ or '')}\n\n{described}"
        command = click.command(name, cls=Analysis, help=help_text, partitioned=partitioned,
                                reads=(*(metavar.lower() for metavar in arguments), *reads),
                                epilog=f"--json keys: {JSON_KEYS[name]}. NaN prints as null.\n\n{EXIT_TEXT}")(run)
        command.params[:0] = [click.Argument([metavar.lower()], metavar=metavar) for metavar in arguments]
        command.params += [
            *(option.option() for option in COMMAND_OPTIONS[name]),
            click.Option(["--json"], is_flag=True, help="print one JSON object instead of tables"),
            click.Option(["--max-classes"], type=int, default=calibration.MAX_CLASSES, metavar="K",
                         help=f"refuse data with more classes than this before reading rows "
                              f"(default {calibration.MAX_CLASSES:,})"),
        ]
        return command

    return declare


def _together(*options: _Decorator) -> _Decorator:
    """Several ``click.option`` decorators as one, in the order given."""

    def apply(function: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            function = option(function)
        return function

    return apply


_SCHEME = click.option("--scheme", type=click.Choice(("equal-width", "equal-mass")), default="equal-width",
                       help="ECE binning (default equal-width)")
_ENGINE = _together(
    click.option("--engine", type=click.Choice(ENGINES), default="local",
                 help="where partitioned data is computed on: local (this process, default) or dask"),
    click.option("--dask-address", metavar="tcp://HOST:PORT",
                 help="with --engine dask: a running Dask scheduler (default: a temporary local cluster)"),
    click.option("--dask-workers", type=int, metavar="N",
                 help=f"with --engine dask and no address: workers of the temporary local cluster "
                      f"(default {DEFAULT_DASK_WORKERS})"),
    click.option("--dask-timeout", type=float, default=DEFAULT_DASK_TIMEOUT, metavar="SECONDS",
                 help=f"with --engine dask: how long to wait for the scheduler at --dask-address and its first "
                      f"worker, and for a worker whenever the cluster has none while tasks wait (then exit 3) "
                      f"(default {DEFAULT_DASK_TIMEOUT:g})"),
)


def _priors(reference_help: str) -> _Decorator:
    return _together(
        click.option("--priors", metavar="P",
                     help="also apply these class priors of the traffic: each posterior softmax(z/T) re-weighted by P "
                          "/ the reference priors and renormalised (Saerens et al. 2002); K comma-separated positive "
                          "numbers, or a .json file holding a list of them (normalised to sum to 1)"),
        click.option("--reference-priors", metavar="P", help=reference_help),
    )


def _estimators(help_text: str) -> _Decorator:
    return click.option("--estimator", multiple=True, type=click.Choice((*calibration.ESTIMATORS, "all")),
                        metavar="NAME", help=f"{help_text} (repeatable): {', '.join(calibration.ESTIMATORS)}, or all")


def _engine(args: Args) -> Engine:
    """The engine the command line opened (the local one when none was: ``--help``'s examples)."""
    engine: Engine = getattr(args, "engine_runner", calibration.LOCAL_ENGINE)
    return engine


def _n_partitions(scored: AnySet) -> int:
    return scored.n_partitions if isinstance(scored, calibration.PartitionedScoredSet) else 1


def _engine_fields(args: Args, *sets: AnySet) -> dict[str, Any]:
    """The ``--json`` fields saying where the work ran: engine, partitions read, workers."""
    engine = _engine(args)
    return {"engine": engine.name, "n_partitions": sum(_n_partitions(scored) for scored in sets),
            "n_workers": engine.n_workers}


def _equal_width_only(args: Args, scored: AnySet) -> None:
    if isinstance(scored, calibration.PartitionedScoredSet) and args.scheme != "equal-width":
        raise ValueError(f"{scored.source}: --scheme {args.scheme} needs every confidence sorted together, in "
                         "memory; a partitioned set is measured with equal-width bins (drop --scheme)")


def _in_memory(sets: Sets, name: str) -> ScoredSet:
    """A set of a command that reads its sets into memory (the command line never opens
    partitioned sets for it)."""
    scored = sets[name]
    if not isinstance(scored, calibration.ScoredSet):
        raise TypeError(f"{name}: this command reads a scored-set file into memory, not a partitioned set")
    return scored


def _fitted(scored: AnySet, args: Args) -> TemperatureFit:
    bounds = (args.lower, args.upper)
    if isinstance(scored, calibration.PartitionedScoredSet):
        return calibration.fit_partitioned(scored, bounds=bounds, engine=_engine(args))
    return calibration.fit_temperature(scored, bounds=bounds)


def _evaluated(scored: AnySet, args: Args, temperature: float, *, trusted: bool,
               by_group: bool = False, min_count: int = 10) -> CalibrationReport:
    """:func:`evaluate` of a set in memory or over partitions (``trusted``: the partitions were
    validated by an earlier map of this command)."""
    if isinstance(scored, calibration.PartitionedScoredSet):
        return calibration.evaluate_partitioned(scored, temperature=temperature, n_bins=args.bins,
                                                min_count=min_count, by_group=by_group, engine=_engine(args),
                                                trusted=trusted)
    return calibration.evaluate(scored, temperature=temperature, n_bins=args.bins, scheme=args.scheme,
                                min_count=min_count, groups=scored.groups if by_group else None)


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


def _interval_text(fit: TemperatureFit) -> str:
    """`` [low, high] (95% interval)``, or a note for a fit on a bound (no interval)."""
    if not (math.isfinite(fit.temperature_low) and math.isfinite(fit.temperature_high)):
        return " (no interval: on a bound)"
    return f" [{fit.temperature_low:.4g}, {fit.temperature_high:.4g}] ({fit.confidence_level:.0%} interval)"


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


@analysis("fit", partitioned=True, DATA=_PARTITIONED_HELP)
@_SCHEME
@_priors("with --priors: the priors the calibrated posteriors are taken to be for, in --priors' format (default: "
         "DATA's label frequencies); T is fitted as without --priors, the correction applied after the fit")
@_ENGINE
def fit(sets: Sets, args: Args) -> Outcome:
    """fit T by minimising mean NLL over log T inside bounds"""
    scored = sets["data"]
    _equal_width_only(args, scored)
    given = _given_priors(scored, args, label_frequencies=True)  # refused before the fit, not after
    args.progress.stage(f"fitting T on {scored.n_samples:,} x {scored.n_classes:,} logits")
    fit = _fitted(scored, args)
    args.progress.stage("measuring ECE before and after")
    # One calibration pass at each temperature gives the ECE, and at T = 1 the accuracy.
    before, after = (_evaluated(scored, args, t, trusted=True) for t in (1.0, fit.temperature))
    ece_before, ece_after, top_accuracy = before.ece, after.ece, before.accuracy
    payload = {"data": args.data, **fit.to_dict(), "ece_before": ece_before, "ece_after": ece_after,
               "n_bins": args.bins, "scheme": args.scheme, "accuracy": top_accuracy, "in_sample": True,
               **_engine_fields(args, scored)}
    corrected_lines: list[str] = []
    if given is not None:
        corrected = calibration.evaluate(_prior_corrected(_in_memory(sets, "data"), given, fit.temperature, args.data),
                                         temperature=fit.temperature, n_bins=args.bins, scheme=args.scheme).summary()
        payload |= {**given.to_dict(), "corrected": corrected}
        corrected_lines = ["", given.sentence(),
                           f"at T = {fit.temperature:.4g}, prior-corrected: NLL {_number(corrected['nll'])} (uncorrected "
                           f"{_number(fit.nll_after)}), ECE {_number(corrected['ece'])} ({_number(ece_after)}), accuracy "
                           f"{_number(corrected['accuracy'])} ({_number(top_accuracy)}); T is fitted without the "
                           "correction"]
    flag = f"  ON THE {fit.at_bound.upper()} BOUND" if fit.at_bound else ""
    rows = [
        ["NLL (mean, nats)", _number(fit.nll_before), _number(fit.nll_after)],
        [f"ECE ({args.bins} {args.scheme} bins)", _number(ece_before), _number(ece_after)],
        ["accuracy (T never changes it)", _number(top_accuracy), _number(top_accuracy)],
    ]
    text = "\n".join([
        f"{args.data}: {fit.n} examples, {fit.n_classes} classes",
        f"fitted temperature {fit.temperature:.6g}{_interval_text(fit)} (search bounds {_bounds_text(fit.bounds)})"
        f"{flag}",
        "",
        _table(["", "T = 1", f"T = {fit.temperature:.4g} (in-sample)"], rows),
        "",
        "in-sample: the T column is measured on the rows T was fitted on, which flatters it; measure on "
        "held-out rows with `thermostat compare FIT_DATA EVAL_DATA`",
        *corrected_lines,
    ])
    warnings = _at_bound_warning(fit.temperature, fit.at_bound, fit.bounds)
    return Outcome(payload, text, warnings, _status(warnings))


@analysis("evaluate", partitioned=True, DATA=_PARTITIONED_HELP)
@click.option("--temperature", type=float, default=1.0, metavar="T", help="divide logits by T (default 1)")
@click.option("--by-group", is_flag=True, help="per-group ECE and their count-weighted mean")
@_estimators("also estimate the calibration error with a 95% interval; needs the set in memory")
@_SCHEME
@_priors("required with --priors: the priors T was fitted for (e.g. the calibration set's label frequencies, or "
         "diagnose's reference_priors), in --priors' format; DATA's own label frequencies are not used, as DATA is "
         "usually the shifted traffic")
@_ENGINE
def evaluate(sets: Sets, args: Args) -> Outcome:
    """accuracy, NLL, ECE, MCE, Brier and the reliability table at a temperature"""
    scored = sets["data"]
    _equal_width_only(args, scored)
    if args.by_group and isinstance(scored, calibration.ScoredSet) and scored.groups is None:
        raise ValueError(
            f"{args.data}: has no groups; --by-group needs a 'group' column (an npz key 'groups'), or drop --by-group"
        )
    given = _given_priors(scored, args, label_frequencies=False)
    args.progress.stage(f"evaluating {scored.n_samples:,} x {scored.n_classes:,} logits")
    uncorrected: dict[str, Any] | None = None
    if given is not None:  # the report is the corrected posteriors'; the uncorrected summary beside it
        uncorrected = _evaluated(scored, args, args.temperature, trusted=False).summary()
        scored = _prior_corrected(_in_memory(sets, "data"), given, args.temperature, args.data)
    report = _evaluated(scored, args, args.temperature, trusted=False, by_group=args.by_group,
                        min_count=args.min_count)
    estimates = _estimates(scored, args)
    payload = {"data": args.data, **report.to_dict(), **_engine_fields(args, scored)}
    if estimates:
        payload["estimators"] = [estimate.to_dict() for estimate in estimates]
    if given is not None and uncorrected is not None:
        payload |= {**given.to_dict(), "uncorrected": uncorrected}
    table = report.table
    lines = [
        f"{args.data}: {report.n} examples, {report.n_classes} classes, at T = {report.temperature:g}",
        *([] if given is None or uncorrected is None else [
            given.sentence() + ": every number below is of the corrected posteriors",
            f"uncorrected: NLL {_number(uncorrected['nll'])}, ECE {_number(uncorrected['ece'])}, accuracy "
            f"{_number(uncorrected['accuracy'])}"]),
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
    return Outcome(payload, "\n".join(lines + _estimate_lines(estimates)))


def _estimates(scored: AnySet, args: Args) -> tuple[CalibrationErrorEstimate, ...]:
    """The ``--estimator`` results, in the order named (``all``: every estimator), from one
    top-label pass; none without the flag."""
    if not args.estimator:
        return ()
    if isinstance(scored, calibration.PartitionedScoredSet):
        raise ValueError(f"{args.data}: --estimator needs the set in memory; give one scored-set file (a folder or "
                         "glob of Parquet files gets the report's binned ECE only), or drop --estimator")
    names = calibration.ESTIMATORS if "all" in args.estimator else tuple(dict.fromkeys(args.estimator))
    args.progress.stage(f"estimating the calibration error with intervals: {', '.join(names)}")
    return calibration.calibration_errors(scored, temperature=args.temperature, estimators=names, n_bins=args.bins,
                                          scheme=args.scheme)


def _estimate_lines(estimates: Sequence[CalibrationErrorEstimate]) -> list[str]:
    """The estimators' table and each one's convention (nothing when there are none)."""
    if not estimates:
        return []
    first = estimates[0]
    rows = [[estimate.estimator, _number(estimate.estimate), _number(estimate.low), _number(estimate.high),
             estimate.binning if estimate.bandwidth is None
             else f"bandwidth {_number(estimate.bandwidth)}; {estimate.binning}"]
            for estimate in estimates]
    conventions = [f"{estimate.estimator}: {estimate.convention}"
                   + ("" if estimate.squared_estimate is None else f" (CE^2 = {estimate.squared_estimate:.6f})")
                   for estimate in estimates]
    return [
        "",
        f"calibration error, {first.confidence_level:.0%} intervals by {first.method}",
        _table(["estimator", "estimate", "low", "high", "bins"], rows, align="lrrrl"),
        *conventions,
    ]




@dataclass(frozen=True, slots=True)
class _GivenPriors:
    """``--priors`` and the reference priors they re-weight from (both normalised), and whence those came."""

    priors: NDArray[np.float64]
    reference_priors: NDArray[np.float64]
    basis: str

    def to_dict(self) -> dict[str, Any]:
        return {"priors": self.priors.tolist(), "reference_priors": self.reference_priors.tolist(),
                "prior_basis": self.basis}

    def sentence(self) -> str:
        shown = ", ".join(f"{p:.4g}" for p in self.priors[:10]) + (", ..." if self.priors.shape[0] > 10 else "")
        return f"prior correction: posteriors re-weighted to priors ({shown}) from the {self.basis}"


# The most bytes a priors file may hold a class: a number written out in full, its separator and
# indentation. A longer file holds something else, and is not read into memory to find out.
_PRIORS_FILE_BYTES_PER_CLASS = 256


def _prior_file(path: str, flag: str, n_classes: int, expected: str) -> object:
    """The JSON value of ``--priors FILE``: a regular file (a FIFO would block the read, a device never
    end), no larger than K numbers take, parsed without a recursion error on deep nesting."""
    file = Path(path)
    if not file.exists():
        raise ValueError(f"{flag} {path}: file not found; {expected}")
    refusal = calibration.not_a_regular_file(file)
    if refusal is not None:  # before anything opens it, as the scored-set readers do
        raise ValueError(f"{flag} {path}: {refusal}; {expected}")
    limit = 4096 + _PRIORS_FILE_BYTES_PER_CLASS * n_classes
    size = file.stat().st_size
    if size > limit:
        raise ValueError(f"{flag} {path}: is {size:,} bytes, more than a list of {n_classes} numbers takes (at most "
                         f"{limit:,}); {expected}")
    try:
        with file.open(encoding="utf-8") as handle:
            return json.loads(handle.read(limit + 1))
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"{flag} {path}: cannot be read as JSON ({exc}); {expected}") from exc
    except RecursionError as exc:  # "[[[[...": nested deeper than the parser's stack
        raise ValueError(f"{flag} {path}: its JSON is nested too deeply to be read; {expected}") from exc


def _prior_values(text: str, flag: str, n_classes: int) -> NDArray[np.float64]:
    """The value of ``--priors`` or ``--reference-priors``: K comma-separated numbers, or a .json
    file holding a list of K numbers; each finite and > 0, their sum finite; normalised to sum to 1."""
    import numpy as np
    expected = f"give {n_classes} comma-separated positive numbers (e.g. {','.join(['1'] * n_classes)}) or a .json " \
        "file holding a list of them" if n_classes <= 10 else f"give {n_classes} comma-separated positive numbers " \
        "or a .json file holding a list of them"
    values: object
    source = flag
    if text.lower().endswith(".json"):
        source = f"{flag} {text}"
        values = _prior_file(text, flag, n_classes, expected)
        if not (isinstance(values, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                 for v in values)):
            raise ValueError(f"{source}: holds {type(values).__name__} {str(values)[:80]}; {expected}")
    else:
        try:
            values = [float(part) for part in text.split(",")]
        except ValueError as exc:
            raise ValueError(f"{flag}: {text[:80]!r} is not a list of numbers; {expected}") from exc
    try:
        array = np.asarray(values, dtype=np.float64)
    except OverflowError as exc:  # a JSON integer beyond the largest float
        raise ValueError(f"{source}: a value is too large for a float ({exc}); every prior must be finite and > 0"
                         ) from exc
    if array.shape != (n_classes,):
        raise ValueError(f"{source}: has {array.size} values but the data has {n_classes} classes; {expected}")
    refused = ~np.isfinite(array) | (array <= 0)
    if refused.any():
        k = int(np.argmax(refused))
        raise ValueError(f"{source}: the prior of class {k} is {float(array[k])!r}; every prior must be finite and > 0 "
                         "(a class with prior 0 could never be predicted)")
    with np.errstate(over="ignore"):  # an overflowing sum is refused below, by name
        total = float(array.sum())
    if not math.isfinite(total):
        raise ValueError(f"{source}: the priors sum to {total!r} (more than the largest float, "
                         f"{np.finfo(np.float64).max:.4g}); they are normalised to sum to 1, so every prior must be "
                         "finite and > 0 and their sum finite: give proportions or counts")
    result: NDArray[np.float64] = array / total
    if not result.all():
        k = int(np.argmin(result))
        raise ValueError(f"{source}: the prior of class {k}, {float(array[k])!r}, is 0 once normalised by their sum "
                         f"{total!r}; every prior must be > 0 after normalisation (a class with prior 0 could never "
                         "be predicted): give proportions or counts of a smaller range")
    return result


def _given_priors(scored: AnySet, args: Args, *, label_frequencies: bool) -> _GivenPriors | None:
    """``--priors`` and its reference priors, checked (None without ``--priors``). The reference:
    ``--reference-priors`` when given, else (``label_frequencies``: fit) DATA's label frequencies."""
    import numpy as np
    if args.priors is None:
        if args.reference_priors is not None:
            raise ValueError("--reference-priors applies only with --priors; add --priors P or drop --reference-priors")
        return None
    if isinstance(scored, calibration.PartitionedScoredSet):
        raise ValueError(f"{args.data}: --priors needs the set in memory; give one scored-set file, or drop --priors")
    k = scored.n_classes
    priors = _prior_values(args.priors, "--priors", k)
    if args.reference_priors is not None:
        return _GivenPriors(priors, _prior_values(args.reference_priors, "--reference-priors", k), "--reference-priors")
    if not label_frequencies:
        raise ValueError("--priors needs --reference-priors here: the priors T was fitted for (the calibration set's "
                         "label frequencies, or `thermostat diagnose`'s reference_priors); DATA's own are not assumed")
    counts = np.bincount(scored.labels, minlength=k)
    if not counts.all():
        raise ValueError(f"{args.data}: class {int(np.argmin(counts))} has no row, so its label frequency (the default "
                         "reference prior) is 0; give --reference-priors")
    return _GivenPriors(priors, counts / counts.sum(), f"label frequencies of {args.data}")


def _prior_corrected(scored: ScoredSet, given: _GivenPriors, temperature: float, source: str) -> ScoredSet:
    """The set whose logits, read at ``temperature``, give the prior-corrected posteriors."""
    corrected = calibration.prior_corrected_logits(scored.logits, temperature=temperature, priors=given.priors,
                                                   reference_priors=given.reference_priors)
    return calibration.ScoredSet.from_arrays(corrected, scored.labels, ids=scored.ids, groups=scored.groups,
                                             source=f"{source} (prior-corrected)")


@analysis("sweep", DATA=_DATA_HELP)
@click.option("--temperature", type=float, required=True, metavar="T",
              help="the T in force; a threshold from another T measures something else")
@click.option("--target-accuracy", type=float, required=True, metavar="A",
              help="required accepted accuracy (its Wilson lower bound must reach A)")
def sweep(sets: Sets, args: Args) -> Outcome:
    """choose the gate threshold on confidences calibrated at T"""
    import numpy as np
    scored = _in_memory(sets, "data")
    temperature = calibration.check_temperature(args.temperature)
    predictions, confidence = calibration.top_label_confidence(scored.logits, temperature=temperature,
                                                               check_finite=False)
    correct = predictions == scored.labels
    choice = calibration.choose_threshold(
        confidence, correct, target_accuracy=args.target_accuracy, confidence_level=args.confidence_level
    )
    sweep = calibration.sweep_thresholds(confidence, correct, confidence_level=args.confidence_level)
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


def _same_classes(first: AnySet, first_name: str, second: AnySet, second_name: str) -> None:
    if first.n_classes != second.n_classes:
        raise ValueError(
            f"{second_name}: has {second.n_classes} classes but {first_name} has {first.n_classes}; "
            f"both must score the same K classes"
        )


@analysis("qualify", reads=("reference",), DATA=_DATA_HELP)
@click.option("--training-ids", metavar="FILE", help="text file of training example ids, one per line")
@click.option("--reference", metavar="DATA", help="scored set of recent traffic: its class proportions")
def qualify(sets: Sets, args: Args) -> Outcome:
    """check size, class coverage, disjointness from training and representativeness"""
    import numpy as np
    scored = _in_memory(sets, "data")
    training_ids = None if args.training_ids is None else _read_training_ids(args.training_ids)
    reference = _in_memory(sets, "reference") if "reference" in sets else None
    if reference is not None:
        _same_classes(scored, args.data, reference, args.reference)
    report = calibration.qualify_calibration_set(
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
    import numpy as np
    return bool(np.array_equal(ids, np.arange(ids.shape[0]).astype(str)))


def _id_overlap(fit_set: ScoredSet | PartitionedScoredSet, eval_set: ScoredSet | PartitionedScoredSet,
                args: Args) -> tuple[int | None, tuple[str, ...]]:
    """How many ids of the evaluation set were also fitted on (None: not compared), and the warning."""
    import numpy as np
    if not (isinstance(fit_set, calibration.ScoredSet) and isinstance(eval_set, calibration.ScoredSet)) or (
            _is_row_index(fit_set.ids) or _is_row_index(eval_set.ids)):
        return None, ()
    shared = np.intersect1d(fit_set.ids, eval_set.ids)
    if not shared.size:
        return 0, ()
    return int(shared.size), (f"{shared.size} ids of {args.eval_data} also appear in {args.fit_data} (e.g. "
                              f"{str(shared[0])!r}); evaluate on examples not used to fit T, or the improvement is "
                              "flattered",)


def _nll_change(eval_set: ScoredSet | PartitionedScoredSet, temperature: float,
                args: Args) -> tuple[BootstrapComparison, str]:
    """The NLL change from T = 1 to ``temperature`` with its interval, and how the interval was made."""
    if isinstance(eval_set, calibration.PartitionedScoredSet):
        comparison = calibration.nll_difference_partitioned(
            eval_set, temperature_before=1.0, temperature_after=temperature,
            confidence_level=args.confidence_level, engine=_engine(args), trusted=True,
        )
        return comparison, f"normal interval over {comparison.n:,} rows (a partitioned set is not bootstrapped)"
    comparison = calibration.paired_bootstrap_nll(
        eval_set, temperature_before=1.0, temperature_after=temperature,
        n_resamples=args.resamples, confidence_level=args.confidence_level, seed=args.seed,
    )
    return comparison, f"paired-bootstrap interval ({comparison.n_resamples} resamples, seed {comparison.seed})"


@analysis("compare", partitioned=True, FIT_DATA="scored set that chooses T (a file, folder or glob)",
          EVAL_DATA="held-out scored set that measures the effect (a file, folder or glob; a partitioned set gets a "
                    "normal interval instead of the bootstrap)")
@_SCHEME
@_ENGINE
def compare(sets: Sets, args: Args) -> Outcome:
    """fit T on FIT_DATA, evaluate before/after on EVAL_DATA with a paired bootstrap"""
    fit_set, eval_set = sets["fit_data"], sets["eval_data"]
    _same_classes(fit_set, args.fit_data, eval_set, args.eval_data)
    if Path(args.fit_data).resolve() == Path(args.eval_data).resolve():
        raise ValueError(
            f"{args.eval_data}: is also FIT_DATA; test data never chooses T, so evaluate on a split not used to fit"
        )
    _equal_width_only(args, fit_set)
    _equal_width_only(args, eval_set)
    id_overlap, warnings = _id_overlap(fit_set, eval_set, args)
    args.progress.stage(f"fitting T on {fit_set.n_samples:,} x {fit_set.n_classes:,} logits")
    fit = _fitted(fit_set, args)
    args.progress.stage(f"evaluating on {args.eval_data} and measuring the NLL change")
    before = _evaluated(eval_set, args, 1.0, trusted=False).summary()
    after = _evaluated(eval_set, args, fit.temperature, trusted=True).summary()
    comparison, interval = _nll_change(eval_set, fit.temperature, args)
    fitted = fit.to_dict()
    payload = {"fit_data": args.fit_data, "eval_data": args.eval_data,
               **{key: fitted[key] for key in ("temperature", "at_bound", "bounds", "temperature_low",
                                               "temperature_high")},
               "temperature_confidence_level": fit.confidence_level,
               "fit_n": fit.n, "eval_n": eval_set.n_samples, "n_classes": fit.n_classes, "n_bins": args.bins,
               "scheme": args.scheme, "before": before, "after": after, "nll_difference": comparison.to_dict(),
               "verdict": comparison.verdict, "id_overlap": id_overlap,
               "interval": "paired bootstrap" if comparison.n_resamples else "normal",
               **_engine_fields(args, fit_set, eval_set)}
    names = [("NLL (mean, nats)", "nll"), (f"ECE ({args.bins} {args.scheme} bins)", "ece"), ("MCE", "mce"),
             ("Brier", "brier"), ("accuracy", "accuracy"), ("mean confidence", "mean_confidence")]
    text = "\n".join([
        f"fitted T = {fit.temperature:.6g}{_interval_text(fit)} on {args.fit_data} ({fit.n} examples, bounds "
        f"{_bounds_text(fit.bounds)})",
        f"evaluated on {args.eval_data} ({eval_set.n_samples} examples)",
        "",
        _table(["", "T = 1", f"T = {fit.temperature:.4g}"],
               [[label, _number(before[key]), _number(after[key])] for label, key in names]),
        "",
        f"NLL change (after - before): {comparison.estimate:+.4f} nats, {comparison.confidence_level:.0%} "
        f"{interval}: [{comparison.low:+.4f}, {comparison.high:+.4f}]",
        f"verdict: {comparison.verdict}",
    ])
    in_memory = isinstance(fit_set, calibration.ScoredSet) and isinstance(eval_set, calibration.ScoredSet)
    if id_overlap is None and not in_memory:
        warnings += (f"ids are not compared between {args.fit_data} and {args.eval_data} when either is partitioned; "
                     "make sure the held-out rows were not used to fit T",)
    failed = _at_bound_warning(fit.temperature, fit.at_bound, fit.bounds)
    if comparison.verdict != "improved":
        failed += (f"the improvement is not established on {args.eval_data}: verdict {comparison.verdict!r}",)
    return Outcome(payload, text, (*warnings, *failed), _status(failed))


# Keys of the drift decision's payload that belong to the monitor (cool-down, the version, the
# time window), not to a comparison of two files.
_MONITOR_ONLY = ("refit_recommended", "in_cooldown", "cooldown_until", "model_name", "model_version", "window_start",
                 "window_end", "checked_at", "served_temperatures", "min_window", "null_mean", "n_resamples")


def drift_policy(args: Args) -> DriftPolicy:
    """The drift policy of ``thermostat drift``: the settings' drift section (``THERMOSTAT_*``), each
    flag the policy declares (``--level``, ``--margin``, ...) overriding its field, a refusal naming
    the flag."""
    base = args.settings.drift
    values = {name: getattr(base, name) for name, _, _ in monitoring.policy_knobs()} | {
        name: getattr(args, knob.flag[2:].replace("-", "_")) for name, knob, _ in monitoring.policy_knobs()
        if knob.flag is not None}
    return monitoring.DriftPolicy.from_values(values, lambda _, knob: str(knob.flag))


def _drift_reference(reference: ScoredSet, temperature: float, policy: DriftPolicy, args: Args,
                     resamples: dict[str, Any]) -> DriftReference:
    """What the window is compared with: the reference's sums at T (its groups' with ``--groups``,
    those of at least ``--min-group-size`` rows: a smaller group's own T is too noisy to stand for
    it) and its ECE by the policy's estimator, with its interval."""
    import numpy as np
    scores = calibration.TopLabelScores.from_logits(reference, temperature=temperature)
    groups: dict[str, TemperatureStats] = {}
    if getattr(args, "groups", False) and reference.groups is not None:
        keys, codes = np.unique(reference.groups, return_inverse=True)
        for key, sums in zip(keys.tolist(), calibration.TemperatureStats.grouped(scores, codes.reshape(-1), len(keys))):
            if sums.n >= policy.min_group_size:
                groups[key] = sums
    ece = calibration.calibration_error_from_stats(scores.calibration_stats(n_bins=args.bins),
                                                   estimator=policy.ece_estimator, **resamples)
    return monitoring.DriftReference.of(ece.estimate, ece_interval=(ece.low, ece.high),
                                        temperature_stats=calibration.TemperatureStats.from_scores(scores),
                                        group_temperature_stats=groups, ece_estimator=policy.ece_estimator,
                                        n_bins=args.bins)


def _verdict_headline(report: DriftReport) -> str:
    """The verdict in a few words: drift and its tests, calibrated, or undetermined and what would decide."""
    if report.drift_detected:
        return f"DRIFT ({', '.join(report.tests_fired)})"
    if report.verdict == "calibrated":
        return "calibrated: the window's T is within the margin (established)"
    rows = report.rows_to_decide
    return ("UNDETERMINED: no drift seen, but calibration is not established; "
            + ("no window size decides at this estimate" if rows is None
               else f"about {rows:,} labelled rows would decide ({rows - report.n:,} more)"))


def _drift_text(report: DriftReport, args: Args, reference_n: int,
                window_estimates: Sequence[CalibrationErrorEstimate],
                reference_estimates: Sequence[CalibrationErrorEstimate]) -> str:
    """The drift command's report: the verdict, one row per test outcome, the window's T, the
    estimators of both sets, the reasons."""
    headline = _verdict_headline(report)
    rows = [
        [o.label if o.scope is not None
         else f"{o.label} ({monitoring.DriftTest.registry[o.test].effect_beyond(report.policy)})",
         o.compares, o.statistic, _p_text(o.p_value), _p_text(o.level), "yes" if o.fired else "no"]
        for o in (*report.outcomes, *(o for g in report.groups for o in g.outcomes))
    ]
    estimator_rows = [
        [mine.estimator, f"{_number(mine.estimate)} [{_number(mine.low)}, {_number(mine.high)}]",
         f"{_number(theirs.estimate)} [{_number(theirs.low)}, {_number(theirs.high)}]"]
        for mine, theirs in zip(window_estimates, reference_estimates, strict=True)
    ]
    test, level = report.temperature_test, args.confidence_level
    return "\n".join([
        f"{args.window}: {report.n} labelled rows against the reference {args.reference} ({reference_n} rows), "
        f"both at T = {report.temperature:g}",
        f"verdict: {headline}",
        "",
        _table(["test", "compares", "statistic", "p-value", "level", "fired"], rows, align="llrrrl"),
        "",
        "" if test is None else (
            f"window's optimal T {test.window_temperature:.4g} [{test.window_temperature_low:.4g}, "
            f"{test.window_temperature_high:.4g}] ({level:.0%} interval, one Newton step from T = "
            f"{report.temperature:g}); the reference's {test.reference_temperature:.4g}"),
        "",
        f"calibration error at T = {report.temperature:g}, {level:.0%} intervals ({window_estimates[0].method})"
        if window_estimates else "",
        _table(["estimator", "window", "reference"], estimator_rows, align="lrr") if estimator_rows else "",
        "",
        "reasons:",
        *(f"- {reason}" for reason in report.reasons),
    ])


def _reference_and_window(sets: Sets, args: Args) -> tuple[ScoredSet, ScoredSet, float]:
    """drift's and diagnose's REFERENCE and WINDOW (the same K, the window of at least
    ``--min-window`` rows) and ``--temperature``, checked."""
    reference, window = _in_memory(sets, "reference"), _in_memory(sets, "window")
    _same_classes(reference, args.reference, window, args.window)
    temperature = calibration.check_temperature(args.temperature)
    if window.n_samples < args.min_window:
        raise ValueError(
            f"{args.window}: has {window.n_samples} labelled rows; at least --min-window {args.min_window} are needed "
            "to decide (lower --min-window to decide on fewer, at the cost of power)"
        )
    return reference, window, temperature


def _resamples(args: Args) -> dict[str, Any]:
    """The bootstrap's options of the ECE intervals (the policy's flags)."""
    return {"confidence_level": args.confidence_level, "n_resamples": args.resamples, "seed": args.seed}


@analysis("drift", REFERENCE="the registration-time scored set T was fitted on: its rows give the baseline "
          "and T's own estimation error (" + _DATA_HELP + ")", WINDOW="labelled traffic to check, the same K classes")
@click.option("--temperature", type=float, required=True, metavar="T", help="the deployed T")
@click.option("--groups", is_flag=True,
              help="also test each group of WINDOW's 'group' column (Bonferroni over the groups tested), against the "
                   "same group of REFERENCE when it has one with at least --min-group-size rows")
@_estimators("calibration-error estimators reported with intervals (default all)")
def drift(sets: Sets, args: Args) -> Outcome:
    """the drift decision: WINDOW (labelled traffic) against REFERENCE (the rows T was fitted on), both read at T:
    the temperature test and the ECE test, with intervals; drift, calibrated (established) or undetermined (with
    the labelled rows that would decide)"""
    from monitoring import drift_payload

    reference, window, temperature = _reference_and_window(sets, args)
    if args.groups and window.groups is None:
        raise ValueError(f"{args.window}: has no groups; --groups needs a 'group' column (an npz key 'groups'), or "
                         "drop --groups")
    chosen = args.estimator or ["all"]
    names = calibration.ESTIMATORS if "all" in chosen else tuple(dict.fromkeys(chosen))
    policy = drift_policy(args)
    resamples = _resamples(args)
    args.progress.stage(f"reading the reference at T = {temperature:g}: {reference.n_samples:,} rows")
    against = _drift_reference(reference, temperature, policy, args, resamples)
    args.progress.stage(f"summarising the window: {window.n_samples:,} rows")
    report = _check(window, None, temperature, monitoring.CheckReference(against), policy, args,
                    groups=window.groups if args.groups else None).report
    if report is None:
        raise RuntimeError("the check of the window read no row")  # it holds them: not reached
    args.progress.stage(f"estimating the calibration error with intervals: {', '.join(names)}")
    estimates = [calibration.calibration_errors(data, temperature=temperature, estimators=names, n_bins=args.bins,
                                                **resamples)
                 for data in (window, reference)]
    payload = {"reference": args.reference, "window": args.window, "reference_n": reference.n_samples,
               **{key: value for key, value in drift_payload(report).items() if key not in _MONITOR_ONLY},
               "estimators": [{"estimator": mine.estimator, "window": mine.to_dict(), "reference": theirs.to_dict()}
                              for mine, theirs in zip(*estimates, strict=True)]}
    text = _drift_text(report, args, reference.n_samples, *estimates)
    warnings = ((f"drift: {report.reasons[0]}",) if report.drift_detected
                else (_verdict_headline(report),) if report.verdict == "undetermined" else ())
    return Outcome(payload, text, warnings, EXIT_DID_NOT_PASS if report.drift_detected else EXIT_OK)


def _served_logits(args: Args, window: ScoredSet) -> NDArray[np.floating[Any]] | None:
    """``--served``'s logits (labels optional), the window's K classes; None without the flag."""
    from calibration import read_logits

    if args.served is None:
        return None
    args.progress.stage(f"reading {args.served}")
    served = read_logits(args.served, max_classes=args.max_classes)
    if served.shape[1] != window.n_classes:
        raise ValueError(f"{args.served}: has {served.shape[1]} classes but {args.window} has {window.n_classes}; "
                         "both must score the same K classes")
    return served


def _prior_classes(reference: ScoredSet, args: Args) -> None:
    """diagnose's bound on K (``--max-prior-classes``), checked before any of its statistics is formed."""
    limit = args.max_prior_classes
    if limit < 2:
        raise ValueError(f"--max-prior-classes must be an integer >= 2; got {limit}")
    if reference.n_classes > limit:
        raise ValueError(
            f"{args.reference}: {reference.n_classes:,} classes; diagnose estimates and tests the class priors on "
            "K x K matrices (the reference's posterior outer products and confusion matrix, the prior test's "
            "covariance, EM's information), whose memory grows as K^2 and time as K^3: it takes at most "
            f"--max-prior-classes {limit:,} classes (at {calibration.MAX_PRIOR_CLASSES:,}: {_PRIOR_COST_AT_LIMIT}). "
            "Raise --max-prior-classes to diagnose more at that cost, or test the calibration alone with "
            "`thermostat drift`, linear in K")


def _check(window: ScoredSet, served: NDArray[np.floating[Any]] | None, temperature: float,
           reference: CheckReference, policy: DriftPolicy, args: Args, *,
           groups: NDArray[np.object_] | None = None) -> CheckOutcome:
    """The monitor's check (:func:`monitoring.check_version`) of the window in memory, read in the
    monitor's chunks: with ``served`` rows (or the window's, for the shift diagnosis) in one pass,
    else the labelled rows alone (the drift decision)."""
    from monitoring import CheckState, WindowInMemory, check_version

    store = WindowInMemory(window, None, temperature=temperature, groups=groups, served_logits=served)
    query = store.query(n_bins=args.bins)
    return check_version(store, query, reference, CheckState(), policy, query.end,
                         stream=store if reference.accuracy_floor is not None else None,
                         chunk_size=args.settings.monitor_chunk_size)


@analysis("diagnose", REFERENCE="the registration-time scored set T was fitted on: its class mix, "
          "accuracies, confidences and calibration are the reference (" + _DATA_HELP + ")",
          WINDOW="labelled traffic to diagnose, the same K classes")
@click.option("--served", metavar="SERVED",
              help="the window's served rows, labelled or not (a scored-set file whose label column or key may be "
                   "missing): the class priors and confidences are read from them (default: WINDOW's rows)")
@click.option("--temperature", type=float, required=True, metavar="T", help="the deployed T")
@click.option("--max-prior-classes", type=int, default=calibration.MAX_PRIOR_CLASSES, metavar="K",
              help="refuse data with more classes than this before any statistic is formed: the class priors are "
                   "estimated and tested on K x K matrices, whose memory grows as K^2 and time as K^3 "
                   f"(default {calibration.MAX_PRIOR_CLASSES:,})")
def diagnose(sets: Sets, args: Args) -> Outcome:
    """which shift WINDOW shows against REFERENCE, both read at T: no change, label shift (the class priors moved;
    fix: a prior correction), calibration drift (a temperature refit), accuracy collapse (escalate), covariate
    shift with calibration established, or undetermined; with the numbers"""
    from calibration import ReferencePriors, class_accuracy_test
    from monitoring import ConfidenceProfile

    reference, window, temperature = _reference_and_window(sets, args)
    _prior_classes(reference, args)
    if not 0.0 <= args.accuracy_floor <= 1.0:
        raise ValueError(f"--accuracy-floor must be in [0, 1] (an accuracy); got {args.accuracy_floor!r}")
    served = _served_logits(args, window)
    policy = drift_policy(args)
    args.progress.stage(f"reading the reference at T = {temperature:g}: {reference.n_samples:,} rows")
    drift_reference = _drift_reference(reference, temperature, policy, args, _resamples(args))
    priors = ReferencePriors.from_logits(reference.logits, reference.labels, temperature=temperature,
                                         max_classes=args.max_prior_classes)
    profile = ConfidenceProfile.from_logits(reference.logits, reference.labels, temperature=temperature)
    args.progress.stage(f"diagnosing the window: {window.n_samples:,} rows")
    reference_at_t = monitoring.CheckReference(drift_reference, priors=priors, profile=profile,
                                               accuracy_floor=args.accuracy_floor)
    outcome = _check(window, served, temperature, reference_at_t, policy, args)
    report, scan = outcome.report, outcome.scan
    if report is None or report.diagnosis is None or report.early_warning is None or scan is None:
        raise RuntimeError("the check of the window read no served row")  # it holds them: not reached
    diagnosis, warning, test = report.diagnosis, report.early_warning, report.prior_test
    # The per-class accuracies of the labelled served rows (none: --served rows have no labels).
    rows, correct = (None, None) if served is not None else (scan.class_rows, scan.class_correct)
    class_accuracy = None if rows is None or correct is None else class_accuracy_test(
        rows, correct, priors, level=policy.prior_shift_level, seed=policy.seed)
    payload = {
        "reference": args.reference, "window": args.window, "served": args.served, "reference_n": reference.n_samples,
        "window_n": window.n_samples, "served_n": scan.served_rows, "temperature": temperature,
        "verdict": diagnosis.sentence(), **diagnosis.to_dict(),
        "priors_low": None if test is None else test.estimate.priors_low,
        "priors_high": None if test is None else test.estimate.priors_high,
        "em_iterations": None if test is None else test.estimate.iterations,
        "em_converged": None if test is None else test.estimate.converged,
        "prior_test": None if test is None else {key: value for key, value in test.to_dict().items() if key != "estimate"},
        "class_accuracy": None if class_accuracy is None else class_accuracy.to_dict(),
        "early_warning": warning.to_dict(), "policy": policy.to_dict(),
    }
    found = diagnosis.kind not in ("no_change", "undetermined")  # undetermined: exit 0, said in the verdict
    warnings = (f"shift found: {diagnosis.kind.replace('_', ' ')} (fix: {diagnosis.fix.replace('_', ' ')})",) \
        if found else ()
    text = _diagnose_text(report.temperature, diagnosis, test, warning, scan.served_rows, args, reference.n_samples,
                          window.n_samples)
    return Outcome(payload, text, warnings, EXIT_DID_NOT_PASS if found else EXIT_OK)


_SHOWN_CLASSES = 20


def _diagnose_text(temperature: float, diagnosis: ShiftDiagnosis, test: PriorShiftTest | None, warning: EarlyWarning,
                   served_n: int, args: Args, reference_n: int, window_n: int) -> str:
    """diagnose's report: the verdict, the priors and their test, the tests at the deployed and
    re-weighted posteriors, the reasons."""
    served = args.served if args.served is not None else "the window's rows"
    reweighted = ("not run (the priors did not move)" if diagnosis.reweighted_tests_fired is None
                  else ", ".join(diagnosis.reweighted_tests_fired) or "none")
    return "\n".join([
        f"{args.window}: {window_n} labelled rows, {served_n} served rows ({served}), against the reference "
        f"{args.reference} ({reference_n} rows), all at T = {temperature:g}",
        f"diagnosis: {diagnosis.kind.replace('_', ' ').upper()}; fix: {diagnosis.fix.replace('_', ' ')}"
        + ("" if diagnosis.confirmed else " (from unlabelled rows: to be confirmed)"),
        "",
        *(_prior_lines(test) if test is not None else ["class priors not tested (the reasons say why)"]),
        "",
        f"drift tests fired at the deployed posteriors: {', '.join(diagnosis.tests_fired) or 'none'}",
        f"at the re-weighted posteriors: {reweighted}",
        f"re-weighting's NLL gain on the labelled rows: {_number(diagnosis.gain)} nats per row (z = "
        f"{_number(diagnosis.gain_z, 2)})",
        f"accuracy {_number(diagnosis.accuracy)} (floor {_number(diagnosis.accuracy_floor)}); served confidences "
        + ("SHIFTED" if diagnosis.confidence_shifted else "unchanged"),
        "",
        "reasons:",
        *(f"- {reason}" for reason in (*diagnosis.reasons, warning.sentence())),
    ])


def _prior_lines(test: PriorShiftTest) -> list[str]:
    """The class priors EM estimated, class by class (the largest moves first when there are
    many), and the prior test."""
    import numpy as np
    estimate = test.estimate
    move = np.abs(estimate.priors - estimate.reference_priors)
    classes = np.arange(move.shape[0]) if move.shape[0] <= _SHOWN_CLASSES else np.argsort(-move)[:_SHOWN_CLASSES]
    rows = [[str(int(c)), _number(estimate.reference_priors[c]), _number(estimate.priors[c]),
             f"[{_number(estimate.priors_low[c])}, {_number(estimate.priors_high[c])}]"] for c in classes]
    return [
        f"class priors (EM on {estimate.n} served rows, {estimate.iterations} iterations, "
        f"{'converged' if estimate.converged else 'NOT converged'})"
        + ("" if len(classes) == move.shape[0] else f", the {_SHOWN_CLASSES} largest moves of {move.shape[0]}"),
        _table(["class", "reference", "estimated", f"{estimate.confidence_level:.0%} interval"], rows),
        f"prior test: Hotelling T2 = {_number(test.statistic, 2)}, df {test.df}, p = {_p_text(test.p_value)} (level "
        f"{_p_text(test.level)}): {'MOVED' if test.fired else 'unchanged'}; total variation {_number(test.effect)} "
        f"[{_number(test.effect_low)}, {_number(test.effect_high)}]",
    ]


def _p_text(p: float) -> str:
    return _MISSING if not math.isfinite(p) else f"{p:.2g}" if p < 0.01 else f"{p:.3f}"
