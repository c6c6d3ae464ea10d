"""Checks shared by the monitoring modules: times, windows, chunk sizes, gate thresholds.

Plain Python and numpy only (no SQLAlchemy), so the drift decision and the window summary
can check a time without loading the prediction log's database layer.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

__all__ = ["as_utc", "check_chunk_size", "check_threshold", "check_window"]


def as_utc(value: object, *, name: str) -> datetime:
    """``value`` as an aware UTC datetime, or raise unless it is a timezone-aware datetime.

    >>> as_utc(datetime(2026, 1, 1, tzinfo=UTC), name="start").isoformat()
    '2026-01-01T00:00:00+00:00'
    """
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a timezone-aware datetime; got {type(value).__name__} {value!r}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(
            f"{name} {value.isoformat()} has no timezone; pass an aware datetime, "
            "e.g. datetime.now(UTC) or dt.replace(tzinfo=UTC)"
        )
    return value.astimezone(UTC)


def check_chunk_size(chunk_size: int) -> int:
    """``chunk_size`` as an int >= 1, or raise (bool is refused)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)):
        raise TypeError(f"chunk_size must be an integer >= 1; got {chunk_size!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}")
    return int(chunk_size)


def check_window(start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """The bounds of [start, end) in UTC, or raise if either is naive or the window is reversed."""
    start_utc, end_utc = as_utc(start, name="start"), as_utc(end, name="end")
    if end_utc < start_utc:
        raise ValueError(f"the window ends ({end_utc.isoformat()}) before it starts ({start_utc.isoformat()})")
    return start_utc, end_utc


def check_threshold(threshold: float) -> float:
    """A gate threshold as a float in [0, 1], or raise."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating, np.integer)):
        raise TypeError(f"threshold must be a number in [0, 1]; got {threshold!r}")
    value = float(threshold)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"threshold must be in [0, 1] (auto-process iff confidence >= threshold); got {value}")
    return value
