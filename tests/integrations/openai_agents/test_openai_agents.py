"""OpenAI Agents SDK with SagacityTools: the real SDK, a scripted ``Model``, no network, no key.

The full loop: the agent reserves stock, calls the wire, the run pauses (an interruption), a
human approves in Sagacity, a *new process* resumes from ``RunState.to_string()``, the wire runs
exactly once. And the issue's ways around the SDK's own approval: the saved state edited (its
checksum recomputed), the same state resumed twice, ``always_approve``, an approval in the state
alone; the SDK's default error handler hiding a failure.
"""

from __future__ import annotations

import asyncio
import json
from itertools import pairwise
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

pytest.importorskip(
    "agents", reason="the openai-agents extra is not installed: pip install '.[openai-agents]'"
)

from agents import Runner, RunState, default_tool_error_function

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.errors import ApprovalRefusedError
from sagacity.testing import tool_entries

from ..conftest import load_app, run_app

HERE = Path(__file__).parent
ALICE = '{"amount":"4200.00","to":"alice"}'


@pytest.fixture
def app(order_tools: ModuleType) -> ModuleType:
    return load_app(HERE, "oa_app")


def resume_in_new_process(url: str, saga_id: str, plan: str, state: Path) -> dict[str, Any]:
    """Resume the paused run in a fresh Python process, from the saved RunState only."""
    return run_app(HERE / "oa_app.py", url, saga_id, plan, str(state))


async def first_run(
    app: ModuleType, sg: Sagacity, saga_id: str, plan: str, state: Path, **options: Any
) -> Any:
    result = await Runner.run(app.agent(sg, plan, saga_id=saga_id, **options), "Order 2 x SKU-9 and pay")
    assert result.interruptions, result.final_output
    state.write_text(result.to_state().to_string())
    return result


async def approve_pending(sg: Sagacity, saga_id: str, approver: str = "alice@example.com") -> int:
    [request] = await sg.pending_approvals_async(saga_id)
    await sg.approve_async(saga_id, request.journal_seq, approver)
    return request.journal_seq


def test_full_loop_resumed_in_a_new_process(app: ModuleType, url: str, effects: Path, tmp_path: Path) -> None:
    """Reserve, the wire pauses, a human approves in Sagacity, a new process resumes: wired once."""
    state = tmp_path / "state.json"

    async def pause() -> None:
        with Sagacity(url) as sg:
            first = await first_run(app, sg, "order-1", "order", state)
            [item] = first.interruptions
            assert (item.tool_name, item.raw_item.call_id) == ("send_wire_transfer", "c2")
            assert await sg.status_async("order-1") is SagaStatus.AWAITING_APPROVAL
            [request] = await sg.pending_approvals_async("order-1")
            # START, the reservation's INTENT and EXECUTED, the END of that turn, the gate.
            assert (request.journal_seq, request.input) == (5, ALICE)

    asyncio.run(pause())
    assert app.order_tools.effects() == ["reserve SKU-9"]
    # Not approved yet: a resume has nothing to do.
    assert resume_in_new_process(url, "order-1", "order", state)["status"] == "PENDING"
    with Sagacity(url) as sg:
        [request] = sg.pending_approvals("order-1")
        sg.approve("order-1", request.journal_seq, "alice@example.com")
    resumed = resume_in_new_process(url, "order-1", "order", state)
    assert resumed == {"output": "done: wired 4200.00 to alice", "status": "COMPLETED"}
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 alice"]
    with Sagacity(url) as sg:
        entries = sg.entries("order-1")
        # Each turn of the SDK is a run of the saga: its END says how the turn left it.
        assert [(e.tool_name, e.phase, e.payload) for e in entries] == [
            ("sagacity:saga", "INTENT", ""),
            ("reserve_inventory", "INTENT", "call_id=c1"),
            ("reserve_inventory", "EXECUTED", "reservation R-SKU-9-2"),
            ("sagacity:saga", "EXECUTED", '{"status":"COMPLETED"}'),
            ("send_wire_transfer", "AWAITING_APPROVAL", f"call_id=c2\ndefinition={wire_definition()}"),
            ("sagacity:saga", "EXECUTED", '{"status":"AWAITING_APPROVAL"}'),
            ("approval-gate", "APPROVED", "approver=alice@example.com"),
            ("send_wire_transfer", "INTENT", "resumes seq=5\ncall_id=c2"),
            ("send_wire_transfer", "EXECUTED", "wired 4200.00 to alice"),
            ("sagacity:saga", "EXECUTED", '{"status":"COMPLETED"}'),
        ]
        assert entries[1].input == '{"sku":"SKU-9","quantity":2}'
        assert sg.status("order-1") is SagaStatus.COMPLETED
        assert sg.verify("order-1").valid


def test_the_same_saved_state_resumed_twice_wires_once(
    app: ModuleType, effects: Path, tmp_path: Path
) -> None:
    """The issue's replay: resuming the same saved state twice paid twice; now the second is a no-op."""
    url = f"sqlite:///{tmp_path}/journal.db"
    state = tmp_path / "state.json"

    async def pause() -> None:
        with Sagacity(url) as sg:
            await first_run(app, sg, "order-2", "order", state)
            await approve_pending(sg, "order-2")

    asyncio.run(pause())
    first = resume_in_new_process(url, "order-2", "order", state)
    second = resume_in_new_process(url, "order-2", "order", state)
    assert first == second == {"output": "done: wired 4200.00 to alice", "status": "COMPLETED"}
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 alice"]
    with Sagacity(url) as sg:
        executed = [e for e in tool_entries(sg, "order-2") if e.phase == Phase.EXECUTED]
        assert [e.tool_name for e in executed] == ["reserve_inventory", "send_wire_transfer"]
        assert sg.verify("order-2").valid


def edit_state(state: Path) -> None:
    """What the issue did: every copy of the arguments changed to mallory, and the SDK's stored
    fingerprint of the call recomputed (an unkeyed SHA-256, anyone can)."""
    from agents._tool_invocation import tool_invocation_identity

    data = json.loads(state.read_text().replace("alice", "mallory"))
    call = next(
        item
        for response in data["model_responses"]
        for item in response["output"]
        if item.get("call_id") == "c2"
    )
    identity = tool_invocation_identity(call)
    assert identity is not None
    record = data["context"]["tool_invocations"]["c2"]
    assert record["fingerprint"] != identity[2]  # the edit changed it ...
    record["fingerprint"] = identity[2]  # ... and the attacker recomputes it
    state.write_text(json.dumps(data))


def test_an_edited_state_is_refused_and_nothing_runs(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """alice is approved; the saved state is edited to mallory, checksum recomputed: refused,
    nothing wired, the saga compensated."""
    url = f"sqlite:///{tmp_path}/journal.db"
    state = tmp_path / "state.json"

    async def pause() -> None:
        with Sagacity(url) as sg:
            await first_run(app, sg, "order-x", "order", state)
            await approve_pending(sg, "order-x")

    asyncio.run(pause())
    edit_state(state)
    assert "alice" not in state.read_text()
    resumed = resume_in_new_process(url, "order-x", "order", state)
    # the SDK raises UserError("Error running tool ...") from Sagacity's refusal
    assert resumed["cause"] == "PayloadMismatchError", resumed
    assert "REJECTED, the saga was compensated, nothing ran" in resumed["error"]
    assert resumed["status"] == "REJECTED"
    assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]
    with Sagacity(url) as sg:
        entries = sg.entries("order-x")
        assert not [e for e in entries if e.phase == Phase.EXECUTED and e.tool_name == "send_wire_transfer"]
        assert not [e for e in entries if e.phase == Phase.INTENT and e.tool_name == "send_wire_transfer"]
        assert sg.verify("order-x").valid


def test_a_failing_tool_compensates_in_reverse(app: ModuleType, effects: Path) -> None:
    """reserve, charge (async), then shipping fails: the SDK's default handler makes its fixed
    error text of it for the model (its words vary by SDK release: asked of the SDK, not written
    here), and the saga still compensates: refund, then release."""
    told = default_tool_error_function(cast(Any, None), RuntimeError("courier API unavailable"))

    async def main() -> None:
        with Sagacity("memory://") as sg:
            result = await Runner.run(app.agent(sg, "failing", saga_id="order-fail"), "go")
            assert result.final_output == f"done: {told}"
            assert await sg.status_async("order-fail") is SagaStatus.COMPENSATED
            entries = await sg.entries_async("order-fail")
            failed = [e for e in entries if e.phase == Phase.FAILED and e.tool_name != "saga"]
            assert [e.tool_name for e in failed] == ["book_shipping"]
            assert "courier API unavailable" in failed[0].payload
            assert (await sg.verify_async("order-fail")).valid

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9", "charge O-1", "refund O-1", "release SKU-9"]


def test_a_failure_inside_the_runs_saga_compensates_when_it_ends(app: ModuleType, effects: Path) -> None:
    """With the saga live around Runner.run, the handled failure compensates when the run ends."""

    async def main() -> None:
        with Sagacity("memory://") as sg:
            async with sg.saga("order-live") as saga:
                await Runner.run(app.agent(sg, "failing"), "go")
            assert saga.result is not None
            assert saga.result.status is SagaStatus.COMPENSATED

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9", "charge O-1", "refund O-1", "release SKU-9"]


@pytest.mark.parametrize("scope", ["run", "call"])
def test_parallel_tool_calls_journal_each_call_once(app: ModuleType, effects: Path, scope: str) -> None:
    """Three calls in one model response run concurrently (sync and async tools), inside the
    run's saga or each entering it for itself; each is journaled once, under its own call id."""

    async def main() -> None:
        with Sagacity("memory://") as sg:
            if scope == "run":
                async with sg.saga("order-p"):
                    result = await Runner.run(app.agent(sg, "parallel"), "go")
            else:
                result = await Runner.run(app.agent(sg, "parallel", saga_id="order-p"), "go")
            assert str(result.final_output).startswith("done")
            entries = await sg.entries_async("order-p")
            entries = [e for e in entries if e.tool_name != "sagacity:saga"]  # the calls only
            intents = [e.payload for e in entries if e.phase == Phase.INTENT]
            assert sorted(intents) == ["call_id=p1", "call_id=p2", "call_id=p3"]
            assert len([e for e in entries if e.phase == Phase.EXECUTED]) == 3
            assert await sg.status_async("order-p") is SagaStatus.COMPLETED

    asyncio.run(main())
    assert sorted(app.order_tools.effects()) == ["charge O-2", "reserve SKU-1", "reserve SKU-2"]


def test_async_tools_resumed_in_the_same_process(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """An async tool and an async IRREVERSIBLE one, paused and resumed from the state string."""

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            agent = app.agent(sg, "async-order", saga_id="order-a")
            first = await Runner.run(agent, "go")
            assert [i.tool_name for i in first.interruptions] == ["send_wire_transfer_async"]
            await approve_pending(sg, "order-a")
            state = await RunState.from_string(agent, first.to_state().to_string())
            decided = await asyncio.to_thread(app.approve_in_state, sg, "order-a", state)
            assert decided is not None
            second = await Runner.run(agent, decided)
            assert second.final_output == "done: wired 4200.00 to alice"
            assert await sg.status_async("order-a") is SagaStatus.COMPLETED

    asyncio.run(main())
    assert app.order_tools.effects() == ["charge O-1", "wire 4200.00 alice"]


def test_an_approval_in_the_state_alone_runs_nothing(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """The application approves in the RunState itself, always_approve too, with nothing approved
    in Sagacity: the wire does not run, the model is told it waits, the gate stays pending."""

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            agent = app.agent(sg, "order", saga_id="order-f")
            first = await Runner.run(agent, "go")
            state = first.to_state()
            [item] = state.get_interruptions()
            state.approve(item, always_approve=True)
            second = await Runner.run(agent, state)
            assert str(second.final_output).startswith("done: [AWAITING_APPROVAL]")
            assert len(await sg.pending_approvals_async("order-f")) == 1
            assert await sg.status_async("order-f") is SagaStatus.AWAITING_APPROVAL

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9"]


def test_always_approve_is_not_honoured_for_a_gated_tool(
    app: ModuleType, effects: Path, tmp_path: Path
) -> None:
    """w1 approved in Sagacity, approved in the state with always_approve=True: w1 runs; the next
    wire (w2) is gated in Sagacity all the same and does not run."""

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            agent = app.agent(sg, "two-wires", saga_id="order-w")
            first = await Runner.run(agent, "go")
            await approve_pending(sg, "order-w")
            state = first.to_state()
            [item] = state.get_interruptions()
            state.approve(item, always_approve=True)
            second = await Runner.run(agent, state)
            # w2 is never offered to the SDK's approval: the always_approve skips it, so Sagacity
            # gates it in the tool and tells the model
            assert "[AWAITING_APPROVAL]" in str(second.final_output)
            [pending] = await sg.pending_approvals_async("order-w")
            assert pending.input == '{"amount":"99.00","to":"bob"}'

    asyncio.run(main())
    assert app.order_tools.effects() == ["wire 4200.00 alice"]


def test_rejection_compensates_by_default(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            first = await first_run(app, sg, "order-r", "order", tmp_path / "s.json")
            [request] = await sg.pending_approvals_async("order-r")
            await sg.reject_async("order-r", request.journal_seq, "bob@example.com", "unknown supplier")
            with pytest.raises(ApprovalRefusedError, match="compensated"):
                await asyncio.to_thread(app.approve_in_state, sg, "order-r", first.to_state())

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]


def test_rejection_can_tell_the_model_and_go_on(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """on_reject="continue": the model is told who rejected and why; nothing is compensated."""

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            agent = app.agent(sg, "order", saga_id="order-c", on_reject="continue")
            first = await Runner.run(agent, "go")
            [request] = await sg.pending_approvals_async("order-c")
            await sg.reject_async("order-c", request.journal_seq, "bob@example.com", "unknown supplier")
            decided = await asyncio.to_thread(app.approve_in_state, sg, "order-c", first.to_state())
            assert decided is not None
            second = await Runner.run(agent, decided)
            assert "bob@example.com rejected it (unknown supplier)" in str(second.final_output)
            assert await sg.status_async("order-c") is SagaStatus.COMPLETED

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9"]


def test_function_tools_are_wrapped_and_others_left_alone(app: ModuleType, effects: Path) -> None:
    """A FunctionTool made of a Sagacity tool (renamed too) is journaled; a plain one is untouched."""
    from agents import function_tool

    from sagacity.integrations.openai_agents import SagacityTools

    @function_tool
    def lookup(sku: str) -> str:
        """Not a Sagacity tool."""
        return sku

    with Sagacity("memory://") as sg:
        reserve = function_tool(app.order_tools.reserve_inventory)
        wire = function_tool(app.order_tools.send_wire_transfer, name_override="pay_supplier")
        wrapped_reserve, wrapped_wire, plain = SagacityTools(sg, saga_id="s").wrap([reserve, wire, lookup])
        assert plain is lookup
        assert wrapped_reserve is not reserve
        assert wrapped_reserve.needs_approval is False
        assert wrapped_wire.name == "pay_supplier"
        assert callable(wrapped_wire.needs_approval)
        assert reserve.on_invoke_tool is not wrapped_reserve.on_invoke_tool  # the original is unchanged


def test_a_resume_before_approval_pauses_again(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """The saved state resumed with nothing decided pauses on the same call, nothing runs; once
    approved in Sagacity and decided by approve_in_state, the wire runs once."""

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            agent = app.agent(sg, "order", saga_id="order-j")
            saved = (await Runner.run(agent, "go")).to_state().to_string()
            again = await Runner.run(agent, await RunState.from_string(agent, saved))
            assert [i.raw_item.call_id for i in again.interruptions] == ["c2"]
            assert await asyncio.to_thread(app.approve_in_state, sg, "order-j", again.to_state()) is None
            assert len(await sg.pending_approvals_async("order-j")) == 1
            await approve_pending(sg, "order-j")
            state = await RunState.from_string(agent, saved)
            decided = await asyncio.to_thread(app.approve_in_state, sg, "order-j", state)
            assert decided is not None
            done = await Runner.run(agent, decided)
            assert done.final_output == "done: wired 4200.00 to alice"
            assert await sg.status_async("order-j") is SagaStatus.COMPLETED

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 alice"]


def wire_definition() -> str:
    """The hash of send_wire_transfer's definition, which its gates journal (docs/journal.md)."""
    from sagacity.tools import registry

    return registry.get("send_wire_transfer").definition_hash


def test_parallel_calls_with_gates_end_the_saga_as_the_journal_stands(
    app: ModuleType, effects: Path, durable_url: str
) -> None:
    """A reserve and two gated wires in one model response, each call entering the saga for
    itself: every END says what the journal says when it lands (never COMPLETED while a gate
    waits), and no END follows another with nothing between them. The reserve's run may end
    before the wires are presented (seen on MariaDB): its END COMPLETED is then true of the
    journal it lands on, and the gates that follow get an END AWAITING_APPROVAL of their own."""

    async def main(saga_id: str) -> None:
        with Sagacity(durable_url) as sg:
            result = await Runner.run(app.agent(sg, "parallel-gated", saga_id=saga_id), "go")
            assert len(result.interruptions) == 2
            entries = await sg.entries_async(saga_id)
            assert await sg.status_async(saga_id) is SagaStatus.AWAITING_APPROVAL
        ends = [e for e in entries if e.tool_name == "sagacity:saga" and e.phase == Phase.EXECUTED]
        shown = [(e.seq, e.tool_name, str(e.phase), e.payload[:60]) for e in entries]
        for end in ends:  # no decision is taken here: a gate journaled before an END still waits
            gated = [e for e in entries if e.seq < end.seq and e.phase == Phase.AWAITING_APPROVAL]
            wanted = "AWAITING_APPROVAL" if gated else "COMPLETED"
            assert end.payload == f'{{"status":"{wanted}"}}', shown
        assert ends[-1].payload == '{"status":"AWAITING_APPROVAL"}'
        for before, end in pairwise(entries):
            if end in ends:
                assert before not in ends, f"two ENDs in a row at seq {end.seq}"

    for attempt in range(6):  # the interleavings differ from run to run
        asyncio.run(main(f"parallel-gated-{attempt}"))
