"""The drift decision on a window of labelled traffic, and the escalation diagnosis.

:func:`decide_drift` turns a :class:`~monitoring.WindowSummary` into a
:class:`DriftReport`. Drift is a result, never an exception.

The decision
------------
* ``insufficient_data`` when the window holds fewer than ``min_window`` labelled rows: not a
  drift, not an ok; nothing is tested.
* ``drift`` when the window's ECE is significant under consistency resampling
  (p < ``p_threshold``: larger than a perfectly calibrated model shows on the same rows and
  bins, Vaicenavicius et al. 2019) **and** exceeds the registration baseline ECE by more than
  ``ece_tolerance``; or when a group with at least ``min_group_size`` rows does both (the group
  is named). Groups below that size are skipped and listed.
* ``ok`` otherwise.

Several groups mean several tests: a group's p-value is compared with ``p_threshold`` divided
by the number of groups tested (Bonferroni), so ten calibrated groups do not raise ten times
the false alarms of one; the resampling of a group uses enough draws to reach that level.

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
Vaicenavicius, Widmann, Andersson, Lindsten, Roll, Schön. "Evaluating model calibration in
classification". AISTATS 2019.
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

import numpy as np

from calibration import CalibrationStats, ConsistencyTest, ReliabilityTable, consistency_resampling_from_stats

from ._validation import as_utc
from .window import WindowSummary

__all__ = [
    "DriftReport",
    "GroupDrift",
    "ReliabilityShape",
    "Verdict",
    "decide_drift",
    "diagnose_reliability_shape",
]

Verdict = Literal["insufficient_data", "drift", "ok"]
Shape = Literal["empty", "calibrated", "volume", "arched", "saw-tooth"]

_MAX_LISTED: Final = 10


@dataclass(frozen=True, slots=True)
class GroupDrift:
    """The drift decision for one group of the window.

    ``tested`` is False for a group below ``min_group_size`` rows (``p_value`` NaN then).
    ``p_threshold`` is the Bonferroni-corrected level the group's p-value was compared with.
    """

    group: str
    n: int
    tested: bool
    drifted: bool
    ece: float
    baseline_ece: float
    ece_excess: float
    p_value: float
    p_threshold: float
    nll: float
    accuracy: float
    mean_confidence: float
    reason: str


@dataclass(frozen=True, slots=True, eq=False)
class DriftReport:
    """The verdict on a window, with its reasons and numbers.

    Metrics are at ``temperature`` (the registered T) with ``n_bins`` equal-width bins;
    NaN where undefined (an empty window, an empty accepted set, an untested p-value).
    ``reasons`` are full sentences with the numbers, first the one that decided the verdict.
    """

    verdict: Verdict
    drift_detected: bool
    refit_recommended: bool
    in_cooldown: bool
    cooldown_until: datetime | None
    reasons: tuple[str, ...]
    model_name: str
    model_version: str
    window_start: datetime
    window_end: datetime
    checked_at: datetime
    temperature: float
    n_bins: int
    scheme: str
    n: int
    min_window: int
    overall_drift: bool
    ece: float
    baseline_ece: float
    ece_excess: float
    ece_tolerance: float
    p_value: float
    p_threshold: float
    null_mean: float
    null_quantile_95: float
    n_resamples: int
    seed: int
    nll: float
    baseline_nll: float
    accuracy: float
    mean_confidence: float
    brier: float
    mce: float
    threshold: float | None
    coverage: float
    accepted_accuracy: float
    groups: tuple[GroupDrift, ...]
    drifted_groups: tuple[str, ...]
    skipped_groups: tuple[str, ...]
    min_group_size: int
    group_weighted_ece: float
    served_temperatures: tuple[float, ...]
    reliability: ReliabilityTable


# --------------------------------------------------------------------------- validation


def _check_probability(value: float, *, name: str, low_open: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number; got {value!r}")
    number = float(value)
    if not (0.0 < number < 1.0 if low_open else 0.0 <= number < 1.0):
        raise ValueError(f"{name} must be in {'(0, 1)' if low_open else '[0, 1)'}; got {number}")
    return number


def _check_non_negative(value: float, *, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number >= 0; got {value!r}")
    number = float(value)
    if not (math.isfinite(number) and number >= 0.0):
        raise ValueError(f"{name} must be finite and >= 0; got {number}")
    return number


def _check_count(value: int, *, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer >= {minimum}; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return int(value)


# --------------------------------------------------------------------------- the decision


def _test(stats: CalibrationStats, *, n_resamples: int, seed: int) -> ConsistencyTest:
    return consistency_resampling_from_stats(
        stats.bin_gap_sum, stats.bin_variance_sum, stats.n, n_resamples=n_resamples, seed=seed
    )


def _fmt_p(p: float) -> str:
    return f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


def _group_list(items: list[tuple[str, int]]) -> str:
    shown = ", ".join(f"{name!r} (n={n})" for name, n in items[:_MAX_LISTED])
    more = len(items) - _MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def decide_drift(
    summary: WindowSummary,
    *,
    baseline_ece: float,
    min_window: int = 500,
    p_threshold: float = 0.01,
    ece_tolerance: float = 0.02,
    min_group_size: int = 200,
    group_baseline_ece: Mapping[str, float] | None = None,
    baseline_nll: float | None = None,
    last_drift_at: datetime | None = None,
    cooldown: timedelta = timedelta(hours=6),
    now: datetime | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    min_bin_count: int = 10,
) -> DriftReport:
    """Decide whether a window of labelled traffic shows calibration drift, and say why.

    Parameters
    ----------
    summary : WindowSummary
        The window at the version's registered temperature (:func:`summarise_window`).
    baseline_ece : float
        The ECE registered with the version (same binning), >= 0.
    min_window : int, default=500
        Fewer labelled rows give ``insufficient_data``.
    p_threshold : float, default=0.01
        Significance level of the consistency-resampling test, in (0, 1).
    ece_tolerance : float, default=0.02
        How far above its baseline an ECE must be to count, >= 0.
    min_group_size : int, default=200
        Groups with fewer labelled rows are skipped (and listed in ``skipped_groups``).
    group_baseline_ece : mapping of str to float, optional
        Registered per-group ECEs; a group not in it is compared with ``baseline_ece``.
    baseline_nll : float, optional
        The registered NLL (mean nats), reported beside the window's NLL (not part of the test).
    last_drift_at : datetime, optional
        When the last drift *event* was emitted (a report with ``refit_recommended``), aware.
    cooldown : timedelta, default=6 h
        After a drift event, further drifts are reported without recommending a refit.
    now : datetime, optional
        Time of the check, aware; default: the window's end.
    n_resamples : int, default=1000
        Resamples of the null ECE (the smallest reachable p-value is 1 / (1 + n_resamples)).
    seed : int, default=0
        Seed of the resampling (groups use seed + 1, seed + 2, ... in sorted order).
    min_bin_count : int, default=10
        Bins with fewer rows are marked sparse in ``reliability``.

    Returns
    -------
    DriftReport
        ``verdict`` in {"insufficient_data", "drift", "ok"}, ``drift_detected``,
        ``refit_recommended``, the reasons and every number.

    Raises
    ------
    TypeError
        If an argument has the wrong type.
    ValueError
        If an argument is out of range or a datetime is naive.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> import numpy as np
    >>> from monitoring import summarise_arrays
    >>> rng = np.random.default_rng(0)
    >>> logits = 3.0 * rng.normal(size=(2000, 5))
    >>> p = np.exp(logits / 2.0); p /= p.sum(axis=1, keepdims=True)  # true T = 2, served at T = 1
    >>> labels = (rng.random((2000, 1)) > p.cumsum(axis=1)).sum(axis=1)
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> summary = summarise_arrays(logits, labels, temperature=1.0, start=t, end=t)
    >>> report = decide_drift(summary, baseline_ece=0.02)
    >>> report.verdict, report.refit_recommended
    ('drift', True)
    >>> decide_drift(summary, baseline_ece=0.02, min_window=5000).verdict
    'insufficient_data'
    """
    if not isinstance(summary, WindowSummary):
        raise TypeError(f"summary must be a WindowSummary (from summarise_window); got {type(summary).__name__}")
    baseline_ece = _check_non_negative(baseline_ece, name="baseline_ece")
    min_window = _check_count(min_window, name="min_window", minimum=1)
    p_threshold = _check_probability(p_threshold, name="p_threshold")
    ece_tolerance = _check_non_negative(ece_tolerance, name="ece_tolerance")
    min_group_size = _check_count(min_group_size, name="min_group_size", minimum=1)
    n_resamples = _check_count(n_resamples, name="n_resamples", minimum=1)
    seed = _check_count(seed, name="seed", minimum=0)
    min_bin_count = _check_count(min_bin_count, name="min_bin_count", minimum=1)
    nll_baseline = math.nan if baseline_nll is None else _check_non_negative(baseline_nll, name="baseline_nll")
    group_baselines = {
        str(key): _check_non_negative(value, name=f"group_baseline_ece[{key!r}]")
        for key, value in (group_baseline_ece or {}).items()
    }
    if not isinstance(cooldown, timedelta) or cooldown < timedelta(0):
        raise ValueError(f"cooldown must be a timedelta >= 0; got {cooldown!r}")
    checked_at = summary.end if now is None else as_utc(now, name="now")
    last_event = None if last_drift_at is None else as_utc(last_drift_at, name="last_drift_at")

    overall = summary.overall
    n = overall.n
    reasons: list[str] = []
    notes: list[str] = []
    window = f"[{summary.start.isoformat()}, {summary.end.isoformat()})"

    mismatched = [t for t in summary.served_temperatures if not math.isclose(t, summary.temperature, rel_tol=1e-9)]
    if mismatched:
        notes.append(
            f"rows in the window were served at T = {', '.join(f'{t:.4g}' for t in summary.served_temperatures)}; "
            f"this check reads them at the registered T = {summary.temperature:.4g}"
        )
    if baseline_nll is not None and n:
        notes.append(
            f"NLL {overall.nll:.4f} nats vs the baseline {nll_baseline:.4f} ({overall.nll - nll_baseline:+.4f})"
        )

    consistency: ConsistencyTest | None = None
    overall_drift = False
    group_results: list[GroupDrift] = []
    skipped: list[tuple[str, int]] = []

    tested_keys = (
        {key for key, stats in summary.groups.items() if stats.n >= min_group_size} if n >= min_window else set()
    )
    skipped = [(key, stats.n) for key, stats in summary.groups.items() if stats.n < min_group_size]
    group_level = p_threshold / max(1, len(tested_keys))
    # Enough draws that the corrected level is reachable: p >= 1 / (1 + draws).
    group_resamples = max(n_resamples, math.ceil(10.0 / group_level))
    for index, (key, stats) in enumerate(summary.groups.items()):
        baseline = group_baselines.get(key, baseline_ece)
        if key not in tested_keys:
            why = (
                f"{stats.n} labelled rows < min_group_size {min_group_size}"
                if stats.n < min_group_size
                else "the window as a whole has too few labelled rows"
            )
            group_results.append(
                GroupDrift(
                    group=key, n=stats.n, tested=False, drifted=False, ece=stats.ece, baseline_ece=baseline,
                    ece_excess=stats.ece - baseline, p_value=math.nan, p_threshold=group_level,
                    nll=stats.nll, accuracy=stats.accuracy, mean_confidence=stats.mean_confidence,
                    reason=f"group {key!r} not tested: {why}",
                )
            )  # fmt: skip
            continue
        test = _test(stats, n_resamples=group_resamples, seed=seed + 1 + index)
        drifted, reason = _judge(
            f"group {key!r}", stats, test, baseline=baseline, tolerance=ece_tolerance, p_threshold=group_level
        )
        group_results.append(
            GroupDrift(
                group=key, n=stats.n, tested=True, drifted=drifted, ece=stats.ece, baseline_ece=baseline,
                ece_excess=stats.ece - baseline, p_value=test.p_value, p_threshold=group_level,
                nll=stats.nll, accuracy=stats.accuracy, mean_confidence=stats.mean_confidence, reason=reason,
            )
        )  # fmt: skip

    if n < min_window:
        reasons.append(
            f"only {n} labelled row{'' if n == 1 else 's'} in the window {window}; at least {min_window} are "
            "needed to decide (min_window)"
        )
        verdict: Verdict = "insufficient_data"
    else:
        consistency = _test(overall, n_resamples=n_resamples, seed=seed)
        overall_drift, overall_reason = _judge(
            "window",
            overall,
            consistency,
            baseline=baseline_ece,
            tolerance=ece_tolerance,
            p_threshold=p_threshold,
        )
        drifted_groups = [g for g in group_results if g.drifted]
        verdict = "drift" if overall_drift or drifted_groups else "ok"
        if overall_drift:
            reasons.append(overall_reason)
        reasons.extend(g.reason for g in drifted_groups)
        if not overall_drift:
            # The overall sentence explains an ok; after a group drift it says the average hid it.
            reasons.append(overall_reason + (" (the average hides the group drift)" if drifted_groups else ""))
        if tested_keys and not drifted_groups:
            reasons.append(
                f"no group drifted among the {len(tested_keys)} tested (ECE within tolerance of baseline or not "
                f"significant at p < {_fmt_p(group_level)}, Bonferroni over {len(tested_keys)} groups)"
            )
        if skipped:
            reasons.append(
                f"{len(skipped)} group{'' if len(skipped) == 1 else 's'} skipped with fewer than {min_group_size} "
                f"labelled rows (min_group_size): {_group_list(skipped)}"
            )

    drift_detected = verdict == "drift"
    in_cooldown = last_event is not None and checked_at < last_event + cooldown
    cooldown_until = last_event + cooldown if last_event is not None and in_cooldown else None
    refit_recommended = drift_detected and not in_cooldown
    if drift_detected and last_event is not None and cooldown_until is not None:
        # After the sentences that decided the drift, before the context.
        reasons.insert(
            int(overall_drift) + sum(g.drifted for g in group_results),
            f"drift within the cool-down: the last drift event was at {last_event.isoformat()}; no refit is "
            f"recommended before {cooldown_until.isoformat()} (cooldown {cooldown})",
        )

    gate = summary.gate
    return DriftReport(
        verdict=verdict,
        drift_detected=drift_detected,
        refit_recommended=refit_recommended,
        in_cooldown=in_cooldown,
        cooldown_until=cooldown_until,
        reasons=tuple(reasons + notes),
        model_name=summary.model_name,
        model_version=summary.model_version,
        window_start=summary.start,
        window_end=summary.end,
        checked_at=checked_at,
        temperature=summary.temperature,
        n_bins=summary.n_bins,
        scheme="equal-width",
        n=n,
        min_window=min_window,
        overall_drift=overall_drift,
        ece=overall.ece,
        baseline_ece=baseline_ece,
        ece_excess=overall.ece - baseline_ece,
        ece_tolerance=ece_tolerance,
        p_value=math.nan if consistency is None else consistency.p_value,
        p_threshold=p_threshold,
        null_mean=math.nan if consistency is None else consistency.null_mean,
        null_quantile_95=math.nan if consistency is None else consistency.null_quantile_95,
        n_resamples=n_resamples,
        seed=seed,
        nll=overall.nll,
        baseline_nll=nll_baseline,
        accuracy=overall.accuracy,
        mean_confidence=overall.mean_confidence,
        brier=overall.brier,
        mce=overall.mce,
        threshold=None if gate is None else gate.threshold,
        coverage=math.nan if gate is None else gate.coverage,
        accepted_accuracy=math.nan if gate is None else gate.accepted_accuracy,
        groups=tuple(group_results),
        drifted_groups=tuple(g.group for g in group_results if g.drifted),
        skipped_groups=tuple(key for key, _ in skipped),
        min_group_size=min_group_size,
        group_weighted_ece=summary.group_weighted_ece,
        served_temperatures=summary.served_temperatures,
        reliability=overall.reliability_table(min_count=min_bin_count),
    )


def _judge(
    what: str,
    stats: CalibrationStats,
    test: ConsistencyTest,
    *,
    baseline: float,
    tolerance: float,
    p_threshold: float,
) -> tuple[bool, str]:
    """Both conditions of a drift, and the sentence that says which held."""
    ece = stats.ece
    excess = ece - baseline
    exceeds = excess > tolerance
    significant = test.p_value < p_threshold
    head = f"{what} ECE {ece:.4f} ({stats.n_bins} equal-width bins, n={stats.n})"
    noise = (
        f"a perfectly calibrated model would show ECE <= {test.null_quantile_95:.4f} on these rows in 95% of "
        f"{test.n_resamples} resamples"
    )
    if exceeds and significant:
        return True, (
            f"{head} exceeds the baseline {baseline:.4f} by {excess:.4f} > tolerance {tolerance:.4f} and is "
            f"significant under consistency resampling (p = {_fmt_p(test.p_value)} < {_fmt_p(p_threshold)}; {noise})"
        )
    if not exceeds:
        return False, (
            f"{head} is within the tolerance {tolerance:.4f} of the baseline {baseline:.4f} "
            f"(excess {excess:+.4f}; p = {_fmt_p(test.p_value)})"
        )
    return False, (
        f"{head} exceeds the baseline {baseline:.4f} by {excess:.4f} but is not significant "
        f"(p = {_fmt_p(test.p_value)} >= {_fmt_p(p_threshold)}; {noise}): the noise of a finite window"
    )


# --------------------------------------------------------------------------- escalation


@dataclass(frozen=True, slots=True)
class ReliabilityShape:
    """What kind of miscalibration a reliability table shows (after a refit: can T fix it?).

    A bin's gap (accuracy − confidence) is *significant* when it is non-sparse and
    |gap| > ``z`` standard errors sqrt(c(1 − c) / count). ``shape`` is

    * "empty": no non-sparse bin;
    * "calibrated": no significant gap;
    * "volume": every significant gap has one sign (consistently over- or under-confident),
      which one scalar temperature can move;
    * "arched": the sign changes once or twice across the bins (e.g. under-confident in the
      middle, over-confident at the top): one temperature cannot fix it;
    * "saw-tooth": three or more sign changes.

    ``single_temperature_can_fix`` is False for "arched" and "saw-tooth": the escalation
    "needs retraining or a data fix".
    """

    shape: Shape
    single_temperature_can_fix: bool
    sign_changes: int
    over_confident_bins: tuple[int, ...]
    under_confident_bins: tuple[int, ...]
    n_bins_used: int
    z: float
    message: str


def diagnose_reliability_shape(table: ReliabilityTable, *, z: float = 3.0) -> ReliabilityShape:
    """Tell a single 'volume' miscalibration from an arched or saw-tooth reliability curve.

    Used to verify a refit: when calibration is still off after the NLL-optimal temperature
    and the residual gaps change sign across the confidence range, no single T can fix it.

    Parameters
    ----------
    table : ReliabilityTable
        Equal-width (or equal-mass) reliability table, e.g. ``stats.reliability_table()``.
    z : float, default=3.0
        How many standard errors a bin's gap must exceed to count (> 0).

    Returns
    -------
    ReliabilityShape
        The shape, the significant bins by direction, the number of sign changes across
        them in confidence order, and a sentence for the report.

    Raises
    ------
    ValueError
        If ``z`` is not finite and > 0.

    Examples
    --------
    >>> import numpy as np
    >>> from calibration import ReliabilityTable
    >>> edges = np.linspace(0, 1, 6)
    >>> count = np.array([0, 400, 400, 400, 400])
    >>> conf = np.array([0.0, 0.3, 0.5, 0.7, 0.9]) * count
    >>> arched = ReliabilityTable.from_bin_sums(edges[:-1], edges[1:], count, conf,
    ...     np.array([0, 80, 280, 320, 300]), scheme="equal-width", min_count=10)
    >>> shape = diagnose_reliability_shape(arched)
    >>> shape.shape, shape.sign_changes, shape.single_temperature_can_fix
    ('arched', 2, False)
    >>> volume = ReliabilityTable.from_bin_sums(edges[:-1], edges[1:], count, conf,
    ...     np.array([0, 80, 160, 240, 320]), scheme="equal-width", min_count=10)
    >>> diagnose_reliability_shape(volume).shape
    'volume'
    """
    if isinstance(z, bool) or not isinstance(z, (int, float, np.floating, np.integer)) or not (
        math.isfinite(float(z)) and float(z) > 0
    ):
        raise ValueError(f"z must be a finite number > 0 (standard errors); got {z!r}")
    z = float(z)
    used = (table.count > 0) & ~table.sparse
    count = np.where(used, table.count, 1).astype(np.float64)
    confidence = np.where(used, table.mean_confidence, 0.5)
    # Bernoulli standard error of the bin's accuracy, floored so a bin at confidence 1.0 is not infinitely sure.
    variance = np.maximum(confidence * (1.0 - confidence), 1.0 / (4.0 * count))
    gap = np.where(used, table.gap, 0.0)
    significant = used & (np.abs(gap) > z * np.sqrt(variance / count))
    over = np.flatnonzero(significant & (gap < 0))
    under = np.flatnonzero(significant & (gap > 0))
    signs = np.sign(gap[significant])
    sign_changes = int(np.count_nonzero(signs[1:] != signs[:-1]))
    n_used = int(np.count_nonzero(used))
    shape: Shape
    if n_used == 0:
        shape, message = "empty", "no bin holds enough rows to read the reliability curve"
    elif not significant.any():
        shape = "calibrated"
        message = f"no bin's gap exceeds {z:g} standard errors across the {n_used} non-sparse bins: calibrated"
    elif sign_changes == 0:
        shape = "volume"
        direction = "over-confident" if over.size else "under-confident"
        message = (
            f"consistently {direction} in {max(over.size, under.size)} of {n_used} non-sparse bins: a single "
            "temperature can correct this ('volume' miscalibration)"
        )
    else:
        shape = "arched" if sign_changes <= 2 else "saw-tooth"
        message = (
            f"the reliability curve is {shape} (the gap changes sign {sign_changes} time"
            f"{'' if sign_changes == 1 else 's'} across the non-sparse bins: over-confident in bins "
            f"{over.tolist()}, under-confident in bins {under.tolist()}); a single temperature cannot fix it: "
            "needs retraining or a data fix"
        )
    return ReliabilityShape(
        shape=shape,
        single_temperature_can_fix=shape in ("empty", "calibrated", "volume"),
        sign_changes=sign_changes,
        over_confident_bins=tuple(over.tolist()),
        under_confident_bins=tuple(under.tolist()),
        n_bins_used=n_used,
        z=z,
        message=message,
    )
