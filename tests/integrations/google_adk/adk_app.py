"""The order agent on Google ADK, driven by a scripted ``BaseLlm`` (no network, no key), its
sessions in ADK's ``DatabaseSessionService`` on a SQLite file.

Imported by the tests, and run as a script to resume a paused run in a *new process*::

    python adk_app.py URL SESSIONS_DB SESSION_ID PLAN

loads the session from SESSIONS_DB, builds the reply to its open tool confirmations from
Sagacity alone (``confirmation_message``), runs it and prints one JSON line:
``{"output": ..., "status": ...}`` (or ``{"error": ..., "status": ...}`` when the run raised).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService
from google.genai import types

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
from sagacity.integrations.google_adk import SagacityAdkTools, confirmation_message

__all__ = ["APP", "PLANS", "PlanModel", "agent", "confirmation_message", "order_tools", "resume", "run"]

APP = "orders"
USER = "u1"

PLANS: dict[str, list[Step]] = {
    **order_tools.PLANS,
    "two-wires": [
        [("send_wire_transfer", ALICE, "w1")],
        [("send_wire_transfer", '{"amount":"99.00","to":"bob"}', "w2")],
        "done",
    ],
}


class PlanModel(BaseLlm):
    """ADK's model interface, scripted: the answer depends on how many tool calls the session
    has answered, so a run resumed in another process goes on where it left off."""

    model: str = "scripted-plan"
    plan: str = "order"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        answers: dict[str, Any] = {}
        for content in llm_request.contents:
            for part in content.parts or []:
                response = part.function_response
                if response is not None and response.id:
                    answers[response.id] = response.response  # the last answer of each call
        steps = PLANS[self.plan]
        done = 0
        for step in steps:  # the first step with a call not answered yet
            if isinstance(step, str) or any(cid not in answers for _, _, cid in step):
                break
            done += 1
        step = steps[done]
        if isinstance(step, str):
            last = list(answers.values())[-1] if answers else {}
            text = last.get("result", last.get("error", "")) if isinstance(last, dict) else last
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=f"{step}: {text}")]))
            return
        calls = [
            types.Part(function_call=types.FunctionCall(name=name, args=json.loads(args), id=cid))
            for name, args, cid in step
        ]
        yield LlmResponse(content=types.Content(role="model", parts=calls))


def agent(sg: Sagacity, plan: str, **options: Any) -> LlmAgent:
    tools = SagacityAdkTools(sg, **options).wrap(
        [reserve_inventory, charge_card, book_shipping, send_wire_transfer, send_wire_transfer_async]
    )
    return LlmAgent(name="orders", model=PlanModel(plan=plan), tools=tools)


def sessions(db: str) -> DatabaseSessionService:
    return DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{db}")


def user_text(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def run(runner: Runner, session_id: str, message: types.Content) -> str | None:
    """One turn; the agent's last text (None when the turn paused without one)."""
    if await runner.session_service.get_session(app_name=APP, user_id=USER, session_id=session_id) is None:
        await runner.session_service.create_session(app_name=APP, user_id=USER, session_id=session_id)
    text = None
    async for event in runner.run_async(user_id=USER, session_id=session_id, new_message=message):
        for part in event.content.parts or [] if event.content else []:
            if part.text:
                text = part.text
    return text


@asynccontextmanager
async def opened(sg: Sagacity, plan: str, db: str, **options: Any) -> AsyncIterator[Runner]:
    """A runner of the order agent on the sessions in ``db``, closed with its session service."""
    async with (
        sessions(db) as service,
        Runner(agent=agent(sg, plan, **options), app_name=APP, session_service=service) as runner,
    ):
        yield runner


async def start(sg: Sagacity, plan: str, db: str, session_id: str, **options: Any) -> str | None:
    """The first turn of a new session: the agent runs until it ends or a call pauses."""
    async with opened(sg, plan, db, **options) as runner:
        return await run(runner, session_id, user_text("Order 2 x SKU-9 and pay the supplier"))


async def reply(
    sg: Sagacity, plan: str, db: str, session_id: str, message: types.Content, **options: Any
) -> str | None:
    """Send ``message`` (a confirmation reply) to the session."""
    async with opened(sg, plan, db, **options) as runner:
        return await run(runner, session_id, message)


async def session(db: str, session_id: str) -> Any:
    """The session as saved in ``db``."""
    async with sessions(db) as service:
        return await service.get_session(app_name=APP, user_id=USER, session_id=session_id)


async def resume(url: str, db: str, session_id: str, plan: str) -> dict[str, Any]:
    """A new process answers the session's confirmations as decided in Sagacity, and runs."""
    with Sagacity(url) as sg:
        saved = await session(db, session_id)
        message = await asyncio.to_thread(confirmation_message, sg, saved)
        if message is None:
            return {"output": None, "status": "PENDING"}
        output = await reply(sg, plan, db, session_id, message)
        return {"output": output, "status": str(await sg.status_async(session_id))}


if __name__ == "__main__":
    url, db, session_id, plan = sys.argv[1:5]
    try:
        print(json.dumps(asyncio.run(resume(url, db, session_id, plan))))
    except Exception as exc:  # the parent reads what went wrong, and the saga's status
        with Sagacity(url) as sg:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "status": str(sg.status(session_id))}))
