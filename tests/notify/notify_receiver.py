"""A local webhook receiver that verifies each delivery with the ``standardwebhooks`` package
and keeps what a real receiver would: every request it got, and the ids it took (a resend of an
id already taken is dropped, as the Standard Webhooks spec asks of receivers)."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from sagacity.notify import NotifyConfig, parse_notify_config

SECRET = "whsec_" + base64.b64encode(b"notify-tests-secret-32-bytes-long").decode()


@dataclass
class Receiver:
    secret: str
    status: int = 204
    requests: list[str] = field(default_factory=list)  # webhook-id of every request, in order
    taken: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> body, first copy only
    dropped: list[str] = field(default_factory=list)  # resends of an id already taken
    refused: int = 0  # requests whose signature did not verify
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    payload = Webhook(receiver.secret).verify(body, dict(self.headers))
                except WebhookVerificationError:
                    with receiver.lock:
                        receiver.refused += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                wid = self.headers["webhook-id"]
                with receiver.lock:
                    receiver.requests.append(wid)
                    if receiver.status < 300:
                        if wid in receiver.taken:
                            receiver.dropped.append(wid)
                        else:
                            receiver.taken[wid] = payload
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def types(self) -> list[str]:
        with self.lock:
            return sorted(body["type"] for body in self.taken.values())

    def dump(self) -> str:
        return json.dumps({"requests": self.requests, "dropped": self.dropped, "refused": self.refused})


def hook_text(url: str, extra: str = "") -> str:
    """A notifier's file sending every event to one webhook; ``extra`` adds [notifier] lines."""
    return f"""
[notifier]
backoff = 0.01
max_backoff = 0.05
{extra}

[channels.hook]
type = "webhook"
url = "{url}"
secret = "${{HOOK_SECRET}}"

[groups]
ops = ["hook"]

[[routes]]
notify = ["ops"]
"""


def hook_config(url: str, extra: str = "", secret: str = SECRET) -> NotifyConfig:
    """:func:`hook_text`, read with ``secret`` in ``$HOOK_SECRET``."""
    return parse_notify_config(hook_text(url, extra), environ={"HOOK_SECRET": secret})
