"""JSON as SPEC §2 reads it: one document decoded strictly, the error naming line and field.

No repeated key, NaN, Infinity or float; no integer past ±(2^53-1); no lone surrogate; no
more than ``MAX_DEPTH`` containers open at once (SPEC §18), refused before decoding so that
nothing, here or later, recurses deeper. This is the strict path every line the fast ways
in are not sure of ends on, and what objects handed in from Python are held to.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gamma.core.terms.canonical import MAX_SAFE_INT
from gamma.core.terms.errors import InputError, JSONSyntaxError, LimitError, ValueTypeError
from gamma.core.terms.limits import MAX_DEPTH

__all__ = ["decode_json"]


def decode_json(text: str, *, source: str | None = None, line: int | None = None) -> Any:
    """Parse one JSON document strictly: no duplicate keys, NaN, floats or unsafe integers."""
    if text.count("[") + text.count("{") > MAX_DEPTH:  # else it cannot nest deeper: one scan each
        _check_depth(text, source=source, line=line)
    refused: list[_Refused] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(items)
        if len(result) != len(items):
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    # the walk below names the duplicate with its full path
                    refused.append(_Refused(f"duplicate key {key!r}", JSONSyntaxError))
                    result[key] = refused[-1]
                seen.add(key)
        return result

    def no_constant(name: str) -> Any:
        refused.append(_Refused(f"{name} is not valid JSON", JSONSyntaxError))
        return refused[-1]

    def checked_int(raw: str) -> Any:
        # int() of more than 4,300 digits raises; anything past 16 digits is unsafe anyway
        if len(raw) > 17:
            refused.append(_Refused(f"integer of {len(raw.lstrip('-'))} digits is beyond ±(2^53-1)"))
            return refused[-1]
        return int(raw)

    def no_float(raw: str) -> Any:
        refused.append(_Refused(f"floats are not allowed ({raw}): write decimals as strings"))
        return refused[-1]

    try:
        value = json.loads(
            text,
            object_pairs_hook=pairs,
            parse_constant=no_constant,
            parse_float=no_float,
            parse_int=checked_int,
        )
    except json.JSONDecodeError as exc:
        raise JSONSyntaxError(f"invalid JSON: {exc.msg} (column {exc.colno})", source=source, line=line) from None
    except RecursionError:
        raise JSONSyntaxError("JSON nested too deeply", source=source, line=line) from None
    # the walk that names the offending field is needed only when something may be wrong
    if (
        refused
        or _SURROGATE_ESCAPE.search(text)
        or _LONG_DIGITS.search(text)
        or (not text.isascii() and _SURROGATE_CHAR.search(text))  # a str handed in from Python
    ):
        _check_scalars(value, source=source, line=line, path="")
    return value


# a string (its escapes skipped, so no bracket inside it counts), maybe a key; or a bracket
_TOKEN = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")(\s*:)?|[\[\]{}]')


def _check_depth(text: str, *, source: str | None, line: int | None) -> None:
    """Refuse a document nesting more than MAX_DEPTH containers, naming the field (the keys of
    the objects on the way, as the other errors name it) where it goes past; one pass, no
    recursion, whatever the depth."""
    opened: list[str | None] = []  # per open container, the key it is the value of
    key: str | None = None
    for match in _TOKEN.finditer(text):
        string = match.group(1)
        if string is not None:
            if match.group(2):
                key = string
            continue
        if match.group() in "[{":
            opened.append(key)
            key = None
            if len(opened) > MAX_DEPTH:
                path = ".".join(_key_text(k) for k in opened if k is not None)
                raise LimitError(
                    f"JSON nested more than {MAX_DEPTH} deep", source=source, line=line,
                    field=path or None,
                )
        elif opened:
            opened.pop()
            key = None


def _key_text(token: str) -> str:
    try:
        key = json.loads(token)
    except ValueError:  # a malformed escape: the decoder names it if the depth is fine
        return token
    return key if isinstance(key, str) else token


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_CHAR = re.compile("[\ud800-\udfff]")
_LONG_DIGITS = re.compile(r"[0-9]{16}")


class _Refused:
    """Stands in for a float, NaN or duplicate key while decoding, so the error names its field."""

    def __init__(self, message: str, error: type[InputError] = ValueTypeError) -> None:
        self.message = message
        self.error = error


def _check_scalars(value: Any, *, source: str | None, line: int | None, path: str) -> None:
    if isinstance(value, _Refused):
        raise value.error(value.message, source=source, line=line, field=path or None)
    if isinstance(value, dict):
        for key, item in value.items():
            _check_string(key, source=source, line=line, path=path or key)
            _check_scalars(item, source=source, line=line, path=f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for item in value:
            _check_scalars(item, source=source, line=line, path=path)
    elif isinstance(value, str):
        _check_string(value, source=source, line=line, path=path)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INT:
        raise ValueTypeError(
            f"integer {value} is beyond ±(2^53-1)", source=source, line=line, field=path or None
        )


def _check_string(text: str, *, source: str | None, line: int | None, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueTypeError(
            "string is not valid Unicode (lone surrogate)", source=source, line=line, field=path or None
        ) from None
