"""The CrewAI app the tests drive, in the test process and as a fresh process.

A scripted model written against CrewAI's own model interface (``BaseLLM``, native tool calls),
the shared order tools wrapped by ``SagacityCrewTools``, and an order flow: ``order`` kicks the
crew off and asks for ``@human_feedback`` through ``SagacityFeedbackProvider``; ``settle``
kicks the same crew off again once the flow is resumed (what ran replays, what was approved runs).

As a script: ``crew_app.py URL FLOWS_DB FLOW_ID`` restores the paused flow from CrewAI's SQLite
persistence, resumes it with ``feedback_from_journal`` and prints ``{"feedback", "result",
"effects"}``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

# No telemetry, no tracing prompt, no storage outside the test's folder: offline, always.
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import order_tools
from crewai import Agent, Crew, Task
from crewai.flow import Flow, human_feedback, listen, start
from crewai.flow.persistence.sqlite import SQLiteFlowPersistence
from crewai.llms.base_llm import BaseLLM
from pydantic import BaseModel

from sagacity import Sagacity
from sagacity.integrations.crewai import SagacityCrewTools, SagacityFeedbackProvider, feedback_from_journal

RESERVE = ("reserve_inventory", '{"sku":"SKU-9","quantity":2}')
CHARGE = ("charge_card", '{"order":"O-1","amount":"49.90"}')
SHIP = ("book_shipping", '{"order":"O-1"}')


class ScriptedLLM(BaseLLM):
    """CrewAI's model interface, answered from a script: each step is a list of tool calls
    (name, arguments JSON) made as native tool calls with fresh ids, or the final text. The
    script starts over when it ends (a retried task, a crew kicked off again)."""

    def __init__(self, steps: list[list[tuple[str, str]] | str]) -> None:
        super().__init__(model="scripted")
        self._steps = steps
        self._at = 0
        self._ids = 0
        self.told: list[str] = []  # what the tools answered, as the model read it

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, **_: Any) -> Any:
        if isinstance(messages, list):
            self.told = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
        step = self._steps[self._at % len(self._steps)]
        self._at += 1
        if isinstance(step, str):
            return step
        calls = []
        for name, arguments in step:
            self._ids += 1  # a model's call ids change on every attempt
            calls.append(
                {
                    "id": f"call_{self._ids}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
        return calls

    def supports_function_calling(self) -> bool:
        return True

    def get_context_window_size(self) -> int:
        return 100_000


def told(crew: Crew) -> list[str]:
    """What the crew's tools answered in its last kickoff, as the scripted model read it."""
    llm = crew.agents[0].llm
    assert isinstance(llm, ScriptedLLM)
    return llm.told


def crew(sg: Sagacity, steps: list[Any], *, saga_id: Any = None, **task: Any) -> Crew:
    """One agent with the order tools, one task, the scripted model."""
    tools = SagacityCrewTools(sg, saga_id=saga_id).wrap(
        [
            order_tools.reserve_inventory,
            order_tools.charge_card,
            order_tools.book_shipping,
            order_tools.send_wire_transfer,
        ]
    )
    agent = Agent(
        role="buyer", goal="place orders", backstory="a careful buyer", llm=ScriptedLLM(steps), tools=tools
    )
    order = Task(
        description="Order 2 x SKU-9 and pay the supplier", expected_output="a summary", agent=agent, **task
    )
    return Crew(agents=[agent], tasks=[order])


class OrderState(BaseModel):
    id: str = ""
    amount: str = "4200.00"
    to: str = "alice"
    runs: int = 0


def order_flow(sg: Sagacity, flows_db: str) -> type[Flow[OrderState]]:
    """The order flow, its feedback provider bound to ``sg``."""

    class OrderFlow(Flow[OrderState]):
        def steps(self) -> list[Any]:
            wire = (
                "send_wire_transfer",
                json.dumps({"amount": self.state.amount, "to": self.state.to}, separators=(",", ":")),
            )
            return [[RESERVE], [wire], "done"]

        @start()
        @human_feedback(message="Approve the wire in Sagacity", provider=SagacityFeedbackProvider(sg))
        def order(self) -> str:
            self.state.runs += 1
            return str(crew(sg, self.steps()).kickoff().raw)

        @listen(order)
        def settle(self) -> str:
            self.state.runs += 1
            return str(crew(sg, self.steps()).kickoff().raw)

    OrderFlow.__module__ = __name__
    return OrderFlow


def persistence(flows_db: str) -> SQLiteFlowPersistence:
    return SQLiteFlowPersistence(flows_db)


def resume(sg: Sagacity, flows_db: str, flow_id: str, feedback: str | None = None) -> dict[str, Any]:
    """Restore the paused flow from CrewAI's persistence and resume it (with the journal's
    feedback unless one is given)."""
    answer = feedback if feedback is not None else feedback_from_journal(sg, flow_id)
    if answer is None:
        return {"feedback": None, "result": None, "effects": order_tools.effects()}
    flow = order_flow(sg, flows_db).from_pending(flow_id, persistence(flows_db))
    result = flow.resume(answer)
    return {"feedback": answer, "result": str(result), "effects": order_tools.effects()}


if __name__ == "__main__":
    url, flows_db, flow_id = sys.argv[1:]
    with Sagacity(url) as journal:
        print(json.dumps(resume(journal, flows_db, flow_id)))
