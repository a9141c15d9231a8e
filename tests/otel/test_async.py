"""Async sagas: spans follow ``await``, tasks and worker threads; async compensations run with
their step's span current; the async twins trace as the blocking methods do."""

from __future__ import annotations

import asyncio

import pytest

from sagacity import CompensationContext, Reversibility, Sagacity, SagaStatus, tool

from .conftest import Otel


def test_concurrent_async_calls_each_get_their_own_span(otel: Otel) -> None:
    """Fifty calls gathered in one saga: fifty execute_tool spans under the saga's span, each
    with its own INTENT and EXECUTED seq (journal facts never cross between concurrent calls)."""
    tracer = otel.tracer_provider.get_tracer("inner")

    @tool
    async def fetch(n: int) -> int:
        with tracer.start_as_current_span(f"inner {n}"):
            await asyncio.sleep(0)
        return n

    async def agent() -> list[int]:
        return list(await asyncio.gather(*(fetch(n) for n in range(50))))

    with Sagacity("memory://") as sg:
        result = asyncio.run(sg.run_async("async-1", agent))
        entries = {e.seq: e for e in sg.entries("async-1")}
    assert result.status is SagaStatus.COMPLETED
    saga = otel.one("sagacity.saga")
    calls = otel.children(saga)
    assert len(calls) == 50
    assert {c.name for c in calls} == {"execute_tool fetch"}
    seen = set()
    for call in calls:
        attrs = call.attributes or {}
        intent, outcome = attrs["sagacity.journal.intent_seq"], attrs["sagacity.journal.seq"]
        assert entries[intent].phase == "INTENT"
        assert entries[outcome].phase == "EXECUTED"
        assert entries[intent].input == entries[outcome].input  # the outcome of that very call
        assert attrs["sagacity.journal.hash"] == entries[outcome].hash
        seen.update((intent, outcome))
        [inner] = otel.children(call)
        assert inner.name == f"inner {entries[intent].input.split(':')[1].rstrip('}')}"
    assert len(seen) == 100


def test_async_compensation_runs_with_its_step_span_current(otel: Otel) -> None:
    """``reject_async`` compensates on the caller's loop; spans the compensation makes are
    children of its ``compensate`` step, under the reject's span."""
    tracer = otel.tracer_provider.get_tracer("inner")

    @tool
    async def reserve(sku: str) -> str:
        return f"r-{sku}"

    @reserve.compensation
    async def release(ctx: CompensationContext) -> None:
        with tracer.start_as_current_span("DELETE /reservations"):
            await asyncio.sleep(0)

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    async def wire(amount: str) -> str:
        return "sent"

    async def agent() -> str:
        await reserve("SKU-1")
        return await wire("10.00")

    async def main() -> None:
        with Sagacity("memory://") as sg:
            result = await sg.run_async("async-2", agent)
            assert result.status is SagaStatus.AWAITING_APPROVAL
            decision = await sg.reject_async("async-2", 4, "bob@example.com", "wrong amount")
            assert decision.result is not None
            assert decision.result.status is SagaStatus.REJECTED

    asyncio.run(main())
    reject = otel.one("sagacity.reject")
    assert otel.tree(reject) == [
        "sagacity.reject",
        "  sagacity.compensate",
        "    compensate reserve",
        "      DELETE /reservations",
    ]
    attrs = reject.attributes or {}
    assert "sagacity.decision.reason" not in attrs  # a human's words are content: off by default
    assert attrs["sagacity.journal.phase"] == "REJECTED"
    gate = otel.one("execute_tool wire")
    assert gate.context is not None
    assert reject.links[0].context.span_id == gate.context.span_id


def test_resume_async_links_to_the_gate(otel: Otel) -> None:
    @tool(reversibility=Reversibility.IRREVERSIBLE)
    async def wire(amount: str) -> str:
        return "sent"

    async def agent() -> str:
        return await wire("1.00")

    async def main() -> None:
        with Sagacity("memory://") as sg:
            await sg.run_async("async-3", agent)
            await sg.approve_async("async-3", 2, "alice@example.com")
            result = await sg.resume_async("async-3", 2, '{"amount":"1.00"}')
            assert result.status is SagaStatus.COMPLETED

    asyncio.run(main())
    gate = otel.one("execute_tool wire", **{"sagacity.call.outcome": "AWAITING_APPROVAL"})
    executed = otel.one("execute_tool wire", **{"sagacity.call.outcome": "EXECUTED"})
    assert gate.context is not None
    for name in ("sagacity.approve", "sagacity.resume"):
        assert otel.one(name).links[0].context.span_id == gate.context.span_id
    assert executed.links[0].context.span_id == gate.context.span_id
    assert otel.tree(otel.one("sagacity.resume")) == [
        "sagacity.resume",
        "  sagacity.saga",
        "    execute_tool wire",
    ]


def test_a_cancelled_saga_ends_its_spans(otel: Otel) -> None:
    """Cancelled mid-call by a timeout: the call's span ends IN_DOUBT-free as FAILED with
    CancelledError, the saga compensates and its span ends COMPENSATED."""

    @tool
    async def slow(n: int) -> int:
        await asyncio.sleep(10)
        return n

    @tool
    async def quick(n: int) -> int:
        return n

    @quick.compensation
    def undo(ctx: CompensationContext) -> None: ...

    async def agent() -> None:
        await quick(1)
        await slow(2)

    async def main() -> None:
        with Sagacity("memory://") as sg:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await sg.run_async("async-4", agent)
            assert await sg.status_async("async-4") is SagaStatus.COMPENSATED

    asyncio.run(main())
    call = otel.one("execute_tool slow")
    attrs = call.attributes or {}
    assert attrs["sagacity.call.outcome"] == "FAILED"
    assert attrs["error.type"] == "CancelledError"
    saga = otel.one("sagacity.saga")
    assert (saga.attributes or {})["sagacity.saga.status"] == "COMPENSATED"
    assert otel.tree(saga)[-2:] == ["  sagacity.compensate", "    compensate quick"]
