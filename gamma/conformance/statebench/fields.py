"""Strict readers for StateBench timeline JSON, and the error they raise.

Every reader takes the value and its dotted field path (``events[3].writes[0].key``)
and raises :class:`StatebenchError` naming that path, so the importer's modules
(:mod:`gamma.conformance.statebench.read`, :mod:`gamma.conformance.statebench.expect` and
:mod:`gamma.conformance.statebench.importer`) check input the same way. Kept apart so those modules
share one vocabulary of checks without importing each other. Its names are public to
those modules, not gamma's API: :mod:`gamma.conformance.statebench.importer` re-exports
:class:`StatebenchError`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gamma.core.reading.convert import json_type  # JSON types named as the event reader does
from gamma.core.terms.errors import InputError

_MAX_INT = 2**53 - 1


class StatebenchError(InputError):
    """A timeline that cannot be converted: names the 1-based line and the field path.

    ``line`` is None when the timeline did not come from a file; ``field`` is
    a dotted path such as ``events[3].writes[0].key``, or None when the whole
    line is at fault (not JSON, not an object).
    """


def field_error(path: str | None, message: str) -> StatebenchError:
    """The error to raise for the field at ``path`` (None: the whole line)."""
    return StatebenchError(message, field=path)


def join_path(path: str, key: str) -> str:
    """``path.key``, or ``key`` at the top."""
    return f"{path}.{key}" if path else key


def field_text(value: Any, path: str, *, empty: bool = True) -> str:
    """A string that encodes as UTF-8 (non-empty unless ``empty``)."""
    if not isinstance(value, str):
        raise field_error(path, f"must be a string, not {json_type(value)}")
    if not empty and not value:
        raise field_error(path, "must be a non-empty string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise field_error(path, "is not valid Unicode") from None
    return value


def field_object(value: Any, path: str) -> dict[str, Any]:
    """A JSON object."""
    if not isinstance(value, dict):
        raise field_error(path, f"must be an object, not {json_type(value)}")
    return value


def field_list(value: Any, path: str) -> list[Any]:
    """A JSON array."""
    if not isinstance(value, list):
        raise field_error(path, f"must be an array, not {json_type(value)}")
    return value


def required_field(obj: dict[str, Any], key: str, path: str) -> Any:
    """``obj[key]``; absent and null are both missing."""
    if key not in obj or obj[key] is None:
        raise field_error(join_path(path, key), "required field is missing")
    return obj[key]


def optional_object(obj: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    """``obj[key]`` as an object; absent or null reads as ``{}``."""
    value = obj.get(key)
    return {} if value is None else field_object(value, join_path(path, key))


def optional_list(obj: dict[str, Any], key: str, path: str) -> list[Any]:
    """``obj[key]`` as an array; absent or null reads as ``[]``."""
    value = obj.get(key)
    return [] if value is None else field_list(value, join_path(path, key))


def optional_text(obj: dict[str, Any], key: str, path: str) -> str | None:
    """``obj[key]`` as a string, or None when absent or null."""
    value = obj.get(key)
    return None if value is None else field_text(value, join_path(path, key))


def field_time(value: Any, path: str) -> datetime:
    """An ISO 8601 time in UTC (StateBench's naive times are UTC)."""
    text = field_text(value, path, empty=False)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise field_error(path, f"not an ISO 8601 timestamp: {text!r}") from None
    if parsed.tzinfo is None:  # StateBench writes naive times; they are read as UTC
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def format_time(ts: datetime) -> str:
    """``ts`` as gamma writes an event time: UTC, ``Z``, microseconds only when set."""
    ts = ts.astimezone(UTC)
    text = ts.strftime("%Y-%m-%dT%H:%M:%S")
    if ts.microsecond:
        text += f".{ts.microsecond:06d}"
    return text + "Z"


def field_value(value: Any, path: str) -> str | int | bool:
    """A fact value gamma can hold: a string, a safe integer or a boolean."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > _MAX_INT:
            raise field_error(path, "integer beyond ±(2^53−1)")
        return value
    if isinstance(value, str):
        return field_text(value, path)
    raise field_error(path, f"must be a string, an integer or a boolean, not {json_type(value)}")


def field_refs(value: Any, path: str) -> list[str]:
    """A reference field: null, one id/key, or a list of them."""
    if value is None:
        return []
    if isinstance(value, str):
        return [field_text(value, path)] if value else []
    items = field_list(value, path)
    return [field_text(item, f"{path}[{i}]", empty=False) for i, item in enumerate(items)]
