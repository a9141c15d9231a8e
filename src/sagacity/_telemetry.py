"""OpenTelemetry: the one module that knows about it, and costs nothing while it is off.

Telemetry is *on* when the ``opentelemetry`` API is importable and a tracer or meter provider has
been configured, either globally by the application (``set_tracer_provider`` /
``set_meter_provider``, what every SDK set-up and ``opentelemetry-instrument`` do) or explicitly
through :mod:`sagacity.otel`. The API's own default providers (the proxy and no-op ones) count as
not configured. Whether it is on is the module attribute :data:`active`:

- The tool-call hot path (``_saga.SagaRun``) has no telemetry code. When a saga starts with
  telemetry on, the facade makes a ``_traced.TracedSagaRun`` instead, which wraps the same calls in
  spans. Off, the only cost per call is the journal's two ``if _telemetry.active`` checks per
  append (one global attribute read each).
- Every other hook site checks :data:`active` (or gets a no-op object) before calling in here.
- The import of ``opentelemetry`` happens once, on the first check (a saga's start, a
  ``Sagacity``), never at ``import sagacity``; without it installed nothing else is ever tried.

How spans learn journal facts without the call path passing them on: the journal calls
:func:`appended` / :func:`committed` with every entry it lands, and they go to the *sink* that is
current in this context (a ``ContextVar``): the tool-call or decision span that was entered around
the work. Context variables follow ``await``, tasks and ``asyncio.to_thread``, so an INTENT
appended in a worker thread reaches the span of the call that made it. Compensation steps run
inside generator operations, whose steps may each run in a fresh copy of the context, so they are
told explicitly (:class:`CompensationTrace`).

Every hook swallows its own errors (logged once per kind, logger ``sagacity.otel``): telemetry
must never fail a saga.

Seam for framework adapters (#14): set :data:`tool_call_id` around a call to have
``gen_ai.tool.call.id`` recorded when Sagacity opens the tool span itself (when the framework
opened it, the id is already on the framework's span, which Sagacity enriches instead).

Seam for the derived index (#12): the gauges read through the functions given to :func:`watch`;
today pending approvals are one read of the request table and in-doubt calls a fold of every saga,
and swapping those functions for index reads makes both O(1).
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sagacity._version import __version__
from sagacity.errors import (
    ApprovalNotFoundError,
    ApprovalRefusedError,
    ConfigurationError,
    PayloadMismatchError,
    SagaNotFoundError,
    SagaStateError,
)
from sagacity.stores.base import Capability, Store, capable

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import CallbackOptions, Counter, Histogram, MeterProvider, Observation
    from opentelemetry.trace import Link, Span, Tracer, TracerProvider

    from sagacity.model import ApprovalRequest, CompensationStep, Entry, SagaResult
    from sagacity.tools import ToolSpec

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "INSTRUMENTS",
    "active",
    "appended",
    "committed",
    "refresh",
]

log = logging.getLogger("sagacity.otel")
F = TypeVar("F", bound=Callable[..., Any])

#: True while telemetry is on; read by every hook site before it calls in here.
active = False

#: The standard GenAI content-capture switch (OpenTelemetry Python's GenAI instrumentations):
#: ``true`` (the original boolean), or ``SPAN_ONLY`` / ``SPAN_AND_EVENT`` (the enum that
#: ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` reads) turn capture on; anything
#: else, ``EVENT_ONLY`` included (Sagacity emits no events), leaves it off.
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CAPTURE_VALUES = frozenset({"true", "span_only", "span_and_event"})

#: Framework adapters set this around a call whose id the model gave (``gen_ai.tool.call.id``).
tool_call_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "sagacity_tool_call_id", default=None
)


@dataclass(frozen=True)
class Instrument:
    """One metric Sagacity emits: its name, kind, unit and meaning (docs/observability.md)."""

    name: str
    kind: str  # counter | histogram | gauge
    unit: str
    description: str


INSTRUMENTS = (
    Instrument(
        "sagacity.tool.calls",
        "counter",
        "{call}",
        "Wrapped tool calls in sagas, by gen_ai.tool.name and sagacity.call.outcome "
        "(EXECUTED, FAILED, AWAITING_APPROVAL, REFUSED, IN_DOUBT).",
    ),
    Instrument(
        "sagacity.sagas", "counter", "{saga}", "Saga runs ended in this process, by sagacity.saga.status."
    ),
    Instrument(
        "sagacity.compensations",
        "counter",
        "{compensation}",
        "Compensation steps, by sagacity.compensation.outcome (COMPENSATED, SKIPPED, "
        "COMPENSATION_FAILED) and sagacity.tool.name.",
    ),
    Instrument(
        "sagacity.decisions",
        "counter",
        "{decision}",
        "Decisions asked of Sagacity, by sagacity.decision.kind (approve, reject, resume, expire, "
        "resolve, recover) and sagacity.decision.outcome (accepted, refused, not_found, failed).",
    ),
    Instrument(
        "sagacity.journal.append.duration",
        "histogram",
        "s",
        "Time to append to the journal durably, as the caller waits for it (group commit and lost "
        "races included), by sagacity.journal.operation (append, decision).",
    ),
    Instrument(
        "sagacity.journal.batch.size",
        "histogram",
        "{entry}",
        "Entries written per group-commit batch (SQLite and PostgreSQL stores).",
    ),
    Instrument(
        "sagacity.verification.failures",
        "counter",
        "{verification}",
        "Verifications that found a broken chain or a journal not extending its checkpoint, by "
        "sagacity.verification.kind (chain, checkpoint).",
    ),
    Instrument(
        "sagacity.approvals.pending",
        "gauge",
        "{request}",
        "Approval requests waiting for a decision or a resume, by sagacity.store.",
    ),
    Instrument(
        "sagacity.approvals.oldest_age",
        "gauge",
        "s",
        "Age of the oldest pending approval request (0 when none), by sagacity.store.",
    ),
    Instrument(
        "sagacity.calls.in_doubt",
        "gauge",
        "{call}",
        "Calls and compensations with an INTENT and no outcome, in sagas not live in this process, "
        "by sagacity.store.",
    ),
)

_DURATION_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5
)  # fmt: skip
_BATCH_BUCKETS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
_APPEND = {"sagacity.journal.operation": "append"}
_DECISION = {"sagacity.journal.operation": "decision"}


# -- switching on and off ------------------------------------------------------------------------
_UNRESOLVED: Any = object()
_api: Any = _UNRESOLVED  # the opentelemetry API modules once imported; None when not installed
_mode = "auto"  # auto: follow the global providers; on: sagacity.otel.enable(); off: disable()
_lock = threading.Lock()
_t: _Otel | None = None
#: The global providers auto mode last acted on: nothing to do while they stay the same.
_seen: tuple[object, object] = (None, None)
_seen_both = False


def _load() -> Any:
    """The ``opentelemetry`` API, imported once; None when it is not installed."""
    global _api  # noqa: PLW0603 - module attributes: one read per hook site
    if _api is _UNRESOLVED:
        try:
            from opentelemetry import context, metrics, trace
            from opentelemetry.environment_variables import (
                OTEL_PYTHON_METER_PROVIDER,
                OTEL_PYTHON_TRACER_PROVIDER,
            )
            from opentelemetry.metrics import _internal as metrics_internal
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError:
            _api = None
        else:
            _api = _Api(
                context,
                metrics,
                trace,
                TraceContextTextMapPropagator(),
                metrics_internal,
                OTEL_PYTHON_TRACER_PROVIDER in os.environ,
                OTEL_PYTHON_METER_PROVIDER in os.environ,
            )
    return _api


@dataclass(frozen=True)
class _Api:
    context: Any
    metrics: Any
    trace: Any
    propagator: Any
    metrics_internal: Any
    #: A provider named by environment variable: the public getters load it on first call.
    tracer_from_env: bool
    meter_from_env: bool

    def tracer_provider(self) -> Any:
        """The global tracer provider the application set, or None.

        Read from the API module's global (a saga's start must not pay the getter's environment
        look-up); the public getter where that global is gone (another API version) or where an
        environment variable names a provider for the getter to load.
        """
        provider = getattr(self.trace, "_TRACER_PROVIDER", _UNRESOLVED)
        if provider is _UNRESOLVED or (provider is None and self.tracer_from_env):
            provider = self.trace.get_tracer_provider()
        return provider if provider is not None and _configured(provider, "opentelemetry.trace") else None

    def meter_provider(self) -> Any:
        """The global meter provider the application set, or None (as ``tracer_provider``)."""
        provider = getattr(self.metrics_internal, "_METER_PROVIDER", _UNRESOLVED)
        if provider is _UNRESOLVED or (provider is None and self.meter_from_env):
            provider = self.metrics.get_meter_provider()
        return provider if provider is not None and _configured(provider, "opentelemetry.metrics") else None


def _configured(provider: object, api_package: str) -> bool:
    """A provider the application set: not one of the API package's own (proxy or no-op)."""
    return not type(provider).__module__.startswith(api_package)


def refresh() -> None:
    """In auto mode, turn on (or complete) telemetry if a global provider was configured since.

    Called at each saga's start and when a ``Sagacity`` is made: one check once both providers
    are in use or without the API installed, two provider look-ups otherwise.
    """
    global _seen  # noqa: PLW0603 - module attributes: one read per hook site
    if _mode != "auto" or _seen_both:
        return
    api = _load()
    if api is None:
        return
    seen = (api.tracer_provider(), api.meter_provider())
    if seen == _seen:
        return
    with _lock:
        if _mode == "auto":
            _seen = seen
            _switch(_Otel(api, *seen, capture_content=None))


def enable(
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    *,
    capture_content: bool | None = None,
) -> None:
    """Turn telemetry on with these providers (the global ones where None). See sagacity.otel."""
    global _mode  # noqa: PLW0603 - module attributes: one read per hook site
    api = _load()
    if api is None:
        raise ConfigurationError(
            "OpenTelemetry is not installed: pip install 'sagacity[otel]' (and the SDK with the "
            "exporters your pipeline uses)"
        )
    with _lock:
        _mode = "on"
        _switch(
            _Otel(
                api,
                tracer_provider if tracer_provider is not None else api.trace.get_tracer_provider(),
                meter_provider if meter_provider is not None else api.metrics.get_meter_provider(),
                capture_content=capture_content,
            )
        )


def disable() -> None:
    """Turn telemetry off, whatever the application configured. See sagacity.otel."""
    global _mode  # noqa: PLW0603 - module attributes: one read per hook site
    with _lock:
        _mode = "off"
        _switch(None)


def reset() -> None:
    """Back to the default: follow the global providers. See sagacity.otel."""
    global _mode  # noqa: PLW0603 - module attributes: one read per hook site
    with _lock:
        _mode = "auto"
        _switch(None)
    refresh()


def enabled() -> bool:
    return active


def _switch(otel: _Otel | None) -> None:
    global _t, active, _seen, _seen_both  # noqa: PLW0603 - module attributes: one read per hook site
    if otel is None:
        _seen = (None, None)
    _seen_both = _mode == "auto" and None not in _seen
    if otel is not None and otel.tracer is None and otel.meter_provider is None:
        otel = None  # both providers hand out no-op instruments (OTEL_SDK_DISABLED)
    _t = otel
    active = otel is not None


class _Otel:
    """What telemetry needs while it is on: the tracer, the instruments, the settings."""

    def __init__(
        self,
        api: _Api,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
        *,
        capture_content: bool | None,
    ) -> None:
        self.api = api
        self.trace = api.trace
        self.context = api.context
        self.propagator = api.propagator
        self.capture = _capture_from_env() if capture_content is None else capture_content
        self.tracer: Tracer | None = None
        if tracer_provider is not None:
            tracer = tracer_provider.get_tracer("sagacity", __version__)
            if not isinstance(tracer, api.trace.NoOpTracer):  # e.g. OTEL_SDK_DISABLED=true
                self.tracer = tracer
        self.meter_provider: MeterProvider | None = None
        self.calls: Counter | None = None
        self.sagas: Counter | None = None
        self.compensations: Counter | None = None
        self.decisions: Counter | None = None
        self.verifications: Counter | None = None
        self.append_duration: Histogram | None = None
        self.batch_size: Histogram | None = None
        if meter_provider is not None:
            meter = meter_provider.get_meter("sagacity", __version__)
            if not isinstance(meter, api.metrics.NoOpMeter):
                self.meter_provider = meter_provider
                self._instruments(meter)

    def _instruments(self, meter: Any) -> None:
        spec = {i.name: i for i in INSTRUMENTS}

        def counter(name: str) -> Counter:
            i = spec[name]
            return meter.create_counter(name, unit=i.unit, description=i.description)  # type: ignore[no-any-return]

        def histogram(name: str, buckets: Sequence[float]) -> Histogram:
            i = spec[name]
            return meter.create_histogram(  # type: ignore[no-any-return]
                name, unit=i.unit, description=i.description, explicit_bucket_boundaries_advisory=buckets
            )

        def gauge(name: str, callback: Callable[[CallbackOptions], Iterable[Observation]]) -> None:
            i = spec[name]
            meter.create_observable_gauge(name, callbacks=[callback], unit=i.unit, description=i.description)

        self.calls = counter("sagacity.tool.calls")
        self.sagas = counter("sagacity.sagas")
        self.compensations = counter("sagacity.compensations")
        self.decisions = counter("sagacity.decisions")
        self.verifications = counter("sagacity.verification.failures")
        self.append_duration = histogram("sagacity.journal.append.duration", _DURATION_BUCKETS)
        self.batch_size = histogram("sagacity.journal.batch.size", _BATCH_BUCKETS)
        observation = self.api.metrics.Observation
        gauge("sagacity.approvals.pending", lambda _: _observe_pending(observation, count=True))
        gauge("sagacity.approvals.oldest_age", lambda _: _observe_pending(observation, count=False))
        gauge("sagacity.calls.in_doubt", lambda _: _observe_in_doubt(observation))

    # -- spans -----------------------------------------------------------------------------------
    def start(
        self,
        name: str,
        attributes: dict[str, Any],
        links: Sequence[Link] = (),
        parent: Context | None = None,
    ) -> Span | None:
        if self.tracer is None:
            return None
        return self.tracer.start_span(
            name, context=parent, kind=self.trace.SpanKind.INTERNAL, attributes=attributes, links=links
        )

    def attach(self, span: Span) -> object:
        return self.context.attach(self.trace.set_span_in_context(span))


def _capture_from_env() -> bool:
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _CAPTURE_VALUES


_logged: set[str] = set()


def _failed(where: str) -> None:
    """A hook failed: say so once per hook (with the traceback), never fail the saga."""
    if where not in _logged:
        _logged.add(where)
        log.warning("sagacity telemetry: %s failed; telemetry goes on without it", where, exc_info=True)


def error_type(exc: BaseException) -> str:
    """``error.type`` for an exception: its class's qualified name, as OpenTelemetry Python does."""
    return type(exc).__qualname__


def _error_type_of(described: str) -> str:
    """``error.type`` from a journaled ``ExceptionType: message``."""
    return described.split(":", 1)[0].strip() or "error"


# -- the sink: which span hears about the entries appended here -------------------------------------
class _Sink:
    """Journal facts for one span, from the entries appended while it is current."""

    __slots__ = ("claimed", "first", "intent_seq", "last", "saga_id")

    def __init__(self, saga_id: str | None) -> None:
        self.saga_id = saga_id
        #: A framework's span this call enriched (so a nested call of the tool opens its own).
        self.claimed: object = None
        self.intent_seq: int | None = None
        self.first: Entry | None = None
        self.last: Entry | None = None

    def entry(self, entry: Entry) -> None:
        if self.saga_id is not None and entry.saga_id != self.saga_id:
            return
        if entry.tool_name == _LIFE_TOOL:
            return  # the saga's START (in its first call's insert) or END: not the call's entry
        if self.first is None:
            self.first = entry
        if entry.phase == "INTENT" and self.intent_seq is None:
            self.intent_seq = entry.seq
        else:
            self.last = entry

    def journal_attributes(self, entry: Entry | None) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        if self.intent_seq is not None:
            attrs["sagacity.journal.intent_seq"] = self.intent_seq
        if entry is not None:
            attrs["sagacity.journal.seq"] = entry.seq
            attrs["sagacity.journal.phase"] = str(entry.phase)
            attrs["sagacity.journal.hash"] = entry.hash
        return attrs


#: The tool name of a saga's START and END entries (``_state.LIFE_TOOL``).
_LIFE_TOOL = "sagacity:saga"
_sink: contextvars.ContextVar[_Sink | None] = contextvars.ContextVar("sagacity_otel_sink", default=None)
#: Links the resumed call's span carries (to the span that gated it), set by the resume operation.
_resume_links: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar(
    "sagacity_otel_resume_links", default=()
)


def appended(entry: Entry, started: float) -> None:
    """The journal appended ``entry`` (``started`` by ``time.perf_counter()``)."""
    t = _t
    if t is None:
        return
    try:
        if t.append_duration is not None:
            t.append_duration.record(time.perf_counter() - started, _APPEND)
        sink = _sink.get()
        if sink is not None:
            sink.entry(entry)
    except Exception:  # noqa: BLE001 - telemetry never fails an append
        _failed("appended")


def committed(entries: Sequence[Entry], started: float) -> None:
    """The journal committed a fenced decision's ``entries``."""
    t = _t
    if t is None:
        return
    try:
        if t.append_duration is not None:
            t.append_duration.record(time.perf_counter() - started, _DECISION)
        sink = _sink.get()
        if sink is not None:
            for entry in entries:
                sink.entry(entry)
    except Exception:  # noqa: BLE001
        _failed("committed")


def batch_written(size: int) -> None:
    """A group-commit leader wrote ``size`` entries in one statement."""
    t = _t
    if t is not None and t.batch_size is not None:
        try:
            t.batch_size.record(size)
        except Exception:  # noqa: BLE001
            _failed("batch_written")


def verification_failed(kind: str) -> None:
    """A verification found a broken chain (``chain``) or a journal not extending its checkpoint."""
    t = _t
    if t is not None and t.verifications is not None:
        try:
            t.verifications.add(1, {"sagacity.verification.kind": kind})
        except Exception:  # noqa: BLE001
            _failed("verification_failed")


# -- tool calls --------------------------------------------------------------------------------------
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
        self.t = _t
        self.saga_id = saga_id
        self.spec = spec
        self.sink = _Sink(saga_id)
        self.sink.intent_seq = seq
        self.span: Span | None = None
        self.own = False
        self.gated: Entry | None = None
        self._token: object = None
        self._sink_token: contextvars.Token[_Sink | None] | None = None
        t = self.t
        if t is None:
            return
        try:
            self._open(t, input, seq)
        except Exception:  # noqa: BLE001
            _failed("tool span")

    def _open(self, t: _Otel, input: str, seq: int | None) -> None:
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
        links = _resume_links.get() if seq is not None else ()
        self.span = t.start(f"execute_tool {name}", attrs, links)
        self.own = self.span is not None
        if self.span is not None:
            self._token = t.attach(self.span)

    def __enter__(self) -> ToolCallSpan:
        self._sink_token = _sink.set(self.sink)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self._sink_token is not None:
            _sink.reset(self._sink_token)
        t = self.t
        if t is None:
            return
        try:
            self._close(t, exc)
        except Exception:  # noqa: BLE001
            _failed("tool span")
        finally:
            if self._token is not None:
                t.context.detach(self._token)

    def _close(self, t: _Otel, exc: BaseException | None) -> None:
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
    sink = _sink.get()
    return sink is not None and sink.saga_id == saga_id and sink.intent_seq == seq


def _is_framework_tool_span(span: Span, tool_name: str) -> bool:
    """Is the current span a framework's span for this very tool call, not yet claimed by us?"""
    sink = _sink.get()
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
        _failed("saving a gate's trace context")


def gate_links(store: Store, saga_id: str, seq: int) -> tuple[Link, ...]:
    """A link to the span that opened the gate at (saga_id, seq), when its context was kept."""
    t = _t
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
        _failed("reading a gate's trace context")
        return ()


# -- sagas -----------------------------------------------------------------------------------------
_NOT_FAILED = frozenset({"COMPLETED", "AWAITING_APPROVAL", "RUNNING"})


class SagaTrace:
    """The span of one saga run in this process (``sagacity.saga``): started with the run, the
    current span while its work runs and while it concludes, ended with its result."""

    __slots__ = ("saga_id", "span", "t")

    def __init__(self, saga_id: str, *, gate: int | None = None) -> None:
        self.t = _t
        self.saga_id = saga_id
        self.span: Span | None = None
        if self.t is None:
            return
        try:
            attrs: dict[str, Any] = {"sagacity.saga.id": saga_id}
            if gate is not None:  # a resumed run: the gate it resumes, and a link to its span
                attrs["sagacity.approval.seq"] = gate
            self.span = self.t.start("sagacity.saga", attrs, _resume_links.get() if gate else ())
        except Exception:  # noqa: BLE001
            _failed("saga span")

    def current(self) -> _Current:
        """``with trace.current():`` the saga's span is current, and no outer sink hears its entries."""
        return _Current(self.t, self.span)

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
            _failed("saga span end")


class _Current:
    """Attach a span for a block (and hide outer sinks); a no-op without one."""

    __slots__ = ("_sink", "_token", "span", "t")

    def __init__(self, t: _Otel | None, span: Span | None) -> None:
        self.t = t
        self.span = span
        self._token: object = None
        self._sink: contextvars.Token[_Sink | None] | None = None

    def __enter__(self) -> None:
        if self.t is not None and self.span is not None:
            self._token = self.t.attach(self.span)
            self._sink = _sink.set(None)

    def __exit__(self, *exc_info: object) -> None:
        if self._sink is not None:
            _sink.reset(self._sink)
        if self._token is not None and self.t is not None:
            self.t.context.detach(self._token)


# -- compensation --------------------------------------------------------------------------------------
class CompensationTrace:
    """Spans of one compensation run: ``sagacity.compensate``, one ``compensate {tool}`` child
    per step in order. Explicit, never attached across steps: a generator operation's steps may
    each run in a fresh copy of the context (``_effects.drive_async``). User code of a step runs
    with the step's span current (:meth:`around`)."""

    def __init__(self, saga_id: str) -> None:
        self.t = _t
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
            _failed("compensation span")

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
            _failed("compensation step span")

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
                attrs["error.type"] = _error_type_of(step.error)
                span.set_status(t.trace.Status(t.trace.StatusCode.ERROR, attrs["error.type"]))
            span.set_attributes(attrs)
            span.end()
        except Exception:  # noqa: BLE001
            _failed("compensation step span end")

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
            _failed("compensation span end")

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


async def _awaited_within(t: _Otel, context: Context, awaitable: Awaitable[Any]) -> Any:
    token = t.context.attach(context)
    try:
        return await awaitable
    finally:
        t.context.detach(token)


# -- decisions (the facade's operations) ----------------------------------------------------------
#: kind -> (span name, the parameters that name the saga, the seq and who decided)
_OPERATIONS = {
    "approve": ("sagacity.approve", "approver"),
    "reject": ("sagacity.reject", "approver"),
    "resume": ("sagacity.resume", "resumed_by"),
    "resolve": ("sagacity.resolve_in_doubt", "resolver"),
    "expire": ("sagacity.expire_approvals", ""),
    "recover": ("sagacity.recover", ""),
}
_LINKED = frozenset({"approve", "reject", "resume"})


def operation(kind: str) -> Callable[[F], F]:
    """Decorate a facade method (sync or async) as a decision: a span, and ``sagacity.decisions``.

    Off, the wrapper costs one check. On, the span is current around the whole operation, so the
    compensation it may run and the call it may resume are its children; approve, reject and
    resume link to the span that opened the gate (its context read from the store first).
    """
    span_name, by = _OPERATIONS[kind]

    def decorate(fn: F) -> F:
        signature = inspect.signature(fn)
        if inspect.iscoroutinefunction(fn):

            async def traced_async(self: Any, *args: Any, **kwargs: Any) -> Any:
                if not active:
                    return await fn(self, *args, **kwargs)
                import asyncio

                bound = _bind(signature, self, args, kwargs)
                links: tuple[Link, ...] = ()
                if kind in _LINKED:
                    links = await asyncio.to_thread(gate_links, self.store, *_target(bound))
                with _Operation(kind, span_name, by, bound, links) as op:
                    return op.done(await fn(self, *args, **kwargs))

            traced_async.__wrapped__ = fn  # type: ignore[attr-defined]
            traced_async.__name__ = fn.__name__
            traced_async.__qualname__ = fn.__qualname__
            traced_async.__doc__ = fn.__doc__
            return traced_async  # type: ignore[return-value]

        def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not active or _in_event_loop():  # the blocking method refuses: let it say so
                return fn(self, *args, **kwargs)
            bound = _bind(signature, self, args, kwargs)
            links = gate_links(self.store, *_target(bound)) if kind in _LINKED else ()
            with _Operation(kind, span_name, by, bound, links) as op:
                return op.done(fn(self, *args, **kwargs))

        traced.__wrapped__ = fn  # type: ignore[attr-defined]
        traced.__name__ = fn.__name__
        traced.__qualname__ = fn.__qualname__
        traced.__doc__ = fn.__doc__
        return traced  # type: ignore[return-value]

    return decorate


def _in_event_loop() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _bind(
    signature: inspect.Signature, self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    try:
        return dict(signature.bind(self, *args, **kwargs).arguments)
    except TypeError:
        return {}  # the method itself will say what is wrong


def _target(bound: dict[str, Any]) -> tuple[str, int]:
    return str(bound.get("saga_id", "")), int(bound.get("seq", 0) or 0)


class _Operation:
    __slots__ = ("_current", "_links_token", "_sink_token", "kind", "outcome", "sink", "span", "t", "value")

    def __init__(self, kind: str, name: str, by: str, bound: dict[str, Any], links: tuple[Link, ...]) -> None:
        self.t = _t
        self.kind = kind
        self.outcome = "accepted"
        self.value = 1
        self.sink = _Sink(bound.get("saga_id") if isinstance(bound.get("saga_id"), str) else None)
        self.span: Span | None = None
        self._current: _Current | None = None
        self._links_token: contextvars.Token[tuple[Any, ...]] | None = None
        self._sink_token: contextvars.Token[_Sink | None] | None = None
        if self.t is None:
            return
        try:
            attrs: dict[str, Any] = {"sagacity.decision.kind": kind}
            saga_id, seq = _target(bound)
            if saga_id:
                attrs["sagacity.saga.id"] = saga_id
            if seq:
                attrs["sagacity.decision.seq"] = seq
            who = bound.get(by) if by else None
            if isinstance(who, str) and who:
                attrs["sagacity.decision.by"] = who.strip()
            reason = bound.get("reason")
            if self.t.capture and isinstance(reason, str) and reason:  # a human's words: content
                attrs["sagacity.decision.reason"] = reason
            if kind == "resolve":
                attrs["sagacity.decision.happened"] = bool(bound.get("happened"))
            self.span = self.t.start(name, attrs, links)
            self._current = _Current(self.t, self.span)
            if kind == "resume":
                self._links_token = _resume_links.set(links)
        except Exception:  # noqa: BLE001
            _failed(f"{kind} span")

    def __enter__(self) -> _Operation:
        if self._current is not None:
            self._current.__enter__()
        self._sink_token = _sink.set(self.sink)
        return self

    def done(self, result: Any) -> Any:
        """Note what the operation returned, and hand it back."""
        if isinstance(result, list):
            self.value = len(result)
        elif getattr(result, "error", None) is not None and isinstance(result.error, PayloadMismatchError):
            self.outcome = "refused"
        return result

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self._sink_token is not None:
            _sink.reset(self._sink_token)
        if self._links_token is not None:
            _resume_links.reset(self._links_token)
        if self._current is not None:
            self._current.__exit__()
        t = self.t
        if t is None:
            return
        try:
            if exc is not None:
                self.outcome = _outcome_of(exc)
            if t.decisions is not None and self.value:
                attributes = {"sagacity.decision.kind": self.kind, "sagacity.decision.outcome": self.outcome}
                t.decisions.add(self.value, attributes)
            span = self.span
            if span is None:
                return
            attrs: dict[str, Any] = {}
            if self.kind in _LINKED or self.kind == "resolve":  # the decision's own entry
                attrs = self.sink.journal_attributes(self.sink.first)
                attrs.pop("sagacity.journal.intent_seq", None)
            attrs["sagacity.decision.outcome"] = self.outcome
            if self.kind in ("expire", "recover"):
                attrs["sagacity.decision.count"] = self.value
            if exc is not None:
                attrs["error.type"] = error_type(exc)
                if self.outcome == "failed":
                    span.set_status(t.trace.Status(t.trace.StatusCode.ERROR, error_type(exc)))
            span.set_attributes(attrs)
            span.end()
        except Exception:  # noqa: BLE001
            _failed(f"{self.kind} span end")


def _outcome_of(exc: BaseException) -> str:
    if isinstance(exc, ApprovalNotFoundError | SagaNotFoundError):
        return "not_found"
    if isinstance(exc, ApprovalRefusedError | SagaStateError):
        return "refused"
    return "failed"


# -- gauges: reads of the store -------------------------------------------------------------------------
@dataclass
class _Watched:
    store: str
    pending: Callable[[Any], Sequence[ApprovalRequest]]
    in_doubt: Callable[[Any], int]


_watched: weakref.WeakKeyDictionary[Any, _Watched] = weakref.WeakKeyDictionary()
_watched_lock = threading.Lock()


def watch(
    owner: Any,
    store: str,
    *,
    pending: Callable[[Any], Sequence[ApprovalRequest]],
    in_doubt: Callable[[Any], int],
) -> None:
    """Report ``owner``'s pending approvals and in-doubt calls in the gauges while it lives.

    ``pending(owner)`` reads the request table (it holds only what is pending) and
    ``in_doubt(owner)`` the saga index's in-doubt rows (a partial index): neither grows with the
    journal. Kept by weak reference; costs nothing until a metric reader collects.
    """
    with _watched_lock:
        _watched[owner] = _Watched(store, pending, in_doubt)


def unwatch(owner: Any) -> None:
    with _watched_lock:
        _watched.pop(owner, None)


def _stores() -> list[tuple[Any, _Watched]]:
    """One watched owner per store (two ``Sagacity`` on one database report it once)."""
    with _watched_lock:
        items = list(_watched.items())
    seen: dict[str, tuple[Any, _Watched]] = {}
    for owner, w in items:
        seen.setdefault(w.store, (owner, w))
    return list(seen.values())


def _observe_pending(observation: Any, *, count: bool) -> Iterator[Observation]:
    now = datetime.now(UTC).replace(tzinfo=None)
    for owner, w in _stores():
        try:
            pending = w.pending(owner)
        except Exception:  # noqa: BLE001 - a store down: no observation this time
            _failed("the pending-approvals gauge")
            continue
        attrs = {"sagacity.store": w.store}
        if count:
            yield observation(len(pending), attrs)
        else:
            oldest = min((r.created_at for r in pending), default=None)
            yield observation(max(0.0, (now - oldest).total_seconds()) if oldest else 0.0, attrs)


def _observe_in_doubt(observation: Any) -> Iterator[Observation]:
    """In-doubt calls, summed over the saga index's in-doubt sagas at each collection."""
    for owner, w in _stores():
        try:
            value = w.in_doubt(owner)
        except Exception:  # noqa: BLE001 - a store down: no observation this time
            _failed("the in-doubt gauge")
            continue
        yield observation(value, {"sagacity.store": w.store})
