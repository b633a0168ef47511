"""Issue 30, the core of verifiable erasure (SPEC §1, §2, §4, §21).

An assert's value is plaintext, committed (``value`` + ``salt``: the chain hashes its
``commitment``) or erased (``commitment`` alone); an erase event names committed values by
fact and commitment. The chain bytes of a committed line, of its exported line and of its
erased form are one, so the head and the tree stay when a value is erased. Γ excludes an
erased fact as ``erased`` at every time, and no output shows its value.
"""

from __future__ import annotations

import gc
import io
import json
import types
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import attrs
import pytest
import reference
from helpers import AT, T0, A, X, actor, codes, log, reason, stamp, ts, verdict_of
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Log, actors, commitment_of, erased_form, logs, probe_times, scenarios
from test_differential import assert_agree

import gamma
from gamma.audit.explain import explain
from gamma.audit.report import report
from gamma.core.incremental.engine import EngineState
from gamma.core.integrity.chain import head_of
from gamma.core.integrity.commitment import commit
from gamma.core.integrity.merkle import tree_head_of
from gamma.core.reading.events import canonical_event, dump_events, event_line, parse_events
from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.errors import (
    DuplicateIdError,
    InputError,
    MissingFieldError,
    UnknownFieldError,
    UnknownReferenceError,
    ValueTypeError,
)
from gamma.core.terms.model import Assert, Erase, ErasedValue
from gamma.core.terms.policy import DEFAULT_POLICY, Policy, parse_policy
from gamma.scoring.findings import validate

SALT = "5a" * 32
SECRET = "Zebra-4711 salary 93,417 EUR"
COMMITMENT = commit(SALT, SECRET)


def committed(fact: str = "F1", key: str = "salary", value: Any = SECRET, **kw: Any) -> dict[str, Any]:
    return A(fact, key, value, salt=SALT if value == SECRET else "6b" * 32, subject="alice", **kw)


def erase(*facts: tuple[str, str], basis: str = "GDPR Art. 17(1)(a)", **kw: Any) -> dict[str, Any]:
    return {"type": "erase", "basis": basis,
            "erased": [{"fact": f, "commitment": c} for f, c in facts], **kw}


def lines_of(*events: dict[str, Any]) -> list[str]:
    return [json.dumps(e) for e in stamp(events)]


def fails(lines: list[str], error: type[InputError], line: int, field: str,
          policy: Policy = DEFAULT_POLICY) -> InputError:
    with pytest.raises(InputError) as caught:
        parse_events(lines, policy=policy, source="t.jsonl")
    assert type(caught.value) is error, caught.value
    assert (caught.value.line, caught.value.field) == (line, field), caught.value
    return caught.value


# -- the three forms -------------------------------------------------------------------------


class TestForms:
    def test_a_committed_line_hashes_its_commitment_and_exports_value_and_salt(self) -> None:
        (event,) = log(committed())
        assert isinstance(event, Assert)
        assert (event.value, event.salt, event.commitment, event.subject) == (SECRET, SALT, COMMITMENT, "alice")
        chain = json.loads(canonical_event(event))
        assert "value" not in chain and "salt" not in chain and chain["commitment"] == COMMITMENT
        line = json.loads(event_line(event))
        assert (line["value"], line["salt"], line["commitment"]) == (SECRET, SALT, COMMITMENT)
        assert canonical_json({k: v for k, v in line.items() if k not in ("value", "salt")}) == canonical_event(event)

    def test_the_chain_bytes_of_a_line_its_export_and_its_erased_form_are_one(self) -> None:
        written = stamp([A("F0", "k", "plain"), committed(), A("F2", "k2", 7, salt="6b" * 32)])
        original = parse_events([json.dumps(e) for e in written])
        exported = parse_events([event_line(e) for e in original])
        erased = parse_events([json.dumps(erased_form(e) if "salt" in e else e) for e in written])
        chains = [[canonical_event(e) for e in events] for events in (original, exported, erased)]
        assert chains[0] == chains[1] == chains[2]
        assert original.heads == exported.heads == erased.heads  # the reader's heads too
        assert head_of(chains[0]) == original.heads[0] and tree_head_of(chains[0]) == original.heads[1]
        assert [e.value for e in erased] == ["plain", None, None]
        assert exported == original
        # a line already in chain form plus value and salt (what export writes) reads back the same
        assert [event_line(e) for e in exported] == [event_line(e) for e in original]

    def test_a_plaintext_log_keeps_its_bytes(self) -> None:
        written = stamp([A("F1", "k", "v"), A("F2", "k", 3)])
        events = parse_events([json.dumps(e) for e in written])
        assert [canonical_event(e) for e in events] == [canonical_json(e) for e in written]
        assert [event_line(e) for e in events] == [canonical_event(e) for e in events]

    def test_dump_events_writes_lines_that_read_back(self) -> None:
        events = log(committed(), A("F2", "k", "v"), erase(("F1", COMMITMENT)))
        out = io.StringIO()
        dump_events(events, out)
        rows = out.getvalue().splitlines()
        assert json.loads(rows[0])["value"] == SECRET  # the log still holds it: export carries it
        assert parse_events(rows) == events

    def test_hand_built_events_in_every_form(self) -> None:
        base = {"ts": T0, "actor": "w", "tenant": "acme"}
        events = [
            Assert(id="e1", fact="F1", key="k1", value=SECRET, salt=SALT, **base),
            Assert(id="e2", fact="F2", key="k2", commitment=commit("6b" * 32, 5), **base),
            Erase(id="e3", ts=T0, actor="w", tenant="acme", basis="consent withdrawn",
                  erased=(ErasedValue("F1", COMMITMENT),)),
        ]
        res = gamma.resolve(events, {"id": "a", "tenant": "acme"}, AT)
        assert codes(res, "F1") == ("erased",) and codes(res, "F2") == ("erased",)
        assert reason(res, "F1", "erased") == (("e3",), ())
        assert reason(res, "F2", "erased") == (("e2",), ())  # no erase in the log: its own assert
        with pytest.raises(MissingFieldError) as caught:
            gamma.resolve([Assert(id="e1", fact="F1", key="k", **base)], {"id": "a", "tenant": "acme"}, AT)
        assert caught.value.field == "value"


# -- every error names its line and field ------------------------------------------------------


class TestErrors:
    @pytest.mark.parametrize(
        ("extra", "drop", "error", "field"),
        [
            ({}, "value", MissingFieldError, "value"),  # plaintext without value: as ever
            ({"salt": SALT}, "value", MissingFieldError, "value"),
            ({"commitment": COMMITMENT}, None, MissingFieldError, "salt"),
            ({"salt": SALT.upper()}, None, ValueTypeError, "salt"),
            ({"salt": SALT[:-2]}, None, ValueTypeError, "salt"),
            ({"salt": 5}, None, ValueTypeError, "salt"),
            ({"commitment": "x" * 64}, "value", ValueTypeError, "commitment"),
            ({"salt": SALT, "commitment": commit(SALT, "other")}, None, ValueTypeError, "commitment"),
            ({"subject": ""}, None, ValueTypeError, "subject"),
            ({"subject": "a\u202eb"}, None, ValueTypeError, "subject"),
            ({"value": None, "commitment": COMMITMENT}, None, ValueTypeError, "value"),
        ],
    )
    def test_an_assert_in_no_form(self, extra: dict[str, Any], drop: str | None,
                                   error: type[InputError], field: str) -> None:
        bad = {**A("F3", "k", SECRET), **extra}
        if drop is not None:
            del bad[drop]
        fails(lines_of(A("F1", "k", 1), A("F2", "k", 2), bad), error, 3, field)

    @pytest.mark.parametrize(
        ("body", "error", "field"),
        [
            ({"erased": []}, ValueTypeError, "erased"),
            ({"erased": "F1"}, ValueTypeError, "erased"),
            ({"erased": ["F1"]}, ValueTypeError, "erased[0]"),
            ({"erased": [{"fact": "F1"}]}, MissingFieldError, "erased[0].commitment"),
            ({"erased": [{"fact": "F1", "commitment": COMMITMENT, "value": "x"}]}, UnknownFieldError,
             "erased[0].value"),
            ({"erased": [{"fact": "F1", "commitment": "ab"}]}, ValueTypeError, "erased[0].commitment"),
            ({"erased": [{"fact": "", "commitment": COMMITMENT}]}, ValueTypeError, "erased[0].fact"),
            ({"erased": [{"fact": "F1", "commitment": COMMITMENT}] * 2}, DuplicateIdError, "erased[1].fact"),
            ({"basis": ""}, ValueTypeError, "basis"),
            ({"basis": None}, ValueTypeError, "basis"),
            ({"basis": 17}, ValueTypeError, "basis"),
        ],
    )
    def test_a_malformed_erase(self, body: dict[str, Any], error: type[InputError], field: str) -> None:
        bad = {**erase(("F1", COMMITMENT)), **body}
        fails(lines_of(committed(), A("F2", "k", 2), bad), error, 3, field)

    def test_an_erase_without_basis(self) -> None:
        bad = erase(("F1", COMMITMENT))
        del bad["basis"]
        fails(lines_of(committed(), bad), MissingFieldError, 2, "basis")

    def test_references_of_an_erase(self) -> None:
        other = {**committed("F9"), "tenant": "globex"}
        elsewhere = fails(lines_of(committed(), other, erase(("F9", COMMITMENT))),
                          UnknownReferenceError, 3, "erased[0].fact")
        nowhere = fails(lines_of(committed(), A("F2", "k", 1), erase(("F9", COMMITMENT))),
                        UnknownReferenceError, 3, "erased[0].fact")
        assert str(elsewhere) == str(nowhere)  # an erase learns nothing of another tenant
        fails(lines_of(committed(), erase(("F1", COMMITMENT), ("F2", COMMITMENT)), committed("F2")),
              UnknownReferenceError, 2, "erased[1].fact")  # asserted later
        error = fails(lines_of(committed(), A("F2", "k", 1), erase(("F2", COMMITMENT))),
                      ValueTypeError, 3, "erased[0].fact")
        assert "not committed" in str(error)
        fails(lines_of(committed(), erase(("F1", commit(SALT, "guess")))),
              ValueTypeError, 2, "erased[0].commitment")
        error = fails(lines_of(committed(), erase(("F1", COMMITMENT)), erase(("F1", COMMITMENT))),
                      ValueTypeError, 3, "erased[0].fact")
        assert "already erased by 'e2'" in str(error)

    def test_an_erased_assert_may_be_erased_and_only_once(self) -> None:
        gone = erased_form(stamp([committed()])[0])
        events = parse_events([json.dumps(gone), *lines_of({}, erase(("F1", COMMITMENT)))[1:]])
        assert isinstance(events[1], Erase)

    def test_the_same_rules_hold_against_a_store_s_index(self) -> None:
        engine = EngineState()
        engine.append(lines_of(committed(), A("F2", "k", 1)))
        later = stamp([{}, {}, erase(("F1", COMMITMENT))])[2]
        for bad, error, field in [
            ({**later, "erased": [{"fact": "F2", "commitment": COMMITMENT}]}, ValueTypeError, "erased[0].fact"),
            ({**later, "erased": [{"fact": "F1", "commitment": "0" * 64}]}, ValueTypeError, "erased[0].commitment"),
            ({**later, "erased": [{"fact": "F7", "commitment": COMMITMENT}]}, UnknownReferenceError, "erased[0].fact"),
        ]:
            with pytest.raises(error) as caught:
                engine.append([json.dumps(bad)])
            assert (caught.value.line, caught.value.field) == (1, field)
        engine.append([json.dumps(later)])
        again = {**later, "id": "e9"}
        with pytest.raises(ValueTypeError, match="already erased by 'e3'") as caught:
            engine.append([json.dumps(again)])
        assert caught.value.field == "erased[0].fact"
        assert engine.index.fact_commitment("F1") == COMMITMENT and engine.index.erased_by("F1") == "e3"
        assert engine.index.fact_commitment("F2") is None and engine.index.erased_by("F2") is None

    def test_only_a_writer_holding_the_erasure_authority_erases(self) -> None:
        bound = Policy(writers=(("clerk", "manager"), ("dpo", "policy")))
        rows = lines_of(committed(), erase(("F1", COMMITMENT), actor="clerk"))
        error = fails(rows, ValueTypeError, 2, "actor", policy=bound)
        assert "'policy'" in str(error)
        parse_events(lines_of(committed(), erase(("F1", COMMITMENT), actor="dpo")), policy=bound)
        lower = parse_policy('[erasure]\nauthority = "manager"\n[writers]\nclerk = "manager"\n')
        parse_events(rows, policy=lower)
        lowest = attrs.evolve(lower, writers=(("clerk", "peer"),))
        fails(rows, ValueTypeError, 2, "actor", policy=lowest)

    @pytest.mark.parametrize(
        ("body", "error", "field"),
        [
            ({"from_head": "0" * 63}, ValueTypeError, "from_head"),
            ({"from_root": "G" * 64}, ValueTypeError, "from_root"),
            ({"from_size": -1}, ValueTypeError, "from_size"),
            ({"from_size": "3"}, ValueTypeError, "from_size"),
            ({"from_size": True}, ValueTypeError, "from_size"),
            ({"from_size": 1.5}, InputError, None),
            ({"from_root": None}, ValueTypeError, "from_root"),
        ],
    )
    def test_a_malformed_migrate(self, body: dict[str, Any], error: type[InputError], field: str | None) -> None:
        good = {"type": "migrate", "from_head": "a" * 64, "from_root": "b" * 64, "from_size": 3}
        assert isinstance(parse_events(lines_of(A("F1", "k", 1), good))[1], gamma.core.terms.model.Migrate)
        with pytest.raises(error) as caught:
            parse_events(lines_of(A("F1", "k", 1), {**good, **body}))
        assert caught.value.line == 2
        if field is not None:
            assert caught.value.field == field


class TestPolicy:
    def test_the_erasure_authority_enters_the_digest_only_when_set(self) -> None:
        assert parse_policy("").digest == DEFAULT_POLICY.digest
        assert "erasure" not in DEFAULT_POLICY.to_dict()
        set_ = parse_policy('[erasure]\nauthority = "manager"\n')
        assert set_.to_dict()["erasure"] == {"authority": "manager"} and set_.digest != DEFAULT_POLICY.digest
        assert Policy.from_dict(set_.to_dict()) == set_
        assert set_.may_erase("anyone")  # no [writers]: every writer holds the top level
        with pytest.raises(gamma.PolicyError) as caught:
            parse_policy('[erasure]\nauthority = "king"\n')
        assert caught.value.field == "erasure.authority"


# -- Γ ----------------------------------------------------------------------------------------


ERASE_AT = ts(10)


def scenario(*extra: dict[str, Any], policy: Policy = DEFAULT_POLICY) -> tuple[Any, ...]:
    """F1 committed (minute 1), F2 depends on it (2), X1 used it (3), ... extra, the erase at 10."""
    return log(committed(), A("F2", "bonus", 5, depends_on=["F1"]), X("X1", ["F1"]), *extra,
               {**erase(("F1", COMMITMENT)), "ts": ERASE_AT}, policy=policy)


class TestResolution:
    @pytest.mark.parametrize("at", [ts(1), ts(5), ERASE_AT, AT])
    def test_erased_at_every_time_before_and_after_the_erase(self, at: str) -> None:
        events = scenario()
        erase_id = events[-1].id
        res = gamma.resolve(events, actor(), at)
        assert codes(res, "F1") == ("erased",)
        assert reason(res, "F1", "erased") == ((erase_id,), ())
        assert "F1" not in [a.fact for a in res.admitted]
        body = json.loads(res.to_json())
        assert res.tree.size == len([e for e in events if e.ts <= gamma.core.terms.canonical.parse_ts(at)])
        assert body["log"] == head_of(canonical_event(e) for e in events[: res.tree.size])

    def test_a_cut_before_the_erase_of_an_erased_store_keeps_it_erased(self) -> None:
        written = stamp([committed(), A("F2", "k", 1), erase(("F1", COMMITMENT))])
        store_form = [json.dumps(erased_form(written[0])), *map(json.dumps, written[1:])]
        events = parse_events(store_form)
        for cut in range(1, 4):
            res = gamma.resolve(events[:cut], actor(), AT)
            expected = ("e3",) if cut == 3 else ("e1",)
            assert reason(res, "F1", "erased") == (expected, ())
        # and the whole erased-form log resolves as the log that still held the value
        held = parse_events([json.dumps(e) for e in written])
        assert gamma.resolve(events, actor(), AT).to_json() == gamma.resolve(held, actor(), AT).to_json()

    @pytest.mark.parametrize("mode", ["exclude", "flag", "recompute"])
    def test_dependents_of_an_erased_fact(self, mode: str) -> None:
        policy = attrs.evolve(DEFAULT_POLICY, dependency_mode=mode)
        events = scenario(
            A("D1", "double", 0, depends_on=["F1"], kind="derived", derivation="{F1} * 2"),
            policy=policy,
        )
        res = gamma.resolve(events, actor(policy=policy), AT, policy)
        if mode == "flag":
            admitted = {a.fact: a for a in res.admitted}
            assert admitted["F2"].needs_recheck and dict(res.recheck_inputs)["F2"] == ("F1",)
        else:
            assert reason(res, "F2", "dependency_invalidated") == ((events[-1].id,), ("F1",))
        # a derivation never reads an erased input: D1 is not recomputed from it
        assert "D1" not in {a.fact for a in res.admitted if isinstance(a, gamma.core.terms.decisions.Recomputed)}

    def test_an_experience_that_used_an_erased_fact_is_rejected(self) -> None:
        res = gamma.resolve(scenario(), actor(), AT)
        assert verdict_of(res, "X1") == ("REJECT", {})
        (used,) = [v for v in res.experiences if v.experience == "X1"][0].reasons
        assert (used.fact, used.code) == ("F1", "erased")

    def test_supersession_by_and_of_an_erased_fact(self) -> None:
        events = log(
            A("F0", "salary", "old"),
            committed(supersedes=["F0"]),
            X("X0", ["F0"]),
            committed("F3", key="title", value="x"),
            A("F4", "title", "y"),
            erase(("F1", COMMITMENT), ("F3", commit("6b" * 32, "x"))),
        )
        res = gamma.resolve(events, actor(), AT)
        assert reason(res, "F0", "superseded") == (("e2",), ("F1",))  # stays superseded
        assert codes(res, "F1") == ("erased",)
        assert codes(res, "F3") == ("erased", "superseded")  # erased and superseded both
        assert [a.fact for a in res.admitted] == ["F4"]
        assert verdict_of(res, "X0") == ("REJECT", {})  # its replacement is gone for good

    def test_a_migrate_event_folds_nothing(self) -> None:
        migrate = {"type": "migrate", "from_head": "a" * 64, "from_root": "b" * 64, "from_size": 2}
        plain = log(committed(), A("F2", "k", 2, depends_on=["F1"]), X("X1", ["F2"]))
        migrated = log(committed(), A("F2", "k", 2, depends_on=["F1"]), X("X1", ["F2"]), migrate)
        engine = EngineState()
        engine.append(list(migrated))
        for res in (gamma.resolve(migrated, actor(), AT), engine.resolve(actor(), AT)):
            expected = gamma.resolve(plain, actor(), AT)
            assert (res.admitted, res.excluded, res.experiences) == (
                expected.admitted, expected.excluded, expected.experiences)
            assert res.tree.size == 4 and res.log != expected.log

    def test_another_tenant_s_erase_changes_nothing(self) -> None:
        other = {**committed("G1"), "tenant": "globex"}
        events = log(committed(), other, {**erase(("G1", COMMITMENT)), "tenant": "globex"})
        res = gamma.resolve(events, actor(), AT)
        assert [a.fact for a in res.admitted] == ["F1"]


# -- the engine -------------------------------------------------------------------------------


def _strings(root: object) -> Iterator[str]:
    """Every string reachable from ``root`` through the objects it refers to (modules, classes
    and functions aside: they are code, not state)."""
    seen: set[int] = set()
    todo = [root]
    skip = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
    while todo:
        item = todo.pop()
        if id(item) in seen or isinstance(item, skip):
            continue
        seen.add(id(item))
        if isinstance(item, str):
            yield item
            continue
        if isinstance(item, (bytes, int, float)):
            continue
        todo.extend(gc.get_referents(item))


class TestEngine:
    def test_engine_equals_pure_after_an_erase_and_keeps_no_value(self) -> None:
        events = scenario()
        engine = EngineState()
        engine.append(list(events[:-1]))
        before = engine.resolve(actor(), AT)
        assert SECRET in before.to_json() and SECRET in before.render("context")
        engine.resolve({"id": "bob", "tenant": "acme", "roles": ["r1"]}, ts(2))  # another class
        engine.resolve({"id": "carol", "tenant": "acme", "roles": ["r2"]}, AT)  # not asked again
        engine.resolve(actor(), AT, keys={"salary"})
        head = engine.head
        engine.append([events[-1]])
        for at in (ts(2), ts(5), AT):
            for who in (actor(), {"id": "bob", "tenant": "acme", "roles": ["r1"]}):
                got = engine.resolve(who, at)
                assert got.to_json() == gamma.resolve(events, who, at).to_json()
                assert SECRET not in got.to_json() + got.render("context") + got.render("text")
            assert engine.check(actor(), at, ["F1"])["F1"].codes == ("erased",)
            assert engine.resolve(actor(), at, keys={"salary"}).excluded[0].codes == ("erased",)
        # the chain of what came before does not move when a value is erased
        assert engine.head_at(T0 + timedelta(minutes=5)) == head == head_of(canonical_event(e) for e in events[:-1])
        assert engine.since(0)[0].value is None and engine.since(0)[0].commitment == COMMITMENT
        del before
        assert not any(SECRET in text or SALT in text for text in _strings(engine))

    def test_an_erase_in_a_later_batch_re_phases_the_key_at_every_time(self) -> None:
        events = log(committed(), A("F2", "other", "v", depends_on=["F1"]), erase(("F1", COMMITMENT)))
        engine = EngineState()
        engine.append(list(events[:2]))
        early = engine.resolve(actor(), ts(1))  # a cut: folded afresh
        late = engine.resolve(actor(), AT)
        assert [a.fact for a in early.admitted] == ["F1"] and len(late.admitted) == 2
        engine.append([events[2]])
        for at in (ts(1), ts(2), AT):
            assert engine.resolve(actor(), at).to_json() == gamma.resolve(events, actor(), at).to_json()


# -- no output shows an erased value ----------------------------------------------------------


class TestNoValueAnywhere:
    @pytest.mark.parametrize("at", [ts(5), AT])
    def test_records_text_context_explain_and_report(self, at: str) -> None:
        events = scenario()  # the log still holds the value beside its erase event
        assert any(SECRET in event_line(e) for e in events)
        res = gamma.resolve(events, actor(), at)
        outputs = [res.to_json(), res.render("text"), res.render("context")]
        for fact in ("F1", "F2"):
            for auditor in (False, True):
                found = explain(events, fact, actor(), at, auditor=auditor)
                outputs += [found.to_json(), found.render()]
        for auditor in (False, True):
            outputs.append(report(events, actor(), at, auditor=auditor))
        for text in outputs:
            assert SECRET not in text and SALT not in text
        auditor_view = explain(events, "F1", actor(), at, auditor=True)
        assert auditor_view.value is None and "erased" in auditor_view.codes
        page = report(events, actor(), at, auditor=True)
        assert '<span class="hidden-v">erased</span>' in page
        if at == AT:
            assert any("value erased" in step.did for step in auditor_view.timeline)

    def test_an_unerased_committed_value_is_shown_as_ever(self) -> None:
        events = log(committed())
        assert gamma.resolve(events, actor(), AT).admitted[0].value == SECRET
        assert explain(events, "F1", actor(), AT).value == SECRET


class TestScoring:
    def test_asserting_an_erased_value_is_a_bypass(self) -> None:
        events = scenario()
        for question in ("What is alice's salary?", f"Is the salary {SECRET}?"):
            found = validate(events, actor=actor(), at=AT, question=question,
                             response=f"Her salary is {SECRET}.")
            bypass = [v for v in found.violations if v.kind == "bypass"]
            assert bypass and bypass[0].fact == "F1" and bypass[0].codes == ("erased",)
            assert "erased" in bypass[0].detail
        clean = validate(events, actor=actor(), at=AT, question="What is alice's salary?",
                         response="That value was erased.")
        assert not [v for v in clean.violations if v.kind == "bypass"]

    def test_an_erased_log_has_nothing_to_leak(self) -> None:
        written = stamp([committed(), erase(("F1", COMMITMENT))])
        events = parse_events([json.dumps(erased_form(written[0])), json.dumps(written[1])])
        found = validate(events, actor=actor(), at=AT, question="salary?", response="no idea")
        assert found.ok


# -- properties over generated logs with erasure ----------------------------------------------


class TestProperties:
    @given(st.one_of(scenarios(erasure=True), scenarios(tenant=None, erasure=True)))
    def test_the_reference_agrees_with_the_resolver(self, scenario_: Any) -> None:
        """Γ and the naive reference agree on logs with committed values and erasures."""
        assert_agree(scenario_.log.lines, scenario_.log.events, scenario_.actor, scenario_.at,
                     scenario_.policy)

    @given(st.data())
    def test_erasing_the_values_changes_no_byte(self, data: st.DataObject) -> None:
        """The log as a store holds it after its erasures has the same chain, the same heads and
        the same resolution at every time as the log that still holds the values."""
        log_: Log = data.draw(logs(erasure=True), label="log")
        gone = log_.as_erased()
        assert [canonical_event(e) for e in gone.events] == [canonical_event(e) for e in log_.events]
        assert [canonical_event(e) for e in log_.events] == [
            reference._Event(i, line).canonical() for i, line in enumerate(log_.lines)
        ]
        who = data.draw(actors(log_), label="actor")
        at = data.draw(probe_times(log_), label="at")
        assert gamma.resolve(gone.events, who, at, log_.policy).to_json() == gamma.resolve(
            log_.events, who, at, log_.policy
        ).to_json()

    @given(logs(erasure=True))
    def test_events_to_lines_to_events(self, log_: Log) -> None:
        """``dump_events`` writes lines that read back as equal events with the same chain."""
        out = io.StringIO()
        dump_events(log_.events, out)
        again = parse_events(out.getvalue().split("\n"), policy=log_.policy)
        assert again == log_.events
        assert again.heads == log_.events.heads  # type: ignore[attr-defined]
        for event, line in zip(again, log_.lines, strict=True):
            if isinstance(event, Assert) and "salt" in line:
                assert event.commitment == commitment_of(line)

    @settings(max_examples=40)
    @given(st.data())
    def test_engine_equals_pure_over_batches(self, data: st.DataObject) -> None:
        """Cut a log with erasures into batches: after each, the engine answers as Γ over all so
        far, and keeps no salt of an erased value."""
        log_: Log = data.draw(logs(erasure=True, max_size=14), label="log")
        engine = EngineState(log_.policy)
        done = 0
        while done < len(log_.lines):
            size = data.draw(st.integers(1, len(log_.lines) - done), label="size")
            engine.append([json.dumps(line) for line in log_.lines[done : done + size]])
            done += size
            so_far = gamma.parse_events([json.dumps(x) for x in log_.lines[:done]], policy=log_.policy)
            for _ in range(data.draw(st.integers(0, 2), label="asks")):
                who = data.draw(actors(log_), label="actor")
                at = data.draw(probe_times(log_), label="at")
                expected = gamma.resolve(so_far, who, at, log_.policy)
                assert engine.resolve(who, at).to_json() == expected.to_json()
        erased = Log.of(log_.lines, log_.policy).erased_facts()
        kept = {e.fact: e for e in engine.since(0) if isinstance(e, Assert)}
        assert all(kept[f].value is None and kept[f].salt is None for f in erased)

    @given(scenarios(erasure=True))
    def test_an_erased_fact_is_never_admitted(self, scenario_: Any) -> None:
        """A fact named by an erase anywhere in the log, or without a value, is excluded as
        ``erased`` at every time, naming the erase event."""
        res = gamma.resolve(scenario_.log.events, scenario_.actor, scenario_.at, scenario_.policy)
        named = scenario_.log.erased_facts()
        valueless = {line["fact"] for line in scenario_.log.lines
                     if line["type"] == "assert" and "value" not in line}
        for x in res.excluded:
            erased = [r for r in x.reasons if r.code == "erased"]
            if x.fact in named:
                assert [r.events for r in erased] == [(named[x.fact],)]
            elif x.fact in valueless:
                assert len(erased) == 1
            else:
                assert not erased
        assert not {a.fact for a in res.admitted} & (set(named) | valueless)
