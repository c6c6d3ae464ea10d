"""``thermostat dashboard``: the page, its JSON API and ``/metrics`` on one small server.

A Starlette app run by uvicorn, on loopback by default. Every route reads one
:class:`~flows.dashboard.data.DashboardState`, gathered from the store at most once per
``--refresh`` seconds (the page, the API and Prometheus' scrapes share it):

=============================== =====================================================
``GET /``                       the page (HTML, inline SVG; no script)
``GET /api/models``             every model: versions, checks, refits, alias moves
``GET /api/alerts``             the open alerts
``GET /metrics``                Prometheus text format (:mod:`flows.dashboard.metrics`)
``GET /artifacts/{run}/{path}`` a reliability diagram the page shows (only those)
``GET /healthz``                ``ok`` when the store was read
=============================== =====================================================

It answers only requests addressed to it (the Host header: ``localhost``, an IP address, the
``--host`` it listens on, or a name given with ``--allow-host``; anything else is 421): a page on
another site cannot read it through DNS rebinding. A client has :data:`REQUEST_TIMEOUT_SECONDS`
to send a whole request once connected (or after its last answer), so one that sends half a
request and stalls is disconnected. Its messages — the 503 body, the log — never show the
settings' credentials.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import click
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from flows.dashboard.data import DashboardState, gather, missing_store
from flows.dashboard.metrics import CONTENT_TYPE, exposition
from flows.dashboard.page import render_page
from flows.exit_status import EXIT_BAD_INPUT, EXIT_OK, fail
from flows.orchestration.local_only import stay_local
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from flows.web import (
    REQUEST_TIMEOUT_SECONDS,
    HostAllowList,
    RedactingFormatter,
    RequestTimeoutProtocol,
    host_allowed,
    host_name,
    is_loopback,
)
from monitoring import mask_url, redact_credentials

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "MAX_REFRESH_SECONDS", "REQUEST_TIMEOUT_SECONDS", "HostAllowList",
           "StateCache", "command", "create_app", "host_allowed"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MAX_REFRESH_SECONDS: Final = 86400.0
"""The longest ``--refresh``: a day (a longer one would show a stale state for longer than anyone waits)."""
_logger = logging.getLogger(__name__)


class StateCache:
    """The state, gathered at most once per ``ttl`` seconds; concurrent requests wait for one read.

    A failed read is remembered (``error``) and retried on the next request after ``ttl``; its
    message and the logged traceback have the credentials of the ``hidden`` URLs taken out.
    """

    def __init__(self, read: Callable[[], DashboardState], *, ttl: float = 10.0, hidden: Sequence[str] = ()) -> None:
        self._read = read
        self._ttl = ttl
        self._hidden = tuple(hidden)
        self._lock = threading.Lock()
        self._state: DashboardState | None = None
        self._error: str | None = None
        self._at = -float("inf")

    @property
    def error(self) -> str | None:
        return self._error

    def get(self) -> DashboardState | None:
        """The current state; None when the last read failed (``error`` says why)."""
        with self._lock:
            if time.monotonic() - self._at >= self._ttl:
                try:
                    self._state, self._error = self._read(), None
                except Exception as error:  # noqa: BLE001 - shown on the page and as thermostat_dashboard_up 0
                    self._state = None
                    self._error = redact_credentials(f"{type(error).__name__}: {error}", *self._hidden)
                    _logger.warning("reading the store failed (tried again in %g s): %s", self._ttl,
                                    redact_credentials("".join(traceback.format_exception(error)), *self._hidden))
                self._at = time.monotonic()
            return self._state


class _JSONResponse(JSONResponse):
    """JSON with non-ASCII characters escaped: a bidi override in a name arrives as ``\\u202e``."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def create_app(settings: ThermostatSettings, *, refresh_seconds: float = 10.0,
               allowed_hosts: Iterable[str] = ()) -> Starlette:
    """The dashboard's ASGI app over the store and prediction log named by ``settings``, answering
    requests for ``localhost``, IP addresses and ``allowed_hosts`` (:class:`HostAllowList`)."""
    registry = MlflowRegistry(settings.resolved_tracking_uri(), registry_uri=settings.resolved_registry_uri(),
                              experiment_name=settings.experiment_name)
    hidden = (settings.resolved_tracking_uri(), settings.resolved_registry_uri(), settings.resolved_prediction_log_url())
    cache = StateCache(lambda: gather(settings, registry=registry), ttl=refresh_seconds, hidden=hidden)

    def unavailable() -> PlainTextResponse:
        return PlainTextResponse(f"the MLflow store could not be read: {cache.error}", status_code=503)

    def page(_: Request) -> Response:
        state = cache.get()
        return unavailable() if state is None else HTMLResponse(render_page(state))

    def models(_: Request) -> Response:
        state = cache.get()
        if state is None:
            return unavailable()
        return _JSONResponse({"generated_at": state.generated_at.isoformat(), "tracking_uri": state.tracking_uri,
                             "thresholds": state.thresholds.to_dict(), "notes": list(state.notes),
                             "models": [m.to_dict() for m in state.models]})

    def alerts(_: Request) -> Response:
        state = cache.get()
        if state is None:
            return unavailable()
        return _JSONResponse({"generated_at": state.generated_at.isoformat(),
                              "alerts": [a.to_dict() for a in state.alerts]})

    def metrics(_: Request) -> Response:
        return Response(exposition(cache.get), media_type=CONTENT_TYPE)

    def artifact(request: Request) -> Response:
        state = cache.get()
        run_id, path = request.path_params["run_id"], request.path_params["path"]
        if state is None or (run_id, path) not in state.artifacts():
            return PlainTextResponse("not a diagram this dashboard shows", status_code=404)
        content = registry.read_artifact(run_id, path)
        if content is None:
            return PlainTextResponse(f"run {run_id} has no {path}", status_code=404)
        return Response(content, media_type="image/png", headers={"Cache-Control": "max-age=3600"})

    def health(_: Request) -> Response:
        state = cache.get()
        return PlainTextResponse("ok") if state is not None else unavailable()

    return Starlette(routes=[
        Route("/", page), Route("/api/models", models), Route("/api/alerts", alerts), Route("/metrics", metrics),
        Route("/artifacts/{run_id}/{path:path}", artifact), Route("/healthz", health),
    ], middleware=[Middleware(HostAllowList, names=tuple(allowed_hosts))])


def _refresh_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_REFRESH_SECONDS:  # NaN fails every comparison
        raise ValueError(f"must be a number of seconds, more than 0 and at most {MAX_REFRESH_SECONDS:g} (a day); "
                         f"got {text!r}")
    return value


@click.command(help="Serve the calibration dashboard (page, /api/models, /api/alerts, /metrics) over the MLflow "
                    "store and prediction log named by the THERMOSTAT_* settings. Read-only.")
@click.option("--host", default=DEFAULT_HOST, metavar="HOST",
              help=f"address to listen on (default {DEFAULT_HOST}: this machine only; the page has no login, so "
                   "expose it only behind your own access control)")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, metavar="PORT",
              help=f"port (default {DEFAULT_PORT})")
@click.option("--refresh", type=_refresh_seconds, default="10", metavar="SECONDS",
              help=f"re-read the store at most this often (default 10; more than 0, at most {MAX_REFRESH_SECONDS:g})")
@click.option("--allow-host", type=host_name, multiple=True, metavar="NAME",
              help="also answer requests addressed to this host name (this machine's, or a reverse proxy's, as in "
                   "the browser's address bar); localhost, IP addresses and --host are always answered, any other "
                   "name gets 421 (DNS rebinding). Repeatable.")
def command(host: str, port: int, refresh: float, allow_host: tuple[str, ...]) -> int:
    """Serve the dashboard until interrupted; returns the exit status (2: nothing to read)."""
    stay_local()
    try:
        settings = ThermostatSettings()
    except ValueError as error:
        return fail(EXIT_BAD_INPUT, f"the THERMOSTAT_* settings are invalid: {error}")
    problem = missing_store(settings)
    if problem is not None:
        return fail(EXIT_BAD_INPUT, problem)
    import uvicorn

    app = create_app(settings, refresh_seconds=refresh, allowed_hosts=[*allow_host, host])
    if not is_loopback(host):
        print(f"{click.get_current_context().command_path}: warning: listening on {host}, beyond this machine; the "
              "dashboard has no login", file=sys.stderr)
    shown = f"[{host}]" if ":" in host else host
    print(f"Thermostat dashboard on http://{shown}:{port}/ (metrics on /metrics), reading MLflow "
          f"{mask_url(settings.resolved_tracking_uri())} and the prediction log "
          f"{mask_url(settings.resolved_prediction_log_url())}; Ctrl-C stops it", flush=True)
    # Every log line — uvicorn's, MLflow's, a failed read's traceback — goes through one handler that
    # takes the settings' credentials out (uvicorn configures none of its own: log_config=None).
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter((settings.resolved_tracking_uri(), settings.resolved_registry_uri(),
                                              settings.resolved_prediction_log_url())))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", log_config=None,
                http=RequestTimeoutProtocol, timeout_keep_alive=5)
    return EXIT_OK
