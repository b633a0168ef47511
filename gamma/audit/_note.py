"""The C2SP signed-note grammar over bytes, as Go's ``golang.org/x/mod/sumdb/note`` reads it.

A note is UTF-8 with no control character below U+0020 but the newline (so no
CR: a note is never read with newline translation); its text runs to the last
blank line and ends in a newline; then one or more lines ``— <name> <base64>``,
each ending in a newline, where the name is a key name (non-empty, no Unicode
space, no ``+``) and the base64 (standard, padded) holds a 4-byte key id and
at least one byte of signature; more than 100 lines make the note malformed.
Reading follows Go's ``note.Open`` step for step, so the same notes are
malformed (an InputError here), unsigned or signed:
``tests/test_go_interop.py`` holds the two to the same answers.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator

import attrs

from gamma.core.terms.errors import InputError

__all__ = [
    "MAX_SIGNATURES",
    "Signature",
    "b64decode",
    "is_key_name",
    "open_note",
    "read_note",
    "sign_note",
]

MAX_SIGNATURES = 100
"""Go's bound on a note's signature lines; c2sp.org/signed-note asks verifiers to allow 16."""

_DASH = "\u2014 ".encode()
_CONTROL = re.compile(rb"[\x00-\x09\x0b-\x1f]")
_BASE64 = re.compile(rb"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
# Go's unicode.IsSpace: the White_Space property, a fixed set (not Python's str.isspace)
_SPACES = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)


@attrs.frozen
class Signature:
    """One signature line: the key's name, its 4-byte id and the signature bytes."""

    name: str
    key_id: bytes
    signature: bytes


def is_key_name(name: str) -> bool:
    """Go's rule for a key name: non-empty, no Unicode space, no ``+``."""
    return bool(name) and "+" not in name and _SPACES.isdisjoint(name)


def b64decode(text: bytes | str) -> bytes | None:
    """Standard padded base64 as Go's ``base64.StdEncoding`` reads a line, or None."""
    raw = text.encode("ascii", "replace") if isinstance(text, str) else text
    if not _BASE64.fullmatch(raw):
        return None
    return base64.b64decode(raw)


def _malformed(message: str, source: str | None, line: int | None = None) -> InputError:
    return InputError(f"not a signed note: {message}", source=source, line=line)


def _split_note(msg: bytes, source: str | None) -> tuple[bytes, bytes, int]:
    """(text, signature block, 1-based line of the first signature) of a well-formed note."""
    try:
        msg.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _malformed(f"not UTF-8 at byte {exc.start}", source, msg.count(b"\n", 0, exc.start) + 1) from None
    bad = _CONTROL.search(msg)
    if bad is not None:
        line = msg.count(b"\n", 0, bad.start()) + 1
        raise _malformed(f"control character 0x{msg[bad.start()]:02x} (only newline is allowed)", source, line)
    cut = msg.rfind(b"\n\n")
    if cut < 0:
        raise _malformed("no blank line before the signatures", source)
    text, block = msg[: cut + 1], msg[cut + 2 :]
    if not block.endswith(b"\n"):
        raise _malformed("the signatures do not end in a newline", source)
    return text, block, text.count(b"\n") + 2


def _signatures(block: bytes, first_line: int, source: str | None) -> Iterator[Signature]:
    """Each signature line in order, raising at the first malformed one, as Go does."""
    for offset, line in enumerate(block[:-1].split(b"\n")):
        where = first_line + offset
        if offset >= MAX_SIGNATURES:
            raise _malformed(f"more than {MAX_SIGNATURES} signature lines", source, where)
        if not line.startswith(_DASH):
            raise _malformed("a signature line starts with an em dash and a space", source, where)
        name_bytes, _, blob = line[len(_DASH) :].partition(b" ")
        name = name_bytes.decode("utf-8")
        raw = b64decode(blob) if blob else None
        if not is_key_name(name) or raw is None or len(raw) < 5:
            raise _malformed("a signature line is '\u2014 <key name> <base64 of key id and"
                             " signature>'", source, where)
        yield Signature(name, raw[:4], raw[4:])


def read_note(msg: bytes, *, source: str | None = None) -> tuple[bytes, tuple[Signature, ...]]:
    """A note's text and every signature line, unverified (InputError when malformed)."""
    text, block, first = _split_note(msg, source)
    return text, tuple(_signatures(block, first, source))


def open_note(
    msg: bytes,
    name: str,
    key_id: bytes,
    verify: Callable[[bytes, bytes], bool],
    *,
    source: str | None = None,
) -> bytes | None:
    """The note's text when the key ``(name, key_id)`` signed it, else None.

    As Go's ``note.Open`` with one known key: lines of other keys are skipped,
    the first line of this key decides (a later one is not looked at), and a
    malformed line anywhere is an InputError, unless a bad signature came first.
    """
    text, block, first = _split_note(msg, source)
    signed = False
    for signature in _signatures(block, first, source):
        if signed or signature.name != name or signature.key_id != key_id:
            continue
        if not verify(text, signature.signature):
            return None
        signed = True
    return text if signed else None


def sign_note(text: bytes, name: str, key_id: bytes, sign: Callable[[bytes], bytes]) -> bytes:
    """The note of ``text`` (well-formed, ending in a newline) with one signature line."""
    blob = base64.b64encode(key_id + sign(text))
    return text + b"\n" + _DASH + name.encode("utf-8") + b" " + blob + b"\n"
