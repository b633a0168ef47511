"""The event log's vocabulary as frozen attrs classes.

Optional fields default to ``None`` meaning "not written": the canonical bytes
of an event keep exactly the fields its writer wrote, and the resolver fills
defaults (some come from the policy) when it reads them.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar, Literal, Self

import attrs

__all__ = [
    "heard_by",
    "Value",
    "Visibility",
    "Assert",
    "Retract",
    "Promote",
    "Grant",
    "Revoke",
    "Experience",
    "ErasedValue",
    "Erase",
    "Migrate",
    "Event",
    "EVENT_TYPES",
    "Actor",
    "STATUSES",
    "KINDS",
    "PRIORITIES",
    "APPLICABILITIES",
]

Value = str | int | bool
Status = Literal["committed", "draft", "hypothetical"]
Kind = Literal["fact", "constraint", "commitment", "preference", "rule", "derived"]
Priority = Literal["hard", "soft"]
Applicability = Literal["applicable", "adaptable", "unusable"]

STATUSES: tuple[str, ...] = ("committed", "draft", "hypothetical")
KINDS: tuple[str, ...] = ("fact", "constraint", "commitment", "preference", "rule", "derived")
PRIORITIES: tuple[str, ...] = ("hard", "soft")
APPLICABILITIES: tuple[str, ...] = ("applicable", "adaptable", "unusable")


@attrs.frozen
class Visibility:
    """Who may see a fact: listed roles or actors (none listed: everyone) and a clearance bar."""

    roles: tuple[str, ...] | None = None
    actors: tuple[str, ...] | None = None
    clearance: str | None = None


@attrs.frozen(kw_only=True)
class _Envelope:
    id: str
    ts: datetime
    actor: str
    tenant: str
    # the canonical JSON text, kept when parsed so hashing the log never re-serialises it
    # (set once by the parser; not an init argument, so attrs.evolve never copies stale text)
    _canonical: str | None = attrs.field(default=None, init=False, eq=False, repr=False)

    def keep_canonical(self, text: str | None) -> Self:
        """The cache initialiser: set (or, with None, clear) the canonical text of an event
        its parser built a moment ago, before anyone else sees it; the slot is owned here,
        so no parser reaches past the frozen class to write it. Returns the event."""
        object.__setattr__(self, "_canonical", text)
        return self


@attrs.frozen(kw_only=True)
class Assert(_Envelope):
    """Introduces one fact."""

    TYPE: ClassVar[str] = "assert"
    fact: str
    key: str
    # None only for an erased value (issue 30): its ``commitment`` is then all that is left
    value: Value | None = None
    scope: str | None = None
    status: Status | None = None
    authority: str | None = None
    kind: Kind | None = None
    priority: Priority | None = None
    visibility: Visibility | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    depends_on: tuple[str, ...] | None = None
    supersedes: tuple[str, ...] | None = None
    # how a derived value is computed from its inputs (issue 29): text of gamma.core.terms.derivation
    derivation: str | None = None
    # the data subject the value is about, for erasure by subject (issue 30)
    subject: str | None = None
    # a committed value (issue 30): 64 hex digits of a random 32-byte salt, and
    # ``commitment`` = SHA-256(salt || canonical value) (``gamma.core.integrity.commitment``); the chain and
    # the tree hash the event with ``commitment`` in place of ``value`` and ``salt``
    salt: str | None = None
    commitment: str | None = None


@attrs.frozen(kw_only=True)
class Retract(_Envelope):
    """Withdraws (cancels) a fact."""

    TYPE: ClassVar[str] = "retract"
    fact: str
    authority: str | None = None
    reason: str | None = None


@attrs.frozen(kw_only=True)
class Promote(_Envelope):
    """Commits a draft or hypothetical fact."""

    TYPE: ClassVar[str] = "promote"
    fact: str
    authority: str | None = None


@attrs.frozen(kw_only=True)
class Grant(_Envelope):
    """Gives a role or an actor sight of one fact, or of every fact of a key, from ``ts`` on."""

    TYPE: ClassVar[str] = "grant"
    fact: str | None = None
    key: str | None = None
    role: str | None = None
    to_actor: str | None = None
    authority: str | None = None


@attrs.frozen(kw_only=True)
class Revoke(_Envelope):
    """Ends an earlier matching grant from ``ts`` on."""

    TYPE: ClassVar[str] = "revoke"
    fact: str | None = None
    key: str | None = None
    role: str | None = None
    to_actor: str | None = None
    authority: str | None = None


@attrs.frozen(kw_only=True)
class Experience(_Envelope):
    """A recorded past action and the facts it relied on."""

    TYPE: ClassVar[str] = "experience"
    experience: str
    content: str
    uses: tuple[str, ...] | None = None
    applicability: Applicability | None = None


@attrs.frozen
class ErasedValue:
    """One value an erase destroyed: its fact and the commitment that stays in the chain."""

    fact: str
    commitment: str


@attrs.frozen(kw_only=True)
class Erase(_Envelope):
    """Destroys committed values for good (issue 30): names each by fact and commitment, carries
    none of them, and states the legal basis."""

    TYPE: ClassVar[str] = "erase"
    erased: tuple[ErasedValue, ...]
    basis: str
    authority: str | None = None


@attrs.frozen(kw_only=True)
class Migrate(_Envelope):
    """Closes an explicit migration to committed values (issue 30): the ``from_size`` events
    before it are those of the log whose chain head was ``from_head`` and whose Merkle root
    was ``from_root``, each with its value now committed. Γ folds nothing from it."""

    TYPE: ClassVar[str] = "migrate"
    from_head: str
    from_root: str
    from_size: int


Event = Assert | Retract | Promote | Grant | Revoke | Experience | Erase | Migrate


def heard_by(events: Sequence[Event], at: datetime) -> Sequence[Event]:
    """The events with ``ts <= at``: a prefix, since ``ts`` never decreases along a log."""
    return events[: bisect.bisect_right(events, at, key=lambda event: event.ts)]

EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls for cls in (Assert, Retract, Promote, Grant, Revoke, Experience, Erase, Migrate)
}


@attrs.frozen(kw_only=True)
class Actor:
    """Who asks: the request context of a resolution. Normalised: defaults filled, roles sorted."""

    id: str
    tenant: str
    roles: tuple[str, ...] = ()
    clearance: str | None = None
    scope: str = "global"
