"""The typed way into the event model: a line in any valid JSON encoding, decoded and
type-checked by msgspec in C, and its canonical text re-encoded from what it decoded.

The structs are built at import from the model's schema (``reading.schema``): each field
typed by its rule, required or optional as the model declares it. One decode checks every
field's type, the event's tag, unknown and missing fields and the safe integer range,
whatever the spacing, the key order, the line end (CRLF) and the way a string is written
(ASCII, UTF-8, ``\\u`` escapes and surrogate pairs, decoded in C; a lone surrogate, a raw
control character, a float or NaN is refused there). The scope grammar (once per distinct
scope) and the canonical UTC form of every timestamp are checked next, and msgspec builds
the attrs event. The sorted encoding of the decoded line is its canonical text, byte for
byte what the strict path writes (``compact_json`` and msgspec escape alike; a property test
checks it), so the chain bytes are encoded once per event, whatever came in.

A key written twice (msgspec keeps one) or a null (left out of the encoding) is caught by
counting colons: outside strings a colon follows a key and nothing else, so a line whose
colons are as many as its canonical text's has as many keys (the strings' own colons are the
same on both sides, unless one is written ``\\u003a``: such a line is declined).

A *plain* line is printable ASCII with no escape (no byte outside 0x20-0x7E but JSON's own
whitespace, and no backslash). Its strings are printable, so a name needs only to be
non-empty there, and its canonical text is ASCII (``plain_line``). On any other line
(``typed_line``) every name must be printable as decoded: one that is not (a control or
format character, or a no-break space the strict path looks at and lets pass) is the strict
path's. Generated logs, gamma's own output and most hand-written logs are plain.

Like ``fastpath`` it only ever *accepts*: anything else (a field it refuses, a null, a
repeated key, a date that does not exist, a timestamp not in UTC form, a name the strict
path would look at twice, a policy rule, a digest of issue 30, an erase or a migration)
answers None and the reader tries the next way in. ``tests/test_plain.py``,
``tests/test_encodings.py`` and ``tests/test_schema.py`` pin this way to the strict path's
events, canonical text and errors in every encoding.
"""

from __future__ import annotations

import re
from sys import intern
from typing import Annotated, Any, ClassVar, Literal, Union

import attrs
import msgspec
from msgspec import Meta, Struct

from gamma.core.reading.schema import LISTED, Slot, fast_kinds, fields_of, named
from gamma.core.reading.stated import derivation_sound
from gamma.core.terms.model import (
    Assert,
    Event,
    Grant,
    Revoke,
    Rule,
    Visibility,
)
from gamma.core.terms.policy import Policy

__all__ = [
    "CANONICAL_TS",
    "MAX_SAFE_INTEGER",
    "SCOPE_SYNTAX",
    "is_plain",
    "plain_line",
    "sound",
    "typed_line",
]

#: A scope: ``global`` or '/'-separated segments (SPEC §2); the strict path uses it too.
SCOPE_SYNTAX = re.compile(r"[A-Za-z0-9_.:\-]+(?:/[A-Za-z0-9_.:\-]+)*")
#: A timestamp already in canonical UTC form: kept as written in the canonical text.
CANONICAL_TS = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.(?!000000)[0-9]{6})?Z"
)

#: The largest integer a value may be: beyond it a JSON number loses precision (SPEC §2).
MAX_SAFE_INTEGER = 2**53 - 1

# On a plain line every string is printable, so a name (id, actor, key, role, ...) is any
# non-empty string there.
_Name = Annotated[str, Meta(min_length=1)]
# A timestamp's canonical form and a scope's grammar are checked by ``_model``, not by a
# pattern here: msgspec calls Python's ``re`` for a pattern, which cost half of a decode.
_Stamp = Annotated[str, Meta(min_length=20, max_length=27)]
_Value = str | Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)] | bool


class _Visible(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """The base of a visibility's struct (its fields come from the model)."""


class _PlainLine(
    Struct, tag_field="type", forbid_unknown_fields=True, omit_defaults=True, kw_only=True, gc=False
):
    """The base of each kind's struct (its fields come from the model)."""

    # Not a field (a line holding it is refused): ``msgspec.convert`` reads it for the event's
    # ``_canonical`` slot, which the reader fills after; without it, looking for the missing
    # attribute would raise and clear an exception for every event (a sixth of its cost).
    _canonical: ClassVar[None] = None


def _typed(slot: Slot) -> Any:
    """The msgspec type of a field: its rule's, checked in C as the line is decoded (a name's
    printability, a scope's grammar and a stamp's form are ``_model``'s)."""
    if slot.rule is Rule.ONE_OF:
        return Literal[slot.choices]
    if slot.rule is Rule.VISIBILITY:
        return _VISIBLE_LINE
    return _TYPES[slot.rule]


_TYPES: dict[Rule, Any] = {
    Rule.ID: _Name,
    Rule.NAME: _Name,
    Rule.SCOPE: Annotated[str, Meta(min_length=1)],
    Rule.STAMP: _Stamp,
    Rule.VALUE: _Value,
    Rule.TEXT: str,
    Rule.LEVEL: str,
    Rule.IDS: tuple[_Name, ...],
    Rule.NAMES: Annotated[tuple[_Name, ...], Meta(min_length=1)],
    Rule.DERIVATION: str,
}


def _struct(cls: type, base: type[Struct], slots: tuple[Slot, ...], tag: str | None = None) -> Any:
    """The struct of a model class: each field it reads typed by its rule (optional unless the
    fast decoders need it written), and each model field it does not read a class attribute
    of value None, so that a line holding it is refused and ``msgspec.convert`` still finds
    it (a missing attribute costs a raised and cleared exception per event)."""
    read = {slot.name for slot in slots}
    fields = [
        (slot.name, _typed(slot)) if slot.fast_required else (slot.name, _typed(slot) | None, None)
        for slot in slots
    ]
    absent = {slot.name: None for slot in fields_of(cls) if slot.name not in read}
    return msgspec.defstruct(
        f"_{cls.__name__}", fields, bases=(base,), namespace={**absent, "__module__": __name__},
        tag=tag,
    )  # fmt: skip


_VISIBLE_LINE = _struct(Visibility, _Visible, fields_of(Visibility))


@attrs.frozen
class _Door:
    """What ``_model`` checks of one kind's struct, each a tuple of its fields' names."""

    model: type[Event]
    stamps: tuple[str, ...]
    interned: tuple[str, ...]  # names and levels: one string object per repeated name
    scopes: tuple[str, ...]
    derivations: tuple[str, ...]
    printable: tuple[str, ...]  # names a typed line must hold printable
    visibilities: tuple[str, ...]  # whose listed names are held to the same

    @classmethod
    def of(cls, model: type[Event]) -> _Door:
        return cls(
            model=model,
            stamps=named(model, Rule.STAMP),
            interned=named(model, Rule.NAME, Rule.LEVEL),
            scopes=named(model, Rule.SCOPE),
            derivations=named(model, Rule.DERIVATION),
            printable=named(model, Rule.ID, Rule.NAME),
            visibilities=named(model, Rule.VISIBILITY),
        )


_DOORS: dict[type[_PlainLine], _Door] = {
    _struct(model, _PlainLine, slots, tag=model.TYPE): _Door.of(model)
    for model, slots in fast_kinds().items()
}
_MODEL: dict[type[_PlainLine], type[Event]] = {struct: door.model for struct, door in _DOORS.items()}
_decode_plain = msgspec.json.Decoder(Union[tuple(_DOORS)]).decode  # noqa: UP007
_encode_plain = msgspec.json.Encoder(order="sorted").encode
_convert = msgspec.convert
_NotPlain = msgspec.DecodeError  # ValidationError is one too


_STAMP = re.compile(rf"{CANONICAL_TS.pattern}\Z")
_SCOPE = re.compile(rf"(?:global|{SCOPE_SYNTAX.pattern})\Z")
_scopes: dict[str, str] = {}  # each scope seen, checked and interned once
_SCOPES_KEPT = 4096  # so that a log of a million distinct scopes does not grow it unbounded


def _stamp_ok(stamp: str) -> bool:
    """A timestamp in canonical UTC form. For the usual ``YYYY-MM-DDTHH:MM:SSZ`` the ``T`` and
    the ``Z`` are enough: msgspec's parse of it (in ``_convert``) refuses anything but a digit
    and the separators at every other place (``tests/test_plain.py`` tries each character)."""
    if len(stamp) == 20:
        return stamp[10] == "T" and stamp[19] == "Z"
    return _STAMP.match(stamp) is not None


def _scope_of(scope: str) -> str | None:
    """The one string object of a scope of the grammar, or None."""
    found = _scopes.get(scope)
    if found is None:
        if _SCOPE.match(scope) is None:
            return None
        found = intern(scope)
        if len(_scopes) < _SCOPES_KEPT:
            _scopes[found] = found
    return found


def _model(typed: Any) -> Event | None:
    """The attrs event of a typed line (msgspec parses the timestamps), or None if a timestamp
    or a scope is not canonical or a derivation unsound. One string object per repeated name:
    a million events hold a few thousand actors, tenants, keys and scopes, not a million
    copies of each."""
    door = _DOORS[type(typed)]
    for name in door.stamps:
        found = getattr(typed, name)
        if found is not None and not _stamp_ok(found):
            return None
    for name in door.interned:
        found = getattr(typed, name)
        if found is not None:
            setattr(typed, name, intern(found))
    for name in door.scopes:
        found = getattr(typed, name)
        if found is not None:
            scope = _scope_of(found)
            if scope is None:
                return None
            setattr(typed, name, scope)
    event: Event = _convert(typed, door.model, from_attributes=True)
    for name in door.derivations:
        if getattr(typed, name) is not None:
            assert isinstance(event, Assert)
            if not derivation_sound(event):
                return None  # the strict path raises its error
    return event


def _names_printable(typed: _PlainLine) -> bool:
    """Every name of a typed line is printable, as ``events._check_id_text`` wants it at once
    (a name it would look at twice, to refuse or to let pass, is the strict path's). A scope
    needs no look: its grammar is ASCII."""
    door = _DOORS[type(typed)]
    for name in door.printable:
        found = getattr(typed, name)
        if found is not None and not found.isprintable():
            return False
    for name in door.visibilities:
        seen = getattr(typed, name)
        if seen is not None:
            for listed in LISTED:
                names = getattr(seen, listed)
                if names and not all(item.isprintable() for item in names):
                    return False
    return True


def _decoded(line: str | bytes) -> tuple[_PlainLine, bytes] | None:
    """A line's typed struct and its canonical bytes, or None: not JSON, a type refused, a key
    written twice, a null."""
    try:
        typed = _decode_plain(line)
    except (_NotPlain, RecursionError):  # skipping a deep value to find the tag: the strict
        return None  # path's depth check names it (SPEC §18)
    except UnicodeEncodeError:  # a str holding a lone surrogate: the strict path names it
        return None
    data = _encode_plain(typed)
    colons = line.count(":") if isinstance(line, str) else line.count(b":")
    if colons != data.count(b":"):
        return None  # a repeated key or a null: more keys written than encoded
    return typed, data


def _checked(typed: _PlainLine, policy: Policy | None) -> Event | None:
    """The event of a typed line whose names are known printable, if every rule holds."""
    try:
        event = _model(typed)
    except _NotPlain:
        return None  # a timestamp of a day that does not exist
    if event is None:
        return None
    if policy is not None and not sound(event, policy):
        return None
    return event


def typed_line(line: str | bytes, policy: Policy | None) -> tuple[Event, str, bytes] | None:
    """A line's event and its canonical text (as text and as UTF-8 bytes) in any valid
    encoding, or None (the strict path decides). Without a policy, the checks that need one
    are left out."""
    if ("\\u003" in line) if isinstance(line, str) else (b"\\u003" in line):
        return None  # maybe a colon written as an escape: the count above would not see it
    found = _decoded(line)
    if found is None:
        return None
    typed, data = found
    text = data.decode("utf-8")
    # No escape in the canonical text: each string is in it as decoded, so a printable text
    # has printable names. Else (a control character, a quote or a backslash in some string,
    # or a character that is not printable) each name is looked at.
    if ("\\" in text or not text.isprintable()) and not _names_printable(typed):
        return None
    event = _checked(typed, policy)
    return None if event is None else (event, text, data)


def is_plain(text: str | bytes) -> bool:
    """Printable ASCII and no escape (of a line, or of a whole file at once)."""
    if isinstance(text, str):
        return text.isascii() and "\\" not in text and "\x7f" not in text  # DEL: not printable
    return text.isascii() and b"\\" not in text and b"\x7f" not in text


def plain_line(
    line: str | bytes, policy: Policy | None, *, known_plain: bool = False
) -> tuple[Event, bytes] | None:
    """A plain line's event and its canonical text as UTF-8 (ASCII) bytes, in any spacing and
    key order, or None (another way in decides). Without a policy, the checks that need one
    are left out. A reader that found its whole input plain says so (``known_plain``) rather
    than have each line scanned."""
    if not known_plain and not is_plain(line):
        return None
    found = _decoded(line)
    if found is None:
        return None
    event = _checked(found[0], policy)
    return None if event is None else (event, found[1])


def sound(event: Event, policy: Policy) -> bool:
    """The rules of ``events._check_semantics`` beyond names, scopes and types: authority and
    clearance on the policy's ladders, no over-claim where the policy refuses it, a validity
    window that ends after it starts, and grants naming exactly one target and one grantee."""
    authority = getattr(event, "authority", None)
    if authority is not None:
        if not policy.knows_authority(authority):
            return False
        if policy.over_claim == "refuse" and policy.over_claims(authority, event.actor):
            return False
    if isinstance(event, Assert):
        visibility = event.visibility
        if (
            visibility is not None
            and visibility.clearance is not None
            and not policy.knows_clearance(visibility.clearance)
        ):
            return False
        start, end = event.valid_from, event.valid_until
        return start is None or end is None or end > start
    if isinstance(event, (Grant, Revoke)):
        return all(
            (getattr(event, one) is None) != (getattr(event, other) is None)
            for one, other in event.PAIRS
        )
    return True
