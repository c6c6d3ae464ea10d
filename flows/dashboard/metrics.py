"""The dashboard's Prometheus exposition: the latest check of every serving version.

One sample per model, version and alias (a version behind two aliases appears under each), for
the versions an alias points at now; Prometheus keeps the history. Written with
``prometheus_client``'s own collector types and ``generate_latest`` (so names, label values
and help text are escaped by the library), from a :class:`~flows.dashboard.data.DashboardState`:

=========================================== ===================================================
``thermostat_ece``                          ECE of the latest check's window (its registered T)
``thermostat_nll``                          mean NLL (nats) of that window
``thermostat_baseline_ece``                 the version's registration baseline ECE
``thermostat_ece_threshold``                baseline + the latest check's tolerance (its policy)
``thermostat_drift``                        1 when the latest check says drift, else 0
``thermostat_verdict{verdict=...}``         1 for the latest check's verdict (calibrated, undetermined,
                                            drift, insufficient_data, failed), 0 for the others
``thermostat_p_value``                      p-value of the latest check's ECE test
``thermostat_rows_to_decide``               labelled rows that would decide an undetermined check
``thermostat_last_check_timestamp_seconds`` the end of the latest checked window (Unix time)
``thermostat_window_labelled_rows``         labelled rows in that window
``thermostat_predicted_accuracy``           accuracy the served confidences predict (early warning)
``thermostat_cusum``                        the sequential rule's larger side (sd; alarm at 6)
``thermostat_temperature``                  the version's registered T (also before any check)
``thermostat_temperature_low`` / ``_high``  its interval, when registered with one
``thermostat_served_temperature``           T of the version's latest logged prediction
``thermostat_open_alerts{kind=...}``        open alerts per model and kind (0 included)
``thermostat_dashboard_up``                 1 when the store was read, 0 when reading failed
=========================================== ===================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from flows.dashboard.data import ALERT_KINDS, Check, DashboardState, VersionInfo, thresholds_of

__all__ = ["CONTENT_TYPE", "VERDICTS", "exposition", "families"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# "ok": a check recorded before verdicts said whether calibration was established.
VERDICTS = ("calibrated", "undetermined", "drift", "insufficient_data", "failed", "ok")
_LABELS = ["model", "version", "alias"]


# The families of the latest check of each serving version, in the order they are exposed:
# (key, metric name, help text, labels beyond model/version/alias).
_GAUGES: Final = (
    ("ece", "thermostat_ece", "ECE of the latest checked window at the version's registered T", ()),
    ("nll", "thermostat_nll", "Mean NLL (nats) of the latest checked window", ()),
    ("baseline", "thermostat_baseline_ece", "Registration baseline ECE of the version", ()),
    ("threshold", "thermostat_ece_threshold", "Baseline ECE plus the drift tolerance of the latest check's policy", ()),
    ("drift", "thermostat_drift", "1 when the latest check's verdict is drift, else 0", ()),
    ("verdict", "thermostat_verdict", "1 for the latest check's verdict, 0 for the other verdicts", ("verdict",)),
    ("p_value", "thermostat_p_value", "p-value of the latest check's ECE test", ()),
    ("rows_to_decide", "thermostat_rows_to_decide",
     "Labelled rows a window would need to decide, when the latest check is undetermined", ()),
    ("last", "thermostat_last_check_timestamp_seconds", "End of the latest checked window, Unix seconds", ()),
    ("rows", "thermostat_window_labelled_rows", "Labelled rows in the latest checked window", ()),
    ("predicted", "thermostat_predicted_accuracy",
     "Accuracy the latest window's served confidences predict (before labels)", ()),
    ("cusum", "thermostat_cusum", "Larger side of the sequential rule's CUSUM after the latest check (sd)", ()),
    ("temperature", "thermostat_temperature", "Registered temperature T of the version", ()),
    ("low", "thermostat_temperature_low", "Lower end of the registered T interval", ()),
    ("high", "thermostat_temperature_high", "Upper end of the registered T interval", ()),
    ("served", "thermostat_served_temperature", "T of the version's latest logged prediction", ()),
)


def families(state: DashboardState | None) -> list[GaugeMetricFamily]:
    """The metric families of ``state`` (None: the store could not be read: only ``up`` = 0)."""
    up = GaugeMetricFamily("thermostat_dashboard_up", "1 when the dashboard read the MLflow store, else 0")
    up.add_metric([], 0.0 if state is None else 1.0)
    if state is None:
        return [up]
    gauges = {key: GaugeMetricFamily(name, text, labels=[*_LABELS, *extra]) for key, name, text, extra in _GAUGES}
    alerts = GaugeMetricFamily("thermostat_open_alerts", "Open alerts of the dashboard", labels=["model", "kind"])
    for model in state.models:
        if model.problem is not None:  # could not be read: nothing to say about it here (the page says why)
            continue
        for kind in ALERT_KINDS:
            alerts.add_metric([model.name, kind],
                              float(sum(1 for a in state.alerts if a.model_name == model.name and a.kind == kind)))
        for version, aliases in model.serving().items():
            own = model.checks_of(version=version)
            latest = own[-1] if own else None
            # The tolerance of the policy the latest check recorded (the settings' before any check).
            tolerance = thresholds_of(latest, state.thresholds).ece_tolerance
            for alias in aliases:
                labels = [model.name, version, alias]
                _add_version(gauges, labels, model.version(version), tolerance)
                if latest is not None:
                    _add_latest_check(gauges, labels, latest)
    return [up, *gauges.values(), alerts]


def _add_version(gauges: Mapping[str, GaugeMetricFamily], labels: list[str], info: VersionInfo | None,
                 tolerance: float) -> None:
    """What the registration says of a serving version: its T (and interval), the T served, its baseline."""
    if info is None:
        return
    for key, value in (("temperature", info.temperature), ("low", info.temperature_low),
                       ("high", info.temperature_high),
                       ("served", None if info.served is None else info.served.served_temperature),
                       ("baseline", info.baseline_ece),
                       ("threshold", None if info.baseline_ece is None else info.baseline_ece + tolerance)):
        if value is not None:
            gauges[key].add_metric(labels, value)


def _add_latest_check(gauges: Mapping[str, GaugeMetricFamily], labels: list[str], latest: Check) -> None:
    """What the latest check of a serving version says: its numbers, its verdict, when its window ended."""
    for key, value in (("ece", latest.ece), ("nll", latest.nll), ("p_value", latest.p_value),
                       ("rows", None if latest.labelled_rows is None else float(latest.labelled_rows)),
                       ("predicted", latest.predicted_accuracy), ("cusum", latest.cusum),
                       ("rows_to_decide", None if latest.rows_to_decide is None else float(latest.rows_to_decide))):
        if value is not None:
            gauges[key].add_metric(labels, value)
    gauges["drift"].add_metric(labels, 1.0 if latest.verdict == "drift" else 0.0)
    gauges["last"].add_metric(labels, latest.window_end.timestamp())
    for name in VERDICTS:
        gauges["verdict"].add_metric([*labels, name], 1.0 if latest.verdict == name else 0.0)


class _StateCollector(Collector):
    def __init__(self, read: Callable[[], DashboardState | None]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        yield from families(self._read())


def exposition(read: Callable[[], DashboardState | None]) -> bytes:
    """The Prometheus text format of the state ``read`` returns (read once per call).

    Examples
    --------
    >>> print(exposition(lambda: None).decode().splitlines()[-1])
    thermostat_dashboard_up 0.0
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StateCollector(read))
    return generate_latest(registry)
