"""Tool arguments and results (and error messages) reach spans only when content capture is on:
by ``sagacity.otel.enable(capture_content=True)`` or the standard GenAI switch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import sagacity.otel
from sagacity import CompensationContext, Sagacity, tool
from sagacity._telemetry import CAPTURE_CONTENT_ENV

from .conftest import Otel, make_otel

SECRET = "card 4111 1111 1111 1111"


@pytest.fixture
def agent() -> Callable[[], None]:
    """An agent whose first call returns a result, second raises with a secret in the message."""

    @tool
    def quote(sku: str, quantity: int) -> dict[str, Any]:
        return {"sku": sku, "price": "9.90", "quantity": quantity}

    @quote.compensation
    def forget(ctx: CompensationContext) -> None: ...

    @tool
    def charge(reason: str) -> str:
        raise ValueError(f"refused: {reason}")

    def work() -> None:
        quote("SKU-9", 2)
        charge(SECRET)

    return work


def _traced(capture: bool | None, work: Callable[[], None]) -> Otel:
    otel = make_otel(capture_content=capture)
    try:
        with Sagacity("memory://") as sg:
            sg.run("content-1", work)
    finally:
        sagacity.otel.reset()
    return otel


def _everything(otel: Otel) -> str:
    """Every attribute value, status description and event of every span, as one text."""
    parts = []
    for span in otel.spans:
        parts.extend(str(v) for v in (span.attributes or {}).values())
        parts.append(span.status.description or "")
        parts.extend(str(dict(e.attributes or {})) for e in span.events)
    return "\n".join(parts)


def test_off_by_default(agent: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the switch, no argument, result or error message appears anywhere in the spans."""
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    otel = _traced(None, agent)
    text = _everything(otel)
    assert "SKU-9" not in text
    assert "9.90" not in text
    assert "4111 1111" not in text  # with its space: spans hold hex ids, where "4111" turns up by chance
    quote = otel.one("execute_tool quote")
    assert quote.attributes is not None
    assert "gen_ai.tool.call.arguments" not in quote.attributes
    assert "gen_ai.tool.call.result" not in quote.attributes


def test_on_when_asked(agent: Callable[[], None]) -> None:
    """``capture_content=True``: arguments and result exactly as journaled; the error's message
    is on the failed span; the compensation says why it ran."""
    otel = _traced(True, agent)
    quote = otel.one("execute_tool quote")
    assert quote.attributes is not None
    assert quote.attributes["gen_ai.tool.call.arguments"] == '{"sku":"SKU-9","quantity":2}'
    assert quote.attributes["gen_ai.tool.call.result"] == '{"sku":"SKU-9","price":"9.90","quantity":2}'
    charge = otel.one("execute_tool charge")
    assert charge.attributes is not None
    assert charge.attributes["gen_ai.tool.call.arguments"] == f'{{"reason":"{SECRET}"}}'
    assert "gen_ai.tool.call.result" not in charge.attributes
    assert charge.status.description == f"ValueError: refused: {SECRET}"
    assert [e.name for e in charge.events] == ["exception"]
    run = otel.one("sagacity.compensate")
    assert run.attributes is not None
    assert SECRET in str(run.attributes["sagacity.compensation.reason"])


@pytest.mark.parametrize(
    ("value", "captured"),
    [
        ("true", True),
        ("TRUE", True),
        ("SPAN_ONLY", True),
        ("span_and_event", True),
        ("EVENT_ONLY", False),  # Sagacity emits no events: nothing to capture into
        ("NO_CONTENT", False),
        ("false", False),
        ("", False),
    ],
)
def test_the_standard_switch(
    agent: Callable[[], None], monkeypatch: pytest.MonkeyPatch, value: str, captured: bool
) -> None:
    """``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``: the boolean form and the enum of
    the latest experimental GenAI conventions both work; an explicit setting wins over it."""
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, value)
    otel = _traced(None, agent)
    attrs = otel.one("execute_tool quote").attributes or {}
    assert ("gen_ai.tool.call.arguments" in attrs) is captured
    explicit = _traced(False, agent)
    assert "gen_ai.tool.call.arguments" not in (explicit.one("execute_tool quote").attributes or {})


def test_approval_payloads_are_content_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gated call's arguments (the payload a human approves) follow the same switch."""
    from sagacity import Reversibility

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def wire(amount: str, iban: str) -> str:
        return "sent"

    for capture in (False, True):
        otel = make_otel(capture_content=capture)
        with Sagacity("memory://") as sg:
            sg.run("gated", lambda: wire("10.00", "DE89 3704"))
        sagacity.otel.reset()
        attrs = otel.one("execute_tool wire").attributes or {}
        assert ("DE89 3704" in str(attrs.get("gen_ai.tool.call.arguments"))) is capture


def test_a_rejection_reason_is_content() -> None:
    """A human's reason for rejecting (like a compensation's reason) reaches no span unless content
    capture is on; who decided is not content and is always there."""
    from sagacity import Reversibility

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def wire(amount: str, iban: str) -> str:
        return "sent"

    words = "the beneficiary is my ex-husband"
    for capture in (False, True):
        otel = make_otel(capture_content=capture)
        with Sagacity("memory://") as sg:
            sg.run("reasoned", lambda: wire("10.00", "DE89 3704"))
            sg.reject("reasoned", 2, "bob@example.com", words)
        sagacity.otel.reset()
        reject = otel.one("sagacity.reject")
        attrs = reject.attributes or {}
        assert attrs["sagacity.decision.by"] == "bob@example.com"
        assert (attrs.get("sagacity.decision.reason") == words) is capture
        assert (words in _everything(otel)) is capture
