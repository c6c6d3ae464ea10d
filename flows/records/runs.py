"""What the monitor and the refit leave in MLflow, read back by the monitor and the dashboard.

Every check of the monitor is an MLflow run in the monitoring experiment, written and read
through :class:`CheckRecord`: the tags that say which check it is (``thermostat.model_name``,
``thermostat.model_version``, ``thermostat.aliases``, the window, T, the checkpoint, the drift
policy the check used as ``thermostat.policy``) when the run opens, the tags of its verdict
(``thermostat.verdict``, ``thermostat.refit_recommended``, ``thermostat.tests_fired``, the
insufficient-data streak after it as ``thermostat.insufficient_data_streak``, the shift
diagnosis's kind as ``thermostat.shift_kind``) when it is recorded, and the metrics :func:`check_metric_names` declares, stamped with the window's end.
Two more records live there, written through one typed value each way:

* the tag :data:`PREFECT_FLOW_RUN_TAG` on a check's run (and a refit's): the Prefect flow run
  that wrote it, so an alert can link to it;
* :class:`RefitRecord`, one run per refit outcome (tag ``thermostat.kind`` = ``refit``): a
  refused refit is otherwise only a Prefect artifact and an event, which do not outlive an
  ephemeral Prefect server and are not where an on-call engineer looks for model history.

A refit started by a drift event knows its :class:`DriftCause` (the event and the check's
run) and writes a :class:`RefitLink` back on the check's run: the check that found the drift
shows the refit it caused, and the refit (its record, its version, its events) names the check.

On the check's run itself, two more:

* :class:`CheckFailure`: a check that failed (any cause: the prediction log missing, MLflow
  unreachable, a bug) ends its run ``FAILED`` with ``thermostat.verdict`` = ``failed`` and
  the error (``thermostat.check_error``), so the dashboard shows "check failed" for the
  version instead of its last good verdict; a run the check could not close (its process died,
  or MLflow went away) is closed so by the version's next check.
* :class:`GroupMetricKeys`: the group each hashed metric key (``ece.group.<key>``, see
  :func:`monitoring.group_metric_key`) stands for.

Also here, for the flows' Prefect artifacts: :func:`model_slug`, a model's part of an
artifact key.

Checks written by earlier versions are read too: without ``thermostat.kind`` (a run with a model
name is a check), with their verdict among the opening tags, without the policy or the streak
(then :attr:`CheckRecord.policy` / :attr:`CheckRecord.insufficient_streak` are None and the
reader decides what stands in for them).

No MLflow here (the flows write and read through :class:`flows.registry.adapter.MlflowRegistry`).
"""

from __future__ import annotations

import json
import math
import re
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, Literal

from flows.records.outcomes import shortened
from flows.records.stored import StoredRun
from flows.records.versions import INSUFFICIENT_STREAK_TAG, RegisteredVersion, aware_time, json_object_tag
from monitoring import DriftPolicy, DriftReport, drift_metric_names, drift_metrics, group_metric_key

__all__ = [
    "CHECK_ERROR_TAG", "CHECK_KIND", "FAILED_VERDICT", "GROUP_KEYS_TAG", "POLICY_TAG", "SHIFT_KIND_TAG",
    "VERDICT_TAG", "KIND_TAG", "PREFECT_FLOW_RUN_TAG", "REFIT_KIND", "VERSION_DRIFT_TAG_PREFIX", "CheckFailure",
    "CheckMetric", "CheckRecord", "DriftCause", "GroupMetricKeys", "RefitLink", "RefitRecord", "check_metric_names",
    "model_slug", "run_subject",
]

PREFECT_FLOW_RUN_TAG: Final = "thermostat.prefect_flow_run_id"
KIND_TAG: Final = "thermostat.kind"
CHECK_KIND: Final = "check"
REFIT_KIND: Final = "refit"
VERDICT_TAG: Final = "thermostat.verdict"
"""A check's verdict: calibrated, undetermined, drift, insufficient_data (``ok`` on a check recorded
before verdicts said whether calibration was established), or :data:`FAILED_VERDICT`; set when the
check is recorded (a run without it is a check that never reached its end)."""
FAILED_VERDICT: Final = "failed"
CHECK_ERROR_TAG: Final = "thermostat.check_error"
GROUP_KEYS_TAG: Final = "thermostat.group_keys"
POLICY_TAG: Final = "thermostat.policy"
SHIFT_KIND_TAG: Final = "thermostat.shift_kind"
"""The kind of shift a check diagnosed (:class:`calibration.ShiftDiagnosis`: no_change, label_shift,
calibration_drift, accuracy_collapse, covariate_shift); absent on a check that was not diagnosed."""
"""The drift policy a check decided with (:meth:`monitoring.DriftPolicy.to_dict` as JSON)."""
# The tags every run of the monitoring experiment carries (a check's, a refit's).
_MODEL_NAME: Final = "thermostat.model_name"
_MODEL_VERSION: Final = "thermostat.model_version"
_ALIASES: Final = "thermostat.aliases"
_WINDOW_START: Final = "thermostat.window_start"
_WINDOW_END: Final = "thermostat.window_end"
"""With ``_WINDOW_START``, the window [start, end) the run read, ISO 8601 in UTC."""
# A check's own.
_REFIT_RECOMMENDED: Final = "thermostat.refit_recommended"
_TESTS_FIRED: Final = "thermostat.tests_fired"
_TEMPERATURE: Final = "temperature"
_CHECKPOINT_URI: Final = "checkpoint_uri"
_CHECKPOINT_DIGEST: Final = "checkpoint_digest"

# MLflow keeps at most 5,000 characters of a tag value (the full text goes to an artifact).
_TAG_LIMIT = 4000
_NONE = "none"
_REFIT_TAG_PREFIX = "thermostat.refit."
VERSION_DRIFT_TAG_PREFIX: Final = "refit_"
"""A refit's version names its :class:`DriftCause` in ``refit_drift_event_id`` / ``refit_drift_run_id``."""


def model_slug(model_name: str) -> str:
    """A model's part of a Prefect artifact key: lowercase letters, digits and single dashes
    (all a key may hold); "model" when nothing is left.

    Examples
    --------
    >>> model_slug("Tickets_EN"), model_slug("Tickets EN/v2"), model_slug("__")
    ('tickets-en', 'tickets-en-v2', 'model')
    """
    return re.sub(r"[^a-z0-9]+", "-", model_name.lower()).strip("-") or "model"


def _given(value: str | None) -> str | None:
    # A trigger's template renders a missing value as null; by hand, "" or "none" mean the same.
    if value is None:
        return None
    value = value.strip()
    return None if value == "" or value.lower() == _NONE else value


@dataclass(frozen=True, slots=True)
class DriftCause:
    """The drift check that started a refit: its Prefect event and its MLflow run.

    ``event_id`` is the id of the ``thermostat.calibration.drift`` event, ``run_id`` the MLflow
    run of the check that found the drift (the event's ``mlflow_run_id``). Both None for a
    refit started by hand. The refit puts them in its events (payload and a ``caused-by``
    related resource), in its record and in its version's tags.

    Examples
    --------
    >>> cause = DriftCause.of(" 4f9c2b1e-0d8a-4c57-9a43-5f1e2d3c4b5a ", "")
    >>> cause.run_id is None, cause.to_tags("thermostat.refit.")
    (True, {'thermostat.refit.drift_event_id': '4f9c2b1e-0d8a-4c57-9a43-5f1e2d3c4b5a'})
    >>> cause.related()[0]["prefect.resource.role"]
    'caused-by'
    >>> DriftCause.from_tags(cause.to_tags("refit_"), "refit_") == cause
    True
    """

    event_id: str | None = None
    run_id: str | None = None

    @classmethod
    def of(cls, event_id: str | None, run_id: str | None) -> DriftCause:
        """From a flow's parameters: blank values (or "none") read as not given."""
        return cls(event_id=_given(event_id), run_id=_given(run_id))

    def payload(self) -> dict[str, str | None]:
        """The event payload's ``drift_event_id`` and ``drift_run_id`` (None when not given)."""
        return {"drift_event_id": self.event_id, "drift_run_id": self.run_id}

    def related(self) -> list[dict[str, str]]:
        """The drift event as a Prefect related resource of the refit's events (none when not given)."""
        if self.event_id is None:
            return []
        return [{"prefect.resource.id": f"prefect.event.{self.event_id}", "prefect.resource.role": "caused-by"}]

    def to_tags(self, prefix: str) -> dict[str, str]:
        """``<prefix>drift_event_id`` and ``<prefix>drift_run_id``, each only when given."""
        values = {"drift_event_id": self.event_id, "drift_run_id": self.run_id}
        return {prefix + key: value for key, value in values.items() if value is not None}

    @classmethod
    def from_tags(cls, tags: Mapping[str, str], prefix: str) -> DriftCause:
        return cls.of(tags.get(prefix + "drift_event_id"), tags.get(prefix + "drift_run_id"))


# The check run's link to the refit it caused; the refit's own record is thermostat.refit.*.
_CAUSED_REFIT = "thermostat.caused_refit."


@dataclass(frozen=True, slots=True)
class RefitLink:
    """What a refit writes on the MLflow run of the check that caused it (tags
    ``thermostat.caused_refit.*``, apart from the refit's own record's ``thermostat.refit.*``):
    so the check that found the drift shows the refit.

    ``flow_run_id`` is the refit's Prefect flow run (None outside one), ``status`` its
    :class:`RefitRecord` status, ``new_version`` the version it registered (None: none).

    Examples
    --------
    >>> link = RefitLink(flow_run_id="0b1c", status="registered", new_version="3")
    >>> sorted(link.to_tags())
    ['thermostat.caused_refit.flow_run_id', 'thermostat.caused_refit.new_version', 'thermostat.caused_refit.status']
    >>> RefitLink.from_tags(link.to_tags()) == link, RefitLink.from_tags({})
    (True, None)
    """

    flow_run_id: str | None
    status: str
    new_version: str | None

    def to_tags(self) -> dict[str, str]:
        """``thermostat.caused_refit.status``, and the flow run and the new version when there are."""
        tags = {_CAUSED_REFIT + "status": self.status}
        if self.flow_run_id is not None:
            tags[_CAUSED_REFIT + "flow_run_id"] = self.flow_run_id
        if self.new_version is not None:
            tags[_CAUSED_REFIT + "new_version"] = self.new_version
        return tags

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> RefitLink | None:
        """The link on a check's run; None when no refit answered that check."""
        if _CAUSED_REFIT + "status" not in tags:
            return None
        return cls(flow_run_id=tags.get(_CAUSED_REFIT + "flow_run_id"), status=tags[_CAUSED_REFIT + "status"],
                   new_version=tags.get(_CAUSED_REFIT + "new_version"))


@dataclass(frozen=True, slots=True)
class RefitRecord:
    """One refit's outcome as MLflow tags (``thermostat.refit.*``) and metrics.

    ``status``: ``registered``, ``already_registered``, ``failed`` (refused or not verified:
    nothing registered) or ``skipped``. ``metrics`` holds the finite numbers of the
    verification (ECE before/after, p-value, ...) and the parent's T. ``cause``: the drift
    check that started the refit (tags ``thermostat.refit.drift_event_id`` / ``drift_run_id``).

    Examples
    --------
    >>> record = RefitRecord(model_name="digits", parent_version="2", alias="challenger", status="failed",
    ...                      step="acceptance", reason="accuracy 0.30 below the floor 0.50",
    ...                      escalation="needs retraining or a data fix", new_version=None,
    ...                      window_start="2026-01-01T00:00:00+00:00", window_end="2026-01-01T01:00:00+00:00",
    ...                      prefect_flow_run_id=None, metrics={"parent_temperature": 1.05},
    ...                      cause=DriftCause("4f9c2b1e-0d8a-4c57-9a43-5f1e2d3c4b5a", "8ce9750663634104"))
    >>> RefitRecord.from_tags(record.to_tags(), record.metrics) == record
    True
    >>> record.to_tags()["thermostat.refit.drift_run_id"]
    '8ce9750663634104'
    >>> record.to_tags()["thermostat.kind"], record.refused
    ('refit', True)
    """

    model_name: str
    parent_version: str
    alias: str
    status: str
    step: str | None
    reason: str
    escalation: str | None
    new_version: str | None
    window_start: str
    window_end: str
    prefect_flow_run_id: str | None
    metrics: Mapping[str, float]
    cause: DriftCause = DriftCause()

    @property
    def refused(self) -> bool:
        """Nothing was registered although a refit was asked for."""
        return self.status == "failed"

    def to_tags(self) -> dict[str, str]:
        """The run's tags: the monitoring experiment's common ones plus ``thermostat.refit.*``."""
        tags = {
            KIND_TAG: REFIT_KIND,
            _MODEL_NAME: self.model_name,
            _MODEL_VERSION: self.parent_version,
            _ALIASES: self.alias,
            _WINDOW_START: self.window_start,
            _WINDOW_END: self.window_end,
            "thermostat.refit.status": self.status,
            "thermostat.refit.step": self.step or _NONE,
            "thermostat.refit.reason": shortened(self.reason, _TAG_LIMIT),
            "thermostat.refit.escalation": self.escalation or _NONE,
            "thermostat.refit.new_version": self.new_version or _NONE,
        }
        if self.prefect_flow_run_id is not None:
            tags[PREFECT_FLOW_RUN_TAG] = self.prefect_flow_run_id
        return tags | self.cause.to_tags(_REFIT_TAG_PREFIX)

    @classmethod
    def from_tags(cls, tags: Mapping[str, str], metrics: Mapping[str, float] | None = None) -> RefitRecord:
        """Read a refit run's tags (and metrics) back; a KeyError names a missing tag."""

        def optional(key: str) -> str | None:
            value = tags.get(key, _NONE)
            return None if value == _NONE else value

        return cls(
            model_name=tags[_MODEL_NAME], parent_version=tags[_MODEL_VERSION],
            alias=tags[_ALIASES], status=tags["thermostat.refit.status"],
            step=optional("thermostat.refit.step"), reason=tags.get("thermostat.refit.reason", ""),
            escalation=optional("thermostat.refit.escalation"), new_version=optional("thermostat.refit.new_version"),
            window_start=tags.get(_WINDOW_START, ""), window_end=tags.get(_WINDOW_END, ""),
            prefect_flow_run_id=tags.get(PREFECT_FLOW_RUN_TAG), metrics=dict(metrics or {}),
            cause=DriftCause.from_tags(tags, _REFIT_TAG_PREFIX),
        )

    @classmethod
    def from_run(cls, run: StoredRun) -> RefitRecord | None:
        """The refit a run of the monitoring experiment records (tag ``thermostat.kind`` = ``refit``);
        None for any other run, or one that lacks a tag the record needs."""
        if run.tags.get(KIND_TAG) != REFIT_KIND:
            return None
        try:
            return cls.from_tags(run.tags, run.metrics)
        except KeyError:
            return None

    @staticmethod
    def finite_metrics(values: Mapping[str, Any]) -> dict[str, float]:
        """The finite real numbers of ``values`` (booleans and None left out)."""
        return {key: float(value) for key, value in values.items()
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)}


@dataclass(frozen=True, slots=True)
class CheckFailure:
    """A check that failed, as tags of its MLflow run (which ends ``FAILED``).

    ``error`` names the exception and its message (at most 4,000 characters kept). Written
    when a check fails (any cause, also after its verdict was recorded: ``verdict`` is then
    named in the error) and by the version's next check on a run an earlier check left
    ``RUNNING``. A run closed ``FAILED`` without these tags (before they existed) reads as a
    failure too.

    Examples
    --------
    >>> failure = CheckFailure.of(FileNotFoundError("no prediction log at sqlite:///x.db"))
    >>> failure.to_tags()
    {'thermostat.verdict': 'failed', 'thermostat.check_error': 'FileNotFoundError: no prediction log at sqlite:///x.db'}
    >>> CheckFailure.from_tags(failure.to_tags(), "FAILED") == failure
    True
    >>> CheckFailure.from_tags({"thermostat.verdict": "ok"}, "FINISHED") is None
    True
    >>> CheckFailure.from_tags({"thermostat.verdict": "drift"}, "FAILED").error
    "the check's MLflow run ended FAILED (verdict drift)"
    """

    error: str

    @classmethod
    def of(cls, error: BaseException, *, recorded_verdict: str | None = None) -> CheckFailure:
        """The failure of ``error``; ``recorded_verdict`` when the check had recorded it before failing."""
        text = f"{type(error).__name__}: {error}".rstrip(": ")
        if recorded_verdict is not None:
            text += f" (after its verdict {recorded_verdict} was recorded)"
        return cls(error=text)

    def to_tags(self) -> dict[str, str]:
        """``thermostat.verdict`` = ``failed`` and ``thermostat.check_error``."""
        return {VERDICT_TAG: FAILED_VERDICT, CHECK_ERROR_TAG: shortened(self.error, _TAG_LIMIT)}

    @classmethod
    def from_tags(cls, tags: Mapping[str, str], status: str) -> CheckFailure | None:
        """The failure of a check run with these tags and MLflow ``status``; None if it did not fail."""
        if tags.get(VERDICT_TAG) == FAILED_VERDICT or CHECK_ERROR_TAG in tags:
            return cls(error=tags.get(CHECK_ERROR_TAG, "the check failed"))
        if status in ("FAILED", "KILLED"):
            return cls(error=f"the check's MLflow run ended {status} (verdict {tags.get(VERDICT_TAG, '?')})")
        return None


@dataclass(frozen=True, slots=True)
class GroupMetricKeys:
    """Which group each metric key stands for (:func:`monitoring.group_metric_key`), as a tag of
    the check's run: ``names`` maps a key to its group for the groups whose key is not their
    name (hashed keys; a name MLflow takes as it is stands for itself).

    The tag holds JSON ``{key: name}`` of at most 4,000 characters (the entries that fit, in key
    order; the check's ``check/group_keys.json`` artifact holds every group). Checks written
    before it existed have no tag: their keys are the names (sanitised).

    Examples
    --------
    >>> keys = GroupMetricKeys.of(["web", "eu:west"])
    >>> keys.names
    {'eu_west.hc0a20939aed2dfe9': 'eu:west'}
    >>> GroupMetricKeys.from_tags(keys.to_tags()) == keys, keys.name("web"), keys.name("eu_west.hc0a20939aed2dfe9")
    (True, 'web', 'eu:west')
    >>> GroupMetricKeys.of(["web"]).to_tags()
    {}
    """

    names: Mapping[str, str]

    @classmethod
    def of(cls, groups: Iterable[str]) -> GroupMetricKeys:
        """The keys of ``groups`` that are not the group's own name."""
        keys = {group: group_metric_key(group) for group in groups}
        return cls(names={key: group for group, key in sorted(keys.items(), key=lambda item: item[1]) if key != group})

    def name(self, key: str) -> str:
        """The group ``key`` stands for (the key itself when it is not a hashed one)."""
        return self.names.get(key, key)

    def to_tags(self) -> dict[str, str]:
        """``thermostat.group_keys`` (JSON ``{key: name}``), none when every key is its name."""
        kept: dict[str, str] = {}
        for key, name in self.names.items():
            if len(json.dumps(kept | {key: name})) > _TAG_LIMIT:
                break
            kept[key] = name
        return {GROUP_KEYS_TAG: json.dumps(kept, sort_keys=True)} if kept else {}

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> GroupMetricKeys:
        """The map of a check's tags; empty for a check without the tag (or with an unreadable one)."""
        try:
            loaded = json.loads(tags.get(GROUP_KEYS_TAG, "{}"))
        except ValueError:
            return cls(names={})
        if not isinstance(loaded, dict):
            return cls(names={})
        return cls(names={str(key): str(name) for key, name in loaded.items()})


CheckMetric = Literal[
    "ece", "nll", "p_value", "n", "drift", "baseline_ece", "ece_excess", "accuracy", "temperature",
    "predicted_accuracy", "cusum_upper", "cusum_lower", "rows_to_decide", "window_temperature",
    "window_temperature_low", "window_temperature_high", "temperature_z", "temperature_p_value",
]
"""The metrics of a check a reader asks for by name (:meth:`CheckRecord.metric`); each is one a
check writes (a test holds them to :func:`check_metric_names`)."""

# A group's ECE on a check run: this prefix and the group's metric key (monitoring.group_metric_key).
_GROUP_ECE: Final = "ece.group."


def check_metric_names() -> tuple[frozenset[str], tuple[str, ...]]:
    """The metrics a check run may hold: every name, and the prefixes of the groups' names.

    The names of :func:`monitoring.drift_metrics` (:func:`monitoring.drift_metric_names`) and the
    check's own two: ``temperature`` (the registered T the window was read at) and ``baseline_ece``.

    >>> names, prefixes = check_metric_names()
    >>> {"temperature", "baseline_ece", "ece", "p_value"} <= names, "ece.group." in prefixes
    (True, True)
    """
    names, prefixes = drift_metric_names()
    return names | {"temperature", "baseline_ece"}, prefixes


def run_subject(run: StoredRun) -> str | None:
    """Which model version a run of the monitoring experiment is about (a check's, a refit's), in
    words; None when it names none. For messages about a run that cannot be read otherwise.

    >>> run_subject(StoredRun("r", "1", "FINISHED", 0, 0, tags={"thermostat.model_name": "m"}))
    'm v?'
    """
    if _MODEL_NAME not in run.tags:
        return None
    return f"{run.tags[_MODEL_NAME]} v{run.tags.get(_MODEL_VERSION, '?')}"


def _bool_tag(value: str | None) -> bool:
    return value == "true"


def _names_tag(value: str | None) -> tuple[str, ...]:
    return () if value in (None, "", _NONE) else tuple(name for name in value.split(",") if name)


@dataclass(frozen=True, slots=True)
class CheckRecord:
    """One check of the monitor as its MLflow run (module docstring), typed both ways.

    Written in two steps, each a set of tags: :meth:`opening_tags` when the run opens (which
    check: the model, version and aliases, the window, T and the checkpoint, the Prefect flow
    run, the drift ``policy``) and :meth:`verdict_tags` once the check decided (``verdict``,
    ``refit_recommended``, ``tests_fired``, ``insufficient_streak`` — the version's streak of
    insufficient-data checks after this one, as the monitor counts it —, ``shift_kind`` and the
    group keys),
    beside the metrics of :meth:`metrics_of`. A failure is :class:`CheckFailure`'s tags.

    Read back by :meth:`from_run`, which also keeps the run (``run``) and reads its failure and
    metrics. Checks written before the policy or the streak were recorded read them as None.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> from monitoring import DriftPolicy
    >>> from flows.records.stored import StoredRun
    >>> opened = CheckRecord(model_name="digits", version="3", aliases=("champion",),
    ...                      window_start=datetime(2026, 1, 1, tzinfo=UTC), window_end=datetime(2026, 1, 2, tzinfo=UTC),
    ...                      temperature=2.5, policy=DriftPolicy(ece_tolerance=0.05))
    >>> decided = opened.decided("insufficient_data", refit_recommended=False, tests_fired=(), insufficient_streak=2)
    >>> run = StoredRun(run_id="r1", experiment_id="1", status="FINISHED", start_time_ms=0, end_time_ms=0,
    ...                 tags=opened.opening_tags() | decided.verdict_tags(), metrics={"n": 12.0})
    >>> read = CheckRecord.from_run(run)
    >>> read.verdict, read.insufficient_streak, read.policy.ece_tolerance, read.metric("n"), read.metric("ece")
    ('insufficient_data', 2, 0.05, 12.0, None)
    >>> CheckRecord.from_run(StoredRun("r2", "1", "FINISHED", 0, 0, tags={"thermostat.kind": "refit"})) is None
    True
    """

    model_name: str
    version: str
    aliases: tuple[str, ...]
    window_start: datetime | None
    window_end: datetime | None
    temperature: float | None
    checkpoint_uri: str | None = None
    checkpoint_digest: str | None = None
    prefect_flow_run_id: str | None = None
    policy: DriftPolicy | None = None
    """The drift policy the check decided with; None for a check written before it was recorded."""
    verdict: str | None = None
    """ok, drift, insufficient_data, or ``failed`` (:class:`CheckFailure`); None until decided."""
    refit_recommended: bool = False
    tests_fired: tuple[str, ...] = ()
    insufficient_streak: int | None = None
    """The version's insufficient-data streak after this check; None for a check written before it was recorded."""
    shift_kind: str | None = None
    """The shift diagnosis's kind; None for a check not diagnosed (or written before diagnoses)."""
    group_keys: GroupMetricKeys = field(default_factory=lambda: GroupMetricKeys(names={}))
    failure: CheckFailure | None = None
    run: StoredRun | None = None
    """The MLflow run read back (None for a record being written)."""

    # Writing -------------------------------------------------------------------------------

    @classmethod
    def opening(cls, version: RegisteredVersion, start: datetime, end: datetime, *, policy: DriftPolicy,
                prefect_flow_run_id: str | None) -> CheckRecord:
        """The record of a check of ``version`` on the window [start, end) under ``policy``, not decided yet."""
        return cls(model_name=version.model_name, version=version.version, aliases=version.aliases,
                   window_start=start, window_end=end, temperature=version.temperature,
                   checkpoint_uri=version.checkpoint_uri, checkpoint_digest=version.checkpoint_digest,
                   prefect_flow_run_id=prefect_flow_run_id, policy=policy)

    def decided(self, verdict: str, *, refit_recommended: bool, tests_fired: Iterable[str],
                insufficient_streak: int, groups: Iterable[str] = (), shift_kind: str | None = None) -> CheckRecord:
        """This check with its verdict, the streak after it, the groups it measured and its shift's kind."""
        return replace(self, verdict=verdict, refit_recommended=refit_recommended, tests_fired=tuple(tests_fired),
                       insufficient_streak=insufficient_streak, group_keys=GroupMetricKeys.of(groups),
                       shift_kind=shift_kind)

    def opening_tags(self) -> dict[str, str]:
        """The tags that say which check a run is (no verdict: a run without one never reached its end)."""
        tags = {KIND_TAG: CHECK_KIND, _MODEL_NAME: self.model_name, _MODEL_VERSION: self.version,
                _ALIASES: ",".join(self.aliases)}
        for key, moment in ((_WINDOW_START, self.window_start), (_WINDOW_END, self.window_end)):
            if moment is not None:
                tags[key] = moment.isoformat()
        optional = {_TEMPERATURE: None if self.temperature is None else repr(self.temperature),
                    _CHECKPOINT_URI: self.checkpoint_uri, _CHECKPOINT_DIGEST: self.checkpoint_digest,
                    PREFECT_FLOW_RUN_TAG: self.prefect_flow_run_id,
                    POLICY_TAG: None if self.policy is None else json.dumps(self.policy.to_dict(), sort_keys=True)}
        return tags | {key: value for key, value in optional.items() if value is not None}

    def verdict_tags(self) -> dict[str, str]:
        """The tags of the check's verdict (written last, when the check recorded it)."""
        if self.verdict is None:
            raise ValueError(f"the check of {self.model_name} v{self.version} has no verdict yet; decide it first")
        tags = {VERDICT_TAG: self.verdict, _REFIT_RECOMMENDED: str(self.refit_recommended).lower(),
                _TESTS_FIRED: ",".join(self.tests_fired) or _NONE}
        if self.insufficient_streak is not None:
            tags[INSUFFICIENT_STREAK_TAG] = str(self.insufficient_streak)
        if self.shift_kind is not None:
            tags[SHIFT_KIND_TAG] = self.shift_kind
        return tags | self.group_keys.to_tags()

    @staticmethod
    def metrics_of(report: DriftReport, temperature: float) -> dict[str, float]:
        """The metrics a check writes for ``report`` at the registered ``temperature`` (:func:`check_metric_names`)."""
        return drift_metrics(report) | {"temperature": temperature, "baseline_ece": report.baseline_ece}

    # Reading -------------------------------------------------------------------------------

    @classmethod
    def from_run(cls, run: StoredRun) -> CheckRecord | None:
        """The check a run of the monitoring experiment records; None when the run is not a check
        (a refit's record, or a run without a model name).

        Raises
        ------
        ValueError
            If a tag is unreadable (a window time, the policy, the streak); the message names
            the run and the tag.
        """
        tags = run.tags
        if tags.get(KIND_TAG, CHECK_KIND) != CHECK_KIND or _MODEL_NAME not in tags:
            return None
        where = f"check run {run.run_id}"
        failure = CheckFailure.from_tags(tags, run.status)
        streak = tags.get(INSUFFICIENT_STREAK_TAG)
        if streak is not None and not streak.isdigit():
            raise ValueError(f"{where}: tag {INSUFFICIENT_STREAK_TAG!r} is {streak!r}; expected a count >= 0")
        return cls(
            model_name=tags[_MODEL_NAME], version=tags.get(_MODEL_VERSION, "?"),
            aliases=tuple(alias for alias in tags.get(_ALIASES, "").split(",") if alias),
            window_start=cls._time(tags, _WINDOW_START, where), window_end=cls._time(tags, _WINDOW_END, where),
            temperature=_finite(run.metrics.get("temperature")) or _finite_text(tags.get(_TEMPERATURE)),
            checkpoint_uri=tags.get(_CHECKPOINT_URI), checkpoint_digest=tags.get(_CHECKPOINT_DIGEST),
            prefect_flow_run_id=tags.get(PREFECT_FLOW_RUN_TAG), policy=cls._policy(tags, where),
            verdict=FAILED_VERDICT if failure is not None else tags.get(VERDICT_TAG),
            refit_recommended=_bool_tag(tags.get(_REFIT_RECOMMENDED)), tests_fired=_names_tag(tags.get(_TESTS_FIRED)),
            insufficient_streak=None if streak is None else int(streak), group_keys=GroupMetricKeys.from_tags(tags),
            shift_kind=tags.get(SHIFT_KIND_TAG), failure=failure, run=run,
        )

    @staticmethod
    def _time(tags: Mapping[str, str], key: str, where: str) -> datetime | None:
        text = tags.get(key)
        return None if not text else aware_time(text, where, key)

    @staticmethod
    def _policy(tags: Mapping[str, str], where: str) -> DriftPolicy | None:
        text = tags.get(POLICY_TAG)
        if text is None:
            return None
        values = json_object_tag(text, f"{where}: tag {POLICY_TAG!r}", "the drift policy")
        return DriftPolicy.from_dict(values, where=f"{where}: tag {POLICY_TAG!r}")

    def metric(self, name: CheckMetric) -> float | None:
        """The check's metric ``name`` (finite), None when it wrote none (or an undefined value)."""
        if name not in _READ_METRICS:
            raise KeyError(f"{name!r} is not a metric a check declares; read one of {sorted(_READ_METRICS)}")
        return None if self.run is None else _finite(self.run.metrics.get(name))

    def group_ece(self) -> dict[str, float]:
        """The ECE of each group the check measured, by the group's name (finite values only)."""
        metrics = {} if self.run is None else self.run.metrics
        return {self.group_keys.name(key.removeprefix(_GROUP_ECE)): float(value) for key, value in sorted(metrics.items())
                if key.startswith(_GROUP_ECE) and math.isfinite(value)}


_READ_METRICS: Final = frozenset(typing.get_args(CheckMetric))


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _finite_text(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return _finite(float(text))
    except ValueError:
        return None
