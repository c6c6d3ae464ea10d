"""Ingest at production rates: the ingestion service against ``log_predictions`` and a plain COPY.

One run, one throwaway PostgreSQL cluster (``fsync=off``, as the suite's), an empty log before
each path; at K = 10 and K = 1,000 the same rows (float32 logits, unique request ids) go in by:

``plain COPY``            the bound: one binary ``COPY prediction_log (...) FROM STDIN`` (psycopg 3)
                          of rows already computed (predicted class, confidence), nothing checked
``log_predictions``       :func:`monitoring.log_predictions` in batches (SQLAlchemy ``INSERT``)
``write_predictions``     :func:`monitoring.write_predictions` in the same batches (rows checked
                          one by one, then one COPY): the service's write without HTTP
``service, batched``      ``thermostat ingest`` on loopback: JSON bodies of a batch of rows,
                          posted by ``--clients`` threads (keep-alive), parse + check + COPY
``service, single rows``  (K = 10) a bounded locust run: ``--users`` users posting one row each
                          at ``--rate`` requests/s in all for ``--seconds`` s (FastHttpUser)

Rows per second (wall) and the requests' p50 / p99; the load average before and after. Run::

    make bench-ingest                              # = python -m benchmarks.ingest [BENCH_ARGS=...]
    .venv/bin/python -m benchmarks.ingest --rows 200000 --out /tmp/ingest.json

The machine's two cores carry the client, the service and PostgreSQL at once: compare the
paths by their ratio to the plain COPY of the same run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.monitor_cost import _process_cpu, machine_line, throwaway_postgres  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

TEMPERATURE = 1.5
TOKEN = "bench-token-" + "ab" * 12
LOCUSTFILE = '''
import itertools, json, os
from locust import constant_throughput, task
from locust.contrib.fasthttp import FastHttpUser

COUNTER = itertools.count()
PER_USER = float(os.environ["BENCH_RATE_PER_USER"])
LOGITS = [0.25 * k for k in range(int(os.environ["BENCH_K"]))]
HEADERS = {"Authorization": "Bearer " + os.environ["BENCH_TOKEN"], "content-type": "application/json"}


class OneRow(FastHttpUser):
    wait_time = constant_throughput(PER_USER)

    @task
    def post_one(self):
        body = {"model_name": "bench", "model_version": "single", "temperature": 1.5,
                "rows": [{"request_id": f"s{os.getpid()}-{next(COUNTER)}", "logits": LOGITS}]}
        self.client.post("/v1/predictions", data=json.dumps(body), headers=HEADERS)
'''


def _rows(n: int, k: int, seed: int) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    return (3.0 * rng.normal(size=(n, k))).astype(np.float32), [f"r{seed}-{i}" for i in range(n)]


@contextlib.contextmanager
def _fresh_log(url: str) -> Iterator[Any]:
    from monitoring import PredictionLog

    log = PredictionLog(url)
    log.metadata.drop_all(log.engine)
    log.create()
    try:
        yield log
    finally:
        log.metadata.drop_all(log.engine)
        log.dispose()


def _plain_copy(url: str, logits: np.ndarray, ids: list[str]) -> float:
    """Seconds to COPY the rows (computed beforehand, outside the timing) into an empty log."""
    import psycopg

    from calibration import top_label_confidence

    predicted, confidence = top_label_confidence(logits, temperature=TEMPERATURE)
    now = datetime.now(UTC)
    k = logits.shape[1]
    blobs = [row.tobytes() for row in logits.astype("<f4")]
    rows = [(now, "bench", "copy", rid, k, blob, int(c), float(q), TEMPERATURE, None, None, None)
            for rid, blob, c, q in zip(ids, blobs, predicted.tolist(), confidence.tolist(), strict=True)]
    columns = ("served_at, model_name, model_version, request_id, n_classes, logits, predicted_class, confidence, "
               "temperature, group_key, label, labelled_at")
    with _fresh_log(url), psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
        started = time.perf_counter()
        with conn.cursor() as cursor, cursor.copy(f"COPY prediction_log ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["timestamptz", "text", "text", "text", "int4", "bytea", "int4", "float8", "float8",
                            "text", "int4", "timestamptz"])
            for row in rows:
                copy.write_row(row)
        conn.commit()
        return time.perf_counter() - started


def _in_batches(url: str, logits: np.ndarray, ids: list[str], batch: int, how: str) -> float:
    from monitoring import PredictionBatch, log_predictions, write_predictions

    with _fresh_log(url) as log:
        started = time.perf_counter()
        for start in range(0, len(ids), batch):
            part, part_ids = logits[start:start + batch], ids[start:start + batch]
            if how == "log_predictions":
                log_predictions(log, "bench", how, TEMPERATURE, part, part_ids)
            else:
                report = write_predictions(log, PredictionBatch.from_arrays("bench", how, TEMPERATURE, part, part_ids))
                assert report.written == len(part_ids), report.refused[:3]
        return time.perf_counter() - started


@contextlib.contextmanager
def _service(url: str, folder: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    env = {**os.environ, "THERMOSTAT_PREDICTION_LOG_URL": url, "THERMOSTAT_INGEST_TOKENS": TOKEN,
           "THERMOSTAT_STATE_DIR": str(folder), "THERMOSTAT_INGEST_MAX_PENDING_ROWS": "2000000"}
    log = (folder / "ingest.log").open("wb")
    process = subprocess.Popen([str(Path(sys.executable).parent / "thermostat"), "ingest", "--port", str(port)],
                               env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"thermostat ingest did not start: {(folder / 'ingest.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield base, process.pid
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def _service_batched(url: str, logits: np.ndarray, ids: list[str], batch: int, clients: int,
                     folder: Path) -> tuple[float, list[float], float]:
    """Seconds to post every row in JSON batches from ``clients`` threads, each request's seconds, and
    the service process's CPU seconds meanwhile."""
    import http.client

    bodies = [json.dumps({"model_name": "bench", "model_version": "service", "temperature": TEMPERATURE,
                          "rows": [{"request_id": rid, "logits": row} for rid, row in
                                   zip(ids[start:start + batch], logits[start:start + batch].tolist(), strict=True)]
                          }).encode() for start in range(0, len(ids), batch)]
    latencies: list[float] = []
    with _fresh_log(url), _service(url, folder) as (base, pid):
        host, port = base.removeprefix("http://").split(":")

        def post(my_bodies: list[bytes]) -> list[float]:
            connection = http.client.HTTPConnection(host, int(port), timeout=120)
            mine = []
            for body in my_bodies:
                started = time.perf_counter()
                connection.request("POST", "/v1/predictions", body=body, headers={
                    "Authorization": f"Bearer {TOKEN}", "content-type": "application/json"})
                answer = connection.getresponse()
                payload = json.loads(answer.read())
                assert answer.status == 200 and payload["written"] == payload["received"], payload
                mine.append(time.perf_counter() - started)
            connection.close()
            return mine

        shares = [bodies[i::clients] for i in range(clients)]
        cpu = _process_cpu(pid)
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            for mine in pool.map(post, shares):
                latencies.extend(mine)
        return time.perf_counter() - started, latencies, _process_cpu(pid) - cpu


def _service_single(url: str, k: int, users: int, rate: float, seconds: int, folder: Path) -> dict[str, Any]:
    """A bounded locust run of one-row requests; its own figures (requests/s, p50, p99, failures)."""
    locustfile = folder / "locustfile.py"
    locustfile.write_text(LOCUSTFILE)
    with _fresh_log(url), _service(url, folder) as (base, _):
        env = {**os.environ, "BENCH_RATE_PER_USER": str(rate / users), "BENCH_K": str(k), "BENCH_TOKEN": TOKEN}
        subprocess.run([str(Path(sys.executable).parent / "locust"), "-f", str(locustfile), "--headless",
                        "-u", str(users), "-r", str(users), "--run-time", f"{seconds}s", "-H", base,
                        "--csv", str(folder / "single"), "--only-summary", "--stop-timeout", "5"],
                       env=env, check=False, capture_output=True, timeout=seconds + 120)
    import csv

    with (folder / "single_stats.csv").open() as handle:
        total = next(row for row in csv.DictReader(handle) if row["Name"] == "Aggregated")
    return {"requests": int(total["Request Count"]), "failures": int(total["Failure Count"]),
            "requests_per_second": float(total["Requests/s"]), "p50_ms": float(total["50%"]),
            "p99_ms": float(total["99%"]), "max_ms": float(total["Max Response Time"])}


def _percentiles(seconds: list[float]) -> tuple[float, float]:
    p50, p99 = np.percentile(np.asarray(seconds) * 1000.0, [50, 99])
    return float(p50), float(p99)


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"machine_before": machine_line(), "cases": []}
    folder = Path(tempfile.mkdtemp(prefix="thermostat-bench-ingest-"))
    with throwaway_postgres() as url:
        for k in args.classes:
            n = args.rows if k <= 100 else max(args.rows // 10, 1000)
            batch = args.batch if k <= 100 else max(args.batch // 10, 100)
            logits, ids = _rows(n, k, seed=k)
            case: dict[str, Any] = {"K": k, "rows": n, "batch": batch}
            bound = _plain_copy(url, logits, ids)
            case["plain COPY"] = {"rows_per_second": n / bound}
            for how in ("log_predictions", "write_predictions"):
                seconds = _in_batches(url, logits, ids, batch, how)
                case[how] = {"rows_per_second": n / seconds, "of_copy": bound / seconds}
            seconds, latencies, cpu = _service_batched(url, logits, ids, batch, args.clients, folder)
            p50, p99 = _percentiles(latencies)
            case["service, batched"] = {"rows_per_second": n / seconds, "of_copy": bound / seconds,
                                        "request_p50_ms": p50, "request_p99_ms": p99, "clients": args.clients,
                                        "service_cpu_us_per_row": 1e6 * cpu / n}
            if k == min(args.classes) and args.seconds > 0:
                case["service, single rows"] = _service_single(url, k, args.users, args.rate, args.seconds, folder)
            print(json.dumps(case), flush=True)
            results["cases"].append(case)
    results["machine_after"] = machine_line()
    return results


def import_time(repeats: int = 5) -> dict[str, Any]:
    """Seconds to import the light client in a fresh interpreter, and the modules it loads."""
    code = ("import sys, time; t = time.perf_counter(); import thermostat.log; print(time.perf_counter() - t); "
            "print(len(sys.modules))")
    figures = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
        figures.append(float(done.stdout.split()[0]))
    return {"min_s": min(figures), "median_s": float(np.median(figures)), "max_s": max(figures)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows at K = 10 (a tenth at K = 1,000)")
    parser.add_argument("--classes", type=lambda text: [int(k) for k in text.split(",")], default=[10, 1000])
    parser.add_argument("--batch", type=int, default=5_000, help="rows per batch at K = 10 (a tenth at K = 1,000)")
    parser.add_argument("--clients", type=int, default=4, help="threads posting batches to the service")
    parser.add_argument("--users", type=int, default=50, help="locust users of the single-row run")
    parser.add_argument("--rate", type=float, default=1000.0, help="single-row requests per second in all")
    parser.add_argument("--seconds", type=int, default=20, help="length of the single-row run (0: skip it)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    results = run(args)
    results["import thermostat.log"] = import_time()
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
