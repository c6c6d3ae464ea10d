"""The Prefect events Thermostat emits, and the resource that names a model version in them.

``thermostat.calibration.drift``
    The monitor found drift on a serving version and recommends a refit (outside the
    cool-down). Payload: :func:`monitoring.drift_payload` of the check, plus ``mlflow_run_id``.
    The ``refit`` deployment's trigger listens for it (``prefect.yaml``).
``thermostat.calibration.refit_failed``
    A refit registered nothing: it was refused (too little or unqualified traffic, a fit on a
    bound, accuracy below the floor) or it did not verify. Payload: ``reason``, ``step``,
    ``escalation`` and the numbers.
``thermostat.calibration.refitted``
    A refit registered a new version (payload: new version, T, threshold, verification).
``thermostat.calibration.confidence_shift``
    The early warning: the served confidences of a version (labelled or not) moved away from
    its registration reference (payload: :class:`monitoring.EarlyWarning`'s fields, the window,
    ``mlflow_run_id``). The ``monitor`` deployment's trigger schedules a labelled check of the
    model after it; its own cool-down (``drift_cooldown``) per version.
``thermostat.calibration.insufficient_data``
    A serving version had too few labelled rows in ``insufficient_data_streak`` checks in a row
    (emitted when the streak reaches it and at each multiple). Payload: ``streak``, ``n``,
    ``min_window``, ``window_start``, ``window_end``, ``predicted_accuracy`` (the early warning's,
    or None).

Every event's resource is the version it concerns::

    {"prefect.resource.id": "mlmodel.<name>.v<version>", "model.name": ..., "model.version": ...,
     "model.alias": ...}

so an automation can match ``mlmodel.*`` and run one refit per version (``for_each``).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from prefect import get_run_logger
from prefect.events import emit_event
from prefect.exceptions import MissingContextError

__all__ = [
    "CONFIDENCE_SHIFT_EVENT",
    "DRIFT_EVENT",
    "INSUFFICIENT_DATA_EVENT",
    "REFITTED_EVENT",
    "REFIT_FAILED_EVENT",
    "emit",
    "version_resource",
]

DRIFT_EVENT: Final = "thermostat.calibration.drift"
CONFIDENCE_SHIFT_EVENT: Final = "thermostat.calibration.confidence_shift"
INSUFFICIENT_DATA_EVENT: Final = "thermostat.calibration.insufficient_data"
REFIT_FAILED_EVENT: Final = "thermostat.calibration.refit_failed"
REFITTED_EVENT: Final = "thermostat.calibration.refitted"


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
    event: str, resource: dict[str, str], payload: dict[str, Any], related: list[dict[str, str]] | None = None, *,
    context: str = "", if_unsent: str = "nothing reacts to it",
) -> str | None:
    """Emit one event and log it; returns its id, or None when this process cannot emit
    events (events disabled, or no Prefect API): then nothing reacts to it, the log says so
    as a warning (``context`` first, ``if_unsent`` last: what that means for the caller), and
    the caller must not record it as sent.

    ``related``: further resources the event concerns, each with a ``prefect.resource.id`` and
    a ``prefect.resource.role`` (e.g. the drift event that caused a refit, role ``caused-by``).
    """
    sent = emit_event(event=event, resource=resource, payload=payload, related=related)
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
