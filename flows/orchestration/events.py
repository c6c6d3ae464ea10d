"""Emitting Thermostat's events on Prefect, and the resource that names a model version in them.

The events and their typed payloads are :mod:`flows.records.events` (``thermostat.calibration.drift``,
``refit_failed``, ``refitted``, ``confidence_shift``, ``insufficient_data``); :func:`emit` sends one.
Every event's resource is the version it concerns::

    {"prefect.resource.id": "mlmodel.<name>.v<version>", "model.name": ..., "model.version": ...,
     "model.alias": ...}

so an automation can match ``mlmodel.*`` and run one refit per version (``for_each``).
"""

from __future__ import annotations

import logging

from prefect import get_run_logger
from prefect.events import emit_event
from prefect.exceptions import MissingContextError

from flows.records.events import EventPayload

__all__ = ["emit", "version_resource"]


def version_resource(model_name: str, version: str, alias: str) -> dict[str, str]:
    """The Prefect resource of a model version (all values strings, as Prefect requires).

    Examples
    --------
    >>> version_resource("digits", "3", "champion")["prefect.resource.id"]
    'mlmodel.digits.v3'
    """
    return {
        "prefect.resource.id": f"mlmodel.{model_name}.v{version}",
        "prefect.resource.name": f"{model_name} v{version}",
        "model.name": model_name,
        "model.version": str(version),
        "model.alias": alias,
    }


def emit(
    payload: EventPayload, resource: dict[str, str], related: list[dict[str, str]] | None = None, *,
    context: str = "", if_unsent: str = "nothing reacts to it",
) -> str | None:
    """Emit one event (its name and payload from ``payload``'s type) and log it; returns its id, or None when this process cannot emit
    events (events disabled, or no Prefect API): then nothing reacts to it, the log says so
    as a warning (``context`` first, ``if_unsent`` last: what that means for the caller), and
    the caller must not record it as sent.

    ``related``: further resources the event concerns, each with a ``prefect.resource.id`` and
    a ``prefect.resource.role`` (e.g. the drift event that caused a refit, role ``caused-by``).
    """
    event = payload.EVENT
    sent = emit_event(event=event, resource=resource, payload=payload.to_payload(), related=related)
    logger = _logger()
    where = f"{context} " if context else ""
    if sent is None:
        logger.warning("%s%s not emitted: this process cannot emit Prefect events (no API or events disabled); %s",
                       where, event, if_unsent)
        return None
    logger.info("%semitted %s (event %s) for %s", where, event, sent.id, resource["prefect.resource.id"])
    return str(sent.id)


def _logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """The flow or task run's logger (its lines reach Prefect's UI), else this module's."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)
