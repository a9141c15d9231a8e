"""Reconcilers after real ``kill -9``: a worker process is killed at every point of a payment
(and of its refund); ``reconcile`` then settles what the payments service knows and leaves the
rest in doubt, on every durable store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from payments import Payments

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.chain import idempotency_key

pytestmark = pytest.mark.crash

WORKER = Path(__file__).parent / "pay_worker.py"
#: Where each worker is killed (``pay_tools``), in the order a payment reaches them.
POINTS = (
    "before-intent",
    "in-reserve",
    "before-send",
    "in-service",
    "after-send",
    "before-refund",
    "after-refund",
)


def _killed_at(url: str, points: tuple[str, ...], payments: Payments, tmp_path: Path) -> None:
    """Start one worker per point, all at once, and SIGKILL each where it stopped (a point
    given twice: the second worker's saga is ``pay-<point>-2``)."""
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {**os.environ, "PAY_MARKERS": str(markers)}
    workers: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}
    for point in points:
        saga = f"pay-{point}" if f"pay-{point}" not in workers else f"pay-{point}-2"
        with (tmp_path / f"{saga}.stderr").open("wb") as log:
            workers[saga] = (
                point,
                subprocess.Popen([sys.executable, str(WORKER), url, saga, point], env=env, stderr=log),
            )
    for saga, (point, worker) in workers.items():
        deadline = time.monotonic() + 90

        def there(point: str = point, saga: str = saga) -> bool:
            if point == "in-service":  # the service did it and holds the answer
                return any(t["to"] == saga for t in dict(payments.transfers).values())
            return (markers / saga).exists()

        while not there():
            assert worker.poll() is None, (tmp_path / f"{saga}.stderr").read_text()
            assert time.monotonic() < deadline, f"the worker never reached {point}"
            time.sleep(0.02)
        os.kill(worker.pid, signal.SIGKILL)
        assert worker.wait(timeout=30) == -signal.SIGKILL


def test_kill_at_every_point_then_reconcile_settles_what_the_service_knows(
    durable_url: str,
    payments: Payments,
    pay_tools: object,
    tmp_path: Path,
    lease_gone: Callable[[Sagacity, str], None],
) -> None:
    _killed_at(durable_url, (*POINTS, "before-send"), payments, tmp_path)
    payments.release()
    with Sagacity(durable_url) as sg:
        for saga in (*(f"pay-{p}" for p in POINTS), "pay-before-send-2"):
            lease_gone(sg, saga)
        assert {d.saga_id for d in sg.in_doubt()} == {
            *(f"pay-{p}" for p in POINTS if p != "before-intent"),
            "pay-before-send-2",
        }
        # ``recover`` asks the reconcilers first: the payment the service never got is FAILED,
        # and recover compensates its saga in the same pass (its hold released).
        key = idempotency_key("pay-before-send-2", 2)
        assert payments.holds[key] == "SKU-1"
        [recovered] = sg.recover("pay-before-send-2")
        assert (recovered.saga_id, recovered.status) == ("pay-before-send-2", SagaStatus.COMPENSATED)
        assert key not in payments.holds

        done = {r.saga_id.removeprefix("pay-"): r for r in sg.reconcile()}
        assert set(done) == set(POINTS) - {"before-intent"}  # one answer per call in doubt

        # Nothing was in doubt: nothing asked, nothing journaled; the saga was abandoned between calls.
        assert sg.status("pay-before-intent") is SagaStatus.ABANDONED
        # A tool with no reconciler: left for a human, never guessed.
        assert (done["in-reserve"].answer, done["in-reserve"].settled) == ("no_reconciler", False)
        assert sg.status("pay-in-reserve") is SagaStatus.IN_DOUBT
        # The service never got it: FAILED, and the saga compensated (the hold released).
        assert (done["before-send"].answer, done["before-send"].outcome) == ("did_not_happen", "FAILED")
        assert sg.status("pay-before-send") is SagaStatus.COMPENSATED
        # The service did it (answer held, or answered and not yet journaled): EXECUTED with its id.
        for point in ("in-service", "after-send"):
            [transfer] = [t for t in payments.transfers.values() if t["to"] == f"pay-{point}"]
            assert (done[point].answer, done[point].outcome) == ("happened", "EXECUTED")
            executed = sg.entries(f"pay-{point}")[-1]
            assert (executed.tool_name, executed.phase, executed.payload) == (
                "send_transfer",
                Phase.EXECUTED,
                transfer["id"],
            )
            assert sg.status(f"pay-{point}") is SagaStatus.ABANDONED  # settled; the agent never finished
        # An undo in doubt, asked of the undo's reconciler.
        assert (done["before-refund"].kind, done["before-refund"].outcome) == (
            "compensation",
            "COMPENSATION_FAILED",
        )
        assert sg.status("pay-before-refund") is SagaStatus.COMPENSATION_FAILED
        assert (done["after-refund"].kind, done["after-refund"].outcome) == ("compensation", "COMPENSATED")
        assert sg.status("pay-after-refund") is SagaStatus.COMPENSATED

        # Each answer is a fenced decision naming the reconciler and its evidence, in the chain.
        for point in ("before-send", "after-send", "before-refund", "after-refund"):
            saga = f"pay-{point}"
            assert sg.verify(saga).valid
            [decision] = [e for e in sg.entries(saga) if e.tool_name == "approval-gate"]
            name = "find_refund" if "refund" in point else "find_transfer"
            assert decision.payload.split("\n") == [f"reconciler={name}", f"evidence={done[point].evidence}"]
            assert decision.phase == (Phase.APPROVED if done[point].answer == "happened" else Phase.REJECTED)
        key = idempotency_key("pay-before-send", 4)
        assert done["before-send"].evidence == f"GET /transfers/{key}: 404"
        assert [c.resolved_by for c in sg.view("pay-after-send").calls][-1] == "reconciler:find_transfer"

        # Compensation carried on past the settled undo: every hold but the two left open is released.
        assert sorted(payments.holds.values()) == [
            "SKU-1",
            "SKU-1",
            "SKU-1",
            "SKU-1",
        ]  # intent, reserve, 2 sent
        assert set(payments.refunds) == {idempotency_key("pay-after-refund", 4)}

        # Asking again settles nothing twice: only the call without a reconciler is asked about.
        again = sg.reconcile()
        assert [(r.saga_id, r.answer) for r in again] == [("pay-in-reserve", "no_reconciler")]
        assert sg.verify("pay-after-refund").valid
