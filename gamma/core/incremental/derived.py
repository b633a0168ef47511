"""What the engine keeps between calls: per tenant an index of its facts, and per
(tenant, actor class) the phases' results, by key, at the last ``at`` asked.

``TenantIndex`` knows, for one fold, each key's facts in log order, each fact's
dependents, the key-wide grants of each key and the times at which a fact's
validity flips (``valid_from``, ``valid_until``). ``Derived`` holds, for one class
of actors, every computed fact's own codes (phases 1-3, per key), its final codes
and origins (phase 4, per fact), its record in the resolution, each key's known
unknown and each experience's verdict. The engine tells it which keys changed
(``invalidate``); ``ensure`` recomputes only those keys and the dependents of the
facts whose own codes moved, as far as their inputs moved (``_moved_region``), and
computes keys never asked before on demand,
each with its dependency ancestors' keys. Every unit is the one the pure
resolver runs (``gamma.core.resolving.phases``), so the results are the same bytes.
"""

from __future__ import annotations

import bisect
import heapq
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
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
    listed,
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
from gamma.core.terms.model import (
    Actor,
    Assert,
    Event,
    Experience,
    Grant,
    Revoke,
    Value,
    Visibility,
)
from gamma.core.terms.policy import Policy

__all__ = ["Derived", "Table", "TenantIndex", "actor_class"]

K = TypeVar("K", str, tuple[str, int], tuple[str, str, str])
V = TypeVar("V")
_moving_key = operator.itemgetter(0)  # a pending change's key (``Table._flush``)


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

    def copy(self) -> Table[K, V]:
        """An independent table with the same values (a class forked from another)."""
        other: Table[K, V] = Table()
        other._keys, other._values = list(self._keys), list(self._values)
        other._pending, other._tuple = dict(self._pending), self._tuple
        return other

    def values(self) -> tuple[V, ...]:
        if self._tuple is None:
            self._flush()
            self._tuple = tuple(self._values)
        return self._tuple

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        keys, values = self._keys, self._values
        if len(pending) > 32 and len(pending) * 2 > len(keys):
            self._merge(pending)
            return
        # a value replaced in place keeps the order: only entries coming or going move others.
        # Each is bisected once: applied from the greatest key down, an insertion or removal
        # moves only entries at or after its place, never the place of a smaller key.
        moving: list[tuple[K, int, V | None]] = []
        for key, value in pending.items():
            i = bisect.bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                if value is None:
                    moving.append((key, i, None))
                else:
                    values[i] = value
            elif value is not None:  # (removing what is not there: nothing to do)
                moving.append((key, i, value))
        if len(moving) > 32 and len(moving) * 16 > len(keys):
            self._merge({key: value for key, _, value in moving})
            return
        moving.sort(key=_moving_key, reverse=True)
        for key, i, value in moving:
            if value is None:
                del keys[i], values[i]
            else:
                keys.insert(i, key)
                values.insert(i, value)

    def _merge(self, pending: dict[K, V | None]) -> None:
        """Many changes at once: one sort."""
        merged: dict[K, V | None] = dict(zip(self._keys, self._values, strict=True))
        merged.update(pending)
        self._keys = sorted(k for k, v in merged.items() if v is not None)
        self._values = [v for k in self._keys if (v := merged[k]) is not None]


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
        # what of a fact an actor's class reads (``Derived.fork``): its scope and its
        # visibility rule, each with its facts
        self.scope_facts: dict[str, list[str]] = defaultdict(list)
        self.rule_facts: dict[Visibility | None, list[str]] = defaultdict(list)

    def add(self, event: Event, fold: FoldState, grants_before: int) -> None:
        """Index ``event`` just folded (``grants_before``: len(key_grant_events) before it)."""
        if isinstance(event, Assert):
            self.by_key.setdefault(event.key, []).append(event.fact)
            self.scope_facts[fold.facts[event.fact].scope].append(event.fact)
            self.rule_facts[event.visibility].append(event.fact)
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


Part = TypeVar("Part", list[int], set[str])


def _mine(table: dict[str, Part], owned: set[str], name: str, make: Callable[..., Part]) -> Part:
    """``table[name]``, made or copied first unless this object made it (``owned``)."""
    found = table.get(name)
    if found is None or name not in owned:
        found = table[name] = make(found or ())
        owned.add(name)
    return found


def _differing(
    derived: Derived, fold: FoldState, donor: Actor, actor: Actor
) -> tuple[set[str], set[str]]:
    """What of ``derived`` (made for ``donor``) may differ for ``actor`` (``Derived.fork``):
    the keys to compute again, and the facts whose own codes but for their scope and
    visibility codes are the same (``_class_codes``)."""
    index, own, policy = derived.index, derived.own, derived.policy
    mine, theirs = Access(fold, actor), Access(fold, donor)
    keys: set[str] = set()
    facts: set[str] = set()
    # the grantees one of them has and not the other (``Access.events``: a grant to one
    # they share reaches both alike)
    grantees = set(mine.grantees) ^ set(theirs.grantees)
    by_fact, by_key = fold.fact_access, fold.key_access
    for scope, found in index.scope_facts.items():
        if mine.in_scope(scope) != theirs.in_scope(scope):
            for fact_id in found:
                codes = own.get(fact_id)
                if codes is None or codes.keys() <= _CLASS_CODES:  # a candidate of one of them
                    keys.add(fold.facts[fact_id].event.key)  # its key's precedence may move
                else:
                    facts.add(fact_id)
    for rule, found in index.rule_facts.items():
        level = None if rule is None else rule.clearance
        answer = (listed(rule, actor), mine.clears(level, policy))
        if answer != (listed(rule, donor), theirs.clears(level, policy)):
            facts.update(found)  # a grant they share may let one see and not the other
        elif not all(answer):  # the rule alone denies both: a grant to one of them only may
            for fact_id in found:  # let that one see, or name another event
                key = fold.facts[fact_id].event.key
                if any((fact_id, g) in by_fact or (key, g) in by_key for g in grantees):
                    facts.add(fact_id)
    return keys, facts


def _class_codes(fact: FactRecord, own: Codes, access: Access, policy: Policy) -> Codes:
    """A fact's own codes for another class whose scope answer changes nothing of its key's
    precedence: its codes but the class's two, then those two as ``own_codes`` adds them."""
    codes = {c: r for c, r in own.items() if c not in _SEEN_CODES}
    if not access.in_scope(fact.scope):
        codes["out_of_scope"] = Reason("out_of_scope", (fact.event.id,))
    named = access.denial(fact, policy)
    if named is not None:
        codes["access_denied"] = Reason("access_denied", named)
    return codes


def _replaced_by(codes: Codes) -> str | None:
    """The fact an experience's replacement walk goes to from a fact with ``codes``."""
    if not codes or not codes.keys() <= SUBSTITUTING_CODES:
        return None
    for code in ("superseded", "outranked", "overridden"):
        if code in codes and codes[code].facts:
            return codes[code].facts[0]
    return None


#: A key with more facts than this keeps each fact's own inputs (``Derived.inputs``), so
#: that a call skips the facts of the key whose own codes cannot have moved.
LONG_KEY = 8

#: The share of a tenant's facts past which a new class is computed afresh rather than
#: forked from another's results (each fact a fork computes again costs about what computing
#: it afresh does, and the fork copies the results besides).
FORK_MOST = 0.5

#: The codes a candidate for precedence may have (any other: it is none).
_CANDIDATE_CODES = frozenset({"outranked", "overridden", "access_denied"})

#: The own codes that read the actor's class: its scope's and its visibility's.
_SEEN_CODES = frozenset({"out_of_scope", "access_denied"})

#: The own codes a fact may have and still be a candidate for precedence for some class.
_CLASS_CODES = _CANDIDATE_CODES | _SEEN_CODES


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
        self.uses_of: dict[str, list[int]] = {}
        self.verdicts: dict[int, ExperienceVerdict] = {}
        self.verdict_table: Table[tuple[str, int], ExperienceVerdict] = Table()
        self.unjudged: set[int] = set()
        self.walks_to: dict[str, set[str]] = {}  # g -> facts whose walk steps to g
        # the entries of ``uses_of`` and ``walks_to`` this object made, and so may change in
        # place; the others it shares with the results it was forked from or to (``fork``)
        self.owned_uses: set[str] = set()
        self.owned_walks: set[str] = set()
        self.memo: dict[str, str | None] = {}
        # recompute mode: each derived fact's computed value or failure, the facts its last
        # evaluation read, and per fact the derived facts that read it
        self.computed: dict[str, Computed] = {}
        self.restated: dict[str, tuple[str, ...]] = {}  # computed with another value than stated
        self.failed: dict[str, Reason] = {}
        self.reads: dict[str, set[str]] = {}
        self.readers: dict[str, set[str]] = defaultdict(set)
        self.actor: Actor | None = None  # the last actor of the class asked (``fork``)
        self.refresh: set[str] = set()  # facts whose class codes only to compute (``fork``)

    def fork(self, fold: FoldState, actor: Actor) -> Derived | None:
        """These results made the starting point of another class of the same tenant: a copy
        (sharing only immutable values) whose keys ``actor`` may see otherwise are dirty.

        A fact's own codes read of the class only whether its scope contains the actor's
        (``out_of_scope``, and so its key's candidates for precedence) and whether its
        visibility rule or a grant lets the actor see it (``access_denied``); every other
        code, and phase 4's, follows from the own codes. So the keys with a fact of a scope
        the two classes answer differently, or of a visibility rule they answer differently,
        or of a rule both fail whose key some grant or revoke names, are all that can
        differ: ``ensure`` computes them again and, from the facts whose own codes moved,
        their dependents, as for an append. The viewer-independent rest (validity,
        precedence where scope agrees, the records of facts that no difference reaches,
        their context lines, the key-wide grants' ignored entries, experiences' verdicts)
        is shared. None when the two differ in more than ``FORK_MOST`` of the facts (a scope
        apart: most facts' ``out_of_scope``): computing the class afresh is then cheaper."""
        assert self.actor is not None and self.complete
        keys, refresh = _differing(self, fold, self.actor, actor)
        by_key = self.index.by_key
        if len(refresh) + sum(len(by_key.get(k, ())) for k in keys) > FORK_MOST * len(self.own):
            return None
        other = Derived(self.policy, self.index)
        other.at, other.version = self.at, self.version
        other.overlay, other.due = self.overlay, self.due
        other.done, other.dirty, other.complete = set(self.done), set(self.dirty), True
        other.own, other.inputs = dict(self.own), dict(self.inputs)
        other.codes, other.origins = dict(self.codes), dict(self.origins)
        other.recheck, other.decided = dict(self.recheck), dict(self.decided)
        other.admitted_ids = set(self.admitted_ids)
        other.admitted, other.excluded = self.admitted.copy(), self.excluded.copy()
        other.recheck_inputs = self.recheck_inputs.copy()
        other.unknown_of, other.unknown = dict(self.unknown_of), self.unknown.copy()
        other.context = self.context.copy()
        other.key_ignored = dict(self.key_ignored)
        other.ignored_table, other.ignored_seen = self.ignored_table.copy(), self.ignored_seen
        other.extras = self.extras
        other.seen_experiences = self.seen_experiences
        other.uses_of, other.walks_to = dict(self.uses_of), dict(self.walks_to)
        self.owned_uses, self.owned_walks = set(), set()  # shared from now on: copied on change
        other.verdicts, other.verdict_table = dict(self.verdicts), self.verdict_table.copy()
        other.unjudged = set(self.unjudged)
        other.memo = dict(self.memo)
        other.computed, other.restated = dict(self.computed), dict(self.restated)
        other.failed, other.reads = dict(self.failed), dict(self.reads)
        other.readers = defaultdict(set, {f: set(r) for f, r in self.readers.items()})
        other.actor, other.refresh = actor, refresh
        for key in keys:  # their facts' own codes are the class's own: none is known
            for fact_id in self.index.by_key.get(key, ()):
                other.inputs.pop(fact_id, None)
        other.invalidate(keys)
        return other

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
        if not wanted and not self.refresh:
            return
        access = Access(fold, actor)
        moved: list[str] = []
        if self.refresh:  # a fork's facts whose key is not computed again
            refresh, self.refresh = self.refresh, set()
            own = self.own
            for fact_id in refresh:
                fact = fold.facts[fact_id]
                if fact.event.key in wanted:  # computed with its key: not skipped as known
                    self.inputs.pop(fact_id, None)
                    continue
                codes = _class_codes(fact, own[fact_id], access, self.policy)
                if codes != own[fact_id]:
                    own[fact_id] = codes
                    moved.append(fact_id)
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
        if self.policy.dependency_mode == "recompute" and index.derivations:
            self._inherit(fold, self._descendants(fold, moved))
        else:
            self._inherit(fold, self._moved_region(fold, moved))

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
            if not codes.keys() <= _CANDIDATE_CODES:  # a code of its own record or scope
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

    def _moved_region(self, fold: FoldState, moved: list[str]) -> Iterator[str]:
        """``moved`` and the computed facts whose phase 4 may differ for it, in log order; the
        walk stops at a fact whose inputs did not move (no derivation to recompute).

        ``inherit`` reads of a fact only its own codes, its direct dependencies' origins and
        the own codes of those origins. So a dependent is walked only when the fact it
        depends on has moved own codes, has origins other than before this call, or has an
        origin whose own codes moved (a moved ancestor it passes on): otherwise none of the
        dependent's inputs moved, nor (by the same rule) those of anything past it, and its
        codes, origins and record stay as they are. Each fact is yielded before the caller
        stores its new origins, so they are compared with the old ones after it resumes."""
        order_of = self.index.order_of
        own_moved = set(moved)
        heap = [(order_of[f], f) for f in own_moved]
        heapq.heapify(heap)
        queued = set(own_moved)
        while heap:
            fact_id = heapq.heappop(heap)[1]
            before = self.origins.get(fact_id)
            yield fact_id
            after = self.origins.get(fact_id)
            if (
                fact_id not in own_moved
                and after == before
                and not (after is not None and any(o in own_moved for o in after if o is not None))
            ):
                continue  # nothing a dependent reads of it moved
            for dependent in self.index.dependents.get(fact_id, ()):
                if dependent not in queued and dependent in self.own and dependent in fold.facts:
                    queued.add(dependent)
                    heapq.heappush(heap, (order_of[dependent], dependent))

    def _inherit(self, fold: FoldState, region: Iterable[str]) -> None:
        """Phase 4 over ``region`` (log order; a list when derivations are recomputed, else
        possibly the lazy ``_moved_region``), then the records of every fact that changed."""
        flag = self.policy.dependency_mode == "flag"
        recompute = self.policy.dependency_mode == "recompute"
        cycles: dict[str, int] = {}
        if isinstance(region, list) and recompute and any(
            fold.facts[f].event.derivation is not None for f in region
        ):
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
                if self.recheck.pop(fact_id, None) is not None:  # its row, if it had one
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
        """Keep the fact's record: a fact is in ``admitted`` or ``excluded`` (and
        ``admitted_ids``) as its record in ``decided`` is, so only a record changing side is
        removed from the other table (a removal of what is not there costs a bisection)."""
        record = decision(fact, codes, recheck, self.policy, computed=computed)
        before = self.decided.get(fact.id)
        self.decided[fact.id] = record
        if isinstance(record, Admitted):
            self.admitted_ids.add(fact.id)
            self.admitted.set(fact.id, record)
            if isinstance(before, Excluded):
                self.excluded.remove(fact.id)
            self.context.admit(record)
        else:
            if fact.id in self.admitted_ids:
                self.context.drop(fact.id)
                self.admitted_ids.discard(fact.id)
                self.admitted.remove(fact.id)
            self.excluded.set(fact.id, record)

    def _known_unknown(self, fold: FoldState, key: str) -> None:
        """Whether the key is a known unknown now. ``known_unknown`` answers of the key's facts
        as a set (it stops at an admitted one): they are read newest first, lazily, since a
        key's admitted fact is most often its latest."""
        ids = self.index.by_key.get(key, ())
        if not self.complete and any(f not in self.codes for f in ids):
            return  # decided when the whole key is (every key computed: each has its codes)
        facts = fold.facts
        unknown = known_unknown((facts[f] for f in reversed(ids)), self.codes, self.policy)
        if self.unknown_of.get(key) != unknown:
            self.context.unknown(key, unknown)
            if unknown:
                self.unknown.set(key, key)
            else:
                self.unknown.remove(key)
        self.unknown_of[key] = unknown

    # -- experiences -------------------------------------------------------------------

    def _walk_edge(self, fact_id: str, old: Codes | None, new: Codes) -> None:
        before = None if old is None else _replaced_by(old)
        after = _replaced_by(new)
        if before != after:
            if before is not None:
                _mine(self.walks_to, self.owned_walks, before, set).discard(fact_id)
            if after is not None:
                _mine(self.walks_to, self.owned_walks, after, set).add(fact_id)

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
                _mine(self.uses_of, self.owned_uses, used, list).append(i)
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
