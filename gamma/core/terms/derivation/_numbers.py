"""Exact decimal numbers of a derivation: one fixed context, one reading of text, one printing.

Every number is a ``Decimal`` with at most ``SCALE`` digits after the point and a magnitude
below ``10**MAX_DIGITS``. Arithmetic runs under ``CONTEXT``, entered with ``localcontext`` for
each parse and evaluation, so a caller's global decimal context (its precision, its rounding)
never reaches a result.
"""

from __future__ import annotations

import re
from decimal import (
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
)

from gamma.core.terms.canonical import MAX_SAFE_INT

__all__ = [
    "SCALE",
    "MAX_DIGITS",
    "CONTEXT",
    "NUMERIC_TEXT",
    "in_range",
    "read_number",
    "rounded",
    "number_value",
    "decimal_text",
]

SCALE = 18
"""Digits after the point that every number keeps; ``*`` and ``/`` round half-even to it."""

MAX_DIGITS = 40
"""Digits of a written number; every value's magnitude stays below ``10**MAX_DIGITS``."""

CONTEXT = Context(
    prec=200,
    rounding=ROUND_HALF_EVEN,
    Emin=-999,
    Emax=999,
    capitals=1,
    clamp=0,
    flags=[],
    traps=[InvalidOperation, DivisionByZero, Overflow],
)
"""200 significant digits: a product of two bounded numbers (at most 116 digits) is exact, and
a quotient is close enough to its exact value (within 10**-142 of it) that rounding it to
``SCALE`` places gives the exact quotient rounded half-even (two distinct candidates for the
rounding boundary differ by at least 10**-76), so no result is rounded twice."""

NUMERIC_TEXT = re.compile(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(%?)")
"""The one shape of text read as a number: an optional ``-``, digits without a leading zero,
an optional fraction, an optional ``%``. ASCII only; anything else stays text."""

_LIMIT = Decimal(10) ** MAX_DIGITS
_QUANTUM = Decimal(1).scaleb(-SCALE)


def in_range(number: Decimal) -> bool:
    """Whether ``number`` is inside the stated bound (magnitude below 10**MAX_DIGITS)."""
    return abs(number) < _LIMIT


def read_number(sign: str, whole: str, fraction: str, percent: bool) -> Decimal | None:
    """The exact value of a written number, or None when it is past a limit.

    Past a limit means more than ``MAX_DIGITS`` digits, or more than ``SCALE`` digits after the
    point once a percent is divided by 100: such a number would have to be rounded, and a
    stated value is never silently rounded.
    """
    if len(whole) + len(fraction) > MAX_DIGITS:
        return None
    number = Decimal(f"{sign}{whole}.{fraction or '0'}")
    if percent:
        number = number.scaleb(-2)
    kept = number.quantize(_QUANTUM)
    return kept if kept == number and in_range(kept) else None


def rounded(number: Decimal, places: int = SCALE) -> Decimal:
    """``number`` rounded half-even to ``places`` digits after the point (under CONTEXT)."""
    return number.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN)


def number_value(number: Decimal) -> int | str:
    """The fact value of a number: an int when it is whole and within JSON's safe integers
    (±(2**53−1)), else its decimal text (``"22.5"``, ``"9007199254740993"``)."""
    if number == number.to_integral_value() and abs(number) <= MAX_SAFE_INT:
        return int(number)
    return decimal_text(number)


def decimal_text(number: Decimal) -> str:
    """Plain decimal text: no exponent, no trailing zeros after the point, no ``-0``."""
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite: NaN and infinities never enter
    text = "".join(map(str, digits)).rjust(1 - min(exponent, 0), "0") + "0" * max(exponent, 0)
    split = len(text) + min(exponent, 0)
    whole, fraction = text[:split].lstrip("0") or "0", text[split:].rstrip("0")
    text = f"{whole}.{fraction}" if fraction else whole
    return "-" + text if sign and text != "0" else text
