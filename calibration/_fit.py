"""Fitting the temperature: minimise mean NLL over log T inside explicit bounds.

References
----------
Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._defaults import DEFAULT_BOUNDS
from ._kernels import (
    COMPILED_MIN_ELEMENTS,
    N_EXPANSION_SUMS,
    closest_ratios,
    compiled_path,
    nearby_ratio,
    nll_expansion_sums,
)
from ._scored import ScoredSet, split_data, validated_set
from ._serialise import JsonResult
from ._temperature import log_temperature_interval
from ._validation import check_bounds, check_finite_logits, check_labels, check_logits

__all__ = [
    "TemperatureFit",
    "fit_temperature",
    "fit_result",
    "minimise_nll",
    "refuse_inverted_binary",
    "warm_start_sample_rows",
    "warm_start_search",
    "DEFAULT_BOUNDS",
]



@dataclass(frozen=True, slots=True)
class TemperatureFit(JsonResult):
    """The fitted temperature and the evidence around it.

    ``nll_before`` and ``nll_after`` are *mean* NLL in nats (``nll_reduction == "mean"``),
    at T = 1 and at the fitted T. ``at_bound`` is ``"lower"``/``"upper"`` when the optimum
    sits on a bound (such a fit must not be trusted), else ``None`` (``false`` in
    :meth:`to_dict`: a yes/no question answered in JSON).

    ``temperature_low`` and ``temperature_high`` bound the ``confidence_level`` interval of T
    had the rows been drawn at random from the traffic: a normal interval on log T with the
    sandwich standard error from the search's last pass, SD(g) / sqrt(n) / NLL'' (g the row's
    NLL gradient in 1/T, NLL'' the mean curvature at the optimum). Measured by simulation
    (labels drawn from softmax(z / T_true), 400 seeded runs): the 95 % interval covers T_true
    in 93–97 % of runs (docs/statistics.md). NaN (JSON null) for a fit on a bound.
    """

    temperature: float
    nll_before: float
    nll_after: float
    at_bound: Literal["lower", "upper"] | None
    n: int
    n_classes: int
    bounds: tuple[float, float]
    nll_reduction: Literal["mean"] = "mean"
    temperature_low: float = math.nan
    temperature_high: float = math.nan
    confidence_level: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON types; ``at_bound`` is ``false``, ``"lower"`` or ``"upper"``."""
        return JsonResult.to_dict(self) | {"at_bound": self.at_bound or False}



# A pass ends the search once the model's own error estimate (the size of the neglected
# seventh-order term, extrapolated from how fast the terms decay) moves 1/T by less than
# this share: 100 times below the 1e-6 the fit promises. The model is the degree-6 Taylor
# polynomial of the NLL in 1/T; on the real CIFAR logits in tests/data its minimiser
# from 3% (5%) away is within 1e-8 (1.2e-7) of the optimum, against 3e-6 (3e-5) for a
# quartic: so the warm start may be ~5% off and one full pass still ends the search.
_TOLERANCE = 1e-7
# The warm start: strided subsamples find it first, a quarter of the sample from T = 2,
# then, unless that is provably close enough (_expansion_point), the whole sample. Its
# rows, not its logits, set how close its optimum lands: the relative SD of a sample's
# 1/T is ~1 / sqrt(rows) whatever K (measured on the synthetic sets and the six real CIFAR
# files: 1,000 rows 1.8-4.1%, 2,000 rows 1.6-3.4%, 4,000 rows 1.2-1.5%), and its cost is
# its share of the rows. The sample takes 2% of the rows, 1,000 to 4,000 of them, at most
# a fifth of the data (smaller sets start from T = 1): from 5,000 rows up, one full pass
# is the rule (2 at most; 3 from T = 1 on the CIFAR files).
_WARM_START_SHARE = 0.02
_WARM_START_ROWS = (1_000, 4_000)
_WARM_START_MAX_ROW_SHARE = 0.2
# The sample is copied (contiguous) only up to this share of the input's bytes: memory
# beyond the input stays under 10% (1,000 rows of K = 1,000 are 5% of 20,000 rows: the
# sample stays a strided view, its quarter is gathered).
_WARM_START_COPY_SHARE = 0.03
# The coarse sample's optimum ends the warm start when the full pass from it would still
# end the search with the full data's optimum this many standard errors away (3: 0.3% of
# random samples fall further; see _expansion_point). Measured: synthetic sets of
# 200,000x100, 20,000x1,000 and 200,000x10 and the CIFAR-100 LeNet file pass from the
# coarse quarter; a 50,000x100 synthetic set (a 250-row quarter) and the other five CIFAR
# files go on to the fine stage.
_WARM_START_REACH = 3.0
_WARM_START_FROM = 0.5  # 1/T where the coarse stage starts
_MAX_PASSES = 100

Expansion = Callable[[float, bool], NDArray[np.float64]]


def fit_temperature(
    logits: ArrayLike | ScoredSet, labels: ArrayLike | None = None, *, bounds: tuple[float, float] = DEFAULT_BOUNDS
) -> TemperatureFit:
    """Fit one temperature T > 0 by minimising the mean NLL of softmax(logits / T).

    The search runs over 1/T, where the mean NLL is convex, inside ``bounds`` on T. Each
    pass over the data gives the NLL and its first six derivatives in 1/T; the polynomial
    they define is minimised exactly, so a warm start from a 2% subsample usually needs a
    single full pass. Sums accumulate in float64 whatever the input dtype, so float32
    logits fit to the float64 optimum (within 1e-6 relative).

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        Frozen logits (or log-probabilities), finite, ``n_classes >= 2``. A validated
        :class:`ScoredSet` stands for logits and labels (pass no ``labels``) and is not
        checked again: the fit reads its logits only in its own passes.
    labels : array of shape (n_samples,)
        True classes, integers in ``[0, n_classes)``.
    bounds : (float, float), default=(0.05, 20.0)
        Lower and upper bound on T. An optimum on a bound is returned with ``at_bound``
        set: such a fit must not be trusted (e.g. a calibration set without errors).

    Returns
    -------
    TemperatureFit
        ``temperature``, mean NLL before (T = 1) and after, ``at_bound``, sizes, bounds.

    Raises
    ------
    ValueError
        Bad logits, labels or bounds; or a binary set where the classifier is right less
        than half the time (no positive T can calibrate it: inverted labels?).
    RuntimeError
        The search did not converge (never seen in practice; the message gives the state).

    References
    ----------
    Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.

    Examples
    --------
    >>> logits = np.tile([np.log(9.0), 0.0], (10, 1))
    >>> labels = np.array([0] * 8 + [1] * 2)
    >>> fit = fit_temperature(logits, labels)
    >>> round(fit.temperature, 6), round(float(np.log(9) / np.log(4)), 6)
    (1.584963, 1.584963)
    >>> fit.at_bound is None and fit.nll_after < fit.nll_before
    True
    """
    scored = validated_set(logits)
    if scored is not None and labels is None:
        return _fit_checked(scored.logits, scored.labels, check_bounds(bounds))
    raw_logits, raw_labels = split_data(logits, labels)
    checked_logits = check_logits(raw_logits, check_finite=False)
    n_samples, n_classes = checked_logits.shape
    # Large inputs: the finiteness check rides on the passes (a non-finite logit makes the
    # sums NaN; then the scan names the row, with check_logits' own error, before anything
    # is returned), which saves a whole read. Small or binary inputs are scanned up front.
    folded = checked_logits.size >= COMPILED_MIN_ELEMENTS and n_classes > 2
    if not folded:
        check_finite_logits(checked_logits)
    try:
        checked_labels = check_labels(raw_labels, n_samples, n_classes)
        checked_bounds = check_bounds(bounds)
    except (TypeError, ValueError):
        check_finite_logits(checked_logits)  # the logits' error first, as check_logits orders it
        raise
    return _fit_checked(checked_logits, checked_labels, checked_bounds)


def _fit_checked(
    checked_logits: NDArray[np.floating[Any]], checked_labels: NDArray[np.intp], bounds: tuple[float, float]
) -> TemperatureFit:
    """:func:`fit_temperature` on checked inputs (a non-finite logit still shows in the passes'
    sums, and is then named by :func:`check_finite_logits`: see :func:`_expansion`)."""
    n_samples, n_classes = checked_logits.shape
    if n_classes == 2:
        correct = int(np.count_nonzero(checked_logits.argmax(axis=1) == checked_labels))
        refuse_inverted_binary(correct, n_samples)

    # The full pass expands at a ratio p/q of small integers near the warm start: there the
    # NLL at T = 1 (nll_before, exact) comes cheap, the cheaper the fewer bits p and q have
    # (see _kernels.closest_ratios); the degree-6 model absorbs the distance.
    start = _warm_start(checked_logits, checked_labels, bounds)
    result = minimise_nll(_expansion(checked_logits, checked_labels), bounds, start=start)
    return fit_result(result, n_samples, n_classes, bounds)


def fit_result(result: NllMinimum, n_samples: int, n_classes: int, bounds: tuple[float, float]) -> TemperatureFit:
    """The :class:`TemperatureFit` of a finished search (in memory or over partitions)."""
    lower, upper = bounds
    temperature = 1.0 / result.inverse_temperature
    nll_after = result.nll
    at_bound = result.at_bound
    # By convexity the optimum beats T = 1; keep the comparison explicit all the same.
    if result.nll_at_one < nll_after and lower <= 1.0 <= upper:
        temperature, nll_after, at_bound = 1.0, result.nll_at_one, None
    low, high = (math.nan, math.nan) if at_bound is not None else log_temperature_interval(
        temperature, _log_temperature_error(result), _CONFIDENCE_LEVEL
    )
    return TemperatureFit(
        temperature=temperature,
        nll_before=result.nll_at_one,
        nll_after=nll_after,
        at_bound=at_bound,
        n=n_samples,
        n_classes=n_classes,
        bounds=(lower, upper),
        temperature_low=low,
        temperature_high=high,
        confidence_level=_CONFIDENCE_LEVEL,
    )


_CONFIDENCE_LEVEL = 0.95


def _log_temperature_error(result: NllMinimum) -> float:
    """The sandwich SE of log T at the optimum, from the search's last pass.

    ``standard_error`` divides the rows' gradient spread by the curvature where the pass
    expanded; the curvature at the optimum, a step h away, is the degree-6 model's:
    Σ_{j>=2} D_j h^(j-2) / (j-2)!. SE(log T) = SE(1/T) · T.
    """
    derivatives = result.derivatives
    if not (math.isfinite(result.standard_error) and derivatives[1] > 0.0):
        return math.nan
    spread = result.standard_error * derivatives[1]  # SD(g) / sqrt(n)
    step = result.inverse_temperature - result.expanded_at
    curvature = sum(derivatives[j] * step ** (j - 1) / _FACTORIALS[j - 1] for j in range(1, len(derivatives)))
    if not curvature > 0.0:
        return math.nan
    return spread / curvature / result.inverse_temperature


@dataclass(frozen=True, slots=True)
class NllMinimum:
    """Where :func:`minimise_nll` stopped: 1/T, mean NLL there and at T = 1, passes used.

    ``expanded_at`` is the 1/T of the last pass, ``derivatives`` the mean NLL's first six
    derivatives there, and ``standard_error`` the sampling error of the optimum's 1/T had
    the rows been drawn at random (row gradients' SD / sqrt(n) / curvature).
    """

    inverse_temperature: float
    nll: float
    nll_at_one: float
    at_bound: Literal["lower", "upper"] | None
    passes: int
    expanded_at: float
    derivatives: tuple[float, ...]
    standard_error: float


def minimise_nll(
    expand: Expansion, bounds: tuple[float, float], *, start: float = 1.0, tolerance: float = _TOLERANCE
) -> NllMinimum:
    """Minimise the mean NLL over 1/T given a pass ``expand(beta, with_nll_at_one)``.

    ``expand`` returns the sums of :func:`calibration._kernels.nll_expansion_sums` (it may
    add up partial sums computed on many machines: the sums are mergeable). Inputs trusted.
    """
    lower, upper = bounds
    beta_low, beta_high = 1.0 / upper, 1.0 / lower
    beta = min(max(start, beta_low), beta_high)
    nll_at_one = float("nan")
    for passes in range(1, _MAX_PASSES + 1):
        sums = [float(value) for value in expand(beta, passes == 1)]
        n = sums[0]
        if passes == 1:
            nll_at_one = sums[6] / n
        # The NLL's derivatives in 1/T: the mean gradient, then the mean cumulants 2..6.
        derivatives = [sums[index] / n for index in (2, 3, 4, 5, 7, 8)]
        gradient, curvature = derivatives[0], derivatives[1]

        def found(
            inverse_temperature: float, nll: float, at_bound: Literal["lower", "upper"] | None
        ) -> NllMinimum:
            spread = max(sums[9] / n - gradient * gradient, 0.0)
            error = math.sqrt(spread / n) / curvature if curvature > 0.0 else float("inf")
            return NllMinimum(
                inverse_temperature, nll, nll_at_one, at_bound, passes, beta, tuple(derivatives), error
            )

        if curvature <= 1e-300 and abs(gradient) <= 1e-15:
            # Every row is flat (all logits equal): the NLL does not depend on T.
            return found(beta, sums[1] / n, None)
        # Trust region: at most double 1/T, or halve it, per pass.
        low_step, high_step = max(-0.5 * beta, beta_low - beta), min(beta, beta_high - beta)
        step, model = _polynomial_minimum(derivatives, low_step, high_step)
        on_edge = step in (low_step, high_step) and step not in (beta_low - beta, beta_high - beta)
        if step == 0.0 and beta in (beta_low, beta_high):
            return found(beta, sums[1] / n, "lower" if beta == beta_high else "upper")
        if not on_edge and _truncation_error(step, derivatives) <= tolerance * beta:
            new_beta = beta + step
            bound: Literal["lower", "upper"] | None = None
            if new_beta >= beta_high:
                bound = "lower"
            elif new_beta <= beta_low:
                bound = "upper"
            return found(new_beta, sums[1] / n + model, bound)
        beta = min(max(beta + step, beta_low), beta_high)
    raise RuntimeError(
        f"temperature search did not converge in {_MAX_PASSES} passes (last 1/T = {beta!r}); "
        "please report this with the data's shape"
    )


_FACTORIALS = [math.factorial(j) for j in range(8)]


def _truncation_error(step: float, derivatives: list[float]) -> float:
    """How far the neglected seventh-order term could move the polynomial's minimiser.

    The Taylor terms t_k = kappa_k h^k / k! of the NLL in 1/T decay at some rate rho; the
    first neglected one is about max_k rho^(7-k) t_k, and its slope 7 t_7 / h, divided by
    the curvature, is the shift of the minimiser. A step that is small against 1/T can
    still be large against the data's scale (a zero-error set at large 1/T): this catches it.
    """
    if step == 0.0:
        return 0.0
    curvature = abs(derivatives[1])
    terms = {k: abs(derivatives[k - 1] * step**k) / _FACTORIALS[k] for k in range(2, 7)}
    if terms[2] <= 0.0:
        return float("inf")
    rho = max((terms[k] / terms[2]) ** (1.0 / (k - 2)) for k in range(3, 7))
    seventh = max(rho ** (7 - k) * terms[k] for k in range(2, 7))
    return float(7.0 * seventh / (abs(step) * curvature))


def _polynomial_minimum(derivatives: list[float], low: float, high: float) -> tuple[float, float]:
    """Minimise sum_j D_j h^j / j! (D_1 .. D_6 = derivatives) over h in [low, high]: (h, value)."""
    # The model's slope sum_j D_j h^(j-1) / (j-1)!, highest power first, leading zeros dropped.
    slope = [derivatives[j] / _FACTORIALS[j] for j in range(len(derivatives))][::-1]
    while len(slope) > 1 and slope[0] == 0.0:
        slope = slope[1:]
    candidates = [low, high, 0.0]
    for root in np.roots(slope):
        if abs(root.imag) <= 1e-12 * max(1.0, abs(root.real)) and low <= root.real <= high:
            candidates.append(float(root.real))
    values = [sum(d * h ** (j + 1) / _FACTORIALS[j + 1] for j, d in enumerate(derivatives)) for h in candidates]
    best = int(np.argmin(values))
    return candidates[best], values[best]


def _expansion(
    logits: NDArray[np.floating[Any]],
    labels: NDArray[np.intp],
    *,
    at_one: bool = True,
    compiled: bool | None = None,
    scan: NDArray[np.floating[Any]] | None = None,
    piece_rows: int | None = None,
) -> Expansion:
    """The pass over (logits, labels) that :func:`minimise_nll` calls.

    Non-finite sums mean a non-finite logit (any NaN or infinity in a row makes its
    ``e * d`` NaN) or a row spanning more than the spread limit (the passes make its sums
    NaN): ``scan`` (the whole input, of which ``logits`` may be a subsample) is then
    searched and the offending row refused with :func:`check_logits`' error. Sums that
    overflow on accepted logits mean a temperature bound far outside any sensible range;
    that is refused too, never handed to the polynomial search.
    """
    whole = logits if scan is None else scan
    # A strided subsample is read in pieces of at most piece_rows rows: the kernels copy a
    # strided piece, so each copy stays under the warm start's share of the input's bytes.
    piece_rows = logits.shape[0] if piece_rows is None else max(1, piece_rows)

    def expand(beta: float, first: bool) -> NDArray[np.float64]:
        sums = np.zeros(N_EXPANSION_SUMS, dtype=np.float64)
        for start in range(0, logits.shape[0], piece_rows):
            stop = start + piece_rows
            sums += nll_expansion_sums(
                logits[start:stop], labels[start:stop], beta, with_nll_at_one=at_one and first, compiled=compiled
            )
        if not np.isfinite(sums).all():
            check_finite_logits(whole)
            raise ValueError(
                f"the NLL and its derivatives overflow float64 at T = {1.0 / beta:.6g}; the logits are finite and "
                "within the spread limit, so the bounds on T reach too far: keep them within a few decades of 1 "
                f"(the default is {DEFAULT_BOUNDS})"
            )
        return sums

    return expand


def _warm_start(logits: NDArray[np.floating[Any]], labels: NDArray[np.intp], bounds: tuple[float, float]) -> float:
    """The 1/T where the full pass should expand: near the optimum of a strided subsample, at
    a ratio of few bits (see :func:`_expansion_point`); 1.0 for small data (no warm start).

    Strided, not random: deterministic, and reproducible by a partitioned dataset (each
    partition takes the rows whose global index the stride divides).
    """
    rows, stride = warm_start_sample_rows(logits.shape[0])
    if rows == 0:
        return 1.0
    sample, sample_labels = logits[::stride], labels[::stride]
    # The subsamples take the compiled kernels when the full data would (by its size, and
    # whether the kernel is compiled yet), on the calling thread (they are below
    # PARALLEL_MIN_ELEMENTS: no parallel region to wait for).
    compiled = compiled_path("expansion_sums_serial", logits.size, logits.dtype)
    return warm_start_search(
        _subsample_expansion(logits, sample[::4], sample_labels[::4], compiled),
        lambda: _subsample_expansion(logits, sample, sample_labels, compiled),
        bounds,
    )


def warm_start_sample_rows(n_samples: int) -> tuple[int, int]:
    """``(rows, stride)`` of the warm-start sample of ``n_samples`` rows: the rows whose index
    the stride divides (``rows == 0``: no warm start, start from T = 1)."""
    rows = _warm_start_rows(n_samples)
    return (rows, n_samples // rows) if rows else (0, 0)


def warm_start_search(coarse_expansion: Expansion, fine_expansion: Callable[[], Expansion], bounds: tuple[float, float]) -> float:
    """The warm start's search, given the passes over its sample's quarter and over the sample.

    First the quarter (gathered, so its passes read it from cache), from T = 2: fine-tuned
    nets are overconfident, and T in [1, 4] is one trust-region step away. Then, unless its
    last pass was already within a standard error of the optimum, one more pass there: its
    derivatives and standard error say whether the full pass can start from it. Otherwise the
    whole sample (built only then), from there.
    """
    coarse = minimise_nll(coarse_expansion, bounds, start=_WARM_START_FROM, tolerance=1e-3)
    if coarse.at_bound is None and abs(coarse.inverse_temperature - coarse.expanded_at) > coarse.standard_error:
        coarse = minimise_nll(coarse_expansion, bounds, start=coarse.inverse_temperature, tolerance=1e-3)
    del coarse_expansion
    point = _expansion_point(coarse)
    if point is not None:
        return point
    # Then the whole sample, from there (one pass, as a rule).
    fine = minimise_nll(fine_expansion(), bounds, start=coarse.inverse_temperature, tolerance=1e-4)
    point = _expansion_point(fine)
    if point is not None:
        return point
    # Not provably close: the data's convergence radius is narrow, so expand as near the
    # sample's optimum as a ratio allows (within 0.5%; more bits cost a few percent of a
    # pass, a second full pass costs 100%). Measured on the six CIFAR files x 16 row
    # orders: 83 of 96 fits in one full pass, against 76 with a 3% budget for few bits.
    return nearby_ratio(fine.inverse_temperature)


def _subsample_expansion(
    logits: NDArray[np.floating[Any]], sample: NDArray[np.floating[Any]], labels: NDArray[np.intp], compiled: bool
) -> Expansion:
    """The pass over a strided subsample of ``logits``: gathered once when it is small against
    the input; else (few rows of many classes) a strided view the kernels copy in bounded
    pieces, so memory beyond the input stays under _WARM_START_COPY_SHARE of its bytes."""
    labels = np.ascontiguousarray(labels)
    if sample.nbytes <= _WARM_START_COPY_SHARE * logits.nbytes:
        return _expansion(np.ascontiguousarray(sample), labels, at_one=False, compiled=compiled, scan=logits)
    piece_rows = int(_WARM_START_COPY_SHARE * logits.nbytes) // sample[0].nbytes
    return _expansion(sample, labels, at_one=False, compiled=compiled, scan=logits, piece_rows=piece_rows)


def _expansion_point(warm: NllMinimum) -> float | None:
    """Where the full pass should expand, given a sample's optimum ``warm``: the cheapest ratio
    (fewest bits, :func:`_kernels.closest_ratios`) from which that pass will end the search, or
    None when even ``warm``'s own 1/T is not provably close enough.

    The full data's optimum is taken to lie within _WARM_START_REACH standard errors of the
    sample's; the step from the expansion point to anywhere in that interval must pass the
    full pass's own truncation test, judged on the sample's derivatives. Data whose NLL is
    nearly polynomial in 1/T (a wide convergence radius, as on the synthetic sets) pass
    from the coarse sample, at a ratio of few bits; data with a nearby singularity
    (overconfident nets with many near-zero losses: five of the six CIFAR files) do not,
    and get the fine stage. A wrong call costs a second full pass, never exactness: the full pass runs
    the test again on the full data.
    """
    if warm.at_bound is not None or not math.isfinite(warm.standard_error):
        return None
    beta = warm.inverse_temperature
    slack = abs(beta - warm.expanded_at) + _WARM_START_REACH * warm.standard_error
    derivatives = list(warm.derivatives)
    for _, ratio in [*closest_ratios(beta), (0, beta)]:
        reach = abs(ratio - beta) + slack
        if max(_truncation_error(reach, derivatives), _truncation_error(-reach, derivatives)) <= _TOLERANCE * beta:
            return ratio
    return None


def _warm_start_rows(n_samples: int) -> int:
    """Rows of the warm-start sample for ``n_samples`` rows (0: no warm start)."""
    rows = min(max(round(_WARM_START_SHARE * n_samples), _WARM_START_ROWS[0]), _WARM_START_ROWS[1])
    return rows if rows <= _WARM_START_MAX_ROW_SHARE * n_samples else 0


def refuse_inverted_binary(correct: int, n: int) -> None:
    """Refuse a binary set whose classifier is right on fewer than half of its ``n`` rows."""
    if 2 * correct < n:
        raise ValueError(
            f"the binary classifier is right on {correct} of {n} calibration examples "
            f"({correct / n:.1%}, less than half): no positive temperature can calibrate it, because "
            "the winning class always has confidence above 0.5. Check for an inverted label mapping "
            "(classes 0 and 1 swapped) or a broken model."
        )
