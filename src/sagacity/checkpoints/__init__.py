"""Signed checkpoints: evidence that holds when someone controls the database.

A hash chain catches an edit in the middle of a saga, not the deletion of its last entries, of a
whole saga, or a chain recomputed from scratch with the public algorithm. A checkpoint closes
those gaps: it signs (Ed25519) every saga's entry count and head hash, folded into a Merkle root,
and is kept outside the database (a :class:`Sink`). Verifying the journal against it names every
saga broken, shortened, missing, rewritten or backdated since. Formats: ``docs/checkpoints.md``;
what this does and does not defend against: ``docs/threat-model.md``.

::

    key = SigningKey.generate("acme-journal")
    cp = create_checkpoint(sg, key, "acme.example/journal")
    DirectorySink("/mnt/worm/checkpoints").publish(cp)
    report = verify_against_checkpoint(sg, read_checkpoint(path, key.verifier))
    write_bundle(sg, ["order-123"], cp, "evidence/order-123")
"""

from __future__ import annotations

from sagacity.checkpoints._bundle import BUNDLE_FORMAT, write_bundle
from sagacity.checkpoints._format import Checkpoint, Leaf, read_checkpoint, resolve_note_path
from sagacity.checkpoints._keys import (
    SigningKey,
    VerifierKey,
    load_signing_key,
    load_verifier_key,
    load_witness_key,
    write_key_pair,
)
from sagacity.checkpoints._scan import (
    DEFAULT_MAX_SKEW,
    CheckpointFinding,
    CheckpointFindingKind,
    CheckpointReport,
    create_checkpoint,
    verify_against_checkpoint,
)
from sagacity.checkpoints._sinks import DirectorySink, GitSink, Sink
from sagacity.checkpoints._timestamp import request_timestamp
from sagacity.checkpoints._tlog import (
    LogCheckpoint,
    check_witnesses,
    checkpoint_log,
    journal_entries,
    last_cosigned,
    log_consistency_proof,
    log_inclusion_proof,
    log_origin,
    open_log_checkpoint,
    read_log_checkpoint,
    verify_log,
    verify_log_timestamps,
)
from sagacity.checkpoints._witness import (
    Witness,
    WitnessRefused,
    WitnessState,
    cosign_with_quorum,
    make_server,
)
from sagacity.model import Progress

#: The old names, kept as aliases: ``sagacity.Finding`` and ``sagacity.FindingKind`` are the
#: doctor's, so the checkpoint's have names of their own.
Finding = CheckpointFinding
FindingKind = CheckpointFindingKind

__all__ = [
    "BUNDLE_FORMAT",
    "DEFAULT_MAX_SKEW",
    "Checkpoint",
    "CheckpointFinding",
    "CheckpointFindingKind",
    "CheckpointReport",
    "DirectorySink",
    "Finding",
    "FindingKind",
    "GitSink",
    "Leaf",
    "LogCheckpoint",
    "Progress",
    "SigningKey",
    "Sink",
    "VerifierKey",
    "Witness",
    "WitnessRefused",
    "WitnessState",
    "check_witnesses",
    "checkpoint_log",
    "cosign_with_quorum",
    "create_checkpoint",
    "journal_entries",
    "last_cosigned",
    "load_signing_key",
    "load_verifier_key",
    "load_witness_key",
    "log_consistency_proof",
    "log_inclusion_proof",
    "log_origin",
    "make_server",
    "open_log_checkpoint",
    "read_checkpoint",
    "read_log_checkpoint",
    "request_timestamp",
    "resolve_note_path",
    "verify_against_checkpoint",
    "verify_log",
    "verify_log_timestamps",
    "write_bundle",
    "write_key_pair",
]
