"""``thermostat labels attach FILE`` and ``thermostat log FILE``: CSV, Parquet and JSON Lines, a bad
row refused alone with its row number, the same report as the service, the exit statuses, hostile
files refused before a row is written. Real SQLite logs, real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flows.cli.main import main
from monitoring import PredictionLog, log_predictions, read_label_file

K = 3


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PredictionLog:
    """A prediction log with 20 served rows of tickets v7 (K = 3), under THERMOSTAT_STATE_DIR."""
    monkeypatch.setenv("THERMOSTAT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("THERMOSTAT_PREDICTION_LOG_URL", raising=False)
    (tmp_path / "state").mkdir()
    log = PredictionLog(f"sqlite:///{tmp_path / 'state' / 'predictions.db'}")
    log.create()
    log_predictions(log, "tickets", "7", 1.3, np.random.default_rng(0).normal(size=(20, K)),
                    [f"t-{i}" for i in range(20)])
    return log


def _labels(log: PredictionLog) -> dict[str, int]:
    with log.engine.connect() as conn:
        rows = conn.execute(log.table.select().where(log.table.c.label.is_not(None))).all()
    return {row.request_id: row.label for row in rows}


def test_one_bad_label_in_a_file_of_thousands_costs_only_itself(state: PredictionLog, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A labelling tool's CSV a day later: one label out of range used to refuse the whole file."""
    state.attach_labels(["t-19"], [0])  # labelled earlier: the file's other label conflicts
    lines = ["request_id,label,annotator"] + [f"t-{i},{i % K},ann" for i in range(20)]
    lines[5] = "t-4,9,ann"             # out of range: K = 3
    lines += ["t-99,1,ann", "t-0,0,ann", "t-2,x,ann", "t-3"]  # unknown, the same again, not a number, short
    (tmp_path / "labels.csv").write_text("\n".join(lines) + "\n")
    assert main(["labels", "attach", str(tmp_path / "labels.csv")]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == (f"{tmp_path / 'labels.csv'}: 24 labels: 18 attached, 1 unchanged, 1 conflicting, "
                                   "1 unknown, 3 refused")
    assert "  row 4 (request id 't-4'): label 9 is outside [0, 3) of model 'tickets' version '7'" in out
    assert "  row 22 (request id 't-2'): the label must be an integer class index; got str 'x'" in out
    assert "  row 23 (request id 't-3'): the row has 1 field(s); the header has 3" in out
    assert "'t-19': label 1 conflicts with 0 (labels are write-once: not changed)" in out and "'t-99'" in out
    assert err.startswith("thermostat labels attach: warning: 5 of 24 labels are not in the log as the file says")
    assert len(_labels(state)) == 19 and "t-4" not in _labels(state) and _labels(state)["t-19"] == 0

    # The same file again: nothing new; JSON as the ingestion service answers.
    assert main(["labels", "attach", str(tmp_path / "labels.csv"), "--json"]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert (answer["received"], answer["attached"], answer["unchanged"]) == (24, 0, 19)
    assert [r["index"] for r in answer["refused"]] == [4, 22, 23] and answer["unknown"] == ["t-99"]


def test_labels_from_parquet_and_json_lines(state: PredictionLog, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    pd.DataFrame({"id": ["t-0", "t-1"], "label": [1, 2]}).to_parquet(tmp_path / "labels.parquet")
    assert main(["labels", "attach", str(tmp_path / "labels.parquet")]) == 0
    (tmp_path / "labels.jsonl").write_text('{"request_id": "t-2", "label": 0}\n\n[1, 2]\n{"request_id": "t-3", '
                                           '"label": 5}\nnot json\n')
    assert main(["labels", "attach", str(tmp_path / "labels.jsonl"), "--json"]) == 1
    answer = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert answer["attached"] == 1
    assert [(r["index"], r["reason"].split(";")[0].split(":")[0]) for r in answer["refused"]] == [
        (1, "a label line must be an object with request_id and label"), (2, "label 5 is outside [0, 3) of model "
                                                                        "'tickets' version '7'"),
        (3, "the line is not JSON")]
    assert _labels(state) == {"t-0": 1, "t-1": 2, "t-2": 0}


def test_atomic_labels_are_all_or_nothing(state: PredictionLog, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "labels.csv").write_text("id,label\nt-0,1\nt-1,7\n")
    assert main(["labels", "attach", str(tmp_path / "labels.csv"), "--atomic"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "row 1 (request id 't-1'): label 7 is outside [0, 3)" in err and "nothing" in err
    assert _labels(state) == {}


@pytest.mark.parametrize(("name", "content", "message"), [
    ("labels.txt", "id,label\n", "unknown extension '.txt'"),
    ("labels.csv", "", "the file is empty"),
    ("labels.csv", "request,lab\nx,1\n", "no request_id (or id) column among request, lab"),
    ("labels.csv", "id,lab\nx,1\n", "no label column among id, lab"),
    ("labels.csv", 'id,label\n"t-0,1\n', None),  # a quote never closed: read as one field, refused alone
])
def test_a_file_that_cannot_be_labels_writes_nothing(state: PredictionLog, tmp_path: Path, name: str, content: str,
                                                      message: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / name).write_text(content)
    status = main(["labels", "attach", str(tmp_path / name)])
    out, err = capsys.readouterr()
    if message is None:
        assert status == 1 and "1 refused" in out
    else:
        assert (status, out) == (2, "") and message in err, err
    assert _labels(state) == {}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_before_it_is_opened(state: PredictionLog, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(tmp_path / "labels.csv")
    assert main(["labels", "attach", str(tmp_path / "labels.csv")]) == 2  # returns: nothing blocked in open()
    assert "is a FIFO (named pipe), not a regular file" in capsys.readouterr().err


def test_labels_for_a_log_that_does_not_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("THERMOSTAT_STATE_DIR", str(tmp_path / "nowhere"))
    monkeypatch.delenv("THERMOSTAT_PREDICTION_LOG_URL", raising=False)
    (tmp_path / "labels.csv").write_text("id,label\nt-0,1\n")
    assert main(["labels", "attach", str(tmp_path / "labels.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "nowhere").exists()


def test_log_a_csv_of_predictions_then_again(state: PredictionLog, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    text = ("request_id,logit_0,logit_1,logit_2,group,served_at\n"
            "p-0,1.5,0.2,-1,web,2026-03-01T12:00:00Z\n"
            "p-1,1.5,oops,-1,web,2026-03-01T12:00:00Z\n"
            "p-2,0,0,3,,2026-03-01T12:00:01+02:00\n"
            "t-0,0,0,0,web,2026-03-01T12:00:00Z\n")      # a request id the log holds for another prediction
    (tmp_path / "served.csv").write_text(text)
    args = ["log", str(tmp_path / "served.csv"), "--model", "tickets", "--version", "7", "--temperature", "1.3"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{tmp_path / 'served.csv'}: 4 rows: 2 written, 0 already logged (unchanged), 2 refused")
    assert "row 1 (request id 'p-1'): logit_1 is 'oops', not a number" in out
    assert "row 3 (request id 't-0'): request id is already in the log for another prediction" in out
    assert main([*args, "--json"]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert (answer["written"], answer["unchanged"], len(answer["refused"])) == (0, 2, 2)
    assert state.count_rows() == 22


def test_log_json_lines_of_several_versions_and_an_export(state: PredictionLog, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    lines = [{"model_name": "a", "model_version": "1", "temperature": 2.0, "request_id": "a-1", "logits": [1, 2]},
             {"model_name": "b", "model_version": "1", "temperature": 0.5, "request_id": "b-1",
              "logits": [1, 2, 3, 4]}]
    (tmp_path / "served.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert main(["log", str(tmp_path / "served.jsonl")]) == 0
    assert state.logged_versions() == {("tickets", "7"): 3, ("a", "1"): 2, ("b", "1"): 4}
    frame = pd.DataFrame({"id": ["e-0", "e-1"], "logit_0": np.float32([1, 2]), "logit_1": np.float32([0, 1]),
                          "logit_2": np.float32([2, 2]), "temperature": [1.3, 1.3], "label": [0, 2],
                          "served_at": pd.to_datetime(["2026-03-01T12:00:00Z"] * 2, utc=True)})
    frame.to_parquet(tmp_path / "part-0.parquet")
    assert main(["log", str(tmp_path / "part-0.parquet"), "--model", "tickets", "--version", "7"]) == 0
    assert "2 written" in capsys.readouterr().out and _labels(state) == {"e-0": 0, "e-1": 2}


def test_atomic_log_and_refused_files(state: PredictionLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "served.csv").write_text("request_id,logit_0,logit_1,logit_2\nq-0,1,2,3\nq-1,1,2\n")
    args = ["--model", "tickets", "--version", "7", "--temperature", "1.3"]
    assert main(["log", str(tmp_path / "served.csv"), *args, "--atomic"]) == 2
    assert "row 1 (request id" not in capsys.readouterr().out and state.count_rows() == 20
    (tmp_path / "gaps.csv").write_text("request_id,logit_0,logit_2\nq-0,1,2\n")
    assert main(["log", str(tmp_path / "gaps.csv"), *args]) == 2
    assert "logit_0 ... logit_{K-1} without gaps" in capsys.readouterr().err
    (tmp_path / "wide.csv").write_text("id," + ",".join(f"logit_{k}" for k in range(5)) + "\n")
    from monitoring import read_prediction_file
    from monitoring import IngestFileError

    with pytest.raises(IngestFileError, match="5 logit columns; at most 4 classes are read"):
        read_prediction_file(tmp_path / "wide.csv", max_classes=4)


MALFORMED = Path(__file__).resolve().parents[2] / "data" / "malformed"


def test_a_parquet_bomb_is_refused_from_its_footer() -> None:
    """A small file whose footer declares millions of rows is refused before a row is read."""
    from monitoring import IngestFileError

    with pytest.raises(IngestFileError, match="compression bomb"):
        next(read_label_file(MALFORMED / "parquet_bomb.parquet"))


def test_a_header_of_200000_names_is_read_in_linear_time() -> None:
    """200,004 columns, all but four named ``x``: the readers look for a repeated column they would
    read in one pass (counting each name with ``list.count`` took 11 s per reader on a quiet
    machine, the pair 48 s in a loaded run); each now reads the file (its one row refused: too few
    fields) in milliseconds."""
    import time

    from monitoring import read_prediction_file

    path = MALFORMED / "csv_header_too_many_columns.csv"
    for read in (read_label_file, read_prediction_file):
        started = time.perf_counter()
        chunks = list(read(path))
        assert time.perf_counter() - started < 5, read.__name__
        assert [(len(chunk.positions), len(chunk.refused)) for chunk in chunks] == [(0, 1)], read.__name__
        assert chunks[0].refused[0].reason.startswith("the row has 4 field(s); the header has 200004")


@pytest.mark.parametrize("path", sorted(p for p in MALFORMED.iterdir() if p.suffix in (".csv", ".parquet")),
                         ids=lambda p: p.name)
def test_hostile_files_are_read_row_by_row_or_refused_whole(path: Path) -> None:
    """The scored-set readers' corpus of hostile files (truncated, bad UTF-8, NUL bytes, bombs, ...):
    each reads as rows (some refused) or is refused whole with IngestFileError, never anything else."""
    from monitoring import IngestFileError, read_prediction_file

    for read in (read_label_file, read_prediction_file):
        try:
            for chunk in read(path):
                assert len(chunk.positions) + len(chunk.refused) >= 0
        except IngestFileError as error:
            assert str(error).startswith(str(path))
