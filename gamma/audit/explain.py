"""Explain one fact's decision: its timeline, its dependency tree and what would change it.

``explain`` is built on the pure resolver: the decision is ``resolve``'s, and every
"what would change it" is a change of input (a time, the actor, an added event) that
was checked by resolving again with it before it is reported.

The actor's view never shows more than the resolution already does: for a fact hidden
from the actor (``access_denied``, ``dependency_restricted``, ``tenant_isolation``) only
the codes and the events the resolution names; no value, writer, time or counterfactual
(which would reveal the visibility rule). ``auditor=True`` shows everything but an erased
value (SPEC §21): an erased fact's assert is read as its erased copy, even when the log given
still holds the value, so no view, timeline or report shows it.

Work and output are linear in the log (SPEC §5, output size): the log is indexed once, a timeline
visits only the events that can bear on the fact, the dependency tree names each fact's
direct dependencies and lists every further ancestor once, by id (no nested copy of a
chain per node, no recursion on the log's graph), and counterfactual re-resolutions draw
on a budget proportional to the log.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from gamma.core.integrity.commitment import erased_copy
from gamma.core.reading.events import parse_actor
from gamma.core.resolving.recompute import failure_of
from gamma.core.resolving.render import EXPLANATIONS, inert
from gamma.core.resolving.resolution import Resolution
from gamma.core.resolving.resolver import resolve
from gamma.core.terms.canonical import compact_json, format_ts, parse_ts
from gamma.core.terms.decisions import Inputs, Reason, Recomputed, Stale
from gamma.core.terms.derivation import Failure
from gamma.core.terms.model import (
    Actor,
    Assert,
    Erase,
    Event,
    Experience,
    Grant,
    Promote,
    Retract,
    Revoke,
)
from gamma.core.terms.policy import DEFAULT_POLICY, Policy

__all__ = ["Step", "Counterfactual", "Node", "Explanation", "Index", "Checker", "explain", "explain_in",
           "apply_changes"]

_HIDDEN = frozenset({"access_denied", "dependency_restricted", "tenant_isolation"})
_OPTIONAL = ("derivation", "inputs", "stale", "failure")
_TICK = timedelta(microseconds=1)
# Counterfactual re-resolutions per explanation (or per report): this many times the log's
# events, plus a fixed allowance so that small logs try every candidate.
_BUDGET_TIMES = 8
_BUDGET_EVENTS = 1 << 15
_ANSWERS_KEPT = 2  # re-resolutions kept for reuse (a change shared by many facts)


@attrs.frozen(kw_only=True)
class Step:
    """One event (or a validity boundary, position ``None``) that bears on the fact."""

    position: int | None
    event: str | None
    ts: str | None
    type: str
    writer: str | None
    did: str
    facts: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Counterfactual:
    """A change of input that removes ``code`` from the fact; ``verified`` by re-resolving."""

    code: str
    changes: tuple[dict[str, str], ...]
    verified: bool = True


@attrs.frozen(kw_only=True)
class Node:
    """A fact in a dependency tree with its codes at t; ``depends_on`` names its own
    dependencies by id (``children`` is filled on the explained fact only)."""

    fact: str
    codes: tuple[str, ...]
    children: tuple[Node, ...] = ()
    depends_on: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Explanation:
    fact: str
    actor: str
    at: str
    decision: str  # admitted | excluded | unknown
    key: str | None
    value: Any
    reasons: tuple[Reason, ...]
    timeline: tuple[Step, ...]
    tree: Node | None
    changes: tuple[Counterfactual, ...]
    auditor: bool
    hidden: bool
    # every further ancestor once (breadth first), each naming its dependencies by id
    upstream: tuple[Node, ...] = ()
    # False when the counterfactual budget ran out before every candidate change was tried
    complete: bool = True
    # issue 29, written only when present: the fact's stated derivation (when the view may
    # show the fact), and for a recomputed value the inputs it used and the stale stated value
    derivation: str | None = None
    inputs: Inputs | None = None
    stale: Stale | None = None
    # for a derivation_failed fact the view may show: why the evaluation gave no value
    failure: Failure | None = None

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(r.code for r in self.reasons)

    def to_dict(self) -> dict[str, Any]:
        # a JSON round trip: nested tuples (changes) become lists, as any reader sees them
        parsed: dict[str, Any] = json.loads(compact_json(attrs.asdict(self)))
        for name in _OPTIONAL:
            if parsed[name] is None:
                del parsed[name]
        return parsed

    def to_json(self) -> str:
        return compact_json(self.to_dict())

    def render(self) -> str:
        """Readable lines: decision, reasons, timeline, tree, what would change it."""
        head = f"{inert(self.fact)} for {inert(self.actor)} at {self.at}: {self.decision.upper()}"
        if self.key is not None:
            head += f" (key {inert(self.key)})"
        out = [head + (" [auditor view]" if self.auditor else "")]
        if self.value is not None:
            out.append(f"  value {compact_json(self.value)}")
        if self.derivation is not None:
            out.append(f"  derivation {compact_json(self.derivation)}")
        if self.inputs is not None:
            used = ", ".join(inert(f) for f in self.inputs.facts)
            out.append(f"  recomputed from {used} [{' '.join(self.inputs.events)}]" if used
                       else "  recomputed (from constants only)")
        if self.stale is not None:
            out.append(f"  {self.stale.code}: the stated value {compact_json(self.stale.value)}"
                       f" is withheld ({EXPLANATIONS[self.stale.code]})")
        for r in self.reasons:
            tail = f" -> {', '.join(inert(f) for f in r.facts)}" if r.facts else ""
            out.append(f"  {r.code}: {EXPLANATIONS[r.code]}{tail} [{' '.join(r.events)}]")
        if self.failure is not None:
            out.append(f"  its evaluation failed ({self.failure.code}) at {inert(self.failure.detail)}")
        out.append("TIMELINE")
        for s in self.timeline:
            pos = "-" if s.position is None else str(s.position)
            where = " ".join(x for x in (s.ts, s.event and inert(s.event), s.type, s.writer and inert(s.writer)) if x)
            out.append(f"  {pos:>4}  {where}: {_line(s.did)}")
        if self.tree is not None:
            out.append("DEPENDENCIES")
            out.append(_node_line(self.tree, 1))
            out += [_node_line(child, 2) for child in self.tree.children]
            if self.upstream:
                out.append("  further upstream:")
                out += [_node_line(node, 2) for node in self.upstream]
        if self.decision == "excluded":
            out.append("WHAT WOULD CHANGE IT")
            if not self.changes and not self.complete:
                out.append("  (not worked out here: the re-resolution budget ran out; "
                           "gamma explain on this fact alone tries every candidate)")
            elif not self.changes:
                out.append("  (nothing the actor's view may show)" if self.hidden and not self.auditor
                           else "  (nothing: no change of input removes these codes)")
            causes = {r.code: r.events for r in self.reasons}
            for c in self.changes:
                why = f" (from {', '.join(inert(e) for e in causes[c.code])})" if causes.get(c.code) else ""
                out.append(f"  {c.code}{why} would not apply " + " and ".join(_phrase(x) for x in c.changes)
                           + "; checked by resolving again with that change.")
        elif self.hidden:
            out.append("  (details withheld from this actor)")
        return "\n".join(out) + "\n"


def _phrase(change: dict[str, str]) -> str:
    """One change of input as words (the JSON form is in ``changes``)."""
    kind = change["kind"]
    fact = inert(change.get("fact", ""))
    by = f" by a writer of authority {inert(change['authority'])}" if change.get("authority") else ""
    if kind == "at":
        return (f"if asked before {change['before']}" if "before" in change
                else f"if asked at {change['at_least']} or later")
    if kind == "scope":
        return f"if the actor works in scope {inert(change['within'])}"
    if kind == "clearance":
        return f"if the actor holds clearance {inert(change['at_least'])}"
    if kind == "role":
        return f"if the actor holds role {inert(change['role'])}"
    if kind == "authority":
        return f"if {fact} had been asserted with authority {inert(change['at_least'])}"
    if kind == "without_event":
        return f"if event {inert(change['event'])} were not in the log"
    if kind == "promote":
        return f"if {fact} were committed by a promote{by}"
    if kind == "grant":
        to = f"role {inert(change['role'])}" if change.get("role") else f"actor {inert(change.get('to_actor', ''))}"
        return f"if {fact} were granted to {to}{by}"
    return compact_json(change)


def _line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _node_line(node: Node, depth: int) -> str:
    deps = f" <- {', '.join(inert(d) for d in node.depends_on)}" if node.depends_on else ""
    return f"{'  ' * depth}{inert(node.fact)} {', '.join(node.codes) or 'admitted'}{deps}"


def _fact_reasons(resolution: Resolution, fact: str) -> tuple[str, tuple[Reason, ...]]:
    if resolution.admitted_fact(fact) is not None:
        return "admitted", ()
    excluded = resolution.excluded_fact(fact)
    if excluded is None:
        return "unknown", ()
    return "excluded", excluded.reasons


@attrs.frozen(kw_only=True)
class Index:
    """The log read once for any number of explanations against one resolution: where each
    fact and key is named, so a timeline visits only the events that can bear on it."""

    events: Sequence[Event]
    res: Resolution
    policy: Policy
    asserts: dict[str, Assert]
    assert_pos: dict[str, int]
    own: dict[str, list[int]]  # events whose ``fact`` is the fact
    naming: dict[str, list[int]]  # own, plus asserts naming it in ``supersedes``
    by_key: dict[str, list[int]]  # asserts of the key, and grants/revokes of the whole key
    by_id: dict[str, int]
    cutoff: int  # the first position after t
    hidden: frozenset[str]  # facts whose codes hide them from the actor
    ignored_events: dict[str, list[str]]  # fact -> events ignored about it
    ignored: frozenset[tuple[str, str | None]]

    @classmethod
    def build(cls, events: Sequence[Event], res: Resolution, policy: Policy) -> Index:
        events = _without_erased_values(events, res)
        asserts: dict[str, Assert] = {}
        assert_pos: dict[str, int] = {}
        own: dict[str, list[int]] = {}
        naming: dict[str, list[int]] = {}
        by_key: dict[str, list[int]] = {}
        by_id: dict[str, int] = {}
        cutoff = len(events)
        for pos, e in enumerate(events):
            by_id[e.id] = pos
            if cutoff == len(events) and e.ts > res.at:
                cutoff = pos
            fact = getattr(e, "fact", None)
            if isinstance(fact, str):
                own.setdefault(fact, []).append(pos)
                naming.setdefault(fact, []).append(pos)
            if isinstance(e, Assert):
                asserts[e.fact] = e
                assert_pos[e.fact] = pos
                by_key.setdefault(e.key, []).append(pos)
                for old in dict.fromkeys(e.supersedes or ()):
                    if old != e.fact:
                        naming.setdefault(old, []).append(pos)
            elif isinstance(e, (Grant, Revoke)) and e.fact is None and e.key is not None:
                by_key.setdefault(e.key, []).append(pos)
        ignored_events: dict[str, list[str]] = {}
        for i in res.ignored:
            if i.fact is not None:
                ignored_events.setdefault(i.fact, []).append(i.event)
        hidden = frozenset(x.fact for x in res.excluded if {r.code for r in x.reasons} & _HIDDEN)
        return cls(events=events, res=res, policy=policy, asserts=asserts, assert_pos=assert_pos,
                   own=own, naming=naming, by_key=by_key, by_id=by_id, cutoff=cutoff,
                   hidden=hidden, ignored_events=ignored_events,
                   ignored=frozenset((i.event, i.fact) for i in res.ignored))


def _without_erased_values(events: Sequence[Event], res: Resolution) -> Sequence[Event]:
    """``events`` with each erased fact's assert (named by an erase event of the log, or
    excluded as ``erased``) replaced by its copy without value and salt: what an explanation
    reads never holds an erased value."""
    erased = {x.fact for x in res.excluded if "erased" in x.codes}
    erased.update(item.fact for e in events if isinstance(e, Erase) for item in e.erased)
    if not erased:
        return events
    return [
        erased_copy(e) if isinstance(e, Assert) and e.fact in erased and e.value is not None
        and (e.salt is not None or e.commitment is not None) else e
        for e in events
    ]


@attrs.define
class Checker:
    """Re-resolves a candidate change, within a budget of events resolved (a constant times
    the log, plus a fixed allowance for small logs) and reusing the last few answers, so
    that explaining every fact of a log (the report) stays linear in the log."""

    events: Sequence[Event]
    actor: Actor
    at: datetime
    policy: Policy
    left: int
    answers: dict[str, Resolution | None] = attrs.Factory(dict)

    @classmethod
    def for_log(cls, events: Sequence[Event], res: Resolution, policy: Policy) -> Checker:
        budget = _BUDGET_TIMES * (len(events) + 1) + _BUDGET_EVENTS
        return cls(events=events, actor=res.actor, at=res.at, policy=policy, left=budget)

    def removes(self, fact: str, code: str, changes: Sequence[dict[str, str]]) -> bool | None:
        """Whether ``changes`` remove ``code`` from ``fact``; None when the budget is spent."""
        key = compact_json(list(changes))
        if key not in self.answers:
            cost = len(self.events) + 1
            if cost > self.left:
                return None
            self.left -= cost
            if len(self.answers) >= _ANSWERS_KEPT:
                del self.answers[next(iter(self.answers))]
            self.answers[key] = self._resolve(changes)
        res = self.answers[key]
        if res is None:
            return False
        excluded = res.excluded_fact(fact)
        present = res.admitted_fact(fact) is not None or excluded is not None
        return present and (excluded is None or code not in excluded.codes)

    def _resolve(self, changes: Sequence[dict[str, str]]) -> Resolution | None:
        try:
            new_events, new_actor, new_at = apply_changes(self.events, self.actor, self.at, changes)
            return resolve(new_events, new_actor, new_at, self.policy)
        except (ValueError, KeyError):
            return None


def explain(
    events: Sequence[Event],
    fact: str,
    actor: Actor | dict[str, object],
    at: datetime | str,
    *,
    policy: Policy | None = None,
    auditor: bool = False,
    resolution: Resolution | None = None,
) -> Explanation:
    """Why ``fact`` is admitted or excluded for ``actor`` at ``at``, and what would change it."""
    policy = policy or DEFAULT_POLICY
    if isinstance(actor, dict):
        actor = parse_actor(actor, policy=policy)
    if isinstance(at, str):
        at = parse_ts(at)
    res = resolution or resolve(events, actor, at, policy)
    index = Index.build(events, res, policy)
    return explain_in(index, fact, auditor=auditor, checker=Checker.for_log(events, res, policy))


def explain_in(index: Index, fact: str, *, auditor: bool, checker: Checker,
               brief: bool = False) -> Explanation:
    """``explain`` over an already built index. ``brief`` (the report, which shows every fact
    once) keeps to the fact's own events and those of its non-dependency reasons, and names
    its direct dependencies by id; the full view adds the events naming it, its key's rivals
    and grants, the dependency reasons' events and every ancestor with its events."""
    res = index.res
    decision, reasons = _fact_reasons(res, fact)
    codes = {r.code for r in reasons}
    hidden = bool(codes & _HIDDEN)
    fact_event = index.asserts.get(fact)
    admitted = res.admitted_fact(fact)
    if auditor:  # the value relied on, else the one the log states (withheld: shown here)
        value = admitted.value if admitted is not None else (
            fact_event.value if fact_event is not None else None)
    else:
        value = admitted.value if admitted is not None else None
    named = {e for r in reasons for e in r.events} | set(index.ignored_events.get(fact, ()))
    timeline = _timeline(index, fact, brief=brief)
    if not auditor:
        if hidden or decision == "unknown":
            timeline = [
                Step(position=None, event=s.event, ts=None, type=s.type, writer=None,
                     did=_hidden_did(s.event, reasons))
                for s in timeline if s.event in named
            ]
        else:
            timeline = [_mask(s, index.hidden) for s in timeline]
            stale = isinstance(admitted, Recomputed) and admitted.stale is not None
            if (admitted is None or stale) and fact_event is not None:  # its value is withheld
                why = "stale, recomputed" if stale else "not admitted"
                own = _describe_assert(fact_event, with_value=False, why=why)
                timeline = [attrs.evolve(s, did=own) if s.event == fact_event.id else s
                            for s in timeline]
    tree: Node | None = None
    upstream: tuple[Node, ...] = ()
    if fact_event is not None and fact_event.depends_on and (auditor or not hidden):
        tree, upstream = _tree(index, fact, auditor, brief=brief)
    changes: list[Counterfactual] = []
    complete = True
    if decision == "excluded" and (auditor or not hidden):
        for reason in reasons:
            found, done = _counterfactuals(index, fact, reason, checker)
            changes += found
            complete = complete and done
    shown = fact_event is not None and (auditor or not (hidden or decision == "unknown"))
    recomputed = admitted if isinstance(admitted, Recomputed) else None
    failure = _failure(index, fact_event) if shown and "derivation_failed" in codes else None
    return Explanation(
        fact=fact, actor=res.actor.id, at=format_ts(res.at), decision=decision,
        key=_fact_key(res, fact, fact_event if auditor else None),
        value=value, reasons=reasons, timeline=tuple(timeline), tree=tree,
        changes=tuple(changes), auditor=auditor, hidden=hidden, upstream=upstream,
        complete=complete,
        derivation=fact_event.derivation if shown and fact_event is not None else None,
        inputs=recomputed.inputs if recomputed is not None else None,
        # the stale stated value is withheld like any other: shown to the auditor only
        stale=recomputed.stale if recomputed is not None and auditor else None,
        failure=failure,
    )


def _failure(index: Index, event: Assert | None) -> Failure | None:
    """The failed evaluation of a derivation_failed fact, read again from the resolution (its
    inputs were admitted to the actor, or it would be dependency_restricted instead)."""
    if event is None:
        return None
    res = index.res

    def settled(fact: str) -> dict[str, Reason] | None:
        if res.admitted_fact(fact) is not None:
            return {}
        excluded = res.excluded_fact(fact)
        return None if excluded is None else {r.code: r for r in excluded.reasons}

    def key_of(fact: str) -> str | None:
        found = index.asserts.get(fact)
        return None if found is None else found.key

    values = {a.fact: a.value for a in res.admitted}  # a walk ends only at an admitted fact
    return failure_of(event, key_of, settled, values.__getitem__)


def _fact_key(res: Resolution, fact: str, event: Assert | None) -> str | None:
    if event is not None:
        return event.key
    admitted, excluded = res.admitted_fact(fact), res.excluded_fact(fact)
    return admitted.key if admitted is not None else excluded.key if excluded is not None else None


def _hidden_did(event: str | None, reasons: tuple[Reason, ...]) -> str:
    codes = [r.code for r in reasons if event in r.events]
    return "; ".join(f"{c}: {EXPLANATIONS[c]}" for c in codes)


def _mask(step: Step, hidden_facts: frozenset[str]) -> Step:
    """Actor view of a visible fact's step: a hidden other fact is named by id only."""
    if hidden_facts.intersection(step.facts):
        return attrs.evolve(step, writer=None, ts=None, did=f"an event about {', '.join(step.facts)}")
    return step


def _describe_assert(e: Assert, *, with_value: bool = True, why: str = "not admitted") -> str:
    if e.value is None:
        shown = "(value erased)"
    else:
        shown = compact_json(e.value) if with_value else f"(value not shown: {why})"
    parts = [f"asserted {inert(e.key)} = {shown}"]
    status = e.status or "committed"
    parts.append(status if status != "committed" else "committed")
    if e.authority:
        parts.append(f"authority {e.authority}")
    if e.scope:
        parts.append(f"scope {e.scope}")
    if e.valid_from:
        parts.append(f"valid from {format_ts(e.valid_from)}")
    if e.valid_until:
        parts.append(f"valid until {format_ts(e.valid_until)}")
    if e.depends_on:
        parts.append(f"depends on {', '.join(e.depends_on)}")
    return "; ".join(parts)


def _positions(index: Index, fact: str, target: Assert, reasons: tuple[Reason, ...],
               ancestors: dict[str, str], *, brief: bool) -> list[int]:
    """The positions (before t) of every event that can give the fact's timeline a step."""
    found = set(index.own.get(fact, ()))
    for r in reasons:
        if not r.code.startswith("dependency_"):  # one or two events, one fact
            found.update(index.by_id[e] for e in r.events if e in index.by_id)
            found.update(index.assert_pos[f] for f in r.facts if f in index.assert_pos)
    if not brief:  # each of these may bear on many facts: not once per fact in a report
        found.update(index.naming.get(fact, ()))
        found.update(index.by_id[e] for r in reasons for e in r.events if e in index.by_id)
        found.update(index.by_key.get(target.key, ()))
        for f in ancestors:
            found.update(index.own.get(f, ()))
    return sorted(p for p in found if p < index.cutoff)


def _timeline(index: Index, fact: str, *, brief: bool) -> list[Step]:
    res, policy = index.res, index.policy
    target = index.asserts.get(fact)
    if target is None:
        return []
    _, reasons = _fact_reasons(res, fact)
    by_code = {r.code: r for r in reasons}
    ignored = index.ignored
    grantees = {f"role:{r}" for r in res.actor.roles} | {f"actor:{res.actor.id}"}
    dep_events: dict[str, str] = {}
    for code in ("dependency_invalidated", "dependency_restricted"):
        if code in by_code:
            for ev in by_code[code].events:
                dep_events[ev] = code
    ancestors = _ancestors(fact, index.asserts, direct_only=brief)
    steps: list[Step] = []
    for pos in _positions(index, fact, target, reasons, ancestors, brief=brief):
        e = index.events[pos]
        if e.tenant != target.tenant or isinstance(e, Experience):
            continue
        did = ""
        facts: tuple[str, ...] = ()
        if isinstance(e, Assert):
            if e.fact == fact:
                did = _describe_assert(e)
            elif fact in (e.supersedes or ()):
                facts = (e.fact,)
                if (e.id, fact) in ignored:
                    did = f"{e.fact} tried to supersede it (explicit supersedes), ignored: insufficient authority"
                elif "superseded" in by_code and e.fact in by_code["superseded"].facts:
                    did = f"superseded by {e.fact} (explicit supersedes)"
                else:
                    did = f"{e.fact} names it in supersedes (no effect at t)"
            elif e.key == target.key:
                facts = (e.fact,)
                did = _same_key(e, by_code)
            elif e.fact in ancestors:
                facts = (e.fact,)
                did = f"dependency {ancestors[e.fact]} asserted"
        elif isinstance(e, (Retract, Promote)):
            verb = "retract" if isinstance(e, Retract) else "promote"
            if e.fact == fact:
                if (e.id, fact) in ignored:
                    did = f"{verb} ignored: insufficient authority ({e.authority or policy.authority_default})"
                elif isinstance(e, Retract):
                    did = "retracted" + (f": {compact_json(e.reason)}" if e.reason is not None else "")
                else:
                    did = "committed by promote"
            elif e.fact in ancestors:
                facts = (e.fact,)
                did = f"dependency {ancestors[e.fact]}: {verb}"
                if isinstance(e, Retract) and e.reason is not None:
                    did += f" ({compact_json(e.reason)})"
        elif isinstance(e, (Grant, Revoke)):
            if e.fact == fact or (e.fact is None and e.key == target.key):
                grantee = f"role:{e.role}" if e.role is not None else f"actor:{e.to_actor}"
                what = f"{e.TYPE} {'of the key ' if e.fact is None else ''}to {grantee}"
                if (e.id, fact) in ignored:
                    did = f"{what} ignored: insufficient authority ({e.authority or policy.authority_default})"
                elif grantee in grantees:
                    did = f"{what}: changed this actor's access"
                else:
                    did = f"{what}: not this actor"
        elif isinstance(e, Erase) and any(item.fact == fact for item in e.erased):
            did = f"value erased (basis: {compact_json(e.basis)}); its commitment stays in the log"
        if e.id in dep_events and fact != getattr(e, "fact", None):
            origin = getattr(e, "fact", "")
            path = ancestors.get(origin, origin)
            did = (did + "; " if did else "") + f"propagated as {dep_events[e.id]} via {path}"
        if did:
            steps.append(Step(position=pos, event=e.id, ts=format_ts(e.ts), type=e.TYPE,
                              writer=e.actor, did=did, facts=facts))
    return _with_window(steps, target, res.at)


def _same_key(e: Assert, by_code: dict[str, Reason]) -> str:
    for code in ("superseded", "outranked", "overridden"):
        if code in by_code and e.fact in by_code[code].facts:
            why = {"superseded": "same key and scope, newer and at least as high authority",
                   "outranked": "higher authority", "overridden": "same authority, more specific scope"}
            verb = "superseded" if code == "superseded" else code
            return f"{verb} by {e.fact} ({why[code]})"
    return f"another fact of the key: {e.fact}"


def _with_window(steps: list[Step], target: Assert, at: datetime) -> list[Step]:
    marks = []
    if target.valid_from is not None and target.valid_from <= at:
        marks.append((target.valid_from, "window opened (valid_from)"))
    if target.valid_until is not None and target.valid_until <= at:
        marks.append((target.valid_until, "window closed (valid_until)"))
    for ts, did in marks:
        step = Step(position=None, event=None, ts=format_ts(ts), type="window", writer=None, did=did)
        index = len(steps)
        for i, s in enumerate(steps):
            if s.ts is not None and parse_ts(s.ts) > ts:
                index = i
                break
        steps.insert(index, step)
    return steps


def _ancestors(fact: str, asserts: dict[str, Assert], *, direct_only: bool = False) -> dict[str, str]:
    """Every fact ``fact`` depends on, transitively (or only directly), breadth first, each
    with the edge it was first reached by (``F16 <- F8``): one edge, not the whole path, so
    a chain of n links costs n, not n²."""
    found: dict[str, str] = {}
    frontier = deque([fact])
    while frontier:
        current = frontier.popleft()
        event = asserts.get(current)
        for dep in (event.depends_on or ()) if event is not None else ():
            if dep not in found and dep != fact:
                found[dep] = f"{current} <- {dep}"
                if not direct_only:
                    frontier.append(dep)
    return found


def _tree(index: Index, fact: str, auditor: bool, *, brief: bool) -> tuple[Node, tuple[Node, ...]]:
    """The fact with its direct dependencies as children, and (unless ``brief``) every further
    ancestor once, breadth first. A fact hidden from the actor is shown with its codes but its
    own dependencies are not followed (the auditor sees them)."""

    def node(f: str) -> Node:
        codes = tuple(r.code for r in _fact_reasons(index.res, f)[1])
        event = index.asserts.get(f)
        follow = event is not None and (auditor or f == fact or f not in index.hidden)
        follow = follow and (f == fact or not brief)  # brief: a dependency's own section has them
        deps = tuple(event.depends_on or ()) if follow and event is not None else ()
        return Node(fact=f, codes=codes, depends_on=deps)

    root = node(fact)
    children = tuple(node(dep) for dep in root.depends_on)
    seen = {fact, *root.depends_on}
    upstream: list[Node] = []
    frontier = deque(children) if not brief else deque()
    while frontier:
        for dep in frontier.popleft().depends_on:
            if dep not in seen:
                seen.add(dep)
                upstream.append(node(dep))
                frontier.append(upstream[-1])
    return attrs.evolve(root, children=children), tuple(upstream)


# -- what would change it ---------------------------------------------------------------


def apply_changes(
    events: Sequence[Event], actor: Actor, at: datetime, changes: Sequence[dict[str, str]]
) -> tuple[Sequence[Event], Actor, datetime]:
    """The inputs with ``changes`` applied: a new time, actor fields, or an added event at t.
    The log is passed on as it is (a log as read is not validated again) unless a change
    edits it."""
    out: Sequence[Event] = events
    for change in changes:
        kind = change["kind"]
        if kind == "at":
            at = parse_ts(change["before"]) - _TICK if "before" in change else parse_ts(change["at_least"])
        elif kind == "scope":
            actor = attrs.evolve(actor, scope=change["within"])
        elif kind == "clearance":
            actor = attrs.evolve(actor, clearance=change["at_least"])
        elif kind == "role":
            actor = attrs.evolve(actor, roles=tuple(sorted({*actor.roles, change["role"]})))
        elif kind == "authority":
            out = [attrs.evolve(e, authority=change["at_least"])
                   if isinstance(e, Assert) and e.fact == change["fact"] else e for e in out]
        elif kind == "without_event":
            out = [e for e in out if e.id != change["event"]]
        elif kind in ("grant", "promote"):
            out = _insert(out, at, kind, change, actor.tenant)
        else:
            raise ValueError(f"unknown change kind {kind!r}")
    return out, actor, at


def _insert(events: Sequence[Event], at: datetime, kind: str, change: dict[str, str], tenant: str) -> list[Event]:
    prefix = [e for e in events if e.ts <= at]
    taken = {e.id for e in events}
    new_id = "counterfactual"
    while new_id in taken:
        new_id += "'"
    common: dict[str, Any] = {"id": new_id, "ts": at, "actor": "counterfactual", "tenant": tenant,
                              "fact": change["fact"], "authority": change.get("authority")}
    added: Event
    if kind == "promote":
        added = Promote(**common)
    else:
        added = Grant(**common, role=change.get("role"), to_actor=change.get("to_actor"))
    return [*prefix, added, *events[len(prefix):]]


def _candidates(index: Index, fact: str, reason: Reason) -> list[list[dict[str, str]]]:
    res, asserts, policy = index.res, index.asserts, index.policy
    e = asserts[fact]
    authority = e.authority or policy.authority_default
    code = reason.code
    if code in ("draft", "hypothetical"):
        return [[{"kind": "promote", "fact": fact, "authority": authority}]]
    if code == "not_yet_valid" and e.valid_from is not None:
        return [[{"kind": "at", "at_least": format_ts(e.valid_from)}]]
    if code == "expired" and e.valid_until is not None:
        return [[{"kind": "at", "before": format_ts(e.valid_until)}]]
    if code == "derivation_failed":  # an input's value as it was before the event that set it
        return [[{"kind": "without_event", "event": x}] for x in reason.events if x != e.id]
    if code in ("retracted", "superseded") and reason.events:
        return [[{"kind": "at", "before": format_ts(index.events[index.by_id[reason.events[0]]].ts)}],
                [{"kind": "without_event", "event": reason.events[0]}]]
    if code == "outranked":
        top = max((asserts[f].authority or policy.authority_default for f in reason.facts),
                  key=policy.authority_rank)
        return [[{"kind": "authority", "fact": fact, "at_least": top}],
                [{"kind": "scope", "within": e.scope or "global"}]]
    if code in ("overridden", "out_of_scope"):
        return [[{"kind": "scope", "within": e.scope or "global"}]]
    if code == "access_denied":
        vis = e.visibility
        change: list[dict[str, str]] = []
        if vis is not None and vis.clearance is not None and (
            policy.clearance_rank(res.actor.clearance) < policy.clearance_rank(vis.clearance)
        ):
            change.append({"kind": "clearance", "at_least": vis.clearance})
        listed = vis is None or (not vis.roles and not vis.actors) or res.actor.id in (vis.actors or ()) \
            or bool(set(vis.roles or ()) & set(res.actor.roles))
        options = [change]
        if not listed:
            roles = list(vis.roles or ()) if vis is not None else []
            options = [[*change, {"kind": "grant", "fact": fact, "role": r, "authority": authority}]
                       for r in roles]
            options.append([*change, {"kind": "grant", "fact": fact, "to_actor": res.actor.id,
                                      "authority": authority}])
        return [o for o in options if o]
    return []


def _counterfactuals(index: Index, fact: str, reason: Reason,
                     checker: Checker) -> tuple[list[Counterfactual], bool]:
    """The first verified candidate change for the code (none for tenant_isolation), and
    whether every candidate before it could be tried within the checker's budget."""
    if reason.code == "tenant_isolation" or fact not in index.asserts:
        return [], True
    if reason.code.startswith("dependency_"):
        options: list[list[dict[str, str]]] = []
        for origin in reason.facts:
            _, origin_reasons = _fact_reasons(index.res, origin)
            for r in origin_reasons:
                if not r.code.startswith("dependency_") and origin in index.asserts:
                    options += _candidates(index, origin, r)
    else:
        options = _candidates(index, fact, reason)
    for option in options:
        removed = checker.removes(fact, reason.code, option)
        if removed is None:
            return [], False
        if removed:
            return [Counterfactual(code=reason.code, changes=tuple(option))], True
    return [], True
