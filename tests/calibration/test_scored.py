"""Scored sets: round trips per format, probabilities, defaults, and one test per refusal."""

from __future__ import annotations

import decimal
import io
import re
import zipfile
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from calibration import ScoredSet, ScoredSetError, read_logits, read_scored_set, write_scored_set
from calibration._kernels import MAX_LOGIT_SPREAD

FORMATS = ("npz", "parquet", "csv")
TABLES = ("parquet", "csv")


def _frame(n: int = 4, k: int = 3, *, seed: int = 0, prefix: str = "logit") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(size=(n, k)), columns=[f"{prefix}_{j}" for j in range(k)])
    frame.insert(0, "id", [f"ex{i}" for i in range(n)])
    frame.insert(1, "label", np.arange(n) % k)
    return frame


def _write_table(frame: pd.DataFrame, path: Path) -> Path:
    if path.suffix == ".csv":
        frame.to_csv(path, index=False, na_rep="nan")
    else:
        frame.to_parquet(path, index=False)
    return path


def _refusal(path: Path, *fragments: str) -> str:
    """Read ``path``, expect a refusal whose message starts with the path and names ``fragments``."""
    with pytest.raises(ScoredSetError) as caught:
        read_scored_set(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


# --------------------------------------------------------------------------- round trips

ids_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=6
)


@st.composite
def scored_sets(draw: st.DrawFn) -> ScoredSet:
    n = draw(st.integers(1, 6))
    k = draw(st.integers(2, 4))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    # float64 within ±MAX_LOGIT_SPREAD / 2, so that no row spans more than the limit (float32 never can).
    bound = None if dtype is np.float32 else MAX_LOGIT_SPREAD / 2
    elements = st.floats(
        min_value=None if bound is None else -bound,
        max_value=bound,
        allow_nan=False,
        allow_infinity=False,
        width=32 if dtype is np.float32 else 64,
    )
    logits = draw(hnp.arrays(dtype, (n, k), elements=elements))
    labels = draw(hnp.arrays(np.int64, n, elements=st.integers(0, k - 1)))
    ids = draw(st.lists(ids_text, min_size=n, max_size=n, unique=True))
    groups = draw(st.none() | st.lists(ids_text, min_size=n, max_size=n))
    return ScoredSet.from_arrays(logits, labels, ids=ids, groups=groups)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scored=scored_sets())
def test_round_trip_is_exact(fmt: str, scored: ScoredSet, tmp_path: Path) -> None:
    path = write_scored_set(scored, tmp_path / f"scored.{fmt}")
    again = read_scored_set(path)
    assert again.ids.tolist() == scored.ids.tolist()
    assert again.labels.tolist() == scored.labels.tolist()
    assert (again.groups is None) == (scored.groups is None)
    if scored.groups is not None and again.groups is not None:
        assert again.groups.tolist() == scored.groups.tolist()
    # npz and parquet keep the dtype; CSV reads float64, holding exactly the same values.
    assert again.logits.dtype == (np.float64 if fmt == "csv" else scored.logits.dtype)
    np.testing.assert_array_equal(again.logits, scored.logits.astype(np.float64))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_write_replaces_an_existing_file_and_returns_the_path(tmp_path: Path) -> None:
    first = ScoredSet.from_arrays([[1.0, 0.0]], [0], ids=["a"])
    second = ScoredSet.from_arrays([[0.0, 1.0], [2.0, 1.0]], [1, 0], ids=["b", "c"])
    target = tmp_path / "s.csv"
    assert write_scored_set(first, str(target)) == target
    write_scored_set(second, target)
    assert read_scored_set(target).ids.tolist() == ["b", "c"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv"]


def test_csv_ids_and_groups_stay_text(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("label,id,group,logit_1,logit_0\n1,007,NA,0.5,1\n0,null,,0.25,2\n".replace(",,", ",x,"))
    scored = read_scored_set(path)
    assert scored.ids.tolist() == ["007", "null"]
    assert scored.groups is not None and scored.groups.tolist() == ["NA", "x"]
    # Columns are ordered by their number, not by their place in the file.
    np.testing.assert_array_equal(scored.logits, [[1.0, 0.5], [2.0, 0.25]])


def test_extension_is_case_insensitive_and_bom_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "S.CSV"
    path.write_bytes(b"\xef\xbb\xbfid,label,logit_0,logit_1\na,1,0,1\n")
    assert read_scored_set(path).ids.tolist() == ["a"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_probabilities_become_log_probabilities(fmt: str, tmp_path: Path) -> None:
    probs = np.array([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]])
    path = tmp_path / f"p.{fmt}"
    if fmt == "npz":
        np.savez(path, probs=probs, labels=np.array([1, 0, 0]))
    else:
        frame = pd.DataFrame(probs, columns=["prob_0", "prob_1"])
        frame.insert(0, "id", ["a", "b", "c"])
        frame.insert(1, "label", [1, 0, 0])
        _write_table(frame, path)
    scored = read_scored_set(path)
    np.testing.assert_allclose(scored.logits, np.log(probs), rtol=0, atol=1e-15)
    # Writing stores logits, never probabilities.
    out = write_scored_set(scored, tmp_path / f"out.{fmt}")
    if fmt == "npz":
        with np.load(out) as archive:
            assert "logits" in archive.files and "probs" not in archive.files
    else:
        columns = pd.read_csv(out).columns if fmt == "csv" else pd.read_parquet(out).columns
        assert list(columns) == ["id", "label", "logit_0", "logit_1"]


def test_float32_probabilities_give_float32_logits(tmp_path: Path) -> None:
    path = tmp_path / "p.npz"
    np.savez(path, probs=np.array([[0.25, 0.75]], dtype=np.float32), labels=np.array([1]))
    assert read_scored_set(path).logits.dtype == np.float32


def test_npz_ids_default_to_the_row_index_and_extra_keys_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "s.npz"
    np.savez(path, logits=np.zeros((3, 2), np.float32), labels=np.array([0, 1, 1]), source=np.array("x"))
    scored = read_scored_set(path)
    assert scored.ids.tolist() == ["0", "1", "2"]
    assert scored.groups is None
    assert scored.logits.dtype == np.float32


def test_from_arrays_defaults_copies_and_freezes() -> None:
    logits = np.array([[1.0, 2.0], [3.0, 0.0]])
    scored = ScoredSet.from_arrays(logits, [1.0, 0.0], groups=[1, 2])
    assert scored.ids.tolist() == ["0", "1"]
    assert scored.labels.dtype == np.intp and scored.labels.tolist() == [1, 0]
    assert scored.groups is not None and scored.groups.tolist() == ["1", "2"]
    logits[0, 0] = np.nan  # the caller's array is not the set's
    assert np.isfinite(scored.logits).all()
    with pytest.raises(ValueError):
        scored.logits[0, 0] = 5.0
    assert ScoredSet.from_arrays([[1, 2]], [0]).logits.dtype == np.float64


def test_subset_by_positions_and_mask() -> None:
    scored = ScoredSet.from_arrays(np.arange(8.0).reshape(4, 2), [0, 1, 0, 1], ids=list("abcd"), groups=list("xxyy"))
    picked = scored.subset([3, 1])
    assert picked.ids.tolist() == ["d", "b"]
    assert picked.labels.tolist() == [1, 1]
    assert picked.groups is not None and picked.groups.tolist() == ["y", "x"]
    np.testing.assert_array_equal(picked.logits, [[6.0, 7.0], [2.0, 3.0]])
    assert scored.subset(scored.labels == 0).ids.tolist() == ["a", "c"]


@pytest.mark.parametrize(
    ("indices", "fragment"),
    [([1, 1], "row 1 is selected more than once"), ([], "empty"), ([7], "position 7 is out of range"),
     (np.array([True, False]), "boolean mask has shape (2,)"), ([0.5], "integer positions")],
)
def test_subset_refusals(indices: Any, fragment: str) -> None:
    scored = ScoredSet.from_arrays(np.zeros((4, 2)), [0, 1, 0, 1])
    with pytest.raises(ScoredSetError, match="^subset: ") as caught:
        scored.subset(indices)
    assert fragment in str(caught.value)


def test_real_logits_file_reads(real_logits_dir: Path) -> None:
    scored = read_scored_set(real_logits_dir / "cifar10_lenet5_netcal.npz")
    assert (scored.n_samples, scored.n_classes) == (10000, 10)
    assert scored.logits.dtype == np.float32


# --------------------------------------------------------------------------- refusals


def _npz(path: Path, **arrays: Any) -> Path:
    defaults: dict[str, Any] = {"logits": np.zeros((3, 2)), "labels": np.array([0, 1, 0])}
    defaults.update(arrays)
    np.savez(path, **{key: value for key, value in defaults.items() if value is not None})
    return path


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_logit_names_row_and_column(fmt: str, bad: float, tmp_path: Path) -> None:
    path = tmp_path / f"s.{fmt}"
    if fmt == "npz":
        logits = np.zeros((4, 3))
        logits[2, 1] = bad
        _npz(path, logits=logits, labels=np.array([0, 1, 2, 0]))
        _refusal(path, "row 2 (id '2')", "key 'logits' column 1", "not finite")
    else:
        frame = _frame()
        frame.loc[2, "logit_1"] = bad
        _write_table(frame, path)
        _refusal(path, "row 2 (id 'ex2')", "column logit_1", "not finite")


@pytest.mark.parametrize("fmt", TABLES)
def test_logit_that_is_not_a_number_names_row_and_column(fmt: str, tmp_path: Path) -> None:
    frame = _frame()
    frame["logit_2"] = frame["logit_2"].astype(str)  # a text column, as a hand-edited table has
    frame.loc[1, "logit_2"] = "abc"
    _refusal(_write_table(frame, tmp_path / f"s.{fmt}"), "row 1 (id 'ex1')", "column logit_2", "'abc' is not a number")


def test_empty_csv_logit_field_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("id,label,logit_0,logit_1\na,0,1,2\nb,1,,2\n")
    _refusal(path, "row 1 (id 'b')", "column logit_0", "'' is not a number")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("bad", [0.0, -0.2])
def test_probability_not_positive_names_row_and_column(fmt: str, bad: float, tmp_path: Path) -> None:
    probs = np.array([[0.5, 0.5], [0.3, 0.7], [0.9, 0.1]])
    probs[1] = [bad, 1.0 - bad]
    path = tmp_path / f"s.{fmt}"
    if fmt == "npz":
        _npz(path, logits=None, probs=probs)
        _refusal(path, "row 1 (id '1')", "key 'probs' column 0", "<= 0")
    else:
        frame = _frame(3, 2, prefix="prob")
        frame[["prob_0", "prob_1"]] = probs
        _refusal(_write_table(frame, path), "row 1 (id 'ex1')", "column prob_0", "<= 0")


@pytest.mark.parametrize("fmt", FORMATS)
def test_probabilities_not_summing_to_one_name_row_and_sum(fmt: str, tmp_path: Path) -> None:
    probs = np.array([[0.5, 0.5], [0.3, 0.7], [0.6, 0.3]])
    path = tmp_path / f"s.{fmt}"
    if fmt == "npz":
        _npz(path, logits=None, probs=probs)
        _refusal(path, "row 2 (id '2')", "sum to 0.9", "within 0.0001")
    else:
        frame = _frame(3, 2, prefix="prob")
        frame[["prob_0", "prob_1"]] = probs
        _refusal(_write_table(frame, path), "row 2 (id 'ex2')", "sum to 0.9", "within 0.0001")


def test_probabilities_within_tolerance_are_accepted(tmp_path: Path) -> None:
    path = _npz(tmp_path / "s.npz", logits=None, probs=np.array([[0.5, 0.50009], [0.3, 0.7], [0.2, 0.79992]]))
    assert read_scored_set(path).n_samples == 3


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("bad", [3, -1])
def test_label_outside_range_names_row_and_value(fmt: str, bad: int, tmp_path: Path) -> None:
    path = tmp_path / f"s.{fmt}"
    if fmt == "npz":
        _npz(path, logits=np.zeros((4, 3)), labels=np.array([0, 1, bad, 2]))
        _refusal(path, "row 2 (id '2')", "key 'labels'", f"{bad} is outside [0, 3)")
    else:
        frame = _frame()
        frame.loc[2, "label"] = bad
        _refusal(_write_table(frame, path), "row 2 (id 'ex2')", "column label", "is outside [0, 3)", str(bad))


@pytest.mark.parametrize("fmt", FORMATS)
def test_label_not_an_integer_names_row_and_value(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / f"s.{fmt}"
    if fmt == "npz":
        _npz(path, labels=np.array([0.0, 1.5, 1.0]))
        _refusal(path, "row 1 (id '1')", "key 'labels'", "1.5 is not an integer")
    else:
        frame = _frame().astype({"label": float})
        frame.loc[3, "label"] = 0.5
        _refusal(_write_table(frame, path), "row 3 (id 'ex3')", "column label", "0.5", "is not an integer")


@pytest.mark.parametrize("text", ["x", "", "1.5"])
def test_csv_label_text_that_is_not_an_integer(text: str, tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text(f"id,label,logit_0,logit_1\na,1,0,1\nb,{text},0,1\n")
    _refusal(path, "row 1 (id 'b')", "column label", f"{text!r} is not an integer")


def test_csv_integral_float_label_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("id,label,logit_0,logit_1\na,1.0,0,1\n")
    assert read_scored_set(path).labels.tolist() == [1]


def test_boolean_labels_are_refused(tmp_path: Path) -> None:
    _refusal(_npz(tmp_path / "s.npz", labels=np.array([True, False, True])), "key 'labels'", "dtype bool")


@pytest.mark.parametrize("fmt", FORMATS)
def test_duplicate_id_names_the_id_and_both_rows(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / f"s.{fmt}"
    ids = np.array(["a", "b", "c", "b", "c"])
    if fmt == "npz":
        _npz(path, logits=np.zeros((5, 2)), labels=np.zeros(5, int), ids=ids)
        _refusal(path, "key 'ids'", "id 'b' appears in row 1 and row 3", "(1 more ids are duplicated)", "unique")
    else:
        frame = _frame(5)
        frame["id"] = ids
        _refusal(_write_table(frame, path), "column id", "id 'b' appears in row 1 and row 3", "unique")


@pytest.mark.parametrize("fmt", TABLES)
def test_missing_or_empty_id_names_the_row(fmt: str, tmp_path: Path) -> None:
    frame = _frame()
    frame.loc[2, "id"] = None if fmt == "parquet" else ""
    _refusal(_write_table(frame, tmp_path / f"s.{fmt}"), "row 2, column id", "non-empty id")


@pytest.mark.parametrize("fmt", FORMATS)
def test_fewer_than_two_classes(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / f"s.{fmt}"
    if fmt == "npz":
        _npz(path, logits=np.zeros((3, 1)))
        _refusal(path, "key 'logits'", "1 class column(s)", "K >= 2")
    else:
        _refusal(_write_table(_frame(k=1), path), "logit_ columns", "1 class column(s)", "K >= 2")


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_set(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / f"s.{fmt}"
    if fmt == "npz":
        _npz(path, logits=np.zeros((0, 3)), labels=np.zeros(0, int))
    else:
        _write_table(_frame().iloc[:0], path)
    _refusal(path, "empty (0 rows)")


def test_empty_csv_file(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("")
    _refusal(path, "the file is empty", "id, label")


@pytest.mark.parametrize(
    ("arrays", "fragments"),
    [
        ({"labels": np.array([0, 1])}, ("key 'labels' has shape (2,)", "expected (3,)")),
        ({"ids": np.array(["a", "b", "c", "d"])}, ("key 'ids' has shape (4,)", "expected (3,)")),
        ({"groups": np.array(["g"])}, ("key 'groups' has shape (1,)", "expected (3,)")),
        ({"logits": np.zeros(3)}, ("key 'logits' must be 2-D", "(3,)")),
    ],
)
def test_mismatched_lengths_name_the_keys(arrays: dict[str, Any], fragments: tuple[str, ...], tmp_path: Path) -> None:
    _refusal(_npz(tmp_path / "s.npz", **arrays), *fragments)


@pytest.mark.parametrize("fmt", TABLES)
@pytest.mark.parametrize("drop", ["id", "label"])
def test_missing_column_names_it_and_what_is_expected(fmt: str, drop: str, tmp_path: Path) -> None:
    frame = _frame().drop(columns=[drop])
    _refusal(_write_table(frame, tmp_path / f"s.{fmt}"), f"missing column(s) {drop};", "columns id, label", "found columns")


@pytest.mark.parametrize("fmt", TABLES)
def test_missing_logit_columns(fmt: str, tmp_path: Path) -> None:
    frame = _frame().drop(columns=["logit_0", "logit_1", "logit_2"])
    _refusal(_write_table(frame, tmp_path / f"s.{fmt}"), "missing column(s) logit_0 ... logit_{K-1}")


def test_missing_npz_keys(tmp_path: Path) -> None:
    path = tmp_path / "s.npz"
    np.savez(path, logit=np.zeros((3, 2)))
    _refusal(path, "missing key(s) logits (or probs), labels", "found keys: ['logit']")


@pytest.mark.parametrize("fmt", TABLES)
def test_logit_column_numbering_gap(fmt: str, tmp_path: Path) -> None:
    frame = _frame(k=4).drop(columns=["logit_2"])
    _refusal(_write_table(frame, tmp_path / f"s.{fmt}"), "numbered 0 ... K-1 without gaps", "missing logit_2",
             "found logit_0, logit_1, logit_3")


@pytest.mark.parametrize("name", ["logit_01", "logit_x", "logit_"])
def test_malformed_logit_column_name(name: str, tmp_path: Path) -> None:
    frame = _frame().rename(columns={"logit_1": name})
    _refusal(_write_table(frame, tmp_path / "s.csv"), f"column {name!r} is not a valid logit column")


@pytest.mark.parametrize("fmt", FORMATS)
def test_both_logits_and_probabilities(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / f"s.{fmt}"
    if fmt == "npz":
        _npz(path, probs=np.full((3, 2), 0.5))
        _refusal(path, "both keys 'logits' and 'probs'")
    else:
        frame = _frame(k=2)
        frame[["prob_0", "prob_1"]] = 0.5
        _refusal(_write_table(frame, path), "both logit_ and prob_ columns")


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("s.npz", b"not a zip archive", "cannot be read as .npz"),
        ("s.parquet", b"not parquet at all", "cannot be read as Parquet"),
        ("s.csv", b"id,label,logit_0,logit_1\n\xff\xfe,0,1,2\n", "cannot be read as CSV"),
        ("s.csv", b'id,label,logit_0,logit_1\n"a,0,1,2\n', "cannot be read as CSV"),
    ],
)
def test_unreadable_file(name: str, content: bytes, fragment: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    _refusal(path, fragment)


def test_npy_file_named_npz(tmp_path: Path) -> None:
    path = tmp_path / "s.npz"
    with path.open("wb") as handle:
        np.save(handle, np.zeros(3))
    _refusal(path, "not an .npz archive")


def test_object_array_in_npz_is_refused_without_unpickling(tmp_path: Path) -> None:
    path = _npz(tmp_path / "s.npz", ids=np.array(["a", None, "c"], dtype=object))
    _refusal(path, "key 'ids' cannot be read", "dtype=str")


def test_file_not_found_unknown_extension_and_folder(tmp_path: Path) -> None:
    _refusal(tmp_path / "missing.parquet", "file not found")
    (tmp_path / "s.json").write_text("{}")
    _refusal(tmp_path / "s.json", "unknown extension '.json'", ".npz, .parquet, .csv")
    (tmp_path / "folder.csv").mkdir()
    _refusal(tmp_path / "folder.csv", "is a folder")


def test_from_arrays_names_the_source() -> None:
    with pytest.raises(ScoredSetError, match=r"^traffic window: row 1 \(id 'b'\), logits column 0: nan is not finite"):
        ScoredSet.from_arrays([[0.0, 1.0], [np.nan, 1.0]], [0, 1], ids=["a", "b"], source="traffic window")
    with pytest.raises(ScoredSetError, match="^arrays: logits must be a numeric array"):
        ScoredSet.from_arrays([[0.0, 1.0], [1.0]], [0, 1])


# --------------------------------------------------------------------------- writing refusals


def _unvalidated(**fields: Any) -> ScoredSet:
    values: dict[str, Any] = {"ids": np.array(["a", "b"]), "logits": np.zeros((2, 2)), "labels": np.array([0, 1])}
    values.update(fields)
    return ScoredSet(**values)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"ids": np.array(["a", "a"])}, "id 'a' appears in row 0 and row 1"),
        ({"logits": np.array([[0.0, np.inf], [0.0, 0.0]])}, "row 0 (id 'a')"),
        ({"labels": np.array([0, 2])}, "2 is outside [0, 2)"),
    ],
)
def test_write_validates_first_and_writes_nothing(
    fmt: str, fields: dict[str, Any], fragment: str, tmp_path: Path
) -> None:
    target = tmp_path / f"s.{fmt}"
    with pytest.raises(ScoredSetError) as caught:
        write_scored_set(_unvalidated(**fields), target)
    assert str(caught.value).startswith(f"{target}: ")
    assert fragment in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_write_refuses_unknown_extension_and_missing_folder(tmp_path: Path) -> None:
    scored = _unvalidated()
    with pytest.raises(ScoredSetError, match="unknown extension '.txt'"):
        write_scored_set(scored, tmp_path / "s.txt")
    with pytest.raises(ScoredSetError, match="does not exist; create it first"):
        write_scored_set(scored, tmp_path / "nowhere" / "s.npz")
    assert list(tmp_path.iterdir()) == []


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = write_scored_set(_unvalidated(), tmp_path / "s.parquet")
    before = target.read_bytes()

    def explode(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", explode)
    with pytest.raises(OSError, match="disk full"):
        write_scored_set(_unvalidated(ids=np.array(["x", "y"])), target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.parquet"]


# --------------------------------------------------------------------------- bad input: sizes, types, bytes


def _npy_bytes(header: dict[str, Any], data: bytes) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + data


def _crafted_npz(path: Path, shape: tuple[int, ...], data: bytes = bytes(16)) -> Path:
    """An .npz whose 'logits' header declares ``shape`` of float64 over ``data`` only."""
    labels = io.BytesIO()
    np.save(labels, np.array([0, 1]))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("logits.npy", _npy_bytes({"descr": "<f8", "fortran_order": False, "shape": shape}, data))
        archive.writestr("labels.npy", labels.getvalue())
    return path


@pytest.mark.parametrize("shape", [(10**6, 10**6), (10**10, 2), (2, 10**10)])
def test_npz_header_declaring_more_than_its_member_holds_is_refused_before_allocating(
    shape: tuple[int, int], tmp_path: Path
) -> None:
    path = _crafted_npz(tmp_path / "bomb.npz", shape)
    if shape[1] > 100_000:
        _refusal(path, f"{shape[1]:,} classes found (key 'logits' has shape {shape})", "max_classes=")
    else:
        elements = shape[0] * shape[1]
        _refusal(path, f"key 'logits' declares shape {shape}", f"{elements:,} elements", "holds 16 bytes", "corrupt")


def test_npz_larger_than_this_machines_memory_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from calibration import _scored

    path = _npz(tmp_path / "s.npz", logits=np.zeros((100, 2)), labels=np.zeros(100, dtype=np.int64))
    monkeypatch.setattr(_scored, "memory_limit", lambda: 1_000)
    _refusal(path, "key 'logits' has shape (100, 2) of float64 (1,600 bytes), more than this process may use (1,000")


@pytest.mark.parametrize("content", [np.random.default_rng(0).bytes(1_000), b"PK\x03\x04 truncated"])
def test_npz_of_random_bytes_is_refused_without_suggesting_pickle(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "s.npz"
    path.write_bytes(content)
    message = _refusal(path, "cannot be read as .npz")
    assert "pickle" not in message.lower() and "unsafe" not in message.lower(), message


def test_npz_member_that_is_not_an_array(tmp_path: Path) -> None:
    path = tmp_path / "s.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("logits.npy", b"not an npy header")
        archive.writestr("labels.npy", b"")
    message = _refusal(path, "key 'logits' is not a numpy array")
    assert "pickle" not in message.lower()


def test_csv_with_a_million_logit_columns_is_refused_from_its_header(tmp_path: Path) -> None:
    k = 1_000_001
    path = tmp_path / "wide.csv"
    path.write_text(
        "id,label," + ",".join(f"logit_{j}" for j in range(k)) + "\n" + "a,0," + ",".join(["0.5"] * k) + "\n"
    )
    # Refused by the header's commas, before its names are parsed: more columns than a table may have.
    _refusal(path, "the header line, counted by its commas before it is parsed, has 1,000,003 columns; at most "
             "200,003 are read (100,000 logit_ or prob_ columns", "max_classes=")
    # Within the column limit, the logit_ columns are counted once parsed.
    k = 150_000
    path.write_text("id,label," + ",".join(f"logit_{j}" for j in range(k)) + "\n" + "a,0," + ",".join(["0.5"] * k) + "\n")
    _refusal(path, "150,000 classes found (150,000 logit_ columns)", "at most 100,000 classes", "max_classes=")


@pytest.mark.parametrize("fmt", FORMATS)
def test_max_classes_is_settable(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / f"s.{fmt}"
    if fmt == "npz":
        _npz(path, logits=np.zeros((3, 12)), labels=np.array([0, 1, 2]))
        where = "key 'logits' has shape (3, 12)"
    else:
        _write_table(_frame(k=12, prefix="prob" if fmt == "csv" else "logit"), path)
        where = "12 prob_ columns" if fmt == "csv" else "12 logit_ columns"
    with pytest.raises(ScoredSetError, match=rf"^{re.escape(str(path))}: 12 classes found \({re.escape(where)}\); at most 11 "):
        read_scored_set(path, max_classes=11)
    if fmt != "csv":  # the CSV's random "probabilities" do not sum to 1
        assert read_scored_set(path, max_classes=12).n_classes == 12


@pytest.mark.parametrize(("bad", "fragment"), [(1, "max_classes must be an integer >= 2"), (2.5, "max_classes must be an integer")])
def test_max_classes_must_be_an_integer_of_at_least_two(bad: Any, fragment: str, tmp_path: Path) -> None:
    path = _write_table(_frame(), tmp_path / "s.csv")
    with pytest.raises((TypeError, ValueError), match=fragment):
        read_scored_set(path, max_classes=bad)


def test_csv_junk_columns_are_not_parsed(tmp_path: Path) -> None:
    frame = _frame()
    frame["notes"] = "anything, even 'quoted'"
    assert read_scored_set(_write_table(frame, tmp_path / "s.csv")).n_classes == 3


@pytest.mark.parametrize(
    ("column", "array", "fragments"),
    [
        (
            "logit_1",
            pa.array([decimal.Decimal("0.50"), decimal.Decimal("1.25")] * 2, pa.decimal128(10, 2)),
            ("column 'logit_1' has type decimal128(10, 2)", "logit columns must be float or integer"),
        ),
        ("logit_0", pa.array([[0.5], [1.0]] * 2), ("column 'logit_0' has type list<", "logit columns must be float")),
        ("id", pa.array([b"a", b"\xff", b"c", b"d"], pa.binary()), ("column 'id' has type binary", "ids must be text")),
        ("group", pa.array([[1], [2]] * 2), ("column 'group' has type list<", "groups must be text")),
        ("label", pa.array([True, False] * 2), ("column 'label' has type bool", "labels must be integers")),
    ],
)
def test_parquet_column_of_a_wrong_type_is_refused_by_name(
    column: str, array: Any, fragments: tuple[str, ...], tmp_path: Path
) -> None:
    table = pa.Table.from_pandas(_frame(k=2), preserve_index=False)
    if column in table.column_names:
        table = table.set_column(table.column_names.index(column), column, array)
    else:
        table = table.append_column(column, array)
    path = tmp_path / "s.parquet"
    pq.write_table(table, path)
    _refusal(path, *fragments)


def test_parquet_columns_that_are_not_read_may_have_any_type(tmp_path: Path) -> None:
    table = pa.Table.from_pandas(_frame(), preserve_index=False).append_column("notes", pa.array([[1]] * 4))
    pq.write_table(table, tmp_path / "s.parquet")
    assert read_scored_set(tmp_path / "s.parquet").n_samples == 4


@pytest.mark.parametrize("fmt", FORMATS)
def test_logits_spanning_more_than_float64_allows_name_the_file_row_and_rule(fmt: str, tmp_path: Path) -> None:
    logits = np.zeros((4, 3))
    logits[2] = [1.7e308, -1.7e308, 0.0]
    path = tmp_path / f"s.{fmt}"
    if fmt == "npz":
        _npz(path, logits=logits, labels=np.array([0, 1, 2, 0]))
    else:
        frame = _frame()
        frame[["logit_0", "logit_1", "logit_2"]] = logits
        _write_table(frame, path)
    _refusal(path, "row 2 (id ", "its logits span more than float64 holds", "must span at most 1e+100")


@pytest.mark.parametrize("suffix", [".npz", ".parquet", ".csv"])
def test_read_logits_needs_no_labels_and_ignores_them(suffix: str, tmp_path: Path) -> None:
    logits = np.array([[2.0, 0.5, -1.0], [0.1, 1.5, 0.0]])
    unlabelled, labelled = tmp_path / f"served{suffix}", tmp_path / f"labelled{suffix}"
    if suffix == ".npz":
        np.savez(unlabelled, logits=logits)
        np.savez(labelled, logits=logits, labels=np.array([7, -1]))  # out of range: not read
    else:
        frame = pd.DataFrame(logits, columns=["logit_0", "logit_1", "logit_2"])
        frame.insert(0, "id", ["a", "b"])
        (frame.to_parquet if suffix == ".parquet" else partial(frame.to_csv, index=False))(unlabelled)
        frame.insert(1, "label", ["x", ""])  # not integers: not read
        (frame.to_parquet if suffix == ".parquet" else partial(frame.to_csv, index=False))(labelled)
    for path in (unlabelled, labelled):
        assert read_logits(path).tolist() == logits.tolist()
    with pytest.raises(ScoredSetError, match="missing key|missing column"):
        read_scored_set(unlabelled)


def test_read_logits_keeps_the_other_rules(tmp_path: Path) -> None:
    np.savez(tmp_path / "nan.npz", logits=np.array([[0.0, np.nan]]))
    with pytest.raises(ScoredSetError, match=r"nan.npz: row 0 .id '0'., key 'logits' column 1: nan is not finite"):
        read_logits(tmp_path / "nan.npz")
    np.savez(tmp_path / "empty.npz", logits=np.zeros((0, 2)))
    with pytest.raises(ScoredSetError, match="empty.npz: the scored set is empty .0 rows.; at least one row is required"):
        read_logits(tmp_path / "empty.npz")
    (tmp_path / "no_id.csv").write_text("logit_0,logit_1\n0,1\n")
    with pytest.raises(ScoredSetError, match="no_id.csv: missing column.s. id;"):
        read_logits(tmp_path / "no_id.csv")
