"""Closed-pool grading: each test pins a rule a substring- or first-match grader gets wrong."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gamma.scoring.grading import GRADES, Pool, grade, mentions

BUDGET = Pool(
    gold=("$120,000", "120k"),
    drift=("$200,000",),
    distractors=("$150,000", "$50,000"),
)
RATE = Pool(gold=("22%",), drift=("18%",), distractors=("122%",))
REFUSAL = Pool(gold=("no current value",), drift=("22%",))


class TestGrades:
    def test_gold(self) -> None:
        """Naming the current value is gold."""
        assert grade("The remaining budget is $120,000.", BUDGET) == "gold"

    def test_two_gold_aliases_are_one_answer(self) -> None:
        """Gold entries are aliases, so naming two of them is still gold."""
        assert grade("It is $120,000 (120k).", BUDGET) == "gold"

    def test_drift(self) -> None:
        """Naming only the superseded value is drift."""
        assert grade("You have $200,000 available.", BUDGET) == "drift"

    def test_other(self) -> None:
        """Naming only a distractor is other."""
        assert grade("You approved $150,000.", BUDGET) == "other"

    def test_off_pool(self) -> None:
        """Naming nothing in the pool is off_pool."""
        assert grade("I am not sure what the budget is.", BUDGET) == "off_pool"

    def test_gold_and_drift_is_ambiguous(self) -> None:
        """Hedging between the current and the stale value is ambiguous, not gold."""
        assert grade("Either $200,000 or $120,000.", BUDGET) == "ambiguous"

    def test_two_distractors_are_ambiguous(self) -> None:
        """Two distinct non-gold answers are two answers."""
        assert grade("Maybe $150,000 or $50,000.", BUDGET) == "ambiguous"

    def test_negated_drift_plus_gold_is_gold(self) -> None:
        """'not $200,000 any more' rejects the stale value; only gold is named."""
        assert grade("It is not $200,000 any more; it is $120,000.", BUDGET) == "gold"

    def test_but_ends_negation(self) -> None:
        """In 'not X but Y' only Y is named."""
        assert grade("It's not $200,000 but $120,000.", BUDGET) == "gold"

    def test_negated_gold_alone_is_off_pool(self) -> None:
        """Denying the right answer does not name it."""
        assert grade("It is not 22% any more.", RATE) == "off_pool"

    def test_repeated_drift_is_one_answer(self) -> None:
        """The same option named twice is still one answer."""
        assert grade("18%. Yes, 18%.", RATE) == "drift"

    def test_grades_are_documented(self) -> None:
        """grade only returns the five documented values."""
        for answer in ("22%", "18%", "122%", "none", "22% or 18%"):
            assert grade(answer, RATE) in GRADES


class TestWholeWords:
    def test_percent_not_inside_larger_number(self) -> None:
        """22% does not match inside 122%."""
        assert grade("The rate is 122%.", RATE) == "other"

    def test_amount_not_inside_larger_amount(self) -> None:
        """$150 does not match inside $150,000."""
        pool = Pool(gold=("$150",))
        assert grade("It costs $150,000.", pool) == "off_pool"
        assert grade("It costs $150.", pool) == "gold"

    def test_amount_not_inside_longer_digits(self) -> None:
        """$120,000 does not match the prefix of $120,0000 nor the tail of $1,120,000."""
        assert grade("It is $1,120,000.", BUDGET) == "off_pool"

    def test_identifier_not_inside_longer_identifier(self) -> None:
        """ORD-4471 does not match inside ORD-44710 or ORD-4471-B."""
        pool = Pool(gold=("ORD-4471",))
        assert grade("Order ORD-44710 shipped.", pool) == "off_pool"
        assert grade("Order ORD-4471-B shipped.", pool) == "off_pool"
        assert grade("Order ORD-4471_B shipped.", pool) == "off_pool"
        assert grade("Order ORD-4471 shipped.", pool) == "gold"

    def test_word_not_inside_word(self) -> None:
        """An option 'Helios' is not found in 'Heliosphere'."""
        assert grade("The Heliosphere team.", Pool(gold=("Helios",))) == "off_pool"

    def test_case_insensitive(self) -> None:
        """Options match regardless of case."""
        assert grade("project HELIOS won", Pool(gold=("Helios",))) == "gold"

    def test_whitespace_in_option_is_flexible(self) -> None:
        """A line break inside a multi-word option still matches."""
        assert grade("There is no\ncurrent value.", REFUSAL) == "gold"

    def test_possessive_is_a_mention(self) -> None:
        """Helios's names Helios."""
        assert grade("It is Helios's call.", Pool(gold=("Helios",))) == "gold"


class TestLongestFirst:
    def test_longer_option_consumes_shorter_inside_it(self) -> None:
        """'not approved' (gold) is not also a mention of 'approved' (drift)."""
        pool = Pool(gold=("not approved",), drift=("approved",))
        assert grade("The request is not approved.", pool) == "gold"

    def test_refusal_option_is_plain_text(self) -> None:
        """A gold refusal phrase starting with 'no' is an option, not a negation."""
        assert grade("There is no current value.", REFUSAL) == "gold"

    def test_refusal_and_drift_is_ambiguous(self) -> None:
        """Refusing but also stating the stale value names two answers."""
        assert grade("There is no current value; it used to be 22%.", REFUSAL) == "ambiguous"

    def test_refusal_with_negated_drift_is_gold(self) -> None:
        """Refusing and denying the stale value is gold."""
        assert grade("There is no current value; it is not 22% any more.", REFUSAL) == "gold"

    def test_long_option_wins_regardless_of_category_order(self) -> None:
        """'New York City' (distractor) consumes 'New York' (gold)."""
        pool = Pool(gold=("New York",), distractors=("New York City",))
        assert grade("It is in New York City.", pool) == "other"


class TestMentions:
    def test_text_order(self) -> None:
        """mentions lists (category, option) in order of first appearance."""
        got = mentions("Either $200,000 or $120,000 or 120k, not $50,000.", BUDGET)
        assert got == (("drift", "$200,000"), ("gold", "$120,000"), ("gold", "120k"))

    def test_each_once(self) -> None:
        """An option named twice is listed once."""
        assert mentions("22%, yes 22%", RATE) == (("gold", "22%"),)

    def test_rejects_non_str(self) -> None:
        """The answer must be text."""
        with pytest.raises(TypeError):
            mentions(None, RATE)  # type: ignore[arg-type]


class TestPool:
    def test_from_json(self) -> None:
        """The JSON form builds the same pool; a string stands for a one-item list."""
        pool = Pool.from_json({"gold": "22%", "drift": ["18%"], "distractors": ["122%"]})
        assert pool == RATE

    def test_from_json_unknown_field(self) -> None:
        """A misspelt field is named, not silently ignored."""
        with pytest.raises(ValueError, match="distractor"):
            Pool.from_json({"gold": ["a"], "distractor": ["b"]})

    def test_from_json_requires_gold(self) -> None:
        """A pool without gold cannot grade anything gold."""
        with pytest.raises(ValueError, match="gold"):
            Pool.from_json({"drift": ["a"]})

    def test_from_json_rejects_non_strings(self) -> None:
        """Options are strings: a number must be written as the text it matches."""
        with pytest.raises(ValueError, match="drift"):
            Pool.from_json({"gold": ["a"], "drift": [22]})

    def test_from_json_rejects_non_object(self) -> None:
        """A list is not a pool."""
        with pytest.raises(ValueError, match="object"):
            Pool.from_json(["22%"])

    def test_empty_gold(self) -> None:
        """A pool needs at least one gold option."""
        with pytest.raises(ValueError, match="gold"):
            Pool(gold=())

    def test_blank_option(self) -> None:
        """A blank option would match everywhere."""
        with pytest.raises(ValueError, match="non-empty"):
            Pool(gold=("  ",))

    def test_option_in_two_categories(self) -> None:
        """The same option as gold and drift has no defined grade."""
        with pytest.raises(ValueError, match="both"):
            Pool(gold=("no current value",), drift=("No  current value",))

    def test_option_in_two_categories_case_insensitive(self) -> None:
        """Options clash case-insensitively, as they are matched."""
        with pytest.raises(ValueError, match="both"):
            Pool(gold=("Helios",), distractors=("HELIOS",))


class TestProperties:
    @given(st.text())
    def test_grade_is_total_and_deterministic(self, answer: str) -> None:
        """Any text grades to one documented value, the same each time."""
        assert grade(answer, BUDGET) in GRADES
        assert grade(answer, BUDGET) == grade(answer, BUDGET)

    @given(st.sampled_from(["$120,000", "120k"]), st.sampled_from(["$120,000", "120k"]))
    def test_any_gold_aliases_grade_gold(self, a: str, b: str) -> None:
        """Any combination of gold aliases is gold."""
        assert grade(f"It is {a}, that is {b}.", BUDGET) == "gold"

    @given(st.text(min_size=1).filter(lambda s: s.strip()))
    def test_an_option_names_itself(self, option: str) -> None:
        """Any non-blank option, given verbatim as the whole answer, grades gold."""
        assert grade(option, Pool(gold=(option,))) == "gold"
