"""Helpers for deciding from messages against a real ``sagacity serve``: its configuration, Slack's
signing (slack-sdk's own), a local fake of Slack's ``response_url``, and reading the journal."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from slack_sdk.signature import SignatureVerifier

from sagacity import Sagacity
from sagacity._links import email_link, slack_value

from .conftest import free_port, serve_processes

HERE = Path(__file__).parent
SAGACITY = shutil.which("sagacity", path=str(Path(sys.executable).parent)) or "sagacity"
LINK_SECRET = "link-secret-for-tests-0123456789abcdef"
SLACK_SECRET = "slack-signing-secret-for-tests"
ALICE_TOKEN = "alice-messages-token-0123456789"
BOB_TOKEN = "bob-messages-token-0123456789ab"
#: Slack users: U_ALICE and U_BOB are mapped; U_EVE is not.
SLACK_USERS = {"U_ALICE": "alice@example.com", "U_BOB": "bob@example.com"}
#: finance may decide srv_wire's gates; bob is not in it.
POLICY = """
[groups]
finance = ["alice@example.com", "dave@example.com"]

[approvers]
srv_wire = ["group:finance"]
"""


@contextmanager
def messages_server(tmp_path: Path, db: str, *, policy: bool = True) -> Iterator[str]:
    """``sagacity serve`` on ``db`` as its own process, with Slack and email links on, alice and
    bob as approvers, the X-Forwarded-User proxy header trusted and (``policy``) the scopes above."""
    with messages_servers(tmp_path, db, 1, policy=policy) as [url]:
        yield url


@contextmanager
def messages_servers(tmp_path: Path, db: str, count: int, *, policy: bool = True) -> Iterator[list[str]]:
    """``count`` servers as :func:`messages_server`'s, on one journal, started together."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(
        f'[tokens."{ALICE_TOKEN}"]\nname = "alice@example.com"\nroles = ["approver"]\n\n'
        f'[tokens."{BOB_TOKEN}"]\nname = "bob@example.com"\nroles = ["approver"]\n'
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "SAGACITY_LINK_SECRET": LINK_SECRET,
        "SAGACITY_SLACK_SIGNING_SECRET": SLACK_SECRET,
        "SAGACITY_SLACK_USERS": json.dumps(SLACK_USERS),
    }
    env.pop("SAGACITY_TOKENS", None)
    command = [
        SAGACITY, "serve", "--db", db, "--import", "server_tools", "--host", "127.0.0.1",
        "--tokens-file", str(tokens), "--log-level", "warning", "--proxy-user-header", "X-Forwarded-User",
    ]  # fmt: skip
    if policy:
        path = tmp_path / "policy.toml"
        path.write_text(POLICY)
        command += ["--policy", str(path)]
    with serve_processes([[*command, "--port", str(free_port())] for _ in range(count)], env) as urls:
        yield urls


class SlackFake:
    """A local stand-in for Slack's ``response_url``: records every message posted to it."""

    def __init__(self) -> None:
        received = self.received = []  # type: list[dict[str, Any]]

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/actions/T1/B1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def slack_click(user: str, action_id: str, saga_id: str, seq: int, sha256: str, response_url: str) -> bytes:
    """The form body Slack posts when ``user`` clicks one of our buttons."""
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower()},
        "response_url": response_url,
        "actions": [{"action_id": action_id, "value": slack_value(saga_id, seq, sha256), "type": "button"}],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def slack_headers(body: bytes, *, secret: str = SLACK_SECRET, age: float = 0) -> dict[str, str]:
    """Slack's signature headers over ``body``, computed with slack-sdk as Slack does."""
    timestamp = str(int(time.time() - age))
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    return {
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature,
        "Content-Type": "application/x-www-form-urlencoded",
    }


def post_slack(http: httpx.Client, body: bytes, **signing: Any) -> httpx.Response:
    return http.post("/sagacity/slack/actions", content=body, headers=slack_headers(body, **signing))


def link(base: str, approver: str, saga_id: str, seq: int, sha256: str, ttl: float = 3600) -> str:
    return email_link(
        f"{base}/sagacity", LINK_SECRET, approver=approver, saga_id=saga_id, seq=seq, sha256=sha256,
        ttl=timedelta(seconds=ttl),
    )  # fmt: skip


def token_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["token"][0]


def confirm(
    http: httpx.Client, url: str, identity: str, decision: str = "approve", reason: str = "", **headers: str
) -> httpx.Response:
    """POST the confirmation form of the email link ``url`` as a browser would."""
    form = {"token": token_of(url), "identity": identity, "decision": decision, "reason": reason}
    return http.post(
        urlsplit(url).path,
        content=urlencode(form).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
    )


def decisions(db: str, saga_id: str) -> list[tuple[str, str]]:
    """(phase, payload) of the saga's APPROVED and REJECTED entries."""
    with Sagacity(db) as sg:
        return [
            (str(e.phase), e.payload) for e in sg.entries(saga_id) if str(e.phase) in {"APPROVED", "REJECTED"}
        ]
