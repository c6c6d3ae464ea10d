"""The monitor's per-partition work as Prefect tasks on a Dask cluster (``prefect-dask``).

With ``THERMOSTAT_WINDOW_SOURCE=export`` and ``THERMOSTAT_ENGINE=dask`` a check summarises its
window from the partitioned Parquet export (:func:`monitoring.summarise_export`): one Prefect
task per partition (one row group of a day file), run by prefect-dask's ``DaskTaskRunner`` on
the scheduler at ``THERMOSTAT_DASK_ADDRESS`` — or on a temporary local cluster of
``THERMOSTAT_DASK_WORKERS`` processes that the check starts and stops — and the partial
summaries added in partition order in the flow. The tasks run in the subflow
``summarise-export`` (its own task runner; the monitor's other tasks stay in the monitor's
process), so the Prefect UI shows every partition's task under the check that needed it.

The workers read the partitions by path: with a remote scheduler the export folder must be
at the same path on every worker (a shared file system or a mounted bucket). A cluster left
without any worker for ``THERMOSTAT_DASK_TIMEOUT`` seconds (default 30) while the tasks wait
fails the check with a message that says so, instead of holding it forever.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from prefect import flow, get_run_logger, task, unmapped
from prefect.cache_policies import NO_CACHE

from flows.orchestration.engines import WorkerWatch, dask_task_runner
from flows.settings import ThermostatSettings
from monitoring import PredictionLogExport, WindowQuery, WindowSummary, summarise_export

__all__ = ["TaskEngine", "summarise_export_on_dask"]

Item = TypeVar("Item")
Result = TypeVar("Result")


@task(name="summarise-partition", cache_policy=NO_CACHE, persist_result=False)
def _run_on_partition(fn: Callable[[Any], Any], partition: Any) -> Any:
    return fn(partition)


@dataclass(frozen=True, slots=True)
class TaskEngine:
    """An engine (:class:`calibration.Engine`) whose map is one Prefect task per item, run by
    the calling flow's Dask task runner; the results come back in the items' order.
    ``n_workers`` is what was asked for (a remote scheduler has its own). When the cluster has
    had no worker for ``timeout`` seconds while tasks wait, they are cancelled and the map
    raises a :class:`RuntimeError` that says so (:class:`flows.orchestration.engines.WorkerWatch`)."""

    n_workers: int
    timeout: float
    name: str = "dask"

    def map(self, fn: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
        from prefect_dask.task_runners import PrefectDaskFuture  # the extra is there: the runner runs on it

        futures = _run_on_partition.map(unmapped(fn), list(items))
        on_dask = [future.wrapped_future for future in futures if isinstance(future, PrefectDaskFuture)]
        with WorkerWatch(on_dask, self.timeout) as watch:
            results = []
            for future in futures:
                try:
                    results.append(future.result())
                except CancelledError:
                    if watch.reason is not None:
                        raise RuntimeError(watch.reason) from None
                    raise
            return results


@flow(name="summarise-export")
def _summarise_export(export_path: Path, query: WindowQuery, n_workers: int, timeout: float) -> WindowSummary:
    export = PredictionLogExport(export_path)
    summary = summarise_export(export, query, engine=TaskEngine(n_workers, timeout))
    get_run_logger().info("%s v%s: %d labelled rows from %d partition(s) of %s on Dask", query.model_name,
                          query.model_version, summary.n, summary.n_chunks, export_path)
    return summary


def summarise_export_on_dask(settings: ThermostatSettings, query: WindowQuery) -> WindowSummary | None:
    """The window's summary from the export, computed on Dask; None when the version has no
    exported row (never logged, or not exported yet).

    Call it from a flow: it runs the subflow ``summarise-export`` on a ``DaskTaskRunner``.
    """
    if settings.export_path is None:
        raise ValueError("the Dask engine reads the export: set THERMOSTAT_EXPORT_PATH")
    if PredictionLogExport(settings.export_path).n_classes(query.model_name, query.model_version) is None:
        return None
    runner = dask_task_runner(settings.dask_address, settings.dask_workers)
    # DaskTaskRunner is a TaskRunner of PrefectDaskFutures; Prefect's annotation is invariant.
    summary: WindowSummary = _summarise_export.with_options(task_runner=runner)(  # type: ignore[arg-type]
        settings.export_path, query, settings.dask_workers, settings.dask_timeout,
    )
    return summary
