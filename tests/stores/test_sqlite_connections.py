"""SQLite connections are lent per operation: short-lived threads leave nothing open behind them.

A server or agent framework may run every saga in a fresh thread. Counted here by the files the
process really has open on the journal (``/proc/self/fd``), not by the store's own bookkeeping.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from sagacity import Sagacity, SagaStatus, tool
from sagacity.errors import StoreError
from sagacity.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/fd")


@tool
def stamp(n: int) -> str:
    return f"stamped {n}"


def open_journal_files(db: str) -> int:
    """How many descriptors of this process point at the journal file or its WAL."""
    names = {os.path.realpath(db), os.path.realpath(db + "-wal")}
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") in names:
                count += 1
        except OSError:
            continue  # closed while listing
    return count


def saga_in_a_fresh_thread(sg: Sagacity, saga_id: str) -> SagaStatus:
    statuses: list[SagaStatus] = []

    def work() -> None:
        with sg.saga(saga_id) as scope:
            stamp(1)
            stamp(2)
        assert scope.result is not None
        statuses.append(scope.result.status)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return statuses[0]


def test_threads_that_end_leave_no_connections_open(tmp_path: Path) -> None:
    db = str(tmp_path / "journal.db")
    with Sagacity(f"sqlite:///{db}") as sg:
        assert saga_in_a_fresh_thread(sg, "first") is SagaStatus.COMPLETED
        after_one = open_journal_files(db)
        assert after_one > 0  # the count sees this store's files at all

        for i in range(40):
            assert saga_in_a_fresh_thread(sg, f"saga-{i}") is SagaStatus.COMPLETED

        assert open_journal_files(db) == after_one
        assert [sg.verify(f"saga-{i}").valid for i in range(40)] == [True] * 40
    assert open_journal_files(db) == 0


def test_concurrent_threads_borrow_at_most_one_connection_each(tmp_path: Path) -> None:
    db = str(tmp_path / "journal.db")
    threads = 8
    with Sagacity(f"sqlite:///{db}") as sg:
        barrier = threading.Barrier(threads)

        def work(i: int) -> None:
            barrier.wait()
            for round_ in range(5):
                with sg.saga(f"t{i}-r{round_}"):
                    stamp(round_)

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        # Each connection holds the file and its WAL: at most one per thread, plus the writer.
        assert open_journal_files(db) <= 2 * (threads + 1)
        assert len(sg.saga_ids()) == threads * 5


def test_a_closed_store_refuses_and_holds_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "journal.db")
    store = SQLiteStore(f"sqlite:///{db}")
    store.init_schema()
    assert store.tail("nothing") is None
    store.close()
    assert open_journal_files(db) == 0
    with pytest.raises(StoreError, match="closed"):
        store.tail("nothing")
