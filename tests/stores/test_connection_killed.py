"""A PostgreSQL connection killed mid-append: the row lands exactly once or the append raises."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest

from sagacity import Entry, Phase, Sagacity
from sagacity.errors import StoreUnavailableError
from sagacity.stores.postgres import PostgresStore

pytestmark = pytest.mark.postgres


class _FailureCountingStore(PostgresStore):
    """The real store, counting inserts whose connection failed: proof the kills hit appends."""

    insert_failures = 0

    def insert_entry(self, entry: Entry) -> bool:
        try:
            return super().insert_entry(entry)
        except StoreUnavailableError:
            self.insert_failures += 1
            raise


def _killer(
    admin_url: str, app_name: str, stop: threading.Event, landed: list[object], kills: list[int]
) -> None:
    """Terminate every backend of the store's pool (found by application_name), over and over.

    Each kill waits until 20 more appends have landed since the last one, so the journal's
    reconnects get through between kills (a server that kills every few ms is down, not flaky).
    """
    with psycopg.connect(admin_url, autocommit=True) as admin:
        mark = 0
        while not stop.is_set():
            if len(landed) < mark + 20:
                stop.wait(0.002)
                continue
            mark = len(landed)
            row = admin.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (app_name,),
            ).fetchone()
            kills.append(row[0] if row else 0)


def test_killed_connection_never_duplicates_or_loses(postgres_url: str) -> None:
    """Appends under pg_terminate_backend each return (row stored once) or raise; no gap, chain valid."""
    app_name = "sagacity_kill_" + uuid.uuid4().hex[:8]
    store = _FailureCountingStore(f"{postgres_url}&application_name={app_name}", max_connections=2)
    sg = Sagacity(store=store)
    outcomes: dict[str, Entry | BaseException] = {}
    stop = threading.Event()
    kills: list[int] = []
    landed: list[object] = []
    killer = threading.Thread(target=_killer, args=(postgres_url, app_name, stop, landed, kills))
    killer.start()
    try:
        for i in range(3000):
            marker = f"append-{i}"
            try:
                outcomes[marker] = sg.journal.append("killed", "tool", Phase.INTENT, "{}", marker)
                landed.append(marker)
            except StoreUnavailableError as exc:
                outcomes[marker] = exc
            if store.insert_failures >= 10:
                break
    finally:
        stop.set()
        killer.join()
        sg.close()
    assert sum(kills) > 0, "no backend was ever terminated"
    assert store.insert_failures > 0, "no append met a dead connection: the test proved nothing"

    with Sagacity(postgres_url) as reader:
        stored = reader.entries("killed")
        verification = reader.verify("killed")
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert verification.valid, verification.message
    by_marker: dict[str, list[Entry]] = {}
    for entry in stored:
        by_marker.setdefault(entry.payload, []).append(entry)
    assert all(len(rows) == 1 for rows in by_marker.values()), "an append landed twice"
    assert set(by_marker) <= set(outcomes), "a row no append wrote"
    for marker, outcome in outcomes.items():
        if isinstance(outcome, Entry):
            assert by_marker.get(marker) == [outcome], f"{marker} returned but is not stored as returned"
        else:
            assert isinstance(outcome, StoreUnavailableError)  # its row may or may not be there, once
