"""The CLI on bad input (issue: defects found by bad input): exit 2, the file named on stderr,
no traceback, no numpy advice to unpickle."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.cli import refused


def _memory_bomb(path: Path) -> Path:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**12, 2)})
    labels = io.BytesIO()
    np.save(labels, np.array([0, 1]))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("logits.npy", header.getvalue() + bytes(16))
        archive.writestr("labels.npy", labels.getvalue())
    return path


@pytest.mark.parametrize("command", ["fit", "evaluate"])
def test_npz_memory_bomb_exits_2_naming_the_file_and_size(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _memory_bomb(tmp_path / "bomb.npz")
    err = refused(capsys, command, str(path))
    assert f"{path}: key 'logits' declares shape (1000000000000, 2)" in err


def test_npz_of_random_bytes_exits_2_without_pickle_advice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "random.npz"
    path.write_bytes(np.random.default_rng(0).bytes(2_000))
    err = refused(capsys, "evaluate", str(path))
    assert f"{path}: cannot be read as .npz" in err and "not a valid .npz of arrays" in err
    assert "pickle" not in err.lower()


def test_csv_with_a_million_columns_exits_2_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k = 1_000_001
    path = tmp_path / "wide.csv"
    path.write_text("id,label," + ",".join(f"logit_{j}" for j in range(k)) + "\na,0," + ",".join(["1"] * k) + "\n")
    err = refused(capsys, "fit", str(path))
    assert f"{path}: the header line, counted by its commas before it is parsed, has 1,000,003 columns" in err
    assert "at most 200,003 are read (100,000 logit_ or prob_ columns" in err and "pass --max-classes" in err


def test_parquet_decimal_logits_exit_2_naming_the_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = pd.DataFrame({"id": ["a", "b"], "label": [0, 1], "logit_0": [0.5, 1.0], "logit_1": [1.0, 0.0]})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.set_column(3, "logit_1", table["logit_1"].cast(pa.decimal128(10, 2)))
    path = tmp_path / "decimal.parquet"
    pq.write_table(table, path)
    err = refused(capsys, "evaluate", str(path))
    assert f"{path}: column 'logit_1' has type decimal128(10, 2); logit columns must be float or integer" in err


@pytest.mark.parametrize("command", ["fit", "evaluate"])
@pytest.mark.parametrize("scale", ["extreme", "1e300"])
def test_finite_logits_too_far_apart_exit_2_naming_the_file_and_rule(
    command: str, scale: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(0)
    if scale == "extreme":
        logits = np.tile([1.7e308, -1.7e308], (50, 1))
    else:
        logits = rng.standard_normal((50, 10)) * 1e300
    path = tmp_path / "extreme.npz"
    np.savez(path, logits=logits, labels=rng.integers(0, logits.shape[1], 50))
    err = refused(capsys, command, str(path))
    assert f"{path}: row 0 (id '0'), key 'logits': its logits span" in err
    assert "the logits within a row must span at most 1e+100" in err
