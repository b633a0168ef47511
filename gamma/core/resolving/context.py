"""The context block of an engine's resolution, kept rendered between calls (issue 28).

``ContextLines`` belongs to one class's kept phases (``gamma.core.incremental.derived``): it holds the
rendered line of each admitted fact in its section, ordered by (key, fact) as
``render_context`` sorts, and each known unknown's line. The phases tell it which facts'
records and which keys' unknowns changed; it renders only those lines, when a snapshot is
next asked. ``ContextBody`` is that snapshot: immutable (tuples and strings), so a
resolution carrying it shares nothing mutable with the engine, and rendering it joins lines
(a view restricted to some keys finds theirs by bisection). Lines are rendered by the
helpers of ``gamma.core.resolving.render``, the very ones of the pure path, so the bytes are the same.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Mapping, Set
from typing import TYPE_CHECKING

import attrs

from gamma.core.resolving.render import context_line, context_text, section_of, unknown_line
from gamma.core.terms.decisions import Admitted

if TYPE_CHECKING:  # a type only: resolution imports this module for its field's type
    from gamma.core.resolving.resolution import Resolution

__all__ = ["ContextBody", "ContextLines", "Section"]


@attrs.frozen
class Section:
    """One section's lines in order, with the sort key of each: (key, fact), or (key, "")
    for a known unknown."""

    order: tuple[tuple[str, str], ...] = ()
    lines: tuple[str, ...] = ()

    def of(self, keys: list[str]) -> list[str]:
        """The lines of ``keys`` (sorted), in order: O(len(keys) log n + lines found)."""
        found: list[str] = []
        order = self.order
        for key in keys:
            i = bisect.bisect_left(order, (key,))
            while i < len(order) and order[i][0] == key:
                found.append(self.lines[i])
                i += 1
        return found


@attrs.frozen
class ContextBody:
    """The context block after its header, as rendered from ``admitted``, ``recheck_inputs``
    and ``known_unknowns`` (the very tuples given to the resolution: ``rendered`` tells
    whether a resolution still carries them, so an ``attrs.evolve`` of it renders afresh)."""

    sections: tuple[Section, Section, Section, Section]
    admitted: tuple[Admitted, ...]
    recheck_inputs: tuple[tuple[str, tuple[str, ...]], ...]
    known_unknowns: tuple[str, ...]

    def rendered(self, resolution: Resolution) -> bool:
        return (
            resolution.admitted is self.admitted
            and resolution.recheck_inputs is self.recheck_inputs
            and resolution.known_unknowns is self.known_unknowns
        )

    @functools.cached_property
    def whole(self) -> str:
        """The whole body, joined once (a later call with the same state reuses it)."""
        return context_text([s.lines for s in self.sections])

    def text(self, keys: frozenset[str] | None) -> str:
        """The body, or the lines of ``keys`` only (as ``render_context(keys=...)``)."""
        if keys is None:
            return self.whole
        wanted = sorted(keys)
        return context_text([s.of(wanted) for s in self.sections])


class ContextLines:
    """The rendered lines of one class's admitted facts and known unknowns, kept up to date
    by the phases (``admit``, ``drop``, ``unknown``); rendered lazily, only what changed."""

    def __init__(self) -> None:
        self._order: list[list[tuple[str, str]]] = [[], [], [], []]
        self._lines: list[list[str]] = [[], [], [], []]
        self._where: dict[str, tuple[int, tuple[str, str]]] = {}  # fact -> its section, sort key
        self._admits: dict[str, Admitted | None] = {}  # changed since the last snapshot
        self._unknowns: dict[str, bool] = {}
        self._sections: tuple[Section, Section, Section, Section] | None = None
        self._last = (Section(), Section(), Section(), Section())  # the sections last made

    def copy(self) -> ContextLines:
        """An independent copy (a class forked from another: ``Derived.fork``); the sections
        made are immutable and shared."""
        other = ContextLines()
        other._order = [list(order) for order in self._order]
        other._lines = [list(lines) for lines in self._lines]
        other._where, other._admits = dict(self._where), dict(self._admits)
        other._unknowns, other._sections, other._last = dict(self._unknowns), self._sections, self._last
        return other

    def admit(self, record: Admitted) -> None:
        self._admits[record.fact] = record
        self._sections = None

    def drop(self, fact: str) -> None:
        self._admits[fact] = None
        self._sections = None

    def unknown(self, key: str, unknown: bool) -> None:
        self._unknowns[key] = unknown
        self._sections = None

    def sections(
        self, recheck: Mapping[str, Set[str]]
    ) -> tuple[Section, Section, Section, Section]:
        """The sections now; ``recheck``: each fact needing recheck's changed inputs."""
        if self._sections is not None:
            return self._sections
        admits, self._admits = self._admits, {}
        unknowns, self._unknowns = self._unknowns, {}
        changed = [False] * 4
        if len(admits) + len(unknowns) > 32 and (len(admits) + len(unknowns)) * 16 > len(self._where):
            self._rebuild(admits, unknowns, recheck)
            changed = [True] * 4
        else:
            for fact, record in admits.items():
                old = self._where.pop(fact, None)
                if old is not None:
                    self._remove(*old)
                    changed[old[0]] = True
                if record is not None:
                    section, at = section_of(record), (record.key, fact)
                    self._insert(section, at, _context_line(record, recheck))
                    self._where[fact] = (section, at)
                    changed[section] = True
            for key, unknown in unknowns.items():
                changed[3] |= self._remove(3, (key, ""))
                if unknown:
                    self._insert(3, (key, ""), unknown_line(key))
                    changed[3] = True
        before = self._last
        self._sections = self._last = (
            Section(tuple(self._order[0]), tuple(self._lines[0])) if changed[0] else before[0],
            Section(tuple(self._order[1]), tuple(self._lines[1])) if changed[1] else before[1],
            Section(tuple(self._order[2]), tuple(self._lines[2])) if changed[2] else before[2],
            Section(tuple(self._order[3]), tuple(self._lines[3])) if changed[3] else before[3],
        )
        return self._sections

    def _rebuild(
        self,
        admits: dict[str, Admitted | None],
        unknowns: dict[str, bool],
        recheck: Mapping[str, Set[str]],
    ) -> None:
        """Many changes at once (a class's first call): one sort per section."""
        entries: list[dict[tuple[str, str], str]] = [
            dict(zip(order, lines)) for order, lines in zip(self._order, self._lines)
        ]
        for fact, record in admits.items():
            old = self._where.pop(fact, None)
            if old is not None:
                del entries[old[0]][old[1]]
            if record is not None:
                section, at = section_of(record), (record.key, fact)
                entries[section][at] = _context_line(record, recheck)
                self._where[fact] = (section, at)
        for key, unknown in unknowns.items():
            if unknown:
                entries[3][(key, "")] = unknown_line(key)
            else:
                entries[3].pop((key, ""), None)
        for section, found in enumerate(entries):
            self._order[section] = sorted(found)
            self._lines[section] = [found[at] for at in self._order[section]]

    def _insert(self, section: int, at: tuple[str, str], line: str) -> None:
        order = self._order[section]
        i = bisect.bisect_left(order, at)
        order.insert(i, at)
        self._lines[section].insert(i, line)

    def _remove(self, section: int, at: tuple[str, str]) -> bool:
        order = self._order[section]
        i = bisect.bisect_left(order, at)
        if i < len(order) and order[i] == at:
            del order[i], self._lines[section][i]
            return True
        return False


def _context_line(record: Admitted, recheck: Mapping[str, Set[str]]) -> str:
    """The fact's line, with its changed inputs (sorted, as ``recheck_inputs`` has them)."""
    return context_line(record, sorted(recheck.get(record.fact, ())) if record.needs_recheck else ())
