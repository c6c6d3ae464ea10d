"""Sequential control of the temperature test across scheduled checks: a two-sided CUSUM.

A monitor that runs every hour on the last 24 h tests overlapping windows: a fixed-window
test repeated hourly raises false alarms far more often than its level says, and a drift that
starts mid-window is diluted by the clean half of the window. This module accumulates the
evidence **across** checks instead, from each check's *new* labelled traffic only, in a state
of a few numbers the caller keeps between runs (:class:`SequentialState`, JSON).

The increments
--------------
Each check contributes the temperature test's sums (:class:`calibration.TemperatureStats`:
n, Σg, Σg², Σh of the NLL's derivatives in β = 1/T at the deployed T) of the rows that are new
since the previous check (the caller reads [previous end, now); the monitor takes the rows
whose label arrived in that interval, so every labelled row counts once, whatever its label
delay). Increments hold disjoint rows, so under no drift they are independent.

With κ = s²_g / mean h of the reference (the rows T was fitted on; 1 without one: the model
is taken as the truth) and θ = log(T_w / T_ref) the increment's shift of the optimal T from
the reference's, the increment's score sum has E[Σg] ≈ β Σh · θ and Var[Σg] = κ Σh (the score
test's variance from the increment's own information, as in :func:`calibration.temperature_test`).
Its **standardised score** and **information** are

    x = (Σg − β Σh θ_ref) / sqrt(κ Σh) ~ N(θ √I, 1),     √I = β sqrt(Σh / κ),

θ_ref being the reference's own one-step shift (0 when T was fitted on it).

The statistic
-------------
Two one-sided CUSUMs (Page 1954) in standard deviations, one per direction:

    C⁺ ← max(0, C⁺ + x − k − m⁺ √I)    (over-confident: T should grow)
    C⁻ ← max(0, C⁻ − x − k − m⁻ √I)    (under-confident: T should shrink)

alarm when either reaches h. ``m`` is the **margin in log T**, the effect the decision
requires: m = max(log(1 + margin), z · SE_ref), z = Φ⁻¹(1 − level / 2) (2.58 at the default
level 0.01) — the temperature test's margin (default 3 %), or, when the reference is too small
to resolve that, the shift its own estimation error (SE_ref, the sandwich SE of log T on the
reference) reaches with probability ``level``. In score units the boundary is not symmetric,
because the one-step shift of log T is Σg / (Σg + β Σh), not Σg / (β Σh): it equals +m at
Σg / (β Σh) = m / (1 − m) = m⁺ and −m at −m / (1 + m) = −m⁻.

Why the margin sits in the reference value: T̂ was fitted on a finite reference, so on traffic
from the reference's distribution every increment carries the same bias b = log(T* / T̂) — a
common drift across checks. A CUSUM on increments accumulates any common drift, however small,
and would eventually alarm on a perfectly stable stream. Subtracting m √I per increment makes
every shift with |b| ≤ m drift *down* (or, at the boundary, leaves N(0, 1) − k steps). So:

* with probability ≥ 1 − ``level`` over the reference's draw, |b| ≤ m and calibrated traffic
  keeps the ARL₀ below;
* with probability ≤ ``level``, |b| > m and calibrated traffic drifts the CUSUM up until it
  alarms: a false alarm the reference causes, once per version (its refit starts a new
  reference) — the sequential counterpart of the fixed-window test's level. The default margin
  covers it alone whenever SE_ref ≤ log(1.05) / 2.58 = 0.019, i.e. on references of a few
  thousand rows (docs/statistics.md).

The reference value in standardised units is thus k + m± √I: k for the noise, m± √I for
the margin.

The constants
-------------
With |b| ≤ m every step is stochastically below N(0, 1) − k, so the average run length to a
false alarm (ARL₀) is at least that of a two-sided CUSUM on N(0, 1) steps, whatever the
traffic volume. For **k = 0.5, h = 6.0** Siegmund's approximation (one side:
ARL = (e^{2kb} − 2kb − 1) / 2k², b = h + 1.166) gives 2,573 checks per side, 1,286 for the
two sides; simulated (``python -m benchmarks.sequential_study --arl``, 4,000 runs): **1,254
checks**, i.e. at most one false alarm per 52 days of hourly checks, 1.7× the target of one per
30 days (ARL₀ ≥ 720). The slack is for the skewness of real scores (a few confident errors
carry most of Σg²): at that worst case, real CIFAR increments give ARL₀ 924–1,100 checks with
100 rows and 1,143–1,266 with 400 (docs/statistics.md); h = 5.5 would give 770 on Gaussian
steps and about 570–690 on those of 100 rows.
Increments below ``min_rows`` (default 100) rows are held as pending and folded in with the
next ones (a 500-row day adds one increment every ~5 hours), which keeps the skewness of a
sum of few scores in check. k = 0.5 is the reference value that detects fastest a shift of one
standard deviation per increment beyond the margin.

Change point and reset
----------------------
Each side remembers when it last left 0 (``upper_since``/``lower_since``: the start of the
increment that made it positive) and the sums since then. On an alarm the **change point** is
that time (Page's estimate: the drift started where the statistic began its final climb), the
segment's sums give the shifted T since then, and the refit should fit on rows since the change
point, not on the pre-drift rows of a fixed window. After an alarm the statistic restarts from
0; a refit registers a new version, which starts a new state.

Escalation: a reference that is itself the cause
-------------------------------------------------
With probability ≤ ``level`` the reference's own error exceeds the margin (|b| > m above), and
then calibrated traffic drifts the statistic up again after every reset: an alarm every few
checks, for as long as the version serves, each a drift event whose refit the cool-down only
spaces out (and whose verification may refuse it: the traffic is not drifting, the reference
is off). A drift that outlasts its alarm without a new version (the refit was refused, or never
landed) looks the same. So the rule keeps the sums of every row folded in since the last reset
(``since_reset``) and the side of the last alarm, and when an alarm comes on the **same side
as the previous one** (the ``sequential_escalate_after``-th in a row, default the second)
while **every row since the previous alarm's reset** still fires the temperature test on that
side (:func:`calibration.temperature_test`, the decision's margin, level and expected errors),
it does not alarm again: it **escalates** — the reference itself is off (or the drift outlasted its refit):
re-register the version with a fresh reference, or refit T on recent traffic. The state records
it (``escalated_at``, ``escalated_side``), the check says so, and no further alarm comes from
this state: a new version starts a new one. A new drift long after an alarm still alarms: the
rows since the reset are then mostly calibrated, and the test on them does not fire.

References
----------
Page. "Continuous inspection schemes". Biometrika 41, 1954.
Siegmund. "Sequential Analysis: Tests and Confidence Intervals". Springer, 1985 (the ARL
approximation, §X.2).
Basseville, Nikiforov. "Detection of Abrupt Changes". Prentice Hall, 1993 (the change-time
estimate of a CUSUM).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final, Literal

from scipy.special import ndtri

from calibration import JsonResult, TemperatureStats, check_temperature, log_normal_interval, temperature_test

from ._validation import as_utc
from .policy import DEFAULT_POLICY, DriftPolicy

__all__ = [
    "SequentialCheck",
    "SequentialState",
    "update_sequential",
]


Side = Literal["over-confident", "under-confident"]
_FORMAT: Final = 1  # the JSON layout of SequentialState


def _sums(stats: TemperatureStats) -> list[float | int]:
    return [stats.n, stats.gradient_sum, stats.gradient_square_sum, stats.curvature_sum]


def _stats(values: object, temperature: float, name: str) -> TemperatureStats:
    if not (isinstance(values, list) and len(values) == 4 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)):
        raise ValueError(f"sequential state: {name} must be [n, Σg, Σg², Σh]; got {values!r}")
    n, gradient, square, curvature = values
    if not (float(n).is_integer() and n >= 0 and all(math.isfinite(float(v)) for v in values)):
        raise ValueError(f"sequential state: {name} holds a negative count or a non-finite sum: {values!r}")
    return TemperatureStats(temperature=temperature, n=int(n), gradient_sum=float(gradient),
                            gradient_square_sum=float(square), curvature_sum=float(curvature))


def _time(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"sequential state: {name} must be an ISO 8601 time or null; got {value!r}")
    try:
        return as_utc(datetime.fromisoformat(value), name=name)
    except (TypeError, ValueError) as error:
        raise ValueError(f"sequential state: {name} is not an aware ISO 8601 time: {value!r}") from error


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _side(value: object, name: str) -> Side | None:
    if value is None or value in ("over-confident", "under-confident"):
        return value
    raise ValueError(f"sequential state: {name} must be 'over-confident', 'under-confident' or null; got {value!r}")


@dataclass(frozen=True, slots=True, eq=False)
class SequentialState(JsonResult):
    """What a version's sequential rule keeps between checks (a few numbers; JSON via
    :meth:`to_json` / :meth:`from_json`).

    ``upper`` and ``lower`` are C⁺ and C⁻ in standard deviations; ``upper_since`` /
    ``lower_since`` when each last left 0 (the candidate change point; None at 0) and
    ``upper_segment`` / ``lower_segment`` the increments' sums since then. ``pending`` holds
    the sums of increments too small to fold in yet (fewer than ``min_rows`` rows), from
    ``pending_since``. ``last_end`` is the end of the last increment given (the next one
    starts there). ``checks`` counts the updates, ``increments`` those folded into the
    statistic, ``rows`` their rows; ``alarms`` the alarms raised, the last at
    ``last_alarm_at`` with change point ``last_change_point``. Every sum is at ``temperature``.
    ``upper_served_from`` / ``lower_served_from`` / ``pending_served_from`` are the earliest
    serving time among the rows of each segment and of what is pending (the increments are
    cut by when labels arrived; a refit reads rows by when they were served).
    ``since_reset`` holds the sums of every row folded in since the last alarm's reset (since
    the start before any alarm), ``last_alarm_side`` the side of the last alarm and
    ``repeated_alarms`` how many alarms in a row came on that side; ``escalated_at`` /
    ``escalated_side`` when and on which side the rule escalated (module docstring: no alarm
    after that). States written before these fields existed load with them empty.

    Examples
    --------
    >>> state = SequentialState.initial(1.5)
    >>> SequentialState.from_json(state.to_json()) == state
    True
    >>> state.upper, state.lower, state.last_end
    (0.0, 0.0, None)
    """

    temperature: float
    upper: float
    lower: float
    upper_since: datetime | None
    lower_since: datetime | None
    upper_segment: TemperatureStats
    lower_segment: TemperatureStats
    pending: TemperatureStats
    pending_since: datetime | None
    last_end: datetime | None
    checks: int
    increments: int
    rows: int
    alarms: int
    last_alarm_at: datetime | None
    last_change_point: datetime | None
    upper_served_from: datetime | None = None
    lower_served_from: datetime | None = None
    pending_served_from: datetime | None = None
    since_reset: TemperatureStats | None = None
    last_alarm_side: Side | None = None
    repeated_alarms: int = 0
    escalated_at: datetime | None = None
    escalated_side: Side | None = None

    @property
    def escalated(self) -> bool:
        """The rule escalated on this version: it raises no further alarm."""
        return self.escalated_at is not None

    @classmethod
    def initial(cls, temperature: float) -> SequentialState:
        """A fresh state at the deployed ``temperature``: nothing seen, both sides at 0."""
        temperature = check_temperature(temperature)
        empty = TemperatureStats.empty(temperature)
        return cls(temperature=temperature, upper=0.0, lower=0.0, upper_since=None, lower_since=None,
                   upper_segment=empty, lower_segment=empty, pending=empty, pending_since=None, last_end=None,
                   checks=0, increments=0, rows=0, alarms=0, last_alarm_at=None, last_change_point=None,
                   since_reset=empty)

    def to_json(self) -> str:
        """The state as one compact JSON object (what the monitor stores as a version tag)."""
        return json.dumps({
            "format": _FORMAT, "temperature": self.temperature, "upper": self.upper, "lower": self.lower,
            "upper_since": _iso(self.upper_since), "lower_since": _iso(self.lower_since),
            "upper_segment": _sums(self.upper_segment), "lower_segment": _sums(self.lower_segment),
            "pending": _sums(self.pending), "pending_since": _iso(self.pending_since),
            "last_end": _iso(self.last_end), "checks": self.checks, "increments": self.increments,
            "rows": self.rows, "alarms": self.alarms, "last_alarm_at": _iso(self.last_alarm_at),
            "last_change_point": _iso(self.last_change_point),
            "upper_served_from": _iso(self.upper_served_from), "lower_served_from": _iso(self.lower_served_from),
            "pending_served_from": _iso(self.pending_served_from),
            "since_reset": _sums(self._since_reset), "last_alarm_side": self.last_alarm_side,
            "repeated_alarms": self.repeated_alarms, "escalated_at": _iso(self.escalated_at),
            "escalated_side": self.escalated_side,
        }, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> SequentialState:
        """Read :meth:`to_json`'s form back; ValueError naming the field when it is not one."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as error:
            raise ValueError(f"sequential state is not JSON: {str(text)[:80]!r}") from error
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f"sequential state is not a format-{_FORMAT} object: {str(text)[:80]!r}")
        temperature = data.get("temperature")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise ValueError(f"sequential state: temperature must be a number; got {temperature!r}")
        temperature = check_temperature(float(temperature))
        numbers: dict[str, float] = {}
        for name in ("upper", "lower"):
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and value >= 0):
                raise ValueError(f"sequential state: {name} must be a finite number >= 0; got {value!r}")
            numbers[name] = float(value)
        counts: dict[str, int] = {}
        for name in ("checks", "increments", "rows", "alarms", "repeated_alarms"):
            value = data.get(name, 0 if name == "repeated_alarms" else None)  # absent before escalation existed
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"sequential state: {name} must be an integer >= 0; got {value!r}")
            counts[name] = value
        return cls(
            temperature=temperature, upper=numbers["upper"], lower=numbers["lower"],
            upper_since=_time(data.get("upper_since"), "upper_since"),
            lower_since=_time(data.get("lower_since"), "lower_since"),
            upper_segment=_stats(data.get("upper_segment"), temperature, "upper_segment"),
            lower_segment=_stats(data.get("lower_segment"), temperature, "lower_segment"),
            pending=_stats(data.get("pending"), temperature, "pending"),
            pending_since=_time(data.get("pending_since"), "pending_since"),
            last_end=_time(data.get("last_end"), "last_end"),
            checks=counts["checks"], increments=counts["increments"], rows=counts["rows"], alarms=counts["alarms"],
            last_alarm_at=_time(data.get("last_alarm_at"), "last_alarm_at"),
            last_change_point=_time(data.get("last_change_point"), "last_change_point"),
            upper_served_from=_time(data.get("upper_served_from"), "upper_served_from"),
            lower_served_from=_time(data.get("lower_served_from"), "lower_served_from"),
            pending_served_from=_time(data.get("pending_served_from"), "pending_served_from"),
            since_reset=(None if data.get("since_reset") is None
                         else _stats(data.get("since_reset"), temperature, "since_reset")),
            last_alarm_side=_side(data.get("last_alarm_side"), "last_alarm_side"),
            repeated_alarms=counts["repeated_alarms"],
            escalated_at=_time(data.get("escalated_at"), "escalated_at"),
            escalated_side=_side(data.get("escalated_side"), "escalated_side"),
        )

    @property
    def _since_reset(self) -> TemperatureStats:
        # None: a state written before the field existed, nothing counted yet.
        return self.since_reset if self.since_reset is not None else TemperatureStats.empty(self.temperature)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SequentialState):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of :meth:`to_json` as a dict (sums as [n, Σg, Σg², Σh])."""
        loaded: dict[str, Any] = json.loads(self.to_json())
        return loaded


@dataclass(frozen=True, slots=True)
class SequentialCheck(JsonResult):
    """One update of the sequential rule: the new state and what it says.

    ``state`` is the state to keep for the next check (reset to 0 after an alarm).
    ``folded`` is False when the increment (plus what was pending) had fewer than
    ``min_rows`` rows: then the statistic did not move and ``z`` is NaN. ``z`` is the
    increment's standardised score x (> 0 over-confident), ``information`` its I (so that
    ``z / sqrt(information)`` estimates its shift of log T, linearised), ``reference_value``
    k + m √I (the sides subtract k + m± √I, module docstring). ``upper`` / ``lower`` are the statistics after the update
    (before any reset), ``threshold`` is h, ``margin`` the relative margin and
    ``log_margin`` m = max(log(1 + margin), z · ``reference_standard_error``). On an alarm, ``side`` says
    which way, ``change_point`` when the drift started (on the increments' clock: label
    arrival), ``change_point_served_at`` the earliest serving time among the rows since then
    (where a refit should start reading),
    ``shift_ratio`` the segment's T over the reference's, with its ``confidence_level``
    interval, from the segment's ``segment_rows`` rows. ``escalated`` is True on the check
    where the rule escalates instead of alarming (module docstring): then ``alarm`` is False,
    ``side`` is the side, ``change_point`` the previous alarm's reset and ``shift_ratio`` (with
    its interval, from ``segment_rows`` rows) that of every row since then.
    """

    state: SequentialState
    start: datetime
    end: datetime
    n: int
    folded: bool
    z: float
    information: float
    reference_value: float
    upper: float
    lower: float
    threshold: float
    k: float
    margin: float
    log_margin: float
    reference_standard_error: float
    alarm: bool
    side: Side | None
    change_point: datetime | None
    change_point_served_at: datetime | None
    shift_ratio: float
    shift_ratio_low: float
    shift_ratio_high: float
    segment_rows: int
    confidence_level: float
    min_rows: int
    escalated: bool = False
    settling: int = 0
    """Rows labelled at or after ``end`` (inside the label settle time): not in this increment, the
    next check folds them in."""

    def sentence(self) -> str:
        """One line for a report's reasons."""
        stats = (f"CUSUM over-confident {self.upper:.2f}, under-confident {self.lower:.2f} (alarm at "
                 f"{self.threshold:g} sd; k = {self.k:g} beyond a margin of {math.expm1(self.log_margin):.1%} in T"
                 + (f", the reference's error; the test's is {self.margin:.0%})" if self.log_margin > math.log1p(self.margin)
                    else ")"))
        if self.escalated:
            since = "" if self.change_point is None else f" at {self.change_point.isoformat(timespec='seconds')}"
            return (f"sequential rule ESCALATION: {self.state.repeated_alarms} {self.side} alarms in a row, and the "
                    f"{self.segment_rows} rows since the last reset{since} still put T at {self.shift_ratio:.3f} "
                    f"[{self.shift_ratio_low:.3f}, {self.shift_ratio_high:.3f}] times the reference's, beyond the "
                    f"{self.margin:.0%} margin: the reference itself is off (or the drift outlasted its refit) — "
                    "re-register the version with a fresh reference or refit T on recent traffic; no further "
                    f"sequential alarm for this version; {stats}")
        if self.state.escalated_at is not None:
            return (f"sequential rule escalated at {self.state.escalated_at.isoformat(timespec='seconds')} "
                    f"({self.state.escalated_side}, the reference itself is off): no alarm until a new version is "
                    f"registered; {stats}")
        if self.alarm and self.change_point is not None:
            served = self.change_point_served_at
            since = "" if served is None or served == self.change_point else (
                f"; its rows were served from {served.isoformat(timespec='seconds')} on")
            return (f"sequential rule ALARM after {self.state.checks} checks: {stats}; {self.side}, the drift started "
                    f"at about {self.change_point.isoformat(timespec='seconds')} (change point; {self.segment_rows} "
                    f"rows since, T ratio {self.shift_ratio:.3f} [{self.shift_ratio_low:.3f}, "
                    f"{self.shift_ratio_high:.3f}] to the reference's{since})")
        later = (f"{self.settling} rows labelled since, inside the label settle time, go to the next check"
                 if self.settling else "later labels go to the next check")
        arrived = (f"labelled in [{self.start.isoformat(timespec='seconds')}, {self.end.isoformat(timespec='seconds')}),"
                   f" served at any time; {later}")
        if not self.folded:
            return (f"sequential rule: {self.n} new labelled rows since the last check ({arrived}), "
                    f"{self.state.pending.n} pending (< {self.min_rows} to fold in); {stats}")
        return f"sequential rule: no alarm ({self.n} new rows {arrived}; z = {self.z:+.2f}); {stats}"


def _earliest(*times: datetime | None) -> datetime | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _segment_ratio(
    segment: TemperatureStats, reference_shift: float, kappa: float, reference_se: float, confidence_level: float
) -> tuple[float, float, float]:
    """T of the segment over the reference's (one Newton step), with its interval (the score
    test's variance κ Σh for the segment, as in :func:`calibration.temperature_test`)."""
    shift = segment.log_temperature_shift
    window_se = segment.log_temperature_standard_error(kappa * segment.curvature_sum / segment.n) if segment.n else math.nan
    if not (math.isfinite(shift) and math.isfinite(window_se)):
        return math.nan, math.nan, math.nan
    # In log space: a segment that says next to nothing about T has ends at 0 and infinity.
    return log_normal_interval(shift - reference_shift, math.hypot(window_se, reference_se), confidence_level)


def update_sequential(
    state: SequentialState,
    increment: TemperatureStats,
    *,
    start: datetime,
    end: datetime,
    reference: TemperatureStats | None = None,
    served_from: datetime | None = None,
    policy: DriftPolicy = DEFAULT_POLICY,
) -> SequentialCheck:
    """Fold one check's new traffic into the sequential rule (module docstring).

    Parameters
    ----------
    state : SequentialState
        The version's state after the previous check (:meth:`SequentialState.initial` the
        first time).
    increment : TemperatureStats
        The sums of the rows new since the previous check, at the state's temperature.
    start, end : datetime
        Aware bounds of the increment: ``start`` is not before ``state.last_end`` (increments
        must not overlap) and ``end`` is after it.
    reference : TemperatureStats, optional
        The reference's sums at the same T (the rows T was fitted on): κ, θ_ref and SE_ref
        come from it. Without it: κ = 1, θ_ref = 0, SE_ref = 0.
    served_from : datetime, optional
        The earliest serving time among the increment's rows (aware), when the increments are
        cut by another clock (label arrival): carried with the segments, it gives
        ``change_point_served_at``. Default: ``start``.
    policy : DriftPolicy, default=DEFAULT_POLICY
        The margin (``temperature_margin``: the relative shift of T the decision requires), the
        level (``p_threshold``: the chance that the reference's error alone exceeds the margin,
        m >= Φ⁻¹(1 − level / 2) SE_ref), k and h (``cusum_reference``, ``cusum_threshold``, in
        standard deviations), the rows an increment needs (``sequential_min_rows``; fewer wait
        with what is pending), the level of the segment's T-ratio interval
        (``confidence_level``) and when a repeated alarm escalates instead
        (``sequential_escalate_after``: that many alarms in a row on one side, the rows since the
        previous reset firing the temperature test at ``temperature_margin`` and ``p_threshold``).

    Returns
    -------
    SequentialCheck

    Raises
    ------
    TypeError, ValueError
        If an argument is of the wrong type or out of range, the increment was summed at
        another temperature, or it overlaps the previous one.

    Examples
    --------
    >>> from calibration import TemperatureStats
    >>> t0 = datetime(2026, 1, 1, tzinfo=UTC)
    >>> hour = timedelta(hours=1)
    >>> state = SequentialState.initial(1.0)
    >>> calm = TemperatureStats(temperature=1.0, n=200, gradient_sum=3.0, gradient_square_sum=200.0,
    ...                         curvature_sum=200.0)
    >>> check = update_sequential(state, calm, start=t0, end=t0 + hour)
    >>> check.alarm, round(check.z, 3), check.upper, check.state.last_end == t0 + hour
    (False, 0.212, 0.0, True)
    >>> hot = TemperatureStats(temperature=1.0, n=200, gradient_sum=60.0, gradient_square_sum=220.0,
    ...                        curvature_sum=200.0)  # T_w / T ≈ 1.26 in every hour
    >>> state = check.state
    >>> for i in range(1, 3):  # each hot hour adds z − k − m⁺√I = 4.24 − 0.5 − 0.73 = 3.02
    ...     check = update_sequential(state, hot, start=t0 + i * hour, end=t0 + (i + 1) * hour)
    ...     state = check.state
    >>> check.alarm, check.side, check.change_point == t0 + hour, round(check.shift_ratio, 2)
    (True, 'over-confident', True, 1.26)
    >>> check.state.upper, check.state.alarms  # restarted after the alarm
    (0.0, 1)
    """
    if not isinstance(state, SequentialState):
        raise TypeError(f"state must be a SequentialState; got {type(state).__name__}")
    if not isinstance(increment, TemperatureStats):
        raise TypeError(f"increment must be TemperatureStats (the new rows' sums); got {type(increment).__name__}")
    if not math.isclose(increment.temperature, state.temperature, rel_tol=1e-9):
        raise ValueError(f"the increment was summed at T = {increment.temperature!r} but the sequential state is at "
                         f"T = {state.temperature!r}; a new T (a new version) starts a new state")
    if reference is not None and not isinstance(reference, TemperatureStats):
        raise TypeError(f"reference must be TemperatureStats or None; got {type(reference).__name__}")
    if reference is not None and not math.isclose(reference.temperature, state.temperature, rel_tol=1e-9):
        raise ValueError(f"the reference was summed at T = {reference.temperature!r}, the state is at "
                         f"T = {state.temperature!r}")
    start, end = as_utc(start, name="start"), as_utc(end, name="end")
    served = start if served_from is None else as_utc(served_from, name="served_from")
    if end <= start:
        raise ValueError(f"the increment must end after it starts: [{start.isoformat()}, {end.isoformat()})")
    if state.last_end is not None and start < state.last_end:
        raise ValueError(f"the increment starts at {start.isoformat()}, before the previous one ended "
                         f"({state.last_end.isoformat()}): increments must not overlap (each row counts once)")
    if not isinstance(policy, DriftPolicy):
        raise TypeError(f"policy must be a DriftPolicy; got {type(policy).__name__}")
    margin, level, confidence_level = policy.temperature_margin, policy.p_threshold, policy.confidence_level
    k, h, min_rows = policy.cusum_reference, policy.cusum_threshold, policy.sequential_min_rows

    usable = reference is not None and reference.n >= 2 and reference.curvature_sum > 0
    if reference is not None and usable:
        kappa = reference.gradient_variance / (reference.curvature_sum / reference.n)
        reference_shift = reference.log_temperature_shift
        reference_se = reference.log_temperature_standard_error()
    else:
        kappa, reference_shift, reference_se = 1.0, 0.0, 0.0
    if not (math.isfinite(kappa) and kappa > 0 and math.isfinite(reference_shift) and math.isfinite(reference_se)):
        kappa, reference_shift, reference_se = 1.0, 0.0, 0.0
    log_margin = max(math.log1p(margin), float(ndtri(1.0 - level / 2.0)) * reference_se)
    # The one-step shift Σg / (Σg + βΣh) is ±m at these values of Σg / (βΣh) (module docstring).
    upper_margin = log_margin / (1.0 - log_margin) if log_margin < 1.0 else math.inf
    lower_margin = log_margin / (1.0 + log_margin)

    pending = state.pending + increment
    pending_since = state.pending_since if state.pending.n else (start if increment.n else None)
    pending_served = _earliest(state.pending_served_from if state.pending.n else None, served if increment.n else None)
    beta = 1.0 / state.temperature
    base = replace(state, last_end=end, checks=state.checks + 1)
    if pending.n < min_rows or pending.curvature_sum <= 0:
        kept = replace(base, pending=pending, pending_since=pending_since, pending_served_from=pending_served)
        return SequentialCheck(
            state=kept, start=start, end=end, n=increment.n, folded=False, z=math.nan, information=math.nan,
            reference_value=math.nan, upper=state.upper, lower=state.lower, threshold=h, k=k, margin=margin,
            log_margin=log_margin, reference_standard_error=reference_se, alarm=False, side=None, change_point=None,
            change_point_served_at=None, shift_ratio=math.nan, shift_ratio_low=math.nan, shift_ratio_high=math.nan, segment_rows=0,
            confidence_level=confidence_level, min_rows=int(min_rows),
        )

    since = pending_since if pending_since is not None else start
    root_information = beta * math.sqrt(pending.curvature_sum / kappa)
    z = (pending.gradient_sum - beta * pending.curvature_sum * reference_shift) / math.sqrt(kappa * pending.curvature_sum)
    reference_value = k + log_margin * root_information
    upper = max(0.0, state.upper + z - k - upper_margin * root_information)
    lower = max(0.0, state.lower - z - k - lower_margin * root_information)
    empty = TemperatureStats.empty(state.temperature)
    upper_since = (state.upper_since or since) if upper > 0 else None
    lower_since = (state.lower_since or since) if lower > 0 else None
    upper_segment = (state.upper_segment + pending) if upper > 0 else empty
    lower_segment = (state.lower_segment + pending) if lower > 0 else empty
    upper_served = _earliest(state.upper_served_from if state.upper_since else None, pending_served) if upper > 0 else None
    lower_served = _earliest(state.lower_served_from if state.lower_since else None, pending_served) if lower > 0 else None
    crossed: Side | None = None
    if upper >= h or lower >= h:
        crossed = "over-confident" if upper - h >= lower - h else "under-confident"
    since_reset = state._since_reset + pending
    repeated = state.repeated_alarms + 1 if crossed is not None and crossed == state.last_alarm_side else 1
    escalated = (crossed is not None and not state.escalated and repeated >= policy.sequential_escalate_after
                 and _still_shifted(since_reset, reference if usable else None, crossed, policy))
    # Once escalated the statistic still restarts at h, but nothing alarms until a new version.
    alarm = crossed is not None and not state.escalated and not escalated
    side = crossed if alarm or escalated else None
    segment = upper_segment if side == "over-confident" else lower_segment
    change_point = (upper_since if side == "over-confident" else lower_since) if alarm else None
    change_served = (upper_served if side == "over-confident" else lower_served) if alarm else None
    ratio, low, high = (
        _segment_ratio(segment, reference_shift, kappa, reference_se, confidence_level) if alarm
        else _segment_ratio(since_reset, reference_shift, kappa, reference_se, confidence_level) if escalated
        else (math.nan, math.nan, math.nan)
    )
    folded = replace(
        base, pending=empty, pending_since=None, pending_served_from=None, increments=state.increments + 1,
        rows=state.rows + pending.n, since_reset=since_reset,
    )
    if crossed is not None:
        new_state = replace(folded, upper=0.0, lower=0.0, upper_since=None, lower_since=None, upper_segment=empty,
                            lower_segment=empty, upper_served_from=None, lower_served_from=None)
        if alarm:
            new_state = replace(new_state, alarms=state.alarms + 1, last_alarm_at=end, last_change_point=change_point,
                                since_reset=empty, last_alarm_side=crossed, repeated_alarms=repeated)
        elif escalated:
            new_state = replace(new_state, escalated_at=end, escalated_side=crossed, repeated_alarms=repeated)
    else:
        new_state = replace(folded, upper=upper, lower=lower, upper_since=upper_since, lower_since=lower_since,
                            upper_segment=upper_segment, lower_segment=lower_segment, upper_served_from=upper_served,
                            lower_served_from=lower_served)
    return SequentialCheck(
        state=new_state, start=start, end=end, n=increment.n, folded=True, z=z,
        information=root_information * root_information, reference_value=reference_value, upper=upper, lower=lower,
        threshold=h, k=k, margin=margin, log_margin=log_margin, reference_standard_error=reference_se, alarm=alarm,
        side=side, change_point=change_point if alarm else state.last_alarm_at if escalated else None,
        change_point_served_at=change_served, shift_ratio=ratio, shift_ratio_low=low, shift_ratio_high=high,
        segment_rows=segment.n if alarm else since_reset.n if escalated else 0, confidence_level=confidence_level,
        min_rows=int(min_rows), escalated=escalated,
    )


def _still_shifted(
    since_reset: TemperatureStats, reference: TemperatureStats | None, side: Side, policy: DriftPolicy
) -> bool:
    """Every row since the previous alarm's reset fires the temperature test on ``side``: the
    shift did not go away after the alarm (the module docstring's escalation)."""
    test = temperature_test(since_reset, reference, margin=policy.temperature_margin, level=policy.p_threshold,
                            confidence_level=policy.confidence_level, min_expected_errors=policy.min_expected_errors)
    return test.drifted and test.direction == side
