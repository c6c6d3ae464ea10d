"""What the MLflow store hands back, as Thermostat's records: a run and a registered version.

:class:`flows.registry.adapter.MlflowRegistry` returns these — never MLflow's ``Run`` or
``ModelVersion`` — so the pipelines and the dashboard read a run's tags and metrics, or a
version's tags, without MLflow's entity classes (and the dashboard without MLflow at all).
Times stay as MLflow keeps them, milliseconds since the epoch: a reader decides what range of
times it can use (the dashboard refuses one it cannot chart, naming the record).

No MLflow here: the adapter builds these from its entities.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["RunStatus", "StoredRun", "StoredVersion"]

RunStatus = Literal["RUNNING", "FINISHED", "FAILED", "KILLED", "SCHEDULED"]
"""A run's status as MLflow keeps it."""


@dataclass(frozen=True, slots=True)
class StoredRun:
    """One MLflow run: its ids, status, times (ms since the epoch; None when not set), tags, metrics
    (the latest value of each) and parameters.

    Examples
    --------
    >>> run = StoredRun(run_id="8ce9", experiment_id="1", status="FAILED", start_time_ms=0, end_time_ms=None,
    ...                 tags={"thermostat.kind": "check"})
    >>> run.ended_badly, run.tags["thermostat.kind"], dict(run.metrics)
    (True, 'check', {})
    """

    run_id: str
    experiment_id: str
    status: RunStatus
    start_time_ms: int | None
    end_time_ms: int | None
    tags: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def ended_badly(self) -> bool:
        """The run ended ``FAILED`` or ``KILLED``."""
        return self.status in ("FAILED", "KILLED")


@dataclass(frozen=True, slots=True)
class StoredVersion:
    """One registered model version: its model's name and number, tags, the run that made it (None:
    none), its model's source URI, MLflow's registration status (``READY`` once its files are in
    place) and its creation time (ms since the epoch).

    Examples
    --------
    >>> version = StoredVersion(name="digits", version="3", tags={"temperature": "2.5"}, run_id=None,
    ...                         source="runs:/r/calibrated_model", status="READY", creation_time_ms=0)
    >>> version.version, version.tags["temperature"]
    ('3', '2.5')
    """

    name: str
    version: str
    tags: Mapping[str, str]
    run_id: str | None
    source: str
    status: str
    creation_time_ms: int
