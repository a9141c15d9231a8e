"""How the operator commands show journal values: tables for people, camelCase JSON for scripts.

The JSON is :mod:`sagacity._wire`'s, the HTTP API's too, so a script can switch between
``sagacity ... --json`` and the server without renaming anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from rich.table import Table
from rich.text import Text

from sagacity._doctor import human_duration
from sagacity.model import Entry, Phase, SagaStatus

_PHASE_STYLE = {
    Phase.EXECUTED: "green",
    Phase.FAILED: "red",
    Phase.COMPENSATED: "yellow",
    Phase.COMPENSATION_FAILED: "bold red",
    Phase.AWAITING_APPROVAL: "magenta",
    Phase.APPROVED: "cyan",
    Phase.REJECTED: "red",
}

_STATUS_STYLE = {
    SagaStatus.COMPLETED: "green",
    SagaStatus.COMPENSATED: "yellow",
    SagaStatus.COMPENSATING: "yellow",
    SagaStatus.COMPENSATION_FAILED: "bold red",
    SagaStatus.AWAITING_APPROVAL: "magenta",
    SagaStatus.IN_DOUBT: "bold red",
    SagaStatus.REJECTED: "red",
}


def when(ts: datetime | None) -> str:
    """A timestamp for people: to the second, marked UTC."""
    return "-" if ts is None else f"{ts:%Y-%m-%d %H:%M:%S} UTC"


def until(expires_at: datetime | None, now: datetime) -> str:
    """``in 3h 5m``, ``EXPIRED 2m ago`` or ``never``."""
    if expires_at is None:
        return "never"
    if expires_at <= now:
        return f"EXPIRED {human_duration(now - expires_at)} ago"
    return f"in {human_duration(expires_at - now)}"


def cells(*values: str | Text) -> list[Text]:
    """Table cells as literal text: journal values (saga ids, inputs) may hold ``[...]``, never markup."""
    return [v if isinstance(v, Text) else Text(v) for v in values]


def status_text(status: SagaStatus | str) -> Text:
    return Text(str(status), style=_STATUS_STYLE.get(SagaStatus(status), ""))


def shorten(text: str, width: int = 60) -> str:
    """One line, at most ``width`` characters: tables stay readable; ``show --json`` has it all."""
    line = text.replace("\n", "\\n")
    return line if len(line) <= width else line[: width - 1] + "…"


def journal_table(entries: Iterable[Entry], *, title: str | None = None, with_time: bool = True) -> Table:
    """The journal as people read it: one row per entry, in seq order, phases coloured.

    Long inputs and payloads are cut with an ellipsis rather than wrapped, so one entry stays
    one line; ``sagacity export`` gives the full text.
    """
    table = Table(title=Text(title or ""), title_justify="left")
    table.add_column("seq", justify="right", no_wrap=True, min_width=3)
    if with_time:
        table.add_column("time (UTC)", no_wrap=True, min_width=19)
    table.add_column("tool", no_wrap=True, max_width=20, min_width=14, overflow="ellipsis")
    table.add_column("phase", no_wrap=True, min_width=19)
    table.add_column("input", no_wrap=True, overflow="ellipsis", max_width=28)
    table.add_column("payload", no_wrap=True, overflow="ellipsis", max_width=30)
    table.add_column("hash", no_wrap=True, min_width=8)
    for e in entries:
        values: list[str | Text] = [str(e.seq)]
        if with_time:
            values.append(f"{e.timestamp:%Y-%m-%d %H:%M:%S}")
        values += [
            e.tool_name,
            Text(str(e.phase), style=_PHASE_STYLE.get(Phase(e.phase), "")),
            shorten(e.input),
            shorten(e.payload_text),
            e.hash[:8],
        ]
        table.add_row(*cells(*values))
    return table
