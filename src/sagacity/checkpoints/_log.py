"""The journal's append-only log: each entry gets a log index once, and the tree only grows.

The shared schema (SPEC §2) has no column that orders entries across sagas, and adding one to the
append path would slow every tool call. So the **checkpointer** fixes the order, not the appends:
each run takes the entries it has not logged yet, in a deterministic order (timestamp, then saga
id, then seq), gives them the next log indexes, and records them in its own working table beside
the SPEC tables::

    sagacity_log (log_index BIGINT PRIMARY KEY, saga_id, seq, hash, UNIQUE (saga_id, seq))

A row is only ever inserted, so a log index, once given, names the same entry forever: leaf ``i``
of the tree is ``leaf(saga_id, seq, hash)`` of row ``i``, and the tree of a later run extends the
tree of an earlier one. Two checkpointers racing insert the same indexes; the loser's insert finds
them taken (``ON CONFLICT DO NOTHING`` writes fewer rows; on MariaDB / MySQL the duplicate-key
error), rolls back and reads again. The operator can rewrite this table like any other, which
is why the checkpoint over it goes to witnesses: a log that re-numbers or re-hashes a logged entry
has a new tree that no consistency proof links to the one they cosigned.

On a store without SQL (``memory://``) the log is held in the process, like the journal.
"""

from __future__ import annotations

import random
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import sagacity.checkpoints._merkle as _merkle
from sagacity.errors import StoreError
from sagacity.stores._sql import JOURNAL, LOG, SQLStore
from sagacity.stores.base import Store

#: Leaves read per statement.
BATCH = 5000
#: Entries logged per transaction. Each transaction runs one anti-join of the whole journal against
#: the log (the journal has no index that orders it), so a run logging k entries costs about
#: k / EXTEND_BATCH such scans: large, so that a first run over a big journal is not quadratic in
#: practice, and small enough to hold in memory (about 15 MiB of ids and hashes).
EXTEND_BATCH = 50_000
_ATTEMPTS = 20
#: A journal made before the log was part of the schema gets its table on first checkpoint.
_DDL = (
    f"CREATE TABLE IF NOT EXISTS {LOG} (log_index BIGINT PRIMARY KEY, saga_id TEXT NOT NULL, "
    "seq BIGINT NOT NULL, hash CHAR(64) NOT NULL, UNIQUE (saga_id, seq))"
)
#: MariaDB / MySQL: the journal's own column types, and its table's (binary) collation, so ids
#: compare and join byte for byte as they do in the journal.
_MYSQL_DDL = (
    f"CREATE TABLE IF NOT EXISTS {LOG} (log_index BIGINT PRIMARY KEY, saga_id VARCHAR(512) NOT NULL, "
    "seq BIGINT NOT NULL, hash CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, "
    "UNIQUE (saga_id, seq)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE={collation}"
)


@dataclass(frozen=True, slots=True)
class LogLeaf:
    """Log row ``index``: the entry (saga_id, seq), its hash as logged, and as the journal holds it
    now (``current`` is None when the journal no longer has that entry)."""

    index: int
    saga_id: str
    seq: int
    logged: str
    current: str | None

    @property
    def intact(self) -> bool:
        return self.current == self.logged

    def leaf_hash(self, *, as_journal: bool = False) -> bytes:
        """The tree leaf: "saga S had ``seq`` entries ending in this hash" (a missing row: a hash
        nothing can match)."""
        return _merkle.leaf_hash(self.saga_id, self.seq, (self.current or "") if as_journal else self.logged)


class _Raced(Exception):
    """Another checkpointer logged the same indexes first; roll back and read again."""


class EntryLog(Protocol):
    """A journal's log, as the checkpointer and verifiers use it."""

    def extend(self) -> int:
        """Log every entry not yet logged; how many were added."""
        ...

    def size(self) -> int:
        """How many entries are logged (the tree size); refuses a log with gaps."""
        ...

    def leaves(self, start: int, end: int) -> Iterator[LogLeaf]:
        """Rows ``[start, end)`` in index order, each with its logged and its current hash."""
        ...

    def journal_entries(self) -> int:
        """How many entries the journal holds now, logged or not."""
        ...

    def last_logged(self, saga_id: str, below: int) -> LogLeaf | None:
        """The saga's entry with the highest seq among log indexes below ``below``."""
        ...


def subtrees(log: EntryLog, *, as_journal: bool) -> _merkle.Subtree:
    """Subtree roots of the log's tree, streamed from its rows."""
    return lambda start, end: _merkle.root(
        leaf.leaf_hash(as_journal=as_journal) for leaf in log.leaves(start, end)
    )


def roots_at(log: EntryLog, sizes: set[int], end: int, *, as_journal: bool) -> dict[int, bytes]:
    """The tree heads at each of ``sizes`` (each <= ``end``), in one pass over the first ``end`` rows."""
    heads: dict[int, bytes] = {}
    stack: list[tuple[int, bytes]] = []
    if 0 in sizes:
        heads[0] = _merkle.root([])
    for count, leaf in enumerate(log.leaves(0, end), start=1):
        size, digest = 1, leaf.leaf_hash(as_journal=as_journal)
        while stack and stack[-1][0] == size:
            left_size, left = stack.pop()
            size, digest = left_size + size, _merkle.node_hash(left, digest)
        stack.append((size, digest))
        if count in sizes:
            head = stack[-1][1]
            for _, left in reversed(stack[:-1]):
                head = _merkle.node_hash(left, head)
            heads[count] = head
    return heads


class SQLEntryLog:
    """The log in the journal's own database (SQLite, PostgreSQL): one working table."""

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
            self._store.create_table(self._ddl())
        self._ready = True
        return True

    def _ddl(self) -> str:
        if self._store.dialect.on_conflict:
            return _DDL
        with self._store._cursor() as cur:
            cur.execute(
                self._store._sql(
                    "SELECT table_collation FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() AND table_name = ?"
                ),
                (JOURNAL,),
            )
            row = cur.fetchone()
        collation = str(row[0]) if row is not None else ""
        if not collation.replace("_", "").isalnum():
            raise StoreError(f"cannot tell the collation of {JOURNAL} (is the schema created?)")
        return _MYSQL_DDL.format(collation=collation)

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
            if exc.__cause__ is not None and self._store.dialect.taken(exc.__cause__):
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

    def leaves(self, start: int, end: int) -> Iterator[LogLeaf]:
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
                yield LogLeaf(position, saga_id, int(seq), logged, current)
                position += 1
            if position < upto:
                raise StoreError(f"the log has no row {position}: rows were deleted")

    def journal_entries(self) -> int:
        with self._store._cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {JOURNAL}")
            return int(cur.fetchone()[0])

    def last_logged(self, saga_id: str, below: int) -> LogLeaf | None:
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
        return None if row is None else next(self.leaves(int(row[0]), int(row[0]) + 1))


class ProcessEntryLog:
    """The log of a store without SQL, held in this process (as ``memory://`` holds its journal)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._rows: list[tuple[str, int, str]] = []
        self._logged: dict[str, int] = {}

    def extend(self) -> int:
        found = []
        for saga_id in self._store.saga_ids():
            for entry in self._store.read_entries(saga_id, self._logged.get(saga_id, 0)):
                found.append((entry.timestamp, saga_id, entry.seq, entry.hash))
        for _, saga_id, seq, hash_ in sorted(found):
            self._rows.append((saga_id, seq, hash_))
            self._logged[saga_id] = seq
        return len(found)

    def size(self) -> int:
        return len(self._rows)

    def leaves(self, start: int, end: int) -> Iterator[LogLeaf]:
        for index in range(start, min(end, len(self._rows))):
            saga_id, seq, logged = self._rows[index]
            entry = self._store.get_entry(saga_id, seq)
            yield LogLeaf(index, saga_id, seq, logged, entry.hash if entry is not None else None)

    def journal_entries(self) -> int:
        return sum(len(self._store.read_entries(saga_id)) for saga_id in self._store.saga_ids())

    def last_logged(self, saga_id: str, below: int) -> LogLeaf | None:
        found = [i for i, row in enumerate(self._rows[:below]) if row[0] == saga_id]
        return next(self.leaves(found[-1], found[-1] + 1)) if found else None


_process_logs: weakref.WeakKeyDictionary[Store, ProcessEntryLog] = weakref.WeakKeyDictionary()


def entry_log(store: Store) -> EntryLog:
    """The log of the journal in ``store``."""
    if isinstance(store, SQLStore):
        return SQLEntryLog(store)
    log = _process_logs.get(store)
    if log is None:
        log = _process_logs[store] = ProcessEntryLog(store)
    return log
