"""Sagas whose process died between calls: ABANDONED in every other process, and ``recover``
treats them as their start facts say (compensate, or report for a human). A saga merely between
two calls in a live process is left alone. Real processes, real ``kill -9``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from sagacity import CompensationContext, Phase, Sagacity, SagaStatus, tool
from sagacity.model import FindingKind
from sagacity.tools import registry

pytestmark = pytest.mark.crash

WORKER = """
import sys, time
from pathlib import Path
from sagacity import CompensationContext, Sagacity, tool

url, saga_id, on_abandon, markers = sys.argv[1:5]
effects = Path(markers) / "effects"

@tool
def book(room: str) -> str:
    with effects.open("a") as f:
        f.write(f"book {room}\\n")
    return room

@book.compensation
def unbook(ctx: CompensationContext) -> None:
    with effects.open("a") as f:
        f.write(f"unbook {ctx.result}\\n")

def agent() -> str:
    book("101")
    (Path(markers) / "between").write_text("x")  # between two calls: now kill me, or let me go
    while not (Path(markers) / "go").exists():
        time.sleep(0.02)
    book("102")
    return "done"

with Sagacity(url) as sg:
    with sg.saga(saga_id, on_abandon=on_abandon) as saga:
        agent()
    print(saga.result.status)
"""


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    directory = tmp_path / "markers"
    directory.mkdir()
    return directory


@pytest.fixture
def tools(markers: Path) -> Iterator[None]:
    """The worker's tools, as an operator's process imports them before recovering."""
    effects = markers / "effects"
    with registry.isolated():

        @tool
        def book(room: str) -> str:
            raise AssertionError("only the worker books")

        @book.compensation
        def unbook(ctx: CompensationContext) -> None:
            with effects.open("a") as f:
                f.write(f"unbook {ctx.result} (recovered)\n")

        yield


def start_worker(
    url: str, saga_id: str, on_abandon: str, markers: Path, tmp_path: Path
) -> subprocess.Popen[str]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    worker = subprocess.Popen(
        [sys.executable, str(script), url, saga_id, on_abandon, str(markers)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (markers / "between").exists():
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, "the worker never reached its second call"
        time.sleep(0.02)
    return worker


def effects(markers: Path) -> list[str]:
    path = markers / "effects"
    return path.read_text().splitlines() if path.exists() else []


def killed(worker: subprocess.Popen[str]) -> None:
    worker.send_signal(signal.SIGKILL)
    worker.communicate(timeout=60)  # reaps it and closes its pipes
    assert worker.returncode == -signal.SIGKILL


def test_a_worker_killed_between_calls_is_abandoned_and_recover_compensates_it(
    durable_url: str, markers: Path, tmp_path: Path, tools: None
) -> None:
    killed(start_worker(durable_url, "killed-c", "compensate", markers, tmp_path))
    with Sagacity(durable_url) as sg:
        assert sg.status("killed-c") is SagaStatus.ABANDONED  # not COMPLETED: it never ended
        assert [s.status for s in sg.sagas(status=SagaStatus.ABANDONED)] == [SagaStatus.ABANDONED]
        assert sg.recover() == []  # within the grace period nothing is touched
        [result] = sg.recover(abandoned_after=timedelta(0))
        assert result.status is SagaStatus.COMPENSATED
        assert sg.status("killed-c") is SagaStatus.COMPENSATED
        assert sg.recover(abandoned_after=timedelta(0)) == []  # once
        entries = sg.entries("killed-c")
        assert [e.tool_name for e in entries if e.phase == Phase.COMPENSATED] == ["book", "saga"]
        assert (entries[-1].tool_name, entries[-1].payload) == ("sagacity:saga", '{"status":"COMPENSATED"}')
        assert sg.verify("killed-c").valid
    assert effects(markers) == ["book 101", "unbook 101 (recovered)"]


def test_an_abandoned_saga_that_says_report_is_listed_not_compensated(
    durable_url: str, markers: Path, tmp_path: Path, tools: None
) -> None:
    killed(start_worker(durable_url, "killed-r", "report", markers, tmp_path))
    with Sagacity(durable_url) as sg:
        before = sg.entries("killed-r")
        [result] = sg.recover(abandoned_after=timedelta(0))
        assert (result.saga_id, result.status, result.report) == ("killed-r", SagaStatus.ABANDONED, ())
        assert sg.entries("killed-r") == before  # nothing journaled
        assert sg.status("killed-r") is SagaStatus.ABANDONED
        # ...and the doctor shows it to a human, saying what recover would do.
        [finding] = [f for f in sg.diagnose(older_than=timedelta(0)).findings if f.saga_id == "killed-r"]
        assert finding.kind is FindingKind.ABANDONED_SAGA
        assert "onAbandon=report" in finding.action
    assert effects(markers) == ["book 101"]


def test_a_live_saga_between_calls_in_another_process_is_not_compensated(
    durable_url: str, markers: Path, tmp_path: Path, tools: None
) -> None:
    worker = start_worker(durable_url, "alive", "compensate", markers, tmp_path)
    try:
        with Sagacity(durable_url) as sg:
            assert sg.recover() == []  # the default grace period: a live process may be between calls
            assert sg.recover("alive") == []
            kinds = [f.kind for f in sg.diagnose(older_than=timedelta(0)).findings if f.saga_id == "alive"]
            assert FindingKind.ABANDONED_SAGA not in kinds  # running elsewhere: nothing to report
        (markers / "go").write_text("x")
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        assert out.strip() == "COMPLETED"
    finally:
        if worker.poll() is None:
            killed(worker)
    with Sagacity(durable_url) as sg:
        assert sg.status("alive") is SagaStatus.COMPLETED
    assert effects(markers) == ["book 101", "book 102"]
