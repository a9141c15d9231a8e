"""Tools and sagas through the public API: journaling, compensation order, context propagation."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import sagacity
from sagacity import (
    CompensationContext,
    CompensationOutcome,
    Phase,
    Retry,
    Reversibility,
    Sagacity,
    SagaStatus,
    current_call,
    in_current_saga,
    tool,
)
from sagacity._payloads import LIFE_TOOL as LIFE
from sagacity.errors import (
    BlockingCallError,
    IrreversibleToolError,
    SagaClosedError,
    SagaExistsError,
    SagaStateError,
    ToolRegistrationError,
)


def phases(sg: Sagacity, saga_id: str) -> list[tuple[str, str]]:
    return [(e.tool_name, e.phase) for e in sg.entries(saga_id)]


def test_tool_keeps_what_frameworks_introspect() -> None:
    """A decorated tool keeps name, docstring, signature and annotations, and async stays async."""

    @tool
    def reserve(sku: str, quantity: int = 1) -> str:
        """Hold stock."""
        return sku

    @tool(name="lookup")
    async def fetch(key: str) -> int:
        return 1

    assert reserve.__name__ == "reserve"
    assert reserve.__doc__ == "Hold stock."
    assert list(inspect.signature(reserve).parameters) == ["sku", "quantity"]
    assert inspect.signature(reserve).parameters["quantity"].default == 1
    assert reserve.__annotations__ == {"sku": "str", "quantity": "int", "return": "str"}
    assert reserve.spec.name == "reserve"
    assert inspect.iscoroutinefunction(fetch)
    assert fetch.spec.name == "lookup"
    assert not inspect.iscoroutinefunction(reserve)


def test_outside_a_saga_a_tool_just_runs(sg: Sagacity) -> None:
    """Outside any saga a tool returns its result and nothing is journaled."""

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    assert add(2, 3) == 5
    assert sg.saga_ids() == []


def test_registration_rules() -> None:
    """Redefining the same function replaces it; another function under a taken or reserved name fails."""

    def make() -> object:
        @tool
        def same_name() -> None: ...

        return same_name

    make()
    make()  # the same module and qualified name: a reload, allowed

    with pytest.raises(ToolRegistrationError, match="already taken"):

        @tool(name="same_name")
        def other() -> None: ...

    with pytest.raises(ToolRegistrationError, match="reserved"):

        @tool(name="approval-gate")
        def gate() -> None: ...


def test_successful_saga_journals_intent_and_outcome(sg: Sagacity) -> None:
    """Each call is INTENT then EXECUTED, input bound to parameter names, results as str or JSON."""

    @tool
    def reserve(sku: str, quantity: int = 1) -> str:
        return f"res-{sku}"

    @tool
    def quote(sku: str) -> dict[str, object]:
        return {"sku": sku, "price": "9.90"}

    def agent() -> str:
        reserve("SKU-9", quantity=2)
        quote("SKU-9")
        return "done"

    result = sg.run("order-1", agent)
    assert result.status is SagaStatus.COMPLETED
    assert result.ok
    assert result.value == "done"
    entries = sg.entries("order-1")
    assert [(e.seq, e.tool_name, e.phase) for e in entries] == [
        (1, "sagacity:saga", "INTENT"),
        (2, "reserve", "INTENT"),
        (3, "reserve", "EXECUTED"),
        (4, "quote", "INTENT"),
        (5, "quote", "EXECUTED"),
        (6, "sagacity:saga", "EXECUTED"),
    ]
    assert entries[0].input == entries[5].input == '{"onAbandon":"compensate"}'
    assert json.loads(entries[5].payload) == {"status": "COMPLETED"}
    assert entries[1].input == '{"sku":"SKU-9","quantity":2}'
    assert entries[1].payload == ""
    assert entries[2].payload == "res-SKU-9"
    assert json.loads(entries[4].payload) == {"sku": "SKU-9", "price": "9.90"}
    assert sg.verify("order-1").valid
    assert sg.status("order-1") is SagaStatus.COMPLETED


def test_failure_compensates_executed_steps_in_reverse(sg: Sagacity) -> None:
    """When the work fails, only EXECUTED calls are compensated, newest first, each with its context."""
    seen: list[CompensationContext] = []

    @tool
    def reserve(sku: str) -> str:
        return f"res-{sku}"

    @reserve.compensation
    def release(ctx: CompensationContext) -> None:
        seen.append(ctx)

    @tool
    def charge(amount: int) -> str:
        raise ValueError(f"card declined for {amount}")

    @charge.compensation
    def refund(ctx: CompensationContext) -> None:
        raise AssertionError("a FAILED call must never be compensated")

    def agent() -> None:
        reserve("A")
        reserve("B")
        charge(500)

    result = sg.run("order-2", agent)
    assert result.status is SagaStatus.COMPENSATED
    assert isinstance(result.error, ValueError)
    assert [(s.seq, s.outcome) for s in result.report] == [
        (5, CompensationOutcome.COMPENSATED),
        (3, CompensationOutcome.COMPENSATED),
    ]
    assert [c.args for c in seen] == [{"sku": "B"}, {"sku": "A"}]
    assert (seen[0].saga_id, seen[0].seq, seen[0].executed_seq, seen[0].tool_name) == (
        "order-2",
        4,
        5,
        "reserve",
    )
    assert seen[0].input == '{"sku":"B"}'
    assert seen[0].result == "res-B"
    entries = sg.entries("order-2")
    failed = next(e for e in entries if e.phase == Phase.FAILED and e.tool_name == "charge")
    assert failed.payload == "ValueError: card declined for 500"
    compensated = [e for e in entries if e.phase == Phase.COMPENSATED and e.tool_name == "reserve"]
    assert [e.payload for e in compensated] == ["compensated effect seq=5", "compensated effect seq=3"]
    assert [e.input for e in compensated] == ['{"sku":"B"}', '{"sku":"A"}']
    assert entries[-2].tool_name == "saga"
    assert entries[-2].phase == Phase.COMPENSATED
    assert (entries[-1].tool_name, entries[-1].phase) == ("sagacity:saga", Phase.EXECUTED)
    assert json.loads(entries[-1].payload) == {"status": "COMPENSATED"}
    assert sg.status("order-2") is SagaStatus.COMPENSATED
    assert sg.verify("order-2").valid


def test_swallowed_tool_error_still_compensates(sg: Sagacity) -> None:
    """A tool that raised is seen even when the caller turned the error into text for the model."""
    undone: list[str] = []

    @tool
    def book(room: str) -> str:
        return room

    @book.compensation
    def cancel(ctx: CompensationContext) -> None:
        undone.append(ctx.result)

    @tool
    def pay() -> None:
        raise ConnectionError("gateway down")

    def agent() -> str:
        book("101")
        try:
            pay()
        except ConnectionError as exc:
            return f"tool error: {exc}"  # what agent frameworks do
        return "paid"

    result = sg.run("trip-1", agent)
    assert result.value == "tool error: gateway down"
    assert result.status is SagaStatus.COMPENSATED
    assert isinstance(result.error, ConnectionError)
    assert undone == ["101"]


def test_failing_compensation_is_journaled_and_the_run_goes_on(sg: Sagacity) -> None:
    """A raising compensation is journaled COMPENSATION_FAILED, the run goes on; none declared: SKIPPED."""
    undone: list[str] = []

    @tool
    def first() -> str:
        return "1"

    @first.compensation
    def undo_first(ctx: CompensationContext) -> None:
        undone.append("first")

    @tool
    def second() -> str:
        return "2"

    @second.compensation
    def undo_second(ctx: CompensationContext) -> None:
        raise RuntimeError("refund API down")

    @tool
    def third() -> str:
        return "3"  # declares no compensation

    def agent() -> None:
        first()
        second()
        third()
        raise KeyError("the model gave up")

    result = sg.run("s", agent)
    assert result.status is SagaStatus.COMPENSATION_FAILED
    assert [(s.tool_name, s.outcome) for s in result.report] == [
        ("third", CompensationOutcome.SKIPPED),
        ("second", CompensationOutcome.COMPENSATION_FAILED),
        ("first", CompensationOutcome.COMPENSATED),
    ]
    assert result.report[1].error == "RuntimeError: refund API down"
    assert undone == ["first"]
    failed = [e for e in sg.entries("s") if e.phase == Phase.COMPENSATION_FAILED and e.tool_name == "second"]
    assert failed[0].payload == "compensation of effect seq=5 failed: RuntimeError: refund API down"
    assert sg.status("s") is SagaStatus.COMPENSATION_FAILED


def test_saga_block_reraises_after_compensating(sg: Sagacity) -> None:
    """``with sg.saga()`` compensates, then re-raises the block's exception; the result stays readable."""
    undone: list[int] = []

    @tool
    def step(n: int) -> int:
        return n

    @step.compensation
    def unstep(ctx: CompensationContext) -> None:
        undone.append(ctx.args["n"])

    def block() -> None:
        with sg.saga("blk") as saga:
            scopes.append(saga)
            step(1)
            step(2)
            raise LookupError("no such customer")

    scopes: list[sagacity.SagaScope] = []
    with pytest.raises(LookupError, match="no such customer"):
        block()
    saga = scopes[0]
    assert undone == [2, 1]
    assert saga.result is not None
    assert saga.result.status is SagaStatus.COMPENSATED


def test_a_compensated_saga_cannot_be_reentered(sg: Sagacity) -> None:
    """A saga whose journal closed with compensation refuses new work under the same id, even
    continued on purpose (by default, any saga with a journal is refused: SagaExistsError)."""

    @tool
    def step() -> None:
        raise ValueError("x")

    sg.run("closed", step)
    with (
        pytest.raises(SagaStateError, match="start a new saga id"),
        sg.saga("closed", continue_existing=True),
    ):
        pass
    with pytest.raises(SagaExistsError, match="already exists"), sg.saga("closed"):
        pass


def test_a_call_in_a_closed_saga_is_refused_before_its_tool_runs(sg: Sagacity) -> None:
    """Starting a saga reads nothing, so the first call is the check: in a compensated saga it
    raises before its tool runs, journals nothing, and compensates nothing a second time."""
    ran: list[str] = []

    @tool
    def fail() -> None:
        raise ValueError("x")

    @tool
    def send() -> str:
        ran.append("send")
        return "sent"

    sg.run("closed", fail)
    before = sg.entries("closed")
    again = sg.saga("closed", continue_existing=True)
    with pytest.raises(SagaClosedError, match="start a new saga id") as raised, again as scope:
        send()
    assert isinstance(raised.value, SagaStateError)
    assert ran == []
    assert sg.entries("closed") == before
    assert scope.result is not None
    assert scope.result.status is SagaStatus.COMPENSATED
    assert sg.verify("closed").valid


def test_an_open_saga_is_continued_under_its_id(sg: Sagacity) -> None:
    """A saga continued on purpose (say, by the next turn of an agent) appends after its own
    entries: the first call finds its seq taken and lands after the existing tail, chain intact."""

    @tool
    def step(n: int) -> int:
        return n

    sg.run("turns", lambda: step(1))
    with sg.saga("turns", continue_existing=True) as scope:
        assert step(2) == 2
    assert scope.result is not None
    assert scope.result.status is SagaStatus.COMPLETED
    start = '{"onAbandon":"compensate"}'
    assert [(e.seq, e.phase, e.input) for e in sg.entries("turns")] == [
        (1, "INTENT", start),
        (2, "INTENT", '{"n":1}'),
        (3, "EXECUTED", '{"n":1}'),
        (4, "EXECUTED", start),  # the first run's END
        (5, "INTENT", '{"n":2}'),
        (6, "EXECUTED", '{"n":2}'),
        (7, "EXECUTED", start),  # the continued run's END: the saga completed again
    ]
    assert sg.verify("turns").valid
    with sg.saga("turns", continue_existing=True) as empty:
        pass  # no call: the end reads the journal instead
    assert empty.result is not None
    assert empty.result.status is SagaStatus.COMPLETED


def test_async_saga_gathers_fifty_calls_gap_free(sg: Sagacity) -> None:
    """Fifty concurrent async calls in one saga all land, gap-free, with a valid chain."""

    @tool
    async def fetch(i: int) -> int:
        await asyncio.sleep(0)
        return i

    async def main() -> list[int]:
        async with sg.saga("fan-out") as saga:
            values = await asyncio.gather(*(fetch(i) for i in range(50)))
        assert saga.result is not None
        assert saga.result.status is SagaStatus.COMPLETED
        return list(values)

    assert asyncio.run(main()) == list(range(50))
    entries = sg.entries("fan-out")
    assert [e.seq for e in entries] == list(range(1, 103))  # with the saga's START and END
    assert sum(e.phase == Phase.EXECUTED and e.tool_name == "fetch" for e in entries) == 50
    assert sg.verify("fan-out").valid


def test_context_follows_tasks_and_to_thread(sg: Sagacity) -> None:
    """Calls from a task created inside the saga and from asyncio.to_thread are journaled in it."""

    @tool
    def sync_step(name: str) -> str:
        return name

    @tool
    async def async_step(name: str) -> str:
        return name

    async def agent() -> None:
        task = asyncio.create_task(async_step("task"))
        await task
        await asyncio.to_thread(sync_step, "thread")

    result = asyncio.run(sg.run_async("ctx", agent))
    assert result.status is SagaStatus.COMPLETED
    executed = [e.input for e in sg.entries("ctx") if e.phase == Phase.EXECUTED and e.tool_name != LIFE]
    assert executed == ['{"name":"task"}', '{"name":"thread"}']


def test_threads_join_the_saga_with_in_current_saga(sg: Sagacity) -> None:
    """Eight worker threads calling tools through in_current_saga all land in the saga, gap-free."""

    @tool
    def work(i: int) -> int:
        return i * i

    def agent() -> list[int]:
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(in_current_saga(work), range(8)))

    result = sg.run("threads", agent)
    assert result.value == [i * i for i in range(8)]
    entries = sg.entries("threads")
    assert [e.seq for e in entries] == list(range(1, 19))  # with the saga's START and END
    assert sg.verify("threads").valid


def test_plain_threads_do_not_inherit_the_saga(sg: Sagacity) -> None:
    """A bare threading.Thread runs outside the saga (documented), so its call is not journaled."""

    @tool
    def work() -> str:
        return "ran"

    outside: list[object] = []

    def agent() -> None:
        work()
        t = threading.Thread(target=lambda: outside.append(current_call() is None and work()))
        t.start()
        t.join()

    sg.run("bare-thread", agent)
    assert outside == ["ran"]
    assert [e.tool_name for e in sg.entries("bare-thread")] == [LIFE, "work", "work", LIFE]


def test_idempotency_key_is_stable_and_reaches_the_compensation(sg: Sagacity) -> None:
    """The key derives from (saga id, INTENT seq): the same on retry and in the compensation."""
    keys: list[str] = []
    attempts: list[int] = []

    @tool(retry=Retry(on=(TimeoutError,), attempts=3, backoff=0.0))
    def pay(amount: int) -> str:
        call = current_call()
        assert call is not None
        keys.append(call.idempotency_key)
        attempts.append(call.attempt)
        if call.attempt < 3:
            raise TimeoutError("slow gateway")
        return "paid"

    comp_keys: list[str] = []

    @pay.compensation
    def refund(ctx: CompensationContext) -> None:
        comp_keys.append(ctx.idempotency_key)

    def agent() -> None:
        pay(10)
        raise RuntimeError("later failure")

    sg.run("idem", agent)
    assert attempts == [1, 2, 3]
    assert len(set(keys)) == 1
    assert comp_keys == keys[:1]
    assert keys[0] == sagacity._context.idempotency_key("idem", 2)  # the INTENT after the START
    assert keys[0].startswith("sgc_")
    assert len(keys[0]) == 44
    # One INTENT and the final outcome only, however many attempts ran.
    assert [e.phase for e in sg.entries("idem")[1:3]] == ["INTENT", "EXECUTED"]
    marker = sg.entries("idem")[3]
    assert (marker.tool_name, marker.phase, marker.payload) == (
        "saga",
        "FAILED",
        "RuntimeError: later failure",
    )


def test_retry_only_on_declared_errors_and_bounded(sg: Sagacity) -> None:
    """Undeclared errors fail at once; declared ones stop after the bound with one FAILED entry."""
    calls: list[str] = []

    @tool(retry=Retry(on=(TimeoutError,), attempts=2, backoff=0.0))
    def flaky(kind: str) -> None:
        calls.append(kind)
        raise TimeoutError("t") if kind == "timeout" else ValueError("v")

    sg.run("r1", flaky, "value")
    sg.run("r2", flaky, "timeout")
    assert calls == ["value", "timeout", "timeout"]
    for saga_id in ("r1", "r2"):
        assert phases(sg, saga_id)[1:3] == [("flaky", "INTENT"), ("flaky", "FAILED")]


def test_irreversible_tool_outside_a_saga_fails_closed() -> None:
    """An IRREVERSIBLE tool refuses to run outside a saga unless the caller opts out explicitly."""
    sent: list[str] = []

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def wire(amount: str) -> str:
        sent.append(amount)
        return "sent"

    with pytest.raises(IrreversibleToolError, match="outside a saga"):
        wire("10")
    assert sent == []
    with sagacity.allow_irreversible():
        assert wire("10") == "sent"
    assert sent == ["10"]


def test_raw_model_arguments_are_journaled_verbatim(sg: Sagacity) -> None:
    """call_json journals the model's argument JSON byte for byte and calls the tool with it."""

    @tool
    def search(query: str, limit: int = 5) -> str:
        return f"{query}:{limit}"

    raw = '{ "query": "café",  "limit": 3 }'
    result = sg.run("raw", lambda: search.call_json(raw))
    assert result.value == "café:3"
    assert sg.entries("raw")[1].input == raw  # after the saga's START


def test_blocking_run_inside_an_event_loop_names_the_async_twin(sg: Sagacity) -> None:
    """Calling the blocking run() inside a running loop raises and points at run_async."""

    async def main() -> None:
        with pytest.raises(BlockingCallError, match="run_async"):
            sg.run("x", lambda: None)

    asyncio.run(main())


def test_async_compensations_run_in_async_sagas(sg: Sagacity) -> None:
    """An async compensation is awaited when an async saga compensates, and also from a sync saga."""
    undone: list[str] = []

    @tool
    async def hold(name: str) -> str:
        return name

    @hold.compensation
    async def unhold(ctx: CompensationContext) -> None:
        await asyncio.sleep(0)
        undone.append(ctx.result)

    @tool
    def sync_hold(name: str) -> str:
        return name

    @sync_hold.compensation
    async def sync_unhold(ctx: CompensationContext) -> None:
        undone.append(ctx.result)

    async def agent() -> None:
        await hold("a")
        raise RuntimeError("stop")

    assert asyncio.run(sg.run_async("async-comp", agent)).status is SagaStatus.COMPENSATED

    def sync_agent() -> None:
        sync_hold("b")
        raise RuntimeError("stop")

    assert sg.run("sync-comp", sync_agent).status is SagaStatus.COMPENSATED
    assert undone == ["a", "b"]


def test_recover_and_resolve_refuse_before_writing_without_the_tools(sg: Sagacity) -> None:
    """Compensating needs every executed step's tool: without one, recover and resolve journal nothing."""
    from sagacity.errors import UnknownToolError
    from sagacity.tools import registry

    @tool
    def booked(room: str) -> str:
        return room

    sg.run("half", booked, "101")
    sg.journal.append("half", "booked", Phase.INTENT, '{"room":"102"}')  # a call cut off by a crash
    sg.journal.append("other", "booked", Phase.INTENT, '{"room":"1"}')
    sg.journal.append("other", "booked", Phase.EXECUTED, '{"room":"1"}', "1")
    sg.journal.append("other", "booked", Phase.INTENT, '{"room":"2"}')
    sg.journal.append("other", "booked", Phase.FAILED, '{"room":"2"}', "OSError: disk")  # crashed after
    # Forget the tool, as a process that did not import its module would.
    registry.unregister("booked")
    before = {s: sg.entries(s) for s in ("half", "other")}
    with pytest.raises(UnknownToolError):
        sg.resolve_in_doubt("half", 5, happened=False, resolver="ops")  # after START, call, END
    with pytest.raises(UnknownToolError):
        sg.recover("other")
    assert {s: sg.entries(s) for s in ("half", "other")} == before
