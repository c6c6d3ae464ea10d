"""The dashboard's data: what the MLflow store and the prediction log say, as typed records.

:func:`gather` reads — never writes, and only through the adapter's records
(:mod:`flows.records.stored`) — the registry (models, versions and their tags, aliases),
the monitoring experiment (one run per check; one run per refused refit,
:class:`flows.records.runs.RefitRecord`) and the prediction log (recent traffic per version and
the T it was served with), and returns one :class:`DashboardState`: every model with its
versions, checks, refits and alias moves, and the open alerts. Rendering
(:mod:`flows.dashboard.page`, :mod:`flows.dashboard.metrics`) is a pure function of it, and the
JSON API is its :meth:`DashboardState.to_dict`.

Where a fact comes from
-----------------------
* a check: its MLflow run, read by :class:`flows.records.runs.CheckRecord` (tags
  ``thermostat.*``, metrics ``ece``, ``nll``, ``p_value``, ``baseline_ece``,
  ``ece.group.<key>`` ... with the group of each hashed key in the tag
  ``thermostat.group_keys``; the x position is the window's end). Its thresholds are those of
  the drift policy it recorded; a check written before checks recorded it is drawn with this
  dashboard's settings (:attr:`Check.thresholds_recorded` False). A run ended ``FAILED``
  (:class:`flows.records.runs.CheckFailure`) is a failed check: verdict ``failed`` and its
  error; a run without a verdict is a check still running (or one a crash left open, closed by
  the version's next check) and is not shown;
* an alias move: a registration names the alias it was made for and the version that held it
  (tags ``thermostat.alias``, ``thermostat.alias_previous_version``), at the version's
  creation time. MLflow keeps no history of aliases, so a move made by hand (a rollback) is
  not seen; the current holder always is;
* a refit that registered: the new version's ``refit_*`` tags; a refused refit: its
  ``RefitRecord`` run;
* a version's insufficient-data streak: the count the monitor keeps on it
  (:class:`flows.records.versions.MonitorState`), never a recount of the check runs;
* which alerts are open: the situations' table (:mod:`flows.records.situations`), which the
  alert automations are built from too;
* the T being served: the ``temperature`` column of the version's latest logged prediction.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from sqlalchemy.engine import make_url

from calibration import JsonResult

from flows.orchestration.runtime import prefect_ui_url
from flows.records.corrections import CorrectionProvenance
from flows.records.runs import CheckRecord, RefitRecord, run_subject
from flows.records.situations import DASHBOARD_SITUATIONS, Raised, ServingRecords, SituationKey, open_situations
from flows.records.stored import StoredRun, StoredVersion
from flows.records.versions import registered_by_thermostat, registered_version
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from monitoring import DEFAULT_POLICY, DriftPolicy, PredictionLog, mask_url, redact_credentials

__all__ = [
    "ALERT_KINDS",
    "drift_text",
    "REGISTRATION_DIAGRAM",
    "WINDOW_DIAGRAM",
    "Alert",
    "AliasMove",
    "AliasView",
    "Check",
    "DashboardState",
    "ModelState",
    "Refit",
    "Reliability",
    "ServedTraffic",
    "Thresholds",
    "VersionInfo",
    "alerts_for",
    "gather",
    "thresholds_of",
    "missing_store",
]

WINDOW_DIAGRAM: Final = "plots/reliability.png"
"""A check run's reliability diagram (the monitor draws it)."""
REGISTRATION_DIAGRAM: Final = "evidence/reliability_diagram.png"
"""A registration run's before/after reliability diagram on the evaluation part of the holdout."""
_REPORT_JSON = "check/report.json"
_GROUP_PREFIX = "ece.group."
# The times a record may hold: a check, a run or a version outside them is unreadable (a chart
# cannot place it; MLflow's start times are set by whoever writes the run).
_EARLIEST: Final = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST: Final = datetime(2200, 1, 1, tzinfo=UTC)

AlertKind = SituationKey
"""An alert's ``kind``: the key of its situation (:data:`flows.records.situations.DASHBOARD_SITUATIONS`)."""
ALERT_KINDS: Final = tuple(situation.key for situation in DASHBOARD_SITUATIONS)
"""The kinds the dashboard can raise, in its order."""


@dataclass(frozen=True, slots=True)
class Thresholds(JsonResult):
    """The limits of a drift policy drawn on the charts and named in the alerts: a check's (the
    policy it recorded), or the dashboard's settings' (for a check written before policies were
    recorded, and the page's header)."""

    ece_tolerance: float
    p_threshold: float
    min_window: int
    insufficient_data_streak: int
    undetermined_streak: int = DEFAULT_POLICY.undetermined_streak

    @classmethod
    def of(cls, policy: DriftPolicy) -> Thresholds:
        return cls(ece_tolerance=policy.ece_tolerance, p_threshold=policy.p_threshold, min_window=policy.min_window,
                   insufficient_data_streak=policy.insufficient_data_streak,
                   undetermined_streak=policy.undetermined_streak)


@dataclass(frozen=True, slots=True)
class Check(JsonResult):
    """One monitor check of one version (an MLflow run of the monitoring experiment); ``verdict``
    ``failed`` with its ``error`` when the check failed."""

    run_id: str
    model_name: str
    version: str
    aliases: tuple[str, ...]
    verdict: str
    window_start: datetime | None
    window_end: datetime
    ece: float | None
    nll: float | None
    p_value: float | None
    drift: bool
    refit_recommended: bool
    baseline_ece: float | None
    ece_excess: float | None
    labelled_rows: int | None
    accuracy: float | None
    temperature: float | None
    groups: Mapping[str, float]
    prefect_flow_run_id: str | None
    run_url: str | None
    prefect_url: str | None
    predicted_accuracy: float | None = None
    """The early warning's accuracy predicted from every served row's confidence (None: not measured)."""
    cusum: float | None = None
    """The sequential rule's larger side after the check, in standard deviations (alarm at 6)."""
    error: str | None = None
    """Why the check failed (verdict ``failed``); None for a check that reached its verdict."""
    thresholds: Thresholds | None = None
    """The limits of the policy the check decided with (None only in hand-made records: the page's stand in)."""
    thresholds_recorded: bool = True
    """False for a check written before policies were recorded: ``thresholds`` are the dashboard's settings."""
    insufficient_streak: int | None = None
    """The version's insufficient-data streak after this check, as the monitor counted it (None: not recorded)."""
    shift_kind: str | None = None
    """The check's shift diagnosis (label_shift, calibration_drift, ...); None: not diagnosed."""
    rows_to_decide: int | None = None
    """On an undetermined check, the labelled rows a window would need to decide (None: not said)."""
    tests_fired: tuple[str, ...] = ()
    """The tests that fired (``temperature``, ``ece``, ``group 'eu' temperature``, ``sequential``, ...)."""
    window_temperature: float | None = None
    """The window's NLL-optimal T, with its interval below (None: the temperature test did not run)."""
    window_temperature_low: float | None = None
    window_temperature_high: float | None = None
    temperature_z: float | None = None
    """The temperature test's z and p-value (None: not run)."""
    temperature_p_value: float | None = None


@dataclass(frozen=True, slots=True)
class ServedTraffic(JsonResult):
    """A version's predictions in the prediction log since ``since``."""

    since: datetime
    rows: int
    labelled_rows: int
    last_served_at: datetime | None
    served_temperature: float | None
    """T of the latest logged prediction: the T the serving wrapper applies now."""


@dataclass(frozen=True, slots=True)
class VersionInfo(JsonResult):
    """A registered version: its record's numbers, where it came from, its traffic."""

    model_name: str
    version: str
    aliases: tuple[str, ...]
    registered_at: datetime
    temperature: float | None
    temperature_low: float | None
    temperature_high: float | None
    baseline_ece: float | None
    baseline_nll: float | None
    gate_threshold: float | None
    registered_for_alias: str | None
    previous_alias_version: str | None
    refit_of: str | None
    registration_run_id: str | None
    registration_run_url: str | None
    served: ServedTraffic | None
    problem: str | None
    """Why the version's record could not be read (not registered by Thermostat); None if it could."""
    insufficient_streak: int = 0
    """Consecutive insufficient-data checks of the version, as the monitor keeps the count on it
    (tag ``thermostat.insufficient_data_streak``; checks of a version that never logged count too)."""
    derived_from: str | None = None
    """The version a prior correction (or its undo) was made from: same checkpoint and T, no
    registration diagram of its own (None: a fine-tune's or a refit's version)."""
    registered_by_thermostat: bool = True
    """Whether its tags say Thermostat registered it (:func:`flows.records.versions.registered_by_thermostat`):
    another tool's version is shown, with its ``problem``, and never alerted on."""


@dataclass(frozen=True, slots=True)
class Refit(JsonResult):
    """A refit: ``registered`` (a new version) or ``failed`` (refused or not verified)."""

    at: datetime
    model_name: str
    parent_version: str
    alias: str
    status: str
    new_version: str | None
    step: str | None
    reason: str
    escalation: str | None
    metrics: Mapping[str, float]
    run_id: str | None
    run_url: str | None
    prefect_flow_run_id: str | None
    prefect_url: str | None


@dataclass(frozen=True, slots=True)
class AliasMove(JsonResult):
    """An alias put on a version by a registration (post-finetune or refit)."""

    at: datetime
    model_name: str
    alias: str
    version: str
    previous_version: str | None
    cause: str


@dataclass(frozen=True, slots=True)
class Reliability(JsonResult):
    """A reliability table (one row per bin) read from a check's ``check/report.json``."""

    n: int
    ece: float | None
    n_bins: int
    scheme: str
    bins: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class AliasView(JsonResult):
    """One serving alias of a model: who holds it, who held it (as seen by checks and
    registrations), the latest check's reliability and the registration's diagram."""

    alias: str
    version: str | None
    versions: tuple[str, ...]
    latest_check_run_id: str | None
    latest_reliability: Reliability | None
    registration_run_id: str | None
    registration_version: str | None = None
    """The version whose registration drew the diagram (a prior-corrected version shows the
    diagram of the version it derives from); None: ``version``."""


@dataclass(frozen=True, slots=True)
class ModelState(JsonResult):
    """Everything about one registered model, oldest first."""

    name: str
    aliases: Mapping[str, str]
    versions: tuple[VersionInfo, ...]
    checks: tuple[Check, ...]
    refits: tuple[Refit, ...]
    alias_moves: tuple[AliasMove, ...]
    alias_views: tuple[AliasView, ...]
    problem: str | None = None
    """Why the model could not be read (then it has nothing else); None if it could."""

    @classmethod
    def unreadable(cls, name: str, problem: str) -> ModelState:
        """A model shown by name only, with why it could not be read."""
        return cls(name=name, aliases={}, versions=(), checks=(), refits=(), alias_moves=(), alias_views=(),
                   problem=problem)

    def version(self, number: str) -> VersionInfo | None:
        return next((v for v in self.versions if v.version == number), None)

    def checks_of(self, *, alias: str | None = None, version: str | None = None) -> list[Check]:
        """Checks under ``alias`` (as tagged when checked) and/or of ``version``."""
        return [c for c in self.checks
                if (alias is None or alias in c.aliases) and (version is None or c.version == version)]

    def serving(self) -> dict[str, tuple[str, ...]]:
        """{version: aliases} of the versions an alias points at now."""
        found: dict[str, list[str]] = {}
        for alias, version in sorted(self.aliases.items(), key=lambda item: (item[0] != "champion", item[0])):
            found.setdefault(version, []).append(alias)
        return {version: tuple(names) for version, names in found.items()}


@dataclass(frozen=True, slots=True)
class Alert(JsonResult):
    """An open alert: one of the situations of :data:`flows.records.situations.DASHBOARD_SITUATIONS`
    on a serving version (``kind``), linked to the check or refit that raised it."""

    kind: AlertKind
    at: datetime
    model_name: str
    version: str
    alias: str
    title: str
    numbers: Mapping[str, float | int | str | None]
    run_id: str | None
    run_url: str | None
    prefect_flow_run_id: str | None
    prefect_url: str | None


@dataclass(frozen=True, slots=True)
class DashboardState(JsonResult):
    """What the dashboard shows, gathered at ``generated_at``."""

    generated_at: datetime
    tracking_uri: str
    prediction_log_url: str
    mlflow_ui_url: str | None
    prefect_ui_url: str | None
    thresholds: Thresholds
    models: tuple[ModelState, ...]
    alerts: tuple[Alert, ...]
    notes: tuple[str, ...] = field(default=())
    """What could not be read (e.g. the prediction log), in words."""

    def model(self, name: str) -> ModelState | None:
        return next((m for m in self.models if m.name == name), None)

    def artifacts(self) -> frozenset[tuple[str, str]]:
        """(run id, path) of every diagram the page may show: the only artifacts served."""
        found: set[tuple[str, str]] = set()
        for model in self.models:
            found |= {(c.run_id, WINDOW_DIAGRAM) for c in model.checks}
            found |= {(v.registration_run_id, REGISTRATION_DIAGRAM) for v in model.versions if v.registration_run_id}
        return frozenset(found)


# ----------------------------------------------------------------------------- reading


def missing_store(settings: ThermostatSettings) -> str | None:
    """Why there is nothing to read: a SQLite store that does not exist (reading would create
    it). None when the store is there or is a server."""
    uri = settings.resolved_tracking_uri()
    if not uri.startswith("sqlite:"):
        return None
    database = make_url(uri).database
    if database and database != ":memory:" and not Path(database).is_file():
        return (f"no MLflow store at {database}: run `thermostat demo` (or a post-finetune) first, or point "
                "THERMOSTAT_STATE_DIR / THERMOSTAT_TRACKING_URI at an existing one")
    return None


def _in_range(moment: datetime, what: str, written: object) -> datetime:
    if not _EARLIEST <= moment < _LATEST:
        raise ValueError(f"{what} {written} is not between {_EARLIEST:%Y-%m-%d} and {_LATEST:%Y-%m-%d}")
    return moment


def _millis(value: int | None, what: str) -> datetime:
    """The time of MLflow's milliseconds since the epoch; ValueError naming ``what`` outside the chartable years."""
    try:
        moment = datetime.fromtimestamp((value or 0) / 1000.0, tz=UTC)
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"{what} {value} ms is not a time") from None
    return _in_range(moment, what, f"{moment.isoformat()} ({value} ms)")


def _link(base: str | None, suffix: str) -> str | None:
    return None if base is None else f"{base}{suffix}"


def _run_url(mlflow_ui: str | None, run: StoredRun) -> str | None:
    return _link(mlflow_ui, f"/#/experiments/{run.experiment_id}/runs/{run.run_id}")


def _check(run: StoredRun, mlflow_ui: str | None, prefect_ui: str | None, settings: Thresholds) -> Check | None:
    """The check a run records (:class:`flows.records.runs.CheckRecord`); None when the run is not a
    check or has no verdict yet. Its thresholds are those of the policy it recorded; a check written
    before policies were recorded is drawn with ``settings`` (this dashboard's), and says so."""
    record = CheckRecord.from_run(run)
    if record is None or record.verdict is None:
        return None
    flow_run = record.prefect_flow_run_id
    n = record.metric("n")
    window_end = record.window_end
    upper, lower = record.metric("cusum_upper"), record.metric("cusum_lower")
    return Check(
        run_id=run.run_id, model_name=record.model_name, version=record.version, aliases=record.aliases,
        verdict=record.verdict,
        window_start=None if record.window_start is None else _in_range(record.window_start, "window start",
                                                                           record.window_start.isoformat()),
        window_end=(_millis(run.start_time_ms, "start time") if window_end is None
                    else _in_range(window_end, "window end", window_end.isoformat())),
        ece=record.metric("ece"), nll=record.metric("nll"), p_value=record.metric("p_value"),
        drift=record.verdict == "drift" or (record.failure is None and record.metric("drift") == 1.0),
        refit_recommended=record.refit_recommended, baseline_ece=record.metric("baseline_ece"),
        ece_excess=record.metric("ece_excess"), labelled_rows=None if n is None else int(n),
        accuracy=record.metric("accuracy"), temperature=record.temperature, groups=record.group_ece(),
        prefect_flow_run_id=flow_run, run_url=_run_url(mlflow_ui, run),
        prefect_url=None if flow_run is None else _link(prefect_ui, f"/runs/flow-run/{flow_run}"),
        predicted_accuracy=record.metric("predicted_accuracy"),
        cusum=max((value for value in (upper, lower) if value is not None), default=None),
        error=None if record.failure is None else record.failure.error,
        # A check written before the policy was recorded: the dashboard's own settings stand in.
        thresholds=settings if record.policy is None else Thresholds.of(record.policy),
        thresholds_recorded=record.policy is not None, insufficient_streak=record.insufficient_streak,
        shift_kind=record.shift_kind, rows_to_decide=_whole(record.metric("rows_to_decide")),
        tests_fired=record.tests_fired, window_temperature=record.metric("window_temperature"),
        window_temperature_low=record.metric("window_temperature_low"),
        window_temperature_high=record.metric("window_temperature_high"),
        temperature_z=record.metric("temperature_z"), temperature_p_value=record.metric("temperature_p_value"),
    )


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def _refused_refit(run: StoredRun, mlflow_ui: str | None, prefect_ui: str | None) -> Refit | None:
    record = RefitRecord.from_run(run)
    if record is None:
        return None
    flow_run = record.prefect_flow_run_id
    return Refit(
        at=_millis(run.start_time_ms, "start time"), model_name=record.model_name,
        parent_version=record.parent_version, alias=record.alias, status=record.status, new_version=record.new_version,
        step=record.step, reason=record.reason, escalation=record.escalation, metrics=dict(record.metrics),
        run_id=run.run_id, run_url=_run_url(mlflow_ui, run), prefect_flow_run_id=flow_run,
        prefect_url=None if flow_run is None else _link(prefect_ui, f"/runs/flow-run/{flow_run}"),
    )


def _served_traffic(
    log: PredictionLog | None, model_name: str, version: str, since: datetime
) -> ServedTraffic | None:
    if log is None:
        return None
    tally = log.served_tally(model_name, version, since)
    return ServedTraffic(since=since, rows=tally.rows, labelled_rows=tally.labelled_rows,
                         last_served_at=tally.last_served_at, served_temperature=tally.last_temperature)


def _open_prediction_log(settings: ThermostatSettings, notes: list[str]) -> PredictionLog | None:
    url = settings.resolved_prediction_log_url()
    try:
        log = PredictionLog.existing(url)  # a SQLite file that is not there is not created
        if log.table.name in log.missing_tables():
            notes.append(f"the prediction log {mask_url(url)} has no table {log.table.name!r} yet")
            log.dispose()
            return None
    except FileNotFoundError:
        notes.append(f"no prediction log at {make_url(url).database}: served traffic is not shown")
        return None
    except Exception as error:  # noqa: BLE001 - the page shows the rest and says why this is missing
        notes.append(f"the prediction log {mask_url(url)} cannot be read: {_described(error)}")
        return None
    return log


def _diagram_version(info: VersionInfo | None, versions: Sequence[VersionInfo]) -> VersionInfo | None:
    """The version whose registration run holds ``info``'s diagram: itself, or for a prior
    correction (or its undo) the first version up its chain that was fitted (None: not found)."""
    by_number = {v.version: v for v in versions}
    seen: set[str] = set()
    while info is not None and info.derived_from is not None and info.version not in seen:
        seen.add(info.version)
        info = by_number.get(info.derived_from)
    return info


def _version_info(
    model_name: str, version: StoredVersion, aliases: Mapping[str, str], registry: MlflowRegistry,
    mlflow_ui: str | None, served: ServedTraffic | None,
) -> VersionInfo:
    """A version as its tags say (:func:`flows.records.versions.registered_version`); one whose
    record cannot be read is shown with its ``problem`` and no numbers."""
    number = version.version
    names = tuple(sorted((a for a, v in aliases.items() if v == number), key=lambda a: (a != "champion", a)))
    try:
        registered = registered_version(model_name, number, version.tags, names)
        problem = None
    except ValueError as error:
        registered, problem = None, str(error)
    record = None if registered is None else registered.record
    run_id = version.run_id
    url = None
    if run_id is not None and mlflow_ui is not None:
        try:
            url = registry.run_url(run_id, mlflow_ui)
        except Exception:  # noqa: BLE001 - a link is a convenience; the run id is still shown
            url = None
    moved = None if registered is None else registered.registered_for
    interval = None if record is None else record.temperature_interval
    return VersionInfo(
        model_name=model_name, version=number, aliases=names,
        registered_at=_millis(version.creation_time_ms, "creation time"),
        temperature=None if record is None else record.temperature,
        temperature_low=None if interval is None else interval[0],
        temperature_high=None if interval is None else interval[1],
        baseline_ece=None if registered is None else registered.baseline_ece,
        baseline_nll=None if record is None else record.holdout_nll_after,
        gate_threshold=None if record is None else record.gate_threshold,
        registered_for_alias=None if moved is None else moved.alias,
        previous_alias_version=None if moved is None else moved.previous_version,
        refit_of=None if record is None or record.refit is None else record.refit.parent_version,
        registration_run_id=run_id, registration_run_url=url, served=served, problem=problem,
        insufficient_streak=0 if registered is None else registered.monitor.insufficient_streak,
        derived_from=None if (made := CorrectionProvenance.from_tags(version.tags)) is None else made.parent_version,
        registered_by_thermostat=registered_by_thermostat(version.tags),
    )


def _number(value: object, what: str, *, low: float = -math.inf, high: float = math.inf) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not low <= value <= high):
        raise ValueError(f"{what} {value!r} is not a finite number in [{low:g}, {high:g}]")
    return float(value)


def _count(value: object, what: str) -> int:
    number = _number(value, what, low=0.0)
    if number != int(number):
        raise ValueError(f"{what} {value!r} is not a whole number")
    return int(number)


def _reliability_bin(row: object, index: int) -> dict[str, Any]:
    """One row of a reliability table, each number checked (the chart reads these keys)."""
    if not isinstance(row, Mapping):
        raise ValueError(f"reliability bin {index} is {row!r}, not an object")
    where = f"reliability bin {index}:"
    checked: dict[str, Any] = {key: _number(row.get(key), f"{where} {key}", low=0.0, high=1.0)
                               for key in ("lower", "upper")}
    for key in ("accuracy", "mean_confidence"):
        checked[key] = None if row.get(key) is None else _number(row[key], f"{where} {key}", low=0.0, high=1.0)
    checked["count"] = _count(row.get("count"), f"{where} count")
    checked["sparse"] = bool(row.get("sparse"))
    return {str(key): value for key, value in row.items()} | checked


def _reliability(raw: bytes) -> Reliability:
    """A check's ``check/report.json``; ValueError saying what in it cannot be read."""
    try:
        payload = json.loads(raw)
    except ValueError as error:
        raise ValueError(f"not JSON ({error})") from None
    if not isinstance(payload, Mapping) or not isinstance(payload.get("reliability"), list):
        raise ValueError("it has no list 'reliability'")
    bins = tuple(_reliability_bin(row, index) for index, row in enumerate(payload["reliability"]))
    ece = payload.get("ece")
    return Reliability(
        n=_count(payload.get("n", 0), "n"), ece=None if ece is None else _number(ece, "ece", low=0.0, high=1.0),
        n_bins=_count(payload.get("n_bins", len(bins)), "n_bins"), scheme=str(payload.get("scheme", "")), bins=bins,
    )


def _latest_reliability(registry: MlflowRegistry, run_id: str, notes: list[str]) -> Reliability | None:
    try:
        raw = registry.read_artifact(run_id, _REPORT_JSON)
        return None if raw is None else _reliability(raw)
    except Exception as error:  # noqa: BLE001 - this chart is left out and said so; the rest of the page stands
        notes.append(f"the reliability table of check run {run_id} ({_REPORT_JSON}) cannot be read: "
                     f"{_described(error)}")
        return None


def _alias_views(
    registry: MlflowRegistry, aliases: Mapping[str, str], checks: Sequence[Check], versions: Sequence[VersionInfo],
    moves: Sequence[AliasMove], notes: list[str],
) -> tuple[AliasView, ...]:
    seen = {a for c in checks for a in c.aliases} | set(aliases) | {m.alias for m in moves}
    views = []
    for alias in sorted(seen, key=lambda a: (a not in aliases, a != "champion", a)):
        ordered: list[str] = []
        events = sorted([(m.at, m.version) for m in moves if m.alias == alias]
                        + [(c.window_end, c.version) for c in checks if alias in c.aliases])
        for _, number in events:
            if number not in ordered:
                ordered.append(number)
        holder = aliases.get(alias)
        if holder is not None and holder not in ordered:
            ordered.append(holder)
        under = [c for c in checks if alias in c.aliases]
        latest = under[-1] if under else None
        holder_info = _diagram_version(next((v for v in versions if v.version == holder), None), versions)
        views.append(AliasView(
            alias=alias, version=holder, versions=tuple(ordered),
            latest_check_run_id=None if latest is None else latest.run_id,
            latest_reliability=None if latest is None else _latest_reliability(registry, latest.run_id, notes),
            registration_run_id=None if holder_info is None else holder_info.registration_run_id,
            registration_version=None if holder_info is None else holder_info.version,
        ))
    return tuple(views)


def _moves_and_refits(model_name: str, versions: Sequence[VersionInfo]) -> tuple[list[AliasMove], list[Refit]]:
    moves, refits = [], []
    for v in versions:
        if v.registered_for_alias:
            moves.append(AliasMove(at=v.registered_at, model_name=model_name, alias=v.registered_for_alias,
                                   version=v.version, previous_version=v.previous_alias_version,
                                   cause="refit" if v.refit_of else "post-finetune"))
        if v.refit_of:
            refits.append(Refit(
                at=v.registered_at, model_name=model_name, parent_version=v.refit_of,
                alias=v.registered_for_alias or "", status="registered", new_version=v.version, step=None,
                reason=f"version {v.version} registered: T = {v.temperature}", escalation=None, metrics={},
                run_id=v.registration_run_id, run_url=v.registration_run_url, prefect_flow_run_id=None,
                prefect_url=None,
            ))
    return moves, refits


def _described(error: Exception) -> str:
    """An error as a note says it, on one line: our own refusals (ValueError) by their message, others
    with their type."""
    text = str(error) if type(error) is ValueError else f"{type(error).__name__}: {error}"
    return " ".join(text.split())


def _monitoring_runs(
    registry: MlflowRegistry, experiment: str, mlflow_ui: str | None, prefect_ui: str | None, settings: Thresholds,
    notes: list[str],
) -> tuple[dict[str, list[Check]], dict[str, list[Refit]]]:
    """Check runs and refused refits per model, oldest first; a run that cannot be read is named in
    ``notes``. ``settings``: the thresholds of checks written before policies were recorded."""
    checks: dict[str, list[Check]] = {}
    refused: dict[str, list[Refit]] = {}
    for run in reversed(registry.runs(experiment)):  # oldest first
        try:
            check = _check(run, mlflow_ui, prefect_ui, settings)
            refit = None if check is not None else _refused_refit(run, mlflow_ui, prefect_ui)
        except Exception as error:  # noqa: BLE001 - one unreadable run is named; the others are shown
            subject = run_subject(run)
            of = "" if subject is None else f" ({subject})"
            notes.append(f"run {run.run_id}{of} of experiment {experiment!r} cannot be read and is not shown: "
                         f"{_described(error)}")
            continue
        if check is not None:
            checks.setdefault(check.model_name, []).append(check)
        elif refit is not None:
            refused.setdefault(refit.model_name, []).append(refit)
    return checks, refused


def gather(
    settings: ThermostatSettings, *, registry: MlflowRegistry | None = None, now: datetime | None = None
) -> DashboardState:
    """Read the dashboard's state from the store and the prediction log named by ``settings``.

    Read-only: no experiment, run, table or tag is created. Check runs are read newest first,
    at most 5,000 (the chart's history). One record that cannot be read — a run, a version, a
    check's report, a model (e.g. a name MLflow's search filter cannot quote) — is left out
    (a model is kept by name with its ``problem``) and named in ``notes``; the rest is read.
    No note or problem shows the settings' credentials.
    """
    now = now or datetime.now(UTC)
    if registry is None:
        registry = MlflowRegistry(settings.resolved_tracking_uri(), registry_uri=settings.resolved_registry_uri(),
                                  experiment_name=settings.experiment_name)
    hidden = (settings.resolved_tracking_uri(), settings.resolved_registry_uri(), settings.resolved_prediction_log_url())
    mlflow_ui, prefect_ui = settings.resolved_mlflow_ui_url(), prefect_ui_url(settings)
    notes: list[str] = []
    thresholds = Thresholds.of(settings.drift)
    checks, refused = _monitoring_runs(registry, settings.monitoring_experiment_name, mlflow_ui, prefect_ui,
                                       thresholds, notes)
    traffic = _RecentTraffic(_open_prediction_log(settings, notes), now - settings.monitor_window, notes)
    models = []
    try:
        for name in registry.registered_model_names():
            try:
                models.append(_model_state(registry, name, checks.get(name, []), refused.get(name, []), traffic,
                                           mlflow_ui, notes))
            except Exception as error:  # noqa: BLE001 - the model is shown as unreadable; the others are shown
                problem = redact_credentials(_described(error), *hidden)
                notes.append(f"model {name!r} cannot be read: {problem}")
                models.append(ModelState.unreadable(name, problem))
    finally:
        traffic.dispose()
    alerts = []
    for model in models:
        try:
            alerts += alerts_for(model, thresholds)
        except Exception as error:  # noqa: BLE001 - this model's alerts are missing and said so
            notes.append(f"the alerts of model {model.name!r} cannot be computed: {_described(error)}")
    return DashboardState(
        generated_at=now, tracking_uri=mask_url(settings.resolved_tracking_uri()),
        prediction_log_url=mask_url(settings.resolved_prediction_log_url()), mlflow_ui_url=mlflow_ui,
        prefect_ui_url=prefect_ui, thresholds=thresholds, models=tuple(models),
        alerts=tuple(sorted(alerts, key=lambda a: a.at, reverse=True)),
        notes=tuple(redact_credentials(note, *hidden) for note in notes),
    )


class _RecentTraffic:
    """Each version's traffic since ``since`` in the prediction log (None: no log to read).

    A log that fails a read is named in ``notes`` and read no more: the versions after it are
    shown without traffic.
    """

    def __init__(self, log: PredictionLog | None, since: datetime, notes: list[str]) -> None:
        self._log, self._since, self._notes = log, since, notes

    def of(self, model_name: str, version: str) -> ServedTraffic | None:
        try:
            return _served_traffic(self._log, model_name, version, self._since)
        except Exception as error:  # noqa: BLE001 - shown as a note; the rest of the page stands
            self._notes.append(f"the prediction log cannot be read: {_described(error)}")
            self._log = None
            return None

    def dispose(self) -> None:
        if self._log is not None:
            self._log.dispose()


def _model_state(
    registry: MlflowRegistry, name: str, checks: Sequence[Check], refused: Sequence[Refit], traffic: _RecentTraffic,
    mlflow_ui: str | None, notes: list[str],
) -> ModelState:
    """One model: its versions (one that cannot be read is named in ``notes`` and left out), its
    ``checks`` and refits (``refused`` ones and those its versions record) in time order."""
    aliases = registry.aliases(name)
    versions = []
    for version in sorted(registry.versions(name), key=lambda v: int(v.version)):
        served = traffic.of(name, version.version)
        try:
            versions.append(_version_info(name, version, aliases, registry, mlflow_ui, served))
        except Exception as error:  # noqa: BLE001 - one unreadable version is named; the others shown
            notes.append(f"version {version.version} of model {name!r} cannot be read and is not shown: "
                         f"{_described(error)}")
    own_checks = sorted(checks, key=lambda c: c.window_end)
    moves, refits = _moves_and_refits(name, versions)
    return ModelState(
        name=name, aliases=aliases, versions=tuple(versions), checks=tuple(own_checks),
        refits=tuple(sorted(refits + list(refused), key=lambda r: r.at)),
        alias_moves=tuple(sorted(moves, key=lambda m: m.at)),
        alias_views=_alias_views(registry, aliases, own_checks, versions, moves, notes),
    )


# ------------------------------------------------------------------------------ alerts


def thresholds_of(check: Check | None, settings: Thresholds) -> Thresholds:
    """The thresholds ``check`` decided with; ``settings`` (this dashboard's) when there is no check."""
    return settings if check is None or check.thresholds is None else check.thresholds


def _numbers(check: Check, thresholds: Thresholds) -> dict[str, float | int | str | None]:
    return {"ece": check.ece, "baseline_ece": check.baseline_ece, "ece_excess": check.ece_excess,
            "ece_tolerance": thresholds.ece_tolerance, "p_value": check.p_value,
            "p_threshold": thresholds.p_threshold, "nll": check.nll, "labelled_rows": check.labelled_rows,
            "temperature": check.temperature}


def _trailing_insufficient(checks: Iterable[Check]) -> list[Check]:
    """The trailing run of insufficient_data checks (oldest first): when a streak began, not how long it is."""
    trailing: list[Check] = []
    for check in checks:
        trailing = trailing + [check] if check.verdict == "insufficient_data" else []
    return trailing


@dataclass(frozen=True, slots=True)
class _Serving:
    """The serving version an alert is about."""

    model_name: str
    version: str
    alias: str

    def alert(self, kind: AlertKind, at: datetime, title: str, numbers: Mapping[str, float | int | str | None],
              source: Check | Refit | None, *, alias: str | None = None) -> Alert:
        """The alert, linked to the check or refit that raised it (``source``; None: no run)."""
        return Alert(kind=kind, at=at, model_name=self.model_name, version=self.version, alias=alias or self.alias,
                     title=title, numbers=numbers, run_id=None if source is None else source.run_id,
                     run_url=None if source is None else source.run_url,
                     prefect_flow_run_id=None if source is None else source.prefect_flow_run_id,
                     prefect_url=None if source is None else source.prefect_url)


def _check_failed(last: Check, where: _Serving) -> Alert:
    return where.alert("check_failed", last.window_end, f"check failed, no verdict: {last.error or 'the check failed'}",
                       {"window_start": None if last.window_start is None else last.window_start.isoformat(),
                        "window_end": last.window_end.isoformat()}, last)


def _drift(last: Check, limits: Thresholds, where: _Serving) -> Alert:
    return where.alert("drift", last.window_end, "calibration drift: " + drift_text(last, limits),
                       _numbers(last, limits), last)


def drift_text(check: Check, limits: Thresholds) -> str:
    """What fired on a drifted check, each with its statistic and p-value, and the window's T with
    its interval next to the registered T; a test that did not fire is not named.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> check = Check(run_id="r", model_name="m", version="2", aliases=("champion",), verdict="drift",
    ...     window_start=None, window_end=datetime(2026, 1, 1, tzinfo=UTC), ece=0.0571, nll=0.3, p_value=0.0238,
    ...     drift=True, refit_recommended=True, baseline_ece=0.0172, ece_excess=0.0399, labelled_rows=2000,
    ...     accuracy=0.9, temperature=1.21, groups={}, prefect_flow_run_id=None, run_url=None, prefect_url=None,
    ...     tests_fired=("temperature",), window_temperature=1.391, window_temperature_low=1.30,
    ...     window_temperature_high=1.49, temperature_z=4.1, temperature_p_value=0.0004)
    >>> print(drift_text(check, Thresholds(0.02, 0.01, 500, 3)))
    fired: temperature (z = +4.10, p = 0.0004); window T 1.391 [1.3, 1.49] vs the registered T 1.21
    """
    parts = []
    # A check recorded without its tests: its ECE numbers, said to be no more than that.
    for name in check.tests_fired or ("ece",):
        if name == "temperature":
            parts.append(f"temperature (z = {_shown(check.temperature_z, '+.2f')}, "
                         f"p = {_shown(check.temperature_p_value, '.2g')})")
        elif name == "ece":
            excess = "n/a" if check.ece_excess is None else f"{check.ece_excess:+.4f}"
            parts.append(f"ece (ECE {_shown(check.ece)} vs baseline {_shown(check.baseline_ece)}, excess {excess}, "
                         f"tolerance {limits.ece_tolerance:g}; p = {_shown(check.p_value, '.3g')})")
        else:
            parts.append(name + (f" (CUSUM {check.cusum:.2f} sd)" if name == "sequential" and check.cusum else ""))
    window_t = ("" if check.window_temperature is None else
                f"; window T {check.window_temperature:.4g} [{_shown(check.window_temperature_low, '.4g')}, "
                f"{_shown(check.window_temperature_high, '.4g')}] vs the registered T {_shown(check.temperature, '.4g')}")
    head = "fired: " if check.tests_fired else "which test fired was not recorded; "
    return head + ", ".join(parts) + window_t


def _label_shift(last: Check, where: _Serving) -> Alert:
    return where.alert("label_shift", last.window_end,
                       "label shift: the class mix of the traffic moved, not the calibration (no temperature refit; "
                       "a prior correction fits it)", {"shift_kind": last.shift_kind, "labelled_rows": last.labelled_rows,
                                                       "temperature": last.temperature}, last)


def _refused(refit: Refit, where: _Serving) -> Alert:
    return where.alert("refit_refused", refit.at, f"refit refused at step {refit.step or '?'}: {refit.reason}"
                       + (f" — ESCALATION: {refit.escalation}" if refit.escalation else ""),
                       {"step": refit.step, "escalation": refit.escalation} | dict(refit.metrics), refit,
                       alias=refit.alias)


def _no_labels(last: Check | None, streak: int, limits: Thresholds, own: Sequence[Check], info: VersionInfo | None,
               where: _Serving) -> Alert:
    """The insufficient-data alert: the monitor's ``streak``; the latest check's details, when the
    version has checks (a version that never logged a prediction has none: since its registration)."""
    trailing = _trailing_insufficient(own)
    since = trailing[0].window_end if trailing else (None if info is None else info.registered_at)
    if last is None:
        title = (f"{streak} consecutive checks found no labelled row of this version"
                 + ("" if since is None else f" (no check run since its registration at "
                                             f"{since.isoformat(timespec='seconds')})"))
    else:
        title = (f"{streak} consecutive checks with too few labelled rows (last: "
                 f"{last.labelled_rows if last.labelled_rows is not None else '?'} < {limits.min_window})"
                 + ("" if since is None else f" since {since.isoformat(timespec='seconds')}")
                 + ("" if last.predicted_accuracy is None else
                    f"; accuracy predicted from the served confidences: {last.predicted_accuracy:.3f}"))
    at = last.window_end if last is not None else since or datetime.now(UTC)
    return where.alert("insufficient_data", at, title,
                       {"streak": streak, "labelled_rows": None if last is None else last.labelled_rows,
                        "min_window": limits.min_window, "first_at": None if since is None else since.isoformat(),
                        "predicted_accuracy": None if last is None else last.predicted_accuracy}, last)


def _unreadable(info: VersionInfo, checks: Sequence[Check], where: _Serving) -> Alert:
    """A serving version whose record cannot be read: not checked since; its last check (if any) linked."""
    last = checks[-1] if checks else None
    return where.alert("unreadable_version", last.window_end if last is not None else info.registered_at,
                       f"not checked: its registration record cannot be read ({info.problem})",
                       {"problem": info.problem}, last)


def _alert(raised: Raised[Check, Refit], records: ServingRecords[Check, Refit], info: VersionInfo | None,
           settings: Thresholds, where: _Serving) -> Alert:
    key = raised.situation.key
    if raised.refit is not None:
        return _refused(raised.refit, where)
    if key == "unreadable_version" and info is not None:
        return _unreadable(info, records.checks, where)
    if key == "insufficient_data":
        latest = records.checks[-1] if records.checks else None
        return _no_labels(raised.check, records.insufficient_streak, thresholds_of(latest, settings), records.checks,
                          info, where)
    assert raised.check is not None  # drift and a failed check are raised by a check
    if key == "drift":
        return _drift(raised.check, thresholds_of(raised.check, settings), where)
    if key == "label_shift":
        return _label_shift(raised.check, where)
    if key == "undetermined":
        return _undetermined(raised.check, records.undetermined_length, where)
    return _check_failed(raised.check, where)


def _undetermined(last: Check, streak: int, where: _Serving) -> Alert:
    """A run of undetermined checks: the latest window's T next to the registered T, and what would decide."""
    window_t = ("" if last.window_temperature is None else
                f"; window T {last.window_temperature:.4g} [{_shown(last.window_temperature_low, '.4g')}, "
                f"{_shown(last.window_temperature_high, '.4g')}] vs the registered T {_shown(last.temperature, '.4g')}")
    decide = (f"about {last.rows_to_decide:,} labelled rows a window would decide" if last.rows_to_decide is not None
              else "no window size decides: the reference is too small for the margin")
    return where.alert("undetermined", last.window_end,
                       f"undetermined: {streak} or more checks in a row saw no drift but could not establish "
                       f"calibration (last: n = {last.labelled_rows}{window_t}); {decide}",
                       {"streak": streak, "labelled_rows": last.labelled_rows, "rows_to_decide": last.rows_to_decide,
                        "window_temperature": last.window_temperature, "temperature": last.temperature}, last)


def alerts_for(model: ModelState, thresholds: Thresholds) -> list[Alert]:
    """The open alerts of one model, for the versions an alias points at now.

    Which situations are open is decided by the situations' table
    (:data:`flows.records.situations.DASHBOARD_SITUATIONS`), the one the alert automations are
    built from:

    * ``drift``: the version's latest check says drift (a version no alias points at any
      more was replaced — by a refit or by hand — and its drift is history);
    * ``label_shift``: the version's latest check diagnosed a label shift;
    * ``refit_refused``: a refit of the version registered nothing, and no check of the
      version since says calibrated (the version still serves a miscalibrated scale);
    * ``insufficient_data``: the streak of insufficient-data checks the monitor keeps on the
      version (:attr:`VersionInfo.insufficient_streak`, also counting checks of a version that
      never logged a prediction) reached the streak length of its latest check's policy;
    * ``undetermined``: the version's latest checks, as many in a row as its latest check's
      policy's ``undetermined_streak``, saw no drift but could not establish calibration;
    * ``check_failed``: the version's latest check failed (no verdict: its last good one is
      not shown as current);
    * ``unreadable_version``: the version Thermostat registered has a registration record that
      cannot be read from its tags (:attr:`VersionInfo.problem`): the monitor cannot check it
      (another tool's version is shown, not alerted on).

    Each check's numbers are held to the thresholds of the policy it recorded; ``thresholds``
    (this dashboard's settings) stand in for checks written before policies were recorded, and
    for a version without checks.
    """
    found: list[Alert] = []
    for version, aliases in model.serving().items():
        own = model.checks_of(version=version)
        info = model.version(version)
        records: ServingRecords[Check, Refit] = ServingRecords(
            aliases=aliases, checks=own, refits=[r for r in model.refits if r.parent_version == version],
            insufficient_streak=0 if info is None else info.insufficient_streak,
            streak_length=thresholds_of(own[-1] if own else None, thresholds).insufficient_data_streak,
            problem=None if info is None or not info.registered_by_thermostat else info.problem,
            undetermined_length=thresholds_of(own[-1] if own else None, thresholds).undetermined_streak,
        )
        where = _Serving(model.name, version, ",".join(aliases))
        found += [_alert(raised, records, info, thresholds, where) for raised in open_situations(records)]
    return found


def _shown(value: float | None, form: str = ".4f") -> str:
    return "n/a" if value is None else format(value, form)
