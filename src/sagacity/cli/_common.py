"""What every command shares: the ``--db`` option, opening the store, turning errors into exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click
from rich.console import Console

from sagacity._sagacity import Sagacity
from sagacity.errors import SagacityError
from sagacity.stores import DEFAULT_URL

F = TypeVar("F", bound=Callable[..., Any])

#: Exit status when the command ran but found something a human must look at.
EXIT_FINDINGS = 1
#: Exit status for usage errors and failures (click's own convention).
EXIT_ERROR = 2


def db_option(fn: F) -> F:
    """``--db URL`` (env ``SAGACITY_URL``), the journal a command works on."""
    return click.option(
        "--db",
        "db_url",
        envvar="SAGACITY_URL",
        default=DEFAULT_URL,
        show_default=True,
        metavar="URL",
        help="Journal store: sqlite:///path.db, postgresql://..., mysql://..., memory:// (env SAGACITY_URL).",
    )(fn)


def console(stderr: bool = False) -> Console:
    """A rich console; plain text, 120 columns wide, when output is not a terminal (pipes, tests)."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 120
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


class CommandError(click.ClickException):
    """A failure the user can act on, printed without a traceback; exit status 2."""

    exit_code = EXIT_ERROR


@contextmanager
def open_sagacity(db_url: str, *, init_schema: bool = False) -> Iterator[Sagacity]:
    """Open the journal for one command; library errors become a clean message and exit 2."""
    try:
        with Sagacity(db_url, init_schema=init_schema) as sg:
            yield sg
    except SagacityError as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc
