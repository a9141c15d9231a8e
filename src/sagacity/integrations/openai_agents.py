"""OpenAI Agents SDK: every call of a Sagacity tool journaled, IRREVERSIBLE ones approved in Sagacity.

::

    tools = SagacityTools(sg, saga_id="order-123")
    agent = Agent(name="orders", model=model, tools=tools.wrap([reserve_inventory, send_wire_transfer]))

:meth:`SagacityTools.wrap` takes Sagacity ``@tool`` functions (made ``FunctionTool`` s with the
SDK's ``function_tool``) or ``FunctionTool`` s of them, and returns ``FunctionTool`` s whose calls
are journaled under the model's ``call_id``. The journal sits *inside* the SDK's failure handler:
the tool's exception is journaled FAILED (the saga compensates) before the handler — the SDK's
default one included, which turns it into a fixed "An error occurred while running the tool" —
makes text of it for the model.

An IRREVERSIBLE tool gets a ``needs_approval`` of Sagacity's: the call's gate (AWAITING_APPROVAL)
is journaled and the run pauses with an interruption (``result.interruptions``). A named human
decides in Sagacity (``sg.approve``/``sg.reject``, the CLI, the HTTP API); the application loads
the saved ``RunState`` in any process and calls :func:`approve_in_state`, which approves in the
state only what Sagacity approved. Before the tool runs, its arguments — as the resumed state
presents them — are checked against the approved hash: other arguments (a ``RunState.to_string()``
edited, its checksum recomputed) are refused (REJECTED, the saga compensates, nothing runs). A
state resumed again returns the journaled result: nothing runs twice. An approval given in the
``RunState`` alone (``state.approve`` without Sagacity, ``always_approve=True``) approves nothing:
the tool does not run and the model is told it waits for approval.

- The journaled input is the arguments as compact JSON, in the model's key order, parsed as the
  SDK parses them: ``needs_approval`` is given parsed arguments, not the model's text, so the
  gate and the call are journaled (and hashed) in the same canonical form.
- The saga id: the saga live in the context if any (``async with sg.saga(...)`` around
  ``Runner.run``), else ``saga_id=`` (a str, or a function of the ``RunContextWrapper``). Without
  a live saga each call enters the saga for its own duration, so a failed call compensates the
  saga at once.
- Refusals are not tool failures and skip the failure handler: a compensated saga
  (``SagaClosedError``), a rejected gate (``ApprovalRefusedError``), other arguments than the
  approved ones (``PayloadMismatchError``) end the run with the error.
- ``on_reject``: ``"compensate"`` (default) — a rejection compensates the saga and
  :func:`approve_in_state` raises; ``"continue"`` — nothing is compensated and the call is rejected
  in the state with a message saying who rejected it and why.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from sagacity import framework
from sagacity.errors import ConfigurationError
from sagacity.framework import CallPending, CallRefused, CallRejected
from sagacity.integrations._adapter import Adapter, named_saga
from sagacity.tools import ToolSpec

try:
    from agents import FunctionTool, RunContextWrapper, RunState, function_tool
    from agents.items import ToolApprovalItem
    from agents.tool import (
        maybe_invoke_function_tool_failure_error_function,
        set_function_tool_failure_error_function,
    )
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigurationError(
        "sagacity.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'sagacity[openai-agents]'"
    ) from exc

from sagacity import CallStatus, Sagacity

__all__ = ["SagacityTools", "approve_in_state"]


class SagacityTools(Adapter[RunContextWrapper[Any]]):
    """Wrap ``FunctionTool`` s so every call of a Sagacity tool is journaled and IRREVERSIBLE ones
    are approved in Sagacity (module doc)."""

    # -- wrapping -----------------------------------------------------------------------------------
    def wrap(self, tools: Iterable[Any]) -> list[Any]:
        """The tools, each Sagacity tool wrapped (a function becomes ``function_tool(fn)`` first);
        other tools are returned as given."""
        return [self.wrap_one(tool) for tool in tools]

    def wrap_one(self, tool: Any) -> Any:
        """One tool: a Sagacity ``@tool`` function or a ``FunctionTool`` of one, journaled."""
        if not isinstance(tool, FunctionTool):
            spec = framework.spec_of(tool)
            if spec is None:
                return tool
            tool = function_tool(tool, name_override=spec.name)
        spec = self._spec(tool)
        if spec is None:
            return tool
        # The SDK's invoker without its failure handler: the tool's exception reaches the journal.
        raw = copy.copy(tool)
        set_function_tool_failure_error_function(raw, None)
        wrapped = copy.copy(tool)
        wrapped.on_invoke_tool = self._invoker(spec, raw, wrapped)
        if spec.irreversible:
            wrapped.needs_approval = self._needs_approval(spec)
        return wrapped

    def _spec(self, tool: FunctionTool) -> ToolSpec | None:
        try:
            found = framework.spec_of(tool.__wrapped__)
        except AttributeError:
            found = None
        return found or framework.spec_of(name=tool.name, registry=self.registry or self.sagacity.registry)

    # -- the saga -----------------------------------------------------------------------------------
    def _saga_id(self, ctx: RunContextWrapper[Any]) -> str:
        named = named_saga(self.saga_id, ctx)
        if named is not None:
            return named
        raise ConfigurationError(
            "SagacityTools needs a saga id: pass saga_id= or run inside `async with sg.saga(...)`"
        )

    # -- the hooks ----------------------------------------------------------------------------------
    def _invoker(
        self, spec: ToolSpec, raw: FunctionTool, wrapped: FunctionTool
    ) -> Callable[[ToolContext[Any], str], Awaitable[Any]]:
        async def invoke(ctx: ToolContext[Any], input: str) -> Any:
            ran: list[bool] = []

            async def run() -> Any:
                ran.append(True)
                return await raw.on_invoke_tool(ctx, input)

            try:
                async with self._saga(ctx):
                    outcome = await framework.journaled_call_async(
                        spec,
                        canonical(input),
                        ctx.tool_call_id,
                        run,
                        on_reject=self.on_reject,
                        wait=self.wait,
                    )
            except Exception as exc:
                if not ran:
                    raise  # Sagacity refused the call: not the tool's failure, nothing ran
                # The tool failed (journaled FAILED; the saga compensates): the SDK's handler
                # makes the model's text of it, or re-raises when the tool has none.
                message = await maybe_invoke_function_tool_failure_error_function(
                    function_tool=wrapped, context=ctx, error=exc
                )
                if message is None:
                    raise
                return message
            if isinstance(outcome, CallPending | CallRejected | CallRefused):
                return outcome.message  # nothing ran: the model is told
            return outcome

        return invoke

    def _needs_approval(
        self, spec: ToolSpec
    ) -> Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]:
        async def needs_approval(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
            """True while the call's gate waits in Sagacity (journaled here on first sight).

            Anything else — approved, executed, rejected, refused — goes to the invoker, which
            runs it in band, replays it, or refuses it, on the journal alone."""
            async with self._saga(ctx):
                saga_id = framework.current_saga_id()
                assert saga_id is not None
                record = await asyncio.to_thread(framework.find_call, self.sagacity, saga_id, call_id)
                if record is not None:
                    return record.status is CallStatus.AWAITING_APPROVAL
                outcome = await framework.journaled_call_async(
                    spec,
                    framework.arguments_json(params),
                    call_id,
                    _never,
                    on_reject=self.on_reject,
                    wait=self.wait,
                )
            return isinstance(outcome, CallPending)

        return needs_approval


def canonical(arguments: str) -> str:
    """The journaled input of a call: the model's arguments as compact JSON, in its key order —
    what ``needs_approval`` sees, parsed, re-serialised the same way."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return arguments  # not JSON: journaled verbatim; the SDK reports the error
    return framework.arguments_json(parsed) if isinstance(parsed, dict) else arguments


def _never() -> Any:
    raise AssertionError("an IRREVERSIBLE tool's first presentation is gated; it never runs here")


def approve_in_state(
    sagacity: Sagacity, saga_id: str, state: RunState[Any, Any]
) -> RunState[Any, Any] | None:
    """Decide the state's interruptions from the journal alone, and return the state to resume.

    Approves (``state.approve``, never ``always_approve``) only calls whose gate a named human
    approved in Sagacity — the tool then checks the re-presented arguments against the approved
    hash; rejects, with who and why, a gate rejected under ``on_reject="continue"``. Returns None
    while any Sagacity call is still pending (nothing to resume yet). Raises
    ``ApprovalRefusedError`` when a gate was rejected and the saga compensated;
    ``SagaRunningElsewhereError`` (not an ``ApprovalError``) while an approved call is still
    running in a living process (resume once it has ended); ``SagaStateError`` for one left in
    doubt by a process that died. Interruptions of
    tools that are not Sagacity's (no gate for their call id) are left for the application.
    """
    pending = False
    for item in state.get_interruptions():
        if not isinstance(item, ToolApprovalItem):
            continue
        call_id = getattr(item.raw_item, "call_id", None)
        if not isinstance(call_id, str):
            continue
        record = framework.find_call(sagacity, saga_id, call_id)
        if record is None:
            continue  # not a Sagacity call: the application decides it
        answer = framework.awaited_answer(record)
        if answer == "approved":
            state.approve(item)
        elif answer == "pending":
            pending = True
        else:
            who = f"{record.rejected_by} rejected it" if record.rejected_by else "the approval was refused"
            reason = f" ({record.reason})" if record.reason else ""
            state.reject(item, rejection_message=f"[REJECTED] {record.tool_name} did not run: {who}{reason}.")
    return None if pending else state
