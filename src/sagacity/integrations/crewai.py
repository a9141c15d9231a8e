"""CrewAI: every call of a Sagacity tool journaled once, however often a task or a flow retries it;
IRREVERSIBLE ones paused through a Flow's ``@human_feedback`` and approved in Sagacity.

::

    tools = SagacityCrewTools(sg).wrap([reserve_inventory, send_wire_transfer])
    agent = Agent(role=..., goal=..., backstory=..., llm=llm, tools=tools)

:meth:`SagacityCrewTools.wrap` takes Sagacity ``@tool`` functions, or CrewAI tools (``BaseTool``
subclasses, ``@tool`` functions of CrewAI) over them, and returns CrewAI ``BaseTool`` s whose runs
are journaled. CrewAI hands a tool no call id, and the ids a model gives its calls change on
every attempt: a task retried by its guardrail, a crew kicked off again, a flow re-run after a
crash or a resume would each run the tool again — CrewAI's duplicate payments and emails. So the
journaled call id is what stays the same across them: ``crewai:<task key>:<tool>:<hash of the
arguments>`` (the task key is CrewAI's ``Task.key``, a digest of its description and expected
output, so the same task in another process has it too). A call presented again — by a retry, a
re-run, a model repeating itself — returns its journaled result and never runs twice; one tool
called with the same arguments in one task is one call.

An IRREVERSIBLE tool does not run: its gate (AWAITING_APPROVAL) is journaled and the model is
told that approval is required. A Flow method that kicks off the crew, decorated with
``@human_feedback(provider=SagacityFeedbackProvider(sg))``, then pauses the flow (CrewAI's
``HumanFeedbackPending``, the flow's state persisted) while any gate of its saga waits. A named
human decides in Sagacity (``sg.approve``/``sg.reject``, the CLI, the HTTP API); in any process
the application restores the flow (``Flow.from_pending``) and resumes it with
:func:`feedback_from_journal`. The feedback is *not* the approval — only the journal is: when the
flow presents the call again (a listener kicks off the crew again), the tool runs in band, once,
if a named human approved exactly these arguments. Feedback given in CrewAI alone approves
nothing; arguments edited (a ``before_tool_call`` hook changing ``tool_input``, the flow's saved
state changed) are another call, gated anew: an approval never pays for other arguments.

- The saga id: the saga live in the context if any (``with sg.saga(...)`` around ``kickoff``),
  else ``saga_id=`` (a str, or a function of the :class:`CrewToolCall`), else the running flow's
  id (``flow.state.id``, kept by its persistence, so a resumed or re-run flow re-enters its saga).
  Without a live saga each call enters the saga for its own duration, so a failed call
  compensates the saga at once (CrewAI then gives the model the error, as it does any tool's).
- A call still running in another living process is answered, to the model, that it runs
  elsewhere (nothing ran here, nothing was decided); :func:`feedback_from_journal` raises
  ``SagaRunningElsewhereError`` then, and ``SagaStateError`` for a call left in doubt.
- ``on_reject``: ``"compensate"`` (default) — a rejection compensates the saga and
  :func:`feedback_from_journal` raises ``ApprovalRefusedError``; ``"continue"`` — nothing is
  compensated, the model is told who rejected the call and why.
- Results are never put in CrewAI's tool cache: the journal is the cache (an "awaiting approval"
  answer cached would hide the approved call).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sagacity import framework
from sagacity.errors import ApprovalRefusedError, ConfigurationError, SagaRunningElsewhereError
from sagacity.framework import CallPending, CallRefused, CallRejected
from sagacity.integrations._adapter import Adapter, named_saga
from sagacity.tools import ToolSpec

try:
    from crewai.context import get_current_task_id
    from crewai.flow.async_feedback import HumanFeedbackPending, PendingFeedbackContext
    from crewai.flow.flow_context import current_flow_id
    from crewai.hooks import ToolCallHookContext, register_before_tool_call_hook
    from crewai.tools import BaseTool
    from crewai.tools import tool as crewai_tool
    from pydantic import PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigurationError(
        "sagacity.integrations.crewai needs CrewAI: pip install 'sagacity[crewai]'"
    ) from exc

from sagacity import CallStatus, Sagacity

__all__ = ["CrewToolCall", "SagacityCrewTools", "SagacityFeedbackProvider", "feedback_from_journal"]

#: The feedback :func:`feedback_from_journal` gives once every gate of the saga is approved.
APPROVED = "approved"


@dataclass(frozen=True, slots=True)
class CrewToolCall:
    """One run of a wrapped tool, as ``saga_id=`` (a function) sees it: the tool, its arguments
    as journaled, the task's key (None outside a task) and the running flow's id (None outside a
    flow)."""

    tool_name: str
    input: str
    task_key: str | None
    flow_id: str | None


class SagacityCrewTools(Adapter[CrewToolCall]):
    """Wrap CrewAI tools so every run of a Sagacity tool is journaled once and IRREVERSIBLE ones
    are approved in Sagacity (module doc)."""

    def wrap(self, tools: Iterable[Any]) -> list[Any]:
        """The tools, each Sagacity tool wrapped (a function becomes a CrewAI tool first); other
        tools are returned as given."""
        return [self.wrap_one(tool) for tool in tools]

    def wrap_one(self, tool: Any) -> Any:
        """One tool: a Sagacity ``@tool`` function, or a CrewAI tool over one, journaled."""
        _tasks.watch()
        if not isinstance(tool, BaseTool):
            spec = framework.spec_of(tool)
            if spec is None:
                return tool
            tool = crewai_tool(spec.name)(tool)
        spec = framework.spec_of(getattr(tool, "func", None)) or framework.spec_of(
            name=tool.name, registry=self.registry or self.sagacity.registry
        )
        if spec is None:
            return tool
        return SagacityCrewTool.over(tool, self, spec)

    def _saga_id(self, call: CrewToolCall) -> str:
        saga_id = named_saga(self.saga_id, call) or call.flow_id
        if not saga_id:
            raise ConfigurationError(
                "SagacityCrewTools needs a saga id: pass saga_id=, kick the crew off inside sg.saga(...), "
                "or run it in a Flow (its state id is the saga id)"
            )
        return saga_id

    # -- one run of a wrapped tool ----------------------------------------------------------------
    def _present(self, spec: ToolSpec, inner: BaseTool, arguments: dict[str, Any]) -> Any:
        call = _call(spec, arguments)
        try:
            with self._saga(call):
                outcome = framework.journaled_call(
                    spec,
                    call.input,
                    _call_id(call),
                    lambda: inner.run(**arguments),
                    on_reject=self.on_reject,
                    wait=self.wait,
                )
        except SagaRunningElsewhereError as exc:
            return f"[RUNNING_ELSEWHERE] {spec.name} did not run here: {exc}"
        return _answer(outcome)

    async def _present_async(self, spec: ToolSpec, inner: BaseTool, arguments: dict[str, Any]) -> Any:
        call = _call(spec, arguments)
        try:
            async with self._saga(call):
                outcome = await framework.journaled_call_async(
                    spec,
                    call.input,
                    _call_id(call),
                    lambda: inner.arun(**arguments) if spec.is_async else inner.run(**arguments),
                    on_reject=self.on_reject,
                    wait=self.wait,
                )
        except SagaRunningElsewhereError as exc:
            return f"[RUNNING_ELSEWHERE] {spec.name} did not run here: {exc}"
        return _answer(outcome)


class SagacityCrewTool(BaseTool):  # type: ignore[misc]  # BaseTool is Any where crewai is absent
    """A CrewAI tool whose runs go through Sagacity's journal (made by
    :meth:`SagacityCrewTools.wrap`): the wrapped tool's name, description and argument schema."""

    # Private: kept out of the tool's fields, which CrewAI serialises (traces, checkpoints).
    _inner: Any = PrivateAttr(default=None)
    _adapter: Any = PrivateAttr(default=None)
    _spec: Any = PrivateAttr(default=None)

    @classmethod
    def over(cls, tool: BaseTool, adapter: SagacityCrewTools, spec: ToolSpec) -> SagacityCrewTool:
        """``tool`` journaled by ``adapter`` as the Sagacity tool ``spec``; never in CrewAI's
        tool cache."""
        wrapped = cls(
            name=tool.name,
            description=tool.description,
            args_schema=tool.args_schema,
            result_as_answer=tool.result_as_answer,
            cache_function=_never_cached,
        )
        wrapped._inner, wrapped._adapter, wrapped._spec = tool, adapter, spec
        return wrapped

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        present: Callable[..., Any] = self._adapter._present
        return present(self._spec, self._inner, _bound(self._spec, args, kwargs))

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        present: Callable[..., Any] = self._adapter._present_async
        return await present(self._spec, self._inner, _bound(self._spec, args, kwargs))


def _bound(spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by name (CrewAI passes keywords; positional ones are bound)."""
    if not args:
        return dict(kwargs)
    return dict(spec.signature.bind(*args, **kwargs).arguments)


def _never_cached(_args: Any = None, _result: Any = None) -> bool:
    return False


def _answer(outcome: Any) -> Any:
    if isinstance(outcome, CallPending | CallRejected | CallRefused):
        return outcome.message  # nothing ran: the model is told
    return outcome


def _call(spec: ToolSpec, arguments: dict[str, Any]) -> CrewToolCall:
    return CrewToolCall(
        spec.name, framework.arguments_json(arguments), _tasks.current(), current_flow_id.get()
    )


def _call_id(call: CrewToolCall) -> str:
    """What stays the same when CrewAI presents the call again: the task, the tool, the arguments."""
    digest = hashlib.sha256(call.input.encode()).hexdigest()[:16]
    return f"crewai:{call.task_key or '-'}:{call.tool_name}:{digest}"


class _TaskKeys:
    """The key of the task CrewAI runs now, by its current task id (which CrewAI sets and resets
    around each task): learned from a ``before_tool_call`` hook, which sees the task, just before
    CrewAI runs the tool in the same thread. Bounded: old task ids are forgotten."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._keys: OrderedDict[str, str] = OrderedDict()
        self._watching = False

    def watch(self) -> None:
        if not self._watching:
            self._watching = True
            register_before_tool_call_hook(self._seen)

    def _seen(self, context: ToolCallHookContext) -> None:
        task = context.task
        if task is not None:
            self._keys[str(task.id)] = task.key
            while len(self._keys) > self.LIMIT:
                self._keys.popitem(last=False)

    def current(self) -> str | None:
        task_id = get_current_task_id()
        return self._keys.get(task_id) if task_id is not None else None


_tasks = _TaskKeys()


class SagacityFeedbackProvider:
    """A ``@human_feedback`` provider that pauses the flow while a gate of its saga waits in
    Sagacity, and lets it go on at once when none does.

    The saga: ``saga_id=`` (a str, or a function of the flow), else the flow's id. The pause
    carries, in the context's ``metadata["sagacity"]``, the saga id and each waiting gate's seq,
    tool and payload hash, for the application to show.
    """

    def __init__(self, sagacity: Sagacity, *, saga_id: str | Callable[[Any], str] | None = None) -> None:
        self.sagacity = sagacity
        self.saga_id = saga_id

    def request_feedback(self, context: PendingFeedbackContext, flow: Any) -> str:
        saga_id = named_saga(self.saga_id, flow) or context.flow_id
        waiting = self.sagacity.pending_approvals(saga_id)
        if not waiting:
            return ""
        context.metadata["sagacity"] = {
            "saga_id": saga_id,
            "requests": [
                {"seq": r.journal_seq, "tool": r.tool_name, "input_hash": r.input_hash} for r in waiting
            ],
        }
        tools = ", ".join(f"{r.tool_name} (request {r.journal_seq})" for r in waiting)
        raise HumanFeedbackPending(
            context=context, message=f"[AWAITING_APPROVAL] saga {saga_id!r} waits for approval: {tools}"
        )


def feedback_from_journal(sagacity: Sagacity, saga_id: str) -> str | None:
    """The feedback to resume a paused flow with, decided in Sagacity's journal alone.

    ``"approved"`` once no gate of the saga waits (each approved by a named human, or rejected
    under ``on_reject="continue"``: then ``"rejected: ..."`` says who and why); None while one
    still waits (nothing to resume yet). The feedback approves nothing itself: the tool checks the
    journal when the flow presents the call again. Raises ``ApprovalRefusedError`` when a gate
    was rejected and the saga compensated (do not resume the flow in it);
    ``SagaRunningElsewhereError`` while an approved call is still running in a living process
    (resume once it has ended), ``SagaStateError`` for one left in doubt — neither a refusal.
    """
    view = sagacity.view(saga_id, allow_blocking=True)
    rejected: list[str] = []
    for gate in view.gates:
        record = framework.call_record(view, gate.call_id) if gate.call_id is not None else None
        if record is None:
            continue  # a gate of no framework's call: not this flow's to decide
        unfinished = framework.unfinished_error(record)
        if unfinished is not None:
            raise unfinished
        if record.status is CallStatus.AWAITING_APPROVAL:
            return None
        if record.status is CallStatus.REJECTED and not record.continues:
            raise ApprovalRefusedError(
                f"saga {saga_id!r}: the call {record.call_id!r} ({record.tool_name}) was rejected and the "
                "saga compensated; do not resume the flow in it"
            )
        if record.status is CallStatus.REJECTED:
            why = f" ({record.reason})" if record.reason else ""
            rejected.append(f"{record.tool_name} rejected by {record.rejected_by or 'nobody named'}{why}")
    return f"rejected: {'; '.join(rejected)}" if rejected else APPROVED
