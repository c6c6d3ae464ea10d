"""The ``thermostat`` command line: parsing, the analysis commands, the operations tools, the demo.

:func:`main` (:mod:`flows.cli.main`) parses the arguments without loading the numeric core,
MLflow or Prefect, and hands each command to its module: the analysis commands
(:mod:`flows.cli.commands`), ``export``, ``setup-db``, ``alerts``, ``lock``, ``dashboard`` and
the ``demo`` (:mod:`flows.cli.demo`, the main job). Nothing imports this room; it may import
every other.
"""

from __future__ import annotations

from flows.cli.main import main

__all__ = ["main"]
