"""The values Sagacity hands out: phases, statuses, entries, results.

Enum values are the stored spellings, so ``Phase.INTENT == "INTENT"`` and a row's text compares
directly with a member. Every record is a frozen dataclass: what was journaled cannot be edited in
memory either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sagacity._json import unescape_text
from sagacity._paging import encode_cursor
from sagacity.chain import Verification

__all__ = [
    "ApprovalDecision",
    "ApprovalRequest",
    "CallPending",
    "CallRefused",
    "CallRejected",
    "CompensationContext",
    "CompensationOutcome",
    "CompensationStep",
    "Entry",
    "InDoubtCall",
    "JournaledDecision",
    "PendingApproval",
    "Phase",
    "Reversibility",
    "SagaDetail",
    "SagaResult",
    "SagaStatus",
    "SagaSummary",
    "Verification",
]


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
    """

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    COMPENSATING = "COMPENSATING"
    COMPENSATED = "COMPENSATED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    REJECTED = "REJECTED"
    IN_DOUBT = "IN_DOUBT"


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

    @property
    def ready_to_resume(self) -> bool:
        """Enough distinct approvals in the journal, not expired, and the row agrees with the journal."""
        return len(self.approvers) >= self.approvals_required and not self.expired and self.matches_journal


@dataclass(frozen=True, slots=True)
class JournaledDecision:
    """A decision entry of a saga's journal: an approval, rejection or resolution of entry ``decides``.

    ``approver`` is None for the library's own decisions (an expiry, a void, a payload mismatch).
    """

    seq: int
    phase: str
    decides: int | None
    approver: str | None
    reason: str


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
