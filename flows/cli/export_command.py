"""``thermostat export``: write a version's prediction log to Parquet partitioned by UTC day.

Reads the prediction log named by the settings (``THERMOSTAT_PREDICTION_LOG_URL``, default
``sqlite:///<THERMOSTAT_STATE_DIR>/predictions.db``), like ``thermostat lock``, and calls
:func:`monitoring.export_prediction_log`. Exit status as the command line's contract
(:mod:`flows.cli.main`): 0 exported (or already up to date); 2 bad input (an option, the
settings, a version never logged, an unreadable manifest), the message on stderr naming it;
3 the database or the output folder failed.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click
import sqlalchemy as sa

from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_OK, fail
from flows.json_keys import JSON_KEYS
from flows.settings import ThermostatSettings
from monitoring import mask_url

if TYPE_CHECKING:
    from monitoring import ExportResult

__all__ = ["command"]

_DESCRIPTION = """\
Write the labelled rows of one model version from the prediction log
(THERMOSTAT_PREDICTION_LOG_URL; default: the SQLite log under THERMOSTAT_STATE_DIR) to
Parquet, one file per UTC day of serving time, so that the monitor and the refit can read
the history from any machine:

\b
  DIR/model=NAME/version=V/date=YYYY-MM-DD/part-0.parquet
  DIR/model=NAME/version=V/_manifest.json

NAME and V are percent-quoted. Columns: id, label, group, logit_0 .. logit_{K-1} (float32
as logged), served_at (UTC), temperature, predicted_class, confidence; rows in serving
order. A day whose rows all have a group is also a scored set for fit/evaluate.

Idempotent and resumable: every file is written to a temporary file and moved into place,
and the manifest records each day's fingerprint in the database (labelled rows, last
label time, last row id). Running the command again merges the log's new labelled rows
into only the days that changed (late labels, late rows) or that an interrupted run did
not finish; a written day is never replaced by fewer rows (it is the archive of
`thermostat prune`); re-running a finished export writes nothing. One export of a version
runs at a time: another waits for it (the version folder's .export.lock)."""

_EPILOG = f"""\
--json keys: {JSON_KEYS["export"]}.

exit status: 0 exported (or already up to date); 2 bad input (an option, the settings,
a version never logged, an unreadable manifest), the message on stderr; 3 the database
could not be read or the export could not be written."""


def _aware_time(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not an ISO 8601 time (e.g. 2026-03-01T00:00:00Z)") from exc
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no timezone; add one, e.g. {text}Z or {text}+00:00")
    return moment


def _report(result: ExportResult) -> str:
    head = (f"model {result.model_name!r} version {result.model_version!r} (K={result.n_classes}), served before "
            f"{result.until.isoformat(timespec='seconds')}, in {result.directory}")  # fmt: skip
    skipped = len(result.days_skipped)
    if not result.days_written:
        return f"already up to date: {head}\n{skipped} day(s) unchanged, nothing written"
    lines = [f"exported {head}",
             f"{len(result.days_written)} day(s) written ({result.days_written[0]} .. {result.days_written[-1]}), "
             f"{result.rows_written:,} rows",
             f"{skipped} day(s) unchanged, skipped"]  # fmt: skip
    return "\n".join(lines)


@click.command(help=_DESCRIPTION, epilog=_EPILOG)
@click.option("--model", required=True, metavar="NAME", help="registered model name")
@click.option("--version", required=True, metavar="V", help="model version, as logged")
@click.option("--out", required=True, type=click.Path(path_type=Path), metavar="DIR",
              help="root folder of the export (created if missing)")
@click.option("--until", type=_aware_time, metavar="ISO8601",
              help="export rows served before this time, with a timezone (default: now)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object instead of the report")
def command(model: str, version: str, out: Path, until: datetime | None, as_json: bool) -> int:
    """Export one version's labelled rows; return the exit status (see the module docstring)."""
    if out.exists() and not out.is_dir():
        return fail(EXIT_BAD_INPUT, f"--out {out} is not a folder")
    try:
        url = ThermostatSettings().resolved_prediction_log_url()
    except ValueError as error:  # the settings (pydantic's ValidationError is one)
        return fail(EXIT_BAD_INPUT, str(error))
    shown = mask_url(url)
    from monitoring import PredictionLog, export_prediction_log  # after parsing: --help loads no SQL layer

    try:
        log = PredictionLog.existing(url)  # a SQLite file that is not there is not created
    except (sa.exc.ArgumentError, ImportError) as error:  # a malformed URL, an unknown dialect or driver
        return fail(EXIT_BAD_INPUT, f"the prediction log URL {shown} cannot be used: {error}")
    except FileNotFoundError:
        return fail(EXIT_BAD_INPUT, f"there is no prediction log at {shown}: the file does not exist "
                                            "(set THERMOSTAT_PREDICTION_LOG_URL or THERMOSTAT_STATE_DIR)")  # fmt: skip
    try:
        missing = log.missing_tables()
        if missing:
            return fail(EXIT_BAD_INPUT, f"{shown} holds no prediction log (no table {', '.join(missing)})")
        result = export_prediction_log(log, model, version, out, until=until)
    except LookupError:
        return fail(EXIT_BAD_INPUT,
                      f"no prediction of model {model!r} version {version!r} was ever logged "
                      f"in the prediction log at {shown}; check --model and --version")  # fmt: skip
    except ValueError as error:  # a name the log refuses, an unreadable manifest
        return fail(EXIT_BAD_INPUT, str(error))
    except sa.exc.SQLAlchemyError as error:
        return fail(EXIT_COMPUTATION_FAILED, f"the prediction log at {shown} could not be read: {error}")
    except OSError as error:
        return fail(EXIT_COMPUTATION_FAILED, f"the export could not be written under --out {out}: {error}")
    finally:
        log.dispose()
    print(json.dumps(result.to_dict(), indent=2) if as_json else _report(result))
    return EXIT_OK
