"""When an agent framework already opened the tool's span (Pydantic AI, the MCP SDK), Sagacity
enriches that span instead of nesting a duplicate ``execute_tool`` under it.

The framework spans here are made with the real SDK tracer, named and attributed as those
frameworks name theirs: Pydantic AI's ``running tool`` (instrumentation version 2) or
``execute_tool x`` (version 3) with ``gen_ai.tool.name`` and ``gen_ai.tool.call.id``; the MCP
Python SDK's server span ``MCP handle tools/call x`` with ``mcp.method.name``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sagacity import Sagacity, tool
from sagacity._otel_spans import tool_call_id

from .conftest import Otel


@pytest.fixture
def lookup() -> Callable[..., Any]:
    @tool
    def lookup(sku: str) -> str:
        """Find a product."""
        return f"found {sku}"

    return lookup


FRAMEWORK_SPANS = [
    ("running tool", {"gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "call_7"}),
    ("execute_tool lookup", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}),
    ("MCP handle tools/call lookup", {"mcp.method.name": "tools/call"}),
]


@pytest.mark.parametrize(("name", "attributes"), FRAMEWORK_SPANS, ids=["pydantic-ai-v2", "v3", "mcp-sdk"])
def test_a_framework_tool_span_is_enriched_not_duplicated(
    otel: Otel, lookup: Callable[..., Any], name: str, attributes: dict[str, Any]
) -> None:
    """The framework's span gets the sagacity.* facts; no execute_tool span of ours exists."""
    tracer = otel.tracer_provider.get_tracer("a-framework")

    def agent() -> None:
        with tracer.start_as_current_span(name, attributes=attributes):
            lookup("SKU-1")

    with Sagacity("memory://") as sg:
        sg.run("framework-1", agent)
        entries = sg.entries("framework-1")
    framework = otel.one(name)
    assert otel.children(framework) == []
    assert otel.named("execute_tool lookup") == ([framework] if name == "execute_tool lookup" else [])
    attrs = framework.attributes or {}
    assert attrs["sagacity.saga.id"] == "framework-1"
    assert attrs["sagacity.journal.intent_seq"] == 2
    assert attrs["sagacity.journal.seq"] == 3  # after the saga's START
    assert attrs["sagacity.journal.hash"] == entries[2].hash
    assert attrs["sagacity.call.outcome"] == "EXECUTED"
    for key, value in attributes.items():
        assert attrs[key] == value  # the framework's own attributes are left as they were


def test_another_tools_span_is_a_parent_not_a_twin(otel: Otel, lookup: Callable[..., Any]) -> None:
    """A framework span for a different tool (or any other span) stays the parent of ours."""
    tracer = otel.tracer_provider.get_tracer("a-framework")

    def agent() -> None:
        with tracer.start_as_current_span("running tool", attributes={"gen_ai.tool.name": "planner"}):
            lookup("SKU-1")

    with Sagacity("memory://") as sg:
        sg.run("framework-2", agent)
    planner = otel.one("running tool")
    assert [s.name for s in otel.children(planner)] == ["execute_tool lookup"]
    assert "sagacity.saga.id" not in (planner.attributes or {})


def test_a_nested_call_of_the_same_tool_gets_its_own_span(otel: Otel) -> None:
    """Enriched once: a tool that calls itself inside the framework's span opens a span of its own."""
    tracer = otel.tracer_provider.get_tracer("a-framework")

    @tool
    def walk(depth: int) -> int:
        return depth if depth == 0 else walk(depth - 1)

    def agent() -> None:
        with tracer.start_as_current_span("running tool", attributes={"gen_ai.tool.name": "walk"}):
            walk(2)

    with Sagacity("memory://") as sg:
        sg.run("framework-3", agent)
    framework = otel.one("running tool")
    assert otel.tree(framework) == ["running tool", "  execute_tool walk", "    execute_tool walk"]
    assert (framework.attributes or {})["sagacity.journal.intent_seq"] == 2
    inner = otel.children(otel.children(framework)[0])[0]
    assert (inner.attributes or {})["sagacity.journal.intent_seq"] == 4


def test_a_call_id_from_an_adapter(otel: Otel, lookup: Callable[..., Any]) -> None:
    """A framework adapter that knows the model's call id, but opened no span, has it recorded."""

    def agent() -> None:
        token = tool_call_id.set("toolu_01A")
        try:
            lookup("SKU-1")
        finally:
            tool_call_id.reset(token)
        lookup("SKU-2")

    with Sagacity("memory://") as sg:
        sg.run("framework-4", agent)
    first, second = otel.named("execute_tool lookup")
    assert (first.attributes or {})["gen_ai.tool.call.id"] == "toolu_01A"
    assert "gen_ai.tool.call.id" not in (second.attributes or {})


def test_the_tools_own_spans_nest_under_its_call(otel: Otel) -> None:
    """Spans the tool makes itself (an HTTP client's) are children of its execute_tool span."""
    tracer = otel.tracer_provider.get_tracer("http-client")

    @tool
    def fetch(url: str) -> str:
        with tracer.start_as_current_span("GET"):
            return "200"

    with Sagacity("memory://") as sg:
        sg.run("framework-5", lambda: fetch("https://example.invalid/"))
    call = otel.one("execute_tool fetch")
    assert [s.name for s in otel.children(call)] == ["GET"]


def test_a_keyed_call_through_sagacity_framework_is_one_span_with_its_call_id(
    otel: Otel, lookup: Callable[..., Any]
) -> None:
    """``sagacity.framework.journaled_call`` (what the adapters use) makes one execute_tool span
    carrying the framework's call id; presenting the same id again runs nothing new."""
    from sagacity.framework import journaled_call

    def agent() -> None:
        for _ in range(2):  # the framework replays the same call: journaled and run once
            journaled_call(lookup.spec, '{"sku":"SKU-1"}', "call_9", lambda: lookup("SKU-1"))

    with Sagacity("memory://") as sg:
        sg.run("framework-5", agent)
        executed = [e for e in sg.entries("framework-5") if e.tool_name == "lookup" and e.phase == "EXECUTED"]
    assert len(executed) == 1
    span, replay = otel.named("execute_tool lookup")  # one span a presentation, neither nested
    assert span.parent is not None
    assert replay.parent is not None
    assert span.parent.span_id == replay.parent.span_id
    assert (span.attributes or {})["gen_ai.tool.call.id"] == "call_9"
    assert (span.attributes or {})["sagacity.call.outcome"] == "EXECUTED"
    assert (span.attributes or {})["sagacity.journal.seq"] == executed[0].seq
