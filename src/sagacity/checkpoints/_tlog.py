"""C2SP tlog-checkpoints of the journal's log: sign, read, count cosignatures, verify the journal.

A log checkpoint is a standard ``tlog-checkpoint`` signed note, with no extension lines, so any
note verifier and any ``tlog-witness`` can take it::

    <origin>/log
    <tree size: entries logged>
    <base64 RFC 6962 root of the log>

    — <key name> <base64(key id || Ed25519 signature)>
    — <witness name> <base64(key id || 8-byte time || Ed25519 signature)>     (cosignatures)

Its origin is the saga checkpoint's with ``/log`` appended, so the two notes the same key signs can
never be taken one for the other (a witness keyed on the origin sees only log checkpoints).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import sagacity.checkpoints._log as _log
import sagacity.checkpoints._merkle as _merkle
import sagacity.checkpoints._note as _note
import sagacity.checkpoints._timestamp as _timestamp
from sagacity.checkpoints._format import check_origin
from sagacity.checkpoints._keys import SigningKey, VerifierKey, b64decode_canonical
from sagacity.checkpoints._scan import CheckpointFinding, CheckpointFindingKind, Source, journal_of
from sagacity.errors import CheckpointError, JournalIntegrityError

_DECIMAL = re.compile(r"^(0|[1-9][0-9]*)$")


def log_origin(origin: str) -> str:
    """The log checkpoint's origin for a journal named ``origin``."""
    return f"{check_origin(origin)}/log"


@dataclass(frozen=True)
class LogCheckpoint:
    """A signed (and perhaps cosigned) tree head of the log: ``size`` entries under ``root``."""

    origin: str
    size: int
    root: bytes
    note: str
    #: The RFC 3161 token over :attr:`text` kept beside it (a ``.tsr`` file), if it was timestamped.
    timestamp: bytes | None = field(default=None, compare=False, repr=False)
    #: The tree's compact range (``_merkle.Frontier``), kept beside it (a ``.frontier`` file) so
    #: that the next run adds only the new entries; trusted only if it folds to :attr:`root`.
    frontier: _merkle.Frontier | None = field(default=None, compare=False, repr=False)

    def checked_frontier(self) -> _merkle.Frontier | None:
        """:attr:`frontier` if it is this tree's (its shape fits the size and it folds to the
        signed root), else None: a lost or altered file only costs a full recomputation."""
        frontier = self.frontier
        if frontier is None or len(frontier) != self.size.bit_count():
            return None
        return frontier if _merkle.frontier_root(frontier) == self.root else None

    def frontier_text(self) -> str:
        """The frontier as a file: one base64 hash per line, left to right."""
        return "".join(base64.b64encode(h).decode("ascii") + "\n" for h in self.frontier or ())

    @property
    def text(self) -> str:
        """The signed text: origin, size and root lines."""
        return _note.split_note(self.note)[0]

    @property
    def root_base64(self) -> str:
        return base64.b64encode(self.root).decode("ascii")

    def with_signatures(self, lines: Iterable[_note.SignatureLine]) -> LogCheckpoint:
        """The same checkpoint with more signature lines (a repeated key's line is kept once)."""
        text, present = _note.split_note(self.note)
        seen = {(sig.name, sig.key_id) for sig in present}
        added = []
        for sig in lines:
            if (sig.name, sig.key_id) not in seen:
                seen.add((sig.name, sig.key_id))
                added.append(sig)
        return replace(self, note=_note.join_note(text, [*present, *added]))

    def cosigners(self, witnesses: Sequence[VerifierKey]) -> dict[str, int]:
        """Witness name -> POSIX time, for each of ``witnesses`` with a valid cosignature here."""
        text, signatures = _note.split_note(self.note)
        found: dict[str, int] = {}
        for key in witnesses:
            for sig in signatures:
                moment = _note.cosignature_time(text, sig, key)
                if moment is not None:
                    found[key.name] = moment
        return found

    def check_quorum(self, witnesses: Sequence[VerifierKey], quorum: int) -> dict[str, int]:
        """The cosigners, or ``CheckpointError`` when fewer than ``quorum`` of ``witnesses`` cosigned."""
        check_witnesses(witnesses, quorum)
        found = self.cosigners(witnesses)
        if len(found) < quorum:
            named = ", ".join(sorted(found)) or "none"
            raise CheckpointError(
                f"the log checkpoint at size {self.size} has {len(found)} valid cosignature(s) "
                f"({named}), the quorum is {quorum} of {len(witnesses)}"
            )
        return found


def check_witnesses(witnesses: Sequence[VerifierKey], quorum: int) -> None:
    """Refuse (``CheckpointError``) a witness named twice, or a quorum larger than the witnesses.

    A quorum counts distinct witnesses: one witness given twice would otherwise make k-of-n 1-of-n.
    """
    names = [key.name for key in witnesses]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise CheckpointError(
            f"witness {', '.join(twice)} is named more than once: a quorum counts distinct witnesses"
        )
    if quorum > len(witnesses):
        raise CheckpointError(f"a quorum of {quorum} needs at least {quorum} witness keys")


def sign_log_checkpoint(origin: str, size: int, root: bytes, key: SigningKey) -> LogCheckpoint:
    text = f"{check_origin(origin)}\n{size}\n{base64.b64encode(root).decode('ascii')}\n"
    return LogCheckpoint(origin, size, root, _note.join_note(text, [_note.sign_text(text, key)]))


def open_log_checkpoint(note: str, key: VerifierKey) -> LogCheckpoint:
    """Check ``key``'s signature on a tlog-checkpoint note and parse it (extension lines are ignored)."""
    text, signatures = _note.split_note(note)
    _note.verify_text(text, signatures, key)
    return parse_log_text(text, note)


def parse_log_text(text: str, note: str) -> LogCheckpoint:
    lines = text.removesuffix("\n").split("\n")
    if len(lines) < 3 or any(not line for line in lines):
        raise CheckpointError("a log checkpoint needs origin, size and root lines, none empty")
    origin, size_text, root_text = lines[:3]
    if not _DECIMAL.match(size_text):
        raise CheckpointError(f"log checkpoint size {size_text!r} is not a decimal number")
    try:
        root = b64decode_canonical(root_text)
    except (binascii.Error, ValueError) as exc:
        raise CheckpointError("log checkpoint root is not base64") from exc
    if len(root) != 32:
        raise CheckpointError("log checkpoint root is not 32 bytes")
    return LogCheckpoint(check_origin(origin), int(size_text), root, note)


def read_log_checkpoint(path: str | os.PathLike[str], key: VerifierKey) -> LogCheckpoint:
    """Read and check a log checkpoint file, with its timestamp token (``.tsr`` beside it) if any."""
    path = Path(path)
    try:
        note = path.read_text(encoding="utf-8")
        token = path.with_suffix(".tsr")
        timestamp = token.read_bytes() if token.is_file() else None
        kept = path.with_suffix(".frontier")
        frontier = _parse_frontier(kept.read_text(encoding="ascii")) if kept.is_file() else None
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read log checkpoint {path}: {exc}") from exc
    return replace(open_log_checkpoint(note, key), timestamp=timestamp, frontier=frontier)


def _parse_frontier(text: str) -> _merkle.Frontier | None:
    """A ``.frontier`` file's hashes (None if it is malformed: the run then recomputes)."""
    try:
        hashes = tuple(b64decode_canonical(line) for line in text.splitlines())
    except (binascii.Error, ValueError):
        return None
    return hashes if all(len(h) == 32 for h in hashes) else None


# -- the log side ---------------------------------------------------------------------------------
def checkpoint_log(
    source: Source, key: SigningKey, origin: str, *, previous: LogCheckpoint | None = None
) -> LogCheckpoint:
    """Log the entries not yet logged, check them against the journal, sign the new tree head.

    With ``previous`` (the newest one published) carrying its frontier, the run costs O(new
    entries + log n): the tree is the previous one's compact range extended by the new entries
    only, so it extends ``previous`` by construction, and only the new entries are checked
    against the journal (the earlier ones are the verifier's: :func:`verify_log` recomputes
    every leaf from the journal's rows, and ``sagacity checkpoint`` verifies every chain first).
    Without one, every logged entry is checked and the root recomputed from all of them.

    Refuses (``JournalIntegrityError``) when an entry it checks is gone or changed, or when the
    tree does not extend ``previous``: the log only grows, and signing a tree that does not would
    be signing a fork. The result carries its frontier for the next run.
    """
    journal = journal_of(source)
    log = _log.entry_log(journal.store)
    log.extend()
    size = log.size()
    if previous is not None and previous.size > size:
        raise JournalIntegrityError(
            f"refusing to sign the log: it has {size} entries, the last log checkpoint {previous.size}"
        )

    def intact(start: int) -> Iterator[bytes]:
        for leaf in log.leaves(start, size):
            if not leaf.intact:
                what = "is gone" if leaf.current is None else "no longer has the hash it was logged with"
                raise JournalIntegrityError(
                    f"refusing to sign the log: entry #{leaf.seq} of saga {leaf.saga_id!r} (log index "
                    f"{leaf.index}) {what}"
                )
            yield leaf.leaf_hash()

    known = previous.checked_frontier() if previous is not None else None
    if previous is not None and known is not None:
        frontier = _merkle.extend_frontier(known, intact(previous.size), previous.size)
    else:
        frontier = _merkle.extend_frontier((), intact(0))
    root = _merkle.frontier_root(frontier)
    if previous is not None and known is None:
        proof = _merkle.consistency_path(previous.size, size, _log.subtrees(log, as_journal=False))
        if not _merkle.verify_consistency(previous.size, size, previous.root, root, proof):
            raise JournalIntegrityError(
                f"refusing to sign the log: its first {previous.size} entries no longer fold to the root "
                "of the last log checkpoint (the log table was re-ordered or re-hashed)"
            )
    made = sign_log_checkpoint(log_origin(origin), size, root, key)
    return replace(made, frontier=frontier)


def log_consistency_proof(
    source: Source, old: int, new: int, *, known: LogCheckpoint | None = None
) -> list[bytes]:
    """The RFC 9162 proof that the log at ``new`` entries extends itself at ``old``.

    ``known``: a log checkpoint of ``old`` entries with its frontier (the previous run's): the
    proof then reads only the entries past ``old`` (O(new entries + log n)), else every one.
    """
    log = _log.entry_log(journal_of(source).store)
    rows = _log.subtrees(log, as_journal=False)
    frontier = known.checked_frontier() if known is not None and known.size == old else None
    if frontier is not None:
        rows = _merkle.frontier_subtree(old, frontier, rows)
    return _merkle.consistency_path(old, new, rows)


def log_inclusion_proof(source: Source, index: int, size: int) -> list[bytes]:
    """The RFC 9162 proof that log entry ``index`` is in the tree of ``size`` entries."""
    log = _log.entry_log(journal_of(source).store)
    return _merkle.inclusion_path(index, size, _log.subtrees(log, as_journal=False))


# -- the verifier side ----------------------------------------------------------------------------
def verify_log(source: Source, checkpoints: Sequence[LogCheckpoint]) -> list[CheckpointFinding]:
    """Does the journal, as it is now, still fold to every one of ``checkpoints``' roots?

    The leaves are recomputed from the journal's rows in log order, so an entry changed, deleted
    or re-ordered after a checkpoint took it in is found, whatever the log table now says. Two
    checkpoints of the same size with different roots are a fork.
    """
    findings: list[CheckpointFinding] = []
    # every distinct root of each size is folded: a fork's two sides are each checked (and the one
    # the journal no longer folds to is named), not just whichever was read first
    by_size: dict[int, dict[bytes, LogCheckpoint]] = {}
    for cp in checkpoints:
        roots = by_size.setdefault(cp.size, {})
        if roots and cp.root not in roots:
            other = next(iter(roots.values()))
            findings.append(
                CheckpointFinding(
                    "",
                    CheckpointFindingKind.FORKED,
                    -1,
                    cp.size,
                    cp.size,
                    f"two log checkpoints of size {cp.size} have different roots ({other.root_base64} "
                    f"and {cp.root_base64}): the log was forked",
                )
            )
        roots.setdefault(cp.root, cp)
    if not by_size:
        return findings
    log = _log.entry_log(journal_of(source).store)
    size = log.size()
    top = max(by_size)
    if top > size:
        findings.append(
            CheckpointFinding(
                "",
                CheckpointFindingKind.LOG_MISMATCH,
                size,
                top,
                size,
                f"the log has {size} entries, a checkpoint attests {top}: log rows were deleted",
            )
        )
    heads = _log.roots_at(log, set(by_size), min(top, size), as_journal=True)
    first_bad = next((leaf for leaf in log.leaves(0, min(top, size)) if not leaf.intact), None)
    for cp_size, roots in sorted(by_size.items()):
        head = heads.get(cp_size)
        if cp_size > size:
            continue
        for root, cp in roots.items():
            if head != root:
                findings.append(_mismatch(cp, head if head in roots else None, first_bad, size))
    return findings


def _mismatch(
    cp: LogCheckpoint, other: bytes | None, first_bad: _log.LogLeaf | None, size: int
) -> CheckpointFinding:
    """LOG_MISMATCH: the journal does not fold to ``cp``'s root; ``other`` is the root of another
    checkpoint of that size that it does fold to, if any."""
    named = first_bad if first_bad is not None and first_bad.index < cp.size else None
    where = (
        f"; the first entry that differs is #{named.seq} of saga {named.saga_id!r} (log index {named.index})"
        if named is not None
        else "; the log table itself was re-ordered or re-hashed"
    )
    matched = (
        f"; it folds to the other checkpoint of that size, root {base64.b64encode(other).decode('ascii')}"
        if other is not None
        else ""
    )
    return CheckpointFinding(
        named.saga_id if named is not None else "",
        CheckpointFindingKind.LOG_MISMATCH,
        named.index if named is not None else -1,
        cp.size,
        size,
        f"the journal no longer folds to the log checkpoint of size {cp.size} (root {cp.root_base64})"
        f"{where}{matched}",
    )


def verify_log_timestamps(
    checkpoints: Sequence[LogCheckpoint], trust: bytes
) -> tuple[list[CheckpointFinding], dict[int, datetime]]:
    """Check the RFC 3161 token each of ``checkpoints`` carries against the TSA's root
    certificate(s) ``trust`` (PEM): the findings, and each verified token's time by tree size.

    A token that does not verify (signature, certificate chain, or an imprint that is not the
    checkpoint's hash) is ``BAD_TIMESTAMP``; the largest checkpoint carrying none is
    ``UNTIMESTAMPED`` (older ones may predate the TSA). Needs ``rfc3161-client``.
    """
    roots = _timestamp.load_trust(trust)
    findings: list[CheckpointFinding] = []
    times: dict[int, datetime] = {}
    for cp in checkpoints:
        if cp.timestamp is None:
            continue
        try:
            times[cp.size] = _timestamp.verify_timestamp(cp.timestamp, cp.text.encode("utf-8"), roots)
        except CheckpointError as exc:
            findings.append(
                CheckpointFinding(
                    "",
                    CheckpointFindingKind.BAD_TIMESTAMP,
                    -1,
                    cp.size,
                    cp.size,
                    f"log checkpoint of size {cp.size}: {exc}",
                )
            )
    newest = max(checkpoints, key=lambda cp: cp.size, default=None)
    if newest is not None and newest.timestamp is None:
        findings.append(
            CheckpointFinding(
                "",
                CheckpointFindingKind.UNTIMESTAMPED,
                -1,
                newest.size,
                newest.size,
                f"the newest log checkpoint (size {newest.size}) carries no RFC 3161 timestamp token",
            )
        )
    return findings, times


def last_cosigned(
    checkpoints: Sequence[LogCheckpoint], witnesses: Sequence[VerifierKey], quorum: int
) -> LogCheckpoint | None:
    """The largest of ``checkpoints`` with ``quorum`` valid cosignatures by ``witnesses``."""
    check_witnesses(witnesses, quorum)
    for cp in sorted(checkpoints, key=lambda cp: cp.size, reverse=True):
        if len(cp.cosigners(witnesses)) >= quorum:
            return cp
    return None


def journal_entries(source: Source) -> int:
    """How many entries the journal holds now (logged or not)."""
    return _log.entry_log(journal_of(source).store).journal_entries()
