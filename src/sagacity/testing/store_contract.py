"""The store contract suite: run it against your own store in your CI (needs pytest).

Subclass :class:`StoreContract` in a test module and give it a ``store_factory`` fixture that
returns a callable opening your store on a fresh, empty database (one per test)::

    import pytest
    from sagacity.testing.store_contract import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store_factory(self, tmp_path):
            return lambda: MyStore(tmp_path / "journal")

Every test opens the store through the factory (some twice, to see that data outlives an
instance: set ``persistent = False`` for an in-process store), calls ``init_schema`` and closes
it afterwards. What is checked is the behaviour the core relies on (``sagacity.stores.Store``):
keys refused once taken and nothing half-written, seq order and paging, byte-exact saga ids
and text, microsecond timestamps that rehash to the SPEC's test vectors, racing appends from
threads landing gap-free, leases, approval requests, and every capability the store declares.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest

from sagacity._journal import Journal
from sagacity._sagacity import Sagacity
from sagacity.chain import GENESIS_HASH, entry_hash, timestamp_field
from sagacity.model import ApprovalRequest, Entry, Phase, SagaStatus
from sagacity.stores.base import (
    AppendOnlyGrant,
    Capability,
    EntryLogStore,
    LivenessStore,
    LogRow,
    StampedInsert,
    Store,
    TraceContextStore,
    capable,
)

__all__ = ["StoreContract"]

T0 = datetime(2026, 7, 21, 10, 0, 0, 123456)
#: SPEC §3's test vectors: the hashes every store's chain must reproduce byte for byte.
SPEC_HASHES = (
    "2b8f009dcde4115339f77250ec69761e299c66809b569f77fe75033c04f80a4b",
    "9058ec436f5710616413c86679ae40f6e6d6cb1828ada8584dfdf4c99020feea",
)
#: Saga ids that differ only in what a collation might fold: case, trailing space, accents,
#: composed and decomposed forms, a 4-byte character. Each must be its own saga.
DISTINCT_IDS = ("a", "A", "a ", "á", "a\u0301", "ä", "𝄞", "ü-saga", "zeta")
#: Instants a store must read back exactly: microsecond edges, before the epoch, far dates.
INSTANTS_US = (
    0,
    1,
    -1,
    999_999,
    1_784_628_000_000_000,
    1_784_628_000_999_999,
    -2_208_988_800_000_000,  # 1900-01-01
    32_503_680_000_000_000,  # 3000-01-01
    253_402_300_799_999_999,  # 9999-12-31 23:59:59.999999
)
_PROTOCOLS: dict[Capability, type] = {
    Capability.STAMPED_INSERT: StampedInsert,
    Capability.TRACE_CONTEXT: TraceContextStore,
    Capability.APPEND_ONLY_GRANT: AppendOnlyGrant,
    Capability.LIVENESS: LivenessStore,
    Capability.ENTRY_LOG: EntryLogStore,
}


def _request(saga_id: str, seq: int, created_at: datetime, input: str = '{"amount":"10"}') -> ApprovalRequest:
    return ApprovalRequest(
        saga_id, seq, "send_wire", input, hashlib.sha256(input.encode()).hexdigest(), created_at
    )


def _entry(saga_id: str, seq: int, prev: str, phase: str = "INTENT", input: str = "{}") -> Entry:
    moment = T0 + timedelta(seconds=seq)
    digest = entry_hash(prev, saga_id, seq, "t", phase, input, "", moment)
    return Entry(saga_id, seq, "t", phase, input, "", moment, digest)


class StoreContract:
    """The behaviour every ``sagacity.stores.Store`` must have; subclass it with a factory."""

    #: Whether a second store opened by the factory in the same test sees the first's data.
    persistent = True

    @pytest.fixture
    def store_factory(self) -> Callable[[], Store]:
        raise NotImplementedError(
            "define a `store_factory` fixture returning a callable that opens the store"
        )

    @pytest.fixture
    def store(self, store_factory: Callable[[], Store]) -> Iterator[Store]:
        store = store_factory()
        store.init_schema()
        try:
            yield store
        finally:
            store.close()

    @pytest.fixture
    def sg(self, store: Store) -> Sagacity:
        return Sagacity(store=store, init_schema=False)

    # -- the contract's shape --------------------------------------------------------------------
    def test_is_a_store_declaring_what_it_has(self, store: Store) -> None:
        """The store fulfils the Protocol, and each capability it declares has its methods."""
        assert isinstance(store, Store)
        assert isinstance(store.capabilities, frozenset)
        for capability in store.capabilities:
            assert isinstance(capability, Capability)
            protocol = _PROTOCOLS.get(capability)
            if protocol is not None:
                assert isinstance(store, protocol), f"declares {capability} but lacks its methods"

    # -- inserts ---------------------------------------------------------------------------------
    def test_a_taken_key_is_refused_and_writes_nothing(self, store: Store) -> None:
        """insert_entry says False for an existing (saga_id, seq) and keeps the first row."""
        first = _entry("k", 1, GENESIS_HASH)
        assert store.insert_entry(first) is True
        assert store.insert_entry(_entry("k", 1, GENESIS_HASH, input='{"other":1}')) is False
        assert store.read_entries("k") == [first]

    def test_insert_entries_is_all_or_none(self, store: Store) -> None:
        """A fenced batch meeting one taken seq writes none of its rows."""
        one = _entry("b", 1, GENESIS_HASH)
        two = _entry("b", 2, one.hash)
        assert store.insert_entries([one, two]) is True
        three = _entry("b", 3, two.hash)
        assert store.insert_entries([_entry("b", 2, one.hash, input='{"x":1}'), three]) is False
        assert store.read_entries("b") == [one, two]
        assert store.insert_entries([three]) is True
        assert store.tail("b") == three

    def test_insert_entries_of_two_sagas_is_all_or_none(self, store: Store) -> None:
        """Rows of two chains inserted together (a call's INTENT with its budget's debit) land
        together or not at all: a seq taken in either chain writes neither."""
        debit = _entry("meter", 1, GENESIS_HASH)
        intent = _entry("call", 1, GENESIS_HASH)
        assert store.insert_entries([debit, intent]) is True
        assert (store.read_entries("meter"), store.read_entries("call")) == ([debit], [intent])
        late = _entry("call", 2, intent.hash)
        taken = _entry("meter", 1, GENESIS_HASH, input='{"x":1}')
        assert store.insert_entries([taken, late]) is False
        assert store.read_entries("call") == [intent]
        retaken = _entry("call", 1, GENESIS_HASH)
        assert store.insert_entries([_entry("meter", 2, debit.hash), retaken]) is False
        assert store.read_entries("meter") == [debit]

    def test_spec_vectors_hash_identically(self, store: Store) -> None:
        """Appends at the SPEC's instants read back with the SPEC's hashes: same bytes everywhere."""
        clock = iter((1_784_628_000 * 10**9, 1_784_628_001 * 10**9))
        journal = Journal(store, clock=lambda: next(clock))
        journal.append("s1", "reserveInventory", Phase.INTENT, "{}")
        journal.append("s1", "reserveInventory", Phase.EXECUTED, "{}", "ok")
        assert tuple(e.hash for e in store.read_entries("s1")) == SPEC_HASHES
        assert journal.verify("s1").valid

    def test_racing_threads_append_gap_free(self, store: Store) -> None:
        """Eight threads, each with its own journal, appending to one saga: every append lands once."""
        threads, each = 8, 15
        barrier = threading.Barrier(threads)
        errors: list[BaseException] = []

        def append() -> None:
            journal = Journal(store, max_append_attempts=threads * each * 4)
            barrier.wait()
            try:
                for i in range(each):
                    journal.append("race", "t", Phase.INTENT, f'{{"i":{i}}}')
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        workers = [threading.Thread(target=append) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert errors == []
        entries = store.read_entries("race")
        assert [e.seq for e in entries] == list(range(1, threads * each + 1))
        assert Journal(store).verify("race").valid

    # -- reads -----------------------------------------------------------------------------------
    def test_tail_and_get_entry(self, store: Store) -> None:
        """tail gives the highest seq and get_entry one exact row; None where nothing exists."""
        journal = Journal(store)
        assert store.tail("t1") is None
        first = journal.append("t1", "t", Phase.INTENT)
        last = journal.append("t1", "t", Phase.EXECUTED, payload="ok")
        assert store.tail("t1") == last
        assert store.get_entry("t1", 1) == first
        assert store.get_entry("t1", 3) is None
        assert store.get_entry("t2", 1) is None

    def test_read_entries_pages_in_seq_order(self, store: Store) -> None:
        """read_entries returns entries after a seq, at most ``limit``, in seq order."""
        journal = Journal(store)
        for i in range(25):
            journal.append("paged", "t", Phase.INTENT, f'{{"i":{i}}}')
        journal.append("other", "t", Phase.INTENT)
        read = store.read_entries
        assert [e.seq for e in read("paged", 0, 10)] == list(range(1, 11))
        assert [e.seq for e in read("paged", 20, 10)] == list(range(21, 26))
        assert read("paged", 25, 10) == []
        assert [e.seq for e in read("paged", 7)] == list(range(8, 26))
        assert [e.input for e in read("paged", 3, 2)] == ['{"i":3}', '{"i":4}']
        assert read("missing") == []

    def test_saga_ids_are_byte_exact_and_sorted(self, store: Store) -> None:
        """Ids differing only in case, a trailing space, accents or normal form are distinct
        sagas, listed once each in code-point order."""
        journal = Journal(store)
        for saga_id in (*DISTINCT_IDS, "a"):
            journal.append(saga_id, "t", Phase.INTENT, "{}")
        assert store.saga_ids() == sorted(DISTINCT_IDS)
        for saga_id in DISTINCT_IDS:
            entries = store.read_entries(saga_id)
            seqs = [1, 2] if saga_id == "a" else [1]
            assert [(e.saga_id, e.seq) for e in entries] == [(saga_id, seq) for seq in seqs]
            assert store.tail(saga_id) == entries[-1]

    def test_text_reads_back_byte_for_byte(self, store: Store) -> None:
        """4-byte characters, NUL (escaped by the journal), empty and large text round-trip."""
        journal = Journal(store)
        big = '{"blob":"' + "x€😀" * 60_000 + '"}'
        texts = [("𝄞-tool", '{"to":"日本 😀"}', "ok 😀"), ("t", "", ""), ("t", big, "a\x00b")]
        written = [journal.append("text-𝄞", name, Phase.INTENT, inp, out) for name, inp, out in texts]
        assert store.read_entries("text-𝄞") == written
        assert journal.verify("text-𝄞").valid

    def test_instants_read_back_as_hashed(self, store: Store) -> None:
        """Timestamps at microsecond edges and far from now read back exactly, so chains verify."""
        clock = iter(micros * 1000 + 999 for micros in INSTANTS_US)
        journal = Journal(store, clock=lambda: next(clock))
        written = [journal.append("instants", "t", Phase.INTENT) for _ in INSTANTS_US]
        assert [e.timestamp for e in written] == [
            datetime(1970, 1, 1) + timedelta(microseconds=micros) for micros in INSTANTS_US
        ]
        assert store.read_entries("instants") == written
        assert journal.verify("instants").valid

    def test_schema_init_is_idempotent_and_data_outlives_the_instance(
        self, store: Store, store_factory: Callable[[], Store]
    ) -> None:
        """init_schema again changes nothing; a second instance (if persistent) sees every row."""
        journal = Journal(store)
        journal.append("keep", "t", Phase.INTENT)
        store.put_approval_request(_request("keep", 1, T0))
        store.init_schema()
        assert [e.seq for e in store.read_entries("keep")] == [1]
        if not self.persistent:
            return
        again = store_factory()
        try:
            again.init_schema()
            assert again.read_entries("keep") == store.read_entries("keep")
            assert again.get_approval_request("keep", 1) == _request("keep", 1, T0)
            Journal(again).append("keep", "t", Phase.EXECUTED)
            assert [e.seq for e in store.read_entries("keep")] == [1, 2]
        finally:
            again.close()

    # -- leases ----------------------------------------------------------------------------------
    def test_a_lease_excludes_others_until_released(self, store: Store) -> None:
        """While one holder has a saga's lease, another (not waiting) is told no; after, yes."""
        outcome: list[bool] = []

        def try_lease() -> None:
            with store.lease("leased", wait=False) as got:
                outcome.append(got)

        with store.lease("leased", wait=True) as held:
            assert held is True
            worker = threading.Thread(target=try_lease)
            worker.start()
            worker.join()
            with store.lease("other saga", wait=False) as other:
                assert other is True
        try_lease()
        assert outcome == [False, True]

    # -- approval requests -----------------------------------------------------------------------
    def test_requests_put_get_replace_list_delete(self, store: Store) -> None:
        """Requests read back field for field (expiry too), replace by key, list oldest first,
        and delete once."""
        plain = _request("o1", 3, T0)
        expiring = ApprovalRequest(
            "o1", 5, "w", '{"to":"日本"}', "a" * 64, T0, expires_at=T0 + timedelta(hours=1)
        )
        early = _request("b", 9, T0 - timedelta(minutes=1))
        for request in (plain, expiring, early):
            store.put_approval_request(request)
        assert store.get_approval_request("o1", 3) == plain
        assert store.get_approval_request("o1", 5) == expiring
        assert store.get_approval_request("o1", 4) is None
        newer = _request("o1", 3, T0 + timedelta(seconds=1), '{"amount":"99"}')
        store.put_approval_request(newer)
        assert list(store.list_approval_requests()) == [early, expiring, newer]
        assert list(store.list_approval_requests("o1")) == [expiring, newer]
        assert list(store.list_approval_requests("none")) == []
        assert store.delete_approval_request("o1", 3) is True
        assert store.delete_approval_request("o1", 3) is False
        assert [r.journal_seq for r in store.list_approval_requests("o1")] == [5]

    def test_racing_deletes_only_one_wins(self, store: Store) -> None:
        """Eight threads deleting the same request at once: exactly one is told it deleted it."""
        store.put_approval_request(_request("race", 1, T0))
        barrier = threading.Barrier(8)
        results: list[bool] = []

        def delete() -> None:
            barrier.wait()
            results.append(store.delete_approval_request("race", 1))

        workers = [threading.Thread(target=delete) for _ in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert sorted(results) == [False] * 7 + [True]

    # -- capabilities ----------------------------------------------------------------------------
    def test_trace_context_when_declared(self, store: Store) -> None:
        """A kept gate context reads back, and is dropped once its request is gone."""
        traces = capable(store, Capability.TRACE_CONTEXT)
        if traces is None:
            pytest.skip("the store does not declare Capability.TRACE_CONTEXT")
        store.put_approval_request(_request("g", 2, T0))
        store.put_approval_request(_request("g", 4, T0))
        traces.put_trace_context("g", 2, "00-" + "1" * 32 + "-" + "2" * 16 + "-01", "k=v")
        traces.put_trace_context("g", 4, "00-" + "3" * 32 + "-" + "4" * 16 + "-01")
        assert traces.get_trace_context("g", 2) == ("00-" + "1" * 32 + "-" + "2" * 16 + "-01", "k=v")
        store.delete_approval_request("g", 2)
        traces.put_trace_context("g", 4, "00-" + "5" * 32 + "-" + "6" * 16 + "-01")
        assert traces.get_trace_context("g", 2) is None
        assert traces.get_trace_context("g", 4) == ("00-" + "5" * 32 + "-" + "6" * 16 + "-01", "")

    def test_stamped_insert_when_declared(self, store: Store) -> None:
        """insert_entry_at stores the entry exactly as insert_entry would, taken keys refused."""
        stamped = capable(store, Capability.STAMPED_INSERT)
        if stamped is None:
            pytest.skip("the store does not declare Capability.STAMPED_INSERT")
        first = _entry("st", 1, GENESIS_HASH)
        stamp = timestamp_field(first.timestamp)
        assert stamped.insert_entry_at(first, stamp) is True
        assert stamped.insert_entry_at(first, stamp) is False
        assert store.read_entries("st") == [first]

    def test_liveness_leases_when_declared(self, store: Store, store_factory: Callable[[], Store]) -> None:
        """A saga is live while any holder holds its liveness lease, to this store and (when the
        factory opens the same journal) to another store on it; the last release ends it. Its
        ``live_elsewhere`` leaves out the store's own holders and counts another store's."""
        live = capable(store, Capability.LIVENESS)
        if live is None:
            pytest.skip("the store does not declare Capability.LIVENESS")
        other = store_factory() if self.persistent else store
        try:
            seen = capable(other, Capability.LIVENESS)
            assert seen is not None
            assert live.live_among(["running", "idle"]) == set()
            live.hold_live("running")
            live.hold_live("running")  # a second holder in this process (a resume, a thread)
            assert live.live_among(["running", "idle"]) == {"running"}
            assert seen.live_among(["idle", "running"]) == {"running"}
            assert live.live_elsewhere(["running", "idle"]) == set()  # its own holders only
            if other is not store:  # another store on the journal is another holder
                assert seen.live_elsewhere(["idle", "running"]) == {"running"}
                seen.hold_live("idle")
                assert live.live_elsewhere(["running", "idle"]) == {"idle"}
                seen.release_live("idle")
            live.release_live("running")
            assert seen.live_among(["running"]) == {"running"}  # one holder is left
            live.release_live("running")
            assert live.live_among(["running"]) == set()
            assert seen.live_among(["running", "idle"]) == set()
            live.release_live("running")  # one release too many is harmless
            assert live.live_among([]) == set()
        finally:
            if other is not store:
                other.close()

    def test_entry_log_when_declared(self, store: Store, store_factory: Callable[[], Store]) -> None:
        """The checkpoint log gives each entry one index, in (timestamp, saga id, seq) order, and
        never another; its rows carry the hash logged and the journal's hash now. Reading an empty
        log finds nothing; a second store on the journal reads the same log."""
        kept = capable(store, Capability.ENTRY_LOG)
        if kept is None:
            pytest.skip("the store does not declare Capability.ENTRY_LOG")
        log = kept.entry_log()
        assert (log.size(), list(log.rows(0, 0)), log.last_logged("a", 10)) == (0, [], None)
        a1 = _entry("a", 1, GENESIS_HASH)
        a2 = _entry("a", 2, a1.hash)
        b1 = _entry("b", 1, GENESIS_HASH)  # as old as a1: the saga id orders them
        assert store.insert_entries([a1, a2])
        assert store.insert_entry(b1)
        assert log.journal_entries() == 3
        assert log.extend() == 3
        rows = [LogRow(i, e.saga_id, e.seq, e.hash, e.hash) for i, e in enumerate((a1, b1, a2))]
        assert (log.size(), list(log.rows(0, 3)), list(log.rows(1, 2))) == (3, rows, rows[1:2])
        assert log.extend() == 0
        b2 = _entry("b", 2, b1.hash)
        assert store.insert_entry(b2)
        assert log.extend() == 1
        rows.append(LogRow(3, "b", 2, b2.hash, b2.hash))
        assert (log.last_logged("a", 4), log.last_logged("a", 2), log.last_logged("b", 4)) == (
            rows[2],
            rows[0],
            rows[3],
        )
        if self.persistent:
            other = store_factory()
            try:
                seen = capable(other, Capability.ENTRY_LOG)
                assert seen is not None
                assert list(seen.entry_log().rows(0, 4)) == rows
            finally:
                other.close()

    def test_operator_reads_list_and_count_sagas(self, sg: Sagacity) -> None:
        """Listing and counting sagas (the store's own index if it declares one, else a scan)."""
        sg.journal.append("done", "t", Phase.INTENT)
        sg.journal.append("done", "t", Phase.EXECUTED, payload="ok")
        sg.journal.append("open", "t", Phase.INTENT)
        assert sg.saga_counts() == {SagaStatus.COMPLETED: 1, SagaStatus.IN_DOUBT: 1}
        assert {s.saga_id for s in sg.sagas(limit=10)} == {"done", "open"}
        sg.journal.append("open", "t", Phase.EXECUTED, payload="ok")
        assert sg.saga_counts() == {SagaStatus.COMPLETED: 2}
