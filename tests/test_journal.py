"""The hash chain's golden vectors and the journal on every store."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest

from sagacity import Phase, Sagacity
from sagacity.chain import GENESIS_HASH, entry_hash, timestamp_field

H1 = "2b8f009dcde4115339f77250ec69761e299c66809b569f77fe75033c04f80a4b"
H2 = "9058ec436f5710616413c86679ae40f6e6d6cb1828ada8584dfdf4c99020feea"


def test_spec_vectors() -> None:
    """SPEC §3's two vectors hash byte-exactly."""
    ts1 = datetime(2026, 7, 21, 10, 0, 0)
    assert timestamp_field(ts1) == "1784628000.000000"
    h1 = entry_hash(GENESIS_HASH, "s1", 1, "reserveInventory", "INTENT", "{}", "", ts1)
    assert h1 == H1
    h2 = entry_hash(h1, "s1", 2, "reserveInventory", "EXECUTED", "{}", "ok", datetime(2026, 7, 21, 10, 0, 1))
    assert h2 == H2


def test_append_verify_export(store_url: str) -> None:
    """Appends chain from seq 1, verify, and export one line per entry; NUL payloads survive."""
    sg = Sagacity(store_url)
    try:
        sg.journal.append("o1", "t", Phase.INTENT, '{"a":1}')
        sg.journal.append("o1", "t", Phase.EXECUTED, '{"a":1}', "x\x00y é")
        entries = sg.entries("o1")
        assert [e.seq for e in entries] == [1, 2]
        assert entries[1].payload_text == "x\x00y é"
        v = sg.verify("o1")
        assert v.valid
        assert v.entry_count == 2
        assert v.break_at_index == -1
        assert len(list(sg.export("o1"))) == 2
    finally:
        sg.close()


def test_threads_race_gap_free(store_url: str) -> None:
    """Eight threads appending to one saga all land, gap-free, with a valid chain."""
    sg = Sagacity(store_url)
    try:

        def work() -> None:
            for _ in range(20):
                sg.journal.append("race", "t", Phase.INTENT)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [e.seq for e in sg.entries("race")] == list(range(1, 161))
        assert sg.verify("race").valid
    finally:
        sg.close()


def test_unknown_saga_raises() -> None:
    """Verifying a saga with no entries says so."""
    from sagacity.errors import SagaNotFoundError

    with Sagacity("memory://") as sg, pytest.raises(SagaNotFoundError):
        sg.verify("nope")
