"""The input limits of SPEC §18: fixed, so that no policy can lift the engine's own safety.

Each bounds what a hostile input could otherwise make the engine hold or recurse on; each is
far above what a legitimate log reaches (the bundled fixtures' maxima are in SPEC §18).
"""

from __future__ import annotations

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_STRING_BYTES",
    "MAX_CONTEXT_BYTES",
    "MAX_POLICY_BYTES",
]

MAX_DEPTH = 32
"""Containers (objects and lists) open at once in one JSON document; an event needs 3."""

MAX_LINE_BYTES = 1 << 20
"""UTF-8 bytes of one log line, its newline not counted."""

MAX_STRING_BYTES = 1 << 16
"""UTF-8 bytes of one string of an event (a value, an experience's content, a reason, a name)."""

MAX_CONTEXT_BYTES = 1 << 22
"""UTF-8 bytes of one rendered context block; past it the rendering fails (fail closed)."""

MAX_POLICY_BYTES = 1 << 20
"""Bytes of one policy file."""
