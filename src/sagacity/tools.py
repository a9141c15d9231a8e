"""``@tool``: declare a tool call that a saga journals, compensates and, if irreversible, gates.

A decorated tool is a plain function again (same signature, annotations, docstring and
``__name__``, and a coroutine function when the original was), so agent frameworks introspect it
as they would the original. Outside a saga it just runs; inside one, each call is journaled.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, cast, overload

from sagacity._context import current_run, irreversible_allowed
from sagacity._json import compact
from sagacity._payloads import DEFINITION_LINE, RESERVED_PREFIX, RESERVED_TOOL_NAMES
from sagacity.errors import (
    InvalidValueError,
    IrreversibleToolError,
    ToolRegistrationError,
    UnknownToolError,
)
from sagacity.model import CompensationContext, ReconcileContext, Reversibility

__all__ = ["Reconciler", "Retry", "Tool", "ToolRegistry", "ToolSpec", "registry", "tool"]

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
C = TypeVar("C", bound=Callable[[CompensationContext], Any])
K = TypeVar("K", bound=Callable[[ReconcileContext], Any])

#: Durability modes (``Sagacity(durability=)``, ``sg.saga(durability=)``, ``@tool(durability=)``):
#: a call's outcome is committed on its own before the call returns, the default ...
IMMEDIATE = "immediate"
#: ... or with the saga's next entry (the next INTENT, a gate, the END or the compensation).
DEFERRED = "deferred"


def require_durability(durability: str) -> str:
    """``immediate`` or ``deferred``, else ``InvalidValueError`` naming both."""
    if durability not in (IMMEDIATE, DEFERRED):
        raise InvalidValueError(f"durability must be {IMMEDIATE!r} or {DEFERRED!r}, not {durability!r}")
    return durability


@dataclass(frozen=True, slots=True)
class Retry:
    """Opt-in retries: up to ``attempts`` tries in all, on the listed exception types only.

    The delay before try *n + 1* is ``backoff * 2**(n - 1)`` capped at ``max_backoff``, scaled by
    a random factor in [0.5, 1] when ``jitter`` is on (so that many sagas do not retry in step).
    Every try reuses the call's idempotency key; the journal keeps one INTENT and the final outcome.
    """

    on: tuple[type[BaseException], ...]
    attempts: int = 3
    backoff: float = 0.1
    max_backoff: float = 10.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise InvalidValueError("Retry.attempts must be at least 1")
        if not self.on:
            raise InvalidValueError("Retry.on must name the exception types to retry on")

    def should_retry(self, exc: BaseException, attempt: int) -> bool:
        return attempt < self.attempts and isinstance(exc, self.on)

    def delay(self, attempt: int) -> float:
        base = float(min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))
        return base * random.uniform(0.5, 1.0) if self.jitter else base


@dataclass(slots=True)
class ToolSpec:
    """Everything Sagacity knows about one tool; ``Tool.spec`` of a decorated function."""

    name: str
    fn: Callable[..., Any]
    reversibility: Reversibility = Reversibility.COMPENSATABLE
    retry: Retry | None = None
    approval_ttl: timedelta | None = None
    approvals_required: int = 1
    compensation: Callable[[CompensationContext], Any] | None = None
    compensation_idempotent: bool = False
    #: Asks the external system whether a call in doubt happened (``@tool.reconcile``), and
    #: whether an undo in doubt did (``@tool.reconcile_compensation``); journaled by ``name``.
    reconciler: Reconciler | None = None
    compensation_reconciler: Reconciler | None = None
    #: The separation-of-duties rule: None means on with four eyes (``approvals_required`` > 1).
    requester_may_not_approve: bool | None = None
    #: The tool's definition as its caller saw it (``{"name", "description", "inputSchema"}``;
    #: for an MCP tool, as the upstream listed it), set with :meth:`define`; None: derived from
    #: the function (its name, docstring and signature).
    definition: dict[str, Any] | None = None
    #: The hash of a definition given with :meth:`define` (an MCP tool), journaled with every
    #: call; "" for a tool defined by its function.
    pinned_hash: str = ""
    #: What the INTENT of each call journals: ``definition=<pinned_hash>``, or nothing.
    intent_payload: str = ""
    #: When a call's outcome is committed (``IMMEDIATE`` or ``DEFERRED``); None: as the saga says
    #: (an irreversible tool's then always ``IMMEDIATE``).
    durability: str | None = None
    signature: inspect.Signature = field(init=False)
    # Parameter names when every parameter is plain positional-or-keyword without a default:
    # then a call with exactly that many positional arguments binds as ``zip(names, args)``.
    _plain_names: tuple[str, ...] | None = field(init=False, repr=False, compare=False)
    # Read on every call: a field, not a property over inspect.iscoroutinefunction (~1 us). Fixed
    # by ``fn``, as the signature is.
    is_async: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.signature = inspect.signature(self.fn)
        params = self.signature.parameters.values()
        plain = all(p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in params)
        self._plain_names = tuple(self.signature.parameters) if plain else None
        self.is_async = inspect.iscoroutinefunction(self.fn)

    @property
    def irreversible(self) -> bool:
        return self.reversibility is Reversibility.IRREVERSIBLE

    @property
    def description(self) -> str:
        """What the tool does, as its caller was told: the definition's description (an MCP
        tool's, as the upstream listed it), else the function's docstring; "" when it has none."""
        if self.definition is not None:
            described = self.definition.get("description")
            return described if isinstance(described, str) else ""
        return inspect.getdoc(self.fn) or ""

    @property
    def definition_hash(self) -> str:
        """``sha256:<hex>`` of the definition as canonical JSON (sorted keys, compact): what a
        gate is approved under, and what an MCP call journals."""
        definition = self.definition
        if definition is None:
            definition = {
                "name": self.name,
                "description": self.description,
                "inputSchema": str(self.signature),
            }
        return definition_digest(definition)

    def define(self, definition: dict[str, Any]) -> None:
        """Bind the tool to ``definition`` (what the caller was shown); every call journals its hash."""
        self.definition = dict(definition)
        self.pinned_hash = self.definition_hash
        self.intent_payload = DEFINITION_LINE + self.pinned_hash

    @property
    def excludes_requester(self) -> bool:
        """Whether the requester of a gated call may not approve it (journaled with the gate)."""
        rule = self.requester_may_not_approve
        return self.approvals_required > 1 if rule is None else rule

    @property
    def origin(self) -> str:
        return f"{self.fn.__module__}.{self.fn.__qualname__}"

    def encode_input(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The call's arguments bound to parameter names (defaults applied), as compact JSON.

        Raises ``TypeError`` as the function itself would for arguments it cannot take: the
        tool never runs and nothing is journaled.
        """
        names = self._plain_names
        if names is not None and not kwargs and len(args) == len(names):
            # Signature.bind gives the same mapping here, at ~10x the cost (it was a fifth of a
            # no-op tool call's Python time); any other call shape takes the general path.
            return compact(dict(zip(names, args, strict=True)))
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return compact(dict(bound.arguments))

    def decode_input(self, input: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Journaled input back to call arguments (for resume and ``CompensationContext.args``)."""
        arguments = json_object(input, what=f"input of tool {self.name!r}")
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for name, param in self.signature.parameters.items():
            if name not in arguments:
                continue
            value = arguments[name]
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                args.extend(value)
            elif param.kind is inspect.Parameter.VAR_KEYWORD:
                kwargs.update(value)
            elif param.kind is inspect.Parameter.POSITIONAL_ONLY:
                args.append(value)
            else:
                kwargs[name] = value
        return tuple(args), kwargs


@dataclass(frozen=True, slots=True)
class Reconciler:
    """A reconciler and the name its answers are journaled under."""

    name: str
    fn: Callable[[ReconcileContext], Any]


def definition_digest(definition: dict[str, Any]) -> str:
    """``sha256:<hex>`` of a tool definition as canonical JSON (sorted keys, compact, UTF-8)."""
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def json_object(text: str, *, what: str) -> dict[str, Any]:
    """Parse ``text`` as a JSON object or raise ``InvalidValueError`` saying what is wrong."""
    try:
        value = json.loads(text) if text else {}
    except ValueError as exc:
        raise InvalidValueError(f"{what} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise InvalidValueError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


class Tool(Protocol[P, R_co]):
    """A function decorated with ``@tool``: call it as the original, plus these attributes."""

    spec: ToolSpec
    __name__: str

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def call_json(self, arguments: str) -> Any:
        """Call with the model's raw argument JSON, journaling that string verbatim."""

    @overload
    def compensation(self, fn: C, /) -> C: ...
    @overload
    def compensation(self, *, idempotent: bool = False) -> Callable[[C], C]: ...

    @overload
    def reconcile(self, fn: K, /) -> K: ...
    @overload
    def reconcile(self, *, name: str | None = None) -> Callable[[K], K]: ...

    @overload
    def reconcile_compensation(self, fn: K, /) -> K: ...
    @overload
    def reconcile_compensation(self, *, name: str | None = None) -> Callable[[K], K]: ...


class ToolRegistry:
    """Tools by name, so a journal entry (and a resume in another process) finds its function.

    Redefining the same function (same module and qualified name: a reload, a notebook cell)
    replaces the registration; a different function under a taken name is an error.
    """

    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._lock = threading.Lock()

    def register(self, spec: ToolSpec) -> None:
        if spec.name in RESERVED_TOOL_NAMES or spec.name.startswith(RESERVED_PREFIX):
            raise ToolRegistrationError(
                f"tool name {spec.name!r} is reserved for Sagacity's own entries (so are "
                f"{', '.join(sorted(RESERVED_TOOL_NAMES))} and every name starting "
                f"{RESERVED_PREFIX!r}): give the tool another name (@tool(name=...))"
            )
        if not spec.name or "\x00" in spec.name:
            raise ToolRegistrationError("a tool name must be a non-empty string without NUL")
        with self._lock:
            existing = self._tools.get(spec.name)
            if existing is not None and existing.origin != spec.origin:
                raise ToolRegistrationError(
                    f"tool name {spec.name!r} is already taken by {existing.origin}; "
                    f"{spec.origin} needs another name (@tool(name=...))"
                )
            self._tools[spec.name] = spec

    def get(self, name: str) -> ToolSpec:
        """The tool registered as ``name``; ``UnknownToolError`` says to import its module."""
        with self._lock:
            spec = self._tools.get(name)
        if spec is None:
            raise UnknownToolError(
                f"no tool named {name!r} is registered in this process; import the module that "
                "defines it (e.g. `sagacity serve --import MODULE`)"
            )
        return spec

    def find(self, name: str) -> ToolSpec | None:
        with self._lock:
            return self._tools.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._tools)

    def unregister(self, name: str) -> None:
        with self._lock:
            self._tools.pop(name, None)

    @contextmanager
    def isolated(self) -> Iterator[ToolRegistry]:
        """Registrations made inside the block are forgotten after it (for tests)."""
        with self._lock:
            saved = dict(self._tools)
        try:
            yield self
        finally:
            with self._lock:
                self._tools = saved


#: The process-wide registry ``@tool`` registers into (``@tool(registry=...)`` picks another).
registry = ToolRegistry()
_process_registry = registry  # the name ``registry`` is also a parameter of ``tool``


def _check_outside(spec: ToolSpec) -> None:
    if spec.irreversible and not irreversible_allowed():
        raise IrreversibleToolError(
            f"tool {spec.name!r} is IRREVERSIBLE and was called outside a saga, so no human approved "
            "it; call it inside `sg.saga(...)` (it will wait for approval), or opt out explicitly "
            "with `with sagacity.allow_irreversible(): ...`"
        )


class _CompensationDecorator(Generic[P, R]):
    def __init__(self, spec: ToolSpec) -> None:
        self.spec = spec

    def __call__(self, fn: Any = None, /, *, idempotent: bool = False) -> Any:
        def attach(compensation: C) -> C:
            if not callable(compensation):
                raise ToolRegistrationError(f"compensation of {self.spec.name!r} must be callable")
            self.spec.compensation = compensation
            self.spec.compensation_idempotent = idempotent
            return compensation

        return attach if fn is None else attach(fn)


class _ReconcileDecorator:
    """``@tool.reconcile`` (``undo=False``) and ``@tool.reconcile_compensation`` (``undo=True``)."""

    def __init__(self, spec: ToolSpec, *, undo: bool) -> None:
        self.spec = spec
        self.undo = undo

    def __call__(self, fn: Any = None, /, *, name: str | None = None) -> Any:
        def attach(reconciler: K) -> K:
            if not callable(reconciler):
                raise ToolRegistrationError(f"reconciler of {self.spec.name!r} must be callable")
            named = Reconciler(str(name or getattr(reconciler, "__name__", "reconciler")), reconciler)
            if not named.name or "\n" in named.name:
                raise ToolRegistrationError("a reconciler's name must be one non-empty line")
            if self.undo:
                self.spec.compensation_reconciler = named
            else:
                self.spec.reconciler = named
            return reconciler

        return attach if fn is None else attach(fn)


def _wrap(spec: ToolSpec) -> Any:
    fn = spec.fn
    if spec.is_async:

        @functools.wraps(fn)
        async def async_tool(*args: Any, **kwargs: Any) -> Any:
            run = current_run()
            if run is None:
                _check_outside(spec)
                return await fn(*args, **kwargs)
            return await run.call_async(spec, spec.encode_input(args, kwargs), args, kwargs)

        wrapper: Any = async_tool
    else:

        @functools.wraps(fn)
        def sync_tool(*args: Any, **kwargs: Any) -> Any:
            run = current_run()
            if run is None:
                _check_outside(spec)
                return fn(*args, **kwargs)
            return run.call(spec, spec.encode_input(args, kwargs), args, kwargs)

        wrapper = sync_tool

    def call_json(arguments: str) -> Any:
        args, kwargs = spec.decode_input(arguments)
        run = current_run()
        if run is None:
            return wrapper(*args, **kwargs)
        if spec.is_async:
            return run.call_async(spec, arguments, args, kwargs)
        return run.call(spec, arguments, args, kwargs)

    wrapper.spec = spec
    wrapper.compensation = _CompensationDecorator(spec)
    wrapper.reconcile = _ReconcileDecorator(spec, undo=False)
    wrapper.reconcile_compensation = _ReconcileDecorator(spec, undo=True)
    wrapper.call_json = call_json
    return wrapper


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    reversibility: Reversibility = Reversibility.COMPENSATABLE,
    retry: Retry | None = None,
    approval_ttl: timedelta | float | None = None,
    approvals: int = 1,
    requester_may_not_approve: bool | None = None,
    registry: ToolRegistry | None = None,
    durability: str | None = None,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    reversibility: Reversibility = Reversibility.COMPENSATABLE,
    retry: Retry | None = None,
    approval_ttl: timedelta | float | None = None,
    approvals: int = 1,
    requester_may_not_approve: bool | None = None,
    registry: ToolRegistry | None = None,
    durability: str | None = None,
) -> Any:
    """Declare a journaled tool.

    ``reversibility=Reversibility.IRREVERSIBLE`` makes calls inside a saga wait for human
    approval; ``approvals`` > 1 requires that many distinct approvers (four eyes);
    ``requester_may_not_approve`` refuses the approval of the principal who asked for the call
    (on by default with four eyes, off with one approver);
    ``approval_ttl`` (seconds or a timedelta) overrides the Sagacity default expiry of its
    requests; ``retry`` retries the listed exception types. Gates are never retried.
    ``durability`` (``"immediate"`` or ``"deferred"``; default: the saga's, and ``"immediate"``
    for an irreversible tool) says whether a call's outcome is committed before the call returns
    or with the saga's next entry (docs/guide.md, "Durability").
    """
    if approvals < 1:
        raise InvalidValueError("approvals must be at least 1")
    if durability is not None:
        require_durability(durability)
    ttl = timedelta(seconds=approval_ttl) if isinstance(approval_ttl, int | float) else approval_ttl
    target = registry if registry is not None else _process_registry

    def decorate(function: Callable[..., Any]) -> Any:
        if not callable(function):
            raise ToolRegistrationError("@tool decorates a function")
        spec = ToolSpec(
            name or function.__name__,
            function,
            Reversibility(reversibility),
            retry,
            ttl,
            approvals,
            requester_may_not_approve=requester_may_not_approve,
            durability=durability,
        )
        target.register(spec)
        return _wrap(spec)

    return cast(Any, decorate if fn is None else decorate(fn))
