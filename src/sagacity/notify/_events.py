"""What the notifier tells: events read off the journal, each with an id that never changes.

An event's id is a digest of what makes it that event (its kind and the journal facts it is
about: the saga, the gate's seq and the payload's SHA-256, an escalation's delay), never of the
moment it was noticed. Two notifiers that notice the same thing, or one that notices it again
after a restart, name it the same, so a receiver that keeps the ids it has seen drops a resend.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

__all__ = ["Event", "EventKind", "event_id", "iso"]


class EventKind(StrEnum):
    """The events, spelled as receivers see them (``type`` in a webhook body)."""

    APPROVAL_REQUESTED = "approval.requested"
    APPROVAL_REMINDER = "approval.reminder"
    APPROVAL_ESCALATED = "approval.escalated"
    APPROVAL_EXPIRED = "approval.expired"
    APPROVAL_VOIDED = "approval.voided"
    CALL_IN_DOUBT = "call.in_doubt"
    COMPENSATION_FAILED = "compensation.failed"
    SAGA_ABANDONED = "saga.abandoned"
    SWITCH_CHANGED = "switch.changed"
    CHAIN_BROKEN = "chain.broken"


def event_id(kind: EventKind, *facts: object) -> str:
    """``evt_`` and 32 hex digits of SHA-256 over the kind and the facts, separated unambiguously."""
    text = "\x1f".join([str(kind), *(str(f) for f in facts)])
    return "evt_" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def iso(moment: datetime | None) -> str | None:
    """A journal time (naive UTC) as receivers read it: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Event:
    """One thing to tell: its id, kind, where in the journal, when, and what (JSON values)."""

    id: str
    kind: EventKind
    saga_id: str | None
    seq: int | None
    occurred_at: datetime
    data: Mapping[str, Any]

    def body(self) -> dict[str, Any]:
        """The JSON every channel renders (a webhook posts it as is)."""
        return {
            "id": self.id,
            "type": str(self.kind),
            "timestamp": iso(self.occurred_at),
            "sagaId": self.saga_id,
            "seq": self.seq,
            "data": dict(self.data),
        }

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Event:
        """The event back from its body (as the outbox keeps it)."""
        return cls(
            str(body["id"]),
            EventKind(body["type"]),
            body.get("sagaId"),
            body.get("seq"),
            datetime.strptime(str(body["timestamp"]), "%Y-%m-%dT%H:%M:%S.%fZ"),
            dict(body.get("data") or {}),
        )
