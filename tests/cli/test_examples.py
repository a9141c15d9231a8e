"""Every command's ``--help`` ends with examples (#25), and every example is a real command line:
it names the command it is under, and each option it uses is one of that command's (with a
value the option accepts, for options with a fixed set of choices)."""

from __future__ import annotations

import shlex

import click
import pytest

from sagacity.cli import main
from sagacity.cli._reference import walk

COMMANDS = [(path, command, ctx) for path, command, ctx in walk(main)]


def _tokens(example: str) -> list[str]:
    """The example's arguments as the shell passes them: up to a redirection or ``--`` (after
    which the words are the upstream's command, not ours)."""
    words = shlex.split(example)
    for stop in (">", "--"):
        if stop in words:
            words = words[: words.index(stop)]
    return words


@pytest.mark.parametrize(("path", "command", "ctx"), COMMANDS, ids=[" ".join(p) for p, _, _ in COMMANDS])
def test_help_ends_with_examples_of_this_command(
    path: tuple[str, ...], command: click.Command, ctx: click.Context
) -> None:
    text = command.get_help(ctx)
    assert "\n  Examples:\n" in text, f"`{' '.join(path)} --help` has no examples"
    examples = [line.strip() for line in text.split("\n  Examples:\n", 1)[1].splitlines() if line.strip()]
    assert examples
    for example in examples:
        words = _tokens(example)
        assert words[0] == "sagacity"
        if isinstance(command, click.Group):
            continue  # a group's examples are its subcommands': checked under them
        assert tuple(words[: len(path)]) == path, f"{example!r} is not an example of {' '.join(path)}"
        _check_options(command, words[len(path) :], example)


def _check_options(command: click.Command, words: list[str], example: str) -> None:
    options = {
        opt: p for p in command.params if isinstance(p, click.Option) for opt in p.opts + p.secondary_opts
    }
    k = 0
    while k < len(words):
        word = words[k]
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            assert name in options, f"{example!r}: {name} is not an option of this command"
            option = options[name]
            if not option.is_flag and "=" not in word:
                k += 1
                value = words[k]
                if isinstance(option.type, click.Choice):
                    choices = {str(c).lower() for c in option.type.choices}
                    assert value.lower() in choices, f"{example!r}: {value} is not a choice of {name}"
        k += 1
