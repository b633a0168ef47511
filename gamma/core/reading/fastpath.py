"""The fast ways into the event model that ``plain`` does not cover: any line (``fast_line``),
and an object already decoded (``fast_event``: a store's rows, objects handed in from Python).

``fast_line`` is ``plain.typed_line`` for a line in any encoding (whitespace, key order,
UTF-8, ``\\u`` escapes, CRLF): msgspec decodes it once into typed structs, every name is
checked on its decoded text, and the canonical text is re-encoded from the decoded line, once.
``fast_event`` structures a decoded object field by field, each value held to its field's rule
by this module's check of that rule; the table of fields is the model's (``reading.schema``).

Both only ever *accept*. Whatever they are not sure of (a float, an integer past
±(2^53-1), a key written twice, an unknown, missing or null field, a type the strict hooks
refuse, a name with a character the strict path would look at, a timestamp not already in
UTC canonical form, a digest of issue 30, an erase, a migration) makes them answer None, and the caller takes the
strict path (``decode_json`` and the cattrs converter), which builds the same event or raises
the error naming line and field. ``tests/test_events.py`` and ``tests/test_encodings.py`` pin
the paths to the same events, canonical text and errors on generated valid and malformed logs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from sys import intern
from typing import Any

import attrs

from gamma.core.reading.plain import (
    CANONICAL_TS,
    MAX_SAFE_INTEGER,
    SCOPE_SYNTAX,
    sound,
    typed_line,
)
from gamma.core.reading.schema import Slot, fast_kinds, fields_of
from gamma.core.reading.stated import derivation_sound
from gamma.core.terms.caches import remember
from gamma.core.terms.model import Assert, Event, Rule, Visibility
from gamma.core.terms.policy import Policy

__all__ = ["CANONICAL_TS", "SCOPE_SYNTAX", "fast_event", "fast_line", "sound"]


class _Defer(Exception):
    """Not sure: let the strict path decide (raised inside, never escapes this module)."""


def _str(value: Any) -> str:
    if type(value) is not str:
        raise _Defer
    return value


def _ident(value: Any) -> str:
    """An id (event, fact, experience): a non-empty string of printable characters."""
    if type(value) is not str or not value.isprintable() or not value:
        raise _Defer
    return value


#: Names already seen (tenants, actors, keys, roles, authorities, ...): one string object
#: for all their events, checked once. Kept by the one cache policy (``terms.caches``), so it never holds a whole log.
_NAMES: dict[str, str] = {}
_SCOPES: dict[str, str] = {}


def _fast_name(value: Any) -> str:
    """A repeated name: printable and non-empty (as ``events._check_id_text`` wants), interned."""
    if type(value) is not str:
        raise _Defer
    known = _NAMES.get(value)
    if known is not None:
        return known
    if not value or not value.isprintable():
        raise _Defer
    known = remember(_NAMES, value, intern(value))
    return known


def _label(value: Any) -> str:
    """A repeated string that is not a name (authority, clearance): interned, unchecked."""
    if type(value) is not str:
        raise _Defer
    return intern(value)


def _scope(value: Any) -> str:
    """A scope: a printable name of ``global`` or '/'-separated segments."""
    if type(value) is not str:
        raise _Defer
    known = _SCOPES.get(value)
    if known is not None:
        return known
    if value != "global" and not SCOPE_SYNTAX.fullmatch(value):
        raise _Defer
    known = remember(_SCOPES, value, _fast_name(value))
    return known


def _fast_value(value: Any) -> str | int | bool:
    kind = type(value)
    if kind is str or kind is bool or (
        kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    ):
        return value  # type: ignore[no-any-return]
    raise _Defer


def _fast_names(value: Any) -> tuple[str, ...]:
    if type(value) is not list:
        raise _Defer
    for item in value:
        if type(item) is not str or not item:
            raise _Defer
    return tuple(value)


def _listed_names(value: Any) -> tuple[str, ...]:
    """Visibility's roles or actors: a non-empty list of names."""
    if type(value) is not list or not value:
        raise _Defer
    return tuple([_fast_name(item) for item in value])


def _literal(allowed: tuple[str, ...]) -> Callable[[Any], str]:
    table = {name: name for name in allowed}

    def check(value: Any) -> str:
        if type(value) is not str or value not in table:
            raise _Defer
        return table[value]

    return check


_TS_CACHE: dict[str, datetime] = {}


def _fast_ts(value: Any) -> datetime:
    """A timestamp already in canonical UTC form (``...:SSZ`` or ``...:SS.ffffffZ``), built
    as ``canonical.parse_ts`` builds it."""
    if type(value) is not str:
        raise _Defer
    cached = _TS_CACHE.get(value)
    if cached is not None:
        return cached
    if CANONICAL_TS.fullmatch(value) is None:
        raise _Defer
    try:  # on exactly this form, the same instant and checks as parse_ts, in C
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _Defer from None
    return remember(_TS_CACHE, value, parsed)


def _visibility(value: Any) -> Visibility:
    if type(value) is not dict:
        raise _Defer
    fields: dict[str, Any] = {}
    for name, item in value.items():
        check = _VISIBILITY.get(name)
        if check is None:
            raise _Defer
        fields[name] = check(item)
    return Visibility(**fields)


#: What each rule the fast path reads means here: a check that returns the value to keep
#: (a name interned) or raises ``_Defer``.
_CHECKS: dict[Rule, Callable[[Any], Any]] = {
    Rule.ID: _ident,
    Rule.NAME: _fast_name,
    Rule.SCOPE: _scope,
    Rule.STAMP: _fast_ts,
    Rule.VALUE: _fast_value,
    Rule.TEXT: _str,
    Rule.LEVEL: _label,
    Rule.IDS: _fast_names,
    Rule.NAMES: _listed_names,
    Rule.VISIBILITY: _visibility,
    Rule.DERIVATION: _str,
}


def _check(slot: Slot) -> Callable[[Any], Any]:
    return _literal(slot.choices) if slot.rule is Rule.ONE_OF else _CHECKS[slot.rule]


_VISIBILITY: dict[str, Callable[[Any], Any]] = {
    slot.name: _check(slot) for slot in fields_of(Visibility)
}


@attrs.frozen
class _Kind:
    """How ``fast_event`` reads one kind: its class, each field's check, the fields it needs
    written, and those holding a derivation (checked on the built event)."""

    model: type[Event]
    checks: dict[str, Callable[[Any], Any]]
    required: frozenset[str]
    derivations: tuple[str, ...]


#: Per event type tag, the kinds the fast path reads (every field of the model's that the
#: fast decoders read; a field of issue 30 leaves its event to the strict path).
_FAST_FIELDS: dict[str, _Kind] = {
    model.TYPE: _Kind(
        model=model,
        checks={slot.name: _check(slot) for slot in slots},
        required=frozenset(slot.name for slot in slots if slot.fast_required),
        derivations=tuple(slot.name for slot in slots if slot.rule is Rule.DERIVATION),
    )
    for model, slots in fast_kinds().items()
}


def fast_event(obj: Any, policy: Policy | None) -> Event | None:
    """The event of a decoded object that certainly passes every check of
    ``events.event_from_json`` under ``policy``, else None (the strict path decides).
    Without a policy, the checks that need one are left out (a store's rows, validated
    under the store's policy when appended)."""
    if type(obj) is not dict:
        return None
    kind = obj.get("type")
    spec = _FAST_FIELDS.get(kind) if type(kind) is str else None
    if spec is None:
        return None
    checks = spec.checks
    keys = obj.keys()
    if not keys - _TYPE <= checks.keys() or not spec.required <= keys:
        return None
    try:
        fields = {name: checks[name](value) for name, value in obj.items() if name != "type"}
    except _Defer:
        return None
    event = spec.model(**fields)
    if policy is not None and not sound(event, policy):
        return None
    for name in spec.derivations:
        if fields.get(name) is not None:
            assert isinstance(event, Assert)
            if not derivation_sound(event):
                return None  # the strict path raises its error
    return event


_TYPE = frozenset({"type"})


def fast_line(line: str | bytes, policy: Policy) -> tuple[Event, str, bytes] | None:
    """One JSON line in any encoding decoded once into an event and its canonical text (as
    text and as the UTF-8 bytes the chain and the tree hash), or None (strict path)."""
    return typed_line(line, policy)
