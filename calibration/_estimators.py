"""Estimators of the top-label calibration error, each with a confidence interval, from sums.

Every estimator here is a function of one :class:`ConfidenceHistogram`: for fixed bin edges
0 = e_0 < e_1 < ... < e_M = 1 on the top-label confidence c (bin m is (e_m, e_{m+1}],
confidence 0 in the first), three sums per bin over the rows that fall in it:

* ``count``           n_m = number of rows (int64, adds exactly);
* ``correct``         k_m = Σ [prediction = label] (int64, adds exactly);
* ``confidence_sum``  s_m = Σ c (float64, adds to float rounding).

Nothing else is summed. Two histograms with the same edges and temperature add up (``+``) to
the histogram of the union, so hourly windows make a daily one and chunks computed apart
merge; the estimates and their intervals are then computed from the sum. A
:class:`CalibrationStats` holds the same three sums for its equal-width bins, so the
monitor's window summaries give the binned estimators without another pass
(:meth:`ConfidenceHistogram.from_stats`). With a_m = k_m / n_m, conf_m = s_m / n_m,
gap_m = a_m - conf_m and N = Σ n_m:

``binned``
    The plug-in ECE of Guo et al. (2017), as :func:`expected_calibration_error`:
    Σ_m (n_m / N) |gap_m|. Biased upward on finite samples, most for a well-calibrated model
    (Kumar et al. 2019; Roelofs et al. 2022).
``debiased_l2``
    The debiased ℓ2 calibration error of Kumar, Liang and Ma (2019):
    CE² = Σ_m (n_m / N) [gap_m² - a_m (1 - a_m) / (n_m - 1)], a bin with fewer than two rows
    adding 0 (as their reference code does). The subtracted term is unbiased for the
    variance of a_m, so CE² is unbiased for the binned squared error Σ_m P_m (E[Y - C | m])²
    when the confidence is constant within each bin. ``squared_estimate`` is CE² as it is
    (below 0 when the noise exceeds the error); ``estimate`` is its root, clamped at 0.
``debiased_l1``
    The ℓ1 ECE with the per-bin normal-approximation bias correction of Kumar, Liang and Ma
    (2019; ``normal_debiased_ce`` in their code, which draws it by Monte Carlo): with
    v_m = a_m (1 - a_m) / n_m, Σ_m (n_m / N) [2 |gap_m| - E|N(gap_m, v_m)|], where
    E|N(μ, v)| = sqrt(2 v / π) exp(-μ² / 2v) + μ (1 - 2 Φ(-μ / sqrt v)) is taken in closed
    form. Not clamped: it can be slightly below 0 for a well-calibrated model, the price of
    removing the upward bias.
``smooth``
    The smooth ECE of Błasiok and Nakkiran (2023):
    smECE_σ = ∫_0^1 |(1/N) Σ_i K_σ(t, c_i)(y_i - c_i)| dt with the reflected Gaussian kernel
    K_σ(t, c) = Σ_{j ∈ Z} φ_σ(t - c - 2j) + φ_σ(t + c - 2j) (a probability density on [0, 1]
    for every c), at the automatic bandwidth: the fixed point σ* with smECE_σ* = σ*
    (unique, as smECE_σ does not increase with σ), floored at the grid's cell width. It is
    computed on a fine equal-width grid (:data:`SMOOTH_GRID_BINS` cells): each cell's rows
    sit at the cell's mean confidence s_m / n_m, their residual mass k_m - s_m is split
    linearly between the two grid points around it and mirrored at 0 and 1, and the
    convolution runs by FFT on the circle of circumference 2 (exact reflection). Against the
    defining sum over the rows, the discretisation changed smECE by at most 8.8e-6 on the
    CIFAR test-set logits of the test suite (2,000 cells; the tests hold it below 2e-5).

Intervals
---------
Every estimate gets a basic bootstrap interval (Davison and Hinkley 1997, section 5.2.1) over
the rows, drawn from the summed table alone, so it stays mergeable. A resample of the N rows
is a multinomial draw of N over the 2M (bin, wrong or right) categories with probabilities
(n_m - k_m) / N and k_m / N; a resampled bin keeps its mean confidence
(s*_m = n*_m s_m / n_m: the spread of confidence within a bin, at most a bin width, is not
resampled). The estimator (for ``smooth`` with its own σ*) is recomputed on each resample.
With θ̂ the estimate, θ̃ the estimated quantity on the sample's own distribution (the
plug-in: θ̂ itself for ``binned`` and ``smooth``, the plug-in binned ECE for ``debiased_l1``,
the plug-in Σ_m (n_m / N) gap_m² for ``debiased_l2``) and q_p the p-quantile of the resampled
estimates, the interval is [θ̂ - (q_{1-α/2} - θ̃), θ̂ - (q_{α/2} - θ̃)], its ends clamped at 0
(every estimated quantity is >= 0). It takes off the bias the resamples show, which the
percentile interval [q_{α/2}, q_{1-α/2}] does not; so for the biased ``binned`` estimator
the interval can lie below the estimate. Coverage by simulation at a model whose log-odds are
1.25 times too large (tests/calibration/test_estimators.py, 400 runs of 2,000 rows):
``binned`` 92.75% (the percentile interval: 72.5%), ``debiased_l1`` 94.5%, ``debiased_l2``
97.5%; ``smooth`` 94.5% of 200 runs of 10,000 rows but 89% of 400 runs of 2,000 rows.
Resamples run in blocks of bounded memory; the draws depend only on the data, the settings
and ``seed``.

At the boundary
---------------
For a calibrated model every estimated quantity is 0, the edge of what it can be, and an
estimate biased upward with a bias-corrected interval around it rarely reaches it (the basic
interval held 0 in 45–54 % of runs for ``binned``, 68–82 % for ``debiased_l1`` and 0–7 % for
``smooth``). So each estimate also gets ``p_calibrated``: the share of estimates at least as
large among draws of a perfectly calibrated model with the histogram's counts and mean
confidences (each bin's correct count drawn Binomial(n_m, s_m / n_m): the consistency
resampling of Vaicenavicius et al. 2019, from the sums alone), with the Monte Carlo
convention (1 + hits) / (1 + draws). When it is above α/2, 0 is not rejected and the
interval's low end is 0: the interval then holds 0 at a calibrated model in at least
1 - α/2 of samples. Away from the boundary the basic interval stands. For ``smooth`` it is
an interval of the smooth ECE at the sample's own automatic bandwidth, whose bias the
resamples do not show; the result's ``method`` says so (measured coverage: docs/statistics.md
of the repository, and benchmarks/estimator_coverage.py).

Equal-mass bins are mergeable only with edges fixed in advance (for instance
:func:`equal_mass_edges` of a reference set, passed as ``edges``); :func:`calibration_error`
with ``scheme="equal-mass"`` takes them from the data it is given, as
``uncertainty-calibration``'s ``get_equal_bins`` does.

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
Kumar, Liang, Ma. "Verified Uncertainty Calibration". NeurIPS 2019.
Roelofs, Cain, Shlens, Mozer. "Mitigating Bias in Calibration Error Estimation". AISTATS 2022.
Błasiok, Nakkiran. "Smooth ECE: Principled Reliability Diagrams via Kernel Smoothing".
arXiv:2309.12236, 2023.
Davison, Hinkley. "Bootstrap Methods and their Application". Cambridge University Press, 1997.
Vaicenavicius, Widmann, Andersson, Lindsten, Roll, Schön. "Evaluating model calibration in
classification". AISTATS 2019.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr

from ._defaults import ESTIMATORS
from ._evidence import _blocks
from ._scored import ScoredSet, checked_data
from ._scores import TopLabelScores
from ._serialise import JsonResult
from ._softmax import top_label
from ._stats import CalibrationStats, equal_width_edges
from ._validation import (
    MAX_BINS,
    MAX_RESAMPLES,
    check_confidence_level,
    check_count,
    check_n_bins,
    check_scheme,
    check_temperature,
)

__all__ = [
    "ESTIMATORS",
    "SMOOTH_GRID_BINS",
    "CalibrationErrorEstimate",
    "ConfidenceHistogram",
    "calibration_error",
    "calibration_error_from_stats",
    "calibration_errors",
    "equal_mass_edges",
]

# Cells of the smooth ECE's grid (and the fewest it accepts): cell width 5e-4, so the
# bandwidth floor is 5e-4 and the discretisation error stays below 2e-5 (module docstring).
SMOOTH_GRID_BINS = 2000

_CONVENTIONS = {
    "binned": "plug-in ECE: sum over bins of n_m/N |accuracy_m - confidence_m| (Guo et al. 2017); "
    "biased upward on finite samples",
    "debiased_l2": "debiased l2 calibration error (Kumar, Liang, Ma 2019): CE^2 = sum over bins of "
    "n_m/N [(confidence_m - accuracy_m)^2 - accuracy_m (1 - accuracy_m)/(n_m - 1)], bins with < 2 rows add 0; "
    "estimate = sqrt(CE^2) clamped at 0, squared_estimate = CE^2 unclamped",
    "debiased_l1": "debiased l1 ECE: sum over bins of n_m/N [2 |gap_m| - E|N(gap_m, accuracy_m (1 - accuracy_m)/n_m)|],"
    " the normal-approximation bias correction of Kumar, Liang, Ma 2019 in closed form; not clamped (can be < 0)",
    "smooth": "smooth ECE (Blasiok & Nakkiran 2023): integral over [0, 1] of |kernel-smoothed residual|, reflected "
    "Gaussian kernel, bandwidth the fixed point smECE(sigma) = sigma unless given",
}
# What an interval is of, where it is not of the population value (measured coverage in the
# module docstring): appended to the method.
_CAVEATS = {
    "binned": "; away from 0 it covered the population binned ECE in 0.88-0.91 of runs for a nominal 0.95 "
    "(500-10,000 rows of models with log-odds 1.25-1.5 times too large)",
    "debiased_l1": "; away from 0 it covered the population binned ECE in 0.88-0.92 of runs for a nominal 0.95 "
    "(500-10,000 rows of models with log-odds 1.25-1.5 times too large)",
    "smooth": "; away from 0 an interval of the smooth ECE at the sample's own automatic bandwidth, whose bias the "
    "resamples do not show: it covered the population smooth ECE in 0.82-0.92 of runs for a nominal 0.95 "
    "(500-10,000 rows of models with log-odds 1.25-1.5 times too large; the fewer the rows, the less)",
}
# Bisection steps on log σ for the fixed point: the bracket [cell width, 1] shrinks to a
# relative width below 1e-5 (ln 2000 / 2**20 = 7e-6).
_BISECTION_STEPS = 20


@dataclass(frozen=True, slots=True)
class CalibrationErrorEstimate(JsonResult):
    """One estimate of the top-label calibration error with its confidence interval.

    ``estimate``, ``low`` and ``high`` are in probability units (an ECE of 0.05 means five
    points of accuracy). ``squared_estimate`` is the unclamped CE² of ``debiased_l2`` (None
    for the others); ``bandwidth`` the kernel σ of ``smooth`` (None for the others).
    ``binning`` states the bins (or grid), ``convention`` the formula and ``method`` how
    the interval was made (and, for ``smooth``, what it is an interval of). ``p_calibrated`` is
    the share of estimates at least this large among draws of a perfectly calibrated model
    with the same confidences (consistency resampling): when it is above
    (1 − ``confidence_level``) / 2 the interval's low end is 0. An empty histogram gives NaN
    (``null`` in JSON).
    """

    estimator: str
    estimate: float
    low: float
    high: float
    confidence_level: float
    n: int
    n_bins: int
    temperature: float
    binning: str
    convention: str
    method: str
    squared_estimate: float | None
    bandwidth: float | None
    p_calibrated: float


@dataclass(frozen=True, slots=True, eq=False)
class ConfidenceHistogram:
    """Per-bin count, correct count and confidence sum of the top-label confidence.

    Bin m is (edges[m], edges[m + 1]] (confidence 0 in the first). ``+`` merges two
    histograms with the same edges and temperature: the sums add. Build one per chunk with
    :meth:`from_logits`, :meth:`from_scores` or :meth:`from_confidence`, or take a
    :class:`CalibrationStats` with :meth:`from_stats`.

    Examples
    --------
    >>> logits = np.log([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]])
    >>> whole = ConfidenceHistogram.from_logits(logits, [1, 0, 0], n_bins=3)
    >>> whole.count.tolist(), whole.correct.tolist()
    ([0, 1, 2], [0, 0, 2])
    >>> parts = ConfidenceHistogram.from_logits(logits[:1], [1], n_bins=3) + ConfidenceHistogram.from_logits(
    ...     logits[1:], [0, 0], n_bins=3)
    >>> parts == whole
    True
    """

    edges: NDArray[np.float64]
    count: NDArray[np.int64]
    correct: NDArray[np.int64]
    confidence_sum: NDArray[np.float64]
    temperature: float

    @classmethod
    def from_logits(
        cls,
        logits: ArrayLike | ScoredSet,
        labels: ArrayLike | None = None,
        *,
        temperature: float = 1.0,
        n_bins: int = 15,
        edges: ArrayLike | None = None,
    ) -> ConfidenceHistogram:
        """Summarise one chunk of logits and labels at ``temperature``: one top-label pass.

        Parameters
        ----------
        logits : array of shape (n_samples, n_classes), or ScoredSet
            A validated :class:`ScoredSet` stands for logits and labels (pass no ``labels``)
            and is not checked again.
        labels : array of shape (n_samples,)
            True classes in [0, n_classes).
        temperature : float, default=1.0
            T > 0; the logits are divided by it before the softmax.
        n_bins : int, default=15
            Equal-width bins (m/M, (m+1)/M] when ``edges`` is not given.
        edges : array of shape (n_bins + 1,), optional
            Bin edges from 0 to 1, strictly increasing (e.g. :func:`equal_mass_edges` of a
            reference set); ``n_bins`` is then ignored.

        Returns
        -------
        ConfidenceHistogram

        Raises
        ------
        ValueError
            If the logits, labels, temperature, ``n_bins`` or ``edges`` break their rules.
        TypeError
            If the logits or labels are not numeric.

        Examples
        --------
        >>> ConfidenceHistogram.from_logits(np.log([[0.2, 0.8]]), [1], n_bins=2).correct.tolist()
        [0, 1]
        """
        checked, checked_labels = checked_data(logits, labels)
        temperature = check_temperature(temperature)
        bin_edges = _edges(n_bins, edges)
        predictions, confidence = top_label(checked, temperature)
        return _histogram(confidence, predictions == checked_labels, bin_edges, temperature)

    @classmethod
    def from_scores(
        cls, scores: TopLabelScores, *, n_bins: int = 15, edges: ArrayLike | None = None
    ) -> ConfidenceHistogram:
        """Summarise per-row :class:`TopLabelScores` (no pass over the logits), at their temperature.

        Parameters
        ----------
        scores : TopLabelScores
            Confidence and correctness of each row (the monitor's one pass over a window).
        n_bins, edges
            As for :meth:`from_logits`.

        Examples
        --------
        >>> scores = TopLabelScores.from_logits(np.log([[0.3, 0.7], [0.9, 0.1]]), [1, 1])
        >>> ConfidenceHistogram.from_scores(scores, n_bins=2).count.tolist()
        [0, 2]
        """
        return _histogram(scores.confidence, scores.correct, _edges(n_bins, edges), scores.temperature)

    @classmethod
    def from_confidence(
        cls,
        confidence: ArrayLike,
        correct: ArrayLike,
        *,
        n_bins: int = 15,
        edges: ArrayLike | None = None,
        temperature: float = 1.0,
    ) -> ConfidenceHistogram:
        """Summarise top-label confidences and whether each prediction was right.

        Parameters
        ----------
        confidence : array of shape (n_samples,)
            Top-label confidences in [0, 1].
        correct : array of shape (n_samples,)
            True (or 1) where the top-label prediction is the label, else False (or 0).
        n_bins, edges
            As for :meth:`from_logits`.
        temperature : float, default=1.0
            The temperature the confidences were computed at; only compared when merging.

        Raises
        ------
        ValueError
            If the arrays are not 1-D of one length, a confidence is outside [0, 1] or not
            finite, or a ``correct`` value is not 0 or 1.
        TypeError
            If an array is not numeric or boolean.

        Examples
        --------
        >>> ConfidenceHistogram.from_confidence([0.9, 0.6, 0.95], [1, 0, 1], n_bins=2).count.tolist()
        [0, 3]
        """
        values, hits = _check_rows(confidence, correct)
        return _histogram(values, hits, _edges(n_bins, edges), check_temperature(temperature))

    @classmethod
    def from_stats(cls, stats: CalibrationStats) -> ConfidenceHistogram:
        """The histogram of a :class:`CalibrationStats` (its equal-width bins; lossless here).

        Examples
        --------
        >>> stats = CalibrationStats.from_logits(np.log([[0.3, 0.7], [0.9, 0.1]]), [1, 1], n_bins=2)
        >>> ConfidenceHistogram.from_stats(stats) == ConfidenceHistogram.from_logits(
        ...     np.log([[0.3, 0.7], [0.9, 0.1]]), [1, 1], n_bins=2)
        True
        """
        return cls(
            edges=equal_width_edges(stats.n_bins),
            count=stats.bin_count.astype(np.int64),
            correct=stats.bin_correct.astype(np.int64),
            confidence_sum=stats.bin_confidence_sum.astype(np.float64),
            temperature=stats.temperature,
        )

    @classmethod
    def empty(
        cls, *, n_bins: int = 15, edges: ArrayLike | None = None, temperature: float = 1.0
    ) -> ConfidenceHistogram:
        """The histogram of no rows: the neutral element of ``+``.

        >>> ConfidenceHistogram.empty(n_bins=4).n
        0
        """
        bin_edges = _edges(n_bins, edges)
        size = bin_edges.shape[0] - 1
        return cls(
            edges=bin_edges,
            count=np.zeros(size, dtype=np.int64),
            correct=np.zeros(size, dtype=np.int64),
            confidence_sum=np.zeros(size),
            temperature=check_temperature(temperature),
        )

    def __add__(self, other: ConfidenceHistogram) -> ConfidenceHistogram:
        if not isinstance(other, ConfidenceHistogram):
            return NotImplemented
        if not np.array_equal(self.edges, other.edges):
            raise ValueError(
                f"cannot merge confidence histograms with different bin edges ({self.n_bins} and {other.n_bins} "
                "bins, or the same number at other places); build every chunk with the same n_bins or edges"
            )
        if self.temperature != other.temperature:
            raise ValueError(
                f"cannot merge confidence histograms with different temperature: {self.temperature!r} and "
                f"{other.temperature!r}"
            )
        return ConfidenceHistogram(
            edges=self.edges,
            count=self.count + other.count,
            correct=self.correct + other.correct,
            confidence_sum=self.confidence_sum + other.confidence_sum,
            temperature=self.temperature,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfidenceHistogram):
            return NotImplemented
        return bool(
            self.temperature == other.temperature
            and np.array_equal(self.edges, other.edges)
            and np.array_equal(self.count, other.count)
            and np.array_equal(self.correct, other.correct)
            and np.allclose(self.confidence_sum, other.confidence_sum, rtol=1e-12, atol=1e-9)
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def n(self) -> int:
        """Rows summarised."""
        return int(self.count.sum())

    @property
    def n_bins(self) -> int:
        """Number of bins (cells of the grid for the smooth ECE)."""
        return int(self.count.shape[0])

    @property
    def scheme(self) -> str:
        """"equal-width" when the edges are m/M (as :class:`CalibrationStats`' bins), else "edges given"."""
        return "equal-width" if np.array_equal(self.edges, equal_width_edges(self.n_bins)) else "edges given"


def equal_mass_edges(confidence: ArrayLike, n_bins: int = 15) -> NDArray[np.float64]:
    """Edges of bins holding (about) equal numbers of the given confidences.

    The sorted confidences are split into ``n_bins`` runs of sizes differing by at most one
    (``numpy.array_split``); an edge is the midpoint between the last value of a run and the
    first of the next, and repeated edges are merged, so tied values never straddle two bins
    (fewer bins then). This is ``get_equal_bins`` of ``uncertainty-calibration``
    (Kumar, Liang, Ma 2019). Fix them on a reference set and pass them as ``edges`` to keep
    histograms of later chunks mergeable.

    Parameters
    ----------
    confidence : array of shape (n_samples,)
        Top-label confidences in [0, 1], at least one.
    n_bins : int, default=15
        Bins wanted (at most one per value).

    Returns
    -------
    array of shape (n_edges,)
        0, the interior edges, 1; strictly increasing.

    Examples
    --------
    >>> equal_mass_edges([0.6, 0.7, 0.8, 0.9], n_bins=2).tolist()
    [0.0, 0.75, 1.0]
    """
    values, _ = _check_rows(confidence, np.zeros(np.shape(confidence), dtype=bool))
    n_bins = check_n_bins(n_bins)
    ordered = np.sort(values)
    n, parts = ordered.shape[0], min(n_bins, ordered.shape[0])
    # Run sizes as numpy.array_split makes them: the first n % parts runs hold one more.
    sizes = np.full(parts, n // parts)
    sizes[: n % parts] += 1
    ends = np.cumsum(sizes)[:-1]
    interior = (ordered[ends - 1] + ordered[ends]) / 2.0
    return np.unique(np.concatenate([[0.0], interior, [1.0]]))


def calibration_error(
    logits: ArrayLike | ScoredSet,
    labels: ArrayLike | None = None,
    *,
    temperature: float = 1.0,
    estimator: str = "binned",
    n_bins: int = 15,
    scheme: str = "equal-width",
    bandwidth: float | None = None,
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> CalibrationErrorEstimate:
    """Top-label calibration error of softmax(logits / temperature), with an interval.

    A thin wrapper: one top-label pass builds the :class:`ConfidenceHistogram`, and the
    estimate follows from its sums as in :func:`calibration_error_from_stats` (see the
    module docstring for every estimator's formula and the interval).
    :func:`calibration_errors` gives several estimators from the same pass.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        A validated :class:`ScoredSet` stands for logits and labels (pass no ``labels``)
        and is not checked again.
    labels : array of shape (n_samples,)
        True classes in [0, n_classes).
    temperature : float, default=1.0
        T > 0; the logits are divided by it before the softmax.
    estimator : {"binned", "debiased_l2", "debiased_l1", "smooth"}, default="binned"
    n_bins : int, default=15
        Bins of the binned estimators. The smooth ECE always uses a grid of
        :data:`SMOOTH_GRID_BINS` equal-width cells.
    scheme : {"equal-width", "equal-mass"}, default="equal-width"
        Binning of the binned estimators: (m/M, (m+1)/M], or :func:`equal_mass_edges` of
        these confidences (not mergeable with other data; fix edges on a reference set for
        that).
    bandwidth : float, optional
        ``smooth`` only: a fixed kernel σ in (0, 1] instead of the automatic fixed point.
    confidence_level : float, default=0.95
        Coverage of the two-sided basic bootstrap interval, in (0, 1).
    n_resamples : int, default=1000
        Bootstrap resamples (>= 1).
    seed : int, default=0
        Seed of ``np.random.default_rng`` (>= 0).

    Returns
    -------
    CalibrationErrorEstimate

    Raises
    ------
    ValueError
        If an input or setting breaks its rule (the message names it).
    TypeError
        If the logits or labels are not numeric.

    Examples
    --------
    >>> logits = np.log([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]])
    >>> result = calibration_error(logits, [1, 0, 0], n_bins=3, n_resamples=200)
    >>> round(result.estimate, 6), result.estimator, result.n
    (0.333333, 'binned', 3)
    """
    (result,) = calibration_errors(
        logits, labels, temperature=temperature, estimators=(estimator,), n_bins=n_bins, scheme=scheme,
        bandwidth=bandwidth, confidence_level=confidence_level, n_resamples=n_resamples, seed=seed,
    )
    return result


def calibration_errors(
    logits: ArrayLike | ScoredSet,
    labels: ArrayLike | None = None,
    *,
    temperature: float = 1.0,
    estimators: Sequence[str] = ESTIMATORS,
    n_bins: int = 15,
    scheme: str = "equal-width",
    bandwidth: float | None = None,
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[CalibrationErrorEstimate, ...]:
    """Several estimators of :func:`calibration_error` from one top-label pass.

    Parameters
    ----------
    estimators : sequence of {"binned", "debiased_l2", "debiased_l1", "smooth"}, default=all four
        One result per name, in this order.
    logits, labels, temperature, n_bins, scheme, bandwidth, confidence_level, n_resamples, seed
        As for :func:`calibration_error` (``bandwidth`` applies to ``smooth``).

    Returns
    -------
    tuple of CalibrationErrorEstimate
        One per name of ``estimators``.

    Raises
    ------
    ValueError
        If an input or setting breaks its rule, ``estimators`` is empty, or ``bandwidth`` is
        given without ``smooth``.
    TypeError
        If the logits or labels are not numeric, or ``estimators`` is a single string.

    Examples
    --------
    >>> logits = np.log([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]])
    >>> [result.estimator for result in calibration_errors(logits, [1, 0, 0], n_resamples=20)]
    ['binned', 'debiased_l2', 'debiased_l1', 'smooth']
    """
    checked, checked_labels = checked_data(logits, labels)
    temperature = check_temperature(temperature)
    settings = _Settings.each(estimators, bandwidth, confidence_level, n_resamples, seed)
    n_bins, scheme = check_n_bins(n_bins), check_scheme(scheme)
    predictions, confidence = top_label(checked, temperature)
    correct = predictions == checked_labels
    if scheme == "equal-mass":
        coarse = _histogram(confidence, correct, equal_mass_edges(confidence, n_bins), temperature)
        binning = f"{coarse.n_bins} equal-mass bins of these confidences (edges halfway between neighbouring runs)"
    else:
        coarse = _histogram(confidence, correct, equal_width_edges(n_bins), temperature)
        binning = _binning_text(coarse, "binned")
    # The smooth ECE's fine grid costs one more bincount, made only when it is asked for.
    fine = (
        _histogram(confidence, correct, equal_width_edges(SMOOTH_GRID_BINS), temperature)
        if any(each.estimator == "smooth" for each in settings)
        else coarse
    )
    return tuple(
        _estimate(fine, each, _binning_text(fine, "smooth")) if each.estimator == "smooth"
        else _estimate(coarse, each, binning)
        for each in settings
    )


def calibration_error_from_stats(
    stats: ConfidenceHistogram | CalibrationStats,
    *,
    estimator: str = "binned",
    bandwidth: float | None = None,
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> CalibrationErrorEstimate:
    """Top-label calibration error, with an interval, from summed statistics alone.

    The mergeable path: ``stats`` may be the sum of the histograms of many chunks. A
    :class:`CalibrationStats` is read through :meth:`ConfidenceHistogram.from_stats`.

    Parameters
    ----------
    stats : ConfidenceHistogram or CalibrationStats
        The sums. ``smooth`` needs an equal-width histogram of at least
        :data:`SMOOTH_GRID_BINS` bins.
    estimator : {"binned", "debiased_l2", "debiased_l1", "smooth"}, default="binned"
    bandwidth : float, optional
        ``smooth`` only: a fixed kernel σ in (0, 1] instead of the automatic fixed point.
    confidence_level : float, default=0.95
    n_resamples : int, default=1000
    seed : int, default=0

    Returns
    -------
    CalibrationErrorEstimate

    Raises
    ------
    ValueError
        If a setting breaks its rule, or ``smooth`` is asked of a coarse histogram.
    TypeError
        If ``stats`` is neither type.

    Examples
    --------
    >>> logits = np.log([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]])
    >>> stats = CalibrationStats.from_logits(logits, [1, 0, 0], n_bins=3)
    >>> result = calibration_error_from_stats(stats, estimator="debiased_l2", n_resamples=200)
    >>> round(result.squared_estimate, 6), round(result.estimate, 6)
    (0.026667, 0.163299)
    """
    if isinstance(stats, CalibrationStats):
        histogram = ConfidenceHistogram.from_stats(stats)
    elif isinstance(stats, ConfidenceHistogram):
        histogram = stats
    else:
        raise TypeError(f"stats must be a ConfidenceHistogram or CalibrationStats; got {type(stats).__name__}")
    (settings,) = _Settings.each((estimator,), bandwidth, confidence_level, n_resamples, seed)
    return _estimate(histogram, settings, _binning_text(histogram, estimator))


# --------------------------------------------------------------------------- checks


@dataclass(frozen=True, slots=True)
class _Settings:
    """The checked settings of one estimate."""

    estimator: str
    bandwidth: float | None
    confidence_level: float
    n_resamples: int
    seed: int

    @classmethod
    def each(
        cls, estimators: Sequence[str], bandwidth: float | None, confidence_level: float, n_resamples: int, seed: int
    ) -> tuple[_Settings, ...]:
        """The settings of each estimator named (``bandwidth`` goes to ``smooth``), checked."""
        if isinstance(estimators, str):
            raise TypeError(
                f"estimators must be a sequence of names, e.g. ({estimators!r},); got the string {estimators!r}"
            )
        names = tuple(estimators)
        if not names:
            raise ValueError(f"estimators is empty; name at least one of {ESTIMATORS}")
        for name in names:
            if name not in ESTIMATORS:
                raise ValueError(f"estimator must be one of {ESTIMATORS}; got {name!r}")
        if bandwidth is not None:
            if "smooth" not in names:
                raise ValueError(f"bandwidth applies to the smooth estimator only; got it with {names}")
            if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float, np.integer, np.floating)):
                raise TypeError(f"bandwidth must be a number in (0, 1] or None; got {bandwidth!r}")
            if not 0.0 < float(bandwidth) <= 1.0:
                raise ValueError(f"bandwidth must be in (0, 1] (or None for the automatic one); got {bandwidth}")
            bandwidth = float(bandwidth)
        level = check_confidence_level(confidence_level)
        resamples = check_count(n_resamples, name="n_resamples", maximum=MAX_RESAMPLES)
        seed = check_count(seed, name="seed", minimum=0)
        return tuple(
            cls(estimator=name, bandwidth=bandwidth if name == "smooth" else None, confidence_level=level,
                n_resamples=resamples, seed=seed)
            for name in names
        )


def _edges(n_bins: int, edges: ArrayLike | None) -> NDArray[np.float64]:
    """Equal-width edges for ``n_bins``, or the given ``edges`` checked."""
    if edges is None:
        return equal_width_edges(check_n_bins(n_bins))
    array = np.asarray(edges)
    if array.dtype.kind not in "iuf":
        raise TypeError(f"edges must be numbers from 0 to 1; got dtype {array.dtype}")
    array = array.astype(np.float64)
    if array.ndim != 1 or not 2 <= array.shape[0] <= MAX_BINS + 1:
        raise ValueError(f"edges must be 1-D with 2 to {MAX_BINS + 1:,} values (0, ..., 1); got shape {array.shape}")
    if array[0] != 0.0 or array[-1] != 1.0:
        raise ValueError(f"edges must start at 0 and end at 1; got {float(array[0])!r} ... {float(array[-1])!r}")
    steps = np.diff(array)
    if not (steps > 0.0).all():
        where = int(np.argmin(steps > 0.0))
        raise ValueError(
            f"edges must increase strictly; edge {where + 1} is {float(array[where + 1])!r} "
            f"after {float(array[where])!r}"
        )
    return array


def _check_rows(confidence: ArrayLike, correct: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Confidences as float64 in [0, 1] and ``correct`` as bool, one per row, or raise."""
    values = np.asarray(confidence)
    if values.dtype.kind not in "iuf":
        raise TypeError(f"confidence must hold numbers in [0, 1]; got dtype {values.dtype}")
    values = values.astype(np.float64)
    if values.ndim != 1 or values.shape[0] == 0:
        raise ValueError(f"confidence must be 1-D with at least one value; got shape {values.shape}")
    inside = np.isfinite(values) & (values >= 0.0) & (values <= 1.0)
    if not inside.all():
        row = int(np.argmin(inside))
        raise ValueError(f"confidence row {row} is {float(values[row])!r}; every confidence must be in [0, 1]")
    hits = np.asarray(correct)
    if hits.shape != values.shape:
        raise ValueError(f"correct must have one value per confidence ({values.shape[0]}); got shape {hits.shape}")
    if hits.dtype.kind not in "biuf":
        raise TypeError(f"correct must be booleans or 0/1; got dtype {hits.dtype}")
    binary = (hits == 0) | (hits == 1)
    if not binary.all():
        row = int(np.argmin(binary))
        raise ValueError(f"correct row {row} is {hits[row].item()!r}; it must be 0 or 1 (False or True)")
    return values, hits.astype(bool)


# --------------------------------------------------------------------------- histogram


def _histogram(
    confidence: NDArray[np.float64], correct: NDArray[np.bool_], edges: NDArray[np.float64], temperature: float
) -> ConfidenceHistogram:
    """Three bincounts over the rows (inputs trusted)."""
    size = edges.shape[0] - 1
    # side="left": a confidence equal to an edge goes to the bin that edge closes, (e_m, e_{m+1}].
    bins = np.searchsorted(edges[1:-1], confidence, side="left")
    return ConfidenceHistogram(
        edges=edges,
        count=np.bincount(bins, minlength=size).astype(np.int64),
        correct=np.bincount(bins, weights=correct, minlength=size).astype(np.int64),
        confidence_sum=np.bincount(bins, weights=confidence, minlength=size).astype(np.float64),
        temperature=temperature,
    )


# --------------------------------------------------------------------------- estimators
#
# Each estimator takes per-bin sums with a leading axis of resamples, shape (R, M), and
# returns one value per resample. Row 0 of the point estimate is the histogram itself.


def _binned(
    count: NDArray[np.float64], correct: NDArray[np.float64], conf: NDArray[np.float64]
) -> NDArray[np.float64]:
    result: NDArray[np.float64] = np.abs(correct - conf).sum(axis=1) / count.sum(axis=1)
    return result


def _plug_in_l2_squared(
    count: NDArray[np.float64], correct: NDArray[np.float64], conf: NDArray[np.float64]
) -> NDArray[np.float64]:
    gap = correct - conf
    with np.errstate(invalid="ignore", divide="ignore"):
        per_bin = np.where(count > 0, gap * gap / count, 0.0)
    result: NDArray[np.float64] = per_bin.sum(axis=1) / count.sum(axis=1)
    return result


def _debiased_l2_squared(
    count: NDArray[np.float64], correct: NDArray[np.float64], conf: NDArray[np.float64]
) -> NDArray[np.float64]:
    gap = correct - conf
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = correct / count
        # â(1 - â)/(n - 1) is unbiased for the variance a(1 - a)/n of the bin's accuracy.
        per_bin = np.where(count >= 2, gap * gap / count - count * accuracy * (1.0 - accuracy) / (count - 1.0), 0.0)
    result: NDArray[np.float64] = per_bin.sum(axis=1) / count.sum(axis=1)
    return result


def _debiased_l1(
    count: NDArray[np.float64], correct: NDArray[np.float64], conf: NDArray[np.float64]
) -> NDArray[np.float64]:
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(count > 0, correct / count, 0.0)
        gap = np.where(count > 0, accuracy - conf / count, 0.0)
        sd = np.sqrt(accuracy * (1.0 - accuracy) / np.maximum(count, 1.0))
        # E|N(μ, sd²)| in closed form; sd = 0 (a bin all right or all wrong) leaves |μ|.
        z = np.where(sd > 0, gap / sd, 0.0)
        folded = np.where(
            sd > 0,
            sd * math.sqrt(2.0 / math.pi) * np.exp(-0.5 * z * z) + gap * (1.0 - 2.0 * ndtr(-z)),
            np.abs(gap),
        )
    result: NDArray[np.float64] = (count * (2.0 * np.abs(gap) - folded)).sum(axis=1) / count.sum(axis=1)
    return result


# Each binned estimator and the plug-in of the quantity it estimates (the bootstrap's pivot).
_BINNED_FORMULAS = {
    "binned": (_binned, _binned),
    "debiased_l2": (_debiased_l2_squared, _plug_in_l2_squared),
    "debiased_l1": (_debiased_l1, _binned),
}


@dataclass(frozen=True, slots=True)
class _Grid:
    """Where each non-empty cell's residual mass lands on the circle of 2G grid points.

    Cell mass at its mean confidence p is split linearly between grid points j/G and
    (j+1)/G around p, and mirrored to -p (≡ 2 - p): four (index, weight) pairs per cell.
    """

    index: NDArray[np.intp]  # (4, C)
    weight: NDArray[np.float64]  # (4, C)
    size: int  # 2G
    floor: float  # the cell width 1/G: the narrowest bandwidth the grid resolves

    @classmethod
    def of(cls, positions: NDArray[np.float64], n_cells: int) -> _Grid:
        scaled = positions * n_cells
        left = np.clip(np.floor(scaled), 0, n_cells - 1).astype(np.intp)
        share = scaled - left
        size = 2 * n_cells
        index = np.stack([left, left + 1, (size - left) % size, (size - left - 1) % size])
        weight = np.stack([1.0 - share, share, 1.0 - share, share])
        return cls(index=index, weight=weight, size=size, floor=1.0 / n_cells)

    def spectrum(self, residual: NDArray[np.float64]) -> NDArray[np.complex128]:
        """rfft of the mirrored residual masses, one row per resample; residual is (R, C)."""
        rows = residual.shape[0]
        cells = (np.arange(rows)[:, None, None] * self.size + self.index[None, :, :]).ravel()
        masses = np.bincount(cells, weights=(residual[:, None, :] * self.weight[None, :, :]).ravel(),
                             minlength=rows * self.size).reshape(rows, self.size)
        return np.fft.rfft(masses, axis=1)

    def smooth_ece(self, spectrum: NDArray[np.complex128], bandwidth: NDArray[np.float64]) -> NDArray[np.float64]:
        """smECE at one bandwidth per row.

        The reflected kernel is a Gaussian on the circle of circumference 2, whose Fourier
        coefficient at frequency q is exp(-π² q² σ² / 2); by symmetry ∫_0^1 |r| is half the
        integral over the circle, a plain sum of the grid values (trapezoid on a circle).
        """
        frequency = np.arange(spectrum.shape[1])
        gain = np.exp(-0.5 * (math.pi * bandwidth[:, None] * frequency[None, :]) ** 2)
        smoothed = np.fft.irfft(spectrum * gain, n=self.size, axis=1)
        result: NDArray[np.float64] = 0.5 * np.abs(smoothed).sum(axis=1)
        return result

    def fixed_point(self, spectrum: NDArray[np.complex128]) -> NDArray[np.float64]:
        """σ* with smECE_σ* = σ* per row, by bisection on log σ in [cell width, 1].

        smECE_σ does not increase with σ (the heat kernel contracts L1), so σ - smECE_σ
        changes sign once; a row whose smECE at the floor is already below the floor
        (well-calibrated data) gets the floor.
        """
        rows = spectrum.shape[0]
        low = np.full(rows, math.log(self.floor))
        high = np.zeros(rows)
        for _ in range(_BISECTION_STEPS):
            middle = 0.5 * (low + high)
            above = self.smooth_ece(spectrum, np.exp(middle)) > np.exp(middle)
            low = np.where(above, middle, low)
            high = np.where(above, high, middle)
        at_floor = self.smooth_ece(spectrum, np.full(rows, self.floor)) <= self.floor
        return np.where(at_floor, self.floor, np.exp(0.5 * (low + high)))


# --------------------------------------------------------------------------- estimate


def _estimate(histogram: ConfidenceHistogram, settings: _Settings, binning: str) -> CalibrationErrorEstimate:
    """The estimate and its bootstrap interval (inputs trusted)."""
    estimator = settings.estimator
    if estimator == "smooth" and (histogram.n_bins < SMOOTH_GRID_BINS or histogram.scheme != "equal-width"):
        raise ValueError(
            f"the smooth estimator needs an equal-width grid of at least {SMOOTH_GRID_BINS:,} bins; got "
            f"{histogram.n_bins:,} {histogram.scheme} bins (build the histogram with n_bins=SMOOTH_GRID_BINS)"
        )
    filled = histogram.count > 0
    count = histogram.count[filled].astype(np.float64)
    correct = histogram.correct[filled].astype(np.float64)
    statistic = _Statistic.of(estimator, histogram.confidence_sum[filled] / count, histogram.n_bins,
                              settings.bandwidth)
    point = plug_in = bandwidth = low = high = p_calibrated = float("nan")
    if histogram.n:
        values, plug_ins, bandwidths = statistic(count[None, :], correct[None, :])
        point, plug_in, bandwidth = float(values[0]), float(plug_ins[0]), float(bandwidths[0])
        low, high = _basic_interval(statistic, count, correct, point, plug_in, settings)
        p_calibrated = _calibrated_p_value(statistic, count, point, settings)
        if p_calibrated > (1.0 - settings.confidence_level) / 2.0:
            # A calibrated model with these confidences shows an estimate this large often enough:
            # 0 is not rejected, so the interval reaches it (module docstring, "At the boundary").
            low = 0.0
    squared = None
    if estimator == "debiased_l2":
        # CE² may be below 0; its root is clamped at 0, and the interval of CE² maps to one
        # of the root through the same (monotone) clamped square root.
        squared = point
        point, low, high = (math.sqrt(max(value, 0.0)) if math.isfinite(value) else value
                            for value in (point, low, high))
    return CalibrationErrorEstimate(
        estimator=estimator,
        estimate=point,
        low=low,
        high=high,
        confidence_level=settings.confidence_level,
        n=histogram.n,
        n_bins=histogram.n_bins,
        temperature=histogram.temperature,
        binning=binning,
        convention=_CONVENTIONS[estimator],
        method=f"basic bootstrap (estimate minus the resampled error about the plug-in, clamped at 0): "
        f"{settings.n_resamples} multinomial resamples of the rows drawn from the per-bin sums, seed {settings.seed}; "
        f"the low end is 0 when p_calibrated > {(1.0 - settings.confidence_level) / 2.0:.3g} ({settings.n_resamples} "
        "draws of a perfectly calibrated model with these confidences)" + _CAVEATS.get(estimator, ""),
        squared_estimate=squared,
        bandwidth=bandwidth if estimator == "smooth" else None,
        p_calibrated=p_calibrated,
    )


@dataclass(frozen=True, slots=True)
class _Statistic:
    """An estimator as a function of the (count, correct) of the non-empty bins, resampled.

    The bins' mean confidences are held fixed (``mean_confidence``); ``grid`` is set for the
    smooth ECE, with ``bandwidth`` None for the automatic one.
    """

    estimator: str
    mean_confidence: NDArray[np.float64]
    grid: _Grid | None
    bandwidth: float | None

    @classmethod
    def of(
        cls, estimator: str, mean_confidence: NDArray[np.float64], n_cells: int, bandwidth: float | None
    ) -> _Statistic:
        grid = _Grid.of(mean_confidence, n_cells) if estimator == "smooth" else None
        return cls(estimator=estimator, mean_confidence=mean_confidence, grid=grid, bandwidth=bandwidth)

    @property
    def row_size(self) -> int:
        """Numbers held per resample (for the block size)."""
        cells = int(self.mean_confidence.shape[0])
        return 2 * cells if self.grid is None else 4 * cells + 2 * self.grid.size

    def __call__(
        self, count: NDArray[np.float64], correct: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Per row of (R, C) sums: the estimate, the plug-in of what it estimates (the same
        for ``binned`` and ``smooth``) and the bandwidth (NaN but for ``smooth``)."""
        if self.grid is None:
            estimate, plug_in = _BINNED_FORMULAS[self.estimator]
            confidence_sum = count * self.mean_confidence
            values = estimate(count, correct, confidence_sum)
            plug_ins = values if plug_in is estimate else plug_in(count, correct, confidence_sum)
            return values, plug_ins, np.full(count.shape[0], np.nan)
        residual = (correct - count * self.mean_confidence) / count.sum(axis=1, keepdims=True)
        spectrum = self.grid.spectrum(residual)
        sigma = self.grid.fixed_point(spectrum) if self.bandwidth is None else np.full(count.shape[0], self.bandwidth)
        values = self.grid.smooth_ece(spectrum, sigma)
        return values, values, sigma


def _basic_interval(
    statistic: _Statistic,
    count: NDArray[np.float64],
    correct: NDArray[np.float64],
    estimate: float,
    plug_in: float,
    settings: _Settings,
) -> tuple[float, float]:
    """Basic bootstrap interval over multinomial resamples of the rows, clamped at 0.

    The resampled estimates scatter about ``plug_in`` (the estimated quantity on the
    sample's own distribution) as the estimate scatters about the truth; subtracting their
    quantiles' offsets from ``estimate`` removes the bias the resamples show.
    """
    n = int(count.sum())
    rng = np.random.default_rng(settings.seed)
    # Categories: (bin, wrong) for every non-empty bin, then (bin, right).
    probabilities = np.concatenate([count - correct, correct]) / n
    cells = count.shape[0]
    values = []
    for block in _blocks(settings.n_resamples, statistic.row_size):
        draws = rng.multinomial(n, probabilities, size=block).astype(np.float64)
        values.append(statistic(draws[:, :cells] + draws[:, cells:], draws[:, cells:])[0])
    alpha = 1.0 - settings.confidence_level
    lower_quantile, upper_quantile = np.quantile(np.concatenate(values), [alpha / 2.0, 1.0 - alpha / 2.0])
    # Every estimated quantity is >= 0 (CE² included): an end below 0 is clamped.
    low = max(estimate - (float(upper_quantile) - plug_in), 0.0)
    high = max(estimate - (float(lower_quantile) - plug_in), 0.0)
    return low, high


def _calibrated_p_value(
    statistic: _Statistic, count: NDArray[np.float64], estimate: float, settings: _Settings
) -> float:
    """Share of estimates >= ``estimate`` when each bin's rows are right with their mean confidence.

    Consistency resampling (Vaicenavicius et al. 2019) from the sums: the bins' counts and
    mean confidences held, each bin's correct count drawn Binomial(n_m, conf_m). With the
    Monte Carlo convention (1 + hits) / (1 + draws), so it is never 0.
    """
    rng = np.random.default_rng((settings.seed, 1))
    hits = 0
    probability = np.clip(statistic.mean_confidence, 0.0, 1.0)
    for block in _blocks(settings.n_resamples, statistic.row_size):
        draws = rng.binomial(count.astype(np.int64), probability, size=(block, count.shape[0])).astype(np.float64)
        counts = np.broadcast_to(count, draws.shape)
        # A tolerance for float rounding: a draw equal to the estimate counts as at least as large.
        hits += int(np.sum(statistic(counts, draws)[0] >= estimate - 1e-12))
    return (1.0 + hits) / (1.0 + settings.n_resamples)


def _binning_text(histogram: ConfidenceHistogram, estimator: str) -> str:
    if estimator == "smooth":
        return (f"grid of {histogram.n_bins:,} equal-width cells; each cell's rows at its mean confidence, "
                "split linearly between neighbouring grid points")
    if histogram.scheme == "equal-width":
        return f"{histogram.n_bins} equal-width bins (m/M, (m+1)/M], confidence 0 in the first"
    return f"{histogram.n_bins} bins with given edges (e_m, e_m+1], confidence 0 in the first"
