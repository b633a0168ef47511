"""Evaluating a derivation's tree over its inputs' values: exact, bounded, fail-closed.

A failure (a missing input, a type mismatch, a division by zero, a value past the bound) is
returned as a ``Failure``, never raised: Γ excludes the derived fact with a reason of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, localcontext

import attrs

from gamma.core.terms.derivation._numbers import (
    CONTEXT,
    MAX_DIGITS,
    NUMERIC_TEXT,
    SCALE,
    in_range,
    number_value,
    read_number,
    rounded,
)
from gamma.core.terms.derivation._tree import (
    Arithmetic,
    Boolean,
    Call,
    Compare,
    ExprNode,
    Logic,
    Negate,
    Not,
    NumberLiteral,
    Reference,
    Round,
    Text,
)
from gamma.core.terms.errors import GammaError
from gamma.core.terms.model import Value

__all__ = [
    "MISSING_INPUT",
    "TYPE_MISMATCH",
    "DIVISION_BY_ZERO",
    "OUT_OF_RANGE",
    "FAILURE_CODES",
    "Failure",
    "evaluate_tree",
]

MISSING_INPUT = "missing_input"
TYPE_MISMATCH = "type_mismatch"
DIVISION_BY_ZERO = "division_by_zero"
OUT_OF_RANGE = "out_of_range"
FAILURE_CODES = (MISSING_INPUT, TYPE_MISMATCH, DIVISION_BY_ZERO, OUT_OF_RANGE)

_Inner = Decimal | str | bool
_SHOWN_TEXT = 40


@attrs.frozen
class Failure:
    """Why a derivation has no value: ``code`` (one of ``FAILURE_CODES``), a sentence for people,
    and the 1-based column of the operator, call or input that failed."""

    code: str
    detail: str
    column: int


class _Failed(GammaError):
    """Carries a Failure out of the recursion; caught in ``evaluate_tree``, never seen outside."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.detail)
        self.failure = failure


def _fail(code: str, column: int, detail: str) -> _Failed:
    return _Failed(Failure(code, f"column {column}: {detail}", column))


def _kind(value: _Inner) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Decimal):
        return "a number"
    shown = value if len(value) <= _SHOWN_TEXT else value[:_SHOWN_TEXT] + "…"
    return f"text {shown!r}"


def _read_value(raw: object, what: str, column: int) -> _Inner:
    """A value as the evaluator sees it: a bool, a number (an int, or text of the numeric shape
    ``-?digits[.digits][%]``) or text (every other string)."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int):
        number = Decimal(raw)
        if not in_range(number):
            raise _fail(OUT_OF_RANGE, column, f"{what} has more than {MAX_DIGITS} digits")
        return number
    if isinstance(raw, str):
        shape = NUMERIC_TEXT.fullmatch(raw)
        if shape is None:
            return raw
        sign, whole, fraction, percent = shape.groups()
        number_or_none = read_number(sign, whole, fraction or "", percent == "%")
        if number_or_none is None:
            raise _fail(
                OUT_OF_RANGE,
                column,
                f"{what} has more than {MAX_DIGITS} digits or more than {SCALE} after the point",
            )
        return number_or_none
    raise _fail(
        TYPE_MISMATCH,
        column,
        f"{what} is a {type(raw).__name__}, not text, an integer or a boolean",
    )


@attrs.frozen
class _Evaluation:
    values: Mapping[str, object]

    def value(self, node: ExprNode) -> _Inner:
        match node:
            case NumberLiteral(value=number):
                return number
            case Text(value=text, column=column):
                return _read_value(text, "text", column)
            case Boolean(value=boolean):
                return boolean
            case Reference(name=name, column=column):
                if name not in self.values:
                    raise _fail(MISSING_INPUT, column, f"no value for the input {{{name}}}")
                return _read_value(self.values[name], f"the input {{{name}}}", column)
            case Negate(operand=operand, column=column):
                return -self.number(operand, "-", column)
            case Not(operand=operand, column=column):
                return not self.boolean(operand, "not", column)
            case Arithmetic(first=first, steps=steps):
                total = self.number(first, steps[0].op, steps[0].column)
                for step in steps:
                    total = _arithmetic(
                        total, step.op, self.number(step.operand, step.op, step.column), step.column
                    )
                return total
            case Logic(first=first, steps=steps):
                truth = self.boolean(first, steps[0].op, steps[0].column)
                for step in steps:
                    if truth is (step.op == "or"):  # short-circuit: the rest is not evaluated
                        break
                    truth = self.boolean(step.operand, step.op, step.column)
                return truth
            case Compare(op=op, left=left, right=right, column=column):
                return _compare(self.value(left), op, self.value(right), column)
            case Call(function="if", args=(condition, then, otherwise), column=column):
                return self.value(then if self.boolean(condition, "if", column) else otherwise)
            case Call(function=function, args=args, column=column):
                numbers = [self.number(arg, function, column) for arg in args]
                return min(numbers) if function == "min" else max(numbers)
            case Round(operand=operand, places=places, column=column):
                return _bounded(
                    rounded(self.number(operand, "round", column), places), "round", column
                )
        raise AssertionError(node)  # pragma: no cover - the match is exhaustive

    def number(self, node: ExprNode, op: str, column: int) -> Decimal:
        value = self.value(node)
        if not isinstance(value, Decimal):
            raise _fail(TYPE_MISMATCH, column, f"{op!r} takes numbers, found {_kind(value)}")
        return value

    def boolean(self, node: ExprNode, op: str, column: int) -> bool:
        value = self.value(node)
        if not isinstance(value, bool):
            raise _fail(TYPE_MISMATCH, column, f"{op!r} takes booleans, found {_kind(value)}")
        return value


def _arithmetic(left: Decimal, op: str, right: Decimal, column: int) -> Decimal:
    if op == "+":
        return _bounded(left + right, op, column)
    if op == "-":
        return _bounded(left - right, op, column)
    if op == "*":
        return _bounded(rounded(left * right), op, column)
    if right == 0:
        raise _fail(DIVISION_BY_ZERO, column, "division by zero")
    return _bounded(rounded(left / right), op, column)


def _bounded(number: Decimal, op: str, column: int) -> Decimal:
    if not in_range(number):
        raise _fail(OUT_OF_RANGE, column, f"{op!r} gives a magnitude of 10^{MAX_DIGITS} or more")
    return number


def _compare(left: _Inner, op: str, right: _Inner, column: int) -> bool:
    if op in ("==", "!="):
        if type(left) is not type(right):
            raise _fail(TYPE_MISMATCH, column, f"{op!r} compares {_kind(left)} with {_kind(right)}")
        return (left == right) is (op == "==")
    if not (isinstance(left, Decimal) and isinstance(right, Decimal)):
        found = _kind(right) if isinstance(left, Decimal) else _kind(left)
        raise _fail(TYPE_MISMATCH, column, f"{op!r} compares numbers only, found {found}")
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    return left >= right


def evaluate_tree(tree: ExprNode, values: Mapping[str, object]) -> Value | Failure:
    """The fact value of ``tree`` over ``values``, or the Failure that stopped it.

    Runs under the derivation's own decimal context, so the caller's global context (its
    precision, its rounding) changes nothing.
    """
    with localcontext(CONTEXT):
        try:
            result = _Evaluation(values).value(tree)
        except _Failed as failed:
            return failed.failure
        return number_value(result) if isinstance(result, Decimal) else result
