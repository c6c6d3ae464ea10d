"""Retention end to end (``thermostat prune`` and the ``prune`` flow), on a SQLite and a PostgreSQL
prediction log and a real MLflow store: the log's rows and the monitor's check runs older than
the retention are removed — the labelled rows archived to the export first — and nothing inside
it is touched: recent rows, recent check runs, other runs of the monitoring experiment and the
registration runs stay as they were."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from flows.cli.main import main
from flows.pipelines.retention import prune
from flows.records.runs import CHECK_KIND, KIND_TAG
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from monitoring import PredictionLog, PredictionLogExport, log_predictions
from tests.integration.conftest import mlflow_client
from tests.monitoring.conftest import log_url, postgres_server, postgres_url, prediction_log  # noqa: F401
from tests.monitoring.test_retention import _rows

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=40)  # beyond a 30-day retention whatever the hour
RECENT = NOW - timedelta(days=29, hours=23)  # inside it whatever the hour


def _runs(registry: MlflowRegistry, settings: ThermostatSettings) -> dict[str, str]:
    """Runs of interest: old and recent check runs, an old run of the monitoring experiment that is
    not a check, an old registration run."""
    experiment = settings.monitoring_experiment_name
    made = {}
    for name, start, tags, where in (
            ("old check", OLD, {KIND_TAG: CHECK_KIND}, experiment), ("older check", OLD - timedelta(days=9),
                                                                     {KIND_TAG: CHECK_KIND}, experiment),
            ("recent check", RECENT, {KIND_TAG: CHECK_KIND}, experiment), ("old other", OLD, {}, experiment),
            ("old registration", OLD, {"idempotency_key": "k"}, None)):
        run_id = registry.start_run(name, tags, experiment_name=where, start_time=start)
        registry.end_run(run_id)
        made[name] = run_id
    return made


def test_prune_removes_old_rows_and_check_runs_and_nothing_inside_the_retention(
    prediction_log: PredictionLog, log_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
    prefect_api: None,
) -> None:
    rng = np.random.default_rng(0)
    for start, tag in ((OLD, "old"), (RECENT, "new")):
        n = 30
        log_predictions(prediction_log, "m", "1", 1.3, (2.0 * rng.normal(size=(n, 4))).astype(np.float32),
                        [f"{tag}-{i}" for i in range(n)], "web", [start + timedelta(minutes=i) for i in range(n)],
                        labels=None)
        prediction_log.attach_labels([f"{tag}-{i}" for i in range(0, n, 2)], rng.integers(0, 4, n // 2))
    monkeypatch.setenv("THERMOSTAT_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("THERMOSTAT_PREDICTION_LOG_URL", log_url)
    settings = ThermostatSettings()
    registry = MlflowRegistry.from_settings(settings)
    runs = _runs(registry, settings)
    client = mlflow_client(registry)
    before = _rows(prediction_log)
    recent = {rid: row for rid, row in before.items() if rid.startswith("new-")}
    archive = tmp_path / "archive"

    assert main(["prune", "--retention", "P30D", "--archive", str(archive), "--dry-run", "--json"]) == 0
    assert _rows(prediction_log) == before and not archive.exists()
    assert {client.get_run(run_id).info.lifecycle_stage for run_id in runs.values()} == {"active"}

    assert main(["prune", "--retention", "P30D", "--archive", str(archive), "--json"]) == 0
    assert _rows(prediction_log) == recent  # the old rows are gone; the recent ones untouched
    archived = {rid for chunk in PredictionLogExport(archive).iter_labelled("m", "1", OLD - timedelta(days=1), NOW)
                for rid in chunk.request_ids}
    assert archived == {f"old-{i}" for i in range(0, 30, 2)}  # the old labelled rows, archived first
    stages = {name: client.get_run(run_id).info.lifecycle_stage for name, run_id in runs.items()}
    assert stages == {"old check": "deleted", "older check": "deleted", "recent check": "active",
                      "old other": "active", "old registration": "active"}

    # The flow, with the retention and the archive from the settings: nothing more to remove.
    report = prune(settings=ThermostatSettings(retention=timedelta(days=30), export_path=archive))
    assert report is not None and report.log.rows_deleted == 0 and report.check_runs_deleted == 0
    assert _rows(prediction_log) == recent


def test_prune_refuses_without_a_retention_or_an_archive_and_removes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("THERMOSTAT_STATE_DIR", str(tmp_path))
    assert main(["prune"]) == 2
    assert "no retention: give --retention" in capsys.readouterr().err
    assert main(["prune", "--retention", "PT12H"]) == 2
    assert "--retention: retention 12:00:00 is not longer than monitor_window" in capsys.readouterr().err
    assert main(["prune", "--retention", "P30D"]) == 2
    assert "give --archive DIR or set THERMOSTAT_EXPORT_PATH" in capsys.readouterr().err
    assert main(["prune", "--retention", "ninety days"]) == 2
    assert "is not an ISO 8601 duration" in capsys.readouterr().err
    assert main(["prune", "--retention", "P999999D", "--archive", str(tmp_path / "archive")]) == 2
    err = capsys.readouterr().err
    assert "--retention: retention 999999 days, 0:00:00 is longer than the longest, 36500 days (P36500D)" in err
    assert "Traceback" not in err and not (tmp_path / "archive").exists()
    with pytest.raises(ValueError, match="THERMOSTAT_EXPORT_PATH is not"):
        prune(settings=ThermostatSettings(state_dir=tmp_path, retention=timedelta(days=30)))
