"""The gateway: one upstream, one journal, and what happens to each ``tools/call`` in between.

A call to an upstream tool runs inside its saga (see ``_sagas``), one call per saga at a time:

* read-only and compensatable tools are journaled (INTENT, then EXECUTED or FAILED) and sent
  upstream; an upstream failure compensates the saga, newest call first, through the upstream's
  own undo tools;
* an irreversible tool is held: the journal gets AWAITING_APPROVAL with the canonical arguments and
  the agent an ordinary result saying so. The same call sent again (same tool, same canonical
  arguments) runs it once it is approved, exactly once, and answers with the upstream's result;
  ``sagacity_status`` and a background sweep run approved calls too;
* a call whose outcome is unknown (the upstream was lost or did not answer in time) is left in
  doubt: INTENT without outcome, never retried, answered with an error saying a person must look.

The proxy's own tools (``sagacity_status``, ``sagacity_commit``, ``sagacity_rollback``) let the
agent see its saga, declare it done, or have it undone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from functools import partial
from pathlib import Path
from types import EllipsisType
from typing import Any

import anyio
import anyio.abc
import mcp_types as types

import sagacity.mcp._answers as answers
from sagacity import ApprovalGate, CallStatus, Sagacity, SagaResult, SagaStatus, SagaView, acting_as
from sagacity._wire import mcp_gate_state, mcp_status_json
from sagacity.errors import (
    ApprovalError,
    DefinitionChangedError,
    InvalidValueError,
    SagaExistsError,
    SagaNotFoundError,
    SagaStateError,
)
from sagacity.guardrails import Denied
from sagacity.guardrails import Policy as GuardrailsPolicy
from sagacity.mcp._auth import SCOPE_CALL, SCOPE_COMMIT, SCOPE_ROLLBACK, Caller
from sagacity.mcp._canonical import canonical_json
from sagacity.mcp._policy import Decision, GatewayPolicy, PolicyError, ToolKind
from sagacity.mcp._reload import PolicyReloader
from sagacity.mcp._sagas import SagaBook, SagaOrigin, SagaRouter
from sagacity.mcp._tools import InDoubt, LoopBridge, Raised, UpstreamTools, run_in_thread
from sagacity.mcp._upstream import Upstream, UpstreamTarget

__all__ = ["COMMIT_TOOL", "PROXY_TOOLS", "ROLLBACK_TOOL", "STATUS_TOOL", "Gateway", "RollbackRequested"]

log = logging.getLogger("sagacity.mcp")

STATUS_TOOL = "sagacity_status"
COMMIT_TOOL = "sagacity_commit"
ROLLBACK_TOOL = "sagacity_rollback"
PROXY_TOOLS = (STATUS_TOOL, COMMIT_TOOL, ROLLBACK_TOOL)
#: Who the journal says asked for an approved call's execution.
RESUMED_BY = "sagacity-mcp-proxy"
_OPEN = (SagaStatus.COMPLETED, SagaStatus.AWAITING_APPROVAL, SagaStatus.ABANDONED)
#: The scope each of the proxy's own tools needs; every upstream tool needs ``SCOPE_CALL``.
_SCOPES = {STATUS_TOOL: SCOPE_CALL, COMMIT_TOOL: SCOPE_COMMIT, ROLLBACK_TOOL: SCOPE_ROLLBACK}


def _acting(caller: Caller) -> AbstractContextManager[None]:
    """The caller's principal for the sagas the block starts: they belong to it, gates name it."""
    if caller.principal is None:
        return nullcontext()
    return acting_as(caller.principal, admin=caller.admin)


class RollbackRequested(Exception):
    """The agent (or a closing session) asked for the saga to be undone."""


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _proxy_tools() -> list[types.Tool]:
    empty = {"type": "object", "properties": {}}
    return [
        types.Tool(
            name=STATUS_TOOL,
            description=(
                "Sagacity: the state of this task's saga: calls waiting for human approval, the "
                "result of approved ones (an approved call runs now if it has not yet), calls whose "
                "outcome is unknown."
            ),
            input_schema=empty,
        ),
        types.Tool(
            name=COMMIT_TOOL,
            description=(
                "Sagacity: declare this task's work done. Nothing it did is undone afterwards; calls "
                "still waiting for approval run once approved. Your next call starts a new saga."
            ),
            input_schema=empty,
        ),
        types.Tool(
            name=ROLLBACK_TOOL,
            description=(
                "Sagacity: undo this task's work. Every call that can be undone is undone through the "
                "server's own tools, newest first; calls waiting for approval are cancelled."
            ),
            input_schema={
                "type": "object",
                "properties": {"reason": {"type": "string", "description": "Why, for the audit journal."}},
            },
        ),
    ]


class Gateway:
    """The proxy's core, independent of how the agent reaches it (see :mod:`sagacity.mcp._proxy`)."""

    def __init__(
        self,
        sagacity: Sagacity,
        upstream: Upstream,
        tools: UpstreamTools,
        policy: GatewayPolicy,
        tg: anyio.abc.TaskGroup,
    ) -> None:
        self.sagacity = sagacity
        self.upstream = upstream
        self.tools = tools
        self.policy = policy
        self.router = SagaRouter(policy.sagas)
        self._tg = tg
        #: Re-reads the policy file (``open(policy_path=...)``): SIGHUP or a change to the file.
        self.reloader: PolicyReloader | None = None

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        policy: GatewayPolicy,
        target: UpstreamTarget,
        *,
        db_url: str | None = None,
        settle_interval: float | None = 2.0,
        pin_tools: bool = False,
        policy_path: str | os.PathLike[str] | None = None,
        policy_poll: float | None = 2.0,
        **store_options: Any,
    ) -> AsyncIterator[Gateway]:
        """Connect to the upstream, check the policy against its tools, open the journal.

        ``pin_tools``: the upstream's tool list as first listed is the one served; a tool whose
        definition changes later (a rug pull) or that appears later is refused.

        ``policy_path``: the file ``policy`` was read from; its guardrails are reloaded by
        :meth:`reload_policy` and, every ``policy_poll`` seconds (None: never), when it changes
        (see :mod:`sagacity.mcp._reload`).

        Raises ``PolicyError`` when the policy names undo tools the upstream does not have (or
        the upstream has a tool named like one of the proxy's own), ``ConnectionError`` when the
        upstream cannot be reached.
        """
        bridge = LoopBridge(asyncio.get_running_loop())
        async with Upstream(target, connect_timeout=policy.upstream.connect_timeout) as upstream:
            await upstream.start()
            listing = await upstream.list_tools()
            names = [t.name for t in listing]
            problems = policy.problems_with(names)
            problems += [
                f"the upstream has a tool named {name!r}, which is the proxy's own"
                for name in names
                if name in PROXY_TOOLS
            ]
            if problems:
                raise PolicyError("; ".join(problems))
            tools = UpstreamTools(upstream, policy, bridge, pin=pin_tools)
            tools.adopt(listing)
            ttl: dict[str, Any] = {}
            if policy.defaults.approval_ttl_set:
                ttl["approval_ttl"] = policy.defaults.approval_ttl
            sg = await asyncio.to_thread(
                partial(
                    Sagacity,
                    db_url,
                    registry=tools.registry,
                    policy=policy.guardrails,
                    **ttl,
                    **store_options,
                )
            )
            tools.sagacity = sg
            tg = anyio.create_task_group()
            await tg.__aenter__()
            try:
                gateway = cls(sg, upstream, tools, policy, tg)
                tg.start_soon(gateway._reconcile_at_start)
                if settle_interval:
                    tg.start_soon(gateway._settle_loop, settle_interval)
                if policy_path is not None:
                    gateway.reloader = PolicyReloader(
                        Path(policy_path), sg, lambda: list(tools.listed), gateway._guardrails_in_force
                    )
                    if policy_poll:
                        tg.start_soon(gateway.reloader.watch, policy_poll)
                yield gateway
            finally:
                # Background work stops with the gateway; what the body raised goes on unwrapped.
                tg.cancel_scope.cancel()
                try:
                    await tg.__aexit__(None, None, None)
                finally:
                    with anyio.CancelScope(shield=True):
                        await asyncio.to_thread(sg.close)

    def _guardrails_in_force(self, rules: GuardrailsPolicy) -> None:
        """The reloaded guardrails, kept in the policy this gateway answers by."""
        self.policy = dataclasses.replace(self.policy, guardrails=rules)

    async def reload_policy(self) -> str:
        """Re-read the policy file now (SIGHUP): its guardrails go into force whole, or the new
        text is refused and every call denied until it is fixed; what happened, in one line."""
        if self.reloader is None:
            return "no policy file to reload (the gateway was opened with a policy object)"
        return await self.reloader.reload()

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run ``fn()`` in the gateway's task group (for work that outlives a request)."""
        self._tg.start_soon(fn)

    # -- listing ------------------------------------------------------------------------------------
    async def list_tools(self) -> list[types.Tool]:
        """The upstream's tools as the agent sees them, and the proxy's own."""
        try:
            self.tools.adopt(await self.upstream.list_tools())
        except Exception as exc:  # noqa: BLE001 - the listing seen last still says what the proxy can do
            log.warning("listing the upstream's tools failed (%s); serving the last listing", _describe(exc))
        rules = self.policy.guardrails
        shown = [
            answers.present_tool(
                t,
                self.tools.decisions[t.name],
                may_hold=rules is not None and any(r.action != "allow" for r in rules.rules_for(t.name)),
            )
            for t in self.tools.listed.values()
            if self.tools.decisions[t.name].kind is not ToolKind.HIDDEN
        ]
        return shown + _proxy_tools()

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """A listed tool's input schema, from the listing seen last (no upstream round trip)."""
        listed = self.tools.listed.get(name)
        if listed is not None:
            return listed.input_schema
        return next((t.input_schema for t in _proxy_tools() if t.name == name), None)

    # -- calls ----------------------------------------------------------------------------------------
    async def dispatch(
        self, book: SagaBook, name: str, arguments: dict[str, Any], caller: Caller | None = None
    ) -> types.CallToolResult:
        """Answer one ``tools/call`` for saga ``book`` from ``caller`` (nobody in particular when
        None): refused, with nothing journaled, when its token lacks the scope the call needs or
        the saga is another principal's (which is told "no such saga", not "forbidden")."""
        caller = caller if caller is not None else Caller(None)
        missing = caller.missing(_SCOPES.get(name, SCOPE_CALL))
        if missing is not None:
            return answers.refused(missing)
        # An upstream call is checked under the saga's lock, where it reads the saga anyway.
        if name in PROXY_TOOLS:
            if not await self._visible(book, caller, own_tool=True):
                return _no_such_saga(book)
            book.driven = True
        with _acting(caller):
            return await self._dispatch(book, name, arguments, caller)

    async def _visible(self, book: SagaBook, caller: Caller, *, own_tool: bool) -> bool:
        """Whether ``caller`` may see and act on the saga, decided from the journal on every call
        (the START's principal; no process remembers an owner): see :func:`_may_see`."""
        return _may_see(await self._view(book.saga_id), book, caller, own_tool=own_tool)

    async def _dispatch(
        self, book: SagaBook, name: str, arguments: dict[str, Any], caller: Caller
    ) -> types.CallToolResult:
        if name == STATUS_TOOL:
            return await self.status(book)
        if name == COMMIT_TOOL:
            return await self.commit(book)
        if name == ROLLBACK_TOOL:
            reason = arguments.get("reason")
            return await self.rollback(
                book, reason if isinstance(reason, str) and reason else "no reason given", caller.principal
            )
        decision = self.tools.decision(name)
        if decision is None:
            await self.list_tools()  # a tool the upstream added since
            decision = self.tools.decision(name)
        if decision is not None and decision.kind is ToolKind.HIDDEN:
            return answers.refused(f"{name} is not available through this proxy (policy: hidden)")
        if name in self.tools.changed:  # changed, or added, since the tools were pinned
            why = self.tools.changed[name]
            log.warning("refused a call of %s: %s", name, why)
            return answers.refused(f"{name} was not run: {why}; the proxy serves the tools it pinned")
        if decision is None:
            return answers.refused(f"the upstream server has no tool named {name!r}")
        try:
            canonical = canonical_json(arguments)
        except InvalidValueError as exc:
            return answers.refused(str(exc))
        async with book.lock:
            # Whose saga it is, read from the journal under the lock: no call here changes it now,
            # and a saga another process starts meanwhile is fenced by the first append (_call).
            view = await self._view(book.saga_id)
            if not _may_see(view, book, caller, own_tool=False):
                return _no_such_saga(book)
            book.driven = True
            # Past this point the call is journaled and may reach the upstream: an agent that goes
            # away mid-call must not cut the journaling (or a compensation) short.
            with anyio.CancelScope(shield=True):
                answer = await self._call(book, decision, canonical, caller, view)
        return answer

    async def _call(
        self,
        book: SagaBook,
        decision: Decision,
        canonical: str,
        caller: Caller,
        view: SagaView | None,
    ) -> types.CallToolResult:
        """``view``: the saga as this call read it under the saga's lock (the one read of it).
        None, the journal had nothing of the saga (so nothing is closed and no gate waits): the
        call starts it, and its first append lands only as seq 1. If another process's START
        landed first, whose that START names decides, before this call reads anything of it."""
        if view is None:
            try:
                return await self._run(book, decision, canonical, fresh=True)
            except SagaExistsError:  # started elsewhere meanwhile; nothing was journaled or sent
                view = await self._view(book.saga_id)
                if not _may_see(view, book, caller, own_tool=False):
                    return _no_such_saga(book)
        closed = await self._closed(book, view=view)
        if closed is not None:
            return closed
        # A call that can be held: irreversible, or any call when a guardrails policy may hold it.
        if decision.kind is ToolKind.IRREVERSIBLE or self.sagacity.guard is not None:
            gate = _gate_for(view.gates if view is not None else (), decision.name, canonical)
            if gate is not None:
                return await self._resend(book, gate, decision)
        return await self._run(book, decision, canonical)

    async def _run(
        self, book: SagaBook, decision: Decision, canonical: str, *, fresh: bool = False
    ) -> types.CallToolResult:
        """Run the call in its saga, a new one when ``fresh`` (``SagaExistsError`` when the id
        was taken meanwhile)."""
        wrapped = self.tools.sagacity_tool(decision.name)
        try:
            async with self.sagacity.saga(book.saga_id, continue_existing=not fresh) as scope:
                outcome = await run_in_thread(partial(wrapped.call_json, canonical), input=canonical)
        except SagaExistsError:
            raise
        except SagaNotFoundError:  # another principal's START landed first (the core read it)
            return _no_such_saga(book)
        except SagaStateError as exc:
            book.end()
            return answers.refused(str(exc))
        result = scope.result
        assert result is not None
        if isinstance(outcome, InDoubt):
            book.end()
            return answers.in_doubt(
                book.saga_id,
                outcome.seq,
                decision.name,
                outcome.reason,
                new_saga=book.origin is not SagaOrigin.META,
            )
        if isinstance(outcome, Raised):
            if result.status in _OPEN:  # nothing was journaled as failed: the call never started
                return answers.refused(f"{decision.name} was not run: {_describe(outcome.error)}")
            book.end()
            return answers.failed(
                decision.name, _describe(outcome.error), result, new_saga=book.origin is not SagaOrigin.META
            )
        value = outcome.value
        if isinstance(value, Denied):
            return answers.refused(value)  # the guardrails policy denied it: the upstream was not called
        if isinstance(value, str):  # held: irreversible, or by the guardrails policy
            held = [r for r in result.awaiting if r.tool_name == decision.name and r.input == canonical]
            seq = max(r.journal_seq for r in held) if held else 0
            return answers.awaiting(book.saga_id, seq, decision.name, decision.approvals)
        return answers.upstream_result(value)

    # -- held calls -----------------------------------------------------------------------------------
    async def _resend(self, book: SagaBook, gate: ApprovalGate, decision: Decision) -> types.CallToolResult:
        """The answer to a call that is ``gate``'s call again: run it if approved, else say it
        waits; once it ran, its journaled outcome, to every such call (see :func:`_gate_for`)."""
        if gate.open:
            return await self._execute_gate(book, gate, decision)
        resumed = gate.resumed
        if resumed is not None and resumed.result is not None:
            return answers.upstream_result(json.loads(resumed.result))
        return answers.refused(
            f"{decision.name} (request {gate.seq}) was approved and {mcp_gate_state(gate, book.parked)}"
        )

    async def _execute_gate(
        self, book: SagaBook, gate: ApprovalGate, decision: Decision
    ) -> types.CallToolResult:
        """Run an approved gate once (``resume``), or say it is still waiting.

        An expired request is handed to ``resume`` too, which journals its expiry and compensates
        the saga (through this proxy's upstream, the only place its tools are registered).
        """
        view = await self._view(book.saga_id)
        pending = next((p for p in view.pending if p.request.journal_seq == gate.seq), None) if view else None
        if pending is None:
            return await self._after_race(book, gate, decision)
        if len(pending.approvers) < pending.approvals_required and not pending.expired:
            return answers.awaiting(
                book.saga_id,
                gate.seq,
                gate.tool_name,
                pending.approvals_required,
                pending.approvers,
                again=True,
            )
        request = pending.request
        outcome = await run_in_thread(
            partial(self.sagacity.resume, book.saga_id, gate.seq, request.input, resumed_by=RESUMED_BY),
            input=request.input,
        )
        if isinstance(outcome, InDoubt):
            # The resumed run never ends in this process (its thread is parked), so the saga stays
            # RUNNING (its liveness lease held) while this process lives; IN_DOUBT once it is gone.
            book.parked.add(outcome.seq)
            book.end()
            return answers.in_doubt(
                book.saga_id,
                outcome.seq,
                gate.tool_name,
                outcome.reason,
                new_saga=book.origin is not SagaOrigin.META,
            )
        if isinstance(outcome, Raised):
            if isinstance(outcome.error, DefinitionChangedError):
                # The upstream changed the tool since the approval: held again, a new request.
                return answers.awaiting(
                    book.saga_id, outcome.error.new_seq, gate.tool_name, decision.approvals
                )
            if isinstance(outcome.error, ApprovalError | SagaStateError):
                return await self._after_race(book, gate, decision)
            return answers.refused(
                f"{gate.tool_name} (request {gate.seq}) was not run: {_describe(outcome.error)}"
            )
        result = outcome.value
        assert isinstance(result, SagaResult)
        if result.error is None and result.status in _OPEN:
            return answers.upstream_result(result.value)
        book.end()
        error = _describe(result.error) if result.error is not None else result.status.value
        return answers.failed(gate.tool_name, error, result, new_saga=book.origin is not SagaOrigin.META)

    async def _after_race(
        self, book: SagaBook, gate: ApprovalGate, decision: Decision
    ) -> types.CallToolResult:
        """The gate's request was taken by someone else (a resume or rejection elsewhere): say how it is."""
        closed = await self._closed(book)
        if closed is not None:
            return closed
        now = next((g for g in await self._gates(book.saga_id) if g.seq == gate.seq), gate)
        if not now.open:
            return await self._resend(book, now, decision)
        return answers.awaiting(
            book.saga_id, now.seq, now.tool_name, decision.approvals, now.approvers, again=True
        )

    async def _settle(self, book: SagaBook) -> None:
        """Run this saga's approved calls (each at most once: the core's resume guarantees it), and
        expire its requests that are past their time."""
        view = await self._view(book.saga_id)
        if view is None:
            return
        expired = {p.request.journal_seq for p in view.pending if p.expired}
        for gate in view.gates:
            decision = self.tools.decision(gate.tool_name)
            if not gate.open or decision is None:
                continue
            if gate.status is CallStatus.APPROVED or gate.seq in expired:
                if await self._closed(book, committed_ok=True) is not None:
                    return
                await self._execute_gate(book, gate, decision)

    async def _reconcile_at_start(self) -> None:
        """Ask the upstream about the calls a crash left in doubt, through the read tools the
        policy names (``reconcile``): what it knows is settled as a person's resolution would
        be (a saga whose call did not happen is undone); the rest stays for a person."""
        try:
            done = await self.sagacity.reconcile_async()
        except Exception:
            log.exception("reconciling the calls left in doubt failed; resolve them by hand")
            return
        for r in done:
            if r.settled:
                log.warning(
                    "saga %s seq %s (%s): %s, journaled %s by %s: %s",
                    r.saga_id,
                    r.seq,
                    r.tool_name,
                    r.answer,
                    r.outcome,
                    r.reconciler,
                    r.evidence,
                )
            elif r.answer != "no_reconciler":
                log.warning(
                    "saga %s seq %s (%s) stays in doubt: %s %s",
                    r.saga_id,
                    r.seq,
                    r.tool_name,
                    r.answer,
                    r.evidence,
                )

    async def _settle_loop(self, interval: float) -> None:
        """Every ``interval`` seconds, run the approved calls of the sagas this proxy drives."""
        while True:
            await anyio.sleep(interval)
            try:
                pending = await asyncio.to_thread(self.sagacity.pending_approvals)
                for saga_id in sorted({r.saga_id for r in pending}):
                    book = self.router.books.get(saga_id)
                    if book is None or not book.driven or book.parked:
                        continue
                    async with book.lock:
                        with anyio.CancelScope(shield=True):
                            await self._settle(book)
            except Exception:
                log.exception("running approved calls failed; trying again in %ss", interval)

    # -- the saga's state -----------------------------------------------------------------------------
    async def _view(self, saga_id: str) -> SagaView | None:
        """The saga as its journal tells it now (None: nothing journaled yet)."""
        try:
            return await self.sagacity.view_async(saga_id)
        except SagaNotFoundError:
            return None

    async def _gates(self, saga_id: str) -> tuple[ApprovalGate, ...]:
        view = await self._view(saga_id)
        return view.gates if view is not None else ()

    async def _closed(
        self, book: SagaBook, *, committed_ok: bool = False, view: SagaView | EllipsisType | None = ...
    ) -> types.CallToolResult | None:
        """An answer refusing the call when the saga can take no more calls, else None.

        ``committed_ok``: a committed saga still runs its approved calls (the sweep, the status).
        ``view``: the saga as the caller just read it (``...``: read it here, if needed).
        """
        sid = book.saga_id
        new = (
            " Your next call starts a new saga."
            if book.origin is not SagaOrigin.META
            else " Use a new saga id."
        )
        if book.committed and not committed_ok:
            return answers.refused(f"saga {sid!r} was committed (declared done).{new}")
        if book.parked:
            book.end()
            return answers.refused(
                f"saga {sid!r} has a call whose outcome is unknown (seq {min(book.parked)}); a person "
                f"must resolve it before the saga can go on.{new}"
            )
        if view is ...:
            view = await self._view(sid)
        status = view.status if view is not None else None
        if view is None or status in _OPEN:
            return None
        if status is SagaStatus.RUNNING:  # not over: a living process runs a call of it right now
            return answers.running(sid)
        book.end()
        if status is SagaStatus.IN_DOUBT:
            return answers.refused(
                f"saga {sid!r} has a call whose outcome is unknown; a person must resolve it "
                f"(sagacity sagas in-doubt) before the saga can go on.{new}"
            )
        why = f": {view.failure}" if view.failure is not None else ""
        return answers.refused(f"saga {sid!r} is {view.status.value}{why}; nothing more can run in it.{new}")

    # -- the proxy's own tools ------------------------------------------------------------------------
    async def status(self, book: SagaBook) -> types.CallToolResult:
        """``sagacity_status``: run approved calls, then report the saga."""
        async with book.lock:
            with anyio.CancelScope(shield=True):
                if await self._closed(book, committed_ok=True) is None:
                    await self._settle(book)
                answer = await self._report(book)
        return answer

    async def _report(self, book: SagaBook) -> types.CallToolResult:
        view = await self._view(book.saga_id)
        report = mcp_status_json(book.saga_id, view, committed=book.committed, parked=book.parked)
        return answers.text(json.dumps(report, ensure_ascii=False, indent=1), structured=report)

    async def commit(self, book: SagaBook) -> types.CallToolResult:
        """``sagacity_commit``: the saga's work is done; its session moves on to a new saga."""
        async with book.lock:
            closed = await self._closed(book)
            if closed is not None:
                return closed
            book.committed = True
            book.end()
            report = await self._report(book)
        waiting = [
            r for r in (report.structured_content or {}).get("requests", []) if r["state"] == "awaiting"
        ]
        note = f" {len(waiting)} call(s) still wait for approval; they run once approved." if waiting else ""
        return answers.text(f"Saga {book.saga_id!r} committed.{note}", structured=report.structured_content)

    async def rollback(
        self, book: SagaBook, reason: str, asked_by: str | None = None
    ) -> types.CallToolResult:
        """``sagacity_rollback``: compensate the saga's executed calls, newest first. The journal's
        saga-level FAILED names ``asked_by`` (the caller's principal) before the reason."""
        if asked_by is not None:
            reason = f"asked by {asked_by}: {reason}"
        async with book.lock:
            with anyio.CancelScope(shield=True):
                answer = await self._rollback(book, reason)
        return answer

    async def _rollback(self, book: SagaBook, reason: str) -> types.CallToolResult:
        closed = await self._closed(book)
        if closed is not None:
            return closed
        entries = await asyncio.to_thread(self.sagacity.entries, book.saga_id)
        if not entries:
            book.end()
            return answers.text(f"Saga {book.saga_id!r} had nothing to roll back.")
        scope = self.sagacity.saga(book.saga_id, continue_existing=True)
        try:
            async with scope:
                raise RollbackRequested(reason)
        except RollbackRequested:
            pass
        except SagaNotFoundError:  # another principal's saga: the core read its START
            return _no_such_saga(book)
        except SagaStateError as exc:
            return answers.refused(str(exc))
        book.end()
        assert scope.result is not None
        return answers.text(
            answers.compensation(scope.result),
            error=scope.result.status not in (SagaStatus.COMPENSATED, SagaStatus.REJECTED),
        )

    async def session_closed(self, key: str) -> None:
        """The MCP session ``key`` ended: apply ``sagas.on_session_close`` to its open saga."""
        session = self.router.sessions.get(key)
        if session is None or session.closed:
            return
        session.closed = True
        del self.router.sessions[key]
        book = self.router.books.get(session.current) if session.current is not None else None
        session.current = None
        if book is None or book.committed or self.policy.sagas.on_session_close != "compensate":
            return
        async with book.lock:
            with anyio.CancelScope(shield=True):
                if await self._has_open_work(book):
                    result = await self._rollback(book, "the MCP session closed with the saga open")
                    log.info("session %s closed: %s", key, result.model_dump_json(exclude_none=True))

    async def _has_open_work(self, book: SagaBook) -> bool:
        view = await self._view(book.saga_id)
        if view is None or view.status not in _OPEN or book.parked:
            return False
        if view.status is SagaStatus.AWAITING_APPROVAL:
            return True
        for call in view.calls:
            decision = self.tools.decision(call.tool_name)
            if (
                call.status is CallStatus.EXECUTED
                and decision is not None
                and decision.kind is ToolKind.COMPENSATABLE
            ):
                return True
        return False


def _may_see(view: SagaView | None, book: SagaBook, caller: Caller, *, own_tool: bool) -> bool:
    """Whether ``caller`` may see and act on the saga as ``view`` shows it: it is theirs, its
    START names no principal, or they are admin (or act for nobody: the operator's own process).

    A saga named in ``_meta`` with nothing journaled has nothing to show: the proxy's own tools
    answer as for another principal's saga, so that answer tells nobody whether the id is taken;
    an upstream call starts it."""
    if view is None:
        return not (own_tool and book.origin is SagaOrigin.META)
    if caller.admin or caller.principal is None:
        return True
    return view.principal is None or view.principal == caller.principal


def _no_such_saga(book: SagaBook) -> types.CallToolResult:
    """The one answer for a saga this caller may not see: another principal's, or (for the proxy's
    own tools) one with nothing journaled, word for word the same."""
    return answers.refused(
        f"no such saga {book.saga_id!r} for this client: nothing was done; name a saga of "
        "your own (or none, to start a new one)"
    )


def _gate_for(gates: Iterable[ApprovalGate], tool_name: str, canonical: str) -> ApprovalGate | None:
    """The gate a call of ``tool_name`` with these canonical arguments is about, if any: the
    saga's latest gate for exactly that call that was not rejected (a rejected one was superseded,
    or closed the saga).

    Whatever that gate's state, the call is that gate's call again: the agent re-sending it to
    learn its result, a client retrying on another connection, several at once, before or after
    a proxy restart. So a held call runs at most once in its saga and every such call is answered
    from the journal alone (still waiting, or its outcome); the same call as a new request needs
    other arguments or another saga. No process remembers which answer it gave.
    """
    found = [
        g
        for g in gates
        if g.tool_name == tool_name and g.input == canonical and g.status is not CallStatus.REJECTED
    ]
    return found[-1] if found else None
