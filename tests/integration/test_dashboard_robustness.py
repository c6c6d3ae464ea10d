"""The dashboard survives its data and its network (issue 19, items 12, 13, 15, 16).

``thermostat dashboard`` runs for real (a subprocess on loopback) over an MLflow store written
as an adversary would: next to a healthy model ``m``, a model whose name holds both ``'`` and
``"`` (MLflow allows it; its search filter cannot quote it), a name with a bidi override and
terminal escapes, check runs whose window ends in year 1 or 9999 or whose start time is 2^62 ms,
a refused refit started at 2^62 ms, and check reports with a non-number accuracy or an infinite
count. Every route (``/``, ``/api/models``, ``/api/alerts``, ``/metrics``) answers, serves ``m``
and names each bad record as unreadable. The same server checks the Host header (DNS
rebinding), closes a connection that sends half a request and stalls, and shows its prediction
log URL — whose password holds ``/``, ``?``, ``#`` and ``:`` — masked. A second server, whose
MLflow tracking URI carries a password and points at nothing, answers 503 without it.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mlflow import MlflowClient
from prometheus_client.parser import text_string_to_metric_families

from flows.records.evidence import RunEvidence
from flows.registry.adapter import MlflowRegistry
from flows.records.runs import RefitRecord
from flows.settings import ThermostatSettings
from flows.records.versions import VersionRecord
from tests.integration.conftest import dashboard_server, free_port, isolated_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
QUOTES = "it's \"odd\""
BIDI = "bidi\u202egnp.exe\x1b[31m"
FAR_MILLIS = 2**62
LOG_PASSWORD = "Kx7/Vq9?Wz3#:"  # no "@": SQLAlchemy, which connects, reads a password up to its first "@"
PASSWORD_PIECES = ("Kx7", "Vq9", "Wz3")


@dataclass(frozen=True)
class HostileStore:
    root: Path
    env: dict[str, str]
    good_checks: tuple[str, ...]
    bad_runs: dict[str, str]


def _check(registry: MlflowRegistry, settings: ThermostatSettings, model: str, version: str, alias: str,
           window_end: str, *, start: datetime, report: str | None = None) -> str:
    run_id = registry.start_run(f"check v{version}", {
        "thermostat.model_name": model, "thermostat.model_version": version, "thermostat.aliases": alias,
        "thermostat.verdict": "ok", "thermostat.window_end": window_end,
    }, experiment_name=settings.monitoring_experiment_name, start_time=start)
    registry.log_evidence(run_id, RunEvidence(
        metrics={"ece": 0.05, "nll": 0.4, "p_value": 0.5, "n": 900.0, "baseline_ece": 0.04}, metrics_at=start,
        texts={} if report is None else {"check/report.json": report}))
    registry.end_run(run_id)
    return run_id


def _report(**bin_values: object) -> str:
    row = {"lower": 0.5, "upper": 1.0, "count": 12, "mean_confidence": 0.8, "accuracy": 0.75, "sparse": False}
    return json.dumps({"n": 12, "ece": 0.05, "n_bins": 1, "scheme": "equal-width",
                       "reliability": [row | bin_values]})  # Infinity is written as JSON's readers take it


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> HostileStore:
    root = tmp_path_factory.mktemp("hostile-store")
    settings = ThermostatSettings(state_dir=root)
    registry = MlflowRegistry.from_settings(settings)
    client = MlflowClient(tracking_uri=settings.resolved_tracking_uri())
    tags = VersionRecord.example().to_tags()
    for name in ("m", QUOTES, BIDI):  # versions made with MLflow's own client: the adapter refuses the quotes
        run_id = registry.start_run("registration", {})
        registry.end_run(run_id)
        client.create_registered_model(name)
        client.create_model_version(name, str(root), run_id=run_id, tags=tags)
        client.set_registered_model_alias(name, "champion", "1")
    good = (_check(registry, settings, "m", "1", "champion", (T0 + timedelta(hours=1)).isoformat(),
                   start=T0 + timedelta(hours=1), report=_report()),
            _check(registry, settings, BIDI, "1", "champion", T0.isoformat(), start=T0))
    bad = {
        "window end in year 1": _check(registry, settings, "m", "1", "champion", "0001-01-01T00:00:00+00:00",
                                       start=T0),
        "window end in year 9999": _check(registry, settings, "m", "1", "champion", "9999-12-31T23:59:59+00:00",
                                          start=T0),
        "a non-number accuracy": _check(registry, settings, "m", "1", "staging", T0.isoformat(), start=T0,
                                        report=_report(accuracy="not a number")),
        "an infinite count": _check(registry, settings, "m", "1", "canary", T0.isoformat(), start=T0,
                                    report=_report(count=float("inf"))),
    }
    experiment = registry.experiment_id(settings.monitoring_experiment_name)
    far = client.create_run(experiment, start_time=FAR_MILLIS, tags={  # no window end: its start time is read
        "thermostat.model_name": "m", "thermostat.model_version": "1", "thermostat.aliases": "champion",
        "thermostat.verdict": "ok"})
    bad["a start time of 2^62 ms"] = far.info.run_id
    refusal = RefitRecord(model_name="m", parent_version="1", alias="champion", status="failed", step="verify",
                          reason="the refit does not verify", escalation=None, new_version=None,
                          window_start=T0.isoformat(), window_end=T0.isoformat(), prefect_flow_run_id=None,
                          metrics={})
    bad["a refused refit at 2^62 ms"] = client.create_run(experiment, start_time=FAR_MILLIS,
                                                           tags=refusal.to_tags()).info.run_id
    env = isolated_env(root, THERMOSTAT_STATE_DIR=str(root),
                       THERMOSTAT_PREDICTION_LOG_URL=f"postgresql+psycopg://thermostat:{LOG_PASSWORD}@127.0.0.1:"
                                                     f"{free_port()}/thermostat")
    return HostileStore(root=root, env=env, good_checks=good, bad_runs=bad)


@pytest.fixture(scope="module")
def dashboard(hostile_store: HostileStore) -> Iterator[str]:
    with dashboard_server(hostile_store.env, hostile_store.root / "dashboard.log", "--refresh", "1") as url:
        yield url


def _get(url: str, *, host: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={} if host is None else {"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


# ------------------------------------------------------------------------ one bad record (item 15)


def test_every_route_serves_the_rest_and_names_each_bad_record(dashboard: str, hostile_store: HostileStore) -> None:
    status, page = _get(f"{dashboard}/")
    assert status == 200, page[:2000]
    assert 'data-model="m"' in page and hostile_store.good_checks[0] in page, "the healthy model is served"
    for what, run_id in hostile_store.bad_runs.items():
        assert run_id in page, f"the run with {what} is named on the page"
    assert "it&#x27;s &quot;odd&quot;" in page and "cannot be read" in page

    status, text = _get(f"{dashboard}/api/models")
    assert status == 200, text[:2000]
    models = {m["name"]: m for m in json.loads(text)["models"]}
    assert {c["run_id"] for c in models["m"]["checks"]} >= {hostile_store.good_checks[0]}
    assert models[QUOTES]["problem"] and models["m"]["problem"] is None
    notes = "\n".join(json.loads(text)["notes"])
    assert all(run_id in notes for run_id in hostile_store.bad_runs.values()), notes

    status, text = _get(f"{dashboard}/api/alerts")
    assert status == 200 and "alerts" in json.loads(text)

    status, text = _get(f"{dashboard}/metrics")
    assert status == 200, text[:2000]
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert [sample.value for sample in families["thermostat_dashboard_up"].samples] == [1.0]
    assert {sample.labels["model"] for sample in families["thermostat_ece"].samples} >= {"m"}


# ------------------------------------------------------------------------ names and URLs shown (items 12, 16)


def test_bidi_overrides_and_control_characters_are_shown_escaped(dashboard: str) -> None:
    _, page = _get(f"{dashboard}/")
    assert "\u202e" not in page and "\x1b" not in page
    assert "bidi\\u202egnp.exe\\x1b[31m" in page, "the name is shown with its invisible characters spelled out"
    _, text = _get(f"{dashboard}/api/models")
    assert "\u202e" not in text and "\x1b" not in text, "the JSON escapes them too"
    assert BIDI in {m["name"] for m in json.loads(text)["models"]}, "and still says the exact name"


def test_the_header_and_start_up_line_mask_a_password_with_reserved_characters(
    dashboard: str, hostile_store: HostileStore
) -> None:
    _, page = _get(f"{dashboard}/")
    log = (hostile_store.root / "dashboard.log").read_text()
    assert "postgresql+psycopg://thermostat:***@127.0.0.1:" in page and "thermostat:***@127.0.0.1:" in log
    for where, text in (("page", page), ("log", log)):
        assert not any(piece in text for piece in PASSWORD_PIECES), f"a piece of the password is in the {where}"


# ------------------------------------------------------------------------ the network (item 16)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.evil.example", "attacker"])
def test_a_foreign_host_header_is_refused(dashboard: str, host: str) -> None:
    """DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 reads nothing."""
    for path in ("/api/models", "/", "/metrics"):
        status, body = _get(f"{dashboard}{path}", host=host)
        assert status == 421, (path, status, body[:200])
        assert "Host" in body and "--allow-host" in body


def test_loopback_names_and_the_configured_host_pass(dashboard: str) -> None:
    port = dashboard.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}", "LOCALHOST"):
        status, _ = _get(f"{dashboard}/metrics", host=host)
        assert status == 200, host


def test_a_stalled_half_request_is_closed_and_others_are_served(dashboard: str) -> None:
    port = int(dashboard.rsplit(":", 1)[1])
    stalled = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        stalled.sendall(b"GET /api/models HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
        started = time.monotonic()
        status, _ = _get(f"{dashboard}/metrics")
        assert status == 200, "the server answers others meanwhile"
        stalled.settimeout(45)
        try:
            answer = stalled.recv(4096)
        except TimeoutError:
            pytest.fail("the stalled connection was still open after 45 s")
        waited = time.monotonic() - started
        assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert waited < 30, f"closed after {waited:.0f} s"
    finally:
        stalled.close()


# ------------------------------------------------------------------------ MLflow unreachable (item 13)


@pytest.mark.parametrize("credentials", ["alice:Kx7-Vq9-Wz3", "alice:Kx7%2FVq9%23Wz3", "Kx7Vq9Wz3"])
def test_an_unreachable_tracking_server_is_503_without_its_password(credentials: str, tmp_path: Path) -> None:
    env = isolated_env(tmp_path, THERMOSTAT_STATE_DIR=str(tmp_path),
                       THERMOSTAT_TRACKING_URI=f"http://{credentials}@127.0.0.1:{free_port()}",
                       MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="5")
    log = tmp_path / "dashboard.log"
    with dashboard_server(env, log, "--refresh", "1") as url:
        answers = [_get(f"{url}{path}") for path in ("/healthz", "/", "/api/models", "/api/alerts")]
    assert [status for status, _ in answers] == [503] * 4
    assert "the MLflow store could not be read" in answers[0][1]
    shown = "\n".join(body for _, body in answers) + log.read_text()
    assert "127.0.0.1" in shown
    assert not any(piece in shown for piece in PASSWORD_PIECES), shown[-3000:]

