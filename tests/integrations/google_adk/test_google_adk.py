"""Google ADK with SagacityAdkTools: the real ADK, a scripted ``BaseLlm``, no network, no key.

Sessions live in ADK's ``DatabaseSessionService`` on a SQLite file, so a paused run is resumed
by a *new process* after a restart. The issue's ways around ADK's own confirmation: the saved
session edited (the arguments changed everywhere ADK keeps them), the same saved session
resumed twice, a confirmation given in ADK alone, arguments edited in the reply.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

if os.environ.get("CI") != "true":  # in CI the extra is part of dev: a missing one fails there
    pytest.importorskip(
        "google.adk", reason="the google-adk extra is not installed: pip install '.[google-adk]'"
    )

from google.adk.tools import FunctionTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.errors import ApprovalRefusedError, PayloadMismatchError
from sagacity.integrations.google_adk import CONFIRMATION_CALL, SagacityAdkTools

from ..conftest import load_app, run_app

HERE = Path(__file__).parent
ALICE = '{"amount":"4200.00","to":"alice"}'
WIRED = "wire 4200.00 alice"


@pytest.fixture
def app(order_tools: ModuleType) -> ModuleType:
    return load_app(HERE, "adk_app")


@pytest.fixture
def db(tmp_path: Path) -> str:
    """ADK's session database (SQLite), shared with the processes a test starts."""
    return str(tmp_path / "sessions.db")


def resume_in_new_process(url: str, db: str, session_id: str, plan: str = "order") -> dict[str, Any]:
    """Answer the session's confirmations as Sagacity decided, in a fresh Python process."""
    return run_app(HERE / "adk_app.py", url, db, session_id, plan)


def pause(app: ModuleType, url: str, db: str, session_id: str, plan: str = "order", **options: Any) -> None:
    """The first turn: the reservation runs, the wire pauses on ADK's confirmation."""

    async def main() -> None:
        with Sagacity(url) as sg:
            await app.start(sg, plan, db, session_id, **options)

    asyncio.run(main())


def approve(url: str, session_id: str, approver: str = "alice@example.com") -> int:
    with Sagacity(url) as sg:
        [request] = sg.pending_approvals(session_id)
        sg.approve(session_id, request.journal_seq, approver)
        return request.journal_seq


def confirmation_reply(app: ModuleType, db: str, session_id: str, confirmation: ToolConfirmation) -> Any:
    """A reply to the session's open confirmation written by the application itself (ADK's own
    way), not built from Sagacity's journal."""
    session = asyncio.run(app.session(db, session_id))
    [request] = [
        call
        for event in session.events
        for call in event.get_function_calls()
        if call.name == CONFIRMATION_CALL
    ]
    response = types.FunctionResponse(
        name=CONFIRMATION_CALL,
        id=request.id,
        response=confirmation.model_dump(by_alias=True, exclude_none=True),
    )
    return types.Content(role="user", parts=[types.Part(function_response=response)])


def send(app: ModuleType, url: str, db: str, session_id: str, message: Any, plan: str = "order") -> Any:
    async def main() -> Any:
        with Sagacity(url) as sg:
            return await app.reply(sg, plan, db, session_id, message)

    return asyncio.run(main())


def wire_calls(sg: Sagacity, saga_id: str, phase: Phase) -> list[Any]:
    return [e for e in sg.entries(saga_id) if e.tool_name == "send_wire_transfer" and e.phase == phase]


def test_full_loop_resumed_in_a_new_process(app: ModuleType, url: str, db: str, effects: Path) -> None:
    """Reserve, the wire pauses on ADK's confirmation, a human approves in Sagacity, a new
    process loads the session from ADK's database and replies: wired once, under the call's id,
    in the saga named by the session's id."""
    pause(app, url, db, "order-1")
    assert app.order_tools.effects() == ["reserve SKU-9"]
    with Sagacity(url) as sg:
        assert sg.status("order-1") is SagaStatus.AWAITING_APPROVAL
        [request] = sg.pending_approvals("order-1")
        assert request.input == ALICE
    # Not approved yet: nothing to reply.
    assert asyncio.run(app.resume(url, db, "order-1", "order")) == {"output": None, "status": "PENDING"}
    seq = approve(url, "order-1")
    resumed = resume_in_new_process(url, db, "order-1")
    assert resumed == {"output": "done: wired 4200.00 to alice", "status": "COMPLETED"}
    assert app.order_tools.effects() == ["reserve SKU-9", WIRED]
    with Sagacity(url) as sg:
        calls = [(e.tool_name, e.phase, (e.payload.splitlines() or [""])[0]) for e in sg.entries("order-1")]
        assert ("reserve_inventory", "INTENT", "call_id=c1") in calls
        assert ("send_wire_transfer", "AWAITING_APPROVAL", "call_id=c2") in calls
        assert ("send_wire_transfer", "INTENT", f"resumes seq={seq}") in calls
        assert ("send_wire_transfer", "EXECUTED", "wired 4200.00 to alice") in calls
        assert sg.status("order-1") is SagaStatus.COMPLETED
        assert sg.verify("order-1").valid


def tamper(db: str) -> None:
    """What an attacker with the session database does: every copy of the arguments ADK keeps
    (the model's call, the confirmation request's ``originalFunctionCall``) changed to mallory,
    so ADK's own check that the two agree passes."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE events SET event_data = replace(event_data, 'alice', 'mallory')")
    conn.close()


def test_an_edited_session_is_refused_and_nothing_runs(
    app: ModuleType, db: str, tmp_path: Path, effects: Path
) -> None:
    """alice is approved; the saved session is edited to mallory: refused, nothing wired, the
    saga compensated."""
    url = f"sqlite:///{tmp_path}/journal.db"
    pause(app, url, db, "order-x")
    approve(url, "order-x")
    tamper(db)
    with pytest.raises(PayloadMismatchError, match="REJECTED, the saga was compensated, nothing ran"):
        asyncio.run(app.resume(url, db, "order-x", "order"))
    assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]
    with Sagacity(url) as sg:
        assert sg.status("order-x") is SagaStatus.REJECTED
        assert not wire_calls(sg, "order-x", Phase.INTENT)
        assert sg.verify("order-x").valid


def test_the_same_saved_session_resumed_twice_wires_once(
    app: ModuleType, db: str, tmp_path: Path, effects: Path
) -> None:
    """The session database restored from a copy taken before the resume (a backup, a worker
    that lost the tool's response; each resume opens it anew, as after a restart) answers the
    confirmation again and ADK runs the call again:
    Sagacity returns the journaled result, the wire is not sent twice."""
    url = f"sqlite:///{tmp_path}/journal.db"
    pause(app, url, db, "order-2")
    approve(url, "order-2")
    shutil.copy(db, f"{db}.before")
    first = asyncio.run(app.resume(url, db, "order-2", "order"))
    shutil.copy(f"{db}.before", db)
    second = asyncio.run(app.resume(url, db, "order-2", "order"))
    assert first == second == {"output": "done: wired 4200.00 to alice", "status": "COMPLETED"}
    assert app.order_tools.effects() == ["reserve SKU-9", WIRED]
    with Sagacity(url) as sg:
        assert len(wire_calls(sg, "order-2", Phase.EXECUTED)) == 1
        assert sg.verify("order-2").valid


def test_a_confirmation_in_adk_alone_pays_nothing(
    app: ModuleType, db: str, tmp_path: Path, effects: Path
) -> None:
    """The application confirms in ADK itself with nothing approved in Sagacity: the wire does
    not run, the model is told it waits for approval, the gate stays pending."""
    url = f"sqlite:///{tmp_path}/journal.db"
    pause(app, url, db, "order-f")
    output = send(
        app, url, db, "order-f", confirmation_reply(app, db, "order-f", ToolConfirmation(confirmed=True))
    )
    assert output.startswith("done: [AWAITING_APPROVAL]"), output
    assert app.order_tools.effects() == ["reserve SKU-9"]
    with Sagacity(url) as sg:
        assert len(sg.pending_approvals("order-f")) == 1
        assert sg.status("order-f") is SagaStatus.AWAITING_APPROVAL
        assert not wire_calls(sg, "order-f", Phase.INTENT)


def test_edited_arguments_need_a_new_approval(
    app: ModuleType, db: str, tmp_path: Path, effects: Path
) -> None:
    """alice is approved; the reply edits the arguments to bob (ADK's confirmation payload): the
    approval of alice does not pay bob, the edit waits for its own approval; approved, it runs
    once through Sagacity."""
    url = f"sqlite:///{tmp_path}/journal.db"
    pause(app, url, db, "order-e")
    approved = approve(url, "order-e")
    bob = {"amount": "4200.00", "to": "bob"}
    edit = ToolConfirmation(confirmed=True, payload={"args": bob})
    output = send(app, url, db, "order-e", confirmation_reply(app, db, "order-e", edit))
    assert output.startswith("done: [AWAITING_APPROVAL]"), output
    assert app.order_tools.effects() == ["reserve SKU-9"]
    with Sagacity(url) as sg:
        [request] = sg.pending_approvals("order-e")
        assert request.journal_seq != approved
        assert request.input == '{"amount":"4200.00","to":"bob"}'
        sg.approve("order-e", request.journal_seq, "carol@example.com")
        result = sg.resume("order-e", request.journal_seq, request.input)
        assert result.status is SagaStatus.COMPLETED
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 bob"]


def test_rejection_compensates_by_default(app: ModuleType, db: str, tmp_path: Path, effects: Path) -> None:
    url = f"sqlite:///{tmp_path}/journal.db"
    pause(app, url, db, "order-r")
    with Sagacity(url) as sg:
        [request] = sg.pending_approvals("order-r")
        sg.reject("order-r", request.journal_seq, "bob@example.com", "unknown supplier")
        session = asyncio.run(app.session(db, "order-r"))
        with pytest.raises(ApprovalRefusedError, match="compensated"):
            app.confirmation_message(sg, session)
    assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]


def test_rejection_can_tell_the_model_and_go_on(
    app: ModuleType, db: str, tmp_path: Path, effects: Path
) -> None:
    """on_reject="continue": the reply says not confirmed, the model is told who rejected and
    why; nothing is compensated."""
    url = f"sqlite:///{tmp_path}/journal.db"
    pause(app, url, db, "order-c", on_reject="continue")
    with Sagacity(url) as sg:
        [request] = sg.pending_approvals("order-c")
        sg.reject("order-c", request.journal_seq, "bob@example.com", "unknown supplier")
        message = app.confirmation_message(sg, asyncio.run(app.session(db, "order-c")))
    assert message is not None
    assert message.parts[0].function_response.response["confirmed"] is False
    output = send(app, url, db, "order-c", message)
    assert "bob@example.com rejected it (unknown supplier)" in output
    assert app.order_tools.effects() == ["reserve SKU-9"]
    with Sagacity(url) as sg:
        assert sg.status("order-c") is SagaStatus.COMPLETED


def test_a_failing_tool_compensates_in_reverse(app: ModuleType, db: str, effects: Path) -> None:
    """reserve, charge (async), then shipping fails: ADK ends the run with the tool's error and
    the saga compensates: refund, then release."""

    async def main() -> None:
        with Sagacity("memory://") as sg:
            with pytest.raises(RuntimeError, match="courier API unavailable"):
                await app.start(sg, "failing", db, "order-fail")
            assert await sg.status_async("order-fail") is SagaStatus.COMPENSATED
            failed = [e for e in await sg.entries_async("order-fail") if e.tool_name == "book_shipping"]
            assert [e.phase for e in failed] == [Phase.INTENT, Phase.FAILED]

    asyncio.run(main())
    assert app.order_tools.effects() == ["reserve SKU-9", "charge O-1", "refund O-1", "release SKU-9"]


def test_parallel_calls_journal_each_call_once(app: ModuleType, db: str, effects: Path) -> None:
    """Three calls in one model response (sync and async tools), run by ADK concurrently, each
    entering the session's saga for itself: each journaled once, under its own call id."""

    async def main() -> None:
        with Sagacity("memory://") as sg:
            output = await app.start(sg, "parallel", db, "order-p")
            assert output.startswith("done")
            intents = [e.payload for e in await sg.entries_async("order-p") if e.phase == Phase.INTENT]
            assert sorted(p for p in intents if p.startswith("call_id=")) == [
                "call_id=p1",
                "call_id=p2",
                "call_id=p3",
            ]
            assert await sg.status_async("order-p") is SagaStatus.COMPLETED

    asyncio.run(main())
    assert sorted(app.order_tools.effects()) == ["charge O-2", "reserve SKU-1", "reserve SKU-2"]


def test_async_tools_inside_a_live_saga(app: ModuleType, db: str, tmp_path: Path, effects: Path) -> None:
    """With the saga live around the run (its own id, not the session's), an async tool and an
    async IRREVERSIBLE one: paused, approved, answered, run once."""

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            async with sg.saga("order-live"):
                await app.start(sg, "async-order", db, "session-a")
            [request] = await sg.pending_approvals_async("order-live")
            await sg.approve_async("order-live", request.journal_seq, "alice@example.com")
            session = await app.session(db, "session-a")
            message = await asyncio.to_thread(app.confirmation_message, sg, session, saga_id="order-live")
            async with sg.saga("order-live", continue_existing=True):
                output = await app.reply(sg, "async-order", db, "session-a", message)
            assert output == "done: wired 4200.00 to alice"
            assert await sg.status_async("order-live") is SagaStatus.COMPLETED

    asyncio.run(main())
    assert app.order_tools.effects() == ["charge O-1", WIRED]


def test_function_tools_are_wrapped_and_others_left_alone(app: ModuleType) -> None:
    """A FunctionTool of a Sagacity tool is journaled; a plain function or tool is untouched."""

    def lookup(sku: str) -> str:
        """Not a Sagacity tool."""
        return sku

    plain = FunctionTool(lookup)
    with Sagacity("memory://") as sg:
        reserve, wire, same, other = SagacityAdkTools(sg).wrap(
            [
                FunctionTool(app.order_tools.reserve_inventory),
                app.order_tools.send_wire_transfer,
                plain,
                lookup,
            ]
        )
        assert isinstance(reserve, FunctionTool)
        assert reserve.name == "reserve_inventory"
        assert wire.name == "send_wire_transfer"
        assert (same, other) == (plain, lookup)
