"""The journal's append-only log: each entry gets a log index once, and the tree only grows.

The shared schema (SPEC §2) has no column that orders entries across sagas, and adding one to the
append path would slow every tool call. So the **checkpointer** fixes the order, not the appends:
each run takes the entries it has not logged yet, in a deterministic order (timestamp, then saga
id, then seq), gives them the next log indexes, and records them in its own working table beside
the SPEC tables (the SQL stores' ``entry_log()``, in ``stores/_sql.py``)::

    sagacity_log (log_index BIGINT PRIMARY KEY, saga_id, seq, hash, UNIQUE (saga_id, seq))

A row is only ever inserted, so a log index, once given, names the same entry forever: leaf ``i``
of the tree is ``leaf(saga_id, seq, hash)`` of row ``i``, and the tree of a later run extends the
tree of an earlier one. Two checkpointers racing insert the same indexes; the loser's insert finds
them taken (``ON CONFLICT DO NOTHING`` writes fewer rows; on MariaDB / MySQL the duplicate-key
error), rolls back and reads again. The operator can rewrite this table like any other, which
is why the checkpoint over it goes to witnesses: a log that re-numbers or re-hashes a logged entry
has a new tree that no consistency proof links to the one they cosigned.

Which log a store gets is what it declares: one declaring ``Capability.ENTRY_LOG`` keeps it
(``stores/base.py``); any other (``memory://``) has it held in the process, like its journal.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import sagacity.checkpoints._merkle as _merkle
from sagacity.stores.base import Capability, LogRow, Store, StoreLog, capable


@dataclass(frozen=True, slots=True)
class LogLeaf(LogRow):
    """A log row (``stores.base.LogRow``) as a leaf of the log's tree."""

    @classmethod
    def of(cls, row: LogRow) -> LogLeaf:
        return cls(row.index, row.saga_id, row.seq, row.logged, row.current)

    @property
    def intact(self) -> bool:
        return self.current == self.logged

    def leaf_hash(self, *, as_journal: bool = False) -> bytes:
        """The tree leaf: "saga S had ``seq`` entries ending in this hash" (a missing row: a hash
        nothing can match)."""
        return _merkle.leaf_hash(self.saga_id, self.seq, (self.current or "") if as_journal else self.logged)


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


class StoreEntryLog:
    """A log the store keeps in its own database, its rows read as the tree's leaves."""

    def __init__(self, rows: StoreLog) -> None:
        self._log = rows

    def extend(self) -> int:
        return self._log.extend()

    def size(self) -> int:
        return self._log.size()

    def leaves(self, start: int, end: int) -> Iterator[LogLeaf]:
        return map(LogLeaf.of, self._log.rows(start, end))

    def journal_entries(self) -> int:
        return self._log.journal_entries()

    def last_logged(self, saga_id: str, below: int) -> LogLeaf | None:
        row = self._log.last_logged(saga_id, below)
        return None if row is None else LogLeaf.of(row)


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
    """The log of the journal in ``store``: the store's own if it declares ``Capability.ENTRY_LOG``
    (chosen by that declaration, never by the store's class), else one held in this process."""
    kept = capable(store, Capability.ENTRY_LOG)
    if kept is not None:
        return StoreEntryLog(kept.entry_log())
    log = _process_logs.get(store)
    if log is None:
        log = _process_logs[store] = ProcessEntryLog(store)
    return log
