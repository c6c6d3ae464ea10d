"""A version's recent labelled traffic, read from the prediction log (or its Parquet export) for a refit.

The monitor never holds a window in memory (it merges per-chunk statistics); a refit has to
(it fits T and bootstraps on rows), so it reads at most ``max_rows`` — the most recent ones —
streaming the window in chunks and dropping the oldest chunks as newer ones arrive. Peak
memory is about ``max_rows + chunk_size`` rows whatever the window's size.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from calibration import ScoredSet
from monitoring import LabelledChunk, LabelledSource

__all__ = ["Traffic", "recent_labelled_traffic"]


@dataclass(frozen=True, slots=True, eq=False)
class Traffic:
    """Labelled rows of one version in serving order (oldest first).

    ``scored.ids`` are the request ids; ``scored.groups`` is set only when every row has a
    group (``groups`` keeps None for rows without one); ``served_at`` is UTC.
    """

    model_name: str
    model_version: str
    window_start: datetime
    window_end: datetime
    scored: ScoredSet
    groups: NDArray[np.object_]
    served_at: NDArray[np.datetime64]
    n_in_window: int

    @property
    def first_served_at(self) -> datetime:
        return _aware(self.served_at[0])

    @property
    def last_served_at(self) -> datetime:
        return _aware(self.served_at[-1])


def _aware(moment: np.datetime64) -> datetime:
    seconds = moment.astype("datetime64[us]").astype(np.int64) / 1e6
    return datetime.fromtimestamp(float(seconds), tz=UTC)


def recent_labelled_traffic(
    log: LabelledSource,
    model_name: str,
    model_version: str,
    *,
    start: datetime,
    end: datetime,
    max_rows: int,
    chunk_size: int,
) -> Traffic | None:
    """The most recent ``max_rows`` labelled rows of a version served in [start, end).

    Returns None when the window holds no labelled row.

    Examples
    --------
    >>> from datetime import timedelta
    >>> from monitoring import PredictionLog, log_predictions
    >>> log = PredictionLog("sqlite://"); log.create()
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> logits = np.tile([[2.0, 0.0], [0.0, 1.0]], (3, 1))
    >>> _ = log_predictions(log, "m", "1", 1.0, logits, [f"r{i}" for i in range(6)],
    ...                     time=[t + timedelta(minutes=i) for i in range(6)], labels=[0, 1, 0, 0, 1, 1])
    >>> traffic = recent_labelled_traffic(log, "m", "1", start=t, end=t + timedelta(hours=1), max_rows=4,
    ...                                   chunk_size=2)
    >>> traffic.scored.ids.tolist(), traffic.n_in_window
    (['r2', 'r3', 'r4', 'r5'], 6)
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1; got {max_rows}")
    kept: deque[LabelledChunk] = deque()
    held = 0
    seen = 0
    for chunk in log.iter_labelled(model_name, model_version, start, end, chunk_size=chunk_size):
        kept.append(chunk)
        held += len(chunk)
        seen += len(chunk)
        # Drop whole chunks that only hold rows older than the newest max_rows.
        while held - len(kept[0]) >= max_rows:
            held -= len(kept.popleft())
    if not kept:
        return None
    logits = np.concatenate([chunk.logits for chunk in kept])[-max_rows:]
    labels = np.concatenate([chunk.labels for chunk in kept])[-max_rows:]
    ids = np.concatenate([chunk.request_ids for chunk in kept])[-max_rows:]
    groups = np.concatenate([chunk.groups for chunk in kept])[-max_rows:]
    served = np.concatenate([chunk.time for chunk in kept])[-max_rows:]
    complete = bool(np.all(groups != None))  # noqa: E711 - element-wise
    scored = ScoredSet.from_arrays(
        logits.astype(np.float64), labels, ids=ids.astype(str), groups=groups.astype(str) if complete else None,
        source=f"prediction log: {model_name} version {model_version} in [{start.isoformat()}, {end.isoformat()})",
    )
    return Traffic(
        model_name=model_name, model_version=model_version, window_start=start, window_end=end, scored=scored,
        groups=groups, served_at=served, n_in_window=seen,
    )
