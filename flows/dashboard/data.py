"""The dashboard's data: what the MLflow store and the prediction log say, as typed records.

:func:`gather` reads — never writes — the registry (models, versions and their tags, aliases),
the monitoring experiment (one run per check; one run per refused refit,
:class:`flows.run_records.RefitRecord`) and the prediction log (recent traffic per version and
the T it was served with), and returns one :class:`DashboardState`: every model with its
versions, checks, refits and alias moves, and the open alerts. Rendering
(:mod:`flows.dashboard.page`, :mod:`flows.dashboard.metrics`) is a pure function of it, and the
JSON API is its :meth:`DashboardState.to_dict`.

Where a fact comes from
-----------------------
* a check: its MLflow run (tags ``thermostat.*``, metrics ``ece``, ``nll``, ``p_value``,
  ``baseline_ece``, ``ece.group.<key>`` ... with the group of each hashed key in the tag
  ``thermostat.group_keys``; the x position is the window's end). A run ended ``FAILED``
  (:class:`flows.run_records.CheckFailure`) is a failed check: verdict ``failed`` and its
  error; a run without a verdict is a check still running (or one a crash left open, closed by
  the version's next check) and is not shown;
* an alias move: a registration names the alias it was made for and the version that held it
  (tags ``thermostat.alias``, ``thermostat.alias_previous_version``), at the version's
  creation time. MLflow keeps no history of aliases, so a move made by hand (a rollback) is
  not seen; the current holder always is;
* a refit that registered: the new version's ``refit_*`` tags; a refused refit: its
  ``RefitRecord`` run;
* the T being served: the ``temperature`` column of the version's latest logged prediction.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from mlflow.entities import Run
from mlflow.entities.model_registry import ModelVersion
from sqlalchemy import func, inspect, select
from sqlalchemy.engine import make_url

from flows.registry import MlflowRegistry
from flows.run_records import (
    KIND_TAG,
    PREFECT_FLOW_RUN_TAG,
    REFIT_KIND,
    VERDICT_TAG,
    CheckFailure,
    GroupMetricKeys,
    RefitRecord,
)
from flows.settings import ThermostatSettings
from flows.versions import registered_version
from monitoring import PredictionLog, mask_url, redact_credentials

__all__ = [
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
    "missing_store",
    "prefect_ui_url",
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

AlertKind = Literal["drift", "refit_refused", "insufficient_data", "check_failed"]


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _json_value(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value


class _Serialisable:
    """``to_dict()``: a JSON-safe dict of a frozen dataclass (times ISO 8601, NaN as None)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        value = _json_value(self)
        assert isinstance(value, dict)
        return value


@dataclass(frozen=True, slots=True)
class Thresholds(_Serialisable):
    """The limits the monitor decides with (from the settings), drawn on the charts."""

    ece_tolerance: float
    p_threshold: float
    min_window: int
    insufficient_data_streak: int


@dataclass(frozen=True, slots=True)
class Check(_Serialisable):
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


@dataclass(frozen=True, slots=True)
class ServedTraffic(_Serialisable):
    """A version's predictions in the prediction log since ``since``."""

    since: datetime
    rows: int
    labelled_rows: int
    last_served_at: datetime | None
    served_temperature: float | None
    """T of the latest logged prediction: the T the serving wrapper applies now."""


@dataclass(frozen=True, slots=True)
class VersionInfo(_Serialisable):
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


@dataclass(frozen=True, slots=True)
class Refit(_Serialisable):
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
class AliasMove(_Serialisable):
    """An alias put on a version by a registration (post-finetune or refit)."""

    at: datetime
    model_name: str
    alias: str
    version: str
    previous_version: str | None
    cause: str


@dataclass(frozen=True, slots=True)
class Reliability(_Serialisable):
    """A reliability table (one row per bin) read from a check's ``check/report.json``."""

    n: int
    ece: float | None
    n_bins: int
    scheme: str
    bins: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class AliasView(_Serialisable):
    """One serving alias of a model: who holds it, who held it (as seen by checks and
    registrations), the latest check's reliability and the registration's diagram."""

    alias: str
    version: str | None
    versions: tuple[str, ...]
    latest_check_run_id: str | None
    latest_reliability: Reliability | None
    registration_run_id: str | None


@dataclass(frozen=True, slots=True)
class ModelState(_Serialisable):
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
class Alert(_Serialisable):
    """An open alert: an open drift, a refused refit, or a long insufficient_data streak."""

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
class DashboardState(_Serialisable):
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


def prefect_ui_url(settings: ThermostatSettings) -> str | None:
    """Base URL of the Prefect UI for flow-run links: the setting, else Prefect's own
    ``PREFECT_UI_URL`` (derived from ``PREFECT_API_URL`` when that is set)."""
    if settings.prefect_ui_url:
        return mask_url(settings.prefect_ui_url.rstrip("/"))
    from prefect.settings import get_current_settings

    found = get_current_settings().ui_url
    return None if not found else mask_url(str(found).rstrip("/"))


def _in_range(moment: datetime, what: str, written: object) -> datetime:
    if not _EARLIEST <= moment < _LATEST:
        raise ValueError(f"{what} {written} is not between {_EARLIEST:%Y-%m-%d} and {_LATEST:%Y-%m-%d}")
    return moment


def _time(text: str | None, what: str) -> datetime | None:
    """The time an ISO 8601 tag holds (UTC); None when there is none; ValueError naming ``what``
    when it is not a time or lies outside the years a chart can show."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"{what} {text!r} is not an ISO 8601 time") from None
    return _in_range(moment, what, repr(text))


def _millis(value: int | None, what: str) -> datetime:
    """The time of MLflow's milliseconds since the epoch; ValueError naming ``what`` outside the chartable years."""
    try:
        moment = datetime.fromtimestamp((value or 0) / 1000.0, tz=UTC)
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"{what} {value} ms is not a time") from None
    return _in_range(moment, what, f"{moment.isoformat()} ({value} ms)")


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _metric(metrics: Mapping[str, float], key: str) -> float | None:
    value = metrics.get(key)
    return None if value is None or not math.isfinite(value) else float(value)


def _link(base: str | None, suffix: str) -> str | None:
    return None if base is None else f"{base}{suffix}"


def _check(run: Run, mlflow_ui: str | None, prefect_ui: str | None) -> Check | None:
    tags, metrics = run.data.tags, run.data.metrics
    failure = CheckFailure.from_tags(tags, run.info.status)
    if (VERDICT_TAG not in tags and failure is None) or "thermostat.model_name" not in tags:
        return None
    verdict = tags.get(VERDICT_TAG, "?") if failure is None else "failed"
    flow_run = tags.get(PREFECT_FLOW_RUN_TAG)
    n = _metric(metrics, "n")
    keys = GroupMetricKeys.from_tags(tags)
    return Check(
        run_id=run.info.run_id, model_name=tags["thermostat.model_name"],
        version=tags.get("thermostat.model_version", "?"),
        aliases=tuple(a for a in tags.get("thermostat.aliases", "").split(",") if a),
        verdict=verdict, window_start=_time(tags.get("thermostat.window_start"), "window start"),
        window_end=(_time(tags.get("thermostat.window_end"), "window end")
                    or _millis(run.info.start_time, "start time")),
        ece=_metric(metrics, "ece"), nll=_metric(metrics, "nll"), p_value=_metric(metrics, "p_value"),
        drift=verdict == "drift" or (failure is None and _metric(metrics, "drift") == 1.0),
        refit_recommended=tags.get("thermostat.refit_recommended") == "true",
        baseline_ece=_metric(metrics, "baseline_ece"), ece_excess=_metric(metrics, "ece_excess"),
        labelled_rows=None if n is None else int(n), accuracy=_metric(metrics, "accuracy"),
        temperature=_metric(metrics, "temperature") or _float(tags.get("temperature")),
        groups={keys.name(key.removeprefix(_GROUP_PREFIX)): float(value) for key, value in sorted(metrics.items())
                if key.startswith(_GROUP_PREFIX) and math.isfinite(value)},
        prefect_flow_run_id=flow_run,
        run_url=_link(mlflow_ui, f"/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}"),
        prefect_url=None if flow_run is None else _link(prefect_ui, f"/runs/flow-run/{flow_run}"),
        predicted_accuracy=_metric(metrics, "predicted_accuracy"),
        cusum=max((value for value in (_metric(metrics, "cusum_upper"), _metric(metrics, "cusum_lower"))
                   if value is not None), default=None),
        error=None if failure is None else failure.error,
    )


def _refused_refit(run: Run, mlflow_ui: str | None, prefect_ui: str | None) -> Refit | None:
    if run.data.tags.get(KIND_TAG) != REFIT_KIND:
        return None
    try:
        record = RefitRecord.from_tags(run.data.tags, run.data.metrics)
    except KeyError:
        return None
    flow_run = record.prefect_flow_run_id
    return Refit(
        at=_millis(run.info.start_time, "start time"), model_name=record.model_name, parent_version=record.parent_version,
        alias=record.alias, status=record.status, new_version=record.new_version, step=record.step,
        reason=record.reason, escalation=record.escalation, metrics=dict(record.metrics), run_id=run.info.run_id,
        run_url=_link(mlflow_ui, f"/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}"),
        prefect_flow_run_id=flow_run,
        prefect_url=None if flow_run is None else _link(prefect_ui, f"/runs/flow-run/{flow_run}"),
    )


def _served_traffic(
    log: PredictionLog | None, model_name: str, version: str, since: datetime
) -> ServedTraffic | None:
    if log is None:
        return None
    table = log.table
    where = (table.c.model_name == model_name) & (table.c.model_version == version) & (table.c.served_at >= since)
    with log.engine.connect() as connection:
        rows, labelled, last = connection.execute(
            select(func.count(), func.count(table.c.label), func.max(table.c.served_at)).where(where)
        ).one()
        latest = connection.execute(
            select(table.c.temperature).where(where).order_by(table.c.served_at.desc(), table.c.id.desc()).limit(1)
        ).scalar_one_or_none()
    if isinstance(last, str):  # SQLite hands MAX() back as text
        last = _time(last, "latest served_at")
    return ServedTraffic(since=since, rows=int(rows), labelled_rows=int(labelled), last_served_at=last,
                         served_temperature=None if latest is None else float(latest))


def _open_prediction_log(settings: ThermostatSettings, notes: list[str]) -> PredictionLog | None:
    url = settings.resolved_prediction_log_url()
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database and not Path(parsed.database).is_file():
        notes.append(f"no prediction log at {parsed.database}: served traffic is not shown")
        return None
    try:
        log = PredictionLog(url)
        if not inspect(log.engine).has_table(log.table.name):
            notes.append(f"the prediction log {mask_url(url)} has no table {log.table.name!r} yet")
            log.dispose()
            return None
    except Exception as error:  # noqa: BLE001 - the page shows the rest and says why this is missing
        notes.append(f"the prediction log {mask_url(url)} cannot be read: {_described(error)}")
        return None
    return log


def _version_info(
    model_name: str, version: ModelVersion, aliases: Mapping[str, str], registry: MlflowRegistry,
    mlflow_ui: str | None, served: ServedTraffic | None,
) -> VersionInfo:
    number = str(version.version)
    tags = dict(version.tags)
    names = tuple(sorted((a for a, v in aliases.items() if v == number), key=lambda a: (a != "champion", a)))
    problem, temperature, baseline_ece, baseline_nll, threshold = None, None, None, None, None
    interval = (_float(tags.get("temperature_low")), _float(tags.get("temperature_high")))
    try:
        record = registered_version(model_name, number, tags, names)
        temperature, baseline_ece = record.temperature, record.baseline_ece
        baseline_nll, threshold = record.baseline_nll, record.gate_threshold
        interval = record.temperature_interval or interval
    except ValueError as error:
        problem = str(error)
    run_id = str(version.run_id) if version.run_id else None
    url = None
    if run_id is not None and mlflow_ui is not None:
        try:
            url = registry.run_url(run_id, mlflow_ui)
        except Exception:  # noqa: BLE001 - a link is a convenience; the run id is still shown
            url = None
    previous = tags.get("thermostat.alias_previous_version")
    return VersionInfo(
        model_name=model_name, version=number, aliases=names, registered_at=_millis(version.creation_timestamp, "creation time"),
        temperature=temperature, temperature_low=interval[0], temperature_high=interval[1],
        baseline_ece=baseline_ece, baseline_nll=baseline_nll,
        gate_threshold=threshold, registered_for_alias=tags.get("thermostat.alias"),
        previous_alias_version=None if previous in (None, "none") else previous,
        refit_of=tags.get("refit_parent_version"), registration_run_id=run_id, registration_run_url=url,
        served=served, problem=problem,
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
        holder_info = next((v for v in versions if v.version == holder), None)
        views.append(AliasView(
            alias=alias, version=holder, versions=tuple(ordered),
            latest_check_run_id=None if latest is None else latest.run_id,
            latest_reliability=None if latest is None else _latest_reliability(registry, latest.run_id, notes),
            registration_run_id=None if holder_info is None else holder_info.registration_run_id,
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
    registry: MlflowRegistry, experiment: str, mlflow_ui: str | None, prefect_ui: str | None, notes: list[str],
) -> tuple[dict[str, list[Check]], dict[str, list[Refit]]]:
    """Check runs and refused refits per model, oldest first; a run that cannot be read is named in ``notes``."""
    checks: dict[str, list[Check]] = {}
    refused: dict[str, list[Refit]] = {}
    for run in reversed(registry.runs(experiment)):  # oldest first
        try:
            check = _check(run, mlflow_ui, prefect_ui)
            refit = None if check is not None else _refused_refit(run, mlflow_ui, prefect_ui)
        except Exception as error:  # noqa: BLE001 - one unreadable run is named; the others are shown
            tags = run.data.tags
            of = (f" ({tags.get('thermostat.model_name', '?')} v{tags.get('thermostat.model_version', '?')})"
                  if "thermostat.model_name" in tags else "")
            notes.append(f"run {run.info.run_id}{of} of experiment {experiment!r} cannot be read and is not shown: "
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
    checks, refused = _monitoring_runs(registry, settings.monitoring_experiment_name, mlflow_ui, prefect_ui, notes)
    log = _open_prediction_log(settings, notes)
    since = now - settings.monitor_window
    models = []
    try:
        for name in registry.registered_model_names():
            try:
                aliases = registry.aliases(name)
                versions = []
                for version in sorted(registry.versions(name), key=lambda v: int(v.version)):
                    try:
                        served = _served_traffic(log, name, str(version.version), since)
                    except Exception as error:  # noqa: BLE001 - shown as a note; the rest of the page stands
                        notes.append(f"the prediction log cannot be read: {_described(error)}")
                        log, served = None, None
                    try:
                        versions.append(_version_info(name, version, aliases, registry, mlflow_ui, served))
                    except Exception as error:  # noqa: BLE001 - one unreadable version is named; the others shown
                        notes.append(f"version {version.version} of model {name!r} cannot be read and is not shown: "
                                     f"{_described(error)}")
                own_checks = sorted(checks.get(name, []), key=lambda c: c.window_end)
                moves, refits = _moves_and_refits(name, versions)
                refits = sorted(refits + refused.get(name, []), key=lambda r: r.at)
                models.append(ModelState(
                    name=name, aliases=aliases, versions=tuple(versions), checks=tuple(own_checks),
                    refits=tuple(refits), alias_moves=tuple(sorted(moves, key=lambda m: m.at)),
                    alias_views=_alias_views(registry, aliases, own_checks, versions, moves, notes),
                ))
            except Exception as error:  # noqa: BLE001 - the model is shown as unreadable; the others are shown
                problem = redact_credentials(_described(error), *hidden)
                notes.append(f"model {name!r} cannot be read: {problem}")
                models.append(ModelState.unreadable(name, problem))
    finally:
        if log is not None:
            log.dispose()
    thresholds = Thresholds(ece_tolerance=settings.drift_ece_tolerance, p_threshold=settings.drift_p_threshold,
                            min_window=settings.min_window, insufficient_data_streak=settings.insufficient_data_streak)
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


# ------------------------------------------------------------------------------ alerts


def _numbers(check: Check, thresholds: Thresholds) -> dict[str, float | int | str | None]:
    return {"ece": check.ece, "baseline_ece": check.baseline_ece, "ece_excess": check.ece_excess,
            "ece_tolerance": thresholds.ece_tolerance, "p_value": check.p_value,
            "p_threshold": thresholds.p_threshold, "nll": check.nll, "labelled_rows": check.labelled_rows,
            "temperature": check.temperature}


def _streak(checks: Iterable[Check]) -> list[Check]:
    """The trailing run of insufficient_data checks (oldest first)."""
    streak: list[Check] = []
    for check in checks:
        streak = streak + [check] if check.verdict == "insufficient_data" else []
    return streak


def alerts_for(model: ModelState, thresholds: Thresholds) -> list[Alert]:
    """The open alerts of one model, for the versions an alias points at now.

    * ``drift``: the version's latest check says drift (a version no alias points at any
      more was replaced — by a refit or by hand — and its drift is history);
    * ``refit_refused``: a refit of the version registered nothing, and no check of the
      version since says ok (the version still serves a miscalibrated scale);
    * ``insufficient_data``: the version's last ``insufficient_data_streak`` checks or more
      all had too few labelled rows (labels are not arriving, or traffic stopped);
    * ``check_failed``: the version's latest check failed (no verdict: its last good one is
      not shown as current).
    """
    found: list[Alert] = []
    for version, aliases in model.serving().items():
        alias = ",".join(aliases)
        own = model.checks_of(version=version)
        if own and own[-1].verdict == "failed":
            last = own[-1]
            found.append(Alert(
                kind="check_failed", at=last.window_end, model_name=model.name, version=version, alias=alias,
                title=f"check failed, no verdict: {last.error or 'the check failed'}",
                numbers={"window_start": None if last.window_start is None else last.window_start.isoformat(),
                         "window_end": last.window_end.isoformat()},
                run_id=last.run_id, run_url=last.run_url, prefect_flow_run_id=last.prefect_flow_run_id,
                prefect_url=last.prefect_url,
            ))
        if own and own[-1].verdict == "drift":
            last = own[-1]
            excess = "n/a" if last.ece_excess is None else f"{last.ece_excess:+.4f}"
            found.append(Alert(
                kind="drift", at=last.window_end, model_name=model.name, version=version, alias=alias,
                title=f"calibration drift: ECE {_shown(last.ece)} vs baseline {_shown(last.baseline_ece)} "
                      f"(excess {excess}, tolerance {thresholds.ece_tolerance:g}; p = {_shown(last.p_value, '.3g')})",
                numbers=_numbers(last, thresholds), run_id=last.run_id, run_url=last.run_url,
                prefect_flow_run_id=last.prefect_flow_run_id, prefect_url=last.prefect_url,
            ))
        for refit in model.refits:
            if refit.parent_version != version or refit.status != "failed" or refit.alias not in aliases:
                continue
            if any(c.verdict == "ok" and c.window_end > refit.at for c in own):
                continue
            found.append(Alert(
                kind="refit_refused", at=refit.at, model_name=model.name, version=version, alias=refit.alias,
                title=f"refit refused at step {refit.step or '?'}: {refit.reason}"
                      + (f" — ESCALATION: {refit.escalation}" if refit.escalation else ""),
                numbers={"step": refit.step, "escalation": refit.escalation} | dict(refit.metrics),
                run_id=refit.run_id, run_url=refit.run_url, prefect_flow_run_id=refit.prefect_flow_run_id,
                prefect_url=refit.prefect_url,
            ))
        streak = _streak(own)
        if len(streak) >= thresholds.insufficient_data_streak:
            last = streak[-1]
            found.append(Alert(
                kind="insufficient_data", at=last.window_end, model_name=model.name, version=version, alias=alias,
                title=f"{len(streak)} consecutive checks with too few labelled rows (last: "
                      f"{last.labelled_rows if last.labelled_rows is not None else '?'} < {thresholds.min_window}) "
                      f"since {streak[0].window_end.isoformat(timespec='seconds')}"
                      + ("" if last.predicted_accuracy is None else
                         f"; accuracy predicted from the served confidences: {last.predicted_accuracy:.3f}"),
                numbers={"streak": len(streak), "labelled_rows": last.labelled_rows, "min_window": thresholds.min_window,
                         "first_at": streak[0].window_end.isoformat(), "predicted_accuracy": last.predicted_accuracy},
                run_id=last.run_id, run_url=last.run_url, prefect_flow_run_id=last.prefect_flow_run_id,
                prefect_url=last.prefect_url,
            ))
    return found


def _shown(value: float | None, form: str = ".4f") -> str:
    return "n/a" if value is None else format(value, form)
