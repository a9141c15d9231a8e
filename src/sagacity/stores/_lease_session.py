"""The lease session: the one server session on which a process holds its locks.

PostgreSQL's advisory locks and MariaDB's ``GET_LOCK`` belong to the session that took them, so
a process keeps every saga lease and liveness lease on one session of its own, outside the pool
(a pooled connection lent to another thread would carry the locks with it). Calls of many
threads meet in a queue (a :class:`GroupCommit` that writes nothing) and go to the server as
the columns of one ``SELECT``: 64 sagas starting at once cost a few statements, not 128.

A session found dead (a failover, a terminated backend, a restart) took its locks with it. The
batch then goes again once, on a new session, after this process's liveness leases are taken
again there, in ``SELECT``s of at most ``MAX_BATCH`` columns (PostgreSQL takes 1,664). Any other
failure drops the session and fails every call of the batch with the store's error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from sagacity.errors import StoreError
from sagacity.stores._dialect import Dialect
from sagacity.stores._group import MAX_BATCH, GroupCommit, Pending

__all__ = ["LeaseSession"]

S = TypeVar("S")


class LeaseSession(Generic[S]):
    """A store's lease session ``S`` (what ``connect`` returns), its calls batched.

    ``select(session, columns, keys)`` runs ``SELECT <columns>`` with ``keys`` for its
    placeholders and returns its one row. ``retake()`` names the call and the keys that take this
    process's liveness leases again on a new session. ``alive(session)`` tells a session the
    driver already knows is closed. A call answered ``1`` or ``true`` succeeded (a lock taken or
    given back); a liveness lease's shared lock answers nothing.
    """

    def __init__(
        self,
        dialect: Dialect,
        connect: Callable[[], S],
        select: Callable[[S, str, Sequence[object]], Sequence[Any] | None],
        close: Callable[[S], None],
        *,
        retake: Callable[[], tuple[str, Sequence[object]]],
        translate: Callable[[BaseException], StoreError],
        refuse_if_closed: Callable[[], None],
        alive: Callable[[S], bool] = lambda session: True,
    ) -> None:
        self._dialect = dialect
        self._connect = connect
        self._select = select
        self._close = close
        self._retake = retake
        self._translate = translate
        self._refuse_if_closed = refuse_if_closed
        self._alive = alive
        self._session: S | None = None
        self._lock = threading.Lock()
        self._calls = GroupCommit(self._batch, journal=False)
        #: Statements sent on the session so far (diagnostics: how well its calls batch).
        self.statements = 0

    def call(self, column: str, key: object) -> bool:
        """``column`` (a lock call with one placeholder) on ``key``, sent together with the calls
        of other threads queued meanwhile; whether it answered 1 (true)."""
        return self._calls.insert(None, (column, key))

    def close(self) -> None:
        """Close the session: its locks go with it."""
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            self._close(session)

    def _batch(self, batch: list[Pending]) -> None:
        columns = ", ".join(column for column, _ in (request.params for request in batch))
        keys = [key for _, key in (request.params for request in batch)]
        with self._lock:
            self._refuse_if_closed()
            for retry in (True, False):
                fresh = self._session is None or not self._alive(self._session)
                try:
                    if fresh:
                        self._session = self._connect()
                        self._take_back(self._session)
                    row = self._row(self._session, columns, keys)
                    break
                except self._dialect.errors as exc:
                    if self._session is not None:
                        self._close(self._session)
                        self._session = None
                    if not (retry and not fresh and self._dialect.unavailable(exc)):
                        raise self._translate(exc) from exc
        for request, answer in zip(batch, row, strict=True):
            # 1 from GET_LOCK and RELEASE_LOCK, true from pg_try_advisory_lock (True == 1).
            request.inserted = answer == 1

    def _take_back(self, session: S) -> None:
        """Take this process's liveness leases again on a new session."""
        column, held = self._retake()
        for at in range(0, len(held), MAX_BATCH):
            chunk = held[at : at + MAX_BATCH]
            self._row(session, ", ".join([column] * len(chunk)), chunk)

    def _row(self, session: S | None, columns: str, keys: Sequence[object]) -> Sequence[Any]:
        assert session is not None
        self.statements += 1
        row = self._select(session, columns, keys)
        if row is None or len(row) != len(keys):
            raise StoreError(f"the lease session answered {row!r} to {len(keys)} lock calls")
        return row
