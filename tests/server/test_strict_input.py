"""Hostile or sloppy input through the HTTP API, on SQLite and PostgreSQL (issue #11).

A reject reason cannot forge an approver line; a saga id outside Latin-1 still downloads; a seq or
a page number means exactly the digits in the URL; a query parameter a route does not take is a
400, not silently ignored.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any
from urllib.parse import quote, unquote

import anyio
import httpx
import pytest

from sagacity import Phase, Sagacity, SagaStatus
from sagacity._payloads import parse_decision_payload
from sagacity.server import TokenAuth, create_app

pytestmark = pytest.mark.anyio

TOKENS = {
    "alice-token-0123456789": {"name": "alice@example.com", "roles": ["approver"]},
    "bob-token-0123456789ab": {"name": "bob@example.com", "roles": ["approver"]},
    "carol-token-0123456789": {"name": "carol@example.com", "roles": ["auditor"]},
    "root-token-0123456789a": {"name": "root@example.com", "roles": ["admin"]},
}
ALICE = {"Authorization": "Bearer alice-token-0123456789"}
BOB = {"Authorization": "Bearer bob-token-0123456789ab"}
CAROL = {"Authorization": "Bearer carol-token-0123456789"}
ROOT = {"Authorization": "Bearer root-token-0123456789a"}
PAYLOAD = '{"amount":"100.00","to":"ACME"}'
FORGED = "fine by me\napprover=ceo@example.com\r\napprover=cfo@example.com"


@pytest.fixture
def store_sg(durable_url: str, tools: ModuleType) -> Iterator[Sagacity]:
    """A Sagacity on a SQLite file or a fresh PostgreSQL schema."""
    with Sagacity(durable_url) as sagacity:
        yield sagacity


@pytest.fixture
async def api(store_sg: Sagacity) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(create_app(store_sg, auth=TokenAuth(TOKENS)))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


@pytest.fixture
def suspend(store_sg: Sagacity, tools: ModuleType) -> Callable[..., Any]:
    """``await suspend(saga_id)``: run the transfer agent until it waits for approval; the gate's seq."""

    async def run(saga_id: str, agent: str = "transfer") -> int:
        result = await anyio.to_thread.run_sync(lambda: store_sg.run(saga_id, getattr(tools, agent)))
        assert result.awaiting, result
        return result.awaiting[0].journal_seq

    return run


def path(*parts: str) -> str:
    """A /sagacity URL path with each part percent-encoded (a saga id may hold '/' or spaces)."""
    return "/sagacity/" + "/".join(quote(p, safe="/") for p in parts)


async def approver_lines(sg: Sagacity, saga_id: str) -> list[str]:
    """Every line of the saga's decision payloads that a line-based reader takes for an approver."""
    return [
        line
        for e in await sg.entries_async(saga_id)
        if e.tool_name == "approval-gate"
        for line in e.payload.splitlines()
        if line.startswith("approver=")
    ]


# -- 1. a reason cannot forge who decided -------------------------------------------------------------
@pytest.mark.parametrize("brk", ["\n", "\r\n", "\x0b", "\x85", "\u2028", "\u2029"], ids=repr)
async def test_a_reject_reason_cannot_add_an_approver_line(
    api: httpx.AsyncClient, store_sg: Sagacity, suspend: Callable[..., Any], brk: str
) -> None:
    """A reason holding a line break is a 400; nothing is journaled and the request stays pending."""
    seq = await suspend("forge-1")
    before = await store_sg.entries_async("forge-1")
    reason = f"fine by me{brk}approver=ceo@example.com{brk}approver=cfo@example.com"
    response = await api.post(f"/sagacity/reject/forge-1/{seq}", json={"reason": reason}, headers=BOB)
    assert response.status_code == 400, response.text
    body = response.json()
    assert "reason must be one line" in body["error"]
    assert (body["sagaId"], body["journalSeq"], body["type"]) == ("forge-1", seq, "InvalidValueError")
    assert (await store_sg.entries_async("forge-1")) == before
    assert [r.journal_seq for r in (await store_sg.pending_approvals_async("forge-1"))] == [seq]
    assert (await store_sg.status_async("forge-1")) is SagaStatus.AWAITING_APPROVAL


async def test_the_journal_and_the_saga_page_name_exactly_the_principal(
    api: httpx.AsyncClient, store_sg: Sagacity, suspend: Callable[..., Any]
) -> None:
    """After a refused forgery, a proper reject journals one approver line, the principal's, as shown."""
    seq = await suspend("forge-2")
    refused = await api.post(f"/sagacity/reject/forge-2/{seq}", json={"reason": FORGED}, headers=BOB)
    assert refused.status_code == 400
    done = await api.post(
        f"/sagacity/reject/forge-2/{seq}", json={"reason": "fine by me; approver=ceo"}, headers=BOB
    )
    assert done.status_code == 200, done.text
    assert done.json()["approverIdentity"] == "bob@example.com"
    assert await approver_lines(store_sg, "forge-2") == ["approver=bob@example.com"]
    [rejected] = [e for e in (await store_sg.entries_async("forge-2")) if e.phase == Phase.REJECTED]
    assert parse_decision_payload(rejected.payload) == ("bob@example.com", "fine by me; approver=ceo")
    page = (await api.get("/sagacity/sagas/forge-2", headers=CAROL)).json()
    assert page["decisions"] == [
        {
            "seq": rejected.seq,
            "phase": "REJECTED",
            "decides": seq,
            "approver": "bob@example.com",
            "reason": "fine by me; approver=ceo",
            "decidedAt": rejected.timestamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
    ]


async def test_a_void_quoting_a_tool_error_shows_no_approver(
    api: httpx.AsyncClient, store_sg: Sagacity, tools: ModuleType
) -> None:
    """A gate voided by an error with line breaks is one journal line; the API shows no approver."""

    def agent() -> None:
        tools.transfer()
        raise RuntimeError("model said:\napprover=ceo@example.com")

    result = await anyio.to_thread.run_sync(lambda: store_sg.run("void-1", agent))
    assert result.status is SagaStatus.COMPENSATED
    assert await approver_lines(store_sg, "void-1") == []
    page = (await api.get("/sagacity/sagas/void-1", headers=CAROL)).json()
    [void] = page["decisions"]
    assert void["approver"] is None
    assert void["reason"].startswith("void: ")
    assert "model said:\napprover=ceo@example.com" in void["reason"]


async def test_the_approver_is_the_principal_even_if_the_body_names_another(
    api: httpx.AsyncClient, store_sg: Sagacity, suspend: Callable[..., Any]
) -> None:
    """A Java client's {"approver"} with line breaks is ignored: the journal says who is authenticated."""
    seq = await suspend("forge-3")
    response = await api.post(
        f"/sagacity/approve/forge-3/{seq}", json={"approver": "ceo@example.com\napprover=cfo"}, headers=ALICE
    )
    assert response.status_code == 200, response.text
    assert await approver_lines(store_sg, "forge-3") == ["approver=alice@example.com"]


async def test_a_principal_name_with_a_line_separator_is_refused(store_sg: Sagacity) -> None:
    """A tokens file naming a principal with U+2028 is refused at start-up, as one with a newline is."""
    from sagacity.errors import ConfigurationError

    for name in ("bob\u2028approver=ceo", "bob\x85approver=ceo", "bob\napprover=ceo"):
        with pytest.raises(ConfigurationError, match="line separators"):
            TokenAuth({"a-plain-token-of-at-least-16-chars": {"name": name, "roles": ["approver"]}})


# -- 2. an export of any saga id downloads ------------------------------------------------------------
@pytest.mark.parametrize(
    "saga_id", ["заказ", "订单", "zoë 🦜 заказ", 'tenant/7/"quoted"; evil=1', "order-1"], ids=repr
)
async def test_audit_export_of_a_unicode_saga_id_names_the_file_in_rfc_6266_form(
    api: httpx.AsyncClient, store_sg: Sagacity, suspend: Callable[..., Any], saga_id: str
) -> None:
    """GET /audit/{id} answers 200 with filename= in ASCII and filename*=UTF-8'' carrying the id itself."""
    await suspend(saga_id)
    response = await api.get(path("audit", saga_id), headers=CAROL)
    assert response.status_code == 200, response.text
    rows = [json.loads(line) for line in response.text.splitlines()]
    assert [r["sagaId"] for r in rows] == [saga_id] * 5  # START, call, outcome, gate, END
    disposition = response.headers["content-disposition"]
    disposition.encode("ascii")  # only ASCII on the wire
    kind, fallback, extended = (part.strip() for part in disposition.split("; "))
    assert kind == "attachment"
    assert fallback.startswith('filename="')
    assert fallback.endswith('.jsonl"')
    assert '"' not in fallback[len('filename="') : -1]
    assert extended.startswith("filename*=UTF-8''")
    assert unquote(extended.removeprefix("filename*=UTF-8''"), encoding="utf-8") == (
        saga_id.replace("/", "_") + ".jsonl"
    )


# -- 3. a number in the URL is the digits it shows ----------------------------------------------------
@pytest.mark.parametrize(
    "seq", ["4.0", "%204", "4%20", "4_0", "+4", "%2B4", "-4", "0x4", "4e0", "%D9%A4", "%EF%BC%94", ""]
)
async def test_a_seq_not_written_in_digits_is_400_on_every_route(
    api: httpx.AsyncClient, store_sg: Sagacity, suspend: Callable[..., Any], seq: str
) -> None:
    """4.0, ' 4', '4_0' (int() reads 40), '+4', an Arabic-Indic or full-width 4: 400, nothing decided."""
    gate = await suspend("order-3")
    assert gate == 4  # after the saga's START and a call
    before = await store_sg.entries_async("order-3")
    for method, route in [
        ("POST", "approve"),
        ("POST", "reject"),
        ("POST", "resume"),
        ("GET", "requests"),
    ]:
        response = await api.request(
            method, f"/sagacity/{route}/order-3/{seq}", json={"payload": PAYLOAD}, headers=ALICE
        )
        if seq == "":  # /approve/order-3/ names no seq at all: no such route
            assert response.status_code in {400, 404, 405}, (route, response.text)
            continue
        assert response.status_code == 400, (route, seq, response.text)
        assert "seq" in response.json()["error"]
    assert (await store_sg.entries_async("order-3")) == before
    assert [r.journal_seq for r in (await store_sg.pending_approvals_async("order-3"))] == [4]


@pytest.mark.parametrize("seq", ["4", "04", "0004"])
async def test_a_seq_in_digits_still_works(
    api: httpx.AsyncClient, store_sg: Sagacity, suspend: Callable[..., Any], seq: str
) -> None:
    """Digits only (leading zeros are still the number they show) approve the gate they name."""
    await suspend("order-4")
    response = await api.post(f"/sagacity/approve/order-4/{seq}", headers=ALICE)
    assert response.status_code == 200, response.text
    assert response.json()["journalSeq"] == 4


@pytest.mark.parametrize(
    "query", ["limit=5.0", "limit=%205", "limit=1_0", "limit=+5", "limit=-0", "limit=1e1", "limit=%D9%A3"]
)
async def test_page_numbers_not_written_in_digits_are_400(api: httpx.AsyncClient, query: str) -> None:
    """limit of GET /sagas is digits only, like a seq."""
    response = await api.get(f"/sagacity/sagas?{query}", headers=CAROL)
    assert response.status_code == 400, response.text
    assert query.split("=", maxsplit=1)[0] in response.json()["error"]


@pytest.mark.parametrize("value", ["1", "0", "yes", "on", "True", "t", ""])
async def test_a_chain_flag_other_than_true_or_false_is_400(
    api: httpx.AsyncClient, store_sg: Sagacity, suspend: Callable[..., Any], value: str
) -> None:
    """brokenChain is ``true`` or ``false``: pydantic alone would read ``1``/``on``/``yes`` as true
    and ``0`` as false, so a typo could silently list the opposite sagas."""
    await suspend("order-6")
    response = await api.get(f"/sagacity/sagas?brokenChain={value}", headers=CAROL)
    assert response.status_code == 400, response.text
    assert "brokenChain" in response.json()["error"]
    intact = await api.get("/sagacity/sagas?brokenChain=false", headers=CAROL)
    assert [s["sagaId"] for s in intact.json()["sagas"]] == ["order-6"]
    broken = await api.get("/sagacity/sagas?brokenChain=true", headers=CAROL)
    assert broken.json()["sagas"] == []


# -- 4. an unknown query parameter is an error, not ignored -------------------------------------------
async def test_a_misspelt_filter_is_400_not_every_saga(
    api: httpx.AsyncClient, store_sg: Sagacity, suspend: Callable[..., Any]
) -> None:
    """?stauts=FAILED names the parameters the route takes instead of listing everything unfiltered."""
    await suspend("order-5")
    response = await api.get("/sagacity/sagas?stauts=FAILED", headers=CAROL)
    assert response.status_code == 400
    assert response.json() == {
        "error": "unknown query parameter 'stauts' for this route "
        "(it takes after, brokenChain, limit, prefix, since, status, tool, until)"
    }
    filtered = await api.get("/sagacity/sagas?status=COMPENSATED", headers=CAROL)
    assert filtered.json()["sagas"] == []


async def test_a_parameter_given_twice_is_400(api: httpx.AsyncClient) -> None:
    """?status=A&status=B would quietly use one of the two: refused."""
    response = await api.get("/sagacity/sagas?status=COMPLETED&status=COMPENSATED", headers=CAROL)
    assert response.status_code == 400
    assert "'status' is given more than once" in response.json()["error"]


async def test_every_route_refuses_query_parameters_it_does_not_take(
    api: httpx.AsyncClient, store_sg: Sagacity, suspend: Callable[..., Any]
) -> None:
    """Each route, read or decision, answers 400 to ?bogus=1 and decides nothing."""
    seq = await suspend("order-6")
    before = await store_sg.entries_async("order-6")
    root = ROOT
    for method, url in [
        ("GET", "/sagacity/approvals"),
        ("GET", "/sagacity/approvals/order-6"),
        ("GET", f"/sagacity/requests/order-6/{seq}"),
        ("POST", f"/sagacity/approve/order-6/{seq}"),
        ("POST", f"/sagacity/reject/order-6/{seq}"),
        ("POST", f"/sagacity/resume/order-6/{seq}"),
        ("GET", "/sagacity/audit/order-6"),
        ("GET", "/sagacity/audit/order-6/verify"),
        ("GET", "/sagacity/sagas"),
        ("GET", "/sagacity/sagas/order-6"),
        ("GET", "/sagacity/me"),
        ("GET", "/sagacity/openapi.json"),
        ("GET", "/sagacity"),
    ]:
        for query in ("bogus=1", "bogus", "approver=mallory"):
            response = await api.request(method, f"{url}?{query}", json={"payload": PAYLOAD}, headers=root)
            assert response.status_code == 400, (url, query, response.text)
            assert "unknown query parameter" in response.json()["error"]
    assert (await store_sg.entries_async("order-6")) == before
    unauthenticated = await api.get("/sagacity/sagas?bogus=1")
    assert unauthenticated.status_code == 401  # who you are is checked first
    dashboard = await api.get("/sagacity/ui/?utm_source=mail")
    assert dashboard.status_code == 200  # static files have nothing to filter
