"""The real CIFAR logits the simulation studies run on: ``tests/data/real-logits`` (origins,
licences and reference figures in its README), one place for the folder, the files and the
loading."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["DATA", "FILES", "file_index", "load"]

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "real-logits"
#: The six files of the studies; the issue's table names the first four.
FILES = (
    "cifar100_wrn16-4_netcal",
    "cifar100_densenet-bc-100_netcal",
    "cifar10_vgg16_verified_calibration",
    "cifar10_wrn16-4_netcal",
    "cifar10_lenet5_netcal",
    "cifar100_lenet5_netcal",
)


def load(name: str) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """The logits and labels of ``DATA/<name>.npz``."""
    data = np.load(DATA / f"{name}.npz")
    return data["logits"], data["labels"]


def file_index(name: str) -> int:
    """A file's place in :data:`FILES` (another file: after them), a part of the studies' seeds."""
    return FILES.index(name) if name in FILES else len(FILES)
