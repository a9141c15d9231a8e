"""Approval gates: suspend an IRREVERSIBLE call, record human decisions, resume at most once.

Every check fails closed and reads the *journal*: the request table is working state that says
what is pending, never what was decided. A decision names the gate's seq and the SHA-256 of the
exact payload decided on, so a request re-made with another payload inherits nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sagacity._json import require_storable
from sagacity._state import (
    GATE_TOOL,
    Gate,
    SagaState,
    decision_input,
    decision_payload,
    sha256_hex,
)
from sagacity.errors import (
    ApprovalNotFoundError,
    ApprovalRefusedError,
    InvalidValueError,
    SagaStateError,
    UnknownToolError,
)
from sagacity.model import ApprovalDecision, ApprovalRequest, Entry, Phase, SagaStatus
from sagacity.tools import ToolSpec

if TYPE_CHECKING:
    from sagacity._saga import SagaRun
    from sagacity._sagacity import Sagacity

_IDENTITY = re.compile(r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]{1,256}\Z")


def utc_now() -> datetime:
    """Naive UTC with whole microseconds, as the journal stores time."""
    return datetime.now(UTC).replace(tzinfo=None)


def require_identity(approver: str) -> str:
    """A decision is recorded under a named identity: non-empty, one line, at most 256 chars."""
    if not isinstance(approver, str) or not _IDENTITY.match(approver) or not approver.strip():
        raise InvalidValueError(
            "approver must be a non-empty identity of at most 256 characters without control "
            f"characters, got {approver!r}"
        )
    return approver.strip()


def awaiting_message(spec: ToolSpec, saga_id: str, seq: int) -> str:
    """What the model reads instead of a result when a call is gated."""
    return (
        f"[AWAITING_APPROVAL] {spec.name} did not run: it is irreversible and needs human approval "
        f"(saga {saga_id!r}, request {seq}). Tell the user it is waiting for approval; do not retry it."
    )


class Approvals:
    """Gate, decide, resume: the SPEC §6 rules for one Sagacity."""

    def __init__(self, sg: Sagacity) -> None:
        self.sg = sg
        self.journal = sg.journal
        self.store = sg.store

    # -- gate ------------------------------------------------------------------------------------
    def gate(self, run: SagaRun, spec: ToolSpec, input: str) -> str:
        """Journal AWAITING_APPROVAL with the exact input, store the request, tell the model."""
        entry = self.journal.append(run.saga_id, spec.name, Phase.AWAITING_APPROVAL, input)
        ttl = spec.approval_ttl if spec.approval_ttl is not None else self.sg.approval_ttl
        request = ApprovalRequest(
            run.saga_id,
            entry.seq,
            spec.name,
            input,
            sha256_hex(input),
            entry.timestamp,
            entry.timestamp + ttl if ttl is not None else None,
        )
        self.journal.read(self.store.put_approval_request, request)
        run.gated(request)
        return awaiting_message(spec, run.saga_id, entry.seq)

    # -- reading ---------------------------------------------------------------------------------
    def pending(self, saga_id: str | None = None) -> list[ApprovalRequest]:
        return list(self.journal.read(self.store.list_approval_requests, saga_id))

    def request(self, saga_id: str, seq: int) -> ApprovalRequest:
        request = self.journal.read(self.store.get_approval_request, saga_id, seq)
        if request is None:
            raise ApprovalNotFoundError(f"no pending approval request for saga {saga_id!r} seq {seq}")
        return request

    def state(self, saga_id: str) -> SagaState:
        return self.sg._state(saga_id)

    def open_request(self, saga_id: str, seq: int) -> tuple[ApprovalRequest, SagaState, Gate]:
        """The pending request at ``seq`` with the journal's view of it, if it may still be decided.

        Not found without a request; an expired one is expired (REJECTED, compensated) and
        refused; the journal must hold the gate, open, with the request's exact payload.
        """
        request = self.request(saga_id, seq)
        if self.expired(request):
            self.expire(request)
            raise ApprovalRefusedError(
                f"saga {saga_id!r} seq {seq}: the request expired at {request.expires_at} UTC"
            )
        state = self.state(saga_id)
        return request, state, self.open_gate(state, request)

    def open_gate(self, state: SagaState, request: ApprovalRequest) -> Gate:
        """The gate a request is for, refusing unless the journal says it is still open."""
        where = f"saga {state.saga_id!r} seq {request.journal_seq}"
        if state.failure is not None or state.finished is not None:
            raise SagaStateError(f"{where}: the saga was compensated; its approval request is void")
        gate = state.gates.get(request.journal_seq)
        if gate is None:
            raise ApprovalRefusedError(f"{where} is not an approval gate in the journal")
        if gate.rejection is not None:
            raise ApprovalRefusedError(f"{where} was already rejected")
        if gate.resumed is not None:
            raise ApprovalRefusedError(f"{where} was already resumed")
        if not request.input_hash:
            raise ApprovalRefusedError(f"{where}: the request has no payload hash")
        if request.input_hash != gate.input_hash or sha256_hex(request.input) != request.input_hash:
            # The request table is working state anyone with write access could edit: what may
            # be approved or run is only ever the input the journal's gate entry holds.
            raise ApprovalRefusedError(
                f"{where}: the pending request's payload or hash differs from the journaled gate "
                f"(payload hash {request.input_hash} vs {gate.input_hash}); refused"
            )
        return gate

    def expired(self, request: ApprovalRequest, now: datetime | None = None) -> bool:
        return request.expires_at is not None and (now or utc_now()) >= request.expires_at

    # -- decisions -------------------------------------------------------------------------------
    def approve(self, saga_id: str, seq: int, approver: str) -> ApprovalDecision:
        approver = require_identity(approver)
        request, _, gate = self.open_request(saga_id, seq)
        approvers = gate.approvers(request.input_hash)
        if approver in approvers:
            raise ApprovalRefusedError(f"saga {saga_id!r} seq {seq} was already approved by {approver!r}")
        required = self.required(request)
        if required is not None and len(approvers) >= required:
            # Without the tool imported another distinct approval is recorded rather than
            # refused: resume (which needs the tool) counts them against the real number.
            raise ApprovalRefusedError(f"saga {saga_id!r} seq {seq} is already approved; resume it")
        entry = self.journal.append(
            saga_id,
            GATE_TOOL,
            Phase.APPROVED,
            decision_input(seq, request.input_hash),
            decision_payload(approver),
        )
        return ApprovalDecision(saga_id, seq, True, approver, entry.timestamp)

    def required(self, request: ApprovalRequest) -> int | None:
        """Distinct approvers the tool needs (1 unless it declared four eyes or more); None when
        the tool is not imported here, so the number cannot be known."""
        spec = self.sg.registry.find(request.tool_name)
        return spec.approvals_required if spec is not None else None

    def reject(self, saga_id: str, seq: int, approver: str, reason: str = "") -> ApprovalDecision:
        """Reject a pending gate — or an open gate whose request row is gone (a resume that
        crashed before its INTENT) — then compensate. Tools are checked first, so a missing
        import refuses before anything is journaled."""
        approver = require_identity(approver)
        state = self.state(saga_id)
        request = self.journal.read(self.store.get_approval_request, saga_id, seq)
        stranded = request is None
        if request is None:
            gate = state.gates.get(seq)
            if gate is None or not gate.open or state.failure is not None or state.finished is not None:
                raise ApprovalNotFoundError(f"no pending approval request for saga {saga_id!r} seq {seq}")
            request = request_of(gate)
        else:
            self.open_gate(state, request)
        self.sg._compensator.check_tools(state)
        entry = self.decide_rejected(request, decision_payload(approver, reason), stranded=stranded)
        result = self.sg._compensate(
            saga_id, f"approval of seq {seq} rejected by {approver}: {reason or 'no reason'}"
        )
        return ApprovalDecision(saga_id, seq, False, approver, entry.timestamp, reason, result)

    def decide_rejected(self, request: ApprovalRequest, payload: str, *, stranded: bool = False) -> Entry:
        """Journal REJECTED for a request and drop it (once: only one racer deletes it).

        ``stranded``: the gate is open in the journal but its request row is already gone.
        """
        if not stranded and not self.journal.read(
            self.store.delete_approval_request, request.saga_id, request.journal_seq
        ):
            raise ApprovalNotFoundError(
                f"saga {request.saga_id!r} seq {request.journal_seq}: the request was consumed concurrently"
            )
        return self.journal.append(
            request.saga_id,
            GATE_TOOL,
            Phase.REJECTED,
            decision_input(request.journal_seq, request.input_hash),
            payload,
        )

    def void(self, gate: Gate, reason: str) -> None:
        """A compensating saga's open gate can never be approved: reject and drop its request."""
        request = self.journal.read(self.store.get_approval_request, gate.entry.saga_id, gate.entry.seq)
        try:
            self.decide_rejected(
                request or request_of(gate), decision_payload("", f"void: {reason}"), stranded=request is None
            )
        except ApprovalNotFoundError:
            pass  # a concurrent resume or reject took it; its own entry says what happened

    def expire(self, request: ApprovalRequest) -> SagaStatus:
        """Journal REJECTED (expired) for the request and compensate its saga.

        Raises ``UnknownToolError`` before journaling anything if the saga's tools are not
        imported here, so the saga is never left half-compensated.
        """
        self.sg._compensator.check_tools(self.state(request.saga_id))
        try:
            self.decide_rejected(request, decision_payload("", f"expired at {request.expires_at} UTC"))
        except ApprovalNotFoundError:
            return self.sg.status(request.saga_id)
        reason = f"approval of seq {request.journal_seq} expired at {request.expires_at} UTC"
        return self.sg._compensate(request.saga_id, reason).status

    def expire_due(self, now: datetime | None = None) -> list[ApprovalRequest]:
        """Expire every request past its time; the expired requests.

        A request whose saga's tools are not imported is left pending and, after the others
        were expired, reported by ``UnknownToolError`` naming them.
        """
        now = now or utc_now()
        expired, missing = [], []
        for request in (r for r in self.pending() if self.expired(r, now)):
            try:
                self.expire(request)
            except UnknownToolError as exc:
                missing.append(f"saga {request.saga_id!r} seq {request.journal_seq}: {exc}")
            else:
                expired.append(request)
        if missing:
            raise UnknownToolError("not expired, import their tools first: " + "; ".join(missing))
        return expired


@dataclass(frozen=True, slots=True)
class Claim:
    """A request consumed by a resume: the caller now executes ``spec`` (unless ``mismatch``)."""

    request: ApprovalRequest
    spec: ToolSpec
    mismatch: str = ""


def request_of(gate: Gate) -> ApprovalRequest:
    """The request a gate stands for, rebuilt from the journal when its row is gone."""
    entry = gate.entry
    return ApprovalRequest(
        entry.saga_id, entry.seq, entry.tool_name, entry.input, gate.input_hash, entry.timestamp
    )


def claim(approvals: Approvals, saga_id: str, seq: int, payload: str) -> Claim:
    """Every resume check, in order, failing closed; then consume the request (at most once).

    Not found: no pending request. Unknown tool: the tool, or a tool compensation would need, is
    not imported here. Refused: expired, not approved in the journal (by enough
    distinct approvers), rejected, voided. A payload whose SHA-256 differs from the approved one
    journals REJECTED and comes back as a mismatch for the caller to compensate.
    """
    if not isinstance(payload, str):
        raise InvalidValueError(f"payload must be the input JSON as a str, not {type(payload).__name__}")
    require_storable("payload", payload)  # before anything is consumed: it must be hashable text
    request, state, gate = approvals.open_request(saga_id, seq)
    spec = approvals.sg.registry.get(request.tool_name)
    where = f"saga {saga_id!r} seq {seq}"
    # A failed or refused resume compensates: every tool it needs must be here before we consume.
    approvals.sg._compensator.check_tools(state)
    approvers = gate.approvers(request.input_hash)
    if len(approvers) < spec.approvals_required:
        have = f"{len(approvers)} of {spec.approvals_required} approvals" if approvers else "no approval"
        raise ApprovalRefusedError(f"{where} has {have} in the journal for this payload; resume refused")
    if not approvals.journal.read(approvals.store.delete_approval_request, saga_id, seq):
        raise ApprovalNotFoundError(f"{where}: the request was consumed by a concurrent resume")
    live_hash = sha256_hex(payload)
    if live_hash != request.input_hash:
        mismatch = f"payload sha256 {live_hash} differs from the approved {request.input_hash}"
        approvals.journal.append(
            saga_id,
            GATE_TOOL,
            Phase.REJECTED,
            decision_input(seq, request.input_hash),
            decision_payload("", mismatch),
        )
        return Claim(request, spec, mismatch)
    return Claim(request, spec)


def age(since: datetime, now: datetime | None = None) -> timedelta:
    return (now or utc_now()) - since
