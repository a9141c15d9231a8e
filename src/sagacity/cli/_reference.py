"""The CLI reference in ``docs/cli.md``, generated from the live ``--help`` of every command.

The part of ``docs/cli.md`` between :data:`BEGIN` and :data:`END` is this module's output, so the
reference cannot drift from the code: ``scripts/cli_reference.py`` rewrites it and
``tests/cli/test_docs.py`` fails when it is stale (the sqlite-utils/cog habit, without cog).
"""

from __future__ import annotations

from collections.abc import Iterator

import click

BEGIN = (
    "<!-- BEGIN GENERATED REFERENCE: `python scripts/cli_reference.py` rewrites this part; do not edit -->"
)
END = "<!-- END GENERATED REFERENCE -->"
#: A fixed width, so the text does not depend on the terminal that generated it.
WIDTH = 100


def walk(
    command: click.Command, path: tuple[str, ...] = ("sagacity",), parent: click.Context | None = None
) -> Iterator[tuple[tuple[str, ...], click.Command, click.Context]]:
    """Every command under ``command`` (itself first), depth first, subcommands sorted by name."""
    ctx = command.make_context(  # as invoked, so group settings (e.g. ``-h``) are inherited
        path[-1], [], parent=parent, resilient_parsing=True, terminal_width=WIDTH, max_content_width=WIDTH
    )
    yield path, command, ctx
    if isinstance(command, click.Group):
        for name in sorted(command.list_commands(ctx)):  # a lazy group imports them here
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{' '.join(path)} lists {name!r} but has no such command"
            yield from walk(sub, (*path, name), ctx)


def render(group: click.Group) -> str:
    """One section per command: a heading with its full name, then its help as printed."""
    parts = []
    for path, command, ctx in walk(group):
        level = "#" * (len(path) + 2)  # under the page's "## Reference"
        parts.append(f"{level} `{' '.join(path)}`\n\n```text\n{command.get_help(ctx).rstrip()}\n```\n")
    return "\n".join(parts)


def splice(document: str, reference: str) -> str:
    """``document`` with the text between the markers replaced by ``reference``."""
    head, begin, rest = document.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the document lacks the markers {BEGIN!r} ... {END!r}")
    return f"{head}{BEGIN}\n\n{reference}\n{END}{tail}"
