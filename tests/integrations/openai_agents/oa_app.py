"""The order agent on the OpenAI Agents SDK, driven by a scripted ``Model`` (no network, no key).

Imported by the tests, and run as a script to resume a paused run in a *new process*::

    python oa_app.py URL SAGA_ID PLAN STATE_FILE

reads the ``RunState.to_string()`` saved in STATE_FILE, approves in it only what Sagacity
approved (``approve_in_state``), resumes the run and prints one JSON line:
``{"output": ..., "status": ...}`` (or ``{"error": ..., "cause": ..., "status": ...}``: the SDK
raises a tool's refusal as ``UserError`` from Sagacity's error).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, ModelSettings, RunState, Usage, set_tracing_disabled
from agents.testing import assistant_message, function_call

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
from sagacity.integrations.openai_agents import SagacityTools, approve_in_state

__all__ = ["PLANS", "PlanModel", "agent", "approve_in_state", "order_tools", "resume"]

set_tracing_disabled(True)  # offline: no trace export


PLANS: dict[str, list[Step]] = {
    **order_tools.PLANS,
    "two-wires": [
        [("send_wire_transfer", ALICE, "w1")],
        [("send_wire_transfer", '{"amount":"99.00","to":"bob"}', "w2")],
        "done",
    ],
    "parallel-gated": [
        [
            ("reserve_inventory", '{"sku":"SKU-1","quantity":1}', "q1"),
            ("send_wire_transfer", ALICE, "q2"),
            ("send_wire_transfer", '{"amount":"99.00","to":"bob"}', "q3"),
        ],
        "done",
    ],
}


class PlanModel(Model):
    """The SDK's ``Model`` interface, scripted: the answer depends on how many tool outputs the
    conversation holds, so a run resumed in another process goes on where it left off."""

    def __init__(self, plan: str) -> None:
        self.steps = PLANS[plan]

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = input if isinstance(input, list) else []
        outputs = [
            i.get("output") for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        done = 0
        seen = 0
        for step in self.steps:  # the step whose calls are not all answered yet
            if isinstance(step, str) or seen + len(step) > len(outputs):
                break
            seen += len(step)
            done += 1
        step = self.steps[done]
        if isinstance(step, str):
            last = outputs[-1] if outputs else ""
            return ModelResponse(
                output=[assistant_message(f"{step}: {last}")], usage=Usage(), response_id=None
            )
        calls = [function_call(name, args, call_id=cid) for name, args, cid in step]
        return ModelResponse(output=calls, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def agent(sg: Sagacity, plan: str, **options: Any) -> Agent[Any]:
    tools = SagacityTools(sg, **options).wrap(
        [reserve_inventory, charge_card, book_shipping, send_wire_transfer, send_wire_transfer_async]
    )
    return Agent(name="orders", model=PlanModel(plan), tools=tools, model_settings=ModelSettings())


async def resume(url: str, saga_id: str, plan: str, state_file: Path) -> dict[str, Any]:
    """A new process resumes the paused run from the saved RunState, as decided in Sagacity."""
    from agents import Runner

    with Sagacity(url) as sg:
        the_agent = agent(sg, plan, saga_id=saga_id)
        state = await RunState.from_string(the_agent, state_file.read_text())
        decided = await asyncio.to_thread(approve_in_state, sg, saga_id, state)
        if decided is None:
            return {"output": None, "status": "PENDING"}
        result = await Runner.run(the_agent, decided)
        status = await sg.status_async(saga_id)
        return {"output": str(result.final_output), "status": str(status)}


if __name__ == "__main__":
    url, saga_id, plan, state = sys.argv[1:5]
    try:
        print(json.dumps(asyncio.run(resume(url, saga_id, plan, Path(state)))))
    except Exception as exc:  # the parent reads what went wrong, and the saga's status
        with Sagacity(url) as sg:
            cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else None
            print(
                json.dumps(
                    {
                        "error": f"{type(exc).__name__}: {exc}",
                        "cause": cause,
                        "status": str(sg.status(saga_id)),
                    }
                )
            )
