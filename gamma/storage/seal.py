"""The store's recorded policy bound under a seal that ``verify`` re-derives.

The event chain covers events only, so that a store's heads and tree are
those of the same log as JSON Lines. What else changes a resolution is the
store's metadata: above all the recorded ``policy`` (resolutions fall back to
it) and whether the store is keyed. Those rows are sealed as one canonical
record (SPEC §9.3): ``policy_seal = sha256(32 zero bytes || record)``, and in a
keyed store also ``policy_keyed_seal = HMAC-SHA256(key, 32 zero bytes ||
record)``, the first link of a chain of its own. ``verify`` re-derives the
policy's digest and both seals. Without the key, whoever rewrites the policy
and its seal together is caught only by a digest held elsewhere
(``--expect-policy``: every resolution and audit record names its policy).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping

from gamma.core.canonical import canonical_json
from gamma.core.chain import GENESIS, keyed_step, step
from gamma.core.errors import GammaError
from gamma.core.policy import Policy

__all__ = ["KEYED_SEAL", "SEAL", "SEALED", "seal_problem", "seal_rows"]

SEALED = ("format", "keyed", "key_check", "policy", "policy_digest")
"""The metadata rows under the seal (those present)."""
SEAL = "policy_seal"
KEYED_SEAL = "policy_keyed_seal"


def _record(meta: Mapping[str, str]) -> str:
    return canonical_json({"gamma_store_seal": {name: meta[name] for name in SEALED if name in meta}})


def seal_rows(meta: Mapping[str, str], key: bytes | None) -> dict[str, str]:
    """The seal rows for ``meta`` (the keyed one only when ``key`` is given)."""
    record = _record(meta)
    rows = {SEAL: step(GENESIS, record).hex()}
    if key is not None:
        rows[KEYED_SEAL] = keyed_step(key, GENESIS, record).hex()
    return rows


def seal_problem(meta: Mapping[str, str], key: bytes | None) -> str | None:
    """What is wrong with the sealed metadata, in words, or None.

    A store from before the seal (schema 2, read without migrating) has none to check and
    passes; so does a keyed store's missing keyed seal until a keyed append writes it.
    """
    try:
        digest = Policy.from_dict(json.loads(meta["policy"])).digest
    except (KeyError, ValueError, TypeError, GammaError) as exc:
        return f"the recorded policy is unreadable ({exc})"
    if meta.get("policy_digest") != digest:
        return (
            f"the recorded policy_digest {meta.get('policy_digest')!r} is not the digest of the"
            f" recorded policy ({digest}): the store's policy was changed"
        )
    if SEAL not in meta:
        return None
    expected = seal_rows(meta, key)
    if not hmac.compare_digest(meta[SEAL], expected[SEAL]):
        return "the store's sealed metadata (its policy) does not match its seal: it was changed"
    if key is not None and KEYED_SEAL in meta and not hmac.compare_digest(meta[KEYED_SEAL], expected[KEYED_SEAL]):
        return (
            "the store's sealed metadata (its policy) does not match its keyed seal: it was"
            " rewritten without the key (or the key is wrong)"
        )
    return None
