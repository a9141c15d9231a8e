"""``sagacity doctor``: one command for cron that says whether the journal needs a human."""

from __future__ import annotations

import sys
from datetime import timedelta

import click

from sagacity import FindingKind
from sagacity._doctor import Finding
from sagacity._wire import diagnosis_json
from sagacity.cli._common import EXIT_FINDINGS, console, db_option, open_sagacity
from sagacity.cli._options import echo_json, import_option, output_option, parse_duration
from sagacity.cli._render import JSON, Column, show_rows

_FINDING_COLUMNS = (
    Column("kind"),
    Column("saga"),
    Column("seq", right=True),
    Column("what is wrong", cut=True),
    Column("what to do", cut=True),
)


def _finding_row(f: Finding) -> tuple[str, ...]:
    return (f.kind.value, f.saga_id, "" if f.seq is None else str(f.seq), f.detail, f.action)


@click.command()
@click.option(
    "--older-than",
    default="5m",
    callback=parse_duration,
    show_default=True,
    help="Report unfinished states (in-doubt calls, running compensations, lost requests) only "
    "once they are this old: younger ones are probably still in progress. 30s, 5m, 2h, 1d.",
)
@click.option(
    "--expire",
    is_flag=True,
    help="Journal the expiry of overdue approval requests (REJECTED, reason expired) and compensate "
    "their sagas, instead of only reporting them. Needs --import for the sagas' tools.",
)
@click.option(
    "--ignore",
    type=click.Choice([k.value for k in FindingKind]),
    multiple=True,
    help="Leave out findings of this kind (repeatable), e.g. compensation_failed already handled.",
)
@click.option(
    "--full",
    is_flag=True,
    help="Re-verify every saga's hash chain and fold every journal, not only the sagas the saga "
    "index flags: catches damage no trigger saw (a restored backup, a file edited in place). Takes "
    "time in proportion to the journal.",
)
@import_option
@output_option()
@db_option
def doctor(
    older_than: timedelta, expire: bool, ignore: tuple[str, ...], full: bool, output: str, db_url: str
) -> None:
    """Check every saga for what needs a human; exit 1 when anything does, 0 when all is well.

    Finds in-doubt calls and compensations, overdue approval requests, broken hash chains, sagas
    stuck compensating, failed compensations, and gates whose request was lost, among the sagas
    the saga index flags (so a run takes the same time at any journal size; --full checks every
    saga). Read-only unless --expire. From cron: `sagacity doctor --expire --import myapp.tools || alert`.
    """
    with open_sagacity(db_url) as sg:
        diagnosis = sg.diagnose(older_than=older_than, expire=expire, full=full)
    findings = [f for f in diagnosis.findings if f.kind.value not in ignore]
    if output == JSON:
        echo_json(diagnosis_json(diagnosis, older_than, ignore))
    elif output == "csv":
        show_rows(_FINDING_COLUMNS, [_finding_row(f) for f in findings], output=output)
    else:
        out = console()
        for r in diagnosis.expired:
            out.print(
                f"expired: {r.saga_id} {r.journal_seq} ({r.tool_name}); the saga compensated", markup=False
            )
        if findings:
            show_rows(_FINDING_COLUMNS, [_finding_row(f) for f in findings], output=output, out=out)
            out.print(
                f"[red]{len(findings)} finding(s) need a human[/] ({diagnosis.sagas_checked} sagas checked)"
            )
        else:
            out.print(f"[green]healthy[/]: {diagnosis.sagas_checked} sagas checked, nothing needs a human")
        if diagnosis.recent:
            out.print(
                f"{diagnosis.recent} in-doubt call(s) younger than --older-than left out "
                "(probably still running)"
            )
    if findings:
        sys.exit(EXIT_FINDINGS)
