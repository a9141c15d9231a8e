"""CrewAI with SagacityCrewTools: the real framework, a scripted ``BaseLLM``, no network, no key.

The full loop: a flow's crew reserves stock and calls the wire, the flow pauses through
``@human_feedback``, a human approves in Sagacity, a *new process* restores the flow from CrewAI's
persistence and resumes it, the wire runs exactly once. CrewAI's own gap: a task retried by its
guardrail and a flow re-run present the same calls again and never run them twice. And the ways
around the approval: feedback given in CrewAI alone, the flow's saved state edited, a hook editing
the arguments, a rejection.
"""

from __future__ import annotations

import importlib
import json
import os
import sqlite3
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# crewai.flow, not crewai: with tests/integrations on sys.path, this folder is a namespace
# package "crewai" where the real one is missing. scripts/test-apart crewai requires it in .venv-crewai.
# Imported here, once, past an ImportWarning of CrewAI's own (crewai.rag refuses the attribute
# for its child module while importing it).
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ImportWarning)
    if os.environ.get("SAGACITY_REQUIRE_CREWAI") == "1":
        importlib.import_module("crewai.flow")
    else:
        pytest.importorskip(
            "crewai.flow", reason="the crewai extra is not installed (it cannot sit beside dev): see .ci/run"
        )

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.errors import ApprovalRefusedError
from sagacity.testing import tool_entries

from ..conftest import load_app, read_effects, run_app

# CrewAI reads its own deprecated fields (``function_calling_llm`` and others) on every agent.
pytestmark = [
    pytest.mark.filterwarnings("ignore:function_calling_llm is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:deprecated$:DeprecationWarning"),
]

HERE = Path(__file__).parent
WIRED = "wire 4200.00 alice"


@pytest.fixture
def app(order_tools: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("CREWAI_STORAGE_DIR", str(tmp_path / "crewai"))
    return load_app(HERE, "crew_app")


@pytest.fixture
def flows_db(tmp_path: Path) -> str:
    return str(tmp_path / "flows.db")


def paused_flow(app: ModuleType, sg: Sagacity, flows_db: str) -> str:
    """Kick the order flow off: it pauses on the wire's gate; its id (the saga id)."""
    from crewai.flow import HumanFeedbackPending

    flow = app.order_flow(sg, flows_db)(persistence=app.persistence(flows_db))
    paused = flow.kickoff()
    assert isinstance(paused, HumanFeedbackPending), paused
    flow_id = str(flow.state.id)
    assert paused.context.flow_id == flow_id
    [request] = paused.context.metadata["sagacity"]["requests"]
    assert request["tool"] == "send_wire_transfer"
    return flow_id


def resume_in_new_process(url: str, flows_db: str, flow_id: str) -> dict[str, Any]:
    """Restore the paused flow from CrewAI's persistence in a fresh Python process and resume it
    with the journal's feedback."""
    return run_app(HERE / "crew_app.py", url, flows_db, flow_id)


def approve(sg: Sagacity, saga_id: str, approver: str = "alice@example.com") -> int:
    [request] = sg.pending_approvals(saga_id)
    sg.approve(saga_id, request.journal_seq, approver)
    return request.journal_seq


def test_flow_pauses_is_approved_and_resumed_in_a_new_process(
    app: ModuleType, url: str, flows_db: str, effects: Path
) -> None:
    """Paused by the gate, approved in Sagacity, resumed elsewhere: the wire runs once, in band;
    the reservation the resumed flow presents again is replayed; a replay after that runs nothing."""
    with Sagacity(url) as sg:
        flow_id = paused_flow(app, sg, flows_db)
        assert read_effects(effects) == ["reserve SKU-9"]
        assert sg.status(flow_id) is SagaStatus.AWAITING_APPROVAL
        assert app.feedback_from_journal(sg, flow_id) is None  # nothing to resume yet
        approve(sg, flow_id)

        done = resume_in_new_process(url, flows_db, flow_id)
        assert done["feedback"] == "approved"
        assert done["effects"] == ["reserve SKU-9", WIRED]

        # The crew kicked off once more in the saga: everything replays from the journal.
        with sg.saga(flow_id, continue_existing=True):
            again = app.crew(sg, [[app.RESERVE], [("send_wire_transfer", app.order_tools.ALICE)], "done"])
            again.kickoff()
        assert read_effects(effects) == ["reserve SKU-9", WIRED]
        phases = [(e.tool_name, e.phase) for e in tool_entries(sg, flow_id)]
        assert phases.count(("send_wire_transfer", Phase.EXECUTED)) == 1
        assert phases.count(("reserve_inventory", Phase.INTENT)) == 1
        assert sg.status(flow_id) is SagaStatus.COMPLETED
        assert sg.verify(flow_id).valid


def test_a_retried_task_never_runs_a_tool_twice(app: ModuleType, url: str, effects: Path) -> None:
    """The task's guardrail refuses the first answer; CrewAI retries the task and the model makes
    the same calls again (with new call ids): they replay, nothing is reserved or charged twice."""
    verdicts = iter([(False, "add the order number"), (True, "fine")])
    attempts: list[str] = []

    def guardrail(output: Any):
        attempts.append(output.raw)
        ok, why = next(verdicts)
        return (ok, output.raw if ok else why)

    steps = [[app.RESERVE], [app.CHARGE], "reserved and charged"]
    with Sagacity(url) as sg:
        crew = app.crew(sg, steps, saga_id="retry-1", guardrail=guardrail, guardrail_max_retries=2)
        assert crew.kickoff().raw == "reserved and charged"
        assert len(attempts) == 2  # the task ran twice
        assert read_effects(effects) == ["reserve SKU-9", "charge O-1"]
        tools = [e.tool_name for e in tool_entries(sg, "retry-1") if e.phase == Phase.INTENT]
        assert tools == ["reserve_inventory", "charge_card"]


def test_a_failed_tool_compensates_in_reverse(app: ModuleType, url: str, effects: Path) -> None:
    """The courier fails: the charge is refunded, then the stock released."""
    with Sagacity(url) as sg:
        app.crew(sg, [[app.RESERVE], [app.CHARGE], [app.SHIP], "done"], saga_id="fail-1").kickoff()
        assert read_effects(effects) == ["reserve SKU-9", "charge O-1", "refund O-1", "release SKU-9"]
        assert sg.status("fail-1") is SagaStatus.COMPENSATED


def test_feedback_given_in_crewai_alone_pays_nothing(
    app: ModuleType, url: str, flows_db: str, effects: Path
) -> None:
    """Resumed with "approved" typed into CrewAI, no approval in Sagacity: the wire does not run
    and its gate still waits."""
    with Sagacity(url) as sg:
        flow_id = paused_flow(app, sg, flows_db)
        done = app.resume(sg, flows_db, flow_id, "approved")
        assert done["result"] == "done"  # the flow ran to its end
        assert WIRED not in done["effects"]
        [still] = sg.pending_approvals(flow_id)
        assert still.tool_name == "send_wire_transfer"
        assert sg.status(flow_id) is SagaStatus.AWAITING_APPROVAL


def test_rejected_wire_compensates_and_the_flow_cannot_pay(
    app: ModuleType, url: str, flows_db: str, effects: Path
) -> None:
    """A rejection compensates the reservation; the journal refuses to resume, and a flow
    resumed anyway with CrewAI feedback pays nothing."""
    with Sagacity(url) as sg:
        flow_id = paused_flow(app, sg, flows_db)
        [request] = sg.pending_approvals(flow_id)
        sg.reject(flow_id, request.journal_seq, "bob@example.com", reason="unknown supplier")
        assert read_effects(effects) == ["reserve SKU-9", "release SKU-9"]
        with pytest.raises(ApprovalRefusedError, match="rejected"):
            app.feedback_from_journal(sg, flow_id)
        done = app.resume(sg, flows_db, flow_id, "approved")
        assert WIRED not in done["effects"]
        assert sg.status(flow_id) is SagaStatus.REJECTED


def test_tampered_flow_state_is_a_new_call_needing_its_own_approval(
    app: ModuleType, url: str, flows_db: str, effects: Path
) -> None:
    """The approved wire's amount edited in CrewAI's saved flow state: the resumed flow presents
    other arguments, which the approval does not cover — nothing is paid, a new gate waits for
    the edited payload."""
    with Sagacity(url) as sg:
        flow_id = paused_flow(app, sg, flows_db)
        approve(sg, flow_id)
        with sqlite3.connect(flows_db) as db:
            (saved,) = db.execute(
                "SELECT state_json FROM pending_feedback WHERE flow_uuid = ?", (flow_id,)
            ).fetchone()
            state = json.loads(saved)
            assert state["amount"] == "4200.00"
            state["amount"] = "9999.00"
            db.execute(
                "UPDATE pending_feedback SET state_json = ? WHERE flow_uuid = ?", (json.dumps(state), flow_id)
            )
        done = app.resume(sg, flows_db, flow_id)
        assert done["feedback"] == "approved"  # the journal's answer for the approved payload
        assert [line for line in done["effects"] if line.startswith("wire")] == []
        [edited] = [r for r in sg.pending_approvals(flow_id) if r.input != app.order_tools.ALICE]
        assert json.loads(edited.input) == {"amount": "9999.00", "to": "alice"}
        assert app.feedback_from_journal(sg, flow_id) is None  # the edit waits for its own approval


def test_arguments_edited_by_a_hook_need_a_new_approval(
    app: ModuleType, url: str, flows_db: str, effects: Path
) -> None:
    """CrewAI's way to edit a call (a ``before_tool_call`` hook changing ``tool_input``) after
    the wire was approved: the edit is gated anew and runs only once it is approved itself."""
    from crewai.hooks import register_before_tool_call_hook, unregister_before_tool_call_hook

    def edit(context: Any) -> None:
        if context.tool_name == "send_wire_transfer":
            context.tool_input["amount"] = "4100.00"

    with Sagacity(url) as sg:
        flow_id = paused_flow(app, sg, flows_db)
        approve(sg, flow_id)
        register_before_tool_call_hook(edit)
        try:
            flow = app.order_flow(sg, flows_db).from_pending(flow_id, app.persistence(flows_db))
            flow.resume(app.feedback_from_journal(sg, flow_id))
            assert [line for line in read_effects(effects) if line.startswith("wire")] == []
            [edited] = [r for r in sg.pending_approvals(flow_id) if r.input != app.order_tools.ALICE]
            assert json.loads(edited.input) == {"amount": "4100.00", "to": "alice"}
            sg.approve(flow_id, edited.journal_seq, "carol@example.com")
            with sg.saga(flow_id, continue_existing=True):
                app.crew(sg, flow.steps()).kickoff()
        finally:
            unregister_before_tool_call_hook(edit)
        assert [line for line in read_effects(effects) if line.startswith("wire")] == ["wire 4100.00 alice"]


def test_a_wrapped_tool_awaited_directly_runs_once(app: ModuleType, url: str, effects: Path) -> None:
    """``await tool.arun(...)`` (CrewAI's async entry of a tool) on an async Sagacity tool, twice
    in one saga: journaled once, the second call answered from the journal."""
    import asyncio

    with Sagacity(url) as sg:
        [charge] = app.SagacityCrewTools(sg).wrap([app.order_tools.charge_card])

        async def twice() -> list[Any]:
            async with sg.saga("direct-1"):
                return [await charge.arun(order="O-1", amount="49.90") for _ in range(2)]

        assert asyncio.run(twice()) == ["charge ch_O-1", "charge ch_O-1"]
        assert read_effects(effects) == ["charge O-1"]
        assert sg.status("direct-1") is SagaStatus.COMPLETED
