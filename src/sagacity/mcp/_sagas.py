"""Saga boundaries: which saga a ``tools/call`` belongs to, and what the proxy remembers about it.

In order:

1. the request's ``_meta`` key ``io.sagacity/saga`` (:data:`SAGA_META_KEY`): the agent names its
   saga, which may span MCP sessions and reconnects;
2. else the MCP session: one saga per stdio connection, or per streamable-HTTP session (protocol
   2025-11-25, ``Mcp-Session-Id``); after that saga ends (commit, rollback, compensation, a call
   in doubt) the session's next call starts a new one;
3. else (streamable HTTP at 2026-07-28 has no session) the policy's ``sagas.sessionless``: refuse
   the call and say how to name a saga, or run it as a saga of its own (``per-call``).

A saga is only ever driven by one call at a time in this proxy (a lock per saga): its journal
order is the order the calls were made in, and compensation never races a call of the same saga.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import dataclass, field
from enum import StrEnum

from sagacity.mcp._policy import SagaPolicy

__all__ = ["SAGA_META_KEY", "SagaBook", "SagaRouter", "Session", "SessionlessError"]

#: The ``params._meta`` key that names the saga of a ``tools/call``.
SAGA_META_KEY = "io.sagacity/saga"

#: 1-200 characters, none of them a control character or a line break (``\Z``: not even a final
#: newline, which ``$`` would let through).
_SAGA_ID = re.compile(r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]{1,200}\Z")


class SagaOrigin(StrEnum):
    """Where a saga's id came from."""

    META = "meta"  # the agent named it in _meta
    SESSION = "session"  # one per MCP session
    CALL = "call"  # one per call (sessionless, per-call policy)


class SessionlessError(Exception):
    """The call names no saga and its connection has no session (refused by policy)."""


@dataclass
class Session:
    """One MCP session (a stdio connection, or a streamable-HTTP session)."""

    key: str
    current: str | None = None  # the saga its calls go to now
    closed: bool = False


@dataclass
class SagaBook:
    """What this proxy knows about one saga beyond its journal."""

    saga_id: str
    origin: SagaOrigin
    session: Session | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    committed: bool = False
    #: seq of a call of this saga whose thread is parked in doubt (the saga is stuck RUNNING here).
    parked: set[int] = field(default_factory=set)
    #: A call of this saga got past the ownership check here: the sweep runs its approved calls
    #: (never those of a saga another principal named in vain, perhaps driven by another proxy).
    driven: bool = False

    def end(self) -> None:
        """The saga is over for its session: the session's next call starts a new saga."""
        if self.session is not None and self.session.current == self.saga_id:
            self.session.current = None


class SagaRouter:
    """Saga ids for calls, and the books of every saga this proxy has driven."""

    def __init__(self, policy: SagaPolicy) -> None:
        self.policy = policy
        self.books: dict[str, SagaBook] = {}
        self.sessions: dict[str, Session] = {}

    def new_id(self) -> str:
        return f"{self.policy.id_prefix}-{uuid.uuid4().hex[:20]}"

    def session(self, key: str) -> Session:
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = Session(key)
        return session

    def book(self, saga_id: str, origin: SagaOrigin, session: Session | None = None) -> SagaBook:
        book = self.books.get(saga_id)
        if book is None:
            book = self.books[saga_id] = SagaBook(saga_id, origin, session)
        return book

    def resolve(self, *, named: object, session_key: str | None) -> SagaBook:
        """The saga of a call: ``named`` is the ``_meta`` value (or None), ``session_key`` the
        connection's session (or None when it has none).

        Raises ``ValueError`` for a malformed saga id and ``SessionlessError`` when the call has
        neither and the policy refuses such calls. Whose saga it is the gateway reads from the
        journal on every call.
        """
        if named is not None:
            if not isinstance(named, str) or not _SAGA_ID.match(named) or not named.strip():
                raise ValueError(
                    f"_meta[{SAGA_META_KEY!r}] must be a saga id: a string of 1-200 characters "
                    "without control characters"
                )
            return self.book(named, SagaOrigin.META)
        if session_key is not None:
            session = self.session(session_key)
            if session.current is None:
                session.current = self.new_id()
            return self.book(session.current, SagaOrigin.SESSION, session)
        if self.policy.sessionless == "per-call":
            return self.book(self.new_id(), SagaOrigin.CALL)
        raise SessionlessError(
            "this connection has no MCP session (streamable HTTP at protocol 2026-07-28), so the "
            f"proxy cannot tell which saga the call belongs to: name it in the request's "
            f'params._meta {{"{SAGA_META_KEY}": "<your saga id>"}} (one id per task)'
        )
