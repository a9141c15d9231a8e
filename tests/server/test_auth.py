"""Authentication: tokens from files and the environment, 401/403, roles, the opt-in proxy header, CSRF."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from sagacity import Phase, Sagacity
from sagacity.errors import ConfigurationError
from sagacity.server import (
    FirstOf,
    InsecureNoAuth,
    Principal,
    ProxyHeaderAuth,
    TokenAuth,
    auth_from_environment,
    create_app,
    hash_token,
)

ALICE = {"Authorization": "Bearer alice-token-0123456789"}
CAROL = {"Authorization": "Bearer carol-token-0123456789"}
ROOT = {"Authorization": "Bearer root-token-0123456789a"}
NOBODY = {"Authorization": "Bearer nobody-token-012345678"}

APPROVER_ROUTES = [
    ("GET", "/sagacity/approvals"),
    ("GET", "/sagacity/approvals/order-1"),
    ("GET", "/sagacity/requests/order-1/3"),
    ("POST", "/sagacity/approve/order-1/3"),
    ("POST", "/sagacity/reject/order-1/3"),
    ("POST", "/sagacity/resume/order-1/3"),
]
AUDITOR_ROUTES = [
    ("GET", "/sagacity/audit/order-1"),
    ("GET", "/sagacity/audit/order-1/verify"),
    ("GET", "/sagacity/sagas"),
    ("GET", "/sagacity/sagas/order-1"),
]


def client_for(app: Any, client: tuple[str, int] = ("127.0.0.1", 123)) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app, client=client), base_url="http://testserver")


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "path"), APPROVER_ROUTES + AUDITOR_ROUTES + [("GET", "/sagacity/me")])
async def test_no_credentials_is_401_with_a_bearer_challenge(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    """Every API route answers 401 with WWW-Authenticate: Bearer when no token is sent."""
    response = await client.request(method, path)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith('Bearer realm="sagacity"')
    assert "Bearer" in response.json()["error"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "header", ["Bearer wrong-token-0123456789", "Basic YWxpY2U6cHc=", "Bearer", "alice-token-0123456789"]
)
async def test_wrong_or_malformed_credentials_are_401(client: httpx.AsyncClient, header: str) -> None:
    """An unknown token or a header that is not 'Bearer <token>' is 401 invalid_token."""
    response = await client.get("/sagacity/approvals", headers={"Authorization": header})
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "path"), APPROVER_ROUTES)
async def test_approver_routes_refuse_an_auditor(client: httpx.AsyncClient, method: str, path: str) -> None:
    """Listing, approving, rejecting and resuming need the approver role: an auditor gets 403."""
    response = await client.request(method, path, headers=CAROL)
    assert response.status_code == 403
    assert "'approver' role" in response.json()["error"]


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "path"), AUDITOR_ROUTES)
async def test_auditor_routes_refuse_an_approver(client: httpx.AsyncClient, method: str, path: str) -> None:
    """Journals, exports, verification and the saga list need the auditor role: an approver gets 403."""
    response = await client.request(method, path, headers=ALICE)
    assert response.status_code == 403
    assert "'auditor' role" in response.json()["error"]


@pytest.mark.anyio
async def test_a_principal_without_roles_can_only_ask_who_it_is(client: httpx.AsyncClient) -> None:
    """A known token with no roles is authenticated (GET /me) but 403 everywhere else."""
    me = await client.get("/sagacity/me", headers=NOBODY)
    assert me.json() == {"name": "nobody@example.com", "roles": [], "insecure": False}
    for method, path in APPROVER_ROUTES + AUDITOR_ROUTES:
        assert (await client.request(method, path, headers=NOBODY)).status_code == 403


@pytest.mark.anyio
async def test_admin_holds_every_role(
    client: httpx.AsyncClient, sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """An admin lists, audits and approves; the approval is journaled under the admin's name."""
    seq = await gate("order-1")
    assert (await client.get("/sagacity/sagas", headers=ROOT)).status_code == 200
    assert (await client.get("/sagacity/approvals", headers=ROOT)).status_code == 200
    assert (await client.post(f"/sagacity/approve/order-1/{seq}", headers=ROOT)).status_code == 200
    approved = [e.payload for e in (await sg.entries_async("order-1")) if e.phase == Phase.APPROVED]
    assert approved == ["approver=root@example.com"]


@pytest.mark.anyio
async def test_cross_site_browser_posts_are_refused(
    client: httpx.AsyncClient, gate: Callable[..., Any]
) -> None:
    """A POST a browser marks as cross-site (or from a foreign Origin) is 403 even with a valid token."""
    seq = await gate("order-1")
    for extra in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}):
        response = await client.post(f"/sagacity/approve/order-1/{seq}", headers={**ALICE, **extra})
        assert response.status_code == 403
        assert "cross-origin" in response.json()["error"]
    same = {"Sec-Fetch-Site": "same-origin", "Origin": "http://testserver"}
    assert (
        await client.post(f"/sagacity/approve/order-1/{seq}", headers={**ALICE, **same})
    ).status_code == 200


def test_create_app_refuses_to_start_without_credentials(
    sg: Sagacity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without auth, tokens in the environment or the insecure flag, create_app raises ConfigurationError."""
    monkeypatch.delenv("SAGACITY_TOKENS", raising=False)
    monkeypatch.delenv("SAGACITY_TOKENS_FILE", raising=False)
    with pytest.raises(ConfigurationError, match="needs credentials"):
        create_app(sg)
    with pytest.raises(ConfigurationError, match="not both"):
        create_app(
            sg,
            auth=TokenAuth({"x" * 20: {"name": "a", "roles": []}}),
            insecure_no_auth_i_know_what_i_am_doing=True,
        )


@pytest.mark.anyio
async def test_insecure_flag_makes_everyone_an_anonymous_admin(
    sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """With the insecure flag every caller is 'anonymous' (journaled so) and /me says it is insecure."""
    app = create_app(sg, insecure_no_auth_i_know_what_i_am_doing=True)
    seq = await gate("order-1")
    async with client_for(app) as c:
        assert (await c.get("/sagacity/me")).json()["insecure"] is True
        response = await c.post(f"/sagacity/approve/order-1/{seq}", json={"approver": "alice"})
    assert response.json()["approverIdentity"] == "anonymous"


@pytest.mark.anyio
async def test_tokens_from_the_environment(sg: Sagacity, monkeypatch: pytest.MonkeyPatch) -> None:
    """$SAGACITY_TOKENS (JSON, tokens may be hashed) configures create_app when no auth is passed."""
    token = "env-token-abcdefghijkl"
    document = {"tokens": {hash_token(token): {"name": "dora", "roles": ["auditor"]}}}
    monkeypatch.setenv("SAGACITY_TOKENS", json.dumps(document))
    monkeypatch.delenv("SAGACITY_TOKENS_FILE", raising=False)
    async with client_for(create_app(sg)) as c:
        me = await c.get("/sagacity/me", headers={"Authorization": f"Bearer {token}"})
        wrong = await c.get("/sagacity/me", headers={"Authorization": f"Bearer {hash_token(token)}"})
    assert me.json()["name"] == "dora"
    assert wrong.status_code == 401


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_tokens_file_json_and_toml(tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tokens file in JSON or TOML maps plain or sha256: tokens to principals; the env var names it."""
    plain, hashed = "plain-token-0123456789", "hashed-token-012345678"
    digest = hashlib.sha256(hashed.encode()).hexdigest()
    path = tmp_path / f"tokens{suffix}"
    if suffix == ".toml":
        path.write_text(
            f'[tokens."{plain}"]\nname = "alice"\nroles = ["approver"]\n\n'
            f'[tokens."sha256:{digest}"]\nname = "bob"\nroles = ["auditor", "approver"]\n'
        )
    else:
        path.write_text(
            json.dumps(
                {
                    "tokens": {
                        plain: {"name": "alice", "roles": ["approver"]},
                        f"sha256:{digest}": {"name": "bob", "roles": ["auditor", "approver"]},
                    }
                }
            )
        )
    monkeypatch.setenv("SAGACITY_TOKENS_FILE", str(path))
    monkeypatch.delenv("SAGACITY_TOKENS", raising=False)
    auth = auth_from_environment()
    assert auth is not None
    assert auth.lookup(plain) == Principal("alice", frozenset({"approver"}))
    assert auth.lookup(hashed) == Principal("bob", frozenset({"auditor", "approver"}))
    assert auth.lookup(f"sha256:{digest}") is None
    assert auth.lookup("nope") is None


@pytest.mark.parametrize(
    ("tokens", "fragment"),
    [
        ({}, "no tokens"),
        ({"short": {"name": "a", "roles": []}}, "at least 16 characters"),
        ({"x" * 20: {"name": "a", "roles": ["root"]}}, "unknown role"),
        ({"x" * 20: {"name": "", "roles": []}}, "name must be"),
        ({"x" * 20: {"name": "a\nb", "roles": []}}, "name must be"),
        ({"x" * 20: {"name": "a", "roles": "approver"}}, "roles must be a list"),
        ({"sha256:abc": {"name": "a", "roles": []}}, "64 lowercase hex"),
        ({"x" * 20: {"name": "a"}, hash_token("x" * 20): {"name": "b"}}, "listed twice"),
        ({"x" * 20: "alice"}, "expected {name, roles}"),
    ],
)
def test_bad_token_configuration_is_refused_without_echoing_tokens(
    tokens: dict[str, Any], fragment: str
) -> None:
    """A misconfigured token is a ConfigurationError saying what is wrong, never quoting a token."""
    with pytest.raises(ConfigurationError, match=fragment) as info:
        TokenAuth(tokens)
    assert "x" * 16 not in str(info.value)


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        ("tokens.json", "{not json", "not valid JSON"),
        ("tokens.toml", "[tokens\n", "not valid TOML"),
        ("tokens.json", '{"principals": []}', "expected"),
    ],
)
def test_unreadable_tokens_file_is_refused(tmp_path: Path, name: str, text: str, fragment: str) -> None:
    """A tokens file that does not parse, or has no tokens table, is a ConfigurationError naming the file."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=fragment):
        TokenAuth.from_file(path)
    with pytest.raises(ConfigurationError, match="cannot read"):
        TokenAuth.from_file(tmp_path / "missing.json")


@pytest.mark.anyio
async def test_proxy_header_is_trusted_only_when_opted_in_and_from_the_proxy(
    sg: Sagacity, gate: Callable[..., Any]
) -> None:
    """X-Forwarded-User counts only with ProxyHeaderAuth and only from the proxy's address."""
    tokens = TokenAuth({"alice-token-0123456789": {"name": "alice", "roles": ["approver"]}})
    proxied = {"X-Forwarded-User": "erin@example.com", "X-Forwarded-Roles": "approver, bogus"}
    seq = await gate("order-1")
    async with client_for(create_app(sg, auth=tokens)) as c:
        assert (await c.get("/sagacity/approvals", headers=proxied)).status_code == 401
    app = create_app(sg, auth=FirstOf(tokens, ProxyHeaderAuth(trusted_clients=["10.0.0.5"])))
    async with client_for(app, client=("10.0.0.5", 4000)) as c:
        me = (await c.get("/sagacity/me", headers=proxied)).json()
        approved = await c.post(f"/sagacity/approve/order-1/{seq}", headers=proxied)
        by_token = await c.get("/sagacity/me", headers=ALICE)
    assert me == {"name": "erin@example.com", "roles": ["approver"], "insecure": False}
    assert approved.json()["approverIdentity"] == "erin@example.com"
    assert by_token.json()["name"] == "alice"
    async with client_for(app, client=("10.9.9.9", 4000)) as c:
        spoofed = await c.get("/sagacity/me", headers=proxied)
    assert spoofed.status_code == 401
    assert "only trusted from the configured proxy" in spoofed.json()["error"]


@pytest.mark.anyio
async def test_proxy_user_names_are_utf8_and_one_line(sg: Sagacity, gate: Callable[..., Any]) -> None:
    """A proxied UTF-8 name is journaled as sent; one that could add a payload line, or not UTF-8, is 401."""
    seq = await gate("order-1")
    app = create_app(sg, auth=ProxyHeaderAuth(trusted_clients=["10.0.0.5"]))
    roles = ("x-forwarded-roles", b"approver")
    async with client_for(app, client=("10.0.0.5", 4000)) as c:
        zoe = [("x-forwarded-user", "zoë 🦜".encode()), roles]
        approved = await c.post(f"/sagacity/approve/order-1/{seq}", headers=zoe)
        forged = [("x-forwarded-user", "bob\u2028approver=ceo".encode()), roles]
        refused = await c.get("/sagacity/me", headers=forged)
        not_utf8 = [("x-forwarded-user", "zo\xeb".encode("latin-1")), roles]
        latin1 = await c.get("/sagacity/me", headers=not_utf8)
    assert approved.status_code == 200, approved.text
    assert approved.json()["approverIdentity"] == "zoë 🦜"
    assert [e.payload for e in (await sg.entries_async("order-1")) if e.phase == "APPROVED"] == [
        "approver=zoë 🦜"
    ]
    assert refused.status_code == 401
    assert "line separators" in refused.json()["error"]
    assert latin1.status_code == 401
    assert "not UTF-8" in latin1.json()["error"]


def test_insecure_principal_is_an_admin() -> None:
    """InsecureNoAuth's principal holds every role (admin implies approver and auditor)."""
    who = InsecureNoAuth.principal
    assert who.has("approver")
    assert who.has("auditor")


def test_missing_fastapi_names_the_extra() -> None:
    """Importing sagacity.server without FastAPI raises a ConfigurationError naming the server extra."""
    code = (
        "import sys; sys.modules['fastapi'] = None\n"
        "try:\n    import sagacity.server\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("ConfigurationError")
    assert "pip install 'sagacity[server]'" in out
