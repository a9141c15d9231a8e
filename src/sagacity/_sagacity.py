"""The ``Sagacity`` facade: a URL in, the whole API out."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from sagacity._approvals import Approvals, age, claim, require_identity, utc_now
from sagacity._compensation import Compensator
from sagacity._context import entered
from sagacity._export import export_lines
from sagacity._journal import DEFAULT_APPEND_ATTEMPTS, DEFAULT_RECONNECT_ATTEMPTS, Journal
from sagacity._json import require_storable
from sagacity._saga import SagaRun
from sagacity._state import (
    GATE_TOOL,
    SagaState,
    compensated_payload,
    compensation_failed_payload,
    decision_payload,
    fold,
    resolution_input,
)
from sagacity.chain import Verification
from sagacity.errors import (
    BlockingCallError,
    InvalidValueError,
    PayloadMismatchError,
    SagaNotFoundError,
    SagaStateError,
)
from sagacity.model import (
    ApprovalDecision,
    ApprovalRequest,
    Entry,
    InDoubtCall,
    Phase,
    SagaResult,
    SagaStatus,
    SagaSummary,
)
from sagacity.stores import Store, default_url, open_store
from sagacity.tools import ToolRegistry
from sagacity.tools import registry as default_registry

P = ParamSpec("P")
T = TypeVar("T")

#: How long an approval request stays valid unless the tool or the Sagacity says otherwise.
DEFAULT_APPROVAL_TTL = timedelta(hours=24)
_LOCK_STRIPES = 64


def _refuse_in_loop(name: str) -> None:
    """A blocking call would stall every task of a running loop: name the twin instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise BlockingCallError(
        f"Sagacity.{name}() blocks; inside a running event loop use `await sg.{name}_async(...)`"
    )


class Sagacity:
    """Sagas journaled in one store.

    ``url`` picks the store: ``sqlite:///path.db`` (the embedded default), ``postgresql://...``
    or ``memory://``; without one, ``$SAGACITY_URL``, else ``sqlite:///sagacity.db``. The schema
    is created if missing. ``max_append_attempts`` bounds how often one append may lose the race
    for the next seq before it raises; ``store_options`` go to the store's constructor (e.g.
    ``max_connections`` for PostgreSQL). ``approval_ttl`` is how long approval requests stay
    valid by default (``None``: never expire; a tool's own ``approval_ttl`` wins). ``registry``
    is where tools are looked up by name (the process-wide one by default).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        store: Store | None = None,
        max_append_attempts: int = DEFAULT_APPEND_ATTEMPTS,
        reconnect_attempts: int = DEFAULT_RECONNECT_ATTEMPTS,
        init_schema: bool = True,
        approval_ttl: timedelta | float | None = DEFAULT_APPROVAL_TTL,
        registry: ToolRegistry | None = None,
        **store_options: Any,
    ) -> None:
        self.store: Store = store if store is not None else open_store(url or default_url(), **store_options)
        self.url = self.store.url
        self.journal = Journal(
            self.store, max_append_attempts=max_append_attempts, reconnect_attempts=reconnect_attempts
        )
        if init_schema:
            self.journal.read(self.store.init_schema)
        self.approval_ttl = (
            timedelta(seconds=approval_ttl) if isinstance(approval_ttl, int | float) else approval_ttl
        )
        self.registry = registry if registry is not None else default_registry
        self._approvals = Approvals(self)
        self._compensator = Compensator(self.journal, self.registry)
        self._locks = [threading.RLock() for _ in range(_LOCK_STRIPES)]
        self._live: dict[str, int] = {}
        self._live_lock = threading.Lock()

    # -- running sagas -----------------------------------------------------------------------------
    def run(self, saga_id: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> SagaResult:
        """Run ``fn(*args, **kwargs)`` as saga ``saga_id`` and return how it ended.

        Does not raise for the work's failures: they compensate and come back in the result.
        """
        _refuse_in_loop("run")
        if inspect.iscoroutinefunction(fn):
            raise InvalidValueError(f"{fn.__name__} is a coroutine function: use `await sg.run_async(...)`")
        run = self._start(saga_id)
        value: Any = None
        error: BaseException | None = None
        try:
            with entered(run):
                value = fn(*args, **kwargs)
        except (KeyboardInterrupt, SystemExit):
            self._leave(run)
            raise
        except BaseException as exc:  # noqa: BLE001 - any failure of the work compensates
            error = exc
        return self._conclude(run, value, error)

    async def run_async(
        self, saga_id: str, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> SagaResult:
        """``run`` for ``async def`` work (a sync ``fn`` runs in a worker thread)."""
        run = await asyncio.to_thread(self._start, saga_id)
        try:
            with entered(run):
                if inspect.iscoroutinefunction(fn):
                    value: Any = await fn(*args, **kwargs)
                else:
                    value = await asyncio.to_thread(fn, *args, **kwargs)
        except (KeyboardInterrupt, SystemExit):
            self._leave(run)
            raise
        except BaseException as exc:  # noqa: BLE001 - any failure of the work compensates
            return await self._conclude_async(run, None, exc)
        return await self._conclude_async(run, value, None)

    def saga(self, saga_id: str) -> SagaScope:
        """``with sg.saga(id) as saga:`` (or ``async with``); ``saga.result`` after the block.

        An exception from the block is re-raised after compensating.
        """
        return SagaScope(self, saga_id)

    def _start(self, saga_id: str) -> SagaRun:
        require_storable("saga_id", saga_id)
        if not saga_id:
            raise InvalidValueError("saga_id must not be empty")
        existed = self.journal.read(self.store.tail, saga_id) is not None
        if existed:
            state = self._state(saga_id)
            if state.failure is not None or state.finished is not None:
                raise SagaStateError(
                    f"saga {saga_id!r} is {state.status.value}; its journal is closed, start a new saga id"
                )
        with self._live_lock:
            self._live[saga_id] = self._live.get(saga_id, 0) + 1
        return SagaRun(self, saga_id, existed=existed)

    def _leave(self, run: SagaRun) -> None:
        with self._live_lock:
            left = self._live.get(run.saga_id, 1) - 1
            if left:
                self._live[run.saga_id] = left
            else:
                self._live.pop(run.saga_id, None)

    def _conclude(self, run: SagaRun, value: Any, error: BaseException | None) -> SagaResult:
        try:
            return run.conclude(value, error)
        finally:
            self._leave(run)

    async def _conclude_async(self, run: SagaRun, value: Any, error: BaseException | None) -> SagaResult:
        try:
            return await run.conclude_async(value, error)
        finally:
            self._leave(run)

    def _lock(self, saga_id: str) -> Any:
        return self._locks[hash(saga_id) % _LOCK_STRIPES]

    def _resting_states(self, saga_id: str | None) -> Iterator[SagaState]:
        """The state of one saga or of every saga, leaving out sagas live in this process."""
        for sid in [saga_id] if saga_id is not None else self.saga_ids():
            with self._live_lock:
                if sid in self._live:
                    continue
            yield self._state(sid)

    def _state(self, saga_id: str) -> SagaState:
        return fold(saga_id, self.journal.iter_entries(saga_id))

    def _compensate(
        self, saga_id: str, reason: str, *, value: Any = None, error: BaseException | None = None
    ) -> SagaResult:
        """Start (or continue) the saga's compensation and run it to the end or to a doubt."""
        report: list[Any] = []
        with self._lock(saga_id):
            state = self._state(saga_id)
            if state.finished is None:
                self._compensator.check_tools(state)  # before the first entry: never half-started
                self._prepare_compensation(state, reason)
                report = self._compensator.run(state)
            status = self._compensator.finish(saga_id)
        return SagaResult(saga_id, status, value, error, tuple(report))

    async def _compensate_async(
        self, saga_id: str, reason: str, *, value: Any = None, error: BaseException | None = None
    ) -> SagaResult:
        report: list[Any] = []
        state = await asyncio.to_thread(self._state, saga_id)
        if state.finished is None:
            self._compensator.check_tools(state)
            await asyncio.to_thread(self._prepare_compensation, state, reason)
            report = await self._compensator.run_async(state)
        status = await asyncio.to_thread(self._compensator.finish, saga_id)
        return SagaResult(saga_id, status, value, error, tuple(report))

    def _prepare_compensation(self, state: SagaState, reason: str) -> None:
        self._compensator.start(state, reason)
        for gate in state.open_gates:
            self._approvals.void(gate, reason)

    # -- state -------------------------------------------------------------------------------------
    def status(self, saga_id: str) -> SagaStatus:
        """The saga's status from its journal (``RUNNING`` while live in this process). Read-only."""
        with self._live_lock:
            if saga_id in self._live:
                return SagaStatus.RUNNING
        state = self._state(saga_id)
        if state.entry_count == 0:
            raise SagaNotFoundError(f"no journal entries for saga {saga_id!r}")
        return state.status

    def sagas(
        self, *, status: SagaStatus | str | None = None, limit: int | None = None, offset: int = 0
    ) -> list[SagaSummary]:
        """Sagas with their status, most recently updated first; optionally one status only.

        Read-only. Reads every saga's journal (the shared schema has no saga table), so it costs
        time in proportion to the journal; page with ``limit``/``offset``.
        """
        wanted = SagaStatus(status) if status is not None else None
        summaries = []
        for sid in self.saga_ids():
            state = self._state(sid)
            if state.entry_count == 0:
                continue
            with self._live_lock:
                current = SagaStatus.RUNNING if sid in self._live else state.status
            if wanted is not None and current is not wanted:
                continue
            assert state.first_timestamp is not None
            assert state.last_timestamp is not None
            summaries.append(
                SagaSummary(
                    sid,
                    current,
                    state.entry_count,
                    state.first_timestamp,
                    state.last_timestamp,
                    len(state.open_gates),
                    len(state.open_calls) + len(state.open_compensations),
                )
            )
        summaries.sort(key=lambda s: (s.updated_at, s.saga_id), reverse=True)
        end = None if limit is None else offset + limit
        return summaries[offset:end]

    def in_doubt(self, saga_id: str | None = None) -> list[InDoubtCall]:
        """Calls and compensations with an INTENT and no outcome, oldest first. Read-only.

        Sagas live in this process are left out; a call running in another process shows here
        too, so judge by ``age``.
        """
        now = utc_now()
        found = []
        for state in self._resting_states(saga_id):
            sid = state.saga_id
            for call in state.open_calls:
                e = call.intent
                found.append(
                    InDoubtCall(sid, e.seq, e.tool_name, e.input, e.timestamp, age(e.timestamp, now))
                )
            for comp in state.open_compensations:
                assert comp.intent is not None
                e = comp.intent
                found.append(
                    InDoubtCall(
                        sid,
                        e.seq,
                        e.tool_name,
                        e.input,
                        e.timestamp,
                        age(e.timestamp, now),
                        "compensation",
                        comp.executed_seq,
                    )
                )
        return sorted(found, key=lambda c: c.started_at)

    def resolve_in_doubt(
        self, saga_id: str, seq: int, *, happened: bool, resolver: str, result: str = "", reason: str = ""
    ) -> SagaStatus:
        """A human settles an in-doubt INTENT: it happened (with ``result``) or it did not.

        Journals a decision naming the INTENT and the resolver, then the outcome (EXECUTED /
        FAILED for a call, COMPENSATED / COMPENSATION_FAILED for a compensation). A compensating
        saga then carries on compensating. Returns the saga's status afterwards.
        """
        resolver = require_identity(resolver)
        with self._lock(saga_id):
            state = self._state(saga_id)
            call = next((c for c in state.open_calls if c.intent.seq == seq), None)
            comp = next((c for c in state.open_compensations if c.intent and c.intent.seq == seq), None)
            if call is None and comp is None:
                raise SagaStateError(f"saga {saga_id!r} seq {seq} is not an INTENT without an outcome")
            intent = call.intent if call is not None else comp.intent  # type: ignore[union-attr]
            assert intent is not None
            if call is not None:
                phase = Phase.EXECUTED if happened else Phase.FAILED
                payload = (
                    result
                    if happened
                    else f"NotExecuted: resolved by {resolver}: {reason or 'did not happen'}"
                )
            else:
                assert comp is not None
                phase = Phase.COMPENSATED if happened else Phase.COMPENSATION_FAILED
                payload = (
                    compensated_payload(comp.executed_seq)
                    if happened
                    else compensation_failed_payload(comp.executed_seq, f"resolved by {resolver}: {reason}")
                )
            if call is not None and (state.compensating or not happened):
                # The saga will compensate next: refuse now, before the resolution is journaled.
                self._compensator.check_tools(state)
                self.registry.get(intent.tool_name)
            self.journal.append(
                saga_id,
                GATE_TOOL,
                Phase.APPROVED if happened else Phase.REJECTED,
                resolution_input(seq, phase),
                decision_payload(resolver, reason),
            )
            self.journal.append(saga_id, intent.tool_name, phase, intent.input, payload)
            after = self._state(saga_id)
            if after.compensating and not after.open_calls:
                return self._compensate(saga_id, f"resolution of seq {seq} by {resolver}").status
            return after.status

    def recover(self, saga_id: str | None = None) -> list[SagaResult]:
        """Finish compensations that a crash interrupted, from the journal alone.

        Looks at one saga or every saga not live in this process. A saga with an in-doubt call is
        left alone (a human must resolve it first); an in-doubt compensation is re-run only if
        declared idempotent. Run it where no other process is working on those sagas (at start-up).
        """
        _refuse_in_loop("recover")
        results = []
        for state in self._resting_states(saga_id):
            sid = state.saga_id
            if not state.compensating or state.open_calls:
                continue
            reason = state.failure.payload if state.failure is not None else _failed_call_reason(state)
            results.append(self._compensate(sid, reason))
        return results

    # -- approvals ---------------------------------------------------------------------------------
    def pending_approvals(self, saga_id: str | None = None) -> list[ApprovalRequest]:
        """Approval requests waiting for a decision or a resume, oldest first. Read-only."""
        return self._approvals.pending(saga_id)

    def approve(self, saga_id: str, seq: int, approver: str) -> ApprovalDecision:
        """Journal APPROVED by ``approver`` for the gate at ``seq``. Approving is not executing."""
        with self._lock(saga_id):
            return self._approvals.approve(saga_id, seq, approver)

    def reject(self, saga_id: str, seq: int, approver: str, reason: str = "") -> ApprovalDecision:
        """Journal REJECTED, drop the request and compensate the saga (``decision.result``)."""
        with self._lock(saga_id):
            return self._approvals.reject(saga_id, seq, approver, reason)

    def resume(self, saga_id: str, seq: int, payload: str, *, resumed_by: str | None = None) -> SagaResult:
        """Execute an approved gate's tool with ``payload``, at most once, if every check passes.

        Raises ``ApprovalNotFoundError`` (no pending request), ``ApprovalRefusedError`` (not
        approved in the journal, expired, rejected), ``UnknownToolError``; a payload that is not
        byte-for-byte the approved one journals REJECTED, compensates, and comes back as a
        COMPENSATED result whose error is a ``PayloadMismatchError``. ``resumed_by`` names who
        asked for the execution; it is journaled in the resumed call's INTENT.
        """
        _refuse_in_loop("resume")
        resumed_by = require_identity(resumed_by) if resumed_by is not None else None
        with self._lock(saga_id):
            granted = claim(self._approvals, saga_id, seq, payload)
            if granted.mismatch:
                mismatch = PayloadMismatchError(f"saga {saga_id!r} seq {seq}: {granted.mismatch}")
                return self._compensate(
                    saga_id, f"resume of seq {seq} refused: {granted.mismatch}", error=mismatch
                )
            run = self._start(saga_id)
            value: Any = None
            error: Exception | None = None
            try:
                with entered(run):
                    call_seq, args, kwargs = run.begin_resume(
                        granted.spec, granted.request, payload, resumed_by
                    )
                    value = run.execute(granted.spec, call_seq, payload, args, kwargs)
            except Exception as exc:  # noqa: BLE001 - journaled FAILED; the saga compensates
                error = exc
            return self._conclude(run, value, error)

    async def resume_async(
        self, saga_id: str, seq: int, payload: str, *, resumed_by: str | None = None
    ) -> SagaResult:
        """``resume`` for async tools and event loops."""
        resumed_by = require_identity(resumed_by) if resumed_by is not None else None
        granted = await asyncio.to_thread(claim, self._approvals, saga_id, seq, payload)
        if granted.mismatch:
            error = PayloadMismatchError(f"saga {saga_id!r} seq {seq}: {granted.mismatch}")
            return await self._compensate_async(
                saga_id, f"resume of seq {seq} refused: {granted.mismatch}", error=error
            )
        run = await asyncio.to_thread(self._start, saga_id)
        try:
            with entered(run):
                call_seq, args, kwargs = await asyncio.to_thread(
                    run.begin_resume, granted.spec, granted.request, payload, resumed_by
                )
                value = await run.execute_async(granted.spec, call_seq, payload, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - journaled FAILED; the saga compensates
            return await self._conclude_async(run, None, exc)
        return await self._conclude_async(run, value, None)

    def expire_approvals(self, now: datetime | None = None) -> list[ApprovalRequest]:
        """Expire every request past its time (REJECTED, reason expired; the saga compensates)."""
        return self._approvals.expire_due(now)

    # -- evidence -------------------------------------------------------------------------------
    def entries(self, saga_id: str) -> list[Entry]:
        """The saga's journal in seq order (empty for an unknown saga). Read-only."""
        return self.journal.entries(saga_id)

    def saga_ids(self) -> list[str]:
        """Every saga with at least one entry, sorted. Read-only."""
        return self.journal.read(self.store.saga_ids)

    def verify(self, saga_id: str) -> Verification:
        """Recompute the saga's hash chain from the store (streaming). Read-only.

        Raises ``SagaNotFoundError`` when the saga has no entries.
        """
        return self.journal.verify(saga_id)

    def export(self, saga_id: str) -> Iterator[str]:
        """The saga as JSON Lines (SPEC §7), streamed a batch of rows at a time. Read-only.

        Raises ``SagaNotFoundError`` at once (not on first iteration) for an unknown saga.
        """
        self.journal.require_saga(saga_id)
        return export_lines(self.journal.iter_entries(saga_id))

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the store's connections."""
        self.store.close()

    def __enter__(self) -> Sagacity:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sagacity({self.store!r})"


def _failed_call_reason(state: SagaState) -> str:
    call = state.failed_calls[0]
    error = call.outcome.payload if call.outcome is not None else ""
    return f"call seq {call.intent.seq} ({call.intent.tool_name}) failed: {error}"


class SagaScope:
    """What ``Sagacity.saga`` returns: a sync and async context manager over one saga."""

    def __init__(self, sg: Sagacity, saga_id: str) -> None:
        self.sagacity = sg
        self.saga_id = saga_id
        self.result: SagaResult | None = None
        self._run: SagaRun | None = None
        self._entered: Any = None

    def _enter(self, run: SagaRun) -> SagaScope:
        self._run = run
        self._entered = entered(run)
        self._entered.__enter__()
        return self

    def _exit_context(self) -> SagaRun:
        assert self._run is not None
        assert self._entered is not None
        self._entered.__exit__(None, None, None)
        return self._run

    def __enter__(self) -> SagaScope:
        return self._enter(self.sagacity._start(self.saga_id))

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        run = self._exit_context()
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            self.sagacity._leave(run)
            return
        self.result = self.sagacity._conclude(run, None, exc)

    async def __aenter__(self) -> SagaScope:
        return self._enter(await asyncio.to_thread(self.sagacity._start, self.saga_id))

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        run = self._exit_context()
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            self.sagacity._leave(run)
            return
        self.result = await self.sagacity._conclude_async(run, None, exc)

    @property
    def id(self) -> str:
        return self.saga_id
