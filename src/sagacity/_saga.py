"""One live saga: the call protocol (INTENT -> EXECUTED | FAILED), the failure latch, the ending.

A ``SagaRun`` is shared by every context copied from the saga's (tasks, ``to_thread``,
``in_current_saga``), so its mutable state sits behind a lock. The sync and async call paths
drive the same journaling methods and differ only in ``fn()`` versus ``await fn()``: a tool call
is the one hot path, so it is not routed through the generator protocol of ``_effects``, which the
colder operations (the ending, compensation, decisions) share.

A call's INTENT is appended on the journal's fast path, which refuses it (``SagaClosedError``,
before the tool runs) once the saga's compensation has started anywhere; the error is latched,
so the saga's ending joins that compensation.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from sagacity._approvals import awaiting_message, gate
from sagacity._compensation import CompensationRun, compensate, describe
from sagacity._context import Presented, current_principal, enter_call, entered, leave_call, refuse_foreign
from sagacity._effects import Operation, drive, drive_async, finish_shielded
from sagacity._engine import Engine, Row
from sagacity._journal import SagaStart
from sagacity._json import encode_result
from sagacity._keyed import Admission, admit
from sagacity._payloads import CONTROL_FLOW, LIFE_TOOL, end_payload
from sagacity._state import SagaState, closes_saga, fold
from sagacity.errors import (
    AppendConflictError,
    ApprovalRefusedError,
    HaltedError,
    SagaClosedError,
    SagaExistsError,
    SagaNotFoundError,
    SagaRunningElsewhereError,
    SagaStateError,
)
from sagacity.guardrails._deny import deny_call
from sagacity.guardrails._rules import Action
from sagacity.guardrails._verdict import DEFAULT_RULE, Verdict
from sagacity.model import ApprovalRequest, Entry, Phase, SagaResult, SagaStatus
from sagacity.tools import DEFERRED, IMMEDIATE, ToolSpec

_T = TypeVar("_T")

#: Entries a run keeps to decide its END without reading the saga back (``SagaRun._kept``).
_KEPT_AT_MOST = 256

#: Exception types that are an agent framework's control flow, not a tool's failure.
ControlFlow = tuple[type[BaseException], ...]


class SagaRun:
    """The saga live in this process under ``saga_id``."""

    #: The principal the run acts for (``acting_as``, ``Sagacity(principal=)``): its gates name
    #: it as their requester. Set by the facade when it starts the run.
    principal: str | None = None
    #: A saga starting under a new id (``sg.run``, ``sg.saga`` without ``continue_existing``): its
    #: first entry must be the saga's first, or the run is refused (``SagaExistsError``) before
    #: anything is journaled. Cleared once the first entry lands. Set by the facade.
    fresh: bool = False
    #: The start facts this run registered (``Journal.starting``): its first entry, if it is the
    #: saga's first, lands after the saga's START. Set by the facade.
    start: SagaStart | None = None
    #: The START's input of a saga this run continues or resumes (read when the run began), or
    #: None when the saga has no START (or the run did not read it).
    started_input: str | None = None
    #: When the outcome of a call without a durability of its own is committed: ``IMMEDIATE``
    #: (its own commit) or ``DEFERRED`` (held, to ride with the saga's next entry). Set by the facade.
    durability: str = IMMEDIATE

    def __init__(
        self, engine: Engine, saga_id: str, *, existed: bool | None = True, last_seq: int = 0
    ) -> None:
        self.engine = engine
        self.journal = engine.journal
        # A saga new to the journal can only be waiting on gates this run opened, and only a
        # saga others can see gates in can be closed by them. None: not known yet. A saga's
        # start does not read its journal; the run's first append tells (it lands at seq 1 only
        # in a saga that had no entries), and a run that appends nothing reads at its end.
        self.existed = existed
        self.saga_id = saga_id
        self._lock = threading.Lock()
        self._failure: BaseException | None = None
        self._gates: list[ApprovalRequest] = []
        self._last_seq = last_seq
        self._compensated: CompensationRun | None = None  # a refusal in band already compensated
        self._first = threading.Lock()  # a fresh run's first append, one at a time
        self._appended = False  # whether this run journaled anything (then it journals its END)
        # The entries this run appended, by seq: a saga this run wrote whole is known at its end
        # without reading it back (``_own_state``).
        self._written: dict[int, Entry] = {}

    # -- state shared across copied contexts ------------------------------------------------------
    @property
    def failure(self) -> BaseException | None:
        """The first tool error seen, even if the caller swallowed it."""
        with self._lock:
            return self._failure

    def latch(self, exc: BaseException) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = exc

    @property
    def gates(self) -> tuple[ApprovalRequest, ...]:
        with self._lock:
            return tuple(self._gates)

    def _seen(self, seq: int) -> None:
        # Plain int compare-and-store under the GIL; the ending only needs a lower bound.
        self._appended = True
        if seq > self._last_seq:
            if self.existed is None:
                # Another writer's entry before ours: it existed (our own START is not one).
                self.existed = seq > 1 and not (self.start is not None and self.start.landed)
            self._last_seq = seq

    def _kept(self, entry: Entry) -> int:
        """Remember an entry this run appended (a dict store: atomic under the GIL); its seq. A
        long saga's stop being kept past ``_KEPT_AT_MOST``: its END then reads the saga, as a
        read costs little beside that many commits, and memory stays flat."""
        if len(self._written) < _KEPT_AT_MOST:
            self._written[entry.seq] = entry
        return entry.seq

    def _append(self, tool_name: str, phase: Phase, input: str, payload: str) -> int:
        """Append on the fast path and keep what landed: the entry, and any held outcome it
        carried (``durability="deferred"``), so the run's END still needs no read."""
        carried: list[Entry] = []
        entry = self.journal.append(self.saga_id, tool_name, phase, input, payload, carried=carried)
        for outcome in carried:
            self._kept(outcome)
        return self._kept(entry)

    def _own_state(self) -> SagaState | None:
        """The saga's state from the entries this run appended, when they are the whole journal
        as far as this run knows it (its own START at seq 1, then every seq up to its last), else
        None. Deciding on it is as good as on a read: the END is fenced right after the last of
        them (``Engine.decide``), so a row anyone else appended makes it lose, read and decide again.
        """
        start = self.start
        if self.existed is not False or start is None or start.entry is None:
            return None
        entries = sorted(self._written.values(), key=lambda e: e.seq)
        if [e.seq for e in entries] != list(range(2, self._last_seq + 1)):
            return None  # a gap: an entry this run saw but does not hold (a gate's), or another's
        return fold(self.saga_id, [start.entry, *entries])

    def _end_input(self) -> str | None:
        """The START's input, when the saga has a START and this run journaled something: its
        END (same input) is then due when the run's work is done."""
        if not self._appended:
            return None
        start = self.start
        if start is not None and start.landed:
            return start.input
        return self.started_input

    # -- journaling steps -------------------------------------------------------------------------
    def begin(self, spec: ToolSpec, input: str, payload: str = "") -> int:
        """Journal INTENT (durable before the tool runs; ``payload``: the policy's verdict) and
        return its seq."""
        seq = self._begin(spec, input, payload, None)
        assert seq is not None  # only debits riding with the INTENT can lose without raising
        return seq

    def _begin(self, spec: ToolSpec, input: str, payload: str, verdict: Verdict | None) -> int | None:
        """``begin``; with a ``verdict`` whose debits ride with the INTENT (all or none), None
        when that insert lost a race: nothing was written, and the call is judged again."""
        riders = verdict.riders if verdict is not None else ()
        try:
            if spec.intent_payload:  # an MCP tool: the definition it goes out under
                payload = f"{payload}\n{spec.intent_payload}" if payload else spec.intent_payload
            if riders:
                seq = self._first_append(lambda new: self._paid(spec, input, payload, verdict, new))
            elif self.fresh:
                seq = self._first_append(
                    lambda new: self._kept(
                        self.journal.append(
                            self.saga_id, spec.name, Phase.INTENT, input, payload, new_saga=new
                        )
                    )
                )
            else:
                seq = self._append(spec.name, Phase.INTENT, input, payload)
        except (SagaClosedError, SagaExistsError) as exc:
            self.latch(exc)
            raise
        if seq is not None:
            self._seen(seq)
        return seq

    def _paid(self, spec: ToolSpec, input: str, payload: str, verdict: Any, new: bool) -> int | None:
        """The INTENT with the debits its verdict planned, in one insert; None if it lost."""
        landed = self.journal.append_with(
            self.saga_id, spec.name, Phase.INTENT, input, payload, verdict.riders, new_saga=new
        )
        guard = self.engine.guard
        assert guard is not None
        guard.settled(verdict, landed)
        return None if landed is None else self._kept(landed[-1])

    def _first_append(self, append: Callable[[bool], _T]) -> _T:
        """A fresh run's first entry: ``append(True)`` must land at seq 1, else the saga existed
        before this run and the run is refused. Calls racing to be first wait for it (None: the
        first append lost a race and wrote nothing, so the run is still fresh)."""
        with self._first:
            if not self.fresh:  # another call of this run landed first
                return append(False)
            try:
                seq = append(True)
            except SagaExistsError:
                raise self.exists_error() from None
            if seq is not None:
                self.fresh = False
            return seq

    def exists_error(self) -> SagaExistsError:
        """What refusing this fresh run says: the saga that already holds the id, and what to do."""
        state = self.engine.snapshot(self.saga_id)
        if state.start is not None:
            try:
                refuse_foreign(self.saga_id, state.start.input, self.principal, current_principal())
            except SagaNotFoundError:  # another principal's saga: tell nothing about it
                return SagaExistsError(
                    f"saga id {self.saga_id!r} cannot be used: a saga id names one run, so nothing "
                    "was journaled and no tool ran. Start a new saga id"
                )
        return SagaExistsError(
            f"saga {self.saga_id!r} already exists ({state.status.value}, {state.entry_count} "
            "journal entries): a saga id names one run, so nothing was journaled and no tool ran. "
            "Start a new saga id, or continue this saga on purpose with "
            f"`sg.saga({self.saga_id!r}, continue_existing=True)`"
        )

    def _defers(self, spec: ToolSpec) -> bool:
        """Whether the call's outcome rides with the saga's next entry: the tool's own choice,
        else the saga's for a compensatable tool (an irreversible one commits its own)."""
        if spec.durability is not None:
            return spec.durability == DEFERRED
        return self.durability == DEFERRED and not spec.irreversible

    def _outcome(self, spec: ToolSpec, phase: Phase, input: str, payload: str, may_defer: bool) -> None:
        """Journal the call's outcome now, or hold it for the saga's next entry."""
        if may_defer and self._defers(spec):
            self.journal.hold(self.saga_id, spec.name, phase, input, payload)
        else:
            self._seen(self._append(spec.name, phase, input, payload))

    def failed(self, spec: ToolSpec, input: str, exc: BaseException, may_defer: bool = True) -> None:
        self.latch(exc)
        self._outcome(spec, Phase.FAILED, input, describe(exc), may_defer)
        guard = self.engine.guard
        if guard is not None:
            guard.record_outcome(self.saga_id, spec.name, self.principal, failed=True)

    def _record_outcome(self, spec: ToolSpec, input: str, result: Any, may_defer: bool = True) -> None:
        """Journal EXECUTED with the tool's result (``may_defer``: unless a framework's keyed
        call, whose replay reads its outcome from the journal)."""
        payload = result if type(result) is str else encode_result(result)
        try:
            self._outcome(spec, Phase.EXECUTED, input, payload, may_defer)
        except BaseException as exc:
            # The effect happened but its EXECUTED is not durable: the INTENT stays open (in
            # doubt, for a human) and the saga must not carry on as if all were well.
            self.latch(exc)
            raise
        guard = self.engine.guard
        if guard is not None:
            guard.record_outcome(self.saga_id, spec.name, self.principal, failed=False)

    def _gate(self, spec: ToolSpec, input: str, verdict: Verdict | None = None) -> str:
        try:
            if self.fresh:
                seq = self._first_append(
                    lambda new: self._gated(
                        gate(
                            self.engine,
                            self.saga_id,
                            spec,
                            input,
                            verdict,
                            requester=self.principal,
                            new_saga=new,
                        )
                    )
                )
                return awaiting_message(spec, self.saga_id, seq, _held_by(verdict))
            request = gate(self.engine, self.saga_id, spec, input, verdict, requester=self.principal)
        except (SagaClosedError, SagaExistsError) as exc:
            self.latch(exc)
            raise
        return awaiting_message(spec, self.saga_id, self._gated(request), _held_by(verdict))

    def _gated(self, request: ApprovalRequest) -> int:
        self._seen(request.journal_seq)
        with self._lock:
            self._gates.append(request)
        return request.journal_seq

    # -- calls ------------------------------------------------------------------------------------
    def call(self, spec: ToolSpec, input: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.engine.guard is not None:
            return self._guarded(spec, input, args, kwargs)
        if spec.irreversible:
            return self._gate(spec, input)
        seq = self.begin(spec, input)
        return self.execute(spec, seq, input, args, kwargs)

    def _judged(self, spec: ToolSpec, input: str) -> tuple[Any, int]:
        """Judge the call and journal what the verdict says: what the call returns without
        running (a gate's or a denial's message to the model), or ``_RUN`` and the INTENT's seq.
        An allowed call's budget debits ride in its INTENT's insert; when that insert loses a race
        (a meter or the saga moved), the call is judged again on what moved."""
        guard = self.engine.guard
        assert guard is not None
        for _ in range(self.journal.max_append_attempts):
            verdict: Verdict = guard.judge(
                self.saga_id,
                spec.name,
                input,
                irreversible=spec.irreversible,
                approvals=spec.approvals_required,
                principal=self.principal,
                with_intent=True,
            )
            if verdict.action is Action.DENY:
                return self._deny(spec, input, verdict), 0
            if verdict.action is Action.HOLD:
                return self._gate(spec, input, verdict), 0
            try:
                seq = self._begin(spec, input, verdict.lines, verdict)
            except BaseException:
                guard.give_back_verdict(self.saga_id, verdict)
                raise
            if seq is not None:
                return _RUN, seq
        raise AppendConflictError(
            f"{spec.name} in saga {self.saga_id!r}: its INTENT and budget debits lost the race "
            f"{self.journal.max_append_attempts} times; nothing was written and the tool did not run"
        )

    def _guarded(self, spec: ToolSpec, input: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        answer, seq = self._judged(spec, input)
        if answer is not _RUN:
            return answer
        return self.execute(spec, seq, input, args, kwargs)

    def _deny(self, spec: ToolSpec, input: str, verdict: Verdict) -> str:
        """Journal the denied call (its INTENT with the verdict, closed by FAILED ``denied by
        policy``, in one commit); a halt is latched, so the saga compensates."""
        try:
            if self.fresh:
                self._first_append(
                    lambda new: (
                        deny_call(self.engine, self.saga_id, spec.name, input, verdict, new_saga=new)[-1].seq
                    )
                )
            else:
                deny_call(self.engine, self.saga_id, spec.name, input, verdict)
        except SagaExistsError as exc:
            self.latch(exc)
            raise
        if verdict.halts:
            error = HaltedError(f"{spec.name} was refused in saga {self.saga_id!r}: {verdict.reason}")
            self.latch(error)
            raise error
        return verdict.model_message(spec.name)

    def execute(
        self,
        spec: ToolSpec,
        seq: int,
        input: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        invoke: Callable[[], Any] | None = None,
        control_flow: ControlFlow = (),
    ) -> Any:
        """Run the call whose INTENT is ``seq`` (retrying as the tool says) and journal how it
        ended. ``invoke``: a framework's handler runs the tool instead (``call_keyed``), and its
        ``control_flow`` exceptions close the call without failing the saga."""
        call = _Call(self, spec, seq, args, kwargs, invoke)
        steps = self._attempts(spec, input, control_flow, keyed=invoke is not None)
        answer: Any = None
        while not isinstance(step := steps.send(answer), _Tried):
            if isinstance(step, _Try):
                answer = call.once(step.attempt)
            else:
                answer = None
                if isinstance(step, _Pause):
                    time.sleep(step.seconds)
                else:
                    step.fn(spec, input, step.what)
        return _ended(step)

    def _attempts(self, spec: ToolSpec, input: str, control_flow: ControlFlow, keyed: bool) -> _Attempts:
        """How a call is tried, retried and journaled, written once for ``execute`` and
        ``execute_async``: it asks its shell for each try, pause and journal write (the shells
        differ only in how they try, wait, and where the journal I/O runs) and ends with the try
        the call ended with. A keyed call's outcome is never held (``_keyed`` reads it)."""
        record = partial(self._record_outcome, may_defer=not keyed)
        fail = partial(self.failed, may_defer=not keyed)
        attempt = 1
        while True:
            tried: _Tried = yield _Try(attempt)
            exc = tried.error
            if exc is None:
                yield _Journal(record, tried.result)
            elif isinstance(exc, control_flow):
                yield _Journal(self._passed, exc)
            elif (delay := _retry_delay(spec, exc, attempt)) is not None:
                yield _Pause(delay)
                attempt += 1
                continue
            else:
                yield _Journal(fail, exc)
            yield tried
            return

    async def call_async(
        self, spec: ToolSpec, input: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if self.engine.guard is not None:
            answer, seq = await asyncio.to_thread(self._judged, spec, input)
            if answer is not _RUN:
                return answer
            return await self.execute_async(spec, seq, input, args, kwargs)
        if spec.irreversible:
            return await asyncio.to_thread(self._gate, spec, input)
        seq = await asyncio.to_thread(self.begin, spec, input)
        return await self.execute_async(spec, seq, input, args, kwargs)

    async def execute_async(
        self,
        spec: ToolSpec,
        seq: int,
        input: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        invoke: Callable[[], Any] | None = None,
        control_flow: ControlFlow = (),
    ) -> Any:
        """``execute`` from a coroutine: journal I/O in worker threads; ``invoke()`` may return
        an awaitable."""
        call = _Call(self, spec, seq, args, kwargs, invoke)
        steps = self._attempts(spec, input, control_flow, keyed=invoke is not None)
        answer: Any = None
        while not isinstance(step := steps.send(answer), _Tried):
            if isinstance(step, _Try):
                answer = await call.once_async(step.attempt)
            else:
                answer = None
                if isinstance(step, _Pause):
                    await asyncio.sleep(step.seconds)
                else:  # cancelled mid-call, the effect is unknown: FAILED is journaled all the same
                    await finish_shielded(asyncio.to_thread(step.fn, spec, input, step.what))
        return _ended(step)

    # -- calls an agent framework makes, keyed by its call id (``_keyed``) -------------------------
    def call_keyed(
        self, spec: ToolSpec, input: str, call_id: str, invoke: Callable[[], Any], how: Presented
    ) -> Any:
        """Journal and run the framework's call ``call_id`` of ``spec`` once, whatever number of
        times it is presented; ``invoke()`` runs it (the framework's own handler, which calls the
        decorated tool: inside ``invoke`` that tool runs its function directly).

        Returns the result, the journaled result of a call already executed, a ``CallPending``
        (gated, the model is told to wait), a ``CallRejected`` (``on_reject="continue"``) or a
        ``CallRefused`` (re-presented with other arguments, or running elsewhere / in doubt).
        """
        try:
            if self.fresh:
                self._refuse_existing()
            admission = drive(self._admit(spec, input, call_id, how))
        except (SagaClosedError, SagaExistsError, ApprovalRefusedError, HaltedError) as exc:
            self.latch(exc)
            raise
        outcome = self._admitted(admission)
        if outcome is not _RUN:
            return outcome
        return self.execute(spec, admission.seq, input, (), {}, invoke=invoke, control_flow=how.control_flow)

    async def call_keyed_async(
        self, spec: ToolSpec, input: str, call_id: str, invoke: Callable[[], Any], how: Presented
    ) -> Any:
        """``call_keyed`` from a coroutine: ``invoke()`` may return an awaitable; journal I/O runs
        in worker threads."""
        try:
            if self.fresh:
                await asyncio.to_thread(self._refuse_existing)
            admission = await drive_async(self._admit(spec, input, call_id, how))
        except (SagaClosedError, SagaExistsError, ApprovalRefusedError, HaltedError) as exc:
            self.latch(exc)
            raise
        outcome = await asyncio.to_thread(self._admitted, admission)
        if outcome is not _RUN:
            return outcome
        return await self.execute_async(
            spec, admission.seq, input, (), {}, invoke=invoke, control_flow=how.control_flow
        )

    def _admit(self, spec: ToolSpec, input: str, call_id: str, how: Presented) -> Operation[Admission]:
        """What this presentation of ``call_id`` is, as an operation either entry point drives."""
        return admit(
            self.engine,
            self.saga_id,
            spec,
            input,
            call_id,
            edited=how.edited,
            on_reject=how.on_reject,
            wait=how.wait,
            requester=self.principal,
            owner=how.owner,
        )

    def _refuse_existing(self) -> None:
        """A framework's call as a fresh run's first: its admission reads the journal anyway, so
        the saga is checked by a read (two fresh runs racing here may both pass)."""
        with self._first:
            if self.fresh and self.engine.snapshot(self.saga_id).entry_count:
                raise self.exists_error()
            self.fresh = False

    def _admitted(self, admission: Admission) -> Any:
        """What an admission means here: ``_RUN``, or what the call returns without running."""
        if admission.refused is not None:
            if admission.compensated is not None:
                with self._lock:
                    self._compensated = admission.compensated
                self.latch(admission.refused)
            raise admission.refused
        if admission.replay is not None:
            return admission.replay.payload_text
        if admission.declined is not None:
            return admission.declined
        if admission.gated is not None:
            self._seen(admission.gated.journal_seq)
            with self._lock:
                self._gates.append(admission.gated)
        if admission.pending is not None:
            return admission.pending
        if admission.rejected is not None:
            return admission.rejected
        self._seen(admission.seq)
        return _RUN

    def _passed(self, spec: ToolSpec, input: str, exc: BaseException) -> None:
        """The framework's control flow left the tool: close the INTENT, not a failure."""
        entry = self.journal.append(
            self.saga_id, spec.name, Phase.FAILED, input, CONTROL_FLOW + describe(exc)
        )
        self._seen(self._kept(entry))

    # -- ending -----------------------------------------------------------------------------------
    def conclusion(self, value: Any, error: BaseException | None) -> Operation[SagaResult]:
        """The saga's result; compensates first when the work raised, a tool failed, or another
        process started the saga's compensation meanwhile."""
        if isinstance(self.failure, SagaExistsError):
            raise self.failure  # this run journaled nothing: there is nothing of its own to end
        if isinstance(error, SagaRunningElsewhereError):
            raise error  # nothing here failed: the saga goes on in the process that runs it
        failure = error if error is not None else self.failure
        unknown = self.existed is None and failure is None and not self._gates
        if unknown:
            self._read_existing()  # nothing was appended: read what the saga is, closed or not
        visible = self.existed is not False or bool(self._gates)  # others decide on what they see
        if failure is None and visible and not unknown:
            failure = self._closed_elsewhere()
        if failure is None:
            settled = self._settled(value, visible)
            if settled is not None:
                return settled
            failure = SagaClosedError(f"saga {self.saga_id!r} was compensated by another process")
        run = yield from compensate(self.engine, self.saga_id, describe(failure))
        assert run is not None  # a waiting run always gets the lease
        with self._lock:
            early = self._compensated
        if early is not None and not run.report:
            run = CompensationRun(run.status, early.report)  # it ran in band, inside the call
        return run.result(self.saga_id, value, failure)

    def _read_existing(self) -> None:
        """Learn whether the saga has entries; refuse one whose journal closed before this run."""
        state = self.engine.snapshot(self.saga_id)
        if self.fresh and state.entry_count:
            raise self.exists_error()
        if state.closed:
            raise SagaStateError(closed_message(self.saga_id, state.status.value))
        self.existed = state.entry_count > 0
        self._last_seq = max(self._last_seq, state.last_seq)

    def _closed_elsewhere(self) -> SagaClosedError | None:
        newer = self.journal.entries_after(self.saga_id, self._last_seq)
        if any(closes_saga(e) for e in newer) or self.journal.is_closed(self.saga_id):
            return SagaClosedError(f"saga {self.saga_id!r} was compensated by another process")
        return None

    def _settled(self, value: Any, visible: bool) -> SagaResult | None:
        """The result of a run that did not fail; None if the saga turns out to be closing.

        The saga's END (due when this run journaled something) is a decision like any other:
        made on the journal read now, appended only right after the entry that read ends with,
        and saying what that state is — AWAITING_APPROVAL while a gate is open, else COMPLETED.
        None is appended when the journal already ends with an END (another run's, describing
        this same state), or while a call is in flight (its own run ends the saga; if it dies,
        the saga reads IN_DOUBT and, once a person settles the call, ABANDONED).
        """
        facts = self._end_input()
        if facts is None and not visible:  # this run journaled nothing in a saga it began
            return SagaResult(self.saga_id, SagaStatus.COMPLETED, value, None, (), ())
        state = self._own_state() or self.engine.snapshot(self.saga_id)
        rows: Sequence[ApprovalRequest] = ()
        if state.open_gates:  # read before the END's decision, which a decision meanwhile moves
            rows = self.journal.read(self.engine.store.list_approval_requests, self.saga_id)
        if facts is not None:
            try:
                landed = self.engine.decide(state, partial(_end_rows, facts))
            except SagaClosedError:
                return None  # compensation started elsewhere meanwhile: the saga did not complete
            for entry in landed:
                self._seen(entry.seq)
        if state.closed:
            return None
        open_seqs = {gate.entry.seq for gate in state.open_gates}
        pending = tuple(r for r in rows if r.journal_seq in open_seqs)
        return SagaResult(self.saga_id, _end_status(state), value, None, (), pending)


def _end_status(state: SagaState) -> SagaStatus:
    """How a saga whose work returned stands: waiting for a decision on a gate, or done."""
    return SagaStatus.AWAITING_APPROVAL if state.open_gates else SagaStatus.COMPLETED


def _end_rows(facts: str, now: SagaState) -> list[Row]:
    """The END that ``now`` calls for (``Engine.decide``): none when the saga is closing, already
    ends with an END, or has a call or compensation in flight."""
    if now.closed or now.ended is not None or now.open_calls or now.open_compensations:
        return []
    return [(LIFE_TOOL, Phase.EXECUTED, facts, end_payload(_end_status(now)))]


def _held_by(verdict: Verdict | None) -> str:
    """Which guardrails rule held a call for approval (empty: the tool's own declaration)."""
    if verdict is None or verdict.rule == DEFAULT_RULE:
        return ""
    return f"rule {verdict.rule}: {verdict.reason}" if verdict.reason else f"rule {verdict.rule}"


def closed_message(saga_id: str, status: str) -> str:
    return f"saga {saga_id!r} is {status}; its journal is closed, start a new saga id"


@dataclass(frozen=True, slots=True)
class _Tried:
    """How one try of a tool ended: its result, or what it raised (any ``BaseException``)."""

    result: Any = None
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class _Try:
    """Try the tool (``attempt`` counts from 1) and send back a ``_Tried``."""

    attempt: int


@dataclass(frozen=True, slots=True)
class _Pause:
    """Wait before the next try."""

    seconds: float


@dataclass(frozen=True, slots=True)
class _Journal:
    """Journal how the call ended: ``fn(spec, input, what)`` (blocking journal I/O)."""

    fn: Callable[[ToolSpec, str, Any], object]
    what: Any


#: ``SagaRun._attempts``: the steps it asks for, the last of them the try the call ended with.
_Attempts = Generator[_Try | _Pause | _Journal | _Tried, Any, None]


@dataclass(frozen=True, slots=True)
class _Call:
    """One call of a tool in a saga run, tried from sync or async code."""

    run: SagaRun
    spec: ToolSpec
    seq: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    invoke: Callable[[], Any] | None

    def once(self, attempt: int) -> _Tried:
        """One try in this thread (an ``async def`` tool gets an event loop of its own)."""
        with self._trying(attempt) as tried:
            if self.invoke is None:
                result = self.spec.fn(*self.args, **self.kwargs)
                if self.spec.is_async:
                    result = asyncio.run(result)
            else:
                with entered(_Invoking(self.run, self.spec)):
                    result = self.invoke()
                if inspect.isawaitable(result):
                    raise TypeError(
                        f"invoke() of {self.spec.name} returned an awaitable: use call_keyed_async"
                    )
            tried.append(_Tried(result))
        return tried[-1]

    async def once_async(self, attempt: int) -> _Tried:
        """One try on the caller's loop (a handler's awaitable awaited inside its context)."""
        with self._trying(attempt) as tried:
            if self.invoke is None:
                result = self.spec.fn(*self.args, **self.kwargs)
                if self.spec.is_async:
                    result = await result
            else:
                with entered(_Invoking(self.run, self.spec)):
                    result = self.invoke()
                    if inspect.isawaitable(result):
                        result = await result
            tried.append(_Tried(result))
        return tried[-1]

    @contextmanager
    def _trying(self, attempt: int) -> Iterator[list[_Tried]]:
        """The call's context for one try; what the try raised, of any kind, becomes its _Tried."""
        token = enter_call((self.run.saga_id, self.seq, self.spec.name, attempt))
        tried: list[_Tried] = []
        try:
            yield tried
        except BaseException as exc:  # noqa: BLE001 - every way a try ends is journaled by _attempts
            tried.append(_Tried(error=exc))
        finally:
            leave_call(token)


def _ended(tried: _Tried) -> Any:
    """The call's result, or what it raised, raised again as it was."""
    if tried.error is not None:
        raise tried.error
    return tried.result


def _retry_delay(spec: ToolSpec, exc: BaseException, attempt: int) -> float | None:
    """Seconds to wait before the next try, or None when the failure is final."""
    if spec.retry is not None and spec.retry.should_retry(exc, attempt):
        return spec.retry.delay(attempt)
    return None


#: ``_admitted``'s answer when the tool is to run now.
_RUN: Any = object()


class _Invoking:
    """The live saga as the decorated tool sees it while a framework invokes a journaled call.

    The framework's handler calls the ``@tool`` function itself; that call is the one already
    journaled, so it runs the function directly, once. Any other tool called meanwhile is
    journaled by the saga as usual. Replacing the context's run for the duration keeps the
    decorated tool's own path (``current_run()``) free of any check for this case.
    """

    __slots__ = ("_run", "_spec", "_used", "saga_id")

    def __init__(self, run: SagaRun, spec: ToolSpec) -> None:
        self._run = run
        self._spec = spec
        self._used = False
        self.saga_id = run.saga_id

    def _own(self, spec: ToolSpec) -> bool:
        if spec is self._spec and not self._used:
            self._used = True
            return True
        return False

    def call(self, spec: ToolSpec, input: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._own(spec):
            return spec.fn(*args, **kwargs)
        return self._run.call(spec, input, args, kwargs)

    async def call_async(
        self, spec: ToolSpec, input: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if self._own(spec):
            return await spec.fn(*args, **kwargs)
        return await self._run.call_async(spec, input, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run, name)
