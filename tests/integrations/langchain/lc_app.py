"""The order agent on LangChain v1 (create_agent) with LangGraph's SQLite checkpointer, driven by a
scripted subclass of LangChain's own GenericFakeChatModel (no network, no key).

Imported by the tests, and run as a script to resume a paused thread in a *new process*::

    python lc_app.py URL CHECKPOINTS THREAD PLAN [CHECKPOINT_ID] [EDIT_JSON]

resumes the thread (from its latest checkpoint, or from CHECKPOINT_ID: time travel) with
``Command(resume=...)`` and prints one JSON line: ``{"last": ..., "interrupted": bool, "status": ...}``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import order_tools
from order_tools import (
    book_shipping,
    charge_card,
    reserve_inventory,
    send_wire_transfer,
    send_wire_transfer_async,
)

from sagacity import Sagacity
from sagacity.integrations.langchain import SagacityMiddleware

ALICE = {"amount": "4200.00", "to": "alice"}
#: What the tools did, in every process (the tests read it through here).
effects = order_tools.effects

Step = list[tuple[str, dict[str, Any], str]] | str

PLANS: dict[str, list[Step]] = {
    "order": [
        [("reserve_inventory", {"sku": "SKU-9", "quantity": 2}, "c1")],
        [("send_wire_transfer", ALICE, "c2")],
        "done",
    ],
    "async-order": [
        [("charge_card", {"order": "O-1", "amount": "49.90"}, "c1")],
        [("send_wire_transfer_async", ALICE, "c2")],
        "done",
    ],
    "failing": [
        [("reserve_inventory", {"sku": "SKU-9", "quantity": 2}, "c1")],
        [("reserve_inventory", {"sku": "SKU-7", "quantity": 1}, "c2")],
        [("book_shipping", {"order": "O-1"}, "c3")],
        "done",
    ],
    "parallel": [
        [
            ("reserve_inventory", {"sku": "SKU-1", "quantity": 1}, "p1"),
            ("reserve_inventory", {"sku": "SKU-2", "quantity": 1}, "p2"),
        ],
        "done",
    ],
}


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, answering by the plan step the conversation is at (so a model
    in a new process continues where the checkpoint left off); tools bind to it as they are."""

    plan: str = "order"
    messages: Iterator[Any] = iter(())

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        steps = PLANS[self.plan]
        step = steps[sum(isinstance(m, AIMessage) for m in messages)]
        if isinstance(step, str):
            last = messages[-1].content if messages else ""
            message = AIMessage(content=f"{step}: {last}")
        else:
            calls = [{"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in step]
            message = AIMessage(content="", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=message)])


TOOLS = [reserve_inventory, charge_card, book_shipping, send_wire_transfer, send_wire_transfer_async]


@contextmanager
def checkpointer(path: str) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def agent(sg: Sagacity, plan: str, saver: Any, **options: Any) -> Any:
    return create_agent(
        ScriptedChatModel(plan=plan),
        tools=TOOLS,
        middleware=[SagacityMiddleware(sg, **options)],
        checkpointer=saver,
    )


def config(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def summary(sg: Sagacity, thread: str, state: dict[str, Any]) -> dict[str, Any]:
    messages = state.get("messages", [])
    return {
        "last": str(messages[-1].content) if messages else None,
        "interrupted": bool(state.get("__interrupt__")),
        "status": str(sg.status(thread)),
    }


def resume(
    url: str, checkpoints: str, thread: str, plan: str, checkpoint_id: str | None, answer: Any
) -> dict[str, Any]:
    with Sagacity(url) as sg, checkpointer(checkpoints) as saver:
        graph = agent(sg, plan, saver)
        state = graph.invoke(Command(resume=answer), config(thread, checkpoint_id))
        return summary(sg, thread, state)


if __name__ == "__main__":
    url, checkpoints, thread, plan = sys.argv[1:5]
    checkpoint_id = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
    answer = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {"type": "approve"}
    try:
        print(json.dumps(resume(url, checkpoints, thread, plan, checkpoint_id, answer)))
    except Exception as exc:  # the parent reads what went wrong, and the saga's status
        with Sagacity(url) as sg:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "status": str(sg.status(thread))}))
