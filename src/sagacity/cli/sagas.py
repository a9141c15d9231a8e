"""``sagacity sagas``: sagas and their journals, and the repairs a human makes after a crash.

``list``/``show``/``in-doubt`` only read. ``resolve`` journals a person's answer to "did this call
happen?" for an INTENT without an outcome, ``reconcile`` the tools' reconcilers' answers;
``recover`` finishes compensations a crash interrupted. They may run compensations, so they take
``--import`` and refuse before writing when a needed tool is not registered. ``audit-effects``
asks the reconcilers whether the world agrees with the journal about finished sagas.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from shlex import quote
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote as quote_path

import click

from sagacity.cli._api import TOKEN_ENV, api_option, post, refuse_with_api
from sagacity.cli._common import EXIT_FINDINGS, CommandError, console, db_option, open_sagacity
from sagacity.cli._options import (
    Digits,
    echo_json,
    filter_options,
    identity_option,
    import_option,
    json_option,
    next_page_hint,
    one_line_option,
    output_option,
    resolve_identity,
    seq_argument,
)
from sagacity.cli._render import IDS, JSON, Column, chain_text, show_journal, show_rows, status_text, when
from sagacity.errors import SagaNotFoundError, UnknownToolError
from sagacity.model import CallStatus, SagaStatus

if TYPE_CHECKING:
    from sagacity import Sagacity

F = TypeVar("F", bound=Callable[..., Any])
_STATUSES = [s.value for s in SagaStatus]
_SAGA_COLUMNS = (
    Column("saga"),
    Column("status"),
    Column("entries", right=True),
    Column("started (UTC)"),
    Column("updated (UTC)"),
    Column("awaiting", right=True),
    Column("in doubt", right=True),
    Column("chain"),
)
_IN_DOUBT_COLUMNS = (
    Column("saga"),
    Column("seq", right=True),
    Column("kind"),
    Column("tool"),
    Column("input", cut=True),
    Column("started"),
    Column("age"),
)


def _timeout_option(then: str) -> Callable[[F], F]:
    """``--timeout SECONDS``: how long a reconciler may take, and what follows when it takes longer."""
    return click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=30.0,
        show_default=True,
        help=f"Seconds a reconciler may take; {then}.",
    )


@click.group()
def sagas() -> None:
    """Sagas and their journals; resolve in-doubt calls, recover interrupted compensations."""


@sagas.command("list")
@click.option(
    "--status",
    type=click.Choice(_STATUSES, case_sensitive=False),
    help="Only sagas with this status.",
)
@click.option("--limit", type=Digits(min=1), default=50, show_default=True, help="At most N sagas.")
@click.option(
    "--after",
    metavar="CURSOR",
    help='Go on after this cursor: the next page (printed under a full page, or --json\'s "next").',
)
@filter_options(tool="Only sagas whose journal has a call of the tool NAME.", moment="sagas last updated")
@click.option(
    "--broken-chain",
    is_flag=True,
    help="Only sagas whose hash chain did not verify (when the index last folded or verified them).",
)
@output_option(ids="saga ids")
@db_option
def list_(
    status: str | None,
    limit: int,
    after: str | None,
    filters: dict[str, Any],
    broken_chain: bool,
    output: str,
    db_url: str,
) -> None:
    """Sagas with their status, most recently updated first, a page at a time. Read-only.

    Read from the saga index, so a page takes the same time however many sagas there are. The
    filters narrow the list (all must hold); the next-page hint repeats them. The chain column
    says BROKEN for a saga whose hash chain did not verify (`sagacity verify SAGA_ID` tells where).
    """
    from sagacity._wire import saga_page_json

    if broken_chain:
        filters = {**filters, "broken_chain": True}
    with open_sagacity(db_url) as sg:
        summaries = sg.sagas(status=status.upper() if status else None, limit=limit, after=after, **filters)
    page = saga_page_json(summaries, limit)
    if output == JSON:
        echo_json(page)
        return
    if output == IDS:
        for s in summaries:
            click.echo(s.saga_id)
        return
    out = console()
    if not summaries:
        out.print("no sagas" + (f" with status {status.upper()}" if status else ""))
        return
    show_rows(
        _SAGA_COLUMNS,
        [
            (
                s.saga_id,
                status_text(s.status),
                str(s.entry_count),
                f"{s.started_at:%Y-%m-%d %H:%M:%S}",
                f"{s.updated_at:%Y-%m-%d %H:%M:%S}",
                str(s.awaiting_approval or ""),
                str(s.in_doubt or ""),
                chain_text(s.chain_broken_at),
            )
            for s in summaries
        ],
        output=output,
    )
    if page["next"] is not None and output != "csv":
        again = {"limit": limit, "status": status, **filters}
        out.print(next_page_hint("sagas list", page["next"], again), markup=False, soft_wrap=True)


@sagas.command()
@click.argument("saga_id", metavar="SAGA_ID")
@output_option()
@db_option
def show(saga_id: str, output: str, db_url: str) -> None:
    """One saga's journal with its status and chain verification. Read-only.

    Exit status 1 when the hash chain is broken, 2 for an unknown saga.
    """
    from rich.markup import escape
    from rich.text import Text

    from sagacity._wire import saga_json
    from sagacity.doctor import human_duration

    with open_sagacity(db_url) as sg:
        saga = sg.view(saga_id)
    status, entries, verification, in_doubt = saga.status, saga.entries, saga.verification, saga.in_doubt
    if output == JSON:
        echo_json(saga_json(saga))
    elif output == "csv":
        show_journal(entries, output=output)
    else:
        out = console()
        show_journal(entries, title=f"saga {saga_id}", output=output, out=out)
        out.print(Text.assemble("status: ", status_text(status)))
        if verification.valid:
            out.print(f"chain: [green]intact[/] ({verification.entry_count} entries)")
        else:
            out.print(
                f"chain: [red]BROKEN at seq {verification.break_at_index + 1}[/]: "
                f"{escape(verification.message)}"
            )
        for call in in_doubt:
            out.print(
                f"[bold red]in doubt[/]: seq {call.seq} {escape(call.tool_name)} ({call.kind}), started "
                f"{human_duration(call.age)} ago; "
                f"`sagacity sagas resolve {escape(quote(saga_id))} {call.seq} ...`"
            )
    if not verification.valid:
        sys.exit(EXIT_FINDINGS)


@sagas.command("in-doubt")
@click.argument("saga_id", metavar="[SAGA_ID]", required=False)
@output_option(ids="saga ids and seqs (tab-separated)")
@db_option
def in_doubt(saga_id: str | None, output: str, db_url: str) -> None:
    """Calls and compensations with an INTENT and no outcome, oldest first. Read-only.

    Their effect is unknown: check the outside world, then `sagacity sagas resolve`. A call that a
    living process is still running is not listed (its saga shows RUNNING). Exit status 1 when any
    is listed.
    """
    from sagacity._wire import in_doubt_json
    from sagacity.doctor import human_duration

    with open_sagacity(db_url) as sg:
        calls = sg.in_doubt(saga_id)
    if output == JSON:
        echo_json([in_doubt_json(c) for c in calls])
    elif output == IDS:
        for c in calls:
            click.echo(f"{c.saga_id}\t{c.seq}")
    elif not calls:
        console().print("no in-doubt calls")
    else:
        show_rows(
            _IN_DOUBT_COLUMNS,
            [
                (
                    c.saga_id,
                    str(c.seq),
                    c.kind if c.compensates_seq is None else f"{c.kind} of seq {c.compensates_seq}",
                    c.tool_name,
                    c.input,
                    when(c.started_at),
                    human_duration(c.age),
                )
                for c in calls
            ],
            output=output,
        )
    if calls:
        sys.exit(EXIT_FINDINGS)


@sagas.command()
@click.argument("saga_id", metavar="SAGA_ID")
@seq_argument
@click.option(
    "--happened/--did-not-happen",
    default=None,
    help="What you found out: the call (or compensation) took effect, or it did not. Required.",
)
@click.option("--result", default="", help="With --happened on a call: its result, journaled as the payload.")
@click.option("--reason", default="", help="How you know; journaled with the resolution.")
@identity_option
@import_option
@api_option
@json_option
@db_option
def resolve(
    saga_id: str,
    seq: int,
    happened: bool | None,
    result: str,
    reason: str,
    identity: str | None,
    api_url: str | None,
    as_json: bool,
    db_url: str,
) -> None:
    """Settle the in-doubt INTENT at SEQ: journal who resolved it and its outcome.

    A call becomes EXECUTED (--happened) or FAILED (--did-not-happen); a compensation COMPENSATED or
    COMPENSATION_FAILED. A saga that was compensating then carries on, which runs compensations
    here: import their modules with --import. Or send the resolution with --api to the process
    that has the tools (an MCP proxy's --api): the compensations run there, nothing is imported
    here. Exit status 0 when the saga reaches a settled status, 1 when it still needs a human.
    """
    if happened is None:
        raise click.UsageError("say what happened: --happened or --did-not-happen")
    if result and not happened:
        raise click.UsageError(
            "--result is the outcome of a call that happened; drop it with --did-not-happen"
        )
    reason = one_line_option("--reason", reason)
    if api_url is not None:
        refuse_with_api(
            click.get_current_context(),
            identity=f"the API journals the principal of ${TOKEN_ENV}'s token",
            imports="the compensations run in the API's process, with its tools",
            db_url="the API's process writes to its own journal",
        )
        answer = post(
            api_url,
            f"/resolve/{quote_path(saga_id, safe='')}/{seq}",
            {"happened": happened, "result": result, "reason": reason},
        )
        _resolved(saga_id, seq, happened, str(answer["resolver"]), SagaStatus(answer["status"]), as_json)
        return
    resolver = resolve_identity(identity)
    with open_sagacity(db_url) as sg:
        try:
            view = sg.view(saga_id)
        except SagaNotFoundError as exc:
            raise CommandError(str(exc)) from exc
        open_seqs = {c.seq for c in view.in_doubt}
        if seq not in open_seqs:
            raise CommandError(
                f"saga {saga_id!r} seq {seq} is not an in-doubt INTENT "
                f"(in doubt: {', '.join(map(str, sorted(open_seqs))) or 'none'})"
            )
        status = sg.resolve_in_doubt(
            saga_id, seq, happened=happened, resolver=resolver, result=result, reason=reason
        )
    _resolved(saga_id, seq, happened, resolver, status, as_json)


def _resolved(
    saga_id: str, seq: int, happened: bool, resolver: str, status: SagaStatus, as_json: bool
) -> None:
    """What ``resolve`` prints, and its exit status: 1 while the saga still needs a human."""
    from rich.text import Text

    if as_json:
        echo_json(
            {"sagaId": saga_id, "seq": seq, "happened": happened, "resolver": resolver, "status": status}
        )
    else:
        verdict = "happened" if happened else "did not happen"
        console().print(
            Text.assemble(
                f"resolved {saga_id} {seq}: {verdict} (by {resolver}); saga is ", status_text(status)
            )
        )
    # ABANDONED too: nothing is in doubt any more, but the saga never ended and a person (or
    # `sagas recover`, which compensates it) must still decide what becomes of it.
    if status in (
        SagaStatus.IN_DOUBT,
        SagaStatus.COMPENSATING,
        SagaStatus.COMPENSATION_FAILED,
        SagaStatus.ABANDONED,
    ):
        sys.exit(EXIT_FINDINGS)


@sagas.command()
@click.argument("saga_id", metavar="[SAGA_ID]", required=False)
@_timeout_option("past them its call stays in doubt")
@import_option
@output_option()
@db_option
def reconcile(saga_id: str | None, timeout: float, output: str, db_url: str) -> None:
    """Ask the reconcilers about in-doubt calls (one saga or all) and settle what they know.

    A tool's reconciler (`@tool.reconcile`, `@tool.reconcile_compensation` for its undo) looks the
    call up in the external system, by its idempotency key. "happened" journals it EXECUTED
    (COMPENSATED for an undo), "did not happen" FAILED (COMPENSATION_FAILED), each with the
    reconciler's name and evidence; a saga that must compensate then does, here: import the tools'
    modules with --import. "unknown", an error or a timeout leave the call for `resolve`. Exit
    status 0 when every call asked about was settled, 1 when any is still in doubt.
    """
    from sagacity._wire import reconciled_json

    with open_sagacity(db_url) as sg:
        done = sg.reconcile(saga_id, timeout=timeout)
    left = [r for r in done if not r.settled and r.answer != "settled_elsewhere"]
    if output == JSON:
        echo_json([reconciled_json(r) for r in done])
    elif not done:
        console().print("no in-doubt calls")
    else:
        show_rows(
            (
                Column("saga"),
                Column("seq", right=True),
                Column("kind"),
                Column("tool"),
                Column("reconciler"),
                Column("answer"),
                Column("journaled"),
                Column("evidence", cut=True),
            ),
            [
                (
                    r.saga_id,
                    str(r.seq),
                    r.kind,
                    r.tool_name,
                    r.reconciler or "-",
                    r.answer,
                    f"{r.outcome}, saga {r.status}" if r.settled else "nothing (still in doubt)",
                    r.evidence,
                )
                for r in done
            ],
            output=output,
        )
    if left:
        sys.exit(EXIT_FINDINGS)


@sagas.command("audit-effects")
@click.argument("saga_id", metavar="[SAGA_ID]", required=False)
@_timeout_option("past them the effect is UNVERIFIABLE")
@identity_option
@import_option
@output_option()
@db_option
def audit_effects(
    saga_id: str | None, timeout: float, identity: str | None, output: str, db_url: str
) -> None:
    """Check the journal against the world: each effect of finished sagas (one saga or all).

    Every EXECUTED call is asked of its tool's reconciler (did it happen?), every COMPENSATED one of
    its undo's reconciler (did the undo happen?): CONFIRMED, DRIFT (the world disagrees), or
    UNVERIFIABLE (no reconciler imported, "unknown", an error, a timeout: never counted as fine).
    The findings are journaled on the chain `sagacity:audit` under --as (or the OS user). Exit
    status 0 when every effect was CONFIRMED, 1 otherwise.
    """
    from sagacity._wire import effect_audit_json
    from sagacity.model import EffectVerdict

    auditor = resolve_identity(identity)
    with open_sagacity(db_url) as sg:
        try:
            found = sg.audit_effects(saga_id, auditor=auditor, timeout=timeout)
        except SagaNotFoundError as exc:
            raise CommandError(str(exc)) from exc
    if output == JSON:
        echo_json([effect_audit_json(f) for f in found])
    elif not found:
        console().print("no effects of finished sagas to audit")
    else:
        show_rows(
            (
                Column("saga"),
                Column("seq", right=True),
                Column("tool"),
                Column("journal says"),
                Column("verdict"),
                Column("reconciler"),
                Column("evidence", cut=True),
            ),
            [
                (
                    f.saga_id,
                    str(f.seq),
                    f.tool_name,
                    f.effect,
                    str(f.verdict),
                    f.reconciler or "-",
                    f.evidence,
                )
                for f in found
            ],
            output=output,
        )
    if any(f.verdict is not EffectVerdict.CONFIRMED for f in found):
        sys.exit(EXIT_FINDINGS)


@sagas.command()
@click.argument("saga_id", metavar="[SAGA_ID]", required=False)
@import_option
@output_option()
@db_option
def recover(saga_id: str | None, output: str, db_url: str) -> None:
    """Finish compensations a crash interrupted, from the journal alone (one saga or all).

    Run it where no other process works on those sagas, e.g. at start-up, with --import for the
    modules defining the sagas' tools. The tools' reconcilers settle the in-doubt calls they can
    first (as `reconcile` does); sagas with an in-doubt call left are left for `resolve`; sagas
    whose tools are not imported are skipped and listed. An open gate whose approval request is
    missing gets it back from the journal (listed, its saga still awaiting approval), and a request
    of a gate the journal closed is dropped. Exit status 0 when every saga it looked at ended
    COMPENSATED, 1 otherwise.
    """
    rows: list[dict[str, object]] = []
    with open_sagacity(db_url) as sg:
        for r in sg.reconcile(saga_id):
            if r.settled:
                rows.append(
                    {
                        "sagaId": r.saga_id,
                        "status": str(sg.status(r.saga_id)),
                        "detail": f"seq {r.seq} {r.outcome} by reconciler {r.reconciler}: {r.evidence}",
                    }
                )
        ids = [saga_id] if saga_id is not None else sg.saga_ids()
        for sid in ids:
            try:
                view = sg.view(sid)
            except SagaNotFoundError as exc:
                raise CommandError(str(exc)) from exc
            if not view.compensating:
                if not view.requests_aligned:
                    rows.append(_align(sg, sid))
                continue
            if any(c.status in (CallStatus.IN_DOUBT, CallStatus.RUNNING) for c in view.calls):
                rows.append(
                    {"sagaId": sid, "status": str(view.status), "detail": "in-doubt call: resolve it"}
                )
                continue
            try:
                results = sg.recover(sid)
            except UnknownToolError as exc:  # refused before anything was journaled
                rows.append({"sagaId": sid, "status": str(view.status), "detail": f"skipped: {exc}"})
                continue
            for result in results:
                steps = ", ".join(f"seq {s.seq} {s.outcome}" for s in result.report)
                rows.append({"sagaId": sid, "status": str(result.status), "detail": steps or "finished"})
    unfinished = [r for r in rows if r["status"] not in (SagaStatus.COMPENSATED, SagaStatus.REJECTED)]
    if output == JSON:
        echo_json(rows)
    elif not rows:
        console().print("nothing to recover")
    else:
        show_rows(
            (Column("saga"), Column("status"), Column("detail", cut=True)),
            [(str(r["sagaId"]), status_text(str(r["status"])), str(r["detail"])) for r in rows],
            output=output,
        )
    if unfinished:
        sys.exit(EXIT_FINDINGS)


def _align(sg: Sagacity, saga_id: str) -> dict[str, object]:
    """``recover`` one saga whose requests differ from its open gates; what it restored or dropped."""
    before = {r.journal_seq for r in sg.pending_approvals(saga_id)}
    sg.recover(saga_id)
    after = {r.journal_seq for r in sg.pending_approvals(saga_id)}
    done = [f"request seq {seq} restored from the journal" for seq in sorted(after - before)]
    done += [f"request seq {seq} dropped (the journal closed its gate)" for seq in sorted(before - after)]
    return {"sagaId": saga_id, "status": str(sg.status(saga_id)), "detail": "; ".join(done) or "aligned"}
