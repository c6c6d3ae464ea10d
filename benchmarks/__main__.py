"""`python -m benchmarks`: Thermostat's fit and evaluation against peers, side by side.

Run through `make bench` (benchmarks/run.sh), which builds .venv-bench with the `bench`
extra's peers. Prints, per case and implementation: median and min/max wall time over
repeats, T found, |ΔT| relative to the float64 optimum, peak memory beyond the inputs
(tracemalloc: numpy and torch CPU allocations are traced through Python's allocator hooks
for numpy only, so torch peaks read as "-"), and the ratio ours/implementation.

Options: --repeats N (default 5), --quick (smaller cases), --only NAME (a case's prefix).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize_scalar

from calibration import CalibrationStats, compile_kernels, fit_temperature
from calibration._fit import _expansion, _warm_start, minimise_nll
from calibration._kernels import _reference_nll_expansion_sums, nll_expansion_sums

REAL = Path(__file__).resolve().parents[1] / "tests" / "data" / "real-logits" / "cifar100_densenet-bc-100_netcal.npz"


@dataclass
class Row:
    name: str
    times: list[float]
    temperature: float | None
    peak_bytes: int | None


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], Any, int]:
    result = fn()  # warm-up (compilation, caches); its result is reported
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return times, result, peak


def synthetic(n: int, k: int, seed: int = 0) -> tuple[NDArray[np.float32], NDArray[np.intp]]:
    """Labels drawn from softmax(z), logits 2.5 z, float32 (true T = 2.5)."""
    rng = np.random.default_rng(seed)
    logits = np.empty((n, k), dtype=np.float32)
    labels = np.empty(n, dtype=np.intp)
    step = max(1, (1 << 21) // k)
    for start in range(0, n, step):
        z = rng.standard_normal((min(step, n - start), k))
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        labels[start : start + len(z)] = (p.cumsum(axis=1) > rng.random((len(z), 1))).argmax(axis=1)
        logits[start : start + len(z)] = 2.5 * z
    return logits, labels


def exact_nll(logits: NDArray[Any], labels: NDArray[np.intp], temperature: float, dtype: Any = np.float64) -> float:
    """Mean NLL, exact log-softmax, computed in ``dtype`` (float32 as a float32 peer would)."""
    d = logits.astype(dtype, copy=False) / dtype(temperature)
    d = d - d.max(axis=1, keepdims=True)
    return float(np.mean(np.log(np.exp(d).sum(axis=1)) - d[np.arange(len(d)), labels]))


def float64_optimum(logits: NDArray[Any], labels: NDArray[np.intp]) -> float:
    """The reference: the float64 optimum to 1e-10 (our exact passes, iterated to convergence)."""
    return 1.0 / minimise_nll(_expansion(logits, labels, at_one=False), (0.05, 20.0), tolerance=1e-12).inverse_temperature


# ---------------------------------------------------------------- peers fitting T


def peer_scipy(logits: NDArray[Any], labels: NDArray[np.intp]) -> float:
    result = minimize_scalar(
        lambda log_t: exact_nll(logits, labels, float(np.exp(log_t)), np.float32 if logits.dtype == np.float32 else np.float64),
        bounds=(np.log(0.05), np.log(20.0)),
        method="bounded",
    )
    return float(np.exp(result.x))


def peer_torch(logits: NDArray[Any], labels: NDArray[np.intp]) -> float:
    import torch

    z = torch.from_numpy(logits)
    y = torch.from_numpy(labels.astype(np.int64))
    log_t = torch.zeros(1, dtype=z.dtype, requires_grad=True)
    optimiser = torch.optim.LBFGS([log_t], lr=1.0, max_iter=100, line_search_fn="strong_wolfe")
    loss_fn = torch.nn.CrossEntropyLoss()

    def closure() -> Any:
        optimiser.zero_grad()
        loss = loss_fn(z / torch.exp(log_t), y)
        loss.backward()
        return loss

    optimiser.step(closure)
    return float(torch.exp(log_t).item())


class _Frozen:
    """A fitted 'classifier' that returns the stored logits (sklearn's FrozenEstimator needs it)."""

    def __init__(self, logits: NDArray[Any], n_classes: int) -> None:
        self.logits = logits
        self.classes_ = np.arange(n_classes)
        self._estimator_type = "classifier"

    def fit(self, X: Any, y: Any) -> _Frozen:
        return self

    def decision_function(self, X: NDArray[Any]) -> NDArray[Any]:
        return self.logits[X[:, 0].astype(np.intp)]

    def predict(self, X: NDArray[Any]) -> NDArray[Any]:
        return self.decision_function(X).argmax(axis=1)

    def predict_proba(self, X: NDArray[Any]) -> NDArray[Any]:
        z = self.decision_function(X)
        p = np.exp(z - z.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import ClassifierTags, Tags, TargetTags

        return Tags(estimator_type="classifier", target_tags=TargetTags(required=True), classifier_tags=ClassifierTags())


def peer_sklearn(logits: NDArray[Any], labels: NDArray[np.intp]) -> float:
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator

    index = np.arange(len(labels), dtype=np.float64)[:, None]
    model = CalibratedClassifierCV(FrozenEstimator(_Frozen(logits, logits.shape[1])), method="temperature")
    model.fit(index, labels)
    return 1.0 / float(model.calibrated_classifiers_[0].calibrators[0].beta_)


def peer_netcal(logits: NDArray[Any], labels: NDArray[np.intp]) -> float:
    from netcal.scaling import TemperatureScaling

    z = logits.astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    model = TemperatureScaling(method="mle")
    model.fit(p, labels)
    return 1.0 / float(np.ravel(model.temperature)[0])


def peer_grid(logits: NDArray[Any], labels: NDArray[np.intp]) -> float:
    grid = np.geomspace(0.05, 20.0, 200)
    return float(grid[int(np.argmin([exact_nll(logits, labels, t, np.float32) for t in grid]))])


# The floors run at a generic inverse temperature: the float64 optimum's 1/T in the fit
# cases (not a ratio of small integers: no shortcut of any kind), 1/2.5 in the evaluation
# case (the T it evaluates at). run_case sets it before timing.
_FLOOR_BETA = 0.4


def floor_numpy(logits: NDArray[Any], labels: NDArray[np.intp]) -> None:
    """One plain numpy pass: row max, subtract, scale, exp, row sum (in 8 MB chunks)."""
    step = max(1, (1 << 20) // logits.shape[1])
    for start in range(0, len(logits), step):
        d = logits[start : start + step].astype(np.float64)
        d -= d.max(axis=1, keepdims=True)
        d *= _FLOOR_BETA
        np.exp(d, out=d)
        d.sum(axis=1)


def floor_fused(logits: NDArray[Any], labels: NDArray[np.intp]) -> None:
    """One fused pass at 1/T = _FLOOR_BETA: per row max, subtract, scale, exp, the row sums
    Σe and Σe·d, and the five centred moment sums (the expansion kernel without the NLL at
    T = 1). Every exact fit must read every logit once: this is the floor."""
    nll_expansion_sums(logits, labels, _FLOOR_BETA, with_nll_at_one=False, compiled=True)


def full_pass_of_the_fit(logits: NDArray[Any], labels: NDArray[np.intp]) -> None:
    """What fit_temperature's full pass costs: the expansion at the p/q near the warm start,
    with the NLL at T = 1 (a component of the fit, shown to break its time down)."""
    start = _warm_start(logits, labels, (0.05, 20.0))
    nll_expansion_sums(logits, labels, start, with_nll_at_one=True)


def ours(logits: NDArray[Any], labels: NDArray[np.intp]) -> float:
    return fit_temperature(logits, labels).temperature


# ---------------------------------------------------------------- evaluation peers


def evaluate_ours(logits: NDArray[Any], labels: NDArray[np.intp]) -> float:
    stats = CalibrationStats.from_logits(logits, labels, temperature=2.5, n_bins=15)
    _ = (stats.nll, stats.ece, stats.mce, stats.accuracy, stats.brier, stats.mean_confidence)
    return stats.ece


def ece_torchmetrics(logits: NDArray[Any], labels: NDArray[np.intp]) -> float:
    import torch
    from torchmetrics.functional.classification import multiclass_calibration_error

    z = torch.from_numpy(logits) / 2.5
    return float(multiclass_calibration_error(z.softmax(dim=1), torch.from_numpy(labels.astype(np.int64)), num_classes=logits.shape[1], n_bins=15))


def ece_relplot(logits: NDArray[Any], labels: NDArray[np.intp]) -> float:
    import relplot

    f, y = relplot.multiclass_logits_to_confidences(logits / 2.5, labels)
    return float(relplot.metrics.binnedECE(f, y, nbins=15))


def floor_fused_evaluation(logits: NDArray[Any], labels: NDArray[np.intp]) -> None:
    nll_expansion_sums(logits, labels, _FLOOR_BETA, with_nll_at_one=False, compiled=True)


# ---------------------------------------------------------------- runner

FIT_PEERS: list[tuple[str, Callable[..., Any]]] = [
    ("thermostat fit_temperature", ours),
    ("floor: one fused pass (numba), generic 1/T", floor_fused),
    ("floor: one numpy pass", floor_numpy),
    ("component: fit's full pass incl. NLL at T=1", full_pass_of_the_fit),
    ("torch L-BFGS strong-Wolfe (lr 1)", peer_torch),
    ("scipy bounded, log T, numpy NLL", peer_scipy),
    ("sklearn CalibratedClassifierCV temperature", peer_sklearn),
    ("netcal TemperatureScaling mle (float64 probs)", peer_netcal),
    ("200-point grid", peer_grid),
]
EVAL_PEERS: list[tuple[str, Callable[..., Any]]] = [
    ("thermostat CalibrationStats.from_logits", evaluate_ours),
    ("floor: one fused pass (numba), 1/T = 0.4", floor_fused_evaluation),
    ("floor: one numpy pass", floor_numpy),
    ("torchmetrics multiclass_calibration_error", ece_torchmetrics),
    ("relplot binnedECE (with its softmax)", ece_relplot),
]


def run_case(title: str, logits: NDArray[Any], labels: NDArray[np.intp], peers: list[tuple[str, Callable[..., Any]]], repeats: int, skip: set[str], evaluation: bool = False) -> None:
    global _FLOOR_BETA
    input_bytes = logits.nbytes + labels.nbytes
    optimum = None if evaluation else float64_optimum(logits, labels)
    _FLOOR_BETA = 0.4 if optimum is None else 1.0 / optimum
    print(f"\n### {title}: N={logits.shape[0]:,} K={logits.shape[1]:,} {logits.dtype}, input {input_bytes / 2**20:.1f} MiB"
          + ("" if optimum is None else f", float64 optimum T={optimum:.7f}"))
    rows: list[Row] = []
    for name, fn in peers:
        if name in skip:
            continue
        try:
            times, result, peak = _timed(lambda: fn(logits, labels), repeats)
        except Exception as exc:  # a peer that fails is reported, not fatal
            print(f"  {name}: failed: {type(exc).__name__}: {exc}")
            continue
        rows.append(Row(name, times, result if isinstance(result, float) else None, peak))
    ours_median, ours_min = statistics.median(rows[0].times), min(rows[0].times)
    print("| implementation | median s | min–max s | T | |ΔT|/T | peak beyond input | ours / it: medians (mins) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        median = statistics.median(row.times)
        t = "" if row.temperature is None else (f"{row.temperature:.6f}" if not evaluation else f"ECE {row.temperature:.5f}")
        delta = "" if (row.temperature is None or optimum is None) else f"{abs(row.temperature / optimum - 1):.1e}"
        peak = "" if row.peak_bytes is None else f"{row.peak_bytes / 2**20:.1f} MiB ({row.peak_bytes / input_bytes:.1%})"
        print(f"| {row.name} | {median:.4f} | {min(row.times):.4f}–{max(row.times):.4f} | {t} | {delta} | {peak} | {ours_median / median:.3f} ({ours_min / min(row.times):.3f}) |")


def map_reduce_demo(logits: NDArray[Any], labels: NDArray[np.intp]) -> None:
    """The fit over 4 partitions: per-partition sums (map), added (reduce), same T."""
    whole = fit_temperature(logits, labels)
    parts = np.array_split(np.arange(len(labels)), 4)

    start = _warm_start(logits, labels, (0.05, 20.0))  # each partition can compute its share

    def expand(beta: float, at_one: bool) -> NDArray[np.float64]:
        return sum(nll_expansion_sums(logits[p], labels[p], beta, with_nll_at_one=at_one) for p in parts)

    merged = minimise_nll(expand, (0.05, 20.0), start=start)
    t = 1.0 / merged.inverse_temperature
    print(f"\n### Map-reduce: 4 partitions, sums added: T={t:.10f} vs whole T={whole.temperature:.10f} "
          f"(|ΔT|/T = {abs(t / whole.temperature - 1):.1e}); nll_before {merged.nll_at_one:.12f} vs {whole.nll_before:.12f}")


def describe_machine() -> None:
    import numba
    import scipy

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")), "?")
    print(f"machine: {os.cpu_count()} CPUs ({model}); Python {platform.python_version()}, numpy {np.__version__}, "
          f"scipy {scipy.__version__}, numba {numba.__version__} ({numba.get_num_threads()} threads); "
          f"load average {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smaller cases, fewer peers (a smoke run)")
    parser.add_argument("--only", default="", help="run the cases whose title starts with this")
    args = parser.parse_args()
    describe_machine()
    # The cases measure the compiled kernels: compile them (or load them from the cache) first, as
    # `calibration.compile_kernels` does once per installation; numba then runs in this process,
    # so every input of COMPILED_MIN_ELEMENTS logits or more takes them.
    started = time.perf_counter()
    compile_kernels()
    print(f"kernels compiled or loaded from the cache in {time.perf_counter() - started:.1f} s")
    slow = {"200-point grid", "netcal TemperatureScaling mle (float64 probs)"} if args.quick else set()
    scale = 10 if args.quick else 1
    real = np.load(REAL)
    cases = [
        ("fit synthetic", lambda: synthetic(200_000 // scale, 100), FIT_PEERS, slow, False),
        ("fit real CIFAR-100 DenseNet-BC", lambda: (real["logits"], real["labels"].astype(np.intp)), FIT_PEERS, set(), False),
        ("fit large K", lambda: synthetic(20_000 // scale, 1_000, 1), FIT_PEERS, slow | {"200-point grid"}, False),
        ("fit tiny N", lambda: synthetic(10, 100, 2), [p for p in FIT_PEERS if "floor" not in p[0] and "component" not in p[0]], set(), False),
        ("evaluate a window", lambda: synthetic(1_000_000 // scale, 100, 3), EVAL_PEERS, set(), True),
    ]
    for title, make, peers, skip, evaluation in cases:
        if not title.startswith(args.only):
            continue
        logits, labels = make()
        run_case(title, logits, labels, peers, args.repeats, skip, evaluation)
    if not args.only:
        map_reduce_demo(*synthetic(200_000 // scale, 100))


if __name__ == "__main__":
    main()
