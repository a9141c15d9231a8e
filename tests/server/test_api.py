"""The SPEC §7 routes in-process: shapes, the principal as approver, four eyes, refusals, compensation."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest

from sagacity import Phase, Sagacity, SagaStatus, acting_as
from sagacity._payloads import sha256_hex

pytestmark = pytest.mark.anyio

# Tokens of conftest.TOKENS: alice and bob approve, carol audits, root is admin.
ALICE = {"Authorization": "Bearer alice-token-0123456789"}
BOB = {"Authorization": "Bearer bob-token-0123456789ab"}
CAROL = {"Authorization": "Bearer carol-token-0123456789"}
ROOT = {"Authorization": "Bearer root-token-0123456789a"}
PAYLOAD = '{"amount":"100.00","to":"ACME"}'


async def decisions(sg: Sagacity, saga_id: str, phase: Phase) -> list[str]:
    """Payloads of the saga's decision entries in ``phase``."""
    entries = await sg.entries_async(saga_id)
    return [e.payload for e in entries if e.phase == phase and e.tool_name == "approval-gate"]


async def test_approvals_list_has_the_java_fields_and_more(
    client: httpx.AsyncClient, gate: Callable[..., Any]
) -> None:
    """GET /approvals lists each pending request with SPEC §7's fields plus approvals and expiry."""
    seq = await gate("order-1")
    response = await client.get("/sagacity/approvals", headers=ALICE)
    assert response.status_code == 200
    [item] = response.json()
    assert item["sagaId"] == "order-1"
    assert item["journalSeq"] == seq
    assert item["toolName"] == "srv_wire"
    assert item["input"] == PAYLOAD
    assert item["inputHash"] == sha256_hex(PAYLOAD)
    assert item["approvalsRequired"] == 1
    assert item["approvers"] == []
    assert item["readyToResume"] is False
    assert item["expired"] is False
    assert item["createdAt"].endswith("Z")
    assert item["expiresAt"] > item["createdAt"]


async def test_saga_approvals_lists_one_saga_and_404s_an_unknown_one(
    client: httpx.AsyncClient, gate: Callable[..., Any]
) -> None:
    """GET /approvals/{sagaId} lists that saga's requests; an unknown saga is a JSON 404."""
    await gate("order-1")
    await gate("order-2")
    response = await client.get("/sagacity/approvals/order-2", headers=ALICE)
    assert [i["sagaId"] for i in response.json()] == ["order-2"]
    missing = await client.get("/sagacity/approvals/no-such-saga", headers=ALICE)
    assert missing.status_code == 404
    assert "no-such-saga" in missing.json()["error"]


async def test_request_detail_carries_the_journal_so_far(
    client: httpx.AsyncClient, gate: Callable[..., Any]
) -> None:
    """GET /requests/{sagaId}/{seq} gives an approver the request with the saga's journal."""
    seq = await gate("order-1")
    response = await client.get(f"/sagacity/requests/order-1/{seq}", headers=ALICE)
    assert response.status_code == 200
    body = response.json()
    assert [e["phase"] for e in body["journal"]] == [
        "INTENT",
        "INTENT",
        "EXECUTED",
        "AWAITING_APPROVAL",
        "EXECUTED",
    ]  # START ... gate, END
    assert body["sagaStatus"] == "AWAITING_APPROVAL"
    gone = await client.get(f"/sagacity/requests/order-1/{seq + 5}", headers=ALICE)
    assert gone.status_code == 404
    assert gone.json()["journalSeq"] == seq + 5


async def test_approver_journaled_is_the_principal_not_the_body(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """An approval is journaled as approver=<authenticated name>; a Java client's body name is ignored."""
    seq = await gate("order-1")
    response = await client.post(
        f"/sagacity/approve/order-1/{seq}", json={"approver": "mallory"}, headers=ALICE
    )
    assert response.status_code == 200
    body = response.json()
    assert body["sagaId"] == "order-1"
    assert body["journalSeq"] == seq
    assert body["approved"] is True
    assert body["approverIdentity"] == "alice@example.com"
    assert body["decidedAt"].endswith("Z")
    assert (await decisions(sg, "order-1", Phase.APPROVED)) == ["approver=alice@example.com"]


async def test_approve_then_resume_completes(
    client: httpx.AsyncClient, sg: Sagacity, tools: ModuleType, gate: Callable[..., Any]
) -> None:
    """Approve then resume with the exact payload runs the tool once: 200 COMPLETED with its result."""
    seq = await gate("order-1")
    await client.post(f"/sagacity/approve/order-1/{seq}", headers=ALICE)
    response = await client.post(f"/sagacity/resume/order-1/{seq}", json={"payload": PAYLOAD}, headers=ALICE)
    assert response.status_code == 200
    assert response.json() == {"sagaId": "order-1", "status": "COMPLETED", "result": "wire 100.00->ACME"}
    assert tools.EFFECTS == ["reserved SKU-1", "wired 100.00 to ACME"]
    assert (await sg.status_async("order-1")) is SagaStatus.COMPLETED
    resumed = [e.payload for e in (await sg.entries_async("order-1")) if e.payload.startswith("resumes")]
    assert resumed == [f"resumes seq={seq} by=alice@example.com"]  # who pressed resume, from the token
    again = await client.post(f"/sagacity/resume/order-1/{seq}", json={"payload": PAYLOAD}, headers=ALICE)
    assert again.status_code == 404
    assert tools.EFFECTS.count("wired 100.00 to ACME") == 1


async def test_resume_without_approval_is_409(
    client: httpx.AsyncClient, tools: ModuleType, gate: Callable[..., Any]
) -> None:
    """Resuming before anyone approved is refused with 409 {sagaId, status, reason}; nothing runs."""
    seq = await gate("order-1")
    response = await client.post(f"/sagacity/resume/order-1/{seq}", json={"payload": PAYLOAD}, headers=ALICE)
    assert response.status_code == 409
    body = response.json()
    assert body["sagaId"] == "order-1"
    assert body["status"] == "AWAITING_APPROVAL"
    assert "no approval" in body["reason"]
    assert tools.EFFECTS == ["reserved SKU-1"]


async def test_stale_payload_is_409_and_compensates(
    client: httpx.AsyncClient, sg: Sagacity, tools: ModuleType, gate: Callable[..., Any]
) -> None:
    """A payload other than the approved one is 409 COMPENSATED: REJECTED journaled, the tool never runs."""
    seq = await gate("order-1")
    await client.post(f"/sagacity/approve/order-1/{seq}", headers=ALICE)
    stale = PAYLOAD.replace("100.00", "999.00")
    response = await client.post(f"/sagacity/resume/order-1/{seq}", json={"payload": stale}, headers=ALICE)
    assert response.status_code == 409
    body = response.json()
    assert body["status"] == "REJECTED"
    assert body["reason"].startswith("PayloadMismatchError")
    assert tools.EFFECTS == ["reserved SKU-1", "released SKU-1"]
    assert (await sg.status_async("order-1")) is SagaStatus.REJECTED
    assert any("differs from the approved" in p for p in (await decisions(sg, "order-1", Phase.REJECTED)))


async def test_resumed_tool_failure_is_409_and_compensates(
    client: httpx.AsyncClient, tools: ModuleType, gate: Callable[..., Any]
) -> None:
    """A resumed tool that raises answers 409 with the compensated status and the tool's error."""
    seq = await gate("doomed-1", agent="doomed")
    await client.post(f"/sagacity/approve/doomed-1/{seq}", headers=ALICE)
    response = await client.post(
        f"/sagacity/resume/doomed-1/{seq}", json={"payload": '{"reason":"closed"}'}, headers=ALICE
    )
    assert response.status_code == 409
    assert response.json()["status"] == "COMPENSATED"
    assert "bank said no" in response.json()["reason"]
    assert tools.EFFECTS == ["reserved SKU-9", "released SKU-9"]


async def test_reject_compensates_and_journals_principal_and_reason(
    client: httpx.AsyncClient, sg: Sagacity, tools: ModuleType, gate: Callable[..., Any]
) -> None:
    """Reject journals REJECTED by the principal with the reason, compensates, and cannot happen twice."""
    seq = await gate("order-1")
    response = await client.post(
        f"/sagacity/reject/order-1/{seq}", json={"reason": "wrong IBAN", "approver": "mallory"}, headers=BOB
    )
    assert response.status_code == 200
    body = response.json()
    assert body["approved"] is False
    assert body["approverIdentity"] == "bob@example.com"
    assert body["reason"] == "wrong IBAN"
    assert body["status"] == "REJECTED"
    assert tools.EFFECTS == ["reserved SKU-1", "released SKU-1"]
    assert (await decisions(sg, "order-1", Phase.REJECTED)) == ["approver=bob@example.com\nreason=wrong IBAN"]
    twice = await client.post(f"/sagacity/reject/order-1/{seq}", json={"reason": "again"}, headers=BOB)
    assert twice.status_code in {404, 409}
    assert twice.json()["sagaId"] == "order-1"
    assert tools.EFFECTS.count("released SKU-1") == 1


@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": "   "}, {"reason": None}])
async def test_reject_needs_a_reason_that_is_not_blank(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any], body: dict[str, Any]
) -> None:
    """A rejection without a reason (missing, empty, blank) is a 400; nothing is journaled."""
    seq = await gate("order-1")
    before = len(await sg.entries_async("order-1"))
    response = await client.post(f"/sagacity/reject/order-1/{seq}", json=body, headers=BOB)
    assert response.status_code == 400
    assert "reason is required" in response.json()["error"]
    assert len(await sg.entries_async("order-1")) == before
    assert [r.journal_seq for r in await sg.pending_approvals_async("order-1")] == [seq]


async def test_four_eyes_needs_two_distinct_principals(
    client: httpx.AsyncClient, sg: Sagacity, tools: ModuleType, gate: Callable[..., Any]
) -> None:
    """A tool needing two approvals resumes only after two different principals approved; one twice is 409."""
    seq = await gate("payout-1", agent="four_eyes")
    payload = '{"amount":"50000.00"}'
    first = await client.post(f"/sagacity/approve/payout-1/{seq}", headers=ALICE)
    assert first.json()["approvers"] == ["alice@example.com"]
    assert first.json()["approvalsRequired"] == 2
    same = await client.post(f"/sagacity/approve/payout-1/{seq}", headers=ALICE)
    assert same.status_code == 409
    assert "already approved by" in same.json()["error"]
    early = await client.post(f"/sagacity/resume/payout-1/{seq}", json={"payload": payload}, headers=ALICE)
    assert early.status_code == 409
    assert "1 of 2" in early.json()["reason"]
    second = await client.post(f"/sagacity/approve/payout-1/{seq}", headers=BOB)
    assert second.status_code == 200
    assert second.json()["approvers"] == ["alice@example.com", "bob@example.com"]
    listed = (await client.get("/sagacity/approvals/payout-1", headers=ALICE)).json()
    assert listed[0]["readyToResume"] is True
    done = await client.post(f"/sagacity/resume/payout-1/{seq}", json={"payload": payload}, headers=BOB)
    assert done.status_code == 200
    assert done.json()["status"] == "COMPLETED"
    assert (await decisions(sg, "payout-1", Phase.APPROVED)) == [
        "approver=alice@example.com",
        "approver=bob@example.com",
    ]
    assert tools.EFFECTS == ["paid out 50000.00"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (None, "payload is required"),
        ({}, "payload is required"),
        ({"payload": None}, "payload is required"),
        ({"payload": {"amount": "100.00"}}, "payload must be a string"),
        ({"payload": 42}, "payload must be a string"),
        ([PAYLOAD], "must be a JSON object"),
        ({"payload": "\ud800"}, "not valid Unicode"),
    ],
)
async def test_resume_bad_bodies_are_400_naming_the_problem(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any], body: Any, fragment: str
) -> None:
    """A missing, null or non-string payload is a 400 {error} saying so, and the request stays pending."""
    seq = await gate("order-1")
    await client.post(f"/sagacity/approve/order-1/{seq}", headers=ALICE)
    content = b"" if body is None else json.dumps(body).encode()
    response = await client.post(f"/sagacity/resume/order-1/{seq}", content=content, headers=ALICE)
    assert response.status_code == 400
    assert fragment in response.json()["error"]
    assert [r.journal_seq for r in (await sg.pending_approvals_async("order-1"))] == [seq]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe\xfa", "not"),
        (b"[" * 100_000, "JSON"),
        (b'"just a string"', "must be a JSON object, not a string"),
    ],
)
async def test_bodies_that_are_not_a_json_object_are_400(
    client: httpx.AsyncClient, gate: Callable[..., Any], content: bytes, fragment: str
) -> None:
    """A body that is not JSON, not UTF-8, nested absurdly, or not an object is a 400 {error}."""
    seq = await gate("order-1")
    for action in ("approve", "reject", "resume"):
        response = await client.post(
            f"/sagacity/{action}/order-1/{seq}", content=content[:3000], headers=ALICE
        )
        assert response.status_code == 400, (action, response.text)
        assert fragment in response.json()["error"]


async def test_reject_reason_of_the_wrong_type_is_400(
    client: httpx.AsyncClient, gate: Callable[..., Any]
) -> None:
    """A reason that is not a string is refused before anything is journaled."""
    seq = await gate("order-1")
    response = await client.post(f"/sagacity/reject/order-1/{seq}", json={"reason": ["no"]}, headers=ALICE)
    assert response.status_code == 400
    assert "reason must be a string" in response.json()["error"]


@pytest.mark.parametrize("seq", ["abc", "1.5", "0", "-3", str(2**63), "1e3"])
async def test_bad_seq_is_400(client: httpx.AsyncClient, gate: Callable[..., Any], seq: str) -> None:
    """A seq that is not a positive 64-bit integer is a 400 naming seq, never a 500 or 422."""
    await gate("order-1")
    for method, path in [
        ("POST", f"/sagacity/approve/order-1/{seq}"),
        ("POST", f"/sagacity/reject/order-1/{seq}"),
        ("POST", f"/sagacity/resume/order-1/{seq}"),
        ("GET", f"/sagacity/requests/order-1/{seq}"),
    ]:
        response = await client.request(method, path, headers=ALICE)
        assert response.status_code == 400, (path, response.text)
        assert "seq" in response.json()["error"]


@pytest.mark.parametrize("action", ["approve", "reject", "resume"])
async def test_decisions_on_unknown_saga_or_seq_are_404(
    client: httpx.AsyncClient, gate: Callable[..., Any], action: str
) -> None:
    """Deciding or resuming a saga or seq with no pending request is 404 {sagaId, journalSeq, error}."""
    seq = await gate("order-1")
    for saga_id, n in [("ghost", 1), ("order-1", seq + 7)]:
        response = await client.post(
            f"/sagacity/{action}/{saga_id}/{n}", json={"payload": PAYLOAD, "reason": "no"}, headers=ALICE
        )
        assert response.status_code == 404, response.text
        body = response.json()
        assert body["sagaId"] == saga_id
        assert body["journalSeq"] == n
        assert body["error"]


async def test_resume_of_a_tool_not_imported_is_404(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """Resuming a request whose tool this server never imported is 404 naming the tool, and runs nothing."""
    from sagacity.tools import registry

    seq = await gate("order-1")
    await client.post(f"/sagacity/approve/order-1/{seq}", headers=ALICE)
    with registry.isolated():
        registry.unregister("srv_wire")
        listed = (await client.get("/sagacity/approvals", headers=ALICE)).json()
        response = await client.post(
            f"/sagacity/resume/order-1/{seq}", json={"payload": PAYLOAD}, headers=ALICE
        )
    assert listed[0]["toolImported"] is False
    assert response.status_code == 404
    assert "srv_wire" in response.json()["error"]
    assert [r.journal_seq for r in (await sg.pending_approvals_async("order-1"))] == [seq]


async def test_decision_on_a_compensated_saga_is_409(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """A request voided by compensation cannot be approved: 404 or 409, never a second compensation."""
    seq = await gate("order-1")
    await client.post(f"/sagacity/reject/order-1/{seq}", json={"reason": "no"}, headers=ALICE)
    response = await client.post(f"/sagacity/approve/order-1/{seq}", headers=BOB)
    assert response.status_code in {404, 409}
    assert (await sg.status_async("order-1")) is SagaStatus.REJECTED


async def test_audit_streams_json_lines(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """GET /audit/{sagaId} is application/x-ndjson, one export object per entry in seq order."""
    await gate("order-1")
    async with client.stream("GET", "/sagacity/audit/order-1", headers=CAROL) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [line async for line in response.aiter_lines() if line]
    rows = [json.loads(line) for line in lines]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5]  # the START, a call, the gate, the END
    assert rows == [e.to_json() for e in (await sg.entries_async("order-1"))]
    assert set(rows[0]) == {"sagaId", "seq", "toolName", "phase", "input", "payload", "timestamp", "hash"}


async def test_audit_verify_has_the_java_shape(client: httpx.AsyncClient, gate: Callable[..., Any]) -> None:
    """GET /audit/{sagaId}/verify answers {valid, entryCount, breakAtIndex, message}; unknown saga 404."""
    await gate("order-1")
    response = await client.get("/sagacity/audit/order-1/verify", headers=CAROL)
    assert response.status_code == 200
    body = response.json()
    assert body == {"valid": True, "entryCount": 5, "breakAtIndex": -1, "message": body["message"]}
    for path in ("/sagacity/audit/ghost/verify", "/sagacity/audit/ghost"):
        missing = await client.get(path, headers=CAROL)
        assert missing.status_code == 404
        assert "ghost" in missing.json()["error"]


async def test_sagas_are_paginated_and_filtered_by_status(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """GET /sagas pages by cursor (newest first, "next" until the last page) and filters by status."""
    for n in range(3):
        await gate(f"order-{n}")
    seq = 4  # the START, a call, the gate
    await client.post(f"/sagacity/reject/order-1/{seq}", json={"reason": "no"}, headers=ALICE)
    page = (await client.get("/sagacity/sagas", params={"limit": 2}, headers=CAROL)).json()
    assert page["limit"] == 2
    assert len(page["sagas"]) == 2
    assert page["next"] is not None
    rest = (
        await client.get("/sagacity/sagas", params={"limit": 2, "after": page["next"]}, headers=CAROL)
    ).json()
    assert len(rest["sagas"]) == 1
    assert rest["next"] is None
    overview = (await client.get("/sagacity/overview", headers=CAROL)).json()
    assert overview == {"counts": {"AWAITING_APPROVAL": 2, "REJECTED": 1}, "total": 3, "brokenChains": 0}
    everyone = {s["sagaId"] for s in page["sagas"] + rest["sagas"]}
    assert everyone == {"order-0", "order-1", "order-2"}
    waiting = (
        await client.get("/sagacity/sagas", params={"status": "AWAITING_APPROVAL"}, headers=CAROL)
    ).json()
    assert {s["sagaId"] for s in waiting["sagas"]} == {"order-0", "order-2"}
    assert all(s["awaitingApproval"] == 1 for s in waiting["sagas"])
    rejected = (await client.get("/sagacity/sagas", params={"status": "REJECTED"}, headers=CAROL)).json()
    assert [s["sagaId"] for s in rejected["sagas"]] == ["order-1"]
    compensated = (
        await client.get("/sagacity/sagas", params={"status": "COMPENSATED"}, headers=CAROL)
    ).json()
    assert compensated["sagas"] == []  # a rejected saga is REJECTED, not COMPENSATED


async def test_sagas_are_filtered_by_prefix_tool_and_time(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """GET /sagas?prefix=&tool=&since=&until= keeps what sg.sagas() keeps with the same filters (#25)."""
    for saga_id in ("order-0", "order-1", "refund-0"):
        await gate(saga_id)
    middle = (await sg.sagas_async(prefix="order-1"))[0].updated_at

    async def ids(**params: str) -> list[str]:
        response = await client.get("/sagacity/sagas", params=params, headers=CAROL)
        assert response.status_code == 200, response.text
        return [s["sagaId"] for s in response.json()["sagas"]]

    assert await ids(prefix="order-") == ["order-1", "order-0"]
    assert await ids(prefix="refund") == ["refund-0"]
    tools = {e.tool_name for e in await sg.entries_async("order-0")}
    assert await ids(tool=sorted(tools)[0]) == ["refund-0", "order-1", "order-0"]
    assert await ids(tool="no-such-tool") == []
    assert await ids(since=middle.isoformat()) == ["refund-0", "order-1"]
    assert await ids(until=middle.isoformat() + "Z") == ["order-0"]
    assert await ids(since=middle.isoformat(), prefix="order") == ["order-1"]


@pytest.mark.parametrize(
    "params",
    [
        {"status": "NOPE"},
        {"limit": "0"},
        {"limit": "x"},
        {"after": "bm90IGEgY3Vyc29y"},
        {"limit": "100000"},
        {"since": "yesterday"},
        {"until": "2026-13-01"},
    ],
)
async def test_bad_saga_list_parameters_are_400(client: httpx.AsyncClient, params: dict[str, str]) -> None:
    """An unknown status or an out-of-range page is a 400 {error} naming the parameter."""
    response = await client.get("/sagacity/sagas", params=params, headers=CAROL)
    assert response.status_code == 400
    assert next(iter(params)) in response.json()["error"]


async def test_saga_page_has_entries_status_verification_and_in_doubt(
    client: httpx.AsyncClient, sg: Sagacity, tools: ModuleType
) -> None:
    """GET /sagas/{sagaId} gives status, entries, verification and the calls in doubt."""
    # A process that died mid-call leaves an INTENT with no outcome: written here as it would be.
    sg.journal.append("crashed-1", "srv_reserve", Phase.INTENT, '{"sku":"SKU-3","quantity":1}')
    response = await client.get("/sagacity/sagas/crashed-1", headers=CAROL)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "IN_DOUBT"
    assert body["verification"]["valid"] is True
    assert [e["phase"] for e in body["entries"]] == ["INTENT"]
    assert [c["seq"] for c in body["inDoubt"]] == [1]
    in_doubt = (await client.get("/sagacity/sagas", params={"status": "IN_DOUBT"}, headers=CAROL)).json()
    assert [s["sagaId"] for s in in_doubt["sagas"]] == ["crashed-1"]
    missing = await client.get("/sagacity/sagas/ghost", headers=CAROL)
    assert missing.status_code == 404


async def test_saga_ids_with_slashes_and_unicode_round_trip(
    client: httpx.AsyncClient, gate: Callable[..., Any]
) -> None:
    """A saga id holding '/', spaces or non-ASCII is addressable on every route."""
    saga_id = "tenant/7/ordre é 1"
    seq = await gate(saga_id)
    quoted = httpx.URL("/sagacity/x/").copy_with(path=f"/sagacity/approve/{saga_id}/{seq}").raw_path.decode()
    response = await client.post(quoted, headers=ALICE)
    assert response.status_code == 200, response.text
    assert response.json()["sagaId"] == saga_id
    saga = await client.get(f"/sagacity/sagas/{saga_id}", headers=CAROL)
    assert saga.json()["sagaId"] == saga_id
    verify = await client.get(f"/sagacity/audit/{saga_id}/verify", headers=CAROL)
    assert verify.json()["entryCount"] == 6


async def test_saga_id_with_nul_is_400(client: httpx.AsyncClient) -> None:
    """A saga id no store can hold (a NUL) is a 400, not a database error."""
    for path in ("/sagacity/sagas/a%00b", "/sagacity/audit/a%00b/verify", "/sagacity/approvals/a%00b"):
        headers = CAROL if "approvals" not in path else ALICE
        response = await client.get(path, headers=headers)
        assert response.status_code == 400, path
        assert "NUL" in response.json()["error"]


async def test_oversize_body_is_413_by_length(client: httpx.AsyncClient, gate: Callable[..., Any]) -> None:
    """A body whose Content-Length passes the limit is refused with 413 before it is read."""
    seq = await gate("order-1")
    big = json.dumps({"reason": "x" * 10_000})
    response = await client.post(f"/sagacity/reject/order-1/{seq}", content=big, headers=ALICE)
    assert response.status_code == 413
    assert "4096 bytes" in response.json()["error"]


async def test_oversize_streamed_body_is_413_while_reading(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """A chunked body without Content-Length is cut off at the limit as it streams: 413, no journal."""
    seq = await gate("order-1")
    sent: list[int] = []

    async def chunks() -> Any:
        yield b'{"reason": "'
        for n in range(100):
            sent.append(n)
            yield b"y" * 1000
        yield b'"}'

    response = await client.post(f"/sagacity/reject/order-1/{seq}", content=chunks(), headers=ALICE)
    assert response.status_code == 413
    assert len(sent) < 100
    assert (await sg.status_async("order-1")) is SagaStatus.AWAITING_APPROVAL


async def test_unknown_route_and_wrong_method_are_json(client: httpx.AsyncClient) -> None:
    """An unknown path is a JSON 404 and a wrong method a JSON 405."""
    missing = await client.get("/sagacity/nothing-here", headers=ROOT)
    assert missing.status_code == 404
    assert "error" in missing.json()
    wrong = await client.get("/sagacity/approve/order-1/1", headers=ROOT)
    assert wrong.status_code == 405
    assert "error" in wrong.json()


async def test_openapi_schema_documents_the_routes(client: httpx.AsyncClient) -> None:
    """The OpenAPI schema lists every route with its bearer security."""
    response = await client.get("/sagacity/openapi.json")
    assert response.status_code == 200
    paths = set(response.json()["paths"])
    assert {
        "/sagacity/approvals",
        "/sagacity/approvals/{sagaId}",
        "/sagacity/approve/{sagaId}/{seq}",
        "/sagacity/reject/{sagaId}/{seq}",
        "/sagacity/resume/{sagaId}/{seq}",
        "/sagacity/audit/{sagaId}",
        "/sagacity/audit/{sagaId}/verify",
        "/sagacity/sagas",
        "/sagacity/sagas/{sagaId}",
    } <= paths
    assert "HTTPBearer" in response.json()["components"]["securitySchemes"]


async def test_responses_carry_security_headers(client: httpx.AsyncClient) -> None:
    """Every response forbids framing and sniffing, caching, and scripts from anywhere but the app."""
    for path in ("/sagacity/approvals", "/sagacity/ui/"):
        response = await client.get(path, headers=ALICE)
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-store"


async def test_dashboard_assets_are_served_from_the_package(client: httpx.AsyncClient) -> None:
    """The dashboard's HTML, script and stylesheet come from the installed package, with no login needed."""
    home = await client.get("/sagacity")
    assert home.status_code == 307
    assert home.headers["location"].endswith("/sagacity/ui/")
    page = await client.get("/sagacity/ui/")
    assert page.status_code == 200
    assert 'src="app.js"' in page.text
    script = await client.get("/sagacity/ui/app.js")
    assert script.status_code == 200
    assert "innerHTML" not in script.text.replace("never innerHTML", "")
    assert (await client.get("/sagacity/ui/style.css")).status_code == 200


async def test_approvals_limit_answers_the_oldest_and_the_total_in_a_header(
    client: httpx.AsyncClient, gate: Callable[..., Any]
) -> None:
    """?limit=N answers the N oldest requests, still as the Java starter's bare list; the header
    X-Total-Count says how many are pending in all. Without limit: every request."""
    for n in range(3):
        await gate(f"queue-{n}")
    every = await client.get("/sagacity/approvals", headers=ALICE)
    assert [a["sagaId"] for a in every.json()] == ["queue-0", "queue-1", "queue-2"]
    assert every.headers["X-Total-Count"] == "3"
    page = await client.get("/sagacity/approvals", params={"limit": 2}, headers=ALICE)
    assert [a["sagaId"] for a in page.json()] == ["queue-0", "queue-1"]
    assert page.headers["X-Total-Count"] == "3"
    moving = "waitingSeconds"  # grows between the two reads
    assert [a | {moving: 0} for a in page.json()] == [a | {moving: 0} for a in every.json()[:2]]
    bad = await client.get("/sagacity/approvals", params={"limit": "0"}, headers=ALICE)
    assert bad.status_code == 400
    assert "limit" in bad.json()["error"]


async def test_approvals_are_filtered_and_paged_like_the_saga_list(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """GET /approvals takes the saga list's filters (prefix, tool, since, until) and pages by cursor:
    a full page carries X-Next-Cursor, ?after= goes on from it, the last page has none, and
    X-Total-Count counts what the filters keep (#25). The body stays the Java starter's bare list."""
    for saga_id in ("order-0", "order-1", "refund-0"):
        await gate(saga_id)
    await gate("payout-0", agent="four_eyes")
    queue = await sg.approvals_async()
    middle = queue[1].request.created_at

    async def listed(**params: str) -> httpx.Response:
        response = await client.get("/sagacity/approvals", params=params, headers=ALICE)
        assert response.status_code == 200, response.text
        return response

    async def ids(**params: str) -> list[str]:
        return [a["sagaId"] for a in (await listed(**params)).json()]

    assert await ids(prefix="order-") == ["order-0", "order-1"]
    assert (await listed(prefix="order-")).headers["X-Total-Count"] == "2"
    assert await ids(tool="srv_payout") == ["payout-0"]
    assert await ids(tool="srv_reserve") == []  # the held tool, not any tool of the saga
    assert await ids(since=middle.isoformat()) == ["order-1", "refund-0", "payout-0"]
    assert await ids(until=middle.isoformat() + "Z") == ["order-0"]
    assert await ids(since=middle.isoformat(), prefix="refund") == ["refund-0"]

    first = await listed(limit="2")
    assert [a["sagaId"] for a in first.json()] == ["order-0", "order-1"]
    assert first.headers["X-Total-Count"] == "4"
    second = await listed(limit="2", after=first.headers["X-Next-Cursor"])
    assert [a["sagaId"] for a in second.json()] == ["refund-0", "payout-0"]
    last = await listed(limit="2", after=second.headers["X-Next-Cursor"])
    assert last.json() == []
    assert "X-Next-Cursor" not in last.headers
    filtered = await listed(limit="1", prefix="order-")
    assert await ids(limit="1", prefix="order-", after=filtered.headers["X-Next-Cursor"]) == ["order-1"]
    assert "X-Next-Cursor" not in (await listed(limit="5")).headers  # not a full page


async def test_approvals_are_sorted_paged_and_filtered_over_the_whole_queue(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any], tools: ModuleType
) -> None:
    """GET /approvals sorts the whole queue (sort, desc) before paging it, keeps what a requester
    asked for (requester) and what wants the caller's approval now (needsMe=true), and
    X-Total-Count counts what is kept, so every request is reachable (#33 item 22)."""
    for saga_id in ("c-0", "a-1", "b-2"):
        await gate(saga_id)

    def asked_by_carol() -> None:
        with acting_as("carol@example.com"):
            sg.run("d-3", tools.four_eyes)

    await anyio.to_thread.run_sync(asked_by_carol)
    (b2,) = await sg.approvals_async(prefix="b-2")
    await sg.approve_async("b-2", b2.request.journal_seq, "alice@example.com")

    async def listed(**params: str) -> tuple[list[str], str, str | None]:
        response = await client.get("/sagacity/approvals", params=params, headers=ALICE)
        assert response.status_code == 200, response.text
        ids = [a["sagaId"] for a in response.json()]
        return ids, response.headers["X-Total-Count"], response.headers.get("X-Next-Cursor")

    ids, total, cursor = await listed(sort="saga", desc="true", limit="2")
    assert (ids, total) == (["d-3", "c-0"], "4")
    assert cursor is not None
    assert (await listed(sort="saga", desc="true", limit="2", after=cursor))[:2] == (["b-2", "a-1"], "4")
    assert (await listed(sort="saga"))[0] == ["a-1", "b-2", "c-0", "d-3"]
    assert (await listed(requester="carol@example.com"))[:2] == (["d-3"], "1")
    assert (await listed(needsMe="true"))[:2] == (["c-0", "a-1", "d-3"], "3")  # alice approved b-2
    bob = await client.get("/sagacity/approvals", params={"needsMe": "true"}, headers=BOB)
    assert [a["sagaId"] for a in bob.json()] == ["c-0", "a-1", "d-3"]  # b-2 is approved: ready


@pytest.mark.parametrize(
    "params",
    [
        {"limit": "0"},
        {"limit": "x"},
        {"after": "bm90IGEgY3Vyc29y"},
        {"after": "WyIyMDI2LTEyLTAyVDEwOjAwOjAwLjAwMDAwMCIsIm9yZGVyLTAiXQ"},  # a saga-list cursor
        {"since": "yesterday"},
        {"until": "2026-13-01"},
        {"prefix": "x" * 513},
        {"tool": "x" * 513},
        {"requester": "x" * 513},
        {"sort": "waiting"},
        {"desc": "yes"},
        {"needsMe": "1"},
    ],
)
async def test_bad_approval_list_parameters_are_400(
    client: httpx.AsyncClient, params: dict[str, str]
) -> None:
    """A bad filter or cursor on GET /approvals is a 400 {error} naming the parameter, as on GET /sagas."""
    response = await client.get("/sagacity/approvals", params=params, headers=ALICE)
    assert response.status_code == 400
    assert next(iter(params)) in response.json()["error"]


async def test_the_requester_may_not_approve_their_own_four_eyes_request(
    client: httpx.AsyncClient, sg: Sagacity, tools: ModuleType
) -> None:
    """Alice's agent asked for the payout (she is its principal) and she is an approver too: the
    API shows her as the requester, refuses her approval (409, nothing journaled), and two other
    principals approve it."""

    def run() -> int:
        with acting_as("alice@example.com"):
            return sg.run("self-payout", tools.four_eyes).awaiting[0].journal_seq

    seq = await anyio.to_thread.run_sync(run)
    listed = (await client.get("/sagacity/approvals/self-payout", headers=BOB)).json()
    assert listed[0]["requester"] == "alice@example.com"
    assert listed[0]["requesterMayNotApprove"] is True
    before = len(await sg.entries_async("self-payout"))
    own = await client.post(f"/sagacity/approve/self-payout/{seq}", headers=ALICE)
    assert own.status_code == 409
    assert "requester_may_not_approve" in own.json()["error"]
    assert len(await sg.entries_async("self-payout")) == before
    assert (await client.post(f"/sagacity/approve/self-payout/{seq}", headers=BOB)).status_code == 200
    root = {"Authorization": "Bearer root-token-0123456789a"}
    assert (await client.post(f"/sagacity/approve/self-payout/{seq}", headers=root)).status_code == 200
    payload = '{"amount":"50000.00"}'
    done = await client.post(f"/sagacity/resume/self-payout/{seq}", json={"payload": payload}, headers=BOB)
    assert done.status_code == 200, done.json()
    assert await decisions(sg, "self-payout", Phase.APPROVED) == [
        "approver=bob@example.com",
        "approver=root@example.com",
    ]


async def test_reconcile_over_http_settles_what_the_reconciler_knows(
    client: httpx.AsyncClient, sg: Sagacity
) -> None:
    """POST /reconcile runs the reconcilers in the serving process: an approver's call journals
    each answer under the reconciler's name; another role is refused; a bad body is 400."""
    from sagacity import Reconciliation, tool
    from sagacity.tools import registry

    with registry.isolated():

        @tool
        def srv_ship(parcel: str) -> str:
            return parcel

        @srv_ship.reconcile(name="carrier")
        def tracked(call: object) -> Reconciliation:
            return Reconciliation.happened("scanned at the depot", result="P-1")

        for sid in ("ship-1", "ship-2"):
            await anyio.to_thread.run_sync(
                lambda sid=sid: sg.journal.append(sid, "srv_ship", Phase.INTENT, '{"parcel":"P-1"}')
            )
        assert (
            await client.post("/sagacity/reconcile", json={"sagaId": 7}, headers=ALICE)
        ).status_code == 400
        assert (await client.post("/sagacity/reconcile", json={}, headers=CAROL)).status_code == 403
        one = await client.post("/sagacity/reconcile", json={"sagaId": "ship-1"}, headers=ALICE)
        assert one.status_code == 200, one.text
        assert one.json() == {
            "reconciled": [
                {
                    "sagaId": "ship-1",
                    "seq": 1,
                    "toolName": "srv_ship",
                    "kind": "call",
                    "answer": "happened",
                    "reconciler": "carrier",
                    "evidence": "scanned at the depot",
                    "settled": True,
                    "outcome": "EXECUTED",
                    "status": "COMPLETED",
                }
            ]
        }
        rest = await client.post("/sagacity/reconcile", headers=ALICE)
        assert [(r["sagaId"], r["settled"]) for r in rest.json()["reconciled"]] == [("ship-2", True)]
        decision = next(e for e in await sg.entries_async("ship-1") if e.tool_name == "approval-gate")
        assert decision.payload == "reconciler=carrier\nevidence=scanned at the depot"


async def test_an_in_doubt_call_is_resolved_over_http_and_compensation_carries_on(
    client: httpx.AsyncClient, sg: Sagacity, tools: ModuleType
) -> None:
    """POST /resolve settles an in-doubt INTENT under the principal's name; "did not happen" in a
    saga with a reversible step compensates it here (the server's tools), once; a seq that is
    not in doubt is an error, a body without happened is 400, nothing journaled for either."""
    sid = "doubt-1"
    await anyio.to_thread.run_sync(
        lambda: [
            sg.journal.append(sid, "srv_reserve", Phase.INTENT, '{"sku":"SKU-1","quantity":1}'),
            sg.journal.append(sid, "srv_reserve", Phase.EXECUTED, '{"sku":"SKU-1","quantity":1}', "res"),
            sg.journal.append(sid, "srv_reserve", Phase.INTENT, '{"sku":"SKU-2","quantity":1}'),
        ]
    )
    before = len(await sg.entries_async(sid))
    missing = await client.post(f"/sagacity/resolve/{sid}/3", json={"reason": "x"}, headers=ALICE)
    assert missing.status_code == 400
    not_in_doubt = await client.post(f"/sagacity/resolve/{sid}/1", json={"happened": False}, headers=ALICE)
    assert not_in_doubt.status_code in {404, 409}
    assert not_in_doubt.json()["sagaId"] == sid
    assert len(await sg.entries_async(sid)) == before
    response = await client.post(
        f"/sagacity/resolve/{sid}/3", json={"happened": False, "reason": "never reached"}, headers=ALICE
    )
    assert response.status_code == 200, response.text
    assert response.json() == {
        "sagaId": sid,
        "journalSeq": 3,
        "happened": False,
        "resolver": "alice@example.com",
        "status": "COMPENSATED",
    }
    assert tools.EFFECTS == ["released SKU-1"]
    decision = next(e for e in await sg.entries_async(sid) if e.tool_name == "approval-gate")
    assert decision.payload == "approver=alice@example.com\nreason=never reached"
    again = await client.post(f"/sagacity/resolve/{sid}/3", json={"happened": False}, headers=ALICE)
    assert again.status_code in {404, 409}
    assert tools.EFFECTS == ["released SKU-1"]
