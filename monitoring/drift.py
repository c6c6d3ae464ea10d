"""The drift decision on a window of labelled traffic, and the escalation diagnosis.

:func:`decide_drift` turns a :class:`~monitoring.WindowSummary` into a
:class:`DriftReport`. Drift is a result, never an exception.

The decision
------------
A drift is a change of the window **against the reference** the version was registered
with, larger than a stated effect, and significant. Two tests, each two-sample:

* **the temperature test** (primary; :func:`calibration.temperature_test`): the window's
  NLL-optimal T, one Newton step from the deployed T from the window's sums, against the
  reference's (the rows T was fitted on, whose own estimation error counts); drift when
  T_w / T_ref lies beyond [1/(1 + margin), 1 + margin] at level ``p_threshold`` / 2
  (``temperature_margin``, default 5 %: about the uncertainty of T fitted on a few thousand
  rows, so a refit could not tell a smaller shift from noise; it moves the mean confidence by
  0.5–1.6 points on the CIFAR models of the test data). It says which way: over-confident
  (T should grow) or under-confident.
* **the ECE test** (secondary): the window's calibration error (debiased ℓ1 ECE of Kumar,
  Liang, Ma 2019, with its bootstrap interval; :func:`calibration.calibration_error_from_stats`)
  against the reference's ECE (``baseline_ece``, with its interval when given); drift when
  the excess is beyond ``ece_tolerance`` at level ``p_threshold`` / 2: z = (excess − tolerance) /
  sqrt(SE_w² + SE_ref²), SE from each interval's half-width. It catches what one temperature
  does not describe (a change of the reliability curve's shape). The plug-in binned ECE is
  biased upward on small windows, most of all for a well-calibrated model, so it is reported
  but no longer tested; the consistency-resampling p-value (window vs a perfectly calibrated
  model, Vaicenavicius et al. 2019) is reported as context (``consistency_p_value``).

And a guard that needs no test: **model output collapsed**. When the logits of a window (or
of a tested group) barely vary under the model's own probabilities — the mean of Var_p[z / T]
per row, the information its rows carry about T, below :data:`COLLAPSE_SPREAD_RATIO` (1 %) of
the reference's (of 1 without reference sums; 0.45–1.7 on the six CIFAR models of the test
data) — the model's outputs collapsed: a near-uniform classifier (logits shrunk towards a
constant: their spread fell ten-fold or more), or saturated outputs. Such a window says next to
nothing about T (its interval runs towards 0 and infinity), so no test can be relied on to
fire, and yet this is exactly what a monitor must flag: it is a drift (``tests_fired`` names
``collapsed``), whose refit will be refused with "needs retraining or a data fix". Healthy
windows of 200 rows of those six models stay above 86 % of their reference's.

Then:

* ``insufficient_data`` when the window holds fewer than ``min_window`` labelled rows: not a
  drift, not an ok; nothing is tested.
* ``drift`` when a test fires (or the outputs collapsed) on the whole window, or on a group
  with at least ``min_group_size`` rows (the group and the test are named in ``tests_fired``). A group is
  tested against its own reference when one is given (``group_reference``,
  ``group_baseline_ece``), else against the version's. Groups below that size are skipped
  and listed.
* ``ok`` otherwise.

Two tests and several groups mean several tests (Bonferroni): the window's two tests run at
``p_threshold`` / 2 each, and each group's at ``p_threshold`` / (2 × groups tested), so ten
calibrated groups do not raise ten times the false alarms of one. The margins make each test
conservative when nothing changed (its level is reached only at a shift of exactly the
margin). Measured on the six real CIFAR files of the test data (docs/statistics.md): at most
one false alarm in 200 calibrated windows of 500, 2,000 or 10,000 rows, with or without five
random groups, on every file; a 25 % shift of T found in at least 96.5 % of windows of 2,000
rows.

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
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final, Literal

import numpy as np
from scipy.special import ndtr, ndtri

from calibration import (
    CalibrationStats,
    ReliabilityTable,
    TemperatureStats,
    TemperatureTest,
    calibration_error_from_stats,
    consistency_resampling_from_stats,
    temperature_test,
)

from ._validation import as_utc
from .early_warning import EarlyWarning
from .sequential import SequentialCheck
from .window import WindowSummary

__all__ = [
    "COLLAPSE_SPREAD_RATIO",
    "DRIFT_ECE_ESTIMATOR",
    "DriftReport",
    "GroupDrift",
    "ReliabilityShape",
    "Verdict",
    "decide_drift",
    "diagnose_reliability_shape",
    "with_stream_checks",
]

Verdict = Literal["insufficient_data", "drift", "ok"]
Shape = Literal["empty", "calibrated", "volume", "arched", "saw-tooth"]

_MAX_LISTED: Final = 10
#: The calibration-error estimator of the ECE test (its interval comes with it).
DRIFT_ECE_ESTIMATOR: Final = "debiased_l1"
# Bootstrap resamples of the ECE estimates' intervals (the interval's ends move by ~1e-3).
_ECE_RESAMPLES: Final = 1000
#: Below this share of the reference's mean Var_p[z / T] per row, a window's or group's outputs
#: collapsed (module docstring).
COLLAPSE_SPREAD_RATIO: Final = 0.01


@dataclass(frozen=True, slots=True)
class GroupDrift:
    """The drift decision for one group of the window.

    ``tested`` is False for a group below ``min_group_size`` rows (p-values NaN, tests None
    then). ``p_threshold`` is the Bonferroni-corrected level the group's tests were run at.
    ``ece`` is the plug-in binned ECE; ``ece_estimate`` (with ``ece_low``, ``ece_high``) the
    ECE test's estimate, ``ece_excess`` its excess over ``baseline_ece`` and ``p_value`` the ECE
    test's p-value. ``temperature_stats`` are the group's sums (always present);
    ``temperature_test`` the group's temperature test against ``group_reference`` or the
    version's reference. ``collapsed``: the group's outputs carry next to no information about T
    (module docstring). ``drifted`` iff either test fired or the outputs collapsed.
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
    ece_estimate: float
    ece_low: float
    ece_high: float
    ece_drift: bool
    temperature_drift: bool
    temperature_stats: TemperatureStats
    temperature_test: TemperatureTest | None
    collapsed: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class DriftReport:
    """The verdict on a window, with its reasons and numbers.

    Metrics are at ``temperature`` (the registered T) with ``n_bins`` equal-width bins;
    NaN where undefined (an empty window, an empty accepted set, an untested p-value).
    ``reasons`` are full sentences with the numbers, first the ones that decided the verdict.
    ``tests_fired`` names each test that fired ("collapsed", "temperature", "ece", "group 'x'
    collapsed", "group 'x' temperature", "group 'x' ece"); empty unless ``verdict == "drift"``.
    ``output_collapsed``: the window's outputs carry next to no information about T (a
    collapsed or near-uniform classifier; module docstring), a drift of its own.

    The temperature test: ``temperature_test`` (None for ``insufficient_data``) with the
    window's optimal T and its interval, the ratio to the reference's T, ``z`` (signed: > 0
    over-confident) and its p-values; ``temperature_stats`` are the window's sums (n, Σg, Σg²,
    Σh at ``temperature``: mergeable, what a sequential rule over many checks accumulates) and
    ``reference_stats`` the reference's (None: tested against T as if exact).

    The ECE test: ``ece_estimate`` [``ece_low``, ``ece_high``] (``ece_estimator``, at
    ``confidence_level``) against ``baseline_ece`` [``baseline_ece_low``, ``baseline_ece_high``]
    (NaN ends: no interval registered); ``ece_excess`` = ``ece_estimate`` − ``baseline_ece``;
    ``p_value`` the test of an excess beyond ``ece_tolerance``. Each of the two tests on the
    whole window runs at ``test_level`` = ``p_threshold`` / 2. ``ece`` is the plug-in binned
    ECE (reported, not tested); ``consistency_p_value``, ``null_mean`` and ``null_quantile_95``
    compare it with a perfectly calibrated model on the same rows (context, not the decision).
    """

    verdict: Verdict
    drift_detected: bool
    refit_recommended: bool
    in_cooldown: bool
    cooldown_until: datetime | None
    reasons: tuple[str, ...]
    tests_fired: tuple[str, ...]
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
    temperature_drift: bool
    temperature_margin: float
    temperature_test: TemperatureTest | None
    temperature_stats: TemperatureStats
    reference_stats: TemperatureStats | None
    ece_drift: bool
    ece_estimator: str
    ece_estimate: float
    ece_low: float
    ece_high: float
    confidence_level: float
    ece: float
    baseline_ece: float
    baseline_ece_low: float
    baseline_ece_high: float
    ece_excess: float
    ece_tolerance: float
    p_value: float
    p_threshold: float
    test_level: float
    consistency_p_value: float
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
    sequential: SequentialCheck | None = None
    early_warning: EarlyWarning | None = None
    output_collapsed: bool = False

    @property
    def change_point(self) -> datetime | None:
        """After a sequential alarm, the earliest serving time among the rows since the drift began
        (the alarm's change point, moved from the clock of label arrival to that of serving), else None."""
        check = self.sequential
        if check is None or not check.alarm:
            return None
        return check.change_point_served_at or check.change_point

    @property
    def refit_window_start(self) -> datetime:
        """Where a refit of this drift should start reading traffic: the change point when the
        sequential rule alarmed (rows before it are pre-drift), else the window's start."""
        change_point = self.change_point
        return self.window_start if change_point is None else min(change_point, self.window_end)


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


def _check_finite(value: float, *, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number; got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite; got {number}")
    return number


def _check_count(value: int, *, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer >= {minimum}; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return int(value)


def _check_reference(value: TemperatureStats | None, *, name: str, temperature: float) -> TemperatureStats | None:
    if value is None:
        return None
    if not isinstance(value, TemperatureStats):
        raise TypeError(f"{name} must be TemperatureStats (the reference's sums at the deployed T); got "
                        f"{type(value).__name__}")
    if not math.isclose(value.temperature, temperature, rel_tol=1e-9):
        raise ValueError(f"{name} was summed at T = {value.temperature!r} but the window at T = {temperature!r}; "
                         "the reference must be read at the deployed T")
    return value


def _check_interval(value: tuple[float, float] | None, *, name: str) -> tuple[float, float]:
    if value is None:
        return math.nan, math.nan
    try:
        low, high = (float(end) for end in value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be a pair of numbers (low, high) or None; got {value!r}") from error
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise ValueError(f"{name} must be finite with low <= high; got {value!r}")
    return low, high


# --------------------------------------------------------------------------- the decision


def _fmt_p(p: float) -> str:
    return "n/a" if not math.isfinite(p) else f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


def _group_list(items: list[tuple[str, int]]) -> str:
    shown = ", ".join(f"{name!r} (n={n})" for name, n in items[:_MAX_LISTED])
    more = len(items) - _MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


@dataclass(frozen=True, slots=True)
class _EceTest:
    """The ECE test of one set of rows: estimate with interval, excess, p-value, verdict."""

    estimate: float
    low: float
    high: float
    excess: float
    p_value: float
    drifted: bool
    sentence: str


def _ece_test(
    what: str, stats: CalibrationStats, *, baseline: float, baseline_interval: tuple[float, float], tolerance: float,
    level: float, confidence_level: float, seed: int,
) -> _EceTest:
    """The window's debiased ECE against the reference's, beyond ``tolerance`` (module docstring)."""
    result = calibration_error_from_stats(
        stats, estimator=DRIFT_ECE_ESTIMATOR, confidence_level=confidence_level, n_resamples=_ECE_RESAMPLES, seed=seed
    )
    quantile = float(ndtri(0.5 + confidence_level / 2.0))
    window_se = (result.high - result.low) / (2.0 * quantile)
    low, high = baseline_interval
    reference_se = (high - low) / (2.0 * quantile) if math.isfinite(low) else 0.0
    se = math.hypot(window_se, reference_se)
    excess = result.estimate - baseline
    beyond = excess - tolerance
    if se > 0 and math.isfinite(se):
        p_value = float(ndtr(-beyond / se))
    else:
        p_value = 0.0 if beyond > 0 else 1.0
    drifted = p_value < level
    head = (f"{what} ECE {result.estimate:.4f} [{result.low:.4f}, {result.high:.4f}] ({DRIFT_ECE_ESTIMATOR}, "
            f"{stats.n_bins} bins, n={stats.n}; binned {stats.ece:.4f}) vs the reference {baseline:.4f}"
            + (f" [{low:.4f}, {high:.4f}]" if math.isfinite(low) else ""))
    if drifted:
        sentence = (f"{head}: the excess {excess:+.4f} is beyond the tolerance {tolerance:.4f} "
                    f"(p = {_fmt_p(p_value)} < {_fmt_p(level)})")
    elif excess > tolerance:
        sentence = (f"{head}: the excess {excess:+.4f} exceeds the tolerance {tolerance:.4f} but not significantly "
                    f"(p = {_fmt_p(p_value)} >= {_fmt_p(level)}): the noise of a finite window")
    else:
        sentence = f"{head}: within the tolerance {tolerance:.4f} (excess {excess:+.4f}; p = {_fmt_p(p_value)})"
    return _EceTest(result.estimate, result.low, result.high, excess, p_value, drifted, sentence)


def _collapse(what: str, test: TemperatureTest, stats: TemperatureStats, reference: TemperatureStats | None) -> str | None:
    """The sentence when ``what``'s outputs collapsed (module docstring), else None."""
    spread = stats.scaled_logit_variance
    has_reference = reference is not None and reference.n > 0 and reference.curvature_sum > 0
    usual = reference.scaled_logit_variance if reference is not None and has_reference else 1.0
    if not stats.n or spread >= COLLAPSE_SPREAD_RATIO * usual:
        return None
    versus = f"the reference's {usual:.3g}" if has_reference else "1, typical of a trained classifier (no reference sums)"
    return (f"model output collapsed: the logits of {what} ({stats.n} rows) barely vary under the model's own probabilities "
            f"(variance of z/T {spread:.3g} per row, below {COLLAPSE_SPREAD_RATIO:.0%} of {versus}): a near-uniform "
            f"classifier or saturated outputs, which say next to nothing about T (window T "
            f"{test.window_temperature:.4g} [{test.window_temperature_low:.4g}, {test.window_temperature_high:.4g}]); "
            "needs retraining or a data fix")


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
    reference: TemperatureStats | None = None,
    group_reference: Mapping[str, TemperatureStats] | None = None,
    temperature_margin: float = 0.05,
    baseline_ece_interval: tuple[float, float] | None = None,
    confidence_level: float = 0.95,
) -> DriftReport:
    """Decide whether a window of labelled traffic shows calibration drift, and say why.

    Parameters
    ----------
    summary : WindowSummary
        The window at the version's registered temperature (:func:`summarise_window`).
    baseline_ece : float
        The reference's ECE (registered with the version; same binning), finite: a debiased
        estimate may lie slightly below 0.
    min_window : int, default=500
        Fewer labelled rows give ``insufficient_data``.
    p_threshold : float, default=0.01
        Significance level of the decision on the whole window, in (0, 1): its two tests run
        at ``p_threshold`` / 2 each, a group's at ``p_threshold`` / (2 × groups tested)
        (Bonferroni).
    ece_tolerance : float, default=0.02
        How far above the reference's ECE the window's must be to count (the ECE test's
        margin), >= 0.
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
        Resamples of the consistency test's null ECE (context only).
    seed : int, default=0
        Seed of the resampling (groups use seed + 1, seed + 2, ... in sorted order).
    min_bin_count : int, default=10
        Bins with fewer rows are marked sparse in ``reliability``.
    reference : TemperatureStats, optional
        The reference's temperature sums at the registered T (the rows T was fitted on):
        the temperature test is then two-sample. Without it (a version registered before
        the sums were stored) T is treated as exact.
    group_reference : mapping of str to TemperatureStats, optional
        Per-group reference sums at the same T; a group not in it is compared with
        ``reference``.
    temperature_margin : float, default=0.05
        The relative shift of T the temperature test requires, in [0, 1).
    baseline_ece_interval : (float, float), optional
        The interval of ``baseline_ece`` (at ``confidence_level``); without it the reference's
        ECE is taken as exact.
    confidence_level : float, default=0.95
        Level of the reported intervals, in (0, 1).

    Returns
    -------
    DriftReport
        ``verdict`` in {"insufficient_data", "drift", "ok"}, ``drift_detected``,
        ``refit_recommended``, ``tests_fired``, the reasons and every number.

    Raises
    ------
    TypeError
        If an argument has the wrong type.
    ValueError
        If an argument is out of range, a datetime is naive, or a reference was summed at
        another temperature.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> import numpy as np
    >>> from calibration import TemperatureStats
    >>> from monitoring import summarise_arrays
    >>> rng = np.random.default_rng(0)
    >>> logits = 3.0 * rng.normal(size=(4000, 5))
    >>> def labels_at(t):  # labels drawn from softmax(logits / t)
    ...     p = np.exp(logits / t); p /= p.sum(axis=1, keepdims=True)
    ...     return (rng.random((4000, 1)) > p.cumsum(axis=1)).sum(axis=1).clip(0, 4)
    >>> reference = TemperatureStats.from_logits(logits[:2000], labels_at(1.0)[:2000])  # T = 1 fitted here
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> drifted = summarise_arrays(logits[2000:], labels_at(2.0)[2000:], temperature=1.0, start=t, end=t)
    >>> report = decide_drift(drifted, baseline_ece=0.02, reference=reference)
    >>> report.verdict, report.tests_fired[0], report.temperature_test.direction
    ('drift', 'temperature', 'over-confident')
    >>> decide_drift(drifted, baseline_ece=0.02, min_window=5000).verdict
    'insufficient_data'
    """
    if not isinstance(summary, WindowSummary):
        raise TypeError(f"summary must be a WindowSummary (from summarise_window); got {type(summary).__name__}")
    baseline_ece = _check_finite(baseline_ece, name="baseline_ece")
    min_window = _check_count(min_window, name="min_window", minimum=1)
    p_threshold = _check_probability(p_threshold, name="p_threshold")
    ece_tolerance = _check_non_negative(ece_tolerance, name="ece_tolerance")
    min_group_size = _check_count(min_group_size, name="min_group_size", minimum=1)
    n_resamples = _check_count(n_resamples, name="n_resamples", minimum=1)
    seed = _check_count(seed, name="seed", minimum=0)
    min_bin_count = _check_count(min_bin_count, name="min_bin_count", minimum=1)
    temperature_margin = _check_probability(temperature_margin, name="temperature_margin", low_open=False)
    confidence_level = _check_probability(confidence_level, name="confidence_level")
    nll_baseline = math.nan if baseline_nll is None else _check_non_negative(baseline_nll, name="baseline_nll")
    group_baselines = {
        str(key): _check_non_negative(value, name=f"group_baseline_ece[{key!r}]")
        for key, value in (group_baseline_ece or {}).items()
    }
    reference = _check_reference(reference, name="reference", temperature=summary.temperature)
    group_references = {
        str(key): _check_reference(value, name=f"group_reference[{key!r}]", temperature=summary.temperature)
        for key, value in (group_reference or {}).items()
    }
    ece_interval = _check_interval(baseline_ece_interval, name="baseline_ece_interval")
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
    if reference is None and n >= min_window:
        notes.append("no reference temperature sums were given: the temperature test treats T as exact (one-sample), "
                     "which flags more often on a small reference")

    group_results: list[GroupDrift] = []
    tested_keys = (
        {key for key, stats in summary.groups.items() if stats.n >= min_group_size} if n >= min_window else set()
    )
    skipped = [(key, stats.n) for key, stats in summary.groups.items() if stats.n < min_group_size]
    # Bonferroni: the window's two tests share p_threshold, and so do each group's two tests
    # across the groups tested.
    test_level = p_threshold / 2.0
    group_level = test_level / max(1, len(tested_keys))
    empty_scores = TemperatureStats.empty(summary.temperature)
    for index, (key, stats) in enumerate(summary.groups.items()):
        baseline = group_baselines.get(key, baseline_ece)
        scores = summary.group_temperature_stats.get(key, empty_scores)
        if key not in tested_keys:
            why = (
                f"{stats.n} labelled rows < min_group_size {min_group_size}"
                if stats.n < min_group_size
                else "the window as a whole has too few labelled rows"
            )
            group_results.append(
                GroupDrift(
                    group=key, n=stats.n, tested=False, drifted=False, ece=stats.ece, baseline_ece=baseline,
                    ece_excess=math.nan, p_value=math.nan, p_threshold=group_level,
                    nll=stats.nll, accuracy=stats.accuracy, mean_confidence=stats.mean_confidence,
                    reason=f"group {key!r} not tested: {why}", ece_estimate=math.nan, ece_low=math.nan,
                    ece_high=math.nan, ece_drift=False, temperature_drift=False, temperature_stats=scores,
                    temperature_test=None,
                )
            )  # fmt: skip
            continue
        t_test = temperature_test(scores, group_references.get(key, reference), margin=temperature_margin,
                                  level=group_level, confidence_level=confidence_level)
        e_test = _ece_test(
            f"group {key!r}", stats, baseline=baseline, tolerance=ece_tolerance, level=group_level,
            baseline_interval=ece_interval if key not in group_baselines else (math.nan, math.nan),
            confidence_level=confidence_level, seed=seed + 1 + index,
        )
        group_collapse = _collapse(f"group {key!r}", t_test, scores, group_references.get(key, reference))
        fired = [group_collapse] if group_collapse is not None else []
        fired += [t_test.sentence(f"group {key!r}")] if t_test.drifted else []
        fired += [e_test.sentence] if e_test.drifted else []
        reason = "; ".join(fired) if fired else f"{t_test.sentence(f'group {key!r}')}; {e_test.sentence}"
        group_results.append(
            GroupDrift(
                group=key, n=stats.n, tested=True, drifted=t_test.drifted or e_test.drifted or group_collapse is not None,
                ece=stats.ece,
                baseline_ece=baseline, ece_excess=e_test.excess, p_value=e_test.p_value, p_threshold=group_level,
                nll=stats.nll, accuracy=stats.accuracy, mean_confidence=stats.mean_confidence, reason=reason,
                ece_estimate=e_test.estimate, ece_low=e_test.low, ece_high=e_test.high, ece_drift=e_test.drifted,
                temperature_drift=t_test.drifted, temperature_stats=scores, temperature_test=t_test,
                collapsed=group_collapse is not None,
            )
        )  # fmt: skip

    window_test: TemperatureTest | None = None
    ece_result: _EceTest | None = None
    consistency_p, null_mean, null_quantile = math.nan, math.nan, math.nan
    tests_fired: list[str] = []
    temperature_drift = ece_drift = False
    collapse: str | None = None
    if n < min_window:
        reasons.append(
            f"only {n} labelled row{'' if n == 1 else 's'} in the window {window}; at least {min_window} are "
            "needed to decide (min_window)"
        )
        verdict: Verdict = "insufficient_data"
    else:
        window_test = temperature_test(summary.temperature_stats, reference, margin=temperature_margin,
                                       level=test_level, confidence_level=confidence_level)
        ece_result = _ece_test(
            "window", overall, baseline=baseline_ece, baseline_interval=ece_interval, tolerance=ece_tolerance,
            level=test_level, confidence_level=confidence_level, seed=seed,
        )
        consistency = consistency_resampling_from_stats(
            overall.bin_gap_sum, overall.bin_variance_sum, overall.n, n_resamples=n_resamples, seed=seed
        )
        consistency_p, null_mean, null_quantile = (
            consistency.p_value, consistency.null_mean, consistency.null_quantile_95
        )
        temperature_drift, ece_drift = window_test.drifted, ece_result.drifted
        collapse = _collapse("the window", window_test, summary.temperature_stats, reference)
        drifted_groups = [g for g in group_results if g.drifted]
        window_drift = collapse is not None or temperature_drift or ece_drift
        verdict = "drift" if window_drift or drifted_groups else "ok"
        tests_fired = (["collapsed"] if collapse is not None else []) + (["temperature"] if temperature_drift else []) \
            + (["ece"] if ece_drift else [])
        for g in drifted_groups:
            tests_fired += ([f"group {g.group!r} collapsed"] if g.collapsed else []) + (
                [f"group {g.group!r} temperature"] if g.temperature_drift else []) + (
                [f"group {g.group!r} ece"] if g.ece_drift else []
            )
        hides = " (the average hides the group drift)" if drifted_groups and not window_drift else ""
        t_sentence, e_sentence = window_test.sentence("window") + hides, ece_result.sentence + hides
        # The sentences that decided the verdict first, then the rest of the window's.
        reasons += [collapse] if collapse is not None else []
        reasons += [t_sentence] if temperature_drift else []
        reasons += [e_sentence] if ece_drift else []
        reasons += [g.reason for g in drifted_groups]
        reasons += [] if temperature_drift else [t_sentence]
        reasons += [] if ece_drift else [e_sentence]
        if tested_keys and not drifted_groups:
            reasons.append(
                f"no group drifted among the {len(tested_keys)} tested (T within the {temperature_margin:.0%} margin "
                f"and ECE within tolerance of the reference, or not significant at p < {_fmt_p(group_level)}, "
                f"Bonferroni over the two tests of {len(tested_keys)} groups)"
            )
        if skipped:
            reasons.append(
                f"{len(skipped)} group{'' if len(skipped) == 1 else 's'} skipped with fewer than {min_group_size} "
                f"labelled rows (min_group_size): {_group_list(skipped)}"
            )
        notes.append(
            f"binned ECE {overall.ece:.4f} vs {null_quantile:.4f}, the 95th percentile of a perfectly calibrated "
            f"model on these rows (consistency resampling p = {_fmt_p(consistency_p)}; context, not the decision)"
        )

    drift_detected = verdict == "drift"
    in_cooldown = last_event is not None and checked_at < last_event + cooldown
    cooldown_until = last_event + cooldown if last_event is not None and in_cooldown else None
    refit_recommended = drift_detected and not in_cooldown
    if drift_detected and last_event is not None and cooldown_until is not None:
        # After the sentences that decided the drift, before the context.
        reasons.insert(
            int(collapse is not None) + int(temperature_drift) + int(ece_drift) + sum(g.drifted for g in group_results),
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
        tests_fired=tuple(tests_fired),
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
        overall_drift=collapse is not None or temperature_drift or ece_drift,
        temperature_drift=temperature_drift,
        temperature_margin=temperature_margin,
        temperature_test=window_test,
        temperature_stats=summary.temperature_stats,
        reference_stats=reference,
        ece_drift=ece_drift,
        ece_estimator=DRIFT_ECE_ESTIMATOR,
        ece_estimate=math.nan if ece_result is None else ece_result.estimate,
        ece_low=math.nan if ece_result is None else ece_result.low,
        ece_high=math.nan if ece_result is None else ece_result.high,
        confidence_level=confidence_level,
        ece=overall.ece,
        baseline_ece=baseline_ece,
        baseline_ece_low=ece_interval[0],
        baseline_ece_high=ece_interval[1],
        ece_excess=math.nan if ece_result is None else ece_result.excess,
        ece_tolerance=ece_tolerance,
        p_value=math.nan if ece_result is None else ece_result.p_value,
        p_threshold=p_threshold,
        test_level=test_level,
        consistency_p_value=consistency_p,
        null_mean=null_mean,
        null_quantile_95=null_quantile,
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
        output_collapsed=collapse is not None,
    )


def with_stream_checks(
    report: DriftReport, *, sequential: SequentialCheck | None = None, early_warning: EarlyWarning | None = None
) -> DriftReport:
    """The report with the checks that look across the stream added: the sequential rule's update
    (:func:`~monitoring.update_sequential`) and the early warning on every served row
    (:func:`~monitoring.warn_before_labels`).

    A sequential alarm is a drift (``tests_fired`` gains ``"sequential"``), whatever the
    fixed window said — also on a window with too few labelled rows for its own tests: the rule
    accumulated its evidence over earlier checks. Its sentence goes first among the reasons;
    without an alarm it is context, like the early warning's, which never changes the verdict
    (it says what to expect before labels, and schedules a labelled check elsewhere). The
    cool-down applies to a sequential drift as to any other.

    Examples
    --------
    >>> from datetime import UTC, datetime, timedelta
    >>> import numpy as np
    >>> from calibration import TemperatureStats
    >>> from monitoring import SequentialState, summarise_arrays, update_sequential
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t + timedelta(hours=1))
    >>> hot = TemperatureStats(temperature=1.0, n=500, gradient_sum=400.0, gradient_square_sum=900.0,
    ...                        curvature_sum=500.0)
    >>> check = update_sequential(SequentialState.initial(1.0), hot, start=t, end=t + timedelta(hours=1))
    >>> report = with_stream_checks(decide_drift(s, baseline_ece=0.0), sequential=check)
    >>> report.verdict, report.tests_fired, report.refit_window_start == t
    ('drift', ('sequential',), True)
    """
    if sequential is None and early_warning is None:
        return report
    reasons = list(report.reasons)
    tests_fired = list(report.tests_fired)
    verdict: Verdict = report.verdict
    decided = len(tests_fired) if report.verdict == "drift" else 0
    if sequential is not None and sequential.alarm:
        verdict = "drift"
        tests_fired.append("sequential")
        reasons.insert(decided, sequential.sentence())
        if report.verdict != "drift" and report.in_cooldown and report.cooldown_until is not None:
            reasons.insert(decided + 1, f"drift within the cool-down: no refit is recommended before "
                                        f"{report.cooldown_until.isoformat()}")
    elif sequential is not None:
        reasons.append(sequential.sentence())
    if early_warning is not None:
        reasons.append(early_warning.sentence())
    drift_detected = verdict == "drift"
    return replace(
        report, verdict=verdict, drift_detected=drift_detected,
        refit_recommended=drift_detected and not report.in_cooldown, reasons=tuple(reasons),
        tests_fired=tuple(tests_fired), sequential=sequential, early_warning=early_warning,
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
