"""Calls an agent framework makes, keyed by the framework's call id: run once, replay, gate in band.

A framework names each tool call (``tool_call_id``, ``call_id``) and presents the same call again
when it replays a saved state, re-runs a checkpoint, retries, or runs duplicates in parallel.
Before such a call runs, :func:`admit` reads the saga and decides, fenced (``Engine.decide``),
what this presentation of the call id is:

- new: its INTENT (or, for an IRREVERSIBLE tool, its AWAITING_APPROVAL) is appended with a
  ``call_id=<id>`` line, only right after the state that showed the id unused, so two racers —
  threads, processes — can never both start it;
- done: EXECUTED, the journaled result is returned and the tool is not called; FAILED, refused;
- running (an INTENT without outcome) in another living process (its liveness lease says so):
  ``SagaRunningElsewhereError`` at once, however long it runs, nothing decided here; else waited
  for up to ``wait`` seconds (a duplicate in this process then replays its result), then
  ``SagaRunningElsewhereError`` if another run of this process still holds it, else in doubt;
- gated and approved: executed *in band*, through the same fenced resume INTENT as
  ``Sagacity.resume`` (``_approvals.claim``) — at most once, and only if the re-presented
  arguments are byte-identical to the approved ones (SHA-256 equal to the approved hash), else
  REJECTED and the saga compensates;
- gated and pending: still pending; re-presented with arguments the framework says were
  *edited*: the gate is superseded and the edit gated anew (an edit needs its own approval);
- gated and rejected: refused (the saga compensated) or, when the gate was journaled with
  ``on_reject=continue``, reported so the framework can tell the model.

Re-presented arguments that differ from a done call's are refused and nothing runs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sagacity._approvals import (
    awaiting_message,
    claim,
    gate_row,
    request_of,
    store_request,
    supersede_rows,
)
from sagacity._compensation import CompensationRun
from sagacity._effects import Operation
from sagacity._engine import Engine, Row
from sagacity._payloads import (
    CALL_ID,
    ON_REJECT_CONTINUE,
    call_payload,
    held_approvals,
    parse_decision_payload,
)
from sagacity._state import Call, Gate, SagaState
from sagacity._view import expired
from sagacity.chain import utc_now
from sagacity.errors import (
    ApprovalNotFoundError,
    ApprovalRefusedError,
    HaltedError,
    InvalidValueError,
    PayloadMismatchError,
    SagaClosedError,
    SagaRunningElsewhereError,
    SagaStateError,
)
from sagacity.guardrails._deny import denied_rows
from sagacity.guardrails._rules import Action
from sagacity.guardrails._verdict import Verdict
from sagacity.model import ApprovalRequest, CallPending, CallRefused, CallRejected, Entry, Phase
from sagacity.tools import ToolSpec

__all__ = ["Admission", "admit", "require_call_id"]

_CALL_ID = re.compile(r"^[^\x00-\x1f\x7f\x85\u2028\u2029]{1,256}$")
#: Polling interval bounds while a call with the same id runs elsewhere.
_POLL_FIRST, _POLL_MAX = 0.01, 0.5
#: On-reject policies an adapter may journal on a gate.
ON_REJECT_POLICIES = ("compensate", ON_REJECT_CONTINUE)


def require_call_id(call_id: str) -> str:
    """A framework's call id: one line of at most 256 characters (it is journaled as a line)."""
    if not isinstance(call_id, str) or not _CALL_ID.match(call_id):
        raise InvalidValueError(
            "a call id must be 1 to 256 characters without control characters or line breaks, "
            f"got {call_id!r}"
        )
    return call_id


@dataclass(frozen=True, slots=True)
class Admission:
    """What to do with one presentation of a call id. Exactly one of these is set:

    ``seq``: run the tool now, its INTENT is at ``seq`` (``resumed``: the in-band execution of
    an approved gate); ``replay``: the call already EXECUTED, this entry holds its result;
    ``pending`` / ``rejected``: a gate the model is told about; ``declined``: re-presented
    arguments that differ from a done call's, or a call id still running elsewhere or in doubt
    (nothing journaled, not a failure of the saga: the model is told); ``refused`` (with
    ``compensated``): an approved gate re-presented with other arguments (REJECTED journaled,
    the saga compensated).
    """

    seq: int = 0
    resumed: bool = False
    replay: Entry | None = None
    pending: CallPending | None = None
    rejected: CallRejected | None = None
    declined: CallRefused | None = None
    refused: Exception | None = None
    gated: ApprovalRequest | None = None  # a gate this presentation opened
    compensated: CompensationRun | None = None


def admit(
    engine: Engine,
    saga_id: str,
    spec: ToolSpec,
    input: str,
    call_id: str,
    *,
    edited: bool = False,
    on_reject: str = "",
    wait: float = 60.0,
    requester: str | None = None,
    owner: Callable[[SagaState], None] | None = None,
) -> Operation[Admission]:
    """Decide, on the journal and fenced, what this presentation of ``call_id`` is (module doc).

    ``owner`` judges every state a decision is taken on (each read, and the fenced first
    entry's): it raises to refuse a saga this call may not go in, before anything is journaled.

    Raises ``SagaClosedError`` (the saga compensated: nothing may start), ``ApprovalRefusedError``
    (the gate was rejected and the saga compensated, or the approval expired),
    ``SagaRunningElsewhereError`` (the call is still running in a living holder: another process,
    or another run of this one after ``wait`` seconds), ``SagaStateError`` (the call failed before).
    """
    require_call_id(call_id)
    if on_reject and on_reject not in ON_REJECT_POLICIES:
        raise InvalidValueError(f"on_reject must be one of {ON_REJECT_POLICIES}, got {on_reject!r}")
    policy = ON_REJECT_CONTINUE if on_reject == ON_REJECT_CONTINUE else ""
    where = f"saga {saga_id!r} call id {call_id!r} ({spec.name})"
    poll = _Poll(wait)
    while True:
        state = engine.snapshot(saga_id)
        if owner is not None:
            owner(state)
        found = state.keyed.get(call_id)
        if found is None or (isinstance(found, Call) and found.passed):
            admission = _start(engine, state, spec, input, call_id, policy, found, requester, owner)
            if admission is not None:
                return admission
            continue  # another presentation journaled this id meanwhile: look again
        if isinstance(found, Gate) and found.resumed is None:
            decided = yield from _at_gate(
                engine, state, found, spec, input, call_id, edited, policy, where, requester
            )
            if decided is _WAIT:
                if poll.over():
                    return _declined(
                        saga_id,
                        call_id,
                        f"{where}: the approved gate at seq {found.entry.seq} is being resumed elsewhere "
                        f"(or its resume died) and has no INTENT after {wait:g}s; not run here",
                    )
                continue
            if decided is not None:
                return decided
            continue  # decided meanwhile by another writer: look again
        call = found.resumed if isinstance(found, Gate) else found
        assert call is not None
        if call.intent.input != input:
            return _declined(
                saga_id,
                call_id,
                f"{where} was journaled at seq {call.intent.seq} with other arguments; the "
                "re-presented call is refused and nothing ran",
            )
        if call.executed:
            return Admission(replay=call.outcome)
        if call.outcome is not None:
            failure = call.outcome
            raise SagaStateError(
                f"{where} already failed at seq {failure.seq} ({failure.payload_text}); not run again"
            )
        runner = engine.other_runner(saga_id)
        seq = call.intent.seq
        if runner == "there":  # a living process runs it, however long: never in doubt here
            raise SagaRunningElsewhereError(
                f"{where} is still running in another living process (INTENT seq {seq}); nothing "
                "was done or decided here: ask again once it has ended",
                saga_id,
                seq,
            )
        if poll.over():
            if runner == "here":
                raise SagaRunningElsewhereError(
                    f"{where} is still running in another run of this process (INTENT seq {seq}) "
                    f"after {wait:g}s; nothing was done or decided here: ask again once it has ended",
                    saga_id,
                    seq,
                )
            return _declined(
                saga_id,
                call_id,
                f"{where} is running elsewhere or in doubt (INTENT seq {seq} has no "
                f"outcome after {wait:g}s); not run again: see `sagacity sagas in-doubt`",
            )


class _Poll:
    """Waiting, with growing pauses, for another presentation of a call id to get somewhere."""

    def __init__(self, wait: float) -> None:
        self.deadline = time.monotonic() + wait
        self.pause = _POLL_FIRST

    def over(self) -> bool:
        """True once the wait is over; else sleeps a little (the caller then looks again)."""
        if time.monotonic() >= self.deadline:
            return True
        time.sleep(self.pause)
        self.pause = min(_POLL_MAX, self.pause * 2)
        return False


def _declined(saga_id: str, call_id: str, reason: str) -> Admission:
    message = f"[REFUSED] {reason}. Do not retry this call; tell the user."
    return Admission(declined=CallRefused(saga_id, call_id, reason, message))


def _start(
    engine: Engine,
    state: SagaState,
    spec: ToolSpec,
    input: str,
    call_id: str,
    policy: str,
    before: Call | Gate | None,
    requester: str | None,
    owner: Callable[[SagaState], None] | None,
) -> Admission | None:
    """Journal the call id's first INTENT (or gate), fenced; None if another got there first."""

    guard = engine.guard
    verdict: Verdict | None = None
    if guard is not None:
        verdict = guard.judge(
            state.saga_id,
            spec.name,
            input,
            irreversible=spec.irreversible,
            approvals=spec.approvals_required,
            principal=requester,
        )
    extra = verdict.lines if verdict is not None else ""
    held = verdict.action is Action.HOLD if verdict is not None else spec.irreversible
    denied = verdict is not None and verdict.action is Action.DENY

    def choose(now: SagaState) -> list[Row]:
        if now.closed:
            raise SagaClosedError(
                f"saga {now.saga_id!r} is being compensated (or has ended): {spec.name} was not "
                "started and did not run"
            )
        if owner is not None:
            owner(now)  # the state this first entry is fenced on, re-read after a lost race
        if now.keyed.get(call_id) is not before:
            return []
        if denied:
            assert verdict is not None
            return denied_rows(spec.name, input, verdict, first=f"{CALL_ID}{call_id}")
        if held:
            return [gate_row(spec, input, call_id, policy, requester, extra)]
        return [
            (
                spec.name,
                Phase.INTENT,
                input,
                call_payload("", call_id, definition=spec.pinned_hash, extra=extra),
            )
        ]

    try:
        landed = engine.decide(state, choose)
    except BaseException:
        if guard is not None and verdict is not None:
            guard.give_back_verdict(state.saga_id, verdict)
        raise
    if not landed:
        if guard is not None and verdict is not None:
            guard.give_back_verdict(state.saga_id, verdict)
        return None
    if denied:
        assert verdict is not None
        if verdict.halts:
            raise HaltedError(f"saga {state.saga_id!r}: {spec.name} was refused: {verdict.reason}")
        return _declined_by_policy(
            state.saga_id, call_id, spec.name, verdict.reason, verdict.model_message(spec.name)
        )
    entry = landed[-1]  # after the saga's START when it is the saga's first entry
    if entry.phase == Phase.INTENT:
        return Admission(seq=entry.seq)
    ttl = verdict.decision.ttl if verdict is not None else None
    request = store_request(engine, spec, entry, ttl)
    return Admission(pending=_pending(spec, request, call_id), gated=request)


def _declined_by_policy(saga_id: str, call_id: str, tool: str, reason: str, message: str) -> Admission:
    return Admission(declined=CallRefused(saga_id, call_id, f"{tool} denied by policy: {reason}", message))


def _at_gate(
    engine: Engine,
    state: SagaState,
    gate: Gate,
    spec: ToolSpec,
    input: str,
    call_id: str,
    edited: bool,
    policy: str,
    where: str,
    requester: str | None,
) -> Operation[Admission | None]:
    """A gate not yet resumed: still pending, rejected, superseded by an edit, or run in band.

    None: another writer decided meanwhile, look again; ``_WAIT``: another claimant consumed the
    request and is about to journal its INTENT, wait for it.
    """
    seq = gate.entry.seq
    if gate.rejection is not None:
        approver, reason = parse_decision_payload(gate.rejection.payload)
        if gate.continues_on_reject and not state.closed:
            message = (
                f"[REJECTED] {spec.name} did not run: "
                + (f"{approver} rejected it" if approver else "the approval was refused")
                + (f" ({reason})" if reason else "")
                + ". Do not retry it; tell the user."
            )
            return Admission(rejected=CallRejected(state.saga_id, seq, approver, reason, message, call_id))
        raise ApprovalRefusedError(
            f"{where}: the approval at seq {seq} was rejected ({reason or approver or 'no reason'}); "
            "the saga was compensated and the call does not run"
        )
    if state.closed:
        raise SagaClosedError(f"{where}: the saga was compensated; the gate at seq {seq} is void")
    if gate.resumed is not None:
        return None
    if edited and input != gate.entry.input:
        return _supersede(engine, state, gate, spec, input, call_id, policy, requester)
    request = engine.find_request(state.saga_id, seq) or request_of(gate)
    approvers = gate.approvers(gate.input_hash)
    needed = max(spec.approvals_required, held_approvals(gate.entry.payload))
    if len(approvers) < needed and not expired(request, utc_now()):
        return Admission(pending=_pending(spec, request, call_id))
    # Approved (or expired: claim journals the expiry and refuses): run it here, in band.
    try:
        granted = yield from claim(engine, state.saga_id, seq, input, None, call_id=call_id)
    except ApprovalNotFoundError:
        # The request row is gone: a concurrent claimant (this process or another) consumed it
        # and is appending its INTENT — or died doing so. Wait for the journal to say which.
        now = engine.refresh(state).gates[seq]
        return _WAIT if now.resumed is None and now.rejection is None else None
    except ApprovalRefusedError:
        now = engine.refresh(state).gates[seq]
        if now.resumed is None and now.rejection is None:
            raise  # nothing changed: the refusal stands
        return None  # a concurrent presentation or decision got there first
    if granted.refused and granted.denied:
        return Admission(refused=ApprovalRefusedError(f"{where}: {granted.refused}"), compensated=granted.run)
    if granted.refused:
        error = PayloadMismatchError(
            f"{where}: the re-presented arguments are not the approved ones ({granted.refused}); "
            "REJECTED, the saga was compensated, nothing ran"
        )
        return Admission(refused=error, compensated=granted.run)
    return Admission(seq=granted.seq, resumed=True)


#: ``_at_gate``: wait for a concurrent claimant's INTENT.
_WAIT: Any = Admission()


def _supersede(
    engine: Engine,
    state: SagaState,
    gate: Gate,
    spec: ToolSpec,
    input: str,
    call_id: str,
    policy: str,
    requester: str | None,
) -> Admission | None:
    seq = gate.entry.seq

    def choose(now: SagaState) -> list[Row]:
        current = now.gates[seq]
        if now.closed or not current.open or now.keyed.get(call_id) is not current:
            return []
        return supersede_rows(current, spec, input, call_id, policy, requester)

    landed = engine.decide(state, choose)
    if not landed:
        return None
    engine.drop_request(state.saga_id, seq)
    request = store_request(engine, spec, landed[-1])
    return Admission(pending=_pending(spec, request, call_id), gated=request)


def _pending(spec: ToolSpec, request: ApprovalRequest, call_id: str) -> CallPending:
    return CallPending(request, awaiting_message(spec, request.saga_id, request.journal_seq), call_id)
