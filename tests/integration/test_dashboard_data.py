"""The dashboard's data gathering on a small synthetic MLflow store (no demo, no server).

The store is written the way the flows write it (version tags from :class:`VersionRecord`, check
runs with the monitor's tags and metrics, a :class:`RefitRecord` run) and read back by
:func:`flows.dashboard.data.gather`, which must not write anything.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flows.dashboard.data import gather
from flows.records.evidence import RunEvidence
from flows.registry.adapter import MlflowRegistry
from flows.records.runs import PREFECT_FLOW_RUN_TAG, RefitRecord
from flows.settings import ThermostatSettings
from flows.records.versions import VersionRecord, registered_version
from monitoring import PredictionLog, PredictionRecord
from tests.integration.conftest import mlflow_client

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _check(registry: MlflowRegistry, settings: ThermostatSettings, version: str, alias: str, minutes: int,
           verdict: str, ece: float) -> str:
    end = T0 + timedelta(minutes=minutes)
    run_id = registry.start_run(f"check v{version}", {
        "thermostat.model_name": "m", "thermostat.model_version": version, "thermostat.aliases": alias,
        "thermostat.verdict": verdict, "thermostat.window_start": (end - timedelta(minutes=5)).isoformat(),
        "thermostat.window_end": end.isoformat(), "thermostat.refit_recommended": str(verdict == "drift").lower(),
        "temperature": "2.5", PREFECT_FLOW_RUN_TAG: f"flow-{minutes}",
    }, experiment_name=settings.monitoring_experiment_name, start_time=end)
    bins = [{"lower": m / 4, "upper": (m + 1) / 4, "count": 10 * m, "mean_confidence": m / 4 + 0.1,
             "accuracy": m / 4, "gap": -0.1, "sparse": m == 1} for m in range(4)]
    registry.log_evidence(run_id, RunEvidence(
        metrics={"ece": ece, "nll": 0.4, "p_value": 0.002, "n": 900.0, "drift": float(verdict == "drift"),
                 "baseline_ece": 0.04, "ece_excess": ece - 0.04, "ece.group.north": ece * 1.1, "temperature": 2.5},
        metrics_at=end,
        documents={"check/report.json": {"n": 900, "ece": ece, "n_bins": 4, "scheme": "equal-width",
                                         "reliability": bins}}))
    registry.end_run(run_id)
    return run_id


def test_gather_reads_versions_checks_refusals_and_traffic(tmp_path: Path) -> None:
    settings = ThermostatSettings(state_dir=tmp_path)
    registry = MlflowRegistry.from_settings(settings)
    record = VersionRecord.example()
    for number, alias in (("1", "champion"), ("2", "challenger")):
        run_id = registry.start_run("registration", {})
        registry.end_run(run_id)
        tags = record.to_tags() | {"thermostat.alias": alias, "thermostat.alias_previous_version": "none"}
        if number == "2":
            tags |= {"temperature_low": "2.25", "temperature_high": "2.75"}
        registry.create_version("m", source=str(tmp_path), run_id=run_id, tags=tags)
        registry.set_alias("m", alias, number)
    runs = [_check(registry, settings, "1", "champion", 10, "ok", 0.05),
            _check(registry, settings, "2", "challenger", 10, "drift", 0.2),
            _check(registry, settings, "1", "champion", 20, "insufficient_data", 0.06)]
    refusal = RefitRecord(model_name="m", parent_version="2", alias="challenger", status="failed", step="verify",
                          reason="the refit does not verify", escalation="needs retraining or a data fix",
                          new_version=None, window_start=T0.isoformat(), window_end=T0.isoformat(),
                          prefect_flow_run_id="flow-refit", metrics={"ece_after": 0.15})
    refit_run = registry.start_run("refit", refusal.to_tags(), experiment_name=settings.monitoring_experiment_name)
    registry.log_evidence(refit_run, RunEvidence(metrics=refusal.metrics))
    registry.end_run(refit_run)
    with PredictionLog(settings.resolved_prediction_log_url()) as log:
        log.create()
        now = datetime.now(UTC)
        log.append([PredictionRecord(time=now - timedelta(seconds=i), model_name="m", model_version="2",
                                     request_id=f"r{i}", logits=[0.0, 1.0], predicted_class=1, confidence=0.7,
                                     temperature=2.5) for i in range(3)])
    experiments = {e.name for e in mlflow_client(registry).search_experiments()}

    state = gather(settings)

    assert {e.name for e in mlflow_client(registry).search_experiments()} == experiments  # read-only
    (model,) = state.models
    assert model.aliases == {"champion": "1", "challenger": "2"}
    assert {c.run_id for c in model.checks[:2]} == {runs[0], runs[1]} and model.checks[2].run_id == runs[2]
    drift = next(c for c in model.checks if c.version == "2")
    assert (drift.verdict, drift.ece, drift.groups, drift.prefect_flow_run_id) == ("drift", 0.2, {"north": 0.2 * 1.1},
                                                                                   "flow-10")
    v1, v2 = model.versions
    registered = registered_version("m", "1", record.to_tags())
    assert (v1.temperature, v1.baseline_ece, v1.aliases) == (record.temperature, registered.baseline_ece,
                                                             ("champion",))
    assert (v1.temperature_low, v1.temperature_high) == (registered.temperature_interval or (None, None))
    assert (v2.temperature_low, v2.temperature_high) == (2.25, 2.75)
    assert v2.served is not None and (v2.served.rows, v2.served.labelled_rows) == (3, 0)
    assert v2.served.served_temperature == 2.5 and v1.served is not None and v1.served.rows == 0
    (refit,) = model.refits
    assert (refit.status, refit.parent_version, refit.metrics, refit.run_id) == ("failed", "2", {"ece_after": 0.15},
                                                                                 refit_run)
    views = {v.alias: v for v in model.alias_views}
    assert views["champion"].versions == ("1",) and views["champion"].latest_check_run_id == runs[2]
    reliability = views["challenger"].latest_reliability
    assert reliability is not None and [b["count"] for b in reliability.bins] == [0, 10, 20, 30]
    assert {(a.kind, a.version) for a in state.alerts} == {("drift", "2"), ("refit_refused", "2")}
    assert (runs[1], "plots/reliability.png") in state.artifacts()
    assert json.loads(json.dumps(state.to_dict()))["models"][0]["name"] == "m"


def test_gather_on_a_store_without_checks_or_log(tmp_path: Path) -> None:
    settings = ThermostatSettings(state_dir=tmp_path)
    MlflowRegistry.from_settings(settings).experiment_id()  # an empty store with its default experiment
    state = gather(settings)
    assert state.models == () and state.alerts == ()
    assert any("no prediction log" in note for note in state.notes)
    assert not (tmp_path / "predictions.db").exists()
