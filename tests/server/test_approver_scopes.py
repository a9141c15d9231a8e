"""Approver scopes on every surface and every durable store: the policy names who may decide a
gate, and the library, the CLI, the HTTP API, the dashboard's queue, Slack and email links all
refuse anyone else with the same error, journaling nothing. And a race of Slack and the
dashboard on one gate, in two server processes, lands one decision."""

from __future__ import annotations

import subprocess
import sys
import threading
from contextlib import ExitStack
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from sagacity import Sagacity
from sagacity._links import APPROVE_ACTION_ID
from sagacity.errors import ApproverScopeError

from .messaging import (
    ALICE_TOKEN,
    BOB_TOKEN,
    POLICY,
    SlackFake,
    confirm,
    decisions,
    link,
    messages_server,
    messages_servers,
    post_slack,
    slack_click,
)

BOB = "bob@example.com"
ALICE = "alice@example.com"


def _cli(db: str, *args: str) -> subprocess.Popen[str]:
    """The CLI in a process of its own (started now, read with ``communicate``)."""
    return subprocess.Popen(
        [sys.executable, "-m", "sagacity.cli", *args, "--db", db],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_scopes_refuse_others_on_every_surface(durable_url: str, tmp_path: Path, tools: ModuleType) -> None:
    """bob is not in group:finance, which the policy names for srv_wire: every surface refuses
    his decision with ApproverScopeError (HTTP 403, CLI exit 2) and journals nothing; his queue
    ("needs me", ``--mine``) leaves the request out; alice, in finance, approves."""
    db = durable_url
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    with Sagacity(db) as sg:
        [request] = sg.run("scoped-1", tools.transfer).awaiting
    seq, sha = request.journal_seq, request.input_hash

    with Sagacity(db, policy=str(policy)) as sg:
        with pytest.raises(ApproverScopeError, match="group:finance") as refused:
            sg.approve("scoped-1", seq, BOB)
        assert refused.value.allowed == ("group:finance",)
        with pytest.raises(ApproverScopeError):
            sg.reject("scoped-1", seq, BOB, "not mine to say")
        [pending] = sg.approvals("scoped-1")
        assert pending.scope == ("group:finance",)
        assert (pending.may_decide(BOB), pending.may_decide(ALICE)) == (False, True)
        assert sg.approvals(awaiting=BOB) == []
        assert [p.request.saga_id for p in sg.approvals(awaiting=ALICE)] == ["scoped-1"]

    # The CLI's three processes run while the server starts; they are read before alice decides.
    approve = _cli(db, "approvals", "approve", "scoped-1", str(seq), "--as", BOB, "--policy", str(policy))
    theirs = _cli(db, "approvals", "list", "--mine", "--as", BOB, "--policy", str(policy), "-q")
    mine = _cli(db, "approvals", "list", "--mine", "--as", ALICE, "--policy", str(policy), "-q")
    slack = SlackFake()
    with ExitStack() as stack:
        stack.callback(slack.close)
        url = stack.enter_context(messages_server(tmp_path, db))
        http = stack.enter_context(httpx.Client(base_url=url, timeout=20))
        as_bob = {"Authorization": f"Bearer {BOB_TOKEN}"}
        for path, body in ((f"approve/scoped-1/{seq}", {}), (f"reject/scoped-1/{seq}", {"reason": "no"})):
            answer = http.post(f"/sagacity/{path}", json=body, headers=as_bob)
            assert (answer.status_code, answer.json()["type"]) == (403, "ApproverScopeError"), answer.text
        [queued] = http.get("/sagacity/approvals", headers=as_bob).json()
        assert (queued["mayDecide"], queued["approverScope"]) == (False, ["group:finance"])
        assert http.get("/sagacity/approvals?needsMe=true", headers=as_bob).json() == []
        detail = http.get(f"/sagacity/requests/scoped-1/{seq}", headers=as_bob).json()
        assert detail["mayDecide"] is False
        clicked = post_slack(http, slack_click("U_BOB", APPROVE_ACTION_ID, "scoped-1", seq, sha, slack.url))
        assert (clicked.status_code, clicked.json()["type"]) == (403, "ApproverScopeError")
        emailed = confirm(http, link(url, BOB, "scoped-1", seq, sha), BOB)
        assert emailed.status_code == 403
        assert "<h1>Not yours to decide</h1>" in emailed.text
        refused, _ = approve.communicate(timeout=120)
        assert approve.returncode == 2, refused
        assert "ApproverScopeError" in refused
        assert (theirs.communicate(timeout=120)[0], theirs.returncode) == ("", 0)
        assert mine.communicate(timeout=120)[0].split() == ["scoped-1", str(seq)]
        assert decisions(db, "scoped-1") == []

        as_alice = {"Authorization": f"Bearer {ALICE_TOKEN}"}
        assert http.get("/sagacity/approvals", headers=as_alice).json()[0]["mayDecide"] is True
        assert http.post(f"/sagacity/approve/scoped-1/{seq}", headers=as_alice).status_code == 200
    assert decisions(db, "scoped-1") == [("APPROVED", f"approver={ALICE}")]


def _race(slack_server: httpx.Client, dashboard: httpx.Client, click: bytes, approve: str) -> dict[str, int]:
    """The Slack click and bob's dashboard approval, sent from two threads released together."""
    start = threading.Barrier(2)
    statuses: dict[str, int] = {}

    def from_slack() -> None:
        start.wait()
        statuses["slack"] = post_slack(slack_server, click).status_code

    def from_dashboard() -> None:
        start.wait()
        answer = dashboard.post(approve, headers={"Authorization": f"Bearer {BOB_TOKEN}"})
        statuses["dashboard"] = answer.status_code

    threads = [threading.Thread(target=from_slack), threading.Thread(target=from_dashboard)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


def test_slack_and_dashboard_racing_in_two_processes_land_one_decision(
    durable_url: str, tmp_path: Path, tools: ModuleType
) -> None:
    """alice clicks Approve in Slack (server A) while bob approves in the dashboard (server B),
    on the same single-approver gate, released together from real threads: one APPROVED is
    journaled, the other is refused (409), for every gate, and every chain verifies."""
    db = durable_url
    gates = []
    with Sagacity(db) as sg:
        for n in range(2):
            [request] = sg.run(f"race-{n}", tools.transfer).awaiting
            gates.append((f"race-{n}", request.journal_seq, request.input_hash))
    slack = SlackFake()
    with ExitStack() as stack:
        stack.callback(slack.close)
        server_a, server_b = stack.enter_context(messages_servers(tmp_path, db, 2, policy=False))
        http_a = stack.enter_context(httpx.Client(base_url=server_a, timeout=30))
        http_b = stack.enter_context(httpx.Client(base_url=server_b, timeout=30))
        for saga_id, seq, sha in gates:
            statuses = _race(
                http_a,
                http_b,
                slack_click("U_ALICE", APPROVE_ACTION_ID, saga_id, seq, sha, slack.url),
                f"/sagacity/approve/{saga_id}/{seq}",
            )
            assert sorted(statuses.values()) == [200, 409], statuses
            [(phase, payload)] = decisions(db, saga_id)
            winner = "slack" if statuses["slack"] == 200 else "dashboard"
            expected = f"approver={ALICE}\nvia=slack" if winner == "slack" else f"approver={BOB}"
            assert (phase, payload) == ("APPROVED", expected)
    with Sagacity(db) as sg:
        assert all(sg.verify(saga_id).valid for saga_id, _, _ in gates)
