"""Rules on history: windowed sums and counts on meters (Decimal), give-backs, resumes, and
'executed and not compensated earlier in this saga'."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from sagacity import Reversibility, Sagacity, SagaStatus, acting_as, tool
from sagacity.errors import SagacityError
from sagacity.guardrails import METER_PREFIX, parse_verdict
from sagacity.testing import tool_entries

Guarded = Callable[[str], Sagacity]

BUDGET = """\
[[rules]]
id = "wires-allowed"
tool = "send_wire"
action = "allow"

[[rules]]
id = "wire-budget"
tool = "send_wire"
amount = "amount"
action = "deny"
reason = "the daily wire budget of 1,000.00 EUR is spent"
[rules.budget]
limit = "1000.00"
window = "24h"

[[rules]]
id = "emails"
tool = "send_email"
action = "deny"
[rules.budget]
limit = 2
window = "1m"
per = "principal"
"""


def _meter_total(sg: Sagacity, meter: str) -> Decimal:
    entries = sg.entries(meter)
    line = next(x for x in entries[-1].payload.split("\n") if x.startswith("total="))
    return Decimal(line.removeprefix("total="))


def test_a_sum_budget_is_never_overspent_and_each_debit_is_journaled(guarded: Guarded) -> None:
    sg = guarded(BUDGET)

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def send_wire(amount: str, to: str) -> str:
        return f"sent {amount} to {to}"

    out: list[str] = []
    sg.run(
        "w1", lambda: out.extend([send_wire("600.00", "a"), send_wire("400.00", "b"), send_wire("0.01", "c")])
    )
    assert out[:2] == ["sent 600.00 to a", "sent 400.00 to b"]
    assert out[2].startswith("[DENIED]")
    assert "daily wire budget" in out[2]
    meter = f"{METER_PREFIX}wire-budget:global"
    assert [e.input.count("send_wire") for e in sg.entries(meter)] == [1, 1]  # two debits, no third
    assert _meter_total(sg, meter) == Decimal("1000.00")
    assert sg.verify(meter).valid
    debits = [parse_verdict(e.payload).debits for e in tool_entries(sg, "w1")[:4:2]]  # type: ignore[union-attr]
    assert [d[0].amount for d in debits] == [Decimal("600.00"), Decimal("400.00")]


def test_a_compensated_call_gives_its_amount_back(guarded: Guarded) -> None:
    sg = guarded(BUDGET.replace('tool = "send_wire"\naction = "allow"\n', 'tool = "x"\naction = "allow"\n'))

    @tool
    def send_wire(amount: str, to: str) -> str:
        return f"sent {amount}"

    @send_wire.compensation
    def recall(ctx: object) -> None:
        return None

    @tool
    def explode() -> None:
        raise RuntimeError("boom")

    result = sg.run("w2", lambda: (send_wire("700.00", "a"), explode()))
    assert result.status is SagaStatus.COMPENSATED
    meter = f"{METER_PREFIX}wire-budget:global"
    _debit, credit = sg.entries(meter)
    assert credit.payload.startswith("credit=700.00")
    assert '"credits":"1"' in credit.input
    assert _meter_total(sg, meter) == Decimal(0)
    out: list[str] = []
    sg.run("w3", lambda: out.append(send_wire("1000.00", "b")))
    assert out == ["sent 1000.00"]


def test_a_count_per_principal(guarded: Guarded) -> None:
    """At most 2 emails a minute per principal: the third is denied, another principal goes on."""
    sg = guarded(BUDGET)

    @tool
    def send_email(to: str) -> str:
        return f"mailed {to}"

    out: list[str] = []

    with acting_as("alice"):
        sg.run("m1", lambda: out.extend(send_email(t) for t in "abc"))
    with acting_as("bob"):
        sg.run("m2", lambda: out.append(send_email("d")))
    assert out[0:2] == ["mailed a", "mailed b"]
    assert out[2].startswith("[DENIED]")
    assert out[3] == "mailed d"
    assert len(sg.entries(f"{METER_PREFIX}emails:principal=alice")) == 2
    assert len(sg.entries(f"{METER_PREFIX}emails:principal=bob")) == 1


def test_a_held_call_is_judged_against_the_budget_again_when_it_runs(guarded: Guarded) -> None:
    """Approved while the budget had room, resumed after it was spent: REJECTED, compensated."""
    sg = guarded(
        BUDGET.replace('[[rules]]\nid = "wires-allowed"\ntool = "send_wire"\naction = "allow"\n', "")
    )

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def send_wire(amount: str, to: str) -> str:
        return f"sent {amount}"

    sg.run("h1", lambda: send_wire("900.00", "a"))
    sg.run("h2", lambda: send_wire("900.00", "b"))
    [first] = sg.pending_approvals("h1")
    [second] = sg.pending_approvals("h2")
    for request in (first, second):
        sg.approve(request.saga_id, request.journal_seq, "alice@example.com")
    assert sg.resume("h1", first.journal_seq, first.input).status is SagaStatus.COMPLETED
    refused = sg.resume("h2", second.journal_seq, second.input)
    assert refused.status is SagaStatus.REJECTED  # refused when it was to run: a rejection
    assert "the policy refused the approved call" in str(refused.error)
    rejected = [e for e in sg.entries("h2") if e.phase == "REJECTED"]
    assert rejected
    assert "wire-budget" in rejected[0].payload


def test_requires_an_uncompensated_earlier_call_whose_result_passed(guarded: Guarded) -> None:
    sg = guarded(
        """\
[[rules]]
id = "fraud-first"
tool = "refund"
reason = "check_fraud must pass first in this saga"
[rules.requires]
tool = "check_fraud"
result = 'result.passed == true'
"""
    )

    @tool
    def check_fraud(order: str) -> dict[str, object]:
        return {"passed": order != "bad"}

    @tool
    def refund(order: str) -> str:
        return f"refunded {order}"

    out: list[str] = []
    sg.run("r1", lambda: out.append(refund("o1")))
    sg.run("r2", lambda: (check_fraud("bad"), out.append(refund("bad"))))
    sg.run("r3", lambda: (check_fraud("good"), out.append(refund("good"))))
    assert out[0].startswith("[DENIED]")
    assert "check_fraud must pass first" in out[0]
    assert out[1].startswith("[DENIED]")
    assert out[2] == "refunded good"


def test_an_unreadable_meter_runs_nothing(sqlite_url: str, policy_file: Path) -> None:
    """Fail closed: with the journal's table gone from under a running process, the budgeted
    call does not run; the error says what could not be read."""
    policy_file.write_text(BUDGET, encoding="utf-8")
    sg = Sagacity(sqlite_url, policy=policy_file, switch_poll=0)
    sent: list[str] = []

    @tool
    def send_email(to: str) -> str:
        sent.append(to)
        return "mailed"

    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        conn.execute("ALTER TABLE side_effect_journal RENAME TO moved_away")
    with pytest.raises(SagacityError, match="side_effect_journal"):
        sg.run("d1", lambda: send_email("x"))
    assert sent == []
    sg.close()


def test_not_more_than_n_failures_in_a_row(guarded: Guarded) -> None:
    """A circuit breaker across sagas: after 2 failures in a row the tool is denied; a success
    (before the limit) resets the count; each change of the count is journaled."""
    sg = guarded(
        """\
[[rules]]
id = "flaky-breaker"
tool = "flaky"
reason = "flaky failed twice in a row: a human looks first"
[rules.failures]
max_in_row = 2
"""
    )
    fail = {"now": True}
    ran: list[int] = []

    @tool
    def flaky(n: int) -> str:
        ran.append(n)
        if fail["now"]:
            raise RuntimeError(f"down {n}")
        return f"ok {n}"

    assert sg.run("f1", flaky, 1).status is SagaStatus.COMPENSATED
    fail["now"] = False
    assert sg.run("f2", flaky, 2).value == "ok 2"  # resets the count
    fail["now"] = True
    sg.run("f3", flaky, 3)
    sg.run("f4", flaky, 4)
    denied = sg.run("f5", flaky, 5)
    assert ran == [1, 2, 3, 4]  # the fifth never ran
    assert str(denied.value).startswith("[DENIED]")
    assert "failed twice in a row" in str(denied.value)
    counts = [e.payload for e in sg.entries("sagacity:streak:flaky-breaker:global")]
    assert counts == ["streak=1", "streak=0", "streak=1", "streak=2"]
