"""Invariants of Γ from SPEC.md, as hypothesis properties over generated governed logs.

Unit examples show that a rule works once; these show it holds for every log the
strategies of ``tests/strategies.py`` can build. Each test states its property in one
sentence; the SPEC section it comes from is named in its class docstring.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from strategies import (
    TENANTS,
    Log,
    Malformed,
    Scenario,
    actors,
    extensions,
    logs,
    malformed_logs,
    merge,
    other_tenant_streams,
    policies,
    probe_times,
    scenarios,
    written_jsonl,
)

import gamma
from gamma import REASON_CODES, Policy, Resolution, dump_events, parse_events
from gamma.core.integrity.chain import head_of
from gamma.core.reading.events import canonical_event, event_to_json
from gamma.core.resolving.render import inert
from gamma.core.terms.canonical import canonical_json, format_ts, parse_ts

VALIDITY_CODES = frozenset(
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
    }
)
SUBSTITUTING = frozenset({"superseded", "outranked", "overridden"})
# the codes that propagate as dependency_restricted (SPEC §4 phase 4)
HIDDEN = frozenset({"access_denied", "out_of_scope", "dependency_restricted"})

# A handful of examples for the tests that start processes: each example is a batch of
# scenarios, so a few examples still cover dozens of logs.
FEW = max(3, min(25, settings().max_examples // 50))
# The tests that open an SQLite store (synchronous=FULL, one file per example) run the
# profile's examples, capped for the nightly profile: 2,000 stores are plenty.
STORES = min(settings().max_examples, 2_000)


def resolve(log: Log, actor: dict[str, Any], at: datetime) -> Resolution:
    return gamma.resolve(log.events, actor, at, log.policy)


def resolved(scenario: Scenario) -> Resolution:
    return resolve(scenario.log, scenario.actor, scenario.at)


def asserts(log: Log, *, tenant: str | None = None) -> list[dict[str, Any]]:
    return [
        line
        for line in log.lines
        if line["type"] == "assert" and (tenant is None or line["tenant"] == tenant)
    ]


def codes_of(resolution: Resolution) -> dict[str, set[str]]:
    return {x.fact: set(x.codes) for x in resolution.excluded}


def reasons_of(resolution: Resolution, fact: str) -> dict[str, gamma.Reason]:
    excluded = resolution.excluded_fact(fact)
    return {} if excluded is None else {r.code: r for r in excluded.reasons}


def view(resolution: Resolution, tenant_facts: Iterable[str]) -> dict[str, Any]:
    """What actor A sees and is told about its own tenant: everything but other tenants."""
    own = set(tenant_facts)
    body = resolution.to_dict()
    return {
        "actor": body["actor"],
        "at": body["at"],
        "admitted": body["admitted"],
        "excluded": [x for x in body["excluded"] if x["fact"] in own],
        "experiences": body["experiences"],
        "ignored": body["ignored"],
        "context": resolution.render("context"),
    }


# -- 1. determinism -----------------------------------------------------------------------


_CHILD = r"""
import json, sys
from gamma import Policy, parse_events, resolve
out = []
for case in json.load(sys.stdin):
    p = case["policy"]
    policy = Policy(**{k: tuple(v) if isinstance(v, list) else v for k, v in p.items()})
    events = parse_events(case["log"].split("\n"), policy=policy)
    r = resolve(events, case["actor"], case["at"], policy)
    out.append([r.to_json(), r.render("context")])
json.dump(out, sys.stdout)
"""


def _policy_fields(policy: Policy) -> dict[str, Any]:
    return {f.name: getattr(policy, f.name) for f in attrs.fields(Policy) if f.init}


class TestDeterminism:
    """SPEC §5: no clock, randomness, hash seed or set order reaches the output."""

    @given(scenarios())
    def test_same_inputs_give_the_same_bytes(self, scenario: Scenario) -> None:
        """Resolving the same inputs twice, or from a re-parsed copy of the log, gives byte-identical JSON, digest and context."""
        first = resolved(scenario)
        again = resolved(scenario)
        reparsed = gamma.resolve(
            parse_events(scenario.log.text().split("\n"), policy=scenario.policy),
            dict(scenario.actor),
            format_ts(scenario.at),
            scenario.policy,
        )
        for other in (again, reparsed):
            assert other.to_json() == first.to_json()
            assert other.digest == first.digest
            assert other.render("context") == first.render("context")

    @settings(max_examples=FEW, deadline=None)
    @given(st.lists(scenarios(max_size=8), min_size=1, max_size=12))
    def test_same_bytes_in_a_process_with_another_hash_seed(self, batch: list[Scenario]) -> None:
        """Processes with different PYTHONHASHSEED values print byte-identical JSON and context for the same inputs."""
        cases = [
            {
                "policy": _policy_fields(s.policy),
                "log": s.log.text(),
                "actor": s.actor,
                "at": format_ts(s.at),
            }
            for s in batch
        ]
        here = [[resolved(s).to_json(), resolved(s).render("context")] for s in batch]
        # the child must import this very gamma, whatever its working directory holds
        here_path = str(Path(gamma.__file__).resolve().parent.parent)
        path = os.pathsep.join([here_path, os.environ.get("PYTHONPATH", "")])
        for seed in ("0", "3141592653"):
            env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": path}
            child = subprocess.run(
                [sys.executable, "-c", _CHILD],
                input=json.dumps(cases),
                capture_output=True,
                text=True,
                env=env,
                check=False,
                timeout=120,
                cwd=Path(__file__).resolve().parent,
            )
            assert child.returncode == 0, child.stderr
            assert json.loads(child.stdout) == here, f"PYTHONHASHSEED={seed}"


# -- 2. partition ---------------------------------------------------------------------------


class TestPartition:
    """SPEC §4: every fact asserted in H_t is either admitted or excluded, never both."""

    @given(scenarios(tenant=None))
    def test_every_fact_is_admitted_xor_excluded(self, scenario: Scenario) -> None:
        """Every fact of the actor's tenant asserted at or before t is admitted or excluded (never both, never neither); later facts and other tenants' facts are neither."""
        r = resolved(scenario)
        cut = scenario.log.prefix(scenario.at)
        admitted = [a.fact for a in r.admitted]
        excluded = [x.fact for x in r.excluded]
        assert admitted == sorted(set(admitted))
        assert excluded == sorted(set(excluded))
        assert not set(admitted) & set(excluded)
        own = {line["fact"] for line in asserts(cut) if line["tenant"] == scenario.actor["tenant"]}
        assert set(admitted) | set(excluded) == own

    @given(scenarios(tenant=None))
    def test_every_exclusion_has_reasons_from_the_closed_set(self, scenario: Scenario) -> None:
        """Every exclusion has at least one reason, each code from REASON_CODES, sorted and unique; another tenant's fact is never listed."""
        r = resolved(scenario)
        tenant_of = {line["fact"]: line["tenant"] for line in asserts(scenario.log)}
        key_of = {line["fact"]: line["key"] for line in asserts(scenario.log)}
        for x in r.excluded:
            codes = list(x.codes)
            assert codes, x
            assert codes == sorted(set(codes))
            assert set(codes) <= set(REASON_CODES)
            assert tenant_of[x.fact] == scenario.actor["tenant"]
            assert "tenant_isolation" not in codes
            assert x.key == key_of[x.fact]

    @given(scenarios(tenant=None))
    def test_every_reason_names_events_at_or_before_t(self, scenario: Scenario) -> None:
        """Every reason, ignored entry and experience reason names events that exist at or before t, and facts asserted at or before t."""
        r = resolved(scenario)
        cut = scenario.log.prefix(scenario.at)
        event_ids = {line["id"] for line in cut.lines}
        fact_ids = {line["fact"] for line in asserts(cut)}
        for x in r.excluded:
            for reason in x.reasons:
                assert reason.events, (x.fact, reason)
                assert list(reason.events) == sorted(set(reason.events))
                assert list(reason.facts) == sorted(set(reason.facts))
                assert set(reason.events) <= event_ids, (x.fact, reason)
                assert set(reason.facts) <= fact_ids, (x.fact, reason)
        for ignored in r.ignored:
            assert ignored.event in event_ids and ignored.fact in fact_ids
            assert ignored.code == "insufficient_authority"
        for verdict in r.experiences:
            for used in verdict.reasons:
                assert set(used.events) <= event_ids and used.fact in fact_ids


class TestValidityAndPrecedenceRules:
    """SPEC §4 phases 1-2, rule by rule: each code is there exactly when its condition holds."""

    @given(scenarios(tenant=None))
    def test_window_commit_and_retract_codes_follow_their_conditions(
        self, scenario: Scenario
    ) -> None:
        """A fact is not_yet_valid iff t < valid_from, expired iff t >= valid_until, draft/hypothetical iff no effective commit by t, and retracted iff an effective retract by t, each naming its event."""
        r = resolved(scenario)
        policy, at = scenario.policy, scenario.at
        cut = scenario.log.prefix(at)
        mine = [line for line in cut.lines if line["tenant"] == scenario.actor["tenant"]]
        for line in asserts(cut, tenant=scenario.actor["tenant"]):
            fact, reasons = line["fact"], reasons_of(r, line["fact"])
            rank = policy.authority_rank(line.get("authority"))

            def effective(kind: str, fact: str = fact, rank: int = rank) -> list[str]:
                return [
                    e["id"]
                    for e in mine
                    if e["type"] == kind
                    and e["fact"] == fact
                    and policy.authority_rank(e.get("authority")) >= rank
                ]

            start, end = line.get("valid_from"), line.get("valid_until")
            assert ("not_yet_valid" in reasons) == (start is not None and at < parse_ts(start))
            assert ("expired" in reasons) == (end is not None and at >= parse_ts(end))
            status = line.get("status", "committed")
            uncommitted = status != "committed" and not effective("promote")
            assert (status in reasons) == uncommitted, (fact, status)
            retracts = effective("retract")
            assert ("retracted" in reasons) == bool(retracts), fact
            for code in ("not_yet_valid", "expired", "draft", "hypothetical"):
                if code in reasons:
                    assert reasons[code].events == (line["id"],)
            if retracts:
                assert reasons["retracted"].events == (retracts[0],)

    @given(scenarios(tenant=None))
    def test_precedence_is_authority_then_specificity(self, scenario: Scenario) -> None:
        """Among A's candidates for a key, the admitted-or-winning facts have the top authority and then the most specific scope; losers are outranked below the top authority, overridden at it."""
        r = resolved(scenario)
        policy = scenario.policy
        phase_one = VALIDITY_CODES - {"outranked", "overridden", "dependency_invalidated"}
        by_key: dict[str, list[dict[str, Any]]] = {}
        for line in asserts(scenario.log.prefix(scenario.at), tenant=scenario.actor["tenant"]):
            codes = set(reasons_of(r, line["fact"]))
            if not codes & (phase_one | {"out_of_scope"}):
                by_key.setdefault(line["key"], []).append(line)
        for candidates in by_key.values():

            def rank(line: dict[str, Any]) -> int:
                return policy.authority_rank(line.get("authority"))

            def depth(line: dict[str, Any]) -> int:
                scope = line.get("scope", "global")
                return 0 if scope == "global" else scope.count("/") + 1

            top = max(map(rank, candidates))
            deepest = max(depth(c) for c in candidates if rank(c) == top)
            for c in candidates:
                codes = set(reasons_of(r, c["fact"]))
                winner = rank(c) == top and depth(c) == deepest
                assert ("outranked" in codes) == (rank(c) < top), c
                assert ("overridden" in codes) == (not winner and rank(c) == top), c

    @given(scenarios(policy=policies().filter(lambda p: p.same_key), tenants=("acme",)))
    def test_a_fact_in_effect_leaves_no_older_rival_standing(self, scenario: Scenario) -> None:
        """With same_key, once a fact has taken effect (deferred by valid_from or not), every earlier-committed fact of its key and scope at or below its authority is superseded, unless retracted first."""
        r = resolved(scenario)
        policy, at = scenario.policy, scenario.at
        cut = scenario.log.prefix(at)
        mine = [line for line in cut.lines if line["tenant"] == scenario.actor["tenant"]]

        def commit(line: dict[str, Any]) -> int | None:
            """The position of f's commit: its assert, or its first effective promote."""
            if line.get("status", "committed") == "committed":
                return mine.index(line)
            rank = policy.authority_rank(line.get("authority"))
            for position, e in enumerate(mine):
                if (
                    e["type"] == "promote"
                    and e["fact"] == line["fact"]
                    and policy.authority_rank(e.get("authority")) >= rank
                ):
                    return position
            return None

        facts = [line for line in mine if line["type"] == "assert"]
        for g in facts:
            g_commit, g_codes = commit(g), set(reasons_of(r, g["fact"]))
            started = g.get("valid_from") is None or parse_ts(g["valid_from"]) <= at
            if g_commit is None or not started or g_codes & {"superseded", "retracted"}:
                continue  # g has not taken effect, or we cannot tell that it did
            for f in facts:
                f_commit = commit(f)
                if (
                    f is not g
                    and f["key"] == g["key"]
                    and f.get("scope", "global") == g.get("scope", "global")
                    and f_commit is not None
                    and f_commit < g_commit
                    and policy.authority_rank(f.get("authority"))
                    <= policy.authority_rank(g.get("authority"))
                ):
                    codes = set(reasons_of(r, f["fact"]))
                    assert codes & {"superseded", "retracted"}, (f["fact"], g["fact"])


# -- 3. as-of -------------------------------------------------------------------------------


class TestAsOf:
    """SPEC §3: nothing after H_t influences Γ(H, A, t)."""

    @given(scenarios())
    def test_the_prefix_up_to_t_gives_the_same_resolution(self, scenario: Scenario) -> None:
        """Γ(H, A, t) equals Γ(H_t, A, t) byte for byte, context included."""
        whole = resolved(scenario)
        prefix = resolve(scenario.log.prefix(scenario.at), scenario.actor, scenario.at)
        assert prefix.to_json() == whole.to_json()
        assert prefix.render("context") == whole.render("context")

    @given(st.data())
    def test_appending_events_after_t_changes_nothing_at_t(self, data: st.DataObject) -> None:
        """Appending any valid events stamped after t leaves Γ at t byte-identical."""
        scenario = data.draw(scenarios(), label="scenario")
        later = data.draw(extensions(scenario.log, after=scenario.at, min_size=1), label="appended")
        before = resolved(scenario)
        after = resolve(scenario.log + later, scenario.actor, scenario.at)
        assert after.to_json() == before.to_json()
        assert after.render("context") == before.render("context")


# -- 4. tenant non-interference ---------------------------------------------------------------


class TestTenantNonInterference:
    """SPEC §3-4: events of other tenants are not folded; their facts are only listed."""

    @given(st.data())
    def test_other_tenants_events_leave_the_view_unchanged(self, data: st.DataObject) -> None:
        """Adding, removing or changing other tenants' events leaves A's admitted set, own exclusions, experiences, ignored events and rendered context byte-identical."""
        log = data.draw(logs(), label="log")
        tenant = data.draw(st.sampled_from(TENANTS), label="tenant")
        actor = data.draw(actors(log, tenant=tenant), label="actor")
        at = data.draw(probe_times(log), label="at")
        own = log.only(tenant)
        others = tuple(t for t in (*TENANTS, "initech") if t != tenant)
        stream = data.draw(other_tenant_streams(log.policy, tenants=others), label="others")
        facts = [line["fact"] for line in asserts(own)]
        expected = view(resolve(log, actor, at), facts)
        assert view(resolve(own, actor, at), facts) == expected  # removed
        assert view(resolve(merge(own, stream), actor, at), facts) == expected  # changed


# -- 5. no withheld content in the context ------------------------------------------------------


class TestNoWithheldContent:
    """SPEC §6: the context never contains an excluded value or another tenant's key."""

    @given(scenarios(tenant=None))
    def test_the_context_holds_admitted_values_only(self, scenario: Scenario) -> None:
        """No value of an excluded fact appears in the rendered context unless an admitted fact has the same (JSON-encoded) value."""
        r = resolved(scenario)
        context = r.render("context")
        value_of = {line["fact"]: line["value"] for line in asserts(scenario.log)}
        by_tag = {inert(a.fact): a for a in r.admitted}
        items = [line for line in context.splitlines() if line.startswith("- [")]
        assert sorted(line[3:].split("] ", 1)[0] for line in items) == sorted(by_tag)
        for line in items:
            tag, rest = line[3:].split("] ", 1)
            admitted = by_tag[tag]
            assert rest.startswith(f"{inert(admitted.key)} = "), line
            value = rest[len(f"{inert(admitted.key)} = ") :]
            if admitted.needs_recheck:
                value = value.split(" (an input changed: ")[0]
            assert json.dumps(json.loads(value)) == json.dumps(admitted.value), line
        shown = {json.dumps(a.value, ensure_ascii=False) for a in r.admitted}
        for x in r.excluded:
            encoded = json.dumps(value_of[x.fact], ensure_ascii=False)
            if encoded in shown or not isinstance(value_of[x.fact], str) or encoded == '""':
                continue  # same value admitted, or too short to search for as text
            assert encoded not in context, (x.fact, x.codes, encoded)

    @given(scenarios(tenant=None))
    def test_no_value_breaks_a_line_of_the_context(self, scenario: Scenario) -> None:
        """Whatever the values hold (newlines, Unicode line separators, markdown headers), every context line is the header, a section title or one item."""
        lines = resolved(scenario).render("context").splitlines()
        assert lines[0].startswith("# Authorized state for ")
        sections = {"## Binding", "## Preferences", "## Needs recheck", "## Known unknowns"}
        for line in lines[1:]:
            assert line in sections or line.startswith("- "), line

    @given(scenarios(tenant=None))
    def test_the_context_names_only_the_actors_tenant_keys(self, scenario: Scenario) -> None:
        """Every key the context names, as a value line or a known unknown, is a key of A's tenant with a fact in A's scope."""
        r = resolved(scenario)
        own_keys = {
            inert(line["key"]) for line in asserts(scenario.log, tenant=scenario.actor["tenant"])
        }
        for line in r.render("context").splitlines():
            if line.startswith("- ["):
                key = line.split("] ", 1)[1].split(" = ", 1)[0]
            elif line.startswith("- ") and line.endswith(": no current value"):
                key = line[2 : -len(": no current value")]
            else:
                continue
            assert key in own_keys, line


# -- 6. authority non-escalation ------------------------------------------------------------------

# The codes a lower-authority writer must never add to, or take from, a fact.
_AUTHORITY_GUARDED = frozenset(
    {"superseded", "retracted", "outranked", "overridden", "access_denied", "draft", "hypothetical"}
)


class TestAuthorityNonEscalation:
    """SPEC §3: retract, promote, grant, revoke and supersession need rank >= the target's."""

    @given(st.data())
    def test_lower_authority_events_cannot_touch_a_fact(self, data: st.DataObject) -> None:
        """Events written below a fact's authority cannot supersede, retract, demote, hide, reveal or outrank it, and each one aimed at it is listed as ignored."""
        log = data.draw(logs(tenants=("acme",)), label="log")
        policy = log.policy
        targets = asserts(log)
        assume(targets)
        target = data.draw(st.sampled_from(targets), label="target")
        rank = policy.authority_rank(target.get("authority"))
        assume(rank > 0)
        later = data.draw(extensions(log, authority_below=rank, min_size=1), label="lower")
        actor = data.draw(actors(log, tenant="acme"), label="actor")
        at = data.draw(probe_times(log + later), label="at")
        fact = target["fact"]
        before = reasons_of(resolve(log, actor, at), fact)
        after_resolution = resolve(log + later, actor, at)
        after = reasons_of(after_resolution, fact)
        guarded_before = {c: r for c, r in before.items() if c in _AUTHORITY_GUARDED}
        guarded_after = {c: r for c, r in after.items() if c in _AUTHORITY_GUARDED}
        assert guarded_after == guarded_before
        ignored = {(i.event, i.fact) for i in after_resolution.ignored}
        ignored_events = {event for event, _ in ignored}
        for line in later.lines:
            if parse_ts(line["ts"]) > at or line["type"] in ("assert", "experience"):
                continue
            if line.get("fact") == fact:
                assert (line["id"], fact) in ignored, line
            elif line.get("key") == target["key"]:  # a key-wide event is listed once (SPEC §3)
                assert line["id"] in ignored_events, line


# -- 7. supersession is permanent -----------------------------------------------------------------


class TestSupersessionIsPermanent:
    """SPEC §3: nothing ever restores a superseded fact; its first superseder is kept."""

    @given(st.data())
    def test_superseded_at_t1_is_superseded_at_every_later_t(self, data: st.DataObject) -> None:
        """A fact superseded at t1 is excluded as superseded, by the same superseder, at every t2 >= t1 whatever follows and whoever asks."""
        log = data.draw(logs(), label="log")
        log = log + data.draw(extensions(log), label="whatever follows")
        actor = data.draw(actors(log, tenant="acme"), label="actor")
        t1 = data.draw(probe_times(log), label="t1")
        t2 = max(t1, data.draw(probe_times(log), label="t2"))
        other = data.draw(actors(log, tenant="acme"), label="another actor")
        first = resolve(log, actor, t1)
        later = resolve(log, other, t2)
        for x in first.excluded:
            if "superseded" in x.codes:
                assert (
                    reasons_of(later, x.fact).get("superseded")
                    == reasons_of(first, x.fact)["superseded"]
                )


# -- 8. dependency closure --------------------------------------------------------------------------


def _check_dependencies(scenario: Scenario) -> None:
    r = resolved(scenario)
    flag = scenario.policy.dependency_mode == "flag"
    codes = codes_of(r)
    recheck = {a.fact for a in r.admitted if a.needs_recheck}
    cut = scenario.log.prefix(scenario.at)
    for line in asserts(cut, tenant=scenario.actor["tenant"]):
        f, deps = line["fact"], line.get("depends_on", [])
        mine = reasons_of(r, f)
        invalid = [d for d in deps if codes.get(d, set()) & VALIDITY_CODES]
        hidden = [d for d in deps if codes.get(d, set()) & HIDDEN]
        if invalid and not flag:
            assert "dependency_invalidated" in mine, (f, invalid)
            assert set(invalid) <= set(mine["dependency_invalidated"].facts)
        if invalid and flag:
            assert f in codes or f in recheck, (f, invalid)
        if hidden:
            assert "dependency_restricted" in mine, (f, hidden)  # never just a flag
            assert set(hidden) <= set(mine["dependency_restricted"].facts)
        if any(d in recheck for d in deps):
            assert f in codes or f in recheck, f
        # and the converse: no dependency code without a cause
        if "dependency_invalidated" in mine:
            assert invalid and not flag, f
        if "dependency_restricted" in mine:
            assert hidden, f
        if f in recheck:
            assert flag and (invalid or any(d in recheck for d in deps)), f
        # transitively: a dependency reason names the fact where the exclusion started
        for code, group in (
            ("dependency_invalidated", VALIDITY_CODES),
            ("dependency_restricted", HIDDEN),
        ):
            if code in mine:
                named = mine[code].facts
                assert any(codes.get(o, set()) & group - {code} for o in named), (f, code, named)


#: SPEC §5 output size: resolution bytes <= SIZE_FACTOR x log bytes + SIZE_BASE (the actor,
#: heads and digests). A reason names its direct cause and one origin, an ineffective key grant
#: is listed once, access_denied names the one event now deciding access.
SIZE_FACTOR = 6
SIZE_BASE = 1024


def _shape(bodies: list[dict[str, Any]]) -> Scenario:
    """An adversarial shape of issue 11 as a scenario: alice (role sales) after the last event."""
    lines = [
        {"id": f"e{n}", "ts": f"2026-03-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
         "actor": "w", "tenant": "acme", **body}
        for n, body in enumerate(bodies)
    ]
    at = parse_ts(lines[-1]["ts"])
    return Scenario(Log.of(lines, gamma.DEFAULT_POLICY),
                    {"id": "alice", "tenant": "acme", "roles": ["sales"]}, at)


RUNNING_BALANCE = _shape(
    [{"type": "assert", "fact": "B0", "key": "balance", "value": 0}]
    + [{"type": "assert", "fact": f"B{i}", "key": "balance", "value": i,
        "depends_on": [f"B{i - 1}"], "supersedes": [f"B{i - 1}"]} for i in range(1, 300)]
)
KEY_GRANTS = _shape(
    [{"type": "assert", "fact": f"F{i}", "key": "pay", "value": i, "authority": "executive",
      "scope": f"s{i}"} for i in range(100)]
    + [{"type": "grant", "key": "pay", "role": "sales", "authority": "peer"}] * 100
)
TOGGLES = _shape(
    [{"type": "assert", "fact": f"F{i}", "key": "pay", "value": i, "scope": f"s{i}",
      "visibility": {"roles": ["hr"]}} for i in range(100)]
    + [{"type": "grant" if i % 2 == 0 else "revoke", "key": "pay", "role": "sales"}
       for i in range(200)]
)


class TestOutputSize:
    """SPEC §5: the output is linear in the log."""

    @example(RUNNING_BALANCE)
    @example(KEY_GRANTS)
    @example(TOGGLES)
    @given(scenarios(max_size=40))
    def test_resolution_bytes_linear_in_log_bytes(self, scenario: Scenario) -> None:
        """The JSON of a resolution is at most SIZE_FACTOR times the bytes of the log prefix, plus the actor and heads."""
        r = resolved(scenario)
        log_bytes = len(scenario.log.prefix(scenario.at).text().encode("utf-8"))
        actor_bytes = len(json.dumps(scenario.actor).encode("utf-8"))
        out = len(r.to_json().encode("utf-8"))
        assert out <= SIZE_FACTOR * log_bytes + SIZE_BASE + actor_bytes, (out, log_bytes)


class TestDependencyClosure:
    """SPEC §4 phase 4: exclusions propagate along depends_on, transitively."""

    @given(scenarios(policy=policies(dependency_mode="exclude")))
    def test_exclude_mode(self, scenario: Scenario) -> None:
        """In exclude mode a fact depending on an invalid fact is dependency_invalidated, and one depending on a hidden fact is dependency_restricted."""
        _check_dependencies(scenario)

    @given(scenarios(policy=policies(dependency_mode="flag")))
    def test_flag_mode(self, scenario: Scenario) -> None:
        """In flag mode a fact depending on an invalid fact is flagged needs_recheck (or excluded otherwise), and a hidden dependency still hides the dependent."""
        _check_dependencies(scenario)


# -- 9. monotone visibility -------------------------------------------------------------------------


class TestMonotoneVisibility:
    """SPEC §4 phase 3: visibility is allow-only, so more sight never hides anything."""

    @given(st.data())
    def test_a_role_or_more_clearance_never_removes_an_admitted_fact(
        self, data: st.DataObject
    ) -> None:
        """Adding a role or raising clearance never removes a fact from the admitted set."""
        scenario = data.draw(scenarios(), label="scenario")
        policy = scenario.policy
        actor = dict(scenario.actor)
        wider = dict(actor)
        if data.draw(st.booleans(), label="add a role"):
            wider["roles"] = [
                *actor.get("roles", []),
                data.draw(st.sampled_from(("r1", "r2", "r3", "new"))),
            ]
        current = policy.clearance_rank(actor.get("clearance"))
        higher = policy.clearance_ladder[current:]
        wider["clearance"] = data.draw(st.sampled_from(higher), label="clearance")
        narrow = {a.fact for a in resolve(scenario.log, actor, scenario.at).admitted}
        wide = {a.fact for a in resolve(scenario.log, wider, scenario.at).admitted}
        assert narrow <= wide, narrow - wide


class TestVisibilityRule:
    """SPEC §4 phase 3: listed-or-granted, and cleared; grants never lower the clearance bar."""

    @given(st.data())
    def test_a_grant_gives_sight_and_a_revoke_takes_it_back(self, data: st.DataObject) -> None:
        """A grant of a fact to a role of A gives A sight of it (clearance permitting), a revoke that follows makes every fact's visibility what it was, and a grant below the fact's authority gives nothing."""
        scenario = data.draw(scenarios(), label="scenario")
        log, policy = scenario.log, scenario.policy
        targets = asserts(log, tenant=scenario.actor["tenant"])
        assume(targets)
        target = data.draw(st.sampled_from(targets), label="target")
        actor = {**scenario.actor, "roles": [*scenario.actor.get("roles", []), "auditor"]}
        top = policy.authority_ladder[-1]
        last = log.last_ts()
        at = max(scenario.at, last)

        def access(extra: list[dict[str, Any]]) -> dict[str, bool]:
            r = resolve(Log.of([*log.lines, *extra], policy), actor, at)
            return {
                line["fact"]: "access_denied" in reasons_of(r, line["fact"])
                for line in asserts(log.prefix(at), tenant=actor["tenant"])
            }

        def change(kind: str, number: int) -> dict[str, Any]:
            return {
                "id": f"audit{number}",
                "type": kind,
                "ts": format_ts(last),
                "actor": "w",
                "tenant": actor["tenant"],
                "fact": target["fact"],
                "role": "auditor",
                "authority": top,
            }

        granted = access([change("grant", 1)])
        needed = policy.clearance_rank(target.get("visibility", {}).get("clearance"))
        if needed <= policy.clearance_rank(actor.get("clearance")):
            assert not granted[target["fact"]]
        before = access([])
        assert access([change("grant", 1), change("revoke", 2)]) == before
        # and a grant below the fact's authority, by fact or by key, gives nothing
        rank = policy.authority_rank(target.get("authority"))
        if rank > 0:
            low = data.draw(st.sampled_from(policy.authority_ladder[:rank]), label="low")
            by_fact = {**change("grant", 3), "authority": low}
            by_key = {**by_fact, "id": "audit4", "key": target["key"]}
            del by_key["fact"]
            assert access([by_fact, by_key])[target["fact"]] == before[target["fact"]]

    @given(scenarios())
    def test_grants_never_lower_the_clearance_bar(self, scenario: Scenario) -> None:
        """A fact whose clearance ranks above the actor's is access_denied, whatever was granted."""
        r = resolved(scenario)
        policy = scenario.policy
        mine = policy.clearance_rank(scenario.actor.get("clearance"))
        for line in asserts(scenario.log.prefix(scenario.at), tenant=scenario.actor["tenant"]):
            needed = policy.clearance_rank(line.get("visibility", {}).get("clearance"))
            if needed > mine:
                assert "access_denied" in reasons_of(r, line["fact"]), line

    @given(scenarios())
    def test_an_unrestricted_cleared_fact_is_never_access_denied(self, scenario: Scenario) -> None:
        """A fact listing no roles and no actors, at or below the actor's clearance, is never access_denied, whatever was revoked."""
        r = resolved(scenario)
        policy = scenario.policy
        mine = policy.clearance_rank(scenario.actor.get("clearance"))
        for line in asserts(scenario.log.prefix(scenario.at), tenant=scenario.actor["tenant"]):
            visibility = line.get("visibility", {})
            needed = policy.clearance_rank(visibility.get("clearance"))
            if not visibility.get("roles") and not visibility.get("actors") and needed <= mine:
                assert "access_denied" not in reasons_of(r, line["fact"]), line


# -- 10. round trips ----------------------------------------------------------------------------------


class TestRoundTrips:
    """SPEC §2, §5, §8: canonical bytes, the chain and the resolution object survive a round trip."""

    @given(logs())
    def test_events_to_jsonl_to_events(self, log: Log) -> None:
        """Events written as canonical JSONL parse back to equal events, whose canonical JSONL is byte-identical."""
        out = io.StringIO()
        dump_events(log.events, out)
        again = parse_events(out.getvalue().split("\n"), policy=log.policy)
        assert again == log.events
        second = io.StringIO()
        dump_events(again, second)
        assert second.getvalue() == out.getvalue()

    @given(st.data())
    def test_any_written_form_has_the_same_canonical_bytes(self, data: st.DataObject) -> None:
        """The same log written with other key orders, spacing, offsets, fractions and blank lines parses to equal events with the same canonical bytes and chain head."""
        log = data.draw(logs(), label="log")
        text = data.draw(written_jsonl(log), label="written")
        parsed = parse_events(text.split("\n"), policy=log.policy)
        assert parsed == log.events
        for event, original in zip(parsed, log.lines, strict=True):
            fresh = canonical_json(event_to_json(event))
            assert canonical_event(event) == fresh  # the cached canonical text of a parse
            assert fresh == canonical_json(original)  # generated lines are already UTC
        assert head_of(map(canonical_event, parsed)) == head_of(map(canonical_event, log.events))

    @given(scenarios(tenant=None))
    def test_resolution_to_json_to_resolution(self, scenario: Scenario) -> None:
        """A resolution read back from its JSON equals the original, with the same JSON bytes and digest."""
        r = resolved(scenario)
        back = Resolution.from_dict(json.loads(r.to_json()))
        assert back == r
        assert back.to_json() == r.to_json()
        assert back.digest == r.digest

    @given(scenarios(tenant=None))
    def test_the_log_field_is_the_chain_head_at_t(self, scenario: Scenario) -> None:
        """A resolution's log field is the chain head over the canonical events of H_t."""
        r = resolved(scenario)
        cut = scenario.log.prefix(scenario.at)
        assert r.log == head_of(canonical_json(line) for line in cut.lines)

    @settings(max_examples=STORES, deadline=None)
    @given(log=logs())
    def test_events_to_store_to_export(
        self, log: Log, tmp_path_factory: pytest.TempPathFactory
    ) -> None:
        """Events appended to a store export as exactly their canonical JSONL, with the same head, and read back as equal events."""
        from gamma.storage.store import Store

        path = tmp_path_factory.mktemp("store") / "events.db"
        with Store.init(path, policy=log.policy) as store:
            result = store.append(log.text())
            assert result.appended == len(log.lines)
        with Store.open(path) as store:
            assert list(store.export()) == [canonical_event(e) for e in log.events]
            assert store.head() == head_of(canonical_event(e) for e in log.events)
            assert store.events() == log.events
            assert store.verify().ok


# -- 11. rejection ----------------------------------------------------------------------------------


def _check_refused(error: BaseException, malformed: Malformed, *, line: int) -> None:
    expected = malformed.error if isinstance(malformed.error, tuple) else (malformed.error,)
    assert type(error) in expected, f"{type(error).__name__}: {error}"
    assert isinstance(error, gamma.InputError) and isinstance(error, ValueError)
    assert error.line == line, str(error)
    if malformed.field is not None:
        assert error.field == malformed.field, str(error)


class TestRejection:
    """SPEC §2: a log is accepted only as a whole; each malformation has its typed error."""

    @given(malformed_logs())
    def test_every_malformation_is_refused_with_its_typed_error(self, malformed: Malformed) -> None:
        """Every generated malformation is refused with the error class of SPEC §2, naming its physical line and field."""
        with pytest.raises(gamma.InputError) as caught:
            parse_events(malformed.text.split("\n"), policy=malformed.policy)
        _check_refused(caught.value, malformed, line=malformed.line)

    @settings(max_examples=STORES, deadline=None)
    @given(data=st.data())
    def test_a_refused_batch_leaves_the_store_unchanged(
        self, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
    ) -> None:
        """A batch holding any malformation is refused whole by a store, whose head, events and export stay as they were."""
        from gamma.storage.store import Store

        base = data.draw(logs(max_size=6), label="stored")
        malformed = data.draw(malformed_logs(base=base), label="batch")
        assume(not malformed.stored_by_a_store)
        path = tmp_path_factory.mktemp("store") / "events.db"
        with Store.init(path, policy=base.policy) as store:
            store.append(base.text())
            head, exported = store.head(), list(store.export())
            with pytest.raises(gamma.InputError) as caught:
                store.append(malformed.batch)
            _check_refused(caught.value, malformed, line=malformed.batch_line)
            assert store.head() == head
            assert list(store.export()) == exported
            assert store.verify().ok


# -- 12. experiences --------------------------------------------------------------------------------

# SPEC §7, the governance x applicability table, row by row.
TABLE = {
    "valid": {"applicable": "KEEP", "adaptable": "ADAPT", "unusable": "REJECT"},
    "superseded": {"applicable": "ADAPT", "adaptable": "ADAPT", "unusable": "ADAPT"},
    "outranked": {"applicable": "ADAPT", "adaptable": "ADAPT", "unusable": "ADAPT"},
    "expired": {"applicable": "REJECT", "adaptable": "REJECT", "unusable": "REJECT"},
    "access_denied": {"applicable": "REJECT", "adaptable": "REJECT", "unusable": "REJECT"},
    "draft": {"applicable": "REJECT", "adaptable": "REJECT", "unusable": "REJECT"},
}


def _replacement(fact: str, r: Resolution) -> str | None:
    seen: set[str] = set()
    while r.admitted_fact(fact) is None:
        reasons = reasons_of(r, fact)
        if fact in seen or not reasons or not set(reasons) <= SUBSTITUTING:
            return None
        seen.add(fact)
        (reason,) = reasons.values()
        fact = min(reason.facts)
    return fact


class TestExperiences:
    """SPEC §7: an experience's verdict follows from its used facts' governance."""

    @given(scenarios(tenant=None))
    def test_the_verdict_follows_the_used_facts_reasons(self, scenario: Scenario) -> None:
        """Every verdict, its bindings and its reasons follow SPEC §7 from the used facts' exclusion reasons, and single-fact cases match the governance x applicability table."""
        r = resolved(scenario)
        lines = {
            line["experience"]: line
            for line in scenario.log.prefix(scenario.at).lines
            if line["type"] == "experience"
        }
        assert {v.experience for v in r.experiences} == {
            x for x, line in lines.items() if line["tenant"] == scenario.actor["tenant"]
        }
        for verdict in r.experiences:
            line = lines[verdict.experience]
            used = list(dict.fromkeys(line.get("uses", [])))
            applicability = line.get("applicability", "applicable")
            withdrawn = any(set(reasons_of(r, u)) - SUBSTITUTING for u in used)
            bindings = {}
            for u in used:
                reasons = reasons_of(r, u)
                if reasons and set(reasons) <= SUBSTITUTING:
                    replacement = _replacement(u, r)
                    withdrawn = withdrawn or replacement is None
                    bindings[u] = replacement
            recheck = any((a := r.admitted_fact(u)) is not None and a.needs_recheck for u in used)
            if withdrawn:
                expected, bindings = "REJECT", {}
            elif bindings or recheck:
                expected = "ADAPT"
            else:
                expected = TABLE["valid"][applicability]
            assert verdict.verdict == expected, verdict
            assert dict(verdict.bindings) == bindings, verdict
            expected_reasons = sorted(
                (u, reason.code, reason.events)
                for u in used
                for reason in reasons_of(r, u).values()
            )
            got = [(x.fact, x.code, x.events) for x in verdict.reasons]
            assert got == expected_reasons, verdict
            # the paper's table, for an experience over one fact whose status is one row
            if len(used) == 1:
                codes = set(reasons_of(r, used[0]))
                row = (
                    "valid"
                    if not codes and not recheck
                    else next(iter(codes))
                    if len(codes) == 1
                    else None
                )
                if row in TABLE and (row not in SUBSTITUTING or bindings):
                    assert verdict.verdict == TABLE[row][applicability], (row, verdict)
