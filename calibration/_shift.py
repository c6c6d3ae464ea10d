"""Which shift happened: the diagnosis rule, as a pure function of what a check already computed.

A drift check that finds "the temperature moved" answers one question; traffic can move in
several ways, and each has its own fix (:func:`diagnose_shift`):

===================== ============================================= ==============================
kind                  what is seen                                  fix
===================== ============================================= ==============================
``no_change``         priors, calibration and confidences unchanged none
``label_shift``       the class priors moved (served rows); the     ``prior_correction``: the same
                      per-class accuracies did not (labelled rows), T, the posteriors re-weighted
                      the re-weighting does not fit the labels      to the new priors
                      worse, and at the re-weighted posteriors the
                      temperature and ECE tests are quiet
``calibration_drift`` the temperature or ECE test fires: at the     ``temperature_refit``, after a
                      re-weighted posteriors when the priors moved  ``prior_correction`` when the
                      as a label shift, else at the deployed ones   re-weighting lowers the NLL
``accuracy_collapse`` labelled accuracy below the floor, or the     ``escalate``: retraining or a
                      outputs collapsed                             data fix
``covariate_shift``   the confidences or the class mix moved, not   none: "calibrated, but the
                      as a label shift would, and the deployed      traffic moved"
                      posteriors are calibrated (established)
``undetermined``      no test fired, but calibration is not         none yet: more labelled rows
                      established (``no_change`` or                 decide
                      ``covariate_shift`` would claim it)
===================== ============================================= ==============================

What a check must compute first (all mergeable, in this order)
--------------------------------------------------------------
1. Over the window's **served rows** (labelled or not), one pass at the deployed T:
   :class:`calibration.ServedPriorStats` (and the early warning's confidence profile). Then EM
   on its sample and the prior test against the version's registered
   :class:`calibration.ReferencePriors`: :func:`calibration.prior_shift_test` → ``priors``.
2. Over the window's **labelled rows**, one pass at the deployed T as today (the drift tests →
   ``tests_fired``) plus two bincounts per true class (rows, right ones:
   :func:`class_accuracy_test` → ``class_accuracy``); and — when the priors moved — the same
   drift tests at the re-weighted posteriors, i.e. on :func:`calibration.prior_corrected_logits`
   with the labelled rows' own class mix (``monitoring.labelled_mix``; → ``reweighted_tests_fired``),
   and :class:`ReweightingGain` (the per-row NLL change of re-weighting to EM's priors, → ``gain``).
3. ``accuracy`` of the labelled rows, ``confidence_shifted`` from the early warning.

Without labelled rows only step 1 runs: a moved prior is then reported as a label shift that
labels must still confirm (``confirmed`` False).

Why the per-class accuracies: under a covariate shift inside the support (only the easiest, or
the hardest, inputs arrive) the class mix moves too, so the prior test fires; but a label shift
leaves p(x | y) — hence each class's accuracy — unchanged, and a selection of easy or hard inputs
does not. The NLL gain of the re-weighting is the second witness: a label shift's re-weighting
lowers the NLL (by about the KL divergence it corrects; next to nothing for a model whose
posteriors are near 0 or 1, which label shift barely affects), a wrong one raises it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr

from ._priors import PriorShiftTest, ReferencePriors, prior_corrected_log_probabilities
from ._serialise import JsonResult
from ._softmax import label_log_probability
from ._validation import check_confidence_level, check_labels, check_logits, check_temperature

__all__ = ["ClassAccuracyTest", "ReweightingGain", "ShiftDiagnosis", "class_accuracy_test", "diagnose_shift",
           "holm_levels", "reweighting_gain"]

ShiftKind = Literal["no_change", "label_shift", "calibration_drift", "accuracy_collapse", "covariate_shift",
                    "undetermined"]
Fix = Literal["none", "prior_correction", "temperature_refit", "prior_correction_and_refit", "escalate"]


@dataclass(frozen=True, slots=True)
class ReweightingGain(JsonResult):
    """Mergeable sums of the per-row NLL gain of a prior re-weighting on labelled rows.

    ``n`` rows, ``gain_sum`` Σ (log q_w(y) − log p(y)) and ``gain_square_sum`` its squares, q_w
    the re-weighted posterior and p the deployed one: > 0 when the re-weighting fits the labels
    better. ``+`` adds two parts (at the same weights).

    >>> part = reweighting_gain([[0.0, 0.0]], [0], temperature=1.0, priors=[0.8, 0.2], reference_priors=[0.5, 0.5])
    >>> round(part.mean, 4)  # log 0.8 − log 0.5
    0.47
    """

    n: int
    gain_sum: float
    gain_square_sum: float

    def __add__(self, other: ReweightingGain) -> ReweightingGain:
        if not isinstance(other, ReweightingGain):
            return NotImplemented
        return ReweightingGain(self.n + other.n, self.gain_sum + other.gain_sum,
                               self.gain_square_sum + other.gain_square_sum)

    @property
    def mean(self) -> float:
        """The mean NLL gain per row (NaN without rows)."""
        return self.gain_sum / self.n if self.n else math.nan

    @property
    def z(self) -> float:
        """mean / SE: the gain's z statistic (NaN below two rows or without spread)."""
        if self.n < 2:
            return math.nan
        variance = max(self.gain_square_sum - self.gain_sum**2 / self.n, 0.0) / (self.n - 1)
        return self.mean / math.sqrt(variance / self.n) if variance > 0 else math.nan


def reweighting_gain(
    logits: ArrayLike, labels: ArrayLike, *, temperature: float, priors: ArrayLike, reference_priors: ArrayLike
) -> ReweightingGain:
    """The NLL gain of re-weighting softmax(z / T) from ``reference_priors`` to ``priors`` on labelled rows.

    Raises
    ------
    ValueError
        If the logits, labels, temperature or priors break their rules.
    """
    array = check_logits(logits)
    y = check_labels(labels, array.shape[0], array.shape[1])
    temperature = check_temperature(temperature)
    corrected = prior_corrected_log_probabilities(array, temperature=temperature, priors=priors,
                                                  reference_priors=reference_priors)
    gain = corrected[np.arange(y.shape[0]), y] - label_log_probability(array, y, temperature)
    return ReweightingGain(int(gain.shape[0]), float(gain.sum()), float(np.dot(gain, gain)))


def holm_levels(p_values: Sequence[float], level: float,
                weights: Sequence[float] | None = None) -> tuple[float, ...]:
    """The level each of a family of tests is read at, by Holm's step-down at family-wise ``level``.

    "No change" needs every test of the family quiet at once, so their false alarms add up; Holm
    (1979) holds the chance that any of them fires on unchanged traffic to ``level``. Each test
    has a weight w (equal unless ``weights`` says otherwise: the weighted step-down of Holm's
    paper). Sorted by p / w, a test is read at ``level · w / W``, W the weights of the tests not
    yet fired, while every one before it fired; from the first that does not, each is read at
    ``level · w / W`` with that step's W (so a test fires iff its p-value is below its level, and
    no test after the first quiet one fires). A NaN p-value is a test that did not run: it is left
    out, and its level is NaN (the others share the whole level).

    >>> holm_levels([0.004, 0.3], 0.01)  # the smaller at 0.01 / 2: it fires, the other is read at 0.01
    (0.005, 0.01)
    >>> holm_levels([0.008, 0.3], 0.01)  # 0.008 >= 0.005: neither fires (each read at 0.005)
    (0.005, 0.005)
    >>> [round(v, 6) for v in holm_levels([0.008, 0.3], 0.01, weights=[0.9, 0.1])]  # 0.008 < 0.009: it fires
    [0.009, 0.01]
    >>> holm_levels([0.008, math.nan], 0.01)  # one test ran: it has the whole level
    (0.01, nan)
    """
    level = check_confidence_level(level, name="level")
    values = [float(p) for p in p_values]
    shares = [1.0] * len(values) if weights is None else [float(w) for w in weights]
    if len(shares) != len(values) or not all(math.isfinite(w) and w > 0 for w in shares):
        raise ValueError(f"weights must be one finite number > 0 per p-value ({len(values)}); got {weights!r}")
    ran = [i for _, i in sorted((p / shares[i], i) for i, p in enumerate(values) if not math.isnan(p))]
    levels = [math.nan] * len(values)
    stopped: float | None = None  # W of the first quiet test's step
    for step, i in enumerate(ran):
        remaining = stopped if stopped is not None else math.fsum(shares[j] for j in ran[step:])
        levels[i] = level * shares[i] / remaining
        if stopped is None and not values[i] < levels[i]:
            stopped = remaining
    return tuple(levels)


@dataclass(frozen=True, slots=True)
class ClassAccuracyTest(JsonResult):
    """Are the window's per-class accuracies the reference's? The invariant of a label shift.

    A label shift leaves p(x | y) unchanged, hence P(ŷ = y | y), each class's accuracy: a window
    whose per-class accuracies moved saw more than a change of class mix (a selection of easy or
    hard inputs, a broken model). χ² = Σ_y (c_y − n_y a_y)² / (n_y a_y (1 − a_y) (1 + n_y / N_y))
    over the classes with labelled rows, c_y of n_y right in the window, a_y = the reference's
    accuracy on its N_y rows of class y (kept inside [½ / N_y, 1 − ½ / N_y]); ``df`` such classes.
    ``p_value`` is a parametric bootstrap of that statistic, not its χ²(df) tail (invalid with a
    handful of rows a class and accuracies near 1: it fired in a third of pure label shifts at
    level 0.01): under the null each class keeps one accuracy, estimated pooled from window and
    reference, (c_y + R_y) / (n_y + N_y); both counts are drawn from it, the statistic recomputed
    with the drawn reference's clipped accuracies, and p = (1 + #{T* ≥ T}) / (1 + ``resamples``).
    ``fired`` iff ``p_value < level``; ``accuracy`` and ``expected_accuracy`` Σ_y n_y a_y / n.
    """

    fired: bool
    p_value: float
    level: float
    statistic: float
    df: int
    n: int
    accuracy: float
    expected_accuracy: float


def _class_accuracy_statistic(window_right: NDArray[np.float64], window_n: NDArray[np.float64],
                              reference_right: NDArray[np.float64], reference_n: NDArray[np.float64]
                              ) -> NDArray[np.float64]:
    """Σ_y (c_y − n_y a_y)² / (n_y a_y (1 − a_y) (1 + n_y / N_y)) over the last axis (tested classes only),
    a_y = R_y / N_y kept inside [½ / N_y, 1 − ½ / N_y]: one value a row of draws (0-d for one window)."""
    a_y = np.clip(reference_right / reference_n, 0.5 / reference_n, 1.0 - 0.5 / reference_n)
    variance = window_n * a_y * (1.0 - a_y) * (1.0 + window_n / reference_n)
    return np.asarray(np.sum((window_right - window_n * a_y) ** 2 / variance, axis=-1), dtype=np.float64)


def class_accuracy_test(
    class_counts: ArrayLike, correct_counts: ArrayLike, reference: ReferencePriors, *, level: float = 0.01,
    resamples: int = 2000, seed: int = 0,
) -> ClassAccuracyTest:
    """Test the window's per-class accuracies against the reference's (see :class:`ClassAccuracyTest`).

    Parameters
    ----------
    class_counts, correct_counts : array of shape (n_classes,)
        Per true class, the window's labelled rows and how many of them the model got right
        (mergeable: bincounts summed over chunks).
    reference : ReferencePriors
        The version's registered sums (its confusion matrix gives the reference accuracies).
    level : float, default=0.01
    resamples : int, default=2000
        Parametric-bootstrap draws of the statistic under the null (at least 99).
    seed : int, default=0
        Seed of those draws (the same counts and seed give the same p-value).

    Examples
    --------
    >>> from calibration import ReferencePriors
    >>> logits = np.log([[0.9, 0.1]] * 800 + [[0.1, 0.9]] * 200 + [[0.1, 0.9]] * 800 + [[0.9, 0.1]] * 200)
    >>> reference = ReferencePriors.from_logits(logits, [0] * 1000 + [1] * 1000)  # 80 % right in each class
    >>> class_accuracy_test([100, 20], [80, 16], reference).fired  # same accuracies, other mix
    False
    >>> class_accuracy_test([100, 100], [100, 100], reference).fired  # only easy inputs
    True
    """
    level = check_confidence_level(level, name="level")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 99:
        raise ValueError(f"resamples must be an integer of at least 99 (bootstrap draws), got {resamples!r}")
    k = reference.n_classes
    n_y = np.asarray(class_counts, dtype=np.float64)
    c_y = np.asarray(correct_counts, dtype=np.float64)
    if n_y.shape != (k,) or c_y.shape != (k,) or np.any(n_y < 0) or np.any(c_y < 0) or np.any(c_y > n_y):
        raise ValueError(f"class_counts and correct_counts must hold {k} counts each, with correct <= rows per class")
    reference_n = np.maximum(reference.class_counts, 1).astype(np.float64)
    reference_right = np.diag(reference.confusion).astype(np.float64)
    tested = (n_y > 0) & (reference.class_counts > 0)
    df = int(tested.sum())
    statistic = float(_class_accuracy_statistic(c_y[tested], n_y[tested], reference_right[tested], reference_n[tested]))
    p_value = math.nan
    if df:
        n_t, m_t = n_y[tested], reference_n[tested]
        pooled = (c_y[tested] + reference_right[tested]) / (n_t + m_t)
        rng = np.random.default_rng(seed)
        drawn_window = rng.binomial(n_t.astype(np.int64), pooled, size=(resamples, df)).astype(np.float64)
        drawn_reference = rng.binomial(m_t.astype(np.int64), pooled, size=(resamples, df)).astype(np.float64)
        null = _class_accuracy_statistic(drawn_window, n_t, drawn_reference, m_t)
        # A relative tolerance: a draw equal to the observed statistic up to rounding counts as ≥.
        p_value = float((1 + np.count_nonzero(null >= statistic * (1 - 1e-9))) / (1 + resamples))
    a_y = np.clip(reference_right / reference_n, 0.5 / reference_n, 1.0 - 0.5 / reference_n)
    n = int(n_y.sum())
    return ClassAccuracyTest(fired=bool(df and p_value < level), p_value=p_value, level=level, statistic=statistic,
                             df=df, n=n, accuracy=float(c_y.sum() / n) if n else math.nan,
                             expected_accuracy=float(np.dot(n_y, a_y) / n) if n else math.nan)


@dataclass(frozen=True, slots=True)
class ShiftDiagnosis(JsonResult):
    """What kind of shift a check found, the fix that fits it, and the numbers (module docstring).

    ``kind`` and ``fix``; ``confirmed`` False when the verdict rests on unlabelled rows alone
    (a label shift that labels must confirm); ``priors_moved`` with the prior test's
    ``prior_p_value`` and its effect ``prior_shift`` (total variation, with ``prior_shift_low``
    and ``_high``), ``priors`` (EM's estimate) and ``reference_priors``; ``tests_fired`` at the
    deployed posteriors and ``reweighted_tests_fired`` at the re-weighted ones (None: not run);
    ``gain`` the mean NLL gain of the re-weighting on the labelled rows with its ``gain_z``;
    ``accuracy`` and ``accuracy_floor``; ``confidence_shifted``; ``reasons`` one sentence each.
    """

    kind: ShiftKind
    fix: Fix
    confirmed: bool
    priors_moved: bool
    prior_p_value: float
    prior_shift: float
    prior_shift_low: float
    prior_shift_high: float
    priors: tuple[float, ...]
    reference_priors: tuple[float, ...]
    tests_fired: tuple[str, ...]
    reweighted_tests_fired: tuple[str, ...] | None
    gain: float
    gain_z: float
    accuracy: float
    accuracy_floor: float
    confidence_shifted: bool
    reasons: tuple[str, ...]

    def sentence(self) -> str:
        """The verdict in one line: the kind, the fix and the reasons."""
        verdict = self.kind.replace("_", " ") + ("" if self.confirmed else " (from unlabelled rows: to be confirmed)")
        return f"{verdict}; fix: {self.fix.replace('_', ' ')}. " + " ".join(self.reasons)


def _calibration_tests(names: Sequence[str]) -> tuple[str, ...]:
    """The statistical tests among ``names`` (the collapse guard is read apart)."""
    return tuple(name for name in names if not name.endswith("collapsed"))


def _claimed(kind: ShiftKind, fix: Fix, established: bool, reasons: list[str]) -> tuple[ShiftKind, Fix]:
    """``undetermined`` in place of a kind that claims calibration the labelled rows do not establish."""
    if kind not in ("no_change", "covariate_shift") or established:
        return kind, fix
    reasons.append("no test fired, but the labelled rows do not establish calibration within the margin: "
                   "undetermined until more labelled rows decide")
    return "undetermined", "none"


def diagnose_shift(
    *,
    priors: PriorShiftTest | None,
    tests_fired: Sequence[str],
    reweighted_tests_fired: Sequence[str] | None,
    gain: ReweightingGain | None,
    class_accuracy: ClassAccuracyTest | None,
    accuracy: float,
    accuracy_floor: float,
    confidence_shifted: bool,
    level: float = 0.01,
    calibration_established: bool = True,
) -> ShiftDiagnosis:
    """Decide which shift a check saw (module docstring's table), from what the check computed.

    Parameters
    ----------
    priors : PriorShiftTest or None
        The prior test on the window's served rows (None: no served rows or no registered
        reference priors; then no label shift can be told).
    tests_fired : sequence of str
        The drift tests that fired on the labelled rows at the deployed posteriors (a drift
        report's ``tests_fired``: ``temperature``, ``ece``, ``collapsed``, ``group 'eu' ece``…).
    reweighted_tests_fired : sequence of str or None
        The same tests at the re-weighted posteriors (:func:`calibration.prior_corrected_logits`
        with ``priors.estimate``); None when not run (no labelled rows, or priors unmoved).
    gain : ReweightingGain or None
        The re-weighting's NLL gain on the labelled rows (None: no labelled rows).
    class_accuracy : ClassAccuracyTest or None
        The labelled rows' per-class accuracies against the reference's (None: not run).
    accuracy : float
        Accuracy of the labelled rows (NaN: none).
    accuracy_floor : float
        Below it the model needs retraining (the acceptance floor).
    confidence_shifted : bool
        The early warning's test of the served confidences fired.
    level : float, default=0.01
        One-sided level of the gain's tests (does the re-weighting lower, or raise, the NLL).
    calibration_established : bool, default=True
        The labelled rows establish calibration within the margin (a drift report's verdict
        ``calibrated``). False: a window where nothing fired is ``undetermined``, never
        ``no_change`` or ``covariate_shift`` (both claim calibration).

    Returns
    -------
    ShiftDiagnosis

    Examples
    --------
    >>> calm = dict(priors=None, tests_fired=(), reweighted_tests_fired=None, gain=None, class_accuracy=None,
    ...             accuracy=0.9, accuracy_floor=0.5, confidence_shifted=False)
    >>> diagnose_shift(**calm).kind
    'no_change'
    >>> diagnose_shift(**calm | {"tests_fired": ("temperature",)}).fix
    'temperature_refit'
    >>> diagnose_shift(**calm | {"accuracy": 0.3}).kind
    'accuracy_collapse'
    >>> diagnose_shift(**calm | {"confidence_shifted": True}).kind
    'covariate_shift'
    >>> diagnose_shift(**calm | {"confidence_shifted": True, "calibration_established": False}).kind
    'undetermined'
    """
    level = check_confidence_level(level, name="level")
    fired = tuple(tests_fired)
    reweighted = None if reweighted_tests_fired is None else tuple(reweighted_tests_fired)
    moved = priors is not None and priors.fired
    has_labels = gain is not None and gain.n > 0 and math.isfinite(accuracy)
    gain_mean = gain.mean if gain is not None else math.nan
    gain_z = gain.z if gain is not None else math.nan
    gain_significant = math.isfinite(gain_z) and float(ndtr(-gain_z)) < level
    reasons: list[str] = []
    if priors is not None:
        reasons.append(priors.sentence())

    kind: ShiftKind
    fix: Fix
    if any(name.endswith("collapsed") for name in fired) or (math.isfinite(accuracy) and accuracy < accuracy_floor):
        kind, fix = "accuracy_collapse", "escalate"
        reasons.append(f"labelled accuracy {accuracy:.3f} (floor {accuracy_floor:.3f})"
                       + (", outputs collapsed" if any(n.endswith("collapsed") for n in fired) else "")
                       + ": the model needs retraining or a data fix")
    elif moved and not has_labels:
        kind, fix = "label_shift", "prior_correction"
        reasons.append("no labelled rows yet: the correction rests on the served rows alone")
    elif moved:
        deployed = _calibration_tests(fired)
        still = _calibration_tests(reweighted) if reweighted is not None else deployed
        gain_worse = math.isfinite(gain_z) and float(ndtr(gain_z)) < level
        invariant = class_accuracy is None or not class_accuracy.fired
        reasons.append(f"re-weighting to the new priors changes the labelled NLL by {-gain_mean:+.4f} per row "
                       f"(gain z = {gain_z:+.2f})")
        if class_accuracy is not None:
            reasons.append(f"per-class accuracies {'MOVED' if class_accuracy.fired else 'unchanged'} (accuracy "
                           f"{class_accuracy.accuracy:.3f} where the reference's per-class accuracies at this mix give "
                           f"{class_accuracy.expected_accuracy:.3f}; p = {class_accuracy.p_value:.2g})")
        if invariant and not gain_worse and still:
            kind = "calibration_drift"
            fix = "prior_correction_and_refit" if gain_significant else "temperature_refit"
            reasons.append(f"at the re-weighted posteriors the tests still fire ({', '.join(still)}): the calibration "
                           "changed" + (", and the class mix too" if gain_significant else ""))
        elif invariant and not gain_worse:
            kind, fix = "label_shift", "prior_correction"
            reasons.append("at the re-weighted posteriors the temperature and ECE tests are quiet"
                           + (f" (at the deployed ones: {', '.join(deployed)})" if deployed else ""))
        elif deployed:
            kind, fix = "calibration_drift", "temperature_refit"
            reasons.append(f"not a change of class mix alone, and the tests fire at the deployed posteriors "
                           f"({', '.join(deployed)})")
        else:
            kind, fix = "covariate_shift", "none"
            reasons.append("the class mix moved, but not as a label shift would (the per-class accuracies moved or the "
                           "re-weighting fits the labels worse) while no calibration test fires at the deployed "
                           "posteriors: the inputs moved, not p(y | x)")
    elif _calibration_tests(fired):
        kind, fix = "calibration_drift", "temperature_refit"
        reasons.append(f"the class priors did not move and the tests fire ({', '.join(_calibration_tests(fired))})")
    elif confidence_shifted:
        kind, fix = "covariate_shift", "none"
        reasons.append("the confidence distribution moved while the calibration tests are quiet"
                       + (": calibrated, but the traffic moved" if calibration_established else ""))
    else:
        kind, fix = "no_change", "none"
    kind, fix = _claimed(kind, fix, calibration_established, reasons)
    estimate = priors.estimate if priors is not None else None
    return ShiftDiagnosis(
        # Only a label shift can rest on the served rows alone; every other verdict read labels (or none).
        kind=kind, fix=fix, confirmed=has_labels or kind != "label_shift", priors_moved=moved,
        prior_p_value=priors.p_value if priors is not None else math.nan,
        prior_shift=priors.effect if priors is not None else math.nan,
        prior_shift_low=priors.effect_low if priors is not None else math.nan,
        prior_shift_high=priors.effect_high if priors is not None else math.nan,
        priors=tuple(float(v) for v in estimate.priors) if estimate is not None else (),
        reference_priors=tuple(float(v) for v in estimate.reference_priors) if estimate is not None else (),
        tests_fired=fired, reweighted_tests_fired=reweighted, gain=gain_mean, gain_z=gain_z,
        accuracy=float(accuracy), accuracy_floor=float(accuracy_floor), confidence_shifted=bool(confidence_shifted),
        reasons=tuple(reasons),
    )
