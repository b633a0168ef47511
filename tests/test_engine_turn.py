"""The engine's turn made cheaper (issue 28, fourth round), each shortcut against the pure path.

A view of the kept fold with deferred effects run is kept across turns that touch none of its
keys (``TenantFold.view_at``); the actor object and time string a host repeats are read once
(``EngineState._normalise``); a context line's value is encoded without an encoder per call
(``render._value``). Each test fails if the rule the shortcut relies on is dropped.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import TENANT, A, R, stamp, ts
from hypothesis import given, settings
from hypothesis import strategies as st

import gamma
from gamma.core.incremental import tenants
from gamma.core.incremental.derived import Table
from gamma.core.incremental.engine import EngineState
from gamma.core.resolving import render

WHO = {"id": "ann", "tenant": TENANT}
AT = ts(1000)


def _pure(events: list[dict[str, Any]], who: Any, at: str) -> gamma.Resolution:
    return gamma.resolve(gamma.parse_events([json.dumps(e) for e in events]), who, at)


def test_a_view_is_kept_across_turns_that_touch_none_of_its_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Effects due between the last event and ``at`` (F2 supersedes F1, F4 supersedes F3 of
    another key) run in a view; a turn on other keys keeps it (the view is not made again),
    even one adding an ignored entry; a rival in a due fact's slot, a retract of a due fact's
    target, a new effect due by ``at`` and a turn past a due time each make it again. Every
    answer is the pure one."""
    head = [
        A("F1", "a", "old"), A("F2", "a", "new", supersedes=["F1"], valid_from=ts(900)),
        A("F3", "t", 1), A("F4", "b", 2, supersedes=["F3"], valid_from=ts(950)),
        A("H1", "h", "high", authority="executive"),
    ]  # fmt: skip
    turns: list[tuple[list[dict[str, Any]], bool]] = [  # (events, view kept)
        ([A("N1", "n", 1)], True),
        ([A("N2", "n", 2), A("N3", "m", 3)], True),
        ([R("H1", authority="peer")], True),  # ignored: insufficient authority
        ([A("F5", "a", "rival")], False),  # in F2's slot: F2's effect supersedes it too
        ([A("N4", "n", 4)], True),
        ([R("F3")], False),  # F4's target, of key t
        ([A("N5", "m", 5)], True),
        ([A("F6", "c", 6, valid_from=ts(990))], False),  # a new effect due by ``at``
        ([A("N6", "n", 7)], True),
    ]
    log = stamp([*head, *(event for events, _ in turns for event in events)])
    made: list[int] = []
    real = tenants.due_at

    def counting(kept: Any, at: Any) -> Any:
        made.append(kept.version)
        return real(kept, at)

    monkeypatch.setattr(tenants, "due_at", counting)
    engine = EngineState()
    engine.append(log[: len(head)])
    assert engine.resolve(WHO, AT).to_json() == _pure(log[: len(head)], WHO, AT).to_json()
    assert made != []
    for events, kept_view in turns:
        engine.append(log[len(engine) : len(engine) + len(events)])
        made.clear()
        got, pure = engine.resolve(WHO, AT), _pure(log[: len(engine)], WHO, AT)
        assert got.to_json() == pure.to_json(), events
        assert got.render("context") == pure.render("context"), events
        assert (made == []) == kept_view, events
    made.clear()
    got, pure = engine.resolve(WHO, AT), _pure(log, WHO, AT)
    assert got.to_json() == pure.to_json() and made == []
    # past F2's valid_from: the kept fold runs the effect, the pending effects differ
    late = stamp([*log, A("L1", "z", 1)])
    late[-1]["ts"] = ts(920)
    engine.append(late[-1:])
    made.clear()
    got, pure = engine.resolve(WHO, AT), _pure(late, WHO, AT)
    assert got.to_json() == pure.to_json() and got.render("context") == pure.render("context")
    assert made != []


def test_a_kept_view_matches_a_fresh_fold_record_for_record() -> None:
    """The kept view, after turns that kept it, holds the records, slots' answers, ignored
    entries and pending effects that folding the tenant afresh up to ``at`` gives."""
    log = stamp([
        A("F1", "a", "old"), A("F2", "a", "new", supersedes=["F1"], valid_from=ts(900)),
        A("H1", "h", "high", authority="executive"), A("N1", "n", 1), R("H1", authority="peer"),
        A("N2", "n", 2, supersedes=["N1"]), A("N3", "m", 3),
    ])  # fmt: skip
    engine = EngineState()
    engine.append(log[:2])
    engine.resolve(WHO, AT)
    first = engine._tenants[TENANT].overlay
    for event in log[2:]:
        engine.append([event])
        engine.resolve(WHO, AT)
    kept = engine._tenants[TENANT]
    assert kept.overlay is not None and first is not None and kept.overlay.fold is first.fold
    view = kept.overlay.fold
    fresh, _ = engine._fresh(TENANT, gamma.core.terms.canonical.parse_at(AT))
    assert view.facts.keys() == fresh.facts.keys() and view.ignored == fresh.ignored
    assert view.pending == fresh.pending
    for fact_id, record in fresh.facts.items():
        mine = view.facts[fact_id]
        assert view.order[fresh.order.index(record)] is mine
        for name in ("event", "commit_pos", "retracted_by", "superseding_event", "erased_by"):
            assert getattr(mine, name) == getattr(record, name), (fact_id, name)
        ours, theirs = mine.superseded_by, record.superseded_by
        assert (ours and ours.id) == (theirs and theirs.id), fact_id


def test_the_actor_is_read_by_its_exact_content() -> None:
    """An actor object asked again is the actor read the first time, but one changed in
    place (a role added), one whose values differ only in type, and one refused, which is
    refused every time, as ``gamma.resolve`` does."""
    log = stamp([
        A("F1", "a", 1, visibility={"roles": ["hr"]}), A("F2", "b", 2),
    ])  # fmt: skip
    engine = EngineState()
    engine.append(log)
    who: dict[str, Any] = {"id": "ann", "tenant": TENANT, "roles": []}
    assert [a.fact for a in engine.resolve(who, AT).admitted] == ["F2"]
    who["roles"].append("hr")  # the same object, another actor now
    got = engine.resolve(who, AT)
    assert got.to_json() == _pure(log, who, AT).to_json()
    assert [a.fact for a in got.admitted] == ["F1", "F2"]
    for other in (
        {"id": "ann", "tenant": TENANT, "roles": ("hr",)},
        {"id": "ann", "tenant": TENANT, "roles": "hr"},
        {"id": "ann", "tenant": TENANT, "roles": ["hr"], "clearance": 1},
        {"id": "ann", "tenant": TENANT, "roles": [1]},
        {"id": "ann", "tenant": TENANT, "roles": ["hr"], "scope": "no scope"},
    ):
        for _ in range(2):
            try:
                expected: Any = _pure(log, other, AT).to_json()
            except gamma.GammaError as error:
                expected = (type(error), str(error))
            try:
                found: Any = engine.resolve(other, AT).to_json()
            except gamma.GammaError as error:
                found = (type(error), str(error))
            assert found == expected, other
    assert engine.resolve(who, "2026-03-01T09:05:00Z").at == _pure(log, who, ts(5)).at


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(_JSON)
def test_a_value_is_rendered_as_json_dumps_writes_it(value: Any) -> None:
    """A context line's value: ``json.dumps(value, ensure_ascii=False)`` with control, format
    and invisible characters escaped, whatever the value."""
    expected = render._escape_unsafe(json.dumps(value, ensure_ascii=False))
    assert render._value(value) == expected


def test_a_value_with_invisible_characters_is_escaped() -> None:
    """The characters the block escapes, in a string and nested (a string's fast encoding
    must still go through the escape)."""
    for value in ("a\u200bb", "\u2028", "\U000e0041", {"k\u202e": ["\x7f"]}):
        expected = render._escape_unsafe(json.dumps(value, ensure_ascii=False))
        assert render._value(value) == expected and "\\u" in expected


_OPS = st.lists(
    st.tuples(st.sampled_from("abcdefghij"), st.none() | st.integers(0, 9)), max_size=60
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_OPS, min_size=1, max_size=6), st.lists(st.sampled_from("abcdefghij"), max_size=8))
def test_a_table_holds_its_values_in_key_order(batches: list[Any], start: list[str]) -> None:
    """``Table``: after any sets (a value) and removes (None), read between batches, its
    values are those of a dict of the same changes, in key order (each change bisected
    once and applied from the greatest key down, or many merged by one sort)."""
    table: Table[str, int] = Table()
    model: dict[str, int] = {}
    for key in start:
        table.set(key, 0)
        model[key] = 0
    for batch in batches:
        for key, value in batch:
            if value is None:
                table.remove(key)
                model.pop(key, None)
            else:
                table.set(key, value)
                model[key] = value
        assert table.values() == tuple(model[k] for k in sorted(model))
        copy = table.copy()
        assert copy.values() == table.values()
