"""The one cattrs converter for JSON in and out, configured strictly.

Strict means JSON types are never coerced: ``"1"`` is not an int, ``1`` is not
a string, a string is not a list. Unwritten optional fields (``None``) are
omitted on the way out so canonical bytes keep exactly what was written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import AttributeValidationNote, IterableValidationNote
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from gamma.core.terms.caches import remember
from gamma.core.terms.canonical import format_ts, parse_ts
from gamma.core.terms.decisions import Admitted, Reason, Recomputed
from gamma.core.terms.errors import MissingFieldError, UnknownFieldError, ValueTypeError
from gamma.core.terms.model import EVENT_TYPES, Actor, Visibility

__all__ = ["converter", "check_keys", "first_failure", "json_type"]


def _structure_str(value: Any, _: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {json_type(value)}")
    return value


def _structure_bool(value: Any, _: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {json_type(value)}")
    return value


def _structure_str_tuple(value: Any, _: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list of strings, got {json_type(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise TypeError(f"item {index} must be a non-empty string, got {item!r}")
    return tuple(value)


def _structure_value(value: Any, _: Any) -> str | int | bool:
    if isinstance(value, (str, bool, int)) and not isinstance(value, float):
        return value
    raise TypeError(f"expected a string, an integer or a boolean, got {json_type(value)}")


def _structure_ts(value: Any, _: Any) -> datetime:
    return parse_ts(value)


def _structure_literal(value: Any, tp: Any) -> Any:
    allowed = get_args(tp)
    if value not in allowed or not isinstance(value, str):
        raise TypeError(f"expected one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def json_type(value: Any) -> str:
    """The JSON type of a decoded value, as an error message names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_pairs(tp: Any) -> bool:
    """``tuple[tuple[str, str], ...]``: a JSON object kept as sorted pairs (e.g. bindings)."""
    return bool(tp == tuple[tuple[str, str], ...])


def _structure_pairs(value: Any, _: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {json_type(value)}")
    return tuple(sorted((_structure_str(k, str), _structure_str(v, str)) for k, v in value.items()))


def _list_or_none(value: Any) -> Any:
    return None if value is None else list(value)


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(str, _structure_str)
    conv.register_structure_hook(bool, _structure_bool)
    conv.register_structure_hook_func(lambda tp: tp == tuple[str, ...], _structure_str_tuple)
    conv.register_structure_hook(datetime, _structure_ts)
    conv.register_structure_hook_func(_is_literal, _structure_literal)
    conv.register_structure_hook(str | int | bool, _structure_value)
    conv.register_structure_hook(str | int | bool | None, _structure_value)  # Assert.value (issue 30)
    conv.register_unstructure_hook(datetime, format_ts)
    conv.register_unstructure_hook(
        Visibility, make_dict_unstructure_fn(Visibility, conv, _cattrs_omit_if_default=True)
    )
    for cls in EVENT_TYPES.values():
        conv.register_unstructure_hook(
            cls,
            make_dict_unstructure_fn(
                cls, conv, _cattrs_omit_if_default=True, _canonical=override(omit=True)
            ),
        )
    conv.register_unstructure_hook(
        Actor, make_dict_unstructure_fn(Actor, conv, roles=override(unstruct_hook=list))
    )
    # the hottest shape of a large resolution, written out instead of generated
    conv.register_unstructure_hook(
        Reason, lambda r: {"code": r.code, "events": list(r.events), "facts": list(r.facts)}
    )
    _register_recomputed(conv)
    conv.register_unstructure_hook_func(_is_pairs, dict)
    conv.register_structure_hook_func(_is_pairs, _structure_pairs)
    conv.register_unstructure_hook_func(lambda tp: tp == tuple[str, ...] or tp == tuple[str, ...] | None, _list_or_none)
    return conv


def _register_recomputed(conv: cattrs.Converter) -> None:
    """An admitted record with ``inputs`` is a ``Recomputed`` one; its ``stale`` is written
    only when present (issue 29: the optional fields of an admitted record)."""
    plain = make_dict_structure_fn(Admitted, conv, _cattrs_forbid_extra_keys=True)
    derived = make_dict_structure_fn(Recomputed, conv, _cattrs_forbid_extra_keys=True)

    def structure(value: Any, _: Any) -> Admitted:
        if isinstance(value, dict) and "inputs" in value:
            return derived(value, Recomputed)
        return plain(value, Admitted)

    conv.register_structure_hook(Admitted, structure)
    unstructure = make_dict_unstructure_fn(Recomputed, conv)

    def unstructure_recomputed(value: Recomputed) -> dict[str, Any]:
        found: dict[str, Any] = unstructure(value)
        if value.stale is None:
            del found["stale"]
        return found

    conv.register_unstructure_hook(Recomputed, unstructure_recomputed)


converter = _make_converter()


_FIELDS_OF: dict[type, dict[str, Any]] = {}


def _fields_of(cls: type) -> dict[str, Any]:
    known = _FIELDS_OF.get(cls)
    if known is None:
        known = remember(_FIELDS_OF, cls, {a.name: a for a in attrs.fields(cls)})
    return known


def check_keys(body: dict[str, Any], cls: type, fail: Any, *, prefix: str = "") -> None:
    """Refuse unknown and ``_``-private fields, missing required ones and nulls, naming the field.

    ``fail(error_class, message, field)`` builds the error to raise.
    """
    fields = _fields_of(cls)
    for name in body:
        if name not in fields or name.startswith("_"):
            raise fail(UnknownFieldError, "unknown field", prefix + name)
    for name, attribute in fields.items():
        if attribute.default is attrs.NOTHING and name not in body:
            raise fail(MissingFieldError, "missing required field", prefix + name)
    for name, value in body.items():
        if value is None:
            raise fail(ValueTypeError, "null is not allowed; leave the field out", prefix + name)


def first_failure(exc: BaseException, path: str = "") -> tuple[str | None, str]:
    """The dotted path and message of the first leaf error in a cattrs error tree."""
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        extra = sorted(exc.extra_fields)[0]
        return (f"{path}.{extra}" if path else extra), "unknown field"
    if isinstance(exc, cattrs.BaseValidationError):
        for sub in exc.exceptions:
            sub_path = path
            for note in getattr(sub, "__notes__", []):
                if isinstance(note, AttributeValidationNote):
                    sub_path = f"{path}.{note.name}" if path else note.name
                elif isinstance(note, IterableValidationNote):
                    sub_path = f"{path}[{note.index}]"
            return first_failure(sub, sub_path)
    return (path or None), str(exc)
