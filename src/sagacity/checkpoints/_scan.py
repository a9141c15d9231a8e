"""One streaming pass over the journal: every chain verified, every saga compared with a checkpoint.

Creating a checkpoint and verifying against one are the same walk: saga ids in code-point order,
merged with the checkpoint's sorted leaves, each saga's entries read ``batch`` rows at a time and
checked with the public chain rule. Memory holds the saga id list and one leaf per saga, never a
saga's entries, so a saga of a million entries costs what a saga of ten does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

import sagacity._otel_hooks as _otel_hooks
import sagacity._telemetry as _telemetry
import sagacity.chain as chain
from sagacity._journal import Journal
from sagacity.checkpoints._format import Checkpoint, Leaf, format_time, sign
from sagacity.checkpoints._keys import SigningKey
from sagacity.errors import JournalIntegrityError
from sagacity.model import Entry, Progress
from sagacity.stores.base import Store

#: How far an entry's timestamp may lie before the checkpoint's time and still be legitimately
#: missing from it: clock skew between machines plus an append's own latency (its timestamp is
#: taken just before the insert commits).
DEFAULT_MAX_SKEW = timedelta(seconds=60)
DEFAULT_BATCH = 1000


class HasJournal(Protocol):
    """Anything with a journal, e.g. a ``Sagacity``."""

    @property
    def journal(self) -> Journal: ...


Source = Journal | Store | HasJournal


class CheckpointFindingKind(StrEnum):
    """What is wrong with a saga, measured against a checkpoint."""

    BROKEN = "BROKEN"  # the chain itself fails: an edited, deleted, inserted or swapped row
    SHORTENED = "SHORTENED"  # fewer entries than the checkpoint attested: tail truncated
    MISSING = "MISSING"  # the checkpoint attested the saga; it is gone
    REWRITTEN = "REWRITTEN"  # entry #count no longer hashes to the attested head: chain recomputed
    BACKDATED = "BACKDATED"  # entries absent from the checkpoint claim times before it
    LOG_MISMATCH = "LOG_MISMATCH"  # the journal in log order no longer folds to a signed log root
    FORKED = "FORKED"  # two signed log checkpoints of one size with different roots
    UNWITNESSED = "UNWITNESSED"  # a log checkpoint without the required quorum of cosignatures
    BAD_TIMESTAMP = "BAD_TIMESTAMP"  # a log checkpoint's RFC 3161 token does not verify
    UNTIMESTAMPED = "UNTIMESTAMPED"  # the newest log checkpoint has no token where one is required


@dataclass(frozen=True, slots=True)
class CheckpointFinding:
    """One saga found not to extend the checkpoint.

    ``index`` is the zero-based entry the finding points at (-1: the whole saga); ``attested``
    and ``current`` are the entry counts at the checkpoint and now.
    """

    saga_id: str
    kind: CheckpointFindingKind
    index: int
    attested: int
    current: int
    detail: str


@dataclass(frozen=True)
class CheckpointReport:
    """The journal as it is now, against a checkpoint (or, when creating one, against its chains).

    ``added`` are sagas absent from the checkpoint, with intact chains and no backdated entry:
    legitimately new, information rather than findings. ``grown`` counts attested sagas that
    have more entries now.
    """

    findings: tuple[CheckpointFinding, ...]
    added: tuple[str, ...]
    grown: int
    sagas: int
    entries: int
    checkpoint_time: datetime | None

    @property
    def ok(self) -> bool:
        """True when nothing was found: the journal extends the checkpoint."""
        return not self.findings

    def summary(self) -> str:
        """One line for people, naming the first finding."""
        if self.ok:
            return f"{self.sagas} sagas, {self.entries} entries: every chain intact"
        first = self.findings[0]
        at = f" at seq {first.index + 1}" if first.index >= 0 else ""
        more = f" (and {len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        return f"saga {first.saga_id!r} {first.kind}{at}: {first.detail}{more}"


def journal_of(source: Source) -> Journal:
    """The journal behind a Sagacity, a Journal, or a bare Store."""
    if isinstance(source, Journal):
        return source
    journal = getattr(source, "journal", None)
    if isinstance(journal, Journal):
        return journal
    return Journal(source)  # type: ignore[arg-type]


@dataclass(slots=True)
class _SagaScan:
    """What one pass over a saga's entries saw."""

    count: int = 0
    head: str = chain.GENESIS_HASH
    hash_at_attested: str | None = None
    backdated_index: int = -1
    backdated_at: datetime | None = None


def _scan_saga(
    journal: Journal, saga_id: str, attested: int, cutoff: datetime | None, batch: int
) -> tuple[_SagaScan, chain.Verification]:
    scan = _SagaScan()

    def observed() -> Iterator[Entry]:
        for index, entry in enumerate(journal.iter_entries(saga_id, batch)):
            scan.count, scan.head = index + 1, entry.hash
            if index == attested - 1:
                scan.hash_at_attested = entry.hash
            elif (
                index >= attested
                and cutoff is not None
                and scan.backdated_index < 0
                and entry.timestamp < cutoff
            ):
                scan.backdated_index, scan.backdated_at = index, entry.timestamp
            yield entry

    return scan, chain.verify(observed())


def _judge(
    saga_id: str,
    leaf: Leaf | None,
    scan: _SagaScan,
    verification: chain.Verification,
    cutoff: datetime | None,
) -> list[CheckpointFinding]:
    attested = leaf.count if leaf is not None else 0
    found: list[CheckpointFinding] = []

    def add(kind: CheckpointFindingKind, index: int, detail: str) -> None:
        found.append(CheckpointFinding(saga_id, kind, index, attested, scan.count, detail))

    if scan.count == 0:
        if leaf is not None:
            add(CheckpointFindingKind.MISSING, -1, f"deleted: the checkpoint attested {attested} entries")
        return found
    if not verification.valid:
        add(CheckpointFindingKind.BROKEN, verification.break_at_index, verification.message)
    if leaf is not None:
        if scan.count < attested:
            add(
                CheckpointFindingKind.SHORTENED,
                scan.count,
                f"{scan.count} entries, the checkpoint attested {attested}: entries were removed",
            )
        elif scan.hash_at_attested != leaf.head:
            add(
                CheckpointFindingKind.REWRITTEN,
                attested - 1,
                f"entry #{attested} hashes to {str(scan.hash_at_attested)[:16]}…, the checkpoint "
                f"attested {leaf.head[:16]}…: the chain was rewritten",
            )
    if scan.backdated_at is not None and cutoff is not None:
        add(
            CheckpointFindingKind.BACKDATED,
            scan.backdated_index,
            f"entry #{scan.backdated_index + 1} is dated {format_time(scan.backdated_at)}, before "
            f"the checkpoint ({format_time(cutoff)} allowing for skew) yet not covered by it: forged",
        )
    return found


def scan_journal(
    source: Source,
    previous: Checkpoint | None,
    *,
    max_skew: timedelta = DEFAULT_MAX_SKEW,
    progress: Progress | None = None,
    batch: int = DEFAULT_BATCH,
) -> tuple[list[Leaf], CheckpointReport]:
    """Walk every saga once; the current leaves, and findings against ``previous`` (or just chains)."""
    journal = journal_of(source)
    current = sorted(journal.read(journal.store.saga_ids))
    attested = previous.leaves if previous is not None else ()
    cutoff = previous.time - max_skew if previous is not None else None
    total = len(set(current).union(leaf.saga_id for leaf in attested)) if attested else len(current)
    leaves: list[Leaf] = []
    findings: list[CheckpointFinding] = []
    added: list[str] = []
    grown = entries = done = 0
    i = j = 0
    while i < len(current) or j < len(attested):
        if j == len(attested) or (i < len(current) and current[i] < attested[j].saga_id):
            saga_id, leaf = current[i], None
            i += 1
        elif i == len(current) or attested[j].saga_id < current[i]:
            saga_id, leaf = attested[j].saga_id, attested[j]
            j += 1
        else:
            saga_id, leaf = current[i], attested[j]
            i, j = i + 1, j + 1
        scan, verification = _scan_saga(journal, saga_id, leaf.count if leaf else 0, cutoff, batch)
        saga_findings = _judge(saga_id, leaf, scan, verification, cutoff)
        findings.extend(saga_findings)
        if scan.count:
            leaves.append(Leaf(saga_id, scan.count, scan.head))
            entries += scan.count
            if previous is not None and not saga_findings:
                if leaf is None:
                    added.append(saga_id)
                elif scan.count > leaf.count:
                    grown += 1
        done += 1
        if progress is not None:
            progress(done, total, entries)
    report = CheckpointReport(
        tuple(findings),
        tuple(added),
        grown,
        len(leaves),
        entries,
        previous.time if previous is not None else None,
    )
    return leaves, report


def create_checkpoint(
    source: Source,
    key: SigningKey,
    origin: str,
    *,
    previous: Checkpoint | None = None,
    max_skew: timedelta = DEFAULT_MAX_SKEW,
    progress: Progress | None = None,
    clock: Callable[[], datetime] = chain.utc_now,
    batch: int = DEFAULT_BATCH,
) -> Checkpoint:
    """Verify every chain and sign the journal's state as a checkpoint.

    Refuses (``JournalIntegrityError``, whose ``report`` names each saga and index) when a chain
    is broken, or when ``previous`` is given and the journal does not extend it: signing either
    would turn tampering into attested history. The time is taken before the walk, so every
    entry dated before it that had committed is covered.
    """
    moment = clock()
    leaves, report = scan_journal(source, previous, max_skew=max_skew, progress=progress, batch=batch)
    if not report.ok:
        raise JournalIntegrityError(f"refusing to sign the journal: {report.summary()}", report)
    return sign(origin, leaves, moment, key)


def verify_against_checkpoint(
    source: Source,
    checkpoint: Checkpoint,
    *,
    max_skew: timedelta = DEFAULT_MAX_SKEW,
    progress: Progress | None = None,
    batch: int = DEFAULT_BATCH,
) -> CheckpointReport:
    """Does the journal, as it is now, extend ``checkpoint``? Every saga checked, every finding kept.

    ``checkpoint`` must come from :func:`read_checkpoint` (signature and leaves checked) or
    :func:`create_checkpoint`. Read-only.
    """
    _, report = scan_journal(source, checkpoint, max_skew=max_skew, progress=progress, batch=batch)
    if not report.ok and _telemetry.active:
        _otel_hooks.verification_failed("checkpoint")
    return report
