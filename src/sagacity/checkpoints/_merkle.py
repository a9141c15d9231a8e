"""The RFC 6962 / RFC 9162 Merkle tree over saga leaves: root, inclusion proof, proof check.

Why a Merkle tree rather than one hash over the sorted list: a bundle can then prove one saga's
(count, head) with log2(n) sibling hashes, without handing the auditor every other saga's id
(saga ids are often customer or order numbers). The domain-separation bytes (0x00 for leaves,
0x01 for nodes) make a leaf impossible to pass off as an inner node.

::

    leaf = SHA-256(0x00 || F(saga_id) F(str(count)) F(head))      F as in the chain (SPEC §3)
    node = SHA-256(0x01 || left || right)
    root of n leaves: split at k, the largest power of two below n (RFC 6962 §2.1);
    root of no leaves: SHA-256("")
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from sagacity.chain import frame


def leaf_hash(saga_id: str, count: int, head: str) -> bytes:
    """The leaf committing to one saga's entry count and head hash."""
    return hashlib.sha256(b"\x00" + frame(saga_id) + frame(str(count)) + frame(head)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root(leaves: Iterable[bytes]) -> bytes:
    """The tree head of the leaf hashes, in one pass with O(log n) memory.

    Keeps the roots of the complete subtrees seen so far (sizes strictly decreasing powers of
    two); folding them right to left at the end gives exactly RFC 6962's split at the largest
    power of two.
    """
    stack: list[tuple[int, bytes]] = []
    for leaf in leaves:
        size, digest = 1, leaf
        while stack and stack[-1][0] == size:
            left_size, left = stack.pop()
            size, digest = left_size + size, node_hash(left, digest)
        stack.append((size, digest))
    if not stack:
        return hashlib.sha256(b"").digest()
    digest = stack[-1][1]
    for _, left in reversed(stack[:-1]):
        digest = node_hash(left, digest)
    return digest


def _split(n: int) -> int:
    """The largest power of two strictly below ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def _subtree_root(leaves: Sequence[bytes], start: int, end: int) -> bytes:
    if end - start == 1:
        return leaves[start]
    k = _split(end - start)
    return node_hash(_subtree_root(leaves, start, start + k), _subtree_root(leaves, start + k, end))


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """RFC 6962 PATH(index): the sibling hashes from the leaf up to the root."""
    if not 0 <= index < len(leaves):
        raise IndexError(f"leaf {index} is outside a tree of {len(leaves)}")
    path: list[bytes] = []
    start, end = 0, len(leaves)
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            path.append(_subtree_root(leaves, start + k, end))
            end = start + k
        else:
            path.append(_subtree_root(leaves, start, start + k))
            start += k
    path.reverse()  # leaf to root, as RFC 9162 verifies it
    return path


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes], expected: bytes) -> bool:
    """RFC 9162 §2.1.3.2: does ``proof`` lead from ``leaf`` at ``index`` to ``expected``?"""
    if not 0 <= index < size:
        return False
    fn, sn, digest = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            digest = node_hash(sibling, digest)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            digest = node_hash(digest, sibling)
        fn >>= 1
        sn >>= 1
    return sn == 0 and digest == expected
