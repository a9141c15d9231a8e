"""A SQLite journal this process may not write: an auditor's read-only copy verifies and exports,
and everything that would write says so as a ``StoreError`` (never a raw ``PermissionError``).

Each check runs in a separate process that cannot write the copy: the permission bits say so,
and a test running as root drops the capabilities that let root ignore them (``setpriv``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from sagacity import Sagacity, SagaStatus

HERE = Path(__file__).parent
CHILD = HERE / "read_only_child.py"


def reader_prefix() -> list[str]:
    """What makes a child obey permission bits: nothing for a normal user; for root, dropping
    CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from its bounding set."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): root would ignore the permission bits")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


def child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*reader_prefix(), sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )


def library(url: str, action: str) -> dict[str, object]:
    done = child(str(CHILD), url, action)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return child("-m", "sagacity.cli", *args)


def seal(folder: Path) -> None:
    """As an auditor receives a copy: every file 444, the folder 555."""
    for path in folder.iterdir():
        path.chmod(0o444)
    folder.chmod(0o555)


@pytest.fixture
def copy_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "copy"
    folder.mkdir()
    yield folder
    folder.chmod(0o755)  # so that pytest can clean up as any user
    for path in folder.iterdir():
        path.chmod(0o644)


def journal_with_two_sagas(url: str) -> Sagacity:
    """An open Sagacity whose journal holds a completed and a compensated saga."""
    sys.path.insert(0, str(HERE))
    try:
        import read_only_child
    finally:
        sys.path.remove(str(HERE))
    sg = Sagacity(url)
    sg.run("done", read_only_child.book, "seat")

    def agent() -> None:
        read_only_child.book("room")
        raise RuntimeError("no")

    sg.run("undone", agent)
    return sg


def test_a_read_only_copy_verifies_and_exports(tmp_path: Path, copy_dir: Path) -> None:
    """File 444, folder 555, no -wal/-shm beside it: `sagacity verify`, `sagacity export` and
    `sg.verify` work, read exactly what was written, and leave nothing beside the copy."""
    original = tmp_path / "journal.db"
    with journal_with_two_sagas(f"sqlite:///{original}") as sg:
        exported = {saga_id: list(sg.export(saga_id)) for saga_id in ("done", "undone")}
    assert not (tmp_path / "journal.db-wal").exists()  # closed cleanly: every commit in the file
    shutil.copy(original, copy_dir / "journal.db")
    seal(copy_dir)
    url = f"sqlite:///{copy_dir / 'journal.db'}"

    assert library(url, "verify") == {"value": [["done", True, 4], ["undone", True, 8]]}  # START, END
    assert library(url, "export") == {"value": exported}
    verified = cli("verify", "--db", url, "--json")
    assert verified.returncode == 0, verified.stderr
    assert '"valid": true' in verified.stdout.replace('"valid":true', '"valid": true')
    out = cli("export", "undone", "--db", url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == exported["undone"]
    assert [p.name for p in copy_dir.iterdir()] == ["journal.db"]


def test_a_read_only_copy_with_its_wal_reads_the_commits_in_it(tmp_path: Path, copy_dir: Path) -> None:
    """A copy taken while the journal was open holds commits in its -wal: read through its -shm,
    every entry is there."""
    with journal_with_two_sagas(f"sqlite:///{tmp_path / 'journal.db'}") as sg:
        assert (tmp_path / "journal.db-wal").stat().st_size > 0
        for name in ("journal.db", "journal.db-wal", "journal.db-shm"):
            shutil.copy(tmp_path / name, copy_dir / name)
        expected = [[s, True, len(sg.entries(s))] for s in ("done", "undone")]
    seal(copy_dir)
    assert library(f"sqlite:///{copy_dir / 'journal.db'}", "verify") == {"value": expected}


def test_a_read_only_copy_with_a_wal_but_no_shm_says_how_to_copy_it(tmp_path: Path, copy_dir: Path) -> None:
    """The -wal's commits cannot be read without its -shm in a read-only folder: a clear error
    naming the fix, not a silently shorter journal."""
    with journal_with_two_sagas(f"sqlite:///{tmp_path / 'journal.db'}"):
        for name in ("journal.db", "journal.db-wal"):
            shutil.copy(tmp_path / name, copy_dir / name)
    seal(copy_dir)
    url = f"sqlite:///{copy_dir / 'journal.db'}"
    result = library(url, "verify")
    assert result["error"] == "StoreError"
    assert "-wal" in str(result["message"])
    assert "-shm" in str(result["message"])
    assert ".backup" in str(result["message"])
    verified = cli("verify", "--db", url)
    assert verified.returncode == 2
    assert "-shm is missing" in verified.stderr + verified.stdout


@pytest.mark.parametrize("action", ["run", "fail", "list"])
def test_what_would_write_a_read_only_copy_says_so(tmp_path: Path, copy_dir: Path, action: str) -> None:
    """Running a saga (also one that fails and would compensate) or listing sagas (which catches
    the saga index up) on a read-only copy is a StoreError saying it is read-only here."""
    with journal_with_two_sagas(f"sqlite:///{tmp_path / 'journal.db'}"):
        pass
    shutil.copy(tmp_path / "journal.db", copy_dir / "journal.db")
    seal(copy_dir)
    result = library(f"sqlite:///{copy_dir / 'journal.db'}", action)
    assert result["error"] == "StoreError", result
    assert "cannot be written by this process" in str(result["message"])
    assert "read-only here" in str(result["message"])
    assert [p.name for p in copy_dir.iterdir()] == ["journal.db"]


@dataclass(frozen=True)
class LiveRun:
    """What a child did in a read-only folder, and the journal this process kept open."""

    result: dict[str, object]
    owner: Sagacity


class LiveFolder:
    """A writable journal alone in its folder, which a child process may find read-only."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.url = f"sqlite:///{folder / 'journal.db'}"

    @contextmanager
    def read_only_while_open(self, action: str, *, touch: tuple[str, ...] = ()) -> Iterator[LiveRun]:
        """Run ``action`` in a child while this process holds the journal open (so its -wal and
        -shm stay in place) and the folder is read-only (files named in ``touch`` made first);
        yield the child's result and the open Sagacity, the folder writable again."""
        with Sagacity(self.url) as owner, sqlite3.connect(self.folder / "journal.db") as keep_open:
            keep_open.execute("SELECT 1").fetchone()
            for name in touch:
                (self.folder / name).touch()
            self.folder.chmod(0o555)
            try:
                result = library(self.url, action)
            finally:
                self.folder.chmod(0o755)
            yield LiveRun(result, owner)


@pytest.fixture
def live_folder(tmp_path: Path) -> LiveFolder:
    folder = tmp_path / "live"
    folder.mkdir()
    return LiveFolder(folder)


def test_a_writable_journal_in_a_read_only_folder_fails_with_a_store_error(live_folder: LiveFolder) -> None:
    """The journal and its -wal/-shm are writable but the folder is not, so the lease file a
    compensation needs cannot be created: run() raises StoreError naming it (not PermissionError),
    and once the folder is writable, recover() finishes the compensation."""
    # The liveness file is there and writable (any earlier saga made it); the lease file only a
    # compensation needs is not.
    with live_folder.read_only_while_open("fail", touch=("journal.db-sagacity-live",)) as run:
        assert run.result["error"] == "StoreError", run.result
        assert "lease file" in str(run.result["message"])
        assert "-sagacity-lease" in str(run.result["message"])
        assert run.owner.status("failing") is SagaStatus.COMPENSATING
    assert library(live_folder.url, "verify") == {"value": [["failing", True, 5]]}  # with the START
    sys.path.insert(0, str(HERE))
    try:
        import read_only_child  # noqa: F401 - recover() finds the tool by name
    finally:
        sys.path.remove(str(HERE))
    with Sagacity(live_folder.url) as sg:
        [recovered] = sg.recover()
        assert recovered.status is SagaStatus.COMPENSATED


def test_a_saga_that_cannot_make_its_liveness_file_refuses_to_start(live_folder: LiveFolder) -> None:
    """Where the folder is read-only and the liveness file missing, a saga cannot show it is
    running: it fails closed before its first call (StoreError naming the file), journaling nothing."""
    with live_folder.read_only_while_open("run") as run:
        assert run.result["error"] == "StoreError", run.result
        assert "liveness file" in str(run.result["message"])
        assert run.owner.saga_ids() == []  # the tool never ran, nothing was journaled
    assert library(live_folder.url, "run") == {"value": "COMPLETED"}  # with the folder writable, it runs
