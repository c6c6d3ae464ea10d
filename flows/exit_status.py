"""The exit statuses every ``thermostat`` command shares (one contract; see :mod:`flows.cli.main`).

The constants and the two things every command does with them: run its click command as a
function that returns the status (:func:`run_click`: ``--help`` is 0, a usage error
:data:`EXIT_BAD_INPUT`; nothing calls ``sys.exit``), and refuse on stderr (:func:`refuse`,
:func:`fail`). Here, below every room of ``flows/``, so that the servers' and the Prefect side's
tools share it; click and the standard library only, so that a command answers ``--help`` or
refuses its arguments before loading the numeric core, MLflow or Prefect.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

__all__ = ["EXIT_BAD_INPUT", "EXIT_COMPUTATION_FAILED", "EXIT_DID_NOT_PASS", "EXIT_OK", "fail", "refuse", "run_click"]

EXIT_OK = 0
"""The command ran and its result passed its check."""
EXIT_DID_NOT_PASS = 1
"""The command ran and printed its report, but the result did not pass its check."""
EXIT_BAD_INPUT = 2
"""Bad input: the message names the file, column, row or flag; nothing printed or written."""
EXIT_COMPUTATION_FAILED = 3
"""The computation itself failed."""


def run_click(command: click.Command, argv: Sequence[str] | None, prog: str) -> int:
    """Run ``command`` on ``argv`` (default ``sys.argv[1:]``) as ``prog`` and return its exit status.

    The command's callback returns the status (None is :data:`EXIT_OK`); ``--help`` is 0; a
    usage error prints the usage and ``PROG: error: MESSAGE`` on stderr and is
    :data:`EXIT_BAD_INPUT`; Ctrl-C stays a ``KeyboardInterrupt``.
    """
    try:
        status = command.main(args=list(sys.argv[1:] if argv is None else argv), prog_name=prog,
                              standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as error:  # a group without its subcommand: the help
        print(error.format_message(), file=sys.stderr)
        return EXIT_BAD_INPUT
    except click.UsageError as error:
        if error.ctx is not None:
            print(error.ctx.get_usage(), file=sys.stderr)
        return refuse(error.ctx.command_path if error.ctx else prog, EXIT_BAD_INPUT, error.format_message())
    except click.ClickException as error:
        return refuse(prog, error.exit_code, error.format_message())
    except click.Abort as error:  # click's word for Ctrl-C: interrupted, as without click
        raise KeyboardInterrupt from error
    return EXIT_OK if status is None else int(status)


def refuse(prog: str, status: int, message: str) -> int:
    """Print ``PROG: error: MESSAGE`` on stderr and return ``status``."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return status


def fail(status: int, message: str) -> int:
    """:func:`refuse` as the running click command (``thermostat lock show``, ...)."""
    return refuse(click.get_current_context().command_path, status, message)
