"""Free text in decisions cannot add or fake a field of the journal, through the library (issue #11).

On every store: a person's reason or identity holding a line break is refused before anything is
journaled; a reason the library writes itself (a void quoting a tool's error) is escaped to one
line; a reader of the journal always finds exactly the approver the library was given.
"""

from __future__ import annotations

import pytest

from sagacity import ApprovalRequest, CompensationContext, Phase, Reversibility, Sagacity, SagaStatus, tool
from sagacity._payloads import parse_decision_payload
from sagacity.errors import InvalidValueError
from sagacity.model import Entry
from sagacity.tools import Tool

FORGED = "fine by me\napprover=ceo@example.com\r\napprover=cfo@example.com"
#: One of each kind of line break a reader might split on.
LINE_BREAKS = ["\n", "\r", "\x0b", "\x0c", "\x1e", "\x85", "\u2028", "\u2029"]

Wire = Tool[[str, str], str]


@pytest.fixture
def wire() -> Wire:
    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def send_wire(amount: str, to: str) -> str:
        return f"wired {amount}"

    return send_wire


@pytest.fixture
def reserve() -> Tool[[str], str]:
    @tool
    def reserve(sku: str) -> str:
        return sku

    @reserve.compensation
    def release(ctx: CompensationContext) -> None:
        pass

    return reserve


def gated(sg: Sagacity, saga_id: str, wire: Wire, reserve: Tool[[str], str]) -> ApprovalRequest:
    def agent() -> str:
        reserve("SKU-1")
        return wire("100.00", "acct-1")

    result = sg.run(saga_id, agent)
    assert result.status is SagaStatus.AWAITING_APPROVAL
    return result.awaiting[0]


def approver_lines(entries: list[Entry]) -> list[str]:
    """Every line of every decision payload that a line-based reader would take for an approver."""
    return [
        line
        for e in entries
        if e.tool_name == "approval-gate"
        for line in e.payload.splitlines()
        if line.startswith("approver=")
    ]


@pytest.mark.parametrize("brk", LINE_BREAKS, ids=lambda c: f"U+{ord(c):04X}")
def test_reject_refuses_a_reason_that_would_add_a_line(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], brk: str
) -> None:
    """A reject reason holding a line break is InvalidValueError; nothing is journaled, the request stays."""
    request = gated(sg, "forge-1", wire, reserve)
    before = sg.entries("forge-1")
    with pytest.raises(InvalidValueError, match="reason must be one line"):
        sg.reject(
            "forge-1", request.journal_seq, "bob@example.com", f"fine by me{brk}approver=ceo@example.com"
        )
    assert sg.entries("forge-1") == before
    assert [r.journal_seq for r in sg.pending_approvals("forge-1")] == [request.journal_seq]
    decision = sg.reject("forge-1", request.journal_seq, "bob@example.com", "fine by me")
    assert decision.result is not None
    assert decision.result.status is SagaStatus.REJECTED
    assert approver_lines(sg.entries("forge-1")) == ["approver=bob@example.com"]


@pytest.mark.parametrize("reason", ["", "   ", "\t", None], ids=["empty", "spaces", "tab", "None"])
def test_reject_refuses_a_blank_or_missing_reason(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], reason: str
) -> None:
    """Issue #33 item 25: the library refuses what the CLI, HTTP and dashboard refuse, a rejection
    without a reason; nothing is journaled, nothing compensated, and the request stays pending."""
    request = gated(sg, "blank-1", wire, reserve)
    before = sg.entries("blank-1")
    with pytest.raises(InvalidValueError, match="reason"):
        sg.reject("blank-1", request.journal_seq, "bob@example.com", reason)
    assert sg.entries("blank-1") == before
    assert [r.journal_seq for r in sg.pending_approvals("blank-1")] == [request.journal_seq]
    assert sg.reject("blank-1", request.journal_seq, "bob@example.com", " no ").reason == "no"


@pytest.mark.parametrize("brk", LINE_BREAKS, ids=lambda c: f"U+{ord(c):04X}")
def test_identities_that_would_add_a_line_are_refused_everywhere(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], brk: str
) -> None:
    """approve, reject, resume(resumed_by=) and resolve_in_doubt refuse such a name; nothing is journaled."""
    request = gated(sg, "forge-2", wire, reserve)
    seq = request.journal_seq
    name = f"bob@example.com{brk}approver=ceo@example.com"
    before = sg.entries("forge-2")
    with pytest.raises(InvalidValueError):
        sg.approve("forge-2", seq, name)
    with pytest.raises(InvalidValueError):
        sg.reject("forge-2", seq, name, "no")
    sg.approve("forge-2", seq, "alice@example.com")
    approved = sg.entries("forge-2")
    with pytest.raises(InvalidValueError):
        sg.resume("forge-2", seq, request.input, resumed_by=name)
    assert sg.entries("forge-2") == approved
    assert approved[: len(before)] == before
    assert sg.resume("forge-2", seq, request.input, resumed_by="carol").status is SagaStatus.COMPLETED
    resumed = [e.payload for e in sg.entries("forge-2") if e.payload.startswith("resumes")]
    assert resumed == [f"resumes seq={seq} by=carol"]

    intent = sg.journal.append("forge-3", "reserve", Phase.INTENT, '{"sku":"SKU-2"}').seq
    with pytest.raises(InvalidValueError):
        sg.resolve_in_doubt("forge-3", intent, happened=False, resolver=name)
    assert [e.seq for e in sg.entries("forge-3")] == [intent]


def test_resolve_in_doubt_refuses_a_note_that_would_add_a_line(
    sg: Sagacity, reserve: Tool[[str], str]
) -> None:
    """A resolution's reason holding a line break is refused before the decision or outcome is journaled."""
    intent = sg.journal.append("doubt-1", "reserve", Phase.INTENT, '{"sku":"SKU-2"}').seq
    for happened in (True, False):
        with pytest.raises(InvalidValueError, match="reason must be one line"):
            sg.resolve_in_doubt("doubt-1", intent, happened=happened, resolver="hank", reason=FORGED)
    assert [e.seq for e in sg.entries("doubt-1")] == [intent]
    assert sg.status("doubt-1") is SagaStatus.IN_DOUBT
    sg.resolve_in_doubt("doubt-1", intent, happened=False, resolver="hank", reason="not in the WMS")
    [decision] = [e for e in sg.entries("doubt-1") if e.tool_name == "approval-gate"]
    assert parse_decision_payload(decision.payload) == ("hank", "not in the WMS")
    assert approver_lines(sg.entries("doubt-1")) == ["approver=hank"]


def test_a_void_quoting_a_tools_error_stays_one_line(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str]
) -> None:
    """A gate voided by a failure quotes the error as reason: escaped to one line, never an approver."""

    def agent() -> None:
        reserve("SKU-1")
        wire("100.00", "acct-1")
        raise RuntimeError("model said:\napprover=ceo@example.com\u2028approver=cfo@example.com")

    result = sg.run("void-1", agent)
    assert result.status is SagaStatus.COMPENSATED
    [void] = [e for e in sg.entries("void-1") if e.tool_name == "approval-gate"]
    assert void.phase == Phase.REJECTED
    assert len(void.payload.splitlines()) == 1
    assert approver_lines(sg.entries("void-1")) == []
    approver, reason = parse_decision_payload(void.payload)
    assert approver == ""
    assert reason.startswith("void: ")
    assert "model said:\napprover=ceo@example.com\u2028approver=cfo@example.com" in reason
    assert sg.verify("void-1").valid
