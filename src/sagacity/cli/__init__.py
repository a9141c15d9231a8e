"""The ``sagacity`` command line: one click group, one module per command group.

Each command is a thin shell over the public library API; what a command can do, a program can do
through :class:`sagacity.Sagacity` too. A command's module is imported only when that command
runs (:mod:`sagacity.cli._lazy`), so ``sagacity --help`` starts in a fraction of the time.
"""

from __future__ import annotations

from sagacity.cli._app import COMMANDS, main

__all__ = ["COMMANDS", "main"]
