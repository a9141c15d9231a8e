"""A notifier in a process of its own: ``URL HOOK_URL MODE [EXPECTED]`` (secret in $HOOK_SECRET).

MODE ``kill-claimed``: SIGKILL itself when its first claimed delivery is about to be sent;
``kill-sent``: right after the receiver took the first delivery, before its outcome is journaled;
``kill-recorded``: after its first round journaled every outcome. ``run``: rounds until the
outbox holds EXPECTED deliveries, all delivered (two of these race in the race test).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from sagacity import Sagacity
from sagacity.notify import Notifier, parse_notify_config, send

url, hook, mode = sys.argv[1:4]
expected = int(sys.argv[4]) if len(sys.argv) > 4 else 0
config = parse_notify_config(
    f"""
[notifier]
poll = 0.05
backoff = 0.01
[channels.hook]
type = "webhook"
url = "{hook}"
secret = "${{HOOK_SECRET}}"
[groups]
ops = ["hook"]
[[routes]]
notify = ["ops"]
"""
)


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def sender(channel, target, event, cfg) -> None:  # type: ignore[no-untyped-def]
    if mode == "kill-claimed":
        die()
    send(channel, target, event, cfg)
    print(f"sent {event.id}", flush=True)
    if mode == "kill-sent":
        die()


with Sagacity(url) as sg, Notifier(sg, config, sender=sender) as notifier:
    if mode.startswith("kill-"):
        notifier.run_once()
        if mode == "kill-recorded":
            die()
        sys.exit(3)  # the kill above never came: the test fails on this status
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        notifier.run_once()
        status = notifier.status()
        if status.delivered >= expected and not status.in_flight and not status.retrying:
            break
        time.sleep(0.02)
print("done", flush=True)
