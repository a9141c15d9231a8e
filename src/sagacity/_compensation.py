"""Compensation: a pure plan from the journal, and runs of it that are journaled step by step.

The plan walks EXECUTED calls in strict reverse order of execution and leaves out every call
whose compensation already has a journaled outcome, so a run interrupted by a crash is finished
later from the journal alone and no compensation runs twice. A compensation that has an INTENT
but no outcome is *in doubt*: it is re-run only if declared idempotent, otherwise left for a
human (``Sagacity.resolve_in_doubt``), and the saga stays IN_DOUBT until then: the steps before
it wait (strict reverse order) and run once the resolution is journaled.

Across processes:

- A run holds the saga's lease (``stores/_lease.py``) from start to end, so whoever holds it
  knows that a compensation INTENT without an outcome was left by a runner that died: only then
  is it "in doubt". The owner's runs wait for the lease; ``recover`` skips a saga whose lease is
  taken.
- The start (saga-level FAILED, and REJECTED voiding every open gate), each step's INTENT and
  the end are fenced decisions (``Engine.decide``): a step is claimed by appending its INTENT
  right after the state that showed it unclaimed, and the end is written only on a state with
  no call open and nothing left to run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sagacity._otel_spans as _otel_spans
import sagacity._telemetry as _telemetry
from sagacity._effects import Invoke, Operation, Outcome
from sagacity._engine import Engine, Row
from sagacity._payloads import (
    COMPENSATES,
    GATE_TOOL,
    LIFE_TOOL,
    SAGA_TOOL,
    compensated_payload,
    compensation_failed_payload,
    decision_input,
    decision_payload,
    end_payload,
)
from sagacity._state import Call, SagaState
from sagacity.chain import idempotency_key
from sagacity.errors import InvalidValueError
from sagacity.guardrails._meter import DEBIT, give_back_call
from sagacity.model import (
    CompensationContext,
    CompensationOutcome,
    CompensationStep,
    Phase,
    SagaResult,
    SagaStatus,
    UndoStep,
)
from sagacity.tools import ToolRegistry, ToolSpec, json_object


def describe(exc: BaseException) -> str:
    """``ExceptionType: message``, as FAILED payloads hold errors (SPEC §2)."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


@dataclass(frozen=True, slots=True)
class PlannedStep:
    """One executed call to undo; ``spec`` is None when its tool declares no compensation."""

    call: Call
    spec: ToolSpec | None

    @property
    def executed_seq(self) -> int:
        assert self.call.outcome is not None
        return self.call.outcome.seq


def plan(state: SagaState, registry: ToolRegistry) -> list[PlannedStep]:
    """The steps still to run, in order. Pure apart from looking tools up by name.

    The plan stops at a compensation in doubt (an INTENT without outcome that may not be re-run):
    the order is strict, and an earlier step's undo may depend on this one's (release the stock
    only once the refund went through), so the steps before it wait until a human resolves it.

    Raises ``UnknownToolError`` (before anything runs) for a step whose tool is not imported:
    whether it has a compensation cannot be known, so nothing may be assumed.
    """
    steps = []
    for call in reversed(state.executed):
        assert call.outcome is not None
        done = state.compensations.get(call.outcome.seq)
        spec = registry.get(call.intent.tool_name)
        if done is not None and not done.may_run(idempotent=spec.compensation_idempotent):
            if done.outcome is None:
                break  # in doubt: nothing earlier runs before its resolution
            continue
        steps.append(PlannedStep(call, spec if spec.compensation is not None else None))
    return steps


def undo_preview(state: SagaState, registry: ToolRegistry) -> list[UndoStep]:
    """What compensating ``state`` would run, in order (``plan``'s walk, never raising)."""
    steps = []
    for call in reversed(state.executed):
        assert call.outcome is not None
        spec = registry.find(call.intent.tool_name)
        done = state.compensations.get(call.outcome.seq)
        idempotent = spec is not None and spec.compensation_idempotent
        if done is not None and not done.may_run(idempotent=idempotent):
            continue
        undo = spec.compensation if spec is not None else None
        steps.append(
            UndoStep(
                call.outcome.seq,
                call.intent.tool_name,
                call.intent.input,
                call.outcome.payload_text,
                getattr(undo, "__name__", repr(undo)) if undo is not None else None,
                spec is not None,
            )
        )
    return steps


def context_for(saga_id: str, call: Call) -> CompensationContext:
    """The context a compensation receives for ``call``, from its journal entries."""
    assert call.outcome is not None
    return CompensationContext(
        saga_id=saga_id,
        seq=call.intent.seq,
        tool_name=call.intent.tool_name,
        input=call.intent.input,
        args=_loads(call.intent.input),
        result=call.outcome.payload_text,
        executed_seq=call.outcome.seq,
        idempotency_key=idempotency_key(saga_id, call.intent.seq),
    )


def check_tools(state: SagaState, registry: ToolRegistry) -> None:
    """Raise ``UnknownToolError`` now, before any decision is journaled, if compensating this
    saga would need a tool that is not imported here: never a half-started compensation. Every
    executed step's tool, also those the plan does not reach yet (they wait behind a doubt)."""
    for call in state.executed:
        registry.get(call.intent.tool_name)


def start_rows(state: SagaState, reason: str, *, deciding: int | None = None) -> list[Row]:
    """What starts a saga's compensation: the saga-level FAILED with the reason (once), and a
    REJECTED voiding each gate still open, so no approval of it can ever be resumed — except the
    gate at ``deciding``, whose own REJECTED the caller appends in the same batch."""
    if state.finished is not None:
        return []
    rows: list[Row] = []
    if state.failure is None:
        rows.append((SAGA_TOOL, Phase.FAILED, "", reason))
    for gate in state.open_gates:
        if gate.entry.seq == deciding:
            continue
        rows.append(
            (
                GATE_TOOL,
                Phase.REJECTED,
                decision_input(gate.entry.seq, gate.input_hash),
                decision_payload("", f"void: {reason}"),
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class CompensationRun:
    """How a run ended: the saga's status and what each step did, in order."""

    status: SagaStatus
    report: tuple[CompensationStep, ...] = ()

    def result(self, saga_id: str, value: Any = None, error: BaseException | None = None) -> SagaResult:
        return SagaResult(saga_id, self.status, value, error, self.report)


def compensate(
    engine: Engine,
    saga_id: str,
    reason: str,
    *,
    wait: bool = True,
    state: SagaState | None = None,
    only_if: Callable[[SagaState], bool] | None = None,
) -> Operation[CompensationRun | None]:
    """Start (or carry on) the saga's compensation and run it to the end or to a doubt.

    ``state``, if the caller already read the saga, is brought up to date instead of read again.
    Returns None, doing nothing, when ``wait`` is False and another runner holds the lease, or
    when ``only_if`` (the decision to start, checked on the state the start is fenced on) says no.
    """
    traced = _otel_spans.CompensationTrace(saga_id) if _telemetry.active else _otel_spans.UNTRACED
    with engine.lease(saga_id, wait=wait) as held, traced as trace:
        if not held:
            return None
        # Read (or caught up) only once the lease is held: an open compensation INTENT in this
        # state can then only be a dead runner's.
        state = engine.refresh(state) if state is not None else engine.snapshot(saga_id)
        if state.finished is not None:
            return CompensationRun(state.status)
        refused: list[bool] = []

        def choose(now: SagaState) -> list[Row]:
            if only_if is not None and not only_if(now):
                refused.append(True)
                return []
            return start_rows(now, reason)

        if only_if is not None and not only_if(state):
            return None
        check_tools(state, engine.registry)
        trace.start(reason)
        landed = engine.decide(state, choose)
        if refused:
            return None
        for gate in state.gates.values():
            if gate.rejection in landed:  # voided just now: its request row goes too
                engine.drop_request(saga_id, gate.entry.seq)
        report: list[CompensationStep] = []
        handled: set[int] = set()
        while (step := _next_step(state, engine.registry, handled)) is not None:
            handled.add(step.executed_seq)
            if step.spec is None:
                report.append(_outcome_of(step, CompensationOutcome.SKIPPED))
                trace.step_finished(report[-1])
                continue
            trace.step_started(step.call.intent.tool_name, step.executed_seq)
            if not engine.decide(state, functools.partial(_claim_rows, step=step)):
                trace.step_dropped()
                continue  # settled meanwhile (a human resolved it)
            outcome: Outcome = yield Invoke(
                trace.around(step.spec.compensation, claimed=state.last_seq),  # type: ignore[arg-type]
                (context_for(saga_id, step.call),),
            )
            report.append(_record(engine, state, step, outcome))
            trace.step_finished(report[-1], state.last_seq, state.last_hash)
        status = _finish(engine, state)
        trace.finished(str(status))
        return CompensationRun(status, tuple(report))


def _next_step(state: SagaState, registry: ToolRegistry, handled: set[int]) -> PlannedStep | None:
    return next((s for s in plan(state, registry) if s.executed_seq not in handled), None)


def _claim_rows(state: SagaState, step: PlannedStep) -> list[Row]:
    """The step's INTENT, if the state still shows it to run (under the lease, an INTENT without
    outcome is a dead runner's: re-run only if the compensation is idempotent)."""
    assert step.spec is not None
    done = state.compensations.get(step.executed_seq)
    if done is not None and not done.may_run(idempotent=step.spec.compensation_idempotent):
        return []
    intent = step.call.intent
    return [(intent.tool_name, Phase.INTENT, intent.input, f"{COMPENSATES}{step.executed_seq}")]


def _record(engine: Engine, state: SagaState, step: PlannedStep, outcome: Outcome) -> CompensationStep:
    intent = step.call.intent
    if outcome.error is None:
        engine.append(
            state, intent.tool_name, Phase.COMPENSATED, intent.input, compensated_payload(step.executed_seq)
        )
        if DEBIT in intent.payload:  # the call took from a budget: give it back
            give_back_call(engine.journal, intent, step.executed_seq)
        return _outcome_of(step, CompensationOutcome.COMPENSATED)
    error = describe(outcome.error)
    engine.append(
        state,
        intent.tool_name,
        Phase.COMPENSATION_FAILED,
        intent.input,
        compensation_failed_payload(step.executed_seq, error),
    )
    return _outcome_of(step, CompensationOutcome.COMPENSATION_FAILED, error)


def _outcome_of(step: PlannedStep, outcome: CompensationOutcome, error: str = "") -> CompensationStep:
    return CompensationStep(step.executed_seq, step.call.intent.tool_name, outcome, error)


def _finish(engine: Engine, state: SagaState) -> SagaStatus:
    """Journal the end of compensation if nothing is open or left; the saga's status."""
    engine.decide(state, lambda s: _finish_rows(s, engine.registry))
    return state.status


def _finish_rows(state: SagaState, registry: ToolRegistry) -> list[Row]:
    if state.finished is not None or state.failure is None:
        return []
    if state.open_calls or state.open_compensations:
        return []
    if any(step.spec is not None for step in plan(state, registry)):
        return []
    outcomes = [c.outcome.phase for c in state.compensations.values() if c.outcome is not None]
    failed = outcomes.count(Phase.COMPENSATION_FAILED)
    phase = Phase.COMPENSATION_FAILED if failed else Phase.COMPENSATED
    summary = f"compensation finished: {len(outcomes) - failed} compensated, {failed} failed"
    rows: list[Row] = [(SAGA_TOOL, phase, "", summary)]
    if state.start is not None:  # the saga's END, in the same batch: how it ended
        if failed:
            ended = SagaStatus.COMPENSATION_FAILED
        else:
            ended = SagaStatus.REJECTED if state.rejected is not None else SagaStatus.COMPENSATED
        rows.append((LIFE_TOOL, Phase.EXECUTED, state.start.input, end_payload(ended)))
    return rows


def _loads(text: str) -> dict[str, Any]:
    """The call's arguments; ``{}`` for an input that is not a JSON object (another writer's)."""
    try:
        return json_object(text, what="input")
    except InvalidValueError:
        return {}
