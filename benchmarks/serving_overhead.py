"""What logging every prediction adds to a request of the served calibrated pyfunc.

The pyfunc is saved exactly as a registration saves it (:func:`flows.registry.adapter.save_calibrated_model`)
around a scikit-learn logistic regression on the digits (64 features, 10 classes), and loaded
three times with ``mlflow.pyfunc.load_model`` — the same load ``mlflow models serve`` does:

* ``off`` — ``THERMOSTAT_PREDICTION_LOG_URL`` unset: no logging (the response still carries
  ``request_id``, ``model_version``, ``temperature``);
* ``sqlite`` — logging to a SQLite file (WAL) with the default batching (256 rows or 250 ms);
* ``dead`` — logging to a PostgreSQL URL on a port nothing listens on: every batch fails and
  is counted lost.

Requests are interleaved (each round calls the three models once, in a shuffled order), so the
three see the same machine load. Per request size it prints p50/p99/max of the in-process
``predict`` latency per configuration and the p50/p99 difference to ``off`` (the added
latency), plus the time spent inside the writer's ``submit`` itself (the only work logging
adds to the request's thread; the writes run on the writer's thread, competing for the GIL and
the CPU). HTTP parsing and serialisation of ``mlflow models serve`` are the same with and
without logging, so they are left out.

Usage::

    .venv/bin/python benchmarks/serving_overhead.py                  # 3000 requests per size and config
    .venv/bin/python benchmarks/serving_overhead.py --requests 500 --sizes 1 32
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import mlflow.pyfunc  # noqa: E402
import mlflow.sklearn  # noqa: E402
from mlflow.models import infer_signature  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from flows.registry.model import LOG_URL_VARIABLE  # noqa: E402
from flows.registry.adapter import save_calibrated_model  # noqa: E402

IDENTITY = {"registered_model_name": "bench", "registered_model_version": "1"}


def _model_dir(root: Path) -> Path:
    x, y = load_digits(return_X_y=True)
    estimator = LogisticRegression(max_iter=1000).fit(x[:1000], y[:1000])
    mlflow.sklearn.save_model(estimator, str(root / "checkpoint"), pyfunc_predict_fn="predict_log_proba",
                              signature=infer_signature(x[:5], estimator.predict_log_proba(x[:5])))
    save_calibrated_model(root / "calibrated", checkpoint_dir=root / "checkpoint", n_classes=10,
                          model_config={"temperature": 1.7, "gate_threshold": 0.9, "checkpoint_output": "logits"})
    return root / "calibrated"


def _load(path: Path, url: str | None) -> Any:
    if url is None:
        os.environ.pop(LOG_URL_VARIABLE, None)
    else:
        os.environ[LOG_URL_VARIABLE] = url
    model = mlflow.pyfunc.load_model(str(path), model_config=IDENTITY)
    os.environ.pop(LOG_URL_VARIABLE, None)
    return model


class _TimedSubmit:
    """Wraps a writer's submit to time it (the request-path cost of logging)."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.times: list[int] = []
        self.original = writer.submit

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        try:
            return self.original(*args, **kwargs)
        finally:
            self.times.append(time.perf_counter_ns() - start)


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"postgresql+psycopg://bench@127.0.0.1:{sock.getsockname()[1]}/log"


def _ms(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests per size and configuration")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 32], help="rows per request")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}); Python {platform.python_version()}, "
          f"mlflow {mlflow.__version__}; load average {load:.2f}")
    with tempfile.TemporaryDirectory(prefix="thermostat-serving-bench-") as workdir:
        root = Path(workdir)
        path = _model_dir(root)
        models = {"off": _load(path, None), "sqlite": _load(path, f"sqlite:///{root / 'predictions.db'}"),
                  "dead": _load(path, _dead_url())}
        timers: dict[str, _TimedSubmit] = {}
        for name in ("sqlite", "dead"):
            writer = models[name].unwrap_python_model()._writer  # noqa: SLF001 - a benchmark looks inside
            timers[name] = _TimedSubmit(writer)
            writer.submit = timers[name]
        x, _ = load_digits(return_X_y=True)
        rng = random.Random(args.seed)
        for size in args.sizes:
            requests = [x[(i * size) % (len(x) - size):][:size] for i in range(args.requests)]
            for model in models.values():  # warm-up
                for request in requests[:50]:
                    model.predict(request)
            for timer in timers.values():
                timer.times.clear()
            latencies: dict[str, list[int]] = {name: [] for name in models}
            order = list(models)
            for request in requests:
                rng.shuffle(order)
                for name in order:
                    start = time.perf_counter_ns()
                    models[name].predict(request)
                    latencies[name].append(time.perf_counter_ns() - start)
            for name in ("sqlite", "dead"):
                models[name].unwrap_python_model().flush_prediction_log(60.0)
            print(f"\n### {size} row(s) per request, {args.requests} requests per configuration")
            print("| configuration | p50 ms | p99 ms | max ms | added p50 ms | added p99 ms | submit p50 µs | "
                  "submit p99 µs |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            base = np.asarray(latencies["off"], dtype=np.float64)
            for name, values in latencies.items():
                array = np.asarray(values, dtype=np.float64)
                added = ("", "") if name == "off" else (f"{_ms(array, 50) - _ms(base, 50):+.3f}",
                                                        f"{_ms(array, 99) - _ms(base, 99):+.3f}")
                submit = ("", "")
                if name in timers:
                    times = np.asarray(timers[name].times, dtype=np.float64)
                    submit = (f"{np.percentile(times, 50) / 1e3:.1f}", f"{np.percentile(times, 99) / 1e3:.1f}")
                print(f"| {name} | {_ms(array, 50):.3f} | {_ms(array, 99):.3f} | {float(array.max()) / 1e6:.3f} | "
                      f"{added[0]} | {added[1]} | {submit[0]} | {submit[1]} |")
        for name in ("sqlite", "dead"):
            stats = models[name].unwrap_python_model().prediction_log_stats
            print(f"\n{name}: {stats.rows_written} rows written in {stats.batches_written} batches, "
                  f"{stats.rows_dropped} rows lost in {stats.loss_events} events"
                  + (f" (last error: {stats.last_error[:100]}...)" if stats.last_error else ""))
            models[name].unwrap_python_model().close_prediction_log()


if __name__ == "__main__":
    main()
