"""Pydantic AI with SagacityCapability: the real framework, its FunctionModel, no network.

The full loop: the agent reserves stock, calls the wire, the run pauses (DeferredToolRequests),
a human approves in Sagacity, a *new process* resumes from the persisted message history, the wire
runs exactly once. And every way the issue found to get around the framework's own approval.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip(
    "pydantic_ai", reason="the pydantic-ai extra is not installed: pip install '.[pydantic-ai]'"
)

from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.errors import ApprovalRefusedError
from sagacity.testing import tool_entries

from ..conftest import load_app, run_app

HERE = Path(__file__).parent
ALICE = '{"amount":"4200.00","to":"alice"}'


@pytest.fixture
def app(order_tools: ModuleType) -> ModuleType:
    return load_app(HERE, "pai_app")


def resume_in_new_process(url: str, saga_id: str, plan: str, state: Path) -> dict[str, Any]:
    """Resume the paused run in a fresh Python process, from the persisted state only."""
    return run_app(HERE / "pai_app.py", url, saga_id, plan, str(state))


def first_run(app: ModuleType, sg: Sagacity, saga_id: str, plan: str, state: Path, **options: Any) -> Any:
    result = app.agent(sg, plan, saga_id=saga_id, **options).run_sync("Order 2 x SKU-9 and pay the supplier")
    assert isinstance(result.output, DeferredToolRequests)
    app.save(state, result)
    return result


def test_full_loop_resumed_in_a_new_process(app: ModuleType, url: str, effects: Path, tmp_path: Path) -> None:
    """Reserve, wire pauses, a human approves in Sagacity, a new process resumes: wired once."""
    state = tmp_path / "state"
    with Sagacity(url) as sg:
        first = first_run(app, sg, "order-1", "order", state)
        [call] = first.output.approvals
        assert call.tool_call_id == "c2"
        meta = first.output.metadata["c2"]["sagacity"]
        assert meta["saga_id"] == "order-1"
        assert sg.status("order-1") is SagaStatus.AWAITING_APPROVAL
        assert app.order_tools.effects() == ["reserve SKU-9"]
        [request] = sg.pending_approvals("order-1")
        # the START, the reservation's INTENT and EXECUTED, the gate
        assert (request.journal_seq, request.input, request.input_hash) == (4, ALICE, meta["input_hash"])
        # Not approved yet: a resume has nothing to do.
        assert resume_in_new_process(url, "order-1", "order", state)["status"] == "PENDING"
        sg.approve("order-1", request.journal_seq, "alice@example.com")
    resumed = resume_in_new_process(url, "order-1", "order", state)
    assert resumed == {"output": "done: wired 4200.00 to alice", "status": "COMPLETED"}
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 alice"]
    # The same saved state resumed again (the replay): a no-op, nothing paid twice.
    again = resume_in_new_process(url, "order-1", "order", state)
    assert again == resumed
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 alice"]
    with Sagacity(url) as sg:
        entries = sg.entries("order-1")
        assert [(e.tool_name, e.phase, e.payload) for e in entries] == [
            ("sagacity:saga", "INTENT", ""),
            ("reserve_inventory", "INTENT", "call_id=c1"),
            ("reserve_inventory", "EXECUTED", "reservation R-SKU-9-2"),
            ("send_wire_transfer", "AWAITING_APPROVAL", f"call_id=c2\ndefinition={wire_definition()}"),
            ("sagacity:saga", "EXECUTED", '{"status":"AWAITING_APPROVAL"}'),  # the first run's END
            ("approval-gate", "APPROVED", "approver=alice@example.com"),
            ("send_wire_transfer", "INTENT", "resumes seq=4\ncall_id=c2"),
            ("send_wire_transfer", "EXECUTED", "wired 4200.00 to alice"),
            ("sagacity:saga", "EXECUTED", '{"status":"COMPLETED"}'),  # the resumed run's END
        ]
        assert entries[1].input == '{"sku":"SKU-9","quantity":2}'  # the JSON the model sent
        assert sg.status("order-1") is SagaStatus.COMPLETED
        assert sg.verify("order-1").valid


def test_approved_through_the_http_api(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """The approval comes from the authenticated HTTP API; the resumed run wires once."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from sagacity.server import TokenAuth, create_app

    url = f"sqlite:///{tmp_path}/journal.db"
    state = tmp_path / "state"
    with Sagacity(url) as sg:
        first_run(app, sg, "order-http", "order", state)
        auth = TokenAuth({"alice-token-0123456789": {"name": "alice@example.com", "roles": ["approver"]}})
        with TestClient(create_app(sg, auth=auth)) as client:
            listed = client.get(
                "/sagacity/approvals", headers={"Authorization": "Bearer alice-token-0123456789"}
            )
            [pending] = listed.json()
            assert pending["input"] == ALICE
            approved = client.post(
                f"/sagacity/approve/order-http/{pending['journalSeq']}",
                headers={"Authorization": "Bearer alice-token-0123456789"},
                json={},
            )
            assert approved.status_code == 200, approved.text
            assert approved.json()["approverIdentity"] == "alice@example.com"
    resumed = resume_in_new_process(url, "order-http", "order", state)
    assert resumed["status"] == "COMPLETED"
    assert app.order_tools.effects().count("wire 4200.00 alice") == 1


def test_history_edited_after_approval_is_refused(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """alice is approved; the stored history is edited to mallory: refused, nothing wired, compensated."""
    url = f"sqlite:///{tmp_path}/journal.db"
    state = tmp_path / "state"
    with Sagacity(url) as sg:
        first_run(app, sg, "order-x", "order", state)
        [request] = sg.pending_approvals("order-x")
        sg.approve("order-x", request.journal_seq, "alice@example.com")
    for name in ("history.json", "requests.json"):  # every copy of the arguments
        path = state / name
        path.write_text(path.read_text().replace("alice", "mallory"))
    resumed = resume_in_new_process(url, "order-x", "order", state)
    assert "PayloadMismatchError" in resumed["error"]
    assert resumed["status"] == "REJECTED"
    assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]
    with Sagacity(url) as sg:
        assert not [e for e in sg.entries("order-x") if e.phase == Phase.EXECUTED and "wire" in e.tool_name]
        assert sg.verify("order-x").valid


def test_only_calls_approved_in_sagacity_are_approved(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """An application that passes ToolApproved itself, without a Sagacity approval: paused again."""
    with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
        first = first_run(app, sg, "order-f", "order", tmp_path / "s")
        forged = DeferredToolResults(approvals={"c2": ToolApproved()})
        again = app.agent(sg, "order", saga_id="order-f").run_sync(
            message_history=first.all_messages(), deferred_tool_results=forged
        )
        assert isinstance(again.output, DeferredToolRequests)
        assert app.order_tools.effects() == ["reserve SKU-9"]
        assert len(sg.pending_approvals("order-f")) == 1
        assert app.deferred_results(sg, "order-f", again.output) is None  # still pending


def test_override_args_need_a_new_approval(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """ToolApproved(override_args=...) changing the approved arguments is gated anew."""
    with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
        first = first_run(app, sg, "order-o", "order", tmp_path / "s")
        [request] = sg.pending_approvals("order-o")
        sg.approve("order-o", request.journal_seq, "alice@example.com")
        override = {"amount": "4200.00", "to": "mallory"}
        edited = DeferredToolResults(approvals={"c2": ToolApproved(override_args=override)})
        second = app.agent(sg, "order", saga_id="order-o").run_sync(
            message_history=first.all_messages(), deferred_tool_results=edited
        )
        assert isinstance(second.output, DeferredToolRequests)  # the edit waits for its own approval
        assert "wire 4200.00 mallory" not in app.order_tools.effects()
        [new] = sg.pending_approvals("order-o")
        assert new.input == '{"amount":"4200.00","to":"mallory"}'
        assert new.journal_seq != request.journal_seq
        sg.approve("order-o", new.journal_seq, "bob@example.com")
        third = app.agent(sg, "order", saga_id="order-o").run_sync(
            message_history=first.all_messages(), deferred_tool_results=edited
        )
        assert third.output == "done: wired 4200.00 to mallory"
        assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 mallory"]


def test_a_failing_tool_compensates_in_reverse(app: ModuleType, effects: Path) -> None:
    """reserve, charge (async), then shipping fails: refund, then release; the run's error re-raised."""
    with Sagacity("memory://") as sg:
        with pytest.raises(RuntimeError, match="courier"):
            app.agent(sg, "failing", saga_id="order-fail").run_sync("go")
        assert app.order_tools.effects() == ["reserve SKU-9", "charge O-1", "refund O-1", "release SKU-9"]
        assert sg.status("order-fail") is SagaStatus.COMPENSATED
        assert sg.verify("order-fail").valid


def test_rejection_compensates_by_default(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
        first = first_run(app, sg, "order-r", "order", tmp_path / "s")
        [request] = sg.pending_approvals("order-r")
        sg.reject("order-r", request.journal_seq, "bob@example.com", "unknown supplier")
        assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]
        with pytest.raises(ApprovalRefusedError, match="compensated"):
            app.deferred_results(sg, "order-r", first.output)


def test_rejection_can_tell_the_model_and_go_on(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """on_reject="continue": the model is told who rejected and why; nothing is compensated."""
    with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
        first = first_run(app, sg, "order-c", "order", tmp_path / "s", on_reject="continue")
        [request] = sg.pending_approvals("order-c")
        sg.reject("order-c", request.journal_seq, "bob@example.com", "unknown supplier")
        results = app.deferred_results(sg, "order-c", first.output)
        assert results is not None
        second = app.agent(sg, "order", saga_id="order-c", on_reject="continue").run_sync(
            message_history=first.all_messages(), deferred_tool_results=results
        )
        assert "bob@example.com rejected it (unknown supplier)" in str(second.output)
        assert app.order_tools.effects() == ["reserve SKU-9"]
        assert sg.status("order-c") is SagaStatus.COMPLETED


def test_parallel_tool_calls_journal_each_call_once(app: ModuleType, effects: Path) -> None:
    """Three calls in one model response run concurrently; each is journaled once, by its id."""
    with Sagacity("memory://") as sg:
        result = app.agent(sg, "parallel", saga_id="order-p").run_sync("go")
        assert str(result.output).startswith("done")
        intents = [e for e in tool_entries(sg, "order-p") if e.phase == Phase.INTENT]
        assert sorted(e.payload for e in intents) == ["call_id=p1", "call_id=p2", "call_id=p3"]
        assert sorted(app.order_tools.effects()) == ["charge O-2", "reserve SKU-1", "reserve SKU-2"]
        # The same response replayed (a re-run from the history): nothing runs again.
        history = ModelMessagesTypeAdapter.validate_json(result.all_messages_json())
        app.agent(sg, "parallel", saga_id="order-p").run_sync(message_history=history[:2])
        assert len(app.order_tools.effects()) == 3
        assert sg.status("order-p") is SagaStatus.COMPLETED


def test_model_retry_is_control_flow_not_a_failure(app: ModuleType, effects: Path) -> None:
    with Sagacity("memory://") as sg:
        result = app.agent(sg, "retry", saga_id="order-retry").run_sync("go")
        assert str(result.output) == "done: SKU-9"
        phases = [(e.phase, e.payload) for e in sg.entries("order-retry")]
        # the tool's ModelRetry reaches the hook as the framework's ToolRetryError
        assert ("FAILED", "control flow: ToolRetryError: unknown sku SKU-0; use SKU-9") in phases
        assert sg.status("order-retry") is SagaStatus.COMPLETED


def test_async_tools_and_run(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """An async tool and an async wire through agent.run, inside a saga the application opened."""

    async def main() -> None:
        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            async with sg.saga("order-a"):
                first = await app.agent(sg, "async-order").run("go")
            assert isinstance(first.output, DeferredToolRequests)
            [request] = await sg.pending_approvals_async("order-a")
            await sg.approve_async("order-a", request.journal_seq, "alice@example.com")
            results = app.deferred_results(sg, "order-a", first.output)
            async with sg.saga("order-a", continue_existing=True) as saga:
                second = await app.agent(sg, "async-order").run(
                    message_history=first.all_messages(), deferred_tool_results=results
                )
            assert second.output == "done: wired 4200.00 to alice"
            assert saga.result is not None
            assert saga.result.status is SagaStatus.COMPLETED

    asyncio.run(main())
    assert app.order_tools.effects() == ["charge O-1", "wire 4200.00 alice"]


def test_the_saga_id_defaults_to_the_conversation_id(app: ModuleType, effects: Path) -> None:
    with Sagacity("memory://") as sg:
        result = app.agent(sg, "order").run_sync("go", conversation_id="conv-42")
        assert isinstance(result.output, DeferredToolRequests)
        assert sg.status("conv-42") is SagaStatus.AWAITING_APPROVAL


def wire_definition() -> str:
    """The hash of send_wire_transfer's definition, which its gates journal (docs/journal.md)."""
    from sagacity.tools import registry

    return registry.get("send_wire_transfer").definition_hash
