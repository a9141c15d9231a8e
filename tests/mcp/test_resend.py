"""A held call sent again, from many connections at once, over both transports and across proxy
restarts: it runs once, and every copy is answered with its result from the journal (issue #26).

The proxy is a real process (``sagacity mcp proxy``) in front of the real payments server; the
agents are the MCP SDK's own clients, each on its own HTTP connection or its own stdio proxy."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

import anyio
from mcp_tools import (
    SAGA_KEY,
    agent,
    http_client,
    http_proxy,
    make_setup,
    sagacity_cli,
    stdio_params,
    text_of,
)

from sagacity import Phase, Sagacity, SagaStatus

pytestmark = pytest.mark.timeout(240)

CONNECTIONS = 6


async def _from_many(url: str, saga: str, arguments: dict[str, Any]) -> list[Any]:
    """The same call sent at once from CONNECTIONS clients, each with its own HTTP connection (half
    at protocol 2025-11-25, with a session each, half at 2026-07-28), all naming the saga."""
    answers: list[Any] = [None] * CONNECTIONS

    async def one(n: int) -> None:
        async with http_client(url, "legacy" if n % 2 else "auto", read_timeout_seconds=120) as client:
            answers[n] = await client.call_tool("send_payout", arguments, meta={SAGA_KEY: saga})

    async with anyio.create_task_group() as tg:
        for n in range(CONNECTIONS):
            tg.start_soon(one, n)
    return answers


def test_a_held_call_runs_once_however_often_and_wherever_it_is_sent_again(tmp_path: Path) -> None:
    setup = make_setup(tmp_path)
    saga = f"resend-{uuid.uuid4().hex[:8]}"
    arguments = {"to": f"DE-{saga}", "amount": 250}

    def payouts() -> list[dict[str, Any]]:
        return [e for e in setup.ledger.events("payout") if e["to"] == arguments["to"]]

    answers: list[Any] = []
    with http_proxy(setup, "--settle-interval", "0") as (url, _):
        with agent(url, "auto") as a:
            held = a.call("send_payout", arguments, saga=saga)
        assert text_of(held).startswith("[AWAITING_APPROVAL]")
        with Sagacity(setup.db_url) as sg:
            [request] = sg.pending_approvals(saga)
        approved = sagacity_cli(
            "approvals", "approve", saga, str(request.journal_seq), "--as", "alice@example.com",
            "--db", setup.db_url,
        )  # fmt: skip
        assert approved.returncode == 0, approved.stderr
        # Approved, not yet run: six copies at once. One runs it; the others wait for it and get
        # its result, none opens a new request.
        answers += anyio.run(_from_many, url, saga, arguments)
        assert len(payouts()) == 1

    # Another proxy process over the same journal: it remembers nothing, the journal says it all.
    with http_proxy(setup, "--settle-interval", "0") as (url, _):
        answers += anyio.run(_from_many, url, saga, arguments)

    # Over stdio each client starts a proxy process of its own.
    for mode in ("legacy", "auto"):
        with agent(stdio_params(setup, "--settle-interval", "0"), mode) as a:
            answers.append(a.call("send_payout", arguments, saga=saga))

    assert [a.is_error for a in answers] == [False] * len(answers)
    [payout_id] = {a.structured_content["payout_id"] for a in answers}
    assert [p["payout_id"] for p in payouts()] == [payout_id]
    with Sagacity(setup.db_url) as sg:
        entries = sg.entries(saga)
        assert [e.seq for e in entries if e.phase == Phase.AWAITING_APPROVAL] == [request.journal_seq]
        resumed = [e for e in entries if e.phase == Phase.INTENT and e.tool_name == "send_payout"]
        assert len(resumed) == 1
        assert sg.pending_approvals(saga) == []
        assert sg.status(saga) is SagaStatus.COMPLETED
        assert sg.verify(saga).valid


def test_other_arguments_are_still_a_new_request(tmp_path: Path) -> None:
    """Only the very same call is answered from the gate: another amount is held for its own
    approval, after a restart too."""
    setup = make_setup(tmp_path)
    saga = f"other-{uuid.uuid4().hex[:8]}"
    first = {"to": f"DE-{saga}", "amount": 10}
    with http_proxy(setup, "--settle-interval", "0") as (url, _), agent(url, "auto") as a:
        a.call("send_payout", first, saga=saga)
        with Sagacity(setup.db_url) as sg:
            [request] = sg.pending_approvals(saga)
            sg.approve(saga, request.journal_seq, "alice@example.com")
        assert "payout_id" in a.call("send_payout", first, saga=saga).structured_content
    with http_proxy(setup, "--settle-interval", "0") as (url, _), agent(url, "auto") as a:
        other = a.call("send_payout", {**first, "amount": 11}, saga=saga)
        assert text_of(other).startswith("[AWAITING_APPROVAL]")
    with Sagacity(setup.db_url) as sg:
        [pending] = sg.pending_approvals(saga)
        assert pending.input == f'{{"amount":11,"to":"DE-{saga}"}}'
    assert len(setup.ledger.events("payout")) == 1
