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
from collections.abc import Callable
from sys import intern
from typing import Annotated, Any, ClassVar, Literal, Union

import attrs
import msgspec
from msgspec import Meta, Struct

from gamma.core.reading.schema import LISTED, Slot, fast_kinds, fields_of, named
from gamma.core.reading.stated import derivation_sound
from gamma.core.terms.model import (
    EVENT_TYPES,
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
# A timestamp's canonical form and a scope's grammar are checked by ``_builder``'s code, not by a
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
    printability, a scope's grammar and a stamp's form are ``_builder``'s)."""
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


_NotPlain = msgspec.DecodeError  # ValidationError is one too
_STAMP = re.compile(rf"{CANONICAL_TS.pattern}\Z")
_SCOPE = re.compile(rf"(?:global|{SCOPE_SYNTAX.pattern})\Z")
_scopes: dict[str, str] = {}  # each scope seen, checked and interned once
_SCOPES_KEPT = 4096  # so that a log of a million distinct scopes does not grow it unbounded


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


@attrs.frozen
class _Door:
    """One kind's way from its struct to its event: ``build`` (generated from the schema by
    ``_builder``; its third argument says the line is plain)."""

    model: type[Event]
    build: Callable[[Any, Policy | None, bool], Event | None]

    @classmethod
    def of(cls, model: type[Event]) -> _Door:
        return cls(model=model, build=_builder(model))


def _builder(model: type[Event]) -> Callable[[Any, Policy | None, bool], Event | None]:
    """The function from one kind's typed struct to its event, or None if a rule does not hold,
    written out as straight-line code from the schema once at import (as attrs writes an
    ``__init__``): no loop over field names per event. In turn: on a line not plain, each name
    printable as decoded, as ``events._check_id_text`` wants it at once (a name it would look
    at twice, to refuse or to let pass, is the strict path's; a scope needs no look, its
    grammar is ASCII; on a plain line every string is printable); each timestamp in canonical UTC
    form, one string object per repeated name (a million events hold a few thousand actors,
    tenants, keys and scopes, not a million copies of each), each scope of the grammar, msgspec
    building the attrs event (it parses the timestamps; a day that does not exist declines),
    a derivation sound, and with a policy the rules of ``sound`` that this kind's fields reach.
    Every check only declines: the strict path names the error.

    On a line not plain, a non-ASCII id, value, text or derivation is copied before the event
    takes it: encoding the canonical text left a UTF-8 copy cached inside the decoded string
    (CPython keeps it for the string's life), a third more memory for each such string held
    (the reason the non-ASCII encodings cost more per event than the ASCII ones)."""
    slots = {slot.name: slot for slot in fields_of(model)}
    code = [f"def build_{model.TYPE}(typed, policy, plain):"]
    looks = [
        line
        for name in named(model, Rule.ID, Rule.NAME)
        for line in _optional(slots[name], [
            f"if not typed.{name}.isprintable():",
            "    return None",
        ])  # fmt: skip
    ]
    for name in named(model, Rule.VISIBILITY):
        looks += [f"if typed.{name} is not None:"]
        for listed in LISTED:
            looks += [
                f"    names = typed.{name}.{listed}",
                "    if names and not all([item.isprintable() for item in names]):",
                "        return None",
            ]
    for name in named(model, Rule.ID, Rule.VALUE, Rule.TEXT, Rule.DERIVATION):
        looks += [
            f"found = typed.{name}",
            "if type(found) is str and not found.isascii():",
            f"    typed.{name} = _fresh((found, ''))",
        ]
    if looks:
        code += ["if not plain:", *(f"    {line}" for line in looks)]
    for name in named(model, Rule.STAMP):
        code += _optional(slots[name], [
            f"found = typed.{name}",
            "if len(found) == 20:",  # the usual form: msgspec checks every other place
            "    if found[10] != 'T' or found[19] != 'Z':",
            "        return None",
            "elif _stamp_match(found) is None:",
            "    return None",
        ])  # fmt: skip
    for name in named(model, Rule.NAME, Rule.LEVEL):
        code += _optional(slots[name], [f"typed.{name} = _intern(typed.{name})"])
    for name in named(model, Rule.SCOPE):
        code += _optional(slots[name], [
            f"found = _scopes.get(typed.{name})",
            "if found is None:",
            f"    found = _scope_of(typed.{name})",
            "    if found is None:",
            "        return None",
            f"typed.{name} = found",
        ])  # fmt: skip
    code += [
        "try:",
        "    event = _convert((typed,), _held, from_attributes=True).event",
        "except _NotPlain:",
        "    return None",
    ]
    for name in named(model, Rule.DERIVATION):
        code += [
            f"if typed.{name} is not None and not _derivation_sound(event):",
            "    return None",
        ]
    rules = _sound_code(model, "return None")
    if rules:
        code += ["if policy is not None:", *(f"    {line}" for line in rules)]
    code.append("return event")
    return _compiled(model, "build", code, _held=_held_struct(model))  # type: ignore[no-any-return]


def _compiled(model: type[Event], name: str, code: list[str], **names: Any) -> Any:
    """The function ``code`` (a def and its body's lines) defines for ``model``; ``names``
    are what only this function's code reads beside the module's helpers."""
    source = "\n    ".join(code) + "\n"
    scope: dict[str, Any] = {
        **names,
        "_intern": intern,
        "_fresh": "".join,
        "_stamp_match": _STAMP.match,
        "_scopes": _scopes,
        "_scope_of": _scope_of,
        "_convert": msgspec.convert,
        "_NotPlain": _NotPlain,
        "_derivation_sound": derivation_sound,
    }
    exec(compile(source, f"<gamma plain {name} {model.TYPE}>", "exec"), scope)  # noqa: S102
    return scope[f"{name}_{model.TYPE}"]


def _held_struct(model: type[Event]) -> Any:
    """A one-field struct holding an event of ``model``, converted from ``(typed,)``: for a
    struct msgspec keeps the type's analysis, where for an attrs class it would analyse the
    type again on every call (and look for ``__dataclass_fields__`` first, raising and clearing
    an AttributeError each time): a fifth to a third of a ``convert``'s cost."""
    return msgspec.defstruct(
        f"_Held{model.__name__}", [("event", model)], array_like=True, gc=False,
        module=__name__,
    )  # fmt: skip


def _optional(slot: Slot, lines: list[str]) -> list[str]:
    """``lines`` on a field the kind requires; under ``if it is not None`` on an optional one."""
    if slot.fast_required:
        return lines
    return [f"if typed.{slot.name} is not None:", *(f"    {line}" for line in lines)]


def _sound_code(model: type[Event], decline: str) -> list[str]:
    """The rules of ``events._check_semantics`` beyond names, scopes and types that this kind's
    fields reach, as lines of code over ``event`` and ``policy`` that run ``decline`` where one
    does not hold: authority and clearance on the policy's ladders, no over-claim where the
    policy refuses it, a validity window that ends after it starts, and a grant or a revoke
    naming exactly one target and one grantee."""
    fields = {slot.name for slot in fields_of(model)}
    code: list[str] = []
    if "authority" in fields:
        code += [
            "if event.authority is not None:",
            "    if not policy.knows_authority(event.authority):",
            f"        {decline}",
            "    if policy.over_claim == 'refuse' and policy.over_claims(event.authority,"
            " event.actor):",
            f"        {decline}",
        ]
    if issubclass(model, Assert):
        for name in named(model, Rule.VISIBILITY):
            code += [
                f"seen = event.{name}",
                "if seen is not None and seen.clearance is not None"
                " and not policy.knows_clearance(seen.clearance):",
                f"    {decline}",
            ]
        code += [
            "if event.valid_from is not None and event.valid_until is not None"
            " and not event.valid_until > event.valid_from:",
            f"    {decline}",
        ]
    elif issubclass(model, (Grant, Revoke)):
        for one, other in model.PAIRS:
            code += [f"if (event.{one} is None) == (event.{other} is None):", f"    {decline}"]
    return code


_DOORS: dict[type[_PlainLine], _Door] = {
    _struct(model, _PlainLine, slots, tag=model.TYPE): _Door.of(model)
    for model, slots in fast_kinds().items()
}
_MODEL: dict[type[_PlainLine], type[Event]] = {
    struct: door.model for struct, door in _DOORS.items()
}
_decode_plain = msgspec.json.Decoder(Union[tuple(_DOORS)]).decode  # noqa: UP007
_encode_plain = msgspec.json.Encoder(order="sorted").encode


def _line_event(
    line: str | bytes, policy: Policy | None, plain: bool = False
) -> tuple[Event, bytes] | None:
    """A line's event and its canonical text as UTF-8 bytes, in any valid encoding, or None
    (the strict path decides); one call per line for a reader (``plain``: the line is known
    plain, as a whole input scanned at once says). Without a policy, the checks that need
    one are left out.

    A plain line's names are printable as written; on another line ``build`` looks at each,
    and a colon may be written as an escape (the colon count would not see it: declined)."""
    if not plain:  # (``bytes.find``, not ``in``: ``in`` on bytes raises and clears an error)
        if isinstance(line, str):
            plain = line.isascii() and "\\" not in line and "\x7f" not in line
            if not plain and "\\u003" in line:
                return None
        else:
            plain = line.isascii() and line.find(b"\\") < 0 and line.find(b"\x7f") < 0
            if not plain and line.find(b"\\u003") >= 0:
                return None
    try:
        typed = _decode_plain(line)
    except (_NotPlain, RecursionError):  # skipping a deep value to find the tag: the strict
        return None  # path's depth check names it (SPEC §18)
    except UnicodeEncodeError:  # a str holding a lone surrogate: the strict path names it
        return None
    data = _encode_plain(typed)
    if (line.count(":") if isinstance(line, str) else line.count(b":")) != data.count(b":"):
        return None  # a repeated key or a null: more keys written than encoded
    event = _DOORS[type(typed)].build(typed, policy, plain)
    return None if event is None else (event, data)


def typed_line(line: str | bytes, policy: Policy | None) -> tuple[Event, str, bytes] | None:
    """A line's event and its canonical text (as text and as UTF-8 bytes) in any valid
    encoding, or None (the strict path decides). Without a policy, the checks that need one
    are left out."""
    found = _line_event(line, policy)
    return None if found is None else (found[0], found[1].decode("utf-8"), found[1])


def is_plain(text: str | bytes) -> bool:
    """Printable ASCII and no escape (of a line, or of a whole file at once)."""
    if isinstance(text, str):
        return text.isascii() and "\\" not in text and "\x7f" not in text  # DEL: not printable
    return text.isascii() and text.find(b"\\") < 0 and text.find(b"\x7f") < 0


def plain_line(
    line: str | bytes, policy: Policy | None, *, known_plain: bool = False
) -> tuple[Event, bytes] | None:
    """A plain line's event and its canonical text as UTF-8 (ASCII) bytes, in any spacing and
    key order, or None (another way in decides). Without a policy, the checks that need one
    are left out. A reader that found its whole input plain says so (``known_plain``) rather
    than have each line scanned."""
    if not known_plain and not is_plain(line):
        return None
    return _line_event(line, policy, True)


def sound(event: Event, policy: Policy) -> bool:
    """Whether an event holds the rules of ``events._check_semantics`` beyond names, scopes
    and types under ``policy`` (``_sound_code``: the same code ``build`` runs)."""
    return _SOUND[type(event)](event, policy)  # type: ignore[no-any-return]


#: Per kind, ``sound``'s rules written out for it.
_SOUND: dict[type[Event], Any] = {
    model: _compiled(model, "sound", [
        f"def sound_{model.TYPE}(event, policy):", *_sound_code(model, "return False"),
        "return True",
    ])  # fmt: skip
    for model in EVENT_TYPES.values()
}
