"""The incremental state behind ``gamma.Engine``: a growing, validated log with its folds kept.

``EngineState`` holds every event accepted so far, the validation index they
were checked against, the chain head after each position, and per tenant the
fold of that tenant's events (the first pass of Γ, which does not depend on the
viewer), advanced one event at a time as events arrive. A resolution then runs
only the second pass (the phases of SPEC §3) over the actor's tenant, so it
costs the facts of that tenant, not the log; ``check`` and ``keys=`` run it over
the facts of the keys asked for, their dependency ancestors and those
ancestors' keys. Results are those of the pure ``resolve`` over every event
accepted so far, byte for byte; an ``at`` that cuts the tenant's events (or at
which a deferred ``valid_from`` effect is due) folds that prefix afresh.

No I/O here: ``gamma.storage.engine.Engine`` adds the store.
"""

from __future__ import annotations

import bisect
import copy
import gc
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from gamma.core.canonical import parse_at
from gamma.core.chain import GENESIS, step
from gamma.core.decisions import Admitted, Excluded
from gamma.core.errors import UnknownReferenceError
from gamma.core.events import (
    MemoryIndex,
    _with_canonical,
    batch_objects,
    canonical_event,
    event_from_json,
    normal_actor,
    validate_log,
)
from gamma.core.merkle import CompactRange, TreeHead, leaf_hash
from gamma.core.model import Actor, Assert, Event
from gamma.core.policy import DEFAULT_POLICY, Policy
from gamma.core.resolution import Resolution
from gamma.core.resolver import _HANDLERS, _conclude, _Fact, _Fold

__all__ = ["EngineState", "Batch", "Decision"]

Batch = Iterable[str | Mapping[str, Any] | Event] | str
"""What ``append`` takes: JSON lines (a str is split into lines), decoded objects or events."""

Decision = Admitted | Excluded
"""What ``check`` says of one fact: admitted, or excluded with its reasons."""

_NOBODY = Actor(id="-", tenant="-")  # the cached folds are viewer-independent


class _TenantFold:
    """One tenant's events (with their global positions) and the fold advanced through them."""

    def __init__(self, tenant: str, policy: Policy) -> None:
        self.events: list[tuple[int, Event]] = []
        self.fold = _Fold(attrs.evolve(_NOBODY, tenant=tenant), policy)
        self.by_key: dict[str, list[_Fact]] = {}
        self.order_of: dict[str, int] = {}
        self.through: datetime | None = None  # deferred effects due at or before it have run

    def add(self, pos: int, event: Event) -> None:
        self.events.append((pos, event))
        fold = self.fold
        fold.run_pending(event.ts)
        _HANDLERS[type(event)](fold, pos, event)  # type: ignore[operator]
        if isinstance(event, Assert):
            _index_fact(self.by_key, self.order_of, fold.facts[event.fact])
        if self.through is None or event.ts > self.through:
            self.through = event.ts


def _index_fact(by_key: dict[str, list[_Fact]], order_of: dict[str, int], fact: _Fact) -> None:
    by_key.setdefault(fact.event.key, []).append(fact)
    order_of[fact.id] = len(order_of)


@attrs.frozen
class _View:
    """A fold to conclude from, with its per-key index."""

    fold: _Fold
    by_key: dict[str, list[_Fact]]
    order_of: dict[str, int]


def _due_at(kept: _TenantFold, at: datetime) -> _Fold:
    """The kept fold with the deferred effects due by ``at`` run, leaving the kept fold as it is.

    Those effects touch only the due facts, their ``supersedes`` targets and
    the live facts of their key and scope: those records (and slot lists) are
    copied before the effects run on them.
    """
    fold = kept.fold
    due = [fold.facts[fact_id] for start, _, fact_id in fold.pending if start <= at]
    touched: dict[str, _Fact] = {}
    slots = {}
    for fact in due:
        touched[fact.id] = fact
        for target in fact.event.supersedes or ():
            touched[target] = fold.facts[target]
        slot = (fact.event.key, fact.scope)
        slots[slot] = fold.live_by_slot.get(slot, [])
        for other in slots[slot]:
            touched[other.id] = other
    view = copy.copy(fold)
    view.facts = dict(fold.facts)
    view.order = list(fold.order)
    copies = {fact_id: copy.copy(fact) for fact_id, fact in touched.items()}
    for fact_id, fresh in copies.items():
        view.facts[fact_id] = fresh
        view.order[kept.order_of[fact_id]] = fresh
    view.live_by_slot = copy.copy(fold.live_by_slot)
    for slot, members in slots.items():
        view.live_by_slot[slot] = [copies[f.id] for f in members]
    view.pending = list(fold.pending)
    view.ignored = set(fold.ignored)
    view.run_pending(at)
    return view


class EngineState:
    """Validated events, the chain heads and Merkle leaves after each, and per-tenant folds."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or DEFAULT_POLICY
        self.index = MemoryIndex()
        self.events: list[Event] = []
        self._ts: list[datetime] = []
        self._heads: list[bytes] = [GENESIS]
        self._leaves: list[bytes] = []  # RFC 9162 leaf hashes, for the tree head of a prefix
        self._tree = CompactRange()
        self._tenants: dict[str, _TenantFold] = {}

    # -- the log -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.events)

    @property
    def head(self) -> str:
        """The chain head after the last event (64 zeros when empty)."""
        return self._heads[-1].hex()

    def head_at(self, at: datetime) -> str:
        """The chain head after the events with ``ts <= at``."""
        return self._heads[bisect.bisect_right(self._ts, at)].hex()

    def tree_at(self, at: datetime) -> TreeHead:
        """The Merkle tree head of the events with ``ts <= at`` (O(1) after the last event)."""
        size = bisect.bisect_right(self._ts, at)
        if size == len(self._leaves):
            return self._tree.head()
        prefix = CompactRange()
        for leaf in self._leaves[:size]:
            prefix.append(leaf)
        return prefix.head()

    def parse(self, batch: Batch, *, source: str = "<append>") -> list[Event]:
        """Decode and check a batch against everything accepted (SPEC §2); nothing changes.

        Lines are numbered from 1 within the batch (blank lines count, and are skipped).
        """
        parsed: list[tuple[int | None, Event]] = []
        for number, obj, from_text in batch_objects(batch, source=source):
            event = event_from_json(obj, policy=self.policy, source=source, line=number)
            if from_text:  # its canonical text is the decoded object's, made once here
                event = _with_canonical(event, obj)
            parsed.append((number, event))
        validate_log(parsed, index=self.index, source=source)
        return [event for _, event in parsed]

    def extend(self, events: Sequence[Event], *, heads: Sequence[bytes] | None = None) -> None:
        """Take events already validated against this state, in order.

        ``heads`` may give the chain head after each event when the caller has
        computed them (a store checking its rows), so nothing is hashed twice.
        """
        for i, event in enumerate(events):
            pos = len(self.events)
            self.index.add(event)
            self.events.append(event)
            self._ts.append(event.ts)
            canonical = canonical_event(event)
            self._heads.append(heads[i] if heads is not None else step(self._heads[-1], canonical))
            leaf = leaf_hash(canonical.encode("utf-8"))
            self._leaves.append(leaf)
            self._tree.append(leaf)
            tenant = self._tenants.get(event.tenant)
            if tenant is None:
                tenant = self._tenants[event.tenant] = _TenantFold(event.tenant, self.policy)
            tenant.add(pos, event)

    def append(self, batch: Batch, *, source: str = "<append>") -> int:
        """Validate and take a batch, all of it or none of it; returns the new position."""
        self.extend(self.parse(batch, source=source))
        return len(self.events)

    # -- Γ -----------------------------------------------------------------------------

    def resolve(
        self,
        actor: Actor | Mapping[str, object],
        at: datetime | str,
        *,
        keys: Iterable[str] | None = None,
    ) -> Resolution:
        """Γ over every event accepted, for ``actor`` at ``at``; ``keys`` keeps those keys' facts."""
        actor, at = self._normalise(actor, at)
        view = self._view(actor.tenant, at)
        head = self.head_at(at)
        if keys is None:
            fold = copy.copy(view.fold)
            fold.ignored = set(view.fold.ignored)  # concluding adds key-grant entries
            return self._conclude(fold, actor, at, head)
        wanted = frozenset(keys)
        facts = self._closure(view, wanted)
        in_keys = {f.id for f in facts if f.event.key in wanted}
        fold = self._sub_fold(view.fold, facts)
        fold.experiences = [
            x for x in view.fold.experiences if all(u in in_keys for u in x.uses or ())
            and any(u in in_keys for u in x.uses or ())
        ]
        fold.ignored = {i for i in view.fold.ignored if i[2] in in_keys}
        fold.key_grant_events = [g for g in view.fold.key_grant_events if g[1] in wanted]
        full = self._conclude(fold, actor, at, head)
        return attrs.evolve(
            full,
            admitted=tuple(a for a in full.admitted if a.fact in in_keys),
            excluded=tuple(x for x in full.excluded if x.fact in in_keys),
            known_unknowns=tuple(k for k in full.known_unknowns if k in wanted),
            recheck_inputs=tuple(r for r in full.recheck_inputs if r[0] in in_keys),
        )

    def check(
        self, actor: Actor | Mapping[str, object], at: datetime | str, facts: Iterable[str]
    ) -> dict[str, Decision]:
        """The decision ``resolve`` gives each fact, in the order asked, without the whole resolution.

        A fact its tenant has not asserted by ``at`` is an UnknownReferenceError (field ``facts``).
        """
        actor, at = self._normalise(actor, at)
        view = self._view(actor.tenant, at)
        asked = list(dict.fromkeys(facts))
        keys = set()
        for index, fact_id in enumerate(asked):
            fact = view.fold.facts.get(fact_id)
            if fact is None:
                raise UnknownReferenceError(
                    f"fact {fact_id!r} is not asserted in tenant {actor.tenant!r} by {at.isoformat()}",
                    field=f"facts[{index}]",
                )
            keys.add(fact.event.key)
        fold = self._sub_fold(view.fold, self._closure(view, keys))
        fold.experiences, fold.ignored, fold.key_grant_events = [], set(), []
        result = self._conclude(fold, actor, at, self.head_at(at))
        found: dict[str, Decision] = {a.fact: a for a in result.admitted}
        found.update((x.fact, x) for x in result.excluded)
        return {fact_id: found[fact_id] for fact_id in asked}

    # -- helpers -----------------------------------------------------------------------

    def _normalise(
        self, actor: Actor | Mapping[str, object], at: datetime | str
    ) -> tuple[Actor, datetime]:
        """The actor and time as ``gamma.resolve`` takes them."""
        return normal_actor(actor, self.policy), parse_at(at)

    def _view(self, tenant: str, at: datetime) -> _View:
        """The tenant's fold at ``at``: the kept one when it is that prefix, else a fresh fold."""
        kept = self._tenants.get(tenant)
        if kept is None:
            return _View(_Fold(attrs.evolve(_NOBODY, tenant=tenant), self.policy), {}, {})
        last = kept.events[-1][1].ts
        assert kept.through is not None
        if last <= at:
            # effects due before the log's last ts would run before any later event too
            until = min(at, self._ts[-1])
            if until >= kept.through:
                kept.fold.run_pending(until)
                kept.through = until
            if kept.through <= at:
                pending = kept.fold.pending
                if not (pending and pending[0][0] <= at):
                    return _View(kept.fold, kept.by_key, kept.order_of)
                return _View(_due_at(kept, at), kept.by_key, kept.order_of)
        fold = _Fold(attrs.evolve(_NOBODY, tenant=tenant), self.policy)
        by_key: dict[str, list[_Fact]] = {}
        order_of: dict[str, int] = {}
        for pos, event in kept.events:
            if event.ts > at:
                break
            fold.run_pending(event.ts)
            _HANDLERS[type(event)](fold, pos, event)  # type: ignore[operator]
            if isinstance(event, Assert):
                _index_fact(by_key, order_of, fold.facts[event.fact])
        fold.run_pending(at)
        return _View(fold, by_key, order_of)

    @staticmethod
    def _closure(view: _View, keys: Iterable[str]) -> list[_Fact]:
        """The facts of ``keys``, their dependency ancestors and every fact of those keys, in log order.

        Everything a decision about a fact of ``keys`` reads: its key's rivals
        (precedence) and, transitively, its inputs and theirs.
        """
        seen: set[str] = set()
        todo = list(keys)
        found: list[_Fact] = []
        while todo:
            key = todo.pop()
            if key in seen:
                continue
            seen.add(key)
            for kept in view.by_key.get(key, ()):
                fact = view.fold.facts[kept.id]  # the fold's own record (a copy when effects ran)
                found.append(fact)
                for dep in fact.event.depends_on or ():
                    dep_key = view.fold.facts[dep].event.key
                    if dep_key not in seen:
                        todo.append(dep_key)
        found.sort(key=lambda f: view.order_of[f.id])
        return found

    @staticmethod
    def _sub_fold(fold: _Fold, facts: list[_Fact]) -> _Fold:
        sub = copy.copy(fold)
        sub.order = facts
        return sub

    def _conclude(self, fold: _Fold, actor: Actor, at: datetime, head: str) -> Resolution:
        tree = self.tree_at(at)
        fold.actor = actor
        fold.grantees = _Fold(actor, self.policy).grantees
        # The records built here are acyclic; with the whole log alive, each cyclic
        # collection the allocations trigger walks every object the engine holds,
        # which costs more than the phases themselves. Paused, then restored.
        paused = gc.isenabled()
        gc.disable()
        try:
            return _conclude(fold, actor, at, self.policy, head, tree)
        finally:
            if paused:
                gc.enable()
