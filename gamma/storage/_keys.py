"""The chain key: its shape, the check value a keyed store records of it, and which key may
extend a store's keyed chain (the writer's authority, settled before the batch is read)."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from gamma.core.terms.errors import InputError, StoreError

__all__ = ["MAX_KEY_FILE_BYTES", "MIN_KEY_BYTES", "check_key", "key_check", "read_key_file", "writer_key"]

MIN_KEY_BYTES = 16
#: The most bytes of a key file: a key is a secret of some dozens of bytes, so a file past this
#: is no key file (``/dev/zero`` is refused after reading this many plus one).
MAX_KEY_FILE_BYTES = 4096
_KEY_CHECK = b"gamma store key check"


def check_key(key: bytes) -> bytes:
    """A chain key: surrounding whitespace stripped, at least MIN_KEY_BYTES bytes."""
    stripped = key.strip()
    if len(stripped) < MIN_KEY_BYTES:
        raise InputError(
            f"a chain key needs at least {MIN_KEY_BYTES} bytes, got {len(stripped)}", field="key"
        )
    return stripped


def read_key_file(path: str | Path) -> bytes:
    """A key file's chain key, read no further than MAX_KEY_FILE_BYTES + 1 bytes; an
    InputError naming the file when it cannot be read, is too long or holds no key."""
    source = str(path)
    try:
        with Path(path).open("rb") as stream:
            raw = stream.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read key file: {exc.strerror or exc}", source=source) from None
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise InputError(
            f"a key file holds at most {MAX_KEY_FILE_BYTES} bytes: this is no key file",
            source=source, field="key",
        )
    try:
        return check_key(raw)
    except InputError as exc:
        raise InputError(exc.message, source=source, field="key") from None


def key_check(key: bytes) -> str:
    """What a keyed store records of its key, so a wrong key is told from a rewrite."""
    return hmac.new(key, _KEY_CHECK, hashlib.sha256).hexdigest()


def writer_key(path: Path, key: bytes | None, *, keyed: bool, recorded: str) -> bytes | None:
    """The key that extends the keyed chain; a wrong or missing key is refused up front.

    ``recorded`` is the store's ``key_check`` row ("" when it has none).
    """
    if not keyed:
        if key is not None:
            raise StoreError(
                f"{path}: a key was given but the store was initialised without one"
            )
        return None
    if key is None:
        raise StoreError(
            f"{path}: the store is keyed: give its key"
        )
    if not hmac.compare_digest(key_check(key), recorded):
        raise StoreError(f"{path}: the key is not the one this store was initialised with")
    return key
