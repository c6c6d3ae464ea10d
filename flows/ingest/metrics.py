"""The ingestion service's Prometheus exposition (``GET /metrics``), one registry per app.

=============================================== ===============================================
``thermostat_ingest_requests_total``            requests answered, by ``route`` and ``code``
``thermostat_ingest_request_seconds``           time to answer a request, by ``route`` (histogram)
``thermostat_ingest_rows_total``                rows by ``kind`` (predictions, labels) and
                                                ``outcome`` (written, unchanged, refused;
                                                attached, unchanged, conflict, unknown, refused)
``thermostat_ingest_throttled_total``           requests answered 429 (the writer was behind)
``thermostat_ingest_pending_rows``              prediction rows waiting for the writer
``thermostat_ingest_max_pending_rows``          how many may wait before requests get 429
``thermostat_ingest_write_rows_per_second``     the writer's recent rate (rows per second)
``thermostat_ingest_write_seconds_total``       time the writer spent writing
``thermostat_ingest_write_failures_total``      batches the database refused whole (503)
=============================================== ===============================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from monitoring import IngestQueueStats

__all__ = ["CONTENT_TYPE", "IngestMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _QueueCollector(Collector):
    """The writer's gauges, read from its stats at each scrape."""

    def __init__(self, stats: Callable[[], IngestQueueStats], max_pending_rows: int) -> None:
        self._stats = stats
        self._max = max_pending_rows

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        yield GaugeMetricFamily("thermostat_ingest_pending_rows", "Prediction rows waiting for the writer",
                                value=stats.pending_rows)
        yield GaugeMetricFamily("thermostat_ingest_max_pending_rows", "Rows that may wait before requests get 429",
                                value=self._max)
        yield GaugeMetricFamily("thermostat_ingest_write_rows_per_second", "The writer's recent rate",
                                value=stats.rows_per_second)
        yield CounterMetricFamily("thermostat_ingest_write_seconds", "Time the writer spent writing",
                                  value=stats.write_seconds)
        yield CounterMetricFamily("thermostat_ingest_write_failures", "Batches the database refused whole",
                                  value=stats.batches_failed)


class IngestMetrics:
    """The counters the routes update and the exposition of them and of the writer's state."""

    def __init__(self, stats: Callable[[], IngestQueueStats], max_pending_rows: int) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("thermostat_ingest_requests", "Requests answered", ["route", "code"],
                                registry=self.registry)
        self.seconds = Histogram("thermostat_ingest_request_seconds", "Time to answer a request", ["route"],
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
                                 registry=self.registry)
        self.rows = Counter("thermostat_ingest_rows", "Rows received, by kind and outcome", ["kind", "outcome"],
                            registry=self.registry)
        self.throttled = Counter("thermostat_ingest_throttled", "Requests answered 429", ["route"],
                                 registry=self.registry)
        self.registry.register(_QueueCollector(stats, max_pending_rows))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
