"""`thermostat fit` and `thermostat evaluate` check each logit once: when the set is read.

White-box: the test spies on the core's validators and finiteness scans wherever a module of
``calibration`` has bound them (found through ``sys.modules``, as they are private), runs the
command in-process, and counts.

What is counted
---------------
- validator calls: ``check_logits``, ``check_finite_logits`` and ``check_labels``, the checks
  every public function applies to arrays it does not trust;
- finiteness scans: ``first_refused_row`` and ``first_nonfinite_row``, the reads that look
  for a non-finite logit or a row spanning too much (the compiled kernel or its numpy
  reference), with the rows each was given. Reading a set makes exactly one: N rows.
- calibration passes: ``calibration_sums`` (per-bin counts and sums at one temperature), the
  numeric work ``evaluate`` and the ECE need: one per temperature.

Not counted: the fit's own passes (``nll_expansion_sums``, over a warm-start sample and then
the whole set): numeric work, not validation; a non-finite logit would make their sums NaN,
but a validated set has none, so they never scan for one.

Before the validate-once step, ``fit`` on a 20,000 x 10 set made 6 ``check_logits`` and 6
``check_labels`` calls and 5 scans of the whole set (100,000 rows) after the read's own
checks; ``evaluate`` 2 of each (3 with ``--by-group``).
"""

from __future__ import annotations

import collections
import functools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from calibration import (
    ScoredSet,
    accuracy,
    evaluate,
    expected_calibration_error,
    fit_temperature,
    read_scored_set,
    write_scored_set,
)
from tests.support.cli import run_json

VALIDATORS = ("check_logits", "check_finite_logits", "check_labels")
SCANS = ("first_refused_row", "first_nonfinite_row")
PASSES = ("calibration_sums",)


class Spy:
    """Calls per spied function, and rows given to the scans and the passes."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.rows: collections.Counter[str] = collections.Counter()

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def spied(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name not in VALIDATORS:
                self.rows[name] += int(np.shape(args[0])[0])
            return function(*args, **kwargs)

        return spied

    def count(self, names: tuple[str, ...]) -> int:
        return sum(self.calls[name] for name in names)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spy]:
    recorder = Spy()
    modules = [module for name, module in sys.modules.items() if name.startswith("calibration._")]
    home = dict.fromkeys(VALIDATORS, "calibration._validation") | dict.fromkeys((*SCANS, *PASSES), "calibration._kernels")
    originals: dict[str, Callable[..., Any]] = {name: getattr(sys.modules[module], name) for name, module in home.items()}
    bound = 0
    for module in modules:
        for name, function in originals.items():
            if vars(module).get(name) is function:  # every module that bound it, its own included
                monkeypatch.setattr(module, name, recorder.wrap(name, function))
                bound += 1
    assert bound > len(originals)  # the spies sit where the callers look the functions up
    yield recorder


def _scored(n: int, k: int, dtype: type, seed: int) -> ScoredSet:
    """Over-confident logits: labels drawn from softmax(z), logits 3 z."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=1.5, size=(n, k))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = (p.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1)
    groups = np.array(["web", "mail", "scan"])[rng.integers(0, 3, n)]
    return ScoredSet.from_arrays((3.0 * z).astype(dtype), labels, ids=[f"x{i}" for i in range(n)], groups=groups)


# A set large enough for the compiled kernels (200,000 logits) and one for the numpy path.
SETS = {"20000x10-float32.npz": (20_000, 10, np.float32), "3000x4-float64.csv": (3_000, 4, np.float64)}


@pytest.fixture(scope="module", params=[pytest.param(name, marks=pytest.mark.slow) if SETS[name][0] >= 20_000 else name
                                        for name in sorted(SETS)])  # the compiled path's set: a minute on 2 cores
def data_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    name = request.param
    n, k, dtype = SETS[name]
    return write_scored_set(_scored(n, k, dtype, seed=n), tmp_path_factory.mktemp("validate-once") / name)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return run_json(capsys, *argv)


def _assert_checked_once(spy: Spy, n: int) -> None:
    assert spy.count(VALIDATORS) == 0, dict(spy.calls)
    assert spy.count(SCANS) == 1, dict(spy.calls)
    assert sum(spy.rows[name] for name in SCANS) == n  # every row once: the read's own scan


def _reference(logits: np.ndarray, labels: np.ndarray, temperature: float, n_bins: int) -> dict[str, Any]:
    """Accuracy, mean NLL, equal-width ECE and bin counts in plain float64 numpy."""
    z = logits.astype(np.float64) / temperature
    z -= z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    confidence = np.exp(log_p.max(axis=1))
    correct = logits.argmax(axis=1) == labels
    bins = np.clip(np.ceil(confidence * n_bins).astype(int) - 1, 0, n_bins - 1)  # (m/M, (m+1)/M]
    count = np.bincount(bins, minlength=n_bins)
    gap = np.bincount(bins, weights=correct - confidence, minlength=n_bins)
    return {
        "accuracy": float(correct.mean()),
        "nll": float(-log_p[np.arange(len(labels)), labels].mean()),
        "ece": float(np.abs(gap).sum() / len(labels)),
        "count": count.tolist(),
    }


def test_fit_checks_each_logit_once(data_file: Path, spy: Spy, capsys: pytest.CaptureFixture[str]) -> None:
    payload = _run(["fit", str(data_file)], capsys)

    n = payload["n"]
    _assert_checked_once(spy, n)
    assert spy.calls["calibration_sums"] == 2 and spy.rows["calibration_sums"] == 2 * n  # ECE at T = 1 and at T

    # The same numbers as the public functions give on plain (untrusted, checked) arrays ...
    scored = read_scored_set(data_file)
    logits, labels = np.array(scored.logits), np.array(scored.labels)
    fit = fit_temperature(logits, labels)
    assert payload["temperature"] == fit.temperature
    assert (payload["nll_before"], payload["nll_after"]) == (fit.nll_before, fit.nll_after)
    assert payload["ece_before"] == expected_calibration_error(logits, labels)
    assert payload["ece_after"] == expected_calibration_error(logits, labels, temperature=fit.temperature)
    assert payload["accuracy"] == accuracy(logits, labels)
    # ... and as plain numpy.
    before, after = _reference(logits, labels, 1.0, 15), _reference(logits, labels, fit.temperature, 15)
    assert payload["ece_before"] == pytest.approx(before["ece"], rel=1e-9, abs=1e-12)
    assert payload["ece_after"] == pytest.approx(after["ece"], rel=1e-9, abs=1e-12)
    assert payload["accuracy"] == before["accuracy"]
    assert payload["nll_before"] == pytest.approx(before["nll"], rel=1e-9)
    assert payload["nll_after"] == pytest.approx(after["nll"], rel=1e-9)
    assert payload["nll_after"] < payload["nll_before"] and payload["temperature"] > 1.5  # over-confident set


@pytest.mark.parametrize("options", [[], ["--temperature", "2.5", "--by-group"]], ids=["plain", "by-group"])
def test_evaluate_checks_each_logit_once(
    data_file: Path, options: list[str], spy: Spy, capsys: pytest.CaptureFixture[str]
) -> None:
    payload = _run(["evaluate", str(data_file), *options], capsys)

    n = payload["n"]
    _assert_checked_once(spy, n)
    assert spy.calls["calibration_sums"] == 1 and spy.rows["calibration_sums"] == n

    scored = read_scored_set(data_file)
    logits, labels = np.array(scored.logits), np.array(scored.labels)
    temperature = payload["temperature"]
    groups = np.array(scored.groups) if "--by-group" in options else None
    expected = evaluate(logits, labels, temperature=temperature, groups=groups).to_dict()
    where = {"engine": "local", "n_partitions": 1, "n_workers": 1}  # where the work ran
    assert {key: value for key, value in payload.items() if key != "data"} == expected | where
    reference = _reference(logits, labels, temperature, 15)
    assert [row["count"] for row in payload["bins"]] == reference["count"]
    assert payload["accuracy"] == reference["accuracy"]
    assert payload["ece"] == pytest.approx(reference["ece"], rel=1e-9, abs=1e-12)
    assert payload["nll"] == pytest.approx(reference["nll"], rel=1e-9)


def test_untrusted_input_is_still_checked(spy: Spy) -> None:
    """Arrays, and a set built field by field, are checked by every public function."""
    logits = np.array([[0.0, 1.0], [np.nan, 1.0], [2.0, 0.0]])
    labels = np.array([1, 0, 0])
    for function in (fit_temperature, accuracy, expected_calibration_error, evaluate):
        with pytest.raises(ValueError, match="logits row 1 contains nan; every logit must be finite"):
            function(logits, labels)
        with pytest.raises(ValueError, match="logits row 1 contains nan"):
            function(ScoredSet(ids=np.array(["a", "b", "c"]), logits=logits, labels=labels))
    assert spy.calls["check_logits"] == 8

    valid = ScoredSet.from_arrays(np.nan_to_num(logits), labels)
    with pytest.raises(TypeError, match="labels were given with a ScoredSet"):
        evaluate(valid, labels)
    with pytest.raises(TypeError, match="labels are required with logits"):
        fit_temperature(logits)
    assert evaluate(valid).to_dict() == evaluate(np.nan_to_num(logits), labels).to_dict()


def test_a_registration_and_a_refit_check_their_rows_once(spy: Spy) -> None:
    """The flow path is validate-once too: the holdout (or the refit's traffic) is checked when it
    becomes a ScoredSet; acceptance, the fit, the gate, the evidence and a refit's verification
    read it without checking or scanning it again (each step used to re-check the arrays it
    was handed: 5-6 scans per registration)."""
    from datetime import UTC, datetime, timedelta

    from flows.pipelines.steps import (
        RefitOrigin,
        accept_checkpoint,
        accept_registered_version,
        gate_threshold,
        refit_temperature,
        refit_temperature_by_time,
        verify_refit,
    )
    from flows.records.versions import registered_version
    from flows.settings import ThermostatSettings

    settings = ThermostatSettings(min_total=100, min_per_class=5)
    holdout, traffic = _scored(3_000, 4, np.float64, seed=1), _scored(3_000, 4, np.float64, seed=2)
    spy.calls.clear()
    spy.rows.clear()
    accepted = accept_checkpoint(
        checkpoint_uri="runs:/abc/checkpoint", checkpoint_digest="a" * 64, checkpoint_output="logits",
        holdout=holdout, training_ids=np.array(["t-1"]), champion=None, train_steps=1, train_data_version="v1",
        settings=settings)
    gated = gate_threshold(refit_temperature(accepted, settings=settings), settings=settings)
    assert spy.count(VALIDATORS) == 0 and spy.count(SCANS) == 0, dict(spy.calls)

    from flows.pipelines.reports import version_record  # the refit's parent: registered from the gated fit

    record = version_record(gated, idempotency_key="k" * 64, run_id="run")
    parent = registered_version("m", "1", record.to_tags(), ["champion"])
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    origin = RefitOrigin(parent=parent, alias="champion", window_start=t0, window_end=t0 + timedelta(hours=1),
                         first_served_at=t0, last_served_at=t0 + timedelta(hours=1), fit_fraction=0.5)
    spy.calls.clear()
    refit = accept_registered_version(origin=origin, checkpoint_digest="a" * 64, traffic=traffic,
                                      training_ids=np.array([], dtype=str), settings=settings)
    verify_refit(gate_threshold(refit_temperature_by_time(refit, settings=settings), settings=settings),
                 settings=settings)
    assert spy.count(VALIDATORS) == 0 and spy.count(SCANS) == 0, dict(spy.calls)
