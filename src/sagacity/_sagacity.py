"""The ``Sagacity`` facade: a URL in, the whole API out, as thin sync and async shells.

Every operation lives below (``_engine``, ``_approvals``, ``_compensation``, ``_recovery``,
``_saga``), written once; a blocking method drives it in the calling thread and refuses to run
inside an event loop, naming its ``_async`` twin, which drives the same operation without
blocking the loop (journal I/O in worker threads, async user code on the caller's loop). A
read's twin is made from the blocking method (``_twins``), so its signature is written once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import sagacity._approvals as _approvals
import sagacity._audit as _audit
import sagacity._otel_gauges as _otel_gauges
import sagacity._reconcile as _reconcile
import sagacity._recovery as _recovery
import sagacity._telemetry as _telemetry
import sagacity._view as _view
import sagacity.doctor as doctor
from sagacity._approvals import Claim
from sagacity._context import Acting, current_principal, refuse_foreign, require_principal
from sagacity._effects import Operation, drive, drive_async
from sagacity._engine import Engine
from sagacity._index import open_index, saga_filter
from sagacity._journal import DEFAULT_APPEND_ATTEMPTS, DEFAULT_RECONNECT_ATTEMPTS, Journal
from sagacity._json import require_storable
from sagacity._otel_operations import operation
from sagacity._paging import decode_cursor, decode_request_cursor
from sagacity._payloads import LIFE_TOOL, ON_ABANDON_COMPENSATE, require_on_abandon, start_input
from sagacity._queue import arrange, past, queue_order
from sagacity._reconcile import DEFAULT_RECONCILE_TIMEOUT
from sagacity._recovery import DEFAULT_ABANDONED_AFTER
from sagacity._saga import SagaRun
from sagacity._state import SagaState, fold, misaligned
from sagacity._traced import current, entered, new_run
from sagacity._twins import in_thread, signature_of
from sagacity.chain import Verification, utc_now
from sagacity.checks import require_identity
from sagacity.doctor import DEFAULT_OLDER_THAN, Diagnosis
from sagacity.errors import (
    ApprovalNotFoundError,
    ApprovalRefusedError,
    BlockingCallError,
    ConfigurationError,
    InvalidValueError,
    PayloadMismatchError,
    SagaNotFoundError,
    SagaRunningElsewhereError,
)
from sagacity.export import export_lines
from sagacity.guardrails import Guard, KillSwitch, Policy
from sagacity.model import (
    ApprovalDecision,
    ApprovalPage,
    ApprovalRequest,
    EffectAudit,
    Entry,
    InDoubtCall,
    PendingApproval,
    Phase,
    Reconciled,
    SagaDetail,
    SagaResult,
    SagaStatus,
    SagaSummary,
    SagaView,
)
from sagacity.stores import Store, default_url, open_store, safe_url
from sagacity.stores.base import ANY_SAGA, IndexRow, SagaFilter, Watch
from sagacity.tools import IMMEDIATE, ToolRegistry, require_durability
from sagacity.tools import registry as default_registry

if TYPE_CHECKING:
    from sagacity.model import Progress

P = ParamSpec("P")
T = TypeVar("T")

#: How long an approval request stays valid unless the tool or the Sagacity says otherwise.
DEFAULT_APPROVAL_TTL = timedelta(hours=24)


def _refuse_in_loop(name: str, twin: str | None = None) -> None:
    """A blocking call would stall every task of a running loop: name the twin instead."""
    # asyncio's own "running loop or None" (get_running_loop raises, and building that
    # exception cost every saga's start more than the check itself).
    if asyncio._get_running_loop() is None:
        return
    raise BlockingCallError(
        f"Sagacity.{name}() blocks; inside a running event loop use {twin or f'`await sg.{name}_async(...)`'}"
    )


class Sagacity:
    """Sagas journaled in one store.

    ``url`` picks the store: ``sqlite:///path.db`` (the embedded default), ``postgresql://...``
    or ``memory://``; without one, ``$SAGACITY_URL``, else ``sqlite:///sagacity.db``. The schema
    is created if missing. ``max_append_attempts`` bounds how often one append (or decision)
    may lose the race for the next seq before it raises; ``store_options`` go to the store's
    constructor (e.g. ``max_connections`` for PostgreSQL). ``approval_ttl`` is how long approval
    requests stay valid by default (``None``: never expire; a tool's own ``approval_ttl`` wins).
    ``registry`` is where tools are looked up by name (the process-wide one by default).
    ``policy`` (a TOML file, re-read when it changes, or a ``sagacity.guardrails.Policy``) judges
    every call before it runs and honours the kill switch, which a process re-reads at most every
    ``switch_poll`` seconds (docs/policies.md).
    ``principal`` is who sagas started here act for, unless ``acting_as`` says otherwise: the
    saga belongs to it, and its gates name it as their requester.
    ``on_abandon`` is what ``recover`` does with a saga started here that is abandoned (its
    process died between calls): ``"compensate"`` (the default) or ``"report"`` (listed for a
    human, ``sagacity doctor``); ``sg.saga(id, on_abandon=...)`` chooses per saga. It is
    journaled in the saga's start entry, so every process treats the saga the same way.
    ``durability`` is when a call's outcome is committed: ``"immediate"`` (the default: on its
    own, before the call returns) or ``"deferred"`` (with the saga's next entry: one commit per
    call instead of two; a crash before it leaves the call in doubt). ``sg.saga(id,
    durability=...)`` chooses per saga, ``@tool(durability=...)`` per tool; an irreversible tool
    commits its own outcome unless it says otherwise (docs/guide.md, "Durability").

    Every blocking method has an ``_async`` twin; the blocking one refuses to run inside an
    event loop. Any number of processes and machines may share one store: every decision is
    fenced on the journal (see the guide's "Several processes").
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
        policy: Policy | str | os.PathLike[str] | None = None,
        switch_poll: float = 1.0,
        principal: str | None = None,
        on_abandon: str = ON_ABANDON_COMPENSATE,
        durability: str = IMMEDIATE,
        **store_options: Any,
    ) -> None:
        if store is not None and not isinstance(store, Store):
            raise ConfigurationError(
                f"{type(store).__name__} does not fulfil the store contract (sagacity.stores.Store, "
                "docs/stores.md): it lacks a required method or attribute; a store with no optional "
                "capability declares `capabilities = frozenset()`"
            )
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
        self.principal = require_principal(principal) if principal is not None else None
        self.on_abandon = require_on_abandon(on_abandon)
        self.durability = require_durability(durability)
        self.engine = Engine(self.store, self.journal, self.registry, self.approval_ttl)
        # The engine carries it for the runtime, typed only by what the runtime calls.
        self._guard: Guard | None = None
        if policy is not None:
            self._guard = Guard(self.journal, policy, poll=switch_poll, known=self.registry.names)
            self.engine.guard = self._guard
        #: The kill switch (``sagacity.guardrails``): halt or drain every agent, one agent or one
        #: tool. Every ``Sagacity`` opened with a ``policy`` honours it.
        self.kill_switch = (
            self._guard.switch if self._guard is not None else KillSwitch(self.journal, switch_poll)
        )
        self.index = open_index(self.store, self.journal)
        _telemetry.refresh()
        _otel_gauges.watch(self, safe_url(self.url), pending=_all_pending, in_doubt=_in_doubt_count)

    # -- guardrails --------------------------------------------------------------------------------
    @property
    def guard(self) -> Guard | None:
        """What judges every call against the guardrails policy (``policy=``), or None: no policy."""
        return self._guard

    def use_policy(self, policy: Policy) -> Guard:
        """Put a guardrails ``policy`` in force from now on, whole (journaled first when its text
        is new), and return the guard that judges by it: this ``Sagacity``'s, or one made now
        (honouring :attr:`kill_switch`) if it was opened without ``policy=``. For an owner that
        reads the policy itself, as the MCP gateway reloading its file does."""
        guard = self._guard
        if guard is None:
            guard = self._guard = self.engine.guard = Guard(
                self.journal, policy, switch=self.kill_switch, known=self.registry.names
            )
        else:
            guard.use(policy)
        return guard

    # -- running sagas -----------------------------------------------------------------------------
    def run(self, saga_id: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> SagaResult:
        """Run ``fn(*args, **kwargs)`` as saga ``saga_id`` and return how it ended.

        Does not raise for the work's failures: they compensate and come back in the result.
        ``KeyboardInterrupt`` and ``SystemExit`` compensate too, then go on their way.

        A saga id names one run: if ``saga_id`` already has a journal (a finished saga, or one
        another run started), its first call raises ``SagaExistsError`` out of ``run`` before
        anything is journaled or any tool runs. To add to a saga on purpose, use
        ``sg.saga(saga_id, continue_existing=True)``.
        """
        return self._run(Start(saga_id), fn, args, kwargs)

    def _run(
        self, start: Start, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> SagaResult:
        """``run``, also for a saga continued on purpose (a workflow's next stage), and one whose
        START is to say another ``on_abandon`` than this Sagacity's."""
        _refuse_in_loop("run")
        if inspect.iscoroutinefunction(fn):
            raise InvalidValueError(f"{fn.__name__} is a coroutine function: use `await sg.run_async(...)`")
        with _Attempt(self, self._start(start)) as attempt:
            attempt.value = fn(*args, **kwargs)
        return attempt.result

    async def run_async(
        self, saga_id: str, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> SagaResult:
        """``run`` for ``async def`` work (a sync ``fn`` runs in a worker thread).

        Cancelled (``task.cancel()``, ``asyncio.timeout``, a failing TaskGroup), the saga
        compensates, shielded from further cancellation, then ``CancelledError`` propagates.
        """
        return await self._run_async(Start(saga_id), fn, args, kwargs)

    async def _run_async(
        self, start: Start, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> SagaResult:
        async with _Attempt(self, self._start(start)) as attempt:  # no I/O to start: on the loop
            if inspect.iscoroutinefunction(fn):
                attempt.value = await fn(*args, **kwargs)
            else:
                attempt.value = await asyncio.to_thread(fn, *args, **kwargs)
        return attempt.result

    def saga(
        self,
        saga_id: str,
        *,
        continue_existing: bool = False,
        on_abandon: str | None = None,
        durability: str | None = None,
    ) -> SagaScope:
        """``with sg.saga(id) as saga:`` (or ``async with``); ``saga.result`` after the block.

        An exception from the block is re-raised after compensating. A saga id names one run:
        like ``run``, the block is refused (``SagaExistsError``, nothing journaled) when the id
        already has a journal, unless ``continue_existing=True`` says to add to that saga on
        purpose (a conversation's next turn, a workflow's next stage). ``on_abandon``
        (``"compensate"`` or ``"report"``; default the Sagacity's) is journaled in the saga's
        start entry: what ``recover`` does if the saga is abandoned. ``durability``
        (``"immediate"`` or ``"deferred"``; default the Sagacity's) is when its calls' outcomes
        are committed.
        """
        chosen = require_on_abandon(on_abandon) if on_abandon is not None else None
        if durability is not None:
            require_durability(durability)
        return SagaScope(self, saga_id, continue_existing, chosen, durability)

    def _start(self, start: Start) -> SagaRun:
        """The run of a saga starting here. It reads nothing: the journal's first append is the
        check (a fresh run's lands only as seq 1, else ``SagaExistsError`` and nothing written;
        in a saga whose compensation started it is refused before the tool runs,
        SagaClosedError), and a run that appends nothing reads the journal at its end. A read
        here cost every saga ~0.15 of a commit (BENCHMARKS.md, "Overhead, closed").

        Continuing a saga reads its first entry: a START naming another principal than the one
        this run acts for is refused as an unknown saga is (``SagaNotFoundError``), unless the
        run acts as an admin (``acting_as(..., admin=True)``)."""
        saga_id = start.saga_id
        if not saga_id:
            raise InvalidValueError("saga_id must not be empty")
        require_storable("saga_id", saga_id)  # refuses a saga id no journal can hold
        if self.engine.guard is not None:
            self.engine.guard.check_start(saga_id)  # the kill switch: nothing new starts
        acting = current_principal()
        principal = acting.name if acting is not None else self.principal
        started_input = None
        if start.continue_existing:
            started_input = self._owned_start(saga_id, principal, acting)
        self.engine.enter(saga_id)
        run = new_run(self.engine, saga_id, existed=None, last_seq=0)
        run.fresh = not start.continue_existing
        run.principal = principal
        run.started_input = started_input
        run.durability = start.durability or self.durability
        facts = start_input(start.on_abandon or self.on_abandon, run.principal)
        run.start = self.journal.starting(saga_id, facts)
        return run

    def _owned_start(self, saga_id: str, principal: str | None, acting: Acting | None) -> str | None:
        """The START's input of a saga (None without one), refusing a saga another principal
        started as if it did not exist: this caller is not told it does."""
        first = self.journal.read(self.store.get_entry, saga_id, 1)
        if first is None or first.tool_name != LIFE_TOOL or first.phase != Phase.INTENT:
            return None
        refuse_foreign(saga_id, first.input, principal, acting)
        return first.input

    def _leave(self, run: SagaRun) -> None:
        try:
            # Outcomes still held when the run ends (it ended without an END or a compensation
            # to carry them: another process runs the saga, or its store failed) are written now.
            self.journal.release(run.saga_id)
        finally:
            self.engine.leave(run.saga_id)
            if run.start is not None:
                self.journal.started(run.saga_id)

    def _conclude(self, run: SagaRun, value: Any, error: BaseException | None) -> SagaResult:
        try:
            with current(run):
                return drive(run.conclusion(value, error))
        finally:
            self._leave(run)

    async def _conclude_async(self, run: SagaRun, value: Any, error: BaseException | None) -> SagaResult:
        try:
            with current(run):
                return await drive_async(run.conclusion(value, error))
        finally:
            self._leave(run)

    # -- state -------------------------------------------------------------------------------------
    def status(self, saga_id: str) -> SagaStatus:
        """The saga's status from its journal, ``RUNNING`` while a living process runs it (this
        one, or any other on a store with liveness leases). Read-only."""
        _refuse_in_loop("status")
        return self._status(saga_id)

    status_async = in_thread(status)

    def _status(self, saga_id: str) -> SagaStatus:
        state = self.engine.snapshot(saga_id)
        if state.entry_count == 0:
            if self.engine.is_live(saga_id):
                return SagaStatus.RUNNING  # started, nothing journaled yet
            raise SagaNotFoundError(f"no journal entries for saga {saga_id!r}")
        if state.status not in _view.MAY_BE_LIVE:
            return state.status
        return _view.seen_live(state.status, self.engine.is_live(saga_id))

    def sagas(
        self,
        *,
        status: SagaStatus | str | None = None,
        limit: int | None = None,
        after: str | None = None,
        prefix: str | None = None,
        tool: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        broken_chain: bool | None = None,
    ) -> list[SagaSummary]:
        """Sagas with their status, most recently updated first; optionally one status only.

        Read-only, from the saga index (``_index``), so a page costs the same at any journal size:
        pass the last summary's ``cursor`` as ``after`` for the next page. A saga updated while
        you page moves to the front of the list (you see it again on the first page).

        Filters (each optional, all must hold): ``prefix``, the saga id starts with it
        (case-sensitive); ``tool``, the saga's journal has an entry of that tool; ``since`` /
        ``until``, last updated at or after ``since`` and before ``until`` (aware datetimes are
        converted to UTC, naive ones are taken as UTC); ``broken_chain``, True for only the sagas
        whose hash chain did not verify (``SagaSummary.chain_broken_at``), False for only those
        whose chain did. A chain is checked whenever the index folds a saga (every change the
        store notices) and by every :meth:`verify` / :meth:`view`; damage no change note announced
        (an SQLite file edited in place) shows once a verification or ``doctor --full`` read it.
        """
        _refuse_in_loop("sagas")
        where = saga_filter(prefix, tool, since, until, broken_chain)
        return self._sagas(status, limit, after, where)

    sagas_async = in_thread(sagas)

    def _sagas(
        self, status: SagaStatus | str | None, limit: int | None, after: str | None, where: SagaFilter
    ) -> list[SagaSummary]:
        wanted = SagaStatus(status) if status is not None else None
        _require_limit(limit)
        position = decode_cursor(after) if after is not None else None
        summaries: list[SagaSummary] = []
        # Pages of the index (which holds what the journal alone says), each overlaid with the
        # liveness leases of its sagas in one probe: a saga a living process runs shows RUNNING,
        # and so leaves the status the index holds for it.
        scan = wanted is SagaStatus.RUNNING  # RUNNING is in no index row: look through them all
        page_status = None if scan else wanted
        while limit is None or len(summaries) < limit:
            want = _PAGE if limit is None or scan else limit - len(summaries) + 8
            rows = self.index.page(page_status, want, position, where)
            for row, shown in self._overlaid(rows):
                if wanted is None or shown is wanted:
                    summaries.append(_summary(row, shown))
            if len(rows) < want:
                break
            position = _newest_first(rows[-1])
        return summaries if limit is None else summaries[:limit]

    def _overlaid(self, rows: list[IndexRow]) -> list[tuple[IndexRow, SagaStatus]]:
        """Index rows with the status a read reports: RUNNING for those a living process runs."""
        live = self.engine.live_among([r.saga_id for r in rows if r.status in _view.MAY_BE_LIVE])
        return [(r, _view.seen_live(r.status, r.saga_id in live)) for r in rows]

    def view(self, saga_id: str, *, allow_blocking: bool = False) -> SagaView:
        """One saga as its journal tells it now: status, calls with their status, approval gates,
        decisions, pending requests, in-doubt calls and whether its chain verifies. Read-only: its
        journal and its request rows, read once; ``SagaNotFoundError`` for an unknown saga.

        Inside a running event loop it refuses (use :meth:`view_async`) unless ``allow_blocking``:
        for sync code a framework calls on its loop, which cannot await (an adapter building the
        framework's resume input); the read then holds the loop while it runs."""
        if not allow_blocking:
            _refuse_in_loop("view")
        return self._view(saga_id)

    def _view(self, saga_id: str) -> SagaView:
        entries = self.journal.entries(saga_id)
        if not entries:
            raise SagaNotFoundError(f"no journal entries for saga {saga_id!r}")
        requests = self._pending(saga_id)
        running = self.engine.is_running(saga_id)
        view = _view.saga_view(
            fold(saga_id, entries), entries, requests, self.registry, utc_now(), running=running
        )
        if not view.verification.valid:
            self.index.note_broken(saga_id, view.verification.break_at_index)
        return view

    view_async = in_thread(_view, "view_async")

    def saga_detail(self, saga_id: str) -> SagaDetail:
        """One saga as an operator reads it: status, journal, chain verification, decisions,
        pending requests and in-doubt calls (a projection of :meth:`view`). Read-only;
        ``SagaNotFoundError`` for an unknown saga."""
        _refuse_in_loop("saga_detail")
        return _detail(self._view(saga_id))

    saga_detail_async = in_thread(saga_detail)

    def saga_counts(self) -> dict[SagaStatus, int]:
        """How many sagas have each status (those with none left out); sums to the saga count.

        Read-only: the saga index keeps a count per status (moved by every catch-up), so this
        reads a few rows whatever the journal's size, plus one liveness probe per page of the
        sagas that may be running (those in doubt, awaiting approval, compensating or between
        calls); finished sagas are never probed.
        """
        _refuse_in_loop("saga_counts")
        return self._counts()

    saga_counts_async = in_thread(saga_counts)

    def broken_chain_count(self) -> int:
        """How many sagas' hash chains did not verify when last read (``sagas(broken_chain=True)``
        lists them). Read-only: the saga index's few flagged rows, whatever the journal's size."""
        _refuse_in_loop("broken_chain_count")
        return len(self.index.watched(Watch.BROKEN_CHAIN))

    broken_chain_count_async = in_thread(broken_chain_count)

    def _counts(self) -> dict[SagaStatus, int]:
        counts = self.index.counts()
        for status in _view.MAY_BE_LIVE:
            if not counts.get(status):
                continue
            position = None
            while True:  # the sagas that may be running, a page and one liveness probe at a time
                rows = self.index.page(status, _PAGE, position)
                running = len(self.engine.live_among([r.saga_id for r in rows]))
                counts[status] -= running
                counts[SagaStatus.RUNNING] = counts.get(SagaStatus.RUNNING, 0) + running
                if len(rows) < _PAGE:
                    break
                position = _newest_first(rows[-1])
        return {status: n for status, n in counts.items() if n > 0}

    def reindex(self, *, progress: Progress | None = None) -> int:
        """Drop the saga index and fold every journal into it again; how many sagas it holds.

        Never needed for correctness (reads catch the index up themselves); it rebuilds after a
        restore or a change made behind every trigger's back, and takes time in proportion to
        the journal. ``progress(sagas done, sagas, entries read)`` is called as it goes.
        """
        _refuse_in_loop("reindex")
        return self.index.rebuild(progress)

    def in_doubt(self, saga_id: str | None = None) -> list[InDoubtCall]:
        """Calls and compensations with an INTENT and no outcome, oldest first. Read-only.

        Sagas a living process runs are left out (this process's; on a store with liveness
        leases every process's): their open calls are in flight, not in doubt.
        """
        _refuse_in_loop("in_doubt")
        return self._in_doubt(saga_id)

    in_doubt_async = in_thread(in_doubt)

    def _in_doubt(self, saga_id: str | None) -> list[InDoubtCall]:
        if saga_id is not None:
            try:
                return list(self._view(saga_id).in_doubt)
            except SagaNotFoundError:
                return []
        watched = [r.saga_id for r in self.index.watched(Watch.IN_DOUBT)]
        live = self.engine.live_among(watched)
        ids = [sid for sid in watched if sid not in live]
        # Their journals in a few statements, not one query per saga (a round trip each on
        # PostgreSQL: 0.3 ms a saga, 0.3 s for a thousand in doubt).
        journals = self.index.journals(ids).items()
        return _view.in_doubt_of((fold(sid, entries) for sid, entries in journals), utc_now())

    @operation("resolve")
    def resolve_in_doubt(
        self, saga_id: str, seq: int, *, happened: bool, resolver: str, result: str = "", reason: str = ""
    ) -> SagaStatus:
        """A human settles an in-doubt INTENT: it happened (with ``result``) or it did not.

        Journals a decision naming the INTENT and the resolver together with the outcome
        (EXECUTED / FAILED for a call, COMPENSATED / COMPENSATION_FAILED for a compensation),
        fenced: two resolvers racing cannot both settle it. A compensating saga then carries on
        compensating. Returns the saga's status afterwards.
        """
        _refuse_in_loop("resolve_in_doubt")
        return drive(self._resolve(saga_id, seq, happened, resolver, result, reason))

    @operation("resolve")
    async def resolve_in_doubt_async(
        self, saga_id: str, seq: int, *, happened: bool, resolver: str, result: str = "", reason: str = ""
    ) -> SagaStatus:
        return await drive_async(self._resolve(saga_id, seq, happened, resolver, result, reason))

    def _resolve(
        self, saga_id: str, seq: int, happened: bool, resolver: str, result: str, reason: str
    ) -> Operation[SagaStatus]:
        return _recovery.resolve(
            self.engine, saga_id, seq, happened=happened, resolver=resolver, result=result, reason=reason
        )

    def reconcile(
        self, saga_id: str | None = None, *, timeout: float = DEFAULT_RECONCILE_TIMEOUT
    ) -> list[Reconciled]:
        """Ask the reconcilers (``@tool.reconcile``, ``@tool.reconcile_compensation``) about the
        in-doubt calls and undos of one saga, or of every saga no living process runs, and settle
        what the external system knows: *happened* journals the outcome (EXECUTED / COMPENSATED),
        *did not happen* the failure (FAILED, and the saga compensates; COMPENSATION_FAILED for an
        undo), each as a fenced decision naming the reconciler and its evidence, exactly as
        :meth:`resolve_in_doubt` would. *unknown*, an exception, or no answer within ``timeout``
        seconds leave the call in doubt for a human. One :class:`Reconciled` per call asked about.
        """
        _refuse_in_loop("reconcile")
        timeout = _reconcile.require_timeout(timeout)
        return drive(_reconcile.reconcile(self.engine, self._doubtful(saga_id), timeout))

    async def reconcile_async(
        self, saga_id: str | None = None, *, timeout: float = DEFAULT_RECONCILE_TIMEOUT
    ) -> list[Reconciled]:
        timeout = _reconcile.require_timeout(timeout)
        ids = await asyncio.to_thread(self._doubtful, saga_id)
        return await drive_async(_reconcile.reconcile(self.engine, ids, timeout))

    def _doubtful(self, saga_id: str | None) -> list[str]:
        """One saga, or every saga the index has with an INTENT and no outcome."""
        return self._watched(saga_id, Watch.IN_DOUBT)

    def audit_effects(
        self,
        saga_id: str | None = None,
        *,
        auditor: str | None = None,
        timeout: float = DEFAULT_RECONCILE_TIMEOUT,
    ) -> list[EffectAudit]:
        """Ask the reconcilers whether the world agrees with the journal about the effects of one
        finished saga, or of every finished one: each EXECUTED call (did it happen?) and each
        COMPENSATED one (did its undo?) gets CONFIRMED, DRIFT or UNVERIFIABLE (no reconciler, an
        *unknown* answer, an error or a timeout: never counted as fine). The findings are
        journaled on the reserved saga ``sagacity:audit`` (docs/journal.md) under ``auditor``
        (default: this host and process) and returned."""
        _refuse_in_loop("audit_effects")
        timeout = _reconcile.require_timeout(timeout)
        who = require_identity(auditor) if auditor is not None else _audit.this_process()
        return _audit.audit(self.engine, self._finished_states(saga_id), timeout, who)

    audit_effects_async = in_thread(audit_effects)

    def _finished_states(self, saga_id: str | None) -> Iterator[SagaState]:
        if saga_id is not None:
            self.journal.require_saga(saga_id)
            yield self.engine.snapshot(saga_id)
            return
        ids = sorted(
            {s.saga_id for status in _audit.FINISHED for s in self._sagas(status, None, None, SagaFilter())}
        )
        for start in range(0, len(ids), _PAGE):
            for sid, entries in self.index.journals(ids[start : start + _PAGE]).items():
                yield fold(sid, entries)

    @operation("recover")
    def recover(
        self, saga_id: str | None = None, *, abandoned_after: timedelta = DEFAULT_ABANDONED_AFTER
    ) -> list[SagaResult]:
        """Finish compensations that a crash interrupted, from the journal alone, and put the
        approval requests in line with the journal's gates.

        First the reconcilers settle the in-doubt calls they know about (:meth:`reconcile`):
        a call that did not happen then has its saga compensated here like any failed one.

        Looks at one saga or every saga not live in this process. Safe to run at any time and
        from any process (cron, a second worker): a saga with a call still open is left alone (its
        process may be running the tool, or a human must resolve it), a saga another runner is
        compensating is skipped, and each step is claimed in the journal, so nothing is
        compensated twice. An in-doubt compensation is re-run only if declared idempotent.

        An open gate whose request row is missing (its process died between the gate's entry and
        the row) gets the row back, rebuilt from the journal's exact input, so it can be approved;
        a row of a gate the journal closed is dropped.

        A saga ABANDONED (started, never ended, nothing in flight or awaited, no living process
        runs it) with no entry for ``abandoned_after`` (default 10 minutes: on a store without
        liveness leases its process may be alive between two calls) is compensated when it was
        started with ``on_abandon="compensate"`` (the start is fenced on the journal as judged: a
        call appended meanwhile cancels it), or returned as an ABANDONED result, nothing
        journaled, when it says ``"report"``.
        """
        _refuse_in_loop("recover")
        settled = drive(self._reconciling(saga_id))
        compensating, aligning = self._recoverable(saga_id)
        return drive(_recovery.recover(self.engine, [*compensating, *settled], aligning, abandoned_after))

    @operation("recover")
    async def recover_async(
        self, saga_id: str | None = None, *, abandoned_after: timedelta = DEFAULT_ABANDONED_AFTER
    ) -> list[SagaResult]:
        settled = await drive_async(self._reconciling(saga_id))
        compensating, aligning = await asyncio.to_thread(self._recoverable, saga_id)
        return await drive_async(
            _recovery.recover(self.engine, [*compensating, *settled], aligning, abandoned_after)
        )

    def _reconciling(self, saga_id: str | None) -> Operation[list[str]]:
        """``recover``'s first step: the reconcilers settle what they can (compensation is left to
        ``recover``'s own pass); the sagas they settled a call of."""
        ids = self._doubtful(saga_id)
        done = yield from _reconcile.reconcile(
            self.engine, ids, DEFAULT_RECONCILE_TIMEOUT, compensate_after=False
        )
        return sorted({r.saga_id for r in done if r.settled})

    def _recoverable(self, saga_id: str | None) -> tuple[list[str], list[str]]:
        """The sagas ``recover`` compensates and those whose requests it aligns: one saga, or
        the compensating ones and those whose requests and open gates differ (the request table
        read first, then their journals, a few statements for them all)."""
        if saga_id is not None:
            return [saga_id], [saga_id]
        rows: dict[str, set[int]] = {}
        for request in self._pending(None):
            rows.setdefault(request.saga_id, set()).add(request.journal_seq)
        gated = {r.saga_id for r in self.index.watched(Watch.ATTENTION) if r.awaiting_approval}
        journals = self.index.journals(sorted(gated | set(rows)))
        aligning = [
            sid for sid, entries in journals.items() if misaligned(fold(sid, entries), rows.get(sid, set()))
        ]
        due = self._watched(None, Watch.COMPENSATING) + self._watched(None, Watch.ABANDONED)
        return sorted(set(due)), sorted(aligning)

    def _watched(self, saga_id: str | None, watch: Watch) -> list[str]:
        """One saga, or every saga the index has in ``watch``: the only ones that can qualify."""
        return [saga_id] if saga_id is not None else [r.saga_id for r in self.index.watched(watch)]

    # -- approvals ---------------------------------------------------------------------------------
    def pending_approvals(
        self,
        saga_id: str | None = None,
        *,
        prefix: str | None = None,
        tool: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[ApprovalRequest]:
        """Approval requests waiting for a decision or a resume, oldest first. Read-only.

        Filters (each optional, all must hold): ``prefix``, the saga id starts with it; ``tool``,
        the held tool; ``since`` / ``until``, requested at or after ``since`` and before ``until``
        (aware datetimes converted to UTC, naive ones taken as UTC).
        """
        _refuse_in_loop("pending_approvals")
        return self._pending(saga_id, saga_filter(prefix, tool, since, until))

    pending_approvals_async = in_thread(pending_approvals)

    def _pending(self, saga_id: str | None, where: SagaFilter = ANY_SAGA) -> list[ApprovalRequest]:
        requests = self.journal.read(self.store.list_approval_requests, saga_id)
        return [r for r in requests if where.keeps_request(r)]

    def approval_page(
        self,
        saga_id: str | None = None,
        *,
        limit: int | None = None,
        after: str | None = None,
        prefix: str | None = None,
        tool: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        requester: str | None = None,
        awaiting: str | None = None,
        sort: str = "created",
        descending: bool = False,
    ) -> ApprovalPage:
        """A page of the approval queue with how many requests the filters keep in all, so every
        pending request can be reached. Read-only.

        Filters as :meth:`pending_approvals`, and two read from the journal: ``requester``, who
        asked for the call is exactly this principal; ``awaiting``, the request wants this
        approver's approval now (:meth:`PendingApproval.awaits`). ``sort`` is ``"created"``
        (oldest first), ``"expires"`` (soonest first, never-expiring last), ``"saga"`` or
        ``"tool"``; ``descending`` reverses it. ``after`` is the ``next`` of the previous page (any
        request's ``cursor``): a request decided while you page leaves the queue, none is shown
        twice. Costs one read of the request table, and a fold of each saga shown (of each
        candidate's saga when ``requester`` or ``awaiting`` is given).
        """
        _refuse_in_loop("approval_page")
        where = saga_filter(prefix, tool, since, until)
        return self._approval_page(saga_id, limit, after, where, requester, awaiting, sort, descending)

    @signature_of(approval_page)
    def approvals(self, *args: Any, **kwargs: Any) -> list[PendingApproval]:
        """Pending requests as an approver sees them (who approved, how many must, may it resume
        now), oldest first; at most ``limit``. Read-only. :meth:`approval_page` says more."""
        _refuse_in_loop("approvals")
        return self.approval_page(*args, **kwargs).items  # its refusal cannot fire after ours

    approvals_async = in_thread(approvals)

    def _approval_page(
        self,
        saga_id: str | None,
        limit: int | None,
        after: str | None,
        where: SagaFilter,
        requester: str | None,
        awaiting: str | None,
        sort: str,
        descending: bool,
    ) -> ApprovalPage:
        _require_limit(limit)
        if requester is not None and not isinstance(requester, str):
            raise InvalidValueError(f"requester must be a string, not {type(requester).__name__}")
        awaiting = require_identity(awaiting) if awaiting is not None else None
        queue_order(sort, descending)
        position = decode_request_cursor(after) if after is not None else None
        requests = arrange(self._pending(saga_id, where), sort, descending)
        now = utc_now()
        required = _view.required_in(self.registry)

        def views(rows: list[ApprovalRequest]) -> list[PendingApproval]:
            states = {sid: fold(sid, self.journal.entries(sid)) for sid in {r.saga_id for r in rows}}
            return [
                self._scoped(_view.pending(states[r.saga_id], [r], required, now)[0], states[r.saga_id])
                for r in rows
            ]

        if requester is None and awaiting is None:  # fold only the page's sagas
            total = len(requests)
            rest = [r for r in requests if position is None or past(r.queue_key, position, sort, descending)]
            items = views(rest[:limit])
        else:
            kept = [
                p
                for p in views(requests)
                if (requester is None or p.requester == requester)
                and (awaiting is None or p.awaits(awaiting))
            ]
            total = len(kept)
            tail = [
                p for p in kept if position is None or past(p.request.queue_key, position, sort, descending)
            ]
            items = tail[:limit]
        # As the saga list's: a full page names where the next starts (which may be empty).
        full = limit is not None and len(items) == limit
        return ApprovalPage(items, total, items[-1].cursor if full else None)

    def _scoped(self, pending: PendingApproval, state: SagaState) -> PendingApproval:
        """``pending`` with who the policy lets decide it (unchanged without a policy)."""
        gate = state.gates.get(pending.request.journal_seq)
        scope = _approvals.scope_of(self.engine, gate) if gate is not None else None
        if scope is None:
            return pending
        return dataclasses.replace(pending, scope=scope[0], scope_members=scope[1])

    @operation("approve")
    def approve(
        self,
        saga_id: str,
        seq: int,
        approver: str,
        *,
        via: str | None = None,
        input_hash: str | None = None,
    ) -> ApprovalDecision:
        """Journal APPROVED by ``approver`` for the gate at ``seq``. Approving is not executing.

        ``via`` (``"slack"`` or ``"email"``) journals the channel of a decision taken from a
        message; ``input_hash`` is the payload's SHA-256 the approver was shown: if the gate holds
        another payload, ``PayloadMismatchError`` and nothing is journaled. An approver the
        guardrails policy does not name for this gate gets ``ApproverScopeError``."""
        _refuse_in_loop("approve")
        return drive(_approvals.approve(self.engine, saga_id, seq, approver, via or "", input_hash))

    @operation("approve")
    async def approve_async(
        self,
        saga_id: str,
        seq: int,
        approver: str,
        *,
        via: str | None = None,
        input_hash: str | None = None,
    ) -> ApprovalDecision:
        return await drive_async(
            _approvals.approve(self.engine, saga_id, seq, approver, via or "", input_hash)
        )

    @operation("reject")
    def reject(
        self,
        saga_id: str,
        seq: int,
        approver: str,
        reason: str,
        *,
        via: str | None = None,
        input_hash: str | None = None,
    ) -> ApprovalDecision:
        """Journal REJECTED, drop the request and compensate the saga (``decision.result``).

        ``reason`` is required, one line and not blank (``InvalidValueError`` otherwise, nothing
        journaled): a rejection nobody can explain later is no evidence. ``via`` and
        ``input_hash`` as for :meth:`approve`; approver scopes apply to a rejection too."""
        _refuse_in_loop("reject")
        return drive(_approvals.reject(self.engine, saga_id, seq, approver, reason, via or "", input_hash))

    @operation("reject")
    async def reject_async(
        self,
        saga_id: str,
        seq: int,
        approver: str,
        reason: str,
        *,
        via: str | None = None,
        input_hash: str | None = None,
    ) -> ApprovalDecision:
        return await drive_async(
            _approvals.reject(self.engine, saga_id, seq, approver, reason, via or "", input_hash)
        )

    @operation("resume")
    def resume(self, saga_id: str, seq: int, payload: str, *, resumed_by: str | None = None) -> SagaResult:
        """Execute an approved gate's tool with ``payload``, at most once, if every check passes.

        Raises ``ApprovalNotFoundError`` (no pending request), ``ApprovalRefusedError`` (not
        approved in the journal, expired, rejected), ``UnknownToolError``; a payload that is not
        byte-for-byte the approved one journals REJECTED, compensates, and comes back as a
        COMPENSATED result whose error is a ``PayloadMismatchError``. ``resumed_by`` names who
        asked for the execution; it is journaled in the resumed call's INTENT.
        ``SagaRunningElsewhereError`` when another resume of the gate is still running in a living
        process (any process on the store): nothing was done, ask again once it has ended.
        """
        _refuse_in_loop("resume")
        self._resumable(saga_id, seq)
        try:
            granted = drive(_approvals.claim(self.engine, saga_id, seq, payload, resumed_by))
        except ApprovalNotFoundError:
            self._refuse_running(saga_id, seq)
            raise
        if granted.refused:
            return _refused(saga_id, seq, granted)
        run = self._resumed(saga_id, granted)
        with _Attempt(self, run) as attempt:  # a failure is journaled FAILED and compensates
            attempt.value = run.execute(
                granted.spec, granted.seq, payload, granted.args, granted.kwargs or {}
            )
        return attempt.result

    @operation("resume")
    async def resume_async(
        self, saga_id: str, seq: int, payload: str, *, resumed_by: str | None = None
    ) -> SagaResult:
        """``resume`` for async tools and event loops."""
        await asyncio.to_thread(self._resumable, saga_id, seq)
        try:
            granted = await drive_async(_approvals.claim(self.engine, saga_id, seq, payload, resumed_by))
        except ApprovalNotFoundError:
            await asyncio.to_thread(self._refuse_running, saga_id, seq)
            raise
        if granted.refused:
            return _refused(saga_id, seq, granted)
        run = self._resumed(saga_id, granted)
        async with _Attempt(self, run) as attempt:
            attempt.value = await run.execute_async(
                granted.spec, granted.seq, payload, granted.args, granted.kwargs or {}
            )
        return attempt.result

    def _refuse_running(self, saga_id: str, seq: int) -> None:
        """Raise why a resume found no request when the reason is that the gate's call is still
        running: another resume journaled its INTENT, it has no outcome, and a living process
        runs the saga. Return otherwise (not found stands: resumed and ended, rejected, in doubt)."""
        state = self.engine.snapshot(saga_id)
        gate = state.gates.get(seq)
        call = gate.resumed if gate is not None else None
        if call is None or call.outcome is not None or not self.engine.is_live(saga_id):
            return
        raise SagaRunningElsewhereError(
            f"saga {saga_id!r} seq {seq}: the approved call is still running in a living process "
            f"(its INTENT is seq {call.intent.seq}); nothing was done here, ask again once it has ended",
            saga_id,
            seq,
        ) from None

    def _resumable(self, saga_id: str, seq: int) -> None:
        """A resume acting for a principal may only run a saga that principal started (or an
        admin): another's is answered as a request that does not exist."""
        acting = current_principal()
        principal = acting.name if acting is not None else self.principal
        if principal is None or (acting is not None and acting.admin):
            return
        try:
            self._owned_start(saga_id, principal, acting)
        except SagaNotFoundError:
            raise ApprovalNotFoundError(
                f"no pending approval request for saga {saga_id!r} seq {seq}"
            ) from None

    def _resumed(self, saga_id: str, granted: Claim) -> SagaRun:
        self.engine.enter(saga_id)  # left in _conclude, whatever happens
        gate = granted.request.journal_seq
        run = new_run(self.engine, saga_id, existed=True, last_seq=granted.seq, gate=gate)
        run.started_input = granted.started
        return run

    @operation("expire")
    def expire_approvals(self, now: datetime | None = None) -> list[ApprovalRequest]:
        """Expire every request past its time (REJECTED, reason expired; the saga compensates)."""
        _refuse_in_loop("expire_approvals")
        return drive(_approvals.expire_due(self.engine, now))

    @operation("expire")
    async def expire_approvals_async(self, now: datetime | None = None) -> list[ApprovalRequest]:
        return await drive_async(_approvals.expire_due(self.engine, now))

    def diagnose(
        self,
        *,
        older_than: timedelta = DEFAULT_OLDER_THAN,
        expire: bool = False,
        full: bool = False,
        now: datetime | None = None,
        progress: Progress | None = None,
    ) -> Diagnosis:
        """What in the journal needs a human, as findings (what ``sagacity doctor`` prints).

        States younger than ``older_than`` are left out (probably still in progress). Checks the
        sagas the saga index flags; ``full`` re-verifies and folds every saga instead (time in
        proportion to the journal). Read-only unless ``expire``: then overdue approval requests
        are first expired and their sagas compensated, which needs their tools registered here.
        ``progress(sagas done, sagas, entries read)`` is called after each saga checked.
        """
        _refuse_in_loop("diagnose")
        return doctor.diagnose(
            self, older_than=older_than, now=now, expire=expire, full=full, progress=progress
        )

    async def diagnose_async(
        self,
        *,
        older_than: timedelta = DEFAULT_OLDER_THAN,
        expire: bool = False,
        full: bool = False,
        now: datetime | None = None,
    ) -> Diagnosis:
        return await asyncio.to_thread(
            partial(doctor.diagnose, self, older_than=older_than, now=now, expire=expire, full=full)
        )

    # -- evidence -------------------------------------------------------------------------------
    def entries(self, saga_id: str) -> list[Entry]:
        """The saga's journal in seq order (empty for an unknown saga). Read-only."""
        _refuse_in_loop("entries")
        return self.journal.entries(saga_id)

    entries_async = in_thread(entries)

    def saga_ids(self) -> list[str]:
        """Every saga with at least one entry, sorted. Read-only."""
        _refuse_in_loop("saga_ids")
        return self._saga_ids()

    saga_ids_async = in_thread(saga_ids)

    def _saga_ids(self) -> list[str]:
        return self.journal.read(self.store.saga_ids)

    def verify(self, saga_id: str) -> Verification:
        """Recompute the saga's hash chain from the store (streaming). Read-only.

        Raises ``SagaNotFoundError`` when the saga has no entries. A break it finds is noted in
        the saga index (a cache, when the store can be written), so every list and counter shows
        it from then on, also when no trigger saw the damage.
        """
        _refuse_in_loop("verify")
        return self._verify(saga_id)

    verify_async = in_thread(verify)

    def _verify(self, saga_id: str) -> Verification:
        verification = self.journal.verify(saga_id)
        if not verification.valid:
            self.index.note_broken(saga_id, verification.break_at_index)
        return verification

    def export(self, saga_id: str) -> Iterator[str]:
        """The saga as JSON Lines (SPEC §7), streamed a batch of rows at a time. Read-only.

        Raises ``SagaNotFoundError`` at once (not on first iteration) for an unknown saga.
        """
        _refuse_in_loop("export")
        return self._export(saga_id)

    async def export_async(self, saga_id: str) -> AsyncIterator[str]:
        """``export`` for event loops: each batch of rows is read in a worker thread."""
        lines = await asyncio.to_thread(self._export, saga_id)
        done = object()
        while (line := await asyncio.to_thread(next, lines, done)) is not done:
            yield line  # type: ignore[misc]

    def _export(self, saga_id: str) -> Iterator[str]:
        self.journal.require_saga(saga_id)
        return export_lines(self.journal.iter_entries(saga_id))

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        """Write any call outcome still held back (``durability="deferred"``), then release the
        store's connections."""
        _otel_gauges.unwatch(self)
        try:
            self.journal.release()
        finally:
            self.store.close()

    def __enter__(self) -> Sagacity:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sagacity({self.store!r})"


def _all_pending(sg: Sagacity) -> list[ApprovalRequest]:
    """Every pending request, for the pending-approvals gauges: one read of the request table."""
    return sg._pending(None)


def _in_doubt_count(sg: Sagacity) -> int:
    """In-doubt calls, for the gauge: summed over the index's in-doubt sagas (a partial index,
    so the read does not grow with the journal), leaving out sagas a living process runs."""
    rows = sg.index.watched(Watch.IN_DOUBT)
    live = sg.engine.live_among([r.saga_id for r in rows])
    return sum(r.in_doubt for r in rows if r.saga_id not in live)


#: Index rows read per page where a read walks the index (a liveness probe per page).
_PAGE = 500


def _detail(view: SagaView) -> SagaDetail:
    return SagaDetail(
        view.saga_id,
        view.status,
        view.entries,
        view.verification,
        view.decisions,
        view.pending,
        view.in_doubt,
    )


def _require_limit(limit: int | None) -> None:
    """A page size is None (everything) or a whole number of at least 1."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidValueError(f"limit must be a whole number of at least 1, not {limit!r}")


def _newest_first(row: IndexRow) -> tuple[datetime, str]:
    """The saga list's order key (it is sorted by this, descending)."""
    return (row.updated_at, row.saga_id)


def _summary(row: IndexRow, status: SagaStatus) -> SagaSummary:
    """``status`` as a read reports it; a saga shown RUNNING has calls in flight, none in doubt."""
    return SagaSummary(
        row.saga_id,
        status,
        row.entry_count,
        row.started_at,
        row.updated_at,
        row.awaiting_approval,
        0 if status is SagaStatus.RUNNING else row.in_doubt,
        row.broken_at,
    )


def _refused(saga_id: str, seq: int, granted: Claim) -> SagaResult:
    """The result of a resume whose payload did not match: REJECTED, compensated."""
    assert granted.run is not None
    kind = ApprovalRefusedError if granted.denied else PayloadMismatchError
    return granted.run.result(saga_id, error=kind(f"saga {saga_id!r} seq {seq}: {granted.refused}"))


@dataclass(frozen=True, slots=True)
class Start:
    """Which saga a run starts and how: ``continue_existing`` adds to a saga on purpose (a
    workflow's next stage), ``on_abandon`` is what its START says instead of the Sagacity's."""

    saga_id: str
    continue_existing: bool = False
    on_abandon: str | None = None
    durability: str | None = None


class _Attempt:
    """The work of one run, concluded as the block ends (``with`` or ``async with``: set
    ``value`` inside, read ``result`` after). Any failure compensates; an ordinary error comes
    back in the result, while ``KeyboardInterrupt``, ``SystemExit`` and ``CancelledError`` go on
    their way once the saga is compensated."""

    __slots__ = ("_entered", "result", "run", "sagacity", "value")

    result: SagaResult

    def __init__(self, sg: Sagacity, run: SagaRun) -> None:
        self.sagacity = sg
        self.run = run
        self.value: Any = None
        self._entered = entered(run)

    def __enter__(self) -> _Attempt:
        self._entered.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self._entered.__exit__(exc_type, exc, tb)
        self.result = self.sagacity._conclude(self.run, self.value, exc)
        return isinstance(exc, Exception)

    async def __aenter__(self) -> _Attempt:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self._entered.__exit__(exc_type, exc, tb)
        self.result = await self.sagacity._conclude_async(self.run, self.value, exc)
        return isinstance(exc, Exception)


class SagaScope:
    """What ``Sagacity.saga`` returns: a sync and async context manager over one saga.

    An exception from the block (``KeyboardInterrupt`` and ``CancelledError`` included) is
    re-raised after the saga is compensated.
    """

    def __init__(
        self,
        sg: Sagacity,
        saga_id: str,
        continue_existing: bool = False,
        on_abandon: str | None = None,
        durability: str | None = None,
    ) -> None:
        self.sagacity = sg
        self.saga_id = saga_id
        self.continue_existing = continue_existing
        self.on_abandon = on_abandon
        self.durability = durability
        self.result: SagaResult | None = None
        self._attempt: _Attempt | None = None

    def _enter(self) -> SagaScope:
        start = Start(self.saga_id, self.continue_existing, self.on_abandon, self.durability)
        self._attempt = _Attempt(self.sagacity, self.sagacity._start(start)).__enter__()
        return self

    def _exited(self) -> _Attempt:
        assert self._attempt is not None
        return self._attempt

    def __enter__(self) -> SagaScope:
        _refuse_in_loop("saga", "`async with sg.saga(...)`")
        return self._enter()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        attempt = self._exited()
        attempt.__exit__(exc_type, exc, tb)  # the block's exception is re-raised, whatever it was
        self.result = attempt.result

    async def __aenter__(self) -> SagaScope:
        return self._enter()  # no I/O to start: on the loop

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        attempt = self._exited()
        await attempt.__aexit__(exc_type, exc, tb)
        self.result = attempt.result

    @property
    def id(self) -> str:
        return self.saga_id
