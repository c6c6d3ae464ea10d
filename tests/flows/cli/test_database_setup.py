"""``thermostat setup-db`` against a real PostgreSQL: roles and databases created, a re-run
changes nothing and says so, a new password is set, passwords never printed, and the exit
codes (2 bad input naming the flag, 3 database failure)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from flows.cli.main import main
from flows.cli.database_setup import verifier_matches
from tests.monitoring.conftest import postgres_server  # noqa: F401 - the throwaway cluster (session fixture)
from tests.support.ports import free_port

SECRET_M, SECRET_T = "m-s3cret/with@odd:chars", "t-s3cret"


@pytest.fixture
def admin_url(postgres_server: str) -> str:  # noqa: F811 - the fixture imported above
    """libpq URL of the throwaway cluster's superuser (the fixture's URL names a driver)."""
    return postgres_server.replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture
def names(admin_url: str) -> Iterator[tuple[str, str]]:
    """Fresh database (and role) names for one test, dropped afterwards."""
    suffix = uuid.uuid4().hex[:8]
    pair = (f"mlflow_{suffix}", f"thermostat_{suffix}")
    yield pair
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for name in pair:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            admin.execute(f'DROP ROLE IF EXISTS "{name}"')


def _setup(admin_url: str, names: tuple[str, str], *extra: str, passwords: tuple[str, str] = (SECRET_M, SECRET_T),
           ) -> list[str]:
    return ["setup-db", "--admin-url", admin_url, "--mlflow-database", names[0], "--thermostat-database", names[1],
            "--mlflow-password", passwords[0], "--thermostat-password", passwords[1], *extra]


def _stored_verifier(admin_url: str, role: str) -> str:
    with psycopg.connect(admin_url) as admin:
        row = admin.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", [role]).fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.integration
def test_creates_roles_and_databases_then_a_rerun_changes_nothing(
    admin_url: str, names: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    mlflow_db, log_db = names
    assert main(_setup(admin_url, names)) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert f"role {mlflow_db}" in out and f"database {log_db}" in out and out.count("created") == 4
    port = admin_url.rsplit(":", 1)[1].split("/")[0]
    assert f"MLFLOW_BACKEND_STORE_URI=postgresql+psycopg://{mlflow_db}:***@127.0.0.1:{port}/{mlflow_db}" in out
    assert f"THERMOSTAT_PREDICTION_LOG_URL=postgresql+psycopg://{log_db}:***@127.0.0.1:{port}/{log_db}" in out
    assert "s3cret" not in out

    # The passwords are stored (as verifiers of exactly these passwords) and each role owns its database.
    assert verifier_matches(_stored_verifier(admin_url, mlflow_db), SECRET_M, mlflow_db)
    assert not verifier_matches(_stored_verifier(admin_url, mlflow_db), SECRET_T, mlflow_db)
    host = admin_url.rsplit("/", 1)[0].replace("postgres@", "")
    with psycopg.connect(f"{host}/{log_db}", user=log_db, password=SECRET_T, autocommit=True) as owner:
        owner.execute("CREATE TABLE created_by_owner (id int)")
    # PUBLIC's default CONNECT is revoked: the other deployment role cannot open this database.
    with pytest.raises(psycopg.OperationalError, match="permission denied"):
        psycopg.connect(f"{host}/{log_db}", user=mlflow_db, password=SECRET_M).close()

    assert main(_setup(admin_url, names, "--json")) == 0
    rerun = json.loads(capsys.readouterr().out)
    assert rerun["changed"] is False
    assert {step["action"] for step in rerun["steps"]} == {"unchanged"} and len(rerun["steps"]) == 4
    assert main(_setup(admin_url, names)) == 0
    assert "nothing changed" in capsys.readouterr().out


@pytest.mark.integration
def test_a_new_password_is_set_and_passwords_come_from_the_environment(
    admin_url: str, names: tuple[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    mlflow_db, _ = names
    assert main(_setup(admin_url, names)) == 0
    capsys.readouterr()
    monkeypatch.setenv("MLFLOW_DB_PASSWORD", "rotated")
    monkeypatch.setenv("THERMOSTAT_DB_PASSWORD", SECRET_T)
    arguments = ["setup-db", "--admin-url", admin_url, "--mlflow-database", names[0], "--thermostat-database", names[1]]
    assert main([*arguments, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["changed"] is True
    actions = {step["subject"]: (step["action"], step["detail"]) for step in result["steps"]}
    assert actions[f"role {mlflow_db}"] == ("updated", "password set")
    assert [action for action, _ in actions.values()].count("unchanged") == 3
    assert verifier_matches(_stored_verifier(admin_url, mlflow_db), "rotated", mlflow_db)


@pytest.mark.integration
def test_a_database_owned_by_another_role_is_refused_with_exit_3(
    admin_url: str, names: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{names[0]}"')  # owned by postgres, e.g. made by hand earlier
    assert main(_setup(admin_url, names)) == 3
    err = capsys.readouterr().err
    assert f"database '{names[0]}' exists and is owned by 'postgres'" in err
    assert f"ALTER DATABASE {names[0]} OWNER TO {names[0]}" in err


def test_an_unreachable_server_is_exit_3_with_the_password_masked(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()  # a port nothing listens on
    url = f"postgresql://postgres:admin-s3cret@127.0.0.1:{port}/postgres"
    assert main(["setup-db", "--admin-url", url, "--mlflow-password", "a", "--thermostat-password", "b"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("thermostat setup-db: error: could not connect to postgresql://postgres:***@127.0.0.1:")
    assert "admin-s3cret" not in err


@pytest.mark.parametrize(
    ("arguments", "flag"),
    [
        (["--admin-url", "postgresql://h/p", "--thermostat-password", "b"], "--mlflow-password is required"),
        (["--admin-url", "postgresql://h/p", "--mlflow-password", "a"], "--thermostat-password is required"),
        (["--admin-url", "mysql://root:pw@h/db", "--mlflow-password", "a", "--thermostat-password", "b"],
         "--admin-url mysql://root:***@h/db must be a PostgreSQL URL"),
        (["--admin-url", "postgresql://h/p", "--mlflow-password", "a", "--thermostat-password", "b",
          "--thermostat-database", "Robert'); DROP TABLE"], "--thermostat-database: database name"),
        (["--admin-url", "postgresql://h/p", "--mlflow-password", "a", "--thermostat-password", "b",
          "--thermostat-database", "mlflow"], "--mlflow-database and --thermostat-database are both 'mlflow'"),
        (["--mlflow-password", "a", "--thermostat-password", "b"], "--admin-url"),
    ],
)
def test_bad_input_is_exit_2_naming_the_flag(
    arguments: list[str], flag: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_DB_PASSWORD", raising=False)
    monkeypatch.delenv("THERMOSTAT_DB_PASSWORD", raising=False)
    assert main(["setup-db", *arguments]) == 2
    out, err = capsys.readouterr()
    assert out == "" and flag in err


def test_help_lists_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["setup-db", "--help"]) == 0
    assert "MLFLOW_DB_PASSWORD" in capsys.readouterr().out
    assert main(["--help"]) == 0
    assert "setup-db" in capsys.readouterr().out


@pytest.mark.integration
def test_the_documented_sql_is_what_setup_db_does(admin_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/production.md's SQL, run as the administrator, leaves nothing for setup-db to change."""
    document = (Path(__file__).resolve().parents[3] / "docs" / "production.md").read_text()
    blocks = document.split("```sql\n")[1:]
    assert len(blocks) == 1, "docs/production.md should show setup-db's SQL in one ```sql block"
    statements = blocks[0].split("```", 1)[0]
    statements = statements.replace("<mlflow password>", SECRET_M).replace("<thermostat password>", SECRET_T)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for name in ("mlflow", "thermostat"):  # this module's own cluster: the names are free
            admin.execute(f"DROP DATABASE IF EXISTS {name}")
            admin.execute(f"DROP ROLE IF EXISTS {name}")
        for statement in filter(str.strip, statements.split(";")):
            admin.execute(statement)
    try:
        assert main(["setup-db", "--admin-url", admin_url, "--mlflow-password", SECRET_M,
                     "--thermostat-password", SECRET_T, "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["changed"] is False, result["steps"]
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            for name in ("mlflow", "thermostat"):
                admin.execute(f"DROP DATABASE IF EXISTS {name}")
                admin.execute(f"DROP ROLE IF EXISTS {name}")


# --------------------------------------------------------------------------- privileged names and roles


@pytest.mark.parametrize(
    ("flag", "name"),
    [("--mlflow-database", "postgres"), ("--thermostat-database", "template0"), ("--mlflow-database", "template1"),
     ("--thermostat-database", "pg_monitor"), ("--mlflow-database", "pg_anything")],
)
def test_the_servers_own_names_are_refused_with_exit_2(
    flag: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--mlflow-database postgres`` would otherwise set the administrator's password."""
    arguments = ["setup-db", "--admin-url", "postgresql://127.0.0.1:9/postgres", "--mlflow-password", "a",
                 "--thermostat-password", "b", flag, name]
    assert main(arguments) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"{flag}: database name {name!r} is reserved" in err


def _role_exists(admin_url: str, role: str) -> bool:
    with psycopg.connect(admin_url) as admin:
        return admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone() is not None


def _database_exists(admin_url: str, name: str) -> bool:
    with psycopg.connect(admin_url) as admin:
        return admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


@pytest.mark.integration
@pytest.mark.parametrize("attribute", ["SUPERUSER", "CREATEROLE", "REPLICATION", "BYPASSRLS"])
def test_an_existing_privileged_role_is_refused_before_anything_changes(
    attribute: str, admin_url: str, names: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    mlflow_db, log_db = names
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE \"{log_db}\" LOGIN {attribute} PASSWORD 'original'")
    assert main(_setup(admin_url, names)) == 3
    err = capsys.readouterr().err
    assert f"role {log_db!r}" in err and attribute in err and "--thermostat-database" in err
    # Nothing changed: not the privileged role's password, nor the other role or any database.
    assert verifier_matches(_stored_verifier(admin_url, log_db), "original", log_db)
    assert not _role_exists(admin_url, mlflow_db)
    assert not _database_exists(admin_url, mlflow_db) and not _database_exists(admin_url, log_db)


@pytest.mark.integration
def test_the_administrators_own_role_is_refused(
    admin_url: str, names: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    mlflow_db, log_db = names
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE \"{mlflow_db}\" LOGIN CREATEDB PASSWORD 'original'")
    as_role = admin_url.replace("postgres@", f"{mlflow_db}@", 1)
    assert main(_setup(as_role, names)) == 3
    err = capsys.readouterr().err
    assert f"role {mlflow_db!r}" in err and "the administrator's own role" in err and "--mlflow-database" in err
    assert verifier_matches(_stored_verifier(admin_url, mlflow_db), "original", mlflow_db)
    assert not _role_exists(admin_url, log_db) and not _database_exists(admin_url, log_db)


@pytest.fixture
def createrole_admin(admin_url: str) -> Iterator[str]:
    """libpq URL of a non-superuser administrator: CREATEROLE and CREATEDB only (dropped afterwards)."""
    role = f"admin_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN CREATEROLE CREATEDB')
    yield admin_url.replace("postgres@", f"{role}@", 1)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP ROLE IF EXISTS "{role}"')


@pytest.mark.integration
def test_a_createrole_createdb_administrator_sets_up_and_says_what_a_rerun_cannot_compare(
    admin_url: str, createrole_admin: str, names: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """CREATE DATABASE ... OWNER needs the admin to be a member of the role (PostgreSQL 15; SET
    on it from 16): setup-db grants it for that statement and revokes it; a re-run cannot read
    pg_authid, so it sets the passwords again and says so instead of "nothing changed"."""
    mlflow_db, log_db = names
    admin_role = createrole_admin.split("://", 1)[1].split("@", 1)[0]
    assert main(_setup(createrole_admin, names)) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.count("created") == 4
    with psycopg.connect(admin_url) as admin:
        owners: dict[str, str] = dict(admin.execute(
            "SELECT datname, pg_get_userbyid(datdba) FROM pg_database WHERE datname = ANY(%s)", [list(names)],
        ).fetchall())
        # The membership lasted for CREATE DATABASE only: the admin cannot act as the roles afterwards.
        memberships = admin.execute("SELECT pg_has_role(%s, %s, 'MEMBER'), pg_has_role(%s, %s, 'MEMBER')",
                                    [admin_role, mlflow_db, admin_role, log_db]).fetchone()
    assert owners == {mlflow_db: mlflow_db, log_db: log_db} and memberships == (False, False)
    assert verifier_matches(_stored_verifier(admin_url, log_db), SECRET_T, log_db)
    host = admin_url.rsplit("/", 1)[0].replace("postgres@", "")
    with pytest.raises(psycopg.OperationalError, match="permission denied"):  # PUBLIC's CONNECT revoked
        psycopg.connect(f"{host}/{log_db}", user=mlflow_db, password=SECRET_M).close()

    assert main(_setup(createrole_admin, names)) == 0
    out = capsys.readouterr().out
    assert "nothing changed" not in out
    assert out.count("password set again (cannot be compared without a superuser") == 2
    assert main(_setup(createrole_admin, names, "--json")) == 0
    rerun = json.loads(capsys.readouterr().out)
    actions = {step["subject"]: step["action"] for step in rerun["steps"]}
    assert actions == {f"role {mlflow_db}": "updated", f"database {mlflow_db}": "unchanged",
                       f"role {log_db}": "updated", f"database {log_db}": "unchanged"}


# --------------------------------------------------------------------------- the admin password is never echoed
# (issue 19, item 13): not in the URL shown, not in libpq's or the driver's own messages.

_ADMIN_PASSWORDS = ["Kx7 Vq9", "Kx7%zzVq9", "Kx7@Vq9", "Kx7/Vq9", "Kx7?Vq9#Wz3", "Kx7:Vq9/Wz3@"]


@pytest.mark.parametrize("password", _ADMIN_PASSWORDS)
@pytest.mark.parametrize("where", ["closed port", "unknown host"])
def test_no_error_path_echoes_the_admin_password(password: str, where: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    host = f"127.0.0.1:{free_port()}" if where == "closed port" else "no-such-host.invalid"
    url = f"postgresql://postgres:{password}@{host}/postgres"
    assert main(["setup-db", "--admin-url", url, "--mlflow-password", "a", "--thermostat-password", "b"]) in (2, 3)
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("thermostat setup-db: error: ")
    assert f"postgresql://postgres:***@{host}/postgres" in err, "the URL is shown, its password masked"
    for fragment in ("Kx7", "Vq9", "Wz3"):
        assert fragment not in err, f"{fragment!r} of the admin password is in: {err}"


@pytest.mark.integration
def test_an_admin_password_with_reserved_characters_is_read_whole(
    admin_url: str, names: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """libpq ends a URL's password at its first "/" or "@"; setup-db reads it up to the last "@",
    as the masked URL shows it (the throwaway cluster trusts loopback: any password connects)."""
    url = admin_url.replace("postgres@", "postgres:Kx7/Vq9?Wz3#@x@", 1)
    assert main(_setup(url, names)) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.count("created") == 4
    assert not any(fragment in out for fragment in ("Kx7", "Vq9", "Wz3"))


# --------------------------------------------------------------------------- privileged through membership
# (issue 19, item 14): a role that can SET ROLE to an administrator is one.


@pytest.fixture
def groups(admin_url: str) -> Iterator[str]:
    """A suffix for group roles made by one test, dropped afterwards."""
    suffix = uuid.uuid4().hex[:8]
    yield suffix
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for (name,) in admin.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s", [f"%_{suffix}"]).fetchall():
            admin.execute(f'DROP ROLE IF EXISTS "{name}"')


@pytest.mark.integration
@pytest.mark.parametrize(("grants", "named"), [
    (["GRANT postgres TO {role}"], "member of 'postgres' (SUPERUSER, "),
    (["GRANT pg_execute_server_program TO {role}"], "member of 'pg_execute_server_program'"),
    (["GRANT pg_read_server_files TO {role}"], "member of 'pg_read_server_files'"),
    (["GRANT pg_write_server_files TO {role}"], "member of 'pg_write_server_files'"),
    (["GRANT pg_read_all_data TO {role}"], "member of 'pg_read_all_data'"),
    (["GRANT pg_write_all_data TO {role}"], "member of 'pg_write_all_data'"),
    (["CREATE ROLE outer_{suffix} NOLOGIN", "CREATE ROLE inner_{suffix} NOLOGIN",  # indirect: two levels down
      "GRANT pg_execute_server_program TO outer_{suffix}", "GRANT outer_{suffix} TO inner_{suffix}",
      "GRANT inner_{suffix} TO {role}"], "member of 'pg_execute_server_program'"),
    (["CREATE ROLE maker_{suffix} NOLOGIN CREATEROLE", "GRANT maker_{suffix} TO {role}"],
     "member of 'maker_{suffix}' (CREATEROLE)"),
    (["CREATE ROLE dbmaker_{suffix} NOLOGIN CREATEDB", "GRANT dbmaker_{suffix} TO {role}"],
     "member of 'dbmaker_{suffix}' (CREATEDB)"),
    (["ALTER ROLE {role} CREATEDB"], "exists with CREATEDB"),
])  # fmt: skip
@pytest.mark.parametrize("which", ["mlflow", "thermostat"])
def test_a_role_privileged_through_membership_is_refused_before_anything_changes(
    grants: list[str], named: str, which: str, admin_url: str, names: tuple[str, str], groups: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    role, other = names if which == "mlflow" else names[::-1]
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE \"{role}\" NOLOGIN PASSWORD 'original'")
        for statement in grants:
            admin.execute(statement.format(role=f'"{role}"', suffix=groups))
    assert main(_setup(admin_url, names)) == 3
    err = capsys.readouterr().err
    assert f"role {role!r}" in err and named.format(suffix=groups) in err and f"--{which}-database" in err
    # Nothing changed: the role got neither LOGIN nor a password, nothing else was created.
    assert verifier_matches(_stored_verifier(admin_url, role), "original", role)
    with psycopg.connect(admin_url) as admin:
        row = admin.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", [role]).fetchone()
    assert row == (False,)
    assert not _role_exists(admin_url, other) and not _database_exists(admin_url, role)


@pytest.mark.integration
def test_a_role_that_only_belongs_to_ordinary_groups_is_set_up(
    admin_url: str, names: tuple[str, str], groups: str, capsys: pytest.CaptureFixture[str]
) -> None:
    mlflow_db, _ = names
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE readers_{groups} NOLOGIN")
        admin.execute(f"CREATE ROLE \"{mlflow_db}\" NOLOGIN IN ROLE readers_{groups}, pg_monitor")
    assert main(_setup(admin_url, names)) == 0
    assert "LOGIN granted" in capsys.readouterr().out
