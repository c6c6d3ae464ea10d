"""Coverage of the calibration-error estimators' 95 % intervals, on a model of known calibration.

Run from the repository root (about ten minutes on 2 cores; ``--runs 50`` for a quick look)::

    .venv/bin/python -m benchmarks.estimator_coverage            # 200 runs per cell

The model is that of :mod:`benchmarks.estimator_bias`: confidence C ~ Beta(5, 1), right with
probability expit(logit(C) / τ); τ = 1 is calibrated (every truth is 0, on the boundary of
what an error can be), τ = 1.25 and 1.5 are over-confident. For every estimator, τ and n,
``runs`` seeded samples of n rows are drawn, the estimate and its 95 % interval computed from
the rows' :class:`calibration.ConfidenceHistogram` (15 equal-width bins; the smooth ECE's
2,000-cell grid) with 200 resamples, and the share of intervals holding the truth is
printed: the population binned ECE (15 bins) for ``binned`` and ``debiased_l1``, the root of
the population binned CE² for ``debiased_l2``, the population smooth ECE for ``smooth``.
A binomial 95 % range around 0.95 for 200 runs is ±0.03.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

import numpy as np

from benchmarks.estimator_bias import BETA, calibration_function, truths
from calibration import ESTIMATORS, SMOOTH_GRID_BINS, ConfidenceHistogram, calibration_error_from_stats

SIZES = (500, 2_000, 10_000)
SCALES = (1.0, 1.25, 1.5)
RESAMPLES = 200


def target(estimator: str, truth: dict[str, float]) -> float:
    """The quantity the estimator's interval is of (see the module docstring)."""
    if estimator == "smooth":
        return truth["smooth"]
    if estimator == "debiased_l2":
        return math.sqrt(truth["binned_l2_squared"])
    return truth["binned_ece"]


def coverage(estimator: str, scale: float, n: int, runs: int, truth: dict[str, float]) -> tuple[float, float]:
    """(share of intervals holding the truth, mean width) over ``runs`` seeded samples."""
    goal, covered, widths = target(estimator, truth), 0, []
    for run in range(runs):
        rng = np.random.default_rng([run, n, int(scale * 1000)])
        confidence = rng.beta(*BETA, n)
        correct = rng.random(n) < calibration_function(confidence, scale)
        histogram = ConfidenceHistogram.from_confidence(
            confidence, correct, n_bins=SMOOTH_GRID_BINS if estimator == "smooth" else 15)
        result = calibration_error_from_stats(histogram, estimator=estimator, n_resamples=RESAMPLES, seed=run)
        covered += result.low <= goal <= result.high
        widths.append(result.high - result.low)
    return covered / runs, float(np.mean(widths))


def table(runs: int, sizes: Sequence[int], scales: Sequence[float]) -> str:
    found = {scale: truths(scale) for scale in scales}
    columns = [(scale, n) for scale in scales for n in sizes]
    lines = [f"Coverage of the 95 % interval ({runs} runs per cell; mean width in brackets)", "",
             "| estimator | " + " | ".join(f"τ = {scale:g}, n = {n:,}" for scale, n in columns) + " |",
             "| --- |" + " ---: |" * len(columns)]
    for estimator in ESTIMATORS:
        cells = []
        for scale, n in columns:
            share, width = coverage(estimator, scale, n, runs, found[scale])
            cells.append(f"{share:.3f} ({width:.4f})")
        lines.append(f"| {estimator} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.estimator_coverage",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per cell (default 200)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="rows per sample")
    parser.add_argument("--scales", type=float, nargs="+", default=list(SCALES), help="τ values (1 is calibrated)")
    args = parser.parse_args(argv)
    print(table(args.runs, args.sizes, args.scales), flush=True)


if __name__ == "__main__":
    main()
