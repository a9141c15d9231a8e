"""The API over every store (memory, SQLite, PostgreSQL), and mounted inside a user's own FastAPI app."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import anyio
import httpx
import pytest
from fastapi import FastAPI

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.server import TokenAuth, create_app

pytestmark = pytest.mark.anyio

TOKENS = {
    "alice-token-0123456789": {"name": "alice@example.com", "roles": ["approver"]},
    "carol-token-0123456789": {"name": "carol@example.com", "roles": ["auditor"]},
}
ALICE = {"Authorization": "Bearer alice-token-0123456789"}
CAROL = {"Authorization": "Bearer carol-token-0123456789"}
PAYLOAD = '{"amount":"100.00","to":"ACME"}'


@pytest.fixture
def store_sg(store_url: str, tools: ModuleType) -> Iterator[Sagacity]:
    with Sagacity(store_url) as sagacity:
        yield sagacity


async def test_approve_resume_and_reject_on_every_store(store_sg: Sagacity, tools: ModuleType) -> None:
    """Approve+resume completes one saga and reject compensates another, on every store."""
    sg = store_sg
    for saga_id in ("pay-1", "pay-2"):
        await anyio.to_thread.run_sync(lambda s=saga_id: sg.run(s, tools.transfer))
    transport = httpx.ASGITransport(create_app(sg, auth=TokenAuth(TOKENS)))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        listed = (await c.get("/sagacity/approvals", headers=ALICE)).json()
        assert sorted(i["sagaId"] for i in listed) == ["pay-1", "pay-2"]
        assert (await c.post("/sagacity/approve/pay-1/4", headers=ALICE)).status_code == 200
        resumed = await c.post("/sagacity/resume/pay-1/4", json={"payload": PAYLOAD}, headers=ALICE)
        rejected = await c.post("/sagacity/reject/pay-2/4", json={"reason": "no"}, headers=ALICE)
        verify = (await c.get("/sagacity/audit/pay-1/verify", headers=CAROL)).json()
        page = (await c.get("/sagacity/sagas", headers=CAROL)).json()
    assert resumed.json()["status"] == "COMPLETED"
    assert rejected.json()["status"] == "REJECTED"
    assert verify["valid"] is True
    assert {s["sagaId"]: s["status"] for s in page["sagas"]} == {"pay-1": "COMPLETED", "pay-2": "REJECTED"}
    assert (await sg.status_async("pay-2")) is SagaStatus.REJECTED
    assert [e.payload for e in (await sg.entries_async("pay-1")) if e.phase == Phase.APPROVED] == [
        "approver=alice@example.com"
    ]
    assert tools.EFFECTS.count("wired 100.00 to ACME") == 1
    assert "released SKU-1" in tools.EFFECTS


async def test_mounted_in_a_users_app(sg: Sagacity, tools: ModuleType) -> None:
    """Mounted under a user's prefix, the routes, the OpenAPI schema and the dashboard redirect follow it."""
    await anyio.to_thread.run_sync(lambda: sg.run("m-1", tools.transfer))
    parent = FastAPI()

    @parent.get("/health")
    def health() -> dict[str, str]:
        return {"ok": "yes"}

    parent.mount("/ops", create_app(sg, auth=TokenAuth(TOKENS)))
    transport = httpx.ASGITransport(parent)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        assert (await c.get("/health")).json() == {"ok": "yes"}
        approvals = await c.get("/ops/sagacity/approvals", headers=ALICE)
        unauthenticated = await c.get("/ops/sagacity/approvals")
        home = await c.get("/ops/sagacity")
        ui = await c.get("/ops/sagacity/ui/")
        schema = await c.get("/ops/sagacity/openapi.json")
    assert [i["sagaId"] for i in approvals.json()] == ["m-1"]
    assert unauthenticated.status_code == 401
    assert home.headers["location"] == "http://testserver/ops/sagacity/ui/"
    assert ui.status_code == 200
    assert schema.status_code == 200


async def test_prefix_and_dashboard_are_configurable(sg: Sagacity) -> None:
    """prefix='' puts the routes at the root; dashboard=False serves no UI."""
    app = create_app(sg, auth=TokenAuth(TOKENS), prefix="", dashboard=False)
    transport = httpx.ASGITransport(app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        assert (await c.get("/approvals", headers=ALICE)).status_code == 200
        assert (await c.get("/ui/")).status_code == 404
        assert (await c.get("/openapi.json")).status_code == 200
