"""``thermostat alerts install``: the alert automations and their notification block on the Prefect
server (:mod:`flows.orchestration.alerts` installs them; ``--help`` loads no Prefect)."""

from __future__ import annotations

import json

import click

from flows.defaults import DEFAULT_ALERT_BLOCK as DEFAULT_BLOCK_NAME
from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_OK, fail
from flows.json_keys import JSON_KEYS

__all__ = ["command"]

_DESCRIPTION = """\
Install Thermostat's alerts on the Prefect server at PREFECT_API_URL: eleven automations that
send a notification, one per model version, on

\b
  thermostat.calibration.drift              model, version, alias, ECE vs reference, p-value, MLflow run
  thermostat.calibration.label-shift        the class mix moved (priors, prior test); no temperature refit
  thermostat.calibration.refit_failed       the refused step, reason and escalation
  thermostat.calibration.insufficient_data  the streak of checks with too few labelled rows
  thermostat.calibration.undetermined       the streak of checks that could not establish calibration
  thermostat.calibration.confidence_shift   notice: confidences shifted, a labelled check is scheduled
  thermostat.calibration.unreadable         a serving version's record cannot be read: not checked

or one per run of the refit flow that ends without refit_failed, on

\b
  prefect.flow-run.Crashed                  the refit's process or infrastructure died
  prefect.flow-run.Failed                   the refit raised (e.g. the checkpoint could not be fetched)

or one per run of the monitor or monitor-fleet flow that ends without a verdict, on

\b
  prefect.flow-run.Failed                   the check failed (any cause: no prediction log, MLflow down, ...)
  prefect.flow-run.Crashed                  the check's process or infrastructure died

through a Prefect notification block: --webhook-url saves a custom-webhook block that POSTs
JSON {"text", "subject", "body", "source"} to the URL; --block uses a block already saved
on the server (slack-webhook/NAME, sendgrid-email/NAME, ms-teams-webhook/NAME, ...).
Idempotent: a re-run updates the automations (found by name) and the webhook block."""

_EPILOG = f"""\
--json keys: {JSON_KEYS["alerts install"]}.

exit status: 0 installed; 2 bad input (a URL, a block name, an unknown block, PREFECT_API_URL
not set or unreadable), the message on stderr names the flag or variable; 3 the Prefect server
cannot be reached or refused a request. PREFECT_API_URL is shown with its credentials masked."""


@click.group(help="Alerts through Prefect automations and notification blocks.")
def command() -> None:
    """``thermostat alerts``: its one subcommand, ``install``."""


@command.command("install", help=_DESCRIPTION, epilog=_EPILOG,
                 short_help="create or update the notification block and the alert automations")
@click.option("--webhook-url", metavar="URL", help="POST the alerts as JSON to this http(s) URL")
@click.option("--block", metavar="[TYPE/]NAME",
              help="send the alerts through this saved notification block (any notification type)")
@click.option("--block-name", default=DEFAULT_BLOCK_NAME, metavar="NAME",
              help=f"with --webhook-url: the name of the custom-webhook block, lower-case letters, digits and dashes "
                   f"(default {DEFAULT_BLOCK_NAME})")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def _install_command(webhook_url: str | None, block: str | None, block_name: str, as_json: bool) -> int:
    if block is not None and block_name != DEFAULT_BLOCK_NAME:
        return fail(EXIT_BAD_INPUT, "--block-name names the webhook block --webhook-url saves; "
                    "with --block give the existing block's name to --block")
    from flows.orchestration import alerts  # after the arguments are checked: a usage error loads no Prefect

    try:  # exactly one of --webhook-url and --block: install_alerts says so (exit 2) before any request
        result = alerts.install_alerts(webhook_url=webhook_url, block=block, block_name=block_name)
    except alerts.AlertsConfigurationError as error:
        return fail(EXIT_BAD_INPUT, str(error))
    except alerts.AlertsServerError as error:
        return fail(EXIT_COMPUTATION_FAILED, str(error))
    print(json.dumps(result.model_dump(), indent=2) if as_json else result.text())
    return EXIT_OK
