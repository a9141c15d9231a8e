"""A server connection killed mid-append (PostgreSQL, MariaDB): the row lands exactly once or the
append raises."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pytest

from sagacity import Entry, Phase, Sagacity
from sagacity.errors import StoreUnavailableError
from sagacity.stores.base import Store


def _counting(store: Store) -> Store:
    """The real store, counting inserts whose connection failed: proof the kills hit appends."""
    real = store.insert_entry

    def insert_entry(entry: Entry) -> bool:
        try:
            return real(entry)
        except StoreUnavailableError:
            store.insert_failures += 1  # type: ignore[attr-defined]
            raise

    store.insert_failures = 0  # type: ignore[attr-defined]
    store.insert_entry = insert_entry  # type: ignore[method-assign]
    return store


def _killer(kill: Callable[[], int], stop: threading.Event, landed: list[object], kills: list[int]) -> None:
    """Kill every server session of the store, over and over.

    Each kill waits until 20 more appends have landed since the last one, so the journal's
    reconnects get through between kills (a server that kills every few ms is down, not flaky).
    """
    mark = 0
    while not stop.is_set():
        if len(landed) < mark + 20:
            stop.wait(0.002)
            continue
        mark = len(landed)
        kills.append(kill())


@pytest.mark.postgres
def test_killed_connection_never_duplicates_or_loses(postgres_url: str) -> None:
    """Appends under pg_terminate_backend each return (row stored once) or raise; no gap, chain valid."""
    import psycopg

    from sagacity.stores.postgres import PostgresStore

    app_name = "sagacity_kill_" + uuid.uuid4().hex[:8]
    store = _counting(PostgresStore(f"{postgres_url}&application_name={app_name}", max_connections=2))
    with psycopg.connect(postgres_url, autocommit=True) as admin:

        def kill() -> int:
            row = admin.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (app_name,),
            ).fetchone()
            return row[0] if row else 0

        _appends_under_kills(postgres_url, store, kill)


@pytest.mark.mysql
def test_killed_mariadb_connection_never_duplicates_or_loses(mysql_url: str) -> None:
    """Appends while every session on the test's database is KILLed each return (row stored
    once) or raise; no gap, chain valid."""
    import pymysql

    from sagacity.stores.mysql import MySQLStore, connect_arguments

    store = _counting(MySQLStore(mysql_url))
    database = connect_arguments(mysql_url)["database"]
    with pymysql.connect(**connect_arguments(mysql_url), autocommit=True) as admin, admin.cursor() as cur:

        def kill() -> int:
            cur.execute(
                "SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()",
                (database,),
            )
            killed = 0
            for (session,) in cur.fetchall():
                try:
                    cur.execute(f"KILL {int(session)}")
                    killed += 1
                except pymysql.err.OperationalError:
                    pass  # it ended meanwhile
            return killed

        _appends_under_kills(mysql_url, store, kill)


def _appends_under_kills(url: str, store: Store, kill: Callable[[], int]) -> None:
    sg = Sagacity(store=store)
    outcomes: dict[str, Entry | BaseException] = {}
    stop = threading.Event()
    kills: list[int] = []
    landed: list[object] = []
    killer = threading.Thread(target=_killer, args=(kill, stop, landed, kills))
    killer.start()
    try:
        for i in range(3000):
            marker = f"append-{i}"
            try:
                outcomes[marker] = sg.journal.append("killed", "tool", Phase.INTENT, "{}", marker)
                landed.append(marker)
            except StoreUnavailableError as exc:
                outcomes[marker] = exc
            if store.insert_failures >= 10:  # type: ignore[attr-defined]
                break
    finally:
        stop.set()
        killer.join()
        sg.close()
    assert sum(kills) > 0, "no backend was ever terminated"
    assert store.insert_failures > 0, "no append met a dead connection: the test proved nothing"  # type: ignore[attr-defined]

    with Sagacity(url) as reader:
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
