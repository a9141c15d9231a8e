"""What a program, a person and an auditor are told: a denied call as a value the program can
test, errors in the words of the file, verdict lines in the documented format, and a resume the
kill switch refuses journaled like any call it refuses."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sagacity import Reversibility, Sagacity, SagaStatus, acting_as, tool
from sagacity.errors import HaltedError
from sagacity.guardrails import Denied, parse_policy

Guarded = Callable[[str], Sagacity]
DOC = Path(__file__).parent.parent.parent / "docs" / "policies.md"
MONEY = """\
[[rules]]
id = "no-interns"
tool = "refund"
when = 'principal.startsWith("intern")'
action = "deny"
reason = "interns may not move money"

[[rules]]
id = "big-watch"
tool = "refund"
amount = "amount"
over = "500.00"
action = "hold"
approvals = 2
mode = "shadow"
reason = "would need two approvers"
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagacity.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_denied_call_is_a_value_the_program_can_test(guarded: Guarded) -> None:
    sg = guarded(MONEY)

    @tool
    def refund(order: str, amount: str) -> str:
        return f"refunded {amount}"

    with acting_as("intern-bob"):
        denied = sg.run("d1", lambda: refund("o-1", "20.00")).value
    assert isinstance(denied, Denied)
    assert (denied.tool, denied.rule, denied.reason) == ("refund", "no-interns", "interns may not move money")
    assert denied.policy == parse_policy(MONEY).sha256
    assert denied.startswith("[DENIED] refund did not run")  # what the model reads, unchanged
    with acting_as("alice"):
        ran = sg.run("d2", lambda: refund("o-1", "20.00")).value
    assert ran == "refunded 20.00"
    assert not isinstance(ran, Denied)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[[rules]]\nid = "a"\naction = allow\n', "line 3: Invalid value (column 10)"),
        (
            '[[rules]]\nid = "a"\naction = "permit"\n',
            "line 3: action must be one of 'allow', 'hold', 'deny', not 'permit'",
        ),
        (
            '[guardrails]\ndefault = "maybe"\n',
            "line 2: default must be one of 'allow', 'hold', 'deny', not 'maybe'",
        ),
        (
            '[[rules]]\nid = "a"\naction = "deny"\nmode = "loud"\n',
            "line 4: mode must be one of 'enforce', 'shadow', not 'loud'",
        ),
        ('[[rules]]\nid = "a"\nreason = "unterminated\n', "line 3: Illegal character"),
    ],
)
def test_policy_check_says_file_line_n_in_the_files_words(tmp_path: Path, text: str, says: str) -> None:
    """The documented `FILE line N: ...` for syntax errors too, and choices spelled as in the
    file (never `<Action.ALLOW: 'allow'>`), from the command a person runs."""
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    checked = _cli("policy", "check", str(path))
    assert checked.returncode == 2
    assert f"Error: {path} {says}" in checked.stderr
    assert "<" not in checked.stderr


def _pattern(template: str) -> str:
    """``<a|b>`` one of the words, ``<one line>`` any text, ``<...>`` a value, ``[...]`` optional."""
    out = ""
    for part in re.findall(r"\[[^\]]*\]|<[^>]*>|[^<\[]+", template):
        if part.startswith("["):
            out += f"(?:{_pattern(part[1:-1])})?"
        elif part.startswith("<"):
            out += f"(?:{part[1:-1]})" if "|" in part else (".+" if part == "<one line>" else r"\S+")
        else:
            out += re.escape(part)
    return out


def _documented_lines() -> list[re.Pattern[str]]:
    """The verdict lines as policies.md shows them, as patterns."""
    block = re.search(r"```text\n(policy=.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert block is not None
    templates = [re.split(r"\s{2,}\(", line)[0].strip() for line in block.group(1).splitlines()]
    return [re.compile(_pattern(t) + "$") for t in templates]


def test_every_verdict_line_is_in_the_documented_format(guarded: Guarded) -> None:
    """A shadow hold's line (with its approvals) is one the page documents, like every other."""
    sg = guarded(MONEY)

    @tool
    def refund(order: str, amount: str) -> str:
        return f"refunded {amount}"

    with acting_as("alice"):
        sg.run("s1", lambda: refund("o-1", "900.00"))
    [intent] = [e for e in sg.entries("s1") if e.tool_name == "refund" and e.phase == "INTENT"]
    lines = intent.payload.split("\n")
    assert "shadow=hold rule=big-watch approvals=2 reason=would need two approvers" in lines
    documented = _documented_lines()
    for line in lines:
        assert any(p.match(line) for p in documented), f"{line!r} is not in the documented format"


def test_a_resume_the_kill_switch_refuses_is_journaled(durable_url: str, tmp_path: Path) -> None:
    """The switch is set and lifted by another process (the CLI); the refused resume is journaled
    as the switch's denial of that call, naming the gate and who asked; the gate stays open."""
    policy = tmp_path / "policy.toml"
    policy.write_text("# the kill switch alone\n", encoding="utf-8")
    sg = Sagacity(durable_url, policy=policy, switch_poll=0)

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def wire(amount: str) -> str:
        return f"wired {amount}"

    sg.run("k1", lambda: wire("5.00"))
    [request] = sg.pending_approvals("k1")
    sg.approve("k1", request.journal_seq, "alice@example.com")
    halted = _cli("switch", "halt", "--reason", "incident 7", "--as", "ops", "--db", durable_url)
    assert halted.returncode == 0, halted.stderr
    before = len(sg.entries("k1"))
    with pytest.raises(HaltedError, match=r"resume refused: .*incident 7"):
        sg.resume("k1", request.journal_seq, request.input, resumed_by="carol")
    intent, failed = sg.entries("k1")[before:]
    assert intent.payload.split("\n")[:3] == [
        f"refused resume seq={request.journal_seq} by=carol",
        f"policy={parse_policy(policy.read_text(encoding='utf-8')).sha256}",
        "verdict=deny rule=switch reason=the kill switch is set to halt for every agent by ops: incident 7",
    ]
    assert (intent.phase, intent.input) == ("INTENT", request.input)
    assert (failed.phase, failed.payload.split(": ")[0]) == ("FAILED", "denied by policy")
    assert sg.pending_approvals("k1") == [request]
    assert sg.status("k1") is SagaStatus.AWAITING_APPROVAL  # nothing compensated, nothing ended
    assert _cli("switch", "lift", "--as", "ops", "--db", durable_url).returncode == 0
    resumed = sg.resume("k1", request.journal_seq, request.input)
    assert (resumed.status, resumed.value) == (SagaStatus.COMPLETED, "wired 5.00")
    assert sg.verify("k1").valid
    sg.close()
