"""Strict readers for StateBench timeline JSON, and the error they raise.

Every reader takes the value and its dotted field path (``events[3].writes[0].key``)
and raises :class:`StatebenchError` naming that path, so the importer's modules
(:mod:`gamma.conformance.statebench.read`, :mod:`gamma.conformance.statebench.expect` and
:mod:`gamma.conformance.statebench.importer`) check input the same way. Kept apart so those modules
share one vocabulary of checks without importing each other; private to the
importer: :mod:`gamma.conformance.statebench.importer` re-exports :class:`StatebenchError`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gamma.core.reading.convert import json_type
from gamma.core.terms.errors import InputError

_MAX_INT = 2**53 - 1


class StatebenchError(InputError):
    """A timeline that cannot be converted: names the 1-based line and the field path.

    ``line`` is None when the timeline did not come from a file; ``field`` is
    a dotted path such as ``events[3].writes[0].key``, or None when the whole
    line is at fault (not JSON, not an object).
    """


def _fail(path: str | None, message: str) -> StatebenchError:
    return StatebenchError(message, field=path)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _text(value: Any, path: str, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise _fail(path, f"must be a string, not {_json_type(value)}")
    if not empty and not value:
        raise _fail(path, "must be a non-empty string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(path, "is not valid Unicode") from None
    return value


_json_type = json_type  # the importer's messages name JSON types as the event reader does


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, f"must be an object, not {_json_type(value)}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(path, f"must be an array, not {_json_type(value)}")
    return value


def _req(obj: dict[str, Any], key: str, path: str) -> Any:
    if key not in obj or obj[key] is None:
        raise _fail(_join(path, key), "required field is missing")
    return obj[key]


def _opt_obj(obj: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = obj.get(key)
    return {} if value is None else _obj(value, _join(path, key))


def _opt_list(obj: dict[str, Any], key: str, path: str) -> list[Any]:
    value = obj.get(key)
    return [] if value is None else _list(value, _join(path, key))


def _opt_text(obj: dict[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    return None if value is None else _text(value, _join(path, key))


def _ts(value: Any, path: str) -> datetime:
    text = _text(value, path, empty=False)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise _fail(path, f"not an ISO 8601 timestamp: {text!r}") from None
    if parsed.tzinfo is None:  # StateBench writes naive times; they are read as UTC
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _fmt(ts: datetime) -> str:
    ts = ts.astimezone(UTC)
    text = ts.strftime("%Y-%m-%dT%H:%M:%S")
    if ts.microsecond:
        text += f".{ts.microsecond:06d}"
    return text + "Z"


def _value(value: Any, path: str) -> str | int | bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > _MAX_INT:
            raise _fail(path, "integer beyond ±(2^53−1)")
        return value
    if isinstance(value, str):
        return _text(value, path)
    raise _fail(path, f"must be a string, an integer or a boolean, not {_json_type(value)}")


def _refs(value: Any, path: str) -> list[str]:
    """A reference field: null, one id/key, or a list of them."""
    if value is None:
        return []
    if isinstance(value, str):
        return [_text(value, path)] if value else []
    items = _list(value, path)
    return [_text(item, f"{path}[{i}]", empty=False) for i, item in enumerate(items)]
