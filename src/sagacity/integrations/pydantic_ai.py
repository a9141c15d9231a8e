"""Pydantic AI: every call of a Sagacity tool journaled, IRREVERSIBLE ones approved in Sagacity.

::

    agent = Agent(model, tools=[reserve_inventory, send_wire_transfer],
                  capabilities=[SagacityCapability(sg)])

``SagacityCapability`` (a Pydantic AI capability) journals each call of a tool that is a Sagacity
``@tool`` (found by name) under the model's ``tool_call_id``, with the arguments as the JSON the
model sent. An IRREVERSIBLE tool raises ``ApprovalRequired``, so the run ends with
``DeferredToolRequests``; a named human approves in Sagacity (``sg.approve``, the CLI, the HTTP
API); :func:`deferred_results` then builds the ``DeferredToolResults`` — ``ToolApproved`` only
for calls approved in Sagacity — and the run resumed from its message history, in any process,
executes the call in band, once, and only with exactly the approved arguments.

- The saga id: the saga live in the context if any (``async with sg.saga(...)``), else
  ``saga_id=`` (a str, or a function of the ``RunContext``), else the run's ``conversation_id``
  (carried by the message history, so a resumed run re-enters the same saga).
- ``ModelRetry``, ``CallDeferred``, ``ApprovalRequired``, ``SkipToolExecution`` and the
  framework's retry/failure signals raised inside a tool are control flow: they close the call
  (``FAILED`` ``control flow: ...``) without failing the saga. Any other exception — ``ToolFailed``
  too — is a failure: the saga compensates when the run ends.
- ``override_args`` that change the approved arguments are not approved by the framework's
  approval: the gate is superseded and the edited call needs its own approval in Sagacity. A
  message history edited to change the arguments is refused (REJECTED, compensated).
- ``on_reject``: ``"compensate"`` (default) — a rejection compensates the saga and the run
  cannot go on in it; ``"continue"`` — the gate is journaled ``on_reject=continue``, a rejection
  compensates nothing, and the model is told (``ToolDenied`` with the approver and reason).
- Tools that are not Sagacity tools run as Pydantic AI runs them, unjournaled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sagacity import framework
from sagacity.errors import ApprovalRefusedError, ConfigurationError
from sagacity.framework import CallPending, CallRefused, CallRejected
from sagacity.integrations._adapter import named_saga
from sagacity.tools import ToolRegistry

try:
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import (
        ApprovalRequired,
        CallDeferred,
        ModelRetry,
        SkipToolExecution,
        ToolRetryError,
    )
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
except ImportError as exc:  # pragma: no cover - exercised by the extra-less install test
    raise ConfigurationError(
        "sagacity.integrations.pydantic_ai needs Pydantic AI: pip install 'sagacity[pydantic-ai]'"
    ) from exc

try:
    from pydantic_ai.exceptions import ToolFailedError
except ImportError:  # pragma: no cover - older releases
    ToolFailedError = ToolRetryError  # type: ignore[misc,assignment]

from sagacity import Sagacity

__all__ = ["CONTROL_FLOW", "SagacityCapability", "deferred_results"]

#: Exceptions a tool (or a hook) raises to steer the run: not failures of the saga.
CONTROL_FLOW: tuple[type[BaseException], ...] = (
    ModelRetry,
    CallDeferred,
    ApprovalRequired,
    SkipToolExecution,
    ToolRetryError,
    ToolFailedError,
)

SagaIdSource = str | Callable[[RunContext[Any]], str] | None


@dataclass
class SagacityCapability(AbstractCapability[Any]):
    """Journal every Sagacity tool the agent calls; gate IRREVERSIBLE ones through Sagacity."""

    sagacity: Sagacity
    saga_id: SagaIdSource = None
    on_reject: Literal["compensate", "continue"] = "compensate"
    wait: float = 60.0
    registry: ToolRegistry | None = field(default=None, repr=False)

    def _saga_id(self, ctx: RunContext[Any]) -> str:
        named = named_saga(self.saga_id, ctx)
        if named is not None:
            return named
        if ctx.conversation_id:
            return ctx.conversation_id
        raise ConfigurationError(
            "SagacityCapability needs a saga id: pass saga_id= or run inside sg.saga(...)"
        )

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> Any:
        """The run is a stretch of a saga: entered (or re-entered) for the run, concluded after."""
        if framework.current_saga_id() is not None:
            return await handler()
        async with self.sagacity.saga(self._saga_id(ctx), continue_existing=True):
            return await handler()

    async def wrap_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: Any, args: dict[str, Any], handler: Any
    ) -> Any:
        spec = framework.spec_of(name=tool_def.name, registry=self.registry or self.sagacity.registry)
        if spec is None:
            return await handler(args)
        arguments = framework.arguments_json(call.args)
        outcome = await framework.journaled_call_async(
            spec,
            arguments,
            call.tool_call_id,
            lambda: handler(args),
            edited=_edited(ctx, call, arguments),
            on_reject=self.on_reject,
            control_flow=CONTROL_FLOW,
            wait=self.wait,
        )
        if isinstance(outcome, CallPending):
            request = outcome.request
            raise ApprovalRequired(
                metadata={
                    "sagacity": {
                        "saga_id": request.saga_id,
                        "seq": request.journal_seq,
                        "input_hash": request.input_hash,
                        "call_id": outcome.call_id,
                    }
                }
            )
        if isinstance(outcome, CallRejected | CallRefused):
            return outcome.message
        return outcome


def _edited(ctx: RunContext[Any], call: ToolCallPart, arguments: str) -> bool:
    """Whether the framework runs the call with arguments other than the model sent in the
    message history (``ToolApproved(override_args=...)``): an edit, needing its own approval.

    A history edited to change the arguments is *not* an edit: the call's arguments and the
    history's agree, and differ from the approved ones, so the call is refused.
    """
    for message in reversed(ctx.messages):
        if not isinstance(message, ModelResponse):
            continue
        for part in message.parts:
            if isinstance(part, ToolCallPart) and part.tool_call_id == call.tool_call_id:
                return framework.arguments_json(part.args) != arguments
    return False


def deferred_results(
    sagacity: Sagacity,
    saga_id: str,
    requests: DeferredToolRequests,
    *,
    others: Mapping[str, Any] | None = None,
) -> DeferredToolResults | None:
    """The ``DeferredToolResults`` to resume a paused run with, decided in Sagacity alone.

    ``ToolApproved`` only for calls whose gate a named human approved in the journal (for the
    journaled arguments; the tool then checks the re-presented ones byte for byte); ``ToolDenied``
    with the approver and reason for a rejected gate journaled ``on_reject=continue``. Returns
    None while any gated call is still pending (nothing to resume yet). Raises
    ``ApprovalRefusedError`` when a gate was rejected and the saga compensated: the run cannot go
    on in it. Raises ``SagaRunningElsewhereError`` (not an ``ApprovalError``) while an approved
    call is still running in a living process: nothing was refused, resume once it has ended;
    ``SagaStateError`` for one left in doubt by a process that died. ``others`` are results for
    deferred calls that are not Sagacity's (merged as given).
    """
    approvals: dict[str, Any] = dict(others or {})
    for part in requests.approvals:
        if part.tool_call_id in approvals:
            continue
        record = framework.find_call(sagacity, saga_id, part.tool_call_id)
        if record is None:
            raise ApprovalRefusedError(
                f"saga {saga_id!r} has no gate for call id {part.tool_call_id!r} ({part.tool_name}); "
                "pass its decision in others= if it is not a Sagacity tool"
            )
        answer = framework.awaited_answer(record)
        if answer == "approved":
            approvals[part.tool_call_id] = ToolApproved()
        elif answer == "pending":
            return None
        else:
            who = f"{record.rejected_by} rejected it" if record.rejected_by else "the approval was refused"
            reason = f" ({record.reason})." if record.reason else "."
            approvals[part.tool_call_id] = ToolDenied(f"The tool call was not approved: {who}{reason}")
    return DeferredToolResults(approvals=approvals)
