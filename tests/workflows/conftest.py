"""The test workflow as a fixture (imported here too, with a fresh effects file per test), and
the helpers that run its actions in other processes and read what ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sagacity.tools import registry
from sagacity.workflows import StageStatus

HERE = Path(__file__).parent
BRIEF = {"topic": "sagas for agents"}


def effects() -> list[list[Any]]:
    text = Path(os.environ["SAGACITY_WF_EFFECTS"]).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def in_process(url: str, action: str, run_id: str, arg: str = "") -> dict[str, Any]:
    """One action in a fresh Python process (its own Sagacity and connections)."""
    done = subprocess.run(
        [sys.executable, str(HERE / "wf_app.py"), url, action, run_id, arg],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def statuses(view: Any) -> dict[str, StageStatus]:
    return {s.name: s.status for s in view.stages}


def race(url: str, run_id: str, actions: list[str], args: list[str]) -> list[dict[str, Any]]:
    """The actions in separate processes, released together."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "wf_app.py"), url, "wait", run_id, arg],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for arg in args
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    for proc, action in zip(procs, actions, strict=True):
        assert proc.stdin is not None
        proc.stdin.write(action + "\n")
        proc.stdin.flush()
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        outcomes.append(json.loads(out.strip().splitlines()[-1]))
    return outcomes


@pytest.fixture
def wf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("SAGACITY_WF_EFFECTS", str(tmp_path / "effects.log"))
    (tmp_path / "effects.log").touch()
    sys.path.insert(0, str(HERE))
    with registry.isolated():
        sys.modules.pop("wf_app", None)
        import wf_app

        yield wf_app
    sys.path.remove(str(HERE))
    sys.modules.pop("wf_app", None)
