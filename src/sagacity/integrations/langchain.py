"""LangChain v1 / LangGraph: every call of a Sagacity tool journaled, IRREVERSIBLE ones approved in
Sagacity, through one middleware hook.

::

    agent = create_agent(model, tools=[reserve_inventory, send_wire_transfer],
                         middleware=[SagacityMiddleware(sg)], checkpointer=checkpointer)
    # or a bare ToolNode:
    mw = SagacityMiddleware(sg)
    ToolNode(tools, wrap_tool_call=mw.wrap_tool_call, awrap_tool_call=mw.awrap_tool_call)

Each call of a tool that is a Sagacity ``@tool`` (found by name) is journaled under the tool call's
``id``, its input the model's arguments as compact JSON. A graph that re-runs a node (resuming,
time travel from an older checkpoint id, a retry policy) presents the same ids again: a call that
ran returns its journaled result, nothing runs twice.

An IRREVERSIBLE tool pauses the graph with ``interrupt({"sagacity": {...}})`` carrying the saga id,
the gate's seq, the payload hash, the call id, the tool and its arguments. A named human decides in
Sagacity (``sg.approve``/``sg.reject``, the CLI, the HTTP API); the application resumes the graph
with ``Command(resume=...)`` — the resume value is *not* an approval: only the journal is. An
approved call runs in band, once, if its arguments are byte-identical to the approved ones; a
checkpoint edited to change them is refused (REJECTED, the saga compensated). A resume value
``{"type": "edit", "args": {...}}`` edits the arguments: the edit is gated anew and needs its own
approval. Still pending after a resume, the graph pauses again.

- The saga id: the saga live in the context if any (``with sg.saga(...)`` around ``invoke``), else
  ``saga_id=`` (a str, or a function of the ``ToolCallRequest``), else the graph's ``thread_id``.
  Without a live saga each call enters the saga for its own duration, so a failed call
  compensates the saga at once (the graph then sees the error).
- LangGraph's control flow (``GraphInterrupt`` and the rest of the ``GraphBubbleUp`` family)
  passes through untouched: a tool that calls ``interrupt()`` itself closes its call as control
  flow and runs again when the graph resumes. A tool error — raised, or turned by the ``ToolNode``
  into an error ``ToolMessage`` — is a failure: the saga compensates.
- A graph resumed while the approved call it would run is still running in another living
  process (a second worker resumed the same thread) raises ``SagaRunningElsewhereError`` out
  of ``invoke`` before anything runs or is journaled: resume again once that call has ended
  (its journaled result is then replayed, nothing runs twice); after that process died mid-call,
  a ``SagaStateError`` says the call is in doubt (resolve it first). Neither is a refusal.
- ``on_reject``: ``"compensate"`` (default): a rejection compensates the saga, and the resumed
  call raises ``ApprovalRefusedError``; ``"continue"``: nothing is compensated and the model gets
  a ``ToolMessage`` saying who rejected the call and why.
- Tools that are not Sagacity tools run untouched; injected arguments (``ToolRuntime``,
  ``InjectedState``, config) are not in the model's arguments, so never journaled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from sagacity import framework
from sagacity.errors import ConfigurationError
from sagacity.framework import CallPending, CallRefused, CallRejected
from sagacity.integrations._adapter import Adapter, named_saga
from sagacity.tools import ToolSpec

try:
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import ToolMessage
    from langgraph.errors import GraphBubbleUp
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import interrupt
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigurationError(
        "sagacity.integrations.langchain needs LangChain and LangGraph: pip install 'sagacity[langchain]'"
    ) from exc

from sagacity import CallStatus

__all__ = ["CONTROL_FLOW", "SagacityMiddleware"]

#: LangGraph's control flow: interrupts, parent commands, drains. Never a failure.
CONTROL_FLOW: tuple[type[BaseException], ...] = (GraphBubbleUp,)

Handler = Callable[[ToolCallRequest], Any]


class _ErrorMessage(Exception):
    """The ToolNode turned a tool's error into a ToolMessage: journaled FAILED, then returned."""

    def __init__(self, message: ToolMessage) -> None:
        super().__init__(str(message.content))
        self.message = message


class SagacityMiddleware(Adapter[ToolCallRequest], AgentMiddleware):
    """Journal every Sagacity tool the agent calls; pause IRREVERSIBLE ones until Sagacity approves."""

    # -- helpers ------------------------------------------------------------------------------------
    def _spec(self, request: ToolCallRequest) -> ToolSpec | None:
        tool = request.tool
        found = framework.spec_of(getattr(tool, "func", None) or getattr(tool, "coroutine", None))
        if found is not None:
            return found
        return framework.spec_of(
            name=request.tool_call["name"], registry=self.registry or self.sagacity.registry
        )

    def _saga_id(self, request: ToolCallRequest) -> str:
        named = named_saga(self.saga_id, request)
        if named is not None:
            return named
        runtime = request.runtime
        config = getattr(runtime, "config", None) or {}
        thread_id = (config.get("configurable") or {}).get("thread_id")
        if thread_id is None:
            raise ConfigurationError(
                "SagacityMiddleware needs a saga id: run the graph with a thread_id, pass saga_id=, "
                "or invoke it inside sg.saga(...)"
            )
        return str(thread_id)

    def _options(self, edited: bool) -> dict[str, Any]:
        return {
            "edited": edited,
            "on_reject": self.on_reject,
            "control_flow": CONTROL_FLOW,
            "wait": self.wait,
        }

    def _decision_so_far(self, spec: ToolSpec, request: ToolCallRequest) -> tuple[dict[str, Any], bool]:
        """The call's arguments, and whether they were edited, before it is presented again.

        A gated call that is still open when its node runs again (the graph is resuming) first
        takes the resume value of the pause it made (``interrupt`` answers at once then; with no
        resume value it pauses again), so an edit decided in the application is applied before
        an approval of the unedited arguments could run them.
        """
        call = request.tool_call
        arguments: dict[str, Any] = dict(call["args"])
        if not spec.irreversible:
            return arguments, False
        inside = framework.current_saga_id()
        saga_id = inside or self._saga_id(request)
        record = framework.find_call(self.sagacity, saga_id, _id(call))
        unfinished = framework.unfinished_error(record) if record is not None and inside is None else None
        if unfinished is not None:
            # The graph resumed while the approved call runs in another living process, or after
            # that process died mid-call: say so before anything is entered here (no saga is
            # left by an error, nothing compensates).
            raise unfinished
        if record is None or record.status not in (CallStatus.AWAITING_APPROVAL, CallStatus.APPROVED):
            return arguments, False
        pause = {
            "sagacity": {
                "saga_id": saga_id,
                "seq": record.seq,
                "input_hash": record.input_hash,
                "call_id": record.call_id,
                "tool": spec.name,
                "args": arguments,
                "message": f"[AWAITING_APPROVAL] {spec.name} waits for approval (request {record.seq})",
            }
        }
        return _decided(interrupt(pause), arguments, False)

    # -- the hook -----------------------------------------------------------------------------------
    def wrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> Any:
        spec = self._spec(request)
        if spec is None:
            return handler(request)
        call = request.tool_call
        arguments, edited = self._decision_so_far(spec, request)
        while True:
            this = _Presented(request, arguments, edited)

            def invoke(this: _Presented = this) -> Any:
                return _content(this.ran, handler(this.request))

            with self._saga(request), this.caught:
                outcome = framework.journaled_call(
                    spec, framework.arguments_json(arguments), _id(call), invoke, **self._options(edited)
                )
            if not this.paused(outcome):
                return this.answer(outcome)
            arguments, edited = _decided(interrupt(_pause(outcome, spec, arguments)), arguments, edited)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        spec = self._spec(request)
        if spec is None:
            return await handler(request)
        call = request.tool_call
        arguments, edited = await asyncio.to_thread(self._decision_so_far, spec, request)
        while True:
            this = _Presented(request, arguments, edited)

            async def invoke(this: _Presented = this) -> Any:
                return _content(this.ran, await handler(this.request))

            async with self._saga(request):
                with this.caught:
                    outcome = await framework.journaled_call_async(
                        spec, framework.arguments_json(arguments), _id(call), invoke, **self._options(edited)
                    )
            if not this.paused(outcome):
                return this.answer(outcome)
            arguments, edited = _decided(interrupt(_pause(outcome, spec, arguments)), arguments, edited)


class _Presented:
    """One presentation of the call to the graph's handler: the request as presented (an edit's
    arguments applied), what the handler returned (``ran``: empty when nothing ran here) and
    what was kept out of the saga's scope (``caught``)."""

    def __init__(self, request: ToolCallRequest, arguments: dict[str, Any], edited: bool) -> None:
        call = request.tool_call
        self.request = request if not edited else request.override(tool_call={**call, "args": arguments})
        self.ran: list[Any] = []
        self.caught = _Caught()

    def paused(self, outcome: Any) -> bool:
        """Whether the call waits for approval (the graph pauses, then presents it again); the
        graph's control flow caught in the saga's scope propagates from here."""
        self.caught.reraise()
        return self.caught.message is None and isinstance(outcome, CallPending)

    def answer(self, outcome: Any) -> Any:
        """What the graph gets for a call that does not wait: the error ToolMessage of a failed
        call, else what ran, was refused or replayed (:func:`_answer`)."""
        if self.caught.message is not None:
            return self.caught.message
        return _answer(outcome, self.ran, self.request)


class _Caught:
    """Kept out of the saga's scope: the graph's control flow (re-raised once the scope is left,
    so it never compensates) and the error ToolMessage of a failed call (journaled FAILED already,
    returned to the graph)."""

    def __init__(self) -> None:
        self.message: ToolMessage | None = None
        self.bubble: BaseException | None = None

    def __enter__(self) -> _Caught:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, _ErrorMessage):
            self.message = exc.message
            return True
        if isinstance(exc, CONTROL_FLOW):
            self.bubble = exc
            return True
        return False

    def reraise(self) -> None:
        if self.bubble is not None:
            raise self.bubble


def _id(call: Any) -> str:
    call_id = call.get("id")
    if not call_id:
        raise ConfigurationError(f"tool call {call.get('name')!r} has no id: Sagacity journals calls by id")
    return str(call_id)


def _content(ran: list[Any], response: Any) -> Any:
    """What the handler returned, kept for the graph; its content is what the journal records.
    An error ToolMessage (the ToolNode handled the tool's exception) is raised: a failure."""
    ran.append(response)
    if isinstance(response, ToolMessage):
        if response.status == "error":
            raise _ErrorMessage(response)
        return response.content
    return response


def _answer(outcome: Any, ran: list[Any], request: ToolCallRequest) -> Any:
    call = request.tool_call
    if ran:
        return ran[-1]  # ran now: the ToolMessage (or Command) the tool produced
    if isinstance(outcome, CallRejected | CallRefused):
        return ToolMessage(
            content=outcome.message, name=call["name"], tool_call_id=call["id"], status="error"
        )
    # a replay: the journaled result, as the ToolMessage the call produced
    return ToolMessage(content=str(outcome), name=call["name"], tool_call_id=call["id"])


def _pause(pending: CallPending, spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """The interrupt's value: what the application shows, and where to decide it (Sagacity)."""
    request = pending.request
    return {
        "sagacity": {
            "saga_id": request.saga_id,
            "seq": request.journal_seq,
            "input_hash": request.input_hash,
            "call_id": pending.call_id,
            "tool": spec.name,
            "args": arguments,
            "message": pending.message,
        }
    }


def _decided(answer: Any, arguments: dict[str, Any], edited: bool) -> tuple[dict[str, Any], bool]:
    """The resume value: only an edit changes anything (the decision itself is the journal's)."""
    if isinstance(answer, dict) and answer.get("type") == "edit" and isinstance(answer.get("args"), dict):
        new = dict(answer["args"])
        if new != arguments:
            return new, True
    return arguments, edited
