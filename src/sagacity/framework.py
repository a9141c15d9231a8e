"""What an agent-framework adapter needs from Sagacity, public so that you can write your own.

The adapters in ``sagacity.integrations`` are built on these functions alone:

- :func:`spec_of` finds the Sagacity tool behind a framework's tool (by function or name);
- :func:`journaled_call` / :func:`journaled_call_async` journal one call the framework makes,
  keyed by the framework's call id, inside the live saga: run once however often the framework
  presents it (replays, checkpoint re-runs, retries, parallel duplicates — threads or processes),
  gated if the tool is IRREVERSIBLE, executed *in band* once a named human approved exactly
  these arguments in Sagacity;
- :func:`find_call` says what became of a call id (for building the framework's resume input),
  and :func:`unfinished_error` what a resume helper raises for one that has not finished;
- :func:`arguments_json` turns arguments a framework holds as a mapping into the journaled JSON.

A journaled call returns the tool's result (or the journaled result of a call that already
executed, as text), a :class:`~sagacity.model.CallPending` (gated: pause the framework), a
:class:`~sagacity.model.CallRejected` (rejected under ``on_reject="continue"``: tell the model)
or a :class:`~sagacity.model.CallRefused` (re-presented with arguments other than the done call's,
or in doubt: nothing ran, nothing journaled, tell the model). Refusals that compensated the saga
raise: ``SagaClosedError``, ``ApprovalRefusedError``, ``PayloadMismatchError``; a call id that
failed before raises ``SagaStateError``; one still running in another living process raises
``SagaRunningElsewhereError`` at once (nothing decided, the saga not compensated). See
docs/integrations/ and the journal format in docs/journal.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import sagacity._context as _context
from sagacity._json import compact
from sagacity.errors import (
    ApprovalRefusedError,
    SagaNotFoundError,
    SagaRunningElsewhereError,
    SagaStateError,
)
from sagacity.model import CallPending, CallRefused, CallRejected, CallStatus, CallView, SagaView
from sagacity.tools import ToolRegistry, ToolSpec
from sagacity.tools import registry as default_registry

if TYPE_CHECKING:
    from sagacity._sagacity import Sagacity

__all__ = [
    "CallPending",
    "CallRecord",
    "CallRefused",
    "CallRejected",
    "arguments_json",
    "awaited_answer",
    "call_record",
    "current_saga_id",
    "find_call",
    "journaled_call",
    "journaled_call_async",
    "spec_of",
    "unfinished_error",
]

#: What a rejection of a gated call means: compensate the saga (Sagacity's default), or tell
#: the model and go on (journaled on the gate as ``on_reject=continue``).
ON_REJECT = ("compensate", "continue")


def spec_of(
    tool: Any = None, *, name: str | None = None, registry: ToolRegistry | None = None
) -> ToolSpec | None:
    """The Sagacity tool behind a framework's tool: ``tool.spec`` of a ``@tool`` function (or of a
    callable wrapping one, through ``__wrapped__``), else the tool registered under ``name``."""
    seen = 0
    while tool is not None and seen < 8:
        spec = getattr(tool, "spec", None)
        if isinstance(spec, ToolSpec):
            return spec
        tool = getattr(tool, "__wrapped__", None)
        seen += 1
    if name is not None:
        return (registry or default_registry).find(name)
    return None


def arguments_json(arguments: Mapping[str, Any] | str | None) -> str:
    """The journaled input of a call whose arguments the framework holds: a ``str`` (the JSON
    the model sent) verbatim, a mapping as compact JSON in its own key order."""
    if isinstance(arguments, str):
        return arguments or "{}"
    return compact(dict(arguments or {}))


def current_saga_id() -> str | None:
    """The id of the saga live in this context, if any."""
    run = _context.current_run()
    return run.saga_id if run is not None else None


def _live(spec: ToolSpec) -> _context.SagaRun:
    run = _context.current_run()
    if run is None:
        raise SagaStateError(
            f"{spec.name}: a journaled framework call needs a live saga (`sg.saga(...)`, or the "
            "adapter's saga id)"
        )
    return run


def journaled_call(
    spec: ToolSpec,
    input: str,
    call_id: str,
    invoke: Callable[[], Any],
    *,
    edited: bool = False,
    on_reject: str = "compensate",
    control_flow: tuple[type[BaseException], ...] = (),
    wait: float = 60.0,
) -> Any:
    """Journal the framework's call ``call_id`` of ``spec`` with ``input`` (the JSON the model
    sent) and run ``invoke()`` at most once for it, in the live saga.

    ``edited``: the framework changed the arguments on purpose (an "edit" decision,
    ``override_args``): a gate for this call id is superseded and the edit needs its own approval,
    instead of being refused as tampering. ``on_reject``: what a rejection of the gate means
    (``"compensate"`` or ``"continue"``). ``control_flow``: exception types that are the
    framework's control flow (a retry request, a pause): they close the call without failing the
    saga and propagate untouched. ``wait``: seconds a duplicate presented in this process waits
    for the first (a call running in another living process is answered
    ``SagaRunningElsewhereError`` at once).
    """
    run = _live(spec)  # no live saga is refused before a bad keyword is
    how = _presented(edited, on_reject, control_flow, wait)
    return run.call_keyed(spec, input, call_id, invoke, how)


async def journaled_call_async(
    spec: ToolSpec,
    input: str,
    call_id: str,
    invoke: Callable[[], Any],
    *,
    edited: bool = False,
    on_reject: str = "compensate",
    control_flow: tuple[type[BaseException], ...] = (),
    wait: float = 60.0,
) -> Any:
    """:func:`journaled_call` from a coroutine; ``invoke()`` may return an awaitable."""
    run = _live(spec)
    how = _presented(edited, on_reject, control_flow, wait)
    return await run.call_keyed_async(spec, input, call_id, invoke, how)


def _presented(
    edited: bool, on_reject: str, control_flow: tuple[type[BaseException], ...], wait: float
) -> _context.Presented:
    """The keywords of a journaled call as the runtime takes them: ``on_reject`` checked and
    journaled as its policy ("" for compensate, Sagacity's default)."""
    if on_reject not in ON_REJECT:
        raise ValueError(f"on_reject must be one of {ON_REJECT}, got {on_reject!r}")
    policy = "" if on_reject == "compensate" else on_reject
    return _context.Presented(edited, policy, control_flow, wait)


@dataclass(frozen=True, slots=True)
class CallRecord:
    """What the journal says about one call id in a saga (a projection of ``Sagacity.view``).

    ``status`` (a :class:`~sagacity.model.CallStatus`): ``EXECUTED``, ``FAILED``, ``RUNNING`` (an
    INTENT without outcome, and a living process runs the saga), ``IN_DOUBT`` (an INTENT without
    outcome whose process is gone: a person must resolve it), ``PASSED`` (left by the framework's control
    flow; it may be presented again), ``AWAITING_APPROVAL``, ``APPROVED`` (approved by enough
    people in the journal, for ``input_hash``, not yet run) or ``REJECTED``. ``seq`` is the call's
    INTENT or gate; ``gate_seq`` the gate of a gated call; ``result`` the EXECUTED payload text.
    For a rejected gate: ``rejected_by`` and ``reason``, and ``continues`` when the gate was
    journaled ``on_reject=continue`` and the saga was not compensated (tell the model, go on).
    """

    saga_id: str
    call_id: str
    tool_name: str
    status: CallStatus
    seq: int
    input: str
    input_hash: str = ""
    gate_seq: int | None = None
    approvers: tuple[str, ...] = ()
    result: str | None = None
    rejected_by: str = ""
    reason: str = ""
    continues: bool = False

    @property
    def approved(self) -> bool:
        return self.status is CallStatus.APPROVED


def find_call(sg: Sagacity, saga_id: str, call_id: str) -> CallRecord | None:
    """What became of ``call_id`` in saga ``saga_id`` (None: never journaled). Read-only: one
    ``Sagacity.view`` of the saga. Adapters call it from sync code that may run on an event loop
    (building a framework's resume input), so unlike ``view`` it does not refuse to run there."""
    try:
        view = sg.view(saga_id, allow_blocking=True)
    except SagaNotFoundError:
        return None
    return call_record(view, call_id)


def unfinished_error(record: CallRecord) -> SagaStateError | None:
    """What a resume helper raises for a call that has not finished, None for any other.

    ``RUNNING``: ``SagaRunningElsewhereError`` (a living process is running it: resume once it
    has ended, nothing was decided); ``IN_DOUBT``: ``SagaStateError`` (its process died mid-call,
    the effect is unknown: a person resolves it, ``sagacity sagas resolve``). Neither is an
    ``ApprovalRefusedError``: the call was not refused, and it may have taken effect.
    """
    where = f"saga {record.saga_id!r}: call id {record.call_id!r} ({record.tool_name}, seq {record.seq})"
    if record.status is CallStatus.RUNNING:
        return SagaRunningElsewhereError(
            f"{where} is still running in a living process; resume the run once it has ended",
            record.saga_id,
            record.seq,
        )
    if record.status is CallStatus.IN_DOUBT:
        return SagaStateError(
            f"{where} is in doubt: its process died before journaling an outcome, so whether it "
            "took effect is unknown; check, then `sagacity sagas resolve` it before resuming"
        )
    return None


def awaited_answer(record: CallRecord, *, resumed: str = "run") -> Literal["approved", "pending", "rejected"]:
    """The journal's answer to a framework's paused call, for building its resume input:
    ``approved`` (approved by enough people for these arguments, or already run: let the
    framework go on), ``pending`` (still waiting: not yet), ``rejected`` (rejected with
    ``on_reject=continue``: tell the model, go on). Raises what must stop the resume: the call
    running in a living process or in doubt (:func:`unfinished_error`), rejected with the saga
    compensated, or in a state with nothing to answer (``ApprovalRefusedError``, naming the
    ``resumed`` thing: "run", "flow", "agent")."""
    unfinished = unfinished_error(record)
    if unfinished is not None:
        raise unfinished
    if record.status in (CallStatus.APPROVED, CallStatus.EXECUTED):
        return "approved"
    if record.status is CallStatus.AWAITING_APPROVAL:
        return "pending"
    where = f"saga {record.saga_id!r}: the call {record.call_id!r} ({record.tool_name})"
    if record.status is CallStatus.REJECTED and record.continues:
        return "rejected"
    if record.status is CallStatus.REJECTED:
        raise ApprovalRefusedError(
            f"{where} was rejected and the saga compensated; do not resume the {resumed} in it"
        )
    raise ApprovalRefusedError(f"{where} is {record.status}; nothing to approve")


def call_record(view: SagaView, call_id: str) -> CallRecord | None:
    """What ``view`` says became of ``call_id`` (None: never journaled in that saga)."""
    found = view.find(call_id)
    if found is None:
        return None
    if isinstance(found, CallView):
        return CallRecord(
            view.saga_id, call_id, found.tool_name, found.status, found.seq, found.input, result=found.result
        )
    gate = found
    record = CallRecord(
        view.saga_id,
        call_id,
        gate.tool_name,
        gate.status,
        gate.seq,
        gate.input,
        gate.input_hash,
        gate.seq,
        gate.approvers,
    )
    if gate.resumed is not None:
        return replace(record, seq=gate.resumed.seq, result=gate.resumed.result)
    if gate.status is CallStatus.REJECTED:
        rejection = gate.rejection
        by, reason = (rejection.approver or "", rejection.reason) if rejection is not None else ("", "void")
        return replace(
            record, rejected_by=by, reason=reason, continues=gate.continues_on_reject and not view.closed
        )
    return record
