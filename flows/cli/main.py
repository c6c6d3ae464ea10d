"""The ``thermostat`` command line: fit, evaluate, sweep, qualify, compare, drift, diagnose, export, prune, ingest, log, labels, demo, lock, serve.

Every command reads scored sets (``.npz``, ``.parquet`` or ``.csv``; see
:func:`calibration.read_scored_set`), calls the core in :mod:`calibration` (through
:mod:`flows.cli.commands`), and prints a readable, aligned report, or with ``--json`` exactly one
JSON object on stdout, built from the results' own ``to_dict()``. Nothing is ever written to
disk. NaN and infinities print as JSON ``null`` (undefined, e.g. the accuracy of an empty
bin), so the output is always valid JSON. ``thermostat COMMAND --help`` lists the JSON keys of
every command with ``--json`` (:data:`flows.json_keys.JSON_KEYS`, generated from the output's
model or, for an analysis, from its output on a small example; a test generates them anew, so
the list cannot drift from the output).

The root is a click group with one table, :data:`COMMANDS`: each command's ``module:attribute``
and its one-line help. ``thermostat --help`` lists the table without importing a command's
module; a command's module is imported when that command runs or prints its own ``--help``, so
parsing the arguments imports neither the numeric core's scipy, pandas and numba nor MLflow or
Prefect: ``--help`` answers at once.

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

import importlib
from typing import cast

import click

from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_DID_NOT_PASS, EXIT_OK, run_click

__all__ = ["COMMANDS", "EXIT_BAD_INPUT", "EXIT_COMPUTATION_FAILED", "EXIT_DID_NOT_PASS", "EXIT_OK", "main"]

EXIT_TEXT = """\
exit status (every command): 0 ran and passed; 1 ran and printed its report, but the
result did not pass (qualify: not qualified; sweep: no threshold meets the target;
fit/compare: T on a search bound; compare: improvement not established; drift:
drift found; diagnose: a shift found), the reason on stderr; 2 bad input (unreadable or refused data, an option out of range): the
message on stderr names the file, column, row or flag, nothing is printed on stdout
and nothing is written; 3 the computation failed."""

_ANALYSIS = "flows.cli.commands"
#: Every command: name -> ("module:attribute", its one-line help); the attribute is its click command.
COMMANDS: dict[str, tuple[str, str]] = {
    "fit": (f"{_ANALYSIS}:fit", "fit T by minimising mean NLL over log T inside bounds"),
    "evaluate": (f"{_ANALYSIS}:evaluate", "accuracy, NLL, ECE, MCE, Brier and the reliability table at a temperature"),
    "sweep": (f"{_ANALYSIS}:sweep", "choose the gate threshold on confidences calibrated at T"),
    "qualify": (f"{_ANALYSIS}:qualify",
                "check size, class coverage, disjointness from training and representativeness"),
    "compare": (f"{_ANALYSIS}:compare",
                "fit T on FIT_DATA, evaluate before/after on EVAL_DATA with a paired bootstrap"),
    "drift": (f"{_ANALYSIS}:drift", "the drift decision: WINDOW (labelled traffic) against REFERENCE (the rows T was "
              "fitted on), both read at T"),
    "diagnose": (f"{_ANALYSIS}:diagnose", "which shift WINDOW shows against REFERENCE, both read at T"),
    "demo": ("flows.cli.demo:command", "run the end-to-end demo on bundled data, nothing running beforehand: demo [--state-dir DIR]"),
    "lock": ("flows.cli.lock_command:command",
             "show or clear a model's registration lock: lock show|clear MODEL [--json]"),
    "export": ("flows.cli.export_command:command", "write a version's prediction log to Parquet, one file per UTC day "
               "(idempotent, resumable): export --model NAME --version V --out DIR [--until ISO8601] [--json]"),
    "prune": ("flows.cli.prune_command:command", "remove prediction-log rows and monitor check runs older than the "
              "retention, the labelled rows archived to the export first: prune [--retention P90D] [--archive DIR | "
              "--no-archive] [--dry-run] [--json]"),
    "dashboard": ("flows.dashboard.server:command", "serve the calibration dashboard, its JSON API and Prometheus /metrics "
                  "(read-only): dashboard [--host 127.0.0.1] [--port 8765]"),
    "serve": ("flows.cli.serve_command:command", "serve the version MODEL@ALIAS points at with `mlflow models serve`, "
              "restarted on the new version when the alias moves (at once on a refitted event): serve MODEL [--alias "
              "champion] [--host H] [--port P]"),
    "alerts": ("flows.cli.alerts_command:command", "install the alert automations (drift, refused refit, insufficient "
               "data) and their notification block on the Prefect server: alerts install --webhook-url URL | --block "
               "NAME [--json]"),
    "setup-db": ("flows.cli.database_setup:command", "create the PostgreSQL databases and roles of a deployment (mlflow, "
                 "thermostat; idempotent): setup-db --admin-url URL [--mlflow-password P] [--thermostat-password P] "
                 "[--json]"),
    "ingest": ("flows.ingest.server:command", "serve the ingestion API: predictions (JSON rows, KServe CloudEvents) and labels "
               "(JSON, CSV) into the prediction log, a bad row refused alone: ingest [--host 127.0.0.1] [--port 8766]"),
    "log": ("flows.cli.ingest_commands:log_command", "log served predictions from a file (CSV, Parquet, JSON Lines) into "
            "the prediction log: log FILE [--model NAME --version V --temperature T] [--atomic] [--json]"),
    "labels": ("flows.cli.ingest_commands:labels_command", "attach late labels from a file (CSV, Parquet, JSON Lines; "
               "request_id, label): labels attach FILE [--atomic] [--json]"),
}


class _LazyGroup(click.Group):
    """The root: its commands are :data:`COMMANDS`, each module imported only when its command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name][0].split(":")
        try:
            found = getattr(importlib.import_module(module), attribute)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            raise _Unavailable(f"the {cmd_name} command is not available: {module} is missing from this "
                               "installation") from None
        return cast(click.Command, found)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):  # from the table: no command's module is imported
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items()])


class _Unavailable(click.ClickException):
    """A command whose module this installation lacks: bad input (exit 2), not a crash."""

    exit_code = EXIT_BAD_INPUT


@click.group(cls=_LazyGroup, no_args_is_help=False, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="JSON keys per command: see `thermostat COMMAND --help`.\n\n" + EXIT_TEXT)
@click.version_option(package_name="thermostat", prog_name="thermostat", message="%(prog)s %(version)s")
def _root() -> None:
    """Temperature scaling for classifier calibration: fit T, measure calibration, sweep the gate
    threshold, qualify calibration data, compare before and after."""


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
    try:
        return run_click(_root, argv, "thermostat")
    except KeyboardInterrupt:  # Ctrl-C in a command that runs until stopped (serve, dashboard, ingest)
        return 130
