"""The store contract: the suite shipped as ``sagacity.testing.store_contract``, run on every store,
and property tests of timestamps beside it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagacity import Phase, Sagacity
from sagacity._journal import Journal
from sagacity.stores import Store, open_store
from sagacity.testing.store_contract import StoreContract


class TestStoreContract(StoreContract):
    """Memory, SQLite, PostgreSQL and MariaDB, each on a fresh database per test."""

    @pytest.fixture
    def store_factory(self, store_url: str) -> Callable[[], Store]:
        self.persistent = store_url != "memory://"
        return lambda: open_store(store_url)


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
