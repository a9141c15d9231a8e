"""Tools, saga set-ups and a worker for the cross-process decision races.

As a script (``python race_tools.py URL EFFECTS ACTION``) it is one racer: for each line
``go SAGA_ID`` on stdin it performs ACTION on that saga at once and prints ``done OUTCOME``.
The test process imports it too, to set the sagas up and read the effects.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sagacity import CompensationContext, Phase, Reversibility, Sagacity, SagaResult, current_call, tool
from sagacity.errors import SagacityError
from sagacity.framework import journaled_call

PAYLOAD = '{"amount":"100.00","to":"ACME"}'


def effect(line: str) -> None:
    """Record a side effect; O_APPEND writes of one short line from many processes never mix."""
    fd = os.open(os.environ["SAGACITY_RACE_EFFECTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@tool
def race_reserve(sku: str) -> str:
    return f"res-{sku}"


@race_reserve.compensation
def race_release(ctx: CompensationContext) -> None:
    time.sleep(random.uniform(0, 0.003))  # a compensation takes a moment: others may race it
    effect(f"release {ctx.saga_id} {ctx.executed_seq}")


#: How often this process ran the wire (a racer tells whether it ran it or got a replay).
WIRES_RUN = [0]


@tool(reversibility=Reversibility.IRREVERSIBLE, approval_ttl=3600)
def race_wire(amount: str, to: str) -> str:
    call = current_call()
    assert call is not None
    WIRES_RUN[0] += 1
    effect(f"wire {call.saga_id}")
    return f"sent {amount} to {to}"


@tool
def race_hold(sku: str) -> str:
    return f"hold-{sku}"


@race_hold.compensation(idempotent=True)
def race_unhold(ctx: CompensationContext) -> None:
    effect(f"unhold {ctx.saga_id} {ctx.executed_seq}")
    if os.environ.get("SAGACITY_RACE_HANG") == "1":
        time.sleep(120)  # hangs mid-compensation, holding the saga's lease, until killed


@tool
def race_flaky(n: int) -> str:
    raise RuntimeError("upstream down")


def gated(sg: Sagacity, saga_id: str, *, approved: bool) -> int:
    """A saga that reserved twice, then was gated on the wire (approved by alice if asked)."""

    def agent() -> None:
        race_reserve("A")
        race_reserve("B")
        race_wire("100.00", "ACME")

    sg.run(saga_id, agent)
    [request] = sg.pending_approvals(saga_id)
    if approved:
        sg.approve(saga_id, request.journal_seq, "alice@example.com")
    return request.journal_seq


def present_wire() -> object:
    """What a framework adapter does when a run presents the wire under its call id."""
    spec = race_wire.spec
    args, kwargs = spec.decode_input(PAYLOAD)
    return journaled_call(spec, PAYLOAD, "wire-1", lambda: race_wire(*args, **kwargs))


def keyed_gated(sg: Sagacity, saga_id: str) -> int:
    """A saga that reserved, then was gated on the wire under a framework's call id; approved."""

    def agent() -> None:
        race_reserve("A")
        present_wire()

    sg.run(saga_id, agent)
    [request] = sg.pending_approvals(saga_id)
    sg.approve(saga_id, request.journal_seq, "alice@example.com")
    return request.journal_seq


def failed_mid_run(sg: Sagacity, saga_id: str, *, in_doubt: bool) -> None:
    """A saga whose process died after a call failed (or, ``in_doubt``, mid-call): its
    journal as that process left it, compensation not started."""
    for sku in ("A", "B", "C"):
        sg.journal.append(saga_id, "race_reserve", Phase.INTENT, f'{{"sku":"{sku}"}}')
        sg.journal.append(saga_id, "race_reserve", Phase.EXECUTED, f'{{"sku":"{sku}"}}', f"res-{sku}")
    sg.journal.append(saga_id, "race_flaky", Phase.INTENT, '{"n":1}')
    if not in_doubt:
        sg.journal.append(saga_id, "race_flaky", Phase.FAILED, '{"n":1}', "RuntimeError: upstream down")


def continued(sg: Sagacity, saga_id: str, work: Callable[[], object]) -> SagaResult:
    """``work`` in the existing saga, continued on purpose (as a framework's next turn is), and
    how the saga ended: ``sg.run``'s answer without its refusal of an id that has a journal."""
    scope = sg.saga(saga_id, continue_existing=True)
    try:
        with scope:
            work()
    except Exception:
        if scope.result is None:
            raise
    assert scope.result is not None
    return scope.result


def act(sg: Sagacity, action: str, saga_id: str) -> str:
    """Perform one racer's action; a refusal is an outcome, not an error."""
    gates = [e.seq for e in sg.entries(saga_id) if e.phase == Phase.AWAITING_APPROVAL]
    seq = gates[0] if gates else 0
    try:
        if action == "resume":
            return str(sg.resume(saga_id, seq, PAYLOAD, resumed_by="worker").status)
        if action == "reject":
            decision = sg.reject(saga_id, seq, "bob@example.com", "no")
            assert decision.result is not None
            return f"rejected {decision.result.status}"
        if action == "approve":
            sg.approve(saga_id, seq, "carol@example.com")
            return "approved"
        if action == "expire":
            later = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=2)
            return f"expired {len(sg.expire_approvals(now=later))}"
        if action == "recover":
            return f"recovered {len(sg.recover(saga_id))}"
        if action == "fail":
            return str(continued(sg, saga_id, _hold_then_fail).status)
        if action == "present":
            before = WIRES_RUN[0]
            result = continued(sg, saga_id, present_wire)
            ran = "ran" if WIRES_RUN[0] > before else "replayed"
            return f"presented {result.status} {ran if result.error is None else 'refused'}"
        if action == "resolve":
            intent = next(c for c in sg.in_doubt(saga_id))
            return str(sg.resolve_in_doubt(saga_id, intent.seq, happened=False, resolver="ops@example.com"))
    except SagacityError as exc:
        return f"refused {type(exc).__name__}"
    raise ValueError(f"unknown action {action!r}")


def _hold_then_fail() -> None:
    race_hold("A")
    race_flaky(1)


def main() -> None:
    url, effects, action = sys.argv[1:4]
    os.environ["SAGACITY_RACE_EFFECTS"] = effects
    with Sagacity(url) as sg:
        print("ready", flush=True)
        for line in sys.stdin:
            _, saga_id = line.split()
            time.sleep(random.uniform(0, 0.002))  # both orders, and true overlaps, happen
            print("done", act(sg, action, saga_id).replace(" ", "_"), flush=True)


if __name__ == "__main__":
    main()
