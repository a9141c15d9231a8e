"""The checkpoint's two files: the signed note and its leaves list (docs/checkpoints.md).

The note is a C2SP signed note whose text follows tlog-checkpoint::

    <origin>
    <size: number of sagas, the Merkle tree size>
    <base64 Merkle root>
    entries <total entries>
    time <YYYY-MM-DDTHH:MM:SS.ffffffZ>

    — <key name> <base64(4-byte key id || 64-byte Ed25519 signature)>

The leaves file lists one saga per line, ``<percent-encoded saga id> <count> <head hex>``, sorted
by saga id (code points). It is not signed itself: the root in the note commits to it, so a reader
recomputes the root and refuses a list that does not match. Keeping it apart keeps the signed note
small and lets a bundle carry the note without revealing every other saga's id.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, unquote

import sagacity.checkpoints._merkle as _merkle
import sagacity.checkpoints._note as _note
from sagacity.checkpoints._keys import SigningKey, VerifierKey, b64decode_canonical
from sagacity.errors import CheckpointError

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_DECIMAL = re.compile(r"^(0|[1-9][0-9]*)$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class Leaf:
    """One saga as a checkpoint attests it: its entry count and the hash of its last entry."""

    saga_id: str
    count: int
    head: str

    def leaf_hash(self) -> bytes:
        return _merkle.leaf_hash(self.saga_id, self.count, self.head)

    def to_line(self) -> str:
        return f"{encode_saga_id(self.saga_id)} {self.count} {self.head}"


@dataclass(frozen=True)
class Checkpoint:
    """A signed statement of the whole journal's state at ``time`` (naive UTC, microseconds).

    ``size`` is the number of sagas (the Merkle tree's size), ``entries`` the total entry count,
    ``leaves`` the sagas sorted by id, ``note`` the signed note exactly as written to disk.
    """

    origin: str
    size: int
    root: bytes
    entries: int
    time: datetime
    leaves: tuple[Leaf, ...]
    note: str

    @property
    def root_base64(self) -> str:
        return base64.b64encode(self.root).decode("ascii")

    def leaf(self, saga_id: str) -> tuple[int, Leaf] | None:
        """The saga's index and leaf, if the checkpoint covers it (binary search: leaves are sorted)."""
        lo, hi = 0, len(self.leaves)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.leaves[mid].saga_id < saga_id:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self.leaves) and self.leaves[lo].saga_id == saga_id:
            return lo, self.leaves[lo]
        return None

    def leaves_text(self) -> str:
        """The companion leaves file's content."""
        return "".join(leaf.to_line() + "\n" for leaf in self.leaves)


def encode_saga_id(saga_id: str) -> str:
    """Percent-encoded UTF-8 (RFC 3986 unreserved characters kept): one token, any saga id."""
    return quote(saga_id, safe="")


def decode_saga_id(token: str) -> str:
    """The inverse of :func:`encode_saga_id`; a non-canonical encoding is refused."""
    saga_id = unquote(token, errors="strict")
    if encode_saga_id(saga_id) != token:
        raise ValueError(f"saga id {token!r} is not canonically percent-encoded")
    return saga_id


def check_origin(origin: str) -> str:
    """An origin is one line of printable text without surrounding spaces."""
    if not origin or origin != origin.strip() or not origin.isprintable():
        raise CheckpointError(f"origin {origin!r} must be non-empty printable text on one line")
    return origin


def format_time(moment: datetime) -> str:
    return moment.strftime(TIME_FORMAT)


# -- building and signing -------------------------------------------------------------------------
def sign(origin: str, leaves: Iterable[Leaf], time: datetime, key: SigningKey) -> Checkpoint:
    """Fold the sorted leaves into a root and sign the note."""
    leaves = tuple(leaves)
    root = _merkle.root(leaf.leaf_hash() for leaf in leaves)
    entries = sum(leaf.count for leaf in leaves)
    body = (
        f"{check_origin(origin)}\n{len(leaves)}\n{base64.b64encode(root).decode('ascii')}\n"
        f"entries {entries}\ntime {format_time(time)}\n"
    )
    note = _note.join_note(body, [_note.sign_text(body, key)])
    return Checkpoint(origin, len(leaves), root, entries, time, leaves, note)


# -- reading and checking -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NoteHead:
    """What a verified note says, before its leaves are read."""

    origin: str
    size: int
    root: bytes
    entries: int
    time: datetime


def open_note(note: str, key: VerifierKey) -> NoteHead:
    """Check the note's signature by ``key``, then parse its text. Raises ``SignatureError``."""
    body, signatures = _note.split_note(note)
    _note.verify_text(body, signatures, key)
    return _parse_body(body)


def _parse_body(body: str) -> NoteHead:
    lines = body.splitlines()
    if len(lines) < 3:
        raise CheckpointError("checkpoint text needs origin, size and root lines")
    origin, size_text, root_text = lines[:3]
    if not _DECIMAL.match(size_text):
        raise CheckpointError(f"checkpoint size {size_text!r} is not a decimal number")
    try:
        root = b64decode_canonical(root_text)
    except (binascii.Error, ValueError) as exc:
        raise CheckpointError("checkpoint root is not base64") from exc
    if len(root) != 32:
        raise CheckpointError("checkpoint root is not 32 bytes")
    extensions: dict[str, str] = {}
    for line in lines[3:]:
        name, _, value = line.partition(" ")
        if name in extensions:
            raise CheckpointError(f"checkpoint line {name!r} appears twice")
        extensions[name] = value
    entries_text, time_text = extensions.get("entries", ""), extensions.get("time", "")
    if not _DECIMAL.match(entries_text):
        raise CheckpointError("checkpoint has no valid 'entries <n>' line")
    try:
        time = datetime.strptime(time_text, TIME_FORMAT)
    except ValueError as exc:
        raise CheckpointError(f"checkpoint time {time_text!r} is not {TIME_FORMAT}") from exc
    return NoteHead(check_origin(origin), int(size_text), root, int(entries_text), time)


def parse_leaves(lines: Iterable[str]) -> Iterator[Leaf]:
    """Leaves from the companion file, checked for form and strict sort order."""
    previous: str | None = None
    for number, line in enumerate(lines, start=1):
        parts = line.rstrip("\n").split(" ")
        try:
            if len(parts) != 3 or not _DECIMAL.match(parts[1]) or not _HEX64.match(parts[2]):
                raise ValueError("expected '<saga id> <count> <64 hex>'")
            saga_id = decode_saga_id(parts[0])
        except (ValueError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"leaves line {number}: {exc}") from exc
        if previous is not None and saga_id <= previous:
            raise CheckpointError(f"leaves line {number}: saga ids out of order or repeated")
        previous = saga_id
        yield Leaf(saga_id, int(parts[1]), parts[2])


def assemble(note: str, head: NoteHead, leaves: Iterable[Leaf]) -> Checkpoint:
    """A Checkpoint from a verified note and its leaves, if the leaves fold to the signed root."""
    leaves = tuple(leaves)
    if len(leaves) != head.size or _merkle.root(leaf.leaf_hash() for leaf in leaves) != head.root:
        raise CheckpointError(
            "the leaves file does not match the signed root: it was altered or belongs to another checkpoint"
        )
    if sum(leaf.count for leaf in leaves) != head.entries:
        raise CheckpointError("the leaves' entry counts do not add up to the signed total")
    return Checkpoint(head.origin, head.size, head.root, head.entries, head.time, leaves, note)


def leaves_path(note_path: str | os.PathLike[str]) -> Path:
    """Where a note's leaves live: the same name with ``.leaves`` for ``.txt``."""
    path = Path(note_path)
    return path.with_name(path.name.removesuffix(".txt") + ".leaves")


def resolve_note_path(path: str | os.PathLike[str]) -> Path:
    """A note file; a directory or its ``latest`` pointer resolves to the newest checkpoint in it
    (``log-latest``: the newest log checkpoint)."""
    path = Path(path)
    if path.is_dir():
        path = path / "latest"
    if path.name in ("latest", "log-latest"):
        try:
            name = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CheckpointError(f"no checkpoint at {path}: {exc}") from exc
        if not name or "/" in name or "\\" in name or name.startswith("."):
            raise CheckpointError(f"{path} does not name a checkpoint file")
        path = path.with_name(name)
    return path


def read_checkpoint(path: str | os.PathLike[str], key: VerifierKey) -> Checkpoint:
    """Read a note and its leaves file, check the signature and the root. Raises on any mismatch."""
    note_path = resolve_note_path(path)
    try:
        note = note_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read checkpoint {note_path}: {exc}") from exc
    head = open_note(note, key)
    companion = leaves_path(note_path)
    try:
        with companion.open(encoding="utf-8", newline="\n") as lines:
            return assemble(note, head, parse_leaves(lines))
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read the checkpoint's leaves {companion}: {exc}") from exc
