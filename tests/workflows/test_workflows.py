"""Workflows on the journal: stages once, gates bound to what they approve, durable across
processes, compensation of completed stages in reverse — through the public API."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.errors import (
    ApprovalError,
    ApprovalRefusedError,
    CheckFailedError,
    SagaNotFoundError,
    SagaStateError,
    StageOutputError,
    WorkflowDefinitionError,
)
from sagacity.tools import registry
from sagacity.workflows import StageStatus, Workflow, find_workflow, runs

from .conftest import BRIEF, effects, in_process, race, statuses


def test_a_run_stops_at_the_gate_and_continues_in_other_processes(wf: ModuleType, durable_url: str) -> None:
    """Approved across process restarts: draft and format run once, publish once, the chain verifies."""
    first = in_process(durable_url, "run", "article-1", json.dumps(BRIEF))
    assert first == {"status": "AWAITING_APPROVAL", "stage": "publish", "output": None}
    assert in_process(durable_url, "approve", "article-1", "lawyer@example.com")["approved"] > 0
    done = in_process(durable_url, "resume", "article-1")
    assert done == {
        "status": "COMPLETED",
        "stage": None,
        "output": {"url": "https://news.example/sagas-for-agents"},
    }
    assert [e[0] for e in effects()] == ["draft", "format", "publish"]
    again = in_process(durable_url, "resume", "article-1")  # a completed run replays, runs nothing
    assert again["status"] == "COMPLETED"
    assert [e[0] for e in effects()] == ["draft", "format", "publish"]
    sg = Sagacity(durable_url)
    try:
        assert sg.verify("article-1").valid
        view = wf.publishing.view(sg, "article-1")
        assert statuses(view) == {"draft": "COMPLETED", "format": "COMPLETED", "publish": "COMPLETED"}
        gate = view.stages[2].gate
        assert gate is not None
        assert gate.approvers == ("lawyer@example.com",)
        assert gate.reason == "Legal must sign off before anything is published"
        assert json.loads(gate.input)["input"]["html"] == "<h1>Sagas For Agents</h1>"
        assert view.stages[2].checks[0].status == "PASSED"
    finally:
        sg.close()


def test_the_gate_binds_the_stage_definition_and_input(wf: ModuleType, tmp_path: Path) -> None:
    """The approval request's input holds the workflow, stage, code version and input."""
    sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
    result = wf.publishing.run(sg, "article-2", BRIEF)
    [request] = result.awaiting
    body = json.loads(request.input)
    assert body["workflow"] == "publish-article"
    assert body["stage"] == "publish"
    assert body["version"] == "1"
    assert body["input"]["title"] == "Sagas For Agents"


@pytest.mark.parametrize(
    ("deploy", "approved"),
    [("SAGACITY_WF_VERSION", True), ("SAGACITY_WF_VERSION", False), ("SAGACITY_WF_PUBLISH_DOC", True)],
)
def test_a_changed_stage_definition_needs_a_new_approval(
    wf: ModuleType, durable_url: str, monkeypatch: pytest.MonkeyPatch, deploy: str, approved: bool
) -> None:
    """A process deployed with another version of the gated stage (or only another description)
    continues a run gated under the old one: as `sg.resume` does for a changed tool, it raises
    DefinitionChangedError naming the new gate (the old one is superseded, an approval of it does
    not carry over), and nothing ran. The new gate, approved, runs the new stage once."""
    run_id = f"article-3-{approved}"
    assert in_process(durable_url, "run", run_id, json.dumps(BRIEF))["status"] == "AWAITING_APPROVAL"
    sg = Sagacity(durable_url)
    try:
        [request] = sg.pending_approvals(run_id)
        if approved:
            in_process(durable_url, "approve", run_id, "lawyer@example.com")
        monkeypatch.setenv(deploy, "2")  # the deploy: processes started from now on
        refused = in_process(durable_url, "resume", run_id)
        assert refused["error"] == "DefinitionChangedError", refused
        changed = "version 1 -> 2" if deploy == "SAGACITY_WF_VERSION" else "its definition changed"
        assert changed in refused["message"]
        [again] = sg.pending_approvals(run_id)
        assert refused["new_seq"] == again.journal_seq != request.journal_seq
        assert json.loads(again.input)["version"] == ("2" if deploy == "SAGACITY_WF_VERSION" else "1")
        assert sg.view(run_id).gates[-1].approvers == ()  # nobody approved version 2 yet
        assert "publish" not in [e[0] for e in effects()]
        [superseded] = [e for e in sg.entries(run_id) if e.phase == Phase.REJECTED]
        assert "superseded" in superseded.payload_text

        waiting = in_process(durable_url, "resume", run_id)  # the new gate just waits
        assert waiting == {"status": "AWAITING_APPROVAL", "stage": "publish", "output": None}
        in_process(durable_url, "approve", run_id, "lawyer@example.com")
        done = in_process(durable_url, "resume", run_id)
        assert done["status"] == "COMPLETED", done
        assert [e[0] for e in effects()] == ["draft", "format", "publish"]
        assert sg.verify(run_id).valid
    finally:
        sg.close()


def test_a_rejected_gate_compensates_completed_stages_in_reverse(wf: ModuleType, durable_url: str) -> None:
    in_process(durable_url, "run", "article-4", json.dumps(BRIEF))
    assert "rejected" in in_process(durable_url, "reject", "article-4", "lawyer@example.com")
    after = in_process(durable_url, "resume", "article-4")
    assert after["status"] == "REJECTED"
    # Each undo, in another process than its stage, receives the stage's journaled input and output.
    assert effects() == [
        ["draft", "sagas for agents"],
        ["format", "Sagas For Agents"],
        ["unformat", "<h1>Sagas For Agents</h1>"],
        ["discard_draft", "sagas for agents", "Sagas For Agents"],
    ]
    sg = Sagacity(durable_url)
    try:
        view = wf.publishing.view(sg, "article-4")
        assert statuses(view) == {"draft": "COMPENSATED", "format": "COMPENSATED", "publish": "REJECTED"}
        rejected = view.stages[2].gate
        assert rejected is not None
        assert rejected.rejected_by == "lawyer@example.com"
    finally:
        sg.close()


def test_a_failed_check_compensates_and_says_why(wf: ModuleType, tmp_path: Path) -> None:
    sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
    result = wf.publishing.run(sg, "article-5", {**BRIEF, "embargo": "2027-01-01"})
    assert result.status is SagaStatus.COMPENSATED
    assert isinstance(result.error, CheckFailedError)
    assert result.error.reason == "embargoed until 2027-01-01"
    assert result.error.check == "no_embargo"
    assert [e[0] for e in effects()] == ["draft", "format", "unformat", "discard_draft"]
    view = result.view
    assert view.stages[2].checks[0].status == "FAILED"
    assert view.stages[2].checks[0].reason == "embargoed until 2027-01-01"
    assert sg.pending_approvals("article-5") == []


def test_a_failed_stage_compensates_the_stages_before_it(wf: ModuleType, tmp_path: Path) -> None:
    sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
    result = wf.publishing.run(sg, "article-6", {**BRIEF, "fail_at": "format"})
    assert result.status is SagaStatus.COMPENSATED
    assert isinstance(result.error, RuntimeError)
    assert [e[0] for e in effects()] == ["draft", "format", "discard_draft"]
    assert statuses(result.view) == {"draft": "COMPENSATED", "format": "FAILED", "publish": "PENDING"}
    assert "the typesetter is down" in result.view.stages[1].error


def test_an_output_that_is_not_json_is_refused_before_it_is_journaled_done(
    wf: ModuleType, tmp_path: Path
) -> None:
    sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
    result = wf.publishing.run(sg, "article-7", {**BRIEF, "fail_at": "output"})
    assert result.status is SagaStatus.COMPENSATED
    assert isinstance(result.error, StageOutputError)
    assert "output of stage 'format' is not JSON" in str(result.error)
    formats = [e for e in sg.entries("article-7") if e.tool_name == "publish-article/format"]
    assert [e.phase for e in formats] == [Phase.INTENT, Phase.FAILED]


def test_an_expired_gate_compensates(wf: ModuleType, tmp_path: Path) -> None:
    sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
    [request] = wf.publishing.run(sg, "article-8", BRIEF).awaiting
    assert request.expires_at is not None
    assert request.expires_at - request.created_at == timedelta(hours=1)  # the gate's ttl
    expired = sg.expire_approvals(now=request.expires_at + timedelta(seconds=1))
    assert [r.journal_seq for r in expired] == [request.journal_seq]
    result = wf.publishing.resume(sg, "article-8")
    assert result.status is SagaStatus.REJECTED  # an expiry is a rejection
    assert [e[0] for e in effects()] == ["draft", "format", "unformat", "discard_draft"]
    assert result.view.stages[2].status is StageStatus.REJECTED


def test_racing_approvals_of_one_gate_from_two_processes(wf: ModuleType, durable_url: str) -> None:
    """Two approvers at once on a one-approver gate: one approval lands, the other is refused."""
    in_process(durable_url, "run", "article-9", json.dumps(BRIEF))
    outcomes = race(durable_url, "article-9", ["approve", "approve"], ["ann@example.com", "bob@example.com"])
    assert sorted("approved" in o for o in outcomes) == [False, True]
    [refused] = [o for o in outcomes if "error" in o]
    assert refused["error"] == "ApprovalRefusedError"
    sg = Sagacity(durable_url)
    try:
        approvals = [e for e in sg.entries("article-9") if e.phase == Phase.APPROVED]
        assert len(approvals) == 1
    finally:
        sg.close()


def test_racing_continues_run_the_gated_stage_once(wf: ModuleType, durable_url: str) -> None:
    in_process(durable_url, "run", "article-10", json.dumps(BRIEF))
    in_process(durable_url, "approve", "article-10", "lawyer@example.com")
    outcomes = race(durable_url, "article-10", ["resume", "resume", "resume"], ["", "", ""])
    assert any(o.get("status") == "COMPLETED" for o in outcomes)
    assert [e[0] for e in effects()].count("publish") == 1


def test_runs_are_listed_with_status_and_current_stage(wf: ModuleType, tmp_path: Path) -> None:
    sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
    wf.publishing.run(sg, "article-11", BRIEF)
    wf.publishing.run(sg, "article-12", {**BRIEF, "fail_at": "format"})
    listed = {v.run_id: (v.status, v.current_stage) for v in runs(sg)}
    assert listed == {
        "article-11": (SagaStatus.AWAITING_APPROVAL, "publish"),
        "article-12": (SagaStatus.COMPENSATED, "format"),
    }
    assert find_workflow("publish-article") is wf.publishing


def test_start_returns_a_handle(wf: ModuleType, tmp_path: Path) -> None:
    sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
    handle = wf.publishing.start(sg, "article-13", BRIEF)
    result = handle.result(timeout=30)
    assert handle.done()
    assert result.status is SagaStatus.AWAITING_APPROVAL
    assert handle.view().current_stage == "publish"


def test_a_run_has_one_input(wf: ModuleType, tmp_path: Path) -> None:
    sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
    wf.publishing.run(sg, "article-14", BRIEF)
    with pytest.raises(SagaStateError, match="started with another input"):
        wf.publishing.run(sg, "article-14", {"topic": "something else"})
    with pytest.raises(SagaNotFoundError):
        wf.publishing.resume(sg, "no-such-run")


def test_async_stages_run_with_run_async(tmp_path: Path) -> None:
    import asyncio

    with registry.isolated():
        wf = Workflow("async-flow", version="1")
        seen: list[str] = []

        @wf.stage
        async def fetch(n: int) -> int:
            seen.append("fetch")
            return n + 1

        @wf.stage(gate=True)
        async def send(n: int) -> dict[str, int]:
            seen.append("send")
            return {"sent": n}

        sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
        with pytest.raises(SagaStateError, match="run_async"):
            wf.run(sg, "a-1", 1)
        first = asyncio.run(wf.run_async(sg, "a-1", 1))
        assert first.status is SagaStatus.AWAITING_APPROVAL
        sg.approve("a-1", first.awaiting[0].journal_seq, approver="ann@example.com")
        done = asyncio.run(wf.resume_async(sg, "a-1"))
        assert done.output == {"sent": 2}
        assert seen == ["fetch", "send"]


def test_definition_errors_are_raised_where_the_workflow_is_written() -> None:
    with registry.isolated():
        wf = Workflow("defs")

        @wf.stage
        def one(x: int) -> int:
            return x

        with pytest.raises(WorkflowDefinitionError, match="already has a stage named 'one'"):

            @wf.stage(name="one")
            def other(x: int) -> int:
                return x

        with pytest.raises(WorkflowDefinitionError, match="no stage 'two' for a check"):

            @wf.check("two")
            def early(x: int) -> bool:
                return True

        with pytest.raises(WorkflowDefinitionError, match="no stage 'nothing' for a compensation"):

            @wf.compensation("nothing")
            def undo(ctx: Any) -> None: ...

        @one.compensation
        def undo_one(ctx: Any) -> None: ...

        with pytest.raises(WorkflowDefinitionError, match="already has a compensation"):

            @one.compensation
            def undo_again(ctx: Any) -> None: ...

        with pytest.raises(WorkflowDefinitionError, match="belong to a gate"):
            wf.stage(approvals=2)
        with pytest.raises(WorkflowDefinitionError, match="approvals must be"):
            wf.stage(gate=True, approvals=0)
        with pytest.raises(WorkflowDefinitionError, match="workflow name"):
            Workflow("has spaces")


def test_a_rejection_is_refused_twice(wf: ModuleType, tmp_path: Path) -> None:
    """Rejecting a compensated run's gate again is an error, not a second compensation."""
    sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
    [request] = wf.publishing.run(sg, "article-15", BRIEF).awaiting
    sg.reject("article-15", request.journal_seq, approver="lawyer@example.com", reason="no")
    with pytest.raises(ApprovalError):
        sg.reject("article-15", request.journal_seq, approver="lawyer@example.com", reason="no")
    assert [e[0] for e in effects()].count("discard_draft") == 1


def test_the_gate_names_who_started_the_run_and_refuses_them_as_approver(tmp_path: Path) -> None:
    """Separation of duties: the run's principal is the gate's requester and may not approve it."""
    from sagacity import acting_as

    with registry.isolated():
        wf = Workflow("payout", version="1")
        paid: list[str] = []

        @wf.stage
        def prepare(amount: str) -> dict[str, str]:
            return {"amount": amount}

        @wf.stage(gate=True, requester_may_not_approve=True)
        def pay(order: dict[str, str]) -> str:
            paid.append(order["amount"])
            return "paid"

        sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
        with acting_as("ann@example.com"):
            first = wf.run(sg, "payout-1", "90.00")
        [request] = first.awaiting
        [gate] = [e for e in sg.entries("payout-1") if e.phase == Phase.AWAITING_APPROVAL]
        assert "ann@example.com" in gate.payload
        with pytest.raises(ApprovalRefusedError, match="may not approve"):
            wf.approve(sg, "payout-1", "pay", approver="ann@example.com")
        wf.approve(sg, "payout-1", "pay", approver="bob@example.com")
        with acting_as("ann@example.com"):
            done = wf.resume(sg, "payout-1")
        assert done.output == "paid"
        assert paid == ["90.00"]
        assert request.journal_seq == gate.seq


def test_a_gate_of_n_approvals_needs_n_distinct_approvers(tmp_path: Path) -> None:
    with registry.isolated():
        wf = Workflow("two-lawyers", version="1")
        sent: list[str] = []

        @wf.stage
        def write(text: str) -> str:
            return text.upper()

        @wf.stage(gate=True, approvals=2, reason="two lawyers read it")
        def send(text: str) -> str:
            sent.append(text)
            return "sent"

        sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
        first = wf.run(sg, "n-1", "hello")
        assert first.view.stages[1].gate is not None
        assert first.view.stages[1].gate.approvals_required == 2
        assert first.view.stages[1].gate.reason == "two lawyers read it"
        wf.approve(sg, "n-1", "send", approver="ann@example.com")
        with pytest.raises(ApprovalRefusedError):
            wf.approve(sg, "n-1", "send", approver="ann@example.com")  # the same person twice
        assert wf.resume(sg, "n-1").status is SagaStatus.AWAITING_APPROVAL
        assert sent == []
        wf.approve(sg, "n-1", "send", approver="bob@example.com")
        assert wf.resume(sg, "n-1").output == "sent"
        assert sent == ["HELLO"]


def test_an_undo_that_fails_ends_the_run_compensation_failed(tmp_path: Path) -> None:
    with registry.isolated():
        wf = Workflow("fragile", version="1")
        undone: list[str] = []

        @wf.stage
        def reserve(n: int) -> int:
            return n

        @reserve.compensation
        def release(ctx: Any) -> None:
            raise RuntimeError("the reservation service is down")

        @wf.stage
        def hold_room(n: int) -> int:
            return n

        @hold_room.compensation
        def free_room(ctx: Any) -> None:
            undone.append("free_room")

        @wf.stage
        def charge(n: int) -> int:
            raise RuntimeError("card declined")

        sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
        result = wf.run(sg, "f-1", 3)
        assert result.status is SagaStatus.COMPENSATION_FAILED
        assert statuses(result.view) == {
            "reserve": "COMPENSATION_FAILED",
            "hold_room": "COMPENSATED",
            "charge": "FAILED",
        }
        assert undone == ["free_room"]  # the later stage first, once


def test_without_a_version_the_gate_binds_a_hash_of_the_stage_code(tmp_path: Path) -> None:
    """Two definitions of one stage whose code differs bind different versions."""
    versions = []
    for body in ("return {'sent': n}", "return {'sent': n, 'twice': True}"):
        with registry.isolated():
            namespace: dict[str, Any] = {}
            exec(f"def send(n):\n    {body}\n", namespace)
            wf = Workflow("unversioned")
            wf.stage(gate=True)(namespace["send"])
            sg = Sagacity(f"sqlite:///{tmp_path}/{len(versions)}.db")
            [request] = wf.run(sg, "u-1", 1).awaiting
            versions.append(json.loads(request.input)["version"])
    assert all(v.startswith("sha256:") for v in versions)
    assert versions[0] != versions[1]


def test_a_run_exports_and_verifies_as_any_saga(wf: ModuleType, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sagacity.cli import main

    url = f"sqlite:///{tmp_path}/j.db"
    sg = Sagacity(url)
    wf.publishing.run(sg, "article-16", BRIEF)
    wf.publishing.approve(sg, "article-16", "publish", approver="lawyer@example.com")
    wf.publishing.resume(sg, "article-16")
    exported = tmp_path / "article-16.jsonl"
    exported.write_text("".join(line + "\n" for line in sg.export("article-16")), encoding="utf-8")
    sg.close()
    checked = CliRunner().invoke(main, ["verify", "--export", str(exported)])
    assert checked.exit_code == 0, checked.output
    assert "intact" in checked.output
    tools = [json.loads(line)["toolName"] for line in exported.read_text().splitlines()]
    assert "publish-article/publish" in tools
