"""Tools and agents for the kill -9 tests, run as a separate process:

    python crash_tools.py URL SAGA_ID SCENARIO MARKER_DIR

Each tool appends a line to MARKER_DIR/effects when its effect happens, so the test can count
effects across processes, and touches MARKER_DIR/<name> where the test should kill the process.
The test process imports this module too, so recover() and resume() find the same tools.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from sagacity import CompensationContext, Reversibility, Sagacity, tool
from sagacity.errors import ApprovalNotFoundError, ApprovalRefusedError, SagaRunningElsewhereError
from sagacity.stores import Store, open_store

MARKERS = Path(os.environ.get("SAGACITY_CRASH_MARKERS", "."))


def effect(line: str) -> None:
    with (MARKERS / "effects").open("a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def park(name: str) -> None:
    """Signal the test that we reached ``name``, then wait to be killed."""
    (MARKERS / name).touch()
    time.sleep(120)


@tool
def reserve(sku: str) -> str:
    effect(f"reserve {sku}")
    return f"res-{sku}"


@reserve.compensation
def release(ctx: CompensationContext) -> None:
    """Parks before or after its effect when the test left ``park-before-<sku>`` or
    ``park-after-<sku>`` in the markers (SLOW always parks after): the kill points inside a
    compensation."""
    sku = ctx.args["sku"]
    if (MARKERS / f"park-before-{sku}").exists():
        park("in-compensation")
    effect(f"release {sku}")
    if sku == "SLOW" or (MARKERS / f"park-after-{sku}").exists():
        park("in-compensation")


@tool
def reserve_idempotent(sku: str) -> str:
    effect(f"reserve-i {sku}")
    return sku


@reserve_idempotent.compensation(idempotent=True)
def release_idempotent(ctx: CompensationContext) -> None:
    effect(f"release-i {ctx.args['sku']}")
    if ctx.args["sku"] == "SLOW" and not (MARKERS / "in-compensation").exists():
        park("in-compensation")


@tool
def slow_charge(amount: int) -> str:
    effect(f"charge-start {amount}")
    park("in-tool")
    return "unreachable"


@tool
def charge_then_die(amount: int) -> str:
    effect(f"charged {amount}")
    os.kill(os.getpid(), signal.SIGKILL)  # the effect happened; EXECUTED never will
    return "unreachable"


@tool(reversibility=Reversibility.IRREVERSIBLE)
def wire(amount: str) -> str:
    effect(f"wire {amount}")
    if (MARKERS / "slow-wire").exists():
        park("in-resume")
    return f"wired {amount}"


#: Scenarios whose kill point is inside the library, between two writes: the process runs on its
#: real store with one store method made to park before (or after) it writes, so the test's
#: SIGKILL lands exactly there. ``<decision>-<when>-<method>``.
WINDOWS = {
    "gate-before-put": ("gate", "before", "put_approval_request"),
    "reject-before-delete": ("reject", "before", "delete_approval_request"),
    "reject-after-delete": ("reject", "after", "delete_approval_request"),
    "expire-before-delete": ("expire", "before", "delete_approval_request"),
    "expire-after-delete": ("expire", "after", "delete_approval_request"),
}


def parking_store(url: str, when: str, method: str) -> Store:
    """The real store for ``url``, parking (until killed) ``when`` its ``method`` writes."""
    store = open_store(url)
    write = getattr(store, method)

    def parked(*args: object) -> object:
        if when == "before":
            park("in-window")
        done = write(*args)
        if when == "after":
            park("in-window")
        return done

    setattr(store, method, parked)
    return store


def window(url: str, saga_id: str, name: str) -> None:
    decision, when, method = WINDOWS[name]
    with Sagacity(store=parking_store(url, when, method)) as sg:
        if decision == "gate":
            sg.run(saga_id, lambda: (reserve("A"), wire("100.00")))
        elif decision == "reject":
            [request] = sg.pending_approvals(saga_id)
            sg.reject(saga_id, request.journal_seq, "alice@example.com", reason="not this one")
        else:
            sg.expire_approvals()


def scenario(sg: Sagacity, saga_id: str, name: str) -> None:
    if name == "during-tool":
        sg.run(saga_id, lambda: (reserve("A"), slow_charge(10)))
    elif name == "after-effect":
        sg.run(saga_id, lambda: (reserve("A"), charge_then_die(10)))
    elif name in ("during-compensation", "during-idempotent-compensation"):
        step = reserve if name == "during-compensation" else reserve_idempotent

        def agent() -> None:
            step("FAST")
            step("SLOW")
            raise RuntimeError("the model gave up")

        sg.run(saga_id, agent)
    elif name == "three-steps":

        def three() -> None:
            reserve("first")
            reserve("second")
            reserve("third")
            raise RuntimeError("the model gave up")

        sg.run(saga_id, three)
    elif name == "gate":
        sg.run(saga_id, lambda: (reserve("A"), wire("100.00")))
    elif name == "resume":
        [request] = sg.pending_approvals(saga_id)
        sg.resume(saga_id, request.journal_seq, request.input)
    elif name == "resume-race":
        request = next(iter(sg.pending_approvals(saga_id)), None)
        (MARKERS / f"ready-{os.getpid()}").touch()
        while not (MARKERS / "go").exists():
            time.sleep(0.001)
        try:
            if request is None:
                raise ApprovalNotFoundError("consumed before this process looked")
            sg.resume(saga_id, request.journal_seq, request.input)
        except (ApprovalNotFoundError, ApprovalRefusedError, SagaRunningElsewhereError):
            raise SystemExit(3) from None  # consumed, or still running in the winner
    else:
        raise SystemExit(f"unknown scenario {name}")


if __name__ == "__main__":
    url, saga, name = sys.argv[1:4]
    if name in WINDOWS:
        window(url, saga, name)
    else:
        with Sagacity(url) as sagacity:
            scenario(sagacity, saga, name)
