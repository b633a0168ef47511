"""The incremental state behind ``gamma.Engine``: a growing, validated log with its folds kept.

``EngineState`` holds every event accepted so far, the validation index they
were checked against, the chain head and Merkle leaf after each position, and
per tenant the fold of that tenant's events (the first pass of Γ, which does not
depend on the viewer), advanced one event at a time when the tenant is next asked about
(a tenant no one asks about keeps its events only), with a journal of the keys
each step touched (``gamma.core.incremental.tenants``). The phases (SPEC §4) are kept too, per class of actors
(``gamma.core.incremental.derived``): a call reruns them only for the keys touched since
that class last asked (by appends, by deferred effects, or by moving ``at``
across a fact's ``valid_from``/``valid_until``), the dependents of the facts
whose codes moved, and keys never asked before. ``check`` and ``keys=`` compute
only the keys asked, their dependency ancestors' keys and their grants. A class asked for
the first time (whole) starts from another class's results of its tenant (``Derived.fork``):
the viewer-independent part (validity, precedence where the scopes agree, every record no
difference of scope, visibility or grant reaches) is shared, and only what the two classes
see otherwise is computed again, as for an append. Each class keeps
its context block's lines too (``gamma.core.resolving.context``): a call renders again only the lines
of the facts whose records it changed, and the resolution carries them, immutable, for
``render("context")`` to join.

Results are those of the pure ``resolve`` over every event accepted so far,
byte for byte; an ``at`` that cuts the tenant's events folds that prefix afresh.
No I/O here: ``gamma.storage.engine.Engine`` adds the store.

Every public method holds ``lock`` (re-entrant) for the whole call: reads advance the
kept folds and fill the per-class caches, so a read is a writer too, and one lock is the
scheme that cannot tear them; uncontended it costs well under a microsecond a call
(SPEC §9.9). A resolution, once returned, is immutable and shares nothing mutable with
the state, so rendering and encoding it need no lock.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from gamma.core.incremental.derived import Derived, Table, TenantIndex, actor_class
from gamma.core.incremental.tenants import TenantFold
from gamma.core.integrity.chain import GENESIS, step_bytes
from gamma.core.integrity.merkle import CompactRange, TreeHead, leaf_hash
from gamma.core.reading.events import canonical_event, normal_actor
from gamma.core.reading.logcheck import MemoryIndex, validate_log
from gamma.core.reading.reader import decode_batch
from gamma.core.resolving.phases import FactRecord, conclude
from gamma.core.resolving.resolution import Resolution
from gamma.core.resolving.resolver import Fold, fold_event, new_fold
from gamma.core.terms.caches import remember
from gamma.core.terms.canonical import parse_at
from gamma.core.terms.decisions import Admitted, Excluded, Ignored
from gamma.core.terms.errors import UnknownReferenceError
from gamma.core.terms.model import Actor, Erase, Event
from gamma.core.terms.policy import DEFAULT_POLICY, Policy

__all__ = ["EngineState", "Batch", "Decision"]

Batch = Iterable[str | Mapping[str, Any] | Event] | str
"""What ``append`` takes: JSON lines (a str is split into lines), decoded objects or events."""

Decision = Admitted | Excluded
"""What ``check`` says of one fact: admitted, or excluded with its reasons."""

#: The bytes of a SHA-256 digest: a chain head or a Merkle leaf hash.
HASH = 32

#: How many actor classes keep their phases' results (least recently asked dropped first).
CLASSES_KEPT = 64

Kept = TypeVar("Kept")

class EngineState:
    """Validated events, the chain heads and Merkle leaves after each, and per-tenant folds.

    Safe to share between threads: each public call runs under ``lock``, whole.
    """

    def __init__(self, policy: Policy | None = None) -> None:
        #: held by every public method for the whole call; a caller holding it sees no
        #: change in between its calls (it is re-entrant)
        self.lock = threading.RLock()
        self.policy = policy or DEFAULT_POLICY
        self.index = MemoryIndex()
        self.events: list[Event] = []
        self._ts: list[datetime] = []
        # the chain head after each position (GENESIS first) and each event's RFC 9162 leaf
        # hash (for the tree head of a prefix), packed 32 bytes each: a bytes object a digest
        # costs 65 bytes and its list slot 8 (issue 28: memory)
        self._heads = bytearray(GENESIS)
        self._leaves = bytearray()
        self._tree = CompactRange()
        self._tenants: dict[str, TenantFold] = {}
        self._classes: OrderedDict[tuple[object, ...], Derived] = OrderedDict()
        # what ``_normalise`` made of the actor objects and time strings asked about
        self._actors: dict[tuple[tuple[str, type, object], ...], Actor] = {}
        self._times: dict[str, datetime] = {}

    # -- the log -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.events)

    @property
    def head(self) -> str:
        """The chain head after the last event (64 zeros when empty)."""
        with self.lock:
            return self._heads[-HASH:].hex()

    def head_at(self, at: datetime) -> str:
        """The chain head after the events with ``ts <= at``."""
        with self.lock:
            return self._head(bisect.bisect_right(self._ts, at))

    @property
    def tree_head(self) -> TreeHead:
        """The Merkle tree head of every event taken (RFC 9162; O(1))."""
        with self.lock:
            return self._tree.head()

    def since(self, position: int) -> tuple[Event, ...]:
        """The events after the first ``position``, in log order (only those are copied)."""
        with self.lock:
            return tuple(self.events[position:])

    def tree_at(self, at: datetime) -> TreeHead:
        """The Merkle tree head of the events with ``ts <= at`` (O(1) after the last event)."""
        with self.lock:
            return self._tree_at(at)

    def _tree_at(self, at: datetime) -> TreeHead:
        size = bisect.bisect_right(self._ts, at)
        if size == len(self.events):
            return self._tree.head()
        prefix = CompactRange()
        leaves = self._leaves
        for start in range(0, HASH * size, HASH):
            prefix.append(bytes(leaves[start : start + HASH]))
        return prefix.head()

    def _head(self, size: int) -> str:
        """The chain head after the first ``size`` events, in hex."""
        return self._heads[HASH * size : HASH * (size + 1)].hex()

    def parse(self, batch: Batch, *, source: str = "<append>") -> list[Event]:
        """Decode and check a batch against everything accepted (SPEC §2); nothing changes.

        Lines are numbered from 1 within the batch (blank lines count, and are skipped).
        """
        parsed = self._decode(batch, source)
        with self.lock:
            validate_log(parsed, index=self.index, source=source)
        return [event for _, event in parsed]

    def _decode(self, batch: Batch, source: str) -> list[tuple[int | None, Event]]:
        """Each item of the batch as an event, with its line; reads nothing of the state."""
        return decode_batch(batch, policy=self.policy, source=source)

    def extend(self, events: Sequence[Event], *, heads: Sequence[bytes] | None = None) -> None:
        """Take events already validated against this state, in order.

        ``heads`` may give the chain head after each event when the caller has
        computed them (a store checking its rows), so nothing is hashed twice.
        """
        with self.lock:
            self._extend(events, heads)

    def _extend(self, events: Sequence[Event], heads: Sequence[bytes] | None) -> None:
        for i, event in enumerate(events):
            pos = len(self.events)
            self.index.add(event)
            self.events.append(event)
            self._ts.append(event.ts)
            data = canonical_event(event).encode("utf-8")  # what the chain and the tree hash
            # the text is hashed here and never read again by the engine: the event keeps none
            # (``canonical_event`` makes it again for whoever asks; issue 28: memory)
            event.keep_canonical(None)
            if heads is None:
                self._heads += step_bytes(bytes(self._heads[-HASH:]), data)
            else:
                self._heads += heads[i]
            leaf = leaf_hash(data)
            self._leaves += leaf
            self._tree.append(leaf)
            tenant = self._tenants.get(event.tenant)
            if tenant is None:
                tenant = self._tenants[event.tenant] = TenantFold(event.tenant, self.policy)
            tenant.add(pos, event)
            if isinstance(event, Erase):
                self._forget(tenant, event)

    def _forget(self, tenant: TenantFold, erase: Erase) -> None:
        """Applying an erase (SPEC §21): the erased asserts become value-less copies in every
        list kept (the tenant's fold did its own), and the phases kept per class are dropped,
        so no record made before (an admitted value, a value derived from it) survives; the
        next call computes them afresh, at whatever ``at``. (The tenant folded the erase at
        once: ``TenantFold.add``.)"""
        facts = tenant.fold.facts
        for item in erase.erased:
            self.events[tenant.fold.positions[item.fact]] = facts[item.fact].event
        self._classes.clear()

    def append(self, batch: Batch, *, source: str = "<append>") -> int:
        """Validate and take a batch, all of it or none of it; returns the new position."""
        return self.take(batch, source=source)[1]

    def take(self, batch: Batch, *, source: str = "<append>") -> tuple[int, int, str]:
        """``append``, returning how many events it took, the new position and the new head
        (all three of the same moment, whatever other threads do)."""
        parsed = self._decode(batch, source)  # outside the lock: other calls go on meanwhile
        with self.lock:  # validated against the very events it joins, none taken in between
            validate_log(parsed, index=self.index, source=source)
            self._extend([event for _, event in parsed], None)
            return len(parsed), len(self.events), self._heads[-HASH:].hex()

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
        with self.lock:
            return self._resolve(actor, at, keys)

    def _resolve(self, actor: Actor, at: datetime, keys: Iterable[str] | None) -> Resolution:
        head = self._head(bisect.bisect_right(self._ts, at))
        view = self._view(actor, at, keys is None)
        if view is None:  # a prefix of the tenant: folded afresh
            fold, index = self._fresh(actor.tenant, at)
            if keys is None:
                return conclude(fold, actor, at, self.policy, head, self._tree_at(at))
            derived = Derived(self.policy, index)
            derived.take_experiences(fold.experiences)
            return self._part(derived, fold, None, actor, at, head, frozenset(keys))
        kept, fold, derived = view
        if keys is not None:
            return self._part(derived, fold, kept, actor, at, head, frozenset(keys))
        derived.ensure(fold, actor, at)
        derived.judge(fold.experiences)
        body = derived.context_body()  # the context block kept rendered, joined on render
        positions, reasons = kept.tables()
        return Resolution(
            actor=actor,
            at=at,
            policy=self.policy.digest,
            log=head,
            tree=self._tree_at(at),
            admitted=body.admitted,
            excluded=derived.excluded.values(),
            experiences=derived.verdict_table.values(),
            ignored=self._ignored(derived, fold, kept),
            known_unknowns=body.known_unknowns,
            recheck_inputs=body.recheck_inputs,
            positions=positions.values(),
            retract_reasons=reasons.values(),
            context=body,
        )

    def check(
        self, actor: Actor | Mapping[str, object], at: datetime | str, facts: Iterable[str]
    ) -> dict[str, Decision]:
        """The decision ``resolve`` gives each fact, in the order asked, without the whole resolution.

        A fact its tenant has not asserted by ``at`` is an UnknownReferenceError (field ``facts``).
        """
        actor, at = self._normalise(actor, at)
        asked = list(dict.fromkeys(facts))
        with self.lock:
            return self._check(actor, at, asked)

    def _check(self, actor: Actor, at: datetime, asked: list[str]) -> dict[str, Decision]:
        view = self._view(actor, at)
        if view is None:
            fold, index = self._fresh(actor.tenant, at)
            derived = Derived(self.policy, index)
        else:
            _, fold, derived = view
        keys = set()
        for index_, fact_id in enumerate(asked):
            fact = fold.facts.get(fact_id)
            if fact is None:
                raise UnknownReferenceError(
                    f"fact {fact_id!r} is not asserted in tenant {actor.tenant!r} by {at.isoformat()}",
                    field=f"facts[{index_}]",
                )
            keys.add(fact.event.key)
        derived.ensure(fold, actor, at, keys)
        return {fact_id: derived.decided[fact_id] for fact_id in asked}

    # -- helpers -----------------------------------------------------------------------

    def _normalise(
        self, actor: Actor | Mapping[str, object], at: datetime | str
    ) -> tuple[Actor, datetime]:
        """The actor and time as ``gamma.resolve`` takes them. A host asks for the same actor
        object and time string turn after turn: what they gave is kept by their exact content
        (``_actor_key``; the types too, so ``True`` is not ``1``), errors never."""
        key = _actor_key(actor)
        found = None if key is None else self._actors.get(key)
        if found is None:
            found = normal_actor(actor, self.policy)
            if key is not None:
                remember(self._actors, key, found)
        if type(at) is str:
            when = self._times.get(at)
            if when is None:
                when = remember(self._times, at, parse_at(at))
            return found, when
        return found, parse_at(at)

    def _view(
        self, actor: Actor, at: datetime, whole: bool = False
    ) -> tuple[TenantFold, Fold, Derived] | None:
        """The kept fold of the actor's tenant at ``at`` (with the deferred effects due by then)
        and the actor's class's results, told what changed since it last asked; None when
        ``at`` cuts the tenant's events (or the kept fold has run effects past it). ``whole``:
        every key will be asked, so a class not seen starts from another class's results."""
        kept = self._tenants.get(actor.tenant)
        if kept is None or kept.events[-1].ts > at:
            return None
        kept.catch_up()
        assert kept.through is not None
        # effects due before the log's last ts would run before any later event too
        until = min(at, self._ts[-1])
        if until >= kept.through:
            kept.run_due(until)
            kept.through = until
        if kept.through > at:
            return None
        pending = kept.fold.pending
        if not (pending and pending[0][0] <= at):
            fold, overlay, due = kept.fold, frozenset[str](), frozenset[str]()
        else:
            fold, overlay, due = kept.view_at(at)
        return kept, fold, self._derived(kept, actor, fold, at, overlay, due, whole)

    def _derived(
        self, kept: TenantFold, actor: Actor, fold: Fold, at: datetime,
        overlay: frozenset[str], due: frozenset[str], whole: bool,
    ) -> Derived:
        """The results kept for the actor's class, invalidated where the view changed since."""
        name = actor_class(actor, kept.index)
        derived = self._classes.get(name)
        if whole and (derived is None or not derived.complete):
            donor = self._donor(kept, actor)
            # another class's results, with what the new class sees otherwise to compute again
            forked = None if donor is None else donor.fork(fold, actor)
            if forked is not None:
                derived = forked
        dirty = None if derived is None else kept.since(derived.version)
        if derived is None or dirty is None or derived.at is None:
            derived = Derived(self.policy, kept.index)
        elif derived.version != kept.version or derived.at != at:  # else the view is the same
            if derived.at != at or derived.due != due:
                # the effects run in the view differ: their keys' records may too. The same
                # effects at the same ``at`` give the same records but where the appends
                # touched a key, and those keys are in ``dirty`` already
                dirty |= derived.overlay | overlay
            if derived.at != at:
                dirty |= kept.index.flipping(derived.at, at)
            derived.invalidate(dirty)
        self._classes[name] = derived
        self._classes.move_to_end(name)
        while len(self._classes) > CLASSES_KEPT:
            self._classes.popitem(last=False)
        derived.version, derived.overlay, derived.due, derived.at = kept.version, overlay, due, at
        derived.actor = actor
        derived.take_experiences(fold.experiences)
        return derived

    def _donor(self, kept: TenantFold, actor: Actor) -> Derived | None:
        """The kept results of another class of the actor's tenant that a new class may start
        from (``Derived.fork``): every key computed, its journal position still kept; one of
        the same scope first (a scope the two answer alike leaves precedence as it is), then
        the most recently asked."""
        found = None
        for name, derived in reversed(self._classes.items()):
            if (
                name[0] != actor.tenant
                or not derived.complete
                or derived.at is None
                or derived.actor is None
                or kept.since(derived.version) is None
            ):
                continue
            if derived.actor.scope == actor.scope:
                return derived
            if found is None:
                found = derived
        return found

    def _fresh(self, tenant: str, at: datetime) -> tuple[Fold, TenantIndex]:
        """The tenant's events with ``ts <= at`` folded afresh, with their index."""
        kept = self._tenants.get(tenant)
        # (an erase is folded as it comes, so the kept fold knows every erasure even when
        # the events after it wait to be folded: ``TenantFold.add``)
        fold = new_fold(tenant, self.policy, kept.fold.erasures if kept is not None else None)
        index = TenantIndex()
        for pos, event in zip(kept.event_pos, kept.events) if kept is not None else ():
            if event.ts > at:
                break
            fold.run_pending(event.ts)
            grants = len(fold.key_grant_events)
            fold_event(fold, pos, event)
            index.add(event, fold, grants)
        fold.run_pending(at)
        return fold, index

    def _ignored(self, derived: Derived, fold: Fold, kept: TenantFold) -> tuple[Ignored, ...]:
        """The fold's ignored events and the key-wide grants below a fact of their key."""
        table = derived.ignored_table
        generation, seen = derived.ignored_seen
        if generation != kept.generation:
            derived.ignored_table = table = Table()
            derived.extras = frozenset()  # none in the new table
            for entries in derived.key_ignored.values():
                for entry in entries:
                    table.set(entry, Ignored(event=entry[0], code=entry[1], fact=entry[2]))
            seen = 0
        extras = kept.extras(fold)
        if extras is not derived.extras:  # else the same view's: in the table as they are
            for entry in derived.extras:  # the last view's deferred effects' entries
                table.remove(entry)
        for entry in kept.ignored_log[seen:]:
            table.set(entry, Ignored(event=entry[0], code=entry[1], fact=entry[2]))
        derived.ignored_seen = (kept.generation, len(kept.ignored_log))
        if extras is not derived.extras:
            derived.extras = extras
            for entry in extras:
                table.set(entry, Ignored(event=entry[0], code=entry[1], fact=entry[2]))
        return table.values()

    def _part(
        self, derived: Derived, fold: Fold, kept: TenantFold | None, actor: Actor,
        at: datetime, head: str, wanted: frozenset[str],
    ) -> Resolution:
        """The resolution's records of the facts of ``wanted`` keys (SPEC §9.9 keys)."""
        derived.ensure(fold, actor, at, wanted)
        in_keys = {f for key in wanted for f in derived.index.by_key.get(key, ())}
        which = derived.experiences_of(fold.experiences, in_keys)
        for i in which:
            for used in fold.experiences[i].uses or ():
                for key in derived.walk_keys(fold, used):
                    if key not in derived.done:
                        derived.ensure(fold, actor, at, {key})
        derived.judge(fold.experiences, which)
        ignored = set().union(*(derived.key_ignored.get(k, ()) for k in wanted))
        if kept is None:  # a prefix folded afresh: its ignored entries, all of them
            ignored.update(e for e in fold.ignored if e[2] in in_keys)
        else:
            ignored.update(e for f in in_keys for e in kept.ignored_of.get(f, ()))
            ignored.update(e for e in kept.extras(fold) if e[2] in in_keys)

        def of(records: Callable[[str], Kept | None]) -> tuple[Kept, ...]:
            found = (records(f) for f in sorted(in_keys))
            return tuple(r for r in found if r is not None)

        return Resolution(
            actor=actor,
            at=at,
            policy=self.policy.digest,
            log=head,
            tree=self._tree_at(at),
            admitted=of(lambda f: _admitted_of(derived.decided[f])),
            excluded=of(lambda f: _excluded(derived.decided[f])),
            experiences=tuple(
                sorted((derived.verdicts[i] for i in which), key=lambda v: v.experience)
            ),
            ignored=tuple(
                Ignored(event=e, code=c, fact=f) for e, c, f in sorted(ignored) if f in in_keys
            ),
            known_unknowns=tuple(sorted(k for k in wanted if derived.unknown_of.get(k))),
            recheck_inputs=of(
                lambda f: (f, tuple(sorted(derived.recheck[f]))) if f in derived.recheck else None
            ),
            positions=of(lambda f: (f, fold.positions[f])),
            retract_reasons=of(lambda f: _retracted(fold.facts[f])),
        )


def _actor_key(actor: object) -> tuple[tuple[str, type, object], ...] | None:
    """An actor object's exact content, hashable: its members in order, each with its value's
    type (a list or tuple of strings as a tuple); None for anything else (not kept)."""
    if type(actor) is not dict:
        return None
    found = []
    for name, value in actor.items():
        kind = type(value)
        if type(name) is not str:
            return None
        if kind is list or kind is tuple:
            if any(type(item) is not str for item in value):
                return None
            found.append((name, kind, tuple(value)))
        elif kind is str or value is None:
            found.append((name, kind, value))
        else:
            return None
    return tuple(found)


def _admitted_of(record: Decision) -> Admitted | None:
    return record if isinstance(record, Admitted) else None


def _excluded(record: Decision) -> Excluded | None:
    return record if isinstance(record, Excluded) else None


def _retracted(fact: FactRecord) -> tuple[str, str] | None:
    return None if fact.retract_reason is None else (fact.id, fact.retract_reason)
