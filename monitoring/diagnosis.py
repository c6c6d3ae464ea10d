"""Which shift a check saw: the diagnosis on every check, from what its pass over the window read.

A drift check answers "did the temperature move?"; traffic moves in other ways too, each with its
own fix (:func:`calibration.diagnose_shift`: no change, label shift, calibration drift, accuracy
collapse, covariate shift). :func:`diagnose_check` runs the diagnosis on a check's
:class:`~monitoring.DriftReport`, in the order the core asks for:

1. the **class priors of the served rows** (labelled or not), summed in the check's one pass over
   the window (:func:`monitoring.scan_window`: :class:`calibration.ServedPriorStats`, a sample of
   at most ``prior_sample_capacity`` posteriors), tested against the priors the version
   registered (:class:`calibration.ReferencePriors`) (:func:`calibration.prior_shift_test`, EM's
   estimate with it), read with the early warning's test of the served confidences as one family
   at ``diagnosis_level`` (:func:`read_as_family`: "no change" needs both quiet);
2. when the priors moved and the window has enough labelled rows (``min_window``): the
   labelled rows **read again at the re-weighted posteriors** (:func:`reweight_window`, a second
   read of the labelled rows only, in chunks): the drift tests on them (the same policy and
   reference) and the re-weighting's NLL gain; and the per-class accuracies against the
   reference's (:func:`calibration.class_accuracy_test`, from the first pass's counts);
3. the labelled accuracy against the acceptance floor, and the early warning's test of the
   served confidences (at its level in the family of step 1).

What cannot be told is said in the reasons, never an error: a version registered before its
reference priors were stored (or with too many classes for a tag) gets no diagnosis of the
priors, nor does a check whose served rows were not read (the window from the export without
the SQL log) or too few (``prior_shift_min_rows``). The rest of the diagnosis (calibration drift,
collapse, covariate shift) still runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calibration import (
    PriorEstimate,
    PriorShiftTest,
    ReferencePriors,
    ReweightingGain,
    ServedPriorStats,
    ShiftDiagnosis,
    class_accuracy_test,
    diagnose_shift,
    holm_levels,
    prior_corrected_logits,
    prior_shift_test,
    reweighting_gain,
)

from .drift import DriftReport, decide_drift
from .early_warning import EarlyWarning
from .window import LabelledSource, WindowQuery, WindowSummary, _labelled_read

__all__ = ["ReweightedWindow", "diagnose_check", "labelled_mix", "read_as_family", "reweight_window"]

#: The shares of ``diagnosis_level`` the prior test and the confidence test are first read at
#: (weighted Holm): the prior test names the verdict that acts (a label shift, corrected), the
#: confidence test only says "the traffic moved" when the priors did not. On the covariate shifts
#: of the study (the easiest or hardest half of the inputs) the confidence test's p-value was
#: below 0.001 in every window; an equal split cost the prior test a third of its power on the
#: weakest label shift (docs/statistics.md).
_FAMILY_WEIGHTS: tuple[float, float] = (0.9, 0.1)


@overload
def read_as_family(test: PriorShiftTest, warning: EarlyWarning | None, level: float) -> tuple[PriorShiftTest, bool]: ...
@overload
def read_as_family(test: PriorShiftTest | None, warning: EarlyWarning | None,
                   level: float) -> tuple[PriorShiftTest | None, bool]: ...
def read_as_family(test: PriorShiftTest | None, warning: EarlyWarning | None,
                   level: float) -> tuple[PriorShiftTest | None, bool]:
    """The prior test and the early warning's confidence test read as one family at ``level``.

    A window is "no change" only when both are quiet, so each one's false alarms add to the
    other's: read alone at 0.01 each they called 2–4 % of unchanged CIFAR windows a shift. Holm's
    weighted step-down (:func:`calibration.holm_levels`) holds the pair to
    ``level``: the prior test is first read at 0.9 ``level``, the confidence test at 0.1 ``level``;
    once one fired, the other is read at ``level``; a test that did not run leaves the whole level
    to the other.

    Returns
    -------
    (PriorShiftTest or None, bool)
        The prior test with its ``level`` and ``fired`` at its Holm level, and whether the
        confidences moved at theirs (the early warning's own ``shifted``, an alert of its own at
        ``confidence_shift_level``, is left as it is).

    Examples
    --------
    >>> read_as_family(None, None, 0.01)
    (None, False)
    """
    prior_p = test.p_value if test is not None else math.nan
    confidence_p = warning.p_value if warning is not None and warning.tested else math.nan
    prior_level, confidence_level = holm_levels([prior_p, confidence_p], level, weights=_FAMILY_WEIGHTS)
    if test is not None and not math.isnan(prior_level):
        test = replace(test, level=prior_level, fired=bool(test.df and test.p_value < prior_level))
    return test, bool(confidence_p < confidence_level)


@dataclass(frozen=True, slots=True, eq=False)
class ReweightedWindow:
    """A window's labelled rows read at the re-weighted posteriors: their ``summary`` (what the
    drift tests read) and the re-weighting's NLL ``gain`` against the deployed posteriors."""

    summary: WindowSummary
    gain: ReweightingGain


def reweight_window(
    source: LabelledSource, query: WindowQuery, *, priors: ArrayLike, reference_priors: ArrayLike,
    tested_priors: ArrayLike | None = None, chunk_size: int = 50_000,
) -> ReweightedWindow:
    """Read a version's labelled rows of the query's window again, re-weighted from
    ``reference_priors`` to ``priors``.

    Each chunk's logits become :func:`calibration.prior_corrected_logits` (z + T log w) and are
    summarised at the query's T as :func:`monitoring.summarise_window` does; the NLL gain of the
    re-weighting is summed in the same read. ``tested_priors`` (default ``priors``) are the priors
    the summary is read at, when the drift tests should read other priors than the gain
    (:func:`diagnose_check`: the labelled rows' own class mix). Memory is bounded by ``chunk_size``.

    Raises
    ------
    LookupError
        If no prediction of this version was ever logged.
    ValueError
        If a prior is not > 0 or ``chunk_size`` is not >= 1.

    Examples
    --------
    >>> from monitoring import PredictionLog, WindowQuery, log_predictions
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> _ = log_predictions(log, "m", "1", 1.0, np.zeros((4, 2)), ["a", "b", "c", "d"], time=t, labels=[0, 0, 0, 1])
    >>> query = WindowQuery("m", "1", temperature=1.0, start=t, end=t + timedelta(hours=1))
    >>> again = reweight_window(log, query, priors=[0.75, 0.25], reference_priors=[0.5, 0.5])
    >>> again.summary.n, round(again.summary.overall.nll, 4), round(again.gain.mean, 4)  # NLL from log 2 to 0.5623
    (4, 0.5623, 0.1308)
    """
    accumulator, chunks = _labelled_read(source, query, chunk_size)
    temperature = query.temperature
    gain = ReweightingGain(0, 0.0, 0.0)
    tested = priors if tested_priors is None else tested_priors
    for chunk in chunks:
        corrected = prior_corrected_logits(chunk.logits, temperature=temperature, priors=tested,
                                           reference_priors=reference_priors)
        accumulator.add(corrected, chunk.labels, chunk.groups, chunk.temperature)
        gain = gain + reweighting_gain(chunk.logits, chunk.labels, temperature=temperature, priors=priors,
                                       reference_priors=reference_priors)
    return ReweightedWindow(accumulator.summary(), gain)


#: Reads a check's labelled rows again (the flow's closure over its source): the NLL gain at EM's
#: priors (the estimate's), the drift tests' summary at the given priors (:func:`reweight_window`).
Reweigh = Callable[[PriorEstimate, NDArray[np.float64]], ReweightedWindow]


def labelled_mix(class_rows: ArrayLike, reference: ReferencePriors,
                 estimate: PriorEstimate) -> NDArray[np.float64]:
    """The priors the drift tests read a label-shifted window's labelled rows at: the labelled
    rows' own class mix, as weights w_y = f_y / f_ref,y on the estimate's reference priors.

    The question is whether these rows are still calibrated once their class mix is accounted
    for, and their mix is known from their labels: no estimate is needed. EM's priors, estimated
    from the served rows, carry the estimate's noise into the re-weighted posteriors, and with many
    classes and few rows a class that noise makes them look over-confident (on 2,000 rows of a
    100-class model: T 5 % above the reference's on average, 0.6 % at the labelled mix; docs/
    statistics.md). Half a row is added to every class count of both (no weight is 0).

    Examples
    --------
    >>> from calibration import ReferencePriors, estimate_priors_em, ServedPriorStats
    >>> logits = np.log([[0.9, 0.1]] * 50 + [[0.1, 0.9]] * 50)
    >>> reference = ReferencePriors.from_logits(logits, [0] * 50 + [1] * 50)
    >>> estimate = estimate_priors_em(ServedPriorStats.from_logits(logits), reference)
    >>> labelled_mix([75, 25], reference, estimate).round(2).tolist()  # a 3:1 mix against 1:1
    [0.75, 0.25]
    """
    rows = np.asarray(class_rows, dtype=np.float64) + 0.5
    counts = np.asarray(reference.class_counts, dtype=np.float64) + 0.5
    mix = estimate.reference_priors * (rows / rows.sum()) / (counts / counts.sum())
    result: NDArray[np.float64] = mix / mix.sum()
    return result


def diagnose_check(
    report: DriftReport, *, served: ServedPriorStats | None, reference: ReferencePriors | None,
    class_rows: ArrayLike | None, class_correct: ArrayLike | None, reweigh: Reweigh, accuracy_floor: float,
) -> DriftReport:
    """The report with the shift diagnosis of its check (module docstring): ``diagnosis``,
    ``prior_test`` and the reasons that say which shift it was and why.

    Parameters
    ----------
    report : DriftReport
        The check's decision, with its stream checks (the early warning's test is read).
    served : ServedPriorStats or None
        Every served row of the window at the deployed T (None: not read).
    reference : ReferencePriors or None
        The version's registered sums (None: registered before they were stored).
    class_rows, class_correct : array of shape (n_classes,) or None
        The window's labelled rows per true class, and the right ones among them.
    reweigh : callable
        Reads the labelled rows again (:func:`reweight_window`): the gain at the estimate's
        priors, the drift tests' summary at the priors given (the labelled rows' class mix,
        :func:`labelled_mix`; the estimate's when ``class_rows`` is None); called only when the
        priors moved and the window has ``min_window`` labelled rows.
    accuracy_floor : float
        Below it the model needs retraining (the acceptance floor).

    Returns
    -------
    DriftReport

    Examples
    --------
    >>> from monitoring import DriftReference, summarise_arrays
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> report = decide_drift(summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t),
    ...                       DriftReference.of(0.0))
    >>> diagnosed = diagnose_check(report, served=None, reference=None, class_rows=None, class_correct=None,
    ...                            reweigh=lambda estimate, priors: None, accuracy_floor=0.5)
    >>> diagnosed.diagnosis.kind, diagnosed.reasons[-1][:40]
    ('undetermined', 'no diagnosis of the class priors: this v')
    """
    policy = report.policy
    warning = report.early_warning
    test, why_not = _prior_test(report, served, reference)
    test, confidence_shifted = read_as_family(test, warning, policy.diagnosis_level)
    labelled = report.verdict != "insufficient_data"
    reweighted_fired: tuple[str, ...] | None = None
    gain = class_accuracy = None
    if test is not None and test.fired and labelled and reference is not None:
        tested = (test.estimate.priors if class_rows is None
                  else labelled_mix(class_rows, reference, test.estimate))
        again = reweigh(test.estimate, tested)
        reweighted_fired = decide_drift(again.summary, report.reference, policy).tests_fired
        gain = again.gain
        if class_rows is not None and class_correct is not None:
            class_accuracy = class_accuracy_test(class_rows, class_correct, reference, level=policy.prior_shift_level,
                                                 seed=policy.seed)
    diagnosis = diagnose_shift(
        priors=test, tests_fired=report.tests_fired, reweighted_tests_fired=reweighted_fired, gain=gain,
        class_accuracy=class_accuracy, accuracy=report.window.accuracy if labelled else math.nan,
        accuracy_floor=accuracy_floor, confidence_shifted=confidence_shifted, level=policy.prior_shift_level,
        calibration_established=report.verdict == "calibrated",
    )
    return replace(report, diagnosis=diagnosis, prior_test=test,
                   reasons=_with_diagnosis(report, diagnosis, why_not))


def _prior_test(report: DriftReport, served: ServedPriorStats | None,
                reference: ReferencePriors | None) -> tuple[PriorShiftTest | None, str | None]:
    """The prior test of the window, or None and the sentence saying why it could not run."""
    policy = report.policy
    if reference is None:
        return None, ("no diagnosis of the class priors: this version was registered without reference priors "
                      "(before they were stored, or with too many classes for a tag)")
    if served is None or served.n == 0:
        return None, ("no diagnosis of the class priors: the window's served rows were not read (they come from "
                      "the SQL prediction log)" if served is None else
                      "no diagnosis of the class priors: no row was served in the window")
    if served.n < policy.prior_min_rows:
        return None, (f"the class priors are not tested: {served.n} served rows < {policy.prior_min_rows} "
                      "(prior_shift_min_rows)")
    if not math.isclose(served.temperature, reference.temperature, rel_tol=1e-9):
        return None, (f"no diagnosis of the class priors: the reference priors were summed at T = "
                      f"{reference.temperature:.6g}, not at the deployed T = {served.temperature:.6g}")
    return prior_shift_test(served, reference, level=policy.diagnosis_level,
                            confidence_level=policy.confidence_level, seed=policy.seed), None


def _with_diagnosis(report: DriftReport, diagnosis: ShiftDiagnosis, why_not: str | None) -> tuple[str, ...]:
    """The reasons with the diagnosis: first when it changes what happens (no refit, a moved
    traffic), else after the decided ones (an accuracy collapse's own reason, e.g. the collapsed
    outputs', stays first)."""
    headline = f"shift diagnosis: {diagnosis.sentence()}"
    if diagnosis.kind == "label_shift" and report.drift_detected:
        headline += " No temperature refit: the tests fire because the class mix moved, which a prior correction fits."
    warning = report.early_warning
    if diagnosis.kind == "covariate_shift":
        predicted = math.nan if warning is None else warning.predicted_accuracy
        headline = (f"calibrated, but the traffic moved: predicted accuracy "
                    f"{'n/a' if not math.isfinite(predicted) else f'{predicted:.3f}'}. " + headline)
    reasons = list(report.reasons)
    if diagnosis.kind in ("label_shift", "covariate_shift"):
        reasons.insert(0, headline)
    else:
        decided = len(report.tests_fired) if report.drift_detected else 0
        reasons.insert(decided, headline)
    return tuple(reasons + ([why_not] if why_not is not None else []))

