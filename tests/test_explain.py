"""gamma explain: decisions as resolve gives them, timelines, verified counterfactuals, no leaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import A, R, actor, log

import gamma
from gamma.audit.explain import Checker, Index, apply_changes, explain, explain_in
from gamma.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "examples"
LOG = EXAMPLE / "acme.jsonl"
ALICE = json.loads((EXAMPLE / "alice.json").read_text())
AT = "2026-03-02T10:00:00Z"
EVENTS = gamma.load_events(LOG)
RES = gamma.resolve(EVENTS, ALICE, AT)
HIDDEN = {"F8": "$40,000", "F16": "$8,000", "F20": True, "G1": "50%"}

def run_cli(*args: str) -> tuple[int, str]:
    """``gamma ARGS`` in-process as the console runs it (main configures the log to this stderr)."""
    runner = CliRunner()
    code = 0
    with runner.isolation() as (out, _err, _):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue().decode("utf-8")



@pytest.mark.parametrize("fact", [x.fact for x in RES.excluded] + [a.fact for a in RES.admitted])
def test_decision_is_resolves(fact: str) -> None:
    for auditor in (False, True):
        ex = explain(EVENTS, fact, ALICE, AT, auditor=auditor)
        excluded = RES.excluded_fact(fact)
        assert ex.decision == ("excluded" if excluded else "admitted")
        assert ex.reasons == (excluded.reasons if excluded else ())


@pytest.mark.parametrize("excluded", RES.excluded, ids=lambda x: x.fact)
def test_every_counterfactual_removes_its_code(excluded: gamma.Excluded) -> None:
    ex = explain(EVENTS, excluded.fact, ALICE, AT, auditor=True)
    if excluded.codes == ("tenant_isolation",):
        assert ex.changes == ()
        return
    assert {c.code for c in ex.changes} == set(excluded.codes)
    for change in ex.changes:
        events, actor, at = apply_changes(EVENTS, RES.actor, RES.at, change.changes)
        after = gamma.resolve(events, actor, at)
        still = after.excluded_fact(excluded.fact)
        assert still is None or change.code not in still.codes


def test_examples_of_changes_as_data() -> None:
    f8 = explain(EVENTS, "F8", ALICE, AT, auditor=True).changes[0].changes
    assert {"kind": "clearance", "at_least": "confidential"} in f8
    assert any(c["kind"] == "grant" and c["fact"] == "F8" for c in f8)
    assert explain(EVENTS, "F13", ALICE, AT).changes[0].changes == (
        {"kind": "at", "before": "2026-03-01T09:14:00Z"},
    )
    assert explain(EVENTS, "F14", ALICE, AT).changes[0].changes == (
        {"kind": "scope", "within": "apollo"},
    )


def test_timeline_names_what_each_event_did() -> None:
    f13 = explain(EVENTS, "F13", ALICE, AT)
    assert [(s.position, s.event) for s in f13.timeline] == [(12, "e13"), (13, "e14")]
    assert '"budget cancelled"' in f13.timeline[1].did
    f2 = explain(EVENTS, "F2", ALICE, AT).timeline
    assert "superseded by F3" in f2[1].did
    f4 = explain(EVENTS, "F4", ALICE, AT).timeline
    assert any(s.event == "e20" and "ignored: insufficient authority" in s.did for s in f4)
    assert any(s.event == "e21" and "ignored" in s.did for s in f4)
    f19 = explain(EVENTS, "F19", ALICE, AT).timeline
    assert any(s.event == "e23" and "changed this actor's access" in s.did for s in f19)
    f11 = explain(EVENTS, "F11", ALICE, AT).timeline
    assert [s.type for s in f11] == ["assert", "window"]
    f15 = explain(EVENTS, "F15", ALICE, AT)
    assert any("F15 <- F13" in s.did and s.event == "e14" for s in f15.timeline)
    assert f15.tree is not None and f15.tree.children[0].fact == "F13"
    assert f15.tree.children[0].codes == ("retracted",)


@pytest.mark.parametrize("fact", sorted(HIDDEN))
def test_actor_view_leaks_nothing_the_resolution_does_not_show(fact: str) -> None:
    shown = RES.to_json()
    ex = explain(EVENTS, fact, ALICE, AT)
    text = ex.to_json() + ex.render()
    if isinstance(HIDDEN[fact], str):
        assert json.dumps(HIDDEN[fact]) not in text
    assert "value" not in ex.render()
    assert ex.value is None and ex.changes == () and ex.tree is None
    for writer in ("hr-system", "globex-crm", "confidential", '"hr"', '"legal"', "2026-03-01T"):
        assert writer not in text
    ids = {s.event for s in ex.timeline}
    assert all(i in shown for i in ids)
    if fact == "G1":
        assert ex.key is None and "discount" not in text


@pytest.mark.parametrize("fact", sorted(HIDDEN))
def test_auditor_view_shows_value_and_every_event(fact: str) -> None:
    ex = explain(EVENTS, fact, ALICE, AT, auditor=True)
    assert ex.value == HIDDEN[fact]
    if fact != "G1":
        assert all(s.writer for s in ex.timeline if s.event)


def test_cli_explain_text_json_and_public_api(tmp_path: Path) -> None:
    args = ["explain", str(LOG), "F13", "--actor", str(EXAMPLE / "alice.json"), "--at", AT]
    code, text = run_cli(*args)
    assert code == 0 and "budget cancelled" in text
    code, out = run_cli(*args, "--format", "json")
    obj = json.loads(out)
    assert obj["decision"] == "excluded" and obj["changes"][0]["code"] == "retracted"
    assert gamma.explain(str(LOG), "F13", ALICE, AT).to_dict() == obj


def test_resolve_text_sorts_by_position_and_shows_specifics() -> None:
    text = RES.render("text")
    assert text.index("  F3 ") < text.index("  F17 ") < text.index("  F21 ")
    assert 'withdrawn by a retract: "budget cancelled"' in text
    assert "superseded by F3" in text
    back = gamma.Resolution.from_dict(json.loads(RES.to_json())).render("text")
    assert back.index("  F3 ") < back.index("  F17 ")


def test_actor_view_shows_no_value_of_a_visible_excluded_fact() -> None:
    actor_view = explain(EVENTS, "F2", ALICE, AT)
    assert '"10%"' not in actor_view.to_json() + actor_view.render()
    assert '"10%"' in explain(EVENTS, "F2", ALICE, AT, auditor=True).render()
    assert '"15%"' in explain(EVENTS, "F3", ALICE, AT).render()  # admitted: shown


# -- linear output (issue 26 part 4) -----------------------------------------------------


def _lattice(depth: int) -> tuple[gamma.Event, ...]:
    """Two facts per level, each depending on both of the level below: 2^depth paths."""
    events = [A("L0a", "k0a", 0), A("L0b", "k0b", 0)]
    for i in range(1, depth):
        deps = [f"L{i - 1}a", f"L{i - 1}b"]
        events += [A(f"L{i}a", f"k{i}a", i, depends_on=deps), A(f"L{i}b", f"k{i}b", i, depends_on=deps)]
    return log(*events, R("L0a"))


def test_the_tree_lists_each_ancestor_once() -> None:
    """A nested tree copied every path (2^24 nodes here); the tree names direct dependencies
    and ``upstream`` every further ancestor once, each naming its own dependencies by id."""
    events = _lattice(24)
    ex = explain(events, "L23a", actor(), "2030-01-01T00:00:00Z")
    assert ex.tree is not None and [c.fact for c in ex.tree.children] == ["L22a", "L22b"]
    assert ex.tree.children[0].depends_on == ("L21a", "L21b")
    assert [n.fact for n in ex.upstream][:2] == ["L21a", "L21b"]
    assert len(ex.upstream) == 2 * 22 and len({n.fact for n in ex.upstream}) == 2 * 22
    assert len(ex.to_json()) < 20_000
    assert "dependency_invalidated" in ex.codes and ex.changes  # a fix still found
    # a step for an ancestor names the one edge it was reached by, not the whole path
    assert all(s.did.count("<-") <= 2 for s in ex.timeline)


def test_a_fix_reads_as_a_sentence() -> None:
    text = explain(EVENTS, "F13", ALICE, AT).render()
    assert ("retracted (from e14) would not apply if asked before 2026-03-01T09:14:00Z;"
            " checked by resolving again with that change.") in text
    f8 = explain(EVENTS, "F8", ALICE, AT, auditor=True).render()
    assert "if the actor holds clearance confidential and if F8 were granted to" in f8


def test_a_spent_budget_is_said_not_hidden() -> None:
    """Past the re-resolution budget a fact's changes are left out and it says so."""
    index = Index.build(EVENTS, RES, gamma.DEFAULT_POLICY)
    spent = Checker.for_log(EVENTS, RES, gamma.DEFAULT_POLICY)
    spent.left = 0
    ex = explain_in(index, "F13", auditor=False, checker=spent)
    assert ex.changes == () and not ex.complete
    assert "budget ran out" in ex.render()
    full = explain_in(index, "F13", auditor=False, checker=Checker.for_log(EVENTS, RES, gamma.DEFAULT_POLICY))
    assert full.changes and full.complete


class TestDerivation:
    """Issue 29: explain shows a fact's derivation and, recomputed, the inputs it used and the
    stated value withheld; a fact without one keeps its bytes."""

    EVENTS = log(
        A("W1", "snacks.weekly", 10),
        A("T1", "snacks.two_weeks", 20, kind="derived", depends_on=["W1"],
          derivation="{snacks.weekly} * 2"),
        A("W2", "snacks.weekly", 7),
        A("H1", "secret", 3, visibility={"roles": ["hr"]}),
        A("H2", "secret_twice", 6, kind="derived", depends_on=["H1"], derivation="{secret} * 2"),
    )
    POLICY = gamma.load_policy(Path(__file__).resolve().parent.parent / "policies/recompute.toml")

    def test_a_recomputed_fact_shows_its_derivation_inputs_and_stale_value(self) -> None:
        """The actor sees the derivation, the inputs and the computed value, never the stale
        stated one (withheld, like any value it may not rely on); the auditor sees that too."""
        found = explain(self.EVENTS, "T1", actor(), "2026-03-02T00:00:00Z", policy=self.POLICY)
        body = found.to_dict()
        assert body["value"] == 14 and body["derivation"] == "{snacks.weekly} * 2"
        assert body["inputs"] == {"events": ["e3"], "facts": ["W2"]}
        assert "stale" not in body and "20" not in found.to_json().replace('"2026', "")
        text = found.render()
        assert '  derivation "{snacks.weekly} * 2"' in text and "  recomputed from W2 [e3]" in text
        assert "(value not shown: stale, recomputed)" in text
        assert not [shown for shown in ("= 20", "value 20", "20;") if shown in text]
        audit = explain(self.EVENTS, "T1", actor(), "2026-03-02T00:00:00Z", policy=self.POLICY,
                        auditor=True)
        assert audit.to_dict()["stale"] == {"code": "recomputed", "value": 20}
        assert audit.to_dict()["value"] == 14 and "the stated value 20 is withheld" in audit.render()

    def test_a_hidden_derived_fact_shows_no_derivation_but_the_auditor_sees_it(self) -> None:
        hidden = explain(self.EVENTS, "H2", actor(), "2026-03-02T00:00:00Z", policy=self.POLICY)
        assert "derivation" not in hidden.to_dict() and "{secret}" not in hidden.render()
        audit = explain(self.EVENTS, "H2", actor(), "2026-03-02T00:00:00Z", policy=self.POLICY,
                        auditor=True)
        assert audit.to_dict()["derivation"] == "{secret} * 2"

    def test_without_a_derivation_the_explanation_has_no_new_field(self) -> None:
        body = explain(self.EVENTS, "W2", actor(), "2026-03-02T00:00:00Z", policy=self.POLICY).to_dict()
        assert not {"derivation", "inputs", "stale"} & set(body)
