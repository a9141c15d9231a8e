"""The four-eyes count, read from the gate: the same in every process, with or without the tool.

Issue #33 item 24: a CLI without ``--import`` counted a payout that needs two approvers as
needing one (``"approvalsRequired":1, "readyToResume":true``), never said "1 of 2", and
journaled a surplus APPROVED. The gate now journals ``approvals=<n>``; these run the CLI as a
fresh process that has not imported the tool, on every durable store.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from sagacity import Phase, Sagacity
from sagacity._payloads import parse_decision_payload

from .conftest import cli_process

HERE = Path(__file__).parent


def test_one_of_two_everywhere_and_no_surplus_approval(
    durable_url: str, tools: ModuleType, tmp_path: Path
) -> None:
    with Sagacity(durable_url) as sg:
        seq = sg.run("payout", tools.four_eyes_order).awaiting[0].journal_seq
        gate = next(e for e in sg.entries("payout") if e.seq == seq)
        assert "approvals=2" in gate.payload.split("\n")
        sg.approve("payout", seq, "alice")

    listed = cli_process(durable_url, tmp_path, "approvals", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [item] = json.loads(listed.stdout)["approvals"]
    assert (item["approvers"], item["approvalsRequired"], item["readyToResume"]) == (["alice"], 2, False)
    assert "1 of 2: alice" in cli_process(durable_url, tmp_path, "approvals", "list").stdout
    assert (
        "1 of 2: alice" in cli_process(durable_url, tmp_path, "approvals", "show", "payout", str(seq)).stdout
    )

    second = cli_process(durable_url, tmp_path, "approvals", "approve", "payout", str(seq), "--as", "bob")
    assert second.returncode == 0, second.stderr
    third = cli_process(durable_url, tmp_path, "approvals", "approve", "payout", str(seq), "--as", "carol")
    assert third.returncode == 2
    assert "already approved" in third.stderr
    with Sagacity(durable_url) as sg:
        entries = sg.entries("payout")
        approved = [e for e in entries if e.tool_name == "approval-gate" and e.phase == Phase.APPROVED]
        assert [parse_decision_payload(e.payload)[0] for e in approved] == ["alice", "bob"]
        assert sg.resume("payout", seq, '{"amount":"50000.00"}').value == "payout 50000.00"
