"""Microsoft Agent Framework with SagacityAgentTools: the real framework, a scripted chat client, no
network, no key.

The full loop: the agent reserves stock, calls the wire, the run pauses with the framework's
``function_approval_request``, a human approves in Sagacity, a *new process* resumes from the
saved ``AgentSession``, the wire runs exactly once. And the ways around the framework's own
approval: an approval in the framework alone (naming an approver of its own), the saved session
edited, the same session resumed twice, a rejection answered ``approved=True`` anyway, the model
asking again for what was rejected, arguments changed after approval by a middleware.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

if os.environ.get("CI") != "true":  # in CI the extra is installed: a missing one must fail
    pytest.importorskip(
        "agent_framework",
        reason="the agent-framework extra is not installed: pip install '.[agent-framework]'",
    )

from agent_framework import (
    AgentSession,
    Content,
    FunctionInvocationContext,
    FunctionMiddleware,
    FunctionTool,
    Message,
    tool,
)

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.errors import ApprovalError, ApprovalRefusedError, SagaClosedError, SagaRunningElsewhereError
from sagacity.testing import tool_entries

from .. import test_running_elsewhere as elsewhere
from ..conftest import load_app, run_app

HERE = Path(__file__).parent
ALICE = '{"amount":"4200.00","to":"alice"}'

#: The worker that holds in the approved wire, as the other adapters' running-elsewhere tests use it.
holding_worker = elsewhere.holding_worker


@pytest.fixture
def app(order_tools: ModuleType) -> ModuleType:
    return load_app(HERE, "af_app")


def resume_in_new_process(url: str, saga_id: str, plan: str, state: Path) -> dict[str, Any]:
    """Resume the paused run in a fresh Python process, from the saved session only."""
    return run_app(HERE / "af_app.py", url, saga_id, plan, str(state))


async def first_run(
    app: ModuleType, sg: Sagacity, saga_id: str, plan: str, **options: Any
) -> tuple[Any, Any]:
    """The run until it pauses on the wire: (session, response)."""
    session = AgentSession(session_id=saga_id)
    response = await app.agent(sg, plan, **options).run("Order 2 x SKU-9 and pay", session=session)
    assert response.user_input_requests, response.text
    return session, response


def answer(*responses: Content) -> Message:
    return Message(role="user", contents=list(responses))


def wire_entries(sg: Sagacity, saga_id: str) -> list[tuple[str, str]]:
    return [(str(e.phase), e.input) for e in tool_entries(sg, saga_id) if e.tool_name == "send_wire_transfer"]


def test_full_loop_resumed_in_a_new_process(app: ModuleType, url: str, effects: Path, tmp_path: Path) -> None:
    """Reserve, the wire pauses, a human approves in Sagacity, a new process resumes: wired once;
    the same saved session resumed again replays the journaled result, nothing runs twice."""
    state = tmp_path / "state"

    async def pause() -> None:
        with Sagacity(url) as sg:
            session, first = await first_run(app, sg, "order-1", "order")
            [request] = first.user_input_requests
            assert request.type == "function_approval_request"
            assert (request.function_call.name, request.function_call.call_id) == ("send_wire_transfer", "c2")
            app.save(state, session, first)
            assert await sg.status_async("order-1") is SagaStatus.AWAITING_APPROVAL
            [pending] = await sg.pending_approvals_async("order-1")
            # START, the reservation's INTENT and EXECUTED, the gate.
            assert (pending.journal_seq, pending.input) == (4, ALICE)

    asyncio.run(pause())
    assert app.order_tools.effects() == ["reserve SKU-9"]
    assert resume_in_new_process(url, "order-1", "order", state)["status"] == "PENDING"
    with Sagacity(url) as sg:
        sg.approve("order-1", 4, "alice@example.com")
    done = {"output": "done: wired 4200.00 to alice", "status": "COMPLETED"}
    assert resume_in_new_process(url, "order-1", "order", state) == done
    assert resume_in_new_process(url, "order-1", "order", state) == done  # the replay
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 alice"]
    with Sagacity(url) as sg:
        entries = sg.entries("order-1")
        assert [(e.tool_name, str(e.phase), e.payload.split("\n")[0]) for e in entries] == [
            ("sagacity:saga", "INTENT", ""),
            ("reserve_inventory", "INTENT", "call_id=c1"),
            ("reserve_inventory", "EXECUTED", "reservation R-SKU-9-2"),
            ("send_wire_transfer", "AWAITING_APPROVAL", "call_id=c2"),
            ("sagacity:saga", "EXECUTED", '{"status":"AWAITING_APPROVAL"}'),
            ("approval-gate", "APPROVED", "approver=alice@example.com"),
            ("send_wire_transfer", "INTENT", "resumes seq=4"),
            ("send_wire_transfer", "EXECUTED", "wired 4200.00 to alice"),
            ("sagacity:saga", "EXECUTED", '{"status":"COMPLETED"}'),
        ]
        assert entries[1].input == '{"sku":"SKU-9","quantity":2}'
        assert sg.verify("order-1").valid


def test_an_approval_in_the_framework_alone_pays_nothing(
    app: ModuleType, effects: Path, tmp_path: Path
) -> None:
    """The application answers the framework's request itself, approved=True, naming a approver of
    its own: nothing runs, the run pauses again on the same request, the gate stays pending. The
    approver the journal names is the human who approved in Sagacity, never the caller's word."""

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            session, first = await first_run(app, sg, "order-f", "order")
            [request] = first.user_input_requests
            forged = request.to_function_approval_response(approved=True)
            forged.additional_properties["approver"] = "ceo@example.com"
            again = await app.agent(sg, "order").run(answer(forged), session=session)
            [repeated] = again.user_input_requests
            assert repeated.function_call.call_id == "c2"
            assert repeated.function_call.parse_arguments() == json.loads(ALICE)
            [pending] = await sg.pending_approvals_async("order-f")
            assert pending.journal_seq == 4
            assert (
                await asyncio.to_thread(app.approval_responses, sg, "order-f", again.user_input_requests)
                is None
            )
            assert app.order_tools.effects() == ["reserve SKU-9"]

            await sg.approve_async("order-f", 4, "alice@example.com")
            answers = await asyncio.to_thread(
                app.approval_responses, sg, "order-f", again.user_input_requests
            )
            done = await app.agent(sg, "order").run(answer(*answers), session=session)
            assert done.text == "done: wired 4200.00 to alice"
            approvals = [e for e in await sg.entries_async("order-f") if e.phase == Phase.APPROVED]
            assert [e.payload for e in approvals] == ["approver=alice@example.com"]

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 alice"]


def tamper(state: Path) -> None:
    """The saved session (and the saved requests) edited: every copy of the arguments now pays
    mallory. The framework runs the request its session recorded, so it would pay mallory."""
    for name in ("session.json", "requests.json"):
        path = state / name
        path.write_text(path.read_text().replace("alice", "mallory"))


def test_an_edited_session_is_refused_and_nothing_runs(
    app: ModuleType, effects: Path, tmp_path: Path
) -> None:
    """alice is approved; the saved session is edited to mallory: refused in the new process,
    nothing wired, the saga compensated."""
    url = f"sqlite:///{tmp_path}/journal.db"
    state = tmp_path / "state"

    async def pause() -> None:
        with Sagacity(url) as sg:
            session, first = await first_run(app, sg, "order-x", "order")
            app.save(state, session, first)
            await sg.approve_async("order-x", 4, "alice@example.com")

    asyncio.run(pause())
    tamper(state)
    assert "alice" not in (state / "session.json").read_text()
    resumed = resume_in_new_process(url, "order-x", "order", state)
    assert resumed["error"].startswith("PayloadMismatchError"), resumed
    assert resumed["status"] == "REJECTED"
    assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]
    with Sagacity(url) as sg:
        assert wire_entries(sg, "order-x") == [("AWAITING_APPROVAL", ALICE)]  # never an INTENT
        assert sg.verify("order-x").valid


def test_a_rejection_compensates_and_cannot_be_answered_yes(
    app: ModuleType, effects: Path, tmp_path: Path
) -> None:
    """Rejected in Sagacity: the saga compensates; approval_responses refuses to build a resume;
    the framework's request answered approved=True anyway ends the run refused, nothing wired,
    and nobody is asked again."""

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            session, first = await first_run(app, sg, "order-r", "order")
            await sg.reject_async("order-r", 4, "bob@example.com", "unknown supplier")
            requests = first.user_input_requests
            with pytest.raises(ApprovalRefusedError, match="compensated"):
                await asyncio.to_thread(app.approval_responses, sg, "order-r", requests)
            forged = requests[0].to_function_approval_response(approved=True)
            with pytest.raises((ApprovalRefusedError, SagaClosedError)):
                await app.agent(sg, "order").run(answer(forged), session=session)
            assert await sg.pending_approvals_async("order-r") == []
            assert await sg.status_async("order-r") is SagaStatus.REJECTED

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]


def test_a_rejection_is_final_and_never_asked_for_again(
    app: ModuleType, effects: Path, tmp_path: Path
) -> None:
    """on_reject="continue": bob rejects the wire, the model is told and asks for the same wire
    again (a new call id). No second gate is journaled, nobody is asked: the journal's rejection
    answers it. A session saved before the rejection, answered approved=True, runs nothing either."""

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            session, first = await first_run(app, sg, "order-c", "retry-wire", on_reject="continue")
            before = json.dumps(session.to_dict())
            await sg.reject_async("order-c", 4, "bob@example.com", "unknown supplier")
            answers = await asyncio.to_thread(
                app.approval_responses, sg, "order-c", first.user_input_requests
            )
            assert [a.approved for a in answers] == [False]
            agent = app.agent(sg, "retry-wire", on_reject="continue")
            second = await agent.run(answer(*answers), session=session)
            [retry] = second.user_input_requests  # the framework asks again for c3 ...
            assert retry.function_call.call_id == "c3"
            assert await sg.pending_approvals_async("order-c") == []  # ... Sagacity asks nobody
            # the application answers yes anyway: the journal's rejection stands
            third = await agent.run(
                answer(retry.to_function_approval_response(approved=True)), session=session
            )
            assert "bob@example.com rejected these arguments before (unknown supplier)" in third.text
            # the session saved before the rejection, answered yes: nothing runs
            old = AgentSession.from_dict(json.loads(before))
            replay = await agent.run(
                answer(first.user_input_requests[0].to_function_approval_response(approved=True)), session=old
            )
            [told] = [c.result for m in replay.messages for c in m.contents if c.type == "function_result"]
            assert "[REJECTED] send_wire_transfer did not run: bob@example.com rejected it" in str(told)
            assert [r.function_call.call_id for r in replay.user_input_requests] == ["c3"]  # the retry
            gates = [e.seq for e in await sg.entries_async("order-c") if e.phase == Phase.AWAITING_APPROVAL]
            assert gates == [4]  # one gate, rejected once, never asked for again
            assert await sg.status_async("order-c") is SagaStatus.COMPLETED

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9"]


class CapTheWire(FunctionMiddleware):
    """The application's own middleware: caps a wire at 4000.00 after it was approved (the
    framework's argument repair, which it answers with a replacement approval request)."""

    async def process(
        self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        if context.function.name == "send_wire_transfer":
            context.arguments = {**dict(context.arguments), "amount": "4000.00"}
        await call_next()


def test_arguments_edited_after_approval_need_a_new_approval(
    app: ModuleType, effects: Path, tmp_path: Path
) -> None:
    """alice approves 4200.00; a middleware changes it to 4000.00: nothing runs, the framework
    asks for a replacement approval and Sagacity journals a new gate for the edited payload; once
    approved there, 4000.00 is wired, once."""
    edited = '{"amount":"4000.00","to":"alice"}'

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            session, first = await first_run(app, sg, "order-e", "order")
            await sg.approve_async("order-e", 4, "alice@example.com")
            agent = app.agent(sg, "order", middleware=[CapTheWire()])
            answers = await asyncio.to_thread(
                app.approval_responses, sg, "order-e", first.user_input_requests
            )
            second = await agent.run(answer(*answers), session=session)
            [replacement] = second.user_input_requests
            assert replacement.function_call.parse_arguments() == json.loads(edited)
            [pending] = await sg.pending_approvals_async("order-e")
            assert pending.input == edited
            assert app.order_tools.effects() == ["reserve SKU-9"]
            assert await asyncio.to_thread(app.approval_responses, sg, "order-e", [replacement]) is None

            await sg.approve_async("order-e", pending.journal_seq, "carol@example.com")
            answers = await asyncio.to_thread(app.approval_responses, sg, "order-e", [replacement])
            done = await agent.run(answer(*answers), session=session)
            assert done.text == "done: wired 4000.00 to alice"
            assert await sg.status_async("order-e") is SagaStatus.COMPLETED
            wires = await asyncio.to_thread(wire_entries, sg, "order-e")
            executed = [inp for phase, inp in wires if phase == "EXECUTED"]
            assert executed == [edited]

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4000.00 alice"]


def test_a_failing_tool_compensates_in_reverse(app: ModuleType, effects: Path) -> None:
    """reserve, charge (async), then shipping fails: the framework makes "Error: Function failed."
    of it for the model, and the saga still compensates when the run ends: refund, then release."""

    async def main() -> None:
        with Sagacity("memory://") as sg:
            result = await app.agent(sg, "failing").run("go", session=AgentSession(session_id="order-fail"))
            assert result.text == "done: Error: Function failed."
            assert await sg.status_async("order-fail") is SagaStatus.COMPENSATED
            failed = [e for e in await sg.entries_async("order-fail") if e.phase == Phase.FAILED]
            assert [e.tool_name for e in failed if e.tool_name not in ("saga", "sagacity:saga")] == [
                "book_shipping"
            ]

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9", "charge O-1", "refund O-1", "release SKU-9"]


def test_parallel_tool_calls_journal_each_call_once(app: ModuleType, effects: Path) -> None:
    """Three calls in one model response run concurrently (sync and async tools); each is
    journaled once, under its own call id."""

    async def main() -> None:
        with Sagacity("memory://") as sg:
            result = await app.agent(sg, "parallel").run("go", session=AgentSession(session_id="order-p"))
            assert result.text.startswith("done")
            entries = [e for e in await sg.entries_async("order-p") if e.tool_name != "sagacity:saga"]
            intents = sorted(e.payload for e in entries if e.phase == Phase.INTENT)
            assert intents == ["call_id=p1", "call_id=p2", "call_id=p3"]
            assert len([e for e in entries if e.phase == Phase.EXECUTED]) == 3

    asyncio.run(main())
    assert sorted(app.order_tools.effects()) == ["charge O-2", "reserve SKU-1", "reserve SKU-2"]


def test_tools_are_wrapped_and_others_left_alone(app: ModuleType, effects: Path) -> None:
    """A Sagacity tool becomes a FunctionTool (IRREVERSIBLE: always_require, also when it was a
    FunctionTool made without); a plain tool is untouched; the caller's FunctionTool unchanged."""
    from sagacity.integrations.agent_framework import SagacityAgentTools

    @tool
    def lookup(sku: str) -> str:
        """Not a Sagacity tool."""
        return sku

    with Sagacity("memory://") as sg:
        unguarded = tool(app.order_tools.send_wire_transfer, approval_mode="never_require")
        reserve, wire, guarded, plain = SagacityAgentTools(sg).wrap(
            [app.order_tools.reserve_inventory, app.order_tools.send_wire_transfer, unguarded, lookup]
        )
        assert isinstance(reserve, FunctionTool)
        assert reserve.approval_mode == "never_require"
        assert (wire.name, wire.approval_mode) == ("send_wire_transfer", "always_require")
        assert guarded.approval_mode == "always_require"
        assert unguarded.approval_mode == "never_require"
        assert plain is lookup


def test_running_elsewhere_is_no_refusal(
    url: str,
    app: ModuleType,
    effects: Path,
    tmp_path: Path,
    holding_worker: Callable[..., subprocess.Popen[str]],
) -> None:
    """A worker process resumed the approved wire and is still in it (paid, not answered). Here
    the same run resumed meanwhile raises ``SagaRunningElsewhereError`` out of ``agent.run``
    (nothing runs, the saga is not compensated), and so does ``approval_responses``; after
    ``kill -9`` of the worker the call is in doubt: a ``SagaStateError``, no refusal either."""
    state = tmp_path / "state"
    with Sagacity(url) as sg:
        session, first = asyncio.run(first_run(app, sg, "af-run", "order"))
        app.save(state, session, first)
        sg.approve("af-run", 4, "alice@example.com")
        answers = app.approval_responses(sg, "af-run", first.user_input_requests)
        worker = holding_worker(HERE / "af_app.py", url, "af-run", "order", str(state))
        meanwhile, _ = app.load(state)
        with pytest.raises(SagaRunningElsewhereError, match="still running") as running:
            asyncio.run(app.agent(sg, "order").run(answer(*answers), session=meanwhile))
        assert not isinstance(running.value, ApprovalError)
        assert worker.poll() is None  # told while the wire still ran there
        assert not [e for e in sg.entries("af-run") if e.phase == Phase.COMPENSATED]
        elsewhere._running_then_in_doubt(
            sg,
            "af-run",
            worker,
            lambda: app.approval_responses(sg, "af-run", first.user_input_requests),
            effects,
        )
