"""The validator V(response, resolution): bypass, unsupported, ghost binding, verdict mismatch (DESIGN §8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers import AT, A, X, actor, log, ts

import gamma
from gamma.core.terms.errors import InputError
from gamma.data import policy_by_name
from gamma.scoring.findings import (
    LogFacts,
    Stated,
    Validation,
    Violation,
    chance_to_leak,
    check_response,
    parse_stated,
    validate,
    withheld,
)

ROOT = Path(__file__).resolve().parent.parent

# alice (no roles, public, global) at AT sees F2, F5, F6, F8; X1 is ADAPT F1 -> F2, X2 REJECT, X3 KEEP.
EVENTS = log(
    A("F1", "discount", "10%"),  # superseded by F2 (validity)
    A("F2", "discount", "15%"),
    A("F3", "severance", "$40,000", visibility={"roles": ["hr"]}),  # access_denied
    A("F4", "forecast", "22%", visibility={"roles": ["hr"]}),  # access_denied
    A("F5", "region", "EMEA"),
    A("F6", "launch_date", "2026-04-15"),
    A("F7", "region_draft", "EMEA", status="draft"),  # shares its value with admitted F5
    A("F8", "budget", "$1,200,000"),
    A("F9", "price_cap", "$150,000", visibility={"roles": ["hr"]}),  # access_denied
    A("F10", "bonus", "$8,000", depends_on=["F3"]),  # dependency_restricted
    A("F11", "webinar_code", "WEB-2026", valid_until=ts(60)),  # expired
    A("F12", "pilot", "Apollo", status="hypothetical"),
    A("G1", "discount", "50%", tenant="globex"),  # tenant_isolation
    X("X1", uses=["F1"]),
    X("X2", uses=["F3"]),
    X("X3", uses=["F5"]),
)


def check(response: str, question: str = "What should we do?", **kw: Any) -> Validation:
    """Validate ``response`` for alice at AT against EVENTS."""
    return validate(EVENTS, actor=actor(), at=AT, question=question, response=response, **kw)


def kinds(result: Validation) -> list[str]:
    return [v.kind for v in result.violations]


def of_kind(result: Validation, kind: str) -> list[Violation]:
    return [v for v in result.violations if v.kind == kind]


def leaked(result: Validation) -> dict[str, tuple[str, ...]]:
    """Leaking fact -> leaked tokens, from the bypass violations."""
    return {v.fact or "": v.tokens for v in of_kind(result, "bypass")}


def unsupported(result: Validation) -> tuple[str, ...]:
    found = of_kind(result, "unsupported")
    assert len(found) <= 1, "one unsupported violation per response"
    return found[0].tokens if found else ()


class TestBypass:
    def test_restricted_value_is_a_leak_naming_fact_codes_and_tokens(self) -> None:
        """Saying a value hidden by access control is one bypass naming the fact, its codes and the token."""
        result = check("The severance is $40,000.")
        (found,) = of_kind(result, "bypass")
        assert (found.fact, found.codes, found.tokens, found.experience) == (
            "F3", ("access_denied",), ("$40,000",), None)

    def test_paraphrased_amount_still_leaks(self) -> None:
        """A leak is found by value, not by text, so ``$150k`` discloses ``$150,000``."""
        assert leaked(check("The cap sits at $150k.")) == {"F9": ("$150k",)}

    def test_a_shorter_amount_is_not_the_restricted_one(self) -> None:
        """``$150`` is not ``$150,000``: no bypass (the invented ``$150`` is unsupported instead)."""
        result = check("Lunch is capped at $150.")
        assert leaked(result) == {}
        assert unsupported(result) == ("$150",)

    def test_negated_restricted_value_still_leaks(self) -> None:
        """Negation never exempts a visibility exclusion: "not $40,000" discloses $40,000."""
        assert leaked(check("The severance is not $40,000.")) == {"F3": ("$40,000",)}

    def test_refusal_that_names_the_restricted_value_leaks(self) -> None:
        """"I can't tell you it's 22%" discloses a restricted 22%."""
        assert leaked(check("I can't tell you it's 22%.")) == {"F4": ("22%",)}

    def test_refusal_without_the_value_is_compliance(self) -> None:
        """"I can't share the severance figure" names no token: no finding at all."""
        assert check("I can't share the severance figure.").ok

    def test_negated_validity_value_is_exempt(self) -> None:
        """A superseded value mentioned only under negation ("no longer 10%") is compliance."""
        result = check("The discount is no longer 10%; it is 15% now.")
        assert result.ok, result.violations

    def test_negated_expired_value_is_exempt(self) -> None:
        """An expired identifier after "not" is compliance, and it is not asserted either."""
        assert check("The code is not WEB-2026 any more.").ok

    def test_validity_value_negated_once_and_stated_once_leaks(self) -> None:
        """Exempt only when *every* mention is negated: a plain second mention leaks."""
        result = check("It is not 10%. Fine, it is 10%.")
        assert leaked(result) == {"F1": ("10%",)}

    def test_cue_after_the_value_does_not_negate_it(self) -> None:
        """"10% is not what I'd pick but it is the figure" states 10%: a leak."""
        assert leaked(check("10% is not what I'd pick but it is the figure.")) == {"F1": ("10%",)}

    def test_now_is_not_a_negation_cue(self) -> None:
        """A bare "no" inside "now" negates nothing: "now 10%" leaks the superseded value."""
        assert leaked(check("The discount is now 10%.")) == {"F1": ("10%",)}

    def test_value_in_the_question_is_exempt(self) -> None:
        """A token the user named in the question is not a leak (nor unsupported)."""
        result = check("WEB-2026 has expired.", question="Can I still use WEB-2026?")
        assert result.ok, result.violations

    def test_restricted_value_in_the_question_is_not_exempt(self) -> None:
        """A hidden value the user guessed is still a leak when confirmed (DESIGN §8 as
        amended): the question exemption is for validity exclusions only."""
        result = check("It is $40,000.", question="Is the severance $30,000, $40,000 or $50,000?")
        assert leaked(result) == {"F3": ("$40,000",)}

    def test_restricted_value_under_negation_is_not_exempt(self) -> None:
        """"I cannot confirm $40,000" repeats the secret: negation exempts validity only."""
        result = check("I cannot confirm $40,000.", question="Is the severance $40,000?")
        assert leaked(result) == {"F3": ("$40,000",)}

    def test_value_shared_with_an_admitted_fact_is_exempt(self) -> None:
        """A draft's value that an admitted fact also holds (EMEA) is not a leak."""
        result = check("The region is EMEA.")
        assert result.ok, result.violations

    def test_scored_against_the_reference_not_the_systems_context(self) -> None:
        """A system that was shown the restricted value in its own context still leaks it."""
        context = "severance = $40,000\ndiscount = 15%"
        result = check("The severance is $40,000.", context=context)
        assert leaked(result) == {"F3": ("$40,000",)}

    def test_another_tenants_value_leaks(self) -> None:
        """A value only another tenant's fact holds is a leak coded tenant_isolation."""
        (found,) = of_kind(check("Give them 50%."), "bypass")
        assert (found.fact, found.codes) == ("G1", ("tenant_isolation",))

    def test_another_tenants_value_leaks_when_the_resolution_does_not_list_it(self) -> None:
        """Other tenants' facts are withheld from the log, not the resolution: a resolution
        that omits them (as it may) still finds the leak, coded tenant_isolation."""
        resolution = gamma.resolve(EVENTS, actor(), AT)
        own = attrs.evolve(resolution, excluded=tuple(
            x for x in resolution.excluded if x.fact != "G1"))
        found = check_response(own, LogFacts(EVENTS), question="q",
                               stated=parse_stated("Give them fifty percent."))
        assert [(v.fact, v.codes) for v in found if v.kind == "bypass"] == [
            ("G1", ("tenant_isolation",))]
        assert withheld(own, LogFacts(EVENTS)) == withheld(resolution, LogFacts(EVENTS))

    def test_a_withheld_value_in_bindings_is_a_bypass(self) -> None:
        """A binding target is searched like prose: a hidden value bound is a leak."""
        result = check("I cannot share that.", bindings={"F3": "40k"})
        assert leaked(result) == {"F3": ("40k",)}
        assert "ghost_binding" in kinds(result)

    def test_a_withheld_value_as_a_json_key_is_a_bypass(self) -> None:
        """Keys of a JSON response are searched too."""
        result = check('{"verdict": "REJECT", "answer": {"$40,000": "severance"}}')
        assert leaked(result) == {"F3": ("$40,000",)}

    @pytest.mark.parametrize("response", [
        "Apollo.", "- Apollo", "apollo is the pilot", "APOLLO", "The pilot: **Apollo**"])
    def test_a_withheld_name_is_found_at_a_sentence_start_and_in_any_case(
        self, response: str
    ) -> None:
        assert set(leaked(check(response))) == {"F12"}

    @pytest.mark.parametrize("response", ["Apollonia is unrelated.", "Apollo-like", "apollos"])
    def test_a_withheld_name_is_not_found_inside_a_longer_word(self, response: str) -> None:
        assert "F12" not in leaked(check(response))

    def test_chance_to_leak_ignores_the_question_for_hidden_facts(self) -> None:
        """A hidden value the question names can still leak; an expired one cannot."""
        events = log(A("F1", "severance", "$40,000", visibility={"roles": ["hr"]}))
        resolution = gamma.resolve(events, actor(), AT)
        assert chance_to_leak(resolution, LogFacts(events), "Is it $40,000?")
        events = log(A("F1", "code", "WEB-2026", valid_until=ts(60)))
        resolution = gamma.resolve(events, actor(), AT)
        assert chance_to_leak(resolution, LogFacts(events), "What is the code?")
        assert not chance_to_leak(resolution, LogFacts(events), "Is WEB-2026 valid?")

    def test_dependent_of_a_hidden_fact_leaks_even_negated(self) -> None:
        """dependency_restricted is a visibility code: a negated mention still leaks."""
        (found,) = of_kind(check("The bonus is not $8,000."), "bypass")
        assert (found.fact, found.codes, found.tokens) == ("F10", ("dependency_restricted",), ("$8,000",))

    def test_one_finding_per_leaking_fact(self) -> None:
        """Two leaking facts give two bypasses; a fact said twice gives one, with its token once."""
        result = check("Severance $40,000, forecast 22%, and again: $40,000.")
        assert leaked(result) == {"F3": ("$40,000",), "F4": ("22%",)}

    def test_every_code_of_a_leaking_fact_is_named(self) -> None:
        """A fact both superseded and hidden names both codes, and negation does not exempt it."""
        events = log(
            A("F1", "salary", "$90,000", visibility={"roles": ["hr"]}),
            A("F2", "salary", "$95,000", visibility={"roles": ["hr"]}),
        )
        result = validate(events, actor=actor(), at=AT, question="q", response="Not $90,000.")
        (found,) = of_kind(result, "bypass")
        assert (found.fact, found.codes) == ("F1", ("access_denied", "superseded"))


class TestUnsupported:
    def test_invented_identifier_is_unsupported(self) -> None:
        """An identifier found in no source is one unsupported violation listing it."""
        result = check("Track it under ORD-9981.")
        (found,) = of_kind(result, "unsupported")
        assert (found.fact, found.experience, found.tokens) == (None, None, ("ORD-9981",))

    def test_one_violation_lists_every_unsupported_token(self) -> None:
        """Several invented tokens give one violation with all of them, sorted."""
        assert unsupported(check("Use ORD-9981 with Globex at 37%.")) == ("37%", "Globex", "ORD-9981")

    def test_paraphrase_of_admitted_facts_gives_no_finding(self) -> None:
        """Admitted values in other words ($1.2M, April 15, 15 percent) are supported: no finding."""
        result = check("We have about $1.2M, launch on April 15 and offer 15 percent in EMEA.")
        assert result.ok, result.violations

    def test_question_supports_its_tokens(self) -> None:
        """A proper noun the question names is supported, even sentence-initial in the question."""
        assert check("Ask Paris first.", question="Paris wants a quote.").ok
        assert unsupported(check("Ask Paris first.")) == ("Paris",)

    def test_binding_value_supports_its_tokens(self) -> None:
        """A token a declared binding supplies as a value is supported."""
        bindings = {"F1": "15% from Q3-2026"}
        result = check("Use Q3-2026 pricing.", bindings=bindings)
        assert unsupported(result) == ()

    def test_reference_context_is_used_when_none_is_given(self) -> None:
        """Without a context, the reference's rendered context (its header date) supports; "" does not."""
        assert unsupported(check("As of March 2 the discount is 15%.")) == ()
        assert unsupported(check("As of March 2 the discount is 15%.", context="")) == ("March 2",)

    def test_given_context_supports_its_tokens(self) -> None:
        """The context the system was shown supports what it contains."""
        assert unsupported(check("Ask Paris first.", context="Office: Paris")) == ()

    def test_leaked_token_counts_for_both_rates(self) -> None:
        """With no context, a leaked value is also unsupported: the reference context never held it."""
        assert kinds(check("The severance is $40,000.")) == ["bypass", "unsupported"]

    def test_leaked_token_in_own_context_is_not_invented(self) -> None:
        """An ungoverned system shown the value leaks, but did not invent it."""
        assert kinds(check("The severance is $40,000.", context="severance: $40,000")) == ["bypass"]

    def test_negated_leak_counts_as_asserted(self) -> None:
        """A leaked restricted value is asserted even under negation."""
        assert unsupported(check("The severance is not $40,000.")) == ("$40,000",)

    def test_negated_invented_token_is_not_asserted(self) -> None:
        """A non-leaking token under negation is not an assertion: "not ORD-9981" is no finding."""
        assert check("The order is not ORD-9981.").ok

    def test_admitted_fact_ids_are_never_unsupported(self) -> None:
        """Citing an admitted fact id is support, even when the shown context omits ids."""
        assert check("Per F2 the discount is 15%.", context="discount 15%").ok

    def test_binding_ids_are_never_unsupported(self) -> None:
        """A non-admitted fact id is unsupported unless a binding names it."""
        assert unsupported(check("F1 gave way to F2.")) == ("F1",)
        assert check("F1 gave way to F2.", bindings={"F1": "F2"}).ok

    def test_sentence_initial_word_of_a_response_is_not_a_token(self) -> None:
        """A capitalised word opening a sentence is not asserted as a proper noun."""
        assert check("Quote 15% today. Remember the budget.").ok


class TestParseStated:
    def test_verdict_and_bindings_lines(self) -> None:
        """``VERDICT:`` and ``BINDINGS:`` lines are parsed and removed from the prose."""
        stated = parse_stated('Use the new rate.\nVERDICT: ADAPT\nBINDINGS: {"F1": "F2"}')
        assert stated == Stated(text="Use the new rate.\n\n", verdict="ADAPT", bindings=(("F1", "F2"),))

    def test_lines_are_case_insensitive_and_may_be_emphasised(self) -> None:
        """``verdict: reject`` and ``**VERDICT:** KEEP`` both state a verdict."""
        assert parse_stated("verdict: reject").verdict == "REJECT"
        assert parse_stated("**VERDICT:** KEEP").verdict == "KEEP"

    def test_text_after_the_verdict_stays_prose(self) -> None:
        """Only the marker is structure: a value after it on the line is still checked."""
        stated = parse_stated("VERDICT: KEEP, severance $40,000")
        assert stated.verdict == "KEEP"
        assert "$40,000" in stated.text
        result = check("VERDICT: KEEP, severance $40,000")
        assert leaked(result) == {"F3": ("$40,000",)}

    def test_conflicting_verdict_lines_state_none(self) -> None:
        """Two different verdict lines state no verdict (a hedge is not a decision)."""
        assert parse_stated("VERDICT: KEEP\nVERDICT: REJECT").verdict is None
        assert parse_stated("VERDICT: KEEP\nVERDICT: keep").verdict == "KEEP"

    def test_malformed_bindings_line_stays_prose(self) -> None:
        """A ``BINDINGS:`` line that is not a JSON object binds nothing and is checked as prose."""
        stated = parse_stated("BINDINGS: {F1: 12%}")
        assert stated.bindings == ()
        assert "12%" in stated.text

    def test_json_object_response(self) -> None:
        """A JSON object with ``verdict`` and ``bindings`` states them; its other strings are the prose."""
        stated = parse_stated('{"verdict": "adapt", "bindings": {"F1": "F2"}, "answer": {"text": "Use 15%"}}')
        assert (stated.verdict, stated.bindings, stated.text) == ("ADAPT", (("F1", "F2"),), "answer\ntext\nUse 15%")

    def test_json_without_verdict_or_bindings_is_prose(self) -> None:
        """A JSON object naming neither field is just text."""
        assert parse_stated('{"answer": "KEEP"}') == Stated(text='{"answer": "KEEP"}')

    def test_explicit_arguments_win(self) -> None:
        """``verdict=`` and ``bindings=`` override what the response says."""
        stated = parse_stated('VERDICT: KEEP\nBINDINGS: {"F1": "F9"}', verdict="REJECT", bindings={"F1": "F2"})
        assert (stated.verdict, stated.bindings) == ("REJECT", (("F1", "F2"),))

    def test_unknown_verdict_is_none(self) -> None:
        """A verdict outside KEEP/ADAPT/REJECT is not a verdict."""
        assert parse_stated('{"verdict": "MAYBE"}').verdict is None

    def test_non_string_binding_values_are_written_as_json(self) -> None:
        """A JSON-object binding value that is not a string is compared as its JSON text."""
        assert parse_stated('{"verdict": "ADAPT", "bindings": {"F1": 15}}').bindings == (("F1", "15"),)


class TestGhostBindings:
    def test_key_that_is_no_fact_is_a_ghost(self) -> None:
        """A binding whose key is not a fact of the log is a ghost naming that key."""
        (found,) = of_kind(check("ok", bindings={"F99": "F2"}), "ghost_binding")
        assert (found.fact, found.tokens) == ("F99", ("F99",))

    def test_target_an_admitted_fact_id_is_fine(self) -> None:
        """Binding the superseded fact to its admitted replacement is no finding."""
        assert check("VERDICT: ADAPT\nBINDINGS: {\"F1\": \"F2\"}", experience="X1").ok

    def test_target_a_fact_that_is_not_admitted_is_a_ghost(self) -> None:
        """Binding to an excluded fact's id is a ghost, even if an admitted value mentions that id."""
        events = log(A("F1", "a", "x", status="draft"), A("F2", "note", "see F1"), A("F3", "b", "y"))
        result = validate(events, actor=actor(), at=AT, question="q", response="ok",
                          bindings={"F3": "F1"})  # fmt: skip
        (found,) = of_kind(result, "ghost_binding")
        assert (found.fact, found.tokens) == ("F3", ("F1",))

    def test_target_equal_to_an_admitted_value_is_fine(self) -> None:
        """A target string-equal to an admitted value is supplied."""
        assert not of_kind(check("ok", bindings={"F1": "15%"}), "ghost_binding")

    def test_target_whose_tokens_are_all_in_one_admitted_value_is_fine(self) -> None:
        """A target all of whose tokens one admitted value holds (15 percent) is supplied."""
        assert not of_kind(check("ok", bindings={"F1": "the 15 percent rate"}), "ghost_binding")

    def test_target_tokens_spread_over_two_values_is_a_ghost(self) -> None:
        """The tokens must all come from one admitted value."""
        assert of_kind(check("ok", bindings={"F1": "15% in EMEA"}), "ghost_binding")

    def test_target_value_no_admitted_fact_supplies_is_a_ghost(self) -> None:
        """A target value found in no admitted value is a ghost naming the value."""
        (found,) = of_kind(check("ok", bindings={"F1": "12%"}), "ghost_binding")
        assert (found.fact, found.tokens) == ("F1", ("12%",))

    def test_withheld_value_as_target_is_a_ghost(self) -> None:
        """Binding to a value only an excluded fact holds is a ghost, not a supply."""
        assert of_kind(check("ok", bindings={"F1": "10%"}), "ghost_binding")


class TestVerdictMismatch:
    def test_different_verdict_is_a_mismatch_naming_experience_and_codes(self) -> None:
        """KEEP for an experience Γ rejects is a mismatch with the experience and its reasons' codes."""
        (found,) = of_kind(check("VERDICT: KEEP", experience="X2"), "verdict_mismatch")
        assert (found.fact, found.experience, found.codes) == (None, "X2", ("access_denied",))

    def test_same_verdict_is_fine(self) -> None:
        """Each of Γ's verdicts, stated, is no finding."""
        for experience, verdict in (("X1", "ADAPT"), ("X2", "REJECT"), ("X3", "KEEP")):
            assert check(f"VERDICT: {verdict}", experience=experience).ok

    def test_no_verdict_is_a_mismatch(self) -> None:
        """A response about an experience that states no verdict contradicts Γ's."""
        assert kinds(check("Sure.", experience="X3")) == ["verdict_mismatch"]

    def test_explicit_verdict_is_the_one_checked(self) -> None:
        """``verdict=`` wins over the response's line."""
        assert check("VERDICT: KEEP", experience="X2", verdict="REJECT").ok

    def test_no_experience_no_check(self) -> None:
        """Without an experience, a verdict is not compared with anything."""
        assert check("VERDICT: REJECT").ok

    def test_unknown_experience_is_an_input_error(self) -> None:
        """An experience the actor's log does not hold is an input error naming the field."""
        with pytest.raises(InputError) as err:
            check("VERDICT: KEEP", experience="X9")
        assert err.value.field == "experience"


class TestValidation:
    def test_frozen_and_ok(self) -> None:
        """A Validation is frozen; ``ok`` is true exactly when there are no violations."""
        result = check("The discount is 15%.")
        assert result.ok and result.violations == ()
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            result.violations = ()  # type: ignore[misc]
        assert not check("ORD-9981").ok

    def test_to_dict_shape(self) -> None:
        """The CLI shape: ``ok`` and violations with kind, fact, experience, tokens, codes, detail."""
        data = check("The severance is $40,000.").to_dict()
        assert data["ok"] is False
        assert [sorted(v) for v in data["violations"]] == [
            ["codes", "detail", "experience", "fact", "kind", "tokens"]] * 2
        assert data["violations"][0]["tokens"] == ["$40,000"]

    def test_log_path_and_actor_dict(self) -> None:
        """``gamma.validate`` takes a log path, an actor object and a time string."""
        result = gamma.validate(
            ROOT / "fixtures" / "examples" / "acme.jsonl",
            actor={"id": "alice", "tenant": "acme", "roles": ["sales"], "clearance": "internal",
                   "scope": "helios/launch"},
            at="2026-03-02T10:00:00Z", question="Severance?", response="It is $40,000.",
        )  # fmt: skip
        assert leaked(result) == {"F8": ("$40,000",)}

    def test_check_response_order(self) -> None:
        """``check_response`` gives bypasses, then unsupported, then ghosts, then the mismatch."""
        from gamma import resolve
        from gamma.scoring.findings import LogFacts

        stated = parse_stated('Severance $40,000.\nVERDICT: KEEP\nBINDINGS: {"F9": "12%"}')
        found = check_response(resolve(EVENTS, actor(), AT), LogFacts(EVENTS), question="q",
                               stated=stated, experience="X2")  # fmt: skip
        assert [v.kind for v in found] == ["bypass", "unsupported", "ghost_binding", "verdict_mismatch"]


class TestRecomputed:
    """Issue 29: under ``recompute`` the computed value is supported and the stale stated one
    withheld (code ``recomputed``, a validity code: negation and the question exempt it)."""

    PAPER = log(
        A("W1", "snacks.weekly", 10),
        A("T1", "snacks.two_weeks", 20, kind="derived", depends_on=["W1"],
          derivation="{snacks.weekly} * 2"),
        A("W2", "snacks.weekly", 7),
    )

    def judge(self, response: str, question: str = "How many packs for two weeks?",
              context: str | None = None) -> Validation:
        return validate(self.PAPER, actor=actor(), at=AT, question=question, response=response,
                        policy=_RECOMPUTE, context=context)

    def test_quoting_the_stale_stated_value_is_a_bypass(self) -> None:
        result = self.judge("Buy 20 packs for the two weeks.")
        assert leaked(result) == {"T1": ("20",)}
        assert of_kind(result, "bypass")[0].codes == ("recomputed",)

    def test_the_recomputed_value_is_supported(self) -> None:
        result = self.judge("Buy 14 packs for the two weeks.")
        assert result.violations == ()
        # supported by the admitted value itself, not only by the context block showing it
        assert self.judge("Buy 14 packs for the two weeks.", context="").violations == ()

    def test_a_negated_stale_value_is_exempt(self) -> None:
        assert kinds(self.judge("Not 20 any more: 14 packs.")) == []

    def test_under_the_default_policy_nothing_changes(self) -> None:
        result = validate(self.PAPER, actor=actor(), at=AT, question="How many packs?",
                          response="Buy 14 packs.")
        assert unsupported(result) == ("14",)
        assert withheld(gamma.resolve(self.PAPER, actor(), AT), LogFacts(self.PAPER)) == (
            ("T1", ("dependency_invalidated",)), ("W1", ("superseded",)),
        )


_RECOMPUTE = policy_by_name("recompute")
