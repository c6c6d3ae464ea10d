"""The drift monitor: ECE and NLL of every serving version on its recent labelled traffic.

For each serving alias of a model (the champion and any router aliases, discovered in the
registry; aliases pointing at one version are checked once), the flow reads the version's T,
gate threshold and registration baseline from its tags, summarises its labelled traffic in
the window from the prediction log **in chunks** (memory bounded by ``monitor_chunk_size``),
decides (:func:`monitoring.decide_drift`) and publishes:

* an MLflow run per check per version in the experiment ``thermostat-monitoring``
  (:class:`flows.records.runs.CheckRecord`), tagged with the model, version, aliases, the drift
  policy it decided with, its verdict and the insufficient-data streak after it, its metrics
  stamped with the window's end (so the UI charts them over time) and the reliability diagram
  ``plots/reliability.png``;
  each group's metrics under the key of :func:`monitoring.group_metric_key`, the hashed ones
  named in the tag ``thermostat.group_keys`` (:class:`flows.records.runs.GroupMetricKeys`);
* a Prefect table artifact and a markdown artifact per check (keys
  ``calibration-<model>-v<version>-table`` / ``-report``: one history per version);
* the **shift diagnosis** (:func:`monitoring.diagnose_check`): the served rows' class priors
  (summed in the same pass, a bounded sample for EM) against the version's registered reference
  priors, and, when they moved, the labelled rows read again at the re-weighted posteriors; the
  report says which shift it was (no change, label shift, calibration drift, accuracy collapse
  against the acceptance floor ``min_accuracy``, covariate shift) and the check's run is tagged
  ``thermostat.shift_kind``. A label shift emits ``thermostat.calibration.label-shift`` instead of
  the drift event (no temperature refit);
* on a drift that recommends a refit, the event ``thermostat.calibration.drift``
  (:mod:`flows.orchestration.events`), which the ``refit`` deployment's trigger listens for; its payload's
  ``refit_window_start`` is where the refit reads from (the sequential rule's change point
  after its alarm, else the window's start).

Across checks (read from the SQL prediction log, also when the window comes from the Parquet
export, which has neither label times nor unlabelled rows):

* the **sequential rule** (:func:`monitoring.update_sequential`): each check of the current
  window (``window_end`` not given: the scheduled checks) folds in the rows whose label arrived
  since the previous such check (:class:`monitoring.NewlyLabelled`), so every labelled row
  counts once; its state is the version tag ``thermostat.sequential_state``. An alarm is a
  drift (``tests_fired`` names ``sequential``). A check given its ``window_end`` (a backfill, a
  re-check) leaves the state alone.
* the **early warning** (:func:`monitoring.warn_before_labels`) on every served row of the
  window, labelled or not, against the reference profile registered with the version: the
  accuracy the confidences predict, shown even when the window has too few labels, and a test
  of their distribution; a shift emits ``thermostat.calibration.confidence_shift`` (at most one
  per version per ``drift_cooldown``; tag ``thermostat.last_confidence_shift_at``), on which the
  ``monitor`` deployment schedules a labelled check.
* the **insufficient-data streak** (tag ``thermostat.insufficient_data_streak`` on the version,
  and on each check's run the streak after it; checks of the current window only): when it reaches ``insufficient_data_streak`` checks in a row (and each
  multiple), the event ``thermostat.calibration.insufficient_data``.

One pass
--------
The window summary (the labelled rows served in the window), the early warning (every row
served in it) and the sequential increment (the rows labelled since the cursor, served at any
time) are read from the SQL log in **one pass** over the window (:func:`monitoring.scan_window`):
the first two share the window's rows, the increment's rows inside the window are marked by the
database in the same read, and only its rows served outside the window (late labels of older
rows) are read apart, on the index of labelling times. With the window from the export (or on
Dask) the summary comes from there and the pass over the log serves the other two.

A fleet
-------
:func:`monitor` checks the serving versions of one model; :func:`monitor_fleet` checks every
serving version of every model in one run (the ``monitor-fleet`` deployment, hourly), each
exactly as :func:`monitor` would. Per run, not per version: the registry's models and aliases
(one search), the check runs left ``RUNNING`` (one search), every version's K (one query), the
MLflow client and the experiment's id, the log's connection pool. Per version: its record (one
read: T, gate, reference sums and profile), one pass over its window, its check run.

Failures
--------
A check that fails — any cause: the prediction log missing (reading never creates it), MLflow
unreachable, a bug, an interrupt — ends its run ``FAILED`` with the verdict ``failed`` and the
error (:class:`flows.records.runs.CheckFailure`; a run is opened for it when the check had none),
so the dashboard shows "check failed" instead of the version's last verdict; the other
versions are still checked, and the flow run fails with the error (the ``monitor failed``
alert, :mod:`flows.orchestration.alerts`). The run gets its verdict last: one left ``RUNNING`` by a process
that died or lost MLflow has none (the dashboard does not count it) and is closed ``FAILED``
by the version's next check. MLflow's own HTTP retries are bounded by the settings
(``THERMOSTAT_MLFLOW_HTTP_*``), so with the server gone a check fails within a minute or so.

Cool-down state
---------------
The time of the last *emitted* drift event of a version — the time it was emitted, not the
window's end, so a backfill of an old window cannot put the cool-down in the past — is kept on
the version itself, as the tag ``thermostat.last_drift_event_at`` (ISO 8601, UTC): monitoring
metadata written after registration, never T or the evidence. It lives in the MLflow registry, which
every deployment of Thermostat already has and which all workers share, so the cool-down holds
in-process and across workers alike, and it disappears with the version. It is written only
after the event was handed to Prefect: a check whose event could not be sent is retried by the
next check instead of being silenced for the cool-down. A drift inside the cool-down is still
reported as a drift (MLflow, artifacts), without an event.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from calibration import PriorCorrection, PriorEstimate, TemperatureStats, json_safe

from flows.pipelines.monitor_rules import MonitorStep, PlannedEvent, monitor_step
from flows.records.events import DRIFT_EVENT, LABEL_SHIFT_EVENT, CheckContext
from flows.orchestration.events import emit, version_resource
from flows.registry.adapter import REGISTRATION_TAG, MlflowRegistry
from flows.orchestration.runtime import current_flow_run_id
from flows.records.runs import CheckFailure, CheckRecord, model_slug
from flows.settings import ThermostatSettings
from flows.orchestration.cluster import summarise_export_on_dask
from flows.pipelines.tasks import check_window, io_task, open_window_source, read_prediction_log, step_task
from flows.records.versions import (
    LAST_DRIFT_EVENT_TAG,
    MonitorState,
    RegisteredVersion,
    registered_version,
    serving_versions,
)
from monitoring import (
    DriftReport,
    EarlyWarning,
    LabelArrivals,
    LabelledSource,
    PredictionLog,
    ReweightedWindow,
    SequentialCheck,
    SequentialState,
    Verdict,
    WindowQuery,
    WindowScan,
    WindowSummary,
    decide_drift,
    diagnose_check,
    drift_markdown,
    drift_payload,
    drift_table_rows,
    group_metric_key,
    mask_url,
    reliability_figure,
    reweight_window,
    scan_window,
    summarise_window,
    update_sequential,
    warn_before_labels,
    with_stream_checks,
)

__all__ = ["VersionCheck", "artifact_key", "monitor", "monitor_fleet"]

# Served-time lower bound of the sequential rule's increments after the first: any row of the
# version whose label arrived since the cursor counts, however long ago it was served.
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
# Every group's metric key, by name, beside the check's report.
_GROUP_KEYS_FILE: Final = "check/group_keys.json"


@dataclass(frozen=True, slots=True, eq=False)
class VersionCheck:
    """The outcome of one check of one serving version.

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

    @property
    def refit_recommended(self) -> bool:
        return self.report is not None and self.report.refit_recommended


def artifact_key(model_name: str, version: str, kind: str) -> str:
    """A Prefect artifact key (lowercase letters, digits, dashes) for one version's checks.

    Examples
    --------
    >>> artifact_key("Tickets_EN", "3", "report")
    'calibration-tickets-en-v3-report'
    """
    return f"calibration-{model_slug(model_name)}-v{version}-{kind}"


# ---------------------------------------------------------------------------------- tasks


@io_task(name="find-serving-versions")
def find_serving_versions(registry: MlflowRegistry, model_name: str, aliases: list[str] | None) -> list[RegisteredVersion]:
    grouped = serving_versions(registry.aliases(model_name), aliases)
    found = [registered_version(model_name, version, registry.get_version(model_name, version).tags, names)
             for version, names in grouped.items()]
    logger = get_run_logger()
    if not found:
        logger.warning("%s has no serving alias (or is not registered): nothing to check", model_name)
    for version in found:
        logger.info("%s serving; registration baseline ECE %.4f (%d bins), gate threshold %s",
                    version.context, version.baseline_ece, version.n_bins,
                    "none" if version.gate_threshold is None else f"{version.gate_threshold:.4f}")
    return found


def checked_threshold(version: RegisteredVersion) -> float | None:
    """The gate threshold a check counts coverage and accepted accuracy at: the version's, except
    on a prior-corrected version (None: no gate figures). A check reads the uncorrected posteriors
    softmax(z / T) of every version (docs/deployment.md, "Prior correction"), and a corrected
    version's threshold was swept on the corrected confidences: counted on the uncorrected ones it
    would measure a gate that is not served."""
    return None if version.record.prior_correction is not None else version.gate_threshold


def window_query(version: RegisteredVersion, start: datetime, end: datetime) -> WindowQuery:
    """What a check reads of ``version``'s window [start, end): its registered T and bins, and the
    gate threshold of :func:`checked_threshold`."""
    return WindowQuery(version.model_name, version.version, temperature=version.temperature, start=start, end=end,
                       n_bins=version.n_bins, threshold=checked_threshold(version))


@io_task(name="summarise-window")
def summarise(
    source: LabelledSource, version: RegisteredVersion, start: datetime, end: datetime, settings: ThermostatSettings
) -> WindowSummary | None:
    """The window's statistics at the registered T from the Parquet export, read in chunks; None
    if the version never logged."""
    try:
        summary = summarise_window(source, window_query(version, start, end), chunk_size=settings.monitor_chunk_size)
    except LookupError:
        get_run_logger().warning("%s no prediction of this version was ever logged in %r", version.context, source)
        return None
    get_run_logger().info("%s read %d labelled rows in %d chunk(s) of at most %d from %r", version.context,
                          summary.n, summary.n_chunks, settings.monitor_chunk_size, source)
    return summary


def summarise_on_dask(
    version: RegisteredVersion, start: datetime, end: datetime, settings: ThermostatSettings
) -> WindowSummary | None:
    """The window's statistics from the export, one Prefect task per partition on Dask."""
    summary = summarise_export_on_dask(settings, window_query(version, start, end))
    if summary is None:
        get_run_logger().warning("%s no row of this version in the export at %s", version.context,
                                 settings.export_path)
    return summary


def label_arrivals(
    version: RegisteredVersion, start: datetime, end: datetime, settings: ThermostatSettings, now: datetime
) -> LabelArrivals | None:
    """The rows this check folds into the version's sequential rule; None (and said why) when no
    time passed since its cursor.

    Two clocks. The increments are cut by when labels arrived: the rows whose label arrived in
    [the state's cursor, now − ``label_settle_time``) — the settle time leaves a label batch
    still being committed (or stamped by a clock a little behind) to the next check — served
    at any time (the first increment: since the window's start), so each labelled row counts in
    exactly one increment whatever its label delay. The state's ``last_end`` is that cursor.
    The change point a refit needs is in serving time: the earliest serving time among the
    rows since the climb began (``served_from``). Read from the SQL prediction log whatever the
    window's source (the Parquet export has no label times).
    """
    state = version.monitor.sequential or SequentialState.initial(version.temperature)
    until = now - settings.drift.label_settle_time
    since = state.last_end
    if since is not None and until <= since:
        get_run_logger().info("%s sequential rule not updated: its last increment ends at %s, not before this check's "
                              "cursor (%s)", version.context, since.isoformat(), until.isoformat())
        return None
    return LabelArrivals(since=since, until=until, served_from=start if since is None else _EPOCH,
                         served_to=max(end, now))


@io_task(name="read-window")
def read_window(
    log: PredictionLog, version: RegisteredVersion, start: datetime, end: datetime, arrivals: LabelArrivals | None,
    settings: ThermostatSettings, *, summarise: bool,
) -> WindowScan | None:
    """The check's one pass over the SQL log (:func:`monitoring.scan_window`): every row served in
    the window — its labelled rows summarised at the registered T (``summarise``: the window is
    read from the log), all of them profiled for the early warning, those whose label arrived in
    ``arrivals`` summed for the sequential rule — and the increment's few rows served outside the
    window. None when the log holds no row of this version."""
    try:
        scan = scan_window(
            log, window_query(version, start, end), chunk_size=settings.monitor_chunk_size, arrivals=arrivals,
            summarise=summarise, prior_capacity=settings.drift.prior_sample_capacity, seed=settings.drift.seed,
        )
    except LookupError:
        return None
    get_run_logger().info(
        "%s read %d served rows (%s labelled) in one pass, chunks of at most %d, from %r%s", version.context,
        scan.served_rows, "?" if scan.summary is None else scan.summary.n, settings.monitor_chunk_size, log,
        "" if arrivals is None else f"; {scan.outside_rows} rows labelled since the last check served outside it",
    )
    return scan


def _sequential(version: RegisteredVersion, arrivals: LabelArrivals, scan: WindowScan,
                settings: ThermostatSettings) -> SequentialCheck:
    """Fold the rows labelled since the previous check (``arrivals``, summed by ``scan``) into the
    version's sequential rule."""
    state = version.monitor.sequential or SequentialState.initial(version.temperature)
    increment = scan.arrived if scan.arrived is not None else TemperatureStats.empty(version.temperature)
    check = update_sequential(
        state, increment, start=min(arrivals.served_from, arrivals.until) if arrivals.since is None else arrivals.since,
        end=arrivals.until, served_from=scan.arrived_first_served, reference=version.reference_stats,
        policy=settings.drift,
    )
    get_run_logger().info("%s %s", version.context, check.sentence())
    return check


def _early_warning(version: RegisteredVersion, scan: WindowScan, settings: ThermostatSettings) -> EarlyWarning:
    """Every served row of the window, labelled or not, against the registration reference's
    confidences, from the SQL prediction log whatever the window's source (the export holds
    labelled rows only)."""
    warning = warn_before_labels(scan.profile, version.reference_profile, policy=settings.drift)
    get_run_logger().info("%s %s", version.context, warning.sentence())
    return warning


@step_task(name="decide-drift")
def decide(
    summary: WindowSummary, version: RegisteredVersion, settings: ThermostatSettings, scan: WindowScan | None = None,
    arrivals: LabelArrivals | None = None,
) -> DriftReport:
    """The window's decision with the checks across the stream (``scan``: from the SQL log): the
    sequential rule when this check folds labels in (``arrivals``), the early warning."""
    sequential = None if scan is None or arrivals is None else _sequential(version, arrivals, scan, settings)
    warning = None if scan is None else _early_warning(version, scan, settings)
    report = decide_drift(summary, version.drift_reference, settings.drift, last_drift_at=version.last_drift_event_at,
                          now=summary.end)
    report = with_stream_checks(report, sequential=sequential, early_warning=warning)
    logger = get_run_logger()
    headline = report.verdict + (" (in cool-down: no refit)" if report.in_cooldown and report.drift_detected else "")
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
    return report


@io_task(name="diagnose-shift")
def diagnose(
    report: DriftReport, version: RegisteredVersion, scan: WindowScan | None, source: LabelledSource,
    settings: ThermostatSettings,
) -> DriftReport:
    """The check's shift diagnosis (:func:`monitoring.diagnose_check`): the served rows' priors from
    ``scan`` against the version's reference priors; when they moved, the labelled rows read again
    from ``source`` at the re-weighted posteriors; the accuracy floor is the acceptance's."""

    def reweigh(estimate: PriorEstimate) -> ReweightedWindow:
        return reweight_window(
            source, window_query(version, report.window_start, report.window_end), priors=estimate.priors,
            reference_priors=estimate.reference_priors, chunk_size=settings.monitor_chunk_size)

    diagnosed = diagnose_check(
        report, served=None if scan is None else scan.served_priors, reference=version.reference_priors,
        class_rows=None if scan is None else scan.class_rows, class_correct=None if scan is None else scan.class_correct,
        reweigh=reweigh, accuracy_floor=settings.min_accuracy)
    if diagnosed.diagnosis is not None:
        get_run_logger().info("%s shift diagnosis: %s", version.context, diagnosed.diagnosis.sentence())
    return diagnosed


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
        registry.set_run_tags(run_id, failure.to_tags())
        registry.end_run(run_id, failed=True)
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
    """Metrics at the window's end, the diagram, the report and the group keys on the check's
    run, then its verdict (``check``, decided), and the run closed ``FINISHED``: each write is
    safe to repeat."""
    aliases = ",".join(version.aliases)
    registry.log_metrics(run_id, CheckRecord.metrics_of(report, version.temperature), timestamp=report.checked_at)
    title = f"{version.model_name} v{version.version} @{aliases} T={version.temperature:.4g}: {report.verdict}"
    registry.log_figure(run_id, reliability_figure(report.reliability, title=title), "plots/reliability.png")
    registry.log_text(run_id, drift_markdown(report), "check/report.md")
    registry.log_json(run_id, drift_payload(report), "check/report.json")
    if report.groups:
        registry.log_json(run_id, {g.group: group_metric_key(g.group) for g in report.groups}, _GROUP_KEYS_FILE)
    registry.set_run_tags(run_id, check.verdict_tags())
    registry.end_run(run_id)
    get_run_logger().info("%s MLflow run %s in experiment %r", version.context, run_id,
                          settings.monitoring_experiment_name)


def _record_failure(
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
        registry.set_run_tags(run_id, failure.to_tags())
        registry.end_run(run_id, failed=True)
    except Exception as unrecorded:  # noqa: BLE001 - reported, and the check's own error is raised
        logger.error("%s the failed check could not be recorded in MLflow (%s: %s); the check failed with %s",
                     version.context, type(unrecorded).__name__, unrecorded, failure.error)
        return
    logger.error("%s check failed, MLflow run %s closed FAILED: %s", version.context, run_id, failure.error)


@step_task(name="emit-monitor-event")  # not retried: one event per occasion
def emit_monitor_event(planned: PlannedEvent, version: RegisteredVersion) -> str | None:
    """Emit one of a check's events on the version; its id, or None when it could not be sent."""
    unsent = ("no refit will start; the next check will try again" if planned.event == DRIFT_EVENT
              else "nothing reacts to it")
    return emit(planned.payload, version_resource(version.model_name, version.version, version.alias),
                context=version.context, if_unsent=unsent)


@io_task(name="remember-monitor-state")
def remember_state(registry: MlflowRegistry, version: RegisteredVersion, before: MonitorState,
                   after: MonitorState) -> None:
    """Write the tags that change the version's monitor state from ``before`` to ``after``."""
    tags = after.changed_tags(before)
    for key, value in tags.items():
        registry.set_version_tag(version.model_name, version.version, key, value)
    if LAST_DRIFT_EVENT_TAG in tags:
        get_run_logger().info("%s cool-down starts: %s = %s", version.context, LAST_DRIFT_EVENT_TAG,
                              tags[LAST_DRIFT_EVENT_TAG])


def _markdown(
    version: RegisteredVersion, report: DriftReport | None, run_id: str | None, run_url: str | None,
    event_id: str | None, settings: ThermostatSettings, start: datetime, end: datetime,
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
    )


@io_task(name="publish-artifacts")
def publish_artifacts(
    version: RegisteredVersion, report: DriftReport | None, run_id: str | None, run_url: str | None,
    event_id: str | None, settings: ThermostatSettings, start: datetime, end: datetime,
) -> None:
    verdict = "insufficient_data" if report is None else report.verdict
    description = f"{version.model_name} v{version.version} (T={version.temperature:.4g}): {verdict}"
    if report is not None:
        head: dict[str, Any] = {"model": version.model_name, "version": version.version, "verdict": report.verdict,
                                "window_end": report.window_end.isoformat()}
        create_table_artifact(table=[head | row for row in drift_table_rows(report)],
                              key=artifact_key(version.model_name, version.version, "table"), description=description)
    create_markdown_artifact(
        markdown=_markdown(version, report, run_id, run_url, event_id, settings, start, end),
        key=artifact_key(version.model_name, version.version, "report"), description=description,
    )


# ----------------------------------------------------------------------------------- flow


def _remembered(registry: MlflowRegistry, version: RegisteredVersion, before: MonitorState,
                after: MonitorState) -> MonitorState:
    """``after``, written to the version (only the tags that change from ``before``)."""
    if after.changed_tags(before):
        remember_state(registry, version, before, after)
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


def _check_version(
    version: RegisteredVersion, *, registry: MlflowRegistry, source: LabelledSource, log: PredictionLog | None,
    start: datetime, end: datetime, live: bool, settings: ThermostatSettings,
) -> VersionCheck:
    """One version's check; on any failure (also an interrupt) its run ends ``FAILED`` naming it."""
    progress = _CheckProgress()
    try:
        return _run_check(version, registry=registry, source=source, log=log, start=start, end=end, live=live,
                          settings=settings, progress=progress)
    except BaseException as error:
        _record_failure(registry, version, start, end, settings, error, run_id=progress.run_id,
                       recorded_verdict=progress.verdict)
        raise


class _CheckProgress:
    """How far a check got in MLflow: its run (once opened) and its verdict (once recorded)."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.verdict: str | None = None


def _run_check(
    version: RegisteredVersion, *, registry: MlflowRegistry, source: LabelledSource, log: PredictionLog | None,
    start: datetime, end: datetime, live: bool, settings: ThermostatSettings, progress: _CheckProgress,
) -> VersionCheck:
    summary, scan, arrivals = _read(version, source=source, log=log, start=start, end=end, live=live,
                                    settings=settings)
    # None: the version never logged a prediction, an insufficient_data check of its own kind.
    report = None if summary is None else diagnose(decide(summary, version, settings, scan, arrivals), version, scan,
                                                   source, settings)
    check = _opening(version, start, end, settings)
    run_id = run_url = None
    if report is not None:
        run_id = progress.run_id = open_check_run(registry, check, settings)
    context = CheckContext(version.aliases, start.isoformat(), end.isoformat(), settings.monitoring_experiment_name,
                           run_id)
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
    publish_artifacts(version, report, run_id, run_url, event_id, settings, start, end)
    return VersionCheck(
        model_name=version.model_name, version=version.version, aliases=version.aliases,
        temperature=version.temperature, window_start=start, window_end=end,
        verdict="insufficient_data" if report is None else report.verdict,
        reasons=("no prediction of this version was ever logged",) if report is None else report.reasons,
        report=report, run_id=run_id, run_url=run_url, event_id=event_id, other_events=tuple(sent.items()),
        insufficient_streak=step.state.insufficient_streak, prior_correction=version.record.prior_correction,
    )


def _stream_log(stack: ExitStack, settings: ThermostatSettings) -> PredictionLog | None:
    """With the window from the export, the SQL log the checks across the stream read, or None
    when it does not exist (those checks are then skipped, and said so; the window is still checked)."""
    try:
        return stack.enter_context(read_prediction_log(settings))
    except FileNotFoundError as missing:
        get_run_logger().warning("the sequential rule and the early warning are skipped: %s", missing)
        return None


def _read(
    version: RegisteredVersion, *, source: LabelledSource, log: PredictionLog | None, start: datetime, end: datetime,
    live: bool, settings: ThermostatSettings,
) -> tuple[WindowSummary | None, WindowScan | None, LabelArrivals | None]:
    """The window's summary and what the checks across the stream read: one pass over the SQL log
    when the window is read from it; else the summary from the export (locally or on Dask) and
    the pass over the log for the stream's checks only. The sequential rule's increment on checks
    of the current window (``live``) only. (None, None, None): the version never logged."""
    from_log = source is log
    summary = None
    if not from_log:
        summary = summarise_on_dask(version, start, end, settings) if settings.engine == "dask" else summarise(
            source, version, start, end, settings)
        if summary is None:
            return None, None, None
    if log is None:  # the window from the export and no SQL log (said once, by _stream_log)
        return summary, None, None
    arrivals = label_arrivals(version, start, end, settings, datetime.now(UTC)) if live else None
    if not live:
        get_run_logger().info("%s sequential rule not updated: this check was given its window_end (a backfill or a "
                              "re-check); only checks of the current window advance the stream", version.context)
    scan = read_window(log, version, start, end, arrivals, settings, summarise=from_log)
    if scan is None:
        if from_log:
            get_run_logger().warning("%s no prediction of this version was ever logged in %r", version.context, log)
        else:
            get_run_logger().info("%s sequential rule and early warning skipped: the SQL prediction log %r holds no "
                                  "row of this version", version.context, log)
        return summary, None, None
    return (scan.summary if from_log else summary), scan, arrivals


def _check_all(
    versions: Sequence[RegisteredVersion], *, registry: MlflowRegistry, start: datetime, end: datetime, live: bool,
    settings: ThermostatSettings, what: str,
) -> list[VersionCheck]:
    """Check ``versions`` one after the other, sharing the log's connections, the registry's client
    and one look for runs left open; a version whose check fails is recorded and the others are
    still checked, then the failures are raised (one as it is, several as one error naming ``what``)."""
    checks: list[VersionCheck] = []
    failed: list[tuple[RegisteredVersion, Exception]] = []
    with ExitStack() as stack:
        try:
            source = stack.enter_context(open_window_source(settings))
            # The checks across the stream read the SQL log also when the window comes from the export.
            log = source if isinstance(source, PredictionLog) else _stream_log(stack, settings)
            if versions:
                close_left_running(registry, versions, settings)
            if versions and log is not None:
                log.logged_versions()  # every version's K in one read, not one per check
        except Exception as error:  # nothing to read, or MLflow unreachable: every serving version's check failed
            for version in versions:
                _record_failure(registry, version, start, end, settings, error)
            raise
        for version in versions:
            try:
                checks.append(_check_version(version, registry=registry, source=source, log=log, start=start,
                                             end=end, live=live, settings=settings))
            except Exception as error:  # recorded on the version's run; the other versions are still checked
                failed.append((version, error))
    if len(failed) == 1:
        raise failed[0][1]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(versions)} checks of {what} failed: "
                           + "; ".join(f"{v.model_name} v{v.version}: {type(e).__name__}: {e}"
                                       for v, e in failed)) from failed[0][1]
    return checks


@flow(name="monitor")
def monitor(
    model_name: str,
    aliases: list[str] | None = None,
    window_start: datetime | None = None,
    window_end: datetime | None = None,
    settings: ThermostatSettings | None = None,
) -> list[VersionCheck]:
    """Check the calibration of every serving version of ``model_name`` on recent labelled traffic.

    Parameters
    ----------
    model_name : registered model name in MLflow.
    aliases : the serving aliases to check (default: every alias of the model: the champion
        and the router's). Aliases pointing at one version are checked once.
    window_start, window_end : the traffic window (timezone-aware); default: the last
        ``monitor_window`` (24 h) ending now. A given ``window_end`` re-checks (backfills)
        history: the sequential rule, which follows the stream, is then not advanced.
    settings : defaults to ``ThermostatSettings()`` read from the environment, here, once.

    Returns
    -------
    list of VersionCheck
        One per serving version, in version order.
    """
    settings = settings if settings is not None else ThermostatSettings()
    start, end = check_window(window_start, window_end, settings, datetime.now(UTC))
    registry = MlflowRegistry.from_settings(settings)
    versions = find_serving_versions(registry, model_name, aliases)
    return _check_all(versions, registry=registry, start=start, end=end, live=window_end is None, settings=settings,
                      what=model_name)


@io_task(name="find-fleet-versions")
def find_fleet_versions(
    registry: MlflowRegistry, models: list[str] | None
) -> tuple[list[RegisteredVersion], list[str]]:
    """Every serving version of ``models`` (default: every registered model), read once; and what
    could not be read (a version whose registration tags are unreadable: its model's name,
    version and why). Versions Thermostat did not register (neither a ``temperature`` nor a
    ``thermostat.registration`` tag: another team's model in the same registry) are not checked."""
    logger = get_run_logger()
    serving = registry.serving_aliases()
    if models is not None:
        missing = sorted(set(models) - set(serving))
        if missing:
            raise ValueError(f"model(s) {missing} are not registered (or have no alias); the registry's models "
                             f"with an alias are {sorted(serving)[:20]}")
        serving = {name: serving[name] for name in models}
    found: list[RegisteredVersion] = []
    unreadable: list[str] = []
    for name, aliases in sorted(serving.items()):
        for number, names in serving_versions(aliases).items():
            tags = dict(registry.get_version(name, number).tags)
            if models is None and "temperature" not in tags and REGISTRATION_TAG not in tags:
                logger.info("%s v%s (@%s) was not registered by Thermostat: not checked", name, number,
                            ", @".join(names))
                continue
            try:
                found.append(registered_version(name, number, tags, names))
            except ValueError as error:
                unreadable.append(f"{name} v{number}: {error}")
    logger.info("checking %d serving version(s) of %d model(s)", len(found), len({v.model_name for v in found}))
    for problem in unreadable:
        logger.error("not checked: %s", problem)
    return found, unreadable


@flow(name="monitor-fleet")
def monitor_fleet(models: list[str] | None = None, settings: ThermostatSettings | None = None) -> list[VersionCheck]:
    """Check every serving version of every monitored model on its recent labelled traffic, in one run.

    What the hourly schedule of a deployment with many models runs (the ``monitor-fleet``
    deployment): each version is checked as :func:`monitor` checks it (same window, same
    records, events and state), but the run reads the registry's models and aliases once, looks
    for check runs left open once, reads every version's K once and shares one connection pool
    to the log and one MLflow client; each version's window is read in one pass.

    Parameters
    ----------
    models : the registered models to check (default: every registered model with an alias whose
        serving versions Thermostat registered).
    settings : defaults to ``ThermostatSettings()`` read from the environment, here, once.

    Returns
    -------
    list of VersionCheck
        One per serving version, by model name, then version.

    Raises
    ------
    RuntimeError
        When a version's check failed or a version's registration tags could not be read (the
        other versions are checked first).
    """
    settings = settings if settings is not None else ThermostatSettings()
    start, end = check_window(None, None, settings, datetime.now(UTC))
    registry = MlflowRegistry.from_settings(settings)
    versions, unreadable = find_fleet_versions(registry, models)
    checks = _check_all(versions, registry=registry, start=start, end=end, live=True, settings=settings,
                        what="the fleet")
    if unreadable:
        raise RuntimeError(f"{len(unreadable)} serving version(s) could not be read, so were not checked: "
                           + "; ".join(unreadable))
    return checks
