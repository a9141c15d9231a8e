"""Microsoft Agent Framework: every call of a Sagacity tool journaled, IRREVERSIBLE ones approved
in Sagacity through the framework's own function approvals.

::

    saga = SagacityAgentTools(sg)
    agent = Agent(client=client, tools=saga.wrap([reserve_inventory, send_wire_transfer]),
                  middleware=saga.middleware)

:meth:`SagacityAgentTools.wrap` makes ``FunctionTool`` s of Sagacity ``@tool`` functions (or takes
``FunctionTool`` s of them) and gives each IRREVERSIBLE one ``approval_mode="always_require"``.
:attr:`SagacityAgentTools.middleware` is an agent middleware and a function middleware:

- the agent middleware runs ``agent.run`` as a stretch of the saga (the session's ``session_id``
  is the saga id) and, when the run pauses with ``function_approval_request`` contents
  (``response.user_input_requests``), journals the gate (AWAITING_APPROVAL) of each Sagacity call;
- the function middleware journals each call under the model's ``call_id``. A call presented with
  a ``function_approval_response`` runs only if a named human approved exactly its arguments in
  Sagacity: an approval given in the framework alone pauses the run again (the same request).

A named human decides in Sagacity (``sg.approve`` / ``sg.reject``, the CLI, the HTTP API); the
application loads the saved ``AgentSession`` in any process and answers the requests with
:func:`approval_responses`, built from the journal alone. Sagacity fills the framework's gaps:

- **a rejection is final.** A call rejected in the journal is never run and never asked for
  again: an ``approved=True`` response for it (a session saved before the rejection, or forged)
  runs nothing; the same tool with the same arguments requested again in the saga (the model
  retrying) gets no new gate and is answered with the journal's rejection.
- **the approver is the journal's.** A ``function_approval_response`` names nobody (or whoever the
  caller wrote into it); only an APPROVED entry, naming the human, lets a call run.
- the session's stored request edited to change the arguments is refused (REJECTED, the saga
  compensated, nothing runs); arguments changed after approval by a function middleware (the
  framework's "replacement approval") are gated anew and need their own approval in Sagacity;
  a call presented again (a replayed or re-run session) returns its journaled result.
- Refusals end the run: ``agent.run`` raises Sagacity's error (``SagaClosedError``,
  ``ApprovalRefusedError``, ``PayloadMismatchError``; ``SagaRunningElsewhereError`` while the
  approved call runs in another living process — nothing refused, the saga not compensated).
- ``on_reject``: ``"compensate"`` (default) — a rejection compensates the saga and
  :func:`approval_responses` raises; ``"continue"`` — nothing is compensated and the model is told
  who rejected the call and why.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from sagacity import Sagacity, SagaView, framework
from sagacity.errors import ConfigurationError, SagacityError, SagaNotFoundError
from sagacity.framework import CallPending, CallRefused, CallRejected
from sagacity.integrations._adapter import Adapter, named_saga
from sagacity.model import ApprovalGate
from sagacity.tools import ToolSpec

try:
    from agent_framework import (
        AgentContext,
        AgentMiddleware,
        Content,
        FunctionInvocationContext,
        FunctionMiddleware,
        FunctionTool,
        MiddlewareFailure,
        MiddlewareTermination,
        tool,
    )
    from agent_framework.exceptions import UserInputRequiredException
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigurationError(
        "sagacity.integrations.agent_framework needs Microsoft Agent Framework: "
        "pip install 'sagacity[agent-framework]'"
    ) from exc

__all__ = ["CONTROL_FLOW", "SagacityAgentTools", "approval_responses"]

#: What a tool raises to steer the framework's loop (stop it, ask the user): not a failure.
CONTROL_FLOW: tuple[type[BaseException], ...] = (MiddlewareTermination, UserInputRequiredException)

Next = Callable[[], Awaitable[None]]


class SagacityAgentTools(Adapter[Any]):
    """Wrap an agent's tools and give it the middleware that journals them (module doc)."""

    def __init__(self, sagacity: Sagacity, **options: Any) -> None:
        super().__init__(sagacity, **options)
        self.middleware: list[AgentMiddleware | FunctionMiddleware] = [
            _RunMiddleware(self),
            _CallMiddleware(self),
        ]

    # -- wrapping -----------------------------------------------------------------------------------
    def wrap(self, tools: Iterable[Any]) -> list[Any]:
        """The tools, each Sagacity tool a ``FunctionTool`` (IRREVERSIBLE ones always requiring
        the framework's approval); other tools are returned as given."""
        return [self.wrap_one(each) for each in tools]

    def wrap_one(self, given: Any) -> Any:
        """One tool: a Sagacity ``@tool`` function, or a ``FunctionTool`` of one."""
        if isinstance(given, FunctionTool):
            spec = self.spec(given.name, getattr(given, "func", None))
            if spec is None or not spec.irreversible or given.approval_mode == "always_require":
                return given
            gated = copy.copy(given)  # the caller's tool is left as it was
            gated.approval_mode = "always_require"
            return gated
        spec = framework.spec_of(given)
        if spec is None:
            return given
        if spec.irreversible:
            return tool(given, name=spec.name, approval_mode="always_require")
        return tool(given, name=spec.name, approval_mode="never_require")

    def spec(self, name: str | None, function: Any = None) -> ToolSpec | None:
        """The Sagacity tool behind a framework tool (its function, else its name)."""
        found = framework.spec_of(function) if function is not None else None
        if found is None and name is not None:
            found = framework.spec_of(name=name, registry=self.registry or self.sagacity.registry)
        return found

    # -- the saga -----------------------------------------------------------------------------------
    def _saga_id(self, ctx: Any) -> str:
        named = named_saga(self.saga_id, ctx)
        if named is not None:
            return named
        session = getattr(ctx, "session", None)
        if session is not None:
            return str(session.session_id)
        raise ConfigurationError(
            "SagacityAgentTools needs a saga id: run the agent with a session (agent.run(..., "
            "session=...)), pass saga_id=, or run it inside sg.saga(...)"
        )

    def options(self, edited: bool = False) -> dict[str, Any]:
        return {"edited": edited, "on_reject": self.on_reject, "wait": self.wait}


class _RunMiddleware(AgentMiddleware):
    """``agent.run`` as a stretch of the saga; the gates of the requests it paused on journaled."""

    def __init__(self, owner: SagacityAgentTools) -> None:
        self.owner = owner

    async def process(self, context: AgentContext, call_next: Next) -> None:
        if context.stream:
            raise ConfigurationError(
                "SagacityAgentTools journals non-streaming runs: call agent.run(..., stream=False)"
            )
        async with self.owner._saga(context):
            try:
                await call_next()
            except MiddlewareFailure as exc:
                if isinstance(exc.__cause__, SagacityError):
                    raise exc.__cause__ from None  # Sagacity's refusal, as itself (the saga sees it)
                raise
            result = context.result
            for request in getattr(result, "user_input_requests", None) or ():
                await self._gate(request)

    async def _gate(self, request: Content) -> None:
        """Journal the gate of a Sagacity call the framework paused on, unless the journal knows
        the call already, or rejected the same payload before (never asked for again)."""
        call = request.function_call
        if request.type != "function_approval_request" or call is None or call.call_id is None:
            return
        spec = self.owner.spec(call.name)
        if spec is None:
            return
        journaled = framework.arguments_json(call.parse_arguments())
        saga_id = framework.current_saga_id()
        assert saga_id is not None
        view = await _view(self.owner.sagacity, saga_id)
        if view is not None and (
            view.find(call.call_id) is not None or _rejected(view, spec.name, journaled)
        ):
            return
        await framework.journaled_call_async(spec, journaled, call.call_id, _never, **self.owner.options())


class _CallMiddleware(FunctionMiddleware):
    """Each call of a Sagacity tool journaled under the model's call id, run at most once."""

    def __init__(self, owner: SagacityAgentTools) -> None:
        self.owner = owner

    async def process(self, context: FunctionInvocationContext, call_next: Next) -> None:
        owner = self.owner
        spec = owner.spec(context.function.name, getattr(context.function, "func", None))
        call_id = context.metadata.get("call_id")
        if spec is None or not isinstance(call_id, str):
            await call_next()
            return
        arguments = _plain(context.arguments)
        approval = context.metadata.get("approval_response")
        approved = approval.function_call if approval is not None else None
        # Arguments other than those the framework's approval was given for: changed after the
        # approval (a middleware's edit), gated anew. A session edited to change the stored
        # request changes both: no edit, and the journaled hash refuses it.
        edited = approved is not None and arguments != (approved.parse_arguments() or {})
        journaled = framework.arguments_json(arguments)
        ran: list[bool] = []

        async def run() -> Any:
            ran.append(True)
            await call_next()
            return _text(context.result)

        async with owner._saga(context):
            earlier = await self._rejected_before(spec, journaled, call_id) if spec.irreversible else None
            if earlier is not None:
                context.result = _rejection_text(earlier)  # asked and rejected before: final
                return
            try:
                outcome = await framework.journaled_call_async(
                    spec, journaled, call_id, run, control_flow=CONTROL_FLOW, **owner.options(edited)
                )
            except SagacityError as exc:
                if ran:
                    raise
                raise MiddlewareFailure(str(exc)) from exc  # refused: ends the run, nothing ran
        if ran:
            return  # context.result is what the tool returned, as the framework made it
        if isinstance(outcome, CallPending):
            # Not approved in Sagacity (or edited): pause through the framework's approval again.
            occurrence = context.metadata.get("function_call_occurrence_id")
            call = Content.from_function_call(
                call_id, context.function.name, arguments=arguments, id=occurrence
            )
            request_id = approval.id if approval is not None else occurrence or call_id
            context.result = Content.from_function_approval_request(id=request_id, function_call=call)
        elif isinstance(outcome, CallRejected | CallRefused):
            context.result = outcome.message
        else:
            context.result = str(outcome)  # replayed: the journaled result, nothing ran again

    async def _rejected_before(self, spec: ToolSpec, journaled: str, call_id: str) -> ApprovalGate | None:
        """The rejected gate of these arguments, for a call id the journal does not know yet."""
        saga_id = framework.current_saga_id()
        assert saga_id is not None
        view = await _view(self.owner.sagacity, saga_id)
        if view is None or view.find(call_id) is not None:
            return None
        return _rejected(view, spec.name, journaled)


def approval_responses(sagacity: Sagacity, saga_id: str, requests: Sequence[Content]) -> list[Content] | None:
    """The ``function_approval_response`` contents answering ``requests`` (the paused run's
    ``user_input_requests``), decided in Sagacity alone.

    ``approved=True`` only for calls a named human approved in the journal (the call then checks
    the arguments the session presents against the approved hash); ``approved=False`` for a call
    rejected under ``on_reject="continue"`` and for one whose tool and arguments were rejected
    before in the saga. Returns None while any Sagacity call is still pending (nothing to resume
    yet). Raises ``ApprovalRefusedError`` when a call was rejected and the saga compensated;
    ``SagaRunningElsewhereError`` (not an ``ApprovalError``) while an approved call is still
    running in a living process (resume once it has ended); ``SagaStateError`` for one left in
    doubt. Requests that are not Sagacity calls are left out: the application answers them.
    """
    try:
        view: SagaView | None = sagacity.view(saga_id, allow_blocking=True)
    except SagaNotFoundError:
        view = None
    responses: list[Content] = []
    pending = False
    for request in requests:
        call = request.function_call
        if request.type != "function_approval_request" or call is None or call.call_id is None:
            continue
        record = framework.call_record(view, call.call_id) if view is not None else None
        if record is None:
            earlier = _rejected(view, call.name, framework.arguments_json(call.parse_arguments()))
            if earlier is not None:
                responses.append(request.to_function_approval_response(approved=False))
            continue  # not a Sagacity call: the application decides it
        answer = framework.awaited_answer(record)
        if answer == "pending":
            pending = True
        else:
            responses.append(request.to_function_approval_response(approved=answer == "approved"))
    return None if pending else responses


async def _view(sagacity: Sagacity, saga_id: str) -> SagaView | None:
    try:
        return await asyncio.to_thread(sagacity.view, saga_id)
    except SagaNotFoundError:
        return None


def _rejected(view: SagaView | None, tool_name: str | None, input: str) -> ApprovalGate | None:
    """A gate of the same tool and arguments that a human rejected in this saga, if any."""
    if view is None:
        return None
    for gate in view.gates:
        if gate.tool_name == tool_name and gate.input == input and gate.rejection is not None:
            return gate
    return None


def _rejection_text(gate: ApprovalGate) -> str:
    rejection = gate.rejection
    who = rejection.approver if rejection is not None and rejection.approver else "a human"
    reason = f" ({rejection.reason})" if rejection is not None and rejection.reason else ""
    return (
        f"[REJECTED] {gate.tool_name} did not run: {who} rejected these arguments before{reason} "
        f"(request {gate.seq}); a rejection is final"
    )


def _plain(arguments: Any) -> dict[str, Any]:
    """The call's arguments as a plain mapping (the framework may hold a pydantic model)."""
    dump = getattr(arguments, "model_dump", None)
    if callable(dump):
        return dict(dump(mode="json"))
    return dict(arguments) if isinstance(arguments, Mapping) else {}


def _text(result: Any) -> Any:
    """What the journal records of a tool's result as the framework made it: its text."""
    if isinstance(result, list) and all(isinstance(item, Content) for item in result):
        texts = [item.text for item in result if item.type == "text" and item.text is not None]
        if len(texts) == len(result):
            return "".join(texts)
    return result


def _never() -> Any:
    raise AssertionError("a gate journaled after the framework paused never runs its tool")
