"""``sagacity demo``: the whole library on the embedded default, in one command."""

from __future__ import annotations

import time

import click
from rich.table import Table

from sagacity._sagacity import Sagacity
from sagacity.cli._common import EXIT_FINDINGS, CommandError, console
from sagacity.model import Entry, Phase, SagaStatus

DEMO_URL = "sqlite:///sagacity-demo.db"

_PHASE_STYLE = {
    Phase.EXECUTED: "green",
    Phase.FAILED: "red",
    Phase.COMPENSATED: "yellow",
    Phase.COMPENSATION_FAILED: "bold red",
    Phase.AWAITING_APPROVAL: "magenta",
    Phase.APPROVED: "cyan",
    Phase.REJECTED: "bold red",
}


def journal_table(entries: list[Entry], title: str = "") -> Table:
    """A saga's journal as a readable table (shared with ``sagas show``)."""
    table = Table(title=title or None, title_justify="left")
    table.add_column("seq", justify="right", no_wrap=True, min_width=3)
    table.add_column("tool", no_wrap=True, max_width=17, min_width=8, overflow="ellipsis")
    table.add_column("phase", no_wrap=True, min_width=19)
    table.add_column("input", no_wrap=True, overflow="ellipsis", max_width=28)
    table.add_column("payload", no_wrap=True, overflow="ellipsis", max_width=30)
    table.add_column("hash", no_wrap=True, min_width=8)
    for e in entries:
        style = _PHASE_STYLE.get(Phase(e.phase), "")
        payload = e.payload_text.replace("\n", "; ")
        table.add_row(
            str(e.seq),
            e.tool_name,
            f"[{style}]{e.phase}[/]" if style else e.phase,
            e.input,
            payload,
            e.hash[:8],
        )
    return table


@click.command()
@click.option(
    "--db",
    "db_url",
    default=DEMO_URL,
    show_default=True,
    metavar="URL",
    help="Where the demo journals (any store URL; it only adds new sagas).",
)
def demo(db_url: str) -> None:
    """Run a scripted order-placing agent: success, failure with compensation, approvals, tampering.

    Uses only the public library calls a user would make, then verifies every chain. No server,
    no API key. Run it again and it adds four new sagas to the same journal.
    """
    from sagacity import _demo

    out = console()
    run_id = time.strftime("%H%M%S")
    try:
        sg = Sagacity(db_url, registry=_demo.demo_tools)
    except Exception as exc:
        raise CommandError(f"cannot open {db_url}: {exc}") from exc
    with sg:
        out.print(f"[bold]Sagacity demo[/] — journal: {sg.url}\n")
        broken = 0
        for number, scene in enumerate(_demo.scenes(run_id), start=1):
            out.rule(f"[bold]{number}. {scene.title}[/]")
            result = sg.run(scene.saga_id, scene.agent)
            out.print(f"agent finished: [bold]{result.status}[/]  value: {result.value!r}")
            if result.error is not None:
                out.print(f"error: {type(result.error).__name__}: {result.error}")
            if scene.after is not None:
                result = scene.after(sg, result, lambda line: out.print(f"  [cyan]>[/] {line}"))
                out.print(f"after the human: [bold]{result.status}[/]  value: {result.value!r}")
                if result.error is not None:
                    out.print(f"error: {type(result.error).__name__}: {result.error}")
            for step in result.report:
                out.print(f"  compensation of seq {step.seq} ({step.tool_name}): {step.outcome}")
            verification = sg.verify(scene.saga_id)
            broken += not verification.valid
            out.print(journal_table(sg.entries(scene.saga_id), title=f"journal of {scene.saga_id}"))
            mark = "[green]✔[/]" if verification.valid else "[red]✘[/]"
            out.print(f"{mark} {verification.message}; status from the journal: {sg.status(scene.saga_id)}\n")
        out.rule("[bold]what happened in the world[/]")
        for event in _demo.world.events:
            out.print(f"  {event}")
        out.print(
            f"\nVerify it yourself: [bold]sagacity verify --db {sg.url}[/]\n"
            f"Export a saga:      [bold]sagacity export --db {sg.url} payment-{run_id}-approved[/]"
        )
        statuses = [sg.status(s.saga_id) for s in _demo.scenes(run_id)]
    expected = [SagaStatus.COMPLETED, SagaStatus.COMPENSATED, SagaStatus.COMPLETED, SagaStatus.COMPENSATED]
    if broken or statuses != expected:
        raise SystemExit(EXIT_FINDINGS)
