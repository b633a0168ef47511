"""The matchable forms of a withheld value, and the search for them in a response.

The validator does not ask "which salient tokens does the response have?" for withheld
values: it derives from each withheld value the forms it can take (numbers in every
normalisation of :mod:`gamma.scoring.numbers`, dates in every unambiguous order,
identifiers with their separators folded, names case-folded, short multi-word values as
phrases) and looks for each of them in the whole response, wherever it stands. SPEC.md
§11.8 states the rules. Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from typing import cast

import attrs

from gamma.scoring.lexicon import STOP_WORDS, negation, sentence_initial
from gamma.scoring.numbers import Date, Number, dates, normalise, numbers
from gamma.scoring.tokens import Token, value_tokens

__all__ = ["Form", "Hit", "ResponseView", "forms_of"]

_SEPARATORS = r"[\s\-\u2010\u2011\u2012\u2013\u2014_./:#]{0,3}"
_LEFT = r"(?<![^\W_])(?<![^\W_][-_])"
_RIGHT = r"(?![^\W_])(?![-_][^\W_])(?![.,][0-9])"


@attrs.frozen
class Form:
    """One way a withheld value can be written.

    ``kind`` is ``number`` (``value``, ``currency``, ``percent``; ``plain`` when the value
    is a bare integer, which a year may equal), ``date`` (``ymd``) or ``text`` (``pattern``,
    a compiled regular expression; ``anywhere`` False when a match at the start of a
    sentence does not count). ``tokens`` are the value's salient tokens the form comes from:
    the form is exempt when all of them are held by an admitted fact (or, for a validity
    exclusion, named by the question).
    """

    kind: str
    tokens: tuple[Token, ...]
    value: Fraction | None = None
    currency: str | None = None
    percent: bool = False
    plain: bool = False
    ymd: tuple[int | None, int, int] | None = None
    pattern: re.Pattern[str] | None = None
    anywhere: bool = True


@attrs.frozen
class Hit:
    """Where a form was found: the span of the normalised response, and its text."""

    start: int
    end: int
    text: str


def forms_of(value: str | int | bool) -> tuple[Form, ...]:
    """Every matchable form of one fact value (none for a bool or a one-digit int)."""
    if isinstance(value, bool):
        return ()
    tokens = value_tokens(value)
    if isinstance(value, int):
        return tuple(Form("number", (t,), value=Fraction(value), plain=True) for t in tokens)
    found: list[Form] = []
    words = value.split()
    single = len(tokens) == 1 and tokens[0].kind == "proper" and len(words) == 1
    for token in tokens:
        found.extend(_token_forms(token, single))
    if 2 <= len(words) <= 6 and len(value) <= 60 and any(
        any(c.isalpha() for c in w) and w.casefold().strip(".,;:!?") not in STOP_WORDS
        for w in words
    ):
        body = r"[\s\-]+".join(re.escape(w) for w in words)
        found.append(Form("text", tokens, pattern=_compile(body, ignore_case=True)))
    return tuple(found)


def _token_forms(token: Token, single: bool) -> list[Form]:
    if token.kind in ("amount", "percent"):
        if token.kind == "amount":
            value, currency = cast(tuple[Fraction, str | None], token.norm)
        else:
            value, currency = cast(Fraction, token.norm), None
        plain = currency is None and token.text.isdigit()
        return [Form("number", (token,), value=value, currency=currency,
                     percent=token.kind == "percent", plain=plain)]
    if token.kind == "date":
        return [Form("date", (token,), ymd=cast(tuple[int | None, int, int], token.norm))]
    if token.kind == "identifier":
        text = token.text
        if "@" in text or "://" in text or text.lower().startswith("www."):
            body = re.escape(text)
        else:  # "ORD-9981" is found as "ORD 9981", "ord9981", "ORD_9981"
            chunks = re.findall(r"[^\W\d_]+|\d+", text)
            body = _SEPARATORS.join(re.escape(c) for c in chunks)
        return [Form("text", (token,), pattern=_compile(body, ignore_case=True))]
    # a proper noun: a one-word value anywhere and in any case; a word of a longer value
    # case-sensitively, and not at a sentence start if it began a sentence in the value
    body = re.escape(str(token.norm)) + r"(?:['\u2019]s)?"
    found = [Form("text", (token,), pattern=_compile(body, ignore_case=single),
                  anywhere=single or not token.sentence_initial)]
    name = str(token.norm)
    if single and len(name) >= 4 and name.isalpha():  # "F a l c o n", "F-a-l-c-o-n"
        spaced = r"[ .\-*_`]".join(re.escape(c) for c in name)
        found.append(Form("text", (token,), pattern=_compile(spaced, ignore_case=True)))
    return found


def _compile(body: str, *, ignore_case: bool) -> re.Pattern[str]:
    return re.compile(_LEFT + body + _RIGHT, re.IGNORECASE if ignore_case else 0)


class ResponseView:
    """A response as the search sees it: normalised once, numbers and dates read on demand."""

    def __init__(self, text: str) -> None:
        self.text = normalise(text)
        self._numbers: list[Number] | None = None
        self._dates: list[Date] | None = None
        self._negated: Callable[[int], bool] | None = None

    def numbers(self) -> list[Number]:
        if self._numbers is None:
            self._numbers = numbers(self.text)
        return self._numbers

    def dates(self) -> list[Date]:
        if self._dates is None:
            self._dates = dates(self.text)
        return self._dates

    def negated(self, start: int) -> bool:
        if self._negated is None:
            self._negated = negation(self.text)
        return self._negated(start)

    def find(self, form: Form) -> list[Hit]:
        """Every place ``form`` stands in the response."""
        spans: list[tuple[int, int]] = []
        if form.kind == "number":
            spans = [(n.start, n.end) for n in self.numbers() if _number_matches(form, n)]
        elif form.kind == "date":
            assert form.ymd is not None
            spans = [(d.start, d.end) for d in self.dates() if _date_matches(form.ymd, d.ymd)]
        else:
            assert form.pattern is not None
            for m in form.pattern.finditer(self.text):
                if form.anywhere or not sentence_initial(self.text, m.start()):
                    spans.append(m.span())
        return [Hit(s, e, self.text[s:e]) for s, e in spans]


def _number_matches(form: Form, number: Number) -> bool:
    if form.percent != number.percent or form.value not in number.values:
        return False
    if form.currency is not None and number.currency not in (None, form.currency):
        return False
    # a year is no amount: "in 2026" never; a bare "2026" only for a bare withheld integer
    return not number.year or (form.plain and not number.dated)


def _date_matches(want: tuple[int | None, int, int], got: tuple[int | None, int, int]) -> bool:
    (yw, mw, dw), (yg, mg, dg) = want, got
    return mw == mg and dw == dg and (yw is None or yg is None or yw == yg)
