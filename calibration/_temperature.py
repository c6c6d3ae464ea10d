"""The temperature test: does the deployed T still fit a window of traffic? All from sums.

Scores of the NLL in 1/T
------------------------
At the deployed temperature T (β = 1/T) a row with logits z and label y has
NLL(β) = log Σ_k exp(β z_k) − β z_y, and with p = softmax(β z):

* ``g`` = ∂NLL/∂β = E_p[z] − z_y (the score; adding a constant to the row changes nothing);
* ``h`` = ∂²NLL/∂β² = Var_p[z] ≥ 0 (the observed information of the row).

A window is summarised by :class:`TemperatureStats`: n, Σg, Σg² and Σh over its rows, at one
T. Those four numbers add up (``+``) to the numbers of the union, exactly like
:class:`CalibrationStats`, so hourly windows make a daily one and chunks summed on different
machines merge; every quantity below is a function of them.

* **Direction.** On traffic where T is still NLL-optimal, E[g] = 0. A mean g > 0 means the
  NLL falls as β falls: T should grow, the model is **over-confident** at T; g < 0:
  under-confident, T should shrink.
* **The window's own T** is one Newton step from the deployed T in u = log β (the NLL of
  real logits is far closer to quadratic in log β than in β): with L(u) = Σ NLL_i(e^u),
  L' = β Σg and L'' = β Σg + β² Σh, so ``log T_w = log T + Σg / (Σg + β Σh)``. Measured on
  the six CIFAR files of the test data with logits rescaled by 0.8 … 1.5, the step lands
  within 0.05 of the exact log T_w up to ±25 % (a step in β overshoots by 0.15–0.27 at
  ×1.25 and diverges at ×1.5). When a window is so under-confident that Σg < −β Σh / 2,
  the denominator is held at β Σh / 2 (the step stays monotone in Σg); an over-confident
  window's step is below 1 in log T (T_w < e·T): a large drift is an alarm, its exact T a refit.
* **Its interval** is the sandwich: SE(log T_w) = sqrt(n · s²_g) / (Σg + β Σh), s²_g the
  sample variance of g (Huber 1967; robust to a model that is not the truth).

The two-sample test
-------------------
T was itself fitted on a finite reference set, so a window drawn from the reference's
distribution differs from T by the reference's estimation error as well as by its own
sampling error. :func:`temperature_test` compares the window with the **reference**, both
one Newton step from the same deployed T (the reference's step is 0 when T was fitted on it):
d = log(T_w / T_ref), SE(d)² = SE_w² + SE_ref². The window's SE is that of a score test (the
variance under the null, Rao 1948): the window's own information Σh — a function of its
confidences alone, not of its labels — times κ = s²_ref / (Σh_ref / n_ref), the reference's
ratio of score variance to information (1 for a model that is the truth; the sandwich's
correction otherwise). Two reasons. The scores of a confident model are heavily skewed (a
few confident errors carry most of the variance), and a window that happens to hold few of
them has a small mean *and* a small sample variance: with the window's sample variance,
1–2.5 % of calibrated CIFAR-10 windows looked under-confident (docs/statistics.md). And an
over-confident window's sample variance at the deployed T is inflated by the very errors
that make it drift, which cost half the power against a 20 % subgroup made 1.5× more
confident; the information-based variance does not grow with them.

A shift that makes no practical difference is not a drift: the test is of
H0: |log(T_w / T_ref)| ≤ log(1 + margin) against H1: beyond it, at level ``level``, with
z = (|d| − log(1 + margin)) / SE(d) and p = Φ(−z) (the test of a margin is one-sided on the
side of the observed shift; it is exact at the boundary and conservative inside). Equivalently:
the (1 − 2 level) interval of T_w / T_ref lies entirely outside [1/(1 + margin), 1 + margin].
``p_value_no_margin`` is the plain two-sided test of d = 0 and ``z`` the signed d / SE(d): the
statistic a sequential rule over many checks accumulates.

Rare errors
-----------
The normal approximation of Σg needs many rows to carry the sum. On a confident model they do
not: a correct row adds a small negative score, an error a large positive one (about the gap
between the top logit and the label's, times β), so Σg is a handful of errors plus a
near-constant. With λ expected errors in the window, Σg is close to a compound Poisson(λ)
sum, whose skewness is about 1/√λ; below a few errors the upper tail is far heavier than the
normal one. The reference's own SE (and T itself) rests on its errors in the same way.
Measured on calibrated windows of the most confident rows of CIFAR-10 WRN-16-4 (labels drawn
from the model's own softmax, benchmarks/drift_study.py --confident), the test at a nominal
0.5 % flagged 4.3 % of windows of 500 rows and 2.7 % of 2,000 (0.5 and 1.9 errors expected),
one confident error in 500 such rows was a "drift" in 12 % of windows, and windows of 10,000
rows expecting 10 errors were flagged in 1.3 % when the reference expected only 5. So a
window is tested only when it and its reference both **expect** enough errors at T:
λ = Σ(1 − c), c the top-label confidence at T (a function of the confidences alone, not of
the labels — a gate on observed errors would select the windows whose errors carry the sum;
summed in :class:`TemperatureStats` as ``expected_errors``). Below ``min_expected_errors``
(default 5: the level failed below 3, and at 5 or more in window and reference no window of
5,736 was flagged at 0.5 %) the result says "not enough errors to test T", its p-values are
NaN and it does not fire: such a window holds too little information about T to see a
shift it could act on. Sums built without ``expected_errors`` (NaN: kept by an older release
or registered before it) are not gated on that side.

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
Huber. "The behavior of maximum likelihood estimates under nonstandard conditions". Proc.
Fifth Berkeley Symposium, 1967 (the sandwich variance).
Rao. "Large sample tests of statistical hypotheses concerning several parameters with
applications to problems of estimation". Proc. Cambridge Philos. Soc. 44, 1948 (the score test).
Wellek. "Testing Statistical Hypotheses of Equivalence and Noninferiority". 2nd ed., CRC,
2010 (tests against a margin).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri

from ._scored import ScoredSet
from ._scores import TopLabelScores
from ._serialise import JsonResult
from ._validation import check_confidence_level, check_count, check_temperature

__all__ = [
    "DetectableShift",
    "Direction",
    "TemperatureStats",
    "TemperatureTest",
    "log_normal_interval",
    "log_temperature_interval",
    "minimal_detectable_shift",
    "temperature_test",
]

Direction = Literal["over-confident", "under-confident", "none"]

_DEFAULT_MARGIN = 0.03
# The relative shift of T whose refit gains nothing worth having (docs/statistics.md, "The margins").
_DEFAULT_EQUIVALENCE_MARGIN = 0.10
# Its level: claiming "calibrated" of a window whose T is off by the margin (two one-sided tests at 5 %).
_DEFAULT_EQUIVALENCE_LEVEL = 0.05
# Fewest errors a window must expect at T to be tested (module docstring, "Rare errors").
_DEFAULT_MIN_EXPECTED_ERRORS = 5.0


@dataclass(frozen=True, slots=True, eq=False)
class TemperatureStats(JsonResult):
    """Mergeable sums of the NLL's scores in 1/T over a set of rows, at one temperature.

    ``n`` rows; ``gradient_sum`` = Σ g, ``gradient_square_sum`` = Σ g², ``curvature_sum`` = Σ h
    with g = E_p[z] − z_y and h = Var_p[z] at p = softmax(z / ``temperature``) (see the module
    docstring). ``expected_errors`` = Σ (1 − c), c the top-label confidence at ``temperature``:
    the errors the rows would show if T were right (NaN when not summed: sums kept by an older
    release). ``+`` adds two sets of rows at the same T.

    Examples
    --------
    >>> logits = np.log([[0.2, 0.8], [0.9, 0.1], [0.3, 0.7]])
    >>> stats = TemperatureStats.from_logits(logits, [1, 0, 0])
    >>> stats.n, round(stats.gradient_sum, 6), round(stats.expected_errors, 6)
    (3, 0.096127, 0.6)
    >>> parts = TemperatureStats.from_logits(logits[:1], [1]) + TemperatureStats.from_logits(logits[1:], [0, 0])
    >>> parts == stats
    True
    >>> stats.direction, round(stats.window_temperature, 4)  # mean g > 0: T should grow
    ('over-confident', 1.1021)
    """

    temperature: float
    n: int
    gradient_sum: float
    gradient_square_sum: float
    curvature_sum: float
    expected_errors: float = math.nan

    @classmethod
    def from_logits(
        cls, logits: ArrayLike | ScoredSet, labels: ArrayLike | None = None, *, temperature: float = 1.0
    ) -> TemperatureStats:
        """The sums over ``logits`` (n_samples, n_classes) and ``labels`` at ``temperature``.

        A validated :class:`ScoredSet` may stand for both (pass no ``labels``).

        Raises
        ------
        ValueError
            If the logits, labels or temperature break their rules.
        """
        return cls.from_scores(TopLabelScores.from_logits(logits, labels, temperature=temperature))

    @classmethod
    def from_scores(cls, scores: TopLabelScores) -> TemperatureStats:
        """The sums of every row of one pass (:class:`TopLabelScores`: its gradients, curvatures
        and confidences).

        Examples
        --------
        >>> TemperatureStats.from_scores(TopLabelScores.from_logits(np.log([[0.3, 0.7]]), [1])).n
        1
        """
        return cls.from_rows(scores.gradient, scores.curvature, scores.temperature, scores.confidence)

    @classmethod
    def grouped(
        cls, scores: TopLabelScores, group_codes: NDArray[np.intp], n_groups: int
    ) -> tuple[TemperatureStats, ...]:
        """One :class:`TemperatureStats` per group code in [0, n_groups) of one pass's rows (codes
        trusted: see :meth:`TopLabelScores.grouped_calibration_stats`, which checks them), from four
        ``bincount``s."""

        def per_group(weights: NDArray[np.float64]) -> NDArray[np.float64]:
            return np.bincount(group_codes, weights=weights, minlength=n_groups).astype(np.float64, copy=False)

        count = np.bincount(group_codes, minlength=n_groups)
        gradient, square, curvature, errors = (
            per_group(w) for w in (scores.gradient, scores.gradient**2, scores.curvature, 1.0 - scores.confidence)
        )
        return tuple(
            cls(temperature=scores.temperature, n=int(count[g]), gradient_sum=float(gradient[g]),
                gradient_square_sum=float(square[g]), curvature_sum=float(curvature[g]),
                expected_errors=float(errors[g]))
            for g in range(n_groups)
        )

    @classmethod
    def from_rows(
        cls,
        gradient: NDArray[np.float64],
        curvature: NDArray[np.float64],
        temperature: float,
        confidence: NDArray[np.float64] | None = None,
    ) -> TemperatureStats:
        """Sum per-row scores and top-label confidences (trusted: 1-D float arrays of one length;
        without ``confidence``, ``expected_errors`` is NaN)."""
        return cls(
            temperature=temperature,
            n=int(gradient.shape[0]),
            gradient_sum=float(gradient.sum()),
            gradient_square_sum=float(np.dot(gradient, gradient)),
            curvature_sum=float(curvature.sum()),
            expected_errors=math.nan if confidence is None else float(np.sum(1.0 - confidence)),
        )

    @classmethod
    def empty(cls, temperature: float = 1.0) -> TemperatureStats:
        """No rows: the neutral element of ``+``."""
        return cls(temperature=check_temperature(temperature), n=0, gradient_sum=0.0, gradient_square_sum=0.0,
                   curvature_sum=0.0, expected_errors=0.0)

    def __add__(self, other: TemperatureStats) -> TemperatureStats:
        if not isinstance(other, TemperatureStats):
            return NotImplemented
        if self.temperature != other.temperature:
            raise ValueError(
                f"cannot merge temperature statistics at different temperatures: {self.temperature!r} and "
                f"{other.temperature!r}; the scores depend on T"
            )
        return TemperatureStats(
            temperature=self.temperature,
            n=self.n + other.n,
            gradient_sum=self.gradient_sum + other.gradient_sum,
            gradient_square_sum=self.gradient_square_sum + other.gradient_square_sum,
            curvature_sum=self.curvature_sum + other.curvature_sum,
            expected_errors=self.expected_errors + other.expected_errors,  # NaN (not summed) stays NaN
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TemperatureStats):
            return NotImplemented
        return (self.temperature, self.n) == (other.temperature, other.n) and bool(
            np.allclose(
                [self.gradient_sum, self.gradient_square_sum, self.curvature_sum, self.expected_errors],
                [other.gradient_sum, other.gradient_square_sum, other.curvature_sum, other.expected_errors],
                rtol=1e-12,
                atol=1e-9,
                equal_nan=True,
            )
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def mean_gradient(self) -> float:
        """Mean g (NaN without rows): > 0 over-confident at ``temperature``, < 0 under-confident."""
        return self.gradient_sum / self.n if self.n else math.nan

    @property
    def gradient_variance(self) -> float:
        """Sample variance of g (n − 1 in the denominator; NaN below two rows)."""
        if self.n < 2:
            return math.nan
        return max(self.gradient_square_sum - self.gradient_sum * self.gradient_sum / self.n, 0.0) / (self.n - 1)

    @property
    def scaled_logit_variance(self) -> float:
        """Mean Var_p[z / T] per row (NaN without rows): how much the scaled logits vary under the
        model's own probabilities, the information a row carries about log T. About 0.5–1.7 for
        the trained CIFAR classifiers of the test data; near 0 for collapsed (near-uniform or
        saturated) outputs."""
        return self.curvature_sum / self.n / self.temperature**2 if self.n else math.nan

    @property
    def direction(self) -> Direction:
        """Which way T should move: "over-confident" (grow T), "under-confident" (shrink T), "none"."""
        if not self.n or self.gradient_sum == 0.0:
            return "none"
        return "over-confident" if self.gradient_sum > 0 else "under-confident"

    def _curvature(self) -> float:
        """L''(log β) / β: Σg + β Σh, held at β Σh / 2 or more (module docstring)."""
        beta_curvature = self.curvature_sum / self.temperature
        return max(self.gradient_sum + beta_curvature, 0.5 * beta_curvature)

    @property
    def log_temperature_shift(self) -> float:
        """log(T_w / T): one Newton step in log β from ``temperature`` (NaN without information)."""
        curvature = self._curvature()
        return self.gradient_sum / curvature if self.n and curvature > 0 else math.nan

    @property
    def window_temperature(self) -> float:
        """T_w, the NLL-optimal temperature of these rows by one Newton step (NaN if undefined)."""
        return _exp(math.log(self.temperature) + self.log_temperature_shift)

    def log_temperature_standard_error(self, variance: float | None = None) -> float:
        """Sandwich SE of log T_w; ``variance`` replaces the sample variance of g when given."""
        curvature = self._curvature()
        spread = self.gradient_variance if variance is None else variance
        if not (self.n >= 2 and curvature > 0 and math.isfinite(spread)):
            return math.nan
        return math.sqrt(self.n * spread) / curvature

    def interval(self, confidence_level: float = 0.95) -> tuple[float, float]:
        """(low, high): the ``confidence_level`` interval of T_w, symmetric in log T (from 0 to
        infinity when the rows say next to nothing about T)."""
        _, low, high = log_normal_interval(math.log(self.temperature) + self.log_temperature_shift,
                                           self.log_temperature_standard_error(),
                                           check_confidence_level(confidence_level))
        return low, high

    def to_dict(self) -> dict[str, Any]:
        """The sums, and what they give: mean gradient, direction, T_w with its 95% interval."""
        low, high = self.interval()
        return JsonResult.to_dict(self) | {
            "mean_gradient": _json_number(self.mean_gradient),
            "direction": self.direction,
            "window_temperature": _json_number(self.window_temperature),
            "window_temperature_low": _json_number(low),
            "window_temperature_high": _json_number(high),
        }


def _json_number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _exp(exponent: float) -> float:
    """exp, saturating: infinity beyond the float range (0 below it comes from math.exp itself)."""
    return math.inf if exponent > _LARGEST_EXPONENT else math.exp(exponent)


# log of the largest float: exp of anything larger overflows.
_LARGEST_EXPONENT = math.log(np.finfo(np.float64).max)


def log_normal_interval(
    log_value: float, log_standard_error: float, confidence_level: float
) -> tuple[float, float, float]:
    """exp(``log_value``) and its normal interval in log space: exp(log_value ∓ z · SE).

    Computed in log space, so a huge standard error (outputs that carry next to no information,
    e.g. a collapsed classifier's) gives an interval from 0 to infinity instead of an
    ``OverflowError``. The ends are NaN when ``log_value`` or the standard error is not finite.

    Parameters
    ----------
    log_value : float
        The estimate's logarithm, e.g. log T_w or log(T_w / T_ref).
    log_standard_error : float
        Its standard error (>= 0).
    confidence_level : float
        Level of the interval, in (0, 1).

    Returns
    -------
    (value, low, high) : tuple of float

    Examples
    --------
    >>> import math
    >>> [round(v, 4) for v in log_normal_interval(math.log(2.0), 0.05, 0.95)]
    [2.0, 1.8133, 2.2059]
    >>> log_normal_interval(0.0, 1e6, 0.95)
    (1.0, 0.0, inf)
    """
    value = _exp(log_value) if not math.isnan(log_value) else math.nan
    if not (math.isfinite(log_value) and math.isfinite(log_standard_error)):
        return value, math.nan, math.nan
    spread = float(ndtri(0.5 + confidence_level / 2.0)) * log_standard_error
    return value, _exp(log_value - spread), _exp(log_value + spread)


def log_temperature_interval(temperature: float, log_standard_error: float, confidence_level: float) -> tuple[float, float]:
    """The normal interval of T symmetric in log T: T · exp(∓ z · SE); (NaN, NaN) if undefined.

    >>> [round(v, 4) for v in log_temperature_interval(2.0, 0.05, 0.95)]
    [1.8133, 2.2059]
    """
    if not (math.isfinite(temperature) and temperature > 0.0):
        return math.nan, math.nan
    _, low, high = log_normal_interval(math.log(temperature), log_standard_error, confidence_level)
    return low, high


@dataclass(frozen=True, slots=True)
class TemperatureTest(JsonResult):
    """The two-sample temperature test of a window against the reference T was fitted on.

    ``temperature`` is the deployed T at which both were summed. ``window_temperature`` (with
    its ``confidence_level`` interval) is the window's NLL-optimal T, ``reference_temperature``
    the reference's (T itself when T was fitted on it; NaN-free only with a reference), and
    ``ratio`` = T_w / T_ref with its interval. ``log_ratio`` / ``standard_error`` is ``z`` (signed:
    > 0 over-confident). ``p_value`` tests the shift beyond ``margin`` (T_w / T_ref outside
    [1/(1 + margin), 1 + margin]); ``drifted`` is ``p_value < level``. ``p_value_no_margin`` is the
    two-sided test of no shift at all. Without a reference (``reference_n == 0``) the window is
    tested against T as if T were known exactly, with its own sandwich variance.

    The equivalence test is the other side of the same statistic (two one-sided tests):
    ``equivalence_p_value`` tests that T_w / T_ref lies *inside* ``equivalence_margin`` (a margin
    of its own, wider than the drift side's: a shift too small for a refit to gain anything),
    ``within_margin`` is ``equivalence_p_value < equivalence_level`` — calibration within the equivalence
    margin established by the data. A
    window neither drifted nor within the margin is undetermined: :meth:`rows_to_decide` says
    how many labelled rows a window of this kind would need for one of the two to hold.

    The window's interval (``window_temperature_low``/``_high``) is its own sandwich interval;
    the test's ``window_standard_error`` is the score test's, from the window's information
    Σh times ``information_ratio`` (the reference's score variance over its mean curvature:
    1 for a model that is the truth), see the module docstring.

    ``expected_errors`` is the window's Σ(1 − c) at T, ``reference_expected_errors`` the
    reference's (NaN when unknown). When either is below ``min_expected_errors``
    (``enough_errors`` False) the normal approximation does not hold: the estimates are
    reported, the p-values are NaN and the test does not fire ("not enough errors to test T").
    An unknown count (NaN) does not gate.
    """

    temperature: float
    n: int
    window_temperature: float
    window_temperature_low: float
    window_temperature_high: float
    reference_n: int
    reference_temperature: float
    ratio: float
    ratio_low: float
    ratio_high: float
    log_ratio: float
    standard_error: float
    window_standard_error: float
    reference_standard_error: float
    z: float
    margin: float
    margin_z: float
    p_value: float
    p_value_no_margin: float
    level: float
    drifted: bool
    direction: Direction
    confidence_level: float
    information_ratio: float
    expected_errors: float
    reference_expected_errors: float
    min_expected_errors: float
    enough_errors: bool
    equivalence_p_value: float = math.nan
    within_margin: bool = False
    equivalence_margin: float = math.nan
    equivalence_level: float = math.nan

    def rows_to_decide(self) -> int | None:
        """The labelled rows a window would need for this test to decide — drift, or within the
        equivalence margin — at its level, when the window's T stayed where this one's is; None
        when decided, or when no window can decide (the reference's own uncertainty alone is too
        wide, the estimate sits on a margin, or the test could not run).

        The window's variance shrinks as 1/n: n × (SE_w / SE_w needed)², where the needed SE
        puts the interval's end at a margin, |log T_w / T_ref| − log(1 + margin) = z · SE (drift)
        or log(1 + equivalence margin) − |log T_w / T_ref| = z · SE (calibrated); the fewer of the two.
        """
        if self.drifted or self.within_margin or not self.enough_errors or not math.isfinite(self.margin_z):
            return None
        if not self.window_standard_error > 0.0:
            return None
        size = abs(self.log_ratio)
        sides = [(size - math.log1p(self.margin), self.level)]
        if math.isfinite(self.equivalence_margin):
            sides.append((math.log1p(self.equivalence_margin) - size, self._equivalence_level()))
        candidates = []
        for distance, level in sides:
            needed = ((distance / float(ndtri(1.0 - level))) ** 2 - self.reference_standard_error ** 2
                      if distance > 0.0 else 0.0)
            if needed > 0.0:
                candidates.append(max(self.n + 1, math.ceil(self.n * self.window_standard_error ** 2 / needed)))
        return min(candidates) if candidates else None

    def _rows_clause(self) -> str:
        rows = self.rows_to_decide()
        if rows is not None:
            return f"; about {rows:,} labelled rows would decide ({rows - self.n:,} more)"
        return ("; no window decides at this estimate: the reference's own interval is too wide for the margins "
                "(a reference of more rows, or a wider equivalence margin)" if self.reference_n else "")

    def _beyond(self) -> str:
        return f" beyond the {self.margin:.0%} margin" if self.margin else ""

    def _equivalence(self) -> float:
        return self.equivalence_margin if math.isfinite(self.equivalence_margin) else self.margin

    def _equivalence_level(self) -> float:
        return self.equivalence_level if math.isfinite(self.equivalence_level) else self.level

    def minimal_detectable_shift(self, power: float = 0.95) -> DetectableShift:
        """The smallest shift of T this test detects with probability ``power``, from its own SE.

        The same formula as :func:`minimal_detectable_shift`, with the standard error this
        check actually had: what a report shows as "this check could see a shift of ±X %".

        Raises
        ------
        ValueError
            If ``power`` is not in (0, 1).
        """
        power = check_confidence_level(power, name="power")
        detectable = self.enough_errors and math.isfinite(self.standard_error) and self.standard_error > 0
        return _detectable_shift(self.n, self.reference_n, self.standard_error if detectable else math.nan,
                                 self.expected_errors, margin=self.margin, level=self.level, power=power)

    def sentence(self, what: str = "window") -> str:
        """One line with the numbers, for a report's reasons."""
        if not math.isfinite(self.z):
            return f"{what} temperature test not computed (n={self.n}: no information about T)"
        versus = (f"the reference's {self.reference_temperature:.4g} (n={self.reference_n})"
                  if self.reference_n else f"the deployed {self.temperature:.4g} (no reference variance)")
        if not self.enough_errors:
            short = (f"the {what} expects {self.expected_errors:.3g} errors at T"
                     if self.expected_errors < self.min_expected_errors
                     else f"the reference expects {self.reference_expected_errors:.3g} errors at T")
            verdict = (f"not enough errors to test T: {short} and the test needs at least "
                       f"{self.min_expected_errors:.3g} in each (a few confident errors would carry its sum; "
                       "more rows give enough)")
        else:
            verdict = (
                f"shifted{self._beyond()} (p = {_fmt_p(self.p_value)} < {_fmt_p(self.level)}): "
                f"{self.direction}, T should {'grow' if self.log_ratio > 0 else 'shrink'}"
                if self.drifted
                else f"within the {self._equivalence():.0%} equivalence margin, established (equivalence p = "
                f"{_fmt_p(self.equivalence_p_value)} < {_fmt_p(self._equivalence_level())})"
                if self.within_margin
                else f"not shifted{self._beyond()} (p = {_fmt_p(self.p_value)}) nor established within the "
                f"{self._equivalence():.0%} equivalence margin (equivalence p = "
                f"{_fmt_p(self.equivalence_p_value)}): undetermined{self._rows_clause()}"
            )
        return (
            f"{what} optimal T {self.window_temperature:.4g} [{self.window_temperature_low:.4g}, "
            f"{self.window_temperature_high:.4g}] vs {versus}: ratio {self.ratio:.3f} "
            f"[{self.ratio_low:.3f}, {self.ratio_high:.3f}], z = {self.z:+.2f}, {verdict}"
        )


def _check_margin(margin: float) -> float:
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.integer, np.floating)) or not (
        0.0 <= float(margin) < 1.0
    ):
        raise ValueError(f"margin must be a number in [0, 1) (a relative shift of T, e.g. 0.05); got {margin!r}")
    return float(margin)


def _check_min_expected_errors(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not (
        0.0 <= float(value) < math.inf
    ):
        raise ValueError(
            f"min_expected_errors must be a finite number >= 0 (the fewest errors a window must expect at T to be "
            f"tested, e.g. 10; 0 tests every window); got {value!r}"
        )
    return float(value)


def _fmt_p(p: float) -> str:
    return f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


def temperature_test(
    window: TemperatureStats,
    reference: TemperatureStats | None = None,
    *,
    margin: float = _DEFAULT_MARGIN,
    level: float = 0.01,
    confidence_level: float = 0.95,
    min_expected_errors: float = _DEFAULT_MIN_EXPECTED_ERRORS,
    equivalence_margin: float = _DEFAULT_EQUIVALENCE_MARGIN,
    equivalence_level: float = _DEFAULT_EQUIVALENCE_LEVEL,
) -> TemperatureTest:
    """Test whether the window's optimal T moved away from the reference's (by more than a margin),
    and whether the data establish it within the equivalence margin.

    Parameters
    ----------
    window : TemperatureStats
        The window's sums at the deployed T.
    reference : TemperatureStats, optional
        The reference's sums (the rows T was fitted on) at the same T. Without it the window
        is tested against T as if T had no estimation error (a one-sample test: more false
        alarms on small references).
    margin : float, default=0.03
        The shift of T the drift side requires, relative: 0.03 flags T_w / T_ref only beyond 1.03
        or below 1 / 1.03 (a refit gains nothing measurable below it); 0 tests "T moved". In [0, 1).
    level : float, default=0.01
        Significance level, in (0, 1).
    confidence_level : float, default=0.95
        Level of the reported intervals, in (0, 1).
    min_expected_errors : float, default=5
        Fewest errors the window and the reference must each expect at T (Σ(1 − confidence))
        for the window to be tested; below it the result says "not enough errors to test T"
        and does not fire (module docstring, "Rare errors"). 0 tests every window. At least 0.
    equivalence_margin : float, default=0.10
        The shift of T within which calibration counts as established: ``within_margin`` when the
        (1 − 2 level) interval of T_w / T_ref lies inside [1/(1 + equivalence_margin),
        1 + equivalence_margin] (two one-sided tests). The default is the shift whose refit gains
        nothing worth having on fresh traffic (docs/statistics.md, "The margins"). In [0, 1).
    equivalence_level : float, default=0.05
        Level of the equivalence test: the chance of calling a window calibrated whose T is off
        by exactly the equivalence margin. In (0, 1).

    Returns
    -------
    TemperatureTest

    Raises
    ------
    TypeError
        If ``window`` or ``reference`` is not a :class:`TemperatureStats`.
    ValueError
        If the two were summed at different temperatures, or a level, the margin or
        ``min_expected_errors`` is out of range.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> logits = 3.0 * rng.normal(size=(4000, 5))
    >>> def labels_at(t):  # labels drawn from softmax(logits / t)
    ...     p = np.exp(logits / t); p /= p.sum(axis=1, keepdims=True)
    ...     return (rng.random((4000, 1)) > p.cumsum(axis=1)).sum(axis=1).clip(0, 4)
    >>> reference = TemperatureStats.from_logits(logits[:2000], labels_at(1.0)[:2000])
    >>> same = temperature_test(TemperatureStats.from_logits(logits[2000:], labels_at(1.0)[2000:]), reference)
    >>> same.drifted
    False
    >>> hotter = temperature_test(TemperatureStats.from_logits(logits[2000:], labels_at(1.5)[2000:]), reference)
    >>> hotter.drifted, hotter.direction, round(hotter.ratio, 2), round(hotter.p_value, 6)
    (True, 'over-confident', 1.38, 0.0)
    >>> sure = 4.0 * logits[2000:2050]  # 50 very confident rows: 3.3 errors expected at T
    >>> few = temperature_test(TemperatureStats.from_logits(sure, sure.argmax(axis=1)), reference)
    >>> few.drifted, few.enough_errors, round(few.expected_errors, 1)
    (False, False, 3.3)
    """
    if not isinstance(window, TemperatureStats):
        raise TypeError(f"window must be TemperatureStats; got {type(window).__name__}")
    if reference is not None and not isinstance(reference, TemperatureStats):
        raise TypeError(f"reference must be TemperatureStats or None; got {type(reference).__name__}")
    if reference is not None and not math.isclose(reference.temperature, window.temperature, rel_tol=1e-9):
        raise ValueError(
            f"the reference was summed at T = {reference.temperature!r} and the window at T = {window.temperature!r}; "
            "both must be read at the deployed T"
        )
    margin, equivalence_margin = _check_margin(margin), _check_margin(equivalence_margin)
    min_expected_errors = _check_min_expected_errors(min_expected_errors)
    level, equivalence_level = (check_confidence_level(level, name="level"),
                                check_confidence_level(equivalence_level, name="equivalence_level"))
    confidence_level = check_confidence_level(confidence_level)

    has_reference = reference is not None and reference.n >= 2 and reference.curvature_sum > 0
    own_se = window.log_temperature_standard_error()
    information_ratio = math.nan
    window_se = own_se
    if reference is not None and has_reference:
        # The score test's variance for the window: its own information Σh (from its confidences
        # alone: no label noise), scaled by the reference's ratio of score variance to information.
        information_ratio = reference.gradient_variance / (reference.curvature_sum / reference.n)
        if window.n:
            window_se = window.log_temperature_standard_error(information_ratio * window.curvature_sum / window.n)
    if reference is not None and has_reference:
        reference_shift = reference.log_temperature_shift
        reference_se = reference.log_temperature_standard_error()
    else:
        reference_shift, reference_se = 0.0, 0.0
    log_ratio = window.log_temperature_shift - reference_shift
    se = math.hypot(window_se, reference_se)
    log_margin = math.log1p(margin)
    defined = math.isfinite(log_ratio) and math.isfinite(se) and se > 0
    reference_errors = reference.expected_errors if reference is not None and has_reference else math.nan
    # NaN expected errors (sums kept without them) compare False: not gated on that side.
    enough_errors = not (window.expected_errors < min_expected_errors or reference_errors < min_expected_errors)
    z = log_ratio / se if defined else math.nan
    margin_z = (abs(log_ratio) - log_margin) / se if defined else math.nan
    tested = defined and enough_errors
    p_value = float(ndtr(-margin_z)) if tested else math.nan
    # Two one-sided tests: the larger p of "below the upper margin" and "above the lower one".
    equivalence_p = float(ndtr((abs(log_ratio) - math.log1p(equivalence_margin)) / se)) if tested else math.nan
    p_no_margin = float(2.0 * ndtr(-abs(z))) if tested else math.nan
    # In log space: a window that says next to nothing about T has ends at 0 and infinity.
    log_temperature = math.log(window.temperature)
    window_temperature, low, high = log_normal_interval(log_temperature + window.log_temperature_shift, own_se,
                                                        confidence_level)
    ratio, ratio_low, ratio_high = log_normal_interval(log_ratio, se if defined else math.nan, confidence_level)
    direction: Direction = "none" if not defined or log_ratio == 0 else (
        "over-confident" if log_ratio > 0 else "under-confident"
    )
    return TemperatureTest(
        temperature=window.temperature,
        n=window.n,
        window_temperature=window_temperature,
        window_temperature_low=low,
        window_temperature_high=high,
        reference_n=reference.n if reference is not None and has_reference else 0,
        reference_temperature=_exp(log_temperature + reference_shift),
        ratio=ratio,
        ratio_low=ratio_low,
        ratio_high=ratio_high,
        log_ratio=log_ratio,
        standard_error=se,
        window_standard_error=window_se,
        reference_standard_error=reference_se,
        z=z,
        margin=margin,
        margin_z=margin_z,
        p_value=p_value,
        p_value_no_margin=p_no_margin,
        level=level,
        drifted=bool(tested and p_value < level),
        direction=direction,
        confidence_level=confidence_level,
        information_ratio=information_ratio,
        expected_errors=window.expected_errors,
        reference_expected_errors=reference_errors,
        min_expected_errors=min_expected_errors,
        enough_errors=enough_errors,
        equivalence_p_value=equivalence_p,
        within_margin=bool(tested and equivalence_p < equivalence_level),
        equivalence_margin=equivalence_margin,
        equivalence_level=equivalence_level,
    )


# --------------------------------------------------------------------------- the minimal detectable shift


@dataclass(frozen=True, slots=True)
class DetectableShift(JsonResult):
    """The smallest shift of T that a check of ``window_n`` rows detects with probability ``power``.

    ``log_shift`` = log(1 + margin) + (z_{1 − level} + z_power) · ``standard_error``, the shift of
    log T at which the margin test's power is ``power`` (see :func:`minimal_detectable_shift`).
    ``increase`` = exp(log_shift) − 1: T_w / T_ref of 1 + increase or more is seen (an
    over-confident model); ``decrease`` = 1 − exp(−log_shift): T_w / T_ref of 1 − decrease or
    less is seen (under-confident). ``expected_errors`` is the errors the window expects at T
    (NaN when unknown); ``detectable`` is False when they are too few for the test to run (or
    the standard error is undefined): then the shifts are NaN — no shift can be seen.
    """

    window_n: int
    reference_n: int
    margin: float
    level: float
    power: float
    standard_error: float
    log_shift: float
    increase: float
    decrease: float
    expected_errors: float
    detectable: bool

    def sentence(self) -> str:
        """"this check could see a shift of T of +21 % / -17 % ...", for a report."""
        if not self.detectable:
            return (f"this check cannot see a shift of T: {self.window_n:,} rows"
                    + (f" expect {self.expected_errors:.3g} errors at T" if math.isfinite(self.expected_errors) else "")
                    + " (too little information about T to test it)")
        return (f"this check could see a shift of T of +{self.increase:.0%} / -{self.decrease:.0%} "
                f"({self.power:.0%} power at level {self.level:.2g}, margin {self.margin:.0%}; {self.window_n:,} rows "
                f"against a reference of {self.reference_n:,})")


def _detectable_shift(
    window_n: int, reference_n: int, standard_error: float, expected_errors: float, *, margin: float, level: float,
    power: float,
) -> DetectableShift:
    """The shift at which the margin test's power is ``power`` (inputs trusted; SE NaN: none)."""
    detectable = math.isfinite(standard_error) and standard_error > 0
    log_shift = (
        math.log1p(margin) + (float(ndtri(1.0 - level)) + float(ndtri(power))) * standard_error
        if detectable else math.nan
    )
    return DetectableShift(
        window_n=window_n,
        reference_n=reference_n,
        margin=margin,
        level=level,
        power=power,
        standard_error=standard_error,
        log_shift=log_shift,
        # Saturating: rows that say next to nothing about T (collapsed outputs) see no finite shift.
        increase=_exp(log_shift) - 1.0 if log_shift > 1.0 else math.expm1(log_shift),
        decrease=-math.expm1(-log_shift),
        expected_errors=expected_errors,
        detectable=detectable,
    )


def minimal_detectable_shift(
    reference: TemperatureStats,
    window_n: int,
    *,
    margin: float = _DEFAULT_MARGIN,
    level: float = 0.01,
    power: float = 0.95,
    min_expected_errors: float = _DEFAULT_MIN_EXPECTED_ERRORS,
) -> DetectableShift:
    """The smallest relative shift of T that :func:`temperature_test` on ``window_n`` rows detects.

    A window like the reference (the same information per row) is assumed. The test fires when
    (|d| − log(1 + margin)) / SE(d) > z_{1 − level}, d = log(T_w / T_ref) ~ N(θ, SE(d)²) for a
    true shift θ; its power is about Φ((|θ| − log(1 + margin)) / SE(d) − z_{1 − level}), so it
    reaches ``power`` at

        |θ| = log(1 + margin) + (z_{1 − level} + z_power) · SE(d),
        SE(d) = sqrt(SE_ref² + κ / (β² n h̄)),

    h̄ = Σh / n_ref the reference's information per row, κ its ratio of score variance to
    information, SE_ref its sandwich SE(log T) = sqrt(κ / (β² n_ref h̄)) at the T it was fitted
    at: so SE(d) ≈ SE_ref · sqrt(1 + n_ref / n). Validated against simulation on the six CIFAR
    files (docs/statistics.md, ``benchmarks/drift_study.py --detectable``).

    Parameters
    ----------
    reference : TemperatureStats
        The reference's sums at the deployed T (the rows T was fitted on): at least two rows.
    window_n : int
        Rows of the check's window, at least 1.
    margin, level, min_expected_errors
        As for :func:`temperature_test` (a window expecting fewer errors than
        ``min_expected_errors`` at the reference's rate, or a reference expecting fewer, is
        not tested: nothing is detectable).
    power : float, default=0.95
        Probability of detecting the shift, in (0, 1).

    Returns
    -------
    DetectableShift

    Raises
    ------
    TypeError
        If ``reference`` is not a :class:`TemperatureStats`.
    ValueError
        If the reference holds no information about T, or an argument is out of range.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> logits = 3.0 * rng.normal(size=(5000, 10))
    >>> p = np.exp(logits); p /= p.sum(axis=1, keepdims=True)
    >>> labels = (rng.random((5000, 1)) > p.cumsum(axis=1)).sum(axis=1).clip(0, 9)
    >>> reference = TemperatureStats.from_logits(logits, labels)
    >>> shift = minimal_detectable_shift(reference, 2000, level=0.005)
    >>> round(shift.increase, 3), round(shift.decrease, 3)
    (0.161, 0.139)
    >>> shift.sentence()
    'this check could see a shift of T of +16% / -14% (95% power at level 0.005, margin 3%; 2,000 rows against a reference of 5,000)'
    """
    if not isinstance(reference, TemperatureStats):
        raise TypeError(f"reference must be TemperatureStats; got {type(reference).__name__}")
    if not (reference.n >= 2 and reference.curvature_sum > 0 and math.isfinite(reference.gradient_variance)):
        raise ValueError(
            f"the reference must hold at least two rows with information about T (n >= 2, curvature_sum > 0); got "
            f"n={reference.n}, curvature_sum={reference.curvature_sum!r}"
        )
    window_n = check_count(window_n, name="window_n")
    margin = _check_margin(margin)
    level = check_confidence_level(level, name="level")
    power = check_confidence_level(power, name="power")
    min_expected_errors = _check_min_expected_errors(min_expected_errors)
    per_row_information = reference.curvature_sum / reference.n
    information_ratio = reference.gradient_variance / per_row_information
    beta = 1.0 / reference.temperature
    # The window's score-test SE at no shift (Σg = 0): sqrt(κ n h̄) / (β n h̄).
    window_se = math.sqrt(information_ratio / (window_n * per_row_information)) / beta
    standard_error = math.hypot(window_se, reference.log_temperature_standard_error())
    expected_errors = reference.expected_errors / reference.n * window_n
    if expected_errors < min_expected_errors or reference.expected_errors < min_expected_errors:
        standard_error = math.nan
    return _detectable_shift(window_n, reference.n, standard_error, expected_errors, margin=margin, level=level,
                             power=power)
