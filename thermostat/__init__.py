"""Thermostat's front door for a serving process: :mod:`thermostat.log`.

A service that serves a model imports ``thermostat.log`` to log what it serves and attach the
labels that arrive later, without the flows, Prefect or MLflow (the pipeline's packages are
:mod:`calibration`, :mod:`monitoring` and :mod:`flows`). Importing this package loads nothing.
"""

from __future__ import annotations

__all__: list[str] = []
