"""The ``thermostat`` command line: fit, evaluate, sweep, qualify, compare, drift, export, demo, lock.

Every command reads scored sets (``.npz``, ``.parquet`` or ``.csv``; see
:func:`calibration.read_scored_set`), calls the core in :mod:`calibration` (through
:mod:`flows.commands`), and prints a readable, aligned report, or with ``--json`` exactly one
JSON object on stdout, built from the results' own ``to_dict()``. Nothing is ever written to
disk. NaN and infinities print as JSON ``null`` (undefined, e.g. the accuracy of an empty
bin), so the output is always valid JSON. ``thermostat COMMAND --help`` lists the JSON keys
(:data:`flows.json_keys.JSON_KEYS`; a test holds them to the command's output on a small
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
    registered); ``compare`` could not establish an improvement; ``drift`` found drift. The
    reason is on stderr as ``thermostat: warning: <message>`` (``qualify``: in the report).
2
    Bad input: an unreadable or refused scored set, an option value out of range, a usage
    error (``drift``: a window below ``--min-window`` rows, too few to decide). The message is
    on stderr as ``thermostat: error: <message>`` and names the file, the column or row, or the
    flag; nothing is printed on stdout and nothing is written.
3
    The computation itself failed (a numerical routine gave up); the message is on stderr.

Refusals name the command-line flags (``--max-tv``), not the Python API's arguments. Work
that takes more than a few seconds says on stderr what it is doing (an input of more than
268 million logits, on an installation whose numeric kernels are not compiled yet, compiles
them first: about a minute, once; smaller inputs run without them until then).

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
from calibration import DEFAULT_BOUNDS, ESTIMATORS, MAX_CLASSES
from flows.engines import DEFAULT_DASK_TIMEOUT, DEFAULT_DASK_WORKERS, ENGINES, engine_from_options
from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_DID_NOT_PASS, EXIT_OK
from flows.json_keys import JSON_KEYS
from flows.local_only import stay_local

if TYPE_CHECKING:
    from calibration import PartitionedScoredSet, ScoredSet
    from flows.commands import Outcome

__all__ = ["EXIT_BAD_INPUT", "EXIT_COMPUTATION_FAILED", "EXIT_DID_NOT_PASS", "EXIT_OK", "main"]

_SCHEMES = ("equal-width", "equal-mass")


class _Progress:
    """Says on stderr what a command is doing once it has run for more than a few seconds.

    Quiet for fast commands; a large fit (and a very large first one, which compiles the
    numeric kernels) gets a line after ``first`` seconds and another every ``every`` seconds.
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
        wait, compiling = self._first, (" (a first input of more than 268M logits also compiles the numeric "
                                        "kernels, once per installation: about a minute)")
        while not self._done.wait(wait):
            print(f"thermostat: still working after {time.monotonic() - self._started:.0f} s: {self._stage}"
                  f"{compiling}", file=sys.stderr, flush=True)
            wait, compiling = self._every, ""


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
fit/compare: T on a search bound; compare: improvement not established; drift:
drift found), the reason on stderr; 2 bad input (unreadable or refused data, an option out of range): the
message on stderr names the file, column, row or flag, nothing is printed on stdout
and nothing is written; 3 the computation failed."""

_DATA_HELP = "scored set: .npz (logits|probs, labels, ids, groups), .parquet or .csv (id, label, group, logit_0..)"
_PARTITIONED_HELP = (_DATA_HELP + "; or a folder or glob ('day=*/*.parquet') of Parquet files, read partition by "
                     "partition (row group by row group), never all at once")

# Example arguments per command for the generated --json key lists; a later variant lists the
# keys it adds ("with --by-group also ...").
_EXAMPLES: dict[str, tuple[tuple[str, ...], ...]] = {
    "fit": (("DATA",),),
    "evaluate": (("DATA",), ("DATA", "--by-group"), ("DATA", "--estimator", "all")),
    "sweep": (("DATA", "--temperature", "1", "--target-accuracy", "0.5"),),
    "qualify": (("DATA",),),
    "compare": (("FIT_DATA", "EVAL_DATA", "--resamples", "20"),),
    "drift": (("REFERENCE", "WINDOW", "--temperature", "1", "--min-window", "10", "--resamples", "20", "--groups",
               "--min-group-size", "10", "--estimator", "debiased_l1"),),
}


def _example_set() -> ScoredSet:
    import numpy as np

    from calibration import ScoredSet

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 60)
    logits = rng.normal(size=(60, 3)) + 2.0 * np.eye(3)[labels]
    return ScoredSet.from_arrays(logits, labels, ids=[f"example-{i}" for i in range(60)],
                                 groups=np.where(np.arange(60) % 2 == 0, "a", "b"))


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

    ``--help`` shows :data:`flows.json_keys.JSON_KEYS` instead, which a test holds to this.
    """
    from calibration import json_safe
    from flows.commands import COMMANDS

    example, described, seen = _example_set(), [], set[str]()
    for argv in _EXAMPLES[command]:
        args = sub.parse_args(argv)
        args.progress = _Progress()
        sets = {name: example for name in COMMANDS[command].data if getattr(args, name, None) is not None}
        payload = json_safe(COMMANDS[command].run(sets, args).payload)
        added = {key: value for key, value in payload.items() if key not in seen}
        flags = " ".join(arg for arg in argv if arg.startswith("--") and arg not in _EXAMPLES[command][0])
        described.append(_describe(added) if not seen else f"with {flags} also {_describe(added)}")
        seen |= payload.keys()
    return "; ".join(described)


def _generated_json_keys() -> dict[str, str]:
    """What :data:`flows.json_keys.JSON_KEYS` must say: each command's keys, from its own output."""
    commands = next(action for action in _parser()._actions if isinstance(action, argparse._SubParsersAction))
    return {name: _json_keys(commands.choices[name], name) for name in _EXAMPLES}


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

    subs: dict[str, argparse.ArgumentParser] = {}

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text, epilog=_EXIT_TEXT,
                                  formatter_class=formatter)
        sub.set_defaults(command=name)
        subs[name] = sub
        return sub

    def binning(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--bins", type=int, default=15, metavar="M", help="number of ECE bins (default 15)")
        sub.add_argument("--scheme", choices=_SCHEMES, default="equal-width", help="ECE binning (default equal-width)")

    def bounds(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--lower", type=float, default=DEFAULT_BOUNDS[0], help="lowest T searched (default 0.05)")
        sub.add_argument("--upper", type=float, default=DEFAULT_BOUNDS[1], help="highest T searched (default 20)")

    def engine(sub: argparse.ArgumentParser) -> None:
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

    def json_flag(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
        sub.add_argument("--max-classes", type=int, default=MAX_CLASSES, metavar="K",
                         help=f"refuse data with more classes than this before reading rows (default {MAX_CLASSES:,})")

    fit = command("fit", "fit T by minimising mean NLL over log T inside bounds")
    fit.add_argument("data", metavar="DATA", help=_PARTITIONED_HELP)
    bounds(fit)
    binning(fit)
    engine(fit)
    json_flag(fit)

    ev = command("evaluate", "accuracy, NLL, ECE, MCE, Brier and the reliability table at a temperature")
    ev.add_argument("data", metavar="DATA", help=_PARTITIONED_HELP)
    ev.add_argument("--temperature", type=float, default=1.0, metavar="T", help="divide logits by T (default 1)")
    binning(ev)
    ev.add_argument("--by-group", action="store_true", help="per-group ECE and their count-weighted mean")
    ev.add_argument("--min-count", type=int, default=10, help="bins with fewer examples are sparse (default 10)")
    ev.add_argument("--estimator", action="append", choices=(*ESTIMATORS, "all"), metavar="NAME",
                    help=f"also estimate the calibration error with a 95%% interval (repeatable): "
                         f"{', '.join(ESTIMATORS)}, or all; needs the set in memory")
    engine(ev)
    json_flag(ev)

    sw = command("sweep", "choose the gate threshold on confidences calibrated at T")
    sw.add_argument("data", metavar="DATA", help=_DATA_HELP)
    sw.add_argument("--temperature", type=float, required=True, metavar="T",
                    help="the T in force; a threshold from another T measures something else")
    sw.add_argument("--target-accuracy", type=float, required=True, metavar="A",
                    help="required accepted accuracy (its Wilson lower bound must reach A)")
    sw.add_argument("--confidence-level", type=float, default=0.95, help="Wilson interval level (default 0.95)")
    json_flag(sw)

    qu = command("qualify", "check size, class coverage, disjointness from training and representativeness")
    qu.add_argument("data", metavar="DATA", help=_DATA_HELP)
    qu.add_argument("--training-ids", metavar="FILE", help="text file of training example ids, one per line")
    qu.add_argument("--reference", metavar="DATA", help="scored set of recent traffic: its class proportions")
    qu.add_argument("--min-total", type=int, default=300, help="minimum examples (default 300)")
    qu.add_argument("--min-per-class", type=int, default=30, help="minimum examples per class (default 30)")
    qu.add_argument("--max-tv", type=float, default=0.15,
                    help="maximum total-variation distance of class proportions to --reference (default 0.15)")
    json_flag(qu)

    co = command("compare", "fit T on FIT_DATA, evaluate before/after on EVAL_DATA with a paired bootstrap")
    co.add_argument("fit_data", metavar="FIT_DATA", help="scored set that chooses T (a file, folder or glob)")
    co.add_argument("eval_data", metavar="EVAL_DATA",
                    help="held-out scored set that measures the effect (a file, folder or glob; a partitioned set "
                         "gets a normal interval instead of the bootstrap)")
    bounds(co)
    binning(co)
    co.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    co.add_argument("--confidence-level", type=float, default=0.95, help="interval level (default 0.95)")
    co.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    engine(co)
    json_flag(co)

    dr = command("drift", "the drift decision: WINDOW (labelled traffic) against REFERENCE (the rows T was fitted "
                          "on), both read at T: the temperature test and the ECE test, with intervals")
    dr.add_argument("reference", metavar="REFERENCE",
                    help="the registration-time scored set T was fitted on: its rows give the baseline and T's own "
                         "estimation error (" + _DATA_HELP + ")")
    dr.add_argument("window", metavar="WINDOW", help="labelled traffic to check, the same K classes")
    dr.add_argument("--temperature", type=float, required=True, metavar="T", help="the deployed T")
    dr.add_argument("--groups", action="store_true",
                    help="also test each group of WINDOW's 'group' column (Bonferroni over the groups tested), against "
                         "the same group of REFERENCE when it has one with at least --min-group-size rows")
    dr.add_argument("--margin", type=float, default=0.05,
                    help="relative shift of T that counts: 0.05 flags T_window/T_reference beyond 1.05 or below "
                         "1/1.05 (default 0.05)")
    dr.add_argument("--tolerance", type=float, default=0.02,
                    help="excess of the window's debiased ECE over the reference's that counts (default 0.02)")
    dr.add_argument("--level", type=float, default=0.01,
                    help="significance level of the decision on the whole window: its two tests run at half of it, "
                         "a group's at half of it divided by the groups tested (default 0.01)")
    dr.add_argument("--min-window", type=int, default=500,
                    help="fewer labelled rows in WINDOW are refused (exit 2): too few to decide (default 500)")
    dr.add_argument("--min-group-size", type=int, default=200, help="smaller groups are not tested (default 200)")
    dr.add_argument("--bins", type=int, default=15, metavar="M", help="equal-width ECE bins (default 15)")
    dr.add_argument("--estimator", action="append", choices=(*ESTIMATORS, "all"), metavar="NAME",
                    help=f"calibration-error estimators reported with intervals (repeatable): {', '.join(ESTIMATORS)}, "
                         "or all (default all)")
    dr.add_argument("--confidence-level", type=float, default=0.95, help="level of the intervals (default 0.95)")
    dr.add_argument("--resamples", type=int, default=1000,
                    help="bootstrap resamples of the reported estimators' intervals (default 1000)")
    dr.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    json_flag(dr)

    for name, sub in subs.items():
        sub.epilog = f"--json keys: {JSON_KEYS[name]}. NaN prints as null.\n\n{_EXIT_TEXT}"
    # Listed for --help only: main() hands `demo ...` to flows.demo before parsing.
    commands.add_parser("demo", help="run the end-to-end demo (flows.demo); arguments pass through", add_help=False)
    commands.add_parser("lock", help="show or clear a model's registration lock: lock show|clear MODEL [--json]",
                        add_help=False)
    commands.add_parser("export", help="write a version's prediction log to Parquet, one file per UTC day (idempotent, "
                        "resumable): export --model NAME --version V --out DIR [--until ISO8601] [--json]",
                        add_help=False)
    commands.add_parser("dashboard", help="serve the calibration dashboard, its JSON API and Prometheus /metrics "
                        "(read-only): dashboard [--host 127.0.0.1] [--port 8765]", add_help=False)
    commands.add_parser("alerts", help="install the alert automations (drift, refused refit, insufficient data) and "
                        "their notification block on the Prefect server: alerts install --webhook-url URL | --block "
                        "NAME [--json]", add_help=False)
    commands.add_parser("setup-db", help="create the PostgreSQL databases and roles of a deployment (mlflow, thermostat; "
                        "idempotent): setup-db --admin-url URL [--mlflow-password P] [--thermostat-password P] [--json]",
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
    if arguments[:1] == ["export"]:  # imported only when asked for: it reads the settings and a database
        from flows.export_command import main as export_main

        return export_main(arguments[1:], prog="thermostat export")
    if arguments[:1] == ["dashboard"]:  # imported only when asked for: it serves until interrupted
        from flows.dashboard import main as dashboard_main

        return dashboard_main(arguments[1:], prog="thermostat dashboard")
    if arguments[:1] == ["alerts"]:  # imported only when asked for: it talks to the Prefect server
        from flows.alerts import main as alerts_main

        return alerts_main(arguments[1:], prog="thermostat alerts")
    if arguments[:1] == ["setup-db"]:  # imported only when asked for: it needs the PostgreSQL driver
        from flows.database_setup import main as setup_db_main

        return setup_db_main(arguments[1:], prog="thermostat setup-db")
    parser = _parser()
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    from calibration import ScoredSetError, json_safe
    from flows.commands import COMMANDS, in_flags

    try:
        command = COMMANDS[args.command]
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
