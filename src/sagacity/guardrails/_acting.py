"""Who a call is made for: the principal and the agent, as the policy's rules see them.

Until sagas carry their own principal (#21), the application says it around the saga's work:
``with acting_as(principal="alice@example.com", agent="refund-bot"): ...``. It follows the
saga's context like the saga itself (``contextvars``), and is journaled in each verdict.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from sagacity._state import one_line

__all__ = ["acting_as", "current_actor"]

_ACTOR: ContextVar[tuple[str | None, str | None]] = ContextVar("sagacity_actor", default=(None, None))


@contextmanager
def acting_as(principal: str | None = None, *, agent: str | None = None) -> Iterator[None]:
    """Calls inside are made for ``principal`` by ``agent`` (each one line of text)."""
    if principal is not None:
        one_line("principal", principal)
    if agent is not None:
        one_line("agent", agent)
    token = _ACTOR.set((principal, agent))
    try:
        yield
    finally:
        _ACTOR.reset(token)


def current_actor() -> tuple[str | None, str | None]:
    """(principal, agent) of the calls made here; (None, None) when nobody said."""
    return _ACTOR.get()
