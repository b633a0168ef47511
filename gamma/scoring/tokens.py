"""Salient tokens: the concrete values (amounts, percentages, identifiers, dates, proper
nouns) by which GBR, URR and detail carryover decide whether a response states a fact.

Pure and deterministic; the grammar lives in :mod:`gamma.scoring.lexicon` and is written out in
SPEC.md §11. Tokens are compared by :func:`matches`, never by their text, so
``$1.2M`` in a response is found in a fact valued ``$1,200,000``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from fractions import Fraction
from typing import cast

import attrs

from gamma.scoring.lexicon import STOP_WORDS, negated_before, negation, scan, sentence_initial

__all__ = [
    "TOKEN_KINDS",
    "STOP_WORDS",
    "Token",
    "contains",
    "extract",
    "find",
    "matches",
    "negated_at",
    "value_tokens",
]

TOKEN_KINDS: tuple[str, ...] = ("amount", "percent", "identifier", "date", "proper")
_AmountNorm = tuple[Fraction, str | None]
_DateNorm = tuple[int | None, int, int]


@attrs.frozen
class Token:
    """One salient token as it appeared in a text.

    ``norm`` is the comparison key: ``(Fraction, currency or None)`` for an amount, a
    ``Fraction`` for a percentage, the case-folded text for an identifier,
    ``(year or None, month, day)`` for a date and the exact text (possessive ``'s``
    dropped) for a proper noun. Use :func:`matches` rather than comparing ``norm``: an
    amount without currency and a date without year match more than their own key.
    """

    kind: str
    text: str
    norm: Hashable
    start: int
    end: int
    negated: bool = False
    sentence_initial: bool = False


def extract(text: str, *, sources: bool = False) -> tuple[Token, ...]:
    """Salient tokens of ``text`` in text order.

    With ``sources=True`` (fact values, the question, a shown context) capitalised words
    at the start of a sentence and one-digit numbers are tokens too: a source should
    support every token a response could take from it, so it is read generously.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    units = scan(text)
    tokens: list[Token] = []
    for i, unit in enumerate(units):
        if unit.kind is None or (unit.bare_digit and not sources):
            continue
        initial = sentence_initial(text, unit.start)
        if unit.kind == "proper" and initial and not sources:
            continue
        tokens.append(Token(
            kind=unit.kind,
            text=text[unit.start:unit.end],
            norm=unit.norm,
            start=unit.start,
            end=unit.end,
            negated=negated_before(text, units, unit.start, i),
            sentence_initial=initial,
        ))
    return tuple(tokens)


def value_tokens(value: str | int | bool) -> tuple[Token, ...]:
    """Tokens of a fact value: what could leak if the fact is excluded.

    A bool has none; an int of two or more digits is one amount without currency (a
    one-digit int is too common to be evidence of anything); a string is read as a
    source, so a one-word value such as ``Helios`` is a token although it starts the text.
    """
    if isinstance(value, bool):
        return ()
    if isinstance(value, int):
        text = str(value)
        if len(text.lstrip("-")) < 2:
            return ()
        return (Token(kind="amount", text=text, norm=(Fraction(value), None),
                      start=0, end=len(text), sentence_initial=True),)
    if isinstance(value, str):
        return extract(value, sources=True)
    raise TypeError(f"value must be a str, int or bool, not {type(value).__name__}")


def matches(a: Token, b: Token) -> bool:
    """Whether two tokens name the same thing.

    Same kind required. Amounts: equal value and equal currency, where a missing currency
    matches any. Dates: equal month and day, where a missing year matches any. Otherwise
    equal ``norm`` (identifiers case-insensitive, proper nouns case-sensitive).
    """
    if a.kind != b.kind:
        return False
    if a.kind == "amount":
        (va, ca), (vb, cb) = cast(_AmountNorm, a.norm), cast(_AmountNorm, b.norm)
        return va == vb and (ca is None or cb is None or ca == cb)
    if a.kind == "date":
        (ya, ma, da), (yb, mb, db) = cast(_DateNorm, a.norm), cast(_DateNorm, b.norm)
        return ma == mb and da == db and (ya is None or yb is None or ya == yb)
    return a.norm == b.norm


def find(token: Token, tokens: Iterable[Token], *, skip_negated: bool = False) -> bool:
    """Whether any of ``tokens`` matches ``token`` (negated ones ignored on request)."""
    return any(matches(token, t) for t in tokens if not (skip_negated and t.negated))


def contains(text_tokens: Iterable[Token], token: Token, *, skip_negated: bool = False) -> bool:
    """:func:`find` with the haystack first, for callers that read better that way."""
    return find(token, text_tokens, skip_negated=skip_negated)


def negated_at(text: str, start: int) -> bool:
    """Whether a mention beginning at ``start`` in ``text`` is negated.

    The rule of :attr:`Token.negated`, for spans that are not tokens (closed-pool options).
    """
    if not 0 <= start <= len(text):
        raise ValueError(f"start must be within the text (0..{len(text)}), not {start}")
    return negation(text)(start)
