"""A check's reads of the prediction log in one pass over its window.

A check needs three things from the SQL log, over three row sets:

* the **window summary** (:func:`monitoring.summarise_window`): the labelled rows served in
  [start, end);
* the **early warning's profile** (:func:`monitoring.confidence_profile`): *every* row served in
  [start, end), labelled or not;
* the **sequential increment** (:func:`monitoring.update_sequential`): the rows whose label
  arrived in [since, until), served at any time (:class:`LabelArrivals`).

The first is a subset of the second, so both come from one read of the window's served rows
(:meth:`PredictionLog.iter_served <monitoring.PredictionLog.iter_served>`): its labelled rows feed
the summary. The third is not a subset of either — a label that arrives days after its row was
served belongs to a row outside the window — but in steady state nearly all of it is inside:
the database marks each window row whose label arrived in [since, until) (``arrived``), so that
part rides on the same read, and only the rows served *outside* the window whose label arrived
in the range are read apart: before the window on the index of labelling times (few rows among
many), after it on the serving-time index (rows served while the check runs). Every logit is
read once and checked once (for all its uses); the summary's and the increment's per-row scores
are computed once (:class:`calibration.TopLabelScores`), and one softmax of every served row gives
the profile's confidences (as :func:`monitoring.confidence_profile` computes them) and the
diagnosis's posteriors below (:func:`calibration.top_label_and_probabilities`).

The same read gives the shift diagnosis what it needs of the window
(:func:`monitoring.diagnose_check`): over every served row, the class priors' sums and a bounded
uniform sample of the posteriors (:class:`calibration.ServedPriorStats`, ``prior_capacity``
rows at most, merged chunk by chunk exactly as one summary of the whole window would be), and
over the labelled rows the count of rows and of right ones per true class.

Memory is bounded by ``chunk_size`` rows (and ``prior_capacity`` posteriors), whatever the window. The numbers are those of the
three separate reads: the same counts, and sums equal to rounding (chunks hold served rows, not
labelled ones, so the sums are added in another grouping).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from calibration import (
    Interval,
    ServedPriorStats,
    TemperatureStats,
    TopLabelScores,
    check_logits,
    top_label_and_probabilities,
    top_label_confidence,
)

from ._validation import as_utc, check_chunk_size
from .early_warning import CONFIDENCE_EDGES, ConfidenceProfile
from .store import LabelledChunk, PredictionStore
from .window import WindowQuery, WindowSummary, _Accumulator, _checked_query, _logged_classes

__all__ = ["LabelArrivals", "WindowScan", "scan_window"]


@dataclass(frozen=True, slots=True)
class LabelArrivals:
    """The rows of a sequential increment: label attached in [since, until), served in
    [served_from, served_to). ``since`` None: every label attached before ``until``.

    Examples
    --------
    >>> LabelArrivals(None, datetime(2026, 1, 2, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC),
    ...               datetime(2026, 1, 2, tzinfo=UTC)).since is None
    True
    """

    since: datetime | None
    until: datetime
    served_from: datetime
    served_to: datetime

    def __post_init__(self) -> None:
        for name in ("until", "served_from", "served_to"):
            as_utc(getattr(self, name), name=name)
        if self.since is not None:
            as_utc(self.since, name="since")
        if self.served_to < self.served_from:
            raise ValueError(f"served_to {self.served_to.isoformat()} is before served_from "
                             f"{self.served_from.isoformat()}; the served range must not be reversed")


@dataclass(frozen=True, slots=True, eq=False)
class WindowScan:
    """What one pass over a check's window gives.

    ``summary`` is the window's :class:`WindowSummary` (None when not asked for: the window came
    from elsewhere, e.g. the Parquet export); ``profile`` the :class:`ConfidenceProfile` of every
    served row of the window; ``arrived`` the temperature test's sums of the rows of the
    :class:`LabelArrivals` asked for (None when none were) and ``arrived_first_served`` the
    earliest serving time among them (None without any). ``served_rows`` rows of the window were
    read, and ``outside_rows`` rows of the increment outside it. ``served_priors`` the class
    priors' sums and sample over every served row (None when not asked for, or no row was
    served); ``class_rows`` and ``class_correct`` the labelled rows of the window per true class
    and how many of them the model got right.
    """

    summary: WindowSummary | None
    profile: ConfidenceProfile
    arrived: TemperatureStats | None
    arrived_first_served: datetime | None
    served_rows: int
    outside_rows: int
    served_priors: ServedPriorStats | None = None
    class_rows: NDArray[np.int64] | None = None
    class_correct: NDArray[np.int64] | None = None
    settling: int = 0
    """Rows whose label arrived at or after the increment's ``until`` (the label settle time):
    the next increment's, counted so that a check does not say "0 new rows" of them."""


def _earliest(current: datetime | None, time: np.datetime64) -> datetime:
    moment = time.astype("datetime64[us]").item().replace(tzinfo=UTC)
    return moment if current is None or moment < current else current


def _checked_scan(
    log: PredictionStore, query: WindowQuery, arrivals: LabelArrivals | None, prior_capacity: int | None
) -> int | None:
    """What :func:`scan_window` checks of its arguments besides the query; the checked capacity."""
    if prior_capacity is not None:
        prior_capacity = Interval(1, integer=True).check_count(prior_capacity, name="prior_capacity")
    start, end = query.start, query.end
    if arrivals is not None and not arrivals.served_from <= start <= end <= arrivals.served_to:
        raise ValueError(
            f"the increment's served range [{arrivals.served_from.isoformat()}, {arrivals.served_to.isoformat()}) must "
            f"cover the window [{start.isoformat()}, {end.isoformat()}): its rows inside the window ride on the window's read"
        )
    if not log.scope.served_rows:
        raise ValueError(f"{log!r} holds labelled rows only: scan the served rows of a store that holds every one "
                         "(the SQL prediction log)")
    return prior_capacity


def scan_window(
    log: PredictionStore,
    query: WindowQuery,
    *,
    chunk_size: int = 50_000,
    arrivals: LabelArrivals | None = None,
    summarise: bool = True,
    prior_capacity: int | None = None,
    seed: int = 0,
) -> WindowScan:
    """Read a version's window once: its summary, its served rows' profile, and an increment.

    Parameters
    ----------
    log : PredictionStore
        A store of every served row (its ``scope.served_rows``: the SQL prediction log, a window
        in memory; the export holds labelled rows only), with label times when ``arrivals`` are
        asked for.
    query : WindowQuery
        The version, the window [start, end) on the serving time, and what it is read at (every
        statistic at its T).
    chunk_size : int, default=50_000
        Rows per read; peak memory is proportional to it.
    arrivals : LabelArrivals, optional
        The sequential increment's rows (its served range must cover the window); None: no
        increment.
    summarise : bool, default=True
        Summarise the window's labelled rows (False when the summary comes from elsewhere).
    prior_capacity : int, optional
        Collect the served rows' :class:`calibration.ServedPriorStats`, its sample at most this
        many rows; None: not collected.
    seed : int, default=0
        Seeds the sample's keys (chunk i draws them from ``numpy.random.default_rng([seed, i])``).

    Returns
    -------
    WindowScan

    Raises
    ------
    LookupError
        If no prediction of this version was ever logged (as :func:`monitoring.summarise_window`).
    ValueError
        If an argument is out of range, the increment's served range does not cover the window,
        or the store does not hold every served row (or, for ``arrivals``, the label times).

    Examples
    --------
    >>> from monitoring import PredictionLog, WindowQuery, log_predictions
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> _ = log_predictions(log, "m", "1", 1.0, [[2.0, 0.0], [0.0, 1.0], [3.0, 0.0]], ["a", "b", "c"], time=t)
    >>> _ = log.attach_labels(["a", "b"], [0, 0], labelled_at=t + timedelta(hours=1))
    >>> arrivals = LabelArrivals(None, t + timedelta(hours=2), t, t + timedelta(hours=3))
    >>> query = WindowQuery("m", "1", temperature=1.0, start=t, end=t + timedelta(hours=3))
    >>> scan = scan_window(log, query, arrivals=arrivals)
    >>> scan.summary.n, scan.profile.n, scan.arrived.n, scan.arrived_first_served == t
    (2, 3, 2, True)
    >>> scan = scan_window(log, query, prior_capacity=2)
    >>> scan.served_priors.n, scan.served_priors.sample.shape, scan.class_rows.tolist(), scan.class_correct.tolist()
    (3, (2, 2), [2, 0], [1, 0])
    """
    chunk_size = check_chunk_size(chunk_size)
    query = _checked_query(query)
    model_name, model_version, temperature = query.model_name, query.model_version, query.temperature
    start, end = query.start, query.end
    prior_capacity = _checked_scan(log, query, arrivals, prior_capacity)
    n_classes = _logged_classes(log, query)
    summary = _Accumulator(query, n_classes) if summarise else None
    profile = ConfidenceProfile.empty(temperature, CONFIDENCE_EDGES)
    arrived = None if arrivals is None else TemperatureStats.empty(temperature)
    first_served: datetime | None = None
    served = 0
    priors: ServedPriorStats | None = None
    classes = _ClassCounts(n_classes)
    since, until = (None, None) if arrivals is None else (arrivals.since, arrivals.until)
    for index, chunk in enumerate(log.iter_served(model_name, model_version, start, end, chunk_size=chunk_size,
                                                  labelled_from=since, labelled_to=until)):
        served += len(chunk)
        if not len(chunk):
            continue
        # Checked once here for every use below (the profile, the priors, the scores).
        logits = check_logits(chunk.logits)
        predictions, confidence, summed = _top_labels(logits, temperature, prior_capacity, [seed, index])
        if summed is not None:
            priors = summed if priors is None else priors + summed
        labelled = chunk.labels >= 0
        profile = profile + ConfidenceProfile.from_confidence(confidence, labelled, predictions == chunk.labels,
                                                              temperature=temperature)
        # Every row labelled (the usual case once labels have caught up): views, not copies.
        rows: slice | NDArray[np.bool_] = slice(None) if labelled.all() else labelled
        classes.add(predictions[rows], chunk.labels[rows])
        wanted = chunk.arrived & labelled if arrived is not None else None
        if not labelled.any() or (summary is None and (wanted is None or not wanted.any())):
            continue
        scores = TopLabelScores.from_logits(logits[rows], chunk.labels[rows], temperature=temperature,
                                            check_finite=False)
        if summary is not None:
            summary.add_scores(scores, chunk.groups[rows], chunk.temperature[rows])
        if arrived is not None and wanted is not None and wanted.any():
            codes = np.where(chunk.arrived[rows], 0, 1).astype(np.intp)
            arrived = arrived + TemperatureStats.grouped(scores, codes, 2)[0]
            first_served = _earliest(first_served, chunk.time[wanted][0])
    outside = 0
    if arrivals is not None and arrived is not None:
        # The increment's rows served outside the window: before it (late labels of older rows,
        # found on the labelling-time index) and after it (served while this check runs).
        outer: tuple[tuple[datetime, datetime, Literal["served", "labelled"]], ...] = (
            (arrivals.served_from, start, "labelled"), (end, arrivals.served_to, "served"))
        for lower, upper, order in outer:
            if lower >= upper:
                continue
            for part in log.iter_labelled(model_name, model_version, lower, upper, chunk_size=chunk_size,
                                          labelled_from=since, labelled_to=until, order=order):
                outside += len(part)
                arrived = arrived + _temperature_sums(part, temperature)
                first_served = _earliest(first_served, part.time.min())
    settling = 0 if arrivals is None else sum(len(part) for part in log.iter_labelled(
        model_name, model_version, arrivals.served_from, arrivals.served_to, chunk_size=chunk_size, labelled_from=until,
        order="labelled"))
    return WindowScan(
        summary=None if summary is None else summary.summary(),
        profile=profile, arrived=arrived, arrived_first_served=first_served, served_rows=served,
        outside_rows=outside, served_priors=priors, class_rows=classes.rows, class_correct=classes.correct,
        settling=settling,
    )


def _top_labels(
    logits: NDArray[np.floating[Any]], temperature: float, prior_capacity: int | None, seed: list[int]
) -> tuple[NDArray[np.intp], NDArray[np.float64], ServedPriorStats | None]:
    """A checked chunk's first arg-max and top-label confidence per row, and its priors' summary
    when asked for (``prior_capacity``): one softmax for both."""
    if prior_capacity is None:
        predictions, confidence = top_label_confidence(logits, temperature=temperature, check_finite=False)
        return predictions, confidence, None
    predictions, confidence, posteriors = top_label_and_probabilities(logits, temperature=temperature,
                                                                      check_finite=False)
    summed = ServedPriorStats.from_probabilities(posteriors, predictions, temperature=temperature,
                                                 capacity=prior_capacity, seed=np.random.default_rng(seed))
    return predictions, confidence, summed


class _ClassCounts:
    """The labelled rows per true class and the right ones among them, chunk by chunk."""

    def __init__(self, n_classes: int) -> None:
        self.rows = np.zeros(n_classes, dtype=np.int64)
        self.correct = np.zeros(n_classes, dtype=np.int64)

    def add(self, predictions: NDArray[np.intp], labels: NDArray[np.int64]) -> None:
        if labels.shape[0]:
            k = self.rows.shape[0]
            self.rows += np.bincount(labels, minlength=k)
            self.correct += np.bincount(labels[predictions == labels], minlength=k)


def _temperature_sums(chunk: LabelledChunk, temperature: float) -> TemperatureStats:
    return TemperatureStats.from_logits(chunk.logits, chunk.labels, temperature=temperature)
