"""False alarms and power of the drift decision on real CIFAR logits, before and after issue 12.

Usage::

    .venv/bin/python -m benchmarks.drift_study                      # every file, 200 windows per cell
    .venv/bin/python -m benchmarks.drift_study --windows 50 --files cifar10_wrn16-4_netcal
    .venv/bin/python -m benchmarks.drift_study --json study.json    # also write every rate as JSON
    .venv/bin/python -m benchmarks.drift_study --effect-size        # the margin in T, in confidence and ECE
    .venv/bin/python -m benchmarks.drift_study --coverage           # the T interval's coverage (400 runs)
    .venv/bin/python -m benchmarks.drift_study --refit-gain         # what a refit gains per factor of T (the margins)
    .venv/bin/python -m benchmarks.drift_study --confident          # the test's level when errors are rare
    .venv/bin/python -m benchmarks.drift_study --detectable         # the minimal detectable shift against simulation

Method (docs/statistics.md states it with the results)
------------------------------------------------------
For every file of ``tests/data/real-logits`` and every window index w (seeded by the file
and w):

1. the file's 10,000 rows are split at random into a reference half A and a traffic half B
   (a new split per window, so a rate is the rate over splits, not the luck of one split);
2. T is fitted on A (:func:`calibration.fit_temperature`); the registration baseline is
   A's ECE at T (binned for BEFORE; the debiased ℓ1 estimate with its interval for AFTER)
   and the reference's temperature sums are A's at T;
3. each cell draws its window from B at T: 500 and 2,000 rows without replacement (a
   simple random sample of B is one of the population, so the two-sample variance is
   exact), 10,000 rows **with** replacement (B has 5,000 rows; such a window repeats B's
   rows, so B's own deviation from the population counts in full against an SE that
   expects half of it: the false-alarm rate at 10,000 rows is an upper bound);
4. conditions: ``calibrated``; ``5 groups`` (each row in one of five random groups, named
   g0 ... g4); ``x1.25`` / ``x0.8`` / ``x1.5`` (every logit of the window multiplied: an
   over- or under-confident model, its optimal T moved by that factor); ``subgroup x1.5``
   (five random groups, the logits of g0 — 20 % of the rows — multiplied by 1.5, groups given);
5. BEFORE is the decision of the previous release (consistency resampling p < 0.01 AND ECE
   more than 0.02 above the baseline, per group at 0.01 / groups; reimplemented below as it
   was); AFTER is :func:`monitoring.decide_drift` with the reference's sums and the ECE
   interval (the default policy: no margin on the drift side, the equivalence margin 10 %,
   level 0.01, tolerance 0.02).

A cell's number is the share of windows flagged as drift: a false-alarm rate for the
calibrated cells, the power for the others.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from calibration import (  # noqa: E402
    CalibrationStats,
    TemperatureStats,
    TopLabelScores,
    calibration_error_from_stats,
    consistency_resampling_from_stats,
    fit_temperature,
    minimal_detectable_shift,
    temperature_test,
)
from benchmarks.real_logits import FILES, file_index, load  # noqa: E402
from monitoring import DriftPolicy, DriftReference, WindowSummary, decide_drift, summarise_arrays  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)
N_GROUPS = 5


@dataclass(frozen=True, slots=True)
class Cell:
    """One column of the study: a condition at a window size."""

    condition: str
    n: int

    @property
    def name(self) -> str:
        return f"{self.condition} @{self.n}"

    @property
    def false_alarm(self) -> bool:
        return self.condition in ("calibrated", "5 groups")


CONDITIONS = ("calibrated", "5 groups", "x1.25", "x0.8", "subgroup x1.5")
SIZES = (500, 2_000, 5_000)


def cells(sizes: tuple[int, ...]) -> list[Cell]:
    grid = [Cell(condition, n) for condition in CONDITIONS for n in sizes]
    return grid + ([Cell("x1.5", max(sizes))] if max(sizes) >= 5_000 else [])


# --------------------------------------------------------------------------- the previous decision


def before_decision(summary: WindowSummary, *, baseline_ece: float, seed: int) -> bool:
    """The drift rule before issue 12, as it was: consistency resampling p < 0.01 AND ECE more
    than 0.02 above the baseline, on the window or on a group of >= 200 rows (level 0.01 / groups,
    enough resamples to reach it); nothing below 500 rows."""
    level, tolerance, min_window, min_group = 0.01, 0.02, 500, 200

    def drifted(stats: CalibrationStats, p_threshold: float, resamples: int, draw_seed: int) -> bool:
        if stats.ece - baseline_ece <= tolerance:
            return False  # the tolerance decides first (the resampling would not change the verdict)
        test = consistency_resampling_from_stats(stats.bin_gap_sum, stats.bin_variance_sum, stats.n,
                                                 n_resamples=resamples, seed=draw_seed)
        return test.p_value < p_threshold

    if summary.n < min_window:
        return False
    tested = [key for key, stats in summary.groups.items() if stats.n >= min_group]
    group_level = level / max(1, len(tested))
    group_resamples = max(1000, math.ceil(10.0 / group_level))
    if drifted(summary.overall, level, 1000, seed):
        return True
    return any(
        drifted(stats, group_level, group_resamples, seed + 1 + index)
        for index, (key, stats) in enumerate(summary.groups.items()) if key in tested
    )


# --------------------------------------------------------------------------- one window


@dataclass(frozen=True, slots=True)
class Reference:
    """What registration keeps of the reference half A."""

    temperature: float
    binned_ece: float
    ece: float
    ece_interval: tuple[float, float]
    stats: TemperatureStats


def reference_of(logits: NDArray[np.float32], labels: NDArray[np.int64]) -> Reference:
    temperature = fit_temperature(logits, labels).temperature
    stats = CalibrationStats.from_logits(logits, labels, temperature=temperature)
    estimate = calibration_error_from_stats(stats, estimator="debiased_l1")
    return Reference(temperature=temperature, binned_ece=stats.ece, ece=estimate.estimate,
                     ece_interval=(estimate.low, estimate.high),
                     stats=TemperatureStats.from_logits(logits, labels, temperature=temperature))


def window_of(
    cell: Cell, logits: NDArray[np.float32], labels: NDArray[np.int64], traffic: NDArray[np.intp],
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.object_] | None]:
    rows = rng.choice(traffic, cell.n, replace=cell.n > traffic.shape[0])
    window = logits[rows].astype(np.float64)
    groups = rng.integers(0, N_GROUPS, cell.n)
    if cell.condition.startswith("x"):
        window *= float(cell.condition[1:])
    if cell.condition == "subgroup x1.5":
        window[groups == 0] *= 1.5
    named = np.array([f"g{g}" for g in range(N_GROUPS)], dtype=object)[groups]
    return window, labels[rows], named if cell.condition in ("5 groups", "subgroup x1.5") else None


def decisions(
    name: str, file_index: int, grid: list[Cell], windows: int, seed: int, policy: DriftPolicy
) -> Iterator[tuple[Cell, bool, tuple[str, ...], str]]:
    logits, labels = load(name)
    for w in range(windows):
        rng = np.random.default_rng([seed, file_index, w])
        order = rng.permutation(labels.shape[0])
        half = labels.shape[0] // 2
        reference_rows, traffic = np.sort(order[:half]), order[half:]
        reference = reference_of(logits[reference_rows], labels[reference_rows])
        for index, cell in enumerate(grid):
            window, window_labels, groups = window_of(
                cell, logits, labels, traffic, np.random.default_rng([seed, file_index, w, index])
            )
            summary = summarise_arrays(window, window_labels, temperature=reference.temperature, start=T0, end=T0,
                                       groups=groups)
            before = before_decision(summary, baseline_ece=reference.binned_ece, seed=w)
            after = decide_drift(summary, DriftReference.of(reference.ece, ece_interval=reference.ece_interval, temperature_stats=reference.stats), policy.replace(seed=w))
            yield cell, before, after.tests_fired, after.verdict


def run_study(files: tuple[str, ...], sizes: tuple[int, ...], windows: int, seed: int,
              policy: DriftPolicy | None = None) -> dict[str, dict[str, dict[str, float]]]:
    grid = cells(sizes)
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name in files:
        started = time.monotonic()
        counts = {cell.name: [0, 0, 0, 0, 0, 0] for cell in grid}
        for cell, before, fired, verdict in decisions(name, file_index(name), grid, windows, seed,
                                                      policy or DriftPolicy()):
            count = counts[cell.name]
            count[0] += before
            count[1] += bool(fired)
            count[2] += any(test.endswith("temperature") for test in fired)
            count[3] += any(test.endswith("ece") for test in fired)
            count[4] += verdict == "calibrated"
            count[5] += verdict == "undetermined"
        # after_temperature / after_ece: windows where that test fired (overall or in a group);
        # calibrated / undetermined: the verdict of the windows where nothing fired.
        results[name] = {key: {"before": b / windows, "after": a / windows, "after_temperature": t / windows,
                               "after_ece": e / windows, "calibrated": c / windows, "undetermined": u / windows}
                         for key, (b, a, t, e, c, u) in counts.items()}
        print(f"{name}: {windows} windows x {len(grid)} cells in {time.monotonic() - started:.0f} s", file=sys.stderr,
              flush=True)
    return results


def markdown(results: dict[str, dict[str, dict[str, float]]], sizes: tuple[int, ...], windows: int) -> str:
    grid = cells(sizes)
    lines = [f"Share of {windows} windows flagged as drift, before → after (false alarms: calibrated and 5 groups; "
             "power: the rest).", ""]
    for title, chosen in (("False alarms", [c for c in grid if c.false_alarm]),
                          ("Power", [c for c in grid if not c.false_alarm])):
        lines += [f"**{title}**", "", "| file | " + " | ".join(c.name.replace("@", "n=") for c in chosen) + " |",
                  "| --- |" + " --- |" * len(chosen)]
        for name, rates in results.items():
            row = [f"{rates[c.name]['before']:.3f} → **{rates[c.name]['after']:.3f}**" for c in chosen]
            lines.append(f"| {name} | " + " | ".join(row) + " |")
        lines.append("")
    lines += ["**Verdicts** (files pooled): drift / calibrated / undetermined", "",
              "| cell | drift | calibrated | undetermined | lowest file's drift share |", "| --- | --- | --- | --- | --- |"]
    for c in grid:
        shares = [float(np.mean([rates[c.name][key] for rates in results.values()]))
                  for key in ("after", "calibrated", "undetermined")]
        lowest = min(rates[c.name]["after"] for rates in results.values())
        lines.append(f"| {c.name.replace('@', 'n=')} | {shares[0]:.3f} | {shares[1]:.3f} | {shares[2]:.3f} | "
                     f"{lowest:.3f} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- effect size and coverage


def effect_size(files: tuple[str, ...], margin: float = 0.05) -> str:
    """What a shift of T by the margin does on each file (T fitted on all its rows): the mean
    confidence and the debiased ECE at T·(1 + margin) and T / (1 + margin), and SE(log T)."""
    lines = ["| file | T | mean confidence at T/1.05, T, T·1.05 | debiased ℓ1 ECE at T/1.05, T, T·1.05 | "
             "SE(log T) per window of 500 / 2,000 / 5,000 rows |", "| --- | --- | --- | --- | --- |"]
    for name in files:
        logits, labels = load(name)
        temperature = fit_temperature(logits, labels).temperature
        confidence, ece = [], []
        for t in (temperature / (1 + margin), temperature, temperature * (1 + margin)):
            stats = CalibrationStats.from_logits(logits, labels, temperature=t)
            confidence.append(stats.mean_confidence)
            ece.append(calibration_error_from_stats(stats, estimator="debiased_l1").estimate)
        sums = TemperatureStats.from_logits(logits, labels, temperature=temperature)
        per_row = sums.log_temperature_standard_error() * math.sqrt(sums.n)
        lines.append(
            f"| {name} | {temperature:.3f} | {confidence[0]:.4f}, {confidence[1]:.4f}, {confidence[2]:.4f} | "
            f"{ece[0]:.4f}, {ece[1]:.4f}, {ece[2]:.4f} | "
            + " / ".join(f"{per_row / math.sqrt(n):.3f}" for n in (500, 2_000, 5_000)) + " |"
        )
    return "\n".join(lines)


REFIT_FACTORS = (1.0, 1.02, 1.05, 1.08, 1.1, 1.15, 1.2, 1.3)


def refit_gain(files: tuple[str, ...], runs: int = 40, seed: int = 7) -> str:
    """What a refit gains on fresh traffic when the optimal T moved by a factor: per file and
    factor f (logits × f and × 1/f, both listed), ``runs`` times: T fitted on a 5,000-row reference,
    refitted on a 2,000-row window, both scored on 5,000 fresh rows (rows drawn with replacement
    from the file); the mean gain in NLL and in debiased ℓ1 ECE (no fix minus refit). Beside it
    the debiased ECE's own standard error on a 2,000-row window (its interval's half-width / 1.96)
    and SE(log T_w / T_ref) of the temperature test at those sizes."""
    lines = ["| file | SE(log T ratio) | SE of the ECE at 2,000 rows | "
             + " | ".join(f"×{f:g}" for f in REFIT_FACTORS) + " |", "| --- | --- | --- |" + " --- |" * len(REFIT_FACTORS)]
    for name in files:
        logits64, labels = load(name)
        logits = logits64.astype(np.float64)
        rng = np.random.default_rng([seed, file_index(name)])
        cells, errors, noise = [], [], []
        for factor in REFIT_FACTORS:
            nll, ece = [], []
            for scale in ((factor,) if factor == 1.0 else (factor, 1.0 / factor)):
                for _ in range(runs):
                    reference = rng.choice(labels.shape[0], 5_000)
                    window = rng.choice(labels.shape[0], 2_000)
                    fresh = rng.choice(labels.shape[0], 5_000)
                    temperature = fit_temperature(logits[reference], labels[reference]).temperature
                    refit = fit_temperature(logits[window] * scale, labels[window]).temperature
                    kept = CalibrationStats.from_logits(logits[fresh] * scale, labels[fresh], temperature=temperature)
                    fixed = CalibrationStats.from_logits(logits[fresh] * scale, labels[fresh], temperature=refit)
                    nll.append(kept.nll - fixed.nll)
                    ece.append(calibration_error_from_stats(kept, estimator="debiased_l1").estimate
                               - calibration_error_from_stats(fixed, estimator="debiased_l1").estimate)
                    if factor == 1.0:
                        at = TemperatureStats.from_logits
                        test = temperature_test(at(logits[window], labels[window], temperature=temperature),
                                                at(logits[reference], labels[reference], temperature=temperature))
                        errors.append(test.standard_error)
                        own = calibration_error_from_stats(
                            CalibrationStats.from_logits(logits[window], labels[window], temperature=temperature),
                            estimator="debiased_l1")
                        noise.append((own.high - own.low) / (2 * 1.96))
            cells.append(f"{np.mean(nll):+.4f} ({np.mean(ece):+.4f})")
        lines.append(f"| {name} | {np.mean(errors):.3f} | {np.mean(noise):.4f} | " + " | ".join(cells) + " |")
        print(f"{name}: refit gain done", file=sys.stderr, flush=True)
    return "\n".join(lines)


COVERAGE_SETTINGS = ((1_000, 10, 1.5, 3.0), (300, 5, 2.0, 3.0), (5_000, 100, 0.7, 2.0), (2_000, 10, 2.5, 6.0))


def sample_labels(rng: np.random.Generator, logits: NDArray[np.float64]) -> NDArray[np.int64]:
    """One label per row drawn from softmax(logits): a model calibrated by construction."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return np.minimum((rng.random((logits.shape[0], 1)) > p.cumsum(axis=1)).sum(axis=1), logits.shape[1] - 1)


def coverage(runs: int = 400) -> str:
    """Share of ``runs`` seeded synthetic sets (labels drawn from softmax(z / T_true)) whose 95 %
    fit interval covers T_true, per setting (rows, classes, T_true, logit scale)."""
    lines = ["| rows | classes | true T | logit scale | coverage of the 95 % interval | mean width (log T) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for n, k, true_temperature, scale in COVERAGE_SETTINGS:
        hits, widths = 0, []
        for seed in range(runs):
            rng = np.random.default_rng(seed)
            logits = scale * rng.normal(size=(n, k))
            fit = fit_temperature(logits, sample_labels(rng, logits / true_temperature))
            hits += fit.temperature_low <= true_temperature <= fit.temperature_high
            widths.append(math.log(fit.temperature_high / fit.temperature_low))
        lines.append(f"| {n:,} | {k} | {true_temperature} | {scale} | {hits / runs:.4f} ({hits}/{runs}) | "
                     f"{np.mean(widths):.3f} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- rare errors (issue 22, item 1)

CONFIDENT_FILE = "cifar10_wrn16-4_netcal"
#: Pools of the most confident rows of CONFIDENT_FILE: 5.0, 11.2 and 24.8 errors expected per 5,000 rows at its T.
CONFIDENT_POOLS = (4_500, 5_500, 6_500)
CONFIDENT_SIZES = (500, 2_000, 10_000)
CONFIDENT_LEVEL = 0.005  # the window temperature test's level in the drift decision (α/2, α = 0.01)


def confident_model(pool: int) -> NDArray[np.float64]:
    """The ``pool`` most confident rows of CONFIDENT_FILE, its logits divided by the file's own T:
    a real, very confident model that is calibrated by construction once labels are drawn
    from softmax(logits) (:func:`sample_labels`)."""
    logits, labels = load(CONFIDENT_FILE)
    scaled = logits.astype(np.float64) / fit_temperature(logits, labels).temperature
    confidence = TopLabelScores.from_logits(scaled, labels).confidence
    return scaled[np.argsort(-confidence, kind="stable")[:pool]]


def confident_study(references: int = 100, per_reference: int = 10, seed: int = 22) -> str:
    """False alarms of :func:`calibration.temperature_test` on calibrated windows of very confident rows.

    Population design: per reference, 5,000 rows drawn with replacement from the pool with
    labels drawn from the model, T fitted on them (a fit on a bound is refused by the pipeline:
    skipped and counted), the reference's sums at T; then ``per_reference`` windows of 500, 2,000
    and 10,000 rows drawn the same way (calibrated: the same distribution as the reference). Each
    window is tested at level 0.005 and margin 5 % before (every window tested:
    ``min_expected_errors=0``) and after (the default minimum of expected errors, in window and reference). "One
    confident error": a window of 500 rows all right but one, on the row with the largest gap
    between its top two logits (labelled with its second class).
    """
    lines = ["| pool (most confident rows) | errors expected per 5,000 rows | window rows | windows | errors expected "
             "per window (mean) | windows tested after | false alarms before | false alarms after |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    one_error = [0, 0, 0]
    for pool_size in CONFIDENT_POOLS:
        pool = confident_model(pool_size)
        per_5000 = 5_000 * float(np.mean(1.0 - TopLabelScores.from_logits(pool, pool.argmax(axis=1)).confidence))
        cells = {n: [0, 0, 0, 0, 0.0] for n in CONFIDENT_SIZES}  # windows, tested, before, after, Σ expected errors
        skipped = 0
        for r in range(references):
            rng = np.random.default_rng([seed, pool_size, r])
            rows = pool[rng.integers(0, pool_size, 5_000)]
            labels = sample_labels(rng, rows)
            fit = fit_temperature(rows, labels)
            if fit.at_bound is not None:
                skipped += 1
                continue
            reference = TemperatureStats.from_logits(rows, labels, temperature=fit.temperature)
            for n, cell in cells.items():
                for _ in range(per_reference):
                    window = pool[rng.integers(0, pool_size, n)]
                    stats = TemperatureStats.from_logits(window, sample_labels(rng, window), temperature=fit.temperature)
                    before = temperature_test(stats, reference, level=CONFIDENT_LEVEL, min_expected_errors=0)
                    after = temperature_test(stats, reference, level=CONFIDENT_LEVEL)
                    cell[0] += 1
                    cell[1] += after.enough_errors
                    cell[2] += before.drifted
                    cell[3] += after.drifted
                    cell[4] += stats.expected_errors
            window = pool[rng.integers(0, pool_size, 500)]
            wrong = window.argmax(axis=1)
            ordered = np.sort(window, axis=1)
            row = int(np.argmax(ordered[:, -1] - ordered[:, -2]))
            wrong[row] = int(np.argsort(window[row])[-2])
            stats = TemperatureStats.from_logits(window, wrong, temperature=fit.temperature)
            one_error[0] += 1
            one_error[1] += temperature_test(stats, reference, level=CONFIDENT_LEVEL, min_expected_errors=0).drifted
            one_error[2] += temperature_test(stats, reference, level=CONFIDENT_LEVEL).drifted
        for n, (count, tested, before, after, errors) in cells.items():
            lines.append(f"| {pool_size:,} | {per_5000:.1f} | {n:,} | {count} | {errors / count:.2f} | {tested} | "
                         f"{before / count:.4f} ({before}) | {after / count:.4f} ({after}) |")
        print(f"pool {pool_size}: {skipped} of {references} references fitted on a bound, skipped", file=sys.stderr,
              flush=True)
    lines += ["", f"One confident error in 500 rows ({one_error[0]} windows): flagged before "
              f"{one_error[1] / one_error[0]:.3f}, after {one_error[2] / one_error[0]:.3f}."]
    return "\n".join(lines)


# --------------------------------------------------------------------------- detectable shift (issue 22, item 3)

DETECTABLE_SIZES = (500, 2_000, 10_000)
DETECTABLE_LEVEL = 0.005  # the window temperature test's level in the drift decision (α/2, α = 0.01)


def detectable_study(files: tuple[str, ...], references: int = 200, seed: int = 22) -> str:
    """The minimal detectable shift (95 % power) against the power simulated at it, per file and window size.

    Population design: per reference, 5,000 rows drawn with replacement from the file and T
    fitted on them (the reference's estimation error as in production); for each window size,
    :func:`calibration.minimal_detectable_shift` of that reference (level 0.005, margin 5 %),
    then one window drawn with replacement whose logits are multiplied by 1 + increase (its
    optimal T moves by that factor: over-confident) and one by 1 − decrease (under-confident),
    each tested by :func:`calibration.temperature_test`. If the prediction is right, each
    share detected is 0.95.
    """
    lines = ["| file | window rows | SE(log T) of the reference (mean) | predicted shift, increase / decrease (mean) | "
             "power at +shift | power at −shift |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name in files:
        logits, labels = load(name)
        cells = {n: [0.0, 0.0, 0.0, 0, 0, 0] for n in DETECTABLE_SIZES}  # SE, increase, decrease, runs, hits +, hits -
        for r in range(references):
            rng = np.random.default_rng([seed, file_index(name), r])
            rows = rng.integers(0, labels.shape[0], 5_000)
            temperature = fit_temperature(logits[rows], labels[rows]).temperature
            reference = TemperatureStats.from_logits(logits[rows], labels[rows], temperature=temperature)
            for n, cell in cells.items():
                shift = minimal_detectable_shift(reference, n, level=DETECTABLE_LEVEL)
                cell[0] += reference.log_temperature_standard_error()
                cell[1] += shift.increase
                cell[2] += shift.decrease
                cell[3] += 1
                for index, factor in ((4, 1.0 + shift.increase), (5, 1.0 - shift.decrease)):
                    window = rng.integers(0, labels.shape[0], n)
                    stats = TemperatureStats.from_logits(logits[window].astype(np.float64) * factor, labels[window],
                                                         temperature=temperature)
                    cell[index] += temperature_test(stats, reference, level=DETECTABLE_LEVEL).drifted
        for n, (se, increase, decrease, runs, over, under) in cells.items():
            lines.append(f"| {name} | {n:,} | {se / runs:.4f} | +{increase / runs:.1%} / −{decrease / runs:.1%} | "
                         f"{over / runs:.3f} | {under / runs:.3f} |")
        print(f"{name}: {references} references", file=sys.stderr, flush=True)
    return "\n".join(lines)


def detectable_table(reference_n: int = 5_000, level: float = DETECTABLE_LEVEL) -> str:
    """The minimal detectable shift (95 % power, margin 5 %) by the reference's SE(log T) and the
    window's size, from :func:`calibration.minimal_detectable_shift` on sums with that SE."""
    errors = (0.010, 0.015, 0.020, 0.030, 0.050)
    sizes = (200, 500, 1_000, 2_000, 5_000, 10_000, 50_000)
    lines = ["| SE(log T) of a 5,000-row reference | " + " | ".join(f"{n:,} rows" for n in sizes) + " |",
             "| ---: |" + " ---: |" * len(sizes)]
    for se in errors:
        # At T = 1 with Σg = 0 and κ = 1 (score variance = information): SE(log T) = 1 / sqrt(Σh).
        curvature_sum = 1.0 / se**2
        reference = TemperatureStats(temperature=1.0, n=reference_n, gradient_sum=0.0,
                                     gradient_square_sum=curvature_sum * (reference_n - 1) / reference_n,
                                     curvature_sum=curvature_sum)
        cells = []
        for n in sizes:
            shift = minimal_detectable_shift(reference, n, level=level)
            cells.append(f"+{shift.increase:.0%} / −{shift.decrease:.0%}")
        lines.append(f"| {se:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.drift_study", description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=200, help="windows per cell (default 200)")
    parser.add_argument("--files", nargs="+", default=list(FILES), help="files of tests/data/real-logits (no .npz)")
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES), help="window sizes (default 500 2000 5000)")
    parser.add_argument("--seed", type=int, default=12, help="seed of the splits and windows (default 12)")
    parser.add_argument("--json", type=Path, help="also write the rates as JSON here")
    parser.add_argument("--margin", type=float, help="the drift side's margin (default: the policy's)")
    parser.add_argument("--effect-size", action="store_true", help="print the margin's effect size per file and exit")
    parser.add_argument("--coverage", action="store_true", help="print the T interval's coverage and exit")
    parser.add_argument("--refit-gain", action="store_true",
                        help="print what a refit gains on fresh traffic per factor of T, and exit")
    parser.add_argument("--confident", action="store_true",
                        help="print the temperature test's false alarms on very confident rows and exit")
    parser.add_argument("--detectable", action="store_true",
                        help="print the minimal detectable shift, its table and its validation by simulation, and exit")
    args = parser.parse_args(argv)
    if args.detectable:
        print(detectable_table())
        print()
        print(detectable_study(tuple(args.files)))
        return 0
    if args.confident:
        print(confident_study())
        return 0
    if args.effect_size:
        print(effect_size(tuple(args.files)))
        return 0
    if args.coverage:
        print(coverage())
        return 0
    if args.refit_gain:
        print(refit_gain(tuple(args.files)))
        return 0
    policy = DriftPolicy() if args.margin is None else DriftPolicy(temperature_margin=args.margin)
    results = run_study(tuple(args.files), tuple(args.sizes), args.windows, args.seed, policy)
    if args.json is not None:
        args.json.write_text(json.dumps({"windows": args.windows, "seed": args.seed, "results": results}, indent=2))
    print(markdown(results, tuple(args.sizes), args.windows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
