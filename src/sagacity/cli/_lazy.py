"""A click group whose subcommands are imported only when one is run (or its help is asked for).

``sagacity --help`` lists fifteen commands; importing them all would import most of the library
(stores, rich, the MCP gateway) before printing a screen of text. The group keeps each command's
one-line summary beside its import path instead, and ``tests/cli/test_lazy.py`` checks that every
summary is the command's own (the first sentence of its docstring), so they cannot drift.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

import sagacity.cli._examples as examples

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem


@dataclass(frozen=True)
class Lazy:
    """Where a subcommand lives (``module``'s ``attribute``) and its one-line summary."""

    module: str
    attribute: str
    summary: str


class LazyGroup(click.Group):
    """A group of :class:`Lazy` subcommands, imported on first use."""

    def __init__(self, *args: Any, lazy: dict[str, Lazy], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            where = self.lazy[cmd_name]
            command = getattr(importlib.import_module(where.module), where.attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{where.module}.{where.attribute} is not a click command")
            examples.attach(command, cmd_name)
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their summaries, without importing any of them."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        with formatter.section("Commands"):
            formatter.write_dl([(name, self._short_help(ctx, name, limit)) for name in names])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """Subcommand names (and the group's options) without importing the subcommands."""
        from click.shell_completion import CompletionItem

        items = [
            CompletionItem(name, help=self._short_help(ctx, name, 45))
            for name in self.list_commands(ctx)
            if name.startswith(incomplete)
        ]
        return items + click.Command.shell_complete(self, ctx, incomplete)

    def _short_help(self, ctx: click.Context, name: str, limit: int) -> str:
        if name in self.commands:
            return self.commands[name].get_short_help_str(limit)
        # Shortened as click shortens a command's own help, by a command that is only the summary.
        return click.Command(name, help=self.lazy[name].summary).get_short_help_str(limit)
