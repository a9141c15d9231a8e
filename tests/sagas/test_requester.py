"""Who asked: every gate journals its requester (the saga's principal), and with four eyes the
requester may not approve their own request (``requester_may_not_approve``)."""

from __future__ import annotations

from typing import Any

import pytest

from sagacity import Reversibility, Sagacity, SagaStatus, acting_as, tool
from sagacity.errors import ApprovalRefusedError, InvalidValueError


def _payout_tools() -> tuple[Any, Any]:
    @tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2)
    def payout(amount: str) -> str:
        return f"paid {amount}"

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def wire(amount: str) -> str:
        return f"wired {amount}"

    return payout, wire


def test_a_gate_names_its_requester_and_its_rule(sg: Sagacity) -> None:
    """The principal a saga acts for is journaled on its gate, with the separation rule; the
    read model and the pending request show both."""
    payout, wire = _payout_tools()
    with acting_as("agent-7 for alice@example.com"):
        result = sg.run("req-1", lambda: (payout("900.00"), wire("5.00")))
    assert result.status is SagaStatus.AWAITING_APPROVAL
    gates = [e for e in sg.entries("req-1") if e.phase == "AWAITING_APPROVAL"]
    assert [g.payload.split("\n")[:-1] for g in gates] == [
        ["requester=agent-7 for alice@example.com", "requester_may_not_approve=true", "approvals=2"],
        ["requester=agent-7 for alice@example.com"],
    ]
    assert [g.payload.split("\n")[-1] for g in gates] == [
        f"definition={payout.spec.definition_hash}",
        f"definition={wire.spec.definition_hash}",
    ]
    pending = {p.request.tool_name: p for p in sg.approvals("req-1")}
    assert pending["payout"].requester == "agent-7 for alice@example.com"
    assert pending["payout"].requester_may_not_approve is True
    assert pending["wire"].requester_may_not_approve is False


def test_the_sagacity_principal_is_the_default_and_acting_as_wins(store_url: str) -> None:
    payout, _ = _payout_tools()
    with Sagacity(store_url, principal="ops-bot") as sg:
        sg.run("default", lambda: payout("1.00"))
        with acting_as("alice@example.com"):
            sg.run("acting", lambda: payout("1.00"))
        assert [p.requester for p in sg.approvals("default")] == ["ops-bot"]
        assert [p.requester for p in sg.approvals("acting")] == ["alice@example.com"]


def test_without_a_principal_the_requester_is_unknown(sg: Sagacity) -> None:
    """No principal set: no requester line, the rule still journaled; anyone may approve."""
    payout, _ = _payout_tools()
    sg.run("anon", lambda: payout("1.00"))
    [gate] = [e for e in sg.entries("anon") if e.phase == "AWAITING_APPROVAL"]
    assert gate.payload.split("\n")[0] == "requester_may_not_approve=true"
    assert not any(line.startswith("requester=") for line in gate.payload.split("\n"))
    [pending] = sg.approvals("anon")
    assert pending.requester is None
    sg.approve("anon", gate.seq, "alice@example.com")


def test_one_human_both_principal_and_approver_cannot_approve_her_own_request(sg: Sagacity) -> None:
    """Alice runs the agent on her own behalf and is also an approver: her approval of its
    four-eyes payout is refused and not journaled; two other people approve and it runs."""
    payout, _ = _payout_tools()
    with acting_as("alice@example.com"):
        result = sg.run("self", lambda: payout("50000.00"))
    seq = result.awaiting[0].journal_seq
    before = len(sg.entries("self"))
    with pytest.raises(ApprovalRefusedError, match="requester_may_not_approve"):
        sg.approve("self", seq, "alice@example.com")
    with pytest.raises(ApprovalRefusedError, match="requester"):
        sg.approve("self", seq, "  alice@example.com ")  # the same identity, however typed
    assert len(sg.entries("self")) == before  # nothing journaled
    sg.approve("self", seq, "bob@example.com")
    sg.approve("self", seq, "carol@example.com")
    done = sg.resume("self", seq, '{"amount":"50000.00"}')
    assert done.status is SagaStatus.COMPLETED
    assert done.value == "paid 50000.00"


def test_with_one_approver_the_requester_may_approve_unless_the_tool_says_not(sg: Sagacity) -> None:
    """The rule is off by default for a single approval, and on when the tool asks for it."""

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def refund(amount: str) -> str:
        return f"refunded {amount}"

    @tool(reversibility=Reversibility.IRREVERSIBLE, requester_may_not_approve=True)
    def delete_account(user: str) -> str:
        return f"deleted {user}"

    with acting_as("alice@example.com"):
        sg.run("one", lambda: refund("3.00"))
        sg.run("strict", lambda: delete_account("u-1"))
    sg.approve("one", 2, "alice@example.com")  # each gate is seq 2, after the saga's START
    with pytest.raises(ApprovalRefusedError, match="requester_may_not_approve"):
        sg.approve("strict", 2, "alice@example.com")
    sg.approve("strict", 2, "bob@example.com")


def test_four_eyes_may_let_the_requester_approve_when_the_tool_says_so(sg: Sagacity) -> None:
    @tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2, requester_may_not_approve=False)
    def transfer(amount: str) -> str:
        return "sent"

    with acting_as("alice@example.com"):
        sg.run("lenient", lambda: transfer("1.00"))
    sg.approve("lenient", 2, "alice@example.com")  # the gate is seq 2, after the saga's START
    sg.approve("lenient", 2, "bob@example.com")
    assert sg.resume("lenient", 2, '{"amount":"1.00"}').status is SagaStatus.COMPLETED


@pytest.mark.parametrize("bad", ["", "   ", "alice\napprover=ceo", "x\u2028y"])
def test_a_principal_must_be_one_line(bad: str, store_url: str) -> None:
    """A principal is journaled as a payload line: a blank or multi-line name is refused."""
    with pytest.raises(InvalidValueError), acting_as(bad):
        pass
    with pytest.raises(InvalidValueError):
        Sagacity(store_url, principal=bad)


def test_the_journal_docs_example_runs() -> None:
    """docs/journal.md's Python blocks (the "Who asked" example) run as written."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "journal.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/journal.md", "exec"), {"__name__": "journal_docs"})
