"""Signed checkpoints: a tree head in the C2SP tlog-checkpoint format, signed as a C2SP signed note.

A checkpoint body is three lines, each ending in a newline::

    <origin>
    <tree size, decimal>
    <root hash, standard base64>

and the signed note is the body, a blank line, and one signature line per
signer: ``— <key name> <base64(key id || Ed25519 signature)>`` (an em dash,
U+2014, then a space). The signature covers the body bytes; the key id is the
first four bytes of SHA-256(key name || 0x0A || 0x01 || public key). Keys are
written as the Go ``golang.org/x/mod/sumdb/note`` encodings, so other tools
read them: ``PRIVATE+KEY+<name>+<id hex>+<base64(0x01 || seed)>`` and
``<name>+<id hex>+<base64(0x01 || public key)>``. Signing and verifying are
Ed25519 from the ``cryptography`` package; nothing here implements a signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from pathlib import Path

import attrs
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from gamma.core.errors import InputError
from gamma.core.merkle import TreeHead
from gamma.storage.proofs import prove_consistency, recomputed_heads

__all__ = [
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

_ED25519 = b"\x01"
_DASH = "\u2014 "


def _check_name(name: str, field: str) -> str:
    if not name or any(c.isspace() or c == "+" for c in name):
        raise InputError(f"a key name is non-empty, without spaces or '+', got {name!r}", field=field)
    return name


def _key_id(name: str, public: bytes) -> bytes:
    return hashlib.sha256(name.encode("utf-8") + b"\n" + _ED25519 + public).digest()[:4]


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


@attrs.frozen
class VerifierKey:
    name: str
    public: bytes

    @property
    def key_id(self) -> bytes:
        return _key_id(self.name, self.public)

    def encode(self) -> str:
        blob = base64.b64encode(_ED25519 + self.public).decode("ascii")
        return f"{self.name}+{self.key_id.hex()}+{blob}"


@attrs.frozen
class SignerKey:
    name: str
    seed: bytes

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
    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes_raw()
    return SignerKey(_check_name(name, "name"), seed)


def _decode_key(parts: list[str], source: str | None, what: str) -> tuple[str, bytes, bytes]:
    if len(parts) != 3:
        raise InputError(f"not a {what} (expected name+id+key)", source=source)
    name, key_id, blob = parts
    try:
        raw = base64.b64decode(blob, validate=True)
        wanted = bytes.fromhex(key_id)
    except (binascii.Error, ValueError):
        raise InputError(f"not a {what} (bad hex or base64)", source=source) from None
    if len(raw) != 33 or raw[:1] != _ED25519 or len(wanted) != 4:
        raise InputError(f"not an Ed25519 {what}", source=source)
    return _check_name(name, "name"), wanted, raw[1:]


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
    """A checkpoint's origin and tree head, with the signed note it was read from."""

    origin: str
    head: TreeHead
    note: str

    @property
    def body(self) -> str:
        return _body(self.origin, self.head)


def _body(origin: str, head: TreeHead) -> str:
    root = base64.b64encode(bytes.fromhex(head.root)).decode("ascii")
    return f"{origin}\n{head.size}\n{root}\n"


def sign_checkpoint(head: TreeHead, key: SignerKey, *, origin: str | None = None) -> str:
    """The signed note of a checkpoint of ``head`` (origin: the key's name unless given)."""
    origin = key.name if origin is None else origin
    if not origin or "\n" in origin or origin != origin.strip():
        raise InputError(f"an origin is one non-empty line, got {origin!r}", field="origin")
    body = _body(origin, head)
    signature = key.sign(body.encode("utf-8"))
    blob = base64.b64encode(key.verifier().key_id + signature).decode("ascii")
    return f"{body}\n{_DASH}{key.name} {blob}\n"


def parse_checkpoint(text: str, *, source: str | None = None) -> tuple[Checkpoint, list[tuple[str, bytes]]]:
    """Split a signed checkpoint into its checkpoint and its (key name, key id + signature) lines."""
    cut = text.rfind("\n\n")
    if cut < 0 or not text.endswith("\n"):
        raise InputError("not a signed note (no blank line before the signatures)", source=source)
    body, signatures = text[: cut + 1], text[cut + 2 :]
    lines = body.split("\n")
    if len(lines) < 4:
        raise InputError("a checkpoint needs an origin, a size and a root hash", source=source)
    origin, size_text, root_text = lines[0], lines[1], lines[2]
    try:
        root = base64.b64decode(root_text, validate=True)
    except binascii.Error:
        raise InputError("the root hash is not base64", source=source, field="root") from None
    if not size_text.isdigit() or (size_text != "0" and size_text.startswith("0")) or len(root) != 32:
        raise InputError("bad tree size or root hash", source=source)
    sigs = []
    for line in signatures.removesuffix("\n").split("\n"):
        if not line.startswith(_DASH) or line.count(" ") != 2:
            raise InputError(f"not a signature line: {line!r}", source=source)
        name, blob = line.removeprefix(_DASH).split(" ")
        try:
            raw = base64.b64decode(blob, validate=True)
        except binascii.Error:
            raise InputError("a signature is not base64", source=source) from None
        sigs.append((name, raw))
    head = TreeHead(size=int(size_text), root=root.hex())
    return Checkpoint(origin, head, text), sigs


def verify_checkpoint(text: str, key: VerifierKey, *, source: str | None = None) -> Checkpoint | None:
    """The checkpoint when ``key`` signed it, else None (a malformed note is an InputError)."""
    checkpoint, signatures = parse_checkpoint(text, source=source)
    message = text[: text.rfind("\n\n") + 1].encode("utf-8")
    public = Ed25519PublicKey.from_public_bytes(key.public)
    for name, raw in signatures:
        if name != key.name or raw[:4] != key.key_id:
            continue
        try:
            public.verify(raw[4:], message)
        except InvalidSignature:
            return None
        return checkpoint
    return None


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
