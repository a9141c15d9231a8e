"""docs/cli.md documents every command: each has help text, a section, and the reference is current."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from sagacity.cli import main
from sagacity.cli._reference import BEGIN, END, render, splice, walk

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
COMMANDS = [(" ".join(path), command) for path, command, _ in walk(main)]


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_command_has_help(name: str, command: click.Command) -> None:
    """Every registered command, and each of its options, says what it is for."""
    assert (command.help or "").strip(), f"`{name}` has no help text (its docstring)"
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert (param.help or "").strip(), f"`{name}` option {param.opts[0]} has no help"


@pytest.mark.parametrize("name", [name for name, _ in COMMANDS])
def test_command_is_documented(name: str) -> None:
    """Every registered command has its own section in docs/cli.md."""
    assert f"`{name}`\n" in DOC.read_text(encoding="utf-8"), (
        f"`{name}` is not in docs/cli.md: run `python scripts/cli_reference.py`"
    )


def test_reference_is_current() -> None:
    """The generated reference in docs/cli.md equals the live --help of every command."""
    current = DOC.read_text(encoding="utf-8")
    assert BEGIN in current
    assert END in current
    assert splice(current, render(main)) == current, (
        "docs/cli.md is stale: run `python scripts/cli_reference.py` and commit the result"
    )


def test_stale_reference_is_detected() -> None:
    """Splicing fresh help into a document with an outdated reference changes the document."""
    outdated = f"intro\n{BEGIN}\n\n## `sagacity`\n\nold help\n{END}\noutro\n"
    fresh = splice(outdated, render(main))
    assert fresh != outdated
    assert fresh.startswith("intro\n")
    assert fresh.endswith(f"{END}\noutro\n")
    assert splice(fresh, render(main)) == fresh
