"""``sagacity demo``: the whole library on the embedded default, in one command."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time

import click

from sagacity.cli._common import EXIT_FINDINGS, CommandError, console
from sagacity.cli._render import show_journal
from sagacity.model import SagaStatus

DEMO_URL = "sqlite:///sagacity-demo.db"


def this_command() -> str:
    """How to run this same CLI again from here: ``sagacity`` when that name on PATH is this
    program, else its path (``.venv/bin/sagacity`` after ``scripts/demo``, which does not put
    the venv on PATH), or ``python -m sagacity.cli`` when run that way."""
    program = os.path.abspath(sys.argv[0])
    if os.path.basename(program) != "sagacity" or not os.path.isfile(program):
        return f"{sys.executable} -m sagacity.cli"
    found = shutil.which("sagacity")
    if found is not None and os.path.samefile(found, program):
        return "sagacity"
    relative = os.path.relpath(program)
    return program if relative.startswith("..") else relative


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
    from rich.markup import escape

    import sagacity.cli._demo as _demo
    from sagacity import Sagacity

    out = console()
    # The time reads well in a listing; the random suffix keeps two runs in one second apart.
    run_id = f"{time.strftime('%H%M%S')}-{secrets.token_hex(2)}"
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
            out.print(f"agent finished: [bold]{result.status}[/]  value: {escape(repr(result.value))}")
            if result.error is not None:
                out.print(f"error: {type(result.error).__name__}: {escape(str(result.error))}")
            if scene.after is not None:
                result = scene.after(sg, result, lambda line: out.print(f"  [cyan]>[/] {escape(line)}"))
                out.print(f"after the human: [bold]{result.status}[/]  value: {escape(repr(result.value))}")
                if result.error is not None:
                    out.print(f"error: {type(result.error).__name__}: {escape(str(result.error))}")
            for step in result.report:
                out.print(f"  compensation of seq {step.seq} ({step.tool_name}): {step.outcome}")
            verification = sg.verify(scene.saga_id)
            broken += not verification.valid
            show_journal(
                sg.entries(scene.saga_id), title=f"journal of {scene.saga_id}", with_time=False, out=out
            )
            mark = "[green]✔[/]" if verification.valid else "[red]✘[/]"
            out.print(f"{mark} {verification.message}; status from the journal: {sg.status(scene.saga_id)}\n")
        out.rule("[bold]what happened in the world[/]")
        for event in _demo.world.events:
            out.print(f"  {escape(event)}")
        me = escape(this_command())
        out.print(
            f"\nVerify it yourself: [bold]{me} verify --db {sg.url}[/]\n"
            f"Export a saga:      [bold]{me} export --db {sg.url} payment-{run_id}-approved[/]"
        )
        statuses = [sg.status(s.saga_id) for s in _demo.scenes(run_id)]
    expected = [SagaStatus.COMPLETED, SagaStatus.COMPENSATED, SagaStatus.COMPLETED, SagaStatus.REJECTED]
    if broken or statuses != expected:
        raise SystemExit(EXIT_FINDINGS)
