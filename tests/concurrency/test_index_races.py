"""The saga index under real processes: writers appending while readers catch the index up.

Every reader folds what changed and consumes the notes it read while writers keep appending;
a catch-up that consumed a note it had not folded, or two catch-ups overwriting each other
with older folds, would leave a saga stale. At the end the index must equal the fold of every
journal.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sagacity import Sagacity
from sagacity._index import ScanIndex

WRITER = """
import sys
from sagacity import Phase, Sagacity

url, me, sagas = sys.argv[1], sys.argv[2], int(sys.argv[3])
sg = Sagacity(url)
print("ready", flush=True)
sys.stdin.readline()
for n in range(sagas):
    saga = f"{me}-{n}"
    for step in range(3):
        args = '{"step":%d}' % step
        sg.journal.append(saga, "tool", Phase.INTENT, args)
        if n % 5 != 4 or step < 2:  # every fifth saga ends in doubt
            sg.journal.append(saga, "tool", Phase.EXECUTED, args, "ok")
sg.close()
print("done", flush=True)
"""

READER = """
import os, sys
from sagacity import Sagacity

url, stop = sys.argv[1], sys.argv[2]
sg = Sagacity(url)
print("ready", flush=True)
sys.stdin.readline()
folded = 0
while not os.path.exists(stop):
    folded += sg.index.refresh()  # what an operator read does first, counted
sg.close()
print("done", folded, flush=True)
"""


def _start(script: str, *args: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready", child.stderr.read() if child.stderr else ""
    return child


def test_readers_catching_up_while_writers_append_lose_nothing(durable_url: str, tmp_path: Path) -> None:
    """3 writer processes append 40 sagas each while 2 reader processes catch the index up in a
    loop; afterwards the index is exactly the fold of every journal, and the readers did fold
    sagas while the writers ran (they raced)."""
    with Sagacity(durable_url):
        pass  # the schema, before anyone races
    stop = tmp_path / "stop"
    writers = [_start(WRITER, durable_url, f"w{n}", "40") for n in range(3)]
    readers = [_start(READER, durable_url, str(stop)) for _ in range(2)]
    for child in writers + readers:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    for child in writers:
        out, err = child.communicate(timeout=240)
        assert child.returncode == 0, err
        assert out.strip() == "done"
    stop.touch()
    folded_by_readers = []
    for child in readers:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        folded_by_readers.append(int(out.split()[1]))
    assert sum(folded_by_readers) > 0, "the readers never caught up while the writers ran"
    with Sagacity(durable_url) as sg:
        oracle = ScanIndex(sg.journal)
        assert sg.index.page(None, None, None) == oracle.page(None, None, None)
        assert sg.index.counts() == oracle.counts()
        assert len(sg.in_doubt()) == 3 * 8
