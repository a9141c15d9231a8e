"""Rough edges an operator met (issue #33 item 26), each through the CLI in its own process.

``export -o json`` wrote a file named ``json``; ``doctor`` cut its "what to do" advice at 160
columns; the demo told the user to run ``sagacity verify`` where ``sagacity`` is not on PATH.
(``sagas resolve`` exiting 1 for an ABANDONED saga is shown, with a real kill -9 on every durable
store, in tests/concurrency/test_statuses_everywhere.py.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from sagacity import Sagacity

BIN = Path(sys.executable).parent


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "sagacity"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_export_refuses_o_as_a_file_and_writes_nothing(tmp_path: Path, tools: ModuleType) -> None:
    url = f"sqlite:///{tmp_path}/journal.db"
    with Sagacity(url) as sg:
        sg.run("order-1", tools.plain_order)
    refused = run("export", "order-1", "-o", "json", "--db", url, cwd=tmp_path)
    assert refused.returncode == 2
    assert "--out FILE" in refused.stderr
    assert refused.stdout == ""
    assert not (tmp_path / "json").exists()
    written = run("export", "order-1", "--out", "order-1.jsonl", "--db", url, cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert run("verify", "--export", "order-1.jsonl", cwd=tmp_path).returncode == 0


def test_doctor_never_cuts_what_to_do(
    durable_url: str,
    tmp_path: Path,
    live_worker: Callable[..., subprocess.Popen[str]],
    lease_gone: Callable[[Sagacity, str], None],
) -> None:
    """A call left in doubt by a killed process: the advice names the whole resolve command."""
    crashed = live_worker(durable_url, "crashed-order-12345", in_flight=True)
    crashed.send_signal(signal.SIGKILL)
    crashed.wait(30)
    with Sagacity(durable_url) as sg:
        lease_gone(sg, "crashed-order-12345")
    found = run("doctor", "--older-than", "0s", "--db", durable_url, cwd=tmp_path, env={"COLUMNS": "160"})
    assert found.returncode == 1, found.stderr
    assert "in_doubt_call" in found.stdout
    assert "--did-not-happen" in found.stdout  # the end of the advice, once cut off with "…"
    assert max(len(line) for line in found.stdout.splitlines()) <= 160


def test_the_demo_names_a_command_that_runs_from_here(tmp_path: Path) -> None:
    """Run as ``.venv/bin/sagacity demo`` (what scripts/demo does) with the venv not on PATH."""
    here = BIN.parent.parent
    done = run("demo", "--db", f"sqlite:///{tmp_path}/demo.db", cwd=here, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    me = os.path.relpath(BIN / "sagacity", here)
    assert f"Verify it yourself: {me} verify --db" in done.stdout
    assert f"{me} export --db" in done.stdout
    out = subprocess.run(
        [*me.split(), "verify", "--db", f"sqlite:///{tmp_path}/demo.db"],
        capture_output=True, text=True, timeout=120, cwd=here, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr


def test_demos_started_in_the_same_second_all_finish(tmp_path: Path) -> None:
    """Saga ids were the time of day to the second: a second demo in that second hit the first's."""
    db = f"sqlite:///{tmp_path}/demo.db"
    demos = [
        subprocess.Popen(
            [str(BIN / "sagacity"), "demo", "--db", db],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        for _ in range(3)
    ]
    outcomes = [demo.communicate(timeout=120) for demo in demos]
    for demo, (_, err) in zip(demos, outcomes, strict=True):
        assert demo.returncode == 0, err
    with Sagacity(db) as sg:
        assert len(sg.sagas()) == 12
