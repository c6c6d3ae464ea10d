"""The drift monitor: ECE and NLL of every serving version on its recent labelled traffic.

Each check reads as find → check → record:

* **find** the serving versions: every alias of a model (the champion and any router aliases,
  discovered in the registry; aliases pointing at one version are checked once), each read from
  its tags — T, gate threshold, registration reference, the monitor's state;
* **check** each one (:func:`monitoring.check_version`, the same pure function the command line
  and the studies run): its window read in chunks (memory bounded by ``monitor_chunk_size``),
  in **one pass** over the SQL log (:func:`monitoring.scan_window`: the window summary, the
  early warning's profile of every served row, the sequential rule's increment, the served
  rows' class priors), then the sequential rule, the early warning, the decision and the shift
  diagnosis. With the window from the Parquet export (locally, or on Dask:
  :mod:`flows.orchestration.cluster`) the summary comes from there and the pass over the SQL
  log serves the checks across the stream (the export holds neither label times nor unlabelled
  rows: its :class:`monitoring.StoreScope` says so);
* **record** it (:mod:`flows.pipelines.check_recorder`): the MLflow run per check per version in
  the experiment ``thermostat-monitoring``, the Prefect artifacts (keys
  ``calibration-<model>-v<version>-table`` / ``-report``), the events
  (:mod:`flows.pipelines.monitor_rules`: drift, label shift, confidence shift, insufficient-data
  streak) and the version's state, written only after its event was sent.

The sequential rule advances on checks of the current window only (``window_end`` not given: the
scheduled checks); a check given its ``window_end`` (a backfill, a re-check) leaves the stream alone.

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

A serving version whose registration record cannot be read from its tags (a tag deleted or edited
by hand: :class:`UnreadableVersion`) cannot be checked: the run logs it with why, emits
``thermostat.calibration.unreadable`` on it (the ``version not checked`` alert; the dashboard
lists the same situation), checks the other versions, and fails naming it and why, with any
check that failed. Whatever a run raises leaves without the settings' credentials
(:func:`monitoring.credentials_redacted`): the flow run's state message, the alert that quotes it.

Cool-down state
---------------
The time of the last *emitted* drift event of a version — the time it was emitted, not the
window's end, so a backfill of an old window cannot put the cool-down in the past — is kept on
the version itself, as the tag ``thermostat.last_drift_event_at`` (ISO 8601, UTC): monitoring
metadata written after registration, never T or the evidence. It lives in the MLflow registry, which
every deployment of Thermostat already has and which all workers share, so the cool-down holds
in-process and across workers alike, and it disappears with the version. A drift inside the
cool-down is still reported as a drift (MLflow, artifacts), without an event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from prefect import flow, get_run_logger

from flows.orchestration.cluster import summarise_export_on_dask
from flows.orchestration.events import emit, version_resource
from flows.orchestration.outcomes import finish
from flows.pipelines.check_recorder import (
    CheckProgress,
    VersionCheck,
    artifact_key,
    close_left_running,
    record,
    record_failure,
)
from flows.pipelines.tasks import check_window, io_task, open_window_source, read_prediction_log, step_task
from flows.records.events import UnreadableVersionEvent
from flows.records.outcomes import FlowSummary
from flows.records.versions import (
    RegisteredFor,
    RegisteredVersion,
    aware_time,
    registered_by_thermostat,
    registered_version,
    serving_versions,
)
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from monitoring import (
    CheckOutcome,
    CheckReference,
    CheckState,
    LabelledSource,
    PredictionStore,
    WindowQuery,
    WindowSummary,
    check_version,
    credentials_redacted,
)

__all__ = ["STALE_AFTER", "UnreadableVersion", "VersionCheck", "artifact_key", "checks_summary", "monitor", "monitor_fleet",
           "stale_serving"]

#: How long after a version's registration its alias's previous version may still be served
#: (requests in flight, a server being restarted) before a check says it is still served.
STALE_AFTER: Final = timedelta(minutes=5)


def checks_summary(flow: str, checks: Sequence[VersionCheck], what: str) -> FlowSummary:
    """The monitor's outcome (``flow``: ``monitor`` or ``monitor-fleet``) over the checks of ``what``
    (a model, or the fleet): one clause per version, and each check's verdict, run and event as JSON."""
    if not checks:
        return FlowSummary.of(flow, "nothing_checked", f"{what}: no serving version to check", checks=[])
    verdicts = sorted({check.verdict for check in checks})
    message = (f"checked {len(checks)} serving version(s) of {what}: "
               + "; ".join(check.sentence() for check in checks))
    return FlowSummary.of(flow, ",".join(verdicts), message, checks=[
        {"model_name": c.model_name, "version": c.version, "aliases": list(c.aliases), "verdict": c.verdict,
         "tests_fired": [] if c.report is None else list(c.report.tests_fired), "run_id": c.run_id,
         "event_id": c.event_id, "warnings": list(c.warnings)} for c in checks])


@dataclass(frozen=True, slots=True)
class UnreadableVersion:
    """A serving version whose registration record cannot be read from its tags (a tag deleted or
    edited by hand): it is not checked, and the run names it (``problem``: why) and fails."""

    model_name: str
    version: str
    aliases: tuple[str, ...]
    problem: str

    def sentence(self) -> str:
        """``NAME vVERSION (@ALIAS, ...): PROBLEM``."""
        return f"{self.model_name} v{self.version} (@{', @'.join(self.aliases)}): {self.problem}"


def _read_serving(
    registry: MlflowRegistry, model_name: str, grouped: dict[str, tuple[str, ...]], *, thermostat_only: bool,
) -> tuple[list[RegisteredVersion], list[UnreadableVersion]]:
    """The serving versions of ``model_name`` (``grouped``: {version: aliases}) read from their
    tags, and those whose record cannot be read. ``thermostat_only``: skip (and say so) a version
    with neither a ``temperature`` nor a ``thermostat.registration`` tag (another team's model)."""
    found: list[RegisteredVersion] = []
    unreadable: list[UnreadableVersion] = []
    for number, names in grouped.items():
        tags = dict(registry.get_version(model_name, number).tags)
        if thermostat_only and not registered_by_thermostat(tags):
            get_run_logger().info("%s v%s (@%s) was not registered by Thermostat: not checked", model_name, number,
                                  ", @".join(names))
            continue
        try:
            found.append(registered_version(model_name, number, tags, names))
        except ValueError as error:
            unreadable.append(UnreadableVersion(model_name, number, names, str(error)))
    return found, unreadable


# ---------------------------------------------------------------------------------- tasks


@io_task(name="find-serving-versions")
def find_serving_versions(
    registry: MlflowRegistry, model_name: str, aliases: list[str] | None
) -> tuple[list[RegisteredVersion], list[UnreadableVersion]]:
    """The serving versions of ``model_name`` (``aliases``: default every alias), and those whose
    registration record cannot be read (not checked: :func:`_check_all` names them)."""
    found, unreadable = _read_serving(registry, model_name, serving_versions(registry.aliases(model_name), aliases),
                                      thermostat_only=False)
    logger = get_run_logger()
    if not found and not unreadable:
        logger.warning("%s has no serving alias (or is not registered): nothing to check", model_name)
    for version in found:
        logger.info("%s serving; registration baseline ECE %.4f (%d bins), gate threshold %s",
                    version.context, version.baseline_ece, version.n_bins,
                    "none" if version.gate_threshold is None else f"{version.gate_threshold:.4f}")
    return found, unreadable


@io_task(name="find-stale-serving")
def stale_serving(
    registry: MlflowRegistry, log: PredictionStore, version: RegisteredVersion, start: datetime, end: datetime,
    logged: Mapping[tuple[str, str], int] | None = None,
) -> tuple[str, ...]:
    """What says that a server still answers with a version its alias left: for the alias ``version``
    was registered for (and holds), every older logged version of the model that no alias points at
    and that was registered for the same alias, whose rows were still served more than
    :data:`STALE_AFTER` after ``version``'s record was made, in the window [start, end). One index
    look-up per older version (the rows are counted only when found), one read of the aliases.
    ``logged`` is every version the log held when the run began (its one read of them, shared by
    the run's checks); None: read here.

    ``mlflow models serve -m models:/NAME@ALIAS`` resolves the alias once, at start-up: after a
    refit (or any registration) moves the alias, such a server keeps serving the old version until
    it is restarted, and its traffic is logged under the old version, which no check reads."""
    moved = version.registered_for
    if moved is None or moved.alias not in version.aliases:
        return ()
    name, alias = version.model_name, moved.alias
    since = max(start, aware_time(version.record.fitted_at, version.context, "fitted_at") + STALE_AFTER)
    if since >= end:
        return ()
    older = [v for m, v in (log.logged_versions(name) if logged is None else logged)
             if m == name and _older(v, version.version)]
    if older:
        held = set(registry.aliases(name).values())
        older = sorted((v for v in older if v not in held), key=int)
    warnings = []
    for other in older:
        served, last = log.served_rows(name, other, since, end)
        if last is None:
            continue
        registered_for = RegisteredFor.from_tags(registry.get_version(name, other).tags)
        if registered_for is not None and registered_for.alias != alias:
            continue  # it served another alias (a canary, a router's): not this one's business
        warnings.append(
            f"version {other} is still served: {served} row(s) logged since {since.isoformat(timespec='seconds')}, "
            f"the last at {last.isoformat(timespec='seconds')}, although @{alias} points at version {version.version} "
            f"(registered {version.record.fitted_at}). A serving process resolved @{alias} before it moved: "
            f"`mlflow models serve -m models:/{name}@{alias}` reads the alias once, at start-up. Restart it (or run it "
            f"as `thermostat serve {name} --alias {alias}`, which restarts it when the alias moves); until then its "
            f"traffic is version {other}'s, which no check reads")
    for warning in warnings:
        get_run_logger().warning("%s %s", version.context, warning)
    return tuple(warnings)


def _older(version: str, than: str) -> bool:
    """Whether registry version number ``version`` is below ``than`` (non-numbers never are)."""
    return version.isdigit() and than.isdigit() and int(version) < int(than)


def _stale_warnings(registry: MlflowRegistry, log: PredictionStore | None, version: RegisteredVersion,
                    start: datetime, end: datetime, logged: Mapping[tuple[str, str], int] | None) -> tuple[str, ...]:
    """:func:`stale_serving` on the store of every served row, at best: a look that fails is
    logged, not a failed check."""
    if log is None:
        return ()
    try:
        return stale_serving(registry, log, version, start, end, logged)
    except Exception as error:  # noqa: BLE001 - the check goes on without this warning
        get_run_logger().warning("%s could not look for servers still on an older version: %s: %s", version.context,
                                 type(error).__name__, error)
        return ()


def checked_threshold(version: RegisteredVersion) -> float | None:
    """The gate threshold a check counts coverage and accepted accuracy at: the version's, except
    on a prior-corrected version (None: no gate figures). A check reads the uncorrected posteriors
    softmax(z / T) of every version (docs/refit.md, "correct-priors"), and a corrected
    version's threshold was swept on the corrected confidences: counted on the uncorrected ones it
    would measure a gate that is not served."""
    return None if version.record.prior_correction is not None else version.gate_threshold


def window_query(version: RegisteredVersion, start: datetime, end: datetime) -> WindowQuery:
    """What a check reads of ``version``'s window [start, end): its registered T and bins, and the
    gate threshold of :func:`checked_threshold`."""
    return WindowQuery(version.model_name, version.version, temperature=version.temperature, start=start, end=end,
                       n_bins=version.n_bins, threshold=checked_threshold(version))


def check_reference(version: RegisteredVersion, settings: ThermostatSettings) -> CheckReference:
    """What ``version``'s traffic is compared with: its registration's drift reference, priors and
    confidences, and the acceptance floor ``min_accuracy``."""
    return CheckReference(version.drift_reference, priors=version.reference_priors,
                          profile=version.reference_profile, accuracy_floor=settings.min_accuracy)


def summarise_on_dask(
    version: RegisteredVersion, start: datetime, end: datetime, settings: ThermostatSettings
) -> WindowSummary | None:
    """The window's statistics from the export, one Prefect task per partition on Dask."""
    summary = summarise_export_on_dask(settings, window_query(version, start, end))
    if summary is None:
        get_run_logger().warning("%s no row of this version in the export at %s", version.context,
                                 settings.export_path)
    return summary


@io_task(name="check-version")
def check(
    version: RegisteredVersion, *, source: LabelledSource, log: PredictionStore | None, start: datetime,
    end: datetime, live: bool, settings: ThermostatSettings, summary: WindowSummary | None = None,
) -> CheckOutcome:
    """The check of ``version``'s window [start, end) (:func:`monitoring.check_version`): the window
    read from ``source`` (in one pass when it is ``log``), the checks across the stream from the
    SQL ``log`` (None: skipped), the sequential rule advanced on a check of the current window
    (``live``). Pure but for its reads: a retry after a lost connection repeats it whole."""
    state = CheckState(sequential=version.monitor.sequential, last_drift_at=version.last_drift_event_at, live=live)
    return check_version(source, window_query(version, start, end), check_reference(version, settings), state,
                         settings.drift, datetime.now(UTC), stream=log, summary=summary,
                         chunk_size=settings.monitor_chunk_size)


def _check_version(
    version: RegisteredVersion, *, registry: MlflowRegistry, source: LabelledSource, log: PredictionStore | None,
    start: datetime, end: datetime, live: bool, settings: ThermostatSettings, logged: Mapping[tuple[str, str], int] | None,
) -> VersionCheck:
    """One version's check, then its record; on any failure (also an interrupt) its run ends ``FAILED`` naming it."""
    progress = CheckProgress()
    try:
        summary = summarise_on_dask(version, start, end, settings) if settings.engine == "dask" else None
        outcome = check(version, source=source, log=log, start=start, end=end, live=live, settings=settings,
                        summary=summary)
        warnings = _stale_warnings(registry, log, version, start, end, logged)
        return record(outcome, version, registry=registry, live=live, settings=settings, progress=progress,
                      warnings=warnings)
    except BaseException as error:
        record_failure(registry, version, start, end, settings, error, run_id=progress.run_id,
                       recorded_verdict=progress.verdict)
        raise


def _stream_log(stack: ExitStack, settings: ThermostatSettings) -> PredictionStore | None:
    """With the window from the export, the SQL log the checks across the stream read, or None
    when it does not exist (those checks are then skipped, and said so; the window is still checked)."""
    try:
        return stack.enter_context(read_prediction_log(settings))
    except FileNotFoundError as missing:
        get_run_logger().warning("the sequential rule and the early warning are skipped: %s", missing)
        return None


@step_task(name="announce-unreadable-versions")  # not retried: one event per version per run
def announce_unreadable(unreadable: Sequence[UnreadableVersion], start: datetime, end: datetime, flow_name: str) -> None:
    """Log each version that cannot be checked, naming why, and emit its event (the ``version not
    checked`` alert, :mod:`flows.orchestration.alerts`)."""
    logger = get_run_logger()
    for version in unreadable:
        logger.error("not checked: %s", version.sentence())
        payload = UnreadableVersionEvent(problem=version.problem, aliases=version.aliases,
                                         window_start=start.isoformat(), window_end=end.isoformat(), flow=flow_name)
        emit(payload, version_resource(version.model_name, version.version, version.aliases[0]),
             context=f"{version.model_name} v{version.version}", if_unsent="only the run's failure says so")


def _unreadable_part(unreadable: Sequence[UnreadableVersion]) -> str:
    return (f"{len(unreadable)} serving version(s) could not be read, so were not checked: "
            + "; ".join(version.sentence() for version in unreadable))


def _failure(what: str, checked: int, failed: Sequence[tuple[RegisteredVersion, BaseException]],
             unreadable: Sequence[UnreadableVersion]) -> BaseException | None:
    """What a monitor run raises once every version was checked: None when nothing failed; one
    failed check's own error when that is all; else one error naming every failed check (with its
    error) and every version that could not be read (with why)."""
    if not failed and not unreadable:
        return None
    if len(failed) == 1 and not unreadable:
        return failed[0][1]
    parts = [f"{len(failed)} of {checked} checks of {what} failed: "
             + "; ".join(f"{v.model_name} v{v.version}: {type(e).__name__}: {e}" for v, e in failed)] if failed else []
    error = RuntimeError(". ".join([*parts, _unreadable_part(unreadable)] if unreadable else parts))
    error.__cause__ = failed[0][1] if failed else None
    return error


def _check_all(
    versions: Sequence[RegisteredVersion], *, registry: MlflowRegistry, start: datetime, end: datetime, live: bool,
    settings: ThermostatSettings, what: str, unreadable: Sequence[UnreadableVersion], flow_name: str,
) -> list[VersionCheck]:
    """Check ``versions`` one after the other, sharing the log's connections, the registry's client
    and one look for runs left open; a version whose check fails is recorded and the others are
    still checked, then the failures are raised (one as it is, several as one error naming ``what``)
    with the ``unreadable`` versions, which are announced first (:func:`announce_unreadable`)."""
    if unreadable:
        announce_unreadable(unreadable, start, end, flow_name)
    checks: list[VersionCheck] = []
    failed: list[tuple[RegisteredVersion, BaseException]] = []
    with ExitStack() as stack:
        try:
            source = stack.enter_context(open_window_source(settings))
            # The checks across the stream read every served row: the SQL log also when the window
            # comes from the export, which holds labelled rows only.
            log = source if source.scope.served_rows else _stream_log(stack, settings)
            if versions:
                close_left_running(registry, versions, settings)
            # Every version's K in one read, not one per check (the log remembers them; the look
            # for stale servers takes them too).
            logged = log.logged_versions() if versions and log is not None else None
        except Exception as error:  # nothing to read, or MLflow unreachable: every serving version's check failed
            for version in versions:
                record_failure(registry, version, start, end, settings, error)
            if not unreadable:
                raise
            raise RuntimeError(f"no check of {what} could run: {type(error).__name__}: {error}. "
                               + _unreadable_part(unreadable)) from error
        for version in versions:
            try:
                checks.append(_check_version(version, registry=registry, source=source, log=log, start=start,
                                             end=end, live=live, settings=settings, logged=logged))
            except Exception as error:  # recorded on the version's run; the other versions are still checked
                failed.append((version, error))
    problem = _failure(what, len(versions), failed, unreadable)
    if problem is not None:
        raise problem
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
    # Whatever fails leaves without the settings' credentials (the state message, the alert, the logs).
    with credentials_redacted(*settings.urls()):
        start, end = check_window(window_start, window_end, settings, datetime.now(UTC))
        registry = MlflowRegistry.from_settings(settings)
        versions, unreadable = find_serving_versions(registry, model_name, aliases)
        checks = _check_all(versions, registry=registry, start=start, end=end, live=window_end is None,
                            settings=settings, what=model_name, unreadable=unreadable, flow_name="monitor")
        # Ends the run with the checks' verdicts in its final state's message (and last log lines).
        return finish(checks_summary("monitor", checks, model_name), checks)


@io_task(name="find-fleet-versions")
def find_fleet_versions(
    registry: MlflowRegistry, models: list[str] | None
) -> tuple[list[RegisteredVersion], list[UnreadableVersion]]:
    """Every serving version of ``models`` (default: every registered model), read once; and what
    could not be read (a version whose registration tags are unreadable: not checked, named by
    :func:`_check_all`). Versions Thermostat did not register (neither a ``temperature`` nor a
    ``thermostat.registration`` tag: another team's model in the same registry) are not checked."""
    serving = registry.serving_aliases()
    if models is not None:
        missing = sorted(set(models) - set(serving))
        if missing:
            raise ValueError(f"model(s) {missing} are not registered (or have no alias); the registry's models "
                             f"with an alias are {sorted(serving)[:20]}")
        serving = {name: serving[name] for name in models}
    found: list[RegisteredVersion] = []
    unreadable: list[UnreadableVersion] = []
    for name, aliases in sorted(serving.items()):
        readable, unread = _read_serving(registry, name, serving_versions(aliases), thermostat_only=models is None)
        found += readable
        unreadable += unread
    get_run_logger().info("checking %d serving version(s) of %d model(s)", len(found),
                          len({v.model_name for v in found}))
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
    with credentials_redacted(*settings.urls()):
        start, end = check_window(None, None, settings, datetime.now(UTC))
        registry = MlflowRegistry.from_settings(settings)
        versions, unreadable = find_fleet_versions(registry, models)
        checks = _check_all(versions, registry=registry, start=start, end=end, live=True, settings=settings,
                            what="the fleet", unreadable=unreadable, flow_name="monitor-fleet")
        checked = len({check.model_name for check in checks})
        return finish(checks_summary("monitor-fleet", checks, f"{checked} model(s)"), checks)
