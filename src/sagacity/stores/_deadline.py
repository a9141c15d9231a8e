"""How long the current caller waits for an unreachable store: a limit per context, not per store.

The library alone retries a lost database for its full reconnect budget (``reconnect_attempts``),
a read within the server store's ``wait_limit`` (its ``connect_timeout``, ``Journal.read``): an
agent would rather wait some seconds than fail a saga over a database restart. A person's dashboard or a
load balancer's health check needs an answer in seconds, so the HTTP server runs each request
under :func:`limited_wait`. In that context:

* each read through ``Journal.read`` (retries and pauses included) gives up after the limit, and
  sets :data:`DEADLINE` while it runs, so a store waiting for a connection (the PostgreSQL
  pool) waits no longer than :func:`time_left`;
* the first append lifts the limit for the rest of the context (``Journal.append`` sets
  :data:`WAIT_LIMIT` to ``None``): once a request has journaled a decision or a resumed call,
  what follows (the decision's compensation, the tool's outcome) must not be abandoned half-way
  because a deadline passed, so it waits as long as the library would.

Context variables, so they follow the request into the threadpool (``run_in_threadpool`` copies
the context) and never leak to another request or to an agent's saga in the same process.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["DEADLINE", "WAIT_LIMIT", "limited_wait", "time_left"]

#: Seconds one read may wait for an unreachable store in this context; None: no limit.
WAIT_LIMIT: ContextVar[float | None] = ContextVar("sagacity_store_wait_limit", default=None)
#: ``time.monotonic()`` by which the read running in this context gives up; None: no deadline.
DEADLINE: ContextVar[float | None] = ContextVar("sagacity_store_deadline", default=None)


@contextmanager
def limited_wait(seconds: float | None) -> Iterator[None]:
    """Within the block, a read waits at most ``seconds`` for an unreachable store (None: no limit)."""
    token = WAIT_LIMIT.set(seconds)
    try:
        yield
    finally:
        WAIT_LIMIT.reset(token)


def time_left() -> float | None:
    """Seconds until the running read's deadline (may be negative), or None when it has none."""
    deadline = DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()
