"""The case model: what a conformance case is, and the labels and tables it is checked against.

A case (DESIGN §9, SPEC.md §13) asks one governed question about one event log.
:class:`Case` and :class:`Expect` are the validated values; the suite, axis,
cell and mode tables are the vocabulary their labels are drawn from. Kept apart
from parsing (:mod:`gamma.conformance.parse`) and loading (:mod:`gamma.conformance.cases`) so both
can build on it without importing each other; :mod:`gamma.conformance.cases` re-exports
every public name here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from gamma.core.reading.events import event_to_json
from gamma.core.resolving.experiences import FACTORIAL_TABLE as GOVERNANCE_TABLE
from gamma.core.resolving.resolution import Resolution
from gamma.core.resolving.resolver import resolve
from gamma.core.terms.canonical import format_ts
from gamma.core.terms.model import Actor, Event
from gamma.core.terms.policy import DEFAULT_POLICY, Policy
from gamma.scoring.grading import Pool

__all__ = [
    "APPLICABILITY",
    "AXES",
    "CELLS",
    "DECIDERS",
    "FACTORIAL_CELLS",
    "GOVERNANCE",
    "MODES",
    "READER_NAMES",
    "SIDES",
    "SUITES",
    "VERDICTS",
    "Case",
    "Expect",
]

SUITES: tuple[str, ...] = ("counterfactual", "factorial", "trap", "adversarial", "imported")
SIDES: tuple[str, ...] = ("positive", "counterfactual")
AXES: tuple[str, ...] = (
    "access_control",
    "scope_binding",
    "actor_isolation",
    "temporal_validity",
    "supersession",
    "commitment_status",
    "dependency_validity",
)
GOVERNANCE: tuple[str, ...] = ("valid", "superseded", "outranked", "expired", "unauthorized", "draft")
APPLICABILITY: tuple[str, ...] = ("applicable", "adaptable", "unusable")
CELLS: tuple[str, ...] = tuple(f"{g}/{a}" for g in GOVERNANCE for a in APPLICABILITY)
VERDICTS: tuple[str, ...] = ("KEEP", "ADAPT", "REJECT")
MODES: tuple[str, ...] = ("status", "salience", "sequence", "compound", "anti-trap")
DECIDERS: tuple[str, ...] = ("engine", "model")

#: The governance paper's table (SPEC §7), flat: the verdict each factorial cell expects.
#: The built-in reader baselines by name (``readers.READERS`` implements exactly these);
#: a trap's ``signature`` names some of them.
READER_NAMES: tuple[str, ...] = (
    "reference", "latest-mention", "most-frequent", "no-recompute", "quote-stated",
    "eager-invalidation", "ungoverned", "always-refuse", "always-answer",
)  # fmt: skip

FACTORIAL_CELLS: Mapping[str, str] = MappingProxyType(
    {f"{g}/{a}": v for g, row in GOVERNANCE_TABLE.items() for a, v in row.items()}
)


def _frozen_map(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(sorted(value.items())))


@attrs.frozen(kw_only=True)
class Claimed:
    """What a system claims about a case at resolver level, in one shape for every system
    under test: Γ's resolution, or an external system's reply."""

    admitted: frozenset[str]
    excluded: Mapping[str, frozenset[str]]  # fact -> codes
    experiences: Mapping[str, str]  # experience -> verdict
    ignored: Mapping[str, frozenset[str]]  # event -> codes

    @classmethod
    def of(cls, resolution: Resolution) -> Claimed:
        ignored: dict[str, set[str]] = {}
        for item in resolution.ignored:
            ignored.setdefault(item.event, set()).add(item.code)
        return cls(
            admitted=frozenset(a.fact for a in resolution.admitted),
            excluded={x.fact: frozenset(x.codes) for x in resolution.excluded},
            experiences={v.experience: v.verdict for v in resolution.experiences},
            ignored={e: frozenset(c) for e, c in ignored.items()},
        )


@attrs.frozen(kw_only=True)
class Expect:
    """What Γ must decide. Listed expectations must hold; ``exact`` pins the admitted set.

    ``excluded`` maps a fact to codes it must carry (at least those); ``experiences`` maps
    an experience to its verdict; ``ignored`` maps an event to the code it is ignored with.
    """

    admitted: tuple[str, ...] = ()
    excluded: Mapping[str, tuple[str, ...]] = attrs.field(
        factory=dict, converter=_frozen_map, hash=False
    )
    experiences: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map, hash=False)
    ignored: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map, hash=False)
    exact: bool = False

    def mismatches(self, claimed: Claimed) -> tuple[str, ...]:
        """Every way a claimed outcome falls short of these expectations (empty: it holds)."""
        found: list[str] = []
        admitted, codes = claimed.admitted, claimed.excluded
        for fact in self.admitted:
            if fact not in admitted:
                why = sorted(codes[fact]) if fact in codes else "not in the log at t"
                found.append(f"admitted: {fact} is not admitted ({why})")
        if self.exact:
            extra = sorted(admitted - set(self.admitted))
            if extra:
                found.append(f"admitted: exact, but also admitted {extra}")
        for fact, wanted in self.excluded.items():
            if set(wanted) == {"tenant_isolation"} and fact not in codes and fact not in admitted:
                continue  # another tenant's fact is never listed (isolation is total)
            if fact not in codes:
                state = "admitted" if fact in admitted else "not in the log at t"
                found.append(f"excluded: {fact} is {state}, expected {list(wanted)}")
            elif not set(wanted) <= codes[fact]:
                missing = sorted(set(wanted) - codes[fact])
                found.append(f"excluded: {fact} lacks {missing} (has {sorted(codes[fact])})")
        for experience, verdict in self.experiences.items():
            got = claimed.experiences.get(experience)
            if got != verdict:
                found.append(f"experiences: {experience} is {got}, expected {verdict}")
        for event, code in self.ignored.items():
            if code not in claimed.ignored.get(event, frozenset()):
                found.append(f"ignored: {event} is not ignored with {code}")
        return tuple(found)

    def to_dict(self) -> dict[str, Any]:
        return {
            "admitted": list(self.admitted),
            "excluded": {f: list(c) for f, c in self.excluded.items()},
            "experiences": dict(self.experiences),
            "ignored": dict(self.ignored),
            "exact": self.exact,
        }


@attrs.frozen(kw_only=True)
class Case:
    """One conformance case, validated. ``events()`` gives its validated gamma events."""

    id: str
    suite: str
    actor: Actor
    at: datetime
    question: str = ""
    probe: tuple[str, ...] = ()
    expect: Expect = attrs.field(factory=Expect)
    pool: Pool | None = None
    policy: str | None = None
    log: str | None = attrs.field(default=None, eq=False)
    pair: str | None = None
    side: str | None = None
    axis: str | None = None
    decidable_by: str | None = None
    paper_decidable_by: str | None = None
    cell: str | None = None
    mode: str | None = None
    signature: tuple[str, ...] | None = None
    domain: str | None = None
    attack: str | None = None
    note: str | None = None
    path: Path | None = attrs.field(default=None, eq=False)
    line: int | None = attrs.field(default=None, eq=False)
    _events: tuple[Event, ...] = attrs.field(default=(), eq=False, repr=False, alias="events")
    _policy: Policy = attrs.field(
        default=DEFAULT_POLICY, eq=False, repr=False, alias="policy_object"
    )

    def events(self) -> tuple[Event, ...]:
        """The case's validated events (embedded, or read from its ``log`` file)."""
        return self._events

    def get_policy(self) -> Policy:
        """The policy the case runs under: ``policy`` resolved, else the built-in default."""
        return self._policy

    @property
    def verdict(self) -> str | None:
        """The factorial cell's expected verdict (SPEC §7), or None outside the factorial."""
        return FACTORIAL_CELLS.get(self.cell) if self.cell is not None else None

    def resolve(self) -> Resolution:
        """Γ(events, actor, at) under the case's policy: the reference resolution."""
        return resolve(self._events, self.actor, self.at, self._policy)

    def where(self) -> str:
        """``file:line`` of the case, for messages."""
        place = str(self.path) if self.path is not None else "<case>"
        return f"{place}:{self.line}" if self.line is not None else place

    def to_dict(self) -> dict[str, Any]:
        """The case as a JSON object, events embedded (a ``log`` is read in).

        ``parse_case(case.to_json(), path=case.path)`` gives back an equal case.
        """
        body: dict[str, Any] = {
            "id": self.id,
            "suite": self.suite,
            "events": [event_to_json(e) for e in self._events],
            "actor": _actor_json(self.actor),
            "at": format_ts(self.at),
            "question": self.question,
            "probe": list(self.probe),
            "expect": self.expect.to_dict(),
        }
        if self.pool is not None:
            body["pool"] = {
                "gold": list(self.pool.gold),
                "drift": list(self.pool.drift),
                "distractors": list(self.pool.distractors),
            }
        for name in ("policy", "pair", "side", "axis", "decidable_by", "paper_decidable_by",
                     "cell", "mode", "domain", "attack", "note"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.signature is not None:
            body["signature"] = list(self.signature)
        return body

    def request(self) -> dict[str, Any]:
        """What a system under test is given: no expectations, no pool, no labels.

        ``policy`` is the normalised policy object, so the receiver needs no file.
        """
        return {
            "id": self.id,
            "events": [event_to_json(e) for e in self._events],
            "actor": _actor_json(self.actor),
            "at": format_ts(self.at),
            "question": self.question,
            "probe": list(self.probe),
            "policy": self._policy.to_dict(),
        }


def _actor_json(actor: Actor) -> dict[str, Any]:
    return {
        "id": actor.id,
        "tenant": actor.tenant,
        "roles": list(actor.roles),
        "clearance": actor.clearance,
        "scope": actor.scope,
    }
