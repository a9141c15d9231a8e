"""The policy file: strict parsing with line-numbered errors, and `sagacity policy check`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sagacity.cli import main
from sagacity.errors import PolicyError
from sagacity.guardrails import Action, Mode, Scope, parse_policy

GOOD = """\
[guardrails]
default = "allow"

[[rules]]
id = "refund-big"
tool = "refund"
amount = "amount"
over = "100.00"
action = "hold"
approvals = 2
ttl = "4h"

[[rules]]
id = "wires"
tool = ["send_wire"]
amount = "amount"
action = "deny"
mode = "shadow"
[rules.budget]
limit = "50000.00"
window = "24h"
per = "principal"
"""


def test_a_good_policy_parses_into_its_rules() -> None:
    """Every key lands where it belongs; amounts are Decimals, never floats."""
    policy = parse_policy(GOOD, source="p.toml")
    big, wires = policy.rules
    assert (big.id, big.action, big.approvals, str(big.over)) == ("refund-big", Action.HOLD, 2, "100.00")
    assert big.ttl is not None
    assert big.ttl.total_seconds() == 4 * 3600
    assert wires.mode is Mode.SHADOW
    assert wires.budget is not None
    assert (str(wires.budget.limit), wires.budget.per) == ("50000.00", Scope.PRINCIPAL)
    assert len(policy.sha256) == 64
    assert policy.rules_for("refund") == (big,)
    assert policy.rules_for("other") == ()


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ('[[rules]]\nid = "a"\ntool = "x"\nactoin = "deny"\n', 4, "unknown key 'actoin'"),
        (
            '[[rules]]\nid = "a"\naction = "deny"\n\n'
            '[[rules]]\nid = "b"\nwhen = "args.x >"\naction = "deny"\n',
            7,
            "not a valid CEL",
        ),
        ('[[rules]]\nid = "a"\nwhen = "nope == 1"\naction = "deny"\n', 3, "undeclared reference"),
        ('[[rules]]\nid = "a"\nwhen = "1 + 2"\naction = "deny"\n', 3, "not a condition"),
        ('[[rules]]\nid = "a"\namount = "amount"\nover = 100.5\naction = "hold"\n', 4, "never a float"),
        ('[[rules]]\nid = "a"\naction = "deny"\napprovals = 2\n', 4, "approvals is for a hold"),
        ('[[rules]]\nid = "a"\naction = "deny"\n[[rules]]\nid = "a"\naction = "hold"\n', 5, "already used"),
        ('[[rules]]\nid = "a"\n[rules.budget]\nlimit = "10"\n', 3, "needs window"),
        ('[[rules]]\nid = "a"\naction = "allow"\n[rules.requires]\ntool = "x"\n', 3, "allow decides nothing"),
        ('[[rules]]\nid = "a"\naction = "maybe"\n', 3, "must be one of"),
        ('[[rules]\nid = "a"\n', 1, ""),
    ],
)
def test_a_bad_policy_names_its_line(text: str, line: int, says: str) -> None:
    """Each mistake is a PolicyError naming the file and the line it is on."""
    with pytest.raises(PolicyError) as raised:
        parse_policy(text, source="p.toml")
    assert f"p.toml line {line}" in str(raised.value) or f"line {line}" in str(raised.value)
    assert says in str(raised.value)


def test_policy_check_cli(tmp_path: Path) -> None:
    """`sagacity policy check` says ok with the hash, or prints the line-numbered error and exits 2."""
    good = tmp_path / "good.toml"
    good.write_text(GOOD, encoding="utf-8")
    result = CliRunner().invoke(main, ["policy", "check", str(good)])
    assert result.exit_code == 0, result.output
    assert "ok, 2 rules" in result.output
    assert parse_policy(GOOD).sha256 in result.output
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace('per = "principal"', 'per = "planet"'), encoding="utf-8")
    result = CliRunner().invoke(main, ["policy", "check", str(bad)])
    assert result.exit_code == 2
    assert f"{bad} line 22: per must be one of" in result.output


def test_policy_check_also_checks_the_gateway_tables(tmp_path: Path) -> None:
    """One file for the MCP gateway and the rules: check reads it as both would."""
    path = tmp_path / "gateway.toml"
    path.write_text(GOOD + '\n[tools.refund]\nkind = "irreversibel"\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["policy", "check", str(path)])
    assert result.exit_code == 2
    assert "line 25" in result.output
    assert "kind must be one of" in result.output


def test_a_policy_text_is_compiled_once() -> None:
    """Reading the same policy text again (a touched file, a second Sagacity, the gateway's
    reload) compiles none of its CEL conditions again: compiling costs ~100 evaluations."""
    from sagacity.guardrails import parse_policy
    from sagacity.guardrails._cel import compiled

    text = (
        '[[rules]]\nid = "once"\ntool = "t"\nwhen = \'has(args.n) && args.n > 7 && tool == "t"\'\n'
        'action = "deny"\n'
    )
    first = parse_policy(text)
    assert first.bundle_for("t") is not None
    misses = compiled.cache_info().misses
    again = parse_policy(text)
    assert again.bundle_for("t") is not None
    assert compiled.cache_info().misses == misses
