"""Code shared by the SQL stores: statements, row mapping, approval requests, the saga index.

Every statement is written once, with ``?`` placeholders. What databases spell differently (the
placeholder, skipping a taken key, upserts, which driver errors mean what) is asked of the
store's :class:`Dialect`, never decided by a store's name. What a store does differently
(connections, transactions, timestamps' stored form, how the saga index notices changes) are the
few abstract hooks of :class:`SQLStore`.
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Any, ClassVar

from sagacity.errors import StoreError, StoreUnavailableError
from sagacity.model import ApprovalRequest, Entry, SagaStatus
from sagacity.stores._dialect import (
    APPROVALS,
    ENTRY_COLUMNS,
    EXPIRY,
    INDEX,
    INDEX_COLUMNS,
    INDEX_COUNTS,
    INDEX_DIRTY,
    JOURNAL,
    LOG,
    TRACE,
    Cursor,
    Dialect,
)
from sagacity.stores._url import safe_url
from sagacity.stores.base import ANY_SAGA, Capability, Folder, IndexRow, LogRow, SagaFilter, Watch

if TYPE_CHECKING:
    from sagacity.stores._group import GroupCommit

#: Leaves read per statement.
BATCH = 5000
#: Entries logged per transaction. Each transaction runs one anti-join of the whole journal against
#: the log (the journal has no index that orders it), so a run logging k entries costs about
#: k / EXTEND_BATCH such scans: large, so that a first run over a big journal is not quadratic in
#: practice, and small enough to hold in memory (about 15 MiB of ids and hashes).
EXTEND_BATCH = 50_000
_ATTEMPTS = 20
#: Sagas whose journals one statement reads (placeholders stay far below both drivers' limits).
_JOURNALS_PER_READ = 500
#: The rows of each watched subset; every one implies ``attention``, so the partial index serves it.
_WATCHED = {
    Watch.IN_DOUBT: "attention AND in_doubt > 0",
    Watch.COMPENSATING: "attention AND compensating",
    Watch.ABANDONED: "attention AND status = 'ABANDONED'",
    Watch.BROKEN_CHAIN: "attention AND broken_at IS NOT NULL",
    Watch.ATTENTION: "attention",
}


class _LostRace(Exception):
    """Raised inside a transaction to roll it back: a fenced insert found a seq taken."""


def load_ddl(dialect: str) -> str:
    """The DDL shipped as package data (``stores/sql/<dialect>.sql``)."""
    return resources.files("sagacity.stores").joinpath(f"sql/{dialect}.sql").read_text("utf-8")


def split_statements(ddl: str) -> list[str]:
    """Split DDL into statements, keeping trigger bodies (``BEGIN ... END;``) whole."""
    statements: list[str] = []
    current: list[str] = []
    in_body = False
    for line in ddl.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("--")):
            continue
        current.append(line)
        upper = line.upper()
        if "BEGIN" in upper.split():
            in_body = True
        if line.rstrip().endswith(";") and (not in_body or upper.rstrip().endswith("END;")):
            statements.append("\n".join(current).rstrip().rstrip(";"))
            current, in_body = [], False
    return statements


def numbered(sql: str) -> str:
    """``?`` placeholders as PostgreSQL's own ``$1, $2, ...``, which a raw cursor sends as they are."""
    first, *rest = sql.split("?")
    return first + "".join(f"${n}{part}" for n, part in enumerate(rest, 1))


class SQLStore(ABC):
    """A store over a DB-API driver; subclasses supply connections, their dialect and the hooks."""

    url: str
    dialect: ClassVar[Dialect]
    #: Each store's group commit (``stores/_group.py``), used unless made with group_commit=False.
    _group: GroupCommit
    _group_commit: bool
    capabilities: frozenset[Capability] = frozenset(
        {Capability.TRACE_CONTEXT, Capability.SAGA_INDEX, Capability.ENTRY_LOG}
    )
    #: Set by ``close``: every operation after it is refused.
    _closed: bool = False

    def _refuse_if_closed(self) -> None:
        """Refuse an operation on a closed store (not unavailable: retrying cannot help)."""
        if self._closed:
            raise StoreError(f"store {safe_url(self.url)} is closed")

    # -- dialect hooks -----------------------------------------------------------------------
    @abstractmethod
    def _cursor(self, transaction: bool = False) -> AbstractContextManager[Cursor]:
        """A cursor in autocommit (one statement, one durable commit) or in one transaction.

        Driver errors raised inside are translated to ``sagacity.errors`` here and only here.
        """

    @abstractmethod
    def _ts_out(self, moment: datetime) -> Any:
        """A naive UTC datetime as the driver should bind it."""

    @abstractmethod
    def _ts_in(self, value: Any) -> datetime:
        """A stored timestamp as a naive UTC datetime."""

    @abstractmethod
    def has_table(self, name: str) -> bool:
        """Whether the table exists (in the current schema or database)."""

    def create_table(self, ddl: str) -> None:
        """Run one idempotent ``CREATE TABLE IF NOT EXISTS`` for a working table beside the SPEC
        tables, safe against other processes creating it at the same moment."""
        with self._cursor(transaction=True) as cur:
            cur.execute(ddl)

    def _sql(self, statement: str) -> str:
        return self.dialect.sql(statement)

    def log_table_ddl(self) -> str:
        """The checkpoint log's table, for a journal made before the log was part of the schema
        (it gets the table on its first checkpoint); a dialect with other column types overrides it."""
        return (
            f"CREATE TABLE IF NOT EXISTS {LOG} (log_index BIGINT PRIMARY KEY, saga_id TEXT NOT NULL, "
            "seq BIGINT NOT NULL, hash CHAR(64) NOT NULL, UNIQUE (saga_id, seq))"
        )

    def entry_log(self) -> SQLEntryLog:
        """``Capability.ENTRY_LOG``: the checkpoint log in a working table of this database."""
        return SQLEntryLog(self)

    # -- journal -------------------------------------------------------------------------------
    def _entry(self, row: Sequence[Any]) -> Entry:
        saga_id, seq, tool_name, phase, input_, payload, timestamp, hash_ = row
        return Entry(saga_id, int(seq), tool_name, phase, input_, payload, self._ts_in(timestamp), hash_)

    def _entry_params(self, entry: Entry, timestamp: Any = None) -> tuple[Any, ...]:
        """The row's parameters; ``timestamp`` is the stored form when the caller made it."""
        return (
            entry.saga_id,
            entry.seq,
            entry.tool_name,
            str(entry.phase),
            entry.input,
            entry.payload,
            self._ts_out(entry.timestamp) if timestamp is None else timestamp,
            entry.hash,
        )

    def _grouped(self) -> GroupCommit | None:
        """The group commit appends go through, or None when each is a statement of its own."""
        return self._group if self._group_commit else None

    def insert_entry(self, entry: Entry) -> bool:
        group = self._grouped()
        if group is not None:
            return group.insert(entry, self._entry_params(entry))
        with self._cursor() as cur:
            return self._insert(cur, self._sql(self.dialect.insert_entry()), self._entry_params(entry))

    def _insert(self, cur: Cursor, statement: str, params: Sequence[Any]) -> bool:
        """Run an INSERT; False if it met a taken key and wrote nothing."""
        try:
            cur.execute(statement, params)
        except self.dialect.errors as exc:
            if self.dialect.lost(exc):
                return False
            raise
        return cur.rowcount >= 1

    def insert_entries(self, entries: Sequence[Entry]) -> bool:
        if len(entries) == 1:
            return self.insert_entry(entries[0])
        params = [value for entry in entries for value in self._entry_params(entry)]
        group = self._grouped()
        if group is not None:  # in the queue with every other append, on the writer connection
            return group.insert_together(tuple(params), len(entries))
        if not self.dialect.on_conflict:
            # One autocommit statement is atomic: a taken key fails it whole, writing nothing.
            with self._cursor() as cur:
                return self._insert(cur, self._sql(self.dialect.insert_rows(len(entries))), params)
        # One transaction: ON CONFLICT DO NOTHING RETURNING names the rows that went in; fewer
        # than all means another writer holds one of the seqs, and the rollback undoes the rest.
        try:
            with self._cursor(transaction=True) as cur:
                cur.execute(self._sql(self.dialect.insert_rows(len(entries), skip_taken=True)), params)
                if len(cur.fetchall()) != len(entries):
                    raise _LostRace
        except _LostRace:
            return False
        return True

    def tail(self, saga_id: str) -> Entry | None:
        with self._cursor() as cur:
            cur.execute(
                self._sql(
                    f"SELECT {ENTRY_COLUMNS} FROM {JOURNAL} WHERE saga_id = ? ORDER BY seq DESC LIMIT 1"
                ),
                (saga_id,),
            )
            row = cur.fetchone()
        return None if row is None else self._entry(row)

    def get_entry(self, saga_id: str, seq: int) -> Entry | None:
        with self._cursor() as cur:
            cur.execute(
                self._sql(f"SELECT {ENTRY_COLUMNS} FROM {JOURNAL} WHERE saga_id = ? AND seq = ?"),
                (saga_id, seq),
            )
            row = cur.fetchone()
        return None if row is None else self._entry(row)

    def read_entries(self, saga_id: str, after_seq: int = 0, limit: int | None = None) -> list[Entry]:
        sql = f"SELECT {ENTRY_COLUMNS} FROM {JOURNAL} WHERE saga_id = ? AND seq > ? ORDER BY seq"
        params: tuple[Any, ...] = (saga_id, after_seq)
        if limit is not None:
            sql += " LIMIT ?"
            params += (limit,)
        with self._cursor() as cur:
            cur.execute(self._sql(sql), params)
            rows = cur.fetchall()
        return [self._entry(row) for row in rows]

    def saga_ids(self) -> list[str]:
        with self._cursor() as cur:
            cur.execute(f"SELECT DISTINCT saga_id FROM {JOURNAL}")
            # Sorted here, by code point: a database's collation may order text otherwise.
            return sorted(row[0] for row in cur.fetchall())

    # -- approval requests (working state) ------------------------------------------------------
    def put_approval_request(self, request: ApprovalRequest) -> None:
        key = (request.saga_id, request.journal_seq)
        with self._cursor(transaction=True) as cur:
            cur.execute(
                self._sql(
                    self.dialect.upsert(
                        APPROVALS,
                        ("saga_id", "journal_seq"),
                        ("tool_name", "input", "input_hash", "created_at"),
                    )
                ),
                (
                    *key,
                    request.tool_name,
                    request.input,
                    request.input_hash,
                    self._ts_out(request.created_at),
                ),
            )
            cur.execute(self._sql(f"DELETE FROM {EXPIRY} WHERE saga_id = ? AND journal_seq = ?"), key)
            if request.expires_at is not None:
                cur.execute(
                    self._sql(f"INSERT INTO {EXPIRY} (saga_id, journal_seq, expires_at) VALUES (?, ?, ?)"),
                    (*key, self._ts_out(request.expires_at)),
                )

    _SELECT_REQUESTS = (
        f"SELECT r.saga_id, r.journal_seq, r.tool_name, r.input, r.input_hash, r.created_at, "
        f"e.expires_at FROM {APPROVALS} r LEFT JOIN {EXPIRY} e "
        "ON e.saga_id = r.saga_id AND e.journal_seq = r.journal_seq"
    )

    def _request(self, row: Sequence[Any]) -> ApprovalRequest:
        saga_id, seq, tool_name, input_, input_hash, created_at, expires_at = row
        return ApprovalRequest(
            saga_id,
            int(seq),
            tool_name,
            input_,
            input_hash.strip(),
            self._ts_in(created_at),
            None if expires_at is None else self._ts_in(expires_at),
        )

    def get_approval_request(self, saga_id: str, journal_seq: int) -> ApprovalRequest | None:
        with self._cursor() as cur:
            cur.execute(
                self._sql(self._SELECT_REQUESTS + " WHERE r.saga_id = ? AND r.journal_seq = ?"),
                (saga_id, journal_seq),
            )
            row = cur.fetchone()
        return None if row is None else self._request(row)

    def list_approval_requests(self, saga_id: str | None = None) -> list[ApprovalRequest]:
        order = " ORDER BY r.created_at, r.saga_id, r.journal_seq"
        with self._cursor() as cur:
            if saga_id is None:
                cur.execute(self._SELECT_REQUESTS + order)
            else:
                cur.execute(self._sql(self._SELECT_REQUESTS + " WHERE r.saga_id = ?" + order), (saga_id,))
            rows = cur.fetchall()
        return [self._request(row) for row in rows]

    def delete_approval_request(self, saga_id: str, journal_seq: int) -> bool:
        key = (saga_id, journal_seq)
        with self._cursor(transaction=True) as cur:
            cur.execute(self._sql(f"DELETE FROM {APPROVALS} WHERE saga_id = ? AND journal_seq = ?"), key)
            deleted = cur.rowcount == 1
            cur.execute(self._sql(f"DELETE FROM {EXPIRY} WHERE saga_id = ? AND journal_seq = ?"), key)
        return deleted

    # -- gates' trace context (working state of the OpenTelemetry integration) ------------------
    def put_trace_context(
        self, saga_id: str, journal_seq: int, traceparent: str, tracestate: str = ""
    ) -> None:
        """Keep the W3C trace context of the span that opened the gate at (saga_id, journal_seq),
        and drop every kept context whose request is gone (resumed, rejected, voided, expired):
        ``Capability.TRACE_CONTEXT``."""
        with self._cursor(transaction=True) as cur:
            cur.execute(
                self._sql(
                    self.dialect.upsert(TRACE, ("saga_id", "journal_seq"), ("traceparent", "tracestate"))
                ),
                (saga_id, journal_seq, traceparent, tracestate),
            )
            cur.execute(
                f"DELETE FROM {TRACE} WHERE NOT EXISTS (SELECT 1 FROM {APPROVALS} r "
                f"WHERE r.saga_id = {TRACE}.saga_id AND r.journal_seq = {TRACE}.journal_seq)"
            )

    def get_trace_context(self, saga_id: str, journal_seq: int) -> tuple[str, str] | None:
        """The trace context kept for the gate at (saga_id, journal_seq): traceparent, tracestate."""
        with self._cursor() as cur:
            cur.execute(
                self._sql(
                    f"SELECT traceparent, tracestate FROM {TRACE} WHERE saga_id = ? AND journal_seq = ?"
                ),
                (saga_id, journal_seq),
            )
            row = cur.fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    # -- the saga index (``sagacity._index``): derived, caught up by readers --------------------
    @abstractmethod
    def _index_stale(self) -> bool:
        """Whether the journal may have changed since the index last caught up (a cheap check)."""

    @abstractmethod
    def _index_changes(self, cur: Cursor, batch: int) -> tuple[object, list[str]]:
        """Inside the catch-up transaction: sagas changed since the last catch-up (at most about
        ``batch``), and a token that :meth:`_index_consume` takes to mark them caught up."""

    @abstractmethod
    def _index_consume(self, cur: Cursor, token: object) -> None:
        """Record, in the same transaction, that the changes ``token`` names are folded."""

    @abstractmethod
    def _index_forget(self, cur: Cursor) -> None:
        """Drop every row and mark every saga as changed (the start of a rebuild)."""

    def _notes_waiting(self) -> bool:
        """``_index_stale`` for a store whose journal triggers note changed sagas in ``INDEX_DIRTY``."""
        with self._cursor() as cur:
            cur.execute(f"SELECT EXISTS (SELECT 1 FROM {INDEX_DIRTY})")
            row = cur.fetchone()
        return bool(row is not None and row[0])

    def _drop_index_rows(self, cur: Cursor) -> None:
        """What every dialect's ``_index_forget`` starts with: no rows, no counts."""
        cur.execute(f"DELETE FROM {INDEX}")
        cur.execute(f"DELETE FROM {INDEX_COUNTS}")

    def refresh_index(self, fold: Folder, batch: int) -> int:
        try:
            return self._refresh_index(fold, batch)
        except StoreUnavailableError:
            raise  # the journal retries these
        except StoreError as exc:
            raise StoreError(
                f"the saga index cannot catch up with the journal: {exc}. Operator reads (saga "
                "list, counts, in-doubt calls, doctor, recover) write the index's tables first, so "
                "they need a writable database and the tables of `sagacity db init`; verify and "
                "export read the journal alone and work on a read-only copy"
            ) from exc

    def _refresh_index(self, fold: Folder, batch: int) -> int:
        if not self._index_stale():
            return 0
        folded = 0
        while True:
            # One transaction a batch, serialized across processes (SQLite's write lock, or an
            # advisory lock on PostgreSQL): the later of two catch-ups always reads the later
            # journal, so a row is simply replaced, and one taken away by a deletion goes too.
            with self._cursor(transaction=True) as cur:
                token, saga_ids = self._index_changes(cur, batch)
                if not saga_ids:
                    self._index_consume(cur, token)
                    return folded
                rows = fold(self._journals(cur, saga_ids))
                self._put_index_rows(cur, saga_ids, rows)
                self._index_consume(cur, token)
            folded += len(saga_ids)

    def refold_index(self, fold: Folder, saga_ids: Sequence[str]) -> None:
        with self._cursor(transaction=True) as cur:
            self._index_lock(cur)  # after any catch-up under way: this fold reads the later journal
            self._put_index_rows(cur, saga_ids, fold(self._journals(cur, saga_ids)))

    @abstractmethod
    def _index_lock(self, cur: Cursor) -> None:
        """Serialize index writers across processes for the rest of this transaction."""

    def rebuild_index(self, fold: Folder, batch: int) -> int:
        with self._cursor(transaction=True) as cur:
            self._index_forget(cur)
        self._refresh_index(fold, batch)
        with self._cursor() as cur:
            cur.execute(f"SELECT count(*) FROM {INDEX}")
            return int(cur.fetchone()[0])

    def _journals(self, cur: Cursor, saga_ids: Sequence[str]) -> dict[str, list[Entry]]:
        """Every entry of these sagas, by saga, in seq order: one statement."""
        marks = ", ".join("?" * len(saga_ids))
        cur.execute(
            self._sql(
                f"SELECT {ENTRY_COLUMNS} FROM {JOURNAL} WHERE saga_id IN ({marks}) ORDER BY saga_id, seq"
            ),
            tuple(saga_ids),
        )
        journals: dict[str, list[Entry]] = {sid: [] for sid in saga_ids}
        for row in cur.fetchall():
            journals[row[0]].append(self._entry(row))
        return journals

    def _put_index_rows(self, cur: Cursor, saga_ids: Sequence[str], rows: Sequence[IndexRow]) -> None:
        """Replace the rows of ``saga_ids`` with ``rows`` (a saga without one has no entries left),
        and move the counts by status by what changed, so counting costs one small read."""
        marks = ", ".join("?" * len(saga_ids))
        cur.execute(
            self._sql(f"SELECT status, count(*) FROM {INDEX} WHERE saga_id IN ({marks}) GROUP BY status"),
            tuple(saga_ids),
        )
        moved: dict[str, int] = {}
        for status, count in cur.fetchall():
            moved[status] = moved.get(status, 0) - int(count)
        for row in rows:
            moved[str(row.status)] = moved.get(str(row.status), 0) + 1
        for status, change in sorted(moved.items()):
            if change:
                cur.execute(
                    self._sql(self.dialect.upsert(INDEX_COUNTS, ("status",), ("sagas",), add=("sagas",))),
                    (status, change),
                )
        cur.execute(self._sql(f"DELETE FROM {INDEX} WHERE saga_id IN ({marks})"), tuple(saga_ids))
        width = len(INDEX_COLUMNS.split(","))
        for start in range(0, len(rows), 100):
            chunk = rows[start : start + 100]
            values = ", ".join(["(" + ", ".join("?" * width) + ")"] * len(chunk))
            params = [value for row in chunk for value in self._index_params(row)]
            cur.execute(self._sql(f"INSERT INTO {INDEX} ({INDEX_COLUMNS}) VALUES {values}"), params)

    def _index_params(self, row: IndexRow) -> tuple[Any, ...]:
        return (
            row.saga_id,
            str(row.status),
            row.entry_count,
            self._ts_out(row.started_at),
            self._ts_out(row.updated_at),
            row.awaiting_approval,
            row.in_doubt,
            row.compensating,
            row.broken_at,
            row.broken_message,
            row.attention,
        )

    def _index_row(self, row: Sequence[Any]) -> IndexRow:
        sid, status, count, started, updated, awaiting, in_doubt, compensating, broken_at, message, _ = row
        return IndexRow(
            sid,
            SagaStatus(status),
            int(count),
            self._ts_in(started),
            self._ts_in(updated),
            int(awaiting),
            int(in_doubt),
            bool(compensating),
            None if broken_at is None else int(broken_at),
            message,
        )

    def index_page(
        self,
        status: SagaStatus | None,
        limit: int | None,
        after: tuple[datetime, str] | None,
        where: SagaFilter = ANY_SAGA,
    ) -> list[IndexRow]:
        conditions: list[str] = []
        params: list[Any] = []
        if status is not None:
            conditions.append("status = ?")
            params.append(str(status))
        if after is not None:
            conditions.append("(updated_at, saga_id) < (?, ?)")
            params += [self._ts_out(after[0]), after[1]]
        if where.prefix is not None:  # not LIKE: SQLite's is case-insensitive, and % _ are wild
            conditions.append("substr(saga_id, 1, ?) = ?")
            params += [len(where.prefix), where.prefix]
        if where.broken_chain is not None:
            conditions.append("broken_at IS NOT NULL" if where.broken_chain else "broken_at IS NULL")
        if where.since is not None:
            conditions.append("updated_at >= ?")
            params.append(self._ts_out(where.since))
        if where.until is not None:
            conditions.append("updated_at < ?")
            params.append(self._ts_out(where.until))
        if where.tool is not None:  # the journal's key (saga_id, seq) finds a saga's entries
            conditions.append(
                f"EXISTS (SELECT 1 FROM {JOURNAL} j WHERE j.saga_id = {INDEX}.saga_id AND j.tool_name = ?)"
            )
            params.append(where.tool)
        sql = f"SELECT {INDEX_COLUMNS} FROM {INDEX}"
        if conditions:
            sql += " WHERE " + " AND ".join(conditions)
        sql += " ORDER BY updated_at DESC, saga_id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._cursor() as cur:
            cur.execute(self._sql(sql), params)
            return [self._index_row(r) for r in cur.fetchall()]

    def index_counts(self) -> dict[SagaStatus, int]:
        with self._cursor() as cur:
            cur.execute(f"SELECT status, sagas FROM {INDEX_COUNTS} WHERE sagas > 0")
            return {SagaStatus(status): int(n) for status, n in cur.fetchall()}

    def index_watched(self, watch: Watch) -> list[IndexRow]:
        with self._cursor() as cur:
            cur.execute(f"SELECT {INDEX_COLUMNS} FROM {INDEX} WHERE {_WATCHED[watch]} ORDER BY saga_id")
            return [self._index_row(r) for r in cur.fetchall()]

    def index_journals(self, saga_ids: Sequence[str]) -> dict[str, list[Entry]]:
        journals: dict[str, list[Entry]] = {}
        for start in range(0, len(saga_ids), _JOURNALS_PER_READ):
            with self._cursor() as cur:
                journals.update(self._journals(cur, saga_ids[start : start + _JOURNALS_PER_READ]))
        return journals

    def index_rows(self, saga_ids: Sequence[str]) -> list[IndexRow]:
        if not saga_ids:
            return []
        marks = ", ".join("?" * len(saga_ids))
        with self._cursor() as cur:
            cur.execute(
                self._sql(f"SELECT {INDEX_COLUMNS} FROM {INDEX} WHERE saga_id IN ({marks}) ORDER BY saga_id"),
                tuple(saga_ids),
            )
            return [self._index_row(r) for r in cur.fetchall()]


class _Raced(Exception):
    """Another checkpointer logged the same indexes first; roll back and read again."""


class SQLEntryLog:
    """The checkpoint log in the journal's own database: one working table, ``sagacity_log``
    (``log_index`` primary key; ``saga_id``, ``seq``, ``hash``; ``(saga_id, seq)`` unique)."""

    def __init__(self, store: SQLStore) -> None:
        self._store = store
        self._ready = False

    def _ensure(self, *, create: bool) -> bool:
        """Whether the table exists, making it first if ``create``: reads never create it, so a
        read-only session (or a journal never checkpointed) reads an empty log."""
        if self._ready:
            return True
        if not self._store.has_table(LOG):
            if not create:
                return False
            self._store.create_table(self._store.log_table_ddl())
        self._ready = True
        return True

    def extend(self) -> int:
        self._ensure(create=True)
        added = 0
        while True:
            batch = self._extend_retried()
            added += batch
            if batch < EXTEND_BATCH:
                return added

    def _extend_retried(self) -> int:
        # The loser of a race backs off a random, growing moment, so two checkpointers that keep
        # colliding (on a loaded machine, in lockstep) drift apart instead of exhausting the bound.
        for attempt in range(_ATTEMPTS - 1):
            try:
                return self._extend_checked()
            except _Raced:
                time.sleep(random.uniform(0, min(1.0, 0.01 * 2**attempt)))
        try:
            return self._extend_checked()
        except _Raced as exc:
            raise StoreError("the log kept changing under this checkpointer: another logs as often") from exc

    def _extend_checked(self) -> int:
        """One batch; a key another checkpointer took first is a race (rolled back) on every dialect."""
        try:
            return self._extend_once()
        except StoreError as exc:
            if exc.__cause__ is not None and self._store.dialect.lost(exc.__cause__):
                raise _Raced from exc
            raise

    def _extend_once(self) -> int:
        sql = self._store._sql
        # Where the database cannot skip a taken key, the insert fails on it instead (``taken``).
        skip = " ON CONFLICT DO NOTHING" if self._store.dialect.on_conflict else ""
        with self._store._cursor(transaction=True) as cur:
            cur.execute(f"SELECT COALESCE(MAX(log_index) + 1, 0) FROM {LOG}")
            following = int(cur.fetchone()[0])
            cur.execute(
                sql(
                    f"SELECT j.saga_id, j.seq, j.hash FROM {JOURNAL} j WHERE NOT EXISTS "
                    f"(SELECT 1 FROM {LOG} l WHERE l.saga_id = j.saga_id AND l.seq = j.seq) "
                    "ORDER BY j.timestamp, j.saga_id, j.seq LIMIT ?"
                ),
                (EXTEND_BATCH,),
            )
            rows = cur.fetchall()
            for start in range(0, len(rows), 500):
                chunk = rows[start : start + 500]
                params = [
                    value
                    for offset, (saga_id, seq, hash_) in enumerate(chunk)
                    for value in (following + start + offset, saga_id, int(seq), hash_)
                ]
                cur.execute(
                    sql(
                        f"INSERT INTO {LOG} (log_index, saga_id, seq, hash) VALUES "
                        + ", ".join(["(?, ?, ?, ?)"] * len(chunk))
                        + skip
                    ),
                    params,
                )
                if cur.rowcount != len(chunk):
                    raise _Raced
            return len(rows)

    def size(self) -> int:
        if not self._ensure(create=False):
            return 0
        with self._store._cursor() as cur:
            cur.execute(f"SELECT COUNT(*), COALESCE(MAX(log_index) + 1, 0) FROM {LOG}")
            count, following = (int(value) for value in cur.fetchone())
        if count != following:
            raise StoreError(
                f"the log table {LOG} has {following - count} missing row(s) below index {following}: "
                "rows were deleted behind the library's back"
            )
        return count

    def rows(self, start: int, end: int) -> Iterator[LogRow]:
        if not self._ensure(create=False):
            if start < end:
                raise StoreError(f"the log has no row {start}: the table {LOG} does not exist")
            return
        statement = self._store._sql(
            f"SELECT l.log_index, l.saga_id, l.seq, l.hash, j.hash FROM {LOG} l LEFT JOIN {JOURNAL} j "
            "ON j.saga_id = l.saga_id AND j.seq = l.seq "
            "WHERE l.log_index >= ? AND l.log_index < ? ORDER BY l.log_index"
        )
        position = start
        while position < end:
            upto = min(end, position + BATCH)
            with self._store._cursor() as cur:
                cur.execute(statement, (position, upto))
                rows = cur.fetchall()
            for index, saga_id, seq, logged, current in rows:
                if int(index) != position:
                    raise StoreError(f"the log has no row {position}: rows were deleted")
                yield LogRow(position, saga_id, int(seq), logged, current)
                position += 1
            if position < upto:
                raise StoreError(f"the log has no row {position}: rows were deleted")

    def journal_entries(self) -> int:
        with self._store._cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {JOURNAL}")
            return int(cur.fetchone()[0])

    def last_logged(self, saga_id: str, below: int) -> LogRow | None:
        if not self._ensure(create=False):
            return None
        with self._store._cursor() as cur:
            cur.execute(
                self._store._sql(
                    f"SELECT log_index FROM {LOG} WHERE saga_id = ? AND log_index < ? "
                    "ORDER BY seq DESC LIMIT 1"
                ),
                (saga_id, below),
            )
            row = cur.fetchone()
        return None if row is None else next(self.rows(int(row[0]), int(row[0]) + 1))
