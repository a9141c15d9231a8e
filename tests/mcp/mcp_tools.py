"""Helpers for the MCP gateway tests: the fake payments server, its ledger, the proxy as a real
process, and the SDK's own client driven from synchronous tests through an anyio portal."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal

HERE = Path(__file__).parent
PAYMENTS = HERE / "payments_server.py"
API_KEY = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"
SAGA_KEY = "io.sagacity/saga"
#: The installed console script, as an operator (or a desktop client's config) runs it.
SAGACITY = shutil.which("sagacity", path=str(Path(sys.executable).parent)) or "sagacity"
TOKEN = "mcp-approver-token-0123456789"
TOKENS = {"tokens": {TOKEN: {"name": "alice@example.com", "roles": ["approver", "auditor"]}}}
#: The agents' static bearer token for the proxy's --listen endpoint (every scope but admin).
AGENT_TOKEN = "mcp-agent-token-0123456789abc"
AGENT_TOKENS = {
    "tokens": {
        AGENT_TOKEN: {
            "name": "agent-a",
            "scopes": ["sagacity:call", "sagacity:commit", "sagacity:rollback"],
        }
    }
}

POLICY = """\
# The tests' policy: charges and tickets are undone through the server's own tools; payouts (and
# anything else not read-only) wait for approval because nothing here says how to undo them.
[upstream]
env = { PAYMENTS_API_KEY = "${PAYMENTS_API_KEY}", PAYMENTS_LEDGER = "${PAYMENTS_LEDGER}" }
timeout = 20

[tools.charge]
undo.tool = "refund"
undo.arguments = { charge_id = "{result.structured.charge_id}", reason = "rollback of {saga.id}" }

[tools.create_ticket]
undo.tool = "close_ticket"
undo.arguments = { ticket_id = "{result.json.ticket_id}", note = "undo of {args.title}" }

[tools.refund]
kind = "hidden"

[tools.settle]
undo = { tool = "close_ticket", arguments = { ticket_id = "{args.batch}" } }
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, proc: subprocess.Popen[Any], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the process exited with {proc.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {port} after {timeout}s")


def wait_until(predicate: Any, timeout: float = 30.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not happen within {timeout}s")


@dataclass
class Ledger:
    """What the fake payments server really did (its JSON Lines file), seen from outside."""

    path: Path

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
        return [r for r in rows if event is None or r["event"] == event]

    def wait_for(self, event: str, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        wait_until(lambda: len(self.events(event)) >= count, timeout, f"{count} {event!r} event(s)")
        return self.events(event)


@dataclass
class Setup:
    """One test's files: the policy, the journal, the ledger, the tokens for --api."""

    tmp: Path
    db_url: str
    policy: Path
    ledger: Ledger
    tokens: Path
    agent_tokens: Path

    @property
    def env(self) -> dict[str, str]:
        """What the proxy needs in its environment (the policy hands it on to the upstream)."""
        return {"PAYMENTS_API_KEY": API_KEY, "PAYMENTS_LEDGER": str(self.ledger.path)}


def make_setup(tmp: Path, db_url: str | None = None, policy: str = POLICY) -> Setup:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "policy.toml").write_text(policy)
    (tmp / "tokens.json").write_text(json.dumps(TOKENS))
    (tmp / "agent-tokens.json").write_text(json.dumps(AGENT_TOKENS))
    return Setup(
        tmp,
        db_url or f"sqlite:///{tmp}/journal.db",
        tmp / "policy.toml",
        Ledger(tmp / "ledger.jsonl"),
        tmp / "tokens.json",
        tmp / "agent-tokens.json",
    )


def proxy_args(setup: Setup, *extra: str, upstream: list[str] | None = None) -> list[str]:
    """``sagacity mcp proxy ...`` arguments (without the executable)."""
    up = upstream if upstream is not None else ["--", sys.executable, str(PAYMENTS)]
    return ["mcp", "proxy", "--policy", str(setup.policy), "--db", setup.db_url, *extra, *up]


@contextmanager
def http_proxy(
    setup: Setup, *extra: str, upstream: list[str] | None = None, agent_auth: tuple[str, ...] | None = None
) -> Iterator[tuple[str, int]]:
    """The proxy as a real process serving streamable HTTP (and its API under /sagacity); agents
    authenticate with ``agent_auth`` (default: the static ``AGENT_TOKEN``)."""
    port = free_port()
    env = {**os.environ, **setup.env}
    auth = agent_auth if agent_auth is not None else ("--agent-tokens-file", str(setup.agent_tokens))
    args = proxy_args(
        setup,
        "--listen",
        str(port),
        *auth,
        "--api",
        "--tokens-file",
        str(setup.tokens),
        *extra,
        upstream=upstream,
    )
    with (setup.tmp / f"proxy-{port}.log").open("w") as log:
        proc = subprocess.Popen([SAGACITY, *args], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port(port, proc)
            yield f"http://127.0.0.1:{port}/mcp", port
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def stdio_params(setup: Setup, *extra: str, upstream: list[str] | None = None) -> Any:
    """How an MCP client (a desktop app's config) starts the proxy over stdio."""
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=SAGACITY, args=proxy_args(setup, *extra, upstream=upstream), env=setup.env
    )


class Agent:
    """The SDK's own client, connected, driven from synchronous test code."""

    def __init__(self, portal: BlockingPortal, client: Any) -> None:
        self.portal = portal
        self.client = client

    @property
    def protocol_version(self) -> str:
        version: str = self.client.protocol_version
        return version

    def call(self, name: str, arguments: dict[str, Any] | None = None, *, saga: str | None = None) -> Any:
        meta = {SAGA_KEY: saga} if saga is not None else None
        return self.portal.call(
            partial(self.client.call_tool, name, arguments or {}, read_timeout_seconds=60, meta=meta)
        )

    def list_tools(self) -> list[Any]:
        return list(self.portal.call(self.client.list_tools).tools)


@contextmanager
def agent(
    server: Any, mode: str, token: str | None = AGENT_TOKEN, statuses: list[int] | None = None
) -> Iterator[Agent]:
    """Connect the SDK client (``mode`` "legacy" = 2025-11-25, "auto" = 2026-07-28) to ``server``
    (a URL or stdio parameters); over HTTP it sends ``token`` as its bearer token (none: None),
    and the HTTP status of every response it got is appended to ``statuses``."""
    from mcp import Client

    with start_blocking_portal() as portal:
        if isinstance(server, str):
            with portal.wrap_async_context_manager(http_client(server, mode, token, statuses=statuses)) as c:
                yield Agent(portal, c)
            return
        client = Client(server, mode=mode, read_timeout_seconds=60)
        with portal.wrap_async_context_manager(client):
            yield Agent(portal, client)


@asynccontextmanager
async def http_client(
    url: str,
    mode: str,
    token: str | None = AGENT_TOKEN,
    *,
    statuses: list[int] | None = None,
    read_timeout_seconds: float = 60,
) -> AsyncIterator[Any]:
    """The SDK's client over streamable HTTP, sending ``token`` as its bearer token (None: no
    header); the HTTP status of every response it gets is appended to ``statuses``."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from mcp import Client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"} if token else None)
    if statuses is not None:

        async def note(response: Any) -> None:
            statuses.append(response.status_code)

        http.event_hooks["response"].append(note)
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode=mode, read_timeout_seconds=read_timeout_seconds) as client:
        yield client


def text_of(result: Any) -> str:
    return " ".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def sagacity_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Another process: the operator's ``sagacity`` command."""
    return subprocess.run([SAGACITY, *args], capture_output=True, text=True, timeout=60, check=False)


def api(port: int, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
    """The Sagacity HTTP API served by the proxy's process (--api), as alice."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    return httpx.request(
        method, f"http://127.0.0.1:{port}/sagacity{path}", json=body, headers=headers, timeout=60
    )
