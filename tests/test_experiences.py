"""Experience verdicts: the governance x applicability factorial and bindings (DESIGN §5, SPEC §7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import A, G, R, X, actor, run, ts, verdict_of

from gamma import InputError, UsedReason, load_policy
from gamma.core.resolving.experiences import verdict_of as experience_verdict
from gamma.core.terms.canonical import parse_ts
from gamma.core.terms.decisions import Reason
from gamma.core.terms.model import Experience

ROOT = Path(__file__).resolve().parent.parent
RECHECK = load_policy(ROOT / "policies" / "recheck.toml")
MULTIVALUE = load_policy(ROOT / "policies" / "multivalue.toml")

# The used fact is always F1; a replacement, where there is one, is F2.
GOVERNANCE: dict[str, tuple[dict[str, Any], ...]] = {
    "valid": (A("F1", "discount", "15%"),),
    "superseded": (A("F1", "discount", "15%"), A("F2", "discount", "10%")),
    "outranked": (A("F2", "discount", "10%", authority="executive"), A("F1", "discount", "15%")),
    "expired": (A("F1", "discount", "15%", valid_until=ts(2)),),
    "unauthorized": (A("F1", "discount", "15%", visibility={"roles": ["finance"]}),),
    "draft": (A("F1", "discount", "15%", status="draft"),),
}
CODE = {
    "valid": None,
    "superseded": "superseded",
    "outranked": "outranked",
    "expired": "expired",
    "unauthorized": "access_denied",
    "draft": "draft",
}
# SPEC §7, the governance paper's table: rows governance, columns applicability.
TABLE = {
    "valid": ("KEEP", "ADAPT", "REJECT"),
    "superseded": ("ADAPT", "ADAPT", "ADAPT"),
    "outranked": ("ADAPT", "ADAPT", "ADAPT"),
    "expired": ("REJECT", "REJECT", "REJECT"),
    "unauthorized": ("REJECT", "REJECT", "REJECT"),
    "draft": ("REJECT", "REJECT", "REJECT"),
}
APPLICABILITY = ("applicable", "adaptable", "unusable")
CELLS = [
    pytest.param(g, a, TABLE[g][i], id=f"{g}/{a}")
    for g in TABLE
    for i, a in enumerate(APPLICABILITY)
]


class TestFactorial:
    def test_table_has_18_cells(self) -> None:
        """The factorial is 6 governance rows x 3 applicability columns."""
        assert len(CELLS) == 18

    @pytest.mark.parametrize(("governance", "applicability", "expected"), CELLS)
    def test_cell(self, governance: str, applicability: str, expected: str) -> None:
        """Each cell of the governance x applicability table gets the paper's verdict."""
        res = run(*GOVERNANCE[governance], X("X1", ["F1"], applicability=applicability), at=ts(5))
        verdict, bindings = verdict_of(res, "X1")
        assert verdict == expected
        code = CODE[governance]
        if code is None:
            assert res.admitted_fact("F1") is not None
        else:
            assert res.excluded_fact("F1").codes == (code,)  # type: ignore[union-attr]
        if governance in ("superseded", "outranked"):
            assert bindings == {"F1": "F2"}
        else:
            assert bindings == {}

    @pytest.mark.parametrize(("governance", "applicability", "expected"), CELLS)
    def test_cell_reasons(self, governance: str, applicability: str, expected: str) -> None:
        """reasons lists the used fact's exclusion codes with the fact and events, and nothing for a valid fact."""
        res = run(*GOVERNANCE[governance], X("X1", ["F1"], applicability=applicability), at=ts(5))
        (item,) = [v for v in res.experiences if v.experience == "X1"]
        code = CODE[governance]
        if code is None:
            assert item.reasons == ()
        else:
            excluded = res.excluded_fact("F1")
            assert excluded is not None
            assert item.reasons == tuple(
                UsedReason(fact="F1", code=r.code, events=r.events) for r in excluded.reasons
            )

    def test_default_applicability_is_applicable(self) -> None:
        """An experience without applicability over valid facts is KEEP."""
        body = X("X1", ["F1"])
        assert "applicability" not in body
        assert verdict_of(run(A("F1", "k", 1), body), "X1") == ("KEEP", {})

    def test_no_uses_follows_applicability(self) -> None:
        """An experience that used no fact is judged by its applicability alone."""
        res = run(X("X1", []), X("X2", [], applicability="unusable"))
        assert [verdict_of(res, x)[0] for x in ("X1", "X2")] == ["KEEP", "REJECT"]


class TestBindings:
    def test_chain_is_followed(self) -> None:
        """Bindings follow the substitution chain F1 -> F2 -> F3 to the admitted fact."""
        res = run(A("F1", "k", 1), A("F2", "k", 2), A("F3", "k", 3), X("X1", ["F1", "F2"]))
        assert verdict_of(res, "X1") == ("ADAPT", {"F1": "F3", "F2": "F3"})

    def test_chain_across_codes(self) -> None:
        """A chain may mix codes: superseded by F2, which is outranked by F3."""
        res = run(
            A("F3", "k", 3, authority="executive"),
            A("F1", "k", 1, scope="a"),
            A("F2", "k", 2, scope="a"),
            X("X1", ["F1"]),
            who=actor(scope="a"),
        )
        assert verdict_of(res, "X1") == ("ADAPT", {"F1": "F3"})

    def test_explicit_chain_across_keys(self) -> None:
        """Explicit supersedes across keys is followed like same-key supersession."""
        res = run(
            A("F1", "a", 1),
            A("F2", "b", 2, supersedes=["F1"]),
            A("F3", "c", 3, supersedes=["F2"]),
            X("X1", ["F1"]),
        )
        assert verdict_of(res, "X1") == ("ADAPT", {"F1": "F3"})

    def test_superseder_hidden_rejects(self) -> None:
        """A superseded used fact whose superseder is hidden from A has no admitted replacement: REJECT."""
        res = run(A("F1", "k", 1), A("F2", "k", 2, visibility={"roles": ["hr"]}), X("X1", ["F1"]))
        assert verdict_of(res, "X1") == ("REJECT", {})

    def test_superseder_withdrawn_rejects(self) -> None:
        """A superseded used fact whose superseder was retracted: REJECT."""
        res = run(A("F1", "k", 1), A("F2", "k", 2), R("F2"), X("X1", ["F1"]))
        assert verdict_of(res, "X1") == ("REJECT", {})

    def test_end_of_chain_withdrawn_rejects(self) -> None:
        """A chain ending in an expired fact reaches no admitted replacement: REJECT."""
        res = run(
            A("F1", "k", 1),
            A("F2", "k", 2),
            A("F3", "k", 3, valid_until=ts(4)),
            X("X1", ["F1"]),
            at=ts(5),
        )
        assert verdict_of(res, "X1") == ("REJECT", {})

    def test_outranking_winner_hidden_rejects(self) -> None:
        """An outranked used fact whose winner is hidden from A: REJECT, never the loser's value."""
        res = run(
            A("F2", "k", 2, authority="executive", visibility={"roles": ["hr"]}),
            A("F1", "k", 1),
            X("X1", ["F1"]),
        )
        assert verdict_of(res, "X1") == ("REJECT", {})

    def test_tied_winners_bind_the_smallest_id(self) -> None:
        """When several winners tie, the binding names the smallest fact id (code-point order)."""
        res = run(
            A("F9", "k", 9, authority="manager"),
            A("F10", "k", 10, authority="manager"),
            A("F1", "k", 1),
            X("X1", ["F1"]),
            policy=MULTIVALUE,
        )
        assert verdict_of(res, "X1") == ("ADAPT", {"F1": "F10"})

    def test_withdrawn_beats_substituted(self) -> None:
        """One withdrawn used fact makes REJECT even when another is substituted; bindings are emptied."""
        res = run(
            A("F1", "k", 1), A("F2", "k", 2), A("F3", "j", 3, status="draft"), X("X1", ["F1", "F3"])
        )
        verdict, bindings = verdict_of(res, "X1")
        assert (verdict, bindings) == ("REJECT", {})
        (item,) = res.experiences
        assert [(r.fact, r.code) for r in item.reasons] == [("F1", "superseded"), ("F3", "draft")]

    def test_out_of_scope_used_fact_rejects(self) -> None:
        """A used fact outside A's scope withdraws: REJECT."""
        res = run(A("F1", "k", 1, scope="b"), X("X1", ["F1"]), who=actor(scope="a"))
        assert verdict_of(res, "X1") == ("REJECT", {})

    def test_dependency_invalidated_used_fact_rejects(self) -> None:
        """A used fact invalidated through its dependency withdraws: REJECT."""
        res = run(A("F1", "k", 1), R("F1"), A("F2", "j", 2, depends_on=["F1"]), X("X1", ["F2"]))
        assert verdict_of(res, "X1") == ("REJECT", {})

    def test_grant_turns_reject_into_keep(self) -> None:
        """The same experience is REJECT for an actor who cannot see the fact and KEEP for one granted it."""
        events = (
            A("F1", "k", 1, visibility={"roles": ["hr"]}),
            X("X1", ["F1"]),
            G(fact="F1", to_actor="bob"),
        )
        assert verdict_of(run(*events, who=actor("alice")), "X1")[0] == "REJECT"
        assert verdict_of(run(*events, who=actor("bob")), "X1")[0] == "KEEP"


class TestRecheck:
    @pytest.mark.parametrize("applicability", APPLICABILITY)
    def test_needs_recheck_used_fact_adapts(self, applicability: str) -> None:
        """A used fact admitted with needs_recheck makes the experience ADAPT, with no bindings (SPEC §7 step 3)."""
        res = run(
            A("F1", "k", 1),
            R("F1"),
            A("F2", "j", 2, depends_on=["F1"]),
            X("X1", ["F2"], applicability=applicability),
            policy=RECHECK,
        )
        assert res.admitted_fact("F2").needs_recheck  # type: ignore[union-attr]
        assert verdict_of(res, "X1") == ("ADAPT", {})
        assert res.experiences[0].reasons == ()

    def test_withdrawn_beats_recheck(self) -> None:
        """A withdrawn used fact makes REJECT even when another used fact needs recheck."""
        res = run(
            A("F1", "k", 1),
            R("F1"),
            A("F2", "j", 2, depends_on=["F1"]),
            X("X1", ["F1", "F2"]),
            policy=RECHECK,
        )
        assert verdict_of(res, "X1") == ("REJECT", {})


class TestListing:
    def test_sorted_and_cut_at_t(self) -> None:
        """Experiences are listed by id in code-point order, only those recorded at or before t, own tenant only."""
        res = run(
            A("F1", "k", 1),
            X("X1", [], tenant="globex"),
            X("X2", ["F1"]),
            X("X10", ["F1"]),
            X("X3", ["F1"]),
            at=ts(4),
        )
        assert [v.experience for v in res.experiences] == ["X10", "X2"]

    def test_reasons_sorted_by_fact_then_code(self) -> None:
        """A used fact with several codes contributes one reason per code, sorted by fact then code."""
        res = run(
            A("F2", "k", 2, status="draft", valid_until=ts(3)),
            A("F10", "j", 1),
            R("F10"),
            X("X1", ["F2", "F10"]),
            at=ts(5),
        )
        (item,) = res.experiences
        assert [(r.fact, r.code) for r in item.reasons] == [
            ("F10", "retracted"),
            ("F2", "draft"),
            ("F2", "expired"),
        ]
        assert [r.events for r in item.reasons] == [("e3",), ("e1",), ("e1",)]

    def test_used_twice_is_reported_once(self) -> None:
        """A fact listed twice in uses is either refused as input or contributes each reason once."""
        try:
            res = run(A("F1", "k", 1), A("F2", "k", 2), X("X1", ["F1", "F1"]))
        except InputError:
            return
        (item,) = res.experiences
        assert [(r.fact, r.code) for r in item.reasons] == [("F1", "superseded")]
        assert dict(item.bindings) == {"F1": "F2"}

    def test_json_shape(self) -> None:
        """An experience serialises as {experience, verdict, bindings: object, reasons: [{fact, code, events}]}."""
        res = run(A("F1", "k", 1), A("F2", "k", 2), X("X1", ["F1"]))
        assert res.to_dict()["experiences"] == [
            {
                "experience": "X1",
                "verdict": "ADAPT",
                "bindings": {"F1": "F2"},
                "reasons": [{"fact": "F1", "code": "superseded", "events": ["e2"]}],
            }
        ]
        assert run(X("X1", [])).to_dict()["experiences"][0]["bindings"] == {}


class TestMutationRun:
    """Shapes the mutation run of issue 11 asked for."""

    def test_an_experience_using_an_overridden_fact_adapts_to_the_more_specific_winner(self) -> None:
        res = run(
            A("F1", "discount", "15%"),
            A("F2", "discount", "10%", scope="emea"),
            X("X1", ["F1"], applicability="unusable"),
            who=actor(scope="emea"),
        )
        assert verdict_of(res, "X1") == ("ADAPT", {"F1": "F2"})
        (used,) = next(v for v in res.experiences if v.experience == "X1").reasons
        assert (used.fact, used.code, used.events) == ("F1", "overridden", ("e2",))

    def test_a_substitution_chain_through_a_retracted_fact_rejects(self) -> None:
        """F1 superseded by F2, F2 superseded by F3 and also retracted: the walk stops at F2."""
        res = run(
            A("F1", "discount", "15%"),
            A("F2", "discount", "10%"),
            A("F3", "discount", "5%"),
            R("F2"),
            X("X1", ["F1"]),
            X("X2", ["F3"]),
        )
        assert set(codes_of(res, "F2")) == {"retracted", "superseded"}
        assert verdict_of(res, "X1") == ("REJECT", {})
        assert verdict_of(res, "X2") == ("KEEP", {})

    def test_the_replacement_walk_is_memoised_for_every_fact_on_the_path(self) -> None:
        """One memo per resolution: the first walk records every step's answer, so N
        experiences over N revisions cost O(N) (20,000 of each took 269 s before)."""
        n = 50
        chain = {f"K{i}": {"superseded": Reason("superseded", (f"e{i + 1}",), (f"K{i + 1}",))}
                 for i in range(n)}
        chain[f"K{n}"] = {}
        memo: dict[str, str | None] = {}
        x = Experience(id="x", ts=parse_ts(ts(1)), actor="w", tenant="acme", experience="X",
                       content="c", uses=("K0",))
        got = experience_verdict(x, chain, {f"K{n}"}, {}, memo=memo)
        assert got.bindings == (("K0", f"K{n}"),)
        assert memo == {f"K{i}": f"K{n}" for i in range(n)}
        chain["K1"] = {"retracted": Reason("retracted", ("e0",))}  # memo answers, not codes
        assert experience_verdict(x, chain, {f"K{n}"}, {}, memo=memo).bindings == (("K0", f"K{n}"),)


def codes_of(res: Any, fact: str) -> tuple[str, ...]:
    item = res.excluded_fact(fact)
    return () if item is None else item.codes
