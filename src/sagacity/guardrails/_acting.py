"""Which agent a call is made by, as the policy's rules (``agent``) and the kill switch see it.

The principal a call is made for is the saga's own (``sagacity.acting_as``, ``Sagacity(principal=)``:
the one its gates journal as their requester). The agent — which bot or workflow makes the calls —
is said around the work: ``with as_agent("refund-bot"): ...``. It follows the saga's context like
the saga itself (``contextvars``) and is journaled in each verdict.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from sagacity._payloads import one_line

__all__ = ["as_agent", "current_agent"]

_AGENT: ContextVar[str | None] = ContextVar("sagacity_agent", default=None)


@contextmanager
def as_agent(agent: str) -> Iterator[None]:
    """Calls inside are made by ``agent`` (one line of text)."""
    token = _AGENT.set(one_line("agent", agent))
    try:
        yield
    finally:
        _AGENT.reset(token)


def current_agent() -> str | None:
    """The agent making the calls here; None when nobody said."""
    return _AGENT.get()
