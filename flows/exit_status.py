"""The exit statuses every ``thermostat`` command shares (one contract; see :mod:`flows.cli.main`).

The constants and the two things every command does with them: read its arguments (argparse
exits on ``--help`` and on a usage error; :func:`parse_arguments` returns that status instead)
and refuse on stderr (:func:`refuse`). The standard library only, so that a command answers
``--help`` or refuses its arguments before loading the numeric core, MLflow or Prefect.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["EXIT_BAD_INPUT", "EXIT_COMPUTATION_FAILED", "EXIT_DID_NOT_PASS", "EXIT_OK", "parse_arguments", "refuse"]

EXIT_OK = 0
"""The command ran and its result passed its check."""
EXIT_DID_NOT_PASS = 1
"""The command ran and printed its report, but the result did not pass its check."""
EXIT_BAD_INPUT = 2
"""Bad input: the message names the file, column, row or flag; nothing printed or written."""
EXIT_COMPUTATION_FAILED = 3
"""The computation itself failed."""


def parse_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace | int:
    """``argv`` as ``parser`` reads it, or the exit status where argparse exits instead.

    argparse has then printed the help (status 0) or the usage error (:data:`EXIT_BAD_INPUT`).
    """
    try:
        return parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error (argparse printed it)
        return exit_.code if isinstance(exit_.code, int) else EXIT_BAD_INPUT


def refuse(prog: str, status: int, message: str) -> int:
    """Print ``PROG: error: MESSAGE`` on stderr, as argparse words a refusal, and return ``status``."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return status
