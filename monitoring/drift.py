"""The drift decision on a window of labelled traffic.

:func:`decide_drift` turns a :class:`~monitoring.WindowSummary` and the version's
:class:`DriftReference` into a :class:`DriftReport`, with the parameters of a
:class:`~monitoring.DriftPolicy`. Drift is a result, never an exception. The tests are units
(:mod:`monitoring.drift_tests`): the decision folds the policy's tests over the window and its
groups, and the report holds their outcomes.

The decision
------------
A drift is a change of the window **against the reference** the version was registered
with, larger than a stated effect, and significant. Two tests, each two-sample:

* **the temperature test** (primary; :func:`calibration.temperature_test`): the window's
  NLL-optimal T, one Newton step from the deployed T from the window's sums, against the
  reference's (the rows T was fitted on, whose own estimation error counts); drift when
  T_w / T_ref lies beyond [1/(1 + margin), 1 + margin] at level ``p_threshold`` / 2
  (``temperature_margin``, default 3 %: a refit on fresh traffic gains nothing measurable
  below it, docs/statistics.md "The margins"). It says which way: over-confident (T should
  grow) or under-confident.
* **the ECE test** (secondary): the window's calibration error (debiased ℓ1 ECE of Kumar,
  Liang, Ma 2019, with its bootstrap interval; :func:`calibration.calibration_error_from_stats`)
  against the reference's ECE (``baseline_ece``, with its interval when given); drift when
  the excess is beyond ``ece_tolerance`` at level ``p_threshold`` / 2: z = (excess − tolerance) /
  sqrt(SE_w² + SE_ref²), SE from each interval's half-width. It catches what one temperature
  does not describe (a change of the reliability curve's shape). The plug-in binned ECE is
  biased upward on small windows, most of all for a well-calibrated model, so it is reported
  but no longer tested; the consistency-resampling p-value (window vs a perfectly calibrated
  model, Vaicenavicius et al. 2019) is reported as context (``consistency_p_value``).

Then:

* ``insufficient_data`` when the window holds fewer than ``min_window`` labelled rows: not a
  drift, not an ok; nothing is tested.
* ``drift`` when a test fires on the whole window, or on a group with at least
  ``min_group_size`` rows (the group and the test are named in ``tests_fired``). A group is
  tested against its own reference when one is given (``group_reference``,
  ``group_baseline_ece``), else against the version's. Groups below that size are skipped
  and listed.
* ``calibrated`` when no test fired and the data establish calibration: the window's T is
  inside the **equivalence margin** (``equivalence_margin``, default 10 %: the shift whose refit
  gains less than the ECE test's tolerance on fresh traffic) by two one-sided tests at
  ``equivalence_level`` (default 5 %): the window's T interval at that level lies inside
  [1/(1 + margin), 1 + margin] of the reference's; :attr:`calibration.TemperatureTest.within_margin`.
* ``undetermined`` otherwise: nothing fired, but the window could not have told a drift from a
  shift inside the equivalence margin. ``rows_to_decide`` estimates the labelled rows a window would need
  (from the interval's width; None when no window size decides: the reference's own interval
  is too wide). A policy without the temperature test never establishes calibration.

The equivalence is the window's; groups add drift (a group that fires), not calibration.

Two tests and several groups mean several tests (Bonferroni): the window's two tests run at
``p_threshold`` / 2 each, and each group's at ``p_threshold`` / (2 × groups tested), so ten
calibrated groups do not raise ten times the false alarms of one. The margins make each test
conservative when nothing changed (its level is reached only at a shift of exactly the
margin). Measured on real CIFAR logits (docs/statistics.md, with the command that regenerates it).

The cool-down
-------------
A drift inside the cool-down is still **reported as a drift** (``verdict == "drift"``,
``drift_detected`` True: dashboards show the truth) but with ``refit_recommended`` False and
``in_cooldown`` True, so one drift does not start a storm of refits. The caller emits the drift
event (and starts a refit) only when ``refit_recommended`` is True, and passes the time of that
event as ``last_drift_at`` next time — the time of the last *event*, not of the last drift
verdict, or a persistent drift would extend the cool-down for ever.

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
Kumar, Liang, Ma. "Verified Uncertainty Calibration". NeurIPS 2019.
Vaicenavicius, Widmann, Andersson, Lindsten, Roll, Schön. "Evaluating model calibration in
classification". AISTATS 2019.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal, TypeVar

from calibration import (
    CalibrationStats,
    Interval,
    ConsistencyTest,
    PriorShiftTest,
    ReadThrough,
    ReliabilityTable,
    ShiftDiagnosis,
    TemperatureStats,
    TemperatureTest,
    consistency_resampling_from_stats,
)

from ._validation import as_utc
from .change_point import WindowChangePoint
from .drift_tests import ScopeEvidence, ScopeReference, TestOutcome, configured_tests, fmt_p, window_level
from .early_warning import EarlyWarning
from .policy import DEFAULT_POLICY, DriftPolicy
from .sequential import SequentialCheck
from .window import WindowSummary

__all__ = ["DriftReference", "DriftReport", "GroupDrift", "Verdict", "decide_drift", "with_stream_checks"]

Verdict = Literal["insufficient_data", "drift", "calibrated", "undetermined"]

_MAX_LISTED = 10
_FINITE = Interval()


@dataclass(frozen=True, slots=True)
class DriftReference:
    """What a window is compared with: the reference the version was registered with.

    ``overall`` is the version's (its temperature sums at the registered T, its ECE with
    interval, estimator and binning); ``group_ece`` and ``group_temperature_stats`` a group's
    own where they were registered (a group without its own is compared with ``overall``);
    ``nll`` the registered NLL (mean nats), reported beside the window's, not tested.

    Examples
    --------
    >>> reference = DriftReference.of(0.02, ece_interval=(0.01, 0.03), group_ece={"eu": 0.05})
    >>> reference.scope("eu").ece, reference.scope("eu").has_ece_interval, reference.scope("us").ece_low
    (0.05, False, 0.01)
    """

    overall: ScopeReference
    group_ece: Mapping[str, float] = field(default_factory=dict)
    group_temperature_stats: Mapping[str, TemperatureStats] = field(default_factory=dict)
    nll: float = math.nan

    @classmethod
    def of(
        cls, ece: float, *, ece_interval: tuple[float, float] | None = None, temperature_stats: TemperatureStats | None = None,
        ece_estimator: str = DEFAULT_POLICY.ece_estimator, n_bins: int = 15, nll: float | None = None,
        group_ece: Mapping[str, float] | None = None,
        group_temperature_stats: Mapping[str, TemperatureStats] | None = None,
    ) -> DriftReference:
        """The reference from its parts, each checked (a ValueError or TypeError names it)."""
        low, high = _interval(ece_interval)
        overall = ScopeReference(ece=_finite(ece, "baseline_ece"), ece_low=low, ece_high=high,
                                 ece_estimator=ece_estimator, n_bins=n_bins,
                                 temperature_stats=_stats(temperature_stats, "reference"))
        return cls(
            overall=overall,
            group_ece={str(key): _finite(value, f"group_baseline_ece[{key!r}]") for key, value in (group_ece or {}).items()},
            group_temperature_stats={str(key): _stats(value, f"group_reference[{key!r}]")  # type: ignore[misc]
                                     for key, value in (group_temperature_stats or {}).items()},
            nll=math.nan if nll is None else _finite(nll, "baseline_nll"),
        )

    def scope(self, group: str | None) -> ScopeReference:
        """The reference of the window (``None``) or of one group."""
        if group is None:
            return self.overall
        own_ece = group in self.group_ece
        return replace(
            self.overall,
            ece=self.group_ece[group] if own_ece else self.overall.ece,
            ece_low=math.nan if own_ece else self.overall.ece_low,
            ece_high=math.nan if own_ece else self.overall.ece_high,
            temperature_stats=self.group_temperature_stats.get(group, self.overall.temperature_stats),
        )

    def check_temperature(self, temperature: float) -> None:
        """Refuse sums read at another T than the window's (both must be at the deployed T)."""
        named = [("reference", self.overall.temperature_stats)] + [
            (f"group_reference[{key!r}]", stats) for key, stats in self.group_temperature_stats.items()]
        for name, stats in named:
            if stats is not None and not math.isclose(stats.temperature, temperature, rel_tol=1e-9):
                raise ValueError(f"{name} was summed at T = {stats.temperature!r} but the window at T = "
                                 f"{temperature!r}; the reference must be read at the deployed T")


def _finite(value: object, name: str) -> float:
    return _FINITE.check(value, name=name)


def _stats(value: object, name: str) -> TemperatureStats | None:
    if value is not None and not isinstance(value, TemperatureStats):
        raise TypeError(f"{name} must be TemperatureStats (the reference's sums at the deployed T); got "
                        f"{type(value).__name__}")
    return value


def _interval(value: tuple[float, float] | None) -> tuple[float, float]:
    if value is None:
        return math.nan, math.nan
    try:
        low, high = (float(end) for end in value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"baseline_ece_interval must be a pair of numbers (low, high) or None; got {value!r}") from error
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise ValueError(f"baseline_ece_interval must be finite with low <= high; got {value!r}")
    return low, high


def _outcome_of(outcomes: tuple[TestOutcome, ...], test: str) -> TestOutcome | None:
    """The outcome of ``test`` among ``outcomes`` (a group's or the window's); None: not run."""
    return next((outcome for outcome in outcomes if outcome.test == test), None)


def _temperature_test_of(outcomes: tuple[TestOutcome, ...]) -> TemperatureTest | None:
    """The temperature test's detail among ``outcomes``; None when it did not run."""
    found = _outcome_of(outcomes, "temperature")
    return found.detail if found is not None and isinstance(found.detail, TemperatureTest) else None


@dataclass(frozen=True, slots=True)
class GroupDrift:
    """The decision for one group of the window: its numbers and its tests' outcomes.

    ``tested`` is False for a group below ``min_group_size`` rows, or when the window as a
    whole has too few (``outcomes`` empty then); ``level`` is the Bonferroni-corrected level
    its tests ran at; ``ece`` the plug-in binned ECE; ``reason`` one sentence.
    """

    group: str
    n: int
    tested: bool
    level: float
    calibration: CalibrationStats
    temperature_stats: TemperatureStats
    baseline_ece: float
    reason: str
    outcomes: tuple[TestOutcome, ...] = ()

    @property
    def drifted(self) -> bool:
        return any(outcome.fired for outcome in self.outcomes)

    @property
    def ece(self) -> float:
        return self.calibration.ece

    def outcome(self, test: str) -> TestOutcome | None:
        """The outcome of ``test`` on this group (None: not run)."""
        return _outcome_of(self.outcomes, test)

    @property
    def temperature_test(self) -> TemperatureTest | None:
        return _temperature_test_of(self.outcomes)


_Read = TypeVar("_Read")


class _FromSummary(ReadThrough[WindowSummary, _Read]):
    """An attribute of a :class:`DriftReport` that its window summary holds."""

    PART = "summary"


@dataclass(frozen=True, slots=True, eq=False)
class DriftReport:
    """The verdict on a window, with its reasons and every number behind it.

    ``summary`` is the window read at ``summary.temperature`` (the registered T); ``policy`` the
    parameters the decision used and ``reference`` what it compared with. ``outcomes`` are the
    window's tests (the policy's, in its order; empty for ``insufficient_data``), ``groups`` each
    group's decision. ``reasons`` are full sentences with the numbers, first the ones that
    decided the verdict. A drift inside the cool-down is still a drift (``verdict``, dashboards
    show the truth) but ``refit_recommended`` is False. ``consistency`` compares the binned ECE
    with a perfectly calibrated model on the same rows (context, not the decision);
    ``sequential`` and ``early_warning`` are the checks across the stream
    (:func:`with_stream_checks`); ``diagnosis`` which shift the check saw and ``prior_test`` the
    served rows' class priors against the version's reference (:func:`monitoring.diagnose_check`;
    None: not diagnosed, or no reference priors). A drift diagnosed as a label shift recommends no
    temperature refit (a prior correction fits it).
    """

    verdict: Verdict
    reasons: tuple[str, ...]
    checked_at: datetime
    in_cooldown: bool
    cooldown_until: datetime | None
    summary: WindowSummary
    policy: DriftPolicy
    reference: DriftReference
    outcomes: tuple[TestOutcome, ...]
    groups: tuple[GroupDrift, ...]
    reliability: ReliabilityTable
    consistency: ConsistencyTest | None = None
    sequential: SequentialCheck | None = None
    early_warning: EarlyWarning | None = None
    diagnosis: ShiftDiagnosis | None = None
    prior_test: PriorShiftTest | None = None
    window_change_point: WindowChangePoint | None = None

    @property
    def drift_detected(self) -> bool:
        return self.verdict == "drift"

    @property
    def refit_recommended(self) -> bool:
        """A drift outside the cool-down, not diagnosed as a label shift: the caller emits the drift
        event (and a temperature refit starts)."""
        label_shift = self.diagnosis is not None and self.diagnosis.kind == "label_shift"
        return self.drift_detected and not self.in_cooldown and not label_shift

    @property
    def rows_to_decide(self) -> int | None:
        """On an ``undetermined`` verdict, the labelled rows a window would need to decide (drift or
        calibrated), from the window's T interval; None otherwise, or when no window size decides."""
        test = self.temperature_test
        return test.rows_to_decide() if self.verdict == "undetermined" and test is not None else None

    @property
    def tests_fired(self) -> tuple[str, ...]:
        """Each test that fired: ``temperature``, ``ece``, ``group 'x' temperature``, ..., ``sequential``."""
        fired = [o.label for o in self.outcomes if o.fired] + [
            o.label for g in self.groups for o in g.outcomes if o.fired]
        return tuple(fired + (["sequential"] if self.sequential is not None and self.sequential.alarm else []))

    def outcome(self, test: str) -> TestOutcome | None:
        """The window's outcome of ``test`` (None: not run)."""
        return _outcome_of(self.outcomes, test)

    @property
    def temperature_test(self) -> TemperatureTest | None:
        """The window's temperature test (None when it did not run)."""
        return _temperature_test_of(self.outcomes)

    # What the window's summary holds, read through the report: ``report.n`` is ``report.summary.n``.
    n = _FromSummary(lambda summary: summary.n)
    model_name = _FromSummary(lambda summary: summary.model_name)
    model_version = _FromSummary(lambda summary: summary.model_version)
    window_start = _FromSummary(lambda summary: summary.start)
    window_end = _FromSummary(lambda summary: summary.end)
    temperature = _FromSummary(lambda summary: summary.temperature)

    @property
    def window(self) -> CalibrationStats:
        """The window's calibration sums (``ece``, ``nll``, ``accuracy``, ... at the registered T)."""
        return self.summary.overall

    @property
    def baseline_ece(self) -> float:
        return self.reference.overall.ece

    @property
    def drifted_groups(self) -> tuple[str, ...]:
        return tuple(g.group for g in self.groups if g.drifted)

    @property
    def change_point(self) -> datetime | None:
        """Where the drift began, in serving time: after a sequential alarm, the earliest serving time
        among the rows since the drift began (the alarm's change point, moved from the clock of label
        arrival to that of serving); else the window's own change point when one was found
        (:func:`monitoring.window_change_point`); else None."""
        check = self.sequential
        if check is None or not check.alarm:
            found = self.window_change_point
            return None if found is None else found.at
        return check.change_point_served_at or check.change_point

    @property
    def refit_window_start(self) -> datetime:
        """Where a refit of this drift should start reading traffic: the change point (rows before it
        are pre-drift), else the window's start."""
        change_point = self.change_point
        return self.window_start if change_point is None else min(change_point, self.window_end)


# --------------------------------------------------------------------------- the decision


def _check_kinds(**values: tuple[object, type]) -> None:
    """A TypeError naming the first argument that is not of its kind (``name=(value, kind)``)."""
    for name, (value, kind) in values.items():
        if not isinstance(value, kind):
            raise TypeError(f"{name} must be a {kind.__name__}; got {type(value).__name__}")


def decide_drift(
    summary: WindowSummary, reference: DriftReference, policy: DriftPolicy = DEFAULT_POLICY, *,
    last_drift_at: datetime | None = None, now: datetime | None = None,
) -> DriftReport:
    """Decide whether a window of labelled traffic shows calibration drift, and say why.

    The insufficient-data gate, a fold of ``policy.tests`` over the window and its groups
    (Bonferroni over tests × groups), the cool-down after the last drift event.

    Parameters
    ----------
    summary : WindowSummary
        The window at the version's registered temperature (:func:`summarise_window`).
    reference : DriftReference
        The version's registration reference (sums at the same T, ECE with its estimator).
    policy : DriftPolicy, default=DEFAULT_POLICY
        Every parameter of the decision.
    last_drift_at, now : datetime, optional
        When the last drift event was emitted; the time of the check (default: the window's end).

    Returns
    -------
    DriftReport

    Raises
    ------
    TypeError, ValueError
        A wrong type, a naive datetime, a reference at another T, an unknown test.

    Examples
    --------
    >>> from monitoring import DriftPolicy, summarise_arrays
    >>> rng = np.random.default_rng(0)
    >>> logits = 3.0 * rng.normal(size=(4000, 5))
    >>> p = np.exp(logits / 2.0); p /= p.sum(axis=1, keepdims=True)  # the truth: T = 2
    >>> labels = (rng.random((4000, 1)) > p.cumsum(axis=1)).sum(axis=1).clip(0, 4)
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> window = summarise_arrays(logits, labels, temperature=1.0, start=t, end=t)  # served at T = 1
    >>> report = decide_drift(window, DriftReference.of(0.02))
    >>> report.verdict, report.tests_fired[0], report.temperature_test.direction
    ('drift', 'temperature', 'over-confident')
    >>> decide_drift(window, DriftReference.of(0.02), DriftPolicy(min_window=5000)).verdict
    'insufficient_data'
    """
    _check_kinds(summary=(summary, WindowSummary), reference=(reference, DriftReference), policy=(policy, DriftPolicy))
    reference.check_temperature(summary.temperature)
    checked_at = summary.end if now is None else as_utc(now, name="now")
    last_event = None if last_drift_at is None else as_utc(last_drift_at, name="last_drift_at")
    tests = configured_tests(policy)
    enough = summary.n >= policy.min_window
    tested = sorted(key for key, stats in summary.groups.items() if enough and stats.n >= policy.min_group_size)
    level = window_level(policy)
    group_level = level / max(1, len(tested))

    def run(group: str | None, level: float, seed: int) -> tuple[TestOutcome, ...]:
        evidence = _evidence(summary, reference, group)
        return tuple(test.run(evidence, level=level, policy=policy, seed=seed) for test in tests)

    outcomes = run(None, level, policy.seed) if enough else ()
    groups = tuple(
        _group(_evidence(summary, reference, key), policy, group_level,
               run(key, group_level, policy.seed + 1 + index) if key in tested else ())
        for index, (key, stats) in enumerate(summary.groups.items())
    )
    fired = any(o.fired for o in outcomes) or any(g.drifted for g in groups)
    verdict: Verdict = "insufficient_data" if not enough else "drift" if fired else (
        "calibrated" if _established(outcomes) else "undetermined")
    in_cooldown = last_event is not None and checked_at < last_event + policy.cooldown
    cooldown_until = last_event + policy.cooldown if last_event is not None and in_cooldown else None
    report = DriftReport(
        verdict=verdict, reasons=(), checked_at=checked_at, in_cooldown=in_cooldown, cooldown_until=cooldown_until,
        summary=summary, policy=policy, reference=reference, outcomes=outcomes, groups=groups,
        reliability=summary.overall.reliability_table(min_count=policy.min_bin_count),
        consistency=_consistency(summary.overall, policy) if enough else None,
    )
    return replace(report, reasons=_reasons(report, last_event))


def _established(outcomes: tuple[TestOutcome, ...]) -> bool:
    """Whether the window's temperature test established calibration within its margin."""
    test = _temperature_test_of(outcomes)
    return test is not None and test.within_margin


def _consistency(window: CalibrationStats, policy: DriftPolicy) -> ConsistencyTest:
    """The binned ECE against a perfectly calibrated model on the same rows (context, not the decision)."""
    return consistency_resampling_from_stats(window.bin_gap_sum, window.bin_variance_sum, window.n,
                                             n_resamples=policy.n_resamples, seed=policy.seed)


def _evidence(summary: WindowSummary, reference: DriftReference, group: str | None) -> ScopeEvidence:
    """What the tests read of the window (``group`` None) or of one of its groups."""
    if group is None:
        return ScopeEvidence(None, summary.overall, summary.temperature_stats, reference.overall)
    return ScopeEvidence(group, summary.groups[group], summary.group_temperature_stats.get(
        group, TemperatureStats.empty(summary.temperature)), reference.scope(group))


def _group(evidence: ScopeEvidence, policy: DriftPolicy, level: float, outcomes: tuple[TestOutcome, ...]) -> GroupDrift:
    key, n = str(evidence.scope), evidence.calibration.n
    if outcomes:
        fired = [o.sentence for o in outcomes if o.fired]
        reason = "; ".join(fired or [o.sentence for o in outcomes if o.sentence])
    else:
        why = (f"{n} labelled rows < min_group_size {policy.min_group_size}" if n < policy.min_group_size
               else "the window as a whole has too few labelled rows")
        reason = f"group {key!r} not tested: {why}"
    return GroupDrift(group=key, n=n, tested=bool(outcomes), level=level, calibration=evidence.calibration,
                      temperature_stats=evidence.temperature_stats, baseline_ece=evidence.reference.ece, reason=reason,
                      outcomes=outcomes)


def _reasons(report: DriftReport, last_event: datetime | None) -> tuple[str, ...]:
    """The sentences: what decided the verdict first, then the rest of the window's, then context."""
    summary, policy = report.summary, report.policy
    if report.verdict == "insufficient_data":
        window = f"[{summary.start.isoformat()}, {summary.end.isoformat()})"
        decided = [f"only {summary.n} labelled row{'' if summary.n == 1 else 's'} in the window {window}; at least "
                   f"{policy.min_window} are needed to decide (min_window)"]
        rest: list[str] = []
    else:
        drifted = [g for g in report.groups if g.drifted]
        hides = " (the average hides the group drift)" if drifted and not any(o.fired for o in report.outcomes) else ""
        decided = [o.sentence + hides for o in report.outcomes if o.fired] + [g.reason for g in drifted]
        if report.verdict in ("calibrated", "undetermined"):
            decided.append(_no_drift_sentence(report))
        rest = [o.sentence + hides for o in report.outcomes if not o.fired and o.sentence]
        tested = [g for g in report.groups if g.tested]
        if tested and not drifted:
            rest.append(
                f"no group drifted among the {len(tested)} tested (T within the {policy.temperature_margin:.0%} "
                f"margin and ECE within tolerance of the reference, or not significant at p < "
                f"{fmt_p(tested[0].level)}, Bonferroni over the {sum(math.isfinite(o.level) for o in tested[0].outcomes)} "
                f"tests of {len(tested)} groups)")
        skipped = [(g.group, g.n) for g in report.groups if g.n < policy.min_group_size]
        if skipped:
            shown = ", ".join(f"{name!r} (n={n})" for name, n in skipped[:_MAX_LISTED])
            more = f" and {len(skipped) - _MAX_LISTED} more" if len(skipped) > _MAX_LISTED else ""
            rest.append(f"{len(skipped)} group{'' if len(skipped) == 1 else 's'} skipped with fewer than "
                        f"{policy.min_group_size} labelled rows (min_group_size): {shown}{more}")
    if report.drift_detected and report.in_cooldown and last_event is not None and report.cooldown_until is not None:
        decided.append(f"drift within the cool-down: the last drift event was at {last_event.isoformat()}; no refit "
                       f"is recommended before {report.cooldown_until.isoformat()} (cooldown {policy.cooldown})")
    return tuple(decided + rest + _notes(report))


def _no_drift_sentence(report: DriftReport) -> str:
    """Why a window where no test fired is calibrated (established) or undetermined, with T."""
    test = report.temperature_test
    if test is None:
        return ("undetermined: no test fired, but the policy runs no temperature test, the only one that can "
                "establish calibration within a margin")
    where = (f"window T {test.window_temperature:.4g} [{test.window_temperature_low:.4g}, "
             f"{test.window_temperature_high:.4g}] vs the registered T {report.temperature:.4g}, ratio to the "
             f"reference's {test.ratio:.3f} [{test.ratio_low:.3f}, {test.ratio_high:.3f}]")
    if report.verdict == "calibrated":
        return (f"calibrated: {where}, inside the {test.equivalence_margin:.0%} equivalence margin (equivalence p = "
                f"{fmt_p(test.equivalence_p_value)} < {fmt_p(test.equivalence_level)})")
    rows = report.rows_to_decide
    more = (f"about {rows:,} labelled rows would decide ({rows - report.n:,} more than this window's)"
            if rows is not None else "no window size decides at this estimate (the reference's own interval is "
            "too wide for the equivalence margin)" if test.enough_errors and test.reference_n else
            "the temperature test could not run on this window")
    return (f"undetermined: no test fired, but the data do not establish calibration within the "
            f"{test.equivalence_margin:.0%} equivalence margin ({where}; equivalence p = "
            f"{fmt_p(test.equivalence_p_value)}); {more}")


def _notes(report: DriftReport) -> list[str]:
    summary, n = report.summary, report.summary.n
    notes = []
    if any(not math.isclose(t, summary.temperature, rel_tol=1e-9) for t in summary.served_temperatures):
        notes.append(f"rows in the window were served at T = {', '.join(f'{t:.4g}' for t in summary.served_temperatures)}"
                     f"; this check reads them at the registered T = {summary.temperature:.4g}")
    if math.isfinite(report.reference.nll) and n:
        notes.append(f"NLL {summary.overall.nll:.4f} nats vs the baseline {report.reference.nll:.4f} "
                     f"({summary.overall.nll - report.reference.nll:+.4f})")
    if report.reference.overall.temperature_stats is None and n >= report.policy.min_window:
        notes.append("no reference temperature sums were given: the temperature test treats T as exact (one-sample), "
                     "which flags more often on a small reference")
    temperature = report.temperature_test
    if temperature is not None:  # what this check could have seen: its power, not a blanket figure
        notes.append(temperature.minimal_detectable_shift().sentence())
    if report.consistency is not None:
        c = report.consistency
        notes.append(f"binned ECE {summary.overall.ece:.4f} vs {c.null_quantile_95:.4f}, the 95th percentile of a "
                     f"perfectly calibrated model on these rows (consistency resampling p = {fmt_p(c.p_value)}; "
                     "context, not the decision)")
    return notes


def with_stream_checks(
    report: DriftReport, *, sequential: SequentialCheck | None = None, early_warning: EarlyWarning | None = None
) -> DriftReport:
    """The report with the checks that look across the stream added: the sequential rule's update
    (:func:`~monitoring.update_sequential`) and the early warning on every served row
    (:func:`~monitoring.warn_before_labels`).

    A sequential alarm is a drift (``tests_fired`` gains ``"sequential"``), whatever the
    fixed window said — also on a window with too few labelled rows for its own tests: the rule
    accumulated its evidence over earlier checks. Its sentence goes first among the reasons;
    so does its escalation (a repeated alarm whose cause is the reference itself: not a drift, no
    refit); otherwise it is context, like the early warning's, which never changes the verdict
    (it says what to expect before labels, and schedules a labelled check elsewhere). The
    cool-down applies to a sequential drift as to any other.

    Examples
    --------
    >>> from calibration import TemperatureStats
    >>> from monitoring import SequentialState, summarise_arrays, update_sequential
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t + timedelta(hours=1))
    >>> hot = TemperatureStats(temperature=1.0, n=500, gradient_sum=400.0, gradient_square_sum=900.0,
    ...                        curvature_sum=500.0)
    >>> check = update_sequential(SequentialState.initial(1.0), hot, start=t, end=t + timedelta(hours=1))
    >>> report = with_stream_checks(decide_drift(s, DriftReference.of(0.0)), sequential=check)
    >>> report.verdict, report.tests_fired, report.refit_window_start == t
    ('drift', ('sequential',), True)
    """
    if sequential is None and early_warning is None:
        return report
    reasons = list(report.reasons)
    verdict: Verdict = report.verdict
    decided = len(report.tests_fired) if report.verdict == "drift" else 0
    if sequential is not None and sequential.alarm:
        verdict = "drift"
        reasons.insert(decided, sequential.sentence())
        if report.verdict != "drift" and report.in_cooldown and report.cooldown_until is not None:
            reasons.insert(decided + 1, f"drift within the cool-down: no refit is recommended before "
                                        f"{report.cooldown_until.isoformat()}")
    elif sequential is not None and sequential.escalated:  # not a drift of the traffic: first among the context
        reasons.insert(decided, sequential.sentence())
    elif sequential is not None:
        reasons.append(sequential.sentence())
    if early_warning is not None:
        reasons.append(early_warning.sentence())
    return replace(report, verdict=verdict, reasons=tuple(reasons), sequential=sequential, early_warning=early_warning)
