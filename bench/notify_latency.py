"""Time from an approval request being journaled to its delivery at a local webhook receiver,
with the notifier running beside 8 busy sagas (issue #36; goal: p99 under one second).

    python bench/notify_latency.py [URL] [REQUESTS]

URL defaults to $SAGACITY_BENCH_URL, else a SQLite file in a temp directory. Eight threads run
sagas of compensatable calls without pause; the main thread gates a payout every 50 ms (the
moment ``sg.run`` returns AWAITING_APPROVAL is the start); one notifier thread runs rounds every
``poll`` (0.1 s); the receiver verifies each signature and notes when the request arrived. Prints
p50/p90/p99/max of the latency, the rounds' poll, and the load average before and after.
"""

from __future__ import annotations

import base64
import hashlib
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from standardwebhooks import Webhook

from sagacity import Reversibility, Sagacity, tool
from sagacity.notify import EventKind, Notifier, event_id, parse_notify_config

SECRET = "whsec_" + base64.b64encode(b"bench-secret-of-thirty-two-bytes").decode()
arrived: dict[str, float] = {}


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        Webhook(SECRET).verify(body, dict(self.headers))
        arrived.setdefault(self.headers["webhook-id"], time.monotonic())
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@tool(reversibility=Reversibility.IRREVERSIBLE)
def bench_payout(n: int) -> str:
    return f"paid {n}"


@tool
def bench_step(n: int) -> str:
    return f"step {n}"


@bench_step.compensation
def bench_undo(ctx: object) -> None:
    pass


def busy(sg: Sagacity, worker: int, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        sg.run(f"busy-{worker}-{n}-{time.time_ns()}", lambda: [bench_step(i) for i in range(3)])


def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SAGACITY_BENCH_URL", "")
    if not url:
        url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    requests = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = parse_notify_config(
        f"""
[notifier]
poll = "0.1s"
scan = "{os.environ.get("BENCH_SCAN", "15s")}"
[channels.hook]
type = "webhook"
url = "http://127.0.0.1:{server.server_port}/hook"
secret = "${{SECRET}}"
[groups]
ops = ["hook"]
[[routes]]
tools = ["bench_payout"]
notify = ["ops"]
""",
        environ={"SECRET": SECRET},
    )
    load_before = os.getloadavg()
    stop = threading.Event()
    with Sagacity(url) as sg:
        workers = [threading.Thread(target=busy, args=(sg, w, stop)) for w in range(8)]
        notifier = Notifier(sg, config)
        runner = threading.Thread(target=notifier.run, args=(stop,))
        for thread in [*workers, runner]:
            thread.start()
        started: dict[str, float] = {}
        run_id = time.time_ns()
        for n in range(requests):
            saga_id = f"gate-{run_id}-{n}"
            sg.run(saga_id, bench_payout, n)
            started_at = time.monotonic()
            payload = f'{{"n":{n}}}'
            digest = hashlib.sha256(payload.encode()).hexdigest()
            seq = next(r.journal_seq for r in sg.pending_approvals(saga_id))
            started[event_id(EventKind.APPROVAL_REQUESTED, saga_id, seq, digest)] = started_at
            time.sleep(0.05)
        deadline = time.monotonic() + 30
        while len([k for k in started if k in arrived]) < requests and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        for thread in [*workers, runner]:
            thread.join()
    server.shutdown()
    latencies = sorted(arrived[k] - started[k] for k in started if k in arrived)
    lost = requests - len(latencies)

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    print(f"store {url.split(':')[0]}, {requests} requests, 8 busy sagas, poll 0.1 s, lost {lost}")
    print(
        f"latency ms: p50 {pct(0.5):.0f}  p90 {pct(0.9):.0f}  p99 {pct(0.99):.0f}"
        f"  max {latencies[-1] * 1000:.0f}  mean {statistics.mean(latencies) * 1000:.0f}"
    )
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
