"""Γ: the pure resolver S = Γ(H, A, t).

One pass folds the actor's tenant's events (``ts <= t``) into per-fact
records, with per-key indexes for supersession and grants; a second pass over
the facts, in log order, derives every exclusion code and propagates them to
dependents. No I/O, no clock, no randomness: same inputs, same Resolution.

Phases, in the order SPEC.md states them:
1. validity (viewer-independent): draft, hypothetical, not_yet_valid,
   expired, retracted, superseded;
2. scope and precedence among the actor's candidates: out_of_scope,
   outranked, overridden;
3. visibility: access_denied;
4. dependency propagation: dependency_invalidated (or needs_recheck under
   ``flag``), dependency_restricted, transitively.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime

import attrs

from gamma.core.canonical import format_ts, parse_at
from gamma.core.chain import head_of
from gamma.core.decisions import VALIDITY_CODES, Admitted, Excluded, Ignored, Reason
from gamma.core.errors import InputError
from gamma.core.events import canonical_event, normal_actor
from gamma.core.experiences import verdict_of
from gamma.core.handbuilt import checked_log
from gamma.core.merkle import TreeHead, tree_head_of
from gamma.core.model import (
    Actor,
    Assert,
    Event,
    Experience,
    Grant,
    Promote,
    Retract,
    Revoke,
    heard_by,
)
from gamma.core.policy import DEFAULT_POLICY, Policy
from gamma.core.resolution import Resolution

__all__ = ["resolve", "resolve_partition", "scope_contains", "specificity"]

_HIDDEN = frozenset({"access_denied", "dependency_restricted"})
#: The codes that make a fact an origin of dependency_invalidated / dependency_restricted.
_OWN_VALIDITY = VALIDITY_CODES - {"dependency_invalidated"}
_OWN_VISIBILITY = frozenset({"access_denied", "out_of_scope"})
_INSUFFICIENT = "insufficient_authority"
_CAPPED = "authority_capped"


def scope_contains(outer: str, inner: str) -> bool:
    """``global`` contains every scope; ``a`` contains ``a`` and ``a/...``."""
    return outer == "global" or inner == outer or inner.startswith(outer + "/")


def specificity(scope: str) -> int:
    return 0 if scope == "global" else scope.count("/") + 1


@attrs.define
class _Fact:
    """Mutable working record of one fact during the fold (never leaves this module)."""

    event: Assert
    rank: int
    scope: str
    id: str = attrs.field(init=False)
    commit_pos: int | None = None
    commit_event: str | None = None
    retracted_by: str | None = None
    retract_reason: str | None = None
    superseded_by: _Fact | None = None
    superseding_event: str | None = None

    def __attrs_post_init__(self) -> None:
        self.id = self.event.fact

    @property
    def live(self) -> bool:
        return self.retracted_by is None and self.superseded_by is None


@attrs.define
class _Access:
    """Grant and revoke events about one target, in log order: (pos, is_grant, event id, rank)."""

    changes: list[tuple[int, bool, str, int]] = attrs.Factory(list)


class _Fold:
    """The state built by the single pass over the tenant's events."""

    def __init__(self, actor: Actor, policy: Policy) -> None:
        self.actor = actor
        self.policy = policy
        self.facts: dict[str, _Fact] = {}
        self.order: list[_Fact] = []
        self.experiences: list[Experience] = []
        self.positions: dict[str, int] = {}  # fact -> log position of its assert (for text)
        self.ignored: set[tuple[str, str, str]] = set()
        self.live_by_slot: dict[tuple[str, str], list[_Fact]] = defaultdict(list)
        self.pending: list[tuple[datetime, int, str]] = []
        self.fact_access: dict[tuple[str, str], _Access] = defaultdict(_Access)
        self.key_access: dict[tuple[str, str], _Access] = defaultdict(_Access)
        self.key_grant_events: list[tuple[str, str, int]] = []
        self._streams: dict[tuple[str, str, int, bool], list[tuple[int, bool, str, int]]] = {}
        self._replays: dict[tuple[str, str, int, bool], tuple[bool, tuple[int, str] | None]] = {}
        self._ranks: dict[tuple[str | None, str], tuple[int, bool]] = {}
        grantees = [f"role:{role}" for role in actor.roles] + [f"actor:{actor.id}"]
        self.grantees = tuple(grantees)

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
            self.ignored.add((event.id, _CAPPED, target))
        return known[0]

    def on_assert(self, pos: int, event: Assert) -> None:
        fact = _Fact(
            event=event,
            rank=self.rank(event),
            scope=event.scope or "global",
        )
        self.facts[event.fact] = fact
        self.order.append(fact)
        self.positions[event.fact] = pos
        if (event.status or "committed") == "committed":
            self.commit(fact, pos, event.id, event.ts)

    def on_retract(self, pos: int, event: Retract) -> None:
        fact = self.facts[event.fact]
        if self.rank(event) < fact.rank:
            self.ignored.add((event.id, _INSUFFICIENT, fact.id))
        elif fact.retracted_by is None:
            fact.retracted_by = event.id
            fact.retract_reason = event.reason
            self._unslot(fact)

    def on_promote(self, pos: int, event: Promote) -> None:
        fact = self.facts[event.fact]
        if self.rank(event) < fact.rank:
            self.ignored.add((event.id, _INSUFFICIENT, fact.id))
        elif fact.commit_pos is None:
            self.commit(fact, pos, event.id, event.ts)

    def on_access(self, pos: int, event: Grant | Revoke) -> None:
        rank = self.rank(event)
        grantee = f"role:{event.role}" if event.role is not None else f"actor:{event.to_actor}"
        change = (pos, isinstance(event, Grant), event.id, rank)
        if event.fact is not None:
            if rank < self.facts[event.fact].rank:
                self.ignored.add((event.id, _INSUFFICIENT, event.fact))
                return
            self.fact_access[(event.fact, grantee)].changes.append(change)
        else:
            assert event.key is not None
            self.key_access[(event.key, grantee)].changes.append(change)
            self.key_grant_events.append((event.id, event.key, rank))

    def on_experience(self, pos: int, event: Experience) -> None:
        self.experiences.append(event)

    # -- commits, effects and supersession ---------------------------------------------

    def commit(self, fact: _Fact, pos: int, event_id: str, ts: datetime) -> None:
        fact.commit_pos = pos
        fact.commit_event = event_id
        if fact.live:
            self.live_by_slot[(fact.event.key, fact.scope)].append(fact)
        start = fact.event.valid_from
        if start is not None and start > ts:
            heapq.heappush(self.pending, (start, pos, fact.id))
        else:
            self.take_effect(fact)

    def run_pending(self, until: datetime) -> None:
        """Let deferred (``valid_from``) effects due at or before ``until`` happen, in order."""
        while self.pending and self.pending[0][0] <= until:
            _, _, fact_id = heapq.heappop(self.pending)
            self.take_effect(self.facts[fact_id])

    def take_effect(self, fact: _Fact) -> None:
        if not fact.live:
            return
        for target_id in fact.event.supersedes or ():
            target = self.facts[target_id]
            if fact.rank >= target.rank:
                self.supersede(target, fact)
            else:
                self.ignored.add((fact.event.id, _INSUFFICIENT, target_id))
        if self.policy.same_key:
            assert fact.commit_pos is not None
            for other in list(self.live_by_slot[(fact.event.key, fact.scope)]):
                if (
                    other is not fact
                    and other.commit_pos is not None
                    and other.commit_pos < fact.commit_pos
                    and other.rank <= fact.rank
                ):
                    self.supersede(other, fact)

    def supersede(self, old: _Fact, new: _Fact) -> None:
        if not old.live:
            return
        old.superseded_by = new
        old.superseding_event = new.commit_event
        self._unslot(old)

    def _unslot(self, fact: _Fact) -> None:
        slot = self.live_by_slot.get((fact.event.key, fact.scope)) or []
        for index, other in enumerate(slot):
            if other is fact:  # by identity: comparing records field by field costs a hot key dearly
                del slot[index]
                return

    # -- visibility --------------------------------------------------------------------

    def access_events(self, fact: _Fact) -> tuple[bool, str | None]:
        """Whether a grant gives the actor sight of ``fact`` at t, and the event now deciding it.

        Per grantee, the grants and revokes reaching ``fact`` (by fact, or by its key at
        or above its authority) form one stream in log order: any revoke ends, any grant
        starts. A key grant never reaches a fact restricted to named ``actors``. The event
        named is the latest one, over the actor's grantees, that changed access.
        """
        granted = False
        latest: tuple[int, str] | None = None
        restricted = bool(fact.event.visibility and fact.event.visibility.actors)
        for grantee in self.grantees:
            by_fact = self.fact_access.get((fact.id, grantee))
            if (fact.event.key, grantee) not in self.key_access and by_fact is None:
                continue
            key_changes = self._key_stream(fact.event.key, grantee, fact.rank, restricted)
            if by_fact is None:  # the key's stream alone: one answer per key, grantee, rank
                active, change = self._replayed(fact.event.key, grantee, fact.rank, restricted)
            else:
                active, change = _replay(heapq.merge(by_fact.changes, key_changes))
            if change is not None and (latest is None or change[0] > latest[0]):
                latest = change
            granted = granted or active
        return granted, None if latest is None else latest[1]

    def _key_stream(
        self, key: str, grantee: str, rank: int, restricted: bool
    ) -> list[tuple[int, bool, str, int]]:
        """The key's grants and revokes for ``grantee`` that reach a fact of ``rank``, computed once."""
        slot = (key, grantee, rank, restricted)
        if slot not in self._streams:
            access = self.key_access.get((key, grantee))
            self._streams[slot] = [
                c for c in (access.changes if access else ())
                if c[3] >= rank and not (c[1] and restricted)
            ]
        return self._streams[slot]

    def _replayed(
        self, key: str, grantee: str, rank: int, restricted: bool
    ) -> tuple[bool, tuple[int, str] | None]:
        slot = (key, grantee, rank, restricted)
        if slot not in self._replays:
            self._replays[slot] = _replay(iter(self._key_stream(key, grantee, rank, restricted)))
        return self._replays[slot]


def _replay(
    changes: Iterator[tuple[int, bool, str, int]],
) -> tuple[bool, tuple[int, str] | None]:
    """One grantee's stream in log order: any revoke ends, any grant starts. Whether it ends
    granted, and the (position, event) of its last change (a grant of what is granted, or a
    revoke of what is not, changes nothing)."""
    active = False
    latest = None
    for pos, is_grant, event_id, _ in changes:
        if is_grant != active:
            active = is_grant
            latest = (pos, event_id)
    return active, latest


_HANDLERS = {
    Assert: _Fold.on_assert,
    Retract: _Fold.on_retract,
    Promote: _Fold.on_promote,
    Grant: _Fold.on_access,
    Revoke: _Fold.on_access,
    Experience: _Fold.on_experience,
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
    prefix = heard_by(checked_log(events, policy), at)
    canonical = [canonical_event(event) for event in prefix]
    computed = (head_of(canonical), tree_head_of(canonical))
    for name, given, own in (("head", head, computed[0]), ("tree", tree, computed[1])):
        if given is not None and given != own:
            raise InputError(
                f"{given} is not the {name} of the {len(prefix)} events heard by {format_ts(at)}"
                f" ({own})",
                field=name,
            )
    return _resolve(prefix, actor, at, policy, *computed)


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
    The part is validated like any log unless it keeps the reader's mark
    (``gamma.core.parsed.tenant_part``). A head left None is the part's own.
    """
    policy = policy or DEFAULT_POLICY
    actor = normal_actor(actor, policy)
    at = parse_at(at)
    prefix = heard_by(checked_log(events, policy), at)
    if head is None or tree is None:
        canonical = [canonical_event(event) for event in prefix]
        head, tree = head or head_of(canonical), tree or tree_head_of(canonical)
    return _resolve(prefix, actor, at, policy, head, tree)


def _resolve(
    prefix: Sequence[Event], actor: Actor, at: datetime, policy: Policy, head: str, tree: TreeHead
) -> Resolution:
    """The fold over the actor's tenant's events of ``prefix``, then the phases."""
    fold = _Fold(actor, policy)
    for pos, event in enumerate(prefix):
        if event.tenant != actor.tenant:
            continue  # isolation is total: another tenant's events are not in the resolution
        fold.run_pending(event.ts)
        _HANDLERS[type(event)](fold, pos, event)  # type: ignore[operator]
    fold.run_pending(at)
    return _conclude(fold, actor, at, policy, head, tree)


def _conclude(
    fold: _Fold, actor: Actor, at: datetime, policy: Policy, head: str, tree: TreeHead
) -> Resolution:
    """Phases 1-4 over the folded facts, then experiences and known unknowns."""
    codes: dict[str, dict[str, Reason]] = {}
    for fact in fold.order:
        codes[fact.id] = _validity(fact, at)
        if not scope_contains(fact.scope, actor.scope):
            codes[fact.id]["out_of_scope"] = Reason("out_of_scope", (fact.event.id,))
    _precedence(fold, codes)
    clearance = policy.clearance_rank(actor.clearance)
    for fact in fold.order:
        granted, access_event = fold.access_events(fact)
        if not _may_see(fact, actor, granted, clearance, policy):
            named = {fact.event.id} if access_event is None else {fact.event.id, access_event}
            events = tuple(sorted(named))
            codes[fact.id]["access_denied"] = Reason("access_denied", events)
    recheck = _propagate(fold, codes, policy)
    admitted: list[Admitted] = []
    excluded: list[Excluded] = []
    for fact in fold.order:
        reasons = codes[fact.id]
        if reasons:
            ordered = tuple(reasons[code] for code in sorted(reasons))
            excluded.append(Excluded(fact=fact.id, key=fact.event.key, reasons=ordered))
        else:
            e = fact.event
            admitted.append(
                Admitted(
                    fact=fact.id,
                    key=e.key,
                    value=e.value,
                    scope=fact.scope,
                    authority=policy.authority_ladder[fact.rank],
                    kind=e.kind or "fact",
                    priority=e.priority or "hard",
                    needs_recheck=fact.id in recheck,
                )
            )
    _ignore_key_access(fold)
    admitted_ids = {a.fact for a in admitted}
    replacements: dict[str, str | None] = {}
    return Resolution(
        actor=actor,
        at=at,
        policy=policy.digest,
        log=head,
        tree=tree,
        admitted=tuple(sorted(admitted, key=lambda a: a.fact)),
        excluded=tuple(sorted(excluded, key=lambda x: x.fact)),
        experiences=tuple(
            sorted(
                (verdict_of(x, codes, admitted_ids, recheck, memo=replacements)
                 for x in fold.experiences),
                key=lambda v: v.experience,
            )
        ),
        ignored=tuple(
            Ignored(event=e, code=c, fact=f) for e, c, f in sorted(fold.ignored)
        ),
        known_unknowns=_known_unknowns(fold, codes, admitted_ids, policy),
        recheck_inputs=tuple(sorted((f, tuple(sorted(o))) for f, o in recheck.items())),
        positions=tuple(sorted(fold.positions.items())),
        retract_reasons=tuple(
            sorted((f.id, f.retract_reason) for f in fold.order if f.retract_reason is not None)
        ),
    )


def _validity(fact: _Fact, at: datetime) -> dict[str, Reason]:
    """Phase 1: the viewer-independent validity codes of one fact at ``at``."""
    e = fact.event
    found: dict[str, Reason] = {}
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


def _precedence(fold: _Fold, codes: dict[str, dict[str, Reason]]) -> None:
    """Phase 2: per key, the highest authority then the most specific scope wins."""
    by_key: dict[str, list[_Fact]] = defaultdict(list)
    for fact in fold.order:
        if not codes[fact.id]:
            by_key[fact.event.key].append(fact)
    for candidates in by_key.values():
        if len(candidates) < 2:
            continue
        top_rank = max(f.rank for f in candidates)
        top_spec = max(specificity(f.scope) for f in candidates if f.rank == top_rank)
        winners = [f for f in candidates if f.rank == top_rank and specificity(f.scope) == top_spec]
        events = tuple(sorted({w.commit_event for w in winners if w.commit_event}))
        facts = tuple(sorted(w.id for w in winners))
        for fact in candidates:
            if fact in winners:
                continue
            code = "outranked" if fact.rank < top_rank else "overridden"
            codes[fact.id][code] = Reason(code, events, facts)


def _may_see(fact: _Fact, actor: Actor, granted: bool, clearance: int, policy: Policy) -> bool:
    vis = fact.event.visibility
    roles = (vis.roles if vis else None) or ()
    actors = (vis.actors if vis else None) or ()
    listed = (
        (not roles and not actors)
        or actor.id in actors
        or any(role in actor.roles for role in roles)
        or granted
    )
    return listed and clearance >= policy.clearance_rank(vis.clearance if vis else None)


def _propagate(
    fold: _Fold, codes: dict[str, dict[str, Reason]], policy: Policy
) -> dict[str, set[str]]:
    """Phase 4: dependency codes, in log order so every dependency is final before its dependents.

    Per group (validity, visibility), a fact's *origin* is itself when it carries a
    code of the group that is its own (not inherited), else the smallest origin of
    its dependencies in the group. A dependency reason names the direct dependencies
    having an origin, their origins, and the events of the origins' own reasons, so
    its size is bounded by the fact's own ``depends_on`` (a running balance of 8,000
    links names one link each). Origins are tracked whatever the fact's own codes, so
    a validity code reaches every dependent through a hidden fact, also in ``flag``
    mode. Returns the facts admitted with needs_recheck, each with its stale origins.
    """
    flag = policy.dependency_mode == "flag"
    origin: dict[tuple[str, str], str] = {}
    recheck: dict[str, set[str]] = {}
    depended = {dep for fact in fold.order for dep in fact.event.depends_on or ()}
    groups = (("validity", _OWN_VALIDITY), ("visibility", _OWN_VISIBILITY))
    for fact in fold.order:
        own = codes[fact.id]
        if not fact.event.depends_on and (not own or fact.id not in depended):
            continue  # nothing to inherit, and nothing to pass on
        direct: dict[str, dict[str, str]] = {}
        for group, _ in groups:
            direct[group] = {
                dep_id: origin[(dep_id, group)]
                for dep_id in fact.event.depends_on or ()
                if (dep_id, group) in origin
            }
        for group, code in (("validity", "dependency_invalidated"),
                            ("visibility", "dependency_restricted")):
            found = direct[group]
            if not found or (flag and group == "validity"):
                continue
            origins = set(found.values())
            wanted = dict(groups)[group]
            events = {e for o in origins for c, r in codes[o].items() if c in wanted for e in r.events}
            own[code] = Reason(code, tuple(sorted(events)), tuple(sorted(origins | set(found))))
        if flag and direct["validity"] and not own:
            recheck[fact.id] = set(direct["validity"].values())
        if fact.id not in depended:
            continue  # no dependent needs its origin
        for group, wanted in groups:
            if wanted & own.keys():
                origin[(fact.id, group)] = fact.id
            elif direct[group]:
                origin[(fact.id, group)] = min(direct[group].values())
    return recheck


def _ignore_key_access(fold: _Fold) -> None:
    """A key-wide grant or revoke below the authority of some fact of its key is listed once,
    naming the smallest such fact id."""
    if not fold.key_grant_events:
        return
    above: dict[tuple[str, int], str] = {}  # (key, rank r) -> smallest fact id ranked above r
    for fact in fold.order:
        for rank in range(fact.rank):
            slot = (fact.event.key, rank)
            if slot not in above or fact.id < above[slot]:
                above[slot] = fact.id
    for event_id, key, rank in fold.key_grant_events:
        if (key, rank) in above:
            fold.ignored.add((event_id, _INSUFFICIENT, above[(key, rank)]))


def _known_unknowns(
    fold: _Fold, codes: dict[str, dict[str, Reason]], admitted: set[str], policy: Policy
) -> tuple[str, ...]:
    """Keys with an in-scope fact but no admitted fact; access-hidden keys only if disclosed."""
    in_scope: dict[str, list[str]] = defaultdict(list)
    has_value: set[str] = set()
    for fact in fold.order:
        if fact.id in admitted:
            has_value.add(fact.event.key)
        elif "out_of_scope" not in codes[fact.id]:
            in_scope[fact.event.key].append(fact.id)
    keys = []
    for key, facts in in_scope.items():
        if key in has_value:
            continue
        all_hidden = all(_HIDDEN & codes[f].keys() for f in facts)
        if all_hidden and not policy.restricted_keys:
            continue
        keys.append(key)
    return tuple(sorted(keys))
