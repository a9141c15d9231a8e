"""The outbox on real stores: requests reach a verifying webhook receiver, failures are retried and
end as dead letters, a notifier killed with SIGKILL at every step loses nothing, and two notifiers
racing in two processes deliver each event once."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import notify_tools
import pytest
from notify_receiver import SECRET, Receiver, hook_config

from sagacity import Sagacity
from sagacity._payloads import payload_attribute
from sagacity.chain import utc_now
from sagacity.notify import OUTBOX_SAGA, EventKind, Notifier, event_id, outbox_status

WORKER = Path(__file__).with_name("notifier_worker.py")


def _gate(sg: Sagacity, saga_id: str, amount: str = "5000") -> None:
    assert sg.run(saga_id, notify_tools.gated, amount).status == "AWAITING_APPROVAL"


def _requested(saga_id: str, seq: int, payload: str) -> str:
    return event_id(EventKind.APPROVAL_REQUESTED, saga_id, seq, hashlib.sha256(payload.encode()).hexdigest())


def test_request_reaches_the_receiver_signed(
    store_url: str, receiver: Receiver, stack: contextlib.ExitStack
) -> None:
    """An approval request is delivered once, signed (the receiver verifies it with the
    standardwebhooks package), with the tool, the exact payload, its SHA-256 and the approvals
    needed; a second round sends nothing again."""
    sg = stack.enter_context(Sagacity(store_url, approval_ttl=3600))
    _gate(sg, "order-1")
    with Notifier(sg, hook_config(receiver.url)) as notifier:
        first = notifier.run_once()
        again = notifier.run_once()
    assert len(first.delivered) == 1
    assert again.claimed == 0
    (request,) = sg.pending_approvals()
    body = receiver.taken[_requested("order-1", request.journal_seq, request.input)]
    assert body["type"] == "approval.requested"
    assert body["sagaId"] == "order-1"
    assert body["data"]["tool"] == "pay_out"
    assert body["data"]["input"] == request.input == '{"amount":"5000","to":"acme"}'
    assert body["data"]["inputHash"] == request.input_hash
    assert body["data"]["approvalsRequired"] == 1
    assert body["data"]["expiresAt"] is not None
    assert receiver.requests == [body["id"]]
    assert receiver.refused == 0
    assert sg.verify(OUTBOX_SAGA).valid


def test_wrong_secret_retried_then_dead_letter(
    store_url: str, receiver: Receiver, stack: contextlib.ExitStack
) -> None:
    """A receiver that refuses the signature (another secret) gets the delivery retried with
    backoff; after max_attempts it is a dead letter, and the status says so with the error."""
    sg = stack.enter_context(Sagacity(store_url))
    _gate(sg, "order-2")
    other = "whsec_" + "QUJD" * 8
    config = hook_config(receiver.url, "max_attempts = 3", secret=other)
    outcomes = []
    with Notifier(sg, config) as notifier:
        start = utc_now()
        for n in range(30):
            done = notifier.run_once(start + timedelta(seconds=n))  # each round past the last retry's time
            outcomes += [("failed", d) for d in done.failed] + [("dead", d) for d in done.dead]
            if any(kind == "dead" for kind, _ in outcomes):
                break
    assert [kind for kind, _ in outcomes] == ["failed", "failed", "dead"]
    waits = [
        datetime.strptime(payload_attribute(e.payload, "retry_at=") or "", "%Y-%m-%dT%H:%M:%S.%fZ")
        for e in sg.entries(OUTBOX_SAGA)
        if "notify=failed" in e.payload
    ]
    # Each failed attempt journals when the next is due: backoff 0.01 s, doubled per attempt.
    assert waits == [start + timedelta(seconds=0.01), start + timedelta(seconds=1.02)]
    assert receiver.refused == 3
    assert receiver.taken == {}
    status = outbox_status(sg)
    assert [d.attempt for d in status.dead] == [3]
    assert "HTTP 401" in status.dead[0].error
    assert not status.in_flight
    assert not status.retrying


@pytest.mark.crash
@pytest.mark.parametrize("step", ["kill-claimed", "kill-sent", "kill-recorded"])
def test_notifier_killed_at_every_step_loses_nothing(
    durable_url: str, receiver: Receiver, step: str, stack: contextlib.ExitStack
) -> None:
    """kill -9 of a notifier after its claim, after the receiver took a message, and after it
    journaled the outcomes: a notifier started next delivers every event; the receiver takes
    each once and drops by id what a killed notifier had already sent."""
    sg = stack.enter_context(Sagacity(durable_url))
    for n in range(3):
        _gate(sg, f"order-{n}")
    env = {**os.environ, "HOOK_SECRET": SECRET}
    killed = subprocess.run(
        [sys.executable, str(WORKER), durable_url, receiver.url, step],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert killed.returncode == -9, killed.stderr
    sent_before = list(receiver.requests)
    assert len(sent_before) == {"kill-claimed": 0, "kill-sent": 1, "kill-recorded": 3}[step]
    config = hook_config(receiver.url)
    with Notifier(sg, config) as restarted:  # the notifier started next (this process)
        restarted.run_once()
    expected = {_requested(r.saga_id, r.journal_seq, r.input) for r in sg.pending_approvals()}
    assert set(receiver.taken) == expected  # none lost
    counts = Counter(receiver.requests)
    # What the receiver saw: each event once, plus the one copy a kill after sending resent.
    assert sorted(counts.values()) == ([1, 1, 2] if step == "kill-sent" else [1, 1, 1])
    assert receiver.dropped == (sent_before if step == "kill-sent" else [])
    status = outbox_status(sg)
    assert status.delivered == 3
    assert not status.in_flight
    assert sg.verify(OUTBOX_SAGA).valid


@pytest.mark.crash
def test_two_notifiers_racing_deliver_each_event_once(
    durable_url: str, receiver: Receiver, stack: contextlib.ExitStack
) -> None:
    """Two notifier processes on one store, started together over eight waiting requests:
    every event is delivered, and by one of them only (the claims are fenced appends)."""
    sg = stack.enter_context(Sagacity(durable_url))
    for n in range(8):
        _gate(sg, f"race-{n}")
    env = {**os.environ, "HOOK_SECRET": SECRET}
    command = [sys.executable, str(WORKER), durable_url, receiver.url, "run", "8"]
    racers = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [racer.communicate(timeout=120) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], outputs
    assert len(receiver.taken) == 8
    assert sorted(Counter(receiver.requests).values()) == [1] * 8  # no duplicate at all
    senders = [sum(line.startswith("sent ") for line in out.splitlines()) for out, _ in outputs]
    assert sum(senders) == 8
    status = outbox_status(sg)
    assert status.delivered == 8
    assert sg.verify(OUTBOX_SAGA).valid
