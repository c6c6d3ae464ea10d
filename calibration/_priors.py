"""Label shift: the class priors of served traffic from unlabelled rows, their test, their correction.

Label shift is the change of the class mix p(y) with p(x | y) unchanged (a season, a new
customer). A calibrated model's posteriors then stay right *up to the priors*: the traffic's
posterior is p'(y | x) ∝ p(y | x) · w_y with w_y = π'_y / π_y, the new priors over the ones the
model was calibrated for. Everything here needs no label of the served rows.

What a version registers (:class:`ReferencePriors`, from its calibration part at its T)
------------------------------------------------------------------------------------------
``n``, the class counts, Σ p_i and Σ p_i p_iᵀ of the calibrated posteriors p_i = softmax(z_i / T),
and the confusion matrix (predicted × true class counts): 2 K + 2 K² numbers, mergeable (``+``).

* The **reference priors** π are the mean calibrated posterior Σ p_i / n, the priors the model
  itself believes in. Temperature scaling fits one scalar: it does not make each class's mean
  posterior equal that class's frequency, so starting EM from the class counts would report a
  "shift" on the reference itself (the class-wise calibration-in-the-large error of the model).
  Starting it from the mean posterior makes w = 1 the exact fixed point on the reference. This
  is the role the per-class bias terms of Alexandari, Kundaje & Shrikumar (2020, BCTS) play,
  without changing the served posteriors; docs/statistics.md measures both starts.
* The class counts give BBSE its priors, and the confusion matrix its C.

What a window keeps while it streams (:class:`ServedPriorStats`)
-----------------------------------------------------------------
Over **every** served row: n, Σ p_i (K) and the predicted-class counts (K) — exact and
mergeable; and a uniform sample of at most ``capacity`` posteriors (bottom-k by a uniform
random key per row: the union of two samples' bottom-k is the bottom-k of the union, so
samples merge exactly like sums). Memory: O(capacity · K) floats whatever the window's size;
per chunk of c rows O(c K) time. EM runs on the sample (I iterations of O(capacity · K));
the test runs on the sums of all rows.

The estimators
--------------
* **EM** (Saerens, Latinne & Decaestecker 2002), :func:`estimate_priors_em`: iterate
  q_i(y) ∝ p_i(y) w_y, π'_y ← mean_i q_i(y), w = π' / π. Each step raises the log-likelihood
  ℓ(w) = Σ_i log Σ_y p_i(y) w_y (reported relative to w = 1, with the iterations and whether
  it converged). Its covariance is the inverse observed information on the simplex. EM's
  convergence is linear and slow where the classes are hard to tell apart (CIFAR-100 LeNet-5:
  thousands of steps, stopping ~1e-5 short of the maximum); after 100 steps a safeguarded
  Newton step (the same bordered Hessian) precedes each EM step, which reaches the maximum in
  tens of steps.
* **BBSE** (Lipton, Wang & Smola 2018), :func:`estimate_priors_bbse`: μ = C π' with C the
  reference's P(ŷ | y) and μ the window's predicted-class distribution, so π' = C⁻¹ μ̂ (clipped
  at 0, renormalised); its covariance is the delta method's, the window's multinomial μ̂ and
  the reference's confusion columns both counted. It needs no calibration at all: an
  independent cross-check of EM.

The test (:func:`prior_shift_test`)
-----------------------------------
At w = 1 the score of EM's likelihood is U_y = n (m_y / π_y − 1), m the window's mean
posterior: a function of Σ p_i alone. The score test of w = 1 is therefore the two-sample test
of the mean posterior, d = m − π, against its covariance under no shift,
S (1 / n + 1 / n_ref), S the reference's covariance of p (the reference's own sampling error
counts, as in the temperature test): T² = dᵀ S⁺ d / (1 / n + 1 / n_ref), r the rank of S
(K − 1; Rao 1948). S is itself estimated from the reference's n_ref rows, so T² is read as
Hotelling's: (n_ref − r) T² / ((n_ref − 1) r) ~ F(r, n_ref − r), not χ²(r) — whose tail fired
in 2.2–3.3 % of unchanged 100-class CIFAR windows at level 0.01 (E[T²] = r (n_ref − 1) /
(n_ref − r − 2), 2 % above r there; 19 % at 0.05 with 20 classes and 200 reference rows,
``tests/calibration/test_priors.py``). It uses every row, needs no EM and no labels, and merges.
Its effect is the total-variation distance between EM's priors and the reference's, with an
interval from the estimate's normal approximation (the plug-in TV is biased upwards when n is
small against K: read it with its interval).

The correction (:func:`prior_corrected_log_probabilities`)
----------------------------------------------------------
log q = log softmax(z / T + log w), in log space (no product of probabilities is formed); the
same as :func:`prior_corrected_logits` z + T log w read at T, so every tool that reads logits
at T (the drift tests, the ECE, the NLL) reads the corrected model unchanged.

Cost in K
---------
Linear in K (and in the rows): the served rows' sums and sample, each EM step (O(s K) on the
sample's s rows), the correction. Quadratic in memory and cubic in time: the reference's two
K × K sums, the prior test (an eigendecomposition of the reference's covariance), EM's Newton
steps and covariance (solves and a pseudo-inverse of the bordered K × K information), the
effect's interval, and BBSE. So :meth:`ReferencePriors.from_logits` and
:func:`estimate_priors_bbse` take at most :data:`calibration.MAX_PRIOR_CLASSES` classes unless
told otherwise (``max_classes``), and refuse more before anything is summed.

References
----------
Saerens, Latinne, Decaestecker. "Adjusting the Outputs of a Classifier to New a Priori
Probabilities: A Simple Procedure". Neural Computation 14(1), 2002.
Lipton, Wang, Smola. "Detecting and Correcting for Label Shift with Black Box Predictors".
ICML 2018.
Alexandari, Kundaje, Shrikumar. "Maximum Likelihood with Bias-Corrected Calibration is
Hard-To-Beat at Label Shift Adaptation". ICML 2020.
Rao. "Large sample tests of statistical hypotheses concerning several parameters". Proc.
Cambridge Philos. Soc. 44, 1948.
Cohen. "Min-wise independent permutations" / bottom-k sketches: Cohen & Kaplan, "Summarizing
data using bottom-k sketches", PODC 2007.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import fdtrc, logsumexp, ndtri

from ._defaults import MAX_PRIOR_CLASSES
from ._scored import ScoredSet, checked_data
from ._serialise import JsonResult
from ._softmax import log_softmax, softmax
from ._validation import check_confidence_level, check_count, check_logits, check_temperature

__all__ = [
    "PriorEstimate",
    "PriorShiftTest",
    "ReferencePriors",
    "ServedPriorStats",
    "estimate_priors_bbse",
    "estimate_priors_em",
    "prior_corrected_log_probabilities",
    "prior_corrected_logits",
    "prior_shift_test",
]

#: Rows of the served sample EM runs on, unless told otherwise: its SE per class is then about
#: sqrt(π(1 − π) / 2000), below 0.007, while the memory stays 2000 · K floats.
DEFAULT_SAMPLE_CAPACITY = 2000

# EM steps before each further EM step is preceded by a Newton step (estimate_priors_em): most
# windows of a good model converge within them by EM alone, exactly as without Newton.
_EM_STEPS_BEFORE_NEWTON = 100

# Eigenvalues of a covariance below this share of the largest are taken as 0 (its null space:
# the all-ones direction, classes the model never gives mass to).
_RANK_TOLERANCE = 1e-9


def _as_vector(value: ArrayLike, n_classes: int, name: str, *, positive: bool) -> NDArray[np.float64]:
    array = np.asarray(value, dtype=np.float64)
    if array.shape != (n_classes,):
        raise ValueError(f"{name} must have one value per class ({n_classes}); got shape {array.shape}")
    if not np.all(np.isfinite(array)) or np.any(array < 0) or (positive and np.any(array <= 0)):
        row = int(np.argmax(~np.isfinite(array) | (array <= 0 if positive else array < 0)))
        rule = "> 0 (a class with prior 0 could never be predicted)" if positive else ">= 0"
        raise ValueError(f"{name}[{row}] is {float(array[row])!r}; every prior must be finite and {rule}")
    with np.errstate(over="ignore"):  # an overflowing sum is refused below, by name
        total = float(array.sum())
    if not 0 < total < math.inf:
        raise ValueError(f"{name} sums to {total!r}; priors are normalised to sum to 1, so their sum must be finite "
                         "and > 0 (give proportions or counts)")
    return array / total


def _pinv_quadratic(difference: NDArray[np.float64], covariance: NDArray[np.float64]) -> tuple[float, int]:
    """dᵀ Σ⁺ d and the rank of Σ (eigenvalues below the tolerance dropped)."""
    values, vectors = np.linalg.eigh((covariance + covariance.T) / 2.0)
    keep = values > _RANK_TOLERANCE * max(float(values.max()), 0.0)
    if not np.any(keep):
        return math.nan, 0
    projected = vectors[:, keep].T @ difference
    return float(np.sum(projected * projected / values[keep])), int(keep.sum())


def _check_prior_classes(n_classes: int, max_classes: int, where: str) -> None:
    """Refuse ``n_classes`` above ``max_classes`` before a K × K statistic is allocated."""
    if isinstance(max_classes, bool) or not isinstance(max_classes, (int, np.integer)) or max_classes < 2:
        raise ValueError(f"max_classes must be an integer >= 2; got {max_classes!r}")
    if n_classes > max_classes:
        raise ValueError(
            f"{n_classes:,} classes: {where} K × K matrices (memory grows as K², time as K³); at most max_classes = "
            f"{max_classes:,} classes are taken (default MAX_PRIOR_CLASSES; pass max_classes= to take more at that "
            "cost)")


def _tv(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    return 0.5 * float(np.abs(a - b).sum())


# --------------------------------------------------------------------------- what is registered


@dataclass(frozen=True, slots=True, eq=False)
class ReferencePriors(JsonResult):
    """What a version registers for the prior tests, from its calibration part at its T.

    ``n`` rows; ``class_counts`` (K) of their labels; ``posterior_sum`` Σ p_i (K) and
    ``posterior_outer_sum`` Σ p_i p_iᵀ (K × K) of the calibrated posteriors at ``temperature``;
    ``confusion`` (K × K) the count of rows predicted i whose label is j at [i, j]. ``+`` adds
    two parts at the same T.

    Examples
    --------
    >>> logits = np.log([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.1, 0.9]])
    >>> reference = ReferencePriors.from_logits(logits, [0, 1, 1, 1])
    >>> reference.priors.tolist(), reference.model_priors.round(3).tolist()
    ([0.25, 0.75], [0.45, 0.55])
    >>> reference.confusion.tolist()  # predicted (rows) x true (columns)
    [[1, 1], [0, 2]]
    """

    temperature: float
    n: int
    class_counts: NDArray[np.int64]
    posterior_sum: NDArray[np.float64]
    posterior_outer_sum: NDArray[np.float64]
    confusion: NDArray[np.int64]

    @classmethod
    def from_logits(cls, logits: ArrayLike | ScoredSet, labels: ArrayLike | None = None, *,
                    temperature: float = 1.0, max_classes: int = MAX_PRIOR_CLASSES) -> ReferencePriors:
        """The sums over ``logits`` (n_samples, n_classes) and ``labels`` at ``temperature``; a
        validated :class:`calibration.ScoredSet` stands for both and is not checked again.

        Two of the sums are K × K: O(n K²) time and O(K²) memory (K = 2,000: 32 MB each), and
        the prior test and EM's covariance decompose K × K matrices (O(K³)). More than
        ``max_classes`` classes (default :data:`MAX_PRIOR_CLASSES`) are refused before anything
        is computed.

        Raises
        ------
        ValueError
            If the logits, labels or temperature break their rules, or K > ``max_classes``.
        """
        array, y = checked_data(logits, labels)
        temperature = check_temperature(temperature)
        k = array.shape[1]
        _check_prior_classes(k, max_classes, "the reference priors' sums of posterior outer products and confusion "
                                            "matrix are")
        p = softmax(array, temperature)
        predicted = array.argmax(axis=1)
        confusion = np.bincount(predicted * k + y, minlength=k * k).reshape(k, k).astype(np.int64)
        return cls(temperature=temperature, n=int(array.shape[0]),
                   class_counts=np.bincount(y, minlength=k).astype(np.int64), posterior_sum=p.sum(axis=0),
                   posterior_outer_sum=p.T @ p, confusion=confusion)

    def __add__(self, other: ReferencePriors) -> ReferencePriors:
        if not isinstance(other, ReferencePriors):
            return NotImplemented
        if self.temperature != other.temperature or self.n_classes != other.n_classes:
            raise ValueError(f"cannot merge reference priors at T = {self.temperature!r} with K = {self.n_classes} "
                             f"and T = {other.temperature!r} with K = {other.n_classes}; both must match")
        return ReferencePriors(temperature=self.temperature, n=self.n + other.n,
                               class_counts=self.class_counts + other.class_counts,
                               posterior_sum=self.posterior_sum + other.posterior_sum,
                               posterior_outer_sum=self.posterior_outer_sum + other.posterior_outer_sum,
                               confusion=self.confusion + other.confusion)

    @property
    def n_classes(self) -> int:
        return int(self.class_counts.shape[0])

    @property
    def priors(self) -> NDArray[np.float64]:
        """The class frequencies of the labels (BBSE's reference priors)."""
        return self.class_counts / self.n

    @property
    def model_priors(self) -> NDArray[np.float64]:
        """The mean calibrated posterior (EM's reference priors, module docstring)."""
        return self.posterior_sum / self.n

    @property
    def posterior_covariance(self) -> NDArray[np.float64]:
        """The covariance of the posterior vector over the reference's rows (n − 1 in the denominator)."""
        mean = self.model_priors
        return (self.posterior_outer_sum - self.n * np.outer(mean, mean)) / max(self.n - 1, 1)

    def to_dict(self) -> dict[str, Any]:
        """The registered form: the sums as lists (what :meth:`from_dict` reads back)."""
        return {"temperature": self.temperature, "n": self.n, "class_counts": self.class_counts.tolist(),
                "posterior_sum": self.posterior_sum.tolist(), "posterior_outer_sum": self.posterior_outer_sum.tolist(),
                "confusion": self.confusion.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReferencePriors:
        """Read back :meth:`to_dict`; a ValueError names a missing or malformed field."""
        try:
            counts = np.asarray(data["class_counts"], dtype=np.int64)
            k = counts.shape[0]
            reference = cls(temperature=check_temperature(data["temperature"]), n=int(data["n"]), class_counts=counts,
                            posterior_sum=np.asarray(data["posterior_sum"], dtype=np.float64),
                            posterior_outer_sum=np.asarray(data["posterior_outer_sum"], dtype=np.float64),
                            confusion=np.asarray(data["confusion"], dtype=np.int64))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"reference priors: a field is missing or malformed ({error!r})") from error
        shapes = (reference.posterior_sum.shape, reference.posterior_outer_sum.shape, reference.confusion.shape)
        if k < 2 or shapes != ((k,), (k, k), (k, k)) or reference.n != int(counts.sum()) or counts.min() < 0:
            raise ValueError(f"reference priors: the sums do not fit K = {k} classes and n = {reference.n} rows")
        return reference


# --------------------------------------------------------------------------- what a window keeps


@dataclass(frozen=True, slots=True, eq=False)
class ServedPriorStats:
    """Mergeable sums over every served row of a window, and a bounded uniform sample of them.

    ``n`` rows at ``temperature``; ``posterior_sum`` Σ p_i and ``predicted_counts`` (K) over all
    of them; ``sample`` the posteriors of at most ``capacity`` rows, those with the smallest
    ``keys`` (uniform in [0, 1), one per row). ``+`` merges two windows (module docstring).
    """

    temperature: float
    n: int
    posterior_sum: NDArray[np.float64]
    predicted_counts: NDArray[np.int64]
    sample: NDArray[np.float64]
    keys: NDArray[np.float64]
    capacity: int

    @classmethod
    def from_logits(
        cls, logits: ArrayLike, *, temperature: float = 1.0, capacity: int | None = DEFAULT_SAMPLE_CAPACITY,
        seed: int | np.random.Generator | None = 0, keys: ArrayLike | None = None,
    ) -> ServedPriorStats:
        """Summarise served rows (no labels needed) at ``temperature``.

        Parameters
        ----------
        logits : array of shape (n_samples, n_classes)
        temperature : float, default=1.0
            The deployed T.
        capacity : int or None, default=2000
            The most rows the sample keeps (None: every row, for a window held in memory anyway).
        seed : int or Generator, default=0
            Draws the rows' keys; give each chunk of a window its own (e.g. its index).
        keys : array of shape (n_samples,), optional
            The rows' keys in [0, 1) instead (e.g. a hash of the request id: the same rows are
            kept whichever way the window is chunked).

        Examples
        --------
        >>> logits = np.random.default_rng(0).normal(size=(5000, 3))
        >>> whole = ServedPriorStats.from_logits(logits, capacity=100)
        >>> parts = (ServedPriorStats.from_logits(logits[:2000], capacity=100, seed=1)
        ...          + ServedPriorStats.from_logits(logits[2000:], capacity=100, seed=2))
        >>> parts.n, parts.sample.shape, bool(np.allclose(parts.posterior_sum, whole.posterior_sum))
        (5000, (100, 3), True)
        """
        array = check_logits(logits)
        temperature = check_temperature(temperature)
        return cls._summarise(softmax(array, temperature), array.argmax(axis=1), temperature, capacity, seed, keys)

    @classmethod
    def from_probabilities(
        cls, probabilities: NDArray[np.float64], predictions: NDArray[np.intp], *, temperature: float,
        capacity: int | None = DEFAULT_SAMPLE_CAPACITY, seed: int | np.random.Generator | None = 0,
        keys: ArrayLike | None = None,
    ) -> ServedPriorStats:
        """:meth:`from_logits` of rows whose posteriors at ``temperature`` and first arg-max are
        already computed (as :func:`calibration.top_label_and_probabilities` returns them, for a
        reader that also needs the top label): trusted, only their shapes are checked.

        Examples
        --------
        >>> from calibration import top_label_and_probabilities
        >>> logits = np.random.default_rng(0).normal(size=(50, 3))
        >>> predictions, _, p = top_label_and_probabilities(logits, temperature=2.0)
        >>> stats = ServedPriorStats.from_probabilities(p, predictions, temperature=2.0, capacity=10)
        >>> same = ServedPriorStats.from_logits(logits, temperature=2.0, capacity=10)
        >>> bool(np.array_equal(stats.sample, same.sample) and np.array_equal(stats.posterior_sum, same.posterior_sum))
        True
        """
        p = np.asarray(probabilities)
        predicted = np.asarray(predictions)
        if p.ndim != 2 or predicted.shape != p.shape[:1]:
            raise ValueError(f"probabilities must be (n, K) and predictions (n,); got {p.shape} and {predicted.shape}")
        return cls._summarise(p, predicted, check_temperature(temperature), capacity, seed, keys)

    @classmethod
    def _summarise(
        cls, p: NDArray[np.float64], predicted: NDArray[np.intp], temperature: float, capacity: int | None,
        seed: int | np.random.Generator | None, keys: ArrayLike | None,
    ) -> ServedPriorStats:
        n, k = p.shape
        capacity = n if capacity is None else check_count(capacity, name="capacity")
        if keys is None:
            rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
            row_keys: NDArray[np.float64] = np.asarray(rng.random(n), dtype=np.float64)
        else:
            row_keys = np.asarray(keys, dtype=np.float64)
            if row_keys.shape != (n,) or not np.all((row_keys >= 0) & (row_keys < 1)):
                raise ValueError(f"keys must be one number in [0, 1) per row ({n}); got shape {row_keys.shape}")
        kept = _bottom(row_keys, capacity)
        return cls(temperature=temperature, n=n, posterior_sum=p.sum(axis=0),
                   predicted_counts=np.bincount(predicted, minlength=k).astype(np.int64),
                   sample=p[kept], keys=row_keys[kept], capacity=capacity)

    def __add__(self, other: ServedPriorStats) -> ServedPriorStats:
        if not isinstance(other, ServedPriorStats):
            return NotImplemented
        if self.temperature != other.temperature or self.posterior_sum.shape != other.posterior_sum.shape:
            raise ValueError("cannot merge served prior statistics at different temperatures or numbers of classes")
        capacity = min(self.capacity, other.capacity)
        keys = np.concatenate([self.keys, other.keys])
        kept = _bottom(keys, capacity)
        return ServedPriorStats(temperature=self.temperature, n=self.n + other.n,
                                posterior_sum=self.posterior_sum + other.posterior_sum,
                                predicted_counts=self.predicted_counts + other.predicted_counts,
                                sample=np.concatenate([self.sample, other.sample])[kept], keys=keys[kept],
                                capacity=capacity)

    @property
    def n_classes(self) -> int:
        return int(self.posterior_sum.shape[0])

    @property
    def mean_posterior(self) -> NDArray[np.float64]:
        return self.posterior_sum / self.n


def _bottom(keys: NDArray[np.float64], capacity: int) -> NDArray[np.intp]:
    """The indices of the ``capacity`` smallest keys, in key order (all of them when fewer)."""
    if keys.shape[0] > capacity:
        index = np.argpartition(keys, capacity - 1)[:capacity]
    else:
        index = np.arange(keys.shape[0])
    return index[np.argsort(keys[index], kind="stable")]


# --------------------------------------------------------------------------- the estimates


@dataclass(frozen=True, slots=True, eq=False)
class PriorEstimate(JsonResult):
    """The class priors of a window, estimated without its labels.

    ``priors`` (K) the estimate, ``reference_priors`` the priors it is relative to and
    ``weights`` = priors / reference_priors (what :func:`prior_corrected_log_probabilities`
    applies); ``covariance`` (K × K) of ``priors`` and ``priors_low``/``priors_high`` each
    class's normal interval at ``confidence_level`` (clipped to [0, 1]); ``n`` the rows the
    estimate used. EM reports ``iterations``, ``converged`` and ``log_likelihood_ratio``
    ℓ(ŵ) − ℓ(1) (≥ 0); BBSE ``condition_number`` of its confusion matrix (large: the
    classes are hard to tell apart and the estimate is noisy).
    """

    method: Literal["em", "bbse"]
    priors: NDArray[np.float64]
    reference_priors: NDArray[np.float64]
    covariance: NDArray[np.float64]
    priors_low: NDArray[np.float64]
    priors_high: NDArray[np.float64]
    n: int
    confidence_level: float
    iterations: int = 0
    converged: bool = True
    log_likelihood_ratio: float = math.nan
    condition_number: float = math.nan

    @property
    def weights(self) -> NDArray[np.float64]:
        return self.priors / self.reference_priors

    @property
    def total_variation(self) -> float:
        """½ Σ |π' − π|: how far the estimate is from the reference priors."""
        return _tv(self.priors, self.reference_priors)


def _intervals(priors: NDArray[np.float64], covariance: NDArray[np.float64],
               confidence_level: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    spread = float(ndtri(0.5 + confidence_level / 2.0)) * np.sqrt(np.maximum(np.diag(covariance), 0.0))
    return np.clip(priors - spread, 0.0, 1.0), np.clip(priors + spread, 0.0, 1.0)


def estimate_priors_em(
    served: ServedPriorStats, reference: ReferencePriors, *, basis: Literal["posterior_mean", "class_counts"] =
    "posterior_mean", pseudo_rows: float = 1.0, tolerance: float = 1e-8, max_iterations: int = 10_000,
    confidence_level: float = 0.95,
) -> PriorEstimate:
    """The window's class priors by EM on its sampled posteriors (Saerens et al. 2002).

    Parameters
    ----------
    served : ServedPriorStats
        The window's served rows at the deployed T; EM runs on its sample.
    reference : ReferencePriors
        The version's registered sums at the same T.
    basis : {"posterior_mean", "class_counts"}, default="posterior_mean"
        The reference priors the posteriors are taken to be calibrated for: the mean posterior
        (w = 1 is then EM's exact fixed point on the reference; module docstring) or the label
        frequencies (the textbook form).
    pseudo_rows : float, default=1.0
        Rows' worth of the reference priors added to each M-step (the maximum a posteriori
        estimate under a Dirichlet prior centred on them): no class's prior reaches 0, so the
        correction never makes a class impossible on a finite sample's word; its pull is
        ``pseudo_rows / n``. 0 gives the plain maximum likelihood.
    tolerance : float, default=1e-8
        Converged when no prior moves by more than this in one EM step. After 100 EM steps
        without that (a weak model of many classes, whose likelihood is flat: EM alone takes
        thousands of steps and stops short of the maximum), and when ``pseudo_rows`` > 0 (the
        maximum is then inside the simplex), each EM step is preceded by a safeguarded Newton
        step on the same objective, and converged also asks the last Newton step to move
        no prior by more than this; ``iterations`` counts both kinds of step.
    max_iterations : int, default=10000
    confidence_level : float, default=0.95

    Returns
    -------
    PriorEstimate
        With the iterations, whether it converged, the log-likelihood ratio against w = 1 and
        the inverse observed information as the covariance.

    Raises
    ------
    ValueError
        If the two were summed at different temperatures or numbers of classes, or the window
        has no row.

    Examples
    --------
    Two kinds of input, x₁ with posterior (0.8, 0.2) and x₂ with (0.2, 0.8), half and half at
    priors (½, ½): so p(x₁ | y = 0) = 0.8 and p(x₁ | y = 1) = 0.2. A window where x₁ is 5 rows
    in 8 has 0.8 π' + 0.2 (1 − π') = 5 / 8, so π' = 17 / 24 = 0.708333:

    >>> logits = np.log([[0.8, 0.2]] * 2 + [[0.2, 0.8]] * 2)
    >>> reference = ReferencePriors.from_logits(logits, [0, 1, 0, 1])
    >>> window = np.log([[0.8, 0.2]] * 5 + [[0.2, 0.8]] * 3)
    >>> estimate = estimate_priors_em(ServedPriorStats.from_logits(window), reference, pseudo_rows=0)
    >>> estimate.priors.round(6).tolist(), estimate.converged
    ([0.708333, 0.291667], True)
    """
    _check_pair(served, reference)
    if served.n == 0 or served.sample.shape[0] == 0:
        raise ValueError("the window has no served row: nothing to estimate the priors from")
    confidence_level = check_confidence_level(confidence_level)
    max_iterations = check_count(max_iterations, name="max_iterations")
    if not (isinstance(pseudo_rows, (int, float)) and 0.0 <= pseudo_rows < math.inf):
        raise ValueError(f"pseudo_rows must be a finite number >= 0; got {pseudo_rows!r}")
    n = served.sample.shape[0]
    if basis not in ("posterior_mean", "class_counts"):
        raise ValueError(f"basis must be 'posterior_mean' or 'class_counts'; got {basis!r}")
    base = reference.model_priors if basis == "posterior_mean" else reference.priors
    base = np.maximum(base, np.finfo(np.float64).tiny)
    base = base / base.sum()
    # Likelihood ratios r_i(y) = p_i(y) / π_y: the window's likelihood is Σ_i log Σ_y r_i(y) π'_y.
    ratio = served.sample / base
    priors = base.copy()
    iterations, converged, newton_step = 0, False, 0.0
    while iterations < max_iterations:
        iterations += 1
        # Σ_i q_i(y) = π'_y Σ_i r_i(y) / (r_i · π'): two matrix-vector products, no n × K temporary.
        expected = priors * (ratio.T @ (1.0 / (ratio @ priors)))
        updated = (expected + pseudo_rows * base) / (n + pseudo_rows)
        step = float(np.abs(updated - priors).max())
        priors = updated
        if step < tolerance and newton_step < tolerance:
            converged = True
            break
        if pseudo_rows > 0 and iterations >= _EM_STEPS_BEFORE_NEWTON and iterations < max_iterations:
            iterations += 1
            moved = _newton_step(ratio, priors, pseudo_rows * base)
            newton_step, priors = float(np.abs(moved - priors).max()), moved
    mixture = ratio @ priors
    log_likelihood_ratio = float(np.log(mixture).sum() - np.log(ratio @ base).sum())
    covariance = _em_covariance(ratio, mixture)
    low, high = _intervals(priors, covariance, confidence_level)
    return PriorEstimate(method="em", priors=priors, reference_priors=base, covariance=covariance, priors_low=low,
                         priors_high=high, n=int(served.sample.shape[0]), confidence_level=confidence_level,
                         iterations=iterations, converged=converged, log_likelihood_ratio=log_likelihood_ratio)


def _map_objective(ratio: NDArray[np.float64], priors: NDArray[np.float64], pseudo: NDArray[np.float64]) -> float:
    """Σ_i log(r_i · π') + Σ_y a_y log π'_y: the log posterior EM with pseudo-rows a raises."""
    return float(np.log(ratio @ priors).sum() + (pseudo * np.log(priors)).sum())


def _newton_step(ratio: NDArray[np.float64], priors: NDArray[np.float64],
                 pseudo: NDArray[np.float64]) -> NDArray[np.float64]:
    """One safeguarded Newton step on :func:`_map_objective` over the simplex (bordered Hessian).

    EM converges linearly, slowly when the classes are hard to tell apart (a weak model of many
    classes: thousands of steps); Newton's method converges quadratically near the maximum. The
    step stays inside the simplex (at most 99 % of the way to its boundary) and is halved until
    the objective does not fall, so EM's ascent is kept; where it finds no such step it returns
    ``priors`` unchanged (the EM steps go on alone).
    """
    k = ratio.shape[1]
    scaled = ratio / (ratio @ priors)[:, None]
    gradient = scaled.sum(axis=0) + pseudo / priors
    bordered = np.zeros((k + 1, k + 1))
    bordered[:k, :k] = -(scaled.T @ scaled) - np.diag(pseudo / priors**2)
    bordered[:k, k] = bordered[k, :k] = 1.0
    right = np.concatenate([-gradient, [0.0]])
    try:
        direction = np.linalg.solve(bordered, right)[:k]
    except np.linalg.LinAlgError:
        return priors
    if not np.all(np.isfinite(direction)):
        return priors
    falling = direction < 0
    length = min(1.0, 0.99 * float(np.min(-priors[falling] / direction[falling]))) if falling.any() else 1.0
    before = _map_objective(ratio, priors, pseudo)
    for _ in range(30):
        candidate = priors + length * direction
        if np.all(candidate > 0) and _map_objective(ratio, candidate, pseudo) >= before:
            result: NDArray[np.float64] = candidate / candidate.sum()
            return result
        length /= 2.0
    return priors


def _em_covariance(ratio: NDArray[np.float64], mixture: NDArray[np.float64]) -> NDArray[np.float64]:
    """The inverse observed information of π' on the simplex Σ π' = 1 (the bordered Hessian)."""
    k = ratio.shape[1]
    scaled = ratio / mixture[:, None]
    information = scaled.T @ scaled  # −∂²ℓ/∂π'∂π'ᵀ
    bordered = np.zeros((k + 1, k + 1))
    bordered[:k, :k] = information
    bordered[:k, k] = bordered[k, :k] = 1.0
    inverse = np.linalg.pinv(bordered, rcond=1e-12)
    covariance: NDArray[np.float64] = inverse[:k, :k]
    return (covariance + covariance.T) / 2.0


def estimate_priors_bbse(
    served: ServedPriorStats, reference: ReferencePriors, *, confidence_level: float = 0.95,
    max_classes: int = MAX_PRIOR_CLASSES,
) -> PriorEstimate:
    """The window's class priors by black-box shift estimation (Lipton et al. 2018).

    π' = C⁻¹ μ̂ with C[i, j] = P(ŷ = i | y = j) from the reference's confusion matrix and μ̂ the
    window's predicted-class distribution; negative values clipped to 0 and the rest
    renormalised. Needs no calibration: the cross-check of :func:`estimate_priors_em`.
    Its solve, pseudo-inverse and condition number decompose the K × K matrix C: O(K³) time,
    O(K²) memory; more than ``max_classes`` classes (default :data:`MAX_PRIOR_CLASSES`) are
    refused before any of them.

    Examples
    --------
    >>> logits = np.log([[0.8, 0.2]] * 4 + [[0.2, 0.8]] * 4)
    >>> reference = ReferencePriors.from_logits(logits, [0, 0, 0, 1, 1, 1, 1, 0])  # 3 of 4 right each
    >>> window = np.log([[0.8, 0.2]] * 5 + [[0.2, 0.8]] * 3)  # predicted 5:3
    >>> estimate_priors_bbse(ServedPriorStats.from_logits(window), reference).priors.round(6).tolist()
    [0.75, 0.25]
    """
    _check_pair(served, reference)
    _check_prior_classes(reference.n_classes, max_classes, "BBSE solves, inverts and conditions")
    if served.n == 0:
        raise ValueError("the window has no served row: nothing to estimate the priors from")
    confidence_level = check_confidence_level(confidence_level)
    counts = np.maximum(reference.class_counts, 1)
    conditional = reference.confusion / counts  # columns: P(ŷ | y)
    predicted = served.predicted_counts / served.n
    solution, *_ = np.linalg.lstsq(conditional, predicted, rcond=None)
    inverse = np.linalg.pinv(conditional)
    priors = np.maximum(solution, 0.0)
    priors = priors / priors.sum() if priors.sum() > 0 else reference.priors.copy()
    # Delta method: the window's multinomial μ̂ and, given the class counts, each confusion
    # column's multinomial, weighted by the new prior of its class.
    window_term = (np.diag(predicted) - np.outer(predicted, predicted)) / served.n
    # Σ_j a_j (diag c_j − c_j c_jᵀ) = diag(C a) − C diag(a) Cᵀ, a_j = π'_j² / n_j.
    weight = priors**2 / counts
    column_term = np.diag(conditional @ weight) - (conditional * weight) @ conditional.T
    covariance = inverse @ (window_term + column_term) @ inverse.T
    low, high = _intervals(priors, covariance, confidence_level)
    return PriorEstimate(method="bbse", priors=priors, reference_priors=reference.priors, covariance=covariance,
                         priors_low=low, priors_high=high, n=served.n, confidence_level=confidence_level,
                         condition_number=float(np.linalg.cond(conditional)))


def _check_pair(served: ServedPriorStats, reference: ReferencePriors) -> None:
    if not isinstance(served, ServedPriorStats):
        raise TypeError(f"served must be ServedPriorStats; got {type(served).__name__}")
    if not isinstance(reference, ReferencePriors):
        raise TypeError(f"reference must be ReferencePriors; got {type(reference).__name__}")
    if served.n_classes != reference.n_classes:
        raise ValueError(f"the window has {served.n_classes} classes and the reference {reference.n_classes}")
    if not math.isclose(served.temperature, reference.temperature, rel_tol=1e-9):
        raise ValueError(f"the reference priors were summed at T = {reference.temperature!r} and the window at "
                         f"T = {served.temperature!r}; both must be read at the deployed T")


# --------------------------------------------------------------------------- the test


@dataclass(frozen=True, slots=True, eq=False)
class PriorShiftTest(JsonResult):
    """The score test of the window's class priors against the reference's (module docstring).

    ``statistic`` Hotelling's T² on ``df`` degrees of freedom (its p-value the F(df, reference_n
    − df) tail of (reference_n − df) T² / ((reference_n − 1) df)), ``p_value`` and ``fired``
    (``p_value < level``); ``effect`` the total-variation distance between EM's priors (``estimate``) and the
    reference's, [``effect_low``, ``effect_high``] its interval at ``confidence_level``;
    ``n`` served rows in the test, ``reference_n`` rows of the reference.
    """

    fired: bool
    p_value: float
    level: float
    statistic: float
    df: int
    effect: float
    effect_low: float
    effect_high: float
    n: int
    reference_n: int
    confidence_level: float
    estimate: PriorEstimate

    def sentence(self) -> str:
        """One line with the numbers."""
        top = np.argsort(-np.abs(self.estimate.priors - self.estimate.reference_priors))[:3]
        moved = ", ".join(f"class {int(c)} {self.estimate.reference_priors[c]:.3f} → {self.estimate.priors[c]:.3f}"
                          for c in top)
        verdict = (f"MOVED (T² = {self.statistic:.1f}, df {self.df}, p = {_fmt_p(self.p_value)} < {_fmt_p(self.level)})"
                   if self.fired else f"unchanged (T² = {self.statistic:.1f}, df {self.df}, p = {_fmt_p(self.p_value)})")
        return (f"class priors of {self.n} served rows vs the reference's (n={self.reference_n}): {verdict}; "
                f"total variation {self.effect:.3f} [{self.effect_low:.3f}, {self.effect_high:.3f}]; largest moves: "
                f"{moved}")


def _fmt_p(p: float) -> str:
    return "n/a" if not math.isfinite(p) else f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


def prior_shift_test(
    served: ServedPriorStats, reference: ReferencePriors, *, level: float = 0.01, confidence_level: float = 0.95,
    estimate: PriorEstimate | None = None, seed: int = 0,
) -> PriorShiftTest:
    """Test whether the window's class priors moved from the reference's, from unlabelled rows.

    Parameters
    ----------
    served : ServedPriorStats
        Every served row of the window (its sums) at the deployed T.
    reference : ReferencePriors
        The version's registered sums at the same T.
    level : float, default=0.01
        Significance level of the test.
    confidence_level : float, default=0.95
        Level of the effect's interval.
    estimate : PriorEstimate, optional
        EM's estimate on the window (computed here when not given).
    seed : int, default=0
        Seeds the draws of the effect's interval.

    Returns
    -------
    PriorShiftTest

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> def rows(priors, n):  # a calibrated model: x | y ~ N(2 e_y, I), posteriors exact
    ...     y = rng.choice(3, size=n, p=priors); x = rng.normal(size=(n, 3)); x[np.arange(n), y] += 2.0
    ...     return 2.0 * x, y
    >>> reference = ReferencePriors.from_logits(*rows([1 / 3] * 3, 5000))
    >>> same = prior_shift_test(ServedPriorStats.from_logits(rows([1 / 3] * 3, 2000)[0]), reference)
    >>> moved = prior_shift_test(ServedPriorStats.from_logits(rows([0.6, 0.2, 0.2], 2000)[0]), reference)
    >>> same.fired, moved.fired, moved.estimate.priors.round(1).tolist()
    (False, True, [0.6, 0.2, 0.2])
    """
    _check_pair(served, reference)
    level = check_confidence_level(level, name="level")
    confidence_level = check_confidence_level(confidence_level)
    if estimate is None:
        estimate = estimate_priors_em(served, reference, confidence_level=confidence_level)
    difference = served.mean_posterior - reference.model_priors
    scale = 1.0 / served.n + 1.0 / reference.n
    quadratic, rank = _pinv_quadratic(difference, reference.posterior_covariance)
    statistic = quadratic / scale if rank else math.nan
    # Hotelling's T²: S is estimated from the reference's rows (rank <= n_ref - 1, so n_ref - rank >= 1).
    denominator_df = reference.n - rank
    p_value = (float(fdtrc(rank, denominator_df, statistic * denominator_df / ((reference.n - 1) * rank)))
               if rank else math.nan)
    effect = estimate.total_variation
    low, high = _tv_interval(estimate, reference, served, confidence_level, seed)
    return PriorShiftTest(fired=bool(rank and p_value < level), p_value=p_value, level=level, statistic=statistic,
                          df=rank, effect=effect, effect_low=low, effect_high=high, n=served.n,
                          reference_n=reference.n, confidence_level=confidence_level, estimate=estimate)


def _tv_interval(estimate: PriorEstimate, reference: ReferencePriors, served: ServedPriorStats,
                 confidence_level: float, seed: int, draws: int = 400) -> tuple[float, float]:
    """A percentile interval of the TV distance from normal draws of both priors (the estimate's
    covariance and the reference mean posterior's)."""
    covariance = estimate.covariance + reference.posterior_covariance / reference.n
    values, vectors = np.linalg.eigh((covariance + covariance.T) / 2.0)
    root = vectors * np.sqrt(np.maximum(values, 0.0))
    noise = np.random.default_rng(seed).normal(size=(draws, root.shape[0])) @ root.T
    tv = 0.5 * np.abs(estimate.priors - estimate.reference_priors + noise).sum(axis=1)
    alpha = (1.0 - confidence_level) / 2.0
    return float(np.quantile(tv, alpha)), float(np.quantile(tv, 1.0 - alpha))


# --------------------------------------------------------------------------- the correction


def _log_weights(priors: ArrayLike, reference_priors: ArrayLike, n_classes: int) -> NDArray[np.float64]:
    new = _as_vector(priors, n_classes, "priors", positive=True)
    old = _as_vector(reference_priors, n_classes, "reference_priors", positive=True)
    return np.log(new) - np.log(old)


def prior_corrected_logits(
    logits: ArrayLike, *, temperature: float, priors: ArrayLike, reference_priors: ArrayLike
) -> NDArray[np.float64]:
    """Logits whose softmax at ``temperature`` is the prior-corrected posterior: z + T log(π' / π).

    Every tool that reads logits at T (the NLL, the ECE, the drift tests) reads the corrected
    model through these. See :func:`prior_corrected_log_probabilities`.

    >>> prior_corrected_logits([[0.0, 0.0]], temperature=2.0, priors=[0.8, 0.2], reference_priors=[0.5, 0.5]).round(4)
    array([[ 0.94  , -1.8326]])
    """
    array = check_logits(logits)
    temperature = check_temperature(temperature)
    result: NDArray[np.float64] = array.astype(np.float64) + temperature * _log_weights(
        priors, reference_priors, array.shape[1])
    return result


def prior_corrected_log_probabilities(
    logits: ArrayLike, *, temperature: float, priors: ArrayLike, reference_priors: ArrayLike
) -> NDArray[np.float64]:
    """log of softmax(z / T) re-weighted by w = π' / π and renormalised (Saerens et al. 2002).

    Computed as log_softmax(z / T + log w) (row maximum subtracted first), so no probability is
    formed before the logarithm: a class with posterior 1e-300 keeps its log-probability.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes)
    temperature : float
        The version's T.
    priors : array of shape (n_classes,)
        The traffic's class priors π' (normalised here; every one > 0).
    reference_priors : array of shape (n_classes,)
        The priors the posteriors are calibrated for π (normalised here; every one > 0).

    Returns
    -------
    array of shape (n_samples, n_classes)

    Raises
    ------
    ValueError
        If a prior is not finite and positive, or the shapes disagree.

    Examples
    --------
    Logits (0, 0) at any T give (½, ½); priors moved from (½, ½) to (0.8, 0.2) give (0.8, 0.2):

    >>> np.exp(prior_corrected_log_probabilities([[0.0, 0.0]], temperature=1.5, priors=[0.8, 0.2],
    ...                                          reference_priors=[0.5, 0.5])).round(6).tolist()
    [[0.8, 0.2]]
    """
    array = check_logits(logits)
    temperature = check_temperature(temperature)
    shifted = log_softmax(array, temperature) + _log_weights(priors, reference_priors, array.shape[1])
    result: NDArray[np.float64] = shifted - logsumexp(shifted, axis=1, keepdims=True)
    return result
