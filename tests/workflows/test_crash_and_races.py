"""A workflow run against real process death and real racing processes: a stage whose process is
killed (-9) mid-stage is IN_DOUBT (never RUNNING) on every surface and is not run again until a
person settles it; processes racing to reject, expire and continue one run compensate each
completed stage exactly once, in reverse."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from types import ModuleType

import pytest
from click.testing import CliRunner

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.cli import main
from sagacity.errors import SagaStateError

from .conftest import BRIEF, HERE, effects, in_process, race, statuses


def started(name: str, deadline: float = 60.0) -> None:
    """Wait (bounded) until the effects file says stage ``name`` began."""
    end = time.monotonic() + deadline
    while name not in [e[0] for e in effects()]:
        assert time.monotonic() < end, f"stage {name!r} never started"
        time.sleep(0.02)


@pytest.mark.parametrize("happened", [True, False])
def test_a_stage_killed_mid_call_is_in_doubt_and_waits_for_a_person(
    wf: ModuleType, durable_url: str, lease_gone: Callable[[Sagacity, str], None], happened: bool
) -> None:
    run_id = "article-doubt"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "wf_app.py"),
            durable_url,
            "run",
            run_id,
            json.dumps({**BRIEF, "fail_at": "hang"}),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    sg = Sagacity(durable_url)
    try:
        started("format")
        # The process lives: the stage is RUNNING, seen from this other process.
        while_alive = wf.publishing.view(sg, run_id)
        assert while_alive.status is SagaStatus.RUNNING
        assert statuses(while_alive) == {"draft": "COMPLETED", "format": "RUNNING", "publish": "PENDING"}
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        lease_gone(sg, run_id)

        view = wf.publishing.view(sg, run_id)
        assert view.status is SagaStatus.IN_DOUBT
        assert view.current_stage == "format"
        assert statuses(view) == {"draft": "COMPLETED", "format": "IN_DOUBT", "publish": "PENDING"}
        shown = CliRunner().invoke(
            main, ["workflows", "show", run_id, "--json", "--import", "wf_app", "--db", durable_url]
        )
        assert shown.exit_code == 0, shown.output
        assert [s["status"] for s in json.loads(shown.output)["stages"]] == [
            "COMPLETED",
            "IN_DOUBT",
            "PENDING",
        ]
        table = CliRunner().invoke(
            main, ["workflows", "show", run_id, "--import", "wf_app", "--db", durable_url]
        )
        assert "stage 'format' is in doubt" in table.output

        # Continuing is refused before anything is journaled: nothing re-runs, nothing compensates.
        before = len(sg.entries(run_id))
        with pytest.raises(SagaStateError, match="in doubt"):
            wf.publishing.resume(sg, run_id)
        assert len(sg.entries(run_id)) == before
        assert [e[0] for e in effects()] == ["draft", "format"]

        [doubt] = sg.view(run_id).in_doubt
        output = {"title": "Sagas For Agents", "html": "<h1>Sagas For Agents</h1>"}
        sg.resolve_in_doubt(
            run_id, doubt.seq, happened=happened, resolver="ops@example.com", result=json.dumps(output)
        )
        if happened:
            # Settled, nobody has continued it yet: the run stands ABANDONED, and `recover` from
            # cron, however long after, reports it and undoes nothing: a run is continued, not
            # abandoned (its START says onAbandon report).
            assert wf.publishing.view(sg, run_id).status is SagaStatus.ABANDONED
            settled = sg.entries(run_id)
            reported = [r for r in sg.recover(abandoned_after=timedelta(0)) if r.saga_id == run_id]
            assert [r.status for r in reported] == [SagaStatus.ABANDONED]
            assert sg.entries(run_id) == settled
            assert json.loads(settled[0].input)["onAbandon"] == "report"
        after = in_process(durable_url, "resume", run_id)
        if happened:  # format's journaled output goes on to the gate; format does not run again
            assert after == {"status": "AWAITING_APPROVAL", "stage": "publish", "output": None}
            assert [e[0] for e in effects()] == ["draft", "format"]
            gate = wf.publishing.view(sg, run_id).stages[2].gate
            assert gate is not None
            assert json.loads(gate.input)["input"] == output
        else:  # it did not happen: the run fails there and the draft is undone, once
            assert after["status"] == "COMPENSATED"
            assert [e[0] for e in effects()] == ["draft", "format", "discard_draft"]
            assert statuses(wf.publishing.view(sg, run_id))["format"] == "FAILED"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        sg.close()


def test_racing_rejections_expiry_and_continues_compensate_each_stage_once(
    wf: ModuleType, durable_url: str
) -> None:
    """Two rejecters, an expirer and two continuers released together on a run at its gate."""
    in_process(durable_url, "run", "article-race", json.dumps(BRIEF))
    outcomes = race(
        durable_url,
        "article-race",
        ["reject", "expire", "reject", "resume", "resume"],
        ["ann@example.com", "", "bob@example.com", "", ""],
    )
    decided = [o for o in outcomes if "rejected" in o or o.get("expired")]
    assert len(decided) == 1, outcomes  # one decision lands; the others find the gate decided
    undos = [e[0] for e in effects() if e[0] in ("unformat", "discard_draft")]
    assert undos == ["unformat", "discard_draft"]  # each once, the last stage first
    sg = Sagacity(durable_url)
    try:
        view = wf.publishing.view(sg, "article-race")
        assert view.status is SagaStatus.REJECTED
        assert statuses(view) == {"draft": "COMPENSATED", "format": "COMPENSATED", "publish": "REJECTED"}
        entries = sg.entries("article-race")
        assert [e.phase for e in entries].count(Phase.REJECTED) == 1
        assert [e.tool_name for e in entries if e.phase == Phase.COMPENSATED and "/" in e.tool_name] == [
            "publish-article/format",
            "publish-article/draft",
        ]
        assert sg.verify("article-race").valid
        assert "publish" not in [e[0] for e in effects()]
    finally:
        sg.close()


def test_racing_runs_of_a_failing_run_compensate_once(wf: ModuleType, durable_url: str) -> None:
    """Three processes start the same embargoed run at once: the check fails once, each completed
    stage is undone once, and the run ends COMPENSATED."""
    brief = json.dumps({**BRIEF, "embargo": "2027-01-01"})
    outcomes = race(durable_url, "article-embargo", ["run", "run", "run"], [brief, brief, brief])
    assert any(o.get("status") == "COMPENSATED" for o in outcomes), outcomes
    assert sorted(e[0] for e in effects()) == ["discard_draft", "draft", "format", "unformat"]
    ran = [e[0] for e in effects()]
    assert ran.index("unformat") < ran.index("discard_draft")
    sg = Sagacity(durable_url)
    try:
        view = wf.publishing.view(sg, "article-embargo")
        assert view.status is SagaStatus.COMPENSATED
        assert view.stages[2].checks[0].status == "FAILED"
        assert statuses(view) == {"draft": "COMPENSATED", "format": "COMPENSATED", "publish": "FAILED"}
        assert sg.verify("article-embargo").valid
    finally:
        sg.close()
