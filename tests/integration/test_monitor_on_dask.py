"""The monitor reading its window from the partitioned export, on a real Dask cluster through
prefect-dask's DaskTaskRunner (one Prefect task per partition), against a real Prefect API and
MLflow store: the same verdicts and numbers as reading the SQL prediction log locally."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from flows.pipelines.monitor import monitor
from flows.pipelines.refit import refit
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from flows.pipelines.tasks import open_prediction_log
from monitoring import export_prediction_log, log_predictions
from tests.integration.conftest import Registered

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _task_runs(flow_name: str) -> list[str]:
    """Names of the task runs of the latest run of ``flow_name``."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName, FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        [run] = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
                                      sort=FlowRunSort.START_TIME_DESC, limit=1)
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))
    return sorted(task.name for task in tasks)


def test_monitor_on_dask_reads_the_export_and_matches_the_log(registered: Registered, tmp_path: Path) -> None:
    shutil.copyfile(registered.db, tmp_path / "mlflow.db")
    local = ThermostatSettings(state_dir=tmp_path, bootstrap_resamples=300)
    # Two days of traffic: clean on the first, noisy on the second (1,200 rows each).
    first = datetime.now(UTC).replace(hour=6, minute=0, second=0, microsecond=0) - timedelta(days=2)
    days = ((first, registered.clean_logits, registered.clean_labels, "a"),
            (first + timedelta(days=1), registered.noisy_logits, registered.noisy_labels, "b"))
    with open_prediction_log(local) as log:
        for start, logits, labels, tag in days:
            times = [start + timedelta(seconds=30 * i) for i in range(1200)]
            log_predictions(log, "digits", "1", registered.temperature, logits[:1200],
                            [f"{tag}-{i}" for i in range(1200)], groups=np.where(np.arange(1200) % 2, "web", "app"),
                            time=times, labels=np.asarray(labels[:1200]))
        exported = export_prediction_log(log, "digits", "1", tmp_path / "export", row_group_size=250)
    assert len(exported.days_written) == 2 and exported.rows_written == 2400

    on_dask = local.model_copy(update={"window_source": "export", "export_path": tmp_path / "export",
                                       "engine": "dask", "dask_workers": 2})
    for start, *_ in days:
        end = start + timedelta(hours=12)
        [reference] = monitor("digits", window_start=start, window_end=end, settings=local)
        [check] = monitor("digits", window_start=start, window_end=end, settings=on_dask)
        assert check.verdict == reference.verdict
        assert check.report is not None and reference.report is not None
        assert check.report.n == reference.report.n == 1200
        assert check.report.window.ece == pytest.approx(reference.report.window.ece, rel=1e-12)
        assert check.report.window.nll == pytest.approx(reference.report.window.nll, rel=1e-12)
        assert [(g.group, g.n) for g in check.report.groups] == [(g.group, g.n) for g in reference.report.groups]
        # Five row groups of 250 rows each day: one Prefect task per partition, on the cluster.
        names = _task_runs("summarise-export")
        assert len(names) == 5 and all(name.startswith("summarise-partition") for name in names), names
    # The local check of the noisy day emitted the drift event; the Dask check is in its cool-down.
    assert reference.verdict == check.verdict == "drift" and reference.event_id is not None
    assert check.report.in_cooldown and check.event_id is None


def test_refit_reads_its_traffic_from_the_export(registered: Registered, tmp_path: Path) -> None:
    shutil.copyfile(registered.db, tmp_path / "mlflow.db")
    settings = ThermostatSettings(state_dir=tmp_path, bootstrap_resamples=300)
    start = datetime.now(UTC) - timedelta(hours=2)
    with open_prediction_log(settings) as log:
        times = [start + timedelta(seconds=2 * i) for i in range(3000)]
        log_predictions(log, "digits", "1", registered.temperature, registered.noisy_logits[:3000],
                        [f"n-{i}" for i in range(3000)], time=times, labels=np.asarray(registered.noisy_labels[:3000]))
        export_prediction_log(log, "digits", "1", tmp_path / "export")
    (tmp_path / "predictions.db").unlink()  # the refit must not need the SQL log
    from_export = settings.model_copy(update={"window_source": "export", "export_path": tmp_path / "export"})
    outcome = refit("digits", alias="champion", settings=from_export)
    assert outcome.new_version == "2", outcome
    holder = MlflowRegistry.from_settings(settings).alias_holder("digits", "champion")
    assert holder is not None and str(holder.version) == "2"
    assert float(holder.tags["temperature"]) > registered.temperature + 0.5
