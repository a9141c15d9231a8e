"""The RFC 6962 / RFC 9162 Merkle tree: root, inclusion and consistency proofs, and their checks.

Two trees use it: the saga checkpoint's tree over sagas sorted by id, and the journal's
append-only log (``_log``), whose leaves are entries in the order the checkpointer logged them.
Both leaves are the same statement, "saga S had N entries ending in hash H" (for a log entry, N
is its seq and H its hash: the chain binds every earlier entry). The domain-separation bytes
(0x00 for leaves, 0x01 for nodes) make a leaf impossible to pass off as an inner node.

::

    leaf = SHA-256(0x00 || F(saga_id) F(str(count)) F(head))      F as in the chain (SPEC §3)
    node = SHA-256(0x01 || left || right)
    root of n leaves: split at k, the largest power of two below n (RFC 6962 §2.1);
    root of no leaves: SHA-256("")

Proof builders take a :data:`Subtree` (the root of leaves ``[start, end)``) rather than a list,
so a log that lives in a database hands over ranges it streams, never every leaf at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

from sagacity.chain import frame


def leaf_hash(saga_id: str, count: int, head: str) -> bytes:
    """The leaf committing to one saga's entry count and head hash."""
    return hashlib.sha256(b"\x00" + frame(saga_id) + frame(str(count)) + frame(head)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root(leaves: Iterable[bytes]) -> bytes:
    """The tree head of the leaf hashes, in one pass with O(log n) memory."""
    return frontier_root(extend_frontier((), leaves))


#: The compact range of a tree of n leaves: the roots of its complete subtrees, left to right
#: (their sizes are n's binary digits, largest first). O(log n) hashes hold everything needed to
#: add leaves, get the root, and prove consistency from n to any larger tree.
Frontier = tuple[bytes, ...]


def extend_frontier(frontier: Frontier, leaves: Iterable[bytes], size: int | None = None) -> Frontier:
    """The frontier after appending ``leaves`` to the tree whose frontier is ``frontier``.

    ``size`` is that tree's leaf count (needed unless ``frontier`` is empty). Keeps the roots of
    the complete subtrees seen so far (sizes strictly decreasing powers of two); a new leaf
    merges with its equal-sized neighbours, as RFC 6962's split at the largest power of two does.
    """
    stack = list(zip(frontier_sizes(size or 0), frontier, strict=True)) if frontier else []
    for leaf in leaves:
        width, digest = 1, leaf
        while stack and stack[-1][0] == width:
            left_width, left = stack.pop()
            width, digest = left_width + width, node_hash(left, digest)
        stack.append((width, digest))
    return tuple(digest for _, digest in stack)


def frontier_sizes(size: int) -> list[int]:
    """The leaf counts of the complete subtrees of a tree of ``size`` leaves, largest first."""
    return [1 << bit for bit in range(size.bit_length() - 1, -1, -1) if size >> bit & 1]


def frontier_root(frontier: Frontier) -> bytes:
    """The tree head of a frontier: its subtrees folded right to left."""
    if not frontier:
        return hashlib.sha256(b"").digest()
    digest = frontier[-1]
    for left in reversed(frontier[:-1]):
        digest = node_hash(left, digest)
    return digest


def frontier_subtree(size: int, frontier: Frontier, after: Subtree) -> Subtree:
    """A :data:`Subtree` for a tree that extends the one of ``size`` leaves with ``frontier``: a
    complete subtree of that tree is read from the frontier, any range at or past ``size`` from
    ``after``. Every range :func:`consistency_path` asks for proving ``size`` to a larger tree is
    one of these, so that proof costs O(new leaves + log n)."""
    starts: dict[tuple[int, int], bytes] = {}
    offset = 0
    for width, digest in zip(frontier_sizes(size), frontier, strict=True):
        starts[(offset, offset + width)] = digest
        offset += width

    def subtree(start: int, end: int) -> bytes:
        if (start, end) in starts:
            return starts[(start, end)]
        if start >= size:
            return after(start, end)
        raise ValueError(f"the range [{start}, {end}) is neither past {size} nor a subtree of its frontier")

    return subtree


def _split(n: int) -> int:
    """The largest power of two strictly below ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def _subtree_root(leaves: Sequence[bytes], start: int, end: int) -> bytes:
    if end - start == 1:
        return leaves[start]
    k = _split(end - start)
    return node_hash(_subtree_root(leaves, start, start + k), _subtree_root(leaves, start + k, end))


#: The root of the leaves ``[start, end)`` of one tree (``end > start``).
Subtree = Callable[[int, int], bytes]

#: RFC 9162 proofs of trees below 2**63 leaves never need more hashes (tlog-witness's bound too).
MAX_PROOF_HASHES = 63


def sequence_subtrees(leaves: Sequence[bytes]) -> Subtree:
    """A :data:`Subtree` over leaf hashes held in memory."""
    return lambda start, end: _subtree_root(leaves, start, end)


def inclusion_path(index: int, size: int, subtree: Subtree) -> list[bytes]:
    """RFC 9162 §2.1.3.1 PATH(index, D[size]): the sibling hashes from the leaf up to the root."""
    if not 0 <= index < size:
        raise IndexError(f"leaf {index} is outside a tree of {size}")
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            path.append(subtree(start + k, end))
            end = start + k
        else:
            path.append(subtree(start, start + k))
            start += k
    path.reverse()  # leaf to root, as RFC 9162 verifies it
    return path


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """:func:`inclusion_path` over leaves in memory."""
    return inclusion_path(index, len(leaves), sequence_subtrees(leaves))


def consistency_path(old: int, new: int, subtree: Subtree) -> list[bytes]:
    """RFC 9162 §2.1.4.1 PROOF(old, D[new]): the hashes proving tree ``new`` extends tree ``old``.

    Empty when ``old`` is 0 or equals ``new`` (nothing to prove).
    """
    if not 0 <= old <= new:
        raise ValueError(f"no consistency proof from a tree of {old} to a tree of {new}")
    if old in (0, new):
        return []
    proof: list[bytes] = []
    start, end, complete = 0, new, True  # SUBPROOF(m, D[start:end], b), iterated from the top
    m = old
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            proof.append(subtree(start + k, end))
            end = start + k
        else:
            proof.append(subtree(start, start + k))
            start, m, complete = start + k, m - k, False
    if not complete:
        proof.append(subtree(start, end))
    proof.reverse()  # the RFC lists the innermost hash first
    return proof


def consistency_proof(leaves: Sequence[bytes], old: int) -> list[bytes]:
    """:func:`consistency_path` from the first ``old`` leaves to all of them, in memory."""
    return consistency_path(old, len(leaves), sequence_subtrees(leaves))


def verify_consistency(old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> bool:
    """RFC 9162 §2.1.4.2: does ``proof`` show the tree ``new_root`` extends ``old_root``?

    Sizes equal: the roots must be equal and the proof empty. Old size 0: the empty tree is
    a prefix of every tree, so the proof must be empty (as tlog-witness requires).
    """
    if not 0 <= old <= new or len(proof) > MAX_PROOF_HASHES:
        return False
    if old == new:
        return not proof and old_root == new_root
    if old == 0:
        return not proof
    if not proof:
        return False
    path = list(proof)
    if old & (old - 1) == 0:  # an exact power of two: the old root is a node of the new tree
        path.insert(0, old_root)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    first = second = path[0]
    for sibling in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            first = node_hash(sibling, first)
            second = node_hash(sibling, second)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            second = node_hash(second, sibling)
        fn >>= 1
        sn >>= 1
    return sn == 0 and first == old_root and second == new_root


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes], expected: bytes) -> bool:
    """RFC 9162 §2.1.3.2: does ``proof`` lead from ``leaf`` at ``index`` to ``expected``?"""
    if not 0 <= index < size or len(proof) > MAX_PROOF_HASHES:
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
