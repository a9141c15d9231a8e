"""Reconcilers: a call left in doubt is settled by asking the external system, never by guessing.

A tool may declare a reconciler (``@send_wire.reconcile``) and one for its undo
(``@send_wire.reconcile_compensation``). Given the journaled call it asks the system the call
went to (a payment looked up by its idempotency key) and answers *happened*, *did not happen*
or *unknown*. The first two settle the INTENT exactly as a human's resolution does (a fenced
decision, so two reconcilers racing in two processes settle it once), journaled with the
reconciler's name and its evidence; *unknown*, an exception or a timeout leave it in doubt.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sagacity._effects import Operation
from sagacity._engine import Engine
from sagacity._payloads import reconciler_payload
from sagacity._recovery import resting_states, settle
from sagacity._state import Call, Compensation, SagaState
from sagacity.chain import idempotency_key
from sagacity.errors import InvalidValueError, SagacityError, SagaStateError
from sagacity.model import ReconcileContext, Reconciled, Reconciliation
from sagacity.tools import Reconciler, ToolRegistry, json_object

#: Seconds a reconciler may take before its call is left in doubt (``Sagacity.reconcile``).
DEFAULT_RECONCILE_TIMEOUT = 30.0

HAPPENED = "happened"
DID_NOT_HAPPEN = "did_not_happen"
UNKNOWN = "unknown"
ANSWERS = (HAPPENED, DID_NOT_HAPPEN, UNKNOWN)


@dataclass(frozen=True, slots=True)
class Asked:
    """What asking a reconciler gave: its answer, or why there is none (``error``, ``timeout``,
    ``no_reconciler``), with its evidence or the reason."""

    answer: str
    reconciler: str
    evidence: str
    result: str = ""


def context_of_call(state: SagaState, call: Call) -> ReconcileContext:
    """What a call's reconciler is given: the call as journaled."""
    return _context(state, call, call.intent.timestamp)


def context_of_undo(state: SagaState, comp: Compensation) -> ReconcileContext | None:
    """What an undo's reconciler is given: the call it undoes, its result, and when the undo began."""
    call = next((c for c in state.executed if c.outcome and c.outcome.seq == comp.executed_seq), None)
    if call is None or call.outcome is None:
        return None
    started = comp.intent.timestamp if comp.intent is not None else call.outcome.timestamp
    return _context(state, call, started, undo=comp)


def _context(
    state: SagaState, call: Call, started: datetime, undo: Compensation | None = None
) -> ReconcileContext:
    intent = call.intent
    return ReconcileContext(
        state.saga_id,
        intent.seq,
        intent.tool_name,
        intent.input,
        _args(intent.input),
        idempotency_key(state.saga_id, intent.seq),
        started,
        kind="call" if undo is None else "compensation",
        result=call.outcome.payload_text if undo is not None and call.outcome is not None else "",
        executed_seq=undo.executed_seq if undo is not None else None,
    )


def _args(input: str) -> dict[str, Any]:
    try:
        return json_object(input, what="input")
    except SagacityError:
        return {}


def reconciler_for(registry: ToolRegistry, ctx: ReconcileContext) -> Reconciler | None:
    spec = registry.find(ctx.tool_name)
    if spec is None:
        return None
    return spec.compensation_reconciler if ctx.kind == "compensation" else spec.reconciler


def require_timeout(timeout: float) -> float:
    """A reconciler's time limit: a number of seconds above zero, else ``InvalidValueError``."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise InvalidValueError(f"timeout must be a number of seconds above 0, not {timeout!r}")
    return float(timeout)


def ask(reconciler: Reconciler | None, ctx: ReconcileContext, timeout: float) -> Asked:
    """Ask ``reconciler`` about ``ctx`` within ``timeout`` seconds (an ``async def`` one on a loop
    of its own). Whatever goes wrong (it raises, hangs, answers something else) is no answer."""
    if reconciler is None:
        what = "its undo" if ctx.kind == "compensation" else "it"
        return Asked("no_reconciler", "", f"tool {ctx.tool_name!r} declares no reconciler for {what} here")
    box: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            value = reconciler.fn(ctx)
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
            box.append(value)
        except BaseException as exc:  # noqa: BLE001 - reported as no answer, never raised on
            box.append(exc)
        finally:
            done.set()

    # A daemon thread: a reconciler that never returns is left behind, not waited for at exit.
    threading.Thread(target=run, name=f"reconcile {ctx.tool_name}", daemon=True).start()
    if not done.wait(timeout):
        return Asked("timeout", reconciler.name, f"no answer within {timeout:g} s")
    value = box[0]
    if isinstance(value, BaseException):
        return Asked("error", reconciler.name, f"{type(value).__name__}: {value}")
    if not isinstance(value, Reconciliation) or value.answer not in ANSWERS:
        return Asked(
            "error",
            reconciler.name,
            f"answered {value!r}, not Reconciliation.happened / did_not_happen / unknown",
        )
    return Asked(value.answer, reconciler.name, str(value.evidence), str(value.result))


async def _awaited(value: Any) -> Any:
    return await value


def reconcile(
    engine: Engine, saga_ids: Iterable[str], timeout: float, *, compensate_after: bool = True
) -> Operation[list[Reconciled]]:
    """Ask the reconcilers about every in-doubt call and undo of ``saga_ids`` (those no living
    process runs) and settle those they know about, oldest first."""
    done: list[Reconciled] = []
    for state in resting_states(engine, saga_ids):
        if not (state.open_calls or state.open_compensations) or engine.is_live(state.saga_id):
            continue
        contexts = [context_of_call(state, call) for call in state.open_calls]
        for comp in state.open_compensations:
            ctx = context_of_undo(state, comp)
            if ctx is not None and comp.intent is not None:
                contexts.append(ctx)
        seqs = {id(ctx): _intent_seq(state, ctx) for ctx in contexts}
        for ctx in sorted(contexts, key=lambda c: seqs[id(c)]):
            asked = ask(reconciler_for(engine.registry, ctx), ctx, timeout)
            report = yield from _settle(engine, ctx, seqs[id(ctx)], asked, compensate_after)
            done.append(report)
    return done


def _intent_seq(state: SagaState, ctx: ReconcileContext) -> int:
    """The seq of the INTENT in doubt: the call's own, or its undo's."""
    if ctx.kind == "compensation":
        comp = state.compensations[ctx.executed_seq or 0]
        assert comp.intent is not None
        return comp.intent.seq
    return ctx.seq


def _settle(
    engine: Engine, ctx: ReconcileContext, seq: int, asked: Asked, compensate_after: bool
) -> Operation[Reconciled]:
    def report(
        answer: str, settled: bool, outcome: str = "", status: Any = None, why: str = ""
    ) -> Reconciled:
        return Reconciled(
            ctx.saga_id,
            seq,
            ctx.tool_name,
            ctx.kind,
            answer,
            asked.reconciler,
            why or asked.evidence,
            settled,
            outcome,
            status,
        )

    if asked.answer not in (HAPPENED, DID_NOT_HAPPEN):
        return report(asked.answer, False)
    happened = asked.answer == HAPPENED
    said = f"reconciler {asked.reconciler} found {'it' if happened else 'no effect'}: {asked.evidence}"
    try:
        status = yield from settle(
            engine,
            ctx.saga_id,
            seq,
            happened=happened,
            note=reconciler_payload(asked.reconciler, asked.evidence),
            result=asked.result,
            why_call=said,
            why_undo=said,
            by=f"reconciler {asked.reconciler}",
            compensate_after=compensate_after,
        )
    except SagaStateError:
        return report("settled_elsewhere", False)
    except SagacityError as exc:
        return report("error", False, why=f"{type(exc).__name__}: {exc}")
    if ctx.kind == "compensation":
        outcome = "COMPENSATED" if happened else "COMPENSATION_FAILED"
    else:
        outcome = "EXECUTED" if happened else "FAILED"
    return report(asked.answer, True, outcome, status)
