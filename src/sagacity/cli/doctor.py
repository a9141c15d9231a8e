"""``sagacity doctor``: one command for cron that says whether the journal needs a human."""

from __future__ import annotations

import dataclasses
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

import click

from sagacity.cli._common import EXIT_FINDINGS, CommandError, console, db_option, open_sagacity
from sagacity.cli._options import Digits, echo_json, import_option, output_option, parse_duration
from sagacity.cli._render import JSON, Column, show_rows
from sagacity.errors import SagacityError
from sagacity.model import FindingKind

if TYPE_CHECKING:
    from sagacity import Sagacity
    from sagacity.doctor import Finding

_FINDING_COLUMNS = (
    Column("kind"),
    Column("saga"),
    Column("seq", right=True),
    Column("what is wrong", cut=True),
    Column("what to do", wrap=True),
)


def _finding_row(f: Finding) -> tuple[str, ...]:
    return (f.kind.value, f.saga_id, "" if f.seq is None else str(f.seq), f.detail, f.action)


@click.command()
@click.option(
    "--older-than",
    default="5m",
    callback=parse_duration,
    show_default=True,
    help="Report unfinished states (in-doubt calls, running compensations, lost requests, abandoned "
    "sagas) only once they are this old: younger ones are probably still in progress. 30s, 5m, 2h, 1d.",
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
@click.option(
    "--anchor",
    type=click.Path(file_okay=False),
    help="The checkpoint anchor directory: report how far the journal runs ahead of its last "
    "cosigned log checkpoint. Needs --key.",
)
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help="With --anchor: the log's NAME.pub.")
@click.option(
    "--witness-key",
    "witness_key_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="With --anchor: a witness's public key; only checkpoints with --quorum cosignatures count.",
)
@click.option("--quorum", type=Digits(min=1), help="With --witness-key: default every witness key.")
@click.option(
    "--max-lag",
    type=Digits(min=0),
    default=10000,
    show_default=True,
    help="With --anchor: a finding (checkpoint_lag) when the journal runs more entries ahead than this.",
)
@import_option
@output_option()
@db_option
def doctor(
    older_than: timedelta,
    expire: bool,
    ignore: tuple[str, ...],
    full: bool,
    anchor: str | None,
    key_path: str | None,
    witness_key_paths: tuple[str, ...],
    quorum: int | None,
    max_lag: int,
    output: str,
    db_url: str,
) -> None:
    """Check every saga for what needs a human; exit 1 when anything does, 0 when all is well.

    Finds in-doubt calls and compensations, overdue approval requests, broken hash chains, sagas
    stuck compensating, failed compensations, and gates whose request was lost, among the sagas
    the saga index flags (so a run takes the same time at any journal size; --full checks every
    saga). Read-only unless --expire. From cron: `sagacity doctor --expire --import myapp.tools || alert`.
    With --anchor and --key it also says how many entries the journal runs ahead of the last
    cosigned log checkpoint, and alerts past --max-lag. On a terminal a progress bar shows the
    sagas checked (on stderr; nothing in a pipe).
    """
    from sagacity._wire import diagnosis_json
    from sagacity.doctor import lag_finding

    if anchor is not None and key_path is None:
        raise click.UsageError("--anchor needs --key, the log's public key")
    from sagacity.cli.checkpoint import scan_progress

    with open_sagacity(db_url) as sg, scan_progress("checking") as progress:
        diagnosis = sg.diagnose(older_than=older_than, expire=expire, full=full, progress=progress)
        lag = None
        if anchor is not None and key_path is not None:
            lag = _lag(sg, anchor, key_path, witness_key_paths, quorum)
    if lag is not None:
        found = lag_finding(lag[0], lag[1], max_lag)
        if found is not None:
            diagnosis = dataclasses.replace(diagnosis, findings=[*diagnosis.findings, found])
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
        if lag is not None:
            out.print(
                f"log: the journal holds {lag[0]} entries, {lag[0] - lag[1]} ahead of the last cosigned "
                f"log checkpoint ({lag[1]} entries)",
                markup=False,
            )
        if diagnosis.reconcilable:
            out.print(
                f"{diagnosis.reconcilable} in-doubt call(s) a reconciler could settle: "
                "`sagacity sagas reconcile --import MODULE`",
                markup=False,
            )
        if diagnosis.recent:
            out.print(
                f"{diagnosis.recent} in-doubt call(s) younger than --older-than left out "
                "(probably still running)"
            )
    if findings:
        sys.exit(EXIT_FINDINGS)


def _lag(
    sg: Sagacity, anchor: str, key_path: str, witness_key_paths: tuple[str, ...], quorum: int | None
) -> tuple[int, int]:
    """(entries in the journal, entries under the last log checkpoint with its quorum)."""
    from sagacity.checkpoints import (
        DirectorySink,
        journal_entries,
        last_cosigned,
        load_verifier_key,
        load_witness_key,
    )
    from sagacity.cli.checkpoint import distinct_witnesses

    try:
        key = load_verifier_key(key_path)
        witnesses = [load_witness_key(path) for path in witness_key_paths]
        needed = len(witnesses) if quorum is None else quorum
        if needed > len(witnesses):
            raise click.UsageError(f"--quorum {needed} needs at least {needed} --witness-key")
        distinct_witnesses(witnesses, needed, "--witness-key")
        cosigned = last_cosigned(DirectorySink(anchor).log_checkpoints(key), witnesses, needed)
    except SagacityError as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    return journal_entries(sg), cosigned.size if cosigned is not None else 0
