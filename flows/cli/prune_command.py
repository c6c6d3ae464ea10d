"""``thermostat prune``: remove prediction-log rows and monitor check runs older than the retention.

Reads the settings (``THERMOSTAT_PREDICTION_LOG_URL``, ``THERMOSTAT_TRACKING_URI``,
``THERMOSTAT_RETENTION``, ``THERMOSTAT_EXPORT_PATH``; ``--retention`` and ``--archive``
override the last two) and runs :func:`flows.pipelines.retention.prune_stored_data`. Exit
status as the command line's contract (:mod:`flows.cli.main`): 0 pruned (or nothing to prune);
2 bad input (no retention, one not longer than the monitor's window or longer than
``monitoring.MAX_RETENTION``, no archive without ``--no-archive``, the settings), the message
on stderr naming the flag or setting, nothing removed; 3 the database, MLflow or the archive
failed (an archive it cannot merge into is named; run it again to finish what was left).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_OK
from flows.settings import ThermostatSettings

__all__ = ["main"]

_DESCRIPTION = """\
Remove what the monitor and the refit no longer read: the prediction-log rows served, and
the monitor's check runs (MLflow) started, before the start of the UTC day that holds now
minus the retention (THERMOSTAT_RETENTION or --retention, ISO 8601, e.g. P90D).

Each version's labelled rows are archived first to the export (THERMOSTAT_EXPORT_PATH or
--archive DIR: the Parquet days `thermostat export` writes, which the monitor, the refit and
`thermostat evaluate` read): a labelled row leaves the log only once its day's file holds it,
and an archived day is merged, never replaced by fewer rows. A row labelled while the prune
runs stays for the next one. Unlabelled rows are not archived. Check runs are marked deleted (hidden from the MLflow UI;
`mlflow gc` removes them for good); registration and refit runs are never touched.
Idempotent: run it daily (the `prune` deployment does)."""

_EPILOG = """\
--json keys: retention, cutoff, dry_run, log (cutoff, archive, dry_run, versions: model_name,
model_version, rows_deleted, days_archived, rows_archived, days_already_archived, rows_kept),
check_runs_deleted.

exit status: 0 pruned (or nothing to prune); 2 bad input (no retention, one not longer than
the monitor's window or longer than P36500D, no archive and no --no-archive, the settings),
the message on stderr, nothing removed; 3 the database, MLflow or the archive failed (run it
again: it finishes what was left)."""


def _duration(text: str) -> timedelta:
    try:
        return TypeAdapter(timedelta).validate_python(text)
    except ValidationError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 duration (e.g. P90D)") from error


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=_DESCRIPTION, epilog=_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--retention", type=_duration, metavar="ISO8601",
                        help="keep this much (default: THERMOSTAT_RETENTION)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--archive", metavar="DIR", help="the export's folder (default: THERMOSTAT_EXPORT_PATH)")
    where.add_argument("--no-archive", action="store_true", help="delete the old labelled rows without archiving them")
    parser.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = "thermostat prune") -> int:
    """Run ``thermostat prune`` and return its exit status (see the module docstring)."""
    try:
        args = _parser(prog).parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error (argparse printed it)
        return exit_.code if isinstance(exit_.code, int) else EXIT_BAD_INPUT

    def fail(status: int, message: str) -> int:
        print(f"{prog}: error: {message}", file=sys.stderr)
        return status

    try:
        settings = ThermostatSettings(**({} if args.retention is None else {"retention": args.retention}))
    except ValidationError as error:  # the settings, or a retention not longer than the monitor's window
        reasons = "; ".join(str(problem["msg"]).removeprefix("Value error, ") for problem in error.errors())
        return fail(EXIT_BAD_INPUT, reasons if args.retention is None else f"--retention: {reasons}")
    if settings.retention is None:
        return fail(EXIT_BAD_INPUT, "no retention: give --retention (e.g. P90D) or set THERMOSTAT_RETENTION")
    archive = None if args.no_archive else Path(args.archive) if args.archive else settings.export_path
    if archive is None and not args.no_archive:
        return fail(EXIT_BAD_INPUT, "no archive for the labelled rows: give --archive DIR or set THERMOSTAT_EXPORT_PATH "
                                    "(the export's folder), or --no-archive to delete them without one")
    if archive is not None and archive.exists() and not archive.is_dir():
        return fail(EXIT_BAD_INPUT, f"--archive {archive} is not a folder")
    import sqlalchemy as sa  # after parsing: --help loads no SQL layer, MLflow or Prefect
    from mlflow.exceptions import MlflowException

    from flows.pipelines.retention import prune_stored_data

    try:
        report = prune_stored_data(settings, archive=archive, now=datetime.now(UTC), dry_run=args.dry_run)
    except FileNotFoundError as error:  # the SQLite log does not exist
        return fail(EXIT_BAD_INPUT, str(error))
    except (sa.exc.SQLAlchemyError, MlflowException, OSError, ValueError, RuntimeError) as error:
        # ValueError: an archive it cannot merge into (an unreadable manifest or day file), named.
        return fail(EXIT_COMPUTATION_FAILED, f"the prune stopped: {type(error).__name__}: {settings.redacted(str(error))}")
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.sentence())
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(prog="python -m flows.cli.prune_command"))
