"""One check of one serving version, as a value: read the window, fold the stream, decide, diagnose.

:func:`check_version` is the check the scheduled monitor (``monitor``, ``monitor-fleet``), the
command line (``thermostat drift``, ``thermostat diagnose``) and the studies all run. It reads
only the stores it is given and returns a :class:`CheckOutcome`: the monitor records it (the
MLflow run, the artifacts, the events, the version's state), the command line prints it. The
steps, in order:

1. **read the window.** When ``stream`` is ``source`` (a store of every served row: the SQL
   log, a window in memory), in one pass (:func:`monitoring.scan_window`): the window's
   summary, the early warning's profile of every served row, the sequential increment and the
   served rows' class priors. Otherwise the summary comes from ``source`` (the Parquet export;
   or computed on a cluster and given) and the pass over ``stream`` serves the checks across the
   stream (none without a stream);
2. the **sequential rule** (:func:`monitoring.update_sequential`), on a check of the current
   window only (``state.live``): the rows whose label arrived since the rule's cursor;
3. the **early warning** (:func:`monitoring.warn_before_labels`) on every served row;
4. the **decision** (:func:`monitoring.decide_drift`, then :func:`monitoring.with_stream_checks`),
   its cool-down counted from ``state.last_drift_at``;
5. on a drift the sequential rule did not date, the window's own **change point**
   (:func:`monitoring.window_change_point`, a second read of its labelled rows): a refit reads
   from there;
6. the **shift diagnosis** (:func:`monitoring.diagnose_check`) when the reference has an
   accuracy floor: the served rows' priors against the registered ones and, when they moved,
   the labelled rows read again from ``source`` at the re-weighted posteriors.

A version of which the window's store holds no row gives no report (``report`` None, the
verdict ``insufficient_data`` of a version that never logged): a result, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Final

import numpy as np
from numpy.typing import NDArray

from calibration import PriorEstimate, ReferencePriors, TemperatureStats

from ._validation import as_utc, check_chunk_size
from .change_point import window_change_point
from .diagnosis import ReweightedWindow, diagnose_check, reweight_window
from .drift import DriftReference, DriftReport, decide_drift, with_stream_checks
from .early_warning import ConfidenceProfile, warn_before_labels
from .policy import DriftPolicy
from .scan import LabelArrivals, WindowScan, scan_window
from .sequential import SequentialCheck, SequentialState, update_sequential
from .store import PredictionStore
from .window import LabelledSource, WindowQuery, WindowSummary, summarise_window

__all__ = ["CheckOutcome", "CheckReference", "CheckState", "check_version"]

# Served-time lower bound of the sequential rule's increments after the first: any row of the
# version whose label arrived since the cursor counts, however long ago it was served.
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class CheckReference:
    """What a version's traffic is compared with, all at its registered T.

    ``drift`` is the drift decision's reference (its temperature sums are the sequential rule's
    too); ``priors`` the class priors the served rows are tested against (None: none registered);
    ``profile`` the confidences the early warning compares the served ones with (None: not
    tested); ``accuracy_floor`` the acceptance floor below which the labelled accuracy is a
    collapse (None: no shift diagnosis — the drift decision alone, as ``thermostat drift``).
    """

    drift: DriftReference
    priors: ReferencePriors | None = None
    profile: ConfidenceProfile | None = None
    accuracy_floor: float | None = None


@dataclass(frozen=True, slots=True)
class CheckState:
    """What a version carries from one check to the next.

    ``sequential`` is the sequential rule's state (None: its initial state at the version's T);
    ``last_drift_at`` when its last drift event was emitted (the cool-down); ``live`` True for a
    check of the current window (the schedule's), which folds in the labels that arrived since
    the rule's cursor — a backfill or a re-check (False) leaves the stream alone.
    """

    sequential: SequentialState | None = None
    last_drift_at: datetime | None = None
    live: bool = False

    def rule(self, temperature: float) -> SequentialState:
        """The sequential rule's state before this check (its initial state at ``temperature`` when none)."""
        return self.sequential or SequentialState.initial(temperature)


@dataclass(frozen=True, slots=True, eq=False)
class CheckOutcome:
    """What one check of ``query``'s window found.

    ``report`` is the decision with its stream checks and shift diagnosis (None: the window's
    store holds no row of the version — it never logged); ``scan`` what the pass over the served
    rows read (None: not read); ``arrivals`` the rows folded into the sequential rule (None:
    none this check); ``notes`` what the check says beside its report (what it read, why a step
    did not run), in order, for the log.
    """

    query: WindowQuery
    report: DriftReport | None
    scan: WindowScan | None = None
    arrivals: LabelArrivals | None = None
    notes: tuple[str, ...] = ()


def check_version(
    source: LabelledSource,
    query: WindowQuery,
    reference: CheckReference,
    state: CheckState,
    policy: DriftPolicy,
    now: datetime,
    *,
    stream: PredictionStore | None = None,
    summary: WindowSummary | None = None,
    chunk_size: int = 50_000,
) -> CheckOutcome:
    """Check one version's window against its reference (module docstring).

    Parameters
    ----------
    source : LabelledSource
        Where the window's labelled rows are read (and read again by the shift diagnosis).
    query : WindowQuery
        The version, the window [start, end), and the T, bins and gate threshold it is read at.
    reference : CheckReference
        What the traffic is compared with.
    state : CheckState
        What the version carries between checks, and whether this check advances it.
    policy : DriftPolicy
        Every parameter of the decisions.
    now : datetime
        When the check runs (aware): the sequential rule folds in the labels that arrived before
        ``now - policy.label_settle_time``.
    stream : PredictionStore, optional
        The store of every served row that the checks across the stream read; ``source`` itself
        reads the window in one pass. None: the summary alone (no early warning, no sequential rule).
    summary : WindowSummary, optional
        The window's summary computed elsewhere (on a cluster); default: read from ``source``.
    chunk_size : int, default=50_000
        Rows per read; peak memory is proportional to it.

    Returns
    -------
    CheckOutcome

    Raises
    ------
    TypeError, ValueError
        An argument of the wrong type or value (a naive ``now``, a ``stream`` that does not
        hold every served row or, on a live check, the label times), reference priors of another K.

    Examples
    --------
    >>> from monitoring import DEFAULT_POLICY, DriftReference, WindowInMemory
    >>> rng = np.random.default_rng(0)
    >>> logits = 2.0 * rng.normal(size=(1000, 3)); labels = logits.argmax(axis=1)
    >>> window = WindowInMemory(logits, labels, temperature=1.0)
    >>> reference = CheckReference(DriftReference.of(0.01), accuracy_floor=0.5)
    >>> outcome = check_version(window, window.query(), reference, CheckState(), DEFAULT_POLICY,
    ...                         window.query().end, stream=window)
    >>> outcome.report.verdict, outcome.report.diagnosis.kind, outcome.scan.served_rows
    ('drift', 'calibration_drift', 1000)
    """
    for value, kind in ((reference, CheckReference), (state, CheckState), (policy, DriftPolicy)):
        if not isinstance(value, kind):
            raise TypeError(f"{kind.__name__.lower()} must be a {kind.__name__}; got {type(value).__name__}")
    now = as_utc(now, name="now")
    chunk_size = check_chunk_size(chunk_size)
    notes: list[str] = []
    read = _read(source, query, reference, state, policy, now, stream=stream, summary=summary,
                 chunk_size=chunk_size, notes=notes)
    if read is None:
        return CheckOutcome(query, None, notes=tuple(notes))
    summary, scan, arrivals = read
    if reference.priors is not None and reference.priors.n_classes != summary.n_classes:
        raise ValueError(f"the window has {summary.n_classes} classes and the reference priors "
                         f"{reference.priors.n_classes}; both must score the same K classes")
    sequential = None if scan is None or arrivals is None else _sequential(scan, arrivals, query, reference, state,
                                                                            policy)
    warning = None if scan is None else warn_before_labels(scan.profile, reference.profile, policy=policy)
    report = with_stream_checks(
        decide_drift(summary, reference.drift, policy, last_drift_at=state.last_drift_at, now=summary.end),
        sequential=sequential, early_warning=warning)
    report = _dated(report, source, query, chunk_size)
    if reference.accuracy_floor is not None:
        report = _diagnose(report, scan, source, query, reference.priors, reference.accuracy_floor, chunk_size)
    return CheckOutcome(query, report, scan, arrivals, tuple(notes))


def _dated(report: DriftReport, source: LabelledSource, query: WindowQuery, chunk_size: int) -> DriftReport:
    """A drift without a sequential alarm with the window's own change point (a second read of its
    labelled rows, in serving order): a refit then reads from where the drift began."""
    if not report.drift_detected or (report.sequential is not None and report.sequential.alarm):
        return report
    found = window_change_point(source, query, report.summary.temperature_stats, chunk_size=chunk_size)
    return replace(report, window_change_point=found, reasons=(*report.reasons, found.sentence()))


def _read(
    source: LabelledSource, query: WindowQuery, reference: CheckReference, state: CheckState, policy: DriftPolicy,
    now: datetime, *, stream: PredictionStore | None, summary: WindowSummary | None, chunk_size: int,
    notes: list[str],
) -> tuple[WindowSummary, WindowScan | None, LabelArrivals | None] | None:
    """The window's summary and what the checks across the stream read (step 1); None when the
    window's store holds no row of the version."""
    one_pass = stream is source and summary is None
    if not one_pass and summary is None:
        try:
            summary = summarise_window(source, query, chunk_size=chunk_size)
        except LookupError:
            notes.append(_never_logged(source))
            return None
        notes.append(f"read {summary.n} labelled rows in {summary.n_chunks} chunk(s) of at most {chunk_size} "
                     f"from {source!r}")
    if stream is None:  # (the summary was read above)
        return None if summary is None else (summary, None, None)
    arrivals = _arrivals(query, state, policy, now, notes)
    # The served rows' priors only against registered ones: the sample is prior_sample_capacity × K floats.
    capacity = None if reference.priors is None else policy.prior_sample_capacity
    try:
        scan = scan_window(stream, query, chunk_size=chunk_size, arrivals=arrivals, summarise=one_pass,
                           prior_capacity=capacity, seed=policy.seed)
    except LookupError:
        if summary is None:
            notes.append(_never_logged(stream))
            return None
        notes.append(f"sequential rule and early warning skipped: {stream!r} holds no row of this version")
        return summary, None, None
    notes.append(f"read {scan.served_rows} served rows ({'?' if scan.summary is None else scan.summary.n} labelled) "
                 f"in one pass, chunks of at most {chunk_size}, from {stream!r}"
                 + ("" if arrivals is None else
                    f"; {scan.outside_rows} rows labelled since the last check served outside it"))
    window = scan.summary if summary is None else summary
    return None if window is None else (window, scan, arrivals)


def _never_logged(store: object) -> str:
    return f"no prediction of this version was ever logged in {store!r}"


def _arrivals(query: WindowQuery, state: CheckState, policy: DriftPolicy, now: datetime,
              notes: list[str]) -> LabelArrivals | None:
    """The rows this check folds into the sequential rule; None (and a note why) when it is not a
    check of the current window, or no time passed since the rule's cursor.

    Two clocks. The increments are cut by when labels arrived: the rows whose label arrived in
    [the state's cursor, now − ``label_settle_time``) — the settle time leaves a label batch
    still being committed (or stamped by a clock a little behind) to the next check — served
    at any time (the first increment: since the window's start), so each labelled row counts in
    exactly one increment whatever its label delay. The state's ``last_end`` is that cursor.
    The change point a refit needs is in serving time: the earliest serving time among the
    rows since the climb began (``served_from``).
    """
    if not state.live:
        notes.append("sequential rule not updated: not a check of the current window (a backfill, a re-check, a "
                     "window given whole); only checks of the current window advance the stream")
        return None
    until = now - policy.label_settle_time
    since = state.rule(query.temperature).last_end
    if since is not None and until <= since:
        notes.append(f"sequential rule not updated: its last increment ends at {since.isoformat()}, not before this "
                     f"check's cursor ({until.isoformat()})")
        return None
    return LabelArrivals(since=since, until=until, served_from=query.start if since is None else _EPOCH,
                         served_to=max(query.end, now))


def _sequential(scan: WindowScan, arrivals: LabelArrivals, query: WindowQuery, reference: CheckReference,
                state: CheckState, policy: DriftPolicy) -> SequentialCheck:
    """Fold the rows labelled since the previous check (``arrivals``, summed by ``scan``) into the rule."""
    temperature = query.temperature
    increment = scan.arrived if scan.arrived is not None else TemperatureStats.empty(temperature)
    start = min(arrivals.served_from, arrivals.until) if arrivals.since is None else arrivals.since
    check = update_sequential(state.rule(temperature), increment, start=start, end=arrivals.until,
                              served_from=scan.arrived_first_served,
                              reference=reference.drift.overall.temperature_stats, policy=policy)
    return replace(check, settling=scan.settling)


def _diagnose(report: DriftReport, scan: WindowScan | None, source: LabelledSource, query: WindowQuery,
              priors: ReferencePriors | None, accuracy_floor: float, chunk_size: int) -> DriftReport:
    """The report with its shift diagnosis (step 5); the labelled rows of ``source`` read again
    at the re-weighted posteriors when the priors moved."""

    def reweigh(estimate: PriorEstimate, tested: NDArray[np.float64]) -> ReweightedWindow:
        return reweight_window(source, query, priors=estimate.priors, reference_priors=estimate.reference_priors,
                               tested_priors=tested, chunk_size=chunk_size)

    # The per-class counts are the labelled rows' among the served ones: none when no served row's label is known.
    rows, correct = (None, None) if scan is None else (scan.class_rows, scan.class_correct)
    if rows is None or not rows.any():
        rows = correct = None
    return diagnose_check(report, served=None if scan is None else scan.served_priors, reference=priors,
                          class_rows=rows, class_correct=correct, reweigh=reweigh, accuracy_floor=accuracy_floor)
