"""Text as the dashboard's page shows it: HTML-escaped, its invisible characters spelled out.

Names come from whoever wrote the store (MLflow accepts nearly any model name, and tags are
free text). ``html.escape`` makes a name inert as markup, but a right-to-left override (U+202E)
still makes ``bidi\\u202egnp.exe`` read as ``bidiexe.png``, a zero-width space makes two names
look alike, and terminal escapes ride along into copied text. :func:`html_text` writes every
control, format (bidi overrides and isolates, zero-width characters), surrogate, private-use,
unassigned and line/paragraph-separator character as its Python escape (``\\u202e``,
``\\x1b``, ``\\n``), so a name reads as what it is.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from html import escape

__all__ = ["html_text", "visible"]

# Unicode general categories that show nothing, or change how the text around them is shown.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


@lru_cache(maxsize=4096)
def _spelled(character: str) -> str:
    if unicodedata.category(character) not in _INVISIBLE:
        return character
    return ascii(character)[1:-1]  # Python's own escape: \x1b, \u202e, \U000e0001, \n


def visible(text: str) -> str:
    """``text`` with its invisible characters written as their escapes (no HTML escaping).

    Examples
    --------
    >>> visible("bidi\\u202egnp.exe\\x1b[31m")
    'bidi\\\\u202egnp.exe\\\\x1b[31m'
    >>> visible("naïve — ok")
    'naïve — ok'
    """
    if text.isprintable():  # the common case: nothing to spell out (isprintable is false for all of _INVISIBLE)
        return text
    return "".join(_spelled(character) for character in text)


def html_text(value: object) -> str:
    """``str(value)`` for HTML text or a quoted attribute: escaped, invisible characters spelled out.

    Examples
    --------
    >>> html_text('we"ird <b>\\u202e')
    'we&quot;ird &lt;b&gt;\\\\u202e'
    """
    return escape(visible(str(value)), quote=True)
