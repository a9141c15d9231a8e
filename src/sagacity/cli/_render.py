"""How the operator commands show journal values: tables for people, CSV and JSON for scripts.

The JSON is :mod:`sagacity._wire`'s, the HTTP API's too, so a script can switch between
``sagacity ... --json`` and the server without renaming anything.

Tables never cut what a person acts on (saga ids, seqs, statuses, tools): only columns marked
``cut`` (inputs, payloads, details) are shortened to fit the terminal, and ``-o wide`` keeps them
whole too. A table whose whole columns alone are wider than the terminal is printed wider than
it, for the terminal to wrap, rather than cutting an id.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sagacity.cli._common import console
from sagacity.model import Entry, Phase, SagaStatus

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    Row = Sequence[str | Text]

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
    SagaStatus.ABANDONED: "bold yellow",
}

#: The narrowest a cut column gets before the table is printed wider than the terminal.
CUT_MIN = 12
#: Output formats of a listing command (``-o``); ``ids`` is ``-q``.
TABLE, WIDE, CSV, JSON, IDS = "table", "wide", "csv", "json", "ids"


def when(ts: datetime | None) -> str:
    """A timestamp for people: to the second, marked UTC."""
    return "-" if ts is None else f"{ts:%Y-%m-%d %H:%M:%S} UTC"


def until(expires_at: datetime | None, now: datetime) -> str:
    """``in 3h 5m``, ``EXPIRED 2m ago`` or ``never``."""
    from sagacity.doctor import human_duration

    if expires_at is None:
        return "never"
    if expires_at <= now:
        return f"EXPIRED {human_duration(now - expires_at)} ago"
    return f"in {human_duration(expires_at - now)}"


def cells(*values: str | Text) -> list[Text]:
    """Table cells as literal text: journal values (saga ids, inputs) may hold ``[...]``, never markup."""
    from rich.text import Text

    return [v if isinstance(v, Text) else Text(v) for v in values]


def status_text(status: SagaStatus | str) -> Text:
    from rich.text import Text

    return Text(str(status), style=_STATUS_STYLE.get(SagaStatus(status), ""))


def chain_text(broken_at: int | None) -> Text:
    """A saga list's chain cell: ``ok``, or ``BROKEN at seq N`` (the first entry that fails, by the
    seq the journal shows it under: the zero-based ``broken_at`` plus one)."""
    from rich.text import Text

    if broken_at is None:
        return Text("ok", style="green")
    return Text(f"BROKEN at seq {broken_at + 1}", style="bold red")


def phase_text(phase: Phase | str) -> Text:
    from rich.text import Text

    return Text(str(phase), style=_PHASE_STYLE.get(Phase(phase), ""))


def one_row(text: str) -> str:
    """A value as one line of a table (a line break shows as ``\\n``)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def shorten(text: str, width: int = 60) -> str:
    """One line, at most ``width`` characters (for a line of prose, not a table cell)."""
    line = one_row(text)
    return line if len(line) <= width else line[: width - 1] + "…"


@dataclass(frozen=True)
class Column:
    """A column of a listing: ``cut`` ones (long free text) may be shortened, no other ever is;
    ``wrap`` ones share the room as cut ones do but fold onto more lines, never losing a word
    (an instruction such as doctor's "what to do" is useless cut short)."""

    header: str
    cut: bool = False
    right: bool = False
    wrap: bool = False


def show_rows(
    columns: Sequence[Column],
    rows: Iterable[Row],
    *,
    output: str = TABLE,
    title: str | None = None,
    out: Console | None = None,
) -> None:
    """Print ``rows`` as a table (``table``: cut columns shortened to fit; ``wide``: nothing cut)
    or as CSV with a header line (plain text, nothing cut)."""
    from rich.table import Table
    from rich.text import Text

    lines = [cells(*(one_row(v) if isinstance(v, str) else v for v in row)) for row in rows]
    if output == CSV:
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow([c.header for c in columns])
        writer.writerows([cell.plain for cell in line] for line in lines)
        return
    out = out or console()
    table = Table(title=Text(title) if title else None, title_justify="left")
    natural = [max([len(c.header), *(line[i].cell_len for line in lines)]) for i, c in enumerate(columns)]
    overhead = len(columns) * 3 + 1  # one space either side of each cell, a border between
    room = out.width - overhead
    widths = natural if output == WIDE else _fit(natural, [c.cut or c.wrap for c in columns], room)
    for column, width in zip(columns, widths, strict=True):
        table.add_column(
            column.header,
            justify="right" if column.right else "left",
            no_wrap=not column.wrap,
            overflow="fold" if column.wrap else "ellipsis",
            min_width=width,
            max_width=width,
        )
    for line in lines:
        table.add_row(*line)
    total = sum(widths) + overhead
    width = out.width
    if total > width:  # wider than the terminal: printed whole, for the terminal to wrap
        out.width = total
    try:
        out.print(table, crop=False)
    finally:
        out.width = width


def _fit(natural: list[int], cut: list[bool], room: int) -> list[int]:
    """Column widths: whole ones at their natural width, cut ones sharing what room is left
    (each at least ``CUT_MIN``, never more than it needs)."""
    widths = list(natural)
    left = room - sum(n for n, c in zip(natural, cut, strict=True) if not c)
    flexible = sorted((natural[i], i) for i, c in enumerate(cut) if c)
    for k, (need, i) in enumerate(flexible):
        share = max(CUT_MIN, left // (len(flexible) - k))
        widths[i] = min(need, share)
        left -= widths[i]
    return widths


JOURNAL_COLUMNS = (
    Column("seq", right=True),
    Column("time (UTC)"),
    Column("tool"),
    Column("phase"),
    Column("input", cut=True),
    Column("payload", cut=True),
    Column("hash"),
)


def show_journal(
    entries: Iterable[Entry],
    *,
    title: str | None = None,
    with_time: bool = True,
    output: str = TABLE,
    out: Console | None = None,
) -> None:
    """The journal as people read it: one line per entry, in seq order, phases coloured.

    Inputs and payloads are what gets shortened (``-o wide`` keeps them whole; ``sagacity
    export`` gives the exact text); the hash shows its first 8 hex digits (``wide``: all 64).
    """
    columns = [c for c in JOURNAL_COLUMNS if with_time or c.header != "time (UTC)"]
    rows = []
    for e in entries:
        values: list[str | Text] = [str(e.seq)]
        if with_time:
            values.append(f"{e.timestamp:%Y-%m-%d %H:%M:%S}")
        values += [
            e.tool_name,
            phase_text(e.phase),
            e.input,
            e.payload_text,
            e.hash if output in (WIDE, CSV) else e.hash[:8],
        ]
        rows.append(values)
    show_rows(columns, rows, output=output, title=title, out=out)
