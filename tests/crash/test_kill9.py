"""Crash claims shown with real processes and real ``kill -9`` (SIGKILL) at each interesting point.

After each kill a fresh Sagacity (a new process's view) checks: nothing journaled is lost, the
chain verifies, the status says exactly what happened, and no effect ran twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.errors import ApprovalNotFoundError
from sagacity.tools import registry

pytestmark = pytest.mark.crash

HERE = Path(__file__).parent


@pytest.fixture
def tools(markers: Path) -> Iterator[object]:
    """This process imports the same tools, as an operator's process would before recovering."""
    sys.path.insert(0, str(HERE))
    with registry.isolated():
        sys.modules.pop("crash_tools", None)
        import crash_tools

        crash_tools.MARKERS = markers
        yield crash_tools
    sys.path.remove(str(HERE))
    sys.modules.pop("crash_tools", None)


def spawn(url: str, saga_id: str, scenario: str) -> subprocess.Popen[bytes]:
    """Run a scenario in a new Python process; its stderr goes to the markers directory."""
    log = Path(os.environ["SAGACITY_CRASH_MARKERS"]) / f"{scenario}.stderr"
    with log.open("wb") as stderr:
        return subprocess.Popen(
            [sys.executable, str(HERE / "crash_tools.py"), url, saga_id, scenario],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            stderr=stderr,
        )


def kill_at(proc: subprocess.Popen[bytes], marker: Path, timeout: float = 60.0) -> None:
    """Wait until the child reaches ``marker``, then SIGKILL it."""
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            log = marker.parent / f"{Path(str(proc.args[-1])).name}.stderr"
            raise AssertionError(f"child exited {proc.returncode} early: {log.read_text()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"child never reached {marker.name}")
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL


def effects(markers: Path) -> list[str]:
    path = markers / "effects"
    return path.read_text().splitlines() if path.exists() else []


def test_kill_during_a_tool_leaves_it_in_doubt(durable_url: str, markers: Path, tools: object) -> None:
    """Killed mid-tool: the INTENT survives, the saga is IN_DOUBT, in_doubt() lists it with its age."""
    kill_at(spawn(durable_url, "crash-tool", "during-tool"), markers / "in-tool")
    with Sagacity(durable_url) as sg:
        assert sg.verify("crash-tool").valid
        assert [(e.tool_name, e.phase) for e in sg.entries("crash-tool")] == [
            ("sagacity:saga", "INTENT"),  # the saga's START, in the first call's insert
            ("reserve", "INTENT"),
            ("reserve", "EXECUTED"),
            ("slow_charge", "INTENT"),
        ]
        assert sg.status("crash-tool") is SagaStatus.IN_DOUBT
        [doubt] = sg.in_doubt()
        assert (doubt.saga_id, doubt.seq, doubt.tool_name, doubt.kind) == (
            "crash-tool",
            4,
            "slow_charge",
            "call",
        )
        assert doubt.age.total_seconds() >= 0
        assert sg.recover() == []  # nothing is compensated automatically while in doubt
        # A human says it did not happen: the saga is then compensated normally.
        status = sg.resolve_in_doubt(
            "crash-tool", 4, happened=False, resolver="ops@example.com", reason="no charge"
        )
        assert status is SagaStatus.COMPENSATED
        entries = sg.entries("crash-tool")
        decision = next(e for e in entries if e.tool_name == "approval-gate")
        assert decision.phase == Phase.REJECTED
        assert decision.payload == "approver=ops@example.com\nreason=no charge"
        assert sg.verify("crash-tool").valid
    assert effects(markers) == ["reserve A", "charge-start 10", "release A"]


def test_kill_between_effect_and_executed(durable_url: str, markers: Path, tools: object) -> None:
    """Killed after the effect but before EXECUTED: in doubt; resolving 'it happened' records the result."""
    proc = spawn(durable_url, "crash-effect", "after-effect")
    assert proc.wait(timeout=60) == -signal.SIGKILL
    with Sagacity(durable_url) as sg:
        assert sg.status("crash-effect") is SagaStatus.IN_DOUBT
        [doubt] = sg.in_doubt("crash-effect")
        status = sg.resolve_in_doubt(
            "crash-effect", doubt.seq, happened=True, result="ch_123", resolver="ops@example.com"
        )
        # The call is settled, but the agent never finished: the saga has no END, it is abandoned
        # (recover compensates or reports it, as its start facts say), not COMPLETED.
        assert status is SagaStatus.ABANDONED
        assert sg.status("crash-effect") is SagaStatus.ABANDONED
        executed = sg.entries("crash-effect")[-1]
        assert (executed.phase, executed.tool_name, executed.payload) == (
            "EXECUTED",
            "charge_then_die",
            "ch_123",
        )
        assert sg.verify("crash-effect").valid
    assert effects(markers) == ["reserve A", "charged 10"]


def test_kill_during_compensation_is_not_rerun(durable_url: str, markers: Path, tools: object) -> None:
    """Killed mid-compensation: that compensation is in doubt (never silently re-run), and the
    earlier step waits for its resolution; compensation then carries on."""
    kill_at(spawn(durable_url, "crash-comp", "during-compensation"), markers / "in-compensation")
    with Sagacity(durable_url) as sg:
        assert sg.verify("crash-comp").valid
        assert sg.status("crash-comp") is SagaStatus.IN_DOUBT
        [doubt] = sg.in_doubt("crash-comp")
        assert doubt.kind == "compensation"
        [result] = sg.recover("crash-comp")
        assert (result.status, result.report) == (SagaStatus.IN_DOUBT, ())  # FAST waits
        assert sg.recover("crash-comp")[0].report == ()  # a second recover does nothing again
        assert effects(markers) == ["reserve FAST", "reserve SLOW", "release SLOW"]
        status = sg.resolve_in_doubt("crash-comp", doubt.seq, happened=True, resolver="ops")
        assert status is SagaStatus.COMPENSATED
        assert sg.verify("crash-comp").valid
    assert effects(markers) == ["reserve FAST", "reserve SLOW", "release SLOW", "release FAST"]


#: Every point inside a compensation of a three-step saga: before or after each step's effect.
KILL_POINTS = [(step, when) for step in ("third", "second", "first") for when in ("before", "after")]


@pytest.mark.parametrize(("step", "when"), KILL_POINTS, ids=[f"{w}-{s}" for s, w in KILL_POINTS])
def test_steps_before_an_in_doubt_compensation_wait_for_its_resolution(
    durable_url: str, markers: Path, tools: object, step: str, when: str
) -> None:
    """Killed inside a step's compensation: recover() in another process leaves that step in
    doubt and undoes nothing earlier (strict reverse order); once a human resolves it,
    compensation carries on with the earlier steps, each undone once."""
    (markers / f"park-{when}-{step}").touch()
    kill_at(spawn(durable_url, "three", "three-steps"), markers / "in-compensation")
    order = ["third", "second", "first"]
    undone_before_kill = order[: order.index(step)] + ([step] if when == "after" else [])
    booked = ["reserve first", "reserve second", "reserve third"]
    assert effects(markers) == booked + [f"release {s}" for s in undone_before_kill]
    with Sagacity(durable_url) as sg:
        [doubt] = sg.in_doubt("three")
        assert (doubt.kind, doubt.tool_name, doubt.input) == (
            "compensation",
            "reserve",
            f'{{"sku":"{step}"}}',
        )
        for _ in range(2):  # a second recover, as from cron, changes nothing either
            [result] = sg.recover("three")
            assert (result.status, result.report) == (SagaStatus.IN_DOUBT, ())
        assert effects(markers) == booked + [f"release {s}" for s in undone_before_kill]
        assert sg.status("three") is SagaStatus.IN_DOUBT
        # The human looks at the world: the undo happened if the process died after its effect.
        status = sg.resolve_in_doubt(
            "three", doubt.seq, happened=when == "after", resolver="ops@example.com", reason="checked"
        )
        assert status is (SagaStatus.COMPENSATED if when == "after" else SagaStatus.COMPENSATION_FAILED)
        assert sg.recover("three") == []
        assert sg.verify("three").valid
        undo_phases = [
            (e.input, e.phase)
            for e in sg.entries("three")
            if e.tool_name == "reserve" and e.phase != "INTENT"
        ][3:]
    resolved = "COMPENSATED" if when == "after" else "COMPENSATION_FAILED"
    assert undo_phases == [(f'{{"sku":"{s}"}}', resolved if s == step else "COMPENSATED") for s in order]
    remaining = order[order.index(step) + 1 :]
    assert effects(markers) == booked + [f"release {s}" for s in undone_before_kill + remaining]


def test_idempotent_compensation_is_rerun_by_recover(durable_url: str, markers: Path, tools: object) -> None:
    """A compensation declared idempotent that was cut off is run again by recover(); others run once."""
    kill_at(spawn(durable_url, "crash-idem", "during-idempotent-compensation"), markers / "in-compensation")
    with Sagacity(durable_url) as sg:
        [result] = sg.recover()
        assert result.status is SagaStatus.COMPENSATED
        assert sg.status("crash-idem") is SagaStatus.COMPENSATED
        assert sg.recover() == []
        assert sg.verify("crash-idem").valid
    assert effects(markers) == [
        "reserve-i FAST",
        "reserve-i SLOW",
        "release-i SLOW",
        "release-i SLOW",
        "release-i FAST",
    ]


def test_pending_approval_survives_and_kill_during_resume(
    durable_url: str, markers: Path, tools: object
) -> None:
    """A gate made by one process is approved by another; a resume killed mid-tool never runs twice."""
    assert spawn(durable_url, "crash-resume", "gate").wait(timeout=60) == 0
    with Sagacity(durable_url) as sg:
        [request] = sg.pending_approvals("crash-resume")
        sg.approve("crash-resume", request.journal_seq, "alice@example.com")
    (markers / "slow-wire").touch()
    kill_at(spawn(durable_url, "crash-resume", "resume"), markers / "in-resume")
    with Sagacity(durable_url) as sg:
        assert sg.verify("crash-resume").valid
        assert sg.status("crash-resume") is SagaStatus.IN_DOUBT
        with pytest.raises(ApprovalNotFoundError):
            sg.resume("crash-resume", request.journal_seq, request.input)
        [doubt] = sg.in_doubt("crash-resume")
        assert doubt.tool_name == "wire"
    assert effects(markers) == ["reserve A", "wire 100.00"]


def test_completed_gate_and_resume_across_processes(durable_url: str, markers: Path, tools: object) -> None:
    """The whole approval flow across three processes ends COMPLETED with the wire sent once."""
    assert spawn(durable_url, "xproc", "gate").wait(timeout=60) == 0
    with Sagacity(durable_url) as sg:
        [request] = sg.pending_approvals("xproc")
        sg.approve("xproc", request.journal_seq, "alice")
    proc = spawn(durable_url, "xproc", "resume")
    assert proc.wait(timeout=60) == 0
    with Sagacity(durable_url) as sg:
        assert sg.status("xproc") is SagaStatus.COMPLETED
    assert effects(markers) == ["reserve A", "wire 100.00"]


def test_racing_resumes_in_processes_run_the_tool_once(
    durable_url: str, markers: Path, tools: object
) -> None:
    """Four processes resume the same approved gate at once: one executes, three are refused."""
    assert spawn(durable_url, "race", "gate").wait(timeout=60) == 0
    with Sagacity(durable_url) as sg:
        [request] = sg.pending_approvals("race")
        sg.approve("race", request.journal_seq, "alice")
    procs = [spawn(durable_url, "race", "resume-race") for _ in range(4)]
    deadline = time.monotonic() + 60
    while len(list(markers.glob("ready-*"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    (markers / "go").touch()
    codes = sorted(p.wait(timeout=60) for p in procs)
    assert codes == [0, 3, 3, 3]
    assert effects(markers) == ["reserve A", "wire 100.00"]
    with Sagacity(durable_url) as sg:
        assert sg.status("race") is SagaStatus.COMPLETED
        assert sg.verify("race").valid


def test_a_gate_killed_before_its_request_row_gets_it_back_from_recover(
    durable_url: str, markers: Path, tools: object
) -> None:
    """Killed between journaling AWAITING_APPROVAL and writing its request row: the gate is open
    and nobody could approve it. `sagacity sagas recover` (and ``recover()``) put the row back
    from the journal's exact input; it is approved and resumed, and the wire runs once."""
    saga = "stranded-gate"
    kill_at(spawn(durable_url, saga, "gate-before-put"), markers / "in-window")
    with Sagacity(durable_url) as sg:
        assert sg.status(saga) is SagaStatus.AWAITING_APPROVAL
        assert sg.pending_approvals(saga) == []
        [gate] = [e for e in sg.entries(saga) if e.phase == Phase.AWAITING_APPROVAL]
    done = subprocess.run(
        [sys.executable, "-m", "sagacity.cli", "sagas", "recover", "--db", durable_url, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr  # the saga still waits for a person: a finding
    assert json.loads(done.stdout) == [
        {
            "sagaId": saga,
            "status": "AWAITING_APPROVAL",
            "detail": f"request seq {gate.seq} restored from the journal",
        }
    ]
    with Sagacity(durable_url) as sg:
        [request] = sg.pending_approvals(saga)
        assert (request.journal_seq, request.tool_name, request.input) == (gate.seq, "wire", gate.input)
        assert request.created_at == gate.timestamp
        assert sg.recover() == []
        assert len(sg.pending_approvals(saga)) == 1
        sg.approve(saga, gate.seq, "alice@example.com")
        assert sg.resume(saga, gate.seq, gate.input).status is SagaStatus.COMPLETED
        assert sg.pending_approvals(saga) == []
        assert sg.verify(saga).valid
    assert effects(markers) == ["reserve A", "wire 100.00"]


WINDOW_KILLS = [f"{d}-{w}-delete" for d in ("reject", "expire") for w in ("before", "after")]


@pytest.mark.parametrize("scenario", WINDOW_KILLS)
def test_a_rejection_killed_around_removing_the_request_leaves_the_gate_closed(
    durable_url: str, markers: Path, tools: object, scenario: str
) -> None:
    """A rejection (or an expiry) killed just before or just after it removes the request row: the
    REJECTED is journaled first, so the gate is closed either way (never open without its row);
    ``recover()`` finishes the compensation and drops a row left behind."""
    saga = f"closing-{scenario}"
    with Sagacity(durable_url, approval_ttl=timedelta(microseconds=1)) as sg:
        sg.run(saga, lambda: (tools.reserve("A"), tools.wire("100.00")))  # type: ignore[attr-defined]
        [request] = sg.pending_approvals(saga)
    kill_at(spawn(durable_url, saga, scenario), markers / "in-window")
    with Sagacity(durable_url) as sg:
        [rejected] = [e for e in sg.entries(saga) if e.phase == Phase.REJECTED]
        assert f'"seq":{request.journal_seq}' in rejected.input
        assert ("expired at" if scenario.startswith("expire") else "reason=not this one") in rejected.payload
        assert sg.status(saga) is SagaStatus.COMPENSATING
        left = [r.journal_seq for r in sg.pending_approvals(saga)]
        assert left == ([request.journal_seq] if "-before-" in scenario else [])
        [result] = sg.recover()
        assert result.status is SagaStatus.REJECTED  # a rejection (or expiry) began it
        assert sg.pending_approvals(saga) == []
        assert sg.verify(saga).valid
    assert effects(markers) == ["reserve A", "release A"]
