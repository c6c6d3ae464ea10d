"""NannyML's CBPE accuracy estimates for the early-warning study, run in NannyML's own environment.

Usage (``benchmarks/early_warning_study.py`` starts it; by hand)::

    NML_DISABLE_USAGE_LOGGING=1 /path/to/nannyml-venv/bin/python benchmarks/cbpe_worker.py JOB.npz OUT.npz

NannyML (``pip install nannyml``: pandas, scikit-learn, statsmodels, ...) is not a dependency
of Thermostat, so this script imports nothing of it, only numpy, pandas and nannyml. ``JOB.npz``
holds ``logits_path`` (a file of ``tests/data/real-logits``), ``temperatures`` (R,),
``reference_rows`` (R, m) and, per window size n in ``sizes``, ``rows_<n>`` (R, W, n) with
``factors_<n>`` (W,): window w of reference r is the rows ``rows_<n>[r, w]`` with every logit
multiplied by ``factors_<n>[w]``, read at ``temperatures[r]``. For each reference, CBPE
(multiclass, accuracy, its default isotonic calibration) is fitted on the reference rows'
softmax probabilities and labels, once, with chunks of the smallest n, and estimates each window
as the mean of its chunks' estimates (CBPE's accuracy of a chunk is the mean calibrated
probability of its predicted class, so that mean is the window's own); ``OUT.npz`` holds
``cbpe_<n>`` (R, W).
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _probabilities(logits: np.ndarray, temperature: float) -> np.ndarray:
    scaled = logits / temperature
    scaled -= scaled.max(axis=1, keepdims=True)
    weights = np.exp(scaled)
    return weights / weights.sum(axis=1, keepdims=True)


def _frame(probabilities: np.ndarray, labels: np.ndarray | None = None) -> pd.DataFrame:
    columns = {f"p{k}": probabilities[:, k] for k in range(probabilities.shape[1])}
    frame = pd.DataFrame(columns)
    frame["pred"] = probabilities.argmax(axis=1)
    if labels is not None:
        frame["y"] = labels
    return frame


def main(job_path: str, out_path: str) -> int:
    import nannyml

    job = np.load(job_path)
    data = np.load(str(job["logits_path"]))
    logits, labels = data["logits"].astype(np.float64), data["labels"]
    classes = logits.shape[1]
    columns = {k: f"p{k}" for k in range(classes)}
    sizes = [int(n) for n in job["sizes"]]
    results = {n: np.full(job[f"rows_{n}"].shape[:2], np.nan) for n in sizes}
    chunk = min(sizes)  # CBPE's accuracy of a chunk is the mean calibrated probability of its predicted class:
    for r, temperature in enumerate(job["temperatures"]):  # a window of m chunks is the mean of their estimates
        rows = job["reference_rows"][r]
        reference = _frame(_probabilities(logits[rows], float(temperature)), labels[rows])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator = nannyml.CBPE(y_pred_proba=columns, y_pred="pred", y_true="y",
                                     problem_type="classification_multiclass", metrics=["accuracy"], chunk_size=chunk)
            estimator.fit(reference)
            for n in sizes:
                if n % chunk:
                    raise ValueError(f"window size {n} is not a multiple of {chunk}")
                windows, factors = job[f"rows_{n}"][r], job[f"factors_{n}"]
                analysis = pd.concat([_frame(_probabilities(factor * logits[window], float(temperature)))
                                      for window, factor in zip(windows, factors, strict=True)], ignore_index=True)
                table = estimator.estimate(analysis).to_df()
                table = table[table[("chunk", "period")] == "analysis"]
                values = table[("accuracy", "value")].to_numpy(dtype=np.float64)
                if values.shape[0] != windows.shape[0] * (n // chunk):
                    raise RuntimeError(f"CBPE returned {values.shape[0]} chunks for {windows.shape[0]} windows of {n} rows")
                results[n][r] = values.reshape(windows.shape[0], n // chunk).mean(axis=1)
        print(f"cbpe reference {r + 1}/{len(job['temperatures'])}", file=sys.stderr, flush=True)
    arrays: dict[str, Any] = {f"cbpe_{n}": values for n, values in results.items()}
    np.savez(out_path, **arrays)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
