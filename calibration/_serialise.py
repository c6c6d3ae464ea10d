"""Results that serialise themselves: one JSON-safe form per result type.

Every result of the core is a frozen dataclass; :class:`JsonResult` gives it ``to_dict()``,
the one form the command line, the reports and the registry tags are built from. JSON has no
NaN or infinity: an undefined number (the accuracy of an empty bin, the NLL of an empty
window) becomes ``None``, which prints as ``null``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import numpy as np

__all__ = ["JsonResult", "json_safe"]


def json_safe(value: Any) -> Any:
    """``value`` in plain JSON types: NaN and infinities become None, arrays and tuples
    lists, numpy scalars Python numbers, times ISO 8601 strings, results their ``to_dict()``.

    Examples
    --------
    >>> json_safe({"ece": float("nan"), "counts": np.array([1, 2]), "bounds": (0.05, 20.0)})
    {'ece': None, 'counts': [1, 2], 'bounds': [0.05, 20.0]}
    """
    if isinstance(value, JsonResult):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, np.ndarray):
        return [json_safe(item) for item in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


class JsonResult:
    """Mixin for frozen result dataclasses: ``to_dict()`` maps each field to its JSON-safe value.

    A result whose JSON form differs from its fields (a table shown as rows, a flag shown as
    ``false``) overrides :meth:`to_dict` and says so in its docstring.
    """

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """The fields, by name, as plain JSON types (see :func:`json_safe`)."""
        if not dataclasses.is_dataclass(self):  # pragma: no cover - a programming error
            raise TypeError(f"{type(self).__name__} is not a dataclass")
        return {field.name: json_safe(getattr(self, field.name)) for field in dataclasses.fields(self)}
