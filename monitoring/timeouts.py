"""How long a serving process lets its prediction log take: a constant that imports nothing.

Its own module so that the settings (and every command that reads them) get the default without
loading the prediction log's SQL and array stack.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_SERVING_LOG_TIMEOUT_MS"]

DEFAULT_SERVING_LOG_TIMEOUT_MS: Final = 2000
"""How long (ms) a serving process lets its prediction log take: a request's wait for its rows
(:meth:`monitoring.PredictionLogWriter.write`) and, through
:meth:`monitoring.PredictionLog.with_timeout`, the database connections' connect and statement
timeouts (``THERMOSTAT_SERVING_LOG_TIMEOUT_MS``)."""
