"""What a process knows of Prefect where it runs: the flow run it is part of, the UI to link to."""

from __future__ import annotations

from flows.settings import ThermostatSettings
from monitoring import mask_url

__all__ = ["current_flow_run_id", "prefect_ui_url"]


def current_flow_run_id() -> str | None:
    """The id of the Prefect flow run this code runs in; None outside a flow run."""
    from prefect.runtime import flow_run  # loaded by the flows that write a record, not by its readers

    found = flow_run.id
    return None if found is None else str(found)


def prefect_ui_url(settings: ThermostatSettings) -> str | None:
    """Base URL of the Prefect UI for flow-run links: the setting, else Prefect's own
    ``PREFECT_UI_URL`` (derived from ``PREFECT_API_URL`` when that is set); masked, as links are shown."""
    if settings.prefect_ui_url:
        return mask_url(settings.prefect_ui_url.rstrip("/"))
    from prefect.settings import get_current_settings

    found = get_current_settings().ui_url
    return None if not found else mask_url(str(found).rstrip("/"))
