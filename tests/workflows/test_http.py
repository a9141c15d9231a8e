"""The workflow routes: list runs, read one, approve (and continue) or reject a stage's gate."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from sagacity import Phase, Sagacity
from sagacity.server import TokenAuth, create_app

TOKENS = {
    "lawyer-token-0123456789": {"name": "lawyer@example.com", "roles": ["approver"]},
    "reader-token-0123456789": {"name": "reader@example.com", "roles": ["auditor"]},
}
LAWYER = {"Authorization": "Bearer lawyer-token-0123456789"}
READER = {"Authorization": "Bearer reader-token-0123456789"}
BRIEF = {"topic": "sagas for agents"}


@pytest.fixture
def sg(tmp_path: Path) -> Iterator[Sagacity]:
    with Sagacity(f"sqlite:///{tmp_path}/j.db") as sagacity:
        yield sagacity


@pytest.fixture
def client(sg: Sagacity) -> Iterator[TestClient]:
    with TestClient(create_app(sg, auth=TokenAuth(TOKENS))) as c:
        yield c


def effects() -> list[str]:
    return [line.split('"')[1] for line in Path(os.environ["SAGACITY_WF_EFFECTS"]).read_text().splitlines()]


def test_runs_are_listed_and_read_with_the_gate_input(
    wf: ModuleType, sg: Sagacity, client: TestClient
) -> None:
    wf.publishing.run(sg, "article-1", BRIEF)
    listed = client.get("/sagacity/workflows", headers=READER)
    assert listed.status_code == 200
    [run] = listed.json()
    assert run["runId"] == "article-1"
    assert run["workflow"] == "publish-article"
    assert run["status"] == "AWAITING_APPROVAL"
    assert run["currentStage"] == "publish"
    assert [s["status"] for s in run["stages"]] == ["COMPLETED", "COMPLETED", "AWAITING_APPROVAL"]
    one = client.get("/sagacity/workflows/article-1", headers=READER).json()
    gate = one["stages"][2]["gate"]
    [request] = sg.pending_approvals("article-1")
    assert gate["input"] == request.input
    assert gate["inputHash"] == request.input_hash
    assert gate["reason"] == "Legal must sign off before anything is published"
    assert one["stages"][0]["output"]["title"] == "Sagas For Agents"
    assert client.get("/sagacity/workflows/nothing-here", headers=READER).status_code == 404


def test_approving_a_gate_journals_the_principal_and_continues(
    wf: ModuleType, sg: Sagacity, client: TestClient
) -> None:
    wf.publishing.run(sg, "article-2", BRIEF)
    answer = client.post("/sagacity/workflows/article-2/gates/publish/approve", headers=LAWYER, json={})
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()
    assert body["decision"]["approverIdentity"] == "lawyer@example.com"
    assert body["run"]["status"] == "COMPLETED"
    assert body["run"]["stages"][2]["output"] == {"url": "https://news.example/sagas-for-agents"}
    assert effects().count("publish") == 1
    approvals = [e for e in sg.entries("article-2") if e.phase == Phase.APPROVED]
    assert [e.payload for e in approvals] == ["approver=lawyer@example.com"]
    again = client.post("/sagacity/workflows/article-2/gates/publish/approve", headers=LAWYER)
    assert again.status_code == 404  # no open gate any more


def test_an_auditor_may_not_decide(wf: ModuleType, sg: Sagacity, client: TestClient) -> None:
    wf.publishing.run(sg, "article-3", BRIEF)
    refused = client.post("/sagacity/workflows/article-3/gates/publish/approve", headers=READER)
    assert refused.status_code == 403
    assert client.post("/sagacity/workflows/article-3/gates/publish/approve").status_code == 401


def test_rejecting_needs_a_reason_and_compensates(wf: ModuleType, sg: Sagacity, client: TestClient) -> None:
    wf.publishing.run(sg, "article-4", BRIEF)
    blank = client.post(
        "/sagacity/workflows/article-4/gates/publish/reject", headers=LAWYER, json={"reason": " "}
    )
    assert blank.status_code == 400
    answer = client.post(
        "/sagacity/workflows/article-4/gates/publish/reject", headers=LAWYER, json={"reason": "defamatory"}
    )
    assert answer.status_code == 200
    assert answer.json()["run"]["status"] == "REJECTED"
    assert effects() == ["draft", "format", "unformat", "discard_draft"]
    wrong = client.post(
        "/sagacity/workflows/article-4/gates/draft/reject", headers=LAWYER, json={"reason": "x"}
    )
    assert wrong.status_code == 404


def test_approving_a_gate_of_a_changed_stage_answers_409_naming_the_new_gate(
    wf: ModuleType, sg: Sagacity, client: TestClient
) -> None:
    """The server runs another version of the stage than the gate was opened for: the approval
    is journaled, continuing supersedes the gate and answers 409 DefinitionChangedError; nothing ran."""
    [request] = wf.publishing.run(sg, "article-9", BRIEF).awaiting
    publish = wf.publishing.stages[2]
    publish.version = "2"
    try:
        answer = client.post("/sagacity/workflows/article-9/gates/publish/approve", headers=LAWYER, json={})
    finally:
        publish.version = "1"
    assert answer.status_code == 409, answer.text
    body = answer.json()
    assert body["type"] == "DefinitionChangedError"
    [again] = sg.pending_approvals("article-9")
    assert again.journal_seq != request.journal_seq
    assert f"held again as request {again.journal_seq}" in body["error"]
    assert "publish" not in effects()
