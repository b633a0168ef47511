"""What the engine keeps between calls: per tenant an index of its facts, and per
(tenant, actor class) the phases' results, by key, at the last ``at`` asked.

``TenantIndex`` knows, for one fold, each key's facts in log order, each fact's
dependents, the key-wide grants of each key and the times at which a fact's
validity flips (``valid_from``, ``valid_until``). ``Derived`` holds, for one class
of actors, every computed fact's own codes (phases 1-3, per key), its final codes
and origins (phase 4, per fact), its record in the resolution, each key's known
unknown and each experience's verdict. The engine tells it which keys changed
(``invalidate``); ``ensure`` recomputes only those keys and the dependents of the
facts whose own codes moved, and computes keys never asked before on demand,
each with its dependency ancestors' keys. Every unit is the one the pure
resolver runs (``gamma.core.resolving.phases``), so the results are the same bytes.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Generic, TypeVar

from gamma.core.resolving.context import ContextBody, ContextLines
from gamma.core.resolving.experiences import verdict_of
from gamma.core.resolving.phases import (
    Access,
    Codes,
    FactRecord,
    FoldState,
    Origins,
    decision,
    inherit,
    key_access_ignored,
    known_unknown,
    own_codes,
    recomputed,
)
from gamma.core.resolving.recompute import Computed, finishing_order, reach
from gamma.core.terms.decisions import (
    SUBSTITUTING_CODES,
    Admitted,
    Excluded,
    ExperienceVerdict,
    Ignored,
    Reason,
)
from gamma.core.terms.model import Actor, Assert, Event, Experience, Grant, Revoke, Value
from gamma.core.terms.policy import Policy

__all__ = ["Derived", "Table", "TenantIndex", "actor_class"]

K = TypeVar("K", str, tuple[str, int], tuple[str, str, str])
V = TypeVar("V")


class Table(Generic[K, V]):
    """Values kept in the order of their keys; the tuple of them is made once per change.

    Changes are buffered and applied on read: a few by bisection, many by one sort.
    """

    def __init__(self) -> None:
        self._keys: list[K] = []
        self._values: list[V] = []
        self._pending: dict[K, V | None] = {}
        self._tuple: tuple[V, ...] | None = ()

    def set(self, key: K, value: V) -> None:
        self._pending[key] = value
        self._tuple = None

    def remove(self, key: K) -> None:
        self._pending[key] = None
        self._tuple = None

    def values(self) -> tuple[V, ...]:
        if self._tuple is None:
            self._flush()
            self._tuple = tuple(self._values)
        return self._tuple

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        if len(pending) > 32 and len(pending) * 16 > len(self._keys):
            merged: dict[K, V | None] = dict(zip(self._keys, self._values, strict=True))
            merged.update(pending)
            self._keys = sorted(k for k, v in merged.items() if v is not None)
            self._values = [v for k in self._keys if (v := merged[k]) is not None]
            return
        keys, values = self._keys, self._values
        for key, value in pending.items():
            i = bisect.bisect_left(keys, key)
            found = i < len(keys) and keys[i] == key
            if value is None:
                if found:
                    del keys[i], values[i]
            elif found:
                values[i] = value
            else:
                keys.insert(i, key)
                values.insert(i, value)


class TenantIndex:
    """One tenant's facts by key, dependents, key-wide grants and validity flip times."""

    def __init__(self) -> None:
        self.by_key: dict[str, list[str]] = {}
        self.order_of: dict[str, int] = {}
        self.dependents: dict[str, list[str]] = defaultdict(list)
        self.key_grants: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
        self.flip_times: list[datetime] = []  # every valid_from and valid_until, sorted,
        self.flip_keys: list[str] = []  # with the key of its fact
        self.named: set[str] = set()  # actor ids some visibility list or grant names
        self.fact_grants: dict[str, int] = {}  # grants and revokes naming each fact, counted
        self.derivations: set[str] = set()  # the facts stating a derivation

    def add(self, event: Event, fold: FoldState, grants_before: int) -> None:
        """Index ``event`` just folded (``grants_before``: len(key_grant_events) before it)."""
        if isinstance(event, Assert):
            self.by_key.setdefault(event.key, []).append(event.fact)
            self.order_of[event.fact] = len(self.order_of)
            for dep in event.depends_on or ():
                self.dependents[dep].append(event.fact)
            for flip in (event.valid_from, event.valid_until):
                if flip is not None:
                    i = bisect.bisect_right(self.flip_times, flip)
                    self.flip_times.insert(i, flip)
                    self.flip_keys.insert(i, event.key)
            if event.visibility is not None:
                self.named.update(event.visibility.actors or ())
            if event.derivation is not None:
                self.derivations.add(event.fact)
        elif isinstance(event, Grant | Revoke):
            if event.to_actor is not None:
                self.named.add(event.to_actor)
            if event.fact is not None:
                self.fact_grants[event.fact] = self.fact_grants.get(event.fact, 0) + 1
            for grant in fold.key_grant_events[grants_before:]:
                self.key_grants[grant[1]].append(grant)

    def flipping(self, a: datetime, b: datetime) -> set[str]:
        """The keys with a fact whose validity flips between times ``a`` and ``b``."""
        start = bisect.bisect_right(self.flip_times, min(a, b))
        stop = bisect.bisect_right(self.flip_times, max(a, b))
        return set(self.flip_keys[start:stop])


def actor_class(actor: Actor, index: TenantIndex) -> tuple[object, ...]:
    """What of an actor the phases read: its roles, clearance, scope, and its id only when
    some fact or grant of the tenant names it (otherwise every id decides alike)."""
    named = actor.id if actor.id in index.named else None
    return (actor.tenant, actor.roles, actor.clearance, actor.scope, named)


def _replaced_by(codes: Codes) -> str | None:
    """The fact an experience's replacement walk goes to from a fact with ``codes``."""
    if not codes or not set(codes) <= SUBSTITUTING_CODES:
        return None
    for code in ("superseded", "outranked", "overridden"):
        if code in codes and codes[code].facts:
            return codes[code].facts[0]
    return None


#: A key with more facts than this keeps each fact's own inputs (``Derived.inputs``), so
#: that a call skips the facts of the key whose own codes cannot have moved.
LONG_KEY = 8

#: The codes a candidate for precedence may have (any other: it is none).
_CANDIDATE_CODES = frozenset({"outranked", "overridden", "access_denied"})


def _own_inputs(fact: FactRecord, at: datetime, grants: tuple[int, int]) -> tuple[object, ...]:
    """What a fact's own codes read but its key's candidates for precedence: its record
    (``_validity``), where ``at`` falls against its validity bounds, and how many grants and
    revokes name it and its key (``Access``; they only ever grow). The actor's class is fixed
    for a ``Derived``."""
    event = fact.event
    by = fact.superseded_by
    return (
        event,
        fact.erased_by,
        fact.commit_pos,
        fact.retracted_by,
        None if by is None else by.id,
        fact.superseding_event,
        event.valid_from is not None and at < event.valid_from,
        event.valid_until is not None and at >= event.valid_until,
        grants,
    )


class Derived:
    """The phases' results for one class of actors of one tenant at one ``at``."""

    def __init__(self, policy: Policy, index: TenantIndex) -> None:
        self.policy = policy
        self.index = index
        self.at: datetime | None = None
        self.version = 0  # the tenant's journal position these results reflect
        self.overlay: frozenset[str] = frozenset()  # keys deferred effects touched in the view
        self.due: frozenset[str] = frozenset()  # the facts whose deferred effects the view ran
        self.done: set[str] = set()
        self.dirty: set[str] = set()
        self.complete = False
        self.own: dict[str, Codes] = {}
        # per fact of a long key, computed no candidate for precedence: its own inputs then
        self.inputs: dict[str, tuple[object, ...]] = {}
        self.codes: dict[str, Codes] = {}
        self.origins: dict[str, Origins] = {}
        self.recheck: dict[str, set[str]] = {}
        self.decided: dict[str, Admitted | Excluded] = {}
        self.admitted_ids: set[str] = set()
        self.admitted: Table[str, Admitted] = Table()
        self.excluded: Table[str, Excluded] = Table()
        self.recheck_inputs: Table[str, tuple[str, tuple[str, ...]]] = Table()
        self.unknown_of: dict[str, bool] = {}
        self.unknown: Table[str, str] = Table()
        self.context = ContextLines()  # the context block's lines (``context_body``)
        self.key_ignored: dict[str, set[tuple[str, str, str]]] = {}
        # the resolution's ignored entries (the engine adds the fold's, the key-wide grants'
        # come from ``ensure``), how far into the tenant's log of them, the last view's own
        self.ignored_table: Table[tuple[str, str, str], Ignored] = Table()
        self.ignored_seen = (0, 0)
        self.extras: frozenset[tuple[str, str, str]] = frozenset()
        # experiences: verdicts by log index, the experiences using each fact, the walk
        self.seen_experiences = 0
        self.uses_of: dict[str, list[int]] = defaultdict(list)
        self.verdicts: dict[int, ExperienceVerdict] = {}
        self.verdict_table: Table[tuple[str, int], ExperienceVerdict] = Table()
        self.unjudged: set[int] = set()
        self.walks_to: dict[str, set[str]] = defaultdict(set)  # g -> facts whose walk steps to g
        self.memo: dict[str, str | None] = {}
        # recompute mode: each derived fact's computed value or failure, the facts its last
        # evaluation read, and per fact the derived facts that read it
        self.computed: dict[str, Computed] = {}
        self.restated: dict[str, tuple[str, ...]] = {}  # computed with another value than stated
        self.failed: dict[str, Reason] = {}
        self.reads: dict[str, set[str]] = {}
        self.readers: dict[str, set[str]] = defaultdict(set)

    def context_body(self) -> ContextBody:
        """The context block of the results as they are (every key computed: ``complete``),
        with the very tuples a resolution of them carries."""
        return ContextBody(
            sections=self.context.sections(self.recheck),
            admitted=self.admitted.values(),
            recheck_inputs=self.recheck_inputs.values(),
            known_unknowns=self.unknown.values(),
        )

    def invalidate(self, keys: Iterable[str]) -> None:
        """Those keys' facts may have changed records (or the time or actor moved)."""
        self.dirty.update(keys)

    def ensure(
        self, fold: FoldState, actor: Actor, at: datetime, keys: Iterable[str] | None = None
    ) -> None:
        """Bring the results for ``keys`` (None: every key) and their ancestors' keys up to date."""
        self.at = at
        index = self.index
        if keys is not None and index.derivations and self.policy.dependency_mode == "recompute":
            keys = None  # what a derivation reads is found by walking: every key is computed
        if self.complete:  # every key computed once: only the touched ones again
            wanted = set(self.dirty)
        elif keys is None:
            wanted = set(index.by_key) | self.dirty
            self.complete = True
        else:  # the keys asked and the touched ones, with the ancestors' keys not computed yet
            closure = self._missing_ancestors(fold, set(keys) | (self.dirty & self.done))
            wanted = {k for k in closure if k in self.dirty or k not in self.done}
        self.dirty.clear()  # a key not computed yet is computed afresh when asked
        if not wanted:
            return
        access = Access(fold, actor)
        moved: list[str] = []
        for key in wanted:
            records = [fold.facts[f] for f in index.by_key.get(key, ())]
            if len(records) <= LONG_KEY:
                found = own_codes(records, actor, at, self.policy, access)
            else:
                found = self._long_key(key, records, actor, at, access)
            for fact_id, codes in found.items():
                if self.own.get(fact_id) != codes or fact_id not in self.codes:
                    self.own[fact_id] = codes
                    moved.append(fact_id)
            ignored = key_access_ignored(records, index.key_grants.get(key, ()))
            before = self.key_ignored.get(key, set())
            if before != ignored:
                self.key_ignored[key] = ignored
                for entry in before - ignored:
                    self.ignored_table.remove(entry)
                for entry in ignored - before:
                    self.ignored_table.set(entry, Ignored(event=entry[0], code=entry[1], fact=entry[2]))
            self.done.add(key)
            self.dirty.discard(key)
        self._inherit(fold, self._descendants(fold, moved))

    def _long_key(
        self, key: str, records: list[FactRecord], actor: Actor, at: datetime, access: Access
    ) -> dict[str, Codes]:
        """``own_codes`` of a long key's facts but those whose own codes are known: computed
        no candidate for precedence (a code of their own record or scope) from the inputs
        they have now. A turn touching a key of a long history recomputes its new and
        changed facts and its candidates, not the history."""
        key_grants = len(self.index.key_grants.get(key, ()))
        fact_grants = self.index.fact_grants
        inputs = self.inputs
        now = {f.id: _own_inputs(f, at, (key_grants, fact_grants.get(f.id, 0))) for f in records}

        def unchanged(fact: FactRecord) -> bool:
            return inputs.get(fact.id) == now[fact.id] and fact.id in self.codes

        found = own_codes(records, actor, at, self.policy, access, unchanged)
        for fact_id, codes in found.items():
            if any(code not in _CANDIDATE_CODES for code in codes):
                inputs[fact_id] = now[fact_id]
            else:
                inputs.pop(fact_id, None)
        return found

    def _missing_ancestors(self, fold: FoldState, keys: set[str]) -> set[str]:
        """``keys`` and, transitively, the keys of their facts' dependencies not computed yet
        (a computed key's dependencies are computed, or touched and so among ``keys``: ``done``
        only grows, a key is computed with its closure, a reference names an earlier fact and
        a key that gains a fact is touched; so a computed, untouched key is not walked)."""
        seen: set[str] = set()
        todo = list(keys)
        while todo:
            key = todo.pop()
            if key in seen:
                continue
            seen.add(key)
            if key in self.done and key not in self.dirty:
                continue  # its dependencies' keys are computed, or dirty and so among ``keys``
            for fact_id in self.index.by_key.get(key, ()):
                for dep in fold.facts[fact_id].event.depends_on or ():
                    record = fold.facts.get(dep)
                    if record is None:
                        continue
                    dep_key = record.event.key
                    if dep_key not in seen and dep_key not in self.done:
                        todo.append(dep_key)
        return seen

    def _descendants(self, fold: FoldState, moved: list[str]) -> list[str]:
        """``moved`` and every computed fact depending on one of them, in log order."""
        found = set(moved)
        todo = list(moved)
        while todo:
            fact_id = todo.pop()
            for dependent in (*self.index.dependents.get(fact_id, ()), *self.readers.get(fact_id, ())):
                if dependent not in found and dependent in self.own and dependent in fold.facts:
                    found.add(dependent)
                    todo.append(dependent)
        return sorted(found, key=self.index.order_of.__getitem__)

    def _inherit(self, fold: FoldState, region: list[str]) -> None:
        """Phase 4 over ``region`` (log order), then the records of every fact that changed."""
        flag = self.policy.dependency_mode == "flag"
        recompute = self.policy.dependency_mode == "recompute"
        cycles: dict[str, int] = {}
        if recompute and any(fold.facts[f].event.derivation is not None for f in region):
            region = self._dependency_order(fold, region, cycles)
        changed: list[str] = []
        for fact_id in region:
            fact = fold.facts[fact_id]
            codes, origins, stale = inherit(
                fact, self.own[fact_id], self.origins, self.own, flag=flag, failed=self.failed
            )
            computed = None
            if recompute and fact.event.derivation is not None:
                codes, origins, computed = self._recompute(fold, fact, codes, origins, cycles)
            self.origins[fact_id] = origins
            if (
                fact_id in self.codes
                and self.codes[fact_id] == codes
                and self.recheck.get(fact_id) == stale
                and self.computed.get(fact_id) == computed
            ):
                continue
            if computed is None:
                self.computed.pop(fact_id, None)
            else:
                self.computed[fact_id] = computed
            if computed is None or computed.stale is None:
                self.restated.pop(fact_id, None)
            else:
                self.restated[fact_id] = computed.inputs.events
            self._walk_edge(fact_id, self.codes.get(fact_id), codes)
            self.codes[fact_id] = codes
            if stale is None:
                self.recheck.pop(fact_id, None)
                self.recheck_inputs.remove(fact_id)
            else:
                self.recheck[fact_id] = stale
                self.recheck_inputs.set(fact_id, (fact_id, tuple(sorted(stale))))
            self._record(fact, codes, stale is not None, computed)
            changed.append(fact_id)
        self._rejudge(changed)
        for key in {fold.facts[f].event.key for f in changed}:
            self._known_unknown(fold, key)

    def _dependency_order(
        self, fold: FoldState, region: list[str], cycles: dict[str, int]
    ) -> list[str]:
        """``region`` in the pure resolver's dependency order (what is outside it is final)."""
        reads = {
            f: [*(fold.facts[f].event.depends_on or ()), *reach(fold.facts[f], fold.facts, self.own.get)]
            for f in region
        }
        order, found = finishing_order(region, reads)
        cycles.update(found)
        return order

    def _recompute(
        self,
        fold: FoldState,
        fact: FactRecord,
        codes: Codes,
        origins: Origins,
        cycles: Mapping[str, int],
    ) -> tuple[Codes, Origins, Computed | None]:
        """The pure resolver's ``recomputed`` over the kept results: a fact of the same cycle
        is not settled (as in the pure resolver's dependency order)."""
        cycle = cycles.get(fact.id)

        def settled(x: str) -> Codes | None:
            if cycle is not None and cycles.get(x) == cycle:
                return None
            event = fold.facts[x].event
            if event.depends_on or event.derivation is not None:
                return self.codes.get(x)
            return self.own.get(x)

        def value_of(x: str) -> Value:  # of an admitted fact: never an erased one
            found = self.computed.get(x)
            if found is not None:
                return found.value
            value = fold.facts[x].event.value
            assert value is not None
            return value

        walked = set(reach(fact, fold.facts, self.own.get))  # what it may read: recomputed
        codes, origins, computed, failure = recomputed(  # when one of them moves
            fact, codes, origins, fold.facts, settled, value_of, walked=walked
        )
        for x in self.reads.pop(fact.id, ()):
            self.readers[x].discard(fact.id)
        if walked:
            self.reads[fact.id] = walked
            for x in walked:
                self.readers[x].add(fact.id)
        if failure is None:
            self.failed.pop(fact.id, None)
        else:
            self.failed[fact.id] = failure
        return codes, origins, computed

    def _record(
        self, fact: FactRecord, codes: Codes, recheck: bool, computed: Computed | None = None
    ) -> None:
        record = decision(fact, codes, recheck, self.policy, computed=computed)
        self.decided[fact.id] = record
        if isinstance(record, Admitted):
            self.admitted_ids.add(fact.id)
            self.admitted.set(fact.id, record)
            self.excluded.remove(fact.id)
            self.context.admit(record)
        else:
            if fact.id in self.admitted_ids:
                self.context.drop(fact.id)
            self.admitted_ids.discard(fact.id)
            self.excluded.set(fact.id, record)
            self.admitted.remove(fact.id)

    def _known_unknown(self, fold: FoldState, key: str) -> None:
        records = [fold.facts[f] for f in self.index.by_key.get(key, ())]
        if any(r.id not in self.codes for r in records):
            return  # decided when the whole key is
        unknown = known_unknown(records, self.codes, self.policy)
        if self.unknown_of.get(key) != unknown:
            self.context.unknown(key, unknown)
        self.unknown_of[key] = unknown
        if unknown:
            self.unknown.set(key, key)
        else:
            self.unknown.remove(key)

    # -- experiences -------------------------------------------------------------------

    def _walk_edge(self, fact_id: str, old: Codes | None, new: Codes) -> None:
        before = None if old is None else _replaced_by(old)
        after = _replaced_by(new)
        if before != after:
            if before is not None:
                self.walks_to[before].discard(fact_id)
            if after is not None:
                self.walks_to[after].add(fact_id)

    def _rejudge(self, changed: list[str]) -> None:
        """Forget the verdicts and walks that read a fact whose record changed."""
        reached = set(changed)
        todo = list(changed)
        while todo:
            for earlier in self.walks_to.get(todo.pop(), ()):
                if earlier not in reached:
                    reached.add(earlier)
                    todo.append(earlier)
        for fact_id in reached:
            self.memo.pop(fact_id, None)
            for i in self.uses_of.get(fact_id, ()):
                if i in self.verdicts:
                    self.verdict_table.remove((self.verdicts.pop(i).experience, i))
                self.unjudged.add(i)

    def take_experiences(self, experiences: list[Experience]) -> None:
        """Index the experiences folded since the last call."""
        for i in range(self.seen_experiences, len(experiences)):
            for used in dict.fromkeys(experiences[i].uses or ()):
                self.uses_of[used].append(i)
            self.unjudged.add(i)
        self.seen_experiences = len(experiences)

    def judge(self, experiences: list[Experience], which: Iterable[int] | None = None) -> None:
        """Verdicts for the experiences ``which`` (None: all unjudged); every fact they read
        must be computed (``ensure``)."""
        todo = sorted(self.unjudged if which is None else self.unjudged.intersection(which))
        for i in todo:
            verdict = verdict_of(
                experiences[i],
                self.codes,
                self.admitted_ids,
                self.recheck,
                memo=self.memo,
                restated=self.restated,
            )
            self.verdicts[i] = verdict
            self.verdict_table.set((verdict.experience, i), verdict)
            self.unjudged.discard(i)

    def walk_keys(self, fold: FoldState, fact_id: str) -> Iterator[str]:
        """The keys an experience's replacement walk from ``fact_id`` reaches, as it goes
        (the caller ensures each before the walk reads it)."""
        seen = set()
        current: str | None = fact_id
        while current is not None and current not in seen:
            seen.add(current)
            yield fold.facts[current].event.key
            current = _replaced_by(self.codes[current])

    def experiences_of(self, experiences: list[Experience], facts: AbstractSet[str]) -> list[int]:
        """The experiences using at least one fact, and only facts, of ``facts``."""
        found = {i for f in facts for i in self.uses_of.get(f, ())}
        return sorted(i for i in found if all(u in facts for u in experiences[i].uses or ()))
