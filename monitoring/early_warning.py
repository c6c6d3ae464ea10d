"""Early warning before labels: what the calibrated confidences say about recent traffic.

Labels come late (hours, days); the served rows' logits are in the prediction log at once. A
calibrated model's confidences predict its own accuracy, and a change in their distribution
is the first visible sign that the traffic moved. Both come from mergeable sums over **every**
served row, labelled or not (:class:`ConfidenceProfile`, read from the SQL log by
:meth:`PredictionLog.iter_served <monitoring.PredictionLog.iter_served>`; a Parquet export
holds labelled rows only, so the early warning always reads the SQL log).

What is summed
--------------
At the deployed T, per row, the top-label confidence c, on a fixed fine grid
(:data:`CONFIDENCE_EDGES`, 191 bins: 0.01 wide up to 0.9, then 1 − 10^(−x) for x = 1.05, 1.1,
…, 6, then 1 — a confident model's confidences crowd near 1, where equal-width bins would hold
nearly everything in the last one): per bin the rows, their Σc, the labelled ones and the
correct ones; over every row Σc and Σc²; over the labelled rows their Σc. Two profiles on the
same grid and T add up (``+``).

Predicted accuracy
------------------
If the model is still calibrated as it was on the reference (the rows T was fitted on), the
window's accuracy once labelled is what the reference's calibration curve says of its
confidences — confidence-based performance estimation (NannyML's CBPE), from the histogram:

* the reference's accuracy per bin, made non-decreasing in the confidence by isotonic
  regression (pool adjacent violators, weighted by the rows; ``scipy.optimize``), which pools
  the bins into blocks J with accuracy a_J and mean confidence c̄_J;
* each bin's gap g_b = a_J − c̄_J of its block (bins without reference rows: interpolated
  between their neighbours', the nearest one's beyond the ends);
* per bin of the window, p_b = clip(c̄_{w,b} + g_b, 0, 1) (c̄_{w,b} its mean confidence there),
  and Â = Σ_b n_{w,b} p_b / n.

So Â lies in [0, 1], and on the reference itself it is the reference's accuracy. Unlike the
previous Â = c̄_w + (acc_ref − c̄_ref) (one gap for all confidences, which could exceed 1),
traffic that moves along the calibration curve — only the hardest or only the easiest inputs
— is predicted at the accuracy of the part of the curve it now sits on. Its interval is a
**prediction interval for the accuracy these rows will show**: Var = Σ_b n_{w,b} p_b(1 − p_b)/n²
(Bernoulli outcomes given the calibrated probabilities) + Σ_J W_J² ã_J(1 − ã_J)/n_J (each
block's accuracy estimated from its n_J reference rows, W_J the window's share on it,
ã_J = (correct + ½)/(n_J + 1)), clipped to [0, 1], so it always holds Â. It holds only while the
model stays calibrated — exactly what the labelled check tests later; a change that breaks
calibration (a new temperature) makes it optimistic or pessimistic.

The test of the confidence distribution
---------------------------------------
The two-sample Anderson–Darling test (Scholz & Stephens 1987) of the window's confidences
against the reference's, computed from the two histograms: A²_akN, their version for tied
observations (each bin's rows are ties at its midrank), standardised by the exact finite-sample
variance, its p-value from the asymptotic distribution (Marsaglia & Marsaglia 2004). A²
weighs the differences between the two distribution functions by 1/(F(1 − F)), so it sees a
shift among the most confident rows — where a change of temperature moves a confident model —
that the χ² test on coarse bins and the Kolmogorov–Smirnov statistic (the largest difference,
usually mid-range) dilute. Measured on the six CIFAR files (docs/statistics.md): at the same
level it finds a ×1.1 rescaling of the logits in 500-row windows about twice as often as a
two-sample KS test on the raw rows, and the χ² test it replaces. On 191 fine bins the
histogram costs next to nothing against the raw rows, and stays mergeable. Its direction is
read from the means: confidence **up** (the window is more confident than the reference) or
**down**. The test is two-sample (the reference's own sampling error counts); on very large
windows it flags small differences of traffic mix too: it schedules a labelled check, it does
not start a refit.

Profiles registered before
--------------------------
A version registered before this grid holds a profile on the coarse grid
(:data:`LEGACY_CONFIDENCE_EDGES`: 0.1 wide up to 0.9, then 1 − 10^(−x) for x = 1.25, 1.5, …, 4,
then 1; JSON format 1), without per-bin sums. Every coarse edge is an edge of the fine grid, so
the window is **re-binned** onto the reference's edges exactly, and the same test runs on the
22 coarse bins (it says so: ``rebinned``); the predicted accuracy falls back to
clip(c̄_w + (acc_ref − c̄_ref), 0, 1) with the interval of that estimator (``accuracy_method``
"gap").

References
----------
Scholz, Stephens. "K-sample Anderson–Darling tests". Journal of the American Statistical
Association 82, 1987.
Marsaglia, Marsaglia. "Evaluating the Anderson–Darling distribution". Journal of Statistical
Software 9(2), 2004.
NannyML. "Confidence-based Performance Estimation (CBPE)", documentation, 2022.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final, Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import isotonic_regression
from scipy.special import digamma, ndtri

from calibration import JsonResult, check_temperature, top_label_confidence

from ._validation import check_chunk_size, check_window
from .policy import DEFAULT_POLICY, DriftPolicy

if TYPE_CHECKING:  # the early warning reads the source it is given; it does not need the SQL layer
    from .store import ServedChunk

__all__ = [
    "CONFIDENCE_EDGES",
    "LEGACY_CONFIDENCE_EDGES",
    "ConfidenceProfile",
    "EarlyWarning",
    "ServedSource",
    "confidence_profile",
    "warn_before_labels",
]

#: The bins of the top-label confidence: (edges[m], edges[m + 1]], 0 in the first; 0.01 wide up
#: to 0.9, then 1 − 10^(−x) for x = 1.05, 1.1, …, 6, then 1 (191 bins).
CONFIDENCE_EDGES: Final[tuple[float, ...]] = (
    tuple(round(0.01 * i, 2) for i in range(90)) + tuple(1.0 - 10.0 ** (-j / 20) for j in range(20, 121)) + (1.0,)
)
#: The coarse bins of the profiles registered before :data:`CONFIDENCE_EDGES` (JSON format 1):
#: 0.1 wide up to 0.9, then 1 − 10^(−x) for x = 1.25, 1.5, …, 4, then 1. Each is an edge of the
#: fine grid, so a window re-bins onto them exactly.
LEGACY_CONFIDENCE_EDGES: Final[tuple[float, ...]] = (
    tuple(round(0.1 * i, 1) for i in range(10)) + tuple(1.0 - 10.0 ** (-0.25 * i) for i in range(5, 17)) + (1.0,)
)
_FORMAT: Final = 2  # the JSON layout of ConfidenceProfile; 1: before the per-bin sums (still read)
_TEST: Final = "anderson-darling"

ShiftDirection = Literal["up", "down", "none"]
AccuracyMethod = Literal["binned", "gap", "confidence", "none"]


class ServedSource(Protocol):
    """Where a version's served rows, labelled or not, are read from (the SQL prediction log)."""

    def iter_served(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = ...
    ) -> Iterator[ServedChunk]:
        """The version's rows served in [start, end), in non-empty chunks of at most ``chunk_size``."""
        ...


def _check_edges(edges: Sequence[float]) -> tuple[float, ...]:
    values = tuple(float(e) for e in edges)
    if len(values) < 3 or values[0] != 0.0 or values[-1] != 1.0 or any(
            b <= a for a, b in zip(values, values[1:], strict=False)):
        raise ValueError(f"edges must increase strictly from 0 to 1 with at least two bins; got {values!r}")
    return values


def _ints(values: Sequence[int] | NDArray[np.int64]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _floats(values: Sequence[float] | NDArray[np.float64]) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


@dataclass(frozen=True, slots=True)
class ConfidenceProfile(JsonResult):
    """Mergeable sums of the top-label confidence of served rows at one temperature.

    Per bin of ``edges`` (bin m is (edges[m], edges[m + 1]], confidence 0 in the first): the
    rows ``count``, their Σc ``bin_confidence_sum``, the ``bin_labelled`` rows with a label and
    the ``bin_correct`` ones right (the three are None in a profile registered before they
    existed: JSON format 1). Over every row: Σc ``confidence_sum`` and Σc²
    ``confidence_square_sum``; ``labelled`` rows with a label, ``correct`` of them right,
    ``labelled_confidence_sum`` their Σc. ``+`` adds two sets of rows at the same T and edges;
    :meth:`to_json` is the registered reference's tag.

    Examples
    --------
    >>> logits = np.log([[0.3, 0.7], [0.9, 0.1], [0.45, 0.55]])
    >>> whole = ConfidenceProfile.from_logits(logits, [1, -1, 0])  # the second row has no label yet
    >>> whole.n, whole.labelled, whole.correct, round(whole.mean_confidence, 4)
    (3, 2, 1, 0.7167)
    >>> parts = ConfidenceProfile.from_logits(logits[:1], [1]) + ConfidenceProfile.from_logits(logits[1:], [-1, 0])
    >>> parts == whole
    True
    >>> ConfidenceProfile.from_json(whole.to_json()) == whole
    True
    >>> whole.rebinned(LEGACY_CONFIDENCE_EDGES).count[5:8]  # 0.55 and 0.7 in (0.5, 0.6] and (0.6, 0.7]
    (1, 1, 0)
    """

    temperature: float
    edges: tuple[float, ...]
    count: tuple[int, ...]
    confidence_sum: float
    confidence_square_sum: float
    labelled: int
    correct: int
    labelled_confidence_sum: float
    bin_confidence_sum: tuple[float, ...] | None = None
    bin_labelled: tuple[int, ...] | None = None
    bin_correct: tuple[int, ...] | None = None

    @classmethod
    def empty(cls, temperature: float = 1.0, edges: Sequence[float] = CONFIDENCE_EDGES) -> ConfidenceProfile:
        """No rows: the neutral element of ``+``."""
        checked = _check_edges(edges)
        bins = len(checked) - 1
        return cls(temperature=check_temperature(temperature), edges=checked, count=(0,) * bins,
                   confidence_sum=0.0, confidence_square_sum=0.0, labelled=0, correct=0, labelled_confidence_sum=0.0,
                   bin_confidence_sum=(0.0,) * bins, bin_labelled=(0,) * bins, bin_correct=(0,) * bins)

    @classmethod
    def from_logits(
        cls, logits: ArrayLike, labels: ArrayLike | None = None, *, temperature: float = 1.0,
        edges: Sequence[float] = CONFIDENCE_EDGES,
    ) -> ConfidenceProfile:
        """Summarise rows of ``logits`` (n, K) at ``temperature``; ``labels`` (n,) with -1 for
        rows not labelled yet (None: no row is labelled).

        Raises
        ------
        ValueError
            If the logits, labels, temperature or edges break their rules.
        """
        temperature = check_temperature(temperature)
        if np.shape(logits)[:1] == (0,):  # an empty chunk: nothing to add
            return cls.empty(temperature, edges)
        predictions, confidence = top_label_confidence(logits, temperature=temperature)
        if labels is None:
            label_values = np.full(confidence.shape[0], -1, dtype=np.int64)
        else:
            label_values = np.asarray(labels)
            if label_values.shape != confidence.shape or not np.issubdtype(label_values.dtype, np.integer):
                raise ValueError(f"labels must be integers of shape {confidence.shape} (-1: not labelled); got "
                                 f"{label_values.dtype} of shape {label_values.shape}")
        return cls.from_confidence(confidence, label_values >= 0, predictions == label_values,
                                   temperature=temperature, edges=edges)

    @classmethod
    def from_confidence(
        cls, confidence: ArrayLike, labelled: ArrayLike, correct: ArrayLike, *, temperature: float,
        edges: Sequence[float] = CONFIDENCE_EDGES,
    ) -> ConfidenceProfile:
        """Summarise top-label confidences (at ``temperature``) with per-row flags: labelled, correct."""
        checked = _check_edges(edges)
        c = np.asarray(confidence, dtype=np.float64)
        has_label = np.asarray(labelled, dtype=bool)
        right = np.asarray(correct, dtype=bool) & has_label
        if c.ndim != 1 or has_label.shape != c.shape or right.shape != c.shape:
            raise ValueError("confidence, labelled and correct must be 1-D of one length")
        if c.size and not (np.all(np.isfinite(c)) and c.min() >= 0.0 and c.max() <= 1.0):
            raise ValueError("confidences must be finite and in [0, 1]")
        bins = len(checked) - 1
        where = np.clip(np.searchsorted(np.asarray(checked), c, side="left") - 1, 0, bins - 1)
        return cls(
            temperature=check_temperature(temperature), edges=checked,
            count=_ints(np.bincount(where, minlength=bins)),
            confidence_sum=float(c.sum()), confidence_square_sum=float(np.dot(c, c)),
            labelled=int(np.count_nonzero(has_label)), correct=int(np.count_nonzero(right)),
            labelled_confidence_sum=float(c[has_label].sum()),
            bin_confidence_sum=_floats(np.bincount(where, weights=c, minlength=bins).astype(np.float64)),
            bin_labelled=_ints(np.bincount(where[has_label], minlength=bins)),
            bin_correct=_ints(np.bincount(where[right], minlength=bins)),
        )

    def __add__(self, other: ConfidenceProfile) -> ConfidenceProfile:
        if not isinstance(other, ConfidenceProfile):
            return NotImplemented
        if self.temperature != other.temperature or self.edges != other.edges:
            raise ValueError("cannot merge confidence profiles at different temperatures or bin edges: "
                             f"T {self.temperature!r} and {other.temperature!r}")
        sums = labelled = correct = None
        if self.per_bin and other.per_bin:
            (own_sums, own_labelled, own_correct), (their_sums, their_labelled, their_correct) = self.bins(), other.bins()
            sums, labelled = _floats(own_sums + their_sums), _ints(own_labelled + their_labelled)
            correct = _ints(own_correct + their_correct)
        return ConfidenceProfile(
            temperature=self.temperature, edges=self.edges,
            count=tuple(a + b for a, b in zip(self.count, other.count, strict=True)),
            confidence_sum=self.confidence_sum + other.confidence_sum,
            confidence_square_sum=self.confidence_square_sum + other.confidence_square_sum,
            labelled=self.labelled + other.labelled, correct=self.correct + other.correct,
            labelled_confidence_sum=self.labelled_confidence_sum + other.labelled_confidence_sum,
            bin_confidence_sum=sums, bin_labelled=labelled, bin_correct=correct,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfidenceProfile):
            return NotImplemented
        sums = (self.bin_confidence_sum, other.bin_confidence_sum)
        return (self.temperature, self.edges, self.count, self.labelled, self.correct, self.bin_labelled,
                self.bin_correct) == (other.temperature, other.edges, other.count, other.labelled, other.correct,
                                      other.bin_labelled, other.bin_correct) and bool(np.allclose(
            [self.confidence_sum, self.confidence_square_sum, self.labelled_confidence_sum],
            [other.confidence_sum, other.confidence_square_sum, other.labelled_confidence_sum], rtol=1e-12, atol=1e-9,
        )) and (sums[0] is None) == (sums[1] is None) and (
            sums[0] is None or sums[1] is None or bool(np.allclose(sums[0], sums[1], rtol=1e-12, atol=1e-9)))

    __hash__ = None  # type: ignore[assignment]

    @property
    def n(self) -> int:
        """Rows summarised, labelled or not."""
        return sum(self.count)

    @property
    def per_bin(self) -> bool:
        """Whether the per-bin sums are there (not in a profile registered before they existed)."""
        return self.bin_confidence_sum is not None and self.bin_labelled is not None and self.bin_correct is not None

    def bins(self) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
        """The per-bin Σc, labelled rows and correct rows as arrays.

        Raises
        ------
        ValueError
            If the profile has none (:attr:`per_bin` is False).
        """
        if self.bin_confidence_sum is None or self.bin_labelled is None or self.bin_correct is None:
            raise ValueError("this confidence profile has no per-bin sums (it was registered before they existed)")
        return (np.asarray(self.bin_confidence_sum, dtype=np.float64), np.asarray(self.bin_labelled, dtype=np.int64),
                np.asarray(self.bin_correct, dtype=np.int64))

    @property
    def mean_confidence(self) -> float:
        """Mean top-label confidence (NaN without rows)."""
        return self.confidence_sum / self.n if self.n else math.nan

    @property
    def accuracy(self) -> float:
        """Accuracy of the labelled rows (NaN without any)."""
        return self.correct / self.labelled if self.labelled else math.nan

    @property
    def bernoulli_sum(self) -> float:
        """Σ c(1 − c): n² times the variance of the accuracy predicted from the confidences."""
        return max(self.confidence_sum - self.confidence_square_sum, 0.0)

    def rebinned(self, edges: Sequence[float]) -> ConfidenceProfile:
        """The same rows on coarser ``edges``, each of which must be one of this profile's edges.

        Raises
        ------
        ValueError
            If an edge of ``edges`` is not one of this profile's (the rows cannot be re-binned exactly).
        """
        coarse = _check_edges(edges)
        position = {edge: index for index, edge in enumerate(self.edges)}
        missing = [edge for edge in coarse if edge not in position]
        if missing:
            raise ValueError(f"cannot re-bin a confidence profile onto edges it does not have: {missing[:3]!r}")
        starts = np.array([position[edge] for edge in coarse[:-1]], dtype=np.intp)

        sums = labelled = correct = None
        if self.per_bin:
            own_sums, own_labelled, own_correct = self.bins()
            sums = _floats(np.add.reduceat(own_sums, starts))
            labelled, correct = _ints(np.add.reduceat(own_labelled, starts)), _ints(np.add.reduceat(own_correct, starts))
        return ConfidenceProfile(
            temperature=self.temperature, edges=coarse,
            count=_ints(np.add.reduceat(np.asarray(self.count, dtype=np.int64), starts)),
            confidence_sum=self.confidence_sum, confidence_square_sum=self.confidence_square_sum,
            labelled=self.labelled, correct=self.correct, labelled_confidence_sum=self.labelled_confidence_sum,
            bin_confidence_sum=sums, bin_labelled=labelled, bin_correct=correct,
        )

    def to_json(self) -> str:
        """One compact JSON object (the registered reference's version tag; format 1, without the
        per-bin sums, for a profile read from that format)."""
        if not self.per_bin:
            legacy = {key: value for key, value in self.to_dict().items() if not key.startswith("bin_")}
            return json.dumps({"format": 1} | legacy, separators=(",", ":"), allow_nan=False)
        return json.dumps({"format": _FORMAT} | self.to_dict(), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> ConfidenceProfile:
        """Read :meth:`to_json`'s form back (format 2, or format 1 of the profiles registered
        before the per-bin sums); ValueError when it is not one."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as error:
            raise ValueError(f"confidence profile is not JSON: {str(text)[:80]!r}") from error
        if not isinstance(data, dict) or data.get("format") not in (1, _FORMAT):
            raise ValueError(f"confidence profile is not a format-1 or format-{_FORMAT} object: {str(text)[:80]!r}")
        try:
            edges = _check_edges(data["edges"])
            count = _ints(data["count"])
            per_bin = [data.get(key) for key in ("bin_confidence_sum", "bin_labelled", "bin_correct")]
            profile = cls(
                temperature=check_temperature(float(data["temperature"])), edges=edges, count=count,
                confidence_sum=float(data["confidence_sum"]), confidence_square_sum=float(data["confidence_square_sum"]),
                labelled=int(data["labelled"]), correct=int(data["correct"]),
                labelled_confidence_sum=float(data["labelled_confidence_sum"]),
                bin_confidence_sum=None if per_bin[0] is None else _floats(per_bin[0]),
                bin_labelled=None if per_bin[1] is None else _ints(per_bin[1]),
                bin_correct=None if per_bin[2] is None else _ints(per_bin[2]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"confidence profile misses or mistypes a field: {error}") from error
        if len(count) != len(edges) - 1 or min(count) < 0 or not 0 <= profile.correct <= profile.labelled <= profile.n:
            raise ValueError("confidence profile: counts do not match the edges or are inconsistent")
        if (data["format"] == _FORMAT) != profile.per_bin or (profile.per_bin and not _consistent_bins(profile)):
            raise ValueError("confidence profile: the per-bin sums are missing, do not match the edges or do not add "
                             "up to the totals")
        return profile


def _consistent_bins(profile: ConfidenceProfile) -> bool:
    """The per-bin sums have one value per bin, fit inside the bin's rows and add up to the totals."""
    sums, labelled, correct = profile.bins()
    rows = np.asarray(profile.count, dtype=np.int64)
    return (sums.shape == labelled.shape == correct.shape == rows.shape
            and bool(np.all((0 <= correct) & (correct <= labelled) & (labelled <= rows)))
            and bool(np.all(np.isfinite(sums) & (sums >= 0) & (sums <= rows + 1e-9)))
            and int(labelled.sum()) == profile.labelled and int(correct.sum()) == profile.correct)


def confidence_profile(
    source: ServedSource, model_name: str, model_version: str, *, temperature: float, start: datetime, end: datetime,
    chunk_size: int = 50_000, edges: Sequence[float] = CONFIDENCE_EDGES,
) -> ConfidenceProfile:
    """Summarise every row of a version served in [start, end), labelled or not, at ``temperature``.

    Reads ``source`` in chunks (memory bounded by ``chunk_size``); the confidences are computed
    from the stored logits at ``temperature`` (the registered T), not taken from the log.

    Examples
    --------
    >>> from monitoring import PredictionLog, PredictionRecord
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> _ = log.append([PredictionRecord(t, "m", "1", f"r{i}", [2.0, 0.0], 0, 0.88, 1.0) for i in range(4)])
    >>> profile = confidence_profile(log, "m", "1", temperature=1.0, start=t, end=t + timedelta(hours=1))
    >>> profile.n, profile.labelled, round(profile.mean_confidence, 4)
    (4, 0, 0.8808)
    """
    start, end = check_window(start, end)
    chunk_size = check_chunk_size(chunk_size)
    total = ConfidenceProfile.empty(temperature, edges)
    for chunk in source.iter_served(model_name, model_version, start, end, chunk_size=chunk_size):
        total = total + ConfidenceProfile.from_logits(chunk.logits, chunk.labels, temperature=temperature, edges=edges)
    return total


@dataclass(frozen=True, slots=True)
class EarlyWarning(JsonResult):
    """The early warning on a window's served rows (module docstring).

    ``predicted_accuracy`` [``predicted_accuracy_low``, ``predicted_accuracy_high``] (at
    ``confidence_level``; the interval always holds the estimate, all three in [0, 1]) is the
    accuracy the ``n`` rows should show once labelled if the model is still calibrated, by
    ``accuracy_method``: "binned" (the reference's calibration curve per bin, CBPE-style),
    "gap" (mean confidence plus the reference's gap: a reference profile registered before the
    per-bin sums), "confidence" (the mean confidence: no labelled reference) or "none" (no
    row). ``labelled`` of them already have labels, with accuracy ``labelled_accuracy`` where
    the confidences predicted ``labelled_predicted_accuracy``. ``tested`` is False when the
    window has fewer than ``min_rows`` rows or there is no reference profile; then
    ``statistic``/``p_value`` are NaN. ``test`` names the test ("anderson-darling": ``statistic``
    is Scholz and Stephens' A²) and ``bins`` the bins it read (the reference's grid;
    ``rebinned``: the window was re-binned onto a reference registered on the coarse grid);
    ``shifted`` iff ``p_value < level``; ``direction`` is "up" when the window is more
    confident than the reference, "down" when less (``confidence_shift`` = the difference of
    mean confidences).
    """

    temperature: float
    n: int
    labelled: int
    tested: bool
    shifted: bool
    direction: ShiftDirection
    predicted_accuracy: float
    predicted_accuracy_low: float
    predicted_accuracy_high: float
    mean_confidence: float
    reference_n: int
    reference_mean_confidence: float
    reference_accuracy: float
    confidence_shift: float
    statistic: float
    bins: int
    p_value: float
    level: float
    min_rows: int
    labelled_accuracy: float
    labelled_predicted_accuracy: float
    confidence_level: float
    test: str = _TEST
    rebinned: bool = False
    accuracy_method: AccuracyMethod = "binned"

    def sentence(self) -> str:
        """One line for a report's reasons."""
        if self.n == 0:
            return "early warning: no row served in the window"
        how = {"binned": "the reference's accuracy per confidence bin",
               "gap": "the mean confidence plus the reference's gap (a profile registered before per-bin sums)",
               "confidence": "the mean confidence (no labelled reference)", "none": ""}[self.accuracy_method]
        head = (f"early warning (before labels): predicted accuracy {self.predicted_accuracy:.3f} "
                f"[{self.predicted_accuracy_low:.3f}, {self.predicted_accuracy_high:.3f}] from the confidences of "
                f"{self.n} served rows by {how} ({self.labelled} labelled so far")
        head += (f": accuracy {self.labelled_accuracy:.3f} vs predicted {self.labelled_predicted_accuracy:.3f})"
                 if self.labelled else ")")
        if not self.tested:
            why = ("no reference confidence profile registered" if self.reference_n == 0
                   else f"fewer than {self.min_rows} rows")
            return f"{head}; confidence distribution not tested ({why})"
        test = f"Anderson–Darling A² = {self.statistic:.2f}, p = {_fmt_p(self.p_value)}"
        verdict = (f"SHIFTED {self.direction} ({test} < {_fmt_p(self.level)})" if self.shifted else
                   f"unchanged ({test})")
        grid = (f"; on the reference's {self.bins} coarse bins, the window re-binned onto them (a profile registered "
                "before the fine bins: less power)" if self.rebinned else "")
        return (f"{head}; confidence distribution vs the reference (n={self.reference_n}): mean "
                f"{self.mean_confidence:.3f} vs {self.reference_mean_confidence:.3f}, {verdict}{grid}")


def _fmt_p(p: float) -> str:
    return "n/a" if not math.isfinite(p) else f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


# ---------------------------------------------------------------------------- the test


def _anderson_darling(reference: NDArray[np.float64], window: NDArray[np.float64]) -> tuple[float, float]:
    """Scholz and Stephens' two-sample A²_akN of two histograms on one grid (each bin's rows tied)
    and its p-value: standardised by the exact variance of A²_kN, referred to the limit
    distribution A²_∞ (module docstring)."""
    tied = reference + window
    keep = tied > 0
    if np.count_nonzero(keep) < 2:  # every row in one bin: nothing to tell apart
        return 0.0, 1.0
    r, w, tied = reference[keep], window[keep], tied[keep]
    n_r, n_w = float(r.sum()), float(w.sum())
    total = n_r + n_w
    below = np.cumsum(tied) - tied / 2.0  # B_aj: rows below the bin's midrank
    denominator = below * (total - below) - total * tied / 4.0  # > 0 with two bins or more
    statistic = 0.0
    for counts, n in ((r, n_r), (w, n_w)):
        own_below = np.cumsum(counts) - counts / 2.0
        statistic += float(np.sum(tied * (total * own_below - n * below) ** 2 / denominator)) / n
    statistic *= (total - 1.0) / total**2
    standardised = (statistic - 1.0) / math.sqrt(_variance(total, 1.0 / n_r + 1.0 / n_w))
    # The limit of A² for two samples has mean 1 and variance 2(π² − 9)/3: map T onto it.
    return statistic, _anderson_darling_sf(1.0 + math.sqrt(2.0 * (math.pi**2 - 9.0) / 3.0) * standardised)


def _variance(total: float, inverse_sizes: float) -> float:
    """Var(A²_kN) for k = 2 samples of ``total`` rows (Scholz and Stephens 1987, eq. 4)."""
    h = float(digamma(total) + np.euler_gamma)  # Σ_{i<N} 1/i
    if total <= 1_000_000:
        i = np.arange(1.0, total - 1.0)
        g = float(np.sum((h - np.cumsum(1.0 / i)) / (total - i)))  # Σ_{i<N-1} Σ_{i<j<N} 1/((N − i) j)
    else:  # its limit π²/6, to within 3e-5 beyond a million rows
        g = math.pi**2 / 6.0
    k = 2.0
    a = (4 * g - 6) * (k - 1) + (10 - 6 * g) * inverse_sizes
    b = (2 * g - 4) * k**2 + 8 * h * k + (2 * g - 14 * h - 4) * inverse_sizes - 8 * h + 4 * g - 6
    c = (6 * h + 2 * g - 2) * k**2 + (4 * h - 4 * g + 6) * k + (2 * h - 6) * inverse_sizes + 4 * h
    d = (2 * h + 6) * k**2 - 4 * h * k
    return (a * total**3 + b * total**2 + c * total + d) / ((total - 1) * (total - 2) * (total - 3))


def _anderson_darling_sf(z: float) -> float:
    """P(A²_∞ > z), from Marsaglia and Marsaglia's approximation of its distribution (error < 2e-6)."""
    if z <= 0.0:
        return 1.0
    if z < 2.0:
        poly = 2.00012 + (0.247105 - (0.0649821 - (0.0347962 - (0.011672 - 0.00168691 * z) * z) * z) * z) * z
        return 1.0 - math.exp(-1.2337141 / z) / math.sqrt(z) * poly
    exponent = 1.0776 - (2.30695 - (0.43424 - (0.082433 - (0.008056 - 0.0003146 * z) * z) * z) * z) * z
    return -math.expm1(-math.exp(exponent))


# ---------------------------------------------------------------------------- the predicted accuracy


@dataclass(frozen=True, slots=True)
class _Prediction:
    accuracy: float
    standard_error: float
    labelled_accuracy: float
    method: AccuracyMethod


def _binned_prediction(window: ConfidenceProfile, reference: ConfidenceProfile) -> _Prediction:
    """The reference's isotonic calibration curve per bin applied to the window (module docstring)."""
    rows = np.asarray(reference.count, dtype=np.float64)
    used = np.flatnonzero(rows > 0)
    reference_sums, _, reference_correct = reference.bins()
    correct, sums = reference_correct[used].astype(np.float64), reference_sums[used]
    fit = isotonic_regression(correct / rows[used], weights=rows[used], increasing=True)
    starts, sizes = fit.blocks[:-1], np.diff(fit.blocks)
    block_rows = np.add.reduceat(rows[used], starts)
    block_correct = np.add.reduceat(correct, starts)
    block_gap = block_correct / block_rows - np.add.reduceat(sums, starts) / block_rows
    bins = np.arange(rows.size)
    gap = np.interp(bins, used, np.repeat(block_gap, sizes))  # bins without reference rows: their neighbours'
    right = np.clip(np.searchsorted(used, bins), 0, used.size - 1)
    left = np.clip(right - 1, 0, used.size - 1)
    nearest = np.where(np.abs(used[left] - bins) <= np.abs(used[right] - bins), left, right)
    block = np.repeat(np.arange(starts.size), sizes)[nearest]

    counts = np.asarray(window.count, dtype=np.float64)
    window_sums, window_labelled, _ = window.bins()
    mean = np.divide(window_sums, counts, out=np.zeros_like(counts), where=counts > 0)
    probability = np.clip(mean + gap, 0.0, 1.0)
    n = float(counts.sum())
    share = np.bincount(block, weights=counts / n, minlength=starts.size)
    smoothed = (block_correct + 0.5) / (block_rows + 1.0)  # a block all right (or wrong) is not known exactly
    variance = (float(np.sum(counts * probability * (1.0 - probability))) / n**2
                + float(np.sum(share**2 * smoothed * (1.0 - smoothed) / block_rows)))
    labelled_accuracy = float(window_labelled @ probability) / window.labelled if window.labelled else math.nan
    return _Prediction(float(counts @ probability) / n, math.sqrt(variance), labelled_accuracy, "binned")


def _gap_prediction(window: ConfidenceProfile, reference: ConfidenceProfile | None) -> _Prediction:
    """Mean confidence plus the reference's calibration-in-the-large gap (a fully labelled
    reference without per-bin sums), or the mean confidence alone; clipped to [0, 1]."""
    gap = variance = 0.0
    method: AccuracyMethod = "confidence"
    if reference is not None and reference.n > 0 and reference.labelled == reference.n:
        gap, variance, method = reference.accuracy - reference.mean_confidence, reference.bernoulli_sum / reference.n**2, "gap"
    n = window.n
    labelled = (min(max(window.labelled_confidence_sum / window.labelled + gap, 0.0), 1.0) if window.labelled
                else math.nan)
    return _Prediction(min(max(window.mean_confidence + gap, 0.0), 1.0),
                       math.sqrt(window.bernoulli_sum / n**2 + variance), labelled, method)


def _on_one_grid(
    window: ConfidenceProfile, reference: ConfidenceProfile
) -> tuple[ConfidenceProfile, ConfidenceProfile, bool]:
    """The two profiles on the coarser of their grids (one must refine the other), and whether
    either was re-binned."""
    if reference.edges == window.edges:
        return window, reference, False
    if set(reference.edges) <= set(window.edges):
        return window.rebinned(reference.edges), reference, True
    if set(window.edges) <= set(reference.edges):
        return window, reference.rebinned(window.edges), True
    raise ValueError(f"the reference profile and the window are on bins neither of which refines the other "
                     f"({len(reference.edges) - 1} and {len(window.edges) - 1} bins): read both on one grid")


def warn_before_labels(
    window: ConfidenceProfile, reference: ConfidenceProfile | None = None, *, policy: DriftPolicy = DEFAULT_POLICY
) -> EarlyWarning:
    """Predict the window's accuracy from its confidences and test their distribution against the reference.

    Parameters
    ----------
    window : ConfidenceProfile
        Every served row of the window (labelled or not) at the deployed T.
    reference : ConfidenceProfile, optional
        The registration reference's profile at the same T (the rows T was fitted on,
        labelled), on the window's bins or on bins the window's refine (a profile registered
        on :data:`LEGACY_CONFIDENCE_EDGES`: the window is re-binned onto them). Without it: no
        test, the mean confidence as the prediction.
    policy : DriftPolicy, default=DEFAULT_POLICY
        ``confidence_shift_level`` (the test's significance level), ``shift_min_rows`` (fewer
        rows in the window or the reference: not tested) and ``confidence_level`` (the
        predicted accuracy's interval).

    Returns
    -------
    EarlyWarning

    Raises
    ------
    TypeError
        If an argument is of the wrong type.
    ValueError
        If the two profiles are at different temperatures, or on grids neither of which refines
        the other.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> logits = 2.0 * rng.normal(size=(6000, 10))
    >>> labels = np.array([rng.choice(10, p=np.exp(z) / np.exp(z).sum()) for z in logits])
    >>> reference = ConfidenceProfile.from_logits(logits[:3000], labels[:3000])
    >>> same = warn_before_labels(ConfidenceProfile.from_logits(logits[3000:]), reference)
    >>> accuracy = float((logits[3000:].argmax(axis=1) == labels[3000:]).mean())  # known only later
    >>> same.shifted, round(same.predicted_accuracy, 3), (round(same.predicted_accuracy_low, 3),
    ...     round(same.predicted_accuracy_high, 3)), round(accuracy, 3)
    (False, 0.528, (0.505, 0.551), 0.542)
    >>> hotter = warn_before_labels(ConfidenceProfile.from_logits(1.3 * logits[3000:]), reference)
    >>> hotter.shifted, hotter.direction, hotter.test
    (True, 'up', 'anderson-darling')
    """
    if not isinstance(window, ConfidenceProfile):
        raise TypeError(f"window must be a ConfidenceProfile; got {type(window).__name__}")
    if reference is not None and not isinstance(reference, ConfidenceProfile):
        raise TypeError(f"reference must be a ConfidenceProfile or None; got {type(reference).__name__}")
    if not isinstance(policy, DriftPolicy):
        raise TypeError(f"policy must be a DriftPolicy; got {type(policy).__name__}")
    if reference is not None and not math.isclose(reference.temperature, window.temperature, rel_tol=1e-9):
        raise ValueError(f"the reference profile is at T = {reference.temperature!r} and the window at "
                         f"T = {window.temperature!r}: both must be read at the deployed T")
    rebinned = False
    if reference is not None:
        window, reference, rebinned = _on_one_grid(window, reference)
    level, confidence_level, min_rows = policy.confidence_shift_level, policy.confidence_level, policy.shift_min_rows

    n = window.n
    has_reference = reference is not None and reference.n > 0
    if n == 0:
        prediction = _Prediction(math.nan, math.nan, math.nan, "none")
    elif (reference is not None and has_reference and reference.labelled == reference.n and reference.per_bin
          and window.per_bin):
        prediction = _binned_prediction(window, reference)
    else:
        prediction = _gap_prediction(window, reference)
    spread = float(ndtri(0.5 + confidence_level / 2.0)) * prediction.standard_error
    low, high = max(0.0, prediction.accuracy - spread), min(1.0, prediction.accuracy + spread)

    statistic, p_value, tested = math.nan, math.nan, False
    if reference is not None and has_reference and n >= min_rows and reference.n >= min_rows:
        tested = True
        statistic, p_value = _anderson_darling(np.asarray(reference.count, dtype=np.float64),
                                               np.asarray(window.count, dtype=np.float64))
    shift = window.mean_confidence - reference.mean_confidence if reference is not None and has_reference and n else (
        math.nan)
    direction: ShiftDirection = "none" if not math.isfinite(shift) or shift == 0 else ("up" if shift > 0 else "down")
    return EarlyWarning(
        temperature=window.temperature, n=n, labelled=window.labelled, tested=tested,
        shifted=bool(tested and p_value < level), direction=direction, predicted_accuracy=prediction.accuracy,
        predicted_accuracy_low=low if n else math.nan, predicted_accuracy_high=high if n else math.nan,
        mean_confidence=window.mean_confidence, reference_n=reference.n if reference is not None else 0,
        reference_mean_confidence=reference.mean_confidence if reference is not None else math.nan,
        reference_accuracy=reference.accuracy if reference is not None else math.nan, confidence_shift=shift,
        statistic=statistic, bins=len(window.count) if tested else 0, p_value=p_value, level=float(level),
        min_rows=min_rows, labelled_accuracy=window.accuracy, labelled_predicted_accuracy=prediction.labelled_accuracy,
        confidence_level=float(confidence_level), rebinned=rebinned, accuracy_method=prediction.method,
    )
