"""The saga index: each saga's status and counts, derived from the journal, for operator reads.

Listing sagas, counting them by status, finding in-doubt calls and the sagas ``recover`` and the
doctor must look at would otherwise fold every saga's journal: minutes at a million sagas. The
index keeps one row per saga (:class:`IndexRow`) beside the shared schema, so those reads are
range reads whose cost does not grow with the journal.

It is never authoritative. A row is the fold (``_state.fold``) and chain verification of the
saga's whole journal as read at some moment; rows are rewritten only by a fold of a longer (or
equal) journal. It can be dropped and rebuilt at any time (``sagacity db reindex``).

It is kept current by the readers, not the writers, so an append costs no more than it did:

* every read first catches up (:meth:`SagaIndex.refresh`): the store names the sagas whose
  journal changed since the index last looked, and those are folded again;
* how a store notices a change is its own (SQLite: the journal's rowid, which only grows;
  PostgreSQL: row triggers that note the saga of every row inserted, updated or deleted),
  so rows another implementation writes straight into the shared table are caught up too.

Stores without an index of their own (``memory://``, a user's store) are folded whole on each
read by :class:`ScanIndex`, the old cost, with the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, cast

from sagacity._state import SagaState
from sagacity.chain import Verification, to_utc_micros, verify
from sagacity.errors import InvalidValueError, StoreError
from sagacity.model import Entry, Progress, SagaStatus
from sagacity.stores.base import (
    ANY_SAGA,
    Capability,
    IndexedStore,
    IndexRow,
    SagaFilter,
    Store,
    Watch,
)

if TYPE_CHECKING:
    from sagacity._journal import Journal

#: Sagas folded per catch-up transaction: bounds memory and how long a catch-up holds a write.
REFRESH_BATCH = 500


def saga_filter(
    prefix: str | None = None,
    tool: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    broken_chain: bool | None = None,
) -> SagaFilter:
    """A :class:`SagaFilter` from a caller's values, checked: texts are ``str``, moments are
    datetimes (aware ones converted to naive UTC, naive ones taken as UTC), ``broken_chain`` a
    bool."""
    for name, text in (("prefix", prefix), ("tool", tool)):
        if text is not None and not isinstance(text, str):
            raise InvalidValueError(f"{name} must be a string, not {type(text).__name__}")
    if broken_chain is not None and not isinstance(broken_chain, bool):
        raise InvalidValueError(f"broken_chain must be True, False or None, not {broken_chain!r}")
    moments = utc_moment("since", since), utc_moment("until", until)
    return SagaFilter(prefix, tool, *moments, broken_chain)


def utc_moment(name: str, moment: datetime | None) -> datetime | None:
    """``moment`` as the journal keeps time (naive UTC), or None; anything else is refused."""
    if moment is None:
        return None
    if not isinstance(moment, datetime):
        raise InvalidValueError(f"{name} must be a datetime, not {type(moment).__name__}")
    return to_utc_micros(moment)


def index_row(saga_id: str, entries: Sequence[Entry]) -> IndexRow | None:
    """The row for a saga's whole journal (seq order), or None when it has no entries.

    Folding stops at an entry the fold cannot take (a row another writer made up); the chain
    check names it, so the saga shows as broken rather than the index failing.
    """
    if not entries:
        return None
    verification = verify(entries)
    state = SagaState(saga_id)
    for entry in entries:
        try:
            state.apply(entry)
        except (ValueError, KeyError) as exc:
            if verification.valid:
                verification = Verification(False, len(entries), entry.seq - 1, f"unreadable: {exc}")
            break
    return IndexRow(
        saga_id,
        state.status,
        len(entries),
        entries[0].timestamp,
        entries[-1].timestamp,
        len(state.open_gates),
        len(state.open_calls) + len(state.open_compensations),
        state.compensating,
        None if verification.valid else verification.break_at_index,
        "" if verification.valid else verification.message,
    )


def index_rows(journals: Mapping[str, Sequence[Entry]]) -> list[IndexRow]:
    """Rows for the sagas read, skipping sagas that have no entries (nothing to index)."""
    return [row for sid, entries in journals.items() if (row := index_row(sid, entries)) is not None]


class SagaIndex:
    """Operator reads over a store's index, caught up before each read."""

    def __init__(self, store: IndexedStore, journal: Journal) -> None:
        self._store = store
        self._read = journal.read  # bounded and retried like every other read

    def refresh(self) -> int:
        return self._read(self._store.refresh_index, index_rows, REFRESH_BATCH)

    def rebuild(self, progress: Progress | None = None) -> int:
        if progress is None:
            return self._read(self._store.rebuild_index, index_rows, REFRESH_BATCH)
        total = len(self._read(cast(Store, self._store).saga_ids))
        done = [0, 0]  # sagas folded, entries read

        def counted(journals: Mapping[str, Sequence[Entry]]) -> list[IndexRow]:
            rows = index_rows(journals)
            done[0] += len(journals)
            done[1] += sum(len(entries) for entries in journals.values())
            progress(min(done[0], total), total, done[1])
            return rows

        return self._read(self._store.rebuild_index, counted, REFRESH_BATCH)

    def page(
        self,
        status: SagaStatus | None,
        limit: int | None,
        after: tuple[datetime, str] | None,
        where: SagaFilter = ANY_SAGA,
    ) -> list[IndexRow]:
        self.refresh()
        return self._read(self._store.index_page, status, limit, after, where)

    def counts(self) -> dict[SagaStatus, int]:
        self.refresh()
        return self._read(self._store.index_counts)

    def watched(self, watch: Watch) -> list[IndexRow]:
        self.refresh()
        return self._read(self._store.index_watched, watch)

    def rows(self, saga_ids: Sequence[str]) -> list[IndexRow]:
        self.refresh()
        return self._read(self._store.index_rows, saga_ids)

    def journals(self, saga_ids: Sequence[str]) -> dict[str, list[Entry]]:
        """The journals of the sagas a read picked, read together (a few statements)."""
        return self._read(self._store.index_journals, saga_ids)

    def note_broken(self, saga_id: str, broken_at: int) -> None:
        """A verification found ``saga_id``'s chain broken at ``broken_at``: unless the index
        already says so (one read: a dashboard re-reading a broken saga's page writes nothing),
        fold it again, so every list and counter says so, also when no trigger saw the damage.
        Best effort: on a read-only copy the index cannot be written, and the verification's own
        answer is what the caller reads."""
        try:
            if [row.broken_at for row in self._read(self._store.index_rows, [saga_id])] == [broken_at]:
                return
            self._read(self._store.refold_index, index_rows, [saga_id])
        except StoreError:
            pass  # read-only or unreachable: the index is a cache, and the caller has the truth


class ScanIndex:
    """The same reads for a store without an index: every saga's journal folded on each read."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def _saga_ids(self) -> list[str]:
        return self._journal.read(self._journal.store.saga_ids)

    def _entries(self, saga_id: str) -> list[Entry]:
        return self._journal.read(self._journal.store.read_entries, saga_id)

    def _all(self) -> list[IndexRow]:
        return index_rows({sid: self._entries(sid) for sid in self._saga_ids()})

    def refresh(self) -> int:
        return 0

    def rebuild(self, progress: Progress | None = None) -> int:
        count = len(self._saga_ids())
        if progress is not None:
            progress(count, count, 0)
        return count

    def page(
        self,
        status: SagaStatus | None,
        limit: int | None,
        after: tuple[datetime, str] | None,
        where: SagaFilter = ANY_SAGA,
    ) -> list[IndexRow]:
        rows = sorted(self._all(), key=lambda r: (r.updated_at, r.saga_id), reverse=True)
        chosen = [
            r
            for r in rows
            if (status is None or r.status is status)
            and (after is None or (r.updated_at, r.saga_id) < after)
            and where.keeps(r, self._tools)
        ]
        return chosen if limit is None else chosen[:limit]

    def _tools(self, saga_id: str) -> set[str]:
        return {e.tool_name for e in self._entries(saga_id)}

    def counts(self) -> dict[SagaStatus, int]:
        counts: dict[SagaStatus, int] = {}
        for row in self._all():
            counts[row.status] = counts.get(row.status, 0) + 1
        return counts

    def watched(self, watch: Watch) -> list[IndexRow]:
        return sorted((r for r in self._all() if r.watched(watch)), key=lambda r: r.saga_id)

    def rows(self, saga_ids: Sequence[str]) -> list[IndexRow]:
        return index_rows({sid: self._entries(sid) for sid in saga_ids})

    def journals(self, saga_ids: Sequence[str]) -> dict[str, list[Entry]]:
        return {sid: self._entries(sid) for sid in saga_ids}

    def note_broken(self, saga_id: str, broken_at: int) -> None:
        """Nothing to note: every read folds and verifies the journal as it is."""


def open_index(store: Store, journal: Journal) -> SagaIndex | ScanIndex:
    """The store's own index when it declares one (``Capability.SAGA_INDEX``), else a scan."""
    if Capability.SAGA_INDEX in store.capabilities:
        return SagaIndex(cast(IndexedStore, store), journal)
    return ScanIndex(journal)
