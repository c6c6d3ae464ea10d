"""The ``thermostat`` command line: fit, evaluate, sweep, qualify, compare, drift, diagnose, export, prune, ingest, log, labels, demo, lock, serve.

Every command reads scored sets (``.npz``, ``.parquet`` or ``.csv``; see
:func:`calibration.read_scored_set`), calls the core in :mod:`calibration` (through
:mod:`flows.cli.commands`), and prints a readable, aligned report, or with ``--json`` exactly one
JSON object on stdout, built from the results' own ``to_dict()``. Nothing is ever written to
disk. NaN and infinities print as JSON ``null`` (undefined, e.g. the accuracy of an empty
bin), so the output is always valid JSON. ``thermostat COMMAND --help`` lists the JSON keys
(:data:`flows.cli.json_keys.JSON_KEYS`; a test holds them to the command's output on a small
example, so the list cannot drift from the output). Parsing the arguments imports neither the
numeric core's scipy, pandas and numba nor MLflow or Prefect: ``--help`` answers at once.

Exit status (one contract for every command)
---------------------------------------------
0
    The command ran and its result passed its check.
1
    The command ran and printed its report, but the result did not pass: ``qualify`` found
    the set does not qualify; ``sweep`` found no threshold that meets the target; ``fit`` or
    ``compare`` fitted a temperature on a search bound (such a fit must never be
    registered); ``compare`` could not establish an improvement; ``drift`` found drift;
    ``diagnose`` found a shift (its kind in the report and the JSON's ``kind``). The
    reason is on stderr as ``thermostat: warning: <message>`` (``qualify``: in the report).
2
    Bad input: an unreadable or refused scored set, an option value out of range, a usage
    error (``drift``, ``diagnose``: a window below ``--min-window`` rows, too few to decide). The message is
    on stderr as ``thermostat: error: <message>`` and names the file, the column or row, or the
    flag; nothing is printed on stdout and nothing is written.
3
    The computation itself failed (a numerical routine gave up); the message is on stderr.

Refusals name the command-line flags (``--max-tv``), not the Python API's arguments. Work
that takes more than a few seconds says on stderr what it is doing. No command waits for the
numeric kernels to compile: until they are, large inputs run on NumPy while a separate
low-priority process compiles them (once per installation).

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, cast

# Parsing the arguments (and --help, --version) loads only these: the numeric core (scipy,
# pandas, numba), MLflow and Prefect are imported by the command that runs, once parsed.
from calibration import ESTIMATORS, MAX_CLASSES, MAX_PRIOR_CLASSES
from flows.defaults import DEFAULT_DASK_TIMEOUT, DEFAULT_DASK_WORKERS, ENGINES
from flows.orchestration.engines import engine_from_options
from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_DID_NOT_PASS, EXIT_OK
from flows.cli.json_keys import JSON_KEYS
from flows.cli.options import add_options, resolve
from flows.orchestration.local_only import stay_local

if TYPE_CHECKING:
    from calibration import PartitionedScoredSet, ScoredSet
    from flows.cli.commands import Outcome

__all__ = ["EXIT_BAD_INPUT", "EXIT_COMPUTATION_FAILED", "EXIT_DID_NOT_PASS", "EXIT_OK", "main"]

_SCHEMES = ("equal-width", "equal-mass")


class _Progress:
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

    def __enter__(self) -> _Progress:
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


def _read(path: str, args: argparse.Namespace, *, partitioned: bool) -> ScoredSet | PartitionedScoredSet:
    """A scored-set file read into memory; or, for a command that takes them, a folder or glob
    of Parquet files (or, with ``--engine dask``, one Parquet file) opened as a partitioned set."""
    from calibration import is_partitioned_path, open_partitioned, read_scored_set

    args.progress.stage(f"reading {path}")
    dask = getattr(args, "engine", "local") == "dask"
    if not partitioned and is_partitioned_path(path):
        raise ValueError(f"{path}: is a folder or a pattern; `thermostat {args.command}` reads one scored-set file "
                         "into memory (fit, evaluate and compare also take a folder or glob of Parquet files)")
    if partitioned and (is_partitioned_path(path) or (dask and path.lower().endswith(".parquet"))):
        return open_partitioned(path, max_classes=args.max_classes)
    if dask:
        raise ValueError(f"{path}: --engine dask computes on Parquet partitions: give a folder or glob of .parquet "
                         "files (or one .parquet file), or drop --engine dask")
    return read_scored_set(path, max_classes=args.max_classes)


def _demo(argv: list[str]) -> int:
    """Hand over to ``flows.cli.demo.main``, imported only when asked for (it pulls MLflow and Prefect)."""
    stay_local()  # before MLflow and Prefect are imported: nothing may leave the machine
    try:
        demo = importlib.import_module("flows.cli.demo")
    except ModuleNotFoundError as exc:
        if exc.name != "flows.cli.demo":
            raise
        print("thermostat: error: the demo is not available: flows/cli/demo.py is missing from this installation",
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
fit/compare: T on a search bound; compare: improvement not established; drift:
drift found; diagnose: a shift found), the reason on stderr; 2 bad input (unreadable or refused data, an option out of range): the
message on stderr names the file, column, row or flag, nothing is printed on stdout
and nothing is written; 3 the computation failed."""

_DATA_HELP = "scored set: .npz (logits|probs, labels, ids, groups), .parquet or .csv (id, label, group, logit_0..)"
_PARTITIONED_HELP = (_DATA_HELP + "; or a folder or glob ('day=*/*.parquet') of Parquet files, read partition by "
                     "partition (row group by row group), never all at once")

# Example arguments per command for the generated --json key lists; a later variant lists the
# keys it adds ("with --by-group also ...").
_EXAMPLES: dict[str, tuple[tuple[str, ...], ...]] = {
    "fit": (("DATA",), ("DATA", "--priors", "0.2,0.3,0.5")),
    "evaluate": (("DATA",), ("DATA", "--by-group"), ("DATA", "--estimator", "all"),
                 ("DATA", "--priors", "0.2,0.3,0.5", "--reference-priors", "1,1,1")),
    "sweep": (("DATA", "--temperature", "1", "--target-accuracy", "0.5"),),
    "qualify": (("DATA",),),
    "compare": (("FIT_DATA", "EVAL_DATA", "--resamples", "20"),),
    "drift": (("REFERENCE", "WINDOW", "--temperature", "1", "--min-window", "10", "--resamples", "100", "--groups",
               "--min-group-size", "10", "--estimator", "debiased_l1"),),
    "diagnose": (("REFERENCE", "WINDOW", "--temperature", "1", "--min-window", "10", "--resamples", "100"),),
}


def _example_set() -> ScoredSet:
    import numpy as np

    from calibration import ScoredSet

    n = 120  # diagnose tests the class priors from 100 served rows (the monitor's prior_min_rows)
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, n)
    logits = rng.normal(size=(n, 3)) + 2.0 * np.eye(3)[labels]
    return ScoredSet.from_arrays(logits, labels, ids=[f"example-{i}" for i in range(n)],
                                 groups=np.where(np.arange(n) % 2 == 0, "a", "b"))


def _describe(payload: Mapping[str, Any]) -> str:
    """The keys of a JSON object, nested objects and lists of objects shown with theirs."""
    parts = []
    for key, value in payload.items():
        if isinstance(value, Mapping):
            parts.append(f"{key} {{{_describe(value)}}}")
        elif isinstance(value, list) and value and isinstance(value[0], Mapping):
            parts.append(f"{key} [{{{_describe(value[0])}}}]")
        else:
            parts.append(key)
    return ", ".join(parts)


def _json_keys(sub: argparse.ArgumentParser, command: str) -> str:
    """The command's --json keys, from its own output on a small example (never written out).

    ``--help`` shows :data:`flows.cli.json_keys.JSON_KEYS` instead, which a test holds to this.
    """
    from calibration import json_safe
    from flows.cli.commands import COMMANDS

    example, described, seen = _example_set(), [], set[str]()
    for argv in _EXAMPLES[command]:
        args = sub.parse_args(argv)
        resolve(args, command)
        args.progress = _Progress()
        sets = {name: example for name in COMMANDS[command].data if getattr(args, name, None) is not None}
        payload = json_safe(COMMANDS[command].run(sets, args).payload)
        added = {key: value for key, value in payload.items() if key not in seen}
        flags = " ".join(arg for arg in argv if arg.startswith("--") and arg not in _EXAMPLES[command][0])
        described.append(_describe(added) if not seen else f"with {flags} also {_describe(added)}")
        seen |= payload.keys()
    return "; ".join(described)


def _generated_json_keys() -> dict[str, str]:
    """What :data:`flows.cli.json_keys.JSON_KEYS` must say: each command's keys, from its own output."""
    commands = next(action for action in _parser()._actions if isinstance(action, argparse._SubParsersAction))
    return {name: _json_keys(commands.choices[name], name) for name in _EXAMPLES}


def _version() -> str:
    try:
        return metadata.version("thermostat")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def _scheme(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--scheme", choices=_SCHEMES, default="equal-width", help="ECE binning (default equal-width)")


def _engine(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--engine", choices=ENGINES, default="local",
                     help="where partitioned data is computed on: local (this process, default) or dask")
    sub.add_argument("--dask-address", metavar="tcp://HOST:PORT",
                     help="with --engine dask: a running Dask scheduler (default: a temporary local cluster)")
    sub.add_argument("--dask-workers", type=int, metavar="N",
                     help=f"with --engine dask and no address: workers of the temporary local cluster "
                          f"(default {DEFAULT_DASK_WORKERS})")
    sub.add_argument("--dask-timeout", type=float, default=DEFAULT_DASK_TIMEOUT, metavar="SECONDS",
                     help=f"with --engine dask: how long to wait for the scheduler at --dask-address and its "
                          f"first worker, and for a worker whenever the cluster has none while tasks wait "
                          f"(then exit 3) (default {DEFAULT_DASK_TIMEOUT:g})")


def _estimators(sub: argparse.ArgumentParser, help_text: str) -> None:
    sub.add_argument("--estimator", action="append", choices=(*ESTIMATORS, "all"), metavar="NAME",
                     help=f"{help_text} (repeatable): {', '.join(ESTIMATORS)}, or all")


def _priors(sub: argparse.ArgumentParser, reference_help: str) -> None:
    sub.add_argument("--priors", metavar="P",
                     help="also apply these class priors of the traffic: each posterior softmax(z/T) re-weighted by "
                          "P / the reference priors and renormalised (Saerens et al. 2002); K comma-separated "
                          "positive numbers, or a .json file holding a list of them (normalised to sum to 1)")
    sub.add_argument("--reference-priors", metavar="P", help=reference_help)


def _partitioned(sub: argparse.ArgumentParser, command: str, reference_priors_help: str) -> None:
    """What fit and evaluate share: DATA (partitioned or not), the command's setting options, the
    binning scheme, the priors and the engine."""
    sub.add_argument("data", metavar="DATA", help=_PARTITIONED_HELP)
    add_options(sub, command)
    _scheme(sub)
    _priors(sub, reference_priors_help)
    _engine(sub)


def _fit(sub: argparse.ArgumentParser) -> None:
    _partitioned(sub, "fit", "with --priors: the priors the calibrated posteriors are taken to be for, in --priors' "
                             "format (default: DATA's label frequencies); T is fitted as without --priors, the "
                             "correction applied after the fit")


def _evaluate(sub: argparse.ArgumentParser) -> None:
    _partitioned(sub, "evaluate", "required with --priors: the priors T was fitted for (e.g. the calibration set's "
                                  "label frequencies, or diagnose's reference_priors), in --priors' format; DATA's own "
                                  "label frequencies are not used, as DATA is usually the shifted traffic")
    sub.add_argument("--temperature", type=float, default=1.0, metavar="T", help="divide logits by T (default 1)")
    sub.add_argument("--by-group", action="store_true", help="per-group ECE and their count-weighted mean")
    _estimators(sub, "also estimate the calibration error with a 95%% interval; needs the set in memory")


def _sweep(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("data", metavar="DATA", help=_DATA_HELP)
    sub.add_argument("--temperature", type=float, required=True, metavar="T",
                     help="the T in force; a threshold from another T measures something else")
    sub.add_argument("--target-accuracy", type=float, required=True, metavar="A",
                     help="required accepted accuracy (its Wilson lower bound must reach A)")
    add_options(sub, "sweep")


def _qualify(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("data", metavar="DATA", help=_DATA_HELP)
    sub.add_argument("--training-ids", metavar="FILE", help="text file of training example ids, one per line")
    sub.add_argument("--reference", metavar="DATA", help="scored set of recent traffic: its class proportions")
    add_options(sub, "qualify")


def _compare(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("fit_data", metavar="FIT_DATA", help="scored set that chooses T (a file, folder or glob)")
    sub.add_argument("eval_data", metavar="EVAL_DATA",
                     help="held-out scored set that measures the effect (a file, folder or glob; a partitioned set "
                          "gets a normal interval instead of the bootstrap)")
    add_options(sub, "compare")
    _scheme(sub)
    _engine(sub)


def _drift(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("reference", metavar="REFERENCE",
                     help="the registration-time scored set T was fitted on: its rows give the baseline and T's own "
                          "estimation error (" + _DATA_HELP + ")")
    sub.add_argument("window", metavar="WINDOW", help="labelled traffic to check, the same K classes")
    sub.add_argument("--temperature", type=float, required=True, metavar="T", help="the deployed T")
    sub.add_argument("--groups", action="store_true",
                     help="also test each group of WINDOW's 'group' column (Bonferroni over the groups tested), "
                          "against the same group of REFERENCE when it has one with at least --min-group-size rows")
    add_options(sub, "drift")
    _estimators(sub, "calibration-error estimators reported with intervals (default all)")


def _diagnose(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("reference", metavar="REFERENCE",
                     help="the registration-time scored set T was fitted on: its class mix, accuracies, confidences "
                          "and calibration are the reference (" + _DATA_HELP + ")")
    sub.add_argument("window", metavar="WINDOW", help="labelled traffic to diagnose, the same K classes")
    sub.add_argument("--served", metavar="SERVED",
                     help="the window's served rows, labelled or not (a scored-set file whose label column or key "
                          "may be missing): the class priors and confidences are read from them (default: WINDOW's "
                          "rows)")
    sub.add_argument("--temperature", type=float, required=True, metavar="T", help="the deployed T")
    sub.add_argument("--max-prior-classes", type=int, default=MAX_PRIOR_CLASSES, metavar="K",
                     help="refuse data with more classes than this before any statistic is formed: the class priors "
                          "are estimated and tested on K x K matrices, whose memory grows as K^2 and time as K^3 "
                          f"(default {MAX_PRIOR_CLASSES:,})")
    add_options(sub, "diagnose")


# The analysis commands: name -> (what it does, its arguments).
_ANALYSIS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "fit": ("fit T by minimising mean NLL over log T inside bounds", _fit),
    "evaluate": ("accuracy, NLL, ECE, MCE, Brier and the reliability table at a temperature", _evaluate),
    "sweep": ("choose the gate threshold on confidences calibrated at T", _sweep),
    "qualify": ("check size, class coverage, disjointness from training and representativeness", _qualify),
    "compare": ("fit T on FIT_DATA, evaluate before/after on EVAL_DATA with a paired bootstrap", _compare),
    "drift": ("the drift decision: WINDOW (labelled traffic) against REFERENCE (the rows T was fitted on), both "
              "read at T: the temperature test and the ECE test, with intervals; drift, calibrated (established) or "
              "undetermined (with the labelled rows that would decide)", _drift),
    "diagnose": ("which shift WINDOW shows against REFERENCE, both read at T: no change, label shift (the class "
                 "priors moved; fix: a prior correction), calibration drift (a temperature refit), accuracy "
                 "collapse (escalate), covariate shift with calibration established, or undetermined; with the "
                 "numbers", _diagnose),
}
# Listed for --help only: main() hands these to their own modules before parsing.
_PASSED_ON: dict[str, str] = {
    "demo": "run the end-to-end demo (flows.cli.demo); arguments pass through",
    "lock": "show or clear a model's registration lock: lock show|clear MODEL [--json]",
    "export": "write a version's prediction log to Parquet, one file per UTC day (idempotent, resumable): export "
              "--model NAME --version V --out DIR [--until ISO8601] [--json]",
    "prune": "remove prediction-log rows and monitor check runs older than the retention, the labelled rows archived "
             "to the export first: prune [--retention P90D] [--archive DIR | --no-archive] [--dry-run] [--json]",
    "dashboard": "serve the calibration dashboard, its JSON API and Prometheus /metrics (read-only): dashboard "
                 "[--host 127.0.0.1] [--port 8765]",
    "serve": "serve the version MODEL@ALIAS points at with `mlflow models serve`, restarted on the new version when "
             "the alias moves (at once on a refitted event): serve MODEL [--alias champion] [--host H] [--port P]",
    "alerts": "install the alert automations (drift, refused refit, insufficient data) and their notification block "
              "on the Prefect server: alerts install --webhook-url URL | --block NAME [--json]",
    "setup-db": "create the PostgreSQL databases and roles of a deployment (mlflow, thermostat; idempotent): setup-db "
                "--admin-url URL [--mlflow-password P] [--thermostat-password P] [--json]",
    "ingest": "serve the ingestion API: predictions (JSON rows, KServe CloudEvents) and labels (JSON, CSV) into the "
              "prediction log, a bad row refused alone: ingest [--host 127.0.0.1] [--port 8766]",
    "log": "log served predictions from a file (CSV, Parquet, JSON Lines) into the prediction log: log FILE "
           "[--model NAME --version V --temperature T] [--atomic] [--json]",
    "labels": "attach late labels from a file (CSV, Parquet, JSON Lines; request_id, label): labels attach FILE "
              "[--atomic] [--json]",
}


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
    for name, (help_text, arguments) in _ANALYSIS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text, formatter_class=formatter,
                                  epilog=f"--json keys: {JSON_KEYS[name]}. NaN prints as null.\n\n{_EXIT_TEXT}")
        sub.set_defaults(command=name)
        arguments(sub)
        sub.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
        sub.add_argument("--max-classes", type=int, default=MAX_CLASSES, metavar="K",
                         help=f"refuse data with more classes than this before reading rows (default {MAX_CLASSES:,})")
    for name, help_text in _PASSED_ON.items():
        commands.add_parser(name, help=help_text, add_help=False)
    return parser


# --------------------------------------------------------------------------- entry point

# The operations tools, each its own parser and module, handed their arguments before parsing:
# command -> (module, function).
_TOOLS: dict[str, tuple[str, str]] = {
    "lock": ("flows.orchestration.locks", "main"),    # reads the settings and a database
    "export": ("flows.cli.export_command", "main"),       # reads the settings and a database
    "prune": ("flows.cli.prune_command", "main"),         # reads the settings, a database and MLflow
    "dashboard": ("flows.dashboard", "main"),             # serves until interrupted
    "serve": ("flows.cli.serve_command", "main"),         # serves until interrupted (MLflow, Prefect events)
    "alerts": ("flows.orchestration.alerts", "main"),     # talks to the Prefect server
    "setup-db": ("flows.cli.database_setup", "main"),     # needs the PostgreSQL driver
    "ingest": ("flows.ingest", "main"),                   # serves until interrupted
    "log": ("flows.cli.ingest_commands", "log_main"),     # reads a file, writes the prediction log
    "labels": ("flows.cli.ingest_commands", "labels_main"),
}


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
    if arguments[:1] and arguments[0] in _TOOLS:  # imported only when asked for (MLflow, Prefect, a database)
        module, function = _TOOLS[arguments[0]]
        tool = cast(Callable[..., int], getattr(importlib.import_module(module), function))
        return tool(arguments[1:], prog=f"thermostat {arguments[0]}")
    parser = _parser()
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Read the data, run the analysis command and print its report (or the refusal)."""
    from calibration import ScoredSetError, json_safe
    from flows.cli.commands import COMMANDS, in_flags

    try:
        command = COMMANDS[args.command]
        resolve(args, args.command)  # options not given: THERMOSTAT_* or their declared defaults
        options = (getattr(args, "engine", "local"), getattr(args, "dask_address", None),
                   getattr(args, "dask_workers", None))
        # The options are checked here, before any data is read; the engine starts below.
        engine = engine_from_options(*options, timeout=getattr(args, "dask_timeout", DEFAULT_DASK_TIMEOUT))
        with _Progress() as args.progress:
            sets = {name: _read(getattr(args, name), args, partitioned=command.partitioned)
                    for name in command.data if getattr(args, name) is not None}
            if options[0] == "dask":
                args.progress.stage("starting the Dask engine" if options[1] is None else f"connecting to {options[1]}")
            with engine as args.engine_runner:
                outcome: Outcome = command.run(sets, args)
        rendered = json.dumps(json_safe(outcome.payload), allow_nan=False, indent=2) if args.json else outcome.text
    except (ScoredSetError, ValueError, TypeError) as exc:
        print(f"thermostat: error: {in_flags(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ConnectionError as exc:  # --dask-address: no scheduler there, or one without workers
        print(f"thermostat: error: --dask-address: {exc}", file=sys.stderr)
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
        print(f"thermostat: warning: {in_flags(warning)}", file=sys.stderr)
    try:
        print(rendered, flush=True)
    except BrokenPipeError:
        # The reader stopped early (`| head`): not an error of ours. Point stdout at devnull so
        # that Python's own flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return outcome.status
