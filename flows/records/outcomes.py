"""What a flow run ends with, for whoever started it: one line, and the same as a small JSON object.

A deployment run's caller (``prefect deployment run ... --watch``, ``run_deployment``, the Prefect
UI) sees the run's final state and its logs, not the flow's Python return value. Each flow
therefore ends with a :class:`FlowSummary` of its outcome: its ``message`` is the final state's
message (Prefect's last log line of the run repeats it: ``Finished in state Completed('...')``),
and its JSON form is logged just before that line. Built by the outcomes themselves
(``Registration.summary()``, ``RefitOutcome.summary()``, ...); :mod:`flows.orchestration.outcomes`
ends the run with it. No Prefect here.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from calibration import json_safe

__all__ = ["MESSAGE_LIMIT", "FlowSummary", "interval_text", "shortened"]

#: The longest final-state message (longer ones are cut, with " ..."): a state message is shown in one line.
MESSAGE_LIMIT: Final = 500


def shortened(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text``, cut to ``limit`` characters with " ..." when longer.

    Examples
    --------
    >>> shortened("a" * 10, limit=8)
    'aaaa ...'
    >>> shortened("short")
    'short'
    """
    return text if len(text) <= limit else text[:limit - 4] + " ..."


def interval_text(interval: tuple[float, float] | None) -> str:
    """`` [low, high]`` of an interval of T in 4 significant digits, or nothing without one.

    Examples
    --------
    >>> interval_text((1.71234, 1.95)), interval_text(None)
    (' [1.712, 1.95]', '')
    """
    return "" if interval is None else f" [{interval[0]:.4g}, {interval[1]:.4g}]"


class FlowSummary(BaseModel):
    """The outcome of one flow run: which flow, its status word, the one-line ``message``, and the
    few figures a caller acts on (``details``: JSON values, e.g. the version, its ``models:/`` URI,
    T and its interval, the gate threshold, or the refusal's reason and step).

    Examples
    --------
    >>> summary = FlowSummary.of("refit", "registered", "registered tickets version 4",
    ...                          version="4", temperature=float("nan"))
    >>> summary.to_dict()["details"]
    {'version': '4', 'temperature': None}
    """

    model_config = ConfigDict(frozen=True)

    flow: str
    status: str
    message: str = Field(max_length=MESSAGE_LIMIT)
    details: dict[str, JsonValue] = Field(default_factory=dict)

    @classmethod
    def of(cls, flow: str, status: str, message: str, **details: Any) -> FlowSummary:
        """A summary whose message is cut to :data:`MESSAGE_LIMIT` and whose details are made
        JSON-safe (NaN as None, tuples as lists)."""
        return cls(flow=flow, status=status, message=shortened(message), details=json_safe(details))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what the run's last log line before Prefect's own carries)."""
        return self.model_dump(mode="json")
