"""The saga run OpenTelemetry sees: chosen at a saga's start when telemetry is on.

``_saga.SagaRun`` — the tool-call hot path — carries no telemetry code. When a saga starts with
telemetry on (``_telemetry.active``), :func:`new_run` makes a :class:`TracedSagaRun` instead: the
same run, its calls wrapped in spans. The journal hands every entry it lands to the span current
in that context (``_otel_hooks.appended``), so these wrappers learn seqs, phases and hashes without
the call path passing anything on. Off, a saga costs one flag check here and nothing per call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import sagacity._context as _context
import sagacity._otel_spans as _otel_spans
import sagacity._telemetry as _telemetry
from sagacity._effects import Operation
from sagacity._engine import Engine
from sagacity._saga import SagaRun
from sagacity.model import SagaResult
from sagacity.tools import ToolSpec


class TracedSagaRun(SagaRun):
    """A ``SagaRun`` whose saga, calls and gates are spans (``docs/observability.md``)."""

    def __init__(self, engine: Engine, saga_id: str, *, gate: int | None = None, **kw: Any) -> None:
        super().__init__(engine, saga_id, **kw)
        self.trace = _otel_spans.SagaTrace(saga_id, gate=gate)

    def call(self, spec: ToolSpec, input: str, *rest: Any, **kw: Any) -> Any:
        with _otel_spans.ToolCallSpan(self.saga_id, spec, input) as span:
            result = super().call(spec, input, *rest, **kw)
        _otel_spans.save_gate(self.engine.store, span)
        return result

    async def call_async(self, spec: ToolSpec, input: str, *rest: Any, **kw: Any) -> Any:
        with _otel_spans.ToolCallSpan(self.saga_id, spec, input) as span:
            result = await super().call_async(spec, input, *rest, **kw)
        if span.gated is not None:
            await asyncio.to_thread(_otel_spans.save_gate, self.engine.store, span)
        return result

    def call_keyed(self, spec: ToolSpec, input: str, call_id: str, *rest: Any, **kw: Any) -> Any:
        token = _otel_spans.tool_call_id.set(call_id)  # gen_ai.tool.call.id: the framework's id
        try:
            with _otel_spans.ToolCallSpan(self.saga_id, spec, input) as span:
                result = super().call_keyed(spec, input, call_id, *rest, **kw)
        finally:
            _otel_spans.tool_call_id.reset(token)
        _otel_spans.save_gate(self.engine.store, span)
        return result

    async def call_keyed_async(self, spec: ToolSpec, input: str, call_id: str, *rest: Any, **kw: Any) -> Any:
        token = _otel_spans.tool_call_id.set(call_id)
        try:
            with _otel_spans.ToolCallSpan(self.saga_id, spec, input) as span:
                result = await super().call_keyed_async(spec, input, call_id, *rest, **kw)
        finally:
            _otel_spans.tool_call_id.reset(token)
        if span.gated is not None:
            await asyncio.to_thread(_otel_spans.save_gate, self.engine.store, span)
        return result

    def execute(self, spec: ToolSpec, seq: int, input: str, *rest: Any, **kw: Any) -> Any:
        if _otel_spans.traces_call(self.saga_id, seq):  # from ``call``: its span is open
            return super().execute(spec, seq, input, *rest, **kw)
        with _otel_spans.ToolCallSpan(self.saga_id, spec, input, seq=seq):  # a resumed call
            return super().execute(spec, seq, input, *rest, **kw)

    async def execute_async(self, spec: ToolSpec, seq: int, input: str, *rest: Any, **kw: Any) -> Any:
        if _otel_spans.traces_call(self.saga_id, seq):
            return await super().execute_async(spec, seq, input, *rest, **kw)
        with _otel_spans.ToolCallSpan(self.saga_id, spec, input, seq=seq):
            return await super().execute_async(spec, seq, input, *rest, **kw)

    def conclusion(self, value: Any, error: BaseException | None) -> Operation[SagaResult]:
        try:
            result = yield from super().conclusion(value, error)
        except BaseException as exc:
            self.trace.end(None, exc)
            raise
        self.trace.end(result)
        return result


def new_run(
    engine: Engine, saga_id: str, *, existed: bool | None, last_seq: int, gate: int | None = None
) -> SagaRun:
    """The run for a saga starting (or resuming ``gate``) here: traced when telemetry is on."""
    _telemetry.refresh()
    if not _telemetry.active:
        return SagaRun(engine, saga_id, existed=existed, last_seq=last_seq)
    return TracedSagaRun(engine, saga_id, existed=existed, last_seq=last_seq, gate=gate)


def entered(run: SagaRun) -> AbstractContextManager[object]:
    """``_context.entered``, with a traced run's saga span current for the block."""
    return _entered_traced(run) if isinstance(run, TracedSagaRun) else _context.entered(run)


@contextmanager
def _entered_traced(run: TracedSagaRun) -> Iterator[SagaRun]:
    with _context.entered(run), run.trace.current():
        yield run


_NOTHING = nullcontext()


def current(run: SagaRun) -> AbstractContextManager[None]:
    """The run's saga span current for a block (its conclusion); nothing for an untraced run."""
    return run.trace.current() if isinstance(run, TracedSagaRun) else _NOTHING
