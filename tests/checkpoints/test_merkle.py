"""RFC 9162 proofs: published vectors, an independent implementation, and every tampered byte."""

from __future__ import annotations

import hashlib

import pytest
from pymerkle import InmemoryTree

from sagacity.checkpoints import _merkle

# The certificate-transparency reference tree of eight leaves (RFC 6962 test data, as
# certificate-transparency and transparency-dev/merkle publish it): the leaves' data ...
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
# ... and the published proofs over it (transparency-dev/merkle testdata/*/happy-path.json).
INCLUSION_VECTORS = [  # (index, size, proof)
    (0, 1, []),
    (
        0,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        5,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        1,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]
CONSISTENCY_VECTORS = [  # (old size, new size, proof)
    (1, 1, []),
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
    (
        6,
        7,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
]

CT_HASHES = [hashlib.sha256(b"\x00" + bytes.fromhex(data)).digest() for data in CT_LEAVES]


def _hashes(size: int) -> list[bytes]:
    return [hashlib.sha256(b"\x00" + str(i).encode()).digest() for i in range(size)]


def _flips(proof: list[bytes]) -> list[list[bytes]]:
    """Every proof that differs from ``proof`` in one bit of one byte (the low bit each time)."""
    tampered = []
    for i, node in enumerate(proof):
        for j in range(len(node)):
            changed = bytearray(node)
            changed[j] ^= 1
            tampered.append([*proof[:i], bytes(changed), *proof[i + 1 :]])
    return tampered


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION_VECTORS)
def test_inclusion_proofs_equal_the_published_vectors(index: int, size: int, proof: list[str]) -> None:
    leaves = CT_HASHES[:size]
    assert [h.hex() for h in _merkle.inclusion_proof(leaves, index)] == proof
    expected = _merkle.root(leaves)
    assert _merkle.verify_inclusion(leaves[index], index, size, [bytes.fromhex(h) for h in proof], expected)


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY_VECTORS)
def test_consistency_proofs_equal_the_published_vectors(old: int, new: int, proof: list[str]) -> None:
    assert [h.hex() for h in _merkle.consistency_proof(CT_HASHES[:new], old)] == proof
    old_root, new_root = _merkle.root(CT_HASHES[:old]), _merkle.root(CT_HASHES[:new])
    hashes = [bytes.fromhex(h) for h in proof]
    assert _merkle.verify_consistency(old, new, old_root, new_root, hashes)
    for tampered in _flips(hashes):
        assert not _merkle.verify_consistency(old, new, old_root, new_root, tampered)


def test_roots_equal_an_independent_implementation() -> None:
    """pymerkle (RFC 9162 mode) builds the same tree heads from the same entries, sizes 1 to 70."""
    tree = InmemoryTree(algorithm="sha256")
    leaves: list[bytes] = []
    for i in range(70):
        data = f"entry {i}".encode()
        tree.append_entry(data)
        leaves.append(hashlib.sha256(b"\x00" + data).digest())
        assert tree.get_leaf(i + 1) == leaves[-1]
        assert tree.get_root(i + 1) == _merkle.root(leaves)


@pytest.mark.parametrize("new", range(1, 40))
def test_every_consistency_proof_verifies_and_binds_both_trees(new: int) -> None:
    leaves = _hashes(new)
    new_root = _merkle.root(leaves)
    for old in range(new + 1):
        old_root = _merkle.root(leaves[:old])
        proof = _merkle.consistency_proof(leaves, old)
        assert _merkle.verify_consistency(old, new, old_root, new_root, proof)
        if 0 < old < new:
            other = b"\x07" * 32
            assert not _merkle.verify_consistency(old, new, other, new_root, proof)
            assert not _merkle.verify_consistency(old, new, old_root, other, proof)
            assert not _merkle.verify_consistency(old, new, old_root, new_root, proof[:-1])
            assert not _merkle.verify_consistency(old, new, old_root, new_root, [*proof, other])


def test_a_fork_has_no_consistency_proof() -> None:
    """Two trees of 6 leaves that differ in leaf 2: no proof made for one verifies for the other."""
    honest = _hashes(9)
    forked = [*honest[:2], b"\x01" * 32, *honest[3:]]
    old_root = _merkle.root(honest[:6])
    assert _merkle.root(forked[:6]) != old_root
    for new in range(6, 10):
        assert not _merkle.verify_consistency(
            6, new, old_root, _merkle.root(forked[:new]), _merkle.consistency_proof(forked[:new], 6)
        )


def test_consistency_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="no consistency proof"):
        _merkle.consistency_path(5, 3, _merkle.sequence_subtrees(_hashes(5)))
    root = _merkle.root(_hashes(4))
    assert not _merkle.verify_consistency(5, 4, root, root, [])
    assert not _merkle.verify_consistency(0, 4, _merkle.root([]), root, [root])
    assert _merkle.verify_consistency(0, 4, _merkle.root([]), root, [])


def test_a_frontier_extended_leaf_by_leaf_is_the_tree_and_proves_consistency() -> None:
    """The compact range of n leaves, extended with more, equals the one of all of them, folds to
    the same root, and yields the same consistency proofs as the leaves themselves."""
    leaves = [hashlib.sha256(i.to_bytes(2, "big")).digest() for i in range(70)]
    for old in range(0, 70, 3):
        frontier = _merkle.extend_frontier((), leaves[:old])
        assert len(frontier) == old.bit_count()
        assert _merkle.frontier_root(frontier) == _merkle.root(leaves[:old])
        for new in range(old, 70, 5):
            grown = _merkle.extend_frontier(frontier, leaves[old:new], old)
            assert grown == _merkle.extend_frontier((), leaves[:new])
            if old:
                rows = _merkle.sequence_subtrees(leaves[:new])
                proof = _merkle.consistency_path(old, new, _merkle.frontier_subtree(old, frontier, rows))
                assert proof == _merkle.consistency_proof(leaves[:new], old)
