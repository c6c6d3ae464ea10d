"""One runner for the docstring examples of any module, with the names every example may take as
imported (as NumPy's docstring standard takes ``import numpy as np``; the packages' docstrings say
so once, in their first paragraph)."""

from __future__ import annotations

import doctest
import importlib
from datetime import UTC, datetime, timedelta

import numpy as np

__all__ = ["EXAMPLE_NAMES", "run_examples"]

EXAMPLE_NAMES = {"np": np, "UTC": UTC, "datetime": datetime, "timedelta": timedelta}


def run_examples(module_name: str) -> doctest.TestResults:
    """Run the examples of ``module_name`` (ellipsis and white space folded) and return the counts."""
    return doctest.testmod(importlib.import_module(module_name), extraglobs=EXAMPLE_NAMES,
                           optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
