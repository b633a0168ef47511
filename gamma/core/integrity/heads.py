"""The two heads of a log prefix, advanced one canonical event at a time: the hash chain's
(``log``) and the Merkle tree's (``tree``), as every resolution and audit record carries."""

from __future__ import annotations

from gamma.core.integrity.chain import GENESIS, step
from gamma.core.integrity.merkle import CompactRange, TreeHead, leaf_hash

__all__ = ["Heads"]


class Heads:
    """Chain head and tree head after the events added so far (none: the empty log's)."""

    def __init__(self) -> None:
        self._chain = GENESIS
        self._tree = CompactRange()

    def add(self, canonical: str) -> None:
        self._chain = step(self._chain, canonical)
        self._tree.append(leaf_hash(canonical.encode("utf-8")))

    @property
    def log(self) -> str:
        return self._chain.hex()

    @property
    def tree(self) -> TreeHead:
        return self._tree.head()
