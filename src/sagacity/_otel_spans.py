"""The spans of a saga's work: each wrapped tool call (GenAI ``execute_tool``), each saga run
(``sagacity.saga``) and each compensation run (``sagacity.compensate`` and its steps).

The entries a call journals reach its span through the sink (``_otel_hooks``). Compensation steps
run inside generator operations, whose steps may each run in a fresh copy of the context, so they
are told explicitly (:class:`CompensationTrace`). A gate's trace context is kept in a store that
declares ``Capability.TRACE_CONTEXT``, so an approval in another process links to the trace that
gated: that is why this module sits above the stores.

Seam for framework adapters (#14): set :data:`tool_call_id` around a call to have
``gen_ai.tool.call.id`` recorded when Sagacity opens the tool span itself (when the framework
opened it, the id is already on the framework's span, which Sagacity enriches instead).
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import sagacity._telemetry as _telemetry
from sagacity._otel_hooks import Sink, current_sink, resume_links
from sagacity._otel_instruments import Otel, error_type, error_type_of, failed
from sagacity.stores.base import Capability, Store, capable

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span

    from sagacity.model import CompensationStep, Entry, SagaResult
    from sagacity.tools import ToolSpec

#: Framework adapters set this around a call whose id the model gave (``gen_ai.tool.call.id``).
tool_call_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "sagacity_tool_call_id", default=None
)


_OUTCOME_OF_PHASE = {"EXECUTED": "EXECUTED", "FAILED": "FAILED", "AWAITING_APPROVAL": "AWAITING_APPROVAL"}


class ToolCallSpan:
    """``with ToolCallSpan(...)``: the span of one wrapped tool call (GenAI ``execute_tool``).

    Opens ``execute_tool {gen_ai.tool.name}`` as the current span, unless the span already
    current is the framework's own span for this tool (Pydantic AI, the MCP SDK): that one is
    enriched with Sagacity's attributes instead of nesting a duplicate. The entries the call
    journals arrive through the sink; on exit the span gets its outcome and ends (ours only).
    """

    __slots__ = ("_sink_token", "_token", "gated", "own", "saga_id", "sink", "span", "spec", "t")

    def __init__(self, saga_id: str, spec: ToolSpec, input: str, *, seq: int | None = None) -> None:
        self.t = _telemetry.live
        self.saga_id = saga_id
        self.spec = spec
        self.sink = Sink(saga_id)
        self.sink.intent_seq = seq
        self.span: Span | None = None
        self.own = False
        self.gated: Entry | None = None
        self._token: object = None
        self._sink_token: contextvars.Token[Sink | None] | None = None
        t = self.t
        if t is None:
            return
        try:
            self._open(t, input, seq)
        except Exception:  # noqa: BLE001
            failed("tool span")

    def _open(self, t: Otel, input: str, seq: int | None) -> None:
        if t.tracer is None:
            return
        name = self.spec.name
        current = t.trace.get_current_span()
        if current.is_recording() and _is_framework_tool_span(current, name):
            self.span = self.sink.claimed = current
            current.set_attribute("sagacity.saga.id", self.saga_id)  # claimed: see the check
            return
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
            "sagacity.saga.id": self.saga_id,
        }
        description = _description(self.spec)
        if description:
            attrs["gen_ai.tool.description"] = description
        call_id = tool_call_id.get()
        if call_id:
            attrs["gen_ai.tool.call.id"] = call_id
        if t.capture:
            attrs["gen_ai.tool.call.arguments"] = input
        links = resume_links.get() if seq is not None else ()
        self.span = t.start(f"execute_tool {name}", attrs, links)
        self.own = self.span is not None
        if self.span is not None:
            self._token = t.attach(self.span)

    def __enter__(self) -> ToolCallSpan:
        self._sink_token = current_sink.set(self.sink)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self._sink_token is not None:
            current_sink.reset(self._sink_token)
        t = self.t
        if t is None:
            return
        try:
            self._close(t, exc)
        except Exception:  # noqa: BLE001
            failed("tool span")
        finally:
            if self._token is not None:
                t.context.detach(self._token)

    def _close(self, t: Otel, exc: BaseException | None) -> None:
        sink = self.sink
        outcome = sink.last
        if outcome is not None and outcome.phase in _OUTCOME_OF_PHASE:
            result = _OUTCOME_OF_PHASE[outcome.phase]
        elif sink.intent_seq is None:
            result = "REFUSED"  # refused before its INTENT (closed saga, bad arguments)
        else:
            result = "IN_DOUBT" if exc is not None else "EXECUTED"
        if result == "AWAITING_APPROVAL":
            self.gated = outcome
        if t.calls is not None:
            metric: dict[str, Any] = {"gen_ai.tool.name": self.spec.name, "sagacity.call.outcome": result}
            if exc is not None:
                metric["error.type"] = error_type(exc)
            t.calls.add(1, metric)
        span = self.span
        if span is None or not span.is_recording():  # e.g. sampled out: nothing to add
            return
        attrs = sink.journal_attributes(outcome)
        attrs["sagacity.tool.reversibility"] = str(self.spec.reversibility)
        attrs["sagacity.call.outcome"] = result
        if result == "AWAITING_APPROVAL" and outcome is not None:
            attrs["sagacity.approval.seq"] = outcome.seq
        if t.capture and outcome is not None and outcome.phase == "EXECUTED":
            attrs["gen_ai.tool.call.result"] = outcome.payload
        if exc is not None:
            attrs["error.type"] = error_type(exc)
        span.set_attributes(attrs)
        if exc is not None and self.own:
            description = f"{error_type(exc)}: {exc}" if t.capture else error_type(exc)
            span.set_status(t.trace.Status(t.trace.StatusCode.ERROR, description))
            if t.capture:
                span.record_exception(exc)
        if self.own:
            span.end()

    def traceparent(self) -> tuple[str, str] | None:
        """The W3C ``traceparent`` and ``tracestate`` of this call's span."""
        t = self.t
        if t is None or self.span is None:
            return None
        carrier: dict[str, str] = {}
        t.propagator.inject(carrier, context=t.trace.set_span_in_context(self.span))
        if "traceparent" not in carrier:
            return None
        return carrier["traceparent"], carrier.get("tracestate", "")


def traces_call(saga_id: str, seq: int) -> bool:
    """Whether the call whose INTENT is ``seq`` already has its span (entered in ``call``)."""
    sink = current_sink.get()
    return sink is not None and sink.saga_id == saga_id and sink.intent_seq == seq


def _is_framework_tool_span(span: Span, tool_name: str) -> bool:
    """Is the current span a framework's span for this very tool call, not yet claimed by us?"""
    sink = current_sink.get()
    if sink is not None and sink.claimed is span:
        return False
    attrs = getattr(span, "attributes", None) or {}
    if attrs.get("sagacity.saga.id") is not None:
        return False  # a span we already enriched: a nested call of the same tool gets its own
    name = getattr(span, "name", "") or ""
    if attrs.get("gen_ai.tool.name") == tool_name:
        return True  # Pydantic AI ("running tool" / "execute_tool x"), MCP semconv spans
    if attrs.get("mcp.method.name") == "tools/call" and name.endswith(f" {tool_name}"):
        return True  # the MCP SDK's own server span: "MCP handle tools/call x"
    return name == f"execute_tool {tool_name}"


_descriptions: dict[Callable[..., Any], str] = {}


def _description(spec: ToolSpec) -> str:
    """The first line of the tool's docstring (``gen_ai.tool.description``), computed once."""
    fn = spec.fn
    found = _descriptions.get(fn)
    if found is None:
        doc = inspect.getdoc(fn) or ""
        found = _descriptions[fn] = doc.strip().splitlines()[0] if doc.strip() else ""
    return found


def save_gate(store: Store, call: ToolCallSpan) -> None:
    """Keep the trace context of the span that opened a gate, for the approval and the resume."""
    if call.gated is None:
        return
    try:
        traces = capable(store, Capability.TRACE_CONTEXT)
        parent = call.traceparent()
        if traces is not None and parent is not None:
            traces.put_trace_context(call.gated.saga_id, call.gated.seq, *parent)
    except Exception:  # noqa: BLE001 - the gate stands; only the link is lost
        failed("saving a gate's trace context")


def gate_links(store: Store, saga_id: str, seq: int) -> tuple[Link, ...]:
    """A link to the span that opened the gate at (saga_id, seq), when its context was kept."""
    t = _telemetry.live
    if t is None or t.tracer is None:
        return ()
    try:
        traces = capable(store, Capability.TRACE_CONTEXT)
        found = traces.get_trace_context(saga_id, seq) if traces is not None else None
        if not found:
            return ()
        traceparent, tracestate = found
        carrier = {"traceparent": traceparent}
        if tracestate:
            carrier["tracestate"] = tracestate
        context = t.propagator.extract(carrier)
        span_context = t.trace.get_current_span(context).get_span_context()
        if not span_context.is_valid:
            return ()
        return (t.trace.Link(span_context, {"sagacity.link": "approval_gate", "sagacity.approval.seq": seq}),)
    except Exception:  # noqa: BLE001
        failed("reading a gate's trace context")
        return ()


# -- sagas -----------------------------------------------------------------------------------------
_NOT_FAILED = frozenset({"COMPLETED", "AWAITING_APPROVAL", "RUNNING"})


class SagaTrace:
    """The span of one saga run in this process (``sagacity.saga``): started with the run, the
    current span while its work runs and while it concludes, ended with its result."""

    __slots__ = ("saga_id", "span", "t")

    def __init__(self, saga_id: str, *, gate: int | None = None) -> None:
        self.t = _telemetry.live
        self.saga_id = saga_id
        self.span: Span | None = None
        if self.t is None:
            return
        try:
            attrs: dict[str, Any] = {"sagacity.saga.id": saga_id}
            if gate is not None:  # a resumed run: the gate it resumes, and a link to its span
                attrs["sagacity.approval.seq"] = gate
            self.span = self.t.start("sagacity.saga", attrs, resume_links.get() if gate else ())
        except Exception:  # noqa: BLE001
            failed("saga span")

    def current(self) -> Current:
        """``with trace.current():`` the saga's span is current, and no outer sink hears its entries."""
        return Current(self.t, self.span)

    def end(self, result: SagaResult | None, error: BaseException | None = None) -> None:
        t = self.t
        if t is None:
            return
        try:
            status = str(result.status) if result is not None else "ERROR"
            if t.sagas is not None:
                t.sagas.add(1, {"sagacity.saga.status": status})
            span = self.span
            if span is None:
                return
            self.span = None
            attrs: dict[str, Any] = {"sagacity.saga.status": status}
            failure = error if error is not None else (result.error if result is not None else None)
            if failure is not None:
                attrs["error.type"] = error_type(failure)
            if result is not None and result.awaiting:
                attrs["sagacity.approval.seqs"] = [r.journal_seq for r in result.awaiting]
            span.set_attributes(attrs)
            if status not in _NOT_FAILED:
                span.set_status(t.trace.Status(t.trace.StatusCode.ERROR, status))
            span.end()
        except Exception:  # noqa: BLE001
            failed("saga span end")


class Current:
    """Attach a span for a block (and hide outer sinks); a no-op without one."""

    __slots__ = ("_token", "current_sink", "span", "t")

    def __init__(self, t: Otel | None, span: Span | None) -> None:
        self.t = t
        self.span = span
        self._token: object = None
        self.current_sink: contextvars.Token[Sink | None] | None = None

    def __enter__(self) -> None:
        if self.t is not None and self.span is not None:
            self._token = self.t.attach(self.span)
            self.current_sink = current_sink.set(None)

    def __exit__(self, *exc_info: object) -> None:
        if self.current_sink is not None:
            current_sink.reset(self.current_sink)
        if self._token is not None and self.t is not None:
            self.t.context.detach(self._token)


# -- compensation --------------------------------------------------------------------------------------
class CompensationTrace:
    """Spans of one compensation run: ``sagacity.compensate``, one ``compensate {tool}`` child
    per step in order. Explicit, never attached across steps: a generator operation's steps may
    each run in a fresh copy of the context (``_effects.drive_async``). User code of a step runs
    with the step's span current (:meth:`around`)."""

    def __init__(self, saga_id: str) -> None:
        self.t = _telemetry.live
        self.saga_id = saga_id
        self.span: Span | None = None
        self.parent: Context | None = None
        self.step: Span | None = None
        self.steps = 0

    def __enter__(self) -> CompensationTrace:
        return self

    def start(self, reason: str) -> None:
        t = self.t
        if t is None or t.tracer is None:
            return
        try:
            attrs: dict[str, Any] = {"sagacity.saga.id": self.saga_id}
            if t.capture:
                attrs["sagacity.compensation.reason"] = reason
            self.span = t.start("sagacity.compensate", attrs)
            if self.span is not None:
                self.parent = t.trace.set_span_in_context(self.span)
        except Exception:  # noqa: BLE001
            failed("compensation span")

    def step_started(self, tool_name: str, executed_seq: int) -> None:
        t = self.t
        if t is None or self.parent is None:
            return
        try:
            self.step = t.start(
                f"compensate {tool_name}",
                {
                    "sagacity.saga.id": self.saga_id,
                    "sagacity.tool.name": tool_name,
                    "sagacity.journal.executed_seq": executed_seq,
                },
                parent=self.parent,
            )
        except Exception:  # noqa: BLE001
            failed("compensation step span")

    def step_dropped(self) -> None:
        """The step was settled meanwhile (a human resolved it): nothing ran."""
        if self.step is not None:
            self.step.set_attribute("sagacity.compensation.outcome", "SETTLED")
            self.step.end()
            self.step = None

    def around(self, fn: Callable[..., Any], *, claimed: int = 0) -> Callable[..., Any]:
        """``fn`` run with the step's span current, sync or async (``claimed``: the seq of the
        step's INTENT, just journaled)."""
        t, step = self.t, self.step
        if t is None or step is None:
            return fn
        if claimed:
            step.set_attribute("sagacity.journal.intent_seq", claimed)
        context = t.trace.set_span_in_context(step)

        def within(*args: Any) -> Any:
            token = t.context.attach(context)
            try:
                value = fn(*args)
            finally:
                t.context.detach(token)
            if inspect.isawaitable(value):
                return _awaited_within(t, context, value)
            return value

        return within

    def step_finished(self, step: CompensationStep, last_seq: int = 0, last_hash: str = "") -> None:
        """A step ended (``last_*``: its outcome entry, read off the state it was appended to)."""
        t = self.t
        if t is None:
            return
        try:
            outcome = str(step.outcome)
            if t.compensations is not None:
                t.compensations.add(
                    1, {"sagacity.compensation.outcome": outcome, "sagacity.tool.name": step.tool_name}
                )
            self.steps += 1
            if self.parent is None:
                return
            span = self.step
            if span is None:  # SKIPPED: no compensation declared, nothing ran
                span = t.start(
                    f"compensate {step.tool_name}",
                    {
                        "sagacity.saga.id": self.saga_id,
                        "sagacity.tool.name": step.tool_name,
                        "sagacity.journal.executed_seq": step.seq,
                    },
                    parent=self.parent,
                )
                if span is None:
                    return
            self.step = None
            attrs: dict[str, Any] = {"sagacity.compensation.outcome": outcome}
            if last_seq:
                attrs["sagacity.journal.seq"] = last_seq
                attrs["sagacity.journal.hash"] = last_hash
                attrs["sagacity.journal.phase"] = outcome
            if step.error:
                attrs["error.type"] = error_type_of(step.error)
                span.set_status(t.trace.Status(t.trace.StatusCode.ERROR, attrs["error.type"]))
            span.set_attributes(attrs)
            span.end()
        except Exception:  # noqa: BLE001
            failed("compensation step span end")

    def finished(self, status: str) -> None:
        span, self.span = self.span, None
        if span is None or self.t is None:
            return
        try:
            span.set_attributes({"sagacity.saga.status": status, "sagacity.compensation.steps": self.steps})
            if status not in _NOT_FAILED and status != "COMPENSATED":
                span.set_status(self.t.trace.Status(self.t.trace.StatusCode.ERROR, status))
            span.end()
        except Exception:  # noqa: BLE001
            failed("compensation span end")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self.step is not None:
            self.step.end()
            self.step = None
        if self.span is not None and self.t is not None:
            # Left before ``finished``: the run raised (a store error) or was abandoned.
            if exc is not None:
                self.span.set_attribute("error.type", error_type(exc))
            self.finished("INTERRUPTED")


#: The trace of every compensation run while telemetry is off. Built with no telemetry, so each
#: hook returns at once and keeps no state: one instance serves every run, in every thread.
UNTRACED = CompensationTrace("")


async def _awaited_within(t: Otel, context: Context, awaitable: Awaitable[Any]) -> Any:
    token = t.context.attach(context)
    try:
        return await awaitable
    finally:
        t.context.detach(token)
