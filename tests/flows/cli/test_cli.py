"""The ``thermostat`` command line: JSON keys, tables, exit status, refusals (in-process, one subprocess)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import click
import pytest

from calibration import ScoredSet, json_safe, write_scored_set
from flows.cli.main import COMMANDS, main
from tests.support.cli import THERMOSTAT, run, run_json, thermostat

FIT_KEYS = {
    "temperature", "at_bound", "nll_before", "nll_after", "ece_before", "ece_after", "accuracy", "n",
    "n_classes", "bounds", "n_bins", "scheme", "temperature_low", "temperature_high", "confidence_level",
}
EVALUATE_KEYS = {
    "n", "n_classes", "temperature", "accuracy", "nll", "ece", "mce", "brier", "mean_confidence", "n_bins",
    "scheme", "bins",
}
BIN_KEYS = {"lower", "upper", "count", "mean_confidence", "accuracy", "gap", "sparse"}
GROUP_KEYS = {"group", "n", "ece", "accuracy", "mean_confidence"}
SWEEP_KEYS = {
    "threshold", "met", "coverage", "accepted_accuracy", "accuracy_lower_bound", "target_accuracy",
    "confidence_level", "accepted_count", "reason", "temperature", "n", "table",
}
QUALIFY_KEYS = {
    "passed", "failures", "warnings", "n", "n_classes", "class_counts", "n_errors", "id_overlap", "tv_distance",
    "min_total", "min_per_class", "max_tv_distance", "training_ids", "reference", "data",
}
COMPARE_KEYS = {
    "fit_data", "eval_data", "temperature", "at_bound", "bounds", "fit_n", "eval_n", "n_classes", "n_bins",
    "scheme", "before", "after", "nll_difference", "verdict", "id_overlap", "temperature_low", "temperature_high",
    "temperature_confidence_level",
}


def _overconfident(n: int, *, seed: int, k: int = 3, prefix: str = "") -> ScoredSet:
    """Labels drawn from softmax(z); the stored logits are 4 z: over-confident, true T = 4."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=1.2, size=(n, k))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = (p.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1)
    groups = np.array(["web", "mail"])[rng.integers(0, 2, n)]
    return ScoredSet.from_arrays(4.0 * z, labels, ids=[f"{prefix}{i}" for i in range(n)], groups=groups)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    write_scored_set(_overconfident(500, seed=1, prefix="f"), folder / "fit.npz")
    write_scored_set(_overconfident(500, seed=2, prefix="e"), folder / "eval.parquet")
    write_scored_set(_overconfident(500, seed=2, prefix="e"), folder / "eval.csv")
    return folder


# --------------------------------------------------------------------------- fit


def test_fit_json_has_the_documented_keys(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = run_json(capsys, "fit", data / "fit.npz")
    assert FIT_KEYS <= payload.keys()
    assert payload["at_bound"] is False
    assert payload["in_sample"] is True
    assert payload["bounds"] == [0.05, 20.0]
    assert (payload["n"], payload["n_classes"], payload["n_bins"], payload["scheme"]) == (500, 3, 15, "equal-width")
    assert 2.5 < payload["temperature"] < 6.0  # the logits are 4x too sharp
    assert payload["temperature_low"] < payload["temperature"] < payload["temperature_high"]
    assert payload["confidence_level"] == 0.95
    assert payload["nll_after"] <= payload["nll_before"]
    assert payload["ece_after"] < payload["ece_before"]


def test_fit_prints_a_table_by_default(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "fit", data / "fit.npz", "--bins", "10")
    assert code == 0 and err == ""
    assert "fitted temperature" in out and "ECE (10 equal-width bins)" in out and "NLL (mean, nats)" in out
    assert "(in-sample)" in out and "thermostat compare" in out


def test_fit_on_a_bound_warns_and_does_not_pass(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "fit", data / "fit.npz", "--lower", "0.5", "--upper", "1.5", "--json")
    assert code == 1  # ran, printed its report, but such a fit must never be registered
    payload = json.loads(out)
    assert payload["at_bound"] == "upper"
    assert payload["temperature"] == pytest.approx(1.5)
    assert err.startswith("thermostat: warning: the fitted temperature 1.5 sits on the upper bound")
    assert "must not be registered" in err


# --------------------------------------------------------------------------- evaluate


def test_evaluate_json_bins_and_null_for_undefined(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "evaluate", data / "eval.parquet", "--bins", "20", "--json")
    assert code == 0 and err == ""
    assert "NaN" not in out and "Infinity" not in out
    payload = json.loads(out)
    assert EVALUATE_KEYS <= payload.keys()
    assert "groups" not in payload
    assert len(payload["bins"]) == payload["n_bins"] == 20
    assert all(BIN_KEYS == set(entry) for entry in payload["bins"])
    assert sum(entry["count"] for entry in payload["bins"]) == payload["n"] == 500
    # With 3 classes no confidence is below 1/3: the first bins are empty, their accuracy undefined.
    assert payload["bins"][0]["count"] == 0 and payload["bins"][0]["accuracy"] is None


def test_evaluate_known_ece_from_probabilities(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.csv"
    path.write_text("id,label,prob_0,prob_1\na,1,0.3,0.7\nb,0,0.9,0.1\nc,0,0.4,0.6\n")
    payload = run_json(capsys, "evaluate", path, "--bins", "3")
    assert payload["ece"] == pytest.approx(1 / 3, abs=1e-12)
    assert payload["accuracy"] == pytest.approx(2 / 3)


def test_evaluate_by_group(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = run_json(capsys, "evaluate", data / "eval.csv", "--by-group", "--temperature", "4", "--scheme",
                       "equal-mass")
    assert payload["scheme"] == "equal-mass" and payload["temperature"] == 4.0
    assert {entry["group"] for entry in payload["groups"]} == {"web", "mail"}
    assert all(GROUP_KEYS == set(entry) for entry in payload["groups"])
    assert sum(entry["n"] for entry in payload["groups"]) == 500
    weighted = sum(entry["n"] * entry["ece"] for entry in payload["groups"]) / 500
    assert payload["group_weighted_ece"] == pytest.approx(weighted)


def test_evaluate_table_marks_sparse_bins(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "evaluate", data / "eval.csv", "--by-group", "--min-count", "30")
    assert code == 0
    assert "sparse" in out and "count-weighted mean of group ECEs" in out


def test_evaluate_by_group_without_groups_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_scored_set(ScoredSet.from_arrays([[1.0, 0.0], [0.0, 1.0]], [0, 1]), tmp_path / "s.npz")
    code, out, err = run(capsys, "evaluate", path, "--by-group")
    assert (code, out) == (2, "")
    assert err.startswith(f"thermostat: error: {path}: has no groups")


# --------------------------------------------------------------------------- sweep


def test_sweep_json(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = run_json(capsys, "sweep", data / "eval.csv", "--temperature", "4", "--target-accuracy", "0.8")
    assert SWEEP_KEYS <= payload.keys()
    assert payload["met"] is True and payload["accuracy_lower_bound"] >= 0.8
    assert 0 < payload["coverage"] < 1
    assert any(row["threshold"] == payload["threshold"] for row in payload["table"])
    assert [row["threshold"] for row in payload["table"]] == sorted(row["threshold"] for row in payload["table"])


def test_sweep_unreachable_target_prints_null(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "sweep", data / "eval.csv", "--temperature", "4", "--target-accuracy", "0.999",
                         "--json")
    assert code == 1  # ran, but no threshold passes: the same contract as qualify
    assert err.startswith("thermostat: warning: no threshold meets the target")
    payload = json.loads(out)
    assert payload["met"] is False and payload["threshold"] is None and payload["accepted_accuracy"] is None


def test_sweep_requires_a_temperature(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "sweep", data / "eval.csv", "--target-accuracy", "0.9")
    assert (code, out) == (2, "")
    assert "--temperature" in err


# --------------------------------------------------------------------------- qualify


def test_qualify_passes_with_exit_0(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = run_json(capsys, "qualify", data / "eval.csv", "--min-total", "100", "--min-per-class", "10",
                       "--reference", data / "fit.npz")
    assert QUALIFY_KEYS <= payload.keys()
    assert payload["passed"] is True and payload["failures"] == []
    assert sum(payload["class_counts"]) == 500 and payload["tv_distance"] is not None


def test_qualify_failure_exits_1_and_names_the_problem(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    training = data / "training-ids.txt"
    training.write_text("e3\n\ne7\r\nunrelated\n")
    code, out, err = run(capsys, "qualify", data / "eval.csv", "--training-ids", training, "--min-total", "1000",
                         "--json")
    assert code == 1 and err == ""
    payload = json.loads(out)
    assert payload["passed"] is False and payload["id_overlap"] == 2
    assert len(payload["failures"]) == 2
    code, out, _ = run(capsys, "qualify", data / "eval.csv", "--training-ids", training)
    assert code == 1 and "DOES NOT QUALIFY" in out and "failure:" in out


def test_qualify_bad_inputs_exit_2(data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "qualify", data / "eval.csv", "--training-ids", tmp_path / "missing.txt")
    assert (code, out) == (2, "") and "training-ids file not found" in err
    binary = write_scored_set(ScoredSet.from_arrays([[1.0, 0.0]], [0]), tmp_path / "binary.npz")
    code, out, err = run(capsys, "qualify", data / "eval.csv", "--reference", binary)
    assert (code, out) == (2, "") and "has 2 classes" in err


# --------------------------------------------------------------------------- compare


def test_compare_json(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = run_json(capsys, "compare", data / "fit.npz", data / "eval.parquet", "--resamples", "300", "--seed", "3")
    assert COMPARE_KEYS <= payload.keys()
    assert payload["verdict"] == "improved"
    difference = payload["nll_difference"]
    assert difference["low"] <= difference["estimate"] <= difference["high"] < 0
    assert (difference["n_resamples"], difference["seed"]) == (300, 3)
    assert payload["after"]["nll"] < payload["before"]["nll"]
    assert payload["before"]["temperature"] == 1.0 and payload["after"]["temperature"] == payload["temperature"]
    assert payload["id_overlap"] == 0


def test_compare_refuses_evaluating_on_the_fit_file(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "compare", data / "fit.npz", data / "fit.npz")
    assert (code, out) == (2, "") and "test data never chooses T" in err


def test_compare_warns_about_shared_ids(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "compare", data / "eval.parquet", data / "eval.csv", "--resamples", "100")
    assert code == 0 and "verdict:" in out
    assert "500 ids of" in err and "also appear in" in err


# --------------------------------------------------------------------------- bad input: exit 2, stderr, nothing else


def _bad_files(folder: Path) -> dict[str, tuple[Path, str]]:
    header = "id,label,logit_0,logit_1\n"
    files = {
        "non-finite logit": ("a.csv", header + "a,0,1,2\nb,1,nan,2\n", "row 1 (id 'b'), column logit_0"),
        "bad label": ("b.csv", header + "a,0,1,2\nb,5,1,2\n", "row 1 (id 'b'), column label"),
        "duplicate id": ("c.csv", header + "a,0,1,2\na,1,1,2\n", "id 'a' appears in row 0 and row 1"),
        "missing column": ("d.csv", "id,logit_0,logit_1\na,1,2\n", "missing column(s) label"),
        "unreadable file": ("e.parquet", "this is not parquet", "cannot be read as Parquet"),
        "unknown extension": ("f.txt", header, "unknown extension '.txt'"),
        "probability not positive": ("g.csv", "id,label,prob_0,prob_1\na,0,0.5,0.5\nb,1,0,1\n",
                                     "row 1 (id 'b'), column prob_0: probability 0.0 is <= 0"),
        "probabilities not summing to 1": ("h.csv", "id,label,prob_0,prob_1\na,0,0.5,0.5\nb,1,0.3,0.3\n",
                                           "row 1 (id 'b'): probabilities in the prob_ columns sum to 0.6"),
        "label not an integer": ("i.csv", header + "a,0,1,2\nb,0.5,1,2\n", "row 1 (id 'b'), column label: '0.5' is not an integer"),
        "one class": ("j.csv", "id,label,logit_0\na,0,1\n", "at least 2 classes are required"),
        "empty set": ("k.csv", header, "the scored set is empty (0 rows)"),
    }
    out: dict[str, tuple[Path, str]] = {}
    for problem, (name, content, fragment) in files.items():
        path = folder / name
        path.write_text(content)
        out[problem] = (path, fragment)
    out["file not found"] = (folder / "missing.npz", "file not found")
    mismatched = folder / "l.npz"
    np.savez(mismatched, logits=np.zeros((3, 2)), labels=np.array([0, 1]))
    out["mismatched lengths"] = (mismatched, "key 'labels' has shape (2,); expected (3,)")
    return out


@pytest.mark.parametrize(
    "problem",
    ["non-finite logit", "bad label", "duplicate id", "missing column", "unreadable file", "unknown extension",
     "file not found", "probability not positive", "probabilities not summing to 1", "label not an integer",
     "one class", "empty set", "mismatched lengths"],
)
@pytest.mark.parametrize("command", ["fit", "evaluate", "sweep", "qualify", "compare-fit", "compare-eval"])
def test_bad_input_exits_2_with_the_message_on_stderr(
    problem: str, command: str, tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, fragment = _bad_files(tmp_path)[problem]
    argv: list[object] = {
        "fit": ["fit", path],
        "evaluate": ["evaluate", path, "--json"],
        "sweep": ["sweep", path, "--temperature", "2", "--target-accuracy", "0.9"],
        "qualify": ["qualify", path],
        "compare-fit": ["compare", path, data / "eval.csv"],
        "compare-eval": ["compare", data / "fit.npz", path, "--json"],
    }[command]
    before = sorted(tmp_path.rglob("*"))
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith(f"thermostat: error: {path}: ")
    assert fragment in err
    assert err.count("\n") == 1  # one line, no traceback
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["evaluate", "DATA", "--bins", "0"], "--bins must be >= 1"),
        (["evaluate", "DATA", "--temperature", "-1"], "temperature"),
        (["fit", "DATA", "--lower", "3", "--upper", "2"], "--lower and --upper must satisfy 0 < lower < upper"),
        (["sweep", "DATA", "--temperature", "1", "--target-accuracy", "1.5"], "--target-accuracy"),
        (["evaluate", "DATA", "--bins", "many"], "Invalid value for '--bins': 'many' is not a valid integer"),
        (["evaluate", "DATA", "--scheme", "quantile"], "Invalid value for '--scheme': 'quantile' is not one of"),
        (["frobnicate"], "No such command 'frobnicate'"),
        ([], "Missing command"),
    ],
)
def test_bad_options_exit_2(argv: list[str], fragment: str, data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *[str(data / "eval.csv") if arg == "DATA" else arg for arg in argv])
    assert (code, out) == (2, "")
    assert fragment in err


def test_help_documents_keys_and_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "evaluate", "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert "group_weighted_ece" in flat and "exit status (every command): 0 ran and passed" in flat and "2 bad input" in flat
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "demo" in out and "compare" in out


def test_json_safe_turns_nan_and_infinity_into_null() -> None:
    value = {"a": np.array([1.0, np.nan]), "b": (np.float32(np.inf), np.int64(3)), "c": math.nan, "d": np.bool_(True)}
    assert json_safe(value) == {"a": [1.0, None], "b": [None, 3], "c": None, "d": True}


# --------------------------------------------------------------------------- demo dispatch


def test_a_command_of_the_table_is_imported_when_run_and_handed_its_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, ...]] = []
    tool = types.ModuleType("a_tool")

    @click.command()
    @click.argument("model")
    @click.option("--port", type=int)
    @click.argument("rest", nargs=-1)
    def command(model: str, port: int, rest: tuple[str, ...]) -> int:
        calls.append((model, str(port), *rest))
        if model == "stop":
            raise KeyboardInterrupt  # Ctrl-C in a command that runs until stopped
        return 3

    tool.command = command  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "a_tool", tool)
    monkeypatch.setitem(COMMANDS, "a-tool", ("a_tool:command", "a tool"))
    assert main(["a-tool", "MODEL", "--port", "1", "--", "--workers", "2"]) == 3  # its status; `--` reaches it
    assert calls == [("MODEL", "1", "--workers", "2")]
    assert main(["a-tool", "stop"]) == 130
    assert main(["a-tool", "--help"]) == 0


def test_serve_hands_what_follows_double_dash_to_mlflow_through_the_root() -> None:
    """``thermostat serve MODEL [options] -- ARGS``: the root hands ``--`` on, and serve's own options
    stop there (a ``--port`` after it is mlflow's)."""
    from flows.cli.main import _root

    argv = ["serve", "m", "--port", "1", "--", "--workers", "2", "--port", "9"]
    root = _root.make_context("thermostat", argv)
    serve = _root.get_command(root, "serve")
    assert serve is not None
    params = serve.make_context("serve", root.args, parent=root).params
    assert (params["model"], params["port"], params["serve_arguments"]) == ("m", 1, ("--workers", "2", "--port", "9"))


def test_demo_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "flows.cli.demo", None)  # the import system now reports it missing
    code, out, err = run(capsys, "demo")
    assert (code, out) == (2, "")
    assert "the demo command is not available: flows.cli.demo is missing from this installation" in err


# --------------------------------------------------------------------------- the installed console script


def test_console_script(data: Path) -> None:
    done = thermostat("evaluate", data / "eval.csv", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n"] == 500
    refused = thermostat("fit", data / "missing.csv")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("thermostat: error: ")


# --------------------------------------------------------------------------- one contract, flags, pipes


def test_refusals_name_the_flags_not_the_python_arguments(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    payload = run_json(capsys, "qualify", data / "fit.npz", "--min-per-class", "1", "--min-total", "10")
    warnings = " ".join(payload["warnings"])
    assert "pass --training-ids FILE" in warnings and "pass --reference DATA" in warnings
    assert "training_ids" not in warnings and "reference_labels" not in warnings
    code, out, _ = run(capsys, "qualify", data / "fit.npz", "--min-per-class", "400")
    assert code == 1 and "set --min-per-class to change" in out and "min_per_class" not in out
    code, out, err = run(capsys, "qualify", data / "fit.npz", "--reference", data / "eval.csv", "--max-tv", "2")
    assert (code, out) == (2, "") and "--max-tv" in err and "max_tv_distance" not in err


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("evaluate", "eval.csv", "--min-count", "-1"), "--min-count must be >= 0; got -1"),
        (("evaluate", "eval.csv", "--bins", "2000000000"), "--bins must be at most 100,000; got 2,000,000,000"),
        (("fit", "fit.npz", "--bins", "0"), "--bins must be >= 1; got 0"),
        (("compare", "fit.npz", "eval.csv", "--resamples", "1000000000"),
         "--resamples must be at most 1,000,000; got 1,000,000,000"),
    ],
)
def test_out_of_range_flags_are_bad_input_before_any_allocation(
    data: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], flag: str
) -> None:
    command, *rest = args
    resolved = [str(data / arg) if arg.endswith((".csv", ".npz")) else arg for arg in rest]
    code, out, err = run(capsys, command, *resolved)
    assert (code, out) == (2, "")
    assert flag in err and err.count("\n") == 1


def test_compare_that_establishes_nothing_does_not_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(5)
    for name in ("fit", "eval"):  # calibrated logits: T stays near 1, the change is not established
        logits = rng.normal(size=(400, 3))
        probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        labels = np.array([rng.choice(3, p=row) for row in probabilities])
        write_scored_set(ScoredSet.from_arrays(logits, labels, ids=[f"{name}-{i}" for i in range(400)]),
                         tmp_path / f"{name}.npz")
    code, out, err = run(capsys, "compare", tmp_path / "fit.npz", tmp_path / "eval.npz", "--resamples", "300", "--json")
    assert code == 1 and json.loads(out)["verdict"] != "improved"
    assert "the improvement is not established" in err


def test_a_reader_that_stops_early_is_not_an_error(data: Path) -> None:
    # `thermostat evaluate DATA | head -4`: the reader closes the pipe after four lines.
    with subprocess.Popen([THERMOSTAT, "evaluate", data / "eval.csv"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        assert process.stdout is not None and process.stderr is not None
        head = [process.stdout.readline() for _ in range(4)]
        process.stdout.close()
        err = process.stderr.read()
        code = process.wait(timeout=120)
    assert head[0].startswith(str(data / "eval.csv"))
    assert code == 0 and "Traceback" not in err and "BrokenPipeError" not in err, err


def test_help_states_one_exit_contract(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("fit", "evaluate", "sweep", "qualify", "compare"):
        code, out, _ = run(capsys, command, "--help")
        flat = " ".join(out.split())
        assert code == 0
        assert "1 ran and printed its report, but the result did not pass" in flat
        assert "2 bad input" in flat and "3 the computation failed" in flat


def test_the_class_limit_is_a_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wide.csv"
    path.write_text("id,label," + ",".join(f"logit_{k}" for k in range(12)) + "\na,0," + ",".join(["0"] * 12) + "\n")
    code, out, err = run(capsys, "evaluate", path, "--max-classes", "10")
    assert (code, out) == (2, "")
    assert "12 classes found" in err and "pass --max-classes" in err and "max_classes=" not in err
    assert run(capsys, "evaluate", path, "--max-classes", "12")[0] == 0
