"""The CLI's ``--json`` and the HTTP API on one journal print the same JSON, field for field.

Both surfaces read the facade's read models and print them with ``sagacity._wire``; these tests
hold them to it by asking each the same question. The CLI runs in a worker thread (its blocking
calls refuse to run on the test's event loop) against the SQLite file the server's Sagacity uses.
Seconds-ago fields (``waitingSeconds``, ``ageSeconds``) move between the two reads: they are checked
to be non-negative numbers and then set aside; everything else must be equal.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest
from click.testing import CliRunner

from sagacity import Phase, Sagacity
from sagacity.chain import GENESIS_HASH, entry_hash
from sagacity.cli import main

pytestmark = pytest.mark.anyio

# Tokens of conftest.TOKENS: alice and bob approve, carol audits.
ALICE = {"Authorization": "Bearer alice-token-0123456789"}
BOB = {"Authorization": "Bearer bob-token-0123456789ab"}
CAROL = {"Authorization": "Bearer carol-token-0123456789"}
MOVING = {"waitingSeconds", "ageSeconds"}


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/journal.db"


@pytest.fixture
def sg(db_url: str, tools: ModuleType) -> Iterator[Sagacity]:
    """The server's Sagacity, on a file the CLI can open too."""
    with Sagacity(db_url) as sagacity:
        yield sagacity


Cli = Callable[..., Any]


@pytest.fixture
def cli(db_url: str) -> Cli:
    """``await cli(*args, exit_code=0)``: the command's ``--json`` output, parsed."""

    async def run(*args: str, exit_code: int = 0) -> Any:
        command = [*args, "--json", "--db", db_url]
        result = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(main, command))
        assert result.exit_code == exit_code, result.output
        return json.loads(result.stdout)

    return run


def settled(value: Any) -> Any:
    """``value`` with the seconds-ago fields checked and set aside."""
    if isinstance(value, list):
        return [settled(v) for v in value]
    if isinstance(value, dict):
        for key in MOVING & value.keys():
            assert isinstance(value[key], float)
            assert value[key] >= 0
        return {k: None if k in MOVING else settled(v) for k, v in value.items()}
    return value


def same_but(body: dict[str, Any], *names: str) -> dict[str, Any]:
    """A decision or resume body of another saga, with what names that saga or its moment left out."""
    assert "decidedAt" not in names or isinstance(body["decidedAt"], str)
    return {k: v for k, v in body.items() if k not in names}


async def get(client: httpx.AsyncClient, path: str, headers: dict[str, str]) -> Any:
    response = await client.get(f"/sagacity{path}", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


async def test_pending_approvals_and_one_request(
    client: httpx.AsyncClient, cli: Cli, gate: Callable[..., Any], sg: Sagacity
) -> None:
    """`approvals list` = GET /approvals (all and one saga), `approvals show` = GET /requests/..."""
    seq = await gate("order-1")
    payout = await gate("payout", agent="four_eyes")
    await client.post(f"/sagacity/approve/payout/{payout}", headers=ALICE)
    http = await get(client, "/approvals", ALICE)
    assert all(a.pop("mayDecide") is True for a in http)  # the caller's answer: the CLI names no caller
    assert settled((await cli("approvals", "list"))["approvals"]) == settled(http)
    assert {(a["sagaId"], tuple(a["approvers"]), a["approvalsRequired"]) for a in http} == {
        ("order-1", (), 1),
        ("payout", ("alice@example.com",), 2),
    }
    one = await get(client, "/approvals/payout", ALICE)
    assert settled((await cli("approvals", "list", "--saga", "payout"))["approvals"]) == settled(one)
    detail = await get(client, f"/requests/order-1/{seq}", ALICE)
    assert detail.pop("mayDecide") is True
    assert settled(await cli("approvals", "show", "order-1", str(seq))) == settled(detail)
    assert [e["phase"] for e in detail["journal"]] == [
        "INTENT",
        "INTENT",
        "EXECUTED",
        "AWAITING_APPROVAL",
        "EXECUTED",
    ]  # START ... gate, END


async def test_saga_detail_and_list_pages(
    client: httpx.AsyncClient, cli: Cli, gate: Callable[..., Any], tools: ModuleType, sg: Sagacity
) -> None:
    """`sagas show` = GET /sagas/{id} (decisions and pending requests included); `sagas list`
    = GET /sagas, page by page."""
    for n in range(3):
        await anyio.to_thread.run_sync(lambda n=n: sg.run(f"done-{n}", tools.srv_reserve, f"SKU-{n}", 1))
    payout = await gate("payout", agent="four_eyes")
    await client.post(f"/sagacity/approve/payout/{payout}", headers=BOB)
    detail = await get(client, "/sagas/payout", CAROL)
    assert settled(await cli("sagas", "show", "payout")) == settled(detail)
    assert [(d["decides"], d["approver"]) for d in detail["decisions"]] == [(payout, "bob@example.com")]
    first = await get(client, "/sagas?limit=2", CAROL)
    assert await cli("sagas", "list", "--limit", "2") == first
    assert first["next"] is not None
    second = await get(client, f"/sagas?limit=2&after={first['next']}", CAROL)
    assert await cli("sagas", "list", "--limit", "2", "--after", first["next"]) == second
    assert len(first["sagas"]) + len(second["sagas"]) == 4


def crashed_intent(db: Path) -> None:
    """An INTENT with no outcome, three days old (so a finding's "started 3d 0h ago" holds still),
    written straight into the shared table as another implementation would."""
    started = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=3)
    row = ("crashed", 1, "srv_reserve", str(Phase.INTENT), '{"sku":"A","quantity":1}', "", started)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO side_effect_journal"
            " (saga_id, seq, tool_name, phase, input, payload, timestamp, hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*row[:6], f"{started:%Y-%m-%d %H:%M:%S.%f}", entry_hash(GENESIS_HASH, *row)),
        )


async def test_in_doubt_calls_and_doctor(
    client: httpx.AsyncClient, cli: Cli, sg: Sagacity, tmp_path: Path
) -> None:
    """`sagas in-doubt` = GET /in-doubt and `doctor` = GET /doctor, findings and all."""
    crashed_intent(tmp_path / "journal.db")
    http = await get(client, "/in-doubt", CAROL)
    assert settled(await cli("sagas", "in-doubt", exit_code=1)) == settled(http)
    assert [(c["sagaId"], c["kind"]) for c in http] == [("crashed", "call")]
    doctor = await get(client, "/doctor?olderThan=0", CAROL)
    assert await cli("doctor", "--older-than", "0s", exit_code=1) == doctor
    assert [(f["kind"], f["sagaId"]) for f in doctor["findings"]] == [("in_doubt_call", "crashed")]


async def test_decisions(client: httpx.AsyncClient, cli: Cli, gate: Callable[..., Any]) -> None:
    """Approving and rejecting twin sagas, one through each surface, gives the same body."""
    seqs = [await gate(saga, agent="four_eyes") for saga in ("a-cli", "a-http", "r-cli", "r-http")]
    assert len(set(seqs)) == 1
    seq = str(seqs[0])
    by_cli = await cli("approvals", "approve", "a-cli", seq, "--as", "alice@example.com")
    by_http = (await client.post(f"/sagacity/approve/a-http/{seq}", headers=ALICE)).json()
    assert same_but(by_cli, "sagaId", "decidedAt") == same_but(by_http, "sagaId", "decidedAt")
    assert (by_http["approvers"], by_http["approvalsRequired"], by_http["pending"]) == (
        ["alice@example.com"],
        2,
        True,
    )
    reason = ["--reason", "too much"]
    by_cli = await cli("approvals", "reject", "r-cli", seq, "--as", "bob@example.com", *reason)
    response = await client.post(f"/sagacity/reject/r-http/{seq}", headers=BOB, json={"reason": "too much"})
    by_http = response.json()
    assert same_but(by_cli, "sagaId", "decidedAt") == same_but(by_http, "sagaId", "decidedAt")
    assert (by_http["approved"], by_http["reason"], by_http["status"]) == (False, "too much", "REJECTED")


async def test_resume_results(client: httpx.AsyncClient, cli: Cli, gate: Callable[..., Any]) -> None:
    """A resume that completes (200) and one whose tool fails (409) read the same on both surfaces."""
    for agent, sagas in (("transfer", ("ok-cli", "ok-http")), ("doomed", ("bad-cli", "bad-http"))):
        seqs = {await gate(saga, agent=agent) for saga in sagas}
        assert len(seqs) == 1
        seq = seqs.pop()
        for saga in sagas:
            await client.post(f"/sagacity/approve/{saga}/{seq}", headers=ALICE)
        request = (await get(client, f"/requests/{sagas[1]}/{seq}", ALICE))["input"]
        fails = agent == "doomed"
        by_cli = await cli("approvals", "resume", sagas[0], str(seq), exit_code=1 if fails else 0)
        response = await client.post(
            f"/sagacity/resume/{sagas[1]}/{seq}", headers=ALICE, json={"payload": request}
        )
        assert response.status_code == (409 if fails else 200)
        assert same_but(by_cli, "sagaId") == same_but(response.json(), "sagaId")
    assert by_cli["reason"] == "RuntimeError: bank said no: closed"
    assert [step["toolName"] for step in by_cli["compensation"]] == ["srv_reserve"]
