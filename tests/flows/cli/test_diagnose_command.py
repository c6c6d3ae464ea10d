"""``thermostat diagnose REFERENCE WINDOW [--served SERVED] --temperature T`` and ``fit``/``evaluate --priors``.

Synthetic data with known shifts: a class-conditional model x | y ~ N(2 e_y, I) over K = 4
classes whose logits 2x + log π are the exact posteriors for the reference priors π = (0.4,
0.3, 0.2, 0.1); a label-shifted window draws its labels from (0.2, 0.2, 0.2, 0.4) with the same
p(x | y), a temperature-shifted one multiplies the logits by 1.5.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from calibration import ScoredSet, evaluate, prior_corrected_log_probabilities, write_scored_set
from tests.support.cli import refused, run

REFERENCE_PRIORS = np.array([0.4, 0.3, 0.2, 0.1])
SHIFTED_PRIORS = np.array([0.2, 0.2, 0.2, 0.4])
FAST = ("--resamples", "200")


def _rows(priors: np.ndarray, n: int, seed: int, *, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.choice(4, size=n, p=priors)
    x = rng.normal(size=(n, 4))
    x[np.arange(n), labels] += 2.0
    return scale * (2.0 * x + np.log(REFERENCE_PRIORS)), labels


def _set(priors: np.ndarray, n: int, seed: int, prefix: str, *, scale: float = 1.0) -> ScoredSet:
    logits, labels = _rows(priors, n, seed, scale=scale)
    return ScoredSet.from_arrays(logits, labels, ids=[f"{prefix}{i}" for i in range(n)])


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("diagnose")
    write_scored_set(_set(REFERENCE_PRIORS, 5_000, 10, "r"), folder / "reference.npz")
    write_scored_set(_set(REFERENCE_PRIORS, 2_000, 11, "u"), folder / "unchanged.parquet")
    label_shifted = _set(SHIFTED_PRIORS, 2_000, 12, "l")
    write_scored_set(label_shifted, folder / "label_shift.npz")
    write_scored_set(_set(REFERENCE_PRIORS, 2_000, 13, "t", scale=1.5), folder / "hotter.csv")
    # The label-shifted rows as served: no label column, or no labels key.
    frame = pd.DataFrame(label_shifted.logits, columns=[f"logit_{k}" for k in range(4)])
    frame.insert(0, "id", label_shifted.ids)
    frame.to_csv(folder / "served.csv", index=False)
    np.savez(folder / "served.npz", logits=label_shifted.logits)
    three = ScoredSet.from_arrays(label_shifted.logits[:, :3], np.minimum(label_shifted.labels, 2))
    write_scored_set(three, folder / "three_classes.npz")
    np.savez(folder / "served_three.npz", logits=three.logits)
    return folder


def _diagnose(capsys: pytest.CaptureFixture[str], files: Path, window: str, *extra: str,
              status: int) -> tuple[dict[str, Any], str]:
    code, out, err = run(capsys, "diagnose", files / "reference.npz", files / window, "--temperature", "1", *FAST,
                         *extra, "--json")
    assert code == status, err
    payload = json.loads(out)
    assert isinstance(payload, dict)
    return payload, err


def test_a_label_shift_is_diagnosed_with_its_priors_exit_1(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload, err = _diagnose(capsys, files, "label_shift.npz", status=1)
    assert (payload["kind"], payload["fix"], payload["confirmed"], payload["priors_moved"]) == (
        "label_shift", "prior_correction", True, True)
    assert payload["reweighted_tests_fired"] == [] and payload["gain"] > 0 and payload["em_converged"]
    assert "shift found: label shift" in err
    # Tolerance 0.05: at least 3 standard errors of the estimate as the command reports them
    # (its 95 % interval's half-width / 1.96), so a correct estimate misses it by chance with
    # probability below 0.3 % per class whatever the seed.
    estimated, low, high = (np.array(payload[key]) for key in ("priors", "priors_low", "priors_high"))
    standard_error = (high - low) / (2 * 1.96)
    assert 3 * standard_error.max() <= 0.05
    labels = np.load(files / "label_shift.npz")["labels"]
    assert np.abs(estimated - np.bincount(labels, minlength=4) / labels.size).max() < 0.05
    assert np.abs(estimated - SHIFTED_PRIORS).max() < 0.05
    # The reference priors are the reference's mean calibrated posterior: near its class mix.
    assert np.abs(np.array(payload["reference_priors"]) - REFERENCE_PRIORS).max() < 0.03


def test_a_temperature_shift_is_calibration_drift_confirmed_by_the_labels(
        files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload, _ = _diagnose(capsys, files, "hotter.csv", status=1)
    assert (payload["kind"], payload["confirmed"]) == ("calibration_drift", True)
    assert "temperature" in payload["tests_fired"]
    # Sharper posteriors also move the mean posterior of a model with unequal priors, so the
    # prior test may fire: then the tests still fire at the re-weighted posteriors.
    if payload["priors_moved"]:
        assert "temperature" in payload["reweighted_tests_fired"]
    assert payload["fix"] in ("temperature_refit", "prior_correction_and_refit")


def test_an_unchanged_window_that_cannot_establish_calibration_is_undetermined_exit_0(
        files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 2,000 rows cannot establish T within 3 %: "no change" would claim calibration the data do not show.
    payload, err = _diagnose(capsys, files, "unchanged.parquet", "--equivalence-margin", "0.03", status=0)
    assert (payload["kind"], payload["fix"], payload["tests_fired"]) == ("undetermined", "none", [])
    assert payload["prior_test"]["fired"] is False and err == ""
    assert payload["served"] is None and payload["served_n"] == payload["window_n"] == 2_000
    # Within the default equivalence margin (10 %) they do: no change, established.
    payload, _ = _diagnose(capsys, files, "unchanged.parquet", status=0)
    assert (payload["kind"], payload["fix"]) == ("no_change", "none")


def test_a_low_accuracy_floor_setting_makes_an_accuracy_collapse(
        files: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THERMOSTAT_MIN_ACCURACY", "0.95")  # above the model's ~0.84: the settings' floor applies
    payload, _ = _diagnose(capsys, files, "unchanged.parquet", status=1)
    assert (payload["kind"], payload["fix"], payload["accuracy_floor"]) == ("accuracy_collapse", "escalate", 0.95)
    payload, _ = _diagnose(capsys, files, "unchanged.parquet", "--accuracy-floor", "0.5", status=0)
    assert payload["accuracy_floor"] == 0.5


@pytest.mark.parametrize("served", ["served.csv", "served.npz"])
def test_unlabelled_served_rows_give_the_priors(served: str, files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    alone, _ = _diagnose(capsys, files, "label_shift.npz", status=1)
    payload, _ = _diagnose(capsys, files, "label_shift.npz", "--served", str(files / served), status=1)
    assert payload["served"] == str(files / served) and payload["served_n"] == 2_000
    assert payload["kind"] == "label_shift" and payload["priors"] == pytest.approx(alone["priors"], abs=1e-12)


def test_the_text_report_says_the_kind_and_the_fix(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "diagnose", files / "reference.npz", files / "label_shift.npz", "--temperature",
                         "1", *FAST)
    assert code == 1 and "thermostat: warning: shift found: label shift (fix: prior correction)" in err
    assert "diagnosis: LABEL SHIFT; fix: prior correction" in out and "prior test: Hotelling T2 =" in out
    assert "at the re-weighted posteriors: none" in out and "reasons:" in out


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["{r}", "{d}/three_classes.npz", "--temperature", "1"], "three_classes.npz: has 3 classes but"),
        (["{r}", "{d}/label_shift.npz", "--served", "{d}/served_three.npz", "--temperature", "1"],
         "served_three.npz: has 3 classes but"),
        (["{r}", "{d}/label_shift.npz", "--served", "{d}/missing.csv", "--temperature", "1"],
         "missing.csv: file not found"),
        (["{r}", "{d}/label_shift.npz"], "Missing option '--temperature'"),
        (["{r}", "{d}/label_shift.npz", "--temperature", "0"], "--temperature must be"),
        (["{r}", "{d}/label_shift.npz", "--temperature", "1", "--accuracy-floor", "2"],
         "--accuracy-floor must be in [0, 1]"),
        (["{r}", "{d}/label_shift.npz", "--temperature", "1", "--min-window", "5000"], "--min-window 5000"),
        (["{r}", "{d}/label_shift.npz", "--temperature", "1", "--level", "2"], "--level must be in (0, 1)"),
        (["{r}", "{d}/label_shift.npz", "--temperature", "1", "--max-prior-classes", "3"],
         "reference.npz: 4 classes; diagnose estimates and tests the class priors on K x K matrices"),
        (["{r}", "{d}/label_shift.npz", "--temperature", "1", "--max-prior-classes", "1"],
         "--max-prior-classes must be an integer >= 2; got 1"),
    ],
)
def test_bad_input_exits_2_naming_the_problem(arguments: list[str], message: str, files: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.format(r=files / "reference.npz", d=files) for a in arguments]
    assert message in refused(capsys, "diagnose", *argv)


# --------------------------------------------------------------------------- --priors


def _json(capsys: pytest.CaptureFixture[str], *args: object) -> dict[str, Any]:
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert isinstance(payload, dict)
    return payload


def test_evaluate_with_priors_is_the_corrected_posteriors_nll(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = files / "label_shift.npz"
    plain = _json(capsys, "evaluate", data, "--temperature", "1.3")
    payload = _json(capsys, "evaluate", data, "--temperature", "1.3", "--priors", "2,2,2,4",
                    "--reference-priors", "0.4,0.3,0.2,0.1")
    stored = np.load(data)
    log_q = prior_corrected_log_probabilities(stored["logits"], temperature=1.3, priors=SHIFTED_PRIORS,
                                              reference_priors=REFERENCE_PRIORS)
    direct = -float(np.mean(log_q[np.arange(log_q.shape[0]), stored["labels"]]))
    assert payload["nll"] == pytest.approx(direct, abs=1e-12, rel=0)
    assert payload["priors"] == pytest.approx(SHIFTED_PRIORS.tolist(), abs=1e-15)
    assert payload["prior_basis"] == "--reference-priors"
    assert payload["uncorrected"]["nll"] == pytest.approx(plain["nll"], abs=1e-15)
    assert payload["nll"] < plain["nll"], "the right priors fit label-shifted rows better"


def test_fit_with_priors_keeps_t_and_reports_both(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = files / "reference.npz"
    (files / "priors.json").write_text(json.dumps([1, 1, 1, 2]))
    plain = _json(capsys, "fit", data)
    payload = _json(capsys, "fit", data, "--priors", files / "priors.json")
    assert payload["temperature"] == plain["temperature"] and payload["nll_after"] == plain["nll_after"]
    labels = np.load(data)["labels"]
    frequencies = np.bincount(labels, minlength=4) / labels.size
    assert payload["reference_priors"] == pytest.approx(frequencies.tolist(), abs=1e-15)
    assert payload["prior_basis"] == f"label frequencies of {data}"
    corrected = evaluate(prior_corrected_log_probabilities(np.load(data)["logits"], temperature=payload["temperature"],
                                                           priors=[0.2, 0.2, 0.2, 0.4], reference_priors=frequencies),
                         labels)
    assert payload["corrected"]["nll"] == pytest.approx(corrected.nll, abs=1e-12, rel=0)
    assert payload["corrected"]["nll"] > payload["nll_after"], "priors other than the data's own fit it worse"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["fit", "{d}/reference.npz", "--priors", "0.5,0.5"], "--priors: has 2 values but the data has 4 classes"),
        (["fit", "{d}/reference.npz", "--priors", "0.5,0.5,-0.1,0.1"], "--priors: the prior of class 2 is -0.1"),
        (["fit", "{d}/reference.npz", "--priors", "0.5,0.5,nan,0.1"], "every prior must be finite and > 0"),
        (["fit", "{d}/reference.npz", "--priors", "a,b,c,d"], "--priors: 'a,b,c,d' is not a list of numbers"),
        (["fit", "{d}/reference.npz", "--priors", "{d}/none.json"], "--priors {d}/none.json: file not found"),
        (["fit", "{d}/reference.npz", "--priors", "{d}/object.json"], "holds dict"),
        (["fit", "{d}/reference.npz", "--reference-priors", "1,1,1,1"], "--reference-priors applies only with --priors"),
        (["evaluate", "{d}/reference.npz", "--priors", "1,1,1,1"], "--priors needs --reference-priors"),
        (["evaluate", "{d}/reference.npz", "--priors", "1,1,1,1", "--reference-priors", "1,0,1,1"],
         "--reference-priors: the prior of class 1 is 0.0"),
        (["fit", "{d}/reference.npz", "--priors", "1e308,1e308,1e308,1e308"],
         "--priors: the priors sum to inf (more than the largest float"),
        (["fit", "{d}/reference.npz", "--priors", "{d}/overflow.json"],
         "--priors {d}/overflow.json: the priors sum to inf"),
    ],
)
def test_bad_priors_exit_2_naming_the_flag(arguments: list[str], message: str, files: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    (files / "object.json").write_text(json.dumps({"priors": [1, 1, 1, 1]}))
    (files / "overflow.json").write_text(json.dumps([1e308] * 4))
    assert message.format(d=files) in refused(capsys, *(a.format(d=files) for a in arguments))
