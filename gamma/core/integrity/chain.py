"""The hash chain over canonical events: h_i = sha256(h_{i-1} || c_i), h_0 = 32 zero bytes.

With a key, a second chain m_i = HMAC-SHA256(key, m_{i-1} || c_i) is kept
beside it, so that whoever can rewrite the file cannot recompute the chain.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

__all__ = ["GENESIS", "GENESIS_HEX", "step", "step_bytes", "keyed_step", "head_of"]

GENESIS = bytes(32)
GENESIS_HEX = GENESIS.hex()


def step(previous: bytes, canonical: str) -> bytes:
    """The next plain head after one canonical event."""
    return step_bytes(previous, canonical.encode("utf-8"))


def step_bytes(previous: bytes, data: bytes) -> bytes:
    """``step`` over an event's canonical UTF-8 bytes, for a reader that holds them already
    (and hands the same bytes to the tree)."""
    return hashlib.sha256(previous + data).digest()


def keyed_step(key: bytes, previous: bytes, canonical: str) -> bytes:
    """The next keyed head after one canonical event."""
    return hmac.new(key, previous + canonical.encode("utf-8"), hashlib.sha256).digest()


def head_of(canonical_events: Iterable[str], *, key: bytes | None = None) -> str:
    """The head (hex) after the given canonical events; the keyed head when ``key`` is given."""
    head = GENESIS
    if key is not None:
        for canonical in canonical_events:
            head = keyed_step(key, head, canonical)
        return head.hex()
    for canonical in canonical_events:
        head = step_bytes(head, canonical.encode("utf-8"))
    return head.hex()
