"""The exclusion phases of Γ (SPEC §4), as units the pure resolver and the engine share.

The fold (``gamma.core.resolving.resolver``) leaves one record per fact; these functions
turn records into codes. Each phase is written for the smallest unit it reads,
so the engine can rerun only what an append touched and still give the bytes
of the pure ``resolve``:

- ``own_codes``: per key (validity, scope, precedence, access; what a fact's
  own record, its key's rivals and its grants decide);
- ``inherit``: per fact, given its dependencies' origins (dependency
  invalidation and restriction);
- ``decision``, ``key_access_ignored``, ``known_unknown``: per fact or key.

``conclude`` runs them all over a fold, in the order SPEC.md states them.
Records are read through the ``FactRecord`` and ``FoldState`` protocols, so this
module does not import the fold.
"""

from __future__ import annotations

import heapq
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Protocol

from gamma.core.integrity.merkle import TreeHead
from gamma.core.resolving.experiences import verdict_of
from gamma.core.resolving.recompute import FAILED, Computed, finishing_order, reach, recompute
from gamma.core.resolving.resolution import Resolution
from gamma.core.terms.decisions import (
    VALIDITY_CODES,
    Admitted,
    Codes,
    Excluded,
    Ignored,
    Reason,
    Recomputed,
)
from gamma.core.terms.model import Actor, Assert, Experience, Value, Visibility
from gamma.core.terms.policy import Policy

__all__ = [
    "Access",
    "AUTHORITY_CAPPED",
    "Codes",
    "FactRecord",
    "INSUFFICIENT_AUTHORITY",
    "FoldState",
    "Origins",
    "conclude",
    "decision",
    "inherit",
    "key_access_ignored",
    "known_unknown",
    "listed",
    "own_codes",
    "recomputed",
    "scope_contains",
    "specificity",
]

Origins = tuple[str | None, str | None]
"""A fact's validity and visibility origins (SPEC §4.4), or None for a group it passes nothing in."""
GrantChange = tuple[int, bool, str, int]  # (position, is_grant, event id, rank)

#: The ignored-event codes (SPEC: ``ignored``), named once for the fold, the phases and the
#: tenants' folds: a grant or revoke written with less authority than its target, and an
#: explicit claim above the writer's authority, capped.
INSUFFICIENT_AUTHORITY = "insufficient_authority"
AUTHORITY_CAPPED = "authority_capped"

HIDDEN = frozenset({"access_denied", "dependency_restricted"})
#: The codes that make a fact an origin of dependency_invalidated / dependency_restricted.
_OWN_VALIDITY = VALIDITY_CODES - {"dependency_invalidated"}
_OWN_VISIBILITY = frozenset({"access_denied", "out_of_scope"})
_ORIGIN_GROUPS = (
    (_OWN_VALIDITY, "dependency_invalidated"),
    (_OWN_VISIBILITY, "dependency_restricted"),
)
_NO_ORIGINS: Origins = (None, None)
_fact_of = operator.attrgetter("fact")
_first = operator.itemgetter(0)


class FactRecord(Protocol):
    """What the phases read of the fold's record of one fact."""

    @property
    def event(self) -> Assert: ...
    @property
    def id(self) -> str: ...
    @property
    def rank(self) -> int: ...
    @property
    def scope(self) -> str: ...
    @property
    def commit_pos(self) -> int | None: ...
    @property
    def commit_event(self) -> str | None: ...
    @property
    def retracted_by(self) -> str | None: ...
    @property
    def retract_reason(self) -> str | None: ...
    @property
    def superseded_by(self) -> FactRecord | None: ...
    @property
    def superseding_event(self) -> str | None: ...
    @property
    def erased_by(self) -> str | None: ...


class _Changes(Protocol):
    @property
    def changes(self) -> Sequence[GrantChange]: ...


class FoldState(Protocol):
    """What the phases read of a finished fold of one tenant."""

    @property
    def facts(self) -> Mapping[str, FactRecord]: ...
    @property
    def order(self) -> Sequence[FactRecord]: ...
    @property
    def experiences(self) -> Sequence[Experience]: ...
    @property
    def positions(self) -> Mapping[str, int]: ...
    @property
    def ignored(self) -> AbstractSet[tuple[str, str, str]]: ...
    @property
    def fact_access(self) -> Mapping[tuple[str, str], _Changes]: ...
    @property
    def key_access(self) -> Mapping[tuple[str, str], _Changes]: ...
    @property
    def key_grant_events(self) -> Sequence[tuple[str, str, int]]: ...


def scope_contains(outer: str, inner: str) -> bool:
    """``global`` contains every scope; ``a`` contains ``a`` and ``a/...``."""
    return outer == "global" or inner == outer or inner.startswith(outer + "/")


def specificity(scope: str) -> int:
    return 0 if scope == "global" else scope.count("/") + 1


# -- phases 1-3, per key -----------------------------------------------------------------


def own_codes(
    facts: Sequence[FactRecord],
    actor: Actor,
    at: datetime,
    policy: Policy,
    access: Access,
    unchanged: Callable[[FactRecord], bool] | None = None,
) -> dict[str, Codes]:
    """Phases 1-3 for the facts of one key (in log order): what each fact's own record, its
    key's rivals and its grants decide. Nothing outside the key is read but its grants.
    ``actor`` is the one ``access`` was made for (it answers the actor's scope and clearance).

    ``unchanged`` (the engine's) says of a fact that its codes are known: none of its inputs
    moved since they were computed and it was no candidate for precedence then (so it is
    none now, and no rival's precedence reads it); such facts are left out of the result."""
    codes: dict[str, Codes] = {}
    candidates = []
    computed = []
    in_scope = access.in_scope
    for fact in facts:
        if unchanged is not None and unchanged(fact):
            continue
        computed.append(fact)
        found = codes[fact.id] = _validity(fact, at)
        if not in_scope(fact.scope):
            found["out_of_scope"] = Reason("out_of_scope", (fact.event.id,))
        if not found:
            candidates.append(fact)
    _precedence(candidates, codes)
    for fact in computed:
        named = access.denial(fact, policy)
        if named is not None:
            codes[fact.id]["access_denied"] = Reason("access_denied", named)
    return codes


def listed(rule: Visibility | None, actor: Actor) -> bool:
    """Phase 3's list: no rule, a rule listing no one, or the actor or one of its roles listed."""
    if rule is None:
        return True
    roles, actors = rule.roles or (), rule.actors or ()
    return (not roles and not actors) or actor.id in actors or any(r in actor.roles for r in roles)


def _validity(fact: FactRecord, at: datetime) -> Codes:
    """Phase 1: the viewer-independent validity codes of one fact at ``at``."""
    e = fact.event
    found: Codes = {}
    if fact.erased_by is not None:  # as of every time: the erase may be after ``at``
        found["erased"] = Reason("erased", (fact.erased_by,))
    if fact.commit_pos is None:
        status = e.status or "committed"
        found[status] = Reason(status, (e.id,))
    if e.valid_from is not None and at < e.valid_from:
        found["not_yet_valid"] = Reason("not_yet_valid", (e.id,))
    if e.valid_until is not None and at >= e.valid_until:
        found["expired"] = Reason("expired", (e.id,))
    if fact.retracted_by is not None:
        found["retracted"] = Reason("retracted", (fact.retracted_by,))
    if fact.superseded_by is not None:
        assert fact.superseding_event is not None
        found["superseded"] = Reason(
            "superseded", (fact.superseding_event,), (fact.superseded_by.id,)
        )
    return found


def _precedence(candidates: list[FactRecord], codes: dict[str, Codes]) -> None:
    """Phase 2 within one key: the highest authority then the most specific scope wins."""
    if len(candidates) < 2:
        return
    top_rank = max(f.rank for f in candidates)
    top_spec = max(specificity(f.scope) for f in candidates if f.rank == top_rank)
    winners = {f.id: f for f in candidates if f.rank == top_rank and specificity(f.scope) == top_spec}
    # A loser names one winner, the smallest id (DESIGN §5 "the winner"): naming every
    # tied winner would make the resolution grow as losers × winners (SPEC §5 size bound).
    first = winners[min(winners)]
    events = (first.commit_event,) if first.commit_event else ()
    reasons = {code: Reason(code, events, (first.id,)) for code in ("outranked", "overridden")}
    for fact in candidates:
        if fact.id not in winners:  # a loser: one (immutable) reason per code serves them all
            code = "outranked" if fact.rank < top_rank else "overridden"
            codes[fact.id][code] = reasons[code]


def _may_see(listed: bool, granted: bool, clears: bool) -> bool:
    """Phase 3's rule: listed (or no list) or granted, and cleared."""
    return (listed or granted) and clears


class Access:
    """Phase 3's grants: whether a grant gives ``actor`` sight of a fact, over one fold.

    Per grantee, the grants and revokes reaching a fact (by fact, or by its key at
    or above its authority) form one stream in log order: any revoke ends, any grant
    starts. A key grant never reaches a fact restricted to named ``actors``. Key
    streams are worked out once per (key, grantee, rank, restriction); make a new
    ``Access`` after the fold has taken more events.
    """

    def __init__(self, fold: FoldState, actor: Actor) -> None:
        self.fold = fold
        self.actor = actor
        self.grantees = (*(f"role:{role}" for role in actor.roles), f"actor:{actor.id}")
        self._streams: dict[tuple[str, str, int, bool], list[GrantChange]] = {}
        self._replays: dict[tuple[str, str, int, bool], tuple[bool, tuple[int, str] | None]] = {}
        # a tenant has few scopes and clearance levels: each answered once per actor
        self._scopes: dict[str, bool] = {}
        self._policy: Policy | None = None
        self._clears: dict[str | None, bool] = {}

    def in_scope(self, scope: str) -> bool:
        """Whether a fact's ``scope`` contains the actor's."""
        known = self._scopes.get(scope)
        if known is None:
            known = self._scopes[scope] = scope_contains(scope, self.actor.scope)
        return known

    def clears(self, level: str | None, policy: Policy) -> bool:
        """Whether the actor's clearance reaches a fact's clearance ``level``."""
        if policy is not self._policy:
            self._policy, self._clears = policy, {}
        known = self._clears.get(level)
        if known is None:
            mine, needed = policy.clearance_rank(self.actor.clearance), policy.clearance_rank(level)
            known = self._clears[level] = mine >= needed
        return known

    def denial(self, fact: FactRecord, policy: Policy) -> tuple[str, ...] | None:
        """The events of the fact's access_denied reason when the actor fails its visibility
        rule, else None. The grants are read only when the rule alone does not admit it."""
        vis = fact.event.visibility
        is_listed = listed(vis, self.actor)
        clears = self.clears(None if vis is None else vis.clearance, policy)
        if is_listed and clears:  # the rule alone admits it: no grant to read
            return None
        granted, access_event = self.events(fact)
        if _may_see(is_listed, granted, clears):
            return None
        if access_event is None or access_event == fact.event.id:
            return (fact.event.id,)
        return tuple(sorted((fact.event.id, access_event)))

    def events(self, fact: FactRecord) -> tuple[bool, str | None]:
        """Whether access is granted at t, and the latest event, over the actor's grantees,
        that changed it."""
        granted = False
        latest: tuple[int, str] | None = None
        restricted = bool(fact.event.visibility and fact.event.visibility.actors)
        key = fact.event.key
        for grantee in self.grantees:
            by_fact = self.fold.fact_access.get((fact.id, grantee))
            if (key, grantee) not in self.fold.key_access and by_fact is None:
                continue
            slot = (key, grantee, fact.rank, restricted)
            if by_fact is None:  # the key's stream alone: one answer per slot
                if slot not in self._replays:
                    self._replays[slot] = _replay(iter(self._key_stream(slot)))
                active, change = self._replays[slot]
            else:
                active, change = _replay(heapq.merge(by_fact.changes, self._key_stream(slot)))
            if change is not None and (latest is None or change[0] > latest[0]):
                latest = change
            granted = granted or active
        return granted, None if latest is None else latest[1]

    def _key_stream(self, slot: tuple[str, str, int, bool]) -> list[GrantChange]:
        if slot not in self._streams:
            key, grantee, rank, restricted = slot
            access = self.fold.key_access.get((key, grantee))
            self._streams[slot] = [
                c for c in (access.changes if access else ())
                if c[3] >= rank and not (c[1] and restricted)
            ]
        return self._streams[slot]


def _replay(changes: Iterator[GrantChange]) -> tuple[bool, tuple[int, str] | None]:
    """One grantee's stream in log order: whether it ends granted, and the (position, event)
    of its last change (a grant of what is granted, or a revoke of what is not, changes nothing)."""
    active = False
    latest = None
    for pos, is_grant, event_id, _ in changes:
        if is_grant != active:
            active = is_grant
            latest = (pos, event_id)
    return active, latest


# -- phase 4, per fact -------------------------------------------------------------------


def inherit(
    fact: FactRecord,
    own: Codes,
    origins: Mapping[str, Origins],
    owns: Mapping[str, Codes],
    *,
    flag: bool,
    failed: Mapping[str, Reason] | None = None,
) -> tuple[Codes, Origins, set[str] | None]:
    """Phase 4 for one fact whose dependencies are decided: its final codes, its origins, and
    (under ``flag``) the stale origins that make it admitted with needs_recheck.

    Per group (validity, visibility), a fact's *origin* is itself when it carries a code of
    the group that is its own (not inherited), else the smallest origin of its dependencies
    in the group. A dependency reason names the direct dependencies having an origin, their
    origins, and the events of the origins' own reasons (``owns``), so its size is bounded
    by the fact's own ``depends_on``. Origins pass through hidden facts too, and in ``flag``
    mode. ``failed`` holds the ``derivation_failed`` reasons of origins (``recompute`` mode).
    """
    deps = fact.event.depends_on
    mine = _own_origins(fact.id, own) if own else _NO_ORIGINS
    if not deps:  # most facts: nothing to inherit (the codes are shared: no phase changes
        return own, mine, None  # a fact's codes once made)
    final = dict(own)
    direct: tuple[dict[str, str], dict[str, str]] = ({}, {})  # per group: dependency -> origin
    for dep in deps:
        for found, source in zip(direct, origins.get(dep) or _NO_ORIGINS, strict=True):
            if source is not None:
                found[dep] = source
    for group, (wanted, code) in enumerate(_ORIGIN_GROUPS):
        found = direct[group]
        if not found or (flag and group == 0):
            continue
        sources = set(found.values())
        events = {e for o in sources for c, r in owns[o].items() if c in wanted for e in r.events}
        if failed and group == 0:
            events.update(e for o in sources if o in failed for e in failed[o].events)
        final[code] = Reason(code, tuple(sorted(events)), tuple(sorted(sources | set(found))))
    recheck = set(direct[0].values()) if flag and direct[0] and not final else None
    validity, visibility = (
        origin if origin is not None else (min(found.values()) if found else None)
        for origin, found in zip(mine, direct, strict=True)
    )
    return final, (validity, visibility), recheck


def _own_origins(fact_id: str, own: Codes) -> Origins:
    """The groups a fact is an origin in by its own codes (``own_codes``': no dependency code,
    so any code but the two visibility ones is a validity code)."""
    hidden = ("out_of_scope" in own) + ("access_denied" in own)
    return (fact_id if len(own) > hidden else None, fact_id if hidden else None)


# -- per fact and per key: the records of the resolution --------------------------------


def recomputed(
    fact: FactRecord,
    final: Codes,
    origin: Origins,
    facts: Mapping[str, FactRecord],
    settled: Callable[[str], Codes | None],
    value_of: Callable[[str], Value],
    *,
    walked: set[str] | None = None,
) -> tuple[Codes, Origins, Computed | None, Reason | None]:
    """Phase 4's result for one fact under ``recompute``: its codes, origins, recomputed value
    and ``derivation_failed`` reason. A recomputed fact is admitted (no codes) and keeps its
    origins, so a dependent without a derivation is invalidated as today; a failed one is an
    origin of ``dependency_invalidated`` itself."""
    result = recompute(fact, final, facts, settled, value_of, walked=walked)
    if result is None:
        return final, origin, None, None
    if isinstance(result, Computed):
        return {}, origin, result, None
    return {FAILED: result}, (fact.id, origin[1]), None, result


def decision(
    fact: FactRecord,
    codes: Codes,
    recheck: bool,
    policy: Policy,
    *,
    computed: Computed | None = None,
) -> Admitted | Excluded:
    """The record a resolution gives one fact."""
    e = fact.event
    if computed is not None:
        return Recomputed(
            fact=fact.id,
            key=e.key,
            value=computed.value,
            scope=fact.scope,
            authority=policy.authority_ladder[fact.rank],
            kind=e.kind or "fact",
            priority=e.priority or "hard",
            inputs=computed.inputs,
            stale=computed.stale,
        )
    if codes:
        reasons = (
            tuple(codes.values()) if len(codes) == 1 else tuple([codes[c] for c in sorted(codes)])
        )
        return Excluded(fact=fact.id, key=e.key, reasons=reasons)
    assert e.value is not None  # an erased value has a phase-1 code: never admitted
    return Admitted(
        fact=fact.id,
        key=e.key,
        value=e.value,
        scope=fact.scope,
        authority=policy.authority_ladder[fact.rank],
        kind=e.kind or "fact",
        priority=e.priority or "hard",
        needs_recheck=recheck,
    )


def key_access_ignored(
    facts: Iterable[FactRecord], grants: Iterable[tuple[str, str, int]]
) -> set[tuple[str, str, str]]:
    """A key-wide grant or revoke (``grants``: event id, key, rank, all of one key) below the
    authority of some fact of the key is ignored once, naming the smallest such fact id."""
    above: dict[int, str] = {}  # rank r -> smallest fact id of the key ranked above r
    grants = list(grants)
    if not grants:
        return set()
    for fact in facts:
        for rank in range(fact.rank):
            if rank not in above or fact.id < above[rank]:
                above[rank] = fact.id
    return {
        (event_id, INSUFFICIENT_AUTHORITY, above[rank])
        for event_id, _, rank in grants
        if rank in above
    }


def known_unknown(
    facts: Iterable[FactRecord], codes: Mapping[str, Codes], policy: Policy
) -> bool:
    """Whether a key is a known unknown: an in-scope fact but no admitted fact (access-hidden
    facts only count when the policy discloses restricted keys)."""
    in_scope = []
    for fact in facts:
        found = codes[fact.id]
        if not found:
            return False
        if "out_of_scope" not in found:
            in_scope.append(found)
    if not in_scope:
        return False
    return bool(policy.restricted_keys) or any(c.keys().isdisjoint(HIDDEN) for c in in_scope)


def _dependency_order(
    later: list[FactRecord],
    facts: Mapping[str, FactRecord],
    owns: Mapping[str, Codes],
    codes: Mapping[str, Codes],
    cycles: dict[str, int],
) -> list[FactRecord]:
    """The facts phase 4 finishes last, each after its dependencies and what its derivation
    may read; ``cycles`` gets the facts that may read each other."""

    def own_of(x: str) -> Codes | None:
        return owns[x] if x in owns else codes.get(x)

    reads = {f.id: [*(f.event.depends_on or ()), *reach(f, facts, own_of)] for f in later}
    order, found = finishing_order([f.id for f in later], reads)
    cycles.update(found)
    return [facts[f] for f in order]


# -- all of it over one fold -------------------------------------------------------------


def conclude(
    fold: FoldState, actor: Actor, at: datetime, policy: Policy, head: str, tree: TreeHead
) -> Resolution:
    """Phases 1-4 over the folded facts of one tenant, then experiences and known unknowns."""
    by_key: dict[str, list[FactRecord]] = defaultdict(list)
    depended_on: set[str] = set()  # only their origins and own codes are kept (and those of
    # the facts with dependencies): a table of every fact's costs, at a million
    for fact in fold.order:
        by_key[fact.event.key].append(fact)
        if fact.event.depends_on:
            depended_on.update(fact.event.depends_on)
    access = Access(fold, actor)
    flag = policy.dependency_mode == "flag"
    recompute_mode = policy.dependency_mode == "recompute"
    failed: dict[str, Reason] = {}
    values: dict[str, Value] = {}
    restated: dict[str, tuple[str, ...]] = {}  # recomputed to another value than stated
    facts_of = fold.facts

    def value_of(fact_id: str) -> Value:  # of an admitted fact: never an erased one
        found = values.get(fact_id)
        if found is None:
            found = facts_of[fact_id].event.value
            assert found is not None
        return found

    owns: dict[str, Codes] = {}
    codes: dict[str, Codes] = {}
    origins: dict[str, Origins] = {}
    recheck: dict[str, set[str]] = {}
    admitted: list[Admitted] = []
    excluded: list[Excluded] = []

    cycles: dict[str, int] = {}  # recompute mode: the derived facts that may read each other

    def finish(fact: FactRecord, own: Codes) -> None:
        fact_id = fact.id
        final, origin, stale = inherit(fact, own, origins, owns, flag=flag, failed=failed)
        computed = None
        if recompute_mode and fact.event.derivation is not None:
            cycle = cycles.get(fact_id)

            def settled(x: str) -> Codes | None:
                return None if cycle is not None and cycles.get(x) == cycle else codes.get(x)

            final, origin, computed, failure = recomputed(
                fact, final, origin, facts_of, settled, value_of
            )
            if failure is not None:
                failed[fact_id] = failure
            if computed is not None:
                values[fact_id] = computed.value
                if computed.stale is not None:
                    restated[fact_id] = computed.inputs.events
        if fact_id in depended_on:
            origins[fact_id] = origin
        codes[fact_id] = final
        if stale is not None:
            recheck[fact_id] = stale
        record = decision(fact, final, stale is not None, policy, computed=computed)
        if isinstance(record, Excluded):
            excluded.append(record)
        else:
            admitted.append(record)

    # A fact without dependencies is finished with its key, while its records are at hand (in
    # cache: at a million events a lookup in a table of every fact costs several times more);
    # the others after every key, in log order: each dependency final before them. So is a
    # key's known unknown, when no fact of the key waits (its own codes are then its codes).
    unknown: list[str] = []
    waiting: list[tuple[str, list[FactRecord]]] = []
    for key, facts in by_key.items():
        own = own_codes(facts, actor, at, policy, access)
        waits = False
        for fact in facts:
            computed_later = bool(fact.event.depends_on) or fact.event.derivation is not None
            if computed_later or fact.id in depended_on:  # what phase 4 reads later
                owns[fact.id] = own[fact.id]
            if computed_later:
                waits = True
            else:
                finish(fact, own[fact.id])
        if waits:
            waiting.append((key, facts))
        elif known_unknown(facts, own, policy):
            unknown.append(key)
    later = [f for f in fold.order if f.event.depends_on or f.event.derivation is not None]
    if recompute_mode and any(f.event.derivation is not None for f in later):
        later = _dependency_order(later, facts_of, owns, codes, cycles)
    for fact in later:  # log order, or dependency order where derivations read (SPEC "Derived
        finish(fact, owns[fact.id])  # values recomputed"): what a fact reads is final before it
    unknown += [key for key, facts in waiting if known_unknown(facts, codes, policy)]
    admitted.sort(key=_fact_of)
    excluded.sort(key=_fact_of)
    grants: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
    for grant in fold.key_grant_events:
        grants[grant[1]].append(grant)
    ignored = set(fold.ignored)
    for key, key_grants in grants.items():
        ignored |= key_access_ignored(by_key.get(key, ()), key_grants)
    admitted_ids = {a.fact for a in admitted}
    replacements: dict[str, str | None] = {}
    return Resolution(
        actor=actor,
        at=at,
        policy=policy.digest,
        log=head,
        tree=tree,
        admitted=tuple(admitted),
        excluded=tuple(excluded),
        experiences=tuple(
            sorted(
                (verdict_of(x, codes, admitted_ids, recheck, memo=replacements, restated=restated)
                 for x in fold.experiences),
                key=lambda v: v.experience,
            )
        ),
        ignored=tuple(Ignored(event=e, code=c, fact=f) for e, c, f in sorted(ignored)),
        known_unknowns=tuple(sorted(unknown)),
        recheck_inputs=tuple(sorted((f, tuple(sorted(o))) for f, o in recheck.items())),
        positions=tuple(sorted(fold.positions.items(), key=_first)),
        retract_reasons=tuple(
            sorted((f.id, f.retract_reason) for f in fold.order if f.retract_reason is not None)
        ),
    )
