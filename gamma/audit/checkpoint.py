"""Signed checkpoints: a tree head in the C2SP tlog-checkpoint format, signed as a C2SP signed note.

A checkpoint's text is three lines (then any non-empty extension lines), each
ending in a newline::

    <origin>
    <tree size, ASCII decimal without leading zeros, at most 2**63 - 1>
    <root hash, standard base64 of 32 bytes>

and the signed note is the text, a blank line, and one signature line per
signer: ``— <key name> <base64(key id || Ed25519 signature)>`` (an em dash,
U+2014, then a space). The signature covers the text's bytes; the key id is the
first four bytes of SHA-256(key name || 0x0A || 0x01 || public key). Notes are
read as bytes, by the grammar of ``gamma.audit._note`` (Go's ``sumdb/note``), so
a CR or any other control character but newline makes a note malformed. Keys are
written as the Go ``golang.org/x/mod/sumdb/note`` encodings, so other tools
read them: ``PRIVATE+KEY+<name>+<id hex>+<base64(0x01 || seed)>`` and
``<name>+<id hex>+<base64(0x01 || public key)>``; a key name here is also free
of control characters (Go allows DEL and C1 in a key it loads). Signing and
verifying are Ed25519 from the ``cryptography`` package; nothing here
implements a signature.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import attrs
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from gamma.audit._note import b64decode, is_key_name, open_note, read_note, sign_note
from gamma.core.integrity.commitment import HEX_DIGEST
from gamma.core.integrity.merkle import TreeHead
from gamma.core.terms.errors import InputError
from gamma.storage.proofs import prove_consistency, recomputed_heads

__all__ = [
    "MAX_TREE_SIZE",
    "Checkpoint",
    "CheckpointCheck",
    "check_log",
    "SignerKey",
    "VerifierKey",
    "generate_key",
    "parse_checkpoint",
    "parse_signer",
    "parse_verifier",
    "sign_checkpoint",
    "verify_checkpoint",
]

MAX_TREE_SIZE = 2**63 - 1
"""The largest size a checkpoint states (Go reads the size line as an int64)."""

_ED25519 = b"\x01"
_MAX_CHECKPOINT_BYTES = 1_000_000  # bytes of checkpoint text, Go's tlog.ParseTree bound
_SIZE = re.compile(rb"0|[1-9][0-9]{0,18}")
_HEX_ID = re.compile(r"[0-9a-fA-F]{8}")
# Unicode's control characters (category Cc, a fixed set): C0, DEL and C1
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def _utf8(text: str, what: str, field: str | None, source: str | None = None) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{what} is not valid Unicode", source=source, field=field) from None


def _check_name(name: str, field: str, source: str | None = None) -> str:
    """A key name as Go's sumdb/note takes it (no Unicode space or '+'), and printable:
    no control character either, so that every note the key signs is well-formed."""
    if not is_key_name(name) or _CONTROLS.search(name):
        raise InputError(f"a key name is non-empty, without spaces, '+' or control characters,"
                         f" got {name!r}", source=source, field=field)
    _utf8(name, "a key name", field, source)
    return name


def _check_origin(origin: str) -> str:
    if not origin or _CONTROLS.search(origin) or origin != origin.strip():
        raise InputError(f"an origin is one non-empty line without control characters or"
                         f" surrounding spaces, got {origin!r}", field="origin")
    _utf8(origin, "an origin", "origin")
    return origin


def _check_name_field(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    _check_name(value, attribute.name)


def _key_bytes(_instance: object, attribute: attrs.Attribute[bytes], value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) != 32:
        raise InputError("an Ed25519 key is 32 bytes", field=attribute.name)


def _key_id(name: str, public: bytes) -> bytes:
    return hashlib.sha256(name.encode("utf-8") + b"\n" + _ED25519 + public).digest()[:4]


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


@attrs.frozen
class VerifierKey:
    name: str = attrs.field(validator=_check_name_field)
    public: bytes = attrs.field(validator=_key_bytes)

    @property
    def key_id(self) -> bytes:
        return _key_id(self.name, self.public)

    def encode(self) -> str:
        blob = base64.b64encode(_ED25519 + self.public).decode("ascii")
        return f"{self.name}+{self.key_id.hex()}+{blob}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``."""
        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature, message)
        except InvalidSignature:
            return False
        return True


@attrs.frozen
class SignerKey:
    name: str = attrs.field(validator=_check_name_field)
    seed: bytes = attrs.field(validator=_key_bytes, repr=False)

    def verifier(self) -> VerifierKey:
        return VerifierKey(self.name, _raw_public(self._key().public_key()))

    def sign(self, message: bytes) -> bytes:
        return self._key().sign(message)

    def _key(self) -> Ed25519PrivateKey:
        return Ed25519PrivateKey.from_private_bytes(self.seed)

    def encode(self) -> str:
        blob = base64.b64encode(_ED25519 + self.seed).decode("ascii")
        return f"PRIVATE+KEY+{self.name}+{self.verifier().key_id.hex()}+{blob}"


def generate_key(name: str) -> SignerKey:
    """A new Ed25519 signer key named ``name`` (randomness from the OS, via ``cryptography``)."""
    _check_name(name, "name")
    key = Ed25519PrivateKey.generate()
    return SignerKey(name, key.private_bytes_raw())


def _decode_key(parts: list[str], source: str | None, what: str) -> tuple[str, bytes, bytes]:
    """(name, id, key) of ``name+id+base64(0x01 || key)``, read as Go's sumdb/note does."""
    if len(parts) != 3:
        raise InputError(f"not a {what} (expected name+id+key)", source=source)
    name, key_id, blob = parts
    raw = b64decode(blob)
    if raw is None or not _HEX_ID.fullmatch(key_id):
        raise InputError(f"not a {what} (bad hex or base64)", source=source)
    if len(raw) != 33 or raw[:1] != _ED25519:
        raise InputError(f"not an Ed25519 {what}", source=source)
    return _check_name(name, "name", source), bytes.fromhex(key_id), raw[1:]


def parse_signer(text: str, *, source: str | None = None) -> SignerKey:
    """A signer key ``PRIVATE+KEY+<name>+<id>+<base64>``; its id must match the key."""
    text = text.strip()
    if not text.startswith("PRIVATE+KEY+"):
        raise InputError("not a signer key (expected PRIVATE+KEY+...)", source=source)
    name, key_id, seed = _decode_key(text.removeprefix("PRIVATE+KEY+").split("+", 2), source, "signer key")
    key = SignerKey(name, seed)
    if key.verifier().key_id != key_id:
        raise InputError("the signer key's id does not match its key", source=source)
    return key


def parse_verifier(text: str, *, source: str | None = None) -> VerifierKey:
    """A verifier key ``<name>+<id>+<base64>``; its id must match the key."""
    name, key_id, public = _decode_key(text.strip().split("+", 2), source, "verifier key")
    key = VerifierKey(name, public)
    if key.key_id != key_id:
        raise InputError("the verifier key's id does not match its key", source=source)
    return key


@attrs.frozen
class Checkpoint:
    """A checkpoint's origin and tree head (and extension lines, if any), with the signed
    note it was read from."""

    origin: str
    head: TreeHead
    note: str
    extensions: tuple[str, ...] = ()

    @property
    def body(self) -> str:
        """The checkpoint's text as gamma writes it (the signed text, unless that wrote the
        root's base64 with non-zero padding bits, which Go and gamma read all the same)."""
        return _checkpoint_text(self.origin, self.head, self.extensions).decode("utf-8")


def _checkpoint_text(origin: str, head: TreeHead, extensions: tuple[str, ...] = ()) -> bytes:
    root = base64.b64encode(bytes.fromhex(head.root)).decode("ascii")
    return "".join(f"{line}\n" for line in (origin, str(head.size), root, *extensions)).encode()


def _note_bytes(note: str | bytes, source: str | None) -> bytes:
    return note if isinstance(note, bytes) else _utf8(note, "a signed note", None, source)


def _read_body(text: bytes, note: bytes, source: str | None) -> Checkpoint:
    """The checkpoint in a note's text, per c2sp.org/tlog-checkpoint (InputError otherwise)."""
    if len(text) > _MAX_CHECKPOINT_BYTES:
        raise InputError(f"a checkpoint is at most {_MAX_CHECKPOINT_BYTES} bytes", source=source)
    lines = text.split(b"\n")[:-1]  # the text ends in a newline
    if len(lines) < 3 or not lines[0]:
        raise InputError("a checkpoint is a non-empty origin, a size and a root hash line",
                         source=source, line=len(lines) + 1 if lines[0] else 1)
    if not _SIZE.fullmatch(lines[1]) or int(lines[1]) > MAX_TREE_SIZE:
        raise InputError("the tree size is ASCII decimal digits without leading zeros, at most"
                         f" {MAX_TREE_SIZE}", source=source, line=2, field="size")
    root = b64decode(lines[2])
    if root is None or len(root) != 32:
        raise InputError("the root hash is the base64 of 32 bytes", source=source, line=3,
                         field="root")
    for number, extension in enumerate(lines[3:], start=4):
        if not extension:
            raise InputError("an extension line is non-empty", source=source, line=number)
    head = TreeHead(size=int(lines[1]), root=root.hex())
    return Checkpoint(lines[0].decode("utf-8"), head, note.decode("utf-8"),
                      tuple(line.decode("utf-8") for line in lines[3:]))


def sign_checkpoint(head: TreeHead, key: SignerKey, *, origin: str | None = None) -> str:
    """The signed note of a checkpoint of ``head`` (origin: the key's name unless given).

    The note is returned as text; its UTF-8 encoding is the note's bytes, to be
    written unchanged (no newline translation).
    """
    origin = _check_origin(key.name if origin is None else origin)
    if not 0 <= head.size <= MAX_TREE_SIZE or not HEX_DIGEST.fullmatch(head.root):
        raise InputError(f"not a tree head: {head!r}", field="head")
    note = sign_note(_checkpoint_text(origin, head), key.name, key.verifier().key_id, key.sign)
    return note.decode("utf-8")


def parse_checkpoint(
    note: str | bytes, *, source: str | None = None
) -> tuple[Checkpoint, list[tuple[str, bytes]]]:
    """A signed checkpoint's checkpoint and its (key name, key id + signature) lines, unverified.

    The note is read as bytes (a ``str`` is taken as its UTF-8 encoding): CR,
    any other control character but newline, a malformed signature line or
    checkpoint line is an InputError.
    """
    msg = _note_bytes(note, source)
    text, signatures = read_note(msg, source=source)
    checkpoint = _read_body(text, msg, source)
    return checkpoint, [(s.name, s.key_id + s.signature) for s in signatures]


def verify_checkpoint(
    note: str | bytes, key: VerifierKey, *, source: str | None = None
) -> Checkpoint | None:
    """The checkpoint when ``key`` signed it, else None; a malformed note is an InputError.

    As Go's ``note.Open``: signatures of other keys are skipped, and the first
    line of this key decides; the checkpoint text is read only once signed.
    """
    msg = _note_bytes(note, source)
    text = open_note(msg, key.name, key.key_id, key.verify, source=source)
    return None if text is None else _read_body(text, msg, source)


@attrs.frozen
class CheckpointCheck:
    """A log checked against a kept checkpoint: ``ok`` when its first ``size`` events hash to it."""

    ok: bool
    checkpoint: TreeHead
    log: TreeHead
    detail: str

    def to_dict(self) -> dict[str, object]:
        return {"checkpoint": self.checkpoint.to_dict(), "detail": self.detail,
                "log": self.log.to_dict(), "ok": self.ok}


def check_log(log: str | Path, checkpoint: Checkpoint) -> CheckpointCheck:
    """Whether ``log`` (re-hashed from its events) extends the checkpoint's tree head.

    Same size: the roots must be equal; a larger log: its first ``size``
    events must hash to the checkpoint's root, which a consistency proof from
    the checkpoint to the log's head then shows (the proof is generated from
    the log's events and verified); a smaller log was truncated.
    """
    kept = checkpoint.head
    at_kept, now = recomputed_heads(log, kept.size)
    if at_kept is None:
        return CheckpointCheck(False, kept, now, f"the log has {now.size} events, the checkpoint"
                               f" covers {kept.size}: it was truncated")
    if at_kept.root != kept.root:
        return CheckpointCheck(False, kept, now, f"the first {kept.size} events hash to"
                               f" {at_kept.root}, the checkpoint's root is {kept.root}: an event"
                               " among them was edited, deleted, inserted or reordered")
    if now.size > kept.size:
        proof = prove_consistency(log, kept.size)
        if not (proof.verify() and proof.first_root == kept.root and proof.second_root == now.root):
            return CheckpointCheck(False, kept, now, "the consistency proof from the checkpoint"
                                   " does not verify")
        return CheckpointCheck(True, kept, now, f"the log extends the checkpoint: {kept.size}"
                               f" -> {now.size} events, consistency proof verified")
    return CheckpointCheck(True, kept, now, f"the log matches the checkpoint: {now.size} events")
