"""The deferred durability mode (``durability="deferred"``): a call's outcome is committed with
the saga's next entry instead of on its own, and once the saga has ended its journal reads
exactly like one written in the default mode. Seen from another ``Sagacity`` on the same store
(another process's view), on SQLite, PostgreSQL and MariaDB. The crashes are in
tests/crash/test_kill9_deferred.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from sagacity import CompensationContext, Reversibility, Sagacity, SagaStatus, tool
from sagacity.errors import InvalidValueError
from sagacity.framework import journaled_call, spec_of


@pytest.fixture
def observer(durable_url: str) -> Iterator[Sagacity]:
    with Sagacity(durable_url) as other:
        yield other


def shape(sg: Sagacity, saga_id: str) -> list[str]:
    return [
        "LIFE" if e.tool_name == "sagacity:saga" else f"{e.tool_name} {e.phase}" for e in sg.entries(saga_id)
    ]


def declare() -> tuple[object, object, object]:
    @tool
    def book(item: str) -> str:
        return f"booked-{item}"

    @book.compensation
    def unbook(ctx: CompensationContext) -> None:
        pass

    @tool(durability="immediate")
    def note(text: str) -> str:
        return text.upper()

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def pay(amount: int) -> str:
        return f"paid {amount}"

    return book, note, pay


def give_up(book: Any) -> None:
    book("C")
    raise RuntimeError("the agent gave up")


def test_a_deferred_saga_reads_like_an_immediate_one_once_it_ends(durable_url: str) -> None:
    book, note, _ = declare()
    journals = {}
    for mode in ("immediate", "deferred"):
        with Sagacity(durable_url, durability=mode) as sg:
            with sg.saga(f"ok-{mode}") as ok:
                book("A")  # type: ignore[operator]
                note("x")  # type: ignore[operator]
                book("B")  # type: ignore[operator]
            bad = sg.run(f"bad-{mode}", give_up, book)
            assert ok.result is not None
            assert ok.result.status is SagaStatus.COMPLETED
            assert bad.status is SagaStatus.COMPENSATED
            journals[mode] = [
                [(e.seq, e.tool_name, e.phase, e.input, e.payload) for e in sg.entries(f"{name}-{mode}")]
                for name in ("ok", "bad")
            ]
            for name in ("ok", "bad"):
                assert sg.verify(f"{name}-{mode}").valid
            assert {s.saga_id: s.status for s in sg.sagas() if s.saga_id.endswith(mode)} == {
                f"ok-{mode}": SagaStatus.COMPLETED,
                f"bad-{mode}": SagaStatus.COMPENSATED,
            }
            assert sg.in_doubt() == []
    assert journals["deferred"] == journals["immediate"]


def test_an_outcome_is_committed_with_the_next_entry(durable_url: str, observer: Sagacity) -> None:
    book, note, _ = declare()
    with Sagacity(durable_url) as sg, sg.saga("rides", durability="deferred"):
        book("A")  # type: ignore[operator]
        assert shape(observer, "rides") == ["LIFE", "book INTENT"]  # in flight, as seen elsewhere
        book("B")  # type: ignore[operator]
        assert shape(observer, "rides") == ["LIFE", "book INTENT", "book EXECUTED", "book INTENT"]
        note("x")  # type: ignore[operator]  # a tool that opts out commits its own outcome
        assert shape(observer, "rides")[-3:] == ["book EXECUTED", "note INTENT", "note EXECUTED"]
    assert shape(observer, "rides")[-1:] == ["LIFE"]  # the END
    assert observer.status("rides") is SagaStatus.COMPLETED


def test_a_deferred_failure_rides_with_the_compensation(durable_url: str, observer: Sagacity) -> None:
    @tool
    def flaky(n: int) -> None:
        raise ValueError("no stock")

    book, _, _ = declare()
    with Sagacity(durable_url, durability="deferred") as sg, sg.saga("fails") as scope:
        book("A")  # type: ignore[operator]
        with pytest.raises(ValueError):
            flaky(1)
        assert shape(observer, "fails") == ["LIFE", "book INTENT", "book EXECUTED", "flaky INTENT"]
    assert scope.result is not None
    assert scope.result.status is SagaStatus.COMPENSATED
    assert shape(observer, "fails")[3:6] == ["flaky INTENT", "flaky FAILED", "saga FAILED"]
    assert observer.verify("fails").valid


def test_an_irreversible_tool_keeps_its_own_commit(durable_url: str, observer: Sagacity) -> None:
    book, _, pay = declare()
    with Sagacity(durable_url, durability="deferred") as sg, sg.saga("gated") as scope:
        book("A")  # type: ignore[operator]
        pay(5)  # type: ignore[operator]  # gated: the gate is committed before the call returns
        assert shape(observer, "gated") == ["LIFE", "book INTENT", "book EXECUTED", "pay AWAITING_APPROVAL"]
    assert scope.result is not None
    assert scope.result.status is SagaStatus.AWAITING_APPROVAL
    [request] = observer.pending_approvals("gated")
    observer.approve("gated", request.journal_seq, "alice@example.com")
    result = observer.resume("gated", request.journal_seq, request.input)
    assert result.status is SagaStatus.COMPLETED
    assert shape(observer, "gated")[-3:] == ["pay INTENT", "pay EXECUTED", "LIFE"]


def test_bad_durability_is_refused_before_anything_runs(durable_url: str) -> None:
    with pytest.raises(InvalidValueError, match="durability must be 'immediate' or 'deferred'"):
        Sagacity(durable_url, durability="lazy")
    with Sagacity(durable_url) as sg, pytest.raises(InvalidValueError, match="durability"):
        sg.saga("x", durability="sometimes")
    with pytest.raises(InvalidValueError, match="durability"):
        tool(durability="later")(lambda: None)


def test_a_framework_call_replays_in_the_deferred_mode(durable_url: str) -> None:
    """A call an agent framework makes (keyed by its call id) commits its own outcome, so a
    re-presented call replays its journaled result and runs once; a plain call's held outcome
    rides with the keyed call's INTENT (a decision of its admission)."""
    book, _, _ = declare()
    spec = spec_of(book)
    assert spec is not None
    runs: list[str] = []

    def present(call_id: str) -> Any:
        return journaled_call(spec, '{"item":"K"}', call_id, lambda: runs.append(call_id) or "booked-K")

    with Sagacity(durable_url, durability="deferred") as sg, sg.saga("keyed"):
        book("A")  # type: ignore[operator]  # held ...
        assert present("call-1") == "booked-K"  # ... rides with this call's INTENT
        assert present("call-1") == "booked-K"  # a replay: the journaled result, nothing runs
        assert shape(sg, "keyed") == ["LIFE", "book INTENT", "book EXECUTED", "book INTENT", "book EXECUTED"]
    assert runs == ["call-1"]


def test_async_calls_defer_the_same_way(durable_url: str, observer: Sagacity) -> None:
    @tool
    async def fetch(key: str) -> str:
        return f"value-{key}"

    async def work() -> None:
        async with sg.saga("async", durability="deferred") as scope:
            await fetch("a")  # type: ignore[operator]
            seen = await observer.entries_async("async")
            assert [f"{e.tool_name} {e.phase}" for e in seen[1:]] == ["fetch INTENT"]
            await fetch("b")  # type: ignore[operator]
        assert scope.result is not None
        assert scope.result.status is SagaStatus.COMPLETED

    with Sagacity(durable_url) as sg:
        asyncio.run(work())
    assert shape(observer, "async") == [
        "LIFE",
        "fetch INTENT",
        "fetch EXECUTED",
        "fetch INTENT",
        "fetch EXECUTED",
        "LIFE",
    ]


def test_a_held_outcome_with_nul_and_non_ascii_lands_as_written(durable_url: str, observer: Sagacity) -> None:
    """A deferred outcome is checked and escaped when it is held, as an immediate one is when it
    is appended: a result with a NUL, a lone surrogate and non-ASCII text lands with the next
    entry, reads back as it would in the default mode, and the chain verifies."""

    @tool(name="echo-ü")
    def echo(text: str) -> str:
        return text + "\x00\ud800 ü"

    payloads = {}
    for mode in ("immediate", "deferred"):
        with Sagacity(durable_url) as sg:
            with sg.saga(f"odd-{mode}", durability=mode):
                assert echo(text="Grüße") == "Grüße\x00\ud800 ü"
            payloads[mode] = [e.payload for e in observer.entries(f"odd-{mode}") if e.tool_name == "echo-ü"]
            assert observer.verify(f"odd-{mode}").valid
    assert payloads["deferred"] == payloads["immediate"]
    assert len(payloads["deferred"]) == 2  # INTENT and EXECUTED
