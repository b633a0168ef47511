"""The fast ways into the event model that ``plain`` does not cover: any line (``fast_line``),
and an object already decoded (``fast_event``: a store's rows, objects handed in from Python).

``fast_line`` is ``plain.typed_line`` for a line in any encoding (whitespace, key order,
UTF-8, ``\\u`` escapes, CRLF): msgspec decodes it once into typed structs, every name is
checked on its decoded text, and the canonical text is re-encoded from the decoded line, once.
``fast_event`` structures a decoded object by hand.

Both only ever *accept*. Whatever they are not sure of (a float, an integer past
±(2^53-1), a key written twice, an unknown, missing or null field, a type the strict hooks
refuse, a name with a character the strict path would look at, a timestamp not already in
UTC canonical form, a field of issue 30) makes them answer None, and the caller takes the
strict path (``decode_json`` and the cattrs converter), which builds the same event or raises
the error naming line and field. ``tests/test_events.py`` and ``tests/test_encodings.py`` pin
the paths to the same events, canonical text and errors on generated valid and malformed logs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from sys import intern
from typing import Any

from gamma.core.reading.plain import (
    CANONICAL_TS,
    MAX_SAFE_INTEGER,
    SCOPE_SYNTAX,
    sound,
    typed_line,
)
from gamma.core.reading.stated import derivation_sound
from gamma.core.terms.caches import remember
from gamma.core.terms.model import (
    APPLICABILITIES,
    KINDS,
    PRIORITIES,
    STATUSES,
    Assert,
    Event,
    Experience,
    Grant,
    Promote,
    Retract,
    Revoke,
    Visibility,
)
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


_VISIBILITY: dict[str, Callable[[Any], Any]] = {
    "roles": _listed_names,
    "actors": _listed_names,
    "clearance": _label,
}

_ENVELOPE = {"id": _ident, "ts": _fast_ts, "actor": _fast_name, "tenant": _fast_name}
_ACCESS_FIELDS = {
    "fact": _ident, "key": _fast_name, "role": _fast_name, "to_actor": _fast_name,
    "authority": _label,
}  # fmt: skip
_FAST_FIELDS: dict[str, tuple[type[Event], dict[str, Callable[[Any], Any]], frozenset[str]]] = {
    "assert": (
        Assert,
        {
            **_ENVELOPE, "fact": _ident, "key": _fast_name, "value": _fast_value, "scope": _scope,
            "status": _literal(STATUSES), "authority": _label, "kind": _literal(KINDS),
            "priority": _literal(PRIORITIES), "visibility": _visibility, "valid_from": _fast_ts,
            "valid_until": _fast_ts, "depends_on": _fast_names, "supersedes": _fast_names,
            "derivation": _str,
        },
        frozenset({"id", "ts", "actor", "tenant", "fact", "key", "value"}),
    ),
    "retract": (
        Retract,
        {**_ENVELOPE, "fact": _ident, "authority": _label, "reason": _str},
        frozenset({"id", "ts", "actor", "tenant", "fact"}),
    ),
    "promote": (
        Promote,
        {**_ENVELOPE, "fact": _ident, "authority": _label},
        frozenset({"id", "ts", "actor", "tenant", "fact"}),
    ),
    "grant": (Grant, {**_ENVELOPE, **_ACCESS_FIELDS}, frozenset({"id", "ts", "actor", "tenant"})),
    "revoke": (Revoke, {**_ENVELOPE, **_ACCESS_FIELDS}, frozenset({"id", "ts", "actor", "tenant"})),
    "experience": (
        Experience,
        {
            **_ENVELOPE, "experience": _ident, "content": _str, "uses": _fast_names,
            "applicability": _literal(APPLICABILITIES),
        },
        frozenset({"id", "ts", "actor", "tenant", "experience", "content"}),
    ),
}  # fmt: skip


def fast_event(obj: Any, policy: Policy | None) -> Event | None:
    """The event of a decoded object that certainly passes every check of
    ``events.event_from_json`` under ``policy``, else None (the strict path decides).
    Without a policy, the checks that need one are left out (a store's rows, validated
    under the store's policy when appended)."""
    if type(obj) is not dict:
        return None
    kind = obj.get("type")
    if kind == "assert":
        return _assert(obj, policy)
    spec = _FAST_FIELDS.get(kind) if type(kind) is str else None
    if spec is None:
        return None
    cls, checks, required = spec
    keys = obj.keys()
    if not keys - _TYPE <= checks.keys() or not required <= keys:
        return None
    try:
        fields = {name: checks[name](value) for name, value in obj.items() if name != "type"}
    except _Defer:
        return None
    event = cls(**fields)
    if policy is not None and not sound(event, policy):
        return None
    return event


_TYPE = frozenset({"type"})
_ASSERT_FIELDS = frozenset(_FAST_FIELDS["assert"][1]) | {"type"}
_ASSERT_REQUIRED = _FAST_FIELDS["assert"][2]
_STATUS = {name: name for name in STATUSES}
_KIND = {name: name for name in KINDS}
_PRIORITY = {name: name for name in PRIORITIES}


def _optional(value: Any, table: dict[str, str]) -> Any:
    if value is None:
        return None
    if type(value) is not str or value not in table:
        raise _Defer
    return table[value]


def _assert(obj: dict[str, Any], policy: Policy | None) -> Assert | None:
    """``fast_event`` for the commonest event, written out field by field."""
    keys = obj.keys()
    if not keys <= _ASSERT_FIELDS or not _ASSERT_REQUIRED <= keys or None in obj.values():
        return None
    get = obj.get
    try:
        actor = _fast_name(obj["actor"])
        authority = get("authority")
        if authority is not None:
            authority = _label(authority)
            if policy is not None and (not policy.knows_authority(authority) or (
                policy.over_claim == "refuse" and policy.over_claims(authority, actor)
            )):
                return None
        visibility = get("visibility")
        if visibility is not None:
            visibility = _visibility(visibility)
            if (
                policy is not None
                and visibility.clearance is not None
                and not policy.knows_clearance(visibility.clearance)
            ):
                return None
        start, end = get("valid_from"), get("valid_until")
        if start is not None:
            start = _fast_ts(start)
        if end is not None:
            end = _fast_ts(end)
            if start is not None and end <= start:
                return None
        scope, depends_on, supersedes = get("scope"), get("depends_on"), get("supersedes")
        derivation = get("derivation")
        event = Assert(
            id=_ident(obj["id"]),
            ts=_fast_ts(obj["ts"]),
            actor=actor,
            tenant=_fast_name(obj["tenant"]),
            fact=_ident(obj["fact"]),
            key=_fast_name(obj["key"]),
            value=_fast_value(obj["value"]),
            scope=None if scope is None else _scope(scope),
            status=_optional(get("status"), _STATUS),
            authority=authority,
            kind=_optional(get("kind"), _KIND),
            priority=_optional(get("priority"), _PRIORITY),
            visibility=visibility,
            valid_from=start,
            valid_until=end,
            depends_on=None if depends_on is None else _fast_names(depends_on),
            supersedes=None if supersedes is None else _fast_names(supersedes),
            derivation=None if derivation is None else _str(derivation),
        )
    except _Defer:
        return None
    if derivation is not None and not derivation_sound(event):
        return None  # the strict path raises its error
    return event


def fast_line(line: str | bytes, policy: Policy) -> tuple[Event, str, bytes] | None:
    """One JSON line in any encoding decoded once into an event and its canonical text (as
    text and as the UTF-8 bytes the chain and the tree hash), or None (strict path)."""
    return typed_line(line, policy)
