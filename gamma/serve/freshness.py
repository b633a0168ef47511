"""Freshness tokens: a position in the log, and a MAC binding it to the log's Merkle root there.

A token names one exact prefix of one log, so a caller can ask for a decision at least as
fresh as a write it saw (read-after-write, read-after-revoke) or over exactly that prefix (a
repeatable read), and a token of another log is refused. The root is not in the token: a
root over the whole log commits to every value, other tenants' and hidden ones too, so with
every other event known a caller could test a guess of a hidden value against it offline.
The token carries ``HMAC-SHA256(key, "gamma-token/1" 0x00 position(8 bytes, big-endian)
root(32 bytes))`` instead, under the deployment's token key (32 random bytes kept with the
decision log, ``gamma.storage.decisions``): only the server can make or check one, and a
MAC says nothing about the root to anyone without the key.

The text form is ``gt1.<position>.<mac>``: the version tag, the position in decimal without
leading zeros, and the MAC in 64 lowercase hex digits; anything else is refused, so one
token has one spelling and a cache or a log may compare tokens as strings.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Protocol, Self

import attrs

from gamma.core.integrity.commitment import HEX_DIGEST
from gamma.core.integrity.merkle import TreeHead
from gamma.core.terms.canonical import MAX_SAFE_INT
from gamma.core.terms.errors import ValueTypeError
from gamma.storage.decisions import TOKEN_KEY_BYTES

__all__ = ["FreshnessToken", "PREFIX", "KEY_BYTES", "token_mac"]

#: The version tag every token starts with (a later format gets another tag).
PREFIX = "gt1"
#: The length of a token key, in bytes.
KEY_BYTES = TOKEN_KEY_BYTES
#: What a token's MAC is over starts with this, so it is no other HMAC under the same key.
_DOMAIN = b"gamma-token/1\x00"

# at most 16 digits: the largest JSON-safe position (2**53 - 1) has 16
_TEXT = re.compile(r"gt1\.(0|[1-9][0-9]{0,15})\.([0-9a-f]{64})")
#: Longer text is refused before it is matched: a token is never near this long.
_MAX_TEXT = 96


class _HasTreeHead(Protocol):
    @property
    def tree_head(self) -> TreeHead: ...


def _position(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SAFE_INT:
        raise ValueTypeError(f"a position is an integer from 0 to {MAX_SAFE_INT}, got {value!r}",
                             field="position")  # fmt: skip


def _mac(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or HEX_DIGEST.fullmatch(value) is None:
        raise ValueTypeError(f"a token's MAC is 64 lowercase hex digits, got {value!r}",
                             field="mac")  # fmt: skip


def token_mac(key: bytes, position: int, root: str) -> str:
    """The MAC (hex) of the log whose first ``position`` events have Merkle root ``root``."""
    if len(key) != KEY_BYTES:
        raise ValueTypeError(f"a token key is {KEY_BYTES} bytes, got {len(key)}", field="key")
    message = _DOMAIN + position.to_bytes(8, "big") + bytes.fromhex(root)
    return hmac.new(key, message, hashlib.sha256).hexdigest()


@attrs.frozen
class FreshnessToken:
    """The log after its first ``position`` events, named by a MAC over its Merkle root there."""

    position: int = attrs.field(validator=_position)
    mac: str = attrs.field(validator=_mac)

    def encode(self) -> str:
        """``gt1.<position>.<mac>``: the one spelling of this token."""
        return f"{PREFIX}.{self.position}.{self.mac}"

    def matches(self, key: bytes, root: str) -> bool:
        """Whether this token names the log whose root at its position is ``root`` (in
        constant time: a MAC compared byte by byte would leak how much of it was right)."""
        return hmac.compare_digest(self.mac, token_mac(key, self.position, root))

    @classmethod
    def make(cls, key: bytes, position: int, root: str) -> Self:
        """The token of the log whose first ``position`` events have Merkle root ``root``."""
        return cls(position=position, mac=token_mac(key, position, root))

    @classmethod
    def decode(cls, text: object, *, field: str) -> Self:
        """The token ``text`` spells; an InputError naming ``field`` (a header, a query
        parameter) for anything but the exact form ``gt1.<position>.<64 lowercase hex>``."""
        if not isinstance(text, str):
            raise ValueTypeError(f"a freshness token is a string, got {type(text).__name__}",
                                 field=field)  # fmt: skip
        match = _TEXT.fullmatch(text) if len(text) <= _MAX_TEXT else None
        if match is None:
            shown = text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + "…"
            raise ValueTypeError(
                f"not a freshness token (gt1.<position>.<64 lowercase hex>): {shown!r}",
                field=field,
            )
        position = int(match.group(1))
        if position > MAX_SAFE_INT:
            raise ValueTypeError(f"a token's position is at most {MAX_SAFE_INT}", field=field)
        return cls(position=position, mac=match.group(2))

    @classmethod
    def of(cls, view: _HasTreeHead, key: bytes) -> Self:
        """The token of everything ``view`` holds (``gamma.Engine``, ``EngineState``)."""
        head = view.tree_head
        return cls.make(key, head.size, head.root)
