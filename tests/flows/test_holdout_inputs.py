"""The post-finetune inputs a user's own job writes (flows.holdout): what the writer accepts the
reader reads back unchanged; what the writer refuses the reader refuses with the same words,
naming the file, the array and the row; and input paths resolved or refused by name."""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flows.holdout import read_features, read_ids, resolve_input_path, write_features, write_ids
from flows.pipelines.post_finetune import post_finetune
from flows.settings import ThermostatSettings

GOOD: dict[str, Any] = {"ids": ["a", "b", "c"], "features": [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], "labels": [0, 2, 1]}


def test_features_round_trip(tmp_path: Path) -> None:
    path = write_features(tmp_path / "sub" / "holdout.npz", ids=np.array([7, 8, 9]), features=np.eye(3, dtype=np.float32),
                          labels=np.array([0.0, 1.0, 2.0]))
    read = read_features(path)
    assert read.ids.tolist() == ["7", "8", "9"]
    assert read.features.dtype == np.float32 and np.array_equal(read.features, np.eye(3))
    assert read.labels.dtype == np.intp and read.labels.tolist() == [0, 1, 2]
    assert read.source == str(path)
    assert [p.name for p in path.parent.iterdir()] == ["holdout.npz"]  # no temporary file left beside it


def test_text_features_and_a_pandas_id_column_are_accepted(tmp_path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame({"id": ["t-1", "t-2"], "text": ["printer jam", "refund please"], "label": [3, 0]})
    path = write_features(tmp_path / "tickets.npz", ids=frame["id"], features=np.asarray(frame["text"], dtype=str),
                          labels=frame["label"])
    assert read_features(path).features.tolist() == ["printer jam", "refund please"]


BAD_FEATURES = [
    ({"ids": ["a", "b", "a"]}, "array 'ids': id 'a' appears in row 0 and row 2; ids must be unique"),
    ({"ids": ["a", "", "c"]}, "array 'ids': row 1: the id is empty"),
    ({"labels": [0, 1.5, 1]}, "array 'labels': row 1 is 1.5; labels must be integers >= 0"),
    ({"labels": [0, -1, 1]}, "array 'labels': row 1 is -1; labels must be integers >= 0"),
    ({"labels": ["x", "y", "z"]}, "array 'labels': has dtype <U1; labels must be integers >= 0"),
    ({"labels": [0, 1]}, "ids (3), features (3) and labels (2) must have one row each"),
    ({"ids": [["a"], ["b"], ["c"]]}, "array 'ids': must be 1-D, one entry per example; got shape (3, 1)"),
]


@pytest.mark.parametrize(("change", "message"), BAD_FEATURES)
def test_the_writer_and_the_reader_refuse_alike(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    arrays = GOOD | change
    written = tmp_path / "written.npz"
    with pytest.raises(ValueError, match=re.escape(f"{written}: {message}")):
        write_features(written, **arrays)
    assert not written.exists()
    # The same arrays written by someone else's code: the flow's reader says the same.
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, **{name: np.asarray(value) for name, value in arrays.items()})
    with pytest.raises(ValueError, match=re.escape(f"{foreign}: {message}")):
        read_features(foreign)


def test_missing_ids_in_a_pandas_column_are_refused_by_row(tmp_path: Path) -> None:
    import pandas as pd

    with pytest.raises(ValueError, match=r"array 'ids': row 1: the id is missing"):
        write_features(tmp_path / "h.npz", ids=pd.Series(["a", None, "c"]), features=GOOD["features"],
                       labels=GOOD["labels"])


def test_object_features_are_refused_when_written_and_when_read(tmp_path: Path) -> None:
    objects = np.array([{"x": 1}, {"x": 2}, {"x": 3}], dtype=object)
    with pytest.raises(ValueError, match=r"array 'features': holds Python objects.*dtype=str"):
        write_features(tmp_path / "h.npz", ids=GOOD["ids"], features=objects, labels=GOOD["labels"])
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, ids=np.array(GOOD["ids"]), features=objects, labels=np.array(GOOD["labels"]))
    with pytest.raises(ValueError, match=rf"{re.escape(str(pickled))}: array 'features' holds Python objects"):
        read_features(pickled)


def test_the_file_itself_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"holdout.csv: a features file must be .npz"):
        write_features(tmp_path / "holdout.csv", **GOOD)
    partial = tmp_path / "partial.npz"
    np.savez(partial, ids=np.array(["a"]), labels=np.array([0]))
    with pytest.raises(ValueError, match=re.escape(f"{partial}: missing array(s) ['features']")):
        read_features(partial)
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip archive")
    with pytest.raises(ValueError, match=re.escape(f"{broken}: not a readable .npz archive")):
        read_features(broken)
    assert zipfile.is_zipfile(write_features(tmp_path / "ok.npz", **GOOD))


def test_training_ids_round_trip_and_refusals(tmp_path: Path) -> None:
    path = write_ids(tmp_path / "train_ids.txt", np.array(["digit-0001", "é-2", "3"]))
    assert read_ids(path).tolist() == ["digit-0001", "é-2", "3"]
    (tmp_path / "loose.txt").write_text("  a \n\n b\n")  # written by hand: stripped, blank lines skipped
    assert read_ids(tmp_path / "loose.txt").tolist() == ["a", "b"]
    for bad, rule in ((["a", "b\nc"], "without a line break"), (["a", "b\u2028c"], "without a line break"),
                      (["a", " b"], "must not start or end with spaces"), (["a", ""], "the id is empty")):
        with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'bad.txt'}: ids row 1") + ".*" + re.escape(rule)):
            write_ids(tmp_path / "bad.txt", bad)
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match="latin1.txt: not UTF-8 text"):
        read_ids(tmp_path / "latin1.txt")


def test_relative_paths_resolve_against_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_features(tmp_path / "data" / "holdout.npz", **GOOD)
    monkeypatch.chdir(tmp_path)
    assert resolve_input_path("data/holdout.npz") == tmp_path / "data" / "holdout.npz"
    assert read_features("data/holdout.npz").ids.tolist() == GOOD["ids"]
    assert resolve_input_path(tmp_path / "data" / "holdout.npz") == tmp_path / "data" / "holdout.npz"


def test_a_missing_relative_path_names_what_was_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as refused:
        read_ids("ids/train_ids.txt")
    message = str(refused.value)
    assert message.startswith("training_ids_path 'ids/train_ids.txt' is a relative path, resolved against the "
                              f"flow's working directory {tmp_path} on host ")
    assert f"and {tmp_path / 'ids' / 'train_ids.txt'} does not exist" in message
    assert "pass an absolute path" in message
    with pytest.raises(FileNotFoundError, match=r"features_path '/no/such/holdout.npz' does not exist on host .*; "
                                                r"pass an absolute path"):
        read_features("/no/such/holdout.npz")
    with pytest.raises(IsADirectoryError, match=rf"holdout_path '{re.escape(str(tmp_path))}' is a directory"):
        resolve_input_path(tmp_path, parameter="holdout_path")


@pytest.mark.parametrize("parameter", ["features_path", "holdout_path", "training_ids_path"])
def test_the_flow_refuses_a_missing_input_before_anything_else(
    parameter: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run as a worker would (its working directory is the checkout): the refusal names the
    parameter, the path given and the path searched, before MLflow or the lock are touched."""
    present = {"features_path": str(write_features(tmp_path / "h.npz", **GOOD)),
               "training_ids_path": str(write_ids(tmp_path / "t.txt", ["x"]))}
    arguments: dict[str, Any] = present | {parameter: "missing/input.file"}
    if parameter == "holdout_path":
        arguments |= {"features_path": None, "checkpoint_output": "logits"}
    worker_checkout = tmp_path / "checkout"
    worker_checkout.mkdir()
    monkeypatch.chdir(worker_checkout)
    settings = ThermostatSettings(state_dir=tmp_path / "state", tracking_uri="http://127.0.0.1:9")  # never reached
    with pytest.raises(FileNotFoundError) as refused:
        post_finetune.fn(model_name="digits", checkpoint_uri="runs:/0/checkpoint", train_steps=1,
                         train_data_version="v1", settings=settings, **arguments)
    message = str(refused.value)
    assert message.startswith(f"{parameter} 'missing/input.file' is a relative path")
    assert str(worker_checkout / "missing" / "input.file") in message and "pass an absolute path" in message
    assert not (tmp_path / "state").exists()


def test_written_files_are_readable_by_everyone_who_may_read_the_folder(tmp_path: Path) -> None:
    """mkstemp creates 0600 files; a features file is read by the worker's user, often another one."""
    path = write_features(tmp_path / "holdout.npz", **GOOD)
    ids = write_ids(tmp_path / "ids.txt", ["a"])
    umask = os.umask(0)
    os.umask(umask)
    expected = 0o666 & ~umask
    assert path.stat().st_mode & 0o777 == expected and ids.stat().st_mode & 0o777 == expected


def test_writing_leaves_the_process_umask_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """os.umask sets the mask of the whole process: Prefect runs tasks in threads, so a writer
    that sets it (even briefly, to read it) races every file another thread creates."""

    def refuse(mask: int) -> int:
        raise AssertionError(f"os.umask({mask:#o}) called while writing")

    umask = os.umask(0)
    os.umask(umask)
    monkeypatch.setattr(os, "umask", refuse)
    path = write_features(tmp_path / "holdout.npz", **GOOD)
    ids = write_ids(tmp_path / "ids.txt", ["a"])
    monkeypatch.undo()
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask and ids.stat().st_mode & 0o777 == 0o666 & ~umask
