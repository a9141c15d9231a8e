"""Compensation: a pure plan from the journal, and runs of it that are journaled step by step.

The plan walks EXECUTED calls in strict reverse order of execution and leaves out every call
whose compensation already has a journaled outcome, so a run interrupted by a crash is finished
later from the journal alone and no compensation runs twice. A compensation that has an INTENT
but no outcome is *in doubt*: it is re-run only if declared idempotent, otherwise left for a
human (``Sagacity.resolve_in_doubt``), and the saga stays IN_DOUBT until then.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagacity._context import idempotency_key
from sagacity._state import (
    COMPENSATES,
    SAGA_TOOL,
    Call,
    SagaState,
    compensated_payload,
    compensation_failed_payload,
    fold,
)
from sagacity.errors import InvalidValueError
from sagacity.model import CompensationContext, CompensationOutcome, CompensationStep, Phase, SagaStatus
from sagacity.tools import ToolRegistry, ToolSpec, json_object

if TYPE_CHECKING:
    from sagacity._journal import Journal


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

    Raises ``UnknownToolError`` (before anything runs) for a step whose tool is not imported:
    whether it has a compensation cannot be known, so nothing may be assumed.
    """
    steps = []
    for call in reversed(state.executed):
        assert call.outcome is not None
        done = state.compensations.get(call.outcome.seq)
        spec = registry.get(call.intent.tool_name)
        if done is not None and not done.may_run(idempotent=spec.compensation_idempotent):
            continue
        steps.append(PlannedStep(call, spec if spec.compensation is not None else None))
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


class Compensator:
    """Runs plans against one journal; the sync and async paths share every journaling step."""

    def __init__(self, journal: Journal, registry: ToolRegistry) -> None:
        self.journal = journal
        self.registry = registry

    def check_tools(self, state: SagaState) -> None:
        """Raise ``UnknownToolError`` now, before any decision is journaled, if compensating
        this saga would need a tool that is not imported here."""
        plan(state, self.registry)

    # -- shared steps ----------------------------------------------------------------------------
    def start(self, state: SagaState, reason: str) -> None:
        """Journal the saga-level FAILED that marks the start of compensation (once)."""
        if state.failure is None:
            state.failure = self.journal.append(state.saga_id, SAGA_TOOL, Phase.FAILED, "", reason)

    def _begin(self, saga_id: str, step: PlannedStep) -> CompensationContext:
        assert step.spec is not None
        self.journal.append(
            saga_id,
            step.call.intent.tool_name,
            Phase.INTENT,
            step.call.intent.input,
            f"{COMPENSATES}{step.executed_seq}",
        )
        return context_for(saga_id, step.call)

    def _succeeded(self, saga_id: str, step: PlannedStep) -> CompensationStep:
        self.journal.append(
            saga_id,
            step.call.intent.tool_name,
            Phase.COMPENSATED,
            step.call.intent.input,
            compensated_payload(step.executed_seq),
        )
        return CompensationStep(
            step.executed_seq, step.call.intent.tool_name, CompensationOutcome.COMPENSATED
        )

    def _failed(self, saga_id: str, step: PlannedStep, exc: BaseException) -> CompensationStep:
        error = describe(exc)
        self.journal.append(
            saga_id,
            step.call.intent.tool_name,
            Phase.COMPENSATION_FAILED,
            step.call.intent.input,
            compensation_failed_payload(step.executed_seq, error),
        )
        return CompensationStep(
            step.executed_seq, step.call.intent.tool_name, CompensationOutcome.COMPENSATION_FAILED, error
        )

    def finish(self, saga_id: str) -> SagaStatus:
        """Journal the end of compensation if nothing is left in doubt; return the saga's status."""
        state = fold(saga_id, self.journal.iter_entries(saga_id))
        if state.finished is not None or state.failure is None:
            return state.status
        if state.open_calls or state.open_compensations:
            return SagaStatus.IN_DOUBT
        if any(step.spec is not None for step in plan(state, self.registry)):
            return SagaStatus.COMPENSATING
        outcomes = [c.outcome.phase for c in state.compensations.values() if c.outcome is not None]
        failed = outcomes.count(Phase.COMPENSATION_FAILED)
        phase = Phase.COMPENSATION_FAILED if failed else Phase.COMPENSATED
        summary = f"compensation finished: {len(outcomes) - failed} compensated, {failed} failed"
        self.journal.append(saga_id, SAGA_TOOL, phase, "", summary)
        return SagaStatus(phase)

    # -- runs ------------------------------------------------------------------------------------
    def run(self, state: SagaState) -> list[CompensationStep]:
        """Run the plan synchronously (async compensations get their own event loop)."""
        report = []
        for step in plan(state, self.registry):
            if step.spec is None:
                report.append(self._skipped(step))
                continue
            ctx = self._begin(state.saga_id, step)
            try:
                outcome = step.spec.compensation(ctx)  # type: ignore[misc]
                if inspect.isawaitable(outcome):
                    asyncio.run(_await(outcome))
            except Exception as exc:  # noqa: BLE001 - journaled; the run goes on to the next step
                report.append(self._failed(state.saga_id, step, exc))
            else:
                report.append(self._succeeded(state.saga_id, step))
        return report

    async def run_async(self, state: SagaState) -> list[CompensationStep]:
        """Run the plan inside the caller's event loop; journal I/O goes to a worker thread."""
        report = []
        for step in plan(state, self.registry):
            if step.spec is None:
                report.append(self._skipped(step))
                continue
            ctx = await asyncio.to_thread(self._begin, state.saga_id, step)
            try:
                outcome = step.spec.compensation(ctx)  # type: ignore[misc]
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as exc:  # noqa: BLE001 - journaled; the run goes on to the next step
                report.append(await asyncio.to_thread(self._failed, state.saga_id, step, exc))
            else:
                report.append(await asyncio.to_thread(self._succeeded, state.saga_id, step))
        return report

    @staticmethod
    def _skipped(step: PlannedStep) -> CompensationStep:
        return CompensationStep(step.executed_seq, step.call.intent.tool_name, CompensationOutcome.SKIPPED)


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _loads(text: str) -> dict[str, Any]:
    """The call's arguments; ``{}`` for an input that is not a JSON object (another writer's)."""
    try:
        return json_object(text, what="input")
    except InvalidValueError:
        return {}
