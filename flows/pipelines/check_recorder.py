"""The monitor's recorder: what a check found (:class:`monitoring.CheckOutcome`) written and sent.

:func:`record` writes one check of one version, in this order:

1. its log lines (what it read, the verdict and the reasons);
2. its MLflow run in the experiment ``thermostat-monitoring`` (:class:`flows.records.runs.CheckRecord`):
   opened with the check's tags (no verdict yet, so a run a lost reply left behind is closed by
   the next check), then the metrics stamped with the window's end, the reliability diagram,
   the report and the group keys, the verdict tags last, and the run closed ``FINISHED``
   (none for a version that never logged);
3. its events (:func:`flows.pipelines.monitor_rules.monitor_step`, a pure function of the
   report and the version's state), each followed at once by the state it changes, and the
   version's state written last: **state only after the event was sent** — a check whose event
   could not be sent is retried by the next check instead of being silenced for the cool-down;
4. its Prefect artifacts (a table and a markdown report per version, with the warnings found beside
   the check).

A check that fails — whatever the cause — ends its run ``FAILED`` naming the error
(:func:`record_failure`; a run is opened for it when the check had none), and the monitor
closes the runs an earlier process left ``RUNNING`` (:func:`close_left_running`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from calibration import PriorCorrection

from flows.orchestration.events import emit, version_resource
from flows.orchestration.runtime import current_flow_run_id
from flows.pipelines.monitor_rules import MonitorStep, PlannedEvent, monitor_step
from flows.pipelines.tasks import io_task, step_task
from flows.records.events import DRIFT_EVENT, LABEL_SHIFT_EVENT, CheckContext
from flows.records.evidence import RunEvidence
from flows.records.runs import CheckFailure, CheckRecord, model_slug
from flows.records.versions import LAST_DRIFT_EVENT_TAG, MonitorState, RegisteredVersion
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from monitoring import (
    CheckOutcome,
    DriftReport,
    Verdict,
    drift_markdown,
    drift_payload,
    drift_table_rows,
    group_metric_key,
    mask_url,
    reliability_figure,
)

__all__ = ["CheckProgress", "VersionCheck", "artifact_key", "close_left_running", "record", "record_failure"]

# Every group's metric key, by name, beside the check's report.
_GROUP_KEYS_FILE: Final = "check/group_keys.json"


@dataclass(frozen=True, slots=True, eq=False)
class VersionCheck:
    """The outcome of one check of one serving version, as recorded.

    ``report`` is None only when the version never logged a prediction (then the verdict is
    ``insufficient_data`` and nothing is written to MLflow). ``event_id`` is set when a drift
    event was emitted, ``other_events`` names the other events emitted (confidence shift,
    insufficient-data streak) with their ids; ``insufficient_streak`` is the streak after this
    check; ``prior_correction`` the version's (None: it serves softmax(z / T)).
    """

    model_name: str
    version: str
    aliases: tuple[str, ...]
    temperature: float
    window_start: datetime
    window_end: datetime
    verdict: Verdict
    reasons: tuple[str, ...]
    report: DriftReport | None
    run_id: str | None
    run_url: str | None
    event_id: str | None
    other_events: tuple[tuple[str, str], ...] = ()
    insufficient_streak: int = 0
    prior_correction: PriorCorrection | None = None  # the one the version serves (None: none)
    warnings: tuple[str, ...] = ()
    """What the check found wrong beside the verdict: a version the alias left still served
    (:func:`flows.pipelines.monitor.stale_serving`)."""

    @property
    def refit_recommended(self) -> bool:
        return self.report is not None and self.report.refit_recommended

    def sentence(self) -> str:
        """The check in a few words: version, aliases, verdict, the tests that fired, the event sent."""
        fired = "" if self.report is None or not self.report.tests_fired else f" [{', '.join(self.report.tests_fired)}]"
        n = "no traffic logged" if self.report is None else f"n={self.report.n}"
        sent = "; drift event sent: refit requested" if self.event_id is not None else ""
        stale = f"; warning: {len(self.warnings)} stale serving" if self.warnings else ""
        return (f"{self.model_name} v{self.version} (@{', @'.join(self.aliases)}, T={self.temperature:.4g}) "
                f"{self.verdict}{fired} ({n}){sent}{stale}")


class CheckProgress:
    """How far a check got in MLflow: its run (once opened) and its verdict (once recorded)."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.verdict: str | None = None


def artifact_key(model_name: str, version: str, kind: str) -> str:
    """A Prefect artifact key (lowercase letters, digits, dashes) for one version's checks.

    Examples
    --------
    >>> artifact_key("Tickets_EN", "3", "report")
    'calibration-tickets-en-v3-report'
    """
    return f"calibration-{model_slug(model_name)}-v{version}-{kind}"


def record(outcome: CheckOutcome, version: RegisteredVersion, *, registry: MlflowRegistry, live: bool,
           settings: ThermostatSettings, progress: CheckProgress, warnings: tuple[str, ...] = ()) -> VersionCheck:
    """Write and send one check of ``version`` (module docstring), with the ``warnings`` found
    beside it (in its artifacts and its record); ``progress`` says how far it got."""
    _log_outcome(version, outcome)
    report, start, end = outcome.report, outcome.query.start, outcome.query.end
    check = _opening(version, start, end, settings)
    run_id = run_url = None
    if report is not None:
        run_id = progress.run_id = open_check_run(registry, check, settings)
    context = CheckContext(aliases=version.aliases, window_start=start.isoformat(), window_end=end.isoformat(),
                           mlflow_experiment=settings.monitoring_experiment_name, mlflow_run_id=run_id)
    step = monitor_step(report, version.monitor, settings.drift, datetime.now(UTC), live=live, context=context,
                        correction=version.record.prior_correction)
    if report is not None and run_id is not None:
        # The check's record carries the streak after it, as the monitor counts it (the dashboard reads it).
        decided = check.decided(report.verdict, refit_recommended=report.refit_recommended,
                                tests_fired=report.tests_fired, insufficient_streak=step.state.insufficient_streak,
                                groups=(g.group for g in report.groups),
                                shift_kind=None if report.diagnosis is None else report.diagnosis.kind)
        record_check(registry, run_id, report, version, decided, settings)
        progress.verdict = report.verdict
        run_url = registry.run_url(run_id, settings.resolved_mlflow_ui_url())
    sent = _carry_out(step, registry, version)
    event_id = sent.pop(DRIFT_EVENT, None)
    publish_artifacts(version, report, run_id, run_url, event_id, settings, start, end, warnings)
    return VersionCheck(
        model_name=version.model_name, version=version.version, aliases=version.aliases,
        temperature=version.temperature, window_start=start, window_end=end,
        verdict="insufficient_data" if report is None else report.verdict,
        reasons=("no prediction of this version was ever logged",) if report is None else report.reasons,
        report=report, run_id=run_id, run_url=run_url, event_id=event_id, other_events=tuple(sent.items()),
        insufficient_streak=step.state.insufficient_streak, prior_correction=version.record.prior_correction,
        warnings=warnings,
    )


def _log_outcome(version: RegisteredVersion, outcome: CheckOutcome) -> None:
    """The check's notes (warnings when the version never logged), then its verdict line and reasons."""
    logger = get_run_logger()
    report = outcome.report
    for note in outcome.notes:
        (logger.info if report is not None else logger.warning)("%s %s", version.context, note)
    if report is None:
        return
    headline = report.verdict + (" (in cool-down: no refit)" if report.in_cooldown and report.drift_detected else
                                 f" (about {report.rows_to_decide:,} labelled rows would decide)"
                                 if report.rows_to_decide is not None else "")
    fired = f" [{', '.join(report.tests_fired)}]" if report.tests_fired else ""
    test = report.temperature_test
    window_t = ("n/a" if test is None else
                f"{test.window_temperature:.4g} [{test.window_temperature_low:.4g}, {test.window_temperature_high:.4g}] "
                f"(z=%+.2f, p=%.3g)" % (test.z, test.p_value))
    tests = "; ".join(f"{o.test}: {o.compares}, p={o.p_value:.3g}" for o in report.outcomes) or "not tested"
    window = report.window
    logger.info("%s verdict %s%s: n=%d, window T %s; %s; NLL %.4f, accuracy %.4f, mean confidence %.4f",
                version.context, headline, fired, report.n, window_t, tests, window.nll, window.accuracy,
                window.mean_confidence)
    for reason in report.reasons:
        logger.info("%s %s", version.context, reason)


# ------------------------------------------------------------------------------ the MLflow run


def _opening(version: RegisteredVersion, start: datetime, end: datetime, settings: ThermostatSettings) -> CheckRecord:
    """The record of this check of ``version``, not decided yet: which check, and the policy it decides with."""
    return CheckRecord.opening(version, start, end, policy=settings.drift, prefect_flow_run_id=current_flow_run_id())


def _start_check_run(registry: MlflowRegistry, check: CheckRecord, settings: ThermostatSettings) -> str:
    end = check.window_end or datetime.now(UTC)
    return registry.start_run(f"check {check.model_name} v{check.version} {end.isoformat(timespec='seconds')}",
                              check.opening_tags(), experiment_name=settings.monitoring_experiment_name,
                              start_time=end)


@io_task(name="close-left-running-checks")
def close_left_running(registry: MlflowRegistry, versions: Sequence[RegisteredVersion],
                       settings: ThermostatSettings) -> int:
    """Close ``FAILED`` the check runs of ``versions`` that an earlier flow run left ``RUNNING``
    (its process died, or MLflow became unreachable before it could close them); how many. One
    search of the experiment's running runs for all of them (a fleet's check must not search once
    per version)."""
    current = current_flow_run_id()
    checked = {(version.model_name, version.version): version for version in versions}
    left = [(run.run_id, check, checked[key]) for run in registry.running_runs(settings.monitoring_experiment_name)
            if (check := CheckRecord.from_run(run)) is not None
            and (key := (check.model_name, check.version)) in checked
            and (current is None or check.prefect_flow_run_id != current)]
    for run_id, check, version in left:
        failure = CheckFailure(error=f"the check was left RUNNING by flow run {check.prefect_flow_run_id or 'unknown'}: "
                                     "its process died or MLflow became unreachable before it could close the run; "
                                     "closed by a later check")
        registry.end_run(run_id, failed=True, tags=failure.to_tags())
        get_run_logger().warning("%s check run %s closed FAILED: %s", version.context, run_id, failure.error)
    return len(left)


@io_task(name="open-check-run")
def open_check_run(registry: MlflowRegistry, check: CheckRecord, settings: ThermostatSettings) -> str:
    """The check's MLflow run with its opening tags, without a verdict yet (one a lost reply left
    behind is closed by the next check): stamped with the window's end, so the UI charts checks over time."""
    return _start_check_run(registry, check, settings)


@io_task(name="record-check")
def record_check(registry: MlflowRegistry, run_id: str, report: DriftReport, version: RegisteredVersion,
                 check: CheckRecord, settings: ThermostatSettings) -> None:
    """The check's evidence on its run (:func:`check_evidence`), then its verdict (``check``,
    decided) as the run is closed ``FINISHED``: each write is safe to repeat."""
    evidence, verdict = check_evidence(report, version), check.verdict_tags()
    registry.log_evidence(run_id, evidence)
    registry.end_run(run_id, tags=verdict)
    get_run_logger().info("%s MLflow run %s in experiment %r", version.context, run_id,
                          settings.monitoring_experiment_name)


def check_evidence(report: DriftReport, version: RegisteredVersion) -> RunEvidence:
    """What a check's run records beside its tags: the metrics stamped with the window's end, the
    reliability diagram, the report (markdown and JSON) and, with groups, every group's metric key."""
    title = (f"{version.model_name} v{version.version} @{','.join(version.aliases)} T={version.temperature:.4g}: "
             f"{report.verdict}")
    groups = {_GROUP_KEYS_FILE: {g.group: group_metric_key(g.group) for g in report.groups}} if report.groups else {}
    return RunEvidence(metrics=CheckRecord.metrics_of(report, version.temperature), metrics_at=report.checked_at,
                       figures={"plots/reliability.png": reliability_figure(report.reliability, title=title)},
                       texts={"check/report.md": drift_markdown(report)},
                       documents={"check/report.json": drift_payload(report), **groups})


def record_failure(
    registry: MlflowRegistry, version: RegisteredVersion, start: datetime, end: datetime, settings: ThermostatSettings,
    error: BaseException, *, run_id: str | None = None, recorded_verdict: str | None = None,
) -> None:
    """End the check's run ``FAILED`` naming ``error`` (a new run when the check had none yet), so
    the dashboard shows "check failed" for the version. Best effort: when MLflow itself is what
    failed, this fails too, is logged, and the failure goes on as it was (the alert still fires)."""
    failure = CheckFailure(error=settings.redacted(CheckFailure.of(error, recorded_verdict=recorded_verdict).error))
    logger = get_run_logger()
    try:
        run_id = run_id or _start_check_run(registry, _opening(version, start, end, settings), settings)
        registry.end_run(run_id, failed=True, tags=failure.to_tags())
    except Exception as unrecorded:  # noqa: BLE001 - reported, and the check's own error is raised
        logger.error("%s the failed check could not be recorded in MLflow (%s); the check failed with %s",
                     version.context, settings.redacted(f"{type(unrecorded).__name__}: {unrecorded}"), failure.error)
        return
    logger.error("%s check failed, MLflow run %s closed FAILED: %s", version.context, run_id, failure.error)


# ------------------------------------------------------------------------- events, then state


@step_task(name="emit-monitor-event")  # not retried: one event per occasion
def emit_monitor_event(planned: PlannedEvent, version: RegisteredVersion) -> str | None:
    """Emit one of a check's events on the version; its id, or None when it could not be sent."""
    unsent = ("no refit will start; the next check will try again" if planned.event == DRIFT_EVENT
              else "nothing reacts to it")
    return emit(planned.payload, version_resource(version.model_name, version.version, version.alias),
                context=version.context, if_unsent=unsent)


@io_task(name="remember-monitor-state")
def remember_state(registry: MlflowRegistry, version: RegisteredVersion, tags: dict[str, str]) -> None:
    """Write ``tags``, the tags that change the version's monitor state."""
    registry.set_version_tags(version.model_name, version.version, tags)
    if LAST_DRIFT_EVENT_TAG in tags:
        get_run_logger().info("%s cool-down starts: %s = %s", version.context, LAST_DRIFT_EVENT_TAG,
                              tags[LAST_DRIFT_EVENT_TAG])


def _remembered(registry: MlflowRegistry, version: RegisteredVersion, before: MonitorState,
                after: MonitorState) -> MonitorState:
    """``after``, written to the version (only the tags that change from ``before``)."""
    tags = after.changed_tags(before)
    if tags:
        remember_state(registry, version, tags)
    return after


def _carry_out(step: MonitorStep, registry: MlflowRegistry, version: RegisteredVersion) -> dict[str, str]:
    """Emit the check's events in order, each followed at once by the state it changes (a failure
    after an event must not let the next check send it again), then write the state that holds
    whatever was sent; the ids of the events sent, by event."""
    state, handed, ids = version.monitor, [], {}
    for planned in step.events:
        event_id = emit_monitor_event(planned, version)
        if event_id is not None:
            handed.append(planned)
            ids[planned.event] = event_id
            state = _remembered(registry, version, state, replace(state, **planned.on_sent))
    _remembered(registry, version, state, step.after(handed))
    return ids


# ------------------------------------------------------------------------------ the artifacts


def _markdown(
    version: RegisteredVersion, report: DriftReport | None, run_id: str | None, run_url: str | None,
    event_id: str | None, settings: ThermostatSettings, start: datetime, end: datetime, warnings: Sequence[str] = (),
) -> str:
    if report is None:
        body = (f"## Calibration check of {version.model_name} version {version.version}: insufficient_data\n\n"
                f"No prediction of this version was ever logged in the prediction log; window "
                f"[{start.isoformat()}, {end.isoformat()}). Is its serving wrapper logging predictions?\n")
    else:
        body = drift_markdown(report)
    where = f"[{run_id}]({run_url})" if run_url else (
        f"`{run_id}` (experiment `{settings.monitoring_experiment_name}`; "
        f"`mlflow ui --backend-store-uri {mask_url(settings.resolved_tracking_uri())}`)" if run_id else "none (no traffic)"
    )
    if event_id is not None:
        event = f"`{DRIFT_EVENT}` emitted (id `{event_id}`): a refit of this version is requested"
    elif report is not None and report.drift_detected and report.in_cooldown:
        until = report.cooldown_until.isoformat() if report.cooldown_until else "?"
        event = f"none: drift inside the cool-down (until {until})"
    elif report is not None and report.refit_recommended:
        event = "none: the event could not be sent (no Prefect API); the next check tries again"
    elif report is not None and report.diagnosis is not None and report.diagnosis.kind == "label_shift":
        event = (f"none for a refit: a label shift, not a calibration drift (`{LABEL_SHIFT_EVENT}` goes out instead, "
                 "once per cool-down)")
    else:
        event = "none"
    return body + (
        f"\n### Serving\n\n- aliases: {', '.join('@' + a for a in version.aliases)}\n"
        f"- checkpoint: `{version.checkpoint_uri}` (digest `{version.checkpoint_digest[:12]}`)\n"
        f"- T = {version.temperature:.6g}\n- MLflow run: {where}\n- event: {event}\n"
        + "".join(f"- **warning**: {warning}\n" for warning in warnings)
    )


@io_task(name="publish-artifacts")
def publish_artifacts(
    version: RegisteredVersion, report: DriftReport | None, run_id: str | None, run_url: str | None,
    event_id: str | None, settings: ThermostatSettings, start: datetime, end: datetime, warnings: Sequence[str] = (),
) -> None:
    verdict = "insufficient_data" if report is None else report.verdict
    description = (f"{version.model_name} v{version.version} (T={version.temperature:.4g}): {verdict}"
                   + ("; warning: a version the alias left is still served" if warnings else ""))
    if report is not None:
        head: dict[str, Any] = {"model": version.model_name, "version": version.version, "verdict": report.verdict,
                                "window_end": report.window_end.isoformat()}
        create_table_artifact(table=[head | row for row in drift_table_rows(report)],
                              key=artifact_key(version.model_name, version.version, "table"), description=description)
    create_markdown_artifact(
        markdown=_markdown(version, report, run_id, run_url, event_id, settings, start, end, warnings),
        key=artifact_key(version.model_name, version.version, "report"), description=description,
    )
