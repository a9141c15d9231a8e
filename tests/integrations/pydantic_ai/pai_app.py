"""The order agent on Pydantic AI, driven by a scripted ``FunctionModel`` (no network, no key).

Imported by the tests, and run as a script to resume a paused run in a *new process*::

    python pai_app.py URL SAGA_ID PLAN STATE_DIR

reads ``STATE_DIR/history.json`` (the message history) and ``STATE_DIR/requests.json`` (the
``DeferredToolRequests``), builds the ``DeferredToolResults`` from Sagacity alone, resumes the
run and prints one JSON line: ``{"output": ..., "status": ...}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import order_tools
from order_tools import (
    Step,
    book_shipping,
    charge_card,
    reserve_inventory,
    send_wire_transfer,
    send_wire_transfer_async,
)

from sagacity import Sagacity, SagaStatus, tool
from sagacity.integrations.pydantic_ai import SagacityCapability, deferred_results


@tool
def pick_sku(sku: str) -> str:
    """Check a SKU; an unknown one asks the model to try again (ModelRetry: control flow)."""
    if sku != "SKU-9":
        raise ModelRetry(f"unknown sku {sku}; use SKU-9")
    order_tools.effect(f"pick {sku}")
    return sku


PLANS: dict[str, list[Step]] = {
    **order_tools.PLANS,
    "retry": [
        [("pick_sku", '{"sku":"SKU-0"}', "r1")],
        [("pick_sku", '{"sku":"SKU-9"}', "r2")],
        "done",
    ],
}


def model(plan: str) -> FunctionModel:
    """A model that makes the plan's calls, one step per response, whatever process it runs in."""
    steps = PLANS[plan]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = steps[sum(isinstance(m, ModelResponse) for m in messages)]
        if isinstance(step, str):
            returns = [
                str(p.content)
                for m in messages
                for p in getattr(m, "parts", [])
                if p.part_kind == "tool-return"
            ]
            return ModelResponse(parts=[TextPart(f"{step}: {returns[-1] if returns else ''}")])
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=cid) for name, args, cid in step])

    return FunctionModel(respond)


def agent(sg: Sagacity, plan: str, **options: Any) -> Agent[None, str | DeferredToolRequests]:
    return Agent(
        model(plan),
        tools=[
            reserve_inventory,
            charge_card,
            book_shipping,
            send_wire_transfer,
            send_wire_transfer_async,
            pick_sku,
        ],
        output_type=[str, DeferredToolRequests],  # type: ignore[arg-type]
        capabilities=[SagacityCapability(sg, **options)],
    )


REQUESTS = TypeAdapter(DeferredToolRequests)


def save(state_dir: Path, result: Any) -> None:
    """What an application persists when a run pauses: its messages and the deferred requests."""
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "history.json").write_bytes(result.all_messages_json())
    (state_dir / "requests.json").write_bytes(REQUESTS.dump_json(result.output))


def resume(url: str, saga_id: str, plan: str, state_dir: Path, **options: Any) -> dict[str, Any]:
    """A new process resumes the paused run from the persisted state, as decided in Sagacity."""
    with Sagacity(url) as sg:
        history = ModelMessagesTypeAdapter.validate_json((state_dir / "history.json").read_bytes())
        requests = REQUESTS.validate_json((state_dir / "requests.json").read_bytes())
        results = deferred_results(sg, saga_id, requests)
        if results is None:
            return {"output": None, "status": "PENDING"}
        output = agent(sg, plan, saga_id=saga_id, **options).run_sync(
            message_history=history, deferred_tool_results=results
        )
        status = sg.status(saga_id)
        return {"output": str(output.output), "status": str(status)}


if __name__ == "__main__":
    url, saga_id, plan, state = sys.argv[1:5]
    try:
        print(json.dumps(resume(url, saga_id, plan, Path(state))))
    except Exception as exc:  # the parent reads what went wrong, and the saga's status
        with Sagacity(url) as sg:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "status": str(sg.status(saga_id))}))
    _ = SagaStatus
