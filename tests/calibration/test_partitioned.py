"""Partitioned scored sets: the same numbers as in memory, the same refusals, naming file and row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import calibration._partitioned as partitioned_module
from calibration import (
    ScoredSetError,
    check_unique_ids,
    evaluate,
    evaluate_partitioned,
    fit_partitioned,
    fit_temperature,
    is_partitioned_path,
    nll_difference_partitioned,
    open_partitioned,
    paired_bootstrap_nll,
    read_partition,
)


def _write(folder: Path, logits: np.ndarray, labels: np.ndarray, *, files: int, row_group: int,
           groups: np.ndarray | None = None, prefix: str = "logit", start: int = 0) -> list[Path]:
    """Split rows over ``files`` Parquet files of row groups of ``row_group`` rows (uneven)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    cuts = np.array_split(np.arange(logits.shape[0]), files)
    for number, rows in enumerate(cuts):
        columns: dict[str, object] = {"id": [f"row-{start + i}" for i in rows], "label": labels[rows].astype(np.int64)}
        if groups is not None:
            columns["group"] = groups[rows]
        for k in range(logits.shape[1]):
            columns[f"{prefix}_{k}"] = logits[rows, k]
        path = folder / f"part-{number:03d}.parquet"
        pq.write_table(pa.table(columns), path, row_group_size=row_group)
        written.append(path)
    return written


@pytest.fixture(scope="module")
def cifar(real_logits_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    data = np.load(real_logits_dir / "cifar100_densenet-bc-100_netcal.npz")
    return data["logits"], data["labels"]


@pytest.mark.parametrize(("files", "row_group"), [(1, 10_000), (3, 1_500), (7, 333)])
def test_fit_over_partitions_is_the_fit_in_memory(tmp_path: Path, cifar: tuple[np.ndarray, np.ndarray],
                                                  files: int, row_group: int) -> None:
    logits, labels = cifar
    _write(tmp_path, logits, labels, files=files, row_group=row_group)
    data = open_partitioned(tmp_path)
    assert data.n_samples == logits.shape[0] and data.n_classes == logits.shape[1]
    assert data.n_partitions == sum(-(-len(rows) // row_group) for rows in np.array_split(np.arange(10_000), files))
    fitted, reference = fit_partitioned(data), fit_temperature(logits, labels)
    # The same warm-start rows, the same expansion point: only the summation order differs.
    assert fitted.temperature == pytest.approx(reference.temperature, rel=1e-12)
    assert fitted.nll_before == pytest.approx(reference.nll_before, rel=1e-12)
    assert fitted.nll_after == pytest.approx(reference.nll_after, rel=1e-12)
    assert (fitted.n, fitted.n_classes, fitted.at_bound) == (reference.n, reference.n_classes, None)


def test_evaluation_over_partitions_is_the_evaluation_in_memory(tmp_path: Path,
                                                                cifar: tuple[np.ndarray, np.ndarray]) -> None:
    logits, labels = cifar
    groups = np.array(["cat", "dog", "eel", "fox", "gnu"])[np.arange(logits.shape[0]) % 5]
    _write(tmp_path, logits, labels, files=4, row_group=700, groups=groups)
    data = open_partitioned(tmp_path)
    report = evaluate_partitioned(data, temperature=2.1, n_bins=15, min_count=10, by_group=True)
    expected = evaluate(logits, labels, temperature=2.1, n_bins=15, min_count=10, groups=groups)
    assert report.n == expected.n
    for name in ("accuracy", "nll", "ece", "mce", "brier", "mean_confidence"):
        assert getattr(report, name) == pytest.approx(getattr(expected, name), rel=1e-12, abs=1e-15), name
    assert report.table.count.tolist() == expected.table.count.tolist()
    assert report.groups is not None and expected.groups is not None
    assert [(g.group, g.n) for g in report.groups.groups] == [(g.group, g.n) for g in expected.groups.groups]
    for ours, theirs in zip(report.groups.groups, expected.groups.groups, strict=True):
        assert ours.ece == pytest.approx(theirs.ece, rel=1e-12, abs=1e-15)
    assert report.groups.weighted_ece == pytest.approx(expected.groups.weighted_ece, rel=1e-12)
    assert report.to_dict().keys() == expected.to_dict().keys()


def test_nll_change_interval_agrees_with_the_bootstrap(tmp_path: Path, cifar: tuple[np.ndarray, np.ndarray]) -> None:
    logits, labels = cifar
    _write(tmp_path, logits, labels, files=3, row_group=2_000)
    normal = nll_difference_partitioned(open_partitioned(tmp_path), temperature_before=1.0, temperature_after=2.0)
    boot = paired_bootstrap_nll(logits, labels, temperature_before=1.0, temperature_after=2.0, n_resamples=2000)
    assert normal.estimate == pytest.approx(boot.estimate, rel=1e-12)
    # n = 10,000: the normal and percentile intervals agree to a few percent of their width.
    width = boot.high - boot.low
    assert abs(normal.low - boot.low) < 0.05 * width and abs(normal.high - boot.high) < 0.05 * width
    assert normal.verdict == boot.verdict == "improved" and normal.n_resamples == 0


def test_probabilities_and_float64_are_read_like_a_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(4), size=900)
    labels = rng.integers(0, 4, 900)
    _write(tmp_path, probs, labels, files=2, row_group=200, prefix="prob")
    data = open_partitioned(f"{tmp_path}/*.parquet")
    assert fit_partitioned(data).temperature == pytest.approx(fit_temperature(np.log(probs), labels).temperature,
                                                              rel=1e-12)


def test_warm_start_rows_do_not_depend_on_the_partitioning(tmp_path: Path) -> None:
    # 60,000 rows: a warm start of 1,200 strided rows; both layouts gather the same ones.
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 10, 60_000)
    logits = (rng.normal(size=(60_000, 10)) + 3.0 * np.eye(10)[labels]).astype(np.float32) * 1.7
    _write(tmp_path / "a", logits, labels, files=1, row_group=60_000)
    _write(tmp_path / "b", logits, labels, files=9, row_group=1_111)
    one, many = fit_partitioned(open_partitioned(tmp_path / "a")), fit_partitioned(open_partitioned(tmp_path / "b"))
    assert many.temperature == pytest.approx(one.temperature, rel=1e-12)
    assert many.temperature == pytest.approx(fit_temperature(logits, labels).temperature, rel=1e-12)


# ----------------------------------------------------------------------------- refusals


def _small(folder: Path, *, files: int = 3, rows: int = 300, start: int = 0) -> None:
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, rows)
    _write(folder, rng.normal(size=(rows, 3)) + 2 * np.eye(3)[labels], labels, files=files, row_group=40, start=start)


def test_a_bad_row_is_refused_naming_the_file_and_its_row(tmp_path: Path) -> None:
    _small(tmp_path)
    bad = tmp_path / "part-001.parquet"
    table = pq.read_table(bad)
    logits = table.column("logit_2").to_numpy().copy()
    logits[57] = np.nan  # row 57 of the file: in its second row group (rows 40..79)
    pq.write_table(table.set_column(table.schema.get_field_index("logit_2"), "logit_2", pa.array(logits)), bad,
                   row_group_size=40)
    with pytest.raises(ScoredSetError, match=rf"^{bad}: row 57 \(id 'row-157'\), column logit_2: nan is not finite"):
        fit_partitioned(open_partitioned(tmp_path))


def test_a_label_out_of_range_is_refused_in_evaluation(tmp_path: Path) -> None:
    _small(tmp_path)
    bad = tmp_path / "part-002.parquet"
    table = pq.read_table(bad)
    labels = table.column("label").to_numpy().copy()
    labels[81] = 3
    pq.write_table(table.set_column(1, "label", pa.array(labels)), bad, row_group_size=40)
    with pytest.raises(ScoredSetError, match=rf"^{bad}: row 81 \(id 'row-281'\), column label: 3 is outside \[0, 3\)"):
        evaluate_partitioned(open_partitioned(tmp_path))


def test_an_id_in_two_partitions_is_refused_naming_both(tmp_path: Path) -> None:
    _small(tmp_path / "x", files=2)
    _small(tmp_path / "x" / "zz", files=1, start=299)  # row-299 again, as row 0 of a file sorted last
    with pytest.raises(ScoredSetError, match=r"zz/part-000.parquet: row 0, column id: id 'row-299' also appears "
                                             r"in .*x/part-001.parquet row 149; ids must be unique across"):
        check_unique_ids(open_partitioned(tmp_path / "x"))
    for computation in (fit_partitioned, evaluate_partitioned):  # their own validating map checks too
        with pytest.raises(ScoredSetError, match=r"id 'row-299' also appears"):
            computation(open_partitioned(tmp_path / "x"))


def test_equal_hashes_of_different_ids_are_not_duplicates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _small(tmp_path, files=4)
    real = partitioned_module._hash_ids
    monkeypatch.setattr(partitioned_module, "_hash_ids", lambda ids: real(ids) % np.uint64(7))  # collisions galore
    check_unique_ids(open_partitioned(tmp_path))


def test_integer_ids_are_checked_as_their_text(tmp_path: Path) -> None:
    for number, ids in enumerate(([1, 2, 3], [4, 5, 1])):
        columns = {"id": ids, "label": [0, 1, 0], "logit_0": [1.0, 0.0, 2.0], "logit_1": [0.0, 1.0, 0.0]}
        pq.write_table(pa.table(columns), tmp_path / f"part-{number}.parquet")
    with pytest.raises(ScoredSetError, match=r"part-1.parquet: row 2, column id: id '1' also appears in .*part-0"):
        fit_partitioned(open_partitioned(tmp_path))


def test_files_that_disagree_on_the_classes_are_refused(tmp_path: Path) -> None:
    _small(tmp_path, files=1)
    rng = np.random.default_rng(2)
    _write(tmp_path / "zz", rng.normal(size=(10, 4)), rng.integers(0, 4, 10), files=1, row_group=10, start=500)
    with pytest.raises(ScoredSetError, match=r"zz/part-000.parquet: has 4 logit_ columns; .*part-000.parquet has 3"):
        open_partitioned(tmp_path)


def test_what_is_not_a_partitioned_set(tmp_path: Path) -> None:
    with pytest.raises(ScoredSetError, match="no .parquet file in this folder"):
        open_partitioned(tmp_path)
    with pytest.raises(ScoredSetError, match="no Parquet file .* matches this pattern"):
        open_partitioned(f"{tmp_path}/*.parquet")
    with pytest.raises(ScoredSetError, match="no such file or folder"):
        open_partitioned(tmp_path / "absent")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ScoredSetError, match=r"junk.parquet: cannot be read as Parquet"):
        open_partitioned(tmp_path)
    assert is_partitioned_path(tmp_path) and is_partitioned_path("a/day=*/x.parquet")
    assert not is_partitioned_path(tmp_path / "junk.parquet")


def test_hidden_and_underscore_files_are_skipped(tmp_path: Path) -> None:
    _small(tmp_path, files=2)
    (tmp_path / "_manifest.json").write_text("{}")
    (tmp_path / ".part-9.parquet.tmp").write_bytes(b"partial")
    (tmp_path / "_staging").mkdir()
    (tmp_path / "_staging" / "x.parquet").write_bytes(b"partial")
    assert len(open_partitioned(tmp_path).files) == 2


def test_a_file_changed_after_opening_is_refused_as_changed(tmp_path: Path) -> None:
    _small(tmp_path, files=2)
    data = open_partitioned(tmp_path)
    table = pq.read_table(tmp_path / "part-000.parquet")
    pq.write_table(table.slice(0, 100), tmp_path / "part-000.parquet", row_group_size=40)
    with pytest.raises(ScoredSetError, match="now holds 20 rows, 40 when the set was opened; the file changed"):
        fit_partitioned(data)


def test_read_partition_names_file_rows(tmp_path: Path) -> None:
    _small(tmp_path, files=1)
    third = open_partitioned(tmp_path).partitions[2]
    scored = read_partition(third)
    assert (third.first_row, third.offset, scored.n_samples) == (80, 80, 40)
    assert scored.ids[0] == "row-80"


def test_an_inverted_binary_set_is_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 2, 400)
    logits = np.stack([labels * 2.0, (1 - labels) * 2.0], axis=1)  # always wrong
    _write(tmp_path, logits, labels, files=2, row_group=50)
    with pytest.raises(ValueError, match="right on 0 of 400"):
        fit_partitioned(open_partitioned(tmp_path))
