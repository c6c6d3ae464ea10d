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

No MLflow here (the flows write and read through :class:`flows.registry.MlflowRegistry`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "CHECK_KIND",
    "KIND_TAG",
    "PREFECT_FLOW_RUN_TAG",
    "REFIT_KIND",
    "RefitRecord",
    "current_flow_run_id",
]

PREFECT_FLOW_RUN_TAG: Final = "thermostat.prefect_flow_run_id"
KIND_TAG: Final = "thermostat.kind"
CHECK_KIND: Final = "check"
REFIT_KIND: Final = "refit"

# MLflow keeps at most 5,000 characters of a tag value (the full text goes to an artifact).
_TAG_LIMIT = 4000
_NONE = "none"


def current_flow_run_id() -> str | None:
    """The id of the Prefect flow run this code runs in; None outside a flow run."""
    from prefect.runtime import flow_run  # Prefect only where a flow writes the record

    found = flow_run.id
    return None if found is None else str(found)


def _shortened(text: str) -> str:
    return text if len(text) <= _TAG_LIMIT else text[: _TAG_LIMIT - 5] + " ..."


@dataclass(frozen=True, slots=True)
class RefitRecord:
    """One refit's outcome as MLflow tags (``thermostat.refit.*``) and metrics.

    ``status``: ``registered``, ``already_registered``, ``failed`` (refused or not verified:
    nothing registered) or ``skipped``. ``metrics`` holds the finite numbers of the
    verification (ECE before/after, p-value, ...) and the parent's T.

    Examples
    --------
    >>> record = RefitRecord(model_name="digits", parent_version="2", alias="challenger", status="failed",
    ...                      step="acceptance", reason="accuracy 0.30 below the floor 0.50",
    ...                      escalation="needs retraining or a data fix", new_version=None,
    ...                      window_start="2026-01-01T00:00:00+00:00", window_end="2026-01-01T01:00:00+00:00",
    ...                      prefect_flow_run_id=None, metrics={"parent_temperature": 1.05})
    >>> RefitRecord.from_tags(record.to_tags(), record.metrics) == record
    True
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
        return tags

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
        )

    @staticmethod
    def finite_metrics(values: Mapping[str, Any]) -> dict[str, float]:
        """The finite real numbers of ``values`` (booleans and None left out)."""
        return {key: float(value) for key, value in values.items()
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)}
