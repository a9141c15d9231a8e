"""The checkpoint's parts on their own: Merkle tree, keys, the signed note, the leaves file, sinks."""

from __future__ import annotations

import hashlib
import stat
import subprocess
from pathlib import Path

import pytest

from sagacity import Phase, Sagacity
from sagacity.checkpoints import (
    Checkpoint,
    DirectorySink,
    GitSink,
    SigningKey,
    VerifierKey,
    _merkle,
    create_checkpoint,
    load_signing_key,
    load_verifier_key,
    read_checkpoint,
    write_key_pair,
)
from sagacity.errors import CheckpointError, SignatureError

# RFC 6962 test vectors (certificate-transparency's merkle tree tests): the leaves' data, and the
# tree head after each of the first eight leaves.
CT_LEAVES = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
]
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


def _ct_leaf(data_hex: str) -> bytes:
    return hashlib.sha256(b"\x00" + bytes.fromhex(data_hex)).digest()


@pytest.fixture
def checkpoint(key: SigningKey) -> Checkpoint:
    """A checkpoint of a memory journal with three sagas, one with an id needing escapes."""
    with Sagacity("memory://") as sg:
        for saga_id in ("order 1/ü", "order-2", "z"):
            sg.journal.append(saga_id, "tool", Phase.INTENT, "{}")
        return create_checkpoint(sg, key, "test.example/journal")


def _publish(checkpoint: Checkpoint, directory: Path) -> Path:
    return Path(DirectorySink(directory).publish(checkpoint))


def test_merkle_root_matches_rfc6962_vectors() -> None:
    """The streaming root equals the certificate-transparency tree heads for sizes 0 to 8."""
    assert _merkle.root([]).hex() == hashlib.sha256(b"").hexdigest()
    leaves = [_ct_leaf(data) for data in CT_LEAVES]
    assert [_merkle.root(leaves[:n]).hex() for n in range(1, 9)] == CT_ROOTS


@pytest.mark.parametrize("size", range(1, 34))
def test_inclusion_proofs_verify_and_bind_position(size: int) -> None:
    """Every leaf's proof leads to the root; the same proof fails at another index or for another leaf."""
    leaves = [hashlib.sha256(str(i).encode()).digest() for i in range(size)]
    head = _merkle.root(leaves)
    for index in range(size):
        proof = _merkle.inclusion_proof(leaves, index)
        assert _merkle.verify_inclusion(leaves[index], index, size, proof, head)
        assert not _merkle.verify_inclusion(b"\x00" * 32, index, size, proof, head)
        if size > 1:
            assert not _merkle.verify_inclusion(leaves[index], (index + 1) % size, size, proof, head)


def test_key_pair_files(tmp_path: Path) -> None:
    """keys are written 0600 (private) beside a .pub, reload to the same key, and are never overwritten."""
    key_path, pub_path = write_key_pair(tmp_path / "keys" / "acme")
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert key_path.read_text().startswith("PRIVATE+KEY+acme+")
    key, verifier = load_signing_key(key_path), load_verifier_key(pub_path)
    assert key.verifier == verifier
    assert verifier.verify(b"m", key.sign(b"m"))
    assert "PRIVATE" not in repr(key)
    with pytest.raises(CheckpointError, match="refusing to overwrite"):
        write_key_pair(tmp_path / "keys" / "acme")
    with pytest.raises(SignatureError, match="private key"):
        load_verifier_key(key_path)


def test_verifier_key_id_binds_the_name(key: SigningKey) -> None:
    """A public key relabelled with another name no longer matches its key id."""
    name, id_hex, encoded = key.verifier.to_text().split("+", 2)
    assert VerifierKey.from_text(f"{name}+{id_hex}+{encoded}") == key.verifier
    with pytest.raises(CheckpointError, match="does not match"):
        VerifierKey.from_text(f"other+{id_hex}+{encoded}")


def test_note_round_trip(checkpoint: Checkpoint, key: SigningKey, tmp_path: Path) -> None:
    """A published checkpoint reads back equal, via its file, its directory, or the latest pointer."""
    note_path = _publish(checkpoint, tmp_path)
    assert checkpoint.note.splitlines()[:2] == ["test.example/journal", "3"]
    assert checkpoint.note.splitlines()[-1].startswith("\N{EM DASH} test-journal ")
    for path in (note_path, tmp_path, tmp_path / "latest"):
        assert read_checkpoint(path, key.verifier) == checkpoint
    assert note_path.with_suffix(".leaves").read_text().splitlines()[0].startswith("order%201%2F%C3%BC 1 ")


def test_signature_by_another_key_fails(
    checkpoint: Checkpoint, other_key: SigningKey, tmp_path: Path
) -> None:
    """A checkpoint checked with a different key (even of the same name) is refused."""
    note_path = _publish(checkpoint, tmp_path)
    with pytest.raises(SignatureError, match="not signed by test-journal"):
        read_checkpoint(note_path, other_key.verifier)


def test_altered_note_fails(checkpoint: Checkpoint, key: SigningKey, tmp_path: Path) -> None:
    """Changing the signed text (here the entry total) breaks the signature."""
    note_path = _publish(checkpoint, tmp_path)
    note_path.write_text(checkpoint.note.replace("entries 3", "entries 4"))
    with pytest.raises(SignatureError, match="does not verify"):
        read_checkpoint(note_path, key.verifier)


def test_altered_leaves_fail(checkpoint: Checkpoint, key: SigningKey, tmp_path: Path) -> None:
    """A leaves file that does not fold to the signed root is refused, whatever changed in it."""
    note_path = _publish(checkpoint, tmp_path)
    leaves = note_path.with_suffix(".leaves")
    lines = leaves.read_text().splitlines(keepends=True)
    for altered in (lines[1:], [lines[0].replace(" 1 ", " 2 "), *lines[1:]], [lines[1], lines[0], lines[2]]):
        leaves.chmod(0o644)
        leaves.write_text("".join(altered))
        with pytest.raises(CheckpointError):
            read_checkpoint(note_path, key.verifier)


def test_directory_sink_never_overwrites(checkpoint: Checkpoint, tmp_path: Path) -> None:
    """Publishing the same checkpoint twice fails and leaves the first one intact."""
    note_path = _publish(checkpoint, tmp_path)
    with pytest.raises(CheckpointError, match="never overwritten"):
        _publish(checkpoint, tmp_path)
    assert note_path.read_text() == checkpoint.note
    assert (tmp_path / "latest").read_text() == note_path.name + "\n"
    assert not list(tmp_path.glob(".tmp-*"))


def test_git_sink_commits_each_checkpoint(key: SigningKey, tmp_path: Path) -> None:
    """A git sink commits the note, its leaves and the latest pointer, one commit per checkpoint."""
    repo = tmp_path / "anchor"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    sink = GitSink(repo)
    with Sagacity("memory://") as sg:
        sg.journal.append("s", "tool", Phase.INTENT, "{}")
        first = create_checkpoint(sg, key, "test.example/journal")
        sink.publish(first)
        sg.journal.append("s", "tool", Phase.EXECUTED, "{}")
        second = create_checkpoint(sg, key, "test.example/journal", previous=sink.latest(key.verifier))
        sink.publish(second)
    log = subprocess.run(
        ["git", "log", "--format=%s", "--name-only"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert log.count("checkpoint test.example/journal: 1 sagas") == 2
    assert log.count(".leaves") == 2
    assert sink.latest(key.verifier) == second
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True
    )
    assert status.stdout == ""


def test_git_sink_needs_a_work_tree(tmp_path: Path) -> None:
    """A directory that is not a git work tree is refused up front."""
    with pytest.raises(CheckpointError, match="not a git work tree"):
        GitSink(tmp_path)
