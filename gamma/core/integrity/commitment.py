"""Hiding commitments to fact values (issue 30, SPEC §21).

A committed assert's chain bytes (what the hash chain and the Merkle leaf cover) are its
canonical JSON with ``value`` and ``salt`` left out and ``commitment`` in their place, where

    commitment = hex SHA-256(salt || canonical JSON of the value)

and ``salt`` is 32 random bytes. The value and its salt are kept beside the chain, so deleting
both destroys the value while every head, root, checkpoint and proof stays valid, and the
commitment alone confirms no guess of the value (the salt is as hard to guess as a key).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any

import attrs

from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.model import Assert, Value

__all__ = [
    "SALT_BYTES", "HEX_DIGEST", "new_salt", "commit", "is_hex_digest", "chain_object", "erased_copy",
    "COMMITTED_FIELDS",
]  # fmt: skip

SALT_BYTES = 32

#: 64 lowercase hex digits: how gamma writes a SHA-256 (a head, a root, a salt, a commitment)
HEX_DIGEST = re.compile(r"[0-9a-f]{64}")

#: the fields of an assert that a committed store keeps beside the chain, not in it
COMMITTED_FIELDS = ("value", "salt")


def new_salt() -> str:
    """A fresh salt: 32 bytes from the operating system's CSPRNG, as 64 lowercase hex digits.
    The only randomness in gamma, read at append like the clock, and stored with the event."""
    return secrets.token_hex(SALT_BYTES)


def is_hex_digest(text: object) -> bool:
    """Whether ``text`` is 64 lowercase hex digits (a salt or a commitment)."""
    return isinstance(text, str) and HEX_DIGEST.fullmatch(text) is not None


def commit(salt: str, value: Value) -> str:
    """The commitment to ``value`` under ``salt`` (64 hex digits each way)."""
    return hashlib.sha256(bytes.fromhex(salt) + canonical_json(value).encode("utf-8")).hexdigest()


def chain_object(obj: dict[str, Any]) -> dict[str, Any]:
    """The chain form of an assert's JSON object that carries a ``salt`` (and a value): the
    object without ``value`` and ``salt``, with their ``commitment``. An object with no salt is
    returned as it is (a plaintext assert, or an erased one that keeps only its commitment)."""
    salt = obj.get("salt")
    if salt is None:
        return obj
    body = {name: item for name, item in obj.items() if name not in COMMITTED_FIELDS}
    body["commitment"] = commit(salt, obj["value"])
    return body


def erased_copy(event: Assert) -> Assert:
    """``event`` with its value and salt gone and its commitment kept: its chain bytes (which
    a new object computes afresh from its fields) are the committed original's, so the heads
    and the tree stay what they were. A plaintext assert has nothing that could stay: refused."""
    if event.value is None:
        return event
    if event.commitment is not None:
        commitment = event.commitment
    elif event.salt is not None:
        commitment = commit(event.salt, event.value)
    else:
        raise ValueError(f"fact {event.fact!r}: its value is not committed, so it cannot be erased")
    return attrs.evolve(event, value=None, salt=None, commitment=commitment)
