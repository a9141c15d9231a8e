"""The fault tests' workload: tools that record their effects, and the processes that drive them.

As a script, one process of the workload, until the file STOP exists::

    python workload.py worker    URL EFFECTS ACKS NAME   # runs sagas, one kind after another
    python workload.py approver  URL EFFECTS ACKS NAME   # approves and resumes, or rejects, gates
    python workload.py recoverer URL EFFECTS ACKS NAME   # sg.recover() in a loop, as cron would

Every tool and compensation writes one line to EFFECTS when it acts (``do``/``undo``, saga, seq,
tool): the side ledger the journal is checked against. Every journal append the library
acknowledged to this process, and every operation's outcome, is written to ACKS.
Both are ``O_APPEND`` writes of one short line, which several processes never interleave.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagacity import CompensationContext, Reversibility, Sagacity, current_call, tool
from sagacity.errors import ApprovalRefusedError, SagacityError, StoreError

WIRE_INPUT = '{"amount":"100.00","to":"ACME"}'
#: Environment variable naming the effects ledger the tools write to.
EFFECTS_ENV = "SAGACITY_FAULT_EFFECTS"


def append_line(path: str, line: str) -> bool:
    """Append one line; False if it could not be written (a full disk, a file size limit)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        return os.write(fd, (line + "\n").encode()) > 0
    except OSError:
        return False
    finally:
        os.close(fd)


def effect(kind: str, saga_id: str, seq: int, tool_name: str) -> None:
    """Record an effect; a tool whose effect cannot be recorded did not act, so it raises."""
    if not append_line(os.environ[EFFECTS_ENV], f"{kind} {saga_id} {seq} {tool_name} {os.getpid()}"):
        raise OSError("the effects ledger could not be written")


def _do(tool_name: str) -> None:
    call = current_call()
    assert call is not None, f"{tool_name} ran outside a saga"
    effect("do", call.saga_id, call.seq, tool_name)


@tool
def fault_reserve(sku: str) -> str:
    _do("fault_reserve")
    return f"res-{sku}"


@fault_reserve.compensation
def fault_release(ctx: CompensationContext) -> None:
    effect("undo", ctx.saga_id, ctx.executed_seq, "fault_reserve")


@tool
def fault_charge(amount: str) -> str:
    _do("fault_charge")
    return f"ch-{amount}"


@fault_charge.compensation
def fault_refund(ctx: CompensationContext) -> None:
    effect("undo", ctx.saga_id, ctx.executed_seq, "fault_charge")


@tool(reversibility=Reversibility.IRREVERSIBLE, approval_ttl=24 * 3600)
def fault_wire(amount: str, to: str) -> str:
    _do("fault_wire")
    return f"sent {amount} to {to}"


@tool
def fault_flaky() -> str:
    raise RuntimeError("upstream down")


def _complete() -> None:
    fault_reserve("A")
    fault_charge("10.00")


def _fail() -> None:
    fault_reserve("A")
    fault_charge("10.00")
    fault_flaky()


def _gated() -> None:
    fault_reserve("A")
    fault_wire("100.00", "ACME")


def _long() -> None:
    for sku in ("A", "B", "C"):
        fault_reserve(sku)


#: The worker's saga kinds, taken in turn: what each must end as is checked from the journal.
KINDS: dict[str, Callable[[], None]] = {"complete": _complete, "fail": _fail, "gated": _gated, "long": _long}


def approves(saga_id: str) -> bool:
    """Whether the approver approves this saga's gate (else it rejects): fixed per saga."""
    return zlib.crc32(saga_id.encode()) % 2 == 0


class Acks:
    """This process's acknowledgements: journal entries as stored, and operations' outcomes."""

    def __init__(self, path: str, name: str) -> None:
        self.path = path
        self.name = name
        self.unwritten = 0

    def write(self, record: dict[str, Any]) -> None:
        record["by"] = self.name
        if not append_line(self.path, json.dumps(record, separators=(",", ":"))):
            self.unwritten += 1

    def watch(self, sg: Sagacity) -> None:
        """Record every entry the journal acknowledges (an append or a decision that returned)."""
        journal = sg.journal
        append, commit = journal.append, journal.commit

        def recorded_append(*args: Any, **kwargs: Any) -> Any:
            entry = append(*args, **kwargs)
            self.write({"entry": [entry.saga_id, entry.seq, entry.hash], "t": time.time()})
            return entry

        def recorded_commit(*args: Any, **kwargs: Any) -> Any:
            entries = commit(*args, **kwargs)
            for entry in entries or ():
                self.write({"entry": [entry.saga_id, entry.seq, entry.hash], "t": time.time()})
            return entries

        journal.append = recorded_append  # type: ignore[method-assign]
        journal.commit = recorded_commit  # type: ignore[method-assign]


def _error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"[:300]
    if os.environ.get("SAGACITY_FAULT_TRACE") == "1":
        import traceback

        text += " | " + " < ".join(
            f"{f.name}:{f.lineno}" for f in reversed(traceback.extract_tb(exc.__traceback__))
        )
    return text


def run_worker(sg: Sagacity, acks: Acks, stop: Path) -> None:
    kinds = list(KINDS)
    n = 0
    # Seconds between sagas (the soak keeps its CPU use down with it; the failover test runs flat out).
    pause = float(os.environ.get("SAGACITY_FAULT_PAUSE", "0"))
    while not stop.exists():
        if n and pause:
            stop_wait(stop, pause)
        kind = kinds[n % len(kinds)]
        saga_id = f"{acks.name}-{n}-{kind}"
        n += 1
        started = time.time()
        try:
            result = sg.run(saga_id, KINDS[kind])
        except SagacityError as exc:  # the store failed under the saga (its ending could not be read)
            acks.write({"op": "run", "saga": saga_id, "kind": kind, "t0": started, "error": _error(exc)})
            time.sleep(0.05)
            continue
        outcome: dict[str, Any] = {"op": "run", "saga": saga_id, "kind": kind, "t0": started}
        outcome["t1"] = time.time()
        outcome["status"] = str(result.status)
        if result.error is not None:
            outcome["error"] = _error(result.error)
        acks.write(outcome)


def run_approver(sg: Sagacity, acks: Acks, stop: Path) -> None:
    while not stop.exists():
        try:
            pending = sg.pending_approvals()
        except StoreError as exc:
            acks.write({"op": "scan", "error": _error(exc)})
            time.sleep(0.2)
            continue
        for request in pending:
            saga_id, seq = request.saga_id, request.journal_seq
            record: dict[str, Any] = {"saga": saga_id, "seq": seq, "t0": time.time()}
            try:
                if approves(saga_id):
                    record["op"] = "approve"
                    try:
                        sg.approve(saga_id, seq, "alice@example.com")
                        acks.write({**record, "t1": time.time()})
                    except ApprovalRefusedError as exc:
                        # Approved already, by an approver killed before it resumed: resume now.
                        if "already approved" not in str(exc):
                            raise
                    record["op"] = "resume"
                    result = sg.resume(saga_id, seq, request.input, resumed_by="approver")
                    record["status"] = str(result.status)
                else:
                    record["op"] = "reject"
                    decision = sg.reject(saga_id, seq, "bob@example.com", "no")
                    if decision.result is not None:
                        record["status"] = str(decision.result.status)
            except SagacityError as exc:
                record["error"] = _error(exc)
            record["t1"] = time.time()
            acks.write(record)
        stop_wait(stop, max(0.1, float(os.environ.get("SAGACITY_FAULT_PAUSE", "0"))))


def run_recoverer(sg: Sagacity, acks: Acks, stop: Path) -> None:
    every = float(os.environ.get("SAGACITY_FAULT_CRON", "1"))  # seconds between runs, as cron's
    while not stop.exists():
        record: dict[str, Any] = {"op": "recover", "t0": time.time()}
        try:
            results = sg.recover()
            record["sagas"] = [[r.saga_id, str(r.status)] for r in results]
        except SagacityError as exc:
            record["error"] = _error(exc)
        record["t1"] = time.time()
        acks.write(record)
        stop_wait(stop, every)


def stop_wait(stop: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop.exists():
        time.sleep(0.05)


ROLES = {"worker": run_worker, "approver": run_approver, "recoverer": run_recoverer}


def main() -> None:
    role, url, effects, acks_path, name = sys.argv[1:6]
    stop = Path(os.environ.get("SAGACITY_FAULT_STOP", acks_path + ".stop"))
    os.environ[EFFECTS_ENV] = effects
    # A file size limit (the nemesis's full disk) fails writes with EFBIG instead of killing us.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if os.environ.get("SAGACITY_FAULT_FSIZE"):  # the soak's full disk: no file grows past this
        limit = int(os.environ["SAGACITY_FAULT_FSIZE"])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    acks = Acks(acks_path, name)
    sg = Sagacity(url)
    acks.watch(sg)
    acks.write({"op": "start", "pid": os.getpid(), "t0": time.time()})
    try:
        ROLES[role](sg, acks, stop)
    finally:
        sg.close()


if __name__ == "__main__":
    main()
