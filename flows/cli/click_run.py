"""A click command run as a function that returns its exit status (the contract of :mod:`flows.exit_status`).

Each ``thermostat`` tool is a :class:`click.Command` whose callback returns its status; its
``main(argv, prog=...)`` is :func:`run_click`: ``--help`` is 0, a usage error is
:data:`~flows.exit_status.EXIT_BAD_INPUT` with ``PROG: error: MESSAGE`` on stderr, and nothing
calls ``sys.exit``. click and the standard library only: ``--help`` loads nothing heavy.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from flows.exit_status import EXIT_BAD_INPUT, EXIT_OK, refuse

__all__ = ["fail", "run_click"]


def run_click(command: click.Command, argv: Sequence[str] | None, prog: str) -> int:
    """Run ``command`` on ``argv`` (default ``sys.argv[1:]``) as ``prog``; return its exit status."""
    try:
        status = command.main(args=list(sys.argv[1:] if argv is None else argv), prog_name=prog,
                              standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as error:  # a group without its subcommand
        print(error.format_message(), file=sys.stderr)
        return EXIT_BAD_INPUT
    except click.UsageError as error:
        if error.ctx is not None:
            print(error.ctx.get_usage(), file=sys.stderr)
        return refuse(error.ctx.command_path if error.ctx else prog, EXIT_BAD_INPUT, error.format_message())
    except click.ClickException as error:
        return refuse(prog, error.exit_code, error.format_message())
    except click.Abort as error:  # Ctrl-C, which click turned into Abort: interrupted, as before
        raise KeyboardInterrupt from error
    return EXIT_OK if status is None else int(status)


def fail(status: int, message: str) -> int:
    """Print ``COMMAND: error: MESSAGE`` on stderr for the running command and return ``status``."""
    return refuse(click.get_current_context().command_path, status, message)
