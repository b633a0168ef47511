"""A deliberately naive second implementation of Γ, written from SPEC.md alone.

It reads the *written* events (the JSON objects of a log, as ``tests/strategies.Log.lines``
holds them) and answers every question by scanning the whole log again: per fact, every
rule of SPEC §3-§7 is checked against every event. It is quadratic and proud of it: the
point is that each function can be read against one sentence of the SPEC, with no index,
no fold state and no shared code with ``gamma.core.resolving.resolver`` (never import it here).

The one dynamic part of the semantics, supersession, is computed differently from the
resolver's single fold: commits, effects and retracts depend only on authority ranks, so
their *moments* are computed first, statically; then the effects are replayed in moment
order, each one checking liveness by looking at those moments.

Where SPEC.md can be read two ways, the reading taken is marked ``SPEC reading:``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from gamma.core.terms.canonical import parse_ts
from gamma.core.terms.derivation import Failure, evaluate, parse_derivation
from gamma.core.terms.policy import Policy
from gamma.core.terms.version import __version__ as GAMMA_VERSION

__all__ = ["REASON_CODES", "resolve"]

VALIDITY = frozenset(
    {
        "draft",
        "hypothetical",
        "not_yet_valid",
        "expired",
        "retracted",
        "superseded",
        "outranked",
        "overridden",
        "dependency_invalidated",
        "derivation_failed",
        "recomputed",
        "erased",
    }
)
VISIBILITY = frozenset(
    {"tenant_isolation", "access_denied", "out_of_scope", "dependency_restricted"}
)
REASON_CODES = VALIDITY | VISIBILITY
SUBSTITUTING = frozenset({"superseded", "outranked", "overridden"})
HIDDEN = frozenset({"access_denied", "dependency_restricted"})  # known unknowns (§6)
INSUFFICIENT = "insufficient_authority"
TIMESTAMPS = ("ts", "valid_from", "valid_until")


def _utc(value: datetime) -> str:
    """SPEC §2: UTC ``YYYY-MM-DDTHH:MM:SSZ``, ``.ffffff`` only when non-zero."""
    value = value.astimezone(UTC)
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    return text + (f".{value.microsecond:06d}" if value.microsecond else "") + "Z"


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class _Event:
    """One written event with its position and its timestamps parsed."""

    def __init__(self, pos: int, line: dict[str, Any]) -> None:
        self.pos = pos
        self.line = line
        self.id: str = line["id"]
        self.type: str = line["type"]
        self.tenant: str = line["tenant"]
        self.ts = parse_ts(line["ts"])

    def get(self, name: str, default: Any = None) -> Any:
        return self.line.get(name, default)

    def canonical(self) -> str:
        """SPEC §8: the fields as written, keys sorted, timestamps in UTC form; SPEC §21: a
        value written with a salt is replaced by ``commitment`` = SHA-256(salt || value)."""
        body = dict(self.line)
        for name in TIMESTAMPS:
            if name in body:
                body[name] = _utc(parse_ts(body[name]))
        if "salt" in body:
            salt, value = body.pop("salt"), body.pop("value")
            body["commitment"] = hashlib.sha256(
                bytes.fromhex(salt) + _canonical(value).encode("utf-8")
            ).hexdigest()
        return _canonical(body)


def resolve(
    lines: Sequence[dict[str, Any]], actor: dict[str, Any], at: datetime, policy: Policy
) -> tuple[dict[str, Any], list[str]]:
    """Γ(H, A, t, P) as the resolution's JSON object, plus the known unknowns of §6."""
    return _Resolver(lines, actor, at, policy).run()


class _Resolver:
    def __init__(
        self, lines: Sequence[dict[str, Any]], actor: dict[str, Any], at: datetime, policy: Policy
    ) -> None:
        self.policy = policy
        self.at = at
        log = [_Event(pos, line) for pos, line in enumerate(lines)]
        # §3: H_t, the longest prefix whose events have ts <= t.
        self.cut: list[_Event] = []
        for event in log:
            if event.ts > at:
                break
            self.cut.append(event)
        # §5: the actor normalised.
        self.actor = {
            "id": actor["id"],
            "tenant": actor["tenant"],
            "roles": sorted(set(actor.get("roles", []))),
            "clearance": actor.get("clearance", policy.clearance_default),
            "scope": actor.get("scope", "global"),
        }
        self.tenant = actor["tenant"]
        # SPEC §21: an erase anywhere in the log (before or after t) erases as of every time
        self.erases = [e for e in log if e.tenant == self.tenant and e.type == "erase"]
        self.ours = [e for e in self.cut if e.tenant == self.tenant]
        self.facts = [e for e in self.ours if e.type == "assert"]  # in log order
        self.ignored: set[tuple[str, str, str]] = set()

    # -- plain lookups, by scanning ---------------------------------------------------

    def assert_of(self, fact: str) -> _Event:
        for event in self.ours:
            if event.type == "assert" and event.get("fact") == fact:
                return event
        raise KeyError(fact)

    def rank(self, authority: str | None) -> int:
        """§1: an unwritten authority ranks as the policy default."""
        return self.policy.authority_ladder.index(
            authority if authority is not None else self.policy.authority_default
        )

    def clearance_rank(self, name: str | None) -> int:
        return self.policy.clearance_ladder.index(
            name if name is not None else self.policy.clearance_default
        )

    def r(self, fact: str) -> int:
        return self.rank(self.assert_of(fact).get("authority"))

    def key(self, fact: str) -> str:
        return self.assert_of(fact).get("key")  # type: ignore[no-any-return]

    def scope(self, fact: str) -> str:
        return self.assert_of(fact).get("scope", "global")  # type: ignore[no-any-return]

    # -- §3: commit, effect, retract (static) -----------------------------------------

    def commit_of(self, fact: str) -> _Event | None:
        """The assert if committed, else the first effective promote (rank >= r(f))."""
        asserted = self.assert_of(fact)
        if asserted.get("status", "committed") == "committed":
            return asserted
        for event in self.ours:
            if (
                event.type == "promote"
                and event.get("fact") == fact
                and self.rank(event.get("authority")) >= self.r(fact)
            ):
                return event
        return None

    def retract_of(self, fact: str) -> _Event | None:
        """The first effective retract (rank >= r(f)); later ones have no effect."""
        for event in self.ours:
            if (
                event.type == "retract"
                and event.get("fact") == fact
                and self.rank(event.get("authority")) >= self.r(fact)
            ):
                return event
        return None

    def effect_moment(self, fact: str) -> tuple[datetime, int, int] | None:
        """When f takes effect, as (instant, 0 = before that instant's events | 1 = at an event, pos).

        E(f) = max(commit ts, valid_from). A deferred effect (valid_from after the commit)
        happens before the events stamped at its instant, in commit order; it counts only
        when due at or before t.
        """
        commit = self.commit_of(fact)
        if commit is None:
            return None
        start = self.assert_of(fact).get("valid_from")
        if start is not None and parse_ts(start) > commit.ts:
            due = parse_ts(start)
            return (due, 0, commit.pos) if due <= self.at else None
        return (commit.ts, 1, commit.pos)

    def retracted_before(self, fact: str, moment: tuple[datetime, int, int]) -> bool:
        retract = self.retract_of(fact)
        return retract is not None and (retract.ts, 1, retract.pos) < moment

    # -- §3: supersession, by replaying the effects in moment order -------------------

    def supersessions(self) -> dict[str, str]:
        """Superseded fact -> its first superseder, over every effect due by t."""
        superseded: dict[str, str] = {}
        moments = []
        for event in self.facts:
            moment = self.effect_moment(event.get("fact"))
            if moment is not None:
                moments.append((moment, event.get("fact")))
        for moment, g in sorted(moments):
            if self.retracted_before(g, moment) or g in superseded:
                continue  # not live when its effect is due: it never takes effect
            for f in self.assert_of(g).get("supersedes", []):
                if self.r(g) >= self.r(f):
                    self.supersede(superseded, f, g, moment)
                else:
                    self.ignored.add((self.assert_of(g).id, INSUFFICIENT, f))
            if self.policy.same_key:
                g_commit = self.commit_of(g)
                assert g_commit is not None
                for other in self.facts:
                    f = other.get("fact")
                    f_commit = self.commit_of(f)
                    if (
                        f != g
                        and self.key(f) == self.key(g)
                        and self.scope(f) == self.scope(g)
                        and f_commit is not None
                        and f_commit.pos < g_commit.pos
                        and self.r(f) <= self.r(g)
                    ):
                        self.supersede(superseded, f, g, moment)
        return superseded

    def supersede(
        self, superseded: dict[str, str], f: str, g: str, moment: tuple[datetime, int, int]
    ) -> None:
        """A fact already superseded or retracted is not superseded again."""
        if f not in superseded and not self.retracted_before(f, moment):
            superseded[f] = g

    # -- §4 phase 2 helpers ------------------------------------------------------------

    @staticmethod
    def segments(scope: str) -> list[str]:
        return [] if scope == "global" else scope.split("/")

    def contains(self, outer: str, inner: str) -> bool:
        """``global`` contains every scope; ``a`` contains ``a`` and ``a/...``."""
        outer_parts, inner_parts = self.segments(outer), self.segments(inner)
        return inner_parts[: len(outer_parts)] == outer_parts

    # -- §4 phase 3 helpers ------------------------------------------------------------

    def matches_actor(self, event: _Event) -> bool:
        role, to_actor = event.get("role"), event.get("to_actor")
        return (role is not None and role in self.actor["roles"]) or (
            to_actor is not None and to_actor == self.actor["id"]
        )

    def reaches(self, event: _Event, fact: str) -> bool:
        """§3, §4 phase 3: a grant/revoke by f or by its key, at or above r(f) (by f below it:
        ignored, no effect); a key grant never reaches a fact whose visibility lists actors."""
        if event.get("fact") is not None:
            return event.get("fact") == fact and self.rank(event.get("authority")) >= self.r(fact)
        if event.get("key") != self.key(fact) or self.rank(event.get("authority")) < self.r(fact):
            return False
        listed = self.assert_of(fact).get("visibility", {}).get("actors")
        return not (event.type == "grant" and listed)

    def grantee(self, event: _Event) -> tuple[str, str]:
        if event.get("role") is not None:
            return ("role", event.get("role"))
        return ("actor", event.get("to_actor"))

    def access_history(self, fact: str) -> tuple[bool, _Event | None]:
        """Per grantee, replay every grant and revoke reaching f in log order (a revoke ends,
        a grant starts); granted if some grantee ends granted; and the latest event that
        changed access for some grantee."""
        state: dict[tuple[str, str], bool] = {}
        latest = None
        for event in self.ours:
            if event.type not in ("grant", "revoke") or not self.matches_actor(event):
                continue
            if not self.reaches(event, fact):
                continue
            who = self.grantee(event)
            now = event.type == "grant"
            if now != state.get(who, False):
                latest = event  # ours is in log order: the last change seen is the latest
            state[who] = now
        return any(state.values()), latest

    # -- the whole computation --------------------------------------------------------

    def run(self) -> tuple[dict[str, Any], list[str]]:
        policy, at = self.policy, self.at
        ids = [e.get("fact") for e in self.facts]
        codes: dict[str, dict[str, dict[str, Any]]] = {f: {} for f in ids}

        def reason(code: str, events: Any, facts: Any = ()) -> dict[str, Any]:
            return {"code": code, "events": sorted(set(events)), "facts": sorted(set(facts))}

        # Phase 1: validity.
        superseded = self.supersessions()
        for f in ids:
            asserted = self.assert_of(f)
            erasing = [e.id for e in self.erases if any(x["fact"] == f for x in e.get("erased"))]
            if erasing:
                codes[f]["erased"] = reason("erased", erasing)
            elif "value" not in asserted.line:  # its value gone, its erase not in the log
                codes[f]["erased"] = reason("erased", [asserted.id])
            if self.commit_of(f) is None:
                status = asserted.get("status")
                codes[f][status] = reason(status, [asserted.id])
            start, end = asserted.get("valid_from"), asserted.get("valid_until")
            if start is not None and at < parse_ts(start):
                codes[f]["not_yet_valid"] = reason("not_yet_valid", [asserted.id])
            if end is not None and at >= parse_ts(end):
                codes[f]["expired"] = reason("expired", [asserted.id])
            retract = self.retract_of(f)
            if retract is not None:
                codes[f]["retracted"] = reason("retracted", [retract.id])
            if f in superseded:
                g = superseded[f]
                commit = self.commit_of(g)
                assert commit is not None
                codes[f]["superseded"] = reason("superseded", [commit.id], [g])

        # Phase 2: scope, then precedence among the candidates.
        for f in ids:
            if not self.contains(self.scope(f), self.actor["scope"]):
                codes[f]["out_of_scope"] = reason("out_of_scope", [self.assert_of(f).id])
        candidates = [f for f in ids if not codes[f]]
        for f in candidates:
            rivals = [g for g in candidates if self.key(g) == self.key(f)]
            top = max(self.r(g) for g in rivals)
            most_specific = max(
                len(self.segments(self.scope(g))) for g in rivals if self.r(g) == top
            )
            winners = [
                g
                for g in rivals
                if self.r(g) == top and len(self.segments(self.scope(g))) == most_specific
            ]
            if f in winners:
                continue
            code = "outranked" if self.r(f) < top else "overridden"
            first = min(winners)  # ties: the loser names the smallest-id winner
            commit = self.commit_of(first)
            assert commit is not None
            codes[f][code] = reason(code, [commit.id], [first])

        # Phase 3: visibility.
        clearance = self.clearance_rank(self.actor["clearance"])
        for f in ids:
            visibility = self.assert_of(f).get("visibility", {})
            roles, people = visibility.get("roles", []), visibility.get("actors", [])
            listed = (
                (not roles and not people)
                or self.actor["id"] in people
                or any(role in self.actor["roles"] for role in roles)
                or self.access_history(f)[0]
            )
            if not (listed and clearance >= self.clearance_rank(visibility.get("clearance"))):
                latest = self.access_history(f)[1]
                events = [self.assert_of(f).id] + ([latest.id] if latest is not None else [])
                codes[f]["access_denied"] = reason("access_denied", events)

        # Phase 4: dependencies. An origin of d in a group is a fact reached from d through
        # depends_on edges, without passing through a fact that carries its own code of the
        # group, and carrying one (d itself, if it does).
        flag = policy.dependency_mode == "flag"
        recheck: set[str] = set()
        own_codes = {
            "validity": VALIDITY - {"dependency_invalidated"},
            "visibility": frozenset({"access_denied", "out_of_scope"}),
        }

        def own(f: str, group: str) -> list[dict[str, Any]]:
            return [r for c, r in codes[f].items() if c in own_codes[group]]

        def origins(d: str, group: str) -> set[str]:
            found, seen, todo = set(), set(), [d]
            while todo:
                current = todo.pop()
                if current in seen:
                    continue
                seen.add(current)
                if own(current, group):
                    found.add(current)
                else:
                    todo.extend(self.assert_of(current).get("depends_on", []))
            return found

        def dependency_reason(code: str, deps: list[str], group: str) -> dict[str, Any] | None:
            """Names each dependency having origins, its smallest origin, and that origin's own
            reasons' events."""
            direct = {d: min(origins(d, group)) for d in deps if origins(d, group)}
            if not direct:
                return None
            named = set(direct.values())
            events = [e for o in named for r in own(o, group) for e in r["events"]]
            return reason(code, events, set(direct) | named)

        recompute = policy.dependency_mode == "recompute"
        computed: dict[str, dict[str, Any]] = {}  # fact -> its recomputed value and evidence
        order, same_cycle = self.phase4_order(ids, codes) if recompute else (ids, None)
        for f in order:  # phases 1-3 are final: origins read only their own codes (and, in
            deps = list(dict.fromkeys(self.assert_of(f).get("depends_on", [])))  # order, the
            stale = dependency_reason("dependency_invalidated", deps, "validity")  # failed
            hidden = dependency_reason("dependency_restricted", deps, "visibility")  # derivations)
            if stale is not None and not flag:
                codes[f]["dependency_invalidated"] = stale
            if hidden is not None:
                codes[f]["dependency_restricted"] = hidden
            if recompute and self.assert_of(f).get("derivation") is not None:
                self.recompute(f, same_cycle, codes, computed, reason)
        if flag:  # after every dependency code is set: admitted with a stale dependency
            for f in ids:
                deps = self.assert_of(f).get("depends_on", [])
                if not codes[f] and any(origins(d, "validity") for d in deps):
                    recheck.add(f)

        # Another tenant's facts are not in the resolution at all (isolation is total).
        excluded = []
        admitted = []
        for f in ids:
            asserted = self.assert_of(f)
            if codes[f]:
                excluded.append(
                    {
                        "fact": f,
                        "key": self.key(f),
                        "reasons": [codes[f][c] for c in sorted(codes[f])],
                    }
                )
            else:
                admitted.append(
                    {
                        "fact": f,
                        "key": self.key(f),
                        "value": asserted.get("value"),
                        "scope": self.scope(f),
                        "authority": asserted.get("authority", policy.authority_default),
                        "kind": asserted.get("kind", "fact"),
                        "priority": asserted.get("priority", "hard"),
                        "needs_recheck": f in recheck,
                        **computed.get(f, {}),
                    }
                )
                if f in computed:
                    admitted[-1]["value"] = admitted[-1].pop("computed")
        admitted_ids = {a["fact"] for a in admitted}
        restated = {f: c["inputs"]["events"] for f, c in computed.items() if "stale" in c}

        # §3 grant/revoke and retract/promote that were not effective.
        for event in self.ours:
            if (
                event.type in ("retract", "promote", "grant", "revoke")
                and event.get("fact") is not None
            ):
                target = event.get("fact")
                if self.rank(event.get("authority")) < self.r(target):
                    self.ignored.add((event.id, INSUFFICIENT, target))
            if event.type in ("grant", "revoke") and event.get("key") is not None:
                above = [
                    f
                    for f in ids
                    if self.key(f) == event.get("key")
                    and self.r(f) > self.rank(event.get("authority"))
                ]
                if above:  # listed once per event, naming the smallest such fact
                    self.ignored.add((event.id, INSUFFICIENT, min(above)))

        experiences = [
            self.verdict(event, codes, admitted_ids, recheck, restated)
            for event in self.ours
            if event.type == "experience"
        ]
        body = {
            "actor": self.actor,
            "admitted": sorted(admitted, key=lambda a: a["fact"]),
            "at": _utc(at),
            "excluded": sorted(excluded, key=lambda x: x["fact"]),
            "experiences": sorted(experiences, key=lambda x: x["experience"]),
            "ignored": [{"event": e, "code": c, "fact": f} for e, c, f in sorted(self.ignored)],
            "log": self.head(),
            "policy": policy.digest,
            "tree": {"root": self.tree_root(), "size": len(self.cut)},
        }
        body["digest"] = hashlib.sha256(_canonical(body).encode("utf-8")).hexdigest()
        body["engine"], body["format"] = GAMMA_VERSION, 1  # §5: who wrote it; not digested
        return body, self.known_unknowns(ids, codes, admitted_ids)

    # -- §7 experiences ----------------------------------------------------------------

    _LINKS = ("superseded", "outranked", "overridden")

    def phase4_order(
        self, ids: list[str], codes: dict[str, dict[str, dict[str, Any]]]
    ) -> tuple[list[str], Any]:
        """SPEC "Derived values recomputed": phase 4 decides a fact after its dependencies and
        after every fact its derivation's inputs may be read from (the substitution walks by
        the codes of phases 1-3); facts reaching each other (a cycle) read nothing from each
        other. Naively: reachability by search, then the first ready fact in log order."""
        reads: dict[str, set[str]] = {}
        for f in ids:
            asserted = self.assert_of(f)
            deps = asserted.get("depends_on", [])
            reads[f] = set(deps)
            if asserted.get("derivation") is None:
                continue
            for name in parse_derivation(asserted.get("derivation")).inputs:
                named = [name] if name in deps else [d for d in deps if self.key(d) == name]
                current = named[0] if len(set(named)) == 1 else None
                walked: set[str] = set()
                while current is not None and current not in walked:
                    walked.add(current)
                    reads[f].add(current)
                    own = codes[current]
                    links = [c for c in self._LINKS if c in own and own[c]["facts"]]
                    if not own or set(own) - set(self._LINKS) or not links:
                        break
                    current = own[links[0]]["facts"][0]
        reachable: dict[str, set[str]] = {}
        for f in ids:
            found, todo = set(), list(reads[f])
            while todo:
                x = todo.pop()
                if x not in found:
                    found.add(x)
                    todo.extend(reads.get(x, ()))
            reachable[f] = found

        def same_cycle(a: str, b: str) -> bool:
            return b in reachable[a] and a in reachable[b]

        order: list[str] = []
        done: set[str] = set()
        while len(order) < len(ids):
            for f in ids:
                deps = self.assert_of(f).get("depends_on", [])
                ready = all(r in done for r in reads[f] if not same_cycle(f, r)) and all(
                    d in done for d in deps if same_cycle(f, d)
                )
                if f not in done and ready:
                    order.append(f)
                    done.add(f)
                    break
        return order, same_cycle

    def recompute(
        self,
        f: str,
        same_cycle: Any,
        codes: dict[str, dict[str, dict[str, Any]]],
        computed: dict[str, dict[str, Any]],
        reason: Any,
    ) -> None:
        """SPEC "Derived values recomputed": a derived fact excluded for nothing but
        dependency_invalidated is evaluated over the admitted facts now holding its inputs,
        each decided before it (``phase4_order``) unless both are in one cycle: then today's
        rule holds."""
        if set(codes[f]) - {"dependency_invalidated"}:
            return
        asserted = self.assert_of(f)
        deps = asserted.get("depends_on", [])
        derivation = parse_derivation(asserted.get("derivation"))
        values: dict[str, Any] = {}
        used: list[str] = []
        named = {n: [n] if n in deps else [d for d in deps if self.key(d) == n] for n in derivation.inputs}
        if any(len(set(found)) != 1 for found in named.values()):  # fails closed before any walk
            codes[f] = {"derivation_failed": reason("derivation_failed", [asserted.id])}
            return
        for name in derivation.inputs:
            current: str | None = named[name][0]
            seen: list[str] = []
            while current is not None and current not in seen:
                source = self.assert_of(current)
                if same_cycle(current, f):
                    return  # f and its input read each other
                if not codes[current]:
                    break
                seen.append(current)
                links = [c for c in self._LINKS if c in codes[current]]
                rest = set(codes[current]) - set(links) - {"dependency_invalidated", "dependency_restricted"}
                if rest or not links or not codes[current][links[0]]["facts"]:
                    return  # a slot given up for a dependency's sake still names its holder
                current = codes[current][links[0]]["facts"][0]
            if current is None or current in seen:
                return
            values[name] = computed[current]["computed"] if current in computed else source.get("value")
            used.append(current)
        commits = [self.commit_of(u) for u in used]
        events = [c.id for c in commits if c is not None]
        result = evaluate(derivation, values)
        if isinstance(result, Failure):
            codes[f] = {"derivation_failed": reason("derivation_failed", events, used)}
            return
        codes[f] = {}
        found = {"computed": result, "inputs": {"events": sorted(set(events)), "facts": sorted(set(used))}}
        stated = asserted.get("value")
        if type(stated) is not type(result) or stated != result:
            found["stale"] = {"code": "recomputed", "value": stated}
        computed[f] = found

    def verdict(
        self,
        event: _Event,
        codes: dict[str, dict[str, dict[str, Any]]],
        admitted: set[str],
        recheck: set[str],
        restated: dict[str, list[str]],
    ) -> dict[str, Any]:
        """SPEC §7; under recompute, a used fact admitted with another value than it stated
        was relied on stale: ADAPT, with a ``recomputed`` reason naming its inputs' events."""
        used = list(dict.fromkeys(event.get("uses", [])))  # "every used fact": each once

        def replacement(f: str) -> str | None:
            """Follow superseder / winner (smallest id) until an admitted fact, if any."""
            seen = set()
            while f not in admitted:
                if f in seen or not codes[f] or not set(codes[f]) <= SUBSTITUTING:
                    return None
                seen.add(f)
                (only,) = [codes[f][c] for c in codes[f]]  # a fact has at most one of them
                f = min(only["facts"])
            return f

        withdrawn = any(set(codes[u]) - SUBSTITUTING for u in used)
        bindings: dict[str, str] = {}
        for u in used:
            if codes[u] and set(codes[u]) <= SUBSTITUTING:
                found = replacement(u)
                if found is None:
                    withdrawn = True
                else:
                    bindings[u] = found
        if withdrawn:
            verdict, bindings = "REJECT", {}
        elif bindings or any(u in recheck or u in restated for u in used):
            verdict = "ADAPT"
        else:
            applicability = event.get("applicability", "applicable")
            verdict = {"applicable": "KEEP", "adaptable": "ADAPT", "unusable": "REJECT"}[
                applicability
            ]
        reasons = sorted(
            [
                *({"fact": u, "code": c, "events": codes[u][c]["events"][:2]}  # §5: at most two
                  for u in used for c in codes[u]),
                *({"fact": u, "code": "recomputed", "events": restated[u][:2]} for u in used if u in restated),
            ],
            key=lambda r: (r["fact"], r["code"]),
        )
        return {
            "experience": event.get("experience"),
            "verdict": verdict,
            "bindings": bindings,
            "reasons": reasons,
        }

    # -- §6 known unknowns, §8 chain head ----------------------------------------------

    def known_unknowns(
        self, ids: list[str], codes: dict[str, dict[str, dict[str, Any]]], admitted: set[str]
    ) -> list[str]:
        keys = []
        for key in sorted({self.key(f) for f in ids}):
            in_scope = [
                f
                for f in ids
                if self.key(f) == key and self.contains(self.scope(f), self.actor["scope"])
            ]
            if not in_scope or any(f in admitted for f in in_scope):
                continue
            hidden = all(set(codes[f]) & HIDDEN for f in in_scope)
            if hidden and not self.policy.restricted_keys:
                continue
            keys.append(key)
        return keys

    def tree_root(self) -> str:
        """MTH of RFC 9162 §2.1.1 over the cut's canonical lines, recursively."""

        def mth(leaves: list[bytes]) -> bytes:
            if not leaves:
                return hashlib.sha256(b"").digest()
            if len(leaves) == 1:
                return hashlib.sha256(b"\x00" + leaves[0]).digest()
            k = 1 << ((len(leaves) - 1).bit_length() - 1)
            return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()

        return mth([event.canonical().encode("utf-8") for event in self.cut]).hex()

    def head(self) -> str:
        head = bytes(32)
        for event in self.cut:
            head = hashlib.sha256(head + event.canonical().encode("utf-8")).digest()
        return head.hex()
