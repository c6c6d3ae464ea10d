"""The core's defaults and limits that the command line builds its options from.

A module of plain constants that imports nothing, so that ``thermostat --help`` and the
parsing of every command's arguments need neither numpy's companions (scipy, pandas) nor
numba. The modules that use them (``_fit``, ``_scored``, ``_estimators``) import them from
here: each default has one home.
"""

from __future__ import annotations

__all__ = ["DEFAULT_BOUNDS", "ESTIMATORS", "MAX_CLASSES"]

#: The temperature search's bounds (lowest, highest T) unless told otherwise.
DEFAULT_BOUNDS: tuple[float, float] = (0.05, 20.0)

#: The most classes K :func:`read_scored_set` reads unless told otherwise (``max_classes``):
#: far above any classifier head in use, far below what makes a read hang (a CSV header of
#: a million logit columns).
MAX_CLASSES = 100_000

#: The calibration-error estimators :func:`calibration_errors` knows, by name.
ESTIMATORS = ("binned", "debiased_l2", "debiased_l1", "smooth")
