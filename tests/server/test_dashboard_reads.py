"""The reads behind the dashboard's conveniences (#25): a request's context and tool description,
a saga's timeline fields, and GET /activity (decisions and pending approvals over time)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest

from sagacity import Sagacity, acting_as

pytestmark = pytest.mark.anyio

ALICE = {"Authorization": "Bearer alice-token-0123456789"}
BOB = {"Authorization": "Bearer bob-token-0123456789ab"}
CAROL = {"Authorization": "Bearer carol-token-0123456789"}
NOBODY = {"Authorization": "Bearer nobody-token-012345678"}


async def get(client: httpx.AsyncClient, path: str, headers: dict[str, str]) -> Any:
    response = await client.get(f"/sagacity{path}", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def parsed(ts: str) -> datetime:
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")


async def test_a_request_carries_its_tools_description_and_its_sagas_context(
    client: httpx.AsyncClient, sg: Sagacity, tools: ModuleType
) -> None:
    """GET /requests gives the held tool's docstring (as registered in the serving process), the
    saga's principal, start time and the calls made before the request."""

    def started_for_mallory() -> Any:
        with acting_as("mallory@example.com"):
            return sg.run("ctx-1", tools.transfer)

    result = await anyio.to_thread.run_sync(started_for_mallory)
    seq = result.awaiting[0].journal_seq
    detail = await get(client, f"/requests/ctx-1/{seq}", ALICE)
    assert detail["toolDescription"] == "Send money; cannot be undone, so it waits for a human."
    assert [(c["toolName"], c["status"]) for c in detail["calls"]] == [("srv_reserve", "EXECUTED")]
    call = detail["calls"][0]
    assert parsed(detail["startedAt"]) <= parsed(call["startedAt"]) <= parsed(call["finishedAt"])
    assert detail["principal"] == "mallory@example.com"
    assert detail["requester"] == "mallory@example.com"


async def test_an_unregistered_tool_has_no_description_rather_than_a_guess(
    client: httpx.AsyncClient, sg: Sagacity, tools: ModuleType
) -> None:
    """A request for a tool this process has not registered says null, not an empty docstring."""
    seq = (await anyio.to_thread.run_sync(lambda: sg.run("ctx-2", tools.transfer))).awaiting[0].journal_seq
    from sagacity.tools import registry

    spec = registry.find("srv_wire")
    assert spec is not None
    registry.unregister("srv_wire")
    try:
        detail = await get(client, f"/requests/ctx-2/{seq}", ALICE)
    finally:
        registry.register(spec)
    assert detail["toolDescription"] is None
    assert detail["toolImported"] is False


async def test_a_saga_reads_with_its_calls_decisions_and_compensations_timed(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """GET /sagas/{id} gives each call's start and finish, each decision's principal and time,
    and each compensation with the call it undoes: a timeline needs nothing else."""
    seq = await gate("tl-1")
    response = await client.post(
        f"/sagacity/reject/tl-1/{seq}", json={"reason": "wrong account"}, headers=ALICE
    )
    assert response.status_code == 200, response.text
    saga = await get(client, "/sagas/tl-1", CAROL)
    (call,) = saga["calls"]
    assert call["toolName"] == "srv_reserve"
    assert call["finishedAt"] is not None
    (gate_body,) = saga["gates"]
    assert gate_body["journalSeq"] == seq
    assert gate_body["status"] == "REJECTED"
    (decision,) = saga["decisions"]
    assert (decision["phase"], decision["approver"], decision["decides"]) == (
        "REJECTED",
        "alice@example.com",
        seq,
    )
    assert parsed(decision["decidedAt"]) >= parsed(gate_body["requestedAt"])
    (comp,) = saga["compensations"]
    assert comp["toolName"] == "srv_reserve"
    assert comp["outcome"] == "COMPENSATED"
    assert parsed(comp["startedAt"]) <= parsed(comp["finishedAt"])
    assert parsed(decision["decidedAt"]) <= parsed(comp["startedAt"])
    executed = next(e for e in saga["entries"] if e["phase"] == "EXECUTED" and e["toolName"] == "srv_reserve")
    assert comp["compensatesSeq"] == executed["seq"]
    intent = next(e for e in saga["entries"] if e["seq"] == comp["seq"])
    assert (intent["phase"], intent["payload"]) == ("INTENT", f"compensates seq={executed['seq']}")


async def test_activity_counts_decisions_and_pending_requests(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """GET /activity: 24 buckets over the window; approvals and rejections in the bucket they
    were journaled in, and the requests still waiting counted at the end of the last bucket."""
    first = await gate("act-1")
    await gate("act-2")
    third = await gate("act-3")
    await client.post(f"/sagacity/approve/act-1/{first}", headers=ALICE)
    await client.post(f"/sagacity/reject/act-3/{third}", json={"reason": "no"}, headers=BOB)
    body = await get(client, "/activity", ALICE)
    assert len(body["buckets"]) == 24
    assert body["bucketSeconds"] == 3600
    assert body["complete"] is True
    assert body["sagasRead"] == 3
    assert sum(b["approved"] for b in body["buckets"]) == 1
    assert sum(b["rejected"] for b in body["buckets"]) == 1
    last = body["buckets"][-1]
    assert (last["approved"], last["rejected"]) == (1, 1)
    assert last["pending"] == 2  # act-1 (approved, not yet resumed) and act-2 still wait
    assert parsed(body["until"]) <= datetime.now(UTC).replace(tzinfo=None)
    week = await get(client, "/activity?hours=168", ALICE)
    assert week["bucketSeconds"] == 7 * 3600


@pytest.mark.parametrize("query", ["hours=0", "hours=x", "hours=+3", "hours=99999"])
async def test_activity_refuses_a_bad_window(client: httpx.AsyncClient, query: str) -> None:
    response = await client.get(f"/sagacity/activity?{query}", headers=ALICE)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("hours:")


async def test_activity_is_for_approvers(client: httpx.AsyncClient) -> None:
    """Authenticated like the queue: no token 401, a token without the approver role 403."""
    assert (await client.get("/sagacity/activity")).status_code == 401
    assert (await client.get("/sagacity/activity", headers=NOBODY)).status_code == 403
    assert (await client.get("/sagacity/activity", headers=CAROL)).status_code == 403
