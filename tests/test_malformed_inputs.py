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

import pytest

from tests.limited_reads import CORPUS, MEMORY_CAP, Outcome, read_limited

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
