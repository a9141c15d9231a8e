"""What every SQL store shares below the statements: the tables' names, the DB-API cursor the
drivers have in common, and the :class:`Dialect` a database spells the shared statements in.

It sits below both ``_sql`` (the statements and the stores' base class) and ``_group`` (the group
commit), so neither needs the other to name a cursor or a dialect. A new SQL store is a
:class:`Dialect` and a ``SQLStore`` subclass over it (docs/stores.md, "Writing a store").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sagacity.errors import StoreError, StoreUnavailableError, StoreWriteRefusedError

JOURNAL = "side_effect_journal"
APPROVALS = "sagacity_approval_request"
EXPIRY = "sagacity_approval_expiry"
TRACE = "sagacity_approval_trace"
INDEX = "sagacity_saga_index"
INDEX_COUNTS = "sagacity_saga_counts"
INDEX_MARK = "sagacity_index_mark"
INDEX_DIRTY = "sagacity_index_dirty"
#: The append-only log the checkpointer orders entries in (``checkpoints/_log.py``).
LOG = "sagacity_log"
INDEX_COLUMNS = (
    "saga_id, status, entry_count, started_at, updated_at, awaiting_approval, in_doubt, "
    "compensating, broken_at, broken_message, attention"
)
ENTRY_COLUMNS = "saga_id, seq, tool_name, phase, input, payload, timestamp, hash"
ENTRY_WIDTH = len(ENTRY_COLUMNS.split(","))
_ENTRY_ROW = "(" + ", ".join(["?"] * ENTRY_WIDTH) + ")"


class Cursor(Protocol):
    """The DB-API cursor subset the drivers share."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> Sequence[Any]: ...


def _never(exc: BaseException) -> bool:
    return False


@dataclass(frozen=True, eq=False)
class Dialect:
    """How one database spells what the shared statements need, and what its driver's errors mean."""

    #: The database as messages name it ("SQLite", "PostgreSQL", "MariaDB/MySQL").
    label: str
    #: The driver's base error classes: only these are classified (anything else is a bug).
    errors: tuple[type[Exception], ...]
    #: Whether this driver error is the connection or server failing: the outcome of what ran may
    #: be unknown and a retry on a fresh connection may succeed (``StoreUnavailableError``).
    unavailable: Callable[[BaseException], bool]
    #: Whether this driver error is a primary key already taken (the statement wrote nothing).
    taken: Callable[[BaseException], bool] = _never
    #: Whether this driver error is the database rolling the statement's transaction back to
    #: resolve a conflict with a concurrent one (InnoDB's deadlock; a Galera node's certification
    #: failure at commit, when a transaction on another node wrote the same key first): nothing
    #: was written and the connection is fine. An insert that meets one lost a race, as one that
    #: meets a taken key did (``lost``); any other statement raises ``StoreUnavailableError``,
    #: which the callers that may run it again retry.
    conflict: Callable[[BaseException], bool] = _never
    #: Whether this unavailable error is the database failing to write, not the connection
    #: (``StoreWriteRefusedError``): a full disk.
    refused: Callable[[BaseException], bool] = _never
    #: The driver's parameter marker.
    placeholder: str = "?"
    #: ``INSERT ... ON CONFLICT (key) DO NOTHING [RETURNING]`` (SQLite, PostgreSQL). Without it
    #: (MariaDB, MySQL) an insert meeting a taken key fails with the error ``taken`` names, and
    #: upserts are ``ON DUPLICATE KEY UPDATE``.
    on_conflict: bool = True

    def lost(self, exc: BaseException) -> bool:
        """Whether an insert that raised this wrote nothing because another writer won: its key
        was taken, or its transaction conflicted with a concurrent one and was rolled back. The
        journal re-reads the tail and tries again (an append) or decides again (a decision)."""
        return self.taken(exc) or self.conflict(exc)

    def sql(self, statement: str) -> str:
        """A statement written with ``?`` in this driver's parameter marker."""
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    @functools.cache  # noqa: B019 - dialects are a few module constants, never freed
    def insert_rows(self, rows: int, *, skip_taken: bool = False) -> str:
        """A multi-row INSERT of ``rows`` journal rows, with ``?`` placeholders.

        Plain, it fails whole (writing nothing) if any key is taken. With ``skip_taken`` (only
        where ``on_conflict``) it skips the taken keys instead and returns the keys it wrote.
        """
        sql = f"INSERT INTO {JOURNAL} ({ENTRY_COLUMNS}) VALUES {', '.join([_ENTRY_ROW] * rows)}"
        if skip_taken:
            if not self.on_conflict:
                raise StoreError(f"{self.label}: an insert cannot skip taken keys")
            sql += " ON CONFLICT (saga_id, seq) DO NOTHING RETURNING saga_id, seq"
        return sql

    def insert_entry(self) -> str:
        """The one-row append, ``?`` placeholders. Where the database can, it skips a taken key
        (``rowcount`` 0: no aborted transaction, no error in the server's log, one round trip);
        elsewhere it fails with the error ``taken`` recognises."""
        sql = f"INSERT INTO {JOURNAL} ({ENTRY_COLUMNS}) VALUES {_ENTRY_ROW}"
        return sql + " ON CONFLICT (saga_id, seq) DO NOTHING" if self.on_conflict else sql

    def upsert(
        self, table: str, keys: Sequence[str], columns: Sequence[str], *, add: Sequence[str] = ()
    ) -> str:
        """Insert a row of ``keys`` + ``columns``, or on a taken key set ``columns`` to the new
        values (those in ``add``: the old value plus the new)."""
        names = [*keys, *columns]
        sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
        if self.on_conflict:
            sets = (
                f"{c} = {table}.{c} + excluded.{c}" if c in add else f"{c} = excluded.{c}" for c in columns
            )
            return sql + f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET " + ", ".join(sets)
        # VALUES(c) is the row that was to be inserted (MariaDB's only spelling; MySQL 8 still
        # takes it).
        sets = (f"{c} = {c} + VALUES({c})" if c in add else f"{c} = VALUES({c})" for c in columns)
        return sql + "ON DUPLICATE KEY UPDATE " + ", ".join(sets)

    def translate(self, exc: BaseException, where: str | None = None) -> StoreError:
        """The ``sagacity.errors`` form of a driver error; ``where`` names the database (no
        password) in the message of an unavailable one."""
        if self.unavailable(exc):
            at = "" if where is None else f" at {where}"
            kind = StoreWriteRefusedError if self.refused(exc) else StoreUnavailableError
            return kind(f"{self.label}{at}: {exc}")
        return StoreError(f"{self.label}: {exc}")
