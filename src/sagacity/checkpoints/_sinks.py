"""Where checkpoints are anchored: somewhere the database operator does not control.

A sink only has to publish a checkpoint and hand back the newest one. ``DirectorySink`` suits any
path (an object-lock bucket mounted with s3fs/gcsfuse, a WORM share, a disk another team owns);
``GitSink`` commits each checkpoint, so pushing the repository elsewhere copies the history with
its own tamper evidence (commit hashes). Other sinks (an HTTP witness, a transparency log) need
only the two methods of :class:`Sink`.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from sagacity.checkpoints._format import Checkpoint, leaves_path, read_checkpoint, resolve_note_path
from sagacity.checkpoints._keys import VerifierKey
from sagacity.checkpoints._tlog import LogCheckpoint, read_log_checkpoint
from sagacity.errors import CheckpointError

LATEST = "latest"
#: The log checkpoints' own pointer, beside the saga checkpoints' ``latest``.
LOG_LATEST = "log-latest"
_LOG_PREFIX = "log-checkpoint-"
#: Checkpoints are public statements: readable by all (mkstemp would leave them 0600).
_PUBLIC = 0o644


@runtime_checkable
class Sink(Protocol):
    """An anchor for checkpoints."""

    def publish(self, checkpoint: Checkpoint) -> str:
        """Store the checkpoint durably, never replacing an earlier one; say where it went."""
        ...

    def latest(self, key: VerifierKey) -> Checkpoint | None:
        """The newest checkpoint published here, signature and leaves checked; None when empty."""
        ...


def checkpoint_file_name(checkpoint: Checkpoint) -> str:
    """``checkpoint-<UTC time>-<size>.txt``: sorts by time, never repeats for distinct times."""
    return f"checkpoint-{checkpoint.time:%Y%m%dT%H%M%S.%fZ}-{checkpoint.size}.txt"


def log_file_name(checkpoint: LogCheckpoint, moment: datetime) -> str:
    """``log-checkpoint-<size, 12 digits>-<UTC time>.txt``: sorts by size, then time."""
    return f"{_LOG_PREFIX}{checkpoint.size:012d}-{moment:%Y%m%dT%H%M%S.%fZ}.txt"


def _write_new(path: Path, text: str | bytes) -> None:
    """Write ``text`` (or bytes) to ``path`` atomically and durably; fail if ``path`` exists.

    A temporary file is filled and fsynced, then hard-linked to its name: ``link`` refuses an
    existing target (``rename`` would silently replace it), so a published checkpoint is never
    overwritten, and readers never see half a file.
    """
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), _PUBLIC)
            out.write(text.encode("utf-8") if isinstance(text, str) else text)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temp, path)
        except FileExistsError as exc:
            raise CheckpointError(f"{path} exists: a published checkpoint is never overwritten") from exc
    finally:
        os.unlink(temp)


def _replace(path: Path, text: str) -> None:
    """Atomically replace ``path`` (only the ``latest`` pointer is ever replaced)."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
        os.fchmod(out.fileno(), _PUBLIC)
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, path)


def _fsync_dir(directory: Path) -> None:
    """Make the new names durable too (POSIX: a rename is durable once its directory is synced)."""
    if os.name != "posix":  # pragma: no cover
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DirectorySink:
    """Checkpoints as files in a directory: the note, its ``.leaves``, and a ``latest`` pointer."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def publish(self, checkpoint: Checkpoint) -> str:
        """Write leaves first, then the note (a note never exists without its leaves), then ``latest``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        note_path = self.directory / checkpoint_file_name(checkpoint)
        if note_path.exists():
            raise CheckpointError(f"{note_path} exists: a published checkpoint is never overwritten")
        _write_new(leaves_path(note_path), checkpoint.leaves_text())
        _write_new(note_path, checkpoint.note)
        _replace(self.directory / LATEST, note_path.name + "\n")
        _fsync_dir(self.directory)
        return str(note_path)

    def latest(self, key: VerifierKey) -> Checkpoint | None:
        if not (self.directory / LATEST).exists():
            return None
        return read_checkpoint(self.directory / LATEST, key)

    # -- log checkpoints (C2SP tlog-checkpoint notes, with their cosignatures) -----------------
    def publish_log(self, checkpoint: LogCheckpoint, timestamp: bytes | None = None) -> str:
        """Write a log checkpoint (never replacing one), its RFC 3161 token (``.tsr``) and its
        frontier (``.frontier``: the next run's starting point), then point ``log-latest`` at it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / log_file_name(checkpoint, datetime.now(UTC))
        if timestamp is not None:
            _write_new(path.with_suffix(".tsr"), timestamp)
        if checkpoint.frontier is not None:  # working state for the next run, not evidence
            _write_new(path.with_suffix(".frontier"), checkpoint.frontier_text())
        _write_new(path, checkpoint.note)
        _replace(self.directory / LOG_LATEST, path.name + "\n")
        _fsync_dir(self.directory)
        return str(path)

    def latest_log(self, key: VerifierKey) -> LogCheckpoint | None:
        """The newest log checkpoint published here (signature by ``key`` checked), if any."""
        pointer = self.directory / LOG_LATEST
        if not pointer.exists():
            return None
        return read_log_checkpoint(resolve_note_path(pointer), key)

    def latest_log_timestamp(self) -> bytes | None:
        """The RFC 3161 token of the newest log checkpoint, if it was timestamped."""
        pointer = self.directory / LOG_LATEST
        if not pointer.exists():
            return None
        token = resolve_note_path(pointer).with_suffix(".tsr")
        return token.read_bytes() if token.exists() else None

    def log_checkpoints(self, key: VerifierKey) -> list[LogCheckpoint]:
        """Every log checkpoint published here, oldest first, each signature checked."""
        if not self.directory.is_dir():
            return []
        return [read_log_checkpoint(path, key) for path in sorted(self.directory.glob(f"{_LOG_PREFIX}*.txt"))]


class GitSink(DirectorySink):
    """A ``DirectorySink`` in a git work tree that commits each checkpoint.

    Pushing (``git push`` from cron, or a post-commit hook) is left to the operator: where the
    copies go is a trust decision, not the library's.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        super().__init__(directory)
        if not self.directory.is_dir():
            raise CheckpointError(f"{self.directory} is not a directory (create it and run `git init` there)")
        if self._git("rev-parse", "--is-inside-work-tree", check=False).returncode != 0:
            raise CheckpointError(f"{self.directory} is not a git work tree (run `git init` there first)")

    def publish(self, checkpoint: Checkpoint) -> str:
        where = super().publish(checkpoint)
        note = Path(where)
        self._commit(
            f"checkpoint {checkpoint.origin}: {checkpoint.size} sagas, {checkpoint.entries} entries\n\n"
            f"root {checkpoint.root_base64}\n",
            note.name,
            leaves_path(note).name,
            LATEST,
        )
        return where

    def publish_log(self, checkpoint: LogCheckpoint, timestamp: bytes | None = None) -> str:
        where = super().publish_log(checkpoint, timestamp)
        token = [Path(where).with_suffix(".tsr").name] if timestamp is not None else []
        if checkpoint.frontier is not None:
            token.append(Path(where).with_suffix(".frontier").name)
        self._commit(
            f"log checkpoint {checkpoint.origin}: {checkpoint.size} entries\n\n"
            f"root {checkpoint.root_base64}\n",
            Path(where).name,
            *token,
            LOG_LATEST,
        )
        return where

    def _commit(self, message: str, *names: str) -> None:
        self._git("add", "--", *names)
        identity: list[str] = []
        if self._git("config", "user.email", check=False).returncode != 0:
            # A sidecar container often has no git identity; commit under a clear one.
            identity = ["-c", "user.name=sagacity", "-c", "user.email=sagacity@localhost"]
        self._git(*identity, "commit", "--quiet", "-m", message, "--", *names)

    def _git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(
                ["git", *args], cwd=self.directory, capture_output=True, text=True, check=False
            )
        except FileNotFoundError as exc:
            raise CheckpointError("the git sink needs the `git` command on PATH") from exc
        if check and done.returncode != 0:
            raise CheckpointError(f"git {args[0]} failed in {self.directory}: {done.stderr.strip()}")
        return done
