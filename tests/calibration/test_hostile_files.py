"""Files that must not hurt the machine that reads them (issue 19, items 17-21).

Each is refused naming the file (and the member, column or row) before it costs memory or
time, or read exactly. Files that once hung or exhausted memory are read in a capped child
process (:mod:`tests.limited_reads`), so that a regression fails the test instead of the
machine. The crafted files are the corpus of tests/data/malformed/ (make_corpus.py).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibration import (
    ScoredSet,
    ScoredSetError,
    check_temperature,
    evaluate_partitioned,
    fit_partitioned,
    open_partitioned,
    read_scored_set,
    write_scored_set,
)
from calibration._validation import check_bounds
from tests.calibration.test_scored import _refusal as _refused
from tests.limited_reads import CORPUS, read_limited


def _refused_limited(path: Path, *fragments: str, partitioned: bool = False, time_limit: float = 20,
                     named: Path | None = None) -> str:
    [outcome] = read_limited([str(path)], partitioned=partitioned, time_limit=time_limit).values()
    assert outcome.kind == "refused", outcome
    assert outcome.message.startswith(f"{named or path}: "), outcome.message
    for fragment in fragments:
        assert fragment in outcome.message, outcome.message
    return outcome.message


# --------------------------------------------------------------------------- 17: declared sizes


def test_a_parquet_compression_bomb_is_refused_from_its_footer() -> None:
    path = CORPUS / "parquet_bomb.parquet"  # 3,000,000 rows of one repeated row in 49 kB
    started = time.monotonic()
    message = _refused(path, "3,000,000 rows", "compression bomb")
    assert time.monotonic() - started < 5, "the footer alone decides: no row is read"
    assert re.search(r"from [\d,]+ bytes in the file", message), message
    with pytest.raises(ScoredSetError, match="compression bomb"):
        open_partitioned(path)


def test_an_npz_compression_bomb_is_refused_before_inflating() -> None:
    path = CORPUS / "npz_zip_bomb.npz"  # 100 MB of zeros in 98 kB
    started = time.monotonic()
    _refused(path, "keys 'logits', 'labels'", "compression bomb")
    assert time.monotonic() - started < 5


def test_a_parquet_footer_declaring_more_than_the_process_may_use_is_refused(tmp_path: Path) -> None:
    # 2,000 float64 logit columns of 140,000 rows: 2.2 GB in memory, more than the 2 GiB cap
    # of the reading process (on main: read until an allocation failed, or std::bad_alloc).
    zeros = pa.array(np.zeros(140_000))
    columns = {"id": pa.DictionaryArray.from_arrays(pa.array(np.zeros(140_000, np.int32)), pa.array(["x"])),
               "label": pa.array(np.zeros(140_000, np.int64)), **{f"logit_{k}": zeros for k in range(2_000)}}
    path = tmp_path / "wide.parquet"
    pq.write_table(pa.table(columns), path, compression="zstd")
    _refused_limited(path, "140,000 rows", "more than this process may use")
    _refused_limited(path, "more than this process may use", partitioned=True)


def test_real_data_is_never_near_the_expansion_limit(real_logits_dir: Path, tmp_path: Path) -> None:
    scored = read_scored_set(real_logits_dir / "cifar10_wrn16-4_netcal.npz")
    for suffix in (".parquet", ".npz"):
        assert read_scored_set(write_scored_set(scored, tmp_path / f"s{suffix}")).n_samples == 10_000
    np.savez_compressed(tmp_path / "c.npz", logits=scored.logits, labels=scored.labels)
    assert read_scored_set(tmp_path / "c.npz").n_samples == 10_000


# --------------------------------------------------------------------------- 18: linear time


def test_a_csv_header_repeating_an_ignored_name_is_read_in_linear_time() -> None:
    path = CORPUS / "csv_repeated_ignored_header.csv"  # 40,000 times ",x": 30 s of name mangling before
    [outcome] = read_limited([str(path)], time_limit=15).values()
    assert outcome.kind == "read" and outcome.n_samples == 40, outcome


def test_a_partitioned_set_parses_each_footer_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    n = 600
    labels = rng.integers(0, 2, n)
    table = pa.table({"id": [f"r{i}" for i in range(n)], "label": labels, "logit_0": rng.normal(size=n),
                      "logit_1": rng.normal(size=n) + labels})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=2)  # 300 row groups, 300 partitions
    opened: list[object] = []
    original = pq.ParquetFile.__init__

    def counting(self: pq.ParquetFile, *args: object, **kwargs: object) -> None:
        opened.append(args[0] if args else kwargs.get("source"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "__init__", counting)
    data = open_partitioned(tmp_path)
    assert data.n_partitions == 300
    fit = fit_partitioned(data)
    evaluate_partitioned(data, temperature=fit.temperature)
    assert len(opened) <= 1, f"the footer was parsed {len(opened)} times for one file"


# --------------------------------------------------------------------------- 19: no traceback


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("npz_method_6.npz", ("member 'logits.npy'", "compression method 6")),
        ("npz_method_99.npz", ("member 'logits.npy'", "compression method 99")),
        ("npz_encrypted.npz", ("member 'labels.npy' is encrypted",)),
        ("npz_patched_data.npz", ("member 'logits.npy'",)),
        ("npz_zip_version_99.npz", ("cannot be read as .npz (zip file version 9.9)",)),
    ],
)
def test_npz_members_zipfile_cannot_read_are_refused_by_name(name: str, fragments: tuple[str, ...]) -> None:
    _refused(CORPUS / name, *fragments)


@pytest.mark.parametrize("compression", ["bzip2", "lzma"])
def test_npz_members_in_other_zip_methods_python_reads_are_read(compression: str) -> None:
    assert read_scored_set(CORPUS / f"npz_{compression}.npz").n_samples == 40


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("column", ["id", "label", "logit_1"])
def test_a_duplicated_read_column_is_refused_by_name(fmt: str, column: str, tmp_path: Path) -> None:
    names = ["id", "label", "logit_0", "logit_1", column]
    values = [["a", "b"], [0, 1], [0.5, 1.0], [1.0, 0.0], ["a", "b"] if column == "id" else [0, 1]]
    path = tmp_path / f"s.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.Table.from_arrays([pa.array(v) for v in values], names=names), path)
    else:
        path.write_text(",".join(names) + "\n" + "\n".join(",".join(str(v[i]) for v in values) for i in range(2)))
    where = {"id": "0 and 4", "label": "1 and 4", "logit_1": "3 and 4"}[column]
    _refused(path, f"column '{column}' appears 2 times (positions {where}, counted from 0)")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_duplicated_ignored_column_is_still_ignored(fmt: str) -> None:
    name = "csv_repeated_ignored_header.csv" if fmt == "csv" else "parquet_ignored_column_twice.parquet"
    assert read_scored_set(CORPUS / name).n_samples == 40


def test_parquet_text_that_is_not_utf8_is_refused_by_column() -> None:
    _refused(CORPUS / "parquet_invalid_utf8_id.parquet", "column 'id'", "not valid UTF-8")


def test_parquet_pandas_metadata_is_not_needed() -> None:
    assert read_scored_set(CORPUS / "parquet_corrupt_pandas_metadata.parquet").n_samples == 40


def test_a_logit_column_numbered_beyond_reason_is_refused_at_once() -> None:
    _refused_limited(CORPUS / "csv_logit_index_huge.csv", "missing logit_1, logit_2", time_limit=10)


# --------------------------------------------------------------------------- 20: regular files


@pytest.mark.parametrize("suffix", [".npz", ".csv", ".parquet"])
def test_a_fifo_is_refused_without_opening_it(suffix: str, tmp_path: Path) -> None:
    path = tmp_path / f"scores{suffix}"
    os.mkfifo(path)
    _refused_limited(path, "is a FIFO (named pipe), not a regular file")
    if suffix == ".parquet":
        _refused_limited(path, "is a FIFO", partitioned=True)
        _refused_limited(tmp_path, "is a FIFO", partitioned=True, named=path)


def test_a_csv_linked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    path.symlink_to("/dev/zero")
    _refused_limited(path, "is a character device (a link to /dev/zero), not a regular file")


def test_a_csv_header_line_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    with path.open("w") as handle:
        handle.write("id,label,logit_0,logit_1")
        handle.write(",x" * 9_000_000)  # 18 MB without a line end
    _refused_limited(path, "the header line is longer than 16,777,216 characters")


# --------------------------------------------------------------------------- 21: ids, labels, T


def test_a_100_kb_id_among_10_000_rows_is_refused_by_row_without_allocating_gigabytes() -> None:
    _refused_limited(CORPUS / "csv_long_id.csv", "row 5000", "100,000 characters", "at most 1,000")
    _refused(CORPUS / "npz_long_id.npz", "row 0", "100,000 characters")


def test_ids_are_variable_width_python_strings(tmp_path: Path) -> None:
    ids = [f"r{i}" for i in range(10_000)]
    ids[17] = "y" * 1_000
    scored = ScoredSet.from_arrays(np.zeros((10_000, 2)), np.zeros(10_000, dtype=int), ids=ids,
                                   groups=["g"] * 10_000)
    for fmt in ("csv", "parquet", "npz"):
        again = read_scored_set(write_scored_set(scored, tmp_path / f"s.{fmt}"))
        assert again.ids.dtype == object and again.groups is not None and again.groups.dtype == object
        assert again.ids.tolist() == ids
        assert again.ids.nbytes < 100_000  # one pointer a row, not 4,000 bytes a row


@pytest.mark.parametrize("temperature", [1e-320, 5e-324, 1e-11, 1e11, 1e308])
def test_a_temperature_must_be_a_normal_float_within_the_limits(temperature: float) -> None:
    with pytest.raises(ValueError, match=r"temperature must be between 1e-10 and 1e\+10"):
        check_temperature(temperature)
    with pytest.raises(ValueError, match=r"bounds must satisfy 1e-10 <= lower < upper <= 1e\+10"):
        check_bounds((temperature, 1.0) if temperature < 1 else (1.0, temperature))
    assert check_temperature(1e-10) == 1e-10 and check_temperature(1e10) == 1e10
