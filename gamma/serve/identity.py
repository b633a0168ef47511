"""Who is calling: the callers file, bearer tokens, mTLS certificates and the host's verifier.

The server never holds a secret: the callers file lists the SHA-256 of each bearer token and
of each client certificate (DER), so a leaked file or a repr grants nothing. A request's
actor is the caller's, taken from this file (or from the host's verifier), never from the
request body.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from gamma.core.integrity.commitment import HEX_DIGEST
from gamma.core.reading.events import parse_actor
from gamma.core.terms.errors import (
    ActorError,
    InputError,
    MissingFieldError,
    UnknownFieldError,
    ValueTypeError,
)
from gamma.core.terms.policy import DEFAULT_POLICY, Policy
from gamma.serve.errors import Unauthenticated
from gamma.serve.types import Caller

__all__ = ["Callers", "Verifier", "authenticate", "new_token", "token_sha256", "MAX_CALLERS_BYTES"]

Verifier = Callable[[str], Caller | None]
"""The host's check of a bearer token the callers file does not list: a Caller, or None."""

MAX_CALLERS_BYTES = 16 * 1024 * 1024
"""A callers file is read whole once per worker; tens of thousands of entries fit well below."""

_FIELDS = ("name", "token_sha256", "cert_sha256", "auditor", "actor")
# RFC 6750 section 2.1: the scheme (any case), one or more spaces, a b64token
_BEARER = re.compile(r"(?i:bearer) +([A-Za-z0-9\-._~+/]+=*) *")
_ENTRY_HEADER = re.compile(r"\s*\[\[\s*caller\s*\]\]\s*(#.*)?")


def token_sha256(token: str) -> str:
    """The hex SHA-256 of a bearer token, as the callers file lists it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> tuple[str, str]:
    """A fresh bearer token (256 random bits) and its SHA-256 hex for the callers file."""
    token = secrets.token_urlsafe(32)
    return token, token_sha256(token)


@attrs.frozen(repr=False, eq=False)
class Callers:
    """The callers a server knows, in file order, indexed by token and certificate digest.

    Holds digests only; ``repr`` names the callers and nothing else. Compared by identity:
    a worker loads one.
    """

    _callers: tuple[Caller, ...]
    _tokens: Mapping[bytes, tuple[bytes, Caller]]
    _certificates: Mapping[bytes, tuple[bytes, Caller]]

    @classmethod
    def load(cls, path: str | Path, *, policy: Policy = DEFAULT_POLICY) -> Callers:
        """Read a callers TOML file; an error names the file, the line, the entry and the field.

        ``policy`` supplies the clearance ladder every caller's actor must be on (the store's).
        """
        source = str(path)
        try:
            with Path(path).open("rb") as stream:
                data = stream.read(MAX_CALLERS_BYTES + 1)
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read the callers file: {exc}", source=source) from None
        if len(data) > MAX_CALLERS_BYTES:
            raise InputError(f"a callers file is at most {MAX_CALLERS_BYTES} bytes", source=source)
        return cls.parse(text, source=source, policy=policy)

    @classmethod
    def parse(
        cls, text: str, *, source: str = "<callers>", policy: Policy = DEFAULT_POLICY
    ) -> Callers:
        """Validate callers TOML text (see ``load``)."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            match = re.search(r"line (\d+)", str(exc))
            line = int(match.group(1)) if match else None
            raise InputError(f"invalid TOML: {exc}", source=source, line=line) from None
        except (RecursionError, ValueError) as exc:  # nesting hundreds deep; huge integers
            raise InputError(f"invalid TOML: {type(exc).__name__}", source=source) from None
        entries = data.get("caller", [])
        lines = _Lines(text, len(entries) if isinstance(entries, list) else 0)
        for key in data:
            if key != "caller":
                raise UnknownFieldError(
                    "unknown top-level key; each caller is a [[caller]] table",
                    source=source, line=lines.top(key), field=key,
                )
        if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
            line = lines.top("caller")
            message = "expected [[caller]] tables"
            raise ValueTypeError(message, source=source, line=line, field="caller")
        callers: list[Caller] = []
        indexes: dict[str, dict[bytes, tuple[bytes, Caller]]] = {"token_sha256": {},
                                                                  "cert_sha256": {}}
        seen: dict[tuple[str, object], int] = {}  # (field, value) -> the entry that holds it
        for number, entry in enumerate(entries, start=1):
            where = _Where(source, lines, number)
            caller, digests = _caller_entry(entry, where, policy=policy)
            for field, value in (("name", caller.name), *digests.items()):
                if value is None:
                    continue
                if (field, value) in seen:
                    other = seen[(field, value)]
                    message = (f"name {value!r} is also caller entry {other}'s" if field == "name"
                               else f"the same digest as caller entry {other}")
                    raise where.fail(ValueTypeError, message, field)
                seen[(field, value)] = number
                if isinstance(value, bytes):
                    indexes[field][value] = (value, caller)
            callers.append(caller)
        return cls(tuple(callers), indexes["token_sha256"], indexes["cert_sha256"])

    def by_token(self, token: str) -> Caller | None:
        """The caller whose token this is: looked up by its SHA-256, never compared in plaintext."""
        return _lookup(self._tokens, hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest())

    def by_certificate(self, der: bytes) -> Caller | None:
        """The caller whose client certificate (DER bytes) this is, by its SHA-256."""
        return _lookup(self._certificates, hashlib.sha256(der).digest())

    def __iter__(self) -> Iterator[Caller]:
        return iter(self._callers)

    def __len__(self) -> int:
        return len(self._callers)

    def __repr__(self) -> str:
        return f"Callers({[caller.name for caller in self._callers]!r})"


def authenticate(
    callers: Callers,
    authorization: str | None,
    certificate: bytes | None,
    *,
    verifier: Verifier | None = None,
) -> Caller:
    """The caller a request's credentials name, or Unauthenticated (401).

    ``authorization`` is the Authorization header (``Bearer <token>``, the scheme in any case),
    ``certificate`` the verified client certificate (DER) when mTLS is on. A token the file
    does not list goes to ``verifier``. A certificate the file does not list is transport
    only: it names no caller, and a token must. When both name a caller they must name the
    same one. The error says "missing" or "invalid" and nothing more, so a prober learns
    nothing about which part failed.
    """
    by_certificate = callers.by_certificate(certificate) if certificate is not None else None
    by_token: Caller | None = None
    if authorization is not None:
        match = _BEARER.fullmatch(authorization)
        if match is None:
            raise Unauthenticated("invalid credentials")
        token = match.group(1)
        by_token = callers.by_token(token)
        if by_token is None and verifier is not None:
            by_token = verifier(token)
            if by_token is not None and not isinstance(by_token, Caller):
                shown = type(by_token).__name__
                raise TypeError(f"the verifier returned {shown}, not a Caller or None")
        if by_token is None:
            raise Unauthenticated("invalid credentials")
    if by_token is not None and by_certificate is not None and by_token != by_certificate:
        raise Unauthenticated("invalid credentials")
    caller = by_token or by_certificate
    if caller is not None:
        return caller
    if certificate is not None:
        raise Unauthenticated("invalid credentials")
    raise Unauthenticated("missing credentials")


def _lookup(index: Mapping[bytes, tuple[bytes, Caller]], digest: bytes) -> Caller | None:
    """The caller indexed by ``digest``. The key is the SHA-256 of the secret, so the hash
    table's timing tells nothing about the secret; the confirming comparison is constant-time."""
    found = index.get(digest)
    if found is None or not hmac.compare_digest(found[0], digest):
        return None
    return found[1]


@attrs.frozen
class _Where:
    """Where in the callers file an entry is: its errors name the file, line, entry and field."""

    source: str
    lines: _Lines
    number: int

    def fail(self, kind: type[InputError], message: str, field: str | None) -> InputError:
        return kind(
            f"caller entry {self.number}: {message}",
            source=self.source, line=self.lines.of(self.number, field), field=field,
        )


def _caller_entry(
    entry: dict[str, Any], where: _Where, *, policy: Policy
) -> tuple[Caller, dict[str, bytes | None]]:
    """One [[caller]] table: the Caller, and its token and certificate digests by field."""
    for key in entry:
        if key not in _FIELDS:
            message = f"unknown field (fields: {', '.join(_FIELDS)})"
            raise where.fail(UnknownFieldError, message, key)
    for key in ("name", "actor"):
        if key not in entry:
            raise where.fail(MissingFieldError, "missing required field", key)
    name = entry["name"]
    if not isinstance(name, str) or not name or not name.isprintable():
        message = "expected a non-empty string of printable characters"
        raise where.fail(ValueTypeError, message, "name")
    auditor = entry.get("auditor", False)
    if not isinstance(auditor, bool):
        raise where.fail(ValueTypeError, "expected true or false", "auditor")
    digests: dict[str, bytes | None] = {}
    for key in ("token_sha256", "cert_sha256"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, str) or not HEX_DIGEST.fullmatch(value.lower())):
            raise where.fail(ValueTypeError, "expected 64 hexadecimal digits (a SHA-256)", key)
        digests[key] = bytes.fromhex(value) if value is not None else None
    if digests["token_sha256"] is None and digests["cert_sha256"] is None:
        message = "a caller needs token_sha256, cert_sha256 or both"
        raise where.fail(MissingFieldError, message, "token_sha256")
    try:
        actor = parse_actor(entry["actor"], policy=policy, source=where.source)
    except ActorError as exc:
        field = f"actor.{exc.field}" if exc.field else "actor"
        raise where.fail(ActorError, exc.message, field) from None
    return Caller(name=name, actor=actor, auditor=auditor), digests


class _Lines:
    """Best-effort physical lines of each [[caller]] entry and of its fields, for errors."""

    def __init__(self, text: str, entries: int) -> None:
        self._lines = text.splitlines()
        headers = [i for i, line in enumerate(self._lines) if _ENTRY_HEADER.fullmatch(line)]
        self._headers = headers if len(headers) == entries else []

    def top(self, key: str) -> int | None:
        """The 1-based line of a top-level ``key = ...`` or ``[key...`` table header."""
        pattern = re.compile(rf"\s*(\[+\s*)?[\"']?{re.escape(key)}[\"']?\s*[=.\]]")
        return next((i + 1 for i, line in enumerate(self._lines) if pattern.match(line)), None)

    def of(self, number: int, field: str | None) -> int | None:
        """The 1-based line of ``field`` in entry ``number`` (1-based), else of its header."""
        if not self._headers:
            return None
        start = self._headers[number - 1]
        end = self._headers[number] if number < len(self._headers) else len(self._lines)
        if field is not None:
            parts = [re.sub(r"\[\d+\]$", "", part) for part in field.split(".")]
            for key in (parts[-1], parts[0]):
                for index in range(start + 1, end):
                    if re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", self._lines[index]):
                        return index + 1
        return start + 1
