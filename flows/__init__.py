"""Thermostat's side effects, in rooms: the pipelines, their records, the MLflow side, the Prefect
side, the command line and the dashboard.

* :mod:`flows.pipelines` — the three sibling flows (post-finetune, monitor, refit) and what they share;
* :mod:`flows.records` — what Thermostat writes outside Python, typed both ways (no MLflow, no Prefect);
* :mod:`flows.registry` — the MLflow side: the registry adapter, checkpoints, the pyfunc, serving;
* :mod:`flows.orchestration` — the Prefect side and where work runs: events, alerts, Dask;
* :mod:`flows.cli` — the ``thermostat`` command line and the demo;
* :mod:`flows.dashboard` — the on-call page, its JSON API and ``/metrics``;

and, read by every room: :mod:`flows.settings` (the ``THERMOSTAT_*`` settings),
:mod:`flows.holdout` (the files a fine-tune job hands the post-finetune flow),
:mod:`flows.exit_status` (the exit statuses every command shares) and :mod:`flows.defaults`
(the defaults the settings and the command line share). Which room may import which
is a test (``tests/test_boundaries.py``).
"""

from __future__ import annotations

__all__: list[str] = []
