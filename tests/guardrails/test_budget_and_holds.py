"""A budget is judged with the other rules at a call's first decision (a call already over a deny
budget is denied, not held for a human to approve in vain), and a resume the budget refuses
journals the verdict that refused it. The other spender is a real process on every store."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from sagacity import Sagacity, SagaStatus, acting_as, tool
from sagacity._payloads import parse_decision_payload
from sagacity.guardrails import METER_PREFIX, load_policy, parse_verdict
from sagacity.testing import tool_entries

WORKER = Path(__file__).with_name("budget_worker.py")
POLICY = """\
[[rules]]
id = "big-wires"
tool = "send_wire"
amount = "amount"
over = "1000.00"
action = "hold"
reason = "a wire above 1,000.00 needs an approver"

[[rules]]
id = "wire-budget"
tool = "send_wire"
amount = "amount"
action = "deny"
reason = "the wire budget of 2,000.00 is spent"
[rules.budget]
limit = "2000.00"
window = "24h"
per = "principal"
"""
METER = f"{METER_PREFIX}wire-budget:principal=team-0"


def _spend_900_elsewhere(url: str, policy: Path, tmp_path: Path) -> None:
    """Another process wires 900.00 as ``team-0`` (budget_worker.py, one trial)."""
    sync = tmp_path / "sync"
    sync.mkdir()
    (sync / "go-0").touch()
    subprocess.run(
        [sys.executable, str(WORKER), url, str(policy), str(sync), "a", "1", "900.00"],
        check=True,
        timeout=120,
    )
    assert (sync / "done-0-a").read_text(encoding="utf-8") == "sent 900.00 to a"


def _open(url: str, tmp_path: Path) -> tuple[Sagacity, Path, list[str], Callable[[str], str]]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    undone: list[str] = []

    @tool
    def send_wire(amount: str, to: str = "x") -> str:
        return f"sent {amount} to {to}"

    @send_wire.compensation
    def recall(ctx: object) -> None:
        undone.append("recalled")

    return Sagacity(url, policy=policy, switch_poll=0), policy, undone, send_wire


def test_a_call_already_over_a_deny_budget_is_denied_not_held(durable_url: str, tmp_path: Path) -> None:
    sg, policy, undone, send_wire = _open(durable_url, tmp_path)
    _spend_900_elsewhere(durable_url, policy, tmp_path)
    explained = subprocess.run(
        [
            *(sys.executable, "-m", "sagacity.cli", "policy", "explain", str(policy)),
            *("--db", durable_url, "--tool", "send_wire", "--principal", "team-0"),
            *("--args", '{"amount": "1500.00", "to": "b"}'),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.startswith("send_wire would be denied, decided by rule wire-budget: ")

    out: list[str] = []
    with acting_as("team-0"):
        result = sg.run("pay", lambda: out.extend(send_wire(a) for a in ("500.00", "1500.00")))
    assert out[0] == "sent 500.00 to x"
    assert out[1].startswith("[DENIED] send_wire did not run")
    assert "the wire budget of 2,000.00 is spent" in out[1]
    assert result.status is SagaStatus.COMPLETED  # nothing held, nothing undone
    assert sg.pending_approvals("pay") == []
    assert undone == []
    denied = parse_verdict(tool_entries(sg, "pay")[2].payload)
    assert denied is not None
    assert (denied.decision.rule, denied.policy) == ("wire-budget", load_policy(policy).sha256)

    with acting_as("team-1"):  # a budget with room: the hold rule decides, and nothing is debited yet
        held = sg.run("other", lambda: send_wire("1500.00"))
    assert held.status is SagaStatus.AWAITING_APPROVAL
    assert sg.entries(f"{METER_PREFIX}wire-budget:principal=team-1") == []
    sg.close()


def test_a_resume_refused_by_a_budget_journals_its_verdict(durable_url: str, tmp_path: Path) -> None:
    sg, policy, _undone, send_wire = _open(durable_url, tmp_path)
    with acting_as("team-0"):
        held = sg.run("big", lambda: send_wire("1500.00"))
    assert held.status is SagaStatus.AWAITING_APPROVAL
    [request] = sg.pending_approvals("big")
    sg.approve("big", request.journal_seq, "alice@example.com")
    _spend_900_elsewhere(durable_url, policy, tmp_path)  # meanwhile the budget filled up

    refused = sg.resume("big", request.journal_seq, request.input)
    assert refused.status is SagaStatus.REJECTED
    [rejected] = [e for e in sg.entries("big") if e.phase == "REJECTED"]
    verdict = parse_verdict(rejected.payload)
    assert verdict is not None
    assert verdict.policy == load_policy(policy).sha256
    assert (verdict.decision.rule, verdict.decision.action) == ("wire-budget", "deny")
    assert verdict.principal == "team-0"
    approver, reason = parse_decision_payload(rejected.payload)
    assert approver == ""
    assert reason.startswith("the policy refused the approved call when it was to run (rule wire-budget)")
    assert "\n" not in reason
    assert sg.verify("big").valid
    sg.close()


def test_a_debit_refuses_a_meter_whose_tail_was_rewritten(
    durable_url: str, tmp_path: Path, behind_the_library: Callable[[str, str], int]
) -> None:
    """Another program zeroes the meter's sums by SQL: the next debit, in another process, does
    not trust them (the budget does not reopen); it is denied, saying the meter is broken."""
    sg, policy, _undone, send_wire = _open(durable_url, tmp_path)
    with acting_as("team-0"):  # the whole budget is spent
        assert (
            sg.run("spend", lambda: [send_wire("1000.00"), send_wire("1000.00")]).status
            is SagaStatus.COMPLETED
        )
    _first, tail = sg.entries(METER)
    assert "total=2000.00" in tail.payload
    edit = (
        "UPDATE side_effect_journal SET payload = REPLACE(payload, '2000.00', '0.00') "
        f"WHERE saga_id = '{METER}' AND seq = 2"
    )
    assert behind_the_library(durable_url, edit) == 1

    sync = tmp_path / "sync"
    sync.mkdir()
    (sync / "go-0").touch()
    subprocess.run(
        [sys.executable, str(WORKER), durable_url, str(policy), str(sync), "a", "1", "900.00"],
        check=True,
        timeout=120,
    )
    answer = (sync / "done-0-a").read_text(encoding="utf-8")
    assert answer.startswith("[DENIED] send_wire did not run")
    assert f"meter {METER!r} is broken at seq 2" in answer
    assert len(sg.entries(METER)) == 2  # nothing was debited on the rewritten sums
    assert not sg.verify(METER).valid
    sg.close()
