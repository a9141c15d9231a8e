"""After a crash: calls and compensations left in doubt, their resolution by a human, ``recover``.

``recover`` may run anywhere at any time — from cron, beside the processes that own the sagas:

- A saga with a call open (an INTENT without outcome) is left alone: its process may still be
  running the tool, or it died mid-call and a human must say what happened.
- A saga being compensated by another runner is skipped: compensation runs hold the saga's
  lease, and ``recover`` only takes a free one (``stores/_lease.py``).
- Otherwise it finishes the compensation that a failure started, step by step, each step claimed
  by a fenced INTENT: the owner, or a second ``recover``, racing it finds the step claimed.
- It puts the approval requests in line with the journal: an open gate without its request row
  (its process died between the gate's entry and the row) gets it back from the journal, and a
  row the journal says is closed (a rejection whose process died before removing it) is dropped.
  Rows are read before the journal, and a gate's row is written after its entry, so a row seen
  is never one of a gate not yet read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import timedelta

from sagacity._approvals import restore_request
from sagacity._compensation import CompensationRun, check_tools, compensate
from sagacity._effects import Operation
from sagacity._engine import Engine, Row, age
from sagacity._payloads import (
    GATE_TOOL,
    ON_ABANDON_REPORT,
    compensated_payload,
    compensation_failed_payload,
    decision_payload,
    resolution_input,
)
from sagacity._state import SagaState
from sagacity.checks import require_identity
from sagacity.errors import SagaStateError
from sagacity.model import Phase, SagaResult, SagaStatus


def resting_states(engine: Engine, saga_ids: Iterable[str]) -> Iterator[SagaState]:
    """The state of each saga, leaving out sagas live in this process."""
    for saga_id in saga_ids:
        if not engine.is_live_here(saga_id):
            yield engine.snapshot(saga_id)


def resolve(
    engine: Engine, saga_id: str, seq: int, *, happened: bool, resolver: str, result: str, reason: str
) -> Operation[SagaStatus]:
    """A human settles an in-doubt INTENT: the decision and the outcome, appended together."""
    resolver = require_identity(resolver)
    note = decision_payload(resolver, reason)  # refuses a reason of more than one line, first
    return settle(
        engine,
        saga_id,
        seq,
        happened=happened,
        note=note,
        result=result,
        why_call=f"resolved by {resolver}: {reason or 'did not happen'}",
        why_undo=f"resolved by {resolver}: {reason}",
        by=resolver,
    )


def settle(
    engine: Engine,
    saga_id: str,
    seq: int,
    *,
    happened: bool,
    note: str,
    result: str,
    why_call: str,
    why_undo: str,
    by: str,
    compensate_after: bool = True,
) -> Operation[SagaStatus]:
    """Settle an in-doubt INTENT, fenced: the decision (payload ``note``: who or what decided)
    and the outcome, appended together; ``SagaStateError`` when it is no longer in doubt (another
    process settled it first). A compensating saga then carries on compensating, unless
    ``compensate_after`` is False (``recover`` compensates it itself)."""
    state = engine.snapshot(saga_id)

    def choose(now: SagaState) -> list[Row]:
        call = next((c for c in now.open_calls if c.intent.seq == seq), None)
        comp = next((c for c in now.open_compensations if c.intent and c.intent.seq == seq), None)
        if call is None and comp is None:
            raise SagaStateError(f"saga {saga_id!r} seq {seq} is not an INTENT without an outcome")
        if call is not None:
            intent = call.intent
            phase = Phase.EXECUTED if happened else Phase.FAILED
            payload = result if happened else f"NotExecuted: {why_call}"
            if now.compensating or not happened:
                # The saga will compensate next: refuse now, before the resolution is journaled.
                check_tools(now, engine.registry)
                engine.registry.get(intent.tool_name)
        else:
            assert comp is not None
            assert comp.intent is not None
            intent = comp.intent
            phase = Phase.COMPENSATED if happened else Phase.COMPENSATION_FAILED
            payload = (
                compensated_payload(comp.executed_seq)
                if happened
                else compensation_failed_payload(comp.executed_seq, why_undo)
            )
        decision: Row = (
            GATE_TOOL,
            Phase.APPROVED if happened else Phase.REJECTED,
            resolution_input(seq, phase),
            note,
        )
        return [decision, (intent.tool_name, phase, intent.input, payload)]

    engine.decide(state, choose)
    if compensate_after and state.compensating and not state.open_calls:
        run = yield from compensate(engine, saga_id, f"resolution of seq {seq} by {by}", state=state)
        assert run is not None
        return run.status
    return state.status


#: How long a saga must have had no new entry before ``recover`` treats it as abandoned: its
#: process may be alive, between two calls, on a store without liveness leases.
DEFAULT_ABANDONED_AFTER = timedelta(minutes=10)


def recover(
    engine: Engine,
    compensating: Iterable[str],
    aligning: Iterable[str] = (),
    abandoned_after: timedelta = DEFAULT_ABANDONED_AFTER,
) -> Operation[list[SagaResult]]:
    """Finish compensations that a crash interrupted (sagas ``compensating``), treat the
    abandoned ones as their start facts say (compensate, or report), then put the approval
    requests of those and of the sagas ``aligning`` in line with their gates."""
    results = []
    done = []
    for state in resting_states(engine, compensating):
        done.append(state.saga_id)
        if state.abandoned:
            result = yield from _abandoned(engine, state, abandoned_after)
            if result is not None:
                results.append(result)
            continue
        if not state.compensating or state.open_calls:
            continue
        reason = state.failure.payload if state.failure is not None else failed_call_reason(state)
        run: CompensationRun | None = yield from compensate(
            engine, state.saga_id, reason, wait=False, state=state
        )
        if run is not None:
            results.append(run.result(state.saga_id))
    for saga_id in dict.fromkeys([*done, *aligning]):
        if not engine.is_live(saga_id):
            align_requests(engine, saga_id)
    return results


def align_requests(engine: Engine, saga_id: str) -> None:
    """Restore the request row of each open gate that lacks one; drop each row of a closed gate."""
    rows = {r.journal_seq for r in engine.journal.read(engine.store.list_approval_requests, saga_id)}
    state = engine.snapshot(saga_id)  # after the rows: every row seen has its gate in here
    for seq in sorted(rows):
        gate = state.gates.get(seq)
        if gate is not None and (not gate.open or state.closed):
            engine.drop_request(saga_id, seq)
    if state.closed:
        return
    for gate in state.open_gates:
        if gate.entry.seq not in rows and engine.find_request(saga_id, gate.entry.seq) is None:
            restore_request(engine, gate)


def _abandoned(engine: Engine, state: SagaState, after: timedelta) -> Operation[SagaResult | None]:
    """An abandoned saga: nothing while it may still be live (a living process runs it, or an
    entry within ``after``); else listed (``report``, nothing journaled) or compensated, the
    start fenced on the very state judged abandoned, so an entry appended meanwhile cancels it."""
    last = state.last_timestamp
    if engine.is_live(state.saga_id) or last is None or age(last) < after:
        return None
    if state.on_abandon == ON_ABANDON_REPORT:
        return SagaResult(state.saga_id, SagaStatus.ABANDONED, None, None, ())
    judged = state.last_seq
    reason = f"abandoned: no entry since {last} UTC (seq {judged}) and no end; its start facts say compensate"
    run: CompensationRun | None = yield from compensate(
        engine,
        state.saga_id,
        reason,
        wait=False,
        state=state,
        only_if=lambda now: now.last_seq == judged and now.abandoned,
    )
    return run.result(state.saga_id) if run is not None else None


def failed_call_reason(state: SagaState) -> str:
    call = state.failed_calls[0]
    error = call.outcome.payload if call.outcome is not None else ""
    return f"call seq {call.intent.seq} ({call.intent.tool_name}) failed: {error}"
