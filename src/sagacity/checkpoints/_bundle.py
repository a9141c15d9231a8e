"""Evidence bundles: sagas as JSON Lines, the signed checkpoint, and the Merkle proofs linking them.

A bundle is a directory an auditor can check offline with the public key and nothing else
(``python -m sagacity.verify_bundle``)::

    bundle.json         manifest: format, and per saga its file, leaf index, attested count and
                        head, and the inclusion proof of that leaf under the signed root
    checkpoint.txt      the signed note, verbatim
    sagas/000001.jsonl  one saga's export (SPEC §7 lines), possibly longer than the checkpoint

The checkpoint's leaves file is deliberately not included: the proofs show each bundled saga's
leaf is in the signed tree without revealing any other saga's id.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sagacity import chain
from sagacity._export import export_lines
from sagacity._journal import Journal
from sagacity.checkpoints import _merkle
from sagacity.checkpoints._format import Checkpoint, Leaf
from sagacity.checkpoints._scan import DEFAULT_BATCH, Source, journal_of
from sagacity.errors import CheckpointError, JournalIntegrityError
from sagacity.model import Entry

BUNDLE_FORMAT = "sagacity-bundle/v1"
MANIFEST = "bundle.json"
CHECKPOINT_FILE = "checkpoint.txt"


def write_bundle(
    source: Source, saga_ids: Iterable[str], checkpoint: Checkpoint, directory: str | os.PathLike[str]
) -> Path:
    """Write the sagas, ``checkpoint`` and inclusion proofs to ``directory`` (new or empty).

    Each saga must be covered by the checkpoint, and its chain must be intact and still hold the
    attested head at the attested count: a bundle that would fail verification is not written.
    Entries appended after the checkpoint are exported too; they verify as a chain, but only the
    first ``count`` are attested.
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
    (target / "sagas").mkdir(parents=True, exist_ok=True)
    leaf_hashes = [leaf.leaf_hash() for leaf in checkpoint.leaves]
    sagas: list[dict[str, Any]] = []
    for number, (index, leaf) in enumerate(located, start=1):
        relative = f"sagas/{number:06d}.jsonl"
        _export_saga(journal, leaf, target / relative)
        sagas.append(
            {
                "sagaId": leaf.saga_id,
                "file": relative,
                "leafIndex": index,
                "count": leaf.count,
                "head": leaf.head,
                "inclusionProof": [
                    base64.b64encode(h).decode("ascii") for h in _merkle.inclusion_proof(leaf_hashes, index)
                ],
            }
        )
    (target / CHECKPOINT_FILE).write_text(checkpoint.note, encoding="utf-8", newline="\n")
    manifest = {"format": BUNDLE_FORMAT, "checkpoint": CHECKPOINT_FILE, "sagas": sagas}
    (target / MANIFEST).write_text(
        json.dumps(manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8", newline="\n"
    )
    return target


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

        verification = chain.verify(written())
    if not verification.valid:
        raise JournalIntegrityError(f"saga {leaf.saga_id!r}: {verification.message}; not bundled")
    if attested_hash != leaf.head:
        raise JournalIntegrityError(
            f"saga {leaf.saga_id!r}: entry #{leaf.count} is not the checkpoint's head; not bundled"
        )
