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


def schedule_rerun(parameters: Mapping[str, Any], at: datetime, *, key: str) -> str | None:
    """Schedule a new run of the deployment this flow run was started from, with ``parameters``, to
    start at ``at``; the new flow run's id, or None when this flow run has no deployment (a flow
    called from Python or the command line: nothing is scheduled).

    ``key`` is the new run's idempotency key: a retried flow run that schedules again gets the
    run it scheduled the first time. The new run is not a subflow of this one (it starts after
    this one ended) and waits in the deployment's queue like any other of its runs.
    """
    from prefect.deployments import run_deployment
    from prefect.runtime import deployment

    deployment_id = deployment.id
    if deployment_id is None:
        return None
    # Called from a synchronous flow: run_deployment returns the flow run, not a coroutine.
    scheduled = cast("FlowRun", run_deployment(name=deployment_id, parameters=dict(parameters), scheduled_time=at,
                                               timeout=0, as_subflow=False, idempotency_key=key))
    return str(scheduled.id)


def prefect_ui_url(settings: ThermostatSettings) -> str | None:
    """Base URL of the Prefect UI for flow-run links: the setting, else Prefect's own
    ``PREFECT_UI_URL`` (derived from ``PREFECT_API_URL`` when that is set); masked, as links are shown."""
    if settings.prefect_ui_url:
        return mask_url(settings.prefect_ui_url.rstrip("/"))
    from prefect.settings import get_current_settings

    found = get_current_settings().ui_url
    return None if not found else mask_url(str(found).rstrip("/"))
