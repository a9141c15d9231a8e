"""The append-only log, its C2SP checkpoints, and witnesses: what a stolen key can no longer do."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagacity import Phase, Sagacity
from sagacity.checkpoints import (
    DirectorySink,
    FindingKind,
    LogCheckpoint,
    SigningKey,
    Witness,
    WitnessRefused,
    WitnessState,
    _merkle,
    _note,
    checkpoint_log,
    cosign_with_quorum,
    log_consistency_proof,
    log_inclusion_proof,
    log_origin,
    make_server,
    open_log_checkpoint,
    verify_log,
)
from sagacity.checkpoints._log import entry_log
from sagacity.errors import JournalIntegrityError, SignatureError

from .conftest import ALL_SQL_STORES, RawSQL, rewrite_saga_b

ORIGIN = "test.example/journal"


@pytest.fixture(params=ALL_SQL_STORES)
def journal_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture(scope="session")
def witness_keys() -> list[SigningKey]:
    return [SigningKey.generate(f"witness-{i}.example", witness=True) for i in range(3)]


def _witness(key: SigningKey, log_key: SigningKey, tmp_path: Path, name: str) -> WitnessState:
    return WitnessState(key, {log_origin(ORIGIN): [log_key.verifier]}, tmp_path / name)


def _submit(state: WitnessState, checkpoint: LogCheckpoint, old: int, proof: list[bytes]) -> tuple[int, str]:
    body = f"old {old}\n" + "".join(_note.b64(h) + "\n" for h in proof) + "\n" + checkpoint.note
    answer = state.add_checkpoint(body.encode())
    return answer.status, answer.body


def _grow(sg: Sagacity, sagas: tuple[str, ...] = ("b", "d")) -> None:
    for saga_id in sagas:
        sg.journal.append(saga_id, "tool", Phase.EXECUTED, '{"late":1}', "later")


def test_the_log_only_grows_and_each_head_extends_the_last(sg: Sagacity, key: SigningKey) -> None:
    first = checkpoint_log(sg, key, ORIGIN)
    assert first.size == 15
    log = entry_log(sg.journal.store)
    before = list(log.leaves(0, first.size))
    _grow(sg)
    second = checkpoint_log(sg, key, ORIGIN, previous=first)
    assert second.size == 17
    assert list(log.leaves(0, first.size)) == before  # indexes, once given, never move
    proof = log_consistency_proof(sg, first.size, second.size)
    assert _merkle.verify_consistency(first.size, second.size, first.root, second.root, proof)
    assert verify_log(sg, [first, second]) == []
    for leaf in log.leaves(0, second.size):
        path = log_inclusion_proof(sg, leaf.index, second.size)
        assert _merkle.verify_inclusion(leaf.leaf_hash(), leaf.index, second.size, path, second.root)


def test_log_checkpoints_are_standard_tlog_checkpoints(sg: Sagacity, key: SigningKey) -> None:
    """Origin, size, base64 root, a blank line, one Ed25519 note signature; nothing else."""
    cp = checkpoint_log(sg, key, ORIGIN)
    lines = cp.note.split("\n")
    assert lines[:3] == [f"{ORIGIN}/log", "15", cp.root_base64]
    assert lines[3] == ""
    assert lines[4].startswith(f"\N{EM DASH} {key.name} ")
    assert lines[5:] == [""]
    assert open_log_checkpoint(cp.note, key.verifier) == cp
    with pytest.raises(SignatureError):
        open_log_checkpoint(cp.note.replace("\n15\n", "\n16\n"), key.verifier)


def test_log_refuses_to_sign_over_a_changed_entry(sg: Sagacity, key: SigningKey, raw_sql: RawSQL) -> None:
    checkpoint_log(sg, key, ORIGIN)
    raw_sql("UPDATE side_effect_journal SET payload = %s WHERE saga_id = %s AND seq = %s", ("x", "c", 2))
    raw_sql("UPDATE side_effect_journal SET hash = %s WHERE saga_id = %s AND seq = %s", ("0" * 64, "c", 2))
    with pytest.raises(JournalIntegrityError, match=r"entry #2 of saga 'c'"):
        checkpoint_log(sg, key, ORIGIN)


def test_stolen_key_rewrite_is_refused_by_the_witness_and_found_by_the_verifier(
    sg: Sagacity,
    key: SigningKey,
    witness_keys: list[SigningKey],
    journal_url: str,
    raw_sql: RawSQL,
    tmp_path: Path,
) -> None:
    """The operator recomputes saga b's chain, rebuilds the log table and signs with the log's key."""
    witness = _witness(witness_keys[0], key, tmp_path, "w")
    cosigned = checkpoint_log(sg, key, ORIGIN)
    status, line = _submit(witness, cosigned, 0, [])
    assert status == 200
    cosigned = cosigned.with_signatures([_note.parse_signature_line(line)])
    assert cosigned.check_quorum([witness_keys[0].verifier], 1)

    rewrite_saga_b(sg, raw_sql, journal_url)
    _grow(sg)
    forged = checkpoint_log(sg, key, ORIGIN)  # the stolen key signs the rewritten history
    assert forged.size == 17

    proof = log_consistency_proof(sg, cosigned.size, forged.size)
    status, why = _submit(witness, forged, cosigned.size, proof)
    assert status == 422
    assert "does not extend the one cosigned at size 15" in why
    assert witness.latest(log_origin(ORIGIN)) == dataclasses.replace(cosigned, note=witness_note(witness))

    findings = verify_log(sg, [cosigned])
    assert [(f.kind, f.attested) for f in findings] == [(FindingKind.LOG_MISMATCH, 15)]
    assert not _merkle.verify_consistency(cosigned.size, forged.size, cosigned.root, forged.root, proof)


def test_a_log_rebuilt_to_the_same_size_is_a_fork_and_a_mismatch_naming_the_root(
    sg: Sagacity, key: SigningKey, journal_url: str, raw_sql: RawSQL
) -> None:
    """The operator rewrites saga b (same entry count), rebuilds the log and signs: the forged
    checkpoint has the kept one's size. Both sides of the fork are folded, whichever is read first,
    so the verifier says which root the journal no longer matches and which it does."""
    kept = checkpoint_log(sg, key, ORIGIN)
    rewrite_saga_b(sg, raw_sql, journal_url)
    forged = checkpoint_log(sg, key, ORIGIN)
    assert (forged.size, forged.root != kept.root) == (kept.size, True)
    for order in ([forged, kept], [kept, forged]):
        findings = verify_log(sg, order)
        assert sorted(f.kind for f in findings) == [FindingKind.FORKED, FindingKind.LOG_MISMATCH]
        mismatch = next(f for f in findings if f.kind == FindingKind.LOG_MISMATCH)
        assert f"size 15 (root {kept.root_base64})" in mismatch.detail
        assert f"it folds to the other checkpoint of that size, root {forged.root_base64}" in mismatch.detail


def witness_note(witness: WitnessState) -> str:
    kept = witness.latest(log_origin(ORIGIN))
    assert kept is not None
    return kept.note


def test_a_consistency_proof_tampered_in_any_byte_is_refused(
    sg: Sagacity, key: SigningKey, witness_keys: list[SigningKey], tmp_path: Path
) -> None:
    witness = _witness(witness_keys[0], key, tmp_path, "w")
    first = checkpoint_log(sg, key, ORIGIN)
    assert _submit(witness, first, 0, [])[0] == 200
    _grow(sg, ("b", "d", "e"))
    second = checkpoint_log(sg, key, ORIGIN, previous=first)
    proof = log_consistency_proof(sg, first.size, second.size)
    for i, node in enumerate(proof):
        for j in range(32):
            for bit in (0x01, 0x80):
                changed = bytearray(node)
                changed[j] ^= bit
                tampered = [*proof[:i], bytes(changed), *proof[i + 1 :]]
                assert _submit(witness, second, first.size, tampered)[0] == 422
    assert _submit(witness, second, first.size, proof[:-1])[0] == 422
    assert _submit(witness, second, first.size, proof)[0] == 200


def test_a_fork_is_refused_and_detected(
    sg: Sagacity, key: SigningKey, witness_keys: list[SigningKey], tmp_path: Path
) -> None:
    """Two different checkpoints of one size: the witness refuses the second, a verifier names it."""
    witness = _witness(witness_keys[0], key, tmp_path, "w")
    honest = checkpoint_log(sg, key, ORIGIN)
    assert _submit(witness, honest, 0, [])[0] == 200
    fork = LogCheckpoint(honest.origin, honest.size, b"\x05" * 32, "")
    fork = dataclasses.replace(fork, note=_sign_raw(fork, key))
    status, why = _submit(witness, fork, honest.size, [])
    assert status == 422
    assert "a fork" in why
    assert next(f.kind for f in verify_log(sg, [honest, fork])) == FindingKind.FORKED


def _sign_raw(cp: LogCheckpoint, key: SigningKey) -> str:
    text = f"{cp.origin}\n{cp.size}\n{cp.root_base64}\n"
    return _note.join_note(text, [_note.sign_text(text, key)])


def test_witness_answers_per_the_protocol(
    sg: Sagacity, key: SigningKey, other_key: SigningKey, witness_keys: list[SigningKey], tmp_path: Path
) -> None:
    witness = _witness(witness_keys[0], key, tmp_path, "w")
    cp = checkpoint_log(sg, key, ORIGIN)
    assert witness.add_checkpoint(b"old 1\n").status == 400
    assert _submit(witness, cp, cp.size + 1, [])[0] == 400
    impostor = checkpoint_log(sg, other_key, ORIGIN)
    assert _submit(witness, impostor, 0, [])[0] == 403
    stranger = WitnessState(witness_keys[0], {"elsewhere/log": [key.verifier]}, tmp_path / "s")
    assert _submit(stranger, cp, 0, [])[0] == 404
    assert _submit(witness, cp, 0, [b"\x00" * 32])[0] == 422
    assert _submit(witness, cp, 0, [])[0] == 200
    answer = witness.add_checkpoint(f"old 0\n\n{cp.note}".encode())
    assert (answer.status, answer.body, answer.content_type) == (409, "15\n", "text/x.tlog.size")
    cosignatures = [_note.parse_signature_line(_submit(witness, cp, cp.size, [])[1]) for _ in range(2)]
    assert cp.with_signatures(cosignatures).cosigners([witness_keys[0].verifier]).keys() == {
        witness_keys[0].name
    }


@pytest.fixture
def witnesses(
    key: SigningKey, witness_keys: list[SigningKey], tmp_path: Path
) -> Iterator[list[tuple[Witness, WitnessState]]]:
    """Three witnesses serving tlog-witness over HTTP on loopback."""
    running = []
    for i, wkey in enumerate(witness_keys):
        state = _witness(wkey, key, tmp_path, f"w{i}")
        server = make_server(state, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}"
        running.append((server, Witness(url, wkey.verifier), state))
    yield [(w, s) for _, w, s in running]
    for server, _, _ in running:
        server.shutdown()
        server.server_close()


def test_quorum_of_cosignatures_over_http(
    sg: Sagacity, key: SigningKey, witnesses: list[tuple[Witness, WitnessState]], tmp_path: Path
) -> None:
    ws = [w for w, _ in witnesses]
    keys = [w.key for w in ws]

    def proof(old: int, new: int) -> list[bytes]:
        return log_consistency_proof(sg, old, new)

    first = checkpoint_log(sg, key, ORIGIN)
    cosigned, refusals = cosign_with_quorum(first, ws, 3, 0, lambda old: proof(old, first.size))
    assert refusals == []
    assert set(cosigned.check_quorum(keys, 3)) == {k.name for k in keys}

    # Witness 2 is shown a fork of the next size first: it refuses it and keeps the honest head.
    _grow(sg)
    second = checkpoint_log(sg, key, ORIGIN, previous=first)
    fork = dataclasses.replace(second, root=b"\x09" * 32)
    fork = dataclasses.replace(fork, note=_sign_raw(fork, key))
    assert _submit(witnesses[2][1], fork, first.size, proof(first.size, second.size))[0] == 422
    # The client's stale "old 0" is answered 409 with 15 by each, and retried from there.
    done, refusals = cosign_with_quorum(second, ws, 3, 0, lambda old: proof(old, second.size))
    assert refusals == []
    assert set(done.check_quorum(keys, 3)) == {k.name for k in keys}

    _grow(sg, ("f",))
    third = checkpoint_log(sg, key, ORIGIN, previous=second)
    witnesses[2][1].logs.clear()  # witness 2 no longer knows the log: 404
    with pytest.raises(
        WitnessRefused, match=r"2 of 3 witnesses cosigned, the quorum is 3: witness witness-2"
    ):
        cosign_with_quorum(third, ws, 3, second.size, lambda old: proof(old, third.size))
    partial, refusals = cosign_with_quorum(third, ws, 2, second.size, lambda old: proof(old, third.size))
    assert len(refusals) == 1
    with pytest.raises(Exception, match="quorum is 3 of 3"):
        partial.check_quorum(keys, 3)


def test_quorum_counts_only_valid_cosignatures_of_known_witnesses(
    sg: Sagacity, key: SigningKey, witness_keys: list[SigningKey], tmp_path: Path
) -> None:
    cp = checkpoint_log(sg, key, ORIGIN)
    good = _note.cosign(cp.text, witness_keys[0], 1_800_000_000)
    forged = dataclasses.replace(
        _note.cosign(cp.text, witness_keys[1], 1_800_000_000), signature=b"\x00" * 72
    )
    stranger = _note.cosign(cp.text, SigningKey.generate("stranger", witness=True), 1_800_000_000)
    signed = cp.with_signatures([good, good, forged, stranger])
    keys = [k.verifier for k in witness_keys]
    assert signed.cosigners(keys) == {witness_keys[0].name: 1_800_000_000}
    signed.check_quorum(keys, 1)
    with pytest.raises(Exception, match="1 valid cosignature"):
        signed.check_quorum(keys, 2)
    # the log's own key is no witness key: its signature never counts as a cosignature
    assert cp.cosigners([key.verifier]) == {}


def test_log_checkpoints_are_published_beside_the_saga_checkpoints(
    sg: Sagacity, key: SigningKey, tmp_path: Path
) -> None:
    sink = DirectorySink(tmp_path / "anchor")
    assert sink.latest_log(key.verifier) is None
    first = checkpoint_log(sg, key, ORIGIN)
    sink.publish_log(first)
    _grow(sg)
    second = checkpoint_log(sg, key, ORIGIN, previous=sink.latest_log(key.verifier))
    sink.publish_log(second)
    assert sink.latest_log(key.verifier) == second
    assert sink.log_checkpoints(key.verifier) == [first, second]


def test_a_run_after_a_published_checkpoint_reads_only_the_new_entries(
    sg: Sagacity, key: SigningKey, tmp_path: Path, raw_sql: RawSQL, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the previous checkpoint's frontier (kept beside it in the anchor), a run hashes only
    the entries logged since: the same tree head as a full recomputation, proofs from it verify,
    and a lost or altered frontier file only costs a full run. Entries logged earlier are left to
    the verifier, which recomputes every one from the journal."""
    sink = DirectorySink(tmp_path / "anchor")
    first = checkpoint_log(sg, key, ORIGIN)
    assert first.checked_frontier() is not None
    sink.publish_log(first)
    stored = sink.latest_log(key.verifier)
    assert stored is not None
    assert stored.checked_frontier() == first.frontier
    _grow(sg)
    read: list[tuple[int, int]] = []
    log_type = type(entry_log(sg.journal.store))
    leaves = log_type.leaves
    monkeypatch.setattr(
        log_type, "leaves", lambda self, start, end: (read.append((start, end)), leaves(self, start, end))[1]
    )
    second = checkpoint_log(sg, key, ORIGIN, previous=stored)
    proof = log_consistency_proof(sg, first.size, second.size, known=stored)
    assert read[0] == (15, 17)  # the run: the two new entries
    assert all(start >= 15 for start, _ in read)  # the proof: subtrees of the new ones only
    monkeypatch.setattr(log_type, "leaves", leaves)
    full = checkpoint_log(sg, key, ORIGIN)  # no previous: every entry, the root from all of them
    assert (second.size, second.root) == (full.size, full.root) == (17, full.root)
    assert _merkle.verify_consistency(first.size, second.size, first.root, second.root, proof)
    assert proof == log_consistency_proof(sg, first.size, second.size)
    sink.publish_log(second)

    frontier_file = next((tmp_path / "anchor").glob(f"log-checkpoint-{second.size:012d}-*.frontier"))
    frontier_file.write_text(frontier_file.read_text()[::-1])  # altered: folds to nothing signed
    altered = sink.latest_log(key.verifier)
    assert altered is not None
    assert altered.checked_frontier() is None
    _grow(sg, ("e",))
    third = checkpoint_log(sg, key, ORIGIN, previous=altered)  # falls back to the full run
    assert third.root == checkpoint_log(sg, key, ORIGIN).root

    raw_sql("UPDATE side_effect_journal SET hash = %s WHERE saga_id = %s AND seq = %s", ("0" * 64, "c", 2))
    fourth = checkpoint_log(sg, key, ORIGIN, previous=third)  # only the new entries are its to check
    assert fourth.size == third.size
    assert [f.kind for f in verify_log(sg, [first, third])] == [FindingKind.LOG_MISMATCH] * 2
    with pytest.raises(JournalIntegrityError, match=r"entry #2 of saga 'c'"):
        checkpoint_log(sg, key, ORIGIN)
