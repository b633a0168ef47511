"""The log as a Merkle tree (RFC 9162 §2.1): tree heads, inclusion and consistency proofs.

Leaf ``i`` is the UTF-8 canonical JSON of event ``i`` (the line ``gamma export``
writes, without its newline). With SHA-256::

    leaf hash    LH(d)        = SHA-256(0x00 || d)
    node hash    NH(l, r)     = SHA-256(0x01 || l || r)
    MTH({})                   = SHA-256("")
    MTH({d0})                 = LH(d0)
    MTH(D[n]), n > 1          = NH(MTH(D[0:k]), MTH(D[k:n])), k the largest power of two < n

Proofs are generated over a ``SubtreeHashes`` source (an in-memory tree or
the store's node table) that answers MTH of a range whose start is a
multiple of a power of two at least its length, the only ranges the RFC
algorithms ask for; verification (RFC 9162 §2.1.3.2 and §2.1.4.2) needs no
tree at all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import attrs

__all__ = [
    "CompactRange",
    "ConsistencyProof",
    "EMPTY_ROOT",
    "InclusionProof",
    "MemoryTree",
    "SubtreeHashes",
    "TreeBuilder",
    "TreeHead",
    "consistency_path",
    "consistency_proof",
    "inclusion_path",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "perfect_nodes",
    "root_of",
    "subtree_hash",
    "tree_head_of",
    "verify_consistency_path",
    "verify_inclusion_path",
]

EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data)."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly below ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


@attrs.frozen
class TreeHead:
    """The head of the tree over the first ``size`` leaves; ``root`` in lowercase hex."""

    size: int
    root: str

    def to_dict(self) -> dict[str, Any]:
        return {"root": self.root, "size": self.size}


class CompactRange:
    """The roots of the perfect subtrees covering leaves ``0 … size-1``, largest first.

    Appending a leaf costs O(1) amortised hashes (at most log₂ n); the root
    of the current size folds the O(log n) subtree roots from the right.
    """

    def __init__(self, size: int = 0, nodes: Sequence[bytes] = ()) -> None:
        if len(nodes) != size.bit_count():
            raise ValueError(f"a compact range of size {size} has {size.bit_count()} nodes")
        self.size = size
        self.nodes = list(nodes)

    def append(self, leaf: bytes) -> list[bytes]:
        """Add one leaf hash; return the roots of the perfect subtrees it completes, lowest
        (the leaf itself) first."""
        index, current = self.size, leaf
        completed = [current]
        while index & 1:
            current = node_hash(self.nodes.pop(), current)
            completed.append(current)
            index >>= 1
        self.nodes.append(current)
        self.size += 1
        return completed

    def root(self) -> bytes:
        """MTH of the leaves so far (SHA-256 of nothing for an empty tree)."""
        if not self.nodes:
            return EMPTY_ROOT
        current = self.nodes[-1]
        for node in reversed(self.nodes[:-1]):
            current = node_hash(node, current)
        return current

    def head(self) -> TreeHead:
        return TreeHead(size=self.size, root=self.root().hex())


def tree_head_of(canonical_events: Iterable[str]) -> TreeHead:
    """The tree head over canonical events (each event's UTF-8 bytes is one leaf)."""
    builder = TreeBuilder()
    add = builder.add
    for canonical in canonical_events:
        add(canonical.encode("utf-8"))
    return builder.head()


_BATCH = 4096  # leaves hashed together; a power of two, so each full batch is a perfect subtree


def _level_root(level: list[bytes]) -> bytes:
    """MTH over these leaf hashes (at least one), pairing level by level: an unpaired last node
    moves up as it is, which splits at the largest power of two below the size, as RFC 9162 does."""
    sha256 = hashlib.sha256
    while len(level) > 1:
        paired = [sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) & 1:
            paired.append(level[-1])
        level = paired
    return level[0]


class TreeBuilder:
    """The tree head over leaves added one at a time, for a reader that hashes as it reads.

    Leaves are hashed as they come and folded a batch (a perfect subtree) at a time, so the
    memory is one batch of leaf hashes and the O(log n) subtree roots of a compact range.
    """

    def __init__(self) -> None:
        self._batches = CompactRange()  # over the roots of the full batches
        self._leaves: list[bytes] = []
        self._sha256 = hashlib.sha256

    def add(self, data: bytes) -> None:
        """Add the leaf ``data`` (an event's canonical UTF-8 bytes)."""
        leaves = self._leaves
        leaves.append(self._sha256(b"\x00" + data).digest())
        if len(leaves) == _BATCH:
            self._batches.append(_level_root(leaves))
            self._leaves = []

    def head(self) -> TreeHead:
        """The head over the leaves added so far."""
        size = self._batches.size * _BATCH + len(self._leaves)
        if not self._leaves:
            return TreeHead(size=size, root=self._batches.root().hex())
        current = _level_root(self._leaves)
        for node in reversed(self._batches.nodes):
            current = node_hash(node, current)
        return TreeHead(size=size, root=current.hex())


def root_of(leaves: Iterable[bytes]) -> bytes:
    """MTH over the given leaf data, in one pass with O(log n) memory."""
    compact = CompactRange()
    for data in leaves:
        compact.append(leaf_hash(data))
    return compact.root()


def perfect_nodes(size: int) -> list[tuple[int, int]]:
    """(level, index) of the perfect subtrees whose roots make the compact range of ``size``."""
    result, start = [], 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            result.append((level, start >> level))
            start += 1 << level
    return result


class SubtreeHashes(Protocol):
    """Something that knows the hash of every perfect subtree of a tree of ``size`` leaves."""

    size: int

    def node(self, level: int, index: int) -> bytes:
        """The root of the perfect subtree over leaves ``index·2^level … (index+1)·2^level - 1``."""
        ...


def subtree_hash(tree: SubtreeHashes, start: int, end: int) -> bytes:
    """MTH(D[start:end]) where ``start`` is a multiple of a power of two >= ``end - start``."""
    n = end - start
    if n == 0:
        return EMPTY_ROOT
    if n & (n - 1) == 0:
        level = n.bit_length() - 1
        return tree.node(level, start >> level)
    k = _split(n)
    return node_hash(tree.node(k.bit_length() - 1, start // k), subtree_hash(tree, start + k, end))


def inclusion_path(tree: SubtreeHashes, index: int, size: int) -> list[bytes]:
    """PATH(m, D[n]) of RFC 6962 §2.1.1 (RFC 9162 §2.1.3.1), leaf first."""
    if not 0 <= index < size <= tree.size:
        raise ValueError(f"no leaf {index} in a tree of size {size} (the log has {tree.size})")
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            path.append(subtree_hash(tree, start + k, end))
            end = start + k
        else:
            path.append(subtree_hash(tree, start, start + k))
            start += k
    path.reverse()
    return path


def consistency_path(tree: SubtreeHashes, first: int, second: int) -> list[bytes]:
    """PROOF(m, D[n]) of RFC 6962 §2.1.2 (RFC 9162 §2.1.4.1); empty when m = 0 or m = n."""
    if not 0 <= first <= second <= tree.size:
        raise ValueError(
            f"no consistency proof from size {first} to size {second} (the log has {tree.size})"
        )
    path: list[bytes] = []
    if first == 0 or first == second:
        return path
    start, end, complete = 0, second, True
    while True:
        if first - start == end - start:
            if not complete:
                path.append(subtree_hash(tree, start, end))
            break
        k = _split(end - start)
        if first - start <= k:
            path.append(subtree_hash(tree, start + k, end))
            end = start + k
        else:
            path.append(subtree_hash(tree, start, start + k))
            start += k
            complete = False
    path.reverse()
    return path


def verify_inclusion_path(
    leaf: bytes, index: int, size: int, path: Sequence[bytes], root: bytes
) -> bool:
    """RFC 9162 §2.1.3.2: whether ``path`` shows leaf hash ``leaf`` at ``index`` under ``root``."""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency_path(
    first: int, second: int, first_root: bytes, second_root: bytes, path: Sequence[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2: whether ``path`` shows the tree of ``second`` extends that of ``first``."""
    if not 0 <= first <= second:
        return False
    if first == second:
        return not path and first_root == second_root
    if first == 0:
        return not path and first_root == EMPTY_ROOT  # every tree extends the empty tree
    if not path:
        return False
    nodes = list(path)
    if first & (first - 1) == 0:  # a power of two: the first root is itself a node
        nodes.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = nodes[0]
    for c in nodes[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == first_root and sr == second_root


class MemoryTree:
    """Every perfect subtree of a list of leaf hashes, built in O(n) hashes."""

    def __init__(self, leaves: Iterable[bytes]) -> None:
        self.levels: list[list[bytes]] = [list(leaves)]
        while len(self.levels[-1]) > 1:
            below = self.levels[-1]
            self.levels.append(
                [node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
            )
        self.size = len(self.levels[0])

    @classmethod
    def of_data(cls, leaves: Iterable[bytes]) -> MemoryTree:
        return cls(leaf_hash(data) for data in leaves)

    def node(self, level: int, index: int) -> bytes:
        return self.levels[level][index]

    def root(self, size: int | None = None) -> bytes:
        return self.root_of_tree(self, self.size if size is None else size)

    @staticmethod
    def root_of_tree(tree: SubtreeHashes, size: int) -> bytes:
        """MTH of the first ``size`` leaves of any tree of perfect subtrees."""
        if not 0 <= size <= tree.size:
            raise ValueError(f"no tree of size {size} (the log has {tree.size})")
        return subtree_hash(tree, 0, size)


@attrs.frozen(kw_only=True)
class InclusionProof:
    """``{"leaf_index", "tree_size", "root", "leaf_hash", "path"}``, hashes in lowercase hex."""

    leaf_index: int
    tree_size: int
    root: str
    leaf_hash: str
    path: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "leaf_hash": self.leaf_hash,
            "leaf_index": self.leaf_index,
            "path": list(self.path),
            "root": self.root,
            "tree_size": self.tree_size,
        }

    def verify(self, leaf: bytes | None = None) -> bool:
        """Whether the path leads to ``root``; with ``leaf`` (its data), also that it is that leaf."""
        try:
            claimed = bytes.fromhex(self.leaf_hash)
            path = [bytes.fromhex(p) for p in self.path]
            root = bytes.fromhex(self.root)
        except ValueError:
            return False
        if leaf is not None and leaf_hash(leaf) != claimed:
            return False
        return verify_inclusion_path(claimed, self.leaf_index, self.tree_size, path, root)


@attrs.frozen(kw_only=True)
class ConsistencyProof:
    """``{"first", "second", "first_root", "second_root", "path"}``, hashes in lowercase hex."""

    first: int
    second: int
    first_root: str
    second_root: str
    path: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "first_root": self.first_root,
            "path": list(self.path),
            "second": self.second,
            "second_root": self.second_root,
        }

    def verify(self) -> bool:
        try:
            path = [bytes.fromhex(p) for p in self.path]
            first_root = bytes.fromhex(self.first_root)
            second_root = bytes.fromhex(self.second_root)
        except ValueError:
            return False
        return verify_consistency_path(self.first, self.second, first_root, second_root, path)


def inclusion_proof(tree: SubtreeHashes, index: int, size: int) -> InclusionProof:
    """The inclusion proof of leaf ``index`` in the tree of the first ``size`` leaves."""
    path = inclusion_path(tree, index, size)
    return InclusionProof(
        leaf_index=index,
        tree_size=size,
        root=subtree_hash(tree, 0, size).hex(),
        leaf_hash=tree.node(0, index).hex(),
        path=tuple(p.hex() for p in path),
    )


def consistency_proof(tree: SubtreeHashes, first: int, second: int) -> ConsistencyProof:
    """The proof that the tree of ``second`` leaves extends the tree of ``first`` leaves."""
    path = consistency_path(tree, first, second)
    return ConsistencyProof(
        first=first,
        second=second,
        first_root=subtree_hash(tree, 0, first).hex(),
        second_root=subtree_hash(tree, 0, second).hex(),
        path=tuple(p.hex() for p in path),
    )
