"""Holdout features: the ids, features and labels a checkpoint is scored on.

A features file is an ``.npz`` with three arrays: ``ids`` (unique strings), ``features``
(n_samples × n_features, what the checkpoint's ``predict`` takes) and ``labels`` (ints).
Training ids are a text file with one id per line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["HoldoutFeatures", "read_features", "read_ids", "write_features", "write_ids"]


@dataclass(frozen=True, slots=True, eq=False)
class HoldoutFeatures:
    ids: NDArray[np.str_]
    features: NDArray[Any]
    labels: NDArray[np.intp]
    source: str


def read_features(path: str | Path) -> HoldoutFeatures:
    file = Path(path)
    if file.suffix != ".npz":
        raise ValueError(f"{file}: a features file must be .npz with arrays ids, features, labels")
    with np.load(file, allow_pickle=False) as data:
        missing = {"ids", "features", "labels"} - set(data.files)
        if missing:
            raise ValueError(f"{file}: missing array(s) {sorted(missing)}; expected ids, features, labels")
        ids, features, labels = data["ids"].astype(str), data["features"], data["labels"]
    if not (len(ids) == len(features) == len(labels)):
        raise ValueError(
            f"{file}: ids ({len(ids)}), features ({len(features)}) and labels ({len(labels)}) must have one row each"
        )
    return HoldoutFeatures(ids=ids, features=features, labels=labels.astype(np.intp), source=str(file))


def write_features(path: str | Path, *, ids: ArrayLike, features: ArrayLike, labels: ArrayLike) -> Path:
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    np.savez(file, ids=np.asarray(ids).astype(str), features=np.asarray(features), labels=np.asarray(labels))
    return file


def read_ids(path: str | Path) -> NDArray[np.str_]:
    lines = Path(path).read_text().splitlines()
    return np.array([line.strip() for line in lines if line.strip()], dtype=str)


def write_ids(path: str | Path, ids: ArrayLike) -> Path:
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("\n".join(np.asarray(ids).astype(str).tolist()) + "\n")
    return file
