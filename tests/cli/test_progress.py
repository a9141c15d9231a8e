"""Progress bars (#25) on the long commands, `doctor --full` and `db reindex`: drawn on stderr when
it is a terminal (a real pseudo-terminal here), absent from a pipe; the output is the same."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from types import ModuleType

import pytest

from sagacity import Sagacity

COMMANDS = [
    (["doctor", "--full"], "checking"),
    (["db", "reindex"], "reindexing"),
]


@pytest.fixture
def journal(sg: Sagacity, tools: ModuleType) -> Sagacity:
    for n in range(30):
        sg.run(f"order-{n}", tools.cli_reserve, f"SKU-{n}", 1)
    return sg


def _run_with_terminal_stderr(args: list[str]) -> tuple[int, str, str]:
    """Run the command with stderr on a pseudo-terminal; its exit status, stdout and what the
    terminal received."""
    leader, follower = pty.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "sagacity.cli", *args],
            stdout=subprocess.PIPE,
            stderr=follower,
            env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"},
        )
        os.close(follower)
        seen = b""
        while True:
            ready, _, _ = select.select([leader], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the child
                break
            if not chunk:
                break
            seen += chunk
        assert child.stdout is not None
        with child.stdout:
            out = child.stdout.read()
        status = child.wait(timeout=60)
    finally:
        os.close(leader)
    return status, out.decode(), seen.decode(errors="replace")


@pytest.mark.parametrize(("args", "label"), COMMANDS, ids=[" ".join(a) for a, _ in COMMANDS])
def test_a_terminal_sees_a_progress_bar_a_pipe_does_not(
    db_url: str, journal: Sagacity, args: list[str], label: str
) -> None:
    status, out, terminal = _run_with_terminal_stderr([*args, "--db", db_url])
    assert status == 0, terminal
    assert label in terminal
    assert "sagas" in terminal
    piped = subprocess.run(
        [sys.executable, "-m", "sagacity.cli", *args, "--db", db_url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert piped.stdout == out
