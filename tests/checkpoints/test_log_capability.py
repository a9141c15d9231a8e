"""Which log a store's journal is checkpointed in follows what the store declares
(``Capability.ENTRY_LOG``), never its class: a SQL store written without the library's base class
keeps its log in its database; a store that does not declare it has the log held in the process."""

from __future__ import annotations

from typing import Any

import pytest

from sagacity import Sagacity
from sagacity.checkpoints import SigningKey, checkpoint_log, verify_log
from sagacity.stores import Store, open_store
from sagacity.stores.base import Capability

from .conftest import ALL_SQL_STORES, ENTRIES_PER_SAGA, SAGAS, RawSQL

ORIGIN = "test.example/journal"
ENTRIES = len(SAGAS) * ENTRIES_PER_SAGA


@pytest.fixture(params=ALL_SQL_STORES)
def journal_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


class Forwarding:
    """A store by composition: what an author wrapping a database of their own might write. It
    subclasses nothing of the library; it declares what it offers and hands each call on."""

    def __init__(self, inner: Store, capabilities: frozenset[Capability]) -> None:
        self._inner = inner
        self.url = inner.url
        self.capabilities = capabilities

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _checkpointed(store: Store, key: SigningKey) -> int:
    """Checkpoint the journal through ``store``; the log's size."""
    with Sagacity(store=store, init_schema=False) as sg:
        return checkpoint_log(sg, key, ORIGIN).size


def test_a_store_declaring_the_log_keeps_it_in_its_database(
    sg: Sagacity, key: SigningKey, journal_url: str, raw_sql: RawSQL
) -> None:
    """The forwarding store declares what the SQL store it wraps declares: its checkpoint fills
    the database's log table, which every process reads."""
    inner = open_store(journal_url)
    assert Capability.ENTRY_LOG in inner.capabilities  # every shipped SQL store declares it
    assert _checkpointed(Forwarding(inner, inner.capabilities), key) == ENTRIES
    assert raw_sql("DELETE FROM sagacity_log", ()) == ENTRIES


def test_a_store_not_declaring_the_log_has_it_in_the_process(
    sg: Sagacity, key: SigningKey, journal_url: str, raw_sql: RawSQL
) -> None:
    """A subclass of the shipped SQL store that declares everything but the log: the log is held
    in the process, and the database's table is never written."""
    probe = open_store(journal_url)
    probe.close()
    shipped = type(probe)
    without_log = type(
        "WithoutLog", (shipped,), {"capabilities": shipped.capabilities - {Capability.ENTRY_LOG}}
    )
    assert _checkpointed(without_log(journal_url), key) == ENTRIES
    assert raw_sql("DELETE FROM sagacity_log", ()) == 0


def test_a_journal_made_before_the_log_gets_its_table_at_the_first_checkpoint(
    sg: Sagacity, key: SigningKey, raw_sql: RawSQL
) -> None:
    """Each dialect makes the log's table in its own column types (on MariaDB/MySQL, the
    journal's collation): ids logged from the journal join back to it byte for byte."""
    raw_sql("DROP TABLE sagacity_log", ())
    first = checkpoint_log(sg, key, ORIGIN)
    assert first.size == ENTRIES
    assert verify_log(sg, [first]) == []
    assert raw_sql("DELETE FROM sagacity_log", ()) == ENTRIES
