"""``thermostat setup-db``: the PostgreSQL roles and databases a deployment needs, created idempotently.

A production deployment uses two PostgreSQL databases, each owned by its own login role:
``mlflow`` (MLflow's backend store: runs, the model registry) and ``thermostat`` (the
prediction log and the per-model registration lock). :func:`setup_databases` brings a server
to that state through an administrator's connection and changes only what differs:

- a missing role is created with ``LOGIN`` and its password; an existing one gets ``LOGIN``
  if it lacks it, and its password if the stored one differs (compared with the stored SCRAM
  or MD5 verifier, which needs a superuser: through one, every step of a re-run is
  ``unchanged``; through another administrator the password is set again on every run and the
  role's step is ``updated``, saying it could not compare);
- a missing database is created owned by its role, and the default ``CONNECT``/``TEMP`` of
  ``PUBLIC`` on it revoked; an existing database owned by another role is refused (changing an
  owner is the operator's decision).

It never touches the server's own names or a privileged role: the names ``postgres``,
``template0``, ``template1`` and ``pg_*`` are refused as bad input, and an existing role that is
a superuser, has ``CREATEROLE``, ``CREATEDB``, ``REPLICATION`` or ``BYPASSRLS``, is a member —
directly or through other roles (``pg_has_role(..., 'MEMBER')``: it can ``SET ROLE``) — of a
role with one of those, or of ``pg_execute_server_program``, ``pg_read_server_files``,
``pg_write_server_files``, ``pg_read_all_data`` or ``pg_write_all_data``, or is the
administrator's own role is refused (exit 3) before anything is changed — giving it a password
and ``LOGIN`` would hand out the right to administer the server (or to run programs on its host).

The administrator is a superuser, or a role with ``CREATEROLE`` and ``CREATEDB``. ``CREATE
DATABASE ... OWNER role`` needs the latter to be a member of the role (PostgreSQL 15 and
earlier) or able to ``SET ROLE`` to it (16 and later): it is granted membership
(``GRANT role TO current_user``) for that statement and the ``REVOKE`` that follows, then the
grant is revoked. On PostgreSQL 16 and later that ``GRANT`` needs ``ADMIN OPTION`` on the
role, which a ``CREATEROLE`` administrator holds on the roles it created itself.

Passwords reach the server only as verifiers computed by libpq (never as plain text in SQL,
so a statement log cannot show them), and every URL printed has its password masked
(:func:`monitoring.mask_url`). The administrator's password is read up to the URL's last
``@`` (so it may hold ``/``, ``?``, ``#``, ``@`` or ``:`` unencoded) and is taken out of every
message printed, libpq's and the server's included (:func:`monitoring.redact_credentials`). Exit status as the command line's contract (:mod:`flows.cli.main`):
0 the roles and databases are in place (whether or not anything changed; the report says
which); 2 bad input (an option, a missing password, a reserved name, the driver not
installed), the message on stderr naming the flag; 3 the database failed (unreachable, a
permission refused, a database owned by another role, an existing privileged role).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

import click
from pydantic import BaseModel, ConfigDict, computed_field

from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_OK, fail
from flows.json_keys import JSON_KEYS
from monitoring import encode_credentials, mask_url, redact_credentials

if TYPE_CHECKING:
    import psycopg

__all__ = ["DatabaseSetup", "DatabaseSpec", "SetupStep", "command", "setup_databases"]

# A role or database name this command creates: a plain, unquoted PostgreSQL identifier.
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# The server's own databases and roles (pg_* is reserved for its predefined roles).
_RESERVED = ("postgres", "template0", "template1")
# Role attributes that make a role an administrator: setup-db never sets such a role's password,
# nor that of a role that can SET ROLE to one (a member of it, directly or not).
_PRIVILEGES = ("SUPERUSER", "CREATEROLE", "CREATEDB", "REPLICATION", "BYPASSRLS")
# Predefined roles whose members read or write any file or run any program on the database host,
# or read or write every table: administrators too.
_SERVER_ROLES = ("pg_execute_server_program", "pg_read_server_files", "pg_write_server_files", "pg_read_all_data",
                 "pg_write_all_data")
_UNCOMPARED = "password set again (cannot be compared without a superuser: only one can read pg_authid)"
_DRIVER_URL = "postgresql+psycopg://{role}:{password}@{host}/{database}"


class SetupError(RuntimeError):
    """The server refused a step, or is in a state this command will not change."""


class PrivilegedRoleError(SetupError):
    """A role to set up exists with administrative attributes, or is the administrator's own."""

    def __init__(self, role: str, message: str) -> None:
        super().__init__(message)
        self.role = role


@dataclass(frozen=True, slots=True)
class DatabaseSpec:
    """One database and the login role that owns it (the same name for both).

    Parameters
    ----------
    name : a plain lower-case identifier (``mlflow``, ``thermostat``); not one of the server's
        own names (``postgres``, ``template0``, ``template1``, ``pg_*``).
    password : the role's password.
    purpose : what the database holds, in the report.
    url_variable : the environment variable its URL goes in (``MLFLOW_BACKEND_STORE_URI``,
        ``THERMOSTAT_PREDICTION_LOG_URL``), in the report.
    """

    name: str
    password: str
    purpose: str
    url_variable: str

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"database name {self.name!r} must be a lower-case identifier "
                             "([a-z_][a-z0-9_]*, at most 63 characters)")
        if self.name in _RESERVED or self.name.startswith("pg_"):
            raise ValueError(f"database name {self.name!r} is reserved (the server's own databases and roles: "
                             f"{', '.join(_RESERVED)}, pg_*); choose another name, e.g. the default")
        if not self.password:
            raise ValueError(f"the password of role {self.name!r} is empty; choose a non-empty password")


class SetupStep(BaseModel):
    """What one step found and did: ``subject`` (``role mlflow``), ``action``, ``detail``."""

    model_config = ConfigDict(frozen=True)

    subject: str
    action: Literal["created", "updated", "unchanged"]
    detail: str


class DatabaseSetup(BaseModel):
    """The result of :func:`setup_databases` (``--json``: its ``model_dump``): its steps, each
    database's URL with the password masked, keyed by where it goes (``url_variable``), and
    whether anything changed."""

    model_config = ConfigDict(frozen=True)

    steps: tuple[SetupStep, ...]
    urls: dict[str, str]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def changed(self) -> bool:
        """Whether any step created or updated something."""
        return any(step.action != "unchanged" for step in self.steps)


def setup_databases(admin_url: str, databases: Sequence[DatabaseSpec]) -> DatabaseSetup:
    """Create (or bring up to date) each database and its owning login role.

    What is created, compared and refused, and what the administrator needs, is in the module
    docstring.

    Parameters
    ----------
    admin_url : str
        libpq URL of an administrator's connection, e.g.
        ``postgresql://postgres@db.internal:5432/postgres``; a SQLAlchemy ``postgresql+psycopg://``
        URL is accepted too. The URLs reported use its host and port.
    databases : sequence of DatabaseSpec
        What to create.

    Returns
    -------
    DatabaseSetup
        The steps and the masked URLs.

    Raises
    ------
    ValueError
        If ``admin_url`` is not a PostgreSQL URL.
    SetupError
        If the server cannot be reached or refuses a step, a database is owned by another role,
        or a role is privileged (:class:`PrivilegedRoleError`, checked for every role before
        anything is changed). No message holds the administrator's password.
    ImportError
        If the PostgreSQL driver ``psycopg`` is not installed.
    """
    import psycopg

    steps: list[SetupStep] = []
    urls: dict[str, str] = {}
    with _connect(admin_url) as connection:
        shown = mask_url(admin_url)
        host = _host_for_urls(connection)
        try:
            _refuse_privileged_roles(connection, databases)
        except psycopg.Error as exc:
            raise SetupError(f"on {shown}, reading the existing roles failed: {_said(exc, admin_url)}") from None
        for spec in databases:
            try:
                steps.append(_ensure_role(connection, spec))
                steps.append(_ensure_database(connection, spec))
            except psycopg.Error as exc:
                raise SetupError(f"on {shown}, setting up {spec.purpose} ({spec.name!r}) failed: "
                                 f"{_said(exc, admin_url)}") from None
            urls[spec.url_variable] = mask_url(_DRIVER_URL.format(
                role=spec.name, password=quote(spec.password, safe=""), host=host, database=spec.name))
    return DatabaseSetup(steps=tuple(steps), urls=urls)


def _conninfo(admin_url: str) -> str:
    # The password read up to the last "@", as the masked URL shows it, and percent-encoded: libpq
    # would end it at its first "/" or "@" and quote the rest back as a host name or a port.
    return encode_credentials(_libpq_url(admin_url))


def _said(exc: Exception, admin_url: str) -> str:
    """A driver's or the server's message, the administrator's password taken out."""
    return redact_credentials(str(exc), admin_url, _conninfo(admin_url)).rstrip()


def _connect(admin_url: str) -> psycopg.Connection[Any]:
    """The administrator's connection (autocommit); ValueError for a URL libpq cannot parse,
    :class:`SetupError` for a server that cannot be reached."""
    import psycopg

    try:
        return psycopg.connect(_conninfo(admin_url), autocommit=True, connect_timeout=10)
    except psycopg.ProgrammingError as exc:  # libpq could not parse it
        raise ValueError(f"--admin-url {mask_url(admin_url)} is not a PostgreSQL URL libpq accepts: "
                         f"{_said(exc, admin_url)}") from None
    except psycopg.Error as exc:
        raise SetupError(f"could not connect to {mask_url(admin_url)}: {_said(exc, admin_url)}") from None


def _libpq_url(url: str) -> str:
    """``url`` as libpq takes it: SQLAlchemy's ``postgresql+driver://`` loses its driver."""
    scheme, separator, rest = url.partition("://")
    base = scheme.split("+", 1)[0].lower()
    if not separator or base not in ("postgresql", "postgres"):
        raise ValueError(f"--admin-url {mask_url(url)} must be a PostgreSQL URL, "
                         "e.g. postgresql://postgres@db.internal:5432/postgres")
    return f"{base}://{rest}"


def _host_for_urls(connection: psycopg.Connection[Any]) -> str:
    """``host:port`` the deployment's URLs name: the admin connection's, or localhost over a socket."""
    host = connection.info.host
    shown = "localhost" if not host or host.startswith("/") else (f"[{host}]" if ":" in host else host)
    return f"{shown}:{connection.info.port}"


def _refuse_privileged_roles(connection: psycopg.Connection[Any], databases: Sequence[DatabaseSpec]) -> None:
    """:class:`PrivilegedRoleError` if a role to set up exists as an administrator, is a member
    (directly or not: ``pg_has_role(..., 'MEMBER')``, the right to ``SET ROLE``) of one or of a
    predefined role that reaches the server's files or every table, or is ``current_user``."""
    # Every role each existing role to set up is a member of, itself included.
    rows = connection.execute(
        "SELECT r.rolname, r.rolname = current_user, g.rolname, g.rolsuper, g.rolcreaterole, g.rolcreatedb, "
        "g.rolreplication, g.rolbypassrls FROM pg_roles r JOIN pg_roles g ON pg_has_role(r.oid, g.oid, 'MEMBER') "
        "WHERE r.rolname = ANY(%s) ORDER BY r.rolname, g.rolname = r.rolname DESC, g.rolname",
        [[spec.name for spec in databases]]).fetchall()
    reasons: dict[str, list[str]] = {}
    for name, is_admin, group, *attributes in rows:
        found = reasons.setdefault(name, ["is the administrator's own role (the --admin-url user)"] if is_admin else [])
        held = [privilege for privilege, has in zip(_PRIVILEGES, attributes, strict=True) if has]
        if group == name and held:
            found.append(f"exists with {', '.join(held)}")
        elif group != name and (held or group in _SERVER_ROLES):
            found.append(f"is a member of {group!r}" + (f" ({', '.join(held)})" if held else ""))
    purposes = {spec.name: spec.purpose for spec in databases}
    for spec in databases:
        if reasons.get(spec.name):
            raise PrivilegedRoleError(
                spec.name, f"role {spec.name!r} (for {purposes[spec.name]}) {'; '.join(reasons[spec.name])}; "
                           "setup-db sets the password of the role it gives a database to and will not do that "
                           "to a role that can administer the server; nothing was changed")


def _ensure_role(connection: psycopg.Connection[Any], spec: DatabaseSpec) -> SetupStep:
    from psycopg import sql

    subject, role = f"role {spec.name}", sql.Identifier(spec.name)
    row = connection.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", [spec.name]).fetchone()
    verifier = sql.Literal(_verifier(connection, spec).decode())
    if row is None:
        connection.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, verifier))
        return SetupStep(subject=subject, action="created", detail="LOGIN, password set")
    changes = []
    if not row[0]:
        connection.execute(sql.SQL("ALTER ROLE {} LOGIN").format(role))
        changes.append("LOGIN granted")
    same = _password_matches(connection, spec)
    if same is not True:
        connection.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(role, verifier))
        changes.append("password set" if same is False else _UNCOMPARED)
    if changes:
        return SetupStep(subject=subject, action="updated", detail=", ".join(changes))
    return SetupStep(subject=subject, action="unchanged", detail="exists, LOGIN, same password")


def _ensure_database(connection: psycopg.Connection[Any], spec: DatabaseSpec) -> SetupStep:
    from psycopg import sql

    subject, name = f"database {spec.name}", sql.Identifier(spec.name)
    row = connection.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s",
                             [spec.name]).fetchone()
    if row is None:
        granted = _join_role_if_needed(connection, spec.name)
        try:
            connection.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(name, name))
            # As a member of the owner (when not a superuser): only the owner may revoke.
            connection.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(name))
        finally:
            if granted:
                connection.execute(sql.SQL("REVOKE {} FROM CURRENT_USER").format(name))
        return SetupStep(subject=subject, action="created",
                         detail=f"owned by {spec.name}, no access for PUBLIC ({spec.purpose})")
    if row[0] != spec.name:
        raise SetupError(f"database {spec.name!r} exists and is owned by {row[0]!r}, not by role {spec.name!r}; "
                         f"if it is meant for {spec.purpose}, run ALTER DATABASE {spec.name} OWNER TO {spec.name}, "
                         "then this command again")
    return SetupStep(subject=subject, action="unchanged", detail=f"exists, owned by {spec.name}")


def _join_role_if_needed(connection: psycopg.Connection[Any], role: str) -> bool:
    """Grant ``current_user`` membership in ``role`` if ``CREATE DATABASE ... OWNER role`` needs it;
    whether it was granted (the caller revokes it)."""
    from psycopg import sql

    # PostgreSQL 16 asks for the SET option of the membership, 15 and earlier for membership.
    privilege = "SET" if connection.info.server_version >= 160000 else "MEMBER"
    row = connection.execute(
        f"SELECT rolsuper OR pg_has_role(current_user, %s, '{privilege}') FROM pg_roles WHERE rolname = current_user",
        [role]).fetchone()
    if row is not None and row[0]:
        return False
    connection.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(role)))
    return True


def _verifier(connection: psycopg.Connection[Any], spec: DatabaseSpec) -> bytes:
    # libpq hashes with the server's password_encryption: the plain password never goes over SQL.
    return connection.pgconn.encrypt_password(spec.password.encode(), spec.name.encode())


def _password_matches(connection: psycopg.Connection[Any], spec: DatabaseSpec) -> bool | None:
    """Whether the role's stored verifier is of ``spec.password``; None when it cannot be read."""
    import psycopg

    try:
        row = connection.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", [spec.name]).fetchone()
    except psycopg.errors.InsufficientPrivilege:
        return None
    stored = None if row is None else row[0]
    return stored is not None and verifier_matches(stored, spec.password, spec.name)


def verifier_matches(stored: str, password: str, role: str) -> bool:
    """Whether a PostgreSQL password verifier (``pg_authid.rolpassword``) is of ``password``.

    SCRAM-SHA-256 (RFC 5802/7677: ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``)
    or MD5 (``md5`` + md5(password + role)); anything else does not match.

    Examples
    --------
    >>> verifier_matches("md5" + hashlib.md5(b"s3cretmlflow").hexdigest(), "s3cret", "mlflow")
    True
    >>> verifier_matches("md5" + hashlib.md5(b"s3cretmlflow").hexdigest(), "other", "mlflow")
    False
    """
    if stored.startswith("md5"):
        return hmac.compare_digest(stored, "md5" + hashlib.md5((password + role).encode()).hexdigest())
    match = re.fullmatch(r"SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):(.+)", stored)
    if match is None:
        return False
    iterations, salt, stored_key = int(match[1]), base64.b64decode(match[2]), base64.b64decode(match[3])
    # The server normalises a non-ASCII password (SASLprep) before hashing; NFKC is its core.
    text = password if password.isascii() else unicodedata.normalize("NFKC", password)
    salted = hashlib.pbkdf2_hmac("sha256", text.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    return hmac.compare_digest(hashlib.sha256(client_key).digest(), stored_key)


# ----------------------------------------------------------------------------- command line

_DESCRIPTION = """\
Create the PostgreSQL databases and login roles a production deployment needs, through an
administrator's connection (a superuser, or a role with CREATEROLE and CREATEDB):

\b
  mlflow      MLflow's backend store (MLFLOW_BACKEND_STORE_URI, which mlflow server reads),
              owned by role mlflow
  thermostat  the prediction log and the registration lock (THERMOSTAT_PREDICTION_LOG_URL),
              owned by role thermostat

Idempotent: through a superuser a re-run changes nothing and says so, and a changed password
is set again; a non-superuser administrator cannot read the stored passwords, so it sets them
again on every run and says so ("password set again"). The server's own names (postgres,
template0, template1, pg_*) and existing privileged roles (superuser, CREATEROLE, CREATEDB,
REPLICATION, BYPASSRLS, a member of such a role or of pg_execute_server_program,
pg_read_server_files, pg_write_server_files, pg_read_all_data or pg_write_all_data, directly or
not, or the administrator itself) are refused before anything changes. Passwords
come from the flags or, better (a command line is visible to every user of the machine), from
the environment variables MLFLOW_DB_PASSWORD and THERMOSTAT_DB_PASSWORD. The URLs to put in
the deployment's environment are printed with the passwords masked as ***."""

_EPILOG = f"""\
--json keys: {JSON_KEYS["setup-db"]}.

exit status: 0 the roles and databases are in place (the report says what changed); 2 bad
input (an option, a missing password, a reserved name, the driver not installed), the message
on stderr; 3 the database failed (unreachable, a permission refused, a database owned by
another role, an existing privileged role)."""

_PASSWORD_VARIABLES = {"mlflow": "MLFLOW_DB_PASSWORD", "thermostat": "THERMOSTAT_DB_PASSWORD"}


def _report(result: DatabaseSetup) -> str:
    width = max(len(step.subject) for step in result.steps)
    lines = [f"{step.subject:<{width}}  {step.action:<9}  {step.detail}" for step in result.steps]
    lines.append("" if result.changed else "nothing changed: the roles and databases were already in place")
    lines.append("URLs for the deployment (passwords masked as ***: put the real ones in, percent-encoded):")
    lines += [f"  {variable}={url}" for variable, url in result.urls.items()]
    return "\n".join(line for line in lines if line)


@click.command(help=_DESCRIPTION, epilog=_EPILOG)
@click.option("--admin-url", required=True, metavar="URL",
              help="administrator's connection, e.g. postgresql://postgres@HOST:5432/postgres")
@click.option("--mlflow-password", envvar="MLFLOW_DB_PASSWORD", metavar="PASSWORD",
              help="password of role mlflow (default: $MLFLOW_DB_PASSWORD)")
@click.option("--mlflow-database", default="mlflow", metavar="NAME",
              help="name of MLflow's backend store's database and of its role (default mlflow)")
@click.option("--thermostat-password", envvar="THERMOSTAT_DB_PASSWORD", metavar="PASSWORD",
              help="password of role thermostat (default: $THERMOSTAT_DB_PASSWORD)")
@click.option("--thermostat-database", default="thermostat", metavar="NAME",
              help="name of the prediction log's database and of its role (default thermostat)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object instead of the report")
def command(admin_url: str, mlflow_password: str | None, mlflow_database: str,
            thermostat_password: str | None, thermostat_database: str, as_json: bool) -> int:
    """Create the roles and databases; return the exit status (see the module docstring)."""
    specs, flags = [], {}
    for key, password, database, purpose, variable in (
        ("mlflow", mlflow_password, mlflow_database, "MLflow's backend store", "MLFLOW_BACKEND_STORE_URI"),
        ("thermostat", thermostat_password, thermostat_database, "the prediction log", "THERMOSTAT_PREDICTION_LOG_URL"),
    ):
        if not password:
            return fail(EXIT_BAD_INPUT, f"--{key}-password is required (or set {_PASSWORD_VARIABLES[key]} in the "
                                        "environment, which keeps it off the command line)")
        try:
            specs.append(DatabaseSpec(database, password, purpose, variable))
            flags[specs[-1].name] = f"--{key}-database"
        except ValueError as error:
            return fail(EXIT_BAD_INPUT, f"--{key}-database: {error}")
    if specs[0].name == specs[1].name:
        return fail(EXIT_BAD_INPUT, f"--mlflow-database and --thermostat-database are both {specs[0].name!r}; "
                                    "MLflow's store and the prediction log need a database each")
    try:
        result = setup_databases(admin_url, specs)
    except ImportError as error:
        return fail(EXIT_BAD_INPUT, f"the PostgreSQL driver is not installed ({error}); it comes with the "
                                    "'postgresql' extra: pip install 'thermostat[postgresql]'")
    except ValueError as error:
        return fail(EXIT_BAD_INPUT, str(error))
    except PrivilegedRoleError as error:
        return fail(EXIT_COMPUTATION_FAILED, f"{error}: choose another name with {flags[error.role]}")
    except SetupError as error:
        return fail(EXIT_COMPUTATION_FAILED, str(error))
    print(json.dumps(result.model_dump(), indent=2) if as_json else _report(result))
    return EXIT_OK
