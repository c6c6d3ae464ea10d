"""An attribute an object reads through one of its parts, typed: declared once, not a property each.

A report that holds its window's summary, or a registered version that holds its record, shows
some of the part's numbers as its own (``report.n`` is ``report.summary.n``). Instead of one
forwarding property per number, a subclass of :class:`ReadThrough` names the part once and each
attribute is one line; the type checker reads each attribute's type from its function.
Stdlib only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar, overload

__all__ = ["ReadThrough"]

_Part = TypeVar("_Part")
_Read = TypeVar("_Read")


class ReadThrough(Generic[_Part, _Read]):
    """A read-only attribute that ``read`` takes out of the part named ``PART`` of its owner.

    Subclass it with the part's type and name, then declare each attribute in one line.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Window:
    ...     rows: int
    >>> class FromWindow(ReadThrough[Window, _Read]):
    ...     PART = "window"
    >>> @dataclass
    ... class Report:
    ...     window: Window
    ...     n = FromWindow(lambda window: window.rows)
    >>> Report(Window(12)).n
    12
    """

    __slots__ = ("_read",)
    PART: ClassVar[str]

    def __init__(self, read: Callable[[_Part], _Read]) -> None:
        self._read = read

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> ReadThrough[_Part, _Read]: ...

    @overload
    def __get__(self, instance: object, owner: type[Any]) -> _Read: ...

    def __get__(self, instance: object | None, owner: type[Any]) -> ReadThrough[_Part, _Read] | _Read:
        return self if instance is None else self._read(getattr(instance, self.PART))
