"""The derivation language of derived facts (issue 29): grammar, exact values, limits, failures.

The property tests compare the evaluator with an independent one written here over
``fractions.Fraction`` (exact), rounded by the stated rule (half-even to 18 places after each
``*`` and ``/``), on trees generated here and rendered to text here.
"""

from __future__ import annotations

import decimal
import pickle
import sys
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gamma.core.terms.derivation import (
    MAX_DIGITS,
    MAX_LENGTH,
    MAX_NESTING,
    SCALE,
    Derivation,
    DerivationError,
    DerivationLimitError,
    Failure,
    evaluate,
    parse_derivation,
)
from gamma.core.terms.errors import InputError, LimitError


def run(text: str, values: dict[str, Any] | None = None) -> object:
    return evaluate(parse_derivation(text), values or {})


def code(text: str, values: dict[str, Any] | None = None) -> str:
    result = run(text, values)
    assert isinstance(result, Failure), result
    return result.code


def parse_error(text: str) -> DerivationError:
    with pytest.raises(DerivationError) as caught:
        parse_derivation(text)
    return caught.value


GOLDEN = [
    # the paper's example: two weeks of packs, recomputed when the weekly amount changes
    ("{weekly} * 2", {"weekly": 10}, 20),
    ("{weekly} * 2", {"weekly": 7}, 14),
    ("{income.take_home} * 30%", {"income.take_home": 6000}, 1800),
    ("{income.take_home} * 30%", {"income.take_home": 5200}, 1560),
    ("{salary} * 30%", {"salary": "4123.45"}, "1237.035"),
    ("round({salary} * 0.3, 2)", {"salary": "4123.45"}, "1237.04"),
    ("round({salary} * 0.3, 2)", {"salary": "4123.35"}, 1237),
    ("{F1} + {f-3a9} + {snacks.weekly}", {"F1": 1, "f-3a9": "2.5", "snacks.weekly": "-0.5"}, 3),
    ("{rate} * 100", {"rate": "12.5%"}, "12.5"),
    ("{rate}", {"rate": "30%"}, "0.3"),
    ("{x}", {"x": "0.50"}, "0.5"),
    ("{x}", {"x": "-0"}, 0),
    # exact decimals, no float
    ("0.1 + 0.2", {}, "0.3"),
    ("0.1 + 0.2 == 0.3", {}, True),
    ("1.10 * 3", {}, "3.3"),
    ("3 * 1.5 - 4.5", {}, 0),
    # division: exact when it terminates, else half-even at 18 places
    ("10 / 4", {}, "2.5"),
    ("1 / 3", {}, "0.333333333333333333"),
    ("2 / 3", {}, "0.666666666666666667"),
    ("-2 / 3", {}, "-0.666666666666666667"),
    ("1 / 3 * 3", {}, "0.999999999999999999"),
    ("round(1 / 3 * 3, 2)", {}, 1),
    ("1 / 8000000000000000000", {}, 0),  # 1.25e-19: below half the last place
    ("6 / 8000000000000000000", {}, "0.000000000000000001"),  # 7.5e-19: above half
    ("1 / 2000000000000000000", {}, 0),  # 5e-19: a tie, to the even 0
    ("3 / 2000000000000000000", {}, "0.000000000000000002"),  # 1.5e-18: a tie, to the even 2
    # half-even rounding
    ("round(2.5, 0)", {}, 2),
    ("round(3.5, 0)", {}, 4),
    ("round(-2.5, 0)", {}, -2),
    ("round(-3.5, 0)", {}, -4),
    ("round(0.125, 2)", {}, "0.12"),
    ("round(0.135, 2)", {}, "0.14"),
    ("round(2.675, 2)", {}, "2.68"),  # a float would say 2.67
    ("round(7, 18)", {}, 7),
    # precedence and associativity
    ("1 + 2 * 3", {}, 7),
    ("(1 + 2) * 3", {}, 9),
    ("10 - 2 - 3", {}, 5),
    ("12 / 2 / 3", {}, 2),
    ("-2 * 3 + 10", {}, 4),
    ("--2", {}, 2),
    ("-{x} - -{x}", {"x": 5}, 0),
    # min, max, if, comparisons, booleans
    ("min({a}, {b}, 3)", {"a": 5, "b": "2.5"}, "2.5"),
    ("max({a}, {b}, 3)", {"a": 5, "b": "2.5"}, 5),
    ("max(-1, -2)", {}, -1),
    ("if({hours} >= 5000, 3, if({hours} >= 2000, 2, 1))", {"hours": 4250}, 2),
    ("if({hours} >= 5000, 3, if({hours} >= 2000, 2, 1))", {"hours": 7550}, 3),
    ("if({hours} >= 5000, 3, if({hours} >= 2000, 2, 1))", {"hours": "1999.99"}, 1),
    ('if({amount} < 1900, "checking", "travel fund")', {"amount": 1439}, "checking"),
    ("1 < 2", {}, True),
    ("2 <= 2", {}, True),
    ("2 > 2", {}, False),
    ("2 >= 3", {}, False),
    ("2 != 2.0", {}, False),
    ("30% == 0.3", {}, True),
    ('{x} == "30%"', {"x": "0.30"}, True),
    ('{tier} == "gold"', {"tier": "gold"}, True),
    ('{tier} != "gold"', {"tier": "Gold"}, True),
    ("{flag} == true", {"flag": False}, False),
    ("not {flag} and 1 < 2", {"flag": False}, True),
    ("{a} > 1 or {b} > 1", {"a": 2, "b": "text"}, True),  # short-circuit: b never read
    ("{a} > 1 and {b} > 1", {"a": 0, "b": "text"}, False),
    ("if({n} == 0, 0, {t} / {n})", {"n": 0, "t": 5}, 0),  # the branch not taken is not evaluated
    ('if(true, "a", "b")', {}, "a"),
    # results: whole numbers are ints within ±(2**53−1), text beyond; booleans stay booleans
    ("9007199254740991 + 0", {}, 9007199254740991),
    ("9007199254740991 + 1", {}, "9007199254740992"),
    ("-9007199254740991 - 1", {}, "-9007199254740992"),
    ("{x} * 1", {"x": "123456789012345678901234567890"}, "123456789012345678901234567890"),
]


class TestGolden:
    """Expression and inputs in, the stated fact value out."""

    @pytest.mark.parametrize(("text", "values", "expected"), GOLDEN, ids=[g[0] for g in GOLDEN])
    def test_value(self, text: str, values: dict[str, Any], expected: object) -> None:
        """Each result equals the stated value and has its stated type (never a float)."""
        result = run(text, values)
        assert result == expected
        assert type(result) is type(expected)

    def test_chain_is_the_callers_job(self) -> None:
        """A result fed to the next link reads back as the same number (pay → savings → fund)."""
        savings = run("{pay} * 30%", {"pay": "4123.45"})
        fund = run("{savings} * 6", {"savings": savings})
        assert (savings, fund) == ("1237.035", "7422.21")


class TestInputs:
    """Which values are numbers, which are text, and what is refused."""

    @pytest.mark.parametrize(
        "text_value",
        [
            "$1,200",
            "1,200",
            "10 packs",
            "1e3",
            "NaN",
            "Infinity",
            "+5",
            " 5",
            "5 ",
            "007",
            "1.",
            ".5",
            "−5",
            "٣",
            "0x10",
            "5%%",
            "",
        ],
    )
    def test_other_text_is_not_a_number(self, text_value: str) -> None:
        """Currency, grouping, units, exponents, signs other than '-' and padding stay text,
        so arithmetic on them is a type mismatch (fail closed), never a guess."""
        assert code("{x} + 1", {"x": text_value}) == "type_mismatch"
        assert run('{x} == "anything else"', {"x": text_value}) is False

    def test_float_input_is_refused(self) -> None:
        """A float is never a value: a type mismatch, not a rounding."""
        assert code("{x} + 1", {"x": 0.5}) == "type_mismatch"
        assert code("{x}", {"x": None}) == "type_mismatch"

    def test_boolean_is_not_a_number(self) -> None:
        """True is not 1."""
        assert code("{x} + 1", {"x": True}) == "type_mismatch"
        assert code("{x} == 1", {"x": True}) == "type_mismatch"

    def test_missing_input(self) -> None:
        """An input without a value is a failure naming it and its column."""
        result = run("1 + {weekly}", {})
        assert result == Failure("missing_input", "column 5: no value for the input {weekly}", 5)

    def test_number_digits(self) -> None:
        """An input number has at most 40 digits and at most 18 after the point (after a %)."""
        assert run("{x}", {"x": "9" * MAX_DIGITS}) == "9" * MAX_DIGITS
        assert code("{x}", {"x": "1" + "0" * MAX_DIGITS}) == "out_of_range"
        assert run("{x}", {"x": "0." + "0" * 17 + "1"}) == "0." + "0" * 17 + "1"
        assert code("{x}", {"x": "0." + "0" * 18 + "1"}) == "out_of_range"
        assert run("{x}", {"x": "0." + "0" * 15 + "1%"}) == "0." + "0" * 17 + "1"
        assert code("{x}", {"x": "0." + "0" * 16 + "1%"}) == "out_of_range"
        assert run("{x}", {"x": "0." + "1" + "0" * 30}) == "0.1"  # trailing zeros are exact
        assert code("{x}", {"x": 10**MAX_DIGITS}) == "out_of_range"
        assert code("{x}", {"x": "1" * 60_000}) == "out_of_range"
        assert code('"' + "1" * (MAX_DIGITS + 1) + '"') == "out_of_range"  # a quoted literal


class TestFailures:
    """Evaluation failures are returned, typed and located, never raised."""

    @pytest.mark.parametrize(
        ("text", "values", "expected"),
        [
            ("{a} / {b}", {"a": 1, "b": 0}, ("division_by_zero", 5)),
            ("{a} / ({b} - {b})", {"a": 1, "b": "2.5"}, ("division_by_zero", 5)),
            ("{a} + 1", {"a": "abc"}, ("type_mismatch", 5)),
            ("-{a}", {"a": "abc"}, ("type_mismatch", 1)),
            ("{a} < 1", {"a": "abc"}, ("type_mismatch", 5)),
            ('{a} < "b"', {"a": "abc"}, ("type_mismatch", 5)),
            ("{a} == 1", {"a": "abc"}, ("type_mismatch", 5)),
            ("min({a}, 1)", {"a": "abc"}, ("type_mismatch", 1)),
            ("if({a}, 1, 2)", {"a": 1}, ("type_mismatch", 1)),
            ("not {a}", {"a": 1}, ("type_mismatch", 1)),
            ("{a} and true", {"a": 1}, ("type_mismatch", 5)),
            ("true + 1", {}, ("type_mismatch", 6)),
            ("{a} * {a}", {"a": "1" + "0" * 20}, ("out_of_range", 5)),
            ("{a} + 1", {"a": "9" * 40}, ("out_of_range", 5)),
            ("-{a} - 1", {"a": "9" * 40}, ("out_of_range", 6)),
            ("{a} / 0.000000000000000001", {"a": "1" + "0" * 22}, ("out_of_range", 5)),
            ("round({a} + 0.5, 0)", {"a": "9" * 40}, ("out_of_range", 1)),
            ("{a} / 0 + {missing}", {"a": 1}, ("division_by_zero", 5)),  # the first failure wins
        ],
    )
    def test_failure(self, text: str, values: dict[str, Any], expected: tuple[str, int]) -> None:
        """Each failure has its stated code and the column of the operator or input that failed."""
        result = run(text, values)
        assert isinstance(result, Failure)
        assert (result.code, result.column) == expected
        assert result.detail.startswith(f"column {expected[1]}: ")


class TestParseErrors:
    """Parse errors are input errors naming the column and the offending token."""

    @pytest.mark.parametrize(
        ("text", "column", "token"),
        [
            ("1 +", 4, ""),
            ("{a} * * 2", 7, "*"),
            ("(1 + 2", 7, ""),
            ("1 + 2)", 6, ")"),
            ("{a} {b}", 5, "{b}"),
            ("{a", 1, "{a"),
            ('"abc', 1, '"abc'),
            ("{}", 1, "{}"),
            ("{a{b}", 3, "{"),
            ("{a\\q}", 3, "\\q"),
            ("1 < 2 < 3", 7, "<"),
            ("min(1)", 1, "min"),
            ("if(true, 1)", 1, "if"),
            ("round(1)", 1, "round"),
            ("round(1, -1)", 10, "-1"),
            ("round(1, 1.5)", 10, "1.5"),
            ("round(1, 19)", 10, "19"),
            ("round(1, {p})", 10, "{p}"),
            ("min 1", 5, "1"),
            ("1 = 1", 3, "="),
            ("1 ! 1", 3, "!"),
            ("", 1, ""),
            ("   ", 4, ""),
            ("and", 1, "and"),
        ],
    )
    def test_column_and_token(self, text: str, column: int, token: str) -> None:
        """The column is 1-based, in characters; the token is as written."""
        error = parse_error(text)
        assert (error.column, error.token) == (column, token)
        assert error.message.startswith(f"column {column}: ")

    def test_an_input_error_located_by_the_caller(self) -> None:
        """The caller names line and field; the error is an InputError and a ValueError,
        survives pickling, and formats all of it."""
        with pytest.raises(DerivationError) as caught:
            parse_derivation("{a} +* 2", source="log.jsonl", line=7, field="derivation")
        error = caught.value
        assert isinstance(error, InputError) and isinstance(error, ValueError)
        assert (error.source, error.line, error.field, error.column, error.token) == (
            "log.jsonl",
            7,
            "derivation",
            6,
            "*",
        )
        assert str(error) == "log.jsonl, line 7, field 'derivation': column 6: unexpected '*'"
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is DerivationError and str(again) == str(error)
        assert (again.column, again.token) == (6, "*")
        assert str(parse_error("{a} +* 2").located(line=3, field="derivation")) == (
            "line 3, field 'derivation': column 6: unexpected '*'"
        )

    def test_not_a_string(self) -> None:
        """A derivation is text."""
        with pytest.raises(DerivationError, match="a derivation is a string, not int"):
            parse_derivation(12)  # type: ignore[arg-type]


class TestRefusals:
    """No float, no name beyond the inputs, no call beyond the stated ones, no Python."""

    @pytest.mark.parametrize(
        ("text", "fragment"),
        [
            ("1e3", "malformed number '1e3'"),
            ("1E3", "malformed number '1E3'"),
            ("2.5e-1", "malformed number '2.5e'"),
            ("1.", "malformed number '1.'"),
            (".5", "unexpected character '.'"),
            ("007", "malformed number '007'"),
            ("0x1F", "malformed number '0x1F'"),
            ("1_000", "malformed number '1_000'"),
            ("NaN", "unknown name 'NaN'"),
            ("Infinity", "unknown name 'Infinity'"),
            ("inf", "unknown name 'inf'"),
            ("weekly * 2", "unknown name 'weekly': inputs are written in braces, {weekly}"),
            ("True", "unknown name 'True'"),
            ("abs(1)", "unknown name 'abs'"),
            ("pow(2, 3)", "unknown name 'pow'"),
            ('__import__("os")', "unknown name '__import__'"),
            ("{a}.real", "unexpected character '.'"),
            ("{a}[0]", "unexpected character '['"),
            ("lambda: 1", "unexpected character ':'"),
            ("lambda", "unknown name 'lambda'"),
            ("2 ** 3", "unexpected '*'"),
            ("7 // 2", "unexpected '/'"),
            ("7 % 2", "unexpected character '%'"),
            ("{x}%", "unexpected character '%'"),
            ("+1", "unexpected '+'"),
            ("1\t+ 1", "character U+0009 is not allowed"),
            ("1 +\n1", "character U+000A is not allowed"),
            ('"a\u200bb"', "character U+200B is not allowed"),
            ("{a\u202eb}", "character U+202E is not allowed"),
            ("１", "unexpected character '１'"),
            ("'a'", 'unexpected character "\'"'),
            ("min", "expected '(', found end of derivation"),
        ],
    )
    def test_refused(self, text: str, fragment: str) -> None:
        """Each is a parse error whose message says what is wrong."""
        assert fragment in parse_error(text).message


class TestLimits:
    """Every limit holds exactly at its value and is refused one past it."""

    def test_length(self) -> None:
        """1,000 characters parse; 1,001 are a LimitError at column 1,001."""
        parse_derivation("1" + " " * (MAX_LENGTH - 1))
        error = parse_error("1" + " " * MAX_LENGTH)
        assert isinstance(error, DerivationLimitError) and isinstance(error, LimitError)
        assert error.column == MAX_LENGTH + 1

    @pytest.mark.parametrize(
        ("opening", "closing"),
        [
            ("(", ")"),
            ("-", ""),
            ("not ", ""),
            ("min(1, ", ")"),
            ("if(true, ", ", 0)"),
            ("round(", ", 2)"),
        ],
    )
    def test_nesting(self, opening: str, closing: str) -> None:
        """32 groups open at once parse and evaluate; 33 are a LimitError at the 33rd."""
        leaf = "true" if opening == "not " else "1"
        parse_derivation(opening * MAX_NESTING + leaf + closing * MAX_NESTING)
        error = parse_error(opening * (MAX_NESTING + 1) + leaf + closing * (MAX_NESTING + 1))
        assert isinstance(error, DerivationLimitError)
        assert error.column == len(opening) * MAX_NESTING + 1
        assert f"nesting deeper than {MAX_NESTING}" in error.message

    def test_deepest_tree_within_a_small_stack(self) -> None:
        """The deepest tree the limits allow (32 groups, each six levels of precedence deep)
        parses, renders and evaluates with 450 frames to spare (it needs about 400): the
        recursion is bounded by the nesting limit, whatever the input."""
        text = "{x}"
        for _ in range(MAX_NESTING):
            text = f"({text}*1+1<3 and true or true)"
        derivation = parse_derivation(text)
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(len(_stack()) + 450)
        try:
            again = parse_derivation(derivation.text)
            result = evaluate(again, {"x": 1})
        finally:
            sys.setrecursionlimit(limit)
        assert again == derivation
        assert isinstance(result, Failure) and result.code == "type_mismatch"

    def test_digits(self) -> None:
        """A literal has at most 40 digits, 18 after the point (16 written before a %)."""
        assert run("9" * MAX_DIGITS) == "9" * MAX_DIGITS
        assert isinstance(parse_error("9" * (MAX_DIGITS + 1)), DerivationLimitError)
        assert run("0." + "0" * (SCALE - 1) + "5") == "0." + "0" * (SCALE - 1) + "5"
        assert isinstance(parse_error("0." + "0" * SCALE + "5"), DerivationLimitError)
        assert run("0." + "0" * (SCALE - 3) + "5%") == "0." + "0" * (SCALE - 1) + "5"
        assert isinstance(parse_error("0." + "0" * (SCALE - 2) + "5%"), DerivationLimitError)

    def test_magnitude(self) -> None:
        """Every intermediate value stays below 10**40; reaching it is out_of_range."""
        big = "9" * MAX_DIGITS
        assert run(f"{big} - 1 + 1") == big
        assert code(f"{big} + 1 - 1") == "out_of_range"
        assert code(f"{big} * 10 / 10") == "out_of_range"
        assert code("-" + big + " - 1") == "out_of_range"


def _stack() -> list[object]:
    frames: list[object] = []
    frame = sys._getframe()
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back  # type: ignore[assignment]
    return frames


class TestCanonical:
    """The canonical text is stable, minimal and parses back to the same tree."""

    @pytest.mark.parametrize(
        ("text", "canonical"),
        [
            ("{a}+{b}*2", "{a} + {b} * 2"),
            ("({a}+{b})*2", "({a} + {b}) * 2"),
            ("(({a}))", "{a}"),
            ("(1 + 2) + 3", "(1 + 2) + 3"),
            ("1 - (2 - 3)", "1 - (2 - 3)"),
            ("- (1 + 2)", "-(1 + 2)"),
            ("not (1 < 2)", "not 1 < 2"),
            ("not (true and false)", "not (true and false)"),
            ("(true or false) and true", "(true or false) and true"),
            ("(1 < 2) == true", "(1 < 2) == true"),
            ("30.50%", "30.5%"),
            ("2.50", "2.5"),
            ("0.000", "0"),
            ('"a\\"b\\\\c"', '"a\\"b\\\\c"'),
            ("{a\\}b\\{c\\\\}", "{a\\}b\\{c\\\\}"),
            ("min( 1 ,2 )", "min(1, 2)"),
            ("round( {x} , 2 )", "round({x}, 2)"),
            ("if(1<2,{a},-{b})", "if(1 < 2, {a}, -{b})"),
        ],
    )
    def test_text(self, text: str, canonical: str) -> None:
        """Spacing and redundant parentheses go; the tree does not change."""
        derivation = parse_derivation(text)
        assert derivation.text == canonical
        assert parse_derivation(canonical) == derivation
        assert parse_derivation(canonical).text == canonical

    def test_inputs_sorted(self) -> None:
        """Inputs are the referenced names, once each, sorted by code point."""
        derivation = parse_derivation("{b} + {a} * {b} + {A} + {a b} + {a\\}}")
        assert derivation.inputs == ("A", "a", "a b", "a}", "b")
        assert isinstance(derivation, Derivation)

    def test_equality_ignores_layout(self) -> None:
        """Two spellings of one tree are equal derivations."""
        assert parse_derivation("{a}+1") == parse_derivation(" {a} + 1 ")
        assert parse_derivation("{a}+1") != parse_derivation("1+{a}")


class TestDeterminism:
    """The caller's global decimal context never reaches a result."""

    def test_global_context_changed(self) -> None:
        """Precision 3 and ROUND_UP in the thread's context change nothing, and are left as found."""
        cases = [(text, values) for text, values, _ in GOLDEN]
        expected = [run(text, values) for text, values in cases]
        texts = [parse_derivation(text).text for text, _ in cases]
        context = decimal.getcontext()
        saved = (context.prec, context.rounding)
        context.prec, context.rounding = 3, decimal.ROUND_UP
        try:
            assert [run(text, values) for text, values in cases] == expected
            assert [parse_derivation(text).text for text, _ in cases] == texts
            assert (context.prec, context.rounding) == (3, decimal.ROUND_UP)
        finally:
            context.prec, context.rounding = saved


# An independent evaluator: test-local trees, rendered here, evaluated exactly over Fraction.

_BOUND = Fraction(10) ** MAX_DIGITS
_NAMES = ("F1", "f-3a9", "snacks.weekly", "a b", "x")
Tree = tuple[Any, ...]


class _Failed(Exception):
    def __init__(self, code: str) -> None:
        self.code = code


def _bounded(value: Fraction) -> Fraction:
    if abs(value) >= _BOUND:
        raise _Failed("out_of_range")
    return value


def _input_fraction(raw: int | str) -> Fraction:
    if isinstance(raw, int):
        return Fraction(raw)
    return Fraction(raw[:-1]) / 100 if raw.endswith("%") else Fraction(raw)


def _exact(tree: Tree, values: dict[str, int | str]) -> Fraction:
    kind = tree[0]
    if kind == "literal":
        return Fraction(tree[1])
    if kind == "input":
        return _input_fraction(values[tree[1]])
    if kind == "neg":
        return -_exact(tree[1], values)
    if kind in ("min", "max"):
        found = [_exact(arg, values) for arg in tree[1]]
        return min(found) if kind == "min" else max(found)
    if kind == "round":
        return _bounded(round(_exact(tree[1], values), tree[2]))  # Fraction rounds half-even
    if kind == "if":
        _, (op, left, right), then, otherwise = tree
        left_value, right_value = _exact(left, values), _exact(right, values)
        holds = {
            "<": left_value < right_value,
            ">=": left_value >= right_value,
            "==": left_value == right_value,
            "!=": left_value != right_value,
        }[op]
        return _exact(then if holds else otherwise, values)
    _, op, left, right = tree
    a, b = _exact(left, values), _exact(right, values)
    if op == "+":
        return _bounded(a + b)
    if op == "-":
        return _bounded(a - b)
    if op == "*":
        return _bounded(round(a * b, SCALE))
    if b == 0:
        raise _Failed("division_by_zero")
    return _bounded(round(a / b, SCALE))


def _as_fact_value(value: Fraction) -> int | str:
    if value.denominator == 1 and abs(value) <= 2**53 - 1:
        return int(value)
    units = abs(value) * 10**SCALE
    assert units.denominator == 1
    whole, fraction = divmod(int(units), 10**SCALE)
    text = str(whole) + ("." + str(fraction).rjust(SCALE, "0").rstrip("0") if fraction else "")
    return "-" + text if value < 0 else text


def _render(tree: Tree) -> str:
    kind = tree[0]
    if kind == "literal":
        return str(tree[2])
    if kind == "input":
        return "{" + tree[1] + "}"
    if kind == "neg":
        return f"-({_render(tree[1])})"
    if kind in ("min", "max"):
        return f"{kind}({', '.join(_render(arg) for arg in tree[1])})"
    if kind == "round":
        return f"round({_render(tree[1])}, {tree[2]})"
    if kind == "if":
        _, (op, left, right), then, otherwise = tree
        condition = f"{_render(left)} {op} {_render(right)}"
        return f"if({condition}, {_render(then)}, {_render(otherwise)})"
    _, op, left, right = tree
    return f"({_render(left)} {op} {_render(right)})"


def _decimal_text(draw: Callable[..., Any], *, percent: bool) -> str:
    whole = draw(st.integers(0, 10**12))
    places = draw(st.integers(0, 6))
    fraction = draw(st.integers(0, 10**places - 1)) if places else 0
    text = str(whole) + (f".{str(fraction).rjust(places, '0')}" if places else "")
    return text + ("%" if percent else "")


@st.composite
def _literal(draw: Callable[..., Any]) -> Tree:
    choice = draw(st.sampled_from(["small", "decimal", "percent", "zero", "huge"]))
    if choice == "small":
        written: str = str(draw(st.integers(0, 1000)))
    elif choice == "zero":
        written = "0"
    elif choice == "huge":
        written = str(draw(st.integers(10**30, 10**MAX_DIGITS - 1)))
    else:
        written = _decimal_text(draw, percent=choice == "percent")
    return ("literal", _input_fraction(written), written)


def _trees(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
    return st.one_of(
        st.tuples(st.just("op"), st.sampled_from("+-*/"), children, children),
        st.tuples(st.just("neg"), children),
        st.tuples(st.sampled_from(["min", "max"]), st.lists(children, min_size=2, max_size=3)),
        st.tuples(st.just("round"), children, st.integers(0, SCALE)),
        st.tuples(
            st.just("if"),
            st.tuples(st.sampled_from(["<", ">=", "==", "!="]), children, children),
            children,
            children,
        ),
    )


TREES = st.recursive(
    st.one_of(_literal(), st.tuples(st.just("input"), st.sampled_from(_NAMES))),
    _trees,
    max_leaves=10,
)


@st.composite
def _values(draw: Callable[..., Any]) -> dict[str, int | str]:
    found: dict[str, int | str] = {}
    for name in _NAMES:
        kind = draw(st.sampled_from(["int", "negative", "decimal", "percent", "zero", "huge"]))
        if kind == "huge":
            found[name] = str(draw(st.integers(10**20, 10**MAX_DIGITS - 1)))
        elif kind == "int":
            found[name] = draw(st.integers(-(2**53) + 1, 2**53 - 1))
        elif kind == "negative":
            found[name] = "-" + _decimal_text(draw, percent=False)
        elif kind == "zero":
            found[name] = draw(st.sampled_from([0, "0", "0.0", "-0"]))
        else:
            found[name] = _decimal_text(draw, percent=kind == "percent")
    return found


class TestProperties:
    """The evaluator against an exact evaluator over Fraction; the canonical text round-trips."""

    @given(TREES, _values(), st.booleans())
    def test_equals_exact_evaluation(
        self, tree: Tree, values: dict[str, int | str], hostile_context: bool
    ) -> None:
        """Value for value and failure code for failure code, also under a hostile global
        decimal context (precision 3, ROUND_UP)."""
        try:
            expected: object = _as_fact_value(_exact(tree, values))
        except _Failed as failed:
            expected = failed.code
        derivation = parse_derivation(_render(tree))
        if hostile_context:
            with decimal.localcontext(decimal.Context(prec=3, rounding=decimal.ROUND_UP)):
                result = evaluate(derivation, values)
        else:
            result = evaluate(derivation, values)
        assert (result.code if isinstance(result, Failure) else result) == expected
        assert not isinstance(result, float)

    @given(TREES)
    def test_canonical_round_trip(self, tree: Tree) -> None:
        """The canonical text parses to the same tree and is a fixed point."""
        derivation = parse_derivation(_render(tree))
        again = parse_derivation(derivation.text)
        assert again == derivation
        assert again.text == derivation.text
        assert again.inputs == derivation.inputs
