"""Holdout features and training ids: the post-finetune flow's inputs, written and read by one set of rules.

A **features file** is an ``.npz`` with three arrays of one row per example: ``ids`` (unique,
non-empty strings), ``features`` (what the checkpoint's pyfunc ``predict`` takes: numbers or
fixed-width strings, anything but Python objects, which an ``.npz`` holds only as a pickle) and
``labels`` (integers >= 0; that they are below the number of classes is checked once the
checkpoint's output says how many there are). A **training-ids file** is UTF-8 text with one
id per line (blank lines are skipped, surrounding spaces stripped, so an id cannot have them).

A fine-tune job writes both with :func:`write_features` and :func:`write_ids`; the flow reads
them with :func:`read_features` and :func:`read_ids`. Both directions apply the same checks
(``_checked_features``, ``_check_training_id``), so a file the writer accepts is never refused
by the reader, and a bad input is refused when it is written, naming the file, array and row.

A path given to the flow is resolved by :func:`resolve_input_path`: an absolute path as given,
a relative one against the flow's working directory (on a Prefect worker: the checkout the
deployment runs from, not the machine that started the run), and a missing file is refused
with both the path given and the path searched.
"""

from __future__ import annotations

import os
import socket
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "HoldoutFeatures",
    "read_features",
    "read_ids",
    "resolve_input_path",
    "write_features",
    "write_ids",
]

_ARRAYS = ("ids", "features", "labels")

# Builds the refusal of one array: refuse("ids", "row 3: ...") -> ValueError("FILE: array 'ids': row 3: ...").
_Refusal = Callable[[str, str], ValueError]


def _process_umask() -> int:
    """The process's umask, read once at import: os.umask can only be read by setting it, which
    changes it for every thread, so it is not read again while flows run their tasks in threads."""
    try:  # Linux (4.7+) shows it without setting it.
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


# The mode a plain open() gives a new file under the process's umask.
_FILE_MODE = 0o666 & ~_process_umask()


@dataclass(frozen=True, slots=True, eq=False)
class HoldoutFeatures:
    """Checked holdout features: ``ids`` (n,), ``features`` (n, ...), ``labels`` (n,), and the file they came from."""

    ids: NDArray[np.str_]
    features: NDArray[Any]
    labels: NDArray[np.intp]
    source: str


# ----------------------------------------------------------------------------- paths


def resolve_input_path(path: str | os.PathLike[str], *, parameter: str = "path") -> Path:
    """The absolute path of an existing input file, or raise naming what was looked for.

    An absolute ``path`` is taken as given; a relative one is resolved against the current
    working directory, which in a flow run on a Prefect worker is the directory the
    deployment's pull step chose (the checkout it was deployed from), not the directory of
    the job that started the run.

    Parameters
    ----------
    path : str or path-like
        The path as the caller gave it.
    parameter : str, default="path"
        The parameter's name, used in the message (``features_path``, ``training_ids_path``).

    Returns
    -------
    pathlib.Path
        The absolute path (not following symlinks) of a regular file.

    Raises
    ------
    FileNotFoundError
        If nothing is there; the message names ``path``, the absolute path searched, the
        directory a relative path was resolved against, and the machine.
    IsADirectoryError
        If ``path`` is a directory.

    Examples
    --------
    >>> resolve_input_path("/no/such/holdout.npz", parameter="features_path")
    Traceback (most recent call last):
    ...
    FileNotFoundError: features_path '/no/such/holdout.npz' does not exist on host ...; pass an absolute path ...
    """
    given = Path(path).expanduser()
    where = given if given.is_absolute() else Path.cwd() / given
    if where.is_dir():
        raise IsADirectoryError(f"{parameter} '{path}' is a directory ({where}); pass the path of the file itself")
    if where.is_file():
        return where
    host = socket.gethostname()
    if given.is_absolute():
        found = f"does not exist on host {host!r}"
    else:
        found = (f"is a relative path, resolved against the flow's working directory {Path.cwd()} on host "
                 f"{host!r} (on a Prefect worker: the checkout the deployment runs from), and {where} does not exist")
    raise FileNotFoundError(
        f"{parameter} '{path}' {found}; pass an absolute path to a file that this machine can read "
        f"(on a worker: a shared or mounted folder)"
    )


# -------------------------------------------------------------------------- features


def write_features(path: str | os.PathLike[str], *, ids: ArrayLike, features: ArrayLike, labels: ArrayLike) -> Path:
    """Write a post-finetune features file (``.npz``), refusing what the flow would refuse.

    Parameters
    ----------
    path : str or path-like
        Where to write; must end in ``.npz``. Folders are created; the file is replaced
        atomically (written beside it, then renamed), so a reader never sees half of it.
    ids : array-like of shape (n_samples,)
        Unique, non-empty example ids (converted to str); the qualification check compares
        them with the training ids.
    features : array-like of shape (n_samples, ...)
        The checkpoint's input, one row per example (numbers or fixed-width strings).
    labels : array-like of shape (n_samples,)
        True classes, integers >= 0 (integral floats are accepted and stored as integers).

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    ValueError
        Naming the file, the array and the first offending row.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = write_features(f"{folder}/holdout.npz", ids=["a", "b"], features=[[0.5, 1.0], [2.0, 0.0]], labels=[1, 0])
    >>> read_features(path).labels.tolist()
    [1, 0]
    >>> write_features(f"{folder}/bad.npz", ids=["a", "a"], features=[[0.5], [2.0]], labels=[1, 0])
    Traceback (most recent call last):
    ...
    ValueError: .../bad.npz: array 'ids': id 'a' appears in row 0 and row 1; ids must be unique (drop or rename the duplicates)
    """
    file = Path(path)
    _check_npz_name(file)
    checked = _checked_features(np.asarray(ids), np.asarray(features), np.asarray(labels), source=str(file))
    with _replaced(file) as handle:
        np.savez(handle, ids=checked.ids, features=checked.features, labels=checked.labels)
    return file


def read_features(path: str | os.PathLike[str], *, parameter: str = "features_path") -> HoldoutFeatures:
    """Read and check a features file written by :func:`write_features` (or by anything
    else that follows its rules).

    Parameters
    ----------
    path : str or path-like
        The ``.npz``; a relative path is resolved by :func:`resolve_input_path`.
    parameter : str, default="features_path"
        The parameter's name in the messages.

    Raises
    ------
    FileNotFoundError
        If the file is not there (see :func:`resolve_input_path`).
    ValueError
        If it is not an ``.npz`` with the three arrays, or an array breaks a rule (the
        message names the file, the array and the row).
    """
    file = resolve_input_path(path, parameter=parameter)
    _check_npz_name(file)
    try:
        if not zipfile.is_zipfile(file):  # np.load would take it for a pickle and say so
            raise zipfile.BadZipFile("not a zip archive")
        with np.load(file, allow_pickle=False) as data:
            missing = [name for name in _ARRAYS if name not in data.files]
            if missing:
                raise ValueError(f"{file}: missing array(s) {missing}; a features file holds arrays "
                                 f"{list(_ARRAYS)} (flows.holdout.write_features writes one)")
            arrays = {}
            for name in _ARRAYS:
                try:
                    arrays[name] = data[name]
                except ValueError as exc:  # an object array: numpy refuses to unpickle it
                    raise ValueError(f"{file}: array {name!r} holds Python objects ({exc}); store numbers or "
                                     f"strings (flows.holdout.write_features refuses objects)") from exc
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise ValueError(f"{file}: not a readable .npz archive ({exc}); write it with "
                         f"flows.holdout.write_features") from exc
    return _checked_features(arrays["ids"], arrays["features"], arrays["labels"], source=str(file))


def _check_npz_name(file: Path) -> None:
    if file.suffix != ".npz":
        raise ValueError(f"{file}: a features file must be .npz with arrays {', '.join(_ARRAYS)}")


def _checked_features(
    ids: NDArray[Any], features: NDArray[Any], labels: NDArray[Any], *, source: str
) -> HoldoutFeatures:
    """Every rule of a features file, in one place: the writer and the reader both call it."""
    def refuse(name: str, message: str) -> ValueError:
        return ValueError(f"{source}: array {name!r}: {message}")

    for name, array in (("ids", ids), ("labels", labels)):
        if array.ndim != 1:
            raise refuse(name, f"must be 1-D, one entry per example; got shape {array.shape}")
    if features.ndim < 1:
        raise refuse("features", "must have one row per example; got a scalar")
    n = len(ids)
    if not len(features) == len(labels) == n:
        raise ValueError(f"{source}: ids ({n}), features ({len(features)}) and labels ({len(labels)}) must have "
                         "one row each")
    if n == 0:
        raise ValueError(f"{source}: no examples (0 rows); the holdout needs labelled examples")
    if features.dtype.kind == "O":
        raise refuse("features", "holds Python objects, which an .npz stores only as a pickle (refused when read); "
                                 "pass numbers or fixed-width strings, e.g. np.asarray(texts, dtype=str)")
    return HoldoutFeatures(ids=_checked_ids(ids, refuse), features=features, labels=_checked_labels(labels, refuse),
                           source=source)


def _checked_ids(ids: NDArray[Any], refuse: _Refusal) -> NDArray[np.str_]:
    if ids.dtype.kind not in "USOiu":
        raise refuse("ids", f"must be strings (or integers, stored as strings); got dtype {ids.dtype}")
    # Objects (a pandas column of strings) may hide None or NaN, which str() would turn into ids.
    missing = np.asarray(pd.isna(ids), dtype=bool) if ids.dtype.kind == "O" else np.zeros(len(ids), dtype=bool)
    if missing.any():
        raise refuse("ids", f"row {int(np.argmax(missing))}: the id is missing; every example needs a unique, "
                            "non-empty id")
    try:
        strings = np.char.decode(ids, "utf-8") if ids.dtype.kind == "S" else ids.astype(str)
    except UnicodeDecodeError as exc:
        raise refuse("ids", f"is not UTF-8 text ({exc})") from exc
    empty = strings == ""
    if empty.any():
        raise refuse("ids", f"row {int(np.argmax(empty))}: the id is empty; every example needs a unique, "
                            "non-empty id")
    order = np.argsort(strings, kind="stable")
    repeated = strings[order][1:] == strings[order][:-1]
    if repeated.any():
        second = int(order[1:][repeated].min())
        first = int(np.flatnonzero(strings == strings[second])[0])
        raise refuse("ids", f"id {str(strings[second])!r} appears in row {first} and row {second}; ids must be "
                            "unique (drop or rename the duplicates)")
    return strings


def _checked_labels(labels: NDArray[Any], refuse: _Refusal) -> NDArray[np.intp]:
    rule = "labels must be integers >= 0 (class indices)"
    if labels.dtype.kind == "f":
        integral = np.isfinite(labels) & (labels == np.round(labels))
        if not integral.all():
            row = int(np.argmin(integral))
            raise refuse("labels", f"row {row} is {labels[row].item()!r}; {rule}")
    elif labels.dtype.kind not in "iu":
        raise refuse("labels", f"has dtype {labels.dtype}; {rule}")
    ints = labels.astype(np.intp)
    if (ints < 0).any():
        row = int(np.argmax(ints < 0))
        raise refuse("labels", f"row {row} is {ints[row]}; {rule}")
    return ints


# ------------------------------------------------------------------------ training ids


def write_ids(path: str | os.PathLike[str], ids: ArrayLike) -> Path:
    """Write training ids, one per line (UTF-8), refusing ids that would read back differently.

    Parameters
    ----------
    path : str or path-like
        The text file to write (folders are created; replaced atomically).
    ids : array-like of shape (n_ids,)
        The ids of the examples the checkpoint was trained on (converted to str), in the
        same form as the holdout's ``ids``: the qualification check refuses a holdout that
        shares any of them.

    Returns
    -------
    pathlib.Path
        The text file written, which :func:`read_ids` reads back as the same ids.

    Raises
    ------
    ValueError
        For an id that is empty, has surrounding spaces or holds a line break (naming the row).

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> read_ids(write_ids(f"{folder}/train_ids.txt", ["digit-0001", "digit-0007"])).tolist()
    ['digit-0001', 'digit-0007']
    >>> write_ids(f"{folder}/bad.txt", ["ok", "two\\nlines"])
    Traceback (most recent call last):
    ...
    ValueError: .../bad.txt: ids row 1 ('two\\nlines'): an id must be one line of text without a line break
    """
    file = Path(path)
    array = np.asarray(ids)
    if array.ndim != 1:
        raise ValueError(f"{file}: ids must be 1-D, one id per line; got shape {array.shape}")
    strings = array.astype(str).tolist()
    for row, text in enumerate(strings):
        _check_training_id(text, f"{file}: ids row {row}")
    with _replaced(file) as handle:
        handle.write("".join(f"{text}\n" for text in strings).encode("utf-8"))
    return file


def read_ids(path: str | os.PathLike[str], *, parameter: str = "training_ids_path") -> NDArray[np.str_]:
    """Read training ids, one per line (blank lines skipped, surrounding spaces stripped).

    A relative ``path`` is resolved by :func:`resolve_input_path` (``parameter`` names it in
    the message).

    Raises
    ------
    FileNotFoundError
        If the file is not there.
    ValueError
        If it is not UTF-8 text.
    """
    file = resolve_input_path(path, parameter=parameter)
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{file}: not UTF-8 text ({exc}); a training-ids file has one id per line") from exc
    # The writer's rule, read the other way: whatever a line holds, stripped, is one id.
    return np.array([line.strip() for line in text.splitlines() if line.strip()], dtype=str)


def _check_training_id(text: str, where: str) -> None:
    if not text:
        raise ValueError(f"{where}: the id is empty; every id must be non-empty")
    if len(text.splitlines()) != 1 or text.endswith(("\n", "\r")):
        raise ValueError(f"{where} ({text!r}): an id must be one line of text without a line break")
    if text != text.strip():
        raise ValueError(f"{where} ({text!r}): an id must not start or end with spaces (they are stripped when read)")


@contextmanager
def _replaced(file: Path) -> Iterator[IO[bytes]]:
    """A binary handle on a temporary file beside ``file``, renamed over it on success."""
    file.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{file.name}.", suffix=".tmp", dir=file.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
        # mkstemp makes the file private (0600); give it the mode a plain open() would, since
        # the flow that reads it often runs as another user (a worker's service account).
        os.chmod(temporary, _FILE_MODE)
        os.replace(temporary, file)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
