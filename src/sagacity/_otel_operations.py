"""The facade's decisions as spans: approve, reject, resume, resolve, expire and recover, each a
span current around the whole operation and a count in ``sagacity.decisions``.
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import sagacity._telemetry as _telemetry
from sagacity._otel_hooks import Sink, current_sink, resume_links
from sagacity._otel_instruments import error_type, failed
from sagacity._otel_spans import Current, gate_links
from sagacity.errors import (
    ApprovalNotFoundError,
    ApprovalRefusedError,
    PayloadMismatchError,
    SagaNotFoundError,
    SagaStateError,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Link, Span

F = TypeVar("F", bound=Callable[..., Any])

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
                if not _telemetry.active:
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
            if not _telemetry.active or _in_event_loop():  # the blocking method refuses: let it say so
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
        self.t = _telemetry.live
        self.kind = kind
        self.outcome = "accepted"
        self.value = 1
        self.sink = Sink(bound.get("saga_id") if isinstance(bound.get("saga_id"), str) else None)
        self.span: Span | None = None
        self._current: Current | None = None
        self._links_token: contextvars.Token[tuple[Any, ...]] | None = None
        self._sink_token: contextvars.Token[Sink | None] | None = None
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
            self._current = Current(self.t, self.span)
            if kind == "resume":
                self._links_token = resume_links.set(links)
        except Exception:  # noqa: BLE001
            failed(f"{kind} span")

    def __enter__(self) -> _Operation:
        if self._current is not None:
            self._current.__enter__()
        self._sink_token = current_sink.set(self.sink)
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
            current_sink.reset(self._sink_token)
        if self._links_token is not None:
            resume_links.reset(self._links_token)
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
            failed(f"{self.kind} span end")


def _outcome_of(exc: BaseException) -> str:
    if isinstance(exc, ApprovalNotFoundError | SagaNotFoundError):
        return "not_found"
    if isinstance(exc, ApprovalRefusedError | SagaStateError):
        return "refused"
    return "failed"
