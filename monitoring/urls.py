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
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

__all__ = ["URL_MASK", "encode_credentials", "holds_masked_credentials", "mask_url", "redact_credentials"]

URL_MASK: Final = "***"
"""What a masked password (or token, or secret query value) reads as."""

# Query parameters that carry a secret (libpq's ``?password=``, API tokens): their values are masked too.
_SECRET_NAMES = r"(?:password|passwd|pwd|secret|token|access_token|api_key|apikey|sslpassword)"
_SECRET_QUERY = re.compile(rf"(?i)([?&;]{_SECRET_NAMES}=)([^&;#]*)")
_MASKED_QUERY = re.compile(rf"(?i)[?&;]{_SECRET_NAMES}={re.escape(URL_MASK)}(?=$|[&;#])")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
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
    """Every form in which ``url``'s secrets may be quoted: as written, percent-decoded, percent-encoded."""
    found = _credentials(url)
    written = [match[2] for match in _SECRET_QUERY.finditer(url if found is None else found.tail)]
    if found is not None and found.secret is not None:
        written.append(found.secret)
    forms = {form for secret in written if secret and secret != URL_MASK
             for form in (secret, unquote(secret), quote(unquote(secret), safe=""))}
    return sorted(forms, key=len, reverse=True)


def redact_credentials(text: str, *urls: str) -> str:
    """``text`` with each of ``urls`` masked and their secrets taken out wherever they appear.

    For messages that may quote a URL or its password — a driver's error ("invalid
    percent-encoded token: ..."), an HTTP client's ("request to https://u:pw@host failed") —
    before they are printed, logged or shown.

    Examples
    --------
    >>> redact_credentials('bad token "pa ss" in postgresql://u:pa ss@db/t', "postgresql://u:pa ss@db/t")
    'bad token "***" in postgresql://u:***@db/t'
    """
    for url in urls:
        text = text.replace(url, mask_url(url))
        for secret in _secrets(url):
            text = text.replace(secret, URL_MASK)
    return text
