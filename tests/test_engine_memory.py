"""What the engine keeps per event (issue 28: its memory within 1.3x the pure path's), and
that keeping less changes no byte: a tenant no one asks about is folded when first asked,
the events keep no canonical text, the chain heads and leaves are packed."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from strategies import actors, logs, merge, other_tenant_streams, probe_times

import gamma
from gamma.core.incremental.engine import EngineState
from gamma.core.integrity.chain import head_of
from gamma.core.integrity.merkle import tree_head_of
from gamma.core.reading.events import canonical_event


def _pure(lines: list[dict[str, Any]], policy: gamma.Policy, actor: Any, at: Any) -> gamma.Resolution:
    events = gamma.parse_events([json.dumps(line) for line in lines], policy=policy)
    return gamma.resolve(events, actor, at, policy)


@given(st.data())
def test_a_tenant_not_asked_is_folded_when_first_asked_and_answers_as_pure(
    data: st.DataObject,
) -> None:
    """Batches of two logs merged; only acme is asked in between: the other tenants keep their
    events unfolded, then each asked at last (at several times, with checks) answers as Γ."""
    log = data.draw(logs(tenants=("acme",), min_size=1, max_size=10))
    mixed = merge(log, data.draw(other_tenant_streams(log.policy)))
    engine = EngineState(log.policy)
    lines = list(mixed.lines)
    done = 0
    while done < len(lines):
        size = data.draw(st.integers(1, len(lines) - done))
        engine.append(lines[done : done + size])
        done += size
        actor = data.draw(actors(log, tenant="acme"))
        at = data.draw(probe_times(mixed))
        assert engine.resolve(actor, at).to_json() == _pure(lines[:done], log.policy, actor, at).to_json()
    for tenant, kept in engine._tenants.items():
        if tenant != "acme" and not any(line["type"] == "erase" for line in lines if line["tenant"] == tenant):
            assert kept.folded == 0, tenant  # nothing asked of it: its events only
    for tenant in sorted(set(mixed.tenants()) - {"acme"}):
        for _ in range(data.draw(st.integers(1, 3))):
            actor = data.draw(actors(mixed, tenant=tenant))
            at = data.draw(probe_times(mixed))
            expected = _pure(lines, log.policy, actor, at)
            got = engine.resolve(actor, at)
            assert got.to_json() == expected.to_json()
            assert got.render("context") == expected.render("context")
            decided = [a.fact for a in expected.admitted] + [x.fact for x in expected.excluded]
            if decided:
                asked = decided[: data.draw(st.integers(1, 3))]
                found = engine.check(actor, at, asked)
                assert [d.fact for d in found.values()] == asked


@given(logs(min_size=1, max_size=12))
def test_events_keep_no_text_and_the_packed_heads_are_every_prefixs(log: Any) -> None:
    """After an append the engine's events hold no canonical text, yet give the same bytes;
    the head and tree head after every prefix are those of the prefix's own chain."""
    engine = EngineState(log.policy)
    engine.append([json.dumps(line) for line in log.lines])
    parsed = list(gamma.parse_events([json.dumps(line) for line in log.lines], policy=log.policy))
    assert all(event._canonical is None for event in engine.events)
    texts = [canonical_event(event) for event in parsed]
    assert [canonical_event(event) for event in engine.events] == texts
    for size in range(len(texts) + 1):
        head, tree = head_of(texts[:size]), tree_head_of(texts[:size])
        assert engine._head(size) == head
        if size == len(texts) or parsed[size].ts > parsed[size - 1].ts:  # a cut by ts
            at = parsed[size - 1].ts if size else parsed[0].ts.replace(year=1)
            assert engine.head_at(at) == head
            assert engine.tree_at(at) == tree
