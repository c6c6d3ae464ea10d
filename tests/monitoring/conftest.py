"""Fixtures of the monitoring tests: a prediction log on SQLite and on a real PostgreSQL.

The PostgreSQL server is a throwaway cluster started by the session fixture itself:
``initdb`` into a temporary folder, ``pg_ctl start`` on 127.0.0.1 with a free port and the
socket in that folder, torn down at the end; ``postgres_cluster`` stops and starts it again
for a test whose database must go away and come back. As root it runs as the ``postgres`` OS user
(PostgreSQL refuses to run as root). Without PostgreSQL binaries the fixture fails under
``CI=true`` (``.ci/postgres.sh`` installs them) and skips elsewhere.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa

from monitoring import PredictionLog
from tests.support.ports import free_port

PG_BIN_GLOBS = ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin", "/opt/homebrew/opt/postgresql*/bin")


def _postgres_bin_dir() -> Path | None:
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).parent
    candidates = sorted(
        (Path(d) for pattern in PG_BIN_GLOBS for d in glob.glob(pattern) if (Path(d) / "initdb").exists()),
        key=lambda d: [int(part) if part.isdigit() else 0 for part in d.parts],
    )
    return candidates[-1] if candidates else None


def _as_postgres_user(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stdout}\n{done.stderr}")


@dataclass(frozen=True)
class PostgresCluster:
    """The throwaway cluster: its URL (the ``postgres`` database) and what stops and starts it again
    (a test that needs the database to go away and come back: same port, same data)."""

    url: str
    bin_dir: Path
    data: Path
    options: str
    log_file: Path

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m MODE``: ``fast`` ends every session (clients see their connections drop)."""
        _run(_as_postgres_user([str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]),
             "pg_ctl stop")

    def start(self) -> None:
        """``pg_ctl start``, waiting until it accepts connections."""
        _run(_as_postgres_user([str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-o", self.options, "-l",
                                str(self.log_file), "-w", "-t", "60", "start"]), "pg_ctl start")

    @contextmanager
    def stopped(self) -> Iterator[None]:
        """The server down inside the block, up again after it (whatever the block did)."""
        self.stop()
        try:
            yield
        finally:
            self.start()


_CLUSTERS = pytest.StashKey[dict[str, PostgresCluster]]()


@pytest.fixture(scope="session")
def postgres_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """A running throwaway PostgreSQL cluster; yields a URL of its ``postgres`` database."""
    bin_dir = _postgres_bin_dir()
    if bin_dir is None:
        message = (
            "PostgreSQL binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql/*/bin; "
            "`make test` installs them as root (.ci/postgres.sh); otherwise: sudo apt-get install postgresql"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.fail("running as root needs runuser to start PostgreSQL as the postgres user")
    root = Path(tempfile.mkdtemp(prefix="thermostat-pg-"))
    data, log_file = root / "data", root / "server.log"
    if os.geteuid() == 0:
        shutil.chown(root, user="postgres")
    port = free_port()
    cluster = PostgresCluster(
        url=f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", bin_dir=bin_dir, data=data,
        options=f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off",
        log_file=log_file,
    )
    try:
        _run(
            _as_postgres_user(
                [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"]
            ),
            "initdb",
        )
        cluster.start()
    except Exception as exc:  # noqa: BLE001 - the log says why the server did not start
        server_log = log_file.read_text() if log_file.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start a throwaway PostgreSQL: {exc}\n{server_log}")
    request.config.stash.setdefault(_CLUSTERS, {})[cluster.url] = cluster
    try:
        yield cluster.url
    finally:
        subprocess.run(
            _as_postgres_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_cluster(postgres_server: str, request: pytest.FixtureRequest) -> PostgresCluster:
    """The cluster of :func:`postgres_server`, to stop and start it again (:class:`PostgresCluster`)."""
    return request.config.stash[_CLUSTERS][postgres_server]


@pytest.fixture(scope="session")
def postgres_url(postgres_server: str) -> str:
    """URL of a database created for this test session on the throwaway server."""
    engine = sa.create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text("CREATE DATABASE thermostat_test"))
    engine.dispose()
    return postgres_server.rsplit("/", 1)[0] + "/thermostat_test"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def log_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for a fresh prediction log: a SQLite file, or the PostgreSQL test database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'predictions.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def prediction_log(log_url: str) -> Iterator[PredictionLog]:
    """An empty, created prediction log on each backend; its tables are dropped afterwards."""
    log = PredictionLog(log_url)
    log.metadata.drop_all(log.engine)
    log.create()
    try:
        yield log
    finally:
        log.metadata.drop_all(log.engine)
        log.dispose()


@pytest.fixture
def unique() -> str:
    """A short unique suffix for names that must not collide across tests."""
    return uuid.uuid4().hex[:8]
