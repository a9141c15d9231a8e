"""The JSON of every operator surface: the CLI's ``--json`` and the HTTP API print these shapes.

One shape per read model, so a script can switch between ``sagacity ... --json`` and the server
without renaming a field. Names are SPEC §7's (the Java starter's: ``sagaId``, ``journalSeq``,
``inputHash``, ``approverIdentity``), camelCase throughout; timestamps are the export's form. No web
framework is imported here: the CLI must work without the ``[server]`` extra.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from operator import methodcaller
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from sagacity._json import encode_result
from sagacity.chain import Verification
from sagacity.doctor import Diagnosis
from sagacity.errors import StoreUnavailableError
from sagacity.guardrails import Setting
from sagacity.model import (
    ApprovalDecision,
    ApprovalGate,
    ApprovalRequest,
    CallStatus,
    CallView,
    CompensationView,
    EffectAudit,
    InDoubtCall,
    JournaledDecision,
    PendingApproval,
    Phase,
    Reconciled,
    SagaResult,
    SagaSummary,
    SagaView,
    UndoStep,
)

if TYPE_CHECKING:
    from sagacity.tools import ToolSpec
    from sagacity.workflows import WorkflowView

JSON = dict[str, Any]
_T = TypeVar("_T")


def iso(ts: datetime | None) -> str | None:
    """Naive UTC as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, the export's timestamp form."""
    return None if ts is None else ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def error_json(exc: BaseException) -> JSON:
    """An error as every surface reports it: what is wrong, and the library's exception class."""
    if isinstance(exc, StoreUnavailableError):
        return {
            "error": f"the journal database is unavailable, try again shortly: {exc}",
            "type": type(exc).__name__,
        }
    return {"error": str(exc), "type": type(exc).__name__}


def _pick(obj: object, path: str) -> Any:
    """The attribute at the dotted ``path``, or None once a step on the way is None: a call with no
    outcome yet has no ``outcome.timestamp``, and its ``finishedAt`` is null."""
    value: Any = obj
    for name in path.split("."):
        if value is None:
            return None
        value = getattr(value, name)
    return value


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def _each(convert: Callable[[Any], Any]) -> Callable[[Iterable[Any]], list[Any]]:
    """A converter for a sequence: ``convert`` applied to each item, as a JSON list."""
    return lambda items: [convert(item) for item in items]


class _Field(NamedTuple):
    key: str
    path: str
    convert: Callable[[Any], Any] | None


def _field(path: str, convert: Callable[[Any], Any] | None = None, *, key: str | None = None) -> _Field:
    """The wire key ``key`` (by default ``path`` in camelCase) holding the value at ``path``, through
    ``convert`` unless that value is None (null stays null)."""
    return _Field(key or _camel(path), path, convert)


class _Shape(Generic[_T]):
    """The JSON of one read model, declared as its fields in wire order: an attribute name (its key
    is the name in camelCase, its value as it is) or a :func:`_field`. One table per model instead
    of one hand-written dict builder each, so every shape reads its fields, renames them and keeps
    null the same way; the attributes are checked against ``model`` on import, so a renamed field
    fails there rather than in a surface's output."""

    def __init__(self, model: type[_T], *fields: str | _Field) -> None:
        self._fields = tuple(_field(f) if isinstance(f, str) else f for f in fields)
        known = set(getattr(model, "__dataclass_fields__", ())) | set(dir(model))
        missing = [f.path for f in self._fields if f.path.split(".")[0] not in known]
        if missing:
            raise AttributeError(f"{model.__name__} has no {', '.join(missing)} for its wire shape")

    def __call__(self, obj: _T) -> JSON:
        body: JSON = {}
        for key, path, convert in self._fields:
            value = _pick(obj, path)
            body[key] = value if convert is None or value is None else convert(value)
        return body


def _seconds(delta: timedelta) -> float:
    return delta.total_seconds()


#: SPEC §7's approval fields and the request's times.
request_json = _Shape(
    ApprovalRequest,
    "saga_id",
    "journal_seq",
    "tool_name",
    "input",
    "input_hash",
    _field("created_at", iso),
    _field("expires_at", iso),
)

_pending_json = _Shape(
    PendingApproval,
    "expired",
    _field("waiting", _seconds, key="waitingSeconds"),
    "approvals_required",
    _field("approvers", list),
    "requester",
    "requester_may_not_approve",
    "ready_to_resume",
    "tool_imported",
    "matches_journal",
    _field("scope", list, key="approverScope"),
)


def approval_json(pending: PendingApproval) -> JSON:
    """A pending request (SPEC §7's fields first) with what a human needs to decide and resume."""
    return request_json(pending.request) | _pending_json(pending)


#: SPEC §7's verify body.
verification_json = _Shape(Verification, "valid", "entry_count", "break_at_index", "message")

undo_json = _Shape(
    UndoStep, "seq", "tool_name", "input", "result", "compensation", _field("imported", key="toolImported")
)

summary_json = _Shape(
    SagaSummary,
    "saga_id",
    _field("status", str),
    "entry_count",
    _field("started_at", iso),
    _field("updated_at", iso),
    "awaiting_approval",
    "in_doubt",
    "chain_valid",
    "chain_broken_at",
)

in_doubt_json = _Shape(
    InDoubtCall,
    "saga_id",
    "seq",
    "tool_name",
    "input",
    _field("started_at", iso),
    _field("age", _seconds, key="ageSeconds"),
    "kind",
    "compensates_seq",
)

journaled_decision_json = _Shape(
    JournaledDecision, "seq", "phase", "decides", "approver", "reason", _field("decided_at", iso)
)

#: One tool call of a saga view: its INTENT's seq, status, and result or error once known
#: (``finishedAt``: its outcome's time).
call_json = _Shape(
    CallView,
    "seq",
    "tool_name",
    "input",
    _field("status", str),
    _field("started_at", iso),
    _field("outcome.timestamp", iso, key="finishedAt"),
    "call_id",
    "gate_seq",
    "result",
    "error",
    "resolved_by",
)

_compensation_json = _Shape(
    CompensationView,
    "seq",
    _field("executed_seq", key="compensatesSeq"),
    "tool_name",
    "input",
    _field("started_at", iso),
    _field("outcome.timestamp", iso, key="finishedAt"),
    _field("outcome.phase", key="outcome"),
)


def compensation_json(comp: CompensationView) -> JSON:
    """One compensation of a saga view: its INTENT's ``seq``, the call it undoes
    (``compensatesSeq``, its EXECUTED entry), when it started and finished, and how it ended
    (null while it has no outcome)."""
    outcome = comp.outcome
    error = outcome.payload_text if outcome is not None and not comp.succeeded else None
    return _compensation_json(comp) | {"error": error}


#: One approval gate of a saga view: what was asked, who approved, how it ended.
gate_json = _Shape(
    ApprovalGate,
    _field("seq", key="journalSeq"),
    "tool_name",
    "input",
    "input_hash",
    _field("requested_at", iso),
    _field("status", str),
    _field("approvers", list),
    "approvals_required",
    "tool_imported",
    "call_id",
    "requester",
    "requester_may_not_approve",
    _field("rejection", journaled_decision_json),
    _field("resumed.seq", key="resumedSeq"),
)

#: A saga: its journal and verification, and the view's reading of it (its calls, gates,
#: decisions and compensations with their times: what a timeline draws).
saga_json = _Shape(
    SagaView,
    "saga_id",
    _field("status", str),
    _field("entries", len, key="entryCount"),
    _field("verification", verification_json),
    _field("entries", _each(methodcaller("to_json"))),
    _field("decisions", _each(journaled_decision_json)),
    _field("pending", _each(approval_json), key="pendingApprovals"),
    _field("in_doubt", _each(in_doubt_json)),
    "principal",
    _field("started_at", iso),
    _field("updated_at", iso),
    _field("calls", _each(call_json)),
    _field("gates", _each(gate_json)),
    _field("compensations", _each(compensation_json)),
)


def request_detail_json(pending: PendingApproval, saga: SagaView, tool: ToolSpec | None) -> JSON:
    """One pending request with its saga's journal so far: what an approver decides on, and what
    a rejection would undo (``compensations``, in the order they would run). Beside it, the
    saga's context (its ``principal``, ``startedAt`` and earlier ``calls``) and what the tool
    does (``toolDescription``, from ``tool``, the registration in this process; null when the
    tool is not registered here, so nobody can say)."""
    return {
        **approval_json(pending),
        "sagaStatus": str(saga.status),
        "verification": verification_json(saga.verification),
        "journal": [e.to_json() for e in saga.entries],
        "inDoubt": [in_doubt_json(c) for c in saga.in_doubt],
        "compensations": [undo_json(step) for step in saga.undo],
        "toolDescription": tool.description if tool is not None else None,
        "principal": saga.principal,
        "startedAt": iso(saga.started_at),
        "calls": [call_json(c) for c in saga.calls if c.seq < pending.request.journal_seq],
    }


def saga_page_json(page: Sequence[SagaSummary], limit: int) -> JSON:
    """A page of the saga list; ``next`` (a cursor, or null on the last page) asks for the next one."""
    return {
        "sagas": [summary_json(s) for s in page],
        "limit": limit,
        "next": page[-1].cursor if len(page) == limit else None,
    }


#: The word the MCP proxy's ``sagacity_status`` gives a held call's state (docs/mcp.md).
_MCP_STATES = {
    CallStatus.AWAITING_APPROVAL: "awaiting",
    CallStatus.APPROVED: "awaiting",
    CallStatus.REJECTED: "rejected",
    CallStatus.RUNNING: "running",
    CallStatus.IN_DOUBT: "in doubt",
    CallStatus.EXECUTED: "executed",
    CallStatus.FAILED: "failed",
    CallStatus.PASSED: "failed",
}


def mcp_gate_state(gate: ApprovalGate, parked: Iterable[int] = ()) -> str:
    """``awaiting``, ``rejected``, ``executed``, ``failed``, ``running`` (a living process runs it
    now) or ``in doubt``: a held call as the MCP proxy tells the agent. ``parked``: calls whose
    answer this proxy gave up on, in doubt whatever the journal says yet."""
    resumed = gate.resumed
    if resumed is not None and resumed.seq in parked:
        return "in doubt"
    return _MCP_STATES[gate.status]


def mcp_status_json(saga_id: str, view: SagaView | None, *, committed: bool, parked: Iterable[int]) -> JSON:
    """The MCP proxy's ``sagacity_status`` report: the saga's status, each held call (a gate, with
    the agent's ``state`` word and, once executed, the upstream's ``result``), calls in doubt
    (``parked``: calls whose answer the proxy lost, whatever the journal says yet)."""
    parked = set(parked)
    requests = []
    for gate in view.gates if view is not None else ():
        item = gate_json(gate) | {"state": mcp_gate_state(gate, parked)}
        resumed = gate.resumed
        if resumed is not None and resumed.result is not None:
            item["result"] = json.loads(resumed.result)
        elif resumed is not None and resumed.error is not None:
            item["error"] = resumed.error
        requests.append(item)
    lost = sorted(parked)
    in_doubt: list[JSON] = [in_doubt_json(c) for c in view.in_doubt] if view is not None else []
    in_doubt += [{"seq": seq, "note": "the proxy lost this call's answer"} for seq in lost]
    status = "IN_DOUBT" if lost else (str(view.status) if view is not None else "NEW")
    report: JSON = {
        "sagaId": saga_id,
        "status": status,
        "committed": committed,
        "requests": requests,
        "inDoubt": in_doubt,
    }
    if view is not None and view.failure is not None:
        report["compensation"] = view.failure
    return report


_decision_json = _Shape(
    ApprovalDecision,
    "saga_id",
    "journal_seq",
    "approved",
    _field("approver", key="approverIdentity"),
    _field("decided_at", iso),
)


def decision_json(
    decision: ApprovalDecision, gate: PendingApproval | None = None, *, pending: bool = False
) -> JSON:
    """SPEC §7's decision body, plus for an approval who has approved the payload (``gate``: its
    request, read after the decision if still ``pending``, else before) and how many must, and for
    a rejection the reason and the saga's status after compensating."""
    body = _decision_json(decision)
    if decision.approved:
        approvers = list(gate.approvers) if gate is not None else []
        body["approvers"] = approvers if decision.approver in approvers else [*approvers, decision.approver]
        body["approvalsRequired"] = gate.approvals_required if gate is not None else 1
        body["pending"] = pending
    else:
        body["reason"] = decision.reason
        body["status"] = str(decision.result.status) if decision.result is not None else None
    return body


def resume_json(saga_id: str, seq: int, result: SagaResult) -> JSON:
    """A resume that ran: SPEC §7's 200 body, or its 409 body when the saga compensated instead
    (the payload was refused or the tool failed) with what its compensation did."""
    if result.error is None:
        return {"sagaId": saga_id, "status": str(result.status), "result": encode_result(result.value)}
    return {
        "sagaId": saga_id,
        "journalSeq": seq,
        "status": str(result.status),
        "reason": f"{type(result.error).__name__}: {result.error}",
        **error_json(result.error),
        "compensation": [
            {"seq": s.seq, "toolName": s.tool_name, "outcome": str(s.outcome), "error": s.error}
            for s in result.report
        ],
    }


def diagnosis_json(diagnosis: Diagnosis, older_than: timedelta, ignore: Iterable[str] = ()) -> JSON:
    """What the doctor found; ``healthy`` once the kinds in ``ignore`` are left out."""
    left_out = set(ignore)
    findings = [f.to_json() for f in diagnosis.findings if f.kind.value not in left_out]
    return {
        "healthy": not findings,
        "sagasChecked": diagnosis.sagas_checked,
        "recentSkipped": diagnosis.recent,
        "reconcilable": diagnosis.reconcilable,
        "olderThanSeconds": older_than.total_seconds(),
        "expired": [request_json(r) | {"expiredAt": iso(r.expires_at)} for r in diagnosis.expired],
        "findings": findings,
    }


#: One kill-switch setting, as the CLI's ``--json`` and the HTTP API give it.
switch_json = _Shape(
    Setting,
    _field("state", str),
    "scope",
    "target",
    _field("until", iso),
    "by",
    "reason",
    "seq",
    _field("at", iso, key="setAt"),
)


def workflow_run_json(view: WorkflowView, *, full: bool = False) -> JSON:
    """A workflow run (``sagacity.workflows``): its status, where it stands and each stage; with
    ``full``, each stage's input, output, checks and gate (the exact input a human approves)."""
    stages = []
    for stage in view.stages:
        body: JSON = {"name": stage.name, "status": str(stage.status), "gated": stage.gated}
        if full:
            body |= {
                "input": stage.input,
                "output": stage.output,
                "startedAt": iso(stage.started_at),
                "finishedAt": iso(stage.finished_at),
                "error": stage.error or None,
                "policy": None
                if stage.policy is None
                else {
                    "rule": stage.policy.rule,
                    "action": str(stage.policy.action),
                    "reason": stage.policy.reason or None,
                    "approvals": stage.policy.approvals if stage.policy.action == "hold" else None,
                },
                "checks": [
                    {"name": c.name, "status": c.status, "reason": c.reason or None} for c in stage.checks
                ],
                "gate": None
                if stage.gate is None
                else {
                    "journalSeq": stage.gate.seq,
                    "approvalsRequired": stage.gate.approvals_required,
                    "approvers": list(stage.gate.approvers),
                    "reason": stage.gate.reason,
                    "input": stage.gate.input,
                    "inputHash": stage.gate.input_hash,
                    "rejectedBy": stage.gate.rejected_by or None,
                    "rejectionReason": stage.gate.rejection_reason or None,
                },
            }
        stages.append(body)
    return {
        "runId": view.run_id,
        "workflow": view.workflow,
        "status": str(view.status),
        "currentStage": view.current_stage,
        "startedAt": iso(view.started_at),
        "updatedAt": iso(view.updated_at),
        "chainValid": view.valid,
        "stages": stages,
    }


def _stopped_waiting(gate: ApprovalGate, view: SagaView) -> datetime | None:
    """When ``gate`` stopped waiting: its rejection, its resume, or (voided with no decision
    journaled) its saga's last entry at the latest; None while it still waits."""
    if gate.open:
        return None
    if gate.rejection is not None and gate.rejection.decided_at is not None:
        return gate.rejection.decided_at
    if gate.resumed is not None:
        return gate.resumed.started_at
    return view.updated_at


def activity_json(
    views: Iterable[SagaView], start: datetime, end: datetime, buckets: int, *, complete: bool
) -> JSON:
    """Decisions and pending approvals over ``[start, end)``, ``buckets`` slices (the dashboard's
    chart): per slice the gate decisions journaled in it and the gates waiting at its end.

    A projection of saga views: ``views`` must hold every saga with a gate decided in the window
    or still waiting (the sagas updated since ``start`` and those with a request pending);
    ``complete`` False says some were left out, so the counts are a lower bound."""
    width = (end - start) / buckets
    approved = [0] * buckets
    rejected = [0] * buckets
    waits: list[tuple[datetime, datetime | None]] = []
    read = 0
    for view in views:
        read += 1
        gate_seqs = {g.seq for g in view.gates}
        for d in view.decisions:
            at = d.decided_at
            if d.decides not in gate_seqs or at is None or not start <= at < end:
                continue
            slot = min(buckets - 1, int((at - start) / width))
            if d.phase == Phase.APPROVED:
                approved[slot] += 1
            elif d.phase == Phase.REJECTED:
                rejected[slot] += 1
        waits += [(g.requested_at, _stopped_waiting(g, view)) for g in view.gates]
    slices = []
    for n in range(buckets):
        edge = start + width * (n + 1)
        waiting = sum(1 for asked, done in waits if asked <= edge and (done is None or done > edge))
        slices.append(
            {
                "start": iso(start + width * n),
                "approved": approved[n],
                "rejected": rejected[n],
                "pending": waiting,
            }
        )
    return {
        "from": iso(start),
        "until": iso(end),
        "bucketSeconds": width.total_seconds(),
        "buckets": slices,
        "sagasRead": read,
        "complete": complete,
    }


#: What ``reconcile`` did with one in-doubt call, as the CLI's ``--json`` gives it.
reconciled_json = _Shape(
    Reconciled,
    "saga_id",
    "seq",
    "tool_name",
    "kind",
    "answer",
    "reconciler",
    "evidence",
    "settled",
    "outcome",
    _field("status", str),
)

#: One effect as an audit found it.
effect_audit_json = _Shape(
    EffectAudit, "saga_id", "seq", "tool_name", "effect", _field("verdict", str), "reconciler", "evidence"
)
