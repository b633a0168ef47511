"""The result of Γ: what an actor may rely on at t, and why everything else is withheld.

``Resolution.to_json()`` is the canonical JSON object of DESIGN §6 (no free
text, no excluded values). ``known_unknowns`` and ``recheck_inputs`` feed the
rendered context only; they are derivable from the log and not serialised.
"""

from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import Any, Literal

import attrs

from gamma.core.canonical import format_ts, sha256_hex
from gamma.core.model import Actor, Value

__all__ = [
    "VALIDITY_CODES",
    "VISIBILITY_CODES",
    "SUBSTITUTING_CODES",
    "REASON_CODES",
    "Reason",
    "Admitted",
    "Excluded",
    "UsedReason",
    "ExperienceVerdict",
    "Ignored",
    "Resolution",
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
    }
)
VISIBILITY_CODES = frozenset(
    {"tenant_isolation", "access_denied", "out_of_scope", "dependency_restricted"}
)
SUBSTITUTING_CODES = frozenset({"superseded", "outranked", "overridden"})
REASON_CODES: tuple[str, ...] = tuple(sorted(VALIDITY_CODES | VISIBILITY_CODES))

Verdict = Literal["KEEP", "ADAPT", "REJECT"]


def _dumps(body: dict[str, Any]) -> str:
    """Canonical JSON of a resolution body: its values were validated, so no float can occur
    and canonical_json's float walk (costly on a million facts) is skipped."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@attrs.frozen
class Reason:
    """One exclusion code with the events that caused it and the facts it points at."""

    code: str
    events: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()


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


@attrs.frozen(kw_only=True)
class Resolution:
    """S = Γ(H, A, t) with its audit record. Lists are sorted by id in code-point order."""

    actor: Actor
    at: datetime
    policy: str
    log: str
    admitted: tuple[Admitted, ...]
    excluded: tuple[Excluded, ...]
    experiences: tuple[ExperienceVerdict, ...]
    ignored: tuple[Ignored, ...]
    known_unknowns: tuple[str, ...] = attrs.field(default=(), eq=False, repr=False)
    recheck_inputs: tuple[tuple[str, tuple[str, ...]], ...] = attrs.field(
        default=(), eq=False, repr=False
    )

    @functools.cached_property
    def digest(self) -> str:
        """sha256 hex of the canonical JSON of the record without ``digest`` (computed when read)."""
        return sha256_hex(_dumps(self._body()))

    def _body(self) -> dict[str, Any]:
        from gamma.core.convert import converter

        return {
            "actor": converter.unstructure(self.actor),
            "admitted": [converter.unstructure(a) for a in self.admitted],
            "at": format_ts(self.at),
            "excluded": [converter.unstructure(e) for e in self.excluded],
            "experiences": [converter.unstructure(x) for x in self.experiences],
            "ignored": [converter.unstructure(i) for i in self.ignored],
            "log": self.log,
            "policy": self.policy,
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of DESIGN §6, ``digest`` included."""
        return {**self._body(), "digest": self.digest}

    def to_json(self) -> str:
        """One canonical JSON line (no trailing newline)."""
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Resolution:
        """Rebuild a resolution from its JSON object; the digest is recomputed, not trusted."""
        from gamma.core.convert import converter

        body = {k: v for k, v in obj.items() if k != "digest"}
        return converter.structure(body, cls)

    def admitted_fact(self, fact: str) -> Admitted | None:
        for item in self.admitted:
            if item.fact == fact:
                return item
        return None

    def excluded_fact(self, fact: str) -> Excluded | None:
        for item in self.excluded:
            if item.fact == fact:
                return item
        return None

    def render(self, format: str = "text") -> str:
        """Render for people (``text``) or for the prompt (``context``); ``json`` is to_json."""
        from gamma.core.render import render

        return render(self, format)
