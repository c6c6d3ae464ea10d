"""The alert situations: one definition of each, shared by the automations and the dashboard.

A :class:`Situation` says once what is wrong, and both places that tell someone read it:

* ``key`` — the dashboard's ``kind`` (``/api/alerts``, the ``thermostat_open_alerts`` label)
  and the key of its automation in ``thermostat alerts install --json``;
* ``title`` — what it is, in a few words;
* ``raised_by`` — what announces it as it happens: a Thermostat event, or a state of a flow's
  runs (:class:`Raiser`), each the trigger of one Prefect automation
  (:data:`flows.orchestration.alerts.ALERTS` is built from these);
* ``on_dashboard`` — how the dashboard recognises it from the records it reads, in words, and
  ``recognise`` the rule itself (:func:`open_situations`); None for a situation only an event
  can tell (nothing in MLflow records it).

The rules read what the monitor and the refit recorded, never a count of their own: the
insufficient-data streak is the one the monitor keeps on the version
(:class:`flows.records.versions.MonitorState`, which counts the checks of a version that never
logged a prediction too), held to the streak length of the policy the latest check recorded.

Earlier names: the automation of ``refit_refused`` was keyed ``refit_failed`` in ``thermostat alerts
install --json`` (its event keeps that name; :func:`situation` still finds it by the old key).

No MLflow, no Prefect here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

from flows.records.events import (
    CONFIDENCE_SHIFT_EVENT,
    DRIFT_EVENT,
    INSUFFICIENT_DATA_EVENT,
    LABEL_SHIFT_EVENT,
    REFIT_FAILED_EVENT,
    UNDETERMINED_EVENT,
    UNREADABLE_VERSION_EVENT,
)

__all__ = [
    "DASHBOARD_SITUATIONS",
    "FLOW_RUN_CRASHED_EVENT",
    "FLOW_RUN_FAILED_EVENT",
    "SITUATIONS",
    "Raised",
    "Raiser",
    "ServingRecords",
    "Situation",
    "SituationKey",
    "open_situations",
    "situation",
]

# Prefect's events on a flow run's state changes (prefect.flow-run.<state name>).
FLOW_RUN_CRASHED_EVENT: Final = "prefect.flow-run.Crashed"
FLOW_RUN_FAILED_EVENT: Final = "prefect.flow-run.Failed"
# The monitor's flows (flows.pipelines.monitor): one model's, and the fleet's.
_MONITOR_FLOWS: Final = ("monitor", "monitor-fleet")
# The state message Prefect's flow engine gives a flow run that raised (Prefect 3.x:
# "Flow run encountered an exception: FileNotFoundError: ...").
_EXCEPTION_MESSAGE: Final = "Flow run encountered an exception:*"

SituationKey = Literal["drift", "label_shift", "refit_refused", "insufficient_data", "undetermined",
                       "confidence_shift", "refit_crashed", "check_failed", "unreadable_version"]


class _Check(Protocol):
    """What a rule reads of a check: its verdict, its shift diagnosis's kind and the end of its window."""

    @property
    def verdict(self) -> str: ...

    @property
    def shift_kind(self) -> str | None: ...

    @property
    def window_end(self) -> datetime: ...


class _Refit(Protocol):
    """What a rule reads of a refit: when, its status and the alias it was for."""

    @property
    def at(self) -> datetime: ...

    @property
    def status(self) -> str: ...

    @property
    def alias(self) -> str: ...


C = TypeVar("C", bound=_Check)
R = TypeVar("R", bound=_Refit)


@dataclass(frozen=True, slots=True)
class ServingRecords(Generic[C, R]):
    """What the records say of one version an alias points at now: ``checks`` of the version and
    ``refits`` of it, oldest first; the insufficient-data streak the monitor keeps on it and the
    streak length that raises the situation (the policy of its latest check); ``problem``: why its
    registration record cannot be read from its tags (None: it can); ``undetermined_length``: the
    run of trailing undetermined checks that raises the undetermined situation (0: not recognised)."""

    aliases: tuple[str, ...]
    checks: Sequence[C]
    refits: Sequence[R]
    insufficient_streak: int
    streak_length: int
    problem: str | None = None
    undetermined_length: int = 0


@dataclass(frozen=True, slots=True)
class Raised(Generic[C, R]):
    """A situation open on a serving version, and the record that raises it: the check (drift, a
    failed check, the latest check of an insufficient-data streak when there is one) or the refit
    (neither: the version's own record, which cannot be read)."""

    situation: Situation
    check: C | None = None
    refit: R | None = None


@dataclass(frozen=True, slots=True)
class Raiser:
    """One way a situation is announced as it happens, and the Prefect automation that notifies on it.

    ``event`` is a Thermostat event (on a model version's resource) or Prefect's state event of a
    flow run; for the latter, ``flow`` names the flow (or flows) whose runs raise it and ``state_message``
    (a Prefect pattern) the message their state must have, when one is needed. ``automation`` is
    the automation's key, ``name`` its name on the server (stable: the installer finds it by name).
    """

    automation: str
    name: str
    event: str
    flow: str | tuple[str, ...] | None = None
    state_message: str | None = None


@dataclass(frozen=True, slots=True)
class Situation:
    """One alert situation (module docstring)."""

    key: SituationKey
    title: str
    raised_by: tuple[Raiser, ...]
    on_dashboard: str | None
    recognise: Callable[[ServingRecords[Any, Any]], list[Raised[Any, Any]]] | None = None
    former_keys: tuple[str, ...] = ()


def _latest_check(key: SituationKey, holds: Callable[[Any], bool]
                  ) -> Callable[[ServingRecords[Any, Any]], list[Raised[Any, Any]]]:
    """The rule of a situation ``key`` raised by the latest check of the version when ``holds`` of it."""

    def recognise(records: ServingRecords[Any, Any]) -> list[Raised[Any, Any]]:
        latest = records.checks[-1] if records.checks else None
        return [] if latest is None or not holds(latest) else [Raised(situation(key), check=latest)]

    return recognise


def _refused(records: ServingRecords[Any, Any]) -> list[Raised[Any, Any]]:
    return [Raised(situation("refit_refused"), refit=refit) for refit in records.refits
            if refit.status == "failed" and refit.alias in records.aliases
            and not any(check.verdict in ("calibrated", "ok") and check.window_end > refit.at for check in records.checks)]


def _unreadable(records: ServingRecords[Any, Any]) -> list[Raised[Any, Any]]:
    return [] if records.problem is None else [Raised(situation("unreadable_version"))]


def _streak(records: ServingRecords[Any, Any]) -> list[Raised[Any, Any]]:
    if records.insufficient_streak < records.streak_length:
        return []
    latest = records.checks[-1] if records.checks else None
    shown = latest if latest is not None and latest.verdict == "insufficient_data" else None
    return [Raised(situation("insufficient_data"), check=shown)]


def _undetermined(records: ServingRecords[Any, Any]) -> list[Raised[Any, Any]]:
    length = records.undetermined_length
    trailing = 0
    for check in reversed(records.checks):
        if check.verdict != "undetermined":
            break
        trailing += 1
    return [] if not length or trailing < length else [Raised(situation("undetermined"), check=records.checks[-1])]


SITUATIONS: Final[tuple[Situation, ...]] = (
    Situation(
        key="drift", title="calibration drift",
        raised_by=(Raiser("drift", "thermostat: calibration drift", DRIFT_EVENT),),
        on_dashboard="the latest check of a version an alias points at now says drift, and its shift diagnosis is "
                     "not a label shift (that one is the label shift's)",
        recognise=_latest_check("drift", lambda check: check.verdict == "drift" and check.shift_kind != "label_shift"),
    ),
    Situation(
        key="label_shift", title="label shift",
        raised_by=(Raiser("label_shift", "thermostat: label shift", LABEL_SHIFT_EVENT),),
        on_dashboard="the latest check of a version an alias points at now diagnosed a label shift (its class mix "
                     "moved; no temperature refit)",
        recognise=_latest_check("label_shift", lambda check: check.shift_kind == "label_shift"),
    ),
    Situation(
        key="refit_refused", title="refit refused",
        raised_by=(Raiser("refit_refused", "thermostat: refit refused", REFIT_FAILED_EVENT),),
        on_dashboard="a refit of a serving version registered nothing (its refit record says failed), for an alias "
                     "that still points at it, and no check of the version since says calibrated",
        recognise=_refused, former_keys=("refit_failed",),
    ),
    Situation(
        key="insufficient_data", title="insufficient data",
        raised_by=(Raiser("insufficient_data", "thermostat: insufficient data", INSUFFICIENT_DATA_EVENT),),
        on_dashboard="the streak of insufficient-data checks the monitor keeps on a serving version reached the "
                     "streak length of the policy its latest check recorded",
        recognise=_streak,
    ),
    Situation(
        key="undetermined", title="undetermined",
        raised_by=(Raiser("undetermined", "thermostat: undetermined", UNDETERMINED_EVENT),),
        on_dashboard="the latest checks of a serving version, as many in a row as the undetermined streak of the "
                     "policy its latest check recorded, saw no drift but could not establish calibration: the monitor "
                     "could not have seen a drift of the margin's size",
        recognise=_undetermined,
    ),
    Situation(
        key="confidence_shift", title="confidence shift",
        raised_by=(Raiser("confidence_shift", "thermostat: confidence shift", CONFIDENCE_SHIFT_EVENT),),
        on_dashboard=None,  # a notice: the dashboard charts each check's predicted accuracy instead
    ),
    Situation(
        key="refit_crashed", title="refit crashed or errored",
        raised_by=(
            Raiser("refit_crashed", "thermostat: refit crashed", FLOW_RUN_CRASHED_EVENT, flow="refit"),
            Raiser("refit_errored", "thermostat: refit errored", FLOW_RUN_FAILED_EVENT, flow="refit",
                   state_message=_EXCEPTION_MESSAGE),
        ),
        on_dashboard=None,  # a refit that died wrote no record of its outcome
    ),
    Situation(
        key="check_failed", title="check failed",
        raised_by=(
            Raiser("monitor_failed", "thermostat: monitor failed", FLOW_RUN_FAILED_EVENT, flow=_MONITOR_FLOWS),
            Raiser("monitor_crashed", "thermostat: monitor crashed", FLOW_RUN_CRASHED_EVENT, flow=_MONITOR_FLOWS),
        ),
        on_dashboard="the latest check of a serving version failed (its run ended FAILED): no verdict",
        recognise=_latest_check("check_failed", lambda check: check.verdict == "failed"),
    ),
    Situation(
        key="unreadable_version", title="version not checked",
        raised_by=(Raiser("unreadable_version", "thermostat: version not checked", UNREADABLE_VERSION_EVENT),),
        on_dashboard="a version an alias points at has a registration record that cannot be read from its tags (a "
                     "tag deleted or edited by hand): the monitor cannot check it",
        recognise=_unreadable,
    ),
)
"""Every situation, in the order the automations are installed."""

DASHBOARD_SITUATIONS: Final[tuple[Situation, ...]] = tuple(s for s in SITUATIONS if s.recognise is not None)
"""The situations the dashboard recognises from the records, in the order it lists them."""


def situation(key: str) -> Situation:
    """The situation ``key`` names (or named before: ``refit_failed``); a KeyError names the known keys.

    >>> situation("refit_failed").key, [r.event for r in situation("check_failed").raised_by]
    ('refit_refused', ['prefect.flow-run.Failed', 'prefect.flow-run.Crashed'])
    """
    found = next((s for s in SITUATIONS if key == s.key or key in s.former_keys), None)
    if found is None:
        raise KeyError(f"no alert situation {key!r}; the situations are {[s.key for s in SITUATIONS]}")
    return found


def open_situations(records: ServingRecords[C, R]) -> list[Raised[C, R]]:
    """The situations open on one serving version, in the order of :data:`DASHBOARD_SITUATIONS`.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> from datetime import UTC, datetime
    >>> @dataclass
    ... class Seen:
    ...     verdict: str
    ...     window_end: datetime
    ...     shift_kind: str | None = None
    >>> checks = [Seen("insufficient_data", datetime(2026, 1, d, tzinfo=UTC)) for d in (1, 2, 3)]
    >>> records = ServingRecords(("champion",), checks, [], insufficient_streak=3, streak_length=3)
    >>> [(raised.situation.key, raised.check.window_end.day) for raised in open_situations(records)]
    [('insufficient_data', 3)]
    """
    found: list[Raised[C, R]] = []
    for known in DASHBOARD_SITUATIONS:
        assert known.recognise is not None  # the dashboard's situations have a rule
        found += known.recognise(records)
    return found
