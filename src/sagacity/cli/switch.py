"""``sagacity switch``: the kill switch — halt or drain every agent, one agent or one tool."""

from __future__ import annotations

from datetime import timedelta

import click

from sagacity.cli._common import db_option, open_sagacity
from sagacity.cli._options import (
    echo_json,
    identity_option,
    json_option,
    one_line_option,
    parse_duration,
    resolve_identity,
)


def _change_options(fn: click.decorators.FC) -> click.decorators.FC:
    """What every change takes: whom it is for, why, who makes it, and the journal."""
    fn = db_option(fn)
    fn = identity_option(fn)
    fn = click.option("--reason", default="", help="Why (journaled, one line).")(fn)
    fn = click.option("--tool", default=None, help="Only calls of this tool.")(fn)
    return click.option("--agent", default=None, help="Only this agent's sagas and calls.")(fn)


@click.group()
def switch() -> None:
    """The kill switch (docs/policies.md): every change is journaled with who made it."""


def _set(
    state: str,
    tool: str | None,
    agent: str | None,
    ttl: timedelta | None,
    reason: str,
    identity: str | None,
    db_url: str,
) -> None:
    by = resolve_identity(identity)
    reason = one_line_option("reason", reason)
    with open_sagacity(db_url) as sg:
        setting = sg.kill_switch.set(state, by=by, tool=tool, agent=agent, ttl=ttl, reason=reason)
    click.echo(f"journaled at {setting.seq}: {setting.describe()}")


def _setter(state: str, doc: str) -> click.Command:
    @_change_options
    @click.option(
        "--ttl",
        default=None,
        callback=lambda c, p, v: parse_duration(c, p, v) if v else None,
        help="Lift by itself after this long: 30m, 2h, 1d.",
    )
    def command(
        tool: str | None,
        agent: str | None,
        ttl: timedelta | None,
        reason: str,
        identity: str | None,
        db_url: str,
    ) -> None:
        _set(state, tool, agent, ttl, reason, identity, db_url)

    command.__doc__ = doc
    return click.command(name=state)(command)


switch.add_command(
    _setter(
        "halt",
        "Halt: no saga starts, and running sagas get their next call refused and compensate "
        "(for one tool: its calls are refused and the saga compensates).",
    )
)
switch.add_command(
    _setter(
        "drain",
        "Drain: no saga starts, running sagas go on and finish (for one tool: its calls are denied).",
    )
)


@switch.command()
@_change_options
def lift(tool: str | None, agent: str | None, reason: str, identity: str | None, db_url: str) -> None:
    """Lift a halt or drain (of everyone, or of the --tool / --agent given)."""
    _set("lift", tool, agent, None, reason, identity, db_url)


@switch.command()
@json_option
@db_option
def status(as_json: bool, db_url: str) -> None:
    """The settings in force now."""
    from sagacity._wire import switch_json

    with open_sagacity(db_url) as sg:
        settings = sg.kill_switch.in_force()
    if as_json:
        echo_json([switch_json(s) for s in settings])
        return
    if not settings:
        click.echo("the kill switch is off: nothing is halted or drained")
    for setting in settings:
        click.echo(setting.describe())
