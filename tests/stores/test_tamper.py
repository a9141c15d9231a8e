"""Rows changed behind the library's back, with raw SQL, are found by verify at their index."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from sagacity import Phase, Sagacity
from sagacity.chain import entry_hash
from sagacity.errors import StoreError
from sagacity.stores.sqlite import path_from_url


def _raw_sql(url: str, statement: str, params: tuple[Any, ...] = ()) -> int:
    """Run one statement on the journal's database directly, bypassing Sagacity; the rowcount.

    On SQLite the refusing triggers are dropped first: this is the attacker with write access to
    the file, who can do that too. Verification must still catch the edit.
    """
    if url.startswith("sqlite:"):
        with sqlite3.connect(path_from_url(url), isolation_level=None) as conn:
            conn.execute("DROP TRIGGER IF EXISTS side_effect_journal_no_update")
            conn.execute("DROP TRIGGER IF EXISTS side_effect_journal_no_delete")
            cur = conn.execute(statement.replace("%s", "?"), params)
            count = cur.rowcount
        conn.close()
        return count
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        return pg.execute(statement, params).rowcount


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest) -> str:
    """A SQLite file or a fresh PostgreSQL schema: the stores that outlive the process."""
    url: str = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_url")
    return url


@pytest.fixture
def journal(durable_url: str) -> Iterator[Sagacity]:
    """Five entries of saga "s" (and one of "other"), all valid to begin with."""
    with Sagacity(durable_url) as sg:
        for i in range(5):
            sg.journal.append("s", "tool", Phase.EXECUTED, f'{{"i":{i}}}', f"result {i}")
        sg.journal.append("other", "tool", Phase.INTENT)
        assert sg.verify("s").valid
        yield sg


def test_edited_middle_row_reported_at_its_index(journal: Sagacity) -> None:
    """A payload edited in the row with seq 3 breaks the chain at zero-based index 2."""
    edit = "UPDATE side_effect_journal SET payload = %s WHERE saga_id = %s AND seq = 3"
    assert _raw_sql(journal.url, edit, ("forged", "s")) == 1
    result = journal.verify("s")
    assert (result.valid, result.entry_count, result.break_at_index) == (False, 5, 2)
    assert "hash mismatch" in result.message
    assert journal.verify("other").valid


def test_rehashed_forgery_reported_at_the_next_row(journal: Sagacity) -> None:
    """An edit whose own hash is recomputed still breaks the chain at the following entry."""
    e2, e3 = journal.entries("s")[1:3]
    forged_hash = entry_hash(e2.hash, "s", 3, e3.tool_name, e3.phase, e3.input, "forged", e3.timestamp)
    _raw_sql(
        journal.url,
        "UPDATE side_effect_journal SET payload = %s, hash = %s WHERE saga_id = %s AND seq = 3",
        ("forged", forged_hash, "s"),
    )
    result = journal.verify("s")
    assert (result.valid, result.break_at_index) == (False, 3)


def test_deleted_middle_row_reported_at_the_row_after_the_gap(journal: Sagacity) -> None:
    """Deleting the row with seq 3 is reported at index 2, where the entry with seq 4 now stands."""
    assert (
        _raw_sql(journal.url, "DELETE FROM side_effect_journal WHERE saga_id = %s AND seq = 3", ("s",)) == 1
    )
    result = journal.verify("s")
    assert (result.valid, result.entry_count, result.break_at_index) == (False, 4, 2)
    assert "seq is 4, expected 3" in result.message


def test_deleted_first_row_reported_at_index_zero(journal: Sagacity) -> None:
    """Deleting the first row is reported at index 0."""
    _raw_sql(journal.url, "DELETE FROM side_effect_journal WHERE saga_id = %s AND seq = 1", ("s",))
    result = journal.verify("s")
    assert (result.valid, result.entry_count, result.break_at_index) == (False, 4, 0)


def test_sqlite_triggers_refuse_update_and_delete(sqlite_url: str) -> None:
    """SQLite refuses UPDATE and DELETE on the journal, through raw sqlite3 and the store's own connection."""
    with Sagacity(sqlite_url) as sg:
        sg.journal.append("s", "tool", Phase.INTENT)
        with sqlite3.connect(path_from_url(sqlite_url), isolation_level=None) as conn:
            with pytest.raises(sqlite3.IntegrityError, match="append-only: UPDATE refused"):
                conn.execute("UPDATE side_effect_journal SET payload = 'x'")
            with pytest.raises(sqlite3.IntegrityError, match="append-only: DELETE refused"):
                conn.execute("DELETE FROM side_effect_journal")
        conn.close()
        cursor = sg.store._cursor  # type: ignore[attr-defined]
        with pytest.raises(StoreError, match="append-only: UPDATE refused"), cursor() as cur:
            cur.execute("UPDATE side_effect_journal SET payload = 'x'")
        with pytest.raises(StoreError, match="append-only: DELETE refused"), cursor() as cur:
            cur.execute("DELETE FROM side_effect_journal")
        assert sg.verify("s").valid
        assert len(sg.entries("s")) == 1
