"""Retention: prediction-log rows and monitor check runs older than ``THERMOSTAT_RETENTION`` removed.

A deployment checking 200 versions every hour writes 1.75 million check runs a year to MLflow
and, at 10,000 labelled rows a version a day, three quarters of a billion rows to the log
(docs/retention.md, "Sizing"); neither is read once its window and its refit are past. The
cutoff is the start of the UTC day that holds now minus the retention
(:func:`monitoring.retention_cutoff`), and:

* the **prediction log**: every row served before it is deleted, each version's labelled rows
  archived first to the export (``THERMOSTAT_EXPORT_PATH`` or ``--archive``: the Parquet days
  ``thermostat export`` writes, which the monitor, the refit and ``thermostat evaluate`` read);
  a labelled row leaves only once its day's file holds it, so one labelled while the prune runs
  stays for the next — :func:`monitoring.prune_prediction_log`;
* **MLflow**: the check runs of the monitoring experiment (tag ``thermostat.kind`` = ``check``)
  that started (at their window's end) before it are deleted — marked deleted, hidden from the
  UI and searches; ``mlflow gc`` removes them and their artifacts for good. Registration and
  refit runs, registered versions and their tags are never touched.

``thermostat prune`` (:mod:`flows.cli.prune_command`) and the ``prune`` flow (the ``prune``
deployment, daily) run :func:`prune_stored_data`. The retention is off by default: deleting is
irreversible and only the operator knows what must be kept and where the archive lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from prefect import flow
from pydantic import TypeAdapter

from calibration import JsonResult
from flows.orchestration.outcomes import finish
from flows.pipelines.tasks import read_prediction_log
from flows.records.outcomes import FlowSummary
from flows.records.runs import CHECK_KIND, KIND_TAG
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from monitoring import LogPruned, prune_prediction_log, retention_cutoff

__all__ = ["PruneReport", "prune", "prune_stored_data"]

_ISO_DURATION: Final = TypeAdapter(timedelta)


@dataclass(frozen=True, slots=True)
class PruneReport(JsonResult):
    """What a prune removed (in a dry run: would remove): the log's rows per version (``log``) and
    the check runs (``check_runs_deleted``) older than ``cutoff``; ``retention`` in ISO 8601."""

    retention: str
    cutoff: datetime
    dry_run: bool
    log: LogPruned
    check_runs_deleted: int

    def sentence(self) -> str:
        what = "would remove" if self.dry_run else "removed"
        archive = f"labelled rows archived to {self.log.archive}" if self.log.archive else "not archived"
        kept = sum(version.rows_kept for version in self.log.versions)
        left = f"; {kept:,} row(s) labelled while it ran stay for the next prune" if kept else ""
        return (f"retention {self.retention}: {what} {self.log.rows_deleted:,} prediction-log row(s) of "
                f"{len(self.log.versions)} version(s) served before {self.cutoff.isoformat()} ({archive}) and "
                f"{self.check_runs_deleted:,} check run(s) started before it{left}")


def prune_stored_data(
    settings: ThermostatSettings, *, archive: Path | None, now: datetime, dry_run: bool = False
) -> PruneReport:
    """Remove the prediction-log rows and the monitor's check runs older than ``settings.retention``
    (module docstring; the settings refuse a retention not longer than the monitor's window); the
    log's labelled rows archived under ``archive`` first (None: not archived).

    Raises
    ------
    ValueError
        If the settings have no retention.
    FileNotFoundError
        If the prediction log's SQLite file does not exist.
    """
    if settings.retention is None:
        raise ValueError("no retention is set (THERMOSTAT_RETENTION, e.g. P90D): nothing to prune")
    cutoff = retention_cutoff(now, settings.retention)
    with read_prediction_log(settings) as log:
        pruned = prune_prediction_log(log, cutoff, archive=archive, dry_run=dry_run)
    registry = MlflowRegistry.from_settings(settings)
    old_checks = [run.info.run_id for run in registry.runs_started_before(settings.monitoring_experiment_name, cutoff)
                  if run.data.tags.get(KIND_TAG) == CHECK_KIND]
    if not dry_run:
        for run_id in old_checks:
            registry.delete_run(run_id)
    return PruneReport(retention=_ISO_DURATION.dump_python(settings.retention, mode="json"), cutoff=cutoff,
                       dry_run=dry_run, log=pruned, check_runs_deleted=len(old_checks))


@flow(name="prune")
def prune(settings: ThermostatSettings | None = None) -> PruneReport | None:
    """Apply ``THERMOSTAT_RETENTION`` (the ``prune`` deployment, daily): the log's labelled rows
    archived to ``THERMOSTAT_EXPORT_PATH``, then the old rows and check runs removed. Without a
    retention, nothing is removed (None).

    Raises
    ------
    ValueError
        When a retention is set but no export path: the flow does not delete labelled rows
        without their archive (``thermostat prune --no-archive`` does, when asked).
    """
    settings = settings if settings is not None else ThermostatSettings()
    if settings.retention is None:
        return finish(FlowSummary.of("prune", "off", "THERMOSTAT_RETENTION is not set: nothing is removed"), None)
    if settings.export_path is None:
        raise ValueError("THERMOSTAT_RETENTION is set but THERMOSTAT_EXPORT_PATH is not: the labelled rows pruned "
                         "from the log are archived there first; set it (or prune with `thermostat prune "
                         "--no-archive`)")
    report = prune_stored_data(settings, archive=settings.export_path, now=datetime.now(UTC))
    # The run's final state (its message, its last log lines) says what was removed.
    return finish(FlowSummary.of("prune", "pruned", report.sentence(), **report.to_dict()), report)
