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

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
from pydantic import TypeAdapter, ValidationError

from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_OK, fail
from flows.json_keys import JSON_KEYS
from flows.settings import ThermostatSettings

__all__ = ["command"]

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

_EPILOG = f"""\
--json keys: {JSON_KEYS["prune"]}.

exit status: 0 pruned (or nothing to prune); 2 bad input (no retention, one not longer than
the monitor's window or longer than P36500D, no archive and no --no-archive, the settings),
the message on stderr, nothing removed; 3 the database, MLflow or the archive failed (run it
again: it finishes what was left)."""


def _duration(text: str) -> timedelta:
    try:
        return TypeAdapter(timedelta).validate_python(text)
    except ValidationError as error:
        raise ValueError(f"{text!r} is not an ISO 8601 duration (e.g. P90D)") from error


@click.command(help=_DESCRIPTION, epilog=_EPILOG)
@click.option("--retention", type=_duration, metavar="ISO8601", help="keep this much (default: THERMOSTAT_RETENTION)")
@click.option("--archive", metavar="DIR", help="the export's folder (default: THERMOSTAT_EXPORT_PATH)")
@click.option("--no-archive", is_flag=True, help="delete the old labelled rows without archiving them")
@click.option("--dry-run", is_flag=True, help="say what would be removed; remove nothing")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object instead of the report")
def command(retention: timedelta | None, archive: str | None, no_archive: bool, dry_run: bool, as_json: bool) -> int:
    """Prune what is older than the retention; return the exit status (see the module docstring)."""
    if archive and no_archive:
        raise click.UsageError("--archive and --no-archive cannot be given together")
    try:
        settings = ThermostatSettings() if retention is None else ThermostatSettings(retention=retention)
    except ValidationError as error:  # the settings, or a retention not longer than the monitor's window
        reasons = "; ".join(str(problem["msg"]).removeprefix("Value error, ") for problem in error.errors())
        return fail(EXIT_BAD_INPUT, reasons if retention is None else f"--retention: {reasons}")
    if settings.retention is None:
        return fail(EXIT_BAD_INPUT, "no retention: give --retention (e.g. P90D) or set THERMOSTAT_RETENTION")
    folder = None if no_archive else Path(archive) if archive else settings.export_path
    if folder is None and not no_archive:
        return fail(EXIT_BAD_INPUT, "no archive for the labelled rows: give --archive DIR or set THERMOSTAT_EXPORT_PATH "
                                    "(the export's folder), or --no-archive to delete them without one")
    if folder is not None and folder.exists() and not folder.is_dir():
        return fail(EXIT_BAD_INPUT, f"--archive {folder} is not a folder")
    import sqlalchemy as sa  # after parsing: --help loads no SQL layer, MLflow or Prefect
    from mlflow.exceptions import MlflowException

    from flows.pipelines.retention import prune_stored_data

    try:
        report = prune_stored_data(settings, archive=folder, now=datetime.now(UTC), dry_run=dry_run)
    except FileNotFoundError as error:  # the SQLite log does not exist
        return fail(EXIT_BAD_INPUT, str(error))
    except (sa.exc.SQLAlchemyError, MlflowException, OSError, ValueError, RuntimeError) as error:
        # ValueError: an archive it cannot merge into (an unreadable manifest or day file), named.
        return fail(EXIT_COMPUTATION_FAILED, f"the prune stopped: {type(error).__name__}: {settings.redacted(str(error))}")
    print(json.dumps(report.to_dict(), indent=2) if as_json else report.sentence())
    return EXIT_OK
