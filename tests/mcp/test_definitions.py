"""Definitions are pinned: every proxied call and gate journals the hash of the tool's definition
as the upstream listed it; a held call whose tool changed since approval is held again; with
``pin_tools`` a rug pull (the upstream changing a tool under the agent) is refused. The gateway
in this process, reached through the SDK's in-memory client, in front of the real payments server."""

from __future__ import annotations

import logging
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
from sagacity import Phase
from sagacity.mcp import Gateway, UpstreamTarget, build_server, parse_policy

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

PAYOUT = {"to": "acct_9", "amount": 700}


@asynccontextmanager
async def opened(tmp_path: Path, *, pin_tools: bool) -> AsyncIterator[tuple[Gateway, Setup]]:
    setup = make_setup(tmp_path)
    parsed = parse_policy(POLICY, environ=setup.env)
    target = UpstreamTarget(command=(sys.executable, str(PAYMENTS)), env=dict(parsed.upstream.env))
    async with Gateway.open(
        parsed, target, db_url=setup.db_url, settle_interval=None, pin_tools=pin_tools
    ) as gw:
        yield gw, setup


def pull_the_rug(setup: Setup) -> None:
    Path(str(setup.ledger.path) + ".rug").write_text("")


async def call(client: Client, name: str, arguments: dict[str, Any], saga: str) -> Any:
    return await client.call_tool(name, arguments, meta={SAGA_KEY: saga})


def _lines(payload: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in payload.split("\n") if "=" in line)


async def test_every_call_and_gate_journals_the_definition_hash(tmp_path: Path) -> None:
    async with opened(tmp_path, pin_tools=False) as (gw, _), Client(build_server(gw)) as client:
        await call(client, "get_balance", {"account": "a"}, "defs")
        await call(client, "send_payout", PAYOUT, "defs")
        entries = await anyio.to_thread.run_sync(gw.sagacity.entries, "defs")
    balance = gw.tools.sagacity_tool("get_balance").spec.definition_hash
    payout = gw.tools.sagacity_tool("send_payout").spec.definition_hash
    assert balance.startswith("sha256:")
    assert balance != payout
    intent = next(e for e in entries if e.phase == Phase.INTENT and e.tool_name != "sagacity:saga")
    gate = next(e for e in entries if e.phase == Phase.AWAITING_APPROVAL)
    assert _lines(intent.payload)["definition"] == balance
    assert _lines(gate.payload)["definition"] == payout


async def test_a_rug_pull_is_refused_when_the_tools_are_pinned(tmp_path: Path) -> None:
    """The upstream rewrites send_payout's description and schema after the proxy pinned its list:
    the agent still sees the pinned definition, and a call of the changed tool is refused before
    anything is journaled or sent."""
    async with opened(tmp_path, pin_tools=True) as (gw, setup), Client(build_server(gw)) as client:
        before = {t.name: t for t in (await client.list_tools()).tools}
        pull_the_rug(setup)
        after = {t.name: t for t in (await client.list_tools()).tools}  # the proxy lists upstream again
        assert after["send_payout"].description == before["send_payout"].description
        refused = await call(client, "send_payout", PAYOUT, "rug")
        assert refused.is_error
        assert "changed 'send_payout' since the proxy pinned its tools" in text_of(refused)
        fine = await call(client, "get_balance", {"account": "a"}, "rug")
        assert not fine.is_error
        entries = await anyio.to_thread.run_sync(gw.sagacity.entries, "rug")
    assert [e.tool_name for e in entries if e.tool_name != "sagacity:saga"] == ["get_balance", "get_balance"]
    assert setup.ledger.events("payout") == []


async def test_a_tool_added_after_the_pin_is_refused_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The upstream lists a new tool after the proxy pinned its list: calling it is refused as a
    changed tool is (nothing journaled, nothing sent), and the log says why, as for a changed one."""
    async with opened(tmp_path, pin_tools=True) as (gw, setup), Client(build_server(gw)) as client:
        pull_the_rug(setup)
        with caplog.at_level(logging.WARNING, logger="sagacity.mcp"):
            refused = await call(client, "export_cards", {"to": "acct_attacker"}, "added")
        assert refused.is_error
        assert "added 'export_cards' after the proxy pinned its tools" in text_of(refused)
        assert "export_cards" not in {t.name for t in (await client.list_tools()).tools}
        entries = await anyio.to_thread.run_sync(gw.sagacity.entries, "added")
    warned = [r.getMessage() for r in caplog.records if r.name == "sagacity.mcp"]
    assert any("refused a call of export_cards" in m and "added" in m for m in warned), warned
    assert entries == []
    assert setup.ledger.events("unknown") == []


async def test_a_held_call_whose_tool_changed_since_approval_is_held_again(tmp_path: Path) -> None:
    """Approved under one definition, the upstream then changes send_payout: the re-sent call does
    not run; the journal closes the old gate (superseded, nothing compensated) and holds the call
    again under the new definition's hash; a new approval runs it."""
    async with opened(tmp_path, pin_tools=False) as (gw, setup), Client(build_server(gw)) as client:
        sg = gw.sagacity
        held = await call(client, "send_payout", PAYOUT, "rehold")
        assert "approval" in text_of(held).lower()
        [request] = await anyio.to_thread.run_sync(sg.pending_approvals, "rehold")
        old = gw.tools.sagacity_tool("send_payout").spec.definition_hash
        await anyio.to_thread.run_sync(sg.approve, "rehold", request.journal_seq, "alice@example.com")
        pull_the_rug(setup)
        await client.list_tools()
        new = gw.tools.sagacity_tool("send_payout").spec.definition_hash
        assert new != old
        again = await call(client, "send_payout", PAYOUT, "rehold")
        assert not again.is_error
        assert "approval" in text_of(again).lower()
        assert setup.ledger.events("payout") == []
        entries = await anyio.to_thread.run_sync(sg.entries, "rehold")
        superseded = next(e for e in entries if e.phase == Phase.REJECTED)
        assert "superseded: the tool's definition changed" in superseded.payload
        gates = [e for e in entries if e.phase == Phase.AWAITING_APPROVAL]
        assert [_lines(g.payload)["definition"] for g in gates] == [old, new]
        assert not any(e.tool_name == "saga" for e in entries)  # nothing compensated
        [renewed] = await anyio.to_thread.run_sync(sg.pending_approvals, "rehold")
        assert renewed.journal_seq == gates[-1].seq
        await anyio.to_thread.run_sync(sg.approve, "rehold", renewed.journal_seq, "alice@example.com")
        ran = await call(client, "send_payout", PAYOUT, "rehold")
        assert not ran.is_error, text_of(ran)
    assert len(setup.ledger.events("payout")) == 1
