"""The one rule for a fact a caller cannot see (``visible_decision``), as every surface answers
it, and ``Binding.write`` of events that name no fact."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from helpers import A, G, R, V, X, actor, stamp, ts

from gamma import Engine
from gamma.core.terms.canonical import parse_at
from gamma.core.terms.decisions import Admitted, Excluded
from gamma.core.terms.errors import InputError, UnknownReferenceError
from gamma.integrations.binding import Binding, visible_decision
from gamma.serve import authzen, endpoints
from gamma.serve.types import Caller

ALICE = actor("alice", roles=["r1"])
AT = parse_at(ts(20))
STORY = [
    A("f1", "k1", "v1"),  # admitted
    A("f2", "k2", "the-hidden-value", visibility={"roles": ["r9"]}),  # hidden from alice
    A("f3", "k3", "v3"),
    R("f3"),  # excluded, for a reason alice may see
    {**A("g1", "k1", "theirs"), "tenant": "globex"},  # another tenant's
]
LATER = {**A("f9", "k9", "later"), "id": "e9", "ts": ts(30), "actor": "writer", "tenant": "acme"}


@pytest.fixture
def engine() -> Engine:
    engine = Engine()
    engine.append([json.dumps(e) for e in [*stamp(STORY), LATER]])
    return engine


def test_visible_decision_is_none_for_hidden_foreign_unasserted_and_unknown(engine: Engine) -> None:
    assert isinstance(visible_decision(engine, ALICE, AT, "f1"), Admitted)
    excluded = visible_decision(engine, ALICE, AT, "f3")
    assert isinstance(excluded, Excluded) and excluded.codes == ("retracted",)
    for fact in ("f2", "g1", "f9", "no-such-fact"):  # hidden, another tenant's, later, none
        assert visible_decision(engine, ALICE, AT, fact) is None, fact
    assert visible_decision(engine, ALICE, parse_at(ts(31)), "f9") is not None
    # an auditor reads what is hidden from the actor, and still nothing of another tenant
    assert isinstance(visible_decision(engine, ALICE, AT, "f2", auditor=True), Excluded)
    assert visible_decision(engine, ALICE, AT, "g1", auditor=True) is None


def _answers(engine: Engine, fact: str) -> tuple[Any, ...]:
    """What each surface answers alice for ``fact``: AuthZEN, explain, a Binding reference."""
    caller = Caller(name="alice-agent", actor=ALICE)
    evaluation = authzen.evaluation(engine, caller, AT, {
        "subject": {"type": "agent", "id": "alice"}, "action": {"name": "rely"},
        "resource": {"type": "fact", "id": fact}})  # fmt: skip
    with pytest.raises(UnknownReferenceError) as explained:
        endpoints.explain_request(engine, caller, AT, {"fact": fact})
    binding = Binding(engine, ALICE, clock=lambda: AT)
    with pytest.raises(UnknownReferenceError) as referred:
        binding.forget(fact)
    return evaluation, str(explained.value), str(referred.value)


def test_every_surface_answers_hidden_foreign_and_unknown_alike(engine: Engine) -> None:
    answers = {fact: _answers(engine, fact) for fact in ("f2", "g1", "f9", "no-such-fact")}
    assert len(set(map(json.dumps, answers.values()))) == 1, answers
    assert "f2" not in json.dumps(answers["f2"])  # no id echoed


@pytest.mark.parametrize("body", [
    G(key="k1", role="r9"),  # a key-wide grant
    V(key="k1", role="r9"),  # a key-wide revoke
    {k: v for k, v in X("x1", uses=["f1"]).items()},  # an experience
])  # fmt: skip
def test_write_of_events_naming_no_fact(engine: Engine, body: dict[str, Any]) -> None:
    """The write lands once and says so: no fact named, its event id, the append's result
    (it raised KeyError after the append had landed)."""
    binding = Binding(engine, ALICE, clock=lambda: AT)
    before = len(engine)
    written = binding.write([body, A("f7", "k7", "v7")])
    assert len(engine) == before + 2 and written.result.appended == 2
    assert written.facts == ("f7",)
    assert written.events == tuple(e.id for e in engine.events[before:])


def test_a_refused_write_lands_nothing(engine: Engine) -> None:
    binding = Binding(engine, ALICE, clock=lambda: datetime.fromisoformat("2000-01-01T00:00:00+00:00"))
    with pytest.raises(InputError):
        binding.write([{"type": "grant", "key": "k1"}])  # neither role nor actor
    assert len(engine) == len(STORY) + 1
