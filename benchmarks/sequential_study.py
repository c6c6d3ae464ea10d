"""The sequential rule across checks vs the fixed 24 h window on real CIFAR logits (the early
warning before labels has its own study: ``benchmarks/early_warning_study.py``).

Usage::

    .venv/bin/python -m benchmarks.sequential_study                   # 200 runs per file, daily volumes 2,000 and 10,000
    .venv/bin/python -m benchmarks.sequential_study --runs 20 --files cifar10_wrn16-4_netcal
    .venv/bin/python -m benchmarks.sequential_study --arl             # ARL₀ of the constants (Gaussian and real scores)

Method (docs/statistics.md states it with the results)
------------------------------------------------------
Per file of ``tests/data/real-logits`` and run r (seeded by the file and r):

1. **design "population"** (default): the file's 10,000 rows are the population; the reference
   is 5,000 rows drawn from it with replacement, T is fitted on them and the reference's
   temperature sums are theirs at T (what registration keeps); traffic is drawn from the whole
   file with replacement. The reference's estimation error is then what it is in production,
   and calibrated traffic is drawn from the very distribution the reference was drawn from.
   **Design "split"** (``--design split``): the reference is a random half A, traffic is drawn
   with replacement from the other half B. B has only 5,000 rows, so a stream of 30 days
   repeats them: B's own deviation from the population is a second persistent bias, as large as
   the reference's estimation error, which the margin does not cover (it covers the
   reference's): its false-alarm rates are an upper bound;
2. traffic arrives in hourly batches of V / 24 rows (V = the daily volume); every labelled row
   arrives within its hour, so the sequential rule's increment of a check is that hour's batch;
3. **false alarms** — 24 h of warm-up then 720 hourly checks (30 days) of calibrated traffic:
   the sequential rule (:func:`monitoring.update_sequential`, defaults k = 0.5, h = 6, margin
   5 %, level 0.01, at least 100 rows per increment, a repeated alarm on a reference that is
   itself off escalated once instead), the same rule without the escalation (the previous
   release: an alarm after every reset) and today's fixed-window rule, the temperature test of
   the trailing 24 h window against the reference (:func:`calibration.temperature_test`,
   margin 5 %, level 0.01: the primary test of :func:`monitoring.decide_drift`; its gate of 5
   expected errors, whose sums the hourly sums here do not carry, never binds on these files'
   24 h windows), checked hourly (the deployed schedule) and daily;
4. **detection delay** — 48 to 71 h of calibrated traffic, then the drift starts at a
   uniform time inside an hour (that hour's batch is drifted from there on) and every logit is
   multiplied by 1.25 (over-confident) or 0.8 (under-confident); the delay is the time from the
   drift's start to the end of the first check that alarms (censored at 72 h); for the daily
   fixed window the start falls uniformly inside a day's window ("mid-window");
5. **change point** — at the sequential alarm, the estimated change point minus the true start,
   and the share of pre-drift rows among the rows a refit would fit on (since the change point
   for the sequential rule; the last 24 h for the fixed window).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.real_logits import FILES, file_index, load  # noqa: E402
from calibration import TemperatureStats, TopLabelScores, fit_temperature, temperature_test, top_label_confidence  # noqa: E402
from monitoring import (  # noqa: E402
    DEFAULT_POLICY,
    ConfidenceProfile,
    DriftPolicy,
    SequentialState,
    warn_before_labels,
    update_sequential,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
WARM_UP = 24
DAYS = 30
FOLLOW_UP = 72
FACTORS = (1.25, 0.8)
RULES = ("sequential", "fixed hourly", "fixed daily")
#: The sequential rule as the previous release had it: no escalation, an alarm after every reset.
PREVIOUS = DriftPolicy(sequential_escalate_after=1_000_000)


@dataclass
class Tally:
    """What one file's runs add up to, for one daily volume."""

    runs: int = 0
    false_alarms: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    flagged_checks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    delays: dict[str, dict[str, list[float]]] = field(
        default_factory=lambda: {f"x{f}": {rule: [] for rule in RULES} for f in FACTORS})
    change_point_error: dict[str, list[float]] = field(default_factory=lambda: {f"x{f}": [] for f in FACTORS})
    pre_drift_share: dict[str, dict[str, list[float]]] = field(
        default_factory=lambda: {f"x{f}": {"sequential": [], "fixed hourly": []} for f in FACTORS})
    early_alarms: dict[str, int] = field(default_factory=lambda: {f"x{f}": 0 for f in FACTORS})
    escalations: int = 0  # of the sequential rule on calibrated traffic
    previous_alarms: int = 0  # of the sequential rule without the escalation, on the same traffic


def hourly_sums(g: NDArray[np.float64], h: NDArray[np.float64], rows: NDArray[np.intp]) -> NDArray[np.float64]:
    """(hours, 4): n, Σg, Σg², Σh of each hour's rows (``rows`` is hours × batch)."""
    gs, hs = g[rows], h[rows]
    return np.stack([np.full(rows.shape[0], rows.shape[1], dtype=np.float64), gs.sum(1), (gs * gs).sum(1),
                     hs.sum(1)], axis=1)


def as_stats(row: NDArray[np.float64], temperature: float) -> TemperatureStats:
    return TemperatureStats(temperature=temperature, n=int(row[0]), gradient_sum=float(row[1]),
                            gradient_square_sum=float(row[2]), curvature_sum=float(row[3]))


def fixed_fires(window: NDArray[np.float64], temperature: float, reference: TemperatureStats) -> bool:
    """Today's fixed-window rule: the 24 h window's temperature test against the reference (and
    at least 500 labelled rows, the monitor's ``min_window``)."""
    if window[0] < 500:
        return False
    return temperature_test(as_stats(window, temperature), reference, margin=0.05, level=0.01).drifted


def sequential_alarms(
    sums: NDArray[np.float64], temperature: float, reference: TemperatureStats, policy: DriftPolicy = DEFAULT_POLICY
) -> tuple[list[tuple[int, datetime | None]], list[int]]:
    """The sequential rule over hourly sums: its alarms (hour index, change point) and the hours
    it escalated at."""
    state = SequentialState.initial(temperature)
    alarms: list[tuple[int, datetime | None]] = []
    escalations: list[int] = []
    for t, row in enumerate(sums):
        check = update_sequential(state, as_stats(row, temperature), start=T0 + t * HOUR, end=T0 + (t + 1) * HOUR,
                                  reference=reference, policy=policy)
        state = check.state
        if check.alarm:
            alarms.append((t, check.change_point))
        if check.escalated:
            escalations.append(t)
    return alarms, escalations


def stream(
    sums: NDArray[np.float64], temperature: float, reference: TemperatureStats
) -> tuple[list[tuple[int, datetime | None]], NDArray[np.bool_]]:
    """Run both rules over hourly sums: the sequential alarms (hour index, change point) and,
    per hour t, whether the fixed 24 h window ending at hour t's end fires."""
    alarms, _ = sequential_alarms(sums, temperature, reference)
    cumulative = np.vstack([np.zeros(4), np.cumsum(sums, axis=0)])
    fixed = np.zeros(sums.shape[0], dtype=bool)
    for t in range(WARM_UP - 1, sums.shape[0]):
        fixed[t] = fixed_fires(cumulative[t + 1] - cumulative[t + 1 - WARM_UP], temperature, reference)
    return alarms, fixed


def one_run(
    name: str, logits: NDArray[np.float32], labels: NDArray[np.int64], seed: list[int], volumes: tuple[int, ...],
    tallies: dict[int, Tally], design: str,
) -> None:
    rng = np.random.default_rng(seed)
    half = labels.shape[0] // 2
    if design == "split":
        order = rng.permutation(labels.shape[0])
        a, b = np.sort(order[:half]), order[half:]
    else:  # "population": the file is the population; the reference is a sample of it, the traffic too
        a, b = np.sort(rng.integers(0, labels.shape[0], half)), np.arange(labels.shape[0])
    temperature = fit_temperature(logits[a], labels[a]).temperature
    reference = TemperatureStats.from_logits(logits[a], labels[a], temperature=temperature)
    scores = {factor: TopLabelScores.from_logits(factor * logits[b].astype(np.float64), labels[b],
                                                 temperature=temperature) for factor in (1.0, *FACTORS)}
    g0, h0 = scores[1.0].gradient, scores[1.0].curvature
    for volume in volumes:
        tally, batch = tallies[volume], max(1, round(volume / 24))
        tally.runs += 1
        # (a) 30 days of calibrated traffic after a day of warm-up.
        sums = hourly_sums(g0, h0, rng.integers(0, b.shape[0], (WARM_UP + DAYS * 24, batch)))
        alarms, fixed = stream(sums, temperature, reference)
        tally.false_alarms["sequential"] += sum(t >= WARM_UP for t, _ in alarms)
        tally.flagged_checks["sequential"] += sum(t >= WARM_UP for t, _ in alarms)
        _, escalations = sequential_alarms(sums, temperature, reference)
        tally.escalations += sum(t >= WARM_UP for t in escalations)
        previous, _ = sequential_alarms(sums, temperature, reference, PREVIOUS)
        tally.previous_alarms += sum(t >= WARM_UP for t, _ in previous)
        hourly = fixed[WARM_UP:]
        tally.flagged_checks["fixed hourly"] += int(hourly.sum())
        tally.false_alarms["fixed hourly"] += int(np.count_nonzero(hourly & ~np.concatenate([[False], hourly[:-1]])))
        daily = fixed[WARM_UP - 1 + 24 * np.arange(1, DAYS + 1)]
        tally.flagged_checks["fixed daily"] += int(daily.sum())
        tally.false_alarms["fixed daily"] += int(daily.sum())
        # (b), (c) a drift starting inside an hour, after 48-71 h of calibrated traffic.
        for factor in FACTORS:
            key = f"x{factor}"
            warm = int(rng.integers(48, 72))
            fraction = float(rng.random())  # of the drift hour that is still calibrated
            start = warm + fraction  # the drift's start, in hours from T0
            hours = warm + 1 + FOLLOW_UP
            rows = rng.integers(0, b.shape[0], (hours, batch))
            clean_sums = hourly_sums(g0, h0, rows)
            drift_sums = hourly_sums(scores[factor].gradient, scores[factor].curvature, rows)
            sums = clean_sums.copy()
            sums[warm + 1:] = drift_sums[warm + 1:]
            cut = int(round(fraction * batch))  # rows of the drift hour served before the start
            clean_part = hourly_sums(g0, h0, rows[warm:warm + 1, :cut])[0] if cut else np.zeros(4)
            drift_part = (hourly_sums(scores[factor].gradient, scores[factor].curvature, rows[warm:warm + 1, cut:])[0]
                          if cut < batch else np.zeros(4))
            sums[warm] = clean_part + drift_part
            alarms, fixed = stream(sums, temperature, reference)
            tally.early_alarms[key] += sum(t < warm for t, _ in alarms)
            after = [(t, cp) for t, cp in alarms if t >= warm]
            if after:
                t, change_point = after[0]
                tally.delays[key]["sequential"].append(t + 1 - start)
                if change_point is not None:
                    since = (change_point - T0) / HOUR
                    tally.change_point_error[key].append(since - start)
                    tally.pre_drift_share[key]["sequential"].append(max(0.0, start - since) / (t + 1 - since))
            else:
                tally.delays[key]["sequential"].append(math.inf)
            fired = [t for t in range(warm, hours) if fixed[t]]
            if fired:
                t = fired[0]
                tally.delays[key]["fixed hourly"].append(t + 1 - start)
                tally.pre_drift_share[key]["fixed hourly"].append(max(0.0, start - (t + 1 - 24)) / 24)
            else:
                tally.delays[key]["fixed hourly"].append(math.inf)
            daily_fired = [t for t in range(warm, hours) if fixed[t] and (t + 1) % 24 == 0]
            tally.delays[key]["fixed daily"].append(daily_fired[0] + 1 - start if daily_fired else math.inf)


def run_study(
    files: tuple[str, ...], volumes: tuple[int, ...], runs: int, seed: int, design: str
) -> dict[str, dict[int, Tally]]:
    results: dict[str, dict[int, Tally]] = {}
    for name in files:
        started = time.monotonic()
        logits, labels = load(name)
        tallies = {volume: Tally() for volume in volumes}
        index = file_index(name)
        for r in range(runs):
            one_run(name, logits, labels, [seed, index, r], volumes, tallies, design)
        results[name] = tallies
        print(f"{name}: {runs} runs in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return results


def _delay(values: list[float]) -> str:
    array = np.array(values)
    found = np.isfinite(array)
    if not found.any():
        return f"none within {FOLLOW_UP} h"
    median = float(np.median(array))  # inf when most are censored
    shown = f"{median:.1f}" if math.isfinite(median) else f">{FOLLOW_UP}"
    return f"{shown} ({np.percentile(array[found], 90):.1f}; {found.mean():.0%})"


def markdown(results: dict[str, dict[int, Tally]], volumes: tuple[int, ...], runs: int) -> str:
    lines = [f"**(a) False alarms per 30 days** of hourly checks on calibrated traffic ({runs} runs of 720 checks "
             "per file and volume): alarms (episodes of consecutive flagged checks for the hourly fixed window) per "
             "30 days; in brackets, flagged checks per 30 days; the sequential rule's escalations per 30 days, and "
             "its alarms without the escalation (the previous release) on the same traffic.", "",
             "| file | daily rows | sequential | escalations | sequential, previous | fixed 24 h, hourly | fixed 24 h, daily |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, tallies in results.items():
        for volume in volumes:
            t = tallies[volume]
            cells = [f"{t.false_alarms[r] / t.runs:.3f}" + ("" if r == "sequential" else
                                                             f" ({t.flagged_checks[r] / t.runs:.2f})") for r in RULES]
            cells[1:1] = [f"{t.escalations / t.runs:.3f}", f"{t.previous_alarms / t.runs:.3f}"]
            lines.append(f"| {name} | {volume:,} | " + " | ".join(cells) + " |")
    lines += ["", "**(b) Detection delay** in hours from the drift's start to the first alarm: median (90th percentile "
              f"of those detected; share detected within {FOLLOW_UP} h).", "",
              "| file | daily rows | drift | sequential | fixed 24 h, hourly | fixed 24 h, daily |",
              "| --- | ---: | --- | ---: | ---: | ---: |"]
    for name, tallies in results.items():
        for volume in volumes:
            for key, delays in tallies[volume].delays.items():
                lines.append(f"| {name} | {volume:,} | logits {key} | "
                             + " | ".join(_delay(delays[r]) for r in RULES) + " |")
    lines += ["", "**(c) Change point** at the sequential alarm: estimated − true start in hours, median [10th, 90th "
              "percentile]; share of pre-drift rows among the rows the refit would fit on (mean), sequential (rows since "
              "the change point) vs fixed (the last 24 h).", "",
              "| file | daily rows | drift | change-point error (h) | pre-drift rows, sequential | pre-drift rows, fixed |",
              "| --- | ---: | --- | ---: | ---: | ---: |"]
    for name, tallies in results.items():
        for volume in volumes:
            t = tallies[volume]
            for key, errors in t.change_point_error.items():
                e = np.array(errors)
                spread = (f"{np.median(e):+.1f} [{np.percentile(e, 10):+.1f}, {np.percentile(e, 90):+.1f}]"
                          if e.size else "n/a")
                shares = t.pre_drift_share[key]
                lines.append(f"| {name} | {volume:,} | logits {key} | {spread} | "
                             f"{np.mean(shares['sequential']):.1%} | {np.mean(shares['fixed hourly']):.1%} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- ARL₀ of the constants


def cusum_run_lengths(
    step: Callable[[int], NDArray[np.float64]], runs: int, horizon: int, k: float, h: float
) -> NDArray[np.float64]:
    """Run length to the first alarm of a two-sided CUSUM, per run (NaN: none within ``horizon``);
    ``step(t)`` gives the standardised steps of every run at check t."""
    upper = np.zeros(runs)
    lower = np.zeros(runs)
    length = np.full(runs, np.nan)
    for t in range(horizon):
        x = step(t)
        upper = np.maximum(0.0, upper + x - k)
        lower = np.maximum(0.0, lower - x - k)
        hit = np.isnan(length) & ((upper >= h) | (lower >= h))
        length[hit] = t + 1
        if not np.isnan(length).any():
            break
    return length


def siegmund(k: float, h: float) -> float:
    """Siegmund's ARL₀ of a one-sided CUSUM on N(0, 1) steps."""
    b = h + 1.166
    return (math.exp(2 * k * b) - 2 * k * b - 1) / (2 * k * k)


def arl(runs: int, seed: int) -> str:
    """ARL₀ of (k, h) at the worst case (margin 0, T exact): Gaussian steps, and the standardised
    scores of real CIFAR files (T fitted on the whole file, so the population is the file)."""
    k, h = DEFAULT_POLICY.cusum_reference, DEFAULT_POLICY.cusum_threshold
    rng = np.random.default_rng(seed)
    horizon = 15_000
    lines = [f"k = {k}, h = {h}; Siegmund: {siegmund(k, h):,.0f} checks per side, {siegmund(k, h) / 2:,.0f} two-sided.",
             "", "| steps | increment rows | runs | ARL₀ (checks) | share alarming within 720 checks |",
             "| --- | ---: | ---: | ---: | ---: |"]
    lengths = cusum_run_lengths(lambda t: rng.standard_normal(runs), runs, horizon, k, h)
    lines.append(f"| N(0, 1) | — | {runs} | {np.nanmean(np.where(np.isnan(lengths), horizon, lengths)):,.0f} | "
                 f"{np.mean(lengths <= 720):.3f} |")
    for name in ("cifar10_vgg16_verified_calibration", "cifar10_wrn16-4_netcal", "cifar100_wrn16-4_netcal"):
        logits, labels = load(name)
        temperature = fit_temperature(logits, labels).temperature
        scores = TopLabelScores.from_logits(logits, labels, temperature=temperature)
        sums = TemperatureStats.from_scores(scores)
        kappa = sums.gradient_variance / (sums.curvature_sum / sums.n)
        g, c = scores.gradient - scores.gradient.mean(), scores.curvature

        def real_step(t: int, rows: int, chunk_runs: int) -> NDArray[np.float64]:
            pick = rng.integers(0, g.shape[0], (chunk_runs, rows))
            return np.asarray(g[pick].sum(1) / np.sqrt(kappa * c[pick].sum(1)))

        for rows in (100, 400):
            chunk_runs = max(200, runs // 8)
            lengths = cusum_run_lengths(lambda t: real_step(t, rows, chunk_runs), chunk_runs, 6_000, k, h)
            censored = np.where(np.isnan(lengths), 6_000, lengths)
            lines.append(f"| {name} scores | {rows} | {chunk_runs} | {censored.mean():,.0f} | {np.mean(lengths <= 720):.3f} |")
            print(f"arl {name} {rows}: {censored.mean():.0f}", file=sys.stderr, flush=True)
    return "\n".join(lines)


def check_replica(seed: int) -> None:
    """The vectorised CUSUM above is the module's: same alarms on one stream of standardised steps."""
    rng = np.random.default_rng(seed)
    steps = rng.normal(0.3, 1.0, 300)
    state = SequentialState.initial(1.0)
    first = None
    for t, z in enumerate(steps):
        increment = TemperatureStats(temperature=1.0, n=100, gradient_sum=float(z) * 10.0, gradient_square_sum=100.0,
                                     curvature_sum=100.0)
        check = update_sequential(state, increment, start=T0 + t * HOUR, end=T0 + (t + 1) * HOUR,
                                  policy=DriftPolicy(temperature_margin=0.0))
        state = check.state
        if check.alarm:
            first = t + 1
            break
    replica = cusum_run_lengths(lambda t: steps[t:t + 1], 1, steps.shape[0], DEFAULT_POLICY.cusum_reference,
                                DEFAULT_POLICY.cusum_threshold)[0]
    assert first == replica, (first, replica)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sequential_study", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per file (default 200)")
    parser.add_argument("--files", nargs="+", default=list(FILES[:4]),
                        help="files of tests/data/real-logits (no .npz; default: the issue's four)")
    parser.add_argument("--volumes", nargs="+", type=int, default=[2_000, 10_000],
                        help="labelled rows per day (default 2000 10000)")
    parser.add_argument("--seed", type=int, default=12, help="seed (default 12)")
    parser.add_argument("--design", choices=("population", "split"), default="population",
                        help="population (default): reference and traffic both drawn with replacement from the whole "
                        "file; split: reference = half A, traffic from half B with replacement")
    parser.add_argument("--json", type=Path, help="also write the raw tallies as JSON here")
    parser.add_argument("--arl", action="store_true", help="print ARL₀ of the constants and exit")
    args = parser.parse_args(argv)
    if args.arl:
        check_replica(args.seed)
        print(arl(max(args.runs, 4_000), args.seed))
        return 0
    volumes = tuple(args.volumes)
    results = run_study(tuple(args.files), volumes, args.runs, args.seed, args.design)
    if args.json is not None:
        raw = {name: {str(v): {"runs": t.runs, "false_alarms": t.false_alarms, "flagged_checks": t.flagged_checks,
                               "delays": {key: {rule: [None if math.isinf(d) else d for d in values]
                                                for rule, values in rules.items()} for key, rules in t.delays.items()},
                               "change_point_error": t.change_point_error, "pre_drift_share": t.pre_drift_share,
                               "early_alarms": t.early_alarms, "escalations": t.escalations,
                               "previous_alarms": t.previous_alarms}
                      for v, t in tallies.items()} for name, tallies in results.items()}
        args.json.write_text(json.dumps(raw, indent=1))
    print(markdown(results, volumes, args.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
