"""One declared rule for a number: the interval it must lie in.

A scalar argument of the numeric core and of the monitor (a level, a margin, a count, a
timeout) is checked by an :class:`Interval` declared once beside its default, instead of a
hand-written check per caller: the same rule gives the same words wherever the value comes from
(a Python argument or a command-line flag, whose name the caller passes). The settings and the
drift policy declare theirs as pydantic constraints. Stdlib only.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = ["Interval"]


def _shown(bound: float) -> str:
    if bound == int(bound) and abs(bound) >= 10_000:
        return f"{int(bound):,}"
    return f"{bound:g}"


@dataclass(frozen=True, slots=True)
class Interval:
    """The interval a number must lie in, and the check that says so.

    ``low``/``high`` are the ends (infinite: unbounded on that side, and then the value must
    still be finite), ``low_closed``/``high_closed`` whether each end is allowed, ``integer``
    whether only integers pass (booleans never do), ``hint`` words added to the refusal (what
    a value means, an example).

    Examples
    --------
    >>> PROBABILITY = Interval(0.0, 1.0, low_closed=False, high_closed=False, hint="e.g. 0.95")
    >>> PROBABILITY.check(0.9, name="confidence_level"), str(PROBABILITY)
    (0.9, 'in (0, 1)')
    >>> PROBABILITY.check(1.0, name="--level")
    Traceback (most recent call last):
    ...
    ValueError: --level must be in (0, 1) (e.g. 0.95); got 1.0
    >>> Interval(1, integer=True).check_count(True, name="n_bins")
    Traceback (most recent call last):
    ...
    TypeError: n_bins must be an integer >= 1; got True
    >>> Interval(0.0).check(float("inf"), name="tolerance")
    Traceback (most recent call last):
    ...
    ValueError: tolerance must be finite and >= 0; got inf
    """

    low: float = -math.inf
    high: float = math.inf
    low_closed: bool = True
    high_closed: bool = True
    integer: bool = False
    hint: str = ""

    def __str__(self) -> str:
        low, high = math.isfinite(self.low), math.isfinite(self.high)
        if low and high:
            return (f"in {'[' if self.low_closed else '('}{_shown(self.low)}, {_shown(self.high)}"
                    f"{']' if self.high_closed else ')'}")
        if low:
            return f"{'' if self.integer else 'finite and '}{'>=' if self.low_closed else '>'} {_shown(self.low)}"
        if high:
            return f"{'' if self.integer else 'finite and '}{'<=' if self.high_closed else '<'} {_shown(self.high)}"
        return "finite"

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.integer and not isinstance(value, numbers.Integral):
            return False
        number = float(value)
        if not math.isfinite(number):
            return False
        above = number >= self.low if self.low_closed else number > self.low
        below = number <= self.high if self.high_closed else number < self.high
        return above and below

    def _refuse(self, value: object, name: str) -> None:
        kind = "an integer" if self.integer else "a number"
        hint = f" ({self.hint})" if self.hint else ""
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or (
            self.integer and not isinstance(value, numbers.Integral)
        ):
            raise TypeError(f"{name} must be {kind} {self}{hint}; got {value!r}")
        shown = f"{value:,}" if isinstance(value, numbers.Integral) and abs(int(value)) >= 10_000 else repr(
            float(value) if not isinstance(value, numbers.Integral) else int(value))
        raise ValueError(f"{name} must be {self}{hint}; got {shown}")

    def check(self, value: object, *, name: str) -> float:
        """``value`` as a float, or a TypeError (not a real number) / ValueError (outside) naming ``name``."""
        if value not in self:
            self._refuse(value, name)
        return float(value)  # type: ignore[arg-type]  # a real number: __contains__ said so

    def check_count(self, value: object, *, name: str) -> int:
        """``value`` as an int (an :class:`Interval` with ``integer=True``), or the refusal."""
        if value not in self or not isinstance(value, numbers.Integral):
            self._refuse(value, name)
        assert isinstance(value, numbers.Integral)  # refused above otherwise
        return int(value)
