"""The policy file's approver scopes: ``[groups]``, ``[approvers]`` and a hold rule's ``approvers``,
read strictly (a typo is a PolicyError naming the line) and resolved rule first, then tool."""

from __future__ import annotations

import pytest

from sagacity.errors import PolicyError
from sagacity.guardrails import parse_policy

SCOPED = """
[groups]
finance = ["carol@example.com", "dave@example.com"]

[approvers]
refund = ["group:finance"]

[[rules]]
id = "big-refund"
tool = "refund"
amount = "amount"
over = "1000.00"
action = "hold"
approvers = ["erin@example.com", "group:finance"]
"""


def test_a_hold_rules_approvers_come_before_the_tools() -> None:
    """A gate held by a rule with approvers takes the rule's; another gate of the tool takes
    ``[approvers]``; a tool named nowhere has no scope. Groups expand to their members."""
    policy = parse_policy(SCOPED)
    assert policy.approvers_for("refund", "big-refund") == ("erin@example.com", "group:finance")
    assert policy.approvers_for("refund", None) == ("group:finance",)
    assert policy.approvers_for("refund", "a-rule-gone-since") == ("group:finance",)
    assert policy.approvers_for("send_wire", None) is None
    assert policy.members(("erin@example.com", "group:finance")) == {
        "erin@example.com",
        "carol@example.com",
        "dave@example.com",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[approvers]\nrefund = ["group:ops"]\n', "names no group of \\[groups\\]"),
        ("[approvers]\nrefund = []\n", "non-empty array"),
        ('approvers = "x"\n', "must be a table"),
        ('[groups]\nfinance = "carol"\n', "array of identities"),
        ('[groups]\nfinance = [" carol"]\n', "identity on one line"),
        (
            '[[rules]]\nid = "r"\ntool = "refund"\naction = "allow"\napprovers = ["carol"]\n',
            "approvers is for a hold",
        ),
    ],
)
def test_a_bad_scope_is_refused_naming_the_line(text: str, message: str) -> None:
    """Each malformed scope is a PolicyError that says what is wrong, with the file's line."""
    with pytest.raises(PolicyError, match=message) as refused:
        parse_policy(text, source="payments.toml")
    assert "payments.toml line" in str(refused.value)
