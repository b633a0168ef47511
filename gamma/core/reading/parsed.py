"""The mark of a log gamma's own reader validated as a whole.

``gamma.core.reading.reader.read`` (and the old ``parse_events``, ``load_events``) and a store's
full read return a ``ParsedLog``: a tuple that the resolver takes as it is. Any other sequence
of events was built by hand (or cut from a log) and is validated first
(``gamma.core.reading.handbuilt``). The check is one ``isinstance``, so the parsed path
pays nothing for it.
"""

from __future__ import annotations

from typing import Any, SupportsIndex, overload

from gamma.core.integrity.merkle import TreeHead
from gamma.core.terms.model import Erase, Event

__all__ = ["ParsedLog"]


class ParsedLog(tuple[Event, ...]):
    """Events that passed every rule of SPEC §2 together, in log order.

    Constructing one is a promise that the events form a valid log: only the
    reader and the store do, and code holding a valid log may (a tenant's
    events of a valid log are one, since references never cross tenants). A
    prefix of a valid log is valid, so ``log[:n]`` stays a ParsedLog; any other
    slice is a plain tuple.
    """

    #: (chain head, tree head) of the whole log, when the reader hashed its canonical texts
    #: as it read them (no slots: a tuple subclass cannot have them, so this lives in the
    #: instance's dict). A ParsedLog built otherwise has None, and its heads are computed.
    heads: tuple[str, TreeHead] | None = None
    #: the heads of shorter prefixes the reader hashed too, by size (``record``)
    prefix_heads: dict[int, tuple[str, TreeHead]] | None = None
    #: the erase events of the log (issue 30), once found (``erases``)
    found_erases: tuple[Erase, ...] | None = None

    def record(self, size: int, heads: tuple[str, TreeHead]) -> None:
        """Keep the heads of the prefix of ``size`` events, which the reader hashed as it read
        (the prefix heard by the time a log was read to be resolved at)."""
        if self.prefix_heads is None:
            self.prefix_heads = {}
        self.prefix_heads[size] = heads

    def heads_of(self, size: int) -> tuple[str, TreeHead] | None:
        """The (chain head, tree head) of the first ``size`` events, when the reader hashed
        them (the whole log, or a prefix it recorded), else None: the caller computes them."""
        if size == len(self):
            return self.heads
        return None if self.prefix_heads is None else self.prefix_heads.get(size)

    def erases(self) -> tuple[Erase, ...]:
        """The log's erase events, in log order: looked for once (Γ at any ``at`` reads
        those of the whole log)."""
        found = self.found_erases
        if found is None:
            found = self.found_erases = tuple(e for e in self if type(e) is Erase)
        return found

    @overload
    def __getitem__(self, index: SupportsIndex) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Event, ...]: ...

    def __getitem__(self, index: Any) -> Any:
        got = super().__getitem__(index)
        if isinstance(index, slice) and index.start in (None, 0) and index.step in (None, 1):
            prefix = ParsedLog(got)  # a prefix of a valid log is one
            if len(prefix) == len(self):  # the same log
                prefix.heads, prefix.found_erases = self.heads, self.found_erases
            return prefix
        return got
