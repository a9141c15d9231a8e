"""Sagas belong to the principal that started them (#21): journaled in the START, and another
principal naming the saga is told there is no such saga; an admin may act on any."""

from __future__ import annotations

import json

import pytest

from sagacity import CompensationContext, Reversibility, Sagacity, SagaStatus, acting_as, tool
from sagacity.errors import ApprovalNotFoundError, SagaExistsError, SagaNotFoundError


def _tools() -> tuple[object, object, list[str]]:
    undone: list[str] = []

    @tool
    def book(room: str) -> str:
        return room

    @book.compensation
    def unbook(ctx: CompensationContext) -> None:
        undone.append(ctx.result)

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def pay(amount: str) -> str:
        return f"paid {amount}"

    return book, pay, undone


def test_the_principal_is_in_the_chain_and_in_the_export(sg: Sagacity) -> None:
    book, _, _ = _tools()
    with acting_as("alice@example.com"):
        sg.run("mine", book, "101")  # type: ignore[arg-type]
    start = sg.entries("mine")[0]
    assert (start.seq, start.tool_name, start.phase) == (1, "sagacity:saga", "INTENT")
    assert json.loads(start.input) == {"onAbandon": "compensate", "principal": "alice@example.com"}
    assert json.loads(next(sg.export("mine")))["input"] == start.input
    assert sg.verify("mine").valid


def test_another_principal_continuing_or_rolling_back_is_told_there_is_no_such_saga(sg: Sagacity) -> None:
    book, _, undone = _tools()
    with acting_as("alice@example.com"):
        sg.run("alices", book, "101")  # type: ignore[arg-type]
    before = sg.entries("alices")
    with acting_as("mallory@example.com"):
        with (
            pytest.raises(SagaNotFoundError, match="no journal entries for saga 'alices'"),
            sg.saga("alices", continue_existing=True),
        ):
            book("102")  # type: ignore[operator]
        with pytest.raises(SagaNotFoundError), sg.saga("alices", continue_existing=True):
            raise RuntimeError("roll it back")  # a rollback is a continued saga that fails
    assert sg.entries("alices") == before
    assert undone == []
    with acting_as("alice@example.com"), sg.saga("alices", continue_existing=True) as mine:
        book("103")  # type: ignore[operator]
    assert mine.result is not None
    assert mine.result.status is SagaStatus.COMPLETED
    with acting_as("ops", admin=True), pytest.raises(RuntimeError), sg.saga("alices", continue_existing=True):
        raise RuntimeError("an admin rolls it back")
    assert sorted(undone) == ["101", "103"]


def test_another_principal_cannot_resume_it(sg: Sagacity) -> None:
    _, pay, _ = _tools()
    with acting_as("alice@example.com"):
        [request] = sg.run("pay-a", pay, "10.00").awaiting  # type: ignore[arg-type]
    sg.approve("pay-a", request.journal_seq, "bob@example.com")
    with acting_as("mallory@example.com"), pytest.raises(ApprovalNotFoundError, match="no pending approval"):
        sg.resume("pay-a", request.journal_seq, request.input)
    with acting_as("alice@example.com"):
        assert sg.resume("pay-a", request.journal_seq, request.input).status is SagaStatus.COMPLETED


def test_a_saga_without_a_principal_or_a_start_is_anyones(sg: Sagacity) -> None:
    book, _, _ = _tools()
    sg.run("nobodys", book, "1")  # type: ignore[arg-type]
    sg.journal.append("legacy", "book", "INTENT", '{"room":"2"}')  # an older writer: no START
    sg.journal.append("legacy", "book", "EXECUTED", '{"room":"2"}', "2")
    with acting_as("mallory@example.com"):
        for saga_id in ("nobodys", "legacy"):
            with sg.saga(saga_id, continue_existing=True):
                book("3")  # type: ignore[operator]
    assert sg.status("legacy") is SagaStatus.COMPLETED  # legacy semantics: no START, no END
    assert [e.tool_name for e in sg.entries("legacy")] == ["book"] * 4


def test_a_fresh_run_on_another_principals_saga_id_learns_nothing_about_it(sg: Sagacity) -> None:
    """The id is taken, so the run is refused, but not with the saga's status or size."""
    book, _, _ = _tools()
    with acting_as("alice@example.com"):
        sg.run("taken", book, "101")  # type: ignore[arg-type]
    before = sg.entries("taken")
    with acting_as("mallory@example.com"), pytest.raises(SagaExistsError) as refused:
        sg.run("taken", book, "102")  # type: ignore[arg-type]
    message = str(refused.value)
    assert "cannot be used" in message
    assert "COMPLETED" not in message
    assert "entries" not in message
    assert sg.entries("taken") == before
    with acting_as("alice@example.com"), pytest.raises(SagaExistsError, match=r"already exists \(COMPLETED"):
        sg.run("taken", book, "103")  # type: ignore[arg-type]  # the owner is told what holds the id
