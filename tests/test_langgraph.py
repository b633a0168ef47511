"""``GovernedStore`` under a real LangGraph graph: each bound actor sees only what Γ admits."""

from __future__ import annotations

import importlib
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("langgraph")

import anyio  # noqa: E402  (installed with langgraph and mcp)
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp  # noqa: E402
from strategies import actors, logs, probe_times  # noqa: E402

import gamma  # noqa: E402
from gamma.conformance.cases import load_cases  # noqa: E402
from gamma.data import policy_by_name  # noqa: E402
from gamma.integrations import MissingExtraError, install_hint  # noqa: E402
from gamma.integrations.binding import WriteScopeError  # noqa: E402
from gamma.integrations.langgraph import GovernedStore, NamespaceError, namespace_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
AT = datetime(2026, 3, 2, 10, tzinfo=UTC)
ALICE = {"id": "alice", "tenant": "acme", "roles": ["sales"], "scope": "users/alice"}
HANA = {"id": "hana", "tenant": "acme", "roles": ["hr"], "clearance": "confidential",
        "scope": "users/hana"}
GINA = {"id": "gina", "tenant": "globex", "roles": ["sales"], "scope": "users/gina"}


def seed() -> list[dict[str, Any]]:
    def a(i: int, tenant: str, fact: str, key: str, value: Any, **more: Any) -> dict[str, Any]:
        return {"id": f"e{i}", "type": "assert", "ts": f"2026-03-01T09:0{i}:00Z", "actor": "crm",
                "tenant": tenant, "fact": fact, "key": key, "value": value, **more}

    return [
        a(1, "acme", "F1", "policy", json.dumps({"text": "be polite"}, separators=(",", ":")),
          scope="users"),
        a(2, "acme", "F2", "salary_band", "L7", scope="users",
          visibility={"roles": ["hr"], "clearance": "confidential"}),
        a(3, "acme", "F3", "food", "pizza", scope="users/alice"),
        a(4, "globex", "G1", "policy", "globex only", scope="users"),
        a(5, "acme", "F5", "holiday", "2026-12-24", scope="users", authority="executive"),
    ]


def engine_with_seed() -> gamma.Engine:
    engine = gamma.Engine()
    engine.append(seed())
    return engine


def store_for(engine: gamma.Engine, actor: dict[str, Any], **kw: Any) -> GovernedStore:
    return GovernedStore(engine, actor, clock=lambda: AT, **kw)


class State(TypedDict):
    question: str
    home: list[str]
    seen: list[tuple[tuple[str, ...], str, Any]]


def remember_and_recall(state: State, runtime: Runtime) -> dict[str, Any]:
    """A node that writes this turn's question under the user's namespace, then reads memory."""
    store = runtime.store
    assert store is not None
    store.put(tuple(state["home"]), "last_question", {"q": state["question"]})
    seen = [(tuple(i.namespace), i.key, i.value) for i in store.search(("users",), limit=50)]
    return {"seen": seen}


def graph(store: GovernedStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("memory", remember_and_recall)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", END)
    return builder.compile(store=store)


def admitted_items(engine: gamma.Engine, actor: dict[str, Any]) -> set[tuple[Any, ...]]:
    reference = gamma.resolve(engine.events, actor, AT)
    return {(namespace_of(a.scope), a.key, a.value) for a in reference.admitted}


def canon(seen: list[tuple[tuple[str, ...], str, Any]]) -> set[tuple[Any, ...]]:
    """Items back as (namespace, key, stored value): dicts in canonical JSON, others as written."""
    out = set()
    for namespace, key, value in seen:
        plain = value["value"] if set(value) == {"value"} else gamma.core.terms.canonical.canonical_json(value)
        out.add((namespace, key, plain))
    return out


class TestGraph:
    def test_two_roles_and_two_tenants_see_only_what_is_admitted(self) -> None:
        """alice (sales), hana (hr) and gina (another tenant) run the same graph over one engine."""
        engine = engine_with_seed()
        runs = {}
        for who, actor in (("alice", ALICE), ("hana", HANA), ("gina", GINA)):
            store = store_for(engine, actor)
            out = graph(store).invoke({"question": f"{who}?", "home": ["users", who], "seen": []})
            runs[who] = (store, out["seen"])
        alice_seen = {(ns, k) for ns, k, _ in runs["alice"][1]}
        hana_seen = {(ns, k) for ns, k, _ in runs["hana"][1]}
        gina_seen = {(ns, k) for ns, k, _ in runs["gina"][1]}
        assert alice_seen == {(("users",), "policy"), (("users",), "holiday"),
                              (("users", "alice"), "food"), (("users", "alice"), "last_question")}
        assert hana_seen == {(("users",), "policy"), (("users",), "salary_band"),
                             (("users",), "holiday"), (("users", "hana"), "last_question")}
        assert gina_seen == {(("users",), "policy"), (("users", "gina"), "last_question")}
        assert (("users",), "policy", {"value": "globex only"}) in runs["gina"][1]
        assert (("users",), "policy", {"text": "be polite"}) in runs["alice"][1]
        # what each saw is exactly the admitted set of the resolution its search read
        for store, seen in runs.values():
            assert store.last_resolution is not None
            read = {(namespace_of(a.scope), a.key, a.value) for a in store.last_resolution.admitted}
            assert canon(seen) == read
        # the reasons are there for the host's audit record, never another tenant's facts
        reasons = {x.fact: x.codes for x in runs["alice"][0].last_resolution.excluded}  # type: ignore[union-attr]
        assert reasons["F2"] == ("access_denied",)
        assert "G1" not in reasons
        assert all(not x.fact.startswith("G") for x in runs["hana"][0].last_resolution.admitted)  # type: ignore[union-attr]
        gina = runs["gina"][0].last_resolution
        assert gina is not None
        assert not {x.fact for x in gina.excluded + gina.admitted} & {"F1", "F2", "F3", "F5"}  # type: ignore[operator]

    def test_the_graph_async(self) -> None:
        """ainvoke goes through abatch with the same answers."""
        engine = engine_with_seed()
        store = store_for(engine, HANA)

        async def go() -> dict[str, Any]:
            result: dict[str, Any] = await graph(store).ainvoke(
                {"question": "q", "home": ["users", "hana"], "seen": []}
            )
            return result

        out = anyio.run(go)
        assert (("users",), "salary_band", {"value": "L7"}) in out["seen"]
        assert canon(out["seen"]) | {(("users", "hana"), "last_question", '{"q":"q"}')} == admitted_items(
            engine, HANA
        )


class TestStore:
    def test_get_absent_when_withheld_with_the_reason_kept(self) -> None:
        engine = engine_with_seed()
        alice = store_for(engine, ALICE)
        assert alice.get(("users",), "salary_band") is None
        assert alice.last_resolution is not None
        assert alice.last_resolution.excluded_fact("F2").codes == ("access_denied",)  # type: ignore[union-attr]
        hana = store_for(engine, HANA)
        item = hana.get(("users",), "salary_band")
        assert item is not None and item.value == {"value": "L7"}
        assert item.created_at == item.updated_at == datetime(2026, 3, 1, 9, 2, tzinfo=UTC)
        assert hana.get(("users", "alice"), "food") is None  # out of hana's scope
        assert store_for(engine, GINA).get(("users",), "policy").value == {"value": "globex only"}  # type: ignore[union-attr]

    def test_put_get_delete_round_trip_as_the_bound_actor(self) -> None:
        engine = engine_with_seed()
        alice = store_for(engine, ALICE)
        alice.put(("users", "alice"), "food", {"likes": ["pizza", "figs"], "n": 2, "ok": True})
        item = alice.get(("users", "alice"), "food")
        assert item is not None and item.value == {"likes": ["pizza", "figs"], "n": 2, "ok": True}
        codes = {x.fact: x.codes for x in alice.last_resolution.excluded}  # type: ignore[union-attr]
        assert codes["F3"] == ("superseded",)
        last = engine.events[-1]
        assert isinstance(last, gamma.Assert)
        assert (last.actor, last.tenant, last.scope, last.authority) == ("alice", "acme", "users/alice", None)
        alice.delete(("users", "alice"), "food")
        assert alice.get(("users", "alice"), "food") is None
        assert isinstance(engine.events[-1], gamma.Retract)
        before = len(engine)
        alice.delete(("users", "alice"), "nothing-here")
        alice.delete(("users",), "salary_band")  # hidden from alice: nothing to retract
        assert len(engine) == before

    def test_delete_under_insufficient_authority_is_ignored_with_its_reason(self) -> None:
        """Retracting the executive's holiday at the default authority: recorded, ignored, kept."""
        engine = engine_with_seed()
        alice = store_for(engine, ALICE)
        alice.delete(("users",), "holiday")
        assert alice.get(("users",), "holiday") is not None
        ignored = {(i.fact, i.code) for i in alice.last_resolution.ignored}  # type: ignore[union-attr]
        assert ("F5", "insufficient_authority") in ignored

    def test_a_batch_reads_before_it_writes_and_writes_all_or_nothing(self) -> None:
        engine = engine_with_seed()
        alice = store_for(engine, ALICE)
        results = alice.batch([
            PutOp(("users", "alice"), "mood", {"v": "calm"}),
            GetOp(("users", "alice"), "mood"),
            SearchOp(("users", "alice")),
        ])
        assert results[0] is None and results[1] is None
        assert [i.key for i in results[2]] == ["food"]
        assert alice.get(("users", "alice"), "mood").value == {"v": "calm"}  # type: ignore[union-attr]
        before = len(engine)
        with pytest.raises(gamma.ValueTypeError, match="floats"):
            alice.batch([PutOp(("users", "alice"), "a", {"v": "fine"}),
                         PutOp(("users", "alice"), "b", {"v": 0.5})])
        with pytest.raises(gamma.InputError, match="scope"):
            alice.put(("users", "no spaces"), "k", {"v": 1})
        with pytest.raises(InvalidNamespaceError):
            alice.put(("users.alice",), "k", {"v": 1})
        with pytest.raises(NotImplementedError):
            alice.put(("users",), "k", {"v": 1}, ttl=5)
        assert len(engine) == before

    def test_search_filters_pages_and_lists_namespaces(self) -> None:
        engine = engine_with_seed()
        hana = store_for(engine, HANA)
        for i in range(5):
            hana.put(("users", "hana"), f"note{i}", {"i": i, "tag": "even" if i % 2 == 0 else "odd"})
        keys = [i.key for i in hana.search(("users", "hana"), filter={"tag": "even"})]
        assert keys == ["note0", "note2", "note4"]
        assert [i.key for i in hana.search(("users", "hana"), filter={"i": {"$gte": 3}})] == ["note3", "note4"]
        assert [i.key for i in hana.search(("users", "hana"), limit=2, offset=1)] == ["note1", "note2"]
        assert [i.key for i in hana.search(("users",), limit=3)] == ["holiday", "policy", "salary_band"]
        assert hana.list_namespaces() == [("users",), ("users", "hana")]
        assert hana.list_namespaces(prefix=("users", "*")) == [("users", "hana")]
        assert hana.list_namespaces(max_depth=1) == [("users",)]
        assert store_for(engine, ALICE).list_namespaces() == [("users",), ("users", "alice")]

    def test_authority_is_bounded_by_the_policy(self, tmp_path: Path) -> None:
        """Under strict, intern holds subordinate: claiming manager is refused; subordinate is written."""
        strict = gamma.load_policy(ROOT / "policies" / "strict.toml")
        engine = gamma.Engine(strict)
        intern = {"id": "intern", "tenant": "acme", "scope": "users/intern"}
        with pytest.raises(gamma.ValueTypeError, match="'intern' holds at most 'subordinate'"):
            GovernedStore(engine, intern, authority="manager")
        store = GovernedStore(engine, intern, authority="subordinate", clock=lambda: AT)
        store.put(("users", "intern"), "k", {"v": 1})
        assert engine.events[-1].authority == "subordinate"  # type: ignore[union-attr]

    def test_over_a_store_other_writers_are_seen(self, tmp_path: Path) -> None:
        path = tmp_path / "memory.db"
        gamma.Store.init(path).close()
        with gamma.Engine.open(path) as engine, gamma.Engine.open(path) as other:
            engine.append(seed())
            alice = store_for(engine, ALICE)
            alice.put(("users", "alice"), "mood", {"v": "calm"})
            hana_elsewhere = store_for(other, HANA)  # another process's engine over the same file
            assert hana_elsewhere.get(("users",), "salary_band") is not None
            assert hana_elsewhere.get(("users", "alice"), "mood") is None  # out of her scope
            alice_elsewhere = store_for(other, ALICE)
            assert alice_elsewhere.get(("users", "alice"), "mood").value == {"v": "calm"}  # type: ignore[union-attr]


class TestWhereWritesLand:
    def test_a_put_into_another_users_namespace_is_refused(self) -> None:
        """alice (users/alice) writes her namespace, its parents and (); never bob's, nor below her
        own (she could not read it back); nothing of a refused batch is written."""
        engine = engine_with_seed()
        alice = store_for(engine, ALICE)
        for namespace in [("users", "alice"), ("users",)]:
            alice.put(namespace, "mood", {"v": namespace[-1]})
        alice.batch([PutOp((), "mood", {"v": "global"})])
        assert {(e.scope, e.actor) for e in engine.events[-3:]} == {  # type: ignore[union-attr]
            ("users/alice", "alice"), ("users", "alice"), (None, "alice")}
        before = len(engine)
        for namespace in [("users", "bob"), ("users", "alice", "drafts"), ("teams",)]:
            with pytest.raises(WriteScopeError, match="writes only where it reads"):
                alice.put(namespace, "mood", {"v": "planted"})
            with pytest.raises(WriteScopeError):
                alice.batch([PutOp(("users", "alice"), "ok", {"v": 1}), PutOp(namespace, "k", {"v": 1})])
        assert len(engine) == before
        bob = store_for(engine, {"id": "bob", "tenant": "acme", "scope": "users/bob"})
        assert bob.search(("users", "bob")) == []

    def test_a_slash_in_a_label_is_refused_by_every_op(self) -> None:
        """("users/alice",) would be the scope of ("users", "alice"): put, get, delete and search
        refuse it alike, as they refuse a label with a space, with LangGraph's error type."""
        engine = engine_with_seed()
        alice = store_for(engine, ALICE)
        before = len(engine)
        for namespace in [("users/alice",), ("users", "a/b"), ("users", "no spaces"), ("global",)]:
            for op in (lambda ns=namespace: alice.put(ns, "food", {"v": 1}),
                       lambda ns=namespace: alice.get(ns, "food"),
                       lambda ns=namespace: alice.delete(ns, "food"),
                       lambda ns=namespace: alice.search(ns)):
                with pytest.raises(InvalidNamespaceError) as raised:
                    op()
                assert isinstance(raised.value, NamespaceError) and isinstance(raised.value, gamma.InputError)
        with pytest.raises(InvalidNamespaceError, match="Namespace labels cannot contain periods"):
            alice.get(("users.alice",), "food")  # LangGraph's own rule, for get as for put
        assert len(engine) == before
        assert alice.get(("users", "alice"), "food") is not None

    @pytest.mark.parametrize("value", [["pizza"], "pizza", 3, ("a", "b")])
    def test_a_value_that_is_no_dict_says_what_is_accepted(self, value: Any) -> None:
        alice = store_for(engine_with_seed(), ALICE)
        with pytest.raises(gamma.ValueTypeError, match=r"must be a dict .* wrap a plain value as \{'value': \.\.\.\}"):
            alice.put(("users", "alice"), "food", value)

    def test_hidden_and_absent_items_answer_alike(self) -> None:
        """get and delete of a key held only by a fact hidden from alice behave as for a key
        nothing holds: None, and nothing retracted (tests/test_oracle.py does the rest)."""
        engine = engine_with_seed()
        alice = store_for(engine, ALICE)
        assert alice.get(("users",), "salary_band") is None and alice.get(("users",), "no_such") is None
        before = len(engine)
        alice.delete(("users",), "salary_band")
        alice.delete(("users",), "no_such")
        assert len(engine) == before


def test_the_module_without_its_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "gamma.integrations.langgraph")
    monkeypatch.setitem(sys.modules, "langgraph.store.base", None)
    with pytest.raises(MissingExtraError, match=re.escape(install_hint("langgraph"))):
        importlib.import_module("gamma.integrations.langgraph")


class TestGovernanceThroughSearch:
    def test_counterfactual_pairs_admit_what_resolve_admits(self) -> None:
        """Every case: search(()) returns exactly Γ's admitted facts, and the resolution is Γ's."""
        cases = load_cases([ROOT / "fixtures" / "counterfactual"])
        assert len(cases) >= 84  # the bundled pairs, the recompute ones (issue 29) among them
        assert any(case.get_policy().dependency_mode == "recompute" for case in cases)
        for case in cases:
            engine = gamma.Engine(case.get_policy())
            engine.append(list(case.events()))
            store = GovernedStore(engine, case.actor, clock=lambda c=case: c.at)  # type: ignore[misc]
            items = store.search((), limit=10_000)
            reference = case.resolve()
            expected = {(namespace_of(a.scope), a.key, a.value) for a in reference.admitted}
            got = {(tuple(i.namespace), i.key, i.value["value"]) for i in items}
            assert got == expected, case.id
            assert store.last_resolution is not None
            assert store.last_resolution.to_json() == reference.to_json(), case.id


def test_the_readme_example_runs() -> None:
    """README's "Use from an agent" LangGraph example, run as written."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use from an agent", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 1 and len(blocks[0].strip().splitlines()) <= 20
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)  # noqa: S102
    assert namespace["seen"] == [{"value": "concise"}]


@given(st.data())
def test_search_equals_resolve_on_random_logs(data: st.DataObject) -> None:
    """For any governed log, actor and time, search(()) is Γ's admitted set and get finds each item."""
    log = data.draw(logs(max_size=14))
    actor = data.draw(actors(log))
    at = data.draw(probe_times(log))
    engine = gamma.Engine(log.policy)
    engine.append(list(log.lines))
    store = GovernedStore(engine, actor, clock=lambda: at)
    reference = gamma.resolve(list(log.events), actor, at, log.policy)
    items = store.search((), limit=10_000)
    assert store.last_resolution is not None
    assert store.last_resolution.to_json() == reference.to_json()
    assert canon([(tuple(i.namespace), i.key, i.value) for i in items]) == {
        (namespace_of(a.scope), a.key, a.value) for a in reference.admitted
    }
    assert len(items) == len(reference.admitted)
    for a in reference.admitted[:3]:
        item = store.get(namespace_of(a.scope), a.key)
        assert item is not None and item.key == a.key
    assert store.list_namespaces() == sorted({namespace_of(a.scope) for a in reference.admitted} - {()})


class TestDerivedItems:
    """Issue 29: an item ``{"value": v, "derivation": text}`` is a derived fact over the keys
    it names; under the recompute policy a read gives the value recomputed from them."""

    def test_put_a_derived_item_and_read_the_recomputed_value(self) -> None:
        engine = gamma.Engine(policy_by_name("recompute"))
        store = store_for(engine, {"id": "sam", "tenant": "home", "scope": "plans"})
        store.put(("plans",), "weekly", {"value": 10})
        store.put(("plans",), "two_weeks", {"value": 20, "derivation": "{weekly} * 2"})
        store.put(("plans",), "weekly", {"value": 7})
        item = store.get(("plans",), "two_weeks")
        assert item is not None and item.value == {"value": 14}
        derived = engine.events[1]
        assert isinstance(derived, gamma.Assert)
        assert (derived.kind, derived.value, derived.derivation) == ("derived", 20, "{weekly} * 2")
        assert derived.depends_on == (engine.events[0].fact,)  # type: ignore[union-attr]
        assert store.get(("plans",), "weekly").value == {"value": 7}  # type: ignore[union-attr]

    @pytest.mark.parametrize("value", [{"value": 1, "derivation": "{missing} * 2"},
                                       {"value": 1, "derivation": "{weekly} *"},
                                       {"value": 1, "derivation": "1", "note": "x"}])
    def test_a_bad_derived_item_is_refused_naming_the_field(self, value: dict[str, Any]) -> None:
        engine = gamma.Engine(policy_by_name("recompute"))
        store = store_for(engine, {"id": "sam", "tenant": "home", "scope": "plans"})
        store.put(("plans",), "weekly", {"value": 10})
        with pytest.raises(gamma.InputError) as caught:
            store.put(("plans",), "two_weeks", value)
        assert caught.value.field == "derivation"
        assert len(engine) == 1


def test_list_namespaces_refuses_a_slash_as_every_op_does() -> None:
    """A ``/`` in a listing's prefix or suffix is refused as in a get's namespace, never an
    empty listing; the wildcard ``*`` stays a pattern."""
    store = store_for(engine_with_seed(), ALICE)
    assert store.list_namespaces(prefix=("users", "*")) == [("users", "alice")]
    for condition in ({"prefix": ("a/b",)}, {"suffix": ("users", "a/b")}, {"prefix": ("x y",)}):
        with pytest.raises(NamespaceError, match="no '/'"):
            store.list_namespaces(**condition)  # type: ignore[arg-type]


def test_wrong_types_at_the_constructor_name_the_parameter() -> None:
    """``GovernedStore(engine, "alice")`` is a TypeError naming ``actor``, not an AttributeError."""
    engine = engine_with_seed()
    with pytest.raises(TypeError, match="actor"):
        GovernedStore(engine, "alice")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="engine"):
        GovernedStore("engine.db", ALICE)  # type: ignore[arg-type]
