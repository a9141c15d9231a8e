"""A workflow gate decided by the guardrails policy (docs/policies.md): a stage is a tool named
``<workflow>/<stage>`` whose arguments are its journaled input, so the policy's own rules allow
it unattended under a limit, hold it for more approvers above it, or deny it — each verdict
journaled on the stage's entry with the policy's SHA-256, and shown on every surface."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.cli import main
from sagacity.guardrails import allow, build_policy, deny, hold, parse_verdict
from sagacity.tools import registry
from sagacity.workflows import StageContext, StageStatus, Workflow

from .conftest import statuses

RULES = build_policy(
    allow("payout-unattended", tool="payout/pay"),
    hold(
        "payout-four-eyes",
        tool="payout/pay",
        amount="input.amount",
        over="100.00",
        approvals=2,
        reason="a payout above 100.00 EUR needs two approvers",
    ),
    deny(
        "payout-limit",
        tool="payout/pay",
        amount="input.amount",
        over="10000.00",
        reason="a payout above 10,000.00 EUR is never made",
    ),
    default="allow",
)


class Payout:
    """prepare -> (gate) pay, counting what ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.flow = Workflow("payout", version="1")

        @self.flow.stage
        def prepare(order: dict[str, str]) -> dict[str, str]:
            self.ran.append("prepare")
            return order

        @prepare.compensation
        def cancel(ctx: StageContext) -> None:
            self.ran.append("cancel")

        @self.flow.stage(gate=True, reason="finance approves payouts")
        def pay(order: dict[str, str]) -> str:
            self.ran.append("pay")
            return f"paid {order['amount']}"


@pytest.fixture
def payout() -> Iterator[Payout]:
    with registry.isolated():
        yield Payout()


@pytest.fixture
def sg(tmp_path: Path) -> Iterator[Sagacity]:
    with Sagacity(f"sqlite:///{tmp_path}/j.db", policy=RULES) as sagacity:
        yield sagacity


def verdict_of(sg: Sagacity, run_id: str, phase: Phase) -> Any:
    [entry] = [e for e in sg.entries(run_id) if e.tool_name == "payout/pay" and e.phase == phase]
    return parse_verdict(entry.payload)


def test_under_the_limit_the_policy_approves_the_gate(payout: Payout, sg: Sagacity) -> None:
    result = payout.flow.run(sg, "p-1", {"amount": "80.00"})
    assert result.status is SagaStatus.COMPLETED
    assert result.output == "paid 80.00"
    assert payout.ran == ["prepare", "pay"]
    assert not [e for e in sg.entries("p-1") if e.phase == Phase.AWAITING_APPROVAL]  # no human asked
    verdict = verdict_of(sg, "p-1", Phase.INTENT)
    assert verdict.policy == RULES.sha256
    assert (verdict.decision.action, verdict.decision.rule) == ("allow", "payout-unattended")
    pay = result.view.stages[1]
    assert pay.policy is not None
    assert (pay.policy.action, pay.policy.rule) == ("allow", "payout-unattended")
    assert pay.gate is None


def test_over_the_limit_the_policy_holds_the_gate_for_more_approvers(payout: Payout, sg: Sagacity) -> None:
    first = payout.flow.run(sg, "p-2", {"amount": "250.00"})
    assert first.status is SagaStatus.AWAITING_APPROVAL
    pay = first.view.stages[1]
    assert pay.status is StageStatus.AWAITING_APPROVAL
    assert pay.gate is not None
    assert pay.gate.approvals_required == 2  # the rule's number, not the stage's one
    assert pay.policy is not None
    assert (pay.policy.action, pay.policy.rule) == ("hold", "payout-four-eyes")
    assert verdict_of(sg, "p-2", Phase.AWAITING_APPROVAL).policy == RULES.sha256
    payout.flow.approve(sg, "p-2", "pay", approver="ann@example.com")
    still = payout.flow.resume(sg, "p-2")
    assert still.status is SagaStatus.AWAITING_APPROVAL
    assert payout.ran == ["prepare"]
    payout.flow.approve(sg, "p-2", "pay", approver="bob@example.com")
    assert statuses(payout.flow.view(sg, "p-2"))["pay"] is StageStatus.APPROVED
    done = payout.flow.resume(sg, "p-2")
    assert done.status is SagaStatus.COMPLETED
    assert payout.ran == ["prepare", "pay"]


def test_far_over_the_limit_the_policy_denies_and_the_run_compensates(payout: Payout, sg: Sagacity) -> None:
    result = payout.flow.run(sg, "p-3", {"amount": "50000.00"})
    assert result.status is SagaStatus.COMPENSATED
    assert payout.ran == ["prepare", "cancel"]  # pay never ran; prepare undone once
    pay = result.view.stages[1]
    assert pay.status is StageStatus.DENIED
    assert pay.error == "denied by policy: a payout above 10,000.00 EUR is never made"
    assert pay.policy is not None
    assert (pay.policy.action, pay.policy.rule) == ("deny", "payout-limit")
    assert sg.pending_approvals("p-3") == []
    assert sg.verify("p-3").valid


def test_the_policy_verdict_is_shown_over_http_and_in_the_cli(
    payout: Payout, sg: Sagacity, tmp_path: Path
) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from sagacity.server import TokenAuth, create_app

    payout.flow.run(sg, "p-4", {"amount": "250.00"})
    tokens = {
        "ann-token-0123456789ab": {"name": "ann@example.com", "roles": ["approver", "auditor"]},
        "bob-token-0123456789ab": {"name": "bob@example.com", "roles": ["approver", "auditor"]},
    }
    with TestClient(create_app(sg, auth=TokenAuth(tokens))) as client:
        ann = {"Authorization": "Bearer ann-token-0123456789ab"}
        bob = {"Authorization": "Bearer bob-token-0123456789ab"}
        run = client.get("/sagacity/workflows/p-4", headers=ann).json()
        assert run["stages"][1]["policy"] == {
            "rule": "payout-four-eyes",
            "action": "hold",
            "reason": "a payout above 100.00 EUR needs two approvers",
            "approvals": 2,
        }
        assert run["stages"][1]["gate"]["approvalsRequired"] == 2
        one = client.post("/sagacity/workflows/p-4/gates/pay/approve", headers=ann, json={})
        assert one.json()["run"]["status"] == "AWAITING_APPROVAL"  # one of two: not continued
        two = client.post("/sagacity/workflows/p-4/gates/pay/approve", headers=bob, json={})
        assert two.json()["run"]["status"] == "COMPLETED"
    assert payout.ran == ["prepare", "pay"]
    approvers = [e.payload for e in sg.entries("p-4") if e.phase == Phase.APPROVED]
    assert approvers == ["approver=ann@example.com", "approver=bob@example.com"]
    assert json.loads(run["stages"][1]["gate"]["input"])["input"] == {"amount": "250.00"}
    # The CLI reads the verdict from the journal (the workflow is declared in this process).
    shown = CliRunner().invoke(main, ["workflows", "show", "p-4", "--db", f"sqlite:///{tmp_path}/j.db"])
    assert shown.exit_code == 0, shown.output
    assert "hold by rule payout-four-eyes" in shown.output
