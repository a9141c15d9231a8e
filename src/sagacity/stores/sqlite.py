"""The embedded default: one SQLite file, durable, many threads and processes.

Choices, and what breaks without each:

- WAL: readers never block the writer. Without it, ``verify`` on a big journal would stall tools.
- ``synchronous=FULL``: every commit is fsynced before it returns. ``NORMAL`` in WAL mode is ~6x
  faster and loses the last commits on power loss, so a journaled INTENT could vanish after its
  tool ran. Durable means durable.
- ``busy_timeout``: writers in other processes queue instead of failing with "database is locked".
- ``BEGIN IMMEDIATE`` for multi-statement work: takes the write lock up front; a deferred
  transaction that upgrades to a writer can fail with SQLITE_BUSY without waiting.
- Group commit: SQLite has one writer at a time and each commit pays one fsync. Appends arriving
  from several threads at once are written by one of them (the leader) in a single transaction,
  and none returns before that transaction's COMMIT has returned, so no caller is told an INTENT
  is journaled before it is durable. A lone writer leads its own batch of one and pays no handoff.
- Triggers refuse UPDATE and DELETE on the journal (see ``sql/sqlite.sql``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sagacity.errors import ConfigurationError, StoreError, StoreUnavailableError
from sagacity.model import Entry
from sagacity.stores._sql import Cursor, SQLStore, load_ddl, split_statements

__all__ = ["SQLiteStore"]

_TS_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def path_from_url(url: str) -> str:
    """``sqlite:///rel/path`` -> ``rel/path``; ``sqlite:////abs/path`` -> ``/abs/path``."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise ConfigurationError(
            f"not a SQLite URL: {url!r}; use sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    path = url[len(prefix) :]
    if path == ":memory:":
        raise ConfigurationError(
            "sqlite:///:memory: would give every thread its own empty database; use memory:// "
            "for an in-process journal"
        )
    return path


def _translate(exc: sqlite3.Error) -> StoreError:
    message = f"SQLite: {exc}"
    if isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "unable to open" in str(exc) or "disk I/O" in str(exc)
    ):
        return StoreUnavailableError(message)
    return StoreError(message)


@dataclass
class _PendingInsert:
    entry: Entry
    done: bool = False
    inserted: bool = False
    error: BaseException | None = None
    params: tuple[Any, ...] = field(default=())


class SQLiteStore(SQLStore):
    """A journal in one SQLite file (``sqlite:///path``)."""

    def __init__(self, url: str, *, busy_timeout_ms: int = 30_000, group_commit: bool = True):
        self.url = url
        self.path = path_from_url(url)
        self._busy_timeout_ms = busy_timeout_ms
        self._group_commit = group_commit
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closed = False
        # group commit state
        self._batch_cond = threading.Condition()
        self._pending: list[_PendingInsert] = []
        self._leader_active = False
        parent = Path(self.path).parent
        if not parent.exists():
            raise ConfigurationError(f"directory {parent} for SQLite journal {self.path} does not exist")

    # -- connections ---------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise StoreError(f"store {self.url} is closed")
        try:
            # isolation_level=None: autocommit; we issue BEGIN ourselves where we want one.
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=self._busy_timeout_ms / 1000
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise _translate(exc) from exc
        self._local.conn = conn
        with self._connections_lock:
            self._connections.append(conn)
        return conn

    @contextmanager
    def _cursor(self, transaction: bool = False) -> Iterator[Cursor]:
        conn = self._connection()
        try:
            if not transaction:
                yield conn.cursor()
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn.cursor()
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _translate(exc) from exc

    def _ts_out(self, moment: datetime) -> str:
        return moment.strftime(_TS_FORMAT)

    def _ts_in(self, value: Any) -> datetime:
        # fromisoformat reads 'YYYY-MM-DD HH:MM:SS.ffffff' exactly as strptime(_TS_FORMAT) does,
        # at a twentieth of the cost: it dominated the time to verify a long saga.
        return datetime.fromisoformat(value)

    def init_schema(self) -> None:
        # One IMMEDIATE transaction: processes starting at once on an empty file queue on the
        # write lock (busy_timeout) and the later ones find every object already there.
        with self._cursor(transaction=True) as cur:
            for statement in split_statements(load_ddl("sqlite")):
                cur.execute(statement)

    # -- group commit ----------------------------------------------------------------------------
    def insert_entry(self, entry: Entry) -> bool:
        if not self._group_commit:
            return super().insert_entry(entry)
        request = _PendingInsert(entry, params=self._entry_params(entry))
        with self._batch_cond:
            self._pending.append(request)
            while self._leader_active and not request.done:
                self._batch_cond.wait()
            if request.done:
                return self._outcome(request)
            self._leader_active = True
            batch, self._pending = self._pending, []
        try:
            self._write_batch(batch)
        finally:
            with self._batch_cond:
                self._leader_active = False
                self._batch_cond.notify_all()
        return self._outcome(request)

    @staticmethod
    def _outcome(request: _PendingInsert) -> bool:
        if request.error is not None:
            raise request.error
        return request.inserted

    def _write_batch(self, batch: list[_PendingInsert]) -> None:
        sql = self.INSERT_ENTRY
        try:
            if len(batch) == 1:
                # The lone writer's path, without the generic cursor context manager: an
                # autocommit INSERT is its own durable transaction.
                try:
                    single = self._connection().execute(sql, batch[0].params)
                except sqlite3.Error as exc:
                    raise _translate(exc) from exc
                batch[0].inserted = single.rowcount == 1
            else:
                with self._cursor(transaction=True) as cur:
                    for request in batch:
                        cur.execute(sql, request.params)
                        request.inserted = cur.rowcount == 1
            for request in batch:
                request.done = True
            return
        except BaseException as exc:  # noqa: BLE001 - every waiter must be released
            if len(batch) == 1:
                batch[0].error, batch[0].done = exc, True
                return
        # The shared transaction rolled back: write each alone, so one bad row fails alone.
        for request in batch:
            self._write_batch([request])

    def close(self) -> None:
        self._closed = True
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r})"
