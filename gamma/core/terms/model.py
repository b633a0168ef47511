"""The event log's vocabulary as frozen attrs classes, and its schema, stated once.

Optional fields default to ``None`` meaning "not written": the canonical bytes
of an event keep exactly the fields its writer wrote, and the resolver fills
defaults (some come from the policy) when it reads them.

Each field names the ``Rule`` its value is held to (attrs metadata, read by ``rule_of``).
That and the classes' fields and defaults are the whole schema: every reader derives its
decoder, its field tables and its checks from them (``gamma.core.reading.schema``), so a
field added here reaches the fast decoders and the strict one alike.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import ClassVar, Literal, Self, get_args

import attrs

__all__ = [
    "heard_by",
    "rule_of",
    "Rule",
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

STATUSES: tuple[str, ...] = get_args(Status)
KINDS: tuple[str, ...] = get_args(Kind)
PRIORITIES: tuple[str, ...] = get_args(Priority)
APPLICABILITIES: tuple[str, ...] = get_args(Applicability)


class Rule(enum.Enum):
    """What a field's value must be (SPEC §2), one rule per field: the readers derive their
    checks from it, the strict path its error messages."""

    ID = "id"  # a non-empty printable string naming this event or its fact (not shared)
    NAME = "name"  # a non-empty printable string many events repeat (actor, tenant, key, ...)
    SCOPE = "scope"  # a name of the scope grammar: ``global`` or '/'-separated segments
    STAMP = "stamp"  # a timestamp (RFC 3339), in canonical UTC form once read
    VALUE = "value"  # a string, an integer within ±(2^53-1) or a boolean
    TEXT = "text"  # any string
    LEVEL = "level"  # a rung of one of the policy's ladders (authority, clearance)
    ONE_OF = "one of"  # one of the strings of the field's Literal type
    IDS = "ids"  # a list of non-empty strings (references to facts)
    NAMES = "names"  # a non-empty list of names (who a visibility lets see)
    VISIBILITY = "visibility"  # a ``Visibility`` object
    DERIVATION = "derivation"  # the text of a derivation (issue 29)
    DIGEST = "digest"  # 64 lowercase hex digits (issue 30)
    COUNT = "count"  # an integer >= 0
    ERASED = "erased"  # a non-empty list of ``ErasedValue`` objects (issue 30)


_RULE = "rule"  # the metadata key


def _rule(rule: Rule) -> Mapping[str, Rule]:
    return {_RULE: rule}


def rule_of(field: attrs.Attribute) -> Rule:  # type: ignore[type-arg]
    """The rule a field of the schema declares (a KeyError for a field that declares none)."""
    rule: Rule = field.metadata[_RULE]
    return rule


@attrs.frozen
class Visibility:
    """Who may see a fact: listed roles or actors (none listed: everyone) and a clearance bar."""

    roles: tuple[str, ...] | None = attrs.field(default=None, metadata=_rule(Rule.NAMES))
    actors: tuple[str, ...] | None = attrs.field(default=None, metadata=_rule(Rule.NAMES))
    clearance: str | None = attrs.field(default=None, metadata=_rule(Rule.LEVEL))


@attrs.frozen(kw_only=True)
class _Envelope:
    id: str = attrs.field(metadata=_rule(Rule.ID))
    ts: datetime = attrs.field(metadata=_rule(Rule.STAMP))
    actor: str = attrs.field(metadata=_rule(Rule.NAME))
    tenant: str = attrs.field(metadata=_rule(Rule.NAME))
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
    fact: str = attrs.field(metadata=_rule(Rule.ID))
    key: str = attrs.field(metadata=_rule(Rule.NAME))
    # None only for an erased value (issue 30): its ``commitment`` is then all that is left
    value: Value | None = attrs.field(default=None, metadata=_rule(Rule.VALUE))
    scope: str | None = attrs.field(default=None, metadata=_rule(Rule.SCOPE))
    status: Status | None = attrs.field(default=None, metadata=_rule(Rule.ONE_OF))
    authority: str | None = attrs.field(default=None, metadata=_rule(Rule.LEVEL))
    kind: Kind | None = attrs.field(default=None, metadata=_rule(Rule.ONE_OF))
    priority: Priority | None = attrs.field(default=None, metadata=_rule(Rule.ONE_OF))
    visibility: Visibility | None = attrs.field(default=None, metadata=_rule(Rule.VISIBILITY))
    valid_from: datetime | None = attrs.field(default=None, metadata=_rule(Rule.STAMP))
    valid_until: datetime | None = attrs.field(default=None, metadata=_rule(Rule.STAMP))
    depends_on: tuple[str, ...] | None = attrs.field(default=None, metadata=_rule(Rule.IDS))
    supersedes: tuple[str, ...] | None = attrs.field(default=None, metadata=_rule(Rule.IDS))
    # how a derived value is computed from its inputs (issue 29): text of gamma.core.terms.derivation
    derivation: str | None = attrs.field(default=None, metadata=_rule(Rule.DERIVATION))
    # the data subject the value is about, for erasure by subject (issue 30)
    subject: str | None = attrs.field(default=None, metadata=_rule(Rule.NAME))
    # a committed value (issue 30): 64 hex digits of a random 32-byte salt, and
    # ``commitment`` = SHA-256(salt || canonical value) (``gamma.core.integrity.commitment``); the chain and
    # the tree hash the event with ``commitment`` in place of ``value`` and ``salt``
    salt: str | None = attrs.field(default=None, metadata=_rule(Rule.DIGEST))
    commitment: str | None = attrs.field(default=None, metadata=_rule(Rule.DIGEST))


@attrs.frozen(kw_only=True)
class Retract(_Envelope):
    """Withdraws (cancels) a fact."""

    TYPE: ClassVar[str] = "retract"
    fact: str = attrs.field(metadata=_rule(Rule.ID))
    authority: str | None = attrs.field(default=None, metadata=_rule(Rule.LEVEL))
    reason: str | None = attrs.field(default=None, metadata=_rule(Rule.TEXT))


@attrs.frozen(kw_only=True)
class Promote(_Envelope):
    """Commits a draft or hypothetical fact."""

    TYPE: ClassVar[str] = "promote"
    fact: str = attrs.field(metadata=_rule(Rule.ID))
    authority: str | None = attrs.field(default=None, metadata=_rule(Rule.LEVEL))


@attrs.frozen(kw_only=True)
class _AccessChange(_Envelope):
    """What a grant and a revoke name: one target (a fact or a key) and one grantee (a role
    or an actor); ``PAIRS`` says exactly one of each pair is written."""

    PAIRS: ClassVar[tuple[tuple[str, str], ...]] = (("fact", "key"), ("role", "to_actor"))
    fact: str | None = attrs.field(default=None, metadata=_rule(Rule.ID))
    key: str | None = attrs.field(default=None, metadata=_rule(Rule.NAME))
    role: str | None = attrs.field(default=None, metadata=_rule(Rule.NAME))
    to_actor: str | None = attrs.field(default=None, metadata=_rule(Rule.NAME))
    authority: str | None = attrs.field(default=None, metadata=_rule(Rule.LEVEL))


@attrs.frozen(kw_only=True)
class Grant(_AccessChange):
    """Gives a role or an actor sight of one fact, or of every fact of a key, from ``ts`` on."""

    TYPE: ClassVar[str] = "grant"


@attrs.frozen(kw_only=True)
class Revoke(_AccessChange):
    """Ends an earlier matching grant from ``ts`` on."""

    TYPE: ClassVar[str] = "revoke"


@attrs.frozen(kw_only=True)
class Experience(_Envelope):
    """A recorded past action and the facts it relied on."""

    TYPE: ClassVar[str] = "experience"
    experience: str = attrs.field(metadata=_rule(Rule.ID))
    content: str = attrs.field(metadata=_rule(Rule.TEXT))
    uses: tuple[str, ...] | None = attrs.field(default=None, metadata=_rule(Rule.IDS))
    applicability: Applicability | None = attrs.field(default=None, metadata=_rule(Rule.ONE_OF))


@attrs.frozen
class ErasedValue:
    """One value an erase destroyed: its fact and the commitment that stays in the chain."""

    fact: str = attrs.field(metadata=_rule(Rule.ID))
    commitment: str = attrs.field(metadata=_rule(Rule.DIGEST))


@attrs.frozen(kw_only=True)
class Erase(_Envelope):
    """Destroys committed values for good (issue 30): names each by fact and commitment, carries
    none of them, and states the legal basis."""

    TYPE: ClassVar[str] = "erase"
    erased: tuple[ErasedValue, ...] = attrs.field(metadata=_rule(Rule.ERASED))
    basis: str = attrs.field(metadata=_rule(Rule.NAME))
    authority: str | None = attrs.field(default=None, metadata=_rule(Rule.LEVEL))


@attrs.frozen(kw_only=True)
class Migrate(_Envelope):
    """Closes an explicit migration to committed values (issue 30): the ``from_size`` events
    before it are those of the log whose chain head was ``from_head`` and whose Merkle root
    was ``from_root``, each with its value now committed. Γ folds nothing from it."""

    TYPE: ClassVar[str] = "migrate"
    from_head: str = attrs.field(metadata=_rule(Rule.DIGEST))
    from_root: str = attrs.field(metadata=_rule(Rule.DIGEST))
    from_size: int = attrs.field(metadata=_rule(Rule.COUNT))


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
