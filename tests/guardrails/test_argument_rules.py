"""Rules on a call's arguments and principal: allow, hold for N approvers, deny; modes; verdicts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sagacity import Phase, Reversibility, Sagacity, SagaStatus, acting_as, tool
from sagacity.errors import ApprovalRefusedError
from sagacity.guardrails import POLICY_SAGA, Action, as_agent, parse_policy, parse_verdict
from sagacity.testing import tool_entries

PAYMENTS = """\
[[rules]]
id = "refund-small"
tool = "refund"
amount = "amount"
action = "allow"

[[rules]]
id = "refund-one-approver"
tool = "refund"
amount = "amount"
over = "100.00"
action = "hold"
reason = "a refund above 100.00 EUR needs one approver"
ttl = "2h"

[[rules]]
id = "refund-two-approvers"
tool = "refund"
amount = "amount"
over = "10000.00"
action = "hold"
approvals = 2
reason = "a refund above 10,000.00 EUR needs two approvers"

[[rules]]
id = "no-interns"
tool = "refund"
when = 'principal.startsWith("intern")'
action = "deny"
reason = "interns may not move money"

[[rules]]
id = "eur-only"
tool = "refund"
when = 'has(args.currency) && args.currency != "EUR"'
action = "deny"
mode = "shadow"
reason = "refunds are in EUR"
"""

Guarded = Callable[[str], Sagacity]


def _tools() -> tuple[object, object]:
    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def refund(amount: str, currency: str = "EUR") -> str:
        return f"refunded {amount} {currency}"

    @tool
    def lookup(order: str) -> str:
        return f"order {order}"

    return refund, lookup


def _verdicts(sg: Sagacity, saga_id: str) -> list[tuple[str, str, str]]:
    out = []
    for entry in sg.entries(saga_id):
        verdict = parse_verdict(entry.payload)
        if verdict is not None:
            out.append((entry.phase, verdict.decision.action.value, verdict.decision.rule))
    return out


def test_small_refunds_run_unattended_larger_ones_wait_for_approvers(guarded: Guarded) -> None:
    """The payments team's tiers: <= 100 runs (irreversible, explicitly allowed), > 100 one
    approver, > 10,000 two; each verdict in the entry the call journals anyway."""
    sg = guarded(PAYMENTS)
    refund, _ = _tools()
    answers: list[str] = []
    result = sg.run("s1", lambda: answers.extend([refund("80.00"), refund("250.00"), refund("20000")]))  # type: ignore[operator]
    assert answers[0] == "refunded 80.00 EUR"
    assert answers[1].startswith("[AWAITING_APPROVAL] refund did not run: the policy holds it")
    assert "refund-one-approver" in answers[1]
    assert result.status is SagaStatus.AWAITING_APPROVAL
    assert _verdicts(sg, "s1") == [
        (Phase.INTENT, "allow", "refund-small"),
        (Phase.AWAITING_APPROVAL, "hold", "refund-one-approver"),
        (Phase.AWAITING_APPROVAL, "hold", "refund-two-approvers"),
    ]
    policy_hash = parse_policy(PAYMENTS).sha256
    assert all(
        parse_verdict(e.payload).policy == policy_hash for e in sg.entries("s1") if "verdict=" in e.payload
    )  # type: ignore[union-attr]
    one, two = sorted(sg.pending_approvals("s1"), key=lambda r: r.journal_seq)
    assert one.expires_at is not None
    assert (one.expires_at - one.created_at).total_seconds() == 7200
    # Two approvers are needed for the large one: one approval does not let it resume.
    sg.approve("s1", two.journal_seq, "alice@example.com")
    with pytest.raises(ApprovalRefusedError, match="1 of 2 approvals"):
        sg.resume("s1", two.journal_seq, two.input)
    sg.approve("s1", two.journal_seq, "bob@example.com")
    with pytest.raises(ApprovalRefusedError, match="already approved"):
        sg.approve("s1", two.journal_seq, "carol@example.com")
    assert sg.resume("s1", two.journal_seq, two.input).status in (
        SagaStatus.COMPLETED,
        SagaStatus.AWAITING_APPROVAL,
    )
    resumed = [e for e in sg.entries("s1") if e.payload.startswith(f"resumes seq={two.journal_seq}")]
    assert len(resumed) == 1
    assert parse_verdict(resumed[0].payload) is not None


def test_a_denied_call_never_runs_and_the_model_is_told(guarded: Guarded) -> None:
    """Deny: the model gets the reason, the saga goes on; INTENT (verdict) + FAILED 'denied by
    policy' are journaled in one commit and the saga is not failed by it."""
    sg = guarded(PAYMENTS)
    refund, lookup = _tools()
    ran: list[str] = []

    def work() -> str:
        with as_agent("refund-bot"):
            ran.append(refund("5.00"))  # type: ignore[operator]
        return str(lookup("o-1"))  # type: ignore[operator]

    with acting_as("intern-7"):  # the saga's principal, journaled on its gates and verdicts
        result = sg.run("s2", work)
    assert result.status is SagaStatus.COMPLETED
    assert result.value == "order o-1"
    assert ran[0].startswith("[DENIED] refund did not run")
    assert "interns may not move money" in ran[0]
    intent, failed = tool_entries(sg, "s2")[:2]
    assert (intent.phase, failed.phase) == (Phase.INTENT, Phase.FAILED)
    assert failed.payload == "denied by policy: interns may not move money"
    verdict = parse_verdict(intent.payload)
    assert verdict is not None
    assert verdict.decision.rule == "no-interns"
    assert (verdict.principal, verdict.agent) == ("intern-7", "refund-bot")
    assert sg.verify("s2").valid


def test_shadow_rules_are_journaled_but_never_block(guarded: Guarded) -> None:
    """A shadow rule that would deny is journaled as shadow=deny; the call runs as in force."""
    sg = guarded(PAYMENTS)
    refund, _ = _tools()
    out: list[str] = []
    sg.run("s3", lambda: out.append(refund("10.00", "USD")))  # type: ignore[operator]
    assert out == ["refunded 10.00 USD"]
    verdict = parse_verdict(tool_entries(sg, "s3")[0].payload)
    assert verdict is not None
    assert verdict.decision.action is Action.ALLOW
    assert [(f.rule, f.action) for f in verdict.shadow] == [("eur-only", Action.DENY)]


def test_a_rule_that_errs_denies(guarded: Guarded) -> None:
    """Fail closed: an amount that is not a decimal makes its rule deny, saying why."""
    sg = guarded(PAYMENTS)
    refund, _ = _tools()
    out: list[str] = []
    sg.run("s4", lambda: out.append(refund("a lot")))  # type: ignore[operator]
    assert out[0].startswith("[DENIED]")
    assert "could not be evaluated" in out[0]
    assert "fail closed" in out[0]


def test_without_an_explicit_allow_an_irreversible_tool_still_waits(guarded: Guarded) -> None:
    """The default lets compensatable calls run; an irreversible one needs a rule that allows it."""
    sg = guarded('[[rules]]\nid = "x"\ntool = "other"\naction = "deny"\n')
    refund, lookup = _tools()
    out: list[str] = []
    sg.run("s5", lambda: out.extend([lookup("o"), refund("1.00")]))  # type: ignore[operator]
    assert out[0] == "order o"
    assert out[1].startswith("[AWAITING_APPROVAL] refund did not run: it is irreversible")


def test_the_policy_is_journaled_once_and_a_change_is_picked_up(guarded: Guarded, policy_file: Path) -> None:
    """The policy text and hash are journaled before any verdict names them; a change of the file
    is picked up (journaled with its new hash); a broken file denies every call and is journaled."""
    sg = guarded(PAYMENTS)
    _, lookup = _tools()
    sg.run("s6", lambda: lookup("a"))  # type: ignore[operator]
    [loaded] = sg.entries(POLICY_SAGA)
    assert loaded.input == PAYMENTS
    assert f"policy={parse_policy(PAYMENTS).sha256}" in loaded.payload
    again = Sagacity(sg.url, policy=policy_file, switch_poll=0)  # a second process, same text
    again.close()
    assert len(sg.entries(POLICY_SAGA)) == 1
    stricter = PAYMENTS + '\n[[rules]]\nid = "no-lookups"\ntool = "lookup"\naction = "deny"\n'
    policy_file.write_text(stricter, encoding="utf-8")
    out: list[str] = []
    sg.run("s7", lambda: out.append(lookup("b")))  # type: ignore[operator]
    assert out[0].startswith("[DENIED]")
    assert "no-lookups" in out[0]
    assert sg.entries(POLICY_SAGA)[-1].input == stricter
    policy_file.write_text(stricter + "\n[[rules]\n", encoding="utf-8")
    sg.run("s8", lambda: out.append(lookup("c")))  # type: ignore[operator]
    assert out[1].startswith("[DENIED]")
    assert "rule policy-error" in out[1]
    assert "line" in out[1]
    assert sg.entries(POLICY_SAGA)[-1].payload.startswith("refused=")
    policy_file.write_text(PAYMENTS, encoding="utf-8")
    assert sg.run("s9", lambda: lookup("d")).value == "order d"  # type: ignore[operator]


def test_a_condition_that_errs_denies_and_the_others_still_count(guarded: Guarded) -> None:
    """Fail closed per rule: a CEL condition that errs on this call (a missing key) denies, naming
    the rule; the other conditions of the same tool are still evaluated (a shadow one journals)."""
    sg = guarded(
        """\
[[rules]]
id = "watch"
tool = "lookup"
when = 'args.order == "o-1"'
action = "deny"
mode = "shadow"

[[rules]]
id = "sized"
tool = "lookup"
when = "args.size > 100"
action = "hold"
"""
    )
    _, lookup = _tools()
    out: list[str] = []
    sg.run("e1", lambda: out.append(lookup("o-1")))  # type: ignore[operator]
    assert out[0].startswith("[DENIED]")
    assert "rule sized could not be evaluated" in out[0]
    verdict = parse_verdict(tool_entries(sg, "e1")[0].payload)
    assert verdict is not None
    assert [f.rule for f in verdict.shadow] == ["watch"]
