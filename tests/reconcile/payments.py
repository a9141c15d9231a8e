"""A fake payments service: a real HTTP server (stdlib) keeping transfers, refunds and holds by
the caller's idempotency key, as a payment provider's API does.

- ``POST /transfers`` ``{"key","amount","to"}``: a transfer, once per key (a repeat answers the
  first); ``GET /transfers/<key>``: 200 with it, 404 when there is none.
- ``POST /transfers/<key>/refund``, ``GET /refunds/<key>``: the refund of a transfer.
- ``POST /holds`` ``{"key","sku"}``, ``DELETE /holds/<key>``: an inventory hold (no look-up: its
  tool has no reconciler).

``mode`` makes the look-ups misbehave: ``down`` answers 503, ``hang`` holds the answer until
:meth:`release`, ``pair`` holds each look-up until a second one arrives (two reconcilers racing
both ask before either decides). A transfer whose request carries ``X-Hold: 1`` is recorded,
then its answer is held until :meth:`release` (a caller killed while the service has done it).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: How long a held answer waits at most: a test that forgets to release ends anyway.
HOLD_LIMIT = 60.0


class Payments:
    def __init__(self) -> None:
        self.transfers: dict[str, dict[str, Any]] = {}
        self.refunds: dict[str, str] = {}
        self.holds: dict[str, str] = {}
        self.lookups = 0
        self.mode = "ok"
        self.released = threading.Event()
        self.pair = threading.Barrier(2)
        self.lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()

    def lookup(self, table: dict[str, Any], key: str) -> tuple[int, Any]:
        with self.lock:
            self.lookups += 1
        if self.mode == "down":
            return 503, {"error": "maintenance"}
        if self.mode == "hang":
            self.released.wait(HOLD_LIMIT)
        if self.mode == "pair":
            self.pair.wait(HOLD_LIMIT)
        with self.lock:
            found = table.get(key)
        return (200, found) if found is not None else (404, {"error": f"no such key {key}"})


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A caller killed while its answer was held: nothing to report."""


def _handler(service: Payments) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            value = json.loads(self.rfile.read(length) or b"{}")
            assert isinstance(value, dict)
            return value

        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            parts = self.path.strip("/").split("/")
            if len(parts) == 2 and parts[0] == "transfers":
                self._answer(*service.lookup(service.transfers, parts[1]))
            elif len(parts) == 2 and parts[0] == "refunds":
                status, body = service.lookup(service.refunds, parts[1])
                self._answer(status, {"refund": body} if status == 200 else body)
            else:
                self._answer(404, {"error": "no such path"})

        def do_POST(self) -> None:
            parts = self.path.strip("/").split("/")
            body = self._body()
            with service.lock:
                if parts == ["transfers"]:
                    key = body["key"]
                    transfer = service.transfers.setdefault(
                        key,
                        {
                            "id": f"tr_{len(service.transfers) + 1}",
                            "amount": body["amount"],
                            "to": body["to"],
                        },
                    )
                    answer: tuple[int, Any] = (200, transfer)
                elif parts == ["holds"]:
                    service.holds[body["key"]] = body["sku"]
                    answer = (200, {"hold": body["key"]})
                elif len(parts) == 3 and parts[0] == "transfers" and parts[2] == "refund":
                    if parts[1] in service.transfers:
                        service.refunds.setdefault(parts[1], f"rf_{service.transfers[parts[1]]['id']}")
                        answer = (200, {"refund": service.refunds[parts[1]]})
                    else:
                        answer = (404, {"error": "no such transfer"})
                else:
                    answer = (404, {"error": "no such path"})
            if self.headers.get("X-Hold") == "1":
                service.released.wait(HOLD_LIMIT)
            self._answer(*answer)

        def do_DELETE(self) -> None:
            parts = self.path.strip("/").split("/")
            with service.lock:
                found = service.holds.pop(parts[1], None) if parts[0] == "holds" else None
            self._answer(200 if found else 404, {"released": parts[1]})

    return Handler
