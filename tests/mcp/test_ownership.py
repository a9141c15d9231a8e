"""Whose saga it is, decided from the journal by every proxy process on every call: the START's
principal. Another principal's saga answers exactly as a saga that does not exist, through a
second proxy on the same journal and after a restart, on every store several processes share;
an admin's rollback journals who asked. Real proxy processes, driven by the MCP SDK's client."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

from mcp_tools import Agent, Setup, agent, http_proxy, make_setup, stdio_params, text_of

from sagacity import Sagacity

pytestmark = pytest.mark.timeout(300)

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"
ROOT = "root-token-0123456789abcdefg"
OWN = ["sagacity:call", "sagacity:commit", "sagacity:rollback"]
PROXY_TOOLS = [("sagacity_status", {}), ("sagacity_commit", {}), ("sagacity_rollback", {"reason": "mine"})]


@pytest.fixture
def setup(durable_url: str, tmp_path: Path) -> Setup:
    """The tests' payments policy on a store several processes share, and agent tokens for
    alice, bob (every scope but admin) and root (admin)."""
    made = make_setup(tmp_path, durable_url)
    made.agent_tokens.write_text(
        json.dumps(
            {
                "tokens": {
                    ALICE: {"name": "alice@example.com", "scopes": OWN},
                    BOB: {"name": "bob@example.com", "scopes": OWN},
                    ROOT: {"name": "root@example.com", "scopes": ["sagacity:admin"]},
                }
            }
        )
    )
    return made


def _entries(setup: Setup, saga: str) -> list[Any]:
    with Sagacity(setup.db_url) as sg:
        return sg.entries(saga)


def _alice_starts(a: Agent, saga: str) -> None:
    """Alice's saga: a charge (undone by a refund) and a held payout to her IBAN."""
    charged = a.call("charge", {"customer": "cus-alice", "amount": 100}, saga=saga)
    assert not charged.is_error, text_of(charged)
    held = a.call("send_payout", {"to": "DE89370400440532013000", "amount": 900}, saga=saga)
    assert "AWAITING_APPROVAL" in text_of(held), text_of(held)


def _looks_unknown(b: Agent, saga: str) -> None:
    """Every call ``b`` makes in ``saga`` is refused as "no such saga", and the proxy's own tools
    answer word for word as for an id nobody used (a status that said NEW there would tell that
    the id is taken)."""
    unused = f"unused-{uuid.uuid4().hex[:8]}"
    for name, args in [*PROXY_TOOLS, ("charge", {"customer": "cus-bob", "amount": 5})]:
        answer = b.call(name, args, saga=saga)
        assert answer.is_error, (name, text_of(answer))
        assert text_of(answer).startswith("[NOT RUN]"), (name, text_of(answer))
        assert "no such saga" in text_of(answer), (name, text_of(answer))
        assert "DE89" not in text_of(answer)
        if name.startswith("sagacity_"):
            other = b.call(name, args, saga=unused)
            assert text_of(other).replace(unused, saga) == text_of(answer), name
            assert other.is_error == answer.is_error


def test_a_second_stdio_proxy_with_another_principal_cannot_touch_the_saga(setup: Setup) -> None:
    """Two stdio proxies on one journal, ``--principal alice`` and ``--principal bob``: bob's
    naming alice's saga reads nothing, journals nothing, refunds nothing."""
    saga = f"order-{uuid.uuid4().hex[:8]}"
    with agent(stdio_params(setup, "--principal", "alice@example.com"), "auto") as alice:
        _alice_starts(alice, saga)
        before = _entries(setup, saga)
        with agent(stdio_params(setup, "--principal", "bob@example.com"), "auto") as bob:
            _looks_unknown(bob, saga)
        assert _entries(setup, saga) == before
        assert setup.ledger.events("refund") == []
        status = alice.call("sagacity_status", {}, saga=saga)
        assert not status.is_error, text_of(status)
        assert status.structured_content["requests"][0]["input"] == json.dumps(
            {"amount": 900, "to": "DE89370400440532013000"}, separators=(",", ":")
        )


@pytest.fixture
def restarted(setup: Setup) -> Iterator[tuple[Setup, str, str]]:
    """Alice's saga made through one proxy process, which then stops; a new one serves on: its
    URL."""
    saga = f"order-{uuid.uuid4().hex[:8]}"
    auth = ("--agent-tokens-file", str(setup.agent_tokens))
    with (
        http_proxy(setup, "--settle-interval", "0", agent_auth=auth) as (url, _port),
        agent(url, "auto", token=ALICE) as alice,
    ):
        _alice_starts(alice, saga)
    with http_proxy(setup, "--settle-interval", "0", agent_auth=auth) as (url, _port):
        yield setup, saga, url


def test_after_a_restart_the_first_to_name_a_saga_does_not_get_it(restarted: tuple[Setup, str, str]) -> None:
    """After a restart bob names alice's saga first: every call, the rollback included, is the
    documented "[NOT RUN] ... no such saga" (never a protocol error); alice still has her saga."""
    setup, saga, url = restarted
    before = _entries(setup, saga)
    with agent(url, "auto", token=BOB) as bob:
        _looks_unknown(bob, saga)
    assert _entries(setup, saga) == before
    with agent(url, "auto", token=ALICE) as alice:
        status = alice.call("sagacity_status", {}, saga=saga)
        assert not status.is_error, text_of(status)
        assert status.structured_content["status"] == "AWAITING_APPROVAL"
        more = alice.call("charge", {"customer": "cus-alice", "amount": 7}, saga=saga)
        assert not more.is_error, text_of(more)


def test_an_admins_rollback_journals_who_asked(restarted: tuple[Setup, str, str]) -> None:
    """Root (``sagacity:admin``) rolls back alice's saga: it is undone, and the saga-level FAILED
    that starts the compensation names root before the reason."""
    setup, saga, url = restarted
    with agent(url, "auto", token=ROOT) as root:
        answer = root.call("sagacity_rollback", {"reason": "fraud suspected"}, saga=saga)
        assert not answer.is_error, text_of(answer)
    [started] = [e for e in _entries(setup, saga) if e.tool_name == "saga" and e.phase == "FAILED"]
    assert started.payload == "RollbackRequested: asked by root@example.com: fraud suspected"
    assert len(setup.ledger.events("refund")) == 1


@pytest.mark.parametrize("saga", ["order-1\n", "order-1\r\n", "order\u2028x", "order\x85x"])
def test_a_saga_id_that_ends_a_line_is_refused(tmp_path: Path, saga: str) -> None:
    """A ``_meta`` saga id holding a line break, at the end too, is refused as the message says
    ("without control characters"), and nothing is journaled."""
    setup = make_setup(tmp_path)
    with agent(stdio_params(setup, "--principal", "alice@example.com"), "auto") as a:
        answer = a.call("get_balance", {"account": "acct_1"}, saga=saga)
        assert answer.is_error
        assert "without control characters" in text_of(answer), text_of(answer)
    with Sagacity(setup.db_url) as sg:
        assert sg.saga_ids() == []


def test_two_principals_racing_for_an_unused_id_through_two_proxies(setup: Setup) -> None:
    """Alice and bob, each through their own stdio proxy, name the same unused saga ids at the
    same moment: each saga is the one whose START landed first, and the other principal's call is
    "no such saga" with nothing of it journaled (the read that finds nothing is no claim: the first
    append is the fence)."""
    sagas = [f"race-{uuid.uuid4().hex[:8]}" for _ in range(12)]
    answers: dict[str, dict[str, Any]] = {"alice": {}, "bob": {}}
    with (
        agent(stdio_params(setup, "--principal", "alice"), "auto") as alice,
        agent(stdio_params(setup, "--principal", "bob"), "auto") as bob,
    ):
        barrier = threading.Barrier(2)

        def drive(name: str, client: Agent) -> None:
            for saga in sagas:
                barrier.wait(timeout=60)
                charge = {"customer": f"cus-{name}", "amount": 3}
                answers[name][saga] = client.call("charge", charge, saga=saga)

        threads = [threading.Thread(target=drive, args=(n, c)) for n, c in [("alice", alice), ("bob", bob)]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=240)
    for saga in sagas:
        entries = _entries(setup, saga)
        owner = json.loads(entries[0].input)["principal"]
        loser = "bob" if owner == "alice" else "alice"
        assert not answers[owner][saga].is_error, text_of(answers[owner][saga])
        assert "no such saga" in text_of(answers[loser][saga]), text_of(answers[loser][saga])
        customers = {json.loads(e.input)["customer"] for e in entries if e.tool_name == "charge"}
        assert customers == {f"cus-{owner}"}, (saga, [(e.seq, e.tool_name, e.input) for e in entries])
        assert [e.seq for e in entries if e.tool_name == "sagacity:saga" and e.phase == "INTENT"] == [1]


def test_naming_another_principals_saga_does_not_make_this_proxy_sweep_it(setup: Setup) -> None:
    """Bob's proxy, told alice's saga id in vain, does not take it up: when alice's payout is
    approved, bob's proxy's sweep (every 0.2 s here) leaves it alone, and it runs where alice
    asks for it, once."""
    saga = f"order-{uuid.uuid4().hex[:8]}"
    with agent(stdio_params(setup, "--principal", "alice", "--settle-interval", "0"), "auto") as alice:
        _alice_starts(alice, saga)
        with agent(stdio_params(setup, "--principal", "bob", "--settle-interval", "0.2"), "auto") as bob:
            assert "no such saga" in text_of(bob.call("sagacity_status", {}, saga=saga))
            with Sagacity(setup.db_url) as sg:
                [request] = sg.pending_approvals(saga)
                sg.approve(saga, request.journal_seq, "carol@example.com")
            time.sleep(2)  # ten of bob's sweeps
            assert setup.ledger.events("payout") == []
        status = alice.call("sagacity_status", {}, saga=saga)
        assert not status.is_error, text_of(status)
    assert len(setup.ledger.events("payout")) == 1
