"""``thermostat lock show|clear MODEL [--json]``: who holds a model's registration lock, and clearing it.

The lease itself is :mod:`flows.orchestration.locks`; this is its command, with the worker's
``THERMOSTAT_*`` settings. ``--help`` loads neither SQLAlchemy nor the settings (the callbacks do).

Exit status: 0; 2 on bad settings or when they name no lock database (nothing is created); 3 when
it cannot be read.
"""

from __future__ import annotations

import click

from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_OK, fail
from flows.json_keys import JSON_KEYS

__all__ = ["command"]


@click.group(help="Inspect or clear a model's registration lock (clear it only when its holder is dead).")
def command() -> None:
    """``thermostat lock show|clear MODEL [--json]``, with the worker's ``THERMOSTAT_*`` settings."""


def _show_or_clear(action: str, model_name: str, as_json: bool) -> int:
    """0; 2 on bad settings or when they name no lock database (nothing is created); 3 when it cannot be read."""
    import json

    import sqlalchemy as sa

    from calibration import json_safe
    from flows.orchestration.locks import MissingLockStoreError, clear_lock, model_lock_name, show_lock
    from flows.settings import ThermostatSettings
    from monitoring import mask_url

    try:
        settings = ThermostatSettings()
        url = settings.resolved_prediction_log_url()
    except ValueError as error:  # pydantic's ValidationError is one
        return fail(EXIT_BAD_INPUT, str(error))
    try:
        holder = (show_lock if action == "show" else clear_lock)(model_name, settings)
    except (ValueError, MissingLockStoreError) as error:  # the URL or the name; no such store
        return fail(EXIT_BAD_INPUT, str(error))
    except (sa.exc.SQLAlchemyError, OSError) as error:
        return fail(EXIT_COMPUTATION_FAILED, f"the lock table at {mask_url(url)} could not be read: {error}")
    if as_json:
        print(json.dumps({"action": action, "model_name": model_name, "holder": json_safe(holder)}))
    elif holder is None:
        print(f"{model_lock_name(model_name)} is free")
    else:
        print(("cleared: " if action == "clear" else "") + holder.summary)
    return EXIT_OK


_MODEL = click.argument("model_name", metavar="MODEL")
_JSON = click.option("--json", "as_json", is_flag=True, help=f"print one JSON object: {JSON_KEYS['lock']}")


@command.command("show", help="Who holds MODEL's lock now, and is it alive (creates nothing).")
@_MODEL
@_JSON
def _show(model_name: str, as_json: bool) -> int:
    return _show_or_clear("show", model_name, as_json)


@command.command("clear", help="Remove MODEL's lock: only when its holder is known to be dead.")
@_MODEL
@_JSON
def _clear(model_name: str, as_json: bool) -> int:
    return _show_or_clear("clear", model_name, as_json)
