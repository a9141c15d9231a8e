"""The email and Slack channels against real local servers: aiosmtpd takes the email, a local fake
of Slack's Web API takes ``chat.postMessage`` from slack-sdk's own WebClient."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import notify_tools
import pytest
from aiosmtpd.controller import Controller

from sagacity import Sagacity
from sagacity._links import read_email_token
from sagacity.notify import Notifier, parse_notify_config

LINK_SECRET = "a-link-secret-of-at-least-32-bytes!!"
ROUTES = """
[groups]
finance = ["mail:alice@example.com", "mail:carol@example.com", "slack"]

[[routes]]
tools = ["pay_out"]
notify = ["finance"]
"""


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 OK"


def _free_port() -> int:
    """A free port (aiosmtpd's start checks its own by connecting, so port 0 will not do)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def smtp() -> Iterator[tuple[Controller, _Inbox]]:
    inbox = _Inbox()
    port = _free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield controller, inbox
    controller.stop()


@pytest.fixture
def slack() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local fake of Slack's chat.postMessage: checks the bot token, keeps each message."""
    posted: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            ok = self.path == "/api/chat.postMessage" and self.headers["authorization"] == "Bearer xoxb-test"
            if ok:
                posted.append(json.loads(body))
            answer = (
                {"ok": True, "channel": "C0FIN", "ts": "1.000100"}
                if ok
                else {"ok": False, "error": "invalid_auth"}
            )
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/api/", posted
    server.shutdown()
    server.server_close()


def test_request_by_email_and_slack(
    smtp: tuple[Controller, _Inbox], slack: tuple[str, list[dict[str, Any]]], stack: contextlib.ExitStack
) -> None:
    """One email per approver (each with its own signed link, the payload and its SHA-256, the
    event id as Message-ID) and one Slack message with Approve/Reject buttons carrying the gate
    and the payload hash."""
    controller, inbox = smtp
    slack_url, posted = slack
    config = parse_notify_config(
        f"""
[notifier]
link_base = "https://approvals.example.com/sagacity"
link_secret = "${{LINK_SECRET}}"

[channels.mail]
type = "email"
host = "127.0.0.1"
port = {controller.port}
security = "none"
from = "sagacity@example.com"

[channels.slack]
type = "slack"
token = "${{SLACK_TOKEN}}"
channel = "C0FIN"
base_url = "{slack_url}"
{ROUTES}""",
        environ={"LINK_SECRET": LINK_SECRET, "SLACK_TOKEN": "xoxb-test"},
    )
    sg = stack.enter_context(Sagacity("memory://"))
    assert sg.run("order-7", notify_tools.gated, "900").status == "AWAITING_APPROVAL"
    (request,) = sg.pending_approvals()
    with Notifier(sg, config) as notifier:
        done = notifier.run_once()
    assert len(done.delivered) == 3, done
    assert sorted(to for to, _ in inbox.messages) == [["alice@example.com"], ["carol@example.com"]]
    links = []
    for _, message in inbox.messages:
        text = message.get_payload(decode=True).decode()  # type: ignore[union-attr]
        assert request.input in text
        assert request.input_hash in text
        assert message["Message-ID"].startswith("<evt_")
        links.append(
            next(line for line in text.splitlines() if line.startswith("https://approvals.example.com/"))
        )
    # One link per approver, each a token naming that approver, the gate and the payload hash.
    tokens = {}
    for link in links:
        token = read_email_token(LINK_SECRET, parse_qs(urlsplit(link).query)["token"][0])
        tokens[token.approver] = (token.saga_id, token.seq, token.sha256)
    gate_facts = ("order-7", request.journal_seq, request.input_hash)
    assert tokens == {"alice@example.com": gate_facts, "carol@example.com": gate_facts}
    (message,) = posted
    assert message["channel"] == "C0FIN"
    actions = next(block for block in message["blocks"] if block["type"] == "actions")
    buttons = {element["action_id"]: json.loads(element["value"]) for element in actions["elements"]}
    gate = {"saga_id": "order-7", "seq": request.journal_seq, "sha256": request.input_hash}
    assert buttons == {"sagacity_approve": gate, "sagacity_reject": gate}


def test_slack_refusal_is_retried(
    slack: tuple[str, list[dict[str, Any]]], stack: contextlib.ExitStack
) -> None:
    """Slack answering ok=false (a revoked token) is a failed attempt, retried later, never lost."""
    slack_url, posted = slack
    config = parse_notify_config(
        f"""
[channels.slack]
type = "slack"
token = "${{SLACK_TOKEN}}"
channel = "C0FIN"
base_url = "{slack_url}"
[groups]
finance = ["slack"]
[[routes]]
notify = ["finance"]
""",
        environ={"SLACK_TOKEN": "xoxb-revoked"},
    )
    sg = stack.enter_context(Sagacity("memory://"))
    sg.run("order-8", notify_tools.gated)
    with Notifier(sg, config) as notifier:
        done = notifier.run_once()
    assert len(done.failed) == 1
    assert posted == []
    assert "invalid_auth" in notifier.status().retrying[0].error


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as files (the STARTTLS server's and the client's CA)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "smtp.crt", directory / "smtp.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def test_email_over_starttls_with_login(tmp_path: Path, stack: contextlib.ExitStack) -> None:
    """The email channel upgrades with STARTTLS (verifying the server against ``ca_file``) and
    logs in before sending; a server that requires STARTTLS and auth takes the message."""
    from aiosmtpd.smtp import AuthResult

    cert, key = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    inbox = _Inbox()

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
        ok = auth_data.login == b"sagacity" and auth_data.password == b"smtp-pass"
        return AuthResult(success=ok)

    port = _free_port()
    controller = Controller(
        inbox,
        hostname="127.0.0.1",
        port=port,
        tls_context=context,
        require_starttls=True,
        authenticator=authenticate,
        auth_require_tls=True,
    )
    controller.start()
    stack.callback(controller.stop)
    config = parse_notify_config(
        f"""
[channels.mail]
type = "email"
host = "127.0.0.1"
port = {port}
security = "starttls"
ca_file = "{cert}"
username = "sagacity"
password = "${{SMTP_PASSWORD}}"
from = "sagacity@example.com"
[groups]
finance = ["mail:alice@example.com"]
[[routes]]
notify = ["finance"]
""",
        environ={"SMTP_PASSWORD": "smtp-pass"},
    )
    sg = stack.enter_context(Sagacity("memory://"))
    sg.run("order-9", notify_tools.gated)
    with Notifier(sg, config) as notifier:
        done = notifier.run_once()
    assert len(done.delivered) == 1, notifier.status().to_json()
    ((to, message),) = inbox.messages
    assert to == ["alice@example.com"]
    assert message["Subject"].startswith("[sagacity] Approval requested: pay_out")
