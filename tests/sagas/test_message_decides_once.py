"""A decision from an approval message (a Slack button, an email link) decides once per person
(#36): a rejection from a message by someone who approved the gate already is refused inside the
fence, so the approve and the reject of one link, racing in two processes, never both land."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagacity import Phase, Reversibility, Sagacity, SagaStatus, tool
from sagacity.errors import ApprovalRefusedError

DECIDER = Path(__file__).with_name("message_decider.py")
ALICE = "alice@example.com"
GATES = 12


@tool(name="once_wire", reversibility=Reversibility.IRREVERSIBLE)
def once_wire(amount: str, to: str) -> str:
    return f"wired {amount} to {to}"


def _gate(sg: Sagacity, saga_id: str) -> int:
    assert sg.run(saga_id, once_wire, "10.00", "ACME").status is SagaStatus.AWAITING_APPROVAL
    [request] = sg.pending_approvals(saga_id)
    return request.journal_seq


def _decisions(sg: Sagacity, saga_id: str) -> list[tuple[str, str]]:
    return [
        (e.phase, e.payload)
        for e in sg.entries(saga_id)
        if e.tool_name == "approval-gate" and e.phase in (Phase.APPROVED, Phase.REJECTED)
    ]


def test_a_message_cannot_reject_what_its_person_approved(durable_url: str) -> None:
    with Sagacity(durable_url) as sg:
        seq = _gate(sg, "once-link")
        sg.approve("once-link", seq, ALICE, via="email")
        with pytest.raises(ApprovalRefusedError, match="decides once per person"):
            sg.reject("once-link", seq, ALICE, "changed my mind", via="slack")
        assert _decisions(sg, "once-link") == [(Phase.APPROVED, f"approver={ALICE}\nvia=email")]
        # From the dashboard or the CLI (no message) she may still withdraw it, as before.
        sg.reject("once-link", seq, ALICE, "changed my mind")
        assert sg.status("once-link") is SagaStatus.REJECTED
        assert sg.verify("once-link").valid


def _wait_for(path: Path, deadline: float) -> None:
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} did not appear"
        time.sleep(0.001)


def test_approve_and_reject_of_one_link_racing_land_one(durable_url: str, tmp_path: Path) -> None:
    sync = tmp_path / "sync"
    sync.mkdir()
    with Sagacity(durable_url) as sg:
        for gate in range(GATES):
            _gate(sg, f"once-{gate}")
    deciders = [
        subprocess.Popen([sys.executable, str(DECIDER), durable_url, str(sync), decision, str(GATES)])
        for decision in ("approve", "reject")
    ]
    try:
        deadline = time.monotonic() + 120
        for decision in ("approve", "reject"):
            _wait_for(sync / f"ready-{decision}", deadline)
        for gate in range(GATES):
            (sync / f"go-{gate}").touch()
            for decision in ("approve", "reject"):
                _wait_for(sync / f"done-{gate}-{decision}", deadline)
        for decider in deciders:
            assert decider.wait(timeout=60) == 0
    finally:
        for decider in deciders:
            if decider.poll() is None:
                decider.kill()
    with Sagacity(durable_url) as sg:
        for gate in range(GATES):
            decisions = _decisions(sg, f"once-{gate}")
            assert len(decisions) == 1, f"gate {gate}: {decisions}"
            said = {d: (sync / f"done-{gate}-{d}").read_text(encoding="utf-8") for d in ("approve", "reject")}
            landed = "approved" if decisions[0][0] == Phase.APPROVED else "rejected"
            assert landed in said.values(), (gate, said, decisions)
            assert sg.verify(f"once-{gate}").valid
