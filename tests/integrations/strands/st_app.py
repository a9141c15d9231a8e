"""The order agent on AWS Strands Agents, driven by a scripted ``Model`` (no network, no key), its
conversation and interrupts kept by Strands' own ``FileSessionManager``.

Imported by the tests, and run as a script to resume a paused agent in a *new process*::

    python st_app.py URL SESSIONS SAGA_ID PLAN [RESPONSE_JSON]

restores the agent from its session in SESSIONS, answers its Sagacity interrupts (with
``interrupt_responses`` built from the journal, or with RESPONSE_JSON given as is to every one of
them: an approval in Strands alone, or an edit), resumes it and prints one JSON line:
``{"output": ..., "stop": ..., "interrupts": [...], "status": ...}`` (or ``{"error": ..., "cause":
..., "status": ...}``: Strands raises a hook's error as ``EventLoopException`` from Sagacity's).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from strands import Agent
from strands.models import Model
from strands.session import FileSessionManager

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
from sagacity.integrations.strands import SagacityStrandsHooks, interrupt_responses

__all__ = ["PLANS", "PlanModel", "agent", "interrupt_responses", "order_tools", "resume"]

PLANS: dict[str, list[Step]] = {
    **order_tools.PLANS,
    "after-failure": [
        [("book_shipping", '{"order":"O-1"}', "f1")],
        [("reserve_inventory", '{"sku":"SKU-9","quantity":2}', "f2")],
        "done",
    ],
    "two-wires": [
        [("send_wire_transfer", ALICE, "w1"), ("send_wire_transfer", '{"amount":"99.00","to":"bob"}', "w2")],
        "done",
    ],
}

TOOLS = [reserve_inventory, charge_card, book_shipping, send_wire_transfer, send_wire_transfer_async]


class PlanModel(Model):
    """Strands' ``Model`` interface, scripted: the answer depends on how many tool results the
    conversation holds, so an agent restored in another process goes on where it left off."""

    def __init__(self, plan: str) -> None:
        self.steps = PLANS[plan]

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        results = [
            block["toolResult"]
            for message in messages
            for block in message["content"]
            if "toolResult" in block
        ]
        done = seen = 0
        for step in self.steps:  # the step whose calls are not all answered yet
            if isinstance(step, str) or seen + len(step) > len(results):
                break
            seen += len(step)
            done += 1
        step = self.steps[done]
        yield {"messageStart": {"role": "assistant"}}
        if isinstance(step, str):
            last = "".join(c.get("text", "") for c in results[-1]["content"]) if results else ""
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": f"{step}: {last}"}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        for name, arguments, call_id in step:
            yield {"contentBlockStart": {"start": {"toolUse": {"name": name, "toolUseId": call_id}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": arguments}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


def agent(sg: Sagacity, plan: str, sessions: str | None, session_id: str, **options: Any) -> Agent:
    hooks = SagacityStrandsHooks(sg, **options)
    manager = FileSessionManager(session_id=session_id, storage_dir=sessions) if sessions else None
    return Agent(
        model=PlanModel(plan),
        tools=hooks.wrap(TOOLS),
        hooks=[hooks],
        session_manager=manager,
        callback_handler=None,
    )


def summary(sg: Sagacity, saga_id: str, result: Any) -> dict[str, Any]:
    return {
        "output": str(result).strip(),
        "stop": result.stop_reason,
        "interrupts": [{"id": i.id, "name": i.name, "reason": i.reason} for i in result.interrupts or []],
        "status": str(sg.status(saga_id)),
    }


def resume(url: str, sessions: str, saga_id: str, plan: str, given: Any = None) -> dict[str, Any]:
    """A new process restores the agent from its session and resumes it."""
    with Sagacity(url) as sg:
        the_agent = agent(sg, plan, sessions, saga_id)
        pending = json.loads(Path(sessions, "pending.json").read_text())
        if given is None:
            from strands.interrupt import Interrupt

            responses = interrupt_responses(sg, saga_id, [Interrupt(**i) for i in pending])
            if responses is None:
                status = str(sg.status(saga_id))
                return {"output": None, "stop": "pending", "interrupts": pending, "status": status}
        else:
            responses = [{"interruptResponse": {"interruptId": i["id"], "response": given}} for i in pending]
        result = the_agent(responses)
        answer = summary(sg, saga_id, result)
    Path(sessions, "pending.json").write_text(json.dumps(answer["interrupts"]))
    return answer


if __name__ == "__main__":
    url, sessions, saga_id, plan = sys.argv[1:5]
    given = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
    try:
        print(json.dumps(resume(url, sessions, saga_id, plan, given)))
    except Exception as exc:  # the parent reads what went wrong, and the saga's status
        with Sagacity(url) as sg:
            cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else None
            error = f"{type(exc).__name__}: {exc}"
            print(json.dumps({"error": error, "cause": cause, "status": str(sg.status(saga_id))}))
