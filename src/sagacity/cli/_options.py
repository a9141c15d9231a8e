"""Options the operator commands share: who decides, which tool modules to import, JSON output.

Bundled as decorators (the sqlite-utils habit) so every command spells them, documents them and
validates them the same way.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import shlex
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import click

from sagacity.cli._common import CommandError
from sagacity.errors import InvalidValueError

F = TypeVar("F", bound=Callable[..., Any])


#: The journal's seq is a BIGINT: a larger number names no entry.
MAX_SEQ = 2**63 - 1


class Digits(click.IntRange):
    """``click.IntRange`` that reads only the digits 0-9.

    ``click.INT`` is Python's ``int()``: it also reads ``" 3"`` and ``"+3"`` as 3, ``"3_0"`` as
    30 and ``"٣"`` as 3, so a command could act on a number other than the one typed.
    """

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not (value.isascii() and value.isdigit()):
            self.fail(
                f"{value!r} is not a whole number written with the digits 0-9 (no sign, space, '_' or '.')",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)


def seq_argument(fn: F) -> F:
    """``SEQ``: the journal seq a command acts on, 1 to 2^63-1, digits only."""
    return click.argument("seq", type=Digits(min=1, max=MAX_SEQ), metavar="SEQ")(fn)


def json_option(fn: F) -> F:
    """``--json``: machine-readable output for scripts instead of tables."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(fn)


def identity_option(fn: F) -> F:
    """``--as NAME``: the identity a decision is journaled under."""
    return click.option(
        "--as",
        "identity",
        metavar="NAME",
        help="Record the decision under NAME (default: the operating-system user running the command).",
    )(fn)


def policy_option(fn: F) -> F:
    """``--policy FILE``: the guardrails policy whose approver scopes a decision must meet."""
    return click.option(
        "--policy",
        metavar="FILE",
        envvar="SAGACITY_POLICY",
        type=click.Path(dir_okay=False),
        help="The guardrails policy (docs/policies.md) whose approver scopes apply (env SAGACITY_POLICY).",
    )(fn)


def resolve_identity(identity: str | None) -> str:
    """``--as NAME`` or the OS user; a decision is never journaled under an empty identity."""
    if identity is None:
        import getpass

        try:
            identity = getpass.getuser()
        except (OSError, KeyError, ImportError) as exc:
            raise CommandError(f"cannot tell which user you are ({exc}); pass --as NAME") from exc
        where = "the operating-system user"
    else:
        where = "--as"
    from sagacity.checks import require_identity

    if not identity or not identity.strip():
        raise CommandError(f"{where} is empty: decisions are recorded under a named identity; pass --as NAME")
    try:
        return require_identity(identity)
    except InvalidValueError as exc:
        raise CommandError(f"{where}: {exc}; nothing was journaled") from exc


def one_line_option(name: str, text: str) -> str:
    """A person's note (``--reason``) as journaled: one line, or exit 2 with nothing journaled."""
    from sagacity.checks import one_line

    try:
        return one_line(name, text)
    except InvalidValueError as exc:
        raise CommandError(f"{exc}; nothing was journaled") from exc


def reason_option(text: str) -> str:
    """``--reason`` of a rejection as journaled: one line, not blank; else exit 2, nothing journaled."""
    from sagacity.checks import required_reason

    try:
        return required_reason(text)
    except InvalidValueError as exc:
        raise CommandError(f"--reason: {exc}; nothing was journaled") from exc


def _import_modules(ctx: click.Context, param: click.Parameter, modules: tuple[str, ...]) -> tuple[str, ...]:
    """Import the user's tool modules so their tools (and compensations) are registered here.

    The working directory goes on ``sys.path`` first, as ``python -m`` would, so a module next to
    the user's code imports without installing it.
    """
    if modules and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # any failure of the user's module is reported
            raise click.BadParameter(f"cannot import {module!r}: {type(exc).__name__}: {exc}") from exc
    return modules


def import_option(fn: F) -> F:
    """``--import MODULE`` (repeatable): register the tools a resume or compensation will call."""
    return click.option(
        "--import",
        "imports",
        metavar="MODULE",
        multiple=True,
        expose_value=False,
        callback=_import_modules,
        help="Import MODULE first so its @tool functions are registered (repeatable; the current "
        "directory is on the import path). Needed to run a tool or compensate a saga.",
    )(fn)


def parse_duration(ctx: click.Context, param: click.Parameter, value: str) -> timedelta:
    """``30s``, ``5m``, ``2h``, ``1d`` or plain seconds, as a timedelta (an option callback)."""
    from sagacity.checks import duration_seconds

    seconds = duration_seconds(value)
    if seconds is None:
        raise click.BadParameter(f"{value!r} is not a duration like 30s, 5m, 2h or 1d")
    return timedelta(seconds=seconds)


def echo_json(value: Any) -> None:
    """JSON for scripts: UTF-8 as is, indented, one document."""
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def output_option(*, ids: str | None = None) -> Callable[[F], F]:
    """``-o/--output table|wide|csv|json`` with ``--json`` (= ``-o json``), ``--no-trunc``
    (= ``-o wide``) and, when ``ids`` says what an id line is, ``-q/--quiet`` (ids only, one a
    line, for pipes). The command receives the choice as ``output``."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def resolved(
            *args: Any, json_flag: bool, no_trunc: bool, ids_only: bool = False, **kwargs: Any
        ) -> Any:
            chosen = kwargs.pop("output")
            wanted = {
                name for name, on in (("json", json_flag), ("wide", no_trunc), ("ids", ids_only)) if on
            } | ({chosen} if chosen is not None else set())
            if len(wanted) > 1:
                raise click.UsageError(f"choose one output: {', '.join(sorted(wanted))} were asked for")
            return fn(*args, output=wanted.pop() if wanted else "table", **kwargs)

        options = [
            click.option(
                "-o",
                "--output",
                type=click.Choice(["table", "wide", "csv", "json"]),
                help="table (long inputs cut to fit), wide (nothing cut), csv (with a header line) "
                "or json (one document, the HTTP API's fields).",
            ),
            click.option("--json", "json_flag", is_flag=True, help="Same as -o json."),
            click.option("--no-trunc", "no_trunc", is_flag=True, help="Same as -o wide."),
        ]
        if ids is not None:
            options.append(
                click.option("-q", "--quiet", "ids_only", is_flag=True, help=f"Print only {ids}, one a line.")
            )
        decorated: Any = resolved
        for option in reversed(options):
            decorated = option(decorated)
        return decorated  # type: ignore[no-any-return]

    return decorate


def parse_moment(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """``--since`` / ``--until``: a time ago (``30m``, ``2h``, ``1d``) or an ISO 8601 date or time
    (``2026-12-01``, ``2026-12-01T09:30``, ``...Z`` or ``...+02:00``; without an offset, UTC)."""
    if value is None:
        return None
    from sagacity.checks import duration_seconds

    text = value.strip()
    seconds = None if text.isdigit() else duration_seconds(text)
    if seconds is not None:
        return datetime.now(UTC) - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither a time ago (30m, 2h, 1d) nor an ISO 8601 date or time "
            "(2026-12-01, 2026-12-01T09:30, 2026-12-01T09:30Z)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def filter_options(*, tool: str, moment: str) -> Callable[[F], F]:
    """``--prefix``, ``--tool``, ``--since``, ``--until``: the library's listing filters, which the
    command receives together as ``filters`` (keyword arguments for ``sg.sagas()`` and the like).
    ``tool`` and ``moment`` say what ``--tool`` keeps and which time ``--since``/``--until``
    compare (e.g. "sagas last updated")."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def bundled(
            *args: Any,
            prefix: str | None,
            tool: str | None,
            since: datetime | None,
            until: datetime | None,
            **kwargs: Any,
        ) -> Any:
            if since is not None and until is not None and since >= until:
                raise click.BadParameter("must be earlier than --until", param_hint="--since")
            filters = {"prefix": prefix, "tool": tool, "since": since, "until": until}
            return fn(*args, filters={k: v for k, v in filters.items() if v is not None}, **kwargs)

        times = "TIME: a time ago (30m, 2h, 1d) or ISO 8601 (2026-12-01T09:30; UTC unless it has an offset)"
        options = [
            click.option(
                "--prefix", metavar="TEXT", help="Only saga ids that start with TEXT (case-sensitive)."
            ),
            click.option("--tool", metavar="NAME", help=tool),
            click.option(
                "--since",
                metavar="TIME",
                callback=parse_moment,
                help=f"Only {moment} at or after TIME. {times}.",
            ),
            click.option(
                "--until", metavar="TIME", callback=parse_moment, help=f"Only {moment} before TIME."
            ),
        ]
        decorated: Any = bundled
        for option in reversed(options):
            decorated = option(decorated)
        return decorated  # type: ignore[no-any-return]

    return decorate


def next_page_hint(command: str, cursor: str, options: dict[str, Any]) -> str:
    """The line under a full page: the command that shows the next one, ``options`` repeated (a
    moment as ISO 8601 UTC, a flag by its name when True, None and False left out), so the
    filters and page size carry over."""
    words = [f"sagacity {command} --after {cursor}"]
    for name, value in options.items():
        if value is None or value is False:
            continue
        if value is True:
            words.append(f"--{name.replace('_', '-')}")
            continue
        text = (
            value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if isinstance(value, datetime) else value
        )
        words.append(f"--{name.replace('_', '-')} {shlex.quote(str(text))}")
    return "next page: " + " ".join(words)
