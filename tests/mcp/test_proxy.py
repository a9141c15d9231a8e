"""``sagacity mcp proxy`` as a real process, driven by the SDK's own client over stdio and streamable
HTTP, in both protocol eras (2025-11-25 "legacy" and 2026-07-28), in front of a real MCP server
(the fake payments server). A human decides through the existing CLI (another process) and the
HTTP API served by the proxy's process."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

from mcp_tools import (
    Agent,
    Setup,
    agent,
    api,
    free_port,
    http_proxy,
    make_setup,
    sagacity_cli,
    stdio_params,
    text_of,
    wait_until,
)

from sagacity import Phase, Sagacity, SagaStatus

pytestmark = pytest.mark.timeout(240)

CONNECTIONS = [("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")]


@dataclass
class World:
    """One proxy (and its upstream), one connected agent, and the API port of the proxy's process."""

    setup: Setup
    agent: Agent
    api_port: int
    transport: str

    def journal(self) -> Sagacity:
        return Sagacity(self.setup.db_url)

    def pending(self, saga: str) -> list[int]:
        with self.journal() as sg:
            return [r.journal_seq for r in sg.pending_approvals(saga)]

    def approve(self, saga: str, seq: int, who: str = "alice@example.com") -> None:
        """A person approves with the CLI, from another process."""
        done = sagacity_cli("approvals", "approve", saga, str(seq), "--as", who, "--db", self.setup.db_url)
        assert done.returncode == 0, done.stderr + done.stdout


@pytest.fixture(scope="module", params=CONNECTIONS, ids=[f"{t}-{m}" for t, m in CONNECTIONS])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    transport, mode = request.param
    setup = make_setup(tmp_path_factory.mktemp(f"{transport}-{mode}"))
    # No background sweep here: an approved call runs only when the agent asks, so every test
    # sees exactly what its own calls caused (the sweep has its own test).
    if transport == "http":
        with http_proxy(setup, "--settle-interval", "0") as (url, port), agent(url, mode) as a:
            yield World(setup, a, port, transport)
    else:
        port = free_port()
        params = stdio_params(
            setup,
            "--api",
            "--api-listen",
            str(port),
            "--tokens-file",
            str(setup.tokens),
            "--settle-interval",
            "0",
        )
        with agent(params, mode) as a:
            wait_until(lambda: api(port, "GET", "/me").status_code == 200, what="the proxy's API")
            yield World(setup, a, port, transport)


def new_saga(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_negotiates_the_protocol_the_client_asks_for(world: World, request: pytest.FixtureRequest) -> None:
    """The proxy serves the 2025-11-25 handshake and the 2026-07-28 envelope, over both transports."""
    expected = "2025-11-25" if request.node.callspec.id.endswith("legacy") else "2026-07-28"
    assert world.agent.protocol_version == expected


def test_listing_fails_closed_and_keeps_output_schemas_valid(world: World) -> None:
    """Read-only tools keep their schema; a held tool is listed without its output schema (kept in
    _meta) so the SDK client accepts its 'awaiting approval' answer; hidden tools are not listed."""
    tools = {t.name: t for t in world.agent.list_tools()}
    assert "refund" not in tools  # hidden: only an undo
    assert {"sagacity_status", "sagacity_commit", "sagacity_rollback"} <= set(tools)
    assert tools["get_balance"].output_schema is not None
    assert tools["get_balance"].meta["io.sagacity/kind"] == "read-only"
    assert tools["charge"].meta["io.sagacity/kind"] == "compensatable"
    payout = tools["send_payout"]
    assert payout.meta["io.sagacity/kind"] == "irreversible"  # destructive, no undo: held by default
    assert payout.output_schema is None
    assert payout.meta["io.sagacity/outputSchema"]["required"] == ["payout_id"]
    assert "approves" in (payout.description or "")
    assert tools["close_ticket"].meta["io.sagacity/kind"] == "irreversible"  # no annotations, no undo


def test_read_only_call_passes_through_and_is_journaled(world: World) -> None:
    """A read-only tool's result reaches the agent as the upstream sent it, and the call is in the chain."""
    saga = new_saga("read")
    result = world.agent.call("get_balance", {"account": "acc-1"}, saga=saga)
    assert not result.is_error
    assert result.structured_content == {"account": "acc-1", "balance": 1000}
    with world.journal() as sg:
        entries = sg.entries(saga)
        assert [(e.tool_name, e.phase) for e in entries] == [
            ("get_balance", "INTENT"),
            ("get_balance", "EXECUTED"),
        ]
        assert entries[0].input == '{"account":"acc-1"}'
        assert json.loads(entries[1].payload)["structuredContent"] == {"account": "acc-1", "balance": 1000}
        assert sg.verify(saga).valid


def test_upstream_failure_compensates_in_reverse_through_upstream_tools(world: World) -> None:
    """A declined charge (isError) compensates the saga newest first with the server's own undo tools."""
    saga = new_saga("comp")
    customer = f"cust-{saga}"
    charge = world.agent.call("charge", {"customer": customer, "amount": 40}, saga=saga)
    charge_id = charge.structured_content["charge_id"]
    ticket = world.agent.call("create_ticket", {"title": f"order {saga}"}, saga=saga)
    ticket_id = json.loads(text_of(ticket))["ticket_id"]
    failed = world.agent.call("charge", {"customer": customer, "amount": 50_000}, saga=saga)
    assert failed.is_error
    assert "card declined" in text_of(failed)
    assert "rolled back" in text_of(failed)

    ledger = world.setup.ledger.events()
    undone = [e for e in ledger if e["event"] in ("refund", "close_ticket") and saga in json.dumps(e)]
    assert [(e["event"], e.get("ticket_id", e.get("charge_id"))) for e in undone] == [
        ("close_ticket", ticket_id),
        ("refund", charge_id),
    ]
    assert undone[1]["reason"] == f"rollback of {saga}"
    with world.journal() as sg:
        assert sg.status(saga) is SagaStatus.COMPENSATED
        compensated = [
            e.tool_name for e in sg.entries(saga) if e.phase == Phase.COMPENSATED and e.tool_name != "saga"
        ]
        assert compensated == ["create_ticket", "charge"]
        assert sg.verify(saga).valid
    again = world.agent.call("get_balance", {"account": "a"}, saga=saga)
    assert again.is_error
    assert "COMPENSATED" in text_of(again)


def test_held_call_runs_exactly_once_after_approval(world: World) -> None:
    """An irreversible call waits; after a person approves (CLI, another process) the agent's re-sent
    call runs it once against the upstream and gets its result; sending it once more is answered with
    that result from the journal, and nothing runs again."""
    saga = new_saga("held")
    to = f"DE-{saga}"
    held = world.agent.call("send_payout", {"to": to, "amount": 120}, saga=saga)
    assert not held.is_error  # an ordinary result, valid for the client even though the tool has a schema
    assert text_of(held).startswith("[AWAITING_APPROVAL]")
    assert [e for e in world.setup.ledger.events("payout") if e["to"] == to] == []
    [seq] = world.pending(saga)
    assert f"request {seq}" in text_of(held)

    still = world.agent.call("send_payout", {"to": to, "amount": 120}, saga=saga)
    assert "still waiting" in text_of(still)
    assert world.pending(saga) == [seq]  # the same request, not a second one

    world.approve(saga, seq)
    done = world.agent.call("send_payout", {"to": to, "amount": 120}, saga=saga)
    assert not done.is_error
    assert done.structured_content["payout_id"].startswith("po_")
    assert len([e for e in world.setup.ledger.events("payout") if e["to"] == to]) == 1

    again = world.agent.call("send_payout", {"to": to, "amount": 120}, saga=saga)
    assert again.structured_content == done.structured_content
    assert world.pending(saga) == []
    assert len([e for e in world.setup.ledger.events("payout") if e["to"] == to]) == 1
    with world.journal() as sg:
        resumed = [e for e in sg.entries(saga) if e.phase == Phase.INTENT and e.tool_name == "send_payout"]
        # the resumed call, and the upstream's definition of the tool it went out under
        assert [e.payload.split("\n")[0] for e in resumed] == [f"resumes seq={seq} by=sagacity-mcp-proxy"]
        assert [e.payload.split("\n")[1].startswith("definition=sha256:") for e in resumed] == [True]
        approved = [e for e in sg.entries(saga) if e.phase == Phase.APPROVED]
        assert approved[0].payload == "approver=alice@example.com"
        assert sg.verify(saga).valid


def test_arguments_in_another_key_order_match_the_approval(world: World) -> None:
    """Arguments are journaled and hashed in canonical JSON: the same arguments re-sent in another
    key order (as another client would) are the approved call."""
    saga = new_saga("order")
    to = f"DE-{saga}"
    world.agent.call("send_payout", {"to": to, "amount": 75}, saga=saga)
    [seq] = world.pending(saga)
    with world.journal() as sg:
        [request] = sg.pending_approvals(saga)
        assert request.input == json.dumps({"amount": 75, "to": to}, separators=(",", ":"))
    world.approve(saga, seq)
    done = world.agent.call("send_payout", {"amount": 75, "to": to}, saga=saga)
    assert not done.is_error
    assert "payout_id" in done.structured_content
    assert len([e for e in world.setup.ledger.events("payout") if e["to"] == to]) == 1


def test_other_arguments_are_never_run_under_an_approval(world: World) -> None:
    """A call whose arguments differ from the approved ones is a new request needing its own approval;
    resuming the approved request with them is refused and the saga compensates."""
    saga = new_saga("differ")
    to = f"DE-{saga}"
    world.agent.call("charge", {"customer": f"c-{saga}", "amount": 5}, saga=saga)
    world.agent.call("send_payout", {"to": to, "amount": 100}, saga=saga)
    [seq] = world.pending(saga)
    world.approve(saga, seq)

    other = world.agent.call("send_payout", {"to": to, "amount": 900}, saga=saga)
    assert text_of(other).startswith("[AWAITING_APPROVAL]")
    assert sorted(world.pending(saga)) == sorted([seq, *[s for s in world.pending(saga) if s != seq]])
    assert len(world.pending(saga)) == 2
    assert [e for e in world.setup.ledger.events("payout") if e["to"] == to] == []

    # Someone tries to run the approved request with the other arguments, through the API.
    tampered = json.dumps({"amount": 900, "to": to}, separators=(",", ":"))
    response = api(world.api_port, "POST", f"/resume/{saga}/{seq}", {"payload": tampered})
    assert response.status_code == 409
    assert "PayloadMismatchError" in response.text
    assert [e for e in world.setup.ledger.events("payout") if e["to"] == to] == []
    with world.journal() as sg:
        assert sg.status(saga) is SagaStatus.COMPENSATED
    assert any(e["event"] == "refund" and saga in e["reason"] for e in world.setup.ledger.events())


def test_rejected_call_compensates_the_saga(world: World) -> None:
    """A person rejects the held call (HTTP API of the proxy's process): the saga's charge is refunded
    through the upstream, the payout never runs, and the agent learns why on its next call."""
    saga = new_saga("reject")
    to = f"DE-{saga}"
    charge = world.agent.call("charge", {"customer": f"c-{saga}", "amount": 9}, saga=saga)
    world.agent.call("send_payout", {"to": to, "amount": 5000}, saga=saga)
    [seq] = world.pending(saga)
    response = api(world.api_port, "POST", f"/reject/{saga}/{seq}", {"reason": "too much"})
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "COMPENSATED"
    refunds = [
        e
        for e in world.setup.ledger.events("refund")
        if e["charge_id"] == charge.structured_content["charge_id"]
    ]
    assert [r["reason"] for r in refunds if saga in r["reason"]] == [f"rollback of {saga}"]

    again = world.agent.call("send_payout", {"to": to, "amount": 5000}, saga=saga)
    assert again.is_error
    assert "COMPENSATED" in text_of(again)
    assert "too much" in text_of(again)
    assert [e for e in world.setup.ledger.events("payout") if e["to"] == to] == []
    with world.journal() as sg:
        decisions = [e for e in sg.entries(saga) if e.phase == Phase.REJECTED]
        assert decisions[0].payload == "approver=alice@example.com\nreason=too much"
        assert sg.verify(saga).valid


def test_status_runs_an_approved_call_and_shows_its_result(world: World) -> None:
    """sagacity_status runs approved calls (once) and reports them; a re-send then gets the same result."""
    saga = new_saga("status")
    to = f"DE-{saga}"
    world.agent.call("send_payout", {"to": to, "amount": 33}, saga=saga)
    [seq] = world.pending(saga)
    before = world.agent.call("sagacity_status", saga=saga).structured_content
    assert before["status"] == "AWAITING_APPROVAL"
    assert before["requests"][0]["state"] == "awaiting"
    assert (before["requests"][0]["approvers"], before["requests"][0]["approvalsRequired"]) == ([], 1)
    world.approve(saga, seq)
    after = world.agent.call("sagacity_status", saga=saga).structured_content
    [request] = after["requests"]
    assert request["state"] == "executed"
    payout_id = request["result"]["structuredContent"]["payout_id"]
    resent = world.agent.call("send_payout", {"to": to, "amount": 33}, saga=saga)
    assert resent.structured_content == {"payout_id": payout_id}
    assert len([e for e in world.setup.ledger.events("payout") if e["to"] == to]) == 1


def test_commit_and_rollback(world: World) -> None:
    """sagacity_rollback undoes the saga's work through the upstream; sagacity_commit closes a saga."""
    saga = new_saga("rb")
    charge = world.agent.call("charge", {"customer": f"c-{saga}", "amount": 8}, saga=saga)
    rolled = world.agent.call("sagacity_rollback", {"reason": "the user changed their mind"}, saga=saga)
    assert not rolled.is_error
    assert "rolled back" in text_of(rolled)
    assert any(
        e["charge_id"] == charge.structured_content["charge_id"] and saga in e["reason"]
        for e in world.setup.ledger.events("refund")
    )
    with world.journal() as sg:
        failed = [e for e in sg.entries(saga) if e.tool_name == "saga" and e.phase == Phase.FAILED]
        assert "the user changed their mind" in failed[0].payload

    done = new_saga("commit")
    world.agent.call("charge", {"customer": f"c-{done}", "amount": 8}, saga=done)
    committed = world.agent.call("sagacity_commit", saga=done)
    assert "committed" in text_of(committed)
    refused = world.agent.call("charge", {"customer": f"c-{done}", "amount": 8}, saga=done)
    assert refused.is_error
    assert "committed" in text_of(refused)
    with world.journal() as sg:
        assert sg.status(done) is SagaStatus.COMPLETED


def test_journal_of_a_real_session_verifies(world: World, tmp_path: Path) -> None:
    """Whatever the proxy journaled verifies with the operator's `sagacity verify`."""
    done = sagacity_cli("verify", "--db", world.setup.db_url)
    assert done.returncode == 0, done.stdout + done.stderr
