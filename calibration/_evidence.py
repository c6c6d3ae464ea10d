"""Evidence: paired bootstrap of the NLL change, consistency resampling of ECE.

A temperature is claimed to help only with its uncertainty: the per-example NLL
difference (after - before) is bootstrapped in pairs, and an interval that spans 0 is
"not established". Drift is declared only when the observed ECE is larger than the ECE a
perfectly calibrated model shows on a window of the same size: consistency
resampling draws correctness from the model's own confidence and compares.

Resampling is vectorised over examples and bins and runs in blocks of resamples, so memory
stays bounded (about ``_MAX_BLOCK_ELEMENTS`` numbers per block) whatever the window size.
The random stream is consumed in the same order whatever the block size, so a result
depends only on the data, the settings and ``seed``.

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
Vaicenavicius, Widmann, Andersson, Lindsten, Roll, Schön. "Evaluating model calibration in
classification". AISTATS 2019, PMLR 89:3459-3467.
Efron, Tibshirani. "An Introduction to the Bootstrap". Chapman & Hall, 1993 (percentile
interval, chapter 13).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._scored import ScoredSet, checked_data
from ._serialise import JsonResult
from ._softmax import label_log_probability, top_label
from ._stats import equal_width_bin_index
from ._validation import MAX_RESAMPLES, check_confidence_level, check_count, check_n_bins, check_temperature

__all__ = [
    "BootstrapComparison",
    "ConsistencyTest",
    "paired_bootstrap_nll",
    "paired_bootstrap_nll_between",
    "consistency_resampling_test",
    "consistency_resampling_from_stats",
]

Verdict = Literal["improved", "worse", "not established"]

# Numbers held per block of resamples (index or uniform matrix): 2**21 float64 = 16 MiB.
_MAX_BLOCK_ELEMENTS = 1 << 21


@dataclass(frozen=True, slots=True)
class BootstrapComparison(JsonResult):
    """Paired bootstrap of the per-example NLL difference (after - before), mean nats.

    ``verdict`` is "improved" when the whole interval is < 0, "worse" when > 0,
    "not established" when it spans 0.
    """

    estimate: float
    low: float
    high: float
    verdict: Verdict
    temperature_before: float
    temperature_after: float
    n: int
    n_resamples: int
    confidence_level: float
    seed: int


@dataclass(frozen=True, slots=True)
class ConsistencyTest(JsonResult):
    """Consistency resampling (Vaicenavicius et al. 2019) of the ECE at one temperature.

    ``p_value`` is the share of resampled ECEs (labels drawn from the model's own
    probabilities) that are >= ``observed_ece``, with the +1 correction:
    (1 + #{null >= observed}) / (1 + n_resamples).
    """

    observed_ece: float
    p_value: float
    null_mean: float
    null_quantile_95: float
    n: int
    n_bins: int
    scheme: str
    n_resamples: int
    seed: int


# --------------------------------------------------------------------------- validation


def _check_resamples(n_resamples: int) -> int:
    return check_count(n_resamples, name="n_resamples", maximum=MAX_RESAMPLES)


def _check_seed(seed: int) -> int:
    """Return ``seed`` as a non-negative int (what ``np.random.default_rng`` accepts), or raise."""
    return check_count(seed, name="seed", minimum=0)


def _check_bin_sums(
    bin_gap_sum: ArrayLike, bin_variance_sum: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return the per-bin sums as float64 vectors of one length, or raise."""
    arrays = []
    for name, values in (("bin_gap_sum", bin_gap_sum), ("bin_variance_sum", bin_variance_sum)):
        array = np.asarray(values)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be numeric, one value per bin; got dtype {array.dtype}")
        if array.ndim != 1 or array.shape[0] == 0:
            raise ValueError(f"{name} must be 1-D of shape (n_bins,) with n_bins >= 1; got shape {array.shape}")
        finite = np.isfinite(array)
        if not finite.all():
            bin_ = int(np.argmin(finite))
            raise ValueError(f"{name} bin {bin_} is {array[bin_]}; every per-bin sum must be finite")
        arrays.append(array.astype(np.float64))
    gap, variance = arrays
    if gap.shape != variance.shape:
        raise ValueError(
            f"bin_gap_sum has {gap.shape[0]} bins but bin_variance_sum has {variance.shape[0]}; "
            "pass both from the same binning"
        )
    negative = variance < 0.0
    if negative.any():
        bin_ = int(np.argmax(negative))
        raise ValueError(f"bin_variance_sum bin {bin_} is {variance[bin_]}; a sum of q(1 - q) must be >= 0")
    return gap, variance


# --------------------------------------------------------------------------- resampling


def _blocks(n_resamples: int, row_size: int) -> Iterator[int]:
    """Sizes of successive blocks of resamples, each holding about ``_MAX_BLOCK_ELEMENTS`` numbers."""
    per_block = max(1, _MAX_BLOCK_ELEMENTS // max(1, row_size))
    done = 0
    while done < n_resamples:
        size = min(per_block, n_resamples - done)
        yield size
        done += size


def _summarise_null(
    observed: float, null: NDArray[np.float64], n: int, n_bins: int, n_resamples: int, seed: int
) -> ConsistencyTest:
    """The :class:`ConsistencyTest` of ``observed`` against the resampled ``null`` ECEs."""
    exceed = int(np.count_nonzero(null >= observed))
    return ConsistencyTest(
        observed_ece=observed,
        p_value=(1.0 + exceed) / (1.0 + n_resamples),
        null_mean=float(null.mean()),
        null_quantile_95=float(np.quantile(null, 0.95)),
        n=n,
        n_bins=n_bins,
        scheme="equal-width",
        n_resamples=n_resamples,
        seed=seed,
    )


# --------------------------------------------------------------------------- public API


def paired_bootstrap_nll(
    logits: ArrayLike | ScoredSet,
    labels: ArrayLike | None = None,
    *,
    temperature_before: float,
    temperature_after: float,
    n_resamples: int = 2000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> BootstrapComparison:
    """Paired bootstrap of the mean per-example NLL change from one temperature to another.

    With d_i = NLL_i(temperature_after) - NLL_i(temperature_before) (nats), the estimate is
    mean(d). Rows are resampled with replacement (the same rows for both temperatures, hence
    *paired*), the mean of d is recomputed per resample, and the interval is the percentile
    interval of those means at ``confidence_level``. Negative means the new temperature is
    better. Evaluate on data the temperature was *not* fitted on (test data never chooses T).

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        Frozen logits (or log-probabilities); float32 is read as it is, sums are float64.
        A validated :class:`ScoredSet` stands for logits and labels (pass no ``labels``).
    labels : array of shape (n_samples,)
        True classes, integers in [0, n_classes).
    temperature_before, temperature_after : float
        The two temperatures to compare (finite, > 0); usually 1.0 and the fitted one.
    n_resamples : int, default=2000
        Number of bootstrap resamples (>= 1).
    confidence_level : float, default=0.95
        Coverage of the two-sided percentile interval, in (0, 1).
    seed : int, default=0
        Seed of ``np.random.default_rng`` (>= 0); the result is reproducible from it.

    Returns
    -------
    BootstrapComparison
        ``estimate``, ``low`` and ``high`` in mean nats per example, and ``verdict``:
        "improved" if ``high < 0``, "worse" if ``low > 0``, else "not established".

    Raises
    ------
    TypeError
        If an argument has the wrong type (e.g. a non-integer ``n_resamples``).
    ValueError
        If the logits or labels are malformed, a temperature is not finite and > 0,
        ``n_resamples < 1``, ``confidence_level`` is outside (0, 1) or ``seed < 0``.

    References
    ----------
    Guo et al., "On Calibration of Modern Neural Networks", ICML 2017.
    Efron and Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> logits = 3.0 * rng.normal(size=(2000, 4))
    >>> true_probabilities = np.exp(logits / 2.0)  # the truth is twice as flat
    >>> true_probabilities /= true_probabilities.sum(axis=1, keepdims=True)
    >>> labels = (rng.random((2000, 1)) > true_probabilities.cumsum(axis=1)).sum(axis=1)
    >>> result = paired_bootstrap_nll(logits, labels, temperature_before=1.0, temperature_after=2.0)
    >>> result.verdict
    'improved'
    >>> bool(result.low < result.estimate < result.high < 0)
    True
    """
    logits_, labels_ = checked_data(logits, labels)
    before = check_temperature(temperature_before, name="temperature_before")
    after = check_temperature(temperature_after, name="temperature_after")
    n_resamples = _check_resamples(n_resamples)
    level = check_confidence_level(confidence_level)
    seed = _check_seed(seed)

    # NLL_after - NLL_before = log p_before - log p_after, per row, in float64.
    difference = label_log_probability(logits_, labels_, before) - label_log_probability(logits_, labels_, after)
    return _paired_bootstrap(difference, before, after, n_resamples=n_resamples, level=level, seed=seed)


def _paired_bootstrap(difference: NDArray[np.float64], before: float, after: float, *, n_resamples: int,
                      level: float, seed: int) -> BootstrapComparison:
    """The percentile interval of the mean of the per-row ``difference`` over row resamples."""
    n = difference.shape[0]
    estimate = float(difference.mean())
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples, dtype=np.float64)
    start = 0
    for size in _blocks(n_resamples, n):
        rows = rng.integers(0, n, size=(size, n))
        means[start : start + size] = difference[rows].mean(axis=1)
        start += size

    alpha = 1.0 - level
    low, high = (float(x) for x in np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0]))
    verdict: Verdict = "improved" if high < 0.0 else "worse" if low > 0.0 else "not established"
    return BootstrapComparison(
        estimate=estimate,
        low=low,
        high=high,
        verdict=verdict,
        temperature_before=before,
        temperature_after=after,
        n=n,
        n_resamples=n_resamples,
        confidence_level=level,
        seed=seed,
    )


def paired_bootstrap_nll_between(
    logits_before: ArrayLike,
    logits_after: ArrayLike,
    labels: ArrayLike,
    *,
    temperature: float,
    n_resamples: int = 2000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> BootstrapComparison:
    """Paired bootstrap of the mean per-example NLL change between two sets of logits of the same
    rows, both read at ``temperature`` (e.g. a version and its prior-corrected version:
    :func:`prior_corrected_logits`). As :func:`paired_bootstrap_nll` otherwise; the result's two
    temperatures are both ``temperature``.

    Raises
    ------
    ValueError
        If either logits or the labels are malformed, or the two logits differ in shape.

    Examples
    --------
    >>> from calibration import prior_corrected_logits
    >>> logits = np.zeros((400, 2)); labels = (np.arange(400) % 5 == 0).astype(int)  # class 1 is 20 %
    >>> moved = prior_corrected_logits(logits, temperature=1.0, priors=[0.8, 0.2], reference_priors=[0.5, 0.5])
    >>> paired_bootstrap_nll_between(logits, moved, labels, temperature=1.0).verdict
    'improved'
    """
    before_, labels_ = checked_data(logits_before, labels)
    after_, _ = checked_data(logits_after, labels_)
    if after_.shape != before_.shape:
        raise ValueError(f"logits_after has shape {after_.shape} but logits_before {before_.shape}; they must be the "
                         "same rows and classes")
    temperature = check_temperature(temperature)
    difference = (label_log_probability(before_, labels_, temperature)
                  - label_log_probability(after_, labels_, temperature))
    return _paired_bootstrap(difference, temperature, temperature, n_resamples=_check_resamples(n_resamples),
                             level=check_confidence_level(confidence_level), seed=_check_seed(seed))


def consistency_resampling_test(
    logits: ArrayLike | ScoredSet,
    labels: ArrayLike | None = None,
    *,
    temperature: float = 1.0,
    n_bins: int = 15,
    n_resamples: int = 1000,
    seed: int = 0,
) -> ConsistencyTest:
    """Test whether the top-label ECE is larger than a perfectly calibrated model would show.

    The prediction and its confidence q_i = softmax(z_i / T) of each row are kept; under
    perfect calibration the correctness of row i is Bernoulli(q_i). The observed ECE
    (equal-width bins) is compared with the ECE of ``n_resamples`` correctness
    vectors drawn that way, on the same rows and bins. A small ``p_value`` means the
    miscalibration is real, not the ECE that any finite window shows.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        Frozen logits (or log-probabilities). A validated :class:`ScoredSet` stands for logits and labels (pass no ``labels``).
    labels : array of shape (n_samples,)
        True classes, integers in [0, n_classes).
    temperature : float, default=1.0
        The temperature the confidence is read at (finite, > 0).
    n_bins : int, default=15
        Number of equal-width bins; bin m is (m/M, (m+1)/M], confidence 0 in bin 0.
    n_resamples : int, default=1000
        Number of resampled correctness vectors (>= 1).
    seed : int, default=0
        Seed of ``np.random.default_rng`` (>= 0).

    Returns
    -------
    ConsistencyTest
        ``observed_ece``, ``p_value`` = (1 + #{null >= observed}) / (1 + n_resamples), the
        mean and 95th percentile of the null ECEs, and the binning (``n_bins``, "equal-width").

    Raises
    ------
    TypeError
        If an argument has the wrong type.
    ValueError
        If the logits or labels are malformed, ``temperature`` is not finite and > 0,
        ``n_bins < 1``, ``n_resamples < 1`` or ``seed < 0``.

    See Also
    --------
    consistency_resampling_from_stats : the same test from mergeable per-bin sums.

    References
    ----------
    Vaicenavicius et al., "Evaluating model calibration in classification", AISTATS 2019.

    Examples
    --------
    >>> rng = np.random.default_rng(3)
    >>> logits = 3.0 * rng.normal(size=(2000, 4))
    >>> true_probabilities = np.exp(logits / 2.0)  # read at T = 1, the model is over-confident
    >>> true_probabilities /= true_probabilities.sum(axis=1, keepdims=True)
    >>> labels = (rng.random((2000, 1)) > true_probabilities.cumsum(axis=1)).sum(axis=1)
    >>> test = consistency_resampling_test(logits, labels, temperature=1.0)
    >>> test.p_value < 0.01, test.observed_ece > test.null_quantile_95
    (True, True)
    >>> consistency_resampling_test(logits, labels, temperature=2.0).p_value > 0.01
    True
    """
    logits_, labels_ = checked_data(logits, labels)
    n = logits_.shape[0]
    temperature = check_temperature(temperature)
    n_bins = check_n_bins(n_bins)
    n_resamples = _check_resamples(n_resamples)
    seed = _check_seed(seed)

    predictions, confidence = top_label(logits_, temperature)
    bins = equal_width_bin_index(confidence, n_bins)
    # The observed and the null ECE use one formula (integer correct counts minus one
    # float64 confidence sum per bin), so a resample equal to the data compares as equal.
    confidence_sum = np.bincount(bins, weights=confidence, minlength=n_bins)
    correct_count = np.bincount(bins[predictions == labels_], minlength=n_bins)
    observed = float(np.abs(correct_count - confidence_sum).sum() / n)

    rng = np.random.default_rng(seed)
    null = np.empty(n_resamples, dtype=np.float64)
    start = 0
    for size in _blocks(n_resamples, n):
        drawn_correct = rng.random((size, n)) < confidence
        # One bincount over (resample, bin) pairs: flat index = resample * n_bins + bin.
        flat = (np.arange(size)[:, None] * n_bins + bins)[drawn_correct]
        counts = np.bincount(flat, minlength=size * n_bins).reshape(size, n_bins)
        null[start : start + size] = np.abs(counts - confidence_sum).sum(axis=1) / n
        start += size

    return _summarise_null(observed, null, n, n_bins, n_resamples, seed)


def consistency_resampling_from_stats(
    bin_gap_sum: ArrayLike,
    bin_variance_sum: ArrayLike,
    n: int,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> ConsistencyTest:
    """Consistency resampling of the equal-width ECE from mergeable per-bin sums.

    For a streamed window, only per-bin sums are kept (mergeable across chunks):
    ``bin_gap_sum[b]`` = Σ (correct_i - q_i) and ``bin_variance_sum[b]`` = Σ q_i (1 - q_i)
    over the rows in bin b. Under perfect calibration the gap sum of a bin is a sum of
    independent centred Bernoulli variables; it is drawn from its normal approximation
    Normal(0, bin_variance_sum[b]). The null ECE is Σ_b |draw_b| / n. With a
    :class:`~calibration._stats.CalibrationStats` ``s`` (equal-width bins), pass
    ``s.bin_correct - s.bin_confidence_sum``, ``s.bin_variance_sum`` and ``int(s.bin_count.sum())``.

    The normal approximation is close to :func:`consistency_resampling_test` when bins hold
    tens of rows or more; with a handful of rows per bin it can differ.

    Parameters
    ----------
    bin_gap_sum : array of shape (n_bins,)
        Per-bin sum of (correct - confidence), finite.
    bin_variance_sum : array of shape (n_bins,)
        Per-bin sum of confidence * (1 - confidence), finite and >= 0.
    n : int
        Number of rows the sums were taken over (>= 1).
    n_resamples : int, default=1000
        Number of null draws (>= 1).
    seed : int, default=0
        Seed of ``np.random.default_rng`` (>= 0).

    Returns
    -------
    ConsistencyTest
        As :func:`consistency_resampling_test`, with ``scheme`` "equal-width" and
        ``n_bins`` = len(bin_gap_sum).

    Raises
    ------
    TypeError
        If the sums are not numeric, or ``n``, ``n_resamples`` or ``seed`` are not integers.
    ValueError
        If the sums are not 1-D of one length, not finite, a variance sum is negative,
        ``n < 1``, ``n_resamples < 1`` or ``seed < 0``.

    References
    ----------
    Vaicenavicius et al., "Evaluating model calibration in classification", AISTATS 2019.

    Examples
    --------
    Three bins; the last is over-confident by 30 correct answers out of about 100 rows:

    >>> test = consistency_resampling_from_stats([1.5, -2.0, -30.0], [4.0, 9.0, 16.0], n=300)
    >>> round(test.observed_ece, 4)
    0.1117
    >>> test.p_value < 0.01
    True
    >>> consistency_resampling_from_stats([1.5, -2.0, 3.0], [4.0, 9.0, 16.0], n=300).p_value > 0.05
    True
    """
    gap, variance = _check_bin_sums(bin_gap_sum, bin_variance_sum)
    n = check_count(n, name="n")
    n_resamples = _check_resamples(n_resamples)
    seed = _check_seed(seed)

    n_bins = gap.shape[0]
    observed = float(np.abs(gap).sum() / n)
    scale = np.sqrt(variance)

    rng = np.random.default_rng(seed)
    null = np.empty(n_resamples, dtype=np.float64)
    start = 0
    for size in _blocks(n_resamples, n_bins):
        draws = rng.standard_normal((size, n_bins)) * scale
        null[start : start + size] = np.abs(draws).sum(axis=1) / n
        start += size

    return _summarise_null(observed, null, n, n_bins, n_resamples, seed)
