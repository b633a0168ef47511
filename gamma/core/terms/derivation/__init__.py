"""The derivation language of derived facts (issue 29): a small exact expression over inputs.

``parse_derivation`` reads the text of an assert's ``derivation`` field into a ``Derivation``
(its tree, its canonical text, the input names it refers to); ``evaluate`` computes the fact
value it gives over its inputs' current values, or a ``Failure`` saying why there is none.
Both are pure and deterministic: no float, no ``eval``, no global decimal context.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import localcontext

import attrs

from gamma.core.terms.derivation._evaluate import (
    DIVISION_BY_ZERO,
    FAILURE_CODES,
    MISSING_INPUT,
    OUT_OF_RANGE,
    TYPE_MISMATCH,
    Failure,
    evaluate_tree,
)
from gamma.core.terms.derivation._numbers import CONTEXT, MAX_DIGITS, SCALE
from gamma.core.terms.derivation._parse import (
    MAX_LENGTH,
    MAX_NESTING,
    DerivationError,
    DerivationLimitError,
    parse_tree,
)
from gamma.core.terms.derivation._tree import (
    Arithmetic,
    Boolean,
    Call,
    Compare,
    ExprNode,
    ExprStep,
    Logic,
    Negate,
    Not,
    NumberLiteral,
    Reference,
    Round,
    Text,
    node_text,
    references,
)
from gamma.core.terms.model import Value

__all__ = [
    "parse_derivation",
    "evaluate",
    "Derivation",
    "Failure",
    "DerivationError",
    "DerivationLimitError",
    "FAILURE_CODES",
    "MISSING_INPUT",
    "TYPE_MISMATCH",
    "DIVISION_BY_ZERO",
    "OUT_OF_RANGE",
    "MAX_LENGTH",
    "MAX_NESTING",
    "MAX_DIGITS",
    "SCALE",
    "ExprNode",
    "NumberLiteral",
    "Text",
    "Boolean",
    "Reference",
    "Negate",
    "Not",
    "ExprStep",
    "Arithmetic",
    "Compare",
    "Logic",
    "Call",
    "Round",
]


@attrs.frozen
class Derivation:
    """A parsed derivation: its canonical ``text``, its ``tree`` and its ``inputs`` (the names it
    refers to, sorted by code point). Two derivations are equal when their trees are."""

    text: str = attrs.field(eq=False)
    tree: ExprNode
    inputs: tuple[str, ...] = attrs.field(eq=False)


def parse_derivation(
    text: str, *, source: str | None = None, line: int | None = None, field: str | None = None
) -> Derivation:
    """Read a derivation; a ``DerivationError`` (an ``InputError``) names the column and token,
    and the ``source``, ``line`` and ``field`` given here."""
    if not isinstance(text, str):
        raise DerivationError(
            f"a derivation is a string, not {type(text).__name__}",
            source=source,
            line=line,
            field=field,
        )
    with localcontext(CONTEXT):
        try:
            tree = parse_tree(text)
        except DerivationError as error:
            if source is None and line is None and field is None:
                raise
            raise error.located(source=source, line=line, field=field) from None
        return Derivation(node_text(tree), tree, tuple(sorted(references(tree))))


def evaluate(derivation: Derivation, values: Mapping[str, Value]) -> Value | Failure:
    """The value ``derivation`` gives over ``values`` (input name to its current fact value):
    a bool, an int (a whole number within ±(2**53−1)), or text (any other number, in plain
    decimal, or a text result); or the ``Failure`` that stopped it. Never raises for a value."""
    return evaluate_tree(derivation.tree, values)
