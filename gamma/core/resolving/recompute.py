"""Recomputing a derived fact from its stated derivation (issue 29, SPEC "Derived values
recomputed"), the one unit the pure resolver and the engine share.

Under dependency mode ``recompute`` a derived fact with a ``derivation`` that phase 4 would
admit, or exclude only for ``dependency_invalidated``, is evaluated over the admitted facts
now holding its inputs: each input is followed from the fact ``depends_on`` names along
superseded / outranked / overridden links (as an experience's bindings are) to the admitted
fact at the walk's end. An input that is hidden, withdrawn, or in the fact's own cycle
leaves today's rule. A failed evaluation excludes the fact as ``derivation_failed``.

Derived facts are finished in dependency order (``finishing_order``): after their
dependencies and after every computed fact their inputs' walks may reach (``reach``, by the
codes of phases 1-3, which are final before phase 4), so an input restated later in the log
by another derived fact is read once it is decided. Facts that may read each other (a cycle)
read nothing from each other: such an input leaves today's rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import attrs

from gamma.core.terms.caches import remember
from gamma.core.terms.decisions import RECOMPUTED, SUBSTITUTING_CODES, Codes, Inputs, Reason, Stale
from gamma.core.terms.derivation import Derivation, Failure, evaluate, parse_derivation
from gamma.core.terms.model import Assert, Value

__all__ = [
    "FAILED",
    "RECOMPUTED",
    "Computed",
    "Record",
    "derivation_of",
    "failure_of",
    "finishing_order",
    "reach",
    "recompute",
    "same_value",
]

FAILED = "derivation_failed"
_WALKED = ("superseded", "outranked", "overridden")
# a fact given up for a substitution is walked through even when a dependency made it stale
# or hidden too: its slot's holder is the one it names (a hidden input stays unread: the
# reader's own codes then carry dependency_restricted, and it is never recomputed)
_PASSABLE = SUBSTITUTING_CODES | {"dependency_invalidated", "dependency_restricted"}



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


_PARSED: dict[str, Derivation] = {}


def _parsed(text: str) -> Derivation:
    known = _PARSED.get(text)
    return remember(_PARSED, text, parse_derivation(text)) if known is None else known


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

    ``settled(x)`` gives a fact's final codes (None: ``x`` is in ``fact``'s own cycle);
    ``value_of(x)`` an admitted fact's value as admitted; ``walked`` collects every fact
    read (the engine recomputes ``fact`` when one changes)."""
    derivation = derivation_of(fact.event)
    if derivation is None or not final.keys() <= {"dependency_invalidated"}:
        return None

    def key_of(x: str) -> str | None:
        return facts[x].event.key if x in facts else None

    if _unnamed(derivation, fact.event, key_of):  # only a store's index could check: fail closed
        return Reason(FAILED, (fact.event.id,), ())
    found = _holders(derivation, fact.event, key_of, settled, set() if walked is None else walked)
    if found is None:
        return None
    facts_used = tuple(sorted(set(found.values())))
    events = tuple(sorted({facts[f].commit_event or facts[f].event.id for f in facts_used}))
    result = evaluate(derivation, {name: value_of(holder) for name, holder in found.items()})
    if isinstance(result, Failure):
        return Reason(FAILED, events, facts_used)
    stated = fact.event.value
    assert stated is not None  # an erased fact has a phase-1 code: never recomputed
    stale = None if same_value(stated, result) else Stale(RECOMPUTED, stated)
    return Computed(result, Inputs(events, facts_used), stale)


def failure_of(
    event: Assert,
    key_of: Callable[[str], str | None],
    settled: Callable[[str], Codes | None],
    value_of: Callable[[str], Value],
) -> Failure | None:
    """Why a ``derivation_failed`` fact's derivation gave no value (its code, sentence and
    column), read again from a resolution's codes and admitted values; None when it is not
    a failed evaluation (a name that names no dependency, or no derivation)."""
    derivation = derivation_of(event)
    if derivation is None or _unnamed(derivation, event, key_of):
        return None
    found = _holders(derivation, event, key_of, settled, set())
    if found is None:
        return None
    result = evaluate(derivation, {name: value_of(holder) for name, holder in found.items()})
    return result if isinstance(result, Failure) else None


def _unnamed(derivation: Derivation, event: Assert, key_of: Callable[[str], str | None]) -> bool:
    """Whether some input name refers to no dependency (or to two by key)."""
    depends_on = event.depends_on or ()
    return any(_input(name, depends_on, key_of) is None for name in derivation.inputs)


def _holders(
    derivation: Derivation,
    event: Assert,
    key_of: Callable[[str], str | None],
    settled: Callable[[str], Codes | None],
    walked: set[str],
) -> dict[str, str] | None:
    """Each input name's holder now (its walk's end), or None where a walk ends elsewhere."""
    depends_on = event.depends_on or ()
    found: dict[str, str] = {}
    for name in derivation.inputs:
        start = _input(name, depends_on, key_of)
        target = None if start is None else _holder(start, settled, walked)
        if target is None:
            return None
        found[name] = target
    return found


def reach(
    fact: Record, facts: Mapping[str, Record], own_of: Callable[[str], Codes | None]
) -> list[str]:
    """Every fact on the substitution walks from ``fact``'s inputs, by own codes (phases 1-3).

    The walk ``recompute`` takes by final codes visits a prefix of each of these walks, so a
    fact is finished after what it reaches and reads nothing decided after it."""
    derivation = derivation_of(fact.event)
    if derivation is None:
        return []
    depends_on = fact.event.depends_on or ()
    found: list[str] = []
    for name in derivation.inputs:
        current = _input(name, depends_on, lambda x: facts[x].event.key if x in facts else None)
        seen: set[str] = set()
        while current is not None and current not in seen:
            seen.add(current)
            found.append(current)
            codes = own_of(current)
            if not codes or not codes.keys() <= SUBSTITUTING_CODES:
                break
            current = _substitute_of(codes)
    return found


def finishing_order(
    nodes: Sequence[str], reads: Mapping[str, Iterable[str]]
) -> tuple[list[str], dict[str, int]]:
    """``nodes`` ordered so that each comes after every node it ``reads`` (edges to other
    nodes count, others are ignored), and the cycle number of each node in a cycle.

    Tarjan's strongly connected components, iteratively, emitted reads-first; a component's
    members keep the order of ``nodes`` (log order), and so does any order the edges leave
    free. Any such order gives the same results: a fact reads only what is final before it."""
    position = {node: i for i, node in enumerate(nodes)}
    succ = {
        node: sorted({r for r in reads.get(node, ()) if r in position}, key=position.__getitem__)
        for node in nodes
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    order: list[str] = []
    cycles: dict[str, int] = {}
    cycle_count = 0  # cycles numbered in the order they are found
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work: list[tuple[str, Iterator[str]]] = [(root, iter(succ[root]))]
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succ[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    members.sort(key=position.__getitem__)
                    if len(members) > 1 or node in succ[node]:
                        cycles.update((m, cycle_count) for m in members)
                        cycle_count += 1
                    order.extend(members)
    return order, cycles


def _substitute_of(codes: Codes) -> str | None:
    """The fact a substitution names (superseded, then outranked, then overridden)."""
    return next((codes[c].facts[0] for c in _WALKED if c in codes and codes[c].facts), None)


def _input(name: str, depends_on: tuple[str, ...], key_of: Callable[[str], str | None]) -> str | None:
    """The dependency an input name refers to: a listed fact id, else the one holding the key."""
    if name in depends_on:
        return name
    holders = [d for d in dict.fromkeys(depends_on) if key_of(d) == name]
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
        if not codes.keys() <= _PASSABLE:
            return None
        nxt = _substitute_of(codes)
        if nxt is None:
            return None
        current = nxt
    return None
