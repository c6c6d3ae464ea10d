"""The fleet's scheduled check (``monitor_fleet``) on the real stack (MLflow SQLite store, SQLite
prediction log, Prefect's API): every serving version of every model Thermostat registered is
checked once in one run, as ``monitor`` checks it; another team's model is left alone; the work
that does not change between versions (the registry's aliases, the runs left open, each
version's K) is read once per run, not once per version."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from flows.dashboard.data import gather
from flows.pipelines import monitor as monitor_module
from flows.pipelines.monitor import monitor_fleet
from flows.records.events import UNREADABLE_VERSION_EVENT
from flows.pipelines.tasks import open_prediction_log
from flows.records.versions import SEQUENTIAL_STATE_TAG
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from monitoring import log_predictions
from tests.integration.conftest import Registered, mlflow_client
from tests.support.checks import spy_check_version

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(registered: Registered, tmp_path: Path) -> ThermostatSettings:
    shutil.copyfile(registered.db, tmp_path / "mlflow.db")
    return ThermostatSettings(state_dir=tmp_path, bootstrap_resamples=300, label_settle_time=timedelta(0),
                              drift_resamples=200)


def _fleet(settings: ThermostatSettings, registered: Registered) -> MlflowRegistry:
    """digits@champion (v1, registered by post_finetune) plus tickets@champion (v1) and
    tickets@challenger (v2), registered with the same record; and another team's model."""
    registry = MlflowRegistry.from_settings(settings)
    tags = dict(registry.get_version("digits", "1").tags)
    run_id = registry.start_run("registration", {})
    registry.end_run(run_id)
    for number, alias in (("1", "champion"), ("2", "challenger")):
        registry.create_version("tickets", source=f"runs:/{run_id}/checkpoint", run_id=run_id, tags=tags)
        registry.set_alias("tickets", alias, number)
    client = mlflow_client(registry)  # registered by another tool: none of Thermostat's tags
    client.create_registered_model("someone-elses")
    client.create_model_version("someone-elses", f"runs:/{run_id}/checkpoint", run_id=run_id, tags={"team": "x"})
    client.set_registered_model_alias("someone-elses", "champion", "1")
    start = datetime.now(UTC) - timedelta(hours=2)
    with open_prediction_log(settings) as log:
        for name in ("digits", "tickets"):
            log_predictions(log, name, "1", registered.temperature, registered.clean_logits[:600],
                            [f"{name}-{i}" for i in range(600)], time=[start + timedelta(seconds=i) for i in range(600)],
                            labels=np.asarray(registered.clean_labels[:600]))
    return registry


def test_the_fleet_is_checked_in_one_run_with_per_run_reads_once(
    registered: Registered, settings: ThermostatSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = _fleet(settings, registered)
    searches: list[str] = []
    running_runs = MlflowRegistry.running_runs

    def counted(self: MlflowRegistry, experiment_name: str) -> Any:
        searches.append(experiment_name)
        return running_runs(self, experiment_name)

    monkeypatch.setattr(MlflowRegistry, "running_runs", counted)
    log_reads: list[str] = []

    def on_statement(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "prediction_log" in statement:
            log_reads.append(statement)

    outcomes = spy_check_version(monkeypatch)
    # The look for servers still on a version their alias left runs for a record made more than
    # STALE_AFTER ago: whatever the shared registration's age, it runs here, on the versions the
    # run read once.
    monkeypatch.setattr(monitor_module, "STALE_AFTER", timedelta(0))
    event.listen(Engine, "before_cursor_execute", on_statement)
    try:
        checks = monitor_fleet(settings=settings)
    finally:
        event.remove(Engine, "before_cursor_execute", on_statement)

    # Each version's report is the one check's (monitoring.check_version), as the CLI and the study run it.
    assert len(outcomes) == len(checks) and all(o.report is c.report for o, c in zip(outcomes, checks))

    assert [(c.model_name, c.version, c.aliases, c.verdict) for c in checks] == [
        ("digits", "1", ("champion",), "undetermined"), ("tickets", "1", ("champion",), "undetermined"),
        ("tickets", "2", ("challenger",), "insufficient_data")]
    for check in checks[:2]:
        assert check.report is not None and check.report.n == 600 and check.run_id is not None
        assert check.report.sequential is not None and check.report.sequential.state.rows == 600
        assert check.report.early_warning is not None and check.report.early_warning.n == 600
        assert SEQUENTIAL_STATE_TAG in registry.get_version(check.model_name, check.version).tags
    assert checks[2].report is None and checks[2].run_id is None  # never logged: no run
    assert "team" in registry.get_version("someone-elses", "1").tags  # left alone: not Thermostat's
    assert searches == [settings.monitoring_experiment_name]  # one look for runs left open, not one per version
    # The log: every version's K in one read (one more for the version that never logged, which
    # may log any time); per version that logged, one read of its window and one of the rows
    # labelled in its increment but served after the window's end (while the check ran). The
    # first check of a version has no increment before the window: no late-label read.
    selects = [s for s in log_reads if s.startswith("SELECT")]
    k_reads = [s for s in selects if "FROM prediction_log_versions" in s]
    assert len(k_reads) == 2 and "WHERE" not in k_reads[0], k_reads
    assert len([s for s in selects if "FROM prediction_log \n" in s]) == 2 * 2


def test_the_fleet_refuses_an_unknown_model_and_reports_unreadable_versions(
    registered: Registered, settings: ThermostatSettings
) -> None:
    registry = _fleet(settings, registered)
    with pytest.raises(ValueError, match=r"model\(s\) \['nope'\] are not registered"):
        monitor_fleet(["nope"], settings=settings)
    run_id = registry.start_run("registration", {})
    registry.create_version("broken", source=f"runs:/{run_id}/checkpoint", run_id=run_id,
                            tags={"temperature": "not a number"})
    registry.set_alias("broken", "champion", "1")
    with pytest.raises(RuntimeError, match=r"1 serving version\(s\) could not be read.*broken v1"):
        monitor_fleet(["broken", "digits"], settings=settings)
    # digits was still checked before the run failed.
    state = registry.get_version("digits", "1").tags[SEQUENTIAL_STATE_TAG]
    assert '"checks":1' in state.replace(" ", "")


def _events_of(resource_id: str, since: datetime) -> list[dict[str, Any]]:
    """The events Prefect's API holds on ``resource_id`` since ``since`` (waiting for them a little)."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventOccurredFilter, EventResourceFilter

    deadline = time.monotonic() + 30
    while True:
        with get_client(sync_client=True) as client:
            page = client.read_events(limit=50, filter=EventFilter(
                occurred=EventOccurredFilter(since=since, until=datetime.now(UTC) + timedelta(minutes=5)),
                resource=EventResourceFilter(id=[resource_id])))
        if page.events or time.monotonic() > deadline:
            return [{"event": e.event, "payload": e.payload} for e in page.events]
        time.sleep(0.5)


def test_a_version_whose_record_cannot_be_read_is_named_alerted_and_shown(
    registered: Registered, settings: ThermostatSettings
) -> None:
    """tickets v2 (@challenger) with its temperature tag deleted: the fleet checks the others, then
    fails naming the version and why; the version's own event (the "version not checked" alert)
    is emitted, and the dashboard lists the same situation."""
    registry = _fleet(settings, registered)
    mlflow_client(registry).delete_model_version_tag("tickets", "2", "temperature")
    since = datetime.now(UTC) - timedelta(seconds=5)

    state = monitor_fleet(settings=settings, return_state=True)
    assert state.is_failed()
    assert "checks" in registry.get_version("tickets", "1").tags[SEQUENTIAL_STATE_TAG]  # the others were checked

    [event] = [e for e in _events_of("mlmodel.tickets.v2", since) if e["event"] == UNREADABLE_VERSION_EVENT]
    assert event["payload"]["aliases"] == ["challenger"] and event["payload"]["flow"] == "monitor-fleet"
    assert "'temperature'" in event["payload"]["problem"]

    alerts = gather(settings, registry=registry).alerts
    [alert] = [a for a in alerts if a.kind == "unreadable_version"]  # not someone-elses v1: not Thermostat's
    assert (alert.model_name, alert.version, alert.alias) == ("tickets", "2", "challenger")
    assert "'temperature'" in alert.title

    message = state.message or ""  # what the "monitor failed" alert quotes
    assert "1 serving version(s) could not be read" in message and "tickets v2 (@challenger)" in message, message
    assert "'temperature'" in message, message  # why
