"""URLs as they may be shown or stored: credentials masked (one rule, one helper).

A tracking URI, an MLflow UI URL or a database URL may carry ``user:password@`` (or, in a web
URL, a token as the user). Logs, reports, Prefect artifacts, event payloads and flow parameters
are read by people and kept in databases, so every URL that goes there passes through
:func:`mask_url` first; the real value stays in the process (read from its environment) that
connects with it. Text that may quote a URL or its password — an exception's message, a
driver's error — passes through :func:`redact_credentials`.

Where the credentials end
-------------------------
Generated passwords hold the characters that end a URL's parts (``/``, ``?``, ``#``) or
separate its credentials (``@``, ``:``), often unencoded. ``urllib.parse.urlsplit`` ends the
host part at the first ``/``, ``?`` or ``#`` and so cannot find such a password. Here the
credentials run from after ``scheme://`` to the **last** ``@``, and the user name to the first
``:`` in them; a user name never holds ``/``, so an ``@`` after one is in the path, query or
fragment and the URL has no credentials.

This hides at least what the parser that connects reads as the password: SQLAlchemy's
``make_url`` reads the user name as ``[^:/]*`` and the password up to the *first* ``@`` after
it, which lies inside the span masked here. (A URL whose path, query or fragment holds an
``@`` after a ``host:port`` or a query without a path — ``https://h:8443/x?a=b@c``,
``https://h?a=b@c`` — is masked up to that ``@``: too much is hidden, never too little.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

__all__ = ["URL_MASK", "credentials_redacted", "encode_credentials", "holds_masked_credentials", "mask_url",
           "redact_credentials", "redact_exception"]

URL_MASK: Final = "***"
"""What a masked password (or token, or secret query value) reads as."""

# Query parameters that carry a secret (libpq's ``?password=``, API tokens): their values are masked too.
_SECRET_NAMES = r"(?:password|passwd|pwd|secret|token|access_token|api_key|apikey|sslpassword)"
_SECRET_QUERY = re.compile(rf"(?i)([?&;]{_SECRET_NAMES}=)([^&;#]*)")
_MASKED_QUERY = re.compile(rf"(?i)[?&;]{_SECRET_NAMES}={re.escape(URL_MASK)}(?=$|[&;#])")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
# A parser that cuts a URL inside a password quotes a piece of it ("Invalid port: 'Pr3f'",
# 'could not resolve host "w0rd@db"'): pieces between these characters are secrets too, from
# this length on (a shorter one would blank out ordinary words and tells little).
_PIECE_SEPARATORS = re.compile(r"[/?#@:]")
_MIN_PIECE = 4
_WEB_SCHEMES: Final = frozenset({"http", "https"})


@dataclass(frozen=True, slots=True)
class _Credentials:
    """A URL cut at its credentials: ``{head}{user}[:{password}]@{tail}``."""

    head: str
    user: str
    password: str | None
    tail: str
    web: bool

    @property
    def secret(self) -> str | None:
        """The password; in a web URL without one, the user part (a token). None: nothing secret."""
        if self.password is not None:
            return self.password
        return self.user if self.web and self.user else None


def _credentials(url: str) -> _Credentials | None:
    scheme, separator, rest = url.partition("://")
    if not separator or not _SCHEME.fullmatch(scheme):
        return None
    userinfo, at, tail = rest.rpartition("@")
    if not at:
        return None
    user, colon, password = userinfo.partition(":")
    web = scheme.lower() in _WEB_SCHEMES
    if "/" in user:
        return None  # the "@" is in the path, query or fragment
    return _Credentials(head=f"{scheme}://", user=user, password=password if colon else None, tail=tail, web=web)


def _mask_query(text: str) -> str:
    return _SECRET_QUERY.sub(rf"\g<1>{URL_MASK}", text)


def mask_url(url: str) -> str:
    """``url`` with its password (a web URL's token, secret query values) replaced by ``***``.

    The user name, host, path, query and fragment are kept, so the URL still says where it
    points. The password runs to the last ``@`` (see the module's notes), so one holding
    ``/``, ``?``, ``#``, ``@`` or ``:`` is masked whole. In a web URL a user part without a
    password is a token and is masked; in a database URL it is a user name and is kept. A URL
    without credentials is returned unchanged; masking is idempotent.

    Examples
    --------
    >>> mask_url("https://alice:s3cret@mlflow.internal/#/experiments/1")
    'https://alice:***@mlflow.internal/#/experiments/1'
    >>> mask_url("postgresql+psycopg://thermostat:p/w#1?@db.internal:5432/thermostat")
    'postgresql+psycopg://thermostat:***@db.internal:5432/thermostat'
    >>> mask_url("https://ghp_T0KEN@mlflow.internal")
    'https://***@mlflow.internal'
    >>> mask_url("postgresql://db.internal/mlflow?user=u&password=pw")
    'postgresql://db.internal/mlflow?user=u&password=***'
    >>> mask_url("sqlite:////srv/thermostat/mlflow.db")
    'sqlite:////srv/thermostat/mlflow.db'
    """
    found = _credentials(url)
    if found is None:
        return _mask_query(url)
    if found.password is not None:
        return f"{found.head}{found.user}:{URL_MASK}@{_mask_query(found.tail)}"
    user = URL_MASK if found.secret is not None else found.user
    return f"{found.head}{user}@{_mask_query(found.tail)}"


def encode_credentials(url: str) -> str:
    """``url`` with its user name and password percent-encoded, read as :func:`mask_url` reads them.

    A parser that ends the credentials at the first ``/``, ``?``, ``#`` or ``@`` (libpq, urllib)
    then connects with the password the masked URL hides — not with a piece of it, and without
    quoting the rest as a host name or port in its error messages. Escapes already in the URL
    are kept (a ``%`` that starts none is encoded itself).

    Examples
    --------
    >>> encode_credentials("postgresql://postgres:p/w@d@db.internal/postgres")
    'postgresql://postgres:p%2Fw%40d@db.internal/postgres'
    >>> encode_credentials("postgresql://u:p%2Fw@db/t"), encode_credentials("postgresql://db/t")
    ('postgresql://u:p%2Fw@db/t', 'postgresql://db/t')
    """
    found = _credentials(url)
    if found is None:
        return url
    user = quote(unquote(found.user), safe="")
    if found.password is None:
        return f"{found.head}{user}@{found.tail}"
    return f"{found.head}{user}:{quote(unquote(found.password), safe='')}@{found.tail}"


def holds_masked_credentials(url: str) -> bool:
    """Whether ``url`` is a masked form (:func:`mask_url`): its password, token or a secret
    query value reads ``***``, so it cannot be the URL to connect with.

    Examples
    --------
    >>> holds_masked_credentials("postgresql://u:***@db/t"), holds_masked_credentials("postgresql://u:pw@db/t")
    (True, False)
    """
    found = _credentials(url)
    if found is not None and found.secret == URL_MASK:
        return True
    return _MASKED_QUERY.search(url) is not None


def _secrets(url: str) -> list[str]:
    """Every form in which ``url``'s secrets may be quoted: as written, percent-decoded,
    percent-encoded, and the pieces of the decoded form that a parser cutting at ``/ ? # @ :``
    would quote (at least :data:`_MIN_PIECE` characters). Longest first."""
    found = _credentials(url)
    written = [match[2] for match in _SECRET_QUERY.finditer(url if found is None else found.tail)]
    if found is not None and found.secret is not None:
        written.append(found.secret)
    forms = {form for secret in written if secret and secret != URL_MASK
             for form in (secret, unquote(secret), quote(unquote(secret), safe=""))}
    pieces = {piece for form in forms for piece in _PIECE_SEPARATORS.split(form) if len(piece) >= _MIN_PIECE}
    return sorted(forms | pieces, key=len, reverse=True)


def redact_credentials(text: str, *urls: str) -> str:
    """``text`` with each of ``urls`` masked and their secrets taken out wherever they appear.

    For messages that may quote a URL or its password — a driver's error ("invalid
    percent-encoded token: ..."), an HTTP client's ("request to https://u:pw@host failed") —
    before they are printed, logged or shown.

    Examples
    --------
    >>> redact_credentials('bad token "pa ss" in postgresql://u:pa ss@db/t', "postgresql://u:pa ss@db/t")
    'bad token "***" in postgresql://u:***@db/t'
    >>> redact_credentials("Invalid port: 'Pr3f'", "http://u:Pr3f/w0rd@prefect:4200/api")  # a piece of it
    "Invalid port: '***'"
    """
    for url in urls:
        text = text.replace(url, mask_url(url))
        for secret in _secrets(url):
            text = text.replace(secret, URL_MASK)
    return text


# String attributes that exceptions of the standard library and the drivers print besides ``args``.
_MESSAGE_ATTRIBUTES: Final = ("message", "msg", "strerror", "filename", "filename2", "reason", "detail")


def redact_exception(error: BaseException, *urls: str) -> BaseException:
    """``error``, with the secrets of ``urls`` taken out of its message (:func:`redact_credentials`),
    in place, and out of every exception it was raised from or while handling (``__cause__``,
    ``__context__``): its type and traceback stay, so a caller re-raises it (``raise``) and
    whatever prints, logs or stores it — a traceback, a task's or a flow's failure message —
    finds no password. An argument that is not a string and prints a secret is replaced by its
    redacted text. Returns ``error``.

    Examples
    --------
    >>> url = "http://alice:p%2Fw@mlflow:5000"
    >>> try:
    ...     try:
    ...         raise ConnectionError(f"GET {url}/api failed")
    ...     except ConnectionError as cause:
    ...         raise RuntimeError("request failed", cause) from cause
    ... except RuntimeError as error:
    ...     print(redact_exception(error, url), "|", error.__cause__)
    ('request failed', 'GET http://alice:***@mlflow:5000/api failed') | GET http://alice:***@mlflow:5000/api failed
    """
    secrets = [url for url in urls if mask_url(url) != url]
    seen: set[int] = set()
    chain: list[BaseException | None] = [error]
    while chain:
        current = chain.pop()
        if current is not None and id(current) not in seen:
            seen.add(id(current))
            _redact_one(current, secrets)
            chain += [current.__cause__, current.__context__]
    return error


@contextmanager
def credentials_redacted(*urls: str) -> Iterator[None]:
    """Any error raised inside leaves with the secrets of ``urls`` taken out of its message and of
    the errors it came from (:func:`redact_exception`: in place, same type, same traceback).

    Examples
    --------
    >>> try:
    ...     with credentials_redacted("http://u:s3cret@mlflow:5000"):
    ...         raise ConnectionError("GET http://u:s3cret@mlflow:5000/api failed")
    ... except ConnectionError as error:
    ...     print(error)
    GET http://u:***@mlflow:5000/api failed
    """
    try:
        yield
    except BaseException as error:
        redact_exception(error, *urls)
        raise


def _redact_one(error: BaseException, urls: list[str]) -> None:
    def clean(value: object) -> object:
        try:
            text = value if isinstance(value, str) else str(value)
        except Exception:  # noqa: BLE001 - an argument that cannot print cannot leak either
            return value
        redacted = redact_credentials(text, *urls)
        return value if redacted == text else redacted

    try:
        error.args = tuple(clean(value) for value in error.args)
    except (TypeError, AttributeError):  # pragma: no cover - an exception type that refuses new args
        pass
    for name in _MESSAGE_ATTRIBUTES:
        value = getattr(error, name, None)
        if isinstance(value, str):
            try:
                setattr(error, name, clean(value))
            except (TypeError, AttributeError):  # a read-only property: its args carry the same text
                pass
    notes = getattr(error, "__notes__", None)
    if isinstance(notes, list):
        notes[:] = [clean(note) for note in notes]
