"""Thermostat's side effects, in rooms: the pipelines, their records, the MLflow side, the Prefect
side, the command line, the dashboard and the ingestion service.

* :mod:`flows.pipelines` — the flows the deployments run (post-finetune, monitor, refit, ...) and what they share;
* :mod:`flows.records` — what Thermostat writes outside Python, typed both ways (no MLflow, no Prefect);
* :mod:`flows.registry` — the MLflow side: the registry adapter, checkpoints, the pyfunc, serving;
* :mod:`flows.orchestration` — the Prefect side and where work runs: events, alerts, Dask, the per-model lease;
* :mod:`flows.cli` — the ``thermostat`` command line and the demo;
* :mod:`flows.dashboard` — the on-call page, its JSON API and ``/metrics``;
* :mod:`flows.ingest` — ``thermostat ingest``: predictions and labels over HTTP;

and, read by every room: :mod:`flows.settings` (the ``THERMOSTAT_*`` settings),
:mod:`flows.holdout` (the files a fine-tune job hands the post-finetune flow),
:mod:`flows.exit_status` (the exit statuses every command shares) and :mod:`flows.defaults`
(the defaults the settings and the command line share); :mod:`flows.web` is the servers' front
door. Which room may import which is an import-linter contract (``pyproject.toml``).
"""

from __future__ import annotations

__all__: list[str] = []
