"""Per-row top-label scores at one temperature, and calibration statistics grouped from them.

One pass over the logits gives every row's predicted class, top-label confidence,
correctness, NLL and Brier terms, and the NLL's first two derivatives in 1/T (the scores of
the temperature test, :mod:`calibration._temperature`). Any grouping of the rows (per group, overall, the gate's
accepted set) is then a ``bincount`` over those length-N vectors, never another pass over
the N × K logits: a window split into G groups costs one pass, not G + 1.

The arithmetic is that of :func:`calibration._kernels.calibration_sums` (``d = z - max z``,
``e = exp(d / T)``, confidence ``1 / Σ e``), so the statistics built here equal
:meth:`CalibrationStats.from_logits` on the same rows: counts exactly, sums to float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._kernels import chunk_rows
from ._stats import CalibrationStats, equal_width_bin_index
from ._scored import ScoredSet, checked_data
from ._validation import check_n_bins, check_temperature

__all__ = ["TopLabelScores"]


@dataclass(frozen=True, slots=True, eq=False)
class TopLabelScores:
    """Per-row top-label quantities of labelled logits at one temperature.

    ``predictions`` is the first arg-max of the logits (a positive T never changes it),
    ``confidence`` its softmax probability at ``temperature``, ``correct`` whether it is the
    label, ``nll`` the row's negative log-likelihood of its label in nats (exact
    log-softmax, no clipping) and ``brier`` its multi-class Brier term
    Σ_k (p_k − [y = k])². ``gradient`` and ``curvature`` are the first and second derivative
    of the row's NLL in 1/T at ``temperature``: E_p[z] − z_y and Var_p[z] (see
    :class:`TemperatureStats`). All arrays have shape (n_samples,); sums accumulate in float64.

    Examples
    --------
    >>> scores = TopLabelScores.from_logits(np.log([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]]), [1, 0, 0])
    >>> scores.predictions.tolist(), scores.confidence.round(6).tolist(), scores.correct.tolist()
    ([1, 0, 1], [0.7, 0.9, 0.6], [True, True, False])
    >>> round(scores.calibration_stats(n_bins=3).ece, 6)
    0.333333
    >>> by_group = scores.grouped_calibration_stats([0, 1, 0], 2, n_bins=3)
    >>> [stats.n for stats in by_group]
    [2, 1]
    """

    temperature: float
    n_classes: int
    predictions: NDArray[np.intp]
    confidence: NDArray[np.float64]
    correct: NDArray[np.bool_]
    nll: NDArray[np.float64]
    brier: NDArray[np.float64]
    gradient: NDArray[np.float64]
    curvature: NDArray[np.float64]

    @classmethod
    def from_logits(
        cls, logits: ArrayLike | ScoredSet, labels: ArrayLike | None = None, *, temperature: float = 1.0,
        check_finite: bool = True,
    ) -> TopLabelScores:
        """Score every row of ``logits`` against ``labels`` at ``temperature``: one pass.

        Parameters
        ----------
        logits : array of shape (n_samples, n_classes), or ScoredSet
            Frozen logits or log-probabilities (float32 read as it is). A validated
            :class:`ScoredSet` stands for logits and labels (pass no ``labels``).
        labels : array of shape (n_samples,)
            True classes in [0, n_classes).
        temperature : float, default=1.0
            T > 0; the logits are divided by it before the softmax.
        check_finite : bool, default=True
            Scan every logit (finite, each row's spread) first; ``False`` for logits already
            checked that way (e.g. a chunk its reader checked once for all its uses).

        Returns
        -------
        TopLabelScores

        Raises
        ------
        ValueError
            If the logits are not 2-D with at least two columns and finite values, a label is
            outside [0, n_classes), or the temperature is not finite and > 0.
        TypeError
            If the logits or labels are not numeric.

        Examples
        --------
        >>> scores = TopLabelScores.from_logits(np.log([[0.2, 0.8]]), [1], temperature=2.0)
        >>> scores.confidence.round(6).tolist(), scores.nll.round(6).tolist()
        ([0.666667], [0.405465])
        """
        checked, checked_labels = checked_data(logits, labels, check_finite=check_finite)
        return _score_rows(checked, checked_labels, check_temperature(temperature))

    @property
    def n(self) -> int:
        """Rows scored."""
        return int(self.confidence.shape[0])

    def calibration_stats(self, *, n_bins: int = 15) -> CalibrationStats:
        """The :class:`CalibrationStats` of all the rows (equal-width bins).

        Parameters
        ----------
        n_bins : int, default=15
            Equal-width bins (m/M, (m+1)/M] on the confidence; confidence 0 goes to the first.

        Returns
        -------
        CalibrationStats

        Examples
        --------
        >>> TopLabelScores.from_logits(np.log([[0.3, 0.7]]), [1]).calibration_stats(n_bins=2).bin_count.tolist()
        [0, 1]
        """
        return self.grouped_calibration_stats(np.zeros(self.n, dtype=np.intp), 1, n_bins=n_bins)[0]

    def grouped_calibration_stats(
        self, group_codes: ArrayLike, n_groups: int, *, n_bins: int = 15
    ) -> tuple[CalibrationStats, ...]:
        """One :class:`CalibrationStats` per group, from one ``bincount`` over group × bin.

        The statistics of the union of the groups are their sum (``+``); a group with no row
        gets the empty statistics.

        Parameters
        ----------
        group_codes : array of shape (n_samples,)
            Integer group of each row, in [0, n_groups).
        n_groups : int
            Number of groups (at least 1).
        n_bins : int, default=15
            Equal-width bins on the confidence.

        Returns
        -------
        tuple of CalibrationStats
            Indexed by group code; length ``n_groups``.

        Raises
        ------
        ValueError
            If ``group_codes`` is not 1-D with one code per row, or a code is outside
            [0, n_groups).
        TypeError
            If ``group_codes`` does not hold integers.

        Examples
        --------
        >>> scores = TopLabelScores.from_logits(np.log([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]]), [1, 0, 0])
        >>> first, second = scores.grouped_calibration_stats([1, 0, 1], 2, n_bins=3)
        >>> first.n, second.n, (first + second).n
        (1, 2, 3)
        """
        n_bins = check_n_bins(n_bins)
        if isinstance(n_groups, bool) or not isinstance(n_groups, (int, np.integer)) or n_groups < 1:
            raise ValueError(f"n_groups must be an integer >= 1; got {n_groups!r}")
        n_groups = int(n_groups)
        codes = np.asarray(group_codes)
        if codes.shape != (self.n,):
            raise ValueError(f"group_codes must be 1-D with one code per row ({self.n}); got shape {codes.shape}")
        if codes.dtype.kind not in "iu":
            raise TypeError(f"group_codes must be integers in [0, {n_groups}); got dtype {codes.dtype}")
        codes = codes.astype(np.intp, copy=False)
        if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= n_groups):
            row = int(np.argmin((codes >= 0) & (codes < n_groups)))
            raise ValueError(f"group_codes row {row} is {codes[row]}; group codes must be in [0, {n_groups})")
        # One cell per (group, bin): every per-group, per-bin sum is one bincount over the rows.
        cells = codes * n_bins + equal_width_bin_index(self.confidence, n_bins)
        size = n_groups * n_bins

        def per_cell(weights: NDArray[Any] | None) -> NDArray[Any]:
            return np.bincount(cells, weights=weights, minlength=size).reshape(n_groups, n_bins)

        count = per_cell(None).astype(np.int64)
        confidence_sum = per_cell(self.confidence)
        correct = per_cell(self.correct).astype(np.int64)
        variance_sum = per_cell(self.confidence * (1.0 - self.confidence))
        nll_sum = np.bincount(codes, weights=self.nll, minlength=n_groups)
        brier_sum = np.bincount(codes, weights=self.brier, minlength=n_groups)
        return tuple(
            CalibrationStats(
                n_bins=n_bins,
                temperature=self.temperature,
                n_classes=self.n_classes,
                bin_count=count[g],
                bin_confidence_sum=confidence_sum[g],
                bin_correct=correct[g],
                bin_variance_sum=variance_sum[g],
                nll_sum=float(nll_sum[g]),
                brier_sum=float(brier_sum[g]),
            )
            for g in range(n_groups)
        )


def _nll_derivatives(
    d: NDArray[np.float64], e: NDArray[np.float64], s0: NDArray[np.float64], d_label: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-row g and h from a chunk's shifted logits ``d`` (row max 0), ``e = exp(β d)``, its
    row sums ``s0`` and the label's ``d``: the quantities the top-label pass already holds."""
    weighted = e * d
    mean = weighted.sum(axis=1) / s0
    # Var_p[d] = E_p[d²] − E_p[d]²: d <= 0 and the top class (d = 0) carries the most mass,
    # so E_p[d]² never dwarfs the variance; clamp the rounding below 0.
    second = np.einsum("ij,ij->i", weighted, d) / s0
    return mean - d_label, np.maximum(second - mean * mean, 0.0)


def _score_rows(
    logits: NDArray[np.floating[Any]], labels: NDArray[np.intp], temperature: float
) -> TopLabelScores:
    """The one pass over the logits (inputs trusted), chunked so temporaries stay near 8 MB."""
    n = logits.shape[0]
    beta = 1.0 / temperature
    confidence = np.empty(n, dtype=np.float64)
    nll = np.empty(n, dtype=np.float64)
    brier = np.empty(n, dtype=np.float64)
    gradient = np.empty(n, dtype=np.float64)
    curvature = np.empty(n, dtype=np.float64)
    predictions = np.empty(n, dtype=np.intp)
    step = chunk_rows(logits.shape[1])
    for start in range(0, n, step):
        chunk = logits[start : start + step]
        chunk_labels = labels[start : start + step]
        stop = start + chunk.shape[0]
        # Promote before subtracting, as the kernels do: float32 input gives the same numbers.
        d = chunk.astype(np.float64)
        d -= d.max(axis=1, keepdims=True)
        rows = np.arange(d.shape[0])
        e = np.exp(beta * d)
        s0 = e.sum(axis=1)
        # The top class has d = 0, so its probability is exactly 1 / s0.
        confidence[start:stop] = 1.0 / s0
        predictions[start:stop] = chunk.argmax(axis=1)
        d_label = d[rows, chunk_labels]
        nll[start:stop] = np.log(s0) - beta * d_label
        gradient[start:stop], curvature[start:stop] = _nll_derivatives(d, e, s0, d_label)
        # Brier: sum_k (p_k - [y = k])^2 = sum_k p_k^2 - 2 p_y + 1.
        brier[start:stop] = (e * e).sum(axis=1) / (s0 * s0) - 2.0 * (e[rows, chunk_labels] / s0) + 1.0
    return TopLabelScores(
        temperature=temperature,
        n_classes=int(logits.shape[1]),
        predictions=predictions,
        confidence=confidence,
        correct=predictions == labels,
        nll=nll,
        brier=brier,
        gradient=gradient,
        curvature=curvature,
    )
