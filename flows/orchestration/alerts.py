"""Alerts that reach someone: Prefect automations that send a notification on Thermostat's events.

Which situations there are, the event or flow-run state that raises each and the automation's
key and name come from one table, :data:`flows.records.situations.SITUATIONS`, which the
dashboard's alert list reads too; the notification texts are here.

Six automations on Thermostat's events (:mod:`flows.orchestration.events`), each matching every model
version (``prefect.resource.id`` ``mlmodel.*``) and firing **per version** (``for_each``
``prefect.resource.id``), so two versions drifting in one check send two alerts:

``thermostat: calibration drift``
    on ``thermostat.calibration.drift``: model, version, alias, the window's ECE against the
    registration reference and the tolerance, the p-value, which test fired, the window's T,
    the MLflow run of the check (and its experiment). A refit of the version was requested by
    the same event; the alert says from when it reads the traffic (``refit_window_start``, the
    sequential rule's change point when its alarm found the drift, else the window's start).
``thermostat: label shift``
    on ``thermostat.calibration.label-shift`` (the check's shift diagnosis; instead of the drift
    event, at most one per version per cool-down): the served rows' class priors against the
    registration reference's, the prior test, whether labelled rows confirmed it; no refit.
``thermostat: refit refused``
    on ``thermostat.calibration.refit_failed``: the step that refused, the reason, the
    escalation ("needs retraining or a data fix") and the verification numbers.
``thermostat: insufficient data``
    on ``thermostat.calibration.insufficient_data`` (the monitor emits it when a version's
    streak of checks with too few labelled rows reaches ``THERMOSTAT_INSUFFICIENT_DATA_STREAK``
    and at each multiple of it, so a long streak is reminded, not repeated every hour): the
    streak, the rows and the minimum window.
``thermostat: undetermined``
    on ``thermostat.calibration.undetermined`` (when a version's streak of undetermined checks —
    no drift seen, calibration not established — reaches ``THERMOSTAT_UNDETERMINED_STREAK``
    and at each multiple): the streak, the window's T with its interval next to the registered
    T, and the labelled rows that would decide.
``thermostat: confidence shift``
    on ``thermostat.calibration.confidence_shift`` (the early warning, at most one per version
    per cool-down): a lower-severity notice — the served confidences moved from the
    registration reference before labels could tell; the accuracy they predict; a labelled
    check of the model is scheduled (the ``monitor`` deployment's trigger).
``thermostat: version not checked``
    on ``thermostat.calibration.unreadable`` (every ``monitor`` or ``monitor-fleet`` run that
    meets a serving version whose registration record cannot be read from its tags: a tag
    deleted or edited by hand): the version, its aliases and why; the run that met it fails too.

and four on flow runs (Prefect's flow-run state events, matched to the flow through the
event's related resource of role ``flow``), one per flow run. Two for the refits that end
without emitting ``refit_failed``:

``thermostat: refit crashed``
    on ``prefect.flow-run.Crashed`` (the process or its infrastructure died: killed, out of
    memory, the worker lost): the flow run, its parameters, the state's message.
``thermostat: refit errored``
    on ``prefect.flow-run.Failed`` whose state message is Prefect's for an exception ("Flow run
    encountered an exception: ..."; e.g. the checkpoint could not be fetched): the same. A
    refused refit also ends Failed, but with its escalation or reason as the message, and is
    announced by ``refit refused`` alone.

and two for the ``monitor`` and ``monitor-fleet`` flows, whose failure means no verdict at all (a
check that cannot read its prediction log, MLflow unreachable, a version that cannot be read, a
bug), so any Failed or Crashed run alerts:

``thermostat: monitor failed``
    on ``prefect.flow-run.Failed`` of a ``monitor`` or ``monitor-fleet`` run: the model (or the
    fleet), the state's message (the error, naming each version that failed or could not be
    read), the flow run. The failed check's MLflow run says ``failed`` with the error, and the
    dashboard shows "check failed" for the version instead of its last verdict.
``thermostat: monitor crashed``
    on ``prefect.flow-run.Crashed`` of either (killed, out of memory, the worker lost): the same;
    a check run it left open is closed ``FAILED`` by the version's next check.

Each automation's one action is Prefect's ``send-notification``: the server renders the
subject and body (Jinja, with ``event``, ``flow_run`` …) and hands them to a **notification
block** — by default a ``custom-webhook`` block (:class:`~prefect.blocks.notifications.
CustomWebhookNotificationBlock`) that POSTs JSON ``{"text", "subject", "body", "source"}`` to
one URL (``text`` is what Slack-compatible incoming webhooks show), or any notification block
already saved on the server (Slack, Microsoft Teams, SendGrid email, PagerDuty, ...).

Why a command and not ``prefect.yaml``: a deployment's ``triggers:`` only ever run their own
deployment (Prefect builds a ``run-deployment`` action from them and ignores other keys), and
a ``send-notification`` action names its block by id, which differs per server. ``prefect
automation create --from-file`` creates a new copy on every run; :func:`install_alerts` finds
the automations by name and updates them, so it can run at every deploy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final, Literal, cast
from urllib.parse import urlsplit
from uuid import UUID

import httpx
from prefect.blocks.notifications import CustomWebhookNotificationBlock
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.events.actions import SendNotification
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
from prefect.exceptions import ObjectNotFound
from prefect.settings import PREFECT_API_URL
from pydantic import BaseModel, ConfigDict

from flows.defaults import DEFAULT_ALERT_BLOCK as DEFAULT_BLOCK_NAME
from flows.records.situations import FLOW_RUN_CRASHED_EVENT, FLOW_RUN_FAILED_EVENT, SITUATIONS, Raiser, Situation
from monitoring import mask_url, redact_credentials

__all__ = [
    "ALERTS",
    "DEFAULT_BLOCK_NAME",
    "FLOW_RUN_CRASHED_EVENT",
    "FLOW_RUN_FAILED_EVENT",
    "AlertDefinition",
    "AlertsConfigurationError",
    "AlertsServerError",
    "InstallResult",
    "InstalledAutomation",
    "install_alerts",
    "webhook_block",
]

# Prefect's rule for a block document's name (prefect.types.names.BlockDocumentName), checked before saving.
_BLOCK_NAME: Final = re.compile(r"[a-z0-9-]+")
_MODEL_VERSIONS: Final = {"prefect.resource.id": "mlmodel.*"}
# A flow's runs (Prefect's flow-run state events): the flow-run resource, related to the flow
# by name (role "flow": "refit", flows.pipelines.refit; "monitor", flows.pipelines.monitor).
_FLOW_RUNS: Final = {"prefect.resource.id": "prefect.flow-run.*"}
WEBHOOK_BLOCK_TYPE: Final = "custom-webhook"

# What the default webhook block POSTs (CustomWebhookNotificationBlock substitutes {{subject}},
# {{body}} and {{name}}): `text` for Slack-compatible receivers, the parts for everything else.
_WEBHOOK_JSON: Final = {"text": "{{subject}}\n\n{{body}}", "subject": "{{subject}}", "body": "{{body}}",
                        "source": "{{name}}"}

# --------------------------------------------------------------------------- the templates
# Rendered by the Prefect server (a sandboxed Jinja environment) with the triggering `event`
# (resource labels model.name/.version/.alias, the payload) and, from the event's related
# resources, the `flow_run` that emitted it. A number the payload lacks, or null (NaN), prints
# as "n/a" rather than failing the notification.

_NUMBER = "{% macro num(x, f='%.4g') %}{{ f|format(x) if x is number and x is not boolean else 'n/a' }}{% endmacro %}"
_VERSION = ("{{ event.resource['model.name'] }} version {{ event.resource['model.version'] }} "
            "(@{{ event.resource['model.alias'] }})")
_SHORT = "{{ event.resource['model.name'] }} v{{ event.resource['model.version'] }} @{{ event.resource['model.alias'] }}"
_FLOW_RUN_AND_EVENT = (
    "{% if flow_run %}Prefect flow run: {{ flow_run.name }} ({{ flow_run.id }})"
    "{% set link = flow_run|ui_url %}{% if link %} {{ link }}{% endif %}\n{% endif %}"
    "Event: {{ event.event }} {{ event.id }} at {{ event.occurred }}"
)
_RUNS = (
    "{% if event.payload.mlflow_run_id %}MLflow run: {{ event.payload.mlflow_run_id }}"
    " (experiment {{ event.payload.mlflow_experiment | default('thermostat-monitoring', true) }})\n{% endif %}"
    + _FLOW_RUN_AND_EVENT
)

# What fired, each test with its statistic and p-value; the window's T next to the registered T.
# A test that did not fire is never named (its numbers are in the check's run).
_FIRST_FIRED: Final = (
    "{% set f = (event.payload.fired or [{}])[0] %}{{ f.label | default('drift', true) }}"
    "{% if f.statistic %}: {{ f.statistic }}{% endif %}{% if f.p_value is number %}, "
    "p={{ num(f.p_value, '%.3g') }}{% endif %}"
)
DRIFT_SUBJECT: Final = (
    _NUMBER + "[thermostat] calibration drift: " + _SHORT + " (" + _FIRST_FIRED + ")"
)
DRIFT_BODY: Final = _NUMBER + (
    "Calibration drift on " + _VERSION + ".\n"
    "Fired:\n{% for f in event.payload.fired or [] %}- {{ f.label }}: {{ f.statistic }}"
    "{% if f.p_value is number %}, p-value {{ num(f.p_value, '%.3g') }} (level {{ num(f.level, '%.3g') }})"
    "{% endif %}. {{ f.sentence }}\n{% else %}- {{ event.payload.tests_fired|join(', ') if "
    "event.payload.tests_fired else 'none' }}\n{% endfor %}"
    "{% set t = event.payload.temperature_test %}{% if t %}Window T {{ num(t.window_temperature) }} "
    "[{{ num(t.window_temperature_low) }}, {{ num(t.window_temperature_high) }}] next to the registered T "
    "{{ num(event.payload.temperature) }} (the reference's {{ num(t.reference_temperature) }}; ratio "
    "{{ num(t.ratio) }} [{{ num(t.ratio_low) }}, {{ num(t.ratio_high) }}]).\n{% endif %}"
    "Labelled rows: {{ event.payload.n }}.\n"
    "Window: {{ event.payload.window_start }} .. {{ event.payload.window_end }}.\n"
    "What happens now: the refit deployment refits this version's temperature on its labelled traffic from "
    "{{ event.payload.refit_window_start | default(event.payload.window_start, true) }} to "
    "{{ event.payload.window_end }}{% if event.payload.refit_window_start and event.payload.refit_window_start != "
    "event.payload.window_start %} (the sequential rule's change point: the rows before it predate the drift)"
    "{% endif %}; if the refit is refused, a 'refit refused' alert follows.\n"
    "{% if event.payload.shift_kind %}Shift diagnosis: {{ event.payload.shift_kind }} (fix: "
    "{{ event.payload.shift_fix }}).\n{% endif %}" + _RUNS
)

LABEL_SHIFT_SUBJECT: Final = (
    _NUMBER + "[thermostat] label shift: " + _SHORT
    + " (class priors moved by {{ num(event.payload.prior_shift, '%.3f') }} TV, p={{ num(event.payload.p_value, "
      "'%.3g') }}){% if not event.payload.confirmed %}, from unlabelled rows{% endif %}"
)
LABEL_SHIFT_BODY: Final = _NUMBER + (
    "Label shift on " + _VERSION + ": the class mix of its traffic moved, not its calibration.\n"
    "Class priors of {{ event.payload.served_n }} served rows (EM, {{ event.payload.em_iterations }} iterations"
    "{% if not event.payload.em_converged %}, NOT converged{% endif %}) against the registration reference's "
    "(n={{ event.payload.reference_n }}): total variation {{ num(event.payload.prior_shift, '%.3f') }} "
    "[{{ num(event.payload.prior_shift_low, '%.3f') }}, {{ num(event.payload.prior_shift_high, '%.3f') }}], "
    "chi-square {{ num(event.payload.statistic, '%.1f') }} on {{ event.payload.df }} df, p-value "
    "{{ num(event.payload.p_value, '%.3g') }} (level {{ num(event.payload.level, '%.3g') }}).\n"
    "Priors now: {% for p in event.payload.priors %}{{ num(p, '%.3f') }}{% if not loop.last %}, {% endif %}"
    "{% endfor %} (reference: {% for p in event.payload.reference_priors %}{{ num(p, '%.3f') }}"
    "{% if not loop.last %}, {% endif %}{% endfor %}).\n"
    "{% if event.payload.confirmed %}Labelled rows ({{ event.payload.labelled_n }}) confirm it: re-weighted to "
    "their own class mix, the drift tests are quiet (at the deployed ones: {{ event.payload.tests_fired|join(', ') if "
    "event.payload.tests_fired else 'none' }}).{% else %}Too few labelled rows yet: the next labelled check must "
    "confirm it.{% endif %}\n"
    "Window: {{ event.payload.window_start }} .. {{ event.payload.window_end }}.\n"
    "What happens now: no temperature refit (a T fitted to a class mix is the wrong fix and stays wrong when the "
    "mix returns); the fix is a prior correction of this version ({{ event.payload.shift_fix }}), which the "
    "correct-priors deployment registers (T unchanged).\n" + _RUNS
)

REFIT_FAILED_SUBJECT: Final = (
    "[thermostat] refit refused: " + _SHORT
    + "{% if event.payload.escalation %} — {{ event.payload.escalation }}{% else %} "
      "(step {{ event.payload.step }}){% endif %}"
)
REFIT_FAILED_BODY: Final = _NUMBER + (
    "The refit of " + _VERSION + " registered nothing: refused at step {{ event.payload.step }}.\n"
    "Reason: {{ event.payload.reason }}\n"
    "{% if event.payload.escalation %}Escalation: {{ event.payload.escalation }} — a new temperature cannot fix "
    "this version.\n{% elif event.payload.step == 'guard' %}No escalation: the version keeps serving with its monitor "
    "and gate; a refit that would weaken them is never registered (a refit on more, or later, traffic may pass)."
    "\n{% elif event.payload.within_parent_interval %}No escalation: the refit was fitted on too little drifted data "
    "(see the reason); {% if event.payload.retry_at %}its retry is scheduled at {{ event.payload.retry_at }} (flow "
    "run {{ event.payload.retry_flow_run_id }}), reading from {{ event.payload.window_start }} up to its own start."
    "{% else %}a refit reading from where the drift began, once more of the drifted traffic is labelled, may "
    "succeed.{% endif %}\n{% else %}No escalation: a later refit may succeed (the reason says what this one lacked).\n"
    "{% endif %}"
    "Version: T {{ num(event.payload.temperature) }}, registration baseline ECE "
    "{{ num(event.payload.baseline_ece) }}.\n"
    "{% if event.payload.verify_n %}Verification on the newer {{ event.payload.verify_n }} rows: ECE "
    "{{ num(event.payload.ece_before) }} -> {{ num(event.payload.ece_after) }} at T "
    "{{ num(event.payload.temperature_after) }}, NLL change {{ num(event.payload.nll_change) }} "
    "({{ event.payload.nll_verdict }}), p-value {{ num(event.payload.p_value, '%.3g') }}, reliability shape "
    "{{ event.payload.shape }}.\n{% endif %}"
    "Window: {{ event.payload.window_start }} .. {{ event.payload.window_end }}.\n"
    "The version keeps serving with its current temperature.\n" + _RUNS
)

INSUFFICIENT_DATA_SUBJECT: Final = (
    "[thermostat] no labels: " + _SHORT + ": {{ event.payload.streak }} checks in a row with too few labelled rows"
)
INSUFFICIENT_DATA_BODY: Final = (
    "{{ event.payload.streak }} consecutive checks of " + _VERSION + " had fewer labelled rows than the minimum "
    "window: {{ event.payload.n }} < {{ event.payload.min_window }} in the latest window "
    "{{ event.payload.window_start }} .. {{ event.payload.window_end }}.\n"
    "{% if event.payload.predicted_accuracy is number %}Meanwhile the early warning (unlabelled traffic) predicts "
    "an accuracy of {{ '%.3f'|format(event.payload.predicted_accuracy) }}.\n{% endif %}"
    "The monitor cannot say calibrated or drift for this version until labels arrive: check that the labels are attached "
    "to the prediction log and that the serving process logs its predictions (THERMOSTAT_PREDICTION_LOG_URL).\n"
    + _RUNS
)

UNDETERMINED_SUBJECT: Final = (
    "[thermostat] undetermined: " + _SHORT + ": {{ event.payload.streak }} checks in a row could not establish "
    "calibration"
)
UNDETERMINED_BODY: Final = _NUMBER + (
    "{{ event.payload.streak }} consecutive checks of " + _VERSION + " saw no drift but could not establish "
    "calibration within the equivalence margin of T (relative, {{ num(event.payload.margin, '%.2g') }}): the monitor could not tell a drift from a shift that small.\n"
    "Latest window {{ event.payload.window_start }} .. {{ event.payload.window_end }}: {{ event.payload.n }} labelled "
    "rows, window T {{ num(event.payload.window_temperature) }} [{{ num(event.payload.window_temperature_low) }}, "
    "{{ num(event.payload.window_temperature_high) }}] next to the registered T {{ num(event.payload.temperature) }}.\n"
    "{% if event.payload.rows_to_decide %}About {{ event.payload.rows_to_decide }} labelled rows a window would "
    "decide: label more traffic, or lengthen the window (THERMOSTAT_MONITOR_WINDOW).{% else %}No window size decides "
    "at this estimate: the version's reference (the rows T was fitted on) is too small for the margin; re-register "
    "on more rows, or widen the margin (THERMOSTAT_DRIFT_TEMPERATURE_MARGIN).{% endif %}\n" + _RUNS
)

CONFIDENCE_SHIFT_SUBJECT: Final = (
    _NUMBER + "[thermostat] notice: confidence shift on " + _SHORT
    + " (confidences {{ event.payload.direction }}, predicted accuracy {{ num(event.payload.predicted_accuracy, "
      "'%.3f') }}); labelled check scheduled"
)
CONFIDENCE_SHIFT_BODY: Final = _NUMBER + (
    "Early warning (a notice, not a drift verdict) on " + _VERSION + ": the confidences it served moved "
    "{% if event.payload.direction == 'up' %}up (more confident){% elif event.payload.direction == 'down' %}down "
    "(less confident){% else %}{{ event.payload.direction }}{% endif %} from its registration reference: mean "
    "confidence {{ num(event.payload.mean_confidence, '%.3f') }} against the reference's "
    "{{ num(event.payload.reference_mean_confidence, '%.3f') }}, p-value {{ num(event.payload.p_value, '%.3g') }}, "
    "on {{ event.payload.n }} served rows ({{ event.payload.labelled }} labelled so far).\n"
    "If the version is still calibrated, these rows should show an accuracy of "
    "{{ num(event.payload.predicted_accuracy, '%.3f') }} [{{ num(event.payload.predicted_accuracy_low, '%.3f') }}, "
    "{{ num(event.payload.predicted_accuracy_high, '%.3f') }}] once labelled.\n"
    "Window: {{ event.payload.window_start }} .. {{ event.payload.window_end }}.\n"
    "What happens now: the monitor deployment checks the model again on labelled traffic once labels had time to "
    "arrive (its trigger's schedule_after); a 'calibration drift' alert follows if that check finds drift.\n"
    + _RUNS
)

UNREADABLE_VERSION_SUBJECT: Final = (
    "[thermostat] version not checked: " + _SHORT + ": its registration record cannot be read"
)
UNREADABLE_VERSION_BODY: Final = (
    "The {{ event.payload.flow }} flow could not check " + _VERSION + "{% if event.payload.aliases|length > 1 %} "
    "(aliases {{ event.payload.aliases|join(', ') }}){% endif %}: its registration record cannot be read from its "
    "tags.\n"
    "Problem: {{ event.payload.problem }}\n"
    "Window not checked: {{ event.payload.window_start }} .. {{ event.payload.window_end }}.\n"
    "The version keeps serving, unmonitored: no drift, label-shift or insufficient-data alert can come for it until "
    "its tags are restored (a tag deleted or edited by hand: the registration run in MLflow still holds the "
    "values) or a new version (a post-finetune or a refit) replaces it. The flow run that met it ends Failed "
    "naming it.\n" + _FLOW_RUN_AND_EVENT
)

# From the flow run's own resource (name, state) and, when the server can read it, the flow
# run itself (its parameters: the model, version and alias the refit was for).
_REFIT_TARGET = (
    "{% if flow_run and flow_run.parameters.model_name %}{{ flow_run.parameters.model_name }}"
    "{% if flow_run.parameters.model_version %} v{{ flow_run.parameters.model_version }}{% endif %}"
    " @{{ flow_run.parameters.alias | default('champion', true) }}{% else %}a model version{% endif %}"
)
REFIT_CRASHED_SUBJECT: Final = (
    "[thermostat] refit {{ 'crashed' if event.resource['prefect.state-name'] == 'Crashed' else 'errored' }}: "
    + _REFIT_TARGET + " (flow run {{ event.resource['prefect.resource.name'] }})"
)
REFIT_CRASHED_BODY: Final = (
    "The refit flow run {{ event.resource['prefect.resource.name'] }} of " + _REFIT_TARGET + " ended "
    "{{ event.resource['prefect.state-name'] }} before it reported an outcome, so no 'refit refused' alert was "
    "sent for it.\n"
    "State message: {{ event.resource['prefect.state-message'] or '(none)' }}\n"
    "{% if flow_run and flow_run.parameters.model_name %}Window: "
    "{{ flow_run.parameters.window_start | default('the last monitor_window', true) }} .. "
    "{{ flow_run.parameters.window_end | default('now', true) }}"
    "{% if flow_run.parameters.drift_run_id %}; caused by the drift check in MLflow run "
    "{{ flow_run.parameters.drift_run_id }}{% endif %}.\n{% endif %}"
    "The version keeps serving with its current temperature unless the registry shows a new version from this "
    "refit; a registration it left half done is completed or removed by the model's next refit or "
    "post-finetune. Read the flow run's logs, fix the cause, then run the refit again "
    "(prefect deployment run refit/refit).\n"
    "{% if flow_run %}Prefect flow run: {{ flow_run.name }} ({{ flow_run.id }})"
    "{% set link = flow_run|ui_url %}{% if link %} {{ link }}{% endif %}\n{% endif %}"
    "Event: {{ event.event }} {{ event.id }} at {{ event.occurred }}"
)


# Which monitor flow (the related resource of role "flow": monitor or monitor-fleet) and what it checked.
_MONITOR_FLOW = "{% set monitor_flow = event.resource_in_role['flow'].name or 'monitor' %}"
_MONITOR_TARGET = (
    "{% if flow_run and flow_run.parameters.model_name %}{{ flow_run.parameters.model_name }}"
    "{% elif monitor_flow == 'monitor-fleet' %}the fleet{% if flow_run and flow_run.parameters.models %} "
    "({{ flow_run.parameters.models|join(', ') }}){% endif %}{% else %}a model{% endif %}"
)
MONITOR_FAILED_SUBJECT: Final = (
    _MONITOR_FLOW + "[thermostat] monitor {{ 'crashed' if event.resource['prefect.state-name'] == 'Crashed' else "
    "'failed' }}: " + _MONITOR_TARGET + ": no verdict (flow run {{ event.resource['prefect.resource.name'] }})"
)
MONITOR_FAILED_BODY: Final = (
    _MONITOR_FLOW + "The {{ monitor_flow }} flow run {{ event.resource['prefect.resource.name'] }}"
    "{% if flow_run and flow_run.parameters.model_name %} checking {{ flow_run.parameters.model_name }}"
    "{% if flow_run.parameters.aliases %} (aliases {{ flow_run.parameters.aliases|join(', ') }}){% endif %}"
    "{% elif monitor_flow == 'monitor-fleet' %} checking " + _MONITOR_TARGET + "{% endif %}"
    " ended {{ event.resource['prefect.state-name'] }}: its serving versions have no verdict for this "
    "window, and no drift alert can come from it.\n"
    "State message: {{ event.resource['prefect.state-message'] or '(none)' }}\n"
    "The failed check's MLflow run (experiment thermostat-monitoring, unless THERMOSTAT_MONITORING_EXPERIMENT_NAME "
    "says otherwise) is closed FAILED with the error (tag thermostat.check_error), and the dashboard shows "
    "'check failed' for the version; a run a crash left open is closed by the version's next check; a version whose "
    "registration record cannot be read has no check run (the message names it and why). Read the flow "
    "run's logs and fix the cause (a missing prediction log, MLflow unreachable, a version tag deleted, ...); the "
    "next scheduled check runs as usual.\n"
    "{% if flow_run %}Prefect flow run: {{ flow_run.name }} ({{ flow_run.id }})"
    "{% set link = flow_run|ui_url %}{% if link %} {{ link }}{% endif %}\n{% endif %}"
    "Event: {{ event.event }} {{ event.id }} at {{ event.occurred }}"
)


@dataclass(frozen=True, slots=True)
class AlertDefinition:
    """One alert: the event it listens for, its automation's (stable) name and its templates.

    ``repeat_after`` is the trigger's ``within``: 0 sends one notification per event; a
    positive time sends at most one per resource in that time. ``match`` selects the event's
    resource (default: every model version), ``match_related`` its related resources (default:
    any); the trigger fires per resource (``for_each`` ``prefect.resource.id``).
    """

    key: str
    event: str
    name: str
    description: str
    subject: str
    body: str
    repeat_after: timedelta = timedelta(0)
    match: Mapping[str, str] = field(default_factory=lambda: dict(_MODEL_VERSIONS))
    match_related: Mapping[str, str | list[str]] = field(default_factory=dict)
    situation: str = ""
    """The key of the situation it announces (:data:`flows.records.situations.SITUATIONS`)."""

    @classmethod
    def of(cls, situation: Situation, raiser: Raiser, *, description: str, subject: str, body: str) -> AlertDefinition:
        """The automation of one way ``situation`` is raised (``raiser``): its key, event and name from
        the situations' table (:mod:`flows.records.situations`), its texts here. A Thermostat event
        fires per model version; a flow run's state, per run of the flow the raiser names."""
        if raiser.flow is None:
            return cls(key=raiser.automation, event=raiser.event, name=raiser.name, description=description,
                       subject=subject, body=body, situation=situation.key)
        match = dict(_FLOW_RUNS) | ({} if raiser.state_message is None else
                                    {"prefect.state-message": raiser.state_message})
        flows: str | list[str] = raiser.flow if isinstance(raiser.flow, str) else list(raiser.flow)
        return cls(key=raiser.automation, event=raiser.event, name=raiser.name, description=description,
                   subject=subject, body=body, match=match, situation=situation.key,
                   match_related={"prefect.resource.role": "flow", "prefect.resource.name": flows})

    def automation(self, block_document_id: UUID) -> AutomationCore:
        """The automation that sends this alert through the notification block ``block_document_id``."""
        return AutomationCore(
            name=self.name,
            description=self.description,
            enabled=True,
            tags=["thermostat"],
            trigger=EventTrigger(
                match=dict(self.match),
                match_related=dict(self.match_related),
                expect={self.event},
                for_each={"prefect.resource.id"},
                posture=Posture.Reactive,
                threshold=1,
                within=self.repeat_after,
            ),
            actions=[SendNotification(block_document_id=block_document_id, subject=self.subject, body=self.body)],
            actions_on_trigger=[],
            actions_on_resolve=[],
        )


# Each automation's texts, by its key in the situations' table (which says its event and name).
_TEXTS: Final[Mapping[str, tuple[str, str, str]]] = {
    "drift": ("A serving model version's calibration drifted (the monitor's check): ECE, p-value, the test that "
              "fired, the MLflow run. A refit of the version was requested.", DRIFT_SUBJECT, DRIFT_BODY),
    "label_shift": ("A serving version's traffic changed its class mix (the monitor's shift diagnosis): the priors, "
                    "the reference's and the prior test. No temperature refit was requested.", LABEL_SHIFT_SUBJECT,
                    LABEL_SHIFT_BODY),
    "refit_refused": ("A refit registered nothing (refused or not verified): the step, the reason and the "
                      "escalation.", REFIT_FAILED_SUBJECT, REFIT_FAILED_BODY),
    "insufficient_data": ("A serving version had too few labelled rows in several consecutive checks (the monitor "
                          "emits the event when the streak reaches its threshold and at each multiple).",
                          INSUFFICIENT_DATA_SUBJECT, INSUFFICIENT_DATA_BODY),
    "undetermined": ("A serving version's checks saw no drift but could not establish calibration several times in "
                     "a row (the monitor emits the event when the streak reaches its threshold and at each multiple): "
                     "it could not have seen a drift of the margin's size.", UNDETERMINED_SUBJECT, UNDETERMINED_BODY),
    "confidence_shift": ("Notice: a serving version's confidences moved from its registration reference before "
                         "labels could tell (the early warning); a labelled check of the model is scheduled.",
                         CONFIDENCE_SHIFT_SUBJECT, CONFIDENCE_SHIFT_BODY),
    "refit_crashed": ("A run of the refit flow crashed (its process or infrastructure died) before reporting an "
                      "outcome: no refit_failed event was emitted for it.", REFIT_CRASHED_SUBJECT, REFIT_CRASHED_BODY),
    "refit_errored": ("A run of the refit flow failed on an exception (e.g. the checkpoint could not be fetched) "
                      "before reporting an outcome. A refused refit also ends Failed, with its reason as the "
                      "message: that one is the refit refused alert's.", REFIT_CRASHED_SUBJECT, REFIT_CRASHED_BODY),
    "monitor_failed": ("A run of the monitor or monitor-fleet flow failed (any cause: the prediction log missing, "
                       "MLflow unreachable, a version that cannot be read, a bug): its versions have no verdict for "
                       "the window.", MONITOR_FAILED_SUBJECT, MONITOR_FAILED_BODY),
    "monitor_crashed": ("A run of the monitor or monitor-fleet flow crashed (its process or infrastructure died): its "
                        "versions have no verdict for the window.", MONITOR_FAILED_SUBJECT, MONITOR_FAILED_BODY),
    "unreadable_version": ("A serving version could not be checked: its registration record cannot be read from "
                           "its tags (a tag deleted or edited by hand). It serves unmonitored until that is fixed.",
                           UNREADABLE_VERSION_SUBJECT, UNREADABLE_VERSION_BODY),
}

ALERTS: Final = tuple(
    AlertDefinition.of(situation, raiser, description=_TEXTS[raiser.automation][0],
                       subject=_TEXTS[raiser.automation][1], body=_TEXTS[raiser.automation][2])
    for situation in SITUATIONS for raiser in situation.raised_by
)
"""One automation per way each situation is raised (:data:`flows.records.situations.SITUATIONS`), in its order."""


# --------------------------------------------------------------------------- install


class AlertsConfigurationError(ValueError):
    """An option or setting is wrong (exit 2): the message names the flag or variable."""


class AlertsServerError(RuntimeError):
    """The Prefect API could not be reached or refused a request (exit 3)."""


class InstalledAutomation(BaseModel):
    """One automation as installed: ``status`` is ``created`` or ``updated``; ``removed_duplicates``
    counts automations of the same name that were deleted."""

    model_config = ConfigDict(frozen=True)

    key: str
    name: str
    event: str
    id: str
    status: Literal["created", "updated"]
    removed_duplicates: int = 0


class InstallResult(BaseModel):
    """What :func:`install_alerts` did (``--json``: its ``model_dump``): the block the notifications
    go through, the automations. ``api_url`` is the Prefect API with its credentials masked."""

    model_config = ConfigDict(frozen=True)

    api_url: str
    block: str
    block_id: str
    block_status: Literal["saved", "existing"]
    destination: str | None
    automations: tuple[InstalledAutomation, ...]

    def text(self) -> str:
        where = f"; POSTs JSON to {self.destination}" if self.destination else ""
        lines = [f"notification block {self.block} ({self.block_status}, id {self.block_id}{where})"]
        for automation in self.automations:
            removed = f"; {automation.removed_duplicates} duplicate(s) removed" if automation.removed_duplicates else ""
            lines.append(f"automation {automation.name!r} on {automation.event}: {automation.status} "
                         f"(id {automation.id}{removed})")
        lines.append(f"on the Prefect server at {self.api_url}")
        return "\n".join(lines)


def _check_webhook_url(url: str) -> str:
    """The URL, or :class:`AlertsConfigurationError` naming ``--webhook-url``; returns scheme://host:port."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise AlertsConfigurationError(f"--webhook-url {url!r} is not a URL ({error})") from error
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url):
        raise AlertsConfigurationError(
            f"--webhook-url {url!r} is not an http(s) URL with a host; give the URL the notifications are POSTed "
            "to, e.g. https://hooks.example.com/thermostat")
    return f"{parts.scheme}://{parts.hostname}{'' if port is None else f':{port}'}"


def webhook_block(url: str) -> CustomWebhookNotificationBlock:
    """The default notification block: a ``custom-webhook`` that POSTs the alert as JSON to ``url``
    (``text`` = subject and body, for Slack-compatible receivers; ``subject``, ``body``, ``source``)."""
    _check_webhook_url(url)
    return CustomWebhookNotificationBlock(name="thermostat", url=url, method="POST", json_data=dict(_WEBHOOK_JSON),
                                          headers=None, cookies=None, timeout=10)


def _api_url() -> tuple[str, str]:
    """``PREFECT_API_URL`` as set (to redact from messages) and as shown (its credentials masked)."""
    url = PREFECT_API_URL.value()
    if not url:
        raise AlertsConfigurationError(
            "PREFECT_API_URL is not set: point it at the Prefect server the worker uses, e.g. "
            "export PREFECT_API_URL=http://127.0.0.1:4200/api (without it the automations would go to a "
            "temporary server that disappears with this command)")
    url, shown = str(url), mask_url(str(url))
    try:
        httpx.URL(url)
    except httpx.InvalidURL as error:
        # A parser that cuts the URL inside the password quotes a piece of it ("Invalid port: 'Pr3f'"),
        # however short: with credentials in the URL its message is not shown.
        said = f" ({error})" if shown == url else ""
        raise AlertsConfigurationError(
            f"PREFECT_API_URL {shown} is not a URL the Prefect client can read{said}; if its password holds reserved "
            "characters, percent-encode them (/ as %2F, # as %23, ? as %3F, @ as %40, : as %3A)"
        ) from None
    return url, shown


def _find_block(client: SyncPrefectClient, reference: str) -> tuple[str, UUID]:
    """A saved notification block by ``TYPE/NAME`` or by a name that is unique among notification blocks."""
    if "/" in reference:
        slug, _, name = reference.partition("/")
        try:
            document = client.read_block_document_by_name(name, slug, include_secrets=False)
        except ObjectNotFound:
            raise AlertsConfigurationError(f"--block {reference!r}: there is no {slug} block named {name!r} on the "
                                           "server (prefect block ls lists them)") from None
        found = [document]
    else:
        documents, offset = [], 0
        while True:
            page = client.read_block_documents(offset=offset, limit=200, include_secrets=False)
            documents += [d for d in page if d.name == reference]
            if len(page) < 200:
                break
            offset += 200
        found = documents
    notifying = [d for d in found if d.block_schema is not None and "notify" in d.block_schema.capabilities]
    names = [f"{d.block_type.slug if d.block_type else '?'}/{d.name}" for d in found]
    if not notifying:
        if found:
            raise AlertsConfigurationError(f"--block {reference!r}: {', '.join(names)} cannot send notifications; "
                                           "give a notification block (slack-webhook, custom-webhook, sendgrid-email ...)")
        raise AlertsConfigurationError(f"--block {reference!r}: no block of that name on the server; save one first "
                                       "(see `thermostat alerts install --help`) or use --webhook-url")
    if len(notifying) > 1:
        choices = ", ".join(f"{d.block_type.slug if d.block_type else '?'}/{d.name}" for d in notifying)
        raise AlertsConfigurationError(f"--block {reference!r} names {len(notifying)} notification blocks ({choices}); "
                                       "give TYPE/NAME")
    document = notifying[0]
    return f"{document.block_type.slug if document.block_type else '?'}/{document.name}", document.id


def install_alerts(
    *, webhook_url: str | None = None, block: str | None = None, block_name: str = DEFAULT_BLOCK_NAME,
    alerts: Sequence[AlertDefinition] = ALERTS,
) -> InstallResult:
    """Create or update the notification block and the alert automations on the Prefect server
    at ``PREFECT_API_URL``; idempotent (a re-run updates the automations found by name).

    Parameters
    ----------
    webhook_url : save (or overwrite) a ``custom-webhook`` block named ``block_name`` that POSTs
        to this URL, and send the alerts through it.
    block : instead, send them through a notification block already saved on the server,
        ``TYPE/NAME`` (``slack-webhook/ops``) or a ``NAME`` unique among notification blocks.
    block_name : the name of the webhook block (default ``thermostat-alerts``): lower-case letters,
        digits and dashes, as Prefect names blocks.

    Raises
    ------
    AlertsConfigurationError
        Neither or both of ``webhook_url`` and ``block``, a bad URL or block name, an unknown
        block, ``PREFECT_API_URL`` not set or not readable. Messages never show its credentials.
    AlertsServerError
        The Prefect API cannot be reached or refuses a request.
    """
    if (webhook_url is None) == (block is None):
        raise AlertsConfigurationError("give exactly one of --webhook-url URL and --block NAME")
    destination = _check_webhook_url(webhook_url) if webhook_url is not None else None
    if webhook_url is not None and not _BLOCK_NAME.fullmatch(block_name):
        raise AlertsConfigurationError(f"--block-name {block_name!r} is not a Prefect block name: use lower-case "
                                       f"letters, digits and dashes, e.g. {DEFAULT_BLOCK_NAME}")
    api_url, shown = _api_url()
    try:
        with get_client(sync_client=True) as client:
            unhealthy = client.api_healthcheck()
            if unhealthy is not None:
                raise AlertsServerError(f"the Prefect API at {shown} cannot be reached: "
                                        f"{redact_credentials(str(unhealthy), api_url)}")
            reference, block_id, status = _notification_block(client, webhook_url, block, block_name)
            installed = [_install(client, alert, block_id) for alert in alerts]
    except httpx.HTTPStatusError as error:
        detail = redact_credentials(error.response.text[:500], api_url)
        raise AlertsServerError(f"the Prefect API at {shown} refused a request: {error.response.status_code} "
                                f"{detail}") from error
    except (httpx.HTTPError, OSError) as error:
        raise AlertsServerError(f"the Prefect API at {shown} cannot be reached: "
                                f"{redact_credentials(str(error), api_url)}") from error
    return InstallResult(api_url=shown, block=reference, block_id=str(block_id), block_status=status,
                         destination=destination, automations=tuple(installed))


def _notification_block(
    client: SyncPrefectClient, webhook_url: str | None, block: str | None, block_name: str,
) -> tuple[str, UUID, Literal["saved", "existing"]]:
    """The block the alerts are sent through (``TYPE/NAME``, its id, whether it was saved now):
    the webhook block saved under ``block_name``, or the existing ``block``."""
    if webhook_url is not None:
        # Block.save is sync here (called outside an event loop): it returns the document's id.
        block_id = cast(UUID, webhook_block(webhook_url).save(block_name, overwrite=True))
        return f"{WEBHOOK_BLOCK_TYPE}/{block_name}", block_id, "saved"
    assert block is not None
    reference, block_id = _find_block(client, block)
    return reference, block_id, "existing"


def _install(client: SyncPrefectClient, alert: AlertDefinition, block_id: UUID) -> InstalledAutomation:
    """Create ``alert``'s automation, or update the one of its name (deleting copies of it)."""
    automation = alert.automation(block_id)
    existing = client.read_automations_by_name(alert.name)
    if not existing:
        created = client.create_automation(automation)
        return InstalledAutomation(key=alert.key, name=alert.name, event=alert.event, id=str(created), status="created")
    keep, *extra = existing
    client.update_automation(keep.id, automation)
    for duplicate in extra:
        client.delete_automation(duplicate.id)
    return InstalledAutomation(key=alert.key, name=alert.name, event=alert.event, id=str(keep.id), status="updated",
                               removed_duplicates=len(extra))
