"""What every command shares: the ``--db`` option, opening the store, turning errors into exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sagacity.errors import ConfigurationError, SagacityError, StoreUnavailableError
from sagacity.stores import DEFAULT_URL, limited_wait, safe_url

if TYPE_CHECKING:
    from rich.console import Console

    from sagacity import Sagacity

F = TypeVar("F", bound=Callable[..., Any])

#: Exit status when the command ran but found something a human must look at.
EXIT_FINDINGS = 1
#: Exit status for usage errors and failures (click's own convention).
EXIT_ERROR = 2


#: Seconds a command waits for an unreachable database by default (``--store-timeout``).
DEFAULT_STORE_TIMEOUT = 5.0
_STORE_TIMEOUT = "sagacity.store_timeout"


def store_timeout_callback(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """Remember ``--store-timeout`` for :func:`open_sagacity` (an option callback)."""
    if not value > 0:
        raise click.BadParameter(f"must be a positive number of seconds, got {value:g}")
    ctx.meta[_STORE_TIMEOUT] = value
    return value


def db_option(fn: F) -> F:
    """``--db URL`` (env ``SAGACITY_URL``), the journal a command works on, and
    ``--store-timeout SECONDS`` (env ``SAGACITY_STORE_TIMEOUT``), how long it waits for it."""
    return db_url_option(
        click.option(
            "--store-timeout",
            type=float,
            envvar="SAGACITY_STORE_TIMEOUT",
            default=DEFAULT_STORE_TIMEOUT,
            show_default=True,
            metavar="SECONDS",
            expose_value=False,
            callback=store_timeout_callback,
            help="Give up on an unreachable database after this long: one error line, exit 2 "
            "(env SAGACITY_STORE_TIMEOUT).",
        )(fn)
    )


def db_url_option(fn: F) -> F:
    """``--db URL`` alone (``serve`` has a ``--store-timeout`` of its own)."""
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
    from rich.console import Console  # imported when output is printed, not for --help

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 120
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


class CommandError(click.ClickException):
    """A failure the user can act on, printed without a traceback; exit status 2."""

    exit_code = EXIT_ERROR


@contextmanager
def open_sagacity(db_url: str, *, init_schema: bool = False, policy: str | None = None) -> Iterator[Sagacity]:
    """Open the journal for one command; library errors become a clean message and exit 2.

    Only ``init_schema`` (``db init``, ``serve``) may create a database: any other command on a
    SQLite path that does not exist says so, instead of creating an empty file. The database
    is waited for ``--store-timeout`` seconds at most, and the driver's own reconnect warnings
    are kept off the terminal: the one error line says what happened. ``policy``: a guardrails
    policy file whose approver scopes the command's decisions must meet.
    """
    import logging

    from sagacity import Sagacity  # the library, imported when a command runs

    ctx = click.get_current_context(silent=True)
    timeout = ctx.meta.get(_STORE_TIMEOUT) if ctx is not None else None
    if not init_schema:
        _require_existing(db_url)
    logging.getLogger("psycopg").setLevel(logging.CRITICAL)
    options: dict[str, Any] = {"policy": policy} if policy is not None else {}
    if timeout is not None and db_url.split(":", 1)[0].lower() in ("postgresql", "postgres"):
        options |= {"connect_timeout": timeout, "reconnect_timeout": timeout}
    try:
        with limited_wait(timeout), Sagacity(db_url, init_schema=init_schema, **options) as sg:
            yield sg
    except StoreUnavailableError as exc:
        raise CommandError(
            f"cannot reach the journal at {safe_url(db_url)} within --store-timeout {timeout:g} s: {exc}"
        ) from exc
    except SagacityError as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc


def _require_existing(db_url: str) -> None:
    """A SQLite journal must exist before a command that does not create one opens it."""
    if not db_url.lower().startswith("sqlite:"):
        return
    from sagacity.stores.sqlite import path_from_url

    try:
        path = path_from_url(db_url)
    except ConfigurationError as exc:
        raise CommandError(str(exc)) from exc
    if not os.path.exists(path):
        raise CommandError(
            f"no journal at {path}: the file does not exist (check --db or $SAGACITY_URL); "
            f"create one with `sagacity db init --db {db_url}`, or by running a saga"
        )
