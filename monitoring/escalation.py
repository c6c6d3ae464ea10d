"""After a refit: can one temperature fix what is left? The escalation's diagnosis.

:func:`diagnose_reliability_shape` tells a single "volume" miscalibration, which one scalar
temperature can move, from an arched or saw-tooth reliability curve, which no temperature can
fix: then the model "needs retraining or a data fix", and the refit says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from calibration import Interval, ReliabilityTable

__all__ = ["ReliabilityShape", "diagnose_reliability_shape"]

Shape = Literal["empty", "calibrated", "volume", "arched", "saw-tooth"]

_Z = Interval(0.0, low_closed=False, hint="standard errors")


@dataclass(frozen=True, slots=True)
class ReliabilityShape:
    """What kind of miscalibration a reliability table shows (after a refit: can T fix it?).

    A bin's gap (accuracy − confidence) is *significant* when it is non-sparse and
    |gap| > ``z`` standard errors sqrt(c(1 − c) / count). ``shape`` is

    * "empty": no non-sparse bin;
    * "calibrated": no significant gap;
    * "volume": every significant gap has one sign (consistently over- or under-confident),
      which one scalar temperature can move;
    * "arched": the sign changes once or twice across the bins (e.g. under-confident in the
      middle, over-confident at the top): one temperature cannot fix it;
    * "saw-tooth": three or more sign changes.

    ``single_temperature_can_fix`` is False for "arched" and "saw-tooth": the escalation
    "needs retraining or a data fix".
    """

    shape: Shape
    single_temperature_can_fix: bool
    sign_changes: int
    over_confident_bins: tuple[int, ...]
    under_confident_bins: tuple[int, ...]
    n_bins_used: int
    z: float
    message: str


def diagnose_reliability_shape(table: ReliabilityTable, *, z: float = 3.0) -> ReliabilityShape:
    """Tell a single 'volume' miscalibration from an arched or saw-tooth reliability curve.

    Used to verify a refit: when calibration is still off after the NLL-optimal temperature
    and the residual gaps change sign across the confidence range, no single T can fix it.

    Parameters
    ----------
    table : ReliabilityTable
        Equal-width (or equal-mass) reliability table, e.g. ``stats.reliability_table()``.
    z : float, default=3.0
        How many standard errors a bin's gap must exceed to count (> 0).

    Returns
    -------
    ReliabilityShape
        The shape, the significant bins by direction, the number of sign changes across
        them in confidence order, and a sentence for the report.

    Raises
    ------
    ValueError, TypeError
        If ``z`` is not a finite number > 0.

    Examples
    --------
    >>> from calibration import ReliabilityTable
    >>> edges = np.linspace(0, 1, 6)
    >>> count = np.array([0, 400, 400, 400, 400])
    >>> conf = np.array([0.0, 0.3, 0.5, 0.7, 0.9]) * count
    >>> arched = ReliabilityTable.from_bin_sums(edges[:-1], edges[1:], count, conf,
    ...     np.array([0, 80, 280, 320, 300]), scheme="equal-width", min_count=10)
    >>> shape = diagnose_reliability_shape(arched)
    >>> shape.shape, shape.sign_changes, shape.single_temperature_can_fix
    ('arched', 2, False)
    >>> volume = ReliabilityTable.from_bin_sums(edges[:-1], edges[1:], count, conf,
    ...     np.array([0, 80, 160, 240, 320]), scheme="equal-width", min_count=10)
    >>> diagnose_reliability_shape(volume).shape
    'volume'
    """
    z = _Z.check(z, name="z")
    used = (table.count > 0) & ~table.sparse
    count = np.where(used, table.count, 1).astype(np.float64)
    confidence = np.where(used, table.mean_confidence, 0.5)
    # Bernoulli standard error of the bin's accuracy, floored so a bin at confidence 1.0 is not infinitely sure.
    variance = np.maximum(confidence * (1.0 - confidence), 1.0 / (4.0 * count))
    gap = np.where(used, table.gap, 0.0)
    significant = used & (np.abs(gap) > z * np.sqrt(variance / count))
    over = np.flatnonzero(significant & (gap < 0))
    under = np.flatnonzero(significant & (gap > 0))
    signs = np.sign(gap[significant])
    sign_changes = int(np.count_nonzero(signs[1:] != signs[:-1]))
    n_used = int(np.count_nonzero(used))
    shape: Shape
    if n_used == 0:
        shape, message = "empty", "no bin holds enough rows to read the reliability curve"
    elif not significant.any():
        shape = "calibrated"
        message = f"no bin's gap exceeds {z:g} standard errors across the {n_used} non-sparse bins: calibrated"
    elif sign_changes == 0:
        shape = "volume"
        direction = "over-confident" if over.size else "under-confident"
        message = (
            f"consistently {direction} in {max(over.size, under.size)} of {n_used} non-sparse bins: a single "
            "temperature can correct this ('volume' miscalibration)"
        )
    else:
        shape = "arched" if sign_changes <= 2 else "saw-tooth"
        message = (
            f"the reliability curve is {shape} (the gap changes sign {sign_changes} time"
            f"{'' if sign_changes == 1 else 's'} across the non-sparse bins: over-confident in bins "
            f"{over.tolist()}, under-confident in bins {under.tolist()}); a single temperature cannot fix it: "
            "needs retraining or a data fix"
        )
    return ReliabilityShape(
        shape=shape,
        single_temperature_can_fix=shape in ("empty", "calibrated", "volume"),
        sign_changes=sign_changes,
        over_confident_bins=tuple(over.tolist()),
        under_confident_bins=tuple(under.tolist()),
        n_bins_used=n_used,
        z=z,
        message=message,
    )
