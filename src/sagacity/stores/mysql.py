"""MariaDB and MySQL through PyMySQL (``pip install 'sagacity[mysql]'``).

URLs: ``mysql://user:password@host:3306/database`` or ``mariadb://...`` (the same store);
``?unix_socket=/run/mysqld/mysqld.sock`` connects through a socket instead of TCP.

Choices, and what breaks without each:

- PyMySQL, pure Python: installs anywhere pip does, with no client library or compiler (the C
  drivers, mysqlclient and MariaDB Connector/Python, need ``libmariadb`` headers to build). An
  append is client-CPU bound only in part: the round trip and the redo-log flush dominate.
- Autocommit, ``innodb_flush_log_at_trx_commit`` left as the server has it (``1`` by default:
  each commit is flushed before it returns). An append is one plain ``INSERT``: there is no
  ``ON CONFLICT DO NOTHING``, and ``INSERT IGNORE`` would also turn real errors (a value too long)
  into warnings and truncate, so a lost race is the duplicate-key error 1062, which writes
  nothing and leaves the connection usable; the journal re-reads the tail and retries.
  ``ON DUPLICATE KEY UPDATE`` is no way out either: it needs UPDATE on the journal, which the
  privilege split takes away.
- Group commit on one writer connection (``stores/_group.py``), as on PostgreSQL: concurrent
  appends go out as one multi-row INSERT, atomic in autocommit; one that meets a taken key wrote
  nothing, and its rows are then written one by one.
- Every session: ``READ COMMITTED`` (each statement sees what was committed before it, as on
  PostgreSQL; the saga index's catch-up relies on it) and a strict ``sql_mode``, so a value that
  does not fit is an error, never silently cut.
- Byte-exact text: the tables use the binary NO PAD collation (``sql/mysql.sql``), so saga ids
  compare as SQLite and PostgreSQL compare them; the connection speaks utf8mb4.
- ``init_schema`` holds ``GET_LOCK`` while it runs, so processes starting at once on an empty
  database create each object once (MySQL's DDL is not transactional).
- Saga leases are ``GET_LOCK`` named locks, per connection: all of a process's leases live on one
  dedicated session (polled with a zero timeout, as the session is shared), and the server
  releases them when that session dies. Liveness leases (a saga running here) are ``GET_LOCK``
  names on that session too, one of four slots per saga (so up to four processes running one
  saga each hold one), read back with ``IS_USED_LOCK``; a new lease session takes them again.
- The lease session's calls are batched as appends are (``GroupCommit``): the ``GET_LOCK`` and
  ``RELEASE_LOCK`` calls of threads that wait for the session meanwhile go as one ``SELECT``
  (each call's answer its own column), so sagas starting and ending at once do not queue one
  round trip each on it; a lone call goes at once. Without it, holding the liveness lease cost
  MariaDB +25-60 % of a saga (BENCHMARKS.md, "Liveness leases").
- A dead connection (server restart, ``KILL``) raises ``StoreUnavailableError`` and is dropped
  with every idle one; the journal retries and resolves an unacknowledged insert by reading back.
- A transaction the server rolled back to resolve a conflict (the deadlock error 1213: InnoDB's
  deadlock, or a Galera node's certification failure at commit) wrote nothing and leaves the
  connection usable: an append that meets it lost a race, as on a taken key (``Dialect.conflict``),
  and is retried against the re-read tail; the connection stays in the pool.
- Galera (``wsrep_on`` is ON, asked with one query per new connection) is refused unless the URL
  says ``?galera=single-writer``: ``GET_LOCK`` is node-local there, so saga and liveness leases
  taken through one node are invisible through another, and a process on another node would
  compensate around a saga running here. The option states that every process that runs,
  decides or recovers sagas reaches the cluster through one node at a time (docs/operations.md,
  "MariaDB Galera").
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pymysql
import pymysql.converters
from pymysql.connections import Connection
from pymysql.cursors import Cursor as DriverCursor

from sagacity.errors import ConfigurationError, StoreError, StoreUnavailableError
from sagacity.stores._deadline import time_left
from sagacity.stores._dialect import (
    APPROVALS,
    EXPIRY,
    INDEX,
    INDEX_COUNTS,
    INDEX_DIRTY,
    INDEX_MARK,
    JOURNAL,
    LOG,
    TRACE,
    Cursor,
    Dialect,
)
from sagacity.stores._group import GroupCommit, RowWriter
from sagacity.stores._lease import LiveLeases, SessionLeases
from sagacity.stores._lease_session import LeaseSession
from sagacity.stores._sql import SQLStore, load_ddl, split_statements
from sagacity.stores._url import safe_url
from sagacity.stores.base import Capability

__all__ = ["MySQLStore"]

#: Errors about who may do what: retrying cannot help, so they are not "unavailable".
_REFUSED = {1044, 1045, 1049, 1142, 1143, 1227, 1370}
_DUPLICATE_KEY = 1062
#: ER_LOCK_DEADLOCK: the server rolled the transaction back (an InnoDB deadlock, a Galera
#: certification failure); nothing was written and the connection is fine.
_DEADLOCK = 1213
#: The URL's ``galera=`` values this store knows.
_GALERA_MODES = ("single-writer",)
#: The lease session's two calls, as ``SELECT`` columns: take a named lock without waiting (the
#: session is shared, so it never waits on one), give one back.
_TRY_LOCK = "GET_LOCK(%s, 0)"
_UNLOCK = "RELEASE_LOCK(%s)"
#: Processes that can hold one saga's liveness lease at once (one ``GET_LOCK`` name each).
_LIVE_SLOTS = 4
#: Sagas probed per statement (four ``IS_USED_LOCK`` each).
_LIVE_PROBE_BATCH = 200
_NO_SUCH_GRANT = 1147
#: Collations that compare utf8mb4 text byte for byte with no trailing-space padding, best first.
_BINARY_COLLATIONS = ("utf8mb4_nopad_bin", "utf8mb4_0900_bin")
_SQL_MODE = "STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
_TABLES = (JOURNAL, APPROVALS, EXPIRY, TRACE, INDEX, INDEX_COUNTS, INDEX_MARK, INDEX_DIRTY, LOG)
#: The tables whose rows are evidence: an append-only role may read and insert, nothing more.
_EVIDENCE = (JOURNAL, LOG)
#: Seconds a process waits for another's ``init_schema`` to finish.
_SCHEMA_WAIT = 60


def _refuse_unknown(value: object, mapping: object = None) -> str:
    """PyMySQL's fallback for a type it has no encoder for is ``str(value)``: a journal row would be
    written with an object's repr. Refuse instead, as the other drivers do (``str`` itself never
    gets here: the connection quotes text before it looks at the encoders)."""
    raise pymysql.err.ProgrammingError(f"cannot bind a value of type {type(value).__name__}: {value!r}")


#: PyMySQL's conversions, with the ``str(value)`` fallback refused.
_CONVERSIONS: dict[Any, Any] = {**pymysql.converters.conversions, str: _refuse_unknown}


def _unavailable(exc: BaseException) -> bool:
    if isinstance(exc, pymysql.err.OperationalError):
        return not (exc.args and exc.args[0] in _REFUSED)
    return isinstance(exc, pymysql.err.InterfaceError)  # a connection already closed


def _conflict(exc: BaseException) -> bool:
    return isinstance(exc, pymysql.err.OperationalError) and bool(exc.args) and exc.args[0] == _DEADLOCK


def _lost_connection(exc: BaseException) -> bool:
    """Whether the connection (or the server) failed: it and the idle ones are dropped. A
    conflict is "unavailable" to the callers (retry it) but leaves the connection usable."""
    return _unavailable(exc) and not _conflict(exc)


MYSQL = Dialect(
    "MariaDB/MySQL",
    (pymysql.err.MySQLError,),
    unavailable=_unavailable,
    conflict=_conflict,
    taken=lambda exc: isinstance(exc, pymysql.err.IntegrityError) and exc.args[0] == _DUPLICATE_KEY,
    placeholder="%s",
    on_conflict=False,
)


def _close(conn: Connection[DriverCursor]) -> None:
    """Close a connection that may already be dead (closing then only frees the socket)."""
    try:
        conn.close()
    except pymysql.err.MySQLError:
        pass


def connect_arguments(url: str) -> dict[str, Any]:
    """PyMySQL's ``connect`` arguments for a ``mysql://`` / ``mariadb://`` URL (the store's own
    options, ``galera``, are read by ``galera_mode``)."""
    parts = urlsplit(url)
    if parts.scheme not in {"mysql", "mariadb"}:
        raise ConfigurationError(f"not a MariaDB/MySQL URL: {safe_url(url)!r}")
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise ConfigurationError(
            f"{safe_url(url)!r} names no database: use mysql://user:password@host:3306/database"
        )
    arguments: dict[str, Any] = {
        "host": parts.hostname or "localhost",
        "port": parts.port or 3306,
        "user": unquote(parts.username) if parts.username else "root",
        "password": unquote(parts.password) if parts.password else "",
        "database": database,
    }
    for name, values in parse_qs(parts.query, keep_blank_values=True).items():
        if name == "galera":
            continue
        if name != "unix_socket":
            raise ConfigurationError(
                f"{safe_url(url)!r}: unknown parameter {name!r} (known: unix_socket, galera)"
            )
        arguments["unix_socket"] = values[-1]
    return arguments


def galera_mode(url: str) -> str | None:
    """The URL's ``galera=`` option: None, or ``single-writer`` (docs/operations.md)."""
    values = parse_qs(urlsplit(url).query, keep_blank_values=True).get("galera")
    if not values:
        return None
    if values[-1] not in _GALERA_MODES:
        raise ConfigurationError(
            f"{safe_url(url)!r}: galera={values[-1]!r} is not known (known: {', '.join(_GALERA_MODES)})"
        )
    return values[-1]


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def account(role: str) -> str:
    """``app`` or ``app@host`` as an account name: ``'app'`` / ``'app'@'host'``."""
    user, _, host = role.partition("@")
    if not user:
        raise ConfigurationError(f"not an account name: {role!r} (use name or name@host)")
    quoted = "'" + user.replace("\\", "\\\\").replace("'", "''") + "'"
    return quoted if not host else quoted + "@'" + host.replace("\\", "\\\\").replace("'", "''") + "'"


class MySQLStore(SQLStore):
    """A journal in MariaDB (10.6+) or MySQL (8.0+) (``mysql://user@host/database``)."""

    dialect = MYSQL
    capabilities = SQLStore.capabilities | {Capability.APPEND_ONLY_GRANT, Capability.LIVENESS}

    def __init__(self, url: str, *, connect_timeout: float = 10.0, group_commit: bool = True) -> None:
        if connect_timeout <= 0:
            raise ConfigurationError("connect_timeout must be positive seconds")
        self.url = url
        self._arguments = connect_arguments(url)
        #: ``single-writer`` when the URL accepts a Galera cluster knowingly (``galera_mode``).
        self.galera = galera_mode(url)
        self.database: str = self._arguments["database"]
        self._connect_timeout = connect_timeout
        #: How long one read waits for an unreachable database, retries included (``Journal.read``).
        self.wait_limit = connect_timeout
        self._group_commit = group_commit
        # Connections are lent per operation; only idle ones are held here.
        self._idle: list[Connection[DriverCursor]] = []
        self._idle_lock = threading.Lock()
        self._closed = False
        # The group commit's connection: only the leader of the moment uses it.
        self._writer: Connection[DriverCursor] | None = None
        self._writer_lock = threading.Lock()
        self._group = GroupCommit.over(
            RowWriter(MYSQL, self._translate), self._take_writer, self._give_writer
        )
        self._leases = SessionLeases(
            lambda saga_id: self._lease_call(_TRY_LOCK, self._lock_name("lease:" + saga_id)),
            lambda saga_id: self._lease_call(_UNLOCK, self._lock_name("lease:" + saga_id)),
        )
        self._lease_session: LeaseSession[Connection[DriverCursor]] = LeaseSession(
            MYSQL,
            self._connect,
            _lease_select,
            _close,
            retake=lambda: (_TRY_LOCK, [token for token in self._live.tokens() if isinstance(token, str)]),
            translate=self._translate,
            refuse_if_closed=self._refuse_if_closed,
        )
        self._live = LiveLeases(str, self._take_live, self._drop_live)

    # -- connections -----------------------------------------------------------------------------
    def _connect(self) -> Connection[DriverCursor]:
        left = time_left()
        wait = self._connect_timeout if left is None else max(0.1, min(self._connect_timeout, left))
        conn: Connection[DriverCursor] | None = None
        try:
            conn = pymysql.connect(
                **self._arguments,
                charset="utf8mb4",
                autocommit=True,
                connect_timeout=wait,
                conv=_CONVERSIONS,
            )
            with conn.cursor() as cur:
                cur.execute(f"SET SESSION sql_mode = '{_SQL_MODE}'")
                cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                # Galera's replication is on for this session (MySQL has no such variable: no row).
                cur.execute("SHOW VARIABLES LIKE 'wsrep_on'")
                wsrep = cur.fetchone()
        except pymysql.err.MySQLError as exc:
            if conn is not None:
                _close(conn)
            raise self._translate(exc) from exc
        if wsrep is not None and str(wsrep[1]).upper() == "ON" and self.galera is None:
            _close(conn)
            raise StoreError(
                f"MariaDB/MySQL at {safe_url(self.url)} is a Galera cluster node (wsrep_on = ON), and "
                "Galera keeps GET_LOCK locks on the node that took them: the saga and liveness leases "
                "this store holds through one node are invisible through another, so a process on "
                "another node could compensate around a saga running here. Route every process that "
                "runs, decides or recovers sagas to one node at a time (a proxy's single-writer "
                "routing), then say so in the URL: ?galera=single-writer (docs/operations.md, "
                '"MariaDB Galera")'
            )
        return conn

    def _translate(self, exc: BaseException) -> StoreError:
        if self._closed:
            return StoreError(f"store {safe_url(self.url)} is closed")
        if _lost_connection(exc):
            self._drop_idle()  # a server restart killed them too
        return MYSQL.translate(exc, safe_url(self.url))

    def _drop_idle(self) -> None:
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            _close(conn)

    @contextmanager
    def _cursor(self, transaction: bool = False) -> Iterator[Cursor]:
        with self._idle_lock:
            self._refuse_if_closed()
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        healthy = True
        try:
            with conn.cursor() as cur:
                if transaction:
                    conn.begin()
                    try:
                        yield cur
                    except BaseException:
                        conn.rollback()
                        raise
                    conn.commit()
                else:
                    yield cur
        except pymysql.err.MySQLError as exc:
            healthy = not _lost_connection(exc)
            raise self._translate(exc) from exc
        finally:
            with self._idle_lock:
                if healthy and not self._closed:
                    self._idle.append(conn)
                    conn = None
            if conn is not None:
                _close(conn)

    def _take_writer(self) -> DriverCursor:
        with self._writer_lock:
            self._refuse_if_closed()
            if self._writer is None:
                self._writer = self._connect()
            return self._writer.cursor()

    def _give_writer(self, cur: DriverCursor, lost: bool) -> None:
        if lost:
            with self._writer_lock:
                conn, self._writer = self._writer, None
            if conn is not None:
                _close(conn)

    # -- timestamps: DATETIME(6), naive UTC --------------------------------------------------------
    def _ts_out(self, moment: datetime) -> datetime:
        return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)

    def _ts_in(self, value: Any) -> datetime:
        if not isinstance(value, datetime):
            raise StoreError(f"MariaDB/MySQL: a stored timestamp reads back as {value!r}, not a datetime")
        return value

    # -- schema ----------------------------------------------------------------------------------
    def init_schema(self) -> None:
        # Tables already there: nothing to do (an append-only role may not CREATE).
        if self._missing_tables() == []:
            return
        with self._cursor() as cur:
            cur.execute("SELECT GET_LOCK(%s, %s)", (self._lock_name("schema"), _SCHEMA_WAIT))
            if cur.fetchone()[0] != 1:
                raise StoreUnavailableError(
                    f"MariaDB/MySQL at {safe_url(self.url)}: another process held the schema lock "
                    f"for {_SCHEMA_WAIT} s"
                )
            try:
                self._run_ddl(cur)
            finally:
                cur.execute("SELECT RELEASE_LOCK(%s)", (self._lock_name("schema"),))

    def has_table(self, name: str) -> bool:
        with self._cursor() as cur:
            cur.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = %s",
                (name,),
            )
            return cur.fetchone() is not None

    def log_table_ddl(self) -> str:
        """The journal's own column types, and its table's (binary) collation, so ids compare and
        join byte for byte as they do in the journal."""
        with self._cursor() as cur:
            cur.execute(
                "SELECT table_collation FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name = %s",
                (JOURNAL,),
            )
            row = cur.fetchone()
        collation = str(row[0]) if row is not None else ""
        if not collation.replace("_", "").isalnum():
            raise StoreError(f"cannot tell the collation of {JOURNAL} (is the schema created?)")
        return (
            f"CREATE TABLE IF NOT EXISTS {LOG} (log_index BIGINT PRIMARY KEY, saga_id VARCHAR(512) NOT NULL, "
            "seq BIGINT NOT NULL, hash CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, "
            f"UNIQUE (saga_id, seq)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE={collation}"
        )

    def _missing_tables(self) -> list[str]:
        with self._cursor() as cur:
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
            present = {str(row[0]) for row in cur.fetchall()}
        return [table for table in _TABLES if table not in present]

    def _run_ddl(self, cur: Cursor) -> None:
        collation = self._binary_collation(cur)
        cur.execute("SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE()")
        triggers = {str(row[0]) for row in cur.fetchall()}
        for statement in split_statements(load_ddl("mysql").replace("sagacity_collation", collation)):
            made = re.match(r"\s*CREATE TRIGGER (\w+)", statement)
            if made is None or made.group(1) not in triggers:
                cur.execute(statement)

    def _binary_collation(self, cur: Cursor) -> str:
        marks = ", ".join(["%s"] * len(_BINARY_COLLATIONS))
        cur.execute(
            f"SELECT collation_name FROM information_schema.collations WHERE collation_name IN ({marks})",
            _BINARY_COLLATIONS,
        )
        found = {str(row[0]) for row in cur.fetchall()}
        for name in _BINARY_COLLATIONS:
            if name in found:
                return name
        raise ConfigurationError(
            f"{safe_url(self.url)}: the server has no byte-exact NO PAD collation for utf8mb4 "
            "(utf8mb4_nopad_bin, MariaDB 10.6+; utf8mb4_0900_bin, MySQL 8.0+); saga ids would "
            "compare ignoring trailing spaces"
        )

    def grant_append_only(self, role: str) -> None:
        """The privilege split: ``role`` (``name`` or ``name@host``) may read and append to the
        journal, never change it, and keeps full use of the working-state tables.

        Table privileges cannot take away what a database-wide grant gives, so a role holding
        UPDATE or DELETE on the whole database is refused with the statement that fixes it.
        """
        grantee = account(role)
        database = quote_identifier(self.database)
        with self._cursor() as cur:
            cur.execute(
                "SELECT privilege_type FROM information_schema.schema_privileges "
                "WHERE table_schema = DATABASE() AND grantee = %s AND privilege_type IN ('UPDATE', 'DELETE')",
                (grantee if "@" in grantee else grantee + "@'%'",),
            )
            wide = sorted(str(row[0]) for row in cur.fetchall())
            if wide:
                raise StoreError(
                    f"{role} holds {' and '.join(wide)} on the whole database, which no table grant can "
                    f"take away: REVOKE {', '.join(wide)} ON {database}.* FROM {grantee}; then run this again"
                )
            for table in _TABLES:
                table_name = f"{database}.{quote_identifier(table)}"
                if table not in _EVIDENCE:
                    cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table_name} TO {grantee}")
                    continue
                try:
                    cur.execute(f"REVOKE ALL PRIVILEGES ON {table_name} FROM {grantee}")
                except pymysql.err.MySQLError as exc:
                    if not (exc.args and exc.args[0] == _NO_SUCH_GRANT):  # nothing granted yet
                        raise
                cur.execute(f"GRANT SELECT, INSERT ON {table_name} TO {grantee}")

    # -- the saga index: caught up from the notes the journal's triggers leave --------------------
    def _index_stale(self) -> bool:
        return self._notes_waiting()

    def _index_changes(self, cur: Cursor, batch: int) -> tuple[object, list[str]]:
        # Catch-ups queue on one row's lock, held to the commit; writers never take it. Under READ
        # COMMITTED the notes read next are those committed before the read, and the journal read
        # after it sees at least their rows. Only the notes read are deleted (with the folded
        # rows, in this transaction): one a writer commits meanwhile stays for the next catch-up.
        self._index_lock(cur)
        cur.execute(f"SELECT id, saga_id FROM {INDEX_DIRTY} ORDER BY id LIMIT %s", (batch * 4,))
        notes = cur.fetchall()
        return [int(note[0]) for note in notes], list(dict.fromkeys(str(note[1]) for note in notes))

    def _index_lock(self, cur: Cursor) -> None:
        cur.execute(f"SELECT value FROM {INDEX_MARK} WHERE name = 'catch-up' FOR UPDATE")

    def _index_consume(self, cur: Cursor, token: object) -> None:
        assert isinstance(token, list)
        for start in range(0, len(token), 500):
            ids: Sequence[int] = token[start : start + 500]
            cur.execute(f"DELETE FROM {INDEX_DIRTY} WHERE id IN ({', '.join(['%s'] * len(ids))})", ids)

    def _index_forget(self, cur: Cursor) -> None:
        self._index_lock(cur)
        self._drop_index_rows(cur)
        cur.execute(f"DELETE FROM {INDEX_DIRTY}")
        cur.execute(f"INSERT INTO {INDEX_DIRTY} (saga_id) SELECT DISTINCT saga_id FROM {JOURNAL}")

    # -- leases ----------------------------------------------------------------------------------
    def _lock_name(self, what: str) -> str:
        """A server-wide lock name (at most 64 characters) for ``what`` in this database."""
        digest = hashlib.sha256(f"{self.database}\0{what}".encode("utf-8", "surrogatepass")).hexdigest()
        return "sagacity:" + digest[:48]

    def lease(self, saga_id: str, *, wait: bool) -> AbstractContextManager[bool]:
        return self._leases.hold(saga_id, wait=wait)

    def _lease_call(self, call: str, name: str) -> bool:
        """``call`` (``_TRY_LOCK`` or ``_UNLOCK``) on ``name`` on the lease session: whether it
        answered 1."""
        return self._lease_session.call(call, name)

    @property
    def lease_statements(self) -> int:
        """Statements sent on the lease session so far (diagnostics: how well its calls batch)."""
        return self._lease_session.statements

    # -- liveness: GET_LOCK slots on the lease session, read back with IS_USED_LOCK --------------
    def hold_live(self, saga_id: str) -> None:
        self._live.hold(saga_id)

    def release_live(self, saga_id: str) -> None:
        self._live.release(saga_id)

    def live_among(self, saga_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        ids = list(dict.fromkeys(saga_ids))
        for start in range(0, len(ids), _LIVE_PROBE_BATCH):
            chunk = ids[start : start + _LIVE_PROBE_BATCH]
            used = ", ".join(
                "COALESCE(" + ", ".join(["IS_USED_LOCK(%s)"] * _LIVE_SLOTS) + ") IS NOT NULL" for _ in chunk
            )
            with self._cursor() as cur:
                cur.execute("SELECT " + used, [name for sid in chunk for name in self._live_names(sid)])
                row = cur.fetchone()
            found.update(sid for sid, live in zip(chunk, row or (), strict=False) if live)
        return found

    def live_elsewhere(self, saga_ids: Sequence[str]) -> set[str]:
        mine = set(self._live.tokens())  # the slots this store's lease session holds
        names = {sid: [n for n in self._live_names(sid) if n not in mine] for sid in dict.fromkeys(saga_ids)}
        asked = [sid for sid, left in names.items() if left]
        if not asked:
            return set()
        used = ", ".join(
            "COALESCE(" + ", ".join(["IS_USED_LOCK(%s)"] * len(names[sid])) + ") IS NOT NULL" for sid in asked
        )
        with self._cursor() as cur:
            cur.execute("SELECT " + used, [name for sid in asked for name in names[sid]])
            row = cur.fetchone()
        return {sid for sid, live in zip(asked, row or (), strict=False) if live}

    def _live_names(self, saga_id: str) -> list[str]:
        return [self._lock_name(f"live:{slot}:{saga_id}") for slot in range(_LIVE_SLOTS)]

    def _take_live(self, saga_id: object) -> object:
        """The first free slot of the saga's liveness locks (``GET_LOCK`` is exclusive, a
        liveness lease is not: a second process running the saga takes the next slot). None when
        every slot is held elsewhere: the saga shows live through those holders."""
        assert isinstance(saga_id, str)
        for name in self._live_names(saga_id):
            if self._lease_call(_TRY_LOCK, name):
                return name
        return None

    def _drop_live(self, name: object) -> None:
        if isinstance(name, str):
            self._lease_call(_UNLOCK, name)

    def close(self) -> None:
        with self._idle_lock:
            self._closed = True
            idle, self._idle = self._idle, []
        with self._writer_lock:
            writer, self._writer = self._writer, None
        self._lease_session.close()
        for conn in (*idle, writer):
            if conn is not None:
                _close(conn)

    def __repr__(self) -> str:
        return f"MySQLStore({safe_url(self.url)!r})"


def _lease_select(
    conn: Connection[DriverCursor], columns: str, names: Sequence[object]
) -> tuple[Any, ...] | None:
    with conn.cursor() as cur:
        cur.execute("SELECT " + columns, names)
        row = cur.fetchone()
    return None if row is None else tuple(row)
