"""A full disk (a real file-size limit on the writing process): an append gives up soon, says
why, and leaves the journal whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sagacity import Phase, Sagacity

#: Appends entries of 4 KiB until the file system refuses, then reports what it saw.
WRITER = """
import json, resource, signal, sys
from sagacity import Phase, Sagacity
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
sg = Sagacity(sys.argv[1])
sg.journal.append("warm", "tool", Phase.EXECUTED, "{}", "ok")
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
written = 0
try:
    for i in range(10_000):
        sg.journal.append("full", "tool", Phase.EXECUTED, "{}", "x" * 4096)
        written += 1
except Exception as exc:
    print(json.dumps({"type": type(exc).__name__, "message": str(exc), "written": written}))
else:
    print(json.dumps({"type": None, "written": written}))
"""


def test_an_append_on_a_full_disk_gives_up_soon_and_loses_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/journal.db"
    with Sagacity(url):
        pass  # the schema exists before the limit applies
    done = subprocess.run(
        [sys.executable, "-c", WRITER, url, str(256 * 1024)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["type"] == "StoreWriteRefusedError"
    assert "refused the write" in report["message"]
    assert "is the disk full?" in report["message"]
    assert 0 < report["written"] < 10_000
    with Sagacity(url) as sg:  # no limit here: the disk has room again
        check = sg.verify("full")
        assert check.valid, check.message
        assert check.entry_count == report["written"]  # every acknowledged append, nothing half-written
        sg.journal.append("full", "tool", Phase.EXECUTED, "{}", "after")
        assert sg.verify("full").entry_count == report["written"] + 1
