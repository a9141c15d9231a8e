"""The kill switch over HTTP: admins set it (journaled under their name), auditors read it."""

from __future__ import annotations

import httpx
import pytest

from sagacity import Sagacity
from sagacity.guardrails import SWITCH_SAGA

pytestmark = pytest.mark.anyio

ROOT = {"Authorization": "Bearer root-token-0123456789a"}
ALICE = {"Authorization": "Bearer alice-token-0123456789"}
CAROL = {"Authorization": "Bearer carol-token-0123456789"}


async def test_an_admin_halts_and_lifts_and_each_change_is_journaled(
    client: httpx.AsyncClient, sg: Sagacity
) -> None:
    body = {"state": "halt", "tool": "srv_wire", "ttl": 600, "reason": "incident 42"}
    set_ = await client.post("/sagacity/switch", json=body, headers=ROOT)
    assert set_.status_code == 200, set_.text
    assert set_.json()["by"] == "root@example.com"
    assert set_.json()["until"] is not None
    listed = await client.get("/sagacity/switch", headers=CAROL)
    assert [(s["state"], s["target"]) for s in listed.json()] == [("halt", "srv_wire")]
    lifted = await client.post("/sagacity/switch", json={"state": "lift", "tool": "srv_wire"}, headers=ROOT)
    assert lifted.status_code == 200
    assert (await client.get("/sagacity/switch", headers=CAROL)).json() == []
    changes = await sg.entries_async(SWITCH_SAGA)
    assert [e.payload.split("\n")[0] for e in changes] == ["approver=root@example.com"] * 2


async def test_only_an_admin_may_set_it_and_bad_bodies_are_refused(client: httpx.AsyncClient) -> None:
    assert (await client.post("/sagacity/switch", json={"state": "halt"}, headers=ALICE)).status_code == 403
    assert (await client.post("/sagacity/switch", json={"state": "halt"}, headers=CAROL)).status_code == 403
    for body, says in [
        ({"state": "off"}, "state must be"),
        ({"state": "halt", "ttl": -1}, "ttl must be"),
        ({"state": "halt", "ttl": 1e300}, "ttl must be"),
        ({"state": "halt", "tool": "a", "agent": "b"}, "not both"),
        ({"state": "halt", "reason": "two\nlines"}, "one line"),
    ]:
        response = await client.post("/sagacity/switch", json=body, headers=ROOT)
        assert response.status_code == 400, (body, response.text)
        assert says in response.json()["error"]
