"""The store contract (``sagacity.stores.base.Store``), one suite run against every store."""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagacity import ApprovalRequest, Phase, Sagacity
from sagacity._journal import Journal

T0 = datetime(2026, 7, 21, 10, 0, 0, 123456)


@pytest.fixture
def sg(store_url: str) -> Iterator[Sagacity]:
    with Sagacity(store_url) as sg:
        yield sg


def _request(saga_id: str, seq: int, created_at: datetime, input: str = '{"amount":"10"}') -> ApprovalRequest:
    return ApprovalRequest(
        saga_id=saga_id,
        journal_seq=seq,
        tool_name="send_wire",
        input=input,
        input_hash=hashlib.sha256(input.encode()).hexdigest(),
        created_at=created_at,
    )


def test_put_then_get_returns_the_request(sg: Sagacity) -> None:
    """A stored approval request reads back field for field, expiry included."""
    plain = _request("o1", 3, T0)
    expiring = ApprovalRequest(
        "o1", 5, "send_wire", '{"to":"日本"}', "a" * 64, T0, expires_at=T0 + timedelta(hours=1)
    )
    sg.store.put_approval_request(plain)
    sg.store.put_approval_request(expiring)
    assert sg.store.get_approval_request("o1", 3) == plain
    assert sg.store.get_approval_request("o1", 5) == expiring
    assert sg.store.get_approval_request("o1", 4) is None
    assert sg.store.get_approval_request("other", 3) is None


def test_put_replaces_same_key_without_duplicating(sg: Sagacity) -> None:
    """Putting (saga_id, journal_seq) again replaces the row: one request, the new payload and hash."""
    sg.store.put_approval_request(_request("o1", 3, T0, '{"amount":"10"}'))
    sg.store.put_approval_request(
        ApprovalRequest("o1", 3, "send_wire", "{}", "b" * 64, T0, expires_at=T0 + timedelta(1))
    )
    newer = _request("o1", 3, T0 + timedelta(seconds=1), '{"amount":"99"}')
    sg.store.put_approval_request(newer)
    assert list(sg.store.list_approval_requests("o1")) == [newer]
    assert sg.store.get_approval_request("o1", 3) == newer


def test_list_per_saga_and_all_oldest_first(sg: Sagacity) -> None:
    """Listing filters by saga when asked and orders by creation time, oldest first."""
    late = _request("b", 1, T0 + timedelta(minutes=2))
    early = _request("b", 9, T0)
    middle = _request("a", 4, T0 + timedelta(minutes=1))
    for request in (late, early, middle):
        sg.store.put_approval_request(request)
    assert list(sg.store.list_approval_requests()) == [early, middle, late]
    assert list(sg.store.list_approval_requests("b")) == [early, late]
    assert list(sg.store.list_approval_requests("a")) == [middle]
    assert list(sg.store.list_approval_requests("none")) == []


def test_delete_returns_true_once_then_false(sg: Sagacity) -> None:
    """Deleting a request reports True the first time, False after, and the request is gone."""
    sg.store.put_approval_request(_request("o1", 3, T0))
    sg.store.put_approval_request(_request("o1", 4, T0))
    assert sg.store.delete_approval_request("o1", 3) is True
    assert sg.store.delete_approval_request("o1", 3) is False
    assert sg.store.get_approval_request("o1", 3) is None
    assert [r.journal_seq for r in sg.store.list_approval_requests("o1")] == [4]


def _race_deletes(sg: Sagacity, saga_id: str, seq: int, threads: int) -> list[bool]:
    barrier = threading.Barrier(threads)
    results: list[bool] = []
    lock = threading.Lock()

    def delete() -> None:
        barrier.wait()
        deleted = sg.store.delete_approval_request(saga_id, seq)
        with lock:
            results.append(deleted)

    workers = [threading.Thread(target=delete) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results


def test_racing_deletes_only_one_wins(sg: Sagacity) -> None:
    """Eight threads deleting the same request at once: exactly one is told it deleted it."""
    for seq in range(3):
        sg.store.put_approval_request(_request("race", seq, T0))
        assert sorted(_race_deletes(sg, "race", seq, 8)) == [False] * 7 + [True]
        assert sg.store.get_approval_request("race", seq) is None


def test_read_entries_pages_in_seq_order(sg: Sagacity) -> None:
    """read_entries returns entries after a seq, at most ``limit``, in seq order; paging covers all."""
    for i in range(25):
        sg.journal.append("paged", "t", Phase.INTENT, f'{{"i":{i}}}')
    sg.journal.append("other", "t", Phase.INTENT)
    read = sg.store.read_entries
    assert [e.seq for e in read("paged", 0, 10)] == list(range(1, 11))
    assert [e.seq for e in read("paged", 10, 10)] == list(range(11, 21))
    assert [e.seq for e in read("paged", 20, 10)] == list(range(21, 26))
    assert read("paged", 25, 10) == []
    assert [e.seq for e in read("paged", 7)] == list(range(8, 26))
    assert [e.seq for e in read("paged")] == list(range(1, 26))
    assert read("missing") == []
    assert [e.seq for e in sg.journal.iter_entries("paged", batch=7)] == list(range(1, 26))
    assert [e.input for e in read("paged", 3, 2)] == ['{"i":3}', '{"i":4}']


def test_tail_and_get_entry(sg: Sagacity) -> None:
    """tail gives the highest seq and get_entry one exact row; both None where nothing exists."""
    assert sg.store.tail("t1") is None
    first = sg.journal.append("t1", "t", Phase.INTENT)
    last = sg.journal.append("t1", "t", Phase.EXECUTED, payload="ok")
    assert sg.store.tail("t1") == last
    assert sg.store.get_entry("t1", 1) == first
    assert sg.store.get_entry("t1", 3) is None


def test_saga_ids_sorted_and_distinct(sg: Sagacity) -> None:
    """saga_ids lists each saga with entries once, sorted."""
    assert sg.saga_ids() == []
    for saga_id in ("zeta", "alpha", "ü-saga", "alpha", "beta"):
        sg.journal.append(saga_id, "t", Phase.INTENT)
    assert sg.saga_ids() == ["alpha", "beta", "zeta", "ü-saga"]


def test_init_schema_is_idempotent(store_url: str) -> None:
    """Initialising an existing schema again changes nothing and keeps every entry and request."""
    with Sagacity(store_url) as sg:
        sg.journal.append("keep", "t", Phase.INTENT)
        sg.store.put_approval_request(_request("keep", 1, T0))
        sg.store.init_schema()
        sg.store.init_schema()
        assert [e.seq for e in sg.entries("keep")] == [1]
        assert sg.store.get_approval_request("keep", 1) is not None
        assert sg.verify("keep").valid
    if store_url != "memory://":
        with Sagacity(store_url) as again:
            assert [e.seq for e in again.entries("keep")] == [1]
            again.journal.append("keep", "t", Phase.EXECUTED)
            assert again.verify("keep").entry_count == 2


@pytest.mark.parametrize(
    "nanos",
    [
        1_784_628_000_000_000_000,  # .000000
        1_784_628_000_999_999_000,  # .999999
        1_784_628_000_999_999_999,  # nanoseconds: truncated to .999999, never rounded up
        1_784_628_000_000_000_999,  # nanoseconds below one microsecond: .000000
    ],
)
def test_timestamps_round_trip_at_microsecond_edges(store_url: str, nanos: int) -> None:
    """A timestamp at a microsecond edge reads back exactly as hashed, so the chain verifies."""
    expected = datetime(1970, 1, 1) + timedelta(microseconds=nanos // 1000)
    with Sagacity(store_url) as sg:
        journal = Journal(sg.store, clock=lambda: nanos)
        written = journal.append("edge", "t", Phase.INTENT)
        assert written.timestamp == expected
        assert journal.entries("edge") == [written]
        assert journal.verify("edge").valid


# From year 1 to 9999, so both of SQLite's text forms (isoformat and the strftime fallback for
# years before 1000) and instants before the epoch (negative microseconds) are covered.
_MICROS = st.integers(min_value=-62_135_596_800_000_000, max_value=253_402_300_799_999_999)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stamps=st.lists(st.one_of(_MICROS, st.integers(-2_000_000, 2_000_000)), min_size=1, max_size=12))
def test_any_instant_reads_back_as_appended(store_url: str, stamps: list[int]) -> None:
    """Appends stamped at any instant, in any order (a store may format each second's text once
    and reuse it), read back with exactly the timestamps they were hashed with."""
    clock = iter(micros * 1000 for micros in stamps)
    with Sagacity(store_url) as sg:
        journal = Journal(sg.store, clock=lambda: next(clock))
        saga = f"instants-{uuid.uuid4().hex}"
        written = [journal.append(saga, "t", Phase.INTENT) for _ in stamps]
        assert [e.timestamp for e in written] == [
            datetime(1970, 1, 1) + timedelta(microseconds=micros) for micros in stamps
        ]
        assert journal.entries(saga) == written
        assert journal.verify(saga).valid
