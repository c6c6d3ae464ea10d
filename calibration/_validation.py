"""Input validation for the public entry points of :mod:`calibration`.

Validate once, at the public entry point; private helpers trust their inputs.
Every message names the argument, the rule, the offending value and what to do.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._kernels import MAX_LOGIT_SPREAD, first_refused_row

__all__ = [
    "check_logits",
    "check_finite_logits",
    "check_labels",
    "check_temperature",
    "check_bounds",
    "check_groups",
    "check_count",
    "check_n_bins",
    "check_scheme",
    "check_confidence_level",
    "logit_spread_refusal",
    "SCHEMES",
    "MAX_LOGIT_SPREAD",
    "TEMPERATURE_LIMITS",
    "text_array",
]

SCHEMES = ("equal-width", "equal-mass")
# Upper limits that stop a typo from allocating gigabytes before anything is computed: a
# reliability table of more than 100,000 bins, or more than 1,000,000 resamples, has no use.
MAX_BINS = 100_000
MAX_RESAMPLES = 1_000_000
#: The temperatures anything is computed at (T, and the search bounds of a fit): ten orders
#: of magnitude beyond any T in use (fits search [0.05, 20]), near enough to 1 that 1/T is a
#: normal float, a logit spread of up to :data:`MAX_LOGIT_SPREAD` divided by T stays finite,
#: and the fit's steps in 1/T cannot overflow. A denormal T (1e-320) has no finite 1/T.
TEMPERATURE_LIMITS = (1e-10, 1e10)


def check_logits(logits: ArrayLike, *, name: str = "logits", check_finite: bool = True) -> NDArray[np.floating[Any]]:
    """Return ``logits`` as a 2-D float array (float32 kept as it is), or raise.

    Integer input is converted to float64. Refuses: not 2-D, no rows, fewer than two
    columns, non-finite values, a row whose logits span more than :data:`MAX_LOGIT_SPREAD`
    (max − min; the first offending row is named).

    ``check_finite=False`` skips the finiteness and spread scan (one read of the whole input)
    for a caller that folds it into its own pass: that caller must call :func:`check_finite_logits`
    (same error) as soon as its pass shows a non-finite value, before it returns or writes
    anything.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes)
        The logits to check.
    name : str, default="logits"
        The argument's name in the messages.
    check_finite : bool, default=True
        Also scan every value (finite, and each row's spread within the limit).

    Returns
    -------
    array of shape (n_samples, n_classes)
        The same array when it is already floating point, else a float64 copy.

    Raises
    ------
    ValueError
        If a rule above is broken (the message names the row and the rule).
    TypeError
        If the values are not numeric or the rows are ragged.

    Examples
    --------
    >>> check_logits([[1, 0], [0, 2]]).dtype
    dtype('float64')
    >>> check_logits([[0.0, float("nan")]])
    Traceback (most recent call last):
    ...
    ValueError: logits row 0 contains nan; every logit must be finite
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
    """Raise unless every value of the 2-D float ``array`` is finite and every row spans at
    most :data:`MAX_LOGIT_SPREAD` (the first bad row named)."""
    # One parallel read without an N x K temporary (np.isfinite would add 25% of a float32 input).
    row = first_refused_row(array, MAX_LOGIT_SPREAD)
    if row < 0:
        return
    values = array[row]
    if not np.isfinite(values).all():
        bad = values[~np.isfinite(values)][0]
        raise ValueError(f"{name} row {row} contains {bad}; every logit must be finite")
    raise ValueError(f"{name} row {row}: {logit_spread_refusal(values)}")


def logit_spread_refusal(row: NDArray[np.floating[Any]]) -> str:
    """The spread rule's wording for a finite ``row`` that breaks it (the caller names the row).

    >>> logit_spread_refusal(np.array([1.7e308, -1.7e308]))
    'its logits span more than float64 holds (max - min = 1.7e+308 - -1.7e+308 overflows); the logits within a row must span at most 1e+100 (max - min), so that the NLL and its sums stay finite in float64 (fix, rescale or drop the row)'
    """
    top, bottom = float(np.max(row)), float(np.min(row))
    spread = top - bottom
    shown = (
        repr(spread)  # every digit: a spread just above the limit must not print as the limit
        if math.isfinite(spread)
        else f"more than float64 holds (max - min = {top:.6g} - {bottom:.6g} overflows)"
    )
    return (
        f"its logits span {shown}; the logits within a row must span at most {MAX_LOGIT_SPREAD:g} (max - min), "
        "so that the NLL and its sums stay finite in float64 (fix, rescale or drop the row)"
    )


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
    """Return ``temperature`` as a float, or raise unless it is finite and > 0.

    Parameters
    ----------
    temperature : float
        T, by which the logits are divided before the softmax.
    name : str, default="temperature"
        The argument's name in the messages.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If T is not finite or not > 0, or lies outside :data:`TEMPERATURE_LIMITS`
        ([1e-10, 1e10]: a denormal T such as 1e-320 has no finite 1/T).
    TypeError
        If T is not a number.

    Examples
    --------
    >>> check_temperature(2)
    2.0
    >>> check_temperature(0.0)
    Traceback (most recent call last):
    ...
    ValueError: temperature must be finite and > 0; got 0.0
    >>> check_temperature(1e-320)
    Traceback (most recent call last):
    ...
    ValueError: temperature must be between 1e-10 and 1e+10 (a normal float whose inverse is one too); got 1e-320
    """
    try:
        value = float(temperature)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a positive number; got {temperature!r}") from exc
    if not np.isfinite(value) or value <= 0.0:
        raise ValueError(f"{name} must be finite and > 0; got {value}")
    low, high = TEMPERATURE_LIMITS
    if not low <= value <= high:
        raise ValueError(
            f"{name} must be between {low:g} and {high:g} (a normal float whose inverse is one too); got {value!r}"
        )
    return value


def check_bounds(bounds: tuple[float, float]) -> tuple[float, float]:
    """Return ``(lower, upper)`` temperature bounds, or raise unless 0 < lower < upper < inf,
    both within :data:`TEMPERATURE_LIMITS`.

    >>> check_bounds((1e-320, 20.0))
    Traceback (most recent call last):
    ...
    ValueError: bounds must satisfy 1e-10 <= lower < upper <= 1e+10; got (1e-320, 20.0)
    """
    try:
        lower, upper = (float(b) for b in bounds)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"bounds must be a pair (lower, upper) of positive numbers; got {bounds!r}") from exc
    if not (np.isfinite(lower) and np.isfinite(upper) and 0.0 < lower < upper):
        raise ValueError(f"bounds must satisfy 0 < lower < upper < inf; got ({lower}, {upper})")
    low, high = TEMPERATURE_LIMITS
    if not low <= lower < upper <= high:
        raise ValueError(f"bounds must satisfy {low:g} <= lower < upper <= {high:g}; got ({lower!r}, {upper!r})")
    return lower, upper


def check_groups(groups: ArrayLike, n_samples: int, *, name: str = "groups") -> NDArray[np.object_]:
    """Return ``groups`` as a 1-D array of Python strings of length ``n_samples``."""
    array = np.asarray(groups)
    if array.ndim != 1 or array.shape[0] != n_samples:
        raise ValueError(f"{name} must be 1-D with {n_samples} entries (one per row); got shape {array.shape}")
    return text_array(array)


def text_array(array: NDArray[Any]) -> NDArray[np.object_]:
    """``array``'s values as Python strings in an object array: each as long as it is.

    Never numpy's fixed-width text (``<U...``), in which every value takes the bytes of the
    longest: one 100,000-character id among 10,000 rows would take 4 GB. Bytes are decoded as
    UTF-8 (:class:`UnicodeDecodeError` when they are not).

    >>> text_array(np.array(["a", "bb"])).tolist(), text_array(np.array([7, 8])).dtype
    (['a', 'bb'], dtype('O'))
    """
    kind = array.dtype.kind
    if kind == "O":
        # str() of each value in one C loop: str values stay the same objects.
        return np.asarray(np.frompyfunc(str, 1, 1)(array), dtype=object)
    if kind == "S":
        return np.fromiter((value.decode("utf-8") for value in array.tolist()), dtype=object, count=array.shape[0])
    if kind == "U":
        return array.astype(object)
    # Numbers: their text is short, so the fixed-width step costs nothing.
    return array.astype(str).astype(object)


def check_count(value: int, *, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int in [minimum, maximum], or raise (bool is refused).

    Examples
    --------
    >>> check_count(15, name="n_bins", maximum=MAX_BINS)
    15
    >>> check_count(-1, name="min_count", minimum=0)
    Traceback (most recent call last):
    ...
    ValueError: min_count must be >= 0; got -1
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer >= {minimum}; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum:,}; got {value:,}")
    return int(value)


def check_n_bins(n_bins: int) -> int:
    """Return ``n_bins`` as an int in [1, MAX_BINS], or raise.

    Parameters
    ----------
    n_bins : int
        Number of confidence bins of a reliability table or an ECE.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If ``n_bins`` is below 1 or above the limit (100,000: no table needs more).
    TypeError
        If ``n_bins`` is not an integer.

    Examples
    --------
    >>> check_n_bins(15)
    15
    >>> check_n_bins(0)
    Traceback (most recent call last):
    ...
    ValueError: n_bins must be >= 1; got 0
    """
    return check_count(n_bins, name="n_bins", maximum=MAX_BINS)


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
