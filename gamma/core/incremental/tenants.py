"""One tenant as the engine keeps it: its events, its fold advanced event by event (when
the tenant is asked about: one no one asks about keeps its events only), the fold's index,
and a journal of the keys each step touched.

A step is an event or a run of deferred (``valid_from``) effects. The engine's kept
phases (``gamma.core.incremental.derived``) read the journal to learn which keys to compute
again; ``due_at`` gives the view of the kept fold at a later ``at`` whose deferred
effects are due, without changing the kept fold, and ``TenantFold.view_at`` keeps that view
across the turns that touch none of its effects' keys (a host asks at one ``at``).
"""

from __future__ import annotations

import bisect
import copy
import operator
from array import array
from collections import defaultdict
from datetime import datetime

import attrs

from gamma.core.incremental.derived import Table, TenantIndex
from gamma.core.resolving.phases import AUTHORITY_CAPPED, INSUFFICIENT_AUTHORITY
from gamma.core.resolving.resolver import Fold, FoldedFact, fold_event, new_fold
from gamma.core.terms.model import Assert, Erase, Event, Grant, Promote, Retract, Revoke
from gamma.core.terms.policy import Policy

__all__ = ["JOURNAL_KEPT", "Overlay", "TenantFold", "due_at", "due_ids", "effect_keys", "touched"]

#: How many steps of a tenant's journal are kept; a class further behind starts afresh.
JOURNAL_KEPT = 4096


def effect_keys(fold: Fold, fact_id: str) -> set[str]:
    """The keys a fact's commit or effect can change: its own, and its ``supersedes`` targets'."""
    event = fold.facts[fact_id].event
    return {event.key, *(fold.facts[t].event.key for t in event.supersedes or ())}


def touched(fold: Fold, event: Event) -> set[str]:
    """The keys whose facts' records or grants folding ``event`` may have changed."""
    if isinstance(event, Assert | Retract | Promote):
        return effect_keys(fold, event.fact)
    if isinstance(event, Grant | Revoke):
        return {fold.facts[event.fact].event.key} if event.fact is not None else {event.key or ""}
    if isinstance(event, Erase):  # at every ``at``: an erased fact is erased as of every time
        return {fold.facts[item.fact].event.key for item in event.erased}
    return set()  # an experience or a migration changes no fact


#: Where a commit or an effect may supersede: a slot (key, scope) and explicit targets.
Stake = tuple[str, str, tuple[str, ...]]


def _slot_of(fact: FoldedFact) -> Stake:
    return fact.event.key, fact.scope, fact.event.supersedes or ()


def _commits(fold: Fold, event: Event) -> list[Stake]:
    """Where folding ``event`` may supersede: an assert's slot and targets, or a promoted
    fact's."""
    if isinstance(event, Assert):
        return [(event.key, event.scope or "global", event.supersedes or ())]
    if isinstance(event, Promote):
        return [_slot_of(fold.facts[event.fact])]
    return []


def _at_stake(fold: Fold, stakes: list[Stake]) -> list[FoldedFact]:
    """The live facts with ``supersedes`` of their own that a step at ``stakes`` may
    supersede (``_mooted`` looks at them after it)."""
    found: list[FoldedFact] = []
    for key, scope, targets in stakes:
        found += [f for f in fold.live_by_slot.get((key, scope), ()) if f.event.supersedes]
        found += [f for f in map(fold.facts.__getitem__, targets) if f.live and f.event.supersedes]
    return found


def _mooted(fold: Fold, stake: list[FoldedFact]) -> set[str]:
    """The keys a superseded fact's own effect would have touched: if it was still pending, it
    now never happens (``take_effect`` skips a fact no longer live), so the facts it named
    stay live, in keys the step itself did not touch."""
    return {key for fact in stake if not fact.live for key in effect_keys(fold, fact.id)}


class TenantFold:
    """One tenant's events (with their global positions), the fold advanced through them
    when the tenant is asked about (``catch_up``), its index, and a journal of the keys each
    step touched (a step: an event or a run of deferred effects)."""

    def __init__(self, tenant: str, policy: Policy) -> None:
        # the events and, apart (a pair each would cost 64 bytes an event), their positions
        self.events: list[Event] = []
        self.event_pos = array("q")
        self.folded = 0  # how many of them the fold has taken (``catch_up``)
        self.fold = new_fold(tenant, policy)
        self.index = TenantIndex()
        # per step the keys it touched: one key as itself, else a tuple (``_keys``): a tuple
        # of one costs 48 bytes a step (issue 28: memory)
        self.journal: list[str | tuple[str, ...]] = []
        self.base = 0  # the version of journal[0]
        self.through: datetime | None = None  # deferred effects due at or before it have run
        # the resolution's positions and retraction reasons, made when first asked
        # (``tables``): a tenant no one asks of keeps none
        self._tables: tuple[Table[str, tuple[str, int]], Table[str, tuple[str, str]]] | None = None
        # the fold's ignored entries in the order they arose; ``generation`` moves when the
        # list had to be made again from the fold's set
        self.ignored_log: list[tuple[str, str, str]] = []
        self.logged: set[tuple[str, str, str]] = set()
        self.ignored_of: dict[str, list[tuple[str, str, str]]] = defaultdict(list)  # by target
        self._extras: tuple[Fold, frozenset[tuple[str, str, str]]] | None = None
        self.generation = 0
        # the last view with deferred effects run (``view_at``)
        self.overlay: Overlay | None = None
        # the journal position and ignored entries logged up to which it is still good
        self.overlay_seen = (0, 0)
        # the fold's facts table and order as copies kept between views (``shadow``), and
        # the facts the last view put its own records in place of
        self._shadow: tuple[dict[str, FoldedFact], list[FoldedFact], list[str]] | None = None

    @property
    def version(self) -> int:
        return self.base + len(self.journal)

    def tables(self) -> tuple[Table[str, tuple[str, int]], Table[str, tuple[str, str]]]:
        """The resolution's ``positions`` and ``retract_reasons`` rows, kept from their first
        ask on: each asserted fact with its position, each retracted one with its reason."""
        if self._tables is None:
            positions: Table[str, tuple[str, int]] = Table()
            reasons: Table[str, tuple[str, str]] = Table()
            for fact_id, pos in self.fold.positions.items():
                positions.set(fact_id, (fact_id, pos))
            for fact in self.fold.order:
                if fact.retract_reason is not None:
                    reasons.set(fact.id, (fact.id, fact.retract_reason))
            self._tables = (positions, reasons)
        return self._tables

    def add(self, pos: int, event: Event) -> None:
        """Take the tenant's next event; it is folded when the tenant is next asked about
        (``catch_up``), an erase at once (its values leave every copy now)."""
        self.events.append(event)
        self.event_pos.append(pos)
        if isinstance(event, Erase):
            self.catch_up()

    def catch_up(self) -> None:
        """Fold the events taken since the last call, one by one, as they came: the fold,
        index, journal and logs are then what folding each on arrival makes, and a tenant
        no one asks about keeps its events alone (issue 28: memory). Every reader of the
        fold calls it first (the engine's ``_view``; ``_fresh`` reads only the erasures,
        and an erase is folded as it comes)."""
        for i in range(self.folded, len(self.events)):
            self.folded = i + 1
            self._fold(self.event_pos[i], self.events[i])

    def _fold(self, pos: int, event: Event) -> None:
        fold = self.fold
        self.run_due(event.ts)
        grants, ignored = len(fold.key_grant_events), len(fold.ignored)
        stake = _at_stake(fold, _commits(fold, event))
        fold_event(fold, pos, event)
        self.index.add(event, fold, grants)
        self._note(touched(fold, event) | _mooted(fold, stake))
        if len(fold.ignored) != ignored:
            targets = {getattr(event, "fact", None), getattr(event, "key", None)}
            targets.update(getattr(event, "supersedes", None) or ())
            self._log_ignored(event.id, targets)
            if isinstance(event, Promote):  # the commit's effect names the assert
                asserted = fold.facts[event.fact].event
                self._log_ignored(asserted.id, set(asserted.supersedes or ()))
            self._check_log()
        if isinstance(event, Erase):
            self._forget(event)
        elif self._tables is not None:
            if isinstance(event, Assert):
                self._tables[0].set(event.fact, (event.fact, pos))
            elif isinstance(event, Retract):
                reason = fold.facts[event.fact].retract_reason
                if reason is not None:
                    self._tables[1].set(event.fact, (event.fact, reason))
        if self.through is None or event.ts > self.through:
            self.through = event.ts

    def _forget(self, erase: Erase) -> None:
        """Keep no value the erase destroyed: its asserts in the tenant's events become the
        fold's erased copies (same chain bytes), and no view made before it is kept."""
        fold = self.fold
        for item in erase.erased:
            at = bisect.bisect_left(self.event_pos, fold.positions[item.fact])
            self.events[at] = fold.facts[item.fact].event
        self.overlay = None
        self._extras = None
        self._shadow = None  # its records may hold the destroyed values

    def run_due(self, until: datetime) -> None:
        """Run the deferred effects due at or before ``until``, noting the keys they touch."""
        pending = self.fold.pending
        if pending and pending[0][0] <= until:
            due = due_ids(pending, until)
            ignored = len(self.fold.ignored)
            fold = self.fold
            stake = _at_stake(fold, [_slot_of(fold.facts[f]) for f in due])
            fold.run_pending(until)
            self._note(set().union(*(effect_keys(fold, f) for f in due), _mooted(fold, stake)))
            if len(self.fold.ignored) != ignored:
                for fact_id in due:
                    event = self.fold.facts[fact_id].event
                    self._log_ignored(event.id, set(event.supersedes or ()))
                self._check_log()

    def _log_ignored(self, event_id: str, targets: set[str | None]) -> None:
        """Log the ignored entries an event (or its effect) added: they name its id (or the
        committed assert's) and one of its targets. Should the fold add others, ``_check_log``
        makes the log again from the fold's set."""
        for code in (INSUFFICIENT_AUTHORITY, AUTHORITY_CAPPED):
            for target in targets:
                entry = (event_id, code, target or "")
                if target is not None and entry in self.fold.ignored and entry not in self.logged:
                    self.logged.add(entry)
                    self.ignored_log.append(entry)
                    self.ignored_of[entry[2]].append(entry)

    def _check_log(self) -> None:
        if len(self.ignored_log) != len(self.fold.ignored):
            self.ignored_log = sorted(self.fold.ignored)
            self.logged = set(self.ignored_log)
            self.ignored_of = defaultdict(list)
            for entry in self.ignored_log:
                self.ignored_of[entry[2]].append(entry)
            self.generation += 1

    def _note(self, keys: set[str]) -> None:
        self.journal.append(next(iter(keys)) if len(keys) == 1 else tuple(keys))
        if len(self.journal) > JOURNAL_KEPT:
            half = JOURNAL_KEPT // 2
            del self.journal[:half]
            self.base += half

    def extras(self, view: Fold) -> frozenset[tuple[str, str, str]]:
        """The ignored entries of a view with deferred effects run that the kept fold lacks."""
        if view is self.fold:
            return frozenset()
        if self._extras is None or self._extras[0] is not view:
            found: set[tuple[str, str, str]] = set()
            if self.overlay is not None and self.overlay.fold is view:
                # an effect's entries name its assert and one of its supersedes targets
                for fact_id in due_ids(self.fold.pending, self.overlay.at):
                    event = self.fold.facts[fact_id].event
                    for target in event.supersedes or ():
                        entry = (event.id, INSUFFICIENT_AUTHORITY, target)
                        if entry in view.ignored and entry not in self.fold.ignored:
                            found.add(entry)
            if len(found) != len(view.ignored) - len(self.fold.ignored):
                found = set(view.ignored - self.fold.ignored)
            self._extras = (view, frozenset(found))
        return self._extras[1]

    def shadow(self) -> tuple[dict[str, FoldedFact], list[FoldedFact], list[str]]:
        """Copies of the fold's facts table and order for a view to put its own records in:
        kept between views, they get back the records the last view replaced and the facts
        folded since, so a view costs O(its records + new facts), not O(facts). The last
        view made on them is spent (the engine keeps one view a tenant): it is dropped."""
        fold = self.fold
        self.overlay = None
        if self._shadow is None:
            self._shadow = (dict(fold.facts), list(fold.order), [])
        facts, order, replaced = self._shadow
        for fact_id in replaced:
            original = facts[fact_id] = fold.facts[fact_id]
            order[self.index.order_of[fact_id]] = original
        replaced.clear()
        for fact in fold.order[len(order) :]:
            facts[fact.id] = fact
            order.append(fact)
        return self._shadow

    def view_at(self, at: datetime) -> tuple[Fold, frozenset[str], frozenset[str]]:
        """``due_at(self, at)``, the last view's again when it still is that: asked at the
        same ``at``, with the same deferred effects pending, after steps that touched none of
        the keys its effects touch, and the fold's ignored entries logged as they arose.

        Why that is the view ``due_at`` would make: the effects run on copies of the due
        facts, their ``supersedes`` targets and their slots' live facts, every one of a key
        the effects touch (``effect_keys``); a step changes a record or a slot only of a key
        it touches (``touched``, the journal); so those copies and slots are what copying
        them again would give, and running the same effects on them gives the same records.
        Every other table of the view is the kept fold's own, but the facts table and order
        (``shadow``: the facts folded since are added) and the ignored entries (those logged
        since are added; the effects' own arise only when the kept fold runs them, and then
        its pending effects differ). The pending effects are compared whole (a push and a
        pop leave the count alone)."""
        last = self.overlay
        fold = self.fold
        if last is not None and last.at == at:
            version, logged = self.overlay_seen
            if version == self.version:
                return last.fold, last.keys, last.due
            if (
                version >= self.base
                and last.generation == self.generation
                and last.pending == fold.pending
                and all(last.keys.isdisjoint(_keys(step)) for step in self.journal[version - self.base :])
            ):
                assert self._shadow is not None  # a view is spent (``shadow``) with its overlay
                facts, order, _ = self._shadow
                for fact in fold.order[len(order) :]:
                    facts[fact.id] = fact
                    order.append(fact)
                last.fold.ignored.update(self.ignored_log[logged:])
                self.overlay_seen = (self.version, len(self.ignored_log))
                return last.fold, last.keys, last.due
        pending = list(fold.pending)
        view, keys, due = due_at(self, at)
        self.overlay = Overlay(at, view, keys, due, pending, self.generation)
        self.overlay_seen = (self.version, len(self.ignored_log))
        return view, keys, due

    def since(self, version: int) -> set[str] | None:
        """The keys touched after ``version``; None when the journal no longer reaches it."""
        if version < self.base:
            return None
        return {key for step in self.journal[version - self.base :] for key in _keys(step)}


def _keys(step: str | tuple[str, ...]) -> tuple[str, ...]:
    """The keys a step of the journal touched."""
    return (step,) if isinstance(step, str) else step


@attrs.frozen
class Overlay:
    """A view of the kept fold with the deferred effects due by ``at`` run (``due_at``):
    ``keys`` the effects touch, ``due`` the facts whose effects they are, and what the kept
    fold held when it was made: its pending effects (a copy) and its ignored log's
    generation. Where it was last found still good: ``TenantFold.overlay_seen``."""

    at: datetime
    fold: Fold
    keys: frozenset[str]
    due: frozenset[str]
    pending: list[tuple[datetime, int, str]]
    generation: int


#: A fact's fields in ``FoldedFact``'s order (``_copied``).
_FACT_FIELDS = operator.attrgetter(*(field.name for field in attrs.fields(FoldedFact)))


def _copied(fact: FoldedFact) -> FoldedFact:
    """A shallow copy of a fact's working record, as ``copy.copy`` makes it (every field is
    a plain ``__init__`` argument) at a ninth of its cost: a turn copies a due fact's slot."""
    return FoldedFact(*_FACT_FIELDS(fact))


def due_at(kept: TenantFold, at: datetime) -> tuple[Fold, frozenset[str], frozenset[str]]:
    """The kept fold with the deferred effects due by ``at`` run, leaving the kept fold as it
    is, the keys those effects touch and the facts whose effects they are.

    Those effects touch only the due facts, their ``supersedes`` targets and
    the live facts of their key and scope: those records (and slot lists) are
    copied before the effects run on them.
    """
    fold = kept.fold
    ids = due_ids(fold.pending, at)
    due = [fold.facts[fact_id] for fact_id in ids]
    touched: dict[str, FoldedFact] = {}
    slots = {}
    keys: set[str] = set()
    for fact in due:
        touched[fact.id] = fact
        keys |= effect_keys(fold, fact.id)
        for target in fact.event.supersedes or ():
            touched[target] = fold.facts[target]
        slot = (fact.event.key, fact.scope)
        slots[slot] = fold.live_by_slot.get(slot, [])
        for other in slots[slot]:
            touched[other.id] = other
    view = copy.copy(fold)
    view.facts, view.order, replaced = kept.shadow()
    copies = {fact_id: _copied(fact) for fact_id, fact in touched.items()}
    for fact_id, fresh in copies.items():
        view.facts[fact_id] = fresh
        view.order[kept.index.order_of[fact_id]] = fresh
        replaced.append(fact_id)
    # only the due facts' slots are read while their effects run (a supersedes target's
    # slot is searched for the target's copy, which it does not hold, whether or not it is
    # here): those slots alone, with the copies
    view.live_by_slot = defaultdict(list, {s: [copies[f.id] for f in m] for s, m in slots.items()})
    view.pending = list(fold.pending)
    view.ignored = set(fold.ignored)
    view.run_pending(at)
    return view, frozenset(keys), frozenset(ids)


def due_ids(pending: list[tuple[datetime, int, str]], until: datetime) -> list[str]:
    """The facts of a heap of deferred effects due at or before ``until``, in heap order
    (the heap's subtrees under an entry not due are skipped)."""
    found, todo = [], [0] if pending else []
    while todo:
        i = todo.pop()
        if pending[i][0] <= until:
            found.append(pending[i][2])
            todo.extend(j for j in (2 * i + 1, 2 * i + 2) if j < len(pending))
    return found
