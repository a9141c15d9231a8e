"""The contract every journal store fulfils: required primitives, and optional capabilities it declares.

A store only persists: hashing, seq assignment and retries live in the core (``chain``,
``_journal``), so every backend writes the same bytes. The contract is a Protocol, so a user's own
store needs no base class and a type checker still verifies it.

Beyond :class:`Store`'s required methods a store may offer a few optional ones. It says which in
its ``capabilities`` (a set of :class:`Capability`), and the core reads that set once, when it is
given the store; it never guesses from the methods an object happens to have. Each capability has
a small Protocol of its own naming the methods it promises, and ``sagacity.testing``'s contract
suite checks that a store declaring one has them and that they behave.

==========================  =====================================  ==========================
capability                  promises                                used by
==========================  =====================================  ==========================
``STAMPED_INSERT``          :class:`StampedInsert`                  every append, when present
``TRACE_CONTEXT``           :class:`TraceContextStore`              OpenTelemetry gate links
``APPEND_ONLY_GRANT``       :class:`AppendOnlyGrant`                ``sagacity db grant``
``SAGA_INDEX``              :class:`IndexedStore`                   operator reads (else a scan)
``LIVENESS``                :class:`LivenessStore`                  RUNNING seen from any process
``ENTRY_LOG``               :class:`EntryLogStore`                  the log checkpointer
==========================  =====================================  ==========================

Also here: the saga index's rows and the filters a listing passes to it (:class:`IndexRow`,
:class:`SagaFilter`, :class:`Watch`), the checkpoint log's rows (:class:`LogRow`), and
:func:`safe_url`, how a store words its URL in a message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, Protocol, overload, runtime_checkable

from sagacity.model import ApprovalRequest, Entry, SagaStatus
from sagacity.stores._url import safe_url

__all__ = [
    "ANY_SAGA",
    "AppendOnlyGrant",
    "Capability",
    "EntryLogStore",
    "Folder",
    "IndexRow",
    "IndexedStore",
    "LivenessStore",
    "LogRow",
    "SagaFilter",
    "StampedInsert",
    "Store",
    "StoreLog",
    "TraceContextStore",
    "Watch",
    "capable",
    "safe_url",
]


class Capability(StrEnum):
    """An optional part of the contract a store declares in its ``capabilities``."""

    #: ``insert_entry_at(entry, stamp)``: an append also hands over its hashed ``ts`` text, which a
    #: store keeping timestamps as text turns into its own form more cheaply than the datetime.
    STAMPED_INSERT = "stamped-insert"
    #: ``put_trace_context`` / ``get_trace_context``: a gate's W3C trace context, kept beside its
    #: approval request so an approval in another process links to the trace that gated.
    TRACE_CONTEXT = "trace-context"
    #: ``grant_append_only(role)``: the privilege split of SPEC §2 for a database with roles.
    APPEND_ONLY_GRANT = "append-only-grant"
    #: The saga index kept in the store itself (``IndexedStore``, internal to the
    #: SQL stores for now); a store without it is folded whole on each operator read.
    SAGA_INDEX = "saga-index"
    #: ``hold_live`` / ``release_live`` / ``live_among``: a saga running in a process holds a
    #: liveness lease that dies with the process, so every process on the store can tell a
    #: running saga from one whose process is gone. Without it, RUNNING is known only in the
    #: process that runs the saga.
    LIVENESS = "liveness"
    #: ``entry_log()``: the log the checkpointer orders entries in (``checkpoint_log``), kept in
    #: the store's own database, so every process and every run extends the same log. Without it
    #: the log is held in the checkpointing process: right only for a journal that lives in the
    #: process too (``memory://``).
    ENTRY_LOG = "entry-log"


@runtime_checkable
class Store(Protocol):
    """Primitives the core needs; each call is one short transaction."""

    url: str
    #: What this store offers beyond the required methods (``frozenset()`` for none).
    capabilities: frozenset[Capability]

    def init_schema(self) -> None:
        """Create the tables if missing; idempotent and safe when processes race on it."""

    def insert_entry(self, entry: Entry) -> bool:
        """Durably insert one row. Return False, writing nothing, if (saga_id, seq) exists.

        Raises ``StoreUnavailableError`` when the outcome is unknown (the connection died); the
        journal then resolves it by reading back.
        """
        ...

    def insert_entries(self, entries: Sequence[Entry]) -> bool:
        """Durably insert rows, all or none: consecutive rows of one saga, or of several (a
        call's INTENT with its budget's debits, each chain's rows consecutive and in order).
        Return False, writing nothing, if any (saga_id, seq) exists: a fenced decision lost the
        race.

        Raises ``StoreUnavailableError`` when the outcome is unknown, as ``insert_entry`` does.
        """
        ...

    def lease(self, saga_id: str, *, wait: bool) -> AbstractContextManager[bool]:
        """Hold the saga's lease for the block: exclusive across threads and processes on this
        store, and released when its holder dies. Yields False (not waiting) if ``wait`` is
        False and another holder has it."""
        ...

    def tail(self, saga_id: str) -> Entry | None:
        """The entry with the highest seq, or None for a saga with no entries."""
        ...

    def get_entry(self, saga_id: str, seq: int) -> Entry | None:
        """The entry at (saga_id, seq), if any."""
        ...

    def read_entries(self, saga_id: str, after_seq: int = 0, limit: int | None = None) -> list[Entry]:
        """Entries with seq > after_seq in seq order, at most ``limit`` of them."""
        ...

    def saga_ids(self) -> list[str]:
        """Every saga id with at least one entry, sorted by code point (UTF-8 byte order)."""
        ...

    def put_approval_request(self, request: ApprovalRequest) -> None:
        """Store a request, replacing any with the same (saga_id, journal_seq)."""

    def get_approval_request(self, saga_id: str, journal_seq: int) -> ApprovalRequest | None:
        """The pending request, if any."""
        ...

    def list_approval_requests(self, saga_id: str | None = None) -> Sequence[ApprovalRequest]:
        """Pending requests, oldest first; all sagas' when ``saga_id`` is None."""
        ...

    def delete_approval_request(self, saga_id: str, journal_seq: int) -> bool:
        """Remove a request; True if it existed. Only one of several racing callers gets True."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""


@runtime_checkable
class StampedInsert(Protocol):
    """``Capability.STAMPED_INSERT``."""

    def insert_entry_at(self, entry: Entry, stamp: str) -> bool:
        """``insert_entry`` for an entry the journal stamped ``stamp`` (its hashed ``ts``,
        "<epoch seconds>.<6 digits>"), which is the entry's timestamp as text."""
        ...


@runtime_checkable
class TraceContextStore(Protocol):
    """``Capability.TRACE_CONTEXT``: working state of the OpenTelemetry integration."""

    def put_trace_context(
        self, saga_id: str, journal_seq: int, traceparent: str, tracestate: str = ""
    ) -> None:
        """Keep the trace context of the span that opened the gate at (saga_id, journal_seq), and
        drop every kept context whose approval request is gone."""

    def get_trace_context(self, saga_id: str, journal_seq: int) -> tuple[str, str] | None:
        """The kept (traceparent, tracestate) of that gate, if any."""
        ...


@runtime_checkable
class AppendOnlyGrant(Protocol):
    """``Capability.APPEND_ONLY_GRANT``."""

    def grant_append_only(self, role: str) -> None:
        """Let ``role`` read and append to the journal, never update or delete it; full use of
        the working-state tables. Run as the tables' owner."""


@runtime_checkable
class LivenessStore(Protocol):
    """``Capability.LIVENESS``: leases that say which sagas a living process is running.

    A holder takes its saga's lease when the saga starts or resumes in its process and gives it
    back when it ends; the store drops it when the holder dies (its process, its session). Any
    number of holders may hold one saga's lease. No tool call touches it.
    """

    def hold_live(self, saga_id: str) -> None:
        """Take (or count one more holder of) the saga's liveness lease in this process."""

    def release_live(self, saga_id: str) -> None:
        """Give back one holder's lease; the last holder here releases it. Never raises for a
        lease already gone with its session."""

    def live_among(self, saga_ids: Sequence[str]) -> set[str]:
        """Which of ``saga_ids`` a living process (this one included) holds: one query, or none."""
        ...

    def live_elsewhere(self, saga_ids: Sequence[str]) -> set[str]:
        """Which of ``saga_ids`` a living holder other than this store object holds (another
        process, or another store on the same database in this one): what tells a resume that
        meets a call without outcome whether its runner lives, while this store holds the lease
        itself. One query, or none."""
        ...


@dataclass(frozen=True, slots=True)
class LogRow:
    """Row ``index`` of the checkpoint log: the entry (saga_id, seq), its hash as logged, and as
    the journal holds it now (``current`` is None when the journal no longer has that entry)."""

    index: int
    saga_id: str
    seq: int
    logged: str
    current: str | None


class StoreLog(Protocol):
    """The checkpoint log as a store keeps it: each entry gets the next log index once, and a row,
    once written, is never changed (``checkpoints/_log.py`` builds the tree over it)."""

    def extend(self) -> int:
        """Log every entry not yet logged, in (timestamp, saga_id, seq) order; how many were
        added. Safe against other processes extending at once: an index is given once."""
        ...

    def size(self) -> int:
        """How many entries are logged; raises ``StoreError`` for a log with gaps."""
        ...

    def rows(self, start: int, end: int) -> Iterator[LogRow]:
        """Rows ``[start, end)`` in index order; raises ``StoreError`` at a row that is missing."""
        ...

    def journal_entries(self) -> int:
        """How many entries the journal holds now, logged or not."""
        ...

    def last_logged(self, saga_id: str, below: int) -> LogRow | None:
        """The saga's row with the highest seq among log indexes below ``below``."""
        ...


@runtime_checkable
class EntryLogStore(Protocol):
    """``Capability.ENTRY_LOG``: the checkpoint log kept beside the journal, in the store."""

    def entry_log(self) -> StoreLog:
        """The journal's log (reading it never creates its table; extending it does)."""
        ...


# -- the saga index (``Capability.SAGA_INDEX``): its rows and the filters of a listing ---------
class Watch(StrEnum):
    """Subsets of sagas that operator reads walk; each is a partial index in SQL."""

    #: Sagas with an INTENT that has no outcome (in-doubt calls or compensations).
    IN_DOUBT = "in_doubt"
    #: Sagas whose compensation started (or is due) and has not finished: what ``recover`` finishes.
    COMPENSATING = "compensating"
    #: Sagas started, not ended, with nothing in flight or awaited: what ``recover`` may treat.
    ABANDONED = "abandoned"
    #: Sagas whose hash chain did not verify when last folded (or when last verified).
    BROKEN_CHAIN = "broken_chain"
    #: Everything the doctor looks at: the above, failed compensations, open gates, broken chains.
    ATTENTION = "attention"


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One saga as the index holds it: a fold of its journal up to ``entry_count`` entries."""

    saga_id: str
    status: SagaStatus
    entry_count: int
    started_at: datetime
    updated_at: datetime
    awaiting_approval: int
    in_doubt: int
    compensating: bool
    #: Zero-based index of the first entry that breaks the hash chain, or None when it holds.
    broken_at: int | None = None
    broken_message: str = ""

    @property
    def attention(self) -> bool:
        """Whether the doctor must look at this saga."""
        return (
            self.in_doubt > 0
            or self.compensating
            or self.broken_at is not None
            or self.status
            in (SagaStatus.COMPENSATION_FAILED, SagaStatus.AWAITING_APPROVAL, SagaStatus.ABANDONED)
        )

    def watched(self, watch: Watch) -> bool:
        if watch is Watch.IN_DOUBT:
            return self.in_doubt > 0
        if watch is Watch.COMPENSATING:
            return self.compensating
        if watch is Watch.ABANDONED:
            return self.status is SagaStatus.ABANDONED
        if watch is Watch.BROKEN_CHAIN:
            return self.broken_at is not None
        return self.attention


@dataclass(frozen=True, slots=True)
class SagaFilter:
    """Which sagas a listing keeps: those meeting every condition given (None: any).

    ``prefix``: the saga id starts with it (case-sensitive). ``tool``: the journal has an entry of
    that tool. ``since`` / ``until``: last updated at or after ``since`` and before ``until``
    (naive UTC, as the journal keeps time). ``broken_chain``: True keeps only sagas whose chain
    did not verify when last folded, False only those whose chain did.
    """

    prefix: str | None = None
    tool: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    broken_chain: bool | None = None

    def keeps(self, row: IndexRow, tools: Callable[[str], set[str]]) -> bool:
        """Whether ``row`` is kept; ``tools(saga_id)`` (asked only when needed) names its tools."""
        return (
            (self.prefix is None or row.saga_id.startswith(self.prefix))
            and (self.since is None or row.updated_at >= self.since)
            and (self.until is None or row.updated_at < self.until)
            and (self.broken_chain is None or (row.broken_at is not None) is self.broken_chain)
            and (self.tool is None or self.tool in tools(row.saga_id))
        )

    def keeps_request(self, request: ApprovalRequest) -> bool:
        """Whether an approval request is kept: its saga id, its tool, when it was requested."""
        return (
            (self.prefix is None or request.saga_id.startswith(self.prefix))
            and (self.tool is None or request.tool_name == self.tool)
            and (self.since is None or request.created_at >= self.since)
            and (self.until is None or request.created_at < self.until)
        )


#: Every saga.
ANY_SAGA = SagaFilter()


#: What a store calls to turn journals it read into rows (the store never folds itself).
Folder = Callable[[Mapping[str, Sequence[Entry]]], list[IndexRow]]


@runtime_checkable
class IndexedStore(Protocol):
    """``Capability.SAGA_INDEX``: a store that keeps the index itself (the SQL stores)."""

    def refresh_index(self, fold: Folder, batch: int) -> int:
        """Fold again every saga whose journal changed since the last refresh; how many."""
        ...

    def rebuild_index(self, fold: Folder, batch: int) -> int:
        """Forget every row and fold every saga again; how many sagas are indexed."""
        ...

    def index_page(
        self,
        status: SagaStatus | None,
        limit: int | None,
        after: tuple[datetime, str] | None,
        where: SagaFilter = ANY_SAGA,
    ) -> list[IndexRow]:
        """Rows by (updated_at, saga_id) descending, strictly after ``after``; one status or all;
        only the sagas ``where`` keeps."""
        ...

    def index_counts(self) -> dict[SagaStatus, int]:
        """How many sagas have each status (statuses with none are left out)."""
        ...

    def index_watched(self, watch: Watch) -> list[IndexRow]:
        """The rows of one watched subset, by saga id."""
        ...

    def index_rows(self, saga_ids: Sequence[str]) -> list[IndexRow]:
        """The rows of these sagas (those indexed)."""
        ...

    def index_journals(self, saga_ids: Sequence[str]) -> dict[str, list[Entry]]:
        """Every entry of these sagas, by saga in the order given, each in seq order."""
        ...

    def refold_index(self, fold: Folder, saga_ids: Sequence[str]) -> None:
        """Fold these sagas' journals again now, whether or not the store noticed a change: a
        verification found a break no change note announced (a file edited in place)."""
        ...


@overload
def capable(store: Store, capability: Literal[Capability.STAMPED_INSERT]) -> StampedInsert | None: ...
@overload
def capable(store: Store, capability: Literal[Capability.TRACE_CONTEXT]) -> TraceContextStore | None: ...
@overload
def capable(store: Store, capability: Literal[Capability.APPEND_ONLY_GRANT]) -> AppendOnlyGrant | None: ...
@overload
def capable(store: Store, capability: Literal[Capability.LIVENESS]) -> LivenessStore | None: ...
@overload
def capable(store: Store, capability: Literal[Capability.ENTRY_LOG]) -> EntryLogStore | None: ...
@overload
def capable(store: Store, capability: Capability) -> Any: ...
def capable(store: Store, capability: Capability) -> Any:
    """The store itself, typed as the capability's Protocol, if it declares ``capability``; else None.

    What a store declares is what it gets used for: a method it has but does not declare is
    never called, and one it declares but lacks fails the contract suite (``sagacity.testing``).
    """
    return store if capability in store.capabilities else None
