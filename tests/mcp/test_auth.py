"""The proxy's agent endpoint as an OAuth 2.1 resource server: bearer JWTs checked against a JWKS
file (issuer, audience, expiry, signature), 401 with ``WWW-Authenticate`` otherwise, the protected
resource metadata, scopes, and sagas that belong to the token's principal. Driven by the MCP SDK's
own client over streamable HTTP against the proxy as a real process."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp_tools import Setup, agent, http_proxy, make_setup, text_of

from sagacity import Sagacity
from sagacity.testing import tool_entries

pytestmark = pytest.mark.timeout(240)

ISSUER = "https://auth.example.com"


@dataclass
class Issuer:
    """A signing key (the authorization server's) and the JWKS the proxy is given (public only)."""

    key: Any
    kid: str

    def mint(
        self,
        sub: str,
        audience: str,
        *,
        scope: str = "sagacity:call sagacity:commit sagacity:rollback",
        expires_in: int = 300,
        key: Any = None,
        issuer: str = ISSUER,
    ) -> str:
        now = int(time.time())
        claims = {
            "iss": issuer,
            "sub": sub,
            "aud": audience,
            "iat": now,
            "exp": now + expires_in,
            "scope": scope,
        }
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": self.kid})


@dataclass
class Gateway:
    setup: Setup
    url: str
    issuer: Issuer

    def token(self, sub: str, **kwargs: Any) -> str:
        return self.issuer.mint(sub, self.url, **kwargs)

    def entries(self, saga: str) -> list[Any]:
        with Sagacity(self.setup.db_url) as sg:
            return sg.entries(saga)

    def saga_ids(self) -> list[str]:
        with Sagacity(self.setup.db_url) as sg:
            return sg.saga_ids()


def _jwks(key: Any, kid: str) -> dict[str, Any]:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {"keys": [{**public, "kid": kid, "use": "sig", "alg": "RS256"}]}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("auth")
    setup = make_setup(tmp)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp / "jwks.json").write_text(json.dumps(_jwks(key, "k1")))
    auth = ("--jwks-file", str(tmp / "jwks.json"), "--issuer", ISSUER)
    with http_proxy(setup, "--settle-interval", "0", agent_auth=auth) as (url, _port):
        yield Gateway(setup, url, Issuer(key, "k1"))


def _saga(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def _call_with(gateway: Gateway, token: str | None, saga: str) -> tuple[BaseException | None, list[int]]:
    """Connect with ``token`` and call a read-only tool in ``saga``: the error the SDK raised, and
    the HTTP statuses its requests got."""
    statuses: list[int] = []
    try:
        with agent(gateway.url, "auto", token=token, statuses=statuses) as a:
            a.call("get_balance", {"account": "acct_1"}, saga=saga)
    except Exception as exc:
        return exc, statuses
    return None, statuses


def test_the_protected_resource_metadata_names_the_issuer(gateway: Gateway) -> None:
    """RFC 9728 metadata at /.well-known/oauth-protected-resource/mcp: the resource and its issuer."""
    base = gateway.url.removesuffix("/mcp")
    meta = httpx.get(f"{base}/.well-known/oauth-protected-resource/mcp", timeout=30).json()
    assert meta["resource"] == gateway.url
    assert meta["authorization_servers"] == [f"{ISSUER}/"] or meta["authorization_servers"] == [ISSUER]


@pytest.mark.parametrize(
    "case", ["none", "bad signature", "wrong audience", "expired", "wrong issuer", "garbage"]
)
def test_a_request_without_a_valid_token_is_401_and_journals_nothing(gateway: Gateway, case: str) -> None:
    """No token, a token signed by another key, for another audience, expired, from another
    issuer, or not a JWT: 401 with ``WWW-Authenticate: Bearer ... resource_metadata=...``, the SDK
    client cannot connect, and the journal holds nothing of the saga."""
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = {
        "none": None,
        "bad signature": gateway.issuer.mint("mallory", gateway.url, key=other),
        "wrong audience": gateway.issuer.mint("mallory", "http://elsewhere.example/mcp"),
        "expired": gateway.issuer.mint("mallory", gateway.url, expires_in=-3600),
        "wrong issuer": gateway.issuer.mint("mallory", gateway.url, issuer="https://evil.example"),
        "garbage": "not-a-jwt-at-all-0123456789",
    }[case]
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    raw = httpx.post(gateway.url, json=body, headers=headers, timeout=30)
    assert raw.status_code == 401
    challenge = raw.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert "resource_metadata=" in challenge
    saga = _saga(f"refused-{case.replace(' ', '-')}")
    error, statuses = _call_with(gateway, token, saga)
    assert error is not None, "the SDK client connected without a valid token"
    assert statuses, "the SDK client sent nothing"
    assert set(statuses) == {401}, statuses
    assert gateway.entries(saga) == []
    assert saga not in gateway.saga_ids()


def test_a_valid_token_works_and_its_principal_is_in_the_chain(gateway: Gateway) -> None:
    """A token for this resource from the issuer: calls run and are journaled; the held payout's
    gate names the token's subject as its requester."""
    saga = _saga("alice")
    with agent(gateway.url, "auto", token=gateway.token("alice@example.com")) as a:
        balance = a.call("get_balance", {"account": "acct_1"}, saga=saga)
        assert not balance.is_error, text_of(balance)
        held = a.call("send_payout", {"to": "acct_9", "amount": 900}, saga=saga)
        assert "approval" in text_of(held).lower()
    gates = [e for e in gateway.entries(saga) if e.phase == "AWAITING_APPROVAL"]
    assert len(gates) == 1
    assert "requester=alice@example.com" in gates[0].payload.split("\n")
    start = gateway.entries(saga)[0]  # the saga's START: it belongs to the token's subject
    assert (start.seq, start.tool_name, start.phase) == (1, "sagacity:saga", "INTENT")
    assert json.loads(start.input)["principal"] == "alice@example.com"


def test_another_principal_naming_the_saga_is_told_there_is_no_such_saga(gateway: Gateway) -> None:
    """Bob's client names Alice's saga id: every call, and above all the rollback, answers "no
    such saga"; nothing is journaled and Alice's charge is not refunded."""
    saga = _saga("owned")
    with agent(gateway.url, "auto", token=gateway.token("alice@example.com")) as alice:
        charged = alice.call("charge", {"customer": f"cus-{saga}", "amount": 100}, saga=saga)
        assert not charged.is_error, text_of(charged)
    before = gateway.entries(saga)
    refunds = len(gateway.setup.ledger.events("refund"))
    with agent(gateway.url, "auto", token=gateway.token("bob@example.com")) as bob:
        for name, args in [
            ("get_balance", {"account": "acct_1"}),
            ("sagacity_status", {}),
            ("sagacity_commit", {}),
            ("sagacity_rollback", {"reason": "undo alice"}),
        ]:
            answer = bob.call(name, args, saga=saga)
            assert answer.is_error, (name, text_of(answer))
            assert "no such saga" in text_of(answer), (name, text_of(answer))
    assert gateway.entries(saga) == before
    assert len(gateway.setup.ledger.events("refund")) == refunds
    with agent(gateway.url, "auto", token=gateway.token("root", scope="sagacity:admin")) as admin:
        status = admin.call("sagacity_status", {}, saga=saga)
        assert not status.is_error, text_of(status)


def test_scopes_say_what_a_client_may_do(gateway: Gateway) -> None:
    """A token with only ``sagacity:call`` calls tools but may neither commit nor roll back."""
    saga = _saga("scoped")
    with agent(gateway.url, "auto", token=gateway.token("carol@example.com", scope="sagacity:call")) as a:
        assert not a.call("get_balance", {"account": "acct_1"}, saga=saga).is_error
        for name in ("sagacity_rollback", "sagacity_commit"):
            answer = a.call(name, {}, saga=saga)
            assert answer.is_error
            assert "does not grant" in text_of(answer)
    assert [(e.tool_name, e.phase) for e in gateway.entries(saga) if e.tool_name != "sagacity:saga"] == [
        ("get_balance", "INTENT"),
        ("get_balance", "EXECUTED"),
    ]


def test_a_token_without_scopes_calls_nothing(gateway: Gateway, tmp_path: Path) -> None:
    saga = _saga("unscoped")
    with agent(gateway.url, "auto", token=gateway.token("dave@example.com", scope="")) as a:
        answer = a.call("get_balance", {"account": "acct_1"}, saga=saga)
        assert answer.is_error
        assert "sagacity:call" in text_of(answer)
    assert gateway.entries(saga) == []


def test_the_docs_setup_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/mcp.md's "Over HTTP" setup: its Python mints the JWKS and the token, its command starts
    the proxy (on a free port instead of 8765, in front of the tests' payments server), and its
    client snippet's call is journaled."""
    import os
    import re
    import shlex
    import signal
    import subprocess
    import sys

    import anyio
    from mcp_tools import PAYMENTS, SAGACITY, free_port, wait_for_port

    text = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text(encoding="utf-8")
    section = text.split("## Over HTTP: agents authenticate", 1)[1].split("\n## ", 1)[0]
    mint, client = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    [command] = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    port = str(free_port())
    setup = make_setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(mint.replace("8765", port), "docs/mcp.md", "exec"), namespace)
    argv = shlex.split(command.replace("\\\n", " ").replace("8765", port))
    assert argv[:3] == ["sagacity", "mcp", "proxy"]
    upstream = argv.index("--")
    args = [
        {"policy.toml": str(setup.policy), "sqlite:///journal.db": setup.db_url}.get(a, a)
        for a in argv[3:upstream]
    ]
    env = {**os.environ, **setup.env}
    with (tmp_path / "proxy.log").open("w") as log:
        proc = subprocess.Popen(
            [SAGACITY, "mcp", "proxy", *args, "--", sys.executable, str(PAYMENTS)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(int(port), proc)
            exec(compile(client.replace("8765", port), "docs/mcp.md", "exec"), namespace)
            anyio.run(namespace["main"], namespace["token"])
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    with Sagacity(setup.db_url) as sg:
        assert [(e.tool_name, e.phase) for e in tool_entries(sg, "order-7")] == [
            ("get_balance", "INTENT"),
            ("get_balance", "EXECUTED"),
        ]


def test_a_token_expired_within_the_clock_skew_is_accepted(gateway: Gateway) -> None:
    """mcp.md promises 30 s of clock skew on ``exp``: a token that expired 10 s ago by this
    clock is accepted (the SDK's middleware checks the expiry again, and must use the same skew);
    one that expired 60 s ago is not."""
    saga = _saga("skew")
    with agent(gateway.url, "auto", token=gateway.token("erin@example.com", expires_in=-10)) as a:
        answer = a.call("get_balance", {"account": "acct_1"}, saga=saga)
        assert not answer.is_error, text_of(answer)
    error, statuses = _call_with(gateway, gateway.token("erin@example.com", expires_in=-60), _saga("late"))
    assert error is not None
    assert set(statuses) == {401}, statuses


@contextmanager
def jwks_server(path: Path) -> Iterator[tuple[str, list[str]]]:
    """An authorization server's JWKS endpoint serving ``path`` as it is now; every request's
    path is noted."""
    fetched: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            body = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json", fetched
    finally:
        server.shutdown()
        server.server_close()


def test_a_key_rotated_in_behind_a_jwks_url_is_used_at_once(tmp_path: Path) -> None:
    """``--jwks-url``: the proxy fetched the key set for the first token; the issuer then adds a
    new key and signs with it. The first token naming it makes the proxy fetch the set again at
    once and is accepted (no refusal while a refetch guard runs out)."""
    setup = make_setup(tmp_path)
    old = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    new = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(_jwks(old, "2026-11")))
    with jwks_server(jwks) as (jwks_url, fetched):
        auth = ("--jwks-url", jwks_url, "--issuer", ISSUER)
        with http_proxy(setup, "--settle-interval", "0", agent_auth=auth) as (url, _port):
            first = Issuer(old, "2026-11").mint("frank@example.com", url)
            with agent(url, "auto", token=first) as a:
                assert not a.call("get_balance", {"account": "acct_1"}, saga=_saga("old")).is_error
            seen = len(fetched)
            assert seen >= 1
            both = {"keys": _jwks(old, "2026-11")["keys"] + _jwks(new, "2026-12")["keys"]}
            jwks.write_text(json.dumps(both))
            rotated = Issuer(new, "2026-12").mint("frank@example.com", url)
            saga = _saga("rotated")
            with agent(url, "auto", token=rotated) as a:
                answer = a.call("get_balance", {"account": "acct_1"}, saga=saga)
                assert not answer.is_error, text_of(answer)
            assert len(fetched) == seen + 1  # fetched once more for the new key, then cached
    with Sagacity(setup.db_url) as sg:
        assert json.loads(sg.entries(saga)[0].input)["principal"] == "frank@example.com"


def test_static_agent_tokens_publish_no_resource_metadata(tmp_path: Path) -> None:
    """As mcp.md says for static tokens (no authorization server to name): a request without a
    valid token gets 401 ``Bearer`` without ``resource_metadata``, and no metadata is served."""
    setup = make_setup(tmp_path)
    with http_proxy(setup, "--settle-interval", "0") as (url, _port):
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        raw = httpx.post(url, json=body, headers={**headers, "Authorization": "Bearer nope"}, timeout=30)
        assert raw.status_code == 401
        assert raw.headers["www-authenticate"].startswith("Bearer ")
        assert "resource_metadata" not in raw.headers["www-authenticate"]
        base = url.removesuffix("/mcp")
        assert httpx.get(f"{base}/.well-known/oauth-protected-resource/mcp", timeout=30).status_code == 404
