"""The store's metadata and schema version bound under a seal that ``verify`` re-derives.

The event chain covers events only, so that a store's heads and tree are
those of the same log as JSON Lines. What else decides an answer is the
store's metadata: its recorded ``policy`` (resolutions fall back to it),
whether it is keyed, the seal rows themselves and the schema version (which
says what a store must hold). From schema 4 every ``store_meta`` row but the
two seals and every ``schema_version`` row are sealed as one canonical record
(SPEC §9.2): ``store_seal = sha256(32 zero bytes || record)`` and, in a keyed
store, ``store_keyed_seal = HMAC-SHA256(key, 32 zero bytes || record)``. A
missing seal in a store of schema 4 is tampering, and so is a keyed seal
missing when the key is given. Schema 3 sealed the policy rows alone
(``policy_seal`` and ``policy_keyed_seal``); they are still checked in a store
read at schema 3, and are rows like any other under the seal of schema 4.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping, Sequence

from gamma.core.integrity.chain import GENESIS, keyed_step, step
from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.errors import GammaError
from gamma.core.terms.policy import Policy

__all__ = [
    "KEYED_SEAL",
    "SEAL",
    "SEALED",
    "SEALED_FROM",
    "STORE_KEYED_SEAL",
    "STORE_SEAL",
    "Schema",
    "SealProblem",
    "seal_problem",
    "seal_rows",
    "store_seals",
]

SEALED = ("format", "keyed", "key_check", "policy", "policy_digest")
"""The metadata rows under the seal of schema 3 (those present)."""
SEAL = "policy_seal"
KEYED_SEAL = "policy_keyed_seal"
STORE_SEAL = "store_seal"
STORE_KEYED_SEAL = "store_keyed_seal"
SEALED_FROM = 4
"""The schema version from which ``store_seal`` covers all metadata and the schema version."""

Schema = Sequence[tuple[int, str]]
"""The ``schema_version`` rows, ``(version, name)``, in version order."""
SealProblem = tuple[str, str]
"""What ``seal_problem`` found: the verify kind and the detail."""


def _record(meta: Mapping[str, str]) -> str:
    return canonical_json({"gamma_store_seal": {name: meta[name] for name in SEALED if name in meta}})


def seal_rows(meta: Mapping[str, str], key: bytes | None) -> dict[str, str]:
    """The seal rows of schema 3 for ``meta`` (the keyed one only when ``key`` is given)."""
    record = _record(meta)
    rows = {SEAL: step(GENESIS, record).hex()}
    if key is not None:
        rows[KEYED_SEAL] = keyed_step(key, GENESIS, record).hex()
    return rows


def _store_record(meta: Mapping[str, str], schema: Schema) -> str:
    rows = {name: value for name, value in meta.items() if name not in (STORE_SEAL, STORE_KEYED_SEAL)}
    versions = [[version, name] for version, name in schema]
    return canonical_json({"gamma_store": {"meta": rows, "schema_version": versions}})


def store_seals(meta: Mapping[str, str], schema: Schema, key: bytes | None) -> dict[str, str]:
    """The seal rows of schema 4 over ``meta`` and ``schema`` (the keyed one with ``key``)."""
    record = _store_record(meta, schema)
    rows = {STORE_SEAL: step(GENESIS, record).hex()}
    if key is not None:
        rows[STORE_KEYED_SEAL] = keyed_step(key, GENESIS, record).hex()
    return rows


def _policy_problem(meta: Mapping[str, str]) -> SealProblem | None:
    try:
        digest = Policy.from_dict(json.loads(meta["policy"])).digest
    except (KeyError, ValueError, TypeError, GammaError) as exc:
        return "policy_changed", f"store_meta: the recorded policy is unreadable ({exc})"
    if meta.get("policy_digest") != digest:
        return "policy_changed", (
            f"store_meta: the recorded policy_digest {meta.get('policy_digest')!r} is not the"
            f" digest of the recorded policy ({digest}): the store's policy was changed"
        )
    return None


def _differs(stored: str, expected: str) -> bool:
    return not hmac.compare_digest(stored.encode(), expected.encode())


def seal_problem(meta: Mapping[str, str], schema: Schema, key: bytes | None) -> SealProblem | None:
    """What is wrong with the sealed metadata, as ``(kind, detail)``, or None.

    ``key`` is the key the caller brings: with it, a store whose metadata it does not
    authenticate (no keyed seal, whatever the store says of itself) does not pass.
    """
    found = _policy_problem(meta)
    if found is not None:
        return found
    version = max((v for v, _ in schema), default=0)
    changed = "metadata_changed"
    if version >= SEALED_FROM:
        if STORE_SEAL not in meta:
            return changed, (
                f"store_meta has no {STORE_SEAL} row though schema_version is {version}:"
                " the seal was deleted"
            )
        expected = store_seals(meta, schema, key)
        if _differs(meta[STORE_SEAL], expected[STORE_SEAL]):
            return changed, (
                f"store_meta and schema_version do not match {STORE_SEAL}: a row of store_meta"
                " (the policy, the keyed flag, key_check, a seal) or of schema_version was"
                " changed, added or deleted"
            )
        if key is None:
            return None
        if STORE_KEYED_SEAL not in meta:
            return changed, (
                f"a key was given but store_meta has no {STORE_KEYED_SEAL} row: the store's"
                " keyed seal was deleted (or the store was never keyed)"
            )
        if _differs(meta[STORE_KEYED_SEAL], expected[STORE_KEYED_SEAL]):
            return changed, (
                f"store_meta and schema_version do not match {STORE_KEYED_SEAL}: they were"
                " rewritten without the key (or the key is wrong)"
            )
        return None
    return _old_problem(meta, version, key)


def _old_problem(meta: Mapping[str, str], version: int, key: bytes | None) -> SealProblem | None:
    """A store read at a schema before 4: what that schema sealed, and no more."""
    changed = "metadata_changed"
    if STORE_SEAL in meta or STORE_KEYED_SEAL in meta:
        return changed, (
            f"schema_version says {version}, but store_meta holds the seal of schema"
            f" {SEALED_FROM}: schema_version was lowered"
        )
    if version >= 3 and SEAL not in meta:
        return changed, f"store_meta has no {SEAL} row though schema_version is {version}"
    expected = seal_rows(meta, key)
    if SEAL in meta and _differs(meta[SEAL], expected[SEAL]):
        return changed, f"store_meta: the policy rows do not match {SEAL}: they were changed"
    if key is None:
        return None
    if KEYED_SEAL not in meta:
        return changed, (
            f"a key was given but this store (schema_version {version}) has no keyed seal: no"
            " key authenticates its metadata; a keyed store from before schema 4 is migrated"
            " and sealed at once with `gamma migrate --key-file K --expect-policy D`"
        )
    if _differs(meta[KEYED_SEAL], expected[KEYED_SEAL]):
        return changed, (
            f"store_meta: the policy rows do not match {KEYED_SEAL}: they were rewritten"
            " without the key (or the key is wrong)"
        )
    return None
