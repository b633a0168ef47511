"""The engine's context block, kept rendered between calls (issue 28), against the pure path.

The engine keeps each admitted fact's context line per actor class and re-renders only the
lines of the facts a turn changed; a resolution carries them and ``render("context")`` joins
them. A stateful machine drives one engine through appends (asserts, retracts, promotes,
grants, revocations, experiences), moves of ``at`` across validity bounds and queries by a
few actors; after every step each actor's block, whole and restricted to some keys, and the
JSON are the pure path's bytes.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from helpers import A, R, stamp, ts
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from strategies import Log, actors, extensions, logs, probe_times

import gamma
from gamma.core.incremental.engine import EngineState
from gamma.core.resolving import context as context_module
from gamma.core.terms.limits import MAX_CONTEXT_BYTES


def _pure(log: Log, actor: Any, at: Any) -> gamma.Resolution:
    events = gamma.parse_events([json.dumps(line) for line in log.lines], policy=log.policy)
    return gamma.resolve(events, actor, at, log.policy)


def _context(resolution: gamma.Resolution, keys: Any = None) -> str | type[Exception]:
    try:
        return resolution.render("context", keys=keys)
    except gamma.GammaError as error:  # the refusal must be the same too
        return type(error)


class EngineRenderMachine(RuleBasedStateMachine):
    """One engine, appended to in turns; a few actors ask at a moving time."""

    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        self.log: Log = data.draw(logs(max_size=8), label="log")
        self.actors = data.draw(st.lists(actors(self.log), min_size=1, max_size=3), label="actors")
        self.at = data.draw(probe_times(self.log), label="at")
        self.engine = EngineState(self.log.policy)
        self.engine.append(list(self.log.lines))

    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        """A turn: a few events of any type after the log (retracts, grants, revocations...)."""
        more = data.draw(extensions(self.log, min_size=1, max_size=4), label="turn")
        self.engine.append(list(more.lines))
        self.log = self.log + more

    @rule(data=st.data())
    def move(self, data: st.DataObject) -> None:
        """``at`` moves, often onto or beside a valid_from/valid_until: facts start or expire."""
        self.at = data.draw(probe_times(self.log), label="at")

    @rule(data=st.data())
    def restricted(self, data: st.DataObject) -> None:
        """``resolve(keys=...)`` and ``render(keys=...)`` of a few keys (one unknown)."""
        actor = data.draw(st.sampled_from(self.actors))
        keys = sorted({line["key"] for line in self.log.lines if "key" in line} | {"nokey"})
        wanted = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3), label="keys")
        expected = _pure(self.log, actor, self.at)
        assert _context(self.engine.resolve(actor, self.at), wanted) == _context(expected, wanted)
        part = self.engine.resolve(actor, self.at, keys=wanted)
        assert _context(part) == _context(expected, wanted)

    @invariant()
    def every_actor_sees_the_pure_bytes(self) -> None:
        if not hasattr(self, "engine"):
            return
        for actor in self.actors:
            expected = _pure(self.log, actor, self.at)
            got = self.engine.resolve(actor, self.at)
            assert _context(got) == _context(expected)
            assert got.to_json() == expected.to_json()
            keys = sorted({a.key for a in expected.admitted} | set(expected.known_unknowns))
            some = keys[::2]
            assert _context(got, some) == _context(expected, some)
            assert _context(got, []) == _context(expected, [])


    @invariant()
    def the_kept_state_agrees_with_itself(self) -> None:
        """What the shortcuts of a turn rely on (issue 28): a class's ``admitted`` and
        ``excluded`` tables hold a fact as its record in ``decided`` is (``Derived._record``
        removes a record from the other table only when it changes side), and the view of a
        tenant's pending effects kept across turns (``TenantFold.view_at``) holds the records,
        ignored entries and pending effects of folding the tenant afresh up to its ``at``."""
        if not hasattr(self, "engine"):
            return
        for derived in self.engine._classes.values():
            decided = derived.decided
            assert {a.fact for a in derived.admitted.values()} == {
                f for f, r in decided.items() if isinstance(r, gamma.Admitted)
            }
            assert {x.fact for x in derived.excluded.values()} == {
                f for f, r in decided.items() if isinstance(r, gamma.Excluded)
            }
        for tenant, kept in self.engine._tenants.items():
            overlay = kept.overlay
            if (
                overlay is None
                or kept.overlay_seen[0] != kept.version
                or kept.folded != len(kept.events)  # events taken since: folded when next asked
            ):
                continue
            view = overlay.fold
            fresh, _ = self.engine._fresh(tenant, overlay.at)
            assert view.ignored == fresh.ignored and view.pending == fresh.pending
            assert [f.id for f in view.order] == [f.id for f in fresh.order]
            for record, mine in zip(fresh.order, view.order, strict=True):
                assert view.facts[record.id] is mine
                assert _fields(mine) == _fields(record), record.id


def _fields(record: Any) -> tuple[Any, ...]:
    """A fold's record of a fact, its superseding fact by id."""
    by = record.superseded_by
    return (
        record.event, record.commit_pos, record.commit_event, record.retracted_by,
        record.retract_reason, None if by is None else by.id, record.superseding_event,
        record.erased_by, record.rank, record.scope,
    )  # fmt: skip


EngineRenderMachine.TestCase.settings = settings(
    max_examples=min(settings().max_examples, 60),
    stateful_step_count=min(12, settings().stateful_step_count),
    deadline=None,
)
TestEngineRenderMachine = EngineRenderMachine.TestCase


AT = "2030-01-01T00:00:00Z"
WHO = {"id": "ann", "tenant": "acme"}


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = context_module.context_line

    def counting(a: Any, inputs: Any = ()) -> str:
        seen.append(a.fact)
        return real(a, inputs)

    monkeypatch.setattr(context_module, "context_line", counting)
    return seen


def test_a_turn_renders_only_the_lines_it_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first block, a turn that supersedes one fact and adds one renders those two
    lines only; a second render of the same state renders none."""
    events = stamp([
        *(A(f"F{i}", f"k{i:02}", f"v{i}") for i in range(60)),
        A("G1", "k07", "new", supersedes=["F7"]), A("G2", "fresh", "x"),
    ])  # fmt: skip
    engine = EngineState()
    engine.append(events[:60])
    seen = _counting(monkeypatch)
    first = engine.resolve(WHO, AT).render("context")
    assert len(seen) == 60 and first.count("\n- [") == 60
    seen.clear()
    engine.append(events[60:])
    block = engine.resolve(WHO, AT).render("context")
    assert sorted(seen) == ["G1", "G2"]
    assert "[F7]" not in block and "- [G1] k07 = \"new\"" in block
    seen.clear()
    assert engine.resolve(WHO, AT).render("context") == block and seen == []
    events_all = gamma.parse_events([json.dumps(e) for e in events])
    assert block == gamma.resolve(events_all, WHO, AT).render("context")


def test_an_evolved_resolution_renders_what_it_holds() -> None:
    """The kept lines are used only for the very records they were rendered from: a copy of
    the resolution with other admitted facts renders those (the pure path's bytes)."""
    engine = EngineState()
    engine.append(stamp([A("F1", "a", 1), A("F2", "b", 2)]))
    got = engine.resolve(WHO, AT)
    fewer = attrs.evolve(got, admitted=got.admitted[1:])
    assert "[F1]" in got.render("context")
    assert "[F1]" not in fewer.render("context") and "[F2]" in fewer.render("context")
    plain = gamma.Resolution.from_dict(json.loads(got.to_json()))
    assert plain.render("context") == got.render("context")


def test_a_block_past_the_limit_is_refused_and_a_narrower_one_is_not() -> None:
    """The engine's kept block is refused past MAX_CONTEXT_BYTES as the pure one is, never
    cut; ``keys`` narrows it."""
    big = "x" * 60_000
    count = MAX_CONTEXT_BYTES // len(big) + 2
    events = stamp([A(f"F{i}", f"k{i}", big) for i in range(count)])
    engine = EngineState()
    engine.append(events)
    got = engine.resolve(WHO, AT)
    with pytest.raises(gamma.LimitError):
        got.render("context")
    with pytest.raises(gamma.LimitError):
        gamma.resolve(gamma.parse_events([json.dumps(e) for e in events]), WHO, AT).render("context")
    assert got.render("context", keys=["k1"]).count("\n- [") == 1


def test_a_pending_effect_is_not_recomputed_each_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A supersession due between the last event and ``at`` runs in a view of the kept fold;
    a turn touching other keys recomputes those keys only (the view runs the same effects),
    and every answer, including after a turn touching the pending fact and one passing its
    time, is the pure one."""
    from gamma.core.incremental import derived

    events = stamp([
        A("F1", "a", "old"), A("F2", "a", "new", supersedes=["F1"], valid_from=ts(100)),
        A("F3", "b", 1), A("F4", "c", 2), R("F2"), A("F5", "d", 3),
    ])  # fmt: skip
    events[-1]["ts"] = ts(200)  # past F2's valid_from: its effect moves into the kept fold
    engine = EngineState()
    engine.append(events[:2])
    seen: list[str] = []
    real = derived.own_codes

    def counting(facts: Any, *args: Any) -> Any:
        seen.extend(f.id for f in facts)
        return real(facts, *args)

    monkeypatch.setattr(derived, "own_codes", counting)
    for done in range(2, len(events) + 1):
        engine.append(events[len(engine) : done])
        seen.clear()
        got = engine.resolve(WHO, AT)
        pure = gamma.resolve(gamma.parse_events([json.dumps(e) for e in events[:done]]), WHO, AT)
        assert got.to_json() == pure.to_json()
        assert got.render("context") == pure.render("context")
        if done in (3, 4):  # an unrelated key: key a's facts are not computed again
            assert seen == [events[done - 1]["fact"]]
