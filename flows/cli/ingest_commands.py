"""``thermostat log FILE`` and ``thermostat labels attach FILE``: predictions and labels from files.

The file-side twins of the ingestion service's ``POST /v1/predictions`` and ``POST /v1/labels``:
the same rows (:mod:`monitoring.ingest_files`: CSV, Parquet, JSON Lines), the same checks, the
same report (the service's JSON answer with ``--json``), into the prediction log named by the
settings (``THERMOSTAT_PREDICTION_LOG_URL``). A bad row is refused alone, with its row number
(0-based, after a CSV's header) and reason; the others are written. ``--atomic``: all or
nothing. Both are idempotent: running the same file again reports its rows ``unchanged``.

Exit status (the command line's contract, :mod:`flows.cli.main`): 0 every row is in the log as
the file says; 1 the good rows were written and the report lists rows that were not (refused,
conflicting, unknown), a warning on stderr; 2 bad input, nothing written: the file refused (its
format, its columns, its size), the settings, or with ``--atomic`` a refused row; 3 the
database failed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import click

from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_DID_NOT_PASS, EXIT_OK, fail
from flows.json_keys import JSON_KEYS
from flows.settings import ThermostatSettings

if TYPE_CHECKING:
    from monitoring import LabelAttachReport, LabelRows, PredictionLog, PredictionRows, RowRefusal

__all__ = ["labels_command", "log_command"]

_SHOWN: Final = 10
_FORMATS: Final = "CSV (.csv), Parquet (.parquet) or JSON Lines (.jsonl, .ndjson)"
_EXIT: Final = ("exit status: 0 every row is in the log; 1 the good rows were written, the report lists the others "
                "(refused, conflicting, unknown); 2 bad input, nothing written (the file, the settings, --atomic "
                "with a refused row), the message on stderr; 3 the database failed.")


def _settings_url() -> str | int:
    try:
        return ThermostatSettings().resolved_prediction_log_url()
    except ValueError as error:  # pydantic's ValidationError is one
        return fail(EXIT_BAD_INPUT, f"the THERMOSTAT_* settings are invalid: {error}")


def _listing(refused: Sequence[RowRefusal]) -> list[str]:
    lines = [f"refused rows ({len(refused):,}{f', the first {_SHOWN}' if len(refused) > _SHOWN else ''}):"]
    for refusal in refused[:_SHOWN]:
        where = f"row {refusal.index}" + (f" (request id {refusal.request_id!r})" if refusal.request_id else "")
        lines.append(f"  {where}: {refusal.reason}")
    return lines


def _finish(text: str, payload: dict[str, Any], as_json: bool, complete: bool, what: str) -> int:
    print(json.dumps(payload, indent=2) if as_json else text, flush=True)
    if complete:
        return EXIT_OK
    print(f"{click.get_current_context().command_path}: warning: {what}", file=sys.stderr)
    return EXIT_DID_NOT_PASS


# --------------------------------------------------------------------------- thermostat log


@click.command(
    help=f"Log served predictions from FILE ({_FORMATS}) into the prediction log (THERMOSTAT_PREDICTION_LOG_URL). "
         "Columns: request_id (or id), logit_0 .. logit_{K-1} (the raw logits), model_name, model_version, "
         "temperature (each may instead be given below), optionally group, served_at (ISO 8601 with a timezone), "
         "label; JSON Lines: one row object a line, logits a list. A bad row is refused alone; a row already logged "
         "is reported unchanged.",
    epilog=f"--json keys: {JSON_KEYS['log']}.\n\n" + _EXIT,
)
@click.argument("file", metavar="FILE")
@click.option("--model", metavar="NAME", help="model name of the rows without a model_name")
@click.option("--version", metavar="V", help="model version of the rows without a model_version")
@click.option("--temperature", type=float, metavar="T", help="the T in force, for the rows without one")
@click.option("--group", metavar="G", help="group of the rows without one")
@click.option("--atomic", is_flag=True, help="all or nothing: a refused row writes nothing (exit 2)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object instead of the report")
def log_command(file: str, model: str | None, version: str | None, temperature: float | None,
                group: str | None, atomic: bool, as_json: bool) -> int:
    """Log FILE's predictions; return the exit status (see the module docstring)."""
    url = _settings_url()
    if isinstance(url, int):
        return url
    import sqlalchemy as sa

    from flows.ingest.payloads import IngestAnswer
    from monitoring import IngestFileError, open_prediction_log, read_prediction_file

    given = (("model_name", model), ("model_version", version), ("temperature", temperature), ("group", group))
    defaults: dict[str, object] = {name: value for name, value in given if value is not None}
    try:
        chunks: Iterable[PredictionRows] = read_prediction_file(file)
        if atomic:
            chunks = [_joined(list(chunks))]
        log = open_prediction_log(url)
    except IngestFileError as error:
        return fail(EXIT_BAD_INPUT, str(error))
    except (sa.exc.SQLAlchemyError, ImportError) as error:
        return fail(EXIT_COMPUTATION_FAILED, _database_failed(url, error))
    try:
        report = _log_chunks(log, chunks, defaults, atomic=atomic)
    except IngestFileError as error:  # a chunk further in (its rows before it are written)
        return fail(EXIT_BAD_INPUT, f"{error} (the rows before it were written)")
    except sa.exc.SQLAlchemyError as error:
        return fail(EXIT_COMPUTATION_FAILED, _database_failed(url, error))
    finally:
        log.dispose()
    if atomic and report.refused:
        first = next((r for r in report.refused if not r.reason.startswith("not written")), report.refused[0])
        return fail(EXIT_BAD_INPUT, f"{file}: row {first.index}: {first.reason}; nothing of its "
                                            f"{report.received:,} rows was written (--atomic)")
    text = "\n".join([f"{file}: {report.received:,} rows: {report.written:,} written, {report.unchanged:,} "
                      f"already logged (unchanged), {len(report.refused):,} refused",
                      *(_listing(report.refused) if report.refused else [])])
    payload = {"file": file, **IngestAnswer.of(report).model_dump()}
    return _finish(text, payload, as_json, report.complete,
                   f"{len(report.refused):,} of {report.received:,} rows were refused; the others were written")


def _joined(chunks: list[PredictionRows]) -> PredictionRows:
    from monitoring import PredictionRows

    whole = PredictionRows()
    for chunk in chunks:
        whole.rows.extend(chunk.rows)
        whole.positions.extend(chunk.positions)
        whole.refused.extend(chunk.refused)
    return whole


def _log_chunks(log: PredictionLog, chunks: Iterable[PredictionRows], defaults: dict[str, object], *,
                atomic: bool) -> Any:
    """Every chunk's rows written (one transaction each), one report of the file's rows."""
    from flows.ingest.payloads import relabelled
    from monitoring import IngestReport, PredictionBatch, write_predictions

    received = written = unchanged = 0
    refused: list[RowRefusal] = []
    for chunk in chunks:
        batch = PredictionBatch.from_rows(chunk.rows, defaults=defaults)
        if atomic and chunk.refused:  # a row the file's reading refused: nothing is written
            report = IngestReport(len(chunk.rows), 0, 0, batch.refused)
        else:
            report = write_predictions(log, batch, atomic=atomic)
        refused.extend(chunk.refused)
        refused.extend(relabelled(report.refused, chunk.positions))
        received += len(chunk.rows) + len(chunk.refused)
        written += report.written
        unchanged += report.unchanged
    return IngestReport(received, written, unchanged, tuple(sorted(refused, key=lambda r: r.index)))


def _database_failed(url: str, error: BaseException) -> str:
    from monitoring import mask_url, redact_credentials

    return f"the prediction log at {mask_url(url)} could not be written: " + redact_credentials(
        " ".join(f"{type(error).__name__}: {error}".split()), url)[:500]


# --------------------------------------------------------------------------- thermostat labels attach


@click.group(help="Late labels into the prediction log.")
def labels_command() -> None:
    """``thermostat labels``: its one subcommand, ``attach``."""


@labels_command.command(
    "attach", short_help="attach late labels from FILE to the logged predictions",
    help=f"Attach the labels of FILE ({_FORMATS}; columns request_id (or id) and label, others ignored) to the "
         "predictions logged under those request ids (THERMOSTAT_PREDICTION_LOG_URL). Labels are write-once: a "
         "different label for a labelled request is a conflict, kept as it was; the same label again is unchanged. "
         "A bad row is refused alone.",
    epilog=f"--json keys: {JSON_KEYS['labels attach']}.\n\n" + _EXIT,
)
@click.argument("file", metavar="FILE")
@click.option("--atomic", is_flag=True, help="all or nothing: a refused row writes nothing (exit 2)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object instead of the report")
def _attach_command(file: str, atomic: bool, as_json: bool) -> int:
    url = _settings_url()
    if isinstance(url, int):
        return url
    import sqlalchemy as sa

    from flows.ingest.payloads import LabelAnswer
    from monitoring import IngestFileError, open_prediction_log, read_label_file

    try:
        chunks: list[LabelRows] | Iterable[LabelRows] = read_label_file(file)
        if atomic:
            chunks = [_joined_labels(list(chunks))]
        log = open_prediction_log(url, must_exist=True)
    except IngestFileError as error:
        return fail(EXIT_BAD_INPUT, str(error))
    except FileNotFoundError as error:  # no SQLite log there: nothing could be attached
        return fail(EXIT_BAD_INPUT, str(error))
    except (sa.exc.SQLAlchemyError, ImportError) as error:
        return fail(EXIT_COMPUTATION_FAILED, _database_failed(url, error))
    try:
        report, refused = _attach_chunks(log, chunks, atomic=atomic)
    except IngestFileError as error:
        return fail(EXIT_BAD_INPUT, f"{error} (the rows before it were attached)")
    except ValueError as error:  # --atomic and a refused row
        return fail(EXIT_BAD_INPUT, f"{file}: {error} (--atomic)")
    except sa.exc.SQLAlchemyError as error:
        return fail(EXIT_COMPUTATION_FAILED, _database_failed(url, error))
    finally:
        log.dispose()
    answer = LabelAnswer.of(report, refused)
    text = "\n".join(_label_lines(file, answer))
    missing = len(answer.conflicts) + len(answer.unknown) + len(answer.refused)
    return _finish(text, {"file": file, **answer.model_dump()}, as_json, missing == 0,
                   f"{missing:,} of {answer.received:,} labels are not in the log as the file says (conflicting, "
                   "unknown or refused); the others were attached")


def _joined_labels(chunks: list[LabelRows]) -> LabelRows:
    from monitoring import LabelRows

    whole = LabelRows()
    for chunk in chunks:
        whole.request_ids.extend(chunk.request_ids)
        whole.labels.extend(chunk.labels)
        whole.positions.extend(chunk.positions)
        whole.refused.extend(chunk.refused)
    return whole


def _attach_chunks(log: PredictionLog, chunks: Iterable[LabelRows], *,
                   atomic: bool) -> tuple[LabelAttachReport, list[RowRefusal]]:
    """Every chunk's labels attached (one transaction each): one report of the file's rows (the rows
    refused when attaching numbered in the file) and the rows refused while reading."""
    from flows.ingest.payloads import relabelled
    from monitoring import LabelAttachReport

    total = LabelAttachReport(0, 0, 0, (), ())
    read_refused: list[RowRefusal] = []
    for chunk in chunks:
        if atomic and chunk.refused:
            first = chunk.refused[0]
            raise ValueError(f"row {first.index}: {first.reason}; nothing was written")
        report = log.attach_labels(chunk.request_ids, chunk.labels, strict=atomic)
        read_refused.extend(chunk.refused)
        total = LabelAttachReport(
            total.n_requested + report.n_requested, total.attached + report.attached,
            total.unchanged + report.unchanged, total.conflicts + report.conflicts,
            total.unknown_request_ids + report.unknown_request_ids,
            total.refused + tuple(relabelled(report.refused, chunk.positions)),
        )
    return total, read_refused


def _label_lines(file: str, answer: Any) -> list[str]:
    lines = [f"{file}: {answer.received:,} labels: {answer.attached:,} attached, {answer.unchanged:,} unchanged, "
             f"{len(answer.conflicts):,} conflicting, {len(answer.unknown):,} unknown, {len(answer.refused):,} refused"]
    if answer.conflicts:
        lines.append(f"conflicting ({len(answer.conflicts):,}):")
        lines.extend(f"  {c.request_id!r}: label {c.new_label} conflicts with {c.existing_label} (labels are "
                     "write-once: not changed)" for c in answer.conflicts[:_SHOWN])
    if answer.unknown:
        shown = ", ".join(repr(rid) for rid in answer.unknown[:_SHOWN])
        lines.append(f"unknown request ids ({len(answer.unknown):,}; not logged, or not yet): {shown}"
                     + (" ..." if len(answer.unknown) > _SHOWN else ""))
    if answer.refused:
        lines.extend(_listing(answer.refused))
    return lines
