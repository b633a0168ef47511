"""The first way into the event model: a plain line, decoded and type-checked by msgspec in C.

A *plain* line is printable ASCII with no escape: no byte outside 0x20-0x7E but the JSON
structure itself, and no backslash. On such a line every string is already printable (so a
name needs only to be non-empty), nothing can be a lone surrogate, and the canonical text has
no escape either, so msgspec's sorted encoding of the decoded line *is* the canonical text.
Generated logs, gamma's own output and most hand-written logs are plain.

One decode checks every field's type, the event's tag, unknown and missing fields and the
safe integer range; the scope grammar (once per distinct scope) and the canonical UTC form
of every timestamp are checked next, and msgspec builds the attrs event. Like ``fastpath``
it only ever *accepts*: anything else (not plain, a field it refuses, a null, a date that
does not exist, a policy rule) answers None and the reader tries the next way in. Why a
repeated key, whitespace or a null is caught by length alone: see ``fastpath``. Properties
in ``tests/test_plain.py`` pin this way to the strict path's events, canonical text and
errors.
"""

from __future__ import annotations

import re
import sys
from typing import Annotated, ClassVar, Literal

import msgspec
from msgspec import Meta, Struct

from gamma.core.fastpath import CANONICAL_TS, SCOPE_SYNTAX, sound
from gamma.core.model import (
    Assert,
    Event,
    Experience,
    Grant,
    Promote,
    Retract,
    Revoke,
)
from gamma.core.policy import Policy
from gamma.core.stated import derivation_sound

__all__ = ["is_plain", "plain_line"]

_MAX_SAFE = 2**53 - 1

# On a plain line every string is printable, so a name (id, actor, key, role, ...) is any
# non-empty string there.
_Name = Annotated[str, Meta(min_length=1)]
_Names = tuple[_Name, ...]
_Listed = Annotated[tuple[_Name, ...], Meta(min_length=1)]
# A timestamp's canonical form and a scope's grammar are checked by ``_model``, not by a
# pattern here: msgspec calls Python's ``re`` for a pattern, which cost half of a decode.
_Stamp = Annotated[str, Meta(min_length=20, max_length=27)]
_Scope = Annotated[str, Meta(min_length=1)]
_Value = str | Annotated[int, Meta(ge=-_MAX_SAFE, le=_MAX_SAFE)] | bool


class _Visibility(Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    roles: _Listed | None = None
    actors: _Listed | None = None
    clearance: str | None = None


class _Line(
    Struct, tag_field="type", forbid_unknown_fields=True, omit_defaults=True, kw_only=True, gc=False
):
    id: _Name
    ts: _Stamp
    actor: _Name
    tenant: _Name
    # Not a field (a line holding it is refused): ``msgspec.convert`` reads it for the event's
    # ``_canonical`` slot, which the reader fills after; without it, looking for the missing
    # attribute would raise and clear an exception for every event (a sixth of its cost).
    _canonical: ClassVar[None] = None


class _Assert(_Line, tag="assert"):
    fact: _Name
    key: _Name
    value: _Value
    scope: _Scope | None = None
    status: Literal["committed", "draft", "hypothetical"] | None = None
    authority: str | None = None
    kind: Literal["fact", "constraint", "commitment", "preference", "rule", "derived"] | None = None
    priority: Literal["hard", "soft"] | None = None
    visibility: _Visibility | None = None
    valid_from: _Stamp | None = None
    valid_until: _Stamp | None = None
    depends_on: _Names | None = None
    supersedes: _Names | None = None
    derivation: str | None = None


class _Retract(_Line, tag="retract"):
    fact: _Name
    authority: str | None = None
    reason: str | None = None


class _Promote(_Line, tag="promote"):
    fact: _Name
    authority: str | None = None


class _Access(_Line):
    """The fields a grant and a revoke share (exactly one of each pair: ``sound`` checks)."""

    fact: _Name | None = None
    key: _Name | None = None
    role: _Name | None = None
    to_actor: _Name | None = None
    authority: str | None = None


class _Grant(_Access, tag="grant"):
    pass


class _Revoke(_Access, tag="revoke"):
    pass


class _Experience(_Line, tag="experience"):
    experience: _Name
    content: str
    uses: _Names | None = None
    applicability: Literal["applicable", "adaptable", "unusable"] | None = None


_MODEL: dict[type[_Line], type[Event]] = {
    _Assert: Assert,
    _Retract: Retract,
    _Promote: Promote,
    _Grant: Grant,
    _Revoke: Revoke,
    _Experience: Experience,
}
_decode = msgspec.json.Decoder(_Assert | _Retract | _Promote | _Grant | _Revoke | _Experience).decode
_encode = msgspec.json.Encoder(order="sorted").encode
_convert = msgspec.convert
_intern = sys.intern
_Refused = msgspec.DecodeError  # ValidationError is one too


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
        found = _intern(scope)
        if len(_scopes) < _SCOPES_KEPT:
            _scopes[found] = found
    return found


def _model(typed: _Line) -> Event | None:
    """The attrs event of a typed line (msgspec parses the timestamps), or None if a timestamp
    or a scope is not canonical. One string object per repeated name: a million events hold a
    few thousand actors, tenants, keys and scopes, not a million copies of each."""
    if not _stamp_ok(typed.ts):
        return None
    typed.actor = _intern(typed.actor)
    typed.tenant = _intern(typed.tenant)
    if type(typed) is _Assert:
        typed.key = _intern(typed.key)
        if typed.scope is not None:
            scope = _scope_of(typed.scope)
            if scope is None:
                return None
            typed.scope = scope
        if typed.authority is not None:
            typed.authority = _intern(typed.authority)
        for stamp in (typed.valid_from, typed.valid_until):
            if stamp is not None and not _stamp_ok(stamp):
                return None
    event: Event = _convert(typed, _MODEL[type(typed)], from_attributes=True)
    if type(typed) is _Assert and typed.derivation is not None:
        assert isinstance(event, Assert)
        if not derivation_sound(event):
            return None  # the strict path raises its error
    return event


def is_plain(text: str | bytes) -> bool:
    """Printable ASCII and no escape (of a line, or of a whole file at once)."""
    if isinstance(text, str):
        return text.isascii() and "\\" not in text and "\x7f" not in text  # DEL: not printable
    return text.isascii() and b"\\" not in text and b"\x7f" not in text


def plain_line(
    line: str | bytes, policy: Policy | None, *, known_plain: bool = False
) -> tuple[Event, bytes] | None:
    """A plain line's event and its canonical text as UTF-8 (ASCII) bytes, or None (another
    way in decides). Without a policy, the checks that need one are left out. A reader that
    found its whole input plain says so (``known_plain``) rather than have each line scanned."""
    if not known_plain and not is_plain(line):
        return None
    try:
        typed = _decode(line)
    except (_Refused, RecursionError):  # skipping a deep value to find the tag: the strict
        return None  # path's depth check names it (SPEC §18)
    data = _encode(typed)
    if len(data) != len(line):
        return None  # a repeated key, whitespace or a null
    try:
        event = _model(typed)
    except _Refused:
        return None  # a timestamp of a day that does not exist
    if event is None:
        return None
    if policy is not None and not sound(event, policy):
        return None
    return event, data
