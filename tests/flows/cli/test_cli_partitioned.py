"""The command line on partitioned sets: fit, evaluate and compare take a folder or glob of Parquet."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from calibration import ScoredSet, write_scored_set
from tests.support.cli import run, run_json
from tests.support.ports import free_port

ENGINE_KEYS = {"engine", "n_partitions", "n_workers"}


def _overconfident(n: int, *, seed: int, prefix: str) -> ScoredSet:
    """Labels drawn from softmax(z); the stored logits are 3 z: over-confident, true T = 3."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=1.2, size=(n, 4))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = (p.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1)
    groups = np.array(["web", "mail"])[rng.integers(0, 2, n)]
    return ScoredSet.from_arrays(3.0 * z, labels, ids=[f"{prefix}{i}" for i in range(n)], groups=groups)


@pytest.fixture
def sets(tmp_path: Path) -> dict[str, Path]:
    """fit/ and eval/ as folders of day=... partitions, and the same rows as single files."""
    paths = {}
    for name, seed in (("fit", 1), ("eval", 2)):
        whole = _overconfident(1_200, seed=seed, prefix=name)
        write_scored_set(whole, tmp_path / f"{name}.parquet")
        for day, rows in enumerate(np.array_split(np.arange(1_200), 3)):
            folder = tmp_path / name / f"day=2026-11-{day + 1:02d}"
            folder.mkdir(parents=True)
            write_scored_set(whole.subset(rows), folder / "part-0.parquet")
        paths[name] = tmp_path / name
        paths[f"{name}_file"] = tmp_path / f"{name}.parquet"
    return paths


def test_fit_on_a_folder_is_the_fit_on_the_file(sets: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    folder, whole = run_json(capsys, "fit", sets["fit"]), run_json(capsys, "fit", sets["fit_file"])
    assert folder["temperature"] == pytest.approx(whole["temperature"], rel=1e-12)
    assert folder["ece_after"] == pytest.approx(whole["ece_after"], rel=1e-12)
    assert {key: folder[key] for key in ENGINE_KEYS} == {"engine": "local", "n_partitions": 3, "n_workers": 1}
    assert {key: whole[key] for key in ENGINE_KEYS} == {"engine": "local", "n_partitions": 1, "n_workers": 1}
    assert folder.keys() == whole.keys()


def test_evaluate_a_glob_by_group(sets: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    pattern = f"{sets['eval']}/day=*/*.parquet"
    folder = run_json(capsys, "evaluate", pattern, "--temperature", "3", "--by-group")
    whole = run_json(capsys, "evaluate", sets["eval_file"], "--temperature", "3", "--by-group")
    assert folder["ece"] == pytest.approx(whole["ece"], rel=1e-12)
    assert [(g["group"], g["n"]) for g in folder["groups"]] == [(g["group"], g["n"]) for g in whole["groups"]]
    assert [b["count"] for b in folder["bins"]] == [b["count"] for b in whole["bins"]]
    assert folder["n_partitions"] == 3


def test_compare_partitioned_sets_uses_a_normal_interval(sets: dict[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "compare", sets["fit"], sets["eval"], "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["interval"] == "normal" and payload["verdict"] == "improved"
    assert payload["nll_difference"]["n_resamples"] == 0 and payload["id_overlap"] is None
    assert payload["n_partitions"] == 6
    assert "ids are not compared" in err
    whole = run_json(capsys, "compare", sets["fit_file"], sets["eval_file"])
    assert whole["interval"] == "paired bootstrap"
    assert payload["nll_difference"]["estimate"] == pytest.approx(whole["nll_difference"]["estimate"], rel=1e-9)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("fit", "{fit}", "--scheme", "equal-mass"), "--scheme equal-mass needs every confidence sorted together"),
        (("fit", "{fit}", "--dask-workers", "3"), "--dask-address and --dask-workers apply to --engine dask only"),
        (("fit", "{fit}", "--engine", "dask", "--dask-address", "localhost:8786"),
         "--dask-address: 'localhost:8786' is not a Dask scheduler address"),
        (("fit", "{fit}", "--engine", "dask", "--dask-workers", "0"), "--dask-workers: 0 workers"),
        (("sweep", "{fit}", "--temperature", "1", "--target-accuracy", "0.5"), "is a folder or a pattern; `thermostat sweep` reads one scored-set file"),
        (("fit", "{tmp}/nothing-*.parquet"), "no Parquet file (.parquet) matches this pattern"),
    ],
)
def test_bad_partitioned_input_exits_2(sets: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       args: tuple[str, ...], message: str) -> None:
    code, out, err = run(capsys, *(arg.format(fit=sets["fit"], tmp=tmp_path) for arg in args))
    assert (code, out) == (2, "")
    assert message in err


def test_dask_engine_refuses_a_file_read_in_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_scored_set(_overconfident(50, seed=3, prefix="x"), tmp_path / "small.npz")
    code, _, err = run(capsys, "fit", tmp_path / "small.npz", "--engine", "dask")
    assert code == 2 and "--engine dask computes on Parquet partitions" in err


@pytest.mark.integration
@pytest.mark.slow
def test_fit_on_a_temporary_dask_cluster(sets: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    local = run_json(capsys, "fit", sets["fit"])
    remote = run_json(capsys, "fit", sets["fit"], "--engine", "dask", "--dask-workers", "2")
    assert remote["temperature"] == pytest.approx(local["temperature"], rel=1e-9)
    assert {key: remote[key] for key in ENGINE_KEYS} == {"engine": "dask", "n_partitions": 3, "n_workers": 2}


def test_an_unreachable_scheduler_exits_2(sets: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                          unused_port: int) -> None:
    code, _, err = run(capsys, "fit", sets["fit"], "--engine", "dask", "--dask-address",
                       f"tcp://127.0.0.1:{unused_port}", "--dask-timeout", "2")
    assert code == 2 and "--dask-address: no Dask scheduler answered" in err and "within 2 s" in err


@pytest.mark.parametrize("timeout", ["inf", "nan", "-1", "0"])
def test_a_dask_timeout_that_is_not_a_finite_positive_number_of_seconds_exits_2_naming_the_flag(
    sets: dict[str, Path], capsys: pytest.CaptureFixture[str], unused_port: int, timeout: str
) -> None:
    """``--dask-timeout inf`` ended in a KeyError traceback from inside Dask (issue 19)."""
    code, out, err = run(capsys, "fit", sets["fit"], "--engine", "dask", "--dask-address",
                         f"tcp://127.0.0.1:{unused_port}", "--dask-timeout", timeout)
    assert (code, out) == (2, "")
    assert err.startswith(f"thermostat: error: --dask-timeout: {float(timeout):g} is not a number of seconds in "
                          "(0, 86400]"), err
    assert "Traceback" not in err


@pytest.fixture
def unused_port() -> int:
    return free_port()
