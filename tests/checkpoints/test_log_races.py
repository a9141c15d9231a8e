"""Checkpointers racing each other and the appends, as separate processes: the log stays one log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sagacity import Sagacity
from sagacity.checkpoints import SigningKey, checkpoint_log, open_log_checkpoint, verify_log

from .conftest import ALL_SQL_STORES


@pytest.fixture(params=ALL_SQL_STORES)
def journal_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


CHECKPOINTER = """
import sys
from sagacity import Sagacity
from sagacity.checkpoints import SigningKey, checkpoint_log
key = SigningKey.from_text(open(sys.argv[2]).read())
with Sagacity(sys.argv[1]) as sg:
    for _ in range(8):
        print(checkpoint_log(sg, key, "race.example").note, end="\\x00", flush=True)
"""
APPENDER = """
import sys
from sagacity import Phase, Sagacity
with Sagacity(sys.argv[1]) as sg:
    for i in range(60):
        sg.journal.append(f"s{i % 7}-{sys.argv[2]}", "tool", Phase.EXECUTED, "{}", str(i))
"""


def test_racing_checkpointers_never_fork_the_log(journal_url: str, key: SigningKey, tmp_path: Path) -> None:
    key_file = tmp_path / "log.key"
    key_file.write_text(key.to_text())
    with Sagacity(journal_url):
        pass  # the schema exists before the processes start
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHECKPOINTER, journal_url, str(key_file)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ] + [subprocess.Popen([sys.executable, "-c", APPENDER, journal_url, name]) for name in ("x", "y")]
    notes = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=240)
            assert proc.returncode == 0
            notes += [note for note in (out or "").split("\x00") if note]
    finally:
        for proc in procs:  # a failed one must not leave the others running into the next test
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert len(notes) == 16
    with Sagacity(journal_url) as sg:
        final = checkpoint_log(sg, key, "race.example")
        assert final.size == 120  # every append, each logged once
        checkpoints = [open_log_checkpoint(note, key.verifier) for note in notes]
        assert verify_log(sg, [*checkpoints, final]) == []  # every head a prefix of one tree: no fork
