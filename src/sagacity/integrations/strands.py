"""AWS Strands Agents: every call of a Sagacity tool journaled, IRREVERSIBLE ones paused through
Strands' own interrupts and approved in Sagacity.

::

    agent = Agent(model=model, tools=SagacityStrandsHooks.wrap([reserve_inventory, send_wire_transfer]),
                  hooks=[SagacityStrandsHooks(sg)],
                  session_manager=FileSessionManager(session_id="order-123"))

``SagacityStrandsHooks`` is a Strands ``HookProvider``. On ``BeforeToolCallEvent`` it finds the
Sagacity ``@tool`` behind the Strands tool (or registered under its name) and selects, for this
call, a tool that journals it under the model's ``toolUseId``: run once however often Strands
presents it (a session restored twice, a resumed interrupt, a hook's retry), the journaled result
returned otherwise. A tool's exception — which Strands turns into an error result for the model —
is journaled FAILED first, and the saga compensates.

An IRREVERSIBLE tool's gate (AWAITING_APPROVAL) is journaled and the hook raises a Strands
interrupt (``event.interrupt``) whose ``reason`` is ``{"sagacity": {saga_id, seq, input_hash,
call_id, tool, args, message}}``: the agent stops with ``stop_reason == "interrupt"``. A named
human decides in Sagacity (``sg.approve``/``sg.reject``, the CLI, the HTTP API); the application
resumes the agent — in any process, from its session — with interrupt responses
(:func:`interrupt_responses` builds them from the journal). **A response approves nothing**: the
call runs only when the journal holds an approval of exactly the arguments presented, and runs in
band, once. Resumed while the gate still waits, the agent pauses again (a new interrupt); a
session edited to change the approved arguments is refused (REJECTED, the saga compensated,
nothing runs). A response ``{"type": "edit", "args": {...}}`` edits the arguments: the edit is
gated anew and needs its own approval.

- The saga id: the saga live in the context if any (``with sg.saga(...)`` around the agent call),
  else ``saga_id=`` (a str, or a function of the ``BeforeToolCallEvent``), else the agent's
  ``session_id`` — its session manager's, so a session restored in another process re-enters the
  same saga (without a session manager Strands makes one up per ``Agent`` instance). Without a
  live saga each call enters the saga for its own duration, so a failed call compensates the
  saga at once.
- Sagacity's refusals end the agent call with the error instead of becoming text for the model:
  a compensated saga (``SagaClosedError``), a rejected gate (``ApprovalRefusedError``), other
  arguments than the approved ones (``PayloadMismatchError``), a call still running in another
  living process (``SagaRunningElsewhereError``: nothing was decided, resume once it has ended) or
  left in doubt by one that died (``SagaStateError``).
- ``on_reject``: ``"compensate"`` (default): a rejection compensates the saga and the resumed
  agent raises ``ApprovalRefusedError``; ``"continue"``: nothing is compensated and the call is
  cancelled with a message saying who rejected it and why.
- A tool that raises its own interrupt (``tool_context.interrupt``) closes its call as control
  flow: it runs again, journaled anew, when the agent resumes. Tools that are not Sagacity tools
  run untouched.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import count
from typing import Any, Literal

from sagacity import framework
from sagacity.errors import ApprovalRefusedError, ConfigurationError, SagaNotFoundError
from sagacity.framework import CallPending, CallRecord, CallRefused, CallRejected
from sagacity.integrations._adapter import Adapter, named_saga
from sagacity.tools import ToolSpec

try:
    from strands import tool as strands_tool
    from strands.hooks import AfterToolCallEvent, BeforeToolCallEvent, HookRegistry
    from strands.interrupt import Interrupt
    from strands.types.events import ToolResultEvent
    from strands.types.tools import AgentTool, ToolGenerator, ToolResult, ToolUse
    from strands.types.tools import ToolSpec as StrandsToolSpec
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigurationError(
        "sagacity.integrations.strands needs AWS Strands Agents: pip install 'sagacity[strands]'"
    ) from exc

from sagacity import CallStatus, Sagacity

__all__ = ["INTERRUPT", "SagacityStrandsHooks", "interrupt_responses"]

#: The name of Sagacity's interrupts, numbered: ``sagacity-approval:1``, then one more each time a
#: resumed call still waits (an answered interrupt answers again, so a new pause needs a new name).
INTERRUPT = "sagacity-approval"


class _ToolInterrupted(Exception):
    """The tool raised a Strands interrupt itself: control flow, its call closes and runs again."""

    def __init__(self, event: Any) -> None:
        super().__init__("the tool raised an interrupt")
        self.event = event


class _ErrorResult(Exception):
    """The tool gave Strands an error result: journaled FAILED, the result returned as it is."""


class SagacityStrandsHooks(Adapter[BeforeToolCallEvent]):
    """Journal every Sagacity tool a Strands agent calls; pause IRREVERSIBLE ones with a Strands
    interrupt until a named human approves exactly their arguments in Sagacity (module doc)."""

    # -- wiring -------------------------------------------------------------------------------------
    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Strands' ``HookProvider``: the gate before each call, refusals raised after it."""
        registry.add_callback(BeforeToolCallEvent, self._before_tool_call)
        registry.add_callback(AfterToolCallEvent, self._after_tool_call)

    @staticmethod
    def wrap(tools: Iterable[Any]) -> list[Any]:
        """The tools for ``Agent(tools=...)``: a Sagacity ``@tool`` function made a Strands tool
        (``strands.tool``), anything else as given. The hooks journal the Sagacity tools among them."""
        return [strands_tool(one) if _plain_sagacity_tool(one) else one for one in tools]

    # -- the saga -----------------------------------------------------------------------------------
    def _saga_id(self, ctx: BeforeToolCallEvent) -> str:
        named = named_saga(self.saga_id, ctx)
        if named is not None:
            return named
        session_id = getattr(ctx.agent, "session_id", None)
        if not session_id:
            raise ConfigurationError(
                "SagacityStrandsHooks needs a saga id: give the agent a session manager, pass "
                "saga_id=, or call it inside sg.saga(...)"
            )
        return str(session_id)

    def _spec(self, event: BeforeToolCallEvent) -> ToolSpec | None:
        tool = event.selected_tool
        if tool is None:
            return None  # not a tool of this agent: Strands answers it
        found = framework.spec_of(tool)
        if found is not None:
            return found
        return framework.spec_of(name=tool.tool_name, registry=self.registry or self.sagacity.registry)

    async def _journaled(
        self, event: BeforeToolCallEvent, spec: ToolSpec, input: str, invoke: Any, edited: bool
    ) -> Any:
        async with self._saga(event):
            return await framework.journaled_call_async(
                spec,
                input,
                _call_id(event.tool_use),
                invoke,
                edited=edited,
                on_reject=self.on_reject,
                control_flow=(_ToolInterrupted,),
                wait=self.wait,
            )

    # -- the hooks ----------------------------------------------------------------------------------
    async def _before_tool_call(self, event: BeforeToolCallEvent) -> None:
        spec = self._spec(event)
        if spec is None:
            return
        edited = False
        if spec.irreversible:
            decided = await self._gate(event, spec)
            if decided is None:
                return  # cancelled: the model is told
            edited = decided
        assert event.selected_tool is not None
        event.selected_tool = _JournaledTool(self, event, event.selected_tool, spec, edited)

    def _after_tool_call(self, event: AfterToolCallEvent) -> None:
        """A refusal met in the journaled tool ends the agent call. Strands catches what an
        after-hook raises and calls the hooks again with it as the exception: raised again then,
        it leaves the agent (as Strands' ``EventLoopException`` from it)."""
        tool = event.selected_tool
        if isinstance(tool, _JournaledTool) and tool.refusal is not None:
            raise tool.refusal

    async def _gate(self, event: BeforeToolCallEvent, spec: ToolSpec) -> bool | None:
        """Whether the gated call may run now (True: with edited arguments); None when it is
        cancelled with a message for the model. Raises Strands' interrupt to pause.

        Each pass reads the call in the journal, then asks the next interrupt in turn: answered
        (a resume), it goes on; unanswered, it pauses the agent. A response only resumes (or
        edits): whether the call runs is the journal's decision."""
        call_id = _call_id(event.tool_use)
        inside = framework.current_saga_id()
        saga_id = inside or self._saga_id(event)
        arguments: dict[str, Any] = dict(event.tool_use.get("input") or {})
        edited = False
        for number in count(1):
            record, first = await asyncio.to_thread(self._read, saga_id, call_id)
            unfinished = framework.unfinished_error(record) if record is not None and inside is None else None
            if unfinished is not None:
                raise unfinished  # running in a living process, or in doubt: nothing decided here
            if not edited and _edited_before(record, first, arguments):
                # An edit answered earlier superseded the model's arguments in the journal; the
                # session still holds the model's: the edit stands (and needs its own approval).
                assert record is not None
                arguments, edited = json.loads(record.input), True
                event.tool_use = {**event.tool_use, "input": arguments}
            presented = framework.arguments_json(arguments)
            gate = _open_gate(record, presented)
            if gate is None:
                if record is not None and record.status is CallStatus.EXECUTED and record.input == presented:
                    return edited  # done: the tool replays its journaled result
                # Sagacity decides: a first presentation or an edit is gated; other arguments
                # than the approved ones are refused; a rejection raises or tells the model.
                outcome = await self._journaled(event, spec, presented, _never, edited)
                if isinstance(outcome, CallRejected | CallRefused):
                    event.cancel_tool = outcome.message
                    return None
                if not isinstance(outcome, CallPending):
                    return edited  # executed meanwhile: the tool replays it
                gate = _Gate.pending(outcome)
            answer = event.interrupt(f"{INTERRUPT}:{number}", reason=gate.reason(spec, arguments))
            edit = _edit_of(answer)
            if edit is not None and edit != arguments:
                arguments, edited = edit, True
                event.tool_use = {**event.tool_use, "input": arguments}
                continue
            if gate.approved:
                return edited
            # Still waiting in Sagacity: the response approved nothing; the next interrupt pauses.
        raise AssertionError("unreachable")  # pragma: no cover

    def _read(self, saga_id: str, call_id: str) -> tuple[CallRecord | None, str | None]:
        """What the journal says of the call, and the arguments of its first gate (the model's)."""
        try:
            view = self.sagacity.view(saga_id, allow_blocking=True)
        except SagaNotFoundError:
            return None, None
        first = next((gate.input for gate in view.gates if gate.call_id == call_id), None)
        return framework.call_record(view, call_id), first


def _edited_before(record: CallRecord | None, first: str | None, arguments: dict[str, Any]) -> bool:
    """Whether the call's latest gate holds an edit of the model's arguments, presented here."""
    if record is None or record.gate_seq is None or first is None or record.input == first:
        return False
    return framework.arguments_json(arguments) == first


@dataclass(frozen=True, slots=True)
class _Gate:
    """A gate the call waits on (or that was approved), as the interrupt's reason shows it."""

    saga_id: str
    seq: int
    input_hash: str
    call_id: str
    approved: bool

    @classmethod
    def pending(cls, outcome: CallPending) -> _Gate:
        request = outcome.request
        return cls(request.saga_id, request.journal_seq, request.input_hash, outcome.call_id, False)

    def reason(self, spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            "sagacity": {
                "saga_id": self.saga_id,
                "seq": self.seq,
                "input_hash": self.input_hash,
                "call_id": self.call_id,
                "tool": spec.name,
                "args": arguments,
                "message": (
                    f"[AWAITING_APPROVAL] {spec.name} waits for a named human's approval in Sagacity "
                    f"(saga {self.saga_id!r}, request {self.seq}); an interrupt response alone approves "
                    "nothing"
                ),
            }
        }


def _open_gate(record: CallRecord | None, presented: str) -> _Gate | None:
    """The call's gate if it waits or was approved for exactly ``presented``; else None."""
    if record is None or record.gate_seq is None or record.input != presented:
        return None
    if record.status not in (CallStatus.AWAITING_APPROVAL, CallStatus.APPROVED):
        return None
    approved = record.status is CallStatus.APPROVED
    return _Gate(record.saga_id, record.gate_seq, record.input_hash, record.call_id, approved)


class _JournaledTool(AgentTool):
    """The Strands tool the hook selects for one call: the original, run inside the journaled call."""

    def __init__(
        self,
        hooks: SagacityStrandsHooks,
        event: BeforeToolCallEvent,
        inner: AgentTool,
        spec: ToolSpec,
        edited: bool,
    ) -> None:
        super().__init__()
        self._hooks, self._event, self._inner, self._sagacity_spec = hooks, event, inner, spec
        self._edited = edited
        #: Sagacity's refusal of the call (nothing ran), raised out of the agent by the after-hook.
        self.refusal: Exception | None = None

    @property
    def tool_name(self) -> str:
        return self._inner.tool_name

    @property
    def tool_spec(self) -> StrandsToolSpec:
        return self._inner.tool_spec

    @property
    def tool_type(self) -> str:
        return self._inner.tool_type

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> ToolGenerator:
        results: list[ToolResultEvent] = []
        passed: list[Any] = []  # the tool's own stream events, passed on once the call is journaled

        async def invoke() -> Any:
            async for event in self._inner.stream(tool_use, invocation_state, **kwargs):
                if isinstance(event, ToolResultEvent):
                    results.append(event)
                elif isinstance(event, dict) and "tool_interrupt_event" in event:
                    raise _ToolInterrupted(event)
                else:
                    passed.append(event)
            if not results:
                raise _ErrorResult(f"{self.tool_name} returned no result")
            last = results[-1]
            if last.exception is not None:
                raise last.exception
            if last.tool_result.get("status") == "error":
                raise _ErrorResult(_content(last.tool_result))
            return _content(last.tool_result)

        call_id = _call_id(tool_use)
        arguments = framework.arguments_json(dict(tool_use.get("input") or {}))
        hooks, spec = self._hooks, self._sagacity_spec
        try:
            outcome = await hooks._journaled(self._event, spec, arguments, invoke, self._edited)
        except _ToolInterrupted as paused:
            for event in passed:
                yield event
            yield paused.event
            return
        except Exception as exc:  # noqa: BLE001 - a failure is Strands' error result; a refusal, raised after
            for event in passed:
                yield event
            if results:
                yield results[-1]  # the tool failed (journaled FAILED): Strands' error result
                return
            self.refusal = exc  # refused, nothing ran: the after-hook raises it
            yield ToolResultEvent(_result(call_id, "error", f"[REFUSED] {exc}"))
            return
        for event in passed:
            yield event
        if isinstance(outcome, CallPending | CallRejected | CallRefused):
            yield ToolResultEvent(_result(call_id, "error", outcome.message))
        elif results:
            yield results[-1]
        else:
            yield ToolResultEvent(_result(call_id, "success", str(outcome)))  # replayed from the journal


def _content(result: ToolResult) -> Any:
    """What the journal keeps of a result: its text, or its content blocks when not all are text."""
    blocks = list(result.get("content") or [])
    if all(isinstance(block, dict) and set(block) == {"text"} for block in blocks):
        return "".join(str(block["text"]) for block in blocks)
    return blocks


def _result(call_id: str, status: Literal["success", "error"], text: str) -> ToolResult:
    return {"toolUseId": call_id, "status": status, "content": [{"text": text}]}


def _call_id(tool_use: ToolUse) -> str:
    call_id = tool_use.get("toolUseId")
    if not call_id:
        raise ConfigurationError(
            f"tool use {tool_use.get('name')!r} has no toolUseId: Sagacity journals calls by id"
        )
    return str(call_id)


def _plain_sagacity_tool(tool: Any) -> bool:
    return not isinstance(tool, AgentTool) and framework.spec_of(tool) is not None


def _edit_of(answer: Any) -> dict[str, Any] | None:
    """The arguments of an edit response (``{"type": "edit", "args": {...}}``), else None."""
    if isinstance(answer, dict) and answer.get("type") == "edit" and isinstance(answer.get("args"), dict):
        return dict(answer["args"])
    return None


def _never() -> Any:
    raise AssertionError("a gated call is decided in the hook; it never runs there")


def interrupt_responses(
    sagacity: Sagacity, saga_id: str, interrupts: Iterable[Interrupt]
) -> list[dict[str, Any]] | None:
    """The interrupt responses to resume a paused agent with, read from the journal alone.

    For each of Sagacity's interrupts (others are left to the application: add their responses):
    a response naming the gate, its payload hash and who approved it in Sagacity (the hook reads
    the journal again, never the response). Returns None while any of them still waits for
    approval (nothing to resume yet). Raises ``ApprovalRefusedError`` when a gate was rejected and
    the saga compensated (do not resume in it); ``SagaRunningElsewhereError`` (not an
    ``ApprovalError``) while an approved call is still running in a living process;
    ``SagaStateError`` for one left in doubt by a process that died.
    """
    responses: list[dict[str, Any]] = []
    for interrupt in interrupts:
        meta = interrupt.reason.get("sagacity") if isinstance(interrupt.reason, dict) else None
        if not isinstance(meta, dict) or not interrupt.name.startswith(f"{INTERRUPT}:"):
            continue
        call_id = str(meta.get("call_id"))
        record = framework.find_call(sagacity, saga_id, call_id)
        if record is None:
            raise ApprovalRefusedError(f"saga {saga_id!r} has no gate for call id {call_id!r}")
        unfinished = framework.unfinished_error(record)
        if unfinished is not None:
            raise unfinished
        if record.status is CallStatus.AWAITING_APPROVAL:
            return None
        if record.status is CallStatus.REJECTED and not record.continues:
            raise ApprovalRefusedError(
                f"saga {saga_id!r}: the call {call_id!r} ({record.tool_name}) was rejected and the saga "
                "compensated; do not resume the agent in it"
            )
        decided = {
            "saga_id": saga_id,
            "seq": record.gate_seq,
            "input_hash": record.input_hash,
            "status": str(record.status),
            "approvers": list(record.approvers),
        }
        if record.status is CallStatus.REJECTED:
            decided |= {"rejected_by": record.rejected_by, "reason": record.reason}
        response = {"sagacity": decided}
        responses.append({"interruptResponse": {"interruptId": interrupt.id, "response": response}})
    return responses
