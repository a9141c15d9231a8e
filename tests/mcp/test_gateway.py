"""The gateway in this process, reached through the SDK's in-memory client, in front of the real
payments server (a child process): saga boundaries, the background sweep, deadlines, four eyes,
failed undos, and what is refused at start."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

import anyio
from mcp_tools import PAYMENTS, POLICY, SAGA_KEY, Setup, make_setup, text_of

from mcp import Client
from sagacity import Phase, SagaStatus
from sagacity.mcp import Gateway, PolicyError, UpstreamTarget, build_server, parse_policy

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@asynccontextmanager
async def opened(
    tmp_path: Path, policy: str = POLICY, *, settle_interval: float | None = None
) -> AsyncIterator[tuple[Gateway, Setup]]:
    setup = make_setup(tmp_path, policy=policy)
    parsed = parse_policy(policy, environ=setup.env)
    target = UpstreamTarget(command=(sys.executable, str(PAYMENTS)), env=dict(parsed.upstream.env))
    async with Gateway.open(parsed, target, db_url=setup.db_url, settle_interval=settle_interval) as gw:
        yield gw, setup


async def call(
    client: Client, name: str, arguments: dict[str, Any] | None = None, saga: str | None = None
) -> Any:
    meta = {SAGA_KEY: saga} if saga is not None else None
    return await client.call_tool(name, arguments or {}, meta=meta)


async def test_without_a_session_the_saga_must_be_named(tmp_path: Path) -> None:
    """At 2026-07-28 over HTTP there is no session: a call that names no saga is refused with how to
    name one (policy sessionless = "refuse", the default), and runs when it does."""
    async with opened(tmp_path) as (gw, setup), Client(build_server(gw), mode="2026-07-28") as client:
        refused = await call(client, "charge", {"customer": "c", "amount": 1})
        assert refused.is_error
        assert SAGA_KEY in text_of(refused)
        assert setup.ledger.events("charge") == []
        named = await call(client, "charge", {"customer": "c", "amount": 1}, saga="named-1")
        assert named.structured_content["amount"] == 1


async def test_sessionless_per_call_policy(tmp_path: Path) -> None:
    """sessionless = "per-call": every call that names no saga is a saga of its own."""
    policy = POLICY + '\n[sagas]\nsessionless = "per-call"\n'
    async with opened(tmp_path, policy) as (gw, _), Client(build_server(gw), mode="2026-07-28") as client:
        await call(client, "charge", {"customer": "a", "amount": 1})
        await call(client, "charge", {"customer": "b", "amount": 2})
        sagas = await anyio.to_thread.run_sync(gw.sagacity.saga_ids)
        assert len(sagas) == 2


async def test_the_sweep_runs_an_approved_call_without_the_agent(tmp_path: Path) -> None:
    """With a settle interval, an approved call runs soon after the approval, once; the agent's
    re-sent call then gets its result."""
    async with (
        opened(tmp_path, settle_interval=0.1) as (gw, setup),
        Client(build_server(gw, stdio_session="s"), mode="legacy") as client,
    ):
        held = await call(client, "send_payout", {"to": "sweep", "amount": 3}, saga="sweep-1")
        assert "[AWAITING_APPROVAL]" in text_of(held)
        [request] = await anyio.to_thread.run_sync(gw.sagacity.pending_approvals, "sweep-1")
        await anyio.to_thread.run_sync(
            gw.sagacity.approve, "sweep-1", request.journal_seq, "alice@example.com"
        )
        with anyio.fail_after(30):
            while not setup.ledger.events("payout"):
                await anyio.sleep(0.05)
        resent = await call(client, "send_payout", {"to": "sweep", "amount": 3}, saga="sweep-1")
        assert resent.structured_content["payout_id"].startswith("po_")
        await anyio.sleep(0.3)  # a few more sweeps
        assert len(setup.ledger.events("payout")) == 1


async def test_four_eyes(tmp_path: Path) -> None:
    """approvals = 2: one approval is not enough; two distinct people are."""
    policy = POLICY + "\n[tools.send_payout]\nkind = 'irreversible'\napprovals = 2\n"
    async with opened(tmp_path, policy) as (gw, setup), Client(build_server(gw, stdio_session="s")) as client:
        args = {"to": "four-eyes", "amount": 1}
        await call(client, "send_payout", args, saga="fe")
        [request] = await anyio.to_thread.run_sync(gw.sagacity.pending_approvals, "fe")
        await anyio.to_thread.run_sync(gw.sagacity.approve, "fe", request.journal_seq, "alice@example.com")
        once = await call(client, "send_payout", args, saga="fe")
        assert "1 of 2 approvals: alice@example.com" in text_of(once)
        assert setup.ledger.events("payout") == []
        await anyio.to_thread.run_sync(gw.sagacity.approve, "fe", request.journal_seq, "bob@example.com")
        twice = await call(client, "send_payout", args, saga="fe")
        assert "payout_id" in twice.structured_content


async def test_a_call_past_its_deadline_is_in_doubt_here_too(tmp_path: Path) -> None:
    """An upstream that never answers: after the tool's timeout the agent is answered, and the call is
    listed in doubt by this very process's Sagacity (the saga is no longer live here)."""
    policy = POLICY.replace("[tools.settle]", "[tools.settle]\ntimeout = 1", 1)
    async with opened(tmp_path, policy) as (gw, _), Client(build_server(gw, stdio_session="s")) as client:
        answer = await call(client, "settle", {"batch": "slow"}, saga="deadline")
        assert answer.is_error
        assert "did not answer within 1s" in text_of(answer)
        [doubt] = await anyio.to_thread.run_sync(gw.sagacity.in_doubt, "deadline")
        assert doubt.tool_name == "settle"
        assert await anyio.to_thread.run_sync(gw.sagacity.status, "deadline") is SagaStatus.IN_DOUBT
        status = (await call(client, "sagacity_status", saga="deadline")).structured_content
        assert status["status"] == "IN_DOUBT"
        assert status["inDoubt"][0]["toolName"] == "settle"
        # The session's own saga is not stuck: it never saw this one.
        assert not (await call(client, "get_balance", {"account": "x"})).is_error


async def test_an_undo_that_cannot_be_built_is_journaled_as_failed(tmp_path: Path) -> None:
    """An undo template naming something the result does not have: COMPENSATION_FAILED, and the agent
    is told what is still in effect."""
    policy = POLICY.replace("{result.json.ticket_id}", "{result.structured.ticket_id}")
    async with opened(tmp_path, policy) as (gw, setup), Client(build_server(gw, stdio_session="s")) as client:
        await call(client, "create_ticket", {"title": "broken undo"}, saga="bad-undo")
        failed = await call(client, "charge", {"customer": "c", "amount": 99_999}, saga="bad-undo")
        assert "COULD NOT UNDO" in text_of(failed)
        assert "no structured content" in text_of(failed)
        entries = await anyio.to_thread.run_sync(gw.sagacity.entries, "bad-undo")
        [comp] = [e for e in entries if e.phase == Phase.COMPENSATION_FAILED and e.tool_name != "saga"]
        assert "TemplateError" in comp.payload
        assert (
            await anyio.to_thread.run_sync(gw.sagacity.status, "bad-undo") is SagaStatus.COMPENSATION_FAILED
        )
        assert setup.ledger.events("close_ticket") == []


async def test_hidden_and_unknown_tools_are_refused(tmp_path: Path) -> None:
    """A hidden tool (an undo only) and a tool the upstream does not have are refused, not sent."""
    async with opened(tmp_path) as (gw, setup), Client(build_server(gw, stdio_session="s")) as client:
        hidden = await call(client, "refund", {"charge_id": "ch_1"})
        assert hidden.is_error
        assert "not available" in text_of(hidden)
        unknown = await call(client, "teleport", {})
        assert unknown.is_error
        assert "no tool named 'teleport'" in text_of(unknown)
        assert setup.ledger.events("refund") == []


async def test_policy_naming_an_undo_the_upstream_lacks_is_refused_at_start(tmp_path: Path) -> None:
    """The proxy refuses to start when an undo tool is not listed by the upstream, naming the line."""
    policy = POLICY + "\n[tools.send_payout]\nundo = { tool = 'claw_back', arguments = {} }\n"
    with pytest.raises(PolicyError, match=r"line \d+: 'send_payout' is undone by 'claw_back'"):
        async with opened(tmp_path, policy):
            pass


async def test_the_upstream_gets_only_the_environment_the_policy_gives(tmp_path: Path) -> None:
    """The SDK starts a stdio server with a handful of variables: without the policy's env the
    payments server has no API key and never comes up."""
    policy = POLICY.replace('env = { PAYMENTS_API_KEY = "${PAYMENTS_API_KEY}", ', "env = { ")
    with pytest.raises(ConnectionError):
        async with opened(tmp_path, policy):
            pass


async def test_an_expired_request_is_rejected_and_compensated_by_the_proxy(tmp_path: Path) -> None:
    """A held call nobody approved in time: the proxy journals its expiry and undoes the saga's work
    through the upstream (only it has the tools to), and the agent is told."""
    policy = POLICY + "\n[tools.send_payout]\nkind = 'irreversible'\napproval_ttl = 0.2\n"
    async with opened(tmp_path, policy) as (gw, setup), Client(build_server(gw, stdio_session="s")) as client:
        await call(client, "charge", {"customer": "late", "amount": 4}, saga="ttl")
        await call(client, "send_payout", {"to": "late", "amount": 4}, saga="ttl")
        await anyio.sleep(0.5)
        status = await call(client, "sagacity_status", saga="ttl")
        assert status.structured_content["status"] == "COMPENSATED"
        assert "expired" in status.structured_content["compensation"]
        assert [
            e["event"] for e in setup.ledger.events() if e["event"] in ("charge", "refund", "payout")
        ] == [
            "charge",
            "refund",
        ]
        again = await call(client, "send_payout", {"to": "late", "amount": 4}, saga="ttl")
        assert again.is_error
        assert "expired" in text_of(again)


async def test_a_committed_saga_still_runs_its_approved_calls(tmp_path: Path) -> None:
    """sagacity_commit closes the saga to new calls; a call held before it still runs once approved."""
    async with (
        opened(tmp_path, settle_interval=0.1) as (gw, setup),
        Client(build_server(gw, stdio_session="s"), mode="legacy") as client,
    ):
        await call(client, "send_payout", {"to": "after-commit", "amount": 2}, saga="done")
        committed = await call(client, "sagacity_commit", saga="done")
        assert "1 call(s) still wait for approval" in text_of(committed)
        [request] = await anyio.to_thread.run_sync(gw.sagacity.pending_approvals, "done")
        await anyio.to_thread.run_sync(gw.sagacity.approve, "done", request.journal_seq, "alice@example.com")
        with anyio.fail_after(30):
            while not setup.ledger.events("payout"):
                await anyio.sleep(0.05)
        refused = await call(client, "charge", {"customer": "late", "amount": 1}, saga="done")
        assert "committed" in text_of(refused)


async def test_concurrent_calls_in_one_saga_are_journaled_in_turn(tmp_path: Path) -> None:
    """Calls of one saga sent at once (two clients naming the same saga) run one at a time: every call
    lands, gap-free, each INTENT followed by its own outcome."""
    async with (
        opened(tmp_path) as (gw, setup),
        Client(build_server(gw), mode="2026-07-28") as one,
        Client(build_server(gw), mode="2026-07-28") as two,
    ):
        async with anyio.create_task_group() as tg:
            for n in range(12):
                client = one if n % 2 else two
                tg.start_soon(call, client, "charge", {"customer": f"c{n}", "amount": n + 1}, "shared")
        entries = await anyio.to_thread.run_sync(gw.sagacity.entries, "shared")
        assert [e.seq for e in entries] == list(range(1, 25))
        assert [e.phase for e in entries] == [Phase.INTENT, Phase.EXECUTED] * 12
        assert all(a.input == b.input for a, b in zip(entries[::2], entries[1::2], strict=True))
        assert len(setup.ledger.events("charge")) == 12


GUARDED = (
    POLICY
    + """
[[rules]]
id = "big-charges"
tool = "charge"
amount = "amount"
over = 100
action = "deny"
reason = "charges above 100 need a person"

[[rules]]
id = "charge-rate"
tool = "charge"
action = "deny"
[rules.budget]
limit = 2
window = "1h"
"""
)


async def test_the_gateways_file_holds_the_guardrails_and_its_calls_are_judged(tmp_path: Path) -> None:
    """The same file's [[rules]]: a call over the limit is denied (the agent is told, the upstream
    never called), a count budget stops the third charge, every verdict is journaled."""
    async with (
        opened(tmp_path, GUARDED) as (gw, setup),
        Client(build_server(gw), mode="2026-07-28") as client,
    ):
        denied = await call(client, "charge", {"customer": "c", "amount": 500}, saga="g-1")
        assert "charges above 100 need a person" in text_of(denied)
        assert setup.ledger.events("charge") == []
        for n in (1, 2):
            ok = await call(client, "charge", {"customer": "c", "amount": n}, saga="g-1")
            assert ok.structured_content["amount"] == n
        third = await call(client, "charge", {"customer": "c", "amount": 3}, saga="g-1")
        assert "charge-rate" in text_of(third)
        assert len(setup.ledger.events("charge")) == 2
        entries = await anyio.to_thread.run_sync(gw.sagacity.entries, "g-1")
        verdicts = [e.payload for e in entries if e.phase == Phase.INTENT]
        assert [("verdict=deny rule=big-charges" in v, "verdict=allow" in v) for v in verdicts] == [
            (True, False),
            (False, True),
            (False, True),
            (False, False),
        ]


async def test_a_call_the_policy_holds_runs_once_approved_and_re_sent(tmp_path: Path) -> None:
    """A compensatable upstream tool held by a rule: approved in Sagacity, the re-sent call runs it
    once (the same path as an irreversible tool's)."""
    policy = (
        POLICY + '\n[[rules]]\nid = "big"\ntool = "charge"\namount = "amount"\nover = 100\naction = "hold"\n'
    )
    async with opened(tmp_path, policy) as (gw, setup), Client(build_server(gw), mode="2026-07-28") as client:
        held = await call(client, "charge", {"customer": "c", "amount": 500}, saga="h-1")
        assert "[AWAITING_APPROVAL]" in text_of(held)
        assert setup.ledger.events("charge") == []
        [request] = await anyio.to_thread.run_sync(gw.sagacity.pending_approvals, "h-1")
        await anyio.to_thread.run_sync(gw.sagacity.approve, "h-1", request.journal_seq, "alice@example.com")
        ran = await call(client, "charge", {"customer": "c", "amount": 500}, saga="h-1")
        assert ran.structured_content["amount"] == 500
        assert len(setup.ledger.events("charge")) == 1
