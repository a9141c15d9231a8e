"""``sagacity approvals``: see what waits for a human, decide it, resume it.

Every decision is journaled under a named identity (``--as NAME`` or the OS user). Before a
decision the command compares the pending request with the journal's AWAITING_APPROVAL entry:
the request table is working state, the journal is the evidence, and a person must never approve
a payload other than the one the journal holds.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from shlex import quote
from typing import TYPE_CHECKING, Any

import click

from sagacity.chain import utc_now
from sagacity.cli._common import EXIT_FINDINGS, CommandError, console, db_option, open_sagacity
from sagacity.cli._options import (
    Digits,
    echo_json,
    filter_options,
    identity_option,
    import_option,
    json_option,
    next_page_hint,
    output_option,
    policy_option,
    reason_option,
    resolve_identity,
    seq_argument,
)
from sagacity.cli._render import (
    IDS,
    JSON,
    TABLE,
    WIDE,
    Column,
    cells,
    show_journal,
    show_rows,
    status_text,
    until,
    when,
)
from sagacity.errors import UnknownToolError
from sagacity.model import PendingApproval, SagaResult, SagaStatus, SagaView

if TYPE_CHECKING:
    from rich.console import Console

SAGA = click.argument("saga_id", metavar="SAGA_ID")
SEQ = seq_argument
_REQUEST_COLUMNS = (
    Column("saga"),
    Column("seq", right=True),
    Column("tool"),
    Column("input", cut=True),
    Column("requested by"),
    Column("waited"),
    Column("expires"),
    Column("approved by"),
)


@click.group()
def approvals() -> None:
    """Approval requests of irreversible tools: list, show, approve, reject, resume.

    Approving is not executing: `approve` journals the decision, `resume` runs the tool.
    """


def find_request(saga: SagaView, seq: int) -> PendingApproval:
    """The pending request at ``seq``, or an error that says what the journal knows of it."""
    pending = saga.request(seq)
    if pending is not None:
        return pending
    where = f"saga {saga.saga_id!r} seq {seq}"
    gate = saga.gate(seq)
    if gate is None:
        raise CommandError(
            f"{where} is not an approval request (see `sagacity sagas show {quote(saga.saga_id)}`)"
        )
    if gate.resumed is not None:
        raise CommandError(f"{where} was already resumed (call seq {gate.resumed.seq})")
    if gate.rejection is not None:
        by = f" by {gate.rejection.approver}" if gate.rejection.approver else ""
        raise CommandError(f"{where} was rejected{by}: {gate.rejection.reason or 'no reason given'}")
    raise CommandError(f"{where} has no pending request (see `sagacity doctor`)")


def _print_result(result: SagaResult) -> None:
    from rich.text import Text

    out = console()
    out.print(Text.assemble("saga ", result.saga_id, " is ", status_text(result.status)))
    if result.error is not None:
        out.print(f"reason: {type(result.error).__name__}: {result.error}", markup=False)
    for step in result.report:
        extra = f": {step.error}" if step.error else ""
        out.print(f"  seq {step.seq} {step.tool_name}: {step.outcome}{extra}", markup=False)


def requester_text(pending: PendingApproval) -> str:
    """Who asked for the call, and whether that person may approve it."""
    if pending.requester is None:
        return "unknown (no principal was set)"
    if pending.requester_may_not_approve:
        return f"{pending.requester} (may not approve it: requester_may_not_approve)"
    return pending.requester


def approvals_text(pending: PendingApproval) -> str:
    """How many of the approvals the gate needs are journaled, and by whom: ``1 of 2: alice``."""
    count = f"{len(pending.approvers)} of {pending.approvals_required}"
    return f"{count}: {', '.join(pending.approvers)}" if pending.approvers else count


@approvals.command("list")
@click.option("--saga", "saga_id", metavar="SAGA_ID", help="Only this saga's requests.")
@click.option("--limit", type=Digits(min=1), help="At most N requests, the oldest (default: all).")
@click.option(
    "--after",
    metavar="CURSOR",
    help="Go on after this cursor: the next page (printed under a full page, on stderr with -o csv or "
    '-q, or --json\'s "next").',
)
@filter_options(tool="Only requests to run the tool NAME.", moment="requests made")
@click.option(
    "--watch",
    "-w",
    is_flag=True,
    help="Keep the list on screen, read again every --interval seconds, until Ctrl-C (exit 0).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="With --watch: seconds between reads.",
)
@click.option(
    "--mine",
    is_flag=True,
    help="Only requests that want your approval now (--as NAME or the OS user), within --policy's "
    "approver scopes.",
)
@identity_option
@policy_option
@output_option(ids="saga ids and seqs (tab-separated)")
@db_option
def list_(
    saga_id: str | None,
    limit: int | None,
    after: str | None,
    filters: dict[str, Any],
    watch: bool,
    interval: float,
    mine: bool,
    identity: str | None,
    policy: str | None,
    output: str,
    db_url: str,
) -> None:
    """Requests waiting for a decision or a resume, oldest first. Read-only.

    The APPROVED BY column reads the journal: how many of the approvals the gate needs are given
    and by whom (`1 of 2: alice`); a request approved there is waiting for `resume`.
    With --limit the queue comes a page at a time: under a full page a line gives the command
    for the next (the filters repeated). With --watch the table is read again and redrawn until
    Ctrl-C (on a terminal; in a pipe each reading is printed after the last, under a line with
    its time).
    """
    from sagacity._wire import approval_json

    if watch and output not in (TABLE, WIDE):
        raise click.UsageError("--watch draws a table: use it with -o table or -o wide")
    if identity is not None and not mine:
        raise click.UsageError("--as names whose requests to list: use it with --mine")
    if mine:
        filters = {**filters, "awaiting": resolve_identity(identity)}
    with open_sagacity(db_url, policy=policy) as sg:
        if watch:
            _watch(lambda: sg.approvals(saga_id, limit=limit, after=after, **filters), interval, output)
            return
        pending = sg.approvals(saga_id, limit=limit, after=after, **filters)
    full = limit is not None and len(pending) == limit
    if output == JSON:
        # The shape of `sagas list --json`: the page, and the cursor of the next one (or null).
        page = [approval_json(p) for p in pending]
        echo_json({"approvals": page, "limit": limit, "next": pending[-1].cursor if full else None})
        return
    if output == IDS:
        for p in pending:
            click.echo(f"{p.request.saga_id}\t{p.request.journal_seq}")
    else:
        _show_requests(pending, output)
    if full:
        again = {"saga": saga_id, "limit": limit, **filters}
        # Beside machine output (ids, csv) the hint goes to stderr, out of the data.
        out = console(stderr=output not in (TABLE, WIDE))
        out.print(next_page_hint("approvals list", pending[-1].cursor, again), markup=False, soft_wrap=True)


def _show_requests(pending: list[PendingApproval], output: str, out: Console | None = None) -> None:
    from sagacity.doctor import human_duration

    if not pending:
        (out or console()).print("no pending approval requests")
        return
    show_rows(
        _REQUEST_COLUMNS,
        [
            (
                p.request.saga_id,
                str(p.request.journal_seq),
                p.request.tool_name,
                p.request.input,
                p.requester or "-",
                human_duration(p.waiting),
                until(p.request.expires_at, read_at(p)),
                approvals_text(p),
            )
            for p in pending
        ],
        output=output,
        out=out,
    )


def _watch(read: Callable[[], list[PendingApproval]], interval: float, output: str) -> None:
    """Read and show the queue every ``interval`` seconds until Ctrl-C, which ends it cleanly."""
    out = console()
    try:
        while True:
            pending = read()
            if out.is_terminal:
                out.clear()
            now = utc_now()
            out.print(
                f"{when(now)}: {len(pending)} pending; every {interval:g}s, Ctrl-C to stop",
                markup=False,
            )
            _show_requests(pending, output, out)
            time.sleep(interval)
    except KeyboardInterrupt:
        out.print("stopped watching")


@approvals.command()
@SAGA
@SEQ
@output_option()
@db_option
def show(saga_id: str, seq: int, output: str, db_url: str) -> None:
    """One request in full: the exact payload and its SHA-256, its times, the saga's journal so far.

    Read-only. Shows the payload as journaled; a request row that disagrees with the journal is
    flagged (and `approve`/`resume` refuse it).
    """
    from rich.console import Group
    from rich.markup import escape
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.table import Table
    from rich.text import Text

    from sagacity._wire import request_detail_json
    from sagacity.doctor import human_duration

    with open_sagacity(db_url) as sg:
        saga = sg.view(saga_id)
    pending = find_request(saga, seq)
    if output == JSON:
        echo_json(request_detail_json(pending, saga, sg.registry.find(pending.request.tool_name)))
        return
    if output == "csv":
        show_journal(saga.entries, output=output)
        return
    request, verification = pending.request, saga.verification
    now = read_at(pending)
    journaled = next((e.input for e in saga.entries if e.seq == seq), request.input)
    try:
        pretty = json.dumps(json.loads(journaled), indent=2, ensure_ascii=False)
    except ValueError:
        pretty = journaled
    facts = Table.grid(padding=(0, 2))
    facts.add_row(*cells("tool", request.tool_name))
    facts.add_row(*cells("saga", f"{saga_id} ({saga.status})"))
    facts.add_row(
        *cells("requested", f"{when(request.created_at)}, waited {human_duration(pending.waiting)}")
    )
    facts.add_row(*cells("expires", f"{when(request.expires_at)} ({until(request.expires_at, now)})"))
    facts.add_row(*cells("requested by", requester_text(pending)))
    nobody = "" if pending.approvers else ", nobody yet"
    facts.add_row(*cells("approved by", approvals_text(pending) + nobody))
    facts.add_row(*cells("sha256", request.input_hash))
    facts.add_row(
        "journal",
        "payload and hash match the AWAITING_APPROVAL entry"
        if pending.matches_journal
        else "[bold red]MISMATCH: the request row disagrees with the journal's open gate; do not approve[/]",
    )
    facts.add_row(
        "chain",
        "[green]intact[/]" if verification.valid else f"[red]BROKEN: {escape(verification.message)}[/]",
    )
    out = console()
    out.print(
        Panel(
            Group(facts, Syntax(pretty, "json", word_wrap=True, background_color="default")),
            title=Text(f"approval request {saga_id} {seq}"),
            expand=False,
        )
    )
    show_journal(saga.entries, title="journal so far", output=output, out=out)
    undo = saga.undo
    out.print(
        "a rejection would compensate, in this order:" if undo else "a rejection has nothing to compensate"
    )
    for step in undo:
        what = step.compensation or "no compensation declared"
        if not step.imported:
            what = "tool not imported here"
        out.print(f"  seq {step.seq} {step.tool_name} {step.input} -> {what}", markup=False)


@approvals.command()
@SAGA
@SEQ
@identity_option
@policy_option
@import_option
@json_option
@db_option
def approve(
    saga_id: str, seq: int, identity: str | None, policy: str | None, as_json: bool, db_url: str
) -> None:
    """Journal APPROVED for the request at SEQ. This does not run the tool: `resume` does.

    The gate journals how many distinct approvers its tool needs, so the count is known without
    the tool's module: an approval past it is refused (exit 2), and one short of it says "1 of 2".
    """
    from sagacity._wire import decision_json

    approver = resolve_identity(identity)
    with open_sagacity(db_url, policy=policy) as sg:
        request = find_request(sg.view(saga_id), seq).request
        decision = sg.approve(saga_id, seq, approver)
        after = sg.view(saga_id).request(seq)
    if as_json:
        echo_json(decision_json(decision, after, pending=after is not None))
        return
    out = console()
    out.print(f"APPROVED {saga_id} {seq} ({request.tool_name}) by {approver}", markup=False)
    if after is not None and len(after.approvers) < after.approvals_required:
        have, required = len(after.approvers), after.approvals_required
        out.print(f"{have} of {required} approvals; another approver must approve too")
    else:
        out.print(
            "approving is not executing: run "
            f"`sagacity approvals resume {quote(saga_id)} {seq} --import MODULE`",
            markup=False,
        )


@approvals.command()
@SAGA
@SEQ
@click.option(
    "--reason", required=True, help="Why, in one line (required, not blank): journaled with the rejection."
)
@identity_option
@policy_option
@import_option
@json_option
@db_option
def reject(
    saga_id: str, seq: int, reason: str, identity: str | None, policy: str | None, as_json: bool, db_url: str
) -> None:
    """Journal REJECTED for the request at SEQ and compensate the saga's executed steps (once).

    Compensating runs the steps' compensations here, so import their modules with --import.
    Exit status 0 when the saga ends REJECTED (every step undone), or for a gate whose rejection
    lets the saga go on (journaled `on_reject=continue`: nothing is compensated, the agent is told,
    and the saga reads as its run left it, COMPLETED once the run has returned); 1 when it needs a
    human (a compensation failed or is in doubt).
    """
    from rich.text import Text

    from sagacity._wire import decision_json

    approver = resolve_identity(identity)
    reason = reason_option(reason)
    with open_sagacity(db_url, policy=policy) as sg:
        find_request(sg.view(saga_id), seq)
        decision = sg.reject(saga_id, seq, approver, reason)
        goes_on = sg.status(saga_id) if decision.result is None else None
    if as_json:
        echo_json(decision_json(decision))
    else:
        out = console()
        out.print(f"REJECTED {saga_id} {seq} by {approver}: {reason}", markup=False)
        if decision.result is not None:
            _print_result(decision.result)
        elif goes_on is not None:
            told = " (the rejection goes to the agent; nothing compensated)"
            out.print(Text.assemble("saga ", saga_id, " is ", status_text(goes_on), told))
    if decision.result is not None and decision.result.status not in (
        SagaStatus.COMPENSATED,
        SagaStatus.REJECTED,
    ):
        sys.exit(EXIT_FINDINGS)


@approvals.command()
@SAGA
@SEQ
@click.option("--payload", help="The input JSON to run the tool with (default: the request's own input).")
@click.option(
    "--payload-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the input JSON from this file, byte for byte (a trailing newline counts).",
)
@click.option(
    "--reject-on-mismatch",
    is_flag=True,
    help="Submit a payload whose SHA-256 differs from the approved one; the library then journals "
    "REJECTED and compensates the saga. Without it the command refuses and writes nothing.",
)
@identity_option
@import_option
@json_option
@db_option
def resume(
    saga_id: str,
    seq: int,
    payload: str | None,
    payload_file: Path | None,
    reject_on_mismatch: bool,
    identity: str | None,
    as_json: bool,
    db_url: str,
) -> None:
    """Run an approved request's tool, at most once, if the journal holds the approval.

    Import the module defining the tool with --import. Exit status 0 when the saga completes, 1
    when it compensated instead (the tool failed or the payload was refused), 2 when the resume was
    refused (not approved, expired, unknown request or tool) and nothing ran.
    """
    from sagacity._wire import resume_json

    if payload is not None and payload_file is not None:
        raise click.UsageError("give --payload or --payload-file, not both")
    if payload_file is not None:
        try:
            payload = payload_file.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CommandError(f"{payload_file} is not UTF-8: {exc}") from exc
    with open_sagacity(db_url) as sg:
        request = find_request(sg.view(saga_id), seq).request
        payload = request.input if payload is None else payload
        if _sha256(payload) != request.input_hash and not reject_on_mismatch:
            raise CommandError(
                f"the payload's SHA-256 {_sha256(payload)} differs from the approved "
                f"{request.input_hash}; nothing was written. Resume without --payload to run the "
                "approved input, or pass --reject-on-mismatch to submit it (the saga is then rejected "
                "and compensated)"
            )
        try:
            result = sg.resume(saga_id, seq, payload, resumed_by=resolve_identity(identity))
        except UnknownToolError as exc:
            raise CommandError(f"{exc}; pass --import MODULE") from exc
    if as_json:
        echo_json(resume_json(saga_id, seq, result))
    else:
        _print_result(result)
        if result.ok:
            console().print(f"result: {result.value}", markup=False)
    if not result.ok:
        sys.exit(EXIT_FINDINGS)


def read_at(pending: PendingApproval) -> datetime:
    """When ``pending`` was read (its ``waiting`` is as of then)."""
    return pending.request.created_at + pending.waiting


def _sha256(text: str) -> str:
    """The SHA-256 of ``text`` as a request's ``inputHash`` spells it (SPEC §7)."""
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()
