"""Γ: the pure resolver S = Γ(H, A, t).

One pass folds the actor's tenant's events (``ts <= t``) into per-fact
records, with per-key indexes for supersession and grants; the phases
(``gamma.core.resolving.phases``) then derive every exclusion code from the records and
propagate them to dependents. No I/O, no clock, no randomness: same inputs,
same Resolution.

Phases, in the order SPEC.md states them:
1. validity (viewer-independent): draft, hypothetical, not_yet_valid,
   expired, retracted, superseded, erased (from erase events anywhere in the
   given log: as of every time);
2. scope and precedence among the actor's candidates: out_of_scope,
   outranked, overridden;
3. visibility: access_denied;
4. dependency propagation: dependency_invalidated (or needs_recheck under
   ``flag``), dependency_restricted, transitively.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

import attrs

from gamma.core.integrity.chain import head_of
from gamma.core.integrity.commitment import erased_copy
from gamma.core.integrity.merkle import TreeHead, tree_head_of
from gamma.core.reading.events import canonical_event, normal_actor
from gamma.core.reading.handbuilt import checked_log
from gamma.core.reading.parsed import ParsedLog
from gamma.core.resolving.phases import (
    AUTHORITY_CAPPED,
    INSUFFICIENT_AUTHORITY,
    conclude,
    scope_contains,
    specificity,
)
from gamma.core.resolving.resolution import Resolution
from gamma.core.terms.canonical import format_ts, parse_at
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import (
    Actor,
    Assert,
    Erase,
    Event,
    Experience,
    Grant,
    Migrate,
    Promote,
    Retract,
    Revoke,
    heard_by,
)
from gamma.core.terms.policy import DEFAULT_POLICY, Policy

__all__ = [
    "FoldedFact",
    "Fold",
    "erasures_of",
    "fold_event",
    "new_fold",
    "resolve",
    "resolve_partition",
    "scope_contains",
    "specificity",
]


@attrs.define
class FoldedFact:
    """Mutable working record of one fact during the fold (the phases read it as ``FactRecord``)."""

    event: Assert
    rank: int
    scope: str
    id: str  # the event's fact id, kept at hand: every phase reads it
    commit_pos: int | None = None
    commit_event: str | None = None
    retracted_by: str | None = None
    retract_reason: str | None = None
    superseded_by: FoldedFact | None = None
    superseding_event: str | None = None
    # the erase event naming the fact anywhere in the log, or the assert's own id when its
    # value is gone and no erase is in the log (a cut before it); None: not erased
    erased_by: str | None = None

    @property
    def live(self) -> bool:
        return self.retracted_by is None and self.superseded_by is None


@attrs.define
class _GrantStream:
    """Grant and revoke events about one target, in log order: (pos, is_grant, event id, rank)."""

    changes: list[tuple[int, bool, str, int]] = attrs.Factory(list)


class _Fold:
    """The state built by the single pass over the tenant's events."""

    def __init__(self, actor: Actor, policy: Policy) -> None:
        self.actor = actor
        self.policy = policy
        self.facts: dict[str, FoldedFact] = {}
        self.order: list[FoldedFact] = []
        self.experiences: list[Experience] = []
        self.positions: dict[str, int] = {}  # fact -> log position of its assert (for text)
        self.ignored: set[tuple[str, str, str]] = set()
        self.live_by_slot: dict[tuple[str, str], list[FoldedFact]] = defaultdict(list)
        self.pending: list[tuple[datetime, int, str]] = []
        self.fact_access: dict[tuple[str, str], _GrantStream] = defaultdict(_GrantStream)
        self.key_access: dict[tuple[str, str], _GrantStream] = defaultdict(_GrantStream)
        self.key_grant_events: list[tuple[str, str, int]] = []
        self._ranks: dict[tuple[str | None, str], tuple[int, bool]] = {}
        # fact -> the erase event naming it, over the whole log given (not only the prefix
        # folded): filled before the fold by its maker, and by every erase folded
        self.erasures: dict[str, str] = {}

    # -- handlers, one per event type -------------------------------------------------

    def rank(self, event: Assert | Retract | Promote | Grant | Revoke) -> int:
        """The event's effective authority: its claim capped at what its writer holds; an
        explicit claim above that is listed under ``ignored`` as ``authority_capped``.
        Computed once per (claim, writer): a log has few of each."""
        claim = (event.authority, event.actor)
        known = self._ranks.get(claim)
        if known is None:
            known = self._ranks[claim] = (
                self.policy.event_rank(*claim), self.policy.over_claims(*claim)
            )
        if known[1]:
            target = event.fact if event.fact is not None else event.key
            assert target is not None
            self.ignored.add((event.id, AUTHORITY_CAPPED, target))
        return known[0]

    def on_assert(self, pos: int, event: Assert) -> None:
        fact = FoldedFact(event, self.rank(event), event.scope or "global", event.fact)
        if self.erasures or event.value is None:
            fact.erased_by = self.erasures.get(fact.id) or (event.id if event.value is None else None)
        self.facts[fact.id] = fact
        self.order.append(fact)
        self.positions[fact.id] = pos
        if event.status is None or event.status == "committed":
            self.commit(fact, pos, event.id, event.ts)

    def on_retract(self, pos: int, event: Retract) -> None:
        fact = self.facts[event.fact]
        if self.rank(event) < fact.rank:
            self.ignored.add((event.id, INSUFFICIENT_AUTHORITY, fact.id))
        elif fact.retracted_by is None:
            fact.retracted_by = event.id
            fact.retract_reason = event.reason
            self._unslot(fact)

    def on_promote(self, pos: int, event: Promote) -> None:
        fact = self.facts[event.fact]
        if self.rank(event) < fact.rank:
            self.ignored.add((event.id, INSUFFICIENT_AUTHORITY, fact.id))
        elif fact.commit_pos is None:
            self.commit(fact, pos, event.id, event.ts)

    def on_access(self, pos: int, event: Grant | Revoke) -> None:
        rank = self.rank(event)
        grantee = f"role:{event.role}" if event.role is not None else f"actor:{event.to_actor}"
        change = (pos, isinstance(event, Grant), event.id, rank)
        if event.fact is not None:
            if rank < self.facts[event.fact].rank:
                self.ignored.add((event.id, INSUFFICIENT_AUTHORITY, event.fact))
                return
            self.fact_access[(event.fact, grantee)].changes.append(change)
        else:
            assert event.key is not None
            self.key_access[(event.key, grantee)].changes.append(change)
            self.key_grant_events.append((event.id, event.key, rank))

    def on_experience(self, pos: int, event: Experience) -> None:
        self.experiences.append(event)

    def on_erase(self, pos: int, event: Erase) -> None:
        """The named facts are erased (as of every time: their records say so whatever the
        ``at``), and their records keep no value."""
        for item in event.erased:
            self.erasures[item.fact] = event.id
            fact = self.facts[item.fact]
            fact.erased_by = event.id
            fact.event = erased_copy(fact.event)

    def on_migrate(self, pos: int, event: Migrate) -> None:
        """A migration's closing event folds nothing (SPEC §21)."""

    # -- commits, effects and supersession ---------------------------------------------

    def commit(self, fact: FoldedFact, pos: int, event_id: str, ts: datetime) -> None:
        fact.commit_pos = pos
        fact.commit_event = event_id
        slot = self.live_by_slot[(fact.event.key, fact.scope)] if fact.live else None
        if slot is not None:
            slot.append(fact)
        start = fact.event.valid_from
        if start is not None and start > ts:
            heapq.heappush(self.pending, (start, pos, fact.id))
        elif slot is not None:
            self.take_effect(fact, slot)

    def run_pending(self, until: datetime) -> None:
        """Let deferred (``valid_from``) effects due at or before ``until`` happen, in order."""
        while self.pending and self.pending[0][0] <= until:
            _, _, fact_id = heapq.heappop(self.pending)
            self.take_effect(self.facts[fact_id])

    def take_effect(self, fact: FoldedFact, slot: list[FoldedFact] | None = None) -> None:
        """``slot``: the fact's list in ``live_by_slot``, when the caller holds it (a lookup
        in a table of every key and scope costs, at a million events)."""
        if not fact.live:
            return
        rank = fact.rank
        if fact.event.supersedes:
            for target_id in fact.event.supersedes:
                target = self.facts[target_id]
                if rank >= target.rank:
                    self.supersede(target, fact)
                else:
                    self.ignored.add((fact.event.id, INSUFFICIENT_AUTHORITY, target_id))
        if self.policy.same_key:
            at = fact.commit_pos
            assert at is not None
            if slot is None:
                slot = self.live_by_slot[(fact.event.key, fact.scope)]
            if len(slot) == 1:  # the fact alone in its slot (most): nothing to supersede
                return
            for other in list(slot):
                if (
                    other is not fact
                    and other.commit_pos is not None
                    and other.commit_pos < at
                    and other.rank <= rank
                ):
                    self.supersede(other, fact, slot)

    def supersede(
        self, old: FoldedFact, new: FoldedFact, slot: list[FoldedFact] | None = None
    ) -> None:
        if not old.live:
            return
        old.superseded_by = new
        old.superseding_event = new.commit_event
        self._unslot(old, slot)

    def _unslot(self, fact: FoldedFact, slot: list[FoldedFact] | None = None) -> None:
        if slot is None:
            slot = self.live_by_slot.get((fact.event.key, fact.scope)) or []
        for index, other in enumerate(slot):
            if other is fact:  # by identity: comparing records field by field costs a hot key dearly
                del slot[index]
                return


_HANDLERS = {
    Assert: _Fold.on_assert,
    Retract: _Fold.on_retract,
    Promote: _Fold.on_promote,
    Grant: _Fold.on_access,
    Revoke: _Fold.on_access,
    Experience: _Fold.on_experience,
    Erase: _Fold.on_erase,
    Migrate: _Fold.on_migrate,
}


def resolve(
    events: Iterable[Event],
    actor: Actor | dict[str, object],
    at: datetime | str,
    policy: Policy | None = None,
    *,
    head: str | None = None,
    tree: TreeHead | None = None,
) -> Resolution:
    """Γ(H, A, t): the facts ``actor`` may rely on at ``at``, and why the rest are withheld.

    ``events`` is a log as read (``load_events``/``parse_events``/a store), taken as it is;
    any other sequence (hand-built events, a cut or joined log) is validated first, by the
    reader's rules (SPEC §2), and refused with an InputError naming the event and field.
    The resolution records the chain head and Merkle tree head of the prefix heard by
    ``at``, computed from it; a ``head`` or ``tree`` given is checked against them (an
    InputError on that field when it is not theirs). For one tenant's part of a log under
    the whole log's heads, see :func:`resolve_partition`.
    """
    policy = policy or DEFAULT_POLICY
    actor = normal_actor(actor, policy)
    at = parse_at(at)
    log = checked_log(events, policy)
    prefix = heard_by(log, at)
    computed = _heads(log, prefix)
    for name, given, own in (("head", head, computed[0]), ("tree", tree, computed[1])):
        if given is not None and given != own:
            raise InputError(
                f"{given} is not the {name} of the {len(prefix)} events heard by"
                f" {format_ts(at)} ({own})",
                field=name,
            )
    return _resolve(prefix, actor, at, policy, *computed, erasures=erasures_of(log, actor.tenant))


def erasures_of(log: Sequence[Event], tenant: str) -> dict[str, str]:
    """Fact -> the erase event naming it, over the erase events of ``tenant`` anywhere in
    ``log`` (a ParsedLog keeps its erase events from its reading)."""
    erases = log.erases() if isinstance(log, ParsedLog) else [e for e in log if type(e) is Erase]
    return {
        item.fact: event.id
        for event in erases
        if event.tenant == tenant
        for item in event.erased
    }


def _heads(log: Sequence[Event], prefix: Sequence[Event]) -> tuple[str, TreeHead]:
    """The chain head and tree head of ``prefix`` (of ``log``): the reader's, when it hashed
    that prefix as it read the log (``ParsedLog.heads_of``: the whole log, or the prefix heard
    by the time it was read for), else computed from the events' canonical texts."""
    known = log.heads_of(len(prefix)) if isinstance(log, ParsedLog) else None
    if known is not None:
        return known
    canonical = [canonical_event(event) for event in prefix]
    return head_of(canonical), tree_head_of(canonical)


def resolve_partition(
    events: Iterable[Event],
    actor: Actor | dict[str, object],
    at: datetime | str,
    policy: Policy | None = None,
    *,
    head: str | None,
    tree: TreeHead | None,
) -> Resolution:
    """Γ over one tenant's part of a log, recording the whole log's ``head`` and ``tree`` at ``at``.

    For a caller that split a log by tenant in one pass and hashed the whole of it
    (``gamma.review``): Γ sees only the actor's tenant, so its resolution equals the whole
    log's, but the part cannot prove the whole log's heads; the caller vouches for them.
    The part is validated like any log unless it keeps the reader's mark (a ``ParsedLog``
    of the part: every reference stays within a tenant). A head left None is the part's own.
    """
    policy = policy or DEFAULT_POLICY
    actor = normal_actor(actor, policy)
    at = parse_at(at)
    log = checked_log(events, policy)
    prefix = heard_by(log, at)
    if head is None or tree is None:
        own = _heads(log, prefix)
        head, tree = head or own[0], tree or own[1]
    return _resolve(prefix, actor, at, policy, head, tree, erasures=erasures_of(log, actor.tenant))


def _resolve(
    prefix: Sequence[Event], actor: Actor, at: datetime, policy: Policy, head: str, tree: TreeHead,
    *, erasures: dict[str, str],
) -> Resolution:
    """The fold over the actor's tenant's events of ``prefix`` (``erasures``: those of the
    whole log), then the phases."""
    fold = _Fold(actor, policy)
    fold.erasures = erasures
    tenant, pending, handlers = actor.tenant, fold.pending, _HANDLERS
    for pos, event in enumerate(prefix):
        if event.tenant != tenant:
            continue  # isolation is total: another tenant's events are not in the resolution
        if pending and pending[0][0] <= event.ts:
            fold.run_pending(event.ts)
        handlers[type(event)](fold, pos, event)  # type: ignore[operator]
    fold.run_pending(at)
    return conclude(fold, actor, at, policy, head, tree)


# -- the fold, for gamma.core.incremental.engine ---------------------------------------------------------
# The engine keeps one fold per tenant and advances it event by event. It uses only
# these names: ``Fold`` (its ``facts``, ``order``, ``positions``, ``ignored``,
# ``experiences``, ``pending``, ``live_by_slot``, ``fact_access``, ``key_access``,
# ``key_grant_events`` and ``erasures``; ``run_pending``), ``FoldedFact``, ``new_fold`` and
# ``fold_event``; the phases it runs are gamma.core.resolving.phases. A change to these is a change to
# the engine.

Fold = _Fold


def new_fold(tenant: str, policy: Policy, erasures: dict[str, str] | None = None) -> _Fold:
    """An empty fold of one tenant (the fold does not depend on who asks); ``erasures``: the
    erase events of the tenant's whole log, for a fold of a prefix of it."""
    fold = _Fold(Actor(id="-", tenant=tenant), policy)
    if erasures:
        fold.erasures = dict(erasures)
    return fold


def fold_event(fold: _Fold, pos: int, event: Event) -> None:
    """Fold one event at log position ``pos`` (the caller runs ``run_pending(event.ts)`` first)."""
    _HANDLERS[type(event)](fold, pos, event)  # type: ignore[operator]
