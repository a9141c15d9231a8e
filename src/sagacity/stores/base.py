"""The contract every journal store fulfils.

A store only persists: hashing, seq assignment and retries live in the core (``chain``,
``_journal``), so every backend writes the same bytes. The contract is a Protocol, so a user's own
store needs no base class and a type checker still verifies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from sagacity.model import ApprovalRequest, Entry

__all__ = ["Store"]


@runtime_checkable
class Store(Protocol):
    """Primitives the core needs; each call is one short transaction."""

    url: str

    def init_schema(self) -> None:
        """Create the tables if missing; idempotent and safe when processes race on it."""

    def insert_entry(self, entry: Entry) -> bool:
        """Durably insert one row. Return False, writing nothing, if (saga_id, seq) exists.

        Raises ``StoreUnavailableError`` when the outcome is unknown (the connection died); the
        journal then resolves it by reading back.
        """
        ...

    def insert_entries(self, entries: Sequence[Entry]) -> bool:
        """Durably insert consecutive rows of one saga, all or none. Return False, writing
        nothing, if any (saga_id, seq) exists: a fenced decision lost the race.

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
        """Every saga id with at least one entry, sorted."""
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
