"""The pieces of a resolution: reason codes and their groups, and one record per admitted
fact, excluded fact, experience verdict and ignored event."""

from __future__ import annotations

from typing import Literal

import attrs

from gamma.core.terms.model import Value

__all__ = [
    "Codes",
    "RECOMPUTED",
    "VALIDITY_CODES",
    "VISIBILITY_CODES",
    "SUBSTITUTING_CODES",
    "REASON_CODES",
    "Verdict",
    "Reason",
    "Admitted",
    "Inputs",
    "Stale",
    "Recomputed",
    "Excluded",
    "UsedReason",
    "ExperienceVerdict",
    "Ignored",
]

VALIDITY_CODES = frozenset(
    {
        "draft",
        "hypothetical",
        "not_yet_valid",
        "expired",
        "retracted",
        "superseded",
        "outranked",
        "overridden",
        "dependency_invalidated",
        "derivation_failed",
        "recomputed",
        "erased",
    }
)
VISIBILITY_CODES = frozenset(
    {"tenant_isolation", "access_denied", "out_of_scope", "dependency_restricted"}
)
SUBSTITUTING_CODES = frozenset({"superseded", "outranked", "overridden"})
REASON_CODES: tuple[str, ...] = tuple(sorted(VALIDITY_CODES | VISIBILITY_CODES))

Verdict = Literal["KEEP", "ADAPT", "REJECT"]


@attrs.frozen
class Reason:
    """One exclusion code with the events that caused it and the facts it points at."""

    code: str
    events: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()


Codes = dict[str, Reason]
"""One fact's exclusion codes, each with its reason."""

RECOMPUTED = "recomputed"
"""The code of a derived fact whose stated value its inputs no longer give (SPEC §20)."""


@attrs.frozen(kw_only=True)
class Admitted:
    fact: str
    key: str
    value: Value
    scope: str
    authority: str
    kind: str
    priority: str
    needs_recheck: bool = False


@attrs.frozen
class Inputs:
    """The evidence of a recomputed value: the input facts used and their commit events."""

    events: tuple[str, ...]
    facts: tuple[str, ...]


@attrs.frozen
class Stale:
    """A stated value its derivation no longer gives (code ``recomputed``): withheld."""

    code: str
    value: Value


@attrs.frozen(kw_only=True)
class Recomputed(Admitted):
    """An admitted derived fact whose value Γ computed from its derivation (issue 29); a
    subclass, so records of every other fact keep their bytes."""

    inputs: Inputs
    stale: Stale | None = None


@attrs.frozen(kw_only=True)
class Excluded:
    fact: str
    key: str | None
    reasons: tuple[Reason, ...]

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(reason.code for reason in self.reasons)


@attrs.frozen(kw_only=True)
class UsedReason:
    """An exclusion reason of a fact an experience used."""

    fact: str
    code: str
    events: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class ExperienceVerdict:
    experience: str
    verdict: Verdict
    bindings: tuple[tuple[str, str], ...] = ()
    reasons: tuple[UsedReason, ...] = ()


@attrs.frozen(kw_only=True)
class Ignored:
    """An event that had no effect because its authority was below the target fact's."""

    event: str
    code: str
    fact: str
