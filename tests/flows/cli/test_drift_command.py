"""``thermostat drift REFERENCE WINDOW --temperature T``: the verdict, each test, exit 0/1/2, JSON keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from calibration import ScoredSet, write_scored_set
from tests.strategies import sample_labels
from tests.support.cli import run

DRIFT_KEYS = {
    "reference", "window", "reference_n", "verdict", "drift_detected", "reasons", "tests_fired", "temperature",
    "n", "temperature_drift", "temperature_margin", "temperature_test", "temperature_stats", "reference_stats",
    "ece_drift", "ece_estimator", "ece_estimate", "ece_low", "ece_high", "baseline_ece", "baseline_ece_low",
    "baseline_ece_high", "ece_excess", "ece_tolerance", "p_value", "p_threshold", "groups", "estimators",
}
TEST_KEYS = {
    "window_temperature", "window_temperature_low", "window_temperature_high", "reference_temperature", "ratio",
    "ratio_low", "ratio_high", "z", "p_value", "p_value_no_margin", "margin", "level", "drifted", "direction",
}


def _set(n: int, *, seed: int, sharpen: float = 1.0, prefix: str) -> ScoredSet:
    """Calibrated at T = 2 (labels from softmax(z / 2)); the stored logits are ``sharpen`` z."""
    rng = np.random.default_rng(seed)
    logits = 4.0 * rng.normal(size=(n, 5))
    labels = sample_labels(rng, logits / 2.0)
    groups = np.array(["web", "mail"])[rng.integers(0, 2, n)]
    return ScoredSet.from_arrays(sharpen * logits, labels, ids=[f"{prefix}{i}" for i in range(n)], groups=groups)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("drift")
    write_scored_set(_set(4_000, seed=1, prefix="r"), folder / "reference.npz")
    write_scored_set(_set(2_000, seed=2, prefix="w"), folder / "calm.npz")
    write_scored_set(_set(2_000, seed=3, prefix="h", sharpen=1.3), folder / "sharper.parquet")
    write_scored_set(_set(2_000, seed=4, prefix="c", sharpen=0.75), folder / "flatter.csv")
    write_scored_set(_set(100, seed=5, prefix="s"), folder / "small.npz")
    return folder


def run_json(capsys: pytest.CaptureFixture[str], *args: object, status: int) -> dict[str, Any]:
    code, out, err = run(capsys, *args, "--estimator", "debiased_l1", "--resamples", "200", "--json")
    assert code == status, err
    payload = json.loads(out)
    assert isinstance(payload, dict)
    return payload


def test_a_quiet_window_too_small_to_establish_calibration_is_undetermined_exit_0(
        files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # An equivalence margin as narrow as the drift side's: 2,000 rows cannot establish it.
    payload = run_json(capsys, "drift", files / "reference.npz", files / "calm.npz", "--temperature", "2",
                       "--equivalence-margin", "0.03", status=0)
    assert DRIFT_KEYS <= payload.keys() and TEST_KEYS <= payload["temperature_test"].keys()
    assert payload["verdict"] == "undetermined" and payload["tests_fired"] == [] and payload["reference_n"] == 4_000
    assert payload["reasons"][0].startswith("undetermined: no test fired")
    assert payload["temperature_test"]["within_margin"] is False and "rows_to_decide" in payload
    test = payload["temperature_test"]
    assert test["window_temperature_low"] < 2.0 < test["window_temperature_high"]
    assert payload["estimators"][0]["estimator"] == "debiased_l1"
    assert {"window", "reference"} <= payload["estimators"][0].keys()
    for forbidden in ("cooldown_until", "refit_recommended", "window_start", "model_name"):
        assert forbidden not in payload, "monitor-only keys are left out"
    # The default equivalence margin (10 %) is established by the same window: calibrated, exit 0.
    default = run_json(capsys, "drift", files / "reference.npz", files / "calm.npz", "--temperature", "2", status=0)
    assert default["verdict"] == "calibrated" and default["temperature_test"]["within_margin"] is True
    assert default["temperature_test"]["equivalence_margin"] == 0.10


def test_a_sharper_window_is_a_drift_exit_1(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = run_json(capsys, "drift", files / "reference.npz", files / "sharper.parquet", "--temperature", "2",
                       status=1)
    assert payload["verdict"] == "drift" and payload["tests_fired"][0] == "temperature"
    assert payload["temperature_test"]["direction"] == "over-confident"
    assert 1.15 < payload["temperature_test"]["ratio"] < 1.45
    code, out, err = run(capsys, "drift", files / "reference.npz", files / "flatter.csv", "--temperature", "2",
                         "--estimator", "binned", "--resamples", "100")
    assert code == 1 and "verdict: DRIFT (temperature" in out and "under-confident" in out
    assert err.startswith("thermostat: warning: drift: window optimal T")


def test_a_collapsed_window_is_a_drift_exit_1_not_a_crash(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Logits 1e-4 x normal (a collapsed, near-uniform classifier) exited 3 with "math range
    error"; it is the drift a monitor must flag."""
    rng = np.random.default_rng(2)
    write_scored_set(ScoredSet.from_arrays(1e-4 * rng.normal(size=(2_000, 5)), rng.integers(0, 5, 2_000),
                                           ids=[f"x{i}" for i in range(2_000)]), files / "collapsed.npz")
    payload = run_json(capsys, "drift", files / "reference.npz", files / "collapsed.npz", "--temperature", "2",
                       status=1)
    assert payload["verdict"] == "drift" and payload["tests_fired"] == ["collapsed"]
    assert payload["reasons"][0].startswith("model output collapsed: ")
    high = payload["temperature_test"]["window_temperature_high"]
    assert high is None or high > 1e3  # the window says next to nothing about T (null: beyond float range)
    code, out, err = run(capsys, "drift", files / "reference.npz", files / "collapsed.npz", "--temperature", "2",
                         "--resamples", "100")
    assert code == 1 and "verdict: DRIFT (collapsed" in out and "math range error" not in out + err


def test_groups_are_tested_against_the_reference_groups(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = run_json(capsys, "drift", files / "reference.npz", files / "calm.npz", "--temperature", "2", "--groups",
                       status=0)
    assert [g["group"] for g in payload["groups"]] == ["mail", "web"]
    assert all(g["tested"] and g["p_threshold"] == 0.0025 for g in payload["groups"])


def test_the_text_report_names_each_test(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "drift", files / "reference.npz", files / "calm.npz", "--temperature", "2",
                       "--estimator", "all", "--resamples", "100", "--equivalence-margin", "0.03")
    assert code == 0 and "verdict: UNDETERMINED: no drift seen, but calibration is not established" in out
    for text in ("temperature (margin 3%)", "ece (tolerance 0.02)", "window's optimal T", "debiased_l2", "smooth"):
        assert text in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--margin", "1.5"], "--margin must be in [0, 1)"),
        (["--temperature", "0"], "--temperature must be finite and > 0"),
    ],
)
def test_bad_options_exit_2(files: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    code, out, err = run(capsys, "drift", files / "reference.npz", files / "calm.npz", "--temperature", "2", *extra)
    assert code == 2 and out == "" and message in err


def test_too_small_a_window_or_missing_groups_exit_2(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "drift", files / "reference.npz", files / "small.npz", "--temperature", "2")
    assert code == 2 and out == "" and "at least --min-window 500 are needed" in err
    write_scored_set(ScoredSet.from_arrays(np.zeros((600, 5)), np.zeros(600, dtype=int),
                                           ids=[f"n{i}" for i in range(600)]), files / "plain.npz")
    code, out, err = run(capsys, "drift", files / "reference.npz", files / "plain.npz", "--temperature", "2", "--groups")
    assert code == 2 and "--groups needs a 'group' column" in err
    code, _, err = run(capsys, "drift", files / "reference.npz", files / "missing.npz", "--temperature", "2")
    assert code == 2 and "missing.npz" in err


def test_help_lists_the_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "drift", "--help")
    flat = " ".join(out.split())  # the help is wrapped to the terminal
    assert code == 0 and "--json keys: reference, window, reference_n, verdict" in flat
    assert "temperature_test {" in flat and "groups [{scope, group" in flat


def test_the_policys_tests_are_the_ones_run(files: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """THERMOSTAT_DRIFT_TESTS chooses the tests (the drift policy's ``tests``): without the
    temperature test the report has no window T line and nothing breaks; an unknown test is
    refused naming the setting."""
    monkeypatch.setenv("THERMOSTAT_DRIFT_TESTS", "ece")
    code, out, err = run(capsys, "drift", files / "reference.npz", files / "calm.npz", "--temperature", "2",
                         "--estimator", "binned", "--resamples", "100")
    assert code == 0, err
    assert "ece (tolerance 0.02)" in out and "temperature (margin" not in out and "window's optimal T" not in out
    monkeypatch.setenv("THERMOSTAT_DRIFT_TESTS", "ece,volume")
    code, out, err = run(capsys, "drift", files / "reference.npz", files / "calm.npz", "--temperature", "2")
    assert code == 2 and out == "" and "unknown drift test(s) ['volume']" in err and "THERMOSTAT_DRIFT_TESTS" in err
