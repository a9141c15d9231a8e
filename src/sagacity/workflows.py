"""Workflows: named stages in order, human gates and checks, durable on the saga journal.

A workflow is a declaration; a *run* of it is a saga. Each stage is a journaled call whose
output is the next stage's input; a gate before a stage is an approval request bound to the hash
of the stage's definition and input; a check before a stage is a journaled call that passes or
fails with a reason. Nothing lives in memory between stages: a run waiting at a gate is its
journal, so approving it and continuing works from any process, after any restart — completed
stages come back from the journal and are not run again, the gated stage runs exactly once.

::

    publishing = Workflow("publish-article", version="2026-12")

    @publishing.stage
    def draft(brief: dict) -> dict: ...

    @draft.compensation
    def retract(ctx: StageContext) -> None: ...      # ctx.input, ctx.output of the stage

    @publishing.stage(gate=True, reason="Legal signs off", ttl=timedelta(days=2))
    def publish(article: dict) -> dict: ...

    @publishing.check("publish")          # runs, journaled, before the stage it names
    def no_embargo(article: dict) -> CheckResult: ...

    publishing.run(sg, "article-42", {"topic": "..."})   # stops AWAITING_APPROVAL at the gate
    # ... a human approves (any process), then, in any process:
    publishing.resume(sg, "article-42")                   # publish runs once; the run COMPLETED

Definition errors (a duplicate stage, a check or compensation for a stage that does not exist, a
stage that is not a function) raise :class:`~sagacity.errors.WorkflowDefinitionError` where the
workflow is written, not when it runs. See docs/workflows.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import re
import threading
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import sagacity._context as _context
from sagacity._payloads import ON_ABANDON_REPORT
from sagacity._sagacity import Start
from sagacity._state import Gate, SagaState
from sagacity.errors import (
    ApprovalNotFoundError,
    CheckFailedError,
    DefinitionChangedError,
    SagaExistsError,
    SagaNotFoundError,
    SagaStateError,
    StageOutputError,
    WorkflowDefinitionError,
)
from sagacity.framework import (
    CallPending,
    CallRecord,
    CallRefused,
    CallRejected,
    call_record,
    find_call,
    unfinished_error,
)
from sagacity.guardrails._rules import Action
from sagacity.guardrails._verdict import RuleFinding, parse_verdict
from sagacity.model import (
    ApprovalDecision,
    ApprovalRequest,
    CallStatus,
    CallView,
    CompensationContext,
    CompensationView,
    Phase,
    Reversibility,
    SagaStatus,
    SagaView,
)
from sagacity.tools import ToolRegistry, ToolSpec
from sagacity.tools import registry as default_registry

if TYPE_CHECKING:
    from sagacity._sagacity import Sagacity

__all__ = [
    "CheckResult",
    "CheckView",
    "GateView",
    "StageContext",
    "StageStatus",
    "StageView",
    "Workflow",
    "WorkflowHandle",
    "WorkflowResult",
    "WorkflowView",
    "continue_run",
    "find_workflow",
    "runs",
    "workflow_of_run",
]

#: Journaled tool names: ``<workflow>/<stage>`` for a stage, ``<workflow>/<stage>#<check>`` for a
#: check. Call ids: ``stage:<stage>`` and ``check:<stage>:<check>``.
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,80}$")
_STAGE_ID, _CHECK_ID = "stage:", "check:"


@dataclass(frozen=True, slots=True)
class StageContext:
    """What a stage's compensation receives: the stage's input and the output it journaled."""

    run_id: str
    workflow: str
    stage: str
    input: Any
    output: Any


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A check's verdict; a check may also return ``True``/``None`` (pass) or ``False`` (fail)."""

    passed: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class _Gate:
    approvals: int
    ttl: timedelta | None
    reason: str
    requester_may_not_approve: bool | None = None


@dataclass(slots=True)
class _Check:
    name: str
    fn: Callable[[Any], Any]
    spec: ToolSpec | None = None


class Stage:
    """One declared stage (what ``@workflow.stage`` returns); ``.compensation`` declares its undo."""

    def __init__(self, workflow: Workflow, name: str, fn: Callable[[Any], Any], gate: _Gate | None) -> None:
        self.workflow = workflow
        self.name = name
        self.fn = fn
        self.gate = gate
        self.checks: list[_Check] = []
        self.undo: Callable[[StageContext], Any] | None = None
        self.is_async = inspect.iscoroutinefunction(fn)
        self.version = workflow.version or _code_version(fn)
        self.tool_name = f"{workflow.name}/{name}"
        self.spec: ToolSpec = self._make_spec()
        self.__wrapped__ = fn
        self.__doc__ = fn.__doc__

    def __call__(self, value: Any) -> Any:
        """The stage's function itself, outside any run (journals nothing)."""
        return self.fn(value)

    def compensation(self, fn: Callable[[StageContext], Any]) -> Callable[[StageContext], Any]:
        """Declare what undoes this stage; it receives a :class:`StageContext`."""
        if self.undo is not None:
            raise WorkflowDefinitionError(
                f"workflow {self.workflow.name!r}: stage {self.name!r} already has a compensation "
                f"({_origin(self.undo)})"
            )
        if not callable(fn):
            raise WorkflowDefinitionError(f"workflow {self.workflow.name!r}: a compensation must be callable")
        self.undo = fn
        self.spec = self._make_spec()
        self.workflow.registry.register(self.spec)
        return fn

    def input_json(self, value: Any) -> str:
        """The journaled input: the stage's definition (name, code version, gate reason) and its
        input, so a gate's hash binds all of them."""
        body: dict[str, Any] = {"workflow": self.workflow.name, "stage": self.name, "version": self.version}
        if self.gate is not None and self.gate.reason:
            body["gate"] = self.gate.reason
        body["input"] = value
        return _dumps(body, f"the input of stage {self.name!r}")

    def _make_spec(self) -> ToolSpec:
        stage = self

        def output_of(value: Any) -> str:
            return _dumps(value, f"the output of stage {stage.name!r}", output=True)

        if self.is_async:

            async def run_async(workflow: str, stage: str, version: str, input: Any, gate: str = "") -> str:
                return output_of(await self.fn(input))

            fn: Callable[..., Any] = run_async
        else:

            def run_sync(workflow: str, stage: str, version: str, input: Any, gate: str = "") -> str:
                return output_of(self.fn(input))

            fn = run_sync
        fn.__name__ = fn.__qualname__ = f"stage_{self.name}"
        fn.__module__ = _origin_module(self.fn)
        fn.__qualname__ = f"{self.workflow.name}.{self.name}"
        fn.__doc__ = self.fn.__doc__
        gate = self.gate
        return ToolSpec(
            self.tool_name,
            fn,
            reversibility=Reversibility.IRREVERSIBLE if gate is not None else Reversibility.COMPENSATABLE,
            approval_ttl=gate.ttl if gate is not None else None,
            approvals_required=gate.approvals if gate is not None else 1,
            requester_may_not_approve=gate.requester_may_not_approve if gate is not None else None,
            compensation=self._compensation(),
        )

    def _compensation(self) -> Callable[[CompensationContext], Any] | None:
        """The stage's undo as the saga compensates it, named after the user's function, so a
        rejection's preview says what will run ("unformat"), not this module's wrapper."""
        if self.undo is None:
            return None

        def compensate(ctx: CompensationContext) -> Any:
            return self._compensate(ctx)

        compensate.__name__ = getattr(self.undo, "__name__", compensate.__name__)
        compensate.__qualname__ = getattr(self.undo, "__qualname__", compensate.__qualname__)
        return compensate

    def _compensate(self, ctx: CompensationContext) -> Any:
        assert self.undo is not None
        given = json.loads(ctx.input)
        output = json.loads(ctx.result) if ctx.result else None
        return self.undo(StageContext(ctx.saga_id, self.workflow.name, self.name, given.get("input"), output))


class Workflow:
    """A workflow declaration: stages in the order they are declared, with gates and checks.

    ``name`` names the workflow in the journal (letters, digits, ``_ . -``); ``version`` is the
    code version every gate binds (default: a hash of each stage function's source, so changing a
    stage's code after a gate was approved asks for a new approval). ``registry`` is where the
    stages are registered as tools (the process-wide one by default).
    """

    _all: ClassVar[dict[str, Workflow]] = {}
    _all_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self, name: str, *, version: str | None = None, registry: ToolRegistry | None = None
    ) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise WorkflowDefinitionError(
                f"a workflow name is 1 to 80 letters, digits, '_', '.' or '-', got {name!r}"
            )
        if version is not None and (not isinstance(version, str) or not version or "\n" in version):
            raise WorkflowDefinitionError(f"workflow {name!r}: version must be a one-line string")
        self.name = name
        self.version = version
        self.registry = registry if registry is not None else default_registry
        self.stages: list[Stage] = []
        with Workflow._all_lock:
            Workflow._all[name] = self

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, stages={[s.name for s in self.stages]})"

    # -- declaring -----------------------------------------------------------------------------------
    def stage(
        self,
        fn: Callable[[Any], Any] | None = None,
        *,
        name: str | None = None,
        gate: bool = False,
        approvals: int = 1,
        ttl: timedelta | float | None = None,
        reason: str = "",
        requester_may_not_approve: bool | None = None,
    ) -> Any:
        """Declare the next stage (``@wf.stage`` or ``@wf.stage(gate=True, approvals=2, ...)``).

        ``gate``: a human must approve the stage's exact input before it runs (``approvals``
        distinct approvers, within ``ttl`` — a timedelta or seconds; ``reason`` is shown to them
        and journaled with the input). ``requester_may_not_approve``: the principal the run acts
        for (``acting_as``, ``Sagacity(principal=)``), journaled as the gate's requester, may not
        approve it (default: only with four eyes, ``approvals`` > 1).
        """
        if gate:
            if not isinstance(approvals, int) or isinstance(approvals, bool) or approvals < 1:
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: approvals must be a whole number >= 1"
                )
            if reason and ("\n" in reason or not isinstance(reason, str)):
                raise WorkflowDefinitionError(f"workflow {self.name!r}: a gate's reason is one line of text")
            span = timedelta(seconds=ttl) if isinstance(ttl, int | float) else ttl
            if span is not None and span <= timedelta(0):
                raise WorkflowDefinitionError(f"workflow {self.name!r}: a gate's ttl must be positive")
            the_gate: _Gate | None = _Gate(approvals, span, reason, requester_may_not_approve)
        elif approvals != 1 or ttl is not None or reason or requester_may_not_approve is not None:
            raise WorkflowDefinitionError(
                f"workflow {self.name!r}: approvals, ttl and reason belong to a gate (pass gate=True)"
            )
        else:
            the_gate = None

        def declare(func: Callable[[Any], Any]) -> Stage:
            if not callable(func) or not hasattr(func, "__code__"):
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: a stage must be a function, got {func!r}"
                )
            stage_name = name or func.__name__
            if not _NAME.match(stage_name):
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: stage name {stage_name!r} must be 1 to 80 letters, "
                    "digits, '_', '.' or '-'"
                )
            if any(s.name == stage_name for s in self.stages):
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r} already has a stage named {stage_name!r}"
                )
            declared = Stage(self, stage_name, func, the_gate)
            self.registry.register(declared.spec)
            self.stages.append(declared)
            return declared

        return declare(fn) if fn is not None else declare

    def check(self, stage: str | Stage, *, name: str | None = None) -> Callable[[Callable[[Any], Any]], Any]:
        """Declare a check that runs (journaled) before ``stage``, given the stage's input.

        It returns ``True``/``None`` to pass, ``False`` or ``CheckResult(False, reason)`` to fail
        the run (its completed stages are compensated).
        """
        target = self._stage(stage, "a check")

        def declare(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
            check_name = str(name or getattr(fn, "__name__", ""))
            if not _NAME.match(check_name):
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: check name {check_name!r} is not valid"
                )
            if any(c.name == check_name for c in target.checks):
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: stage {target.name!r} already has a check named {check_name!r}"
                )
            check = _Check(check_name, fn)
            check.spec = _check_spec(self, target, check)
            self.registry.register(check.spec)
            target.checks.append(check)
            return fn

        return declare

    def compensation(self, stage: str | Stage) -> Callable[[Callable[[StageContext], Any]], Any]:
        """``@wf.compensation("draft")``: the same as ``@draft.compensation``, by name."""
        return self._stage(stage, "a compensation").compensation

    def _stage(self, stage: str | Stage, what: str) -> Stage:
        name = stage.name if isinstance(stage, Stage) else stage
        for declared in self.stages:
            if declared.name == name:
                return declared
        known = ", ".join(s.name for s in self.stages) or "none yet"
        raise WorkflowDefinitionError(
            f"workflow {self.name!r} has no stage {name!r} for {what} (declared stages: {known}; "
            "declare the stage first)"
        )

    # -- running -------------------------------------------------------------------------------------
    def run(self, sg: Sagacity, run_id: str, input: Any = None) -> WorkflowResult:
        """Run (or continue) ``run_id`` from its first stage not yet done; returns how it stands.

        The run's input is journaled with its first stage; continuing a run that already has one
        ignores ``input`` unless it differs, which is an error (a run has one input). A run id is
        a saga id: under one that is not a run of this workflow, ``SagaExistsError`` and nothing
        journaled. A gate opened for another definition of its stage is superseded by one for
        this definition and ``DefinitionChangedError`` (``new_seq``) raised, as ``sg.resume``
        does: an approval never runs code it was not given for.
        """
        self._require_stages()
        if any(s.is_async for s in self.stages):
            raise SagaStateError(f"workflow {self.name!r} has async stages: use `await wf.run_async(...)`")
        start = self._run_input(sg, run_id, input)
        # A workflow run is one saga over its stages: each run continues it on purpose. It is
        # never abandoned, only waiting to be continued: ``recover`` reports it, never undoes it.
        again = Start(run_id, continue_existing=True, on_abandon=ON_ABANDON_REPORT)
        result = sg._run(again, self._drive, (sg, run_id, start), {})
        return self._result(sg, run_id, result.status, result.value, result.error, result.awaiting)

    async def run_async(self, sg: Sagacity, run_id: str, input: Any = None) -> WorkflowResult:
        """``run`` from a coroutine; stages may be ``async def``."""
        self._require_stages()
        start = await asyncio.to_thread(self._run_input, sg, run_id, input)
        again = Start(run_id, continue_existing=True, on_abandon=ON_ABANDON_REPORT)
        result = await sg._run_async(again, self._drive_async, (sg, run_id, start), {})
        return await asyncio.to_thread(
            self._result, sg, run_id, result.status, result.value, result.error, result.awaiting
        )

    def resume(self, sg: Sagacity, run_id: str) -> WorkflowResult:
        """Continue a run from its journal (after a gate was approved, or a restart); as ``run``,
        and ``SagaNotFoundError`` for an id that is not a run of this workflow."""
        if not sg.entries(run_id):
            raise SagaNotFoundError(f"no workflow run {run_id!r}")
        return self.run(sg, run_id, _JOURNALED)

    async def resume_async(self, sg: Sagacity, run_id: str) -> WorkflowResult:
        if not await sg.entries_async(run_id):
            raise SagaNotFoundError(f"no workflow run {run_id!r}")
        return await self.run_async(sg, run_id, _JOURNALED)

    def start(self, sg: Sagacity, run_id: str, input: Any = None) -> WorkflowHandle:
        """Start ``run`` in a background thread and return a handle to wait on or inspect."""
        handle = WorkflowHandle(self, sg, run_id)

        def target() -> None:
            try:
                handle._result = self.run(sg, run_id, input)
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the handle
                handle._error = exc

        handle._thread = threading.Thread(target=target, name=f"workflow {self.name} {run_id}", daemon=True)
        handle._thread.start()
        return handle

    def approve(self, sg: Sagacity, run_id: str, stage: str, approver: str) -> ApprovalDecision:
        """Approve the open gate of ``stage`` in run ``run_id`` (approving is not running it:
        :meth:`resume` does, in any process)."""
        return sg.approve(run_id, self._open_gate(sg, run_id, stage), approver=approver)

    def reject(self, sg: Sagacity, run_id: str, stage: str, approver: str, reason: str) -> ApprovalDecision:
        """Reject the open gate of ``stage``: the run's completed stages are compensated here."""
        return sg.reject(run_id, self._open_gate(sg, run_id, stage), approver=approver, reason=reason)

    def _open_gate(self, sg: Sagacity, run_id: str, stage: str) -> int:
        view = self.view(sg, run_id)
        found = next((s for s in view.stages if s.name == stage), None)
        if found is None:
            raise SagaNotFoundError(f"workflow {self.name!r} has no stage {stage!r}")
        if found.gate is None or found.status not in (StageStatus.AWAITING_APPROVAL, StageStatus.APPROVED):
            raise ApprovalNotFoundError(
                f"run {run_id!r} has no open gate before stage {stage!r} (the stage is {found.status})"
            )
        return found.gate.seq

    def view(self, sg: Sagacity, run_id: str) -> WorkflowView:
        """Where run ``run_id`` stands, stage by stage, from its journal. Read-only."""
        try:
            saga = sg.view(run_id)
        except SagaNotFoundError:
            saga = None
        if saga is None or _workflow_of(saga) != self.name:
            raise SagaNotFoundError(f"no run {run_id!r} of workflow {self.name!r}")
        return _view(self, saga)

    def _require_stages(self) -> None:
        if not self.stages:
            raise WorkflowDefinitionError(f"workflow {self.name!r} has no stages")

    def _run_input(self, sg: Sagacity, run_id: str, input: Any) -> Any:
        """The run's input: the journaled one for a run that has started, else ``input``.

        A run id that names another saga (a run of another workflow, a plain saga) is refused,
        nothing journaled: run ids share the saga id space, and one id names one run.

        A run with a stage or check in doubt (its process died mid-call) is refused before
        anything is journaled: whether that call took effect is unknown, so neither running it
        again nor compensating around it is right; a person resolves it first.
        """
        try:
            saga = sg._view(run_id)
        except SagaNotFoundError:
            saga = None
        if saga is not None and _workflow_of(saga) != self.name:
            if input is _JOURNALED:
                raise SagaNotFoundError(f"no run {run_id!r} of workflow {self.name!r}")
            raise self._taken(run_id)
        doubtful = [c.call_id for c in saga.calls if c.status is CallStatus.IN_DOUBT] if saga else []
        record = call_record(saga, doubtful[0]) if saga is not None and doubtful and doubtful[0] else None
        refusal = unfinished_error(record) if record is not None else None
        if refusal is not None:
            raise refusal
        journaled = _journaled_input(saga, self)
        if journaled is _NOTHING:
            if input is _JOURNALED:
                raise SagaNotFoundError(f"workflow run {run_id!r} has no journaled input to continue from")
            _dumps(input, "the run's input")
            return input
        if input is not _JOURNALED and _dumps(input, "the run's input") != _dumps(journaled, "input"):
            raise SagaStateError(
                f"workflow run {run_id!r} started with another input; continue it with "
                "`wf.resume(sg, run_id)` (a run has one input)"
            )
        return journaled

    def _steps(self, value: Any) -> Generator[_Call, Any, Any]:
        """The run, once for sync and async: yields each journaled call to make (a check, a
        stage), is sent its result, and returns the last output (or where it paused)."""
        for stage in self.stages:
            for check in stage.checks:
                assert check.spec is not None
                verdict = yield _Call(
                    check.spec,
                    _check_input(self, stage, check, value),
                    f"{_CHECK_ID}{stage.name}:{check.name}",
                    partial(_run_check, check, value),
                    partial(_run_check_async, check, value),
                )
                _require_passed(self, stage, check, verdict)
            invoke = partial(stage.spec.fn, self.name, stage.name, stage.version, value)
            outcome = yield _Call(
                stage.spec,
                stage.input_json(value),
                f"{_STAGE_ID}{stage.name}",
                invoke,
                invoke,
                edited=True,  # a changed definition supersedes a pending or approved gate
            )
            if isinstance(outcome, CallPending):
                return _Paused(stage.name)
            value = _stage_output(self, stage, outcome)
        return value

    def _drive(self, sg: Sagacity, run_id: str, value: Any) -> Any:
        steps, answer = self._steps(value), None
        try:
            while True:
                call = steps.send(answer)
                before = find_call(sg, run_id, call.call_id)
                answer = _replayed(before)
                if answer is None:
                    answer = _live_run().call_keyed(
                        call.spec, call.input, call.call_id, call.invoke, self._presented(call)
                    )
                    if (superseded := _superseded(call, before, answer)) is not None:
                        return superseded
        except StopIteration as done:
            return done.value

    async def _drive_async(self, sg: Sagacity, run_id: str, value: Any) -> Any:
        steps, answer = self._steps(value), None
        try:
            while True:
                call = steps.send(answer)
                before = await asyncio.to_thread(find_call, sg, run_id, call.call_id)
                answer = _replayed(before)
                if answer is None:
                    answer = await _live_run().call_keyed_async(
                        call.spec, call.input, call.call_id, call.invoke_async, self._presented(call)
                    )
                    if (superseded := _superseded(call, before, answer)) is not None:
                        return superseded
        except StopIteration as done:
            return done.value

    def _presented(self, call: _Call) -> _context.Presented:
        """How the run presents a call: only in a saga that is this workflow's run (or empty),
        judged on every state the call is decided on, so two workflows racing for one new run
        id cannot both start in it."""
        return _context.Presented(edited=call.edited, owner=self._owns)

    def _owns(self, state: SagaState) -> None:
        if state.entry_count and _workflow_named(_state_calls(state)) != self.name:
            raise self._taken(state.saga_id)

    def _taken(self, run_id: str) -> SagaExistsError:
        return SagaExistsError(
            f"run id {run_id!r} is taken: it names a saga that is not a run of workflow "
            f"{self.name!r} (run ids share the saga id space; one id names one run of one "
            "workflow). Nothing was journaled and no stage ran: start the run under another id"
        )

    def _result(
        self,
        sg: Sagacity,
        run_id: str,
        status: SagaStatus,
        value: Any,
        error: BaseException | None,
        awaiting: tuple[ApprovalRequest, ...],
    ) -> WorkflowResult:
        if isinstance(value, _Superseded):
            raise value.error(self, run_id)
        view = _view(self, sg.view(run_id))
        output = None if isinstance(value, _Paused) or status is not SagaStatus.COMPLETED else value
        return WorkflowResult(run_id, self.name, status, output, view.current_stage, error, awaiting, view)


class WorkflowHandle:
    """A run started in the background (:meth:`Workflow.start`)."""

    def __init__(self, workflow: Workflow, sg: Sagacity, run_id: str) -> None:
        self.workflow = workflow
        self.run_id = run_id
        self._sg = sg
        self._thread: threading.Thread | None = None
        self._result: WorkflowResult | None = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()

    def result(self, timeout: float | None = None) -> WorkflowResult:
        """Wait for the run to stop (done, compensated or at a gate) and return how it stands."""
        assert self._thread is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"workflow run {self.run_id!r} still running after {timeout}s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def view(self) -> WorkflowView:
        return self.workflow.view(self._sg, self.run_id)


class StageStatus(StrEnum):
    """Where one stage of a run stands: the saga view's status of the stage's call."""

    PENDING = "PENDING"  # not reached yet
    RUNNING = "RUNNING"  # its INTENT has no outcome yet and a living process runs the run
    IN_DOUBT = "IN_DOUBT"  # its INTENT has no outcome and no living process runs the run: resolve it
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    APPROVED = "APPROVED"  # approved, not yet run: continue the run
    REJECTED = "REJECTED"  # its gate was rejected or expired
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"  # the stage raised (or a check before it failed)
    DENIED = "DENIED"  # the guardrails policy denied it: it never ran
    COMPENSATED = "COMPENSATED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"


@dataclass(frozen=True, slots=True)
class GateView:
    """A stage's gate: the approval request bound to the stage's definition and input."""

    seq: int
    approvals_required: int
    approvers: tuple[str, ...]
    reason: str
    input: str
    input_hash: str
    rejected_by: str = ""
    rejection_reason: str = ""


@dataclass(frozen=True, slots=True)
class CheckView:
    name: str
    status: str  # PENDING, PASSED, FAILED, RUNNING, IN_DOUBT, DENIED
    reason: str = ""


@dataclass(frozen=True, slots=True)
class StageView:
    name: str
    status: StageStatus
    gated: bool
    input: Any = None
    output: Any = None
    gate: GateView | None = None
    checks: tuple[CheckView, ...] = ()
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str = ""
    #: What the guardrails policy journaled for the stage (on its gate, else its INTENT): the
    #: rule that let it run unattended, held it for approval, or denied it. None without a policy.
    policy: RuleFinding | None = None


@dataclass(frozen=True, slots=True)
class WorkflowView:
    """A run as every surface shows it: its status, the stage it stands at, each stage's state."""

    run_id: str
    workflow: str
    status: SagaStatus
    current_stage: str | None
    stages: tuple[StageView, ...]
    started_at: datetime | None
    updated_at: datetime | None
    valid: bool


@dataclass(frozen=True, slots=True)
class WorkflowResult:
    """How a run stands after ``run``/``resume``: ``output`` is the last stage's, once COMPLETED."""

    run_id: str
    workflow: str
    status: SagaStatus
    output: Any
    stage: str | None
    error: BaseException | None
    awaiting: tuple[ApprovalRequest, ...]
    view: WorkflowView

    @property
    def ok(self) -> bool:
        return self.status is SagaStatus.COMPLETED


def find_workflow(name: str) -> Workflow | None:
    """The workflow declared under ``name`` in this process, if any."""
    with Workflow._all_lock:
        return Workflow._all.get(name)


def runs(sg: Sagacity, *, workflow: str | None = None, limit: int | None = None) -> list[WorkflowView]:
    """Runs of the workflows declared in this process (or of one), most recently updated first."""
    with Workflow._all_lock:
        known = dict(Workflow._all)
    if workflow is not None:
        known = {workflow: known[workflow]} if workflow in known else {}
    found: list[WorkflowView] = []
    for summary in sg.sagas():
        saga = sg.view(summary.saga_id)
        name = _workflow_of(saga)
        if name in known:
            found.append(_view(known[name], saga))
            if limit is not None and len(found) >= limit:
                break
    return found


def continue_run(sg: Sagacity, run_id: str) -> WorkflowResult:
    """Continue run ``run_id`` with the workflow declared here that it belongs to."""
    return workflow_of_run(sg, run_id).resume(sg, run_id)


def workflow_of_run(sg: Sagacity, run_id: str) -> Workflow:
    """The declared workflow that run ``run_id`` belongs to (``SagaNotFoundError`` if none here)."""
    try:
        name = _workflow_of(sg._view(run_id))  # view() without its event-loop refusal, as find_call
    except SagaNotFoundError:
        name = ""
    found = find_workflow(name) if name else None
    if found is None:
        raise SagaNotFoundError(
            f"no workflow run {run_id!r}" + (f" (workflow {name!r} is not declared here)" if name else "")
        )
    return found


# -- internals ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Call:
    """One journaled call a run asks for: a stage or a check, under its call id."""

    spec: ToolSpec
    input: str
    call_id: str
    invoke: Callable[[], Any]
    invoke_async: Callable[[], Any]
    edited: bool = False


class _Paused:
    """What the driver returns when the run stops at a gate."""

    def __init__(self, stage: str) -> None:
        self.stage = stage


@dataclass(frozen=True, slots=True)
class _Superseded:
    """What the driver returns when the gate it met was opened for another definition of the
    stage: superseded (journaled, fenced) by a gate for this one, which nobody approved yet."""

    stage: str
    old: CallRecord
    new: ApprovalRequest

    def error(self, workflow: Workflow, run_id: str) -> DefinitionChangedError:
        """``DefinitionChangedError``, as ``Sagacity.resume`` raises for a changed tool."""
        was, now = _body(self.old.input), _body(self.new.input)
        if was.get("version") != now.get("version"):
            what = f"version {was.get('version')} -> {now.get('version')}"
        elif was.get("gate") != now.get("gate"):
            what = "its gate's reason changed"
        else:
            what = "its definition changed"
        return DefinitionChangedError(
            f"workflow {workflow.name!r} run {run_id!r}: stage {self.stage!r} changed since its gate "
            f"(seq {self.old.gate_seq}) was opened ({what}); nothing ran, the stage is held again "
            f"as request {self.new.journal_seq} for a new approval",
            self.new.journal_seq,
        )


def _superseded(call: _Call, before: CallRecord | None, answer: Any) -> _Superseded | None:
    """The stage's open gate replaced by this presentation (or a concurrent one): the gate now
    pending is not the one the run found."""
    if before is None or before.gate_seq is None or not isinstance(answer, CallPending):
        return None
    if before.status not in (CallStatus.AWAITING_APPROVAL, CallStatus.APPROVED):
        return None
    if answer.request.journal_seq == before.gate_seq:
        return None
    return _Superseded(call.call_id.removeprefix(_STAGE_ID), before, answer.request)


def _live_run() -> _context.SagaRun:
    run = _context.current_run()
    assert run is not None  # the driver runs only inside the run's own saga
    return run


_NOTHING: Any = object()
_JOURNALED: Any = object()


def _dumps(value: Any, what: str, *, output: bool = False) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        message = f"{what} is not JSON ({exc})"
        if output:
            raise StageOutputError(
                message + "; a stage returns JSON values: dict, list, str, number, bool, None"
            ) from exc
        raise StageOutputError(message) from exc


def _code_version(fn: Callable[..., Any]) -> str:
    """A short hash of the function's source (or bytecode when the source is not at hand)."""
    try:
        text = inspect.getsource(fn).encode("utf-8")
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        text = code.co_code if code is not None else repr(fn).encode()
    return "sha256:" + hashlib.sha256(text).hexdigest()[:16]


def _origin(fn: Callable[..., Any]) -> str:
    return f"{_origin_module(fn)}.{getattr(fn, '__qualname__', repr(fn))}"


def _origin_module(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__module__", None) or "__main__")


def _check_spec(workflow: Workflow, stage: Stage, check: _Check) -> ToolSpec:
    def run_check(workflow: str, stage: str, check: str, version: str, input: Any) -> str:
        raise SagaStateError("a workflow check runs only inside its run")

    run_check.__module__ = _origin_module(check.fn)
    run_check.__qualname__ = f"{workflow.name}.{stage.name}.{check.name}"
    return ToolSpec(f"{workflow.name}/{stage.name}#{check.name}", run_check)


def _check_input(workflow: Workflow, stage: Stage, check: _Check, value: Any) -> str:
    body = {
        "workflow": workflow.name,
        "stage": stage.name,
        "check": check.name,
        "version": stage.version,
        "input": value,
    }
    return _dumps(body, f"the input of check {check.name!r}")


def _verdict_json(result: Any, check: _Check) -> str:
    if result is None or result is True:
        return _dumps({"passed": True}, "a check's verdict")
    if result is False:
        return _dumps({"passed": False, "reason": f"check {check.name!r} failed"}, "a check's verdict")
    if isinstance(result, CheckResult):
        body: dict[str, Any] = {"passed": bool(result.passed)}
        if result.reason:
            body["reason"] = result.reason
        return _dumps(body, "a check's verdict")
    raise StageOutputError(
        f"check {check.name!r} returned {type(result).__name__}; a check returns True, False, None "
        "or CheckResult(passed, reason)"
    )


def _run_check(check: _Check, value: Any) -> str:
    return _verdict_json(check.fn(value), check)


async def _run_check_async(check: _Check, value: Any) -> str:
    result = check.fn(value)
    if inspect.isawaitable(result):
        result = await result
    return _verdict_json(result, check)


def _require_passed(workflow: Workflow, stage: Stage, check: _Check, verdict: Any) -> None:
    if isinstance(verdict, CallRefused | CallRejected | CallPending):
        raise SagaStateError(
            f"workflow {workflow.name!r} check {check.name!r}: {getattr(verdict, 'reason', verdict)}"
        )
    body = json.loads(verdict)
    if not body.get("passed"):
        raise CheckFailedError(
            f"workflow {workflow.name!r}: check {check.name!r} before stage {stage.name!r} failed: "
            f"{body.get('reason') or 'no reason given'}",
            stage=stage.name,
            check=check.name,
            reason=str(body.get("reason") or ""),
        )


def _replayed(record: CallRecord | None) -> str | None:
    """The journaled result of a stage or check that already executed: replayed as it was,
    whatever the definition in force now (only what has not run binds the current one)."""
    if record is not None and record.status is CallStatus.EXECUTED:
        return record.result
    return None


def _stage_output(workflow: Workflow, stage: Stage, outcome: Any) -> Any:
    if isinstance(outcome, CallRefused):
        raise SagaStateError(f"workflow {workflow.name!r} stage {stage.name!r}: {outcome.reason}")
    if isinstance(outcome, CallRejected):
        raise SagaStateError(
            f"workflow {workflow.name!r} stage {stage.name!r} was rejected: {outcome.reason}"
        )
    return json.loads(outcome)


def _body(text: str) -> dict[str, Any]:
    try:
        body = json.loads(text)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _workflow_of(saga: SagaView) -> str:
    """The workflow whose stages saga ``saga`` journaled ("" for a plain saga)."""
    return _workflow_named((call_id, found.tool_name, found.input) for call_id, found in saga.keyed.items())


def _state_calls(state: SagaState) -> Iterable[tuple[str, str, str]]:
    for call_id, found in state.keyed.items():
        entry = found.entry if isinstance(found, Gate) else found.intent
        yield call_id, entry.tool_name, entry.input


def _workflow_named(calls: Iterable[tuple[str, str, str]]) -> str:
    """The workflow of the first stage or check among a saga's keyed calls, given as (call id,
    tool name, input); "" when there is none (a plain saga). A run's first call is its first
    stage or that stage's first check, so a run that stopped at its first check is found too."""
    for call_id, tool_name, text in calls:
        if call_id.startswith((_STAGE_ID, _CHECK_ID)):
            name = _body(text).get("workflow")
            if isinstance(name, str) and tool_name.startswith(name + "/"):
                return name
    return ""


def _journaled_input(saga: SagaView | None, workflow: Workflow) -> Any:
    """The run's input, journaled with its first stage (or that stage's first check)."""
    first = workflow.stages[0]
    call_ids = [f"{_CHECK_ID}{first.name}:{c.name}" for c in first.checks] + [f"{_STAGE_ID}{first.name}"]
    for call_id in call_ids:
        found = saga.find(call_id) if saga is not None else None
        body = _body(found.input) if found is not None else {}
        if "input" in body:
            return body["input"]
    return _NOTHING


def _view(workflow: Workflow, saga: SagaView) -> WorkflowView:
    """Run ``saga`` of ``workflow`` stage by stage: a projection of the saga's one view."""
    calls = {c.seq: c for c in saga.calls}
    undone = {c.executed_seq: c for c in saga.compensations}
    stages: list[StageView] = []
    current: str | None = None
    for stage in workflow.stages:
        record = call_record(saga, f"{_STAGE_ID}{stage.name}")
        checks = tuple(_check_view(saga, stage, c) for c in stage.checks)
        view = _stage_view(saga, stage, record, checks, calls, undone)
        stages.append(view)
        if current is None and view.status not in _GOT_PAST:
            current = stage.name
    return WorkflowView(
        saga.saga_id,
        workflow.name,
        saga.status,
        current,
        tuple(stages),
        saga.started_at,
        saga.updated_at,
        saga.valid,
    )


def _check_view(saga: SagaView, stage: Stage, check: _Check) -> CheckView:
    record = call_record(saga, f"{_CHECK_ID}{stage.name}:{check.name}")
    if record is None:
        return CheckView(check.name, "PENDING")
    if record.status is CallStatus.EXECUTED and record.result is not None:
        body = json.loads(record.result)
        return CheckView(
            check.name, "PASSED" if body.get("passed") else "FAILED", str(body.get("reason") or "")
        )
    status = _STATUS_OF[record.status]
    if status is StageStatus.FAILED:
        return CheckView(check.name, "FAILED", "the check raised")
    return CheckView(check.name, str(status))


def _stage_view(
    saga: SagaView,
    stage: Stage,
    record: CallRecord | None,
    checks: tuple[CheckView, ...],
    calls: Mapping[int, CallView],
    undone: Mapping[int, CompensationView],
) -> StageView:
    if record is None:
        failed_check = any(c.status in ("FAILED", "DENIED") for c in checks)
        return StageView(
            stage.name,
            StageStatus.FAILED if failed_check else StageStatus.PENDING,
            stage.gate is not None,
            checks=checks,
        )
    body = _body(record.input)
    call = calls.get(record.seq)  # None while the stage waits at its gate
    # The policy's verdict on the stage: journaled on its gate when it was held, else its INTENT.
    decided_at = record.gate_seq if record.gate_seq is not None else record.seq
    verdict = next((parse_verdict(e.payload) for e in saga.entries if e.seq == decided_at), None)
    policy = verdict.decision if verdict is not None else None
    gate = None
    if record.gate_seq is not None:
        journaled = next(g for g in saga.gates if g.seq == record.gate_seq)
        held = policy.reason if policy is not None and policy.action is Action.HOLD else ""
        gate = GateView(
            record.gate_seq,
            journaled.approvals_required,  # the stage's number, or more when a policy rule held it
            record.approvers,
            str(body.get("gate", "")) or held,
            record.input,
            record.input_hash,
            record.rejected_by,
            record.reason,
        )
    status = _STATUS_OF[record.status]
    outcome = call.outcome if call is not None else None
    compensation = undone.get(outcome.seq) if outcome is not None else None
    if compensation is not None and compensation.outcome is not None:
        status = StageStatus(str(compensation.outcome.phase))
    failed = outcome is not None and outcome.phase == Phase.FAILED
    return StageView(
        stage.name,
        status,
        stage.gate is not None,
        body.get("input"),
        json.loads(record.result) if record.result is not None else None,
        gate,
        checks,
        call.started_at if call is not None else None,
        outcome.timestamp if outcome is not None else None,
        outcome.payload_text if failed and outcome is not None else "",
        policy,
    )


#: Stages a run got past (done, and maybe undone since): the current stage is the first other one.
_GOT_PAST = frozenset({StageStatus.COMPLETED, StageStatus.COMPENSATED, StageStatus.COMPENSATION_FAILED})

#: A stage's (or check's) status from the saga view's status of its call: every CallStatus, so
#: the view never guesses (RUNNING only when the saga view says a living process runs the run).
_STATUS_OF: Mapping[CallStatus, StageStatus] = {
    CallStatus.EXECUTED: StageStatus.COMPLETED,
    CallStatus.FAILED: StageStatus.FAILED,
    CallStatus.RUNNING: StageStatus.RUNNING,
    CallStatus.IN_DOUBT: StageStatus.IN_DOUBT,
    CallStatus.PASSED: StageStatus.DENIED,  # closed without running: a workflow passes no control flow
    CallStatus.AWAITING_APPROVAL: StageStatus.AWAITING_APPROVAL,
    CallStatus.APPROVED: StageStatus.APPROVED,
    CallStatus.REJECTED: StageStatus.REJECTED,
}
