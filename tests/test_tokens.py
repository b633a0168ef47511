"""Salient tokens: each test pins a rule of SPEC.md §11 that a plausible wrong
implementation (substring matching, float arithmetic, naive negation) would break."""

from __future__ import annotations

import itertools
import re
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gamma.scoring.numbers import dates, normalise, numbers, spelled
from gamma.scoring.tokens import (
    STOP_WORDS,
    TOKEN_KINDS,
    Token,
    contains,
    extract,
    find,
    matches,
    negated_at,
    value_tokens,
)


def one(text: str, *, sources: bool = False) -> Token:
    """The single token of ``text``; fails loudly when there are more or none."""
    tokens = extract(text, sources=sources)
    assert len(tokens) == 1, tokens
    return tokens[0]


def kinds(text: str, *, sources: bool = False) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in extract(text, sources=sources)]


def same(a: str, b: str) -> bool:
    return matches(one(a), one(b))


class TestAmounts:
    def test_magnitude_equals_written_out(self) -> None:
        """$1.2M is the same amount as $1,200,000 (exact arithmetic, not a string compare)."""
        assert same("It is $1.2M.", "It is $1,200,000.")

    def test_thousands_are_not_the_full_amount(self) -> None:
        """$150 and $150,000 differ, so a prefix match would be a bug."""
        assert not same("paid $150", "paid $150,000")

    def test_thousands_separator_is_one_amount(self) -> None:
        """$150,000 is one amount, never $150 plus 000."""
        assert kinds("paid $150,000 today") == [("amount", "$150,000")]

    def test_amount_without_currency_matches_any_currency(self) -> None:
        """A bare 150000 (e.g. an int fact value) matches $150,000 and EUR 150k."""
        bare = one("about 150000 in total")
        assert matches(bare, one("about $150,000"))
        assert matches(bare, one("about EUR 150k"))

    def test_different_currencies_differ(self) -> None:
        """$500 and £500 are different amounts."""
        assert not same("cost $500", "cost £500")

    def test_currency_codes_and_symbols_agree(self) -> None:
        """USD prefix, USD suffix and the dollar sign are one currency."""
        assert same("cost USD 2,500", "cost $2,500")
        assert same("cost 2,500 USD", "cost $2.5k")

    def test_euro_and_pound_symbols(self) -> None:
        """€ is EUR and £ is GBP."""
        assert same("cost €40", "cost EUR 40")
        assert same("cost £3bn", "cost GBP 3,000,000,000")

    def test_magnitude_words(self) -> None:
        """$1.2 million is $1.2M."""
        assert same("raised $1.2 million", "raised $1.2M")

    def test_decimal_values_are_exact(self) -> None:
        """0.1 + 0.2 style float error must not make $0.30 differ from $.3."""
        assert one("cost $0.30").norm == (Fraction(3, 10), "USD")
        assert same("cost $0.30", "cost $.3")

    def test_bare_magnitude_is_an_amount_not_an_identifier(self) -> None:
        """150k is an amount (150000), even though it mixes letters and digits."""
        token = one("about 150k")
        assert token.kind == "amount" and token.norm == (Fraction(150000), None)

    def test_bare_multi_digit_number_is_an_amount(self) -> None:
        """A bare number of two or more digits in a response is a salient amount."""
        assert one("within 30 days").kind == "amount"

    def test_bare_single_digit_is_not_salient_in_a_response(self) -> None:
        """'3 options' is not evidence of any fact."""
        assert extract("there are 3 options") == ()

    def test_decimal_comma_tail_does_not_split(self) -> None:
        """A malformed '1,2' yields no partial amount '1'."""
        assert extract("about €1,2 each") == ()

    def test_amount_value_is_not_a_float(self) -> None:
        """Norms hold Fractions so equality is exact."""
        assert one("cost $19.99").norm == (Fraction(1999, 100), "USD")


class TestPercentages:
    def test_percent_word_equals_sign(self) -> None:
        """22 percent is 22%."""
        assert same("rate of 22 percent", "rate of 22%")

    def test_trailing_zero_decimal(self) -> None:
        """22.0% is 22%."""
        assert same("rate of 22.0%", "rate of 22%")

    def test_percentage_is_not_an_amount(self) -> None:
        """22% does not match a bare 22: the kinds differ."""
        assert not same("rate of 22%", "age 22")

    def test_percent_inside_larger_number(self) -> None:
        """122% is 122, not 22."""
        assert not same("rate of 122%", "rate of 22%")


class TestIdentifiers:
    def test_whole_word_only(self) -> None:
        """ORD-4471 is not found inside ORD-44710."""
        assert not find(one("order ORD-4471"), extract("order ORD-44710 shipped"))

    def test_case_insensitive(self) -> None:
        """ord-4471 and ORD-4471 are the same identifier."""
        assert same("order ord-4471", "order ORD-4471")

    def test_letters_and_digits(self) -> None:
        """16GB is an identifier; a word with no digit is not."""
        assert one("has 16GB").kind == "identifier"
        assert all(t.kind != "identifier" for t in extract("has lots of RAM"))

    def test_spaced_unit_is_the_same_identifier(self) -> None:
        """32 GB and 32GB name the same capacity."""
        assert same("needs 32 GB", "needs 32GB")

    @pytest.mark.parametrize("ordinal", ["3rd", "21st", "2nd", "4th", "10am"])
    def test_ordinals_and_clock_times_are_not_identifiers(self, ordinal: str) -> None:
        """3rd mixes letters and digits but is an ordinal, not an identifier."""
        assert extract(f"the {ordinal} one") == ()

    def test_version_is_whole(self) -> None:
        """v2.1 is one identifier, so it does not match v2.3 through a shared 'v2'."""
        assert not same("run v2.1 now", "run v2.3 now")

    def test_email_and_url_are_whole_identifiers(self) -> None:
        """An address is one token, not fragments like 'v2' or '42'."""
        assert kinds("mail Jane.Doe@Example.com or https://x.com/v2?id=42.") == [
            ("identifier", "Jane.Doe@Example.com"), ("identifier", "https://x.com/v2?id=42")]
        assert same("mail jane.doe@example.com", "mail JANE.DOE@EXAMPLE.COM")

    def test_underscore_id_is_one_token(self) -> None:
        """A fact id like f_budget_2 is one identifier, not a stray amount 2."""
        assert kinds("see f_budget_2 and _Helios_ now") == [
            ("identifier", "f_budget_2"), ("proper", "Helios")]

    def test_hyphenated_id_is_one_token(self) -> None:
        """F-PF-0011 is one identifier, not F plus PF plus an amount."""
        assert kinds("see F-PF-0011 now") == [("identifier", "F-PF-0011")]


class TestDates:
    def test_written_date_matches_iso(self) -> None:
        """April 15 (no year) matches 2026-04-15."""
        assert same("due April 15", "due 2026-04-15")

    @pytest.mark.parametrize("written", [
        "15 April 2026", "Apr 15, 2026", "April 15th", "April 15th, 2026", "15th of April",
        "2026-04-15T09:30:00Z",
    ])
    def test_written_forms(self, written: str) -> None:
        """Every documented written form is the same date as the ISO form."""
        assert same(f"due {written} sharp", "due 2026-04-15")

    def test_different_years_differ(self) -> None:
        """Apr 15, 2025 is not 2026-04-15."""
        assert not same("due Apr 15, 2025", "due 2026-04-15")

    def test_month_name_is_not_also_a_proper_noun(self) -> None:
        """A date yields one date token and no proper noun for its month."""
        assert kinds("due on April 15 sharp") == [("date", "April 15")]

    def test_bare_month_is_not_a_proper_noun(self) -> None:
        """'in March' names no salient token."""
        assert extract("we met in March") == ()

    def test_date_comma_is_not_a_year_amount(self) -> None:
        """The year of 'Apr 15, 2026' is part of the date, not a separate amount."""
        assert [t.kind for t in extract("due Apr 15, 2026 sharp")] == ["date"]

    def test_month_prefix_of_a_word_is_not_a_date(self) -> None:
        """'Marching 5' is not March 5."""
        assert all(t.kind != "date" for t in extract("the Marching 5 band"))

    def test_clock_time_is_not_an_amount(self) -> None:
        """10:30 is a time of day, not the numbers 10 and 30."""
        assert extract("meet at 10:30 am") == ()


class TestProperNouns:
    def test_mid_sentence_name(self) -> None:
        """A capitalised word inside a sentence is a proper noun."""
        assert kinds("The project is Helios now.") == [("proper", "Helios")]

    def test_sentence_initial_name_is_not_a_response_token(self) -> None:
        """Helios opening a response is capitalised by position, so not salient."""
        assert extract("Helios is the codename.") == ()

    def test_sentence_initial_name_is_a_source_token(self) -> None:
        """Sources are read on all their words, so the same Helios is a token there."""
        token = one("Helios is the codename.", sources=True)
        assert token.text == "Helios" and token.sentence_initial

    def test_after_full_stop(self) -> None:
        """The first word of a second sentence is sentence-initial too."""
        assert kinds("It shipped. Helios is next.") == []

    def test_title_full_stop_does_not_start_a_sentence(self) -> None:
        """'Mr. Smith' keeps Smith as a proper noun."""
        assert kinds("ask Mr. Smith today") == [("proper", "Smith")]

    def test_line_start_is_sentence_start(self) -> None:
        """A list item's first word is capitalised by position."""
        assert kinds("Options:\n- Helios\n- the EMEA plan") == [("proper", "EMEA")]

    def test_after_colon_is_not_sentence_start(self) -> None:
        """'Region: EMEA' states EMEA as a value."""
        assert kinds("Region: EMEA") == [("proper", "EMEA")]

    @pytest.mark.parametrize("word", ["Monday", "I", "KEEP", "Dr", "The", "OK", "Yes", "May"])
    def test_stop_list(self, word: str) -> None:
        """Weekdays, I, verdict words, titles and sentence words are never proper nouns."""
        assert word.casefold() in STOP_WORDS
        assert extract(f"so then {word} said it") == ()

    def test_stop_list_is_published(self) -> None:
        """SPEC.md §11.5 lists exactly STOP_WORDS."""
        doc = (Path(__file__).parent.parent / "SPEC.md").read_text("utf-8")
        section = doc.split("### 11.5 Published stop list", 1)[1].split("\n### ", 1)[0]
        listed = re.search(r"sentence words:\n\n(.*?)\n\n", section, re.DOTALL)
        assert listed is not None
        assert set(re.split(r",\s*", listed.group(1).strip())) == set(STOP_WORDS)

    def test_case_sensitive(self) -> None:
        """Proper nouns match case-sensitively: 'Apple' is not 'APPLE'."""
        assert not same("bought from Apple", "bought from APPLE")

    def test_acronym(self) -> None:
        """An all-capital acronym mid-sentence is a proper noun."""
        assert one("sold in EMEA only").norm == "EMEA"

    def test_possessive(self) -> None:
        """Helios's matches Helios."""
        assert same("it is Helios's budget", "it is Helios")

    def test_contraction_is_not_a_name(self) -> None:
        """A capitalised contraction such as Don't is a sentence word, not a name."""
        assert extract('he said "Don\'t" loudly') == ()

    def test_lowercase_words_are_not_salient(self) -> None:
        """Ordinary lower-case prose yields nothing."""
        assert extract("the budget was cut by the board") == ()

    def test_entity_in_question_is_still_extracted(self) -> None:
        """Exempting question tokens is the caller's job: the token is still returned."""
        question = "What is the budget for Helios?"
        assert one(question).text == "Helios"


class TestNegation:
    def test_refusal_has_no_token(self) -> None:
        """The paper's refusal names no salient token at all."""
        assert extract("I can't share the severance figure") == ()

    def test_not_before(self) -> None:
        """'not' within three words before negates."""
        assert one("It is not 22% any more").negated

    def test_no_longer(self) -> None:
        """'no longer' negates."""
        assert one("no longer 22%").negated

    def test_no_longer_counts_as_one_word(self) -> None:
        """'no longer' reaches as far as a one-word cue would."""
        assert one("it is no longer at the 22% level").negated

    def test_cue_after_token_does_not_negate(self) -> None:
        """A cue after the token belongs to what follows, not to the token."""
        assert not one("22% is not what I'd pick but it is the figure").negated

    def test_now_is_not_no(self) -> None:
        """A bare 'no' inside 'now' is not a cue."""
        assert not one("The rate is now 22%").negated

    def test_know_is_not_no(self) -> None:
        """A bare 'no' inside 'know' is not a cue."""
        assert not one("as you know 22% applies").negated

    def test_date_negated(self) -> None:
        """'not March 14 any more' negates the date."""
        token = one("not March 14 any more")
        assert token.kind == "date" and token.negated

    def test_beyond_three_words(self) -> None:
        """A cue four words back is out of reach."""
        assert not one("I can't tell you it's 22%").negated

    def test_three_words_is_within_reach(self) -> None:
        """A cue exactly three words back still negates; four words back does not."""
        assert one("it is not really quite 22%").negated
        assert not one("it is not really just quite 22%").negated

    def test_not_yet_is_a_clause_break(self) -> None:
        """'yet' ends the clause as DESIGN lists it, so 'not yet 22%' states 22%."""
        assert not one("it is not yet 22%").negated

    def test_line_break_ends_clause(self) -> None:
        """A cue on one list line does not reach the next line."""
        assert not one("- not applicable\n- 22%").negated

    def test_comma_ends_clause(self) -> None:
        """'No, it is 22%' states 22%."""
        assert not one("No, it is 22%").negated

    @pytest.mark.parametrize("word", ["but", "however", "although", "yet", "instead"])
    def test_clause_words_end_clause(self, word: str) -> None:
        """A clause word between cue and token ends the cue's reach."""
        assert not one(f"not {word} 22%").negated

    @pytest.mark.parametrize("cue", [
        "not", "no", "never", "cannot", "without", "none", "isn't", "won't", "don\u2019t",
    ])
    def test_cues(self, cue: str) -> None:
        """Every listed cue negates a token right after it."""
        assert one(f"it {cue} 22%").negated

    def test_thousands_comma_is_not_a_clause_end(self) -> None:
        """The comma inside $150,000 does not end the clause for the next token."""
        tokens = extract("not $150,000 or $120,000")
        assert [t.negated for t in tokens] == [True, True]

    def test_but_lifts_negation_for_the_replacement(self) -> None:
        """'not X but Y' negates X and states Y."""
        tokens = extract("It is not $200,000 but $120,000")
        assert [t.negated for t in tokens] == [True, False]

    def test_negated_at_agrees_with_tokens(self) -> None:
        """negated_at applies the token rule to an arbitrary span start."""
        text = "It is not 22% but 25% now"
        for token in extract(text):
            assert negated_at(text, token.start) == token.negated


class TestValueTokens:
    def test_int_of_two_digits_is_an_amount(self) -> None:
        """An integer fact value 150000 is an amount without currency."""
        (token,) = value_tokens(150000)
        assert matches(token, one("about $150,000"))

    def test_single_digit_int_has_no_tokens(self) -> None:
        """An int value 7 is too common to count as a leak."""
        assert value_tokens(7) == ()

    def test_bool_has_no_tokens(self) -> None:
        """True is an int in Python but yields no tokens."""
        assert value_tokens(True) == () and value_tokens(False) == ()

    def test_single_word_value_is_a_token(self) -> None:
        """'Helios' as a whole value is a token although it starts the text."""
        (token,) = value_tokens("Helios")
        assert matches(token, one("the codename is Helios"))

    def test_stop_word_value_has_no_tokens(self) -> None:
        """A value 'Yes' yields nothing: no response could produce a matching token."""
        assert value_tokens("Yes") == ()

    def test_string_value_plain_numbers(self) -> None:
        """A string value is read as a source: even a single digit is a token."""
        assert [t.kind for t in value_tokens("7")] == ["amount"]

    def test_rejects_other_types(self) -> None:
        """A list is not a fact value."""
        with pytest.raises(TypeError):
            value_tokens([1, 2])  # type: ignore[arg-type]


class TestApi:
    def test_kinds(self) -> None:
        """Only the five documented kinds appear."""
        text = "On 2026-04-15 ORD-4471 cost $5 or 22% at Helios."
        assert {t.kind for t in extract(text)} == set(TOKEN_KINDS)

    def test_text_order_and_offsets(self) -> None:
        """Tokens come in text order with offsets that slice back to their text."""
        text = "Helios paid $5,000 to Zeus on 2026-04-15 for ORD-1 and 22%."
        tokens = extract(text, sources=True)
        assert [t.start for t in tokens] == sorted(t.start for t in tokens)
        assert all(text[t.start:t.end] == t.text for t in tokens)

    def test_find_skip_negated(self) -> None:
        """find can ignore negated appearances."""
        response = extract("It is not 22% any more")
        assert find(one("rate 22%"), response)
        assert not find(one("rate 22%"), response, skip_negated=True)
        assert contains(response, one("rate 22%"))

    def test_token_is_frozen(self) -> None:
        """Tokens are values."""
        token = one("rate 22%")
        with pytest.raises(AttributeError):
            token.text = "x"  # type: ignore[misc]

    def test_rejects_non_str(self) -> None:
        """extract names the wrong type."""
        with pytest.raises(TypeError, match="str"):
            extract(b"22%")  # type: ignore[arg-type]

    def test_negated_at_range(self) -> None:
        """negated_at refuses an offset outside the text."""
        with pytest.raises(ValueError, match="start"):
            negated_at("abc", 9)


class TestRobustness:
    def test_unicode(self) -> None:
        """Accents, CJK, Arabic-Indic digits and dashes do not crash and read sensibly."""
        tokens = extract("Naïve café — 東京 ٣٣ déjà vu with Émile's plan, £5 \u2010 ok")
        assert [(t.kind, t.norm) for t in tokens] == [
            ("proper", "Émile"), ("amount", (Fraction(5), "GBP"))]

    @given(st.text())
    def test_never_crashes_and_offsets_hold(self, text: str) -> None:
        """Any text yields ordered, non-overlapping tokens that slice back to their text."""
        tokens = extract(text)
        assert all(text[t.start:t.end] == t.text for t in tokens)
        assert all(a.end <= b.start for a, b in itertools.pairwise(tokens))
        assert extract(text) == tokens

    @given(st.text())
    def test_negated_at_is_the_token_rule(self, text: str) -> None:
        """negated_at at a token's start gives the token's own negation."""
        assert all(negated_at(text, t.start) == t.negated for t in extract(text))

    @given(st.text())
    def test_sources_is_a_superset(self, text: str) -> None:
        """Reading a text as a source never loses a token."""
        assert set(extract(text)) <= set(extract(text, sources=True))

    @given(st.integers(min_value=10, max_value=10**15))
    def test_int_values_match_their_formatted_forms(self, n: int) -> None:
        """An int fact value matches $n,nnn, n USD and the plain digits."""
        (value,) = value_tokens(n)
        for written in (f"cost ${n:,} ok", f"cost {n} USD ok", f"cost {n} ok"):
            assert matches(value, one(written))

    @given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["k", "M", "bn"]))
    def test_magnitudes(self, n: int, mag: str) -> None:
        """$nk, $nM and $nbn equal their written-out values."""
        factor = {"k": 10**3, "M": 10**6, "bn": 10**9}[mag]
        assert same(f"cost ${n}{mag} ok", f"cost ${n * factor:,} ok")


# --- numbers and dates for the withheld-value search (SPEC.md §11.8) -------------------



def _read(text: str) -> list[tuple[str, set[Fraction], str | None, bool]]:
    norm = normalise(text)
    return [(norm[n.start:n.end], set(n.values), n.currency, n.percent) for n in numbers(norm)]


class TestNormalise:
    def test_full_width_and_arabic_indic_digits_become_ascii(self) -> None:
        assert normalise("\uff04\uff14\uff10\uff0c\uff10\uff10\uff10") == "$40,000"
        assert normalise("\u0664\u0660\u066c\u0660\u0660\u0660") == "40,000"
        assert normalise("\u0662\u0662\u066a") == "22%"

    def test_format_characters_are_removed(self) -> None:
        assert normalise("$40\u200b,000 Ini\u200dtech\u00ad") == "$40,000 Initech"

    def test_a_number_broken_after_a_separator_is_joined_but_not_a_bare_break(self) -> None:
        assert normalise("$40,\n000") == "$40,000"
        assert normalise("40\n,000") == "40,000"
        assert normalise("40\n000") == "40\n000"


class TestNumbers:
    @pytest.mark.parametrize("text", [
        "$40000", "40,000 dollars", "40k", "$0.04M", "USD 40,000.00", "40 000", "40'000",
        "4.0e4", "$40,000ish", "$40k+", "40 thousand", "40 grand", "40.000,00", "40000 USD",
    ])
    def test_every_form_of_forty_thousand_reads_40000(self, text: str) -> None:
        (found,) = _read(text)
        assert Fraction(40000) in found[1], found

    def test_a_dot_with_one_group_is_read_both_ways_a_comma_one_way(self) -> None:
        assert _read("40.000")[0][1] == {Fraction(40000), Fraction(40)}
        assert _read("40,000")[0][1] == {Fraction(40000)}
        assert _read("40,5")[0][1] == {Fraction(81, 2)}

    def test_a_number_stands_whole(self) -> None:
        """No substring decides: "18%" holds no 8, "$40,0001" no 40000, "ORD9981" no number."""
        assert _read("18%") == [("18%", {Fraction(18)}, None, True)]
        assert Fraction(40000) not in _read("$40,0001")[0][1]
        assert _read("ORD9981") == []

    def test_currency_on_either_side_and_percent_words(self) -> None:
        assert _read("40 000 $")[0][2] == "USD"
        assert _read("€5")[0][2] == "EUR"
        assert _read("22 per cent")[0][3] and _read("22 pct")[0][3]

    def test_years_in_a_date_context_are_dated(self) -> None:
        norm = "in 2026, the 2026 report, 20.04.2026"
        found = numbers(norm)
        assert [(n.year, n.dated) for n in found] == [(True, True), (True, False)]


class TestSpelled:
    @pytest.mark.parametrize(("text", "value", "percent", "currency"), [
        ("forty thousand", 40000, False, None),
        ("twenty-two percent", 22, True, None),
        ("Twenty two per cent", 22, True, None),
        ("three hundred and twelve", 312, False, None),
        ("a thousand dollars", 1000, False, "USD"),
        ("eight percent", 8, True, None),
        ("seventy-five thousand five hundred", 75500, False, None),
    ])
    def test_parses(self, text: str, value: int, percent: bool, currency: str | None) -> None:
        (n,) = spelled(text)
        assert (set(n.values), n.percent, n.currency) == ({Fraction(value)}, percent, currency)

    @pytest.mark.parametrize("text", ["one", "forty", "twelve apples", "one two", "ten ten"])
    def test_a_lone_or_unparsable_run_is_no_number(self, text: str) -> None:
        assert spelled(text) == []


class TestDateReadings:
    @pytest.mark.parametrize("text", [
        "20.04.2026", "04/20/2026", "20/04/2026", "2026/04/20", "2026-04-20T09:00Z",
        "April 20, 2026", "20 April 2026", "20th of April 2026", "20-04-2026",
    ])
    def test_unambiguous_forms_of_april_20(self, text: str) -> None:
        assert [d.ymd for d in dates(text)] == [(2026, 4, 20)]

    def test_an_ambiguous_order_is_no_date(self) -> None:
        assert [d.ymd for d in dates("04/05/2026")] == [(None, 0, 0)]

    def test_a_date_without_year(self) -> None:
        assert [d.ymd for d in dates("Apr. 20")] == [(None, 4, 20)]


class TestMoreReadings:
    def test_look_alike_letters_and_the_minus_sign_are_folded(self) -> None:
        assert normalise("\u0399nitech \u0456 ORD\u22129981") == "Initech i ORD-9981"

    def test_forty_grand_spelled(self) -> None:
        assert [set(n.values) for n in spelled("forty grand")] == [{Fraction(40000)}]

    @pytest.mark.parametrize(("text", "ymd"), [
        ("4/20", (None, 4, 20)), ("20/4", (None, 4, 20)), ("4/5", (None, 0, 0)),
        ("50/50", (None, 0, 0)),
    ])
    def test_a_yearless_slash_date_is_read_only_when_unambiguous(
        self, text: str, ymd: tuple[int | None, int, int]
    ) -> None:
        assert [d.ymd for d in dates(text)] == [ymd]
