"""The operator's read models, derived from folded journals: what every surface shows.

The CLI, the HTTP API and the dashboard all read pending requests, decisions and a saga's detail
through the facade, which builds them here, so a fact (who approved, may it resume) is worked out
once and cannot differ between surfaces.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta

from sagacity._approvals import expired, required_approvals
from sagacity._engine import Engine
from sagacity._state import GATE_TOOL, SagaState, parse_decision_payload, sha256_hex
from sagacity.model import ApprovalRequest, Entry, JournaledDecision, PendingApproval


def pending_approval(
    engine: Engine, request: ApprovalRequest, state: SagaState, now: datetime
) -> PendingApproval:
    """``request`` with its journaled approvals, the tool's requirement and its readiness at ``now``."""
    gate = state.gates.get(request.journal_seq)
    approvers = tuple(gate.approvers(request.input_hash)) if gate is not None else ()
    required = required_approvals(engine, request)
    matches = (
        gate is not None
        and gate.open
        and not state.closed
        and request.input_hash == gate.input_hash
        and sha256_hex(request.input) == request.input_hash
    )
    return PendingApproval(
        request,
        approvers,
        required if required is not None else 1,
        required is not None,
        matches,
        expired(request, now),
        max(timedelta(0), now - request.created_at),
        gate.requester if gate is not None else None,
        gate.requester_may_not_approve if gate is not None else False,
    )


def decisions(entries: Iterable[Entry]) -> list[JournaledDecision]:
    """Each decision entry's target, approver and reason, read as the library reads them."""
    found = []
    for e in entries:
        if e.tool_name != GATE_TOOL:
            continue
        approver, reason = parse_decision_payload(e.payload)
        try:
            decided = json.loads(e.input)
        except ValueError:
            decided = None
        target = decided.get("seq") if isinstance(decided, dict) else None
        decides = target if isinstance(target, int) and not isinstance(target, bool) else None
        found.append(JournaledDecision(e.seq, e.phase, decides, approver or None, reason))
    return found


def pending_at(pending: Iterable[PendingApproval], seq: int) -> PendingApproval | None:
    """The request at ``seq`` among a saga's pending ones."""
    return next((p for p in pending if p.request.journal_seq == seq), None)
