"""Tasks the flows share: the retry policy, the checkpoint fetch, the gate, the window, the parent version.

The flows (``post_finetune``, ``monitor``, ``refit``, ...) are siblings: each imports what it
shares from here and from :mod:`flows.pipelines.registration`, never from another flow module.
Every task keeps its result in memory
(results hold arrays): no cache key, no persistence. Only I/O tasks retry, and only on errors
a retry can fix — the policy is defined once, as :data:`io_task`.

Importing this module (every flow does) also guards the embedded Prefect API server: started
one at a time per ``PREFECT_HOME`` and never left running by a crashed process
(:mod:`flows.orchestration.embedded`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from prefect import Task, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun

from flows.registry.checkpoint import CheckpointFiles, download_checkpoint
from flows.orchestration.embedded import guard_ephemeral_server
from flows.registry.adapter import MlflowRegistry, is_transient
from flows.pipelines.reports import log_context
from flows.settings import ThermostatSettings
from flows.pipelines.steps import CalibratedCheckpoint, GatedCheckpoint, gate_threshold
from flows.pipelines.traffic import Traffic, recent_labelled_traffic
from flows.records.versions import RegisteredVersion, registered_version
from monitoring import LabelledSource, PredictionLog, PredictionLogExport, PredictionStore
from monitoring import open_prediction_log as monitoring_open_prediction_log

__all__ = ["check_window", "fetch_checkpoint", "gate", "io_task", "open_prediction_log", "open_window_source",
           "read_prediction_log", "read_traffic", "resolve_parent", "retry_if_transient", "step_task"]

guard_ephemeral_server()

P = ParamSpec("P")
R = TypeVar("R")


def retry_if_transient(task: Task[Any, Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Retry network/file-system errors, MLflow's transient codes and lost database connections
    (the prediction log); never a refusal or a bug."""
    error = state.data
    return isinstance(error, BaseException) and is_transient(error)


def step_task(name: str) -> Callable[[Callable[P, R]], Task[P, R]]:
    """A step of a flow: its result in memory, not retried (a refusal or a bug does not go
    away on a retry)."""

    def decorate(function: Callable[P, R]) -> Task[P, R]:
        return task(name=name, cache_policy=NO_CACHE, persist_result=False)(function)

    return decorate


def io_task(name: str) -> Callable[[Callable[P, R]], Task[P, R]]:
    """An I/O task: retried twice, 2 s and 5 s apart, on transient errors only."""

    def decorate(function: Callable[P, R]) -> Task[P, R]:
        return task(name=name, cache_policy=NO_CACHE, persist_result=False, retries=2, retry_delay_seconds=[2, 5],
                    retry_condition_fn=retry_if_transient)(function)

    return decorate


@io_task(name="fetch-checkpoint")
def fetch_checkpoint(checkpoint_uri: str, workdir: Path, registry: MlflowRegistry) -> CheckpointFiles:
    files = download_checkpoint(checkpoint_uri, workdir / "checkpoint", tracking_uri=registry.tracking_uri)
    get_run_logger().info("%s downloaded, digest %s", log_context(checkpoint_uri, None), files.digest)
    return files


@step_task(name="resweep-gate")
def gate(calibrated: CalibratedCheckpoint, settings: ThermostatSettings) -> GatedCheckpoint:
    gated = gate_threshold(calibrated, settings=settings)
    choice, context = gated.choice, log_context(calibrated.accepted.checkpoint_uri, gated.temperature)
    if choice.threshold is None:
        get_run_logger().warning("%s no threshold meets the gate target: %s; all predictions go to review",
                                  context, choice.reason)
    else:
        get_run_logger().info("%s gate threshold %.4f: coverage %.3f, accepted accuracy %.4f (lower bound %.4f)",
                              context, choice.threshold, choice.coverage, choice.accepted_accuracy,
                              choice.accuracy_lower_bound)
    get_run_logger().info(
        "%s evaluation n=%d: NLL %.4f -> %.4f (bootstrap %s, [%.4f, %.4f]), ECE %.4f -> %.4f", context,
        gated.after.n, gated.before.nll, gated.after.nll, gated.bootstrap.verdict, gated.bootstrap.low,
        gated.bootstrap.high, gated.before.ece, gated.after.ece,
    )
    return gated


@io_task(name="resolve-parent-version")
def resolve_parent(
    registry: MlflowRegistry, model_name: str, model_version: str | None, alias: str
) -> tuple[RegisteredVersion, str | None]:
    """The registered version a derived version starts from (a refit's, a prior correction's):
    ``model_version``, else the one ``alias`` points at; and that alias's version now (None: unset)."""
    aliases = registry.aliases(model_name)
    holder = aliases.get(alias)
    version = model_version if model_version is not None else holder
    if version is None:
        raise LookupError(f"{model_name}@{alias} does not exist and no model_version was given: nothing to start from")
    names = [name for name, points_at in aliases.items() if points_at == str(version)]
    parent = registered_version(model_name, str(version), registry.get_version(model_name, str(version)).tags, names)
    get_run_logger().info("%s starting from it for @%s (which points at version %s)", parent.context, alias, holder)
    return parent, holder


@io_task(name="read-traffic")
def read_traffic(
    source: LabelledSource, parent: RegisteredVersion, start: datetime, end: datetime, settings: ThermostatSettings
) -> Traffic | None:
    """``parent``'s labelled traffic served in [start, end): at most ``refit_max_rows`` of the most recent rows."""
    traffic = recent_labelled_traffic(
        source, parent.model_name, parent.version, start=start, end=end, max_rows=settings.refit_max_rows,
        chunk_size=settings.monitor_chunk_size,
    )
    if traffic is None:
        get_run_logger().warning("%s no labelled traffic in [%s, %s)", parent.context, start.isoformat(),
                                 end.isoformat())
    else:
        get_run_logger().info(
            "%s read %d labelled rows served %s .. %s (%d in the window; at most %d of the most recent are used)",
            parent.context, traffic.scored.n_samples, traffic.first_served_at.isoformat(),
            traffic.last_served_at.isoformat(), traffic.n_in_window, settings.refit_max_rows,
        )
    return traffic


def check_window(
    window_start: datetime | None, window_end: datetime | None, settings: ThermostatSettings, now: datetime
) -> tuple[datetime, datetime]:
    """The checked window: [end − ``monitor_window``, end), end = now unless given.

    Examples
    --------
    >>> from datetime import timedelta
    >>> s = ThermostatSettings(monitor_window=timedelta(hours=2))
    >>> start, end = check_window(None, None, s, datetime(2026, 1, 1, 12, tzinfo=UTC))
    >>> start.isoformat(), end.isoformat()
    ('2026-01-01T10:00:00+00:00', '2026-01-01T12:00:00+00:00')
    """
    for name, value in (("window_start", window_start), ("window_end", window_end)):
        if value is not None and (value.tzinfo is None or value.utcoffset() is None):
            raise ValueError(f"{name} {value.isoformat()} has no timezone; pass an aware time, e.g. ...+00:00")
    end = (now if window_end is None else window_end).astimezone(UTC)
    start = (end - settings.monitor_window if window_start is None else window_start).astimezone(UTC)
    if end <= start:
        raise ValueError(f"the window [{start.isoformat()}, {end.isoformat()}) is empty; window_end must be later")
    return start, end


@contextmanager
def open_window_source(settings: ThermostatSettings) -> Iterator[PredictionStore]:
    """Where the monitor and the refit read their windows (``THERMOSTAT_WINDOW_SOURCE``): the
    prediction log (for reading: :func:`read_prediction_log`), or its partitioned Parquet
    export under ``THERMOSTAT_EXPORT_PATH``.

    Raises
    ------
    FileNotFoundError
        The export folder or the prediction log's SQLite file does not exist.
    """
    if settings.window_source == "export" and settings.export_path is not None:
        if not settings.export_path.is_dir():
            raise FileNotFoundError(
                f"THERMOSTAT_EXPORT_PATH {settings.export_path}: no such folder; export the prediction log there "
                f"first (`thermostat export --model NAME --version V --out {settings.export_path}`)"
            )
        yield PredictionLogExport(settings.export_path)
        return
    with read_prediction_log(settings) as log:
        yield log


def read_prediction_log(settings: ThermostatSettings) -> PredictionLog:
    """The prediction log of ``settings`` for reading: a SQLite file that does not exist is a
    :class:`FileNotFoundError` naming the URL — a check fails loud instead of reporting every
    version as "never logged" from a log created empty for it. In an existing database the
    tables and indexes are created if missing (idempotent), as for writing."""
    return monitoring_open_prediction_log(settings.resolved_prediction_log_url(), must_exist=True)


def open_prediction_log(settings: ThermostatSettings) -> PredictionLog:
    """The prediction log of ``settings`` for writing (tables created if missing: idempotent;
    :func:`monitoring.open_prediction_log`, which a serving process calls without the flows)."""
    return monitoring_open_prediction_log(settings.resolved_prediction_log_url())
