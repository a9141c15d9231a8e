"""The embedded default: one SQLite file, durable, many threads and processes.

Choices, and what breaks without each:

- WAL: readers never block the writer. Without it, ``verify`` on a big journal would stall tools.
- ``synchronous=FULL``: every commit is fsynced before it returns. ``NORMAL`` in WAL mode is ~6x
  faster and loses the last commits on power loss, so a journaled INTENT could vanish after its
  tool ran. Durable means durable.
- ``busy_timeout``: writers in other processes queue instead of failing with "database is locked".
- ``BEGIN IMMEDIATE`` for multi-statement work: takes the write lock up front; a deferred
  transaction that upgrades to a writer can fail with SQLITE_BUSY without waiting.
- Group commit (``stores/_group.py``): SQLite has one writer at a time and each commit pays one
  fsync. Appends arriving from several threads at once are written by one of them (the leader) as
  one multi-row INSERT, one transaction, and none returns before that statement's commit has
  returned, so no caller is told an INTENT is journaled before it is durable. A lone writer leads
  its own batch of one and pays no handoff.
- Connections are lent per operation from a pool, not kept per thread: with one per thread, a
  program that runs each saga in a fresh thread leaked a connection (two open files) per thread,
  and each paid ~0.3 ms to open it and re-prepare its statements. The group commit writes on its
  own connection, whose statement cache holds every batch size.
- Triggers refuse UPDATE and DELETE on the journal (see ``sql/sqlite.sql``).
- Saga leases are POSIX record locks on a file beside the database (``<db>-sagacity-lease``,
  see ``stores/_lease.py``): the kernel drops them when their process dies. Liveness leases
  (a saga running) are shared locks on ``<db>-sagacity-live``, probed with ``F_GETLK``.
- A database this process cannot write (an auditor's copy: file 444, folder 555) is opened
  read-only: ``mode=ro`` when a ``-wal`` sits beside it (its commits are read through the
  ``-shm``), else ``immutable=1`` (no ``-wal``: no connection is writing it, and a read-only
  WAL database in a read-only folder cannot be opened any other way). Verify and export read
  it; anything that writes gets a ``StoreError`` saying the database is read-only here.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from sagacity.errors import ConfigurationError, StoreError
from sagacity.model import Entry
from sagacity.stores._deadline import time_left
from sagacity.stores._dialect import INDEX_MARK, JOURNAL, Cursor, Dialect
from sagacity.stores._group import GroupCommit, RowWriter
from sagacity.stores._lease import FileLeases, FileLiveness
from sagacity.stores._sql import SQLStore, load_ddl, split_statements
from sagacity.stores.base import Capability

#: The name of the saga index's mark: the highest journal rowid folded.
_ROWID_MARK = "journal_rowid"

__all__ = ["SQLiteStore"]

_WRITER = "writer"


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


def _unavailable(exc: BaseException) -> bool:
    """Locked out past busy_timeout, or the file could not be opened or written: try again."""
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "unable to open" in str(exc) or "disk I/O" in str(exc)
    )


def _refused(exc: BaseException) -> bool:
    """SQLITE_IOERR and its extended codes (a write the file system refused: a full disk, a
    file-size limit): the file opened and reads, but this write failed."""
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == sqlite3.SQLITE_IOERR


# SQLITE_CONSTRAINT_PRIMARYKEY and SQLITE_CONSTRAINT_UNIQUE: a key taken, nothing written.
_KEY_TAKEN = (1555, 2067)

SQLITE = Dialect(
    "SQLite",
    (sqlite3.Error,),
    unavailable=_unavailable,
    refused=_refused,
    taken=lambda exc: getattr(exc, "sqlite_errorcode", None) in _KEY_TAKEN,
)


def _read_only(path: str, why: str) -> StoreError:
    return StoreError(
        f"SQLite journal {path} cannot be written by this process ({why}): its file or folder "
        "is read-only here (verify and export read a read-only copy all the same)"
    )


def _cannot_write(exc: BaseException) -> bool:
    """SQLITE_READONLY: the file, its folder or the connection (``mode=ro``) refuses writes."""
    return isinstance(exc, sqlite3.OperationalError) and "readonly database" in str(exc)


def read_only_uri(path: str) -> str | None:
    """The URI to read a database this process may not write, or None if it may (or the file is
    not there yet). Writing needs the file writable, and the folder too unless the ``-wal`` and
    ``-shm`` are there and writable (SQLite creates them beside the file).

    With a ``-wal`` beside it, ``mode=ro`` reads the commits it holds (SQLite needs its ``-shm``
    or a writable folder for that); without one, ``immutable=1``: no connection is writing the
    file (a WAL database's last connection removes its ``-wal``), and SQLite cannot open a
    read-only WAL database in a read-only folder any other way.
    """
    target = Path(path)
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if not target.is_file() or (
        os.access(target, os.W_OK)
        and (os.access(target.parent, os.W_OK) or (os.access(wal, os.W_OK) and os.access(shm, os.W_OK)))
    ):
        return None
    holds_commits = wal.exists() and (wal.stat().st_size > 0 or shm.exists())
    flag = "mode=ro" if holds_commits else "immutable=1"
    return f"{target.resolve().as_uri()}?{flag}"


class SQLiteStore(SQLStore):
    """A journal in one SQLite file (``sqlite:///path``)."""

    dialect = SQLITE
    capabilities = SQLStore.capabilities | {Capability.STAMPED_INSERT, Capability.LIVENESS}

    def __init__(self, url: str, *, busy_timeout_ms: int = 30_000, group_commit: bool = True):
        self.url = url
        self.path = path_from_url(url)
        self._busy_timeout_ms = busy_timeout_ms
        self._group_commit = group_commit
        # Connections are borrowed per operation, not owned per thread: a thread that ends leaves
        # nothing open, and a few warm connections serve any number of short-lived threads.
        # Only idle connections are held here; ``close`` closes those, and a borrowed one is
        # closed when it comes back (closing it under its user crashes the sqlite3 module).
        self._idle: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        # The group commit's own connection, parked here between batches as its one cursor (a
        # lone row reuses it; ``conn.execute`` makes a cursor per statement): only the leader of
        # the moment uses it, so its statement cache keeps every batch size prepared. Taken and
        # closed with ``dict.pop``, which is atomic: one of the leader and ``close`` gets it,
        # never both, and the append path pays no lock for it.
        self._parked: dict[str, sqlite3.Cursor] = {}
        self._closed = False
        self._group = GroupCommit.over(RowWriter(SQLITE, self._error), self._take_writer, self._give_writer)
        parent = Path(self.path).parent
        if not parent.exists():
            raise ConfigurationError(f"directory {parent} for SQLite journal {self.path} does not exist")
        self._leases: FileLeases | None = None
        self._liveness: FileLiveness | None = None
        #: Liveness holders per saga through this store object (``live_elsewhere``).
        self._live_here: dict[str, int] = {}
        #: The URI this store reads through once its database proved not writable here.
        self._read_only_uri: str | None = None
        self._mode_known = False
        # (a stamp's whole seconds, their text up to the '.'): insert_entry_at's cache.
        self._second: tuple[str, str] = ("", "")

    @contextmanager
    def lease(self, saga_id: str, *, wait: bool) -> Iterator[bool]:
        if self._read_only_uri is not None:  # whatever would hold the lease must write
            raise _read_only(self.path, "opened read-only")
        if self._leases is None:
            self._leases = FileLeases.for_database(self.path)
        with self._leases.hold(saga_id, wait=wait) as got:
            yield got

    def _live(self) -> FileLiveness:
        """The process's liveness file of this database, looked up once (a ``realpath`` each)."""
        if self._liveness is None:
            self._liveness = FileLiveness.for_database(self.path)
        return self._liveness

    def hold_live(self, saga_id: str) -> None:
        if self._read_only_uri is not None:  # a saga run on a read-only copy would write it
            raise _read_only(self.path, "opened read-only")
        self._live().leases.hold(saga_id)
        with self._connections_lock:
            self._live_here[saga_id] = self._live_here.get(saga_id, 0) + 1

    def release_live(self, saga_id: str) -> None:
        with self._connections_lock:
            left = self._live_here.pop(saga_id, 0) - 1
            if left > 0:
                self._live_here[saga_id] = left
        self._live().leases.release(saga_id)

    def live_among(self, saga_ids: Sequence[str]) -> set[str]:
        return self._live().live_among(saga_ids)

    def live_elsewhere(self, saga_ids: Sequence[str]) -> set[str]:
        liveness = self._live()
        with self._connections_lock:
            mine = {sid: self._live_here.get(sid, 0) for sid in saga_ids}
        # Another store on this file in this process counts in the process's holders, not in mine.
        here = {sid for sid in saga_ids if liveness.leases.users(sid) > mine[sid]}
        return here | liveness.in_other_processes([sid for sid in saga_ids if sid not in here])

    # -- connections ---------------------------------------------------------------------------
    def _open(self, busy_timeout_ms: int | None = None) -> sqlite3.Connection:
        busy = self._busy_timeout_ms if busy_timeout_ms is None else busy_timeout_ms
        try:
            if not self._mode_known:  # the first open: may this process write the file?
                self._read_only_uri = read_only_uri(self.path)
                self._mode_known = True
            if self._read_only_uri is not None:
                return self._connect(self._read_only_uri, busy)
            return self._connect(self.path, busy, "PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    def _connect(self, target: str, busy: int, *pragmas: str) -> sqlite3.Connection:
        """A connection to ``target`` (a path, or a ``file:`` URI) set up with ``pragmas``."""
        # isolation_level=None: autocommit; we issue BEGIN ourselves where we want one.
        conn = sqlite3.connect(
            target,
            isolation_level=None,
            check_same_thread=False,
            timeout=busy / 1000,
            # Room for the group commit's multi-row INSERTs (one per batch size) beside the
            # rest; with the default 128 they would evict each other and be re-prepared.
            cached_statements=1024,
            uri=target.startswith("file:"),
        )
        try:
            for pragma in (f"PRAGMA busy_timeout = {int(busy)}", *pragmas):
                conn.execute(pragma)
        except BaseException:
            conn.close()
            raise
        return conn

    def _error(self, exc: BaseException) -> StoreError:
        """The store's one translation of driver errors. A write refused because the journal is
        read-only here says so; a read-only copy whose ``-wal`` SQLite cannot read
        (no ``-shm`` beside it, a read-only folder) is told how to make a readable copy."""
        if self._read_only_uri is not None and "unable to open" in str(exc):
            return StoreError(
                f"SQLite journal {self.path} is read-only here and has a -wal file beside it "
                f"(commits not yet in the main file) but SQLite cannot read it ({exc}): its -shm "
                "is missing and the folder is read-only. Copy the -shm with it, or make the copy "
                "with `sqlite3 SOURCE '.backup COPY'`, which holds every commit in one file"
            )
        if _cannot_write(exc):
            return _read_only(self.path, str(exc))
        return SQLITE.translate(exc)

    def _borrow(self, busy_timeout_ms: int | None = None) -> sqlite3.Connection:
        """An idle connection, or a new one (waiting ``busy_timeout_ms`` for locks if given)."""
        with self._connections_lock:
            self._refuse_if_closed()
            conn = self._idle.pop() if self._idle else None  # the most recently used: caches warm
        if conn is None:
            return self._open(busy_timeout_ms)
        if busy_timeout_ms is not None:
            try:
                conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
            except sqlite3.Error as exc:
                conn.close()
                raise self._error(exc) from exc
        return conn

    def _give_back(self, conn: sqlite3.Connection) -> None:
        with self._connections_lock:
            # A transaction that could not be ended (a failed ROLLBACK) must not be lent on.
            if not self._closed and not conn.in_transaction:
                self._idle.append(conn)
                return
        conn.close()

    @contextmanager
    def _cursor(self, transaction: bool = False) -> Iterator[Cursor]:
        # A read under a caller's deadline (an HTTP request, stores/_deadline.py) waits for a
        # lock no longer than the time left, instead of the whole busy_timeout.
        left = time_left()
        conn = self._borrow(None if left is None else max(0, min(self._busy_timeout_ms, int(left * 1000))))
        cur = conn.cursor()
        try:
            if not transaction:
                yield cur
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield cur
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        finally:
            cur.close()  # ends the statement (and its read snapshot) before another thread borrows
            if left is not None and not self._reset_busy_timeout(conn):
                conn.close()
            else:
                self._give_back(conn)

    def _reset_busy_timeout(self, conn: sqlite3.Connection) -> bool:
        """Put back the store's own busy_timeout on a connection; False if it cannot be."""
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        except sqlite3.Error:
            return False
        return True

    def _ts_out(self, moment: datetime) -> str:
        # 'YYYY-MM-DD HH:MM:SS.ffffff' with a four-digit year, always: strftime's %Y, used before
        # for years below 1000, wrote '999-...', which no read could parse back. An aware
        # datetime is stored as its wall time, as strftime did.
        if moment.tzinfo is not None:
            moment = moment.replace(tzinfo=None)
        return moment.isoformat(" ", "microseconds")

    def _ts_in(self, value: Any) -> datetime:
        # fromisoformat reads 'YYYY-MM-DD HH:MM:SS.ffffff' exactly as strptime would,
        # at a twentieth of the cost: it dominated the time to verify a long saga.
        return datetime.fromisoformat(value)

    def has_table(self, name: str) -> bool:
        with self._cursor() as cur:
            cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
            return cur.fetchone() is not None

    def init_schema(self) -> None:
        with self._cursor() as cur:
            if self._read_only_uri is not None:
                # Nothing can be created in a read-only copy; reading it needs the journal only.
                cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (JOURNAL,))
                if cur.fetchone() is None:
                    raise StoreError(
                        f"SQLite database {self.path} is read-only here and has no {JOURNAL} "
                        "table: it is not a Sagacity journal, and none can be created in it"
                    )
                return
        # One IMMEDIATE transaction: processes starting at once on an empty file queue on the
        # write lock (busy_timeout) and the later ones find every object already there.
        with self._cursor(transaction=True) as cur:
            for statement in split_statements(load_ddl("sqlite")):
                cur.execute(statement)

    # -- the saga index: caught up from the journal's rowid -------------------------------------
    def _index_stale(self) -> bool:
        with self._cursor() as cur:
            cur.execute(
                f"SELECT (SELECT max(rowid) FROM {JOURNAL}), "
                f"(SELECT value FROM {INDEX_MARK} WHERE name = '{_ROWID_MARK}')"
            )
            top, mark = cur.fetchone()
        return bool((top or 0) != (mark or 0))

    def _index_changes(self, cur: Cursor, batch: int) -> tuple[object, list[str]]:
        # Rows are only appended (triggers refuse UPDATE and DELETE), each with a rowid above every
        # earlier one: the rows past the mark are exactly those the index has not seen. A rowid
        # top below the mark means the file was rewritten behind the library's back: start over.
        cur.execute(f"SELECT value FROM {INDEX_MARK} WHERE name = '{_ROWID_MARK}'")
        found = cur.fetchone()
        mark = 0 if found is None else int(found[0])
        cur.execute(f"SELECT max(rowid) FROM {JOURNAL}")
        top = cur.fetchone()[0] or 0
        if top < mark:
            self._index_forget(cur)
            mark = 0
        cur.execute(
            f"SELECT rowid, saga_id FROM {JOURNAL} WHERE rowid > ? ORDER BY rowid LIMIT ?", (mark, batch * 8)
        )
        sagas: dict[str, None] = {}
        for rowid, saga_id in cur.fetchall():
            if saga_id not in sagas and len(sagas) == batch:
                break
            sagas[saga_id] = None
            mark = rowid
        return mark, list(sagas)

    def _index_lock(self, cur: Cursor) -> None:
        """Nothing to take: ``BEGIN IMMEDIATE`` already holds the database's one write lock."""

    def _index_consume(self, cur: Cursor, token: object) -> None:
        cur.execute(SQLITE.upsert(INDEX_MARK, ("name",), ("value",)), (_ROWID_MARK, token))

    def _index_forget(self, cur: Cursor) -> None:
        self._drop_index_rows(cur)
        self._index_consume(cur, 0)

    # -- group commit ----------------------------------------------------------------------------
    def insert_entry_at(self, entry: Entry, stamp: str) -> bool:
        """``insert_entry`` for an entry the journal stamped ``stamp`` (its hashed ``ts``:
        "<epoch seconds>.<6 digits>").

        Its text is its second's, formatted once a second, and the stamp's six digits: an
        append's ``datetime.isoformat`` was the largest code it ran between two fsyncs (printf's),
        and right after an fsync every line of code is a cache miss (BENCHMARKS.md, "Overhead,
        closed").
        """
        if not self._group_commit:
            return super().insert_entry(entry)
        seconds = stamp[:-7]
        second = self._second
        if second[0] != seconds:
            # What _ts_out makes of this second, up to and with its '.'.
            second = self._second = (seconds, self._ts_out(entry.timestamp)[:-6])
        return self._group.insert(entry, self._entry_params(entry, second[1] + stamp[-6:]))

    # -- the group commit's writer connection --------------------------------------------------
    def _take_writer(self) -> sqlite3.Cursor:
        """The writer's cursor, taken from where it is parked (opened if none is)."""
        self._refuse_if_closed()
        return self._parked.pop(_WRITER, None) or self._open().cursor()

    def _give_writer(self, cur: sqlite3.Cursor, lost: bool) -> None:
        """Put the writer back for the next leader (or close it, if ``close`` ran meanwhile); a
        SQLite connection is never lost, only locked out for a while."""
        self._parked[_WRITER] = cur
        if self._closed:  # close() ran meanwhile and found no writer parked
            self._close_writer()

    def close(self) -> None:
        """Close the idle connections now; one in use is closed when its operation ends."""
        with self._connections_lock:
            self._closed = True
            connections, self._idle = self._idle, []
        for conn in connections:
            conn.close()
        self._close_writer()

    def _close_writer(self) -> None:
        cur = self._parked.pop(_WRITER, None)
        if cur is not None:
            cur.connection.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r})"
