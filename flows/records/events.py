"""The Prefect events Thermostat emits, each a typed payload with its writer and its keys.

An automation (``prefect.yaml``'s refit trigger, the alert templates of ``thermostat alerts
install``) reads an event's payload by key; each key it may read is declared here, by the type
that writes it (:meth:`EventPayload.payload_keys`), and a test holds every key read in ``prefect.yaml``
and in the templates to these declarations. Payloads are JSON-safe (NaN as None, times ISO 8601).

``thermostat.calibration.drift`` (:class:`DriftEvent`)
    The monitor found drift on a serving version and recommends a refit (outside the
    cool-down): the check's flat report (:data:`monitoring.DRIFT_PAYLOAD_KEYS`) and where the
    check's MLflow run is. The ``refit`` deployment's trigger listens for it.
``thermostat.calibration.label-shift`` (:class:`LabelShiftEvent`)
    The check's shift diagnosis is a label shift (the served rows' class priors moved, and at the
    re-weighted posteriors the drift tests are quiet): no temperature refit is started; the
    payload holds what a prior correction needs (EM's priors, the reference's, the prior test's
    numbers) and whether labelled rows confirmed it (:data:`monitoring.LABEL_SHIFT_PAYLOAD_KEYS`).
    Emitted instead of the drift event, at most once per version per cool-down, on checks of the
    current window.
``thermostat.calibration.confidence_shift`` (:class:`ConfidenceShiftEvent`)
    The early warning: the served confidences moved away from the registration reference.
``thermostat.calibration.insufficient_data`` (:class:`InsufficientDataEvent`)
    ``insufficient_data_streak`` checks in a row had too few labelled rows.
``thermostat.calibration.undetermined`` (:class:`UndeterminedEvent`)
    ``undetermined_streak`` checks in a row saw no drift but could not establish calibration:
    the monitor could not tell a drift from a shift inside the equivalence margin
    (``rows_to_decide`` says what would decide).
``thermostat.calibration.refit_failed`` (:class:`RefitFailedEvent`)
    A refit registered nothing: refused, or not verified.
``thermostat.calibration.refitted`` (:class:`RefittedEvent`)
    A refit registered a new version.
``thermostat.calibration.unreadable`` (:class:`UnreadableVersionEvent`)
    A serving version's registration record cannot be read from its tags (a tag deleted or
    edited by hand): the monitor cannot check it. Emitted by every monitor run that meets it.

No Prefect here (:mod:`flows.orchestration.events` emits them), no MLflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Self

from pydantic import BaseModel, ConfigDict, Field, computed_field
from pydantic.fields import FieldInfo

from calibration import json_safe
from monitoring import DRIFT_PAYLOAD_KEYS, LABEL_SHIFT_PAYLOAD_KEYS

__all__ = [
    "CONFIDENCE_SHIFT_EVENT", "DRIFT_EVENT", "EVENT_PAYLOADS", "INSUFFICIENT_DATA_EVENT", "LABEL_SHIFT_EVENT",
    "REFITTED_EVENT", "REFIT_FAILED_EVENT", "CheckContext", "ConfidenceShiftEvent", "DriftEvent", "EventPayload",
    "InsufficientDataEvent", "LabelShiftEvent", "RefitFailedEvent", "RefittedEvent", "UNDETERMINED_EVENT",
    "UNREADABLE_VERSION_EVENT", "UndeterminedEvent", "UnreadableVersionEvent", "VERIFICATION_KEYS",
]

_EVENT_PREFIX: Final = "thermostat.calibration."
DRIFT_EVENT: Final = _EVENT_PREFIX + "drift"
CONFIDENCE_SHIFT_EVENT: Final = _EVENT_PREFIX + "confidence_shift"
INSUFFICIENT_DATA_EVENT: Final = _EVENT_PREFIX + "insufficient_data"
UNDETERMINED_EVENT: Final = _EVENT_PREFIX + "undetermined"
LABEL_SHIFT_EVENT: Final = _EVENT_PREFIX + "label-shift"
REFIT_FAILED_EVENT: Final = _EVENT_PREFIX + "refit_failed"
REFITTED_EVENT: Final = _EVENT_PREFIX + "refitted"
UNREADABLE_VERSION_EVENT: Final = _EVENT_PREFIX + "unreadable"

#: The keys of a refit's verification in its events (:func:`flows.pipelines.refit` writes them from a
#: :class:`flows.pipelines.steps.RefitVerification`); absent when the refit was refused before verifying.
VERIFICATION_KEYS: Final = (
    "verify_n", "temperature_after", "nll_verdict", "nll_change", "nll_change_low", "nll_change_high", "ece_before",
    "ece_after", "baseline_ece", "ece_tolerance", "p_value", "shape", "parent_interval", "within_parent_interval",
    "tests_fired_after", "sign_changes", "shape_message", "reasons",
)
# A refit's events name the drift that caused it (flows.records.runs.DriftCause.payload).
_CAUSE_KEYS: Final = ("drift_event_id", "drift_run_id")


def _spread(*keys: tuple[str, ...]) -> Any:
    """A field whose mapping is spread into the payload; ``keys`` are the keys it may hold."""
    return Field(json_schema_extra={"spread": [key for group in keys for key in group]})


def _spread_keys(info: FieldInfo) -> list[str] | None:
    extra = info.json_schema_extra
    return extra.get("spread") if isinstance(extra, dict) else None  # type: ignore[return-value]


class CheckContext(BaseModel):
    """Where a monitor event comes from: the serving aliases, the window, the check's MLflow run
    (None when the check wrote none: a version that never logged) and its experiment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    aliases: tuple[str, ...]
    window_start: str
    window_end: str
    mlflow_experiment: str
    mlflow_run_id: str | None


_CONTEXT_KEYS: Final = tuple(CheckContext.model_fields)


class EventPayload(BaseModel):
    """A typed event payload: ``EVENT`` its name, :meth:`to_payload` what is emitted, :meth:`payload_keys`
    every key that may be in it. A field declared with ``_spread`` (a mapping, or the check's
    :class:`CheckContext`) is spread into the payload, its keys declared beside it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    EVENT: ClassVar[str]

    def to_payload(self) -> dict[str, Any]:
        """The JSON-safe payload: the fields (computed ones too), a spread field's keys in its place."""
        payload: dict[str, Any] = {}
        for name, value in self.model_dump().items():
            info = type(self).model_fields.get(name)
            payload |= value if info is not None and _spread_keys(info) is not None else {name: value}
        return {key: json_safe(value) for key, value in payload.items()}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        """The event read back from what :meth:`to_payload` wrote (what a serving hook receives):
        each spread field gathered back from its keys, the others by name, a computed one left out.

        Raises
        ------
        ValueError
            pydantic's ``ValidationError``, naming the field, when one the event always carries is
            missing or malformed (an event from an older release).
        """
        values = {name: payload[name] for name in cls.model_fields if name in payload}
        for name, info in cls.model_fields.items():
            spread = _spread_keys(info)
            if spread is not None:
                values[name] = {key: payload[key] for key in spread if key in payload}
        return cls.model_validate(values)

    @classmethod
    def payload_keys(cls) -> frozenset[str]:
        """Every key the payload may hold (what an automation may read)."""
        found = set(cls.model_computed_fields)
        for name, info in cls.model_fields.items():
            spread = _spread_keys(info)
            found |= {name} if spread is None else set(spread)
        return frozenset(found)


class DriftEvent(EventPayload):
    """The drift event: the check's flat report (``drift_payload``) and its context."""

    EVENT: ClassVar[str] = DRIFT_EVENT
    report: Mapping[str, Any] = _spread(DRIFT_PAYLOAD_KEYS)
    context: CheckContext = _spread(_CONTEXT_KEYS)


class LabelShiftEvent(EventPayload):
    """A check diagnosed as a label shift: :func:`monitoring.label_shift_payload` and the check's context."""

    EVENT: ClassVar[str] = LABEL_SHIFT_EVENT
    diagnosis: Mapping[str, Any] = _spread(LABEL_SHIFT_PAYLOAD_KEYS)
    context: CheckContext = _spread(_CONTEXT_KEYS)


class ConfidenceShiftEvent(EventPayload):
    """The early warning's event: :class:`monitoring.EarlyWarning`'s fields and the check's context."""

    EVENT: ClassVar[str] = CONFIDENCE_SHIFT_EVENT
    warning: Mapping[str, Any] = _spread((
        "temperature", "n", "labelled", "tested", "shifted", "direction", "predicted_accuracy",
        "predicted_accuracy_low", "predicted_accuracy_high", "mean_confidence", "reference_n",
        "reference_mean_confidence", "reference_accuracy", "confidence_shift", "statistic", "bins", "p_value",
        "level", "min_rows", "labelled_accuracy", "labelled_predicted_accuracy", "confidence_level", "test", "rebinned",
        "accuracy_method"))
    context: CheckContext = _spread(_CONTEXT_KEYS)


class InsufficientDataEvent(EventPayload):
    """Too few labelled rows ``streak`` checks in a row: the latest window's ``n`` against ``min_window``,
    and the early warning's predicted accuracy meanwhile (None without one)."""

    EVENT: ClassVar[str] = INSUFFICIENT_DATA_EVENT
    context: CheckContext = _spread(_CONTEXT_KEYS)
    streak: int = 0
    n: int = 0
    min_window: int = 0
    predicted_accuracy: float | None = None


class UndeterminedEvent(EventPayload):
    """No drift seen but calibration not established ``streak`` checks in a row: the latest window's
    ``n`` and ``rows_to_decide`` (None: no window size decides, the reference's own interval is too
    wide for the margin), its T with its interval next to the registered ``temperature``, and the
    ``margin``: the policy's equivalence margin, within which calibration was not established."""

    EVENT: ClassVar[str] = UNDETERMINED_EVENT
    context: CheckContext = _spread(_CONTEXT_KEYS)
    streak: int = 0
    n: int = 0
    rows_to_decide: int | None = None
    temperature: float | None = None
    window_temperature: float | None = None
    window_temperature_low: float | None = None
    window_temperature_high: float | None = None
    margin: float | None = None


class RefitFailedEvent(EventPayload):
    """A refit that registered nothing: the step that refused, why, the escalation (None: a new
    temperature may still fix it later), the version and its window, the verification when it ran,
    the refit's MLflow record and the drift that caused it."""

    EVENT: ClassVar[str] = REFIT_FAILED_EVENT
    reason: str
    step: str
    escalation: str | None
    model_name: str
    model_version: str
    alias: str
    temperature: float
    baseline_ece: float
    window_start: str
    window_end: str
    mlflow_run_id: str | None
    mlflow_experiment: str
    verification: Mapping[str, Any] = _spread(VERIFICATION_KEYS)
    cause: Mapping[str, Any] = _spread(_CAUSE_KEYS)
    retry_at: str | None = None
    """When the retry this refit scheduled starts (refused as fitted on too little drifted data); None: none."""
    retry_flow_run_id: str | None = None


class RefittedEvent(EventPayload):
    """A refit that registered ``new_version`` of ``model_name`` and moved ``alias`` to it: what a
    serving deployment needs to roll (``model_uri``, ``models:/NAME/VERSION``: exactly that version,
    whatever the alias does next; T with its interval, the gate threshold), its parent, the
    verification and the cause.

    Examples
    --------
    >>> event = RefittedEvent(model_name="tickets", new_version="4", alias="champion", temperature=1.8,
    ...                       temperature_interval=(1.7, 1.9), gate_threshold=0.91, parent_version="3",
    ...                       parent_temperature=1.2, verification={"verify_n": 600}, cause={})
    >>> event.model_uri, event.to_payload()["temperature_interval"]
    ('models:/tickets/4', [1.7, 1.9])
    >>> RefittedEvent.from_payload(event.to_payload()) == event
    True
    """

    EVENT: ClassVar[str] = REFITTED_EVENT
    model_config = ConfigDict(frozen=True, extra="forbid", coerce_numbers_to_str=True)
    model_name: str
    new_version: str
    alias: str
    temperature: float
    temperature_interval: tuple[float, float] | None = None
    gate_threshold: float | None = None
    parent_version: str
    parent_temperature: float
    verification: Mapping[str, Any] = _spread(VERIFICATION_KEYS)
    cause: Mapping[str, Any] = _spread(_CAUSE_KEYS)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def model_uri(self) -> str:
        return f"models:/{self.model_name}/{self.new_version}"



class UnreadableVersionEvent(EventPayload):
    """A serving version the monitor could not check: why its registration record cannot be read
    (``problem``), the aliases that point at it, the window it was not checked for, and the flow
    (``monitor`` or ``monitor-fleet``) that found it."""

    EVENT: ClassVar[str] = UNREADABLE_VERSION_EVENT
    problem: str
    aliases: tuple[str, ...]
    window_start: str
    window_end: str
    flow: str


#: Each event's payload type, by event name.
EVENT_PAYLOADS: Final[Mapping[str, type[EventPayload]]] = {
    payload.EVENT: payload
    for payload in (DriftEvent, LabelShiftEvent, ConfidenceShiftEvent, InsufficientDataEvent, UndeterminedEvent,
                    RefitFailedEvent, RefittedEvent, UnreadableVersionEvent)
}
