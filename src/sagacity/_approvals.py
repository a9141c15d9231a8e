"""Approval gates: suspend an IRREVERSIBLE call, record human decisions, resume at most once.

Every check fails closed and reads the *journal*: the request table is working state that says
what is pending, never what was decided. A decision names the gate's seq and the SHA-256 of the
exact payload decided on, so a request re-made with another payload inherits nothing.

Every decision is fenced (``Engine.decide``): approve, reject, expiry and a resume's INTENT are
each appended right after the journal state they were checked on, or re-checked on the newer
state. So a resume and a reject of one gate, in any two processes, can never both land: whichever
is appended first wins, and the other finds the gate closed and is refused. A rejection, an
expiry or a refused payload is appended in one batch with the start of the saga's compensation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sagacity._compensation import CompensationRun, check_tools, start_rows
from sagacity._compensation import compensate as compensate_saga
from sagacity._effects import Operation
from sagacity._engine import Engine, Row
from sagacity._json import require_storable
from sagacity._payloads import (
    GATE_TOOL,
    ON_REJECT_CONTINUE,
    RESUMES,
    call_payload,
    decision_input,
    decision_payload,
    held_approvals,
    parse_decision_payload,
    require_channel,
    sha256_hex,
)
from sagacity._state import Gate, SagaState
from sagacity._view import expired
from sagacity.chain import utc_now
from sagacity.checks import require_identity, required_reason
from sagacity.errors import (
    ApprovalNotFoundError,
    ApprovalRefusedError,
    ApproverScopeError,
    DefinitionChangedError,
    HaltedError,
    InvalidValueError,
    PayloadMismatchError,
    PolicyError,
    SagaStateError,
    UnknownToolError,
)
from sagacity.guardrails._deny import REFUSED_RESUME, deny_call
from sagacity.guardrails._rules import Action
from sagacity.model import ApprovalDecision, ApprovalRequest, Entry, Phase
from sagacity.tools import ToolSpec

if TYPE_CHECKING:
    from sagacity.guardrails import Verdict

__all__ = [
    "Claim",
    "approve",
    "awaiting_message",
    "claim",
    "expire_due",
    "gate",
    "reject",
    "require_identity",
    "restore_request",
    "scope_of",
    "utc_now",
]


def awaiting_message(spec: ToolSpec, saga_id: str, seq: int, held_by: str = "") -> str:
    """What the model reads instead of a result when a call is gated (``held_by``: the policy
    rule that held it, and why)."""
    why = (
        f"the policy holds it for human approval ({held_by})"
        if held_by
        else ("it is irreversible and needs human approval")
    )
    return (
        f"[AWAITING_APPROVAL] {spec.name} did not run: {why} "
        f"(saga {saga_id!r}, request {seq}). Tell the user it is waiting for approval; do not retry it."
    )


# -- gate ------------------------------------------------------------------------------------------
def gate(
    engine: Engine,
    saga_id: str,
    spec: ToolSpec,
    input: str,
    verdict: Verdict | None = None,
    *,
    requester: str | None = None,
    new_saga: bool = False,
) -> ApprovalRequest:
    """Journal AWAITING_APPROVAL with the exact input (who asked, and the policy's verdict when a
    policy held the call) and store the request (``new_saga``: as the saga's first entry, see
    ``Journal.append``)."""
    extra = verdict.lines if verdict is not None else ""
    entry = engine.journal.append(
        saga_id,
        spec.name,
        Phase.AWAITING_APPROVAL,
        input,
        gate_payload(spec, None, "", requester, extra),
        new_saga=new_saga,
    )
    return store_request(engine, spec, entry, verdict.decision.ttl if verdict is not None else None)


def gate_payload(
    spec: ToolSpec, call_id: str | None, on_reject: str, requester: str | None, extra: str = ""
) -> str:
    """An AWAITING_APPROVAL payload: the call id, the rejection policy, who asked, and the
    tool's separation rule (journaled, so every process enforces the rule the gate was made with),
    then ``extra`` (the guardrails policy's verdict lines)."""
    return call_payload(
        "",
        call_id,
        on_reject,
        requester=requester,
        requester_may_not_approve=spec.excludes_requester,
        approvals=spec.approvals_required,
        definition=spec.definition_hash,
        extra=extra,
    )


def store_request(
    engine: Engine, spec: ToolSpec, entry: Entry, ttl: timedelta | None = None
) -> ApprovalRequest:
    """The approval request for the AWAITING_APPROVAL ``entry``, stored (working state);
    ``ttl``: a policy hold's own time-to-live, which wins over the tool's."""
    if ttl is None:
        ttl = spec.approval_ttl if spec.approval_ttl is not None else engine.approval_ttl
    request = ApprovalRequest(
        entry.saga_id,
        entry.seq,
        spec.name,
        entry.input,
        sha256_hex(entry.input),
        entry.timestamp,
        entry.timestamp + ttl if ttl is not None else None,
    )
    engine.journal.read(engine.store.put_approval_request, request)
    return request


def gate_row(
    spec: ToolSpec,
    input: str,
    call_id: str,
    on_reject: str = "",
    requester: str | None = None,
    extra: str = "",
) -> Row:
    """The AWAITING_APPROVAL of a framework's call, to be appended as a fenced decision
    (``extra``: the policy's verdict lines)."""
    return (
        spec.name,
        Phase.AWAITING_APPROVAL,
        input,
        gate_payload(spec, call_id, on_reject, requester, extra),
    )


def supersede_rows(
    gate: Gate, spec: ToolSpec, input: str, call_id: str, on_reject: str = "", requester: str | None = None
) -> list[Row]:
    """An open gate whose call the framework re-presents with *edited* arguments: the gate is
    rejected (no compensation: nothing ran) and the edited call gated anew, so the edit needs an
    approval of its own. Appended together, fenced."""
    reason = f"superseded: the arguments were edited (new payload sha256 {sha256_hex(input)})"
    return [
        (
            GATE_TOOL,
            Phase.REJECTED,
            decision_input(gate.entry.seq, gate.input_hash),
            decision_payload("", reason),
        ),
        gate_row(spec, input, call_id, on_reject, requester),
    ]


# -- checks ----------------------------------------------------------------------------------------
def refuse_closed(state: SagaState, gate: Gate) -> None:
    """``ApprovalNotFoundError`` if the journal says the gate was resumed or rejected (voided).

    Its request is consumed then, whichever process consumed it and whenever this caller read
    the row: a decision losing a race gets the error it would get a moment later, when the row is
    gone (one documented error per outcome, never 404 or 409 depending on the interleaving).
    """
    where = f"saga {state.saga_id!r} seq {gate.entry.seq}"
    if gate.resumed is not None:
        raise ApprovalNotFoundError(
            f"no pending approval request for {where}: it was already resumed (call seq "
            f"{gate.resumed.intent.seq}); its tool ran or is running"
        )
    if gate.rejection is not None:
        approver, reason = parse_decision_payload(gate.rejection.payload)
        by = f" by {approver}" if approver else ""
        raise ApprovalNotFoundError(
            f"no pending approval request for {where}: it was already rejected{by}"
            + (f" ({reason})" if reason else "")
        )


def open_gate(state: SagaState, request: ApprovalRequest) -> Gate:
    """The gate a request is for, refusing unless the journal says it is still open."""
    where = f"saga {state.saga_id!r} seq {request.journal_seq}"
    found = state.gates.get(request.journal_seq)
    if found is not None:
        refuse_closed(state, found)
    if state.failure is not None or state.finished is not None:
        raise SagaStateError(f"{where}: the saga was compensated; its approval request is void")
    if found is None:
        raise ApprovalRefusedError(f"{where} is not an approval gate in the journal")
    if not request.input_hash:
        raise ApprovalRefusedError(f"{where}: the request has no payload hash")
    if request.input_hash != found.input_hash or sha256_hex(request.input) != request.input_hash:
        # The request table is working state anyone with write access could edit: what may
        # be approved or run is only ever the input the journal's gate entry holds.
        raise ApprovalRefusedError(
            f"{where}: the pending request's payload or hash differs from the journaled gate "
            f"(payload hash {request.input_hash} vs {found.input_hash}); refused"
        )
    return found


def refuse_requester(gate: Gate, approver: str, saga_id: str) -> None:
    """Separation of duties: the principal who asked for a gated call may not approve it, when
    the gate was journaled with that rule (``requester_may_not_approve``)."""
    if gate.requester_may_not_approve and gate.requester is not None and gate.requester == approver:
        raise ApprovalRefusedError(
            f"saga {saga_id!r} seq {gate.entry.seq}: {approver!r} asked for this call (its requester) "
            "and may not approve it (requester_may_not_approve); another approver must decide"
        )


def scope_of(engine: Engine, gate: Gate) -> tuple[tuple[str, ...], frozenset[str]] | None:
    """Who may decide ``gate`` (names as written, identities), None: anyone; nobody while the
    policy does not parse (it fails closed)."""
    if engine.guard is None:
        return None
    try:
        return engine.guard.approvers_for(gate.entry.tool_name, gate.held_by)
    except PolicyError:
        return ((), frozenset())


def refuse_out_of_scope(engine: Engine, gate: Gate, approver: str, saga_id: str) -> None:
    """Approver scopes: when the guardrails policy names who may decide this gate (its hold
    rule's ``approvers``, or ``[approvers]`` for its tool), anyone else is refused, on every
    surface, before anything is journaled. Read from the policy in force at the decision."""
    scope = scope_of(engine, gate)
    if scope is not None and approver not in scope[1]:
        names, _ = scope
        who = ", ".join(names) if names else "nobody while it does not parse"
        raise ApproverScopeError(
            f"saga {saga_id!r} seq {gate.entry.seq}: {approver!r} may not decide this request; "
            f"the policy names {who} as its approvers",
            names,
        )


def refuse_other_payload(gate: Gate, input_hash: str | None, saga_id: str) -> None:
    """A decision taken on what a message showed binds to that payload: if the gate holds
    another (by SHA-256), nothing is decided."""
    if input_hash is not None and input_hash != gate.input_hash:
        raise PayloadMismatchError(
            f"saga {saga_id!r} seq {gate.entry.seq}: the payload decided on (SHA-256 {input_hash}) is not "
            f"the one the gate holds ({gate.input_hash}); nothing was decided"
        )


def required_approvals(engine: Engine, request: ApprovalRequest) -> int | None:
    """Distinct approvers the tool needs (1 unless it declared four eyes or more); None when
    the tool is not imported here, so the number cannot be known."""
    spec = engine.registry.find(request.tool_name)
    return spec.approvals_required if spec is not None else None


def request_of(gate: Gate) -> ApprovalRequest:
    """The request a gate stands for, rebuilt from the journal when its row is gone."""
    entry = gate.entry
    return ApprovalRequest(
        entry.saga_id, entry.seq, entry.tool_name, entry.input, gate.input_hash, entry.timestamp
    )


def restore_request(engine: Engine, gate: Gate) -> ApprovalRequest:
    """Put back the request row of an open gate that has none (its process died between the
    gate's entry and the row, or the row was removed): the journal holds the exact input. It
    expires after the tool's ``approval_ttl`` if the tool is imported here, else the Sagacity's
    (a policy hold's own TTL is not journaled), counted from the gate's entry."""
    spec = engine.registry.find(gate.entry.tool_name)
    ttl = spec.approval_ttl if spec is not None and spec.approval_ttl is not None else engine.approval_ttl
    rebuilt = request_of(gate)
    request = ApprovalRequest(
        rebuilt.saga_id,
        rebuilt.journal_seq,
        rebuilt.tool_name,
        rebuilt.input,
        rebuilt.input_hash,
        rebuilt.created_at,
        rebuilt.created_at + ttl if ttl is not None else None,
    )
    engine.journal.read(engine.store.put_approval_request, request)
    return request


def _refuse_expired(engine: Engine, request: ApprovalRequest) -> Operation[None]:
    """An expired request is expired (REJECTED, compensated) and the caller refused."""
    yield from expire(engine, request)
    raise ApprovalRefusedError(
        f"saga {request.saga_id!r} seq {request.journal_seq}: the request expired at {request.expires_at} UTC"
    )


# -- decisions -------------------------------------------------------------------------------------
def approve(
    engine: Engine, saga_id: str, seq: int, approver: str, via: str = "", input_hash: str | None = None
) -> Operation[ApprovalDecision]:
    """Journal APPROVED by ``approver`` for the gate at ``seq``; approving is not executing.
    ``via``: the channel of a decision taken from a message; ``input_hash``: the payload's
    SHA-256 the approver was shown (another payload is refused)."""
    approver = require_identity(approver)
    via = require_channel(via) if via else ""
    request = engine.request(saga_id, seq)
    if expired(request, utc_now()):
        yield from _refuse_expired(engine, request)
    required = required_approvals(engine, request)

    def choose(state: SagaState) -> list[Row]:
        found = open_gate(state, request)
        refuse_other_payload(found, input_hash, saga_id)
        refuse_requester(found, approver, saga_id)
        approvers = found.approvers(request.input_hash)
        if approver in approvers:
            raise ApprovalRefusedError(f"saga {saga_id!r} seq {seq} was already approved by {approver!r}")
        held = held_approvals(found.entry.payload)
        needed = max(required or 1, held) if required is not None or held else None
        if needed is not None and len(approvers) >= needed:
            # Without the tool imported, and a gate older than its ``approvals=`` line, another
            # distinct approval is recorded rather than refused: resume (which needs the tool)
            # counts them against the real number.
            raise ApprovalRefusedError(f"saga {saga_id!r} seq {seq} is already approved; resume it")
        return [
            (
                GATE_TOOL,
                Phase.APPROVED,
                decision_input(seq, request.input_hash),
                decision_payload(approver, via=via),
            )
        ]

    state = engine.snapshot(saga_id)
    gated = state.gates.get(seq)
    if gated is not None:  # the policy is read here, not in ``choose``, which stays pure
        refuse_out_of_scope(engine, gated, approver, saga_id)
    [entry] = engine.decide(state, choose)
    return ApprovalDecision(saga_id, seq, True, approver, entry.timestamp)


def reject(
    engine: Engine,
    saga_id: str,
    seq: int,
    approver: str,
    reason: str,
    via: str = "",
    input_hash: str | None = None,
) -> Operation[ApprovalDecision]:
    """Reject a pending gate — or an open gate whose request row is gone (a resume that
    crashed before its INTENT) — and compensate. The reason is checked first (one line, not
    blank: the rule the CLI, HTTP and dashboard apply), then the tools, so a missing import
    refuses before anything is journaled."""
    approver = require_identity(approver)
    reason = required_reason(reason)
    payload = decision_payload(approver, reason, require_channel(via) if via else "")
    state = engine.snapshot(saga_id)
    request = engine.find_request(saga_id, seq)
    if request is None:
        found = state.gates.get(seq)
        if found is not None:
            refuse_closed(state, found)
        if found is None or state.failure is not None or state.finished is not None:
            raise ApprovalNotFoundError(f"no pending approval request for saga {saga_id!r} seq {seq}")
        request = request_of(found)
    else:
        open_gate(state, request)
    refuse_other_payload(state.gates[seq], input_hash, saga_id)
    refuse_out_of_scope(engine, state.gates[seq], approver, saga_id)
    entry, run = yield from _close_gate(
        engine,
        state,
        request,
        payload,
        f"approval of seq {seq} rejected by {approver}: {reason or 'no reason'}",
        compensate=not state.gates[seq].continues_on_reject,
        decided_once_by=approver if via else None,
    )
    result = run.result(saga_id) if run is not None else None
    return ApprovalDecision(saga_id, seq, False, approver, entry.timestamp, reason, result)


def _close_gate(
    engine: Engine,
    state: SagaState,
    request: ApprovalRequest,
    payload: str,
    why: str,
    *,
    compensate: bool = True,
    decided_once_by: str | None = None,
) -> Operation[tuple[Entry, CompensationRun | None]]:
    """Journal REJECTED (with ``payload``) for the gate, with the start of the saga's
    compensation in the same batch, then drop the request, then compensate. Refused if the gate
    was closed meanwhile.

    The journal first: a process dying in between leaves a closed gate with a stale row (which
    ``recover`` drops; a resume of it is refused by the journal), never an open gate without its
    request, which nobody could approve.

    With ``compensate`` False (a gate journaled ``on_reject=continue``, rejected or expired) only
    the REJECTED is journaled: the framework tells the model and the saga goes on.

    ``decided_once_by``: a rejection from an approval message (a Slack button, an email link),
    which decides once per person: refused, in the fence, if that person approved the gate
    already — so an approve and a reject of one link racing never both land.
    """
    if compensate:
        check_tools(state, engine.registry)
    seq = request.journal_seq

    def choose(now: SagaState) -> list[Row]:
        found = now.gates.get(seq)
        where = f"saga {now.saga_id!r} seq {seq}"
        if found is None:
            raise ApprovalNotFoundError(f"no approval gate at {where}")
        refuse_closed(now, found)
        if now.failure is not None or now.finished is not None:
            raise SagaStateError(f"{where}: the saga was compensated; its approval request is void")
        if decided_once_by is not None and decided_once_by in found.approvers(request.input_hash):
            raise ApprovalRefusedError(
                f"{where} was approved by {decided_once_by!r} already: an approval message decides "
                "once per person, so it cannot reject it now"
            )
        rejected: Row = (GATE_TOOL, Phase.REJECTED, decision_input(seq, request.input_hash), payload)
        if not compensate:
            return [rejected]
        return [rejected, *start_rows(now, why, deciding=seq)]

    entry, *_ = engine.decide(state, choose)
    engine.drop_request(request.saga_id, seq)  # working state: the fenced entry decided
    if not compensate:
        return entry, None
    run = yield from compensate_saga(engine, request.saga_id, why, state=state)
    return entry, run


def _hold_again(
    engine: Engine, state: SagaState, request: ApprovalRequest, spec: ToolSpec, why: str
) -> ApprovalRequest:
    """The gate is closed (REJECTED ``superseded: <why>``, nothing compensated: nothing ran) and
    the same call gated anew under the tool's current definition, fenced, in one batch: an
    approval never carries over to a tool that is not the one approved."""
    seq = request.journal_seq

    def choose(now: SagaState) -> list[Row]:
        found = open_gate(now, request)
        on_reject = ON_REJECT_CONTINUE if found.continues_on_reject else ""
        return [
            (
                GATE_TOOL,
                Phase.REJECTED,
                decision_input(seq, request.input_hash),
                decision_payload("", f"superseded: {why}"),
            ),
            (
                spec.name,
                Phase.AWAITING_APPROVAL,
                found.entry.input,
                gate_payload(spec, found.call_id, on_reject, found.requester),
            ),
        ]

    landed = engine.decide(state, choose)
    engine.drop_request(request.saga_id, seq)
    return store_request(engine, spec, landed[-1])


def _compensates(state: SagaState, seq: int) -> bool:
    """Whether closing the gate at ``seq`` compensates the saga (unless it says ``continue``)."""
    found = state.gates.get(seq)
    return found is None or not found.continues_on_reject


def expire(engine: Engine, request: ApprovalRequest) -> Operation[bool]:
    """Journal REJECTED (expired) and compensate; False if the gate was decided meanwhile.

    Raises ``UnknownToolError`` before journaling anything if the saga's tools are not
    imported here, so the saga is never left half-compensated.
    """
    state = engine.snapshot(request.saga_id)
    compensates = _compensates(state, request.journal_seq)
    if compensates:
        check_tools(state, engine.registry)
    try:
        yield from _close_gate(
            engine,
            state,
            request,
            decision_payload("", f"expired at {request.expires_at} UTC"),
            f"approval of seq {request.journal_seq} expired at {request.expires_at} UTC",
            compensate=compensates,
        )
    except (ApprovalRefusedError, ApprovalNotFoundError, SagaStateError):
        return False  # a resume, a reject or a compensation got there first; its entry says what
    return True


def expire_due(engine: Engine, now: datetime | None = None) -> Operation[list[ApprovalRequest]]:
    """Expire every request past its time; the expired requests.

    A request whose saga's tools are not imported is left pending and, after the others
    were expired, reported by ``UnknownToolError`` naming them.
    """
    now = now or utc_now()
    done, missing = [], []
    pending = engine.journal.read(engine.store.list_approval_requests, None)
    for request in (r for r in pending if expired(r, now)):
        try:
            if (yield from expire(engine, request)):
                done.append(request)
        except UnknownToolError as exc:
            missing.append(f"saga {request.saga_id!r} seq {request.journal_seq}: {exc}")
    if missing:
        raise UnknownToolError("not expired, import their tools first: " + "; ".join(missing))
    return done


# -- resume ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Claim:
    """A resume that won its gate: the INTENT at ``seq`` is journaled, the tool is to run now.

    Or, with ``refused`` set, a payload that did not match: REJECTED is journaled and the saga
    compensated (``run``).
    """

    request: ApprovalRequest
    spec: ToolSpec
    seq: int = 0
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] | None = None
    refused: str = ""
    run: CompensationRun | None = None
    denied: bool = False  # refused by the guardrails policy, not for a payload mismatch
    #: The saga's START input (its start facts), None for a saga without one: the resumed
    #: run journals the saga's END with it once the work is done.
    started: str | None = None


def _refused_by_policy(
    engine: Engine, state: SagaState, request: ApprovalRequest, spec: ToolSpec, verdict: Verdict, by: str
) -> Operation[Claim]:
    """Journal the policy's refusal of an approved call about to run. A halt: like any call the
    switch refuses (INTENT + FAILED ``denied by policy``, under a first line naming the gate,
    which stays open to resume once lifted), then ``HaltedError``. Otherwise REJECTED, carrying
    the verdict's lines (which policy text refused it, and why), and the saga compensates."""
    seq = request.journal_seq
    if verdict.halts:
        first = f"{REFUSED_RESUME}{seq}{by}"
        deny_call(engine, state.saga_id, spec.name, request.input, verdict, first=first)
        raise HaltedError(f"saga {state.saga_id!r} seq {seq}: resume refused: {verdict.reason}")
    why = f"the policy refused the approved call when it was to run (rule {verdict.rule}): {verdict.reason}"
    refusal = f"{decision_payload('', why)}\n{verdict.lines}"
    _, run = yield from _close_gate(engine, state, request, refusal, f"resume of seq {seq} refused: {why}")
    return Claim(request, spec, refused=why, run=run, denied=True)


def _start_of(state: SagaState) -> str | None:
    return state.start.input if state.start is not None else None


def claim(
    engine: Engine,
    saga_id: str,
    seq: int,
    payload: str,
    resumed_by: str | None,
    *,
    call_id: str | None = None,
) -> Operation[Claim]:
    """Every resume check, in order, failing closed; then the resumed call's fenced INTENT.

    Not found: no pending request. Unknown tool: the tool, or a tool compensation would need, is
    not imported here. Refused: expired, not approved in the journal (by enough distinct
    approvers), rejected, voided — checked again on the newest state if another writer
    appended first. A payload whose SHA-256 differs from the approved one journals REJECTED
    and compensates.
    """
    if not isinstance(payload, str):
        raise InvalidValueError(f"payload must be the input JSON as a str, not {type(payload).__name__}")
    require_storable("payload", payload)  # before anything is consumed: it must be hashable text
    resumed_by = require_identity(resumed_by) if resumed_by is not None else None
    request = engine.request(saga_id, seq)
    if expired(request, utc_now()):
        yield from _refuse_expired(engine, request)
    state = engine.snapshot(saga_id)
    spec = engine.registry.get(request.tool_name)
    where = f"saga {saga_id!r} seq {seq}"
    # A failed or refused resume compensates: every tool it needs must be here before we consume.
    check_tools(state, engine.registry)
    by = f" by={resumed_by}" if resumed_by else ""

    def choose(now: SagaState) -> list[Row]:
        found = open_gate(now, request)
        approvers = found.approvers(request.input_hash)
        needed = max(spec.approvals_required, held_approvals(found.entry.payload))
        if len(approvers) < needed:
            have = f"{len(approvers)} of {needed} approvals" if approvers else "no approval"
            raise ApprovalRefusedError(f"{where} has {have} in the journal for this payload; resume refused")
        first = call_payload(f"{RESUMES}{seq}{by}", call_id, definition=spec.pinned_hash)
        return [(spec.name, Phase.INTENT, payload, first)]

    choose(state)  # every check once before the request is consumed
    live_hash = sha256_hex(payload)
    if live_hash != request.input_hash:
        mismatch = f"payload sha256 {live_hash} differs from the approved {request.input_hash}"
        _, run = yield from _close_gate(
            engine, state, request, decision_payload("", mismatch), f"resume of seq {seq} refused: {mismatch}"
        )
        return Claim(request, spec, refused=mismatch, run=run)
    approved, current = state.gates[seq].definition, spec.definition_hash
    if approved is not None and approved != current:
        held = _hold_again(
            engine, state, request, spec, f"the tool's definition changed ({approved} -> {current})"
        )
        raise DefinitionChangedError(
            f"{where}: {spec.name}'s definition changed since it was approved ({approved} -> {current}); "
            f"nothing ran, the call is held again as request {held.journal_seq} for a new approval",
            held.journal_seq,
        )
    args, kwargs = spec.decode_input(payload)
    guard = engine.guard
    verdict: Verdict | None = None
    if guard is not None:  # the call is made for whoever asked for it, as its gate journaled
        verdict = guard.judge_resume(saga_id, spec.name, payload, state.gates[seq].requester)
    if verdict is not None and verdict.action is not Action.ALLOW:
        return (yield from _refused_by_policy(engine, state, request, spec, verdict, by))
    if verdict is not None:
        extra = verdict.lines
        base = choose

        def choose(now: SagaState) -> list[Row]:
            [(tool_name, phase, text, first)] = base(now)
            return [(tool_name, phase, text, f"{first}\n{extra}")]

    if not engine.drop_request(saga_id, seq):
        if guard is not None and verdict is not None:
            guard.give_back_verdict(saga_id, verdict)
        raise ApprovalNotFoundError(f"{where}: the request was consumed by a concurrent resume")
    [intent] = engine.decide(state, choose)
    return Claim(request, spec, intent.seq, args, kwargs, started=_start_of(state))
