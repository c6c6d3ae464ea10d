"""Every reader over malformed files, with a memory cap and a time limit per file (issue 19).

The corpus in tests/data/malformed/ (written by its make_corpus.py: compression bombs, zip
members and Parquet columns the readers once crashed on, quadratic headers, seeded random
mutations of valid files), plus what a repository cannot hold (FIFOs, links to devices), made
here. Each file goes through :func:`calibration.read_scored_set`, each Parquet file also
through the partitioned reader (open, fit, evaluate), and a few through the command line —
in child processes capped at 2 GiB of address space, with a time limit per file. The outcome
must be a refusal naming the file (exit 2 on the command line) or the right rows: never a
traceback, a hang or an abort.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.limited_reads import CORPUS, MEMORY_CAP, Outcome, read_limited
from tests.support.cli import run

EXPECTED: dict[str, dict[str, object]] = json.loads((CORPUS / "expected.json").read_text())
THERMOSTAT = Path(sys.executable).with_name("thermostat")


def _special_files(folder: Path) -> dict[str, str]:
    """Files a repository cannot keep, each with what its refusal must say."""
    special = {}
    for suffix in (".npz", ".csv", ".parquet"):
        fifo = folder / f"fifo{suffix}"
        os.mkfifo(fifo)
        special[str(fifo)] = "is a FIFO (named pipe), not a regular file"
    for suffix, device in ((".csv", "/dev/zero"), (".npz", "/dev/urandom"), (".parquet", "/dev/zero")):
        link = folder / f"device{suffix}"
        link.symlink_to(device)
        special[str(link)] = f"is a character device (a link to {device}), not a regular file"
    return special


def _problems(outcomes: dict[str, Outcome], expected: dict[str, dict[str, object]]) -> list[str]:
    problems = []
    for path, outcome in sorted(outcomes.items()):
        wanted = expected[Path(path).name]
        if outcome.kind in ("raised", "hung", "died"):
            problems.append(f"{Path(path).name}: {outcome.kind}: {outcome.message[:500]}")
        elif outcome.kind == "refused" and not outcome.message.startswith(f"{path}: "):
            problems.append(f"{Path(path).name}: refused without naming the file first: {outcome.message[:300]}")
        elif wanted["outcome"] == "refused" and (outcome.kind != "refused"
                                                  or str(wanted["fragment"]) not in outcome.message):
            problems.append(f"{Path(path).name}: expected a refusal saying {wanted['fragment']!r}; got {outcome}")
        elif wanted["outcome"] == "read" and (
            outcome.kind != "read"
            or (outcome.n_samples, outcome.n_classes) != (wanted["n_samples"], wanted["n_classes"])
            or (outcome.digest and outcome.digest != wanted["digest"])
        ):
            problems.append(f"{Path(path).name}: expected {wanted['n_samples']} rows read exactly; got {outcome}")
    return problems


def test_every_corpus_file_is_refused_naming_it_or_read_exactly() -> None:
    files = sorted(str(CORPUS / name) for name in EXPECTED)
    assert len(files) > 150 and all(Path(file).is_file() for file in files), "run make_corpus.py"
    problems = _problems(read_limited(files), EXPECTED)
    assert not problems, "\n".join(problems)


def test_every_parquet_corpus_file_through_the_partitioned_reader() -> None:
    files = sorted(str(CORPUS / name) for name in EXPECTED if name.endswith(".parquet"))
    # The partitioned reader returns no rows to compare: a read must have the expected counts.
    expected = {name: {**wanted, "digest": ""} for name, wanted in EXPECTED.items()}
    problems = _problems(read_limited(files, partitioned=True), expected)
    assert not problems, "\n".join(problems)


def test_every_corpus_file_through_the_served_rows_reader() -> None:
    """``read_logits`` (``diagnose --served``: labels optional) keeps every other rule: a refusal
    naming the file, or the rows of a file the labelled reader reads; never a crash."""
    files = sorted(str(CORPUS / name) for name in EXPECTED)
    problems = []
    for path, outcome in sorted(read_limited(files, logits_only=True).items()):
        wanted = EXPECTED[Path(path).name]
        if outcome.kind in ("raised", "hung", "died"):
            problems.append(f"{Path(path).name}: {outcome.kind}: {outcome.message[:500]}")
        elif outcome.kind == "refused" and not outcome.message.startswith(f"{path}: "):
            problems.append(f"{Path(path).name}: refused without naming the file first: {outcome.message[:300]}")
        elif wanted["outcome"] == "read" and (outcome.kind, outcome.n_samples, outcome.n_classes) != (
                "read", wanted["n_samples"], wanted["n_classes"]):
            problems.append(f"{Path(path).name}: expected {wanted['n_samples']} rows read; got {outcome}")
    assert not problems, "\n".join(problems)


def test_fifos_and_links_to_devices_are_refused_without_opening_them(tmp_path: Path) -> None:
    special = _special_files(tmp_path)
    expected = {Path(path).name: {"outcome": "refused", "fragment": text} for path, text in special.items()}
    parquet = [path for path in special if path.endswith(".parquet")]
    problems = [*_problems(read_limited(list(special), time_limit=20), expected),
                *_problems(read_limited(parquet, partitioned=True, time_limit=20), expected)]
    assert not problems, "\n".join(problems)
    folder = tmp_path / "set"
    folder.mkdir()
    os.mkfifo(folder / "part-0.parquet")
    [outcome] = read_limited([str(folder)], partitioned=True, time_limit=20).values()
    assert outcome.kind == "refused" and str(folder / "part-0.parquet") in outcome.message, outcome


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(THERMOSTAT), *argv], capture_output=True, text=True, timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP)),
    )


@pytest.mark.parametrize(
    ("command", "name"),
    [("fit", "npz_zip_bomb.npz"), ("evaluate", "npz_encrypted.npz"), ("evaluate", "npz_method_99.npz"),
     ("fit", "parquet_bomb.parquet"), ("evaluate", "parquet_duplicated_label.parquet"),
     ("evaluate", "csv_long_id.csv"), ("evaluate", "device.csv"), ("fit", "fifo.npz"),
     ("diagnose", "npz_zip_bomb.npz"), ("diagnose", "parquet_duplicated_label.parquet"),
     ("diagnose --served", "parquet_bomb.parquet"), ("diagnose --served", "csv_long_id.csv"),
     ("diagnose --served", "fifo.npz")],
)
def test_the_command_line_exits_2_naming_the_file(command: str, name: str, tmp_path: Path) -> None:
    special = _special_files(tmp_path)
    path = next((p for p in special if Path(p).name == name), str(CORPUS / name))
    valid = str(CORPUS / "npz_valid.npz")
    served = ("diagnose", valid, valid, "--served", path, "--temperature", "1", "--min-window", "1")
    done = _cli(*{"diagnose": (command, valid, path, "--temperature", "1"),
                  "diagnose --served": served}.get(command, (command, path)))
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"thermostat: error: {path}: "), done.stderr


def test_a_csv_header_of_millions_of_names_is_refused_by_its_commas_unparsed(tmp_path: Path) -> None:
    # 16 MiB of header (the most characters read), 8.4 million names: parsed, they took 20 s of CPU
    # and 1.8 GB before the table was refused as empty. Counted by its commas, it is refused at once,
    # within a worker capped at 1 GiB of address space.
    wide = tmp_path / "wide.csv"
    wide.write_bytes(b"a," * (8 * 2**20 - 1) + b"a\n")
    [outcome] = read_limited([str(wide)], memory_cap=2**30).values()
    assert outcome.kind == "refused", outcome
    assert outcome.message.startswith(f"{wide}: the header line, counted by its commas before it is parsed, has "
                                      "8,388,608 columns; at most 200,003 are read"), outcome.message
    done = _cli("evaluate", str(wide))
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert "(pass --max-classes to raise the limit" in done.stderr, done.stderr


def _priors_files(folder: Path) -> dict[str, str]:
    """``--priors`` files that crashed or were refused without naming the flag, each with what its
    refusal must say (the corpus's valid sets have 3 classes)."""
    cases = {}
    for name, text, message in (
        ("nested.json", "[" * 2_000 + "]" * 2_000, "its JSON is nested too deeply to be read"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, "is 200,000 bytes, more than a list of 3 numbers takes"),
        ("overflow.json", "[1e308, 1e308, 1e308]", "the priors sum to inf"),
        ("huge_int.json", f"[1, 1, {10**400}]", "a value is too large for a float"),
        ("large.json", "[1, 1, 1]" + " " * 10_000, "is 10,009 bytes, more than a list of 3 numbers takes"),
        ("underflow.json", "[5e-324, 1e300, 1]", "the prior of class 0, 5e-324, is 0 once normalised"),
    ):
        (folder / name).write_text(text)
        cases[str(folder / name)] = message
    return cases


def test_a_priors_fifo_exits_2_unopened(tmp_path: Path) -> None:
    # It blocked the read until a writer appeared: the command hung.
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    done = _cli("fit", str(CORPUS / "npz_valid.npz"), "--priors", str(fifo))
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.startswith(f"thermostat: error: --priors {fifo}: is a FIFO (named pipe), not a regular file"), \
        done.stderr


def test_a_priors_file_that_nests_overflows_or_swells_exits_2_naming_flag_and_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Nested 100,000 deep it exited 3 (a RecursionError); four priors of 1e308 said "priors[0] is 0.0".
    problems = []
    for path, message in _priors_files(tmp_path).items():
        code, out, err = run(capsys, "fit", CORPUS / "npz_valid.npz", "--priors", path)
        if code != 2 or out or not err.startswith(f"thermostat: error: --priors {path}: ") or message not in err:
            problems.append(f"{Path(path).name}: exit {code}: {err[-600:]}")
    assert not problems, "\n".join(problems)


def test_diagnose_of_more_classes_than_its_limit_exits_2_before_forming_a_k_by_k_matrix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 20,000 classes, 12 rows: the prior statistics were 3.2 GB matrices each (100,000 classes:
    # "Unable to allocate 74.5 GiB"), decomposed in O(K³). Now refused at once, naming the limit and
    # its flag, well inside the 2 GiB cap; drift on the same files is linear in K and runs.
    rng = np.random.default_rng(0)
    k, rows = 20_000, 12
    for name in ("reference", "window"):
        labels = rng.integers(0, k, rows)
        logits = rng.normal(size=(rows, k)).astype(np.float32)
        logits[np.arange(rows), labels] += 5.0
        np.savez(tmp_path / f"{name}.npz", logits=logits, labels=labels)
    files = (str(tmp_path / "reference.npz"), str(tmp_path / "window.npz"), "--temperature", "1", "--min-window", "10")
    done = _cli("diagnose", *files)
    assert done.returncode == 2 and done.stdout == "", done.stderr[-2000:]
    # On a loaded machine the read may take long enough for a progress line first.
    [error] = [line for line in done.stderr.splitlines() if not line.startswith("thermostat: still working")]
    assert error.startswith(f"thermostat: error: {files[0]}: 20,000 classes; diagnose estimates and tests the class "
                            "priors on K x K matrices"), done.stderr
    assert "at most --max-prior-classes 2,000 classes" in error and "Raise --max-prior-classes" in error
    code, out, err = run(capsys, "drift", *files, "--resamples", "100", "--estimator", "binned")
    assert code in (0, 1) and out, err
