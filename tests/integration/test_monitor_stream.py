"""The monitor across checks, on the real stack (MLflow SQLite store, SQLite prediction log,
Prefect's API): the sequential rule's state kept on the version, each labelled row counted
once, an alarm whose change point the drift event hands to the refit; the early warning on
unlabelled rows, its confidence-shift event and cool-down; the insufficient-data streak's event."""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flows.records.events import CONFIDENCE_SHIFT_EVENT, DRIFT_EVENT, INSUFFICIENT_DATA_EVENT
from flows.pipelines.monitor import artifact_key, monitor
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from flows.pipelines.tasks import open_prediction_log
from flows.records.versions import (
    INSUFFICIENT_STREAK_TAG,
    LAST_CONFIDENCE_SHIFT_TAG,
    SEQUENTIAL_STATE_TAG,
    registered_version,
)
from monitoring import ConfidenceProfile, SequentialState, log_predictions
from tests.integration.conftest import Registered
from tests.integration.test_monitor_refit import _events, _markdown_artifacts

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(registered: Registered, tmp_path: Path) -> ThermostatSettings:
    shutil.copyfile(registered.db, tmp_path / "mlflow.db")
    # Labels are attached and committed before each check here: no settle time.
    return ThermostatSettings(state_dir=tmp_path, bootstrap_resamples=300, label_settle_time=timedelta(0))


def _serve(settings: ThermostatSettings, logits: Any, labels: Any | None, *, tag: str, temperature: float,
           ago: timedelta = timedelta(seconds=2)) -> None:
    """Log rows of digits v1 served ``ago`` (a millisecond apart), labelled now when ``labels`` is given."""
    start = datetime.now(UTC) - ago
    n = len(logits)
    with open_prediction_log(settings) as log:
        log_predictions(log, "digits", "1", temperature, logits, [f"{tag}-{i}" for i in range(n)],
                        time=[start + timedelta(milliseconds=i) for i in range(n)],
                        labels=None if labels is None else np.asarray(labels))
    time.sleep(0.05)  # the next check's clock is after these labels


def _tags(settings: ThermostatSettings) -> dict[str, str]:
    return dict(MlflowRegistry.from_settings(settings).get_version("digits", "1").tags)


def test_the_sequential_rule_counts_each_label_once_and_its_alarm_sets_the_refit_window(
    registered: Registered, settings: ThermostatSettings
) -> None:
    since = datetime.now(UTC) - timedelta(seconds=5)
    _serve(settings, registered.clean_logits[:300], registered.clean_labels[:300], tag="c",
           temperature=registered.temperature)
    [first] = monitor("digits", settings=settings)
    state = SequentialState.from_json(_tags(settings)[SEQUENTIAL_STATE_TAG])
    assert first.report is not None and first.report.sequential is not None and not first.report.sequential.alarm
    assert (state.rows, state.increments, state.checks) == (300, 1, 1)
    assert "sequential" not in first.report.tests_fired and first.verdict != "drift"

    [again] = monitor("digits", settings=settings)  # no new label: nothing folded in, nothing counted twice
    state = SequentialState.from_json(_tags(settings)[SEQUENTIAL_STATE_TAG])
    assert (state.rows, state.increments, state.checks) == (300, 1, 2)
    assert again.report is not None and again.report.sequential is not None and not again.report.sequential.folded
    cursor = state.last_end
    assert cursor is not None
    # A re-check of a given window (a backfill) reports, but leaves the stream's state alone.
    [backfill] = monitor("digits", window_start=cursor - timedelta(hours=1), window_end=cursor, settings=settings)
    assert backfill.report is not None and backfill.report.sequential is None and backfill.insufficient_streak == 2
    assert SequentialState.from_json(_tags(settings)[SEQUENTIAL_STATE_TAG]) == state

    _serve(settings, registered.noisy_logits[:1200], registered.noisy_labels[:1200], tag="n",
           temperature=registered.temperature)
    [drift] = monitor("digits", settings=settings)
    report = drift.report
    assert report is not None and report.sequential is not None and report.sequential.alarm
    assert "sequential" in report.tests_fired and drift.verdict == "drift" and drift.event_id is not None
    assert report.sequential.side == "over-confident" and report.sequential.shift_ratio > 1.2
    # The drift began with the first increment that moved the statistic up: the noisy rows',
    # which starts at the previous check's cursor (label clock); the refit reads from the first
    # of those rows' serving time (here, labels come at once: about the same moment).
    assert report.sequential.change_point == cursor
    assert report.change_point == report.refit_window_start == report.sequential.change_point_served_at
    assert abs(report.change_point - cursor) < timedelta(seconds=5)
    assert any(reason.startswith("sequential rule ALARM") for reason in report.reasons)
    state = SequentialState.from_json(_tags(settings)[SEQUENTIAL_STATE_TAG])
    assert (state.rows, state.alarms, state.upper, state.lower) == (1500, 1, 0.0, 0.0)  # restarted after the alarm

    [event] = _events(DRIFT_EVENT, "mlmodel.digits.v1", since, at_least=1,
                      where=lambda e: e.payload["mlflow_run_id"] == drift.run_id)
    assert event.payload["refit_window_start"] == report.change_point.isoformat() == event.payload["change_point"]
    assert "sequential" in event.payload["tests_fired"]
    registry = MlflowRegistry.from_settings(settings)
    from tests.integration.conftest import mlflow_client

    client = mlflow_client(registry)
    assert client.get_metric_history(drift.run_id, "sequential_alarm")[0].value == 1.0
    assert client.get_run(str(drift.run_id)).data.tags["thermostat.tests_fired"].count("sequential") == 1


def test_the_early_warning_shows_before_labels_and_a_shift_emits_one_event_per_cooldown(
    registered: Registered, settings: ThermostatSettings
) -> None:
    settings = settings.model_copy(update={"insufficient_data_streak": 2})
    since = datetime.now(UTC) - timedelta(seconds=5)
    version = registered_version("digits", "1", _tags(settings), ["champion"])
    reference = version.reference_profile
    assert isinstance(reference, ConfidenceProfile) and reference.n == version.record.reference_n
    assert reference.labelled == reference.n  # the rows T was fitted on, at the registered T

    # Noisy traffic served, only 100 of 1,500 rows labelled so far: too few to decide.
    noisy = registered.noisy_logits[1200:2700]
    _serve(settings, noisy, None, tag="u", temperature=registered.temperature)
    with open_prediction_log(settings) as log:
        log.attach_labels([f"u-{i}" for i in range(100)], registered.noisy_labels[1200:1300])
    time.sleep(0.05)
    [first] = monitor("digits", settings=settings)
    report = first.report
    assert first.verdict == "insufficient_data" and report is not None and report.early_warning is not None
    warning = report.early_warning
    assert warning.n == 1500 and warning.labelled == 100 and warning.tested and warning.shifted
    assert warning.direction == "down"  # blurred digits: the model is less sure of them
    assert 0.0 < warning.predicted_accuracy_low < warning.predicted_accuracy < warning.predicted_accuracy_high < 1.0
    assert any(reason.startswith("early warning (before labels): predicted accuracy") for reason in report.reasons)
    assert first.other_events and first.other_events[0][0] == CONFIDENCE_SHIFT_EVENT
    assert first.insufficient_streak == 1
    tags = _tags(settings)
    assert tags[INSUFFICIENT_STREAK_TAG] == "1" and LAST_CONFIDENCE_SHIFT_TAG in tags
    [markdown] = [text for text in _markdown_artifacts(artifact_key("digits", "1", "report"))
                  if str(first.run_id) in text]
    assert "predicted accuracy, 1500 served rows" in markdown and "SHIFTED down" in markdown

    [event] = _events(CONFIDENCE_SHIFT_EVENT, "mlmodel.digits.v1", since, at_least=1,
                      where=lambda e: e.payload["mlflow_run_id"] == first.run_id)
    assert event.payload["shifted"] is True
    assert event.payload["predicted_accuracy"] == pytest.approx(warning.predicted_accuracy)

    # Still shifted, inside the cool-down: no second shift event; the streak reaches 2: its alert.
    [second] = monitor("digits", settings=settings)
    assert second.verdict == "insufficient_data" and second.insufficient_streak == 2
    assert [name for name, _ in second.other_events] == [INSUFFICIENT_DATA_EVENT]
    [streak] = _events(INSUFFICIENT_DATA_EVENT, "mlmodel.digits.v1", since, at_least=1,
                       where=lambda e: e.payload["mlflow_run_id"] == second.run_id)
    assert streak.payload["streak"] == 2 and streak.payload["n"] == 100 and streak.payload["min_window"] == 500
    assert streak.payload["predicted_accuracy"] == pytest.approx(second.report.early_warning.predicted_accuracy)
    shifts = _events(CONFIDENCE_SHIFT_EVENT, "mlmodel.digits.v1", since, at_least=2, timeout=3.0,
                     where=lambda e: e.payload["mlflow_run_id"] in (first.run_id, second.run_id))
    assert [e.payload["mlflow_run_id"] for e in shifts] == [first.run_id]

    # Labels arrive: the check decides, and the streak resets.
    with open_prediction_log(settings) as log:
        log.attach_labels([f"u-{i}" for i in range(100, 1500)], registered.noisy_labels[1300:2700])
    time.sleep(0.05)
    [labelled] = monitor("digits", settings=settings)
    assert labelled.verdict == "drift" and labelled.insufficient_streak == 0
    assert _tags(settings)[INSUFFICIENT_STREAK_TAG] == "0"


def test_with_late_labels_the_refit_reads_from_when_the_drifted_rows_were_served(
    registered: Registered, settings: ThermostatSettings
) -> None:
    """Labels arrive hours after serving: the increments are cut by label arrival, but the drift
    event hands the refit the serving time of the first drifted row, not the label clock's
    change point (where almost no row would have a label yet)."""
    _serve(settings, registered.clean_logits[300:600], registered.clean_labels[300:600], tag="lc",
           temperature=registered.temperature, ago=timedelta(hours=5))
    [first] = monitor("digits", settings=settings)
    cursor = SequentialState.from_json(_tags(settings)[SEQUENTIAL_STATE_TAG]).last_end
    assert first.report is not None and first.report.sequential is not None and cursor is not None
    served_at = datetime.now(UTC) - timedelta(hours=3)
    _serve(settings, registered.noisy_logits[2700:3900], registered.noisy_labels[2700:3900], tag="ln",
           temperature=registered.temperature, ago=timedelta(hours=3))
    [drift] = monitor("digits", settings=settings)
    report = drift.report
    assert report is not None and report.sequential is not None and report.sequential.alarm
    assert report.sequential.change_point == cursor  # the label clock: the previous check
    assert report.change_point is not None and abs(report.change_point - served_at) < timedelta(seconds=30)
    assert report.refit_window_start == report.change_point < cursor - timedelta(hours=2)
    assert drift.event_id is not None


def test_an_alarm_whose_event_could_not_be_sent_is_raised_again_next_check(
    registered: Registered, settings: ThermostatSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event transport down (a fault only a stub can produce on demand): the alarm is not
    consumed — the state is not written — so the next check alarms again and sends it."""
    import flows.pipelines.check_recorder

    _serve(settings, registered.clean_logits[600:900], registered.clean_labels[600:900], tag="ec",
           temperature=registered.temperature)
    monitor("digits", settings=settings)
    before = _tags(settings)[SEQUENTIAL_STATE_TAG]
    _serve(settings, registered.noisy_logits[:1200], registered.noisy_labels[:1200], tag="en",
           temperature=registered.temperature)
    with monkeypatch.context() as patch:
        patch.setattr(flows.pipelines.check_recorder, "emit", lambda *args, **kwargs: None)
        [lost] = monitor("digits", settings=settings)
    assert lost.report is not None and lost.report.sequential is not None and lost.report.sequential.alarm
    assert lost.event_id is None and _tags(settings)[SEQUENTIAL_STATE_TAG] == before
    [again] = monitor("digits", settings=settings)
    assert again.report is not None and again.report.sequential is not None and again.report.sequential.alarm
    assert again.event_id is not None
    assert SequentialState.from_json(_tags(settings)[SEQUENTIAL_STATE_TAG]).alarms == 1
