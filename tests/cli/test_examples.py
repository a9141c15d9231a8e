"""Every command's ``--help`` ends with examples (#25), and every example is a real command line:
it names the command it is under, and each option it uses is one of that command's (with a
value the option accepts, for options with a fixed set of choices). The same holds for every
``sagacity`` command line the README and the docs show in a shell block."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

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


ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: Where one shell command ends and the next begins.
_SEPARATORS = {"|", "||", "&&", ";", "do", "then", "(", ")"}


def _shell_lines(text: str) -> list[str]:
    """The command lines of a page's shell blocks: in ``console`` blocks the lines after ``$ ``
    (the rest is output), in ``sh``/``bash`` blocks every line; continued lines joined."""
    lines: list[str] = []
    for language, body in re.findall(r"```(console|sh|bash|shell)\n(.*?)```", text, flags=re.DOTALL):
        joined = body.replace("\\\n", " ")
        for line in joined.splitlines():
            if language == "console":
                if line.startswith("$ "):
                    lines.append(line[2:])
            elif line.strip() and not line.lstrip().startswith("#"):
                lines.append(line)
    return lines


def _sagacity_commands(line: str) -> list[list[str]]:
    """Each ``sagacity ...`` command of a shell line, as its words (up to a redirection)."""
    words = shlex.split(line, comments=True)
    segments: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    commands = []
    for segment in segments:
        if "sagacity" in segment:
            command = segment[segment.index("sagacity") :]
            commands.append(_tokens(shlex.join(command)))
    return commands


DOC_COMMANDS = [
    (f"{page.relative_to(ROOT)}: {line.strip()}", words)
    for page in PAGES
    for line in _shell_lines(page.read_text(encoding="utf-8"))
    for words in _sagacity_commands(line)
]


@pytest.mark.parametrize(("where", "words"), DOC_COMMANDS, ids=[w for w, _ in DOC_COMMANDS])
def test_every_command_line_in_the_docs_is_a_real_command(where: str, words: list[str]) -> None:
    """A command the docs show names a real command, and each option it uses is one of that
    command's (renaming an option or a command fails here, not in a reader's terminal)."""
    command: click.Command = main
    k = 1
    while isinstance(command, click.Group) and k < len(words) and not words[k].startswith("-"):
        found = command.get_command(click.Context(command), words[k])
        assert found is not None, f"{where}: {words[k]!r} is not a command of {' '.join(words[:k])}"
        command, k = found, k + 1
    if isinstance(command, click.Group):
        assert set(words[k:]) <= {"--help", "-h", "--version"}, f"{where}: {words[k:]} after a group"
        return
    _check_options(command, words[k:], where)


def test_the_docs_show_command_lines() -> None:
    assert len(DOC_COMMANDS) > 50
