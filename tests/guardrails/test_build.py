"""Rules built in Python: the same policy as the file, checked by the same parser, journaled as TOML."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from sagacity import Phase, Reversibility, Sagacity, SagaStatus, acting_as, tool
from sagacity.errors import PolicyError
from sagacity.guardrails import (
    POLICY_SAGA,
    Action,
    allow,
    budget,
    build_policy,
    decide,
    deny,
    failures,
    hold,
    parse_policy,
    parse_verdict,
    requires,
)

FILE = """\
[guardrails]
default = "hold"

[[rules]]
id = "refund-unattended"
tool = "refund"
action = "allow"

[[rules]]
id = "refund-one-approver"
tool = "refund"
amount = "amount"
over = "100.00"
action = "hold"
reason = "a refund above 100.00 EUR needs one approver"
ttl = "4h"

[[rules]]
id = "refund-two-approvers"
tool = "refund"
amount = "order.total"
over = "10000.00"
action = "hold"
approvals = 2

[[rules]]
id = "fraud-check-first"
tool = "refund"
reason = "check_fraud must have passed"
[rules.requires]
tool = "check_fraud"
result = 'result.passed == true'

[[rules]]
id = "wire-budget"
tool = "send_wire"
amount = "amount"
reason = "the daily wire budget is spent"
[rules.budget]
limit = "50000.00"
window = "24h"

[[rules]]
id = "wire-breaker"
tool = "send_wire"
action = "hold"
[rules.failures]
max_in_row = 3
per = "agent"

[[rules]]
id = "no-interns"
tool = ["refund", "send_wire"]
when = 'principal.startsWith("intern")'
action = "deny"
reason = 'interns may not move "money"'

[[rules]]
id = "eur-only"
when = 'has(args.currency) && args.currency != "EUR"'
action = "deny"
mode = "shadow"
"""


def _python_policy() -> object:
    return build_policy(
        allow("refund-unattended", tool="refund"),
        hold(
            "refund-one-approver",
            tool="refund",
            amount="amount",
            over="100.00",
            reason="a refund above 100.00 EUR needs one approver",
            ttl=timedelta(hours=4),
        ),
        hold(
            "refund-two-approvers", tool="refund", amount="order.total", over=Decimal("10000.00"), approvals=2
        ),
        requires(
            "fraud-check-first",
            tool="refund",
            first="check_fraud",
            result="result.passed == true",
            reason="check_fraud must have passed",
        ),
        budget(
            "wire-budget",
            tool="send_wire",
            amount="amount",
            limit=Decimal("50000.00"),
            window="24h",
            reason="the daily wire budget is spent",
        ),
        failures("wire-breaker", tool="send_wire", max_in_row=3, per="agent", action="hold"),
        deny(
            "no-interns",
            tool=("send_wire", "refund"),
            when='principal.startsWith("intern")',
            reason='interns may not move "money"',
        ),
        deny("eur-only", when='has(args.currency) && args.currency != "EUR"', mode="shadow"),
        default="hold",
    )


CALLS = [
    ("refund", '{"amount":"80.00"}', "alice"),
    ("refund", '{"amount":"250.00"}', "alice"),
    ("refund", '{"amount":"250.00","order":{"total":"20000.00"}}', "alice"),
    ("refund", '{"amount":"5.00"}', "intern-bob"),
    ("refund", '{"amount":"5.00","currency":"USD"}', "alice"),
    ("send_wire", '{"amount":"10.00"}', "intern-bob"),
    ("send_wire", '{"amount":"10.00"}', "alice"),
    ("send_email", '{"to":"x@example.com"}', "alice"),
    ("refund", '{"amount":1e3}', "alice"),
]


def test_rules_built_in_python_decide_as_the_same_rules_in_the_file() -> None:
    """Every rule kind and option, built in Python, gives the file's decisions on every call, and
    the policy's text is TOML that parses back to the same policy."""
    from_file, built = parse_policy(FILE), _python_policy()
    assert isinstance(built, type(from_file))
    assert len(built.rules) == len(from_file.rules) == 8
    assert [r.id for r in built.rules] == [r.id for r in from_file.rules]
    for mine, theirs in zip(built.rules, from_file.rules, strict=True):
        assert (mine.action, mine.tools, mine.amount, mine.over, mine.approvals, mine.ttl) == (
            theirs.action,
            theirs.tools,
            theirs.amount,
            theirs.over,
            theirs.approvals,
            theirs.ttl,
        )
        assert (mine.reason, mine.mode, mine.budget, mine.failures) == (
            theirs.reason,
            theirs.mode,
            theirs.budget,
            theirs.failures,
        )
    for name, args, principal in CALLS:
        for irreversible in (False, True):
            assert decide(built, name, args, principal=principal, irreversible=irreversible) == decide(
                from_file, name, args, principal=principal, irreversible=irreversible
            ), (name, args, principal)
    again = parse_policy(built.text)
    assert again.sha256 == built.sha256
    assert [r.id for r in again.rules] == [r.id for r in built.rules]
    assert _python_policy().sha256 == built.sha256  # the same rules always render the same text


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: hold("h", amount="amount", over=1.5), r"rule 'h': over must be a decimal .* never a float"),
        (lambda: deny("a b"), r"rule id must be 1-64"),
        (lambda: budget("b", limit="100", window="0s"), r"rule 'b': window must be a positive duration"),
        (lambda: budget("b", limit="100", window="1h", action="allow"), r"allow decides nothing"),
        (lambda: deny("w", when="args."), r"rule 'w': when is not a valid CEL condition"),
        (lambda: deny("w", when="args.size + 1"), r"not a condition"),
        (lambda: allow("o", over="100.00"), r"no amount"),
        (lambda: requires("r", first="check", result="nonsense("), r"rule 'r': result is not a valid CEL"),
        (lambda: failures("f", max_in_row=0), r"max_in_row must be a whole number"),
        (lambda: budget("b", limit="100", window="1h", per="team"), r"per must be one of"),
        (lambda: build_policy(deny("same"), deny("same")), r"rule id 'same' is already used"),
        (lambda: build_policy(allow("a"), default="maybe"), r"default must be one of"),
    ],
)
def test_a_mistake_in_a_python_rule_is_a_policy_error_naming_it(make: object, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        make()  # type: ignore[operator]


def test_build_policy_takes_only_rules() -> None:
    with pytest.raises(TypeError, match="takes rules"):
        build_policy({"id": "x", "action": "deny"})  # type: ignore[arg-type]


def test_a_python_policy_guards_calls_and_is_journaled_as_its_toml(store_url: str) -> None:
    """Sagacity(policy=build_policy(...)) judges calls like a file would, and the sagacity:policy
    chain holds the rendered text, whose hash every verdict names."""

    @tool
    def check_fraud(order: str) -> dict[str, bool]:
        return {"passed": True}

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def refund(order: str, amount: str) -> str:
        return f"refunded {amount} on {order}"

    policy = build_policy(
        allow("refund-unattended", tool="refund"),
        hold("refund-large", tool="refund", amount="amount", over="100.00", reason="needs a human"),
        requires("fraud-first", tool="refund", first="check_fraud", result="result.passed == true"),
        deny("no-interns", tool="refund", when='principal.startsWith("intern")', reason="not interns"),
    )
    with Sagacity(store_url, policy=policy, switch_poll=0) as sg:
        with acting_as("alice"):
            done = sg.run(
                "py-1", lambda: [check_fraud("o-1"), refund("o-1", "80.00"), refund("o-1", "250.00")]
            )
        assert done.status is SagaStatus.AWAITING_APPROVAL
        assert done.value[1] == "refunded 80.00 on o-1"
        assert "rule refund-large: needs a human" in done.value[2]
        entries = sg.journal.store.read_entries("py-1")
        verdicts = [
            parse_verdict(e.payload) for e in entries if e.phase in (Phase.INTENT, Phase.AWAITING_APPROVAL)
        ]
        decided = [(v.decision.rule, v.decision.action) for v in verdicts if v is not None]
        assert ("refund-unattended", Action.ALLOW) in decided
        assert ("refund-large", Action.HOLD) in decided
        assert all(v.policy == policy.sha256 for v in verdicts if v is not None)
        journaled = sg.journal.store.read_entries(POLICY_SAGA)[-1]
        assert journaled.input == policy.text
        assert f"policy={policy.sha256}" in journaled.payload
        with acting_as("intern-bob"):
            denied = sg.run("py-2", lambda: [check_fraud("o-2"), refund("o-2", "5.00")])
        assert denied.value[1].startswith("[DENIED]")
        assert "not interns" in denied.value[1]
