"""The first call for an actor class the engine has not seen (issue 28), against the pure path.

A new class (other roles, clearance, scope or a named id, of a tenant the engine keeps)
starts from another class's kept results (``Derived.fork``): only the keys and facts its
scope, visibility rules and grants may answer otherwise are computed again. A stateful
machine brings new classes after appends (asserts, retracts, promotes, grants, revocations,
experiences, erasures), moves of ``at`` and earlier first calls; every first call, and the
next, is the pure path's bytes. Checked to fail with each shared input of the fork dropped
(the scope answer, the visibility rule, the grants to one class only, a fact's codes
computed with its key).
"""

from __future__ import annotations

import json
from typing import Any

from helpers import A, G, R, stamp
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule
from strategies import Log, actors, extensions, logs, probe_times

import gamma
from gamma.core.incremental import derived as derived_module
from gamma.core.incremental.derived import Derived, Table
from gamma.core.incremental.engine import EngineState
from gamma.core.resolving.context import ContextLines


def _pure(log: Log, actor: Any, at: Any) -> gamma.Resolution:
    events = gamma.parse_events([json.dumps(line) for line in log.lines], policy=log.policy)
    return gamma.resolve(events, actor, at, log.policy)


def _same(got: gamma.Resolution, expected: gamma.Resolution) -> None:
    assert got.to_json() == expected.to_json()
    try:
        block = got.render("context")
    except gamma.GammaError as error:
        block = type(error).__name__
    try:
        pure = expected.render("context")
    except gamma.GammaError as error:
        pure = type(error).__name__
    assert block == pure


class FirstCallMachine(RuleBasedStateMachine):
    """One engine; classes asked once come back, new ones arrive after every kind of turn."""

    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        # every new class of a kept tenant forks, however much it differs (small logs differ
        # in most of their facts, which would otherwise be computed afresh)
        self.most, derived_module.FORK_MOST = derived_module.FORK_MOST, float("inf")
        self.log: Log = data.draw(logs(min_size=4, max_size=14), label="log")
        self.at = data.draw(probe_times(self.log), label="at")
        self.engine = EngineState(self.log.policy)
        self.engine.append(list(self.log.lines))
        self.asked: list[dict[str, Any]] = []
        self.new_class(data)
        self.sibling(data)

    def teardown(self) -> None:
        if hasattr(self, "most"):
            derived_module.FORK_MOST = self.most

    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        more = data.draw(extensions(self.log, min_size=1, max_size=4), label="turn")
        self.engine.append(list(more.lines))
        self.log = self.log + more

    @rule(data=st.data())
    def move(self, data: st.DataObject) -> None:
        self.at = data.draw(probe_times(self.log), label="at")

    @rule(data=st.data())
    def new_class(self, data: st.DataObject) -> None:
        """A class not asked before, most often of a tenant some asked class has (a fork)."""
        tenant = None
        if self.asked and data.draw(st.integers(0, 3), label="other tenant") != 0:
            tenant = data.draw(st.sampled_from(self.asked), label="beside")["tenant"]
        actor = data.draw(actors(self.log, tenant=tenant), label="actor")
        _same(self.engine.resolve(actor, self.at), _pure(self.log, actor, self.at))
        self.asked.append(actor)

    @rule(data=st.data())
    def sibling(self, data: st.DataObject) -> None:
        """A class one change away from an asked one: its roles, clearance, scope or id."""
        if not self.asked:
            return
        actor = dict(data.draw(st.sampled_from(self.asked), label="from"))
        other = data.draw(actors(self.log, tenant=actor["tenant"]), label="other")
        field = data.draw(st.sampled_from(("roles", "clearance", "scope", "id")), label="field")
        if field in other:
            actor[field] = other[field]
        else:
            actor.pop(field, None)
        _same(self.engine.resolve(actor, self.at), _pure(self.log, actor, self.at))
        self.asked.append(actor)

    @rule(data=st.data())
    def again(self, data: st.DataObject) -> None:
        """A class asked before (a donor, or a fork since) asks again."""
        if self.asked:
            actor = data.draw(st.sampled_from(self.asked), label="again")
            _same(self.engine.resolve(actor, self.at), _pure(self.log, actor, self.at))


FirstCallMachine.TestCase.settings = settings(
    max_examples=min(settings().max_examples, 60),
    stateful_step_count=min(12, settings().stateful_step_count),
    deadline=None,
)
TestFirstCallMachine = FirstCallMachine.TestCase


AT = "2030-01-01T00:00:00Z"


def _log() -> list[dict[str, Any]]:
    """One tenant: rules by role, actor and clearance, scoped rivals, a dependency chain from
    a restricted fact, grants by fact and by key to a role and to an actor, a supersession."""
    return stamp([
        A("F1", "plan", "a", scope="p"),
        A("F2", "plan", "b", scope="p/q", authority="manager"),
        A("F3", "budget", 10, visibility={"roles": ["fin"]}),
        A("F4", "budget_note", "n", depends_on=["F3"]),
        A("F5", "budget_sum", 11, depends_on=["F4"]),
        A("F6", "memo", "m", visibility={"actors": ["bob"]}),
        A("F7", "secret", "s", visibility={"clearance": "secret"}),
        A("F8", "hr", "h", visibility={"roles": ["hr"]}),
        G(role="ops", fact="F8"),
        G(to_actor="ann", key="budget"),
        A("F9", "plan", "c", scope="p/q", supersedes=["F2"]),
        R("F1"),
    ])  # fmt: skip


ACTORS = (
    {"id": "ann", "tenant": "acme", "roles": ["fin"], "scope": "p/q"},
    {"id": "ann", "tenant": "acme", "roles": ["ops"], "scope": "p/q"},
    {"id": "bob", "tenant": "acme", "roles": [], "scope": "p/q"},
    {"id": "cy", "tenant": "acme", "roles": ["hr"], "scope": "p", "clearance": "secret"},
    {"id": "cy", "tenant": "acme", "roles": ["fin", "hr"], "scope": "global"},
    {"id": "ann", "tenant": "acme", "roles": ["fin"], "scope": "p/q"},
)


def test_each_new_class_is_forked_and_the_pure_bytes(monkeypatch: Any) -> None:
    """Every class after the first starts from another's results and gives the pure path's
    bytes, first call and second."""
    monkeypatch.setattr(derived_module, "FORK_MOST", float("inf"))
    events = _log()
    pure_events = gamma.parse_events([json.dumps(e) for e in events])
    engine = EngineState()
    engine.append(events)
    forks: list[Derived] = []
    real = Derived.fork

    def counting(self: Derived, fold: Any, actor: Any) -> Derived | None:
        made = real(self, fold, actor)
        assert made is not None
        forks.append(made)
        return made

    monkeypatch.setattr(Derived, "fork", counting)
    for actor in ACTORS:
        first = engine.resolve(actor, AT)
        expected = gamma.resolve(pure_events, actor, AT)
        _same(first, expected)
        _same(engine.resolve(actor, AT), expected)
    assert len(forks) == 4  # the first class computes afresh; the last is the first's class


def test_a_fork_recomputes_only_what_the_class_reads(monkeypatch: Any) -> None:
    """A new class differing only in a role computes again the facts of rules naming that role
    (and their dependents), not every key."""
    events = stamp([
        *(A(f"K{i}", f"k{i:02}", i) for i in range(40)),
        A("H1", "h", 1, visibility={"roles": ["hr"]}),
        A("H2", "h2", 2, depends_on=["H1"]),
    ])  # fmt: skip
    engine = EngineState()
    engine.append(events)
    engine.resolve({"id": "ann", "tenant": "acme", "roles": ["hr"]}, AT)
    seen: list[str] = []
    real = derived_module.own_codes

    def counting(facts: Any, *args: Any) -> Any:
        seen.extend(f.id for f in facts)
        return real(facts, *args)

    monkeypatch.setattr(derived_module, "own_codes", counting)
    got = engine.resolve({"id": "ann", "tenant": "acme", "roles": ["ops"]}, AT)
    assert seen == []  # no key computed again: H1's access alone
    assert [x.fact for x in got.excluded] == ["H1", "H2"]
    assert [x.codes for x in got.excluded] == [("access_denied",), ("dependency_restricted",)]
    pure = gamma.resolve(gamma.parse_events([json.dumps(e) for e in events]),
                         {"id": "ann", "tenant": "acme", "roles": ["ops"]}, AT)
    _same(got, pure)


def test_a_fork_shares_nothing_mutable_with_its_donor(monkeypatch: Any) -> None:
    """After a fork, every container of the new results is its own (or shared and copied on
    change: ``uses_of`` and ``walks_to``, which neither side then owns)."""
    monkeypatch.setattr(derived_module, "FORK_MOST", float("inf"))  # forks, however small
    engine = EngineState()
    engine.append(_log())
    engine.resolve(ACTORS[0], AT)
    (donor,) = engine._classes.values()
    engine.resolve(ACTORS[1], AT)
    fork = next(d for d in engine._classes.values() if d is not donor)
    shared_on_change = {"uses_of", "walks_to"}
    for name, value in vars(fork).items():
        theirs = getattr(donor, name)
        if name in {"policy", "index", "actor"} or isinstance(value, frozenset | tuple):
            continue
        if isinstance(value, dict | set | list | Table | ContextLines):
            if name in shared_on_change:
                assert not donor.owned_uses and not donor.owned_walks
                assert not fork.owned_uses and not fork.owned_walks
            else:
                assert value is not theirs, name


def test_a_long_key_computed_again_takes_its_refreshed_facts_afresh(monkeypatch: Any) -> None:
    """A fact of a long key whose own codes the donor keeps as known (no candidate) but whose
    rule the new class answers otherwise is computed with its key, not skipped as known, when
    an append since the donor's last call has its key computed again."""
    monkeypatch.setattr(derived_module, "FORK_MOST", float("inf"))  # forks, however small
    events = stamp([
        A("L0", "long", 0, visibility={"roles": ["fin"]}),
        *(A(f"L{i}", "long", i, scope="p") for i in range(1, 11)),
        R("L0"),
        A("L11", "long", 11, scope="p"),
    ])  # fmt: skip
    engine = EngineState()
    engine.append(events[:-1])
    donor = {"id": "ann", "tenant": "acme", "roles": ["fin"], "scope": "p"}
    engine.resolve(donor, AT)
    engine.append(events[-1:])
    new = {"id": "ann", "tenant": "acme", "roles": [], "scope": "p"}
    got = engine.resolve(new, AT)
    _same(got, gamma.resolve(gamma.parse_events([json.dumps(e) for e in events]), new, AT))
    assert dict((x.fact, x.codes) for x in got.excluded)["L0"] == ("access_denied", "retracted")


def test_a_shared_grant_reads_each_class_s_clearance(monkeypatch: Any) -> None:
    """Both classes fail a fact's role list and share a key grant (to the same actor id): the
    one cleared sees it, the other is denied naming the grant, though neither is listed."""
    monkeypatch.setattr(derived_module, "FORK_MOST", float("inf"))  # forks, however small
    events = stamp([
        A("F1", "k", 1, visibility={"roles": ["legal"], "clearance": "internal"}),
        G(to_actor="ann", key="k", authority="policy"),
    ])  # fmt: skip
    pure_events = gamma.parse_events([json.dumps(e) for e in events])
    engine = EngineState()
    engine.append(events)
    seen = []
    for actor in (
        {"id": "ann", "tenant": "acme", "roles": ["sales"], "clearance": "internal"},
        {"id": "ann", "tenant": "acme", "roles": ["fin"], "clearance": "public"},
        {"id": "ann", "tenant": "acme", "roles": ["legal"], "clearance": "public"},
    ):
        got = engine.resolve(actor, AT)
        _same(got, gamma.resolve(pure_events, actor, AT))
        seen.append([x.fact for x in got.admitted])
    assert seen == [["F1"], [], []]


def test_a_class_differing_in_most_facts_is_computed_afresh(monkeypatch: Any) -> None:
    """A scope apart, every fact's ``out_of_scope`` moves: the new class is computed afresh
    (no fork), and is the pure bytes."""
    events = stamp([A(f"F{i}", f"k{i}", i, scope="p") for i in range(10)])
    engine = EngineState()
    engine.append(events)
    engine.resolve({"id": "ann", "tenant": "acme", "scope": "p"}, AT)
    made: list[Derived | None] = []
    real = Derived.fork

    def counting(self: Derived, fold: Any, actor: Any) -> Derived | None:
        made.append(real(self, fold, actor))
        return made[-1]

    monkeypatch.setattr(Derived, "fork", counting)
    other = {"id": "ann", "tenant": "acme", "scope": "q"}
    got = engine.resolve(other, AT)
    assert made == [None]
    _same(got, gamma.resolve(gamma.parse_events([json.dumps(e) for e in events]), other, AT))
