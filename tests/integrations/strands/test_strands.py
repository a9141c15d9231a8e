"""AWS Strands Agents with SagacityStrandsHooks: the real SDK, a scripted ``Model``, Strands' own
``FileSessionManager``, no network, no key.

The full loop: the agent reserves stock, calls the wire, a ``BeforeToolCallEvent`` interrupt pauses
it, an interrupt response alone approves nothing, a human approves in Sagacity, a *new process*
restores the session and resumes: the wire runs exactly once. And the ways around Strands' own
approval: the saved session edited, the same session resumed twice, an edit in the response.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# They run in their own venv (scripts/test-apart strands, SAGACITY_REQUIRE_STRANDS=1): never skipped
# there, a missing strands-agents fails the import below. `strands.agent`, not `strands`: with
# tests/integrations on sys.path, this folder alone would pass for a (namespace) package `strands`.
if os.environ.get("SAGACITY_REQUIRE_STRANDS") != "1":
    pytest.importorskip("strands.agent", reason="no strands extra: bash scripts/test-apart strands")

from strands.interrupt import Interrupt
from strands.types.exceptions import EventLoopException

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.errors import ApprovalRefusedError, SagaClosedError
from sagacity.testing import tool_entries

from ..conftest import load_app, run_app

HERE = Path(__file__).parent
ALICE = '{"amount":"4200.00","to":"alice"}'
WIRED = "wire 4200.00 alice"


@pytest.fixture
def app(order_tools: ModuleType) -> ModuleType:
    return load_app(HERE, "st_app")


def first_run(app: ModuleType, url: str, sessions: Path, saga_id: str, **options: Any) -> Any:
    """Run the agent until Sagacity's interrupt pauses it; keep the interrupts beside its session."""
    with Sagacity(url) as sg:
        result = app.agent(sg, "order", str(sessions), saga_id, **options)("Order 2 x SKU-9 and pay")
        paused = app.summary(sg, saga_id, result)
    assert paused["stop"] == "interrupt", paused
    (sessions / "pending.json").write_text(json.dumps(paused["interrupts"]))
    return paused


def resume_in_new_process(url: str, sessions: Path, saga_id: str) -> Any:
    """Restore the agent from its session in a fresh Python process and resume it."""
    return run_app(HERE / "st_app.py", url, str(sessions), saga_id, "order")


def approve(url: str, saga_id: str, approver: str = "alice@example.com") -> str:
    with Sagacity(url) as sg:
        [request] = sg.pending_approvals(saga_id)
        sg.approve(saga_id, request.journal_seq, approver)
        return request.input


def test_full_loop_resumed_in_a_new_process(app: ModuleType, url: str, effects: Path, tmp_path: Path) -> None:
    """Pause, a response in Strands alone (nothing runs, it pauses again), approval in Sagacity,
    resumed in a new process: wired once; the same saved session resumed again wires nothing."""
    sessions = tmp_path / "sessions"
    paused = first_run(app, url, sessions, "order-1")
    [interrupt] = paused["interrupts"]
    meta = interrupt["reason"]["sagacity"]
    with Sagacity(url) as sg:
        [request] = sg.pending_approvals("order-1")
        assert sg.status("order-1") is SagaStatus.AWAITING_APPROVAL
    assert (meta["saga_id"], meta["seq"], meta["input_hash"], meta["call_id"], meta["tool"]) == (
        "order-1",
        request.journal_seq,
        request.input_hash,
        "c2",
        "send_wire_transfer",
    )
    assert request.input == ALICE
    assert app.order_tools.effects() == ["reserve SKU-9"]
    # Approved in Strands only, with whatever the application says: nothing runs, a new pause.
    framework_only = app.resume(url, str(sessions), "order-1", "order", {"approved": True, "by": "mallory"})
    assert framework_only["stop"] == "interrupt", framework_only
    assert [i["name"] for i in framework_only["interrupts"]] == ["sagacity-approval:2"]
    assert framework_only["status"] == "AWAITING_APPROVAL"
    assert app.order_tools.effects() == ["reserve SKU-9"]
    approve(url, "order-1")
    saved = tmp_path / "saved"
    shutil.copytree(sessions, saved)  # the session as it was before the approved resume
    done = resume_in_new_process(url, sessions, "order-1")
    assert (done["output"], done["status"]) == ("done: wired 4200.00 to alice", "COMPLETED")
    assert done["stop"] == "end_turn"
    again = app.resume(url, str(saved), "order-1", "order")  # the same saved session, resumed twice
    assert (again["output"], again["status"]) == ("done: wired 4200.00 to alice", "COMPLETED")
    assert app.order_tools.effects() == ["reserve SKU-9", WIRED]
    with Sagacity(url) as sg:
        calls = [(e.tool_name, e.phase, e.payload) for e in tool_entries(sg, "order-1")]
        assert calls == [
            ("reserve_inventory", "INTENT", "call_id=c1"),
            ("reserve_inventory", "EXECUTED", "reservation R-SKU-9-2"),
            ("send_wire_transfer", "AWAITING_APPROVAL", f"call_id=c2\ndefinition={wire_definition()}"),
            ("approval-gate", "APPROVED", "approver=alice@example.com"),
            ("send_wire_transfer", "INTENT", f"resumes seq={request.journal_seq}\ncall_id=c2"),
            ("send_wire_transfer", "EXECUTED", "wired 4200.00 to alice"),
        ]
        assert sg.status("order-1") is SagaStatus.COMPLETED
        assert sg.verify("order-1").valid


def wire_definition() -> str:
    """The hash of send_wire_transfer's definition, which its gates journal (docs/journal.md)."""
    from sagacity.tools import registry

    return registry.get("send_wire_transfer").definition_hash


def test_a_session_edited_after_approval_is_refused(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """alice approved; every copy of the arguments in the saved session edited to mallory: refused
    in the new process, nothing wired, REJECTED journaled, the saga compensated."""
    url = f"sqlite:///{tmp_path}/journal.db"
    sessions = tmp_path / "sessions"
    first_run(app, url, sessions, "order-x")
    approve(url, "order-x")
    edited = 0
    for path in sessions.rglob("*.json"):
        text = path.read_text()
        if "alice" in text:
            path.write_text(text.replace("alice", "mallory"))
            edited += 1
    assert edited >= 2  # the conversation and the agent's pending tool execution
    resumed = resume_in_new_process(url, sessions, "order-x")
    assert resumed["cause"] == "PayloadMismatchError", resumed  # raised by Strands as EventLoopException
    assert "REJECTED, the saga was compensated, nothing ran" in resumed["error"]
    assert resumed["status"] == "REJECTED"
    assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]
    with Sagacity(url) as sg:
        entries = sg.entries("order-x")
        wires = [e.phase for e in entries if e.tool_name == "send_wire_transfer"]
        assert wires == [Phase.AWAITING_APPROVAL]  # no INTENT, no EXECUTED
        [rejected] = [e for e in entries if e.phase == Phase.REJECTED]
        assert "differs from the approved" in rejected.payload
        assert sg.verify("order-x").valid


def test_an_edit_response_needs_a_new_approval(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """alice approved, then the response edits the wire to bob: gated anew, nothing runs until
    bob's wire is approved in Sagacity too; then bob is wired, never alice."""
    url = f"sqlite:///{tmp_path}/journal.db"
    sessions = tmp_path / "sessions"
    first_run(app, url, sessions, "order-e")
    approve(url, "order-e")
    edit = {"type": "edit", "args": {"amount": "4200.00", "to": "bob"}}
    paused = app.resume(url, str(sessions), "order-e", "order", edit)  # a new agent, from the session
    assert paused["stop"] == "interrupt", paused
    [interrupt] = paused["interrupts"]
    assert interrupt["reason"]["sagacity"]["args"] == edit["args"]
    assert app.order_tools.effects() == ["reserve SKU-9"]
    assert approve(url, "order-e", "carol@example.com") == '{"amount":"4200.00","to":"bob"}'
    done = app.resume(url, str(sessions), "order-e", "order")
    assert (done["output"], done["status"]) == ("done: wired 4200.00 to bob", "COMPLETED")
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 bob"]


def test_rejection_compensates_by_default(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """Rejected in Sagacity: the reservation is released; no response can be built, and the agent
    resumed anyway ends with ApprovalRefusedError, nothing wired."""
    sessions = tmp_path / "sessions"
    with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
        agent = app.agent(sg, "order", str(sessions), "order-r")
        result = agent("go")
        [request] = sg.pending_approvals("order-r")
        sg.reject("order-r", request.journal_seq, "bob@example.com", "unknown supplier")
        assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]
        with pytest.raises(ApprovalRefusedError, match="compensated"):
            app.interrupt_responses(sg, "order-r", result.interrupts)
        [interrupt] = result.interrupts
        with pytest.raises(EventLoopException) as ended:
            agent([{"interruptResponse": {"interruptId": interrupt.id, "response": "approve"}}])
        assert isinstance(ended.value.original_exception, ApprovalRefusedError)
    assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]


def test_rejection_can_tell_the_model(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """on_reject="continue": the call is cancelled with who rejected it and why; nothing compensated."""
    with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
        agent = app.agent(sg, "order", None, "order-c", saga_id="order-c", on_reject="continue")
        result = agent("go")
        [request] = sg.pending_approvals("order-c")
        sg.reject("order-c", request.journal_seq, "bob@example.com", "unknown supplier")
        responses = app.interrupt_responses(sg, "order-c", result.interrupts)
        assert responses is not None
        assert responses[0]["interruptResponse"]["response"]["sagacity"]["rejected_by"] == "bob@example.com"
        done = agent(responses)
        assert "bob@example.com rejected it (unknown supplier)" in str(done)
        assert sg.status("order-c") is SagaStatus.COMPLETED
    assert app.order_tools.effects() == ["reserve SKU-9"]


def test_a_failing_tool_compensates_in_reverse(app: ModuleType, effects: Path) -> None:
    """reserve, charge (async), then shipping fails: Strands makes an error result of it for the
    model, and the saga compensates all the same: refund, then release."""
    with Sagacity("memory://") as sg:
        result = app.agent(sg, "failing", None, "order-f", saga_id="order-f")("go")
        assert "courier API unavailable" in str(result)
        assert sg.status("order-f") is SagaStatus.COMPENSATED
        failed = [e for e in tool_entries(sg, "order-f") if e.phase == Phase.FAILED and e.tool_name != "saga"]
        assert [e.tool_name for e in failed] == ["book_shipping"]
        assert "courier API unavailable" in failed[0].payload
        assert sg.verify("order-f").valid
    assert app.order_tools.effects() == ["reserve SKU-9", "charge O-1", "refund O-1", "release SKU-9"]


def test_a_call_after_the_saga_compensated_ends_the_agent(app: ModuleType, effects: Path) -> None:
    """Shipping fails, the saga compensates at once; the model then calls reserve: refused by
    Sagacity, and the refusal ends the agent call instead of becoming text for the model."""
    with Sagacity("memory://") as sg:
        agent = app.agent(sg, "after-failure", None, "order-z", saga_id="order-z")
        with pytest.raises(EventLoopException) as ended:
            agent("go")
        assert isinstance(ended.value.original_exception, SagaClosedError)
        assert sg.status("order-z") is SagaStatus.COMPENSATED
        intents = [e.tool_name for e in tool_entries(sg, "order-z") if e.phase == Phase.INTENT]
        assert intents == ["book_shipping"]
    assert app.order_tools.effects() == []


def test_two_gated_calls_in_one_response(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """Two wires in one model response: two interrupts; only the one approved in Sagacity runs,
    the other pauses again; approved too, it runs; each once."""
    with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
        agent = app.agent(sg, "two-wires", None, "order-2", saga_id="order-2")
        first = agent("go")
        assert sorted(i.reason["sagacity"]["call_id"] for i in first.interrupts) == ["w1", "w2"]
        w1 = next(r for r in sg.pending_approvals("order-2") if "alice" in r.input)
        sg.approve("order-2", w1.journal_seq, "alice@example.com")
        answers = [{"interruptResponse": {"interruptId": i.id, "response": "go"}} for i in first.interrupts]
        second = agent(answers)
        assert [i.reason["sagacity"]["call_id"] for i in second.interrupts] == ["w2"]
        assert app.order_tools.effects() == [WIRED]
        [w2] = sg.pending_approvals("order-2")
        sg.approve("order-2", w2.journal_seq, "carol@example.com")
        responses = app.interrupt_responses(sg, "order-2", second.interrupts)
        assert responses is not None
        done = agent(responses)
        assert str(done).startswith("done")
        assert sg.status("order-2") is SagaStatus.COMPLETED
    assert sorted(app.order_tools.effects()) == ["wire 4200.00 alice", "wire 99.00 bob"]


def test_a_hook_retry_replays_the_journaled_result(app: ModuleType, effects: Path) -> None:
    """A hook of the application asks Strands to run the reservation again (``retry``): the same
    toolUseId gets its journaled result, the tool does not run twice."""
    from strands.hooks import AfterToolCallEvent

    retried: list[str] = []

    def retry_once(event: AfterToolCallEvent) -> None:
        if event.tool_use["name"] == "reserve_inventory" and not retried:
            retried.append(event.tool_use["toolUseId"])
            event.retry = True

    with Sagacity("memory://") as sg:
        agent = app.agent(sg, "order", None, "order-t", saga_id="order-t")
        agent.hooks.add_callback(AfterToolCallEvent, retry_once)
        result = agent("go")
        assert result.stop_reason == "interrupt"  # on to the wire, which waits
        assert retried == ["c1"]
        intents = [e.payload for e in tool_entries(sg, "order-t") if e.phase == Phase.INTENT]
        assert intents == ["call_id=c1"]
    assert app.order_tools.effects() == ["reserve SKU-9"]


def test_parallel_calls_journal_each_once(app: ModuleType, effects: Path) -> None:
    """Three calls in one model response, run concurrently by Strands: each journaled once."""
    with Sagacity("memory://") as sg:
        result = app.agent(sg, "parallel", None, "order-p", saga_id="order-p")("go")
        assert str(result).startswith("done")
        entries = tool_entries(sg, "order-p")
        assert sorted(e.payload for e in entries if e.phase == Phase.INTENT) == [
            "call_id=p1",
            "call_id=p2",
            "call_id=p3",
        ]
        assert len([e for e in entries if e.phase == Phase.EXECUTED]) == 3
        assert sg.status("order-p") is SagaStatus.COMPLETED
    assert sorted(app.order_tools.effects()) == ["charge O-2", "reserve SKU-1", "reserve SKU-2"]


def test_async_tools_inside_a_live_saga(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """An async tool and an async IRREVERSIBLE one, the agent called inside ``sg.saga``: the saga
    ends AWAITING_APPROVAL; approved, the agent resumed in the same process wires once."""

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            agent = app.agent(sg, "async-order", None, "unused")
            async with sg.saga("order-a") as saga:
                first = await agent.invoke_async("go")
            assert saga.result is not None
            assert saga.result.status is SagaStatus.AWAITING_APPROVAL
            assert [i.name for i in first.interrupts] == ["sagacity-approval:1"]
            [request] = await sg.pending_approvals_async("order-a")
            await sg.approve_async("order-a", request.journal_seq, "alice@example.com")
            responses = await asyncio.to_thread(app.interrupt_responses, sg, "order-a", first.interrupts)
            assert responses is not None
            async with sg.saga("order-a", continue_existing=True):
                done = await agent.invoke_async(responses)
            assert str(done).strip() == "done: wired 4200.00 to alice"
            assert await sg.status_async("order-a") is SagaStatus.COMPLETED

    asyncio.run(main())
    assert app.order_tools.effects() == ["charge O-1", WIRED]


def test_responses_wait_for_sagacity(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """``interrupt_responses`` builds nothing while the gate waits, and leaves interrupts that are
    not Sagacity's to the application."""
    with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
        result = app.agent(sg, "order", None, "order-w", saga_id="order-w")("go")
        foreign = Interrupt(id="other", name="ask-the-user", reason={"question": "sure?"})
        assert app.interrupt_responses(sg, "order-w", [*result.interrupts, foreign]) is None
        approve(f"sqlite:///{tmp_path}/j.db", "order-w")
        responses = app.interrupt_responses(sg, "order-w", [*result.interrupts, foreign])
        assert responses is not None
        [response] = responses
        assert response["interruptResponse"]["interruptId"] == result.interrupts[0].id
        decided = response["interruptResponse"]["response"]["sagacity"]
        assert (decided["status"], decided["approvers"]) == ("APPROVED", ["alice@example.com"])


def test_wrap_makes_strands_tools_and_leaves_others(app: ModuleType) -> None:
    """A Sagacity ``@tool`` becomes a Strands tool; a Strands tool and a non-Sagacity one are kept."""
    from strands import tool as strands_tool
    from strands.types.tools import AgentTool

    from sagacity.integrations.strands import SagacityStrandsHooks

    @strands_tool
    def lookup(sku: str) -> str:
        """Not a Sagacity tool."""
        return sku

    reserve, plain = SagacityStrandsHooks.wrap([app.order_tools.reserve_inventory, lookup])
    assert isinstance(reserve, AgentTool)
    assert reserve.tool_name == "reserve_inventory"
    assert plain is lookup
