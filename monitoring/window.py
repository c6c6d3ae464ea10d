"""A window of labelled traffic summarised by mergeable statistics, read in chunks.

:func:`summarise_window` streams a version's labelled rows from the prediction log and merges
per-chunk :class:`~calibration.CalibrationStats` per group and overall, plus the gate's counts
at a fixed threshold (auto-process iff confidence >= threshold). Memory is bounded by
``chunk_size``, not by the window. The statistics are computed at the temperature passed in
(the version's registered T), from the stored logits — not from the confidences that were
logged.

Each chunk is read in **one fused pass** (:class:`calibration.TopLabelScores`): every row's
confidence, correctness, NLL and Brier terms and its NLL's first two derivatives in 1/T
once; then the statistics of every group from one ``bincount`` over group × bin, the overall
as the sum of the groups (rows without a group are one more cell), the temperature test's
sums (:class:`calibration.TemperatureStats`: n, Σg, Σg², Σh per group and overall) from three
more ``bincount`` calls over the groups, and the gate counts from the same confidences. However
many groups, the logits are read once per chunk.

The rows come from any :class:`LabelledSource`: the SQL prediction log or a Parquet export
of it (:class:`~monitoring.PredictionLogExport`). :func:`summarise_arrays` builds the same
summary from arrays already in memory (the refit's verification slice, tests). Two summaries
of adjacent windows add up with ``+``; :func:`merge_summaries` adds up summaries of parts of
the same window (partitions summarised separately, e.g. on a cluster).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from functools import reduce
from operator import add
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calibration import (
    CalibrationStats,
    ScoredSet,
    TemperatureStats,
    TopLabelScores,
    check_n_bins,
    check_temperature,
)

from ._validation import check_chunk_size, check_threshold, check_window

if TYPE_CHECKING:  # the window reads the source it is given; it does not need the SQL layer to import
    from .store import LabelledChunk

__all__ = [
    "GateCounts", "LabelledSource", "WindowQuery", "WindowSummary", "merge_summaries", "summarise_arrays",
    "summarise_window",
]


class LabelledSource(Protocol):
    """Where a version's labelled traffic is read from, chunk by chunk.

    :class:`~monitoring.PredictionLog` (the SQL log) and :class:`~monitoring.PredictionLogExport`
    (its Parquet export) are both sources, and give the same chunks for the same rows.
    """

    def n_classes(self, model_name: str, model_version: str) -> int | None:
        """K of the version, or None when the source holds nothing of it."""
        ...

    def iter_labelled(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = ...
    ) -> Iterator[LabelledChunk]:
        """The version's labelled rows served in [start, end), in (time, id) order, in non-empty
        chunks of at most ``chunk_size`` rows."""
        ...


@dataclass(frozen=True, slots=True)
class WindowQuery:
    """Which window of which version a summary reads, and at what: its arguments checked once.

    Every read of a window (:func:`summarise_window`, :func:`~monitoring.scan_window`,
    :func:`~monitoring.summarise_export`, :func:`~monitoring.reweight_window`) takes one, so
    the rules below are written here only.

    Parameters
    ----------
    model_name, model_version : str
        The serving version.
    temperature : float
        The version's registered T (finite, > 0); every statistic is read at it.
    start, end : datetime
        Timezone-aware bounds of the window [start, end) on the serving time (kept in UTC).
    n_bins : int, default=15
        Equal-width bins (m/M, (m+1)/M] on the top-label confidence; confidence 0 goes to the
        first.
    threshold : float, optional
        The registered gate threshold; when given, coverage and accepted accuracy are counted.

    Raises
    ------
    ValueError
        If the bounds are naive or reversed, or an argument is out of range.

    Examples
    --------
    >>> from datetime import timezone
    >>> t = datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    >>> query = WindowQuery("m", "1", temperature=1.5, start=t, end=t + timedelta(hours=1))
    >>> query.start.isoformat(), query.n_bins, query.threshold
    ('2026-01-01T00:00:00+00:00', 15, None)
    >>> WindowQuery("m", "1", temperature=1.5, start=t, end=t - timedelta(hours=1))
    Traceback (most recent call last):
    ...
    ValueError: the window ends (2025-12-31T23:00:00+00:00) before it starts (2026-01-01T00:00:00+00:00)
    """

    model_name: str
    model_version: str
    _: KW_ONLY
    temperature: float
    start: datetime
    end: datetime
    n_bins: int = 15
    threshold: float | None = None

    def __post_init__(self) -> None:
        start, end = check_window(self.start, self.end)
        threshold = None if self.threshold is None else check_threshold(self.threshold)
        checked = {"temperature": check_temperature(self.temperature), "n_bins": check_n_bins(self.n_bins),
                   "start": start, "end": end, "threshold": threshold}
        for name, value in checked.items():
            object.__setattr__(self, name, value)


@dataclass(frozen=True, slots=True)
class GateCounts:
    """Mergeable counts of the gate at one threshold: auto-process iff confidence >= threshold.

    Examples
    --------
    >>> a = GateCounts.from_confidence([0.9, 0.5], [True, False], threshold=0.8)
    >>> b = GateCounts.from_confidence([0.95], [False], threshold=0.8)
    >>> (a + b).coverage, (a + b).accepted_accuracy
    (0.6666666666666666, 0.5)
    >>> GateCounts.from_confidence([0.5], [True], threshold=0.8).accepted_accuracy
    nan
    """

    threshold: float
    n: int
    accepted: int
    accepted_correct: int

    @classmethod
    def empty(cls, threshold: float) -> GateCounts:
        """No examples: the neutral element of ``+``."""
        return cls(threshold=check_threshold(threshold), n=0, accepted=0, accepted_correct=0)

    @classmethod
    def from_confidence(cls, confidence: ArrayLike, correct: ArrayLike, *, threshold: float) -> GateCounts:
        """Count the accepted rows (confidence >= threshold) and the correct ones among them."""
        threshold = check_threshold(threshold)
        confidence_ = np.asarray(confidence, dtype=np.float64)
        correct_ = np.asarray(correct, dtype=bool)
        if confidence_.ndim != 1 or correct_.shape != confidence_.shape:
            raise ValueError(
                f"confidence and correct must be 1-D of one length; got shapes {confidence_.shape} and {correct_.shape}"
            )
        accepted = confidence_ >= threshold
        return cls(
            threshold=threshold,
            n=int(confidence_.shape[0]),
            accepted=int(np.count_nonzero(accepted)),
            accepted_correct=int(np.count_nonzero(accepted & correct_)),
        )

    def __add__(self, other: GateCounts) -> GateCounts:
        if not isinstance(other, GateCounts):
            return NotImplemented
        if self.threshold != other.threshold:
            raise ValueError(f"cannot merge gate counts at different thresholds: {self.threshold} and {other.threshold}")
        return GateCounts(
            threshold=self.threshold,
            n=self.n + other.n,
            accepted=self.accepted + other.accepted,
            accepted_correct=self.accepted_correct + other.accepted_correct,
        )

    @property
    def coverage(self) -> float:
        """Share auto-processed (NaN when there are no rows)."""
        return self.accepted / self.n if self.n else math.nan

    @property
    def accepted_accuracy(self) -> float:
        """Accuracy among the auto-processed; NaN (undefined, never 1.0) when none was accepted."""
        return self.accepted_correct / self.accepted if self.accepted else math.nan


@dataclass(frozen=True, slots=True, eq=False)
class WindowSummary:
    """Mergeable summary of a version's labelled traffic in [start, end) at one temperature.

    ``overall`` and each entry of ``groups`` are :class:`CalibrationStats`; rows without a
    group count in ``overall`` and in ``n_ungrouped`` only. ``temperature_stats`` and
    ``group_temperature_stats`` are the temperature test's sums (n, Σg, Σg², Σh of the NLL's
    derivatives in 1/T at ``temperature``) over the same rows, overall and per group (same keys
    as ``groups``). ``gate`` is None when no threshold was given. ``served_temperatures`` are the distinct temperatures the rows were *served*
    at (normally just the registered one). ``n_chunks`` is how many chunks were read.
    """

    model_name: str
    model_version: str
    start: datetime
    end: datetime
    temperature: float
    n_bins: int
    n_classes: int
    overall: CalibrationStats
    groups: Mapping[str, CalibrationStats]
    n_ungrouped: int
    gate: GateCounts | None
    served_temperatures: tuple[float, ...]
    n_chunks: int
    temperature_stats: TemperatureStats
    group_temperature_stats: Mapping[str, TemperatureStats]

    @property
    def n(self) -> int:
        """Labelled rows in the window."""
        return self.overall.n

    @property
    def group_weighted_ece(self) -> float:
        """Count-weighted mean of the group ECEs (an overall average can hide groups that are
        off in opposite directions); NaN without grouped rows."""
        total = sum(stats.n for stats in self.groups.values())
        if total == 0:
            return math.nan
        return sum(stats.n * stats.ece for stats in self.groups.values()) / total

    def __add__(self, other: WindowSummary) -> WindowSummary:
        """Merge the summaries of two adjacent windows of the same version (either order)."""
        if not isinstance(other, WindowSummary):
            return NotImplemented
        _refuse_unmergeable(self, other, ("model_name", "model_version", "temperature", "n_bins", "n_classes"),
                            "cannot merge window summaries with different {name}: {first!r} and {second!r}")
        first, second = (self, other) if self.start <= other.start else (other, self)
        if first.end != second.start:
            raise ValueError(
                f"windows must be adjacent to merge: [{first.start.isoformat()}, {first.end.isoformat()}) and "
                f"[{second.start.isoformat()}, {second.end.isoformat()})"
            )
        return _summed([first, second], start=first.start, end=second.end)


class _Accumulator:
    """Merges chunks into a summary; holds only O(n_bins × n_groups) numbers."""

    def __init__(self, query: WindowQuery, n_classes: int) -> None:
        self.query = query
        self.temperature = temperature = query.temperature
        self.n_bins = n_bins = query.n_bins
        self.n_classes = n_classes
        self.overall = CalibrationStats.empty(n_bins=n_bins, temperature=temperature, n_classes=n_classes)
        self.groups: dict[str, CalibrationStats] = {}
        self.scores = TemperatureStats.empty(temperature)
        self.group_scores: dict[str, TemperatureStats] = {}
        self.n_ungrouped = 0
        self.gate = None if query.threshold is None else GateCounts.empty(query.threshold)
        self.served: set[float] = set()
        self.n_chunks = 0

    def add(
        self,
        logits: NDArray[np.floating[Any]],
        labels: NDArray[np.intp] | NDArray[np.int64],
        groups: NDArray[np.object_] | None,
        served_temperatures: NDArray[np.float64] | None,
    ) -> None:
        """Fold one chunk in: one pass over its logits, whatever the number of groups."""
        scores = TopLabelScores.from_logits(logits, labels, temperature=self.temperature)
        self.add_scores(scores, groups, served_temperatures)

    def add_scores(
        self,
        scores: TopLabelScores,
        groups: NDArray[np.object_] | None,
        served_temperatures: NDArray[np.float64] | None,
    ) -> None:
        """Fold in a chunk already scored: group statistics first, the overall as their sum
        (calibration statistics and the temperature test's sums alike)."""
        self.n_chunks += 1
        n_rows = scores.n
        if served_temperatures is not None:
            self.served.update(np.unique(served_temperatures).tolist())
        keys: list[str] = []
        # Rows without a group are one more code, after the named groups.
        codes = np.zeros(n_rows, dtype=np.intp)
        if groups is not None:
            named = np.asarray(groups != None, dtype=bool)  # noqa: E711 - element-wise, not identity
            if named.any():
                unique, inverse = np.unique(groups[named].astype(str), return_inverse=True)
                keys = unique.tolist()
                codes[:] = len(keys)
                codes[named] = inverse.reshape(-1)
        ungrouped = len(keys)
        per_code = scores.grouped_calibration_stats(codes, ungrouped + 1, n_bins=self.n_bins)
        for key, part in zip(keys, per_code[:ungrouped], strict=True):
            self.groups[key] = self.groups[key] + part if key in self.groups else part
        self.n_ungrouped += per_code[ungrouped].n
        self.overall = reduce(add, per_code, self.overall)
        sums = TemperatureStats.grouped(scores, codes, ungrouped + 1)
        for key, part_sums in zip(keys, sums[:ungrouped], strict=True):
            self.group_scores[key] = self.group_scores[key] + part_sums if key in self.group_scores else part_sums
        self.scores = reduce(add, sums, self.scores)
        if self.gate is not None:
            self.gate = self.gate + GateCounts.from_confidence(
                scores.confidence, scores.correct, threshold=self.gate.threshold
            )

    def summary(self) -> WindowSummary:
        query = self.query
        return WindowSummary(
            model_name=query.model_name,
            model_version=query.model_version,
            start=query.start,
            end=query.end,
            temperature=self.temperature,
            n_bins=self.n_bins,
            n_classes=self.n_classes,
            overall=self.overall,
            groups=dict(sorted(self.groups.items())),
            n_ungrouped=self.n_ungrouped,
            gate=self.gate,
            served_temperatures=tuple(sorted(self.served)),
            n_chunks=self.n_chunks,
            temperature_stats=self.scores,
            group_temperature_stats=dict(sorted(self.group_scores.items())),
        )


def _checked_query(query: object) -> WindowQuery:
    """``query`` if it is a :class:`WindowQuery`, else a TypeError that says how to make one (the
    reads took the version and window as separate arguments before)."""
    if not isinstance(query, WindowQuery):
        raise TypeError(
            f"the window to read must be a WindowQuery; got {type(query).__name__} {query!r:.80}: pass "
            "WindowQuery(model_name, model_version, temperature=T, start=..., end=...) instead of the name, "
            "version and window as separate arguments"
        )
    return query


def _logged_classes(log: LabelledSource, query: WindowQuery) -> int:
    """K of the query's version in ``log``; LookupError when it never logged (a typo in the name or
    version would otherwise look like a quiet window forever)."""
    n_classes = log.n_classes(query.model_name, query.model_version)
    if n_classes is None:
        raise LookupError(
            f"no prediction of model {query.model_name!r} version {query.model_version!r} was ever logged in "
            f"{log!r}; check the name and version (the monitor reads what the serving wrapper writes)"
        )
    return n_classes


def summarise_window(log: LabelledSource, query: WindowQuery, *, chunk_size: int = 50_000) -> WindowSummary:
    """Summarise a version's labelled traffic served in [start, end), reading it in chunks.

    Parameters
    ----------
    log : LabelledSource
        The prediction log, or a Parquet export of it.
    query : WindowQuery
        The version, the window, and the T, bins and gate threshold it is read at.
    chunk_size : int, default=50_000
        Rows per chunk read from the source; peak memory is proportional to it.

    Returns
    -------
    WindowSummary
        Overall and per-group :class:`CalibrationStats`, gate counts and the window.

    Raises
    ------
    LookupError
        If no prediction of this version was ever logged (a typo in the name or version would
        otherwise look like a quiet window forever).
    ValueError
        If ``chunk_size`` is not >= 1.

    Examples
    --------
    >>> from monitoring import PredictionLog, log_predictions
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> logits = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0]])
    >>> _ = log_predictions(log, "m", "1", 1.0, logits, ["a", "b", "c"], groups=["x", "y", "x"],
    ...                     time=t, labels=[0, 0, 0])
    >>> query = WindowQuery("m", "1", temperature=1.0, start=t, end=t + timedelta(hours=1), threshold=0.8)
    >>> summary = summarise_window(log, query, chunk_size=2)
    >>> summary.n, sorted(summary.groups), summary.n_chunks
    (3, ['x', 'y'], 2)
    >>> summary.gate.coverage, summary.gate.accepted_accuracy
    (0.6666666666666666, 1.0)
    """
    accumulator, chunks = _labelled_read(log, query, chunk_size)
    for chunk in chunks:
        accumulator.add(chunk.logits, chunk.labels, chunk.groups, chunk.temperature)
    return accumulator.summary()


def _labelled_read(
    log: LabelledSource, query: WindowQuery, chunk_size: int
) -> tuple[_Accumulator, Iterable[LabelledChunk]]:
    """A read of the query's labelled rows: the empty summary and the chunks; LookupError when the
    version never logged."""
    chunk_size = check_chunk_size(chunk_size)
    query = _checked_query(query)
    accumulator = _Accumulator(query, _logged_classes(log, query))
    chunks = log.iter_labelled(query.model_name, query.model_version, query.start, query.end, chunk_size=chunk_size)
    return accumulator, chunks


def summarise_arrays(
    logits: ArrayLike | ScoredSet,
    labels: ArrayLike | None,
    *,
    temperature: float,
    start: datetime,
    end: datetime,
    groups: ArrayLike | None = None,
    n_bins: int = 15,
    threshold: float | None = None,
    model_name: str = "",
    model_version: str = "",
) -> WindowSummary:
    """The :class:`WindowSummary` of arrays already in memory (same numbers as from the log).

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        Frozen logits; a validated :class:`~calibration.ScoredSet` stands for logits and
        labels (pass ``labels=None``; its groups are not used: pass ``groups``).
    labels : array of shape (n_samples,), or None with a ScoredSet
        True classes in [0, n_classes).
    temperature : float
        T at which to read the confidences.
    start, end : datetime
        Timezone-aware bounds the arrays stand for.
    groups : array of shape (n_samples,), optional
        Group of each row (str, or None for no group).
    n_bins, threshold, model_name, model_version
        As :class:`WindowQuery` (the names default to "": labels for the reports).

    Returns
    -------
    WindowSummary
        The same numbers as :func:`summarise_window` of these rows.

    Raises
    ------
    ValueError
        If the arrays are malformed or the bounds naive or reversed.

    Examples
    --------
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = summarise_arrays(np.log([[0.3, 0.7], [0.9, 0.1]]), [1, 0], temperature=1.0, start=t, end=t,
    ...                      groups=["a", None])
    >>> s.n, s.n_ungrouped, round(s.overall.ece, 3)
    (2, 1, 0.2)
    """
    # The one check of the logits, labels and temperature, and the one pass over the logits.
    scores = TopLabelScores.from_logits(logits, labels, temperature=temperature)
    query = WindowQuery(model_name, model_version, temperature=scores.temperature, start=start, end=end,
                        n_bins=n_bins, threshold=threshold)
    group_array: NDArray[np.object_] | None = None
    if groups is not None:
        group_array = np.asarray(groups, dtype=object)
        if group_array.shape != (scores.n,):
            raise ValueError(f"groups must be 1-D with one entry per row ({scores.n}); got shape {group_array.shape}")
    accumulator = _Accumulator(query, scores.n_classes)
    accumulator.add_scores(scores, group_array, None)
    return accumulator.summary()


def merge_summaries(parts: Sequence[WindowSummary]) -> WindowSummary:
    """Add up the summaries of disjoint parts of one window (e.g. partitions of its rows).

    ``+`` joins *adjacent* windows; here every part covers the same [start, end) of the same
    version at the same T, bins and threshold, and holds its own rows. Statistics, groups,
    gate counts and chunk counts are summed in the order of ``parts`` (so the sums do not
    depend on where the parts were computed); served temperatures are united.

    Parameters
    ----------
    parts : sequence of WindowSummary
        At least one summary, all of the same window.

    Returns
    -------
    WindowSummary

    Raises
    ------
    ValueError
        If ``parts`` is empty, or two parts differ in version, window, temperature, bins,
        K or gate threshold.

    Examples
    --------
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> a = summarise_arrays(np.log([[0.3, 0.7]]), [1], temperature=1.0, start=t, end=t, groups=["x"])
    >>> b = summarise_arrays(np.log([[0.9, 0.1]]), [0], temperature=1.0, start=t, end=t, groups=[None])
    >>> both = merge_summaries([a, b])
    >>> both.n, both.n_ungrouped, list(both.groups), both.n_chunks
    (2, 1, ['x'], 2)
    """
    if not parts:
        raise ValueError("merge_summaries needs at least one summary")
    first = parts[0]
    names = ("model_name", "model_version", "start", "end", "temperature", "n_bins", "n_classes")
    for part in parts[1:]:
        _refuse_unmergeable(first, part, names, "cannot merge summaries of different windows: {name} {first!r} and {second!r}")
    return _summed(parts, start=first.start, end=first.end)


def _refuse_unmergeable(first: WindowSummary, second: WindowSummary, names: tuple[str, ...], message: str) -> None:
    """Refuse two summaries that differ in one of ``names`` (``message`` formatted with the name and
    both values) or of which only one has gate counts: what ``+`` and :func:`merge_summaries` check."""
    for name in names:
        if getattr(first, name) != getattr(second, name):
            raise ValueError(message.format(name=name, first=getattr(first, name), second=getattr(second, name)))
    if (first.gate is None) != (second.gate is None):
        raise ValueError("cannot merge a window summary with gate counts and one without")


def _summed(parts: Sequence[WindowSummary], *, start: datetime, end: datetime) -> WindowSummary:
    """The summary of ``parts`` (checked compatible by the caller) over [start, end): every
    sum added, groups merged by name, in the parts' order."""
    first = parts[0]
    groups: dict[str, CalibrationStats] = {}
    scores: dict[str, TemperatureStats] = {}
    for part in parts:
        for key, stats in part.groups.items():
            groups[key] = groups[key] + stats if key in groups else stats
        for key, sums in part.group_temperature_stats.items():
            scores[key] = scores[key] + sums if key in scores else sums
    gates = [part.gate for part in parts if part.gate is not None]
    return WindowSummary(
        model_name=first.model_name,
        model_version=first.model_version,
        start=start,
        end=end,
        temperature=first.temperature,
        n_bins=first.n_bins,
        n_classes=first.n_classes,
        overall=reduce(add, (part.overall for part in parts[1:]), first.overall),
        groups=dict(sorted(groups.items())),
        n_ungrouped=sum(part.n_ungrouped for part in parts),
        gate=reduce(add, gates[1:], gates[0]) if gates else None,
        served_temperatures=tuple(sorted(set().union(*(part.served_temperatures for part in parts)))),
        n_chunks=sum(part.n_chunks for part in parts),
        temperature_stats=reduce(add, (part.temperature_stats for part in parts[1:]), first.temperature_stats),
        group_temperature_stats=dict(sorted(scores.items())),
    )
