"""Mergeable sufficient statistics of calibration over a window.

A window of traffic is summarised by per-bin counts and sums plus NLL and Brier sums at
one temperature. Two summaries add up exactly (counts) or to float rounding (sums) to the
summary of the union, so hourly windows make a daily one and chunks computed on different
machines merge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._kernels import calibration_sums
from ._serialise import JsonResult, json_safe
from ._scored import ScoredSet, checked_data
from ._validation import check_n_bins, check_temperature

__all__ = ["CalibrationStats", "ReliabilityTable", "equal_width_bin_index", "equal_width_edges", "summarise_checked"]


def equal_width_edges(n_bins: int) -> NDArray[np.float64]:
    """The M + 1 edges 0, 1/M, ..., 1 of the equal-width bins."""
    return np.linspace(0.0, 1.0, n_bins + 1)


def equal_width_bin_index(confidence: NDArray[np.float64], n_bins: int) -> NDArray[np.intp]:
    """Bin of each confidence: bin m (0-based) is (m/M, (m+1)/M]; confidence 0 goes to bin 0.

    ``searchsorted(..., side="left")`` on the interior edges puts a value equal to an edge
    into the bin that edge closes, which is the half-open convention above.

    >>> equal_width_bin_index(np.array([0.0, 1 / 3, 0.34, 1.0]), 3).tolist()
    [0, 0, 1, 2]
    """
    return np.searchsorted(equal_width_edges(n_bins)[1:-1], confidence, side="left")


def summarise_checked(
    logits: NDArray[np.floating[Any]], labels: NDArray[np.intp], temperature: float, n_bins: int
) -> CalibrationStats:
    """:meth:`CalibrationStats.from_logits` on checked inputs (one calibration pass, no checks)."""
    count, confidence_sum, correct, variance_sum, nll_sum, brier_sum = calibration_sums(
        logits, labels, 1.0 / temperature, n_bins
    )
    return CalibrationStats(
        n_bins=n_bins,
        temperature=temperature,
        n_classes=int(logits.shape[1]),
        bin_count=count,
        bin_confidence_sum=confidence_sum,
        bin_correct=correct,
        bin_variance_sum=variance_sum,
        nll_sum=nll_sum,
        brier_sum=brier_sum,
    )


# The per-bin columns of a reliability table, in the order a row shows them.
_BIN_COLUMNS = ("lower", "upper", "count", "mean_confidence", "accuracy", "gap", "sparse")


@dataclass(frozen=True, slots=True, eq=False)
class ReliabilityTable(JsonResult):
    """Per-bin reliability. Empty bins have count 0 and NaN confidence/accuracy/gap.

    ``gap`` is accuracy - mean confidence (negative: over-confident). ``sparse`` marks bins
    with fewer than ``min_count`` examples (empty bins included): read them as noise, not
    signal. ``scheme`` and ``n_bins`` are the binning every ECE must carry.
    """

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    count: NDArray[np.int64]
    mean_confidence: NDArray[np.float64]
    accuracy: NDArray[np.float64]
    gap: NDArray[np.float64]
    sparse: NDArray[np.bool_]
    n_bins: int
    scheme: str
    min_count: int

    @property
    def n(self) -> int:
        """Examples in the table."""
        return int(self.count.sum())

    @property
    def ece(self) -> float:
        """Σ |B_m|/N · |acc(B_m) − conf(B_m)| over non-empty bins."""
        filled = self.count > 0
        return float(np.sum(self.count[filled] * np.abs(self.gap[filled])) / self.n)

    @property
    def mce(self) -> float:
        """max over non-empty bins of |acc(B_m) − conf(B_m)|."""
        filled = self.count > 0
        return float(np.max(np.abs(self.gap[filled])))

    def rows(self) -> list[dict[str, Any]]:
        """One dict per bin (NaN as None), for JSON and tables."""
        columns = {name: json_safe(getattr(self, name)) for name in _BIN_COLUMNS}
        return [{name: columns[name][m] for name in _BIN_COLUMNS} for m in range(self.n_bins)]

    def to_dict(self) -> dict[str, Any]:
        """The binning (``n_bins``, ``scheme``, ``min_count``) and ``bins``: one row per bin."""
        return {"n_bins": self.n_bins, "scheme": self.scheme, "min_count": self.min_count, "bins": self.rows()}

    @classmethod
    def from_bin_sums(
        cls,
        lower: NDArray[np.float64],
        upper: NDArray[np.float64],
        count: NDArray[np.int64],
        confidence_sum: NDArray[np.float64],
        correct_sum: NDArray[np.floating[Any]] | NDArray[np.int64],
        *,
        scheme: str,
        min_count: int,
    ) -> ReliabilityTable:
        """Build a table from per-bin counts and sums (empty bins become NaN)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_confidence = np.where(count > 0, confidence_sum / count, np.nan)
            accuracy = np.where(count > 0, correct_sum / count, np.nan)
        return cls(
            lower=lower,
            upper=upper,
            count=count.astype(np.int64),
            mean_confidence=mean_confidence,
            accuracy=accuracy,
            gap=accuracy - mean_confidence,
            sparse=count < min_count,
            n_bins=int(count.shape[0]),
            scheme=scheme,
            min_count=min_count,
        )


@dataclass(frozen=True, slots=True, eq=False)
class CalibrationStats:
    """Per-bin counts and sums (equal-width bins) plus NLL and Brier sums at one temperature.

    Every metric except classwise and equal-mass ECE follows from these fields; ``+`` merges
    two windows (same ``n_bins``, ``temperature`` and ``n_classes``).

    Examples
    --------
    >>> logits = np.log([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]])
    >>> stats = CalibrationStats.from_logits(logits, [1, 0, 0], n_bins=3)
    >>> round(stats.ece, 6), stats.n
    (0.333333, 3)
    >>> merged = CalibrationStats.from_logits(logits[:1], [1], n_bins=3) + CalibrationStats.from_logits(
    ...     logits[1:], [0, 0], n_bins=3)
    >>> merged.bin_count.tolist() == stats.bin_count.tolist()
    True
    """

    n_bins: int
    temperature: float
    n_classes: int
    bin_count: NDArray[np.int64]
    bin_confidence_sum: NDArray[np.float64]
    bin_correct: NDArray[np.int64]
    bin_variance_sum: NDArray[np.float64]
    nll_sum: float
    brier_sum: float

    @classmethod
    def from_logits(
        cls,
        logits: ArrayLike | ScoredSet,
        labels: ArrayLike | None = None,
        *,
        temperature: float = 1.0,
        n_bins: int = 15,
    ) -> CalibrationStats:
        """Summarise one chunk of logits (n_samples, n_classes) and labels at ``temperature``.

        A validated :class:`ScoredSet` may stand for both (pass no ``labels``): it is not
        checked again.
        """
        checked, checked_labels = checked_data(logits, labels)
        return summarise_checked(checked, checked_labels, check_temperature(temperature), check_n_bins(n_bins))

    @classmethod
    def empty(cls, *, n_bins: int = 15, temperature: float = 1.0, n_classes: int) -> CalibrationStats:
        """The summary of no examples: the neutral element of ``+``."""
        n_bins = check_n_bins(n_bins)
        return cls(
            n_bins=n_bins,
            temperature=check_temperature(temperature),
            n_classes=int(n_classes),
            bin_count=np.zeros(n_bins, dtype=np.int64),
            bin_confidence_sum=np.zeros(n_bins),
            bin_correct=np.zeros(n_bins, dtype=np.int64),
            bin_variance_sum=np.zeros(n_bins),
            nll_sum=0.0,
            brier_sum=0.0,
        )

    def __add__(self, other: CalibrationStats) -> CalibrationStats:
        if not isinstance(other, CalibrationStats):
            return NotImplemented
        for field in ("n_bins", "temperature", "n_classes"):
            if getattr(self, field) != getattr(other, field):
                raise ValueError(
                    f"cannot merge calibration statistics with different {field}: "
                    f"{getattr(self, field)!r} and {getattr(other, field)!r}"
                )
        return CalibrationStats(
            n_bins=self.n_bins,
            temperature=self.temperature,
            n_classes=self.n_classes,
            bin_count=self.bin_count + other.bin_count,
            bin_confidence_sum=self.bin_confidence_sum + other.bin_confidence_sum,
            bin_correct=self.bin_correct + other.bin_correct,
            bin_variance_sum=self.bin_variance_sum + other.bin_variance_sum,
            nll_sum=self.nll_sum + other.nll_sum,
            brier_sum=self.brier_sum + other.brier_sum,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CalibrationStats):
            return NotImplemented
        return bool(
            (self.n_bins, self.temperature, self.n_classes) == (other.n_bins, other.temperature, other.n_classes)
            and np.array_equal(self.bin_count, other.bin_count)
            and np.array_equal(self.bin_correct, other.bin_correct)
            and np.allclose(self.bin_confidence_sum, other.bin_confidence_sum, rtol=1e-12, atol=1e-9)
            and np.allclose(self.bin_variance_sum, other.bin_variance_sum, rtol=1e-12, atol=1e-9)
            and np.isclose(self.nll_sum, other.nll_sum, rtol=1e-12, atol=1e-9)
            and np.isclose(self.brier_sum, other.brier_sum, rtol=1e-12, atol=1e-9)
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def n(self) -> int:
        """Examples summarised."""
        return int(self.bin_count.sum())

    def _per_example(self, total: float) -> float:
        return total / self.n if self.n else float("nan")

    @property
    def accuracy(self) -> float:
        """Share of top-label predictions that are right (NaN when empty)."""
        return self._per_example(float(self.bin_correct.sum()))

    @property
    def mean_confidence(self) -> float:
        """Mean top-label confidence at ``temperature`` (NaN when empty)."""
        return self._per_example(float(self.bin_confidence_sum.sum()))

    @property
    def nll(self) -> float:
        """Mean NLL in nats (exact log-softmax, no clipping; NaN when empty)."""
        return self._per_example(self.nll_sum)

    @property
    def brier(self) -> float:
        """Mean multi-class Brier score Σ_k (p_k − [y = k])² (NaN when empty)."""
        return self._per_example(self.brier_sum)

    @property
    def bin_gap_sum(self) -> NDArray[np.float64]:
        """Per bin Σ (correct − confidence): the signed calibration error mass."""
        return self.bin_correct - self.bin_confidence_sum

    @property
    def ece(self) -> float:
        """Equal-width ECE: Σ_m |Σ_{B_m} (correct − confidence)| / N (NaN when empty)."""
        return self._per_example(float(np.abs(self.bin_gap_sum).sum()))

    @property
    def mce(self) -> float:
        """Largest |accuracy − confidence| over non-empty bins (NaN when empty)."""
        return self.reliability_table().mce if self.n else float("nan")

    def reliability_table(self, min_count: int = 10) -> ReliabilityTable:
        """The equal-width reliability table; bins below ``min_count`` are marked sparse."""
        edges = equal_width_edges(self.n_bins)
        return ReliabilityTable.from_bin_sums(
            edges[:-1],
            edges[1:],
            self.bin_count,
            self.bin_confidence_sum,
            self.bin_correct,
            scheme="equal-width",
            min_count=min_count,
        )
