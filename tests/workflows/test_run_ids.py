"""A run id names one run of one workflow: run ids share the saga id space, so a run under an id
another workflow's run (or a plain saga) holds is refused before anything is journaled — one
process after the other, and two processes racing for one new id — on every shared store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import ModuleType

import pytest

from sagacity import Sagacity, SagaStatus, tool
from sagacity.errors import SagaExistsError, SagaNotFoundError
from sagacity.tools import registry
from sagacity.workflows import Workflow

from .conftest import BRIEF, effects, in_process, race, statuses


def test_a_second_workflow_under_a_taken_run_id_is_refused_and_journals_nothing(
    wf: ModuleType, durable_url: str
) -> None:
    """`payout-order` under the id of a `publish-article` run waiting at its gate: refused, its
    stage (named `draft` like the other's) does not run, no gate is opened, and the first run is
    left exactly as it was and goes on to its end."""
    assert in_process(durable_url, "run", "order-42", json.dumps(BRIEF))["status"] == "AWAITING_APPROVAL"
    sg = Sagacity(durable_url)
    try:
        before = sg.entries("order-42")
        refused = in_process(durable_url, "run-payout", "order-42", json.dumps(BRIEF))
        assert refused["error"] == "SagaExistsError", refused
        assert "run id 'order-42' is taken" in refused["message"]
        assert "share the saga id space" in refused["message"]
        assert sg.entries("order-42") == before
        assert [e[0] for e in effects()] == ["draft", "format"]
        assert len(sg.pending_approvals("order-42")) == 1
        with pytest.raises(SagaNotFoundError):
            wf.payouts.view(sg, "order-42")
        with pytest.raises(SagaNotFoundError):
            wf.payouts.resume(sg, "order-42")
        assert sg.entries("order-42") == before

        assert in_process(durable_url, "approve", "order-42", "lawyer@example.com")["approved"] > 0
        assert in_process(durable_url, "resume", "order-42")["status"] == "COMPLETED"
        assert [e[0] for e in effects()] == ["draft", "format", "publish"]
        view = wf.publishing.view(sg, "order-42")
        assert statuses(view) == {"draft": "COMPLETED", "format": "COMPLETED", "publish": "COMPLETED"}
        assert sg.verify("order-42").valid
    finally:
        sg.close()


def test_a_run_under_the_id_of_a_plain_saga_is_refused(wf: ModuleType, tmp_path: Path) -> None:
    @tool
    def note(text: str) -> str:
        return text

    sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
    try:
        assert sg.run("chat-7", note, "hello").status is SagaStatus.COMPLETED
        before = sg.entries("chat-7")
        with pytest.raises(SagaExistsError, match="run id 'chat-7' is taken"):
            wf.publishing.run(sg, "chat-7", BRIEF)
        with pytest.raises(SagaNotFoundError):
            wf.publishing.resume(sg, "chat-7")
        assert sg.entries("chat-7") == before
        assert effects() == []
    finally:
        sg.close()


def test_two_workflows_racing_for_one_new_run_id_one_wins_the_other_journals_nothing(
    wf: ModuleType, durable_url: str
) -> None:
    """Released together on an id nobody used: the decision is fenced on the journal, so exactly
    one workflow's run holds the id and the other is refused with nothing journaled."""
    brief = json.dumps(BRIEF)
    outcomes = race(durable_url, "order-race", ["run", "run-payout"], [brief, brief])
    refused = [o for o in outcomes if o.get("error")]
    assert len(refused) == 1, outcomes
    assert refused[0]["error"] == "SagaExistsError", outcomes
    [won] = [o for o in outcomes if not o.get("error")]
    assert won["status"] == "AWAITING_APPROVAL", outcomes
    sg = Sagacity(durable_url)
    try:
        tools = {e.tool_name.split("/")[0] for e in sg.entries("order-race") if "/" in e.tool_name}
        assert len(tools) == 1, tools  # one workflow's stages only
        winner = wf.publishing if tools == {"publish-article"} else wf.payouts
        loser = wf.payouts if winner is wf.publishing else wf.publishing
        assert winner.view(sg, "order-race").status is SagaStatus.AWAITING_APPROVAL
        with pytest.raises(SagaNotFoundError):
            loser.view(sg, "order-race")
        assert len(sg.pending_approvals("order-race")) == 1
        ran = {e[0] for e in effects()}
        assert ran in ({"draft", "format"}, {"draft_payout"}), ran
        assert sg.verify("order-race").valid
    finally:
        sg.close()


def test_async_runs_refuse_a_taken_run_id_too(wf: ModuleType, tmp_path: Path) -> None:
    sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
    try:
        assert wf.publishing.run(sg, "order-9", BRIEF).status is SagaStatus.AWAITING_APPROVAL
        before = sg.entries("order-9")
        with pytest.raises(SagaExistsError, match="run id 'order-9' is taken"):
            asyncio.run(wf.payouts.run_async(sg, "order-9", BRIEF))
        with pytest.raises(SagaNotFoundError):
            asyncio.run(wf.payouts.resume_async(sg, "order-9"))
        assert sg.entries("order-9") == before
    finally:
        sg.close()


def test_a_run_stopped_by_its_first_check_is_still_its_workflows_run(tmp_path: Path) -> None:
    """A run whose first journaled call is a check (that failed) belongs to its workflow: it is
    viewed, and running it again replays it instead of being refused as someone else's."""
    with registry.isolated():
        gated = Workflow("checked-first", version="1")

        @gated.stage
        def first(value: dict[str, str]) -> dict[str, str]:
            return value

        @gated.check("first")
        def never(value: dict[str, str]) -> bool:
            return False

        sg = Sagacity(f"sqlite:///{tmp_path}/j.db")
        try:
            assert gated.run(sg, "checked-1", {"a": "b"}).status is SagaStatus.COMPENSATED
            assert gated.view(sg, "checked-1").stages[0].checks[0].status == "FAILED"
            before = sg.entries("checked-1")
            assert gated.run(sg, "checked-1", {"a": "b"}).status is SagaStatus.COMPENSATED
            assert sg.entries("checked-1") == before
        finally:
            sg.close()
