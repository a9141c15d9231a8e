"""docs/checkpoints.md's worked example runs as written: the witness, the checkpoints, the auditor."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "checkpoints.md"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_worked_example_runs_and_catches_the_rewrite(tmp_path: Path) -> None:
    section = DOC.read_text(encoding="utf-8").split("## Worked example", 1)[1]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 3
    # the one change: a free port instead of the page's 7380, so parallel runs never collide
    script = "set -euo pipefail\n" + "\n".join(blocks).replace("7380", str(_free_port()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGACITY_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=240)
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)  # the witness, should the script have stopped early
        except ProcessLookupError:
            pass
    assert process.returncode == 0, output
    first, forged = output.split("the witness refused")
    assert "the journal extends the checkpoint: every chain intact" in first
    assert "cosigned by witness.example/w1" in first
    assert "bundle verified" in first
    assert "ahead of the last cosigned log checkpoint" in first
    assert "the log was rolled back" in first  # the refusal is printed just before the echo
    assert "LOG_MISMATCH" in forged
    assert "UNWITNESSED" in forged
    assert forged.rstrip().endswith("the auditor caught it")
