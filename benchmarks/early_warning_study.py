"""The early warning before labels on real CIFAR logits: its test's level and power against the
χ² test it replaced and a KS test on the raw rows, and its predicted accuracy against the previous
estimate and NannyML's CBPE, side by side on the same windows.

Usage::

    .venv/bin/python -m benchmarks.early_warning_study --nannyml-python /tmp/nml-venv/bin/python
    .venv/bin/python -m benchmarks.early_warning_study --references 4 --files cifar10_wrn16-4_netcal   # a quick look

NannyML is not a dependency of Thermostat: ``--nannyml-python`` names the interpreter of an
environment that has it (``python -m venv /tmp/nml-venv && /tmp/nml-venv/bin/pip install nannyml``);
``benchmarks/cbpe_worker.py`` runs there. Without it the CBPE column is left out.

Method (docs/statistics.md states it with the results)
------------------------------------------------------
Per file of ``tests/data/real-logits`` and reference r (``--references``, default 40; seeded by
the file and r): the file's 10,000 rows are the population; the reference is 5,000 rows drawn
from it with replacement, T is fitted on them, and its confidence profile at T (labelled) is
what registration keeps. Per reference, window size n (500, 2,000) and condition,
``--windows`` (default 5) windows of n rows are drawn from the file with replacement: 200 windows
per cell by default. The conditions:

* **calibrated** — rows of the whole file, as they are (the false-alarm rate);
* **×1.1**, **×1.25** — every logit multiplied (the model over-confident: T off by 10 %, 25 %);
  the accuracy does not change, the confidences do, calibration is broken;
* **hardest half**, **easiest half** — rows from below (above) the file's median confidence at
  T: the traffic moved along the calibration curve, calibration holds.

Per window: the early warning (:func:`monitoring.warn_before_labels`, its defaults: the
Anderson–Darling test on the 191-bin histogram at level 0.01); the same against the reference
as a profile registered before (its 22 coarse bins, format 1: the window re-binned, the
accuracy by the clipped gap); the previous test, Pearson's χ² on the 22 coarse bins merged to
expected counts ≥ 5 (reimplemented here as it was); a two-sample Kolmogorov–Smirnov test on the
raw confidences (``scipy.stats.ks_2samp``, the same level). The predicted accuracy: the early
warning's (per bin), the previous estimate (mean confidence + the reference's gap, unclipped)
and CBPE's (NannyML, multiclass accuracy, its default isotonic calibration of every class's
probability, fitted on the reference's probabilities at T); each against the accuracy the
window's labels show.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats
from scipy.special import chdtrc

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.real_logits import DATA, FILES, file_index, load  # noqa: E402
from calibration import fit_temperature, top_label_confidence  # noqa: E402
from monitoring import (  # noqa: E402
    DEFAULT_POLICY,
    LEGACY_CONFIDENCE_EDGES,
    ConfidenceProfile,
    warn_before_labels,
)

SIZES = (500, 2_000)
CONDITIONS = ("calibrated", "x1.1", "x1.25", "hardest half", "easiest half")
FACTORS = {"calibrated": 1.0, "x1.1": 1.1, "x1.25": 1.25, "hardest half": 1.0, "easiest half": 1.0}
TESTS = ("anderson-darling", "anderson-darling, coarse", "chi-square, coarse", "ks, raw rows")
ESTIMATES = ("per bin", "previous", "cbpe")
REFERENCE_ROWS = 5_000


@dataclass
class Cell:
    """One file, window size and condition: per window, each test's p-value and each estimate."""

    p_values: dict[str, list[float]] = field(default_factory=lambda: {test: [] for test in TESTS})
    estimates: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in ESTIMATES})
    actual: list[float] = field(default_factory=list)
    covered: list[bool] = field(default_factory=list)
    above_one: int = 0


def chi_square_before(reference: ConfidenceProfile, window: ConfidenceProfile, min_expected: float = 5.0) -> float:
    """The previous early warning's test, as it was: Pearson's χ² of homogeneity on the coarse bins,
    adjacent bins merged left to right until each expected count is at least ``min_expected`` in
    both samples (the remainder joins the last kept bin)."""
    r_counts, w_counts = np.asarray(reference.count), np.asarray(window.count)
    n_r, n_w = int(r_counts.sum()), int(w_counts.sum())
    needed = min_expected * (n_r + n_w) / min(n_r, n_w)
    groups: list[list[int]] = []
    r_acc = w_acc = 0
    for r, w in zip(r_counts.tolist(), w_counts.tolist(), strict=True):
        r_acc, w_acc = r_acc + r, w_acc + w
        if r_acc + w_acc >= needed:
            groups.append([r_acc, w_acc])
            r_acc = w_acc = 0
    if r_acc + w_acc:
        if groups:
            groups[-1][0] += r_acc
            groups[-1][1] += w_acc
        else:
            groups.append([r_acc, w_acc])
    table = np.array(groups, dtype=np.float64).reshape(-1, 2)
    if table.shape[0] < 2:
        return math.nan
    total = table.sum(axis=1)
    expected = np.outer(total, [n_r, n_w]) / (n_r + n_w)
    statistic = float(np.sum((table - expected) ** 2 / expected))
    return float(chdtrc(table.shape[0] - 1, statistic))


def as_registered_before(profile: ConfidenceProfile) -> ConfidenceProfile:
    """``profile`` as a version registered before the fine bins holds it: format 1, coarse bins."""
    coarse = {key: value for key, value in profile.rebinned(LEGACY_CONFIDENCE_EDGES).to_dict().items()
              if not key.startswith("bin_")}
    return ConfidenceProfile.from_json(json.dumps({"format": 1} | coarse))


@dataclass
class Plan:
    """One file's draws: per reference its rows and T; per window size its windows' rows and conditions."""

    temperatures: NDArray[np.float64]
    reference_rows: NDArray[np.int64]
    rows: dict[int, NDArray[np.int64]]  # n -> (R, conditions × windows, n)
    conditions: tuple[str, ...]  # per window column


def plan_file(logits: NDArray[np.float32], labels: NDArray[np.int64], index: int, references: int, windows: int,
              seed: int) -> Plan:
    temperatures = np.empty(references)
    reference_rows = np.empty((references, REFERENCE_ROWS), dtype=np.int64)
    columns = tuple(condition for condition in CONDITIONS for _ in range(windows))
    rows = {n: np.empty((references, len(columns), n), dtype=np.int64) for n in SIZES}
    everything = np.arange(labels.shape[0])
    for r in range(references):
        rng = np.random.default_rng([seed, index, r])
        chosen = rng.integers(0, labels.shape[0], REFERENCE_ROWS)
        temperature = fit_temperature(logits[chosen], labels[chosen]).temperature
        temperatures[r], reference_rows[r] = temperature, chosen
        _, confidence = top_label_confidence(logits, temperature=temperature)
        median = np.median(confidence)
        pools = {"hardest half": np.flatnonzero(confidence <= median), "easiest half": np.flatnonzero(confidence > median)}
        for n in SIZES:
            for column, condition in enumerate(columns):
                pool = pools.get(condition, everything)
                rows[n][r, column] = pool[rng.integers(0, pool.shape[0], n)]
    return Plan(temperatures, reference_rows, rows, columns)


def run_cbpe(name: str, plan: Plan, python: str) -> dict[int, NDArray[np.float64]]:
    """NannyML's estimates for every window of ``plan`` (benchmarks/cbpe_worker.py in its environment)."""
    factors = np.array([FACTORS[condition] for condition in plan.conditions])
    with tempfile.TemporaryDirectory() as folder:
        job, out = Path(folder) / "job.npz", Path(folder) / "out.npz"
        arrays: dict[str, Any] = {"logits_path": str(DATA / f"{name}.npz"), "temperatures": plan.temperatures,
                                  "reference_rows": plan.reference_rows, "sizes": np.array(SIZES)}
        arrays |= {f"rows_{n}": plan.rows[n] for n in SIZES} | {f"factors_{n}": factors for n in SIZES}
        np.savez(job, **arrays)
        subprocess.run([python, str(ROOT / "benchmarks" / "cbpe_worker.py"), str(job), str(out)], check=True,
                       env={"NML_DISABLE_USAGE_LOGGING": "1", "PATH": "/usr/bin:/bin"}, stdout=subprocess.DEVNULL)
        result = np.load(out)
        return {n: result[f"cbpe_{n}"] for n in SIZES}


def run_file(name: str, references: int, windows: int, seed: int, nannyml: str | None) -> dict[tuple[int, str], Cell]:
    logits, labels = load(name)
    plan = plan_file(logits, labels, file_index(name), references, windows, seed)
    cbpe = run_cbpe(name, plan, nannyml) if nannyml else None
    cells = {(n, condition): Cell() for n in SIZES for condition in CONDITIONS}
    for r, temperature in enumerate(plan.temperatures):
        chosen = plan.reference_rows[r]
        predictions, base = top_label_confidence(logits, temperature=float(temperature))
        correct = predictions == labels
        reference = ConfidenceProfile.from_confidence(base[chosen], np.ones(chosen.shape[0], dtype=bool),
                                                      correct[chosen], temperature=float(temperature))
        before = as_registered_before(reference)
        confidence = {factor: top_label_confidence(factor * logits.astype(np.float64), temperature=float(temperature))[1]
                      for factor in sorted(set(FACTORS.values()))}
        gap = reference.accuracy - reference.mean_confidence
        for n in SIZES:
            for column, condition in enumerate(plan.conditions):
                rows = plan.rows[n][r, column]
                c = confidence[FACTORS[condition]][rows]
                none = np.zeros(n, dtype=bool)
                window = ConfidenceProfile.from_confidence(c, none, none, temperature=float(temperature))
                warning = warn_before_labels(window, reference)
                legacy = warn_before_labels(window, before)
                cell = cells[(n, condition)]
                cell.p_values["anderson-darling"].append(warning.p_value)
                cell.p_values["anderson-darling, coarse"].append(legacy.p_value)
                cell.p_values["chi-square, coarse"].append(chi_square_before(before, window.rebinned(LEGACY_CONFIDENCE_EDGES)))
                cell.p_values["ks, raw rows"].append(float(stats.ks_2samp(base[chosen], c).pvalue))
                actual = float(correct[rows].mean())
                previous = float(c.mean()) + gap
                cell.actual.append(actual)
                cell.estimates["per bin"].append(warning.predicted_accuracy)
                cell.estimates["previous"].append(previous)
                cell.estimates["cbpe"].append(math.nan if cbpe is None else float(cbpe[n][r, column]))
                cell.covered.append(warning.predicted_accuracy_low <= actual <= warning.predicted_accuracy_high)
                cell.above_one += previous > 1.0
    return cells


def rate(values: list[float], level: float) -> float:
    array = np.asarray(values, dtype=np.float64)
    return float(np.mean(array < level))


def mae(cell: Cell, name: str) -> float:
    return float(np.mean(np.abs(np.asarray(cell.estimates[name]) - np.asarray(cell.actual))))


def markdown(results: dict[str, dict[tuple[int, str], Cell]], level: float) -> str:
    windows = len(next(iter(next(iter(results.values())).values())).actual)
    lines = [f"**(a) The test.** Share of {windows} windows flagged at level {level:g}: the early warning's "
             "Anderson–Darling on the 191-bin histogram / the same on the 22 coarse bins (a reference registered "
             "before) / the previous χ² on the coarse bins / two-sample KS on the raw rows.", "",
             "| file | n | calibrated (false alarms) | ×1.1 | ×1.25 | hardest half | easiest half |",
             "| --- | ---: | --- | --- | --- | --- | --- |"]
    for name, cells in results.items():
        for n in SIZES:
            parts = [" / ".join(f"{rate(cells[(n, condition)].p_values[test], level):.3f}" for test in TESTS)
                     for condition in CONDITIONS]
            lines.append(f"| {name} | {n:,} | " + " | ".join(parts) + " |")
    lines += ["", "**(b) The predicted accuracy.** Mean absolute error against the accuracy the window's labels show: "
              "per bin (the early warning) / previous (mean confidence + the reference's gap) / NannyML CBPE; last "
              "column: coverage of the early warning's 95 % interval on calibrated windows.", "",
              "| file | n | calibrated | ×1.1 | ×1.25 | hardest half | easiest half | coverage |",
              "| --- | ---: | --- | --- | --- | --- | --- | ---: |"]
    wins = cells_total = 0
    for name, cells in results.items():
        for n in SIZES:
            parts = []
            for condition in CONDITIONS:
                cell = cells[(n, condition)]
                ours, cbpe = mae(cell, "per bin"), mae(cell, "cbpe")
                if math.isfinite(cbpe):
                    cells_total += 1
                    wins += ours <= cbpe
                parts.append(" / ".join(f"{mae(cell, e):.4f}" if math.isfinite(mae(cell, e)) else "n/a"
                                        for e in ESTIMATES))
            coverage = float(np.mean(cells[(n, "calibrated")].covered))
            lines.append(f"| {name} | {n:,} | " + " | ".join(parts) + f" | {coverage:.3f} |")
    above = sum(cell.above_one for cells in results.values() for cell in cells.values())
    total = sum(len(cell.actual) for cells in results.values() for cell in cells.values())
    lines += ["", f"Per bin at or below CBPE in {wins} of {cells_total} cells. The previous estimate exceeded 1 in "
              f"{above} of {total} windows; the early warning's never does."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.early_warning_study", description=__doc__.splitlines()[0])
    parser.add_argument("--references", type=int, default=40, help="references per file (default 40)")
    parser.add_argument("--windows", type=int, default=5, help="windows per reference and cell (default 5)")
    parser.add_argument("--files", nargs="+", default=list(FILES), help="files of tests/data/real-logits (no .npz)")
    parser.add_argument("--seed", type=int, default=22, help="seed (default 22)")
    parser.add_argument("--nannyml-python", help="the Python of an environment with nannyml (the CBPE column)")
    parser.add_argument("--json", type=Path, help="also write every window's numbers here")
    args = parser.parse_args(argv)
    results = {}
    for name in args.files:
        started = time.monotonic()
        results[name] = run_file(name, args.references, args.windows, args.seed, args.nannyml_python)
        print(f"{name}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({name: {f"{n} {condition}": {
            "p_values": cell.p_values, "estimates": cell.estimates, "actual": cell.actual, "covered": cell.covered}
            for (n, condition), cell in cells.items()} for name, cells in results.items()}, allow_nan=True))
    print(markdown(results, DEFAULT_POLICY.confidence_shift_level))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
