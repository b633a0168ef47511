"""The tree of a derivation and its canonical text.

Nodes are frozen values; each keeps the 1-based column it was written at so that a failure
can name it, but columns are not part of equality: ``a+b`` and ``a + b`` are the same tree.
"""

from __future__ import annotations

from decimal import Decimal

import attrs

from gamma.core.terms.derivation._numbers import decimal_text

__all__ = [
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
    "ExprNode",
    "precedence",
    "node_text",
    "references",
]

_COLUMN = attrs.field(eq=False, kw_only=True, default=0)


@attrs.frozen
class NumberLiteral:
    """A number literal; ``percent`` when written with ``%`` (``value`` is then divided by 100)."""

    value: Decimal
    percent: bool = False
    column: int = _COLUMN


@attrs.frozen
class Text:
    """A quoted literal; read by the same rule as a text input (``"30%"`` is a number)."""

    value: str
    column: int = _COLUMN


@attrs.frozen
class Boolean:
    """``true`` or ``false``."""

    value: bool
    column: int = _COLUMN


@attrs.frozen
class Reference:
    """An input, written ``{name}``: a fact id or key the caller maps to a value."""

    name: str
    column: int = _COLUMN


@attrs.frozen
class Negate:
    """Unary minus."""

    operand: ExprNode
    column: int = _COLUMN


@attrs.frozen
class Not:
    """Boolean negation."""

    operand: ExprNode
    column: int = _COLUMN


@attrs.frozen
class ExprStep:
    """One operator of a chain and the operand it applies to the value so far."""

    op: str
    operand: ExprNode
    column: int = _COLUMN


@attrs.frozen
class Arithmetic:
    """A left-to-right chain of ``+ -`` or of ``* /``: flat, so a long sum stays shallow."""

    first: ExprNode
    steps: tuple[ExprStep, ...]


@attrs.frozen
class Compare:
    """One comparison; comparisons do not chain."""

    op: str
    left: ExprNode
    right: ExprNode
    column: int = _COLUMN


@attrs.frozen
class Logic:
    """A left-to-right chain of ``and`` or of ``or``, evaluated short-circuit."""

    first: ExprNode
    steps: tuple[ExprStep, ...]


@attrs.frozen
class Call:
    """``min``, ``max`` (two or more numbers) or ``if(condition, then, else)``."""

    function: str
    args: tuple[ExprNode, ...]
    column: int = _COLUMN


@attrs.frozen
class Round:
    """``round(x, places)``: half-even to ``places`` (a whole literal from 0 to 18) digits."""

    operand: ExprNode
    places: int
    column: int = _COLUMN


ExprNode = (
    NumberLiteral | Text | Boolean | Reference | Negate | Not | Arithmetic | Compare | Logic | Call | Round
)

_ESCAPED_TEXT = str.maketrans({"\\": "\\\\", '"': '\\"'})
_ESCAPED_NAME = str.maketrans({"\\": "\\\\", "{": "\\{", "}": "\\}"})


def precedence(node: ExprNode) -> int:
    """Binding strength, loosest first: or, and, not, comparison, + -, * /, unary -, atom."""
    if isinstance(node, Logic):
        return 1 if node.steps[0].op == "or" else 2
    if isinstance(node, Not):
        return 3
    if isinstance(node, Compare):
        return 4
    if isinstance(node, Arithmetic):
        return 5 if node.steps[0].op in "+-" else 6
    if isinstance(node, Negate):
        return 7
    return 8


def node_text(node: ExprNode) -> str:
    """Canonical text: single spaces around binary operators, parentheses only where the tree
    needs them, numbers in plain decimal. It parses back to the same tree. Call it under the
    derivation's decimal context (a percent is multiplied back by 100)."""
    match node:
        case NumberLiteral(value=value, percent=True):
            return decimal_text(value.scaleb(2)) + "%"
        case NumberLiteral(value=value):
            return decimal_text(value)
        case Text(value=value):
            return '"' + value.translate(_ESCAPED_TEXT) + '"'
        case Boolean(value=value):
            return "true" if value else "false"
        case Reference(name=name):
            return "{" + name.translate(_ESCAPED_NAME) + "}"
        case Negate(operand=operand):
            return "-" + _wrapped(operand, 7)
        case Not(operand=operand):
            return "not " + _wrapped(operand, 3)
        case Compare(op=op, left=left, right=right):
            return f"{_wrapped(left, 5)} {op} {_wrapped(right, 5)}"
        case Arithmetic(first=first, steps=steps) | Logic(first=first, steps=steps):
            tighter = precedence(node) + 1
            parts = [_wrapped(first, tighter)]
            parts.extend(f"{step.op} {_wrapped(step.operand, tighter)}" for step in steps)
            return " ".join(parts)
        case Call(function=function, args=args):
            return f"{function}({', '.join(node_text(arg) for arg in args)})"
        case Round(operand=operand, places=places):
            return f"round({node_text(operand)}, {places})"
    raise AssertionError(node)  # pragma: no cover - the match is exhaustive


def _wrapped(node: ExprNode, at_least: int) -> str:
    text = node_text(node)
    return text if precedence(node) >= at_least else f"({text})"


def references(node: ExprNode) -> set[str]:
    """The input names ``node`` refers to."""
    match node:
        case Reference(name=name):
            return {name}
        case Negate(operand=operand) | Not(operand=operand) | Round(operand=operand):
            return references(operand)
        case Compare(left=left, right=right):
            return references(left) | references(right)
        case Arithmetic(first=first, steps=steps) | Logic(first=first, steps=steps):
            return references(first).union(*(references(step.operand) for step in steps))
        case Call(args=args):
            return set().union(*(references(arg) for arg in args))
    return set()
