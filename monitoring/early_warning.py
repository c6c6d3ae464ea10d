"""Early warning before labels arrive: what the calibrated confidences say about recent traffic.

Labels come late (hours, days); the served rows' logits are in the prediction log at once. A
calibrated model's confidences predict its own accuracy, and a change in their distribution
is the first visible sign that the traffic moved. Both come from mergeable sums over **every**
served row, labelled or not (:class:`ConfidenceProfile`, read from the SQL log by
:meth:`PredictionLog.iter_served <monitoring.PredictionLog.iter_served>`; a Parquet export
holds labelled rows only, so the early warning always reads the SQL log).

What is summed
--------------
At the deployed T, per row, the top-label confidence c: the count of rows per bin of a fixed
grid (:data:`CONFIDENCE_EDGES`: 0.1 wide up to 0.9, then 1 − 10^(−x) for x = 1.25, 1.5, …, 4,
then 1 — a confident model's confidences crowd near 1, where equal-width bins would hold
nearly everything in the last one), Σc and Σc²; and over the labelled rows their count, the
correct ones and their Σc. Two profiles on the same grid and T add up (``+``).

Predicted accuracy
------------------
If the model is still calibrated as it was on the reference (the rows T was fitted on), each
row is right with probability c, so the window's accuracy once labelled is predicted by
mean(c), corrected by the reference's own calibration-in-the-large gap (accuracy − mean c on
the reference, small after an NLL fit): Â = c̄_w + (acc_ref − c̄_ref) (the idea behind NannyML's
confidence-based performance estimation, CBPE). Its interval is a **prediction interval for
the accuracy these rows will show**: Var = Σc(1 − c)/n² (Bernoulli outcomes given the
confidences) + Σc_ref(1 − c_ref)/n_ref² (the reference gap's own error). It holds only while
the model stays calibrated — exactly what the labelled check tests later; a covariate shift
that breaks calibration makes the prediction optimistic (over-confidence) or pessimistic.

The test of the confidence distribution
---------------------------------------
Pearson's χ² test of homogeneity on the 2 × B table of binned counts (window vs reference),
B − 1 degrees of freedom, after merging adjacent bins (left to right, a short remainder into
the last kept bin) until every expected count is at least ``min_expected`` (5, Cochran's rule)
in both samples. Why this test and not a two-sample Kolmogorov–Smirnov on binned CDFs: the
counts are what is mergeable, and on binned data the KS statistic's null distribution is no
longer Kolmogorov's (ties at the bin edges make the asymptotic p-value conservative, by an
amount that depends on the binning), while χ² on a binned table has its standard null
distribution — its level holds, which tests/monitoring/test_early_warning.py checks by
simulation. χ² also catches a change of shape that leaves the mean in place (a second mode of
low-confidence inputs). Its direction is read from the means: confidence **up** (the window is
more confident than the reference) or **down**. The test is two-sample (the reference's own
sampling error counts); on very large windows it flags small differences of traffic mix too:
it schedules a labelled check, it does not start a refit.

References
----------
Cochran. "Some methods for strengthening the common χ² tests". Biometrics 10, 1954.
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
from scipy.special import chdtrc, ndtri

from calibration import JsonResult, check_temperature, top_label_confidence

from ._validation import check_chunk_size, check_window
from .policy import DEFAULT_POLICY, DriftPolicy

if TYPE_CHECKING:  # the early warning reads the source it is given; it does not need the SQL layer
    from .prediction_log import ServedChunk

__all__ = [
    "CONFIDENCE_EDGES",
    "ConfidenceProfile",
    "EarlyWarning",
    "ServedSource",
    "confidence_profile",
    "warn_before_labels",
]

#: The fixed bins of the top-label confidence: (edges[m], edges[m + 1]], 0 in the first.
CONFIDENCE_EDGES: Final[tuple[float, ...]] = (
    tuple(round(0.1 * i, 1) for i in range(10))
    + tuple(1.0 - 10.0 ** (-0.25 * i) for i in range(5, 17))
    + (1.0,)
)
_FORMAT: Final = 1  # the JSON layout of ConfidenceProfile

ShiftDirection = Literal["up", "down", "none"]


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


@dataclass(frozen=True, slots=True)
class ConfidenceProfile(JsonResult):
    """Mergeable sums of the top-label confidence of served rows at one temperature.

    ``count`` per bin of ``edges`` (bin m is (edges[m], edges[m + 1]], confidence 0 in the
    first); ``confidence_sum`` Σc and ``confidence_square_sum`` Σc² over every row;
    ``labelled`` rows with a label, ``correct`` of them right, ``labelled_confidence_sum`` their
    Σc. ``+`` adds two sets of rows at the same T and edges; :meth:`to_json` is the registered
    reference's tag.

    Examples
    --------
    >>> import numpy as np
    >>> logits = np.log([[0.3, 0.7], [0.9, 0.1], [0.45, 0.55]])
    >>> whole = ConfidenceProfile.from_logits(logits, [1, -1, 0])  # the second row has no label yet
    >>> whole.n, whole.labelled, whole.correct, round(whole.mean_confidence, 4)
    (3, 2, 1, 0.7167)
    >>> parts = ConfidenceProfile.from_logits(logits[:1], [1]) + ConfidenceProfile.from_logits(logits[1:], [-1, 0])
    >>> parts == whole
    True
    >>> ConfidenceProfile.from_json(whole.to_json()) == whole
    True
    """

    temperature: float
    edges: tuple[float, ...]
    count: tuple[int, ...]
    confidence_sum: float
    confidence_square_sum: float
    labelled: int
    correct: int
    labelled_confidence_sum: float

    @classmethod
    def empty(cls, temperature: float = 1.0, edges: Sequence[float] = CONFIDENCE_EDGES) -> ConfidenceProfile:
        """No rows: the neutral element of ``+``."""
        checked = _check_edges(edges)
        return cls(temperature=check_temperature(temperature), edges=checked, count=(0,) * (len(checked) - 1),
                   confidence_sum=0.0, confidence_square_sum=0.0, labelled=0, correct=0, labelled_confidence_sum=0.0)

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
        bins = np.clip(np.searchsorted(np.asarray(checked), c, side="left") - 1, 0, len(checked) - 2)
        return cls(
            temperature=check_temperature(temperature), edges=checked,
            count=tuple(int(v) for v in np.bincount(bins, minlength=len(checked) - 1)),
            confidence_sum=float(c.sum()), confidence_square_sum=float(np.dot(c, c)),
            labelled=int(np.count_nonzero(has_label)), correct=int(np.count_nonzero(right)),
            labelled_confidence_sum=float(c[has_label].sum()),
        )

    def __add__(self, other: ConfidenceProfile) -> ConfidenceProfile:
        if not isinstance(other, ConfidenceProfile):
            return NotImplemented
        if self.temperature != other.temperature or self.edges != other.edges:
            raise ValueError("cannot merge confidence profiles at different temperatures or bin edges: "
                             f"T {self.temperature!r} and {other.temperature!r}")
        return ConfidenceProfile(
            temperature=self.temperature, edges=self.edges,
            count=tuple(a + b for a, b in zip(self.count, other.count, strict=True)),
            confidence_sum=self.confidence_sum + other.confidence_sum,
            confidence_square_sum=self.confidence_square_sum + other.confidence_square_sum,
            labelled=self.labelled + other.labelled, correct=self.correct + other.correct,
            labelled_confidence_sum=self.labelled_confidence_sum + other.labelled_confidence_sum,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfidenceProfile):
            return NotImplemented
        return (self.temperature, self.edges, self.count, self.labelled, self.correct) == (
            other.temperature, other.edges, other.count, other.labelled, other.correct
        ) and bool(np.allclose(
            [self.confidence_sum, self.confidence_square_sum, self.labelled_confidence_sum],
            [other.confidence_sum, other.confidence_square_sum, other.labelled_confidence_sum], rtol=1e-12, atol=1e-9,
        ))

    __hash__ = None  # type: ignore[assignment]

    @property
    def n(self) -> int:
        """Rows summarised, labelled or not."""
        return sum(self.count)

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

    def to_json(self) -> str:
        """One compact JSON object (the registered reference's version tag)."""
        return json.dumps({"format": _FORMAT} | self.to_dict(), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> ConfidenceProfile:
        """Read :meth:`to_json`'s form back; ValueError when it is not one."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as error:
            raise ValueError(f"confidence profile is not JSON: {str(text)[:80]!r}") from error
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f"confidence profile is not a format-{_FORMAT} object: {str(text)[:80]!r}")
        try:
            edges = _check_edges(data["edges"])
            count = tuple(int(v) for v in data["count"])
            profile = cls(
                temperature=check_temperature(float(data["temperature"])), edges=edges, count=count,
                confidence_sum=float(data["confidence_sum"]), confidence_square_sum=float(data["confidence_square_sum"]),
                labelled=int(data["labelled"]), correct=int(data["correct"]),
                labelled_confidence_sum=float(data["labelled_confidence_sum"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"confidence profile misses or mistypes a field: {error}") from error
        if len(count) != len(edges) - 1 or min(count) < 0 or not 0 <= profile.correct <= profile.labelled <= profile.n:
            raise ValueError("confidence profile: counts do not match the edges or are inconsistent")
        return profile


def confidence_profile(
    source: ServedSource, model_name: str, model_version: str, *, temperature: float, start: datetime, end: datetime,
    chunk_size: int = 50_000, edges: Sequence[float] = CONFIDENCE_EDGES,
) -> ConfidenceProfile:
    """Summarise every row of a version served in [start, end), labelled or not, at ``temperature``.

    Reads ``source`` in chunks (memory bounded by ``chunk_size``); the confidences are computed
    from the stored logits at ``temperature`` (the registered T), not taken from the log.

    Examples
    --------
    >>> from datetime import UTC, datetime, timedelta
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
    ``confidence_level``) is the accuracy the ``n`` rows should show once labelled if the model
    is still calibrated; ``labelled`` of them already have labels, with accuracy
    ``labelled_accuracy`` where the confidences predicted ``labelled_predicted_accuracy``.
    ``tested`` is False when the window has fewer than ``min_rows`` rows or there is no
    reference profile; then ``statistic``/``p_value`` are NaN. ``statistic`` is Pearson's χ²
    with ``df`` degrees of freedom over ``bins`` merged bins; ``shifted`` iff ``p_value <
    level``; ``direction`` is "up" when the window is more confident than the reference,
    "down" when less (``confidence_shift`` = the difference of mean confidences).
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
    df: int
    bins: int
    p_value: float
    level: float
    min_rows: int
    labelled_accuracy: float
    labelled_predicted_accuracy: float
    confidence_level: float

    def sentence(self) -> str:
        """One line for a report's reasons."""
        if self.n == 0:
            return "early warning: no row served in the window"
        head = (f"early warning (before labels): predicted accuracy {self.predicted_accuracy:.3f} "
                f"[{self.predicted_accuracy_low:.3f}, {self.predicted_accuracy_high:.3f}] from the confidences of "
                f"{self.n} served rows ({self.labelled} labelled so far")
        head += (f": accuracy {self.labelled_accuracy:.3f} vs predicted {self.labelled_predicted_accuracy:.3f})"
                 if self.labelled else ")")
        if not self.tested:
            why = ("no reference confidence profile registered" if self.reference_n == 0
                   else f"fewer than {self.min_rows} rows")
            return f"{head}; confidence distribution not tested ({why})"
        verdict = (f"SHIFTED {self.direction} (χ² = {self.statistic:.1f}, df {self.df}, p = {_fmt_p(self.p_value)} < "
                   f"{_fmt_p(self.level)})" if self.shifted else
                   f"unchanged (χ² = {self.statistic:.1f}, df {self.df}, p = {_fmt_p(self.p_value)})")
        return (f"{head}; confidence distribution vs the reference (n={self.reference_n}): mean "
                f"{self.mean_confidence:.3f} vs {self.reference_mean_confidence:.3f}, {verdict}")


def _fmt_p(p: float) -> str:
    return "n/a" if not math.isfinite(p) else f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


def _merged_counts(
    reference: NDArray[np.int64], window: NDArray[np.int64], min_expected: float
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Adjacent bins merged left to right until each pooled bin's expected count is at least
    ``min_expected`` in both samples (the remainder joins the last kept bin)."""
    n_r, n_w = int(reference.sum()), int(window.sum())
    needed = min_expected * (n_r + n_w) / min(n_r, n_w)  # pooled count that gives min_expected in the smaller
    groups: list[list[int]] = []
    r_acc = w_acc = 0
    for r, w in zip(reference.tolist(), window.tolist(), strict=True):
        r_acc, w_acc = r_acc + r, w_acc + w
        if r_acc + w_acc >= needed:
            groups.append([r_acc, w_acc])
            r_acc = w_acc = 0
    if r_acc + w_acc:
        if groups:
            groups[-1][0] += r_acc
            groups[-1][1] += w_acc
        else:
            groups.append([r_acc, w_acc])
    table = np.array(groups, dtype=np.int64).reshape(-1, 2)
    return table[:, 0], table[:, 1]


def warn_before_labels(
    window: ConfidenceProfile,
    reference: ConfidenceProfile | None = None,
    *,
    policy: DriftPolicy = DEFAULT_POLICY,
) -> EarlyWarning:
    """Predict the window's accuracy from its confidences and test their distribution against the reference.

    Parameters
    ----------
    window : ConfidenceProfile
        Every served row of the window (labelled or not) at the deployed T.
    reference : ConfidenceProfile, optional
        The registration reference's profile at the same T and edges (the rows T was fitted
        on, labelled). Without it: no test, no gap correction.
    policy : DriftPolicy, default=DEFAULT_POLICY
        ``confidence_shift_level`` (the χ² test's significance level), ``shift_min_rows`` (fewer
        rows in the window or the reference: not tested), ``shift_min_expected`` (smallest
        expected count per merged bin) and ``confidence_level`` (the predicted accuracy's
        interval).

    Returns
    -------
    EarlyWarning

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> logits = 2.0 * rng.normal(size=(6000, 10))
    >>> labels = np.array([rng.choice(10, p=np.exp(z) / np.exp(z).sum()) for z in logits])
    >>> reference = ConfidenceProfile.from_logits(logits[:3000], labels[:3000])
    >>> same = warn_before_labels(ConfidenceProfile.from_logits(logits[3000:]), reference)
    >>> accuracy = float((logits[3000:].argmax(axis=1) == labels[3000:]).mean())  # known only later
    >>> same.shifted, round(same.predicted_accuracy, 3), (round(same.predicted_accuracy_low, 3),
    ...     round(same.predicted_accuracy_high, 3)), round(accuracy, 3)
    (False, 0.528, (0.504, 0.551), 0.542)
    >>> hotter = warn_before_labels(ConfidenceProfile.from_logits(1.3 * logits[3000:]), reference)
    >>> hotter.shifted, hotter.direction
    (True, 'up')
    """
    if not isinstance(window, ConfidenceProfile):
        raise TypeError(f"window must be a ConfidenceProfile; got {type(window).__name__}")
    if reference is not None and not isinstance(reference, ConfidenceProfile):
        raise TypeError(f"reference must be a ConfidenceProfile or None; got {type(reference).__name__}")
    if reference is not None and (not math.isclose(reference.temperature, window.temperature, rel_tol=1e-9)
                                  or reference.edges != window.edges):
        raise ValueError(f"the reference profile is at T = {reference.temperature!r} (or on other bins) and the window "
                         f"at T = {window.temperature!r}: both must be read at the deployed T on the same bins")
    if not isinstance(policy, DriftPolicy):
        raise TypeError(f"policy must be a DriftPolicy; got {type(policy).__name__}")
    level, confidence_level = policy.confidence_shift_level, policy.confidence_level
    min_rows, min_expected = policy.shift_min_rows, policy.shift_min_expected

    n = window.n
    spread = float(ndtri(0.5 + confidence_level / 2.0))
    has_reference = reference is not None and reference.n > 0
    gap = gap_variance = 0.0
    if reference is not None and reference.n > 0 and reference.labelled == reference.n:
        gap = reference.accuracy - reference.mean_confidence
        gap_variance = reference.bernoulli_sum / reference.n**2
    predicted = window.mean_confidence + gap if n else math.nan
    se = math.sqrt(window.bernoulli_sum / n**2 + gap_variance) if n else math.nan
    low, high = (max(0.0, predicted - spread * se), min(1.0, predicted + spread * se)) if n else (math.nan, math.nan)

    statistic, p_value, df, bins = math.nan, math.nan, 0, 0
    tested = False
    if reference is not None and has_reference and n >= min_rows and reference.n >= min_rows:
        r, w = _merged_counts(np.asarray(reference.count, dtype=np.int64), np.asarray(window.count, dtype=np.int64),
                              float(min_expected))
        bins = int(r.shape[0])
        if bins >= 2:
            tested = True
            total = r + w
            n_r, n_w = float(r.sum()), float(w.sum())
            expected_r, expected_w = total * n_r / (n_r + n_w), total * n_w / (n_r + n_w)
            statistic = float(np.sum((r - expected_r) ** 2 / expected_r + (w - expected_w) ** 2 / expected_w))
            df = bins - 1
            p_value = float(chdtrc(df, statistic))
    shift = window.mean_confidence - reference.mean_confidence if reference is not None and has_reference and n else (
        math.nan)
    direction: ShiftDirection = "none" if not math.isfinite(shift) or shift == 0 else ("up" if shift > 0 else "down")
    labelled_predicted = (window.labelled_confidence_sum / window.labelled + gap) if window.labelled else math.nan
    return EarlyWarning(
        temperature=window.temperature, n=n, labelled=window.labelled, tested=tested,
        shifted=bool(tested and p_value < level), direction=direction, predicted_accuracy=predicted,
        predicted_accuracy_low=low, predicted_accuracy_high=high, mean_confidence=window.mean_confidence,
        reference_n=reference.n if reference is not None else 0,
        reference_mean_confidence=reference.mean_confidence if reference is not None else math.nan,
        reference_accuracy=reference.accuracy if reference is not None else math.nan, confidence_shift=shift,
        statistic=statistic, df=df, bins=bins, p_value=p_value, level=float(level), min_rows=min_rows,
        labelled_accuracy=window.accuracy, labelled_predicted_accuracy=labelled_predicted,
        confidence_level=float(confidence_level),
    )
