"""Progress bars (#25) on the long commands, `doctor --full`, `db reindex`, `checkpoint`,
`export --bundle` and `verify --checkpoint`: drawn on stderr when it is a terminal (a real
pseudo-terminal here), absent from a pipe; the output is the same."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path
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


#: When a checkpoint was made, in the anchor's file names and the bundle's line: differs run to run.
_MOMENTS = re.compile(r"\d{8}T\d{6}\.\d{6}Z|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def _piped(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagacity.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "100"},
    )


def test_checkpoint_and_bundle_show_a_bar_on_a_terminal_only(
    db_url: str, journal: Sagacity, tmp_path: Path
) -> None:
    """`checkpoint` (its scan of every chain), `export --bundle` (saga by saga) and `verify
    --checkpoint` draw a bar on a terminal; piped, stderr stays empty and stdout says the same,
    each run in its own anchor."""
    pytest.importorskip("cryptography", reason="checkpoints need sagacity[signing]")
    made = _piped(["keys", "generate", "--out", str(tmp_path / "acme")])
    assert made.returncode == 0, made.stderr
    key, pub = tmp_path / "acme.key", tmp_path / "acme.pub"
    outputs: dict[str, list[str]] = {"checkpoint": [], "bundle": [], "verify": []}
    for where in ("tty", "pipe"):
        anchor = tmp_path / f"anchor-{where}"
        checkpoint = ["checkpoint", "--db", db_url, "--key", str(key), "--origin", "test.example/j"]
        bundle = ["export", *(f"order-{n}" for n in range(30)), "--db", db_url, "--bundle"]
        bundle += [str(tmp_path / f"bundle-{where}"), "--checkpoint", str(anchor), "--key", str(pub)]
        verify = ["verify", "--db", db_url, "--checkpoint", str(anchor), "--key", str(pub)]
        for name, args, label in (
            ("checkpoint", [*checkpoint, "--out", str(anchor)], "checkpoint"),
            ("bundle", bundle, "bundling"),
            ("verify", verify, "verifying"),
        ):
            if where == "tty":
                status, out, terminal = _run_with_terminal_stderr(args)
                assert status == 0, terminal
                assert label in terminal
                assert "sagas" in terminal
            else:
                piped = _piped(args)
                assert piped.returncode == 0, piped.stderr
                assert piped.stderr == ""
                out = piped.stdout
            out = out.replace(str(anchor), "ANCHOR").replace(f"bundle-{where}", "BUNDLE")
            outputs[name].append(_MOMENTS.sub("TIME", out))
    assert "30 sagas" in outputs["checkpoint"][0]
    assert outputs["checkpoint"][0] == outputs["checkpoint"][1]
    assert "30 saga(s) proven" in outputs["bundle"][0]
    assert outputs["bundle"][0] == outputs["bundle"][1]
    assert "the journal extends the checkpoint" in outputs["verify"][0]
    assert outputs["verify"][0] == outputs["verify"][1]
