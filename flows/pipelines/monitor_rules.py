"""The monitor's rules after a check: which events to emit and what the version remembers.

:func:`monitor_step` is a pure function of the check's report, the version's state before it
(:class:`flows.records.versions.MonitorState`), the drift policy and the time: it returns the events to
emit, each with the state it changes once it was handed to Prefect, and the state that holds
whatever was sent. The flow only carries it out (emit, then write the tags), so every rule is
tested here without a server.

The rules:

* a drift outside the cool-down (``report.refit_recommended``) emits the drift event, its payload
  carrying the shift diagnosis's kind and fix (``shift_kind``, ``shift_fix``); once sent, the
  cool-down starts (``last_drift_event_at``) and the sequential rule's state advances. An
  alarm whose event was not sent is not consumed: the next check folds the same rows in again
  and alarms again;
* a check of the current window whose diagnosis is a **label shift** emits the label-shift event
  instead (its report recommends no refit, whatever the tests at the deployed posteriors said: a
  temperature refit fitted to a class mix is the wrong fix), at most once per ``policy.cooldown``
  per version (``last_label_shift_at``); a calibration drift goes to the refit as before, an
  accuracy collapse too (the refit escalates), a covariate shift emits nothing (the report says
  "calibrated, but the traffic moved"). On a **prior-corrected** version a label shift whose
  estimate's intervals hold the correction's priors emits nothing (the correction fits), another
  one emits the event with the new estimate, and a check whose prior test is quiet (the mix went
  back to the reference's) emits it with ``undo`` true: the ``correct-priors`` deployment then
  registers a version without the correction;
* otherwise, on a check of the current window (``live``), a shift of the served confidences
  emits the confidence-shift event, at most once per ``policy.cooldown`` per version;
* on a live check, ``insufficient_data`` extends the streak (any other verdict resets it); the
  streak's event goes out when it reaches ``policy.insufficient_data_streak`` and at each
  multiple; a version that never logged a prediction (no report) counts as insufficient data;
* on a live check, ``undetermined`` extends the undetermined streak (any other verdict, or no
  report, resets it); its event goes out when it reaches ``policy.undetermined_streak`` and at each
  multiple: the monitor could not have seen a drift of the margin's size for that long;
* a check given its window (a backfill, ``live`` False) changes neither streak nor the
  sequential rule's state, and emits no confidence-shift or streak event.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np

from calibration import PriorCorrection, PriorShiftTest, json_safe
from flows.records.events import (
    CheckContext,
    ConfidenceShiftEvent,
    DriftEvent,
    EventPayload,
    InsufficientDataEvent,
    LabelShiftEvent,
    UndeterminedEvent,
)
from flows.records.versions import MonitorState
from monitoring import DriftPolicy, DriftReport, SequentialState, drift_payload, label_shift_payload

__all__ = ["MonitorStep", "PlannedEvent", "monitor_step"]


@dataclass(frozen=True, slots=True)
class PlannedEvent:
    """An event to emit, and the :class:`MonitorState` fields that change once it was sent."""

    payload: EventPayload
    on_sent: Mapping[str, Any]

    @property
    def event(self) -> str:
        return self.payload.EVENT


@dataclass(frozen=True, slots=True)
class MonitorStep:
    """The events of one check, in order, and ``state``: the version's state whatever was sent."""

    events: tuple[PlannedEvent, ...]
    state: MonitorState

    def after(self, sent: Collection[PlannedEvent]) -> MonitorState:
        """The state once the events in ``sent`` were handed to Prefect."""
        changes: dict[str, Any] = {}
        for planned in self.events:
            if any(planned is handed for handed in sent):
                changes |= planned.on_sent
        return replace(self.state, **changes)


def monitor_step(
    report: DriftReport | None, state: MonitorState, policy: DriftPolicy, now: datetime, *, live: bool,
    context: CheckContext, correction: PriorCorrection | None = None,
) -> MonitorStep:
    """The events and the new state after one check of one version (module docstring).

    Parameters
    ----------
    report : DriftReport or None
        The check's report; None when the version never logged a prediction.
    state : MonitorState
        The version's state before the check.
    policy : DriftPolicy
        The cool-down and the streak's length.
    now : datetime
        When the events are emitted (the cool-downs start then), aware.
    live : bool
        A check of the current window (the schedule's); False for a backfill or re-check.
    context : CheckContext
        The aliases, window and MLflow run the events name.
    correction : PriorCorrection or None
        The prior correction the version serves (None: none): a label shift it already fits
        emits nothing, and once the traffic's priors are back at the reference's it is undone.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> from monitoring import DEFAULT_POLICY
    >>> context = CheckContext(aliases=("champion",), window_start="2026-01-01", window_end="2026-01-02",
    ...                        mlflow_experiment="thermostat-monitoring", mlflow_run_id=None)
    >>> now = datetime(2026, 1, 2, tzinfo=UTC)
    >>> step = monitor_step(None, MonitorState(insufficient_streak=2), DEFAULT_POLICY, now, live=True, context=context)
    >>> [planned.event for planned in step.events], step.state.insufficient_streak
    (['thermostat.calibration.insufficient_data'], 3)
    """
    streak = state.insufficient_streak
    if live:
        streak = streak + 1 if report is None or report.verdict == "insufficient_data" else 0
    warning = None if report is None else report.early_warning
    drift, sequential = _drift_event(report, state, now, context)
    events: list[PlannedEvent] = [] if drift is None else [drift]
    shift_quiet = state.last_confidence_shift_at is not None and now < state.last_confidence_shift_at + policy.cooldown
    if (report is not None and not report.refit_recommended and live and warning is not None and warning.shifted
            and not shift_quiet):
        events.append(PlannedEvent(ConfidenceShiftEvent(warning=warning.to_dict(), context=context),
                                   {"last_confidence_shift_at": now}))
    label_shift = _label_shift(report, state, policy, now, live=live, context=context, correction=correction)
    if label_shift is not None:
        events.append(label_shift)
    if live and streak >= policy.insufficient_data_streak and streak % policy.insufficient_data_streak == 0:
        events.append(PlannedEvent(InsufficientDataEvent(
            context=context, streak=streak, n=0 if report is None else report.n, min_window=policy.min_window,
            predicted_accuracy=None if warning is None else json_safe(warning.predicted_accuracy)), {}))
    undetermined = state.undetermined_streak
    if live:
        undetermined = undetermined + 1 if report is not None and report.verdict == "undetermined" else 0
    if live and report is not None and undetermined and undetermined % policy.undetermined_streak == 0:
        events.append(PlannedEvent(_undetermined_event(report, undetermined, context), {}))
    return MonitorStep(events=tuple(events), state=replace(state, insufficient_streak=streak, sequential=sequential,
                                                           undetermined_streak=undetermined))


def _undetermined_event(report: DriftReport, streak: int, context: CheckContext) -> UndeterminedEvent:
    """The event of a run of ``streak`` undetermined checks: what would decide, and the window's T."""
    test = report.temperature_test
    return UndeterminedEvent(
        context=context, streak=streak, n=report.n, rows_to_decide=report.rows_to_decide, temperature=report.temperature,
        window_temperature=None if test is None else json_safe(test.window_temperature),
        window_temperature_low=None if test is None else json_safe(test.window_temperature_low),
        window_temperature_high=None if test is None else json_safe(test.window_temperature_high),
        margin=report.policy.equivalence_margin)


def _drift_event(report: DriftReport | None, state: MonitorState, now: datetime, context: CheckContext
                 ) -> tuple[PlannedEvent | None, SequentialState | None]:
    """The drift event of a check that recommends a refit (it consumes a sequential alarm once
    sent), and the sequential rule's state to keep when no event carries it."""
    if report is None or not report.refit_recommended:
        return None, state.sequential if report is None or report.sequential is None else report.sequential.state
    on_sent: dict[str, Any] = {"last_drift_event_at": now}
    if report.sequential is not None:
        on_sent["sequential"] = report.sequential.state
    return PlannedEvent(DriftEvent(report=drift_payload(report), context=context), on_sent), state.sequential


def _label_shift(report: DriftReport | None, state: MonitorState, policy: DriftPolicy, now: datetime, *, live: bool,
                 context: CheckContext, correction: PriorCorrection | None) -> PlannedEvent | None:
    """The label-shift event of a live check, outside its cool-down: a label shift the version's
    correction (if any) does not already fit, or the undo of a correction whose mix went back; else None."""
    if not live or report is None or report.diagnosis is None or report.prior_test is None:
        return None
    in_force = correction is not None and not correction.is_identity(tolerance=1e-9)
    if report.diagnosis.kind == "label_shift":
        if in_force and _still_fits(correction, report.prior_test):
            return None
        undo = False
    elif in_force and not report.prior_test.fired:
        undo = True
    else:
        return None
    last = state.last_label_shift_at
    if last is not None and now < last + policy.cooldown:
        return None
    event = LabelShiftEvent(diagnosis=label_shift_payload(report, undo=undo), context=context)
    return PlannedEvent(event, {"last_label_shift_at": now})


def _still_fits(correction: PriorCorrection | None, test: PriorShiftTest) -> bool:
    """Every class prior of the correction in force inside the interval of the window's estimate."""
    estimate = test.estimate
    return correction is not None and bool(np.all((estimate.priors_low <= correction.priors)
                                                  & (correction.priors <= estimate.priors_high)))
