"""Google ADK: every call of a Sagacity tool journaled, IRREVERSIBLE ones approved in Sagacity.

::

    tools = SagacityAdkTools(sg)
    agent = LlmAgent(name="orders", model=model, tools=tools.wrap([reserve_inventory, send_wire_transfer]))

:meth:`SagacityAdkTools.wrap` takes Sagacity ``@tool`` functions (or ``FunctionTool`` s of them)
and returns ``FunctionTool`` s whose calls are journaled under the function call's ``id``. The
saga is the live one if any (``async with sg.saga(...)`` around the run), else ``saga_id=`` (a
str, or a function of the ``ToolContext``), else the ADK session's id; without a live saga each
call enters the saga for its own duration, so a failed call compensates the saga at once.

An IRREVERSIBLE tool pauses through ADK's own tool confirmation: its ``check_require_confirmation``
journals the call's gate (AWAITING_APPROVAL) and asks for confirmation, so the run ends with an
``adk_request_confirmation`` function call saved in the session (a ``DatabaseSessionService``
keeps it across restarts). A named human decides in Sagacity (``sg.approve``/``sg.reject``, the
CLI, the HTTP API); the application, in any process, builds the reply with
:func:`confirmation_message` — ``confirmed`` only for what Sagacity approved — and sends it as the
run's ``new_message``. The confirmed call then runs in band, once, and only if its arguments, as
the session presents them, hash to the approved payload: a session edited to change them is
refused (REJECTED, the saga compensated, nothing runs).

- A confirmation given in ADK alone (``confirmed=True`` with nothing approved in Sagacity) pays
  nothing: the tool does not run, the model is told the call waits for approval, the gate stays
  pending. ``confirmed=False`` runs nothing either.
- A reply whose ``payload`` carries ``{"args": {...}}`` other than the call's edits the call:
  the gate is superseded and the edit needs its own approval (nothing runs on the old one).
  ADK answers each confirmation once, so an approved edit runs through ``sg.resume`` (or the
  CLI / HTTP API), not through ADK.
- A call re-presented after it ran (a confirmation sent again after the session lost the tool's
  response, a rewound or copied session) returns the journaled result: nothing runs twice. One
  still running in another living process raises ``SagaRunningElsewhereError`` (no refusal,
  nothing decided); one whose process died mid-call is in doubt (``SagaStateError``).
- The journaled input is the call's arguments as compact JSON, in the model's key order.
- ``on_reject``: ``"compensate"`` (default) — a rejection compensates the saga and
  :func:`confirmation_message` raises ``ApprovalRefusedError``; ``"continue"`` — nothing is
  compensated and the model is told who rejected the call and why.
- Tools that are not Sagacity tools are returned as given.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from sagacity import framework
from sagacity.errors import ConfigurationError
from sagacity.framework import CallPending, CallRefused, CallRejected
from sagacity.integrations._adapter import Adapter, named_saga
from sagacity.tools import ToolSpec

try:
    from google.adk.sessions import Session
    from google.adk.tools.function_tool import FunctionTool
    from google.adk.tools.tool_confirmation import ToolConfirmation
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigurationError(
        "sagacity.integrations.google_adk needs Google ADK: pip install 'sagacity[google-adk]'"
    ) from exc

from sagacity import CallStatus, Sagacity

__all__ = ["CONFIRMATION_CALL", "SagacityAdkTools", "confirmation_message"]

#: The name ADK gives the function call that asks for a tool confirmation, and its reply.
CONFIRMATION_CALL = "adk_request_confirmation"

#: The call id whose approved execution is under way in this context: ADK's FunctionTool asks
#: again whether it needs confirmation before it calls the function; inside it does not.
_running: ContextVar[str | None] = ContextVar("sagacity_adk_running", default=None)


class SagacityAdkTools(Adapter[ToolContext]):
    """Wrap tools so every call of a Sagacity tool is journaled and IRREVERSIBLE ones are
    approved in Sagacity (module doc)."""

    def wrap(self, tools: Iterable[Any]) -> list[Any]:
        """The tools, each Sagacity tool journaled; other tools are returned as given."""
        return [self.wrap_one(tool) for tool in tools]

    def wrap_one(self, tool: Any) -> Any:
        """One tool: a Sagacity ``@tool`` function or a ``FunctionTool`` of one, journaled."""
        func = tool.func if isinstance(tool, FunctionTool) else tool
        spec = framework.spec_of(func)
        if spec is None and isinstance(tool, FunctionTool):
            spec = framework.spec_of(name=tool.name, registry=self.registry or self.sagacity.registry)
        if spec is None or not callable(func):
            return tool
        return _JournaledTool(func, spec, self)

    def _saga_id(self, ctx: ToolContext) -> str:
        named = named_saga(self.saga_id, ctx)
        if named is not None:
            return named
        return ctx.session.id

    async def _record(self, ctx: ToolContext, call_id: str) -> framework.CallRecord | None:
        saga_id = framework.current_saga_id() or self._saga_id(ctx)
        return await asyncio.to_thread(framework.find_call, self.sagacity, saga_id, call_id)


class _JournaledTool(FunctionTool):
    """A Sagacity tool as ADK's ``FunctionTool``: the same declaration, the call journaled."""

    def __init__(self, func: Any, spec: ToolSpec, adapter: SagacityAdkTools) -> None:
        super().__init__(func, require_confirmation=spec.irreversible)
        self.spec = spec
        self.adapter = adapter

    async def check_require_confirmation(self, args: dict[str, Any], tool_context: ToolContext) -> bool:
        """True while the call's gate is open in Sagacity (journaled here on first sight), so ADK
        asks for, and then honours, its confirmation; anything else — executed, rejected,
        refused — goes to :meth:`run_async`, which replays or refuses it on the journal alone."""
        call_id = tool_context.function_call_id
        if not self.spec.irreversible or not call_id or _running.get() == call_id:
            return False
        record = await self.adapter._record(tool_context, call_id)
        if record is not None:
            return record.status in (CallStatus.AWAITING_APPROVAL, CallStatus.APPROVED)
        return isinstance(await self._journaled(tool_context, args, call_id, _never), CallPending)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        call_id = tool_context.function_call_id
        if not call_id:
            raise ConfigurationError(f"{self.name}: ADK gave the call no id; Sagacity journals calls by id")
        presented, edited = _presented(args, tool_context.tool_confirmation)
        ran: list[bool] = []

        async def invoke() -> Any:
            ran.append(True)
            token = _running.set(call_id)
            try:
                return await FunctionTool.run_async(self, args=presented, tool_context=tool_context)
            finally:
                _running.reset(token)

        outcome = await self._journaled(tool_context, presented, call_id, invoke, edited)
        if isinstance(outcome, CallPending | CallRejected | CallRefused):
            return {"error": outcome.message}  # nothing ran: the model is told
        if not ran and isinstance(outcome, str):
            return _replayed(outcome)
        return outcome

    async def _journaled(
        self,
        ctx: ToolContext,
        args: dict[str, Any],
        call_id: str,
        invoke: Callable[[], Any],
        edited: bool = False,
    ) -> Any:
        """The call journaled in the live saga, or in the adapter's entered for the call."""
        async with self.adapter._saga(ctx):
            return await framework.journaled_call_async(
                self.spec,
                framework.arguments_json(args),
                call_id,
                invoke,
                edited=edited,
                on_reject=self.adapter.on_reject,
                wait=self.adapter.wait,
            )


def _presented(args: dict[str, Any], confirmation: ToolConfirmation | None) -> tuple[dict[str, Any], bool]:
    """The arguments the call runs with, and whether the reply edited them: a confirmation whose
    payload is ``{"args": {...}}`` other than the call's."""
    payload = confirmation.payload if confirmation is not None else None
    if isinstance(payload, dict) and isinstance(payload.get("args"), dict):
        edit = dict(payload["args"])
        if framework.arguments_json(edit) != framework.arguments_json(args):
            return edit, True
    return args, False


def _replayed(result: str) -> Any:
    """A journaled result as the tool first returned it: a mapping journaled as JSON is given
    back as one (ADK answers the model with mappings as they are, anything else as text)."""
    try:
        parsed = json.loads(result)
    except ValueError:
        return result
    return parsed if isinstance(parsed, dict) else result


def _never() -> Any:
    raise AssertionError("an IRREVERSIBLE tool's first presentation is gated; it never runs here")


def confirmation_message(
    sagacity: Sagacity,
    session: Session,
    *,
    saga_id: str | None = None,
    others: Mapping[str, ToolConfirmation] | None = None,
) -> types.Content | None:
    """The reply to the session's open tool confirmations, decided in Sagacity alone: send it as
    the run's ``new_message`` (``Runner.run_async(..., new_message=...)``).

    ``confirmed`` only for calls whose gate a named human approved in the journal (the tool then
    checks the re-presented arguments against the approved hash); ``confirmed=False`` for a gate
    rejected under ``on_reject="continue"`` (the model is told who and why). Returns None while
    any Sagacity call is still pending (nothing to send yet). Raises ``ApprovalRefusedError`` when
    a gate was rejected and the saga compensated; ``SagaRunningElsewhereError`` (not an
    ``ApprovalError``) while an approved call is still running in a living process (send the reply
    once it has ended); ``SagaStateError`` for one left in doubt by a process that died.
    ``saga_id``: the saga, when it is not the session's id. ``others``: replies, by confirmation
    call id, for confirmations of tools that are not Sagacity's (else left unanswered).
    """
    saga = saga_id or session.id
    replies: dict[str, ToolConfirmation] = {}
    pending = False
    for request_id, call_id in _open_confirmations(session):
        if others is not None and request_id in others:
            replies[request_id] = others[request_id]
            continue
        record = framework.find_call(sagacity, saga, call_id)
        if record is None:
            continue  # not a Sagacity call: the application decides it (others=)
        answer = framework.awaited_answer(record)
        if answer == "pending":
            pending = True
        else:
            replies[request_id] = ToolConfirmation(confirmed=answer == "approved")
    if pending or not replies:
        return None
    parts = [
        types.Part(
            function_response=types.FunctionResponse(
                name=CONFIRMATION_CALL,
                id=request_id,
                response=reply.model_dump(by_alias=True, exclude_none=True),
            )
        )
        for request_id, reply in replies.items()
    ]
    return types.Content(role="user", parts=parts)


def _open_confirmations(session: Session) -> list[tuple[str, str]]:
    """(confirmation call id, original call id) of each confirmation request whose call has no
    result yet: not answered, or answered and the call's response never saved (its process
    died, or is still running it) — as ADK itself tells a consumed confirmation from an open one."""
    requests: dict[str, str] = {}
    answered: dict[str, int] = {}
    results: dict[str, int] = {}
    for index, event in enumerate(session.events):
        for call in event.get_function_calls():
            original = (call.args or {}).get("originalFunctionCall")
            if call.name == CONFIRMATION_CALL and call.id and isinstance(original, dict):
                requests[call.id] = str(original.get("id") or "")
        for response in event.get_function_responses():
            if not response.id:
                continue
            if event.author == "user" and response.name == CONFIRMATION_CALL:
                answered[response.id] = index
            elif event.author != "user" or response.name != CONFIRMATION_CALL:
                results[response.id] = index
    return [
        (request_id, call_id)
        for request_id, call_id in requests.items()
        if call_id and (request_id not in answered or results.get(call_id, -1) < answered[request_id])
    ]
