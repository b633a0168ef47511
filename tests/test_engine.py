"""gamma.Engine: an open, growing log whose answers are those of the pure Γ, byte for byte."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gamma
from gamma.core.engine import EngineState
from tests.strategies import (
    actors,
    logs,
    merge,
    other_tenant_streams,
    probe_times,
)


def _pure(lines: list[dict[str, Any]], policy: gamma.Policy, actor: Any, at: Any) -> gamma.Resolution:
    events = gamma.parse_events([json.dumps(line) for line in lines], policy=policy)
    return gamma.resolve(events, actor, at, policy)


@given(st.data())
def test_engine_equals_pure_resolve_over_random_batches(data: st.DataObject) -> None:
    """Cut a log into random batches; after each, resolve/check agree with Γ over all events so far."""
    log = data.draw(logs(max_size=14))
    engine = EngineState(log.policy)
    lines = list(log.lines)
    done = 0
    while done < len(lines):
        size = data.draw(st.integers(1, len(lines) - done))
        batch = lines[done : done + size]
        form = data.draw(st.sampled_from(("dict", "json", "event")))
        if form == "json":
            engine.append([json.dumps(line) for line in batch])
        elif form == "dict":
            engine.append(batch)
        else:
            engine.append(list(log.events[done : done + size]))
        done += size
        so_far = log.lines[:done]
        for _ in range(data.draw(st.integers(0, 3))):
            actor = data.draw(actors(log))
            at = data.draw(probe_times(log))
            expected = _pure(list(so_far), log.policy, actor, at)
            got = engine.resolve(actor, at)
            assert got.to_json() == expected.to_json()
            assert got.digest == expected.digest
            assert got.render("context") == expected.render("context")
            decided = {a.fact: a for a in expected.admitted} | {x.fact: x for x in expected.excluded}
            if decided:
                asked = data.draw(st.lists(st.sampled_from(sorted(decided)), min_size=1, max_size=4))
                assert engine.check(actor, at, asked) == {f: decided[f] for f in asked}
            keys = sorted({a.key for a in expected.admitted} | {x.key for x in expected.excluded if x.key})
            if keys:
                wanted = set(data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=2)))
                part = engine.resolve(actor, at, keys=wanted)
                assert part.admitted == tuple(a for a in expected.admitted if a.key in wanted)
                assert part.excluded == tuple(x for x in expected.excluded if x.key in wanted)
                assert part.known_unknowns == tuple(k for k in expected.known_unknowns if k in wanted)


@given(st.data())
def test_a_bad_batch_changes_nothing(data: st.DataObject) -> None:
    """A batch with one bad event is refused whole, naming its line; the engine answers as before."""
    log = data.draw(logs(min_size=2, max_size=10))
    cut = data.draw(st.integers(1, len(log.lines) - 1))
    engine = EngineState(log.policy)
    engine.append(list(log.lines[:cut]))
    rest = list(log.lines[cut:])
    bad_at = data.draw(st.integers(0, len(rest) - 1))
    bad = dict(rest[bad_at])
    bad["id"] = log.lines[0]["id"]  # a duplicate id
    rest[bad_at] = bad
    actor = data.draw(actors(log))
    at = log.last_ts() + timedelta(days=1)
    before = engine.resolve(actor, at).to_json()
    head = engine.head
    with pytest.raises(gamma.InputError) as caught:
        engine.append(rest)
    assert caught.value.line == bad_at + 1
    assert engine.head == head and len(engine) == cut
    assert engine.resolve(actor, at).to_json() == before
    engine.append(list(log.lines[cut:]))  # the good batch still goes in
    assert engine.resolve(actor, at).to_json() == _pure(list(log.lines), log.policy, actor, at).to_json()


@given(st.data())
def test_other_tenants_never_change_an_answer(data: st.DataObject) -> None:
    """Merging any other tenants' events into a log moves only the head of an acme actor's record."""
    log = data.draw(logs(tenants=("acme",), max_size=10))
    others = data.draw(other_tenant_streams(log.policy))
    mixed = merge(log, others)
    actor = data.draw(actors(log, tenant="acme"))
    at = data.draw(probe_times(mixed))
    alone, together = EngineState(log.policy), EngineState(log.policy)
    alone.append(list(log.lines))
    together.append(list(mixed.lines))
    a, b = alone.resolve(actor, at).to_dict(), together.resolve(actor, at).to_dict()
    for name in ("admitted", "excluded", "experiences", "ignored"):
        assert a[name] == b[name]
    assert b["log"] == together.head_at(at)
