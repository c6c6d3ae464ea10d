"""What the monitor and the refit leave in MLflow beside a check, read back by the dashboard.

Every check of the monitor is an MLflow run in the monitoring experiment (tags
``thermostat.model_name``, ``thermostat.model_version``, ``thermostat.aliases``,
``thermostat.verdict``, the window; metrics stamped with the window's end). Two more records
live there, written through one typed value each way:

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

No MLflow here (the flows write and read through :class:`flows.registry.MlflowRegistry`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from monitoring import group_metric_key

__all__ = [
    "CHECK_ERROR_TAG",
    "CHECK_KIND",
    "FAILED_VERDICT",
    "GROUP_KEYS_TAG",
    "VERDICT_TAG",
    "KIND_TAG",
    "PREFECT_FLOW_RUN_TAG",
    "REFIT_KIND",
    "VERSION_DRIFT_TAG_PREFIX",
    "CheckFailure",
    "DriftCause",
    "GroupMetricKeys",
    "RefitLink",
    "RefitRecord",
    "current_flow_run_id",
    "model_slug",
]

PREFECT_FLOW_RUN_TAG: Final = "thermostat.prefect_flow_run_id"
KIND_TAG: Final = "thermostat.kind"
CHECK_KIND: Final = "check"
REFIT_KIND: Final = "refit"
VERDICT_TAG: Final = "thermostat.verdict"
"""A check's verdict: ok, drift, insufficient_data, or :data:`FAILED_VERDICT`; set when the
check is recorded (a run without it is a check that never reached its end)."""
FAILED_VERDICT: Final = "failed"
CHECK_ERROR_TAG: Final = "thermostat.check_error"
GROUP_KEYS_TAG: Final = "thermostat.group_keys"

# MLflow keeps at most 5,000 characters of a tag value (the full text goes to an artifact).
_TAG_LIMIT = 4000
_NONE = "none"
_REFIT_TAG_PREFIX = "thermostat.refit."
VERSION_DRIFT_TAG_PREFIX: Final = "refit_"
"""A refit's version names its :class:`DriftCause` in ``refit_drift_event_id`` / ``refit_drift_run_id``."""


def current_flow_run_id() -> str | None:
    """The id of the Prefect flow run this code runs in; None outside a flow run."""
    from prefect.runtime import flow_run  # Prefect only where a flow writes the record

    found = flow_run.id
    return None if found is None else str(found)


def _shortened(text: str) -> str:
    return text if len(text) <= _TAG_LIMIT else text[: _TAG_LIMIT - 5] + " ..."


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
            "thermostat.model_name": self.model_name,
            "thermostat.model_version": self.parent_version,
            "thermostat.aliases": self.alias,
            "thermostat.window_start": self.window_start,
            "thermostat.window_end": self.window_end,
            "thermostat.refit.status": self.status,
            "thermostat.refit.step": self.step or _NONE,
            "thermostat.refit.reason": _shortened(self.reason),
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
            model_name=tags["thermostat.model_name"], parent_version=tags["thermostat.model_version"],
            alias=tags["thermostat.aliases"], status=tags["thermostat.refit.status"],
            step=optional("thermostat.refit.step"), reason=tags.get("thermostat.refit.reason", ""),
            escalation=optional("thermostat.refit.escalation"), new_version=optional("thermostat.refit.new_version"),
            window_start=tags.get("thermostat.window_start", ""), window_end=tags.get("thermostat.window_end", ""),
            prefect_flow_run_id=tags.get(PREFECT_FLOW_RUN_TAG), metrics=dict(metrics or {}),
            cause=DriftCause.from_tags(tags, _REFIT_TAG_PREFIX),
        )

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
        return {VERDICT_TAG: FAILED_VERDICT, CHECK_ERROR_TAG: _shortened(self.error)}

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
