"""Read scored-set files in a child process with a memory cap and a time limit per file.

A reader that hangs, aborts (``std::bad_alloc``) or raises something other than
:class:`calibration.ScoredSetError` must show up as such, not take the test run down with it:
the files go one by one to a worker process whose address space is capped
(``RLIMIT_AS``); a file that takes longer than its limit, or kills the worker, is recorded and
a fresh worker takes the rest. Used by tests/test_malformed_inputs.py and the reader tests.

Run as ``python -m tests.limited_reads MODE`` (from the repository root) it is the worker:
paths on stdin, one JSON outcome per line on stdout.
"""

from __future__ import annotations

import json
import os
import resource
import select
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "malformed"
MEMORY_CAP = 2 * 2**30
TIME_LIMIT = 30.0


@dataclass(frozen=True)
class Outcome:
    """What reading one file did: ``read`` (with what), ``refused`` (with the message),
    ``raised`` (another exception: a traceback on the command line), ``hung`` or ``died``."""

    path: str
    kind: str
    message: str = ""
    n_samples: int = -1
    n_classes: int = -1
    digest: str = ""


def _cap_memory(cap: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def read_limited(paths: list[str], *, partitioned: bool = False, logits_only: bool = False,
                 time_limit: float = TIME_LIMIT, memory_cap: int = MEMORY_CAP) -> dict[str, Outcome]:
    """Each path read by :func:`calibration.read_scored_set` (``partitioned``: opened by
    :func:`calibration.open_partitioned`, then fitted and evaluated; ``logits_only``: by
    :func:`calibration.read_logits`, labels optional) in a capped worker."""
    outcomes: dict[str, Outcome] = {}
    pending = list(paths)
    while pending:
        worker = subprocess.Popen(
            [sys.executable, "-m", "tests.limited_reads",
             "partitioned" if partitioned else "logits" if logits_only else "file"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            preexec_fn=lambda: _cap_memory(memory_cap),
        )
        assert worker.stdin is not None and worker.stdout is not None and worker.stderr is not None
        try:
            while pending:
                path = pending.pop(0)
                worker.stdin.write(path + "\n")
                worker.stdin.flush()
                ready, _, _ = select.select([worker.stdout], [], [], time_limit)
                if not ready:
                    outcomes[path] = Outcome(path, "hung", f"no answer after {time_limit:g} s")
                    break
                line = worker.stdout.readline()
                if not line:
                    worker.wait()
                    outcomes[path] = Outcome(path, "died", f"exit status {worker.returncode}: "
                                                           f"{worker.stderr.read()[-2000:]}")
                    break
                outcomes[path] = Outcome(**json.loads(line))
        finally:
            worker.kill()
            worker.wait()
            for stream in (worker.stdin, worker.stdout, worker.stderr):
                stream.close()
    return outcomes


def _outcome(path: str, mode: str) -> dict[str, Any]:
    import numpy as np

    from calibration import (
        ScoredSetError,
        evaluate_partitioned,
        fit_partitioned,
        open_partitioned,
        read_logits,
        read_scored_set,
    )

    sys.path.insert(0, str(CORPUS))
    from make_corpus import digest  # type: ignore[import-not-found]

    try:
        if mode == "logits":
            logits = read_logits(path)
            return {"path": path, "kind": "read", "n_samples": logits.shape[0], "n_classes": logits.shape[1]}
        if mode == "partitioned":
            data = open_partitioned(path)
            fit_partitioned(data)
            report = evaluate_partitioned(data)
            return {"path": path, "kind": "read", "n_samples": report.n, "n_classes": report.n_classes}
        scored = read_scored_set(path)
    except ScoredSetError as exc:
        return {"path": path, "kind": "refused", "message": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - the point is to see anything else
        return {"path": path, "kind": "raised", "message": f"{type(exc).__name__}: {exc}"}
    return {"path": path, "kind": "read", "n_samples": scored.n_samples, "n_classes": scored.n_classes,
            "digest": digest(scored.ids.tolist(), scored.labels, np.asarray(scored.logits, dtype=np.float64))}


def _work(mode: str) -> int:
    for line in sys.stdin:
        print(json.dumps(_outcome(line.rstrip("\n"), mode)), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(_work(sys.argv[1]))
