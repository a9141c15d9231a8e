"""``sagacity --help`` and every command's ``--help`` start without importing the library.

Asserted by what a fresh interpreter has imported after printing the help, not by a clock (the
time is in BENCHMARKS.md). The listing ``sagacity --help`` prints from summaries kept beside
the import paths must equal what the commands themselves say.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

import sagacity
from sagacity.cli import COMMANDS, main
from sagacity.cli._reference import walk

#: What a help screen must not import: the library's core (the journal's fold included), the
#: stores, the terminal renderer, the server, the gateway, the drivers, and the standard
#: library's HTTP client (``--api``'s, with its email parser and TLS).
HEAVY = (
    "sagacity._sagacity",
    "sagacity._state",
    "sagacity._approvals",
    "sagacity.doctor",
    "sagacity._telemetry",
    "sagacity.guardrails",
    "sagacity.checkpoints",
    "sagacity.workflows",
    "sagacity.stores.sqlite",
    "sagacity.server",
    "sagacity.mcp",
    "rich",
    "fastapi",
    "starlette",
    "psycopg",
    "pymysql",
    "opentelemetry",
    "cryptography",
    "urllib.request",
    "http.client",
    "email",
    "ssl",
)

_PROBE = """
import contextlib, io, json, sys
from sagacity.cli import main
for args in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args, prog_name="sagacity")
        except SystemExit as exc:
            assert exc.code == 0, (args, exc.code)
print(json.dumps(sorted(sys.modules)))
"""


def _imported_after(*commands: list[str]) -> list[str]:
    """The modules a fresh interpreter holds after printing each command's help, in turn."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(commands))],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_top_level_help_imports_no_command() -> None:
    """``sagacity --help`` lists every command without importing any of them (nor the model)."""
    modules = _imported_after(["--help"], ["--version"])
    assert _heavy(modules) == []
    assert [m for m in modules if m.startswith("sagacity.cli.")] == [
        "sagacity.cli._app",
        "sagacity.cli._examples",
        "sagacity.cli._lazy",
    ]
    assert "sagacity.model" not in modules


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_help_of_a_command_imports_no_library_core(name: str) -> None:
    """``sagacity NAME --help`` and the help of each of its subcommands stay off the core."""
    command = main.get_command(click.Context(main), name)
    assert command is not None
    helps = [[*path[1:], "--help"] for path, _, _ in walk(command, ("sagacity", name))]
    assert _heavy(_imported_after(*helps)) == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_summary_is_the_commands_own(name: str) -> None:
    """The summary ``sagacity --help`` shows unimported is the first sentence of the command's help."""
    lazy = COMMANDS[name]
    command = getattr(importlib.import_module(lazy.module), lazy.attribute)
    assert command.get_short_help_str(limit=10_000) == lazy.summary, (
        f"update COMMANDS[{name!r}] in src/sagacity/cli/_app.py to the command's docstring"
    )


def test_help_lists_every_command_with_its_summary() -> None:
    """The listing is the one click prints for loaded commands, cut the same way at 80 columns."""
    listed = _help_listing(main)
    loaded = click.Group("sagacity", commands={n: main.get_command(click.Context(main), n) for n in COMMANDS})
    assert listed == _help_listing(loaded)
    assert sorted(line.split()[0] for line in listed) == sorted(COMMANDS)


def _help_listing(group: click.Group) -> list[str]:
    ctx = click.Context(group, info_name="sagacity", terminal_width=80, max_content_width=80)
    listing = group.get_help(ctx).split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in listing.splitlines() if line.strip()]


def test_shell_completion_of_command_names_imports_no_command() -> None:
    """Tab after ``sagacity ap`` offers ``approvals`` (click's own completion), imports nothing."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from sagacity.cli import main; main(prog_name='sagacity')"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            **os.environ,
            "_SAGACITY_COMPLETE": "bash_complete",
            "COMP_WORDS": "sagacity ap",
            "COMP_CWORD": "1",
        },
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["plain,approvals"]


def test_public_names_import_on_first_use() -> None:
    """``import sagacity`` alone imports no submodule but ``_version`` (one assignment, no imports);
    ``from sagacity import X`` works for every X."""
    probe = "import sys, sagacity; print(sorted(m for m in sys.modules if m.startswith('sagacity.')))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "['sagacity._version']"
    for name in sagacity.__all__:
        exec(f"from sagacity import {name}", {})
    assert set(sagacity.__all__) <= set(dir(sagacity))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        sagacity.nothing_here  # noqa: B018


def test_documented_completion_lines_print_a_completion_script() -> None:
    """Each shell's line in docs/cli.md makes the command print that shell's completion script."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    shells = re.findall(r"_SAGACITY_COMPLETE=(\w+)_source sagacity", doc)
    assert sorted(shells) == ["bash", "fish", "zsh"]
    for shell in shells:
        done = subprocess.run(
            [sys.executable, "-c", "from sagacity.cli import main; main(prog_name='sagacity')"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "_SAGACITY_COMPLETE": f"{shell}_source"},
        )
        assert done.returncode == 0, done.stderr
        assert "_SAGACITY_COMPLETE" in done.stdout, (shell, done.stdout)
