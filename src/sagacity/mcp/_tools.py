"""The Sagacity tools that stand for the upstream's tools, and the thread each call runs in.

Every upstream tool becomes a ``@tool`` in a registry the proxy owns, declared from the policy:
IRREVERSIBLE (held for approval), COMPENSATABLE with a compensation that calls the upstream's undo
tool with templated arguments, or read-only (journaled, nothing to undo). The tool's function
sends the call upstream and returns the upstream's result, which the journal keeps as EXECUTED.

Why a thread per call: when the upstream is lost mid-call, the outcome is unknown, and the journal
must say exactly that — an INTENT with no outcome (in doubt). A tool that returns or raises always
gets an outcome journaled, so the function neither returns nor raises: it parks its (daemon)
thread for good, and the proxy answers the agent from the event loop without it. The function
reads its arguments from the journaled INTENT, so what goes upstream is always what was journaled
(and, after an approval, what was approved).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import mcp_types as types

from sagacity import CompensationContext, ReconcileContext, Reconciliation, Reversibility, current_call, tool
from sagacity.mcp._errors import (
    UndoFailedError,
    UpstreamRejectedError,
    UpstreamToolError,
    UpstreamUnavailableError,
)
from sagacity.mcp._policy import Decision, GatewayPolicy, ReconcilePolicy, ToolKind, UndoPolicy
from sagacity.mcp._template import result_scope
from sagacity.mcp._upstream import CallOutcome, Upstream
from sagacity.tools import Retry, ToolRegistry, definition_digest

if TYPE_CHECKING:
    from sagacity import Sagacity

__all__ = ["Finished", "InDoubt", "LoopBridge", "Raised", "ThreadOutcome", "UpstreamTools", "run_in_thread"]

T = TypeVar("T")

#: Where the journaled functions live, for the registry's "same function" check.
_ORIGIN_MODULE = "sagacity.mcp.upstream"


@dataclass(frozen=True, slots=True)
class Finished:
    """The call in the thread returned ``value``."""

    value: Any


@dataclass(frozen=True, slots=True)
class Raised:
    """The call in the thread raised ``error``."""

    error: BaseException


@dataclass(frozen=True, slots=True)
class InDoubt:
    """The upstream call at ``seq`` was sent and never answered; its thread is parked for good."""

    seq: int
    tool_name: str
    reason: str


ThreadOutcome = Finished | Raised | InDoubt


class _Ticket:
    """How a call's thread hands its outcome back to the event loop, exactly once."""

    def __init__(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[ThreadOutcome]) -> None:
        self._loop = loop
        self._future = future

    def settle(self, outcome: ThreadOutcome) -> None:
        def deliver() -> None:
            if not self._future.done():
                self._future.set_result(outcome)

        try:
            self._loop.call_soon_threadsafe(deliver)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more


_TICKET: contextvars.ContextVar[_Ticket | None] = contextvars.ContextVar("sagacity_mcp_ticket", default=None)
_INPUT: contextvars.ContextVar[str | None] = contextvars.ContextVar("sagacity_mcp_input", default=None)


async def run_in_thread(fn: Callable[[], Any], *, input: str | None = None) -> ThreadOutcome:
    """Run ``fn`` in a daemon thread, in a copy of the current context (so inside the live saga).

    ``input`` is the JSON the call journals (read by the tool function instead of the journal).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[ThreadOutcome] = loop.create_future()
    ticket = _Ticket(loop, future)
    context = contextvars.copy_context()

    def body() -> Any:
        _TICKET.set(ticket)
        _INPUT.set(input)
        return fn()

    def target() -> None:
        try:
            value = context.run(body)
        except BaseException as exc:  # noqa: BLE001 - handed to the loop, which decides
            ticket.settle(Raised(exc))
        else:
            ticket.settle(Finished(value))

    threading.Thread(target=target, name="sagacity-mcp-call", daemon=True).start()
    return await future


class LoopBridge:
    """Run upstream coroutines on the proxy's event loop from wherever a tool or compensation runs
    (a call's thread, a server thread pool, another loop)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def _running(self) -> asyncio.AbstractEventLoop | None:
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            return None

    def check_thread(self) -> None:
        """Refuse to block the proxy's own loop (before anything is sent)."""
        if self._running() is self.loop:
            raise RuntimeError(
                "an upstream tool was called on the proxy's event loop thread, which it would block; "
                "nothing was sent (call it through the proxy)"
            )

    def run(self, factory: Callable[[], Awaitable[T]]) -> T:
        """Block this (non-loop) thread until the coroutine finishes on the proxy's loop."""
        self.check_thread()
        return asyncio.run_coroutine_threadsafe(_coroutine(factory), self.loop).result()

    async def run_async(self, factory: Callable[[], Awaitable[T]]) -> T:
        """Await the coroutine on the proxy's loop, from this loop or another."""
        if self._running() is self.loop:
            return await factory()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_coroutine(factory), self.loop))


async def _coroutine(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()


def _park_forever() -> NoReturn:
    """Never return and never raise: the INTENT stays without an outcome (in doubt)."""
    while True:
        threading.Event().wait()


def _error_text(result: dict[str, Any]) -> str:
    texts = [str(b.get("text", "")) for b in result.get("content", []) if b.get("type") == "text"]
    text = " ".join(t for t in texts if t) or "the upstream reported an error without text"
    return text if len(text) <= 2000 else text[:2000] + "…"


class UpstreamTools:
    """The upstream's tools as Sagacity tools, decided by the policy, in a registry of their own."""

    def __init__(
        self, upstream: Upstream, policy: GatewayPolicy, bridge: LoopBridge, *, pin: bool = False
    ) -> None:
        self.upstream = upstream
        self.policy = policy
        self.bridge = bridge
        #: Pin the listing at first sight: a tool whose definition changes later, or that appears
        #: later, is refused (``changed`` says why) and the pinned definition stays listed.
        self.pin = pin
        self.pinned: dict[str, str] | None = None
        self.changed: dict[str, str] = {}
        self.registry = ToolRegistry()
        self.listed: dict[str, types.Tool] = {}
        self.decisions: dict[str, Decision] = {}
        self._tools: dict[str, Any] = {}
        self.sagacity: Sagacity | None = None  # set once the Sagacity over this registry exists
        self.parked = 0  # threads parked on an in-doubt call

    # -- the listing -------------------------------------------------------------------------------
    def adopt(self, listing: list[types.Tool]) -> None:
        """Take the upstream's listing: decide and register tools not seen before, and bind each
        tool to its definition as listed (its hash goes with every call and gate).

        Pinned, a definition that differs from the first listing's (or a tool the first listing
        did not have) is not adopted: the tool is refused until the proxy restarts (a rug pull).
        """
        first = self.pinned is None
        if first and self.pin:
            self.pinned = {t.name: definition_hash(t) for t in listing}
        for upstream_tool in listing:
            name = upstream_tool.name
            if self.pinned is not None and not first:
                seen = self.pinned.get(name)
                now = definition_hash(upstream_tool)
                if seen != now:
                    self.changed[name] = (
                        f"the upstream changed {name!r} since the proxy pinned its tools "
                        f"({seen or 'not listed'} -> {now})"
                        if seen is not None
                        else f"the upstream added {name!r} after the proxy pinned its tools"
                    )
                    continue
            self.listed[name] = upstream_tool
            if name not in self.decisions:
                hint = upstream_tool.annotations.read_only_hint if upstream_tool.annotations else None
                decision = self.policy.decide(name, read_only_hint=hint)
                self._register(decision)
            self._tools[name].spec.define(definition_of(upstream_tool))

    def decision(self, name: str) -> Decision | None:
        return self.decisions.get(name)

    def sagacity_tool(self, name: str) -> Any:
        """The journaled wrapper of upstream tool ``name`` (``call_json`` it inside a saga)."""
        return self._tools[name]

    def _register(self, decision: Decision) -> None:
        fn = self._call_function(decision)
        retry = _retry(decision)
        wrapped = tool(
            name=decision.name,
            reversibility=Reversibility.IRREVERSIBLE
            if decision.kind is ToolKind.IRREVERSIBLE
            else Reversibility.COMPENSATABLE,
            retry=retry,
            approvals=decision.approvals,
            approval_ttl=decision.approval_ttl if decision.approval_ttl_set else None,
            registry=self.registry,
        )(fn)
        if decision.kind is ToolKind.COMPENSATABLE and decision.undo is not None:
            wrapped.compensation(self._undo_function(decision, decision.undo))
            if decision.undo.reconcile is not None:
                lookup = decision.undo.reconcile
                wrapped.reconcile_compensation(name=lookup.tool)(self._lookup_function(decision, lookup))
        if decision.reconcile is not None:
            wrapped.reconcile(name=decision.reconcile.tool)(
                self._lookup_function(decision, decision.reconcile)
            )
        self.decisions[decision.name] = decision
        self._tools[decision.name] = wrapped

    # -- one call ----------------------------------------------------------------------------------
    def _journaled_input(self) -> str:
        """The INTENT's input: what the proxy passed in, else (a resume started elsewhere, e.g. by
        the HTTP API in this process) read back from the journal."""
        given = _INPUT.get()
        if given is not None:
            return given
        call = current_call()
        if call is None or self.sagacity is None:
            raise RuntimeError("an upstream tool ran outside a journaled call")
        for entry in self.sagacity.entries(call.saga_id):
            if entry.seq == call.seq:
                return entry.input
        raise RuntimeError(f"saga {call.saga_id!r} has no entry {call.seq}")

    def _call_function(self, decision: Decision) -> Callable[[], Any]:
        name = decision.name
        upstream = self.upstream
        bridge = self.bridge

        def call_upstream() -> Any:
            arguments = json.loads(self._journaled_input() or "{}")
            bridge.check_thread()
            try:
                outcome: CallOutcome = bridge.run(
                    lambda: upstream.call(name, arguments, timeout=decision.timeout)
                )
            except BaseException as exc:  # noqa: BLE001 - the proxy's loop went away under the call
                outcome = CallOutcome(
                    "unknown", reason=f"the proxy stopped during the call ({type(exc).__name__})"
                )
            if outcome.kind == "result":
                assert outcome.result is not None
                if outcome.result["isError"] and decision.errors == "fail":
                    raise UpstreamToolError(_error_text(outcome.result))
                return outcome.result
            if outcome.kind == "unavailable":
                raise UpstreamUnavailableError(f"nothing was sent: {outcome.reason}")
            if outcome.kind == "rejected":
                raise UpstreamRejectedError(outcome.reason)
            call = current_call()
            ticket = _TICKET.get()
            if ticket is not None and call is not None:
                ticket.settle(InDoubt(call.seq, name, outcome.reason))
            self.parked += 1
            _park_forever()

        call_upstream.__name__ = name
        call_upstream.__qualname__ = name
        call_upstream.__module__ = _ORIGIN_MODULE
        call_upstream.__doc__ = f"The upstream MCP tool {name!r}."
        return call_upstream

    def _undo_function(self, decision: Decision, undo: UndoPolicy) -> Callable[[CompensationContext], Any]:
        upstream = self.upstream
        bridge = self.bridge

        async def undo_call(ctx: CompensationContext) -> None:
            try:
                result = json.loads(ctx.result) if ctx.result else {}
            except ValueError as exc:
                raise UndoFailedError(f"the journaled result of seq {ctx.seq} is not a tool result") from exc
            scope = {
                "args": ctx.args,
                "result": result_scope(result if isinstance(result, dict) else {}),
                "saga": {"id": ctx.saga_id},
                "call": {"seq": ctx.seq, "idempotency_key": ctx.idempotency_key},
            }
            arguments = undo.arguments.render(scope)
            undo_decision = self.decisions.get(undo.tool)
            timeout = undo_decision.timeout if undo_decision is not None else decision.timeout
            attempts = max(decision.retry.attempts, 3)
            outcome = CallOutcome("unavailable")
            for attempt in range(1, attempts + 1):
                outcome = await bridge.run_async(lambda: upstream.call(undo.tool, arguments, timeout=timeout))
                if outcome.kind != "unavailable" or attempt == attempts:
                    break
                await asyncio.sleep(
                    min(decision.retry.max_backoff, decision.retry.backoff * 2 ** (attempt - 1))
                )
            if outcome.kind == "result":
                assert outcome.result is not None
                if not outcome.result["isError"]:
                    return
                raise UndoFailedError(f"{undo.tool} answered with an error: {_error_text(outcome.result)}")
            if outcome.kind == "unknown":
                raise UndoFailedError(f"{undo.tool}: outcome unknown, check by hand: {outcome.reason}")
            raise UndoFailedError(f"{undo.tool} was not run: {outcome.reason}")

        undo_call.__name__ = f"undo_{decision.name}"
        undo_call.__qualname__ = f"undo_{decision.name}"
        undo_call.__module__ = _ORIGIN_MODULE
        return undo_call

    def _lookup_function(
        self, decision: Decision, lookup: ReconcilePolicy
    ) -> Callable[[ReconcileContext], Reconciliation]:
        """A reconciler that asks the upstream's read tool ``lookup.tool``: an answer is *happened*
        (journaled as the call's result, so an undo's template finds in it what it would find in
        the call's own answer), an error holding ``lookup.missing`` *did not happen*, anything
        else (another error, no answer) *unknown*."""
        upstream = self.upstream
        bridge = self.bridge

        def look_up(ctx: ReconcileContext) -> Reconciliation:
            try:
                result = json.loads(ctx.result) if ctx.result else {}
            except ValueError:
                result = {}
            scope = {
                "args": ctx.args,
                "result": result_scope(result if isinstance(result, dict) else {}),
                "saga": {"id": ctx.saga_id},
                "call": {"seq": ctx.seq, "idempotency_key": ctx.idempotency_key},
            }
            arguments = lookup.arguments.render(scope)  # a TemplateError: no answer, still in doubt
            read = self.decisions.get(lookup.tool)
            timeout = read.timeout if read is not None else decision.timeout
            outcome = bridge.run(lambda: upstream.call(lookup.tool, arguments, timeout=timeout))
            if outcome.kind != "result" or outcome.result is None:
                return Reconciliation.unknown(f"{lookup.tool}: no answer ({outcome.kind}: {outcome.reason})")
            if not outcome.result["isError"]:
                seen = result_scope(outcome.result).get("text") or json.dumps(outcome.result)
                return Reconciliation.happened(
                    f"{lookup.tool}: {_shortened(str(seen))}",
                    result=json.dumps(outcome.result, separators=(",", ":"), ensure_ascii=False),
                )
            error = _error_text(outcome.result)
            if lookup.missing is not None and lookup.missing in error:
                return Reconciliation.did_not_happen(f"{lookup.tool}: {_shortened(error)}")
            return Reconciliation.unknown(f"{lookup.tool} answered with an error: {_shortened(error)}")

        look_up.__name__ = lookup.tool
        return look_up


def _shortened(text: str, limit: int = 300) -> str:
    """Evidence is a line in the journal, not a copy of the upstream's answer."""
    return text if len(text) <= limit else text[:limit] + "…"


def definition_of(upstream_tool: types.Tool) -> dict[str, Any]:
    """What the agent (and the approver) were shown of a tool: its name, description and input
    schema, as the upstream listed them."""
    return {
        "name": upstream_tool.name,
        "description": upstream_tool.description or "",
        "inputSchema": upstream_tool.input_schema,
    }


def definition_hash(upstream_tool: types.Tool) -> str:
    """``sha256:<hex>`` of :func:`definition_of` (the hash the tool's calls journal)."""
    return definition_digest(definition_of(upstream_tool))


def _retry(decision: Decision) -> Retry | None:
    policy = decision.retry
    if policy.attempts <= 1:
        return None
    on: list[type[BaseException]] = []
    if "unavailable" in policy.on:
        on.append(UpstreamUnavailableError)
    if "error" in policy.on:
        on.append(UpstreamToolError)
    if not on:
        return None
    return Retry(
        on=tuple(on), attempts=policy.attempts, backoff=policy.backoff, max_backoff=policy.max_backoff
    )
