"""Where the live saga and the running call are kept: context variables, entered with tokens.

Context variables follow ``await``, tasks created inside the saga and ``asyncio.to_thread``, but
not ``threading.Thread`` or an executor's ``submit``: :func:`in_current_saga` carries them there.
Entering keeps the token and leaving resets it, so nested and concurrent sagas each restore
exactly what was current before them.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ParamSpec, Protocol, TypeVar

from sagacity._payloads import one_line, start_principal
from sagacity.chain import idempotency_key
from sagacity.errors import InvalidValueError, SagaNotFoundError, SagaStateError

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Presented:
    """How a framework presents one keyed call (``sagacity.framework.journaled_call``'s keywords):
    one value, so the runtime's sync and async entry points and this protocol take the same four
    settings without each spelling them out. ``on_reject`` is the journaled policy ("" for
    compensate). ``owner``: raises when the saga is not one this call may go in (a workflow run
    refuses another's saga); given every state the call's admission decides on, so the refusal
    is fenced like the decision (internal: not a ``journaled_call`` keyword)."""

    edited: bool = False
    on_reject: str = ""
    control_flow: tuple[type[BaseException], ...] = ()
    wait: float = 60.0
    owner: Callable[[Any], None] | None = None


class SagaRun(Protocol):
    """What a tool needs of the live saga (``sagacity._saga.SagaRun`` implements it): the
    context module knows the runtime only by this shape, so it imports neither the runtime nor
    ``tools`` (``spec`` is a ``sagacity.tools.ToolSpec``)."""

    saga_id: str

    def call(self, spec: Any, input: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...

    async def call_async(
        self, spec: Any, input: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any: ...

    def call_keyed(
        self, spec: Any, input: str, call_id: str, invoke: Callable[[], Any], how: Presented
    ) -> Any: ...

    async def call_keyed_async(
        self, spec: Any, input: str, call_id: str, invoke: Callable[[], Any], how: Presented
    ) -> Any: ...


_run: contextvars.ContextVar[SagaRun | None] = contextvars.ContextVar("sagacity_run", default=None)
#: The running call as (saga_id, seq, tool_name, attempt): a tuple costs the hot path nothing to
#: build, and ``current_call`` makes the ToolCall when someone asks.
CallKey = tuple[str, int, str, int]
_call: contextvars.ContextVar[CallKey | None] = contextvars.ContextVar("sagacity_call", default=None)
_irreversible_allowed: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "sagacity_irreversible_allowed", default=False
)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The journaled call now running in this context (see :func:`current_call`)."""

    saga_id: str
    seq: int
    tool_name: str
    attempt: int = 1

    @property
    def idempotency_key(self) -> str:
        """Stable across retries and restarts: pass it to APIs that deduplicate requests."""
        return idempotency_key(self.saga_id, self.seq)


def current_call() -> ToolCall | None:
    """The journaled tool call running here, or None outside one (a tool run outside a saga)."""
    key = _call.get()
    return None if key is None else ToolCall(*key)


#: The saga live in this context, if any. The ContextVar's own ``get``: no Python frame on the
#: path of every tool call.
current_run: Callable[[], SagaRun | None] = _run.get


class entered:
    """Make ``run`` the live saga for the block, restoring what was live before (a class, as
    ``calling`` is: it wraps every saga)."""

    __slots__ = ("_run", "_token")

    def __init__(self, run: SagaRun) -> None:
        self._run = run

    def __enter__(self) -> SagaRun:
        self._token = _run.set(self._run)
        return self._run

    def __exit__(self, *exc_info: object) -> None:
        _run.reset(self._token)


#: Mark a call as the one running in this context: ``token = enter_call(key)``, then
#: ``leave_call(token)`` in a ``finally``. The ContextVar's own methods, as ``current_run`` is:
#: they wrap every journaled call, where a context manager class was three Python frames more.
enter_call: Callable[[CallKey | None], contextvars.Token[CallKey | None]] = _call.set
leave_call: Callable[[contextvars.Token[CallKey | None]], None] = _call.reset


def irreversible_allowed() -> bool:
    """Whether the caller opted out of the outside-a-saga refusal for IRREVERSIBLE tools."""
    return _irreversible_allowed.get()


@contextmanager
def allow_irreversible() -> Iterator[None]:
    """Let IRREVERSIBLE tools run *outside* a saga inside this block, unjournaled.

    Inside a saga they still wait for approval: this opt-out never skips a gate.
    """
    token = _irreversible_allowed.set(True)
    try:
        yield
    finally:
        _irreversible_allowed.reset(token)


def in_current_saga(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` wrapped to run inside the saga (and call) current *now*, from any thread.

    For ``threading.Thread(target=in_current_saga(work))`` or
    ``executor.submit(in_current_saga(tool), ...)``. Each call runs in its own copy of the
    captured context, so one wrapper may run in several threads at once.
    """
    captured = contextvars.copy_context()
    if captured.get(_run) is None:
        raise SagaStateError("in_current_saga() needs a live saga; call it inside `sg.saga(...)` or `sg.run`")

    @functools.wraps(fn)
    def run_in_saga(*args: P.args, **kwargs: P.kwargs) -> R:
        return captured.copy().run(fn, *args, **kwargs)

    return run_in_saga


@dataclass(frozen=True, slots=True)
class Acting:
    """The principal sagas started in this context belong to (see :func:`acting_as`)."""

    name: str
    admin: bool = False


_acting: contextvars.ContextVar[Acting | None] = contextvars.ContextVar("sagacity_acting", default=None)


def require_principal(principal: str) -> str:
    """A principal's name: one line of text, not blank (it is journaled); stripped."""
    if not isinstance(principal, str) or not principal.strip():
        raise InvalidValueError(f"a principal must be a non-empty name, got {principal!r}")
    return one_line("principal", principal).strip()


def current_principal() -> Acting | None:
    """The principal set by the innermost :func:`acting_as`, or None."""
    return _acting.get()


@contextmanager
def acting_as(principal: str, *, admin: bool = False) -> Iterator[None]:
    """Sagas started, continued, committed or rolled back in this block act for ``principal``.

    A saga belongs to the principal that started it (journaled in its start entry); later work
    in it must come from the same principal, or from one acting with ``admin=True``; anyone
    else naming its id is told there is no such saga. Gates opened in the block name the
    principal as their requester. Wins over ``Sagacity(principal=...)``.
    """
    token = _acting.set(Acting(require_principal(principal), admin))
    try:
        yield
    finally:
        _acting.reset(token)


def refuse_foreign(saga_id: str, start_input: str, principal: str | None, acting: Acting | None) -> None:
    """``SagaNotFoundError``, worded as for an unknown saga, when the saga's START names another
    principal than ``principal``; an admin (``acting_as(..., admin=True)``) and a caller acting
    for no principal (the operator's own process, with the database's rights) pass."""
    owner = start_principal(start_input)
    if owner is None or principal is None or owner == principal or (acting is not None and acting.admin):
        return
    raise SagaNotFoundError(f"no journal entries for saga {saga_id!r}")
