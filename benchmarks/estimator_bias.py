"""Bias of the calibration-error estimators against the truth, on a model of known calibration.

Run from the repository root (about a minute on 2 cores)::

    .venv/bin/python -m benchmarks.estimator_bias            # 400 seeds per cell
    .venv/bin/python -m benchmarks.estimator_bias --seeds 50 # a quick look

The model: the top-label confidence C follows Beta(5, 1) (mean 0.83, most mass near 1, as
for a trained classifier) and the prediction is right with probability
f(C) = expit(logit(C) / τ). τ = 1 is perfectly calibrated (labels drawn from the model's own
confidence); τ = 1.25 and τ = 1.5 are models whose log-odds are 1.25 and 1.5 times too large
(over-confident above C = 0.5). The truth is a one-dimensional integral over C (scipy's
``quad``): the ECE E|f(C) - C| and the ℓ2 calibration error sqrt(E (f(C) - C)²); for the
smooth ECE its own population value, the fixed point σ* of
σ ↦ ∫_0^1 |∫ K_σ(t, c)(f(c) - c) p(c) dc| dt with the reflected Gaussian kernel, summed
directly (midpoint rule over 4,000 values of c, trapezoid over 2,001 values of t).

For every n in 500, 2,000, 10,000 and 100,000 and every seed, n rows are drawn and each
estimator of :func:`calibration.calibration_error_from_stats` is computed from the rows'
:class:`calibration.ConfidenceHistogram` (15 equal-width bins; the smooth ECE's grid of
2,000 cells). The script prints one markdown table per τ: per estimator and n, the mean
error against the truth (estimate - truth) and the standard deviation over the seeds.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import integrate, optimize, stats
from scipy.special import expit, logit

from calibration import SMOOTH_GRID_BINS, ConfidenceHistogram, calibration_error_from_stats

BETA = (5.0, 1.0)
SIZES = (500, 2_000, 10_000, 100_000)
SCALES = (1.0, 1.25, 1.5)


def calibration_function(confidence: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
    """P(right | C = c) = expit(logit(c) / scale)."""
    return np.asarray(expit(logit(np.clip(confidence, 1e-12, 1.0 - 1e-12)) / scale), dtype=np.float64)


def _moment(function: Callable[[float], float]) -> float:
    return float(integrate.quad(lambda c: function(c) * stats.beta.pdf(c, *BETA), 0.0, 1.0, limit=200)[0])


def _smooth_at(positions: NDArray[np.float64], weights: NDArray[np.float64], bandwidth: float) -> float:
    """∫_0^1 |Σ_i w_i K_σ(t, c_i)| dt, the reflected kernel's three terms that reach [0, 1]."""
    t = np.linspace(0.0, 1.0, 2001)[:, None]
    kernel = sum(np.exp(-0.5 * ((t - image[None, :]) / bandwidth) ** 2) for image in (positions, -positions,
                                                                                      2.0 - positions))
    smoothed = kernel @ weights / (bandwidth * math.sqrt(2.0 * math.pi))
    return float(integrate.trapezoid(np.abs(smoothed), t[:, 0]))


def truths(scale: float) -> dict[str, float]:
    """The population ECE, ℓ2 error (and its square) and smooth ECE of the model at ``scale``,
    and the binned ECE and CE² with the estimators' 15 equal-width bins (which cannot see
    the gap's variation within a bin, so they sit a little below the first two)."""
    squared = _moment(lambda c: float((calibration_function(np.array(c), scale) - c) ** 2))
    edges = np.linspace(0.0, 1.0, 16)
    gap = np.array([
        integrate.quad(lambda c: float(calibration_function(np.array(c), scale) - c) * stats.beta.pdf(c, *BETA),
                       low, high)[0]
        for low, high in zip(edges[:-1], edges[1:])
    ])
    mass = np.diff(stats.beta.cdf(edges, *BETA))
    result = {
        "ece": _moment(lambda c: float(abs(calibration_function(np.array(c), scale) - c))),
        "l2": math.sqrt(squared),
        "l2_squared": squared,
        "smooth": 0.0,
        "binned_ece": float(np.abs(gap).sum()),
        "binned_l2_squared": float(np.sum(np.divide(gap**2, mass, out=np.zeros_like(gap), where=mass > 0))),
    }
    if scale != 1.0:
        positions = (np.arange(4000) + 0.5) / 4000
        weights = (calibration_function(positions, scale) - positions) * stats.beta.pdf(positions, *BETA) / 4000
        result["smooth"] = float(optimize.brentq(lambda s: _smooth_at(positions, weights, s) - s, 1e-3, 0.15,
                                                 xtol=1e-9))
    return result


# Each row of the table: its label, the estimator, what of the result is compared, and the truth it is compared with.
ROWS: tuple[tuple[str, str, str, str], ...] = (
    ("binned ECE (before this change)", "binned", "estimate", "ece"),
    ("debiased_l1 ECE", "debiased_l1", "estimate", "ece"),
    ("smooth ECE (vs its population value)", "smooth", "estimate", "smooth"),
    ("debiased_l2 CE (root, clamped at 0)", "debiased_l2", "estimate", "l2"),
    ("debiased_l2 CE² (unclamped)", "debiased_l2", "squared_estimate", "l2_squared"),
)


def errors(scale: float, n: int, seeds: int, truth: dict[str, float]) -> dict[str, NDArray[np.float64]]:
    """estimate - truth per row of :data:`ROWS`, one value per seed."""
    found: dict[str, list[float]] = {label: [] for label, *_ in ROWS}
    for seed in range(seeds):
        rng = np.random.default_rng([seed, n, int(scale * 1000)])
        confidence = rng.beta(*BETA, n)
        correct = rng.random(n) < calibration_function(confidence, scale)
        histograms = {
            False: ConfidenceHistogram.from_confidence(confidence, correct, n_bins=15),
            True: ConfidenceHistogram.from_confidence(confidence, correct, n_bins=SMOOTH_GRID_BINS),
        }
        results = {
            name: calibration_error_from_stats(histograms[name == "smooth"], estimator=name, n_resamples=1)
            for name in {estimator for _, estimator, _, _ in ROWS}
        }
        for label, estimator, field, target in ROWS:
            found[label].append(float(getattr(results[estimator], field)) - truth[target])
    return {label: np.array(values) for label, values in found.items()}


def table(scale: float, seeds: int, sizes: Sequence[int]) -> str:
    truth = truths(scale)
    by_size = {n: errors(scale, n, seeds, truth) for n in sizes}
    heading = (
        f"τ = {scale:g}: ECE {truth['ece']:.5f}, ℓ2 CE {truth['l2']:.5f} (CE² {truth['l2_squared']:.6f}), "
        f"smooth ECE {truth['smooth']:.5f} (with 15 bins: ECE {truth['binned_ece']:.5f}, "
        f"CE² {truth['binned_l2_squared']:.6f}); mean error (estimate - truth) and SD over {seeds} seeds"
    )
    lines = [heading, "", "| estimator | " + " | ".join(f"n = {n:,}" for n in sizes) + " |",
             "| --- | " + " | ".join("---:" for _ in sizes) + " |"]
    for label, _, field, _ in ROWS:
        digits = 6 if field == "squared_estimate" else 4
        cells = [f"{by_size[n][label].mean():+.{digits}f} (SD {by_size[n][label].std():.{digits}f})" for n in sizes]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.estimator_bias", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=400, help="seeds per (τ, n) cell (default 400)")
    args = parser.parse_args(argv)
    for scale in SCALES:
        print(table(scale, args.seeds, SIZES), end="\n\n", flush=True)


if __name__ == "__main__":
    main()
