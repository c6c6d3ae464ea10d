"""Which shift a window in memory shows: a check's steps for :func:`calibration.diagnose_shift`, on arrays.

:func:`diagnose_arrays` computes, in the order :mod:`calibration`'s shift diagnosis states
them, what :func:`calibration.diagnose_shift` decides from, on a window held in memory
(labelled rows, and the served rows: labelled or not) against what a version registers (its
:class:`~monitoring.DriftReference`, :class:`calibration.ReferencePriors` and
:class:`~monitoring.ConfidenceProfile`, all at its T):

1. the served rows' :class:`calibration.ServedPriorStats` at T, EM's priors
   (:func:`calibration.estimate_priors_em`) and the prior test
   (:func:`calibration.prior_shift_test`);
2. the drift decision on the labelled rows at the deployed posteriors
   (:func:`~monitoring.decide_drift`); when the priors moved, the same decision at the
   re-weighted posteriors (:func:`calibration.prior_corrected_logits` with EM's priors); in
   any case the re-weighting's NLL gain (:func:`calibration.reweighting_gain`) and the
   per-class accuracies (:func:`calibration.class_accuracy_test`), which the diagnosis reads
   when the priors moved (it reads a gain of None as "no labelled rows": its verdict would
   then be ``confirmed`` False on a labelled window);
3. the labelled rows' accuracy, and the early warning's test of the served confidences
   (:func:`~monitoring.warn_before_labels`).

The command line's ``thermostat diagnose`` and the study (``benchmarks/shift_study.py``) both
call it, so the two cannot diverge. As on every check (:func:`monitoring.diagnose_check`), the
prior test and the confidence test are read as one family at the policy's ``diagnosis_level``
(:func:`monitoring.read_as_family`, Holm), the per-class accuracy test and the re-weighting
gain's tests at its ``prior_shift_level``; ``p_threshold`` is the drift decision's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
from numpy.typing import ArrayLike

from calibration import (
    ClassAccuracyTest,
    PriorShiftTest,
    ReferencePriors,
    ReweightingGain,
    ServedPriorStats,
    ShiftDiagnosis,
    check_temperature,
    class_accuracy_test,
    diagnose_shift,
    prior_corrected_logits,
    prior_shift_test,
    reweighting_gain,
    top_label_and_probabilities,
)

from .diagnosis import read_as_family
from .drift import DriftReference, DriftReport, decide_drift
from .early_warning import ConfidenceProfile, EarlyWarning, warn_before_labels
from .policy import DEFAULT_POLICY, DriftPolicy
from .window import summarise_arrays

__all__ = ["ShiftCheck", "diagnose_arrays"]

# A window in memory has no time of its own; the decision needs one (no cool-down applies).
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class ShiftCheck:
    """What :func:`diagnose_arrays` computed: the ``diagnosis`` and the evidence it rests on.

    ``served`` the served rows' sums and sample; ``prior_test`` the prior test (its
    ``estimate`` EM's priors, with their intervals and convergence); ``drift`` the decision at
    the deployed posteriors and ``reweighted_drift`` at the re-weighted ones (None: the priors
    did not move); ``gain`` the re-weighting's NLL gain on the labelled rows (to EM's priors)
    and ``class_accuracy`` their per-class accuracies against the reference's, both also when
    the priors did not move (the diagnosis reads them only when they did); ``warning`` the
    early warning on the served confidences.
    """

    diagnosis: ShiftDiagnosis
    served: ServedPriorStats
    prior_test: PriorShiftTest
    drift: DriftReport
    reweighted_drift: DriftReport | None
    gain: ReweightingGain
    class_accuracy: ClassAccuracyTest
    warning: EarlyWarning


def diagnose_arrays(
    logits: ArrayLike,
    labels: ArrayLike,
    *,
    temperature: float,
    reference: DriftReference,
    reference_priors: ReferencePriors,
    reference_profile: ConfidenceProfile | None,
    accuracy_floor: float,
    served_logits: ArrayLike | None = None,
    policy: DriftPolicy = DEFAULT_POLICY,
    n_bins: int = 15,
    seed: int = 0,
) -> ShiftCheck:
    """Diagnose which shift a window shows, against a version's registered reference (module docstring).

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes)
        The window's labelled rows.
    labels : array of int of shape (n_samples,)
    temperature : float
        The deployed T; every reference below was summed at it.
    reference : DriftReference
        The drift decision's reference.
    reference_priors : ReferencePriors
        The version's registered prior sums (the prior test's and EM's reference).
    reference_profile : ConfidenceProfile or None
        The version's registered confidence profile (None: the early warning does not test).
    accuracy_floor : float
        Labelled accuracy below it is an accuracy collapse.
    served_logits : array of shape (n_served, n_classes), optional
        The window's served rows, labelled or not (default: the labelled rows' ``logits``).
    policy : DriftPolicy, default=DEFAULT_POLICY
        The decisions' parameters: ``p_threshold`` the drift decision's level, ``diagnosis_level`` the
        prior and confidence tests' (one family), ``prior_shift_level`` the per-class accuracy and gain tests'.
    n_bins : int, default=15
        Bins of the window's calibration statistics (the reference's ECE's binning).
    seed : int, default=0
        Seeds the served rows' sample (EM's rows) and the prior test's interval draws.

    Returns
    -------
    ShiftCheck

    Raises
    ------
    TypeError, ValueError
        An argument of the wrong type or value, references at another T or K.

    Examples
    --------
    A calibrated model (x | y ~ N(2 e_y, I), logits 2x give exact posteriors), its reference,
    and a window where class 0 makes 60 % of the traffic:

    >>> from calibration import ReferencePriors
    >>> from monitoring import DriftReference
    >>> rng = np.random.default_rng(0)
    >>> def rows(priors, n):
    ...     y = rng.choice(3, size=n, p=priors); x = rng.normal(size=(n, 3)); x[np.arange(n), y] += 2.0
    ...     return 2.0 * x, y
    >>> logits, labels = rows([1 / 3] * 3, 5000)
    >>> references = dict(reference=DriftReference.of(0.01, ece_interval=(0.0, 0.02)),
    ...                   reference_priors=ReferencePriors.from_logits(logits, labels),
    ...                   reference_profile=ConfidenceProfile.from_logits(logits, labels))
    >>> check = diagnose_arrays(*rows([0.6, 0.2, 0.2], 2000), temperature=1.0, accuracy_floor=0.5, **references)
    >>> check.diagnosis.kind, check.diagnosis.fix, np.round(check.diagnosis.priors, 1).tolist()
    ('label_shift', 'prior_correction', [0.6, 0.2, 0.2])
    """
    if not isinstance(policy, DriftPolicy):
        raise TypeError(f"policy must be a DriftPolicy; got {type(policy).__name__}")
    if not isinstance(reference_priors, ReferencePriors):
        raise TypeError(f"reference_priors must be ReferencePriors; got {type(reference_priors).__name__}")
    temperature = check_temperature(temperature)
    # Checked once here: the steps below read the same arrays.
    summary = summarise_arrays(logits, labels, temperature=temperature, start=_EPOCH, end=_EPOCH, n_bins=n_bins)
    window, y = np.asarray(logits), np.asarray(labels)
    if window.shape[1] != reference_priors.n_classes:
        raise ValueError(f"the window has {window.shape[1]} classes and the reference priors "
                         f"{reference_priors.n_classes}; both must score the same K classes")
    served_rows = window if served_logits is None else served_logits
    level = policy.prior_shift_level
    # 1. The served rows, labelled or not: their priors and the prior test, read with the served
    # confidences' test as one family (step 3's early warning).
    # One softmax of the served rows for their priors and their confidences; the window's rows
    # were checked by summarise_arrays, other served rows are checked here.
    predictions, confidence, posteriors = top_label_and_probabilities(
        served_rows, temperature=temperature, check_finite=served_logits is not None)
    served = ServedPriorStats.from_probabilities(posteriors, predictions, temperature=temperature, seed=seed)
    unlabelled = np.zeros(confidence.shape[0], dtype=bool)
    warning = warn_before_labels(ConfidenceProfile.from_confidence(confidence, unlabelled, unlabelled,
                                                                   temperature=temperature),
                                 reference_profile, policy=policy)
    prior_test, confidence_shifted = read_as_family(
        prior_shift_test(served, reference_priors, level=policy.diagnosis_level,
                         confidence_level=policy.confidence_level, seed=seed), warning,
        policy.diagnosis_level)
    estimate = prior_test.estimate
    # 2. The labelled rows at the deployed posteriors and, if the priors moved, at the re-weighted ones.
    drift = decide_drift(summary, reference, policy)
    correct = window.argmax(axis=1) == y
    # The gain and the per-class accuracies whether or not the priors moved: diagnose_shift reads
    # a missing gain as "no labelled rows" (the verdict then rests on served rows alone).
    gain = reweighting_gain(window, y, temperature=temperature, priors=estimate.priors,
                            reference_priors=estimate.reference_priors)
    k = window.shape[1]
    class_accuracy = class_accuracy_test(np.bincount(y, minlength=k), np.bincount(y[correct], minlength=k),
                                         reference_priors, level=level, seed=seed)
    reweighted_drift = None
    if prior_test.fired:
        corrected = prior_corrected_logits(window, temperature=temperature, priors=estimate.priors,
                                           reference_priors=estimate.reference_priors)
        reweighted_drift = decide_drift(summarise_arrays(corrected, y, temperature=temperature, start=_EPOCH,
                                                         end=_EPOCH, n_bins=n_bins), reference, policy)
    # 3. The accuracy and the served confidences (tested in step 1).
    diagnosis = diagnose_shift(
        priors=prior_test, tests_fired=drift.tests_fired,
        reweighted_tests_fired=None if reweighted_drift is None else reweighted_drift.tests_fired, gain=gain,
        class_accuracy=class_accuracy, accuracy=float(correct.mean()), accuracy_floor=accuracy_floor,
        confidence_shifted=confidence_shifted, level=level,
    )
    return ShiftCheck(diagnosis=diagnosis, served=served, prior_test=prior_test, drift=drift,
                      reweighted_drift=reweighted_drift, gain=gain, class_accuracy=class_accuracy, warning=warning)
