"""What a process knows of Prefect where it runs: the flow run it is part of, the UI to link to."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from flows.settings import ThermostatSettings
from monitoring import mask_url

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun

__all__ = ["current_flow_run_id", "prefect_ui_url", "schedule_rerun"]


def current_flow_run_id() -> str | None:
    """The id of the Prefect flow run this code runs in; None outside a flow run."""
    from prefect.runtime import flow_run  # loaded by the flows that write a record, not by its readers

    found = flow_run.id
    return None if found is None else str(found)


def schedule_rerun(parameters: Mapping[str, Any], at: datetime, *, purpose: str) -> FlowRun | None:
    """Schedule a new run of the deployment that started this very flow run, with ``parameters``,
    to start at ``at``; the new flow run, or None when this flow run was not started by a
    deployment (a flow called from Python or the command line, or a subflow of another
    deployment's flow: nothing is scheduled).

    Its idempotency key is ``purpose`` and this flow run's id: this run, retried, gets back the
    run it scheduled the first time (its own start time and state). The new run is not a subflow
    of this one (it starts after this one ended) and waits in the deployment's queue like any
    other of its runs.
    """
    from prefect.context import FlowRunContext
    from prefect.deployments import run_deployment

    context = FlowRunContext.get()
    this_run = None if context is None else context.flow_run
    if this_run is None or this_run.deployment_id is None:
        return None
    # Called from a synchronous flow: run_deployment returns the flow run, not a coroutine.
    return cast("FlowRun", run_deployment(name=this_run.deployment_id, parameters=dict(parameters), scheduled_time=at,
                                          timeout=0, as_subflow=False, idempotency_key=f"{purpose}-{this_run.id}"))


def prefect_ui_url(settings: ThermostatSettings) -> str | None:
    """Base URL of the Prefect UI for flow-run links: the setting, else Prefect's own
    ``PREFECT_UI_URL`` (derived from ``PREFECT_API_URL`` when that is set); masked, as links are shown."""
    if settings.prefect_ui_url:
        return mask_url(settings.prefect_ui_url.rstrip("/"))
    from prefect.settings import get_current_settings

    found = get_current_settings().ui_url
    return None if not found else mask_url(str(found).rstrip("/"))
