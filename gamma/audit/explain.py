"""Explain one fact's decision: its timeline, its dependency tree and what would change it.

``explain`` is built on the pure resolver: the decision is ``resolve``'s, and every
"what would change it" is a change of input (a time, the actor, an added event) that
was checked by resolving again with it before it is reported.

The actor's view never shows more than the resolution already does: for a fact hidden
from the actor (``access_denied``, ``dependency_restricted``, ``tenant_isolation``) only
the codes and the events the resolution names; no value, writer, time or counterfactual
(which would reveal the visibility rule). ``auditor=True`` shows everything.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from gamma.core.canonical import compact_json, format_ts, parse_ts
from gamma.core.decisions import Reason
from gamma.core.events import parse_actor
from gamma.core.model import Actor, Assert, Event, Experience, Grant, Promote, Retract, Revoke
from gamma.core.policy import DEFAULT_POLICY, Policy
from gamma.core.render import EXPLANATIONS, inert
from gamma.core.resolution import Resolution
from gamma.core.resolver import resolve

__all__ = ["Step", "Counterfactual", "Node", "Explanation", "explain", "apply_changes"]

_HIDDEN = frozenset({"access_denied", "dependency_restricted", "tenant_isolation"})
_TICK = timedelta(microseconds=1)


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
    """A fact in a dependency tree with its codes at t."""

    fact: str
    codes: tuple[str, ...]
    children: tuple[Node, ...] = ()


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

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(r.code for r in self.reasons)

    def to_dict(self) -> dict[str, Any]:
        # a JSON round trip: nested tuples (changes) become lists, as any reader sees them
        parsed: dict[str, Any] = json.loads(compact_json(attrs.asdict(self)))
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
        for r in self.reasons:
            tail = f" -> {', '.join(inert(f) for f in r.facts)}" if r.facts else ""
            out.append(f"  {r.code}: {EXPLANATIONS[r.code]}{tail} [{' '.join(r.events)}]")
        out.append("TIMELINE")
        for s in self.timeline:
            pos = "-" if s.position is None else str(s.position)
            where = " ".join(x for x in (s.ts, s.event and inert(s.event), s.type, s.writer and inert(s.writer)) if x)
            out.append(f"  {pos:>4}  {where}: {_line(s.did)}")
        if self.tree is not None:
            out.append("DEPENDENCIES")
            out += _tree_lines(self.tree, 1)
        if self.decision == "excluded":
            out.append("WHAT WOULD CHANGE IT")
            if not self.changes:
                out.append("  (nothing the actor's view may show)" if self.hidden and not self.auditor
                           else "  (nothing: no change of input removes these codes)")
            for c in self.changes:
                out.append(f"  {c.code}: " + " and ".join(compact_json(x) for x in c.changes))
        elif self.hidden:
            out.append("  (details withheld from this actor)")
        return "\n".join(out) + "\n"


def _line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _tree_lines(node: Node, depth: int) -> list[str]:
    lines = [f"{'  ' * depth}{inert(node.fact)} {', '.join(node.codes) or 'admitted'}"]
    for child in node.children:
        lines += _tree_lines(child, depth + 1)
    return lines


def _fact_reasons(resolution: Resolution, fact: str) -> tuple[str, tuple[Reason, ...]]:
    if resolution.admitted_fact(fact) is not None:
        return "admitted", ()
    excluded = resolution.excluded_fact(fact)
    if excluded is None:
        return "unknown", ()
    return "excluded", excluded.reasons


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
    actor = res.actor
    decision, reasons = _fact_reasons(res, fact)
    codes = {r.code for r in reasons}
    hidden = bool(codes & _HIDDEN)
    asserts = {e.fact: e for e in events if isinstance(e, Assert)}
    fact_event = asserts.get(fact)
    admitted = res.admitted_fact(fact)
    if auditor:
        value = fact_event.value if fact_event is not None else None
    else:
        value = admitted.value if admitted is not None else None
    named = {e for x in res.excluded if x.fact == fact for r in x.reasons for e in r.events}
    named |= {i.event for i in res.ignored if i.fact == fact}
    timeline = _timeline(events, fact, res, asserts, policy)
    if not auditor:
        if hidden or decision == "unknown":
            timeline = [
                Step(position=None, event=s.event, ts=None, type=s.type, writer=None,
                     did=_hidden_did(s.event, reasons))
                for s in timeline if s.event in named
            ]
        else:
            timeline = [_mask(s, res) for s in timeline]
            if admitted is None and fact_event is not None:  # the resolution shows no value
                own = _describe_assert(fact_event, with_value=False)
                timeline = [attrs.evolve(s, did=own) if s.event == fact_event.id else s
                            for s in timeline]
    tree = None
    if fact_event is not None and fact_event.depends_on and (auditor or not hidden):
        tree = _tree(fact, res, asserts, auditor, set())
    changes: list[Counterfactual] = []
    if decision == "excluded" and (auditor or not hidden):
        for reason in reasons:
            changes += _counterfactuals(events, fact, reason, res, asserts, policy)
    return Explanation(
        fact=fact, actor=actor.id, at=format_ts(at), decision=decision,
        key=_key(res, fact, fact_event if auditor else None),
        value=value, reasons=reasons, timeline=tuple(timeline), tree=tree,
        changes=tuple(changes), auditor=auditor, hidden=hidden,
    )


def _key(res: Resolution, fact: str, event: Assert | None) -> str | None:
    if event is not None:
        return event.key
    admitted, excluded = res.admitted_fact(fact), res.excluded_fact(fact)
    return admitted.key if admitted is not None else excluded.key if excluded is not None else None


def _hidden_did(event: str | None, reasons: tuple[Reason, ...]) -> str:
    codes = [r.code for r in reasons if event in r.events]
    return "; ".join(f"{c}: {EXPLANATIONS[c]}" for c in codes)


def _mask(step: Step, res: Resolution) -> Step:
    """Actor view of a visible fact's step: a hidden other fact is named by id only."""
    hidden_facts = {x.fact for x in res.excluded if {r.code for r in x.reasons} & _HIDDEN}
    if hidden_facts & set(step.facts):
        return attrs.evolve(step, writer=None, ts=None, did=f"an event about {', '.join(step.facts)}")
    return step


def _describe_assert(e: Assert, *, with_value: bool = True) -> str:
    shown = compact_json(e.value) if with_value else "(value not shown: not admitted)"
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


def _timeline(
    events: Sequence[Event], fact: str, res: Resolution, asserts: dict[str, Assert], policy: Policy
) -> list[Step]:
    target = asserts.get(fact)
    decision, reasons = _fact_reasons(res, fact)
    by_code = {r.code: r for r in reasons}
    ignored = {(i.event, i.fact) for i in res.ignored}
    grantees = {f"role:{r}" for r in res.actor.roles} | {f"actor:{res.actor.id}"}
    dep_events: dict[str, str] = {}
    for code in ("dependency_invalidated", "dependency_restricted"):
        if code in by_code:
            for ev in by_code[code].events:
                dep_events[ev] = code
    ancestors = _ancestors(fact, asserts)
    steps: list[Step] = []
    for pos, e in enumerate(events):
        if e.ts > res.at:
            break
        if target is None or e.tenant != target.tenant or isinstance(e, Experience):
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
        if e.id in dep_events and fact != getattr(e, "fact", None):
            origin = getattr(e, "fact", "")
            path = ancestors.get(origin, origin)
            did = (did + "; " if did else "") + f"propagated as {dep_events[e.id]} via {path}"
        if did:
            steps.append(Step(position=pos, event=e.id, ts=format_ts(e.ts), type=e.TYPE,
                              writer=e.actor, did=did, facts=facts))
    if target is not None:
        steps = _with_window(steps, target, res.at)
    return steps


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


def _ancestors(fact: str, asserts: dict[str, Assert]) -> dict[str, str]:
    """Every fact ``fact`` depends on, transitively, with its path (``F16 <- F8``)."""
    found: dict[str, str] = {}
    frontier = [(fact, fact)]
    while frontier:
        current, path = frontier.pop(0)
        event = asserts.get(current)
        for dep in (event.depends_on or ()) if event is not None else ():
            if dep not in found:
                found[dep] = f"{path} <- {dep}"
                frontier.append((dep, found[dep]))
    return found


def _tree(fact: str, res: Resolution, asserts: dict[str, Assert], auditor: bool, seen: set[str]) -> Node:
    _, reasons = _fact_reasons(res, fact)
    codes = tuple(r.code for r in reasons)
    event = asserts.get(fact)
    children: list[Node] = []
    hidden = bool(set(codes) & _HIDDEN)
    if event is not None and fact not in seen and (auditor or not hidden or not seen):
        for dep in event.depends_on or ():
            children.append(_tree(dep, res, asserts, auditor, seen | {fact}))
    return Node(fact=fact, codes=codes, children=tuple(children))


# -- what would change it ---------------------------------------------------------------


def apply_changes(
    events: Sequence[Event], actor: Actor, at: datetime, changes: Sequence[dict[str, str]]
) -> tuple[list[Event], Actor, datetime]:
    """The inputs with ``changes`` applied: a new time, actor fields, or an added event at t."""
    out = list(events)
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


def _insert(events: list[Event], at: datetime, kind: str, change: dict[str, str], tenant: str) -> list[Event]:
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


def _removes(events: Sequence[Event], fact: str, code: str, actor: Actor, at: datetime,
             policy: Policy, changes: Sequence[dict[str, str]]) -> bool:
    try:
        new_events, new_actor, new_at = apply_changes(events, actor, at, changes)
        res = resolve(new_events, new_actor, new_at, policy)
    except (ValueError, KeyError):
        return False
    excluded = res.excluded_fact(fact)
    present = res.admitted_fact(fact) is not None or excluded is not None
    return present and (excluded is None or code not in excluded.codes)


def _candidates(fact: str, reason: Reason, res: Resolution, asserts: dict[str, Assert],
                events: Sequence[Event], policy: Policy) -> list[list[dict[str, str]]]:
    e = asserts[fact]
    authority = e.authority or policy.authority_default
    code = reason.code
    by_id = {ev.id: ev for ev in events}
    if code in ("draft", "hypothetical"):
        return [[{"kind": "promote", "fact": fact, "authority": authority}]]
    if code == "not_yet_valid" and e.valid_from is not None:
        return [[{"kind": "at", "at_least": format_ts(e.valid_from)}]]
    if code == "expired" and e.valid_until is not None:
        return [[{"kind": "at", "before": format_ts(e.valid_until)}]]
    if code in ("retracted", "superseded") and reason.events:
        return [[{"kind": "at", "before": format_ts(by_id[reason.events[0]].ts)}],
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


def _counterfactuals(events: Sequence[Event], fact: str, reason: Reason, res: Resolution,
                     asserts: dict[str, Assert], policy: Policy) -> list[Counterfactual]:
    """The first verified candidate change per code (none for tenant_isolation)."""
    if reason.code == "tenant_isolation" or fact not in asserts:
        return []
    if reason.code.startswith("dependency_"):
        options: list[list[dict[str, str]]] = []
        for origin in reason.facts:
            _, origin_reasons = _fact_reasons(res, origin)
            for r in origin_reasons:
                if not r.code.startswith("dependency_") and origin in asserts:
                    options += _candidates(origin, r, res, asserts, events, policy)
    else:
        options = _candidates(fact, reason, res, asserts, events, policy)
    for option in options:
        if _removes(events, fact, reason.code, res.actor, res.at, policy, option):
            return [Counterfactual(code=reason.code, changes=tuple(option))]
    return []
