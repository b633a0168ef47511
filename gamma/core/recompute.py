"""Recomputing a derived fact from its stated derivation (issue 29, SPEC "Derived values
recomputed"), the one unit the pure resolver and the engine share.

Under dependency mode ``recompute`` a derived fact with a ``derivation`` that phase 4 would
admit, or exclude only for ``dependency_invalidated``, is evaluated over the admitted facts
now holding its inputs: each input is followed from the fact ``depends_on`` names along
superseded / outranked / overridden links (as an experience's bindings are) to the admitted
fact at the walk's end. An input that is hidden, withdrawn, or computed later in the log
leaves today's rule. A failed evaluation excludes the fact as ``derivation_failed``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Protocol

import attrs

from gamma.core.decisions import SUBSTITUTING_CODES, Inputs, Reason, Stale
from gamma.core.derivation import Derivation, Failure, evaluate, parse_derivation
from gamma.core.model import Assert, Value

__all__ = ["FAILED", "RECOMPUTED", "Computed", "Record", "derivation_of", "recompute", "same_value"]

FAILED = "derivation_failed"
RECOMPUTED = "recomputed"
_WALKED = ("superseded", "outranked", "overridden")

Codes = dict[str, Reason]


class Record(Protocol):
    """What recomputing reads of a fact's fold record."""

    @property
    def event(self) -> Assert: ...
    @property
    def id(self) -> str: ...
    @property
    def commit_event(self) -> str | None: ...


@attrs.frozen
class Computed:
    """A derived fact's recomputed value, its evidence, and its stated value when it differs."""

    value: Value
    inputs: Inputs
    stale: Stale | None


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Derivation:
    return parse_derivation(text)


def derivation_of(event: Assert) -> Derivation | None:
    """The parsed derivation of an assert (checked at the door, so it parses), or None."""
    return None if event.derivation is None else _parsed(event.derivation)


def same_value(a: Value, b: Value) -> bool:
    """Equality of canonical JSON: ``true`` is not ``1``."""
    return type(a) is type(b) and a == b


def recompute(
    fact: Record,
    final: Codes,
    facts: Mapping[str, Record],
    settled: Callable[[str], Codes | None],
    value_of: Callable[[str], Value],
    *,
    walked: set[str] | None = None,
) -> Computed | Reason | None:
    """The recomputed value of ``fact`` (final codes ``final`` from phase 4), the
    ``derivation_failed`` reason, or None where today's rule holds.

    ``settled(x)`` gives a fact's final codes when they are decided before ``fact``'s (None:
    computed later in the log); ``value_of(x)`` an admitted fact's value as admitted;
    ``walked`` collects every fact read (the engine recomputes ``fact`` when one changes)."""
    derivation = derivation_of(fact.event)
    if derivation is None or not final.keys() <= {"dependency_invalidated"}:
        return None
    depends_on = fact.event.depends_on or ()
    values: dict[str, Value] = {}
    used: set[str] = set()
    for name in derivation.inputs:
        start = _input(name, depends_on, facts)
        if start is None:  # a reference only a store's index could check: fail closed
            return Reason(FAILED, (fact.event.id,), ())
        target = _holder(start, settled, set() if walked is None else walked)
        if target is None:
            return None
        values[name] = value_of(target)
        used.add(target)
    facts_used = tuple(sorted(used))
    events = tuple(sorted({facts[f].commit_event or facts[f].event.id for f in facts_used}))
    result = evaluate(derivation, values)
    if isinstance(result, Failure):
        return Reason(FAILED, events, facts_used)
    stated = fact.event.value
    stale = None if same_value(stated, result) else Stale(RECOMPUTED, stated)
    return Computed(result, Inputs(events, facts_used), stale)


def _input(name: str, depends_on: tuple[str, ...], facts: Mapping[str, Record]) -> str | None:
    """The dependency an input name refers to: a listed fact id, else the one holding the key."""
    if name in depends_on:
        return name
    holders = [d for d in dict.fromkeys(depends_on) if d in facts and facts[d].event.key == name]
    return holders[0] if len(holders) == 1 else None


def _holder(start: str, settled: Callable[[str], Codes | None], walked: set[str]) -> str | None:
    """The admitted fact now holding ``start``'s value, walking substitutions (iterative)."""
    seen: set[str] = set()
    current = start
    while current not in seen:
        seen.add(current)
        walked.add(current)
        codes = settled(current)
        if codes is None:
            return None
        if not codes:
            return current
        if not codes.keys() <= SUBSTITUTING_CODES:
            return None
        nxt = next((codes[c].facts[0] for c in _WALKED if c in codes and codes[c].facts), None)
        if nxt is None:
            return None
        current = nxt
    return None
