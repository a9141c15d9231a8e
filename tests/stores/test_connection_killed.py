"""A server connection killed mid-append (PostgreSQL, MariaDB): the row lands exactly once or the
append raises."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import psycopg
import pytest

from sagacity import Entry, Phase, Sagacity
from sagacity.errors import StoreUnavailableError
from sagacity.stores.base import Store
from sagacity.stores.postgres import PostgresStore


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
    from sagacity.stores.mysql import MySQLStore

    store = _counting(MySQLStore(mysql_url))
    _appends_under_kills(mysql_url, store, lambda: _kill_mariadb_sessions(mysql_url))


def _kill_mariadb_sessions(mysql_url: str) -> int:
    """KILL every session on the test's database but this one; how many were killed."""
    import pymysql

    from sagacity.stores.mysql import connect_arguments

    database = connect_arguments(mysql_url)["database"]
    with pymysql.connect(**connect_arguments(mysql_url), autocommit=True) as admin, admin.cursor() as cur:
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


def _terminate(admin_url: str, app_name: str) -> int:
    with psycopg.connect(admin_url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (app_name,),
        ).fetchone()
    return row[0] if row else 0


@pytest.mark.postgres
def test_a_lease_whose_session_was_terminated_is_taken_on_a_new_one(postgres_url: str) -> None:
    """The lease session dies between two compensations (a failover, pg_terminate_backend): the
    next lease reconnects instead of failing the compensation with StoreUnavailableError."""
    app_name = "sagacity_lease_" + uuid.uuid4().hex[:8]
    store = PostgresStore(f"{postgres_url}&application_name={app_name}")
    try:
        store.init_schema()
        _lease_after_a_lost_session(
            store, lambda: _terminate(postgres_url, app_name), PostgresStore(postgres_url)
        )
    finally:
        store.close()


def _lease_after_a_lost_session(store: Store, kill: Callable[[], int], other: Store) -> None:
    """A lease, its session killed, another lease: taken on a new session, excluding ``other``."""
    try:
        with store.lease("first", wait=False) as got:
            assert got
        assert kill() > 0, "no session of the store to kill"
        with store.lease("second", wait=False) as got:
            assert got
            with other.lease("second", wait=False) as theirs:
                assert not theirs, "the lease taken on the new session does not exclude others"
    finally:
        other.close()


class _LostReplyStore(PostgresStore):
    """The real store, whose first delete of an approval request commits and then loses its reply,
    as when the connection dies between the commit and the answer."""

    lost_replies = 0

    def delete_approval_request(self, saga_id: str, journal_seq: int) -> bool:
        deleted = super().delete_approval_request(saga_id, journal_seq)
        if not self.lost_replies:
            self.lost_replies += 1
            raise StoreUnavailableError("the connection died before the delete's reply (test)")
        return deleted


@pytest.mark.postgres
def test_a_resume_whose_consume_reply_was_lost_runs_the_tool_once(postgres_url: str) -> None:
    from sagacity import Reversibility, SagaStatus, tool
    from sagacity.tools import registry

    ran: list[str] = []
    with registry.isolated():

        @tool(reversibility=Reversibility.IRREVERSIBLE)
        def lost_reply_wire(amount: str) -> str:
            ran.append(amount)
            return "sent"

        store = _LostReplyStore(postgres_url)
        with Sagacity(store=store) as sg:
            assert sg.run("lost-reply", lambda: lost_reply_wire("5")).status is SagaStatus.AWAITING_APPROVAL
            [request] = sg.pending_approvals("lost-reply")
            sg.approve("lost-reply", request.journal_seq, "alice@example.com")
            result = sg.resume("lost-reply", request.journal_seq, request.input)
            assert store.lost_replies == 1
            assert result.status is SagaStatus.COMPLETED, result.error
            assert ran == ["5"]
            assert sg.pending_approvals("lost-reply") == []


@pytest.mark.mysql
def test_a_mariadb_lease_whose_session_was_killed_is_taken_on_a_new_one(mysql_url: str) -> None:
    """The lease session is KILLed between two leases: the next lease reconnects, and it still
    excludes another store."""
    from sagacity.stores.mysql import MySQLStore

    store = MySQLStore(mysql_url)
    try:
        store.init_schema()
        _lease_after_a_lost_session(store, lambda: _kill_mariadb_sessions(mysql_url), MySQLStore(mysql_url))
    finally:
        store.close()
