"""The values Sagacity hands out: phases, statuses, entries, results.

Enum values are the stored spellings, so ``Phase.INTENT == "INTENT"`` and a row's text compares
directly with a member. Every record is a frozen dataclass: what was journaled cannot be edited in
memory either.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sagacity._json import unescape_text
from sagacity.chain import Verification

__all__ = [
    "ApprovalRequest",
    "CompensationOutcome",
    "CompensationStep",
    "Entry",
    "Phase",
    "Reversibility",
    "SagaStatus",
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
    """A saga's state, derived from its journal alone."""

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
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


@dataclass(frozen=True, slots=True)
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
