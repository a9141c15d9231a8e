"""Reading events off the journal: the approval queue, the doctor's findings, the kill switch.

Events are derived from what the store holds now, never from a log of their own, so a notifier
started late still tells of every request that waits. Reads are cheap where they run often: the
approval queue is one read of the request table and the kill switch one read of its tail per
poll; the doctor's scan (in doubt, failed compensations, abandoned sagas, broken chains) walks
only the sagas the saga index flags, and runs every ``scan``. A saga is folded only for an event
not told yet (to say who asked, how many must approve, under which rule).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sagacity._payloads import GATE_TOOL, parse_decision_payload
from sagacity.guardrails import SWITCH_SAGA, parse_verdict
from sagacity.model import ApprovalRequest, FindingKind, Phase
from sagacity.notify._config import NotifyConfig
from sagacity.notify._events import Event, EventKind, event_id, iso
from sagacity.notify._routing import amount_of

if TYPE_CHECKING:
    from sagacity._sagacity import Sagacity

__all__ = ["RequestKey", "Watcher"]

#: A gate's request as events name it: (saga id, gate seq, payload SHA-256).
RequestKey = tuple[str, int, str]
Known = Callable[[str], bool]


class Watcher:
    """Derives events from one ``Sagacity``'s store; ``known(event_id)`` says what was told."""

    def __init__(self, sg: Sagacity, config: NotifyConfig) -> None:
        self.sg = sg
        self.config = config
        self._closed: set[RequestKey] = set()  # announced requests whose end was looked up

    # -- the approval queue ------------------------------------------------------------------------
    def requests(self, now: datetime, known: Known) -> tuple[list[Event], set[RequestKey]]:
        """Events of the pending requests (requested, reminder, escalations, expired), and the
        keys of every request pending now."""
        events: list[Event] = []
        pending = self.sg.pending_approvals()
        keys = {(r.saga_id, r.journal_seq, r.input_hash) for r in pending}
        remind = self.config.remind_before
        for request in pending:
            key = (request.saga_id, request.journal_seq, request.input_hash)
            expires = request.expires_at
            due: list[tuple[EventKind, str, dict[str, Any]]] = []
            if expires is not None and now >= expires:
                due.append((EventKind.APPROVAL_EXPIRED, event_id(EventKind.APPROVAL_EXPIRED, *key), {}))
            else:
                due.append((EventKind.APPROVAL_REQUESTED, event_id(EventKind.APPROVAL_REQUESTED, *key), {}))
                if remind is not None and expires is not None and now >= expires - remind:
                    due.append((EventKind.APPROVAL_REMINDER, event_id(EventKind.APPROVAL_REMINDER, *key), {}))
                for after in self.config.escalation_steps():
                    if now - request.created_at >= after:
                        seconds = after.total_seconds()
                        extra = {"afterSeconds": seconds}
                        due.append(
                            (
                                EventKind.APPROVAL_ESCALATED,
                                event_id(EventKind.APPROVAL_ESCALATED, *key, seconds),
                                extra,
                            )
                        )
            fresh = [(kind, eid, extra) for kind, eid, extra in due if not known(eid)]
            if fresh:
                data = self._request_data(request)
                events.extend(
                    Event(eid, kind, request.saga_id, request.journal_seq, now, {**data, **extra})
                    for kind, eid, extra in fresh
                )
        return events, keys

    def _request_data(self, request: ApprovalRequest) -> dict[str, Any]:
        """What an approver must see: the tool, the exact payload and its SHA-256, who asked, how
        many must approve, who did, until when, under which rule, for how much."""
        views = [
            p
            for p in self.sg.approvals(saga_id=request.saga_id)
            if p.request.journal_seq == request.journal_seq
        ]
        gate = self.sg.journal.read(self.sg.store.get_entry, request.saga_id, request.journal_seq)
        verdict = parse_verdict(gate.payload) if gate is not None else None
        try:
            arguments = json.loads(request.input)
        except ValueError:
            arguments = None
        amount = amount_of(arguments.get(self.config.amount_field)) if isinstance(arguments, dict) else None
        view = views[0] if views else None
        return {
            "tool": request.tool_name,
            "input": request.input,
            "inputHash": request.input_hash,
            "requester": view.requester if view is not None else None,
            "approvalsRequired": view.approvals_required if view is not None else 1,
            "approvers": list(view.approvers) if view is not None else [],
            "requestedAt": iso(request.created_at),
            "expiresAt": iso(request.expires_at),
            "rule": verdict.decision.rule if verdict is not None else None,
            "amount": str(amount) if amount is not None else None,
        }

    def ended(
        self,
        announced: Iterable[tuple[RequestKey, dict[str, Any]]],
        pending: set[RequestKey],
        now: datetime,
        known: Known,
    ) -> list[Event]:
        """Requests told of that left the queue: expired or voided, as their REJECTED says (a
        request approved, resumed or rejected by a person ends without an event). Each is
        looked up once per process."""
        events = []
        for key, data in announced:
            if key in pending or key in self._closed:
                continue
            self._closed.add(key)
            saga_id, seq, _digest = key
            for entry in self.sg.entries(saga_id):
                if (
                    entry.phase != Phase.REJECTED
                    or entry.tool_name != GATE_TOOL
                    or not _names(entry.input, seq)
                ):
                    continue
                approver, reason = parse_decision_payload(entry.payload)
                if approver:
                    break
                kind = (
                    EventKind.APPROVAL_EXPIRED
                    if reason.startswith("expired")
                    else EventKind.APPROVAL_VOIDED
                    if reason.startswith("void")
                    else None
                )
                if kind is not None and not known(eid := event_id(kind, *key)):
                    events.append(Event(eid, kind, saga_id, seq, entry.timestamp, {**data, "reason": reason}))
                break
        return events

    # -- the doctor's findings -------------------------------------------------------------------
    def findings(self, now: datetime, known: Known) -> list[Event]:
        """In-doubt calls, failed compensations, abandoned sagas and broken chains."""
        events = []
        older = self.config.in_doubt_after
        for call in self.sg.in_doubt():
            if call.age < older:
                continue
            eid = event_id(EventKind.CALL_IN_DOUBT, call.saga_id, call.seq)
            if not known(eid):
                data = {
                    "tool": call.tool_name,
                    "input": call.input,
                    "kind": call.kind,
                    "compensatesSeq": call.compensates_seq,
                    "startedAt": iso(call.started_at),
                }
                events.append(Event(eid, EventKind.CALL_IN_DOUBT, call.saga_id, call.seq, now, data))
        kinds = {
            FindingKind.COMPENSATION_FAILED: EventKind.COMPENSATION_FAILED,
            FindingKind.ABANDONED_SAGA: EventKind.SAGA_ABANDONED,
            FindingKind.BROKEN_CHAIN: EventKind.CHAIN_BROKEN,
        }
        for finding in self.sg.diagnose(older_than=older, now=now).findings:
            kind = kinds.get(finding.kind)
            if kind is None:
                continue
            facts = (finding.saga_id, finding.seq, finding.detail if kind is EventKind.CHAIN_BROKEN else "")
            eid = event_id(kind, *facts)
            if not known(eid):
                data = {"detail": finding.detail, "action": finding.action}
                events.append(Event(eid, kind, finding.saga_id, finding.seq, now, data))
        return events

    # -- the kill switch -------------------------------------------------------------------------
    def switch_tail(self) -> int:
        tail = self.sg.journal.read(self.sg.store.tail, SWITCH_SAGA)
        return tail.seq if tail is not None else 0

    def switch_changes(self, after: int, known: Known) -> list[Event]:
        """Changes of the kill switch journaled after seq ``after``."""
        if self.switch_tail() <= after:
            return []
        events = []
        for setting in self.sg.kill_switch.history():
            if setting.seq <= after:
                continue
            eid = event_id(EventKind.SWITCH_CHANGED, setting.seq, setting.at.isoformat())
            if not known(eid):
                data = {
                    "state": str(setting.state),
                    "scope": setting.scope,
                    "target": setting.target,
                    "until": iso(setting.until),
                    "by": setting.by,
                    "reason": setting.reason,
                    "summary": setting.describe(),
                }
                events.append(Event(eid, EventKind.SWITCH_CHANGED, None, setting.seq, setting.at, data))
        return events


def _names(decision_input: str, seq: int) -> bool:
    try:
        data = json.loads(decision_input)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("seq") == seq
