"""The store's Merkle tree: one row per event with the subtree roots its append completed.

Row ``position`` (the event's 1-based position, leaf index ``position - 1``)
holds ``hashes``: the leaf hash, then the root of every perfect subtree that
the leaf completes, lowest first (``1 + trailing ones of the leaf index``
hashes of 32 bytes). The root of the perfect subtree at ``(level, index)``
is therefore hash ``level`` of row ``(index + 1) · 2^level``, one indexed
read; a proof or a tree head needs O(log² n) of them and no re-hashing of
the log. An append reads the O(log n) roots of the compact range first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlite_utils import Database

from gamma.core.integrity.merkle import CompactRange, leaf_hash, perfect_nodes, subtree_hash
from gamma.core.integrity.merkle import TreeHead as TreeHead
from gamma.core.terms.errors import StoreError

__all__ = ["StoredTree", "tree_rows"]

_HASH = 32


class StoredTree:
    """The perfect subtrees of a store's first ``size`` events, read from ``tree``."""

    def __init__(self, db: Database, size: int) -> None:
        self._db = db
        self.size = size
        self._cache: dict[tuple[int, int], bytes] = {}

    def node(self, level: int, index: int) -> bytes:
        found = self._cache.get((level, index))
        if found is not None:
            return found
        position = (index + 1) << level
        row = self._db.execute("SELECT hashes FROM tree WHERE position = ?", [position]).fetchone()
        if row is None or len(row[0]) < _HASH * (level + 1):
            raise StoreError(f"the tree table has no node at level {level}, index {index}")
        value = bytes(row[0][_HASH * level : _HASH * (level + 1)])
        self._cache[(level, index)] = value
        return value

    def head(self, size: int | None = None) -> TreeHead:
        size = self.size if size is None else size
        return TreeHead(size=size, root=subtree_hash(self, 0, size).hex())

    def compact(self) -> CompactRange:
        """The compact range of the whole stored tree (what an append extends)."""
        return CompactRange(self.size, [self.node(lv, ix) for lv, ix in perfect_nodes(self.size)])


def tree_rows(compact: CompactRange, bodies: Iterable[str]) -> list[list[Any]]:
    """Extend ``compact`` by the canonical bodies; the ``tree`` rows (position, hashes) to insert."""
    rows: list[list[Any]] = []
    for body in bodies:
        completed = compact.append(leaf_hash(body.encode("utf-8")))
        rows.append([compact.size, b"".join(completed)])
    return rows
