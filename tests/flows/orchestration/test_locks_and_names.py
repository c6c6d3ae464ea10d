"""The per-model lease lock (SQLite here; the same SQL runs on PostgreSQL), model-name rules and
filter quoting, and the guard of the embedded Prefect API server. No MLflow store, no Prefect API."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from flows.cli import main as cli
from flows.orchestration import locks
from flows.orchestration.locks import LockLostError, clear_lock, model_lock, model_lock_name, show_lock
from flows.registry.adapter import filter_literal, retry_transient, validate_model_name
from flows.settings import ThermostatSettings


def _url(settings: ThermostatSettings) -> str:
    return settings.resolved_prediction_log_url()


def _plant(settings: ThermostatSettings, model: str, *, machine: str, pid: int, started: str, expires_in: float) -> None:
    """A lock row as another holder would have left it."""
    now = time.time()
    with locks._engine(_url(settings)).begin() as connection:
        connection.execute(sa.insert(locks._locks).values(
            name=model_lock_name(model), holder="someone-else", machine=machine, pid=pid, process_started=started,
            description="planted", acquired_at=now - 100, expires_at=now + expires_in,
        ))


def _dead_pid() -> tuple[int, str]:
    """The PID of a process that has exited, and a start time it no longer matches."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid, "12345"


def test_lock_is_exclusive_and_released(settings: ThermostatSettings) -> None:
    with model_lock("m", url=_url(settings), timeout_seconds=5, description="first"):
        holder = show_lock("m", settings)
        assert holder is not None and (holder.description, holder.alive, holder.expired) == ("first", True, False)
        with pytest.raises(TimeoutError, match=r"thermostat-register-m is still held after .*: thermostat-register-m held by first .*thermostat lock clear m"):
            with model_lock("m", url=_url(settings), timeout_seconds=0.6):
                pass
    assert show_lock("m", settings) is None


def test_a_dead_holder_on_this_machine_is_taken_over_at_once(settings: ThermostatSettings) -> None:
    pid, started = _dead_pid()
    _plant(settings, "m", machine=locks._machine(), pid=pid, started=started, expires_in=600)
    left = show_lock("m", settings)
    assert left is not None and left.alive is False and not left.expired
    began = time.monotonic()
    with model_lock("m", url=_url(settings), timeout_seconds=5):
        assert time.monotonic() - began < 1.0
        held = show_lock("m", settings)
        assert held is not None and held.alive is True


def test_another_machines_lock_is_taken_over_only_when_its_lease_expired(settings: ThermostatSettings) -> None:
    _plant(settings, "live", machine="elsewhere/boot/pid:[1]", pid=1, started="1", expires_in=600)
    with pytest.raises(TimeoutError):
        with model_lock("live", url=_url(settings), timeout_seconds=0.6):
            pass
    _plant(settings, "stale", machine="elsewhere/boot/pid:[1]", pid=1, started="1", expires_in=-1)
    with model_lock("stale", url=_url(settings), timeout_seconds=2):
        pass
    assert show_lock("stale", settings) is None


def test_of_many_waiters_for_a_stale_lock_exactly_one_wins(settings: ThermostatSettings) -> None:
    _plant(settings, "race", machine="elsewhere/boot/pid:[1]", pid=1, started="1", expires_in=-1)
    inside, overlaps, barrier = [0], [0], threading.Barrier(4)

    def contender() -> None:
        barrier.wait()
        with model_lock("race", url=_url(settings), timeout_seconds=30):
            inside[0] += 1
            overlaps[0] = max(overlaps[0], inside[0])
            time.sleep(0.05)
            inside[0] -= 1

    threads = [threading.Thread(target=contender) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps[0] == 1 and show_lock("race", settings) is None


def test_the_lease_is_renewed_and_a_stolen_lease_is_noticed(settings: ThermostatSettings) -> None:
    with model_lock("m", url=_url(settings), timeout_seconds=5, lease_seconds=0.6) as lease:
        first = show_lock("m", settings)
        time.sleep(0.8)  # past the first lease: still held, because it was renewed
        renewed = show_lock("m", settings)
        assert first is not None and renewed is not None and not renewed.expired
        assert renewed.expires_at > first.expires_at
        assert clear_lock("m", settings) is not None  # someone clears it by hand
        time.sleep(0.5)
        with pytest.raises(LockLostError, match="cleared by hand"):
            lease.check()


def test_the_lock_command_shows_and_clears(settings: ThermostatSettings, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("THERMOSTAT_STATE_DIR", str(settings.state_dir))
    with model_lock("other", url=_url(settings), timeout_seconds=5):  # the lock table exists from now on
        pass
    assert cli(["lock", "show", "m"]) == 0
    assert capsys.readouterr().out.strip() == "thermostat-register-m is free"
    _plant(settings, "m", machine="elsewhere/boot/pid:[1]", pid=7, started="1", expires_in=600)
    assert cli(["lock", "show", "m", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["holder"]["pid"] == 7 and shown["holder"]["alive"] is None
    assert cli(["lock", "clear", "m"]) == 0
    assert capsys.readouterr().out.startswith("cleared: thermostat-register-m held by planted (pid 7")
    assert show_lock("m", settings) is None


@pytest.mark.parametrize("action", ["show", "clear"])
def test_showing_or_clearing_a_lock_creates_no_database_and_names_the_missing_one(
    action: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 19, item 21: ``lock show`` used to create the state folder, the database and its table."""
    state = tmp_path / "state"
    monkeypatch.setenv("THERMOSTAT_STATE_DIR", str(state))
    assert cli(["lock", action, "m"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"thermostat lock {action}: error: no lock database at sqlite:///{state / 'predictions.db'}"), err
    assert "THERMOSTAT_PREDICTION_LOG_URL" in err and "Traceback" not in err
    assert not state.exists()
    # A database without the lock table (a prediction log no registration used): named, not changed.
    state.mkdir()
    with sa.create_engine(f"sqlite:///{state / 'predictions.db'}").begin() as connection:
        connection.execute(sa.text("CREATE TABLE other (x INTEGER)"))
    assert cli(["lock", action, "m"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"thermostat lock {action}: error: no lock table thermostat_locks in sqlite:///{state / 'predictions.db'}"), err
    assert sa.inspect(sa.create_engine(f"sqlite:///{state / 'predictions.db'}")).get_table_names() == ["other"]


@pytest.mark.parametrize("name", ["o'brien", 'say "hi"', "digits", "a b-c_d.e"])
def test_valid_model_names_are_accepted(name: str) -> None:
    assert validate_model_name(name) == name


@pytest.mark.parametrize(("name", "rule"), [
    ("", "is empty"), ("  ", "is empty"), ("team/model", "cannot contain '/' or ':'"),
    ("a:b", "cannot contain '/' or ':'"), ("..", "would resolve"), (".", "would resolve"),
    ("it's \"quoted\"", "both ' and"),
])
def test_invalid_model_names_are_refused_naming_the_rule(name: str, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        validate_model_name(name)


def test_filter_literals_quote_with_the_kind_the_value_lacks() -> None:
    assert filter_literal("o'brien") == '"o\'brien"' and filter_literal('say "hi"') == "'say \"hi\"'"
    with pytest.raises(ValueError, match="both"):
        filter_literal("'\"")


def test_retry_transient_repeats_only_transient_errors() -> None:
    calls: list[int] = []

    def refused() -> None:
        calls.append(1)
        raise ValueError("not transient")

    with pytest.raises(ValueError):
        retry_transient(refused, what="a refusal", delays=(0.0,))
    assert len(calls) == 1

    def always_down() -> None:
        calls.append(1)
        raise ConnectionRefusedError("down")

    with pytest.raises(ConnectionRefusedError):
        retry_transient(always_down, what="a dead server", attempts=3, delays=(0.0,))
    assert len(calls) == 4


def test_the_embedded_server_guard_wraps_methods_that_exist() -> None:
    """A Prefect upgrade that renames what flows.orchestration.embedded wraps must fail here, not silently."""
    import flows.pipelines.post_finetune  # noqa: F401  (installs the guard)
    from prefect.server.api.server import SubprocessASGIServer

    assert getattr(SubprocessASGIServer, "_thermostat_guarded", False)
    assert SubprocessASGIServer.start.__name__ == "guarded_start"
    assert SubprocessASGIServer._run_uvicorn_command.__name__ == "watched_run_uvicorn"


def test_lock_database_folder_is_created(tmp_path: Path) -> None:
    settings = ThermostatSettings(state_dir=tmp_path / "not" / "yet")
    with model_lock("m", url=_url(settings), timeout_seconds=1):
        assert (tmp_path / "not" / "yet" / "predictions.db").exists()
