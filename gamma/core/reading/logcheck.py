"""The log's rules across events: unique ids, references to earlier facts of the same
tenant, non-decreasing ``ts``, and erasures of committed values (each named by its
commitment, once).

They run against a ``LogIndex``, so the store can answer the same questions with indexed
lookups instead of re-reading its whole log; a batch in memory is checked in one pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from gamma.core.integrity.commitment import commit
from gamma.core.terms.derivation import parse_derivation
from gamma.core.terms.errors import (
    CycleError,
    DuplicateIdError,
    TimestampOrderError,
    UnknownReferenceError,
    ValueTypeError,
)
from gamma.core.terms.model import Assert, Erase, Event, Experience, Migrate

__all__ = ["LogIndex", "MemoryIndex", "check_events", "commitment_of", "validate_log"]


class LogIndex(Protocol):
    """What log-level validation needs to know about the events already accepted."""

    def has_event(self, event_id: str) -> bool: ...
    def fact_tenant(self, fact_id: str) -> str | None: ...
    def fact_key(self, fact_id: str) -> str | None: ...
    def has_experience(self, experience_id: str) -> bool: ...
    def last_ts(self) -> datetime | None: ...
    # issue 30: what an erase is checked against
    def fact_commitment(self, fact_id: str) -> str | None:
        """The commitment of an accepted fact's value; None when the fact is plaintext (or
        not asserted)."""
    def erased_by(self, fact_id: str) -> str | None:
        """The id of the accepted erase event that names the fact, else None."""


def commitment_of(event: Assert) -> str | None:
    """An assert's commitment: as written, or computed from its value and salt; None for a
    plaintext value."""
    if event.commitment is not None:
        return event.commitment
    if event.salt is not None and event.value is not None:
        return commit(event.salt, event.value)
    return None


class MemoryIndex:
    """A LogIndex over events held in memory, filled as validation accepts them."""

    def __init__(self) -> None:
        self._events: set[str] = set()
        self._facts: dict[str, str] = {}
        self._keys: dict[str, str] = {}
        self._experiences: set[str] = set()
        self._last_ts: datetime | None = None
        self._commitments: dict[str, str] = {}
        self._erased: dict[str, str] = {}

    def has_event(self, event_id: str) -> bool:
        return event_id in self._events

    def fact_tenant(self, fact_id: str) -> str | None:
        return self._facts.get(fact_id)

    def fact_key(self, fact_id: str) -> str | None:
        return self._keys.get(fact_id)

    def has_experience(self, experience_id: str) -> bool:
        return experience_id in self._experiences

    def last_ts(self) -> datetime | None:
        return self._last_ts

    def fact_commitment(self, fact_id: str) -> str | None:
        return self._commitments.get(fact_id)

    def erased_by(self, fact_id: str) -> str | None:
        return self._erased.get(fact_id)

    def add(self, event: Event) -> None:
        self._events.add(event.id)
        if isinstance(event, Assert):
            self._facts[event.fact] = event.tenant
            self._keys[event.fact] = event.key
            if event.commitment is not None or event.salt is not None:
                found = commitment_of(event)
                if found is not None:
                    self._commitments[event.fact] = found
        elif isinstance(event, Experience):
            self._experiences.add(event.experience)
        elif isinstance(event, Erase):
            for item in event.erased:
                self._erased[item.fact] = event.id
        self._last_ts = event.ts


def validate_log(
    events: Iterable[tuple[int | None, Event]],
    *,
    index: LogIndex | None = None,
    source: str | None = None,
) -> None:
    """Check uniqueness, references and ``ts`` order of ``(line, event)`` pairs."""
    pairs = events if isinstance(events, list) else list(events)
    check_events([event for _, event in pairs], [line for line, _ in pairs], index=index, source=source)


def check_events(
    events: Sequence[Event],
    lines: Sequence[int | None] | None,
    *,
    index: LogIndex | None = None,
    source: str | None = None,
) -> tuple[Erase, ...]:
    """``validate_log`` of ``events``, where ``lines[i]`` is the line of ``events[i]`` (no
    ``lines``: line ``i + 1``, as for a log without blank lines). Returns the batch's erase
    events (Γ reads those of a whole log at every time: the reader keeps them found).

    ``index`` holds what was accepted before this batch (a store); nothing is
    added to it. One pass, with the batch's ids, facts and experiences in local
    sets and the index asked only about what the batch does not hold.
    """
    ids: set[str] = set()
    facts: dict[str, str] = {}  # fact -> tenant, of this batch
    keys: dict[str, str] = {}  # fact -> key, of this batch
    experiences: set[str] = set()
    commitments: dict[str, str] = {}  # fact -> commitment, of this batch's committed facts
    erased: dict[str, str] = {}  # fact -> erase event id, of this batch
    erases: list[Erase] = []
    last = index.last_ts() if index is not None else None

    def line_of(position: int) -> int | None:
        return lines[position] if lines is not None else position + 1

    def tenant_of(fact_id: str) -> str | None:
        found = facts.get(fact_id)
        if found is None and index is not None:
            found = index.fact_tenant(fact_id)
        return found

    def key_of(fact_id: str) -> str | None:
        found = keys.get(fact_id)
        if found is None and index is not None:
            found = index.fact_key(fact_id)
        return found

    def check_references(position: int, event: Event, name: str, listed: Any) -> None:
        """Each of ``listed`` is an earlier fact of the event's tenant (not its own fact)."""
        own = event.fact if isinstance(event, Assert) else None
        for place, target in enumerate(listed):
            if target != own and tenant_of(target) == event.tenant:
                continue
            field = f"{name}[{place}]" if name else "fact"
            later = _later_fact(events, line_of, position, target)
            _refuse_reference(target, own, tenant_of(target), later, line_of(position), field, source)

    for position, event in enumerate(events):
        event_id = event.id
        known = len(ids)
        ids.add(event_id)
        if len(ids) == known or (index is not None and index.has_event(event_id)):
            raise DuplicateIdError(
                f"event id {event_id!r} is already used",
                source=source, line=line_of(position), field="id",
            )
        ts = event.ts
        if last is not None and ts < last:
            raise TimestampOrderError(
                "ts goes backwards along the log", source=source, line=line_of(position), field="ts"
            )
        last = ts
        if isinstance(event, Assert):
            own = event.fact
            if own in facts or (index is not None and index.fact_tenant(own) is not None):
                raise DuplicateIdError(
                    f"fact id {own!r} is already asserted",
                    source=source, line=line_of(position), field="fact",
                )
            if event.supersedes:
                check_references(position, event, "supersedes", event.supersedes)
            if event.depends_on:
                check_references(position, event, "depends_on", event.depends_on)
            if event.derivation is not None:
                _check_inputs(event, key_of, line_of(position), source)
            facts[own] = event.tenant
            keys[own] = event.key
            if event.commitment is not None or event.salt is not None:
                committed = commitment_of(event)
                if committed is not None:
                    commitments[own] = committed
        elif isinstance(event, Experience):
            experience = event.experience
            if experience in experiences or (
                index is not None and index.has_experience(experience)
            ):
                raise DuplicateIdError(
                    f"experience id {experience!r} is already used",
                    source=source, line=line_of(position), field="experience",
                )
            if event.uses:
                check_references(position, event, "uses", event.uses)
            experiences.add(experience)
        elif isinstance(event, Erase):
            for place, item in enumerate(event.erased):
                _check_erased(
                    event, place, tenant_of(item.fact),
                    commitments.get(item.fact) or (
                        index.fact_commitment(item.fact) if index is not None else None
                    ),
                    erased.get(item.fact) or (
                        index.erased_by(item.fact) if index is not None else None
                    ),
                    line_of(position), source,
                )
                erased[item.fact] = event.id
            erases.append(event)
        elif isinstance(event, Migrate):
            pass  # names no fact
        elif event.fact is not None:
            check_references(position, event, "", (event.fact,))
    return tuple(erases)


def _check_erased(
    event: Erase,
    place: int,
    tenant: str | None,
    committed: str | None,
    erased_by: str | None,
    line: int | None,
    source: str | None,
) -> None:
    """One value an erase names (``erased[place]``): an earlier fact of the erase's tenant
    (the same error whether it is another tenant's or nobody's: an erase learns nothing of
    other tenants), committed, under the commitment named, and not erased before."""
    item = event.erased[place]
    field = f"erased[{place}].fact"
    if tenant != event.tenant:
        raise UnknownReferenceError(
            f"fact {item.fact!r} is not asserted earlier in tenant {event.tenant!r}",
            source=source, line=line, field=field,
        )
    if committed is None:
        raise ValueTypeError(
            f"fact {item.fact!r}: its value is not committed: only committed values can be erased",
            source=source, line=line, field=field,
        )
    if item.commitment != committed:
        raise ValueTypeError(
            f"is not the commitment of fact {item.fact!r} ({committed})",
            source=source, line=line, field=f"erased[{place}].commitment",
        )
    if erased_by is not None:
        raise ValueTypeError(
            f"fact {item.fact!r} is already erased by {erased_by!r}",
            source=source, line=line, field=field,
        )


def _check_inputs(
    event: Assert, key_of: Callable[[str], str | None], line: int | None, source: str | None
) -> None:
    """Each input of a derivation names a fact of ``depends_on`` or the key of exactly one of
    them, the dependencies' keys read from the batch or, for earlier ones, the index (a store
    answers from its key column: an append never accepts what its reader would refuse)."""
    assert event.derivation is not None
    depends_on = event.depends_on or ()
    for name in parse_derivation(event.derivation).inputs:
        if name in depends_on:
            continue
        holders = [dep for dep in dict.fromkeys(depends_on) if key_of(dep) == name]
        if len(holders) != 1:
            detail = "no fact" if not holders else f"{len(holders)} facts"
            raise UnknownReferenceError(
                f"input {{{name}}} names {detail} of depends_on (by fact id or key)",
                source=source, line=line, field="derivation",
            )


def _later_fact(
    events: Sequence[Event], line_of: Callable[[int], int | None], position: int, target: str
) -> int | None:
    """The line of the last later event that asserts ``target``, if any (for the message)."""
    for later in range(len(events) - 1, position, -1):
        event = events[later]
        if isinstance(event, Assert) and event.fact == target:
            return line_of(later)
    return None


def _refuse_reference(
    target: str,
    own: str | None,
    tenant: str | None,
    later: int | None,
    line: int | None,
    field: str,
    source: str | None,
) -> None:
    """Raise the error for a reference that is not to an earlier fact of the same tenant."""
    if target == own:
        raise CycleError(f"fact {target!r} refers to itself", source=source, line=line, field=field)
    if tenant is None:
        detail = f"is asserted later (line {later})" if later is not None else "is not asserted"
        raise UnknownReferenceError(
            f"fact {target!r} {detail}", source=source, line=line, field=field
        )
    raise UnknownReferenceError(
        f"fact {target!r} belongs to another tenant", source=source, line=line, field=field
    )
