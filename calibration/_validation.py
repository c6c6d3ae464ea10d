"""Input validation for the public entry points of :mod:`calibration`.

Validate once, at the public entry point; private helpers trust their inputs.
Every message names the argument, the rule, the offending value and what to do.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._kernels import first_nonfinite_row

__all__ = [
    "check_logits",
    "check_finite_logits",
    "check_labels",
    "check_temperature",
    "check_bounds",
    "check_groups",
    "check_n_bins",
    "check_scheme",
    "check_confidence_level",
    "SCHEMES",
]

SCHEMES = ("equal-width", "equal-mass")


def check_logits(logits: ArrayLike, *, name: str = "logits", check_finite: bool = True) -> NDArray[np.floating[Any]]:
    """Return ``logits`` as a 2-D float array (float32 kept as it is), or raise.

    Integer input is converted to float64. Refuses: not 2-D, no rows, fewer than two
    columns, non-finite values (the first offending row is named).

    ``check_finite=False`` skips the finiteness scan (one read of the whole input) for a
    caller that folds it into its own pass: that caller must call :func:`check_finite_logits`
    (same error) as soon as its pass shows a non-finite value, before it returns or writes
    anything.
    """
    if isinstance(logits, np.ndarray) and logits.dtype.kind == "f":
        array = logits
    else:
        try:
            array = np.asarray(logits)
        except (TypeError, ValueError) as exc:  # ragged nested lists
            raise TypeError(f"{name} must be a numeric array of shape (n_samples, n_classes): {exc}") from exc
        if array.dtype.kind in "biu":
            array = array.astype(np.float64)
        elif array.dtype.kind != "f":
            raise TypeError(
                f"{name} must hold floats; got dtype {array.dtype} (convert it with np.asarray(..., dtype=float))"
            )
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D of shape (n_samples, n_classes); got shape {array.shape}")
    n_samples, n_classes = array.shape
    if n_samples == 0:
        raise ValueError(f"{name} is empty (0 rows); at least one example is required")
    if n_classes < 2:
        raise ValueError(f"{name} has {n_classes} column(s); at least 2 classes are required (K >= 2)")
    if check_finite:
        check_finite_logits(array, name=name)
    return array


def check_finite_logits(array: NDArray[np.floating[Any]], *, name: str = "logits") -> None:
    """Raise unless every value of the 2-D float ``array`` is finite (the first bad row named)."""
    # One parallel read without an N x K temporary (np.isfinite would add 25% of a float32 input).
    row = first_nonfinite_row(array)
    if row >= 0:
        bad = array[row][~np.isfinite(array[row])][0]
        raise ValueError(f"{name} row {row} contains {bad}; every logit must be finite")


def check_labels(labels: ArrayLike, n_samples: int, n_classes: int, *, name: str = "labels") -> NDArray[np.intp]:
    """Return ``labels`` as an int array of length ``n_samples`` with values in [0, n_classes)."""
    array = np.asarray(labels)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D of shape (n_samples,); got shape {array.shape}")
    if array.shape[0] != n_samples:
        raise ValueError(f"{name} has {array.shape[0]} entries but logits have {n_samples} rows; they must match")
    if array.dtype.kind == "f":
        integral = np.isfinite(array) & (array == np.round(array))
        if not integral.all():
            row = int(np.argmin(integral))
            raise ValueError(f"{name} row {row} is {array[row].item()!r}; labels must be integers in [0, {n_classes})")
    elif array.dtype.kind not in "biu":
        raise TypeError(f"{name} must be integers in [0, {n_classes}); got dtype {array.dtype}")
    ints = array.astype(np.intp, copy=False)
    # Two reductions, no temporaries: the row is looked for only when one is out of range.
    if ints.size and (int(ints.min()) < 0 or int(ints.max()) >= n_classes):
        row = int(np.argmin((ints >= 0) & (ints < n_classes)))
        raise ValueError(f"{name} row {row} is {ints[row]}; labels must be integers in [0, {n_classes})")
    return ints


def check_temperature(temperature: float, *, name: str = "temperature") -> float:
    """Return ``temperature`` as a float, or raise unless it is finite and > 0."""
    try:
        value = float(temperature)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a positive number; got {temperature!r}") from exc
    if not np.isfinite(value) or value <= 0.0:
        raise ValueError(f"{name} must be finite and > 0; got {value}")
    return value


def check_bounds(bounds: tuple[float, float]) -> tuple[float, float]:
    """Return ``(lower, upper)`` temperature bounds, or raise unless 0 < lower < upper < inf."""
    try:
        lower, upper = (float(b) for b in bounds)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"bounds must be a pair (lower, upper) of positive numbers; got {bounds!r}") from exc
    if not (np.isfinite(lower) and np.isfinite(upper) and 0.0 < lower < upper):
        raise ValueError(f"bounds must satisfy 0 < lower < upper < inf; got ({lower}, {upper})")
    return lower, upper


def check_groups(groups: ArrayLike, n_samples: int, *, name: str = "groups") -> NDArray[np.str_]:
    """Return ``groups`` as a 1-D array of strings of length ``n_samples``."""
    array = np.asarray(groups)
    if array.ndim != 1 or array.shape[0] != n_samples:
        raise ValueError(f"{name} must be 1-D with {n_samples} entries (one per row); got shape {array.shape}")
    return array.astype(str)


def check_n_bins(n_bins: int) -> int:
    """Return ``n_bins`` as an int >= 1, or raise."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)):
        raise TypeError(f"n_bins must be an integer >= 1; got {n_bins!r}")
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1; got {n_bins}")
    return int(n_bins)


def check_scheme(scheme: str) -> str:
    """Return the binning ``scheme``, or raise unless it is one of :data:`SCHEMES`."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}; got {scheme!r}")
    return scheme


def check_confidence_level(confidence_level: float, *, name: str = "confidence_level") -> float:
    """Return ``confidence_level`` as a float strictly inside (0, 1), or raise."""
    if isinstance(confidence_level, (bool, np.bool_)) or not isinstance(
        confidence_level, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"{name} must be a number in (0, 1), e.g. 0.95; got {confidence_level!r}")
    value = float(confidence_level)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be strictly between 0 and 1 (e.g. 0.95); got {value}")
    return value
