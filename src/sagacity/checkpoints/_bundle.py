"""Evidence bundles: sagas as JSON Lines, the signed checkpoints, and the Merkle proofs linking them.

A bundle is a directory an auditor can check offline with the public keys and nothing else
(``python -m sagacity.verify_bundle``)::

    bundle.json         manifest: format, and per saga its file, leaf index, attested count and
                        head, and the inclusion proof of that leaf under the signed root; with a
                        log checkpoint, per saga its last logged entry's log index and inclusion
                        proof, and consistency proofs from older log checkpoints (``since``)
    checkpoint.txt      the signed note, verbatim
    log-checkpoint.txt  the log's C2SP checkpoint with its witnesses' cosignatures (optional)
    log-checkpoint.tsr  an RFC 3161 timestamp token over that checkpoint's text (optional)
    sagas/000001.jsonl  one saga's export (SPEC §7 lines), possibly longer than the checkpoint

The checkpoint's leaves file is deliberately not included: the proofs show each bundled saga's
leaf is in the signed tree without revealing any other saga's id.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import sagacity.checkpoints._log as _log
import sagacity.checkpoints._merkle as _merkle
import sagacity.checkpoints._note as _note
from sagacity._journal import Journal
from sagacity.chain import verify
from sagacity.checkpoints._format import Checkpoint, Leaf
from sagacity.checkpoints._scan import DEFAULT_BATCH, Source, journal_of
from sagacity.checkpoints._tlog import LogCheckpoint
from sagacity.errors import CheckpointError, JournalIntegrityError
from sagacity.export import export_lines
from sagacity.model import Entry, Progress

BUNDLE_FORMAT = "sagacity-bundle/v2"
MANIFEST = "bundle.json"
CHECKPOINT_FILE = "checkpoint.txt"
LOG_CHECKPOINT_FILE = "log-checkpoint.txt"
LOG_TIMESTAMP_FILE = "log-checkpoint.tsr"


def write_bundle(
    source: Source,
    saga_ids: Iterable[str],
    checkpoint: Checkpoint,
    directory: str | os.PathLike[str],
    *,
    log: LogCheckpoint | None = None,
    since: Sequence[LogCheckpoint] = (),
    log_timestamp: bytes | None = None,
    progress: Progress | None = None,
) -> Path:
    """Write the sagas, ``checkpoint`` and inclusion proofs to ``directory`` (new or empty).

    Each saga must be covered by the checkpoint, and its chain must be intact and still hold the
    attested head at the attested count: a bundle that would fail verification is not written.
    Entries appended after the checkpoint are exported too; they verify as a chain, but only the
    first ``count`` are attested. With ``log`` (a log checkpoint of this journal), each saga's last
    entry in that log is proven included too, and for each of ``since`` (older log checkpoints)
    a consistency proof to ``log`` is added, and ``log_timestamp`` (its RFC 3161 token) goes too.
    ``progress(sagas written, sagas, attested entries)`` is called after each saga.
    """
    journal = journal_of(source)
    target = Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise CheckpointError(f"{target} exists and is not an empty directory")
    wanted = list(dict.fromkeys(saga_ids))
    if not wanted:
        raise CheckpointError("name at least one saga to bundle")
    located = []
    for saga_id in wanted:
        found = checkpoint.leaf(saga_id)
        if found is None:
            raise CheckpointError(
                f"saga {saga_id!r} is not covered by the checkpoint of {checkpoint.time:%Y-%m-%d %H:%M:%S} "
                "UTC: take a new checkpoint first"
            )
        located.append(found)
    entry_log = _log.entry_log(journal.store) if log is not None else None
    if log is not None and entry_log is not None:
        for old in since:
            if old.size > log.size or old.origin != log.origin:
                raise CheckpointError(
                    f"the log checkpoint of size {old.size} is not an older one of {log.origin}"
                )
    (target / "sagas").mkdir(parents=True, exist_ok=True)
    leaf_hashes = [leaf.leaf_hash() for leaf in checkpoint.leaves]
    sagas: list[dict[str, Any]] = []
    for number, (index, leaf) in enumerate(located, start=1):
        relative = f"sagas/{number:06d}.jsonl"
        _export_saga(journal, leaf, target / relative)
        saga: dict[str, Any] = {
            "sagaId": leaf.saga_id,
            "file": relative,
            "leafIndex": index,
            "count": leaf.count,
            "head": leaf.head,
            "inclusionProof": [_note.b64(h) for h in _merkle.inclusion_proof(leaf_hashes, index)],
        }
        if log is not None and entry_log is not None:
            saga["log"] = _log_proof(journal, entry_log, log, leaf.saga_id)
        sagas.append(saga)
        if progress is not None:
            progress(number, len(located), sum(s["count"] for s in sagas))
    (target / CHECKPOINT_FILE).write_text(checkpoint.note, encoding="utf-8", newline="\n")
    manifest: dict[str, Any] = {"format": BUNDLE_FORMAT, "checkpoint": CHECKPOINT_FILE, "sagas": sagas}
    if log is not None and entry_log is not None:
        (target / LOG_CHECKPOINT_FILE).write_text(log.note, encoding="utf-8", newline="\n")
        subtrees = _log.subtrees(entry_log, as_journal=False)
        if log_timestamp is not None:
            (target / LOG_TIMESTAMP_FILE).write_bytes(log_timestamp)
            manifest_timestamp = {"timestamp": LOG_TIMESTAMP_FILE}
        else:
            manifest_timestamp = {}
        manifest["log"] = {
            "checkpoint": LOG_CHECKPOINT_FILE,
            **manifest_timestamp,
            "since": [
                {
                    "size": old.size,
                    "root": old.root_base64,
                    "consistencyProof": [
                        _note.b64(h) for h in _merkle.consistency_path(old.size, log.size, subtrees)
                    ],
                }
                for old in since
            ],
        }
    (target / MANIFEST).write_text(
        json.dumps(manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8", newline="\n"
    )
    return target


def _log_proof(
    journal: Journal, entry_log: _log.EntryLog, log: LogCheckpoint, saga_id: str
) -> dict[str, Any]:
    """The saga's last entry inside the log checkpoint, and the proof that it is there."""
    leaf = entry_log.last_logged(saga_id, log.size)
    if leaf is None:
        raise CheckpointError(f"saga {saga_id!r} has no entry in the log checkpoint of size {log.size}")
    if not leaf.intact:
        raise JournalIntegrityError(f"saga {saga_id!r}: entry #{leaf.seq} is not as logged; not bundled")
    path = _merkle.inclusion_path(leaf.index, log.size, _log.subtrees(entry_log, as_journal=False))
    if not _merkle.verify_inclusion(leaf.leaf_hash(), leaf.index, log.size, path, log.root):
        raise JournalIntegrityError(f"saga {saga_id!r}: the log no longer folds to the log checkpoint's root")
    return {"seq": leaf.seq, "leafIndex": leaf.index, "inclusionProof": [_note.b64(h) for h in path]}


def _export_saga(journal: Journal, leaf: Leaf, path: Path) -> None:
    """Stream the saga to ``path`` as export lines, checking its chain and attested head on the way."""
    attested_hash: str | None = None
    with path.open("w", encoding="utf-8", newline="\n") as out:

        def written() -> Iterator[Entry]:
            nonlocal attested_hash
            for entry in journal.iter_entries(leaf.saga_id, DEFAULT_BATCH):
                if entry.seq == leaf.count:
                    attested_hash = entry.hash
                out.write(next(export_lines([entry])) + "\n")
                yield entry

        verification = verify(written())
    if not verification.valid:
        raise JournalIntegrityError(f"saga {leaf.saga_id!r}: {verification.message}; not bundled")
    if attested_hash != leaf.head:
        raise JournalIntegrityError(
            f"saga {leaf.saga_id!r}: entry #{leaf.count} is not the checkpoint's head; not bundled"
        )
