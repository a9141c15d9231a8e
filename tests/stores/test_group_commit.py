"""Group commit on the durable stores: batches written as one statement keep the Store contract.

Most tests build a batch deterministically: the first insert's leader is held inside its write
until the wanted number of requests has queued behind it, so the next leader writes exactly those
as one multi-row statement. No test depends on timing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from sagacity import Entry, Phase, Sagacity, SagaStatus, chain, tool
from sagacity.errors import StoreError, StoreUnavailableError
from sagacity.stores import open_store
from sagacity.stores._group import MAX_BATCH, Pending
from sagacity.stores.mysql import MySQLStore
from sagacity.stores.postgres import PostgresStore
from sagacity.stores.sqlite import SQLiteStore

AnyStore = SQLiteStore | PostgresStore | MySQLStore

T0 = datetime(2026, 7, 21, 10, 0, 0)
WAIT = 30.0  # seconds a test waits for threads to queue before it fails instead of hanging


def _entry(saga_id: Any, seq: int, payload: str = "", prev: str = chain.GENESIS_HASH) -> Entry:
    ts = T0 + timedelta(microseconds=seq)
    digest = chain.entry_hash(prev, str(saga_id), seq, "tool", "INTENT", "{}", payload, ts)
    return Entry(saga_id, seq, "tool", "INTENT", "{}", payload, ts, digest)


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.001)


class Gate:
    """Holds the store's first leader inside its write until ``queued`` requests wait behind it.

    ``after_first`` runs once the held write is done (e.g. to kill the writer's connection), and
    ``after_each`` sees every batch after it was written (to record or rewrite outcomes).
    """

    def __init__(
        self,
        store: AnyStore,
        queued: int,
        after_first: Callable[[], None] | None = None,
        after_each: Callable[[list[Pending]], None] | None = None,
    ) -> None:
        self.group = store._group
        self.real_write = self.group._write
        self.queued = queued
        self.after_first = after_first
        self.after_each = after_each
        self.first = True
        self.holding = threading.Event()  # set once the first leader is held in its write
        self.batches: list[list[Pending]] = []
        self.group._write = self._write
        # The first leader is alone when it writes: without this it would take the lone
        # writer's direct path, which this gate cannot hold.
        self.group._write_one = None

    def _write(self, batch: list[Pending]) -> None:
        if self.first:
            self.first = False
            self.holding.set()
            _wait_until(lambda: self.group.queued() >= self.queued, f"{self.queued} queued inserts")
            self.real_write(batch)
            if self.after_first is not None:
                self.after_first()
        else:
            self.real_write(batch)
        self.batches.append(list(batch))
        if self.after_each is not None:
            self.after_each(batch)


def _run(gate: Gate, calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls[0]`` until the gate holds it as leader, then the rest; each result or exception."""
    results: list[Any] = [None] * len(calls)

    def body(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(calls))]
    threads[0].start()
    assert gate.holding.wait(WAIT), "the first insert never became the leader"
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 2)
        assert not thread.is_alive(), "an insert never returned"
    return results


@pytest.fixture
def store(durable_url: str) -> Iterator[AnyStore]:
    opened = open_store(durable_url)
    assert isinstance(opened, AnyStore)
    opened.init_schema()
    yield opened
    opened.close()


def _stored(store: AnyStore, saga_id: str, seq: int) -> Entry | None:
    return store.get_entry(saga_id, seq)


@pytest.mark.parametrize("queued", [6, 7, 40, MAX_BATCH + 9])
def test_distinct_rows_in_one_batch_all_land(store: AnyStore, queued: int) -> None:
    """A batch of new keys is written as one statement and every caller gets True.

    The sizes cross the drivers' edges: 7 rows is over psycopg's 50 parameters for a cached
    query, and more than ``MAX_BATCH`` queued rows take two statements.
    """
    leader = _entry("lead", 1)
    rows = [_entry(f"s{i}", 1, f"p{i}") for i in range(queued)]
    gate = Gate(store, queued=len(rows))
    results = _run(
        gate, [lambda: store.insert_entry(leader)] + [lambda e=e: store.insert_entry(e) for e in rows]
    )
    assert results == [True] * (queued + 1)
    assert max(len(b) for b in gate.batches) == min(len(rows), MAX_BATCH), "queued rows were split"
    for entry in [leader, *rows]:
        assert _stored(store, entry.saga_id, entry.seq) == entry


def test_a_batch_with_taken_keys_returns_false_only_for_the_losers(
    store: AnyStore,
) -> None:
    """In one batch: a key already stored, two racers for one new key, and free keys.

    Only the losers get False and write nothing; everything else lands as given.
    """
    existing = _entry("taken", 1, "first")
    assert store.insert_entry(existing) is True
    late = _entry("taken", 1, "late")  # same key, other content: must lose
    racer_a = _entry("raced", 1, "a")
    racer_b = _entry("raced", 1, "b")
    free = [_entry("free", 1, "x"), _entry("other", 1, "y"), _entry("other", 2, "z", prev="0" * 64)]
    batch = [late, racer_a, racer_b, *free]
    gate = Gate(store, queued=len(batch))
    results = _run(
        gate,
        [lambda: store.insert_entry(_entry("lead", 1))] + [lambda e=e: store.insert_entry(e) for e in batch],
    )
    assert all(isinstance(r, bool) for r in results), results
    assert results[0] is True
    by_entry = dict(zip(batch, results[1:], strict=True))
    assert by_entry[late] is False
    assert sorted([by_entry[racer_a], by_entry[racer_b]]) == [False, True], "exactly one racer wins"
    assert all(by_entry[e] for e in free)
    assert max(len(b) for b in gate.batches) == len(batch)

    assert _stored(store, "taken", 1) == existing
    winner = racer_a if by_entry[racer_a] else racer_b
    assert _stored(store, "raced", 1) == winner
    for entry in free:
        assert _stored(store, entry.saga_id, entry.seq) == entry


def test_only_repeats_within_a_batch(store: AnyStore) -> None:
    """Three inserts of one new key in one batch: one True, two False, one row stored."""
    racers = [_entry("same", 1, f"r{i}") for i in range(3)]
    gate = Gate(store, queued=len(racers))
    results = _run(
        gate,
        [lambda: store.insert_entry(_entry("lead", 1))] + [lambda e=e: store.insert_entry(e) for e in racers],
    )
    assert results[0] is True
    assert sorted(results[1:]) == [False, False, True]
    winner = racers[results[1:].index(True)]
    assert _stored(store, "same", 1) == winner


def test_a_row_the_database_refuses_fails_alone(store: AnyStore) -> None:
    """A row that cannot be written (an unbindable value) raises for its caller only."""
    bad = _entry(object(), 1)  # no driver can bind an arbitrary object
    good = [_entry(f"g{i}", 1) for i in range(3)]
    gate = Gate(store, queued=4)
    results = _run(
        gate,
        [lambda: store.insert_entry(_entry("lead", 1))]
        + [lambda e=e: store.insert_entry(e) for e in [good[0], bad, good[1], good[2]]],
    )
    assert results[0] is True
    assert [results[1], results[3], results[4]] == [True, True, True]
    assert isinstance(results[2], StoreError)
    for entry in good:
        assert _stored(store, entry.saga_id, entry.seq) == entry


def test_many_threads_many_sagas_and_one_shared_saga(durable_url: str) -> None:
    """16 threads append to their own saga and to one shared saga at once: all land, gap-free, valid."""
    threads, per_thread = 16, 25
    with Sagacity(durable_url) as sg:
        barrier = threading.Barrier(threads)
        errors: list[BaseException] = []

        def work(i: int) -> None:
            barrier.wait()
            try:
                for n in range(per_thread):
                    sg.journal.append(f"own-{i}", "tool", Phase.INTENT, "{}", f"{i}:{n}")
                    sg.journal.append("shared", "tool", Phase.EXECUTED, "{}", f"{i}:{n}")
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert not errors, errors[0]

    with Sagacity(durable_url) as reader:
        for saga_id, count in [(f"own-{i}", per_thread) for i in range(threads)] + [
            ("shared", threads * per_thread)
        ]:
            entries = reader.entries(saga_id)
            assert [e.seq for e in entries] == list(range(1, count + 1)), saga_id
            assert reader.verify(saga_id).valid, saga_id
        shared = [e.payload for e in reader.entries("shared")]
        assert sorted(shared) == sorted(f"{i}:{n}" for i in range(threads) for n in range(per_thread))


def test_a_batch_whose_acknowledgement_is_lost_is_resolved_by_reading_back(durable_url: str) -> None:
    """The batch commits but every caller hears StoreUnavailableError: each append still lands once."""
    with Sagacity(durable_url) as sg:
        store = sg.store
        assert isinstance(store, AnyStore)
        lost: list[int] = []

        def lose_acknowledgement(batch: list[Pending]) -> None:
            if len(batch) > 1 and not lost:
                lost.append(len(batch))
                for request in batch:
                    request.inserted, request.error = False, StoreUnavailableError("connection lost")

        # Same-saga appends queue on the journal's stripe lock, so of the two "shared" appends
        # one waits there: four requests queue behind the leader.
        gate = Gate(store, queued=4, after_each=lose_acknowledgement)
        sagas = ["lead", "a", "b", "c", "shared", "shared"]
        results = _run(
            gate,
            [
                lambda s=s, i=i: sg.journal.append(s, "tool", Phase.INTENT, "{}", f"m{i}")
                for i, s in enumerate(sagas)
            ],
        )
        assert lost == [4], "no multi-row batch lost its acknowledgement: the test proved nothing"
        assert all(isinstance(r, Entry) for r in results), results
        for result in results:
            assert store.get_entry(result.saga_id, result.seq) == result
        assert [e.seq for e in sg.entries("shared")] == [1, 2]
        for saga_id in set(sagas):
            assert sg.verify(saga_id).valid


def test_sqlite_batch_locked_out_gives_every_caller_unavailable(sqlite_url: str) -> None:
    """A batch locked out of SQLite's write lock: StoreUnavailableError for each caller, nothing written."""
    store = SQLiteStore(sqlite_url, busy_timeout_ms=50)
    store.init_schema()
    blocker = None

    def lock_database() -> None:
        nonlocal blocker
        import sqlite3

        blocker = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
        blocker.execute("BEGIN IMMEDIATE")

    gate = Gate(store, queued=3, after_first=lock_database)
    rows = [_entry(f"x{i}", 1) for i in range(3)]
    try:
        results = _run(
            gate,
            [lambda: store.insert_entry(_entry("lead", 1))]
            + [lambda e=e: store.insert_entry(e) for e in rows],
        )
    finally:
        if blocker is not None:
            blocker.execute("ROLLBACK")
            blocker.close()
    assert results[0] is True
    assert max(len(b) for b in gate.batches) == 3
    errors = results[1:]
    assert all(isinstance(e, StoreUnavailableError) for e in errors), errors
    assert len({id(e) for e in errors}) == 3, "each caller gets its own exception"
    for entry in rows:
        assert store.get_entry(entry.saga_id, entry.seq) is None
    store.close()


@pytest.mark.postgres
def test_postgres_batch_on_a_killed_connection_lands_once(postgres_url: str) -> None:
    """The writer's backend is terminated before a batch: every caller's append still lands exactly once."""
    with Sagacity(postgres_url) as sg:
        store = sg.store
        assert isinstance(store, PostgresStore)
        failed: list[int] = []

        def kill_writer() -> None:
            writer = store._writer
            assert writer is not None
            pid = writer.info.backend_pid
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                _wait_until(
                    lambda: (
                        admin.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
                        ).fetchone()
                        == (0,)
                    ),
                    "the writer's backend to exit",
                )

        def record(batch: list[Pending]) -> None:
            if len(batch) > 1 and all(isinstance(r.error, StoreUnavailableError) for r in batch):
                failed.append(len(batch))

        gate = Gate(store, queued=4, after_first=kill_writer, after_each=record)
        sagas = ["lead", "a", "b", "shared", "shared", "c"]  # one "shared" waits on the stripe lock
        results = _run(
            gate,
            [
                lambda s=s, i=i: sg.journal.append(s, "tool", Phase.INTENT, "{}", f"m{i}")
                for i, s in enumerate(sagas)
            ],
        )
        assert failed == [4], "the batch did not meet the dead connection: the test proved nothing"
        assert all(isinstance(r, Entry) for r in results), results

    with Sagacity(postgres_url) as reader:
        for saga_id in set(sagas):
            entries = reader.entries(saga_id)
            assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
            assert reader.verify(saga_id).valid
        markers = [e.payload for s in set(sagas) for e in reader.entries(s)]
        assert sorted(markers) == sorted(f"m{i}" for i in range(len(sagas))), "lost or duplicated"


def test_rows_written_together_wait_in_the_queue_and_land_all_or_none(store: AnyStore) -> None:
    """``insert_entries`` (a saga's START with its first entry) queues behind the leader like any
    append, on the writer connection, instead of contending for the write lock on a connection of
    its own: the gate only lets the leader go once those requests wait behind it. Each lands
    whole, or, with one key taken, not at all."""
    existing = _entry("taken", 2, "first", prev="0" * 64)
    assert store.insert_entry(existing) is True
    whole = [_entry("new", 1, "start"), _entry("new", 2, "call", prev="1" * 64)]
    blocked = [_entry("taken", 1, "start"), _entry("taken", 2, "call", prev="2" * 64)]
    single = _entry("single", 1, "x")
    gate = Gate(store, queued=3)
    results = _run(
        gate,
        [
            lambda: store.insert_entry(_entry("lead", 1)),
            lambda: store.insert_entries(whole),
            lambda: store.insert_entries(blocked),
            lambda: store.insert_entry(single),
        ],
    )
    assert results == [True, True, False, True]
    for entry in [*whole, single, existing]:
        assert _stored(store, entry.saga_id, entry.seq) == entry
    assert _stored(store, "taken", 1) is None  # the blocked pair wrote nothing
    # The leader's row alone, then the next leader's batch: the one single row (the pairs are
    # written by that same leader, each as a statement of its own).
    assert [len(b) for b in gate.batches] == [1, 1]


@tool(name="gc_step")
def gc_step(n: int) -> str:
    return f"step {n}"


def test_many_threads_start_sagas_at_once(durable_url: str) -> None:
    """32 threads each start their own saga at the same moment: every saga's START and first
    entry land, in order, and every chain verifies."""
    with Sagacity(durable_url) as sg:
        barrier = threading.Barrier(32)

        def start(n: int) -> None:
            barrier.wait(WAIT)
            sg.run(f"started-{n}", gc_step, n)

        threads = [threading.Thread(target=start, args=(n,)) for n in range(32)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT * 2)
            assert not thread.is_alive(), "a start never returned"
        for n in range(32):
            entries = sg.entries(f"started-{n}")
            assert [(e.seq, e.tool_name) for e in entries][:3] == [
                (1, "sagacity:saga"),
                (2, "gc_step"),
                (3, "gc_step"),
            ]
            assert sg.verify(f"started-{n}").valid
            assert sg.status(f"started-{n}") is SagaStatus.COMPLETED
