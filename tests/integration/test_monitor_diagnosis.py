"""The shift diagnosis on every check, on the real stack (MLflow SQLite store, SQLite prediction
log, Prefect's API): label-shifted traffic of the registered digits version is a label shift (its
event, no drift event, no refit); temperature-shifted traffic is a calibration drift whose drift
event carries the kind, as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from flows.pipelines.monitor import monitor
from flows.records.events import DRIFT_EVENT, LABEL_SHIFT_EVENT
from flows.records.runs import SHIFT_KIND_TAG
from flows.records.versions import LAST_LABEL_SHIFT_TAG, registered_version
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from tests.integration.conftest import Registered, mlflow_client
from tests.integration.test_monitor_refit import _events
from tests.integration.test_monitor_stream import _serve, _tags, settings  # noqa: F401 - the fixture
from tests.support.checks import spy_check_version

pytestmark = pytest.mark.integration


def _label_shifted(registered: Registered, n: int, share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows of the clean traffic, drawn so that class 0 is ``share`` of them (p(x | y) kept:
    rows of a class drawn uniformly among that class's rows)."""
    labels = np.asarray(registered.clean_labels)
    weights = np.where(labels == 0, share / np.sum(labels == 0), (1.0 - share) / np.sum(labels != 0))
    rows = np.random.default_rng(seed).choice(labels.shape[0], size=n, p=weights / weights.sum())
    return np.asarray(registered.clean_logits)[rows], labels[rows]


def test_label_shifted_traffic_is_diagnosed_a_label_shift_and_starts_no_refit(
    registered: Registered, settings: ThermostatSettings, monkeypatch: pytest.MonkeyPatch  # noqa: F811 - the fixture
) -> None:
    version = registered_version("digits", "1", _tags(settings), ["champion"])
    assert version.reference_priors is not None, "post-finetune registers the reference priors"
    assert version.reference_priors.temperature == version.temperature
    since = datetime.now(UTC) - timedelta(seconds=5)
    logits, labels = _label_shifted(registered, 2000, 0.4, seed=1)
    _serve(settings, logits, labels, tag="mix", temperature=registered.temperature)
    outcomes = spy_check_version(monkeypatch)
    [check] = monitor("digits", settings=settings)
    report = check.report
    [outcome] = outcomes  # the monitor flow's diagnosis is the one check's (monitoring.check_version)
    assert report is not None and report is outcome.report and report.diagnosis is not None
    assert report.prior_test is not None and report.diagnosis.kind == "label_shift", report.diagnosis.sentence()
    assert report.diagnosis.confirmed and report.prior_test.fired
    assert report.diagnosis.priors[0] == pytest.approx(0.4, abs=0.06)
    assert not report.refit_recommended and check.event_id is None, "no drift event: no temperature refit"
    sent = dict(check.other_events)
    assert LABEL_SHIFT_EVENT in sent and DRIFT_EVENT not in sent
    [event] = _events(LABEL_SHIFT_EVENT, "mlmodel.digits.v1", since, at_least=1,
                      where=lambda e: e.payload["mlflow_run_id"] == check.run_id)
    assert (event.payload["shift_kind"], event.payload["shift_fix"], event.payload["confirmed"]) == (
        "label_shift", "prior_correction", True)
    assert event.payload["priors"][0] == pytest.approx(report.diagnosis.priors[0])
    assert event.payload["served_n"] == 2000 and event.payload["p_value"] < 0.01
    assert _events(DRIFT_EVENT, "mlmodel.digits.v1", since, at_least=0, timeout=0.0,
                   where=lambda e: e.payload["mlflow_run_id"] == check.run_id) == []
    assert LAST_LABEL_SHIFT_TAG in _tags(settings)
    client = mlflow_client(MlflowRegistry.from_settings(settings))
    assert client.get_run(str(check.run_id)).data.tags[SHIFT_KIND_TAG] == "label_shift"


def test_temperature_shifted_traffic_is_a_calibration_drift_and_goes_to_the_refit(
    registered: Registered, settings: ThermostatSettings  # noqa: F811 - the fixture
) -> None:
    since = datetime.now(UTC) - timedelta(seconds=5)
    # Every logit doubled: the window's optimal T is twice the registered one.
    _serve(settings, 2.0 * np.asarray(registered.clean_logits), registered.clean_labels, tag="hot",
           temperature=registered.temperature)
    [check] = monitor("digits", settings=settings)
    report = check.report
    assert report is not None and report.diagnosis is not None
    assert report.diagnosis.kind == "calibration_drift", report.diagnosis.sentence()
    assert report.refit_recommended and check.event_id is not None
    [event] = _events(DRIFT_EVENT, "mlmodel.digits.v1", since, at_least=1,
                      where=lambda e: e.payload["mlflow_run_id"] == check.run_id)
    assert event.payload["shift_kind"] == "calibration_drift"
    assert event.payload["shift_fix"] in ("temperature_refit", "prior_correction_and_refit")
    assert LABEL_SHIFT_EVENT not in dict(check.other_events)
