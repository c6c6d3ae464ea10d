"""What the servers of ``flows`` (the dashboard, the ingestion service) share at their front door.

* :class:`HostAllowList` — answers only requests addressed to the server (the Host header:
  ``localhost``, an IP address, or a name given with ``--allow-host``; anything else is 421), so
  that a page on another site cannot reach it through DNS rebinding;
* :class:`RequestTimeoutProtocol` — uvicorn's HTTP/1.1 protocol with a bound
  (:data:`REQUEST_TIMEOUT_SECONDS`) on the time a client takes to send a whole request;
* :class:`RedactingFormatter` — log lines with the credentials of the settings taken out;
* :func:`host_name`, :func:`is_loopback` — the ``--allow-host`` and ``--host`` options.

Starlette, uvicorn and the standard library only: importing it loads neither MLflow nor Prefect.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Final

import h11
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from monitoring import redact_credentials

__all__ = ["REQUEST_TIMEOUT_SECONDS", "HostAllowList", "RedactingFormatter", "RequestTimeoutProtocol",
           "host_allowed", "host_name", "is_loopback"]

REQUEST_TIMEOUT_SECONDS: Final = 10.0
"""How long a client may take to send a whole request (headers and body) once connected or answered."""
_HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")


def _host_of(header: str) -> str:
    """The host of a Host header (``name``, ``name:port``, ``[v6]:port``): lower-case, no port, brackets or final dot."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    name, colon, port = header.rpartition(":")
    return (name if colon and port.isdigit() else header).rstrip(".")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_allowed(header: str, names: Iterable[str] = ()) -> bool:
    """Whether a request with this Host header is for this server: ``localhost``, any IP
    address (a page can only name one by visiting it: DNS rebinding needs a name), or one of
    ``names``; a request without a Host header (HTTP/1.0) too.

    Examples
    --------
    >>> host_allowed("127.0.0.1:8765"), host_allowed("[::1]:8765"), host_allowed("localhost")
    (True, True, True)
    >>> host_allowed("evil.example"), host_allowed("dash.internal:443", ["dash.internal"])
    (False, True)
    """
    host = _host_of(header)
    return not host or host == "localhost" or _is_ip(host) or host in {name.lower().rstrip(".") for name in names}


class HostAllowList:
    """ASGI middleware: a request whose Host header is not allowed (:func:`host_allowed`) is
    answered ``421 Misdirected Request`` saying how to allow a name; others go on to ``app``.
    ``server`` names the server in that answer (``dashboard``, ``ingestion service``)."""

    def __init__(self, app: ASGIApp, names: Iterable[str] = (), server: str = "dashboard") -> None:
        self.app = app
        self.names = frozenset(name.lower().rstrip(".") for name in names)
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = Headers(scope=scope).get("host", "")
            if not host_allowed(header, self.names):
                shown = ascii(_host_of(header))[1:-1][:100]  # invisible characters spelled out
                await PlainTextResponse(
                    f"421 Misdirected Request: this {self.server} answers to localhost, IP addresses and the names it "
                    f"was given, not to Host {shown!r} (a page of another site may be reaching it through DNS "
                    f"rebinding). If {shown} is a name of this machine, start the {self.server} with --allow-host "
                    "NAME.", status_code=421)(scope, receive, send)
                return
        await self.app(scope, receive, send)


_AWAITING_REQUEST = (h11.IDLE, h11.SEND_BODY)


class RequestTimeoutProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a bound on how long a client takes to send a whole request.

    uvicorn times out an idle keep-alive connection, but not one that sent part of a request
    (its keep-alive timer stops at the first byte): a client that sends half a request and
    stalls would hold its connection, and many such clients the server's file descriptors. Here
    a timer starts when the connection opens and after each answer, stops once the request is
    complete, and closes the connection if it runs out first.
    """

    _request_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_request()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state not in _AWAITING_REQUEST:
            self._stop_request_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state in _AWAITING_REQUEST:
            self._await_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_request_timer()
        super().connection_lost(exc)

    def _await_request(self) -> None:
        self._stop_request_timer()
        self._request_timer = self.loop.call_later(REQUEST_TIMEOUT_SECONDS, self._request_timed_out)

    def _stop_request_timer(self) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _request_timed_out(self) -> None:
        self._request_timer = None
        if self.conn.their_state in _AWAITING_REQUEST and not self.transport.is_closing():
            self.transport.close()


class RedactingFormatter(logging.Formatter):
    """Log lines (and tracebacks) with the credentials of the settings' URLs (``hidden``) and the
    ``secrets`` themselves (bearer tokens) taken out."""

    def __init__(self, hidden: Sequence[str], secrets: Sequence[str] = ()) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._hidden = tuple(hidden)
        self._secrets = tuple(secret for secret in secrets if secret)

    def format(self, record: logging.LogRecord) -> str:
        text = redact_credentials(super().format(record), *self._hidden)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def host_name(text: str) -> str:
    """``--allow-host``'s argument type: a host name, lower-case, no final dot."""
    name = text.strip().lower().rstrip(".")
    if not _HOST_NAME.fullmatch(name) or len(name) > 253:
        raise ValueError(f"{text!r} is not a host name (letters, digits, dashes and dots, e.g. dashboard.internal)")
    return name


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a ``--host`` value) is this machine only: ``localhost`` or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
