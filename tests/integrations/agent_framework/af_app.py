"""The order agent on Microsoft Agent Framework, driven by a scripted chat client (no network, no key).

The client is the framework's own model interface (``BaseChatClient`` with its function-invocation
layer, as every real client composes it), scripted: it answers by how many tool results the
conversation holds, so a run resumed in another process goes on where it left off.

Imported by the tests, and run as a script to resume a paused run in a *new process*::

    python af_app.py URL SAGA_ID PLAN STATE_DIR

reads ``STATE_DIR/session.json`` (``AgentSession.to_dict()``) and ``STATE_DIR/requests.json``
(the paused run's ``user_input_requests``), answers them from Sagacity alone
(``approval_responses``), resumes the run and prints one JSON line: ``{"output": ..., "status":
...}`` (or ``{"error": ..., "status": ...}``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_framework import (
    Agent,
    AgentResponse,
    AgentSession,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import order_tools
from order_tools import (
    ALICE,
    Step,
    book_shipping,
    charge_card,
    reserve_inventory,
    send_wire_transfer,
    send_wire_transfer_async,
)

from sagacity import Sagacity
from sagacity.integrations.agent_framework import SagacityAgentTools, approval_responses

__all__ = ["PLANS", "ScriptedClient", "agent", "approval_responses", "order_tools", "resume", "save"]

PLANS: dict[str, list[Step]] = {
    **order_tools.PLANS,
    "retry-wire": [  # the model asks for the same wire again after it was rejected
        [("reserve_inventory", '{"sku":"SKU-9","quantity":2}', "c1")],
        [("send_wire_transfer", ALICE, "c2")],
        [("send_wire_transfer", ALICE, "c3")],
        "done",
    ],
}


class ScriptedClient(FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], BaseChatClient[Any]):
    """The framework's chat-client interface, answering the plan's next step."""

    def __init__(self, plan: str) -> None:
        super().__init__()
        self.steps = PLANS[plan]

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> Any:
        return self._answer(messages)

    async def _answer(self, messages: Sequence[Message]) -> ChatResponse[Any]:
        results = [c for m in messages for c in m.contents if c.type == "function_result"]
        seen = 0
        for step in self.steps:  # the first step whose calls are not all answered yet
            if isinstance(step, str) or seen + len(step) > len(results):
                break
            seen += len(step)
        else:  # pragma: no cover - every plan ends with text
            raise AssertionError("the plan ran out")
        if isinstance(step, str):
            last = str(results[-1].result) if results else ""
            return ChatResponse(messages=[Message(role="assistant", contents=[f"{step}: {last}"])])
        calls = [Content.from_function_call(cid, name, arguments=args) for name, args, cid in step]
        return ChatResponse(messages=[Message(role="assistant", contents=calls)])


def agent(sg: Sagacity, plan: str, *, middleware: Sequence[Any] = (), **options: Any) -> Agent[Any]:
    saga = SagacityAgentTools(sg, **options)
    tools = saga.wrap(
        [reserve_inventory, charge_card, book_shipping, send_wire_transfer, send_wire_transfer_async]
    )
    return Agent(client=ScriptedClient(plan), tools=tools, middleware=[*middleware, *saga.middleware])


def save(state: Path, session: AgentSession, response: AgentResponse[Any]) -> None:
    """What an application keeps of a paused run: the session and the requests it paused on."""
    state.mkdir(parents=True, exist_ok=True)
    (state / "session.json").write_text(json.dumps(session.to_dict()))
    (state / "requests.json").write_text(json.dumps([r.to_dict() for r in response.user_input_requests]))


def load(state: Path) -> tuple[AgentSession, list[Content]]:
    session = AgentSession.from_dict(json.loads((state / "session.json").read_text()))
    requests = [Content.from_dict(r) for r in json.loads((state / "requests.json").read_text())]
    return session, requests


async def resume(url: str, saga_id: str, plan: str, state: Path) -> dict[str, Any]:
    """A new process resumes the paused run from the saved session, as decided in Sagacity."""
    with Sagacity(url) as sg:
        session, requests = load(state)
        answers = await asyncio.to_thread(approval_responses, sg, saga_id, requests)
        if answers is None:
            return {"output": None, "status": "PENDING"}
        result = await agent(sg, plan).run(Message(role="user", contents=answers), session=session)
        status = await sg.status_async(saga_id)
        return {"output": result.text, "status": str(status)}


if __name__ == "__main__":
    url, saga_id, plan, state = sys.argv[1:5]
    try:
        print(json.dumps(asyncio.run(resume(url, saga_id, plan, Path(state)))))
    except Exception as exc:  # the parent reads what went wrong, and the saga's status
        with Sagacity(url) as sg:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "status": str(sg.status(saga_id))}))
