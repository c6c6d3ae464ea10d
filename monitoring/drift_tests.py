"""The drift tests, one unit each: what a window (or one group of it) is tested for.

A drift test reads one *scope* — the whole window or one group — as a :class:`ScopeEvidence`
(the scope's mergeable sums at the deployed T and its reference's), at a significance level
the decision gives it, and returns a :class:`TestOutcome`: whether it fired, its p-value, its
effect with an interval, one sentence with the numbers, and the metrics a dashboard charts.
The decision (:func:`monitoring.decide_drift`) folds the tests the policy names
(:attr:`monitoring.DriftPolicy.tests`) over the window and its tested groups; reports,
Prometheus, the dashboard and the alert texts iterate the outcomes.

Adding a test is one class here (a subclass of :class:`DriftTest` with a new ``name`` and the
``metric_names`` its outcome records: subclassing registers it) and its name in the policy's
``tests`` default.

The tests (:attr:`DriftTest.registry` holds them all):

* ``collapsed`` (:class:`CollapsedOutputTest`): a guard, not a statistical test — the window's
  logits barely vary under the model's own probabilities (a near-uniform or saturated output);
* ``temperature`` (:class:`TemperatureShiftTest`, primary): the window's NLL-optimal T against
  the reference's, beyond ``temperature_margin`` (:func:`calibration.temperature_test`);
* ``ece`` (:class:`EceExcessTest`): the window's calibration error against the reference's,
  beyond ``ece_tolerance``, both with the policy's estimator and intervals. A reference whose
  ECE was estimated with another estimator or binning is not compared (the outcome says so).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from scipy.special import ndtr, ndtri

from calibration import (
    CalibrationErrorEstimate,
    CalibrationStats,
    TemperatureStats,
    TemperatureTest,
    calibration_error_from_stats,
    json_safe,
    temperature_test,
)

from .policy import DriftPolicy

__all__ = [
    "CollapsedOutputTest",
    "DriftTest",
    "EceExcessTest",
    "ScopeEvidence",
    "ScopeReference",
    "TemperatureShiftTest",
    "TestOutcome",
    "configured_tests",
    "window_level",
]

# Bootstrap resamples of the ECE estimates' intervals (the interval's ends move by ~1e-3).
_ECE_RESAMPLES: Final = 1000


def fmt_p(p: float) -> str:
    """A p-value as the reports show it."""
    return "n/a" if not math.isfinite(p) else f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


@dataclass(frozen=True, slots=True)
class ScopeReference:
    """What a scope is compared with: the reference's sums and its registered ECE.

    ``temperature_stats`` are the reference's temperature sums at the deployed T (None: T is
    taken as exact); ``ece`` [``ece_low``, ``ece_high``] its calibration error (NaN ends: no
    interval registered), estimated with ``ece_estimator`` on ``n_bins`` bins of ``scheme``.
    """

    ece: float
    ece_low: float = math.nan
    ece_high: float = math.nan
    ece_estimator: str = "debiased_l1"
    n_bins: int = 15
    scheme: str = "equal-width"
    temperature_stats: TemperatureStats | None = None

    @property
    def has_ece_interval(self) -> bool:
        return math.isfinite(self.ece_low) and math.isfinite(self.ece_high)


@dataclass(frozen=True, slots=True)
class ScopeEvidence:
    """One scope of a window: ``scope`` None for the whole window, else the group's name."""

    scope: str | None
    calibration: CalibrationStats
    temperature_stats: TemperatureStats
    reference: ScopeReference

    @property
    def what(self) -> str:
        return "window" if self.scope is None else f"group {self.scope!r}"


@dataclass(frozen=True, slots=True)
class TestOutcome:
    """What one test found on one scope.

    ``fired`` iff ``p_value < level``; ``effect`` [``effect_low``, ``effect_high``] is the test's
    effect (the ratio of T for ``temperature``, the ECE excess for ``ece``); ``sentence`` one
    line with the numbers, ``compares`` and ``statistic`` the same in a few words for a table's
    cells; ``metrics`` the named numbers a check records (for the window:
    the metric names of the MLflow check run); ``refused`` a reason the test could not compare
    (then it did not fire); ``detail`` the test's full result (a :class:`calibration.TemperatureTest`,
    a :class:`calibration.CalibrationErrorEstimate`).
    """

    __test__: ClassVar[bool] = False  # not a pytest test class

    test: str
    scope: str | None
    fired: bool
    p_value: float
    level: float
    effect: float
    effect_low: float
    effect_high: float
    sentence: str
    compares: str = ""
    statistic: str = ""
    metrics: Mapping[str, float] = field(default_factory=dict)
    refused: str | None = None
    detail: TemperatureTest | CalibrationErrorEstimate | None = None

    @property
    def label(self) -> str:
        """The name ``tests_fired`` uses: ``temperature``, or ``group 'eu' temperature``."""
        return self.test if self.scope is None else f"group {self.scope!r} {self.test}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN as None); the detail as its own dict."""
        detail = self.detail.to_dict() if self.detail is not None else None
        return {"test": self.test, "scope": self.scope, "label": self.label, "fired": self.fired,
                "p_value": json_safe(self.p_value), "level": self.level, "effect": json_safe(self.effect),
                "effect_low": json_safe(self.effect_low), "effect_high": json_safe(self.effect_high),
                "sentence": self.sentence, "compares": self.compares,
                "statistic": self.statistic, "refused": self.refused,
                "metrics": {key: json_safe(value) for key, value in self.metrics.items()}, "detail": detail}


class DriftTest(ABC):
    """One drift test (module docstring). Subclasses set ``name`` and are registered by it."""

    name: ClassVar[str]
    #: The names of the metrics its outcome on the window records (:attr:`TestOutcome.metrics`): what a
    #: check run may hold and a dashboard may read (:func:`monitoring.drift_metric_names`).
    metric_names: ClassVar[tuple[str, ...]]
    #: A statistical test takes a share of the decision's level (Bonferroni); a guard (no p-value) does not.
    uses_level: ClassVar[bool] = True
    registry: ClassVar[dict[str, type[DriftTest]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not isinstance(getattr(cls, "metric_names", None), tuple):
            raise TypeError(f"drift test {cls.__name__} must declare metric_names, the tuple of the metrics its "
                            "outcome on the window records (a check run holds them; () for none)")
        DriftTest.registry[cls.name] = cls

    @abstractmethod
    def run(self, evidence: ScopeEvidence, *, level: float, policy: DriftPolicy, seed: int) -> TestOutcome:
        """Test ``evidence`` at ``level`` with the policy's parameters; ``seed`` for any resampling."""

    @staticmethod
    @abstractmethod
    def effect_beyond(policy: DriftPolicy) -> str:
        """The effect the test requires under ``policy``, in words (a report's column)."""


def window_level(policy: DriftPolicy) -> float:
    """The level of each statistical test on the whole window: ``p_threshold`` shared by the policy's
    tests that use a level (Bonferroni; a guard takes no share).

    >>> from monitoring import DEFAULT_POLICY
    >>> window_level(DEFAULT_POLICY)  # the temperature and ECE tests share 0.01
    0.005
    """
    tests = configured_tests(policy)
    return policy.p_threshold / max(1, sum(test.uses_level for test in tests))


def configured_tests(policy: DriftPolicy) -> tuple[DriftTest, ...]:
    """The tests ``policy.tests`` names, in its order; a ValueError names an unknown one.

    Examples
    --------
    >>> from monitoring import DriftPolicy
    >>> [test.name for test in configured_tests(DriftPolicy(tests=("ece", "temperature")))]
    ['ece', 'temperature']
    >>> configured_tests(DriftPolicy(tests=("volume",)))
    Traceback (most recent call last):
    ...
    ValueError: unknown drift test(s) ['volume'] in the policy's tests (THERMOSTAT_DRIFT_TESTS); known: ['collapsed', 'ece', 'temperature']
    """
    unknown = [name for name in policy.tests if name not in DriftTest.registry]
    if unknown:
        raise ValueError(f"unknown drift test(s) {unknown} in the policy's tests (THERMOSTAT_DRIFT_TESTS); known: "
                         f"{sorted(DriftTest.registry)}")
    return tuple(DriftTest.registry[name]() for name in policy.tests)


class CollapsedOutputTest(DriftTest):
    """A guard, not a statistical test: the scope's outputs collapsed.

    When the logits barely vary under the model's own probabilities — the mean Var_p[z / T] per
    row, the information the rows carry about T, below ``policy.collapse_spread_ratio`` (1 %) of
    the reference's (of 1 without reference sums; 0.45–1.7 on the six CIFAR models of the test
    data) — the classifier is near-uniform (logits shrunk towards a constant) or saturated. Such
    rows say next to nothing about T (its interval runs towards 0 and infinity), so no test can be
    relied on to fire; yet it is what a monitor must flag: a drift whose refit will be refused with
    "needs retraining or a data fix". Healthy windows of 200 rows of those six models stay above
    86 % of their reference's.
    """

    name = "collapsed"
    metric_names = ("output_collapsed",)
    uses_level = False

    @staticmethod
    def effect_beyond(policy: DriftPolicy) -> str:
        return f"below {policy.collapse_spread_ratio:.0%} of the reference's spread"

    def run(self, evidence: ScopeEvidence, *, level: float, policy: DriftPolicy, seed: int) -> TestOutcome:
        stats, reference = evidence.temperature_stats, evidence.reference.temperature_stats
        spread = stats.scaled_logit_variance
        has_reference = reference is not None and reference.n > 0 and reference.curvature_sum > 0
        usual = reference.scaled_logit_variance if reference is not None and has_reference else 1.0
        fired = bool(stats.n) and spread < policy.collapse_spread_ratio * usual
        versus = (f"the reference's {usual:.3g}" if has_reference
                  else "1, typical of a trained classifier (no reference sums)")
        sentence = ""
        if fired:
            low, high = stats.interval(policy.confidence_level)
            sentence = (f"model output collapsed: the logits of {'the window' if evidence.scope is None else evidence.what}"
                        f" ({stats.n} rows) barely vary under the model's own probabilities (variance of z/T "
                        f"{spread:.3g} per row, below {policy.collapse_spread_ratio:.0%} of {versus}): a near-uniform "
                        f"classifier or saturated outputs, which say next to nothing about T (window T "
                        f"{stats.window_temperature:.4g} [{low:.4g}, {high:.4g}]); needs retraining or a data fix")
        return TestOutcome(
            test=self.name, scope=evidence.scope, fired=fired, p_value=math.nan, level=math.nan,
            effect=spread / usual if stats.n else math.nan, effect_low=math.nan, effect_high=math.nan,
            sentence=sentence, compares=f"variance of z/T per row vs {versus}", statistic=f"{spread:.3g}",
            metrics={"output_collapsed": float(fired)},
        )


class TemperatureShiftTest(DriftTest):
    """The window's optimal T against the reference's, beyond the policy's margin (primary)."""

    name = "temperature"
    metric_names = ("window_temperature", "window_temperature_low", "window_temperature_high", "temperature_ratio",
                    "temperature_z", "temperature_p_value", "temperature_drift", "detectable_increase",
                    "detectable_decrease")

    @staticmethod
    def effect_beyond(policy: DriftPolicy) -> str:
        return f"margin {policy.temperature_margin:.0%}" if policy.temperature_margin else "no margin"

    def run(self, evidence: ScopeEvidence, *, level: float, policy: DriftPolicy, seed: int) -> TestOutcome:
        result = temperature_test(evidence.temperature_stats, evidence.reference.temperature_stats,
                                  margin=policy.temperature_margin, level=level,
                                  equivalence_margin=policy.equivalence_margin,
                                  equivalence_level=policy.equivalence_level,
                                  confidence_level=policy.confidence_level,
                                  min_expected_errors=policy.min_expected_errors)
        detectable = result.minimal_detectable_shift()
        metrics = {"window_temperature": result.window_temperature,
                   "window_temperature_low": result.window_temperature_low,
                   "window_temperature_high": result.window_temperature_high, "temperature_ratio": result.ratio,
                   "temperature_z": result.z, "temperature_p_value": result.p_value,
                   "temperature_drift": float(result.drifted),
                   "detectable_increase": detectable.increase, "detectable_decrease": detectable.decrease}
        versus = (f"reference {result.reference_temperature:.4g} (n={result.reference_n})" if result.reference_n
                  else f"deployed {result.temperature:.4g} (no reference sums: one-sample)")
        compares = (f"window T {result.window_temperature:.4g} [{result.window_temperature_low:.4g}, "
                    f"{result.window_temperature_high:.4g}] vs {versus}: ratio {result.ratio:.3f} "
                    f"[{result.ratio_low:.3f}, {result.ratio_high:.3f}], {result.direction}")
        return TestOutcome(
            test=self.name, scope=evidence.scope, fired=result.drifted, p_value=result.p_value, level=level,
            effect=result.ratio, effect_low=result.ratio_low, effect_high=result.ratio_high,
            sentence=result.sentence(evidence.what), compares=compares,
            statistic=f"z = {result.z:+.2f}" + (f" (beyond the margin {result.margin_z:+.2f})" if result.margin else ""),
            metrics=metrics,
            detail=result,
        )


class EceExcessTest(DriftTest):
    """The window's calibration error against the reference's, beyond the policy's tolerance.

    z = (excess − tolerance) / sqrt(SE_w² + SE_ref²), the standard errors from each interval's
    half-width; one-sided at ``level``. It catches what one temperature does not describe (a
    change of the reliability curve's shape).
    """

    name = "ece"
    metric_names = ("ece_estimate", "ece_low", "ece_high", "ece_excess", "p_value", "ece_drift")

    @staticmethod
    def effect_beyond(policy: DriftPolicy) -> str:
        return f"tolerance {policy.ece_tolerance:g}"

    def run(self, evidence: ScopeEvidence, *, level: float, policy: DriftPolicy, seed: int) -> TestOutcome:
        stats, reference = evidence.calibration, evidence.reference
        mismatch = _binning_mismatch(stats, reference, policy)
        if mismatch is not None:
            sentence = f"{evidence.what} ECE test not run: {mismatch}"
            return TestOutcome(test=self.name, scope=evidence.scope, fired=False, p_value=math.nan, level=level,
                               effect=math.nan, effect_low=math.nan, effect_high=math.nan, sentence=sentence,
                               compares="not compared: " + mismatch, statistic="-", metrics={"ece_drift": 0.0},
                               refused=mismatch)
        result = calibration_error_from_stats(stats, estimator=policy.ece_estimator,
                                              confidence_level=policy.confidence_level,
                                              n_resamples=_ECE_RESAMPLES, seed=seed)
        quantile = float(ndtri(0.5 + policy.confidence_level / 2.0))
        window_se = (result.high - result.low) / (2.0 * quantile)
        reference_se = (reference.ece_high - reference.ece_low) / (2.0 * quantile) if reference.has_ece_interval else 0.0
        se = math.hypot(window_se, reference_se)
        excess = result.estimate - reference.ece
        beyond = excess - policy.ece_tolerance
        p_value = float(ndtr(-beyond / se)) if se > 0 and math.isfinite(se) else (0.0 if beyond > 0 else 1.0)
        fired = p_value < level
        half = quantile * se
        metrics = {"ece_estimate": result.estimate, "ece_low": result.low, "ece_high": result.high,
                   "ece_excess": excess, "p_value": p_value, "ece_drift": float(fired)}
        return TestOutcome(
            test=self.name, scope=evidence.scope, fired=fired, p_value=p_value, level=level, effect=excess,
            effect_low=excess - half, effect_high=excess + half,
            sentence=_ece_sentence(evidence, result, excess, p_value, fired, level, policy.ece_tolerance),
            compares=(f"{result.estimator} {result.estimate:.4f} [{result.low:.4f}, {result.high:.4f}] vs reference "
                      f"{reference.ece:.4f}" + (f" [{reference.ece_low:.4f}, {reference.ece_high:.4f}]"
                                                if reference.has_ece_interval else "")),
            statistic=f"excess {excess:+.4f}", metrics=metrics, detail=result,
        )


def _binning_mismatch(stats: CalibrationStats, reference: ScopeReference, policy: DriftPolicy) -> str | None:
    """Why the window's ECE cannot be compared with the reference's, or None when it can."""
    if reference.ece_estimator != policy.ece_estimator:
        return (f"the reference's ECE was estimated with {reference.ece_estimator!r} and this check's would be "
                f"{policy.ece_estimator!r}; two estimators are never compared (register the version again, e.g. a "
                f"refit, to store a {policy.ece_estimator!r} reference, or set THERMOSTAT_DRIFT_ECE_ESTIMATOR="
                f"{reference.ece_estimator})")
    if reference.n_bins != stats.n_bins or reference.scheme != "equal-width":
        return (f"the reference's ECE uses {reference.n_bins} {reference.scheme} bins and this window "
                f"{stats.n_bins} equal-width bins; two binnings are never compared")
    return None


def _ece_sentence(evidence: ScopeEvidence, result: CalibrationErrorEstimate, excess: float, p_value: float,
                  fired: bool, level: float, tolerance: float) -> str:
    stats, reference = evidence.calibration, evidence.reference
    head = (f"{evidence.what} ECE {result.estimate:.4f} [{result.low:.4f}, {result.high:.4f}] ({result.estimator}, "
            f"{stats.n_bins} bins, n={stats.n}; binned {stats.ece:.4f}) vs the reference {reference.ece:.4f}"
            + (f" [{reference.ece_low:.4f}, {reference.ece_high:.4f}]" if reference.has_ece_interval else ""))
    if fired:
        return (f"{head}: the excess {excess:+.4f} is beyond the tolerance {tolerance:.4f} "
                f"(p = {fmt_p(p_value)} < {fmt_p(level)})")
    if excess > tolerance:
        return (f"{head}: the excess {excess:+.4f} exceeds the tolerance {tolerance:.4f} but not significantly "
                f"(p = {fmt_p(p_value)} >= {fmt_p(level)}): the noise of a finite window")
    return f"{head}: within the tolerance {tolerance:.4f} (excess {excess:+.4f}; p = {fmt_p(p_value)})"
