"""LangChain v1 create_agent / LangGraph ToolNode with SagacityMiddleware: the real framework, its
fake chat model, LangGraph's SQLite checkpointer, no network."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed: pip install '.[langchain]'")
pytest.importorskip("langgraph.checkpoint.sqlite", reason="langgraph-checkpoint-sqlite is not installed")

from langchain_core.messages import AIMessage
from langgraph.types import Command

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.testing import tool_entries

from ..conftest import load_app, run_app

HERE = Path(__file__).parent


@pytest.fixture
def app(order_tools: ModuleType) -> ModuleType:
    return load_app(HERE, "lc_app")


def resume_in_new_process(
    url: str, checkpoints: Path, thread: str, plan: str, checkpoint_id: str = "", answer: Any = None
) -> dict[str, Any]:
    """Resume the thread in a fresh Python process, from LangGraph's SQLite checkpoints only."""
    extra = [] if answer is None else [json.dumps(answer)]
    return run_app(HERE / "lc_app.py", url, str(checkpoints), thread, plan, checkpoint_id, *extra)


def start(
    app: ModuleType, sg: Sagacity, checkpoints: Path, thread: str, plan: str = "order", **options: Any
) -> Any:
    with app.checkpointer(str(checkpoints)) as saver:
        graph = app.agent(sg, plan, saver, **options)
        state = graph.invoke({"messages": [{"role": "user", "content": "order and pay"}]}, app.config(thread))
        paused = graph.get_state(app.config(thread)).config["configurable"]["checkpoint_id"]
    return state, paused


def test_full_loop_resumed_in_a_new_process(app: ModuleType, url: str, effects: Path, tmp_path: Path) -> None:
    """Reserve, the wire interrupts, a human approves in Sagacity, a new process resumes the thread."""
    checkpoints = tmp_path / "checkpoints.db"
    with Sagacity(url) as sg:
        state, paused = start(app, sg, checkpoints, "order-1")
        [interrupt] = state["__interrupt__"]
        meta = interrupt.value["sagacity"]
        [request] = sg.pending_approvals("order-1")
        assert (meta["saga_id"], meta["seq"], meta["input_hash"], meta["call_id"]) == (
            "order-1",
            request.journal_seq,
            request.input_hash,
            "c2",
        )
        assert app.order_tools.effects() == ["reserve SKU-9"]
    # Resumed before anyone approved: the graph pauses again, nothing runs.
    early = resume_in_new_process(url, checkpoints, "order-1", "order")
    assert early["interrupted"] is True
    with Sagacity(url) as sg:
        sg.approve("order-1", request.journal_seq, "alice@example.com")
    done = resume_in_new_process(url, checkpoints, "order-1", "order")
    assert done == {"last": "done: wired 4200.00 to alice", "interrupted": False, "status": "COMPLETED"}
    # Time travel: the thread resumed again from the paused checkpoint id runs nothing twice.
    again = resume_in_new_process(url, checkpoints, "order-1", "order", paused)
    assert again["status"] == "COMPLETED"
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 alice"]
    with Sagacity(url) as sg:
        phases = [(e.tool_name, e.phase) for e in sg.entries("order-1")]
        assert phases.count(("send_wire_transfer", "EXECUTED")) == 1
        assert sg.verify("order-1").valid


def test_checkpoint_edited_after_approval_is_refused(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    """alice approved; the checkpointed tool call edited to mallory (the request still says alice):
    refused in the new process, nothing wired, the saga compensated."""
    url = f"sqlite:///{tmp_path}/journal.db"
    checkpoints = tmp_path / "checkpoints.db"
    with Sagacity(url) as sg:
        start(app, sg, checkpoints, "order-x")
        [request] = sg.pending_approvals("order-x")
        sg.approve("order-x", request.journal_seq, "alice@example.com")
        with app.checkpointer(str(checkpoints)) as saver:
            graph = app.agent(sg, "order", saver)
            cfg = app.config("order-x")
            last = graph.get_state(cfg).values["messages"][-1]
            assert isinstance(last, AIMessage)
            forged = [{**c, "args": {**c["args"], "to": "mallory"}} for c in last.tool_calls]
            graph.update_state(cfg, {"messages": [AIMessage(content="", id=last.id, tool_calls=forged)]})
    resumed = resume_in_new_process(url, checkpoints, "order-x", "order")
    assert resumed["status"] == "REJECTED"  # the forged payload was refused: a rejection
    assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]
    with Sagacity(url) as sg:
        rejected = [e for e in sg.entries("order-x") if e.phase == Phase.REJECTED]
        assert "differs from the approved" in rejected[0].payload
        assert sg.verify("order-x").valid


def test_an_edit_decision_needs_a_new_approval(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/journal.db"
    checkpoints = tmp_path / "checkpoints.db"
    with Sagacity(url) as sg:
        start(app, sg, checkpoints, "order-e")
        [first] = sg.pending_approvals("order-e")
        sg.approve("order-e", first.journal_seq, "alice@example.com")
    edit = {"type": "edit", "args": {"amount": "4200.00", "to": "bob"}}
    paused = resume_in_new_process(url, checkpoints, "order-e", "order", answer=edit)
    assert paused["interrupted"] is True
    assert app.order_tools.effects() == ["reserve SKU-9"]
    with Sagacity(url) as sg:
        [second] = sg.pending_approvals("order-e")
        assert second.input == '{"amount":"4200.00","to":"bob"}'
        sg.approve("order-e", second.journal_seq, "carol@example.com")
    done = resume_in_new_process(url, checkpoints, "order-e", "order", answer=edit)
    assert done["status"] == "COMPLETED"
    assert app.order_tools.effects() == ["reserve SKU-9", "wire 4200.00 bob"]


def test_a_failing_tool_compensates_in_reverse(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    with Sagacity("memory://") as sg, app.checkpointer(str(tmp_path / "cp.db")) as saver:
        graph = app.agent(sg, "failing", saver)
        with pytest.raises(RuntimeError, match="courier"):
            graph.invoke({"messages": [{"role": "user", "content": "go"}]}, app.config("order-f"))
        assert app.order_tools.effects() == [
            "reserve SKU-9",
            "reserve SKU-7",
            "release SKU-7",
            "release SKU-9",
        ]
        assert sg.status("order-f") is SagaStatus.COMPENSATED


def test_parallel_calls_journal_each_once(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    with Sagacity("memory://") as sg, app.checkpointer(str(tmp_path / "cp.db")) as saver:
        graph = app.agent(sg, "parallel", saver)
        graph.invoke({"messages": [{"role": "user", "content": "go"}]}, app.config("order-p"))
        intents = sorted(e.payload for e in tool_entries(sg, "order-p") if e.phase == Phase.INTENT)
        assert intents == ["call_id=p1", "call_id=p2"]
        assert sorted(app.order_tools.effects()) == ["reserve SKU-1", "reserve SKU-2"]


def test_rejection_can_tell_the_model(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    with Sagacity("memory://") as sg, app.checkpointer(str(tmp_path / "cp.db")) as saver:
        graph = app.agent(sg, "order", saver, on_reject="continue")
        graph.invoke({"messages": [{"role": "user", "content": "go"}]}, app.config("order-c"))
        [request] = sg.pending_approvals("order-c")
        sg.reject("order-c", request.journal_seq, "bob@example.com", "unknown supplier")
        state = graph.invoke(Command(resume={"type": "approve"}), app.config("order-c"))
        assert "bob@example.com rejected it (unknown supplier)" in state["messages"][-1].content
        assert app.order_tools.effects() == ["reserve SKU-9"]
        assert sg.status("order-c") is SagaStatus.COMPLETED


def test_rejection_compensates_by_default(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    with Sagacity("memory://") as sg, app.checkpointer(str(tmp_path / "cp.db")) as saver:
        graph = app.agent(sg, "order", saver)
        graph.invoke({"messages": [{"role": "user", "content": "go"}]}, app.config("order-r"))
        [request] = sg.pending_approvals("order-r")
        sg.reject("order-r", request.journal_seq, "bob@example.com", "no")
        assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]
        with pytest.raises(Exception, match=r"(?i)compensated"):
            graph.invoke(Command(resume={"type": "approve"}), app.config("order-r"))
        assert app.order_tools.effects() == ["reserve SKU-9", "release SKU-9"]


def test_async_agent_and_tools(app: ModuleType, effects: Path, tmp_path: Path) -> None:
    async def main() -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        with Sagacity(f"sqlite:///{tmp_path}/j.db") as sg:
            graph = app.agent(sg, "async-order", InMemorySaver())
            cfg = app.config("order-a")
            await graph.ainvoke({"messages": [{"role": "user", "content": "go"}]}, cfg)
            [request] = await sg.pending_approvals_async("order-a")
            await sg.approve_async("order-a", request.journal_seq, "alice@example.com")
            state = await graph.ainvoke(Command(resume={"type": "approve"}), cfg)
            assert state["messages"][-1].content == "done: wired 4200.00 to alice"
            assert await sg.status_async("order-a") is SagaStatus.COMPLETED

    asyncio.run(main())
    assert app.order_tools.effects() == ["charge O-1", "wire 4200.00 alice"]


def test_a_bare_tool_node_with_the_same_hook(app: ModuleType, effects: Path) -> None:
    """ToolNode(wrap_tool_call=...) in a hand-built graph: the same journaling and gate."""
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from sagacity.integrations.langchain import SagacityMiddleware

    with Sagacity("memory://") as sg:
        mw = SagacityMiddleware(sg, saga_id="bare-1")
        node = ToolNode(app.TOOLS, wrap_tool_call=mw.wrap_tool_call, awrap_tool_call=mw.awrap_tool_call)
        builder = StateGraph(MessagesState)
        builder.add_node("tools", node)
        builder.add_edge(START, "tools")
        builder.add_edge("tools", END)
        graph = builder.compile()
        call = {
            "name": "reserve_inventory",
            "args": {"sku": "SKU-3", "quantity": 1},
            "id": "t1",
            "type": "tool_call",
        }
        message = AIMessage(content="", tool_calls=[call])
        graph.invoke({"messages": [message]})
        graph.invoke({"messages": [message]})  # presented twice: runs once
        assert app.order_tools.effects() == ["reserve SKU-3"]
        assert [e.payload for e in tool_entries(sg, "bare-1")] == ["call_id=t1", "reservation R-SKU-3-1"]
