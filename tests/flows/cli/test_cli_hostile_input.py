"""The command line against inputs built to hurt it (issue 19, items 17-21): exit 2 naming the
file, folder or flag; answers in seconds; never a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibration import ScoredSet, write_scored_set
from tests.limited_reads import CORPUS
from tests.support.cli import refused, run

THERMOSTAT = Path(sys.executable).with_name("thermostat")


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 800)
    logits = 2.0 * rng.normal(size=(800, 3)) + 2.0 * np.eye(3)[labels]
    path = tmp_path_factory.mktemp("hostile") / "scores.npz"
    write_scored_set(ScoredSet.from_arrays(logits, labels, groups=np.array(["a", "b"])[labels % 2]), path)
    return path


# --------------------------------------------------------------------------- 19: no exit 3, no traceback


@pytest.mark.parametrize(("name", "member"), [("npz_encrypted.npz", "labels.npy"), ("npz_method_6.npz", "logits.npy"),
                                              ("npz_method_99.npz", "logits.npy")])
def test_npz_members_that_cannot_be_read_exit_2_naming_file_and_member(
    name: str, member: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, "evaluate", CORPUS / name)
    assert err.startswith(f"thermostat: error: {CORPUS / name}: member '{member}'"), err


# --------------------------------------------------------------------------- 18: linear time


def test_a_parquet_file_of_many_row_groups_has_its_footer_parsed_once_per_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Linear time, counted rather than timed: pyarrow parses a file's whole footer on every
    ``ParquetFile(...)``, so opening the file once per row group made evaluate quadratic in the
    row groups (3,000 of them: 70 s) and the fit never ended. Each command must read every row
    group while parsing the footer at most once per reading thread."""
    rng = np.random.default_rng(0)
    groups = 200
    labels = rng.integers(0, 2, 2 * groups)
    table = pa.table({"id": [f"r{i}" for i in range(2 * groups)], "label": labels,
                      "logit_0": rng.normal(size=2 * groups), "logit_1": rng.normal(size=2 * groups) + 2.0 * labels})
    (tmp_path / "set").mkdir()
    pq.write_table(table, tmp_path / "set" / "a.parquet", row_group_size=2)
    footers: list[int] = []  # the thread of each footer parse
    read: set[int] = set()  # the row groups read

    class Counted(pq.ParquetFile):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            footers.append(threading.get_ident())
            super().__init__(*args, **kwargs)

        def read_row_group(self, index: int, *args: Any, **kwargs: Any) -> Any:
            read.add(index)
            return super().read_row_group(index, *args, **kwargs)

    monkeypatch.setattr(pq, "ParquetFile", Counted)
    for command in ("evaluate", "fit"):
        footers.clear()
        read.clear()
        code, _, err = run(capsys, command, tmp_path / "set")
        assert code in (0, 1), (command, err)
        assert read == set(range(groups)), f"{command} read {len(read)} of the {groups} row groups"
        assert len(footers) == len(set(footers)), (
            f"{command} parsed the footer {len(footers)} times in {len(set(footers))} thread(s): once per thread "
            "is linear, once per row group is quadratic")


# --------------------------------------------------------------------------- 21: folders, flags


def _without_root_privileges() -> list[str]:
    """A command prefix under which permission bits hold: nothing as an ordinary user; as root,
    setpriv dropping the capabilities that bypass them (root ignores a folder's mode 000)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: an unreadable folder cannot be made")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]


def test_an_unreadable_subfolder_of_a_partitioned_set_exits_2_naming_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    for day in ("day=1", "day=2"):
        labels = rng.integers(0, 2, 100)
        (tmp_path / day).mkdir()
        write_scored_set(ScoredSet.from_arrays(rng.normal(size=(100, 2)), labels,
                                               ids=[f"{day}-{i}" for i in range(100)]), tmp_path / day / "p.parquet")
    hidden = tmp_path / "day=2"
    hidden.chmod(0)
    try:
        for target in (str(tmp_path), f"{tmp_path}/day=*/*.parquet"):
            done = subprocess.run([*_without_root_privileges(), str(THERMOSTAT), "evaluate", target],
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 2 and done.stdout == "", (target, done.returncode, done.stderr)
            assert f"{hidden}: cannot list this folder" in done.stderr, done.stderr
    finally:
        hidden.chmod(0o755)


@pytest.mark.parametrize("command", ["evaluate", "sweep", "drift"])
@pytest.mark.parametrize("temperature", ["1e-320", "0", "1e11"])
def test_a_temperature_outside_the_limits_exits_2_naming_the_flag(
    command: str, temperature: str, scored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = [scored, scored] if command == "drift" else [scored]
    extra = {"sweep": ["--target-accuracy", "0.5"], "drift": ["--min-window", "10"]}.get(command, [])
    err = refused(capsys, command, *data, "--temperature", temperature, *extra)
    assert err.startswith("thermostat: error: --temperature must be "), err


def test_search_bounds_outside_the_limits_exit_2_naming_the_flags(scored: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, "fit", scored, "--lower", "1e-320")
    assert err.startswith("thermostat: error: --lower and --upper must satisfy 1e-10 <= lower < upper <= 1e+10")


@pytest.mark.parametrize(
    ("flag", "value", "python_name"),
    [("--min-window", "0", "min_window"), ("--level", "2", "p_threshold"), ("--tolerance", "-1", "ece_tolerance"),
     ("--min-group-size", "0", "min_group_size"), ("--margin", "1.5", "temperature_margin"),
     ("--tolerance", "nan", "ece_tolerance"), ("--margin", "nan", "temperature_margin")],
)
def test_drift_refusals_name_the_flags(flag: str, value: str, python_name: str, scored: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, "drift", scored, scored, "--temperature", "1", "--min-window", "10", flag, value)
    assert err.startswith(f"thermostat: error: {flag} must be"), err
    assert python_name not in err
