"""The engine's kept phases: results cached per actor class and time stay those of the pure Γ.

The engine reruns the phases only for the keys an append, a deferred effect or a move of
``at`` touched since a class last asked; these properties drive one engine through appends
and queries by a small pool of actors and times, so the same caches are asked again and
again, each answer compared with ``gamma.resolve`` over the events so far.
"""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
from helpers import A, G, R, stamp
from hypothesis import given
from hypothesis import strategies as st
from strategies import actors, logs, probe_times

import gamma
from gamma.core.incremental.engine import EngineState
from gamma.core.incremental.tenants import _copied
from gamma.core.resolving.resolver import FoldedFact


def _pure(lines: list[dict[str, Any]], policy: gamma.Policy, actor: Any, at: Any) -> gamma.Resolution:
    events = gamma.parse_events([json.dumps(line) for line in lines], policy=policy)
    return gamma.resolve(events, actor, at, policy)


def _decided(resolution: gamma.Resolution) -> dict[str, gamma.Admitted | gamma.Excluded]:
    return {a.fact: a for a in resolution.admitted} | {x.fact: x for x in resolution.excluded}


@given(st.data())
def test_interleaved_queries_by_a_pool_of_actors_and_times_equal_pure(data: st.DataObject) -> None:
    """Appends between resolves, checks and keys= queries of a few actors at a few times:
    each answer is the pure one over the events so far, whatever was cached before it."""
    log = data.draw(logs(max_size=18))
    pool_actors = data.draw(st.lists(actors(log), min_size=1, max_size=3))
    pool_times = data.draw(st.lists(probe_times(log), min_size=1, max_size=3))
    engine = EngineState(log.policy)
    done = 0
    while done < len(log.lines):
        done += data.draw(st.integers(1, min(4, len(log.lines) - done)))
        engine.append(list(log.lines[len(engine) : done]))
        for _ in range(data.draw(st.integers(0, 4))):
            actor = data.draw(st.sampled_from(pool_actors))
            at = data.draw(st.sampled_from(pool_times))
            expected = _pure(list(log.lines[:done]), log.policy, actor, at)
            query = data.draw(st.sampled_from(("resolve", "check", "keys")))
            decided = _decided(expected)
            if query == "resolve":
                got = engine.resolve(actor, at)
                assert got.to_json() == expected.to_json()
                assert got.known_unknowns == expected.known_unknowns
                assert got.recheck_inputs == expected.recheck_inputs
                assert got.positions == expected.positions
                assert got.retract_reasons == expected.retract_reasons
                assert got.render("text") == expected.render("text")
            elif query == "check" and decided:
                asked = data.draw(st.lists(st.sampled_from(sorted(decided)), min_size=1, max_size=3))
                assert engine.check(actor, at, asked) == {f: decided[f] for f in asked}
            elif query == "keys":
                keys = sorted({r.key for r in decided.values() if r.key} | {"nokey"})
                wanted = set(data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=2)))
                part = engine.resolve(actor, at, keys=wanted)
                of = {f for f, r in decided.items() if r.key in wanted}
                assert part.admitted == tuple(a for a in expected.admitted if a.key in wanted)
                assert part.excluded == tuple(x for x in expected.excluded if x.key in wanted)
                assert part.known_unknowns == tuple(k for k in expected.known_unknowns if k in wanted)
                assert part.recheck_inputs == tuple(r for r in expected.recheck_inputs if r[0] in of)
                assert part.ignored == tuple(i for i in expected.ignored if i.fact in of)
                used = [x for x in log.lines[:done] if x["type"] == "experience" and x.get("uses")]
                mine = {x["experience"] for x in used if set(x["uses"]) <= of}
                assert part.experiences == tuple(v for v in expected.experiences if v.experience in mine)


@given(st.data())
def test_moving_at_back_and_forth_equals_pure(data: st.DataObject) -> None:
    """One actor asks at times going forward and back over the whole log (validity flips,
    deferred effects, prefixes): every answer is the pure one."""
    log = data.draw(logs(max_size=14))
    engine = EngineState(log.policy)
    engine.append(list(log.lines))
    actor = data.draw(actors(log))
    for at in data.draw(st.lists(probe_times(log), min_size=2, max_size=6)):
        expected = _pure(list(log.lines), log.policy, actor, at)
        assert engine.resolve(actor, at).to_json() == expected.to_json()
        decided = _decided(expected)
        if decided:
            assert engine.check(actor, at, sorted(decided)) == decided


AT = "2030-01-01T00:00:00Z"


def test_actors_of_one_class_share_results_but_not_an_id_a_fact_names() -> None:
    """Two actors alike but for an id a visibility list names decide differently; a third,
    named nowhere, is decided as the first; the caches never mix them up."""
    events = stamp([
        A("F1", "plan", "gold", visibility={"actors": ["bob"]}), A("F2", "tone", "dry"),
        G(fact="F1", to_actor="ann"),
    ])
    engine = EngineState()
    engine.append(events[:2])
    ann, bob, cy = ({"id": who, "tenant": "acme"} for who in ("ann", "bob", "cy"))
    assert [a.fact for a in engine.resolve(ann, AT).admitted] == ["F2"]
    assert [a.fact for a in engine.resolve(bob, AT).admitted] == ["F1", "F2"]
    assert [a.fact for a in engine.resolve(cy, AT).admitted] == ["F2"]
    assert engine.resolve(cy, AT).actor.id == "cy"
    # a grant naming ann moves ann (and only ann) into a class of her own
    engine.append(events[2:])
    assert [a.fact for a in engine.resolve(ann, AT).admitted] == ["F1", "F2"]
    assert [a.fact for a in engine.resolve(cy, AT).admitted] == ["F2"]


def test_a_check_after_an_append_sees_the_append() -> None:
    """A check answered from the kept results is invalidated by a retract of that fact's key."""
    events = stamp([A("F1", "region", "EMEA"), A("F2", "tone", "dry"), R("F1")])
    engine = EngineState()
    engine.append(events[:2])
    who = {"id": "ann", "tenant": "acme"}
    assert isinstance(engine.check(who, AT, ["F1"])["F1"], gamma.Admitted)
    engine.resolve(who, AT)
    engine.append(events[2:])
    assert engine.check(who, AT, ["F1"])["F1"].codes == ("retracted",)  # type: ignore[union-attr]
    assert [a.fact for a in engine.resolve(who, AT).admitted] == ["F2"]


def test_a_later_at_crosses_a_valid_until() -> None:
    """The same actor asking later, after a fact's valid_until, sees it expire (and again
    earlier, not expired): moving ``at`` invalidates the keys whose validity flips."""
    engine = EngineState()
    engine.append(stamp([A("F1", "offer", "10%", valid_until="2028-01-01T00:00:00Z")]))
    who = {"id": "ann", "tenant": "acme"}
    before, after = "2027-06-01T00:00:00Z", "2028-06-01T00:00:00Z"
    assert [a.fact for a in engine.resolve(who, before).admitted] == ["F1"]
    assert engine.resolve(who, after).excluded[0].codes == ("expired",)
    assert [a.fact for a in engine.resolve(who, before).admitted] == ["F1"]


def test_resolve_reuses_the_kept_results(monkeypatch: Any) -> None:
    """After an append of one key, a resolve reruns phases 1-3 for that key only."""
    from gamma.core.incremental import derived

    events = stamp([*(A(f"F{i}", f"k{i}", i) for i in range(50)), A("F99", "k7", "new")])
    engine = EngineState()
    engine.append(events[:50])
    who = {"id": "ann", "tenant": "acme"}
    engine.resolve(who, AT)
    seen: list[int] = []
    real = derived.own_codes

    def counting(facts: Any, *args: Any) -> Any:
        seen.append(len(facts))
        return real(facts, *args)

    monkeypatch.setattr(derived, "own_codes", counting)
    engine.append(events[50:])
    got = engine.resolve(who, AT)
    assert seen == [2]  # the two facts of k7
    assert got.excluded_fact("F7") is not None and got.admitted_fact("F99") is not None


def test_a_check_after_a_dependency_changed_equals_pure() -> None:
    """A check of a key whose dependency's key was touched since (a computed, untouched key
    is not walked for ancestors) gives the pure path's decision, along a chain of keys."""
    events = stamp([
        A("F1", "k1", "a"), A("F2", "k2", "b", depends_on=["F1"]), A("F3", "k3", "c", depends_on=["F2"]),
        A("F4", "k4", "d", depends_on=["F3"]), R("F1"),
    ])
    engine = EngineState()
    who = {"id": "ann", "tenant": "acme"}
    engine.append(events[:3])
    assert isinstance(engine.check(who, AT, ["F2"])["F2"], gamma.Admitted)  # k1, k2 computed
    engine.append(events[3:])  # a new key over the computed chain, and its root retracted
    for asked in (["F4"], ["F3"], ["F2", "F4"]):
        expected = _decided(_pure(events, gamma.Policy(), who, AT))
        got = engine.check(who, AT, asked)
        assert got == {f: expected[f] for f in asked}
        assert isinstance(got[asked[-1]], gamma.Excluded)


def test_the_ancestor_walk_skips_computed_untouched_keys() -> None:
    """The walk for a check does not read the facts of a computed key no append touched
    (its dependencies' keys are computed), only those of the touched and new keys."""
    chain = [A("F0", "k0", 0), *(A(f"F{i}", f"k{i}", i, depends_on=[f"F{i - 1}"]) for i in range(1, 6))]
    events = stamp([*chain, A("F9", "k9", "x"), A("F10", "k9", "y")])
    engine = EngineState()
    who = {"id": "ann", "tenant": "acme"}
    engine.append(events[:7])
    engine.check(who, AT, ["F5", "F9"])
    engine.append(events[7:])  # touches k9 only
    actor, at = engine._normalise(who, AT)
    view = engine._view(actor, at)
    assert view is not None
    _, fold, derived = view
    assert derived.dirty == {"k9"}
    no_facts = SimpleNamespace(facts={})  # a walk into k5's facts would raise KeyError
    assert derived._missing_ancestors(no_facts, {"k5"}) == {"k5"}  # type: ignore[arg-type]
    assert derived._missing_ancestors(fold, {"k5", "k9"}) == {"k5", "k9"}
    expected = _decided(_pure(events, gamma.Policy(), who, AT))
    assert engine.check(who, AT, ["F5", "F10"]) == {f: expected[f] for f in ("F5", "F10")}


def test_engine_state_answers_as_the_checked_methods() -> None:
    """``Engine.state`` (what ``gamma serve`` calls, past the argument checks) answers as the
    engine's public methods, which still check their arguments."""
    engine = gamma.Engine()
    engine.append(stamp([A("F1", "k1", "a"), A("F2", "k2", "b", depends_on=["F1"]), R("F1")]))
    who = {"id": "ann", "tenant": "acme"}
    assert engine.state.check(who, AT, ["F2", "F1"]) == engine.check(who, AT, ["F2", "F1"])
    assert engine.state.resolve(who, AT).to_json() == engine.resolve(who, AT).to_json()
    with pytest.raises(TypeError, match="facts must be"):
        engine.check(who, AT, "F1")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["exclude", "flag", "recompute"])
def test_the_inheritance_walk_reaches_every_fact_whose_inputs_moved(mode: str) -> None:
    """Phase 4 stops where nothing a fact reads moved (``Derived._moved_region``), yet reaches
    a fact whose dependency's origin moved (the root expiring: every origin of the chain
    moves to it, no own code past the root does; back before the expiry, they move to none)
    and a fact whose dependencies' origins stayed but whose origin's own codes moved (the
    expired root retracted too: the reasons down the chain name the retraction); a side
    branch whose origin is its own is left as it was."""
    chain = [A("F1", "k1", "a", valid_until="2026-03-01T12:00:00Z")]
    chain += [A(f"F{i}", f"k{i}", i, depends_on=[f"F{i - 1}"]) for i in range(2, 6)]
    side = [A("F6", "k6", 6, depends_on=["F2"]), R("F6"), A("F7", "k7", 7, depends_on=["F6"])]
    events = stamp([*chain, *side, R("F1")])
    policy = gamma.Policy(dependency_mode=mode)  # type: ignore[arg-type]
    engine = EngineState(policy)
    who = {"id": "ann", "tenant": "acme"}
    early, late = "2026-03-01T10:00:00Z", AT
    engine.append(events[:-1])
    seen = []
    for at, upto in ((early, -1), (late, -1), (early, -1), (late, -1), (late, None)):
        if upto is None:
            engine.append(events[-1:])
        expected = _pure(events[:upto], policy, who, at)
        got = engine.resolve(who, at)
        assert got.to_json() == expected.to_json()
        seen.append((_decided(got)["F5"], _decided(got)["F7"]))
    assert seen[0] == seen[2] and seen[1] == seen[3] and len({side for _, side in seen}) == 1
    if mode != "flag":  # flagged, F5 is admitted for recheck of F1 once it expired
        assert seen[0][0] != seen[1][0] != seen[4][0]  # the expiry, the retraction reach F5


def test_a_due_facts_copy_is_copy_copy() -> None:
    """``tenants._copied`` (a turn's copies of the records deferred effects change) makes what
    ``copy.copy`` makes: every field, none shared but by reference, a distinct object."""
    (event,) = gamma.parse_events([json.dumps(stamp([A("F1", "k1", "a")])[0])])
    assert isinstance(event, gamma.Assert)
    other = FoldedFact(event=event, rank=1, scope="global", id="F0")
    fact = FoldedFact(event, 2, "team", "F1", 3, "e4", "e5", "why", other, "e6", "e7")
    made = _copied(fact)
    assert made == copy.copy(fact) and made is not fact and made.superseded_by is other
    assert attrs.astuple(made, recurse=False) == attrs.astuple(fact, recurse=False)
