"""``sagacity doctor``: one command for cron that says whether the journal needs a human."""

from __future__ import annotations

import sys
from datetime import timedelta

import click
from rich.table import Table

from sagacity._doctor import FindingKind, diagnose
from sagacity.cli._common import EXIT_FINDINGS, console, db_option, open_sagacity
from sagacity.cli._options import echo_json, import_option, json_option, parse_duration
from sagacity.cli._render import cells, iso, request_json


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
@json_option
@db_option
def doctor(
    older_than: timedelta, expire: bool, ignore: tuple[str, ...], full: bool, as_json: bool, db_url: str
) -> None:
    """Check every saga for what needs a human; exit 1 when anything does, 0 when all is well.

    Finds in-doubt calls and compensations, overdue approval requests, broken hash chains, sagas
    stuck compensating, failed compensations, and gates whose request was lost, among the sagas
    the saga index flags (so a run takes the same time at any journal size; --full checks every
    saga). Read-only unless --expire. From cron: `sagacity doctor --expire --import myapp.tools || alert`.
    """
    with open_sagacity(db_url) as sg:
        diagnosis = diagnose(sg, older_than=older_than, expire=expire, full=full)
    findings = [f for f in diagnosis.findings if f.kind.value not in ignore]
    if as_json:
        echo_json(
            {
                "healthy": not findings,
                "sagasChecked": diagnosis.sagas_checked,
                "recentSkipped": diagnosis.recent,
                "olderThanSeconds": older_than.total_seconds(),
                "expired": [request_json(r) | {"expiredAt": iso(r.expires_at)} for r in diagnosis.expired],
                "findings": [f.to_json() for f in findings],
            }
        )
    else:
        out = console()
        for r in diagnosis.expired:
            out.print(
                f"expired: {r.saga_id} {r.journal_seq} ({r.tool_name}); the saga compensated", markup=False
            )
        if findings:
            table = Table("kind", "saga", "seq", "what is wrong", "what to do")
            for f in findings:
                table.add_row(
                    *cells(f.kind.value, f.saga_id, "" if f.seq is None else str(f.seq), f.detail, f.action)
                )
            out.print(table)
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
