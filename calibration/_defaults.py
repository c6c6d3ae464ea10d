"""The core's defaults and limits that the command line builds its options from.

A module of plain constants that imports nothing, so that ``thermostat --help`` and the
parsing of every command's arguments need neither numpy's companions (scipy, pandas) nor
numba. The modules that use them (``_fit``, ``_scored``, ``_estimators``) import them from
here: each default has one home.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_BOOTSTRAP_RESAMPLES",
    "DEFAULT_BOUNDS",
    "DEFAULT_CONFIDENCE_LEVEL",
    "DEFAULT_MAX_TV_DISTANCE",
    "DEFAULT_MIN_PER_CLASS",
    "DEFAULT_MIN_TOTAL",
    "DEFAULT_N_BINS",
    "ESTIMATORS",
    "MAX_CLASSES",
    "MAX_PRIOR_CLASSES",
]

#: The temperature search's bounds (lowest, highest T) unless told otherwise.
DEFAULT_BOUNDS: tuple[float, float] = (0.05, 20.0)

#: The most classes K :func:`read_scored_set` reads unless told otherwise (``max_classes``):
#: far above any classifier head in use, far below what makes a read hang (a CSV header of
#: a million logit columns).
MAX_CLASSES = 100_000

#: The most classes K whose class-prior statistics are formed unless told otherwise
#: (``max_prior_classes``): the reference's sums of posterior outer products and its confusion
#: matrix are K × K, and the prior test, EM's covariance and BBSE decompose K × K matrices, so
#: their memory grows as K² and their time as K³ (``thermostat diagnose`` at 2,000 classes:
#: 17 s of CPU and 0.5 GB on 60 rows). Everything else the command line reads is linear in K.
MAX_PRIOR_CLASSES = 2_000

#: The calibration-error estimators :func:`calibration_errors` knows, by name.
ESTIMATORS = ("binned", "debiased_l2", "debiased_l1", "smooth")

#: Equal-width bins of an ECE and a reliability table (M).
DEFAULT_N_BINS = 15

#: Resamples of the paired bootstrap of the NLL change, and the level of its interval (and of
#: the gate's Wilson bound).
DEFAULT_BOOTSTRAP_RESAMPLES = 2000
DEFAULT_CONFIDENCE_LEVEL = 0.95

#: What a calibration set needs to qualify: examples in all, per class, and the largest
#: total-variation distance of its class mix to recent traffic's.
DEFAULT_MIN_TOTAL = 300
DEFAULT_MIN_PER_CLASS = 30
DEFAULT_MAX_TV_DISTANCE = 0.15
