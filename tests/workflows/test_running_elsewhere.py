"""A gated stage that runs for 90 s in one process while other processes resume the run.

Process 1 resumes an approved run and sits in ``publish`` for 90 s. Meanwhile other processes
run ``wf.resume`` (the keyed-call path every adapter uses) and ``sg.resume`` of the same gate:
each learns at once that the call runs elsewhere (``SagaRunningElsewhereError``), nothing is
journaled, refused or compensated, the stage stays RUNNING (never IN_DOUBT) past any fixed wait,
and process 1 runs the stage once and the run to its end. The three stores race at the same
time, so the suite pays the 90 s once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sagacity import Phase, Sagacity, SagaStatus
from sagacity.errors import SagaRunningElsewhereError

from .conftest import BRIEF, HERE, effects, in_process, statuses

#: How long the stage runs: past the 60 s a loser used to wait before compensating around it.
CALL_SECONDS = 90.0
#: When the second round of losers asks (seconds into the call): past that old wait.
LATE_ASK = 65.0


class Race:
    """One store's run: gated and approved here, then held in ``publish`` by a worker process."""

    def __init__(self, url: str, name: str, tmp: Path) -> None:
        self.url = url
        self.run_id = f"long-publish-{name}"
        self.topic = f"long story {name}"
        self.release = tmp / f"release-{name}"
        self.worker: subprocess.Popen[str] | None = None

    def gate(self, wf: ModuleType) -> None:
        with Sagacity(self.url) as sg:
            first = wf.publishing.run(sg, self.run_id, {**BRIEF, "topic": self.topic, "fail_at": "hold"})
            assert first.status is SagaStatus.AWAITING_APPROVAL
            wf.publishing.approve(sg, self.run_id, "publish", "legal@example.com")

    def hold(self) -> None:
        self.worker = subprocess.Popen(
            [sys.executable, str(HERE / "wf_app.py"), self.url, "resume", self.run_id],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "SAGACITY_WF_RELEASE": str(self.release)},
        )

    def in_publish(self) -> bool:
        return ["publish", self.topic.title()] in effects()

    def lose(self, wf: ModuleType) -> None:
        """The losers, each in a process of its own (this test's, another one): told at once."""
        assert self.worker is not None
        assert self.worker.poll() is None
        out = in_process(self.url, "resume", self.run_id)
        assert out["error"] == "SagaRunningElsewhereError", out
        assert "running" in out["message"]
        with Sagacity(self.url) as sg:
            [gate] = sg.view(self.run_id).gates  # publish's, approved and being run
            with pytest.raises(SagaRunningElsewhereError) as raised:
                sg.resume(self.run_id, gate.seq, gate.input)
            assert raised.value.saga_id == self.run_id
            view = wf.publishing.view(sg, self.run_id)
            assert view.status is SagaStatus.RUNNING
            assert statuses(view)["publish"] == "RUNNING"
            entries = sg.entries(self.run_id)
        assert not self.release.exists()
        assert self.worker.poll() is None  # answered while the call still ran
        assert [e for e in entries if e.phase in (Phase.FAILED, Phase.COMPENSATED)] == []

    def finish(self, wf: ModuleType) -> dict[str, Any]:
        assert self.worker is not None
        out, err = self.worker.communicate(timeout=120)
        assert self.worker.returncode == 0, err
        with Sagacity(self.url) as sg:
            view = wf.publishing.view(sg, self.run_id)
            ends = [e.payload for e in sg.entries(self.run_id) if e.tool_name == "sagacity:saga"][1:]
        assert view.status is SagaStatus.COMPLETED
        assert ends[-1] == json.dumps({"status": "COMPLETED"}, separators=(",", ":"))
        return dict(json.loads(out.strip().splitlines()[-1]))


def test_a_90_s_stage_running_elsewhere_is_never_compensated_on_any_store(
    wf: ModuleType, sqlite_url: str, postgres_url: str, mysql_url: str, tmp_path: Path
) -> None:
    races = [
        Race(url, name, tmp_path)
        for url, name in ((sqlite_url, "sqlite"), (postgres_url, "postgres"), (mysql_url, "mysql"))
    ]
    try:
        for race in races:
            race.gate(wf)
            race.hold()
        deadline = time.monotonic() + 60
        while not all(race.in_publish() for race in races):
            assert time.monotonic() < deadline, "a worker never reached publish"
            time.sleep(0.05)
        began = time.monotonic()
        with ThreadPoolExecutor(len(races)) as pool:
            list(pool.map(lambda race: race.lose(wf), races))
            time.sleep(max(0.0, began + LATE_ASK - time.monotonic()))
            list(pool.map(lambda race: race.lose(wf), races))  # no fixed wait turns it in doubt
        time.sleep(max(0.0, began + CALL_SECONDS - time.monotonic()))
        for race in races:
            race.release.touch()
        for race in races:
            out = race.finish(wf)
            assert out["status"] == "COMPLETED", out
        ran = effects()
        for race in races:
            title = race.topic.title()
            assert ran.count(["publish", title]) == 1
            assert not [e for e in ran if e[0] in ("discard_draft", "unformat") and title in json.dumps(e)]
    finally:
        for race in races:
            race.release.touch()
            if race.worker is not None and race.worker.poll() is None:
                race.worker.kill()
                race.worker.communicate(timeout=30)
