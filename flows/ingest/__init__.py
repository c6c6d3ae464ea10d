"""The ingestion service: served predictions and late labels from any stack, over HTTP.

* :mod:`flows.ingest.payloads` — what it reads and answers (the OpenAPI schema's models), read row
  by row: a bad row is refused alone;
* :mod:`flows.ingest.kserve` — KServe's inference logger's CloudEvents as prediction rows;
* :mod:`flows.ingest.metrics` — its Prometheus exposition;
* :mod:`flows.ingest.server` — the Starlette app and ``thermostat ingest``.

It writes through :mod:`monitoring` (:class:`monitoring.IngestQueue`) and loads neither Prefect,
MLflow nor pandas (a boundary test holds it), so it starts in seconds.
"""

from __future__ import annotations

from flows.ingest.server import create_app

__all__ = ["create_app"]
