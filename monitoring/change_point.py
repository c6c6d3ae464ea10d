"""Where a drift began inside one window: a CUSUM change-point estimate on the temperature score.

The sequential rule (:mod:`monitoring.sequential`) dates a drift across checks; when it has not
alarmed — the drift began mid-window and the fixed window's tests found it first — a refit that
reads the whole window fits T partly on rows from before the drift and may not fix anything.
:func:`window_change_point` reads the window's labelled rows once more, in serving order, and
estimates where the mean of the per-row score g (the derivative of the row's NLL in log T at
the deployed T, whose mean is 0 where T is right) changed: the k that maximises
|S_k − k S_n / n|, S_k the sum of the first k scores. Normalised by sd(g) √n it is the supremum of
a Brownian bridge under no change; the estimate is kept only when it exceeds that law's 95 %
quantile (1.358, Kolmogorov), else the window has no clear change point and a refit reads it whole.

Memory is one chunk: S_n and n come from the window's sums, the scan keeps a running sum.

References
----------
Page. "Continuous inspection schemes". Biometrika 41 (1954).
Csörgő, Horváth. "Limit Theorems in Change-Point Analysis". Wiley (1997), ch. 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import numpy as np

from calibration import TemperatureStats, TopLabelScores

from ._validation import check_chunk_size
from .window import LabelledSource, WindowQuery

__all__ = ["WindowChangePoint", "window_change_point"]

#: The 95 % quantile of sup |B(t)|, B a Brownian bridge (the Kolmogorov distribution).
BRIDGE_95: Final = 1.358


@dataclass(frozen=True, slots=True)
class WindowChangePoint:
    """A window's change-point estimate: ``at`` the serving time of the first row after the change
    (None when not significant), ``statistic`` the normalised CUSUM's maximum, ``rows_after`` the
    rows from ``at`` on, of ``n`` read; ``significant`` when ``statistic`` > ``critical``."""

    at: datetime | None
    statistic: float
    rows_after: int
    n: int
    critical: float = BRIDGE_95

    @property
    def significant(self) -> bool:
        return self.at is not None

    def sentence(self) -> str:
        """One line for a report's reasons."""
        if self.at is None:
            return (f"no change point inside the window (CUSUM of the temperature score {self.statistic:.2f} <= "
                    f"{self.critical:g}): a refit reads the whole window")
        return (f"the drift began inside the window at about {self.at.isoformat(timespec='seconds')} (CUSUM of the "
                f"temperature score {self.statistic:.2f} > {self.critical:g}; {self.rows_after} of {self.n} labelled rows "
                "since): a refit reads from there")


def window_change_point(
    source: LabelledSource, query: WindowQuery, stats: TemperatureStats, *, chunk_size: int = 50_000,
    critical: float = BRIDGE_95,
) -> WindowChangePoint:
    """Estimate where the temperature score's mean changed inside the query's window (module docstring).

    Parameters
    ----------
    source : LabelledSource
        Where the window's labelled rows are read, in serving order.
    query : WindowQuery
        The version, the window and the deployed T.
    stats : TemperatureStats
        The window's temperature sums at the deployed T (its n and Σg).
    chunk_size : int, default=50_000
        Rows per read.
    critical : float, default=1.358
        The normalised CUSUM above which the change point is kept.

    Returns
    -------
    WindowChangePoint

    Examples
    --------
    >>> from monitoring import WindowInMemory, summarise_window
    >>> rng = np.random.default_rng(0)
    >>> logits = 2.0 * rng.normal(size=(2000, 4))
    >>> def at(t, z):  # labels drawn from softmax(z / t)
    ...     p = np.exp(z / t); p /= p.sum(axis=1, keepdims=True)
    ...     return (rng.random((len(z), 1)) > p.cumsum(axis=1)).sum(axis=1).clip(0, 3)
    >>> labels = np.concatenate([at(1.0, logits[:1200]), at(2.0, logits[1200:])])  # the drift at row 1,200
    >>> window = WindowInMemory(logits, labels, temperature=1.0)
    >>> query = window.query()
    >>> found = window_change_point(window, query, summarise_window(window, query).temperature_stats)
    >>> found.significant, 1100 < found.n - found.rows_after < 1300
    (True, True)
    """
    chunk_size = check_chunk_size(chunk_size)
    n = stats.n
    mean = stats.gradient_sum / n if n else 0.0
    variance = stats.gradient_square_sum / n - mean * mean if n else 0.0
    if n < 2 or not variance > 0.0:
        return WindowChangePoint(None, 0.0, 0, n, critical)
    running, seen, best, best_k = 0.0, 0, 0.0, 0
    best_at: datetime | None = None
    for chunk in source.iter_labelled(query.model_name, query.model_version, query.start, query.end,
                                      chunk_size=chunk_size):
        if not len(chunk):
            continue
        scores = TopLabelScores.from_logits(chunk.logits, chunk.labels, temperature=query.temperature)
        bridge = running + np.cumsum(scores.gradient) - mean * np.arange(seen + 1, seen + len(chunk) + 1)
        k = int(np.argmax(np.abs(bridge)))
        if abs(bridge[k]) > best and seen + k + 1 < n:
            best, best_k = float(abs(bridge[k])), seen + k + 1
            best_at = _moment(chunk.time[k + 1]) if k + 1 < len(chunk) else None  # else the next chunk's first row
        elif best_at is None and best_k == seen:
            best_at = _moment(chunk.time[0])
        running = float(bridge[-1]) + mean * (seen + len(chunk))
        seen += len(chunk)
    statistic = best / math.sqrt(variance * n)
    if statistic <= critical or best_at is None:
        return WindowChangePoint(None, statistic, 0, n, critical)
    return WindowChangePoint(best_at, statistic, n - best_k, n, critical)


def _moment(time: np.datetime64) -> datetime:
    moment: datetime = time.astype("datetime64[us]").item().replace(tzinfo=UTC)
    return moment
