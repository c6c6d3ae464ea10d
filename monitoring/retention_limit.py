"""The longest retention: what :func:`monitoring.retention_cutoff` and the settings accept.

A module of its own, importing nothing heavy: the settings read it when the command line starts.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

__all__ = ["MAX_RETENTION"]

MAX_RETENTION: Final = timedelta(days=36_500)
"""The longest retention, 100 years (``P36500D``): a cutoff further back leaves the calendar
(before the year 1); to keep everything, set no retention."""
