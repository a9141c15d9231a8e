"""Appending, verifying and exporting through the public API, on every store."""

from __future__ import annotations

import threading

import pytest

from sagacity import Phase, Sagacity


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


def test_a_saga_whose_tail_the_cache_forgot_appends_in_order(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for one tail per stripe, nearly every append finds its saga forgotten: it starts
    at seq 1, loses to the stored row, reads the tail and lands next, gap-free."""
    monkeypatch.setattr("sagacity._journal._TAILS_PER_STRIPE", 1)
    with Sagacity(store_url) as sg:
        sagas = [f"forgotten-{i}" for i in range(3000)]  # more sagas than stripes: they share
        for round_ in range(3):
            for saga in sagas[:: 7 if round_ else 1]:
                sg.journal.append(saga, "tool", Phase.INTENT, "{}", f"round {round_}")
        for saga in sagas[:50:7]:
            entries = sg.entries(saga)
            assert [e.seq for e in entries] == [1, 2, 3]
            assert [e.payload for e in entries] == ["round 0", "round 1", "round 2"]
            assert sg.verify(saga).valid
