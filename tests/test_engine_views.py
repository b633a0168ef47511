"""The engine's views of pending effects (issue 28): deferred effects due between the last
event and ``at`` run on copies of the kept fold's tables kept between views, against the
pure path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import TENANT, A, G, R, V, stamp, ts
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from test_engine_render import EngineRenderMachine

import gamma
from gamma.core.incremental import derived
from gamma.core.incremental.engine import EngineState

WHO = {"id": "ann", "tenant": TENANT}


def _pure(events: list[dict[str, Any]], at: str) -> gamma.Resolution:
    return gamma.resolve(gamma.parse_events([json.dumps(e) for e in events]), WHO, at)


def test_views_of_pending_effects_stay_pure_across_turns() -> None:
    """Each turn (a rival in a due fact's slot, a new key, a retracted supersedes target, a
    new pending effect) and each ``at`` (one effect due, both, back to one) gives the pure
    bytes; the kept fold keeps its own records (asked at its last event, the pure bytes
    too); and the copies are the same tables turn after turn, not made again."""
    events = stamp([
        A("F1", "a", "old"), A("F2", "a", "new", supersedes=["F1"], valid_from=ts(900)),
        A("F3", "b", 1), A("F4", "b", 2, valid_from=ts(1100)),
        A("F6", "a", "rival"), A("F7", "d", 4), R("F1"),
        A("F8", "b", 5, supersedes=["F3"], valid_from=ts(950)), A("F9", "a", "last"),
    ])  # fmt: skip
    engine = EngineState()
    engine.append(events[:4])
    tables = None
    for done in range(4, len(events) + 1):
        engine.append(events[len(engine) : done])
        for at in (ts(1000), ts(1200), ts(1000), events[done - 1]["ts"]):
            got, pure = engine.resolve(WHO, at), _pure(events[:done], at)
            assert got.to_json() == pure.to_json(), (done, at)
            assert got.render("context") == pure.render("context")
        kept = engine._tenants[TENANT]
        assert kept.overlay is not None or tables is None
        shadow = kept.shadow()
        assert shadow[0] is not kept.fold.facts and shadow[0] == kept.fold.facts
        assert shadow[1] == kept.fold.order
        if tables is not None:
            assert shadow[0] is tables
        tables = shadow[0]


def test_a_long_key_recomputes_only_what_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key of a long history: a turn computes phases 1-3 again for its new and changed
    facts and its candidates for precedence, not for its settled history (a grant on the key
    excepted: it may reach every fact); a grant and a revoke naming a settled fact, a
    retract and a move of ``at`` past a fact's ``valid_until`` each reach the facts they
    change: every answer is the pure one."""
    head = [
        *(A(f"F{i}", "k", i, supersedes=[f"F{i - 1}"] if i else []) for i in range(12)),
        A("H1", "k", "hidden", visibility={"roles": ["hr"]}), A("U1", "k", "soon", valid_until=ts(30)),
    ]  # fmt: skip
    turns = [
        [A("N1", "k", "new")],
        [G(fact="H1", role="staff")],
        [R("F3")],
        [V(fact="H1", role="staff"), A("N2", "other", 1)],
        [G(key="k", role="staff")],
        [A("N3", "k", "newer", supersedes=["N1"])],
    ]
    log = stamp([*head, *(event for turn in turns for event in turn)])
    who = {"id": "ann", "tenant": TENANT, "roles": ["staff"]}
    engine = EngineState()
    engine.append(log[: len(head)])
    seen: list[str] = []
    real = derived.own_codes

    def counting(facts: Any, *args: Any) -> Any:
        found = real(facts, *args)
        seen.extend(found)
        return found

    monkeypatch.setattr(derived, "own_codes", counting)
    engine.resolve(who, ts(31))
    for turn in turns:
        engine.append(log[len(engine) : len(engine) + len(turn)])
        for at in (ts(29), ts(31), ts(31)):  # across U1's valid_until, and the same again
            seen.clear()
            got = engine.resolve(who, at)
            pure = gamma.resolve(gamma.parse_events([json.dumps(e) for e in log[: len(engine)]]), who, at)
            assert got.to_json() == pure.to_json(), (turn, at)
            assert got.render("context") == pure.render("context")
            if at == ts(29) and "key" not in turn[0]:  # a grant on the key reaches every fact
                assert len(seen) < 6, (turn, seen)  # the settled history is not computed
        assert seen == []  # the same view as the call before: nothing computed


def test_the_render_machine_with_every_key_long(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stateful machine of ``test_engine_render`` with every key taken for a long one:
    the skipping of settled facts is checked against the pure path over generated turns."""
    monkeypatch.setattr(derived, "LONG_KEY", 0)
    run_state_machine_as_test(
        EngineRenderMachine,
        settings=settings(max_examples=min(settings().max_examples, 40), stateful_step_count=10),
    )
