"""Separate processes racing appends on one saga, and racing to create a brand-new journal."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

import pytest

from sagacity import Sagacity

# Each child imports everything first, says "ready" and waits for "go", so the parent can release
# all children at once. With open_first, the child opens the journal before "ready", so what
# overlaps is the appends; without, what overlaps is creating the schema and the first append.
CHILD = """
import sys, time
from sagacity import Phase, Sagacity

url, saga_id, count, me, open_first = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
sg = Sagacity(url) if open_first == "1" else None
print("ready", flush=True)
sys.stdin.readline()
sg = sg or Sagacity(url)
started = time.time_ns()
for i in range(count):
    sg.journal.append(saga_id, "tool", Phase.INTENT, '{"i":%d}' % i, me)
finished = time.time_ns()
sg.close()
print("done", started, finished, flush=True)
"""


def race_appends(
    url: str | Sequence[str],
    saga_id: str,
    processes: int,
    appends: int,
    *,
    open_first: bool,
    timeout: float = 120,
) -> bool:
    """Run ``processes`` children that open ``url`` (a list: child n opens ``url[n % len]``, e.g.
    one per cluster node) and append ``appends`` entries each, at once.

    Returns whether every child was inside its append loop at one same moment (they overlapped).
    """
    urls = [url] if isinstance(url, str) else list(url)
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD,
                urls[n % len(urls)],
                saga_id,
                str(appends),
                f"p{n}",
                str(int(open_first)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        spans: list[tuple[int, int]] = []
        for child in children:
            out, err = child.communicate(timeout=timeout)
            assert child.returncode == 0, err
            word, started, finished = out.split()
            assert word == "done"
            spans.append((int(started), int(finished)))
        return max(start for start, _ in spans) < min(end for _, end in spans)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def _assert_all_landed(url: str, saga_id: str, processes: int, appends: int) -> None:
    with Sagacity(url) as sg:
        entries = sg.entries(saga_id)
        assert [e.seq for e in entries] == list(range(1, processes * appends + 1))
        for n in range(processes):
            mine = [e.input for e in entries if e.payload == f"p{n}"]
            assert mine == [f'{{"i":{i}}}' for i in range(appends)]  # each process's own order kept
        result = sg.verify(saga_id)
        assert (result.valid, result.entry_count) == (True, processes * appends)


def test_processes_race_appends_on_sqlite(sqlite_url: str) -> None:
    """Four processes appending to one SQLite saga all land, gap-free, each in its order, chain valid."""
    assert race_appends(sqlite_url, "shared", processes=4, appends=100, open_first=True), (
        "the children never overlapped: no race ran"
    )
    _assert_all_landed(sqlite_url, "shared", 4, 100)


@pytest.mark.postgres
def test_processes_race_appends_on_postgres(postgres_url: str) -> None:
    """Four processes appending to one PostgreSQL saga all land, gap-free, each in its order, chain valid."""
    assert race_appends(postgres_url, "shared", processes=4, appends=100, open_first=True), (
        "the children never overlapped: no race ran"
    )
    _assert_all_landed(postgres_url, "shared", 4, 100)


def test_first_append_on_brand_new_sqlite_file(sqlite_url: str) -> None:
    """Processes each creating the schema and first-appending a new saga on a new file all land."""
    race_appends(sqlite_url, "newborn", processes=4, appends=3, open_first=False)
    _assert_all_landed(sqlite_url, "newborn", 4, 3)


@pytest.mark.postgres
def test_first_append_on_brand_new_postgres_schema(postgres_url: str) -> None:
    """Processes each creating the schema and first-appending a new saga in an empty schema all land."""
    race_appends(postgres_url, "newborn", processes=4, appends=3, open_first=False)
    _assert_all_landed(postgres_url, "newborn", 4, 3)


@pytest.mark.mysql
def test_processes_race_appends_on_mariadb(mysql_url: str) -> None:
    """Four processes appending to one MariaDB saga all land, gap-free, each in its order, chain valid."""
    assert race_appends(mysql_url, "shared", processes=4, appends=100, open_first=True), (
        "the children never overlapped: no race ran"
    )
    _assert_all_landed(mysql_url, "shared", 4, 100)


@pytest.mark.mysql
def test_first_append_on_brand_new_mariadb_database(mysql_url: str) -> None:
    """Processes each creating the schema (triggers included) and first-appending a new saga in an
    empty database all land, and the index sees every row."""
    race_appends(mysql_url, "newborn", processes=4, appends=3, open_first=False)
    _assert_all_landed(mysql_url, "newborn", 4, 3)
    with Sagacity(mysql_url) as sg:
        assert [(s.saga_id, s.entry_count) for s in sg.sagas()] == [("newborn", 12)]
