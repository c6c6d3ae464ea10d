"""The on-call view: ``thermostat dashboard``, its JSON API and a Prometheus ``/metrics``.

Three layers, each a module:

* :mod:`flows.dashboard.data` — gathering: the MLflow store (registry and the monitoring
  experiment) and the prediction log, read-only, into typed records
  (:class:`~flows.dashboard.data.DashboardState`, with its open alerts);
* :mod:`flows.dashboard.svg`, :mod:`flows.dashboard.page`, :mod:`flows.dashboard.metrics` —
  rendering: inline SVG charts, the HTML page, the Prometheus exposition, pure functions of
  the state (names shown through :mod:`flows.dashboard.text`: escaped, invisible characters
  spelled out);
* :mod:`flows.dashboard.server` — serving: a Starlette app run by uvicorn, on loopback by
  default (a Host allow-list, a bound on the time to send a request), and the ``thermostat
  dashboard`` command.
"""

from __future__ import annotations

from flows.dashboard.data import Alert, DashboardState, gather
from flows.dashboard.server import create_app

__all__ = ["Alert", "DashboardState", "create_app", "gather"]
