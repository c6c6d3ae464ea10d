"""Which shift is it? The shift diagnosis and its fixes on real CIFAR logits (issue 22).

Usage::

    .venv/bin/python -m benchmarks.shift_study                          # 200 windows a cell, every file
    .venv/bin/python -m benchmarks.shift_study --windows 20 --files cifar10_wrn16-4_netcal
    .venv/bin/python -m benchmarks.shift_study --jobs 2 --json shift.json  # chunks of 25 windows in 2 processes
    .venv/bin/python -m benchmarks.shift_study --from-json goals.json rest.json --json shift.json  # merge runs
    .venv/bin/python -m benchmarks.shift_study --weakest --windows 100   # half of one class removed vs chi-squared
    .venv/bin/python -m benchmarks.shift_study --reweighting --windows 100   # EM's priors vs the true ones

The full study (12 conditions x 3 sizes x 200 windows x 6 files) takes about 40 minutes of CPU;
a condition draws the same rows whichever other conditions run, so it can be run in parts
(``--conditions``) and the parts merged. ``--json`` is rewritten after every finished chunk.

Method (docs/statistics.md states it with the results)
------------------------------------------------------
Each file of ``tests/data/real-logits`` (10,000 rows) is taken as the population. For every
window index w (seeded by the file and w):

1. the **reference** is 5,000 rows drawn with replacement; T is fitted on it, and what a
   version registers is computed from it at T: the debiased ℓ1 ECE with its interval, the
   temperature sums, the confidence profile and :class:`calibration.ReferencePriors`;
2. each cell draws a **window** of n rows (500, 2,000, 5,000) with replacement, independently
   of the reference (two independent samples of one population: the tests' null holds
   exactly, at every size), under its condition:

   * ``no change``;
   * ``label 20 %`` / ``40 %`` / ``60 %``: one class (drawn per window) raised to that share of
     the traffic, p(x | y) unchanged (rows drawn with weight π'_y / n_y);
   * ``dirichlet``: priors drawn from Dirichlet(2, …, 2);
   * ``x0.8`` / ``x1.25`` / ``x1.5``: every logit multiplied (the optimal T moves by that factor);
   * ``label 40 % x1.25``: both;
   * ``easiest half`` / ``hardest half``: only rows whose top-label confidence at T is above
     (below) the population's median (a covariate shift inside the support: p(y | x) unchanged);
   * ``collapse``: 70 % of the labels replaced by a random class (a model that lost its accuracy);

3. the check on the window (all rows served and labelled), :func:`monitoring.check_version`
   (what the monitor and ``thermostat diagnose`` run) with the default policy, seeded by the window: the drift decision at the
   deployed posteriors, the served rows' priors (EM on a sample of at most 2,000 rows), the
   prior test and the early warning's confidence test (one family at level 0.01, weighted Holm), the
   decision again at the posteriors re-weighted to the labelled class mix and the NLL gain of
   re-weighting to EM's priors, the accuracy
   against a floor of half the reference's accuracy; then :func:`calibration.diagnose_shift`;
   BBSE on all the served rows beside EM;
   at 2,000 rows, in the first 25 windows of a file, EM is cross-checked against the
   ``abstention`` package's (Alexandari et al.'s code; ``pip install abstention==0.1.3.1``, in the
   ``bench`` extra; the columns stay empty without it) on the same sample;
4. at 2,000 rows, the **fixes** are scored on two fresh samples of 5,000 rows: the same
   condition (``E``) and the condition with the class mix back at the reference's (``R``; the
   logit factor kept): no fix, a temperature refit on the window, the prior correction (EM's
   priors), and the fix the diagnosis chose.

Prior-estimation error: the total-variation distance between an estimate and the window's
actual class frequencies.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # a core a process (its pool's processes inherit it); an importer keeps its own
    for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import multiprocessing  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from concurrent.futures import ProcessPoolExecutor, as_completed  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from numpy.typing import NDArray  # noqa: E402
from scipy.special import softmax  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.real_logits import FILES, file_index, load  # noqa: E402
from calibration import (  # noqa: E402
    CalibrationStats,
    PriorEstimate,
    PriorShiftTest,
    ReferencePriors,
    ServedPriorStats,
    ShiftDiagnosis,
    TemperatureStats,
    calibration_error_from_stats,
    compile_kernels,
    estimate_priors_bbse,
    estimate_priors_em,
    fit_temperature,
    holm_levels,
    prior_corrected_logits,
    prior_shift_test,
)
from monitoring import (  # noqa: E402
    DEFAULT_POLICY,
    CheckReference,
    CheckState,
    ConfidenceProfile,
    DriftReference,
    WindowInMemory,
    check_version,
    decide_drift,
    labelled_mix,
    reweight_window,
)

SIZES = (500, 2_000, 5_000)
CONDITIONS = ("no change", "label 20 %", "label 40 %", "label 60 %", "dirichlet", "x0.8", "x1.25", "x1.5",
              "label 40 % x1.25", "easiest half", "hardest half", "collapse")
KINDS = ("no_change", "label_shift", "calibration_drift", "accuracy_collapse", "covariate_shift", "undetermined")
#: A kind's column title ("no change" is said only with calibration established).
TITLES = {"no_change": "calibrated (no change)"}
#: The diagnosis each condition should get.
EXPECTED = {"no change": "no_change", "label 20 %": "label_shift", "label 40 %": "label_shift",
            "label 60 %": "label_shift", "dirichlet": "label_shift", "x0.8": "calibration_drift",
            "x1.25": "calibration_drift", "x1.5": "calibration_drift", "label 40 % x1.25": "calibration_drift",
            "easiest half": "covariate_shift", "hardest half": "covariate_shift", "collapse": "accuracy_collapse"}
FIX_SIZE = 2_000
EVALUATION_ROWS = 5_000
REFERENCE_ROWS = 5_000
SAMPLE_CAPACITY = 2_000
PRIOR_LEVEL = 0.01
#: The cells (at FIX_SIZE rows) where EM is cross-checked against the abstention package's.
CROSS_CHECKED = ("no change", "label 20 %", "label 40 %", "label 60 %", "dirichlet")
#: ... in the first this many windows of each file, at most this many EM steps (its EM computes
#: the whole posterior matrix every step: ~1 ms at K = 100, and the weak 100-class model needs thousands).
CROSS_CHECK_WINDOWS = 25
CROSS_CHECK_STEPS = 1_000


@dataclass(frozen=True, slots=True)
class Reference:
    """What a version registers, computed from the reference rows at their fitted T."""

    temperature: float
    drift: DriftReference
    priors: ReferencePriors
    profile: ConfidenceProfile
    accuracy: float


def reference_of(logits: NDArray[np.float32], labels: NDArray[np.int64]) -> Reference:
    temperature = fit_temperature(logits, labels).temperature
    stats = CalibrationStats.from_logits(logits, labels, temperature=temperature)
    ece = calibration_error_from_stats(stats, estimator="debiased_l1")
    drift = DriftReference.of(ece.estimate, ece_interval=(ece.low, ece.high),
                              temperature_stats=TemperatureStats.from_logits(logits, labels, temperature=temperature))
    return Reference(temperature=temperature, drift=drift,
                     priors=ReferencePriors.from_logits(logits, labels, temperature=temperature),
                     profile=ConfidenceProfile.from_logits(logits, labels, temperature=temperature),
                     accuracy=float((logits.argmax(axis=1) == labels).mean()))


@dataclass(frozen=True, slots=True)
class Condition:
    """How a condition draws rows: a weight per population row, a logit factor, a label noise share."""

    weights: NDArray[np.float64]
    factor: float
    noise: float


def condition_of(name: str, labels: NDArray[np.int64], confidence: NDArray[np.float64],
                 rng: np.random.Generator) -> Condition:
    n_classes = int(labels.max()) + 1
    counts = np.bincount(labels, minlength=n_classes).astype(np.float64)
    uniform = np.full(labels.shape[0], 1.0 / labels.shape[0])
    last = name.split()[-1]
    factor = float(last[1:]) if last.startswith("x") else 1.0
    if name.startswith("label"):
        share = float(name.split()[1]) / 100.0
        raised = int(rng.integers(n_classes))
        priors = np.full(n_classes, (1.0 - share) / (labels.shape[0] - counts[raised]))
        priors = priors * counts
        priors[raised] = share
        return Condition(priors[labels] / counts[labels], factor, 0.0)
    if name == "dirichlet":
        priors = rng.dirichlet(np.full(n_classes, 2.0))
        return Condition(priors[labels] / counts[labels], 1.0, 0.0)
    if name in ("easiest half", "hardest half"):
        median = float(np.median(confidence))
        keep = confidence > median if name == "easiest half" else confidence <= median
        return Condition(keep / keep.sum(), 1.0, 0.0)
    return Condition(uniform, factor, 0.7 if name == "collapse" else 0.0)


def draw(condition: Condition, logits: NDArray[np.float32], labels: NDArray[np.int64], n: int,
         rng: np.random.Generator, *, reference_mix: bool = False) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    weights = None if reference_mix else condition.weights
    rows = rng.choice(labels.shape[0], size=n, replace=True, p=weights)
    window = logits[rows].astype(np.float64) * condition.factor
    y = labels[rows].copy()
    if condition.noise:
        noisy = rng.random(n) < condition.noise
        y[noisy] = rng.integers(logits.shape[1], size=int(noisy.sum()))
    return window, y


def _tv(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    return 0.5 * float(np.abs(a - b).sum())


def _scores(logits: NDArray[np.float64], labels: NDArray[np.int64], temperature: float) -> tuple[float, float]:
    """NLL and binned ECE (15 equal-width bins) in one pass."""
    stats = CalibrationStats.from_logits(logits, labels, temperature=temperature)
    return stats.nll, stats.ece


@dataclass(frozen=True, slots=True)
class Found:
    """What the study reads of a window's check: its diagnosis, its prior test (EM's estimate
    with it), the served rows' sums and the p-value of the early warning's confidence test (NaN:
    not run)."""

    diagnosis: ShiftDiagnosis
    prior_test: PriorShiftTest
    served: ServedPriorStats
    confidence_p_value: float = math.nan


def check(reference: Reference, window: NDArray[np.float64], labels: NDArray[np.int64], seed: int) -> Found:
    """One window's check (every row served and labelled), as the monitor and ``thermostat diagnose`` run it."""
    store = WindowInMemory(window, labels, temperature=reference.temperature)
    query = store.query()
    against = CheckReference(reference.drift, priors=reference.priors, profile=reference.profile,
                             accuracy_floor=0.5 * reference.accuracy)
    outcome = check_version(store, query, against, CheckState(), DEFAULT_POLICY.replace(seed=seed), query.end,
                            stream=store)
    report, scan = outcome.report, outcome.scan
    if report is None or report.diagnosis is None or report.prior_test is None or scan is None \
            or scan.served_priors is None:
        raise RuntimeError(f"the check of a {labels.shape[0]}-row window tested no class priors: {outcome.notes}")
    warning = report.early_warning
    confidence_p = warning.p_value if warning is not None and warning.tested else math.nan
    return Found(report.diagnosis, report.prior_test, scan.served_priors, confidence_p)


def fixes(reference: Reference, window: NDArray[np.float64], labels: NDArray[np.int64], found: Found,
          evaluation: list[tuple[NDArray[np.float64], NDArray[np.int64]]], unfixed: list[tuple[float, float]],
          returned: NDArray[np.float64], seed: int) -> dict[str, list[tuple[float, float]]]:
    """NLL and ECE on the evaluation sets (``E``, then ``R``) after each fix.

    ``none`` (``unfixed``); ``refit``: T fitted on the window, kept; ``prior``: the prior
    correction as the monitor keeps it — on ``E`` EM's priors of the window, on ``R`` undone when
    the next check's prior test on ``returned`` (unlabelled rows of the returned mix) no longer
    fires, else re-estimated from them;
    ``kept``: the window's correction never re-estimated; ``chosen``: the diagnosis's fix, its
    priors re-estimated like ``prior``.
    """
    temperature = reference.temperature
    em = found.prior_test.estimate
    served = ServedPriorStats.from_logits(returned, temperature=temperature, capacity=SAMPLE_CAPACITY, seed=seed)
    again = estimate_priors_em(served, reference.priors)
    # The next check keeps a correction only while its prior test still fires; else it undoes it.
    undone = not prior_shift_test(served, reference.priors, level=PRIOR_LEVEL, estimate=again, seed=seed).fired
    refit = fit_temperature(window, labels).temperature

    def corrected(logits: NDArray[np.float64], estimate: PriorEstimate) -> NDArray[np.float64]:
        return prior_corrected_logits(logits, temperature=temperature, priors=estimate.priors,
                                      reference_priors=estimate.reference_priors)

    fix = found.diagnosis.fix
    both_temperature = fit_temperature(corrected(window, em), labels).temperature \
        if fix == "prior_correction_and_refit" else temperature
    out: dict[str, list[tuple[float, float]]] = {"none": [], "refit": [], "prior": [], "kept": [], "chosen": []}
    for index, ((logits, y), none) in enumerate(zip(evaluation, unfixed, strict=True)):
        current = em if index == 0 else again
        refitted = _scores(logits, y, refit)
        kept = _scores(corrected(logits, em), y, temperature)
        prior = kept if index == 0 else none if undone else _scores(corrected(logits, current), y, temperature)
        both = (_scores(logits, y, both_temperature) if index and undone
                else _scores(corrected(logits, current), y, both_temperature))
        chosen = {"none": none, "escalate": none, "temperature_refit": refitted, "prior_correction": prior,
                  "prior_correction_and_refit": both if fix == "prior_correction_and_refit" else prior}[fix]
        for key, value in (("none", none), ("refit", refitted), ("prior", prior), ("kept", kept), ("chosen", chosen)):
            out[key].append(value)
    return out


def independent_em(sample: NDArray[np.float64], reference_posteriors: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """The priors by the abstention package's EM (Alexandari et al.'s own code, the plain maximum
    likelihood from the reference's mean posterior), stopped like ours (no prior moves by 1e-8, at
    most CROSS_CHECK_STEPS steps); None when the package is not installed."""
    try:
        from abstention.label_shift import EMImbalanceAdapter  # type: ignore[import-untyped]
    except ImportError:
        return None
    adapter = EMImbalanceAdapter(tolerance=1e-8, max_iterations=CROSS_CHECK_STEPS)(sample, reference_posteriors)
    priors: NDArray[np.float64] = adapter.multipliers * reference_posteriors.mean(axis=0)
    return priors


def run_file(name: str, windows: range, sizes: tuple[int, ...], conditions: tuple[str, ...],
             seed: int) -> dict[str, Any]:
    """Every cell of one file for the windows ``windows``: per cell the diagnoses' counts and every
    window's estimation errors and fix scores (:func:`merged` adds parts and averages)."""
    logits, labels = load(name)
    index = file_index(name)
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(KINDS, 0))
    errors: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    scores: dict[str, dict[str, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
    started, cpu = time.monotonic(), time.process_time()
    for w in windows:
        rng = np.random.default_rng([seed, index, w])
        rows = rng.choice(labels.shape[0], size=REFERENCE_ROWS, replace=True)
        reference = reference_of(logits[rows], labels[rows])
        reference_posteriors = softmax(logits[rows].astype(np.float64) / reference.temperature, axis=1)
        confidence = 1.0 / np.exp((logits - logits.max(axis=1, keepdims=True)) / reference.temperature).sum(axis=1)
        for condition_name in conditions:
            c = CONDITIONS.index(condition_name)  # a condition draws the same rows whatever else runs
            condition = condition_of(condition_name, labels, confidence, np.random.default_rng([seed, index, w, c]))
            for n in sizes:
                cell = f"{condition_name} @{n}"
                draws = np.random.default_rng([seed, index, w, c, n])
                window, y = draw(condition, logits, labels, n, draws)
                found = check(reference, window, y, seed=w)
                kinds[cell][found.diagnosis.kind] += 1
                truth = np.bincount(y, minlength=logits.shape[1]) / n
                em, served = found.prior_test.estimate, found.served
                bbse = estimate_priors_bbse(served, reference.priors)
                errors[cell]["em"].append(_tv(em.priors, truth))
                errors[cell]["bbse"].append(_tv(bbse.priors, truth))
                errors[cell]["em_vs_bbse"].append(_tv(em.priors, bbse.priors))
                errors[cell]["em_iterations"].append(float(em.iterations))
                errors[cell]["em_converged"].append(float(em.converged))
                if n == FIX_SIZE and (condition_name.startswith("label") or condition_name == "dirichlet"):
                    counts_basis = estimate_priors_em(served, reference.priors, basis="class_counts")
                    errors[cell]["em_class_counts"].append(_tv(counts_basis.priors, truth))
                if n == FIX_SIZE and condition_name in CROSS_CHECKED and w < CROSS_CHECK_WINDOWS:
                    other = independent_em(served.sample, reference_posteriors)
                    if other is not None:
                        plain = estimate_priors_em(served, reference.priors, pseudo_rows=0,
                                                   max_iterations=CROSS_CHECK_STEPS)
                        errors[cell]["abstention"].append(_tv(other, truth))
                        errors[cell]["em_cross_checked"].append(_tv(em.priors, truth))
                        errors[cell]["em_vs_abstention"].append(_tv(em.priors, other))
                        errors[cell]["em_ml_vs_abstention"].append(_tv(plain.priors, other))
                if n == FIX_SIZE:
                    evaluation = [draw(condition, logits, labels, EVALUATION_ROWS, draws),
                                  draw(condition, logits, labels, EVALUATION_ROWS, draws, reference_mix=True)]
                    unfixed = [_scores(logits_e, y_e, reference.temperature) for logits_e, y_e in evaluation]
                    returned, _ = draw(condition, logits, labels, FIX_SIZE, draws, reference_mix=True)
                    for key, values in fixes(reference, window, y, found, evaluation, unfixed, returned, w).items():
                        scores[cell][key].append([v for pair in values for v in pair])
    return {"kinds": {cell: dict(v) for cell, v in kinds.items()},
            "errors": {cell: {k: list(v) for k, v in e.items()} for cell, e in errors.items()},
            "fixes": {cell: {k: list(v) for k, v in s.items()} for cell, s in scores.items()},
            "seconds": time.monotonic() - started, "cpu_seconds": time.process_time() - cpu}


def merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One file's parts (disjoint windows) as the JSON keeps them: counts added, per cell the
    windows run, the errors and fix scores averaged over every window."""
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(KINDS, 0))
    errors: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    scores: dict[str, dict[str, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
    for part in parts:
        for cell, counts in part["kinds"].items():
            for kind, count in counts.items():
                kinds[cell][kind] += count
        for cell, values in part["errors"].items():
            for key, listed in values.items():
                errors[cell][key] += listed
        for cell, values in part["fixes"].items():
            for key, listed in values.items():
                scores[cell][key] += listed
    return {"kinds": {cell: dict(v) for cell, v in kinds.items()},
            "windows": {cell: sum(v.values()) for cell, v in kinds.items()},
            "errors": {cell: {k: float(np.mean(v)) for k, v in e.items()} for cell, e in errors.items()},
            "fixes": {cell: {k: np.mean(np.array(v), axis=0).tolist() for k, v in s.items()} for cell, s in scores.items()},
            "seconds": sum(part["seconds"] for part in parts), "cpu_seconds": sum(part["cpu_seconds"] for part in parts)}


def machine_line() -> str:
    """CPUs, versions and the load average now."""
    import numba
    import scipy

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "?")
    load = os.getloadavg()
    return (f"{os.cpu_count()} CPUs ({model}); Python {platform.python_version()}, numpy {np.__version__}, "
            f"scipy {scipy.__version__}, numba {numba.__version__}; load average {load[0]:.2f} / {load[1]:.2f} / "
            f"{load[2]:.2f}")


# --------------------------------------------------------------------------- tables


def _windows_text(results: dict[str, Any], cells: list[str]) -> str:
    """"200" when every file ran that many windows of every cell, else the range."""
    counts = {results[f]["windows"].get(cell, 0) for f in results for cell in cells}
    return f"{min(counts)}" if len(counts) == 1 else f"{min(counts)}–{max(counts)}"


def confusion_markdown(results: dict[str, Any], sizes: tuple[int, ...], conditions: tuple[str, ...]) -> str:
    files = list(results)
    lines = [f"Share of windows given each diagnosis ({len(files)} files pooled; \"windows\": a cell's windows per "
             "file; **bold**: the expected diagnosis).", "",
             "| condition | rows | windows | " + " | ".join(TITLES.get(k, k.replace("_", " ")) for k in KINDS) + " |",
             "| --- | --- | --- |" + " --- |" * len(KINDS)]
    for condition in conditions:
        for n in sizes:
            cell = f"{condition} @{n}"
            total = sum(results[f]["kinds"][cell][k] for f in files for k in KINDS)
            shares = []
            for kind in KINDS:
                share = sum(results[f]["kinds"][cell][kind] for f in files) / total
                text = f"{share:.3f}"
                shares.append(f"**{text}**" if kind == EXPECTED[condition] else text)
            lines.append(f"| {condition} | {n:,} | {_windows_text(results, [cell])} | " + " | ".join(shares) + " |")
    return "\n".join(lines)


GOALS = (("label 40 % @2000", "label_shift", 0.90), ("x1.25 @2000", "calibration_drift", 0.95),
         ("no change @500", "no_change", 0.97), ("no change @2000", "no_change", 0.97),
         ("no change @5000", "no_change", 0.97), ("x0.8 @2000", "calibration_drift", 0.95),
         ("label 40 % x1.25 @2000", "calibration_drift", 0.90))


def goals_markdown(results: dict[str, Any]) -> str:
    files = list(results)
    lines = ["| cell | diagnosis | goal | windows | " + " | ".join(files) + " |",
             "| --- | --- | --- | --- |" + " --- |" * len(files)]
    for cell, kind, goal in GOALS:
        if cell not in results[files[0]]["kinds"]:
            continue
        row = []
        for f in files:
            counts = results[f]["kinds"][cell]
            share = counts[kind] / sum(counts.values())
            row.append(f"{share:.3f}" if share >= goal else f"**{share:.3f}**")
        lines.append(f"| {cell.replace('@', '@ ')} | {kind.replace('_', ' ')} | ≥ {goal:.2f} | "
                     f"{_windows_text(results, [cell])} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def errors_markdown(results: dict[str, Any], sizes: tuple[int, ...], conditions: tuple[str, ...]) -> str:
    """Per file, condition and size: the mean TV error of each estimate; at 2,000 rows, in the first
    CROSS_CHECK_WINDOWS windows, also the abstention package's EM and its distance to ours (as the
    monitor runs it, and as the same plain maximum likelihood stopped by the same rule)."""
    lines = [f"EM, BBSE and EM from class counts: every window. At {FIX_SIZE:,} rows, the first {CROSS_CHECK_WINDOWS} "
             "windows of a file: abstention's EM and ours on the same windows (error), and the distance between them: "
             "ours as the monitor runs it (one pseudo-row), and ours as the same plain maximum likelihood, "
             f"both stopped when no prior moves by 1e-8 or after {CROSS_CHECK_STEPS:,} steps.", "",
             "| file | condition | rows | EM | EM from class counts | BBSE | EM vs BBSE | EM iterations (mean) | "
             "abstention's EM | EM, same windows | EM vs abstention's | EM (no pseudo-row) vs abstention's |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    def cell_text(e: dict[str, float], key: str, digits: str = ".4f") -> str:
        return format(e[key], digits) if key in e else "-"

    for f, result in results.items():
        for condition in conditions:
            if not (condition.startswith("label") or condition in ("dirichlet", "no change")):
                continue
            for n in sizes:
                e = result["errors"][f"{condition} @{n}"]
                lines.append(f"| {f} | {condition} | {n:,} | {e['em']:.4f} | {cell_text(e, 'em_class_counts')} | "
                             f"{e['bbse']:.4f} | {e['em_vs_bbse']:.4f} | {e['em_iterations']:.0f} | "
                             f"{cell_text(e, 'abstention')} | {cell_text(e, 'em_cross_checked')} | "
                             f"{cell_text(e, 'em_vs_abstention', '.1e')} | {cell_text(e, 'em_ml_vs_abstention', '.1e')} |")
    return "\n".join(lines)


FIX_COLUMNS = (("none", "no fix"), ("refit", "temperature refit"), ("prior", "prior correction"),
               ("kept", "prior correction never re-estimated"), ("chosen", "the diagnosis's fix"))


def fixes_markdown(results: dict[str, Any], conditions: tuple[str, ...]) -> str:
    """Mean NLL and ECE after each fix: pooled over the files as the change from no fix, then per
    file for one class raised to 40 %."""
    lines = ["Change of the mean NLL (of the binned ECE) from no fix, averaged over the files: each fix fitted "
             f"on a {FIX_SIZE:,}-row window and scored on {EVALUATION_ROWS:,} fresh rows, `E` of the same traffic, "
             "`R` once the class mix is back at the reference's (the logit factor kept). On `R` the prior correction "
             f"is what the next check leaves: undone when its prior test on {FIX_SIZE:,} unlabelled rows of the "
             "returned mix no longer fires, else re-estimated from them; \"never re-estimated\" keeps the "
             "window's.", "",
             "| condition | set | " + " | ".join(title for key, title in FIX_COLUMNS[1:]) + " |",
             "| --- | --- |" + " --- |" * (len(FIX_COLUMNS) - 1)]
    files = list(results)
    for condition in conditions:
        cell = f"{condition} @{FIX_SIZE}"
        if condition == "collapse" or cell not in results[files[0]]["fixes"]:
            continue
        for s, label in ((0, "E"), (1, "R")):
            row = []
            for key, _ in FIX_COLUMNS[1:]:
                nll = np.mean([r["fixes"][cell][key][2 * s] - r["fixes"][cell]["none"][2 * s] for r in results.values()])
                ece = np.mean([r["fixes"][cell][key][2 * s + 1] - r["fixes"][cell]["none"][2 * s + 1]
                               for r in results.values()])
                row.append(f"{nll:+.4f} ({ece:+.4f})")
            lines.append(f"| {condition} | {label} | " + " | ".join(row) + " |")
    cell = f"label 40 % @{FIX_SIZE}"
    if cell in results[files[0]]["fixes"]:
        lines += ["", f"Mean NLL (binned ECE) per file, one class raised to 40 % ({FIX_SIZE:,}-row windows):", "",
                  "| file | set | " + " | ".join(title for _, title in FIX_COLUMNS) + " |",
                  "| --- | --- |" + " --- |" * len(FIX_COLUMNS)]
        for f, result in results.items():
            scores = result["fixes"][cell]
            for s, label in ((0, "E"), (1, "R")):
                row = [f"{scores[k][2 * s]:.4f} ({scores[k][2 * s + 1]:.4f})" for k, _ in FIX_COLUMNS]
                lines.append(f"| {f} | {label} | " + " | ".join(row) + " |")
    return "\n".join(lines)


WEAKEST_SIZE = 500


def weakest_label_shift(files: list[str], windows: int, seed: int, sizes: tuple[int, ...] = (WEAKEST_SIZE,)) -> str:
    """The weakest label shift and the level of the served rows' tests. Per file and size: windows
    with half of one class's rows removed (the class drawn per window) and unchanged windows,
    against a 5,000-row reference as above. On the shifted windows, the share whose check's prior
    test fired (as the check reads it: the weighted family) and whose diagnosis is a label shift,
    the prior test had the family split the level equally (Holm), the prior test alone at
    PRIOR_LEVEL, and a chi-squared test of homogeneity of the predicted classes (window vs
    reference, classes with no prediction dropped) at PRIOR_LEVEL: the test of BBSD-style peers on
    the same windows; and the windows where one of the two fired at PRIOR_LEVEL and not the other. On the unchanged windows: the
    prior test as read, the family (either test fired as the check reads them), the two tests each
    read alone at PRIOR_LEVEL, and the chi-squared test. Then the unchanged windows pooled over
    the files, per size."""
    from scipy.stats import chi2_contingency

    compile_kernels()
    lines = [f"| file | rows | windows | prior test fired | diagnosis label shift | prior test, level split equally | "
             f"prior test alone at {PRIOR_LEVEL} | χ² on predicted classes (p < {PRIOR_LEVEL}) | χ² fired, prior test "
             f"alone not / the reverse (windows) | unchanged: prior test | unchanged: the family | "
             f"unchanged: each test alone at {PRIOR_LEVEL} | unchanged: χ² |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    pooled: dict[int, NDArray[np.int64]] = {n: np.zeros(4, dtype=np.int64) for n in sizes}

    def chi2_fires(reference_logits: NDArray[np.float32], window: NDArray[np.float64], n_classes: int) -> bool:
        table = np.stack([np.bincount(reference_logits.argmax(axis=1), minlength=n_classes),
                          np.bincount(window.argmax(axis=1), minlength=n_classes)])
        return bool(chi2_contingency(table[:, table.sum(axis=0) > 0])[1] < PRIOR_LEVEL)

    def equal_split(found: Found) -> bool:
        levels = holm_levels([found.prior_test.p_value, found.confidence_p_value], PRIOR_LEVEL)
        return bool(found.prior_test.p_value < levels[0])

    def family(found: Found) -> tuple[bool, bool]:
        confidence = found.confidence_p_value
        as_read = found.prior_test.fired or found.diagnosis.confidence_shifted
        alone = found.prior_test.p_value < PRIOR_LEVEL or (not math.isnan(confidence) and confidence < PRIOR_LEVEL)
        return as_read, alone

    for name in files:
        logits, labels = load(name)
        index, n_classes = file_index(name), logits.shape[1]
        counts = np.bincount(labels, minlength=n_classes).astype(np.float64)
        for n in sizes:
            shifted = np.zeros(7, dtype=np.int64)  # fired, named, equal split, alone, chi2, chi2 only, prior only
            null = np.zeros(4, dtype=np.int64)  # prior test, family, alone, chi2
            for w in range(windows):
                rng = np.random.default_rng([seed, index, w, 99] + ([] if n == WEAKEST_SIZE else [n]))
                rows = rng.choice(labels.shape[0], size=REFERENCE_ROWS, replace=True)
                reference = reference_of(logits[rows], labels[rows])
                halved = int(rng.integers(n_classes))
                priors = counts.copy()
                priors[halved] *= 0.5
                weights = (priors / priors.sum())[labels] / counts[labels]
                window, y = draw(Condition(weights / weights.sum(), 1.0, 0.0), logits, labels, n, rng)
                found = check(reference, window, y, seed=w)
                alone, chi2 = found.prior_test.p_value < PRIOR_LEVEL, chi2_fires(logits[rows], window, n_classes)
                shifted += (found.prior_test.fired, found.diagnosis.kind == "label_shift", equal_split(found), alone,
                            chi2, chi2 and not alone, alone and not chi2)
                same, y_same = draw(Condition(np.full(labels.shape[0], 1.0 / labels.shape[0]), 1.0, 0.0), logits,
                                    labels, n, rng)
                quiet = check(reference, same, y_same, seed=w)
                null += (quiet.prior_test.fired, *family(quiet), chi2_fires(logits[rows], same, n_classes))
            pooled[n] += null
            lines.append(f"| {name} | {n:,} | {windows} | " + " | ".join(f"{v / windows:.3f}" for v in shifted[:5])
                         + f" | {shifted[5]} / {shifted[6]} | " + " | ".join(f"{v / windows:.3f}" for v in null) + " |")
            print(f"{name} @{n}: weakest label shift done", file=sys.stderr, flush=True)
    for n in sizes:
        total = windows * len(files)
        lines.append(f"| all files, unchanged | {n:,} | {total} | | | | | | | "
                     + " | ".join(f"{v} of {total}" for v in pooled[n]) + " |")
    return "\n".join(lines)


REWEIGHTING_CELL = ("label 40 %", FIX_SIZE)


def reweighting_bias(files: list[str], windows: int, seed: int) -> str:
    """Why a label shift is taken for calibration drift: the cell REWEIGHTING_CELL of the study (the
    same windows), each window's labelled rows read again at EM's priors, at the labelled rows' own
    class mix (as the check does: :func:`monitoring.labelled_mix`) and at the true priors (the
    condition's class mix, relative to the reference's mean posterior). Per file: the share named a
    label shift, the share of windows whose priors moved where a drift test fires at the
    re-weighted posteriors, and the mean log(T_w / T_ref) there and at the deployed posteriors."""
    condition_name, n = REWEIGHTING_CELL
    compile_kernels()
    lines = ["| file | windows | label shift named | a drift test fires at EM's priors / the labelled mix / the true "
             "priors | mean log(T_w / T_ref) at EM's priors / the labelled mix / the true priors / deployed |",
             "| --- | ---: | ---: | ---: | ---: |"]
    c = CONDITIONS.index(condition_name)
    for name in files:
        logits, labels = load(name)
        index, k = file_index(name), logits.shape[1]
        frequencies = np.bincount(labels, minlength=k) / labels.shape[0]
        named, moved = 0, 0
        fired: dict[str, int] = defaultdict(int)
        shifts: dict[str, list[float]] = defaultdict(list)
        for w in range(windows):
            rng = np.random.default_rng([seed, index, w])
            rows = rng.choice(labels.shape[0], size=REFERENCE_ROWS, replace=True)
            reference = reference_of(logits[rows], labels[rows])
            confidence = 1.0 / np.exp((logits - logits.max(axis=1, keepdims=True)) / reference.temperature).sum(axis=1)
            condition = condition_of(condition_name, labels, confidence, np.random.default_rng([seed, index, w, c]))
            window, y = draw(condition, logits, labels, n, np.random.default_rng([seed, index, w, c, n]))
            found = check(reference, window, y, seed=w)
            named += found.diagnosis.kind == "label_shift"
            if not found.prior_test.fired:
                continue
            moved += 1
            store = WindowInMemory(window, y, temperature=reference.temperature)
            estimate = found.prior_test.estimate
            true = estimate.reference_priors * np.bincount(labels, weights=condition.weights, minlength=k) / frequencies
            policy = DEFAULT_POLICY.replace(seed=w)
            mix = labelled_mix(np.bincount(y, minlength=k), reference.priors, estimate)
            for key, priors in (("em", estimate.priors), ("mix", mix), ("true", true / true.sum()),
                                ("deployed", estimate.reference_priors)):
                again = reweight_window(store, store.query(), priors=priors, reference_priors=estimate.reference_priors)
                report = decide_drift(again.summary, reference.drift, policy)
                drifted = any(not test.endswith("collapsed") for test in report.tests_fired)
                fired[key] += drifted
                if report.temperature_test is not None:
                    shifts[key].append(report.temperature_test.log_ratio)
        mean = {key: float(np.mean(v)) if v else float("nan") for key, v in shifts.items()}
        lines.append(f"| {name} | {windows} | {named / windows:.2f} | "
                     + " / ".join(f"{fired[key] / max(moved, 1):.2f}" for key in ("em", "mix", "true")) + " | "
                     + " / ".join(f"{mean.get(key, math.nan):+.3f}" for key in ("em", "mix", "true", "deployed"))
                     + " |")
        print(f"{name}: re-weighting done", file=sys.stderr, flush=True)
    return "\n".join(lines)


def _run_one(arguments: tuple[str, range, tuple[int, ...], tuple[str, ...], int]) -> tuple[str, dict[str, Any]]:
    compile_kernels()  # once per installation (minutes), then cached: the passes run about 2x faster
    name = arguments[0]
    return name, run_file(*arguments)


def _work(files: list[str], windows: int, chunk: int, sizes: tuple[int, ...], conditions: tuple[str, ...],
          seed: int) -> list[tuple[str, range, tuple[int, ...], tuple[str, ...], int]]:
    """Chunks of windows, the 100-class files' first (they cost about three times as much): the
    processes stay busy to the end and every finished chunk can be kept."""
    ordered = sorted(files, key=lambda name: not name.startswith("cifar100"))
    return [(name, range(start, min(start + chunk, windows)), sizes, conditions, seed)
            for start in range(0, windows, chunk) for name in ordered]


def _saved(parts: dict[str, list[dict[str, Any]]], files: list[str], args: argparse.Namespace,
           machine: str, complete: bool) -> dict[str, Any]:
    return {"windows": args.windows, "seed": args.seed, "machine": machine, "complete": complete,
            "results": {name: merged(parts[name]) for name in files if parts[name]}}


def _read_saved(paths: list[Path]) -> dict[str, Any]:
    """Several --json files as one: per file, the cells of each (runs of other conditions) side by side."""
    runs = [json.loads(path.read_text()) for path in paths]
    first = runs[0]
    results: dict[str, dict[str, Any]] = {}
    for run in runs:
        if run["seed"] != first["seed"]:
            raise SystemExit(f"--from-json: the files were run with seeds {first['seed']} and {run['seed']}; "
                             "merge only runs of one seed")
        for name, result in run["results"].items():
            into = results.setdefault(name, {"kinds": {}, "windows": {}, "errors": {}, "fixes": {}, "seconds": 0.0,
                                             "cpu_seconds": 0.0})
            for part in ("kinds", "windows", "errors", "fixes"):
                into[part].update(result[part])
            into["seconds"] += result["seconds"]
            into["cpu_seconds"] += result["cpu_seconds"]
    machines = list(dict.fromkeys(run["machine"] for run in runs))  # in the order run
    return {"windows": max(run["windows"] for run in runs), "seed": first["seed"], "machine": "; then ".join(machines),
            "complete": all(run["complete"] for run in runs),
            "results": {name: results[name] for name in FILES if name in results}
            | {name: r for name, r in results.items() if name not in FILES}}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.shift_study", description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=200, help="windows a cell and file (default 200)")
    parser.add_argument("--files", nargs="+", default=list(FILES), help="files of tests/data/real-logits (no .npz)")
    parser.add_argument("--sizes", nargs="+", type=int, help="window sizes (default 500 2000 5000; with --weakest: 500)")
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS, metavar="CONDITION")
    parser.add_argument("--seed", type=int, default=22, help="seed (default 22)")
    parser.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    parser.add_argument("--chunk", type=int, default=25, help="windows a task (default 25)")
    parser.add_argument("--json", type=Path, help="also write every number as JSON here (after every finished chunk; "
                        "with --from-json: the merged files)")
    parser.add_argument("--weakest", action="store_true", help="print the weakest label shift (half of one class "
                        "removed) against a chi-squared test on predicted classes, and the served rows' tests on "
                        "unchanged windows, at --sizes (default here: 500 rows), and exit")
    parser.add_argument("--reweighting", action="store_true", help="print, for one class raised to 40 %% at 2,000 "
                        "rows, the drift tests at the posteriors re-weighted to EM's priors, to the labelled rows' "
                        "class mix and to the true priors, and exit")
    parser.add_argument("--from-json", type=Path, nargs="+", help="print the tables of --json files again, "
                        "merged (runs of other conditions or files); nothing is run")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sizes = tuple(args.sizes) if args.sizes else (WEAKEST_SIZE,) if args.weakest else SIZES
    conditions = tuple(args.conditions)
    if args.weakest:
        print(weakest_label_shift(args.files, args.windows, args.seed, sizes))
        return 0
    if args.reweighting:
        print(reweighting_bias(args.files, args.windows, args.seed))
        return 0
    if args.from_json is not None:
        saved = _read_saved(args.from_json)
        if args.json is not None:
            args.json.write_text(json.dumps(saved, indent=1))
        cells = next(iter(saved["results"].values()))["kinds"]
        sizes = tuple(n for n in sizes if any(cell.endswith(f"@{n}") for cell in cells))
        conditions = tuple(c for c in conditions if any(cell.startswith(f"{c} @") for cell in cells))
    else:
        machine = machine_line()
        parts: dict[str, list[dict[str, Any]]] = {name: [] for name in args.files}
        work = _work(args.files, args.windows, args.chunk, sizes, conditions, args.seed)
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            # spawned: numba's threading layer does not survive a fork
            futures = [pool.submit(_run_one, task) for task in work]
            for future in as_completed(futures):
                name, part = future.result()
                parts[name].append(part)
                done = sum(len(v) for v in parts.values())
                print(f"{name}: chunk done ({done}/{len(work)}), {part['cpu_seconds']:.0f} s CPU, "
                      f"{part['seconds']:.0f} s", file=sys.stderr, flush=True)
                if args.json is not None:
                    args.json.write_text(json.dumps(_saved(parts, args.files, args, machine, done == len(work)), indent=1))
        saved = _saved(parts, args.files, args, machine, True)
    results = saved["results"]
    print(f"Machine: {saved['machine']}. Seed {saved['seed']}; CPU seconds per file: "
          + ", ".join(f"{n} {r['cpu_seconds']:.0f}" for n, r in results.items())
          + f" (total {sum(r['cpu_seconds'] for r in results.values()) / 60:.0f} min)")
    print("\n### Diagnoses\n\n" + confusion_markdown(results, sizes, conditions))
    print("\n### The issue's goals, per file (bold: below the goal)\n\n" + goals_markdown(results))
    print("\n### Prior-estimation error (total variation to the window's class frequencies)\n\n"
          + errors_markdown(results, sizes, conditions))
    print("\n### Fixes\n\n" + fixes_markdown(results, conditions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
