"""The sync and async shells over one engine: cancellation compensates, interrupts compensate,
every blocking method refuses a running loop and has an ``_async`` twin that works."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from sagacity import CompensationContext, Phase, Reversibility, Sagacity, SagaStatus, tool
from sagacity.errors import BlockingCallError

PAYLOAD = '{"amount":"10.00","to":"ACME"}'


def declare(released: list[str], *, async_compensation: bool = False) -> tuple[Any, Any]:
    """A compensatable reserve (recording releases) and an irreversible wire."""

    @tool
    async def shell_reserve(sku: str) -> str:
        return f"res-{sku}"

    if async_compensation:

        @shell_reserve.compensation
        async def release(ctx: CompensationContext) -> None:
            await asyncio.sleep(0.01)  # a real await on the caller's loop
            released.append(ctx.args["sku"])
    else:

        @shell_reserve.compensation
        def release(ctx: CompensationContext) -> None:
            released.append(ctx.args["sku"])

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def shell_wire(amount: str, to: str) -> str:
        return f"sent {amount} to {to}"

    return shell_reserve, shell_wire


def saga_phases(sg: Sagacity, saga_id: str) -> list[tuple[str, str]]:
    return [(e.tool_name, str(e.phase)) for e in sg.entries(saga_id)]


def test_timeout_compensates_then_raises(sg: Sagacity) -> None:
    """``asyncio.timeout`` around ``run_async``: the saga compensates, then TimeoutError surfaces."""
    released: list[str] = []
    reserve, _ = declare(released, async_compensation=True)

    async def main() -> None:
        async with asyncio.timeout(None) as deadline:

            async def agent() -> None:
                await reserve("A")
                # Time out once the call is journaled, however long the store took to journal it.
                deadline.reschedule(asyncio.get_running_loop().time() + 0.05)
                await asyncio.sleep(30)

            await sg.run_async("timed-out", agent)

    with pytest.raises(TimeoutError):
        asyncio.run(main())
    assert released == ["A"]
    assert sg.status("timed-out") is SagaStatus.COMPENSATED
    assert ("shell_reserve", "COMPENSATED") in saga_phases(sg, "timed-out")


def test_task_cancel_compensates_even_if_cancelled_again(sg: Sagacity) -> None:
    """``task.cancel()`` twice while the saga compensates: the compensation still finishes."""
    released: list[str] = []
    reserve, _ = declare(released, async_compensation=True)

    async def main() -> None:
        reserved = asyncio.Event()

        async def agent() -> None:
            await reserve("A")
            await reserve("B")
            reserved.set()
            await asyncio.sleep(30)

        task = asyncio.create_task(sg.run_async("cancelled", agent))
        await reserved.wait()
        task.cancel()
        await asyncio.sleep(0.005)  # compensation under way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert released == ["B", "A"]
    assert sg.status("cancelled") is SagaStatus.COMPENSATED


def test_failing_task_group_compensates_the_sibling_saga(sg: Sagacity) -> None:
    """A TaskGroup whose other task fails cancels the saga: it compensates, the group raises."""
    released: list[str] = []
    reserve, _ = declare(released)

    async def main() -> None:
        reserved = asyncio.Event()

        async def agent() -> None:
            await reserve("A")
            reserved.set()
            await asyncio.sleep(30)

        async def failing() -> None:
            await reserved.wait()
            raise RuntimeError("sibling failed")

        async with asyncio.TaskGroup() as group:
            group.create_task(sg.run_async("grouped", agent))
            group.create_task(failing())

    with pytest.raises(ExceptionGroup) as caught:
        asyncio.run(main())
    assert caught.group_contains(RuntimeError, match="sibling failed")
    assert released == ["A"]
    assert sg.status("grouped") is SagaStatus.COMPENSATED


def test_async_with_saga_cancelled_compensates(sg: Sagacity) -> None:
    """``async with sg.saga()`` cancelled inside: compensation, then CancelledError."""
    released: list[str] = []
    reserve, _ = declare(released)

    async def work() -> None:
        async with sg.saga("scoped-cancel"):
            await reserve("A")
            asyncio.current_task().cancel()  # type: ignore[union-attr]
            await asyncio.sleep(1)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(work())
    assert released == ["A"]
    assert sg.status("scoped-cancel") is SagaStatus.COMPENSATED


def test_keyboard_interrupt_compensates_then_propagates(sg: Sagacity) -> None:
    """Ctrl-C in sync work: ``run`` and ``with sg.saga()`` compensate, then re-raise it."""
    released: list[str] = []
    reserve, _ = declare(released)

    def agent() -> None:
        asyncio.run(reserve("A"))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sg.run("interrupted", agent)

    def scoped() -> None:
        with sg.saga("interrupted-scope"):
            asyncio.run(reserve("B"))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        scoped()
    assert released == ["A", "B"]
    assert sg.status("interrupted") is SagaStatus.COMPENSATED
    assert sg.status("interrupted-scope") is SagaStatus.COMPENSATED


def test_resume_always_leaves_the_live_set(sg: Sagacity) -> None:
    """A resume whose tool is cancelled mid-call does not leave the saga RUNNING forever."""
    released: list[str] = []

    @tool
    def leave_reserve(sku: str) -> str:
        return sku

    @leave_reserve.compensation
    def leave_release(ctx: CompensationContext) -> None:
        released.append(ctx.args["sku"])

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    async def slow_wire(amount: str, to: str) -> str:
        await asyncio.sleep(30)
        return "sent"

    async def agent() -> None:
        leave_reserve("A")
        await slow_wire("10.00", "ACME")

    asyncio.run(sg.run_async("resume-cancelled", agent))
    [request] = sg.pending_approvals("resume-cancelled")
    sg.approve("resume-cancelled", request.journal_seq, "alice@example.com")

    async def main() -> None:
        async with asyncio.timeout(0.3):
            await sg.resume_async("resume-cancelled", request.journal_seq, PAYLOAD)

    with pytest.raises(TimeoutError):
        asyncio.run(main())
    assert sg.status("resume-cancelled") is SagaStatus.COMPENSATED  # not RUNNING
    assert released == ["A"]
    assert ("slow_wire", "FAILED") in saga_phases(sg, "resume-cancelled")


def test_reject_async_runs_async_compensations_on_the_loop(sg: Sagacity) -> None:
    """``reject_async`` from async code compensates with async compensations (not FAILED)."""
    released: list[str] = []
    reserve, wire = declare(released, async_compensation=True)

    async def agent() -> None:
        await reserve("A")
        wire("10.00", "ACME")

    async def main() -> None:
        await sg.run_async("async-reject", agent)
        [request] = await sg.pending_approvals_async("async-reject")
        decision = await sg.reject_async("async-reject", request.journal_seq, "bob@example.com", "no")
        assert decision.result is not None
        assert decision.result.status is SagaStatus.REJECTED

    asyncio.run(main())
    assert released == ["A"]
    assert ("shell_reserve", "COMPENSATION_FAILED") not in saga_phases(sg, "async-reject")


def test_async_twins_approve_resume_expire_recover_resolve(sg: Sagacity) -> None:
    """Every decision has an async twin that does what the blocking one does."""
    released: list[str] = []
    reserve, wire = declare(released)

    async def agent() -> None:
        await reserve("A")
        wire("10.00", "ACME")

    async def main() -> None:
        await sg.run_async("twins", agent)
        [request] = await sg.pending_approvals_async("twins")
        await sg.approve_async("twins", request.journal_seq, "alice@example.com")
        result = await sg.resume_async("twins", request.journal_seq, PAYLOAD)
        assert result.status is SagaStatus.COMPLETED
        assert (await sg.status_async("twins")) is SagaStatus.COMPLETED
        assert (await sg.verify_async("twins")).valid
        lines = [line async for line in sg.export_async("twins")]
        assert len(lines) == len(await sg.entries_async("twins"))
        assert "twins" in await sg.saga_ids_async()
        assert [s.saga_id for s in await sg.sagas_async()] == ["twins"]

        await sg.run_async("expiring", agent)
        [gate] = await sg.pending_approvals_async("expiring")
        assert gate.expires_at is not None
        expired = await sg.expire_approvals_async(now=gate.expires_at)
        assert [r.saga_id for r in expired] == ["expiring"]

        # A process died mid-call: a human resolves it, then recovery has nothing left to do.
        sg.journal.append("doubt", "shell_reserve", Phase.INTENT, '{"sku":"Z"}')
        [call] = await sg.in_doubt_async("doubt")
        status = await sg.resolve_in_doubt_async(
            "doubt", call.seq, happened=True, resolver="ops", result="res-Z"
        )
        assert status is SagaStatus.COMPLETED
        assert await sg.recover_async() == []

    asyncio.run(main())
    assert released == ["A"]  # the expired saga's reservation
    assert sg.status("expiring") is SagaStatus.REJECTED


BLOCKING = [
    ("run", ("s", lambda: None)),
    ("status", ("s",)),
    ("sagas", ()),
    ("in_doubt", ()),
    ("resolve_in_doubt", ("s", 1)),
    ("recover", ()),
    ("pending_approvals", ()),
    ("approvals", ()),
    ("saga_detail", ("s",)),
    ("diagnose", ()),
    ("approve", ("s", 1, "alice")),
    ("reject", ("s", 1, "alice", "no")),
    ("resume", ("s", 1, "{}")),
    ("expire_approvals", ()),
    ("entries", ("s",)),
    ("saga_ids", ()),
    ("verify", ("s",)),
    ("export", ("s",)),
]


@pytest.mark.parametrize(("name", "args"), BLOCKING, ids=[name for name, _ in BLOCKING])
def test_blocking_method_refuses_a_running_loop_naming_its_twin(name: str, args: tuple[Any, ...]) -> None:
    """Inside an event loop each blocking method raises, naming the ``_async`` twin that exists."""
    with Sagacity("memory://") as sg:
        kwargs = {"happened": True, "resolver": "ops"} if name == "resolve_in_doubt" else {}

        async def main() -> None:
            with pytest.raises(BlockingCallError, match=rf"sg\.{name}_async\("):
                getattr(sg, name)(*args, **kwargs)

        asyncio.run(main())
        twin = getattr(sg, f"{name}_async")
        assert inspect.iscoroutinefunction(twin) or inspect.isasyncgenfunction(twin)


def test_sync_saga_scope_refuses_a_running_loop() -> None:
    """``with sg.saga()`` inside a coroutine points to ``async with``."""
    with Sagacity("memory://") as sg:

        async def main() -> None:
            with pytest.raises(BlockingCallError, match=r"async with sg\.saga"), sg.saga("s"):
                pass

        asyncio.run(main())
