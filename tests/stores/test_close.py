"""Closing a store while sagas run on it: every caller gets a StoreError saying so at once, the
process survives, and every entry that was written is whole.

Closing a SQLite connection under the thread using it crashed the interpreter (the sqlite3 module
frees the statement in use): a real thread race, so real threads, on both durable stores.
"""

from __future__ import annotations

import threading
import time

import pytest

from sagacity import Phase, Sagacity, tool
from sagacity.errors import StoreError, StoreUnavailableError

SAGAS = 6
READERS = 2
WAIT = 30.0
TRIALS = 10  # the race is real: each trial closes at another moment of the work


@tool
def tick(n: int) -> str:
    return f"tick {n}"


def _kind(exc: StoreError) -> str:
    """'closed' for the error a closed store gives; anything else is shown as it is.

    Not StoreUnavailableError: that one is retried with back-off, seconds of it for nothing.
    """
    if "is closed" in str(exc) and not isinstance(exc, StoreUnavailableError):
        return "closed"
    return repr(exc)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_closing_under_running_sagas_raises_store_errors_and_keeps_chains_whole(
    durable_url: str, trial: int
) -> None:
    sg = Sagacity(durable_url)
    start = threading.Barrier(SAGAS + READERS + 1)
    outcomes: list[str] = []
    read_outcomes: list[str] = []

    def work(i: int) -> None:
        start.wait()
        try:
            with sg.saga(f"closing-{i}"):
                for n in range(1_000_000):
                    tick(n)
        except StoreError as exc:
            outcomes.append(_kind(exc))
        except BaseException as exc:  # any other outcome is the failure reported
            outcomes.append(repr(exc))
        else:
            outcomes.append("finished")

    def read() -> None:
        start.wait()
        try:
            while True:
                sg.entries("closing-0")
        except StoreError as exc:
            read_outcomes.append(_kind(exc))
        except BaseException as exc:  # any other outcome is the failure reported
            read_outcomes.append(repr(exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(SAGAS)]
    threads += [threading.Thread(target=read) for _ in range(READERS)]
    for thread in threads:
        thread.start()
    start.wait()
    deadline = time.monotonic() + WAIT
    while min(len(sg.entries(f"closing-{i}")) for i in range(SAGAS)) < 6:
        assert time.monotonic() < deadline, "the sagas never got going"
        time.sleep(0.005)
    sg.close()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive(), "a saga thread hung after close"
    assert outcomes == ["closed"] * SAGAS
    assert read_outcomes == ["closed"] * READERS

    with Sagacity(durable_url) as reopened:
        for i in range(SAGAS):
            entries = reopened.entries(f"closing-{i}")
            assert reopened.verify(f"closing-{i}").valid
            assert entries[0].phase == Phase.INTENT
            assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
