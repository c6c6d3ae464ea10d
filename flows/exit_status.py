"""The exit statuses every ``thermostat`` command shares (one contract; see :mod:`flows.cli`).

A module of constants that imports nothing, so that a command answers ``--help`` or refuses
its arguments before loading the numeric core, MLflow or Prefect.
"""

from __future__ import annotations

__all__ = ["EXIT_BAD_INPUT", "EXIT_COMPUTATION_FAILED", "EXIT_DID_NOT_PASS", "EXIT_OK"]

EXIT_OK = 0
"""The command ran and its result passed its check."""
EXIT_DID_NOT_PASS = 1
"""The command ran and printed its report, but the result did not pass its check."""
EXIT_BAD_INPUT = 2
"""Bad input: the message names the file, column, row or flag; nothing printed or written."""
EXIT_COMPUTATION_FAILED = 3
"""The computation itself failed."""
