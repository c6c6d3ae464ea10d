"""``thermostat export``: the prediction log of the settings to Parquet; exit codes, --json, idempotency."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from flows.cli.main import main
from monitoring import PredictionLog, PredictionLogExport, log_predictions

T0 = datetime(2026, 3, 1, 20, tzinfo=UTC)


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state folder holding a prediction log with 40 labelled rows of m/1 over two UTC days."""
    monkeypatch.setenv("THERMOSTAT_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("THERMOSTAT_PREDICTION_LOG_URL", raising=False)
    with PredictionLog(f"sqlite:///{tmp_path / 'predictions.db'}") as log:
        log.create()
        rng = np.random.default_rng(0)
        log_predictions(log, "m", "1", 1.0, rng.normal(size=(40, 3)), [f"r{i}" for i in range(40)], groups="web",
                        time=[T0 + timedelta(minutes=10 * i) for i in range(40)], labels=rng.integers(0, 3, 40))  # fmt: skip
    return tmp_path


def _export(out: Path, *extra: str) -> int:
    return main(["export", "--model", "m", "--version", "1", "--out", str(out), "--until", "2026-03-05T00:00:00Z", *extra])


def test_export_reports_the_days_and_a_rerun_writes_nothing(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = state / "export"
    assert _export(out) == 0
    report = capsys.readouterr().out
    assert report.startswith("exported model 'm' version '1' (K=3), served before 2026-03-05T00:00:00+00:00, in ")
    assert "2 day(s) written (2026-03-01 .. 2026-03-02), 40 rows" in report
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert len(files) == 4  # two day files, the manifest and the (empty) lock file
    assert _export(out) == 0
    again = capsys.readouterr().out
    assert again.startswith("already up to date: ") and again.rstrip().endswith("2 day(s) unchanged, nothing written")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files
    assert PredictionLogExport(out).n_classes("m", "1") == 3


def test_json_prints_one_object_of_the_result(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _export(state / "export", "--json") == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload == {
        "directory": str(state / "export" / "model=m" / "version=1"), "model_name": "m", "model_version": "1",
        "until": "2026-03-05T00:00:00+00:00", "n_classes": 3, "days_written": ["2026-03-01", "2026-03-02"],
        "days_skipped": [], "rows_written": 40,
    }  # fmt: skip
    assert _export(state / "export", "--json") == 0
    assert json.loads(capsys.readouterr().out)["days_skipped"] == ["2026-03-01", "2026-03-02"]


def test_a_version_never_logged_is_bad_input_naming_it_and_the_log(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--model", "m", "--version", "9", "--out", str(state / "export")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        f"thermostat export: error: no prediction of model 'm' version '9' was ever logged in the prediction log at "
        f"sqlite:///{state / 'predictions.db'}; check --model and --version"
    )
    assert not (state / "export").exists()


def test_a_missing_log_is_bad_input_and_is_not_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("THERMOSTAT_STATE_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.delenv("THERMOSTAT_PREDICTION_LOG_URL", raising=False)
    assert main(["export", "--model", "m", "--version", "1", "--out", str(tmp_path / "export")]) == 2
    assert "there is no prediction log at sqlite:///" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere").exists()


def test_a_database_failure_exits_3_with_the_password_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("THERMOSTAT_PREDICTION_LOG_URL", "postgresql+psycopg://thermostat:s3cret@127.0.0.1:1/log")
    assert main(["export", "--model", "m", "--version", "1", "--out", str(tmp_path / "export")]) == 3
    err = capsys.readouterr().err
    assert err.startswith("thermostat export: error: the prediction log at postgresql+psycopg://thermostat:***@127.0.0.1:1/log "
                          "could not be read: ")  # fmt: skip
    assert "s3cret" not in err


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--model", "m", "--version", "1"], "Missing option '--out'"),
        (["--model", "m", "--version", "1", "--out", "x", "--until", "2026-03-01T00:00"],
         "'--until': '2026-03-01T00:00' has no timezone"),
        (["--model", "m", "--version", "1", "--out", "x", "--until", "yesterday"],
         "'--until': 'yesterday' is not an ISO 8601 time"),
    ],
)
def test_bad_options_are_bad_input(
    state: Path, arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", *arguments]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err


def test_an_out_that_is_a_file_is_bad_input(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (state / "file").write_text("")
    assert _export(state / "file") == 2
    assert f"--out {state / 'file'} is not a folder" in capsys.readouterr().err


def test_help_lists_the_command_its_layout_and_idempotency(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "export" in capsys.readouterr().out
    assert main(["export", "--help"]) == 0
    text = capsys.readouterr().out
    assert "DIR/model=NAME/version=V/date=YYYY-MM-DD/part-0.parquet" in text
    assert "Idempotent and resumable" in text and "--json keys: directory" in text
