"""Reading a derivation: a hand-written tokenizer and a recursive-descent parser, never ``eval``.

Recursion happens only where a group opens (a parenthesis, a call, a unary ``-`` or ``not``),
so the nesting limit bounds it: chains of ``+ - * /``, ``and`` and ``or`` are parsed in a loop
into one flat node. The deepest derivation the limits allow takes about 400 Python frames to
parse, node_text and evaluate, within the interpreter's default recursion limit of 1,000.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

from gamma.core.terms.canonical import unsafe_character
from gamma.core.terms.derivation._numbers import MAX_DIGITS, SCALE, read_number
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
)
from gamma.core.terms.errors import InputError, LimitError

__all__ = [
    "MAX_LENGTH",
    "MAX_NESTING",
    "DerivationError",
    "DerivationLimitError",
    "parse_tree",
]

MAX_LENGTH = 1000
"""Characters (code points) of one derivation."""

MAX_NESTING = 32
"""Groups open at once: a parenthesis, a call's parentheses, a unary ``-`` or ``not``."""

_FUNCTIONS = ("if", "max", "min", "round")
_ARITY = {"if": 3, "round": 2}
_KEYWORDS = frozenset(("and", "or", "not", "true", "false", *_FUNCTIONS))
_COMPARISONS = frozenset(("<", "<=", ">", ">=", "==", "!="))
_OPERATORS = ("<=", ">=", "==", "!=", "<", ">", "+", "-", "*", "/", "(", ")", ",")
_NUMBER_RUN = re.compile(r"[0-9A-Za-z_.]+")
_NUMBER = re.compile(r"(0|[1-9][0-9]*)(?:\.([0-9]+))?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class DerivationError(InputError):
    """A derivation that does not parse; ``column`` (1-based) and ``token`` name the culprit.

    The caller names where the derivation sits (``line``, ``field="derivation"``), either by
    passing them to ``parse_derivation`` or with ``located``.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
        column: int | None = None,
        token: str | None = None,
    ) -> None:
        self.column = column
        self.token = token
        super().__init__(message, source=source, line=line, field=field)

    def located(
        self, *, source: str | None = None, line: int | None = None, field: str | None = None
    ) -> DerivationError:
        """The same error, placed in its input (the column stays in the message)."""
        return type(self)(
            self.message,
            source=source,
            line=line,
            field=field,
            column=self.column,
            token=self.token,
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_derivation_error,
            (type(self), self.message, self.source, self.line, self.field, self.column, self.token),
        )


class DerivationLimitError(DerivationError, LimitError):
    """A derivation past one of its limits (length, nesting, digits of a number)."""


def _rebuild_derivation_error(
    cls: type[DerivationError],
    message: str,
    source: str | None,
    line: int | None,
    field: str | None,
    column: int | None,
    token: str | None,
) -> DerivationError:
    return cls(message, source=source, line=line, field=field, column=column, token=token)


@attrs.frozen
class _Token:
    kind: str  # number, percent, text, reference, name, operator, end
    written: str  # as written, for messages
    value: str  # the decoded name or text; the written form otherwise
    column: int


def _error(column: int, token: str, what: str, *, limit: bool = False) -> DerivationError:
    cls = DerivationLimitError if limit else DerivationError
    return cls(f"column {column}: {what}", column=column, token=token)


def _shown(token: _Token) -> str:
    return "end of derivation" if token.kind == "end" else repr(token.written)


def tokens(text: str) -> list[_Token]:
    """The tokens of ``text``, ending with an ``end`` token; spaces (U+0020) separate them."""
    if len(text) > MAX_LENGTH:
        raise _error(
            MAX_LENGTH + 1,
            text[MAX_LENGTH],
            f"a derivation is at most {MAX_LENGTH} characters",
            limit=True,
        )
    for index, char in enumerate(text):
        if (code := unsafe_character(char)) is not None:
            raise _error(index + 1, char, f"character {code} is not allowed")
    found: list[_Token] = []
    index = 0
    while index < len(text):
        char, column = text[index], index + 1
        if char == " ":
            index += 1
            continue
        if char in "0123456789":
            index = _number(text, index, found)
        elif char in '{"':
            index = _quoted(text, index, found)
        elif match := _NAME.match(text, index):
            found.append(_Token("name", match.group(), match.group(), column))
            index = match.end()
        else:
            operator = next((op for op in _OPERATORS if text.startswith(op, index)), None)
            if operator is None:
                raise _error(column, char, f"unexpected character {char!r}")
            found.append(_Token("operator", operator, operator, column))
            index += len(operator)
    found.append(_Token("end", "", "", len(text) + 1))
    return found


def _number(text: str, index: int, found: list[_Token]) -> int:
    run = _NUMBER_RUN.match(text, index)
    assert run is not None  # text[index] is a digit
    written, end = run.group(), run.end()
    shape = _NUMBER.fullmatch(written)
    if shape is None:
        raise _error(
            index + 1,
            written,
            f"malformed number {written!r} (a number is digits with an optional fraction, "
            "no leading zero, no exponent)",
        )
    percent = text.startswith("%", end)
    if len(shape.group(1)) + len(shape.group(2) or "") > MAX_DIGITS:
        raise _error(index + 1, written, f"a number has at most {MAX_DIGITS} digits", limit=True)
    if read_number("", shape.group(1), shape.group(2) or "", percent) is None:
        raise _error(
            index + 1, written, f"a number has at most {SCALE} digits after the point", limit=True
        )
    if percent:
        written += "%"
    found.append(_Token("percent" if percent else "number", written, written, index + 1))
    return end + percent


def _quoted(text: str, index: int, found: list[_Token]) -> int:
    """A ``{reference}`` or a ``"text"``; a backslash escapes the delimiters and itself."""
    opening = text[index]
    closing, escapable = ("}", "\\{}") if opening == "{" else ('"', '\\"')
    what = "reference" if opening == "{" else "text"
    allowed = " ".join("\\" + c for c in escapable)
    value: list[str] = []
    position = index + 1
    while position < len(text) and text[position] != closing:
        char = text[position]
        if char == "\\":
            following = text[position + 1 : position + 2]
            if following == "" or following not in escapable:
                raise _error(
                    position + 1,
                    char + following,
                    f"unknown escape {char + following!r} in a {what} (only {allowed})",
                )
            value.append(following)
            position += 2
            continue
        if char == "{" and opening == "{":
            raise _error(position + 1, char, "'{' inside a reference is written '\\{'")
        value.append(char)
        position += 1
    written = text[index : position + 1]
    if position >= len(text):
        raise _error(index + 1, written, f"unterminated {what}: no closing {closing!r}")
    if opening == "{" and not value:
        raise _error(index + 1, written, "empty reference '{}'")
    found.append(
        _Token("reference" if opening == "{" else "text", written, "".join(value), index + 1)
    )
    return position + 1


class _Parser:
    """One pass over the tokens; each method parses one precedence level, loosest first."""

    def __init__(self, found: list[_Token]) -> None:
        self._tokens = found
        self._position = 0
        self._depth = 0

    @property
    def _next(self) -> _Token:
        return self._tokens[self._position]

    def _take(self) -> _Token:
        token = self._tokens[self._position]
        self._position += 1
        return token

    def _is(self, *values: str) -> bool:
        return self._next.kind in ("operator", "name") and self._next.value in values

    def _expect(self, value: str) -> _Token:
        if not self._is(value):
            raise _error(
                self._next.column,
                self._next.written,
                f"expected {value!r}, found {_shown(self._next)}",
            )
        return self._take()

    def _enter(self, token: _Token) -> None:
        self._depth += 1
        if self._depth > MAX_NESTING:
            raise _error(
                token.column,
                token.written,
                f"nesting deeper than {MAX_NESTING} at {token.written!r}",
                limit=True,
            )

    def whole(self) -> ExprNode:
        node = self._or()
        if self._next.kind != "end":
            raise _error(self._next.column, self._next.written, f"unexpected {_shown(self._next)}")
        return node

    def _chain(
        self,
        ops: tuple[str, ...],
        node: type[Logic] | type[Arithmetic],
        operand: Callable[[], ExprNode],
    ) -> ExprNode:
        """A left-to-right chain of one binding level, built in a loop into one flat node."""
        first = operand()
        steps: list[ExprStep] = []
        while self._is(*ops):
            token = self._take()
            steps.append(ExprStep(token.value, operand(), column=token.column))
        return node(first, tuple(steps)) if steps else first

    def _or(self) -> ExprNode:
        return self._chain(("or",), Logic, self._and)

    def _and(self) -> ExprNode:
        return self._chain(("and",), Logic, self._not)

    def _not(self) -> ExprNode:
        if not self._is("not"):
            return self._comparison()
        token = self._take()
        self._enter(token)
        operand = self._not()
        self._depth -= 1
        return Not(operand, column=token.column)

    def _comparison(self) -> ExprNode:
        left = self._additive()
        if not (self._next.kind == "operator" and self._next.value in _COMPARISONS):
            return left
        token = self._take()
        right = self._additive()
        if self._next.kind == "operator" and self._next.value in _COMPARISONS:
            raise _error(
                self._next.column,
                self._next.written,
                f"comparisons do not chain: {_shown(self._next)} follows {token.written!r} "
                "(join them with 'and')",
            )
        return Compare(token.value, left, right, column=token.column)

    def _additive(self) -> ExprNode:
        return self._chain(("+", "-"), Arithmetic, self._multiplicative)

    def _multiplicative(self) -> ExprNode:
        return self._chain(("*", "/"), Arithmetic, self._unary)

    def _unary(self) -> ExprNode:
        if not self._is("-"):
            return self._primary()
        token = self._take()
        self._enter(token)
        operand = self._unary()
        self._depth -= 1
        return Negate(operand, column=token.column)

    def _primary(self) -> ExprNode:
        token = self._take()
        if token.kind in ("number", "percent"):
            shape = _NUMBER.match(token.written)
            assert shape is not None  # checked by the tokenizer
            value = read_number("", shape.group(1), shape.group(2) or "", token.kind == "percent")
            assert value is not None  # checked by the tokenizer
            return NumberLiteral(value, token.kind == "percent", column=token.column)
        if token.kind == "text":
            return Text(token.value, column=token.column)
        if token.kind == "reference":
            return Reference(token.value, column=token.column)
        if token.kind == "name" and token.value in ("true", "false"):
            return Boolean(token.value == "true", column=token.column)
        if token.kind == "name" and token.value in _FUNCTIONS:
            return self._call(token)
        if token.kind == "name" and token.value not in _KEYWORDS:
            raise _error(
                token.column,
                token.written,
                f"unknown name {token.written!r}: inputs are written in braces, "
                f"{{{token.written}}}, and the only functions are {', '.join(_FUNCTIONS)}",
            )
        if token.kind == "operator" and token.value == "(":
            self._enter(token)
            node = self._or()
            self._expect(")")
            self._depth -= 1
            return node
        raise _error(token.column, token.written, f"unexpected {_shown(token)}")

    def _call(self, name: _Token) -> ExprNode:
        self._expect("(")
        self._enter(name)
        args = [self._or()]
        while self._is(","):
            self._take()
            args.append(self._or())
        self._expect(")")
        self._depth -= 1
        function = name.value
        exact = _ARITY.get(function)
        if (exact is not None and len(args) != exact) or len(args) < 2:
            wanted = exact if exact is not None else "at least 2"
            raise _error(
                name.column, name.written, f"{function} takes {wanted} arguments, found {len(args)}"
            )
        if function == "round":
            places = args[1]
            if not (
                isinstance(places, NumberLiteral)
                and not places.percent
                and places.value == places.value.to_integral_value()
                and 0 <= places.value <= SCALE
            ):
                column = getattr(places, "column", 0) or name.column
                raise _error(
                    column,
                    node_text(places),
                    f"round's places must be a whole number from 0 to {SCALE}, written as a literal",
                )
            return Round(args[0], int(places.value), column=name.column)
        return Call(function, tuple(args), column=name.column)


def parse_tree(text: str) -> ExprNode:
    """The tree of ``text``, or a ``DerivationError`` naming the column and the token."""
    return _Parser(tokens(text)).whole()
