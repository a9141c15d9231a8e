"""The values Sagacity hands out: phases, statuses, entries, results.

Enum values are the stored spellings, so ``Phase.INTENT == "INTENT"`` and a row's text compares
directly with a member. Every record is a frozen dataclass: what was journaled cannot be edited in
memory either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sagacity._json import unescape_text
from sagacity._paging import ApprovalRequestKey, encode_cursor, encode_request_cursor
from sagacity.chain import Verification

__all__ = [
    "ApprovalDecision",
    "ApprovalGate",
    "ApprovalRequest",
    "CallPending",
    "CallRefused",
    "CallRejected",
    "CallStatus",
    "CallView",
    "CompensationContext",
    "CompensationOutcome",
    "CompensationStep",
    "CompensationView",
    "EffectAudit",
    "EffectVerdict",
    "Entry",
    "InDoubtCall",
    "JournaledDecision",
    "PendingApproval",
    "Phase",
    "Progress",
    "ReconcileContext",
    "Reconciled",
    "Reconciliation",
    "Reversibility",
    "SagaDetail",
    "SagaResult",
    "SagaStatus",
    "SagaSummary",
    "SagaView",
    "UndoStep",
    "Verification",
]

#: Called after each saga a long pass reads: (sagas done, sagas in all, entries read so far).
Progress = Callable[[int, int, int], None]


class Phase(StrEnum):
    """What an entry records (SPEC §2)."""

    INTENT = "INTENT"
    EXECUTED = "EXECUTED"
    FAILED = "FAILED"
    COMPENSATED = "COMPENSATED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"


class Reversibility(StrEnum):
    """Whether a tool's effect can be undone by a declared compensation."""

    COMPENSATABLE = "COMPENSATABLE"
    IRREVERSIBLE = "IRREVERSIBLE"


class SagaStatus(StrEnum):
    """A saga's state, derived from its journal alone.

    ``RUNNING`` is reported for a saga a living process runs right now (it is never journaled: on
    a store with liveness leases every process sees it, else only the process running it);
    ``COMPENSATING`` means a compensation run began and has not finished (``Sagacity.recover``
    finishes it); ``IN_DOUBT`` means a call or compensation started, has no journaled outcome,
    and no living process runs its saga: a human must resolve it.
    ``ABANDONED`` is a saga that was started and never ended, with nothing in flight or awaiting
    approval, and no living process runs it: its process died between calls (or could not journal
    how it ended); ``recover`` compensates or reports it, as its start facts say. ``REJECTED`` is
    a saga that a rejection (a human's, an expiry, a refused resume) ended and whose every step
    was undone. Sagas journaled without a start entry (older versions, other implementations) are
    never ABANDONED or REJECTED: they read as they always did.
    """

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    COMPENSATING = "COMPENSATING"
    COMPENSATED = "COMPENSATED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    REJECTED = "REJECTED"
    IN_DOUBT = "IN_DOUBT"
    ABANDONED = "ABANDONED"


class FindingKind(StrEnum):
    """What a finding is about; the value is what ``--json`` prints and ``--ignore`` takes."""

    IN_DOUBT_CALL = "in_doubt_call"
    IN_DOUBT_COMPENSATION = "in_doubt_compensation"
    EXPIRED_APPROVAL = "expired_approval"
    BROKEN_CHAIN = "broken_chain"
    STUCK_COMPENSATING = "stuck_compensating"
    COMPENSATION_FAILED = "compensation_failed"
    GATE_WITHOUT_REQUEST = "gate_without_request"
    CHECKPOINT_LAG = "checkpoint_lag"
    ABANDONED_SAGA = "abandoned_saga"


class CallStatus(StrEnum):
    """Where one tool call stands, as its journal says (:class:`CallView`, :class:`ApprovalGate`).

    A call: ``RUNNING`` (its INTENT has no outcome yet, and a living process runs its saga),
    ``IN_DOUBT`` (its INTENT has no outcome and no living process runs the saga: its process
    died mid-call, a person must resolve it), ``EXECUTED``, ``FAILED``, or ``PASSED`` (closed
    without being a failure: the framework's control flow left the tool, or the guardrails
    policy denied it; nothing ran).
    A gated call, until it is resumed: ``AWAITING_APPROVAL``, ``APPROVED`` (enough distinct
    approvals of its payload, not run yet) or ``REJECTED`` (rejected, expired, or voided because
    the saga compensated); once resumed, the resumed call's status.
    """

    RUNNING = "RUNNING"
    IN_DOUBT = "IN_DOUBT"
    EXECUTED = "EXECUTED"
    FAILED = "FAILED"
    PASSED = "PASSED"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"


class CompensationOutcome(StrEnum):
    """What happened to one executed step when its saga compensated."""

    COMPENSATED = "COMPENSATED"
    SKIPPED = "SKIPPED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"


@dataclass(frozen=True, slots=True, init=False)
class Entry:
    """One journal row, exactly as stored and hashed (SPEC §2).

    ``timestamp`` is naive UTC with whole microseconds. ``payload`` is the journaled text; a
    value that no store could hold verbatim (it held NUL or an unpaired surrogate) is journaled
    escaped, and :attr:`payload_text` gives the original back.
    """

    saga_id: str
    seq: int
    tool_name: str
    phase: str
    input: str
    payload: str
    timestamp: datetime
    hash: str

    def __init__(
        self,
        saga_id: str,
        seq: int,
        tool_name: str,
        phase: str,
        input: str,
        payload: str,
        timestamp: datetime,
        hash: str,
    ) -> None:
        # The generated __init__ of a frozen class sets each field through object.__setattr__;
        # the slots' own setters do the same in two thirds of the time, and every append and
        # every row read builds an Entry.
        _set_saga_id(self, saga_id)
        _set_seq(self, seq)
        _set_tool_name(self, tool_name)
        _set_phase(self, phase)
        _set_input(self, input)
        _set_payload(self, payload)
        _set_timestamp(self, timestamp)
        _set_hash(self, hash)

    @property
    def payload_text(self) -> str:
        """The payload as the tool produced it, with any storage escaping undone."""
        return unescape_text(self.payload)

    def to_json(self) -> dict[str, Any]:
        """The export form (SPEC §7): camelCase names, timestamp as ``...ffffffZ``."""
        return {
            "sagaId": self.saga_id,
            "seq": self.seq,
            "toolName": self.tool_name,
            "phase": str(self.phase),
            "input": self.input,
            "payload": self.payload,
            "timestamp": self.timestamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "hash": self.hash,
        }


(
    _set_saga_id,
    _set_seq,
    _set_tool_name,
    _set_phase,
    _set_input,
    _set_payload,
    _set_timestamp,
    _set_hash,
) = (vars(Entry)[name].__set__ for name in Entry.__slots__)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A pending approval: working state beside the journal, not evidence."""

    saga_id: str
    journal_seq: int
    tool_name: str
    input: str
    input_hash: str
    created_at: datetime
    expires_at: datetime | None = None

    @property
    def queue_key(self) -> ApprovalRequestKey:
        """What places it in the approval queue, whatever the order (and a cursor keeps)."""
        return ApprovalRequestKey(
            self.created_at, self.saga_id, self.journal_seq, self.expires_at, self.tool_name
        )


@dataclass(frozen=True, slots=True)
class CompensationStep:
    """One executed step met by a compensation run, with what became of it."""

    seq: int
    tool_name: str
    outcome: CompensationOutcome
    error: str = ""


@dataclass(frozen=True, slots=True)
class CompensationContext:
    """What a compensation receives: the original call, as journaled.

    ``seq`` is the seq of the original call's INTENT (its idempotency key derives from it) and
    ``executed_seq`` the seq of the EXECUTED entry being undone; ``input`` is the journaled JSON,
    ``args`` the same decoded, ``result`` the journaled payload.
    """

    saga_id: str
    seq: int
    tool_name: str
    input: str
    args: dict[str, Any]
    result: str
    executed_seq: int
    idempotency_key: str


@dataclass(frozen=True, slots=True)
class SagaResult:
    """How a saga ended. ``run`` returns it instead of raising for the work's failures.

    ``value`` is what the work (or a resumed tool) returned; ``error`` the exception that made the
    saga compensate; ``report`` one step per executed call met by compensation, in the order
    compensated; ``awaiting`` the approval requests the saga is suspended on.
    """

    saga_id: str
    status: SagaStatus
    value: Any = None
    error: BaseException | None = None
    report: tuple[CompensationStep, ...] = ()
    awaiting: tuple[ApprovalRequest, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True when the saga completed without compensating."""
        return self.status is SagaStatus.COMPLETED


@dataclass(frozen=True, slots=True)
class InDoubtCall:
    """A call (or compensation) whose INTENT has no journaled outcome: its effect is unknown.

    ``kind`` is ``"call"`` or ``"compensation"``; for a compensation, ``compensates_seq`` names
    the EXECUTED entry it was undoing.
    """

    saga_id: str
    seq: int
    tool_name: str
    input: str
    started_at: datetime
    age: timedelta
    kind: str = "call"
    compensates_seq: int | None = None


@dataclass(frozen=True, slots=True)
class ReconcileContext:
    """What a reconciler receives: the journaled call it is asked about.

    ``kind`` is ``"call"`` (did the call happen?) or ``"compensation"`` (did its undo happen?).
    ``seq`` is the original call's INTENT seq and ``idempotency_key`` derives from it, the key the
    tool sent; ``started_at`` is when the INTENT (of the compensation, for an undo) was journaled.
    For an undo, ``result`` is the call's journaled result and ``executed_seq`` its EXECUTED seq.
    """

    saga_id: str
    seq: int
    tool_name: str
    input: str
    args: dict[str, Any]
    idempotency_key: str
    started_at: datetime
    kind: str = "call"
    result: str = ""
    executed_seq: int | None = None


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """A reconciler's answer: the external system says the effect ``happened`` (with the call's
    ``result``), ``did_not_happen``, or cannot tell (``unknown``). ``evidence`` is what it saw
    (the external reference: a transfer id, a status line); it is journaled, one line.

    Build it with :meth:`happened`, :meth:`did_not_happen` or :meth:`unknown`."""

    answer: str
    evidence: str = ""
    result: str = ""

    @classmethod
    def happened(cls, evidence: str, result: str = "") -> Reconciliation:
        """The effect is there; ``result`` is journaled as the call's result (EXECUTED)."""
        return cls("happened", evidence, result)

    @classmethod
    def did_not_happen(cls, evidence: str) -> Reconciliation:
        """The external system has no such effect (it never received the call)."""
        return cls("did_not_happen", evidence)

    @classmethod
    def unknown(cls, evidence: str = "") -> Reconciliation:
        """The external system cannot tell: the call stays in doubt for a human."""
        return cls("unknown", evidence)


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What ``Sagacity.reconcile`` did with one in-doubt call or compensation.

    ``answer`` is the reconciler's (``happened``, ``did_not_happen``, ``unknown``) or why there is
    none: ``error`` (it raised), ``timeout``, ``no_reconciler``, ``settled_elsewhere`` (another
    process settled the call first). ``settled`` says whether this call journaled the outcome
    ``outcome`` (EXECUTED / FAILED, COMPENSATED / COMPENSATION_FAILED); ``status`` is the saga's
    status afterwards."""

    saga_id: str
    seq: int
    tool_name: str
    kind: str
    answer: str
    reconciler: str
    evidence: str
    settled: bool
    outcome: str = ""
    status: SagaStatus | None = None


class EffectVerdict(StrEnum):
    """What an effect audit found for one journaled effect."""

    #: The external system agrees with the journal.
    CONFIRMED = "CONFIRMED"
    #: The external system disagrees (an effect the journal says happened is not there, or an
    #: undo the journal says ran was never seen).
    DRIFT = "DRIFT"
    #: Nothing could check it: no reconciler, an ``unknown`` answer, an error or a timeout.
    UNVERIFIABLE = "UNVERIFIABLE"


@dataclass(frozen=True, slots=True)
class EffectAudit:
    """One journaled effect as an audit found it: the call at ``seq`` (INTENT) of ``tool_name``,
    journaled as ``effect`` (``EXECUTED``, or ``COMPENSATED`` for an undone call), and the
    ``verdict`` with the reconciler asked and its evidence (or why nothing could check it)."""

    saga_id: str
    seq: int
    tool_name: str
    effect: str
    verdict: EffectVerdict
    reconciler: str
    evidence: str


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """A journaled APPROVED or REJECTED decision on one gate.

    ``result`` is set for a rejection: how the saga's compensation went.
    """

    saga_id: str
    journal_seq: int
    approved: bool
    approver: str
    decided_at: datetime
    reason: str = ""
    result: SagaResult | None = None


@dataclass(frozen=True, slots=True)
class SagaSummary:
    """One saga at a glance, as ``Sagacity.sagas`` lists it."""

    saga_id: str
    status: SagaStatus
    entry_count: int
    started_at: datetime
    updated_at: datetime
    awaiting_approval: int = 0
    in_doubt: int = 0
    #: Zero-based index of the first entry that breaks the saga's hash chain, as found when the
    #: saga index last folded or a verification last read it; None while the chain verifies.
    chain_broken_at: int | None = None

    @property
    def chain_valid(self) -> bool:
        """Whether the hash chain verified when last read (``chain_broken_at`` is None)."""
        return self.chain_broken_at is None

    @property
    def cursor(self) -> str:
        """Where a page ending with this saga ends: ``Sagacity.sagas(after=...)`` goes on from it."""
        return encode_cursor(self.updated_at, self.saga_id)


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A pending request as an approver sees it: who approved it so far and whether it may run.

    Read at one moment (``waiting`` and ``expired`` are as of then). ``approvers`` are the
    distinct people whose APPROVED in the journal names this exact payload; ``approvals_required``
    is the tool's number, 1 when the tool is not imported in this process (``tool_imported`` is
    then False and a resume here is refused). ``matches_journal`` is False when the request row
    disagrees with the journal's open AWAITING_APPROVAL entry: approve and resume refuse it.
    ``requester`` is who asked for the call (the saga's principal, from the journaled gate; None
    when none was known); with ``requester_may_not_approve`` that person's approval is refused.
    """

    request: ApprovalRequest
    approvers: tuple[str, ...]
    approvals_required: int
    tool_imported: bool
    matches_journal: bool
    expired: bool
    waiting: timedelta
    requester: str | None = None
    requester_may_not_approve: bool = False
    #: Who the guardrails policy lets decide it, as written (identities, ``group:<name>``); None:
    #: the policy names no one, so anyone with the approver role may. ``()``: nobody can tell
    #: (the policy does not parse), so nobody may.
    scope: tuple[str, ...] | None = None
    #: The identities ``scope`` stands for (groups expanded), read with it.
    scope_members: frozenset[str] | None = field(default=None, repr=False)

    def may_decide(self, approver: str) -> bool:
        """Whether the policy lets ``approver`` approve or reject this request."""
        return self.scope_members is None or approver in self.scope_members

    @property
    def ready_to_resume(self) -> bool:
        """Enough distinct approvals in the journal, not expired, and the row agrees with the journal."""
        return len(self.approvers) >= self.approvals_required and not self.expired and self.matches_journal

    @property
    def cursor(self) -> str:
        """Where a queue page ending with this request ends: ``Sagacity.approvals(after=...)``
        goes on from it."""
        return encode_request_cursor(self.request.queue_key)

    def awaits(self, approver: str) -> bool:
        """Whether ``approver``'s approval is wanted now: not expired, agreeing with the journal,
        short of approvals, not yet approved by them, not theirs to refuse as its requester, and
        within the policy's approver scope."""
        return (
            not self.expired
            and self.matches_journal
            and len(self.approvers) < self.approvals_required
            and approver not in self.approvers
            and not (self.requester_may_not_approve and self.requester == approver)
            and self.may_decide(approver)
        )


@dataclass(frozen=True, slots=True)
class ApprovalPage:
    """A page of the approval queue: its requests, how many the filters keep in all, and, when
    the page is full, the cursor the next page starts after (that page may be empty)."""

    items: list[PendingApproval]
    total: int
    next: str | None


@dataclass(frozen=True, slots=True)
class JournaledDecision:
    """A decision entry of a saga's journal: an approval, rejection or resolution of entry ``decides``.

    ``approver`` is None for the library's own decisions (an expiry, a void, a payload mismatch);
    ``decided_at`` is the decision entry's timestamp.
    """

    seq: int
    phase: str
    decides: int | None
    approver: str | None
    reason: str
    decided_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SagaDetail:
    """Everything an operator reads about one saga: its journal and what the journal says now."""

    saga_id: str
    status: SagaStatus
    entries: tuple[Entry, ...]
    verification: Verification
    decisions: tuple[JournaledDecision, ...]
    pending: tuple[PendingApproval, ...]
    in_doubt: tuple[InDoubtCall, ...]


@dataclass(frozen=True, slots=True)
class CallView:
    """One tool call of a saga: its INTENT (``seq``) and, once journaled, its outcome.

    ``status`` is RUNNING, EXECUTED, FAILED or PASSED (:class:`CallStatus`); ``outcome`` the
    EXECUTED or FAILED entry; ``call_id`` the agent framework's id of the call, if it had one;
    ``gate_seq`` the approval gate it resumes; ``resolved_by`` who settled it when it was in doubt.
    """

    seq: int
    tool_name: str
    input: str
    status: CallStatus
    started_at: datetime
    outcome: Entry | None = None
    call_id: str | None = None
    gate_seq: int | None = None
    resolved_by: str | None = None

    @property
    def result(self) -> str | None:
        """The EXECUTED payload (the journaled result), storage escaping undone."""
        return (
            self.outcome.payload_text
            if self.outcome is not None and self.status is CallStatus.EXECUTED
            else None
        )

    @property
    def error(self) -> str | None:
        """The FAILED payload of a failed or passed call (what went wrong, or why it passed)."""
        if self.outcome is None or self.status not in (CallStatus.FAILED, CallStatus.PASSED):
            return None
        return self.outcome.payload_text


@dataclass(frozen=True, slots=True)
class ApprovalGate:
    """An AWAITING_APPROVAL entry at ``seq`` and what became of it.

    ``approvers`` are the distinct people whose APPROVED names this gate's payload;
    ``approvals_required`` how many must (the tool's number, or more if a guardrails rule held
    the call; 1 when the tool is not imported here, ``tool_imported`` then False). ``status`` is
    AWAITING_APPROVAL, APPROVED, REJECTED, or once resumed the resumed call's (``resumed``).
    ``rejection`` is the REJECTED decision (None for a gate voided by a compensation not yet
    journaled); ``continues_on_reject``: a rejection tells the model and the saga goes on.
    """

    seq: int
    tool_name: str
    input: str
    input_hash: str
    requested_at: datetime
    status: CallStatus
    approvers: tuple[str, ...] = ()
    approvals_required: int = 1
    tool_imported: bool = True
    call_id: str | None = None
    requester: str | None = None
    requester_may_not_approve: bool = False
    continues_on_reject: bool = False
    rejection: JournaledDecision | None = None
    resumed: CallView | None = None

    @property
    def open(self) -> bool:
        """Still waiting for approvals or a resume: neither rejected nor resumed."""
        return self.status in (CallStatus.AWAITING_APPROVAL, CallStatus.APPROVED)


@dataclass(frozen=True, slots=True)
class UndoStep:
    """A step a compensation started now would run, shown to a person before they reject.

    ``compensation`` is the function's name (None: the tool declares none, nothing to undo);
    ``imported`` is False when the tool is not imported here, so neither is known (and a
    rejection here would be refused before anything is journaled)."""

    seq: int
    tool_name: str
    input: str
    result: str
    compensation: str | None
    imported: bool


@dataclass(frozen=True, slots=True)
class CompensationView:
    """The compensation of the call whose EXECUTED entry is ``executed_seq``, as journaled.

    ``started_at`` is its INTENT's time (None: journaled without one, by an older release);
    ``outcome`` the COMPENSATED or COMPENSATION_FAILED entry once known (None: running, or in
    doubt once its process is gone); ``seq`` its INTENT's seq (its outcome's without one)."""

    executed_seq: int
    seq: int
    tool_name: str
    input: str
    started_at: datetime | None
    outcome: Entry | None = None

    @property
    def succeeded(self) -> bool | None:
        """True: COMPENSATED; False: COMPENSATION_FAILED; None: no outcome yet."""
        return None if self.outcome is None else self.outcome.phase == Phase.COMPENSATED


@dataclass(frozen=True, slots=True)
class SagaView:
    """One saga as its journal tells it, read at one moment: what ``Sagacity.view`` returns.

    Every surface (``saga_detail``, ``approvals``, ``in_doubt``, the adapters' ``find_call``, the
    MCP proxy's status, workflow runs) is a projection of this one view, so they cannot disagree.
    ``status`` is RUNNING while the saga is live in this process. ``calls`` are the tool calls in
    INTENT order (compensations are not calls); ``gates`` the approval gates in seq order;
    ``decisions`` every decision entry; ``pending`` the saga's pending approval requests as an
    approver sees them; ``in_doubt`` the calls and compensations with no outcome (none while the
    saga is live here); ``failure`` why its compensation started, if it did; ``closed`` whether
    it can take no new call (its compensation started, or it ended); ``undo`` what compensating
    it now would run, in order (shown before a person rejects).
    """

    saga_id: str
    status: SagaStatus
    entries: tuple[Entry, ...]
    verification: Verification
    calls: tuple[CallView, ...]
    gates: tuple[ApprovalGate, ...]
    decisions: tuple[JournaledDecision, ...]
    pending: tuple[PendingApproval, ...]
    in_doubt: tuple[InDoubtCall, ...]
    failure: str | None = None
    #: What compensating the saga now would run, in order (a rejection's preview).
    undo: tuple[UndoStep, ...] = ()
    #: Compensation started or the saga ended: no new call may begin in it.
    closed: bool = False
    #: Its compensation started (or is due after a failed call) and has not finished: what
    #: ``Sagacity.recover`` finishes once no call is left in doubt.
    compensating: bool = False
    #: Every open gate has its pending request and no request is of a gate the journal closed;
    #: False after a crash between a gate's entry and its request (``recover`` aligns them).
    requests_aligned: bool = True
    #: The framework's call id -> the latest call or gate journaled under it (see :meth:`find`).
    keyed: Mapping[str, CallView | ApprovalGate] = field(default_factory=dict, repr=False, compare=False)
    #: The principal the saga was started for (its START's), None when it journals none.
    principal: str | None = None
    #: The compensations journaled, in the order they started (a timeline's undo steps).
    compensations: tuple[CompensationView, ...] = ()

    @property
    def valid(self) -> bool:
        """Whether the saga's hash chain verifies."""
        return self.verification.valid

    @property
    def started_at(self) -> datetime:
        return self.entries[0].timestamp

    @property
    def updated_at(self) -> datetime:
        return self.entries[-1].timestamp

    def request(self, seq: int) -> PendingApproval | None:
        """The pending approval request at ``seq``, if there is one."""
        return next((p for p in self.pending if p.request.journal_seq == seq), None)

    def gate(self, seq: int) -> ApprovalGate | None:
        """The gate at ``seq``, if there is one."""
        return next((g for g in self.gates if g.seq == seq), None)

    def find(self, call_id: str) -> CallView | ApprovalGate | None:
        """The latest call or gate journaled under the framework's ``call_id`` (a gate, once
        resumed, stands for its resumed call: see ``ApprovalGate.resumed``)."""
        return self.keyed.get(call_id)


@dataclass(frozen=True, slots=True)
class CallPending:
    """A framework's call of an IRREVERSIBLE tool that did not run: it waits for approval.

    What a journaled framework call returns instead of a result (``sagacity.framework``);
    ``message`` is the ``[AWAITING_APPROVAL]`` text for the model.
    """

    request: ApprovalRequest
    message: str
    call_id: str


@dataclass(frozen=True, slots=True)
class CallRejected:
    """A framework's gated call that a human rejected (or that expired) under the policy
    ``on_reject="continue"``: the saga goes on and the model is told ``message``."""

    saga_id: str
    journal_seq: int
    approver: str
    reason: str
    message: str
    call_id: str


@dataclass(frozen=True, slots=True)
class CallRefused:
    """A framework's re-presented call refused without running and without failing the saga:
    its arguments differ from those the call id was journaled (and done) with, or the call id is
    still running elsewhere or in doubt. ``message`` tells the model; nothing was journaled."""

    saga_id: str
    call_id: str
    reason: str
    message: str
