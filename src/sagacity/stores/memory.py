"""``memory://``: an in-process journal behind one lock; the fastest backend for tests.

Each ``memory://`` store is its own journal: two stores opened with the same URL share nothing,
and everything is gone when the process ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sagacity.errors import StoreError
from sagacity.model import ApprovalRequest, Entry
from sagacity.stores._lease import LiveLeases, LocalLeases
from sagacity.stores.base import Capability

__all__ = ["MemoryStore"]


class MemoryStore:
    """A journal held in dicts; one lock makes every operation atomic."""

    capabilities = frozenset({Capability.TRACE_CONTEXT, Capability.LIVENESS})

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._lock = threading.Lock()
        self._entries: dict[str, list[Entry]] = {}
        self._requests: dict[tuple[str, int], ApprovalRequest] = {}
        self._traces: dict[tuple[str, int], tuple[str, str]] = {}
        self._leases = LocalLeases()
        self._live = LiveLeases(str, _no_lock, _no_lock)  # one process: its own count says it all

    def init_schema(self) -> None:
        """Nothing to create."""

    def insert_entry(self, entry: Entry) -> bool:
        with self._lock:
            chain = self._entries.setdefault(entry.saga_id, [])
            if entry.seq <= len(chain):
                return False  # the (saga_id, seq) row exists: a lost race, as on SQL stores
            if entry.seq != len(chain) + 1:
                raise StoreError(
                    f"memory store: seq {entry.seq} for saga {entry.saga_id!r} would leave a gap "
                    f"after {len(chain)}"
                )
            chain.append(entry)
            return True

    def insert_entries(self, entries: Sequence[Entry]) -> bool:
        by_saga: dict[str, list[Entry]] = {}
        for entry in entries:
            by_saga.setdefault(entry.saga_id, []).append(entry)
        with self._lock:  # every saga's rows checked before any is written: all or none
            for saga_id, rows in by_saga.items():
                chain = self._entries.get(saga_id, [])
                if rows[0].seq <= len(chain):
                    return False
                if rows[0].seq != len(chain) + 1:
                    raise StoreError(
                        f"memory store: seq {rows[0].seq} for saga {saga_id!r} would leave a gap "
                        f"after {len(chain)}"
                    )
            for saga_id, rows in by_saga.items():
                self._entries.setdefault(saga_id, []).extend(rows)
            return True

    @contextmanager
    def lease(self, saga_id: str, *, wait: bool) -> Iterator[bool]:
        with self._leases.hold(saga_id, wait=wait) as got:
            yield got

    def hold_live(self, saga_id: str) -> None:
        self._live.hold(saga_id)

    def release_live(self, saga_id: str) -> None:
        self._live.release(saga_id)

    def live_among(self, saga_ids: Sequence[str]) -> set[str]:
        return self._live.held(saga_ids)

    def live_elsewhere(self, saga_ids: Sequence[str]) -> set[str]:
        return set()  # a memory store is one object in one process: every holder is this one

    def tail(self, saga_id: str) -> Entry | None:
        with self._lock:
            chain = self._entries.get(saga_id)
            return chain[-1] if chain else None

    def get_entry(self, saga_id: str, seq: int) -> Entry | None:
        with self._lock:
            chain = self._entries.get(saga_id, [])
            return chain[seq - 1] if 1 <= seq <= len(chain) else None

    def read_entries(self, saga_id: str, after_seq: int = 0, limit: int | None = None) -> list[Entry]:
        with self._lock:
            chain = self._entries.get(saga_id, [])
            end = len(chain) if limit is None else after_seq + limit
            return chain[max(after_seq, 0) : end]

    def saga_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._entries)

    def put_approval_request(self, request: ApprovalRequest) -> None:
        with self._lock:
            self._requests[(request.saga_id, request.journal_seq)] = request

    def get_approval_request(self, saga_id: str, journal_seq: int) -> ApprovalRequest | None:
        with self._lock:
            return self._requests.get((saga_id, journal_seq))

    def list_approval_requests(self, saga_id: str | None = None) -> list[ApprovalRequest]:
        with self._lock:
            found = [r for r in self._requests.values() if saga_id is None or r.saga_id == saga_id]
        return sorted(found, key=lambda r: (r.created_at, r.saga_id, r.journal_seq))

    def delete_approval_request(self, saga_id: str, journal_seq: int) -> bool:
        with self._lock:
            return self._requests.pop((saga_id, journal_seq), None) is not None

    def put_trace_context(
        self, saga_id: str, journal_seq: int, traceparent: str, tracestate: str = ""
    ) -> None:
        """Keep it, and drop those whose request is gone (``TraceContextStore``)."""
        with self._lock:
            self._traces[(saga_id, journal_seq)] = (traceparent, tracestate)
            self._traces = {key: value for key, value in self._traces.items() if key in self._requests}

    def get_trace_context(self, saga_id: str, journal_seq: int) -> tuple[str, str] | None:
        with self._lock:
            return self._traces.get((saga_id, journal_seq))

    def close(self) -> None:
        """Nothing to release; the entries stay readable."""

    def __repr__(self) -> str:
        return f"MemoryStore({self.url!r})"


def _no_lock(key: object) -> object:
    return key
