"""PostgreSQL through psycopg 3 and a connection pool (``pip install 'sagacity[postgres]'``).

Choices, and what breaks without each:

- Autocommit: an append is one ``INSERT ... ON CONFLICT DO NOTHING``, one round trip and one
  durable commit. Seq order is kept by the primary key, not by a lock: a writer whose cached
  tail was stale gets rowcount 0, re-reads the tail and retries (``sagacity._journal``).
  Wrapping the insert in BEGIN/tail read/COMMIT would cost ~2.4x the physical floor.
- Group commit on one writer connection (``stores/_group.py``), beside the pool that serves
  reads: appends from many threads at once are written by one of them as one multi-row
  ``INSERT ... ON CONFLICT DO NOTHING RETURNING saga_id, seq``, one round trip and one WAL flush
  per batch; ``RETURNING`` tells each caller whether its own row landed. With one append per
  connection instead, each append paid a round trip and the pool's checkout under the GIL, and
  on 2 cores that client CPU, not the database, capped appends/s below the raw driver's. A lone
  writer goes straight through (no linger), and skips the pool checkout too. Every batch runs
  on the writer's one reused cursor: a new cursor per statement (``conn.execute``) cost ~15 us of
  client CPU per append. That cursor is a ``RawCursor`` with ``$n`` placeholders: psycopg
  re-parses a ``%s`` query with over 50 parameters on every execute, which made an 8-row batch
  take 460 us where a 1-row one took 290. The store holds one connection more than the pool's
  ``max_connections``.
- ``synchronous_commit`` is left as the server has it (``on`` by default): never turned off.
- ``init_schema`` holds a transaction-scoped advisory lock: two processes running
  ``CREATE TABLE IF NOT EXISTS`` at once on an empty database can otherwise fail with a
  unique violation on ``pg_type``.
- Saga leases are session-level advisory locks on one dedicated connection (so holders never
  starve the pool their own work needs), taken with ``pg_try_advisory_lock`` and polled while
  another process holds them; PostgreSQL drops them with a dead session. The store holds one
  more connection once a saga has run or compensated here.
- Liveness leases (a saga running in this process) are *shared* session-level advisory locks on
  that same lease connection, read back by any process from ``pg_locks``; a new lease session
  takes them again.
- The lease session's calls are batched as appends are (``GroupCommit``), as on MariaDB: the
  lock and unlock calls of threads that wait for the session meanwhile go as the columns of one
  ``SELECT``, one round trip. Each call alone cost a round trip under the session's lock, so 8
  sagas starting and ending at once queued 16 round trips behind each other.
- A dead connection (server restart, ``pg_terminate_backend``) raises ``StoreUnavailableError``
  after the pool has been told to drop dead idle connections; the journal retries, and resolves
  an insert whose commit it never heard about by reading the row back. A batch whose statement
  met a dead writer connection gives every one of its callers that error (each resolves its own
  row), and the next batch opens a new connection.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from sagacity.errors import ConfigurationError, StoreError, StoreUnavailableError
from sagacity.model import Entry
from sagacity.stores._deadline import time_left
from sagacity.stores._dialect import (
    APPROVALS,
    EXPIRY,
    INDEX,
    INDEX_COUNTS,
    INDEX_DIRTY,
    JOURNAL,
    LOG,
    TRACE,
    Cursor,
    Dialect,
)
from sagacity.stores._group import GroupCommit, RowWriter
from sagacity.stores._lease import LiveLeases, SessionLeases, lease_key, live_key
from sagacity.stores._lease_session import LeaseSession
from sagacity.stores._sql import SQLStore, load_ddl, numbered
from sagacity.stores._url import safe_url
from sagacity.stores.base import Capability

__all__ = ["PostgresStore", "safe_url"]

#: The lease session's calls, as ``SELECT`` columns (``LeaseSession`` sends queued ones together):
#: a saga lease taken without waiting and given back (each says whether it did), a liveness
#: lease taken and given back (shared, so taking never fails: it answers nothing).
_TRY_LOCK = "pg_try_advisory_lock(?)"
_UNLOCK = "pg_advisory_unlock(?)"
_LIVE_LOCK = "pg_advisory_lock_shared(?)"
_LIVE_UNLOCK = "pg_advisory_unlock_shared(?)"
#: Which of the given liveness keys some session of this database holds (a bigint advisory
#: lock shows in pg_locks as classid = its high 32 bits, objid = its low 32, objsubid = 1),
#: by a session other than the given backend pid (-1: any).
_LIVE_HELD = (
    "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks "
    "WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND ((classid::bigint << 32) | objid::bigint) = ANY(%s) AND pid <> %s"
)

log = logging.getLogger("sagacity.stores")
# An arbitrary constant: the advisory lock key that serialises schema creation.
_SCHEMA_LOCK_KEY = 0x5A6AC17
# With the key above, the two-key advisory lock that serialises catch-ups of the saga index.
_INDEX_LOCK_KEY = 1

POSTGRES = Dialect(
    "PostgreSQL",
    (psycopg.Error, PoolTimeout),
    # A dead or unreachable server, or no pooled connection in time.
    unavailable=lambda exc: isinstance(exc, psycopg.OperationalError | PoolTimeout),
    taken=lambda exc: isinstance(exc, psycopg.errors.UniqueViolation),
    placeholder="%s",
)


def _url_connect_timeout(url: str) -> float | None:
    """The URL's own positive ``connect_timeout`` in seconds, if it sets one (0 is libpq's "forever")."""
    try:
        value = conninfo_to_dict(url).get("connect_timeout")
    except psycopg.Error:
        return None
    try:
        seconds = float(str(value)) if value is not None else 0.0
    except ValueError:
        raise ConfigurationError(f"connect_timeout in {safe_url(url)!r} is not a number of seconds") from None
    return seconds if seconds > 0 else None


class PostgresStore(SQLStore):
    """A journal in PostgreSQL (``postgresql://user@host/db``)."""

    dialect = POSTGRES
    capabilities = SQLStore.capabilities | {Capability.APPEND_ONLY_GRANT, Capability.LIVENESS}

    def __init__(
        self,
        url: str,
        *,
        min_connections: int = 1,
        max_connections: int = 10,
        connect_timeout: float = 10.0,
        reconnect_timeout: float = 10.0,
        group_commit: bool = True,
    ) -> None:
        """``connect_timeout`` (or the URL's own ``connect_timeout``, which wins): seconds one
        connection attempt may take, and one read waits for an unreachable database, retries
        included, unless the caller's wait limit is shorter (``stores/_deadline.py``).
        ``reconnect_timeout``: seconds the pool keeps retrying a lost connection in the background
        (backing off 1, 2, 4 s ...) before it stops; the next read then connects at once, so a
        database that comes back is used within seconds rather than after a backoff of minutes."""
        if connect_timeout <= 0 or reconnect_timeout <= 0:
            raise ConfigurationError("connect_timeout and reconnect_timeout must be positive seconds")
        self.url = url
        in_url = _url_connect_timeout(url)
        # libpq takes whole seconds, at least 2 (it reads 1 as 2); a URL's own value wins.
        self._connect_kwargs: dict[str, Any] = (
            {} if in_url is not None else {"connect_timeout": max(2, round(connect_timeout))}
        )
        self._connect_timeout = connect_timeout if in_url is None else max(2.0, in_url)
        #: How long one read waits for an unreachable database, retries included (``Journal.read``).
        self.wait_limit = self._connect_timeout
        self._reconnect_timeout = reconnect_timeout
        self._group_commit = group_commit
        # Skipping taken keys from the start: here the round trip, not the statement, is the cost.
        rows = RowWriter(POSTGRES, self._translate, render=numbered, optimistic=False)
        self._group = GroupCommit.over(rows, self._writer_cursor_of, self._give_writer)
        # Only the group commit's leader of the moment touches it; the lock guards open/close.
        self._writer: psycopg.Connection[Any] | None = None
        # The writer's one cursor, reused by every batch: ``conn.execute`` builds a new cursor
        # (and its adapters map) per statement, ~15 us of client CPU on every append.
        self._writer_cursor: psycopg.RawCursor[Any] | None = None
        self._writer_lock = threading.Lock()
        self._closed = False
        self._leases = SessionLeases(
            lambda saga_id: self._try_lease(lease_key(saga_id)),
            lambda saga_id: self._lease_call(_UNLOCK, lease_key(saga_id)),
        )
        # The lease session is one reused cursor with ``$n`` placeholders, as the writer's is: a
        # new cursor and a ``%s`` query per call cost ~20 us of client CPU each.
        self._lease_session: LeaseSession[psycopg.RawCursor[Any]] = LeaseSession(
            POSTGRES,
            self._open_lease_session,
            _lease_select,
            lambda cur: cur.connection.close(),
            retake=lambda: (_LIVE_LOCK, self._live.tokens()),
            translate=self._translate,
            refuse_if_closed=self._refuse_if_closed,
            alive=lambda cur: not cur.connection.closed,
        )
        #: The lease session's backend pid (0: none open yet), whose locks ``live_elsewhere`` skips.
        self._lease_pid = 0
        self._live = LiveLeases(self._live_key, self._take_live, self._drop_live)
        self._live_scope: str | None = None
        try:
            self._pool = ConnectionPool(
                url,
                min_size=min_connections,
                max_size=max_connections,
                kwargs={"autocommit": True, **self._connect_kwargs},
                timeout=connect_timeout,
                reconnect_timeout=reconnect_timeout,
                name="sagacity",
                open=False,
            )
            self._pool.open(wait=False)
        except psycopg.Error as exc:
            raise StoreUnavailableError(f"PostgreSQL at {safe_url(url)}: {exc}") from exc

    def _pool_wait(self) -> float:
        """How long to wait for a pooled connection: ``connect_timeout``, or less if the running
        read's deadline is nearer (an HTTP request that must answer within seconds)."""
        left = time_left()
        if left is None:
            return self._connect_timeout
        if left <= 0:
            raise StoreUnavailableError(f"PostgreSQL at {safe_url(self.url)}: no time left to wait for it")
        return min(self._connect_timeout, left)

    @contextmanager
    def _cursor(self, transaction: bool = False) -> Iterator[Cursor]:
        try:
            with self._pool.connection(timeout=self._pool_wait()) as conn:
                if transaction:
                    with conn.transaction():
                        yield conn.cursor()
                else:
                    yield conn.cursor()
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: BaseException) -> StoreError:
        if self._closed or isinstance(exc, PoolClosed):
            # Not StoreUnavailableError: retrying cannot help, and the journal would back off
            # for seconds before giving up.
            return StoreError(f"store {safe_url(self.url)} is closed")
        if isinstance(exc, PoolTimeout):
            return StoreUnavailableError(
                f"PostgreSQL at {safe_url(self.url)}: no connection ({exc}; is the server up and reachable?)"
            )
        if POSTGRES.unavailable(exc):
            # The pool drops the connection that failed; have it test the idle ones too, so the
            # retry does not pick another connection the same server restart killed.
            self._pool.check()
        return POSTGRES.translate(exc, safe_url(self.url))

    # -- the saga index: caught up from the notes the journal's triggers leave -----------------
    def _index_stale(self) -> bool:
        return self._notes_waiting()

    def _index_changes(self, cur: Cursor, batch: int) -> tuple[object, list[str]]:
        # Catch-ups queue on one advisory lock (two-key form: apart from the saga leases' keys),
        # so each reads the journal after the one before it wrote. Writers never wait on it.
        self._index_lock(cur)
        # The notes taken are those committed before this statement; their sagas' rows are then
        # visible to the journal read that follows (a new snapshot per statement). A note a
        # writer commits meanwhile stays for the next catch-up; the deletion commits only with
        # the folded rows, so a catch-up that fails half-way loses no note.
        cur.execute(
            f"DELETE FROM {INDEX_DIRTY} WHERE ctid IN (SELECT ctid FROM {INDEX_DIRTY} LIMIT %s) "
            "RETURNING saga_id",
            (batch * 4,),
        )
        notes = cur.fetchall()
        return None, list(dict.fromkeys(note[0] for note in notes))

    def _index_consume(self, cur: Cursor, token: object) -> None:
        """Nothing more: the notes were deleted as they were taken, in this transaction."""

    def _index_lock(self, cur: Cursor) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_SCHEMA_LOCK_KEY, _INDEX_LOCK_KEY))

    def _index_forget(self, cur: Cursor) -> None:
        self._index_lock(cur)
        self._drop_index_rows(cur)
        cur.execute(f"DELETE FROM {INDEX_DIRTY}")
        cur.execute(f"INSERT INTO {INDEX_DIRTY} (saga_id) SELECT DISTINCT saga_id FROM {JOURNAL}")

    def lease(self, saga_id: str, *, wait: bool) -> AbstractContextManager[bool]:
        return self._leases.hold(saga_id, wait=wait)

    def _try_lease(self, key: int) -> bool:
        """``pg_try_advisory_lock`` on the lease session, reconnecting for up to
        ``reconnect_timeout`` seconds when that session is lost (a failover, a terminated
        backend): a dead session holds no lock, so taking it on a new one is safe, and a
        compensation about to start is not given up for a connection that a retry gets back."""
        deadline = time.monotonic() + self._reconnect_timeout
        attempt = 0
        while True:
            try:
                return self._lease_call(_TRY_LOCK, key)
            except StoreUnavailableError:
                attempt += 1
                pause = min(2.0, 0.05 * 2**attempt)
                if time.monotonic() + pause >= deadline:
                    raise
                time.sleep(pause)

    def _lease_call(self, call: str, key: object) -> bool:
        """``call`` (one of the lease session's columns above) on ``key``: whether it answered true."""
        return self._lease_session.call(call, key)

    def _open_lease_session(self) -> psycopg.RawCursor[Any]:
        conn = psycopg.connect(
            self.url, autocommit=True, connect_timeout=max(1, round(self._connect_timeout))
        )
        self._lease_pid = conn.info.backend_pid
        return psycopg.RawCursor(conn)

    @property
    def lease_statements(self) -> int:
        """Statements sent on the lease session so far (diagnostics: how well its calls batch)."""
        return self._lease_session.statements

    # -- liveness: shared advisory locks on the lease session, read back from pg_locks ----------
    def hold_live(self, saga_id: str) -> None:
        self._live.hold(saga_id)

    def release_live(self, saga_id: str) -> None:
        self._live.release(saga_id)

    def live_among(self, saga_ids: Sequence[str]) -> set[str]:
        return self._live_held(saga_ids, skip_pid=-1)

    def live_elsewhere(self, saga_ids: Sequence[str]) -> set[str]:
        return self._live_held(saga_ids, skip_pid=self._lease_pid)

    def _live_held(self, saga_ids: Sequence[str], skip_pid: int) -> set[str]:
        """Those of ``saga_ids`` whose liveness lock a session other than ``skip_pid`` holds."""
        if not saga_ids:
            return set()
        by_key: dict[int, list[str]] = {}
        for saga_id in saga_ids:
            by_key.setdefault(self._live_key(saga_id), []).append(saga_id)
        with self._cursor() as cur:
            cur.execute(_LIVE_HELD, (list(by_key), skip_pid))
            held = [row[0] for row in cur.fetchall()]
        return {saga_id for key in held for saga_id in by_key.get(key, ())}

    def _live_key(self, saga_id: str) -> int:
        if self._live_scope is None:  # advisory locks are per database: keep schemas apart
            self._live_scope = self._schema()
        return live_key(self._live_scope, saga_id)

    def _take_live(self, key: object) -> object:
        self._lease_call(_LIVE_LOCK, key)
        return key

    def _drop_live(self, key: object) -> None:
        self._lease_call(_LIVE_UNLOCK, key)

    _INSERT_ENTRY_PG = POSTGRES.sql(POSTGRES.insert_entry())

    def insert_entry(self, entry: Entry) -> bool:
        if not self._group_commit:
            return self._insert_pooled(entry)
        return super().insert_entry(entry)

    def _insert_pooled(self, entry: Entry) -> bool:
        """One autocommit INSERT on a pool connection (``group_commit=False``)."""
        params = self._entry_params(entry)
        pool = self._pool
        try:
            conn = pool.getconn()  # an append: no caller's wait limit applies (stores/_deadline.py)
        except psycopg.Error as exc:  # PoolTimeout and PoolClosed among them
            raise self._translate(exc) from exc
        try:
            inserted = conn.execute(self._INSERT_ENTRY_PG, params).rowcount == 1
        except psycopg.Error as exc:
            pool.putconn(conn)  # a broken connection is discarded here, before check() below
            raise self._translate(exc) from exc
        pool.putconn(conn)
        return inserted

    def _writer_cursor_of(self) -> psycopg.RawCursor[Any]:
        """The writer connection's cursor, connecting first if there is none."""
        cur = self._writer_cursor
        if cur is not None:
            return cur
        with self._writer_lock:
            self._refuse_if_closed()
            try:
                conn = psycopg.connect(self.url, autocommit=True, **self._connect_kwargs)
            except psycopg.Error as exc:
                raise StoreUnavailableError(f"PostgreSQL at {safe_url(self.url)}: {exc}") from exc
            self._writer = conn
            # A raw cursor takes $n placeholders as they are. psycopg parses %s queries on every
            # execute once they have over 50 parameters (a batch of 7 rows or more): ~100 us of
            # client CPU per batch, held under the GIL every waiting caller needs too.
            self._writer_cursor = cur = psycopg.RawCursor(conn)
        return cur

    def _drop_writer(self, conn: psycopg.Connection[Any]) -> None:
        with self._writer_lock:
            if self._writer is conn:
                self._writer = None
                self._writer_cursor = None
        conn.close()

    def _give_writer(self, cur: psycopg.RawCursor[Any], lost: bool) -> None:
        """After a write: a connection that failed is dropped, and the next write reconnects."""
        if lost or cur.connection.broken:
            self._drop_writer(cur.connection)

    def _ts_out(self, moment: datetime) -> datetime:
        return moment

    def _ts_in(self, value: Any) -> datetime:
        assert isinstance(value, datetime)
        return value

    def init_schema(self) -> None:
        # Tables already there: nothing to do. Checked first because the application role of the
        # privilege split (``grant_append_only``) may not CREATE in the schema, and even
        # ``CREATE TABLE IF NOT EXISTS`` is refused without that privilege.
        with self._cursor() as cur:
            cur.execute(
                "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL "
                "AND to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL "
                "AND to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL "
                "AND to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
                (JOURNAL, APPROVALS, EXPIRY, TRACE, INDEX, INDEX_DIRTY, INDEX_COUNTS, LOG),
            )
            row = cur.fetchone()
        if row is not None and row[0] and row[1]:
            return
        if row is not None and row[0]:
            # A database made before the gate trace-context table or the saga index: add them
            # (the DDL is idempotent), or, for a role that may not, say what to run; the owner's
            # ``sagacity db init`` adds them (until then telemetry links no resume to its gate,
            # and operator reads fail naming the missing table).
            try:
                self._run_ddl()
            except StoreError as exc:
                log.warning(
                    "PostgreSQL: cannot create %s or %s (%s); run `sagacity db init` as the owner",
                    TRACE,
                    INDEX,
                    exc,
                )
            return
        self._run_ddl()

    def has_table(self, name: str) -> bool:
        with self._cursor() as cur:
            cur.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))
            return bool(cur.fetchone()[0])

    def create_table(self, ddl: str) -> None:
        # Two sessions racing ``CREATE TABLE IF NOT EXISTS`` can both pass the check and one then
        # fails on the catalogue's unique index: queue on the schema lock instead.
        with self._cursor(transaction=True) as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
            cur.execute(ddl)

    def _run_ddl(self) -> None:
        with self._cursor(transaction=True) as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
            cur.execute("SELECT current_schema()")
            row = cur.fetchone()
            if row is None or row[0] is None:
                raise StoreError(
                    "PostgreSQL: no current schema to create the tables in (is search_path empty?)"
                )
            # The triggers' functions name their tables with the schema (see the DDL).
            schema = '"' + str(row[0]).replace('"', '""') + '"'  # a quoted identifier
            cur.execute(load_ddl("postgres").replace("sagacity_schema.", f"{schema}.").encode())

    def grant_append_only(self, role: str) -> None:
        """The privilege split: ``role`` may read and append to the journal, never change it.

        It keeps full use of the approval-request tables (working state, not evidence). The
        table owner can still do anything: run the application as ``role``, not as the owner.
        """
        ident = sql.Identifier(role)
        journal, approvals, expiry, trace, index, dirty, counts, entry_log = (
            sql.Identifier(t)
            for t in (JOURNAL, APPROVALS, EXPIRY, TRACE, INDEX, INDEX_DIRTY, INDEX_COUNTS, LOG)
        )
        statements = [
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(self._schema()), ident),
            sql.SQL("REVOKE ALL ON {} FROM {}").format(journal, ident),
            sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(journal, ident),
            # The log is evidence too: its rows are only ever inserted.
            sql.SQL("REVOKE ALL ON {} FROM {}").format(entry_log, ident),
            sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(entry_log, ident),
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {}, {}, {}, {}, {}, {} TO {}").format(
                approvals, expiry, trace, index, dirty, counts, ident
            ),
        ]
        with self._cursor(transaction=True) as cur:
            for statement in statements:
                cur.execute(statement)

    def _schema(self) -> str:
        with self._cursor() as cur:
            cur.execute("SELECT current_schema()")
            row = cur.fetchone()
        if row is None or row[0] is None:
            raise StoreError("PostgreSQL: no current schema (is search_path empty?)")
        return str(row[0])

    def close(self) -> None:
        with self._writer_lock:
            self._closed = True
            writer, self._writer = self._writer, None
            self._writer_cursor = None
        if writer is not None:
            writer.close()
        self._lease_session.close()
        self._pool.close()

    def __repr__(self) -> str:
        return f"PostgresStore({safe_url(self.url)!r})"


def _lease_select(
    cur: psycopg.RawCursor[Any], columns: str, keys: Sequence[object]
) -> tuple[Any, ...] | None:
    cur.execute(numbered("SELECT " + columns), keys)
    return cur.fetchone()
