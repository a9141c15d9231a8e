"""The ``Sagacity`` facade: a URL in, the whole API out."""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any

from sagacity._export import export_lines
from sagacity._journal import DEFAULT_APPEND_ATTEMPTS, DEFAULT_RECONNECT_ATTEMPTS, Journal
from sagacity.chain import Verification
from sagacity.model import Entry
from sagacity.stores import Store, default_url, open_store


class Sagacity:
    """Sagas journaled in one store.

    ``url`` picks the store: ``sqlite:///path.db`` (the embedded default), ``postgresql://...``
    or ``memory://``; without one, ``$SAGACITY_URL``, else ``sqlite:///sagacity.db``. The schema
    is created if missing. ``max_append_attempts`` bounds how often one append may lose the race
    for the next seq before it raises; ``store_options`` go to the store's constructor (e.g.
    ``max_connections`` for PostgreSQL).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        store: Store | None = None,
        max_append_attempts: int = DEFAULT_APPEND_ATTEMPTS,
        reconnect_attempts: int = DEFAULT_RECONNECT_ATTEMPTS,
        init_schema: bool = True,
        **store_options: Any,
    ) -> None:
        self.store: Store = store if store is not None else open_store(url or default_url(), **store_options)
        self.url = self.store.url
        self.journal = Journal(
            self.store, max_append_attempts=max_append_attempts, reconnect_attempts=reconnect_attempts
        )
        if init_schema:
            self.journal.read(self.store.init_schema)

    # -- evidence -------------------------------------------------------------------------------
    def entries(self, saga_id: str) -> list[Entry]:
        """The saga's journal in seq order (empty for an unknown saga). Read-only."""
        return self.journal.entries(saga_id)

    def saga_ids(self) -> list[str]:
        """Every saga with at least one entry, sorted. Read-only."""
        return self.journal.read(self.store.saga_ids)

    def verify(self, saga_id: str) -> Verification:
        """Recompute the saga's hash chain from the store (streaming). Read-only.

        Raises ``SagaNotFoundError`` when the saga has no entries.
        """
        return self.journal.verify(saga_id)

    def export(self, saga_id: str) -> Iterator[str]:
        """The saga as JSON Lines (SPEC §7), streamed a batch of rows at a time. Read-only.

        Raises ``SagaNotFoundError`` at once (not on first iteration) for an unknown saga.
        """
        self.journal.require_saga(saga_id)
        return export_lines(self.journal.iter_entries(saga_id))

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the store's connections."""
        self.store.close()

    def __enter__(self) -> Sagacity:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sagacity({self.store!r})"
