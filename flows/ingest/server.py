"""``thermostat ingest``: served predictions and late labels over HTTP, into the prediction log.

A Starlette app run by uvicorn (as the dashboard), writing to the prediction log named by
``THERMOSTAT_PREDICTION_LOG_URL``:

=============================== =====================================================================
``POST /v1/predictions``        JSON rows of served predictions (:mod:`flows.ingest.payloads`)
``POST /v1/labels``             late labels: JSON, or CSV (``request_id`` or ``id``, ``label``)
``POST /v1/cloudevents``        KServe's inference logger (:mod:`flows.ingest.kserve`)
``GET /metrics``                Prometheus text format (:mod:`flows.ingest.metrics`)
``GET /healthz``                ``ok`` when the log can be reached
``GET /openapi.json``           the OpenAPI schema of the above
=============================== =====================================================================

Every answer to a POST reports every row: the good rows are written, the bad ones returned with
their position and reason (``?atomic=true``: all or nothing, 422 when a row is refused). Ingest
is idempotent by request id: a prediction sent again is ``unchanged``, a label sent again too.
Prediction rows go through one writer (:class:`monitoring.IngestQueue`): requests that arrive
while a batch is written are written together in the next (one ``COPY`` on PostgreSQL), and a
request whose rows would make more than ``THERMOSTAT_INGEST_MAX_PENDING_ROWS`` wait is answered
429 with ``Retry-After`` (seconds, from the writer's measured rate), nothing queued. A request
is answered once its rows are committed (or after ``THERMOSTAT_INGEST_WRITE_TIMEOUT_SECONDS``:
503, resend). Bodies beyond ``THERMOSTAT_INGEST_MAX_BODY_BYTES`` and requests of more than
``THERMOSTAT_INGEST_MAX_ROWS`` rows get 413.

Access: with ``THERMOSTAT_INGEST_TOKENS`` set, every POST needs ``Authorization: Bearer TOKEN``
(one of them; 401 otherwise); without tokens the service listens on loopback only. The tokens
never appear in an answer, a log line, ``/metrics`` or the settings' stored form. Requests for
another host name than those given are answered 421 (:class:`flows.web.HostAllowList`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

import click
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from flows.exit_status import EXIT_BAD_INPUT, EXIT_OK, fail
from flows.ingest.kserve import EventError, rows_from_cloudevent
from flows.ingest.metrics import CONTENT_TYPE, IngestMetrics
from flows.ingest.payloads import (
    BodyError,
    ErrorAnswer,
    Ignored,
    IngestAnswer,
    LabelAnswer,
    labels_from_csv,
    labels_from_json,
    openapi_schema,
    predictions_from_json,
)
from flows.settings import ThermostatSettings
from flows.web import HostAllowList, RedactingFormatter, RequestTimeoutProtocol, host_name, is_loopback
from monitoring import IngestQueue, IngestReport, PredictionBatch, PredictionLog, mask_url, redact_credentials

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "command", "create_app"]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8766
# A body larger than this is parsed off the event loop (a thread), so small requests are answered meanwhile.
_INLINE_BODY_BYTES: Final = 256 * 1024
_LABEL_WRITERS: Final = 2
_logger = logging.getLogger(__name__)


class _Refused(Exception):
    """An answer other than 200, raised from the depths of a route."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers or {}


class _Service:
    """What the routes share: the limits, the tokens, the log, its writer, the metrics."""

    def __init__(self, settings: ThermostatSettings, log: PredictionLog) -> None:
        self.settings = settings
        self.log = log
        self.tokens = tuple(token.get_secret_value().encode() for token in settings.ingest_tokens)
        self.queue = IngestQueue(log, max_pending_rows=settings.ingest_max_pending_rows)
        self.metrics = IngestMetrics(lambda: self.queue.stats, settings.ingest_max_pending_rows)
        self.label_slots = threading.BoundedSemaphore(_LABEL_WRITERS)
        self.hidden = (settings.resolved_prediction_log_url(),)

    def redacted(self, text: str) -> str:
        text = redact_credentials(text, *self.hidden)
        for token in self.tokens:
            text = text.replace(token.decode(), "***")
        return text

    def check_token(self, request: Request) -> None:
        if not self.tokens:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        candidate = given.strip().encode("utf-8", "replace")
        # Every token compared, in constant time each: the answer's timing tells nothing of them.
        matches = [hmac.compare_digest(candidate, token) for token in self.tokens]
        if scheme.lower() != "bearer" or not any(matches):
            raise _Refused(401, "a bearer token is required: Authorization: Bearer TOKEN (one of "
                                "THERMOSTAT_INGEST_TOKENS)", {"WWW-Authenticate": 'Bearer realm="thermostat-ingest"'})

    async def body(self, request: Request) -> bytes:
        limit = self.settings.ingest_max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _Refused(413, f"the body has {int(declared):,} bytes; at most {limit:,} (THERMOSTAT_INGEST_MAX_BODY_"
                                "BYTES): split the batch")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _Refused(413, f"the body has more than {limit:,} bytes (THERMOSTAT_INGEST_MAX_BODY_BYTES): split "
                                    "the batch")
            chunks.append(chunk)
        return b"".join(chunks)

    async def write(self, batch: PredictionBatch, atomic: bool, route: str) -> Response:
        """Queue ``batch`` for the writer and answer with its report once written."""
        future = self.queue.submit(batch, atomic=atomic)
        if future is None:
            self.metrics.throttled.labels(route).inc()
            raise _Refused(429, f"the writer is behind ({self.queue.stats.pending_rows:,} rows waiting, at most "
                                f"{self.queue.max_pending_rows:,}); nothing was queued: send again later",
                           {"Retry-After": str(self.queue.retry_after())})
        waiting = asyncio.wrap_future(future)
        done, _ = await asyncio.wait({waiting}, timeout=self.settings.ingest_write_timeout_seconds)
        if not done:
            raise _Refused(503, f"the rows were not written within {self.settings.ingest_write_timeout_seconds:g} s "
                                "(THERMOSTAT_INGEST_WRITE_TIMEOUT_SECONDS); they may still be: resend them (a prediction "
                                "already logged is answered unchanged)", {"Retry-After": "5"})
        try:
            report: IngestReport = waiting.result()
        except Exception as error:  # the database refused the batch whole, or is unreachable
            _logger.warning("writing predictions failed: %s", self.redacted(f"{type(error).__name__}: {error}"))
            raise _Refused(503, "the prediction log could not be written: " + self.redacted(
                " ".join(f"{type(error).__name__}: {error}".split()))[:500] + "; resend the rows", {"Retry-After": "5"}
                           ) from error
        for outcome, count in (("written", report.written), ("unchanged", report.unchanged),
                               ("refused", len(report.refused))):
            self.metrics.rows.labels("predictions", outcome).inc(count)
        return _json(IngestAnswer.of(report).model_dump(), 422 if atomic and report.refused else 200)


def _json(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _atomic(request: Request) -> bool:
    value = request.query_params.get("atomic", "false").lower()
    if value not in ("true", "false", "1", "0"):
        raise _Refused(400, f"atomic must be true or false; got {value[:20]!r}")
    return value in ("true", "1")


def _media(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def _parsed(body: bytes, parse: Callable[..., Any], *args: Any) -> Any:
    """``parse(body, *args)``, off the event loop when the body is large."""
    if len(body) <= _INLINE_BODY_BYTES:
        return parse(body, *args)
    return await run_in_threadpool(parse, body, *args)


def _endpoint(service: Callable[[], _Service], route: str,
              handler: Callable[[_Service, Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` with the bearer check (POST routes), the refusals as answers and the metrics."""

    async def answer(request: Request) -> Response:
        started = time.perf_counter()
        try:
            this = service()
        except _Refused as refused:
            return _json(ErrorAnswer(error=str(refused)).model_dump(), refused.status, refused.headers)
        try:
            if request.method == "POST":
                this.check_token(request)
            response = await handler(this, request)
        except _Refused as refused:
            response = _json(ErrorAnswer(error=str(refused)).model_dump(), refused.status, refused.headers)
        except (BodyError, EventError) as error:
            response = _json(ErrorAnswer(error=str(error)).model_dump(), getattr(error, "status", 400))
        this.metrics.requests.labels(route, str(response.status_code)).inc()
        this.metrics.seconds.labels(route).observe(time.perf_counter() - started)
        return response

    return answer


# --------------------------------------------------------------------------- the routes


async def _predictions(this: _Service, request: Request) -> Response:
    if _media(request) != "application/json":
        raise _Refused(415, f"predictions are read as application/json; got {_media(request)[:60]!r}")
    atomic = _atomic(request)
    body = await this.body(request)
    rows, defaults = await _parsed(body, predictions_from_json, this.settings.ingest_max_rows)
    batch = await _parsed(body, lambda _: PredictionBatch.from_rows(rows, defaults=defaults))
    return await this.write(batch, atomic, "predictions")


async def _labels(this: _Service, request: Request) -> Response:
    media = _media(request)
    readers = {"application/json": labels_from_json, "text/csv": labels_from_csv}
    if media not in readers:
        raise _Refused(415, f"labels are read as application/json or text/csv; got {media[:60]!r}")
    atomic = _atomic(request)
    ids, values, refused, positions = await _parsed(await this.body(request), readers[media],
                                                    this.settings.ingest_max_rows)
    if atomic and refused:
        first = refused[0]
        raise _Refused(422, f"row {first.index}: {first.reason}; nothing of the labels was written (atomic)")
    if not this.label_slots.acquire(blocking=False):
        this.metrics.throttled.labels("labels").inc()
        raise _Refused(429, f"{_LABEL_WRITERS} label requests are being written; send again later",
                       {"Retry-After": "1"})
    try:
        report = await run_in_threadpool(this.log.attach_labels, ids, values, strict=atomic)
    except ValueError as error:  # atomic, and a row was refused
        raise _Refused(422, f"{error} (atomic)") from error
    except Exception as error:
        _logger.warning("attaching labels failed: %s", this.redacted(f"{type(error).__name__}: {error}"))
        raise _Refused(503, "the labels could not be written: " + this.redacted(
            " ".join(f"{type(error).__name__}: {error}".split()))[:500] + "; resend them (idempotent)",
                       {"Retry-After": "5"}) from error
    finally:
        this.label_slots.release()
    answer = LabelAnswer.of(report, refused, positions)
    for outcome, count in (("attached", answer.attached), ("unchanged", answer.unchanged),
                           ("conflict", len(answer.conflicts)), ("unknown", len(answer.unknown)),
                           ("refused", len(answer.refused))):
        this.metrics.rows.labels("labels", outcome).inc(count)
    return _json(answer.model_dump())


async def _cloudevents(this: _Service, request: Request) -> Response:
    atomic = _atomic(request)
    event = rows_from_cloudevent(request.headers, await this.body(request), request.query_params)
    if event.ignored is not None:
        return _json(Ignored(ignored=event.ignored).model_dump())
    return await this.write(PredictionBatch.from_rows(event.rows, defaults=event.defaults), atomic, "cloudevents")


async def _metrics(this: _Service, _: Request) -> Response:
    return Response(this.metrics.exposition(), media_type=CONTENT_TYPE)


async def _health(this: _Service, _: Request) -> Response:
    try:
        await run_in_threadpool(this.log.ping)
    except Exception as error:  # noqa: BLE001 - said in the answer
        raise _Refused(503, "the prediction log cannot be reached: " + this.redacted(
            " ".join(f"{type(error).__name__}: {error}".split()))[:300]) from error
    return PlainTextResponse("ok")


_ROUTES: Final = (("/v1/predictions", "predictions", _predictions, ["POST"]),
                  ("/v1/labels", "labels", _labels, ["POST"]),
                  ("/v1/cloudevents", "cloudevents", _cloudevents, ["POST"]),
                  ("/metrics", "metrics", _metrics, ["GET"]), ("/healthz", "healthz", _health, ["GET"]))


def create_app(settings: ThermostatSettings, *, allowed_hosts: Sequence[str] = (),
               log: PredictionLog | None = None) -> Starlette:
    """The ingestion service's ASGI app over the prediction log of ``settings`` (or ``log``), answering
    requests for ``localhost``, IP addresses and ``allowed_hosts``. Its writer starts with the app
    (the lifespan) and writes what is queued when it stops."""
    log = log if log is not None else PredictionLog(settings.resolved_prediction_log_url())
    service: _Service | None = None

    @asynccontextmanager
    async def lifespan(_: Starlette) -> Any:
        nonlocal service
        service = _Service(settings, log)
        try:
            yield
        finally:
            await run_in_threadpool(service.queue.close)
            log.dispose()

    def running() -> _Service:
        if service is None:
            raise _Refused(503, "the service is starting", {"Retry-After": "1"})
        return service

    schema = openapi_schema(settings.ingest_max_rows)

    async def openapi(_: Request) -> Response:
        return JSONResponse(schema)

    routes = [Route(path, _endpoint(running, name, handler), methods=methods)
              for path, name, handler, methods in _ROUTES]
    return Starlette(
        routes=[*routes, Route("/openapi.json", openapi)],
        middleware=[Middleware(HostAllowList, names=tuple(allowed_hosts), server="ingestion service")],
        lifespan=lifespan,
    )


@click.command(
    help="Serve the ingestion API: served predictions (JSON rows, KServe's CloudEvents) and late labels (JSON, CSV) "
         "into the prediction log (THERMOSTAT_PREDICTION_LOG_URL). A bad row is refused alone; idempotent by request "
         "id; 429 with Retry-After when the writer is behind.",
    epilog="routes: POST /v1/predictions, /v1/labels, /v1/cloudevents; GET /metrics, /healthz, /openapi.json.\n\n"
           "settings: THERMOSTAT_INGEST_TOKENS (bearer tokens; without them, loopback only), "
           "THERMOSTAT_INGEST_MAX_BODY_BYTES, THERMOSTAT_INGEST_MAX_ROWS, THERMOSTAT_INGEST_MAX_PENDING_ROWS, "
           "THERMOSTAT_INGEST_WRITE_TIMEOUT_SECONDS.\n\nexit status: 0 stopped; 2 bad input (an option, the "
           "settings, no token on a non-loopback address).",
)
@click.option("--host", default=DEFAULT_HOST, metavar="HOST",
              help=f"address to listen on (default {DEFAULT_HOST}; another address needs THERMOSTAT_INGEST_TOKENS)")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, metavar="PORT",
              help=f"port (default {DEFAULT_PORT})")
@click.option("--allow-host", type=host_name, multiple=True, metavar="NAME",
              help="also answer requests addressed to this host name (a reverse proxy's, a Kubernetes service's); "
                   "localhost, IP addresses and --host are always answered. Repeatable.")
def command(host: str, port: int, allow_host: tuple[str, ...]) -> int:
    """Serve the ingestion service until interrupted; the exit status (2: bad options or settings)."""
    try:
        settings = ThermostatSettings()
    except ValueError as error:
        return fail(EXIT_BAD_INPUT, f"the THERMOSTAT_* settings are invalid: {error}")
    if not settings.ingest_tokens and not is_loopback(host):
        return fail(EXIT_BAD_INPUT, f"--host {host} is beyond this machine and no bearer token is set: set "
                                    "THERMOSTAT_INGEST_TOKENS (e.g. `openssl rand -hex 32`), or listen on 127.0.0.1")
    if settings.prediction_log_url is None:
        settings.state_dir.mkdir(parents=True, exist_ok=True)
    import uvicorn

    tokens = [token.get_secret_value() for token in settings.ingest_tokens]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter((settings.resolved_prediction_log_url(),), tokens))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    shown = f"[{host}]" if ":" in host else host
    print(f"Thermostat ingestion service on http://{shown}:{port}/ (OpenAPI on /openapi.json), writing to "
          f"{mask_url(settings.resolved_prediction_log_url())}; "
          f"{'bearer tokens required' if tokens else 'no token: loopback only'}; Ctrl-C stops it", flush=True)
    app = create_app(settings, allowed_hosts=[*allow_host, host])
    uvicorn.run(app, host=host, port=port, log_level="warning", log_config=None, access_log=False,
                http=RequestTimeoutProtocol, timeout_keep_alive=5)
    return EXIT_OK
