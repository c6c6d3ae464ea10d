"""The fit and the evaluation over a partitioned set on a real Dask cluster (2 worker processes).

The results must be the local engine's: counts identical, T and sums to float rounding (the
partitions' results are added in partition order on both engines, so in practice they are
bit for bit the same; the tests allow 1e-9 relative on T and 1e-12 on the metrics).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibration import (
    LOCAL_ENGINE,
    ScoredSetError,
    evaluate_partitioned,
    fit_partitioned,
    open_partitioned,
)
from flows.orchestration.engines import DaskEngine

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def dask_engine() -> Iterator[DaskEngine]:
    with DaskEngine(n_workers=2) as engine:
        yield engine


@pytest.fixture(scope="module")
def partitioned_cifar(real_logits_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = np.load(real_logits_dir / "cifar10_wrn16-4_netcal.npz")
    logits, labels = data["logits"], data["labels"]
    groups = np.array(["web", "mobile", "batch"])[np.arange(labels.shape[0]) % 3]
    folder = tmp_path_factory.mktemp("partitioned") / "day=2026-11-30"
    folder.mkdir()
    for number, rows in enumerate(np.array_split(np.arange(labels.shape[0]), 8)):
        columns: dict[str, Any] = {"id": [f"req-{i}" for i in rows], "label": labels[rows], "group": groups[rows]}
        columns |= {f"logit_{k}": logits[rows, k] for k in range(logits.shape[1])}
        pq.write_table(pa.table(columns), folder / f"part-{number}.parquet", row_group_size=400)
    return folder.parent


def test_fit_and_evaluation_on_dask_are_the_local_engines(dask_engine: DaskEngine, partitioned_cifar: Path) -> None:
    data = open_partitioned(partitioned_cifar)
    assert data.n_partitions == 32
    local, remote = fit_partitioned(data, engine=LOCAL_ENGINE), fit_partitioned(data, engine=dask_engine)
    assert remote.temperature == pytest.approx(local.temperature, rel=1e-9)
    assert (remote.n, remote.nll_after) == (local.n, pytest.approx(local.nll_after, rel=1e-12))
    local_report = evaluate_partitioned(data, temperature=local.temperature, by_group=True)
    remote_report = evaluate_partitioned(data, temperature=local.temperature, by_group=True, engine=dask_engine)
    assert remote_report.table.count.tolist() == local_report.table.count.tolist()
    assert remote_report.n == local_report.n == 10_000
    for name in ("ece", "nll", "accuracy", "brier", "mce"):
        assert getattr(remote_report, name) == pytest.approx(getattr(local_report, name), rel=1e-12), name
    assert remote_report.groups is not None and local_report.groups is not None
    assert [(g.group, g.n, pytest.approx(g.ece, rel=1e-12)) for g in remote_report.groups.groups] == [
        (g.group, g.n, g.ece) for g in local_report.groups.groups
    ]


class _KillingEngine:
    """The Dask engine, but the first map of the full passes loses a worker process mid-map."""

    def __init__(self, engine: DaskEngine) -> None:
        self._engine = engine
        self.killed: int | None = None
        self.name, self.n_workers = engine.name, engine.n_workers

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        client = self._engine.client
        futures = client.map(fn, items, pure=False)
        if self.killed is None and "expansion" in repr(fn):
            pids = client.run(os.getpid)
            self.killed = pids[sorted(pids)[0]]
            os.kill(self.killed, signal.SIGKILL)
        return list(client.gather(futures))


def test_a_worker_killed_mid_fit_is_survived(dask_engine: DaskEngine, partitioned_cifar: Path) -> None:
    data = open_partitioned(partitioned_cifar)
    killing = _KillingEngine(dask_engine)
    fitted = fit_partitioned(data, engine=killing)
    assert killing.killed is not None
    assert fitted.temperature == pytest.approx(fit_partitioned(data).temperature, rel=1e-9)
    dask_engine.client.wait_for_workers(2, timeout=60)  # the nanny restarted it


def test_a_bad_partition_is_refused_on_dask_naming_file_and_row(dask_engine: DaskEngine, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for number in range(3):
        labels = rng.integers(0, 3, 100)
        columns: dict[str, Any] = {"id": [f"{number}-{i}" for i in range(100)], "label": labels}
        columns |= {f"logit_{k}": rng.normal(size=100) for k in range(3)}
        if number == 2:
            columns["logit_1"][73] = np.inf
        pq.write_table(pa.table(columns), tmp_path / f"part-{number}.parquet", row_group_size=30)
    with pytest.raises(ScoredSetError, match=r"part-2.parquet: row 73 \(id '2-73'\), column logit_1: inf is not finite"):
        fit_partitioned(open_partitioned(tmp_path), engine=dask_engine)
