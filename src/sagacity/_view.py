"""A saga's view: the one read model, built from the one fold, that every surface projects.

Pure: a folded :class:`~sagacity._state.SagaState`, its entries, its pending request rows, how
many approvals each tool needs and the time in; a :class:`~sagacity.model.SagaView` out. A saga's
detail, the approval queue, the in-doubt list, the adapters' ``find_call``, the MCP proxy's status
and a workflow run's stages are all read through here, so no surface parses the journal itself
and no two surfaces can disagree about a call, a gate or a decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from sagacity._compensation import undo_preview
from sagacity._payloads import held_approvals, parse_decision_payload, sha256_hex
from sagacity._state import Call, Compensation, Gate, SagaState, misaligned
from sagacity.chain import verify
from sagacity.model import (
    ApprovalGate,
    ApprovalRequest,
    CallStatus,
    CallView,
    CompensationView,
    Entry,
    InDoubtCall,
    JournaledDecision,
    PendingApproval,
    SagaStatus,
    SagaView,
)
from sagacity.tools import ToolRegistry

#: Distinct approvals a tool needs, by tool name (None: the tool is not imported here).
Required = Callable[[str], int | None]


def required_in(registry: ToolRegistry) -> Required:
    """How many approvals each tool in ``registry`` needs."""

    def required(tool_name: str) -> int | None:
        spec = registry.find(tool_name)
        return spec.approvals_required if spec is not None else None

    return required


def expired(request: ApprovalRequest, now: datetime) -> bool:
    """Whether ``request`` is past its time at ``now``."""
    return request.expires_at is not None and now >= request.expires_at


def call_status(call: Call, live: bool = True) -> CallStatus:
    """``live``: a living process runs the saga, so an INTENT without outcome is RUNNING; else
    its process is gone and the call is IN_DOUBT."""
    if call.outcome is None:
        return CallStatus.RUNNING if live else CallStatus.IN_DOUBT
    if call.executed:
        return CallStatus.EXECUTED
    return CallStatus.PASSED if call.passed else CallStatus.FAILED


def call_view(call: Call, live: bool = True) -> CallView:
    e = call.intent
    return CallView(
        e.seq,
        e.tool_name,
        e.input,
        call_status(call, live),
        e.timestamp,
        call.outcome,
        call.call_id,
        call.gate_seq,
        call.resolved_by or None,
    )


def decision(entry: Entry, decides: int | None) -> JournaledDecision:
    """A decision entry's target, approver and reason, as the fold reads them."""
    approver, reason = parse_decision_payload(entry.payload)
    return JournaledDecision(entry.seq, entry.phase, decides, approver or None, reason, entry.timestamp)


def compensation_view(comp: Compensation) -> CompensationView:
    """A compensation as journaled: its INTENT's tool, input and time (the outcome's when it has
    no INTENT) and its outcome."""
    first = comp.intent or comp.outcome
    assert first is not None  # the fold makes one only for an INTENT or an outcome
    started = comp.intent.timestamp if comp.intent is not None else None
    return CompensationView(comp.executed_seq, first.seq, first.tool_name, first.input, started, comp.outcome)


def gate_view(state: SagaState, gate: Gate, required: Required, live: bool = True) -> ApprovalGate:
    e = gate.entry
    needs = required(e.tool_name)
    approvers = tuple(gate.approvers(gate.input_hash))
    needed = max(needs if needs is not None else 1, held_approvals(e.payload))
    resumed = call_view(gate.resumed, live) if gate.resumed is not None else None
    if resumed is not None:
        status = resumed.status
    elif gate.rejection is not None or state.closed:
        status = CallStatus.REJECTED  # rejected, expired, or voided by the saga's compensation
    elif len(approvers) >= needed:
        status = CallStatus.APPROVED
    else:
        status = CallStatus.AWAITING_APPROVAL
    return ApprovalGate(
        e.seq,
        e.tool_name,
        e.input,
        gate.input_hash,
        e.timestamp,
        status,
        approvers,
        needed,
        needs is not None,
        gate.call_id if e.payload else None,
        gate.requester,
        gate.requester_may_not_approve,
        gate.continues_on_reject,
        decision(gate.rejection, e.seq) if gate.rejection is not None else None,
        resumed,
    )


def pending_approval(
    request: ApprovalRequest, gate: ApprovalGate | None, required: Required, now: datetime
) -> PendingApproval:
    """``request`` with its gate's approvals, the tool's requirement and its readiness at ``now``."""
    if gate is None:
        needs = required(request.tool_name)
        return PendingApproval(
            request, (), needs or 1, needs is not None, False, expired(request, now), _waited(request, now)
        )
    matches = (
        gate.open
        and request.input_hash == gate.input_hash
        and sha256_hex(request.input) == request.input_hash
    )
    # Approvals count for the payload they name: a request row naming another payload has none.
    return PendingApproval(
        request,
        gate.approvers if request.input_hash == gate.input_hash else (),
        gate.approvals_required,
        gate.tool_imported,
        matches,
        expired(request, now),
        _waited(request, now),
        gate.requester,
        gate.requester_may_not_approve,
    )


def pending(
    state: SagaState, requests: Iterable[ApprovalRequest], required: Required, now: datetime
) -> list[PendingApproval]:
    """The saga's request rows (of ``state``'s saga) as an approver sees them."""
    found = []
    for request in requests:
        gate = state.gates.get(request.journal_seq)
        found.append(
            pending_approval(request, gate_view(state, gate, required) if gate else None, required, now)
        )
    return found


def in_doubt(state: SagaState, now: datetime) -> list[InDoubtCall]:
    """Calls and compensations of ``state`` with an INTENT and no outcome, oldest first."""
    sid = state.saga_id
    found = [
        InDoubtCall(
            sid,
            c.intent.seq,
            c.intent.tool_name,
            c.intent.input,
            c.intent.timestamp,
            now - c.intent.timestamp,
        )
        for c in state.open_calls
    ]
    for comp in state.open_compensations:
        e = comp.intent
        assert e is not None
        found.append(
            InDoubtCall(
                sid,
                e.seq,
                e.tool_name,
                e.input,
                e.timestamp,
                now - e.timestamp,
                "compensation",
                comp.executed_seq,
            )
        )
    return sorted(found, key=lambda c: c.started_at)


def in_doubt_of(states: Iterable[SagaState], now: datetime) -> list[InDoubtCall]:
    """:func:`in_doubt` over several sagas, oldest first."""
    return sorted((c for s in states for c in in_doubt(s, now)), key=lambda c: c.started_at)


def saga_view(
    state: SagaState,
    entries: Sequence[Entry],
    requests: Iterable[ApprovalRequest],
    registry: ToolRegistry,
    now: datetime,
    *,
    running: bool = False,
) -> SagaView:
    """The saga ``state`` was folded from ``entries``, with its pending ``requests``, at ``now``.

    ``registry`` says how many approvals each tool needs and what its compensation is;
    ``running``: a living process runs the saga, this one or another (``Engine.is_live``): its
    status is RUNNING and nothing is in doubt; else a call without outcome is IN_DOUBT.
    """
    required = required_in(registry)
    calls = {c.intent.seq: call_view(c, running) for c in state.calls}
    gates = {seq: gate_view(state, g, required, running) for seq, g in sorted(state.gates.items())}
    keyed = {
        call_id: calls[found.intent.seq] if isinstance(found, Call) else gates[found.entry.seq]
        for call_id, found in state.keyed.items()
    }
    rows = list(requests)
    return SagaView(
        state.saga_id,
        seen_live(state.status, running),
        tuple(entries),
        verify(entries),
        tuple(calls.values()),
        tuple(gates.values()),
        tuple(decision(e, seq) for e, seq in state.decisions),
        tuple(pending_approval(r, gates.get(r.journal_seq), required, now) for r in rows),
        () if running else tuple(in_doubt(state, now)),
        state.failure.payload_text if state.failure is not None else None,
        tuple(undo_preview(state, registry)),
        state.closed,
        state.compensating,
        not misaligned(state, {r.journal_seq for r in rows}),
        keyed,
        state.principal,
        tuple(sorted(map(compensation_view, state.compensations.values()), key=lambda c: c.seq)),
    )


def _waited(request: ApprovalRequest, now: datetime) -> timedelta:
    return max(timedelta(0), now - request.created_at)


#: Statuses the saga index may hold for a saga that is running right now (it holds what the
#: journal alone says: between two calls ABANDONED, a call in flight IN_DOUBT). A read shows
#: such a saga RUNNING when a living process holds its liveness lease (``seen_live``).
#: COMPLETED is not one: it needs the saga's END (a call after an END opens the saga again), so
#: counting never probes the leases of every finished saga. The one exception is a saga
#: journaled without a START (by an older release) that a process continues: it reads COMPLETED
#: between its calls, as it always did.
MAY_BE_LIVE = frozenset(
    {
        SagaStatus.IN_DOUBT,
        SagaStatus.AWAITING_APPROVAL,
        SagaStatus.COMPENSATING,
        SagaStatus.ABANDONED,  # between two calls in a living process: RUNNING
    }
)


def seen_live(status: SagaStatus, live: bool) -> SagaStatus:
    """The status a read reports: the journal's, or RUNNING while a living process runs it."""
    return SagaStatus.RUNNING if live and status in MAY_BE_LIVE else status
