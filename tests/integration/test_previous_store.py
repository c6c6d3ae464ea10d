"""Today's readers on a store written by the previous main (463a28a), before the records of issue 21.

``tests/data/previous_main_store/`` holds what that code's ``thermostat demo`` left in MLflow,
then three checks without labelled rows and its refused refit (``make_store.py`` there writes it
with that code). Its checks carry no drift policy and no streak of their own, its automations'
key for a refused refit was ``refit_failed``: the dashboard (``gather``) and the monitor's readers
(``registered_version``, :class:`flows.records.runs.CheckRecord`) must read every record of it,
the dashboard drawing those checks with its own settings and the streak the monitor kept on
each version.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flows.dashboard.data import Thresholds, gather
from flows.records.runs import CheckRecord, RefitRecord
from flows.records.versions import registered_version
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings

pytestmark = pytest.mark.integration

STORE = Path(__file__).resolve().parents[1] / "data" / "previous_main_store"
PLACEHOLDER = "@STATE_DIR@"


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> ThermostatSettings:
    """The previous main's store, put in a state folder of this test's."""
    state = tmp_path_factory.mktemp("previous-main") / "state"
    state.mkdir()
    connection = sqlite3.connect(state / "mlflow.db")
    try:
        connection.executescript((STORE / "mlflow.sql").read_text().replace(PLACEHOLDER, str(state)))
    finally:
        connection.close()
    for path in (STORE / "artifacts").rglob("*.json"):
        target = state / "artifacts" / path.relative_to(STORE / "artifacts")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text().replace(PLACEHOLDER, str(state)))
    return ThermostatSettings(state_dir=state)


def test_the_monitor_reads_every_version_and_check_the_previous_main_wrote(previous: ThermostatSettings) -> None:
    registry = MlflowRegistry.from_settings(previous)
    aliases = registry.aliases("digits")
    assert aliases == {"champion": "3", "challenger": "2"}
    versions = {v.version: registered_version("digits", v.version, v.tags, [a for a, n in aliases.items()
                                                                             if n == v.version])
                for v in registry.versions("digits")}
    assert sorted(versions) == ["1", "2", "3"]
    assert versions["3"].record.refit is not None and versions["3"].record.refit.parent_version == "1"
    assert versions["3"].registered_for is not None and versions["3"].registered_for.alias == "champion"
    assert versions["3"].registered_for.previous_version == "1"
    assert {n: v.monitor.insufficient_streak for n, v in versions.items()} == {"1": 0, "2": 3, "3": 3}
    # Registered before the reference priors were stored: no diagnosis of priors, never an error.
    assert all(v.reference_priors is None for v in versions.values())
    assert versions["2"].drift_reference.overall.ece_estimator == versions["2"].record.reference_ece_estimator
    runs = registry.runs(previous.monitoring_experiment_name)
    checks = [check for run in runs if (check := CheckRecord.from_run(run)) is not None]
    refits = [refit for run in runs if (refit := RefitRecord.from_run(run)) is not None]
    assert len(checks) + len(refits) == len(runs) and len(checks) >= 8
    assert all(c.verdict in ("ok", "drift", "insufficient_data") for c in checks)
    assert all(c.policy is None and c.insufficient_streak is None for c in checks)  # written before they were
    assert all(c.window_end is not None and c.temperature is not None for c in checks)
    assert {c.verdict for c in checks} == {"ok", "drift", "insufficient_data"}
    assert [(r.parent_version, r.status, r.refused) for r in refits] == [("2", "failed", True)]


def test_the_dashboard_reads_the_previous_main_s_store(previous: ThermostatSettings) -> None:
    state = gather(previous)
    unreadable = [note for note in state.notes if "cannot be read" in note]
    assert unreadable == []
    (model,) = state.models
    assert model.problem is None and [v.version for v in model.versions] == ["1", "2", "3"]
    assert all(v.problem is None and v.temperature is not None for v in model.versions)
    assert [(m.alias, m.version, m.previous_version, m.cause) for m in model.alias_moves] == [
        ("champion", "1", None, "post-finetune"), ("challenger", "2", None, "post-finetune"),
        ("champion", "3", "1", "refit")]
    # Checks written before policies were recorded: drawn with this dashboard's settings, and saying so.
    settings = Thresholds.of(previous.drift)
    assert model.checks and all(c.thresholds == settings and not c.thresholds_recorded for c in model.checks)
    assert all(c.insufficient_streak is None for c in model.checks)
    views = {view.alias: view for view in model.alias_views}
    assert views["champion"].latest_reliability is not None and views["challenger"].latest_reliability is not None
    # The streak is the one the monitor kept on each version; the refused refit of v2 is open.
    assert {v.version: v.insufficient_streak for v in model.versions} == {"1": 0, "2": 3, "3": 3}
    assert sorted((a.kind, a.version) for a in state.alerts) == [
        ("insufficient_data", "2"), ("insufficient_data", "3"), ("refit_refused", "2")]
    streak = next(a for a in state.alerts if a.kind == "insufficient_data" and a.version == "3")
    assert streak.numbers["streak"] == 3 and streak.numbers["min_window"] == settings.min_window
