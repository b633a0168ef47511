"""AuthZEN 1.0 over Γ (``gamma.serve.authzen``), handler by handler over a small log, no HTTP.

The certification scenario's requests (adapted, tests/data/authzen/) must get responses
of the spec's shapes; batches keep order, defaults and their semantics; searches page
deterministically; only an auditor names another subject; and nothing a caller asks
tells a fact or key hidden from it (another tenant's, out of its scope, withheld)
from one that does not exist: two logs differing only in such facts' values, or in
whether they exist at all, answer every request shape with the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import gamma
from gamma.core.incremental.engine import EngineState
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Actor
from gamma.core.terms.policy import DEFAULT_POLICY
from gamma.serve import authzen
from gamma.serve.errors import Forbidden
from gamma.serve.types import Caller, View

DATA = Path(__file__).parent / "data" / "authzen"
SHAPES = json.loads((DATA / "shapes.json").read_text(encoding="utf-8"))
CASES = json.loads((DATA / "cases.json").read_text(encoding="utf-8"))["cases"]

AT = datetime(2026, 3, 2, 10, tzinfo=UTC)
T0 = "2026-03-01T08:00:00Z"
ALICE = Caller("alice-agent", Actor(id="alice", tenant="acme", roles=("sales",), clearance="internal",
                                    scope="helios/launch"))
BOB = Caller("bob-agent", Actor(id="bob", tenant="acme", roles=("hr",)))
AUDITOR = Caller("audit-console", Actor(id="auditor", tenant="ops"), auditor=True)
CALLERS = (ALICE, AUDITOR, BOB)
BY_NAME = {"alice": ALICE, "auditor": AUDITOR}
#: alice's actor on an auditor's credential: asking as itself, it may choose the time
ALICE_AUDITING = attrs.evolve(ALICE, auditor=True)
RELY = {"name": "rely"}
SUBJECT = {"type": "user", "id": "alice"}


def _assert(i: int, fact: str, key: str, value: object, **more: object) -> dict[str, Any]:
    return {"id": f"e{i}", "type": "assert", "ts": T0, "actor": "crm", "tenant": "acme",
            "fact": fact, "key": key, "value": value, **more}


BASE = [
    _assert(1, "F1", "region", "EMEA", authority="executive"),
    _assert(2, "F2", "launch", "2026-04-20"),
    _assert(3, "F3", "launch", "2026-05-04", supersedes=["F2"]),
    _assert(4, "F4", "promo", "spring", valid_until="2026-03-01T09:00:00Z"),
    _assert(5, "H1", "salary", 100, visibility={"roles": ["hr"]}),
    _assert(6, "G1", "region", "APAC", tenant="globex"),
]


def state(events: list[dict[str, Any]], policy: gamma.Policy | None = None) -> EngineState:
    engine = EngineState(policy)
    engine.append(events)
    return engine


def handler(endpoint: str) -> Any:
    if endpoint == "search/subject":
        return lambda view, caller, at, body: authzen.search_subject(view, caller, at, body, callers=CALLERS)
    return {"evaluation": authzen.evaluation, "evaluations": authzen.evaluations,
            "search/resource": authzen.search_resource, "search/action": authzen.search_action}[endpoint]


def ask(view: View, endpoint: str, body: Any, caller: Caller = ALICE) -> dict[str, Any]:
    result: dict[str, Any] = handler(endpoint)(view, caller, AT, body)
    return result


def shape(name: str) -> Draft202012Validator:
    return Draft202012Validator({**SHAPES, "$ref": f"#/{name}"})


def wire(response: dict[str, Any]) -> bytes:
    """The bytes a response would be sent as (sorted keys: no dict order leaks either)."""
    return json.dumps(response, sort_keys=True, separators=(",", ":")).encode()


class TestInteropScenario:
    """The AuthZEN certification scenario's requests, adapted (tests/data/authzen/README.md)."""

    @pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
    def test_case(self, case: dict[str, Any]) -> None:
        """Each request gets its status, a response of its shape and what the case pins."""
        view, expect = state(BASE), case["expect"]
        caller = BY_NAME[case["caller"]]
        if caller == ALICE and "time" in json.dumps(case["request"]):
            caller = ALICE_AUDITING  # only an auditor chooses the time (tested below)
        if expect["status"] == 400:
            with pytest.raises(InputError) as raised:
                ask(view, case["endpoint"], case["request"], caller)
            assert raised.value.field == expect["field"]
            return
        if expect["status"] == 403:
            with pytest.raises(Forbidden):
                ask(view, case["endpoint"], case["request"], caller)
            return
        response = ask(view, case["endpoint"], case["request"], caller)
        errors = [e.message for e in shape(expect["shape"]).iter_errors(response)]
        assert not errors, (errors, response)
        if "equals" in expect:
            assert response == expect["equals"]
        if "decisions" in expect:
            items = response["evaluations"] if "evaluations" in response else [response]
            assert [item["decision"] for item in items] == expect["decisions"]
        if "results" in expect:
            assert response["results"] == expect["results"]
        # idempotent (C.2.6): the same request, the same bytes
        assert wire(ask(view, case["endpoint"], case["request"], caller)) == wire(response)

    def test_every_endpoint_and_section_is_covered(self) -> None:
        """The cases reach every handler and every level of the scenario."""
        assert {c["endpoint"] for c in CASES} == set(authzen.ENDPOINTS)
        sections = {c["id"].split("-")[1] for c in CASES if c["id"].startswith("c-")}
        assert sections == {"2", "3", "4"}

    def test_discovery(self) -> None:
        """C.6: the metadata names the PDP as given and every endpoint under it."""
        metadata = authzen.discovery("https://pdp.example.com/")
        assert not list(shape("metadata").iter_errors(metadata))
        assert metadata["policy_decision_point"] == "https://pdp.example.com"
        assert metadata["search_action_endpoint"] == "https://pdp.example.com/access/v1/search/action"


class TestDecisions:
    """What a decision says, and what it never says."""

    def test_validity_reasons_of_visible_facts_are_given(self) -> None:
        """Superseded and expired facts are denied with their codes; a key without an admitted
        fact gives its visible facts' codes."""
        view = state(BASE)
        fact = {"subject": SUBJECT, "action": RELY}
        assert ask(view, "evaluation", {**fact, "resource": {"type": "fact", "id": "F4"}}) == {
            "decision": False, "context": {"reasons": ["expired"]}}
        assert ask(view, "evaluation", {**fact, "resource": {"type": "key", "id": "promo"}}) == {
            "decision": False, "context": {"reasons": ["expired"]}}
        assert ask(view, "evaluation", {**fact, "resource": {"type": "key", "id": "launch"}}) == {
            "decision": True, "context": {"facts": ["F3"]}}

    def test_hidden_foreign_and_absent_read_alike(self) -> None:
        """A withheld fact, another tenant's and none at all: one response, byte for byte."""
        view = state(BASE)
        answers = {wire(ask(view, "evaluation", {"subject": SUBJECT, "action": RELY,
                                                 "resource": {"type": "fact", "id": fact}}))
                   for fact in ("H1", "G1", "nope")}
        assert len(answers) == 1
        assert json.loads(answers.pop())["context"]["reasons"] == ["unknown_fact"]
        keys = {wire(ask(view, "evaluation", {"subject": SUBJECT, "action": RELY,
                                              "resource": {"type": "key", "id": key}}))
                for key in ("salary", "nokey")}
        assert len(keys) == 1

    def test_restricted_keys_are_disclosed_when_the_policy_says_so(self) -> None:
        """With disclosure.restricted_keys, a key held only by hidden facts is ``restricted``."""
        policy = attrs.evolve(DEFAULT_POLICY, restricted_keys=True)
        view = state(BASE, policy)
        body = {"subject": SUBJECT, "action": RELY, "resource": {"type": "key", "id": "salary"}}
        assert ask(view, "evaluation", body)["context"]["reasons"] == ["restricted"]
        assert ask(state(BASE), "evaluation", body)["context"]["reasons"] == ["unknown_key"]

    def test_context_time_decides(self) -> None:
        """context.time is the time decided at; a malformed one names its field."""
        view = state(BASE)
        body = {"subject": SUBJECT, "action": RELY, "resource": {"type": "fact", "id": "F4"}}
        early = {**body, "context": {"time": "2026-03-01T08:30Z"}}
        assert ask(view, "evaluation", early, ALICE_AUDITING) == {"decision": True}
        with pytest.raises(InputError) as raised:
            ask(view, "evaluation", {**body, "context": {"time": "yesterday"}}, ALICE_AUDITING)
        assert raised.value.field == "context.time"
        assert authzen.context_time(early) == datetime(2026, 3, 1, 8, 30, tzinfo=UTC)
        assert authzen.context_time({"context": {}}) is None

    def test_only_an_auditor_chooses_the_time(self) -> None:
        """A caller that is no auditor naming context.time is refused (403), in a batch item by
        item, and in a search: a time before a revoke would grant what was revoked."""
        view = state(BASE)
        body = {"subject": SUBJECT, "action": RELY, "resource": {"type": "fact", "id": "F4"}}
        early = {**body, "context": {"time": "2026-03-01T08:30Z"}}
        assert ask(view, "evaluation", body) == {"decision": False, "context": {"reasons": ["expired"]}}
        with pytest.raises(Forbidden, match="only an auditor chooses the time"):
            ask(view, "evaluation", early)
        with pytest.raises(Forbidden):
            ask(view, "search/resource", {**early, "resource": {"type": "fact"}})
        batch = ask(view, "evaluations", {"subject": SUBJECT, "action": RELY, "evaluations": [
            {"resource": {"type": "fact", "id": "F1"}},
            {"resource": {"type": "fact", "id": "F4"}, "context": {"time": "2026-03-01T08:30Z"}}]})
        first, second = batch["evaluations"]
        assert first == {"decision": True}
        assert second["decision"] is False and second["context"]["error"]["status"] == 403

    def test_a_gamma_engine_is_a_view(self) -> None:
        """The store's engine answers as the in-memory state does."""
        engine = gamma.Engine()
        engine.append(BASE)
        body = {"subject": SUBJECT, "action": RELY, "resource": {"type": "fact", "id": "F1"}}
        assert ask(engine, "evaluation", body) == ask(state(BASE), "evaluation", body) == {"decision": True}


class TestSubjects:
    """The caller is who it authenticated as; only an auditor asks on behalf of others."""

    def test_a_caller_names_only_itself_and_its_properties_are_ignored(self) -> None:
        view = state(BASE)
        asked = {"action": RELY, "resource": {"type": "fact", "id": "H1"}}
        with pytest.raises(Forbidden):
            ask(view, "evaluation", {**asked, "subject": {"type": "user", "id": "bob"}})
        claims = {"type": "user", "id": "alice", "properties": {"roles": ["hr"], "tenant": "acme",
                                                                 "clearance": "secret"}}
        assert ask(view, "evaluation", {**asked, "subject": claims})["decision"] is False
        assert authzen.subject_actor(ALICE, claims, "subject") == ALICE.actor

    def test_an_auditor_asks_on_behalf(self) -> None:
        view = state(BASE)
        asked = {"action": RELY, "resource": {"type": "fact", "id": "H1"}}
        bob = {"type": "user", "id": "bob", "properties": {"tenant": "acme", "roles": ["hr"]}}
        assert ask(view, "evaluation", {**asked, "subject": bob}, AUDITOR) == {"decision": True}
        itself = {"type": "user", "id": "auditor"}
        assert authzen.subject_actor(AUDITOR, itself, "subject") == AUDITOR.actor
        assert authzen.on_behalf(AUDITOR, "evaluation", {**asked, "subject": itself}) == ()
        assert authzen.on_behalf(AUDITOR, "evaluations", {"subject": bob, "evaluations": [
            {"subject": bob}, {"subject": itself}]}) == (Actor(
                id="bob", tenant="acme", roles=("hr",), clearance="public"),)
        assert authzen.on_behalf(ALICE, "evaluation", {**asked, "subject": bob}) == ()

    @pytest.mark.parametrize(("subject", "field"), [
        ({"type": "user", "id": "bob"}, "subject.properties.tenant"),
        ({"type": "user", "id": "bob", "properties": {"tenant": "acme", "clearance": "cosmic"}},
         "subject.properties.clearance"),
        ({"type": "user", "id": "bob", "properties": {"tenant": "acme", "roles": "hr"}},
         "subject.properties.roles"),
        ({"type": "user", "id": "bob", "properties": []}, "subject.properties"),
        ({"type": "", "id": "bob"}, "subject.type"),
    ])
    def test_an_auditors_subject_is_checked(self, subject: dict[str, Any], field: str) -> None:
        with pytest.raises(InputError) as raised:
            authzen.subject_actor(AUDITOR, subject, "subject", policy=DEFAULT_POLICY)
        assert raised.value.field == field

    def test_subject_search_is_for_auditors(self) -> None:
        """Which configured actors may rely on a fact: the auditor asks; others may not."""
        view = state(BASE)
        body = {"subject": {"type": "agent"}, "action": RELY, "resource": {"type": "fact", "id": "F1"},
                "page": {"limit": 1}}
        with pytest.raises(Forbidden):
            authzen.search_subject(view, BOB, AT, body, callers=CALLERS)
        first = authzen.search_subject(view, AUDITOR, AT, body, callers=CALLERS)
        assert [r["id"] for r in first["results"]] == ["alice"]
        body["page"] = {"limit": 1, "token": first["page"]["next_token"]}
        second = authzen.search_subject(view, AUDITOR, AT, body, callers=CALLERS)
        assert [r["id"] for r in second["results"]] == ["bob"] and second["page"]["next_token"] == ""
        only = {**body, "page": {}, "resource": {"type": "fact", "id": "F1", "properties": {"tenant": "globex"}}}
        assert authzen.search_subject(view, AUDITOR, AT, only, callers=CALLERS)["results"] == []


class TestBatch:
    """Order, defaults, per-item errors and the three semantics."""

    ITEMS = [{"resource": {"type": "fact", "id": f}} for f in ("F2", "F1", "nope", "F3")]

    def run(self, semantic: str | None, items: list[Any] | None = None) -> list[bool]:
        body: dict[str, Any] = {"subject": SUBJECT, "action": RELY, "evaluations": items or self.ITEMS}
        if semantic is not None:
            body["options"] = {"evaluations_semantic": semantic}
        return [e["decision"] for e in ask(state(BASE), "evaluations", body)["evaluations"]]

    def test_semantics(self) -> None:
        assert self.run(None) == self.run("execute_all") == [False, True, False, True]
        assert self.run("deny_on_first_deny") == [False]
        assert self.run("deny_on_first_deny", self.ITEMS[1:]) == [True, False]
        assert self.run("deny_on_first_deny", [self.ITEMS[1], self.ITEMS[3]]) == [True, True]
        assert self.run("permit_on_first_permit") == [False, True]
        assert self.run("permit_on_first_permit", [self.ITEMS[0], self.ITEMS[2]]) == [False, False]

    def test_an_item_error_is_a_denial_that_short_circuits_too(self) -> None:
        """A malformed item, or one naming another subject, is denied with its error; under
        deny_on_first_deny it ends the batch."""
        items = [self.ITEMS[1], {"resource": {"type": "fact"}}, 7,
                 {"subject": {"type": "user", "id": "bob"}, **self.ITEMS[1]}, self.ITEMS[3]]
        body = {"subject": SUBJECT, "action": RELY, "evaluations": items}
        out = ask(state(BASE), "evaluations", body)["evaluations"]
        assert [e["decision"] for e in out] == [True, False, False, False, True]
        assert [e["context"]["error"].get("field") for e in out[1:4]] == [
            "evaluations[1].resource.id", "evaluations[2]", None]
        assert out[3]["context"]["error"]["status"] == 403
        body["options"] = {"evaluations_semantic": "deny_on_first_deny"}
        assert len(ask(state(BASE), "evaluations", body)["evaluations"]) == 2

    def test_defaults_are_replaced_whole(self) -> None:
        """An item's resource replaces the default's, properties and all; a default that is
        malformed fails the items that use it, naming the top-level field."""
        body = {"subject": SUBJECT, "action": RELY, "resource": {"type": "fact"},
                "evaluations": [{}, {"resource": {"type": "fact", "id": "F1"}}]}
        out = ask(state(BASE), "evaluations", body)["evaluations"]
        assert out[0]["context"]["error"]["field"] == "resource.id"
        assert out[1] == {"decision": True}


class TestPages:
    """Resource search: deterministic order, keyset tokens, the request bound to its token."""

    MANY = [*BASE, *(_assert(10 + i, f"P{i:02d}", f"k{i:02d}", i) for i in range(25))]

    def pages(self, view: View, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        body = {**body, "page": dict(body.get("page", {}))}
        for _ in range(100):  # a token that never ends is a failure, not a hang
            response = ask(view, "search/resource", body)
            yield response
            if not response["page"]["next_token"]:
                return
            body["page"]["token"] = response["page"]["next_token"]
        raise AssertionError("more than 100 pages")

    def test_pages_cover_the_results_once_in_order(self) -> None:
        view = state(self.MANY)
        body = {"subject": SUBJECT, "action": RELY, "resource": {"type": "fact"}, "page": {"limit": 10}}
        pages = list(self.pages(view, body))
        ids = [r["id"] for p in pages for r in p["results"]]
        whole = ask(view, "search/resource", {**body, "page": {}})
        assert [p["page"]["count"] for p in pages] == [10, 10, 7]
        assert ids == sorted(ids) == [r["id"] for r in whole["results"]]
        assert len(ids) == 27 and {p["page"]["total"] for p in pages} == {27}
        keys = ask(view, "search/resource", {**body, "resource": {"type": "key"}, "page": {}})
        assert [r["id"] for r in keys["results"]] == [f"k{i:02d}" for i in range(25)] + ["launch", "region"]

    def test_a_token_resumes_after_its_last_item_as_the_log_grows(self) -> None:
        """Facts appended between pages before the cursor are not repeated nor shift it."""
        view = state(self.MANY)
        body: dict[str, Any] = {"subject": SUBJECT, "action": RELY, "resource": {"type": "fact"},
                                "page": {"limit": 5}}
        first = ask(view, "search/resource", body)
        assert [r["id"] for r in first["results"]] == ["F1", "F3", "P00", "P01", "P02"]
        view.append([_assert(99, "A0", "new.a", 1), _assert(98, "F0", "new.f", 2)])
        body["page"] = {"limit": 5, "token": first["page"]["next_token"]}
        second = ask(view, "search/resource", body)
        assert [r["id"] for r in second["results"]] == ["P03", "P04", "P05", "P06", "P07"]

    @pytest.mark.parametrize("page", [{"limit": -1}, {"limit": True}, {"limit": "2"}, {"limit": 2.0},
                                      {"token": "garbage!"}, {"token": ""}, {"token": 3}, []])
    def test_bad_pages_name_their_field(self, page: Any) -> None:
        body = {"subject": SUBJECT, "action": RELY, "resource": {"type": "fact"}, "page": page}
        with pytest.raises(InputError) as raised:
            ask(state(BASE), "search/resource", body)
        assert raised.value.field in {"page", "page.limit", "page.token"}

    def test_a_token_is_for_its_own_request(self) -> None:
        view = state(self.MANY)
        body: dict[str, Any] = {"subject": SUBJECT, "action": RELY, "resource": {"type": "fact"},
                                "page": {"limit": 3}}
        token = ask(view, "search/resource", body)["page"]["next_token"]
        for changed in ({**body, "resource": {"type": "key"}}, {**body, "page": {"limit": 4}},
                        {**body, "context": {"time": "2026-03-02T10:00:00Z"}}):
            changed = {**changed, "page": {**changed["page"], "token": token}}
            with pytest.raises(InputError, match="request changed"):
                ask(view, "search/resource", changed, ALICE_AUDITING)
        huge = ask(view, "search/resource", {**body, "page": {"limit": 10**9}})
        assert huge["page"] == {"next_token": "", "count": 27, "total": 27}
        zero = ask(view, "search/resource", {**body, "page": {"limit": 0}})
        assert zero["results"] == [] and zero["page"]["total"] == 27 and zero["page"]["next_token"]


# -- no oracle ---------------------------------------------------------------------------------

VALUES = st.one_of(st.text("abcxyzé€ $%,.-0129\"\\", max_size=12), st.integers(-10**6, 10**6), st.booleans())
#: how each hidden fact is kept from alice: the assert's extra fields (and its tenant)
HIDINGS: dict[str, dict[str, Any]] = {
    "role": {"visibility": {"roles": ["hr"]}},
    "clearance": {"visibility": {"clearance": "secret"}},
    "actors": {"visibility": {"actors": ["bob"]}},
    "scope": {"scope": "hr/payroll"},
    "dependency": {"depends_on": ["S-role"]},
    "foreign": {"tenant": "globex"},
    "outranked": {"key": "region", "authority": "peer", "visibility": {"roles": ["hr"]}},
}


def world(values: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The base log plus hidden facts of every hiding with ``values`` (None: none of them)."""
    events = list(BASE)
    for i, (hiding, extra) in enumerate(HIDINGS.items()):
        if values is not None:
            fact = _assert(50 + i, f"S-{hiding}", f"secret.{hiding}", values[hiding])
            events.append({**fact, **extra})
    return events


def probes() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every request shape the handlers take, naming every hidden fact and key and some absent."""
    names = [f"S-{h}" for h in HIDINGS] + ["F1", "absent"]
    keys = [f"secret.{h}" for h in HIDINGS] + ["region", "secret.absent"]
    resources = [{"type": "fact", "id": n} for n in names] + [{"type": "key", "id": k} for k in keys]
    for resource in resources:
        yield "evaluation", {"subject": SUBJECT, "action": RELY, "resource": resource}
        yield "search/action", {"subject": SUBJECT, "resource": resource}
    for semantic in authzen.SEMANTICS:
        yield "evaluations", {"subject": SUBJECT, "action": RELY, "options": {"evaluations_semantic": semantic},
                              "evaluations": [{"resource": r} for r in resources]}
    for kind in ("fact", "key"):
        body = {"subject": SUBJECT, "action": RELY, "resource": {"type": kind}}
        yield "search/resource", body
        yield "search/resource", {**body, "page": {"limit": 1}}


@given(st.fixed_dictionaries({h: VALUES for h in HIDINGS}), st.fixed_dictionaries({h: VALUES for h in HIDINGS}))
def test_hidden_values_and_existence_change_no_byte(one: dict[str, Any], other: dict[str, Any]) -> None:
    """Two logs differing only in the hidden facts' values, and a third without them, answer
    every request shape alike, byte for byte (alice's view; the auditor's is its privilege)."""
    views = [state(world(one)), state(world(other)), state(world(None))]
    for endpoint, body in probes():
        answers = {wire(ask(view, endpoint, body)) for view in views}
        assert len(answers) == 1, (endpoint, body, answers)


def test_the_hidden_facts_are_hidden_for_the_reasons_given() -> None:
    """The no-oracle test is not vacuous: each hidden fact is in the log, kept from alice for
    the reason its hiding names."""
    view = state(world(dict.fromkeys(HIDINGS, 1)))
    resolution = view.resolve(ALICE.actor, AT)
    codes = {x.fact: set(x.codes) for x in resolution.excluded}
    assert codes["S-role"] >= {"access_denied"} and codes["S-clearance"] >= {"access_denied"}
    assert codes["S-actors"] >= {"access_denied"} and codes["S-scope"] >= {"out_of_scope"}
    assert codes["S-dependency"] >= {"dependency_restricted"}
    assert codes["S-outranked"] >= {"access_denied", "outranked"}
    assert "S-foreign" not in codes and len(view) == len(BASE) + len(HIDINGS)
    assert {a.fact for a in resolution.admitted} == {"F1", "F3"}
