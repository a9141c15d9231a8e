"""The server stores' lease sessions batch their calls: sagas starting and ending at once on one
store send their liveness lock calls (MariaDB's ``GET_LOCK`` / ``RELEASE_LOCK``, PostgreSQL's
shared advisory locks) together, as one statement, and each caller still gets its own answer
and its own error.

Everything runs against the real servers with real threads. A second store has sessions of its
own, as another process would; what is live is always read from a store apart from the holder,
through ``live_among``, so the server's locks, not this process's counts, say it.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence

import pytest

from sagacity import Sagacity, tool
from sagacity.errors import StoreError
from sagacity.stores.mysql import MySQLStore
from sagacity.stores.postgres import PostgresStore
from sagacity.tools import registry

THREADS = 32
WAIT = 60.0  # seconds before a stuck thread fails the test instead of hanging it

ServerStore = MySQLStore | PostgresStore


@pytest.fixture(
    params=[
        pytest.param("mysql", marks=pytest.mark.mysql),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def store(request: pytest.FixtureRequest) -> Iterator[ServerStore]:
    url = request.getfixturevalue(f"{request.param}_url")
    if request.param == "postgres":  # a name of its own, so that the kill below finds its sessions
        url += f"&application_name=sagacity_{uuid.uuid4().hex[:10]}"
    opened = _open(url)
    opened.init_schema()
    yield opened
    opened.close()


@pytest.fixture
def mysql_store(mysql_url: str) -> Iterator[MySQLStore]:
    opened = MySQLStore(mysql_url)
    opened.init_schema()
    yield opened
    opened.close()


def _open(url: str) -> ServerStore:
    return PostgresStore(url) if url.startswith("postgres") else MySQLStore(url)


def _live_elsewhere(url: str, saga_ids: Sequence[str]) -> set[str]:
    """What a store with sessions of its own (another process, to the server) sees live."""
    observer = _open(url)
    try:
        return observer.live_among(saga_ids)
    finally:
        observer.close()


def _at_once(work: Callable[[int], object], count: int = THREADS) -> list[object]:
    """``work(i)`` in ``count`` threads released together; each one's result or exception."""
    start = threading.Barrier(count)
    results: list[object] = [None] * count

    def body(i: int) -> None:
        start.wait(WAIT)
        try:
            results[i] = work(i)
        except BaseException as exc:  # the test asserts on it
            results[i] = exc

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive(), "a thread never returned"
    return results


def test_sagas_starting_and_ending_at_once_share_lease_statements(store: ServerStore) -> None:
    """32 threads run a saga each, all in flight at once: every saga shows live to another
    store while they run and none once they ended, and the lease session sent fewer statements
    than the 64 lease calls (a take at each start, a give-back at each end) per round."""
    in_flight = threading.Barrier(THREADS + 1)  # the threads' calls and the test's look
    looked = threading.Event()
    ids = [f"batched-{i}" for i in range(THREADS)]
    rounds = 3
    with registry.isolated():

        @tool
        def lease_batch_step(n: int) -> int:
            in_flight.wait(WAIT)
            assert looked.wait(WAIT)
            return n

        with Sagacity(store=store) as sg:
            before = store.lease_statements
            for r in range(rounds):
                looked.clear()
                in_flight.reset()
                done: list[object] = []
                runner = threading.Thread(
                    target=lambda r=r, done=done: done.extend(
                        _at_once(lambda i: sg.run(f"{ids[i]}-{r}", lease_batch_step, i).status.value)
                    )
                )
                runner.start()
                in_flight.wait(WAIT)
                running = [f"{sid}-{r}" for sid in ids]
                assert _live_elsewhere(store.url, running) == set(running)
                looked.set()
                runner.join(WAIT * 2)
                assert done == ["COMPLETED"] * THREADS
                assert _live_elsewhere(store.url, running) == set()
            sent = store.lease_statements - before
    assert sent < 2 * THREADS * rounds, f"{sent} statements for {2 * THREADS * rounds} lease calls"


@pytest.mark.mysql
def test_each_caller_of_a_batch_gets_its_own_answer(mysql_store: MySQLStore, mysql_url: str) -> None:
    """MariaDB: another process already holds half of the sagas' first slot: the threads taking
    all of them at once get slot 1 for those and slot 0 for the rest, each by its own answer.
    Proof: once the other process is gone every saga is still live through this one, and once
    this one gives them back, none is."""
    store = mysql_store
    ids = [f"answer-{i}" for i in range(THREADS)]
    other = MySQLStore(mysql_url)
    try:
        for saga_id in ids[::2]:
            other.hold_live(saga_id)
        results = _at_once(lambda i: store.hold_live(ids[i]))
        assert results == [None] * THREADS
        assert _live_elsewhere(mysql_url, ids) == set(ids)
    finally:
        other.close()  # its session ends: every lock it held is gone, as with a dead process
    assert _live_elsewhere(mysql_url, ids) == set(ids), "a saga whose first slot was taken took none"
    assert _at_once(lambda i: store.release_live(ids[i])) == [None] * THREADS
    assert _live_elsewhere(mysql_url, ids) == set()


def test_a_batch_on_a_killed_session_is_sent_again_on_a_new_one(store: ServerStore) -> None:
    """The lease session is killed (MariaDB's KILL, PostgreSQL's ``pg_terminate_backend``) while
    sagas hold their leases: the next calls, at once, reconnect, take the held leases again and
    their own, and every saga shows live."""
    held = [f"held-{i}" for i in range(4)]
    for saga_id in held:
        store.hold_live(saga_id)
    if isinstance(store, MySQLStore):
        _kill_the_other_sessions(store.database, store.url)
    else:
        assert _terminate(store.url) > 0, "no session of the store to terminate"
    assert _live_elsewhere(store.url, held) == set(), "the killed session's locks outlived it"
    ids = [f"after-kill-{i}" for i in range(THREADS)]
    assert _at_once(lambda i: store.hold_live(ids[i])) == [None] * THREADS
    assert _live_elsewhere(store.url, held + ids) == set(held + ids)
    assert _at_once(lambda i: store.release_live(ids[i])) == [None] * THREADS
    assert _live_elsewhere(store.url, held + ids) == set(held)


def test_more_leases_than_one_statement_takes_are_all_taken_again(store: ServerStore) -> None:
    """2,000 sagas live in one process (PostgreSQL's SELECT takes at most 1,664 columns) when its
    lease session is killed: the next call takes every one of them again."""
    held = [f"many-{i}" for i in range(2000)]
    _at_once(lambda i: [store.hold_live(sid) for sid in held[i::THREADS]])
    assert _live_elsewhere(store.url, held) == set(held)
    if isinstance(store, MySQLStore):
        _kill_the_other_sessions(store.database, store.url)
    else:
        assert _terminate(store.url) > 0, "no session of the store to terminate"
    assert _live_elsewhere(store.url, held) == set()
    store.hold_live("one-more")
    assert _live_elsewhere(store.url, [*held, "one-more"]) == {*held, "one-more"}


def test_a_closed_store_fails_every_caller_with_its_own_error(store: ServerStore) -> None:
    """Calls racing on a closed store each raise a StoreError saying so: none is lost in a
    batch, none returns as if it held a lease."""
    store.hold_live("before-close")
    store.close()
    results = _at_once(lambda i: store.hold_live(f"closed-{i}"))
    assert all(isinstance(r, StoreError) and "closed" in str(r) for r in results), results
    assert len({id(r) for r in results}) == THREADS, "one exception instance shared by threads"


def _kill_the_other_sessions(database: str, url: str) -> None:
    """KILL the sessions on ``database``, the killer's own apart (the server ends them at once)."""
    import pymysql

    from sagacity.stores.mysql import connect_arguments

    with pymysql.connect(**connect_arguments(url), autocommit=True) as admin, admin.cursor() as cur:
        cur.execute("SELECT id FROM information_schema.processlist WHERE db = %s", (database,))
        ids = [int(row[0]) for row in cur.fetchall()]
        cur.execute("SELECT CONNECTION_ID()")
        (mine,) = cur.fetchone() or (None,)
        for session in set(ids) - {mine}:
            with contextlib.suppress(pymysql.err.OperationalError):  # it ended meanwhile
                cur.execute(f"KILL {session}")


def _terminate(url: str) -> int:
    """``pg_terminate_backend`` every session of the store's ``application_name`` in ``url``."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(url)["application_name"]
    with psycopg.connect(url, autocommit=True, application_name="sagacity_killer") as admin:
        row = admin.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s",
            (name,),
        ).fetchone()
    return int(row[0]) if row else 0
