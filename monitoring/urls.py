"""URLs as they may be shown or stored: credentials masked (one rule, one helper).

A tracking URI, an MLflow UI URL or a database URL may carry ``user:password@``. Logs,
reports, Prefect artifacts, event payloads and flow parameters are read by people and kept in
databases, so every URL that goes there passes through :func:`mask_url` first; the real value
stays in the process (read from its environment) that connects with it.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote, urlsplit, urlunsplit

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["URL_MASK", "mask_url"]

URL_MASK: Final = "***"
"""What a masked password (or secret query value) reads as."""

# Query parameters that carry a secret (libpq's ``?password=``, API tokens): their values are masked too.
_SECRET_QUERY = re.compile(
    r"(?i)([?&;](?:password|passwd|pwd|secret|token|access_token|api_key|apikey|sslpassword)=)[^&;#]*"
)
_WEB_SCHEMES: Final = frozenset({"http", "https"})


def mask_url(url: str) -> str:
    """``url`` with its password (and secret query values) replaced by ``***``.

    The user name, host, path, query and fragment are kept, so the URL still says where it
    points. Web URLs are masked with :mod:`urllib.parse`; database URLs (any other scheme
    with credentials) as SQLAlchemy renders them with ``hide_password=True``, the form its
    own engines show. A URL without a password is returned unchanged; masking is idempotent.

    Examples
    --------
    >>> mask_url("https://alice:s3cret@mlflow.internal/#/experiments/1")
    'https://alice:***@mlflow.internal/#/experiments/1'
    >>> mask_url("postgresql+psycopg://thermostat:pw@db.internal:5432/thermostat")
    'postgresql+psycopg://thermostat:***@db.internal:5432/thermostat'
    >>> mask_url("postgresql://db.internal/mlflow?user=u&password=pw")
    'postgresql://db.internal/mlflow?user=u&password=***'
    >>> mask_url("sqlite:////srv/thermostat/mlflow.db")
    'sqlite:////srv/thermostat/mlflow.db'
    """
    masked = _SECRET_QUERY.sub(rf"\g<1>{URL_MASK}", url)
    try:
        parts = urlsplit(masked)
    except ValueError:  # not a URL urllib can read (e.g. an unbalanced IPv6 bracket): show nothing of it
        return URL_MASK
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return masked
    user, _, password = userinfo.partition(":")
    if parts.scheme.lower() not in _WEB_SCHEMES:
        try:
            database_url = make_url(masked)
        except (ArgumentError, ValueError):  # not one SQLAlchemy reads (e.g. a multi-host libpq URL)
            database_url = None
        # SQLAlchemy reads a password up to its first "@"; with a raw "@" in it, urllib's reading is the safe one.
        if database_url is not None and database_url.password == unquote(password):
            return database_url.render_as_string(hide_password=True)
    # Web URLs, and any other URL SQLAlchemy does not read as urllib does.
    return urlunsplit(parts._replace(netloc=f"{user}:{URL_MASK}@{hostport}"))
