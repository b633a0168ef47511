"""Canonical JSON, digests and timestamps: the bytes everything else hashes.

Canonical JSON is keys sorted by code point, no whitespace, UTF-8, no floats.
Timestamps are RFC 3339 with an offset in, UTC ``YYYY-MM-DDTHH:MM:SSZ`` out.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar

import msgspec
import orjson

from gamma.core.terms.errors import ValueTypeError

__all__ = ["canonical_json", "canonical_text", "canonical_list", "canonical_records", "canonical_bytes", "compact_json", "parse_at", "sha256_hex", "digest_of", "parse_ts", "format_ts", "unsafe_character", "MAX_SAFE_INT"]

MAX_SAFE_INT = 2**53 - 1

T = TypeVar("T")

_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))"
)


def unsafe_character(text: str) -> str | None:
    """The first control, format (Cf: bidi, zero-width, tag) or unassigned-surrogate character
    of ``text``, as ``U+XXXX``, or None. Names (ids, keys, roles, actors, scopes, a policy's
    levels and writers) refuse them."""
    if text.isprintable():  # printable excludes every category refused below
        return None
    for char in text:
        if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            return f"U+{ord(char):04X}"
    return None


def canonical_json(obj: Any) -> str:
    """Serialise ``obj`` canonically; refuses floats so bytes never depend on float printing."""
    _refuse_floats(obj)
    return compact_json(obj)


def compact_json(obj: Any) -> str:
    """Keys sorted by code point, no whitespace, UTF-8 text: the canonical layout, without the
    float check, for objects already known to hold none (validated events, resolutions) and for
    machine output that may hold rates."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_text(obj: Any) -> str:
    """``compact_json`` of JSON data known to hold no float (validated events, resolutions),
    encoded in C: byte-equal to it (a property test checks it), several times faster."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode("utf-8")


#: Records encoded at once by ``canonical_list``: their data is built, encoded and freed while
#: still in the processor's cache (a resolution's 40,000 excluded facts encode about twice as
#: fast in chunks of this size as in one list).
CHUNK = 256


def canonical_list(items: Sequence[T], data: Callable[[T], Any]) -> bytes:
    """``canonical_text([data(x) for x in items])`` as UTF-8, built a chunk of items at a time."""
    parts = [
        orjson.dumps([data(x) for x in items[i : i + CHUNK]], option=orjson.OPT_SORT_KEYS)[1:-1]
        for i in range(0, len(items), CHUNK)
    ]
    return b"[" + b",".join(parts) + b"]"


_encode_records = msgspec.json.Encoder(order="sorted").encode


def canonical_records(records: Sequence[Any]) -> bytes:
    """The canonical JSON (UTF-8) of a list of attrs records whose every field is written out
    as it is: str, int, bool, None, tuples of those, and such records. msgspec reads the fields
    in C, with no dict built per record, and escapes strings as ``compact_json`` does (a
    property test pins the bytes to ``compact_json`` of the converter's dicts)."""
    return _encode_records(records)


def canonical_bytes(obj: Any) -> bytes:
    """``canonical_text(obj)`` as UTF-8, as encoded."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def _refuse_floats(obj: Any) -> None:
    if isinstance(obj, float):
        raise TypeError(f"floats are not canonical: {obj!r}")
    if isinstance(obj, dict):
        for value in obj.values():
            _refuse_floats(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            _refuse_floats(value)


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def digest_of(obj: Any) -> str:
    """The sha256 hex of the canonical JSON of ``obj``."""
    return sha256_hex(canonical_json(obj))


def parse_ts(text: object) -> datetime:
    """Parse an RFC 3339 timestamp that carries an offset; raise ValueError otherwise.

    At most six fractional digits and no leap second (``:60``): canonical bytes
    must round-trip through Python's datetime.
    """
    if not isinstance(text, str):
        raise ValueError(f"expected an RFC 3339 timestamp string, got {text!r}")
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(
            f"not an RFC 3339 timestamp with offset (e.g. 2026-03-01T09:00:00Z): {text!r}"
        )
    year, month, day, hour, minute, second, frac, zulu, sign, oh, om = match.groups()
    if frac is not None and len(frac) > 6:
        raise ValueError(f"more than six fractional second digits: {text!r}")
    if int(second) == 60:
        raise ValueError(f"leap seconds (:60) are not supported: {text!r}")
    if zulu:
        tz = UTC
    else:
        if int(oh) > 23 or int(om) > 59:
            raise ValueError(f"offset out of range: {text!r}")
        delta = timedelta(hours=int(oh), minutes=int(om))
        tz = timezone(-delta if sign == "-" else delta)
    micro = int((frac or "0").ljust(6, "0"))
    try:
        value = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=tz
        )
        return value.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"not a valid instant: {text!r} ({exc})") from None


def parse_at(value: object) -> datetime:
    """The time a caller asks about: an RFC 3339 string or an aware datetime, else an input
    error on field ``at`` (a naive datetime has no instant to compare)."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueTypeError("a datetime without a time zone is no instant", field="at")
        return value
    try:
        return parse_ts(value)
    except ValueError as exc:
        raise ValueTypeError(str(exc), field="at") from None


def format_ts(value: datetime) -> str:
    """UTC ``YYYY-MM-DDTHH:MM:SSZ``, with ``.ffffff`` only when the fraction is non-zero."""
    utc = value.astimezone(UTC)
    base = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        base += f".{utc.microsecond:06d}"
    return base + "Z"
